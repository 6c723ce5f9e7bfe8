/* spank_pipette: parsing what the user asked for (option values, PIPETTE_*
 * input variables) and what Slurm says about the step (GPU lists, tasks per
 * node).  No SPANK calls: unit-tested directly with hostile strings. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "inputs/config.h"
#include "inputs/stack.h"
#include "plugin.h"

int pipette_parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "1", "true", "yes", "y", "on" };
	static const char *const no[] = { "0", "false", "no", "n", "off" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = 1;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

static const struct {
	const char *name;	/* option, without "--" */
	const char *env;	/* input variable */
	int has_arg;
} opt_table[PIPETTE_OPT_COUNT] = {
	[PIPETTE_OPT_MODEL] = { "pipette-model", "PIPETTE_MODEL", 1 },
	[PIPETTE_OPT_GLOBAL_BATCH] = { "pipette-global-batch", "PIPETTE_GLOBAL_BATCH", 1 },
	[PIPETTE_OPT_SEQ_LEN] = { "pipette-seq-len", "PIPETTE_SEQ_LEN", 1 },
	[PIPETTE_OPT_FIX] = { "pipette-fix", "PIPETTE_FIX", 1 },
	[PIPETTE_OPT_SCHEDULE] = { "pipette-schedule", "PIPETTE_SCHEDULE", 1 },
	[PIPETTE_OPT_MEM_FRACTION] = { "pipette-mem-fraction", "PIPETTE_MEM_FRACTION", 1 },
	[PIPETTE_OPT_MAPPING] = { "pipette-mapping", "PIPETTE_MAPPING", 1 },
	[PIPETTE_OPT_BANDWIDTH] = { "pipette-bandwidth", "PIPETTE_BANDWIDTH", 1 },
	[PIPETTE_OPT_EXPLAIN] = { "pipette-explain", "PIPETTE_EXPLAIN", 0 },
	[PIPETTE_OPT_DRY_RUN] = { "pipette-dry-run", "PIPETTE_DRY_RUN", 0 },
	[PIPETTE_OPT_STACK] = { "pipette-stack", "PIPETTE_STACK", 1 },
	[PIPETTE_OPT_PRECISION] = { "pipette-precision", "PIPETTE_PRECISION", 1 },
	[PIPETTE_OPT_PLAN_FILE] = { "pipette-plan-file", "PIPETTE_PLAN_FILE", 1 },
};

const char *pipette_opt_name(enum pipette_opt_id id)
{
	return (unsigned)id < PIPETTE_OPT_COUNT ? opt_table[id].name : "?";
}

const char *pipette_opt_envvar(enum pipette_opt_id id)
{
	return (unsigned)id < PIPETTE_OPT_COUNT ? opt_table[id].env : "?";
}

int pipette_opt_has_arg(enum pipette_opt_id id)
{
	return (unsigned)id < PIPETTE_OPT_COUNT ? opt_table[id].has_arg : 0;
}

int pipette_value_check(const char *what, const char *s, size_t max,
			struct pipette_err *err)
{
	size_t n;

	if (!s)
		return pipette_fail(err, "%s: missing value", what);
	for (n = 0; s[n]; n++) {
		if (n >= max)
			return pipette_fail(err, "%s: value longer than %zu bytes", what, max);
		if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f)
			return pipette_fail(err, "%s: value contains a control character "
					    "(byte %zu)", what, n + 1);
	}
	return 0;
}

void pipette_opts_init(struct pipette_opts *o)
{
	memset(o, 0, sizeof(*o));
	pipette_pins_init(&o->pins);
	o->schedule = -1;
	o->mapping = -1;
	o->explain = -1;
	o->dry_run = -1;
}

/* One "key=value" of --pipette-fix. */
static int fix_one(const char *key, const char *val, struct pipette_pins *p,
		   struct pipette_err *err)
{
	char what[64];
	long v;
	int b, *slot;

