/* pipette calibrate: fit the site's factors from its jobs' observations
 * (calib.h) and write the calibration file --calibration reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "learn/calib.h"
#include "cli.h"
#include "inputs/hardware.h"
#include "progress.h"
#include "inputs/json.h"

static const char usage_text[] =
"usage: pipette calibrate --from DIR [--out FILE] [--format table|json]\n"
"\n"
"Fit, per GPU type and stack, the site's factors from the observations in\n"
"DIR (pipette observe --record DIR): the measured over the modelled time of\n"
"computation and of exposed communication, and the allocator's reserve as a\n"
"share of the activations.  Prints each fit with the model's mean error\n"
"before and after it, over the observations and by leave-one-out (each\n"
"observation predicted by a fit of the others), and names the outliers it\n"
"drops (fast or slow alike).\n"
"\n"
"  --from DIR       the observation store\n"
"  --out FILE       write the calibration file (atomically); plan, estimate\n"
"                   and the plugin (calibration=FILE) read it with\n"
"                   --calibration FILE\n"
"  --format F       table (default) or json\n";

/* One line for the observations left out as repeats of one job (names:
 * one per line, the first SKIP_LINES_MAX of calib.c). */
static void say_repeats(const char *dir, const char *names, int n)
{
	const char *p = names, *nl;

	fprintf(stderr, "pipette: %s: %d observation%s repeat%s the plan and log of an earlier "
		"one and %s left out: ", dir, n, n == 1 ? "" : "s", n == 1 ? "s" : "",
		n == 1 ? "is" : "are");
	for (; p && (nl = strchr(p, '\n')); p = nl + 1)
		fprintf(stderr, "%s%.*s", p == names ? "" : ", ", (int)(nl - p), p);
	fprintf(stderr, "%s\n", n > 20 ? ", ..." : "");
}

int cli_obs_load(const char *opt, const char *dir, struct pipette_observation **obs, int *n)
{
	struct pipette_err err;
	struct pipette_progress tell;
	struct cli_progress progress;
	char *skipped = NULL;
	int nskip = 0, rc;

	cli_progress_start(&progress, "pipette", &tell);
	rc = pipette_obs_load_dir_progress(dir, obs, n, &skipped, &nskip, &tell, &err);
	cli_progress_end(&progress);
	if (rc)
		return cli_error("%s: %s", opt, err.msg);
	if (nskip) {
		fprintf(stderr, "pipette: warning: %s: %d file(s) left out, not observations "
			"of this version:\n%s", dir, nskip, skipped ? skipped : "");
		if (nskip > 20)
			fprintf(stderr, "  (and %d more)\n", nskip - 20);
	}
	free(skipped);
	if (pipette_obs_dedupe(*obs, n, &skipped, &nskip)) {
		pipette_obs_free(*obs, *n);
		*obs = NULL;
		return cli_error("%s: out of memory", opt);
	}
	if (nskip)
		say_repeats(dir, skipped, nskip);
	free(skipped);
	if (!*n) {
		pipette_obs_free(*obs, *n);
		*obs = NULL;
		return cli_error("%s: %s: no observation (*.json) in it", opt, dir);
	}
	return 0;
}

/* Outliers the table names, at most (the JSON names every one). */
#define OUTLIERS_NAMED 20

struct group {
	int *idx, n;
	int failed;
	struct pipette_calib_fit fit;
};

static int same_kind(const struct pipette_observation *a, const struct pipette_observation *b)
{
	return !strcmp(a->gpu, b->gpu) && !strcmp(a->stack, b->stack);
}

/* Observations grouped by GPU type and stack, in the order of their first
 * file (the store's name order). */
static int group_obs(const struct pipette_observation *obs, int n, struct group **out, int *ng)
{
	struct group *g = calloc((size_t)n + 1, sizeof(*g));
	int *seen = calloc((size_t)n + 1, sizeof(int)), i, j;

	*out = g;
	*ng = 0;
	if (!g || !seen) {
		free(seen);
		return -1;
	}
	for (i = 0; i < n; i++) {
		int size = 0;

		if (seen[i])
			continue;
		for (j = i; j < n; j++)
			size += !seen[j] && same_kind(&obs[i], &obs[j]);
		if (!(g[*ng].idx = malloc(sizeof(int) * (size_t)size))) {
			free(seen);
			return -1;
		}
		for (j = i; j < n; j++)
			if (!seen[j] && same_kind(&obs[i], &obs[j])) {
				seen[j] = 1;
				g[*ng].idx[g[*ng].n++] = j;
			}
		(*ng)++;
	}
	free(seen);
	return 0;
}

