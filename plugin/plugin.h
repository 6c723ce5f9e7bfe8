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
#include <sys/stat.h>
#include <time.h>

#include "inputs/error.h"
#include "inputs/limits.h"
#include "plan/plan.h"

/* Longest option value or input variable accepted (a path, a pin list). */
#define PIPETTE_VALUE_MAX (PIPETTE_PATH_MAX - 1)
/* ---- site configuration: plugstack.conf arguments (args.c) ------------- */
/* Every field is part of the plan cache's key (digest.c, site_text): add
 * a new one there too. */
struct pipette_site {
	char bandwidth[PIPETTE_PATH_MAX];	/* site cache ("" = nominal links) */
	/* Slurm's topology.conf whose topology/block blocks are NVLink
	 * domains ("" = none) */
	char topology[PIPETTE_PATH_MAX];
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
	/* The precision recipes a job's plan may use unless it names its
	 * own (PIPETTE_PREC_BIT; 0 = the stack's default). */
	unsigned precision_set;
	int default_on;		/* PIPETTE_MODEL alone turns pipette on */
	int fallback_block;	/* a failed plan starts the step in Slurm's order */
	/* The planner child's limits (child.c). */
	long plan_memory_mib;
	long plan_cpu_s;
	long plan_timeout_s;
	/* Benchmarks only: plan for this hostlist instead of the step's nodes
	 * (tests/bench/plugin_launch.sh); "" in production. */
	char emulate_nodes[PIPETTE_PATH_MAX];
	/* The root of the per-user plan caches ("" = no cache; plancache.c). */
	char plan_cache[PIPETTE_PATH_MAX];
	/* The site's calibration file (pipette calibrate; "" = none): like
	 * plugstack.conf, the same file on every node. */
	char calibration[PIPETTE_PATH_MAX];
	/* Where node 0 writes the plan a step applied, as the job's user
	 * (PIPETTE_PLAN_FILE; "" = nowhere; step.c). */
	char plan_dir[PIPETTE_PATH_MAX];
	/* Tests only (tests/integration/test_plugin_reliability.sh): node 0
	 * renames this file over the bandwidth cache after it has planned, and
	 * the other nodes wait for that before they plan; "" in production. */
	char test_cache_swap[PIPETTE_PATH_MAX];
	/* A directory all the nodes share where the nodes of a step agree
	 * before any task starts ("" = they do not; barrier.c). */
	char step_barrier[PIPETTE_PATH_MAX];
};

void pipette_site_init(struct pipette_site *s);
/* Parse "key=value" arguments over the defaults; an unknown key, a bad
 * value or a control character is an error naming the argument. */
int pipette_site_parse(struct pipette_site *s, int ac, char **av,
		       struct pipette_err *err);

