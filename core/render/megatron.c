/* pipette: the plan as Megatron-LM arguments (pretrain_gpt.py), in the
 * dialect of the plan's stack: upstream Megatron-LM, or the zero-bubble
 * fork, whose older arguments.py names virtual stages by layers and
 * FlashAttention by --use-flash-attn and adds its schedule flags.  Every
 * flag and the rules that combine them are in tests/data/stacks/
 * (megatron-args.tsv, megatron-rules.tsv, megatron-schedules.md), and
 * tests/unit/test_launch.c checks each emitted line against them. */
#include <stdio.h>

#include "plan/plan_int.h"

static int zb_fork(const struct pipette_plan *plan)
{
	return plan->stack.form == PIPETTE_FORM_MEGATRON_ZB;
}

/* --pipeline-model-parallel-layout (megatron-rules.tsv layout-grammar,
 * layout-content): the virtual stages in order, '|' between them, E for
 * the embedding on the first, t per decoder layer, then m per MTP layer and
 * L for the loss on the last.  Megatron derives VPP from it. */
void pipette_plan_layout(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;
	int V = c->pp * pipette_config_chunks(c), vs, k;

	for (vs = 0; vs < V; vs++) {
		int n = pipette_config_vstage_layers(&plan->model, c, vs);

		pipette_arg(a, "%s%s", vs ? "|" : "", vs ? "" : "E");
		for (k = 0; k < n; k++)
			pipette_arg(a, "t");
	}
	for (k = 0; k < plan->model.mtp_layers; k++)
		pipette_arg(a, "m");
	pipette_arg(a, "L");
}

int pipette_plan_uses_layout(const struct pipette_plan *plan)
{
	const struct pipette_config *c = &plan->cfg;

	return (c->first_stage_layers || c->last_stage_layers) &&
	       c->schedule == PIPETTE_SCHED_INTERLEAVED && !zb_fork(plan);
}

/* Pipeline layout: virtual stages and uneven ends.  Megatron's
 * --decoder-first/last-pipeline-num-layers count a whole pipeline rank's
 * layers, which its chunks share (megatron-rules.tsv uneven-*): an uneven
 * interleaved split is written as a layout. */
static void layout_args(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;

	if (pipette_plan_uses_layout(plan)) {
		pipette_arg(a, " --pipeline-model-parallel-layout ");
		pipette_plan_layout(plan, a);
		return;
	}
	if (c->schedule == PIPETTE_SCHED_INTERLEAVED) {
		if (zb_fork(plan))
			pipette_arg(a, " --num-layers-per-virtual-pipeline-stage %d",
			    plan->model.layers / (c->pp * c->vpp));
		else
			pipette_arg(a, " --num-virtual-stages-per-pipeline-rank %d", c->vpp);
	}
	if (c->first_stage_layers)
		pipette_arg(a, " --decoder-first-pipeline-num-layers %d", c->first_stage_layers);
	if (c->last_stage_layers)
		pipette_arg(a, " --decoder-last-pipeline-num-layers %d", c->last_stage_layers);
}

/* The zero-bubble fork's schedules (megatron-schedules.md §3): its
 * runtime named explicitly; ZB-H1 is the ZB family with one pipeline's
 * worth of pending backward passes (the 1F1B memory); the V schedules
 * set their two virtual stages themselves. */
static void zb_schedule_args(const struct pipette_config *c, struct pipette_args *a)
{
	switch (c->schedule) {
	case PIPETTE_SCHED_ZB_H1:
		pipette_arg(a, " --enable-zb-runtime --enable-zero-bubble "
		    "--zero-bubble-max-pending-backward %d", c->pp);
		break;
	case PIPETTE_SCHED_V_MIN:
	case PIPETTE_SCHED_V_HALF:
	case PIPETTE_SCHED_V_ZB:
		pipette_arg(a, " --enable-zb-runtime --zero-bubble-v-schedule "
		    "--zero-bubble-v-schedule-mem-setup %s",
		    c->schedule == PIPETTE_SCHED_V_MIN ? "min"
		    : c->schedule == PIPETTE_SCHED_V_HALF ? "half" : "zb");
		break;
	default:
		break;
	}
}

