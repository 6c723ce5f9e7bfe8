/* spank_pipette: the plugin's internal interfaces.
 *
 * Two layers, as LLNL's use-env plugin reaches the environment through a
 * table of functions so that its core is tested without Slurm
 * (grondo/slurm-spank-plugins use-env/use-env.h:56-60 @c918caa9):
 *  - SPANK-free parts, unit-tested with Check: the plugstack arguments
 *    (args.c), option and input-variable parsing (parse.c), building the
 *    core request (request.c) and applying a plan to an environment through
 *    a table of functions (apply.c);
 *  - SPANK-bound parts: the dispatcher (spank_pipette.c), the option table
 *    (options.c), the submitting side (submit.c), the slurmstepd side
 *    (remote.c) and the spank-backed environment table (env.c).
 * Nothing here is exported from the .so (pipette.lds). */
#ifndef PIPETTE_PLUGIN_H
#define PIPETTE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "limits.h"
#include "plan.h"

/* Longest option value or input variable accepted (a path, a pin list). */
#define PIPETTE_VALUE_MAX (PIPETTE_PATH_MAX - 1)
/* ---- site configuration: plugstack.conf arguments (args.c) ------------- */
struct pipette_site {
	char bandwidth[PIPETTE_PATH_MAX];	/* site cache ("" = nominal links) */
	char gpu[64];				/* default GPU type ("" = core's) */
	double mem_fraction;			/* 0 = the core's default */
	long master_port;			/* first port of the range */
	long port_range;			/* ports in the range */
	char models[PIPETTE_PATH_MAX];		/* site model configs ("" = none) */
	long budget;				/* search budget (0 = core's) */
	double max_age_days;	/* warn about cache figures older (0 = never) */
	enum pipette_attention attention;	/* the site's attention kernel */
	int attention_given;			/* 0: the stack's */
	char stack[32];				/* the site's stack ("" = megatron) */
	char stack_options[256];		/* overrides of its facts */
	int default_on;		/* PIPETTE_MODEL alone turns pipette on */
	int fallback_block;	/* a failed plan starts the step in Slurm's order */
	/* The planner child's limits (child.c). */
	long plan_memory_mib;
	long plan_cpu_s;
	long plan_timeout_s;
	/* Benchmarks only: plan for this hostlist instead of the step's nodes
	 * (tests/bench/plugin_launch.sh); "" in production. */
	char emulate_nodes[PIPETTE_PATH_MAX];
	/* Tests only (tests/integration/test_plugin_consistency.sh): node 0
	 * renames this file over the bandwidth cache after it has planned, and
	 * the other nodes wait for that before they plan; "" in production. */
	char test_cache_swap[PIPETTE_PATH_MAX];
};

void pipette_site_init(struct pipette_site *s);
/* Parse "key=value" arguments over the defaults; an unknown key, a bad
 * value or a control character is an error naming the argument. */
int pipette_site_parse(struct pipette_site *s, int ac, char **av,
		       struct pipette_err *err);
/* "on/off" style booleans: 1/true/yes/on and 0/false/no/off. */
int pipette_parse_bool(const char *s, int *out);

/* ---- the job's request: options and PIPETTE_* inputs (parse.c) --------- */
enum pipette_opt_id {
	PIPETTE_OPT_MODEL,
	PIPETTE_OPT_GLOBAL_BATCH,
	PIPETTE_OPT_SEQ_LEN,
	PIPETTE_OPT_FIX,
	PIPETTE_OPT_SCHEDULE,
	PIPETTE_OPT_MEM_FRACTION,
	PIPETTE_OPT_MAPPING,
	PIPETTE_OPT_BANDWIDTH,
	PIPETTE_OPT_EXPLAIN,
	PIPETTE_OPT_DRY_RUN,
	PIPETTE_OPT_STACK,
	PIPETTE_OPT_COUNT
};

/* What the user asked for.  Unset values: "" / 0 / -1. */
struct pipette_opts {
	char model[PIPETTE_PATH_MAX];	/* "none" turns an inherited request off */
	long global_batch;
	long seq_len;
	struct pipette_pins pins;
	int schedule;			/* enum pipette_schedule_kind or -1 */
	unsigned schedule_set;		/* a list of schedules (config.h), 0 = none */
	double mem_fraction;
	int mapping;			/* enum pipette_mapping_mode or -1 */
	char bandwidth[PIPETTE_PATH_MAX];
	int explain;			/* -1 unset, 0, 1 */
	int dry_run;
	char stack[32];			/* "" = the site's */
	unsigned set;			/* bit (1u << id): given as an option */
};

