/* pipette: the site's calibration; see calib.h. */
#define _GNU_SOURCE	/* O_DIRECTORY, O_NOFOLLOW */
#include "learn/calib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inputs/hardware.h"
#include "inputs/json.h"
#include "inputs/stack.h"

/* One observation is a few kilobytes, nested a few levels. */
#define OBS_JSON_MAX (16 << 20)
#define OBS_JSON_DEPTH 16
/* Factors outside this range are not a calibration but a wrong plan or a
 * wrong log: the model's published errors are within tens of percent
 * (README, "Time model": 3.9% mean and 12% worst on the published A100
 * runs), so a factor of 5 means the job ran something else. */
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
 * noise, not outliers.  Residuals are logs of measured over predicted
 * time (below, "The regression"), so an observation 3x fast and one 3x
 * slow are equally far; beyond OUTLIER_SIGMAS robust sigmas it is dropped
 * from the fit and named. */
#define HUBER_K 1.345
#define MAD_SCALE 1.4826
#define SIGMA_FLOOR 1e-3
#define OUTLIER_SIGMAS 3.0
#define IRLS_ROUNDS 50
/* Rounds of fitting, dropping outliers and re-estimating the sigma, at
 * most; they stop once the rows dropped stay the same and the sigma moves
 * by less than SIGMA_SETTLED of itself. */
#define OUTLIER_ROUNDS 20
#define SIGMA_SETTLED 1e-6
/* The start: elemental pairs tried, and rows its score looks at. */
#define START_PAIRS 2000
#define SCORE_ROWS 1000
/* Gauss-Newton steps of each leave-one-out refit from the whole fit's
 * factors: on the stores of tests/unit/test_calib.c the first moves them
 * by up to 0.034, the second by 2e-4, the third by 1e-6 (a fourth would
 * move them 4e-9). */
#define LOO_STEPS 3
/* The communication factor is fitted only from at least COMM_OBS_MIN
 * observations whose exposed communication is at least COMM_SHARE_MIN of
 * their step, and only when their mixes of computation and communication
 * differ (1 - the squared cosine of the two regressors above
 * COLLINEAR_MIN): one job, or jobs of one shape, leave it unidentifiable
 * (on synthetic stores, 20 compute-only jobs and one 3%-communication
 * job 8% slow fitted 4.07 with one such job allowed; two shapes at 10% and
 * 10.2% fitted 0.74 to 3.86 under 1% noise: tests/unit/test_calib.c keeps
 * the first).  Otherwise it stays 1 and the fit says so. */
#define COMM_SHARE_MIN 0.02
#define COMM_OBS_MIN 3
#define COLLINEAR_MIN 1e-2
/* IRLS stops once the coefficients move less than this (relative step
 * times: far below a measurement's spread). */
#define IRLS_TOL 1e-12
/* Leave-one-out refits the store once per observation; above this many it
 * is not run (the fit's own error is still printed): 2000 observations
 * take 0.31 s in `pipette calibrate` (files read and fitted, 2% of them
 * fakes 0.3x fast, this project's 2-core machine), and the cost grows as
 * n^2. */
#define LOO_MAX 2000
/* Skipped files named in a store's report, at most. */
#define SKIP_LINES_MAX 20

void pipette_site_factors_init(struct pipette_site_factors *f)
{
	f->compute = 1.0;
	f->comm = 1.0;
	f->reserve_fraction = -1.0;
	f->observations = 0;
}

static int in_range(double v, double lo, double hi, const char *src, const char *key,
		    struct pipette_err *err)
{
	if (v < lo || v > hi)
		return pipette_fail(err, "%s: %s: %g is outside [%g, %g]", src, key, v, lo, hi);
	return 0;
}

/* One entry of "site": its GPU type, stack and factors, checked. */
static int site_entry(struct json_object *e, const char *src, char g[64], char s[32],
		      struct pipette_site_factors *out, struct pipette_err *err)
{
	struct json_object *v;
	double obs = 0;

