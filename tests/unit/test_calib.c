/* Unit tests: the site's calibration (calib.h): the fit, the store, the
 * calibration file and what a plan does with it. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "learn/calib.h"
#include "plan/plan.h"
#include "estimate/timing.h"
#include "check_run.h"

/* Observations of known factors: compute and exposed communication in
 * different mixes, the measured time exactly a C + b E. */
static void synth(struct pipette_observation *o, int n, double a, double b, double comm_share)
{
	int i;

	memset(o, 0, sizeof(*o) * (size_t)n);
	for (i = 0; i < n; i++) {
		double c = 1.0 + 0.7 * i, e = c * comm_share * (1 + (i % 3));

		snprintf(o[i].name, sizeof(o[i].name), "obs%d.json", i);
		strcpy(o[i].gpu, "H100-SXM-80GB");
		strcpy(o[i].stack, "megatron");
		o[i].compute_s = c;
		o[i].comm_s = e;
		o[i].model_s = c + e;
		o[i].measured_s = a * c + b * e;
	}
}

static int idx[64] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
		      20 };

START_TEST(test_fit_recovers_factors)
{
	struct pipette_observation o[8];
	struct pipette_calib_fit f;
	struct pipette_err err;
	int i;

	synth(o, 8, 1.15, 1.7, 0.1);
	ck_assert_int_eq(pipette_calib_fit(o, idx, 8, &f, &err), 0);
	ck_assert(f.comm_fitted);
	ck_assert_double_eq_tol(f.f.compute, 1.15, 1e-9);
	ck_assert_double_eq_tol(f.f.comm, 1.7, 1e-9);
	ck_assert(f.err_before > 0.1);
	ck_assert(f.err_after < 1e-9);
	ck_assert(f.loo && f.loo_after < f.loo_before);
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(f.outlier[i], 0);
	ck_assert(f.f.reserve_fraction < 0);	/* no memory reported */
	pipette_calib_fit_free(&f);
}
END_TEST

/* One job measured 40% slow (a node throttled): named, weighed down, and
 * the factors stay within 1% of the truth. */
START_TEST(test_fit_outlier_named)
{
	struct pipette_observation o[10];
	struct pipette_calib_fit f;
	struct pipette_err err;
	int i;

	synth(o, 10, 0.9, 1.3, 0.15);
	o[4].measured_s *= 1.4;
	ck_assert_int_eq(pipette_calib_fit(o, idx, 10, &f, &err), 0);
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(f.outlier[i], i == 4);
	ck_assert_double_eq_tol(f.f.compute, 0.9, 0.009);
	ck_assert_double_eq_tol(f.f.comm, 1.3, 0.013);
	pipette_calib_fit_free(&f);
}
END_TEST

/* Fast and slow outliers alike (issue 28, item 3): six good jobs at
 * compute 1.18 and comm 1.45, plus fakes copied from them with the
 * measured time scaled.  Two fakes at 0.3x pulled the compute factor to
 * 0.51 (their small measured time gave them the leverage of a relative
 * error), six at 1000x were absorbed; now both are dropped, named, and
 * the factors are the good jobs' own. */
static void fit_with_fakes(int nfake, double scale)
{
	struct pipette_observation o[16];
	struct pipette_calib_fit f;
	struct pipette_err err;
	int i, all[16];

	synth(o, 6, 1.18, 1.45, 0.1);
	for (i = 0; i < nfake; i++) {
		o[6 + i] = o[i % 6];
		snprintf(o[6 + i].name, sizeof(o[6 + i].name), "fake%d.json", i);
		o[6 + i].measured_s *= scale;
	}
	for (i = 0; i < 6 + nfake; i++)
		all[i] = i;
	ck_assert_msg(pipette_calib_fit(o, all, 6 + nfake, &f, &err) == 0, "%d at %gx: %s", nfake,
		      scale, err.msg);
	ck_assert_msg(fabs(f.f.compute - 1.18) < 1e-6 && fabs(f.f.comm - 1.45) < 1e-6,
		      "%d fakes at %gx: compute %.4f comm %.4f", nfake, scale, f.f.compute,
		      f.f.comm);
	for (i = 0; i < 6 + nfake; i++)
		ck_assert_msg(f.outlier[i] == (i >= 6), "%d fakes at %gx: observation %d %s", nfake,
			      scale, i, f.outlier[i] ? "dropped" : "kept");
	ck_assert_int_eq(f.kept, 6);
	ck_assert(f.err_after < 1e-9);
	pipette_calib_fit_free(&f);
}

