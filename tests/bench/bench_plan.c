/* bench_plan: quality and speed of the search and the mapping.
 *
 *  1. Every shipped example cache (etc/examples): the planned mapping's
 *     iteration time against Megatron's default order (ratio >= 1; fails
 *     when the plan is worse), for the searched configuration and, on the
 *     heterogeneous ones, for two pinned shapes whose pipelines and DP
 *     rings span nodes.
 *  2. The <= 8-node examples: the node order annealing finds (with n!/4
 *     estimates, slots left alone; the plan itself brute-forces them)
 *     against the exhaustive optimum over node orders, on the plan's
 *     configuration and on a few pipeline-heavy ones (fails when they
 *     differ, unless the annealer stopped because it was within 0.5% of
 *     the placement bound and the optimum is within 0.5% of it).
 *  3. Speed: full pipette_plan_compute for llama3-70b on 16 x 8 GPUs
 *     (hetero-16x8 example), CPU time of this process; then issue 17's
 *     targets, each plan in a fresh child (CPU time and peak RSS from
 *     wait4): hetero-8x8 (0.2 s, exact mapping) and generated 1024, 2048
 *     and 4096-node caches (issue 30's 1.0 s at 2048 and 2.5 s at 4096,
 *     each 256 MiB; mapping gains no lower than 1.18 and 1.15 at 1024 and
 *     2048).
 *  4. Issue 30's hard cases: llama3-70b on 8 and 16 nodes x 8 H100 at
 *     global batch 2048 and 4096, sequence 8192 (10 chunks x 2048
 *     micro-batches and the like), for every stack, each plan in a fresh
 *     child on the cache of `pipette bandwidth generate --gpu H100 --nodes
 *     N --seed 1` (the issue's), beside the target of 0.2 s.
 * Prints the figures and the load average; exits 1 on a quality failure,
 * or on a missed target when the load average is below 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "inputs/bwcache.h"
#include "inputs/cluster.h"
#include "inputs/stack.h"
#include "plan/mapping.h"
#include "plan/plan.h"
#include "estimate/timing.h"

#ifndef EXAMPLES_DIR
#define EXAMPLES_DIR "etc/examples"
#endif
#ifndef PIPETTE_BIN
#define PIPETTE_BIN "./pipette"
#endif

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char **node_names(int n)
{
	char **v = calloc((size_t)n, sizeof(char *));
	int i;

	for (i = 0; v && i < n; i++) {
		v[i] = malloc(16);
		if (v[i])
			snprintf(v[i], 16, "node%d", i + 1);
	}
	return v;
}

static void free_names(char **v, int n)
{
	int i;

	for (i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* Plan with tp, pp, dp pinned (0 = searched). */
/* The stack the next plans are made for ("" = the default). */
static const char *bench_stack = "";

static int plan_pinned(const char *model, const char *bw, int nodes, long gb, long seq,
		       const int pin[3], struct pipette_plan **out, double *cpu_s)
{
	struct pipette_request req;
	struct pipette_cluster_spec cs;
	struct pipette_err err;
	char **names = node_names(nodes);
	double t0;
	int rc;

	pipette_request_init(&req);
	snprintf(req.model, sizeof(req.model), "%s", model);
	snprintf(req.gpu, sizeof(req.gpu), "H100");
	snprintf(req.bandwidth, sizeof(req.bandwidth), "%s", bw);
	snprintf(req.stack, sizeof(req.stack), "%s", bench_stack);
	req.global_batch = gb;
	req.seq_len = seq;
	if (pin) {
		req.pins.tp = pin[0];
		req.pins.pp = pin[1];
		req.pins.dp = pin[2];
	}
	memset(&cs, 0, sizeof(cs));
	cs.nodes = nodes;
	cs.node_names = (const char *const *)names;
	cs.gpus_per_node = 8;
	t0 = cpu_now();
	rc = pipette_plan_compute(&req, &cs, out, &err);
	*cpu_s = cpu_now() - t0;
	if (rc)
		fprintf(stderr, "bench_plan: %s: %s\n", bw, err.msg);
	free_names(names, nodes);
	return rc;
}