static void recompute_args(const struct pipette_config *c, struct pipette_args *a)
{
	char mods[160];

	if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE && c->recompute_modules) {
		pipette_recompute_modules_format(c->recompute_modules, " ", mods, sizeof(mods));
		pipette_arg(a, " --recompute-granularity selective --recompute-modules %s", mods);
	} else if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE)
		pipette_arg(a, " --recompute-granularity selective");
	else if (c->recompute == PIPETTE_RECOMPUTE_FULL)
		pipette_arg(a, " --recompute-granularity full --recompute-method uniform "
		    "--recompute-num-layers 1");
}

/* The MoE execution the prediction assumes (megatron-args.tsv and the MoE
 * rules of megatron-rules.tsv): grouped GEMMs (moe_act recomputation
 * needs them), the dispatcher (DeepEP is the flex dispatcher's deepep
 * backend), capacity and padding, the combined-1F1B overlap. */
static void moe_args(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;

	pipette_arg(a, " --moe-grouped-gemm");
	if (c->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP)
		pipette_arg(a, " --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep");
	else
		pipette_arg(a, " --moe-token-dispatcher-type alltoall");
	if (c->moe.capacity_factor > 0)
		pipette_arg(a, " --moe-expert-capacity-factor %g%s", c->moe.capacity_factor,
		    c->moe.pad ? " --moe-pad-expert-input-to-capacity" : "");
	if (c->moe.ep_overlap)
		pipette_arg(a, " --overlap-moe-expert-parallel-comm");
}

/* The precision recipe in Megatron-Core's TransformerConfig flags
 * (megatron-args.tsv, the fp8-* and fp4-* rules of megatron-rules.tsv):
 * BF16 parameters (--bf16, written by stack_args) with the linear layers'
 * GEMMs in the recipe, Megatron-Bridge's formats for each
 * (NVIDIA-NeMo/Megatron-Bridge @067f987d src/megatron/bridge/training/
 * mixed_precision.py: hybrid :217-385 but e4m3 for MXFP8 :255-266, and
 * e2m1 NVFP4 :405-417); the BF16 layers at the model's ends
 * (transformer_config.py:649-658: both counts default to 1, so both are
 * written).  A stack whose memory model gathers parameters quantized
 * (stack.c fp8_param_gather: NeMo's and Megatron-Bridge's recipes, not the
 * megatron stack) says so: --fp8-param-gather, which needs the
 * distributed optimizer (megatron-rules.tsv fp8-param-distopt), and with
 * MXFP8 the gradient buffer reused for the gather
 * (--reuse-grad-buf-for-mxfp8-param-ag, as Megatron-Core's optimizer
 * config asks: megatron/core/optimizer/optimizer_config.py:416-425);
 * Megatron-FSDP gathers them so too (its gather bytes, stack.c). */
static const char *const recipe_flags[PIPETTE_PREC_COUNT] = {
	[PIPETTE_PREC_FP8_DELAYED] = "--fp8-format hybrid --fp8-recipe delayed",
	[PIPETTE_PREC_FP8_CURRENT] = "--fp8-format hybrid --fp8-recipe tensorwise",
	[PIPETTE_PREC_FP8_BLOCKWISE] = "--fp8-format hybrid --fp8-recipe blockwise",
	[PIPETTE_PREC_MXFP8] = "--fp8-format e4m3 --fp8-recipe mxfp8",
	[PIPETTE_PREC_NVFP4] = "--fp4-format e2m1 --fp4-recipe nvfp4",
};