	if (json_object_get_type(e) != json_type_object)
		return pipette_fail(err, "%s: expected an object, got %s", src,
				    pipette_json_type_name(e));
	if (pipette_json_string(e, "gpu", src, g, 64, err) || pipette_json_string(e, "stack", src, s, 32, err) ||
	    pipette_json_number(e, "compute_factor", src, &out->compute, err) ||
	    pipette_json_number(e, "comm_factor", src, &out->comm, err) ||
	    in_range(out->compute, FACTOR_MIN, FACTOR_MAX, src, "compute_factor", err) ||
	    in_range(out->comm, FACTOR_MIN, FACTOR_MAX, src, "comm_factor", err))
		return -1;
	out->reserve_fraction = -1;
	if (json_object_object_get_ex(e, "reserve_fraction", &v) &&
	    json_object_get_type(v) != json_type_null &&
	    (pipette_json_number(e, "reserve_fraction", src, &out->reserve_fraction, err) ||
	     in_range(out->reserve_fraction, 0, RESERVE_MAX, src, "reserve_fraction", err)))
		return -1;
	if (json_object_object_get_ex(e, "observations", &v) &&
	    (pipette_json_number(e, "observations", src, &obs, err) ||
	     in_range(obs, 0, 1e9, src, "observations", err)))
		return -1;
	out->observations = (long)obs;
	return 0;
}

/* pipette_site_factors_load on the document already read. */
static int site_factors_doc(struct json_object *root, const char *path, const char *gpu,
			    const char *stack, struct pipette_site_factors *out,
			    struct pipette_err *err)
{
	struct json_object *site;
	size_t i, n;
	int rv;

	pipette_site_factors_init(out);
	if (!json_object_object_get_ex(root, "site", &site))
		return 1;
	if (json_object_get_type(site) != json_type_array)
		return pipette_fail(err, "%s: site: expected an array, got %s", path,
				    pipette_json_type_name(site));
	/* Every entry is checked, not only up to the one asked for: a file
	 * that is wrong for one GPU type is wrong. */
	n = json_object_array_length(site);
	rv = 2;
	for (i = 0; i < n && rv >= 0; i++) {
		char src[PIPETTE_ERR_MAX / 2], g[64], s[32], g2[64], s2[32];
		struct pipette_site_factors f, f2;
		size_t j;

		snprintf(src, sizeof(src), "%.200s: site[%zu]", path, i);
		if (site_entry(json_object_array_get_idx(site, i), src, g, s, &f, err)) {
			rv = -1;
			break;
		}
		for (j = 0; j < i; j++)
			if (!site_entry(json_object_array_get_idx(site, j), src, g2, s2, &f2, NULL) &&
			    !strcasecmp(g, g2) && !strcmp(s, s2)) {
				pipette_fail(err, "%s: %s / %s is also site[%zu]", src, g, s, j);
				rv = -1;
				break;
			}
		if (rv >= 0 && !strcasecmp(g, gpu) && !strcmp(s, stack)) {
			*out = f;
			rv = 0;
		}
	}
	if (rv < 0)
		pipette_site_factors_init(out);
	return rv;
}

/* The calibration file, read once for both of its parts. */
static struct json_object *read_calibration(const char *path, unsigned char *sha256,
					    struct pipette_err *err)
{
	return pipette_json_read(path, "calibration", PIPETTE_CALIBRATION_JSON_MAX,
				 PIPETTE_CALIBRATION_JSON_DEPTH, sha256, err);
}

int pipette_site_factors_load(const char *path, const char *gpu, const char *stack,
			      struct pipette_site_factors *out, struct pipette_err *err)
{
	struct json_object *root = read_calibration(path, NULL, err);
	int rv;

	if (!root) {
		pipette_site_factors_init(out);
		return -1;
	}
	rv = site_factors_doc(root, path, gpu, stack, out, err);
	json_object_put(root);
	return rv;
}

