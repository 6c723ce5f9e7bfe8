/* Unit tests: the plan (core/plan/plan.h): task environments, job environment,
 * determinism of the JSON, errors, and the `pipette plan` command. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inputs/bwcache.h"
#include "inputs/cluster.h"
#include "inputs/hardware.h"
#include "plan/plan.h"

#include "cli_run.h"
#include "check_run.h"

#define EXAMPLE(f) TEST_DATADIR "/../../etc/examples/" f

static const char *const names8[] = { "node1", "node2", "node3", "node4",
				      "node5", "node6", "node7", "node8" };
/* Slurm gave these GPU indices (cgroup-constrained job): not 0..7. */
static const int slurm_ids[8] = { 7, 6, 5, 4, 3, 2, 1, 0 };

struct env {
	int n;
	char name[32][32];
	char value[32][1024];
};

static int collect(void *ctx, const char *name, const char *value)
{
	struct env *e = ctx;

	ck_assert_int_lt(e->n, 32);
	snprintf(e->name[e->n], sizeof(e->name[0]), "%s", name);
	snprintf(e->value[e->n], sizeof(e->value[0]), "%s", value);
	e->n++;
	return 0;
}

static const char *get(const struct env *e, const char *name)
{
	int i;

	for (i = 0; i < e->n; i++)
		if (!strcmp(e->name[i], name))
			return e->value[i];
	return NULL;
}

static struct pipette_plan *plan8(enum pipette_launch_mode launch, const char *bw)
{
	struct pipette_request req;
	struct pipette_cluster_spec cs = { 8, names8, 8, slurm_ids };
	struct pipette_plan *p = NULL;
	struct pipette_err err;

	pipette_request_init(&req);
	snprintf(req.model, sizeof(req.model), "llama3-8b");
	snprintf(req.gpu, sizeof(req.gpu), "H100");
	snprintf(req.bandwidth, sizeof(req.bandwidth), "%s", bw);
	req.global_batch = 128;
	req.seq_len = 4096;
	req.launch = launch;
	req.pins.pp = 4;	/* pipeline over nodes: the mapping matters */
	req.pins.tp = 8;
	req.budget = 200;
	ck_assert_msg(pipette_plan_compute(&req, &cs, &p, &err) == 0, "%s", err.msg);
	return p;
}

/* Parse "a,b,c" and check it is a permutation of Slurm's ids. */
static void check_cvd(const char *s, int *out)
{
	int seen[8] = { 0 }, i, v;
	const char *q = s;

	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(sscanf(q, "%d", &v), 1);
		ck_assert(v >= 0 && v < 8);
		ck_assert_int_eq(seen[v], 0);
		seen[v] = 1;
		out[i] = v;
		q = strchr(q, ',');
		if (i < 7) {
			ck_assert_ptr_nonnull(q);
			q++;
		}
	}
}

START_TEST(test_srun_env)
{
	struct pipette_plan *p = plan8(PIPETTE_LAUNCH_SRUN, EXAMPLE("hetero-8x8-h100.json"));
	int seen[64] = { 0 }, node, task, moved = 0, n0, s0;
	struct pipette_err err;

	ck_assert_int_eq(pipette_plan_world(p), 64);
	pipette_plan_rank_location(p, 0, &n0, &s0);
	for (node = 0; node < 8; node++)
		for (task = 0; task < 8; task++) {
			struct env e = { 0 };
			int cvd[8], rank, lr, nn, ss;

			ck_assert_int_eq(pipette_plan_task_env(p, node, task, NULL, collect, &e, &err), 0);
			rank = atoi(get(&e, "RANK"));
			lr = atoi(get(&e, "LOCAL_RANK"));
			ck_assert(rank >= 0 && rank < 64);
			ck_assert_int_eq(seen[rank], 0);
			seen[rank] = 1;
			ck_assert_str_eq(get(&e, "WORLD_SIZE"), "64");
			ck_assert_str_eq(get(&e, "LOCAL_WORLD_SIZE"), "8");
			ck_assert_str_eq(get(&e, "MASTER_ADDR"), names8[n0]);
			/* the task's GPU (its slot) is at index LOCAL_RANK */
			check_cvd(get(&e, "CUDA_VISIBLE_DEVICES"), cvd);
			ck_assert_int_eq(cvd[lr], slurm_ids[task]);
			/* and sigma agrees */
			pipette_plan_rank_location(p, rank, &nn, &ss);
			ck_assert_int_eq(nn, node);
			ck_assert_int_eq(ss, task);
			ck_assert_int_eq(pipette_plan_rank_at(p, node, task), rank);
			if (rank != node * 8 + task)
				moved++;
		}
	ck_assert_int_gt(moved, 0);	/* the slow links moved some ranks */
	ck_assert(pipette_plan_mapping_gain(p) > 1.0);
	ck_assert_int_eq(pipette_plan_task_env(p, 8, 0, NULL, collect, NULL, &err), -1);
	ck_assert_int_eq(pipette_plan_task_env(p, 0, 8, NULL, collect, NULL, &err), -1);
	pipette_plan_destroy(p);
}
END_TEST