static void precision_args(const struct pipette_config *c, const struct pipette_stack *st,
			   struct pipette_args *a)
{
	if (c->precision == PIPETTE_PREC_BF16)
		return;
	if (!recipe_flags[c->precision]) {	/* the stack's precisions fact refuses it first */
		a->bad = 1;
		return;
	}
	pipette_arg(a, " %s", recipe_flags[c->precision]);
	/* the gathers memory.c prices (lowp_weight_bytes) */
	if (pipette_stack_gathers_lowp(st, c->precision) &&
	    (c->distributed_optimizer || st->mfsdp))
		pipette_arg(a, " --fp8-param-gather%s", c->precision == PIPETTE_PREC_MXFP8
			    ? " --reuse-grad-buf-for-mxfp8-param-ag" : "");
	if (c->bf16_first > 0 || c->bf16_last > 0)
		pipette_arg(a, " --first-last-layers-bf16 --num-layers-at-start-in-bf16 %d "
			    "--num-layers-at-end-in-bf16 %d", c->bf16_first, c->bf16_last);
}

/* What the prediction assumes, named: BF16 training, the gradient
 * buffer's dtype, DP overlap (the parameter gather only with the
 * distributed optimizer), TP overlap with userbuffers (sequence parallel
 * only), the deferred embedding wgrad (pipelined only). */
static void stack_args(const struct pipette_plan *plan, struct pipette_args *a)
{
	const struct pipette_config *c = &plan->cfg;
	const struct pipette_stack *st = &plan->stack;

	if (!st->core_flags)
		return;
	pipette_arg(a, " --bf16");
	precision_args(c, st, a);
	if (st->grad_bytes == 2)
		pipette_arg(a, " --grad-reduce-in-bf16");
	if (st->optim_needs_distopt && c->distributed_optimizer)
		pipette_arg(a, " --use-precision-aware-optimizer --exp-avg-dtype bf16 "
		    "--exp-avg-sq-dtype bf16");
	if (st->dp_overlap) {
		pipette_arg(a, " --overlap-grad-reduce");
		if (c->distributed_optimizer)
			pipette_arg(a, " --overlap-param-gather");
	}
	if (pipette_stack_tp_exposed(st, c) < 1)
		pipette_arg(a, " --tp-comm-overlap");
	if (st->wgrad_deferral_limit > 0 && c->pp > 1)
		pipette_arg(a, " --defer-embedding-wgrad-compute --wgrad-deferral-limit %d",
		    st->wgrad_deferral_limit);
}

/* Compression exists only in the Optimus-CC fork of Megatron-LM, with
 * these flag names (AIS-SNU/Optimus-CC @7f6437c, megatron/arguments.py). */
static void compression_args(const struct pipette_config *c, struct pipette_args *a)
{
	if (c->compress.pp_rank) {
		pipette_arg(a, " --inter_grad_comp --inter_grad_comp_rank %d --use_error_feedback",
		    c->compress.pp_rank);
		if (c->compress.pp_epilogue_only)
			pipette_arg(a, " --inter_grad_comp_epilogue_only");
	}
	if (c->compress.dp_rank) {
		pipette_arg(a, " --grad_comp --grad_comp_rank %d", c->compress.dp_rank);
		if (c->compress.dp_stages)
			pipette_arg(a, " --selective_grad_comp --selective_grad_comp_way %d",
			    c->compress.dp_stages);
	}
	if (c->compress.fused_embedding)
		pipette_arg(a, " --emb_comm_opt");
}

/* 0, 1 when the plan was made for a stack that does not run Megatron-LM
 * (buf says which and why), or -1 when buf is too small.  What
 * Megatron-Core would refuse of a recipe is never planned (config.c
 * check_precision). */
