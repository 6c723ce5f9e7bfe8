/* pipette-probe --kernels: the GEMMs of Llama 3 layers timed on this node's
 * first GPU, in the CSV that `pipette kernels fit` reads.
 *
 * The grid is the one tests/data/kernels/kernels.py times with PyTorch:
 * for the 8B, 70B and 405B layer widths, TP 1, 2, 4 and 8 and T = 1024 ..
 * 16384 tokens, each linear layer of a block (QKV and FC1 column-parallel,
 * O and FC2 row-parallel) in its forward (m=T, n=N/tp, k=K), data-gradient
 * (m=T, n=K, k=N/tp) and weight-gradient (m=K, n=N/tp, k=T) shapes; in BF16
 * (cublasGemmEx, FP32 accumulation, what torch.mm runs) and, on GPUs with
 * FP8 tensor cores (compute capability 8.9 and later), FP8 E4M3 x E4M3 with
 * BF16 output and tensorwise scales (cublasLtMatmul, the kernel
 * torch._scaled_mm runs).  Attention is not timed here: cuDNN's fused
 * attention has no C API short of its graph frontend, so a site table
 * from the probe carries GEMMs and the GPU type's attention stays.
 *
 * Each time is the median of CUDA-event timings after a warm-up, with
 * repetitions sized to about 20 ms, as kernels.py does. */
#include "autoconf.h"

#include "gpu.h"

#include "inputs/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_CUDA
/* cublasLt.h declares f() without (void); not ours to fix. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

/* kernels.py's MODELS: hidden, query width, key/value width, ffn. */
static const struct {
	const char *name;
	int h, qw, kvw, ffn;
} kg_models[] = {
	{ "8b", 4096, 4096, 1024, 14336 },
	{ "70b", 8192, 8192, 1024, 28672 },
	{ "405b", 16384, 16384, 1024, 53248 },
};
static const int kg_tps[] = { 1, 2, 4, 8 };
/* kernels.py's token order: the common sizes first, so a budget that runs
 * out leaves the shapes training uses most. */
static const int kg_tokens[] = { 4096, 8192, 16384, 2048, 1024 };

#define KG_TARGET_S 0.02	/* repetitions sized to about this long */
#define KG_MAX_REPS 50

static double kg_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int kg_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define KCK(call, what) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
	pipette_fail(err, "%s: %s", (what), cudaGetErrorString(e_)); goto out; } } while (0)

struct kg_ctx {
	cublasHandle_t blas;
	cublasLtHandle_t lt;
	cudaEvent_t ea, eb;
	void *a, *b, *c, *ws;
	void *a8, *b8;		/* the FP8 operands */
	size_t cap;		/* bytes of each operand buffer */
	size_t ws_bytes;
	float *scale;		/* one device float, 1.0: the tensorwise scales */
	int fp8;
};

/* One GEMM of the grid: BF16 (dt 0) or FP8 tensorwise (dt 1), row-major
 * C[m,n] = A[m,k] B[k,n] as torch writes it. */
static int kg_gemm(struct kg_ctx *x, int dt, int m, int n, int k)
{
	const float one = 1.0f, zero = 0.0f;

	if (dt == 0)	/* row-major C = A B is column-major C^T = B^T A^T */
		return cublasGemmEx(x->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, x->b,
				    CUDA_R_16BF, n, x->a, CUDA_R_16BF, k, &zero, x->c,
				    CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
				    CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS ? 0 : -1;
	{
		/* FP8 takes the TN layout only: C^T(n x m) = B'(k x n)^T A'(k x m),
		 * both operands k-major, as torch._scaled_mm arranges them. */
		cublasLtMatmulDesc_t op = NULL;
		cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
		cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
		cublasLtMatmulPreference_t pref = NULL;
		cublasLtMatmulHeuristicResult_t hr;
		int found = 0, rv = -1;

		if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
		    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)) ||
		    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)) ||
		    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
						   &x->scale, sizeof(x->scale)) ||
		    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
						   &x->scale, sizeof(x->scale)) ||
		    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, n, k) ||
		    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, m, k) ||
		    cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n) ||
		    cublasLtMatmulPreferenceCreate(&pref) ||
		    cublasLtMatmulPreferenceSetAttribute(pref,
							 CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
							 &x->ws_bytes, sizeof(x->ws_bytes)) ||
		    cublasLtMatmulAlgoGetHeuristic(x->lt, op, la, lb, lc, lc, pref, 1, &hr, &found) ||
		    !found)
			goto done;
		rv = cublasLtMatmul(x->lt, op, &one, x->b8, la, x->a8, lb, &zero, x->c, lc, x->c, lc,
				    &hr.algo, x->ws, x->ws_bytes, 0) == CUBLAS_STATUS_SUCCESS ? 0 : -1;