START_TEST(test_torchrun_env)
{
	struct pipette_plan *p = plan8(PIPETTE_LAUNCH_TORCHRUN,
				       EXAMPLE("hetero-8x8-h100.json"));
	int seen[8] = { 0 }, node, i;
	struct pipette_err err;

	for (node = 0; node < 8; node++) {
		struct env e = { 0 };
		int cvd[8], nr;

		ck_assert_int_eq(pipette_plan_task_env(p, node, 0, NULL, collect, &e, &err), 0);
		nr = atoi(get(&e, "NODE_RANK"));
		ck_assert(nr >= 0 && nr < 8);
		ck_assert_int_eq(seen[nr], 0);
		seen[nr] = 1;
		ck_assert_ptr_null(get(&e, "RANK"));
		check_cvd(get(&e, "CUDA_VISIBLE_DEVICES"), cvd);
		/* local rank i = global rank 8*nr + i runs on GPU cvd[i] */
		for (i = 0; i < 8; i++) {
			int n, s;

			pipette_plan_rank_location(p, 8 * nr + i, &n, &s);
			ck_assert_int_eq(n, node);
			ck_assert_int_eq(slurm_ids[s], cvd[i]);
		}
	}
	pipette_plan_destroy(p);
}
END_TEST

START_TEST(test_job_env_and_args)
{
	struct pipette_plan *p = plan8(PIPETTE_LAUNCH_SRUN, "");
	const struct pipette_config *c = pipette_plan_config(p);
	static const char *const vars[] = {
		"PIPETTE_TP", "PIPETTE_PP", "PIPETTE_DP", "PIPETTE_CP", "PIPETTE_EP",
		"PIPETTE_VPP", "PIPETTE_MICRO_BATCH", "PIPETTE_GLOBAL_BATCH",
		"PIPETTE_SCHEDULE", "PIPETTE_RECOMPUTE", "PIPETTE_PRECISION",
		"PIPETTE_SEQUENCE_PARALLEL",
		"PIPETTE_DISTRIBUTED_OPTIMIZER", "PIPETTE_DP_SHARD", "PIPETTE_DP_REPLICATE",
		"PIPETTE_MEGATRON_ARGS",
		"PIPETTE_PREDICTED_ITER_S", "PIPETTE_PREDICTED_MEM_GIB", "PIPETTE_MAPPING_GAIN",
		"PIPETTE_PLAN_HASH", "PIPETTE_STACK", "PIPETTE_LAUNCH_ARGS",
	};
	struct env e = { 0 };
	char args[1024], want[128];
	size_t i;

	ck_assert_int_eq(pipette_plan_job_env(p, collect, &e), 0);
	/* Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with TP or CP > 1. */
	ck_assert_int_eq(e.n, (int)(sizeof(vars) / sizeof(vars[0])) + (c->tp > 1 || c->cp > 1));
	if (c->tp > 1 || c->cp > 1)
		ck_assert_str_eq(get(&e, "CUDA_DEVICE_MAX_CONNECTIONS"), "1");
	else
		ck_assert_ptr_null(get(&e, "CUDA_DEVICE_MAX_CONNECTIONS"));
	ck_assert_str_eq(get(&e, "PIPETTE_STACK"), "megatron");
	ck_assert_str_eq(get(&e, "PIPETTE_LAUNCH_ARGS"), get(&e, "PIPETTE_MEGATRON_ARGS"));
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		ck_assert_msg(get(&e, vars[i]) != NULL, "%s missing", vars[i]);
	ck_assert_int_eq(atoi(get(&e, "PIPETTE_TP")), 8);
	ck_assert_int_eq(atoi(get(&e, "PIPETTE_PP")), 4);
	ck_assert_int_eq(atoi(get(&e, "PIPETTE_DP")), c->dp);
	ck_assert_str_eq(get(&e, "PIPETTE_GLOBAL_BATCH"), "128");
	ck_assert_str_eq(get(&e, "PIPETTE_SCHEDULE"), pipette_schedule_name(c->schedule));
	ck_assert_str_eq(get(&e, "PIPETTE_PRECISION"), "bf16");	/* the stack's default */
	/* nominal links are uniform: the default order is optimal */
	ck_assert_str_eq(get(&e, "PIPETTE_MAPPING_GAIN"), "1.0000");
	ck_assert_int_eq(pipette_plan_megatron_args(p, args, sizeof(args)), 0);
	ck_assert_str_eq(get(&e, "PIPETTE_MEGATRON_ARGS"), args);
	ck_assert_ptr_nonnull(strstr(args, "--tensor-model-parallel-size 8 "
					   "--pipeline-model-parallel-size 4 "));
	snprintf(want, sizeof(want), "--micro-batch-size %d --global-batch-size 128 "
		 "--seq-length 4096", c->micro_batch);
	ck_assert_ptr_nonnull(strstr(args, want));
	ck_assert_int_eq(pipette_plan_megatron_args(p, args, 10), -1);	/* too short */
	pipette_plan_destroy(p);
}
END_TEST