START_TEST(test_fit_outliers_both_ways)
{
	fit_with_fakes(2, 0.3);
	fit_with_fakes(2, 1 / 0.3);
	fit_with_fakes(2, 0.7);
	fit_with_fakes(2, 1 / 0.7);
	fit_with_fakes(6, 1000);
	fit_with_fakes(6, 1e-3);
}
END_TEST

/* The six jobs of tests/integration/test_observe.sh (their plans' model
 * time, computation and exposed communication, in s), measured at
 * compute 1.18 and comm 1.45, and two fakes of the first two 3.3x slow:
 * a Huber fit whose sigma is re-estimated at every step let the fakes
 * widen it until they carried the fit (compute 1.86, comm -0.24). */
START_TEST(test_fit_outliers_real_mixes)
{
	static const double jobs[6][3] = {
		{ 0.3501, 0.3501, 0.0 }, { 0.4496, 0.4200, 0.0296 }, { 0.4708, 0.3869, 0.0839 },
		{ 0.5195, 0.3531, 0.1664 }, { 0.4217, 0.3504, 0.0713 }, { 0.6353, 0.4279, 0.2073 },
	};
	static const double scale[] = { 3.3, 0.3 };
	struct pipette_observation o[8];
	struct pipette_calib_fit f;
	struct pipette_err err;
	size_t k;
	int i;

	for (k = 0; k < 2; k++) {
		memset(o, 0, sizeof(o));
		for (i = 0; i < 8; i++) {
			const double *j = jobs[i % 6];

			snprintf(o[i].name, sizeof(o[i].name), "obs%d.json", i);
			strcpy(o[i].gpu, "H100-SXM-80GB");
			strcpy(o[i].stack, "megatron");
			o[i].model_s = j[0];
			o[i].compute_s = j[1];
			o[i].comm_s = j[2];
			o[i].measured_s = j[0] + 0.18 * j[1] + 0.45 * j[2];
			if (i >= 6)
				o[i].measured_s *= scale[k];
		}
		ck_assert_msg(pipette_calib_fit(o, idx, 8, &f, &err) == 0, "%gx: %s", scale[k],
			      err.msg);
		ck_assert_double_eq_tol(f.f.compute, 1.18, 1e-6);
		ck_assert_double_eq_tol(f.f.comm, 1.45, 1e-6);
		for (i = 0; i < 8; i++)
			ck_assert_int_eq(f.outlier[i], i >= 6);
		pipette_calib_fit_free(&f);
	}
}
END_TEST

/* The same on noisy jobs: 12 good ones within +-2% of compute 1.1 and comm
 * 1.3 (a fixed pattern), two fakes 2x fast and two 2x slow: the four are
 * dropped, no good one is, and the factors are those of the good jobs
 * alone (the fakes weigh nothing). */
