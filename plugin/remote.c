/* spank_pipette: slurmstepd (REMOTE context), once per node per step.
 *
 * user_init (as the user, before the tasks are forked) gathers the step's
 * nodes, GPUs and layout, loads the user's files and computes the plan; the
 * plan is deterministic, so every node computes the same one without
 * talking to the others.  It stays in a static: the tasks are forked from
 * this process.  task_init (in each forked task) writes the plan into the
 * task's environment.
 *
 * A non-zero return from user_init does not fail srun (spank.md §1.1): any
 * error is stored and returned from task_init, so the step fails visibly,
 * with one "pipette:" line per error (from node 0 when every node reaches
 * the same error, from the node itself when the cause is local). */
#include <slurm/slurm.h>
#include <slurm/spank.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spank_pipette.h"

static struct {
	int active;			/* a plan (or an error) for this step */
	int batch;			/* the batch step: job-level variables only */
	int failed;
	int fail_local;			/* the cause is this node's, not the plan's */
	char msg[PIPETTE_ERR_MAX + 64];
	struct pipette_plan *plan;	/* NULL with fallback=block and no plan */
	enum pipette_launch_mode launch;
	uint32_t node_id;
	uint32_t job_id, step_id;
	char **nodes;
	int nnodes;
	char gpu_buf[PIPETTE_MAX_GPUS * 48];
	char *gpus[PIPETTE_MAX_GPUS];
	int ngpus;
} rs;

int pipette_remote_init(spank_t sp, int ac, char **av)
{
	if (pipette_site_load(ac, av))
		return -1;
	return pipette_options_register(sp);
}

/* Most errors are the same on every node (the inputs are), so node 0
 * alone reports them; a cause found only on this node (its GPU list, an
 * item Slurm did not give) is reported by this node. */
static int local_cause;

static void store_error(int local, const char *msg)
{
	rs.failed = 1;
	rs.fail_local = local || local_cause;
	snprintf(rs.msg, sizeof(rs.msg), "pipette: %s", msg);
}

static int get_u32(spank_t sp, spank_item_t item, const char *what, uint32_t *out,
		   struct pipette_err *err)
{
	spank_err_t rc = spank_get_item(sp, item, out);

	if (rc != ESPANK_SUCCESS) {
		local_cause = 1;
		return pipette_fail(err, "could not get the %s: %s", what, spank_strerror(rc));
	}
	return 0;
}

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

static void free_nodes(void)
{
	int i;

	for (i = 0; rs.nodes && i < rs.nnodes; i++)
		free(rs.nodes[i]);
	free(rs.nodes);
	rs.nodes = NULL;
	rs.nnodes = 0;
}

/* Expand a Slurm hostlist with Slurm's own parser (resolved from the host
 * process; the plugin does not link libslurm). */
static int expand_nodes(const char *list, struct pipette_err *err)
{
	hostlist_t hl = slurm_hostlist_create(list);
	int n, i, rv = -1;
	char *h;

	if (!hl)
		return pipette_fail(err, "node list '%.64s': not a Slurm hostlist", list);
	n = slurm_hostlist_count(hl);
	if (n < 1 || n > PIPETTE_MAX_NODES) {
		pipette_fail(err, "node list '%.64s': %d nodes, expected 1 to %d", list, n,
			     PIPETTE_MAX_NODES);
		goto fail;
	}
	rs.nodes = calloc((size_t)n, sizeof(char *));
	if (!rs.nodes) {
		pipette_fail(err, "out of memory");
		goto fail;
	}
	for (i = 0; i < n; i++) {
		h = slurm_hostlist_shift(hl);
		if (!h) {
			pipette_fail(err, "node list '%.64s': ended early", list);
			goto fail;
		}
		rs.nodes[i] = strdup(h);
		free(h);
		rs.nnodes = i + 1;
		if (!rs.nodes[i]) {
			pipette_fail(err, "out of memory");
			goto fail;
		}
	}
	rv = 0;
fail:
	slurm_hostlist_destroy(hl);
	if (rv)
		free_nodes();
	return rv;
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
		if (pipette_split_gpus(rs.gpu_buf, rs.gpus, PIPETTE_MAX_GPUS, &rs.ngpus, err)) {
			local_cause = 1;
			return pipette_fail_prefix(err, "%s: ", which);
		}
		return 0;
	}
	rc = getenv_first(env, count_var, rs.gpu_buf, sizeof(rs.gpu_buf), &which, err);
	if (rc < 0)
		return -1;
	if (rc == 1)
		return pipette_fail(err, "the step has no GPUs: request them with --gpus-per-node=N");
	if (pipette_parse_long(rs.gpu_buf, 1, PIPETTE_MAX_GPUS, &n, "SLURM_GPUS_ON_NODE", err)) {
		local_cause = 1;
		return -1;
	}
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
	static const char *const step_lists[] = { "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", NULL };
	static const char *const batch_lists[] = { "SLURM_JOB_NODELIST", NULL };
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

/* Copy a renderer's output to the user's stderr line by line. */
static void log_lines(int (*write)(const struct pipette_plan *, FILE *),
		      const struct pipette_plan *plan)
{
	char *text = NULL, *save = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return;
	if (write(plan, f) == 0 && fflush(f) == 0) {
		const char *line;

		for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			slurm_spank_log("pipette: %s", line);
	}
	fclose(f);
	free(text);
}

static void log_warnings(const struct pipette_plan *plan)
{
	const char *w = pipette_plan_warnings(plan);
	char buf[PIPETTE_ERR_MAX * 4], *line, *save = NULL;

	if (!w || !*w)
		return;
	/* A truncated copy still ends in a whole line or a cut one; both are
	 * fine for a warning. */
	(void)pipette_strlcpy(buf, w, sizeof(buf));
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		slurm_spank_log("pipette: warning: %s", line);
}