static char *json_of(struct pipette_plan *p, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(pipette_plan_write_json(p, f), 0);
	fclose(f);
	return buf;
}

START_TEST(test_json_deterministic)
{
	struct pipette_plan *a = plan8(PIPETTE_LAUNCH_SRUN, EXAMPLE("hetero-8x8-h100.json"));
	struct pipette_plan *b = plan8(PIPETTE_LAUNCH_SRUN, EXAMPLE("hetero-8x8-h100.json"));
	size_t la, lb;
	char *ja = json_of(a, &la), *jb = json_of(b, &lb);

	ck_assert_uint_eq(la, lb);
	ck_assert(memcmp(ja, jb, la) == 0);
	ck_assert_ptr_nonnull(strstr(ja, "\"sigma\""));
	ck_assert_ptr_nonnull(strstr(ja, "\"node\":\"node"));
	free(ja);
	free(jb);
	pipette_plan_destroy(a);
	pipette_plan_destroy(b);
}
END_TEST

/* The plan is a function of the set of nodes: the 16 nodes of the uneven
 * example cluster listed in 30 shuffled orders give one plan, byte for byte
 * (before: 4 different configurations), with one PIPETTE_PLAN_HASH. */
START_TEST(test_node_order_irrelevant)
{
	const char *names[16], *tmp;
	char buf[16][16];
	struct pipette_request req;
	struct pipette_err err;
	char *first = NULL, hash[PIPETTE_HASH_HEX + 1] = "";
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	int i, j, round;

	for (i = 0; i < 16; i++) {
		snprintf(buf[i], sizeof(buf[i]), "node%d", i + 1);
		names[i] = buf[i];
	}
	pipette_request_init(&req);
	snprintf(req.model, sizeof(req.model), "llama3-8b");
	snprintf(req.gpu, sizeof(req.gpu), "H100");
	snprintf(req.bandwidth, sizeof(req.bandwidth), "%s", EXAMPLE("hetero-16x8-h100.json"));
	req.global_batch = 64;
	req.seq_len = 4096;
	for (round = 0; round < 30; round++) {
		struct pipette_cluster_spec cs = { 16, names, 8, NULL };
		struct pipette_plan *p = NULL;
		size_t len;
		char *json;

		/* Fisher-Yates with a fixed xorshift stream: 30 fixed orders. */
		for (i = 15; round > 0 && i > 0; i--) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			j = (int)(x % (uint64_t)(i + 1));
			tmp = names[i];
			names[i] = names[j];
			names[j] = tmp;
		}
		ck_assert_msg(pipette_plan_compute(&req, &cs, &p, &err) == 0, "%s", err.msg);
		json = json_of(p, &len);
		if (!first) {
			first = json;
			snprintf(hash, sizeof(hash), "%s", pipette_plan_hash(p));
		} else {
			ck_assert_msg(!strcmp(first, json), "order %d gives another plan", round);
			ck_assert_str_eq(hash, pipette_plan_hash(p));
			free(json);
		}
		ck_assert_int_eq(pipette_plan_node_index(p, "node10"), 9);
		pipette_plan_destroy(p);
	}
	free(first);
	/* A name listed twice is an error, not two nodes. */
	{
		const char *dup[2] = { "node1", "node1" };
		struct pipette_cluster_spec cs = { 2, dup, 8, NULL };
		struct pipette_plan *p = NULL;

		ck_assert_int_eq(pipette_plan_compute(&req, &cs, &p, &err), -1);
		ck_assert_msg(strstr(err.msg, "node node1 is listed twice"), "%s", err.msg);
	}
}
END_TEST

