/* pipette: pipeline schedules as operation lists and an event simulation.
 *
 * Sources for the operation orders (read, not copied):
 *  - 1F1B: Narayanan et al., SC'21 §2.2 (PipeDream-flush): rank r runs
 *    min(p-r-1, m) warm-up forwards, then one F one B, then the rest of B.
 *  - Interleaved 1F1B: Megatron-LM forward_backward_pipelining_with_
 *    interleaving (megatron/core/pipeline_parallel/schedules.py): warm-up
 *    (p-r-1)*2 + (v-1)*p virtual micro-batches (all of them when m == p),
 *    virtual micro-batch k runs chunk (k mod pv) div p on micro-batch
 *    (k div pv)*p + k mod p, backward chunks mirrored; Megatron raises an
 *    error when p does not divide m, and so do we.
 *  - ZB-H1: Qi et al., ICLR'24 (arXiv 2401.10241) §3.1, Fig. 3: the 1F1B
 *    order with W split off B; worker i (1-based) delays i-1 W passes, so
 *    it holds (p-i+1) M_B + (i-1) M_W (ZB Table 2 text; models.md §3.2).
 *  - V-Min, V-Half: Qi et al., NeurIPS'24 (arXiv 2405.15362) building
 *    blocks of interval 6 with the per-rank offsets of F(chunk 0),
 *    F(chunk 1), B(chunk 1), B(chunk 0) used by sail-sg/zero-bubble-
 *    pipeline-parallelism zbv_greedy.py (stable_pattern_v_min/_v_half);
 *    W takes the first free slot after its B, chunk 1's first.  We run the
 *    block order as is and let the event simulation squeeze idle slots; the
 *    repo's extra warm-up reordering pass is not reproduced.
 *  - V-ZB: list scheduling at unit op times (F = B = W, no comm) with the
 *    memory cap of 1F1B (2p chunks = p full-stage micro-batches, NeurIPS'24
 *    Table 1): at each slot a rank runs the oldest ready B, else (below
 *    the cap) the ready F of chunk 1 then chunk 0, else a pending W.  This
 *    follows the greedy of sail-sg zbv.py (B first, F under a memory limit,
 *    W to fill), without its profiled-cost bubble search.
 *
 * The simulation processes the ops in one global order that respects both
 * every rank's list order and every dependency (found once per shape), so
 * each op's start is max(rank free, dependency end + transfer) in O(1). */
#include "schedule.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double min_d(double a, double b) { return a < b ? a : b; }

double pipette_schedule_inflight(enum pipette_schedule_kind kind, int p, int v,
				 long m, int stage)
{
	double chunks;

	if (v < 1)
		v = 1;
	switch (kind) {
	case PIPETTE_SCHED_INTERLEAVED:
		/* Megatron's interleaved warm-up on rank r runs
		 * (p - r - 1)*2 + (v - 1)*p chunks before the first backward,
		 * plus the one in flight: for r = 0 that is p*(1 + (p-1)/(p*v))
		 * full-stage micro-batches (Korthikanti et al., §4.2.3).
		 * When m == p Megatron runs every forward before any backward
		 * (schedules.py, "all_warmup_microbatches"), so every rank
		 * holds all m*v chunks: the event simulation showed the
		 * formula alone under-counts the late ranks there. */
		if (m == p)
			return (double)m;
		chunks = (double)(p - stage - 1) * 2 + (double)(v - 1) * p + 1;
		return min_d(chunks, (double)m * v) / v;
	/* V-shapes (Qi et al., NeurIPS'24) hold about the same on every rank;
	 * the figures are the device peak counted from F to W, as the paper
	 * does, and equal the simulation's max over ranks of peak_fw / 2 (an
	 * upper bound per rank) for every m and p <= 32 in
	 * tests/unit/test_schedule.c (and p <= 64 in a wider sweep). */
	case PIPETTE_SCHED_V_MIN:
		/* HF space table: (p+4)//3 micro-batches. */
		return min_d((double)((p + 4) / 3), (double)m);
	case PIPETTE_SCHED_V_HALF:
		/* HF space table: (p+2)//2 micro-batches. */
		return min_d((double)((p + 2) / 2), (double)m);
	case PIPETTE_SCHED_V_ZB:
		/* 1F1B's peak pM_B (ZB paper §3.2), on every rank of the V:
		 * the old p - stage under-counted all ranks but the first. */
		return min_d((double)p, (double)m);
	case PIPETTE_SCHED_1F1B:
	case PIPETTE_SCHED_ZB_H1:
	default:
		/* 1F1B: rank r holds p - r micro-batches (Narayanan et al. SC'21). */
		return min_d((double)(p - stage), (double)m);
	}
}

