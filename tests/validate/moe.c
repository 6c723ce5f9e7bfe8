/* make validate: DeepSeek-V3 as its technical report describes its
 * training (Liu et al., arXiv 2412.19437; each figure with its section in
 * tests/data/stacks/deepseek-v3.md).  One point: a check, not a
 * calibration target.
 *   2048 H800, 8 per node (§3.1, §3.2.2); PP 16, EP 64 over 8 nodes,
 *   ZeRO-1 data parallelism, no TP (§3.2); DualPipe (§3.2.1); sequence
 *   4096 and batch 15360 sequences (§4.2); 180K H800 GPU hours per
 *   trillion tokens (§1, after Table 1).
 * Not stated, chosen here: micro-batch 1, and the 61 layers as 1 + 30 x 2
 * over DualPipe's 32 half-stages, the embedding and the output head with
 * the MTP module on rank 0 (§3.2.3 puts them on one rank). */
#include <math.h>
#include <stdio.h>

#include "estimate/memory.h"
#include "inputs/stack.h"
#include "validate.h"

#define REPORT_GPU_HOURS_PER_T 180e3
#define TOLERANCE 0.15

int validate_moe(struct pipette_timer *t)
{
	const struct pipette_gpu_spec *g = pipette_gpu_lookup("h800", NULL);
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_time tm;
	struct pipette_memory mem;
	const struct pipette_stage_memory *pk = &mem.peak;
	double hours, err;
	int bad = 0;

	printf("DeepSeek-V3 as its report trained it (arXiv 2412.19437; --stack deepseek)\n");
	if (pipette_model_preset("deepseek-v3", &m, NULL))
		return 1;
	pipette_config_init(&c);
	c.stack = pipette_stack_get(PIPETTE_STACK_DEEPSEEK);
	c.precision = c.stack->default_precision;	/* FP8, 1x128 / 128x128 blocks */
	c.pp = 16, c.ep = 64, c.dp = 128, c.vpp = 2;
	c.schedule = PIPETTE_SCHED_DUALPIPE;
	c.global_batch = 15360, c.seq_len = 4096, c.micro_batch = 1;
	c.distributed_optimizer = 1;
	c.first_stage_layers = 1, c.last_stage_layers = -1;
	c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	c.recompute_modules = c.stack->fixed_modules;
	c.moe.dispatcher = PIPETTE_DISPATCH_DEEPEP;
	if (validate_estimate(t, &m, g, &c, &tm))
		return 1;
	pipette_memory_estimate(&m, g, &c, 1.0, pipette_timer_inflight(t), NULL, &mem);
	hours = tm.iteration_s * pipette_config_world(&c) / 3600.0 /
		((double)c.global_batch * c.seq_len / 1e12);
	err = hours / REPORT_GPU_HOURS_PER_T - 1;
	printf("  iteration %.2f s (EP %.2f s exposed, %.2f s hidden by DualPipe; bubble %.2f s)\n",
	       tm.iteration_s, tm.ep_comm_s, tm.ep_hidden_s, tm.bubble_s);
	printf("  H800 GPU hours per trillion tokens: predicted %.0fK, report %.0fK (%+.1f%%; "
	       "check within %.0f%%)\n", hours / 1e3, REPORT_GPU_HOURS_PER_T / 1e3, 100 * err,
	       100 * TOLERANCE);
	printf("  peak memory, stage %d: params %.1f + grads %.1f + optimizer %.1f + activations "
	       "%.1f + other %.1f + reserve %.1f = %.1f GiB of %.1f (%s)\n\n", mem.peak_stage,
	       pk->params_bytes / PIPETTE_GIB, pk->grads_bytes / PIPETTE_GIB,
	       pk->optimizer_bytes / PIPETTE_GIB, pk->activations_bytes / PIPETTE_GIB,
	       pk->other_bytes / PIPETTE_GIB, pk->reserve_bytes / PIPETTE_GIB,
	       mem.peak_bytes / PIPETTE_GIB, mem.limit_bytes / PIPETTE_GIB,
	       mem.fits ? "fits" : "DOES NOT FIT");
	validate_summary("DeepSeek-V3 report (GPU hours per T tokens)", "deepseek", g->name, 1,
			 fabs(err), err, -1);
	if (fabs(err) > TOLERANCE || !mem.fits) {
		printf("  FAIL: outside the check\n");
		bad = 1;
	}
	return bad;
}
