/* pipette: the knobs that both a training stack and a configuration name —
 * the pipeline schedules, the attention kernels and the recomputed modules — so that the stack
 * (which schedules it runs, which kernel it uses) and the configuration
 * (which one it chose) read one definition and neither includes the
 * other. */
#ifndef PIPETTE_KNOBS_H
#define PIPETTE_KNOBS_H

#include "inputs/error.h"

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
int pipette_schedule_is_v(enum pipette_schedule_kind k);
/* DualPipeV or DualPipe (the same order here). */
int pipette_schedule_is_dualpipe(enum pipette_schedule_kind k);
int pipette_schedule_is_looped(enum pipette_schedule_kind k);
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
/* Index of s in names[0..n) (case-insensitive), or -1. */
int pipette_name_index(const char *s, const char *const *names, int n);

#endif