/* Whether a --stack-option list sets key (as "key=" at an item's start). */
static int option_set(const char *options, const char *key)
{
	size_t n = strlen(key);
	const char *p = options;

	while (p && *p) {
		if (!strncmp(p, key, n) && p[n] == '=')
			return 1;
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	return 0;
}

int pipette_calibration_apply(const char *path, const struct pipette_gpu_spec *base,
			      struct pipette_stack *stack, const char *options,
			      struct pipette_gpu_spec *gpu, struct pipette_site_factors *site,
			      int *missing, unsigned char *sha256, struct pipette_err *err)
{
	struct json_object *root;
	int rv;

	*missing = 0;
	pipette_site_factors_init(site);
	if (!(root = read_calibration(path, sha256, err)))
		return -1;
	rv = pipette_gpu_calibrate_doc(base, root, path, gpu, err) ? -1
	     : site_factors_doc(root, path, base->name, stack->name, site, err);
	json_object_put(root);
	if (rv < 0)
		return -1;
	*missing = rv == 2;
	if (rv == 0) {
		gpu->site_compute = site->compute;
		gpu->site_comm = site->comm;
		if (site->reserve_fraction >= 0 && !option_set(options, "reserve"))
			stack->reserve_fraction = site->reserve_fraction;
	}
	return 0;
}

/* ---- the store -------------------------------------------------------- */

static int stage_of(struct json_object *e, const char *src, struct pipette_obs_stage *st,
		    struct pipette_err *err)
{
	struct json_object *v;

	if (json_object_get_type(e) != json_type_object)
		return pipette_fail(err, "%s: expected an object, got %s", src,
				    pipette_json_type_name(e));
	if (pipette_json_number(e, "base_bytes", src, &st->base_bytes, err) ||
	    pipette_json_number(e, "transient_bytes", src, &st->transient_bytes, err) ||
	    pipette_json_number(e, "measured_reserved_bytes", src, &st->measured_bytes, err) ||
	    in_range(st->base_bytes, 0, 1e15, src, "base_bytes", err) ||
	    in_range(st->transient_bytes, 0, 1e15, src, "transient_bytes", err) ||
	    in_range(st->measured_bytes, 0, 1e15, src, "measured_reserved_bytes", err))
		return -1;
	st->predicted_bytes = 0;
	if (json_object_object_get_ex(e, "predicted_bytes", &v) &&
	    (pipette_json_number(e, "predicted_bytes", src, &st->predicted_bytes, err) ||
	     in_range(st->predicted_bytes, 0, 1e15, src, "predicted_bytes", err)))
		return -1;
	return 0;
}

/* Its plan's hash and its log's SHA-256, where it has them: lowercase hex
 * (16 and 64 digits), or the observation is malformed. */
static int job_of(struct json_object *root, const char *src, struct pipette_observation *o,
		  struct pipette_err *err)
{
	static const char hex[] = "0123456789abcdef";

	o->plan_hash[0] = o->log_sha256[0] = '\0';
	if (!json_object_object_get_ex(root, "log_sha256", NULL))
		return 0;
	if (pipette_json_string(root, "log_sha256", src, o->log_sha256, sizeof(o->log_sha256),
				err) ||
	    pipette_json_string(root, "plan_hash", src, o->plan_hash, sizeof(o->plan_hash), err))
		return -1;
	if (strlen(o->log_sha256) != 64 || strspn(o->log_sha256, hex) != 64)
		return pipette_fail(err, "%s: log_sha256: expected 64 hex digits", src);
	if (strlen(o->plan_hash) != 16 || strspn(o->plan_hash, hex) != 16)
		return pipette_fail(err, "%s: plan_hash: expected 16 hex digits", src);
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
	if (pipette_json_string(root, "gpu", src, o->gpu, sizeof(o->gpu), err) ||
	    pipette_json_string(root, "stack", src, o->stack, sizeof(o->stack), err) ||
	    job_of(root, src, o, err))
		return -1;
	/* the model's name, for the report's points: optional, and a long
	 * one (a config.json path) is cut rather than refused */
	o->model[0] = '\0';
	if (json_object_object_get_ex(root, "model", &v) &&
	    json_object_get_type(v) == json_type_string)
		snprintf(o->model, sizeof(o->model), "%s", json_object_get_string(v));
	if (!json_object_object_get_ex(root, "predicted", &pred) ||
	    json_object_get_type(pred) != json_type_object)
		return pipette_fail(err, "%s: predicted: expected an object", src);
	if (!json_object_object_get_ex(root, "measured", &meas) ||
	    json_object_get_type(meas) != json_type_object)
		return pipette_fail(err, "%s: measured: expected an object", src);
	snprintf(sub, sizeof(sub), "%.300s: predicted", src);
	if (pipette_json_number(pred, "iteration_s", sub, &o->model_s, err) ||
	    pipette_json_number(pred, "compute_s", sub, &o->compute_s, err) ||
	    pipette_json_number(pred, "comm_s", sub, &o->comm_s, err) ||
	    in_range(o->model_s, 1e-6, 1e6, sub, "iteration_s", err) ||
	    in_range(o->compute_s, 0, o->model_s * 1.01, sub, "compute_s", err) ||
	    in_range(o->comm_s, 0, o->model_s * 1.01, sub, "comm_s", err))
		return -1;
	snprintf(sub, sizeof(sub), "%.300s: measured", src);
	if (pipette_json_number(meas, "iteration_s", sub, &o->measured_s, err) ||
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
	for (;;) {
		errno = 0;
		if (!(e = readdir(d))) {
			if (errno) {
				closedir(d);
				return pipette_fail(err, "%s: reading the directory: %s", dir,
						    strerror(errno));
			}
			break;
		}
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

/* One file of the store into *o: 0, or -1 with the reason in err. */
static int obs_load(const char *dir, const char *name, struct pipette_observation *o,
		    struct pipette_err *err)
{
	char path[4096];
	struct json_object *root;
	int rv;

	memset(o, 0, sizeof(*o));
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return pipette_fail(err, "%.200s: path too long", dir);
	snprintf(o->name, sizeof(o->name), "%s", name);
	if (!(root = pipette_json_read(path, "observation", OBS_JSON_MAX, OBS_JSON_DEPTH,
				       NULL, err)))
		return -1;
	rv = obs_parse(root, path, o, err);
	json_object_put(root);
	if (rv) {
		free(o->stages);
		o->stages = NULL;
	}
	return rv;
}

/* Add a skipped file's reason to the report (its first lines only). */
static void note_skip(char **skipped, int *nskip, const char *msg)
{
	size_t old = *skipped ? strlen(*skipped) : 0, add = strlen(msg) + 2;
	char *t;

	if (++*nskip > SKIP_LINES_MAX)
		return;
	if (!(t = realloc(*skipped, old + add + 1)))
		return;
	snprintf(t + old, add + 1, "%s\n", msg);
	*skipped = t;
}

int pipette_obs_load_dir(const char *dir, struct pipette_observation **obs, int *n,
			 char **skipped, int *nskip, struct pipette_err *err)
{
	return pipette_obs_load_dir_progress(dir, obs, n, skipped, nskip, NULL, err);
}

int pipette_obs_load_dir_progress(const char *dir, struct pipette_observation **obs, int *n,
				  char **skipped, int *nskip,
				  const struct pipette_progress *progress, struct pipette_err *err)
{
	char **names;
	int k, count, rv = 0;

	*obs = NULL;
	*n = 0;
	*skipped = NULL;
	*nskip = 0;
	if (list_dir(dir, &names, &count, err))
		rv = -1;
	else if (count && !(*obs = calloc((size_t)count, sizeof(**obs))))
		rv = pipette_fail(err, "out of memory");
	for (k = 0; k < count && !rv; k++) {
		struct pipette_err e;

		pipette_progress_report(progress, "reading observations", k, count);
		/* A store shared by every user: a file that does not parse is
		 * left out and named, never the end of the site's fit. */
		if (obs_load(dir, names[k], &(*obs)[*n], &e))
			note_skip(skipped, nskip, e.msg);
		else
			(*n)++;
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

struct job_ref {
	const struct pipette_observation *o;
	int pos;
};

/* By plan and log, then by position (the store's name order). */
static int by_job(const void *a, const void *b)
{
	const struct job_ref *x = a, *y = b;
	int c = strcmp(x->o->plan_hash, y->o->plan_hash);

	if (!c)
		c = strcmp(x->o->log_sha256, y->o->log_sha256);
	return c ? c : x->pos - y->pos;
}

int pipette_obs_dedupe(struct pipette_observation *obs, int *n, char **dups, int *ndup)
{
	struct job_ref *order;
	int *drop, i, k;

	*dups = NULL;
	*ndup = 0;
	if (*n < 2)
		return 0;
	order = malloc(sizeof(*order) * (size_t)*n);
	drop = calloc((size_t)*n, sizeof(int));
	if (!order || !drop) {
		free(order);
		free(drop);
		return -1;
	}
	for (i = 0; i < *n; i++)
		order[i] = (struct job_ref){ &obs[i], i };
	qsort(order, (size_t)*n, sizeof(*order), by_job);
	for (i = 1; i < *n; i++)
		drop[order[i].pos] = order[i].o->log_sha256[0] &&
				     !strcmp(order[i - 1].o->plan_hash, order[i].o->plan_hash) &&
				     !strcmp(order[i - 1].o->log_sha256, order[i].o->log_sha256);
	free(order);
	for (i = k = 0; i < *n; i++) {
		if (drop[i]) {
			note_skip(dups, ndup, obs[i].name);
			free(obs[i].stages);
			continue;
		}
		obs[k++] = obs[i];
	}
	*n = k;
	free(drop);
	return 0;
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

/* The regression in log space: each observation's residual is
 *   r = log(measured / predicted),  predicted = model + (a - 1) C + (b - 1) E,
 * so a job measured 3x fast and one 3x slow are equally far, and every job
 * weighs alike whatever its length.  The fit linearises around the current
 * factors (Gauss-Newton): r ~ da C / predicted + db E / predicted, whose
 * regressors are the shares of the predicted time in [0, 1], so no job
 * gains leverage by its own measured time (the relative error of the
 * measured time, (measured - model) / measured against C / measured, gave
 * a job measured 0.3x fast three times the leverage of a good one, and one
 * 1000x slow none: issue 28). */
struct rows {
	double *m, *mod, *c, *e;	/* measured, model, C and E per row */
	double *y, *x1, *x2, *w, *r, *a, *p;
	int n, comm;		/* comm: fit x2 too */
};

/* Whether the two regressors differ enough over all rows to separate the
 * factors (unweighted; see COLLINEAR_MIN). */
static int identifiable(const struct rows *d)
{
	double s11 = 0, s12 = 0, s22 = 0;
	int i;

	for (i = 0; i < d->n; i++) {
		double x1 = d->c[i] / d->mod[i], x2 = d->e[i] / d->mod[i];

		s11 += x1 * x1;
		s12 += x1 * x2;
		s22 += x2 * x2;
	}
	return s11 > 0 && s22 > 0 && s11 * s22 - s12 * s12 > COLLINEAR_MIN * s11 * s22;
}

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
	if (d->comm && det > COLLINEAR_MIN * s11 * s22) {
		*al = (t1 * s22 - t2 * s12) / det;
		*be = (t2 * s11 - t1 * s12) / det;
	} else {
		*al = s11 > 0 ? t1 / s11 : 0;
		*be = 0;
	}
}

static double predicted(const struct rows *d, int i, double a, double b)
{
	return d->mod[i] + (a - 1) * d->c[i] + (b - 1) * d->e[i];
}

/* Whether every row not skipped has a positive prediction under (a, b). */
static int positive(const struct rows *d, const int *skip, double a, double b)
{
	int i;

	for (i = 0; i < d->n; i++)
		if ((!skip || !skip[i]) && !(predicted(d, i, a, b) > 0))
			return 0;
	return 1;
}

/* Residuals, regressors and predictions at (a, b) for every row (a row
 * whose prediction is not positive gets an infinite residual). */
static void linearise(struct rows *d, double a, double b)
{
	int i;

	for (i = 0; i < d->n; i++) {
		d->p[i] = predicted(d, i, a, b);
		d->r[i] = d->p[i] > 0 ? log(d->m[i] / d->p[i]) : HUGE_VAL;
		d->y[i] = d->r[i];
		d->x1[i] = d->p[i] > 0 ? d->c[i] / d->p[i] : 0;
		d->x2[i] = d->p[i] > 0 ? d->e[i] / d->p[i] : 0;
	}
}

/* The robust sigma of the rows not skipped: MAD_SCALE x their median
 * |residual|, at least SIGMA_FLOOR. */
static double sigma_of(struct rows *d, const int *skip)
{
	int i, m = 0;

	for (i = 0; i < d->n; i++)
		if (!skip || !skip[i])
			d->a[m++] = fabs(d->r[i]);
	return m ? fmax(SIGMA_FLOOR, MAD_SCALE * median_of(d->a, m)) : SIGMA_FLOOR;
}

static void huber_weights(struct rows *d, double sigma)
{
	int i;

	for (i = 0; i < d->n; i++)
		d->w[i] = fabs(d->r[i]) <= HUBER_K * sigma ? 1.0 : HUBER_K * sigma / fabs(d->r[i]);
}

/* One Gauss-Newton step of the weighted fit from (*al, *be), halved while a
 * prediction would not be positive; the step's size, 0 when none was
 * possible.  d must be linearised at (*al, *be). */
static double gn_step(struct rows *d, const int *skip, double *al, double *be)
{
	double da, db, t;

	wls(d, skip, &da, &db);
	if (!d->comm)
		db = 0;
	for (t = 1; t > 1e-9 && !positive(d, skip, *al + t * da, *be + t * db); t /= 2)
		;
	if (t <= 1e-9)
		return 0;
	*al += t * da;
	*be += t * db;
	return fabs(t * da) + fabs(t * db);
}

/* Huber's M-estimate of (a, b) over the rows not skipped, from (*al, *be),
 * with the robust sigma held: Gauss-Newton steps of iteratively
 * reweighted least squares.  (A sigma re-estimated at every step let two
 * fakes 3.3x slow among six jobs widen it until they carried the fit.)
 * d ends linearised at the result. */
static void robust(struct rows *d, const int *skip, double sigma, double *al, double *be)
{
	int k;

	for (k = 0; k < IRLS_ROUNDS; k++) {
		linearise(d, *al, *be);
		huber_weights(d, sigma);
		if (gn_step(d, skip, al, be) < IRLS_TOL)
			break;
	}
	linearise(d, *al, *be);
}

static int rows_alloc(struct rows *d, int n)
{
	double *v = calloc((size_t)n * 11 + 11, sizeof(double));

	d->n = n;
	if (!v)
		return -1;
	d->y = v;
	d->x1 = d->y + n + 1;
	d->x2 = d->x1 + n + 1;
	d->w = d->x2 + n + 1;
	d->r = d->w + n + 1;
	d->a = d->r + n + 1;
	d->p = d->a + n + 1;
	d->m = d->p + n + 1;
	d->mod = d->m + n + 1;
	d->c = d->mod + n + 1;
	d->e = d->c + n + 1;
	return 0;
}

/* Whether factors within [FACTOR_MIN, FACTOR_MAX] can describe row i at
 * all: its measured time within what they predict at their extremes (the
 * communication factor only where it is fitted).  A job outside is no
 * calibration datum, however many there are of it. */
static int admissible(const struct rows *d, int i)
{
	double rest = d->mod[i] - d->c[i] - d->e[i];
	double elo = d->comm ? FACTOR_MIN * d->e[i] : d->e[i];
	double ehi = d->comm ? FACTOR_MAX * d->e[i] : d->e[i];

	if (rest < 0)
		rest = 0;
	return d->m[i] >= rest + FACTOR_MIN * d->c[i] + elo &&
	       d->m[i] <= rest + FACTOR_MAX * d->c[i] + ehi;
}

/* The median |log residual| at (a, b) over the rows not skipped (at most
 * SCORE_ROWS of them, evenly spread), HUGE_VAL where a prediction is not
 * positive: how well a start fits the majority of the rows. */
static double start_score(struct rows *d, const int *skip, int m, double a, double b)
{
	int i, k = 0, seen = 0, stride = m > SCORE_ROWS ? m / SCORE_ROWS : 1;

	for (i = 0; i < d->n; i++) {
		double p;

		if (skip[i] || seen++ % stride)
			continue;
		if (!((p = predicted(d, i, a, b)) > 0))
			return HUGE_VAL;
		d->a[k++] = fabs(log(d->m[i] / p));
	}
	return k ? median_of(d->a, k) : HUGE_VAL;
}

/* The factors that make rows i and j exact (1 when the system is
 * singular or they fall outside the admitted range: not a start). */
static int pair_factors(const struct rows *d, int i, int j, double *a, double *b)
{
	double yi = d->m[i] - (d->mod[i] - d->c[i] - d->e[i]);
	double yj = d->m[j] - (d->mod[j] - d->c[j] - d->e[j]);
	double det = d->c[i] * d->e[j] - d->c[j] * d->e[i];

	if (!(fabs(det) > 1e-9 * (fabs(d->c[i] * d->e[j]) + fabs(d->c[j] * d->e[i]))))
		return 1;
	*a = (yi * d->e[j] - yj * d->e[i]) / det;
	*b = (d->c[i] * yj - d->c[j] * yi) / det;
	return !(*a >= FACTOR_MIN && *a <= FACTOR_MAX && *b >= FACTOR_MIN && *b <= FACTOR_MAX);
}

/* A start that a minority of wrong rows, fast or slow, does not carry: of
 * the common factor exp(median log(measured / model)) and, with the
 * communication factor fitted, the factors of pairs of rows that each fit
 * exactly, the one whose median |log residual| is least (Rousseeuw's least
 * median of squares, "Least Median of Squares Regression", JASA 79(388),
 * 1984, over elemental pairs: every pair when there are at most
 * START_PAIRS, else START_PAIRS of them drawn by a fixed sequence). */
static void start_point(struct rows *d, const int *skip, int m, double *al, double *be)
{
	unsigned long long x = 88172645463325252ull;
	double best, a, b, sc;
	int *id = malloc(sizeof(int) * (size_t)m), i, j, k, all;

	for (i = k = 0; i < d->n; i++)
		if (!skip[i])
			d->a[k++] = log(d->m[i] / d->mod[i]);
	*al = *be = exp(median_of(d->a, m));
	if (!d->comm)
		*be = 1.0;
	best = start_score(d, skip, m, *al, *be);
	if (!d->comm || !id) {
		free(id);
		return;
	}
	for (i = k = 0; i < d->n; i++)
		if (!skip[i])
			id[k++] = i;
	all = (long)m * (m - 1) / 2 <= START_PAIRS;
	for (k = 0; k < (all ? m * m : START_PAIRS); k++) {
		if (all) {
			i = k / m;
			j = k % m;
			if (i >= j)
				continue;
		} else {
			x ^= x << 13;	/* xorshift64 (Marsaglia, J. Stat. Softw. 8(14), 2003) */
			x ^= x >> 7;
			x ^= x << 17;
			i = (int)(x % (unsigned long long)m);
			j = (int)((x >> 32) % (unsigned long long)m);
		}
		if (pair_factors(d, id[i], id[j], &a, &b))
			continue;
		if ((sc = start_score(d, skip, m, a, b)) < best) {
			best = sc;
			*al = a;
			*be = b;
		}
	}
	free(id);
}

/* The fit with outliers dropped: from a start of least median residual
 * (start_point), fit with the robust sigma of the rows kept held, drop
 * every row whose log residual is beyond OUTLIER_SIGMAS robust sigmas of
 * the fit (a median / MAD rule, alike for fast and slow jobs) or that no
 * admitted factors describe, and refit on the rest, until the rows
 * dropped and the sigma settle.  skip[] gets the rows dropped; d ends
 * linearised at the result. */
static void fit_dropping(struct rows *d, int *skip, double *al, double *be)
{
	int i, k, m = 0, changed = 1;

	for (i = 0; i < d->n; i++)
		m += !(skip[i] = !admissible(d, i));
	*al = *be = 1.0;
	if (!m)
		return;
	start_point(d, skip, m, al, be);
	for (k = 0; k < OUTLIER_ROUNDS; k++) {
		double sigma, after;

		linearise(d, *al, *be);
		sigma = sigma_of(d, skip);
		robust(d, skip, sigma, al, be);
		after = sigma_of(d, skip);
		for (i = changed = 0; i < d->n; i++) {
			int out = !admissible(d, i) || !(fabs(d->r[i]) <= OUTLIER_SIGMAS * after);

			changed |= out != skip[i];
			skip[i] = out;
		}
		if (!changed && fabs(after - sigma) <= SIGMA_SETTLED * sigma)
			break;
	}
	linearise(d, *al, *be);
}

/* The reserve fraction: the largest one a stage's measured reserved peak
 * implies, over the observations that are not outliers (the plan must
 * hold every job the site ran, not the typical one); < 0 when none
 * reported memory.  A stage whose implied reserve is within the stack's
 * floor says nothing about the share (the floor holds it whatever the
 * share) and is left out. */
static double fit_reserve(const struct pipette_observation *obs, const int *idx, int n,
			  const int *outlier, int *count)
{
	double best = -1;
	int i, s;

	*count = 0;
	for (i = 0; i < n; i++) {
		const struct pipette_observation *o = &obs[idx[i]];

		struct pipette_stack sk;
		double floor_b;

		if (outlier[i])
			continue;
		floor_b = pipette_stack_lookup(o->stack, &sk, NULL) ? 0 : sk.reserve_floor_bytes;
		for (s = 0; s < o->nstages; s++) {
			const struct pipette_obs_stage *st = &o->stages[s];
			double implied = st->measured_bytes - st->base_bytes;

			if (st->measured_bytes <= 0 || st->transient_bytes <= 0 || implied <= floor_b)
				continue;
			(*count)++;
			best = fmax(best, implied / st->transient_bytes);
		}
	}
	return best;
}

static double rel_err(double pred, double meas)
{
	return fabs(pred - meas) / meas;
}

/* Leave-one-out over the rows kept: each predicted by the fit of the other
 * rows kept, refitted from the whole fit's factors with its Huber weights
 * held (LOO_STEPS Gauss-Newton steps; what one row moves is small, and
 * holding the weights keeps the cost n^2).  skip is restored. */
static double leave_one_out(struct rows *d, int *skip, double al0, double be0)
{
	double sum = 0, al, be;
	int i, k, n = 0;

	linearise(d, al0, be0);
	huber_weights(d, sigma_of(d, skip));
	for (i = 0; i < d->n; i++) {
		if (skip[i])
			continue;
		skip[i] = 1;
		al = al0;
		be = be0;
		for (k = 0; k < LOO_STEPS; k++) {
			linearise(d, al, be);
			if (gn_step(d, skip, &al, &be) < IRLS_TOL)
				break;
		}
		skip[i] = 0;
		sum += rel_err(predicted(d, i, al, be), d->m[i]);
		n++;
	}
	return n ? sum / n : 0;
}

/* The model's and the fit's mean relative error over the rows kept. */
static void errors(const struct rows *d, const int *skip, double al, double be,
		   struct pipette_calib_fit *out)
{
	int i;

	out->kept = 0;
	out->err_before = out->err_after = 0;
	for (i = 0; i < d->n; i++) {
		if (skip[i])
			continue;
		out->kept++;
		out->err_before += rel_err(d->mod[i], d->m[i]);
		out->err_after += rel_err(predicted(d, i, al, be), d->m[i]);
	}
	if (out->kept) {
		out->err_before /= out->kept;
		out->err_after /= out->kept;
	}
}

int pipette_calib_fit(const struct pipette_observation *obs, const int *idx, int n,
		      struct pipette_calib_fit *out, struct pipette_err *err)
{
	struct rows d;
	double al, be;
	int i;

	memset(out, 0, sizeof(*out));
	pipette_site_factors_init(&out->f);
	if (n < 1)
		return pipette_fail(err, "no observation to fit");
	if (rows_alloc(&d, n) || !(out->outlier = calloc((size_t)n, sizeof(int)))) {
		free(d.y);
		return pipette_fail(err, "out of memory");
	}
	d.comm = 0;
	for (i = 0; i < n; i++) {
		const struct pipette_observation *o = &obs[idx[i]];

		d.m[i] = o->measured_s;
		d.mod[i] = o->model_s;
		d.c[i] = o->compute_s;
		d.e[i] = o->comm_s;
		d.comm += o->comm_s >= COMM_SHARE_MIN * o->model_s;
	}
	d.comm = d.comm >= COMM_OBS_MIN && identifiable(&d);
	out->comm_fitted = d.comm;
	fit_dropping(&d, out->outlier, &al, &be);
	out->f.compute = al;
	out->f.comm = be;
	out->n = n;
	errors(&d, out->outlier, al, be, out);
	out->f.observations = out->kept;
	out->loo_before = out->err_before;
	if ((out->loo = out->kept >= 3 && out->kept <= LOO_MAX))
		out->loo_after = leave_one_out(&d, out->outlier, al, be);
	out->f.reserve_fraction = fit_reserve(obs, idx, n, out->outlier, &out->reserve_obs);
	free(d.y);
	if (!out->kept)
		return pipette_fail(err, "all %d observations are outside what factors in "
				    "[%g, %g] predict: the observations do not describe the plans "
				    "they name", n, FACTOR_MIN, FACTOR_MAX);
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
