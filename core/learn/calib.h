/* pipette: the site's calibration, fitted from what its own jobs measured.
 *
 * Every job a plan was made for can report how long its steps took and how
 * much memory its ranks reserved (`pipette observe`).  An observation is
 * one JSON file in a site store (schema pipette-obs/1, below); `pipette
 * calibrate` fits, per GPU type and stack, three figures from them and
 * writes them into the calibration file that --calibration (and the
 * plugin's calibration= key) reads:
 *
 *   compute  the measured over the modelled time of everything the model
 *            counts as computation (the passes, the pipeline bubble they
 *            leave, the optimizer step);
 *   comm     the same for the communication the model leaves exposed;
 *   reserve  the allocator's reserve as a share of the activations and
 *            temporaries (pipette_stack.reserve_fraction).
 *
 * The time model stays the one of timing.c; the site's factors correct its
 * result linearly, T = T_model + (compute - 1) C + (comm - 1) E, with C and
 * E the terms above, which is exactly the form they are fitted in. */
#ifndef PIPETTE_CALIB_H
#define PIPETTE_CALIB_H

#include "inputs/error.h"
#include "inputs/progress.h"

/* The factors of one GPU type and stack; 1, 1 and < 0 (the stack's own
 * reserve) when the site has none. */
struct pipette_site_factors {
	double compute, comm;
	double reserve_fraction;
	long observations;
};

void pipette_site_factors_init(struct pipette_site_factors *f);

/* The entry of `gpu` (canonical name) and `stack` in a calibration file's
 * "site" list: 0 found, 1 the file has no "site" list, 2 it has one
 * without an entry for them, -1 on error (the file, the entry and the
 * field named; every entry is checked, and two for one GPU type and stack
 * are an error). */
int pipette_site_factors_load(const char *path, const char *gpu, const char *stack,
			      struct pipette_site_factors *out, struct pipette_err *err);

/* --calibration FILE for a plan or an estimate on GPU `base` under
 * `stack`: *gpu becomes base with the probe's figures ("gemm", when the
 * file has them) and the site's factors for this GPU type and stack; the
 * site's reserve share replaces the stack's unless options (the user's
 * --stack-option list) set "reserve" itself, and never the stack's floor.
 * *site gets what was applied (1, 1, -1 when nothing); *missing is set
 * when the file has a "site" list without an entry for this GPU and stack
 * (a typo in a GPU name would otherwise pass silently).  sha256, when
 * not NULL, gets the digest of the bytes read (srun pins the file by it). */
struct pipette_gpu_spec;
struct pipette_stack;
int pipette_calibration_apply(const char *path, const struct pipette_gpu_spec *base,
			      struct pipette_stack *stack, const char *options,
			      struct pipette_gpu_spec *gpu, struct pipette_site_factors *site,
			      int *missing, unsigned char *sha256, struct pipette_err *err);

/* One stage of an observed plan: what the model predicted it holds. */
#define PIPETTE_OBS_MAX_STAGES 512
struct pipette_obs_stage {
	double base_bytes;	/* everything but the allocator's reserve */
	double transient_bytes;	/* activations and temporaries */
	double measured_bytes;	/* highest reserved peak a rank of it reported, 0 none */
	double predicted_bytes;	/* the plan's total for the stage, 0 when not recorded */
};

/* One observation, as pipette_obs_load_dir reads it. */
struct pipette_observation {
	char name[256];		/* its file name in the store */
	char gpu[64], stack[32];
	char model[64];		/* the model's name, cut to fit ("" when none) */
	/* Which job it is of: the plan's hash and the log's SHA-256 (hex;
	 * "" in observations of earlier versions, which have none). */
	char plan_hash[32], log_sha256[2 * 32 + 1];
	double measured_s;	/* steady-state step time (median) */
	double model_s;		/* the model's step time, without site factors */
	double compute_s;	/* C: passes, bubble and optimizer, without site factors */
	double comm_s;		/* E: exposed communication, without site factors */
	int nstages;
	struct pipette_obs_stage *stages;
};

/* Every *.json file of `dir` (at most PIPETTE_OBS_MAX_FILES, in name
 * order, so the result does not depend on the directory's order).  A file
 * that does not parse is left out: *nskip counts them and *skipped (NULL
 * or malloc'd, free it) names the first ones with the field at fault.
 * -1 only when the directory itself cannot be read. */
#define PIPETTE_OBS_MAX_FILES 100000
int pipette_obs_load_dir(const char *dir, struct pipette_observation **obs, int *n,
			 char **skipped, int *nskip, struct pipette_err *err);
/* The same, telling `progress` (NULL: nobody) each file it reads. */
int pipette_obs_load_dir_progress(const char *dir, struct pipette_observation **obs, int *n,
				  char **skipped, int *nskip,
				  const struct pipette_progress *progress, struct pipette_err *err);
void pipette_obs_free(struct pipette_observation *obs, int n);
/* The store's unit is a job: of the observations of one plan and log (the
 * same plan_hash and log_sha256), keep the first in name order and leave
 * the others out (freed; *n shrinks, the order is kept).  *ndup counts
 * them and *dups (NULL or malloc'd, free it) names the first ones. */
int pipette_obs_dedupe(struct pipette_observation *obs, int *n, char **dups, int *ndup);

/* The fit of one GPU type and stack. */
struct pipette_calib_fit {
	struct pipette_site_factors f;
	int comm_fitted;	/* 0: no observation exposed enough communication */
	int n;			/* observations */
	int kept;		/* of them not outliers: what the factors are fitted on */
	/* n flags: dropped from the fit, its log residual beyond
	 * OUTLIER_SIGMAS robust sigmas (fast and slow alike), or no factors
	 * in the admitted range describe it */
	int *outlier;
	double err_before;	/* mean |relative error| of the model as it is (kept) */
	double err_after;	/* ... of the fitted factors, on the same observations */
	double loo_before;	/* leave-one-out: the model as it is (= err_before) */
	double loo_after;	/* leave-one-out: each observation by a fit without it */
	int loo;		/* 1 when leave-one-out was possible (kept >= 3) */
	int reserve_obs;	/* stages with a measured reserved peak */
};

/* Fit the observations obs[idx[0..n-1]] (one GPU type and stack). */
int pipette_calib_fit(const struct pipette_observation *obs, const int *idx, int n,
		      struct pipette_calib_fit *out, struct pipette_err *err);
void pipette_calib_fit_free(struct pipette_calib_fit *fit);

#endif