enum { OP_F = 0, OP_B = 1, OP_W = 2 };

/* One op in the global order: 12 bytes, the simulation's whole input. */
struct gop {
	int32_t dep;
	int32_t key;		/* (rank*v + chunk)*3 + type */
	int32_t rank;
};

/* One op in a rank's list. */
struct rop {
	uint8_t type;
	uint8_t chunk;
	int32_t mb;
};

struct pipette_sched {
	/* Shape of the cached order (valid == 0: none). */
	int valid;
	int simulated;		/* the arrays hold a simulation of this shape */
	enum pipette_schedule_kind kind;
	int p, v;
	long m;
	int split_w;		/* W is a separate op */
	int S;			/* virtual stages */
	long per_rank;		/* ops per rank */
	long n;			/* ops in all */

	/* Rank lists: op i of rank r at rops[RIDX(s, r, i)], index-major so
	 * that ranks working at similar list positions share cache lines. */
	struct rop *rops;
	int32_t *rank_pos;	/* global index of each rank-list op */

	/* Global order: op i depends on op gops[i].dep (-1: none); its
	 * duration and incoming transfer are dur_tab/cin_tab[gops[i].key]. */
	struct gop *gops;
	int32_t *g_mb;
	double *g_end;

	int32_t *pos_tab;	/* (type, stage, mb) -> global index, or -1 */
	int32_t *slot_tab;	/* V-ZB greedy: (F/B, stage, mb) -> slot */
	int32_t *wq;		/* V-ZB greedy: per-rank W queue */
	int32_t *ptr;		/* per rank cursor */
	long *len;		/* per rank: ops listed so far */
	long *vst;		/* V-ZB greedy: 8 counters per rank */

	double *busy, *freet, *dur_tab, *cin_tab;
	int *peak_fb, *peak_fw;
	double *peak_fb_st, *peak_fw_st;

	size_t cap_ops, cap_tab, cap_rank, cap_stage;
};

struct pipette_sched *pipette_sched_create(void)
{
	return calloc(1, sizeof(struct pipette_sched));
}

static void free_arrays(struct pipette_sched *s)
{
	free(s->rops);
	free(s->rank_pos);
	free(s->gops);
	free(s->g_mb);
	free(s->g_end);
	free(s->pos_tab);
	free(s->slot_tab);
	free(s->wq);
	free(s->ptr);
	free(s->len);
	free(s->vst);
	free(s->busy);
	free(s->freet);
	free(s->dur_tab);
	free(s->cin_tab);
	free(s->peak_fb);
	free(s->peak_fw);
	free(s->peak_fb_st);
	free(s->peak_fw_st);
}

void pipette_sched_destroy(struct pipette_sched *s)
{
	if (!s)
		return;
	free_arrays(s);
	free(s);
}

/* Grow *pp to hold n elements of size el; capacity tracked by the caller. */
static int grow(void *pp, size_t n, size_t el)
{
	void *q = realloc(*(void **)pp, n > 0 ? n * el : el);

	if (!q)
		return -1;
	*(void **)pp = q;
	return 0;
}

