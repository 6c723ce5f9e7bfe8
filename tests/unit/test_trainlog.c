/* Unit tests: the training-log parsers (trainlog.h).
 *
 * Fixtures: tests/data/trainlogs/, written by make_fixtures.py there with
 * the stacks' own format strings.  The expected figures are the printed
 * ones: a Megatron line's "elapsed time per iteration (ms)", NeMo's
 * "train_step_timing in s", torchtitan's rounded tps.  The steady-state
 * figures are numpy.percentile's default (linear) on the sample where a
 * report of the mean of k steps appears k times, worked out by hand from
 * the printed figures (and checked with a few lines of Python). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inputs/trainlog.h"

#include "check_run.h"

#define LOGS TEST_DATADIR "/trainlogs"
#define TOL 1e-9

static struct pipette_trainlog *read_ok(const char *name, enum pipette_stack_id stack)
{
	struct pipette_err err = { .msg = "" };
	struct pipette_trainlog *l = NULL;
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", LOGS, name);
	ck_assert_msg(pipette_trainlog_read(path, stack, &l, &err) == 0, "%s: %s", name, err.msg);
	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(l->stack, stack);
	return l;
}

static struct pipette_trainlog *parse_ok(const char *text, enum pipette_stack_id stack)
{
	struct pipette_err err = { .msg = "" };
	struct pipette_trainlog *l = NULL;

	ck_assert_msg(pipette_trainlog_parse(text, strlen(text), "t.log", stack, &l, &err) == 0,
		      "%s", err.msg);
	return l;
}

/* The text fails with exactly `want`. */
static void parse_fails(const char *text, enum pipette_stack_id stack, const char *want)
{
	struct pipette_err err = { .msg = "" };
	struct pipette_trainlog *l = (struct pipette_trainlog *)&err;

	ck_assert_int_eq(pipette_trainlog_parse(text, strlen(text), "t.log", stack, &l, &err), -1);
	ck_assert_ptr_null(l);
	ck_assert_msg(!strcmp(err.msg, want), "\n got: %s\nwant: %s", err.msg, want);
}

static void read_fails(const char *path, enum pipette_stack_id stack, const char *fragment)
{
	struct pipette_err err = { .msg = "" };
	struct pipette_trainlog *l = NULL;

	ck_assert_int_eq(pipette_trainlog_read(path, stack, &l, &err), -1);
	ck_assert_ptr_null(l);
	ck_assert_msg(strstr(err.msg, fragment) != NULL, "'%s' lacks '%s'", err.msg, fragment);
}

static const struct pipette_trainlog_mem *mem_of(const struct pipette_trainlog *l, int rank,
						  int local)
{
	int i;

	for (i = 0; i < l->nmem; i++)
		if (l->mem[i].rank == rank && l->mem[i].local_rank == local)
			return &l->mem[i];
	ck_abort_msg("no memory report of rank %d (local %d)", rank, local);
	return NULL;
}

