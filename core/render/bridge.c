/* pipette: the plan as Megatron-Bridge's performance run script takes it
 * (NVIDIA-NeMo/Megatron-Bridge @067f987d scripts/performance/).  Every rank
 * runs `python scripts/performance/bootstrap.py ARGS` (setup_experiment.py
 * :67, 149-165 builds that command), which reads ARGS with the script's
 * argparse parser and hands what it does not know to Hydra as overrides of
 * the ConfigContainer (bootstrap.py:63-69, run_script.py:59-94,
 * utils/overrides.py:404-421, src/megatron/bridge/training/utils/
 * omegaconf_utils.py:163-186).  The argparse options select the flat
 * performance recipe by model, GPU, GPU count and precision (-m, -mr, -g,
 * -ng, -c: utils/utils.py:447-458, 524-544) and set what the script sets
 * best itself (batch sizes, sequence length, the pipeline layout as a plain
 * string, recompute modules, the MoE dispatcher); the Hydra overrides, in
 * the config's own names (docs/megatron-lm-to-megatron-bridge.md:53-128),
 * set the rest of what the plan's prediction assumes.  The keys and the
 * values written: tests/data/stacks/bridge-keys.tsv; the rules the line
 * obeys: launch-rules.tsv. */
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"

/* Hydra's literals (its override grammar: true, false, null). */
static const char *hy_bool(int b)
{
	return b ? "true" : "false";
}

/* The flat performance recipes for pipette's presets: -m and -mr, and
 * whether an fp8_sc (blockwise) recipe exists on H100.  Every one of them
 * has bf16 and fp8cs recipes on H100 and bf16, fp8cs, fp8mx and nvfp4 ones
 * on B200, B300, GB200 and GB300 (src/megatron/bridge/perf_recipes/llama/
 * {h100,b200,b300,gb200,gb300}/llama3.py, llama31.py, deepseek/.../
 * deepseek_v3.py: the *_pretrain_<N>gpu_<gpu>_<dtype>_config functions;
 * deepseek_v3_pretrain_1024gpu_h100_fp8sc_config at deepseek/h100/
 * deepseek_v3.py:126). */
static const struct bridge_recipe {
	const char *model, *family, *recipe;
	int hopper_blockwise;
} bridge_recipes[] = {
	{ "llama3-8b", "llama", "llama3_8b", 0 },
	{ "llama3-70b", "llama", "llama3_70b", 0 },
	{ "llama3-405b", "llama", "llama31_405b", 0 },
	{ "deepseek-v3", "deepseek", "deepseek_v3", 1 },
};

static const struct bridge_recipe *recipe_of(const char *model)
{
	size_t i;

	for (i = 0; i < sizeof(bridge_recipes) / sizeof(bridge_recipes[0]); i++)
		if (!strcmp(model, bridge_recipes[i].model))
			return &bridge_recipes[i];
	return NULL;
}

/* -g: the script's GPU names (argument_parser.py:30-38, 686-693) for the
 * GPU types pipette knows and Megatron-Bridge has recipes for; NULL for
 * the others (H200, H800, A100: no flat recipe, no -g choice). */
static const char *gpu_arg(const struct pipette_gpu_spec *g)
{
	static const struct { const char *prefix, *arg; } gpus[] = {
		{ "H100-", "h100" }, { "B200-", "b200" }, { "B300-", "b300" },
		{ "GB200-", "gb200" }, { "GB300-", "gb300" },
	};
	size_t i;

	for (i = 0; i < sizeof(gpus) / sizeof(gpus[0]); i++)
		if (!strncmp(g->name, gpus[i].prefix, strlen(gpus[i].prefix)))
			return gpus[i].arg;
	return NULL;
}

/* -c: the script's precision for the plan's recipe (argument_parser.py
 * :694-702; stack.c BRIDGE_PRECISIONS has what each selects). */
static const char *const dtype_args[PIPETTE_PREC_COUNT] = {
	[PIPETTE_PREC_BF16] = "bf16", [PIPETTE_PREC_FP8_CURRENT] = "fp8_cs",
	[PIPETTE_PREC_FP8_BLOCKWISE] = "fp8_sc", [PIPETTE_PREC_MXFP8] = "fp8_mx",
	[PIPETTE_PREC_NVFP4] = "nvfp4",
};

/* A flat recipe exists for the model, GPU and precision. */
static int has_recipe(const struct bridge_recipe *r, const struct pipette_gpu_spec *g,
		      enum pipette_precision p)
{
	int blackwell = g->fp4_tflops > 0;

