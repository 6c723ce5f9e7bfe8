/* pipette-probe: command line and task environment.
 *
 * The task's identity comes from the environment Slurm gives every task
 * (srun(1), OUTPUT ENVIRONMENT VARIABLES): SLURM_PROCID, SLURM_NTASKS,
 * SLURMD_NODENAME, SLURM_JOB_ID, SLURM_STEP_ID, SLURM_STEP_NODELIST.
 * Tests (and runs without Slurm) set the same variables by hand;
 * PIPETTE_PROBE_ROOT (the host of rank 0) and PIPETTE_PROBE_PORT override
 * the rendezvous. */
#ifndef PIPETTE_PROBE_ARGS_H
#define PIPETTE_PROBE_ARGS_H

#include <stddef.h>

#include "inputs/error.h"

#define PIPETTE_PROBE_MAX_SIZES 8
#define PIPETTE_PROBE_NAME_MAX 64

enum pipette_probe_transport { PIPETTE_PROBE_NCCL, PIPETTE_PROBE_TCP };

struct pipette_probe_opts {
	int help, version;
	/* What to run: the inter-node tournament (default), the single-node
	 * GPU figures (--local), the hwloc topology (--topology). */
	int local, topology;
	const char *kernels;	/* --kernels FILE: the kernel grid's CSV */
	double kernels_budget_s;
	int p2p, nccl_pairs, gemm, hbm;	/* --local parts; all when none named */
	enum pipette_probe_transport transport;
	const char *out;	/* bandwidth cache to merge into (rank 0) */
	const char *json;	/* raw results as JSON ("-" = stdout) */
	const char *nodes;	/* hostlist: only links touching these nodes */
	size_t sizes[PIPETTE_PROBE_MAX_SIZES];
	int nsizes;
	int reps;
	double timeout_s;	/* every socket operation */
	int port;		/* control port of rank 0; 0 = derived */
	int gpu;		/* device for inter-node NCCL; -1 = first visible */
	double slow_fraction;	/* summary: node below this × median is slow */
	size_t p2p_bytes, hbm_bytes;
};

/* Parse argv into o (defaults first).  0 on success, -1 with a message
 * naming the option.  --help/--version set o->help / o->version. */
int pipette_probe_parse_args(int argc, char **argv, struct pipette_probe_opts *o,
			     struct pipette_err *err);

/* "64K", "4M", "1G" (binary multiples), or plain bytes, in [1, 2^34]. */
int pipette_probe_parse_size(const char *s, size_t *out, const char *what,
			     struct pipette_err *err);

void pipette_probe_usage(void *stream);

/* How a task reads its environment (getenv in main, a table in tests). */
typedef const char *(*pipette_probe_getenv_fn)(void *ctx, const char *name);

struct pipette_probe_task {
	int rank, size;
	char name[PIPETTE_PROBE_NAME_MAX];	/* this node's Slurm name */
	char root[256];		/* host of rank 0, "" = take the first host of
				 * `nodelist` */
	char nodelist[4096];	/* SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) */
	int port;		/* control port of rank 0 */
	/* This node's NVLink domain (fabric.h), "" = none: each task reads
	 * its own and tells rank 0 in its hello. */
	char domain[64];
};

/* Read rank, size, node name, rank 0's host and the control port.
 * `port_opt` (from --port, 0 = none) wins over PIPETTE_PROBE_PORT, which
 * wins over the derived port 61000 + (16·job + step mod 16) mod 4536
 * (enroot's MASTER_PORT rule, SLURM_JOB_ID % 4536 + 61000, from
 * conf/hooks/extra/50-slurm-pytorch.sh of NVIDIA/enroot,
 * with the step folded in so that two probe steps of one job differ; the
 * range stays above Linux's ephemeral ports 32768–60999). */
int pipette_probe_task_read(pipette_probe_getenv_fn get, void *ctx, int port_opt,
			    struct pipette_probe_task *t, struct pipette_err *err);

#endif
