/* pipette: the site's calibration; see calib.h. */
#define _GNU_SOURCE	/* O_DIRECTORY, O_NOFOLLOW */
#include "calib.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"

/* A calibration file or one observation is a few kilobytes. */
#define CALIB_JSON_MAX (16 << 20)
#define CALIB_JSON_DEPTH 16
/* Factors outside this range are not a calibration but a wrong plan or a
 * wrong log: the model's published errors are within tens of percent
 * (README, "Accuracy"), so a factor of 5 means the job ran something else. */
#define FACTOR_MIN 0.2
#define FACTOR_MAX 5.0
/* The reserve the caching allocator keeps, as a share of the transient
 * bytes: stack.c's 25% comes from two NeMo logs; a fit above 400% means
 * the rank held something the model does not count at all. */
#define RESERVE_MAX 4.0
/* Huber's M-estimator (Huber, "Robust Estimation of a Location
 * Parameter", Ann. Math. Statist. 35(1), 1964): weights fall off beyond
 * HUBER_K robust sigmas; 1.345 gives 95% efficiency at the normal.  The
 * robust sigma is 1.4826 x the median absolute deviation (consistent at
 * the normal), never below SIGMA_FLOOR: a step time repeats to about
 * 0.1% from one job to the next (the p10-p90 spread of the steady steps
 * of tests/data/trainlogs is of that order), so residuals below it are
 * noise, not outliers. */
#define HUBER_K 1.345
#define MAD_SCALE 1.4826
#define SIGMA_FLOOR 1e-3
#define OUTLIER_SIGMAS 3.0
#define IRLS_ROUNDS 50
/* Communication must be at least this share of an observation's step for
 * its factor to be fitted: below, every observation is compute and the
 * factor is not identifiable (it stays 1). */
#define COMM_SHARE_MIN 0.02

void pipette_site_factors_init(struct pipette_site_factors *f)
{
	f->compute = 1.0;
	f->comm = 1.0;
	f->reserve_fraction = -1.0;
	f->observations = 0;
}

/* obj[key] as a finite number; -1 with the field named when it is not. */
static int get_num(struct json_object *obj, const char *key, const char *src, double *out,
		   struct pipette_err *err)
{
	struct json_object *v;

	if (!json_object_object_get_ex(obj, key, &v))
		return pipette_fail(err, "%s: %s: missing", src, key);
	if (json_object_get_type(v) != json_type_double && json_object_get_type(v) != json_type_int)
		return pipette_fail(err, "%s: %s: expected a number, got %s", src, key,
				    pipette_json_type_name(v));
	*out = json_object_get_double(v);
	if (!isfinite(*out))
		return pipette_fail(err, "%s: %s: not a finite number", src, key);
	return 0;
}

static int get_str(struct json_object *obj, const char *key, const char *src, char *out,
		   size_t len, struct pipette_err *err)
{
	struct json_object *v;
	const char *s;

	if (!json_object_object_get_ex(obj, key, &v))
		return pipette_fail(err, "%s: %s: missing", src, key);
	if (json_object_get_type(v) != json_type_string)
		return pipette_fail(err, "%s: %s: expected a string, got %s", src, key,
				    pipette_json_type_name(v));
	s = json_object_get_string(v);
	if (strlen(s) >= len || !*s)
		return pipette_fail(err, "%s: %s: '%.40s' is empty or longer than %zu bytes",
				    src, key, s, len - 1);
	strcpy(out, s);
	return 0;
}

static int in_range(double v, double lo, double hi, const char *src, const char *key,
		    struct pipette_err *err)
{
	if (v < lo || v > hi)
		return pipette_fail(err, "%s: %s: %g is outside [%g, %g]", src, key, v, lo, hi);
	return 0;
}

/* One entry of "site": its factors when it names gpu and stack (1 when it
 * names others). */
