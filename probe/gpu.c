#include "autoconf.h"

#include "gpu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "net.h"
#include "inputs/rng.h"

#ifdef HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif
#ifdef HAVE_NCCL
/* nccl.h declares f() without (void); not ours to fix. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#endif

int pipette_probe_gemm_fit(const double *gflop, const double *tflops, size_t n,
			   double *max_tflops, double *half_gflop,
			   struct pipette_err *err)
{
	double x[PIPETTE_PROBE_MAX_GEMMS], y[PIPETTE_PROBE_MAX_GEMMS];
	struct pipette_probe_fit f;
	size_t i, m = 0;

	for (i = 0; i < n && m < PIPETTE_PROBE_MAX_GEMMS; i++)
		if (gflop[i] > 0 && tflops[i] > 0) {
			x[m] = 1.0 / gflop[i];
			y[m] = 1.0 / tflops[i];
			m++;
		}
	/* The α–β fit is the same straight line: intercept 1/R_max, slope
	 * G_half/R_max.  A clamped fit means R_max → ∞: no saturation seen. */
	if (pipette_probe_fit_alpha_beta(x, y, m, &f, err))
		return pipette_fail_prefix(err, "GEMM curve: ");
	if (f.clamped)
		return pipette_fail(err, "GEMM curve: the rate does not saturate "
				    "over the measured sizes");
	*max_tflops = 1.0 / f.alpha_s;
	*half_gflop = (1.0 / f.beta_Bps) * *max_tflops;
	return 0;
}

void pipette_probe_local_destroy(struct pipette_probe_local *l)
{
	if (!l)
		return;
	free(l->gpu_name);
	free(l->gpu_pci);
	free(l->p2p_gbps);
	free(l->nccl_gbps);
	free(l->p2p_access);
	free(l->p2p_rank);
	free(l->p2p_atomic);
	free(l->hbm_gbps);
	free(l);
}

#ifndef HAVE_CUDA

int pipette_probe_gpu_count(struct pipette_err *err)
{
	return pipette_fail(err, "this pipette-probe was built without CUDA "
			    "(configure did not find /usr/local/cuda); "
			    "--transport tcp and --topology still work");
}

int pipette_probe_local_run(const struct pipette_probe_opts *opts, FILE *progress,
			    struct pipette_probe_local **out,
			    struct pipette_err *err)
{
	(void)opts; (void)progress;
	*out = NULL;
	return pipette_probe_gpu_count(err);
}

#else /* HAVE_CUDA */

#define CK(call, what) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
	pipette_fail(err, "%s: %s", (what), cudaGetErrorString(e_)); goto out; } \
	} while (0)

int pipette_probe_gpu_count(struct pipette_err *err)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess)
		return pipette_fail(err, "no usable GPU: cudaGetDeviceCount: %s "
				    "(--transport tcp and --topology work "
				    "without GPUs)", cudaGetErrorString(e));
	if (n < 1)
		return pipette_fail(err, "no GPU is visible (CUDA_VISIBLE_DEVICES?)");
	return n;
}

/* Rounds of timing: nvbandwidth's default --loopCount of 16 copies per
 * sample (NVIDIA/nvbandwidth README), `reps` samples, median kept. */
#define LOOP 16

