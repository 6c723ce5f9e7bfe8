/* spank_pipette: slurmstepd (REMOTE context), once per node per step.
 *
 * user_init (as the user, before the tasks are forked) gathers the step's
 * nodes, GPUs and layout from Slurm, then runs the planner in a child
 * process under the site's memory, CPU and wall-clock limits (child.c):
 * the child loads the user's files, computes the plan and renders every
 * task's variables as text (outcome.c).  The plan is deterministic and a
 * function of the set of nodes, so every node computes the same one
 * without talking to the others; the inputs srun saw are pinned by the
 * digest its local context exported (submit.c), and a node that read
 * something else fails the step.  task_init (in each forked task) replays
 * the text into the task's environment.
 *
 * A non-zero return from user_init does not fail srun (Slurm's spank(8):
 * the tasks just never start), so any error is stored and returned from
 * task_init, and every node that fails says why in one "pipette: NODE:"
 * line: when one node's failure ends the step, the others may be killed
 * before they could speak.  A node's failure in task_init ends only its
 * own tasks; with step_barrier (barrier.c) the nodes agree at the end of
 * user_init, so that a failure on one node starts no task on any. */
#include <slurm/slurm.h>
#include <slurm/spank.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/hostlist.h"
#include "inputs/readfile.h"
#include "spank_pipette.h"

static struct {
	int active;			/* a plan (or an error) for this step */
	int batch;			/* the batch step: job-level variables only */
	int failed;
	char *result;			/* the planner's text; NULL: untouched */
	struct pipette_outcome outcome;
	enum pipette_launch_mode launch;
	uint32_t node_id;
	uint32_t job_id, step_id;
	uint32_t local_tasks;
	char **nodes;
	int nnodes;
	char gpu_buf[PIPETTE_MAX_GPUS * 48];
	char *gpus[PIPETTE_MAX_GPUS];
	int ngpus;
	char digest[PIPETTE_DIGEST_MAX];	/* srun's pin; "" = none */
} rs;

/* Where a step's nodes are listed; the batch step has only the job's. */
static const char *const step_lists[] = { "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", NULL };
static const char *const batch_lists[] = { "SLURM_JOB_NODELIST", NULL };

/* The first of the variables that is set, into buf; 1 if none is. */
static int getenv_first(const struct pipette_env_ops *env, const char *const *names,
			char *buf, size_t len, const char **which, struct pipette_err *err)
{
	for (; *names; names++) {
		int rc = env->get(env->ctx, *names, buf, len, err);
		if (rc < 0)
			return pipette_fail_prefix(err, "%s: ", *names);
		if (rc == 0 && buf[0]) {
			*which = *names;
			return 0;
		}
	}
	return 1;
}

int pipette_remote_init(spank_t sp, int ac, char **av)
{
	if (pipette_site_load(ac, av))
		return -1;
	return pipette_options_register(sp);
}

/* This node's name for messages: from the layout once it is read, before
 * that from the step's node list (errors found before the layout). */
static const char *node_name(spank_t sp)
{
	static char name[64];
	char buf[PIPETTE_PATH_MAX * 4], **names;
	struct pipette_env_ops env;
	const char *which;
	int n;

	if (rs.nodes && (int)rs.node_id < rs.nnodes)
		return rs.nodes[rs.node_id];
	if (name[0])
		return name;
	snprintf(name, sizeof(name), "node index %u", rs.node_id);
	if (!sp)
		return name;
	pipette_env_spank(&env, sp);
	if (getenv_first(&env, step_lists, buf, sizeof(buf), &which, NULL) ||
	    pipette_hostlist_expand(buf, &names, &n, NULL))
		return name;
	if ((int)rs.node_id < n)
		snprintf(name, sizeof(name), "%s", names[rs.node_id]);
	pipette_hostlist_free(names, n);
	return name;
}

/* Say why the step cannot run, now: in user_init, before any task of any
 * node starts, so that no node's line is lost when another node's failure
 * ends the step.  task_init then fails every task. */
static void store_error(spank_t sp, const char *msg)
{
	rs.failed = 1;
	slurm_error("pipette: %s: %s", node_name(sp), msg);
}