/* GB200 NVL72 trays whose racks are irregular and interleaved in name
 * order: rack 0 has 6 of its 18 trays in the job (gb1, gb3, gb4, gb7,
 * gb10, gb13), rack 1 the other 8, and the cache (pipette-bw/3) says so.
 * The cluster takes the domains from the cache (not runs of 18 nodes),
 * a TP group of 8 (two trays) stays inside one rack, the plan is the
 * same whatever the node order, and a domain size that disagrees with
 * --nvlink-domain is refused naming the cache and the domain. */
static const int rack_of[14] = { 0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1 };

static void write_irregular_cache(char *path, size_t size)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw;
	struct pipette_err err;
	int fd;

	pipette_bw_gen_init(&g);
	g.nodes = 14;
	g.gpus_per_node = 4;
	g.prefix = "gb";
	g.inter_gbps = 50;	/* GB200's NIC and NVLink figures, as generate --gpu GB200 */
	g.intra_gbps = 900;
	g.inter_lat_us = 20;
	g.intra_lat_us = 10;
	g.domain_of = rack_of;
	g.domain_gpus = 72;
	g.degraded_tray = 5;
	g.degraded_tray_factor = 0.25;
	ck_assert_msg(pipette_bwcache_generate(&g, &bw, &err) == 0, "%s", err.msg);
	snprintf(path, size, "/tmp/pipette-test-irregular-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_msg(pipette_bwcache_save(bw, path, &err) == 0, "%s", err.msg);
	pipette_bwcache_destroy(bw);
}

