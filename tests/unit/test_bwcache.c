/* Unit tests: the bandwidth cache (bwcache.h) and the cluster (cluster.h),
 * and the `pipette bandwidth` command through the built binary.
 * Fixtures: tests/data/bw/ (hand-written; figures chosen to be told apart). */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "inputs/bwcache.h"
#include "inputs/cluster.h"
#include "inputs/readfile.h"

#include "cli_run.h"
#include "check_run.h"

#define BW_DIR TEST_DATADIR "/bw"
#define EXAMPLES_DIR TEST_DATADIR "/../../etc/examples"
#define OUT_MAX (1 << 20)

/* A GPU type for the tests, with figures unlike any cache figure so the
 * fallback level is visible: NVLink 400 GB/s, NIC 40 GB/s, 3 / 7 us. */
static const struct pipette_gpu_spec test_gpu = {
	.name = "TEST-GPU", .aliases = "test", .peak_tflops = 100, .hbm_bytes = 1e9,
	.hbm_gbps = 1000, .nvlink_gbps = 400, .nic_gbps = 40, .nvlink_lat_us = 3,
	.nic_lat_us = 7, .gpus_per_node = 2, .nvlink_eff = 0.5, .nic_eff = 0.75,
	.source = "test",
};

static char tmpdir[64];
static char *out;

static void expect(const char *args, int code, const char *fragment);