	snprintf(what, sizeof(what), "--pipette-fix %.16s", key);
	if ((slot = pipette_pin_slot(p, key))) {
		if (*slot != -1)
			return pipette_fail(err, "%s: given twice", what);
		if (!isdigit((unsigned char)val[0]))
			return pipette_fail(err, "%s: '%.32s' is not an integer", what, val);
		if (pipette_parse_long(val, 1, PIPETTE_MAX_PIN, &v, what, err))
			return -1;
		*slot = (int)v;
		return 0;
	}
	if (!strcmp(key, "schedule")) {
		enum pipette_schedule_kind k;

		if (p->schedule != -1)
			return pipette_fail(err, "%s: given twice", what);
		if (pipette_schedule_parse(val, &k, err))
			return pipette_fail_prefix(err, "--pipette-fix: ");
		p->schedule = (int)k;
		return 0;
	}
	if (!strcmp(key, "recompute")) {
		enum pipette_recompute r;

		if (p->recompute != -1)
			return pipette_fail(err, "%s: given twice", what);
		if (pipette_recompute_parse(val, &r, err))
			return pipette_fail_prefix(err, "--pipette-fix: ");
		p->recompute = (int)r;
		return 0;
	}
	if (!strcmp(key, "reshard")) {
		enum pipette_reshard r;

		if (p->reshard != -1)
			return pipette_fail(err, "%s: given twice", what);
		if (pipette_reshard_parse(val, &r, err))
			return pipette_fail_prefix(err, "--pipette-fix: ");
		p->reshard = (int)r;
		return 0;
	}
	if (!strcmp(key, "sp") || !strcmp(key, "sequence_parallel") ||
	    !strcmp(key, "do") || !strcmp(key, "distributed_optimizer")) {
		slot = key[0] == 's' ? &p->sequence_parallel : &p->distributed_optimizer;
		if (*slot != -1)
			return pipette_fail(err, "%s: given twice", what);
		if (pipette_parse_bool(val, &b))
			return pipette_fail(err, "%s: '%.32s': expected 0 or 1", what, val);
		*slot = b;
		return 0;
	}
	return pipette_fail(err, "--pipette-fix: unknown knob '%.32s' (known: tp, pp, dp, cp, "
			    "ep, etp, vpp, mb, dp_shard, recompute_every, schedule, recompute, "
			    "reshard, sp, do)", key);
}

int pipette_parse_fix(const char *s, struct pipette_pins *pins, struct pipette_err *err)
{
	char buf[PIPETTE_PATH_MAX], *item, *save = NULL;
	struct pipette_pins p;

	if (pipette_value_check("--pipette-fix", s, PIPETTE_VALUE_MAX, err))
		return -1;
	if (!*s)
		return pipette_fail(err, "--pipette-fix: empty; expected knob=value[,...], "
				    "e.g. tp=8,pp=4");
	pipette_pins_init(&p);
	memcpy(buf, s, strlen(s) + 1);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq || eq == item || !eq[1])
			return pipette_fail(err, "--pipette-fix: '%.32s': expected knob=value, "
					    "e.g. tp=8", item);
		*eq = '\0';
		if (fix_one(item, eq + 1, &p, err))
			return -1;
	}
	*pins = p;
	return 0;
}

int pipette_opts_set(struct pipette_opts *o, enum pipette_opt_id id, const char *arg,
		     struct pipette_err *err)
{
	char what[48];
	long v;
	double d;

