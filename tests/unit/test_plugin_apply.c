/* Unit tests: spank_pipette's request building (plugin/request.c) and the
 * writing of a real plan into task environments (plugin/apply.c), through
 * a fake env-ops table.  The plan comes from the core (pipette_plan_compute)
 * on nominal H100 links, so these tests check the plugin's contract on top
 * of it: every rank once, CUDA_VISIBLE_DEVICES a permutation of the list
 * Slurm gave with the task's GPU at LOCAL_RANK, MASTER_ADDR = rank 0's
 * node, MASTER_PORT never replacing the user's, and nothing unvalidated
 * reaching the environment. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/model.h"
#include "inputs/stack.h"
#include "plugin.h"
#include "check_run.h"

#define NODES 2
#define GPUS 8

struct var {
	char name[32];
	char value[8192];
};

struct fake_env {
	struct var v[64];
	int n;
	int fail_on_set;	/* make set() fail (a full environment) */
};

static struct var *find(struct fake_env *e, const char *name)
{
	int i;

	for (i = 0; i < e->n; i++)
		if (!strcmp(e->v[i].name, name))
			return &e->v[i];
	return NULL;
}

static const char *val(struct fake_env *e, const char *name)
{
	struct var *v = find(e, name);

	return v ? v->value : NULL;
}

static int fake_get(void *ctx, const char *name, char *buf, size_t len,
		    struct pipette_err *err)
{
	const char *v = val(ctx, name);

	if (!v)
		return 1;
	if (pipette_strlcpy(buf, v, len))
		return pipette_fail(err, "too long");
	return 0;
}

static int fake_set(void *ctx, const char *name, const char *value, int overwrite,
		    struct pipette_err *err)
{
	struct fake_env *e = ctx;
	struct var *v = find(e, name);

	if (e->fail_on_set)
		return pipette_fail(err, "environment full");
	if (v && !overwrite)
		return 1;
	if (!v) {
		ck_assert_int_lt(e->n, 64);
		v = &e->v[e->n++];
		pipette_strlcpy(v->name, name, sizeof(v->name));
	}
	ck_assert_int_eq(pipette_strlcpy(v->value, value, sizeof(v->value)), 0);
	return 0;
}

static void env_init(struct fake_env *e, struct pipette_env_ops *ops)
{
	memset(e, 0, sizeof(*e));
	ops->get = fake_get;
	ops->set = fake_set;
	ops->ctx = e;
}

static const char *const node_names[NODES] = { "gpu-a", "gpu-b" };
/* Slurm's list on each node: not 0..7, to show that the plugin permutes
 * what Slurm gave rather than inventing indices. */
static char *const slurm_gpus[GPUS] = { "10", "11", "12", "13", "14", "15", "16", "17" };

/* llama3-8b, global batch 64, sequence 2048 on nodes x 8 H100, planned
 * through the plugin's request building with the site's settings. */
static struct pipette_plan *plan_for(const struct pipette_site *site, const char *const *nodes,
				     int n, enum pipette_launch_mode launch)
{
	struct pipette_opts o;
	struct pipette_request req;
	struct pipette_cluster_spec cs = { n, nodes, GPUS, NULL };
	struct pipette_plan *plan = NULL;
	struct pipette_err err;

	pipette_opts_init(&o);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_MODEL, "llama3-8b", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_GLOBAL_BATCH, "64", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&o, PIPETTE_OPT_SEQ_LEN, "2048", &err), 0);
	ck_assert_msg(pipette_request_build(&o, site, launch, &req, &err) == 0, "%s", err.msg);
	ck_assert_msg(pipette_plan_compute(&req, &cs, &plan, &err) == 0, "%s", err.msg);
	return plan;
}

static struct pipette_plan *make_plan(enum pipette_launch_mode launch)
{
	struct pipette_site site;
	struct pipette_plan *plan;

	pipette_site_init(&site);
	strcpy(site.gpu, "H100");
	plan = plan_for(&site, node_names, NODES, launch);
	ck_assert_int_eq(pipette_plan_world(plan), NODES * GPUS);
	return plan;
}

static int gpu_index(const char *tok)
{
	int i;

	for (i = 0; i < GPUS; i++)
		if (!strcmp(slurm_gpus[i], tok))
			return i;
	return -1;
}

