/* pipette: the plan as NeMo 2.0 recipe overrides, in the form
 * `nemo llm pretrain --factory RECIPE(ARGS) KEY=VALUE ...` and NeMo-Run's
 * dotted overrides accept: the performance recipe of the model (the nemo
 * stack's facts are those recipes'), the strategy's parallel sizes and
 * pipeline split, the data module's batch sizes and sequence length, the
 * model config's recomputation, the DDP overlap, the precision plugin's
 * gradient dtype and recipe, and the comm-overlap callback's TP overlap and
 * embedding-wgrad deferral, so that the recipe runs what the prediction
 * assumes.  The keys and where NeMo defines them: tests/data/stacks/
 * nemo.md, nemo-keys.tsv; the rules the line obeys: launch-rules.tsv. */
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"

static const char *py_bool(int b)
{
	return b ? "True" : "False";
}

/* NeMo's performance recipe for each of pipette's presets it has one for
 * (NVIDIA/NeMo @8cfedd72 nemo/collections/llm/recipes/: each file's NAME
 * and @run.cli.factory(target=pretrain), pretrain_recipe's num_nodes,
 * num_gpus_per_node and performance_mode arguments), and where
 * performance_mode=True leaves its callbacks in trainer.callbacks: the
 * list starts as [TimingCallback] and the performance optimizations
 * extend or append it (the line pairs below).  The last
 * MegatronCommOverlapCallback in the list is the one whose settings stay
 * (each callback's setup writes all of its fields onto the model config
 * in list order: nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py
 * :258-288); DeepSeek-V3's recipe has two.  Mixtral's adds a
 * MegatronTokenDropCallback, whose capacity factor replaces the model
 * config's (moe_token_drop.py:36-49; < 0 means dropless). */
static const struct nemo_recipe {
	const char *model, *recipe;
	int overlap_cb;		/* index of the last MegatronCommOverlapCallback */
	int token_drop_cb;	/* index of MegatronTokenDropCallback, or -1 */
} nemo_recipes[] = {
	{ "llama2-7b", "llama2_7b", 1, -1 },		/* llama2_7b.py:186, 217-222 */
	{ "llama3-8b", "llama3_8b", 2, -1 },		/* llama3_8b.py:188, 231-236 */
	{ "llama3-70b", "llama3_70b", 2, -1 },		/* llama3_70b.py:190, 239-244 */
	{ "llama3-405b", "llama31_405b", 2, -1 },	/* llama31_405b.py:197, 246-251 */
	{ "gpt3-175b", "gpt3_175b", 2, -1 },		/* gpt3_175b.py:188, 237-242 */
	{ "mixtral-8x7b", "mixtral_8x7b", 3, 1 },	/* mixtral_8x7b.py:182, 224-230 */
	{ "nemotron4-15b", "nemotron4_15b", 2, -1 },	/* nemotron4_15b.py:159, 215-220 */
	{ "nemotron4-340b", "nemotron4_340b", 2, -1 },	/* nemotron4_340b.py:159, 219-224 */
	{ "deepseek-v3", "deepseek_v3", 5, -1 },	/* deepseek_v3.py:106, 149-151, 188-193 */
};

static const struct nemo_recipe *recipe_of(const char *model)
{
	size_t i;

	for (i = 0; i < sizeof(nemo_recipes) / sizeof(nemo_recipes[0]); i++)
		if (!strcmp(model, nemo_recipes[i].model))
			return &nemo_recipes[i];
	return NULL;
}

/* Selective recomputation, with the modules as a Python list of quoted
 * names: NeMo-Run parses a List[str] field with ast.literal_eval
 * (NVIDIA/NeMo-Run @0c491271 nemo_run/cli/cli_parser.py:854-874), which
 * refuses bare names. */
static void recompute_keys(const struct pipette_config *c, struct pipette_args *a)
{
	char mods[200];

	pipette_arg(a, " model.config.recompute_granularity=selective");
	if (!c->recompute_modules)
		return;
	pipette_recompute_modules_format(c->recompute_modules, "\",\"", mods, sizeof(mods));
	pipette_arg(a, " model.config.recompute_modules=[\"%s\"]", mods);
}

