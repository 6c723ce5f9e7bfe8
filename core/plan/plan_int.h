/* pipette: the plan's insides, shared by the planning code (plan.c) and
 * its renderers (core/render/); nothing else includes this. */
#ifndef PIPETTE_PLAN_INT_H
#define PIPETTE_PLAN_INT_H

#include "learn/calib.h"
#include "inputs/hardware.h"
#include "plan/mapping.h"
#include "estimate/memory.h"
#include "inputs/model.h"
#include "plan/plan.h"
#include "plan/search.h"
#include "inputs/stack.h"
#include "estimate/timing.h"

struct plan_entry {
	struct pipette_config cfg;
	struct pipette_time time;	/* under its mapping (block if unmapped) */
	double block_s;
	double bound_s;			/* placement bound (0: not computed) */
	int mapped;
	double peak_bytes;
};

struct pipette_plan {
	struct pipette_request req;
	struct pipette_model model;
	struct pipette_stack stack;	/* resolved; every config points here */
	const struct pipette_gpu_spec *gpu;
	struct pipette_gpu_spec gpu_calibrated;
	struct pipette_site_factors site;	/* applied from --calibration; 1, 1, -1 none */
	int nodes, G, world;
	char **names;
	int *gpu_ids;
	struct pipette_config cfg;
	int *gpu_of_rank;	/* world */
	int *rank_at;		/* nodes*G, -1 = idle */
	struct pipette_time time;
	struct pipette_memory mem;
	struct pipette_stage_memory *stages;
	struct pipette_mapping_stats mstats;
	struct plan_entry *ranked;
	int n_ranked;
	struct pipette_search_stats sstats;
	char *warnings;
	double search_wall_s;
	char hash[PIPETTE_HASH_HEX + 1];
	/* FSDP stacks whose plan shards over fewer than all data-parallel
	 * ranks: what sharding over all of them would cost ("" otherwise). */
	char sharding_note[256];
};

/* Megatron's --pipeline-model-parallel-layout of the plan (render/
 * megatron.c), appended to a; whether the launch needs it (an uneven
 * interleaved split). */
void pipette_plan_layout(const struct pipette_plan *plan, struct pipette_args *a);
int pipette_plan_uses_layout(const struct pipette_plan *plan);

/* The trainers the launch forms run unless told otherwise (render/
 * launch.c has their sources). */
#define PIPETTE_MEGATRON_TRAINER "python pretrain_gpt.py"
#define PIPETTE_NEMO_TRAINER "nemo llm pretrain -y"
#define PIPETTE_BRIDGE_TRAINER "python scripts/performance/bootstrap.py"

#endif