static int time_copies(int src, int dst, void *s_buf, void *d_buf, size_t bytes,
		       int reps, double *gbps, struct pipette_err *err)
{
	cudaStream_t st = NULL;
	cudaEvent_t a = NULL, b = NULL;
	double *v = calloc((size_t)reps, sizeof(double));
	double *scratch = calloc((size_t)reps, sizeof(double));
	int rv = -1, r, k;
	float ms;

	if (!v || !scratch) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	CK(cudaSetDevice(src), "cudaSetDevice");
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
	CK(cudaEventCreate(&a), "cudaEventCreate");
	CK(cudaEventCreate(&b), "cudaEventCreate");
	CK(cudaMemcpyPeerAsync(d_buf, dst, s_buf, src, bytes, st), "warm-up copy");
	for (r = 0; r < reps; r++) {
		CK(cudaEventRecord(a, st), "cudaEventRecord");
		for (k = 0; k < LOOP; k++)
			CK(src == dst ? cudaMemcpyAsync(d_buf, s_buf, bytes,
							cudaMemcpyDeviceToDevice, st)
				      : cudaMemcpyPeerAsync(d_buf, dst, s_buf, src,
							    bytes, st),
			   "copy");
		CK(cudaEventRecord(b, st), "cudaEventRecord");
		CK(cudaEventSynchronize(b), "cudaEventSynchronize");
		CK(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
		v[r] = (double)bytes * LOOP / (1e-3 * ms) / 1e9;
	}
	*gbps = pipette_probe_median(v, (size_t)reps, scratch);
	rv = 0;
out:
	if (a)
		cudaEventDestroy(a);
	if (b)
		cudaEventDestroy(b);
	if (st)
		cudaStreamDestroy(st);
	free(v);
	free(scratch);
	return rv;
}

static int run_p2p(struct pipette_probe_local *l, FILE *progress,
		   struct pipette_err *err)
{
	int n = l->ngpu, i, j, rv = -1;
	void **buf = calloc((size_t)n, sizeof(void *));

	if (!buf)
		return pipette_fail(err, "out of memory");
	for (i = 0; i < n; i++) {
		CK(cudaSetDevice(i), "cudaSetDevice");
		CK(cudaMalloc(&buf[i], l->p2p_bytes), "cudaMalloc (--p2p-bytes)");
		CK(cudaMemset(buf[i], 1, l->p2p_bytes), "cudaMemset");
		for (j = 0; j < n; j++) {
			size_t c = (size_t)i * n + j;

			if (i == j)
				continue;
			cudaDeviceGetP2PAttribute(&l->p2p_access[c],
						  cudaDevP2PAttrAccessSupported, i, j);
			cudaDeviceGetP2PAttribute(&l->p2p_rank[c],
						  cudaDevP2PAttrPerformanceRank, i, j);
			cudaDeviceGetP2PAttribute(&l->p2p_atomic[c],
						  cudaDevP2PAttrNativeAtomicSupported,
						  i, j);
			if (l->p2p_access[c]) {
				cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);

				if (e == cudaErrorPeerAccessAlreadyEnabled)
					cudaGetLastError();
				else if (e != cudaSuccess)
					CK(e, "cudaDeviceEnablePeerAccess");
			}
		}
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			if (i == j)
				continue;
			if (time_copies(i, j, buf[i], buf[j], l->p2p_bytes, l->reps,
					&l->p2p_gbps[(size_t)i * n + j], err))
				goto out;
			if (progress)
				fprintf(progress, "pipette-probe: p2p GPU%d -> GPU%d "
					"%.1f GB/s\n", i, j,
					l->p2p_gbps[(size_t)i * n + j]);
		}
	rv = 0;
out:
	for (i = 0; i < n; i++)
		if (buf[i]) {
			cudaSetDevice(i);
			cudaFree(buf[i]);
		}
	free(buf);
	return rv;
}

/* HBM: a device-to-device copy reads and writes every byte, so it moves
 * 2 x bytes (the STREAM "copy" accounting: McCalpin, "Memory bandwidth and
 * machine balance", IEEE TCCA newsletter 1995; BabelStream counts the
 * same). */
static int run_hbm(struct pipette_probe_local *l, FILE *progress,
		   struct pipette_err *err)
{
	int i, rv = -1;
	void *a = NULL, *b = NULL;
	size_t half = l->hbm_bytes / 2;

	for (i = 0; i < l->ngpu; i++) {
		double g;

		CK(cudaSetDevice(i), "cudaSetDevice");
		CK(cudaMalloc(&a, half), "cudaMalloc (--hbm-bytes)");
		CK(cudaMalloc(&b, half), "cudaMalloc (--hbm-bytes)");
		CK(cudaMemset(a, 1, half), "cudaMemset");
		if (time_copies(i, i, a, b, half, l->reps, &g, err))
			goto out;
		l->hbm_gbps[i] = 2.0 * g;
		cudaFree(a);
		cudaFree(b);
		a = b = NULL;
		if (progress)
			fprintf(progress, "pipette-probe: HBM GPU%d %.0f GB/s\n", i,
				l->hbm_gbps[i]);
	}
	rv = 0;
out:
	if (a)
		cudaFree(a);
	if (b)
		cudaFree(b);
	return rv;
}

