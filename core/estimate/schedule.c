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
 *    it holds (p-i+1) M_B + (i-1) M_W (the text under ZB Table 2).
 *  - V-Min, V-Half: Qi et al., NeurIPS'24 (arXiv 2405.15362) building
 *    blocks of interval 6 with the per-rank offsets of F(chunk 0),
 *    F(chunk 1), B(chunk 1), B(chunk 0) used by sail-sg/zero-bubble-
 *    pipeline-parallelism zbv_greedy.py (stable_pattern_v_min/_v_half);
 *    W takes the first free slot after its B, chunk 1's first.  We run the
 *    block order as is and let the event simulation squeeze idle slots; the
 *    repo's extra warm-up reordering pass is not reproduced.
 *  - V-ZB: built from the durations, as sail-sg zbv.py builds ZB-V from
 *    profiled costs (PipelineGraph(f_cost, b_cost, w_cost, c_cost)): an event
 *    simulation in integer time (chunk means of F, B, W and the mean
 *    transfer, VZB_RES units to F+B+W) in which every rank, when free,
 *    picks among the ops whose inputs are known, under the memory cap of
 *    1F1B (2p chunks = p full-stage micro-batches, NeurIPS'24 Table 1).
 *    The rules follow sail-sg zbv.py try_v_schedule (read, not copied):
 *    warm-up forwards, chunk 1 first once its input is there; then one B
 *    and one F in turn, B of chunk 1 then chunk 0 per micro-batch, F of
 *    chunk 1 when its input is there, else chunk 0; a pending W runs when
 *    memory is full or when it fits in the wait for the next F or B (zbv.py
 *    "fill the bubble").  A few variants (plain B-first list scheduling,
 *    W-gap thresholds) are tried on small shapes and the shortest kept,
 *    as zbv.py tries its fill variants; see build_v_zb.  The order depends
 *    on (p, m) and the rounded time ratios, not on the exact times.
 *
 *  - torch.distributed.pipelining (pytorch/pytorch torch/distributed/
 *    pipelining/schedules.py, read at the commit tests/data/stacks/
 *    torch-schedules.md names): GPipe (every F, then every B),
 *    InterleavedZeroBubble (the looped order with I/W split, W lagging r),
 *    ZBVZeroBubble (V, three warm-ups, steady F0 I0 W0 F1 I1 W1) and
 *    DualPipeV (DeepSeek's dualpipe/dualpipev.py, eight steps, a FIFO of
 *    deferred W passes).  tests/unit/test_schedule.c checks every rank's
 *    order against the orders torch's generators print (that file's
 *    appendix).  Interleaved1F1B is Megatron's order when p divides m.
 *
 * The simulation processes the ops in one global order that respects both
 * every rank's list order and every dependency (found once per shape), so
 * each op's start is max(rank free, dependency end + transfer) in O(1).
 * A long order is kept compact, one steady period standing for all
 * ("compact orders" below).  The workspace keeps the orders of the last
 * SCHED_CACHE + 1 shapes (about 20 bytes per op stored each: 16 MB at
 * p = 64, v = 2, m = 512 built whole) and of a few more small ones, so a
 * caller going back and forth between a few shapes does not rebuild. */
#include "estimate/schedule.h"

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
		/* (p+4)//3 micro-batches: the table of the Hugging Face space
		 * sail/pipeline-parallelism-with-controllable-memory
		 * (description1.md). */
		return min_d((double)((p + 4) / 3), (double)m);
	case PIPETTE_SCHED_V_HALF:
		/* (p+2)//2 micro-batches: the same table. */
		return min_d((double)((p + 2) / 2), (double)m);
	case PIPETTE_SCHED_V_ZB:
		/* 1F1B's peak pM_B (ZB paper, Table 2), on every rank of the V:
		 * the old p - stage under-counted all ranks but the first. */
		return min_d((double)p, (double)m);
	case PIPETTE_SCHED_GPIPE:
		/* every forward before the first backward */
		return (double)m;
	/* torch's schedules, chunks held per rank (torch-schedules.md §3),
	 * in full-stage units */
	case PIPETTE_SCHED_INTERLEAVED_ZB: {
		/* its warm-up plus the one in flight */
		long rounds = m / p > 1 ? m / p : 1, mpr = m / rounds;

		return min_d((double)v * m, (double)(v - 1) * mpr + p - stage) / v;
	}
	case PIPETTE_SCHED_ZBV:
		return min_d(min_d(2.0 * p, (double)m + 1 + stage), 2.0 * m) / 2;
	case PIPETTE_SCHED_DUALPIPE_V:
	case PIPETTE_SCHED_DUALPIPE:
		/* PP + 1 stages' activations per device, PP = 2p stages
		 * (deepseek-ai/DualPipe README.md, the comparison table):
		 * every rank, since each runs F0 before B1 in step 4 */
		return min_d(2.0 * p + 1, 2.0 * m) / 2;
	case PIPETTE_SCHED_1F1B:
	case PIPETTE_SCHED_ZB_H1:
	default:
		/* 1F1B: rank r holds p - r micro-batches (Narayanan et al. SC'21). */
		return min_d((double)(p - stage), (double)m);
	}
}

enum { OP_F = 0, OP_B = 1, OP_W = 2 };

/* V-ZB greedy: counters per rank (free time, next F/B per chunk, chunks
 * held F..W, W queue head and tail, heap state, ops listed, F..B and F..W
 * held). */
enum { V_FT, V_NF0, V_NF1, V_NB0, V_NB1, V_HELD, V_WH, V_WT, V_STATE, V_LEN,
       V_FB, V_FW, V_T0, V_NEXT, V_PREV, V_WANT, V_RELAX, V_NST };

/* V-ZB greedy time resolution: T_F + T_B + T_W (chunk means) = VZB_RES
 * units.  48 keeps the ratios of the ZB paper's profiles (T_W < T_F <
 * T_B, within a few per cent) and of 1:1.1:0.7 to about 2%. */
#define VZB_RES 48

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

/* One shape's operation order: what a simulation of that shape reads. */
struct sched_order {
	int valid;		/* 0: holds nothing */
	enum pipette_schedule_kind kind;
	int p, v;
	long m;
	long vq[4];		/* V-ZB greedy: F, B, W, comm in integer units */
	int split_w;		/* W is a separate op */
	int S;			/* virtual stages */
	long per_rank;		/* ops per rank */
	long n;			/* ops in all */
	unsigned long used;	/* last use, for the cache's LRU choice */

	/* Global order: op i depends on op gops[i].dep (-1: none); its
	 * duration and incoming transfer are dur_tab/cin_tab[gops[i].key]. */
	struct gop *gops;
	int32_t *g_mb;
	int32_t *rank_pos;	/* global index of each rank-list op */
	size_t cap_ops;
	int *peak_fb, *peak_fw;
	double *peak_fb_st, *peak_fw_st;
	size_t cap_rank;

	/* The steady state (find_period): every op i in [g0 + P, g1) repeats
	 * op i - P (same rank and key, dependency and the rank's previous op
	 * P positions later too); P = 0 when the order has no such run.
	 * W: how far back an op of the run reads (its dependency or the
	 * previous op of its rank), >= P; reach: how far back any op from g0
	 * on reads its dependency. */
	long g0, g1, P, W, reach;

	/* A compact order (build_compact): the arrays hold the order of m1
	 * micro-batches, nphys ops, whose steady run ends at X; the order of
	 * m is that one with j more periods of kmb micro-batches (P ops,
	 * c_rank of them on each rank) repeated before X, every op from X on
	 * moved on by j periods (phys_of).  n, m, per_rank and g1 are the
	 * order of m's; the peaks are both's.  compact = 0: the arrays hold
	 * every op (nphys = n). */
	int compact;
	long nphys, X, j, kmb, c_rank;
	int32_t *head;		/* per rank: its ops before X */
};

/* Jumps one simulation may take over the steady state: about one per
 * binade the time crosses after the warm-up (see "the steady state"
 * below), log2 of the micro-batches at most. */
#define STEADY_JUMPS_MAX 64

/* Orders kept besides the current one: the search alternates a few
 * shapes (and timing.c simulates V-ZB with and without transfers), so a
 * shape seen lately is swapped back in instead of rebuilt.  SCHED_CACHE
 * slots take any order, SCHED_SMALL more only orders of up to
 * SCHED_SMALL_OPS ops (320 KiB each): the search's lower bounds cycle
 * through a dozen shapes of m = p micro-batches, which in the shared
 * slots pushed out the plan's long pipelines (the 8-node plan of issue
 * 30 built its 4 shapes of 110,000 to 330,000 ops 7 times; 6 with these
 * slots, 2.266e9 instructions in all, now 2.184e9).  The 2048-node
 * search of tests/bench/bench_plan.c asks for 88 small shapes (a few
 * thousand ops each) in turn: with 4 small slots it built 1,532 orders
 * (207 M instructions, 4% of the plan), with 128 it builds 140 (29 M;
 * callgrind).  SCHED_SMALL_HELD bounds what the small slots hold in all
 * (20 bytes an op: 20 MiB), the least recently used going first. */
#define SCHED_CACHE 8
#define SCHED_SMALL 128
#define SCHED_SMALL_OPS 16384
#define SCHED_SMALL_HELD (1L << 20)
/* The shared slots hold at most this many ops in all (20 bytes each:
 * 40 MiB), the least recently used going first: the search's evaluations
 * go back and forth between a dozen long pipelines (issue 30's 16-node
 * megatron-2022 plan at batch 4096 built 52 of 10^4..10^6 ops where 25
 * were distinct with 3 slots). */
#define SCHED_CACHE_OPS (2L << 20)

struct pipette_sched {
	struct sched_order o;	/* the current shape */
	struct sched_order cache[SCHED_CACHE + SCHED_SMALL];
	unsigned long clock;
	int simulated;		/* the arrays hold a simulation of this shape */

	/* Build scratch.  Rank lists: op i of rank r at rops[RIDX(s, r, i)],
	 * index-major so that ranks working at similar list positions share
	 * cache lines. */
	struct rop *rops;
	double *g_end;

	int32_t *pos_tab;	/* (type, stage, mb) -> global index, or -1 */
	int32_t *slot_tab;	/* Kahn: rank waiting on a key, or -1 */
	int32_t *wq;		/* V-ZB greedy: per-rank W queue */
	long *endt;		/* V-ZB greedy: end of F/B of (stage, mb) */
	int32_t *bucket;	/* V-ZB greedy: calendar queue heads */
	long n_bucket, cap_bucket;
	int32_t *ptr;		/* per rank cursor */
	long *len;		/* per rank: ops listed so far */
	long *vst;		/* V-ZB greedy: V_NST counters per rank */

	double *busy, *freet, *dur_tab, *cin_tab;

	/* The last simulation's jumps over the steady state: ops in
	 * [from, end) of each were not simulated; op i there ends k*lambda
	 * after op i - k*q, k = (i - from) / q + 1, one of the q before
	 * `from` (simulate_ops). */
	struct sched_jump {
		long from, end, q;
		double lambda;
	} jumps[STEADY_JUMPS_MAX];
	int n_jumps;
	long n_simulated;

