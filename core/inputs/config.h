/* pipette: the execution side — one training configuration.
 *
 * Rank order follows Megatron's default "tp-cp-ep-dp-pp":
 *   r = tp + TP*(cp + CP*(dp + DP*pp))
 * (EP is carved out of the DP*CP ranks: Megatron's expert grid
 * r = etp + ETP*(ep + EP*(edp + EDP*pp)) spans the same ranks and the same
 * PP groups, megatron/core/parallel_state.py of NVIDIA/Megatron-LM
 * @d98e8a64dd; it does not add ranks.) */
#ifndef PIPETTE_CONFIG_H
#define PIPETTE_CONFIG_H

#include <stddef.h>

#include "inputs/error.h"
#include "inputs/knobs.h"
#include "inputs/model.h"
#include "inputs/stack.h"

enum pipette_recompute {
	PIPETTE_RECOMPUTE_NONE,
	PIPETTE_RECOMPUTE_SELECTIVE,
	PIPETTE_RECOMPUTE_FULL,
};



/* Communication-compression what-ifs after Optimus-CC (Song et al.,
 * ASPLOS'23; its code, AIS-SNU/Optimus-CC @7f6437c, flags in
 * megatron/arguments.py).  All zero = off.  They change training
 * numerics, so a plan uses them only when the user allows it. */
struct pipette_compression {
	int pp_rank;		/* CB: low-rank PP backward gradients, rank r */
	int pp_epilogue_only;	/* CB only on the cooldown sends (critical path) */
	int dp_rank;		/* PowerSGD data-parallel gradients, rank r */
	int dp_stages;		/* compress DP only on stages < k (0 = all) */
	int fused_embedding;	/* FE: one embedding all-reduce over 2*DP ranks */
};

/* FSDP's fsdp_reshard_after_forward (torchtitan ParallelismConfig):
 * free the gathered parameters after each layer's forward and gather them
 * again for its backward (always), keep them until the backward (never),
 * or torchtitan's default, which is always without pipelining and never
 * with it (pipette_reshard_resolve). */
enum pipette_reshard { PIPETTE_RESHARD_DEFAULT, PIPETTE_RESHARD_ALWAYS, PIPETTE_RESHARD_NEVER };

struct pipette_config;

/* "core_attn,mla_up_proj" (commas or spaces), Megatron's names. */
int pipette_recompute_modules_parse(const char *s, unsigned *out, struct pipette_err *err);
/* The same back, separated by sep ("" for 0). */
void pipette_recompute_modules_format(unsigned mods, const char *sep, char *buf, size_t len);
/* The modules in effect: those of a selective configuration (0 -> core_attn),
 * nothing otherwise. */
unsigned pipette_config_recompute_modules(const struct pipette_config *c);
/* Whether EP dispatch and combine overlap with computation: on request
 * (moe.ep_overlap) or always in the stack (DualPipe). */
int pipette_config_ep_overlap(const struct pipette_config *c);

/* How routed tokens reach their experts (Megatron-Core's
 * --moe-token-dispatcher-type): all-to-all over the EP group, or the flex
 * dispatcher with DeepSeek's DeepEP kernels, which send a token once per
 * destination node over the network and fan it out over NVLink. */
enum pipette_dispatcher { PIPETTE_DISPATCH_ALLTOALL, PIPETTE_DISPATCH_DEEPEP };
const char *pipette_dispatcher_name(enum pipette_dispatcher d);
int pipette_dispatcher_parse(const char *s, enum pipette_dispatcher *out, struct pipette_err *err);

/* MoE execution (models with experts; ignored otherwise). */
struct pipette_moe_exec {
	enum pipette_dispatcher dispatcher;
	/* --moe-expert-capacity-factor: 0 = dropless; > 0 caps each expert
	 * at factor x its balanced share and drops the excess, and with pad
	 * (--moe-pad-expert-input-to-capacity) fills every expert to it. */
	double capacity_factor;
	int pad;
	/* Dispatch and combine overlapped with another micro-batch's
	 * computation (Megatron-Core's combined 1F1B,
	 * --overlap-moe-expert-parallel-comm; DualPipe). */
	int ep_overlap;
	/* The busiest EP rank's routed tokens over the mean (>= 1); 0 = the
	 * statistical default (timing.c moe_imbalance) or a routing trace. */
	double imbalance;
};

enum pipette_mapping_mode { PIPETTE_MAP_OPTIMIZE, PIPETTE_MAP_BLOCK };
/* srun: one task per GPU, any sigma; torchrun: one task per node, sigma is
 * a node order plus a per-node GPU permutation. */