static void setup(void)
{
	strcpy(tmpdir, "/tmp/test_bwcache.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	out = malloc(OUT_MAX);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	free(out);
}

static struct pipette_bwcache *load_ok(const char *path)
{
	struct pipette_bwcache *bw = NULL;
	struct pipette_err err = { .msg = "" };

	ck_assert_msg(pipette_bwcache_load(path, &bw, &err) == 0, "%s", err.msg);
	return bw;
}

static time_t t_of(const char *s)
{
	time_t t;

	ck_assert_int_eq(pipette_bw_parse_time(s, &t), 0);
	return t;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_msg(f != NULL, "%s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

/* ---------------------------------------------------------------- */

START_TEST(test_load_good)
{
	struct pipette_bwcache *bw = load_ok(BW_DIR "/good-3.json");
	struct pipette_bw_figure f;
	struct pipette_bw_defaults d;

	/* order gives gpu001..003; gpu004 comes only from "nodes". */
	ck_assert_int_eq(pipette_bwcache_node_count(bw), 4);
	ck_assert_str_eq(pipette_bwcache_node_name(bw, 3), "gpu004");
	ck_assert_int_eq(pipette_bwcache_node_index(bw, "gpu003"), 2);
	ck_assert_int_eq(pipette_bwcache_node_index(bw, "gpu999"), -1);
	/* matrix[0][1] with the section's provenance and lat_us 4 */
	ck_assert_int_eq(pipette_bwcache_inter(bw, 0, 1, &f), 1);
	ck_assert_double_eq(f.gbps, 23.1);
	ck_assert_double_eq_tol(f.lat_us, 4.0, 1e-6);
	ck_assert_str_eq(f.prov.tool, "nccl-tests sendrecv_perf");
	ck_assert_str_eq(f.prov.metric, "busbw");
	ck_assert_double_eq(f.prov.bytes, 31457280);
	ck_assert_int_eq(f.prov.when, t_of("2025-01-01T00:00:00Z"));
	/* the link overrides matrix[1][2] = 11.9, keeps its own time and
	 * inherits metric and bytes from the section */
	ck_assert_int_eq(pipette_bwcache_inter(bw, 1, 2, &f), 1);
	ck_assert_double_eq(f.gbps, 12.5);
	ck_assert_double_eq_tol(f.lat_us, 6.1, 1e-6);
	ck_assert_int_eq(f.prov.when, t_of("2025-01-02T03:04:05Z"));
	ck_assert_str_eq(f.prov.metric, "busbw");
	/* matrix[2][1] is null */
	ck_assert_int_eq(pipette_bwcache_inter(bw, 2, 1, &f), 0);
	ck_assert(isnan(f.gbps));
	ck_assert_int_eq(pipette_bwcache_inter(bw, 0, 7, &f), -1);
	/* intra of gpu001: section "when" defaults to "generated" */
	ck_assert_int_eq(pipette_bwcache_node_gpus(bw, 0), 2);
	ck_assert_int_eq(pipette_bwcache_intra(bw, 0, 1, 0, &f), 1);
	ck_assert_double_eq(f.gbps, 369.9);
	ck_assert(isnan(f.lat_us));
	ck_assert_str_eq(f.prov.metric, "algbw");
	ck_assert_int_eq(f.prov.when, t_of("2025-01-01T00:00:00Z"));
	ck_assert_int_eq(pipette_bwcache_node_gpus(bw, 1), 0);
	ck_assert_int_eq(pipette_bwcache_intra(bw, 3, 1, 0, &f), 0);
	pipette_bwcache_get_defaults(bw, &d);
	ck_assert_double_eq(d.inter_gbps, 20);
	ck_assert_double_eq(d.intra_gbps, 150);
	ck_assert_double_eq(d.inter_lat_us, 5);
	ck_assert_double_eq(d.intra_lat_us, 2);
	ck_assert_int_eq(pipette_bwcache_generated(bw), t_of("2025-01-01T00:00:00Z"));
	pipette_bwcache_destroy(bw);
}
END_TEST

static const struct {
	const char *file;
	const char *fragment;
} bad_files[] = {
	{ "bad-malformed.json", "line 4, column 1: malformed JSON" },
	{ "bad-trailing.json", "text after the top-level object" },
	{ "bad-empty.json", "empty file" },
	{ "bad-schema.json", "$.schema: unsupported schema \"pipette-bw/9\"" },
	{ "bad-domain-twice.json", "$.domains[1].nodes[1]: node 'gb02' is already in NVLink domain 'r1'" },
	{ "bad-domain-node.json", "$.domains[0].nodes[1]: unknown node 'gb09'" },
	{ "bad-domain-gpus.json", "$.domains[0].gpus: NVLink domain 'r1' states 4 GPUs, but its nodes' intra matrices hold 6" },
	{ "bad-domain-v2.json", "$: unknown key 'domains'" },
	{ "bad-domain-range.json", "$.domains[0].nodes[0]: index range [0, 2] is not within [0, 1]" },
	{ "bad-legacy.json", "import --from pipette-legacy" },
	{ "bad-nonsquare.json", "$.inter.matrix[1]: expected 3 values (the matrix must be square), got 2" },
	{ "bad-rows.json", "$.inter.matrix: expected 3 rows" },
	{ "bad-negative.json", "$.inter.matrix[0][1]: expected a bandwidth in GB/s in (0, 10000], got -3" },
	{ "bad-nan.json", "$.inter.matrix[0][2]: expected a bandwidth in GB/s in (0, 10000], got nan" },
	{ "bad-absurd.json", "$.inter.matrix[2][0]: expected a bandwidth in GB/s in (0, 10000], got 25000" },
	{ "bad-string.json", "$.inter.matrix[0][1]: expected a bandwidth in GB/s or null, got a string \"23.1\"" },
	{ "bad-diagonal.json", "$.inter.matrix[1][1]: expected null on the diagonal" },
	{ "bad-unknown-link.json", "$.inter.links[0].b: unknown node 'gpu009'" },
	{ "bad-key.json", "$.inter.links[0]: unknown key 'gbsp'" },
	{ "bad-when.json", "$.inter.links[0].when: expected a UTC time" },
	{ "bad-duplicate.json", "$.inter.order[2]: duplicated node name 'gpu001' (also at $.inter.order[0])" },
	{ "bad-units.json", "$.units: expected \"GB/s\"" },
	{ "bad-intra.json", "$.nodes.gpu001.intra.matrix[1]: expected 2 values" },
	{ "bad-defaults.json", "$.defaults.inter_gbps: expected a bandwidth in GB/s in (0, 10000], got 0" },
	{ "no-such-file.json", "cannot open" },
};

START_TEST(test_load_bad)
{
	char path[512];
	struct pipette_bwcache *bw = (struct pipette_bwcache *)&bw;
	struct pipette_err err = { .msg = "" };

	snprintf(path, sizeof(path), "%s/%s", BW_DIR, bad_files[_i].file);
	ck_assert_int_eq(pipette_bwcache_load(path, &bw, &err), -1);
	ck_assert_ptr_null(bw);
	/* The message starts with the file (or, when the file cannot be read,
	 * with what it is and the file) and carries the expected fragment. */
	ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0 ||
		      (strncmp(err.msg, "bandwidth cache: ", 17) == 0 &&
		       strncmp(err.msg + 17, path, strlen(path)) == 0), "%s", err.msg);
	ck_assert_msg(strstr(err.msg, bad_files[_i].fragment) != NULL,
		      "%s: got '%s', expected '%s'", bad_files[_i].file, err.msg,
		      bad_files[_i].fragment);
}
END_TEST

START_TEST(test_load_huge)
{
	char path[128];
	struct pipette_bwcache *bw;
	struct pipette_err err;
	FILE *f;

	/* A sparse file one byte over the limit: rejected before reading. */
	snprintf(path, sizeof(path), "%s/huge.json", tmpdir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(ftruncate(fileno(f), PIPETTE_BW_MAX_FILE_BYTES + 1), 0);
	fclose(f);
	ck_assert_int_eq(pipette_bwcache_load(path, &bw, &err), -1);
	ck_assert_msg(strstr(err.msg, "exceed the limit") != NULL, "%s", err.msg);
	/* Garbage bytes, a directory: errors, no crash. */
	ck_assert_int_eq(pipette_bwcache_parse("\x01\x02\xff", 3, "junk", &bw, &err), -1);
	ck_assert_msg(strstr(err.msg, "junk: line 1") != NULL, "%s", err.msg);
	ck_assert_int_eq(pipette_bwcache_load(tmpdir, &bw, &err), -1);
	ck_assert_msg(strstr(err.msg, "not a regular file") != NULL, "%s", err.msg);
}
END_TEST

/* A cache loaded from a file remembers the SHA-256 of its bytes; one
 * built in memory has none, nor one loaded unhashed (the same cache). */
START_TEST(test_sha256)
{
	struct pipette_bwcache *bw = load_ok(BW_DIR "/good-3.json"), *made, *unhashed;
	unsigned char want[PIPETTE_SHA256_LEN];
	struct pipette_err err;
	size_t n;
	char *text = slurp(BW_DIR "/good-3.json", &n), *s1, *s2;

	pipette_sha256(text, n, want);
	ck_assert_ptr_nonnull(pipette_bwcache_sha256(bw));
	ck_assert(memcmp(pipette_bwcache_sha256(bw), want, sizeof(want)) == 0);
	made = pipette_bwcache_create();
	ck_assert_ptr_null(pipette_bwcache_sha256(made));
	ck_assert_msg(pipette_bwcache_load_unhashed(BW_DIR "/good-3.json", &unhashed, &err) == 0,
		      "%s", err.msg);
	ck_assert_ptr_null(pipette_bwcache_sha256(unhashed));
	s1 = pipette_bwcache_serialize(bw, &err);
	s2 = pipette_bwcache_serialize(unhashed, &err);
	ck_assert_str_eq(s1, s2);
	pipette_bwcache_destroy(unhashed);
	ck_assert_int_eq(pipette_bwcache_load_unhashed(BW_DIR "/nope.json", &unhashed, &err), -1);
	ck_assert_ptr_null(unhashed);
	ck_assert_msg(strstr(err.msg, "bandwidth cache: ") && strstr(err.msg, "nope.json"), "%s",
		      err.msg);
	free(s1);
	free(s2);
	pipette_bwcache_destroy(made);
	pipette_bwcache_destroy(bw);
	free(text);
}
END_TEST

START_TEST(test_roundtrip)
{
	struct pipette_bwcache *a = load_ok(BW_DIR "/good-3.json"), *b;
	struct pipette_bw_figure f;
	struct pipette_err err;
	char *s1, *s2;

	s1 = pipette_bwcache_serialize(a, &err);
	ck_assert_ptr_nonnull(s1);
	ck_assert_int_eq(pipette_bwcache_parse(s1, strlen(s1), "s1", &b, &err), 0);
	s2 = pipette_bwcache_serialize(b, &err);
	ck_assert_str_eq(s1, s2);
	/* the override survives as a link with its own time */
	ck_assert_int_eq(pipette_bwcache_inter(b, 1, 2, &f), 1);
	ck_assert_double_eq(f.gbps, 12.5);
	ck_assert_int_eq(f.prov.when, t_of("2025-01-02T03:04:05Z"));
	ck_assert_ptr_nonnull(strstr(s1, "\"uuid\":\"GPU-0a1b\""));
	ck_assert_ptr_nonnull(strstr(s1, "[null, 23.1, 22.8, null]"));
	free(s1);
	free(s2);
	pipette_bwcache_destroy(a);
	pipette_bwcache_destroy(b);
}
END_TEST

/* ---------------------------------------------------------------- */

START_TEST(test_fallback_order)
{
	static const char nodef_text[] = "{\"schema\": \"pipette-bw/1\", "
		"\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 9], "
		"[null, null]]}}";
	struct pipette_bwcache *bw = load_ok(BW_DIR "/good-3.json"), *nodef;
	const char *nodes[] = { "gpu001", "gpu002", "gpu003", "gpu004" };
	const int ids[] = { 1, 0 };
	struct pipette_cluster *c;
	struct pipette_link l;
	struct pipette_err err;

	/* G = 2: GPU g is node g/2, slot g%2. */
	c = pipette_cluster_create(nodes, 4, 2, NULL, &test_gpu, bw, 0, &err);
	ck_assert_msg(c != NULL, "%s", err.msg);
	/* 1. link override: gpu002 -> gpu003 is 12.5 (not the matrix 11.9),
	 *    latency 6.1 of the link */
	l = pipette_cluster_link(c, 2, 4);
	ck_assert_double_eq(l.gbps, 12.5);
	ck_assert_double_eq_tol(l.lat_us, 6.1, 1e-6);
	/* 2. matrix: gpu001 -> gpu002 is 23.1 from every GPU pair, latency of
	 *    the section (4) */
	l = pipette_cluster_link(c, 1, 2);
	ck_assert_double_eq(l.gbps, 23.1);
	ck_assert_double_eq_tol(l.lat_us, 4.0, 1e-6);
	ck_assert_double_eq(pipette_cluster_link(c, 0, 3).gbps, 23.1);
	ck_assert_double_eq(pipette_cluster_link(c, 2, 0).gbps, 23.0);
	/* 3. cache defaults: gpu003 -> gpu002 is null: 20 GB/s, 5 us */
	l = pipette_cluster_link(c, 4, 2);
	ck_assert_double_eq(l.gbps, 20);
	ck_assert_double_eq(l.lat_us, 5);
	/* gpu004 has no inter figures at all */
	ck_assert_double_eq(pipette_cluster_link(c, 6, 0).gbps, 20);
	/* intra: gpu001 GPU0 -> GPU1 measured 370.2, no latency measured ->
	 * intra default 2 us; gpu002 has no intra matrix -> default 150;
	 * gpu004 GPU1 -> GPU0 is null -> 150, GPU0 -> GPU1 = 300 */
	l = pipette_cluster_link(c, 0, 1);
	ck_assert_double_eq(l.gbps, 370.2);
	ck_assert_double_eq(l.lat_us, 2);
	ck_assert_double_eq(pipette_cluster_link(c, 1, 0).gbps, 369.9);
	ck_assert_double_eq(pipette_cluster_link(c, 2, 3).gbps, 150);
	ck_assert_double_eq(pipette_cluster_link(c, 7, 6).gbps, 150);
	ck_assert_double_eq(pipette_cluster_link(c, 6, 7).gbps, 300);
	/* 12 directed inter pairs: measured 0->1, 0->2, 1->0, 1->2, 2->0 = 5,
	 * so 7 unmeasured; 8 intra pairs, measured 3 */
	ck_assert_msg(strstr(pipette_cluster_warnings(c),
			     "7 of 12 inter-node links are unmeasured: using the "
			     "cache default 20 GB/s") != NULL, "%s",
		      pipette_cluster_warnings(c));
	ck_assert_ptr_nonnull(strstr(pipette_cluster_warnings(c),
				     "5 of 8 intra-node GPU pairs"));
	pipette_cluster_destroy(c);

	/* Slurm gave GPUs 1 and 0 (in that order): slot 0 is GPU 1, so
	 * slot 0 -> slot 1 is the matrix's [1][0] = 369.9. */
	c = pipette_cluster_create(nodes, 2, 2, ids, &test_gpu, bw, 0, &err);
	ck_assert_msg(c != NULL, "%s", err.msg);
	ck_assert_double_eq(pipette_cluster_link(c, 0, 1).gbps, 369.9);
	ck_assert_int_eq(pipette_cluster_gpu_id(c, 0), 1);
	pipette_cluster_destroy(c);

	/* 4. nominal: a cache without defaults, and no cache at all */
	ck_assert_int_eq(pipette_bwcache_parse(nodef_text, strlen(nodef_text), "nodef",
					       &nodef, &err), 0);
	{
		const char *ab[] = { "a", "b" };

		c = pipette_cluster_create(ab, 2, 2, NULL, &test_gpu, nodef, 0, &err);
		ck_assert_msg(c != NULL, "%s", err.msg);
		l = pipette_cluster_link(c, 0, 2);
		ck_assert_double_eq(l.gbps, 9);
		ck_assert_double_eq(l.lat_us, 7);	/* no latency anywhere: nominal */
		l = pipette_cluster_link(c, 2, 0);
		/* nominal x efficiency: 40 x 0.75 and 400 x 0.5 */
		ck_assert_double_eq(l.gbps, 30);
		l = pipette_cluster_link(c, 0, 1);
		ck_assert_double_eq(l.gbps, 200);
		ck_assert_double_eq(l.lat_us, 3);
		ck_assert_ptr_nonnull(strstr(pipette_cluster_warnings(c),
					     "30 GB/s (TEST-GPU's nominal link x its efficiency)"));
		pipette_cluster_destroy(c);
		c = pipette_cluster_create(ab, 2, 2, NULL, &test_gpu, NULL, 0, &err);
		ck_assert_double_eq(pipette_cluster_link(c, 0, 2).gbps, 30);
		ck_assert_str_eq(pipette_cluster_warnings(c), "");
		ck_assert_str_eq(pipette_cluster_node_name(c, 1), "b");
		pipette_cluster_destroy(c);
	}
	pipette_bwcache_destroy(nodef);
	pipette_bwcache_destroy(bw);
}
END_TEST

START_TEST(test_cluster_errors)
{
	struct pipette_bwcache *bw = load_ok(BW_DIR "/good-3.json");
	const char *nodes[] = { "gpu001", "gpu099" };
	const char *dup[] = { "gpu001", "gpu001" };
	const int bad_ids[] = { 0, 5 };
	struct pipette_cluster *c;
	struct pipette_err err;

	c = pipette_cluster_create(nodes, 2, 2, NULL, &test_gpu, bw, 0, &err);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err.msg, "node 'gpu099' is not in the bandwidth cache"),
		      "%s", err.msg);
	c = pipette_cluster_create(nodes, 2, 2, NULL, &test_gpu, bw, 1, &err);
	ck_assert_ptr_nonnull(c);
	ck_assert_msg(strstr(pipette_cluster_warnings(c), "1 of 2 nodes are not in "
			     "the bandwidth cache (gpu099)"), "%s",
		      pipette_cluster_warnings(c));
	ck_assert_double_eq(pipette_cluster_link(c, 0, 2).gbps, 20);
	pipette_cluster_destroy(c);
	c = pipette_cluster_create(dup, 2, 2, NULL, &test_gpu, bw, 1, &err);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(err.msg, "given twice"));
	/* GPU index 5 is outside gpu001's 2x2 intra matrix */
	c = pipette_cluster_create(nodes, 1, 2, bad_ids, &test_gpu, bw, 0, &err);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err.msg, "GPU index 5 is outside its measured 2x2"),
		      "%s", err.msg);
	c = pipette_cluster_create(nodes, 1, 0, NULL, &test_gpu, bw, 0, &err);
	ck_assert_ptr_null(c);
	c = pipette_cluster_create(nodes, 1, 2, NULL, NULL, bw, 0, &err);
	ck_assert_ptr_null(c);
	pipette_bwcache_destroy(bw);
}
END_TEST