/* Split "a,b,c" and check it is a permutation of slurm_gpus; return the
 * entry at position pos. */
static const char *check_permutation(const char *list, int pos)
{
	static char copy[256];
	static char *tok[GPUS + 1];
	char seen[GPUS] = { 0 }, *save = NULL, *t;
	int n = 0, k;

	ck_assert_int_eq(pipette_strlcpy(copy, list, sizeof(copy)), 0);
	for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		ck_assert_int_lt(n, GPUS);
		k = gpu_index(t);
		ck_assert_msg(k >= 0, "'%s' is not one of Slurm's GPUs", t);
		ck_assert_msg(!seen[k], "'%s' twice in %s", t, list);
		seen[k] = 1;
		tok[n++] = t;
	}
	ck_assert_int_eq(n, GPUS);
	return tok[pos];
}

START_TEST(test_srun_mode_contract)
{
	struct pipette_plan *plan = make_plan(PIPETTE_LAUNCH_SRUN);
	struct pipette_env_ops ops;
	struct fake_env *e = malloc(sizeof(*e));
	struct pipette_err err;
	char rank_seen[NODES * GPUS] = { 0 };
	int node, task, rank, lr, pnode, pslot, rank0_node, rank0_slot;

	ck_assert_ptr_nonnull(e);
	pipette_plan_rank_location(plan, 0, &rank0_node, &rank0_slot);
	for (node = 0; node < NODES; node++)
		for (task = 0; task < GPUS; task++) {
			struct pipette_task_ctx t = { node, task, slurm_gpus, GPUS, 61234 };

			env_init(e, &ops);
			ck_assert_msg(pipette_apply_task(plan, &t, &ops, &err) == 0, "%s", err.msg);
			rank = atoi(val(e, "RANK"));
			lr = atoi(val(e, "LOCAL_RANK"));
			ck_assert_int_ge(rank, 0);
			ck_assert_int_lt(rank, NODES * GPUS);
			ck_assert_msg(!rank_seen[rank], "rank %d twice", rank);
			rank_seen[rank] = 1;
			/* The plan puts this rank on this node ... */
			pipette_plan_rank_location(plan, rank, &pnode, &pslot);
			ck_assert_int_eq(pnode, node);
			/* ... on slot pslot, i.e. Slurm's GPU slurm_gpus[pslot],
			 * which must sit at index LOCAL_RANK. */
			ck_assert_str_eq(check_permutation(val(e, "CUDA_VISIBLE_DEVICES"), lr),
					 slurm_gpus[pslot]);
			ck_assert_str_eq(val(e, "WORLD_SIZE"), "16");
			ck_assert_str_eq(val(e, "LOCAL_WORLD_SIZE"), "8");
			ck_assert_str_eq(val(e, "MASTER_ADDR"), node_names[rank0_node]);
			ck_assert_str_eq(val(e, "MASTER_PORT"), "61234");
			ck_assert_ptr_nonnull(val(e, "PIPETTE_TP"));
			ck_assert_ptr_nonnull(val(e, "PIPETTE_MEGATRON_ARGS"));
			ck_assert_ptr_nonnull(val(e, "PIPETTE_MAPPING_GAIN"));
			ck_assert_ptr_null(val(e, "NODE_RANK"));
		}
	free(e);
	pipette_plan_destroy(plan);
}
END_TEST

START_TEST(test_torchrun_mode_contract)
{
	struct pipette_plan *plan = make_plan(PIPETTE_LAUNCH_TORCHRUN);
	struct pipette_env_ops ops;
	struct fake_env *e = malloc(sizeof(*e));
	struct pipette_err err;
	char seen[NODES] = { 0 };
	int node, nr, r0n, r0s;

	ck_assert_ptr_nonnull(e);
	pipette_plan_rank_location(plan, 0, &r0n, &r0s);
	for (node = 0; node < NODES; node++) {
		struct pipette_task_ctx t = { node, 0, slurm_gpus, GPUS, 61000 };

		env_init(e, &ops);
		ck_assert_msg(pipette_apply_task(plan, &t, &ops, &err) == 0, "%s", err.msg);
		nr = atoi(val(e, "NODE_RANK"));
		ck_assert_int_ge(nr, 0);
		ck_assert_int_lt(nr, NODES);
		ck_assert(!seen[nr]);
		seen[nr] = 1;
		check_permutation(val(e, "CUDA_VISIBLE_DEVICES"), 0);
		ck_assert_str_eq(val(e, "WORLD_SIZE"), "16");
		ck_assert_str_eq(val(e, "MASTER_ADDR"), node_names[r0n]);
		ck_assert_ptr_null(val(e, "RANK"));
	}
	free(e);
	pipette_plan_destroy(plan);
}
END_TEST