enum pipette_launch_mode { PIPETTE_LAUNCH_SRUN, PIPETTE_LAUNCH_TORCHRUN };

/* "optimize"/"block" and "srun"/"torchrun", both ways. */
const char *pipette_mapping_name(enum pipette_mapping_mode m);
const char *pipette_launch_name(enum pipette_launch_mode l);
int pipette_mapping_parse(const char *s, enum pipette_mapping_mode *out, struct pipette_err *err);
int pipette_launch_parse(const char *s, enum pipette_launch_mode *out, struct pipette_err *err);

/* A pinned knob of a request; -1 leaves it to the search. */
struct pipette_pins {
	int tp, pp, dp, cp, ep, etp, vpp, micro_batch;
	int dp_shard;		/* FSDP shard degree along data parallel */
	int recompute_every;	/* full recomputation of every k-th layer */
	int schedule;		/* enum pipette_schedule_kind or -1 */
	unsigned schedule_set;	/* a list of schedules to choose from (bit 1 << kind); 0 = any */
	int recompute;		/* enum pipette_recompute or -1 */
	int sequence_parallel;	/* 0/1 or -1 */
	int distributed_optimizer;
	int reshard;		/* enum pipette_reshard or -1 */
	long recompute_modules;	/* enum pipette_recompute_module bits, or -1 */
	int dispatcher;		/* enum pipette_dispatcher or -1 */
	int ep_overlap;		/* 0/1 or -1 */
	/* The precision recipes the search may choose from (PIPETTE_PREC_BIT;
	 * one pins it); 0 = the stack's default.  Never widened by pipette:
	 * a recipe changes numerics. */
	unsigned precision_set;
};

/* The integer pins, one table for every front end: "tp" ... "vpp" and
 * "micro_batch" (also "mb" and "micro-batch"), "dp_shard" (also
 * "dp-shard") and "recompute_every" (also "recompute-every"); NULL for
 * another name. */
#define PIPETTE_INT_PINS 10
int *pipette_pin_slot(struct pipette_pins *p, const char *name);
/* Pin i of the table: its name and value. */
const char *pipette_pin_name(int i);
int pipette_pin_value(const struct pipette_pins *p, int i);
/* Every pin -1: all left to the search. */
void pipette_pins_init(struct pipette_pins *p);
/* "1f1b" or "1f1b,interleaved": one schedule pins it, several make the
 * set the search chooses from. */
int pipette_schedule_pin_parse(const char *s, struct pipette_pins *p, struct pipette_err *err);
/* Whether the pins allow schedule k. */
int pipette_pins_allow_schedule(const struct pipette_pins *p, enum pipette_schedule_kind k);

struct pipette_stack;

struct pipette_config {
	int tp, pp, dp, cp;
	int ep;			/* expert parallel (MoE only; 1 otherwise) */
	/* Fully sharded data parallelism (FSDP2, stacks with the fsdp fact):
	 * parameters, gradients and optimizer states sharded over dp_shard x
	 * cp ranks, replicated over dp / dp_shard (HSDP when both > 1).
	 * 1 = not sharded (DDP, or Megatron's distributed optimizer). */
	int dp_shard;
	enum pipette_reshard reshard;	/* resolved: always or never */
	int etp;		/* expert tensor parallel (MoE only; 1 = none) */
	int vpp;		/* model chunks per pipeline rank (1; 2 for V-shapes) */
	int micro_batch;
	long global_batch;	/* sequences per iteration */
	long seq_len;
	enum pipette_recompute recompute;
	/* With full recomputation: every k-th layer of a stage is recomputed
	 * and the others keep their activations (torchtitan's selective layer
	 * checkpointing, selective_ac_option = "k"); 1 = every layer. */
	int recompute_every;
	int sequence_parallel;
	int distributed_optimizer;
	enum pipette_schedule_kind schedule;
	enum pipette_attention attention;	/* a property of the stack, not searched */
	/* The training stack's facts (stack.h); NULL = megatron-2022, the
	 * stack the library's models were first calibrated on. */
	const struct pipette_stack *stack;
	/* Uneven pipeline split: layers of the first and the last virtual
	 * stage (0 = even; with one chunk per rank these are the first and
	 * last pipeline stages); -1 = no transformer layer, only the
	 * embedding or the loss (Megatron's pipeline layouts allow it; the
	 * zero-bubble paper's ZB-V runs that way).  The remaining layers are
	 * spread evenly over the other virtual stages. */
	int first_stage_layers;
	int last_stage_layers;
	struct pipette_compression compress;
	unsigned recompute_modules;	/* with selective (enum pipette_recompute_module) */
	struct pipette_moe_exec moe;
	/* The precision recipe of the linear layers (knobs.h), and how many
	 * transformer layers at the model's start and end it keeps in BF16
	 * (Megatron-LM --num-layers-at-start-in-bf16 / -at-end-in-bf16). */
	enum pipette_precision precision;
	int bf16_first, bf16_last;
};