START_TEST(test_fit_outliers_noisy)
{
	static const double noise[12] = { 0.3, -0.9, 0.6, 1.0, -0.2, -0.7, 0.8, -1.0, 0.1, 0.5,
					  -0.4, -0.6 };
	struct pipette_observation o[16];
	struct pipette_calib_fit f, g;
	struct pipette_err err;
	int i, all[16];

	synth(o, 16, 1.1, 1.3, 0.1);
	for (i = 0; i < 16; i++) {
		all[i] = i;
		o[i].measured_s *= 1 + 0.02 * (i < 12 ? noise[i] : 0);
	}
	o[12].measured_s *= 0.5;
	o[13].measured_s *= 0.5;
	o[14].measured_s *= 2;
	o[15].measured_s *= 2;
	ck_assert_msg(pipette_calib_fit(o, all, 12, &g, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(g.kept, 12);
	ck_assert_msg(pipette_calib_fit(o, all, 16, &f, &err) == 0, "%s", err.msg);
	for (i = 0; i < 16; i++)
		ck_assert_msg(f.outlier[i] == (i >= 12), "observation %d %s", i,
			      f.outlier[i] ? "dropped" : "kept");
	/* to the fit's convergence (its sigma settles to 1e-6 of itself) */
	ck_assert_double_eq_tol(f.f.compute, g.f.compute, 1e-7);
	ck_assert_double_eq_tol(f.f.comm, g.f.comm, 1e-7);
	ck_assert_double_eq_tol(f.f.compute, 1.1, 0.03);
	pipette_calib_fit_free(&f);
	pipette_calib_fit_free(&g);
}
END_TEST

/* No observation exposes communication: its factor is not identifiable
 * and stays 1; the compute factor is still fitted. */
START_TEST(test_fit_comm_not_identifiable)
{
	struct pipette_observation o[5];
	struct pipette_calib_fit f;
	struct pipette_err err;

	synth(o, 5, 1.08, 2.0, 0.0);
	ck_assert_int_eq(pipette_calib_fit(o, idx, 5, &f, &err), 0);
	ck_assert(!f.comm_fitted);
	ck_assert_double_eq(f.f.comm, 1.0);
	ck_assert_double_eq_tol(f.f.compute, 1.08, 1e-9);
	pipette_calib_fit_free(&f);
}
END_TEST

/* The reserve: the largest share a stage's reserved peak implies, over
 * the observations that are not outliers; stages whose implied reserve
 * is within the stack's 2 GiB floor (or below nothing) say nothing. */
START_TEST(test_fit_reserve)
{
	struct pipette_observation o[4];
	struct pipette_obs_stage st[4][2];
	struct pipette_calib_fit f;
	struct pipette_err err;
	int i;

	synth(o, 4, 1.0, 1.0, 0.1);
	for (i = 0; i < 4; i++) {
		st[i][0] = (struct pipette_obs_stage){ 40e9, 10e9, 40e9 + 10e9 * 0.1 * (i + 1), 0 };
		st[i][1] = (struct pipette_obs_stage){ 40e9, 10e9, 30e9, 0 };	/* below: 0 */
		o[i].stages = st[i];
		o[i].nstages = 2;
	}
	ck_assert_int_eq(pipette_calib_fit(o, idx, 4, &f, &err), 0);
	ck_assert_double_eq_tol(f.f.reserve_fraction, 0.4, 1e-9);
	ck_assert_int_eq(f.reserve_obs, 2);	/* 3 and 4 GB above the base; not 1, 2 GB */
	pipette_calib_fit_free(&f);
}
END_TEST

/* One job with a little communication cannot set the communication
 * factor: 20 compute-only jobs and one whose 3% of communication ran 8%
 * slow leave it at 1, not fitted. */
START_TEST(test_fit_comm_one_job)
{
	struct pipette_observation o[21];
	struct pipette_calib_fit f;
	struct pipette_err err;
	int i;

	synth(o, 21, 1.05, 1.0, 0.0);
	o[20].comm_s = 0.03 * o[20].compute_s;
	o[20].model_s = o[20].compute_s + o[20].comm_s;
	o[20].measured_s = 1.05 * o[20].compute_s * 1.08 + o[20].comm_s;
	for (i = 0; i < 21; i++)
		idx[i] = i;
	ck_assert_int_eq(pipette_calib_fit(o, idx, 21, &f, &err), 0);
	ck_assert(!f.comm_fitted);
	ck_assert_double_eq(f.f.comm, 1.0);
	ck_assert_double_eq_tol(f.f.compute, 1.05, 0.01);
	pipette_calib_fit_free(&f);
}
END_TEST

START_TEST(test_fit_implausible)
{
	struct pipette_observation o[4];
	struct pipette_calib_fit f;
	struct pipette_err err;

	synth(o, 4, 9.0, 1.0, 0.1);
	ck_assert_int_eq(pipette_calib_fit(o, idx, 4, &f, &err), -1);
	ck_assert_msg(strstr(err.msg, "outside"), "%s", err.msg);
	pipette_calib_fit_free(&f);
	ck_assert_int_eq(pipette_calib_fit(o, idx, 0, &f, &err), -1);
}
END_TEST

static char tmpdir[64];

static void write_text(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void make_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/test_calib.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

#define OBS(meas) "{\"schema\": \"pipette-obs/1\", \"gpu\": \"H100-SXM-80GB\", " \
	"\"stack\": \"megatron\", \"predicted\": {\"iteration_s\": 2.0, \"compute_s\": 1.5, " \
	"\"comm_s\": 0.5}, \"measured\": {\"iteration_s\": " meas "}, \"stages\": " \
	"[{\"base_bytes\": 1e10, \"transient_bytes\": 1e10, \"measured_reserved_bytes\": 0}]}"

/* An observation of the job of plan P and log L (hex digits repeated). */
#define JOB_OBS(meas, p, l) "{\"schema\": \"pipette-obs/1\", \"gpu\": \"H100-SXM-80GB\", " \
	"\"stack\": \"megatron\", \"plan_hash\": \"" p p p p "\", \"log_sha256\": \"" \
	l l l l l l l l l l l l l l l l "\", \"predicted\": {\"iteration_s\": 2.0, " \
	"\"compute_s\": 1.5, \"comm_s\": 0.5}, \"measured\": {\"iteration_s\": " meas "}, " \
	"\"stages\": []}"

/* The store's unit is a job (issue 28, item 2): of the observations of
 * one plan and log, the first in name order counts; the others are left
 * out and named.  Observations without a log digest (earlier versions)
 * all count; a malformed digest is a malformed observation. */
START_TEST(test_store_one_per_job)
{
	struct pipette_observation *o;
	struct pipette_err err;
	char *skipped, *dups;
	int n, nskip, ndup;

	make_tmpdir();
	write_text("a.json", JOB_OBS("2.2", "0123", "abcd"));
	write_text("b.json", JOB_OBS("3.3", "0123", "abcd"));	/* the same job */
	write_text("c.json", JOB_OBS("2.4", "0123", "abce"));	/* another log */
	write_text("d.json", JOB_OBS("2.5", "4567", "abcd"));	/* another plan */
	write_text("e.json", JOB_OBS("3.3", "0123", "abcd"));	/* the same job again */
	write_text("f.json", OBS("2.6"));
	write_text("g.json", OBS("2.6"));
	write_text("h.json", JOB_OBS("2.6", "0123", "abc"));	/* 48 digits */
	ck_assert_int_eq(pipette_obs_load_dir(tmpdir, &o, &n, &skipped, &nskip, &err), 0);
	ck_assert_int_eq(n, 7);
	ck_assert_int_eq(nskip, 1);
	ck_assert_msg(strstr(skipped, "h.json: log_sha256: expected 64 hex digits"), "%s",
		      skipped);
	free(skipped);
	ck_assert_int_eq(pipette_obs_dedupe(o, &n, &dups, &ndup), 0);
	ck_assert_int_eq(ndup, 2);
	ck_assert_str_eq(dups, "b.json\ne.json\n");
	ck_assert_int_eq(n, 5);
	ck_assert_str_eq(o[0].name, "a.json");
	ck_assert_str_eq(o[1].name, "c.json");
	ck_assert_str_eq(o[2].name, "d.json");
	ck_assert_str_eq(o[3].name, "f.json");
	ck_assert_str_eq(o[4].name, "g.json");
	ck_assert_double_eq(o[0].measured_s, 2.2);
	free(dups);
	pipette_obs_free(o, n);
	rm_tmpdir();
}
END_TEST

START_TEST(test_store)
{
	struct pipette_observation *o;
	struct pipette_err err;
	char path[256], *skipped;
	int n, nskip;

	make_tmpdir();
	write_text("b.json", OBS("2.5"));
	write_text("a.json", OBS("2.2"));
	write_text("notes.txt", "not an observation");
	write_text(".tmp-x.json", "{ half");	/* a writer's temporary file */
	ck_assert_msg(pipette_obs_load_dir(tmpdir, &o, &n, &skipped, &nskip, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(nskip, 0);
	ck_assert_ptr_null(skipped);
	ck_assert_str_eq(o[0].name, "a.json");	/* name order */
	ck_assert_double_eq(o[0].measured_s, 2.2);
	ck_assert_double_eq(o[1].compute_s, 1.5);
	pipette_obs_free(o, n);

	/* a file that does not parse is left out and named; the rest load */
	write_text("c.json", OBS("\"fast\""));
	write_text("d.json", OBS("-1"));
	snprintf(path, sizeof(path), "%s/e.json", tmpdir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);	/* never blocks on it */
	write_text("f.json", "{\"schema\": \"pipette-obs/2\"}");
	ck_assert_int_eq(pipette_obs_load_dir(tmpdir, &o, &n, &skipped, &nskip, &err), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(nskip, 4);
	ck_assert_msg(strstr(skipped, "c.json: measured: iteration_s: expected a number, got a "
			     "string"), "%s", skipped);
	ck_assert_msg(strstr(skipped, "d.json: measured: iteration_s: -1 is outside"), "%s",
		      skipped);
	ck_assert_msg(strstr(skipped, "e.json: is a FIFO"), "%s", skipped);
	ck_assert_msg(strstr(skipped, "f.json: schema"), "%s", skipped);
	free(skipped);
	pipette_obs_free(o, n);
	unlink(path);
	ck_assert_int_eq(pipette_obs_load_dir("/nonexistent-dir", &o, &n, &skipped, &nskip, &err),
			 -1);
	ck_assert_msg(strstr(err.msg, "/nonexistent-dir"), "%s", err.msg);
	rm_tmpdir();
}
END_TEST

START_TEST(test_site_file)
{
	struct pipette_site_factors f;
	struct pipette_err err;
	char path[256];

	make_tmpdir();
	snprintf(path, sizeof(path), "%s/cal.json", tmpdir);
	write_text("cal.json", "{\"site\": [{\"gpu\": \"A100-SXM-80GB\", \"stack\": \"megatron\", "
		   "\"compute_factor\": 1.3, \"comm_factor\": 1.1}, {\"gpu\": \"H100-SXM-80GB\", "
		   "\"stack\": \"megatron\", \"compute_factor\": 1.2, \"comm_factor\": 0.9, "
		   "\"reserve_fraction\": 0.3, \"observations\": 12}]}");
	ck_assert_int_eq(pipette_site_factors_load(path, "H100-SXM-80GB", "megatron", &f, &err), 0);
	ck_assert_double_eq(f.compute, 1.2);
	ck_assert_double_eq(f.comm, 0.9);
	ck_assert_double_eq(f.reserve_fraction, 0.3);
	ck_assert_int_eq(f.observations, 12);
	/* a site list without an entry for nemo */
	ck_assert_int_eq(pipette_site_factors_load(path, "H100-SXM-80GB", "nemo", &f, &err), 2);
	ck_assert_double_eq(f.compute, 1.0);
	ck_assert(f.reserve_fraction < 0);
	write_text("cal.json", "{\"site\": [{\"gpu\": \"H100-SXM-80GB\", \"stack\": \"megatron\", "
		   "\"compute_factor\": 12, \"comm_factor\": 1}]}");
	ck_assert_int_eq(pipette_site_factors_load(path, "H100-SXM-80GB", "megatron", &f, &err),
			 -1);
	ck_assert_msg(strstr(err.msg, "site[0]: compute_factor: 12 is outside"), "%s", err.msg);
	write_text("cal.json", "{\"site\": [{\"gpu\": \"H100-SXM-80GB\", \"stack\": \"megatron\", "
		   "\"compute_factor\": 1.2, \"comm_factor\": 0.9}, {\"gpu\": \"h100-sxm-80gb\", "
		   "\"stack\": \"megatron\", \"compute_factor\": 1.1, \"comm_factor\": 1}]}");
	ck_assert_int_eq(pipette_site_factors_load(path, "A100-SXM-80GB", "megatron", &f, &err),
			 -1);	/* every entry is checked: a duplicate is an error for any GPU */
	ck_assert_msg(strstr(err.msg, "site[1]: h100-sxm-80gb / megatron is also site[0]"), "%s",
		      err.msg);
	write_text("cal.json", "{\"site\": {}}");
	ck_assert_int_eq(pipette_site_factors_load(path, "H100-SXM-80GB", "megatron", &f, &err),
			 -1);
	ck_assert_msg(strstr(err.msg, "site: expected an array, got an object"), "%s", err.msg);
	write_text("cal.json", "{\"gemm\": {}}");
	ck_assert_int_eq(pipette_site_factors_load(path, "H100-SXM-80GB", "megatron", &f, &err), 1);
	rm_tmpdir();
}
END_TEST

/* A plan under the site's factors: T = T_model + (a - 1) C + (b - 1) E,
 * the reserve share replaced, the floor kept, and another plan hash. */
START_TEST(test_plan_applies_factors)
{
	static const char *const names[] = { "node1", "node2", "node3", "node4" };
	struct pipette_cluster_spec cs = { 4, names, 8, NULL };
	struct pipette_request req;
	struct pipette_plan *p0 = NULL, *p1 = NULL;
	struct pipette_err err;
	char path[256], h0[32];
	const struct pipette_time *t;

	make_tmpdir();
	snprintf(path, sizeof(path), "%s/cal.json", tmpdir);
	write_text("cal.json", "{\"site\": [{\"gpu\": \"H100-SXM-80GB\", \"stack\": \"megatron\", "
		   "\"compute_factor\": 1.25, \"comm_factor\": 1.8, \"reserve_fraction\": 0.5}]}");
	pipette_request_init(&req);
	snprintf(req.model, sizeof(req.model), "llama3-8b");
	snprintf(req.gpu, sizeof(req.gpu), "H100");
	req.global_batch = 64;
	req.seq_len = 4096;
	req.pins.tp = 2;
	req.pins.pp = 2;
	req.pins.dp = 8;
	req.pins.micro_batch = 1;
	ck_assert_msg(pipette_plan_compute(&req, &cs, &p0, &err) == 0, "%s", err.msg);
	snprintf(h0, sizeof(h0), "%s", pipette_plan_hash(p0));
	snprintf(req.calibration, sizeof(req.calibration), "%s", path);
	ck_assert_msg(pipette_plan_compute(&req, &cs, &p1, &err) == 0, "%s", err.msg);
	t = pipette_plan_time(p1);
	ck_assert(t->model_comm_s > 0);
	ck_assert_double_eq_tol(t->iteration_s, t->model_s + 0.25 * t->model_compute_s +
				0.8 * t->model_comm_s, 1e-9 * t->iteration_s);
	ck_assert_double_eq_tol(t->model_s, pipette_plan_time(p0)->iteration_s,
				1e-9 * t->model_s);
	ck_assert_str_ne(h0, pipette_plan_hash(p1));
	pipette_plan_destroy(p0);
	pipette_plan_destroy(p1);
	rm_tmpdir();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("calib");
	TCase *tc = tcase_create("calib");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_fit_recovers_factors);
	tcase_add_test(tc, test_fit_outlier_named);
	tcase_add_test(tc, test_fit_outliers_both_ways);
	tcase_add_test(tc, test_fit_outliers_noisy);
	tcase_add_test(tc, test_fit_outliers_real_mixes);
	tcase_add_test(tc, test_fit_comm_not_identifiable);
	tcase_add_test(tc, test_fit_reserve);
	tcase_add_test(tc, test_fit_comm_one_job);
	tcase_add_test(tc, test_fit_implausible);
	tcase_add_test(tc, test_store);
	tcase_add_test(tc, test_store_one_per_job);
	tcase_add_test(tc, test_site_file);
	tcase_add_test(tc, test_plan_applies_factors);
	suite_add_tcase(s, tc);
	return check_run(s);
}
