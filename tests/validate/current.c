/* make validate, current stacks: the NeMo 2.0 / Megatron-Core runs on H100
 * of tests/data/stacks/nemo-h100-{time,memory}.tsv (their source is in
 * those files).  Per row: predicted vs measured step time; per memory log:
 * the persistent bytes against memory_allocated and the predicted reserved
 * peak against peak_memory_usage; for every published configuration,
 * whether the nemo stack judges it to fit and where `pipette plan --stack
 * nemo` ranks it for the same GPUs, batch and sequence.
 *
 * The nemo stack has two fitted time parameters: the share of TP
 * communication that userbuffers leave exposed (core/inputs/stack.c), and
 * the share of the H100's measured kernel rates a Megatron-Core step
 * attains (PIPETTE_H100_STEP_SHARE, core/inputs/hardware.h).  They are
 * fitted together here on the time rows (a grid, the MAPE minimum) and, so
 * that the figure is not judged on the rows it was fitted on, also fitted
 * once per row on the other rows and used to predict that row
 * (leave-one-out). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/cluster.h"
#include "inputs/config.h"
#include "inputs/hardware.h"
#include "estimate/memory.h"
#include "inputs/model.h"
#include "plan/plan.h"
#include "inputs/stack.h"
#include "estimate/timing.h"
#include "validate.h"

#define MAX_ROWS 16
/* The grid of the TP exposure fit: 0 to 1 in steps of 0.05; of the step
 * share, 0.70 to 1.00 in steps of 0.01. */
#define GRID_STEPS 20
#define SHARE_STEPS 30
#define SHARE_AT(j) (0.70 + 0.01 * (j))

struct row {
	char model[32];
	long vocab;
	int gpus, tp, pp, dp, cp, vp, mbs;
	long gbs, seq;
	double step_s;		/* 0 = not measured */
	double alloc_gib, peak_bytes;	/* memory rows */
	/* The run's own settings (time rows; see the data file). */
	int tp_overlap, deferral, adam_bf16;
};

/* Read a tab-separated file of tests/data/stacks: comments (#) and the
 * header are skipped; memory rows have no VP and two memory columns. */
static int read_rows(const char *path, int memory, struct row *rows, int max)
{
	FILE *f = fopen(path, "r");
	char line[512], step[32], ovl[8], adam[8];
	int n = 0;

	if (!f) {
		fprintf(stderr, "validate: %s: cannot open\n", path);
		return -1;
	}
	while (n < max && fgets(line, sizeof(line), f)) {
		struct row *r = &rows[n];
		int k;

		if (line[0] == '#' || line[0] == '\n' || !strncmp(line, "model", 5))
			continue;
		memset(r, 0, sizeof(*r));
		r->vp = 1;
		if (memory)
			k = sscanf(line, "%31s %d %d %d %d %d %d %ld %ld %lf %lf %31s", r->model,
				   &r->gpus, &r->tp, &r->pp, &r->dp, &r->cp, &r->mbs, &r->gbs,
				   &r->seq, &r->alloc_gib, &r->peak_bytes, step) == 12 ? 0 : -1;
		else
			k = sscanf(line, "%31s %ld %d %d %d %d %d %d %d %ld %ld %31s %7s %d %7s",
				   r->model, &r->vocab, &r->gpus, &r->tp, &r->pp, &r->dp, &r->cp,
				   &r->vp, &r->mbs, &r->gbs, &r->seq, step, ovl, &r->deferral,
				   adam) == 15 ? 0 : -1;
		if (!memory && !k) {
			r->tp_overlap = !strcmp(ovl, "on");
			r->adam_bf16 = !strcmp(adam, "bf16");
		}
		if (k) {
			fprintf(stderr, "validate: %s: malformed row: %s", path, line);
			fclose(f);
			return -1;
		}
		r->step_s = strcmp(step, "-") ? atof(step) : 0;
		n++;
	}
	fclose(f);
	return n;
}

/* The nemo stack with the run's own settings: TP overlap (exposure
 * tp_exposed when on, all of it when off), its deferral limit, and Adam
 * states in bf16 (parameter copy and moments, 2 + 2 + 2 bytes: Apex's
 * distributed Adam with dtype bf16). */