/* GEMM shapes: the layer GEMMs of Llama-3-70B (hidden 8192, FFN 28672,
 * 64 query and 8 KV heads of 128; Meta's model card) for one micro-batch
 * of 4096 tokens, without and with TP = 8 — the per-GPU shapes that
 * timing.c's FLOPs / (peak · efficiency) stands for — plus square GEMMs
 * from 1024 to 8192 that trace the saturation curve. */
static const struct { const char *what; int m, n, k; } shapes[] = {
	{ "square 1024", 1024, 1024, 1024 },
	{ "square 2048", 2048, 2048, 2048 },
	{ "square 4096", 4096, 4096, 4096 },
	{ "square 8192", 8192, 8192, 8192 },
	{ "llama3-70b qkv tp1", 4096, 10240, 8192 },
	{ "llama3-70b proj tp1", 4096, 8192, 8192 },
	{ "llama3-70b fc1 tp1", 4096, 57344, 8192 },
	{ "llama3-70b fc2 tp1", 4096, 8192, 28672 },
	{ "llama3-70b qkv tp8", 4096, 1280, 8192 },
	{ "llama3-70b proj tp8", 4096, 8192, 1024 },
	{ "llama3-70b fc1 tp8", 4096, 7168, 8192 },
	{ "llama3-70b fc2 tp8", 4096, 8192, 3584 },
};

/* Random BF16 in [-1, 1) for the GEMM operands.  Not zeros: Hopper's
 * tensor cores draw less power on zeros and clock higher, so a product of
 * zeros overstates the rate (one H100/H200 here: 8192^3 at 894 TFLOP/s on
 * zeros against 788 on random data).  Built on the host in chunks, so no
 * device kernel is needed. */
#define FILL_CHUNK ((size_t)1 << 22)	/* elements per copy: 8 MiB */

static int fill_random_bf16(void *dev, size_t elems, uint64_t seed,
			    struct pipette_err *err)
{
	uint16_t *h = malloc(FILL_CHUNK * sizeof(*h));
	size_t done = 0, i;
	int rv = -1;

	if (!h)
		return pipette_fail(err, "out of memory");
	while (done < elems) {
		size_t n = elems - done < FILL_CHUNK ? elems - done : FILL_CHUNK;

		for (i = 0; i < n; i++) {
			float f = (float)(2.0 * pipette_rng_unit(&seed) - 1.0);
			uint32_t bits;

			memcpy(&bits, &f, sizeof(bits));
			h[i] = (uint16_t)(bits >> 16);	/* BF16: the top half */
		}
		CK(cudaMemcpy((uint16_t *)dev + done, h, n * sizeof(*h),
			      cudaMemcpyHostToDevice), "cudaMemcpy (GEMM operand)");
		done += n;
	}
	rv = 0;
out:
	free(h);
	return rv;
}

static int run_gemm(struct pipette_probe_local *l, FILE *progress,
		    struct pipette_err *err)
{
	cublasHandle_t h = NULL;
	cudaEvent_t ea = NULL, eb = NULL;
	void *A = NULL, *B = NULL, *C = NULL;
	double v[1000], scratch[1000], gf[PIPETTE_PROBE_MAX_GEMMS],
	       tf[PIPETTE_PROBE_MAX_GEMMS];
	const float one = 1.0f, zero = 0.0f;
	int s, r, k, rv = -1;
	const int iters = 10;
	float ms;