static int reserve(struct pipette_sched *s, size_t ops, size_t tab,
		   size_t ranks, size_t stages)
{
	if (ops > s->cap_ops) {
		if (grow(&s->rops, ops, sizeof(*s->rops)) ||
		    grow(&s->rank_pos, ops, sizeof(int32_t)) ||
		    grow(&s->gops, ops, sizeof(*s->gops)) ||
		    grow(&s->g_mb, ops, sizeof(int32_t)) ||
		    grow(&s->g_end, ops, sizeof(double)))
			return -1;
		s->cap_ops = ops;
	}
	if (tab > s->cap_tab) {
		if (grow(&s->pos_tab, tab, sizeof(int32_t)) ||
		    grow(&s->slot_tab, tab, sizeof(int32_t)) ||
		    grow(&s->wq, tab, sizeof(int32_t)))
			return -1;
		s->cap_tab = tab;
	}
	if (ranks > s->cap_rank) {
		if (grow(&s->ptr, ranks, sizeof(int32_t)) ||
		    grow(&s->len, ranks, sizeof(long)) ||
		    grow(&s->vst, ranks * 8, sizeof(long)) ||
		    grow(&s->busy, ranks, sizeof(double)) ||
		    grow(&s->freet, ranks, sizeof(double)) ||
		    grow(&s->peak_fb, ranks, sizeof(int)) ||
		    grow(&s->peak_fw, ranks, sizeof(int)) ||
		    grow(&s->peak_fb_st, ranks, sizeof(double)) ||
		    grow(&s->peak_fw_st, ranks, sizeof(double)))
			return -1;
		s->cap_rank = ranks;
	}
	if (stages > s->cap_stage) {
		if (grow(&s->dur_tab, stages * 3, sizeof(double)) ||
		    grow(&s->cin_tab, stages * 3, sizeof(double)))
			return -1;
		s->cap_stage = stages;
	}
	return 0;
}

#define RIDX(s, r, i) ((size_t)(i) * (size_t)(s)->p + (size_t)(r))

static int is_v_shape(enum pipette_schedule_kind k)
{
	return k == PIPETTE_SCHED_V_MIN || k == PIPETTE_SCHED_V_HALF ||
	       k == PIPETTE_SCHED_V_ZB;
}

static int vstage(const struct pipette_sched *s, int r, int c)
{
	if (s->kind == PIPETTE_SCHED_INTERLEAVED)
		return c * s->p + r;
	if (is_v_shape(s->kind))
		return c == 0 ? r : 2 * s->p - 1 - r;
	return r;
}

static void emit(struct pipette_sched *s, int r, long *len, int type,
		 int chunk, long mb)
{
	struct rop *o = &s->rops[RIDX(s, r, *len)];

	o->type = (uint8_t)type;
	o->chunk = (uint8_t)chunk;
	o->mb = (int32_t)mb;
	(*len)++;
}

static void build_1f1b(struct pipette_sched *s, int r, long *len)
{
	long m = s->m, nw = s->p - r - 1 < m ? s->p - r - 1 : m;
	long lag = s->split_w ? r : 0;	/* ZB-H1: worker r delays r W's */
	long j, nb = 0, nwd = 0;

	for (j = 0; j < nw; j++)
		emit(s, r, len, OP_F, 0, j);
	for (j = 0; j < m; j++) {
		if (nw + j < m)
			emit(s, r, len, OP_F, 0, nw + j);
		emit(s, r, len, OP_B, 0, j);
		nb++;
		if (s->split_w)
			while (nb - nwd > lag)
				emit(s, r, len, OP_W, 0, nwd++);
	}
	if (s->split_w)
		while (nwd < m)
			emit(s, r, len, OP_W, 0, nwd++);
}

static void interleaved_op(const struct pipette_sched *s, long k, int fwd,
			   int *chunk, long *mb)
{
	long pv = (long)s->p * s->v, in_group = k % pv;
	int c = (int)(in_group / s->p);

	*chunk = fwd ? c : s->v - 1 - c;
	*mb = (k / pv) * s->p + in_group % s->p;
}

