#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "inputs/config.h"
#include "plan/experts.h"
#include "inputs/stack.h"
#include "inputs/hardware.h"
#include "inputs/limits.h"
#include "inputs/model.h"
#include "inputs/readfile.h"

int cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("pipette: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return PIPETTE_EXIT_USAGE;
}

int cli_parse_format(const char *s, unsigned allowed_mask, enum pipette_format *out)
{
	static const char *const names[] = { "table", "json", "env", "megatron", "nemo", "launch",
						     "torchtitan", "sbatch" };
	unsigned i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((allowed_mask & (1u << i)) && !strcmp(s, names[i])) {
			*out = (enum pipette_format)i;
			return 0;
		}
	return -1;
}

int cli_int(const char *opt, const char *val, long min, long max, long *out)
{
	struct pipette_err err;

	if (!val)
		return cli_error("%s needs a value", opt);
	if (pipette_parse_long(val, min, max, out, opt, &err))
		return cli_error("%s", err.msg);
	return 0;
}

int cli_double(const char *opt, const char *val, double min, double max, double *out)
{
	struct pipette_err err;

	if (!val)
		return cli_error("%s needs a value", opt);
	if (pipette_parse_double(val, min, max, out, opt, &err))
		return cli_error("%s", err.msg);
	return 0;
}

int cli_check_input(const char *opt, const char *path)
{
	struct pipette_err err;

	if (pipette_check_file(path, opt, &err))
		return cli_error("%s", err.msg);
	return 0;
}

int cli_check_model(const char *model, const char *models_dir)
{
	struct pipette_err err;
	char path[PATH_MAX];
	int r = pipette_model_config_path(model, models_dir, path, sizeof(path), &err);

	if (r < 0)
		return cli_error("--model: %s", err.msg);
	return r ? cli_check_input(r == 2 ? "--models-dir" : "--model", path) : 0;
}

const char *cli_gib(double bytes, char *buf, unsigned size)
{
	snprintf(buf, size, "%.2f GiB", bytes / PIPETTE_GIB);
	return buf;
}

int cli_once(struct cli_seen *seen, const char *name)
{
	int i;

	for (i = 0; i < seen->n; i++)
		if (!strcmp(seen->name[i], name))
			return cli_error("%s given twice", name);
	if (seen->n < CLI_SEEN_MAX)
		pipette_strlcpy(seen->name[seen->n++], name, sizeof(seen->name[0]));
	return 0;
}

int cli_option(int argc, char **argv, int *i, const char *cmd, const char *const *known,
	       struct cli_seen *seen, char *name, size_t len, const char **val)
{
	const char *arg = argv[*i], *eq = strchr(arg, '=');
	size_t n = eq ? (size_t)(eq - arg) : strlen(arg), k;

	if (n >= len)
		n = len - 1;
	memcpy(name, arg, n);
	name[n] = '\0';
	for (k = 0; known[k] && strcmp(known[k], name); k++)
		;
	if (!known[k])
		return cli_error("%s: unknown option %.64s (see pipette %s --help)", cmd, name,
				 cmd);
	if (cli_once(seen, name))
		return PIPETTE_EXIT_USAGE;
	if (eq) {
		*val = eq + 1;
		return 0;
	}
	if (*i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2))
		return cli_error("%s needs a value", name);
	*val = argv[++*i];
	return 0;
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

int cli_expand_nodes(const char *spec, char ***names, int *n,
		     struct pipette_err *err)
{
	char **out;
	long k;
	int i;

	if (!spec || !all_digits(spec))
		return pipette_hostlist_expand(spec, names, n, err);
	*names = NULL;
	*n = 0;
	k = strtol(spec, NULL, 10);
	if (k < 1 || k > PIPETTE_MAX_NODES)
		return pipette_fail(err, "node count %.32s is not in [1, %d]", spec,
				    PIPETTE_MAX_NODES);
	out = calloc((size_t)k, sizeof(char *));
	if (!out)
		return pipette_fail(err, "out of memory");
	for (i = 0; i < k; i++) {
		out[i] = malloc(16);
		if (!out[i]) {
			pipette_hostlist_free(out, i);
			return pipette_fail(err, "out of memory");
		}
		snprintf(out[i], 16, "node%d", i + 1);
	}
	*names = out;
	*n = (int)k;
	return 0;
}