	if (p == PIPETTE_PREC_BF16 || p == PIPETTE_PREC_FP8_CURRENT)
		return 1;
	if (p == PIPETTE_PREC_FP8_BLOCKWISE)
		return !blackwell && r->hopper_blockwise;
	return blackwell && (p == PIPETTE_PREC_MXFP8 || p == PIPETTE_PREC_NVFP4);
}

/* The EP all-to-all overlap's own checks (src/megatron/bridge/training/
 * comm_overlap.py:478-517, which mirror Megatron-Core's): a virtual
 * pipeline when PP > 1, no full recomputation, no "moe" module. */
static int ep_overlap_refuses(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;

	if (!c->moe.ep_overlap)
		return 0;
	if (c->pp > 1 && c->schedule != PIPETTE_SCHED_INTERLEAVED)
		return snprintf(buf, len, "stack %s: Megatron-Bridge's EP all-to-all overlap needs a "
				"virtual pipeline with PP > 1", plan->stack.name), 1;
	if (c->recompute == PIPETTE_RECOMPUTE_FULL || (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE &&
						       (c->recompute_modules & PIPETTE_RM_MOE)))
		return snprintf(buf, len, "stack %s: Megatron-Bridge's EP all-to-all overlap refuses "
				"full recomputation and the moe recompute module", plan->stack.name), 1;
	return 0;
}

/* 0 when Megatron-Bridge's run script runs what the plan's stack assumes;
 * else 1 with the stack and the reason in buf. */
static int bridge_refuses(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	const struct bridge_recipe *r = recipe_of(plan->model.name);
	const char *st = plan->stack.name;

	if (plan->stack.form != PIPETTE_FORM_BRIDGE)
		return snprintf(buf, len, "the plan was made for stack %s (%s), not for "
				"Megatron-Bridge's recipes: plan with --stack megatron-bridge", st,
				plan->stack.what), 1;
	if (c->schedule != PIPETTE_SCHED_1F1B && c->schedule != PIPETTE_SCHED_INTERLEAVED)
		return snprintf(buf, len, "stack %s: Megatron-Bridge does not run schedule %s", st,
				pipette_schedule_name(c->schedule)), 1;
	if (c->attention == PIPETTE_ATTN_UNFUSED || c->compress.pp_rank || c->compress.dp_rank ||
	    c->compress.fused_embedding)
		return snprintf(buf, len, "stack %s: unfused attention and Optimus-CC compression "
				"have no Megatron-Bridge setting", st), 1;
	if (!r)
		return snprintf(buf, len, "stack %s: Megatron-Bridge has no performance recipe for "
				"model %s (its run script selects one for llama3-8b, llama3-70b, "
				"llama3-405b, deepseek-v3)", st, plan->model.name), 1;
	if (!gpu_arg(plan->gpu))
		return snprintf(buf, len, "stack %s: Megatron-Bridge has no performance recipe for "
				"GPU %s (its run script's -g takes h100, b200, b300, gb200, gb300)", st,
				plan->gpu->name), 1;
	if (!dtype_args[c->precision] || !has_recipe(r, plan->gpu, c->precision))
		return snprintf(buf, len, "stack %s: Megatron-Bridge has no performance recipe for "
				"%s on %s in %s (its run script selects one by -mr, -g and -c)", st,
				r->recipe, gpu_arg(plan->gpu), pipette_precision_name(c->precision)), 1;
	return ep_overlap_refuses(plan, buf, len);
}

/* The pipeline split, every key of it, so that a flat recipe's own layout
 * (perf_recipes/llama/h100/llama3.py:170) or stage counts cannot collide
 * with the plan's (Megatron-Core refuses a layout with first/last-stage
 * counts or the embedding/loss accounting: megatron-rules.tsv
 * layout-exclusive, uneven-vs-account).  A layout goes through the
 * script's own string option, which Hydra's grammar does not parse
 * (overrides.py:597-609). */
static void split_keys(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;
	int layout = pipette_plan_uses_layout(plan);

	pipette_arg(a, " model.pipeline_model_parallel_layout=null");
	if (!layout && c->first_stage_layers > 0)
		pipette_arg(a, " model.num_layers_in_first_pipeline_stage=%d", c->first_stage_layers);
	else
		pipette_arg(a, " model.num_layers_in_first_pipeline_stage=null");
	if (!layout && c->last_stage_layers > 0)
		pipette_arg(a, " model.num_layers_in_last_pipeline_stage=%d", c->last_stage_layers);
	else
		pipette_arg(a, " model.num_layers_in_last_pipeline_stage=null");
	pipette_arg(a, " model.account_for_embedding_in_pipeline_split=false "
		    "model.account_for_loss_in_pipeline_split=false");
	if (layout) {
		pipette_arg(a, " --pipeline_model_parallel_layout ");
		pipette_plan_layout(plan, a);
	}
}