static void build_interleaved(struct pipette_sched *s, int r, long *len)
{
	long total = s->m * s->v, nw, k;
	int c;
	long mb;

	if (s->m == s->p)
		nw = total;
	else {
		nw = (long)(s->p - r - 1) * 2 + (long)(s->v - 1) * s->p;
		if (nw > total)
			nw = total;
	}
	for (k = 0; k < nw; k++) {
		interleaved_op(s, k, 1, &c, &mb);
		emit(s, r, len, OP_F, c, mb);
	}
	for (k = 0; k < total - nw; k++) {
		interleaved_op(s, nw + k, 1, &c, &mb);
		emit(s, r, len, OP_F, c, mb);
		interleaved_op(s, k, 0, &c, &mb);
		emit(s, r, len, OP_B, c, mb);
	}
	for (k = total - nw; k < total; k++) {
		interleaved_op(s, k, 0, &c, &mb);
		emit(s, r, len, OP_B, c, mb);
	}
}

/* V-Min / V-Half building block: slot offsets of F0, F1, B1, B0 on rank r
 * (zbv_greedy.py stable_pattern_v_min / stable_pattern_v_half). */
static void v_offsets(enum pipette_schedule_kind k, int p, int r, long o[4])
{
	if (k == PIPETTE_SCHED_V_MIN) {
		long gap = p % 3 == 0 ? 2 : 0;

		o[0] = r;
		o[1] = 2L * p - r - 1;
		o[2] = 2L * p + gap + r;
		o[3] = 4L * p + gap - r - 1;
	} else {
		long gap = p % 2 == 0 ? 3 : 0;

		o[0] = 2L * r;
		o[1] = 3L * p - r - 2;
		o[2] = 3L * p + gap + 2L * r - 1;
		o[3] = 6L * p + gap - r - 2;
	}
}

static int build_v_block(struct pipette_sched *s, int r, long *len,
			 struct pipette_err *err)
{
	/* pattern type j: F chunk 0, F chunk 1, B chunk 1, B chunk 0 */
	static const int jtype[4] = { OP_F, OP_F, OP_B, OP_B };
	static const int jchunk[4] = { 0, 1, 1, 0 };
	long o[4], t, end = 0, wpend[2] = { 0, 0 }, wnext[2] = { 0, 0 };
	int res_j[6], j;

	v_offsets(s->kind, s->p, r, o);
	for (j = 0; j < 6; j++)
		res_j[j] = -1;
	for (j = 0; j < 4; j++) {
		if (res_j[o[j] % 6] != -1)
			return pipette_fail(err, "schedule %s: p=%d: building-block slots collide on rank %d",
					    pipette_schedule_name(s->kind), s->p, r);
		res_j[o[j] % 6] = j;
		if (o[j] + 6 * (s->m - 1) > end)
			end = o[j] + 6 * (s->m - 1);
	}
	for (t = 0; t <= end; t++) {
		int jj = res_j[t % 6];
		long mb = jj >= 0 ? (t - o[jj]) / 6 : -1;

		if (jj >= 0 && t >= o[jj] && mb < s->m) {
			emit(s, r, len, jtype[jj], jchunk[jj], mb);
			if (jtype[jj] == OP_B)
				wpend[jchunk[jj]]++;
		} else if (wpend[1] > 0) {
			wpend[1]--;
			emit(s, r, len, OP_W, 1, wnext[1]++);
		} else if (wpend[0] > 0) {
			wpend[0]--;
			emit(s, r, len, OP_W, 0, wnext[0]++);
		}
	}
	while (wnext[1] < s->m)
		emit(s, r, len, OP_W, 1, wnext[1]++);
	while (wnext[0] < s->m)
		emit(s, r, len, OP_W, 0, wnext[0]++);
	return 0;
}

#define SLOT(k, st) (((size_t)(k) * S + (size_t)(st)) * 2)