START_TEST(test_master_port_not_clobbered)
{
	struct pipette_plan *plan = make_plan(PIPETTE_LAUNCH_SRUN);
	struct pipette_env_ops ops;
	struct fake_env *e = malloc(sizeof(*e));
	struct pipette_task_ctx t = { 0, 0, slurm_gpus, GPUS, 61234 };
	struct pipette_err err;

	ck_assert_ptr_nonnull(e);
	env_init(e, &ops);
	ck_assert_int_eq(fake_set(e, "MASTER_PORT", "29500", 1, &err), 0);
	ck_assert_int_eq(pipette_apply_task(plan, &t, &ops, &err), 0);
	ck_assert_str_eq(val(e, "MASTER_PORT"), "29500");
	/* The plan's variables do replace stale ones. */
	env_init(e, &ops);
	ck_assert_int_eq(fake_set(e, "RANK", "999", 1, &err), 0);
	ck_assert_int_eq(pipette_apply_task(plan, &t, &ops, &err), 0);
	ck_assert_str_ne(val(e, "RANK"), "999");
	free(e);
	pipette_plan_destroy(plan);
}
END_TEST

START_TEST(test_apply_errors)
{
	struct pipette_plan *plan = make_plan(PIPETTE_LAUNCH_SRUN);
	struct pipette_env_ops ops;
	struct fake_env *e = malloc(sizeof(*e));
	struct pipette_err err = { .msg = "" };
	/* Slurm gave fewer GPUs than the plan has slots: a slot would fall off
	 * the list, which must be an error and never an invented index. */
	struct pipette_task_ctx few = { 0, 0, slurm_gpus, 4, 61000 };
	struct pipette_task_ctx ok = { 0, 0, slurm_gpus, GPUS, 61000 };
	struct pipette_task_ctx none = { 0, 0, slurm_gpus, 0, 61000 };

	ck_assert_ptr_nonnull(e);
	env_init(e, &ops);
	ck_assert_int_eq(pipette_apply_task(plan, &few, &ops, &err), -1);
	ck_assert_msg(strstr(err.msg, "CUDA_VISIBLE_DEVICES"), "%s", err.msg);
	env_init(e, &ops);
	ck_assert_int_eq(pipette_apply_task(plan, &none, &ops, &err), -1);
	env_init(e, &ops);
	e->fail_on_set = 1;
	ck_assert_int_eq(pipette_apply_task(plan, &ok, &ops, &err), -1);
	ck_assert_msg(strstr(err.msg, "environment full"), "%s", err.msg);
	env_init(e, &ops);
	e->fail_on_set = 1;
	ck_assert_int_eq(pipette_apply_job(plan, &ops, &err), -1);
	free(e);
	pipette_plan_destroy(plan);
}
END_TEST

START_TEST(test_job_env_only_pipette)
{
	/* The batch step gets the job-level variables and nothing per task. */
	struct pipette_plan *plan = make_plan(PIPETTE_LAUNCH_SRUN);
	struct pipette_env_ops ops;
	struct fake_env *e = malloc(sizeof(*e));
	struct pipette_err err;
	int i;

	ck_assert_ptr_nonnull(e);
	env_init(e, &ops);
	ck_assert_int_eq(pipette_apply_job(plan, &ops, &err), 0);
	/* The job variables of spank-pipette(8), "Job variables": the 16 of
	 * DESIGN.md, PIPETTE_PLAN_HASH, PIPETTE_STACK, PIPETTE_LAUNCH_ARGS,
	 * PIPETTE_DP_SHARD, PIPETTE_DP_REPLICATE, PIPETTE_PRECISION and, with
	 * TP or CP > 1 on a current stack, CUDA_DEVICE_MAX_CONNECTIONS. */
	ck_assert_int_eq(e->n, 22 + (pipette_plan_config(plan)->tp > 1 ||
				     pipette_plan_config(plan)->cp > 1));
	for (i = 0; i < e->n; i++)
		ck_assert_msg(!strncmp(e->v[i].name, "PIPETTE_", 8) ||
			      !strcmp(e->v[i].name, "CUDA_DEVICE_MAX_CONNECTIONS"), "%s",
			      e->v[i].name);
	ck_assert_str_eq(val(e, "PIPETTE_GLOBAL_BATCH"), "64");
	ck_assert_ptr_null(val(e, "RANK"));
	free(e);
	pipette_plan_destroy(plan);
}
END_TEST

