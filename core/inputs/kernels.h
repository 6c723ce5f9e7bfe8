/* pipette: measured kernel rates of a GPU type (the system side).
 *
 * A GEMM of shape (m, n, k) takes
 *     t = t0 + 2mnk / rate + m*n*t_out
 * on one GPU: a fixed cost per kernel (launch, prologue, the last wave's
 * tail), the tensor cores' sustained rate, and the epilogue's cost per
 * output element (the accumulator converted and written to HBM).  The
 * attention kernel, causal, takes t = t0 + flops / rate + rows * t_row
 * per pass.  Each
 * GPU type that has a measured table carries the fit of it (hardware.c);
 * learn/kernelfit.h fits a table, estimate/kernels.h evaluates it. */
#ifndef PIPETTE_KERNELS_H
#define PIPETTE_KERNELS_H

/* The operand types a GEMM runs in: BF16 (cuBLAS), FP8 E4M3 x E4M3 with
 * one scale per tensor (Transformer Engine's delayed and current scaling,
 * torchao's tensorwise) or one per row (torchao's rowwise; DeepSeek-V3's
 * 1x128 / 128x128 blocks are as fine), BF16 output.  Blackwell's MXFP8
 * and NVFP4 (block scales in the tensor cores) have their own rows where a
 * table holds them. */
enum pipette_gemm_dtype {
	PIPETTE_GEMM_BF16,
	PIPETTE_GEMM_FP8_TENSOR,
	PIPETTE_GEMM_FP8_ROW,
	PIPETTE_GEMM_MXFP8,	/* Blackwell's block-scaled FP8 */
	PIPETTE_GEMM_NVFP4,	/* Blackwell's block-scaled FP4 */
	PIPETTE_GEMM_DTYPE_COUNT
};

struct pipette_gemm_fit {
	double t0_s;		/* fixed cost of one kernel, s */
	double tflops;		/* sustained rate, TFLOP/s */
	double out_s;		/* epilogue, s per output element */
};

/* Fused causal attention, one pass (forward, or backward alone):
 * t = t0 + flops / rate + rows * t_row, rows = batch x heads x queries
 * (each query row's softmax statistics and output, or its gradients,
 * written once: the attention's epilogue, as the GEMM's per element). */
struct pipette_attn_fit {
	double t0_s;
	double tflops;
	double row_s;
};

struct pipette_kernels {
	struct pipette_gemm_fit gemm[PIPETTE_GEMM_DTYPE_COUNT];	/* tflops 0: not measured */
	struct pipette_attn_fit attn_fwd, attn_bwd;		/* cuDNN's fused kernel */
	/* FlashAttention-2's rate over the measured kernel's, same shapes */
	double flash2_share;
	/* The share of these kernels' rate a whole training step attains on
	 * this GPU type (launch gaps, synchronisation, the kernels' clocks
	 * under a full step's power draw): the step's compute is the kernels'
	 * time over it.  Fitted on published runs of the stack family the
	 * table's GPU was calibrated on (hardware.c names them). */
	double step_share;
	const char *source;
};

#endif