/* V-ZB order by unit-time list scheduling (see the file comment). */
static int build_v_zb(struct pipette_sched *s, long *len, struct pipette_err *err)
{
	int p = s->p, S = s->S, r;
	long m = s->m, cap = 2L * p, t, left = (long)p * s->per_rank;
	/* slot of F / B of (stage st, micro-batch k) at SLOT(k, st) / +1:
	 * micro-batch-major, so the active window stays in cache */
	int32_t *fslot = s->slot_tab, *bslot = s->slot_tab + 1;
	/* per-rank counters live in the W-queue area after the queues */
	int32_t *wq = s->wq;
	long *st = s->vst;

	/* st[r*8 + 0..7]: nextF0 nextF1 nextB1 nextB0 held wq_head wq_tail - */
	memset(st, 0, (size_t)p * 8 * sizeof(long));
	for (size_t i = 0; i < (size_t)2 * S * m; i++)
		s->slot_tab[i] = INT32_MAX;
	for (t = 0; left > 0; t++) {
		int acted = 0;

		if (t > INT32_MAX - 2)
			return pipette_fail(err, "schedule v-zb: too many slots");
		for (r = 0; r < p; r++) {
			long *c = &st[(size_t)r * 8];
			int32_t *q = wq + (size_t)r * 2 * m;
			int s0 = r, s1 = 2 * p - 1 - r;
			int b1 = 0, b0 = 0, f1 = 0, f0 = 0;

			/* B of chunk 1 (stage s1): the loss stage waits for its
			 * own F, the others for B of stage s1 + 1. */
			if (c[2] < m && c[2] < c[1]) {
				long k = c[2];
				b1 = s1 == S - 1 ? fslot[SLOT(k, s1)] < t :
					bslot[SLOT(k, s1 + 1)] < t;
			}
			if (c[3] < m && c[3] < c[0])
				b0 = bslot[SLOT(c[3], s0 + 1)] < t;
			if (c[1] < m && c[1] < c[0])
				f1 = fslot[SLOT(c[1], s1 - 1)] < t;
			if (c[0] < m)
				f0 = s0 == 0 || fslot[SLOT(c[0], s0 - 1)] < t;
			if (b1 && b0) {
				/* the older micro-batch first; chunk 0 on a tie */
				if (c[2] < c[3])
					b0 = 0;
				else
					b1 = 0;
			}
			if (b0) {
				emit(s, r, &len[r], OP_B, 0, c[3]);
				bslot[SLOT(c[3], s0)] = (int32_t)t;
				q[c[6]++ % (2 * m)] = (int32_t)(c[3] * 2);
				c[3]++;
			} else if (b1) {
				emit(s, r, &len[r], OP_B, 1, c[2]);
				bslot[SLOT(c[2], s1)] = (int32_t)t;
				q[c[6]++ % (2 * m)] = (int32_t)(c[2] * 2 + 1);
				c[2]++;
			} else if (c[4] < cap && (f1 || f0)) {
				if (f1) {
					emit(s, r, &len[r], OP_F, 1, c[1]);
					fslot[SLOT(c[1], s1)] = (int32_t)t;
					c[1]++;
				} else {
					emit(s, r, &len[r], OP_F, 0, c[0]);
					fslot[SLOT(c[0], s0)] = (int32_t)t;
					c[0]++;
				}
				c[4]++;
			} else if (c[5] < c[6]) {
				int32_t e = q[c[5]++ % (2 * m)];

				emit(s, r, &len[r], OP_W, e & 1, e >> 1);
				c[4]--;
			} else
				continue;
			acted = 1;
			left--;
		}
		if (!acted)
			return pipette_fail(err, "schedule v-zb: p=%d m=%ld: list scheduling stalled at slot %ld",
					    p, m, t);
	}
	return 0;
}

/* Key of (type, stage, mb) in pos_tab, micro-batch-major so that the
 * window of micro-batches in flight stays in cache. */
#define KEY(type, st, mb) (((long)(mb) * s->S + (st)) * 3 + (type))

/* Dependency of (type, stage, mb): its key in pos_tab, or -1 for none. */
static long dep_key(const struct pipette_sched *s, int type, int st, long mb)
{
	if (type == OP_F) {
		if (st == 0)
			return -1;
		return KEY(OP_F, st - 1, mb);
	}
	if (type == OP_B) {
		if (st == s->S - 1)
			return KEY(OP_F, st, mb);
		return KEY(OP_B, st + 1, mb);
	}
	return KEY(OP_B, st, mb);
}