/* plugstack max_age=DAYS reaches the plan: a site cache measured on
 * 2025-01-01 (the 4-node example) draws the staleness warning that node 0
 * prints, and without max_age none. */
static const char *site_plan_warnings(double max_age_days, char *buf, size_t len)
{
	static const char *const nodes[] = { "node1", "node2", "node3", "node4" };
	struct pipette_site site;
	struct pipette_plan *plan;

	pipette_site_init(&site);
	strcpy(site.gpu, "H100");
	strcpy(site.bandwidth, TEST_DATADIR "/../../etc/examples/uniform-4x8-h100.json");
	site.max_age_days = max_age_days;
	plan = plan_for(&site, nodes, 4, PIPETTE_LAUNCH_SRUN);
	snprintf(buf, len, "%s", pipette_plan_warnings(plan));
	pipette_plan_destroy(plan);
	return buf;
}

START_TEST(test_site_max_age)
{
	char w[1024];

	ck_assert_str_eq(site_plan_warnings(0, w, sizeof(w)), "");
	ck_assert_msg(strstr(site_plan_warnings(30, w, sizeof(w)),
			     "measured figures are older than 30 days"), "%s", w);
	ck_assert_str_eq(site_plan_warnings(100000, w, sizeof(w)), "");
}
END_TEST