/* ---- the job's request: options and PIPETTE_* inputs (parse.c) --------- */
/* "on/off" style booleans: 1/true/yes/on and 0/false/no/off. */
int pipette_parse_bool(const char *s, int *out);
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
	PIPETTE_OPT_PRECISION,
	PIPETTE_OPT_PLAN_FILE,
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
	unsigned precision_set;		/* PIPETTE_PREC_BIT; 0 = the site's */
	/* A saved plan to apply as is (planfile.c; an absolute path, "" = none). */
	char plan_file[PIPETTE_PATH_MAX];
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
 * PIPETTE_SCHEDULE, PIPETTE_STACK, PIPETTE_PRECISION and PIPETTE_PLAN_FILE
 * are also outputs (the batch step
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
#define PIPETTE_DIGEST_MAX 96
/* The hash of the options that change the plan. */
void pipette_opts_hash(const struct pipette_opts *o, char out[PIPETTE_HASH_HEX + 1]);
/* "3:<options>:<bandwidth cache>:<model config>:<calibration>:<topology>",
 * files by content. */
int pipette_input_digest(const struct pipette_opts *o, const struct pipette_site *s,
			 char *out, size_t len);
/* Check this node's options against srun's digest ("" = none) and pin the
 * files' content in the request: its pins become the digest's, the
 * earlier ones dropped; PIPETTE_E_CHANGED when the options differ. */
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
/* MASTER_PORT (never over the user's) and, in torchrun mode,
 * PET_MASTER_PORT; nothing when master_port is 0. */
int pipette_apply_port(enum pipette_launch_mode launch, long master_port,
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
	int nice;		/* the child's scheduling priority (0: its parent's) */
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
/* A warning of this node that every node says (the plan cache's), and a
 * line about where the plan came from (--pipette-explain; admins' log). */
int pipette_outcome_notice(FILE *out, const char *msg);
int pipette_outcome_info(FILE *out, const char *msg);
int pipette_outcome_record_job(FILE *out, const struct pipette_plan *plan,
			       struct pipette_err *err);
/* One job variable the plugin sets itself (PIPETTE_PLAN_FILE). */
int pipette_outcome_record_var(FILE *out, const char *name, const char *value,
			       struct pipette_err *err);
int pipette_outcome_record_task(FILE *out, const struct pipette_plan *plan,
				const struct pipette_task_ctx *t, struct pipette_err *err);
/* MASTER_PORT of local task `task` (and torchrun's PET_MASTER_PORT). */
int pipette_outcome_record_port(FILE *out, enum pipette_launch_mode launch, int task,
				long master_port, struct pipette_err *err);
int pipette_outcome_end(FILE *out);
/* One record, split in place: its tag ('.' for END), for J/T lines the
 * task (-1 for J), the overwrite flag and NAME=VALUE, else the text.  -1
 * when it is malformed or its tag is not one of `tags`. */
struct pipette_record {
	char tag;
	long task;
	int overwrite;
	char *name, *value, *text;
};
int pipette_outcome_parse_record(char *line, const char *tags, struct pipette_record *r);
/* Reading, in slurmstepd: the whole text is checked first. */
struct pipette_outcome {
	char *text;			/* not owned */
	int failed;
	char error[PIPETTE_ERR_MAX];
};
int pipette_outcome_parse(char *text, struct pipette_outcome *o, struct pipette_err *err);
/* Each record whose tag is in `tags` (W, L, M, I), in order. */
void pipette_outcome_say(const struct pipette_outcome *o, const char *tags,
			 void (*say)(void *ctx, char tag, const char *line), void *ctx);
/* Set the job variables and those of local task `task` (-1: job only). */
int pipette_outcome_apply(const struct pipette_outcome *o, long task,
			  const struct pipette_env_ops *env, struct pipette_err *err);

/* ---- the step's result for all its nodes (stepbody.c) ------------------- */
/* What the plan cache stores: one text for every node of a step, in the
 * records of outcome.c plus "N NODE", which starts the task records of
 * NODE.  The W and L lines come first (the caller's), then: */
/* the job variables (J), and for each of the step's nodes "N NODE" and
 * the T records of its tasks_per_node tasks, with the GPU slots 0..G-1
 * in place of Slurm's GPUs and without MASTER_PORT (both differ between
 * steps that share the plan). */
int pipette_step_body_write(FILE *out, const struct pipette_plan *plan, char *const *nodes,
			    int nnodes, int gpus_per_node, int tasks_per_node,
			    struct pipette_err *err);
/* This node's records from a step's text, every record checked (names of
 * the environment contract, values without control characters): the W,
 * L and J lines, and node's T records with the GPU slots replaced by
 * Slurm's GPUs of this node (node NULL: none).  No END. */
int pipette_step_body_node(const char *body, const char *node, char *const *gpus, int ngpus,
			   FILE *out, struct pipette_err *err);
/* A plan cache entry holds the step's text and, with plan_dir, the plan
 * file node 0 writes (its JSON) after the END record: the bytes of the
 * text up to and including its END line (len when it has none). */
size_t pipette_step_body_len(const char *entry, size_t len);
/* The name of the plan file in the text's PIPETTE_PLAN_FILE record, when
 * it is DIR/UID/pipette-plan-HEX.json under plan_dir `dir` and `uid`: 1
 * with the name in `name`, 0 when the text has no such record (no plan,
 * or no plan_dir), -1 when the record names another path. */
int pipette_step_body_plan_file(const char *body, const char *dir, unsigned uid, char *name,
				size_t len);

/* ---- the per-user plan cache (plancache.c) ------------------------------ */
/* A key is the whole SHA-256 of the inputs (digest.c), in hex. */
#define PIPETTE_PLAN_KEY_HEX 64
/* An entry's body: the step text of the largest step pipette plans
 * (4096 nodes x 8 GPUs, PIPETTE_MAX_NODES, one task per GPU) is about 8
 * MiB at the 255 bytes per task measured on the 1024-node bench
 * (tests/bench/plugin_load.sh); twice that. */
#define PIPETTE_PLANCACHE_ENTRY_MAX (16u << 20)
/* What one user's directory may hold; the oldest entries go first.  A few
 * hundred steps' plans of the 4- to 128-node examples are a few MiB; 64
 * MiB leaves room for several 1024-node plans (1.6 MiB each, bench) and
 * stays small beside a node's /tmp. */
#define PIPETTE_PLANCACHE_MAX_ENTRIES 256
#define PIPETTE_PLANCACHE_MAX_BYTES (64ull << 20)
struct pipette_plancache {
	int dirfd;				/* ROOT/UID; -1: closed */
	int lockfd;				/* its lock file; -1 until used */
	unsigned uid;				/* the owner everything must have */
	char dir[PIPETTE_PATH_MAX + 16];	/* "ROOT/UID", for messages */
};
/* Open ROOT/UID, making it (mode 0700) if it is missing.  ROOT must be a
 * directory owned by root_owner (0 but in tests), sticky or writable by
 * its owner alone; ROOT/UID a directory owned by uid, writable by it
 * alone; neither a symbolic link.  -1: the path and the reason in err. */
int pipette_plancache_open(struct pipette_plancache *c, const char *root, unsigned root_owner,
			   unsigned uid, struct pipette_err *err);
void pipette_plancache_close(struct pipette_plancache *c);
/* The body stored under key: 0 and the body (malloc'd, NUL-terminated);
 * 1 when there is no entry; -1 when there is one but it is refused (not a
 * regular file, a symbolic link, another owner, writable by others, too
 * large, another key, truncated, a checksum mismatch): err names the path
 * and the reason. */
int pipette_plancache_get(struct pipette_plancache *c, const char *key, char **body,
			  size_t *len, struct pipette_err *err);
/* Store body under key (a temporary file, fsync, rename), then bound the
 * directory; -1 (path and reason in err) leaves no entry behind. */
int pipette_plancache_put(struct pipette_plancache *c, const char *key, const char *body,
			  size_t len, struct pipette_err *err);
/* Remove the oldest entries beyond PIPETTE_PLANCACHE_MAX_ENTRIES or
 * _MAX_BYTES, never keep's, and temporary files killed writers left. */
void pipette_plancache_prune(struct pipette_plancache *c, const char *keep);
/* The checks on an entry's inode (an fstat), before a byte is read. */
int pipette_plancache_check_stat(const struct stat *st, unsigned uid, const char *path,
				 struct pipette_err *err);
/* One planner per key: 0 = this process holds the key's lock and plans
 * (pipette_plancache_unlock after storing); 1 = another held it and has
 * let go, so its entry may be there now (this process does not hold the
 * lock); 2 = still held after wait_ms; -1 = no lock (err says why). */
int pipette_plancache_lock(struct pipette_plancache *c, const char *key, long wait_ms,
			   struct pipette_err *err);
void pipette_plancache_unlock(struct pipette_plancache *c, const char *key);

/* ---- the nodes of a step agree (barrier.c), in a child ------------------- */
/* How much later than the first node the last one may start planning:
 * srun's launch request reaches each node's slurmd in one RPC, which
 * Slurm gives up on after MessageTimeout (10 s by default, slurm.conf(5));
 * three times that. */
#define PIPETTE_BARRIER_SKEW_S 30
struct pipette_barrier {
	const char *root;		/* site->step_barrier */
	unsigned root_owner;		/* its owner: 0 but in tests */
	unsigned uid;			/* the job's user */
	const char *key;		/* the step (hex, unique per launch) */
	char *const *nodes;		/* the step's nodes, for messages */
	int nnodes;
	int node_id;
	long wait_ms;			/* for the other nodes' records */
	const char *failure;		/* this node's reason; NULL: it planned */
};
/* Record this node's outcome and wait for every node's (barrier.c's
 * comment).  Writes one line: "ok" (every node planned), "fail FIRST\tMSG"
 * (MSG: the first failed node's name and reason; FIRST: the first node that
 * planned, -1 for none: the one that says it), or "error\tMSG" (the
 * barrier could not be used on this node).  0 when the line is written. */
int pipette_barrier_run(const struct pipette_barrier *b, FILE *out);

/* ---- one node's result for a step (step.c), in the planner child -------- */
struct pipette_step {
	const struct pipette_opts *opts;
	const struct pipette_site *site;
	const char *digest;		/* srun's pin of the inputs, "" = none */
	char *const *nodes;		/* the step's nodes, in Slurm's order */
	int nnodes;
	int node_id;			/* this node's index in nodes */
	char *const *gpus;		/* this node's GPUs, as Slurm gave them */
	int ngpus;
	enum pipette_launch_mode launch;
	int batch;			/* the batch step: job variables only */
	long local_tasks;		/* this node's tasks */
	long master_port;		/* the step's MASTER_PORT (0: none) */
	unsigned uid;			/* the job's user, the cache's owner */
	unsigned cache_owner;		/* the owner of plan_cache's root: 0 */
	time_t now;			/* for max_age's warning (the key) */
	/* The nice value the child takes before it plans (0: its own): a
	 * plan read from the cache is milliseconds of work, and is not made
	 * to wait behind every busy process of the node. */
	int plan_nice;
};
/* The plan cache's key of the step (PIPETTE_PLAN_KEY_HEX hex digits):
 * everything the result text depends on (digest.c), the files by the pins
 * of srun's digest, each file srun did not pin pinned to the content this
 * node reads now.  pin (NULL: not wanted) receives that digest: the
 * planner must be held to it (pipette_pin_inputs), so that what is stored
 * under the key is the plan of the key's inputs.  -1 when srun's digest
 * is malformed or an input the key needs cannot be read (the plan will
 * fail on it too). */
int pipette_plan_key(const struct pipette_step *st, char out[PIPETTE_PLAN_KEY_HEX + 1],
		     char pin[PIPETTE_DIGEST_MAX], struct pipette_err *err);
/* Write this node's result (outcome.c's records, END last): from the
 * plan cache when the site has one and it holds the step's plan, else
 * computed (and stored).  Every problem of the cache is a notice (M), and
 * the plan is then computed as without one.  0 when the result is
 * written, an error being a result too. */
int pipette_step_result(const struct pipette_step *st, FILE *out);

/* ---- a saved plan applied as is (planfile.c), in the planner child ------- */
/* The step's plan from opts->plan_file: refused (the field named) when
 * it was made for another model, stack, GPU type, nodes, GPU count or
 * launch, or when its configuration planned again on the step's inputs
 * is not the file's plan (its hash); req is the step's request, whose
 * knobs the file's configuration replaces. */
int pipette_planfile_step(const struct pipette_step *st, struct pipette_request *req,
			  const struct pipette_cluster_spec *spec, struct pipette_plan **plan,
			  struct pipette_err *err);

#endif