	size_t cap_ops, cap_tab, cap_rank, cap_stage, cap_end;
	long n_target;		/* ops of the shape asked for (V-ZB's variants) */
};

struct pipette_sched *pipette_sched_create(void)
{
	return calloc(1, sizeof(struct pipette_sched));
}

static void free_order(struct sched_order *o)
{
	free(o->rank_pos);
	free(o->gops);
	free(o->g_mb);
	free(o->peak_fb);
	free(o->peak_fw);
	free(o->peak_fb_st);
	free(o->peak_fw_st);
	free(o->head);
}

static void free_arrays(struct pipette_sched *s)
{
	int i;

	free_order(&s->o);
	for (i = 0; i < SCHED_CACHE + SCHED_SMALL; i++)
		free_order(&s->cache[i]);
	free(s->rops);
	free(s->g_end);
	free(s->pos_tab);
	free(s->slot_tab);
	free(s->wq);
	free(s->ptr);
	free(s->len);
	free(s->vst);
	free(s->endt);
	free(s->bucket);
	free(s->busy);
	free(s->freet);
	free(s->dur_tab);
	free(s->cin_tab);
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
	struct sched_order *o = &s->o;

	if (ops > o->cap_ops) {
		if (grow(&o->rank_pos, ops, sizeof(int32_t)) ||
		    grow(&o->gops, ops, sizeof(*o->gops)) ||
		    grow(&o->g_mb, ops, sizeof(int32_t)))
			return -1;
		o->cap_ops = ops;
	}
	if (ranks > o->cap_rank) {
		if (grow(&o->peak_fb, ranks, sizeof(int)) ||
		    grow(&o->peak_fw, ranks, sizeof(int)) ||
		    grow(&o->peak_fb_st, ranks, sizeof(double)) ||
		    grow(&o->peak_fw_st, ranks, sizeof(double)) ||
		    grow(&o->head, ranks, sizeof(int32_t)))
			return -1;
		o->cap_rank = ranks;
	}
	if (ops > s->cap_ops) {
		if (grow(&s->rops, ops, sizeof(*s->rops)))
			return -1;
		s->cap_ops = ops;
	}
	if (tab > s->cap_tab) {
		if (grow(&s->pos_tab, tab, sizeof(int32_t)) ||
		    grow(&s->slot_tab, tab, sizeof(int32_t)) ||
		    grow(&s->wq, tab, sizeof(int32_t)) ||
		    grow(&s->endt, tab, sizeof(long)))
			return -1;
		s->cap_tab = tab;
	}
	if (ranks > s->cap_rank) {
		if (grow(&s->ptr, ranks, sizeof(int32_t)) ||
		    grow(&s->len, ranks, sizeof(long)) ||
		    grow(&s->vst, ranks * V_NST, sizeof(long)) ||
		    grow(&s->busy, ranks, sizeof(double)) ||
		    grow(&s->freet, ranks, sizeof(double)))
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

#define RIDX(s, r, i) ((size_t)(i) * (size_t)(s)->o.p + (size_t)(r))

static inline int vstage(const struct pipette_sched *s, int r, int c)
{
	if (pipette_schedule_is_looped(s->o.kind))
		return c * s->o.p + r;
	if (pipette_schedule_is_v(s->o.kind))
		return c == 0 ? r : 2 * s->o.p - 1 - r;
	return r;
}

static void emit(struct pipette_sched *s, int r, long *len, int type,
		 int chunk, long mb)
{
	struct rop *o;

	if (*len >= s->o.per_rank) {	/* a wrong order: build() reports the count */
		(*len)++;
		return;
	}
	o = &s->rops[RIDX(s, r, *len)];
	o->type = (uint8_t)type;
	o->chunk = (uint8_t)chunk;
	o->mb = (int32_t)mb;
	(*len)++;
}

static void build_1f1b(struct pipette_sched *s, int r, long *len)
{
	long m = s->o.m, nw = s->o.p - r - 1 < m ? s->o.p - r - 1 : m;
	long lag = s->o.split_w ? r : 0;	/* ZB-H1: worker r delays r W's */
	long j, nb = 0, nwd = 0;

	for (j = 0; j < nw; j++)
		emit(s, r, len, OP_F, 0, j);
	for (j = 0; j < m; j++) {
		if (nw + j < m)
			emit(s, r, len, OP_F, 0, nw + j);
		emit(s, r, len, OP_B, 0, j);
		nb++;
		if (s->o.split_w)
			while (nb - nwd > lag)
				emit(s, r, len, OP_W, 0, nwd++);
	}
	if (s->o.split_w)
		while (nwd < m)
			emit(s, r, len, OP_W, 0, nwd++);
}

/* GPipe (Huang et al., NeurIPS'19; torch's ScheduleGPipe): every
 * micro-batch's forward, then every backward in the same order. */
static void build_gpipe(struct pipette_sched *s, int r, long *len)
{
	long j;

	for (j = 0; j < s->o.m; j++)
		emit(s, r, len, OP_F, 0, j);
	for (j = 0; j < s->o.m; j++)
		emit(s, r, len, OP_B, 0, j);
}

/* torch's ScheduleInterleavedZeroBubble (tests/data/stacks/torch-
 * schedules.md §2.4): the looped order of Interleaved1F1B with a warm-up
 * of (v-1)*mpr + p-1-r forwards (mpr micro-batches per round), the
 * backward split into I and W, and rank r's W passes lagging r I passes
 * behind, in the I passes' order. */
static void build_interleaved_zb(struct pipette_sched *s, int r, long *len)
{
	int p = s->o.p, v = s->o.v;
	long m = s->o.m, T = (long)v * m, rounds = m / p > 1 ? m / p : 1, mpr = m / rounds;
	long nw = (long)(v - 1) * mpr + (p - 1 - r), op, nwdone = 0;
	long fcnt[256] = { 0 }, icnt[256] = { 0 }, wcnt[256] = { 0 };

	if (nw > T)
		nw = T;
	for (op = 0; op < T + nw; op++) {
		if (op < T) {
			int c = (int)((op / mpr) % v);

			emit(s, r, len, OP_F, c, fcnt[c]++);
		}
		if (op >= nw) {
			int c = v - 1 - (int)(((op - nw) / mpr) % v);

			emit(s, r, len, OP_B, c, icnt[c]++);
			if (op - nw >= r) {
				int cw = v - 1 - (int)((nwdone / mpr) % v);

				emit(s, r, len, OP_W, cw, wcnt[cw]++);
				nwdone++;
			}
		}
	}
	while (nwdone < T) {
		int cw = v - 1 - (int)((nwdone / mpr) % v);

		emit(s, r, len, OP_W, cw, wcnt[cw]++);
		nwdone++;
	}
}

/* One op of a torch V schedule with its own counter per (type, chunk);
 * micro-batches past m (ZBVZeroBubble pads to 2p-1) are idle slots. */
static void emit_counted(struct pipette_sched *s, int r, long *len, int type, int c,
			 long cnt[3][2])
{
	long mb = cnt[type][c]++;

	if (mb < s->o.m)
		emit(s, r, len, type, c, mb);
}

/* torch's ScheduleZBVZeroBubble (torch-schedules.md §2.5): rank r holds
 * stages r (chunk 0) and 2p-1-r (chunk 1); three warm-ups, a steady
 * F0 I0 W0 F1 I1 W1 and two cool-downs, with the W passes left over
 * flushed chunk 1 first. */
static void build_zbv(struct pipette_sched *s, int r, long *len)
{
	int p = s->o.p, i;
	long m = s->o.m, n = m > 2L * p - 1 ? m : 2L * p - 1;
	long cnt[3][2] = { { 0, 0 }, { 0, 0 }, { 0, 0 } };

	for (i = 0; i < 2 * (p - r) - 1; i++)
		emit_counted(s, r, len, OP_F, 0, cnt);
	for (i = 0; i < r; i++) {
		emit_counted(s, r, len, OP_F, 1, cnt);
		emit_counted(s, r, len, OP_F, 0, cnt);
	}
	for (i = 0; i < p - r; i++) {
		emit_counted(s, r, len, OP_F, 1, cnt);
		emit_counted(s, r, len, OP_B, 1, cnt);
		emit_counted(s, r, len, OP_W, 1, cnt);
	}
	while (cnt[OP_F][1] < cnt[OP_F][0] || cnt[OP_F][0] < n) {
		if (cnt[OP_F][0] < n)
			emit_counted(s, r, len, OP_F, 0, cnt);
		emit_counted(s, r, len, OP_B, 0, cnt);
		emit_counted(s, r, len, OP_W, 0, cnt);
		emit_counted(s, r, len, OP_F, 1, cnt);
		emit_counted(s, r, len, OP_B, 1, cnt);
		emit_counted(s, r, len, OP_W, 1, cnt);
	}
	for (i = 0; i < r; i++) {
		emit_counted(s, r, len, OP_B, 0, cnt);
		emit_counted(s, r, len, OP_B, 1, cnt);
	}
	for (i = 0; i < p - r; i++) {
		emit_counted(s, r, len, OP_B, 0, cnt);
		emit_counted(s, r, len, OP_W, 0, cnt);
	}
	while (cnt[OP_W][1] < n)
		emit_counted(s, r, len, OP_W, 1, cnt);
	while (cnt[OP_W][0] < n)
		emit_counted(s, r, len, OP_W, 0, cnt);
}

/* DualPipeV's weight passes wait in a FIFO of the input-gradient passes
 * that split them off (DualPipe's WeightGradStore). */
struct wqueue {
	long head, tail;
	int *chunk;
	long *mb;
};

/* The queue of one rank: at most every micro-batch of both chunks. */
static int dpv_queue(const struct pipette_sched *s, struct wqueue *q, struct pipette_err *err)
{
	if (q->chunk)
		return 0;
	q->chunk = malloc((size_t)(2 * s->o.m) * sizeof(int));
	q->mb = malloc((size_t)(2 * s->o.m) * sizeof(long));
	if (!q->chunk || !q->mb)
		return pipette_fail(err, "schedule dualpipe-v: out of memory");
	return 0;
}

static void dpv_f(struct pipette_sched *s, int r, long *len, int c, long cnt[3][2])
{
	emit(s, r, len, OP_F, c, cnt[OP_F][c]++);
}

/* A full backward: the input and weight gradients back to back. */
static void dpv_b(struct pipette_sched *s, int r, long *len, int c, long cnt[3][2])
{
	long mb = cnt[OP_B][c]++;

	emit(s, r, len, OP_B, c, mb);
	emit(s, r, len, OP_W, c, mb);
}

/* The input gradient alone; its weight gradient joins the queue. */
static void dpv_i(struct pipette_sched *s, int r, long *len, int c, long cnt[3][2],
		  struct wqueue *q)
{
	long mb = cnt[OP_B][c]++;

	emit(s, r, len, OP_B, c, mb);
	if (q->tail < 2 * s->o.m) {	/* at most every micro-batch of both chunks */
		q->chunk[q->tail] = c;
		q->mb[q->tail++] = mb;
	}
}

static void dpv_w(struct pipette_sched *s, int r, long *len, struct wqueue *q)
{
	if (q->head < q->tail) {
		emit(s, r, len, OP_W, q->chunk[q->head], q->mb[q->head]);
		q->head++;
	}
}

/* DualPipeV (DeepSeek's DualPipe repository, dualpipe/dualpipev.py, and
 * torch's ScheduleDualPipeV; torch-schedules.md §2.6): the eight steps
 * of rank r.  The overlapped F&B pairs of step 4 and 5 are listed F then
 * B: the two computations share the GPU, and what the overlap hides is
 * the other's communication (the MoE all-to-all), which a dense model's
 * pipeline does not have. */
static void build_dualpipe_v(struct pipette_sched *s, int r, long *len, struct wqueue *q)
{
	int p = s->o.p, i, zb = 0;
	long m = s->o.m, cnt[3][2] = { { 0, 0 }, { 0, 0 }, { 0, 0 } };

	q->head = q->tail = 0;
	for (i = 0; i < 2 * (p - r - 1); i++)		/* 1: F0 */
		dpv_f(s, r, len, 0, cnt);
	for (i = 0; i < r + 1; i++) {			/* 2: F0 F1 */
		dpv_f(s, r, len, 0, cnt);
		dpv_f(s, r, len, 1, cnt);
	}
	for (i = 0; i < p - r - 1; i++) {		/* 3: I1 W F1 */
		dpv_i(s, r, len, 1, cnt, q);
		dpv_w(s, r, len, q);
		dpv_f(s, r, len, 1, cnt);
	}
	for (i = 0; i < m - 2L * p + r + 1; i++) {	/* 4: F0&B1, F1&B0 */
		dpv_f(s, r, len, 0, cnt);
		dpv_b(s, r, len, 1, cnt);
		dpv_f(s, r, len, 1, cnt);
		dpv_b(s, r, len, 0, cnt);
	}
	for (i = 0; i < p - r - 1; i++) {		/* 5: B1, F1&B0 */
		dpv_b(s, r, len, 1, cnt);
		dpv_f(s, r, len, 1, cnt);
		dpv_b(s, r, len, 0, cnt);
	}
	for (i = 0; i < r + 1; i++) {			/* 6: B1 B0, zero bubble from half way */
		if (i == (r + 1) / 2 && r % 2)
			zb = 1;
		if (zb)
			dpv_i(s, r, len, 1, cnt, q);
		else
			dpv_b(s, r, len, 1, cnt);
		if (i == (r + 1) / 2 && r % 2 == 0)
			zb = 1;
		if (zb)
			dpv_i(s, r, len, 0, cnt, q);
		else
			dpv_b(s, r, len, 0, cnt);
	}
	for (i = 0; i < p - r - 1; i++) {		/* 7: W I0 */
		dpv_w(s, r, len, q);
		dpv_i(s, r, len, 0, cnt, q);
	}
	for (i = 0; i < r + 1; i++)			/* 8: W */
		dpv_w(s, r, len, q);
	while (q->head < q->tail)			/* DualPipe asserts it empty */
		dpv_w(s, r, len, q);
}

static void interleaved_op(const struct pipette_sched *s, long k, int fwd,
			   int *chunk, long *mb)
{
	long pv = (long)s->o.p * s->o.v, in_group = k % pv;
	int c = (int)(in_group / s->o.p);

	*chunk = fwd ? c : s->o.v - 1 - c;
	*mb = (k / pv) * s->o.p + in_group % s->o.p;
}

static void build_interleaved(struct pipette_sched *s, int r, long *len)
{
	long total = s->o.m * s->o.v, nw, k;
	int c;
	long mb;

	if (s->o.m == s->o.p)
		nw = total;
	else {
		nw = (long)(s->o.p - r - 1) * 2 + (long)(s->o.v - 1) * s->o.p;
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

	v_offsets(s->o.kind, s->o.p, r, o);
	for (j = 0; j < 6; j++)
		res_j[j] = -1;
	for (j = 0; j < 4; j++) {
		if (res_j[o[j] % 6] != -1)
			return pipette_fail(err, "schedule %s: p=%d: building-block slots collide on rank %d",
					    pipette_schedule_name(s->o.kind), s->o.p, r);
		res_j[o[j] % 6] = j;
		if (o[j] + 6 * (s->o.m - 1) > end)
			end = o[j] + 6 * (s->o.m - 1);
	}
	for (t = 0; t <= end; t++) {
		int jj = res_j[t % 6];
		long mb = jj >= 0 ? (t - o[jj]) / 6 : -1;

		if (jj >= 0 && t >= o[jj] && mb < s->o.m) {
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
	while (wnext[1] < s->o.m)
		emit(s, r, len, OP_W, 1, wnext[1]++);
	while (wnext[0] < s->o.m)
		emit(s, r, len, OP_W, 0, wnext[0]++);
	return 0;
}

/* Key of (type, stage, mb) in pos_tab, micro-batch-major so that the
 * window of micro-batches in flight stays in cache. */
#define KEY(type, st, mb) (((long)(mb) * s->o.S + (st)) * 3 + (type))

/* Dependency of (type, stage, mb): its key in pos_tab, or -1 for none. */
static inline long dep_key(const struct pipette_sched *s, int type, int st, long mb)
{
	if (type == OP_F) {
		if (st == 0)
			return -1;
		return KEY(OP_F, st - 1, mb);
	}
	if (type == OP_B) {
		if (st == s->o.S - 1)
			return KEY(OP_F, st, mb);
		return KEY(OP_B, st + 1, mb);
	}
	return KEY(OP_B, st, mb);
}

/* V-ZB: duration-aware list scheduling (see the file comment).  Integer
 * time in units of (T_F + T_B + T_W) / VZB_RES over the chunk means; the
 * greedy is an event simulation in itself, so its placement sequence is a
 * dependency-respecting global order and is written out directly. */
#define V_INF LONG_MAX

/* The greedy's queue of ranks by (decision time V_FT, rank).  Decision
 * times never go below the last one taken, and none lies more than the
 * longest op plus a transfer ahead of it, so a circular bucket queue of
 * that many one-unit buckets holds them (a calendar queue): each bucket
 * is a list of ranks in rank order, linked through V_NEXT/V_PREV. */
struct vq {
	int32_t *head;		/* first rank of each bucket, -1 if none */
	long nb;		/* buckets */
	long cur;		/* time of the bucket to look at first */
	int n;			/* ranks queued */
};

static void vq_insert(struct vq *qu, long *st, int32_t r)
{
	long *c = &st[(size_t)r * V_NST];
	int32_t *hp = &qu->head[c[V_FT] % qu->nb], prev = -1, x = *hp;

	while (x >= 0 && x < r) {
		prev = x;
		x = (int32_t)st[(size_t)x * V_NST + V_NEXT];
	}
	c[V_NEXT] = x;
	c[V_PREV] = prev;
	if (x >= 0)
		st[(size_t)x * V_NST + V_PREV] = r;
	if (prev >= 0)
		st[(size_t)prev * V_NST + V_NEXT] = r;
	else
		*hp = r;
	qu->n++;
}

static void vq_unlink(struct vq *qu, long *st, int32_t r)
{
	long *c = &st[(size_t)r * V_NST];

	if (c[V_PREV] >= 0)
		st[(size_t)c[V_PREV] * V_NST + V_NEXT] = c[V_NEXT];
	else
		qu->head[c[V_FT] % qu->nb] = (int32_t)c[V_NEXT];
	if (c[V_NEXT] >= 0)
		st[(size_t)c[V_NEXT] * V_NST + V_PREV] = c[V_PREV];
	qu->n--;
}

static int32_t vq_pop(struct vq *qu, long *st)
{
	int32_t r;

	while ((r = qu->head[qu->cur % qu->nb]) < 0)
		qu->cur++;
	vq_unlink(qu, st, r);
	return r;
}

/* A neighbour placed an op rank r may wait for: an asleep rank rejoins
 * the queue, an idling one is moved up to now, so that both decide again
 * with what is now known (from the time they became free, V_T0).
 * state: 0 queued, 1 asleep, 2 done. */
static void vzb_wake(struct vq *qu, long *st, int r, int p, long now)
{
	long *c, at;

	if (r < 0 || r >= p)
		return;
	c = &st[(size_t)r * V_NST];
	at = c[V_T0] > now ? c[V_T0] : now;
	if (c[V_STATE] == 1) {
		c[V_STATE] = 0;
		c[V_FT] = at;
		vq_insert(qu, st, r);
	} else if (c[V_STATE] == 0 && c[V_FT] > at) {
		vq_unlink(qu, st, r);
		c[V_FT] = at;
		vq_insert(qu, st, r);
	}
}

static long max_l(long a, long b) { return a > b ? a : b; }

/* The greedy's per-rank counters (st, s->vst) and the end times of F and
 * B of (stage, mb) (endt, s->endt: F at (mb*S+stage)*2, B at +1), in the
 * helpers below, which name them st, endt and S. */
#define ST(r, f) st[(size_t)(r) * V_NST + (f)]
#define ENDF(stg, k) endt[((size_t)(k) * S + (size_t)(stg)) * 2]
#define ENDB(stg, k) endt[((size_t)(k) * S + (size_t)(stg)) * 2 + 1]

/* What rank r may run next.  Rank r holds stage r of chunk 0 (s0) and
 * stage S-1-r of chunk 1 (s1): the V. */
struct vzb_pick {
	long rb0, rb1, rf0, rf1;	/* ready times of B0, B1, F0, F1; V_INF
					 * when the dependency is not placed yet */
	int type, chunk;		/* the op chosen */
	long rdy;			/* when its input is there */
	int full;			/* an F of that chunk would pass the cap */
	int wpend;			/* a W is waiting in the rank's queue */
};

/* The ready times of rank r's four candidates: its next F and B of each
 * chunk, from the end of the op each depends on plus the transfer (none at
 * the turn of the V, on rank p-1, nor on rank 0 between the loss and B1). */
static void vzb_ready(const struct pipette_sched *s, int r, struct vzb_pick *pk)
{
	int p = s->o.p, S = s->o.S, s0 = r, s1 = S - 1 - r;
	long m = s->o.m, qc = s->o.vq[3], k;
	const long *st = s->vst, *endt = s->endt;

	pk->rb0 = pk->rb1 = pk->rf0 = pk->rf1 = V_INF;
	if ((k = ST(r, V_NB1)) < m && k < ST(r, V_NF1)) {
		if (r == 0)
			pk->rb1 = ENDF(s1, k);
		else if (ST(r - 1, V_NB1) > k)
			pk->rb1 = ENDB(s1 + 1, k) + qc;
	}
	if ((k = ST(r, V_NB0)) < m && k < ST(r, V_NF0)) {
		if (r == p - 1) {
			if (ST(r, V_NB1) > k)
				pk->rb0 = ENDB(s1, k);	/* the turn is local */
		} else if (ST(r + 1, V_NB0) > k)
			pk->rb0 = ENDB(s0 + 1, k) + qc;
	}
	if ((k = ST(r, V_NF1)) < m) {
		if (r == p - 1) {
			if (ST(r, V_NF0) > k)
				pk->rf1 = ENDF(s0, k);
		} else if (ST(r + 1, V_NF1) > k)
			pk->rf1 = ENDF(s1 - 1, k) + qc;
	}
	if ((k = ST(r, V_NF0)) < m) {
		if (r == 0)
			pk->rf0 = 0;
		else if (ST(r - 1, V_NF0) > k)
			pk->rf0 = ENDF(r - 1, k) + qc;
	}
}

/* After the warm-up, zbv.py's rhythm: one B then one F.  F of chunk 1 when
 * its input is there, else chunk 0; B of chunk 1 then chunk 0 per
 * micro-batch.  Falls back to B when memory is full and no W can free it,
 * or when the F's input is not known and a B is ready. */
static void vzb_alternate(const struct pipette_sched *s, int r, int keep, long now, long tb,
			  struct vzb_pick *pk)
{
	int p = s->o.p;
	long m = s->o.m, cap = 2L * p;
	const long *st = s->vst;

	pk->type = (int)ST(r, V_WANT);
	if (pk->type == OP_F && ST(r, V_NF1) == m)
		pk->type = OP_B;
	if (pk->type == OP_F) {
		if (ST(r, V_NF1) >= ST(r, V_NF0))
			pk->chunk = 0;
		else if (r == p - 1 || pk->rf1 != V_INF || ST(r, V_NF0) == m)
			pk->chunk = 1;
		else
			pk->chunk = pk->rf0 != V_INF ? 0 : 1;
		pk->rdy = pk->chunk ? pk->rf1 : pk->rf0;
		pk->full = ST(r, V_HELD) + (pk->chunk ? 0 : keep) >= cap;
		if ((pk->full && !pk->wpend) || (pk->rdy == V_INF && tb <= now))
			pk->type = OP_B;
	}
	if (pk->type == OP_B) {
		if (ST(r, V_NB1) < m && ST(r, V_NB0) >= ST(r, V_NB1))
			pk->chunk = 1;	/* B1 then B0 per micro-batch */
		else if (ST(r, V_NB0) < m &&
			 (r == p - 1 || pk->rb0 != V_INF || ST(r, V_NB1) == m))
			pk->chunk = 0;
		else
			pk->chunk = 1;
		pk->rdy = pk->chunk ? pk->rb1 : pk->rb0;
	}
}

/* Choose rank r's next op from its candidates' ready times (vzb_ready),
 * deciding at `now`, free since t: once F and B are all placed, the Ws;
 * with alt, after the warm-up, zbv.py's rhythm (vzb_alternate); otherwise
 * the earliest B, else an F when memory allows, else whichever comes
 * first. */
static void vzb_choose(const struct pipette_sched *s, int r, int alt, int keep, long now,
		       long t, struct vzb_pick *pk)
{
	long m = s->o.m, cap = 2L * s->o.p, tb, tf;
	const long *st = s->vst;
	int fch;

	/* B: the earlier, chunk 0 (the older stage) on a tie.
	 * F: the earlier start, chunk 1 (nearer the loss) on a tie. */
	tb = pk->rb0 <= pk->rb1 ? pk->rb0 : pk->rb1;
	tf = max_l(t, pk->rf1) <= max_l(t, pk->rf0) ? pk->rf1 : pk->rf0;
	/* Memory: an F0 (a new micro-batch) never takes the last free
	 * chunk, which stays for an F1.  By induction on the micro-batch
	 * the oldest one's F1 and then B1 always find room on every
	 * rank, so the greedy cannot lock itself in at the cap. */
	fch = pk->rf1 != V_INF && (max_l(t, pk->rf1) <= max_l(t, pk->rf0) ||
				   ST(r, V_HELD) + keep >= cap) ? 1 : 0;
	pk->full = ST(r, V_HELD) + (fch ? 0 : keep) >= cap;
	pk->wpend = ST(r, V_WH) < ST(r, V_WT);
	pk->chunk = 0;
	pk->rdy = V_INF;
	if (ST(r, V_NF0) == m && ST(r, V_NF1) == m && ST(r, V_NB0) == m && ST(r, V_NB1) == m) {
		pk->type = OP_W;
		pk->rdy = t;
	} else if (alt && ST(r, V_NB0) + ST(r, V_NB1) > 0 && !ST(r, V_RELAX)) {
		vzb_alternate(s, r, keep, now, tb, pk);
	} else if (tb <= now) {
		pk->type = OP_B;
		pk->chunk = pk->rb0 <= pk->rb1 ? 0 : 1;
		pk->rdy = tb;
	} else if (!pk->full && tf <= now) {
		pk->type = OP_F;
		pk->chunk = fch;
		pk->rdy = tf;
	} else if (pk->full ? pk->wpend && tf < tb : tf <= tb) {
		pk->type = OP_F;	/* the next thing, once memory allows */
		pk->chunk = fch;
		pk->rdy = tf;
	} else {
		pk->type = OP_B;
		pk->chunk = pk->rb0 <= pk->rb1 ? 0 : 1;
		pk->rdy = tb;
	}
}

/* Place rank r's chosen op as the n-th of the global order (a W is the
 * oldest of the rank's queue), deciding at `now`: its end time, the
 * rank's counters and peaks, its dependency in the order; wake the
 * neighbours that may wait for it.  Returns its end. */
static long vzb_place(struct pipette_sched *s, struct vq *qu, int r, long now,
		      const struct vzb_pick *pk, long n)
{
	int p = s->o.p, S = s->o.S, type = pk->type, chunk = pk->chunk, stg;
	long m = s->o.m, *st = s->vst, *endt = s->endt;
	int32_t *q = s->wq + (size_t)r * 2 * m;
	long start = ST(r, V_T0), end, mb, dk;
	size_t li = RIDX(s, r, ST(r, V_LEN));

	if (type == OP_W) {
		int32_t e = q[ST(r, V_WH)++ % (2 * m)];

		chunk = e & 1;
		mb = e >> 1;
		end = start + s->o.vq[2];
		ST(r, V_HELD)--;
		ST(r, V_FW)--;
	} else if (type == OP_B) {
		ST(r, V_WANT) = OP_F;
		mb = ST(r, chunk ? V_NB1 : V_NB0)++;
		start = max_l(start, chunk ? pk->rb1 : pk->rb0);
		end = start + s->o.vq[1];
		q[ST(r, V_WT)++ % (2 * m)] = (int32_t)(mb * 2 + chunk);
		ST(r, V_FB)--;
	} else {
		mb = ST(r, chunk ? V_NF1 : V_NF0)++;
		start = max_l(start, chunk ? pk->rf1 : pk->rf0);
		end = start + s->o.vq[0];
		ST(r, V_HELD)++;
		ST(r, V_WANT) = OP_B;
		ST(r, V_FB)++;
		ST(r, V_FW)++;
	}
	stg = chunk ? S - 1 - r : r;
	if (type == OP_F)
		ENDF(stg, mb) = end;
	else if (type == OP_B)
		ENDB(stg, mb) = end;
	if (ST(r, V_FB) > s->o.peak_fb[r])
		s->o.peak_fb[r] = (int)ST(r, V_FB);
	if (ST(r, V_FW) > s->o.peak_fw[r])
		s->o.peak_fw[r] = (int)ST(r, V_FW);
	dk = dep_key(s, type, stg, mb);
	s->o.gops[n].dep = dk >= 0 ? s->pos_tab[dk] : -1;
	s->o.gops[n].key = (r * 2 + chunk) * 3 + type;
	s->o.gops[n].rank = r;
	s->o.g_mb[n] = (int32_t)mb;
	s->pos_tab[KEY(type, stg, mb)] = (int32_t)n;
	s->o.rank_pos[li] = (int32_t)n;
	ST(r, V_LEN)++;
	ST(r, V_T0) = end;
	ST(r, V_FT) = max_l(end, now);
	if (type != OP_W) {
		vzb_wake(qu, st, r - 1, p, now);
		vzb_wake(qu, st, r + 1, p, now);
	}
	if (ST(r, V_LEN) < s->o.per_rank)
		vq_insert(qu, st, r);
	else
		ST(r, V_STATE) = 2;
	return end;
}

/* Every rank waits for another: let the asleep ones take any ready op
 * once (never needed in the tests' shapes, kept so that no input can stall
 * the greedy). */
static void vzb_relax(struct pipette_sched *s, struct vq *qu)
{
	long *st = s->vst;
	int r;

	for (r = 0; r < s->o.p; r++)
		if (ST(r, V_STATE) == 1) {
			ST(r, V_STATE) = 0;
			ST(r, V_RELAX) = 1;
			ST(r, V_FT) = max_l(ST(r, V_T0), qu->cur);
			vq_insert(qu, st, r);
		}
}

/* One V-ZB order for W-gap threshold theta/4 of T_W.  Returns the integer
 * makespan, or -1 (err set) if the greedy stalls.  Each rank, when it is
 * free, looks at what it may run (vzb_ready, vzb_choose) and places it,
 * idles until its input is there, runs a W in the gap, or sleeps until a
 * neighbour places what it waits for. */
static long vzb_greedy(struct pipette_sched *s, int alt, int theta, int keep,
		       struct pipette_err *err)
{
	int p = s->o.p, r;
	long m = s->o.m, n = 0, mk = 0, relaxed_at = -1, i;
	const long qw = s->o.vq[2];
	long *st = s->vst;
	struct vq qu;

	memset(st, 0, (size_t)p * V_NST * sizeof(long));
	qu.head = s->bucket;
	qu.nb = s->n_bucket;
	qu.cur = 0;
	qu.n = 0;
	for (i = 0; i < qu.nb; i++)
		qu.head[i] = -1;
	for (r = 0; r < p; r++) {
		s->o.peak_fb[r] = s->o.peak_fw[r] = 0;
		vq_insert(&qu, st, r);
	}
again:
	while (qu.n > 0) {
		struct vzb_pick pk;
		long now, t, end;

		r = vq_pop(&qu, st);
		now = ST(r, V_FT);	/* deciding now, with what is known */
		t = ST(r, V_T0);	/* free since */
		vzb_ready(s, r, &pk);
		vzb_choose(s, r, alt, keep, now, t, &pk);
		ST(r, V_RELAX) = 0;
		if (pk.type == OP_F && pk.full) {
			if (!pk.wpend) {	/* F needs memory no W can free */
				ST(r, V_STATE) = 1;
				continue;
			}
			pk.type = OP_W;	/* free memory for it */
		} else if (pk.type != OP_W && pk.rdy > now) {
			if (pk.wpend && pk.rdy != V_INF && 4 * (pk.rdy - t) >= theta * qw) {
				pk.type = OP_W;	/* fill the gap */
			} else if (pk.rdy != V_INF) {
				ST(r, V_FT) = pk.rdy;	/* idle until it is ready */
				vq_insert(&qu, st, r);
				continue;
			} else {
				ST(r, V_STATE) = 1;	/* asleep */
				continue;
			}
		}
		end = vzb_place(s, &qu, r, now, &pk, n++);
		if (end > mk)
			mk = end;
	}
	if (n < s->o.n && n > relaxed_at) {
		relaxed_at = n;
		vzb_relax(s, &qu);
		goto again;
	}
	if (n < s->o.n && !keep)
		return -2;	/* this variant locked itself in; others do not */
	if (n < s->o.n) {
		pipette_fail(err, "schedule v-zb: p=%d m=%ld: list scheduling stalled after %ld of %ld ops",
			     p, m, n, s->o.n);
		return -1;
	}
	return mk;
}
#undef ST
#undef ENDF
#undef ENDB

/* Variants, as { alternate, theta, keep }: zbv.py's one-B-one-F rhythm
 * after the warm-up (alternate = 1) or plain B-first list scheduling;
 * theta: run a pending W when the next F or B is at least theta/4 of T_W
 * away; keep: an F0 leaves the last free chunk to an F1.  Variants with
 * keep = 0 can lock themselves in at the cap and are then skipped; those
 * with keep = 1 cannot (see vzb_greedy).  The first one, the rhythm of
 * zbv.py, is the best or within a few per cent of it whenever m >= 2p in
 * a sweep over p <= 32 and F:B:W from 1:0.8:1.2 to 1:2:0.5; the others win
 * by up to 9% when m is close to p.  Small shapes try them all and keep
 * the shortest makespan (the first on a tie), as sail-sg zbv.py tries its
 * fill variants and keeps the smallest bubble; large ones, where a greedy
 * pass costs milliseconds, run the first and fall back to the fourth
 * only if the first locks in. */
static const int vzb_var[][3] = { { 1, 4, 0 }, { 0, 2, 0 }, { 0, 4, 1 }, { 1, 4, 1 } };
#define VZB_ALL_VARIANTS_OPS 50000	/* p*m*6 up to which all are tried */

static int build_v_zb(struct pipette_sched *s, struct pipette_err *err)
{
	long best = V_INF, mk;
	int i, bi = -1, last = -1, n = (int)(sizeof(vzb_var) / sizeof(vzb_var[0]));
	int all = s->n_target <= VZB_ALL_VARIANTS_OPS;

	/* the calendar queue spans the longest op plus a transfer */
	s->n_bucket = max_l(max_l(s->o.vq[0], s->o.vq[1]), s->o.vq[2]) + s->o.vq[3] + 2;
	if (s->n_bucket > s->cap_bucket) {
		if (grow(&s->bucket, (size_t)s->n_bucket, sizeof(int32_t)))
			return pipette_fail(err, "schedule v-zb: out of memory");
		s->cap_bucket = s->n_bucket;
	}

	for (i = 0; i < n; i++) {
		if (!all && i > 0 && (i < n - 1 || bi >= 0))
			continue;
		mk = vzb_greedy(s, vzb_var[i][0], vzb_var[i][1], vzb_var[i][2], err);
		if (mk == -1)
			return -1;
		if (mk < 0)
			continue;	/* locked in */
		last = i;
		if (mk < best) {
			best = mk;
			bi = i;
		}
	}
	if (bi != last && vzb_greedy(s, vzb_var[bi][0], vzb_var[bi][1], vzb_var[bi][2], err) < 0)
		return -1;
	return 0;
}

/* Build the rank lists, the global order and the peaks for the shape in s. */
/* Every rank's operation list, by the schedule's own rule. */
static int build_lists(struct pipette_sched *s, struct wqueue *q, struct pipette_err *err)
{
	long *len = s->len;
	int r;

	for (r = 0; r < s->o.p; r++) {
		if (s->o.kind == PIPETTE_SCHED_INTERLEAVED)
			build_interleaved(s, r, &len[r]);
		else if (s->o.kind == PIPETTE_SCHED_GPIPE)
			build_gpipe(s, r, &len[r]);
		else if (s->o.kind == PIPETTE_SCHED_INTERLEAVED_ZB)
			build_interleaved_zb(s, r, &len[r]);
		else if (s->o.kind == PIPETTE_SCHED_ZBV)
			build_zbv(s, r, &len[r]);
		else if (pipette_schedule_is_dualpipe(s->o.kind)) {
			if (dpv_queue(s, q, err))
				return -1;
			build_dualpipe_v(s, r, &len[r], q);
		} else if (pipette_schedule_is_v(s->o.kind)) {
			if (build_v_block(s, r, &len[r], err))
				return -1;
		} else
			build_1f1b(s, r, &len[r]);
	}
	return 0;
}

/* Place rank r's next op o (its list index li, its dependency's key dk)
 * as the n-th of the global order; the rank's peaks follow from its list
 * order, its ops being serial (held[0]: F..B, held[1]: F..W). */
static void place(struct pipette_sched *s, int r, size_t li, const struct rop *o, long dk, long n)
{
	long *held = &s->vst[(size_t)r * V_NST];

	s->o.rank_pos[li] = (int32_t)n;
	s->o.gops[n].dep = dk >= 0 ? s->pos_tab[dk] : -1;
	s->o.gops[n].key = (r * s->o.v + o->chunk) * 3 + o->type;
	s->o.gops[n].rank = r;
	s->o.g_mb[n] = o->mb;
	s->ptr[r]++;
	if (o->type == OP_F) {
		held[0]++;
		held[1]++;
	} else if (o->type == OP_B) {
		held[0]--;
		held[1] -= !s->o.split_w;
	} else
		held[1]--;
	if (held[0] > s->o.peak_fb[r])
		s->o.peak_fb[r] = (int)held[0];
	if (held[1] > s->o.peak_fw[r])
		s->o.peak_fw[r] = (int)held[1];
}

static int build(struct pipette_sched *s, struct pipette_err *err)
{
	int p = s->o.p, r, placed;
	long *len, n = 0, i, step;
	size_t tab = (size_t)3 * s->o.S * s->o.m;
	int32_t *lvl_tab = s->slot_tab;
	struct wqueue q = { 0, 0, NULL, NULL };

	len = s->len;
	memset(len, 0, (size_t)p * sizeof(long));
	if (s->o.kind == PIPETTE_SCHED_V_ZB) {
		/* the greedy writes the global order and the peaks itself */
		if (build_v_zb(s, err))
			goto fail;
		for (r = 0; r < p; r++) {
			s->o.peak_fb_st[r] = (double)s->o.peak_fb[r] / s->o.v;
			s->o.peak_fw_st[r] = (double)s->o.peak_fw[r] / s->o.v;
		}
		s->o.valid = 1;
		return 0;
	}
	if (build_lists(s, &q, err))
		goto fail;
	for (r = 0; r < p; r++)
		if (len[r] != s->o.per_rank) {
			pipette_fail(err, "schedule %s: rank %d lists %ld ops, expected %ld",
				     pipette_schedule_name(s->o.kind), r, len[r], s->o.per_rank);
			goto fail;
		}

	/* Global order: the ops by their start in a run with unit durations
	 * and no transfers, ranks in order on a tie.  Step t places each
	 * rank's next op if what it reads was placed before step t (lvl_tab:
	 * the step of each placed key); a step that places nothing leaves
	 * the next one the same, a deadlock.  O(ops + p * idle steps).  Any
	 * order that respects the dependencies and every rank's list gives
	 * the same simulation; this one follows the pipeline's own rhythm
	 * and so repeats with the schedule's period (find_period), where one
	 * that runs each rank ahead as far as it can (Kahn's, with a stack)
	 * repeats only every many periods (120 micro-batches for interleaved
	 * at p = 8). */
	for (i = 0; i < (long)tab; i++)
		s->pos_tab[i] = -1;
	for (r = 0; r < p; r++) {
		s->ptr[r] = 0;
		s->vst[(size_t)r * V_NST] = s->vst[(size_t)r * V_NST + 1] = 0;
		s->o.peak_fb[r] = s->o.peak_fw[r] = 0;
	}
	for (step = 0, placed = 1; n < s->o.n && placed; step++)
		for (r = 0, placed = 0; r < p; r++) {
			size_t li;
			const struct rop *o;
			int st;
			long dk, self;

			if (s->ptr[r] == s->o.per_rank)
				continue;
			li = RIDX(s, r, s->ptr[r]);
			o = &s->rops[li];
			st = vstage(s, r, o->chunk);
			dk = dep_key(s, o->type, st, o->mb);
			self = KEY(o->type, st, o->mb);
			if (dk >= 0 && (s->pos_tab[dk] < 0 || lvl_tab[dk] >= step))
				continue;
			if (s->pos_tab[self] >= 0) {
				pipette_fail(err, "schedule %s: rank %d runs %c of chunk %d micro-batch %d twice",
					     pipette_schedule_name(s->o.kind), r,
					     "FBW"[o->type], o->chunk, o->mb);
				goto fail;
			}
			s->pos_tab[self] = (int32_t)n;
			lvl_tab[self] = (int32_t)step;
			place(s, r, li, o, dk, n++);
			placed++;
		}
	if (n < s->o.n) {
		pipette_fail(err, "schedule %s: p=%d v=%d m=%ld: operation lists deadlock",
			     pipette_schedule_name(s->o.kind), p, s->o.v, s->o.m);
		goto fail;
	}

	for (r = 0; r < p; r++) {
		s->o.peak_fb_st[r] = (double)s->o.peak_fb[r] / s->o.v;
		s->o.peak_fw_st[r] = (double)s->o.peak_fw[r] / s->o.v;
	}
	free(q.chunk);
	free(q.mb);
	s->o.valid = 1;
	return 0;
fail:
	free(q.chunk);
	free(q.mb);
	s->o.valid = 0;
	return -1;
}

/* ---- the steady state --------------------------------------------------
 *
 * Past the warm-up every schedule repeats one period of operations with
 * the micro-batches moved on, until the cool-down; so does its global
 * order.  find_period finds that run in the order (a structural fact of
 * the shape, checked op by op, never assumed from the kind), and the
 * simulation (simulate_ops) steps through it one period at a time until
 * the end times a period reads are those q ops before (q a few periods)
 * shifted by one constant lambda; from then on every period is, and it
 * jumps over them in closed form.  In real numbers that holds because an
 * op's end is a max of sums of the ends it reads, which commutes with
 * adding a constant: a max-plus linear system, which after a transient
 * repeats with a cycle of c steps, shifted by c times its cycle time (the
 * cyclicity theorem: Baccelli, Cohen, Olsder and Quadrat, "Synchronization
 * and Linearity", Wiley 1992, ch. 3; Heidergott, Olsder and van der
 * Woude, "Max Plus at Work", Princeton 2006, ch. 3-4).  In floating point
 * it holds exactly, bit for bit,
 * while every end involved stays in one binade [2^e, 2^(e+1)) and lambda
 * is an even number of its ulps: adding lambda to the inputs then adds it
 * to every rounded sum (round to nearest even keeps its choice when the
 * parity is kept), so the jump gives the full simulation's very numbers.
 * A jump therefore stops before the binade ends, and the simulation
 * steps on until the window lies in the next one: about one jump per
 * doubling of the time, a few dozen periods in all. */

/* Does op i of the global order repeat op i - P: the same rank and key,
 * and what it reads (its dependency and its rank's previous op, prev)
 * P positions later too. */
static inline int repeats(const struct sched_order *o, const int32_t *prev, long i, long P)
{
	const struct gop *a = &o->gops[i], *b = &o->gops[i - P];

	if (a->rank != b->rank || a->key != b->key || (a->dep < 0) != (b->dep < 0) ||
	    (a->dep >= 0 && a->dep - b->dep != P) || (prev[i] < 0) != (prev[i - P] < 0))
		return 0;
	return prev[i] < 0 || prev[i] - prev[i - P] == P;
}

/* Periods tried, in micro-batches (the ops of one micro-batch over all
 * ranks each): the looped schedules advance p micro-batches a period
 * (Megatron's groups of p), the others one, in every shape of
 * tests/unit/test_schedule.c; twice that, and 2 more for p = 1, leaves
 * room for an order that repeats only every other period. */
#define PERIOD_MAX_MB(p) (2L * (p) + 2)

/* The smallest period P (a multiple of the ops of one micro-batch) that
 * op `mid` and the 2P ops after it repeat, or 0. */
static long period_at(const struct sched_order *o, const int32_t *prev, long mid)
{
	long unit = o->n / o->m, k, i;

	for (k = 1; k <= PERIOD_MAX_MB(o->p) && k * unit <= mid && mid + 2 * k * unit <= o->n; k++) {
		long P = k * unit;

		for (i = mid; i < mid + 2 * P && repeats(o, prev, i, P); i++)
			;
		if (i == mid + 2 * P)
			return P;
	}
	return 0;
}

/* Find the steady run of the order in s->o (see struct sched_order).
 * Uses slot_tab, free once the order is built, for each op's previous op
 * on its rank. */
static void find_period(struct pipette_sched *s)
{
	struct sched_order *o = &s->o;
	int32_t *prev = s->slot_tab, *last = s->ptr;
	long n = o->n, i, lo, hi, P;
	int r;

	o->P = o->g0 = o->g1 = o->W = o->reach = 0;
	for (r = 0; r < o->p; r++)
		last[r] = -1;
	for (i = 0; i < n; i++) {
		prev[i] = last[o->gops[i].rank];
		last[o->gops[i].rank] = (int32_t)i;
	}
	P = period_at(o, prev, n / 2);
	if (!P)
		return;
	for (hi = n / 2; hi < n && repeats(o, prev, hi, P); hi++)
		;
	for (lo = n / 2; lo - 1 >= P && repeats(o, prev, lo - 1, P); lo--)
		;
	o->W = P;
	for (i = lo; i < hi; i++) {
		if (o->gops[i].dep >= 0 && i - o->gops[i].dep > o->W)
			o->W = i - o->gops[i].dep;
		if (i - prev[i] > o->W)
			o->W = i - prev[i];
	}
	for (i = lo - P; i < n; i++)
		if (o->gops[i].dep >= 0 && i - o->gops[i].dep > o->reach)
			o->reach = i - o->gops[i].dep;
	o->P = P;
	o->g0 = lo - P;
	o->g1 = hi;
}

/* Where op i of the order lies in the arrays, and by how many periods
 * (*off) it and what it reads are moved on from there: op i is
 * gops[phys] with its dependency *off * P and its micro-batch *off * kmb
 * later.  Ops below X are stored as they are; the j periods from X on
 * repeat the stored period [X - P, X); the rest is the stored cool-down.
 * *seg_end: the first op past i's stretch of one offset. */
static inline long phys_of(const struct sched_order *o, long i, long *off, long *seg_end)
{
	long e, k;

	if (!o->compact || i < o->X) {
		*off = 0;
		*seg_end = o->compact ? o->X : o->n;
		return i;
	}
	e = o->X + o->j * o->P;
	if (i >= e) {
		*off = o->j;
		*seg_end = o->n;
		return i - o->j * o->P;
	}
	k = (i - o->X) / o->P + 1;
	*off = k;
	*seg_end = o->X + k * o->P;
	return i - k * o->P;
}

/* Op i's entry in the arrays; *dshift: what its dependency moves on. */
static inline const struct gop *gop_at(const struct sched_order *o, long i, long *dshift)
{
	long off, e, ph = phys_of(o, i, &off, &e);

	*dshift = off * o->P;
	return &o->gops[ph];
}

/* Rank r's list index li in the order: in a compact one, its ops past
 * the stored head move on by the periods repeated (phys_of). */
static long rank_pos_of(const struct sched_order *o, int r, long li)
{
	long h, k;

	if (!o->compact || li < (h = o->head[r]))
		return o->rank_pos[(size_t)li * (size_t)o->p + (size_t)r];
	if (li >= h + o->j * o->c_rank)
		k = o->j;
	else
		k = (li - h) / o->c_rank + 1;
	return o->rank_pos[(size_t)(li - k * o->c_rank) * (size_t)o->p + (size_t)r] + k * o->P;
}

static int check_time(const double *a, long i, const char *what, struct pipette_err *err)
{
	if (!isfinite(a[i]) || a[i] < 0)
		return pipette_fail(err, "schedule: %s[%ld] = %g: expected a finite time >= 0 s",
				    what, i, a[i]);
	return 0;
}

/* Every time of the input, before anything is built from it. */
static int check_times(const struct pipette_sched_input *in, int S, struct pipette_err *err)
{
	long k;

	for (k = 0; k < S; k++)
		if (check_time(in->t_f, k, "t_f", err) || check_time(in->t_b, k, "t_b", err) ||
		    (in->t_w && check_time(in->t_w, k, "t_w", err)))
			return -1;
	for (k = 0; k + 1 < S; k++)
		if ((in->comm_f && check_time(in->comm_f, k, "comm_f", err)) ||
		    (in->comm_b && check_time(in->comm_b, k, "comm_b", err)))
			return -1;
	return 0;
}

/* V-ZB greedy costs: chunk means of F, B, W and the mean transfer over
 * the boundaries between ranks (not the turn of the V, boundary p-1), in
 * units of (T_F + T_B + T_W) / VZB_RES.  All zero: unit times. */
static void vzb_units(const struct pipette_sched_input *in, long q[4])
{
	int S = 2 * in->p, k;
	double f = 0, b = 0, w = 0, c = 0, unit;
	long nc = 0;

	for (k = 0; k < S; k++) {
		f += in->t_f[k];
		b += in->t_b[k];
		w += in->t_w ? in->t_w[k] : 0;
	}
	for (k = 0; k + 1 < S; k++) {
		if (k == in->p - 1)
			continue;
		c += (in->comm_f ? in->comm_f[k] : 0) + (in->comm_b ? in->comm_b[k] : 0);
		nc += 2;
	}
	unit = (f + b + w) / VZB_RES;
	if (!(unit > 0)) {
		q[0] = q[1] = q[2] = 1;
		q[3] = 0;
		return;
	}
	q[0] = lround(f / unit);
	q[1] = lround(b / unit);
	q[2] = lround(w / unit);
	/* a transfer beyond 64 times an op's work only stretches the
	 * warm-up; the cap bounds the calendar queue (VZB_RES * 65 buckets) */
	q[3] = nc ? (c / nc / unit > 64.0 * VZB_RES ? 64L * VZB_RES : lround(c / nc / unit)) : 0;
}

static int same_shape(const struct sched_order *o, const struct pipette_sched_input *in,
		      const long q[4])
{
	return o->valid && o->kind == in->kind && o->p == in->p && o->v == in->v &&
	       o->m == in->m && (in->kind != PIPETTE_SCHED_V_ZB || memcmp(q, o->vq, 4 * sizeof(long)) == 0) &&
	       !(in->full && o->compact);
}

static void swap_order(struct sched_order *a, struct sched_order *b)
{
	struct sched_order t = *a;

	*a = *b;
	*b = t;
}

/* Free the least recently used of slots lo..hi-1 until they hold at most
 * `most` ops (their arrays' capacity) with `adding` more: the shared slots
 * with the current order's capacity against SCHED_CACHE_OPS, the small
 * ones with the order stashed against SCHED_SMALL_HELD. */
static void slots_budget(struct pipette_sched *s, int lo, int hi, size_t adding, size_t most)
{
	for (;;) {
		size_t held = adding;
		int i, lru = -1;

		for (i = lo; i < hi; i++) {
			if (!s->cache[i].valid)
				continue;
			held += s->cache[i].cap_ops;
			if (lru < 0 || s->cache[i].used < s->cache[lru].used)
				lru = i;
		}
		if (held <= most || lru < 0)
			return;
		free_order(&s->cache[lru]);
		memset(&s->cache[lru], 0, sizeof(s->cache[lru]));
	}
}

/* Keep the current order in the cache, in the least recently used slot
 * of its class (an empty one first); s->o gets the order it pushes out.
 * A small order's arrays shrink to it, so that the small slots stay
 * small whatever their arrays held before. */
static void stash(struct pipette_sched *s)
{
	int small = s->o.nphys <= SCHED_SMALL_OPS, lo = small ? SCHED_CACHE : 0;
	int hi = small ? SCHED_CACHE + SCHED_SMALL : SCHED_CACHE, victim = lo, i;

	if (!s->o.valid)
		return;
	if (!small)
		slots_budget(s, lo, hi, s->o.cap_ops, (size_t)SCHED_CACHE_OPS);
	else
		slots_budget(s, lo, hi, (size_t)s->o.nphys, (size_t)SCHED_SMALL_HELD);
	for (i = lo + 1; i < hi; i++)
		if (!s->cache[i].valid ||
		    (s->cache[victim].valid && s->cache[i].used < s->cache[victim].used))
			victim = i;
	if (small && s->o.cap_ops > (size_t)s->o.nphys) {
		void *a = realloc(s->o.rank_pos, (size_t)s->o.nphys * sizeof(int32_t));
		void *b = a ? realloc(s->o.gops, (size_t)s->o.nphys * sizeof(*s->o.gops)) : NULL;
		void *c = b ? realloc(s->o.g_mb, (size_t)s->o.nphys * sizeof(int32_t)) : NULL;

		if (a)
			s->o.rank_pos = a;
		if (b)
			s->o.gops = b;
		if (c) {
			s->o.g_mb = c;
			s->o.cap_ops = (size_t)s->o.nphys;
		}
	}
	swap_order(&s->o, &s->cache[victim]);
}

/* Build the whole order of m micro-batches into s->o and find its steady
 * run. */
static int build_at(struct pipette_sched *s, long m, struct pipette_err *err)
{
	struct sched_order *o = &s->o;

	o->m = m;
	o->per_rank = (long)o->v * m * (o->split_w ? 3 : 2);
	o->n = o->nphys = o->per_rank * o->p;
	o->compact = 0;
	o->j = o->kmb = o->c_rank = 0;
	if (reserve(s, (size_t)o->n, (size_t)3 * o->S * m, (size_t)o->p, (size_t)o->S))
		return pipette_fail(err, "schedule %s: out of memory for %ld operations",
				    pipette_schedule_name(o->kind), o->n);
	if (build(s, err))
		return -1;
	find_period(s);
	return 0;
}

/* ---- compact orders -----------------------------------------------------
 *
 * An order of many micro-batches is its warm-up, its steady run (one
 * period of kmb micro-batches repeated) and its cool-down, and the order
 * of kmb more micro-batches has one period more and nothing else changed:
 * every op past the run is the same op kmb micro-batches later.  So the
 * order of m is built as the order of a few micro-batches m1 (m1 = m mod
 * kmb, plus enough periods for the warm-up to settle) and stretched by
 * (m - m1) / kmb periods (phys_of), never written out: O(p^2 v) to build
 * and to keep, not O(m p v).  That this holds is checked, never assumed
 * from the kind: the order of m1 + kmb micro-batches is built too and
 * must equal the order of m1 stretched by one period op for op (rank,
 * type, chunk, micro-batch, dependency, every rank's list and the peaks);
 * otherwise, or where the steady run is too short to repeat, the whole
 * order is built.  The simulation is the same function of the same op
 * sequence either way, and tests/unit/test_schedule.c compares both, op
 * for op and bit for bit, over every schedule. */

/* Micro-batches of the order first built: 4p + 8, a multiple of p for
 * the looped schedules (Megatron's groups of p), 2p at least for
 * DualPipeV, congruent to m modulo the step of that rule; build_compact
 * doubles it where its steady run turns out too short. */
static long compact_m1(const struct sched_order *o, long m, long m1)
{
	long step = pipette_schedule_is_looped(o->kind) ? o->p : 1;

	if (m1 < 4L * o->p + 8)
		m1 = 4L * o->p + 8;
	if (pipette_schedule_is_looped(o->kind))
		m1 = (m1 + o->p - 1) / o->p * o->p;
	if (pipette_schedule_is_dualpipe(o->kind) && m1 < 2L * o->p)
		m1 = 2L * o->p;
	return m > m1 ? m1 + (m - m1) % step : m1;
}

/* The per-rank counts of the order in s->o for stretching it: its ops
 * before X = g1 (head) and in the last period [X - P, X), which must be
 * P / p on every rank. */
static int compact_heads(struct sched_order *o)
{
	long i;
	int r;

	o->X = o->g1;
	o->c_rank = o->P / o->p;
	if (o->c_rank * o->p != o->P)
		return -1;
	for (r = 0; r < o->p; r++)
		o->head[r] = 0;
	for (i = 0; i < o->X; i++)
		o->head[o->gops[i].rank]++;
	for (r = 0; r < o->p; r++) {
		long c = 0, li;

		for (li = o->head[r] - 1; li >= 0 && rank_pos_of(o, r, li) >= o->X - o->P; li--)
			c++;
		if (c != o->c_rank)
			return -1;
	}
	return 0;
}

/* Is b (built whole) the order a (compact, j set) says, op for op? */
static int same_order(const struct sched_order *a, const struct sched_order *b)
{
	long i, li;
	int r;

	if (a->n != b->n || a->per_rank != b->per_rank)
		return 0;
	for (i = 0; i < b->n; i++) {
		long off, e, ph = phys_of(a, i, &off, &e);
		const struct gop *x = &a->gops[ph], *y = &b->gops[i];

		if (x->rank != y->rank || x->key != y->key ||
		    (x->dep < 0 ? y->dep >= 0 : y->dep != x->dep + off * a->P) ||
		    b->g_mb[i] != a->g_mb[ph] + off * a->kmb)
			return 0;
	}
	for (r = 0; r < b->p; r++) {
		if (a->peak_fb[r] != b->peak_fb[r] || a->peak_fw[r] != b->peak_fw[r])
			return 0;
		for (li = 0; li < b->per_rank; li++)
			if (rank_pos_of(a, r, li) != b->rank_pos[(size_t)li * (size_t)b->p + (size_t)r])
				return 0;
	}
	return 1;
}

/* A compact order is built where m is at least this many times m1: the
 * orders of m1 and m1 + kmb cost about two thirds of the whole one at
 * most, far less for the long runs it is for. */
#define COMPACT_MIN_FACTOR 3

/* Build s->o's shape with m micro-batches as a compact order (see above):
 * 0, or -1 where it cannot be (then nothing of s->o is valid). */
static int build_compact(struct pipette_sched *s, long m)
{
	struct sched_order *o = &s->o, small;
	struct pipette_err scratch;
	long m1 = compact_m1(o, m, 0), unit, n1, per1, ok;
	int tries;

	/* V-ZB keeps the best of its variants where the whole order is
	 * small (build_v_zb): the best at m1 need not be the best at m */
	if (o->kind == PIPETTE_SCHED_V_ZB && s->n_target <= VZB_ALL_VARIANTS_OPS)
		return -1;
	for (tries = 0;; tries++) {
		if (m < COMPACT_MIN_FACTOR * m1 || tries == 4 ||
		    (pipette_schedule_is_looped(o->kind) && m1 % o->p))
			return -1;
		if (build_at(s, m1, &scratch))
			return -1;
		unit = o->n / m1;
		o->kmb = o->P / unit;
		if (o->P && o->kmb * unit == o->P && (m - m1) % o->kmb) {
			m1 += (m - m1) % o->kmb;	/* m1 = m modulo the period */
			continue;
		}
		if (o->P && o->kmb * unit == o->P &&
		    o->g1 - o->g0 >= (o->reach > o->P + o->W ? o->reach : o->P + o->W))
			break;
		m1 = compact_m1(o, m, 2 * m1);	/* a run too short to repeat */
	}
	if (compact_heads(o))
		return -1;
	/* the order of m1 + kmb, built whole, against this one stretched */
	small = *o;
	o->gops = NULL;
	o->g_mb = o->rank_pos = o->head = NULL;
	o->peak_fb = o->peak_fw = NULL;
	o->peak_fb_st = o->peak_fw_st = NULL;
	o->cap_ops = o->cap_rank = 0;
	n1 = small.n;
	per1 = small.per_rank;
	small.compact = 1;
	small.j = 1;
	small.n = n1 + small.P;
	small.per_rank = per1 + small.c_rank;
	ok = build_at(s, m1 + small.kmb, &scratch) == 0 && same_order(&small, o);
	free_order(o);
	*o = small;
	o->valid = ok;
	if (!ok)
		return -1;
	o->j = (m - m1) / o->kmb;
	o->m = m;
	o->nphys = n1;
	o->n = n1 + o->j * o->P;
	o->per_rank = per1 + o->j * o->c_rank;
	o->g1 = o->X + o->j * o->P;
	return 0;
}

static int set_shape(struct pipette_sched *s, const struct pipette_sched_input *in,
		     struct pipette_err *err)
{
	const char *name = pipette_schedule_name(in->kind);
	int v = in->v, i;
	double ops;
	long q[4] = { 0, 0, 0, 0 };

	if ((int)in->kind < 0 || in->kind >= PIPETTE_SCHED_COUNT)
		return pipette_fail(err, "schedule: kind %d is not a schedule", (int)in->kind);
	if (in->p < 1)
		return pipette_fail(err, "schedule %s: p=%d: need at least one pipeline rank", name, in->p);
	if (in->m < 1)
		return pipette_fail(err, "schedule %s: m=%ld: need at least one micro-batch", name, in->m);
	if (pipette_schedule_is_looped(in->kind)) {
		if (v < 2 || v > 255)
			return pipette_fail(err, "schedule %s: v=%d: interleaving needs 2..255 chunks per rank",
					    name, v);
		if (in->m % in->p != 0)
			return pipette_fail(err, "schedule %s: m=%ld is not a multiple of p=%d "
					    "(the looped schedules require it)", name, in->m, in->p);
	} else if (pipette_schedule_is_v(in->kind)) {
		if (v != 2)
			return pipette_fail(err, "schedule %s: v=%d: V-shape schedules use 2 chunks per rank",
					    name, v);
		if (pipette_schedule_is_dualpipe(in->kind) && in->m < 2L * in->p)
			return pipette_fail(err, "schedule %s: m=%ld: DualPipeV needs at least 2p = %d "
					    "micro-batches (torch and DualPipe check it)", name, in->m,
					    2 * in->p);
	} else if (v != 1) {
		return pipette_fail(err, "schedule %s: v=%d: this schedule has 1 chunk per rank", name, v);
	}
	ops = (double)in->p * v * (double)in->m * 3.0;
	if (ops > (double)(INT32_MAX / 2))
		return pipette_fail(err, "schedule %s: p=%d v=%d m=%ld: too many operations (%.0f)",
				    name, in->p, v, in->m, ops);
	if (check_times(in, in->p * v, err))
		return -1;
	if (in->kind == PIPETTE_SCHED_V_ZB)
		vzb_units(in, q);
	if (same_shape(&s->o, in, q)) {
		s->o.used = ++s->clock;
		return 0;
	}
	s->simulated = 0;
	for (i = 0; i < SCHED_CACHE + SCHED_SMALL; i++)
		if (same_shape(&s->cache[i], in, q)) {
			struct sched_order hit = s->cache[i];

			memset(&s->cache[i], 0, sizeof(s->cache[i]));
			stash(s);
			free_order(&s->o);	/* what the current one pushed out */
			s->o = hit;
			s->o.used = ++s->clock;
			return 0;
		}
	/* keep the current order; the new shape is built in the arrays of
	 * the one it pushes out */
	stash(s);
	s->o.valid = 0;
	s->o.used = ++s->clock;
	memcpy(s->o.vq, q, sizeof(q));
	s->o.kind = in->kind;
	s->o.p = in->p;
	s->o.v = v;
	s->o.S = in->p * v;
	/* ZB-H1 and all V-shapes split W off B (their blocks place W). */
	s->o.split_w = pipette_schedule_splits_w(in->kind);
	s->n_target = (long)v * in->m * (s->o.split_w ? 3 : 2) * in->p;
	if (!in->full && build_compact(s, in->m) == 0)
		return 0;
	return build_at(s, in->m, err);
}


/* The event simulation of ops [a, b) of the global order: each starts
 * when its rank is free and its input has arrived.  One stretch of ops
 * stored alike (phys_of) at a time. */
static void sim_span(struct pipette_sched *s, long a, long b)
{
	const double *dt = s->dur_tab, *ct = s->cin_tab;
	double *end = s->g_end, *freet = s->freet;
	long i, lo = a;

	while (lo < b) {
		long off, hi, ph = phys_of(&s->o, lo, &off, &hi), dsh = off * s->o.P;
		long sh = lo - ph;

		if (hi > b)
			hi = b;
		for (i = lo; i < hi; i++) {
			const struct gop *g = &s->o.gops[i - sh];
			int32_t rr = g->rank, k = g->key;
			long d = g->dep;
			double t0 = freet[rr];

			if (d >= 0) {
				double ready = end[d + dsh] + ct[k];

				if (ready > t0)
					t0 = ready;
			}
			t0 += dt[k];
			end[i] = t0;
			freet[rr] = t0;
		}
		lo = hi;
	}
	s->n_simulated += b - a;
}

/* Are the W ops before `at` and the W ops q before them in one binade
 * [2^(e-1), 2^e), the first exactly lambda after the second, lambda an
 * even number of the binade's ulps 2^(e-53) (or 0)?  Differences inside
 * a binade are exact (Sterbenz's lemma).  Returns how many steps of q ops
 * may be jumped without leaving the binade (LONG_MAX for lambda = 0:
 * nothing moves), 0 if the ends do not repeat, -1 if they span two
 * binades (so would the longer steps). */
static long exact_shift(const double *end, long at, long W, long q, double *lambda)
{
	double l = end[at - 1] - end[at - 1 - q], lo = HUGE_VAL, hi = 0, top;
	long x, R;
	int e;

	/* a few ops across the window first: a transient shows in most */
	for (x = at - W; x < at; x += W / 8 + 1)
		if (end[x] - end[x - q] != l)
			return 0;
	for (x = at - W; x < at; x++) {
		if (end[x] - end[x - q] != l)
			return 0;
		if (end[x - q] < lo)
			lo = end[x - q];
		if (end[x] > hi)
			hi = end[x];
	}
	*lambda = l;
	if (l == 0)
		return LONG_MAX;
	if (!(lo > 0) || !(l > 0))
		return 0;
	frexp(hi, &e);
	if (lo < ldexp(1.0, e - 1))
		return -1;
	if (fmod(l, ldexp(1.0, e - 52)) != 0)
		return 0;
	top = ldexp(1.0, e);
	R = (long)((top - hi) / l);
	while (R > 0 && hi + (double)R * l >= top)
		R--;
	return R;
}

/* End of op i of the last simulation, jumped or not. */
static double end_of(const struct pipette_sched *s, long i)
{
	int j;

	for (j = 0; j < s->n_jumps; j++) {
		const struct sched_jump *J = &s->jumps[j];

		if (i >= J->from && i < J->end) {
			long k = (i - J->from) / J->q + 1;

			return s->g_end[i - k * J->q] + (double)k * J->lambda;
		}
	}
	return s->g_end[i];
}

/* Periods a shift may take to repeat: a max-plus system settles into a
 * cycle of c steps, c the cyclicity of its critical graph (the theorem
 * cited above); 1F1B at p = 3 with random uneven stages takes 2, 1F1B at
 * p = 8 with stages 1 us apart 8 (tests/bench/bench_schedule.c's times),
 * and an odd number of ulps per period takes twice its cycle.  Longer
 * cycles are stepped through, not jumped. */
#define STEADY_CYCLE_MAX 8

/* Jump from `at` over R steps of q ops that repeat the q before `at`
 * (all simulated) shifted by lambda each: the ranks' clocks move on by
 * R*lambda (a rank absent from those q ops is absent from the run and
 * keeps its clock), and the ends the simulation reads from there on (the
 * steps W back, the cool-down `reach` back) are written out.  Every
 * product and sum is exact (exact_shift).  Returns where the simulation
 * resumes. */
static long jump(struct pipette_sched *s, long at, long q, double lambda, long R)
{
	const struct sched_order *o = &s->o;
	struct sched_jump *J = &s->jumps[s->n_jumps++];
	long back = o->reach > o->W ? o->reach : o->W, i, k, src;
	double shift;
	int32_t *seen = s->ptr;
	int r;

	J->from = at;
	J->end = at + R * q;
	J->q = q;
	J->lambda = lambda;
	for (r = 0; r < o->p; r++)
		seen[r] = 0;
	for (i = at - q; i < at; i++) {
		long dsh;

		seen[gop_at(o, i, &dsh)->rank] = 1;
	}
	for (r = 0; r < o->p; r++)
		if (seen[r])
			s->freet[r] += (double)R * lambda;
	i = J->end - back > at ? J->end - back : at;
	k = (i - at) / q + 1;
	for (shift = (double)k * lambda, src = i - k * q; i < J->end; i++, src++) {
		if (src == at) {
			src -= q;
			shift += lambda;
		}
		s->g_end[i] = s->g_end[src] + shift;
	}
	return J->end;
}

static int binade(double x)
{
	int e;

	frexp(x, &e);
	return e;
}

/* At `at` (a period boundary of the run): jump if the window repeats
 * with a step of c periods, c = 1 .. STEADY_CYCLE_MAX, each possible
 * where at - q >= g0 (every op after `at` repeats the one q before) and
 * the window's W + q ops were simulated, not jumped (after `from`: a
 * jump ends in the binade it stopped short of leaving).  The window's
 * first and last end in one binade is a quick first test.  Returns where
 * to go on from (`at` if no jump). */
static long try_jump(struct pipette_sched *s, long at, long from)
{
	const struct sched_order *o = &s->o;
	double lambda = 0;
	long q, R;
	int c;

	if (s->n_jumps == STEADY_JUMPS_MAX)
		return at;
	for (c = 1; c <= STEADY_CYCLE_MAX; c++) {
		q = c * o->P;
		if ((at / o->P) % c)
			continue;	/* a step of c periods: tried every c-th */
		if (at - q < o->g0 || at - o->W - q < from ||
		    binade(s->g_end[at - o->W - q]) != binade(s->g_end[at - 1]))
			break;
		R = exact_shift(s->g_end, at, o->W, q, &lambda);
		if (R < 0)
			break;
		if (R > (o->g1 - at) / q)
			R = (o->g1 - at) / q;
		if (R > 0)
			return jump(s, at, q, lambda, R);
	}
	return at;
}

/* Simulate the whole order: with `full` or without a steady run, op by
 * op; otherwise the warm-up, then the run one period at a time, jumping
 * wherever it repeats exactly (try_jump), and the cool-down. */
static void simulate_ops(struct pipette_sched *s, int full)
{
	const struct sched_order *o = &s->o;
	long at = 0, from = 0, next;

	s->n_jumps = 0;
	s->n_simulated = 0;
	if (!full && o->P) {
		at = o->g0 + o->P > o->W + o->P ? o->g0 + o->P : o->W + o->P;
		if (at > o->g1)
			at = o->g1;
		sim_span(s, 0, at);
		while (at + o->P <= o->g1) {
			next = try_jump(s, at, from);
			if (next == at) {
				sim_span(s, at, at + o->P);
				next = at + o->P;
			} else {
				from = next;
			}
			at = next;
		}
	}
	sim_span(s, at, o->n);
}

int pipette_sched_prepare(struct pipette_sched *s, const struct pipette_sched_input *in,
			  struct pipette_err *err)
{
	if (!s || !in)
		return pipette_fail(err, "schedule: missing workspace or input");
	if (!in->t_f || !in->t_b)
		return pipette_fail(err, "schedule: t_f and t_b are required");
	return set_shape(s, in, err);
}

int pipette_sched_simulate(struct pipette_sched *s,
			   const struct pipette_sched_input *in,
			   struct pipette_sched_result *out,
			   struct pipette_err *err)
{
	int r, c, S;
	double mk = 0, maxbusy = 0;
	const double *freet;

	if (!s || !in || !out)
		return pipette_fail(err, "schedule: missing workspace, input or result");
	if (!in->t_f || !in->t_b)
		return pipette_fail(err, "schedule: t_f and t_b are required");
	if (set_shape(s, in, err))
		return -1;
	S = s->o.S;

	/* Per-call tables, per key (rank*v + chunk)*3 + type: the duration
	 * and the transfer that precedes the op (F: over boundary s-1 from
	 * stage s-1; B: over boundary s from stage s+1). */
	for (r = 0; r < s->o.p; r++) {
		double busy = 0;

		for (c = 0; c < s->o.v; c++) {
			long i3, k = (long)r * s->o.v + c;
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
			s->dur_tab[i3 + OP_B] = s->o.split_w ? in->t_b[k] : in->t_b[k] + tw;
			s->dur_tab[i3 + OP_W] = s->o.split_w ? tw : 0;
			s->cin_tab[i3 + OP_F] = st > 0 && in->comm_f ? in->comm_f[st - 1] : 0;
			s->cin_tab[i3 + OP_B] = st < S - 1 && in->comm_b ? in->comm_b[st] : 0;
			s->cin_tab[i3 + OP_W] = 0;
			busy += s->dur_tab[i3 + OP_F] + s->dur_tab[i3 + OP_B] + s->dur_tab[i3 + OP_W];
		}
		/* every chunk runs each of its ops once per micro-batch */
		s->busy[r] = busy * (double)s->o.m;
		s->freet[r] = 0;
	}

	if ((size_t)s->o.n > s->cap_end) {
		/* no content to keep: a fresh block, not a copy */
		free(s->g_end);
		s->g_end = malloc((size_t)s->o.n * sizeof(double));
		s->cap_end = s->g_end ? (size_t)s->o.n : 0;
		if (!s->g_end)
			return pipette_fail(err, "schedule %s: out of memory for %ld operations",
					    pipette_schedule_name(s->o.kind), s->o.n);
	}
	simulate_ops(s, in->full);
	freet = s->freet;
	for (r = 0; r < s->o.p; r++) {
		if (freet[r] > mk)
			mk = freet[r];
		if (s->busy[r] > maxbusy)
			maxbusy = s->busy[r];
	}
	out->makespan = mk;
	out->bubble = mk > 0 ? 1.0 - maxbusy / mk : 0;
	out->busy = s->busy;
	out->peak_fb = s->o.peak_fb;
	out->peak_fw = s->o.peak_fw;
	out->peak_fb_stages = s->o.peak_fb_st;
	out->peak_fw_stages = s->o.peak_fw_st;
	out->finish = s->freet;
	out->v = s->o.v;
	out->n_ops = s->o.n;
	out->n_simulated = s->n_simulated;
	out->n_stored = s->o.nphys;
	s->simulated = 1;
	return 0;
}

int pipette_sched_event(const struct pipette_sched *s, long i,
			struct pipette_sched_event *ev)
{
	const struct gop *g;
	long d, off, e, ph;

	if (!s || !s->o.valid || !s->simulated || i < 0 || i >= s->o.n || !ev)
		return -1;
	ph = phys_of(&s->o, i, &off, &e);
	g = &s->o.gops[ph];
	ev->rank = g->rank;
	ev->chunk = (g->key / 3) % s->o.v;
	ev->type = "FBW"[g->key % 3];
	ev->stage = vstage(s, g->rank, ev->chunk);
	ev->mb = s->o.g_mb[ph] + off * s->o.kmb;
	ev->end = end_of(s, i);
	ev->start = ev->end - s->dur_tab[g->key];
	d = g->dep;
	ev->from_rank = -1;
	ev->xfer_start = ev->xfer_end = ev->start;
	if (d >= 0) {
		long dsh;

		d += off * s->o.P;
		if (gop_at(&s->o, d, &dsh)->rank != g->rank) {
			ev->from_rank = gop_at(&s->o, d, &dsh)->rank;
			ev->xfer_start = end_of(s, d);
			ev->xfer_end = ev->xfer_start + s->cin_tab[g->key];
		}
	}
	return 0;
}

long pipette_sched_rank_op(const struct pipette_sched *s, int r, long i)
{
	if (!s || !s->o.valid || r < 0 || r >= s->o.p || i < 0 || i >= s->o.per_rank)
		return -1;
	return rank_pos_of(&s->o, r, i);
}
