/* pipette trial: what cmd_trial.c (options, candidates, report) and
 * trial_run.c (one trial as an srun step, watched through its log) share. */
#ifndef PIPETTE_CLI_TRIAL_H
#define PIPETTE_CLI_TRIAL_H

#include <limits.h>
#include <sys/types.h>

#include "inputs/stack.h"
#include "plan/plan.h"

/* How a trial ended. */
enum trial_status {
	TRIAL_PENDING,		/* not run (dry run, or the budget ran out first) */
	TRIAL_MEASURED,		/* its steps were measured (all, or as many as its budget allowed) */
	TRIAL_STOPPED,		/* stopped early: it could not win */
	TRIAL_OOM,		/* out of GPU memory */
	TRIAL_CRASHED,		/* exited non-zero, not out of memory */
	TRIAL_HUNG,		/* no steady step within its share of the budget */
	TRIAL_REFUSED		/* the step never started (the plugin refused the plan) */
};

struct trial_cand {
	int rank;			/* its place in the plan's ranking (0 = the model's first) */
	struct pipette_plan *plan;	/* pinned to that configuration, on the job's nodes */
	char config[160];		/* the configuration in words */
	char file[4096 + 64], log[4096 + 64];	/* its plan file and the step's log */
	enum trial_status status;
	double measured_s, p10_s, p90_s;
	long steps;			/* steady steps measured */
	double wall_s;			/* the step's wall time */
	int exit_status;		/* the step's, -1 when it was stopped */
	char note[512];			/* why it stopped, failed or was refused */
};

/* What one trial needs to know besides its candidate. */
struct trial_ctx {
	char *const *cmd;		/* the user's command (after --) */
	int ncmd;
	const char *nodelist;		/* the job's nodes, as Slurm writes them */
	int nnodes, gpus_per_node;
	int plugin;			/* 1: --pipette-plan-file; 0: the plan's environment */
	const char *model;		/* --pipette-model for the plugin */
	const char *bandwidth;		/* --pipette-bandwidth ("" none) */
	const char *mem_fraction;	/* --pipette-mem-fraction ("" none) */
	enum pipette_stack_id stack;
	const char *stack_name;
	long warmup, steps, stop_after;
	double noise;
	double best_s;			/* the fastest measured so far (0: none) */
	double deadline;		/* this trial's end, monotonic seconds */
};

/* Monotonic seconds. */
double trial_now(void);
/* Run candidate c as an srun step and watch its log until it has measured
 * its steps, cannot win, fails or reaches the deadline; c->status and the
 * figures say how it went.  -1 only when the step could not be started
 * at all (fork, the log file). */
int trial_run(const struct trial_ctx *x, struct trial_cand *c);
/* The srun command line of candidate c, for the dry run and the report;
 * argv is malloc'd (free it with trial_argv_free). */
char **trial_argv(const struct trial_ctx *x, const struct trial_cand *c, int *argc);
void trial_argv_free(char **argv, int argc);
/* Run /proc/self/exe with args (NULL-terminated), its stdout into out_path
 * (NULL: inherited) and its stderr into err_buf[len] (NULL: inherited):
 * its exit status, or -1. */
int trial_self(char *const *args, const char *out_path, char *err_buf, size_t len);

#endif