static void row_stack(const struct row *r, double tp_exposed, double share,
		      struct pipette_stack *st)
{
	*st = *pipette_stack_get(PIPETTE_STACK_NEMO);
	st->kernel_share = share;
	if (r->alloc_gib > 0)
		return;	/* a memory log: the stack's defaults */
	st->tp_exposed = r->tp_overlap ? tp_exposed : 1.0;
	st->wgrad_deferral_limit = r->deferral;
	if (r->adam_bf16)
		st->optim_bytes = 6;
}

static int row_setup(const struct row *r, const struct pipette_stack *st,
		     struct pipette_model *m, struct pipette_config *c)
{
	struct pipette_err err;

	if (pipette_model_preset(r->model, m, &err)) {
		fprintf(stderr, "validate: %s\n", err.msg);
		return -1;
	}
	if (r->vocab)
		m->vocab = r->vocab;
	pipette_config_init(c);
	c->stack = st;
	c->attention = st->attention;
	c->tp = r->tp;
	c->pp = r->pp;
	c->dp = r->dp;
	c->cp = r->cp;
	c->micro_batch = r->mbs;
	c->global_batch = r->gbs;
	c->seq_len = r->seq;
	c->sequence_parallel = r->tp > 1;
	c->distributed_optimizer = 1;
	if (r->vp > 1) {
		c->schedule = PIPETTE_SCHED_INTERLEAVED;
		c->vpp = r->vp;
	}
	if (pipette_config_check(m, c, &err)) {
		fprintf(stderr, "validate: %s: %s\n", r->model, err.msg);
		return -1;
	}
	return 0;
}

static int predict_s(struct pipette_timer *t, const struct pipette_gpu_spec *g,
		     const struct row *r, const struct pipette_stack *st, double *out)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_time tm;

	if (row_setup(r, st, &m, &c) || validate_estimate(t, &m, g, &c, &tm))
		return -1;
	*out = tm.iteration_s;
	return 0;
}

typedef double grid_pred[GRID_STEPS + 1][SHARE_STEPS + 1];

/* pred[i][k][j]: row i's prediction with the k-th grid value of
 * tp_exposed and the j-th of the step share. */
static int predict_grid(struct pipette_timer *t, const struct pipette_gpu_spec *g,
			const struct row *rows, int n, grid_pred *pred)
{
	struct pipette_stack st;
	int i, k, j;

	for (k = 0; k <= GRID_STEPS; k++)
		for (j = 0; j <= SHARE_STEPS; j++)
			for (i = 0; i < n; i++) {
				row_stack(&rows[i], (double)k / GRID_STEPS, SHARE_AT(j), &st);
				if (predict_s(t, g, &rows[i], &st, &pred[i][k][j]))
					return -1;
			}
	return 0;
}

/* The grid point (k * (SHARE_STEPS + 1) + j) minimising the MAPE over the
 * rows but `skip` (-1: none). */
static int best_k(const struct row *rows, int n, grid_pred *pred, int skip)
{
	double best = -1;
	int i, k, j, arg = 0;

	for (k = 0; k <= GRID_STEPS; k++)
		for (j = 0; j <= SHARE_STEPS; j++) {
			double sum = 0;

			for (i = 0; i < n; i++)
				if (i != skip)
					sum += fabs(pred[i][k][j] / rows[i].step_s - 1);
			if (best < 0 || sum < best - 1e-12) {
				best = sum;
				arg = k * (SHARE_STEPS + 1) + j;
			}
		}
	return arg;
}

#define AT(p, i, kj) ((p)[i][(kj) / (SHARE_STEPS + 1)][(kj) % (SHARE_STEPS + 1)])