/* Recomputation: the recipe's granularity, method and layer count are all
 * set (a flat recipe may carry full/block/5, perf_recipes/llama/h100/
 * llama3.py:87-89); selective names its modules through the script's
 * comma-separated --recompute_modules (argument_parser.py:863-868,
 * overrides.py:163-186), "core_attn" being Megatron-Core's default. */
static void recompute_keys(const struct pipette_config *c, struct pipette_args *a)
{
	char mods[200];

	if (c->recompute == PIPETTE_RECOMPUTE_FULL) {
		pipette_arg(a, " model.recompute_granularity=full model.recompute_method=uniform "
			    "model.recompute_num_layers=1");
		return;
	}
	pipette_arg(a, " model.recompute_granularity=%s model.recompute_method=null "
		    "model.recompute_num_layers=null",
		    c->recompute == PIPETTE_RECOMPUTE_SELECTIVE ? "selective" : "null");
	if (c->recompute != PIPETTE_RECOMPUTE_SELECTIVE)
		return;
	if (c->recompute_modules)
		pipette_recompute_modules_format(c->recompute_modules, ",", mods, sizeof(mods));
	else
		snprintf(mods, sizeof(mods), "core_attn");
	pipette_arg(a, " --recompute_modules %s", mods);
}

/* MoE: the dispatcher through the script's option (None: alltoall,
 * deepep: the flex dispatcher with DeepEP; argument_parser.py:869-878,
 * overrides.py:629-633), the all-to-all overlap as CommOverlapConfig
 * takes it (with delay_wgrad_compute and without the shared-expert
 * overlap, as the script's --moe_a2a_overlap sets them, overrides.py
 * :189-199), the capacity. */
static void moe_keys(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;

	pipette_arg(a, " model.expert_model_parallel_size=%d model.expert_tensor_parallel_size=%d",
		    c->ep, c->etp);
	pipette_arg(a, " --moe_flex_dispatcher_backend %s",
		    c->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP ? "deepep" : "None");
	pipette_arg(a, " comm_overlap.overlap_moe_expert_parallel_comm=%s "
		    "comm_overlap.delay_wgrad_compute=%s", hy_bool(c->moe.ep_overlap),
		    hy_bool(c->moe.ep_overlap));
	if (c->moe.ep_overlap)
		pipette_arg(a, " model.moe_shared_expert_overlap=false");
	if (c->moe.capacity_factor > 0)
		pipette_arg(a, " model.moe_expert_capacity_factor=%g "
			    "model.moe_pad_expert_input_to_capacity=%s", c->moe.capacity_factor,
			    hy_bool(c->moe.pad));
	else
		pipette_arg(a, " model.moe_expert_capacity_factor=null "
			    "model.moe_pad_expert_input_to_capacity=false");
}

/* The precision: the fields of MixedPrecisionConfig (training/
 * mixed_precision.py:32-75) that the recipe -c selected sets, as the
 * plan's memory model assumes them: FP8 parameters gathered but with
 * blockwise scales, and MXFP8's gather into the gradient buffer, which the
 * config asserts (training/config.py:1490-1497); NVFP4's parameters
 * gathered in BF16 (pipette prices no FP4 gather: estimate/memory.c
 * lowp_weight_bytes); the BF16 end layers the plan keeps. */
static void precision_keys(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;
	int gather = pipette_stack_gathers_lowp(&plan->stack, c->precision);

	pipette_arg(a, " mixed_precision.grad_reduce_in_fp32=%s ddp.grad_reduce_in_fp32=%s",
		    hy_bool(plan->stack.grad_bytes == 4), hy_bool(plan->stack.grad_bytes == 4));
	if (c->precision == PIPETTE_PREC_BF16)
		return;
	if (c->precision == PIPETTE_PREC_NVFP4)
		pipette_arg(a, " mixed_precision.fp4_param_gather=false");
	else
		pipette_arg(a, " mixed_precision.fp8_param_gather=%s", hy_bool(gather));
	if (c->precision == PIPETTE_PREC_MXFP8)
		pipette_arg(a, " mixed_precision.reuse_grad_buf_for_mxfp8_param_ag=%s",
			    hy_bool(gather));
	pipette_arg(a, " mixed_precision.first_last_layers_bf16=%s "
		    "mixed_precision.num_layers_at_start_in_bf16=%d "
		    "mixed_precision.num_layers_at_end_in_bf16=%d",
		    hy_bool(c->bf16_first > 0 || c->bf16_last > 0), c->bf16_first, c->bf16_last);
}