/* Build the rank lists, the global order and the peaks for the shape in s. */
static int build(struct pipette_sched *s, struct pipette_err *err)
{
	int p = s->p, r;
	long *len, n = 0, i, top;
	size_t tab = (size_t)3 * s->S * s->m;

	len = s->len;
	memset(len, 0, (size_t)p * sizeof(long));
	if (s->kind == PIPETTE_SCHED_V_ZB) {
		if (build_v_zb(s, len, err))
			goto fail;
	} else {
		for (r = 0; r < p; r++) {
			if (s->kind == PIPETTE_SCHED_INTERLEAVED)
				build_interleaved(s, r, &len[r]);
			else if (is_v_shape(s->kind)) {
				if (build_v_block(s, r, &len[r], err))
					goto fail;
			} else
				build_1f1b(s, r, &len[r]);
		}
	}
	for (r = 0; r < p; r++)
		if (len[r] != s->per_rank) {
			pipette_fail(err, "schedule %s: rank %d lists %ld ops, expected %ld",
				     pipette_schedule_name(s->kind), r, len[r], s->per_rank);
			goto fail;
		}

	/* Global order (Kahn's algorithm over the list heads): advance a rank
	 * while its next op's dependency is placed; a blocked rank waits on
	 * that dependency's key and is woken when it is placed.  O(ops).
	 * A valid order has at most one rank waiting on a key. */
	for (i = 0; i < (long)tab; i++)
		s->pos_tab[i] = s->slot_tab[i] = -1;
	for (r = 0; r < p; r++) {
		s->ptr[r] = 0;
		s->wq[r] = r;	/* the stack of ranks to advance */
	}
	top = p;
	while (top > 0) {
		r = s->wq[--top];
		while (s->ptr[r] < s->per_rank) {
			size_t li = RIDX(s, r, s->ptr[r]);
			const struct rop *o = &s->rops[li];
			int st = vstage(s, r, o->chunk);
			long dk = dep_key(s, o->type, st, o->mb);
			long self = KEY(o->type, st, o->mb);
			int32_t w;

			if (dk >= 0 && s->pos_tab[dk] < 0) {
				if (s->slot_tab[dk] >= 0)
					break;	/* reported below as a deadlock */
				s->slot_tab[dk] = r;
				break;
			}
			if (s->pos_tab[self] >= 0) {
				pipette_fail(err, "schedule %s: rank %d runs %c of chunk %d micro-batch %d twice",
					     pipette_schedule_name(s->kind), r,
					     "FBW"[o->type], o->chunk, o->mb);
				goto fail;
			}
			s->pos_tab[self] = (int32_t)n;
			s->rank_pos[li] = (int32_t)n;
			s->gops[n].dep = dk >= 0 ? s->pos_tab[dk] : -1;
			s->gops[n].key = (r * s->v + o->chunk) * 3 + o->type;
			s->gops[n].rank = r;
			s->g_mb[n] = o->mb;
			n++;
			s->ptr[r]++;
			w = s->slot_tab[self];
			if (w >= 0) {
				s->slot_tab[self] = -1;
				s->wq[top++] = w;
			}
		}
	}
	if (n < s->n) {
		pipette_fail(err, "schedule %s: p=%d v=%d m=%ld: operation lists deadlock",
			     pipette_schedule_name(s->kind), p, s->v, s->m);
		goto fail;
	}

	/* Peaks follow from the list order alone: ops on a rank are serial. */
	for (r = 0; r < p; r++) {
		int fb = 0, fw = 0;

		s->peak_fb[r] = s->peak_fw[r] = 0;
		for (i = 0; i < s->per_rank; i++) {
			const struct rop *o = &s->rops[RIDX(s, r, i)];

			if (o->type == OP_F) {
				fb++;
				fw++;
			} else if (o->type == OP_B) {
				fb--;
				if (!s->split_w)
					fw--;
			} else
				fw--;
			if (fb > s->peak_fb[r])
				s->peak_fb[r] = fb;
			if (fw > s->peak_fw[r])
				s->peak_fw[r] = fw;
		}
		s->peak_fb_st[r] = (double)s->peak_fb[r] / s->v;
		s->peak_fw_st[r] = (double)s->peak_fw[r] / s->v;
	}
	s->valid = 1;
	return 0;
fail:
	s->valid = 0;
	return -1;
}

