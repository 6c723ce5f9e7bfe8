#include "inter.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fit.h"
#include "net.h"
#include "tournament.h"

#define MAGIC 0x50505242u	/* "PPRB" */
#define VERSION 2u	/* 2: the hello carries the node's NVLink domain */
#define MSG_GO 1u
#define MSG_DONE 2u
#define REP_OK 0u
#define REP_FAILED 1u
#define REP_IDLE 2u
#define NO_PEER 0xffffffffu

#define DOMAIN_LEN 64	/* pipette_probe_task.domain */
#define HELLO_LEN (20 + PIPETTE_PROBE_NAME_MAX + DOMAIN_LEN)
#define ENTRY_LEN (8 + PIPETTE_PROBE_ADDR_MAX + PIPETTE_PROBE_NAME_MAX)
#define REPORT_LEN (24 + 8 * PIPETTE_PROBE_MAX_SIZES + PIPETTE_PROBE_REASON_MAX)
#define PAIR_LEN 12

/* One rank as every process sees it after the rendezvous. */
struct peer {
	int alive;
	int port;			/* data port */
	char addr[PIPETTE_PROBE_ADDR_MAX];
	char name[PIPETTE_PROBE_NAME_MAX];
	char domain[DOMAIN_LEN];	/* rank 0 only: its NVLink domain */
	int ctl;			/* rank 0 only: control socket, -1 none */
};

/* ---- results ---- */

struct pipette_probe_result *pipette_probe_result_create(int n, int nsizes,
							 const size_t *sizes)
{
	struct pipette_probe_result *r;
	size_t nn = (size_t)n * (size_t)n, i;

	if (n < 1 || nsizes < 1 || nsizes > PIPETTE_PROBE_MAX_SIZES)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->n = n;
	r->nsizes = nsizes;
	memcpy(r->sizes, sizes, (size_t)nsizes * sizeof(*sizes));
	r->names = calloc((size_t)n, sizeof(*r->names));
	r->gbps = malloc(nn * sizeof(double));
	r->lat_us = malloc(nn * sizeof(double));
	r->median_s = malloc(nn * (size_t)nsizes * sizeof(double));
	r->left_out = calloc((size_t)n, sizeof(int));
	r->reason = calloc((size_t)n, sizeof(*r->reason));
	r->domain = calloc((size_t)n, sizeof(*r->domain));
	if (!r->names || !r->gbps || !r->lat_us || !r->median_s ||
	    !r->left_out || !r->reason || !r->domain) {
		pipette_probe_result_destroy(r);
		return NULL;
	}
	for (i = 0; i < nn; i++)
		r->gbps[i] = r->lat_us[i] = NAN;
	for (i = 0; i < nn * (size_t)nsizes; i++)
		r->median_s[i] = NAN;
	r->when = (time_t)-1;
	return r;
}

void pipette_probe_result_destroy(struct pipette_probe_result *r)
{
	if (!r)
		return;
	free(r->names);
	free(r->gbps);
	free(r->lat_us);
	free(r->median_s);
	free(r->left_out);
	free(r->reason);
	free(r->domain);
	free(r);
}

int pipette_probe_same_domain(const struct pipette_probe_result *r, int a, int b)
{
	return a != b && r->domain[a][0] && !strcmp(r->domain[a], r->domain[b]);
}

int pipette_probe_link_fit(const size_t *sizes, const double *median_s,
			   int nsizes, double *gbps, double *lat_us,
			   struct pipette_err *err)
{
	double x[PIPETTE_PROBE_MAX_SIZES];
	struct pipette_probe_fit f;
	int i;

	if (nsizes < 1 || nsizes > PIPETTE_PROBE_MAX_SIZES)
		return pipette_fail(err, "alpha-beta fit: %d sizes", nsizes);
	for (i = 0; i < nsizes; i++)
		x[i] = (double)sizes[i];
	if (pipette_probe_fit_alpha_beta(x, median_s, (size_t)nsizes, &f, err))
		return -1;
	*gbps = f.beta_Bps / 1e9;
	*lat_us = f.alpha_s * 1e6;
	return 0;
}

/* ---- the TCP transport ---- */

struct tcp_pair {
	char *buf;
};

static int tcp_open(void *ctx, int fd, int lower, size_t max_bytes,
		    double timeout_s, void **pair, struct pipette_err *err)
{
	struct tcp_pair *p;

	(void)ctx; (void)fd; (void)lower; (void)timeout_s;
	p = malloc(sizeof(*p));
	if (!p || !(p->buf = malloc(max_bytes))) {
		free(p);
		return pipette_fail(err, "out of memory for a %zu-byte buffer",
				    max_bytes);
	}
	memset(p->buf, 0x5a, max_bytes);	/* fault the pages in now */
	*pair = p;
	return 0;
}

