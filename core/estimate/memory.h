/* pipette: per-GPU memory estimate, per pipeline stage.
 *
 * Parameters, gradients and optimizer states follow Megatron's
 * theoretical_memory_usage.py (18 bytes/parameter, or 6 + 12/DP with the
 * distributed optimizer); activations follow Korthikanti et al. (MLSys'23)
 * for GELU/LayerNorm (GPT) blocks and Fujii et al. (arXiv 2411.06465) for
 * SwiGLU/GQA (Llama) blocks; in-flight micro-batches come from the
 * pipeline schedule (schedule.h).  Sources: NVIDIA/Megatron-LM
 * megatron/training/theoretical_memory_usage.py @d98e8a64dd (bytes per
 * parameter :293-303, activations :308-452); Korthikanti et al., MLSys'23
 * (arXiv 2205.05198), Table 2; for Fujii et al. the paper's body could not
 * be read, so its formula is taken from the author's own estimator,
 * okoge-kaz/okoge-kaz.github.io static/js/memory-estimator.js @837b9f48
 * (calculate()). */
#ifndef PIPETTE_MEMORY_H
#define PIPETTE_MEMORY_H

#include "inputs/config.h"
#include "inputs/hardware.h"
#include "inputs/model.h"

/* megatron-2022's rule, feasible when peak <= fraction * HBM: Fujii et
 * al. found no OOM in 454 A100/H100 runs whose estimate stayed below 80%
 * of device memory.  The current stacks count the allocator's reserve
 * (stack.h) and compare with the whole HBM (fraction 1). */
#define PIPETTE_DEFAULT_MEM_FRACTION 0.8

struct pipette_stage_memory {
	int layers;
	double inflight;	/* peak in-flight micro-batches (full-stage units) */
	double params_bytes;
	double grads_bytes;
	double optimizer_bytes;
	double activations_bytes;
	double other_bytes;	/* CUDA context, NCCL buffers, temporaries */
	double reserve_bytes;	/* the allocator's reserve the stack's rule adds */
	double transient_bytes;	/* activations and temporaries: what the reserve is a share of */
	double outside_bytes;	/* of other_bytes, what lies outside torch's allocator
				 * (the CUDA context, NCCL's buffers) */
	double stage_params;	/* parameters this GPU holds unsharded (after TP/EP) */
	double expert_params;	/* of them, the routed experts' */
	double layer_params;	/* of them, the largest transformer layer's */
	double offloaded_bytes;	/* activations in host memory (CPU offloading), not counted */
	double total_bytes;
};

struct pipette_memory {
	double peak_bytes;	/* the most-loaded stage's total */
	int peak_stage;
	double capacity_bytes;	/* HBM */
	double limit_bytes;	/* fraction * HBM */
	int fits;
	/* Breakdown of the most-loaded stage. */
	struct pipette_stage_memory peak;
};

/* Activation bytes of one transformer layer for one micro-batch, on one
 * GPU, as stored for the backward pass (before the in-flight factor). */
double pipette_memory_layer_activations(const struct pipette_model *m,
					const struct pipette_config *c, int layer);

/* CPU activation offloading (the stack's offload_layers, N): what the
 * first N layers of the (only) stage save for one micro-batch, the bytes
 * that go to host memory and come back. */
double pipette_memory_offloaded_activations(const struct pipette_model *m,
					    const struct pipette_config *c);

/* Routed token copies the busiest EP rank holds per token of its own:
 * topk, times the load imbalance (dropless) or the capacity factor. */
double pipette_moe_routed_factor(const struct pipette_model *m, const struct pipette_config *c);

/* Estimate stage s.  inflight: peak in-flight micro-batches held by the
 * stage, in units of full-stage micro-batches (from the schedule); pass a
 * negative value to use the schedule's analytic figure.  gpu decides the
 * layouts a low-precision weight keeps (NULL: a TN-only FP8 GPU, as
 * Hopper). */
void pipette_memory_stage(const struct pipette_model *m, const struct pipette_gpu_spec *gpu,
			  const struct pipette_config *c, int stage,
			  double inflight, struct pipette_stage_memory *out);

/* Estimate all stages.  inflight (may be NULL) has c->pp entries;
 * per_stage (may be NULL) receives c->pp entries. */
void pipette_memory_estimate(const struct pipette_model *m,
			     const struct pipette_gpu_spec *gpu,
			     const struct pipette_config *c, double mem_fraction,
			     const double *inflight,
			     struct pipette_stage_memory *per_stage,
			     struct pipette_memory *out);

/* pipette_memory_estimate with the schedule's analytic in-flight counts,
 * stage 0 given as pipette_memory_stage priced it (inflight < 0): the
 * search prices stage 0 first and the others only when it fits. */
void pipette_memory_estimate_rest(const struct pipette_model *m,
				  const struct pipette_gpu_spec *gpu,
				  const struct pipette_config *c, double mem_fraction,
				  const struct pipette_stage_memory *stage0,
				  struct pipette_memory *out);

#endif