done:
		if (pref)
			cublasLtMatmulPreferenceDestroy(pref);
		if (lc)
			cublasLtMatrixLayoutDestroy(lc);
		if (lb)
			cublasLtMatrixLayoutDestroy(lb);
		if (la)
			cublasLtMatrixLayoutDestroy(la);
		if (op)
			cublasLtMatmulDescDestroy(op);
		return rv;
	}
}

/* The median time of one GEMM, or -1 when cuBLAS refused it. */
static double kg_time(struct kg_ctx *x, int dt, int m, int n, int k)
{
	double ts[KG_MAX_REPS], one;
	float ms;
	int r, reps;

	for (r = 0; r < 2; r++)
		if (kg_gemm(x, dt, m, n, k))
			return -1;
	if (cudaEventRecord(x->ea, 0) || kg_gemm(x, dt, m, n, k) || cudaEventRecord(x->eb, 0) ||
	    cudaEventSynchronize(x->eb) || cudaEventElapsedTime(&ms, x->ea, x->eb))
		return -1;
	one = fmax(ms / 1e3, 1e-6);
	reps = (int)fmin(KG_MAX_REPS, fmax(3, KG_TARGET_S / one));
	for (r = 0; r < reps; r++) {
		if (cudaEventRecord(x->ea, 0) || kg_gemm(x, dt, m, n, k) ||
		    cudaEventRecord(x->eb, 0) || cudaEventSynchronize(x->eb) ||
		    cudaEventElapsedTime(&ms, x->ea, x->eb))
			return -1;
		ts[r] = ms / 1e3;
	}
	qsort(ts, (size_t)reps, sizeof(ts[0]), kg_cmp);
	return ts[reps / 2];
}

/* The largest operand of the grid, in elements: 405B's FC1 at TP 1 and
 * T = 16384 (16384 x 106496). */
static size_t kg_largest(void)
{
	size_t big = 0, i, j;

	for (i = 0; i < sizeof(kg_models) / sizeof(kg_models[0]); i++) {
		size_t n[4] = { (size_t)kg_models[i].qw + 2 * kg_models[i].kvw,
				(size_t)kg_models[i].h, 2 * (size_t)kg_models[i].ffn,
				(size_t)kg_models[i].ffn };

		for (j = 0; j < 4; j++) {
			size_t e = n[j] * (size_t)kg_models[i].h > n[j] * 16384
				   ? n[j] * (size_t)kg_models[i].h : n[j] * 16384;

			if (e > big)
				big = e;
		}
	}
	return big;
}

/* E4M3 (1 sign, 4 exponent bits biased by 7, 3 mantissa bits) nearest
 * below |v| for v in [-1, 1]: normal values from 2^-6, subnormals below,
 * never the NaN pattern (OCP 8-bit floating point specification, rev. 1.0,
 * 2023, §5.1: E4M3 has no infinities and S.1111.111 is NaN). */
static uint8_t kg_e4m3(double v)
{
	uint8_t sign = v < 0 ? 0x80 : 0;
	double a = fabs(v);
	int e;

	if (a < 0x1p-9)
		return sign;
	if (a < 0x1p-6)		/* subnormal: m x 2^-9 */
		return sign | (uint8_t)(a * 512);
	e = (int)floor(log2(a));
	return sign | (uint8_t)((e + 7) << 3) | (uint8_t)((a / ldexp(1, e) - 1) * 8);
}

