/* pipette: the knobs that both a training stack and a configuration name —
 * the pipeline schedules, the attention kernels and the recomputed modules — so that the stack
 * (which schedules it runs, which kernel it uses) and the configuration
 * (which one it chose) read one definition and neither includes the
 * other. */
#ifndef PIPETTE_KNOBS_H
#define PIPETTE_KNOBS_H

#include <stddef.h>

#include "inputs/error.h"
#include "inputs/kernels.h"

enum pipette_schedule_kind {
	PIPETTE_SCHED_1F1B,
	PIPETTE_SCHED_INTERLEAVED,	/* interleaved 1F1B, vpp chunks per rank */
	PIPETTE_SCHED_ZB_H1,		/* zero bubble H1 (Qi et al., ICLR'24) */
	PIPETTE_SCHED_V_MIN,		/* V-shape schedules (Qi et al., NeurIPS'24) */
	PIPETTE_SCHED_V_HALF,
	PIPETTE_SCHED_V_ZB,
	/* torch.distributed.pipelining (tests/data/stacks/torch-schedules.md) */
	PIPETTE_SCHED_GPIPE,		/* every forward, then every backward */
	PIPETTE_SCHED_INTERLEAVED_ZB,	/* ScheduleInterleavedZeroBubble, W split */
	PIPETTE_SCHED_ZBV,		/* ScheduleZBVZeroBubble: V, torch's fixed order */
	PIPETTE_SCHED_DUALPIPE_V,	/* ScheduleDualPipeV (DeepSeek's DualPipeV) */
	/* DeepSeek-V3's DualPipe (arXiv 2412.19437 §3.2.1): two copies of
	 * the pipeline fed from both ends; timed as DualPipeV's order, its
	 * half-size form (deepseek-ai/DualPipe README), with the parameters
	 * and gradients of both copies (memory.c). */
	PIPETTE_SCHED_DUALPIPE,
	PIPETTE_SCHED_COUNT
};

/* The attention kernel.  Memory-efficient fused attention (FlashAttention,
 * Dao et al., NeurIPS 2022, or cuDNN's fused kernel: Megatron-Core's
 * --attention-backend auto picks one) keeps no s x s score matrix and skips
 * the masked half of a causal product; the unfused kernel of Megatron
 * before 2022 (the runs of Narayanan et al. 2021 and Korthikanti et al.
 * 2022) stores the scores, softmax and dropout (5as^2b bytes per layer)
 * and computes the whole product. */
enum pipette_attention {
	PIPETTE_ATTN_FLASH,
	PIPETTE_ATTN_UNFUSED,
};

const char *pipette_schedule_name(enum pipette_schedule_kind k);
/* Layouts: the V (rank r holds stages r and 2p-1-r), looped (chunk k of
 * rank r is stage k*p + r), and whether the backward's weight gradient
 * is a separate operation. */
#define PIPETTE_SCHED_BIT(k) (1u << (k))
#define PIPETTE_SCHED_DUALPIPES (PIPETTE_SCHED_BIT(PIPETTE_SCHED_DUALPIPE_V) | \
				 PIPETTE_SCHED_BIT(PIPETTE_SCHED_DUALPIPE))
#define PIPETTE_SCHED_VS (PIPETTE_SCHED_BIT(PIPETTE_SCHED_V_MIN) | \
			  PIPETTE_SCHED_BIT(PIPETTE_SCHED_V_HALF) | \
			  PIPETTE_SCHED_BIT(PIPETTE_SCHED_V_ZB) | \
			  PIPETTE_SCHED_BIT(PIPETTE_SCHED_ZBV) | PIPETTE_SCHED_DUALPIPES)
#define PIPETTE_SCHED_LOOPED (PIPETTE_SCHED_BIT(PIPETTE_SCHED_INTERLEAVED) | \
			      PIPETTE_SCHED_BIT(PIPETTE_SCHED_INTERLEAVED_ZB))

/* One mask test each, inline: the search, the memory model and the
 * schedule builder ask them per candidate, per layer and per operation. */
static inline int pipette_schedule_in(enum pipette_schedule_kind k, unsigned set)
{
	return (unsigned)k < PIPETTE_SCHED_COUNT && (PIPETTE_SCHED_BIT(k) & set);
}

static inline int pipette_schedule_is_v(enum pipette_schedule_kind k)
{
	return pipette_schedule_in(k, PIPETTE_SCHED_VS);
}

/* DualPipeV or DualPipe (the same order here). */
static inline int pipette_schedule_is_dualpipe(enum pipette_schedule_kind k)
{
	return pipette_schedule_in(k, PIPETTE_SCHED_DUALPIPES);
}

static inline int pipette_schedule_is_looped(enum pipette_schedule_kind k)
{
	return pipette_schedule_in(k, PIPETTE_SCHED_LOOPED);
}
int pipette_schedule_splits_w(enum pipette_schedule_kind k);
int pipette_schedule_parse(const char *s, enum pipette_schedule_kind *out,
			   struct pipette_err *err);