static struct json_object *fit_json(const struct pipette_observation *obs, const struct group *g)
{
	const struct pipette_calib_fit *f = &g->fit;
	const struct pipette_observation *o = &obs[g->idx[0]];
	struct json_object *e = json_object_new_object(), *out = json_object_new_array();
	int i;

	json_object_object_add(e, "gpu", json_object_new_string(o->gpu));
	json_object_object_add(e, "stack", json_object_new_string(o->stack));
	json_object_object_add(e, "compute_factor", json_object_new_double(f->f.compute));
	json_object_object_add(e, "comm_factor", json_object_new_double(f->f.comm));
	json_object_object_add(e, "comm_fitted", json_object_new_boolean(f->comm_fitted));
	json_object_object_add(e, "reserve_fraction", f->f.reserve_fraction >= 0
			       ? json_object_new_double(f->f.reserve_fraction) : NULL);
	json_object_object_add(e, "observations", json_object_new_int(f->n));
	json_object_object_add(e, "kept", json_object_new_int(f->kept));
	json_object_object_add(e, "error_before", json_object_new_double(f->err_before));
	json_object_object_add(e, "error_after", json_object_new_double(f->err_after));
	json_object_object_add(e, "loo_error_before", f->loo ? json_object_new_double(f->loo_before)
							     : NULL);
	json_object_object_add(e, "loo_error_after", f->loo ? json_object_new_double(f->loo_after)
							    : NULL);
	for (i = 0; i < f->n; i++)
		if (f->outlier[i])
			json_object_array_add(out, json_object_new_string(obs[g->idx[i]].name));
	json_object_object_add(e, "outliers", out);
	return e;
}

static void fit_table(const struct pipette_observation *obs, const struct group *g)
{
	const struct pipette_calib_fit *f = &g->fit;
	const struct pipette_observation *o = &obs[g->idx[0]];
	int i, k = 0;

	printf("%-16s %-10s %4d  compute %.4f  comm %.4f%s  reserve ", o->gpu, o->stack, f->n,
	       f->f.compute, f->f.comm, f->comm_fitted ? "" : " (not fitted)");
	if (f->f.reserve_fraction >= 0)
		printf("%.1f%% (%d stages)\n", 100 * f->f.reserve_fraction, f->reserve_obs);
	else
		printf("- (no memory reported)\n");
	printf("    mean error %.2f%% -> %.2f%%", 100 * f->err_before, 100 * f->err_after);
	if (f->loo)
		printf("; leave-one-out %.2f%% -> %.2f%%%s\n", 100 * f->loo_before,
		       100 * f->loo_after, f->loo_after < f->loo_before ? ""
		       : " (the fit does not generalise: not written)");
	else
		printf("; leave-one-out %s\n", f->n < 3 ? "needs 3 observations: not written"
		       : "not run for so many observations");
	for (i = 0; i < f->n; i++)
		if (f->outlier[i] && k++ < OUTLIERS_NAMED)
			printf("%s%s", k > 1 ? ", " : "    outliers dropped from the fit (measured "
			       "time far from the others', fast or slow): ", obs[g->idx[i]].name);
	if (k > OUTLIERS_NAMED)
		printf(" and %d more (--format json names all)", k - OUTLIERS_NAMED);
	if (k)
		printf(" (%d of %d kept)\n", f->kept, f->n);
}

struct cal_opts {
	const char *from, *out;
	enum pipette_format fmt;
};

static int parse(int argc, char **argv, struct cal_opts *o)
{
	static const char *const known[] = { "--from", "--out", "--format", NULL };
	struct cli_seen seen = { .n = 0 };
	char name[32];
	const char *v;
	int i, rc;

	memset(o, 0, sizeof(*o));
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return -1;
		}
		if ((rc = cli_option(argc, argv, &i, "calibrate", known, &seen, name, sizeof(name),
				     &v)))
			return rc;
		if (!strcmp(name, "--from"))
			o->from = v;
		else if (!strcmp(name, "--out"))
			o->out = v;
		else if (cli_parse_format(v, 3, &o->fmt))
			return cli_error("--format: '%.32s': expected table or json", v);
	}
	if (!o->from)
		return cli_error("calibrate: --from DIR is required (see pipette calibrate --help)");
	return 0;
}