static int site_entry(struct json_object *e, const char *src, const char *gpu,
		      const char *stack, struct pipette_site_factors *out, struct pipette_err *err)
{
	char g[64], s[32];
	struct json_object *v;
	double obs = 0;

	if (json_object_get_type(e) != json_type_object)
		return pipette_fail(err, "%s: expected an object, got %s", src,
				    pipette_json_type_name(e));
	if (get_str(e, "gpu", src, g, sizeof(g), err) || get_str(e, "stack", src, s, sizeof(s), err) ||
	    get_num(e, "compute_factor", src, &out->compute, err) ||
	    get_num(e, "comm_factor", src, &out->comm, err) ||
	    in_range(out->compute, FACTOR_MIN, FACTOR_MAX, src, "compute_factor", err) ||
	    in_range(out->comm, FACTOR_MIN, FACTOR_MAX, src, "comm_factor", err))
		return -1;
	out->reserve_fraction = -1;
	if (json_object_object_get_ex(e, "reserve_fraction", &v) &&
	    json_object_get_type(v) != json_type_null &&
	    (get_num(e, "reserve_fraction", src, &out->reserve_fraction, err) ||
	     in_range(out->reserve_fraction, 0, RESERVE_MAX, src, "reserve_fraction", err)))
		return -1;
	if (json_object_object_get_ex(e, "observations", &v) &&
	    (get_num(e, "observations", src, &obs, err) ||
	     in_range(obs, 0, 1e9, src, "observations", err)))
		return -1;
	out->observations = (long)obs;
	return strcasecmp(g, gpu) || strcmp(s, stack) ? 1 : 0;
}

int pipette_site_factors_load(const char *path, const char *gpu, const char *stack,
			      struct pipette_site_factors *out, struct pipette_err *err)
{
	struct json_object *root, *site;
	size_t i, n;
	int rv = 1;

	pipette_site_factors_init(out);
	if (!(root = pipette_json_read(path, "calibration", CALIB_JSON_MAX, CALIB_JSON_DEPTH,
				       NULL, err)))
		return -1;
	if (!json_object_object_get_ex(root, "site", &site)) {
		json_object_put(root);
		return 1;
	}
	if (json_object_get_type(site) != json_type_array) {
		pipette_fail(err, "%s: site: expected an array, got %s", path,
			     pipette_json_type_name(site));
		json_object_put(root);
		return -1;
	}
	n = json_object_array_length(site);
	for (i = 0; i < n && rv == 1; i++) {
		char src[PIPETTE_ERR_MAX / 2];
		struct pipette_site_factors f;

		snprintf(src, sizeof(src), "%s: site[%zu]", path, i);
		pipette_site_factors_init(&f);
		rv = site_entry(json_object_array_get_idx(site, i), src, gpu, stack, &f, err);
		if (rv == 0)
			*out = f;
	}
	json_object_put(root);
	if (rv < 0)
		pipette_site_factors_init(out);
	return rv;
}

/* ---- the store -------------------------------------------------------- */

static int stage_of(struct json_object *e, const char *src, struct pipette_obs_stage *st,
		    struct pipette_err *err)
{
	struct json_object *v;

	if (json_object_get_type(e) != json_type_object)
		return pipette_fail(err, "%s: expected an object, got %s", src,
				    pipette_json_type_name(e));
	if (get_num(e, "base_bytes", src, &st->base_bytes, err) ||
	    get_num(e, "transient_bytes", src, &st->transient_bytes, err) ||
	    get_num(e, "measured_reserved_bytes", src, &st->measured_bytes, err) ||
	    in_range(st->base_bytes, 0, 1e15, src, "base_bytes", err) ||
	    in_range(st->transient_bytes, 0, 1e15, src, "transient_bytes", err) ||
	    in_range(st->measured_bytes, 0, 1e15, src, "measured_reserved_bytes", err))
		return -1;
	st->predicted_bytes = 0;
	if (json_object_object_get_ex(e, "predicted_bytes", &v) &&
	    (get_num(e, "predicted_bytes", src, &st->predicted_bytes, err) ||
	     in_range(st->predicted_bytes, 0, 1e15, src, "predicted_bytes", err)))
		return -1;
	return 0;
}

static int obs_parse(struct json_object *root, const char *src, struct pipette_observation *o,
		     struct pipette_err *err)
{
	struct json_object *pred, *meas, *stages, *v;
	char sub[PIPETTE_ERR_MAX];
	size_t i;