	CK(cudaSetDevice(0), "cudaSetDevice");
	if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
		pipette_fail(err, "cublasCreate failed");
		goto out;
	}
	CK(cudaEventCreate(&ea), "cudaEventCreate");
	CK(cudaEventCreate(&eb), "cudaEventCreate");
	l->ngemm = 0;
	for (s = 0; s < (int)(sizeof(shapes) / sizeof(shapes[0])); s++) {
		struct pipette_probe_gemm *g = &l->gemm[l->ngemm++];
		size_t m = (size_t)shapes[s].m, n = (size_t)shapes[s].n,
		       kk = (size_t)shapes[s].k;

		g->what = shapes[s].what;
		g->m = shapes[s].m;
		g->n = shapes[s].n;
		g->k = shapes[s].k;
		g->tflops = NAN;
		CK(cudaMalloc(&A, m * kk * 2), "cudaMalloc A");
		CK(cudaMalloc(&B, kk * n * 2), "cudaMalloc B");
		CK(cudaMalloc(&C, m * n * 2), "cudaMalloc C");
		if (fill_random_bf16(A, m * kk, 2 * (uint64_t)s + 1, err) ||
		    fill_random_bf16(B, kk * n, 2 * (uint64_t)s + 2, err))
			goto out;
		/* Column-major C(m x n) = A(m x k) · B(k x n), BF16 in and out,
		 * FP32 accumulation: what Megatron's BF16 layers run. */
		for (r = -1; r < l->reps; r++) {
			CK(cudaEventRecord(ea, 0), "cudaEventRecord");
			for (k = 0; k < iters; k++)
				if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n,
						 g->k, &one, A, CUDA_R_16BF, g->m, B,
						 CUDA_R_16BF, g->k, &zero, C,
						 CUDA_R_16BF, g->m, CUBLAS_COMPUTE_32F,
						 CUBLAS_GEMM_DEFAULT) !=
				    CUBLAS_STATUS_SUCCESS) {
					pipette_fail(err, "cublasGemmEx %dx%dx%d BF16 "
						     "failed", g->m, g->n, g->k);
					goto out;
				}
			CK(cudaEventRecord(eb, 0), "cudaEventRecord");
			CK(cudaEventSynchronize(eb), "cudaEventSynchronize");
			CK(cudaEventElapsedTime(&ms, ea, eb), "cudaEventElapsedTime");
			if (r >= 0)	/* r = -1 is the warm-up */
				v[r] = 2.0 * (double)m * (double)n * (double)kk * iters /
				       (1e-3 * ms) / 1e12;
		}
		g->tflops = pipette_probe_median(v, (size_t)l->reps, scratch);
		gf[l->ngemm - 1] = 2.0 * (double)m * (double)n * (double)kk / 1e9;
		tf[l->ngemm - 1] = g->tflops;
		cudaFree(A);
		cudaFree(B);
		cudaFree(C);
		A = B = C = NULL;
		if (progress)
			fprintf(progress, "pipette-probe: GEMM %-20s %6dx%6dx%6d "
				"%.1f TFLOP/s\n", g->what, g->m, g->n, g->k, g->tflops);
	}
	{
		struct pipette_err fe;

		if (pipette_probe_gemm_fit(gf, tf, (size_t)l->ngemm,
					   &l->gemm_max_tflops,
					   &l->gemm_half_gflop, &fe) && progress)
			fprintf(progress, "pipette-probe: %s\n", fe.msg);
	}
	rv = 0;
out:
	if (A)
		cudaFree(A);
	if (B)
		cudaFree(B);
	if (C)
		cudaFree(C);
	if (ea)
		cudaEventDestroy(ea);
	if (eb)
		cudaEventDestroy(eb);
	if (h)
		cublasDestroy(h);
	return rv;
}

#ifdef HAVE_NCCL
#define NK(call, what) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess && \
	r_ != ncclInProgress) { pipette_fail(err, "%s: %s", (what), \
	ncclGetErrorString(r_)); goto out; } } while (0)

/* NCCL send/recv between every ordered pair of this node's GPUs, inside
 * one communicator over all of them (point-to-point needs only the two
 * ranks involved). */
static int run_nccl_pairs(struct pipette_probe_local *l, FILE *progress,
			  struct pipette_err *err)
{
	int n = l->ngpu, i, j, r, k, rv = -1;
	ncclComm_t *comm = calloc((size_t)n, sizeof(*comm));
	cudaStream_t *st = calloc((size_t)n, sizeof(*st));
	void **buf = calloc((size_t)n, sizeof(void *));
	double v[1000], scratch[1000];