static int plan_for(const char *model, const char *bw, int nodes, long gb, long seq,
		    struct pipette_plan **out, double *cpu_s)
{
	return plan_pinned(model, bw, nodes, gb, seq, NULL, out, cpu_s);
}

/* Annealing (the path of clusters over 8 nodes, here with a quarter of
 * the brute-force count) against brute force on one config. */
static int compare_exhaustive(const char *path, int nodes, const struct pipette_config *c)
{
	struct pipette_err err;
	struct pipette_bwcache *bw = NULL;
	struct pipette_cluster *cl = NULL;
	struct pipette_timer *t = pipette_timer_create();
	const struct pipette_gpu_spec *gpu = pipette_gpu_lookup("H100", &err);
	struct pipette_model m;
	struct pipette_mapping_opts o;
	struct pipette_mapping_stats sa, ex;
	char **names = node_names(nodes);
	int *sig = calloc((size_t)pipette_config_world(c), sizeof(int)), rv = -1, k, equal, stopped;

	if (pipette_model_preset("llama3-70b", &m, &err) || pipette_bwcache_load(path, &bw, &err) ||
	    !(cl = pipette_cluster_create((const char *const *)names, nodes, 8, NULL, gpu, bw, 0,
					  &err))) {
		fprintf(stderr, "bench_plan: %s\n", err.msg);
		goto out;
	}
	pipette_mapping_opts_init(&o);
	o.seed = 0x7069706574746531ULL;
	o.force_anneal = 1;
	o.no_slots = 1;		/* brute force covers node orders only */
	o.budget = 1;
	for (k = 2; k <= nodes; k++)
		o.budget *= k;
	o.budget /= 4;
	if (pipette_mapping_search(t, &m, gpu, c, cl, &o, sig, &sa, &err))
		goto out;
	o.budget = 0;
	o.force_anneal = 0;
	o.force_exhaustive = 1;
	if (pipette_mapping_search(t, &m, gpu, c, cl, &o, sig, &ex, &err))
		goto out;
	/* The heuristic may stop once what is left to gain is under 0.5% of
	 * its time (mapping.c's GAP_STOP): equal, or stopped there. */
	equal = fabs(sa.best_s - ex.best_s) <= 1e-9 * ex.best_s;
	stopped = sa.end == PIPETTE_MAP_END_BOUND && sa.best_s - ex.best_s <= 0.005 * sa.best_s;
	printf("  tp %d pp %d dp %d cp %d %-11s block %.4f s  annealing %.4f s (%ld est.)  "
	       "exhaustive %.4f s (%ld est.)  %s\n", c->tp, c->pp, c->dp, c->cp,
	       pipette_schedule_name(c->schedule), sa.block_s, sa.best_s, sa.evaluations,
	       ex.best_s, ex.evaluations, equal ? "equal" : stopped
	       ? "stopped within 0.5% of the placement bound, as designed" : "DIFFERENT");
	rv = equal || stopped ? 0 : 1;
out:
	free(sig);
	free_names(names, nodes);
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);
	pipette_timer_destroy(t);
	return rv;
}


/* In a child: write the bench's generated cache of `nodes` x 8 GPUs (the
 * examples' figures: H100 nominal x 0.9, 5% slow pairs, 16-node leaf
 * switches, one slow switch, one degraded node; seed = nodes) to path. */
static int write_generated(int nodes, const char *path)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw;
	struct pipette_err err;
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		bench_gen(&g, nodes);
		_exit(pipette_bwcache_generate(&g, &bw, &err) || pipette_bwcache_save(bw, path, &err));
	}
	return pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	       WEXITSTATUS(status);
}

/* In a child: one full plan of llama3-70b on `nodes` x 8 GPUs from the
 * cache at path; its CPU time and peak RSS from wait4, its mapping gain
 * through a pipe. */