	if (!json_object_object_get_ex(root, "schema", &v) ||
	    json_object_get_type(v) != json_type_string ||
	    strcmp(json_object_get_string(v), "pipette-obs/1"))
		return pipette_fail(err, "%s: schema: expected \"pipette-obs/1\"", src);
	if (get_str(root, "gpu", src, o->gpu, sizeof(o->gpu), err) ||
	    get_str(root, "stack", src, o->stack, sizeof(o->stack), err))
		return -1;
	if (!json_object_object_get_ex(root, "predicted", &pred) ||
	    json_object_get_type(pred) != json_type_object)
		return pipette_fail(err, "%s: predicted: expected an object", src);
	if (!json_object_object_get_ex(root, "measured", &meas) ||
	    json_object_get_type(meas) != json_type_object)
		return pipette_fail(err, "%s: measured: expected an object", src);
	snprintf(sub, sizeof(sub), "%.300s: predicted", src);
	if (get_num(pred, "iteration_s", sub, &o->model_s, err) ||
	    get_num(pred, "compute_s", sub, &o->compute_s, err) ||
	    get_num(pred, "comm_s", sub, &o->comm_s, err) ||
	    in_range(o->model_s, 1e-6, 1e6, sub, "iteration_s", err) ||
	    in_range(o->compute_s, 0, o->model_s * 1.01, sub, "compute_s", err) ||
	    in_range(o->comm_s, 0, o->model_s * 1.01, sub, "comm_s", err))
		return -1;
	snprintf(sub, sizeof(sub), "%.300s: measured", src);
	if (get_num(meas, "iteration_s", sub, &o->measured_s, err) ||
	    in_range(o->measured_s, 1e-6, 1e6, sub, "iteration_s", err))
		return -1;
	if (!json_object_object_get_ex(root, "stages", &stages) ||
	    json_object_get_type(stages) != json_type_array)
		return pipette_fail(err, "%s: stages: expected an array", src);
	if (json_object_array_length(stages) > PIPETTE_OBS_MAX_STAGES)
		return pipette_fail(err, "%s: stages: more than %d", src, PIPETTE_OBS_MAX_STAGES);
	o->nstages = (int)json_object_array_length(stages);
	o->stages = calloc((size_t)o->nstages + 1, sizeof(*o->stages));
	if (!o->stages)
		return pipette_fail(err, "out of memory");
	for (i = 0; i < (size_t)o->nstages; i++) {
		snprintf(sub, sizeof(sub), "%.300s: stages[%zu]", src, i);
		if (stage_of(json_object_array_get_idx(stages, i), sub, &o->stages[i], err))
			return -1;
	}
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_obs_name(const char *s)
{
	size_t n = strlen(s);

	return s[0] != '.' && n > 5 && n < 256 && !strcmp(s + n - 5, ".json");
}

/* The names of the store's observations, sorted. */
static int list_dir(const char *dir, char ***names, int *n, struct pipette_err *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *e;
	int cap = 0;

	*names = NULL;
	*n = 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return pipette_fail(err, "%s: not a directory that can be read", dir);
	}
	while ((e = readdir(d))) {
		if (!is_obs_name(e->d_name))
			continue;
		if (*n >= PIPETTE_OBS_MAX_FILES) {
			closedir(d);
			return pipette_fail(err, "%s: more than %d observations", dir,
					    PIPETTE_OBS_MAX_FILES);
		}
		if (*n == cap) {
			char **g = realloc(*names, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 64));

			if (!g) {
				closedir(d);
				return pipette_fail(err, "out of memory");
			}
			*names = g;
		}
		if (!((*names)[*n] = strdup(e->d_name))) {
			closedir(d);
			return pipette_fail(err, "out of memory");
		}
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(*names, (size_t)*n, sizeof(char *), cmp_name);
	return 0;
}

int pipette_obs_load_dir(const char *dir, struct pipette_observation **obs, int *n,
			 struct pipette_err *err)
{
	char **names;
	int k, count, rv = 0;