/* A fit is written only when it generalises: leave-one-out (three
 * observations at least) lower than the model as it is; past the number
 * leave-one-out is run for, three parameters cannot overfit and the fit's
 * own error decides. */
static int generalises(const struct pipette_calib_fit *f)
{
	if (f->loo)
		return f->loo_after < f->loo_before;
	return f->n >= 3 && f->err_after < f->err_before;
}

/* Fit every group.  A group whose fit fails is reported and left out; the
 * others are still fitted.  *all gets every fit, *site those written. */
static int fit_all(const struct pipette_observation *obs, struct group *g, int ng,
		   struct json_object *all, struct json_object *site)
{
	struct pipette_err err;
	int i, bad = 0;

	for (i = 0; i < ng; i++) {
		struct json_object *e;

		if (pipette_calib_fit(obs, g[i].idx, g[i].n, &g[i].fit, &err)) {
			fprintf(stderr, "pipette: calibrate: %s %s (%d observations from %s on): %s\n",
				obs[g[i].idx[0]].gpu, obs[g[i].idx[0]].stack, g[i].n,
				obs[g[i].idx[0]].name, err.msg);
			g[i].failed = 1;
			bad++;
			continue;
		}
		e = fit_json(obs, &g[i]);
		json_object_object_add(e, "written", json_object_new_boolean(generalises(&g[i].fit)));
		json_object_array_add(all, e);
		if (generalises(&g[i].fit))
			json_object_array_add(site, json_object_get(e));
	}
	return bad == ng ? PIPETTE_EXIT_USAGE : 0;
}

/* The calibration file --out names, as it is (another tool's keys, the
 * probe's "gemm", kept), or a new one; "site" replaced. */
static struct json_object *out_doc(const char *path, struct json_object *site)
{
	struct pipette_err err;
	struct json_object *doc = NULL;

	if (access(path, F_OK) == 0 &&
	    !(doc = pipette_json_read(path, "--out", 16 << 20, 16, NULL, &err))) {
		cli_error("%s", err.msg);
		return NULL;
	}
	if (!doc)
		doc = json_object_new_object();
	json_object_object_add(doc, "schema", json_object_new_string("pipette-calibration/1"));
	json_object_object_add(doc, "site", json_object_get(site));
	return doc;
}

int cmd_calibrate(int argc, char **argv)
{
	struct cal_opts o;
	struct pipette_observation *obs = NULL;
	struct pipette_err err;
	struct group *g = NULL;
	struct json_object *root = json_object_new_object(), *site = json_object_new_array();
	struct json_object *all = json_object_new_array(), *doc = NULL;
	int n = 0, ng = 0, i, rc = parse(argc, argv, &o);

	json_object_object_add(root, "schema", json_object_new_string("pipette-calibration/1"));
	json_object_object_add(root, "fits", all);
	if (rc)
		goto out;
	if ((rc = cli_obs_load("--from", o.from, &obs, &n)))
		goto out;
	if (group_obs(obs, n, &g, &ng)) {
		rc = cli_error("calibrate: out of memory");
		goto out;
	}
	if ((rc = fit_all(obs, g, ng, all, site)))
		goto out;
	if (o.fmt == PIPETTE_FMT_JSON)
		printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY));
	else
		for (i = 0; i < ng; i++)
			if (!g[i].failed)
				fit_table(obs, &g[i]);
	if (o.out && (!(doc = out_doc(o.out, site)) ||
		      pipette_json_write_versioned(o.out, "--out", doc, 0644,
						   PIPETTE_CALIBRATION_JSON_MAX, &err)))
		rc = doc ? cli_error("%s", err.msg) : PIPETTE_EXIT_USAGE;
out:
	for (i = 0; i < ng; i++) {
		free(g[i].idx);
		pipette_calib_fit_free(&g[i].fit);
	}
	free(g);
	pipette_obs_free(obs, n);
	json_object_put(site);
	json_object_put(doc);
	json_object_put(root);
	return rc < 0 ? PIPETTE_EXIT_OK : rc;
}