static int child_plan(const char *path, int nodes, long gb, long seq, double *cpu,
		      double *rss_mib, double *gain)
{
	int fd[2];
	pid_t pid;

	if (pipe(fd))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct pipette_plan *plan;
		double c, g;

		close(fd[0]);
		if (plan_for("llama3-70b", path, nodes, gb, seq, &plan, &c))
			_exit(1);
		g = pipette_plan_mapping_gain(plan);
		_exit(write(fd[1], &g, sizeof(g)) != sizeof(g));
	}
	close(fd[1]);
	if (bench_wait(pid, cpu, rss_mib) || read(fd[0], gain, sizeof(*gain)) != sizeof(*gain)) {
		close(fd[0]);
		return -1;
	}
	close(fd[0]);
	return 0;
}

/* The targets of issues 17 and 30, each in a fresh process: the 8 x 8
 * example (0.2 s), and generated 1024, 2048 and 4096-node clusters (gains
 * no lower than 1.18 and 1.15 at 1024 and 2048; 1.0 s at 2048 and 2.5 s
 * at 4096, each within 256 MiB).  A miss fails only when the machine is idle enough
 * (load average below 1) for the figures to mean it. */
static int speed_targets(void)
{
	/* issue 30's targets at 2048 and 4096 nodes (issue 17's were 2 s
	 * and 5 s, 256 and 512 MiB) */
	static const struct { int nodes; long gb; double cpu, mib, gain; } run[] = {
		{ 1024, 2048, 0, 0, 1.18 }, { 2048, 4096, 1.0, 256, 1.15 },
		{ 4096, 8192, 2.5, 256, 0 },
	};
	double load = bench_loadavg(), cpu, mib, gain;
	char path[1024];
	size_t i;
	int miss = 0;

	snprintf(path, sizeof(path), "%s/hetero-8x8-h100.json", EXAMPLES_DIR);
	if (child_plan(path, 8, 256, 4096, &cpu, &mib, &gain))
		return 1;
	printf("  8 x 8 GPUs (hetero-8x8, llama3-70b, exact mapping): %.3f s, %.0f MiB, gain "
	       "%.4f  (target 0.2 s: %s)\n", cpu, mib, gain, cpu <= 0.2 ? "met" : "MISSED");
	miss |= cpu > 0.2;
	for (i = 0; i < sizeof(run) / sizeof(run[0]); i++) {
		char tmp[] = "/tmp/bench_plan_XXXXXX.json";
		int fd = mkstemps(tmp, 5), bad;

		if (fd < 0)
			return 1;
		close(fd);
		bad = write_generated(run[i].nodes, tmp) ||
		      child_plan(tmp, run[i].nodes, run[i].gb, 8192, &cpu, &mib, &gain);
		bench_remove_cache(tmp);
		if (bad) {
			fprintf(stderr, "bench_plan: the %d-node run failed\n", run[i].nodes);
			return 1;
		}
		printf("  %d x 8 GPUs (generated, gb %ld): %.3f s, peak RSS %.0f MiB, mapping gain "
		       "%.4f", run[i].nodes, run[i].gb, cpu, mib, gain);
		if (run[i].cpu > 0) {
			printf("  (targets %.1f s, %.0f MiB: %s)", run[i].cpu, run[i].mib,
			       cpu <= run[i].cpu && mib <= run[i].mib ? "met" : "MISSED");
			miss |= cpu > run[i].cpu || mib > run[i].mib;
		}
		if (run[i].gain > 0) {
			printf("  (gain target %.2f: %s)", run[i].gain,
			       gain >= run[i].gain ? "met" : "MISSED");
			miss |= gain < run[i].gain;
		}
		printf("\n");
	}
	printf("  load average %.2f: %s\n", load, miss ? (load >= 0 && load < 1
		? "a target was missed on an idle machine (fails)"
		: "a target was missed on a loaded machine (not failed)") : "every target met");
	return miss && load >= 0 && load < 1;
}

/* In a child: `pipette bandwidth generate --gpu H100 --nodes N --seed 1
 * -o path`, the cache issue 30 timed its plans on. */
static int write_issue_cache(int nodes, const char *path)
{
	char n[16];
	pid_t pid;
	int status;

	snprintf(n, sizeof(n), "%d", nodes);
	pid = fork();
	if (pid == 0) {
		execl(PIPETTE_BIN, PIPETTE_BIN, "bandwidth", "generate", "--gpu", "H100", "--nodes", n,
		      "--seed", "1", "-o", path, (char *)NULL);
		_exit(127);
	}
	return pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	       WEXITSTATUS(status);
}