static int get_u32(spank_t sp, spank_item_t item, const char *what, uint32_t *out,
		   struct pipette_err *err)
{
	spank_err_t rc = spank_get_item(sp, item, out);

	if (rc != ESPANK_SUCCESS)
		return pipette_fail(err, "could not get the %s: %s", what, spank_strerror(rc));
	return 0;
}

static void free_nodes(void)
{
	pipette_hostlist_free(rs.nodes, rs.nnodes);
	rs.nodes = NULL;
	rs.nnodes = 0;
}

/* The step's nodes, expanded by Slurm's own parser (resolved from the host
 * process; the plugin does not link libslurm). */
static int expand_nodes(const char *list, struct pipette_err *err)
{
	free_nodes();
	return pipette_hostlist_expand(list, &rs.nodes, &rs.nnodes, err);
}

/* This node's GPUs: the list Slurm gave, or 0..N-1 from a bare count. */
static int read_gpus(const struct pipette_env_ops *env, struct pipette_err *err)
{
	static const char *const step_vars[] = { "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", NULL };
	static const char *const batch_vars[] = { "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", NULL };
	static const char *const count_var[] = { "SLURM_GPUS_ON_NODE", NULL };
	const char *which = NULL;
	char *p;
	long n;
	int rc, i;

	rc = getenv_first(env, rs.batch ? batch_vars : step_vars, rs.gpu_buf,
			  sizeof(rs.gpu_buf), &which, err);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		if (pipette_split_gpus(rs.gpu_buf, rs.gpus, PIPETTE_MAX_GPUS, &rs.ngpus, err))
			return pipette_fail_prefix(err, "%s: ", which);
		return 0;
	}
	rc = getenv_first(env, count_var, rs.gpu_buf, sizeof(rs.gpu_buf), &which, err);
	if (rc < 0)
		return -1;
	if (rc == 1)
		return pipette_fail(err, "the step has no GPUs: request them with --gpus-per-node=N");
	if (pipette_parse_long(rs.gpu_buf, 1, PIPETTE_MAX_GPUS, &n, "SLURM_GPUS_ON_NODE", err))
		return -1;
	for (i = 0, p = rs.gpu_buf; i < n; i++) {
		rs.gpus[i] = p;
		p += sprintf(p, "%d", i) + 1;
	}
	rs.ngpus = (int)n;
	return 0;
}

/* The step's nodes in Slurm's order, this node's index and the launch mode. */
static int read_layout(spank_t sp, const struct pipette_env_ops *env, struct pipette_err *err)
{
	static const char *const step_tpn[] = { "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", NULL };
	static const char *const batch_tpn[] = { "SLURM_TASKS_PER_NODE", NULL };
	const struct pipette_site *site = &pipette_state()->site;
	char buf[PIPETTE_PATH_MAX * 4];
	const char *which = NULL;
	long per_node = 0, described = 0;
	uint32_t nnodes = 0, local_tasks = 0;
	int rc;

	if (site->emulate_nodes[0]) {
		if (expand_nodes(site->emulate_nodes, err))
			return pipette_fail_prefix(err, "plugstack argument emulate_nodes: ");
	} else {
		rc = getenv_first(env, rs.batch ? batch_lists : step_lists, buf, sizeof(buf),
				  &which, err);
		if (rc < 0)
			return -1;
		if (rc == 1)
			return pipette_fail(err, "SLURM_STEP_NODELIST and SLURM_JOB_NODELIST are unset");
		if (expand_nodes(buf, err))
			return pipette_fail_prefix(err, "%s: ", which);
	}
	if (!rs.batch) {
		if (get_u32(sp, S_JOB_NNODES, "node count", &nnodes, err) ||
		    get_u32(sp, S_JOB_LOCAL_TASK_COUNT, "local task count", &local_tasks, err))
			return -1;
		rs.local_tasks = local_tasks;
		if (!site->emulate_nodes[0] && (int)nnodes != rs.nnodes)
			return pipette_fail(err, "%s names %d nodes but the step has %u", which,
					    rs.nnodes, nnodes);
		if ((int)rs.node_id >= rs.nnodes)
			return pipette_fail(err, "node index %u outside the step's %d nodes",
					    rs.node_id, rs.nnodes);
	}
	if (read_gpus(env, err))
		return -1;

	rc = getenv_first(env, rs.batch ? batch_tpn : step_tpn, buf, sizeof(buf), &which, err);
	if (rc < 0)
		return -1;
	if (rc == 0 && pipette_tasks_per_node(buf, &per_node, &described, err))
		return pipette_fail_prefix(err, "%s: ", which);
	if (rs.batch) {
		/* The batch step has one task; its variables describe the job,
		 * whose steps will most likely run one task per GPU. */
		if (rc != 0 || pipette_launch_decide(per_node, rs.ngpus, &rs.launch, NULL))
			rs.launch = PIPETTE_LAUNCH_SRUN;
		return 0;
	}
	if (rc != 0)
		per_node = local_tasks;
	/* Every node must agree: decide from the step-wide count, and check
	 * that this node runs what the step says. */
	if (per_node != 0 && per_node != (long)local_tasks)
		per_node = 0;
	return pipette_launch_decide(per_node, rs.ngpus, &rs.launch, err);
}

