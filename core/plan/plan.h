/* pipette: one call from a request to a plan, and the plan's renderers.
 *
 * A plan = configuration + mapping sigma (global rank -> node, GPU slot) +
 * predictions + runners-up.  Deterministic: the same request and cluster
 * give a byte-identical plan on every node. */
#ifndef PIPETTE_PLAN_H
#define PIPETTE_PLAN_H

#include <stdio.h>

#include "inputs/config.h"
#include "inputs/error.h"
#include "inputs/progress.h"
#include "inputs/readfile.h"
#include "inputs/topology.h"

#define PIPETTE_PATH_MAX 1024
/* Hex digits of the digests that identify a plan and pin its inputs: 64
 * bits of SHA-256, ample to tell the versions of one step's inputs apart. */
#define PIPETTE_HASH_HEX 16


struct pipette_request {
	char model[PIPETTE_PATH_MAX];		/* preset name or config.json path */
	char models_dir[PIPETTE_PATH_MAX];	/* site model configs ("" = none) */
	char bandwidth[PIPETTE_PATH_MAX];	/* bandwidth cache ("" = nominal) */
	char gpu[64];				/* GPU type */
	long global_batch;
	long seq_len;		/* 0 = the model's context length */
	double mem_fraction;	/* 0 = the stack's rule (stack.h) */
	/* The training stack ("" = megatron) and overrides of its facts
	 * ("key=value,key=value": pipette_stack_option). */
	char stack[32];
	char stack_options[256];
	enum pipette_attention attention;
	int attention_given;	/* 0: the stack's kernel */
	/* Transformer layers at the model's start and end that a
	 * low-precision recipe keeps in BF16 (the recipe is a pin:
	 * pins.precision_set). */
	int bf16_first, bf16_last;
	/* GPUs per NVLink domain (0: the GPU type's system, hardware.h);
	 * a multiple of the GPUs per node. */
	int nvlink_domain;
	/* Slurm's topology.conf whose topology/block blocks are the NVLink
	 * domains ("" = none; topology.h), and the front end's expander of
	 * its hostlists (Slurm's; libpipette never links Slurm). */
	char topology[PIPETTE_PATH_MAX];
	pipette_hostlist_fn expand_hostlist;
	struct pipette_pins pins;
	/* MoE execution the job fixes: capacity factor, padding, imbalance
	 * (the dispatcher and EP overlap are pins). */
	struct pipette_moe_exec moe;
	enum pipette_mapping_mode mapping;
	enum pipette_launch_mode launch;
	long budget;		/* search/mapping iteration budget (0 = default) */
	int top_k;		/* runners-up kept */
	double stale_days;	/* warn when the cache is older (0 = never) */
	/* Communication compression (Optimus-CC): forced on every
	 * configuration, or allowed where the search predicts a gain.  It
	 * changes training numerics: off unless asked. */
	struct pipette_compression compress;
	int allow_compression;
	/* pipette-probe --local --json report for the GPU type ("" = the
	 * table's efficiencies; pipette_gpu_calibrate). */
	char calibration[PIPETTE_PATH_MAX];
	/* The content the files must have (a prefix of their SHA-256 in hex,
	 * "" = not pinned): every node of a Slurm step plans from the bytes
	 * srun saw, or fails with PIPETTE_E_CHANGED. */
	char pin_bandwidth_sha256[PIPETTE_HASH_HEX + 1];
	char pin_model_sha256[PIPETTE_HASH_HEX + 1];
	char pin_calibration_sha256[PIPETTE_HASH_HEX + 1];
	char pin_topology_sha256[PIPETTE_HASH_HEX + 1];
	/* Told how the plan comes along (progress.h): the inputs read, the
	 * configurations estimated, the ranks placed.  fn NULL (the
	 * default, and always in the plugin): nothing is told.  No part of
	 * the plan depends on it. */
	struct pipette_progress progress;
};

/* The cluster the plan is for: Slurm node names, in any order (the plan
 * orders them canonically: pipette_plan_node_index), and the GPU indices
 * Slurm gave on each node (the same count on every node). */
struct pipette_cluster_spec {
	int nodes;
	const char *const *node_names;
	int gpus_per_node;
	const int *gpu_ids;	/* gpus_per_node entries; NULL = 0..G-1 */
};

struct pipette_plan;

/* request.c: the defaults of a request (pipette_request_init), and the
 * defaults that need the model (pipette_request_resolve: the model loaded
 * once, seq_len 0 = the model's context length, top_k). */