static int tcp_xfer(void *pair, int fd, int sender, size_t bytes,
		    double timeout_s, double *seconds, struct pipette_err *err)
{
	struct tcp_pair *p = pair;
	char ack = 'k';
	double t0;

	*seconds = 0;
	if (!sender) {
		if (pipette_probe_recv_all(fd, p->buf, bytes, timeout_s, "data", err))
			return -1;
		return pipette_probe_send_all(fd, &ack, 1, timeout_s, "ack", err);
	}
	t0 = pipette_probe_now();
	if (pipette_probe_send_all(fd, p->buf, bytes, timeout_s, "data", err) ||
	    pipette_probe_recv_all(fd, &ack, 1, timeout_s, "ack", err))
		return -1;
	*seconds = pipette_probe_now() - t0;
	return 0;
}

static void tcp_close(void *pair)
{
	struct tcp_pair *p = pair;

	if (p)
		free(p->buf);
	free(p);
}

const struct pipette_probe_link_ops pipette_probe_tcp_ops = {
	.tool = "pipette-probe tcp",
	.metric = "alpha-beta fit",
	.open = tcp_open,
	.xfer = tcp_xfer,
	.close = tcp_close,
	.ctx = NULL,
};

/* ---- bounds ---- */

/* Longest a pair may legitimately take: handshake (connect + hello + ack)
 * and every transfer (warm-up and timed, both ways), each bounded by one
 * timeout. */
static double pair_bound(const struct pipette_probe_opts *o)
{
	return o->timeout_s * (4.0 + 2.0 * (o->nsizes * o->reps + 1));
}

static int wanted(const struct pipette_probe_inter_cfg *cfg, const char *a,
		  const char *b)
{
	int i;

	if (!cfg->only)
		return 1;
	for (i = 0; i < cfg->n_only; i++)
		if (!strcmp(cfg->only[i], a) || !strcmp(cfg->only[i], b))
			return 1;
	return 0;
}

/* ---- one pair ---- */

static int pair_connect(const struct pipette_probe_opts *o, const struct peer *pp,
			int round, int me, int peer, int lfd, int *fd,
			struct pipette_err *err)
{
	uint8_t b[PAIR_LEN];
	double deadline;

	if (me < peer) {
		if (pipette_probe_connect(pp[peer].addr, pp[peer].port, o->timeout_s,
					  fd, err))
			return -1;
		pipette_probe_put_u32(b, MAGIC);
		pipette_probe_put_u32(b + 4, (uint32_t)round);
		pipette_probe_put_u32(b + 8, (uint32_t)me);
		if (pipette_probe_send_all(*fd, b, sizeof(b), o->timeout_s,
					   "pair hello", err) ||
		    pipette_probe_recv_all(*fd, b, sizeof(b), o->timeout_s,
					   "pair hello ack", err))
			goto fail;
		if (pipette_probe_get_u32(b) != MAGIC ||
		    pipette_probe_get_u32(b + 4) != (uint32_t)round ||
		    pipette_probe_get_u32(b + 8) != (uint32_t)peer) {
			pipette_fail(err, "pair hello ack: unexpected answer");
			goto fail;
		}
		return 0;
	}
	/* The higher rank accepts; a late connection from an earlier, failed
	 * round (or a stranger) is dropped and the wait goes on. */
	deadline = pipette_probe_now() + o->timeout_s;
	for (;;) {
		double left = deadline - pipette_probe_now();

		if (left <= 0)
			return pipette_fail(err, "no connection from rank %d within "
					    "%.3g s", peer, o->timeout_s);
		if (pipette_probe_accept(lfd, left, fd, NULL, err))
			return -1;
		if (!pipette_probe_recv_all(*fd, b, sizeof(b), o->timeout_s,
					    "pair hello", NULL) &&
		    pipette_probe_get_u32(b) == MAGIC &&
		    pipette_probe_get_u32(b + 4) == (uint32_t)round &&
		    pipette_probe_get_u32(b + 8) == (uint32_t)peer)
			break;
		close(*fd);
		*fd = -1;
	}
	pipette_probe_put_u32(b + 8, (uint32_t)me);
	if (pipette_probe_send_all(*fd, b, sizeof(b), o->timeout_s,
				   "pair hello ack", err))
		goto fail;
	return 0;
fail:
	close(*fd);
	*fd = -1;
	return -1;
}