static int set_shape(struct pipette_sched *s, const struct pipette_sched_input *in,
		     struct pipette_err *err)
{
	const char *name = pipette_schedule_name(in->kind);
	int v = in->v;
	double ops;

	if ((int)in->kind < 0 || in->kind >= PIPETTE_SCHED_COUNT)
		return pipette_fail(err, "schedule: kind %d is not a schedule", (int)in->kind);
	if (in->p < 1)
		return pipette_fail(err, "schedule %s: p=%d: need at least one pipeline rank", name, in->p);
	if (in->m < 1)
		return pipette_fail(err, "schedule %s: m=%ld: need at least one micro-batch", name, in->m);
	if (in->kind == PIPETTE_SCHED_INTERLEAVED) {
		if (v < 2 || v > 255)
			return pipette_fail(err, "schedule %s: v=%d: interleaving needs 2..255 chunks per rank",
					    name, v);
		if (in->m % in->p != 0)
			return pipette_fail(err, "schedule %s: m=%ld is not a multiple of p=%d "
					    "(Megatron's interleaved schedule requires it)", name, in->m, in->p);
	} else if (is_v_shape(in->kind)) {
		if (v != 2)
			return pipette_fail(err, "schedule %s: v=%d: V-shape schedules use 2 chunks per rank",
					    name, v);
	} else if (v != 1) {
		return pipette_fail(err, "schedule %s: v=%d: this schedule has 1 chunk per rank", name, v);
	}
	ops = (double)in->p * v * (double)in->m * 3.0;
	if (ops > (double)(INT32_MAX / 2))
		return pipette_fail(err, "schedule %s: p=%d v=%d m=%ld: too many operations (%.0f)",
				    name, in->p, v, in->m, ops);
	if (s->valid && s->kind == in->kind && s->p == in->p && s->v == v && s->m == in->m)
		return 0;
	s->valid = 0;
	s->simulated = 0;
	s->kind = in->kind;
	s->p = in->p;
	s->v = v;
	s->m = in->m;
	s->S = in->p * v;
	/* ZB-H1 and all V-shapes split W off B (their blocks place W). */
	s->split_w = in->kind == PIPETTE_SCHED_ZB_H1 || is_v_shape(in->kind);
	s->per_rank = (long)v * in->m * (s->split_w ? 3 : 2);
	s->n = s->per_rank * in->p;
	if (reserve(s, (size_t)s->n, (size_t)3 * s->S * s->m, (size_t)s->p, (size_t)s->S))
		return pipette_fail(err, "schedule %s: out of memory for %ld operations", name, s->n);
	return build(s, err);
}

static int check_time(const double *a, long i, const char *what, struct pipette_err *err)
{
	if (!isfinite(a[i]) || a[i] < 0)
		return pipette_fail(err, "schedule: %s[%ld] = %g: expected a finite time >= 0 s",
				    what, i, a[i]);
	return 0;
}

int pipette_sched_simulate(struct pipette_sched *s,
			   const struct pipette_sched_input *in,
			   struct pipette_sched_result *out,
			   struct pipette_err *err)
{
	long i, n;
	int r, c, S;
	double mk = 0, maxbusy = 0;
	const struct gop *g;
	double *end, *freet;
	const double *dt, *ct;

	if (!s || !in || !out)
		return pipette_fail(err, "schedule: missing workspace, input or result");
	if (!in->t_f || !in->t_b)
		return pipette_fail(err, "schedule: t_f and t_b are required");
	if (set_shape(s, in, err))
		return -1;
	S = s->S;

