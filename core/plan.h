/* pipette: one call from a request to a plan, and the plan's renderers.
 *
 * A plan = configuration + mapping sigma (global rank -> node, GPU slot) +
 * predictions + runners-up.  Deterministic: the same request and cluster
 * give a byte-identical plan on every node. */
#ifndef PIPETTE_PLAN_H
#define PIPETTE_PLAN_H

#include <stdio.h>

#include "config.h"
#include "error.h"

#define PIPETTE_PATH_MAX 1024

enum pipette_mapping_mode { PIPETTE_MAP_OPTIMIZE, PIPETTE_MAP_BLOCK };
/* srun: one task per GPU, any sigma; torchrun: one task per node, sigma is
 * a node order plus a per-node GPU permutation. */
enum pipette_launch_mode { PIPETTE_LAUNCH_SRUN, PIPETTE_LAUNCH_TORCHRUN };

/* A pinned knob; -1 leaves it to the search. */
struct pipette_pins {
	int tp, pp, dp, cp, ep, etp, vpp, micro_batch;
	int schedule;		/* enum pipette_schedule_kind or -1 */
	int recompute;		/* enum pipette_recompute or -1 */
	int sequence_parallel;	/* 0/1 or -1 */
	int distributed_optimizer;
};

struct pipette_request {
	char model[PIPETTE_PATH_MAX];		/* preset name or config.json path */
	char models_dir[PIPETTE_PATH_MAX];	/* site model configs ("" = none) */
	char bandwidth[PIPETTE_PATH_MAX];	/* bandwidth cache ("" = nominal) */
	char gpu[64];				/* GPU type */
	long global_batch;
	long seq_len;
	double mem_fraction;
	enum pipette_attention attention;	/* the stack's kernel (flash) */
	struct pipette_pins pins;
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
};

/* The cluster the plan is for: Slurm node names in Slurm's order, and the
 * GPU indices Slurm gave on each node (the same count on every node). */
struct pipette_cluster_spec {
	int nodes;
	const char *const *node_names;
	int gpus_per_node;
	const int *gpu_ids;	/* gpus_per_node entries; NULL = 0..G-1 */
};

struct pipette_plan;

void pipette_request_init(struct pipette_request *req);
int pipette_plan_compute(const struct pipette_request *req,
			 const struct pipette_cluster_spec *cluster,
			 struct pipette_plan **out, struct pipette_err *err);
void pipette_plan_destroy(struct pipette_plan *plan);
/* pipette_plan_compute's message when the request is valid but no
 * configuration fits (the CLI exits 1 on it, 2 on other errors). */
#define PIPETTE_PLAN_NOFIT_PREFIX "no configuration fits"

const struct pipette_config *pipette_plan_config(const struct pipette_plan *plan);
int pipette_plan_world(const struct pipette_plan *plan);
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
double pipette_plan_block_iteration_s(const struct pipette_plan *plan);
double pipette_plan_mapping_gain(const struct pipette_plan *plan);

/* The environment a launcher needs.  `set` is called once per variable. */
typedef int (*pipette_env_set_fn)(void *ctx, const char *name, const char *value);
/* Job-level variables (PIPETTE_TP ... PIPETTE_MAPPING_GAIN). */
int pipette_plan_job_env(const struct pipette_plan *plan, pipette_env_set_fn set,
			 void *ctx);
/* Per-task variables for the task at (node, local_task): in srun mode RANK,
 * LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, CUDA_VISIBLE_DEVICES;
 * in torchrun mode NODE_RANK, MASTER_ADDR, WORLD_SIZE, CUDA_VISIBLE_DEVICES.
 * MASTER_PORT is the caller's (it depends on job and step ids). */
int pipette_plan_task_env(const struct pipette_plan *plan, int node, int local_task,
			  pipette_env_set_fn set, void *ctx, struct pipette_err *err);

/* Renderers. */
struct json_object;
/* A configuration as the JSON object both `plan` and `estimate` print
 * (tp ... schedule, recompute, compression); the caller owns it. */
struct json_object *pipette_config_json(const struct pipette_config *c);
int pipette_plan_write_table(const struct pipette_plan *plan, FILE *f);
int pipette_plan_write_json(const struct pipette_plan *plan, FILE *f);
int pipette_plan_write_env(const struct pipette_plan *plan, FILE *f);
/* "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 ..." */
int pipette_plan_megatron_args(const struct pipette_plan *plan, char *buf, size_t len);

#endif