/* Random values in [-1, 1] over n elements at dev: BF16 (fp8 0) or E4M3.
 * A GEMM's clock, and so its time, depends on how many bits its operands
 * toggle (constant operands ran the grid 17% faster on an H100 than
 * kernels.py's random ones): one 32 MiB host block of random values,
 * copied over the buffer. */
#define KG_BLOCK (32u << 20)
static int kg_fill(void *dev, size_t n, int fp8, uint64_t seed, struct pipette_err *err)
{
	uint8_t *h = malloc(KG_BLOCK);
	size_t size = fp8 ? 1 : 2, bytes = n * size, done = 0, i;
	int rv = -1;

	if (!h)
		return pipette_fail(err, "out of memory");
	for (i = 0; i < KG_BLOCK / size; i++) {
		double v = 2.0 * pipette_rng_unit(&seed) - 1.0;

		if (fp8) {
			h[i] = kg_e4m3(v);
		} else {
			float f = (float)v;
			uint32_t bits;

			memcpy(&bits, &f, sizeof(bits));
			h[2 * i] = (uint8_t)(bits >> 16);	/* BF16: the top half, */
			h[2 * i + 1] = (uint8_t)(bits >> 24);	/* little-endian */
		}
	}
	while (done < bytes) {
		size_t c = bytes - done < KG_BLOCK ? bytes - done : KG_BLOCK;

		KCK(cudaMemcpy((uint8_t *)dev + done, h, c, cudaMemcpyHostToDevice),
		    "cudaMemcpy (GEMM operand)");
		done += c;
	}
	rv = 0;
out:
	free(h);
	return rv;
}

