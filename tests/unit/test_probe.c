/* Unit tests of pipette-probe's parts: the tournament schedule, the α–β
 * fit, the GEMM curve fit, argument and environment parsing, and the merge
 * of probe results into an existing bandwidth cache. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "args.h"
#include "fabric.h"
#include "inputs/bwcache.h"
#include "fit.h"
#include "gpu.h"
#include "inter.h"
#include "results.h"
#include "tournament.h"
#include "check_run.h"

/* ---- schedule ---- */

/* Every pair exactly once, no node twice in a round, the round count, and
 * for odd n every node sits out exactly once.  Returns the first problem
 * found, or NULL.  (Plain checks, not ck_assert: Check reports every
 * passing assertion to its parent process, far too slow for n up to 1000.) */
static const char *check_schedule(int n, char *msg, size_t size)
{
	unsigned char *seen = calloc((size_t)n * (size_t)n, 1);
	unsigned char *busy = malloc((size_t)n);
	int *idle = calloc((size_t)n, sizeof(int));
	int *pairs = malloc((size_t)n * sizeof(int));
	int R = pipette_probe_rounds(n), r, k, x, total = 0;
	struct pipette_err err;
	const char *bad = NULL;

	if (R != (n % 2 ? n : n - 1))
		snprintf(msg, size, "n=%d: %d rounds", n, R), bad = msg;
	for (r = 0; r < R && !bad; r++) {
		int np = pipette_probe_round_pairs(n, r, pairs, &err);

		if (np != n / 2) {
			snprintf(msg, size, "n=%d round %d: %d pairs", n, r, np);
			bad = msg;
			break;
		}
		memset(busy, 0, (size_t)n);
		for (k = 0; k < np && !bad; k++) {
			int a = pairs[2 * k], b = pairs[2 * k + 1];

			if (a >= b || busy[a] || busy[b])
				snprintf(msg, size, "n=%d round %d: pair %d-%d bad or "
					 "node twice", n, r, a, b), bad = msg;
			else if (seen[(size_t)a * n + b]++)
				snprintf(msg, size, "n=%d: pair %d-%d twice", n, a, b),
					bad = msg;
			else if (pipette_probe_peer(n, r, a) != b ||
				 pipette_probe_peer(n, r, b) != a)
				snprintf(msg, size, "n=%d round %d: peer() disagrees "
					 "on %d-%d", n, r, a, b), bad = msg;
			busy[a] = busy[b] = 1;
			total++;
		}
		for (x = 0; x < n && !bad; x++)
			if (!busy[x]) {
				if (pipette_probe_peer(n, r, x) != -1)
					snprintf(msg, size, "n=%d round %d: idle node %d "
						 "has a peer", n, r, x), bad = msg;
				idle[x]++;
			}
	}
	if (!bad && total != n * (n - 1) / 2)
		snprintf(msg, size, "n=%d: %d pairs in all", n, total), bad = msg;
	for (x = 0; x < n && !bad; x++)
		if (idle[x] != n % 2)
			snprintf(msg, size, "n=%d: node %d idle %d times", n, x,
				 idle[x]), bad = msg;
	free(seen);
	free(busy);
	free(idle);
	free(pairs);
	return bad;
}

START_TEST(test_schedule_all_n)
{
	char msg[128];
	const char *bad = NULL;
	int n;

	for (n = 2; n <= 1000 && !bad; n++)
		bad = check_schedule(n, msg, sizeof(msg));
	ck_assert_msg(!bad, "%s", bad);
}
END_TEST

/* n = 4 by hand: m = 4, circle of c = 3 around fixed node 3; node x meets
 * (2r − x) mod 3.  r=0: 3-0, 1-(−1 mod 3 = 2); r=1: 3-1, 0-2; r=2: 3-2, 0-1.
 * n = 3: dummy node 3, so the partner of r sits out round r. */