/* What CommOverlapConfig overlaps, as the plan's timing assumes it (its
 * fields win over the defaults it derives, comm_overlap.py:594-602):
 * userbuffers TP overlap where the stack prices TP communication as partly
 * hidden (the config turns it off itself at TP 1 or without sequence
 * parallelism, :441-447), DP overlap, the deferred embedding wgrad where
 * the stack defers it and there is a pipeline. */
static void overlap_keys(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;
	const struct pipette_stack *st = &plan->stack;
	int defer = st->wgrad_deferral_limit > 0 && c->pp > 1;

	pipette_arg(a, " comm_overlap.tp_comm_overlap=%s",
		    hy_bool(pipette_stack_tp_exposed(st, c) < 1));
	pipette_arg(a, " comm_overlap.overlap_grad_reduce=%s comm_overlap.overlap_param_gather=%s",
		    hy_bool(st->dp_overlap),
		    hy_bool(st->dp_overlap && (c->distributed_optimizer || st->mfsdp)));
	pipette_arg(a, " comm_overlap.defer_embedding_wgrad_compute=%s", hy_bool(defer));
	if (defer)
		pipette_arg(a, " comm_overlap.wgrad_deferral_limit=%d", st->wgrad_deferral_limit);
}

/* Megatron-FSDP and CPU activation offloading, on exactly when the plan's
 * stack prices them (stack.c option_mfsdp, option_offload) and off
 * otherwise, since a flat recipe may turn them on itself (perf_recipes/
 * llama/gb200/llama3.py:272-284).  On, as the recipes that use them set
 * them: the ZeRO-3 strategy optim_grads_params, the double buffer the
 * memory model lays the layers out in, no cached FP8 transposes
 * (:272-276); activations only, of the first N layers (:282-284,
 * overrides.py:163-173).  Megatron-FSDP v1 runs the distributed optimizer
 * and overlaps its parameter gathers itself (training/config.py
 * :1079-1085; Megatron-LM docs/user-guide/features/megatron_fsdp.md:358). */
static void fsdp_offload_keys(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_stack *st = &plan->stack;

	pipette_arg(a, " ddp.use_megatron_fsdp=%s", hy_bool(st->mfsdp));
	if (st->mfsdp)
		pipette_arg(a, " ddp.data_parallel_sharding_strategy=optim_grads_params "
			    "ddp.fsdp_double_buffer=true ddp.keep_fp8_transpose_cache=false");
	pipette_arg(a, " model.cpu_offloading=%s", hy_bool(st->offload_layers > 0));
	if (st->offload_layers > 0)
		pipette_arg(a, " model.cpu_offloading_weights=false "
			    "model.cpu_offloading_num_layers=%d", st->offload_layers);
}

/* 0, 1 when the run script cannot run the plan as its stack assumes (buf
 * says why), -1 when buf is too small. */
int pipette_plan_bridge_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	const struct bridge_recipe *r = recipe_of(plan->model.name);
	struct pipette_args a = { buf, len, 0, 0 };

	if (!len)
		return -1;
	buf[0] = '\0';
	if (bridge_refuses(plan, buf, len))
		return 1;
	pipette_arg(&a, "-m %s -mr %s -g %s -c %s -ng %d -gb %ld -mb %d -sl %ld", r->family,
		    r->recipe, gpu_arg(plan->gpu), dtype_args[c->precision], plan->world,
		    c->global_batch, c->micro_batch, c->seq_len);
	pipette_arg(&a, " model.tensor_model_parallel_size=%d model.pipeline_model_parallel_size=%d "
		    "model.context_parallel_size=%d", c->tp, c->pp, c->cp);
	if (c->schedule == PIPETTE_SCHED_INTERLEAVED)
		pipette_arg(&a, " model.virtual_pipeline_model_parallel_size=%d", c->vpp);
	else
		pipette_arg(&a, " model.virtual_pipeline_model_parallel_size=null");
	pipette_arg(&a, " model.sequence_parallel=%s", hy_bool(c->sequence_parallel));
	if (plan->model.experts)
		moe_keys(plan, &a);
	if (plan->model.mtp_layers)
		pipette_arg(&a, " model.mtp_num_layers=%d", plan->model.mtp_layers);
	split_keys(plan, &a);
	recompute_keys(c, &a);
	pipette_arg(&a, " optimizer.use_distributed_optimizer=%s ddp.use_distributed_optimizer=%s",
		    hy_bool(c->distributed_optimizer || plan->stack.mfsdp),
		    hy_bool(c->distributed_optimizer || plan->stack.mfsdp));
	fsdp_offload_keys(plan, &a);
	overlap_keys(plan, &a);
	precision_keys(plan, &a);
	return !a.bad && a.n < len ? 0 : -1;
}