START_TEST(test_gb200_irregular_domains)
{
	const char *names[14], *tmp;
	char buf[14][8], path[64], lock[80];
	struct pipette_request req;
	struct pipette_err err;
	struct pipette_bwcache *bw;
	struct pipette_cluster *cl;
	char *first = NULL;
	uint64_t x = 0x2545f4914f6cdd1dULL;
	int i, j, round, r;

	write_irregular_cache(path, sizeof(path));
	for (i = 0; i < 14; i++) {
		snprintf(buf[i], sizeof(buf[i]), "gb%d", i + 1);
		names[i] = buf[i];
	}
	/* the cluster: domains from the cache, nodes per domain gcd(6, 8) */
	ck_assert_msg(pipette_bwcache_load(path, &bw, &err) == 0, "%s", err.msg);
	cl = pipette_cluster_create(names, 14, 4, NULL, pipette_gpu_lookup("GB200", &err), bw, 0,
				    &err);
	ck_assert_msg(cl != NULL, "%s", err.msg);
	for (i = 0; i < 14; i++)
		for (j = 0; j < 14; j++)
			ck_assert_int_eq(pipette_cluster_same_domain(cl, i, j),
					 rack_of[i] == rack_of[j]);
	ck_assert_int_eq(pipette_cluster_domain_nodes(cl), 2);
	/* gb1 -> gb3 is NVLink (rack 0), gb1 -> gb2 the network */
	ck_assert(pipette_cluster_node_gbps(cl, 0, 2) > 800);
	ck_assert(pipette_cluster_node_gbps(cl, 0, 1) < 60);
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);

	pipette_request_init(&req);
	snprintf(req.model, sizeof(req.model), "llama3-8b");
	snprintf(req.gpu, sizeof(req.gpu), "GB200");
	snprintf(req.bandwidth, sizeof(req.bandwidth), "%s", path);
	req.global_batch = 112;
	req.seq_len = 4096;
	req.pins.tp = 8;	/* two trays: only inside a rack at NVLink speed */
	req.budget = 300;
	for (round = 0; round < 3; round++) {
		struct pipette_cluster_spec cs = { 14, names, 4, NULL };
		struct pipette_plan *p = NULL;
		size_t len;
		char *json;

		for (i = 13; round > 0 && i > 0; i--) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			j = (int)(x % (uint64_t)(i + 1));
			tmp = names[i];
			names[i] = names[j];
			names[j] = tmp;
		}
		ck_assert_msg(pipette_plan_compute(&req, &cs, &p, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(pipette_plan_config(p)->tp, 8);
		/* each TP group (ranks 8k..8k+7: TP is Megatron's fastest
		 * dimension) on the trays of one rack */
		for (r = 0; r < pipette_plan_world(p); r++) {
			int node, slot, node0, slot0, k0, k;

			pipette_plan_rank_location(p, r, &node, &slot);
			pipette_plan_rank_location(p, r - r % 8, &node0, &slot0);
			/* plan node indices are in canonical (strverscmp)
			 * order: gb1 .. gb14 */
			k = node;
			k0 = node0;
			ck_assert_msg(rack_of[k] == rack_of[k0], "rank %d on gb%d (rack %d), its TP "
				      "group's first on gb%d (rack %d)", r, k + 1, rack_of[k], k0 + 1,
				      rack_of[k0]);
		}
		json = json_of(p, &len);
		if (!first)
			first = json;
		else {
			ck_assert_msg(!strcmp(first, json), "order %d gives another plan", round);
			free(json);
		}
		pipette_plan_destroy(p);
	}
	free(first);
	/* --nvlink-domain 8 (two trays) disagrees with the cache's 72-GPU
	 * domains */
	{
		struct pipette_cluster_spec cs = { 14, names, 4, NULL };
		struct pipette_plan *p = NULL;

		req.nvlink_domain = 8;
		ck_assert_int_eq(pipette_plan_compute(&req, &cs, &p, &err), -1);
		ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "NVLink domain 'nvl") &&
			      strstr(err.msg, "has 72 GPUs") && strstr(err.msg, "has 8"),
			      "%s", err.msg);
	}
	unlink(path);
	snprintf(lock, sizeof(lock), "%s.lock", path);
	unlink(lock);
}
END_TEST

START_TEST(test_errors)
{
	struct pipette_request req;
	static const char *const bad_names[] = { "node1", "gpu99" };
	struct pipette_cluster_spec cs = { 2, bad_names, 8, NULL };
	struct pipette_plan *p = NULL;
	struct pipette_err err;

	pipette_request_init(&req);
	snprintf(req.model, sizeof(req.model), "llama3-8b");
	snprintf(req.gpu, sizeof(req.gpu), "H100");
	snprintf(req.bandwidth, sizeof(req.bandwidth), "%s", EXAMPLE("uniform-4x8-h100.json"));
	req.global_batch = 64;
	req.seq_len = 4096;
	ck_assert_int_eq(pipette_plan_compute(&req, &cs, &p, &err), -1);
	ck_assert_msg(strstr(err.msg, "gpu99") != NULL, "%s", err.msg);
	ck_assert_ptr_null(p);

	req.bandwidth[0] = '\0';
	req.pins.tp = 0;
	ck_assert_int_eq(pipette_plan_compute(&req, &cs, &p, &err), -1);
	ck_assert_msg(strstr(err.msg, "pinned tp 0") != NULL, "%s", err.msg);

	req.pins.tp = -1;
	snprintf(req.model, sizeof(req.model), "llama3-405b");
	cs.nodes = 1;
	ck_assert_int_eq(pipette_plan_compute(&req, &cs, &p, &err), -1);
	ck_assert_msg(!strncmp(err.msg, PIPETTE_PLAN_NOFIT_PREFIX,
			       strlen(PIPETTE_PLAN_NOFIT_PREFIX)), "%s", err.msg);
	ck_assert_int_eq(pipette_err_code(&err), PIPETTE_E_NOFIT);
	ck_assert_msg(strstr(err.msg, "exceed the GPU memory with the allocator's reserve") != NULL,
		      "%s", err.msg);
	/* megatron-2022 keeps the flat rule of Fujii et al. */
	snprintf(req.stack, sizeof(req.stack), "megatron-2022");
	ck_assert_int_eq(pipette_plan_compute(&req, &cs, &p, &err), -1);
	ck_assert_msg(strstr(err.msg, "exceed 80% of GPU memory") != NULL, "%s", err.msg);
}
END_TEST

