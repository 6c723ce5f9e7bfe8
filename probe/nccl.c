/* pipette-probe: NCCL send/recv between two processes (one GPU each), as
 * the link transport of the inter-node tournament.  The communicator is
 * non-blocking (NCCL_CONFIG blocking = 0), so that initialisation and
 * every transfer can be abandoned (ncclCommAbort) at the socket timeout
 * instead of hanging on a dead peer. */
#include "autoconf.h"

#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "net.h"

#if defined(HAVE_CUDA) && defined(HAVE_NCCL)
#include <cuda_runtime_api.h>
/* nccl.h declares f() without (void); not ours to fix. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <unistd.h>

struct nccl_ctx {
	int gpu;
};

struct nccl_pair {
	ncclComm_t comm;
	cudaStream_t st;
	void *buf;
	int peer;
};

/* Wait for the communicator to leave ncclInProgress and for the stream
 * (when given) to drain, within timeout_s. */
static int nccl_wait(ncclComm_t comm, cudaStream_t st, double timeout_s,
		     const char *what, struct pipette_err *err)
{
	double deadline = pipette_probe_now() + timeout_s;

	for (;;) {
		ncclResult_t as = ncclSuccess;
		cudaError_t ce = cudaSuccess;

		ncclCommGetAsyncError(comm, &as);
		if (as != ncclSuccess && as != ncclInProgress)
			return pipette_fail(err, "%s: %s", what,
					    ncclGetErrorString(as));
		if (as == ncclSuccess) {
			if (!st)
				return 0;
			ce = cudaStreamQuery(st);
			if (ce == cudaSuccess)
				return 0;
			if (ce != cudaErrorNotReady)
				return pipette_fail(err, "%s: %s", what,
						    cudaGetErrorString(ce));
		}
		if (pipette_probe_now() > deadline)
			return pipette_fail(err, "%s: timed out after %.3g s", what,
					    timeout_s);
		usleep(20);
	}
}

static void nccl_close(void *pair)
{
	struct nccl_pair *p = pair;

	if (!p)
		return;
	if (p->comm)
		ncclCommAbort(p->comm);
	if (p->st)
		cudaStreamDestroy(p->st);
	if (p->buf)
		cudaFree(p->buf);
	free(p);
}

static int nccl_open(void *ctx, int fd, int lower, size_t max_bytes,
		     double timeout_s, void **pair, struct pipette_err *err)
{
	struct nccl_ctx *c = ctx;
	struct nccl_pair *p = calloc(1, sizeof(*p));
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId id;
	ncclResult_t nr;
	cudaError_t ce;

	if (!p)
		return pipette_fail(err, "out of memory");
	*pair = NULL;
	if ((ce = cudaSetDevice(c->gpu)) != cudaSuccess ||
	    (ce = cudaStreamCreateWithFlags(&p->st, cudaStreamNonBlocking)) !=
	    cudaSuccess || (ce = cudaMalloc(&p->buf, max_bytes)) != cudaSuccess) {
		nccl_close(p);
		return pipette_fail(err, "GPU %d: %s", c->gpu, cudaGetErrorString(ce));
	}
	if (lower && (nr = ncclGetUniqueId(&id)) != ncclSuccess) {
		nccl_close(p);
		return pipette_fail(err, "ncclGetUniqueId: %s", ncclGetErrorString(nr));
	}
	if ((lower ? pipette_probe_send_all(fd, &id, sizeof(id), timeout_s,
					    "NCCL id", err)
		   : pipette_probe_recv_all(fd, &id, sizeof(id), timeout_s,
					    "NCCL id", err))) {
		nccl_close(p);
		return -1;
	}
	cfg.blocking = 0;
	p->peer = lower ? 1 : 0;
	nr = ncclCommInitRankConfig(&p->comm, 2, id, lower ? 0 : 1, &cfg);
	if ((nr != ncclSuccess && nr != ncclInProgress) ||
	    nccl_wait(p->comm, NULL, timeout_s, "ncclCommInitRank", err)) {
		if (nr != ncclSuccess && nr != ncclInProgress)
			pipette_fail(err, "ncclCommInitRank: %s",
				     ncclGetErrorString(nr));
		nccl_close(p);
		return -1;
	}
	*pair = p;
	return 0;
}

/* The receiver posts its ncclRecv, then says "ready" over TCP; the sender
 * starts its clock, sends, waits for its stream, and stops the clock on
 * the receiver's "done" byte — the same definition as the TCP transport. */
static int nccl_xfer(void *pair, int fd, int sender, size_t bytes,
		     double timeout_s, double *seconds, struct pipette_err *err)
{
	struct nccl_pair *p = pair;
	char b = 'r';
	double t0;
	ncclResult_t nr;

	*seconds = 0;
	if (!sender) {
		nr = ncclRecv(p->buf, bytes, ncclChar, p->peer, p->comm, p->st);
		if (nr != ncclSuccess && nr != ncclInProgress)
			return pipette_fail(err, "ncclRecv: %s", ncclGetErrorString(nr));
		if (pipette_probe_send_all(fd, &b, 1, timeout_s, "ready", err) ||
		    nccl_wait(p->comm, p->st, timeout_s, "ncclRecv", err))
			return -1;
		return pipette_probe_send_all(fd, &b, 1, timeout_s, "done", err);
	}
	if (pipette_probe_recv_all(fd, &b, 1, timeout_s, "ready", err))
		return -1;
	t0 = pipette_probe_now();
	nr = ncclSend(p->buf, bytes, ncclChar, p->peer, p->comm, p->st);
	if (nr != ncclSuccess && nr != ncclInProgress)
		return pipette_fail(err, "ncclSend: %s", ncclGetErrorString(nr));
	if (nccl_wait(p->comm, p->st, timeout_s, "ncclSend", err) ||
	    pipette_probe_recv_all(fd, &b, 1, timeout_s, "done", err))
		return -1;
	*seconds = pipette_probe_now() - t0;
	return 0;
}

struct pipette_probe_link_ops *pipette_probe_nccl_ops(int gpu,
						      struct pipette_err *err)
{
	struct pipette_probe_link_ops *ops;
	struct nccl_ctx *c;
	int n = pipette_probe_gpu_count(err);

	if (n < 0)
		return NULL;
	if (gpu < 0)
		gpu = 0;
	if (gpu >= n) {
		pipette_fail(err, "--gpu %d: only %d GPU(s) visible", gpu, n);
		return NULL;
	}
	ops = calloc(1, sizeof(*ops));
	c = calloc(1, sizeof(*c));
	if (!ops || !c) {
		free(ops);
		free(c);
		pipette_fail(err, "out of memory");
		return NULL;
	}
	c->gpu = gpu;
	ops->tool = "pipette-probe nccl send/recv";
	ops->metric = "alpha-beta fit";
	ops->open = nccl_open;
	ops->xfer = nccl_xfer;
	ops->close = nccl_close;
	ops->ctx = c;
	return ops;
}

void pipette_probe_nccl_ops_free(struct pipette_probe_link_ops *ops)
{
	if (ops)
		free(ops->ctx);
	free(ops);
}

#else

struct pipette_probe_link_ops *pipette_probe_nccl_ops(int gpu,
						      struct pipette_err *err)
{
	(void)gpu;
	pipette_fail(err, "this pipette-probe was built without %s; use "
		     "--transport tcp to measure the network without GPUs",
#ifdef HAVE_CUDA
		     "NCCL"
#else
		     "CUDA and NCCL"
#endif
		     );
	return NULL;
}

void pipette_probe_nccl_ops_free(struct pipette_probe_link_ops *ops)
{
	free(ops);
}

#endif
