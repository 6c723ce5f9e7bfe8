/* bench_schedule: simulations per second of the pipeline event simulation
 * for p = 64 ranks and m = 512 micro-batches (issue 3 asks for well under
 * 1 ms per simulation on one core).  Three figures per schedule:
 *   "resim": same shape, new stage times (the search's inner loop; the
 *            operation lists are cached in the workspace), jumping over
 *            the steady state (with the share of ops simulated), and
 *            "full", every op simulated (in.full), as before issue 30;
 *   "2 shapes": m alternates 512 and 448 in one workspace, which keeps
 *            the last few shapes' orders, so neither is rebuilt;
 *   "new shape": m cycles through 5 values (512, 576, 448, 640, 384; mean
 *            512), more than the workspace keeps, so every call builds the
 *            lists anew.
 * The stages differ by 1 us, a long transient: the jump saves most on
 * long runs that settle (m >> p; bench_plan.c's 8-node plans).
 * Then issue 30's 8-node shapes (p = 8, interleaved with v = 10 and
 * V-ZB, m = 2048), whose orders are kept compact (schedule.c, "compact
 * orders"): the ops stored, and "new shape" against every order built
 * whole (in.full) as before.
 * Wall-clock figures: on a shared machine take the minimum of a few runs.
 * Not a test: it prints figures and always exits 0 unless a call fails. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "estimate/schedule.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The "new shape" figure with every order built whole (in.full), as
 * before compact orders: mean seconds per call over ~1 s. */
static double cold_whole(struct pipette_sched *s, struct pipette_sched_input in, int P, int M)
{
	static const int dm[5] = { 0, 1, -1, 2, -2 };
	struct pipette_sched_result res;
	struct pipette_err err;
	double t0 = now();
	int n = 0;

	in.full = 1;
	do {
		in.m = M + dm[n % 5] * P;
		pipette_sched_simulate(s, &in, &res, &err);
		n++;
	} while (now() - t0 < 1.0);
	return (now() - t0) / n;
}

static int bench(enum pipette_schedule_kind kind, int P, int v, int M)
{
	static double tf[256], tb[256], tw[256], cf[256], cb[256];
	struct pipette_sched_input in = { kind, P, v, M, tf, tb, tw, cf, cb, 0 };
	struct pipette_sched_result res;
	struct pipette_err err;
	struct pipette_sched *s;
	double t0, t_resim, t_full, t_build, t_cold, t_whole, sink = 0;
	long ops, simulated, stored;
	int i, n_resim = 0, n_full = 0, n_build = 0, n_cold = 0;

	for (i = 0; i < P * v; i++) {
		tf[i] = 1.0e-3 + 1e-6 * i;
		tb[i] = 1.1e-3;
		tw[i] = 0.9e-3;
		cf[i] = cb[i] = 5e-5;
	}
	s = pipette_sched_create();
	if (!s || pipette_sched_simulate(s, &in, &res, &err)) {
		fprintf(stderr, "bench_schedule: %s\n", s ? err.msg : "out of memory");
		pipette_sched_destroy(s);
		return -1;
	}
	ops = res.n_ops;
	stored = res.n_stored;
	t0 = now();
	do {
		tf[n_resim % (P * v)] += 1e-9;	/* new times, same shape */
		pipette_sched_simulate(s, &in, &res, &err);
		sink += res.makespan;
		n_resim++;
	} while (now() - t0 < 1.0);
	t_resim = (now() - t0) / n_resim;
	simulated = res.n_simulated;

	in.full = 1;
	t0 = now();
	do {
		tf[n_full % (P * v)] += 1e-9;
		pipette_sched_simulate(s, &in, &res, &err);
		sink += res.makespan;
		n_full++;
	} while (now() - t0 < 1.0);
	t_full = (now() - t0) / n_full;
	in.full = 0;

	t0 = now();
	do {
		in.m = n_build % 2 ? M - P : M;
		pipette_sched_simulate(s, &in, &res, &err);
		sink += res.makespan;
		n_build++;
	} while (now() - t0 < 1.0);
	t_build = (now() - t0) / n_build;

	t0 = now();
	do {
		static const int dm[5] = { 0, 1, -1, 2, -2 };

		in.m = M + dm[n_cold % 5] * P;
		pipette_sched_simulate(s, &in, &res, &err);
		sink += res.makespan;
		n_cold++;
	} while (now() - t0 < 1.0);
	t_cold = (now() - t0) / n_cold;
	t_whole = stored < ops ? cold_whole(s, in, P, M) : t_cold;
	pipette_sched_destroy(s);
	printf("%-12s p=%d v=%d m=%d ops=%ld: resim %.3f ms (%.0f%% of ops; full %.3f ms), "
	       "2 shapes %.3f ms, new shape %.3f ms (%ld ops stored; built whole %.3f ms)  [%g]\n",
	       pipette_schedule_name(kind), P, v, M, ops, t_resim * 1e3, 100.0 * simulated / ops,
	       t_full * 1e3, t_build * 1e3, t_cold * 1e3, stored, t_whole * 1e3,
	       sink > 0 ? 1.0 : 0.0);
	return 0;
}

int main(void)
{
	int rc = 0;

	rc |= bench(PIPETTE_SCHED_1F1B, 64, 1, 512);
	rc |= bench(PIPETTE_SCHED_INTERLEAVED, 64, 2, 512);
	rc |= bench(PIPETTE_SCHED_ZB_H1, 64, 1, 512);
	rc |= bench(PIPETTE_SCHED_V_MIN, 64, 2, 512);
	rc |= bench(PIPETTE_SCHED_V_HALF, 64, 2, 512);
	rc |= bench(PIPETTE_SCHED_V_ZB, 64, 2, 512);
	/* issue 30's 8-node plan: long runs, kept compact */
	rc |= bench(PIPETTE_SCHED_INTERLEAVED, 8, 10, 2048);
	rc |= bench(PIPETTE_SCHED_V_ZB, 8, 2, 2048);
	return rc ? 1 : 0;
}