static void expect(const char *args, int code, const char *fragment)
{
	static char out[1 << 20];
	int rc = cli_run(args, out, sizeof(out));

	ck_assert_msg(rc == code, "pipette %s: exit %d, expected %d; output:\n%s", args, rc,
		      code, out);
	ck_assert_msg(strstr(out, fragment) != NULL, "pipette %s: output lacks '%s':\n%s",
		      args, fragment, out);
}

START_TEST(test_cli)
{
	const char *base = "plan --model llama3-8b --gpu H100 --global-batch 64 --seq-len 4096";
	char a[1024];

	snprintf(a, sizeof(a), "%s --nodes 2", base);
	expect(a, 0, "default order");
	snprintf(a, sizeof(a), "%s --nodes 2 --format env", base);
	expect(a, 0, "PIPETTE_MAPPING_GAIN='1.0000'");
	snprintf(a, sizeof(a), "%s --nodes 2 --format megatron --tp 4 --pp 2", base);
	expect(a, 0, "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2");
	snprintf(a, sizeof(a), "%s --nodes 2 --format megatron --tp 4 --pp 2 "
		 "--attention unfused", base);
	expect(a, 0, "--attention-backend unfused");
	snprintf(a, sizeof(a), "%s --nodes 2 --format json", base);
	expect(a, 0, "\"attention\":\"flash\"");
	snprintf(a, sizeof(a), "%s --nodes 2 --attention sdpa", base);
	expect(a, 2, "expected flash or unfused");
	snprintf(a, sizeof(a), "%s --nodes 2 --format json", base);
	expect(a, 0, "\"pipette-plan/1\"");
	snprintf(a, sizeof(a), "%s --nodes 'node[1,9]' --bandwidth %s", base,
		 EXAMPLE("uniform-4x8-h100.json"));
	expect(a, 2, "node9");
	snprintf(a, sizeof(a), "%s --nodes 2 --tp 0", base);
	expect(a, 2, "--tp");
	snprintf(a, sizeof(a), "%s --nodes 2 --tp 3", base);
	expect(a, 1, "no combination matches the pins");
	expect("plan --model llama3-405b --gpu H100 --global-batch 8 --seq-len 4096 --nodes 1",
	       1, "no configuration fits");
	snprintf(a, sizeof(a), "%s --nodes 2 --launch mpirun", base);
	expect(a, 2, "expected srun or torchrun");
	expect("plan --model llama3-8b --gpu H100 --nodes 2", 2, "--global-batch is required");
}
END_TEST

/* --max-age DAYS: the plan warns about the cache's figures measured longer
 * ago (plan.c, pipette_bwcache_stale); without it, never.  The example
 * cache was measured on 2025-01-01, so every figure of it is older than 30
 * days from 2025-01-31 on, and none is older than 10^5 days before the
 * 23rd century.  Its 4 nodes x 8 GPUs have 4 x 3 = 12 inter-node links and
 * 4 x 8 x 7 = 224 intra-node GPU pairs, all measured: 236 figures. */