	if (!comm || !st || !buf) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	NK(ncclCommInitAll(comm, n, NULL), "ncclCommInitAll");
	for (i = 0; i < n; i++) {
		CK(cudaSetDevice(i), "cudaSetDevice");
		CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking),
		   "cudaStreamCreate");
		CK(cudaMalloc(&buf[i], l->p2p_bytes), "cudaMalloc (--p2p-bytes)");
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			if (i == j)
				continue;
			for (r = -1; r < l->reps; r++) {
				double t0 = pipette_probe_now();

				for (k = 0; k < LOOP; k++) {
					NK(ncclGroupStart(), "ncclGroupStart");
					NK(ncclSend(buf[i], l->p2p_bytes, ncclChar, j,
						    comm[i], st[i]), "ncclSend");
					NK(ncclRecv(buf[j], l->p2p_bytes, ncclChar, i,
						    comm[j], st[j]), "ncclRecv");
					NK(ncclGroupEnd(), "ncclGroupEnd");
				}
				CK(cudaSetDevice(i), "cudaSetDevice");
				CK(cudaStreamSynchronize(st[i]), "sync");
				CK(cudaSetDevice(j), "cudaSetDevice");
				CK(cudaStreamSynchronize(st[j]), "sync");
				if (r >= 0)
					v[r] = (double)l->p2p_bytes * LOOP /
					       (pipette_probe_now() - t0) / 1e9;
			}
			l->nccl_gbps[(size_t)i * n + j] =
				pipette_probe_median(v, (size_t)l->reps, scratch);
			if (progress)
				fprintf(progress, "pipette-probe: NCCL GPU%d -> GPU%d "
					"%.1f GB/s\n", i, j,
					l->nccl_gbps[(size_t)i * n + j]);
		}
	rv = 0;
out:
	for (i = 0; comm && st && buf && i < n; i++) {
		cudaSetDevice(i);
		if (buf[i])
			cudaFree(buf[i]);
		if (st[i])
			cudaStreamDestroy(st[i]);
		if (comm[i])
			ncclCommDestroy(comm[i]);
	}
	free(comm);
	free(st);
	free(buf);
	return rv;
}
#endif

int pipette_probe_local_run(const struct pipette_probe_opts *opts, FILE *progress,
			    struct pipette_probe_local **out,
			    struct pipette_err *err)
{
	struct pipette_probe_local *l;
	int n = pipette_probe_gpu_count(err), i, rv = -1;
	size_t nn;

	*out = NULL;
	if (n < 0)
		return -1;
	if (opts->reps > 1000)
		return pipette_fail(err, "--reps: at most 1000");
	l = calloc(1, sizeof(*l));
	if (!l)
		return pipette_fail(err, "out of memory");
	nn = (size_t)n * (size_t)n;
	l->ngpu = n;
	l->reps = opts->reps;
	l->p2p_bytes = opts->p2p_bytes;
	l->hbm_bytes = opts->hbm_bytes;
	l->gemm_max_tflops = l->gemm_half_gflop = NAN;
	l->gpu_name = calloc((size_t)n, sizeof(*l->gpu_name));
	l->gpu_pci = calloc((size_t)n, sizeof(*l->gpu_pci));
	l->p2p_gbps = malloc(nn * sizeof(double));
	l->nccl_gbps = malloc(nn * sizeof(double));
	l->p2p_access = calloc(nn, sizeof(int));
	l->p2p_rank = calloc(nn, sizeof(int));
	l->p2p_atomic = calloc(nn, sizeof(int));
	l->hbm_gbps = malloc((size_t)n * sizeof(double));
	if (!l->gpu_name || !l->gpu_pci || !l->p2p_gbps || !l->nccl_gbps ||
	    !l->p2p_access || !l->p2p_rank || !l->p2p_atomic || !l->hbm_gbps) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	for (i = 0; i < (int)nn; i++)
		l->p2p_gbps[i] = l->nccl_gbps[i] = NAN;
	for (i = 0; i < n; i++) {
		struct cudaDeviceProp p;

		l->hbm_gbps[i] = NAN;
		CK(cudaGetDeviceProperties(&p, i), "cudaGetDeviceProperties");
		pipette_strlcpy(l->gpu_name[i], p.name, sizeof(l->gpu_name[i]));
		cudaDeviceGetPCIBusId(l->gpu_pci[i], (int)sizeof(l->gpu_pci[i]), i);
	}
	if (opts->hbm && run_hbm(l, progress, err))
		goto out;
	if (opts->gemm && run_gemm(l, progress, err))
		goto out;
	if (opts->p2p && n > 1 && run_p2p(l, progress, err))
		goto out;
#ifdef HAVE_NCCL
	if (opts->nccl_pairs && n > 1 && run_nccl_pairs(l, progress, err))
		goto out;
#else
	if (opts->nccl_pairs && progress)
		fprintf(progress, "pipette-probe: built without NCCL: --nccl "
			"skipped\n");
#endif
	*out = l;
	l = NULL;
	rv = 0;
out:
	pipette_probe_local_destroy(l);
	return rv;
}

#endif /* HAVE_CUDA */