/* The pipeline split, every key of it, so that the recipe's own values
 * cannot collide with the plan's (Megatron-Core refuses a layout with
 * first/last-stage counts or the embedding/loss accounting, and the
 * counts with the accounting: megatron-rules.tsv layout-exclusive,
 * uneven-vs-account); NVIDIA's DeepSeek-V3 script clears them the same
 * way once it sets a layout (NVIDIA/NeMo @8cfedd72 scripts/performance/
 * llm/pretrain_deepseek_v3.py:119-123). */
static void split_keys(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;

	if (pipette_plan_uses_layout(plan)) {
		pipette_arg(a, " trainer.strategy.pipeline_model_parallel_layout=");
		pipette_plan_layout(plan, a);
	} else
		pipette_arg(a, " trainer.strategy.pipeline_model_parallel_layout=None");
	if (!pipette_plan_uses_layout(plan) && c->first_stage_layers > 0)
		pipette_arg(a, " trainer.strategy.num_layers_in_first_pipeline_stage=%d",
			    c->first_stage_layers);
	else
		pipette_arg(a, " trainer.strategy.num_layers_in_first_pipeline_stage=None");
	if (!pipette_plan_uses_layout(plan) && c->last_stage_layers > 0)
		pipette_arg(a, " trainer.strategy.num_layers_in_last_pipeline_stage=%d",
			    c->last_stage_layers);
	else
		pipette_arg(a, " trainer.strategy.num_layers_in_last_pipeline_stage=None");
	pipette_arg(a, " trainer.strategy.account_for_embedding_in_pipeline_split=False "
		    "trainer.strategy.account_for_loss_in_pipeline_split=False");
}

/* What the performance recipe's comm-overlap callback sets, as the plan's
 * timing assumes it: userbuffers TP overlap where the stack prices TP
 * communication as partly hidden (the callback turns it off itself at
 * TP 1 or without sequence parallelism, megatron_comm_overlap.py:141-151),
 * and the deferred embedding wgrad with the stack's limit where there is
 * a pipeline (Megatron-Core refuses it without: megatron-rules.tsv
 * defer-wgrad-pp).  The callbacks' other fields keep the recipe's. */
static void callback_keys(const struct pipette_plan *plan, const struct nemo_recipe *r,
			  struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;
	int defer = plan->stack.wgrad_deferral_limit > 0 && c->pp > 1;

	pipette_arg(a, " trainer.callbacks[%d].tp_comm_overlap=%s", r->overlap_cb,
		    py_bool(pipette_stack_tp_exposed(&plan->stack, c) < 1));
	pipette_arg(a, " trainer.callbacks[%d].defer_embedding_wgrad_compute=%s", r->overlap_cb,
		    py_bool(defer));
	if (defer)
		pipette_arg(a, " trainer.callbacks[%d].wgrad_deferral_limit=%d", r->overlap_cb,
			    plan->stack.wgrad_deferral_limit);
	if (r->token_drop_cb >= 0)
		pipette_arg(a, " trainer.callbacks[%d].moe_expert_capacity_factor=%g "
			    "trainer.callbacks[%d].moe_pad_expert_input_to_capacity=%s",
			    r->token_drop_cb, c->moe.capacity_factor > 0 ? c->moe.capacity_factor : -1.0,
			    r->token_drop_cb, py_bool(c->moe.capacity_factor > 0 && c->moe.pad));
}

/* 0 when NeMo runs what the plan's stack assumes; else 1 with the stack
 * and the setting NeMo would run differently in buf. */