START_TEST(test_cli_max_age)
{
	const char *base = "plan --model llama3-8b --gpu H100 --global-batch 64 --seq-len 4096 "
			   "--nodes 4 --bandwidth " EXAMPLE("uniform-4x8-h100.json");
	const char *warning = "236 of 236 measured figures are older than 30 days (oldest: "
			      "node1 -> node2, measured 2025-01-01T00:00:00Z)";
	static char out[1 << 16];
	char a[1024];

	ck_assert_int_eq(cli_run(base, out, sizeof(out)), 0);
	ck_assert_msg(!strstr(out, "older than"), "warned without --max-age:\n%s", out);
	snprintf(a, sizeof(a), "%s --max-age 30", base);
	expect(a, 0, warning);
	/* Outside the table, the warning goes to stderr. */
	snprintf(a, sizeof(a), "%s --max-age 30 --format env", base);
	expect(a, 0, "pipette: warning: 236 of 236 measured figures are older than 30 days");
	snprintf(a, sizeof(a), "%s --max-age 100000", base);
	ck_assert_int_eq(cli_run(a, out, sizeof(out)), 0);
	ck_assert_msg(!strstr(out, "older than"), "warned with --max-age 100000:\n%s", out);
	/* 0 is the default: never. */
	snprintf(a, sizeof(a), "%s --max-age 0", base);
	ck_assert_int_eq(cli_run(a, out, sizeof(out)), 0);
	ck_assert_msg(!strstr(out, "older than"), "warned with --max-age 0:\n%s", out);
	snprintf(a, sizeof(a), "%s --max-age -1", base);
	expect(a, 2, "--max-age: -1 is out of range [0, 100000]");
	snprintf(a, sizeof(a), "%s --max-age 100001", base);
	expect(a, 2, "--max-age: 100001 is out of range");
	snprintf(a, sizeof(a), "%s --max-age soon", base);
	expect(a, 2, "--max-age: 'soon' is not a number");
}
END_TEST

/* --nodes: a count or a Slurm hostlist (core/cli/hostlist.c, shared with
 * the plugin), at most PIPETTE_MAX_NODES = 4096 names (limits.h), each
 * once; every error names the list. */
START_TEST(test_cli_nodes)
{
	const char *base = "plan --model llama3-8b --gpu H100 --global-batch 64 --seq-len 4096";
	char a[1024];

	snprintf(a, sizeof(a), "%s --nodes 4097", base);
	expect(a, 2, "--nodes: node count 4097 is not in [1, 4096]");
	snprintf(a, sizeof(a), "%s --nodes 0", base);
	expect(a, 2, "node count 0 is not in [1, 4096]");
	/* Refused by its count, before a name is expanded. */
	snprintf(a, sizeof(a), "%s --nodes 'gpu[1-4097]'", base);
	expect(a, 2, "node list 'gpu[1-4097]' has 4097 nodes, more than 4096");
	/* The first name, in the list's order, that repeats an earlier one. */
	snprintf(a, sizeof(a), "%s --nodes 'gpu[1-3],gpu2,gpu1'", base);
	expect(a, 2, "node list 'gpu[1-3],gpu2,gpu1' names gpu2 twice");
	snprintf(a, sizeof(a), "%s --nodes ''", base);
	expect(a, 2, "empty node list");
	/* 4096 names are accepted: the plan fails on the pins, not the list. */
	snprintf(a, sizeof(a), "%s --nodes 'gpu[1-4096]' --tp 3", base);
	expect(a, 1, "no configuration fits llama3-8b on 32768 GPUs");
}
END_TEST

/* A torchtitan plan on four nodes named n1..n4 with a shaped cache, the
 * mapping optimized (the request's default). */
static struct pipette_plan *plan_fsdp(const char *cache, int dp_shard, int pp)
{
	static const char *const n4[] = { "n1", "n2", "n3", "n4" };
	struct pipette_request req;
	struct pipette_cluster_spec cs = { 4, n4, 8, NULL };
	struct pipette_plan *p = NULL;
	struct pipette_err err;