static int kg_open(struct kg_ctx *x, struct pipette_err *err)
{
	struct cudaDeviceProp p;
	int rv = -1;

	memset(x, 0, sizeof(*x));
	x->cap = kg_largest() * 2;	/* BF16 */
	x->ws_bytes = 32u << 20;
	KCK(cudaSetDevice(0), "cudaSetDevice");
	KCK(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
	x->fp8 = p.major * 10 + p.minor >= 89;
	if (cublasCreate(&x->blas) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtCreate(&x->lt) != CUBLAS_STATUS_SUCCESS) {
		pipette_fail(err, "cuBLAS could not start");
		goto out;
	}
	KCK(cudaEventCreate(&x->ea), "cudaEventCreate");
	KCK(cudaEventCreate(&x->eb), "cudaEventCreate");
	KCK(cudaMalloc(&x->a, x->cap), "cudaMalloc (GEMM operand)");
	KCK(cudaMalloc(&x->b, x->cap), "cudaMalloc (GEMM operand)");
	KCK(cudaMalloc(&x->c, x->cap), "cudaMalloc (GEMM output)");
	KCK(cudaMalloc(&x->ws, x->ws_bytes), "cudaMalloc (workspace)");
	KCK(cudaMalloc((void **)&x->scale, sizeof(float)), "cudaMalloc (scale)");
	{
		const float one = 1.0f;

		KCK(cudaMemcpy(x->scale, &one, sizeof(one), cudaMemcpyHostToDevice),
		    "cudaMemcpy (scale)");
	}
	KCK(cudaMalloc(&x->a8, x->cap / 2), "cudaMalloc (FP8 operand)");
	KCK(cudaMalloc(&x->b8, x->cap / 2), "cudaMalloc (FP8 operand)");
	if (kg_fill(x->a, x->cap / 2, 0, 1, err) || kg_fill(x->b, x->cap / 2, 0, 2, err) ||
	    kg_fill(x->a8, x->cap / 2, 1, 3, err) || kg_fill(x->b8, x->cap / 2, 1, 4, err))
		goto out;
	rv = 0;
out:
	return rv;
}

static void kg_close(struct kg_ctx *x)
{
	if (x->a)
		cudaFree(x->a);
	if (x->b)
		cudaFree(x->b);
	if (x->c)
		cudaFree(x->c);
	if (x->ws)
		cudaFree(x->ws);
	if (x->a8)
		cudaFree(x->a8);
	if (x->b8)
		cudaFree(x->b8);
	if (x->scale)
		cudaFree(x->scale);
	if (x->ea)
		cudaEventDestroy(x->ea);
	if (x->eb)
		cudaEventDestroy(x->eb);
	if (x->lt)
		cublasLtDestroy(x->lt);
	if (x->blas)
		cublasDestroy(x->blas);
}

/* The three GEMMs of one linear layer (op: 0 QKV, 1 O, 2 FC1, 3 FC2) of
 * model mi at TP tp over T tokens, in each dtype the GPU has: CSV rows. */
static void kg_layer_op(struct kg_ctx *x, FILE *csv, FILE *progress, const char *gpu,
			size_t mi, int tp, int T, int op, int *rows)
{
	static const char *const dtypes[] = { "bf16", "fp8-tensorwise" };
	static const char *const ops[] = { "qkv", "o", "fc1", "fc2" };
	static const char *const passes[] = { "fwd", "dgrad", "wgrad" };
	const int h = kg_models[mi].h;
	const int K[4] = { h, kg_models[mi].qw / tp, h, kg_models[mi].ffn / tp };
	const int N[4] = { (kg_models[mi].qw + 2 * kg_models[mi].kvw) / tp, h,
			   2 * kg_models[mi].ffn / tp, h };
	const int shape[3][3] = { { T, N[op], K[op] }, { T, K[op], N[op] },
				  { K[op], N[op], T } };

	for (int s = 0; s < 3; s++)
		for (int dt = 0; dt < 1 + x->fp8; dt++) {
			int m = shape[s][0], n = shape[s][1], k = shape[s][2];
			double flops = 2.0 * m * n * k, sec = kg_time(x, dt, m, n, k);

			if (sec <= 0) {
				if (progress)
					fprintf(progress, "pipette-probe: kernel grid: cuBLAS "
						"refused %s %dx%dx%d; left out\n", dtypes[dt], m,
						n, k);
				continue;
			}
			fprintf(csv, "%s,gemm,%s,%d,%d,%s,%s,%s,%d,%d,%d,%.1f,%.9g,%.6g\n", gpu,
				kg_models[mi].name, tp, T, ops[op], passes[s], dtypes[dt], m, n, k,
				flops, sec, flops / sec / 1e12);
			++*rows;
		}
}

int pipette_probe_kernel_grid(FILE *csv, FILE *progress, double budget_s, int *rows,
			      struct pipette_err *err)
{
	struct cudaDeviceProp p;
	struct kg_ctx x;
	double t0 = kg_now();
	size_t ti, mi, pi;
	int rv = -1, op;

	*rows = 0;
	if (kg_open(&x, err))
		goto out;
	KCK(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
	/* the GPU's name becomes a CSV field: no commas in it */
	for (char *c = p.name; *c; c++)
		if (*c == ',' || *c == '"' || *c == '\n')
			*c = ' ';
	fprintf(csv, "gpu,kind,model,tp,tokens_or_seq,op,pass,dtype,m,n,k,flops,seconds,"
		"tflops\n");
	for (ti = 0; ti < sizeof(kg_tokens) / sizeof(kg_tokens[0]); ti++)
		for (mi = 0; mi < sizeof(kg_models) / sizeof(kg_models[0]); mi++)
			for (pi = 0; pi < sizeof(kg_tps) / sizeof(kg_tps[0]); pi++)
				for (op = 0; op < 4; op++) {
					if (kg_now() - t0 > budget_s) {
						if (progress)
							fprintf(progress, "pipette-probe: kernel "
								"grid: the budget of %.0f s is "
								"spent; %d rows\n", budget_s, *rows);
						rv = 0;
						goto out;
					}
					kg_layer_op(&x, csv, progress, p.name, mi, kg_tps[pi],
						    kg_tokens[ti], op, rows);
				}
	rv = 0;
out:
	kg_close(&x);
	return rv;
}
#else
int pipette_probe_kernel_grid(FILE *csv, FILE *progress, double budget_s, int *rows,
			      struct pipette_err *err)
{
	(void)csv;
	(void)progress;
	(void)budget_s;
	*rows = 0;
	return pipette_fail(err, "--kernels: this pipette-probe was built without CUDA");
}
#endif
