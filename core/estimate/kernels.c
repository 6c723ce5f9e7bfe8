#include "estimate/kernels.h"

double pipette_kernel_gemm_s(const struct pipette_kernels *k, enum pipette_gemm_dtype dt,
			     double m, double n, double kk)
{
	const struct pipette_gemm_fit *f = &k->gemm[dt];

	if (m <= 0 || n <= 0 || kk <= 0)
		return 0;
	if (f->tflops <= 0)
		f = &k->gemm[PIPETTE_GEMM_BF16];
	return f->t0_s + 2.0 * m * n * kk / (f->tflops * 1e12) + m * n * f->out_s;
}

double pipette_kernel_attn_s(const struct pipette_kernels *k, int backward, int flash2,
			     double flops, double rows)
{
	const struct pipette_attn_fit *f = backward ? &k->attn_bwd : &k->attn_fwd;
	double rate = f->tflops * 1e12 * (flash2 && k->flash2_share > 0 ? k->flash2_share : 1.0);

	if (flops <= 0)
		return 0;
	return f->t0_s + flops / rate + rows * f->row_s;
}