/* Measure with `peer`; medians of this rank's outgoing direction. */
static int measure_pair(const struct pipette_probe_inter_cfg *cfg,
			const struct peer *pp, int round, int me, int peer,
			int lfd, double *median, struct pipette_err *err)
{
	const struct pipette_probe_opts *o = cfg->opts;
	const struct pipette_probe_link_ops *ops = cfg->ops;
	int lower = me < peer, fd = -1, rv = -1, dir, s, k;
	size_t maxb = 0;
	void *pair = NULL;
	double *t = NULL, scratch[1000], dummy;

	for (s = 0; s < o->nsizes; s++)
		if (o->sizes[s] > maxb)
			maxb = o->sizes[s];
	t = malloc((size_t)o->nsizes * (size_t)o->reps * sizeof(*t));
	if (!t)
		return pipette_fail(err, "out of memory");
	if (pair_connect(o, pp, round, me, peer, lfd, &fd, err))
		goto out;
	if (ops->open(ops->ctx, fd, lower, maxb, o->timeout_s, &pair, err))
		goto out;
	/* Warm-up, both ways (connection setup, TCP slow start, NCCL's
	 * first-use allocations); not recorded. */
	for (dir = 0; dir < 2; dir++)
		if (ops->xfer(pair, fd, (dir == 0) == lower, maxb, o->timeout_s,
			      &dummy, err))
			goto out;
	for (dir = 0; dir < 2; dir++) {
		int sender = (dir == 0) == lower;

		for (s = 0; s < o->nsizes; s++)
			for (k = 0; k < o->reps; k++)
				if (ops->xfer(pair, fd, sender, o->sizes[s],
					      o->timeout_s,
					      sender ? &t[s * o->reps + k] : &dummy,
					      err))
					goto out;
	}
	for (s = 0; s < o->nsizes; s++)
		median[s] = pipette_probe_median(&t[s * o->reps], (size_t)o->reps,
						 scratch);
	rv = 0;
out:
	if (rv)
		pipette_fail_prefix(err, "pair %s-%s (round %d): ", pp[me].name,
				    pp[peer].name, round + 1);
	if (pair)
		ops->close(pair);
	if (fd >= 0)
		close(fd);
	free(t);
	return rv;
}

/* ---- wire messages ---- */

static void put_name(uint8_t *p, const char *s, size_t len)
{
	memset(p, 0, len);
	memcpy(p, s, strnlen(s, len - 1));
}

static void get_name(char *dst, const uint8_t *p, size_t len)
{
	memcpy(dst, p, len);
	dst[len - 1] = '\0';
}

static void encode_report(uint8_t *b, int round, int rank, int peer,
			  uint32_t status, int nsizes, const double *median,
			  const char *reason)
{
	int s;

	memset(b, 0, REPORT_LEN);
	pipette_probe_put_u32(b, MAGIC);
	pipette_probe_put_u32(b + 4, (uint32_t)round);
	pipette_probe_put_u32(b + 8, (uint32_t)rank);
	pipette_probe_put_u32(b + 12, peer < 0 ? NO_PEER : (uint32_t)peer);
	pipette_probe_put_u32(b + 16, status);
	pipette_probe_put_u32(b + 20, (uint32_t)nsizes);
	for (s = 0; s < nsizes && median; s++)
		pipette_probe_put_f64(b + 24 + 8 * s, median[s]);
	if (reason)
		put_name(b + 24 + 8 * PIPETTE_PROBE_MAX_SIZES, reason,
			 PIPETTE_PROBE_REASON_MAX);
}

static void ctl_close(struct peer *p)
{
	if (p->ctl >= 0)
		close(p->ctl);
	p->ctl = -1;
}

static void leave_out(struct pipette_probe_result *r, struct peer *pp, int k,
		      const char *why, FILE *progress)
{
	if (!pp[k].alive)
		return;
	pp[k].alive = 0;
	ctl_close(&pp[k]);
	r->left_out[k] = 1;
	pipette_strlcpy(r->reason[k], why, sizeof(r->reason[k]));
	if (progress)
		fprintf(progress, "pipette-probe: node %s (rank %d) left out: %s\n",
			pp[k].name, k, why);
}