START_TEST(test_request_precedence)
{
	struct pipette_site site;
	struct pipette_opts o;
	struct pipette_request req;
	struct pipette_err err;

	pipette_site_init(&site);
	pipette_opts_init(&o);
	pipette_opts_set(&o, PIPETTE_OPT_MODEL, "llama3-8b", &err);
	pipette_opts_set(&o, PIPETTE_OPT_GLOBAL_BATCH, "128", &err);
	/* No GPU type from the site: a clear error naming the fix. */
	ck_assert_int_eq(pipette_request_build(&o, &site, PIPETTE_LAUNCH_SRUN, &req, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "gpu=TYPE"));

	strcpy(site.gpu, "H100");
	strcpy(site.bandwidth, "/site/bw.json");
	site.mem_fraction = 0.7;
	site.budget = 123;
	site.attention = PIPETTE_ATTN_UNFUSED;
	ck_assert_int_eq(pipette_request_build(&o, &site, PIPETTE_LAUNCH_TORCHRUN, &req, &err), 0);
	ck_assert(req.stale_days == 0.0);	/* no max_age: no staleness warning */
	site.max_age_days = 14;
	ck_assert_int_eq(pipette_request_build(&o, &site, PIPETTE_LAUNCH_TORCHRUN, &req, &err), 0);
	ck_assert(req.stale_days == 14.0);
	ck_assert_int_eq(req.attention, PIPETTE_ATTN_UNFUSED);
	ck_assert_str_eq(req.bandwidth, "/site/bw.json");
	ck_assert(req.mem_fraction == 0.7);
	ck_assert_int_eq(req.budget, 123);
	ck_assert_int_eq(req.launch, PIPETTE_LAUNCH_TORCHRUN);
	ck_assert_int_eq(req.global_batch, 128);
	/* The sequence length is left to the resolution with the model (the
	 * model's context: llama3-8b has max_position_embeddings 8192 in
	 * Meta's config.json), which loads the model once. */
	ck_assert_int_eq(req.seq_len, 0);
	{
		struct pipette_request resolved;
		struct pipette_model m;
		struct pipette_stack st;

		ck_assert_int_eq(pipette_request_resolve(&req, &resolved, &m, &st, &err), 0);
		ck_assert_int_eq(resolved.seq_len, 8192);
	}
	ck_assert_int_eq(req.mapping, PIPETTE_MAP_OPTIMIZE);

	pipette_opts_set(&o, PIPETTE_OPT_BANDWIDTH, "/home/u/bw.json", &err);
	pipette_opts_set(&o, PIPETTE_OPT_MEM_FRACTION, "0.6", &err);
	pipette_opts_set(&o, PIPETTE_OPT_SCHEDULE, "zb-h1", &err);
	pipette_opts_set(&o, PIPETTE_OPT_FIX, "tp=2", &err);
	pipette_opts_set(&o, PIPETTE_OPT_MAPPING, "block", &err);
	pipette_opts_set(&o, PIPETTE_OPT_SEQ_LEN, "1024", &err);
	ck_assert_int_eq(pipette_request_build(&o, &site, PIPETTE_LAUNCH_SRUN, &req, &err), 0);
	ck_assert_str_eq(req.bandwidth, "/home/u/bw.json");
	ck_assert(req.mem_fraction == 0.6);
	ck_assert_int_eq(req.pins.schedule, PIPETTE_SCHED_ZB_H1);
	ck_assert_int_eq(req.pins.tp, 2);
	ck_assert_int_eq(req.pins.pp, -1);
	ck_assert_int_eq(req.mapping, PIPETTE_MAP_BLOCK);
	ck_assert_int_eq(req.seq_len, 1024);

	/* An unknown model fails when the request is resolved. */
	pipette_opts_init(&o);
	pipette_opts_set(&o, PIPETTE_OPT_MODEL, "no-such-model", &err);
	pipette_opts_set(&o, PIPETTE_OPT_GLOBAL_BATCH, "128", &err);
	ck_assert_int_eq(pipette_request_build(&o, &site, PIPETTE_LAUNCH_SRUN, &req, &err), 0);
	{
		struct pipette_request resolved;
		struct pipette_model m;
		struct pipette_stack st;

		ck_assert_int_eq(pipette_request_resolve(&req, &resolved, &m, &st, &err), -1);
		ck_assert_ptr_nonnull(strstr(err.msg, "no-such-model"));
	}
}
END_TEST

START_TEST(test_plans_identical_across_calls)
{
	/* Every node computes the plan on its own: the same inputs must give
	 * the same environment, byte for byte. */
	struct pipette_plan *a = make_plan(PIPETTE_LAUNCH_SRUN), *b = make_plan(PIPETTE_LAUNCH_SRUN);
	struct pipette_env_ops oa, ob;
	struct fake_env *ea = malloc(sizeof(*ea)), *eb = malloc(sizeof(*eb));
	struct pipette_err err;
	int node, task, i;

	ck_assert_ptr_nonnull(ea);
	ck_assert_ptr_nonnull(eb);
	for (node = 0; node < NODES; node++)
		for (task = 0; task < GPUS; task++) {
			struct pipette_task_ctx t = { node, task, slurm_gpus, GPUS, 61000 };

			env_init(ea, &oa);
			env_init(eb, &ob);
			ck_assert_int_eq(pipette_apply_task(a, &t, &oa, &err), 0);
			ck_assert_int_eq(pipette_apply_task(b, &t, &ob, &err), 0);
			ck_assert_int_eq(ea->n, eb->n);
			for (i = 0; i < ea->n; i++) {
				ck_assert_str_eq(ea->v[i].name, eb->v[i].name);
				ck_assert_str_eq(ea->v[i].value, eb->v[i].value);
			}
		}
	free(ea);
	free(eb);
	pipette_plan_destroy(a);
	pipette_plan_destroy(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("plugin_apply");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_srun_mode_contract);
	tcase_add_test(tc, test_torchrun_mode_contract);
	tcase_add_test(tc, test_master_port_not_clobbered);
	tcase_add_test(tc, test_apply_errors);
	tcase_add_test(tc, test_job_env_only_pipette);
	tcase_add_test(tc, test_request_precedence);
	tcase_add_test(tc, test_site_max_age);
	tcase_add_test(tc, test_plans_identical_across_calls);
	suite_add_tcase(s, tc);
	return check_run(s);
}