/* The planner yields the CPU to the daemons of its node: they must answer
 * their RPCs within slurm.conf's MessageTimeout (10 s by default,
 * slurm.conf(5)), and when many steps start at once (a job array, a sweep)
 * every planner of the node is runnable together.  Within the scheduling
 * group it shares with slurmd and slurmstepd, a nice-10 process weighs 110
 * against a nice-0 process's 1024 (Linux kernel/sched/core.c,
 * sched_prio_to_weight): ten planners take half the CPU from one daemon,
 * not nine tenths, while a planner alone on a node still gets a core (a
 * lower priority would starve it behind any busy process: a plan could
 * then miss plan_timeout).  The child takes it only once it plans
 * (step.c): reading a plan from the plan cache takes a few milliseconds,
 * which every busy process of the node would otherwise stretch (a job's
 * second step, tests/bench/plugin_load.sh). */
#define PLANNER_NICE 10

/* In the planner child: this node's result (step.c), from the plan
 * cache or computed. */
static int plan_in_child(void *arg, FILE *out)
{
	const struct pipette_state *st = pipette_state();
	const struct pipette_site *site = &st->site;
	struct pipette_step step = {
		.opts = &st->opts,
		.site = site,
		.digest = rs.digest,
		.nodes = rs.nodes,
		.nnodes = rs.nnodes,
		.node_id = (int)rs.node_id,
		.gpus = rs.gpus,
		.ngpus = rs.ngpus,
		.launch = rs.launch,
		.batch = rs.batch,
		.local_tasks = rs.local_tasks,
		.master_port = pipette_master_port(site->master_port, site->port_range, rs.job_id,
						   rs.step_id),
		.uid = (unsigned)geteuid(),
		.cache_owner = 0,	/* the cache's root must be root's */
		.now = time(NULL),
		.plan_nice = PLANNER_NICE,
	};

	(void)arg;
	return pipette_step_result(&step, out);
}

/* What the planner said: node 0 shows the plan's warnings and lines
 * (every node has the same), every node its own plan cache warnings; where
 * the plan came from goes to the admins' log, and to the user with
 * --pipette-explain. */
static void say(void *ctx, char tag, const char *line)
{
	const int *first = ctx;

	if (tag == 'M') {
		slurm_spank_log("pipette: warning: %s: %s", node_name(NULL), line);
		return;
	}
	if (tag == 'I') {
		slurm_debug("pipette: %s: %s", node_name(NULL), line);
		if (*first && pipette_state()->opts.explain == 1)
			slurm_spank_log("pipette: %s", line);
		return;
	}
	if (*first)
		slurm_spank_log(tag == 'W' ? "pipette: warning: %s" : "pipette: %s", line);
}