/* Record rank `from`'s outgoing direction to `to`. */
static void record(struct pipette_probe_result *r, int from, int to,
		   const double *median, FILE *progress)
{
	struct pipette_err e;
	size_t cell = (size_t)from * (size_t)r->n + (size_t)to;
	double g, l;
	int s;

	for (s = 0; s < r->nsizes; s++)
		r->median_s[cell * (size_t)r->nsizes + (size_t)s] = median[s];
	if (!pipette_probe_link_fit(r->sizes, median, r->nsizes, &g, &l, &e)) {
		r->gbps[cell] = g;
		r->lat_us[cell] = l;
		return;
	}
	/* A fit that fails (noise at small sizes) still leaves the largest
	 * message's rate, which is what the time model's β mostly needs. */
	{
		int big = 0;

		for (s = 1; s < r->nsizes; s++)
			if (r->sizes[s] > r->sizes[big])
				big = s;
		if (median[big] > 0)
			r->gbps[cell] = (double)r->sizes[big] / median[big] / 1e9;
	}
	if (progress)
		fprintf(progress, "pipette-probe: %s -> %s: %s; kept the largest "
			"message's rate\n", r->names[from], r->names[to], e.msg);
}

/* ---- rank 0 ---- */

static int root_rendezvous(const struct pipette_probe_inter_cfg *cfg,
			   struct peer *pp, struct pipette_probe_result *r,
			   struct pipette_err *err)
{
	const struct pipette_probe_opts *o = cfg->opts;
	int n = cfg->task->size, lfd, port, joined = 1, k;
	double deadline;
	uint8_t b[HELLO_LEN];
	char why[PIPETTE_PROBE_REASON_MAX];

	if (pipette_probe_listen(cfg->task->port, &lfd, &port, err))
		return pipette_fail_prefix(err, "rank 0 control port: ");
	deadline = pipette_probe_now() + o->timeout_s;
	while (joined < n) {
		struct pipette_err e;
		char addr[PIPETTE_PROBE_ADDR_MAX];
		double left = deadline - pipette_probe_now();
		int fd, rk, i, dup;

		if (left <= 0 || pipette_probe_accept(lfd, left, &fd, addr, &e))
			break;
		if (pipette_probe_recv_all(fd, b, sizeof(b), o->timeout_s,
					   "hello", &e) ||
		    pipette_probe_get_u32(b) != MAGIC ||
		    pipette_probe_get_u32(b + 4) != VERSION ||
		    pipette_probe_get_u32(b + 12) != (uint32_t)n) {
			if (cfg->progress)
				fprintf(cfg->progress, "pipette-probe: dropped a "
					"connection from %s: not a pipette-probe "
					"of this step (or another version, or "
					"another SLURM_NTASKS)\n", addr);
			close(fd);
			continue;
		}
		rk = (int)pipette_probe_get_u32(b + 8);
		if (rk <= 0 || rk >= n || pp[rk].ctl >= 0) {
			close(fd);
			continue;
		}
		get_name(pp[rk].name, b + 20, PIPETTE_PROBE_NAME_MAX);
		get_name(pp[rk].domain, b + 20 + PIPETTE_PROBE_NAME_MAX, DOMAIN_LEN);
		dup = !strcmp(pp[0].name, pp[rk].name);
		for (i = 1; i < n; i++)
			if (i != rk && pp[i].ctl >= 0 &&
			    !strcmp(pp[i].name, pp[rk].name))
				dup = 1;
		if (dup) {
			close(fd);
			close(lfd);
			return pipette_fail(err, "two tasks on node %s: run one task "
					    "per node (srun --ntasks-per-node=1)",
					    pp[rk].name);
		}
		pp[rk].ctl = fd;
		pp[rk].port = (int)pipette_probe_get_u32(b + 16);
		pipette_strlcpy(pp[rk].addr, addr, sizeof(pp[rk].addr));
		pp[rk].alive = 1;
		joined++;
	}
	close(lfd);
	for (k = 1; k < n; k++)
		if (pp[k].ctl < 0) {
			pp[k].alive = 1;	/* so that leave_out records it */
			snprintf(why, sizeof(why), "did not join rank 0 within "
				 "%.3g s", o->timeout_s);
			snprintf(pp[k].name, sizeof(pp[k].name), "rank%d", k);
			leave_out(r, pp, k, why, cfg->progress);
		}
	pipette_strlcpy(pp[0].domain, cfg->task->domain, sizeof(pp[0].domain));
	for (k = 0; k < n; k++) {
		pipette_strlcpy(r->names[k], pp[k].name, sizeof(r->names[k]));
		if (pp[k].ctl >= 0 || k == 0)
			pipette_strlcpy(r->domain[k], pp[k].domain, sizeof(r->domain[k]));
	}
	/* Send the table; rank 0's address is the one each peer reached. */
	for (k = 1; k < n; k++) {
		uint8_t *t;
		size_t len = 8 + (size_t)n * ENTRY_LEN;
		struct pipette_err e;
		int i;

		if (!pp[k].alive)
			continue;
		t = calloc(1, len);
		if (!t)
			return pipette_fail(err, "out of memory");
		pipette_probe_put_u32(t, MAGIC);
		pipette_probe_put_u32(t + 4, (uint32_t)n);
		for (i = 0; i < n; i++) {
			uint8_t *q = t + 8 + (size_t)i * ENTRY_LEN;

			pipette_probe_put_u32(q, (uint32_t)pp[i].alive);
			pipette_probe_put_u32(q + 4, (uint32_t)pp[i].port);
			if (i == 0)
				pipette_probe_local_addr(pp[k].ctl, pp[0].addr, NULL);
			put_name(q + 8, pp[i].addr, PIPETTE_PROBE_ADDR_MAX);
			put_name(q + 8 + PIPETTE_PROBE_ADDR_MAX, pp[i].name,
				 PIPETTE_PROBE_NAME_MAX);
		}
		if (pipette_probe_send_all(pp[k].ctl, t, len, o->timeout_s,
					   "table", &e))
			leave_out(r, pp, k, e.msg, cfg->progress);
		free(t);
	}
	return 0;
}