START_TEST(test_schedule_by_hand)
{
	int p[4];
	struct pipette_err err;

	ck_assert_int_eq(pipette_probe_round_pairs(4, 0, p, &err), 2);
	ck_assert_int_eq(p[0], 0); ck_assert_int_eq(p[1], 3);
	ck_assert_int_eq(p[2], 1); ck_assert_int_eq(p[3], 2);
	ck_assert_int_eq(pipette_probe_round_pairs(4, 1, p, &err), 2);
	ck_assert_int_eq(p[0], 0); ck_assert_int_eq(p[1], 2);
	ck_assert_int_eq(p[2], 1); ck_assert_int_eq(p[3], 3);
	ck_assert_int_eq(pipette_probe_round_pairs(4, 2, p, &err), 2);
	ck_assert_int_eq(p[0], 0); ck_assert_int_eq(p[1], 1);
	ck_assert_int_eq(p[2], 2); ck_assert_int_eq(p[3], 3);
	ck_assert_int_eq(pipette_probe_peer(3, 1, 1), -1);
	ck_assert_int_eq(pipette_probe_peer(3, 1, 0), 2);
	ck_assert_int_eq(pipette_probe_rounds(1), 0);
	ck_assert_int_eq(pipette_probe_round_pairs(1, 0, p, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "node count 1"));
	ck_assert_int_eq(pipette_probe_round_pairs(4, 3, p, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "round 3"));
}
END_TEST

/* ---- α–β fit ---- */

/* Exact data from t = 5 µs + x / 12.5 GB/s returns α = 5 µs, β = 12.5e9. */
START_TEST(test_fit_exact)
{
	double x[3] = { 65536, 1048576, 16777216 }, t[3];
	struct pipette_probe_fit f;
	struct pipette_err err;
	int i;

	for (i = 0; i < 3; i++)
		t[i] = 5e-6 + x[i] / 12.5e9;
	ck_assert_int_eq(pipette_probe_fit_alpha_beta(x, t, 3, &f, &err), 0);
	ck_assert_double_eq_tol(f.alpha_s, 5e-6, 1e-12);
	ck_assert_double_eq_tol(f.beta_Bps / 12.5e9, 1.0, 1e-9);
	ck_assert_int_eq(f.clamped, 0);
}
END_TEST

/* Two points (1e6, 1e-4) and (2e6, 2.2e-4): the free line has slope
 * 1.2e-10 and intercept 1e-4 − 1.2e-4 = −2e-5 < 0, so α = 0 and
 * 1/β = Σxt/Σx² = (100 + 440) / 5e12 = 1.08e-10 → β = 9.259259e9. */
START_TEST(test_fit_clamped)
{
	double x[2] = { 1e6, 2e6 }, t[2] = { 1e-4, 2.2e-4 };
	struct pipette_probe_fit f;
	struct pipette_err err;

	ck_assert_int_eq(pipette_probe_fit_alpha_beta(x, t, 2, &f, &err), 0);
	ck_assert_int_eq(f.clamped, 1);
	ck_assert_double_eq(f.alpha_s, 0.0);
	ck_assert_double_eq_tol(f.beta_Bps, 1.0 / 1.08e-10, 1.0);
}
END_TEST

START_TEST(test_fit_errors)
{
	double x[3] = { 1e6, 1e6, 2e6 }, t[3] = { 1e-3, 1e-3, 5e-4 };
	struct pipette_probe_fit f;
	struct pipette_err err;

	ck_assert_int_eq(pipette_probe_fit_alpha_beta(x, t, 1, &f, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "at least 2"));
	ck_assert_int_eq(pipette_probe_fit_alpha_beta(x, t, 2, &f, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "same size"));
	/* (1e6, 1 ms), (2e6, 0.5 ms): slope −5e-10 s/byte, intercept
	 * 1.5 ms > 0, so no clamping and the slope is rejected. */
	ck_assert_int_eq(pipette_probe_fit_alpha_beta(x + 1, t + 1, 2, &f, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "does not grow"));
	t[0] = -1;
	ck_assert_int_eq(pipette_probe_fit_alpha_beta(x, t, 3, &f, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "point 0"));
}
END_TEST

