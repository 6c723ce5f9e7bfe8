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
#include <stdlib.h>
#include <string.h>

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

/* One MoE block timed on one H200 (tests/data/kernels/h200-moe.csv): the
 * forward + backward of a rank's local experts as one GEMM per expert
 * (`bf16_loop`) and as one GEMM over all routed copies (`dense`), each
 * replayed from a CUDA graph.  Their difference is what the experts'
 * separate GEMMs cost; the estimator charges each further expert's GEMM
 * PIPETTE_EXPERT_GEMM_GAP_S, fitted here as the median (with
 * leave-one-out), against the kernel table's fixed cost per isolated GEMM
 * that it charged before.  Blocks of 2 local experts are printed, not
 * fitted: one extra GEMM per pass is within the timing noise. */
#define BLOCK_MAX VALIDATE_MEDIAN_MAX
#define GAP_DRIFT 0.05

struct block_case {
	char model[32];
	int local, tokens, topk;
	double loop_s, dense_s;
};

static int read_blocks(const char *path, struct block_case *bc, int *n)
{
	FILE *fp = fopen(path, "r");
	char line[512], *f[12];
	int i;

	*n = 0;
	if (!fp) {
		printf("  FAIL: cannot open %s\n", path);
		return 1;
	}
	while (fgets(line, sizeof(line), fp)) {
		int loop;

		if (validate_csv_split(line, f, 12) != 12 || strcmp(f[9], "gpu") || !*f[1])
			continue;
		loop = !strcmp(f[8], "bf16_loop");
		if (!loop && strcmp(f[8], "dense"))
			continue;
		for (i = 0; i < *n; i++)
			if (!strcmp(bc[i].model, f[1]) && bc[i].local == atoi(f[6]) &&
			    bc[i].tokens == atoi(f[7]))
				break;
		if (i == *n) {
			if (*n == BLOCK_MAX)
				break;
			memset(&bc[i], 0, sizeof(bc[i]));
			snprintf(bc[i].model, sizeof(bc[i].model), "%s", f[1]);
			bc[i].local = atoi(f[6]), bc[i].tokens = atoi(f[7]), bc[i].topk = atoi(f[5]);
			(*n)++;
		}
		*(loop ? &bc[i].loop_s : &bc[i].dense_s) = atof(f[10]);
	}
	fclose(fp);
	return 0;
}

/* A block both forms were timed for, of more than two local experts. */
static int usable(const struct block_case *b)
{
	return b->local > 2 && b->loop_s > 0 && b->dense_s > 0;
}

/* What each further expert's GEMM cost in block b. */
static double gap_of(const struct block_case *b)
{
	return (b->loop_s - b->dense_s) / (6.0 * (b->local - 1));
}

/* The median gap over the usable blocks but block skip (skip >= n: all). */
static double gap_fit(const struct block_case *bc, int n, int skip)
{
	double w[BLOCK_MAX];
	int j, k = 0;

	for (j = 0; j < n; j++)
		if (j != skip && usable(&bc[j]))
			w[k++] = gap_of(&bc[j]);
	return validate_median(w, (size_t)k, (size_t)k);
}

int validate_moe_block(const char *path)
{
	/* what the estimator charged each expert's GEMM before: the fixed
	 * cost of the table the H200 then shared with the H100 */
	double t0 = pipette_gpu_kernels(pipette_gpu_lookup("h100", NULL))->gemm[PIPETTE_GEMM_BF16].t0_s;
	double fit, e_old = 0, e_new = 0, e_loo = 0, bias = 0;
	struct block_case bc[BLOCK_MAX];
	int n, i, k = 0, bad = 0;

	printf("MoE expert blocks on one H200 (%s):\none GEMM per expert against one over all "
	       "copies, forward + backward, and the estimator's cost of the difference (ms)\n", path);
	if (read_blocks(path, bc, &n))
		return 1;
	for (i = 0; i < n; i++)
		k += usable(&bc[i]);
	if (k < 3) {
		printf("  FAIL: %d usable blocks\n\n", k);
		return 1;
	}
	fit = gap_fit(bc, n, n);
	printf("%-16s %5s %6s %8s %9s %9s %9s %9s\n", "model", "local", "tokens", "rows/exp",
	       "loop", "measured", "was", "now");
	for (i = 0, k = 0; i < n; i++) {
		double q = bc[i].loop_s - bc[i].dense_s, extra = 6.0 * (bc[i].local - 1);
		double l = bc[i].loop_s;

		if (usable(&bc[i])) {	/* the block's time given its dense equivalent */
			e_old += fabs(extra * t0 - q) / l;
			e_new += fabs(extra * PIPETTE_EXPERT_GEMM_GAP_S - q) / l;
			e_loo += fabs(extra * gap_fit(bc, n, i) - q) / l;
			bias += (extra * PIPETTE_EXPERT_GEMM_GAP_S - q) / l;
			k++;
		}
		printf("%-16s %5d %6d %8d %9.3f %9.3f %9.3f %9.3f%s\n", bc[i].model, bc[i].local,
		       bc[i].tokens, bc[i].tokens * bc[i].topk / bc[i].local, 1e3 * l, 1e3 * q,
		       1e3 * extra * t0, 1e3 * extra * PIPETTE_EXPERT_GEMM_GAP_S,
		       usable(&bc[i]) ? "" : "  (2 experts: noise, not fitted)");
	}
	printf("each further expert's GEMM: fitted %.1f us (shipped %.1f, estimate/timing.h), the "
	       "kernel\ntable's isolated GEMM %.1f us; the blocks' time given their dense "
	       "equivalent: MAPE %.1f%% (was %.1f%%),\nbias %+.1f%%, leave-one-out %.1f%%\n\n",
	       1e6 * fit, 1e6 * PIPETTE_EXPERT_GEMM_GAP_S, 1e6 * t0, 100 * e_new / k,
	       100 * e_old / k, 100 * bias / k, 100 * e_loo / k);
	validate_summary("MoE expert blocks, one GEMM per expert", "-", "H200-SXM-141GB", k,
			 e_new / k, bias / k, e_loo / k);
	if (fabs(fit / PIPETTE_EXPERT_GEMM_GAP_S - 1) > GAP_DRIFT) {
		printf("  FAIL: the shipped gap drifted from the fit\n\n");
		bad = 1;
	}
	return bad;
}