static int root_run(const struct pipette_probe_inter_cfg *cfg, struct peer *pp,
		    int lfd, struct pipette_probe_result *r, struct pipette_err *err)
{
	const struct pipette_probe_opts *o = cfg->opts;
	int n = cfg->task->size, R = pipette_probe_rounds(n), round, k;
	long total = 0, done = 0;
	double t_start = pipette_probe_now();
	uint8_t *ctl = malloc(16 + (size_t)n);
	double median[PIPETTE_PROBE_MAX_SIZES] = { 0 };

	if (!ctl)
		return pipette_fail(err, "out of memory");
	for (round = 0; round < R; round++)
		for (k = 0; k < n; k++) {
			int p = pipette_probe_peer(n, round, k);

			total += (p > k && wanted(cfg, pp[k].name, pp[p].name));
		}
	if (cfg->progress)
		fprintf(cfg->progress, "pipette-probe: %d nodes, %d rounds, %ld "
			"pairs to measure (%s)\n", n, R, total, cfg->ops->tool);
	for (round = 0; round < R; round++) {
		double deadline;
		int p = pipette_probe_peer(n, round, 0);
		struct pipette_err e;

		pipette_probe_put_u32(ctl, MAGIC);
		pipette_probe_put_u32(ctl + 4, MSG_GO);
		pipette_probe_put_u32(ctl + 8, (uint32_t)round);
		pipette_probe_put_u32(ctl + 12, (uint32_t)n);
		/* Bit 0: alive; bit 1: measure your pair this round.  Rank 0
		 * alone applies --nodes, so the ranks cannot disagree. */
		for (k = 0; k < n; k++) {
			int q = pipette_probe_peer(n, round, k);

			ctl[16 + k] = (uint8_t)(pp[k].alive |
				(q >= 0 && wanted(cfg, pp[k].name, pp[q].name)) << 1);
		}
		for (k = 1; k < n; k++)
			if (pp[k].alive &&
			    pipette_probe_send_all(pp[k].ctl, ctl, 16 + (size_t)n,
						   o->timeout_s, "go", &e))
				leave_out(r, pp, k, e.msg, cfg->progress);
		if (p > 0 && pp[p].alive && wanted(cfg, pp[0].name, pp[p].name)) {
			if (measure_pair(cfg, pp, round, 0, p, lfd, median, &e)) {
				r->link_failures++;
				if (cfg->progress)
					fprintf(cfg->progress, "pipette-probe: %s\n",
						e.msg);
			} else {
				record(r, 0, p, median, cfg->progress);
			}
		}
		deadline = pipette_probe_now() + pair_bound(o) + o->timeout_s;
		for (k = 1; k < n; k++) {
			uint8_t b[REPORT_LEN];
			double left = deadline - pipette_probe_now();
			int s, peer;
			uint32_t st;

			if (!pp[k].alive)
				continue;
			if (pipette_probe_recv_all(pp[k].ctl, b, sizeof(b),
						   left > 0.001 ? left : 0.001,
						   "report", &e)) {
				leave_out(r, pp, k, e.msg, cfg->progress);
				continue;
			}
			if (pipette_probe_get_u32(b) != MAGIC ||
			    pipette_probe_get_u32(b + 4) != (uint32_t)round ||
			    pipette_probe_get_u32(b + 8) != (uint32_t)k) {
				leave_out(r, pp, k, "report out of sequence",
					  cfg->progress);
				continue;
			}
			st = pipette_probe_get_u32(b + 16);
			peer = (int)pipette_probe_get_u32(b + 12);
			if (st == REP_FAILED && peer > k) {
				char why[PIPETTE_PROBE_REASON_MAX];

				r->link_failures++;
				/* The reason field is REASON_MAX bytes at the end of
				 * the report: never copy more than that. */
				get_name(why, b + 24 + 8 * PIPETTE_PROBE_MAX_SIZES,
					 PIPETTE_PROBE_REASON_MAX);
				if (cfg->progress)
					fprintf(cfg->progress, "pipette-probe: %s\n",
						why);
			}
			if (st != REP_OK || peer < 0 || peer >= n)
				continue;
			for (s = 0; s < r->nsizes; s++)
				median[s] = pipette_probe_get_f64(b + 24 + 8 * s);
			record(r, k, peer, median, cfg->progress);
		}
		for (k = 0; k < n; k++) {
			int q = pipette_probe_peer(n, round, k);

			if (q > k && !isnan(r->gbps[(size_t)k * n + q]) &&
			    !isnan(r->gbps[(size_t)q * n + k]) &&
			    wanted(cfg, pp[k].name, pp[q].name))
				done++;
		}
		if (cfg->tty.fn)
			pipette_progress_report(&cfg->tty, "pairs measured", done, total);
		else if (cfg->progress)
			fprintf(cfg->progress, "pipette-probe: round %d of %d done, "
				"%ld of %ld pairs measured, %.1f s\n", round + 1, R,
				done, total, pipette_probe_now() - t_start);
	}
	pipette_probe_put_u32(ctl + 4, MSG_DONE);
	for (k = 1; k < n; k++)
		if (pp[k].alive) {
			pipette_probe_send_all(pp[k].ctl, ctl, 16 + (size_t)n,
					       o->timeout_s, "done", NULL);
			ctl_close(&pp[k]);
		}
	free(ctl);
	return 0;
}