/* Parse "pp:16[:epilogue],dp:128[:stages=3],emb" (any subset, comma
 * separated) into c; the message names the bad item. */
int pipette_compression_parse(const char *s, struct pipette_compression *c,
			      struct pipette_err *err);
/* The same form back ("" when off). */
void pipette_compression_format(const struct pipette_compression *c, char *buf,
				size_t len);
int pipette_compression_enabled(const struct pipette_compression *c);

/* Defaults: everything 1, no recompute, 1F1B, flash attention, BF16. */
/* The BF16 end layers a recipe keeps: counts that fit the model, and none
 * with fp8-delayed (Megatron-Core refuses it); the message names
 * --bf16-layers. */
int pipette_bf16_layers_check(const struct pipette_model *m, enum pipette_precision p,
			      int first, int last, struct pipette_err *err);
/* Whether global layer `layer` runs the configuration's low-precision
 * recipe (not BF16, and not one of the BF16 layers at the ends). */
int pipette_config_layer_lowp(const struct pipette_model *m, const struct pipette_config *c,
			      int layer);

void pipette_config_init(struct pipette_config *c);
int pipette_config_world(const struct pipette_config *c);
/* Replicas of each FSDP shard group: dp / dp_shard. */
int pipette_config_dp_replicate(const struct pipette_config *c);
/* Ranks one FSDP shard group spans: dp_shard x cp (torchtitan's
 * dp_shard_cp mesh); 1 when nothing is sharded. */
int pipette_config_shard_group(const struct pipette_config *c);
/* Whether layer-wise FSDP runs (the stack's fsdp fact). */
int pipette_config_fsdp(const struct pipette_config *c);
/* torchtitan's default: reshard after forward unless pipelining. */
enum pipette_reshard pipette_reshard_resolve(enum pipette_reshard r, int pp);
const char *pipette_reshard_name(enum pipette_reshard r);
int pipette_reshard_parse(const char *s, enum pipette_reshard *out, struct pipette_err *err);
/* Whether layer l (0-based within its pipeline stage) is recomputed. */
int pipette_config_layer_recomputed(const struct pipette_config *c, int index_in_stage);
/* Micro-batches per pipeline per iteration: B / (dp * b). */
long pipette_config_microbatches(const struct pipette_config *c);
/* Chunks per pipeline rank the schedule uses (vpp; V-shapes use 2). */
int pipette_config_chunks(const struct pipette_config *c);
/* Virtual stage (model chunk in pipeline order, 0..pp*chunks-1) that runs
 * as chunk k on pipeline rank s: k*pp + s for interleaving; for the V-shapes
 * chunk 0 runs down the ranks and chunk 1 back up (2*pp - 1 - s). */
int pipette_config_virtual_stage(const struct pipette_config *c, int s, int k);
/* Pipeline rank that runs the last virtual stage (output layer and loss):
 * pp - 1, or 0 for the V-shapes. */
int pipette_config_last_rank(const struct pipette_config *c);
/* Layers of virtual stage vs, honouring uneven splits. */
int pipette_config_vstage_layers(const struct pipette_model *m,
				 const struct pipette_config *c, int vs);
/* Layers held by pipeline rank s (all its chunks). */
int pipette_config_stage_layers(const struct pipette_model *m,
				const struct pipette_config *c, int stage);
/* First global layer index of stage s (of its first chunk). */
int pipette_config_stage_first_layer(const struct pipette_model *m,
				     const struct pipette_config *c, int stage);
/* Divisibility and range checks; the message names the offending field. */
int pipette_config_check(const struct pipette_model *m,
			 const struct pipette_config *c, struct pipette_err *err);

const char *pipette_recompute_name(enum pipette_recompute r);
int pipette_recompute_parse(const char *s, enum pipette_recompute *out,
			    struct pipette_err *err);

/* The stack of a configuration (megatron-2022 when it names none). */
const struct pipette_stack *pipette_config_stack(const struct pipette_config *c);
/* The share of TP communication left exposed for this configuration:
 * userbuffers overlap needs sequence parallelism and TP > 1. */
double pipette_stack_tp_exposed(const struct pipette_stack *s, const struct pipette_config *c);

#endif