/* Issue 30's target: every plan up to 16 nodes x 8 GPUs, any global
 * batch up to 4096 and any stack, in 0.2 s of CPU. */
#define HARD_TARGET_S 0.2

/* The hard cases (item 4 above).  A miss fails only when the machine is
 * idle enough (load average below 1) for the figures to mean it. */
static int hard_cases(void)
{
	static const int nodes[] = { 8, 16 };
	static const long gbs[] = { 2048, 4096 };
	double load = bench_loadavg(), cpu, mib, gain, worst = 0;
	size_t i, j;
	int st, miss = 0;

	printf("issue 30's hard cases (llama3-70b, sequence 8192, generated --seed 1 caches):\n");
	for (i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		char tmp[] = "/tmp/bench_plan_XXXXXX.json";
		int fd = mkstemps(tmp, 5);

		if (fd < 0)
			return 1;
		close(fd);
		if (write_issue_cache(nodes[i], tmp)) {
			fprintf(stderr, "bench_plan: %s bandwidth generate failed\n", PIPETTE_BIN);
			bench_remove_cache(tmp);
			return 1;
		}
		for (st = 0; st < PIPETTE_STACK_COUNT; st++)
			for (j = 0; j < sizeof(gbs) / sizeof(gbs[0]); j++) {
				bench_stack = pipette_stack_get((enum pipette_stack_id)st)->name;
				if (child_plan(tmp, nodes[i], gbs[j], 8192, &cpu, &mib, &gain)) {
					printf("  %2d x 8 GPUs, gb %ld, %-14s no plan\n", nodes[i], gbs[j],
					       bench_stack);
					continue;
				}
				printf("  %2d x 8 GPUs, gb %ld, %-14s %.3f s, %3.0f MiB, gain %.4f  "
				       "(target %.1f s: %s)\n", nodes[i], gbs[j], bench_stack, cpu, mib,
				       gain, HARD_TARGET_S, cpu <= HARD_TARGET_S ? "met" : "MISSED");
				miss |= cpu > HARD_TARGET_S;
				worst = cpu > worst ? cpu : worst;
			}
		bench_remove_cache(tmp);
	}
	bench_stack = "";
	printf("  slowest %.3f s; load average %.2f: %s\n", worst, load, miss ? (load >= 0 && load < 1
		? "a target was missed on an idle machine (fails)"
		: "a target was missed on a loaded machine (not failed)") : "every target met");
	return miss && load >= 0 && load < 1;
}