static int check_time(struct pipette_timer *t, const struct pipette_gpu_spec *g,
		      const struct row *rows, int n)
{
	static grid_pred pred[MAX_ROWS];
	double fitted = 0, loo = 0, table = pipette_stack_get(PIPETTE_STACK_NEMO)->tp_exposed;
	double table_mape = 0, bias = 0, share_table = g->kernels ? g->kernels->step_share : 0;
	int i, kf;

	if (predict_grid(t, g, rows, n, pred))
		return 1;
	kf = best_k(rows, n, pred, -1);
	printf("%-15s %5s %3s %3s %3s %3s %3s %3s %4s %5s %8s %8s %7s %8s %7s\n", "model", "gpus",
	       "tp", "pp", "dp", "cp", "vp", "mbs", "gbs", "seq", "measured", "fitted", "error",
	       "LOO", "error");
	for (i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		int kl = best_k(rows, n, pred, i);
		double ef = AT(pred, i, kf) / r->step_s - 1, el = AT(pred, i, kl) / r->step_s - 1;
		struct pipette_stack st;
		double et;

		row_stack(r, table, share_table, &st);
		if (predict_s(t, g, r, &st, &et))
			return 1;
		table_mape += fabs(et / r->step_s - 1);
		fitted += fabs(ef);
		bias += ef;
		loo += fabs(el);
		printf("%-15s %5d %3d %3d %3d %3d %3d %3d %4ld %5ld %8.2f %8.2f %+6.1f%% %8.2f "
		       "%+6.1f%%\n", r->model, r->gpus, r->tp, r->pp, r->dp, r->cp, r->vp, r->mbs,
		       r->gbs, r->seq, r->step_s, AT(pred, i, kf), 100 * ef, AT(pred, i, kl), 100 * el);
	}
	printf("TP exposure fitted: %.2f (core/inputs/stack.c has %.2f); H100 step share of the "
	       "measured kernels fitted: %.2f (core/inputs/hardware.h has %.2f)\n",
	       (double)(kf / (SHARE_STEPS + 1)) / GRID_STEPS, table,
	       SHARE_AT(kf % (SHARE_STEPS + 1)), share_table);
	printf("time MAPE %.1f%% fitted (bias %+.1f%%), %.1f%% leave-one-out, %.1f%% with the "
	       "tables' values (targets 7%% and 10%%, bias within 5%%)\n", 100 * fitted / n,
	       100 * bias / n, 100 * loo / n, 100 * table_mape / n);
	validate_summary("NeMo 2.0 recipes, NVIDIA's H100 runs", "nemo", g->name, n, fitted / n,
			 bias / n, loo / n);
	return fabs((double)(kf / (SHARE_STEPS + 1)) / GRID_STEPS - table) > 1e-9 ||
	       fabs(SHARE_AT(kf % (SHARE_STEPS + 1)) - share_table) > 1e-9 ||
	       fitted / n > 0.07 || loo / n > 0.10 || fabs(bias / n) > 0.05;
}

static int check_memory(const struct row *rows, int n, const struct pipette_gpu_spec *g)
{
	int i, bad = 0;

	printf("%-15s %5s %3s %3s %3s %3s %10s %10s %7s %10s %10s %7s\n", "model", "gpus", "tp",
	       "dp", "cp", "mbs", "allocated", "static", "error", "peak", "predicted", "error");
	for (i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		struct pipette_model m;
		struct pipette_config c;
		struct pipette_memory mem;
		const struct pipette_stage_memory *pk = &mem.peak;
		double stat, peak, es, ep, outside;

		if (row_setup(r, pipette_stack_get(PIPETTE_STACK_NEMO), &m, &c))
			return 1;
		pipette_memory_estimate(&m, g, &c, 1.0, NULL, NULL, &mem);
		stat = (pk->params_bytes + pk->grads_bytes + pk->optimizer_bytes) / PIPETTE_GIB;
		/* torch's reserved peak leaves out the CUDA context and NCCL
		 * buffers: pk->other_bytes less the temporaries. */
		outside = pk->other_bytes - pipette_config_stack(&c)->act_temp_factor *
					    pk->activations_bytes;
		peak = (pk->total_bytes - outside) / PIPETTE_GIB;
		es = stat / r->alloc_gib - 1;
		ep = peak / (r->peak_bytes / PIPETTE_GIB) - 1;
		bad += fabs(es) > 0.03 || fabs(ep) > 0.10;
		printf("%-15s %5d %3d %3d %3d %3d %10.2f %10.2f %+6.1f%% %10.2f %10.2f %+6.1f%%\n",
		       r->model, r->gpus, r->tp, r->dp, r->cp, r->mbs, r->alloc_gib, stat, 100 * es,
		       r->peak_bytes / PIPETTE_GIB, peak, 100 * ep);
	}
	printf("(GiB; targets: static within 3%%, peak within 10%%)\n");
	return bad;
}

