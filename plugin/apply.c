/* spank_pipette: writing a plan into an environment, through the env-ops
 * table (spank_setenv in the plugin, an array in the unit tests).
 *
 * Every name is checked against the environment contract (the one table
 * of core/render/env.c) and every value for control characters before it
 * is set, so that nothing unvalidated reaches a task.  The plan is computed
 * with canonical GPU slots 0..G-1 (the same input on every node, see
 * remote.c); the task renderer writes CUDA_VISIBLE_DEVICES from the list
 * Slurm gave this node, so it is always a permutation of Slurm's list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

/* PIPETTE_MEGATRON_ARGS is the longest value: a few dozen flags. */
#define ENV_VALUE_MAX 8192

struct setter {
	const struct pipette_env_ops *env;
	const struct pipette_task_ctx *task;	/* NULL for job-level variables */
	struct pipette_err err;
	int failed;
};

static int set_one(void *ctx, const char *name, const char *value)
{
	struct setter *s = ctx;
	int scope = pipette_env_scope(name), rc;

	if (s->failed)
		return -1;
	if (scope < 0 || (scope == PIPETTE_ENV_TASK && !s->task)) {
		pipette_fail(&s->err, "plan: unexpected variable '%.32s'", name ? name : "(null)");
		goto fail;
	}
	if (pipette_value_check(name, value, ENV_VALUE_MAX, &s->err))
		goto fail;
	rc = s->env->set(s->env->ctx, name, value, 1, &s->err);
	if (rc < 0)
		goto fail;
	return 0;
fail:
	s->failed = 1;
	return -1;
}

int pipette_apply_job(const struct pipette_plan *plan, const struct pipette_env_ops *env,
		      struct pipette_err *err)
{
	struct setter s = { .env = env };

	if (pipette_plan_job_env(plan, set_one, &s) || s.failed) {
		if (s.failed && err)
			*err = s.err;
		else
			pipette_fail(err, "plan: could not render the job variables");
		return -1;
	}
	return 0;
}

/* Slurm's GPU list for this node must be the plan's slots, one for one:
 * every slot is one of Slurm's GPUs, never an invented one. */
static int task_gpus_check(const struct pipette_plan *plan, const struct pipette_task_ctx *t,
			   struct pipette_err *err)
{
	if (t->ngpus < 1 || t->ngpus > PIPETTE_MAX_GPUS)
		return pipette_fail(err, "%d GPUs on this node: expected 1 to %d", t->ngpus,
				    PIPETTE_MAX_GPUS);
	if (t->ngpus != pipette_plan_gpus_per_node(plan))
		return pipette_fail(err, "Slurm gave this node %d GPUs but the plan has %d per "
				    "node: CUDA_VISIBLE_DEVICES cannot be a permutation of them",
				    t->ngpus, pipette_plan_gpus_per_node(plan));
	return 0;
}

int pipette_apply_task_only(const struct pipette_plan *plan, const struct pipette_task_ctx *t,
			    const struct pipette_env_ops *env, struct pipette_err *err)
{
	struct setter s = { .env = env, .task = t };

	if (task_gpus_check(plan, t, err))
		return -1;
	if (pipette_plan_task_env(plan, t->node, t->local_task, (const char *const *)t->gpus,
				  set_one, &s, err))
		return -1;
	if (s.failed) {
		if (err)
			*err = s.err;
		return -1;
	}
	return pipette_apply_port(pipette_plan_launch(plan), t->master_port, env, err);
}

int pipette_apply_port(enum pipette_launch_mode launch, long master_port,
		       const struct pipette_env_ops *env, struct pipette_err *err)
{
	char port[24];
	int got;

	if (master_port <= 0)
		return 0;
	snprintf(port, sizeof(port), "%ld", master_port);
	/* 1 = the user set MASTER_PORT: theirs wins (enroot's convention) */
	if (env->set(env->ctx, "MASTER_PORT", port, 0, err) < 0)
		return -1;
	/* torchrun reads its port from PET_MASTER_PORT only: the port
	 * MASTER_PORT now holds, the user's or ours */
	if (launch != PIPETTE_LAUNCH_TORCHRUN)
		return 0;
	/* unknown while recording in the planner child (1): the replay
	 * substitutes MASTER_PORT's value then (outcome.c) */
	got = env->get(env->ctx, "MASTER_PORT", port, sizeof(port), err);
	if (got < 0)
		return -1;
	if (got == 1)
		snprintf(port, sizeof(port), "%ld", master_port);
	if (env->set(env->ctx, "PET_MASTER_PORT", port, 0, err) < 0)
		return -1;
	return 0;
}

int pipette_apply_task(const struct pipette_plan *plan, const struct pipette_task_ctx *t,
		       const struct pipette_env_ops *env, struct pipette_err *err)
{
	/* Checked before the job variables, so a refused task sets nothing. */
	if (task_gpus_check(plan, t, err))
		return -1;
	if (pipette_apply_job(plan, env, err))
		return -1;
	return pipette_apply_task_only(plan, t, env, err);
}