/* Median: odd n takes the middle, even n the mean of the two middles. */
START_TEST(test_median)
{
	double v[4] = { 3, 1, 4, 2 }, s[4];

	ck_assert_double_eq(pipette_probe_median(v, 3, s), 3.0);	/* 1 3 4 */
	ck_assert_double_eq(pipette_probe_median(v, 4, s), 2.5);	/* 1 2 3 4 */
}
END_TEST

/* R(G) = 800·G/(G + 50): G = 10, 100, 1000 GFLOP give 133.33, 533.33,
 * 761.90 TFLOP/s; the fit recovers R_max = 800 and G_half = 50. */
START_TEST(test_gemm_fit)
{
	double g[3] = { 10, 100, 1000 }, r[3], rmax, half;
	struct pipette_err err;
	int i;

	for (i = 0; i < 3; i++)
		r[i] = 800.0 * g[i] / (g[i] + 50.0);
	ck_assert_int_eq(pipette_probe_gemm_fit(g, r, 3, &rmax, &half, &err), 0);
	ck_assert_double_eq_tol(rmax, 800.0, 1e-6);
	ck_assert_double_eq_tol(half, 50.0, 1e-6);
	/* A rate that grows faster than linearly in G never saturates. */
	r[0] = 1; r[1] = 100; r[2] = 10000;
	ck_assert_int_eq(pipette_probe_gemm_fit(g, r, 3, &rmax, &half, &err), -1);
}
END_TEST

/* Link fit on medians, in GB/s and µs: 64 KiB and 4 MiB at α = 10 µs,
 * β = 20 GB/s. */
START_TEST(test_link_fit_units)
{
	size_t sz[2] = { 65536, 4194304 };
	double t[2], g, l;
	struct pipette_err err;

	t[0] = 10e-6 + 65536 / 20e9;
	t[1] = 10e-6 + 4194304 / 20e9;
	ck_assert_int_eq(pipette_probe_link_fit(sz, t, 2, &g, &l, &err), 0);
	ck_assert_double_eq_tol(g, 20.0, 1e-9);
	ck_assert_double_eq_tol(l, 10.0, 1e-6);
}
END_TEST

/* ---- arguments ---- */

static int parse(struct pipette_probe_opts *o, struct pipette_err *err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	char *a;

	argv[argc++] = (char *)"pipette-probe";
	va_start(ap, err);
	while ((a = va_arg(ap, char *)) && argc < 31)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return pipette_probe_parse_args(argc, argv, o, err);
}

#define BAD(frag, ...) do { \
	ck_assert_int_eq(parse(&o, &err, __VA_ARGS__, (char *)NULL), -1); \
	ck_assert_msg(strstr(err.msg, frag), "'%s' lacks '%s'", err.msg, frag); \
	} while (0)

START_TEST(test_args_errors)
{
	struct pipette_probe_opts o;
	struct pipette_err err;

	BAD("at least 2 distinct", "--sizes", "4M");
	BAD("given twice", "--sizes", "4M,4096K");
	BAD("unknown suffix", "--sizes", "4X,8M");
	BAD("not a size", "--sizes", "-4M,8M");
	BAD("out of range", "--sizes", "32G,8M");
	BAD("not one of nccl, tcp", "--transport", "udp");
	BAD("--reps", "--reps", "0");
	BAD("--timeout", "--timeout", "soon");
	BAD("--port", "--port", "70000");
	BAD("need --local", "--gemm");
	BAD("choose one", "--local", "--topology");
	BAD("unknown option", "--bogus");
	BAD("missing value", "--out");
	BAD("unexpected argument", "extra");
	BAD("not to --local", "--local", "--sizes", "1M,2M");
	BAD("--topology writes no bandwidth", "--topology", "--out", "x.json");
	BAD("empty host list", "--nodes", "");
	BAD("choose one", "--local", "--kernels", "k.csv");
	BAD("empty file name", "--kernels", "");
	BAD("needs --kernels", "--kernels-budget", "60");
	BAD("--kernels-budget", "--kernels", "k.csv", "--kernels-budget", "0");
	BAD("CSV only", "--kernels", "k.csv", "--out", "c.json");
}
END_TEST