/* ---- the other ranks ---- */

static int worker_run(const struct pipette_probe_inter_cfg *cfg, struct peer *pp,
		      int lfd, int dport, struct pipette_err *err)
{
	const struct pipette_probe_task *t = cfg->task;
	const struct pipette_probe_opts *o = cfg->opts;
	int n = t->size, fd = -1, rv = -1, k;
	uint8_t hello[HELLO_LEN], *buf = NULL;
	size_t tlen = 8 + (size_t)n * ENTRY_LEN;
	/* Rank 0 waits up to one timeout for everyone to join, then takes a
	 * round's own pair plus the report window before the next GO. */
	double wait_go = 2.0 * pair_bound(o) + 2.0 * o->timeout_s;

	if (pipette_probe_connect(t->root, t->port, o->timeout_s, &fd, err))
		return pipette_fail_prefix(err, "rank %d: rank 0: ", t->rank);
	pipette_probe_put_u32(hello, MAGIC);
	pipette_probe_put_u32(hello + 4, VERSION);
	pipette_probe_put_u32(hello + 8, (uint32_t)t->rank);
	pipette_probe_put_u32(hello + 12, (uint32_t)n);
	pipette_probe_put_u32(hello + 16, (uint32_t)dport);
	put_name(hello + 20, t->name, PIPETTE_PROBE_NAME_MAX);
	put_name(hello + 20 + PIPETTE_PROBE_NAME_MAX, t->domain, DOMAIN_LEN);
	buf = malloc(tlen > 16 + (size_t)n ? tlen : 16 + (size_t)n);
	if (!buf) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	if (pipette_probe_send_all(fd, hello, sizeof(hello), o->timeout_s,
				   "hello", err) ||
	    pipette_probe_recv_all(fd, buf, tlen, 2.0 * o->timeout_s + 1.0,
				   "table", err))
		goto out;
	if (pipette_probe_get_u32(buf) != MAGIC ||
	    pipette_probe_get_u32(buf + 4) != (uint32_t)n) {
		pipette_fail(err, "table from rank 0: bad header");
		goto out;
	}
	for (k = 0; k < n; k++) {
		const uint8_t *q = buf + 8 + (size_t)k * ENTRY_LEN;

		pp[k].alive = (int)pipette_probe_get_u32(q);
		pp[k].port = (int)pipette_probe_get_u32(q + 4);
		get_name(pp[k].addr, q + 8, PIPETTE_PROBE_ADDR_MAX);
		get_name(pp[k].name, q + 8 + PIPETTE_PROBE_ADDR_MAX,
			 PIPETTE_PROBE_NAME_MAX);
	}
	/* Rank 0's data port was not in its own table entry: it listens on
	 * the address we reached, so keep that. */
	if (!pp[0].addr[0])
		pipette_strlcpy(pp[0].addr, t->root, sizeof(pp[0].addr));
	for (;;) {
		uint8_t rep[REPORT_LEN];
		double median[PIPETTE_PROBE_MAX_SIZES] = { 0 };
		struct pipette_err e;
		int round, peer;
		uint32_t st = REP_IDLE;

		if (pipette_probe_recv_all(fd, buf, 16 + (size_t)n, wait_go,
					   "waiting for rank 0", err))
			goto out;
		if (pipette_probe_get_u32(buf) != MAGIC ||
		    pipette_probe_get_u32(buf + 12) != (uint32_t)n) {
			pipette_fail(err, "message from rank 0: bad header");
			goto out;
		}
		if (pipette_probe_get_u32(buf + 4) == MSG_DONE)
			break;
		round = (int)pipette_probe_get_u32(buf + 8);
		for (k = 0; k < n; k++)
			pp[k].alive = buf[16 + k] & 1;
		peer = pipette_probe_peer(n, round, t->rank);
		e.msg[0] = '\0';
		if (peer >= 0 && pp[peer].alive && (buf[16 + t->rank] & 2))
			st = measure_pair(cfg, pp, round, t->rank, peer, lfd,
					  median, &e) ? REP_FAILED : REP_OK;
		encode_report(rep, round, t->rank, st == REP_IDLE ? -1 : peer, st,
			      o->nsizes, st == REP_OK ? median : NULL, e.msg);
		if (pipette_probe_send_all(fd, rep, sizeof(rep), o->timeout_s,
					   "report", err))
			goto out;
	}
	rv = 0;
out:
	if (rv)
		pipette_fail_prefix(err, "rank %d: ", t->rank);
	free(buf);
	close(fd);
	return rv;
}