void pipette_request_init(struct pipette_request *req);
struct pipette_model;
struct pipette_stack;
int pipette_request_resolve(const struct pipette_request *req, struct pipette_request *out,
			    struct pipette_model *model, struct pipette_stack *stack,
			    struct pipette_err *err);
/* The one default of the sequence length, for every front end. */
int pipette_default_seq_len(const struct pipette_model *model, long given, long *out,
			    struct pipette_err *err);
int pipette_plan_compute(const struct pipette_request *req,
			 const struct pipette_cluster_spec *cluster,
			 struct pipette_plan **out, struct pipette_err *err);
void pipette_plan_destroy(struct pipette_plan *plan);
/* pipette_plan_compute's message when the request is valid but no
 * configuration fits (the CLI exits 1 on it, 2 on other errors). */
#define PIPETTE_PLAN_NOFIT_PREFIX "no configuration fits"

const struct pipette_config *pipette_plan_config(const struct pipette_plan *plan);
int pipette_plan_world(const struct pipette_plan *plan);
enum pipette_launch_mode pipette_plan_launch(const struct pipette_plan *plan);
int pipette_plan_gpus_per_node(const struct pipette_plan *plan);
/* The ranked configurations (the winner first, up to the request's top_k). */
int pipette_plan_ranked_count(const struct pipette_plan *plan);
const struct pipette_config *pipette_plan_ranked_config(const struct pipette_plan *plan, int i);
/* The plan's index of a node (its canonical position), or -1 if the plan
 * has no node of that name.  Every node index below is this one. */
int pipette_plan_node_index(const struct pipette_plan *plan, const char *name);
/* Warnings gathered while planning (stale cache, fall-backs); "" if none. */
const char *pipette_plan_warnings(const struct pipette_plan *plan);
/* sigma: the node index and GPU slot (index into gpu_ids) of global rank r,
 * and its inverse. */
void pipette_plan_rank_location(const struct pipette_plan *plan, int rank,
				int *node, int *slot);
int pipette_plan_rank_at(const struct pipette_plan *plan, int node, int slot);
/* Predicted iteration time of the plan (its mapping), of the same
 * configuration in Megatron's default order, and their ratio (>= 1). */
double pipette_plan_iteration_s(const struct pipette_plan *plan);
/* The chosen configuration's predicted time, every term. */
const struct pipette_time *pipette_plan_time(const struct pipette_plan *plan);
double pipette_plan_block_iteration_s(const struct pipette_plan *plan);
double pipette_plan_mapping_gain(const struct pipette_plan *plan);
/* A mapping gain below this is negligible: smaller than the time model's
 * own error (make validate's runs are off by several per cent). */
#define PIPETTE_NEGLIGIBLE_GAIN 1.01
int pipette_plan_mapping_negligible(const struct pipette_plan *plan);

/* The plan's identity: PIPETTE_HASH_HEX hex digits of the SHA-256 of its
 * job variables, node names and mapping; equal plans, equal hashes. */
const char *pipette_plan_hash(const struct pipette_plan *plan);

/* The first PIPETTE_HASH_HEX hex digits of a SHA-256: the short form of
 * the plan hash and of the input digest's fields. */
void pipette_hash_short(const unsigned char sha[PIPETTE_SHA256_LEN],
			char out[PIPETTE_HASH_HEX + 1]);

/* The environment contract: the scope of a variable name, or -1 for a
 * name outside the contract (core/render/env.c holds the one table). */
enum pipette_env_scope { PIPETTE_ENV_JOB, PIPETTE_ENV_TASK };
int pipette_env_scope(const char *name);

/* The environment a launcher needs.  `set` is called once per variable. */
typedef int (*pipette_env_set_fn)(void *ctx, const char *name, const char *value);
/* Job-level variables (PIPETTE_TP ... PIPETTE_MAPPING_GAIN, PIPETTE_PLAN_HASH). */
int pipette_plan_job_env(const struct pipette_plan *plan, pipette_env_set_fn set,
			 void *ctx);
/* Per-task variables for the task at (node, local_task): in srun mode RANK,
 * LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, CUDA_VISIBLE_DEVICES;
 * in torchrun mode NODE_RANK, MASTER_ADDR, WORLD_SIZE, CUDA_VISIBLE_DEVICES.
 * CUDA_VISIBLE_DEVICES permutes gpus (the node's GPU list as Slurm gave it,
 * one token per GPU slot: indices or UUIDs), or the plan's GPU indices when
 * gpus is NULL.  MASTER_PORT is the caller's (it depends on job and step
 * ids). */