static int nemo_refuses(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	const char *st = plan->stack.name;

	if (plan->stack.form != PIPETTE_FORM_NEMO && plan->stack.form != PIPETTE_FORM_MEGATRON)
		return snprintf(buf, len, "the plan was made for stack %s (%s), which NeMo does "
				"not run: plan with --stack nemo", st, plan->stack.what), 1;
	if (c->schedule != PIPETTE_SCHED_1F1B && c->schedule != PIPETTE_SCHED_INTERLEAVED)
		return snprintf(buf, len, "stack %s: NeMo does not run schedule %s", st,
				pipette_schedule_name(c->schedule)), 1;
	if (c->attention == PIPETTE_ATTN_UNFUSED)
		return snprintf(buf, len, "stack %s: --attention unfused has no NeMo key (NeMo's "
				"recipes run fused attention)", st), 1;
	if (c->compress.pp_rank || c->compress.dp_rank || c->compress.fused_embedding)
		return snprintf(buf, len, "stack %s: Optimus-CC compression exists only in its "
				"Megatron-LM fork", st), 1;
	/* the performance recipe's token-drop callback asserts the
	 * all-to-all dispatcher (moe_token_drop.py:59-62) */
	if (recipe_of(plan->model.name) && recipe_of(plan->model.name)->token_drop_cb >= 0 &&
	    c->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP)
		return snprintf(buf, len, "stack %s: NeMo's %s recipe drops tokens in a callback "
				"that asserts the alltoall dispatcher, not DeepEP: pin --dispatcher "
				"alltoall", st, recipe_of(plan->model.name)->recipe), 1;
	if (!recipe_of(plan->model.name))
		return snprintf(buf, len, "stack %s: NeMo has no performance recipe for model %s "
				"(the nemo form names one: llama2-7b, llama3-8b, llama3-70b, "
				"llama3-405b, gpt3-175b, mixtral-8x7b, nemotron4-15b, "
				"nemotron4-340b, deepseek-v3)", st, plan->model.name), 1;
	return 0;
}

/* The MoE execution (nemo-keys.tsv, MoE rows): the dispatcher as NeMo's
 * DeepSeek-V3 recipe sets DeepEP (flex with moe_enable_deepep), capacity,
 * the combined-1F1B overlap. */
static void moe_keys(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;

	if (c->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP)
		pipette_arg(a, " model.config.moe_token_dispatcher_type=flex "
			    "model.config.moe_enable_deepep=True");
	else
		pipette_arg(a, " model.config.moe_token_dispatcher_type=alltoall");
	if (c->moe.capacity_factor > 0)
		pipette_arg(a, " model.config.moe_expert_capacity_factor=%g "
			    "model.config.moe_pad_expert_input_to_capacity=%s",
			    c->moe.capacity_factor, py_bool(c->moe.pad));
	pipette_arg(a, " model.config.overlap_moe_expert_parallel_comm=%s",
		    py_bool(c->moe.ep_overlap));
}

/* The precision recipe as the precision plugin's arguments, set the way
 * NeMo's own recipes set them (nemo/collections/llm/recipes/precision/
 * mixed_precision.py @8cfedd72: bf16_with_fp8_mixed :56-71, _mxfp8_
 * :92-103, _fp8_current_scaling_ :120-138, _fp8_subchannel_scaling_
 * :204-216: hybrid FP8, parameters gathered in FP8 but with blockwise
 * scales); NVFP4 as the plugin's fp4 arguments, which NeMo copies onto
 * Megatron-Core's config (that release has no NVFP4 recipe and no FP4
 * parameter gather).  nemo-keys.tsv has each key's line. */
static const char *const fp8_recipes[PIPETTE_PREC_COUNT] = {
	[PIPETTE_PREC_FP8_DELAYED] = "delayed", [PIPETTE_PREC_FP8_CURRENT] = "tensorwise",
	[PIPETTE_PREC_FP8_BLOCKWISE] = "blockwise", [PIPETTE_PREC_MXFP8] = "mxfp8",
};

static void precision_keys(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;
	int gather = pipette_stack_gathers_lowp(&plan->stack, c->precision);

	if (c->precision == PIPETTE_PREC_NVFP4)
		pipette_arg(a, " trainer.plugins.fp4=e2m1 trainer.plugins.fp4_recipe=nvfp4");
	else if (fp8_recipes[c->precision]) {
		pipette_arg(a, " trainer.plugins.fp8=hybrid trainer.plugins.fp8_recipe=%s "
			    "trainer.plugins.fp8_param_gather=%s", fp8_recipes[c->precision],
			    py_bool(gather));
		if (gather && c->precision == PIPETTE_PREC_MXFP8)
			pipette_arg(a, " trainer.plugins.reuse_grad_buf_for_mxfp8_param_ag=True");
	} else {
		a->bad = c->precision != PIPETTE_PREC_BF16;	/* refused by the stack first */
		return;
	}
	if (c->bf16_first > 0 || c->bf16_last > 0)
		pipette_arg(a, " trainer.plugins.first_last_layers_bf16=True "
			    "trainer.plugins.num_layers_at_start_in_bf16=%d "
			    "trainer.plugins.num_layers_at_end_in_bf16=%d", c->bf16_first, c->bf16_last);
}