/* Megatron-Core's --recompute-modules (TransformerConfig.recompute_modules,
 * megatron/core/transformer/transformer_config.py:560 and :1940-1989 of
 * NVIDIA/Megatron-LM @d98e8a64): with selective recomputation, the
 * submodules whose outputs are dropped after the forward pass and
 * recomputed for the backward.  0 with selective = Megatron's default,
 * core_attn alone. */
enum pipette_recompute_module {
	PIPETTE_RM_CORE_ATTN = 1u << 0,	/* the attention kernel */
	PIPETTE_RM_MOE_ACT = 1u << 1,	/* the routed experts' activation function */
	PIPETTE_RM_LAYERNORM = 1u << 2,	/* the input and pre-MLP norms */
	PIPETTE_RM_MLA_UP_PROJ = 1u << 3,	/* MLA's Q and KV up-projections (and RoPE) */
	PIPETTE_RM_MLP = 1u << 4,	/* a dense layer's MLP */
	PIPETTE_RM_MOE = 1u << 5,	/* the whole MoE block */
	PIPETTE_RM_SHARED_EXPERTS = 1u << 6,	/* the shared experts */
};
#define PIPETTE_RM_COUNT 7

const char *pipette_attention_name(enum pipette_attention a);
int pipette_attention_parse(const char *s, enum pipette_attention *out,
			    struct pipette_err *err);
/* The numerics of the linear layers' GEMMs: the precision recipe a job
 * trains with.  A plan never changes it unasked (it changes numerics).
 *   bf16           BF16 GEMMs (FP32 accumulation), the baseline;
 *   fp8-delayed    FP8 with one scale per tensor from an amax history
 *                  (Transformer Engine DelayedScaling; Megatron-LM
 *                  --fp8-recipe delayed);
 *   fp8-current    FP8 with one scale per tensor from its own amax
 *                  (TE Float8CurrentScaling, Megatron's "tensorwise",
 *                  torchao's tensorwise);
 *   fp8-rowwise    FP8 with one scale per row (torchao's rowwise);
 *   fp8-blockwise  FP8 with 1x128 scales for activations and gradients,
 *                  128x128 for weights (TE Float8BlockScaling, Megatron's
 *                  "blockwise"; DeepSeek-V3 §3.3);
 *   mxfp8          FP8 E4M3 with an E8M0 scale per 32 values
 *                  (TE MXFP8BlockScaling; Blackwell's tensor cores);
 *   nvfp4          FP4 E2M1 with an E4M3 scale per 16 values and one FP32
 *                  per tensor (TE NVFP4BlockScaling; Blackwell).
 * Sources: NVIDIA/TransformerEngine @d0067d0d transformer_engine/common/
 * recipe/__init__.py:173-496, NVIDIA/Megatron-LM @d98e8a64
 * megatron/core/fp8_utils.py:771-791. */
enum pipette_precision {
	PIPETTE_PREC_BF16,
	PIPETTE_PREC_FP8_DELAYED,
	PIPETTE_PREC_FP8_CURRENT,
	PIPETTE_PREC_FP8_ROWWISE,
	PIPETTE_PREC_FP8_BLOCKWISE,
	PIPETTE_PREC_MXFP8,
	PIPETTE_PREC_NVFP4,
	PIPETTE_PREC_COUNT
};
#define PIPETTE_PREC_BIT(p) (1u << (p))

/* What a recipe stores and moves, bytes per element (knobs.c has the
 * derivations and sources). */
struct pipette_precision_facts {
	enum pipette_gemm_dtype gemm;	/* the linear layers' GEMMs */
	double saved;		/* a GEMM input saved for the weight gradient */
	double stored;		/* one quantized copy of a tensor, scales included */
	/* quantized copies a weight keeps: on GPUs whose FP8 GEMMs take only
	 * the TN layout (Hopper) and on Blackwell */
	double weight_copies_tn, weight_copies;
	/* HBM traffic of quantizing one bf16 element, both orientations */
	double cast_tn, cast;
	int amax_pass;		/* the scale needs a pass over the tensor first */
};
const struct pipette_precision_facts *pipette_precision_facts(enum pipette_precision p);
/* A GEMM dtype's name in kernel tables ("bf16", "fp8-tensorwise",
 * "fp8-rowwise", "mxfp8", "nvfp4"; kernels.py's dtype column). */
const char *pipette_gemm_dtype_name(enum pipette_gemm_dtype d);
const char *pipette_precision_name(enum pipette_precision p);
/* One name, or a comma-separated list into a set of PIPETTE_PREC_BIT. */
int pipette_precision_parse(const char *s, enum pipette_precision *out, struct pipette_err *err);
int pipette_precision_set_parse(const char *s, unsigned *set, struct pipette_err *err);
/* "bf16, fp8-current" */
void pipette_precision_set_text(unsigned set, char *buf, size_t len);

/* Index of s in names[0..n) (case-insensitive), or -1. */
int pipette_name_index(const char *s, const char *const *names, int n);

#endif