	if ((unsigned)id >= PIPETTE_OPT_COUNT)
		return pipette_fail(err, "unknown option %d", (int)id);
	snprintf(what, sizeof(what), "--%s", opt_table[id].name);
	if (opt_table[id].has_arg) {
		if (pipette_value_check(what, arg, PIPETTE_VALUE_MAX, err))
			return -1;
		if (!*arg)
			return pipette_fail(err, "%s: empty value", what);
	}
	/* strtol and strtod skip leading blanks and take a sign; a number
	 * here starts with a digit. */
	if ((id == PIPETTE_OPT_GLOBAL_BATCH || id == PIPETTE_OPT_SEQ_LEN ||
	     id == PIPETTE_OPT_MEM_FRACTION) && arg && !isdigit((unsigned char)arg[0]) &&
	    arg[0] != '.')
		return pipette_fail(err, "%s: '%.32s' is not a number", what, arg);
	switch (id) {
	case PIPETTE_OPT_MODEL:
		if (pipette_strlcpy(o->model, arg, sizeof(o->model)))
			return pipette_fail(err, "%s: value too long", what);
		break;
	case PIPETTE_OPT_GLOBAL_BATCH:
		if (pipette_parse_long(arg, 1, PIPETTE_MAX_GLOBAL_BATCH, &v, what, err))
			return -1;
		o->global_batch = v;
		break;
	case PIPETTE_OPT_SEQ_LEN:
		if (pipette_parse_long(arg, 1, PIPETTE_MAX_SEQ_LEN, &v, what, err))
			return -1;
		o->seq_len = v;
		break;
	case PIPETTE_OPT_FIX:
		if (pipette_parse_fix(arg, &o->pins, err))
			return -1;
		break;
	case PIPETTE_OPT_SCHEDULE: {
		struct pipette_pins one;

		pipette_pins_init(&one);
		if (pipette_schedule_pin_parse(arg, &one, err))
			return pipette_fail_prefix(err, "%s: ", what);
		o->schedule = one.schedule;
		o->schedule_set = one.schedule_set;
		break;
	}
	case PIPETTE_OPT_MEM_FRACTION:
		if (pipette_parse_double(arg, PIPETTE_MIN_MEM_FRACTION, PIPETTE_MAX_MEM_FRACTION, &d,
					 what, err))
			return -1;
		o->mem_fraction = d;
		break;
	case PIPETTE_OPT_MAPPING: {
		enum pipette_mapping_mode m;

		if (pipette_mapping_parse(arg, &m, err))
			return pipette_fail_prefix(err, "%s: ", what);
		o->mapping = (int)m;
		break;
	}
	case PIPETTE_OPT_BANDWIDTH:
		if (pipette_strlcpy(o->bandwidth, arg, sizeof(o->bandwidth)))
			return pipette_fail(err, "%s: value too long", what);
		break;
	case PIPETTE_OPT_EXPLAIN:
	case PIPETTE_OPT_DRY_RUN: {
		int b = 1;

		/* A flag; the input variable form carries a boolean. */
		if (arg && pipette_parse_bool(arg, &b))
			return pipette_fail(err, "%s: '%.32s': expected 0 or 1", what, arg);
		if (id == PIPETTE_OPT_EXPLAIN)
			o->explain = b;
		else
			o->dry_run = b;
		break;
	}
	case PIPETTE_OPT_STACK: {
		struct pipette_stack st;

		if (pipette_stack_lookup(arg, &st, err))
			return pipette_fail_prefix(err, "%s: ", what);
		(void)pipette_strlcpy(o->stack, st.name, sizeof(o->stack));
		break;
	}
	case PIPETTE_OPT_PRECISION:
		if (pipette_precision_set_parse(arg, &o->precision_set, err))
			return pipette_fail_prefix(err, "%s: ", what);
		break;
	case PIPETTE_OPT_PLAN_FILE:
		/* the planner reads it on every node, from no particular directory */
		if (arg[0] != '/')
			return pipette_fail(err, "%s: '%.64s': expected an absolute path", what, arg);
		if (pipette_strlcpy(o->plan_file, arg, sizeof(o->plan_file)))
			return pipette_fail(err, "%s: value too long", what);
		break;
	case PIPETTE_OPT_COUNT:
		break;
	}
	o->set |= 1u << id;
	return 0;
}

static int fallback_one(struct pipette_opts *o, enum pipette_opt_id id, const char *name,
			const struct pipette_env_ops *env, struct pipette_err *err)
{
	char buf[PIPETTE_PATH_MAX];
	int rc = env->get(env->ctx, name, buf, sizeof(buf), err);

	if (rc == 1)
		return 1;
	if (rc < 0)
		return pipette_fail_prefix(err, "%s: ", name);
	/* A flag's option variable carries an empty value. */
	if (pipette_opts_set(o, id, !opt_table[id].has_arg && !buf[0] ? NULL : buf, err))
		return pipette_fail_prefix(err, "%s (input variable): ", name);
	return 0;
}

