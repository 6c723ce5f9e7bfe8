/* pipette: the plan as NeMo 2.0 recipe overrides, in the form
 * `nemo llm pretrain --factory RECIPE KEY=VALUE ...` (and NeMo-Run's
 * dotted overrides) accept: the strategy's parallel sizes, the data
 * module's batch sizes and sequence length, the model config's
 * recomputation, the DDP overlap and the precision plugin's gradient
 * dtype and recipe.  The keys and where NeMo defines them:
 * tests/data/stacks/nemo.md and nemo-keys.tsv.  The performance recipes
 * already carry TP overlap and the deferred embedding wgrad as callbacks;
 * the plan assumes them and says so in the stack's facts (`pipette
 * stacks`). */
#include <stdio.h>

#include "plan/plan_int.h"

static const char *py_bool(int b)
{
	return b ? "True" : "False";
}

/* Selective recomputation, with the modules as a Python list. */
static void recompute_keys(const struct pipette_config *c, struct pipette_args *a)
{
	char mods[160];

	pipette_arg(a, " model.config.recompute_granularity=selective");
	if (!c->recompute_modules)
		return;
	pipette_recompute_modules_format(c->recompute_modules, ",", mods, sizeof(mods));
	pipette_arg(a, " model.config.recompute_modules=[%s]", mods);
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
	int gather = plan->stack.fp8_param_gather && c->precision != PIPETTE_PREC_FP8_BLOCKWISE;

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

/* 0, 1 when Megatron-Core would refuse the plan's recipe (buf says why),
 * -1 when buf is too small. */
int pipette_plan_nemo_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	const struct pipette_stack *st = &plan->stack;
	struct pipette_args a = { buf, len, 0, 0 };

	if (!len)
		return -1;
	buf[0] = '\0';
	pipette_arg(&a, "trainer.strategy.tensor_model_parallel_size=%d "
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
	if (pipette_plan_uses_layout(plan)) {
		/* as NeMo's DeepSeek-V3 performance script does
		 * (nemo-deepseek-v3.md): the layout, nothing else */
		pipette_arg(&a, " trainer.strategy.pipeline_model_parallel_layout=");
		pipette_plan_layout(plan, &a);
		pipette_arg(&a, " trainer.strategy.account_for_embedding_in_pipeline_split=False "
			    "trainer.strategy.account_for_loss_in_pipeline_split=False");
	} else {
		if (c->first_stage_layers > 0)
			pipette_arg(&a, " trainer.strategy.num_layers_in_first_pipeline_stage=%d",
				    c->first_stage_layers);
		if (c->last_stage_layers > 0)
			pipette_arg(&a, " trainer.strategy.num_layers_in_last_pipeline_stage=%d",
				    c->last_stage_layers);
	}
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
	return !a.bad && a.n < len ? 0 : -1;
}

int pipette_plan_launch_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	if (plan->stack.form == PIPETTE_FORM_NEMO)
		return pipette_plan_nemo_args(plan, buf, len);
	if (plan->stack.form == PIPETTE_FORM_TORCHTITAN)
		return pipette_plan_torchtitan_args(plan, buf, len);
	if (plan->stack.form == PIPETTE_FORM_NONE) {
		if (len)
			buf[0] = '\0';
		return 1;
	}
	return pipette_plan_megatron_args(plan, buf, len);
}