/* 0, 1 when NeMo cannot run the plan as its stack assumes (buf says
 * why), -1 when buf is too small. */
int pipette_plan_nemo_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	const struct pipette_stack *st = &plan->stack;
	struct pipette_args a = { buf, len, 0, 0 };
	const struct nemo_recipe *r = recipe_of(plan->model.name);

	if (!len)
		return -1;
	buf[0] = '\0';
	if (nemo_refuses(plan, buf, len))
		return 1;
	pipette_arg(&a, "--factory %s(num_nodes=%d,num_gpus_per_node=%d,performance_mode=True)",
		    r->recipe, plan->nodes, plan->G);
	pipette_arg(&a, " trainer.strategy.tensor_model_parallel_size=%d "
		    "trainer.strategy.pipeline_model_parallel_size=%d "
		    "trainer.strategy.context_parallel_size=%d", c->tp, c->pp, c->cp);
	if (c->schedule == PIPETTE_SCHED_INTERLEAVED)
		pipette_arg(&a, " trainer.strategy.virtual_pipeline_model_parallel_size=%d",
			    c->vpp);
	else
		pipette_arg(&a, " trainer.strategy.virtual_pipeline_model_parallel_size=None");
	if (plan->model.experts)
		pipette_arg(&a, " trainer.strategy.expert_model_parallel_size=%d "
			    "trainer.strategy.expert_tensor_parallel_size=%d", c->ep, c->etp);
	if (plan->model.experts)
		moe_keys(plan, &a);
	split_keys(plan, &a);
	if (plan->model.mtp_layers)
		pipette_arg(&a, " model.config.mtp_num_layers=%d", plan->model.mtp_layers);
	pipette_arg(&a, " trainer.strategy.sequence_parallel=%s", py_bool(c->sequence_parallel));
	pipette_arg(&a, " data.micro_batch_size=%d data.global_batch_size=%ld "
		    "data.seq_length=%ld model.config.seq_length=%ld", c->micro_batch,
		    c->global_batch, c->seq_len, c->seq_len);
	if (c->recompute == PIPETTE_RECOMPUTE_NONE)
		pipette_arg(&a, " model.config.recompute_granularity=None");
	else if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE)
		recompute_keys(c, &a);
	else
		pipette_arg(&a, " model.config.recompute_granularity=full "
			    "model.config.recompute_method=uniform "
			    "model.config.recompute_num_layers=1");
	pipette_arg(&a, " optim.config.use_distributed_optimizer=%s",
		    py_bool(c->distributed_optimizer));
	pipette_arg(&a, " trainer.strategy.ddp.overlap_grad_reduce=%s", py_bool(st->dp_overlap));
	pipette_arg(&a, " trainer.strategy.ddp.overlap_param_gather=%s",
		    py_bool(st->dp_overlap && c->distributed_optimizer));
	pipette_arg(&a, " trainer.plugins.grad_reduce_in_fp32=%s", py_bool(st->grad_bytes == 4));
	precision_keys(plan, &a);
	callback_keys(plan, r, &a);
	return !a.bad && a.n < len ? 0 : -1;
}

int pipette_plan_launch_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	if (plan->stack.form == PIPETTE_FORM_NEMO)
		return pipette_plan_nemo_args(plan, buf, len);
	if (plan->stack.form == PIPETTE_FORM_BRIDGE)
		return pipette_plan_bridge_args(plan, buf, len);
	if (plan->stack.form == PIPETTE_FORM_TORCHTITAN)
		return pipette_plan_torchtitan_args(plan, buf, len);
	if (plan->stack.form == PIPETTE_FORM_NONE) {
		if (len)
			buf[0] = '\0';
		return 1;
	}
	return pipette_plan_megatron_args(plan, buf, len);
}
