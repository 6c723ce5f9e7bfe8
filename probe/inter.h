/* pipette-probe: the node x node measurement.
 *
 * One process per node.  Rendezvous without MPI: rank 0 listens on the
 * control port; every other rank connects to it (retrying until the
 * timeout, since rank 0 may start last), says who it is and on which
 * ephemeral port it accepts pair connections, and receives the table of
 * all ranks.  Then, for each round of the circle-method tournament
 * (tournament.h), rank 0 sends GO with the set of live ranks; each rank
 * measures with its partner (the lower rank connects to the higher one's
 * data port), and reports its outgoing direction to rank 0, which is the
 * barrier that keeps rounds apart.  A rank that disconnects or misses a
 * report is left out of later rounds and reported; the run still returns
 * what was measured.
 *
 * The bytes move through a `pipette_probe_link_ops` (TCP sockets here,
 * NCCL send/recv in nccl.c); the TCP pair connection always carries the
 * handshakes (and NCCL's unique id). */
#ifndef PIPETTE_PROBE_INTER_H
#define PIPETTE_PROBE_INTER_H

#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "args.h"
#include "inputs/error.h"
#include "inputs/progress.h"

struct pipette_probe_link_ops {
	const char *tool;	/* provenance, e.g. "pipette-probe tcp" */
	const char *metric;	/* "alpha-beta fit" */
	/* Prepare one pair over the connected socket fd; `lower` is 1 on
	 * the lower rank.  *pair is passed back to xfer and close. */
	int (*open)(void *ctx, int fd, int lower, size_t max_bytes,
		    double timeout_s, void **pair, struct pipette_err *err);
	/* Move `bytes` one way.  The sender returns the time from the start
	 * of the send until the receiver acknowledged the whole message in
	 * *seconds; the receiver sets it to 0. */
	int (*xfer)(void *pair, int fd, int sender, size_t bytes,
		    double timeout_s, double *seconds, struct pipette_err *err);
	void (*close)(void *pair);
	void *ctx;
};

/* The plain TCP transport (no context needed). */
extern const struct pipette_probe_link_ops pipette_probe_tcp_ops;

#define PIPETTE_PROBE_REASON_MAX 160

/* What rank 0 ends with.  Node i is rank i.  Matrices are n x n, i -> j,
 * NaN when not measured. */
struct pipette_probe_result {
	int n;
	char (*names)[PIPETTE_PROBE_NAME_MAX];
	double *gbps;		/* β of the α–β fit, GB/s (1e9 bytes/s) */
	double *lat_us;		/* α, microseconds */
	int nsizes;
	size_t sizes[PIPETTE_PROBE_MAX_SIZES];
	double *median_s;	/* [(i*n + j)*nsizes + s], NaN unmeasured */
	int *left_out;		/* 1: the node failed and was left out */
	char (*reason)[PIPETTE_PROBE_REASON_MAX];	/* why, per node */
	/* Per node, the NVLink domain its task reported ("" = none): node
	 * pairs of one domain are measured over NVLink (fabric.h). */
	char (*domain)[64];
	int link_failures;	/* pairs whose measurement failed */
	char tool[64], metric[64];
	time_t when;		/* start of the run */
};

struct pipette_probe_result *pipette_probe_result_create(int n, int nsizes,
							 const size_t *sizes);
void pipette_probe_result_destroy(struct pipette_probe_result *r);

struct pipette_probe_inter_cfg {
	const struct pipette_probe_task *task;
	const struct pipette_probe_opts *opts;	/* sizes, reps, timeout */
	/* Only links with an end among these names (NULL = all links). */
	const char *const *only;
	int n_only;
	const struct pipette_probe_link_ops *ops;
	FILE *progress;		/* rank 0's progress lines; NULL = quiet */
	/* Rank 0 on a terminal: the rounds as one line redrawn in place
	 * (core/cli/progress.h) instead of a line per round; fn NULL: the
	 * lines, for the job's log. */
	struct pipette_progress tty;
};

/* Run the tournament.  On rank 0, *out receives the result (also when
 * some nodes failed); on other ranks *out is NULL.  Returns -1 only when
 * this process cannot take part (no rendezvous, rank 0 lost, bad table). */
int pipette_probe_inter_run(const struct pipette_probe_inter_cfg *cfg,
			    struct pipette_probe_result **out,
			    struct pipette_err *err);

/* From the median times of one direction (sizes x 1), fit α–β. */
int pipette_probe_link_fit(const size_t *sizes, const double *median_s,
			   int nsizes, double *gbps, double *lat_us,
			   struct pipette_err *err);

/* 1 when nodes a and b reported the same NVLink domain. */
int pipette_probe_same_domain(const struct pipette_probe_result *r, int a, int b);

/* Summary for humans: slowest links (those inside an NVLink domain
 * marked), the NVLink domains, and nodes whose median link bandwidth is
 * below slow_fraction x the median over nodes. */
void pipette_probe_result_summary(const struct pipette_probe_result *r,
				  double slow_fraction, FILE *f);

#endif