START_TEST(test_args_defaults)
{
	struct pipette_probe_opts o;
	struct pipette_err err;

	ck_assert_int_eq(parse(&o, &err, "--transport", "tcp", (char *)NULL), 0);
	ck_assert_int_eq(o.transport, PIPETTE_PROBE_TCP);
	ck_assert_int_eq(o.nsizes, 3);
	ck_assert_uint_eq(o.sizes[0], 65536);
	ck_assert_uint_eq(o.sizes[2], 16u << 20);
	ck_assert_int_eq(parse(&o, &err, "--sizes", "64K,4MiB,1G", "--reps", "7",
			       "--out", "c.json", (char *)NULL), 0);
	ck_assert_int_eq(o.transport, PIPETTE_PROBE_NCCL);
	ck_assert_uint_eq(o.sizes[1], 4u << 20);
	ck_assert_uint_eq(o.sizes[2], 1u << 30);
	ck_assert_int_eq(o.reps, 7);
	ck_assert_str_eq(o.out, "c.json");
	/* --local alone turns on all four parts */
	ck_assert_int_eq(parse(&o, &err, "--local", (char *)NULL), 0);
	ck_assert(o.p2p && o.nccl_pairs && o.gemm && o.hbm);
	ck_assert_int_eq(parse(&o, &err, "--local", "--gemm", (char *)NULL), 0);
	ck_assert(o.gemm && !o.p2p && !o.hbm && !o.nccl_pairs);
	ck_assert_int_eq(parse(&o, &err, "--kernels", "k.csv", (char *)NULL), 0);
	ck_assert_str_eq(o.kernels, "k.csv");
	ck_assert_double_eq(o.kernels_budget_s, 150);
	ck_assert(!o.local && !o.gemm);
}
END_TEST

/* ---- task environment ---- */

static const char *table_get(void *ctx, const char *name)
{
	const char *const *kv = ctx;

	for (; *kv; kv += 2)
		if (!strcmp(kv[0], name))
			return kv[1];
	return NULL;
}

START_TEST(test_task_env)
{
	/* Port: 61000 + (16·1234 + 0) mod 4536 = 61000 + 19744 − 4·4536
	 * = 61000 + 1600 = 62600. */
	const char *env[] = { "SLURM_PROCID", "2", "SLURM_NTASKS", "4",
			      "SLURMD_NODENAME", "gpu003", "SLURM_JOB_ID", "1234",
			      "SLURM_STEP_ID", "0", "SLURM_STEP_NODELIST",
			      "gpu[001-004]", NULL };
	const char *bad[] = { "SLURM_PROCID", "4", "SLURM_NTASKS", "4", NULL };
	const char *none[] = { "SLURM_NTASKS", "4", NULL };
	const char *root[] = { "SLURM_PROCID", "0", "SLURM_NTASKS", "2",
			       "SLURMD_NODENAME", "a", "PIPETTE_PROBE_ROOT", "10.0.0.1",
			       "PIPETTE_PROBE_PORT", "5000", NULL };
	struct pipette_probe_task t;
	struct pipette_err err;

	ck_assert_int_eq(pipette_probe_task_read(table_get, env, 0, &t, &err), 0);
	ck_assert_int_eq(t.rank, 2);
	ck_assert_int_eq(t.size, 4);
	ck_assert_str_eq(t.name, "gpu003");
	ck_assert_str_eq(t.root, "");
	ck_assert_str_eq(t.nodelist, "gpu[001-004]");
	ck_assert_int_eq(t.port, 62600);
	ck_assert_int_eq(pipette_probe_task_read(table_get, env, 7000, &t, &err), 0);
	ck_assert_int_eq(t.port, 7000);
	ck_assert_int_eq(pipette_probe_task_read(table_get, bad, 0, &t, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "SLURM_PROCID"));
	ck_assert_int_eq(pipette_probe_task_read(table_get, none, 0, &t, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "SLURM_PROCID is not set"));
	ck_assert_int_eq(pipette_probe_task_read(table_get, root, 0, &t, &err), 0);
	ck_assert_str_eq(t.root, "10.0.0.1");
	ck_assert_int_eq(t.port, 5000);
}
END_TEST

