/* spank_pipette: the planner's result as text, from the child process to
 * slurmstepd (child.c).
 *
 * The child renders everything slurmstepd will do: the lines to show the
 * user, the job variables and each local task's variables, already
 * checked (apply.c's setter refuses unknown names and control characters)
 * and already translated to Slurm's GPU list.  slurmstepd then only
 * replays it.  One record per line, so no value may hold a newline (none
 * can: apply.c refuses control characters):
 *
 *   E <message>                       the step cannot run (after M and I
 *                                     records, the only record)
 *   W <text>                          a warning for the user (node 0 says it)
 *   L <text>                          a line of the plan for the user (node 0)
 *   M <text>                          a warning of this node (every node
 *                                     says it: the plan cache's problems)
 *   I <text>                          where the plan came from (the plan
 *                                     cache; --pipette-explain, admins' log)
 *   J <overwrite> NAME=VALUE          a variable of every task
 *   T <task> <overwrite> NAME=VALUE   a variable of local task <task>
 *   END                               the result is complete
 *
 * The parent checks the whole text before using any of it, so a truncated
 * or garbled result is an error, never half an environment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

/* ---- writing (in the child) -------------------------------------------- */

static int put_lines(FILE *out, char tag, const char *text)
{
	const char *p = text, *nl;

	while (p && *p) {
		nl = strchr(p, '\n');
		if (fprintf(out, "%c %.*s\n", tag, nl ? (int)(nl - p) : (int)strlen(p), p) < 0)
			return -1;
		p = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* A message as one record: a newline inside it would start a new one. */
static int put_message(FILE *out, char tag, const char *msg)
{
	char line[PIPETTE_ERR_MAX];
	size_t i;

	(void)pipette_strlcpy(line, msg, sizeof(line));
	for (i = 0; line[i]; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	return fprintf(out, "%c %s\n", tag, line) < 0 ? -1 : 0;
}

int pipette_outcome_error(FILE *out, const char *msg)
{
	return put_message(out, 'E', msg) || pipette_outcome_end(out) ? -1 : 0;
}

int pipette_outcome_notice(FILE *out, const char *msg)
{
	return put_message(out, 'M', msg);
}

int pipette_outcome_info(FILE *out, const char *msg)
{
	return put_message(out, 'I', msg);
}

int pipette_outcome_warnings(FILE *out, const char *text)
{
	return put_lines(out, 'W', text);
}

int pipette_outcome_lines(FILE *out, const char *text)
{
	return put_lines(out, 'L', text);
}

int pipette_outcome_end(FILE *out)
{
	return fputs("END\n", out) < 0 ? -1 : 0;
}

struct recorder {
	FILE *out;
	int task;	/* -1: job variables */
};

static int record_set(void *ctx, const char *name, const char *value, int overwrite,
		      struct pipette_err *err)
{
	const struct recorder *r = ctx;
	int w;

	if (strchr(name, '=') || strpbrk(value, "\n\r"))
		return pipette_fail(err, "variable %.32s: not representable", name);
	if (r->task < 0)
		w = fprintf(r->out, "J %d %s=%s\n", overwrite ? 1 : 0, name, value);
	else
		w = fprintf(r->out, "T %d %d %s=%s\n", r->task, overwrite ? 1 : 0, name, value);
	return w < 0 ? pipette_fail(err, "writing the result: out of memory") : 0;
}

static int record_get(void *ctx, const char *name, char *buf, size_t len,
		      struct pipette_err *err)
{
	(void)ctx;
	(void)name;
	(void)buf;
	(void)len;
	(void)err;
	return 1;	/* nothing is set yet: the tasks' environments are replayed later */
}

int pipette_outcome_record_var(FILE *out, const char *name, const char *value,
			       struct pipette_err *err)
{
	struct recorder r = { .out = out, .task = -1 };

	return record_set(&r, name, value, 1, err);
}

int pipette_outcome_record_job(FILE *out, const struct pipette_plan *plan,
			       struct pipette_err *err)
{
	struct recorder r = { .out = out, .task = -1 };
	struct pipette_env_ops env = { .get = record_get, .set = record_set, .ctx = &r };

	return pipette_apply_job(plan, &env, err);
}

int pipette_outcome_record_task(FILE *out, const struct pipette_plan *plan,
				const struct pipette_task_ctx *t, struct pipette_err *err)
{
	struct recorder r = { .out = out, .task = t->local_task };
	struct pipette_env_ops env = { .get = record_get, .set = record_set, .ctx = &r };

	return pipette_apply_task_only(plan, t, &env, err);
}

int pipette_outcome_record_port(FILE *out, enum pipette_launch_mode launch, int task,
				long master_port, struct pipette_err *err)
{
	struct recorder r = { .out = out, .task = task };
	struct pipette_env_ops env = { .get = record_get, .set = record_set, .ctx = &r };

	return pipette_apply_port(launch, master_port, &env, err);
}

/* ---- reading (in slurmstepd) ------------------------------------------- */

int pipette_outcome_parse_record(char *line, const char *tags, struct pipette_record *r)
{
	char *p, *end;

	memset(r, 0, sizeof(*r));
	r->task = -1;
	if (!strcmp(line, "END")) {
		r->tag = '.';
		return 0;
	}
	if (!line[0] || line[1] != ' ' || !strchr(tags, line[0]))
		return -1;
	r->tag = line[0];
	p = line + 2;
	if (r->tag != 'J' && r->tag != 'T') {
		r->text = p;
		return 0;
	}
	if (r->tag == 'T') {
		r->task = strtol(p, &end, 10);
		if (end == p || *end != ' ' || r->task < 0 || r->task >= PIPETTE_MAX_GPUS)
			return -1;
		p = end + 1;
	}
	if ((p[0] != '0' && p[0] != '1') || p[1] != ' ')
		return -1;
	r->overwrite = p[0] == '1';
	r->name = p + 2;
	p = strchr(r->name, '=');
	if (!p || p == r->name)
		return -1;
	*p = '\0';
	r->value = p + 1;
	return 0;
}

/* Walk the records, checking each, and call fn on each.  Each line is
 * copied before it is split, so the text stays intact for the next walk. */
static int walk(const struct pipette_outcome *o,
		int (*fn)(void *ctx, const struct pipette_record *r), void *ctx,
		struct pipette_err *err)
{
	const char *p = o->text, *nl;
	char line[PIPETTE_OUTCOME_LINE_MAX];
	struct pipette_record r;
	int ended = 0, n = 0;

	while (*p) {
		size_t len;

		nl = strchr(p, '\n');
		if (!nl)
			return pipette_fail(err, "the planner's result is truncated");
		len = (size_t)(nl - p);
		if (len >= sizeof(line) || ended)
			return pipette_fail(err, "the planner's result is malformed (record %d)",
					    n + 1);
		memcpy(line, p, len);
		line[len] = '\0';
		if (pipette_outcome_parse_record(line, "EWLMIJT", &r))
			return pipette_fail(err, "the planner's result is malformed (record %d)",
					    n + 1);
		if (r.tag == '.')
			ended = 1;
		else if (fn(ctx, &r))
			return -1;
		p = nl + 1;
		n++;
	}
	if (!ended)
		return pipette_fail(err, "the planner's result is truncated");
	return 0;
}

static int find_error(void *ctx, const struct pipette_record *r)
{
	struct pipette_outcome *o = ctx;

	if (r->tag == 'E' && !o->failed) {
		o->failed = 1;
		(void)pipette_strlcpy(o->error, r->text, sizeof(o->error));
	}
	return 0;
}

int pipette_outcome_parse(char *text, struct pipette_outcome *o, struct pipette_err *err)
{
	memset(o, 0, sizeof(*o));
	o->text = text;
	/* walk checks every record, whether or not an E came first. */
	return walk(o, find_error, o, err);
}

struct say_ctx {
	const char *tags;
	void (*say)(void *ctx, char tag, const char *line);
	void *ctx;
};

static int say_one(void *ctx, const struct pipette_record *r)
{
	const struct say_ctx *s = ctx;

	if (r->text && strchr(s->tags, r->tag))
		s->say(s->ctx, r->tag, r->text);
	return 0;
}

void pipette_outcome_say(const struct pipette_outcome *o, const char *tags,
			 void (*say)(void *ctx, char tag, const char *line), void *ctx)
{
	struct say_ctx s = { tags, say, ctx };

	(void)walk(o, say_one, &s, NULL);
}

struct replay_ctx {
	const struct pipette_env_ops *env;
	long task;
	struct pipette_err *err;
	int set;
};

static int replay_one(void *ctx, const struct pipette_record *r)
{
	struct replay_ctx *c = ctx;
	const char *value = r->value;
	char port[64];

	if (r->tag != 'J' && !(r->tag == 'T' && r->task == c->task))
		return 0;
	/* torchrun reads its port only from PET_MASTER_PORT: the port the
	 * task's MASTER_PORT holds now, which is the user's when they set it
	 * (the record, made before, could only hold pipette's) */
	if (!strcmp(r->name, "PET_MASTER_PORT")) {
		int got = c->env->get(c->env->ctx, "MASTER_PORT", port, sizeof(port), c->err);

		if (got < 0)
			return -1;
		if (got == 0)
			value = port;
	}
	if (c->env->set(c->env->ctx, r->name, value, r->overwrite, c->err) < 0)
		return -1;
	c->set++;
	return 0;
}

int pipette_outcome_apply(const struct pipette_outcome *o, long task,
			  const struct pipette_env_ops *env, struct pipette_err *err)
{
	struct replay_ctx c = { env, task, err, 0 };

	if (o->failed)
		return pipette_fail(err, "%s", o->error);
	return walk(o, replay_one, &c, err);
}