/* Whether the published configuration fits, and where the plan for the
 * same job ranks it. */
static int check_fit_and_rank(const struct row *r, const struct pipette_gpu_spec *g)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_memory mem;
	struct pipette_request req;
	struct pipette_cluster_spec cs = { 0 };
	struct pipette_plan *plan = NULL;
	struct pipette_err err;
	struct pipette_stack st;
	char **names;
	int i, nodes = r->gpus / 8, rank, fits;

	row_stack(r, pipette_stack_get(PIPETTE_STACK_NEMO)->tp_exposed, 0, &st);
	if (row_setup(r, &st, &m, &c))
		return 1;
	pipette_memory_estimate(&m, g, &c, 1.0, NULL, NULL, &mem);
	fits = mem.fits;
	names = calloc((size_t)nodes, sizeof(char *));
	for (i = 0; i < nodes; i++) {
		names[i] = malloc(16);
		snprintf(names[i], 16, "n%d", i + 1);
	}
	pipette_request_init(&req);
	(void)pipette_strlcpy(req.model, r->model, sizeof(req.model));
	snprintf(req.gpu, sizeof(req.gpu), "H100");
	snprintf(req.stack, sizeof(req.stack), "nemo");
	req.global_batch = r->gbs;
	req.seq_len = r->seq;
	req.top_k = 100000;
	req.mapping = PIPETTE_MAP_BLOCK;
	cs.nodes = nodes;
	cs.node_names = (const char *const *)names;
	cs.gpus_per_node = 8;
	printf("%-15s %5d GPUs  published %s%s: %s", r->model, r->gpus,
	       r->vp > 1 ? "interleaved" : "1f1b", r->adam_bf16 ? ", bf16 Adam states" : "",
	       fits ? "fits" : "DOES NOT FIT");
	/* The plan uses the preset (a padded vocabulary differs by <1%) and
	 * the nemo stack's defaults. */
	if (pipette_plan_compute(&req, &cs, &plan, &err) == 0) {
		rank = validate_plan_rank(plan, &c);
		if (rank > 0)
			printf(", ranked %d of %d feasible", rank, pipette_plan_ranked_count(plan));
		else
			printf(", not among the plan's %d feasible", pipette_plan_ranked_count(plan));
		printf("; pipette's pick %.2f s", pipette_plan_iteration_s(plan));
		pipette_plan_destroy(plan);
	} else {
		printf(", plan: %s", err.msg);
	}
	printf("\n");
	for (i = 0; i < nodes; i++)
		free(names[i]);
	free(names);
	return !fits;
}

int validate_current(struct pipette_timer *t, const char *datadir)
{
	const struct pipette_gpu_spec *h100 = pipette_gpu_lookup("h100", NULL);
	struct row time_rows[MAX_ROWS], mem_rows[MAX_ROWS], all[MAX_ROWS];
	char path[4096];
	int nt, nm, na = 0, i, failures = 0;

	snprintf(path, sizeof(path), "%s/nemo-h100-time.tsv", datadir);
	nt = read_rows(path, 0, time_rows, MAX_ROWS);
	snprintf(path, sizeof(path), "%s/nemo-h100-memory.tsv", datadir);
	nm = read_rows(path, 1, mem_rows, MAX_ROWS);
	if (nt < 0 || nm < 0)
		return 1;
	/* Every measured step time, the memory logs' included. */
	for (i = 0; i < nt; i++)
		all[na++] = time_rows[i];
	for (i = 0; i < nm && na < MAX_ROWS; i++)
		if (mem_rows[i].step_s > 0)
			all[na++] = mem_rows[i];
	printf("Current stack: NeMo 2.0 on H100 (tests/data/stacks), stack nemo\n");
	failures += check_time(t, h100, all, na);
	printf("\n");
	failures += check_memory(mem_rows, nm, h100);
	printf("\nEvery published configuration under the nemo stack:\n");
	for (i = 0; i < na; i++)
		failures += check_fit_and_rank(&all[i], h100);
	printf("\n");
	return failures;
}