/* ---- merge into an existing cache ---- */

/* Remove the version files in dir and dir itself; how many there were. */
static int count_versions(const char *dir)
{
	char path[512];
	struct dirent *e;
	DIR *d = opendir(dir);
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			ck_assert_int_eq(unlink(path), 0);
			n++;
		}
	closedir(d);
	ck_assert_int_eq(rmdir(dir), 0);
	return n;
}

START_TEST(test_merge_into_cache)
{
	char dir[] = "/tmp/test_probe_XXXXXX", path[256];
	size_t sizes[2] = { 65536, 1048576 };
	struct pipette_probe_result *r = pipette_probe_result_create(3, 2, sizes);
	struct pipette_bwcache *old = pipette_bwcache_create(), *src, *got;
	struct pipette_bw_prov p_old = { "old tool", "busbw", 1e6, 1000000000 };
	struct pipette_bw_figure f;
	struct pipette_err err;
	int a, b, c, d;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/bw.json", dir);
	/* The old cache: a->b 5 GB/s and c->a 7 GB/s, measured in 2001, and a
	 * node d the probe never sees. */
	ck_assert_int_eq(pipette_bwcache_set_inter(old, "a", "b", 5, 9, &p_old, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(old, "c", "a", 7, 9, &p_old, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(old, "d", "a", 3, 9, &p_old, &err), 0);
	ck_assert_int_eq(pipette_bwcache_save(old, path, &err), 0);
	/* The probe (2023): a->b 10 GB/s, b->a 11 GB/s, b->c 12; c->a failed. */
	strcpy(r->names[0], "a");
	strcpy(r->names[1], "b");
	strcpy(r->names[2], "c");
	strcpy(r->tool, "pipette-probe tcp");
	strcpy(r->metric, "alpha-beta fit");
	r->when = 1700000000;
	r->gbps[0 * 3 + 1] = 10; r->lat_us[0 * 3 + 1] = 20;
	r->gbps[1 * 3 + 0] = 11; r->lat_us[1 * 3 + 0] = 21;
	r->gbps[1 * 3 + 2] = 12; r->lat_us[1 * 3 + 2] = 22;
	ck_assert_int_eq(pipette_probe_result_to_cache(r, "test", &src, &err), 0);
	ck_assert_int_eq(pipette_bwcache_merge_file(path, src, &err), 0);
	ck_assert_int_eq(pipette_bwcache_load(path, &got, &err), 0);
	a = pipette_bwcache_node_index(got, "a");
	b = pipette_bwcache_node_index(got, "b");
	c = pipette_bwcache_node_index(got, "c");
	d = pipette_bwcache_node_index(got, "d");
	ck_assert(a >= 0 && b >= 0 && c >= 0 && d >= 0);
	/* newer measurement wins */
	ck_assert_int_eq(pipette_bwcache_inter(got, a, b, &f), 1);
	ck_assert_double_eq_tol(f.gbps, 10, 1e-9);
	ck_assert_double_eq_tol(f.lat_us, 20, 1e-9);
	ck_assert_int_eq((long)f.prov.when, 1700000000L);
	ck_assert_str_eq(f.prov.tool, "pipette-probe tcp");
	ck_assert_double_eq(f.prov.bytes, 1048576);
	/* unmeasured links keep their old value and time */
	ck_assert_int_eq(pipette_bwcache_inter(got, c, a, &f), 1);
	ck_assert_double_eq_tol(f.gbps, 7, 1e-9);
	ck_assert_int_eq((long)f.prov.when, 1000000000L);
	ck_assert_int_eq(pipette_bwcache_inter(got, d, a, &f), 1);
	ck_assert_double_eq_tol(f.gbps, 3, 1e-9);
	/* new links appear */
	ck_assert_int_eq(pipette_bwcache_inter(got, b, c, &f), 1);
	ck_assert_double_eq_tol(f.gbps, 12, 1e-9);
	ck_assert_int_eq(pipette_bwcache_inter(got, c, b, &f), 0);
	/* a missing cache file is created */
	unlink(path);
	ck_assert_int_eq(pipette_bwcache_merge_file(path, src, &err), 0);
	ck_assert_int_eq(access(path, R_OK), 0);
	unlink(path);
	snprintf(path, sizeof(path), "%s/bw.json.lock", dir);
	ck_assert_int_eq(unlink(path), 0);	/* the merge's lock file */
	/* the versions the merge into the existing cache kept (versions.h):
	 * the old content and the merged one */
	snprintf(path, sizeof(path), "%s/bw.json.versions", dir);
	ck_assert_int_eq(count_versions(path), 2);
	ck_assert_int_eq(rmdir(dir), 0);
	pipette_bwcache_destroy(old);
	pipette_bwcache_destroy(src);
	pipette_bwcache_destroy(got);
	pipette_probe_result_destroy(r);
}
END_TEST

/* Left-out nodes are not added to the cache. */
START_TEST(test_left_out_not_cached)
{
	size_t sizes[2] = { 1, 2 };
	struct pipette_probe_result *r = pipette_probe_result_create(2, 2, sizes);
	struct pipette_bwcache *bw;
	struct pipette_err err;

	strcpy(r->names[0], "x");
	strcpy(r->names[1], "y");
	strcpy(r->tool, "t");
	strcpy(r->metric, "m");
	r->left_out[1] = 1;
	ck_assert_int_eq(pipette_probe_result_to_cache(r, NULL, &bw, &err), 0);
	ck_assert_int_eq(pipette_bwcache_node_count(bw), 1);
	ck_assert_int_eq(pipette_bwcache_node_index(bw, "y"), -1);
	pipette_bwcache_destroy(bw);
	pipette_probe_result_destroy(r);
}
END_TEST

/* ---- NVLink domains from NVML's fabric info (fabricated GPUs) ---- */

/* A GB200 tray's GPU as NVML reports it once the fabric manager has
 * registered it: COMPLETED, success, the rack's cluster UUID and clique. */
static struct pipette_probe_fabric tray_gpu(unsigned char uuid_last, unsigned long clique)
{
	static const unsigned char uuid[16] = { 0x9f, 0x1c, 0x0a, 0x2e, 0x5b, 0x7d, 0x4c, 0x3a,
						0x8e, 0x21, 0x0d, 0x6f, 0x4b, 0x9a, 0x7c, 0x00 };
	struct pipette_probe_fabric g;

	memset(&g, 0, sizeof(g));
	g.state = PIPETTE_FABRIC_COMPLETED;
	g.status_ok = 1;
	memcpy(g.cluster_uuid, uuid, sizeof(uuid));
	g.cluster_uuid[15] = uuid_last;
	g.clique = clique;
	return g;
}

START_TEST(test_fabric_domain_name)
{
	struct pipette_probe_fabric g[4];
	struct pipette_err why;
	char name[PIPETTE_PROBE_DOMAIN_MAX];
	int i;

	for (i = 0; i < 4; i++)
		g[i] = tray_gpu(0x15, 32766);
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 4, name, &why), 1);
	ck_assert_str_eq(name, "9f1c0a2e-5b7d-4c3a-8e21-0d6f4b9a7c15:32766");
	/* another rack (cluster UUID) or another clique is another domain */
	g[0] = g[1] = g[2] = g[3] = tray_gpu(0x16, 32766);
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 4, name, &why), 1);
	ck_assert_str_eq(name, "9f1c0a2e-5b7d-4c3a-8e21-0d6f4b9a7c16:32766");
	g[0] = g[1] = g[2] = g[3] = tray_gpu(0x15, 4294967295ul);
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 4, name, &why), 1);
	ck_assert_str_eq(name, "9f1c0a2e-5b7d-4c3a-8e21-0d6f4b9a7c15:4294967295");
	ck_assert_int_lt(strlen(name), PIPETTE_PROBE_DOMAIN_MAX);
}
END_TEST