static int run_planner(struct pipette_err *err)
{
	const struct pipette_site *site = &pipette_state()->site;
	struct pipette_child_limits lim = {
		.memory_mib = site->plan_memory_mib,
		.cpu_s = site->plan_cpu_s,
		.timeout_s = site->plan_timeout_s,
		.result_max = PIPETTE_RESULT_MAX,
		.uid = (unsigned)geteuid(),
		.gid = (unsigned)getegid(),
	};
	size_t len;
	int first = rs.node_id == 0;

	if (pipette_child_run(&lim, plan_in_child, NULL, &rs.result, &len, err) ||
	    pipette_outcome_parse(rs.result, &rs.outcome, err))
		goto fail;
	pipette_outcome_say(&rs.outcome, "MI", say, &first);
	if (rs.outcome.failed) {
		pipette_fail(err, "%s", rs.outcome.error);
		goto fail;
	}
	pipette_outcome_say(&rs.outcome, "WL", say, &first);
	return 0;
fail:
	/* An allocation the limit refused shows as "out of memory". */
	if (strstr(err->msg, "out of memory") && !strstr(err->msg, "plan_memory"))
		pipette_fail_prefix(err, "(the planner's memory limit is %ld MiB: plugstack "
				    "plan_memory) ", lim.memory_mib);
	return -1;
}

/* ---- the nodes agree (plugstack step_barrier; barrier.c) ---------------- */

/* The step's name in the barrier's files: the job and step ids, srun's
 * address (a requeued job's steps reuse the ids, never a live srun's port)
 * and the nodes, hashed. */
static void barrier_key(const struct pipette_env_ops *env, char key[PIPETTE_HASH_HEX + 1])
{
	static const char *const vars[] = { "SLURM_SRUN_COMM_HOST", "SLURM_SRUN_COMM_PORT",
					    "SLURM_STEP_NODELIST" };
	unsigned char sha[PIPETTE_SHA256_LEN];
	char text[PIPETTE_PATH_MAX * 6], val[PIPETTE_PATH_MAX * 4];
	size_t i, off;

	off = (size_t)snprintf(text, sizeof(text), "%u.%u", rs.job_id, rs.step_id);
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]) && off < sizeof(text); i++) {
		if (env->get(env->ctx, vars[i], val, sizeof(val), NULL) != 0)
			val[0] = '\0';
		off += (size_t)snprintf(text + off, sizeof(text) - off, "\n%s", val);
	}
	pipette_sha256(text, strlen(text), sha);
	pipette_hash_short(sha, key);
}

static struct pipette_barrier barrier_args;

static int barrier_in_child(void *arg, FILE *out)
{
	(void)arg;
	return pipette_barrier_run(&barrier_args, out);
}

/* With step_barrier, wait for every node of the step to have planned:
 * this node's failure (failure, or NULL) fails every node, and another
 * node's fails this one.  The first node that planned says why. */
static void agree(spank_t sp, const struct pipette_env_ops *env, const char *failure)
{
	const struct pipette_site *site = &pipette_state()->site;
	struct pipette_child_limits lim = {
		.memory_mib = site->plan_memory_mib,
		.cpu_s = site->plan_cpu_s,
		/* the child gives up on the others at wait_ms: killed past it */
		.timeout_s = site->plan_timeout_s + PIPETTE_BARRIER_SKEW_S + 10,
		.result_max = PIPETTE_ERR_MAX + 64,
		.uid = (unsigned)geteuid(),
		.gid = (unsigned)getegid(),
	};
	char key[PIPETTE_HASH_HEX + 1], *result = NULL, *msg;
	struct pipette_err err;
	size_t len;
	long first;

	if (!site->step_barrier[0] || rs.batch || site->emulate_nodes[0] || rs.nnodes < 2 ||
	    !rs.nodes || (int)rs.node_id >= rs.nnodes)
		return;
	barrier_key(env, key);
	barrier_args = (struct pipette_barrier){
		.root = site->step_barrier, .root_owner = 0, .uid = (unsigned)geteuid(),
		.key = key, .nodes = rs.nodes, .nnodes = rs.nnodes, .node_id = (int)rs.node_id,
		.wait_ms = (site->plan_timeout_s + PIPETTE_BARRIER_SKEW_S) * 1000,
		.failure = failure,
	};
	if (pipette_child_run(&lim, barrier_in_child, NULL, &result, &len, &err)) {
		if (!failure)
			store_error(sp, err.msg);
		return;
	}
	result[strcspn(result, "\n")] = '\0';
	if (!strcmp(result, "ok") || failure) {
		/* a node that failed has said why, and fails whatever the others did */
	} else if (!strncmp(result, "error\t", 6)) {
		store_error(sp, result + 6);
	} else if (sscanf(result, "fail %ld", &first) == 1 && (msg = strchr(result, '\t'))) {
		rs.failed = 1;
		if (first == (long)rs.node_id)
			slurm_error("pipette: %s: no task of the step starts: %s", node_name(sp),
				    msg + 1);
		else
			slurm_debug("pipette: %s: no task of the step starts: %s", node_name(sp),
				    msg + 1);
	} else {
		store_error(sp, "step_barrier: the barrier's result is malformed");
	}
	free(result);
}