int pipette_plan_megatron_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	struct pipette_args a = { buf, len, 0, 0 };

	if (!len)
		return -1;
	buf[0] = '\0';
	if (plan->stack.form == PIPETTE_FORM_TORCHTITAN || plan->stack.form == PIPETTE_FORM_NONE) {
		snprintf(buf, len, "the plan was made for stack %s (%s), not Megatron-LM: plan "
			 "for the megatron stack", plan->stack.name, plan->stack.what);
		return 1;
	}
	pipette_arg(&a, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
	    "--context-parallel-size %d", c->tp, c->pp, c->cp);
	if (plan->model.experts) {
		pipette_arg(&a, " --expert-model-parallel-size %d", c->ep);
		if (!zb_fork(plan))
			pipette_arg(&a, " --expert-tensor-parallel-size %d", c->etp);
		if (!zb_fork(plan))
			moe_args(plan, &a);
	}
	if (plan->model.mtp_layers && !zb_fork(plan))
		pipette_arg(&a, " --mtp-num-layers %d", plan->model.mtp_layers);
	layout_args(plan, &a);
	if (zb_fork(plan))
		zb_schedule_args(c, &a);
	pipette_arg(&a, " --micro-batch-size %d --global-batch-size %ld --seq-length %ld",
	    c->micro_batch, c->global_batch, c->seq_len);
	/* Megatron-LM turns sequence parallelism off at TP 1 (with a
	 * warning); say only what runs. */
	if (c->sequence_parallel && c->tp > 1)
		pipette_arg(&a, " --sequence-parallel");
	if (c->distributed_optimizer)
		pipette_arg(&a, " --use-distributed-optimizer");
	/* Megatron-FSDP as the plan prices it (stack.h mfsdp): ZeRO-3 with
	 * the double buffer; version 1 runs on the distributed optimizer and
	 * the fsdp_dtensor checkpoints (megatron-rules.tsv
	 * megatron-fsdp-distopt) */
	if (plan->stack.mfsdp)
		pipette_arg(&a, "%s --use-megatron-fsdp --data-parallel-sharding-strategy "
			    "optim_grads_params --fsdp-double-buffer --ckpt-format fsdp_dtensor",
			    c->distributed_optimizer ? "" : " --use-distributed-optimizer");
	/* CPU activation offloading of the first N layers (stack.h
	 * offload_layers; N > 0 turns cpu_offloading on, megatron-args.tsv) */
	if (plan->stack.offload_layers > 0)
		pipette_arg(&a, " --cpu-offloading-num-layers %d", plan->stack.offload_layers);
	/* Flash: Megatron-Core's default backend (auto) already picks a fused
	 * kernel; the fork asks for FlashAttention by name. */
	if (c->attention == PIPETTE_ATTN_UNFUSED && !zb_fork(plan))
		pipette_arg(&a, " --attention-backend unfused");
	else if (c->attention == PIPETTE_ATTN_FLASH && zb_fork(plan))
		pipette_arg(&a, " --use-flash-attn");
	recompute_args(c, &a);
	stack_args(plan, &a);
	compression_args(c, &a);
	return !a.bad && a.n < len ? 0 : -1;
}

/* The FSDP sharding of a plan in Megatron-LM's own terms (Megatron-FSDP;
 * megatron-args.tsv and the mfsdp-* rules of megatron-rules.tsv): ZeRO-3
 * is --data-parallel-sharding-strategy optim_grads_params, which releases
 * each layer's weights after its forward and gathers them again for
 * backward (torchtitan's reshard "always"); HSDP replicas are
 * --num-distributed-optimizer-instances, whose shard group is DP x CP / N,
 * torchtitan's dp_shard x cp.  Megatron-FSDP has no switch that keeps the
 * gathered weights (reshard "never"), and PP with it is untested upstream
 * (rule mfsdp-pp).  0 with the flags in buf, 1 with the reason. */
int pipette_plan_megatron_fsdp_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	struct pipette_args a = { buf, len, 0, 0 };
	int replicas = pipette_config_dp_replicate(c);

	if (!len)
		return -1;
	buf[0] = '\0';
	if (pipette_config_shard_group(c) < 2) {
		snprintf(buf, len, "nothing is sharded");
		return 1;
	}
	if (c->reshard != PIPETTE_RESHARD_ALWAYS) {
		snprintf(buf, len, "Megatron-FSDP cannot keep gathered weights from forward "
			 "to backward (optim_grads keeps all of them unsharded)");
		return 1;
	}
	if (c->pp > 1) {
		snprintf(buf, len, "Megatron-FSDP with pipeline parallelism is untested upstream");
		return 1;
	}
	pipette_arg(&a, "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params "
		    "--use-distributed-optimizer --ckpt-format fsdp_dtensor");
	if (replicas > 1)
		pipette_arg(&a, " --num-distributed-optimizer-instances %d", replicas);
	return !a.bad && a.n < len ? 0 : -1;
}