static void steady_ok(const struct pipette_trainlog *l, long warmup, long used, long skipped,
		      double median, double p10, double p90, double mad)
{
	struct pipette_trainlog_steady st;
	struct pipette_err err = { .msg = "" };

	ck_assert_msg(pipette_trainlog_steady(l, warmup, &st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(st.used, used);
	ck_assert_int_eq(st.skipped, skipped);
	ck_assert_double_eq_tol(st.median_s, median, TOL);
	ck_assert_double_eq_tol(st.p10_s, p10, TOL);
	ck_assert_double_eq_tol(st.p90_s, p90, TOL);
	ck_assert_double_eq_tol(st.mad_s, mad, TOL);
}

/* Megatron-LM today: a first-iteration report, then every 5 iterations;
 * 8 ranks of data-parallel rank 0 over 4 stages report memory twice. */
START_TEST(test_megatron)
{
	static const long it[] = { 1, 5, 10, 15, 20, 25, 30, 35, 40 };
	static const long first[] = { 1, 1, 6, 11, 16, 21, 26, 31, 36 };
	static const double ms[] = { 24831.6, 6225.3, 1499.8, 1500.8, 1501.8, 1580.4, 1499.2,
				     1500.2, 1501.2 };
	static const int ranks[] = { 0, 1, 4, 5, 8, 9, 12, 13 };
	struct pipette_trainlog *l = read_ok("megatron.log", PIPETTE_STACK_MEGATRON);
	const struct pipette_trainlog_mem *m;
	int i;

	ck_assert_int_eq(l->nsteps, 9);
	ck_assert_int_eq(l->nruns, 1);
	for (i = 0; i < 9; i++) {
		ck_assert_int_eq(l->steps[i].iteration, it[i]);
		ck_assert_int_eq(l->steps[i].first, first[i]);
		ck_assert_double_eq_tol(l->steps[i].step_s, ms[i] / 1000, TOL);
		ck_assert_double_eq(l->steps[i].tokens_per_s, 0);
		ck_assert_int_eq(l->steps[i].run, 0);
	}
	ck_assert_int_eq(l->steps[0].line, 20);
	ck_assert_int_eq(l->steps[8].line, 48);
	ck_assert_int_eq(l->nmem, 8);
	for (i = 0; i < 8; i++) {
		m = mem_of(l, ranks[i], -1);
		/* world 16 / pp 4: stage = rank / 4 */
		ck_assert_int_eq(m->stage, ranks[i] / 4);
	}
	/* The report after 5 iterations, the higher one. */
	m = mem_of(l, 0, -1);
	ck_assert_double_eq_tol(m->allocated_gib, 52310.45 / 1024, TOL);
	ck_assert_double_eq_tol(m->reserved_gib, 54358.45 / 1024, TOL);
	m = mem_of(l, 13, -1);
	ck_assert_double_eq_tol(m->allocated_gib, 49876.81 / 1024, TOL);
	ck_assert_double_eq_tol(m->reserved_gib, 51924.81 / 1024, TOL);
	/* Default warm-up 10: the reports of iterations 1-5 and 6-10 go
	 * (iteration 1's report is covered again by the next one); six
	 * reports of 5 steps: 1499.2 1500.2 1500.8 1501.2 1501.8 1580.4. */
	steady_ok(l, -1, 30, 10, 1.501, 1.4992, 1.5804, 0.0008);
	/* No warm-up: the mean of iterations 1-5 counts 5 times. */
	steady_ok(l, 0, 40, 0, 1.501, 1.4992, 6.2253, 0.001);
	pipette_trainlog_destroy(l);
}
END_TEST

/* What each log states of its job's configuration, for observe to hold
 * against the plan (issue 28, item 4): Megatron's arguments, torchtitan's
 * mesh and tokens per step; NeMo's log states none; runs of one log that
 * state different values leave -1. */
static void stated_eq(const struct pipette_trainlog_stated *s, long world, long tp, long pp,
		      long cp, long dp, long rep, long shard, long gb, long seq, double tokens)
{
	ck_assert_int_eq(s->world, world);
	ck_assert_int_eq(s->tp, tp);
	ck_assert_int_eq(s->pp, pp);
	ck_assert_int_eq(s->cp, cp);
	ck_assert_int_eq(s->dp, dp);
	ck_assert_int_eq(s->dp_replicate, rep);
	ck_assert_int_eq(s->dp_shard, shard);
	ck_assert_int_eq(s->global_batch, gb);
	ck_assert_int_eq(s->seq_len, seq);
	ck_assert_double_eq(s->tokens_per_step, tokens);
}

START_TEST(test_stated_config)
{
	struct pipette_trainlog *l = read_ok("megatron.log", PIPETTE_STACK_MEGATRON);
	struct pipette_file f;
	struct pipette_err err;

	/* the log's digest: with the plan's hash, which job it is of */
	ck_assert_int_eq(pipette_read_file(LOGS "/megatron.log", NULL, 1 << 20, &f, &err), 0);
	ck_assert_int_eq(memcmp(l->sha256, f.sha256, sizeof(f.sha256)), 0);
	pipette_file_free(&f);

	/* its arguments: no context_parallel_size line */
	stated_eq(&l->stated, 16, 2, 4, 0, 2, 0, 0, 64, 4096, 0);
	pipette_trainlog_destroy(l);
	l = read_ok("megatron-2022.log", PIPETTE_STACK_MEGATRON_2022);
	stated_eq(&l->stated, 8, 2, 2, 0, 0, 0, 0, 0, 0, 0);
	pipette_trainlog_destroy(l);
	l = read_ok("torchtitan.log", PIPETTE_STACK_TORCHTITAN);
	/* pp=2, dp_replicate=1, dp_shard=2, cp=1, tp=2 */
	stated_eq(&l->stated, 8, 2, 2, 1, 2, 1, 2, 0, 0, 131072);
	pipette_trainlog_destroy(l);
	l = read_ok("nemo.log", PIPETTE_STACK_NEMO);
	stated_eq(&l->stated, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	pipette_trainlog_destroy(l);
	/* A restart on other GPUs appended to the same log: two world sizes;
	 * "None" states nothing. */
	l = parse_ok("------------------------ arguments ------------------------\n"
		     "  world_size ...................................... 16\n"
		     "  seq_length ...................................... None\n"
		     "  global_batch_size ............................... 64\n"
		     " iteration 1/ 10 | elapsed time per iteration (ms): 100.0 |\n"
		     "------------------------ arguments ------------------------\n"
		     "  world_size ...................................... 32\n"
		     "  global_batch_size ............................... 64\n"
		     " iteration 1/ 10 | elapsed time per iteration (ms): 100.0 |\n",
		     PIPETTE_STACK_MEGATRON);
	stated_eq(&l->stated, -1, 0, 0, 0, 0, 0, 0, 64, 0, 0);
	pipette_trainlog_destroy(l);
	parse_fails("  global_batch_size ............................... 0\n", PIPETTE_STACK_MEGATRON,
		    "t.log: line 1: global_batch_size: 0 is out of range [1, 1073741824]");
}
END_TEST

/* The Megatron of 2022: no time stamp, "{}" memory figures, a restart. */
START_TEST(test_megatron_2022)
{
	struct pipette_trainlog *l = read_ok("megatron-2022.log", PIPETTE_STACK_MEGATRON_2022);
	const struct pipette_trainlog_mem *m;

	ck_assert_int_eq(l->nsteps, 9);
	ck_assert_int_eq(l->nruns, 2);
	ck_assert_int_eq(l->steps[0].iteration, 10);
	ck_assert_int_eq(l->steps[0].first, 1);
	ck_assert_int_eq(l->steps[4].iteration, 50);
	ck_assert_int_eq(l->steps[4].run, 0);
	/* The second run resumes at iteration 21. */
	ck_assert_int_eq(l->steps[5].iteration, 30);
	ck_assert_int_eq(l->steps[5].first, 21);
	ck_assert_int_eq(l->steps[5].run, 1);
	ck_assert_double_eq_tol(l->steps[5].step_s, 3.1205, TOL);
	ck_assert_int_eq(l->nmem, 4);
	m = mem_of(l, 0, -1);
	ck_assert_int_eq(m->stage, 0);
	ck_assert_double_eq_tol(m->allocated_gib, 31023.123046875 / 1024, TOL);
	ck_assert_double_eq_tol(m->reserved_gib, 32559.373046875 / 1024, TOL);
	m = mem_of(l, 5, -1);
	ck_assert_int_eq(m->stage, 1);
	ck_assert_double_eq_tol(m->allocated_gib, 27516.0 / 1024, TOL);
	/* Each run skips its first report (10 steps); 7 reports of 10:
	 * 2897.1 2898.6 2899.0 2900.2 2900.4 2901.3 2902.8. */
	steady_ok(l, -1, 70, 20, 2.9002, 2.8971, 2.9028, 0.0012);
	pipette_trainlog_destroy(l);
}
END_TEST

/* The zero-bubble fork: every iteration logged, four stages of one rank. */
START_TEST(test_megatron_zb)
{
	struct pipette_trainlog *l = read_ok("megatron-zb.log", PIPETTE_STACK_MEGATRON_ZB);
	int r;

	ck_assert_int_eq(l->nsteps, 20);
	ck_assert_int_eq(l->steps[0].first, 1);
	ck_assert_int_eq(l->steps[19].first, 20);
	ck_assert_double_eq_tol(l->steps[0].step_s, 9.8, TOL);
	ck_assert_int_eq(l->nmem, 4);
	for (r = 0; r < 4; r++) {
		const struct pipette_trainlog_mem *m = mem_of(l, r, -1);

		ck_assert_int_eq(m->stage, r);
		ck_assert_double_eq_tol(m->allocated_gib,
					(20000.0 + 1000.0 * (3 - r) + 0.1171875) / 1024, TOL);
	}
	/* Iterations 11-20: 1100 (x2), 1102.5 (x2), ..., 1110 (x2). */
	steady_ok(l, -1, 10, 10, 1.105, 1.1, 1.11, 0.0025);
	steady_ok(l, 18, 2, 18, 1.105, 1.101, 1.109, 0.005);
	pipette_trainlog_destroy(l);
}
END_TEST

/* Megatron-Bridge: Megatron-LM's iteration line at multiples of the
 * interval only, its own memory report in GB (1e9 bytes), no arguments. */
START_TEST(test_megatron_bridge)
{
	struct pipette_trainlog *l = read_ok("megatron-bridge.log", PIPETTE_STACK_MEGATRON_BRIDGE);
	const struct pipette_trainlog_mem *m;

	ck_assert_int_eq(l->nsteps, 6);
	ck_assert_int_eq(l->steps[0].iteration, 5);
	ck_assert_int_eq(l->steps[0].first, 1);
	ck_assert_int_eq(l->steps[1].first, 6);
	ck_assert_double_eq_tol(l->steps[0].step_s, 4.0, TOL);
	ck_assert_int_eq(l->nmem, 2);
	m = mem_of(l, 0, -1);
	ck_assert_int_eq(m->stage, 0);
	ck_assert_double_eq_tol(m->allocated_gib, 61.234e9 / 1073741824.0, TOL);
	ck_assert_double_eq_tol(m->reserved_gib, 70.5e9 / 1073741824.0, TOL);
	m = mem_of(l, 1, -1);
	ck_assert_int_eq(m->stage, -1);	/* no pipeline size stated */
	ck_assert_double_eq_tol(m->allocated_gib, 60.987e9 / 1073741824.0, TOL);
	/* The first 10 steps skipped (two reports); 1.29, 1.28, 1.27, 1.26 s,
	 * five steps each: median 1.275, deviations 0.015 (10), 0.005 (10). */
	steady_ok(l, -1, 20, 10, 1.275, 1.26, 1.29, 0.01);
	pipette_trainlog_destroy(l);
	parse_fails("[Rank 0] (after 5 iterations) memory (GB) | mem-allocated-gigabytes: 1.5 | "
		    "mem-max-reserved-gigabytes: 2.5\n", PIPETTE_STACK_MEGATRON_BRIDGE,
		    "t.log: line 1: mem-max-allocated-gigabytes: missing from the memory report");
}
END_TEST

/* NeMo 2.0's ProgressPrinter with TimingCallback and memory; the
 * validation lines between are noise. */
START_TEST(test_nemo)
{
	struct pipette_trainlog *l = read_ok("nemo.log", PIPETTE_STACK_NEMO);
	const struct pipette_trainlog_mem *m;
	long i;

	ck_assert_int_eq(l->nsteps, 16);
	for (i = 0; i < 16; i++) {
		ck_assert_int_eq(l->steps[i].iteration, i);
		ck_assert_int_eq(l->steps[i].first, i);
	}
	ck_assert_double_eq_tol(l->steps[0].step_s, 31.25, TOL);
	ck_assert_double_eq_tol(l->steps[1].step_s, 4.518, TOL);
	ck_assert_double_eq_tol(l->steps[15].step_s, 2.892, TOL);
	ck_assert_int_eq(l->nmem, 1);
	m = mem_of(l, 0, -1);
	ck_assert_int_eq(m->stage, 0);
	/* 56 GiB + 16 MiB reserved at the last step; 50 GiB + 4 MiB allocated. */
	ck_assert_double_eq_tol(m->reserved_gib, 56.015625, TOL);
	ck_assert_double_eq_tol(m->allocated_gib, 50.00390625, TOL);
	/* Iterations 10-15: 2.893 2.885 2.888 2.89 2.886 2.892. */
	steady_ok(l, -1, 6, 10, 2.889, 2.8855, 2.8925, 0.003);
	pipette_trainlog_destroy(l);
}
END_TEST

/* DeltaTimingCallback: the times are its lines, the memory the printer's. */
START_TEST(test_nemo_delta)
{
	struct pipette_trainlog *l = read_ok("nemo-delta.log", PIPETTE_STACK_NEMO);
	const struct pipette_trainlog_mem *m;

	ck_assert_int_eq(l->nsteps, 14);
	ck_assert_int_eq(l->steps[13].iteration, 13);
	ck_assert_double_eq_tol(l->steps[0].step_s, 35.61234, TOL);
	ck_assert_int_eq(l->nmem, 1);
	m = mem_of(l, 0, -1);
	/* 7.1e10 + 12 x 1024.5 bytes, the highest printed as a whole number. */
	ck_assert_double_eq_tol(m->reserved_gib, 71000012294.0 / 1073741824.0, TOL);
	ck_assert_double_eq_tol(m->allocated_gib, 6.4e10 / 1073741824.0, TOL);
	/* Steps 10-13: 3.0031 2.99902 3.00063 2.9969. */
	steady_ok(l, -1, 4, 10, 2.999825, 2.997536, 3.002359, 0.001865);
	pipette_trainlog_destroy(l);
}
END_TEST

/* torchtitan on 8 GPUs, PP 2: rank 7 (last stage) prints the loss and its
 * steps are kept; rank 0's loss is -1.  step_s = 131072 / (tps x 8). */
START_TEST(test_torchtitan)
{
	static const long it[] = { 1, 10, 20, 30, 40, 50, 60 };
	static const long first[] = { 1, 2, 11, 21, 31, 41, 51 };
	static const double tps[] = { 364, 7992, 8192, 8151, 8233, 8111, 8192 };
	struct pipette_trainlog *l = read_ok("torchtitan.log", PIPETTE_STACK_TORCHTITAN);
	const struct pipette_trainlog_mem *m;
	int i;

	ck_assert_int_eq(l->nsteps, 7);
	ck_assert_int_eq(l->step_rank, 7);
	ck_assert_double_eq(l->tokens_per_step, 131072);
	ck_assert_int_eq(l->world_size, 8);
	for (i = 0; i < 7; i++) {
		ck_assert_int_eq(l->steps[i].iteration, it[i]);
		ck_assert_int_eq(l->steps[i].first, first[i]);
		ck_assert_double_eq(l->steps[i].tokens_per_s, tps[i]);
		ck_assert_double_eq_tol(l->steps[i].step_s, 131072.0 / (tps[i] * 8), TOL);
	}
	ck_assert_int_eq(l->nmem, 2);
	m = mem_of(l, -1, 0);
	ck_assert_int_eq(m->stage, -1);
	ck_assert_double_eq_tol(m->reserved_gib, 61.29, TOL);
	ck_assert_double_eq(m->allocated_gib, 0);
	m = mem_of(l, -1, 7);
	ck_assert_double_eq_tol(m->reserved_gib, 58.94, TOL);
	/* Steps 1 and 2-10 are warm-up; five reports of 10 steps. */
	steady_ok(l, -1, 50, 10, 2.0, 16384.0 / 8233, 16384.0 / 8111, 16384.0 / 8192 -
		  16384.0 / 8233);
	pipette_trainlog_destroy(l);
}
END_TEST

/* torchtitan of 2024 ("wps", no tokens-per-step line): no step time until
 * the caller supplies the tokens per step and the GPUs. */
START_TEST(test_torchtitan_2024_derive)
{
	struct pipette_trainlog *l = read_ok("torchtitan-2024.log", PIPETTE_STACK_TORCHTITAN);
	struct pipette_trainlog_steady st;
	struct pipette_err err = { .msg = "" };
	int i;

	ck_assert_int_eq(l->nsteps, 5);
	ck_assert_int_eq(l->step_rank, -1);
	ck_assert_double_eq(l->tokens_per_step, 0);
	for (i = 0; i < 5; i++)
		ck_assert_double_eq(l->steps[i].step_s, 0);
	ck_assert_double_eq(l->steps[1].tokens_per_s, 6021);
	ck_assert_double_eq_tol(mem_of(l, -1, -1)->reserved_gib, 70.9, TOL);
	ck_assert_int_eq(pipette_trainlog_steady(l, -1, &st, &err), -1);
	ck_assert_str_eq(err.msg, "training log: no step time: the torchtitan log gives tokens "
			 "per second but not the tokens per step and the world size (its 'tokens "
			 "per train step' and 'Building device mesh' lines); "
			 "pipette_trainlog_derive supplies them");
	ck_assert_int_eq(pipette_trainlog_derive(l, 131072, 8, &err), 0);
	ck_assert_double_eq_tol(l->steps[1].step_s, 16384.0 / 6021, TOL);
	/* Steps 20, 30, 40: 16384/6102, 16384/6100, 16384/6096, 10 each. */
	steady_ok(l, -1, 30, 10, 16384.0 / 6100, 16384.0 / 6102, 16384.0 / 6096,
		  16384.0 / 6100 - 16384.0 / 6102);
	pipette_trainlog_destroy(l);
}
END_TEST

START_TEST(test_derive_errors)
{
	struct pipette_trainlog *l = read_ok("torchtitan-2024.log", PIPETTE_STACK_TORCHTITAN);
	struct pipette_trainlog *m = read_ok("megatron-zb.log", PIPETTE_STACK_MEGATRON_ZB);
	struct pipette_err err = { .msg = "" };

	ck_assert_int_eq(pipette_trainlog_derive(l, 0.5, 8, &err), -1);
	ck_assert_str_eq(err.msg, "training log: tokens per step: 0.5 is not in [1, 1.80144e+16]");
	ck_assert_int_eq(pipette_trainlog_derive(l, NAN, 8, &err), -1);
	ck_assert_str_eq(err.msg, "training log: tokens per step: nan is not in [1, 1.80144e+16]");
	ck_assert_int_eq(pipette_trainlog_derive(l, 131072, 0, &err), -1);
	ck_assert_str_eq(err.msg, "training log: world size: 0 is not in [1, 262144]");
	/* 1e12 tokens at 350 tokens/s on one GPU: 90 years a step. */
	ck_assert_int_eq(pipette_trainlog_derive(l, 1e12, 1, &err), -1);
	ck_assert_str_eq(err.msg, "training log: line 2: tps: 350 tokens/s per device on 1 GPUs "
			 "at 1e+12 tokens per step is a step of 2.85714e+09 s, not in "
			 "[0.0001, 86400]");
	/* ... nor implausibly short: 1 token at 350 tokens/s on 100000 GPUs */
	ck_assert_int_eq(pipette_trainlog_derive(l, 1, 100000, &err), -1);
	ck_assert_str_eq(err.msg, "training log: line 2: tps: 350 tokens/s per device on 100000 "
			 "GPUs at 1 tokens per step is a step of 2.85714e-08 s, not in "
			 "[0.0001, 86400]");
	ck_assert_int_eq(pipette_trainlog_derive(m, 131072, 8, &err), -1);
	ck_assert_str_eq(err.msg, "training log: step times are derived from tokens per second "
			 "for torchtitan only, not 'megatron-zb'");
	pipette_trainlog_destroy(l);
	pipette_trainlog_destroy(m);
}
END_TEST

/* Cut and broken reports in the fixtures name their file and line. */
START_TEST(test_broken_fixtures)
{
	read_fails(LOGS "/megatron-broken.log", PIPETTE_STACK_MEGATRON,
		   "/megatron-broken.log: line 39: elapsed time per iteration (ms): expected a "
		   "number, got ''");
	read_fails(LOGS "/nemo-broken.log", PIPETTE_STACK_NEMO,
		   "/nemo-broken.log: line 11: train_step_timing in s: expected a number, "
		   "got 'nan'");
	read_fails(LOGS "/torchtitan-broken.log", PIPETTE_STACK_TORCHTITAN,
		   "/torchtitan-broken.log: line 17: memory: missing from the step report");
}
END_TEST

START_TEST(test_megatron_errors)
{
	enum pipette_stack_id mlm = PIPETTE_STACK_MEGATRON;

	parse_fails("noise\n iteration        5/      10 | consumed samples: 40 |\n", mlm,
		    "t.log: line 2: elapsed time per iteration (ms): missing from the iteration "
		    "report");
	parse_fails(" iteration 5/ 10 | elapsed time per iteration (ms): abc |", mlm,
		    "t.log: line 1: elapsed time per iteration (ms): expected a number, got "
		    "'abc |'");
	parse_fails(" iteration 5/ 10 | elapsed time per iteration (ms): 0.0 |", mlm,
		    "t.log: line 1: elapsed time per iteration (ms): 0 is out of range "
		    "[0.1, 8.64e+07]");
	/* Issue 28, item 8: a step of 1e-300 ms was taken (and calibrate then
	 * refused the observation); "0x10" was read as 0 and reported as
	 * "0 is not above 0". */
	parse_fails(" iteration 5/ 10 | elapsed time per iteration (ms): 1e-300 |", mlm,
		    "t.log: line 1: elapsed time per iteration (ms): 1e-300 is out of range "
		    "[0.1, 8.64e+07]");
	parse_fails(" iteration 5/ 10 | elapsed time per iteration (ms): 0x10 |", mlm,
		    "t.log: line 1: elapsed time per iteration (ms): '0x10' is not a decimal "
		    "number");
	parse_fails(" iteration 5/ 10 | elapsed time per iteration (ms): -3.5 |", mlm,
		    "t.log: line 1: elapsed time per iteration (ms): -3.5 is out of range "
		    "[0.1, 8.64e+07]");
	parse_fails(" iteration 5/ 10 | elapsed time per iteration (ms): 1e99 |", mlm,
		    "t.log: line 1: elapsed time per iteration (ms): 1e+99 is out of range "
		    "[0.1, 8.64e+07]");
	parse_fails(" iteration 5/ 10 | elapsed time per iteration (ms): 1.2.3 |", mlm,
		    "t.log: line 1: elapsed time per iteration (ms): '1.2.3' is not a number");
	parse_fails(" iteration 99999999999999999999/ 10 | elapsed time per iteration (ms): 1 |",
		    mlm, "t.log: line 1: iteration: '99999999999999999999' is not an integer");
	parse_fails(" iteration 1000000000001/ 10 | elapsed time per iteration (ms): 1 |", mlm,
		    "t.log: line 1: iteration: 1000000000001 is out of range [0, 1000000000000]");
	parse_fails("[Rank 3] (after 5 iterations) memory (MB) | allocated: 1 | max allocated: 2"
		    " | reserved: 3\n", mlm,
		    "t.log: line 1: max reserved: missing from the memory report");
	parse_fails("[Rank 3] (after 5 iterations) memory (MB) | allocated: 1 | reserved: 3\n",
		    mlm, "t.log: line 1: max allocated: missing from the memory report");
	parse_fails("[Rank 3] (after 5 iterations) memory (MB) | max allocated: -2 | max "
		    "reserved: 3\n", mlm,
		    "t.log: line 1: max allocated: -2 is out of range [0, 4.1943e+06]");
	parse_fails("[Rank 262144] (after 5 iterations) memory (MB) | max allocated: 2 | max "
		    "reserved: 3\n", mlm,
		    "t.log: line 1: [Rank N]: 262144 is out of range [0, 262143]");
	parse_fails("[Rank 3x] (after 5 iterations) memory (MB) | max allocated: 2 | max "
		    "reserved: 3\n", mlm,
		    "t.log: line 1: [Rank N]: expected ']' after the rank, got 'x] (after 5 "
		    "iterations) '");
	parse_fails("  world_size ...................................... many\n", mlm,
		    "t.log: line 1: world_size: expected a whole number, got 'many'");
	parse_fails("  pipeline_model_parallel_size .................... 0\n", mlm,
		    "t.log: line 1: pipeline_model_parallel_size: 0 is out of range [1, 262144]");
	parse_fails("  world_size ...................................... 8 or 16\n", mlm,
		    "t.log: line 1: world_size: unexpected 'or 16' after the value");
	parse_fails("  use_tp_pp_dp_mapping ............................ maybe\n", mlm,
		    "t.log: line 1: use_tp_pp_dp_mapping: expected True or False, got 'maybe'");
	parse_fails("a\nb\n", mlm,
		    "t.log: line 2: step report: the log ends without a megatron step report "
		    "(expected lines like ' iteration N/ M | ... | elapsed time per iteration "
		    "(ms): X |')");
	parse_fails("", PIPETTE_STACK_MEGATRON_2022,
		    "t.log: line 0: step report: the log ends without a megatron-2022 step report "
		    "(expected lines like ' iteration N/ M | ... | elapsed time per iteration "
		    "(ms): X |')");
}
END_TEST

START_TEST(test_nemo_errors)
{
	enum pipette_stack_id nemo = PIPETTE_STACK_NEMO;

	parse_fails("Training epoch 0, iteration 0/9 | global_step: 0\n"
		    "Training epoch 0, iteration 1/9 | global_step: 1\n", nemo,
		    "t.log: line 1: train_step_timing in s: 2 progress lines and none has "
		    "'train_step_timing in s' (NeMo prints it with the TimingCallback of "
		    "nemo.utils.exp_manager)");
	parse_fails("Training epoch 0, iteration 0/9 | train_step_timing in s: 1e6\n", nemo,
		    "t.log: line 1: train_step_timing in s: 1e+06 is out of range [0.0001, 86400]");
	parse_fails("Training epoch 0, iteration 0/9 | train_step_timing in s: 1e-300\n", nemo,
		    "t.log: line 1: train_step_timing in s: 1e-300 is out of range [0.0001, 86400]");
	parse_fails("Step 3: train_step_timing in s=0X1p3\n", nemo,
		    "t.log: line 1: train_step_timing in s: '0X1p3' is not a decimal number");
	parse_fails("Training epoch 0, iteration 0/9 | max_memory_reserved: 1e20 | "
		    "train_step_timing in s: 1\n", nemo,
		    "t.log: line 1: max_memory_reserved: 1e+20 is out of range [0, 4.39805e+12]");
	parse_fails("Training epoch 0, iteration 0/9 | max_memory_allocated: inf | "
		    "train_step_timing in s: 1\n", nemo,
		    "t.log: line 1: max_memory_allocated: expected a number, got 'inf | "
		    "train_step_timing '");
	parse_fails("[NeMo I 2026-08-22 10:01:00 exp_manager:450] Step x: train_step_timing in "
		    "s=1.5\n", nemo,
		    "t.log: line 1: Step: expected 'Step N' before 'train_step_timing in s'");
	parse_fails("Step 3: train_step_timing in s=\n", nemo,
		    "t.log: line 1: train_step_timing in s: expected a number, got ''");
	parse_fails("Validation: iteration 1/2\n", nemo,
		    "t.log: line 1: step report: the log ends without a nemo step report (expected "
		    "lines like 'Training epoch E, iteration N/M | ... | train_step_timing in s: "
		    "X')");
}
END_TEST

START_TEST(test_torchtitan_errors)
{
	enum pipette_stack_id tt = PIPETTE_STACK_TORCHTITAN;

	parse_fails("step:  5  loss:  7.1  memory: 12.00GiB(15.00%)\n", tt,
		    "t.log: line 1: tps: missing from the step report");
	parse_fails("step:  5  loss:  7.1  memory: 12.00GB(15.00%)  tps: 5,000\n", tt,
		    "t.log: line 1: memory: expected GiB after the figure, got 'GB(15.00%)  "
		    "tps: 5,000'");
	parse_fails("step:  5  loss:  7.1  memory: 12.00GiB(15.00%)  tps: 0  mfu: 0%\n", tt,
		    "t.log: line 1: tps: 0 is not above 0");
	parse_fails("step:  5  loss:  7.1  memory: 12.00GiB(15.00%)  tps: 1,000,000,000,000\n",
		    tt, "t.log: line 1: tps: 1e+12 is out of range [0, 1e+10]");
	parse_fails("step:  5  loss: 7.1.1  memory: 12.00GiB(15.00%)  tps: 100\n", tt,
		    "t.log: line 1: loss: '7.1.1' is not a number");
	parse_fails("step: 99999999999999999999999  loss: 1\n", tt,
		    "t.log: line 1: step: '99999999999999999999999' is not an integer");
	parse_fails("Building device mesh with parallelism: pp=2, dp_replicate=1, dp_shard=-1, "
		    "cp=1, tp=2, ep=1\n", tt,
		    "t.log: line 1: dp_shard=: expected a whole number, got '-1, cp=1, tp=2, ep=1'");
	parse_fails("Building device mesh with parallelism: pp=2, dp_replicate=1\n", tt,
		    "t.log: line 1: dp_shard=: missing from the device mesh line");
	parse_fails("Building device mesh with parallelism: pp=512, dp_replicate=512, dp_shard=2, "
		    "cp=1, tp=1, ep=1\n", tt,
		    "t.log: line 1: dp_shard=: the mesh has more than 262144 ranks");
	parse_fails("Trainer is initialized with 8 tokens per DP rank, 0 tokens per train step\n",
		    tt, "t.log: line 1: tokens per train step: 0 is out of range [1, 1.80144e+16]");
	parse_fails("Trainer is initialized with 64 tokens per train step\n", tt,
		    "t.log: line 1: tokens per DP rank: missing before the tokens per train step");
	parse_fails("validate step: 10  loss: 2.0  memory: 1.00GiB(1.00%)  tps: 10\n", tt,
		    "t.log: line 1: step report: the log ends without a torchtitan step report "
		    "(expected lines like 'step: N  loss: X  ...  memory: X GiB(X%)  tps: X')");
	/* A step time derived from the log's own figures is checked too:
	 * 1e15 tokens at 1 token/s on 1 GPU. */
	parse_fails("Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=1, "
		    "cp=1, tp=1, ep=1\nTrainer is initialized with 1 tokens per DP rank, 1e15 "
		    "tokens per train step, gradient accumulation steps 1\n"
		    "step:  1  loss:  9.0  memory:  1.00GiB(1.00%)  tps: 1\n", tt,
		    "t.log: line 3: tps: 1 tokens/s per device on 1 GPUs at 1e+15 tokens per step "
		    "is a step of 1e+15 s, not in [0.0001, 86400]");
}
END_TEST

START_TEST(test_unknown_stack)
{
	parse_fails(" iteration 5/ 10 | elapsed time per iteration (ms): 1 |",
		    PIPETTE_STACK_COMPOSER_FSDP,
		    "training log: no log format is known for stack 'composer-fsdp' (pipette "
		    "reads the logs of megatron, megatron-zb, megatron-2022, megatron-bridge, nemo and "
		    "torchtitan)");
	parse_fails("x", PIPETTE_STACK_DEEPSEEK,
		    "training log: no log format is known for stack 'deepseek' (pipette reads "
		    "the logs of megatron, megatron-zb, megatron-2022, megatron-bridge, nemo and "
		    "torchtitan)");
	{
		char want[64];

		snprintf(want, sizeof(want), "training log: unknown stack %d", PIPETTE_STACK_COUNT);
		parse_fails("x", PIPETTE_STACK_COUNT, want);
	}
	read_fails(LOGS "/megatron.log", PIPETTE_STACK_DEEPSEEK,
		   "no log format is known for stack 'deepseek'");
}
END_TEST

/* A FIFO nobody writes to, a directory and a missing file are refused
 * without blocking (pipette_read_file). */
START_TEST(test_not_regular_files)
{
	char dir[] = "/tmp/test_trainlog.XXXXXX", path[64];

	alarm(20);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	read_fails(path, PIPETTE_STACK_MEGATRON, "training log: ");
	read_fails(path, PIPETTE_STACK_MEGATRON, "/fifo: is a FIFO, not a regular file");
	ck_assert_int_eq(unlink(path), 0);
	read_fails(dir, PIPETTE_STACK_NEMO, ": is a directory, not a regular file");
	read_fails(path, PIPETTE_STACK_TORCHTITAN, "/fifo: cannot open: ");
	read_fails("/dev/zero", PIPETTE_STACK_TORCHTITAN,
		   "/dev/zero: is a character device, not a regular file");
	ck_assert_int_eq(rmdir(dir), 0);
	alarm(0);
}
END_TEST

/* Prefixes, CRLF, NUL bytes, restarts and a line too long. */
START_TEST(test_line_shapes)
{
	static const char crlf[] =
		"[default3]: iteration 10/ 20 | elapsed time per iteration (ms): 100.0 |\r\n"
		"[default3]: iteration 20/ 20 | elapsed time per iteration (ms): 90.0 |\r\n"
		"[default0]:[Rank 0] (after 10 iterations) memory (MB) | max allocated: 1024.0 "
		"| max reserved: 2048.0\r\n"
		" iteration 10/ 20 | elapsed time per iteration (ms): 80.0 |\r\n";
	struct pipette_trainlog *l = parse_ok(crlf, PIPETTE_STACK_MEGATRON);
	char nul[] = " iteration 10/ 20 |\0elapsed time per iteration (ms): 50.0 |\n";
	struct pipette_err err = { .msg = "" };
	size_t n = PIPETTE_TRAINLOG_MAX_LINE + 100;
	char *big = malloc(n + 200);

	/* Only the lines of the prefixed local rank 3, which printed first,
	 * are kept; the unprefixed one is another rank's. */
	ck_assert_int_eq(l->nsteps, 2);
	ck_assert_int_eq(l->step_rank, 3);
	ck_assert_int_eq(l->steps[0].first, 1);
	ck_assert_int_eq(l->steps[1].first, 11);
	ck_assert_double_eq_tol(l->steps[1].step_s, 0.09, TOL);
	ck_assert_int_eq(l->nmem, 1);
	ck_assert_int_eq(l->mem[0].local_rank, 0);
	ck_assert_int_eq(l->mem[0].rank, 0);
	ck_assert_double_eq_tol(l->mem[0].allocated_gib, 1.0, TOL);
	ck_assert_double_eq_tol(l->mem[0].reserved_gib, 2.0, TOL);
	pipette_trainlog_destroy(l);
	/* A NUL byte reads as a blank. */
	ck_assert_int_eq(pipette_trainlog_parse(nul, sizeof(nul) - 1, "nul", PIPETTE_STACK_MEGATRON,
						&l, &err), 0);
	ck_assert_double_eq_tol(l->steps[0].step_s, 0.05, TOL);
	pipette_trainlog_destroy(l);
	/* Iterations that fall back begin a run. */
	l = parse_ok(" iteration 10/ 9 | elapsed time per iteration (ms): 1 |\n"
		     " iteration 20/ 9 | elapsed time per iteration (ms): 1 |\n"
		     " iteration 15/ 9 | elapsed time per iteration (ms): 1 |\n", PIPETTE_STACK_MEGATRON);
	ck_assert_int_eq(l->nruns, 2);
	ck_assert_int_eq(l->steps[2].run, 1);
	ck_assert_int_eq(l->steps[2].first, 15);
	pipette_trainlog_destroy(l);
	/* torchtitan's loss of a diverged run: the rank still prints it. */
	l = parse_ok("[rank1]:step:  1  loss: -1.00000  memory:  1.00GiB(1.00%)  tps: 10\n"
		     "[rank3]:step:  1  loss:     -inf  memory:  2.00GiB(2.00%)  tps: 20\n"
		     "[rank2]:step:  1  loss:      nan  memory:  3.00GiB(3.00%)  tps: 30\n",
		     PIPETTE_STACK_TORCHTITAN);
	ck_assert_int_eq(l->step_rank, 3);
	ck_assert_int_eq(l->nsteps, 1);
	ck_assert_double_eq(l->steps[0].tokens_per_s, 20);
	ck_assert_int_eq(l->nmem, 3);
	pipette_trainlog_destroy(l);
	/* A long line of noise is skipped; a long report is refused. */
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', n);
	strcpy(big + n, "\n iteration 10/ 20 | elapsed time per iteration (ms): 7 |\n");
	l = parse_ok(big, PIPETTE_STACK_MEGATRON);
	ck_assert_int_eq(l->steps[0].line, 2);
	pipette_trainlog_destroy(l);
	memcpy(big, " iteration 10/ 20 | elapsed time per iteration (ms): 7 |", 56);
	parse_fails(big, PIPETTE_STACK_MEGATRON,
		    "t.log: line 1: iteration report: the line is longer than the 65536 bytes a "
		    "report may have");
	free(big);
}
END_TEST

/* More ranks than PIPETTE_TRAINLOG_MAX_MEM report memory. */
START_TEST(test_too_many_ranks)
{
	size_t cap = (size_t)(PIPETTE_TRAINLOG_MAX_MEM + 1) * 100, n = 0;
	char *text = malloc(cap);
	int r;

	ck_assert_ptr_nonnull(text);
	for (r = 0; r <= PIPETTE_TRAINLOG_MAX_MEM; r++)
		n += (size_t)snprintf(text + n, cap - n, "[Rank %d] (after 1 iterations) memory "
				      "(MB) | max allocated: 1 | max reserved: 2\n", r);
	parse_fails(text, PIPETTE_STACK_MEGATRON,
		    "t.log: line 65537: memory report: more than 65536 ranks report memory");
	free(text);
}
END_TEST

START_TEST(test_steady_errors)
{
	struct pipette_trainlog *l = read_ok("megatron-zb.log", PIPETTE_STACK_MEGATRON_ZB);
	struct pipette_trainlog_steady st;
	struct pipette_err err = { .msg = "" };

	ck_assert_int_eq(pipette_trainlog_steady(l, 20, &st, &err), -1);
	ck_assert_str_eq(err.msg, "training log: all 20 steps are warm-up (the first 20 of each "
			 "run and the reports that include them); no step is left for the steady "
			 "state");
	ck_assert_int_eq(pipette_trainlog_steady(NULL, -1, &st, &err), -1);
	ck_assert_str_eq(err.msg, "training log: no step to take a steady state of");
	/* One step left: every figure is that step. */
	steady_ok(l, 19, 1, 19, 1.1, 1.1, 1.1, 0);
	pipette_trainlog_destroy(l);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A log read as it grows (pipette_trainlog_reader)                    */

static char *slurp(const char *name, size_t *len)
{
	char path[512];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/%s", LOGS, name);
	f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "%s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Field by field: the structs' padding is not the parser's. */
static void same_log(const struct pipette_trainlog *a, const struct pipette_trainlog *b)
{
	long i;
	int k;

	ck_assert_int_eq(a->stack, b->stack);
	ck_assert_mem_eq(a->sha256, b->sha256, PIPETTE_SHA256_LEN);
	ck_assert_mem_eq(&a->stated, &b->stated, sizeof(a->stated));
	ck_assert_int_eq(a->nsteps, b->nsteps);
	for (i = 0; i < a->nsteps; i++) {
		const struct pipette_trainlog_step *x = &a->steps[i], *y = &b->steps[i];

		ck_assert_int_eq(x->iteration, y->iteration);
		ck_assert_double_eq(x->step_s, y->step_s);
		ck_assert_double_eq(x->tokens_per_s, y->tokens_per_s);
		ck_assert_int_eq(x->first, y->first);
		ck_assert_int_eq(x->run, y->run);
		ck_assert_int_eq(x->line, y->line);
	}
	ck_assert_int_eq(a->nmem, b->nmem);
	for (k = 0; k < a->nmem; k++) {
		const struct pipette_trainlog_mem *x = &a->mem[k], *y = &b->mem[k];

		ck_assert_int_eq(x->rank, y->rank);
		ck_assert_int_eq(x->stage, y->stage);
		ck_assert_double_eq(x->allocated_gib, y->allocated_gib);
		ck_assert_double_eq(x->reserved_gib, y->reserved_gib);
		ck_assert_int_eq(x->local_rank, y->local_rank);
	}
	ck_assert_int_eq(a->nruns, b->nruns);
	ck_assert_double_eq(a->tokens_per_step, b->tokens_per_step);
	ck_assert_int_eq(a->world_size, b->world_size);
	ck_assert_int_eq(a->step_rank, b->step_rank);
}

/* Feed buf[len] to a reader in pieces of `piece` bytes; take it.  The rc
 * of the first failing call (or of take), and the log or the error. */
static int feed_all(const char *buf, size_t len, size_t piece, enum pipette_stack_id stack,
		    struct pipette_trainlog **l, struct pipette_err *err)
{
	struct pipette_trainlog_reader *r;
	size_t i, n;
	int rc = 0;

	ck_assert_int_eq(pipette_trainlog_reader_create("t.log", stack, &r, err), 0);
	for (i = 0; i < len && rc == 0; i += n) {
		n = len - i < piece ? len - i : piece;
		rc = pipette_trainlog_reader_feed(r, buf + i, n, err);
	}
	if (rc == 0)
		rc = pipette_trainlog_reader_take(r, l, err);
	pipette_trainlog_reader_destroy(r);
	return rc;
}

/* Every fixture, fed in pieces of 1, 3, 64 and 4096 bytes and whole,
 * reads as the whole text parsed: the same steps, memory, runs, stated
 * configuration and SHA-256, or the same error. */
START_TEST(test_reader_pieces)
{
	static const struct {
		const char *name;
		enum pipette_stack_id stack;
	} fx[] = {
		{ "megatron.log", PIPETTE_STACK_MEGATRON },
		{ "megatron-2022.log", PIPETTE_STACK_MEGATRON_2022 },
		{ "megatron-zb.log", PIPETTE_STACK_MEGATRON_ZB },
		{ "megatron-broken.log", PIPETTE_STACK_MEGATRON },
		{ "nemo.log", PIPETTE_STACK_NEMO },
		{ "nemo-delta.log", PIPETTE_STACK_NEMO },
		{ "nemo-broken.log", PIPETTE_STACK_NEMO },
		{ "torchtitan.log", PIPETTE_STACK_TORCHTITAN },
		{ "torchtitan-2024.log", PIPETTE_STACK_TORCHTITAN },
		{ "torchtitan-broken.log", PIPETTE_STACK_TORCHTITAN },
	};
	static const size_t pieces[] = { 1, 3, 64, 4096, (size_t)-1 };
	size_t f, p, len;

	for (f = 0; f < sizeof(fx) / sizeof(fx[0]); f++) {
		char *buf = slurp(fx[f].name, &len);
		struct pipette_err e1 = { .msg = "" }, e2 = { .msg = "" };
		struct pipette_trainlog *want = NULL, *got = NULL;
		int rc = pipette_trainlog_parse(buf, len, "t.log", fx[f].stack, &want, &e1);

		ck_assert_msg(len > 0 && buf[len - 1] == '\n', "%s ends with a newline", fx[f].name);
		for (p = 0; p < sizeof(pieces) / sizeof(pieces[0]); p++) {
			ck_assert_msg(feed_all(buf, len, pieces[p], fx[f].stack, &got, &e2) == rc,
				      "%s in pieces of %zu: %s", fx[f].name, pieces[p], e2.msg);
			if (rc == 0)
				same_log(want, got);
			else
				ck_assert_str_eq(e2.msg, e1.msg);
			pipette_trainlog_destroy(got);
			got = NULL;
		}
		pipette_trainlog_destroy(want);
		free(buf);
	}
}
END_TEST

/* A line counts when its newline comes; a report line longer than the
 * bytes a line may have is refused in pieces as whole; after an error,
 * feed and take say it again. */
START_TEST(test_reader_lines)
{
	static const char step[] = " iteration 10/ 20 | elapsed time per iteration (ms): 7 |";
	size_t n = PIPETTE_TRAINLOG_LINE_READ + 10;
	char *big = malloc(n + sizeof(step) + 2);
	struct pipette_trainlog_reader *r;
	struct pipette_trainlog *l = NULL;
	struct pipette_err err = { .msg = "" }, e1 = { .msg = "" };

	ck_assert_int_eq(pipette_trainlog_reader_create("t.log", PIPETTE_STACK_MEGATRON, &r, &err),
			 0);
	ck_assert_int_eq(pipette_trainlog_reader_feed(r, step, strlen(step), &err), 0);
	ck_assert_int_eq(pipette_trainlog_reader_take(r, &l, &err), -1);
	ck_assert_ptr_null(l);
	ck_assert_msg(strstr(err.msg, "t.log: line 0: step report: the log ends without") != NULL,
		      "%s", err.msg);
	ck_assert_int_eq(pipette_trainlog_reader_feed(r, "\n", 1, &err), 0);
	ck_assert_int_eq(pipette_trainlog_reader_take(r, &l, &err), 0);
	ck_assert_int_eq(l->nsteps, 1);
	ck_assert_double_eq_tol(l->steps[0].step_s, 0.007, TOL);
	pipette_trainlog_destroy(l);
	ck_assert_int_eq(pipette_trainlog_reader_feed(r, step, 30, &err), 0);
	ck_assert_int_eq(pipette_trainlog_reader_feed(r, "x ms): 8 |\n", 11, &err), -1);
	ck_assert_str_eq(err.msg, "t.log: line 2: elapsed time per iteration (ms): missing from the "
			 "iteration report");
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(pipette_trainlog_reader_feed(r, "\n", 1, &err), -1);
	ck_assert_str_eq(err.msg, "t.log: line 2: elapsed time per iteration (ms): missing from the "
			 "iteration report");
	ck_assert_int_eq(pipette_trainlog_reader_take(r, &l, &err), -1);
	pipette_trainlog_destroy(l);
	pipette_trainlog_reader_destroy(r);

	/* A line of more than LINE_READ bytes: noise is skipped, a report
	 * refused, in pieces as whole. */
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', n);
	snprintf(big + n, sizeof(step) + 2, "\n%s\n", step);
	ck_assert_int_eq(feed_all(big, strlen(big), 4096, PIPETTE_STACK_MEGATRON, &l, &err), 0);
	ck_assert_int_eq(l->steps[0].line, 2);
	pipette_trainlog_destroy(l);
	memcpy(big, step, strlen(step));
	ck_assert_int_eq(pipette_trainlog_parse(big, strlen(big), "t.log", PIPETTE_STACK_MEGATRON,
						&l, &e1), -1);
	ck_assert_str_eq(e1.msg, "t.log: line 1: iteration report: the line is longer than the "
			 "65536 bytes a report may have");
	ck_assert_int_eq(feed_all(big, strlen(big), 4096, PIPETTE_STACK_MEGATRON, &l, &err), -1);
	ck_assert_str_eq(err.msg, e1.msg);
	ck_assert_int_eq(feed_all(big, strlen(big), 1 << 20, PIPETTE_STACK_MEGATRON, &l, &err), -1);
	ck_assert_str_eq(err.msg, e1.msg);
	free(big);
}
END_TEST

/* A log past PIPETTE_TRAINLOG_MAX_BYTES, which pipette_trainlog_parse
 * refuses: megatron.log's 9 reports, 257 MiB of other lines (4 KiB
 * each, as NCCL_DEBUG=INFO or a chatty data loader would print), and the
 * reports again (a second run: the iterations fall back).  The reader
 * keeps both runs' 18 steps. */
START_TEST(test_reader_past_limit)
{
	const size_t mib = 1 << 20, line = 4096;
	size_t len, i, total = 0;
	char *log = slurp("megatron.log", &len), *noise = malloc(mib);
	struct pipette_trainlog_reader *r;
	struct pipette_trainlog *l = NULL;
	struct pipette_err err = { .msg = "" };

	ck_assert_ptr_nonnull(noise);
	memset(noise, 'n', mib);
	for (i = line - 1; i < mib; i += line)
		noise[i] = '\n';
	ck_assert_int_eq(pipette_trainlog_reader_create("big.log", PIPETTE_STACK_MEGATRON, &r,
							&err), 0);
	ck_assert_int_eq(pipette_trainlog_reader_feed(r, log, len, &err), 0);
	for (i = 0; total <= (size_t)PIPETTE_TRAINLOG_MAX_BYTES; i++, total += mib)
		ck_assert_int_eq(pipette_trainlog_reader_feed(r, noise, mib, &err), 0);
	ck_assert_int_eq(pipette_trainlog_reader_feed(r, log, len, &err), 0);
	ck_assert_uint_gt(total + 2 * len, (size_t)PIPETTE_TRAINLOG_MAX_BYTES);
	ck_assert_msg(pipette_trainlog_reader_take(r, &l, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(l->nsteps, 18);
	ck_assert_int_eq(l->nruns, 2);
	ck_assert_int_eq(l->steps[9].run, 1);
	ck_assert_int_eq(l->steps[9].iteration, l->steps[0].iteration);
	/* megatron.log's 49 lines, the noise's, its last report on line 48 */
	ck_assert_int_eq(l->steps[17].line, 49 + (long)(total / line) + 48);
	pipette_trainlog_destroy(l);
	pipette_trainlog_reader_destroy(r);
	free(noise);
	free(log);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("trainlog");
	TCase *tc = tcase_create("trainlog");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_megatron);
	tcase_add_test(tc, test_stated_config);
	tcase_add_test(tc, test_megatron_2022);
	tcase_add_test(tc, test_megatron_zb);
	tcase_add_test(tc, test_megatron_bridge);
	tcase_add_test(tc, test_nemo);
	tcase_add_test(tc, test_nemo_delta);
	tcase_add_test(tc, test_torchtitan);
	tcase_add_test(tc, test_torchtitan_2024_derive);
	tcase_add_test(tc, test_derive_errors);
	tcase_add_test(tc, test_broken_fixtures);
	tcase_add_test(tc, test_megatron_errors);
	tcase_add_test(tc, test_nemo_errors);
	tcase_add_test(tc, test_torchtitan_errors);
	tcase_add_test(tc, test_unknown_stack);
	tcase_add_test(tc, test_not_regular_files);
	tcase_add_test(tc, test_line_shapes);
	tcase_add_test(tc, test_too_many_ranks);
	tcase_add_test(tc, test_steady_errors);
	tcase_add_test(tc, test_reader_pieces);
	tcase_add_test(tc, test_reader_lines);
	tcase_add_test(tc, test_reader_past_limit);
	suite_add_tcase(s, tc);
	return check_run(s);
}