int pipette_remote_user_init(spank_t sp)
{
	struct pipette_state *st = pipette_state();
	struct pipette_env_ops env;
	struct pipette_err err;

	pipette_env_spank(&env, sp);
	if (get_u32(sp, S_JOB_NODEID, "node index", &rs.node_id, NULL))
		rs.node_id = 0;
	if (pipette_opts_fallback(&st->opts, &st->site, &env, &err)) {
		rs.active = 1;
		store_error(sp, err.msg);
		return 0;
	}
	if (!pipette_opts_wanted(&st->opts, &st->site))
		return 0;
	rs.active = 1;
	if (get_u32(sp, S_JOB_ID, "job id", &rs.job_id, &err) ||
	    get_u32(sp, S_JOB_STEPID, "step id", &rs.step_id, &err)) {
		store_error(sp, err.msg);
		return 0;
	}
	rs.batch = rs.step_id == SLURM_BATCH_SCRIPT;
	if (rs.batch)
		rs.node_id = 0;
	/* srun's pin of the inputs; the batch step has none (sbatch has no
	 * local context), and any it inherited is not its own. */
	rs.digest[0] = '\0';
	if (!rs.batch && env.get(env.ctx, PIPETTE_DIGEST_VAR, rs.digest, sizeof(rs.digest),
				 &err) < 0) {
		store_error(sp, err.msg);
		return 0;
	}
	if (pipette_opts_check(&st->opts, &err) || read_layout(sp, &env, &err) ||
	    run_planner(&err)) {
		store_error(sp, err.msg);
		agree(sp, &env, err.msg);
		return 0;
	}
	agree(sp, &env, NULL);
	if (st->opts.dry_run == 1) {
		/* The same on every node: node 0 says it, the others fail quietly. */
		rs.failed = 1;
		if (rs.node_id == 0)
			slurm_error("pipette: dry run (--pipette-dry-run): the plan is printed "
				    "above; no task was started");
	}
	return 0;
}

int pipette_remote_task_init(spank_t sp)
{
	struct pipette_env_ops env;
	struct pipette_err err;
	int task_id = 0;
	spank_err_t rc;

	if (!rs.active)
		return 0;
	if (rs.failed)
		return -1;	/* said in user_init */
	if (!rs.result)
		return 0;	/* fallback=block without a plan: untouched */
	pipette_env_spank(&env, sp);
	if (!rs.batch && rs.launch == PIPETTE_LAUNCH_SRUN) {
		rc = spank_get_item(sp, S_TASK_ID, &task_id);
		if (rc != ESPANK_SUCCESS) {
			pipette_fail(&err, "could not get the task id: %s", spank_strerror(rc));
			goto fail;
		}
	} else {
		task_id = rs.batch ? -1 : 0;
	}
	if (pipette_outcome_apply(&rs.outcome, task_id, &env, &err))
		goto fail;
	return 0;
fail:
	slurm_error("pipette: %s: %s", node_name(sp), err.msg);
	return -1;
}

int pipette_remote_exit(spank_t sp)
{
	(void)sp;
	free(rs.result);
	rs.result = NULL;
	free_nodes();
	rs.active = 0;
	return 0;
}