START_TEST(test_cluster_scale)
{
	/* 1024 nodes x 8 GPUs from a generated cache: the dense arrays are
	 * 1024^2 node pairs x 16 B = 16 MiB plus 1024 x 64 x 16 B = 1 MiB. */
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw;
	struct pipette_cluster *c;
	struct pipette_err err;
	struct pipette_link l;
	char **names = malloc(1024 * sizeof(char *));
	int i;

	pipette_bw_gen_init(&g);
	g.nodes = 1024;
	g.gpus_per_node = 8;
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	g.inter_lat_us = 20;
	g.intra_lat_us = 10;
	ck_assert_msg(pipette_bwcache_generate(&g, &bw, &err) == 0, "%s", err.msg);
	for (i = 0; i < 1024; i++)
		names[i] = (char *)pipette_bwcache_node_name(bw, 1023 - i);
	c = pipette_cluster_create((const char *const *)names, 1024, 8, NULL,
				   &test_gpu, bw, 0, &err);
	ck_assert_msg(c != NULL, "%s", err.msg);
	/* cluster node 0 is cache node 1023 (node1024) */
	ck_assert_str_eq(pipette_cluster_node_name(c, 0), "node1024");
	l = pipette_cluster_link(c, 8 * 0 + 3, 8 * 5 + 1);
	{
		struct pipette_bw_figure f;

		pipette_bwcache_inter(bw, 1023, 1018, &f);
		ck_assert_double_eq(l.gbps, f.gbps);
	}
	/* noise 3%: every figure within 45 * [0.97, 1.03] */
	ck_assert(l.gbps >= 43.64 && l.gbps <= 46.36);
	ck_assert_str_eq(pipette_cluster_warnings(c), "");
	pipette_cluster_destroy(c);
	pipette_bwcache_destroy(bw);
	free(names);
}
END_TEST

/* Every node link of a cluster against the fallback chain of cluster.h,
 * worked out here from the cache's own figures: measured > cache default
 * > the GPU's nominal figure (x its efficiency), with the NVLink figures
 * for the nodes of one domain (test_gpu with 4-GPU domains: nodes 2k and
 * 2k + 1).  The cache has n nodes; pair (a, b) gets one of `distinct`
 * short decimals, one of three latencies (one not measured), an exact
 * figure (17 significant digits, no short code) for 1 pair in 13, and no
 * figure for 1 in 11.  The cluster lists the nodes in reverse; its
 * warning counts the unmeasured links. */
static void check_links(int n, int distinct, int grouped)
{
	struct pipette_gpu_spec gpu = test_gpu;
	struct pipette_bw_prov p = { "t", "busbw", 1 << 20, 100 };
	struct pipette_bw_defaults d = { 30, NAN, 9, NAN };
	struct pipette_bwcache *bw = pipette_bwcache_create();
	struct pipette_cluster *c;
	struct pipette_err err;
	char **names = malloc((size_t)n * sizeof(char *)), want[128];
	long unmeasured = 0;
	int a, b;

	gpu.nvlink_domain_gpus = 4;
	ck_assert_int_eq(pipette_bwcache_set_defaults(bw, &d, &err), 0);
	for (a = 0; a < n; a++) {
		names[a] = malloc(16);
		snprintf(names[a], 16, "n%03d", a);
		ck_assert_int_ge(pipette_bwcache_add_node(bw, names[a], &err), 0);
	}
	for (a = 0; a < n; a++)
		for (b = 0; b < n; b++) {
			unsigned h = (unsigned)(a * 7919 + b * 104729) * 2654435761u;
			double gbps = 10 + (h >> 8) % (unsigned)distinct * 0.001;
			double lat = (h & 3) == 0 ? NAN : (h & 3) == 1 ? 2.5 : 4.75;

			if (a == b || (a * n + b) % 11 == 0)
				continue;
			if ((a * n + b) % 13 == 0)
				gbps = 41.234567890123456 + a * 1e-9;
			ck_assert_int_eq(pipette_bwcache_set_inter(bw, names[a], names[b], gbps, lat,
								   &p, &err), 0);
		}
	if (grouped) {	/* switches of 8 nodes: group figures where they hold */
		int *of = malloc((size_t)n * sizeof(int));
		const char *gn[64];
		char gbuf[64][8];

		for (a = 0; a < (n + 7) / 8 && a < 64; a++) {
			snprintf(gbuf[a], sizeof(gbuf[a]), "s%d", a);
			gn[a] = gbuf[a];
		}
		for (a = 0; a < n; a++)
			of[a] = a / 8;
		ck_assert_msg(pipette_bwcache_set_groups(bw, (n + 7) / 8, gn, of, 0.5, &err) == 0,
			      "%s", err.msg);
		ck_assert_int_gt(pipette_bwcache_group_count(bw), 0);
		free(of);
	}
	{	/* the cluster in reverse order */
		char **rev = malloc((size_t)n * sizeof(char *));

		for (a = 0; a < n; a++)
			rev[a] = names[n - 1 - a];
		c = pipette_cluster_create((const char *const *)rev, n, 2, NULL, &gpu, bw, 0, &err);
		free(rev);
	}
	ck_assert_msg(c != NULL, "%s", err.msg);
	for (a = 0; a < n; a++)
		for (b = 0; b < n; b++) {
			int ca = n - 1 - a, cb = n - 1 - b, dom = ca / 2 == cb / 2;
			struct pipette_bw_figure f;
			struct pipette_link l;
			double gbps, lat;

			if (a == b)
				continue;
			l = pipette_cluster_node_link(c, ca, cb);
			if (pipette_bwcache_inter(bw, a, b, &f) == 1) {
				gbps = f.gbps;
				lat = !isnan(f.lat_us) ? f.lat_us : dom ? 3 : 9;
			} else {
				gbps = dom ? 400 * 0.5 : 30;
				lat = dom ? 3 : 9;
				unmeasured++;
			}
			ck_assert_msg(l.gbps == gbps && l.lat_us == lat,
				      "n %d: %s -> %s: %.17g GB/s %.17g us, expected %.17g, %.17g", n,
				      names[a], names[b], l.gbps, l.lat_us, gbps, lat);
		}
	snprintf(want, sizeof(want), "%ld of %d inter-node links are unmeasured", unmeasured,
		 n * (n - 1));
	ck_assert_msg(strstr(pipette_cluster_warnings(c), want), "%s",
		      pipette_cluster_warnings(c));
	pipette_cluster_destroy(c);
	pipette_bwcache_destroy(bw);
	for (a = 0; a < n; a++)
		free(names[a]);
	free(names);
}