/* The variable Slurm itself uses to carry an option into a job:
 * SLURM_SPANK__SLURM_SPANK_OPTION_<plugin>_<option>, every character that
 * is not alphanumeric as '_' (Slurm src/common/plugstack.c:1384-1424 and
 * :1208 at tag slurm-22-05-8-1; plugin/README.md, "Slurm facts"). */
static void option_var(enum pipette_opt_id id, char *buf, size_t len)
{
	char *p;

	snprintf(buf, len, "SLURM_SPANK__SLURM_SPANK_OPTION_pipette_%s", opt_table[id].name);
	for (p = buf + 40; *p; p++)
		if (!isalnum((unsigned char)*p))
			*p = '_';
}

/* An option's value from the option variable (it counts as given), else
 * from the PIPETTE_* input variable. */
static int fallback_opt(struct pipette_opts *o, enum pipette_opt_id id, int input,
			const struct pipette_env_ops *env, unsigned *given,
			struct pipette_err *err)
{
	char name[96];
	int rc;

	option_var(id, name, sizeof(name));
	rc = fallback_one(o, id, name, env, err);
	if (rc <= 0) {
		if (rc == 0)
			*given |= 1u << id;
		return rc;
	}
	if (!input)
		return 0;
	rc = fallback_one(o, id, opt_table[id].env, env, err);
	return rc < 0 ? -1 : 0;
}

int pipette_opts_fallback(struct pipette_opts *o, const struct pipette_site *site,
			  const struct pipette_env_ops *env, struct pipette_err *err)
{
	char tp[16];
	int i, planned;
	unsigned given = o->set;

	/* The model first: a job that does not ask for pipette is not
	 * affected by anything else in its environment. */
	if (!(given & (1u << PIPETTE_OPT_MODEL)) &&
	    fallback_opt(o, PIPETTE_OPT_MODEL, 1, env, &given, err))
		return -1;
	/* Only options count as "given" (default=off ignores PIPETTE_MODEL). */
	o->set = given;
	if (!pipette_opts_wanted(o, site))
		return 0;
	planned = env->get(env->ctx, "PIPETTE_TP", tp, sizeof(tp), NULL) != 1;
	for (i = 0; i < PIPETTE_OPT_COUNT; i++) {
		if (i == PIPETTE_OPT_MODEL || (given & (1u << i)))
			continue;
		if (fallback_opt(o, (enum pipette_opt_id)i,
				 !(planned && (i == PIPETTE_OPT_SCHEDULE || i == PIPETTE_OPT_STACK ||
					       i == PIPETTE_OPT_PRECISION ||
					       i == PIPETTE_OPT_PLAN_FILE)),
				 env, &given, err))
			return -1;
	}
	o->set = given;
	return 0;
}

int pipette_opts_wanted(const struct pipette_opts *o, const struct pipette_site *s)
{
	if (!o->model[0] || !strcmp(o->model, "none"))
		return 0;
	return (o->set & (1u << PIPETTE_OPT_MODEL)) || s->default_on;
}

int pipette_opts_check(const struct pipette_opts *o, struct pipette_err *err)
{
	if (o->schedule >= 0 && o->pins.schedule >= 0 && o->schedule != o->pins.schedule)
		return pipette_fail(err, "--pipette-schedule=%s conflicts with --pipette-fix "
				    "schedule=%s: give one of them",
				    pipette_schedule_name((enum pipette_schedule_kind)o->schedule),
				    pipette_schedule_name((enum pipette_schedule_kind)o->pins.schedule));
	if (o->schedule_set && o->pins.schedule >= 0 &&
	    !(o->schedule_set & (1u << o->pins.schedule)))
		return pipette_fail(err, "--pipette-schedule lists schedules without --pipette-fix "
				    "schedule=%s: give one of them",
				    pipette_schedule_name((enum pipette_schedule_kind)o->pins.schedule));
	if (!strcmp(o->model, "help"))
		return pipette_fail(err, "--pipette-model=help lists the models; it cannot run a job");
	if (o->global_batch < 1)
		return pipette_fail(err, "--pipette-global-batch=N is required with "
				    "--pipette-model (sequences per iteration)");
	return 0;
}