START_TEST(test_fabric_domain_refused)
{
	struct pipette_probe_fabric g[4];
	struct pipette_err why;
	char name[PIPETTE_PROBE_DOMAIN_MAX];
	int i;

	/* an H100 board: no GPU supports fabric registration: no domain */
	memset(g, 0, sizeof(g));
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 4, name, &why), 0);
	ck_assert_str_eq(name, "");
	ck_assert_ptr_nonnull(strstr(why.msg, "no multi-node NVLink domain"));
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 0, name, &why), 0);
	ck_assert_str_eq(why.msg, "no GPU");
	for (i = 0; i < 4; i++)
		g[i] = tray_gpu(0x15, 7);
	g[2].clique = 8;
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 4, name, &why), -1);
	ck_assert_str_eq(name, "");
	ck_assert_ptr_nonnull(strstr(why.msg, "GPU 0 is in NVLink domain "
					      "9f1c0a2e-5b7d-4c3a-8e21-0d6f4b9a7c15:7, GPU 2 in "
					      "9f1c0a2e-5b7d-4c3a-8e21-0d6f4b9a7c15:8"));
	g[2] = tray_gpu(0x15, 7);
	g[3].state = PIPETTE_FABRIC_IN_PROGRESS;
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 4, name, &why), -1);
	ck_assert_str_eq(why.msg, "GPU 3: its NVLink fabric registration is in progress");
	g[3] = tray_gpu(0x15, 7);
	g[1].status_ok = 0;
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 4, name, &why), -1);
	ck_assert_str_eq(why.msg, "GPU 1: its NVLink fabric registration failed");
	g[1] = tray_gpu(0x15, 7);
	memset(g[0].cluster_uuid, 0, sizeof(g[0].cluster_uuid));
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 4, name, &why), -1);
	ck_assert_str_eq(why.msg, "GPU 0: NVLink fabric cluster UUID is all zero");
	g[0] = tray_gpu(0x15, 7);
	g[3].state = PIPETTE_FABRIC_NOT_SUPPORTED;
	ck_assert_int_eq(pipette_probe_fabric_domain(g, 4, name, &why), -1);
	ck_assert_str_eq(why.msg, "GPU 0 reports NVLink fabric info, 1 other GPUs none");
}
END_TEST