	pipette_request_init(&req);
	snprintf(req.model, sizeof(req.model), "llama3-8b");
	snprintf(req.gpu, sizeof(req.gpu), "H100");
	snprintf(req.stack, sizeof(req.stack), "torchtitan");
	snprintf(req.bandwidth, sizeof(req.bandwidth), "%s", cache);
	req.global_batch = 64;
	req.seq_len = 8192;
	req.pins.dp_shard = dp_shard;
	req.pins.pp = pp;
	if (dp_shard > 0)	/* a shard group of dp_shard GPUs */
		req.pins.tp = req.pins.cp = 1;
	ck_assert_msg(pipette_plan_compute(&req, &cs, &p, &err) == 0, "%s", err.msg);
	return p;
}

/* Every FSDP shard group of the plan on one node: 1, else 0. */
static int shard_groups_inside_nodes(const struct pipette_plan *p)
{
	const struct pipette_config *c = pipette_plan_config(p);
	int n = c->dp_shard * c->cp, base, t, k;

	for (base = 0; base < pipette_plan_world(p); base += c->tp * n)
		for (t = 0; t < c->tp; t++) {
			int node0, slot;

			pipette_plan_rank_location(p, base + t, &node0, &slot);
			for (k = 1; k < n; k++) {
				int node;

				pipette_plan_rank_location(p, base + t + k * c->tp, &node, &slot);
				if (node != node0)
					return 0;
			}
		}
	return 1;
}

/* Links between nodes at 0.25 GB/s: the plan keeps its shard groups
 * inside nodes and says so; on the nominal links the same request shards
 * across nodes. */
START_TEST(test_fsdp_slow_links)
{
	struct pipette_plan *p = plan_fsdp(TEST_DATADIR "/bw/fsdp-slow-inter.json", -1, -1);
	char json[1 << 16];
	FILE *f = fmemopen(json, sizeof(json), "w");

	ck_assert(shard_groups_inside_nodes(p));
	ck_assert_int_eq(pipette_plan_write_json(p, f), 0);
	fclose(f);
	ck_assert_msg(strstr(json, "the shard group stays inside a node") != NULL, "%.400s", json);
	pipette_plan_destroy(p);
	p = plan_fsdp("", -1, -1);
	ck_assert(!shard_groups_inside_nodes(p));
	/* nominal links are all alike: the plan says its placement is moot */
	ck_assert(pipette_plan_mapping_negligible(p));
	pipette_plan_destroy(p);
}
END_TEST

/* n1-n2 and n3-n4 at 1 GB/s, other pairs at 50 GB/s; shard groups of two
 * nodes (dp_shard 16): the stack's order pairs n1 with n2, the mapping
 * pairs each node with a fast partner and says what that gains. */
START_TEST(test_fsdp_mapping_gain)
{
	struct pipette_plan *p = plan_fsdp(TEST_DATADIR "/bw/fsdp-pairs.json", 16, 1);
	const struct pipette_config *c = pipette_plan_config(p);
	int a, b, slot;

	ck_assert_int_eq(c->dp_shard * c->cp * c->tp, 16);
	ck_assert_double_gt(pipette_plan_mapping_gain(p), 1.05);
	ck_assert(!pipette_plan_mapping_negligible(p));
	/* the two nodes of the first shard group are a fast pair */
	pipette_plan_rank_location(p, 0, &a, &slot);
	pipette_plan_rank_location(p, 15, &b, &slot);
	ck_assert_int_ne(a, b);
	ck_assert_msg(!((a == 0 && b == 1) || (a == 1 && b == 0) || (a == 2 && b == 3) ||
			(a == 3 && b == 2)), "shard group on nodes %d and %d", a, b);
	pipette_plan_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("plan");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_srun_env);
	tcase_add_test(tc, test_torchrun_env);
	tcase_add_test(tc, test_job_env_and_args);
	tcase_add_test(tc, test_json_deterministic);
	tcase_add_test(tc, test_node_order_irrelevant);
	tcase_add_test(tc, test_gb200_irregular_domains);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_cli);
	tcase_add_test(tc, test_cli_nodes);
	tcase_add_test(tc, test_cli_max_age);
	tcase_add_test(tc, test_fsdp_slow_links);
	tcase_add_test(tc, test_fsdp_mapping_gain);
	suite_add_tcase(s, tc);
	return check_run(s);
}