/* The node links as resolved, whichever form the cluster stores them in
 * (cluster.c's lstore): 2-byte indices (30 nodes, 40 distinct figures),
 * the links themselves once distinct ones are as many as half the pairs
 * (80 nodes, 5000), 4-byte indices past 65,536 distinct ones (400 nodes,
 * 90,000; 159,600 pairs); each with more keys than fill_inter's memo has
 * entries but the first; from a cache whose figures are a matrix of the
 * pairs' own (read row by row) and from one with node groups (pair by
 * pair, through the cache's lookup). */
START_TEST(test_cluster_links_resolved)
{
	check_links(30, 40, 0);
	check_links(80, 5000, 0);
	check_links(400, 90000, 0);
	check_links(30, 40, 1);
	check_links(80, 5000, 1);
}
END_TEST

/* A node named twice: the error names it and its first two positions,
 * however many nodes come between. */
START_TEST(test_cluster_duplicate_names)
{
	const char *nodes[] = { "a1", "a2", "a3", "b7", "a5", "a6", "a3", "b7" };
	struct pipette_err err;

	ck_assert_ptr_null(pipette_cluster_create(nodes, 8, 2, NULL, &test_gpu, NULL, 0, &err));
	ck_assert_msg(strstr(err.msg, "node 'a3' given twice (positions 2 and 6)"), "%s",
		      err.msg);
	nodes[6] = "";
	ck_assert_ptr_null(pipette_cluster_create(nodes, 8, 2, NULL, &test_gpu, NULL, 0, &err));
	ck_assert_msg(strstr(err.msg, "node 6 has no name"), "%s", err.msg);
	nodes[6] = "a7";
	ck_assert_ptr_null(pipette_cluster_create(nodes, 8, 2, NULL, &test_gpu, NULL, 0, &err));
	ck_assert_msg(strstr(err.msg, "node 'b7' given twice (positions 3 and 7)"), "%s",
		      err.msg);
}
END_TEST

/* ---------------------------------------------------------------- */

