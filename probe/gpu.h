/* pipette-probe: figures of one node's GPUs (CUDA runtime, cuBLAS, NCCL).
 *
 * Compiled with the GPU code when configure found CUDA (HAVE_CUDA) and
 * NCCL (HAVE_NCCL); otherwise, and when no GPU is visible at run time,
 * every call fails with a message that says so. */
#ifndef PIPETTE_PROBE_GPU_H
#define PIPETTE_PROBE_GPU_H

#include <stddef.h>
#include <stdio.h>

#include "inputs/error.h"
#include "inter.h"

#define PIPETTE_PROBE_MAX_GEMMS 16

struct pipette_probe_gemm {
	const char *what;	/* e.g. "llama3-70b qkv tp8" */
	int m, n, k;
	double tflops;		/* median over trials; NaN = failed */
};

struct pipette_probe_local {
	int ngpu;
	char (*gpu_name)[128];	/* per GPU: model name */
	char (*gpu_pci)[32];	/* per GPU: PCI bus id */
	/* ngpu x ngpu, i -> j, NaN unmeasured (and on the diagonal). */
	double *p2p_gbps;	/* cudaMemcpyPeerAsync, median */
	double *nccl_gbps;	/* NCCL send/recv, median */
	int *p2p_access;	/* cudaDevP2PAttrAccessSupported */
	int *p2p_rank;		/* cudaDevP2PAttrPerformanceRank */
	int *p2p_atomic;	/* cudaDevP2PAttrNativeAtomicSupported */
	int ngemm;
	struct pipette_probe_gemm gemm[PIPETTE_PROBE_MAX_GEMMS];
	double gemm_max_tflops;	/* R_max of R(G) = R_max·G/(G + G_half) */
	double gemm_half_gflop;	/* G_half, GFLOP; NaN when the fit failed */
	double *hbm_gbps;	/* per GPU, device-to-device copy */
	size_t p2p_bytes, hbm_bytes;
	int reps;
};

/* Number of visible GPUs, or -1 with a message (no CUDA in this build,
 * no driver, no device). */
int pipette_probe_gpu_count(struct pipette_err *err);

/* Measure the parts requested in opts (p2p, nccl_pairs, gemm, hbm) on
 * every visible GPU of this node; the caller destroys the result. */
int pipette_probe_local_run(const struct pipette_probe_opts *opts, FILE *progress,
			    struct pipette_probe_local **out,
			    struct pipette_err *err);
void pipette_probe_local_destroy(struct pipette_probe_local *l);

/* The saturating GEMM curve R(G) = R_max·G/(G + G_half) through the
 * measured points, fitted as the straight line 1/R = 1/R_max +
 * (G_half/R_max)·(1/G).  gflop[i] = 2·m·n·k/1e9. */
int pipette_probe_gemm_fit(const double *gflop, const double *tflops, size_t n,
			   double *max_tflops, double *half_gflop,
			   struct pipette_err *err);

/* The GEMMs of Llama 3 layers on the first GPU (kgrid.c), written to csv
 * in the columns of tests/data/kernels/kernels.py; stops starting new
 * shapes after budget_s.  *rows: the rows written.  -1 with a message
 * when CUDA is not built in or the GPU cannot be used. */
int pipette_probe_kernel_grid(FILE *csv, FILE *progress, double budget_s, int *rows,
			      struct pipette_err *err);

/* NCCL send/recv between two processes, one GPU each (inter.h), or NULL
 * with a message when NCCL is not built in or no GPU is visible.  The
 * returned table is owned by the caller: free it with ..._nccl_ops_free. */
struct pipette_probe_link_ops *pipette_probe_nccl_ops(int gpu,
						      struct pipette_err *err);
void pipette_probe_nccl_ops_free(struct pipette_probe_link_ops *ops);

#endif