/* PIPETTE_PROBE_DOMAIN names the node's domain where NVML cannot: taken
 * when the cache would take it, "none" for none. */
START_TEST(test_node_domain_env)
{
	const char *named[] = { "PIPETTE_PROBE_DOMAIN", "rack1:3", NULL };
	const char *none[] = { "PIPETTE_PROBE_DOMAIN", "none", NULL };
	const char *blank[] = { "PIPETTE_PROBE_DOMAIN", "rack 1", NULL };
	struct pipette_err why;
	char name[PIPETTE_PROBE_DOMAIN_MAX];

	ck_assert_int_eq(pipette_probe_node_domain(table_get, named, name, &why), 0);
	ck_assert_str_eq(name, "rack1:3");
	ck_assert_int_eq(pipette_probe_node_domain(table_get, none, name, &why), 0);
	ck_assert_str_eq(name, "");
	ck_assert_int_eq(pipette_probe_node_domain(table_get, blank, name, &why), -1);
	ck_assert_str_eq(name, "");
	ck_assert_ptr_nonnull(strstr(why.msg, "PIPETTE_PROBE_DOMAIN: NVLink domain name "
					      "'rack 1' contains a blank"));
}
END_TEST

/* The run's domains go into the cache: nodes that reported one domain
 * share it (pipette-bw/3), a node that reported none is in none, a node
 * left out is not written at all. */