/* ---- the step's layout -------------------------------------------------- */

static int gpu_token_ok(const char *t)
{
	if (!*t)
		return 0;
	for (; *t; t++)
		if (!isalnum((unsigned char)*t) && *t != '-' && *t != '_' && *t != ':' &&
		    *t != '.')
			return 0;
	return 1;
}

int pipette_split_gpus(char *buf, char **tok, int max, int *n, struct pipette_err *err)
{
	char *p = buf, *comma;
	int k = 0;

	*n = 0;
	if (!*buf)
		return pipette_fail(err, "empty GPU list");
	for (;;) {
		comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (!gpu_token_ok(p))
			return pipette_fail(err, "GPU list: entry %d '%.32s' is not a GPU index or "
					    "UUID", k + 1, p);
		if (k >= max)
			return pipette_fail(err, "GPU list: more than %d GPUs on one node", max);
		tok[k++] = p;
		if (!comma)
			break;
		p = comma + 1;
	}
	*n = k;
	return 0;
}

static int read_count(const char **p, long max, long *out)
{
	long v = 0;

	if (!isdigit((unsigned char)**p))
		return -1;
	while (isdigit((unsigned char)**p)) {
		v = v * 10 + (**p - '0');
		if (v > max)
			return -1;
		(*p)++;
	}
	*out = v;
	return 0;
}

int pipette_tasks_per_node(const char *s, long *per_node, long *nodes,
			   struct pipette_err *err)
{
	const char *p = s;
	long common = -1, total = 0, c, rep;

	if (!s || !*s)
		return pipette_fail(err, "tasks per node: empty");
	for (;;) {
		if (read_count(&p, 1000000, &c))
			return pipette_fail(err, "tasks per node '%.64s': expected a count", s);
		rep = 1;
		if (*p == '(') {
			p++;
			if (*p++ != 'x' || read_count(&p, PIPETTE_MAX_NODES, &rep) || *p++ != ')' ||
			    rep < 1)
				return pipette_fail(err, "tasks per node '%.64s': expected N(xM)", s);
		}
		total += rep;
		if (total > PIPETTE_MAX_NODES)
			return pipette_fail(err, "tasks per node '%.64s': more than %d nodes", s,
					    PIPETTE_MAX_NODES);
		if (common == -1)
			common = c;
		else if (common != c)
			common = 0;
		if (!*p)
			break;
		if (*p++ != ',')
			return pipette_fail(err, "tasks per node '%.64s': unexpected character", s);
	}
	*per_node = common;
	*nodes = total;
	return 0;
}

int pipette_launch_decide(long tasks_per_node, int gpus, enum pipette_launch_mode *mode,
			  struct pipette_err *err)
{
	if (gpus < 1)
		return pipette_fail(err, "the step has no GPUs: request them with "
				    "--gpus-per-node=N");
	if (tasks_per_node == gpus) {
		*mode = PIPETTE_LAUNCH_SRUN;
		return 0;
	}
	if (tasks_per_node == 1) {
		*mode = PIPETTE_LAUNCH_TORCHRUN;
		return 0;
	}
	if (tasks_per_node == 0)
		return pipette_fail(err, "the step runs different task counts on its nodes: use "
				    "--ntasks-per-node=%d (one task per GPU) or --ntasks-per-node=1 "
				    "(torchrun)", gpus);
	return pipette_fail(err, "the step runs %ld tasks per node on %d GPUs per node: use "
			    "--ntasks-per-node=%d (one task per GPU) or --ntasks-per-node=1 "
			    "(torchrun)", tasks_per_node, gpus, gpus);
}

/* Steps of one job are spread by a prime stride, so concurrent steps of a
 * job get distinct ports (while step * 1009 stays distinct modulo range),
 * and consecutive jobs, the most likely neighbours, get adjacent ports. */
long pipette_master_port(long base, long range, uint32_t job, uint32_t step)
{
	uint64_t off = ((uint64_t)job + (uint64_t)step * 1009u) % (uint64_t)range;

	return base + (long)off;
}
