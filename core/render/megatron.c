/* pipette: the plan as Megatron-LM arguments (pretrain_gpt.py). */
#include <stdio.h>

#include "plan_int.h"

int pipette_plan_megatron_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	const struct pipette_stack *st = &plan->stack;
	size_t n = 0;
	int w;

#define ARG(...) do { \
		w = snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__); \
		if (w < 0) return -1; \
		n += (size_t)w; \
	} while (0)
	if (!len)
		return -1;
	buf[0] = '\0';
	ARG("--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
	    "--context-parallel-size %d", c->tp, c->pp, c->cp);
	if (plan->model.experts)
		ARG(" --expert-model-parallel-size %d --expert-tensor-parallel-size %d",
		    c->ep, c->etp);
	if (c->schedule == PIPETTE_SCHED_INTERLEAVED)
		ARG(" --num-virtual-stages-per-pipeline-rank %d", c->vpp);
	if (c->first_stage_layers)
		ARG(" --decoder-first-pipeline-num-layers %d", c->first_stage_layers);
	if (c->last_stage_layers)
		ARG(" --decoder-last-pipeline-num-layers %d", c->last_stage_layers);
	ARG(" --micro-batch-size %d --global-batch-size %ld --seq-length %ld",
	    c->micro_batch, c->global_batch, c->seq_len);
	if (c->sequence_parallel)
		ARG(" --sequence-parallel");
	if (c->distributed_optimizer)
		ARG(" --use-distributed-optimizer");
	/* Flash: Megatron-Core's default backend (auto) already picks a fused
	 * kernel; only the unfused one needs asking for. */
	if (c->attention == PIPETTE_ATTN_UNFUSED)
		ARG(" --attention-backend unfused");
	if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE)
		ARG(" --recompute-granularity selective");
	else if (c->recompute == PIPETTE_RECOMPUTE_FULL)
		ARG(" --recompute-granularity full --recompute-method uniform "
		    "--recompute-num-layers 1");
	if (st->core_flags) {
		/* What the prediction assumes, named: BF16 training, the
		 * gradient buffer's dtype, DP overlap (the parameter gather
		 * only exists with the distributed optimizer), TP overlap with
		 * userbuffers (sequence parallel only), the deferred
		 * embedding wgrad.  Flags and rules: tests/data/stacks/. */
		ARG(" --bf16");
		if (st->grad_bytes == 2)
			ARG(" --grad-reduce-in-bf16");
		if (st->dp_overlap) {
			ARG(" --overlap-grad-reduce");
			if (c->distributed_optimizer)
				ARG(" --overlap-param-gather");
		}
		if (pipette_stack_tp_exposed(st, c) < 1)
			ARG(" --tp-comm-overlap");
		if (st->wgrad_deferral_limit > 0 && c->pp > 1)
			ARG(" --defer-embedding-wgrad-compute --wgrad-deferral-limit %d",
			    st->wgrad_deferral_limit);
	}
	/* Compression exists only in the Optimus-CC fork of Megatron-LM;
	 * its flag names (AIS-SNU/Optimus-CC megatron/arguments.py:328-425
	 * @7f6437cc). */
	if (c->compress.pp_rank) {
		ARG(" --inter_grad_comp --inter_grad_comp_rank %d --use_error_feedback",
		    c->compress.pp_rank);
		if (c->compress.pp_epilogue_only)
			ARG(" --inter_grad_comp_epilogue_only");
	}
	if (c->compress.dp_rank) {
		ARG(" --grad_comp --grad_comp_rank %d", c->compress.dp_rank);
		if (c->compress.dp_stages)
			ARG(" --selective_grad_comp --selective_grad_comp_way %d",
			    c->compress.dp_stages);
	}
	if (c->compress.fused_embedding)
		ARG(" --emb_comm_opt");
#undef ARG
	return n < len ? 0 : -1;
}