/* Option names without "--" and input variable names, by id. */
const char *pipette_opt_name(enum pipette_opt_id id);
const char *pipette_opt_envvar(enum pipette_opt_id id);
/* 1 if the option takes a value (all but explain and dry-run). */
int pipette_opt_has_arg(enum pipette_opt_id id);

void pipette_opts_init(struct pipette_opts *o);
/* Apply one option (arg is NULL for flags).  Later values replace earlier
 * ones: Slurm gives the inherited (environment) value first and the command
 * line last, and the remote side repeats the same value. */
int pipette_opts_set(struct pipette_opts *o, enum pipette_opt_id id,
		     const char *arg, struct pipette_err *err);
/* "tp=8,pp=4,mb=1,schedule=zb-h1,recompute=selective,sp=1,do=1" */
int pipette_parse_fix(const char *s, struct pipette_pins *pins,
		      struct pipette_err *err);
/* Reject NULL, control characters and values longer than max bytes. */
int pipette_value_check(const char *what, const char *s, size_t max,
			struct pipette_err *err);

/* The environment seen through a table of functions: spank-backed in the
 * plugin (env.c), a plain array in the unit tests. */
struct pipette_env_ops {
	/* 0 and the value in buf; 1 if unset; -1 (message in err) on error,
	 * e.g. a value longer than len - 1. */
	int (*get)(void *ctx, const char *name, char *buf, size_t len,
		   struct pipette_err *err);
	/* 0 set; 1 left alone (exists and overwrite == 0); -1 error. */
	int (*set)(void *ctx, const char *name, const char *value, int overwrite,
		   struct pipette_err *err);
	void *ctx;
};

/* Fill what the options left unset: first from Slurm's own option
 * variables (SLURM_SPANK__SLURM_SPANK_OPTION_pipette_*, which count as
 * options: a batch step under sbatch --export=NONE gets its options only
 * that way), then from the PIPETTE_* input variables.
 * PIPETTE_SCHEDULE and PIPETTE_STACK are also outputs (the batch step
 * exports them): they are read as inputs only when PIPETTE_TP, which is
 * only ever an output, is absent.  (PIPETTE_GLOBAL_BATCH is an output too, but
 * always equal to the request's.)  Nothing but PIPETTE_MODEL is read
 * unless the request turns pipette on. */
int pipette_opts_fallback(struct pipette_opts *o, const struct pipette_site *site,
			  const struct pipette_env_ops *env, struct pipette_err *err);
/* Whether this request turns pipette on: a model that is not "none", named
 * by an option, or by PIPETTE_MODEL when the site says default=on. */
int pipette_opts_wanted(const struct pipette_opts *o, const struct pipette_site *s);
/* Cross-option checks (e.g. --pipette-schedule against a pinned schedule). */
int pipette_opts_check(const struct pipette_opts *o, struct pipette_err *err);

/* ---- the step's layout (parse.c) -------------------------------------- */
/* Split a GPU list ("0,1,2,3", or UUIDs) into at most max tokens, each
 * pointing into buf (modified). */
int pipette_split_gpus(char *buf, char **tok, int max, int *n,
		       struct pipette_err *err);
/* SLURM_STEP_TASKS_PER_NODE ("8(x4)", "8,8", "2(x3),1"): the common count,
 * or 0 when nodes differ; -1 if malformed. nodes = how many it describes. */
int pipette_tasks_per_node(const char *s, long *per_node, long *nodes,
			   struct pipette_err *err);
/* srun mode when every node runs one task per GPU, torchrun mode when it
 * runs one task; anything else is an error saying what to change. */
int pipette_launch_decide(long tasks_per_node, int gpus,
			  enum pipette_launch_mode *mode, struct pipette_err *err);
/* MASTER_PORT for (job, step), inside [base, base + range). */
long pipette_master_port(long base, long range, uint32_t job, uint32_t step);

/* ---- pinning the step's inputs (digest.c) ------------------------------ */
/* srun's local context exports it; each node checks against it. */
#define PIPETTE_DIGEST_VAR "PIPETTE_INPUT_DIGEST"
#define PIPETTE_DIGEST_MAX 80
/* The hash of the options that change the plan. */
void pipette_opts_hash(const struct pipette_opts *o, char out[PIPETTE_HASH_HEX + 1]);
/* "1:<options>:<bandwidth cache>:<model config>", files by content. */
int pipette_input_digest(const struct pipette_opts *o, const struct pipette_site *s,
			 char *out, size_t len);