static int compute(struct pipette_err *err)
{
	const struct pipette_state *st = pipette_state();
	struct pipette_cluster_spec spec = {
		.nodes = rs.nnodes,
		.node_names = (const char *const *)rs.nodes,
		.gpus_per_node = rs.ngpus,
		/* Canonical slots 0..G-1, not this node's GPU indices: every
		 * node then plans from identical inputs even when nodes got
		 * different GPU indices; apply.c maps slots back to Slurm's
		 * list. */
		.gpu_ids = NULL,
	};
	struct pipette_request req;
	struct pipette_err first;

	if (pipette_request_build(&st->opts, &st->site, rs.launch, &req, err)) {
		if (!st->site.fallback_block)
			return -1;
		goto untouched;
	}
	if (pipette_plan_compute(&req, &spec, &rs.plan, err) == 0)
		return 0;
	rs.plan = NULL;
	if (!st->site.fallback_block)
		return -1;
	/* fallback=block: retry on nominal links in Slurm's order; if even
	 * that fails, start the step untouched.  Never fail the job. */
	first = *err;
	req.mapping = PIPETTE_MAP_BLOCK;
	req.bandwidth[0] = '\0';
	if (pipette_plan_compute(&req, &spec, &rs.plan, err) == 0) {
		if (rs.node_id == 0)
			slurm_spank_log("pipette: warning: %s; planned on nominal links in "
					"Slurm's order instead (fallback=block)", first.msg);
		return 0;
	}
	rs.plan = NULL;
	*err = first;
untouched:
	if (rs.node_id == 0)
		slurm_spank_log("pipette: warning: %s; starting without a plan in Slurm's "
				"order (fallback=block)", err->msg);
	return 0;
}

int pipette_remote_user_init(spank_t sp)
{
	struct pipette_state *st = pipette_state();
	struct pipette_env_ops env;
	struct pipette_err err;

	pipette_env_spank(&env, sp);
	if (pipette_opts_fallback(&st->opts, &st->site, &env, &err)) {
		rs.active = 1;
		if (get_u32(sp, S_JOB_NODEID, "node index", &rs.node_id, NULL))
			rs.node_id = 0;
		store_error(0, err.msg);
		return 0;
	}
	if (!pipette_opts_wanted(&st->opts, &st->site))
		return 0;
	rs.active = 1;
	if (get_u32(sp, S_JOB_ID, "job id", &rs.job_id, &err) ||
	    get_u32(sp, S_JOB_STEPID, "step id", &rs.step_id, &err)) {
		store_error(1, err.msg);
		return 0;
	}
	rs.batch = rs.step_id == SLURM_BATCH_SCRIPT;
	if (!rs.batch && get_u32(sp, S_JOB_NODEID, "node index", &rs.node_id, &err)) {
		store_error(1, err.msg);
		return 0;
	}
	if (pipette_opts_check(&st->opts, &err) || read_layout(sp, &env, &err) ||
	    compute(&err)) {
		store_error(0, err.msg);
		return 0;
	}
	if (rs.plan && rs.node_id == 0) {
		log_warnings(rs.plan);
		if (st->opts.explain == 1 || st->opts.dry_run == 1)
			log_lines(pipette_plan_write_table, rs.plan);
		if (st->opts.dry_run == 1)
			log_lines(pipette_plan_write_env, rs.plan);
	}
	if (st->opts.dry_run == 1)
		store_error(0, "dry run (--pipette-dry-run): the plan is printed above; no "
			    "task was started");
	return 0;
}

int pipette_remote_task_init(spank_t sp)
{
	const struct pipette_site *site = &pipette_state()->site;
	struct pipette_task_ctx t = { 0 };
	struct pipette_env_ops env;
	struct pipette_err err;
	int task_id = 0;
	spank_err_t rc;

	if (!rs.active)
		return 0;
	if (rs.failed) {
		if (spank_get_item(sp, S_TASK_ID, &task_id) != ESPANK_SUCCESS)
			task_id = 0;
		if (task_id == 0 && (rs.fail_local || rs.node_id == 0))
			slurm_error("%s", rs.msg);
		return -1;
	}
	if (!rs.plan)
		return 0;	/* fallback=block without a plan: untouched */
	pipette_env_spank(&env, sp);
	if (rs.batch) {
		if (pipette_apply_job(rs.plan, &env, &err))
			goto fail;
		return 0;
	}
	if (rs.launch == PIPETTE_LAUNCH_SRUN) {
		rc = spank_get_item(sp, S_TASK_ID, &task_id);
		if (rc != ESPANK_SUCCESS) {
			pipette_fail(&err, "could not get the task id: %s", spank_strerror(rc));
			goto fail;
		}
	}
	t.node = (int)rs.node_id;
	t.local_task = rs.launch == PIPETTE_LAUNCH_SRUN ? task_id : 0;
	t.gpus = rs.gpus;
	t.ngpus = rs.ngpus;
	t.master_port = pipette_master_port(site->master_port, site->port_range, rs.job_id,
					    rs.step_id);
	if (pipette_apply_task(rs.plan, &t, &env, &err))
		goto fail;
	return 0;
fail:
	slurm_error("pipette: %s", err.msg);
	return -1;
}

int pipette_remote_exit(spank_t sp)
{
	(void)sp;
	if (rs.plan)
		pipette_plan_destroy(rs.plan);
	rs.plan = NULL;
	free_nodes();
	rs.active = 0;
	return 0;
}