	/* Per-call tables, per key (rank*v + chunk)*3 + type: the duration
	 * and the transfer that precedes the op (F: over boundary s-1 from
	 * stage s-1; B: over boundary s from stage s+1). */
	for (r = 0; r < s->p; r++) {
		double busy = 0;

		for (c = 0; c < s->v; c++) {
			long i3, k = (long)r * s->v + c;
			int st = vstage(s, r, c);
			double tw;

			if (check_time(in->t_f, k, "t_f", err) || check_time(in->t_b, k, "t_b", err) ||
			    (in->t_w && check_time(in->t_w, k, "t_w", err)))
				return -1;
			if (st > 0 && in->comm_f && check_time(in->comm_f, st - 1, "comm_f", err))
				return -1;
			if (st < S - 1 && in->comm_b && check_time(in->comm_b, st, "comm_b", err))
				return -1;
			tw = in->t_w ? in->t_w[k] : 0;
			i3 = k * 3;
			s->dur_tab[i3 + OP_F] = in->t_f[k];
			s->dur_tab[i3 + OP_B] = s->split_w ? in->t_b[k] : in->t_b[k] + tw;
			s->dur_tab[i3 + OP_W] = s->split_w ? tw : 0;
			s->cin_tab[i3 + OP_F] = st > 0 && in->comm_f ? in->comm_f[st - 1] : 0;
			s->cin_tab[i3 + OP_B] = st < S - 1 && in->comm_b ? in->comm_b[st] : 0;
			s->cin_tab[i3 + OP_W] = 0;
			busy += s->dur_tab[i3 + OP_F] + s->dur_tab[i3 + OP_B] + s->dur_tab[i3 + OP_W];
		}
		/* every chunk runs each of its ops once per micro-batch */
		s->busy[r] = busy * (double)s->m;
		s->freet[r] = 0;
	}

	g = s->gops;
	end = s->g_end;
	freet = s->freet;
	dt = s->dur_tab;
	ct = s->cin_tab;
	n = s->n;
	for (i = 0; i < n; i++) {
		int32_t rr = g[i].rank, d = g[i].dep, k = g[i].key;
		double t0 = freet[rr];

		if (d >= 0) {
			double ready = end[d] + ct[k];

			if (ready > t0)
				t0 = ready;
		}
		t0 += dt[k];
		end[i] = t0;
		freet[rr] = t0;
	}
	for (r = 0; r < s->p; r++) {
		if (freet[r] > mk)
			mk = freet[r];
		if (s->busy[r] > maxbusy)
			maxbusy = s->busy[r];
	}
	out->makespan = mk;
	out->bubble = mk > 0 ? 1.0 - maxbusy / mk : 0;
	out->busy = s->busy;
	out->peak_fb = s->peak_fb;
	out->peak_fw = s->peak_fw;
	out->peak_fb_stages = s->peak_fb_st;
	out->peak_fw_stages = s->peak_fw_st;
	out->v = s->v;
	out->n_ops = s->n;
	s->simulated = 1;
	return 0;
}

int pipette_sched_event(const struct pipette_sched *s, long i,
			struct pipette_sched_event *ev)
{
	const struct gop *g;
	int32_t d;

	if (!s || !s->valid || !s->simulated || i < 0 || i >= s->n || !ev)
		return -1;
	g = &s->gops[i];
	ev->rank = g->rank;
	ev->chunk = (g->key / 3) % s->v;
	ev->type = "FBW"[g->key % 3];
	ev->stage = vstage(s, g->rank, ev->chunk);
	ev->mb = s->g_mb[i];
	ev->end = s->g_end[i];
	ev->start = ev->end - s->dur_tab[g->key];
	d = g->dep;
	ev->from_rank = -1;
	ev->xfer_start = ev->xfer_end = ev->start;
	if (d >= 0 && s->gops[d].rank != g->rank) {
		ev->from_rank = s->gops[d].rank;
		ev->xfer_start = s->g_end[d];
		ev->xfer_end = s->g_end[d] + s->cin_tab[g->key];
	}
	return 0;
}

long pipette_sched_rank_op(const struct pipette_sched *s, int r, long i)
{
	if (!s || !s->valid || r < 0 || r >= s->p || i < 0 || i >= s->per_rank)
		return -1;
	return s->rank_pos[RIDX(s, r, i)];
}
