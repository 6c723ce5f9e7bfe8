/* pipette: the time of one GEMM or attention kernel on a GPU type, from
 * its measured kernel table (inputs/kernels.h) where it has one. */
#ifndef PIPETTE_EST_KERNELS_H
#define PIPETTE_EST_KERNELS_H

#include "inputs/hardware.h"
#include "inputs/kernels.h"

/* Seconds of an (m, n, k) GEMM in dtype under a GPU type's table; a
 * dtype the table lacks runs at the BF16 fit (the caller, which knows the
 * peaks, decides whether to scale it). */
double pipette_kernel_gemm_s(const struct pipette_kernels *k, enum pipette_gemm_dtype dt,
			     double m, double n, double kk);
/* Seconds of one pass of fused causal attention of `flops` (the causal
 * half counted) over `rows` query rows (batch x heads x queries) with the
 * table's kernel; flash2 = FlashAttention-2's. */
double pipette_kernel_attn_s(const struct pipette_kernels *k, int backward, int flash2,
			     double flops, double rows);

#endif