/* Check this node's options against srun's digest ("" = none) and pin the
 * files' content in the request; PIPETTE_E_CHANGED when they differ. */
int pipette_pin_inputs(const char *digest, const struct pipette_opts *o,
		       struct pipette_request *req, struct pipette_err *err);
/* The test hooks of site->test_cache_swap (nothing when it is ""). */
void pipette_test_hook_before(const struct pipette_site *s, uint32_t node_id);
void pipette_test_hook_after(const struct pipette_site *s, uint32_t node_id);

/* ---- from options to a core request (request.c) ----------------------- */
int pipette_request_build(const struct pipette_opts *o, const struct pipette_site *s,
			  enum pipette_launch_mode launch, struct pipette_request *req,
			  struct pipette_err *err);

/* ---- applying a plan (apply.c) ---------------------------------------- */
struct pipette_task_ctx {
	int node;			/* index of this node in the plan */
	int local_task;			/* 0 in torchrun mode */
	char *const *gpus;		/* Slurm's GPU list on this node */
	int ngpus;
	long master_port;		/* 0 = do not set */
};
/* Job-level variables (PIPETTE_*); every value checked before it is set. */
int pipette_apply_job(const struct pipette_plan *plan, const struct pipette_env_ops *env,
		      struct pipette_err *err);
/* Job and per-task variables; CUDA_VISIBLE_DEVICES is Slurm's list
 * permuted by the plan; MASTER_PORT never replaces one the user set. */
int pipette_apply_task(const struct pipette_plan *plan, const struct pipette_task_ctx *t,
		       const struct pipette_env_ops *env, struct pipette_err *err);
/* The per-task variables alone. */
int pipette_apply_task_only(const struct pipette_plan *plan, const struct pipette_task_ctx *t,
			    const struct pipette_env_ops *env, struct pipette_err *err);

/* ---- planning in a child process (child.c) ----------------------------- */
/* What the planner child may use; 0 = no limit (the site's keys
 * plan_memory, plan_cpu and plan_timeout). */
struct pipette_child_limits {
	long memory_mib;	/* address space (RLIMIT_AS) */
	long cpu_s;		/* CPU time (RLIMIT_CPU) */
	long timeout_s;		/* wall clock, enforced by the parent */
	size_t result_max;	/* bytes of result the parent accepts */
	unsigned uid, gid;	/* the job's user: the child drops root for good */
};
/* fn runs in the child and writes its result to out; it returns 0 when
 * the result is written (an error it found is a result too). */
typedef int (*pipette_child_fn)(void *arg, FILE *out);
/* Fork, run fn under the limits, and return its output (malloc'd, NUL
 * terminated) once the child has exited 0.  A child that overruns a limit,
 * crashes, or writes too much is an error naming the limit. */
int pipette_child_run(const struct pipette_child_limits *lim, pipette_child_fn fn, void *arg,
		      char **result, size_t *result_len, struct pipette_err *err);

/* ---- the planner's result as text (outcome.c) --------------------------- */
/* A plan's text for 64 tasks is a few tens of KiB; --pipette-explain adds
 * the ranked table. */
#define PIPETTE_RESULT_MAX (4u << 20)
#define PIPETTE_OUTCOME_LINE_MAX 16384
/* Writing, in the child: an error (the whole result), warnings and plan
 * lines for the user, the job's and one task's variables, the end mark. */
int pipette_outcome_error(FILE *out, const char *msg);
int pipette_outcome_warnings(FILE *out, const char *text);
int pipette_outcome_lines(FILE *out, const char *text);
int pipette_outcome_record_job(FILE *out, const struct pipette_plan *plan,
			       struct pipette_err *err);
int pipette_outcome_record_task(FILE *out, const struct pipette_plan *plan,
				const struct pipette_task_ctx *t, struct pipette_err *err);
int pipette_outcome_end(FILE *out);
/* Reading, in slurmstepd: the whole text is checked first. */
struct pipette_outcome {
	char *text;			/* not owned */
	int failed;
	char error[PIPETTE_ERR_MAX];
};
int pipette_outcome_parse(char *text, struct pipette_outcome *o, struct pipette_err *err);
/* Each W (warning = 1) and L line, in order. */
void pipette_outcome_say(const struct pipette_outcome *o,
			 void (*say)(void *ctx, int warning, const char *line), void *ctx);
/* Set the job variables and those of local task `task` (-1: job only). */
int pipette_outcome_apply(const struct pipette_outcome *o, long task,
			  const struct pipette_env_ops *env, struct pipette_err *err);

#endif