int pipette_probe_inter_run(const struct pipette_probe_inter_cfg *cfg,
			    struct pipette_probe_result **out,
			    struct pipette_err *err)
{
	const struct pipette_probe_task *t = cfg->task;
	const struct pipette_probe_opts *o = cfg->opts;
	struct pipette_probe_result *r = NULL;
	struct peer *pp;
	int n = t->size, lfd = -1, dport, rv = -1, k;

	*out = NULL;
	if (n < 2)
		return pipette_fail(err, "SLURM_NTASKS is %d: the inter-node "
				    "probe needs at least 2 nodes", n);
	if (!t->root[0])
		return pipette_fail(err, "no host for rank 0 (set "
				    "PIPETTE_PROBE_ROOT or SLURM_STEP_NODELIST)");
	pp = calloc((size_t)n, sizeof(*pp));
	if (!pp)
		return pipette_fail(err, "out of memory");
	for (k = 0; k < n; k++)
		pp[k].ctl = -1;
	pp[t->rank].alive = 1;
	pipette_strlcpy(pp[t->rank].name, t->name, sizeof(pp[t->rank].name));
	if (pipette_probe_listen(0, &lfd, &dport, err))
		goto out;
	pp[t->rank].port = dport;
	if (t->rank != 0) {
		rv = worker_run(cfg, pp, lfd, dport, err);
		goto out;
	}
	r = pipette_probe_result_create(n, o->nsizes, o->sizes);
	if (!r) {
		pipette_fail(err, "out of memory for %d nodes", n);
		goto out;
	}
	r->when = time(NULL);
	pipette_strlcpy(r->tool, cfg->ops->tool, sizeof(r->tool));
	pipette_strlcpy(r->metric, cfg->ops->metric, sizeof(r->metric));
	if (root_rendezvous(cfg, pp, r, err) || root_run(cfg, pp, lfd, r, err))
		goto out;
	*out = r;
	r = NULL;
	rv = 0;
out:
	for (k = 0; k < n; k++)
		ctl_close(&pp[k]);
	if (lfd >= 0)
		close(lfd);
	pipette_probe_result_destroy(r);
	free(pp);
	return rv;
}

/* ---- summary ---- */

struct link_ref {
	double gbps;
	int a, b;
};