START_TEST(test_domains_to_cache)
{
	size_t sizes[1] = { 1 << 20 };
	struct pipette_probe_result *r = pipette_probe_result_create(4, 1, sizes);
	struct pipette_bwcache *bw;
	struct pipette_err err;
	int i;

	ck_assert_ptr_nonnull(r);
	for (i = 0; i < 4; i++)
		snprintf(r->names[i], sizeof(r->names[i]), "gb%03d", i + 1);
	strcpy(r->tool, "pipette-probe tcp");
	strcpy(r->metric, "alpha-beta fit");
	strcpy(r->domain[0], "u:1");
	strcpy(r->domain[1], "u:1");
	strcpy(r->domain[3], "u:1");
	r->left_out[3] = 1;
	r->gbps[0 * 4 + 1] = 800;
	r->gbps[1 * 4 + 2] = 40;
	ck_assert(pipette_probe_same_domain(r, 0, 1));
	ck_assert(!pipette_probe_same_domain(r, 1, 2));
	ck_assert(!pipette_probe_same_domain(r, 2, 2));
	ck_assert(!pipette_probe_same_domain(r, 0, 0));
	ck_assert_int_eq(pipette_probe_result_to_cache(r, NULL, &bw, &err), 0);
	ck_assert_str_eq(pipette_bwcache_schema(bw), "pipette-bw/3");
	ck_assert_int_eq(pipette_bwcache_domain_count(bw), 1);
	ck_assert_int_eq(pipette_bwcache_domain_nodes(bw, 0), 2);
	ck_assert_int_eq(pipette_bwcache_domain_gpus(bw, 0), 0);
	ck_assert_int_eq(pipette_bwcache_node_domain(bw, pipette_bwcache_node_index(bw, "gb003")),
			 -1);
	ck_assert_int_eq(pipette_bwcache_node_index(bw, "gb004"), -1);
	ck_assert_int_eq(pipette_bwcache_domain_measured(bw), 1);
	pipette_bwcache_destroy(bw);
	pipette_probe_result_destroy(r);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("probe");
	TCase *tc = tcase_create("probe");

	tcase_set_timeout(tc, 180);	/* the schedules of every n: seconds alone, a minute under a loaded make check */
	tcase_add_test(tc, test_schedule_all_n);
	tcase_add_test(tc, test_schedule_by_hand);
	tcase_add_test(tc, test_fit_exact);
	tcase_add_test(tc, test_fit_clamped);
	tcase_add_test(tc, test_fit_errors);
	tcase_add_test(tc, test_median);
	tcase_add_test(tc, test_gemm_fit);
	tcase_add_test(tc, test_link_fit_units);
	tcase_add_test(tc, test_args_errors);
	tcase_add_test(tc, test_args_defaults);
	tcase_add_test(tc, test_task_env);
	tcase_add_test(tc, test_merge_into_cache);
	tcase_add_test(tc, test_left_out_not_cached);
	tcase_add_test(tc, test_fabric_domain_name);
	tcase_add_test(tc, test_fabric_domain_refused);
	tcase_add_test(tc, test_node_domain_env);
	tcase_add_test(tc, test_domains_to_cache);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