int pipette_plan_task_env(const struct pipette_plan *plan, int node, int local_task,
			  const char *const *gpus, pipette_env_set_fn set, void *ctx,
			  struct pipette_err *err);

/* Renderers. */
struct json_object;
/* A configuration as the JSON object both `plan` and `estimate` print
 * (tp ... schedule, recompute, compression); the caller owns it. */
struct json_object *pipette_config_json(const struct pipette_config *c);
/* A time breakdown as JSON (plan and estimate print the same fields). */
struct pipette_time;
struct json_object *pipette_time_json(const struct pipette_time *t);
int pipette_plan_write_table(const struct pipette_plan *plan, FILE *f);
int pipette_plan_write_json(const struct pipette_plan *plan, FILE *f);
int pipette_plan_write_env(const struct pipette_plan *plan, FILE *f);
/* "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 ..." */
int pipette_plan_megatron_args(const struct pipette_plan *plan, char *buf, size_t len);
/* An FSDP plan's sharding as Megatron-FSDP flags (0), or why Megatron-FSDP
 * cannot run it (1, the reason in buf). */
int pipette_plan_megatron_fsdp_args(const struct pipette_plan *plan, char *buf, size_t len);
/* NeMo 2.0 recipe overrides: "trainer.strategy.tensor_model_parallel_size=8 ..." */
int pipette_plan_nemo_args(const struct pipette_plan *plan, char *buf, size_t len);
/* Megatron-Bridge's performance run script: "-m llama -mr llama3_70b -g h100
 * -c fp8_cs ... model.tensor_model_parallel_size=8 ..." (0), or 1 with why
 * it cannot run the plan in buf. */
int pipette_plan_bridge_args(const struct pipette_plan *plan, char *buf, size_t len);
/* torchtitan: the plan as --parallelism.* / --training.* overrides, and
 * as a recipe module, the same overrides and the v0.2.2 TOML. */
int pipette_plan_torchtitan_args(const struct pipette_plan *plan, char *buf, size_t len);
int pipette_plan_write_torchtitan(const struct pipette_plan *plan, FILE *f);
/* The plan in its stack's launch form (one of the four above); 1 for an
 * estimate-only stack, which has none. */
int pipette_plan_launch_args(const struct pipette_plan *plan, char *buf, size_t len);
/* torchtitan's form of a plan made for another stack: 0, or 1 with the
 * stack and the setting torchtitan rejects in buf. */
int pipette_plan_torchtitan_check(const struct pipette_plan *plan, char *buf, size_t len);
/* What torchrun runs for a torchtitan plan ("-m torchtitan.train --module
 * M --config C"), or 1 with why there is none. */
int pipette_plan_torchtitan_entry(const struct pipette_plan *plan, char *buf, size_t len);

/* CUDA_DEVICE_MAX_CONNECTIONS the plan's stack needs, 0 for none. */
int pipette_plan_device_max_connections(const struct pipette_plan *plan);
/* Shell quoting: the word w[0..n) as the shell reads it back unchanged
 * (as is, or in single quotes), or every space-separated word of line. */
void pipette_shell_word(struct pipette_args *a, const char *w, size_t n);
void pipette_shell_words(struct pipette_args *a, const char *line);

/* The runnable command line of a plan: CUDA_DEVICE_MAX_CONNECTIONS where
 * the stack needs it, the trainer (NULL: the form's own) and the plan's
 * arguments, each word shell-quoted.  0, 1 with why the form cannot say
 * the plan in buf, -1 when buf is too small. */
enum pipette_line_form { PIPETTE_LINE_MEGATRON, PIPETTE_LINE_NEMO, PIPETTE_LINE_STACK };
int pipette_plan_launch_line(const struct pipette_plan *plan, enum pipette_line_form form,
			     const char *trainer, char *buf, size_t len);

/* A batch script that runs the plan without the plugin: #SBATCH lines,
 * the plan's environment, srun (one task per GPU) or srun + torchrun (one
 * per node) and the stack's command line.  trainer as above; nodelist
 * non-NULL pins the job to the plan's nodes.  0, 1 with why not in why,
 * -1 when writing failed. */
struct pipette_sbatch_opts {
	const char *trainer;
	const char *nodelist;
	const char *job_name;
};
int pipette_plan_write_sbatch(const struct pipette_plan *plan,
			      const struct pipette_sbatch_opts *o, FILE *f, char *why,
			      size_t why_len);

#endif