static int cmp_link(const void *x, const void *y)
{
	const struct link_ref *p = x, *q = y;

	if (p->gbps != q->gbps)
		return p->gbps < q->gbps ? -1 : 1;
	if (p->a != q->a)
		return p->a - q->a;
	return p->b - q->b;
}

/* The NVLink domains the nodes reported: each with its nodes, and how
 * many of the measured links lie inside one (over NVLink). */
static void summary_domains(const struct pipette_probe_result *r, FILE *f)
{
	int n = r->n, i, j, k, nd = 0;
	long inside = 0;

	for (i = 0; i < n; i++) {
		int first = r->domain[i][0] != '\0';

		for (k = 0; k < i && first; k++)
			first = strcmp(r->domain[k], r->domain[i]) != 0;
		if (!first)
			continue;
		nd++;
		fprintf(f, "  NVLink domain %s:", r->domain[i]);
		for (k = i; k < n; k++)
			if (!strcmp(r->domain[k], r->domain[i]))
				fprintf(f, " %s", r->names[k]);
		fputc('\n', f);
	}
	if (!nd)
		return;
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			inside += pipette_probe_same_domain(r, i, j) &&
				  !isnan(r->gbps[(size_t)i * n + j]);
	fprintf(f, "  %ld measured links inside NVLink domains (over NVLink)\n", inside);
}

void pipette_probe_result_summary(const struct pipette_probe_result *r,
				  double slow_fraction, FILE *f)
{
	int n = r->n, i, j, m = 0, shown, nn = 0;
	struct link_ref *l = malloc((size_t)n * (size_t)n * sizeof(*l));
	double *node_med = malloc((size_t)n * sizeof(double));
	double *v = malloc((size_t)(2 * n + 1) * sizeof(double));
	double *scratch = malloc((size_t)(2 * n + 1) * sizeof(double));
	double all;

	if (!l || !node_med || !v || !scratch)
		goto out;
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			if (!isnan(r->gbps[(size_t)i * n + j]))
				l[m++] = (struct link_ref){ r->gbps[(size_t)i * n + j],
							    i, j };
	fprintf(f, "pipette-probe: %d of %d directed links measured (%s)",
		m, n * (n - 1), r->tool);
	for (i = 0; i < n; i++)
		nn += !r->left_out[i];
	fprintf(f, ", %d of %d nodes took part, %d pair failures\n", nn, n,
		r->link_failures);
	for (i = 0; i < n; i++)
		if (r->left_out[i])
			fprintf(f, "  left out: %s: %s\n", r->names[i], r->reason[i]);
	if (!m)
		goto out;
	qsort(l, (size_t)m, sizeof(*l), cmp_link);
	fprintf(f, "  slowest links:\n");
	for (shown = 0; shown < m && shown < 5; shown++) {
		size_t c = (size_t)l[shown].a * n + l[shown].b;

		fprintf(f, "    %s -> %s  %.3f GB/s", r->names[l[shown].a],
			r->names[l[shown].b], l[shown].gbps);
		if (!isnan(r->lat_us[c]))
			fprintf(f, "  %.1f us", r->lat_us[c]);
		if (pipette_probe_same_domain(r, l[shown].a, l[shown].b))
			fputs("  NVLink", f);
		fputc('\n', f);
	}
	summary_domains(r, f);
	/* Per node: median over its measured links, both directions. */
	for (i = 0; i < n; i++) {
		int c = 0;

		for (j = 0; j < n; j++) {
			if (!isnan(r->gbps[(size_t)i * n + j]))
				v[c++] = r->gbps[(size_t)i * n + j];
			if (!isnan(r->gbps[(size_t)j * n + i]))
				v[c++] = r->gbps[(size_t)j * n + i];
		}
		node_med[i] = c ? pipette_probe_median(v, (size_t)c, scratch) : NAN;
	}
	for (i = 0, j = 0; i < n; i++)
		if (!isnan(node_med[i]))
			v[j++] = node_med[i];
	all = pipette_probe_median(v, (size_t)j, scratch);
	fprintf(f, "  median node bandwidth %.3f GB/s\n", all);
	for (i = 0; i < n; i++)
		if (!isnan(node_med[i]) && node_med[i] < slow_fraction * all)
			fprintf(f, "  slow node: %s  median %.3f GB/s (%.0f%% of "
				"the median node)\n", r->names[i], node_med[i],
				100.0 * node_med[i] / all);
out:
	free(l);
	free(node_med);
	free(v);
	free(scratch);
}
