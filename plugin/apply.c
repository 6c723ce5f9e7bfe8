/* spank_pipette: writing a plan into an environment, through the env-ops
 * table (spank_setenv in the plugin, an array in the unit tests).
 *
 * Every name is checked against the environment contract (DESIGN.md) and
 * every value for control characters before it is set, so that nothing
 * unvalidated reaches a task.  The plan is computed with canonical GPU slots
 * 0..G-1 (the same input on every node, see remote.c); CUDA_VISIBLE_DEVICES
 * is translated here from slots to the entries of the list Slurm gave this
 * node, so it is always a permutation of Slurm's list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

/* PIPETTE_MEGATRON_ARGS is the longest value: a few dozen flags. */
#define ENV_VALUE_MAX 8192

static const char *const task_names[] = {
	"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
	"MASTER_ADDR", "CUDA_VISIBLE_DEVICES",
};

struct setter {
	const struct pipette_env_ops *env;
	const struct pipette_task_ctx *task;	/* NULL for job-level variables */
	struct pipette_err err;
	int failed;
};

static int job_name_ok(const char *name)
{
	const char *p;

	if (strncmp(name, "PIPETTE_", 8) || !name[8])
		return 0;
	for (p = name + 8; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return 1;
}

static int task_name_ok(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(task_names) / sizeof(task_names[0]); i++)
		if (!strcmp(name, task_names[i]))
			return 1;
	return 0;
}

/* "2,0,1" (slots) -> "gpus[2],gpus[0],gpus[1]"; every slot once at most. */
static int translate_gpus(const char *slots, const struct pipette_task_ctx *t, char *out,
			  size_t len, struct pipette_err *err)
{
	char seen[PIPETTE_MAX_GPUS] = { 0 };
	const char *p = slots;
	size_t used = 0;

	out[0] = '\0';
	while (*p) {
		char *end;
		long k = strtol(p, &end, 10);
		int w;

		if (end == p || k < 0 || k >= t->ngpus || seen[k] || (*end && *end != ','))
			return pipette_fail(err, "plan: CUDA_VISIBLE_DEVICES '%.64s' is not a "
					    "list of distinct GPU slots below %d", slots, t->ngpus);
		seen[k] = 1;
		w = snprintf(out + used, len - used, "%s%s", used ? "," : "", t->gpus[k]);
		if (w < 0 || (size_t)w >= len - used)
			return pipette_fail(err, "plan: CUDA_VISIBLE_DEVICES too long");
		used += (size_t)w;
		p = *end ? end + 1 : end;
	}
	if (!used)
		return pipette_fail(err, "plan: empty CUDA_VISIBLE_DEVICES");
	return 0;
}

static int set_one(void *ctx, const char *name, const char *value)
{
	struct setter *s = ctx;
	char gpus[PIPETTE_MAX_GPUS * 48];
	int rc;

	if (s->failed)
		return -1;
	if (!name || !(s->task ? (task_name_ok(name) || job_name_ok(name)) : job_name_ok(name))) {
		pipette_fail(&s->err, "plan: unexpected variable '%.32s'", name ? name : "(null)");
		goto fail;
	}
	if (pipette_value_check(name, value, ENV_VALUE_MAX, &s->err))
		goto fail;
	if (s->task && !strcmp(name, "CUDA_VISIBLE_DEVICES")) {
		if (translate_gpus(value, s->task, gpus, sizeof(gpus), &s->err))
			goto fail;
		value = gpus;
	}
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

int pipette_apply_task_only(const struct pipette_plan *plan, const struct pipette_task_ctx *t,
			    const struct pipette_env_ops *env, struct pipette_err *err)
{
	struct setter s = { .env = env, .task = t };

	if (t->ngpus < 1 || t->ngpus > PIPETTE_MAX_GPUS)
		return pipette_fail(err, "%d GPUs on this node: expected 1 to %d", t->ngpus,
				    PIPETTE_MAX_GPUS);
	if (pipette_plan_task_env(plan, t->node, t->local_task, set_one, &s, err))
		return -1;
	if (s.failed) {
		if (err)
			*err = s.err;
		return -1;
	}
	if (t->master_port > 0) {
		char port[24];

		snprintf(port, sizeof(port), "%ld", t->master_port);
		/* 1 = the user set MASTER_PORT: theirs wins (enroot's convention). */
		if (env->set(env->ctx, "MASTER_PORT", port, 0, err) < 0)
			return -1;
	}
	return 0;
}

int pipette_apply_task(const struct pipette_plan *plan, const struct pipette_task_ctx *t,
		       const struct pipette_env_ops *env, struct pipette_err *err)
{
	if (t->ngpus < 1 || t->ngpus > PIPETTE_MAX_GPUS)
		return pipette_fail(err, "%d GPUs on this node: expected 1 to %d", t->ngpus,
				    PIPETTE_MAX_GPUS);
	if (pipette_apply_job(plan, env, err))
		return -1;
	return pipette_apply_task_only(plan, t, env, err);
}