	*obs = NULL;
	*n = 0;
	if (list_dir(dir, &names, &count, err)) {
		for (k = 0; k < count; k++)
			free(names[k]);
		free(names);
		return -1;
	}
	if (count && !(*obs = calloc((size_t)count, sizeof(**obs))))
		rv = pipette_fail(err, "out of memory");
	for (k = 0; k < count && !rv; k++) {
		char path[4096];
		struct json_object *root;

		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, names[k]) >= sizeof(path)) {
			rv = pipette_fail(err, "%.200s: path too long", dir);
			break;
		}
		snprintf((*obs)[k].name, sizeof((*obs)[k].name), "%s", names[k]);
		*n = k + 1;
		if (!(root = pipette_json_read(path, "observation", CALIB_JSON_MAX,
					       CALIB_JSON_DEPTH, NULL, err))) {
			rv = -1;
			break;
		}
		rv = obs_parse(root, path, &(*obs)[k], err);
		json_object_put(root);
	}
	for (k = 0; k < count; k++)
		free(names[k]);
	free(names);
	if (rv) {
		pipette_obs_free(*obs, *n);
		*obs = NULL;
		*n = 0;
	}
	return rv;
}

void pipette_obs_free(struct pipette_observation *obs, int n)
{
	int k;

	for (k = 0; k < n && obs; k++)
		free(obs[k].stages);
	free(obs);
}

/* ---- the fit ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The regression, relative to each measured time: y = (measured - model) /
 * measured against x1 = C / measured and x2 = E / measured, so every job
 * weighs alike whatever its length; y = (a - 1) x1 + (b - 1) x2. */
struct rows {
	double *y, *x1, *x2, *w, *r;
	int n, comm;		/* comm: fit x2 too */
};

/* Weighted least squares over the rows with skip[i] == 0. */
static void wls(const struct rows *d, const int *skip, double *al, double *be)
{
	double s11 = 0, s12 = 0, s22 = 0, t1 = 0, t2 = 0, det;
	int i;

	for (i = 0; i < d->n; i++) {
		if (skip && skip[i])
			continue;
		s11 += d->w[i] * d->x1[i] * d->x1[i];
		s12 += d->w[i] * d->x1[i] * d->x2[i];
		s22 += d->w[i] * d->x2[i] * d->x2[i];
		t1 += d->w[i] * d->x1[i] * d->y[i];
		t2 += d->w[i] * d->x2[i] * d->y[i];
	}
	det = s11 * s22 - s12 * s12;
	if (d->comm && det > 1e-12 * s11 * s22) {
		*al = (t1 * s22 - t2 * s12) / det;
		*be = (t2 * s11 - t1 * s12) / det;
	} else {
		*al = s11 > 0 ? t1 / s11 : 0;
		*be = 0;
	}
}

/* Huber IRLS over the rows not skipped; the final robust sigma in *sigma. */
static void robust(struct rows *d, const int *skip, double *al, double *be, double *sigma)
{
	double *a = malloc(sizeof(double) * (size_t)(d->n + 1));
	int i, k, m;

	*sigma = SIGMA_FLOOR;
	for (i = 0; i < d->n; i++)
		d->w[i] = 1.0;
	wls(d, skip, al, be);	/* least squares, if the rounds cannot run */
	for (k = 0; k < IRLS_ROUNDS && a; k++) {
		wls(d, skip, al, be);
		for (i = m = 0; i < d->n; i++) {
			d->r[i] = d->y[i] - *al * d->x1[i] - *be * d->x2[i];
			if (!skip || !skip[i])
				a[m++] = fabs(d->r[i]);
		}
		*sigma = m ? fmax(SIGMA_FLOOR, MAD_SCALE * median_of(a, m)) : SIGMA_FLOOR;
		for (i = 0; i < d->n; i++)
			d->w[i] = fabs(d->r[i]) <= HUBER_K * *sigma ? 1.0
				  : HUBER_K * *sigma / fabs(d->r[i]);
	}
	free(a);
}

static int rows_alloc(struct rows *d, int n)
{
	d->n = n;
	d->y = calloc((size_t)n * 5 + 5, sizeof(double));
	if (!d->y)
		return -1;
	d->x1 = d->y + n + 1;
	d->x2 = d->x1 + n + 1;
	d->w = d->x2 + n + 1;
	d->r = d->w + n + 1;
	return 0;
}

/* The reserve fraction: the largest one a stage's measured reserved peak
 * implies, over the observations that are not outliers (the plan must
 * hold every job the site ran, not the typical one); < 0 when none
 * reported memory. */