START_TEST(test_merge)
{
	struct pipette_bwcache *a = pipette_bwcache_create();
	struct pipette_bwcache *b = pipette_bwcache_create(), *c;
	struct pipette_bw_prov p100 = { "t", "busbw", 1024, 100 };
	struct pipette_bw_prov p200 = { "t", "busbw", 2048, 200 };
	struct pipette_bw_prov p300 = { "t", "busbw", 1024, 300 };
	struct pipette_bw_prov p50 = { "u", "algbw", 1024, 50 };
	struct pipette_bw_figure f;
	struct pipette_err err;
	char *s, *s2;

	ck_assert_int_eq(pipette_bwcache_set_inter(a, "n1", "n2", 10, NAN, &p100, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(a, "n2", "n1", 11, 2.5, &p100, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(a, "n1", "n3", 12, NAN, &p300, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(a, "n3", "n1", 5, NAN, &p100, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_intra(a, "n1", 0, 1, 300, NAN, &p100, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(b, "n1", "n2", 20, NAN, &p200, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(b, "n1", "n3", 30, NAN, &p200, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(b, "n3", "n1", 6, NAN, &p100, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(b, "n4", "n1", 40, NAN, &p50, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_intra(b, "n1", 1, 0, 310, NAN, &p200, &err), 0);
	ck_assert_int_eq(pipette_bwcache_merge(a, b, &err), 0);
	/* n1 -> n2: b is newer (200 > 100): b wins */
	ck_assert_int_eq(pipette_bwcache_inter(a, 0, 1, &f), 1);
	ck_assert_double_eq(f.gbps, 20);
	ck_assert_int_eq(f.prov.when, 200);
	ck_assert_double_eq(f.prov.bytes, 2048);
	/* n2 -> n1: b did not measure it: old value, latency and time stay */
	ck_assert_int_eq(pipette_bwcache_inter(a, 1, 0, &f), 1);
	ck_assert_double_eq(f.gbps, 11);
	ck_assert_double_eq(f.lat_us, 2.5);
	ck_assert_int_eq(f.prov.when, 100);
	/* n1 -> n3: a's figure (300) is newer than b's (200): a keeps 12 */
	ck_assert_int_eq(pipette_bwcache_inter(a, 0, 2, &f), 1);
	ck_assert_double_eq(f.gbps, 12);
	ck_assert_int_eq(f.prov.when, 300);
	/* n3 -> n1: equal times: the later input (b) wins */
	pipette_bwcache_inter(a, 2, 0, &f);
	ck_assert_double_eq(f.gbps, 6);
	/* new node n4 appended; its figure kept even though old (50) */
	ck_assert_int_eq(pipette_bwcache_node_index(a, "n4"), 3);
	pipette_bwcache_inter(a, 3, 0, &f);
	ck_assert_double_eq(f.gbps, 40);
	ck_assert_str_eq(f.prov.tool, "u");
	/* intra merged per GPU pair */
	pipette_bwcache_intra(a, 0, 0, 1, &f);
	ck_assert_double_eq(f.gbps, 300);
	pipette_bwcache_intra(a, 0, 1, 0, &f);
	ck_assert_double_eq(f.gbps, 310);

	/* Mixed provenance survives a save/load cycle through "links". */
	s = pipette_bwcache_serialize(a, &err);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(pipette_bwcache_parse(s, strlen(s), "merged", &c, &err), 0);
	pipette_bwcache_inter(c, 0, 1, &f);
	ck_assert_double_eq(f.gbps, 20);
	ck_assert_int_eq(f.prov.when, 200);
	pipette_bwcache_inter(c, 1, 0, &f);
	ck_assert_int_eq(f.prov.when, 100);
	ck_assert_double_eq(f.lat_us, 2.5);
	pipette_bwcache_inter(c, 3, 0, &f);
	ck_assert_str_eq(f.prov.metric, "algbw");
	s2 = pipette_bwcache_serialize(c, &err);
	ck_assert_str_eq(s, s2);
	free(s);
	free(s2);
	pipette_bwcache_destroy(a);
	pipette_bwcache_destroy(b);
	pipette_bwcache_destroy(c);
}
END_TEST

START_TEST(test_stale)
{
	struct pipette_bwcache *bw = load_ok(BW_DIR "/good-3.json");
	const char *two[] = { "gpu002", "gpu003" };
	char msg[512];
	time_t now = t_of("2025-01-21T00:00:00Z");

	/* Measured: inter 0->1, 0->2, 1->0, 2->0 (Jan 1) and the 1->2 link
	 * (Jan 2 03:04), intra gpu001 0->1, 1->0 and gpu004 0->1 (Jan 1):
	 * 8 figures.  At Jan 21, 14 days back is Jan 7: all 8 are older. */
	ck_assert_int_eq(pipette_bwcache_stale(bw, NULL, 0, now, 14 * 86400.0,
					       msg, sizeof(msg)), 8);
	ck_assert_msg(strstr(msg, "8 of 8 measured figures are older than 14 days "
			     "(oldest: gpu001 -> gpu002, measured 2025-01-01T00:00:00Z)"),
		      "%s", msg);
	/* 19.5 days back is Jan 1 12:00: only the Jan 2 link is fresh: 7 */
	ck_assert_int_eq(pipette_bwcache_stale(bw, NULL, 0, now, 19.5 * 86400.0,
					       msg, sizeof(msg)), 7);
	/* among gpu002 and gpu003: 2->3 (Jan 2) and 3->2 (null) */
	ck_assert_int_eq(pipette_bwcache_stale(bw, two, 2, now, 19.5 * 86400.0,
					       msg, sizeof(msg)), 0);
	ck_assert_str_eq(msg, "");
	ck_assert_int_eq(pipette_bwcache_stale(bw, two, 2, now, 10 * 86400.0,
					       msg, sizeof(msg)), 1);
	pipette_bwcache_destroy(bw);
}
END_TEST

/* Staleness of a grouped (pipette-bw/2) cache, read row by row from its
 * pairs and its groups, against the same figures ungrouped (a dense
 * matrix, looked up pair by pair): the same count and the same oldest
 * figure, for every node and for a subset in another order. */
START_TEST(test_stale_grouped)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *grouped, *flat;
	struct pipette_bw_prov old = { "old probe", "busbw", 1 << 20, 0 };
	struct pipette_err err;
	const char *some[] = { "n17", "n3", "n9", "n2", "n11" };
	const char *const *sets[] = { NULL, some };
	int n_sets[] = { 0, 5 };
	const char *names[6] = { "s0", "s1", "s2", "s3", "s4", "s5" };
	int group_of[24], i, k;
	char *text;
	time_t now;

	pipette_bw_gen_init(&g);
	g.seed = 7;
	g.nodes = 24;
	g.gpus_per_node = 2;
	g.prefix = "n";
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	g.switch_size = 4;
	g.slow_frac = 0.1;
	g.when = t_of("2025-03-01T00:00:00Z");
	now = g.when + 40 * 86400;
	ck_assert_int_eq(pipette_bwcache_generate(&g, &grouped, &err), 0);
	/* two links older than the rest: the second is the oldest */
	old.when = t_of("2025-02-10T00:00:00Z");
	ck_assert_int_eq(pipette_bwcache_set_inter(grouped, "n9", "n17", 30, NAN, &old,
						   &err), 0);
	old.when = t_of("2025-02-01T00:00:00Z");
	ck_assert_int_eq(pipette_bwcache_set_inter(grouped, "n20", "n5", 31, NAN, &old,
						   &err), 0);
	for (i = 0; i < 24; i++)
		group_of[i] = i / 4;
	ck_assert_int_eq(pipette_bwcache_set_groups(grouped, 6, names, group_of, 0.05, &err),
			 0);
	text = pipette_bwcache_serialize(grouped, &err);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(pipette_bwcache_parse(text, strlen(text), "copy", &flat, &err), 0);
	free(text);
	ck_assert_int_eq(pipette_bwcache_ungroup(flat, &err), 0);
	ck_assert_int_gt(pipette_bwcache_group_count(grouped), 0);
	for (k = 0; k < 2; k++) {
		char m1[512], m2[512];
		int c1 = pipette_bwcache_stale(grouped, sets[k], n_sets[k], now, 30 * 86400.0,
					       m1, sizeof(m1));
		int c2 = pipette_bwcache_stale(flat, sets[k], n_sets[k], now, 30 * 86400.0,
					       m2, sizeof(m2));

		ck_assert_msg(c1 == c2, "set %d: %d vs %d: %s | %s", k, c1, c2, m1, m2);
		ck_assert_int_gt(c1, 0);
		ck_assert_str_eq(m1, m2);
	}
	{
		char m[512];

		pipette_bwcache_stale(grouped, NULL, 0, now, 30 * 86400.0, m, sizeof(m));
		ck_assert_msg(strstr(m, "(oldest: n20 -> n5, measured 2025-02-01T00:00:00Z)"),
			      "%s", m);
	}
	pipette_bwcache_destroy(grouped);
	pipette_bwcache_destroy(flat);
}
END_TEST

/* ---------------------------------------------------------------- */

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

START_TEST(test_atomic_save)
{
	struct pipette_bwcache *small = load_ok(BW_DIR "/good-3.json"), *big, *back;
	struct pipette_bw_gen g;
	struct pipette_err err;
	char path[128], vdir[160], *before, *after;
	struct stat st;
	size_t n1, n2;
	pid_t pid;
	int status;

	/* The directory holds the cache and its lock file, nothing else. */
	snprintf(path, sizeof(path), "%s/cache.json", tmpdir);
	ck_assert_msg(pipette_bwcache_save(small, path, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(count_entries(tmpdir), 2);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0644);
	back = load_ok(path);
	pipette_bwcache_destroy(back);
	before = slurp(path, &n1);

	pipette_bw_gen_init(&g);
	g.nodes = 64;
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	ck_assert_int_eq(pipette_bwcache_generate(&g, &big, &err), 0);
	/* A write that fails half-way (file size limit 4 KiB, the big cache
	 * is ~100 KB): the save fails, the old file survives byte for byte,
	 * no temporary file is left. */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rlimit rl = { 4096, 4096 };

		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		if (pipette_bwcache_save(big, path, &err) == 0)
			_exit(1);
		_exit(strstr(err.msg, "old file is untouched") ? 0 : 2);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d", status);
	after = slurp(path, &n2);
	ck_assert_uint_eq(n1, n2);
	ck_assert(memcmp(before, after, n1) == 0);
	/* the cache and its lock: the versions are kept after the new file
	 * is written, before it is renamed (versions.h) */
	ck_assert_int_eq(count_entries(tmpdir), 2);
	free(after);
	/* Saving onto a directory or a device, and into a missing directory:
	 * errors, before any lock file is made. */
	ck_assert_int_eq(pipette_bwcache_save(small, tmpdir, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "is a directory"));
	ck_assert_int_eq(pipette_bwcache_save(small, "/dev/null", &err), -1);
	ck_assert_msg(strstr(err.msg, "/dev/null: is a special file, not a regular file"), "%s", err.msg);
	snprintf(path, sizeof(path), "%s/missing/cache.json", tmpdir);
	ck_assert_int_eq(pipette_bwcache_save(small, path, &err), -1);
	ck_assert_msg(strstr(err.msg, "cannot create the lock file"), "%s", err.msg);
	/* A successful overwrite replaces the content, keeps one file, and
	 * the old and new contents as versions. */
	snprintf(path, sizeof(path), "%s/cache.json", tmpdir);
	ck_assert_int_eq(pipette_bwcache_save(big, path, &err), 0);
	after = slurp(path, &n2);
	ck_assert_uint_gt(n2, n1);
	ck_assert_int_eq(count_entries(tmpdir), 3);
	snprintf(vdir, sizeof(vdir), "%s.versions", path);
	ck_assert_int_eq(count_entries(vdir), 2);
	free(after);
	free(before);
	pipette_bwcache_destroy(small);
	pipette_bwcache_destroy(big);
}
END_TEST

/* A synthetic cache of n nodes named PREFIX1..PREFIXn, saved to path. */
static void save_generated(const char *path, const char *prefix, int n, unsigned long long seed)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw;
	struct pipette_err err;

	pipette_bw_gen_init(&g);
	g.seed = seed;
	g.nodes = n;
	g.gpus_per_node = 2;
	g.prefix = prefix;
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	ck_assert_msg(pipette_bwcache_generate(&g, &bw, &err) == 0, "%s", err.msg);
	ck_assert_msg(pipette_bwcache_save(bw, path, &err) == 0, "%s", err.msg);
	pipette_bwcache_destroy(bw);
}

/* Ten `pipette bandwidth merge OUT PART -o OUT` at once, each bringing two
 * nodes of its own to a cache of four: all 4 + 10 x 2 = 24 nodes arrive.
 * Each merge reads OUT, folds its part in and replaces OUT; without a lock
 * held from the read to the rename the last rename wins (6 to 10 of the
 * 24 nodes survived).  The ten start together: they wait on a pipe the
 * test then closes. */
#define N_MERGERS 10

START_TEST(test_concurrent_merge)
{
	char out_path[128], part[N_MERGERS][128], name[32], vdir[160];
	struct pipette_bwcache *bw;
	pid_t pid[N_MERGERS];
	int gate[2], k, i, status;

	snprintf(out_path, sizeof(out_path), "%s/bw.json", tmpdir);
	save_generated(out_path, "base", 4, 1);
	for (k = 0; k < N_MERGERS; k++) {
		snprintf(part[k], sizeof(part[k]), "%s/part%d.json", tmpdir, k);
		snprintf(name, sizeof(name), "p%dn", k);
		save_generated(part[k], name, 2, (unsigned long long)k + 2);
	}
	ck_assert_int_eq(pipe(gate), 0);
	for (k = 0; k < N_MERGERS; k++) {
		pid[k] = fork();
		ck_assert_int_ge(pid[k], 0);
		if (pid[k] == 0) {
			char c;

			close(gate[1]);
			if (read(gate[0], &c, 1) < 0)	/* EOF when the test closes it */
				_exit(126);
			if (!freopen("/dev/null", "w", stdout))
				_exit(126);
			execl(PIPETTE_BIN, "pipette", "bandwidth", "merge", out_path, part[k],
			      "-o", out_path, (char *)NULL);
			_exit(127);
		}
	}
	close(gate[0]);
	close(gate[1]);
	for (k = 0; k < N_MERGERS; k++) {
		ck_assert_int_eq(waitpid(pid[k], &status, 0), pid[k]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "merge %d: status %d", k, status);
	}
	bw = load_ok(out_path);
	ck_assert_int_eq(pipette_bwcache_node_count(bw), 4 + 2 * N_MERGERS);
	for (i = 1; i <= 4; i++) {
		snprintf(name, sizeof(name), "base%d", i);
		ck_assert_msg(pipette_bwcache_node_index(bw, name) >= 0, "%s lost", name);
	}
	for (k = 0; k < N_MERGERS; k++)
		for (i = 1; i <= 2; i++) {
			snprintf(name, sizeof(name), "p%dn%d", k, i);
			ck_assert_msg(pipette_bwcache_node_index(bw, name) >= 0, "%s lost", name);
		}
	pipette_bwcache_destroy(bw);
	/* the caches and their lock files, no temporary file, and the
	 * versions each merge kept of what it replaced (versions.h): the
	 * first content and each merge's, all distinct, none swept (they are
	 * younger than the grace period) */
	ck_assert_int_eq(count_entries(tmpdir), 2 * (1 + N_MERGERS) + 1);
	snprintf(vdir, sizeof(vdir), "%s.versions", out_path);
	ck_assert_int_eq(count_entries(vdir), 1 + N_MERGERS);
}
END_TEST

static int exists(const char *dir, const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void touch(const char *dir, const char *name)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"schema\": \"pipette-bw/1\", \"uni", f);	/* a killed write */
	fclose(f);
}

/* A writer killed between creating its temporary file and the rename
 * leaves the file behind.  The next writer holds the lock, so no other
 * writer is alive: it removes them, and nothing else. */
START_TEST(test_dead_writer_temps)
{
	static const char *const dead[] = { ".bw.json.tmp.4242.Ab12Cd",
		".bw.json.tmp-Xy12Z9" /* the name before the lock */ };
	static const char *const others[] = { ".bw.json.tmp.x.Ab12Cd", "bw.json.tmp.1.Ab12Cd",
		".other.json.tmp.1.Ab12Cd", ".bw.json.tmp.1.Ab12Cd.keep" };
	char out_path[128], part[128], args[512];
	size_t i;

	snprintf(out_path, sizeof(out_path), "%s/bw.json", tmpdir);
	snprintf(part, sizeof(part), "%s/part.json", tmpdir);
	save_generated(out_path, "base", 2, 1);
	save_generated(part, "new", 2, 2);
	for (i = 0; i < sizeof(dead) / sizeof(dead[0]); i++)
		touch(tmpdir, dead[i]);
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		touch(tmpdir, others[i]);
	snprintf(args, sizeof(args), "bandwidth merge %s %s -o %s", out_path, part, out_path);
	expect(args, 0, "4 nodes merged from 2 files");
	for (i = 0; i < sizeof(dead) / sizeof(dead[0]); i++)
		ck_assert_msg(!exists(tmpdir, dead[i]), "%s was left", dead[i]);
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		ck_assert_msg(exists(tmpdir, others[i]), "%s was removed", others[i]);
}
END_TEST

/* A writer waits for the lock a bounded time, then says who holds what. */
START_TEST(test_lock_wait_bounded)
{
	struct pipette_bwcache_lock *lock;
	struct pipette_err err;
	char path[128];
	pid_t pid;
	int status;

	snprintf(path, sizeof(path), "%s/bw.json", tmpdir);
	ck_assert_msg(pipette_bwcache_lock(path, 1, &lock, &err) == 0, "%s", err.msg);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct pipette_bwcache_lock *l2 = NULL;
		struct timespec t0, t1;
		double dt;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (pipette_bwcache_lock(path, 0.3, &l2, &err) == 0)
			_exit(1);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (!strstr(err.msg, "another writer has held") || !strstr(err.msg, "bw.json.lock"))
			_exit(2);
		_exit(dt >= 0.2 && dt < 5 ? 0 : 3);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d", status);
	pipette_bwcache_unlock(lock);
	/* released: the next writer gets it at once */
	ck_assert_msg(pipette_bwcache_lock(path, 0, &lock, &err) == 0, "%s", err.msg);
	pipette_bwcache_unlock(lock);
}
END_TEST

/* ---------------------------------------------------------------- */

START_TEST(test_import_legacy)
{
	struct pipette_bwcache *bw = pipette_bwcache_create();
	struct pipette_bw_figure f;
	struct pipette_err err;

	ck_assert_msg(pipette_bwcache_import_legacy(bw, BW_DIR "/legacy-4.json", 8,
						    1000, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(pipette_bwcache_node_count(bw), 4);
	ck_assert_str_eq(pipette_bwcache_node_name(bw, 2), "agpu1427");
	/* "21.9" at [0][1] and [1][0]; "10.2" at [0][3] */
	pipette_bwcache_inter(bw, 0, 1, &f);
	ck_assert_double_eq(f.gbps, 21.9);
	ck_assert_str_eq(f.prov.tool, "pipette-legacy nccl-tests sendrecv_perf");
	ck_assert_double_eq(f.prov.bytes, 31457280);	/* 30 MiB */
	ck_assert_int_eq(f.prov.when, 1000);
	pipette_bwcache_inter(bw, 3, 0, &f);
	ck_assert_double_eq(f.gbps, 10.2);
	/* diagonal "181.0" of agpu1426 -> every GPU pair of its 8 GPUs */
	ck_assert_int_eq(pipette_bwcache_node_gpus(bw, 1), 8);
	pipette_bwcache_intra(bw, 1, 7, 2, &f);
	ck_assert_double_eq(f.gbps, 181.0);
	ck_assert_int_eq(pipette_bwcache_import_legacy(bw, BW_DIR "/good-3.json", 8,
						       1000, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "expected the original Pipette format"));
	pipette_bwcache_destroy(bw);
}
END_TEST

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(test_import_nccl)
{
	struct pipette_bwcache *bw = pipette_bwcache_create();
	struct pipette_nccl_import o = { NULL, NULL, 0, NULL, 2000 };
	struct pipette_bw_figure f;
	struct pipette_err err;
	char path[128], *text, *p;

	/* Hosts from the Rank lines; the largest size (33554432 B) row's
	 * out-of-place busbw 46.60; latency = time of the 8-byte row. */
	ck_assert_msg(pipette_bwcache_import_nccl(bw, BW_DIR "/sendrecv-gpu001-gpu002.txt",
						  &o, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(pipette_bwcache_node_name(bw, 0), "gpu001");
	ck_assert_int_eq(pipette_bwcache_inter(bw, 0, 1, &f), 1);
	ck_assert_double_eq(f.gbps, 46.60);
	ck_assert_double_eq_tol(f.lat_us, 16.52, 1e-5);
	ck_assert_str_eq(f.prov.tool, "nccl-tests sendrecv_perf");
	ck_assert_str_eq(f.prov.metric, "busbw");
	ck_assert_double_eq(f.prov.bytes, 33554432);
	ck_assert_int_eq(pipette_bwcache_inter(bw, 1, 0, &f), 1);
	ck_assert_double_eq(f.gbps, 46.60);
	/* --bytes picks the 8 MiB row; --pair renames the nodes */
	o.bytes = 8388608;
	o.pair_a = "nodeA";
	o.pair_b = "nodeB";
	ck_assert_int_eq(pipette_bwcache_import_nccl(bw, BW_DIR "/sendrecv-gpu001-gpu002.txt",
						     &o, &err), 0);
	pipette_bwcache_inter(bw, pipette_bwcache_node_index(bw, "nodeB"),
			      pipette_bwcache_node_index(bw, "nodeA"), &f);
	ck_assert_double_eq(f.gbps, 44.08);
	o.bytes = 1000;
	ck_assert_int_eq(pipette_bwcache_import_nccl(bw, BW_DIR "/sendrecv-gpu001-gpu002.txt",
						     &o, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "no result row for 1000 bytes"));
	/* intra: one host, devices 2 and 5: both directions 360.03 */
	o.bytes = 0;
	o.pair_a = o.pair_b = NULL;
	ck_assert_int_eq(pipette_bwcache_import_nccl(bw, BW_DIR "/sendrecv-gpu003-intra.txt",
						     &o, &err), 0);
	ck_assert_int_eq(pipette_bwcache_intra(bw, pipette_bwcache_node_index(bw, "gpu003"),
					       5, 2, &f), 1);
	ck_assert_double_eq(f.gbps, 360.03);
	ck_assert_double_eq_tol(f.lat_us, 9.81, 1e-5);

	/* Without Rank lines: the pair must be given. */
	text = slurp(BW_DIR "/sendrecv-gpu001-gpu002.txt", NULL);
	for (p = strstr(text, "#  Rank"); p; p = strstr(p, "#  Rank"))
		memcpy(p, "#  Xank", 7);
	snprintf(path, sizeof(path), "%s/norank.txt", tmpdir);
	write_file(path, text);
	ck_assert_int_eq(pipette_bwcache_import_nccl(bw, path, &o, &err), -1);
	ck_assert_msg(strstr(err.msg, "give the node pair with --pair"), "%s", err.msg);
	free(text);
	/* #wrong != 0: not a measurement */
	text = slurp(BW_DIR "/sendrecv-gpu001-gpu002.txt", NULL);
	p = strstr(text, "46.60      0");
	ck_assert_ptr_nonnull(p);
	p[11] = '3';
	snprintf(path, sizeof(path), "%s/wrong.txt", tmpdir);
	write_file(path, text);
	ck_assert_int_eq(pipette_bwcache_import_nccl(bw, path, &o, &err), -1);
	ck_assert_msg(strstr(err.msg, "line 23: nccl-tests reports 3 wrong results"),
		      "%s", err.msg);
	free(text);
	/* Not nccl-tests output at all */
	ck_assert_int_eq(pipette_bwcache_import_nccl(bw, BW_DIR "/good-3.json", &o, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "no nccl-tests header line"));
	pipette_bwcache_destroy(bw);
}
END_TEST

/* ---------------------------------------------------------------- */

START_TEST(test_generate_deterministic)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *a, *b;
	struct pipette_bw_figure f;
	struct pipette_err err;
	char *s1, *s2;
	int i, j, slow = 0;

	pipette_bw_gen_init(&g);
	g.seed = 42;
	g.nodes = 16;
	g.inter_gbps = 45;
	g.intra_gbps = 405;
	g.inter_lat_us = 20;
	g.intra_lat_us = 10;
	g.slow_frac = 0.2;
	g.switch_size = 4;
	g.slow_switch = 3;
	g.slow_switch_factor = 0.6;
	g.degraded_node = 5;
	ck_assert_int_eq(pipette_bwcache_generate(&g, &a, &err), 0);
	ck_assert_int_eq(pipette_bwcache_generate(&g, &b, &err), 0);
	s1 = pipette_bwcache_serialize(a, &err);
	s2 = pipette_bwcache_serialize(b, &err);
	ck_assert_str_eq(s1, s2);
	free(s2);
	pipette_bwcache_destroy(b);
	g.seed = 43;
	ck_assert_int_eq(pipette_bwcache_generate(&g, &b, &err), 0);
	s2 = pipette_bwcache_serialize(b, &err);
	ck_assert_str_ne(s1, s2);
	free(s1);
	free(s2);
	pipette_bwcache_destroy(b);
	/* Switch 3 = node13..16: all their links <= 45 * 0.6 * 1.03 = 27.81;
	 * healthy pairs in switches 0..2 >= 45 * 0.97 = 43.65 unless slowed
	 * (<= 45 * 0.6 * 1.03). */
	for (i = 0; i < 16; i++)
		for (j = 0; j < 16; j++) {
			if (i == j)
				continue;
			pipette_bwcache_inter(a, i, j, &f);
			if (i >= 12 || j >= 12)
				ck_assert(f.gbps <= 27.81);
			else if (f.gbps < 43.65)
				slow++, ck_assert(f.gbps <= 27.81);
		}
	ck_assert_int_gt(slow, 0);
	/* node6's bad GPU: some pair at <= 405 * 0.5 * 1.03 = 208.6 */
	{
		int found = 0;

		for (i = 0; i < 8; i++)
			for (j = 0; j < 8; j++)
				if (i != j && pipette_bwcache_intra(a, 5, i, j, &f) == 1 &&
				    f.gbps <= 208.6)
					found++;
		/* one GPU: 7 pairs out and 7 in */
		ck_assert_int_eq(found, 14);
	}
	pipette_bwcache_destroy(a);
}
END_TEST

/* ---------------------------------------------------------------- */

static void expect(const char *args, int code, const char *fragment)
{
	int rc = cli_run(args, out, OUT_MAX);

	ck_assert_msg(rc == code, "pipette %s: exit %d, expected %d; output:\n%s",
		      args, rc, code, out);
	ck_assert_msg(strstr(out, fragment) != NULL,
		      "pipette %s: output lacks '%s':\n%s", args, fragment, out);
}

START_TEST(test_cli)
{
	char args[1024], o1[128], o2[128];

	expect("bandwidth", 2, "usage: pipette bandwidth validate");
	expect("bandwidth --help", 0, "pipette bandwidth merge");
	expect("bandwidth frob", 2, "unknown subcommand 'frob'");
	expect("bandwidth validate " BW_DIR "/good-3.json --now 2025-01-05T00:00:00Z",
	       0, "good-3.json: ok: pipette-bw/1, 4 nodes, 5 of 12 inter-node");
	expect("bandwidth validate " BW_DIR "/good-3.json --now 2025-03-05T00:00:00Z "
	       "--stale-days 30", 0, "warning: " BW_DIR "/good-3.json: 8 of 8 measured "
	       "figures are older than 30 days");
	expect("bandwidth validate " BW_DIR "/bad-negative.json", 2,
	       "pipette: " BW_DIR "/bad-negative.json: $.inter.matrix[0][1]: expected "
	       "a bandwidth in GB/s");
	expect("bandwidth validate " BW_DIR "/good-3.json " BW_DIR "/bad-duplicate.json",
	       2, "duplicated node name 'gpu001'");
	expect("bandwidth show " BW_DIR "/good-3.json --nodes 'gpu[001-002]' --now "
	       "2025-01-05T00:00:00Z", 0, "2 of 4 nodes shown, 2 of 2 inter-node");
	snprintf(o2, sizeof(o2), "%-20s -> %-20s %8.2f GB/s", "gpu002", "gpu003", 12.5);
	expect("bandwidth show " BW_DIR "/good-3.json --now 2025-01-05T00:00:00Z", 0, o2);
	expect("bandwidth show " BW_DIR "/good-3.json --nodes gpu009", 2,
	       "node 'gpu009' (from --nodes) is not in the cache");
	expect("bandwidth show " BW_DIR "/good-3.json --nodes 'gpu[3-1]'", 2,
	       "'gpu[3-1]' is not a valid Slurm hostlist");
	expect("bandwidth show " BW_DIR "/good-3.json --nodes 'gpu[1-2'", 2,
	       "is not a valid Slurm hostlist (it yields the name 'gpu]')");
	expect("bandwidth show " BW_DIR "/good-3.json --nodes 'gpu001,gpu001'", 2,
	       "names gpu001 twice");
	snprintf(o1, sizeof(o1), "%s/heat.svg", tmpdir);
	snprintf(args, sizeof(args), "bandwidth show " BW_DIR "/good-3.json --svg %s", o1);
	expect(args, 0, "worst inter-node links");
	{
		char *svg = slurp(o1, NULL);

		ck_assert_ptr_nonnull(strstr(svg, "<title>gpu002 -&gt; gpu003: 12.50 GB/s</title>"));
		free(svg);
	}
	/* The cache's own domains, not contiguous in the order shown: gb01,
	 * gb02 | gb03 | gb04 | gb05, gb06 alternate between c0f1/1 and c0f1/2,
	 * so each domain is two runs and gets a dashed rectangle wherever two
	 * of its runs meet: 4 + 4, none where the domains meet. */
	snprintf(args, sizeof(args), "bandwidth show " BW_DIR "/good-domains.json --svg %s", o1);
	expect(args, 0, "worst inter-node links");
	{
		char *svg = slurp(o1, NULL), *g = strstr(svg, "<g stroke=\"#e7298a\""), *p;
		int rects = 0;

		ck_assert_ptr_nonnull(g);
		for (p = g; (p = strstr(p + 1, "<rect")) && p < strstr(g, "</g>");)
			rects++;
		ck_assert_int_eq(rects, 8);
		ck_assert_ptr_nonnull(strstr(svg, ">NVLink domain</text>"));
		free(svg);
	}
	expect("bandwidth import " BW_DIR "/legacy-4.json -o /dev/null", 2,
	       "--from must be pipette-legacy or nccl-tests");
	expect("bandwidth import --from nccl-tests --pair a " BW_DIR
	       "/sendrecv-gpu001-gpu002.txt -o x.json", 2, "expected two node names A,B");
	snprintf(o1, sizeof(o1), "%s/legacy.json", tmpdir);
	snprintf(args, sizeof(args), "bandwidth import --from pipette-legacy --when "
		 "2025-02-01T00:00:00Z " BW_DIR "/legacy-4.json -o %s", o1);
	expect(args, 0, "4 nodes from 1 file");
	snprintf(o2, sizeof(o2), "%s/nccl.json", tmpdir);
	snprintf(args, sizeof(args), "bandwidth import --from nccl-tests --when "
		 "2025-03-01T00:00:00Z --pair agpu1425,agpu1426 " BW_DIR
		 "/sendrecv-gpu001-gpu002.txt -o %s", o2);
	expect(args, 0, "2 nodes from 1 file");
	/* merge: the March nccl-tests figure replaces the February legacy one */
	snprintf(args, sizeof(args), "bandwidth merge %s %s -o %s/merged.json", o1, o2,
		 tmpdir);
	expect(args, 0, "4 nodes merged from 2 files");
	snprintf(args, sizeof(args), "bandwidth show %s/merged.json --now "
		 "2025-03-02T00:00:00Z --worst 100", tmpdir);
	/* the line format is "%-20s -> %-20s %8.2f GB/s" */
	snprintf(o2, sizeof(o2), "%-20s -> %-20s %8.2f GB/s", "agpu1425", "agpu1426", 46.60);
	expect(args, 0, o2);
	snprintf(o2, sizeof(o2), "%-20s -> %-20s %8.2f GB/s", "agpu1427", "agpu1425", 22.10);
	ck_assert_msg(strstr(out, o2) != NULL, "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "generated 2025-03-01T00:00:00Z"));
	snprintf(args, sizeof(args), "bandwidth merge %s " BW_DIR "/bad-nan.json -o "
		 "%s/m2.json", o1, tmpdir);
	expect(args, 2, "bad-nan.json: $.inter.matrix[0][2]");
	expect("bandwidth generate --nodes 4 -o /dev/null", 2, "--seed and --nodes are required");
	expect("bandwidth generate --seed 1 --nodes 4 --gpu Z80 -o /dev/null", 2, "--gpu");
}
END_TEST

/* Every shipped example regenerates byte for byte from its "generator". */
START_TEST(test_examples_regenerate)
{
	static const char *const files[] = { "uniform-4x8-h100.json",
		"hetero-8x8-h100.json", "hetero-16x8-h100.json",
		"hetero-128x8-h100.json" };
	char path[512], args[1024], regen[256];
	size_t i;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct json_object *root, *gen;
		char *orig, *again;
		size_t n1, n2;

		snprintf(path, sizeof(path), "%s/%s", EXAMPLES_DIR, files[i]);
		orig = slurp(path, &n1);
		root = json_tokener_parse(orig);
		ck_assert_ptr_nonnull(root);
		ck_assert(json_object_object_get_ex(root, "generator", &gen));
		ck_assert(!strncmp(json_object_get_string(gen), "pipette ", 8));
		snprintf(regen, sizeof(regen), "%s/regen.json", tmpdir);
		snprintf(args, sizeof(args), "%s -o %s",
			 json_object_get_string(gen) + 8, regen);
		ck_assert_int_eq(cli_run(args, out, OUT_MAX), 0);
		again = slurp(regen, &n2);
		ck_assert_msg(n1 == n2 && !memcmp(orig, again, n1),
			      "%s differs from what its generator makes", files[i]);
		json_object_put(root);
		free(orig);
		free(again);
		/* and it validates */
		snprintf(args, sizeof(args), "bandwidth validate %s", path);
		expect(args, 0, ": ok: pipette-bw/1");
	}
}
END_TEST

/* A generated NVL72 cluster (pipette bandwidth generate --gpu GB200
 * --nvlink-domain 72): 36 trays of 4 GPUs, 18 trays a domain; pairs of a
 * domain at the intra-node figure (900 GB/s, 10 us, noise 3%), pairs of
 * two domains at the NIC's (50 GB/s, 20 us); one degraded tray's links to
 * its domain at 0.25 of that, and not to the other domain.  The noise
 * draws are those of a cache without domains (the same seed gives the
 * same figures wherever no domain changes them). */
START_TEST(test_generate_nvlink_domain)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw, *flat;
	struct pipette_bw_figure f, ff;
	struct pipette_err err;

	pipette_bw_gen_init(&g);
	g.nodes = 36;
	g.gpus_per_node = 4;
	g.inter_gbps = 50;
	g.intra_gbps = 900;
	g.inter_lat_us = 20;
	g.intra_lat_us = 10;
	g.domain_nodes = 18;
	g.degraded_tray = 4;
	g.degraded_tray_factor = 0.25;
	ck_assert_msg(pipette_bwcache_generate(&g, &bw, &err) == 0, "%s", err.msg);
	pipette_bwcache_inter(bw, 0, 17, &f);
	ck_assert(f.gbps >= 900 * 0.97 && f.gbps <= 900 * 1.03);
	ck_assert_double_eq(f.lat_us, 10);
	pipette_bwcache_inter(bw, 17, 18, &f);
	ck_assert(f.gbps >= 50 * 0.97 && f.gbps <= 50 * 1.03);
	ck_assert_double_eq(f.lat_us, 20);
	pipette_bwcache_inter(bw, 4, 9, &f);
	ck_assert(f.gbps >= 225 * 0.97 && f.gbps <= 225 * 1.03);
	pipette_bwcache_inter(bw, 4, 30, &f);
	ck_assert(f.gbps >= 50 * 0.97 && f.gbps <= 50 * 1.03);
	g.domain_nodes = 0;
	g.degraded_tray = -1;
	ck_assert_int_eq(pipette_bwcache_generate(&g, &flat, &err), 0);
	pipette_bwcache_inter(bw, 17, 18, &f);
	pipette_bwcache_inter(flat, 17, 18, &ff);
	ck_assert_double_eq(f.gbps, ff.gbps);
	pipette_bwcache_destroy(flat);
	/* a degraded tray needs a domain */
	g.degraded_tray = 4;
	ck_assert_int_eq(pipette_bwcache_generate(&g, &flat, &err), -1);
	ck_assert_msg(strstr(err.msg, "degraded tray 5 needs an NVLink domain"), "%s", err.msg);
	pipette_bwcache_destroy(bw);
}
END_TEST

/* pipette-bw/3: each node's NVLink domain read (names, index ranges, a
 * node of $.nodes only), written back the same, kept by a merge (a node
 * src puts elsewhere moves), and checked against a domain size. */
START_TEST(test_domains)
{
	struct pipette_bwcache *bw = load_ok(BW_DIR "/good-domains.json"), *back, *src;
	struct pipette_err err;
	char *text, *text2;

	ck_assert_str_eq(pipette_bwcache_schema(bw), "pipette-bw/3");
	ck_assert_int_eq(pipette_bwcache_domain_count(bw), 2);
	ck_assert_str_eq(pipette_bwcache_domain_name(bw, 0), "c0f1/1");
	ck_assert_int_eq(pipette_bwcache_domain_gpus(bw, 0), 72);
	ck_assert_int_eq(pipette_bwcache_domain_gpus(bw, 1), 0);
	/* gb01, gb02, gb04 in c0f1/1; gb03, gb05, gb06 in c0f1/2 */
	ck_assert_int_eq(pipette_bwcache_node_domain(bw, 0), 0);
	ck_assert_int_eq(pipette_bwcache_node_domain(bw, 1), 0);
	ck_assert_int_eq(pipette_bwcache_node_domain(bw, 2), 1);
	ck_assert_int_eq(pipette_bwcache_node_domain(bw, 3), 0);
	ck_assert_int_eq(pipette_bwcache_node_domain(bw, 4), 1);
	ck_assert_int_eq(pipette_bwcache_node_domain(bw, 5), 1);
	ck_assert_int_eq(pipette_bwcache_domain_nodes(bw, 1), 3);
	/* measured inside: c0f1/1's 3 x 2 pairs, c0f1/2's gb03 <-> gb05 */
	ck_assert_int_eq(pipette_bwcache_domain_measured(bw), 8);
	text = pipette_bwcache_serialize(bw, &err);
	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(strstr(text, "{\"name\": \"c0f1/1\", \"gpus\": 72, \"nodes\": "
					   "[[0, 1], [3, 3]]}"));
	ck_assert_int_eq(pipette_bwcache_parse(text, strlen(text), "back", &back, &err), 0);
	text2 = pipette_bwcache_serialize(back, &err);
	ck_assert_str_eq(text, text2);
	free(text2);
	/* sizes: 72 stated, 2 GPUs per node: fine for 72, not for 8 */
	ck_assert_int_eq(pipette_bwcache_check_domains(bw, 2, 72, &err), 0);
	ck_assert_int_eq(pipette_bwcache_check_domains(bw, 2, 8, &err), -1);
	ck_assert_msg(strstr(err.msg, "$.domains[0].gpus: NVLink domain 'c0f1/1' states 72 GPUs, "
			     "but the NVLink domain given has 8"), "%s", err.msg);
	ck_assert_int_eq(pipette_bwcache_check_domains(bw, 5, 0, &err), -1);
	ck_assert_msg(strstr(err.msg, "not a whole number of nodes of 5 GPUs"), "%s", err.msg);
	/* a node in two domains */
	ck_assert_int_eq(pipette_bwcache_set_domain(bw, "gb01", "c0f1/2", 0, 0, &err), -1);
	ck_assert_msg(strstr(err.msg, "node 'gb01' is in NVLink domains 'c0f1/1' and 'c0f1/2'"),
		      "%s", err.msg);
	ck_assert_int_eq(pipette_bwcache_set_domain(bw, "gb01", "c0f1/1", 64, 0, &err), -1);
	ck_assert_msg(strstr(err.msg, "stated as 72 GPUs and as 64"), "%s", err.msg);
	/* merge: src moves gb04 into a new domain and adds gb07 to it */
	src = pipette_bwcache_create();
	ck_assert_int_eq(pipette_bwcache_set_domain(src, "gb04", "c0f1/3", 0, 0, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_domain(src, "gb07", "c0f1/3", 0, 0, &err), 0);
	ck_assert_int_eq(pipette_bwcache_merge(back, src, &err), 0);
	ck_assert_int_eq(pipette_bwcache_node_domain(back, 3), 2);
	ck_assert_int_eq(pipette_bwcache_domain_nodes(back, 0), 2);
	ck_assert_int_eq(pipette_bwcache_domain_nodes(back, 2), 2);
	ck_assert_int_eq(pipette_bwcache_node_domain(back, pipette_bwcache_node_index(back, "gb07")),
			 2);
	pipette_bwcache_destroy(src);
	pipette_bwcache_destroy(back);
	free(text);
	pipette_bwcache_destroy(bw);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("bwcache");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_load_good);
	tcase_add_loop_test(tc, test_load_bad, 0,
			    (int)(sizeof(bad_files) / sizeof(bad_files[0])));
	tcase_add_test(tc, test_load_huge);
	tcase_add_test(tc, test_sha256);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_fallback_order);
	tcase_add_test(tc, test_cluster_errors);
	tcase_add_test(tc, test_cluster_scale);
	tcase_add_test(tc, test_cluster_links_resolved);
	tcase_add_test(tc, test_cluster_duplicate_names);
	tcase_add_test(tc, test_merge);
	tcase_add_test(tc, test_stale);
	tcase_add_test(tc, test_stale_grouped);
	tcase_add_test(tc, test_atomic_save);
	tcase_add_test(tc, test_concurrent_merge);
	tcase_add_test(tc, test_dead_writer_temps);
	tcase_add_test(tc, test_lock_wait_bounded);
	tcase_add_test(tc, test_import_legacy);
	tcase_add_test(tc, test_import_nccl);
	tcase_add_test(tc, test_generate_deterministic);
	tcase_add_test(tc, test_cli);
	tcase_add_test(tc, test_examples_regenerate);
	tcase_add_test(tc, test_generate_nvlink_domain);
	tcase_add_test(tc, test_domains);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