int main(void)
{
	/* pinned: tp, pp, dp of shapes that cross nodes with PP and DP */
	static const struct { const char *file; int nodes; const char *model; long gb, seq;
			      int pinned[2][3]; }
	ex[] = {
		{ "uniform-4x8-h100.json", 4, "llama3-8b", 256, 8192, { { 0 } } },
		{ "hetero-8x8-h100.json", 8, "llama3-70b", 256, 4096,
		  { { 8, 4, 2 }, { 8, 8, 1 } } },
		{ "hetero-16x8-h100.json", 16, "llama3-70b", 1024, 8192,
		  { { 8, 4, 4 }, { 8, 8, 2 } } },
		{ "hetero-128x8-h100.json", 128, "llama3-70b", 2048, 8192,
		  { { 8, 4, 32 }, { 8, 8, 16 } } },
		/* Small batches of a small model: few micro-batches per
		 * pipeline, so the DP and PP transfers over the slow links are
		 * a large share of the step (where the mapping pays). */
		{ "hetero-16x8-h100.json", 16, "llama3-8b", 128, 4096, { { 0 } } },
		{ "hetero-128x8-h100.json", 128, "llama3-8b", 256, 4096, { { 0 } } },
	};
	struct pipette_plan *plan;
	char path[1024];
	double cpu;
	size_t i;
	int fail = 0, pk;

	printf("mapping quality: planned vs default (Megatron order) iteration time\n");
	for (i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
		const struct pipette_config *c;
		double gain;

		snprintf(path, sizeof(path), "%s/%s", EXAMPLES_DIR, ex[i].file);
		if (plan_for(ex[i].model, path, ex[i].nodes, ex[i].gb, ex[i].seq, &plan, &cpu))
			return 1;
		c = pipette_plan_config(plan);
		gain = pipette_plan_mapping_gain(plan);
		printf("  %-24s %-10s tp %d pp %d dp %d cp %d: default %.4f s, planned %.4f s, "
		       "ratio %.4f%s  (%.3f s CPU)\n", ex[i].file, ex[i].model, c->tp, c->pp,
		       c->dp, c->cp, pipette_plan_block_iteration_s(plan),
		       pipette_plan_iteration_s(plan), gain, gain < 1 ? "  WORSE" : "", cpu);
		if (gain < 1)
			fail = 1;
		/* The searched configuration may keep every heavy transfer off
		 * the inter-node links (TP and DP inside a node, PP hidden by
		 * the schedule): pinned shapes whose DP rings and pipelines
		 * span nodes show what the mapping does where links matter. */
		for (pk = 0; pk < 2 && ex[i].pinned[pk][0]; pk++) {
			struct pipette_plan *pp;
			double pcpu, pg;

			if (plan_pinned(ex[i].model, path, ex[i].nodes, ex[i].gb, ex[i].seq,
					ex[i].pinned[pk], &pp, &pcpu))
				return 1;
			c = pipette_plan_config(pp);
			pg = pipette_plan_mapping_gain(pp);
			printf("  %-24s %-10s tp %d pp %d dp %d cp %d: default %.4f s, planned %.4f s, "
			       "ratio %.4f%s  (pinned, %s)\n", "", ex[i].model, c->tp, c->pp, c->dp,
			       c->cp, pipette_plan_block_iteration_s(pp), pipette_plan_iteration_s(pp),
			       pg, pg < 1 ? "  WORSE" : "", pipette_schedule_name(c->schedule));
			if (pg < 1)
				fail = 1;
			pipette_plan_destroy(pp);
		}
		c = pipette_plan_config(plan);
		if (ex[i].nodes <= 8 && !strcmp(ex[i].model, "llama3-70b")) {
			struct pipette_config v = *c;
			static const int shapes[][3] = { { 8, 8, 1 }, { 4, 8, 2 }, { 8, 4, 2 },
							 { 2, 8, 4 } };
			size_t k;

			printf(" annealing vs exhaustive on %s:\n", ex[i].file);
			fail |= compare_exhaustive(path, ex[i].nodes, c);
			for (k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
				pipette_config_init(&v);
				v.tp = shapes[k][0];
				v.pp = shapes[k][1];
				v.dp = shapes[k][2];
				v.global_batch = ex[i].gb;
				v.seq_len = ex[i].seq;
				v.sequence_parallel = v.tp > 1;
				fail |= compare_exhaustive(path, ex[i].nodes, &v);
			}
		}
		pipette_plan_destroy(plan);
	}

	printf("speed (CPU time of one full plan, llama3-70b):\n");
	snprintf(path, sizeof(path), "%s/hetero-16x8-h100.json", EXAMPLES_DIR);
	if (plan_for("llama3-70b", path, 16, 1024, 8192, &plan, &cpu))
		return 1;
	printf("  16 x 8 GPUs (hetero-16x8):   %.3f s  (target 0.2 s: %s)\n", cpu,
	       cpu <= 0.2 ? "met" : "MISSED");
	pipette_plan_destroy(plan);
	/* torchtitan adds FSDP's shard degrees and reshard settings */
	bench_stack = "torchtitan";
	if (plan_for("llama3-8b", path, 16, 256, 8192, &plan, &cpu))
		return 1;
	printf("  16 x 8 GPUs, torchtitan, llama3-8b (FSDP/HSDP searched): %.3f s\n", cpu);
	pipette_plan_destroy(plan);
	bench_stack = "";
	fail |= speed_targets();
	fail |= hard_cases();
	return fail;
}