int cli_bf16_layers(const char *v, int *first, int *last)
{
	char a[16], b[16];
	const char *comma = strchr(v, ',');
	long f, l;

	if (!comma || (size_t)(comma - v) >= sizeof(a) || strlen(comma + 1) >= sizeof(b))
		return cli_error("--bf16-layers: '%.32s': expected FIRST,LAST (two counts)", v);
	memcpy(a, v, (size_t)(comma - v));
	a[comma - v] = 0;
	strcpy(b, comma + 1);
	if (cli_int("--bf16-layers", a, 0, 1 << 16, &f) ||
	    cli_int("--bf16-layers", b, 0, 1 << 16, &l))
		return PIPETTE_EXIT_USAGE;
	*first = (int)f;
	*last = (int)l;
	return 0;
}

int cli_moe_fact(const char *name, const char *v, struct pipette_moe_exec *x, int *rc)
{
	if (!strcmp(name, "--capacity-factor"))
		*rc = cli_double(name, v, 0, 64, &x->capacity_factor) ? PIPETTE_EXIT_USAGE : 0;
	else if (!strcmp(name, "--imbalance"))
		*rc = cli_double(name, v, 1, 65536, &x->imbalance) ? PIPETTE_EXIT_USAGE : 0;
	else
		return 0;
	return 1;
}

int cli_moe_option(const char *name, const char *v, struct pipette_config *c,
		   const char **routing)
{
	struct pipette_err err;
	int rc;

	if (!strcmp(name, "--recompute-modules")) {
		if (pipette_recompute_modules_parse(v, &c->recompute_modules, &err))
			return cli_error("--recompute-modules: %s", err.msg);
		if (c->recompute == PIPETTE_RECOMPUTE_NONE)
			c->recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	} else if (!strcmp(name, "--dispatcher")) {
		if (pipette_dispatcher_parse(v, &c->moe.dispatcher, &err))
			return cli_error("--dispatcher: %s", err.msg);
	} else if (cli_moe_fact(name, v, &c->moe, &rc)) {
		return rc;
	} else if (!strcmp(name, "--routing")) {
		if (cli_check_input(name, v))
			return PIPETTE_EXIT_USAGE;
		*routing = v;
	} else {
		return CLI_NOT_MINE;
	}
	return 0;
}

void cli_stack_defaults(const struct pipette_model *m, struct pipette_config *c)
{
	const struct pipette_stack *st = pipette_config_stack(c);

	if (st->fixed_modules && c->recompute == PIPETTE_RECOMPUTE_NONE && !c->recompute_modules) {
		c->recompute = PIPETTE_RECOMPUTE_SELECTIVE;
		c->recompute_modules = st->fixed_modules;
	}
	if (m->experts && st->deepep == 2)
		c->moe.dispatcher = PIPETTE_DISPATCH_DEEPEP;
}

int cli_routing_imbalance(const char *path, const struct pipette_model *m,
			  struct pipette_config *c)
{
	struct pipette_routing *r = NULL;
	struct pipette_err err;
	int L, E, l, e, per;
	double sum = 0;

	if (!m->experts || c->ep < 1 || m->experts % c->ep)
		return cli_error("--routing: needs a model with experts and --ep dividing them");
	if (pipette_routing_read(path, m, &r, &err))
		return cli_error("--routing: %s", err.msg);
	L = pipette_routing_layers(r);
	E = pipette_routing_experts(r);
	per = E / c->ep;
	for (l = 0; l < L; l++) {
		double busiest = 0, total = 0;
		int k;

		for (k = 0; k < c->ep; k++) {
			double load = 0;

			for (e = k * per; e < (k + 1) * per; e++)
				load += pipette_routing_load(r, l, e);
			busiest = load > busiest ? load : busiest;
			total += load;
		}
		sum += total > 0 ? busiest / (total / c->ep) : 1.0;
	}
	pipette_routing_destroy(r);
	c->moe.imbalance = L ? sum / L : 1.0;
	return 0;
}