static double fit_reserve(const struct pipette_observation *obs, const int *idx, int n,
			  const int *outlier, int *count)
{
	double best = -1;
	int i, s;

	*count = 0;
	for (i = 0; i < n; i++) {
		const struct pipette_observation *o = &obs[idx[i]];

		if (outlier[i])
			continue;
		for (s = 0; s < o->nstages; s++) {
			const struct pipette_obs_stage *st = &o->stages[s];

			if (st->measured_bytes <= 0 || st->transient_bytes <= 0)
				continue;
			(*count)++;
			best = fmax(best, fmax(0.0, (st->measured_bytes - st->base_bytes) /
						    st->transient_bytes));
		}
	}
	return best;
}

static double rel_err(double pred, double meas)
{
	return fabs(pred - meas) / meas;
}

/* Leave-one-out: each row predicted by a robust fit of the others. */
static double leave_one_out(struct rows *d, int *skip)
{
	double sum = 0, al, be, sigma;
	int i;

	for (i = 0; i < d->n; i++) {
		skip[i] = 1;
		robust(d, skip, &al, &be, &sigma);
		skip[i] = 0;
		sum += fabs(d->y[i] - al * d->x1[i] - be * d->x2[i]);
	}
	return sum / d->n;
}

int pipette_calib_fit(const struct pipette_observation *obs, const int *idx, int n,
		      struct pipette_calib_fit *out, struct pipette_err *err)
{
	struct rows d;
	int *skip, i;
	double al, be, sigma, after = 0;

	memset(out, 0, sizeof(*out));
	pipette_site_factors_init(&out->f);
	if (n < 1)
		return pipette_fail(err, "no observation to fit");
	skip = NULL;
	if (rows_alloc(&d, n) || !(skip = calloc((size_t)n, sizeof(int))) ||
	    !(out->outlier = calloc((size_t)n, sizeof(int)))) {
		free(d.y);
		free(skip);
		return pipette_fail(err, "out of memory");
	}
	d.comm = 0;
	for (i = 0; i < n; i++) {
		const struct pipette_observation *o = &obs[idx[i]];

		d.y[i] = (o->measured_s - o->model_s) / o->measured_s;
		d.x1[i] = o->compute_s / o->measured_s;
		d.x2[i] = o->comm_s / o->measured_s;
		out->err_before += rel_err(o->model_s, o->measured_s) / n;
		d.comm |= o->comm_s >= COMM_SHARE_MIN * o->model_s;
	}
	out->comm_fitted = d.comm;
	robust(&d, NULL, &al, &be, &sigma);
	for (i = 0; i < n; i++) {
		out->outlier[i] = fabs(d.r[i]) > OUTLIER_SIGMAS * sigma;
		after += fabs(d.r[i]) / n;
	}
	out->f.compute = 1.0 + al;
	out->f.comm = 1.0 + be;
	out->f.observations = n;
	out->n = n;
	out->err_after = after;
	out->loo_before = out->err_before;
	if ((out->loo = n >= 3))
		out->loo_after = leave_one_out(&d, skip);
	out->f.reserve_fraction = fit_reserve(obs, idx, n, out->outlier, &out->reserve_obs);
	free(d.y);
	free(skip);
	if (!(out->f.compute >= FACTOR_MIN && out->f.compute <= FACTOR_MAX &&
	      out->f.comm >= FACTOR_MIN && out->f.comm <= FACTOR_MAX))
		return pipette_fail(err, "the fitted factors (compute %.3f, comm %.3f) are outside "
				    "[%g, %g]: the observations do not describe the plans they name",
				    out->f.compute, out->f.comm, FACTOR_MIN, FACTOR_MAX);
	if (out->f.reserve_fraction > RESERVE_MAX)
		return pipette_fail(err, "the reserved peaks imply a reserve of %.0f%% of the "
				    "activations (more than %.0f%%): the ranks held memory the "
				    "model does not count", 100 * out->f.reserve_fraction,
				    100 * RESERVE_MAX);
	return 0;
}

void pipette_calib_fit_free(struct pipette_calib_fit *fit)
{
	free(fit->outlier);
	fit->outlier = NULL;
}
