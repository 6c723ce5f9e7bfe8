#include "estimate/timing.h"

#include "inputs/stack.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "estimate/kernels.h"
#include "estimate/memory.h"
#include "estimate/schedmemo.h"

/* ---- collectives ---------------------------------------------------------- */

/* alpha-beta ring forms: an all-reduce is 2(n-1) steps moving S/n each, an
 * all-gather (or all-to-all on a full bisection) n-1; the bus-bandwidth
 * factors 2(n-1)/n and (n-1)/n of NVIDIA/nccl-tests doc/PERFORMANCE.md. */

double pipette_allreduce_s(int n, double bytes, double gbps, double lat_us)
{
	if (n <= 1 || bytes <= 0)
		return 0;
	return 2.0 * (n - 1) * lat_us * 1e-6 + 2.0 * (n - 1) / n * bytes / (gbps * 1e9);
}

double pipette_allgather_s(int n, double bytes, double gbps, double lat_us)
{
	if (n <= 1 || bytes <= 0)
		return 0;
	return (n - 1) * lat_us * 1e-6 + (double)(n - 1) / n * bytes / (gbps * 1e9);
}

double pipette_alltoall_s(int n, double bytes, double gbps, double lat_us)
{
	return pipette_allgather_s(n, bytes, gbps, lat_us);
}

double pipette_p2p_s(double bytes, double gbps, double lat_us)
{
	if (bytes <= 0)
		return 0;
	return lat_us * 1e-6 + bytes / (gbps * 1e9);
}

/* Links of one communication group, as its ring sees them. */
struct group_links {
	int n;			/* ranks */
	double bw, lat;		/* flat ring: slowest edge, largest latency */
	int nodes, per_node;	/* for the hierarchical form */
	double intra_bw, intra_lat, inter_bw, inter_lat;
};

/* Collective kinds, by bytes moved per rank relative to S. */
enum coll { COLL_AR, COLL_AG, COLL_A2A };

static double coll_time(enum coll k, const struct group_links *g, double bytes)
{
	double flat, hier, s2;

	if (g->n <= 1 || bytes <= 0)
		return 0;
	flat = k == COLL_AR ? pipette_allreduce_s(g->n, bytes, g->bw, g->lat)
			    : pipette_allgather_s(g->n, bytes, g->bw, g->lat);
	if (g->nodes <= 1 || g->per_node <= 1 || k == COLL_A2A)
		return flat;
	/* Hierarchical: reduce-scatter (or gather) inside each node, the
	 * inter-node collective on 1/per_node of the data over every GPU's
	 * own NIC in parallel, then all-gather inside the node. */
	s2 = bytes / g->per_node;
	if (k == COLL_AR)
		hier = 2 * pipette_allgather_s(g->per_node, bytes, g->intra_bw, g->intra_lat) +
		       pipette_allreduce_s(g->nodes, s2, g->inter_bw, g->inter_lat);
	else
		hier = pipette_allgather_s(g->per_node, bytes, g->intra_bw, g->intra_lat) +
		       pipette_allgather_s(g->nodes, s2 * g->per_node, g->inter_bw,
					   g->inter_lat) / g->per_node;
	return hier < flat ? hier : flat;
}

/* ---- the workspace -------------------------------------------------------- */

/* A search evaluates many configurations on one rank grid (tp, cp, dp, pp,
 * ep, etp): their groups and point-to-point links are the same, only the
 * bytes differ.  Each grid's links are read from the cluster once.  The
 * 2048-node search of tests/bench/bench_plan.c visits 140 grids in an
 * order that comes back to them: 8 entries rebuilt one 1,527 times, 32
 * entries 617 times (the plan from 2.05 to 1.55 s CPU, with SHAPE_CACHE;
 * 98 MiB peak, 1.5 MiB or so per entry there, each a copy of its groups
 * and links).  An entry of the default placement keeps only what can be
 * a stage's slowest group or link (its fronts, a few KiB; the groups stay
 * in the shape cache), so GRID_CACHE holds every grid of that search:
 * 4.94 G instructions to 4.79 G for the plan, 75 to 55 MiB peak
 * (callgrind). */
#define GRID_CACHE 256
enum { N_KINDS = 6 };

/* The slowest group of a kind in one stage, as worst_group last judged
 * it: at `bytes` of collective `coll`, group `idx` of the stage, taking
 * tt.  A mapped placement's entry keeps it up to date as sigma moves
 * groups (mapped_update), so that the next estimate of the same
 * configuration reads it without a scan. */
struct stage_worst {
	int have;
	enum coll coll;
	double bytes, tt;
	int idx;
	struct group_links g;	/* the group, under the default placement */
};

struct grid_entry {
	int key[7];		/* tp, cp, dp, pp, ep, etp, dp_shard; tp == 0: empty */
	long used;
	struct group_links *groups[N_KINDS];	/* stage-major, all groups */
	int per_stage[N_KINDS];			/* groups per stage */
	struct stage_worst *worst[N_KINDS];	/* pp each, or NULL */
	/* Under the default placement the groups are the shape cache's
	 * (shape_groups), not copied: of each stage's groups of a kind, those
	 * that can be its slowest (group_front), copied, stage s's gfront_n[s]
	 * of them from gfront_at[s] = gfront_n[pp + s]; gfront_n[s] is
	 * FRONT_NONE where too many to be worth it (the stage is scanned in
	 * the shape cache).  NULL until built. */
	struct group_links *gfront[N_KINDS];
	int *gfront_n[N_KINDS];
	struct pipette_link *p2p;	/* [2][pp][per_stage]: row s of slot 0
					 * is s -> s+1 (pp-1 -> 0 last), slot 1
					 * the reverse; a mapped placement's */
	/* Under the default placement, of each row of p2p's form, the links
	 * that can be its worst (p2p_front), copied: row r's front_n[r] of
	 * them from front_n[2 pp + r], or front_n[r] = -1 where too many
	 * (the row is read from the cluster); and its first link. */
	struct pipette_link *front;
	int *front_n;			/* 4 pp */
	struct pipette_link *row_first;	/* 2 pp */
	/* A mapped placement's record of each row's worst link instead (2
	 * pp; coll unused), kept up to date by mapped_update. */
	struct stage_worst *pworst;
	/* A mapped placement's large rings kept edge by edge (ring_tree),
	 * group g's 2 * size nodes at g * 2 * size; NULL when none. */
	struct ring_node *rings[N_KINDS];
};

/* Group links by shape (size, stride) over the whole cluster under the
 * default placement: the groups of a kind in stage s of any grid are the
 * consecutive global groups (per_stage/size)*s .. +per_stage/size - 1 of
 * their shape, so grids that differ in pp, dp or the other kinds share
 * them.  SHAPE_CACHE shapes, least recently used replaced: the 2048-node
 * search of tests/bench/bench_plan.c asks for 30 shapes (16 entries built
 * one 880 times, 32 entries each once). */
#define SHAPE_CACHE 32
struct shape_entry {
	int size, stride;
	unsigned long stamp;	/* pipette_cluster_version; 0 = empty */
	long used;
	int n, cap;		/* groups built, allocated */
	struct group_links *g;
};

/* Stage-to-stage links under the default placement by stage size ps:
 * fwd[r] = r -> r + ps and bwd[r] = r + ps -> r over the whole cluster,
 * which every pp of that stage size shares.  P2P_CACHE sizes, least
 * recently used replaced (as many as the grids: a grid's stage size). */
#define P2P_CACHE 32
struct p2p_entry {
	int ps, n;
	unsigned long stamp;	/* 0 = empty */
	long used;
	struct pipette_link *fwd, *bwd;
};

/* Intra-node ring bounds by (cluster version, node, slot set), node by
 * node: one cache line per node holds INTRA_WAYS slot sets of one
 * version (pipette_cluster_version: unique in the process to a cluster
 * and its links), the oldest replaced, so that the groups of a node,
 * read one after another, find their bounds on one line.  The 2^15
 * lines hashed by (node, set) before missed 198,595 times in 622,690
 * on the 2048-node plan of tests/bench/bench_plan.c, 123,755 of them on
 * sets seen before (their slots taken by other nodes' sets); 64 KiB per
 * 1,024 nodes. */
#define INTRA_WAYS 3
struct intra_line {
	unsigned long version;
	uint64_t mask[INTRA_WAYS];	/* 0: empty */
	double bw[INTRA_WAYS];
	int next;			/* the way replaced next */
};

struct pipette_timer {
	struct intra_line *intra;	/* intra_n lines, by node */
	int intra_n;
	struct shape_entry shapes[SHAPE_CACHE];
	struct p2p_entry p2ps[P2P_CACHE];
	struct pipette_sched *sched;
	struct pipette_sched_memo *memo;	/* simulations by their input */
	int cap_stages;
	double *t_f, *t_b, *t_w, *comm_f, *comm_b, *inflight;
	double *dp_rs, *dp_win;	/* per stage: overlappable DP time, its window */
	int cap_ranks;
	int *ranks;
	int *scratch;		/* GPUs of one group, sorted by node */
	/* Links of every group of a rank grid, kept for one cluster under
	 * the default placement (pipette_timer_cache_links). */
	const struct pipette_cluster *cache_cl;
	struct grid_entry *grids;	/* GRID_CACHE entries */
	int last_grid;			/* the one grid_lookup found last */
	long clock;
	/* Links of every group of the last mapped placement's grid
	 * (mapped_lookup), for the sigma they were read under. */
	struct grid_entry mapped;
	unsigned long mapped_stamp;	/* the cluster's version */
	int mapped_world, mapped_cap;
	long estimates, mapped_seen;	/* estimates begun; the one that
					 * last compared sigma */
	int *mapped_sigma;
	int *moved;			/* ranks, or groups, of one update,
					 * then their GPUs before it */
	int *mapped_inv;		/* rank of each GPU of sigma, or -1 */
	int inv_cap, inv_n, inv_ok;	/* GPUs held, filled; sigma
					 * one-to-one into them */
};

static void grid_clear(struct grid_entry *e);

struct pipette_timer *pipette_timer_create(void)
{
	struct pipette_timer *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->sched = pipette_sched_create();
	t->memo = pipette_sched_memo_create();
	if (!t->sched || !t->memo) {
		pipette_sched_destroy(t->sched);
		pipette_sched_memo_destroy(t->memo);
		free(t);
		return NULL;
	}
	return t;
}

void pipette_timer_destroy(struct pipette_timer *t)
{
	if (!t)
		return;
	pipette_sched_destroy(t->sched);
	pipette_sched_memo_destroy(t->memo);
	free(t->intra);
	for (int i = 0; i < SHAPE_CACHE; i++)
		free(t->shapes[i].g);
	for (int i = 0; i < P2P_CACHE; i++) {
		free(t->p2ps[i].fwd);
		free(t->p2ps[i].bwd);
	}
	free(t->t_f);
	free(t->t_b);
	free(t->t_w);
	free(t->comm_f);
	free(t->comm_b);
	free(t->inflight);
	free(t->dp_rs);
	free(t->dp_win);
	free(t->ranks);
	free(t->scratch);
	pipette_timer_cache_links(t, NULL);
	grid_clear(&t->mapped);
	free(t->mapped_sigma);
	free(t->moved);
	free(t->mapped_inv);
	free(t);
}

static int reserve(struct pipette_timer *t, int stages, int ranks)
{
	if (stages > t->cap_stages) {
		double **arrs[] = { &t->t_f, &t->t_b, &t->t_w, &t->comm_f, &t->comm_b,
				    &t->inflight, &t->dp_rs, &t->dp_win };
		size_t i;

		for (i = 0; i < sizeof(arrs) / sizeof(arrs[0]); i++) {
			double *p = realloc(*arrs[i], (size_t)stages * sizeof(double));
			if (!p)
				return -1;
			*arrs[i] = p;
		}
		t->cap_stages = stages;
	}
	if (ranks > t->cap_ranks) {
		int *p = realloc(t->ranks, (size_t)ranks * sizeof(int));
		if (!p)
			return -1;
		t->ranks = p;
		p = realloc(t->scratch, (size_t)ranks * sizeof(int));
		if (!p)
			return -1;
		t->scratch = p;
		t->cap_ranks = ranks;
	}
	return 0;
}

const double *pipette_timer_inflight(const struct pipette_timer *t)
{
	return t->inflight;
}

const struct pipette_sched *pipette_timer_sched(const struct pipette_timer *t)
{
	return t->sched;
}

static void grid_clear(struct grid_entry *e)
{
	int k;

	for (k = 0; k < N_KINDS; k++) {
		free(e->groups[k]);
		free(e->worst[k]);
		free(e->gfront[k]);
		free(e->gfront_n[k]);
	}
	free(e->p2p);
	free(e->front);
	free(e->front_n);
	free(e->row_first);
	free(e->pworst);
	for (k = 0; k < N_KINDS; k++)
		free(e->rings[k]);
	memset(e, 0, sizeof(*e));
}

void pipette_timer_cache_links(struct pipette_timer *t, const struct pipette_cluster *cl)
{
	int i;

	if (t->grids)
		for (i = 0; i < GRID_CACHE; i++)
			grid_clear(&t->grids[i]);
	free(t->grids);
	t->grids = NULL;
	t->cache_cl = cl;
}

/* ---- links of the groups a configuration forms ---------------------------- */

struct placement {
	const struct pipette_cluster *cl;
	const struct pipette_gpu_spec *gpu;
	const int *gpu_of_rank;
	int G;
	int shift;		/* log2 G when G is a power of two, else -1 */
};

/* A GPU's node and slot: a shift and a mask on the usual boards of 2^k
 * GPUs (a division costs tens of cycles in the search's inner loops). */
static inline int node_of(const struct placement *p, int gpu)
{
	return p->shift >= 0 ? gpu >> p->shift : gpu / p->G;
}

static inline int slot_of(const struct placement *p, int gpu)
{
	return p->shift >= 0 ? gpu & (p->G - 1) : gpu % p->G;
}

static int gpu_of(const struct placement *p, int rank)
{
	return p->gpu_of_rank ? p->gpu_of_rank[rank] : rank;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* A member's fastest and second-fastest link so far, given the next. */
static inline void ring_rank(double bw, double *best, double *second)
{
	if (bw > *best) {
		*second = *best;
		*best = bw;
	} else if (bw > *second) {
		*second = bw;
	}
}

/* Inside a node NCCL picks the ring order itself (it searches the
 * intra-node graph), so the members a group has on one node form the best
 * ring among them, not the one in rank order.  In a ring every member uses
 * two distinct neighbours, so no order beats, for each member, its
 * second-fastest link to the others: the minimum of that over the members
 * is the bound used here (exact when one GPU or one pair is slow).  A
 * link's figure is its slower direction.  gpus: n GPU indices. */
static double run_ring_bw_wide(const struct placement *p, const int *gpus, int n)
{
	double worst = HUGE_VAL;
	int i, j;

	for (i = 0; i < n && n > 1; i++) {
		double best = 0, second = 0;

		for (j = 0; j < n; j++) {
			double ab, ba;

			if (j == i)
				continue;
			ab = pipette_cluster_link(p->cl, gpus[i], gpus[j]).gbps;
			ba = pipette_cluster_link(p->cl, gpus[j], gpus[i]).gbps;
			ring_rank(ab < ba ? ab : ba, &best, &second);
		}
		if (n == 2)
			second = best;	/* two members: one link, both ways */
		if (second < worst)
			worst = second;
	}
	return worst;
}

/* The same, each pair's links read once (n <= PIPETTE_MAX_GPUS; more
 * members on a node only where sigma is not one-to-one: the scan above). */
static double run_ring_bw(const struct placement *p, const int *gpus, int n)
{
	double worst = HUGE_VAL, best[PIPETTE_MAX_GPUS], second[PIPETTE_MAX_GPUS];
	int i, j;

	if (n < 2 || n > PIPETTE_MAX_GPUS)
		return n < 2 ? worst : run_ring_bw_wide(p, gpus, n);
	for (i = 0; i < n; i++)
		best[i] = second[i] = 0;
	/* each pair's links read once, for both members, in the order the
	 * scan member by member takes them (member i meets j in j's order) */
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++) {
			double ij = pipette_cluster_link(p->cl, gpus[i], gpus[j]).gbps;
			double ji = pipette_cluster_link(p->cl, gpus[j], gpus[i]).gbps;

			ring_rank(ij < ji ? ij : ji, &best[i], &second[i]);
			ring_rank(ji < ij ? ji : ij, &best[j], &second[j]);
		}
	for (i = 0; i < n; i++) {
		if (n == 2)
			second[i] = best[i];	/* two members: one link, both ways */
		if (second[i] < worst)
			worst = second[i];
	}
	return worst;
}

/* The bound of one node's members (gpus, n of them, on one node), from the
 * timer's memo when it has it: the figure depends only on the node and the
 * set of its slots, which many groups and placements share.  Two members
 * are read directly (their two links: less than a look-up). */
static double node_ring_bw(struct pipette_timer *t, const struct placement *p,
			   const int *gpus, int n)
{
	unsigned long version = pipette_cluster_version(p->cl);
	int node = node_of(p, gpus[0]), nodes = pipette_cluster_node_count(p->cl), i;
	uint64_t mask = 0;
	struct intra_line *l;

	if (n <= 2 || p->G > 64)
		return run_ring_bw(p, gpus, n);
	if (nodes > t->intra_n) {
		l = realloc(t->intra, (size_t)nodes * sizeof(*l));
		if (!l)
			return run_ring_bw(p, gpus, n);
		memset(l + t->intra_n, 0, (size_t)(nodes - t->intra_n) * sizeof(*l));
		t->intra = l;
		t->intra_n = nodes;
	}
	for (i = 0; i < n; i++)
		mask |= 1ULL << (slot_of(p, gpus[i]));
	l = &t->intra[node];
	if (l->version != version)
		memset(l, 0, sizeof(*l));
	l->version = version;
	for (i = 0; i < INTRA_WAYS; i++)
		if (l->mask[i] == mask)
			return l->bw[i];
	i = l->next;
	l->next = (i + 1) % INTRA_WAYS;
	l->mask[i] = mask;
	l->bw[i] = run_ring_bw(p, gpus, n);
	return l->bw[i];
}

static double intra_ring_bw(struct pipette_timer *t, const struct placement *p, int *gpus,
			    int n)
{
	double worst = HUGE_VAL;
	uint64_t seen[PIPETTE_BW_MAX_NODES / 64];
	int i, start, grouped = 1, first = node_of(p, gpus[0]);

	/* All members on one node (TP and CP groups, mostly): one run. */
	for (i = 1; i < n && node_of(p, gpus[i]) == first; i++)
		;
	if (i == n)
		return n > 1 ? node_ring_bw(t, p, gpus, n) : HUGE_VAL;
	/* Members of one node usually sit together already; sort only when a
	 * node's members are split into several runs. */
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < n && grouped; i++) {
		int node = node_of(p, gpus[i]);

		if (i > 0 && node == node_of(p, gpus[i - 1]))
			continue;
		if (node >= PIPETTE_BW_MAX_NODES || (seen[node / 64] >> (node % 64) & 1))
			grouped = 0;
		else
			seen[node / 64] |= 1ULL << (node % 64);
	}
	if (!grouped)
		qsort(gpus, (size_t)n, sizeof(int), cmp_int);
	for (start = 0; start < n; start = i) {
		int node = node_of(p, gpus[start]);

		for (i = start; i < n && node_of(p, gpus[i]) == node; i++)
			;
		if (i - start > 1)
			worst = fmin(worst, node_ring_bw(t, p, gpus + start, i - start));
	}
	return worst;
}

/* Ring over `ranks` (n entries): between nodes in rank order (the order
 * Megatron's groups and NCCL's inter-node rings follow), inside each node
 * the best ring of its members (intra_ring_bw). */
static void ring_links(struct pipette_timer *t, const struct placement *p, const int *ranks,
		       int n, int *scratch, struct group_links *g)
{
	int i, first_node = -1, nodes = 0, same_first = 0, have_intra = 0;

	memset(g, 0, sizeof(*g));
	g->n = n;
	g->bw = g->intra_bw = g->inter_bw = HUGE_VAL;
	if (n <= 1)
		return;
	for (i = 0; i < n; i++) {
		int a = gpu_of(p, ranks[i]), b = gpu_of(p, ranks[(i + 1) % n]);
		struct pipette_link l = pipette_cluster_link(p->cl, a, b);
		int na = node_of(p, a), nb = node_of(p, b);

		scratch[i] = a;
		if (l.lat_us > g->lat)
			g->lat = l.lat_us;
		if (na == nb) {
			have_intra = 1;
			if (l.lat_us > g->intra_lat)
				g->intra_lat = l.lat_us;
		} else {
			if (l.gbps < g->inter_bw)
				g->inter_bw = l.gbps;
			if (l.lat_us > g->inter_lat)
				g->inter_lat = l.lat_us;
		}
		if (first_node < 0)
			first_node = na;
		if (na == first_node)
			same_first++;
		if (i == 0 || na != node_of(p, gpu_of(p, ranks[i - 1])))
			nodes++;
	}
	if (have_intra)
		g->intra_bw = intra_ring_bw(t, p, scratch, n);
	g->bw = g->intra_bw < g->inter_bw ? g->intra_bw : g->inter_bw;
	if (nodes > 1 && node_of(p, gpu_of(p, ranks[0])) == node_of(p, gpu_of(p, ranks[n - 1])))
		nodes--;	/* the ring closed inside the first node's run */
	g->nodes = nodes > 0 ? nodes : 1;
	g->per_node = same_first;
	if (g->nodes * g->per_node != n)	/* uneven spread: no hierarchy */
		g->nodes = 1;
	if (g->intra_bw == HUGE_VAL)
		g->intra_bw = g->bw;
	if (g->inter_bw == HUGE_VAL)
		g->inter_bw = g->bw;
}

/* Groups of Megatron's rank grids (RankGenerator, default order
 * "tp-cp-ep-dp-pp", megatron/core/parallel_state.py of NVIDIA/Megatron-LM
 * @d98e8a64dd): dense
 * r = tp + TP*(cp + CP*(dp + DP*pp)); expert r = etp + ETP*(ep + EP*(edp +
 * EDP*pp)) over the same ranks.  torchtitan's device mesh (pp,
 * dp_replicate, dp_shard, cp, tp), tp fastest (tests/data/stacks/
 * torchtitan.md §2), is the same grid with dp = dp_shard + DS*dp_replicate:
 * an FSDP shard group (dp_shard x cp) is a run of DS*CP ranks at stride
 * TP, its replicas stride TP*CP*DS apart. */
enum group_kind { G_TP, G_CP, G_DPCP, G_EP, G_SHARD, G_REPL };

/* A kind's groups in a stage: `size` ranks, `stride` apart. */
static void group_shape(const struct pipette_config *c, enum group_kind kind, int *size,
			int *stride)
{
	switch (kind) {
	case G_TP: *size = c->tp; *stride = 1; break;
	case G_CP: *size = c->cp; *stride = c->tp; break;
	case G_DPCP: *size = c->cp * c->dp; *stride = c->tp; break;
	case G_SHARD: *size = c->cp * c->dp_shard; *stride = c->tp; break;
	case G_REPL: *size = c->dp / c->dp_shard; *stride = c->tp * c->cp * c->dp_shard; break;
	default: *size = c->ep; *stride = c->etp; break;	/* expert grid */
	}
}

/* Links of group i of a kind in stage s: the ranks whose index along the
 * kind varies, all other coordinates fixed.  With stride st and size n the
 * members of group i start at (i % st) + (i / st) * st * n. */
static void group_links_of(struct pipette_timer *t, const struct placement *p,
			   const struct pipette_config *c, int s, int size, int stride,
			   int i, struct group_links *g)
{
	int start = c->tp * c->cp * c->dp * s + (i % stride) + (i / stride) * stride * size;
	int j;

	for (j = 0; j < size; j++)
		t->ranks[j] = start + j * stride;
	ring_links(t, p, t->ranks, size, t->scratch, g);
}

/* Links of global group gi of shape (size, stride) under the default
 * placement. */
static void global_group(struct pipette_timer *t, const struct placement *p, int size,
			 int stride, int gi, struct group_links *g)
{
	int start = (gi / stride) * stride * size + gi % stride, j;

	for (j = 0; j < size; j++)
		t->ranks[j] = start + j * stride;
	ring_links(t, p, t->ranks, size, t->scratch, g);
}

/* The first `need` global groups of a shape, from the shape cache (built
 * as far as needed); NULL when out of memory. */
static const struct group_links *shape_groups(struct pipette_timer *t,
					      const struct placement *p, int size,
					      int stride, int need)
{
	unsigned long stamp = pipette_cluster_version(p->cl);
	struct shape_entry *e = NULL;
	int i, victim = 0;

	for (i = 0; i < SHAPE_CACHE && !e; i++) {
		struct shape_entry *x = &t->shapes[i];

		if (x->stamp == stamp && x->size == size && x->stride == stride)
			e = x;
		else if (x->used < t->shapes[victim].used)
			victim = i;
	}
	if (!e) {
		e = &t->shapes[victim];
		e->stamp = stamp;
		e->size = size;
		e->stride = stride;
		e->n = 0;
	}
	e->used = ++t->clock;
	if (need > e->cap) {
		struct group_links *g = realloc(e->g, (size_t)need * sizeof(*g));

		if (!g) {
			e->stamp = 0;
			return NULL;
		}
		e->g = g;
		e->cap = need;
	}
	for (; e->n < need; e->n++)
		global_group(t, p, size, stride, e->n, &e->g[e->n]);
	return e->g;
}

/* ---- large rings of a mapped placement, edge by edge ---------------------- */

/* A mapping search moves a few nodes at a time, and every DP ring a moved
 * rank is in (1,024-2,048 members at 2048 nodes) was read whole again: 45%
 * of a 2048-node plan (perf, tests/bench/bench_plan.c's case).  A ring of
 * RING_TREE_MIN members or more keeps what ring_links reads, per member j,
 * in a tree: leaf j holds edge j -> j+1 (mod n) and, when j is the member
 * of its node on the lowest slot, the bound of that node's members
 * (node_ring_bw); each inner node the max, min and counts of its two
 * children, which are what ring_links takes over the ring, in any order.
 * A move re-reads the two edges of each moved member and the nodes it left
 * and joined, and the ring's figures come from the root (ring_figures).
 * There the mapping's estimates took 1.41 G instructions against 4.66 G,
 * the plan 5.59 G against 8.84 G (callgrind, the same plan byte for
 * byte).  Smaller rings are read whole: up to a few nodes' members, a
 * handful of links (the 64 of 8 nodes of 8 GPUs); the bound is a choice,
 * not measured finer, as the rings this is for have 1,024 or more. */
#define RING_TREE_MIN 64

struct ring_node {
	double lat, intra_lat, inter_bw, inter_lat;	/* over the edges */
	double intra_min;	/* over the nodes' bounds */
	int n_intra, n_inter;	/* edges inside a node, between nodes */
};

static void ring_join(struct ring_node *x, const struct ring_node *a, const struct ring_node *b)
{
	x->lat = b->lat > a->lat ? b->lat : a->lat;
	x->intra_lat = b->intra_lat > a->intra_lat ? b->intra_lat : a->intra_lat;
	x->inter_lat = b->inter_lat > a->inter_lat ? b->inter_lat : a->inter_lat;
	x->inter_bw = b->inter_bw < a->inter_bw ? b->inter_bw : a->inter_bw;
	x->intra_min = fmin(a->intra_min, b->intra_min);
	x->n_intra = a->n_intra + b->n_intra;
	x->n_inter = a->n_inter + b->n_inter;
}

/* Leaf j of tree (n leaves at n..2n-1) changed: its ancestors again. */
static void ring_fix(struct ring_node *tree, int n, int j)
{
	int x;

	for (x = (n + j) / 2; x >= 1; x /= 2)
		ring_join(&tree[x], &tree[2 * x], &tree[2 * x + 1]);
}

/* A kind's regular grid: `groups` per stage of `size` ranks `stride`
 * apart in stages of per_stage ranks (group_links_of). */
struct ring_grid {
	int per_stage, size, stride, groups;
};

/* The group (stage-major index) of rank r, and r's place in it. */
static int ring_group_of(const struct ring_grid *rg, int r, int *pos)
{
	int q = r % rg->per_stage;

	if (pos)
		*pos = q / rg->stride % rg->size;
	return r / rg->per_stage * rg->groups + q % rg->stride +
	       q / (rg->stride * rg->size) * rg->stride;
}

/* The first rank of group gi (group_links_of). */
static int ring_start(const struct ring_grid *rg, int gi)
{
	int i = gi % rg->groups;

	return rg->per_stage * (gi / rg->groups) + i % rg->stride +
	       i / rg->stride * rg->stride * rg->size;
}

/* Edge j of group gi's tree read from the cluster under sigma; with fix,
 * its ancestors again where it changed. */
static void ring_edge(const struct placement *p, const struct ring_grid *rg, int start,
		      struct ring_node *tree, int j, int fix)
{
	int n = rg->size, a = gpu_of(p, start + j * rg->stride);
	int b = gpu_of(p, start + (j + 1) % n * rg->stride);
	struct pipette_link l = pipette_cluster_link(p->cl, a, b);
	struct ring_node *x = &tree[n + j], was = *x;

	x->lat = l.lat_us;
	x->intra_lat = x->inter_lat = 0;
	x->inter_bw = HUGE_VAL;
	x->n_intra = x->n_inter = 0;
	if (node_of(p, a) == node_of(p, b)) {
		x->intra_lat = l.lat_us;
		x->n_intra = 1;
	} else {
		x->inter_bw = l.gbps;
		x->inter_lat = l.lat_us;
		x->n_inter = 1;
	}
	if (fix && memcmp(&was, x, sizeof(was)))
		ring_fix(tree, n, j);
}

/* Group gi's members on `node` (t->mapped_inv): their GPUs in slot order
 * into gpus and places into pos; returns how many. */
static int ring_members(const struct pipette_timer *t, const struct placement *p,
			const struct ring_grid *rg, int gi, int node, int *gpus, int *pos)
{
	int s, m = 0;

	for (s = 0; s < p->G; s++) {
		int r = t->mapped_inv[node * p->G + s], j;

		if (r >= 0 && ring_group_of(rg, r, &j) == gi) {
			gpus[m] = node * p->G + s;
			pos[m++] = j;
		}
	}
	return m;
}

/* The node bounds of group gi's members on `node` into their leaves: the
 * bound (node_ring_bw) on the lowest slot's, HUGE_VAL on the others' (and
 * on a lone member's); with fix, their ancestors too. */
static void ring_node_set(struct pipette_timer *t, const struct placement *p,
			  const struct ring_grid *rg, int gi, int node, struct ring_node *tree,
			  int fix)
{
	int gpus[64], pos[64], m, k;
	double bw;

	if (p->G > 64)
		return;
	m = ring_members(t, p, rg, gi, node, gpus, pos);
	bw = m > 1 ? node_ring_bw(t, p, gpus, m) : HUGE_VAL;
	for (k = 0; k < m; k++) {
		double *x = &tree[rg->size + pos[k]].intra_min, v = k == 0 ? bw : HUGE_VAL;

		/* unchanged: its ancestors hold already */
		if (memcmp(x, &v, sizeof(v))) {
			*x = v;
			if (fix)
				ring_fix(tree, rg->size, pos[k]);
		}
	}
}

/* Group gi's tree read whole under sigma. */
static void ring_build(struct pipette_timer *t, const struct placement *p,
		       const struct ring_grid *rg, int gi, struct ring_node *tree)
{
	int n = rg->size, start = ring_start(rg, gi), j, x;

	for (j = 0; j < n; j++)
		ring_edge(p, rg, start, tree, j, 0);
	for (j = 0; j < n; j++) {
		int gpu = gpu_of(p, start + j * rg->stride), k, node = node_of(p, gpu);

		/* the lowest slot's member of each node sets the node's */
		for (k = 0; k < slot_of(p, gpu); k++) {
			int r = t->mapped_inv[node * p->G + k];

			if (r >= 0 && ring_group_of(rg, r, NULL) == gi)
				break;
		}
		if (k == slot_of(p, gpu))
			ring_node_set(t, p, rg, gi, node, tree, 0);
	}
	for (x = n - 1; x >= 1; x--)
		ring_join(&tree[x], &tree[2 * x], &tree[2 * x + 1]);
	tree[0].n_inter = 1;	/* built */
}

/* Group gi's links from its tree, as ring_links reads them. */
static void ring_figures(const struct pipette_timer *t, const struct placement *p,
			 const struct ring_grid *rg, int gi, const struct ring_node *tree,
			 struct group_links *g)
{
	const struct ring_node *root = &tree[1], *wrap = &tree[2 * rg->size - 1];
	int n = rg->size, gpus[64], pos[64], nodes = 1 + root->n_inter - wrap->n_inter;
	int first = gpu_of(p, ring_start(rg, gi));

	memset(g, 0, sizeof(*g));
	g->n = n;
	g->lat = root->lat;
	g->intra_lat = root->intra_lat;
	g->inter_lat = root->inter_lat;
	g->inter_bw = root->inter_bw;
	g->intra_bw = root->n_intra ? root->intra_min : HUGE_VAL;
	g->bw = g->intra_bw < g->inter_bw ? g->intra_bw : g->inter_bw;
	if (nodes > 1 && wrap->n_intra)
		nodes--;	/* the ring closed inside the first node's run */
	g->nodes = nodes;
	g->per_node = ring_members(t, p, rg, gi, node_of(p, first), gpus, pos);
	if (g->nodes * g->per_node != n)
		g->nodes = 1;
	if (g->intra_bw == HUGE_VAL)
		g->intra_bw = g->bw;
	if (g->inter_bw == HUGE_VAL)
		g->inter_bw = g->bw;
}

/* The groups idx[0..m) of a kind that the n moved ranks (GPUs before the
 * move in olds) are in, from their trees (ring_build where not kept yet);
 * -1 when out of memory (then read whole). */
static int ring_update(struct pipette_timer *t, const struct placement *p,
		       const struct pipette_config *c, struct grid_entry *e, int kind,
		       const struct ring_grid *rg, const int *ranks, const int *olds, int n,
		       const int *idx, int m)
{
	size_t stride = (size_t)2 * rg->size, all = (size_t)c->pp * rg->groups * stride;
	int k;

	if (!e->rings[kind] && !(e->rings[kind] = calloc(all, sizeof(struct ring_node))))
		return -1;
	for (k = 0; k < m; k++)
		if (!e->rings[kind][idx[k] * stride].n_inter)
			ring_build(t, p, rg, idx[k], e->rings[kind] + idx[k] * stride);
	for (k = 0; k < n; k++) {
		int j, gi = ring_group_of(rg, ranks[k], &j), start = ring_start(rg, gi);
		struct ring_node *tree = e->rings[kind] + gi * stride;
		int prev = (j + rg->size - 1) % rg->size;
		int from = node_of(p, olds[k]), to = node_of(p, gpu_of(p, ranks[k]));

		ring_edge(p, rg, start, tree, j, 1);
		ring_edge(p, rg, start, tree, prev, 1);
		if (from != to)
			ring_node_set(t, p, rg, gi, from, tree, 1);
		ring_node_set(t, p, rg, gi, to, tree, 1);
	}
	for (k = 0; k < m; k++)
		ring_figures(t, p, rg, idx[k], e->rings[kind] + idx[k] * stride,
			     &e->groups[kind][idx[k]]);
	return 0;
}

/* A mapped placement whose sigma moved more than this share of the ranks
 * since the last estimate is read afresh rather than updated.  Measured at
 * 2048 x 8 GPUs (tp 2 pp 8 dp 256 cp 4, the generated cache of
 * tests/bench/bench_plan.c), per estimate after reversing L nodes of the
 * order: updated 0.14, 0.27, 0.60 and 2.05 ms at L = 2, 64, 256, 1024;
 * read afresh 1.3-1.7 ms whatever L; the two cross near 30% of the
 * ranks. */
#define MAPPED_UPDATE_MAX 0.25
/* Ranks mapped_lookup compares at once. */
#define SIGMA_RUN 64

static int cmp_int(const void *a, const void *b);
static void worst_moved(struct stage_worst *w, int i, double tt);
static void p2p_row(const struct placement *p, struct pipette_link *row, int r, int pp,
			   int per_stage, int first, int n);

/* Sorts a[0..n) and drops repeats; returns the count left. */
static int sort_unique(int *a, int n)
{
	int k, m = 0;

	qsort(a, (size_t)n, sizeof(int), cmp_int);
	for (k = 0; k < n; k++)
		if (m == 0 || a[k] != a[m - 1])
			a[m++] = a[k];
	return m;
}

/* The 4 rows of e->p2p a rank of stage s sends or receives on: s -> s + 1
 * and s - 1 -> s, both ways. */
static void stage_rows(int s, int pp, int rows[4])
{
	rows[0] = s;
	rows[1] = (s + pp - 1) % pp;
	rows[2] = pp + s;
	rows[3] = pp + rows[1];
}

/* Whether the groups idx[0..m) of a kind were read from their trees
 * (ring_update): rings of RING_TREE_MIN or more on a regular grid, while
 * sigma is one-to-one (t->inv_ok) on nodes of at most 64 GPUs (the slot
 * masks of node_ring_bw).  Trees go once sigma is not one-to-one. */
static int ring_kept(struct pipette_timer *t, const struct placement *p,
		     const struct pipette_config *c, struct grid_entry *e, int kind, int size,
		     int stride, const int *ranks, int n, const int *idx, int m)
{
	struct ring_grid rg = { c->tp * c->cp * c->dp, size, stride, e->per_stage[kind] };

	if (!t->inv_ok || p->G > 64 || size < RING_TREE_MIN) {
		free(e->rings[kind]);
		e->rings[kind] = NULL;
		return 0;
	}
	return !ring_update(t, p, c, e, kind, &rg, ranks, t->moved + 2 * t->mapped_cap, n, idx,
			    m);
}

/* The groups and pipeline links of e that the n moved ranks belong to,
 * read again (the rest kept their GPUs, and so their links). */
static void mapped_update(struct pipette_timer *t, const struct placement *p,
			  const struct pipette_config *c, struct grid_entry *e, const int *ranks,
			  int n)
{
	int per_stage = c->tp * c->cp * c->dp, pp = c->pp, kind, k, r;
	int *idx = t->moved + t->mapped_cap;	/* scratch of n */

	for (kind = 0; kind < N_KINDS; kind++) {
		int size, stride, groups = e->per_stage[kind], m;

		if (!e->groups[kind])
			continue;
		group_shape(c, kind, &size, &stride);
		if (per_stage % (size * stride)) {	/* no regular grid: read it all */
			free(e->groups[kind]);
			e->groups[kind] = NULL;
			free(e->worst[kind]);
			e->worst[kind] = NULL;
			free(e->rings[kind]);
			e->rings[kind] = NULL;
			continue;
		}
		/* group i of stage s starts at i % stride + (i / stride) *
		 * stride * size (group_links_of) */
		for (k = 0; k < n; k++) {
			int q = ranks[k] % per_stage;

			idx[k] = ranks[k] / per_stage * groups + q % stride + q / (stride * size) * stride;
		}
		m = sort_unique(idx, n);
		if (!ring_kept(t, p, c, e, kind, size, stride, ranks, n, idx, m))
			for (k = 0; k < m; k++)
				group_links_of(t, p, c, idx[k] / groups, size, stride,
					       idx[k] % groups, &e->groups[kind][idx[k]]);
		for (k = 0; k < m; k++) {
			if (e->worst[kind] && e->worst[kind][idx[k] / groups].have) {
				struct stage_worst *w = &e->worst[kind][idx[k] / groups];

				worst_moved(w, idx[k] % groups,
					    coll_time(w->coll, &e->groups[kind][idx[k]], w->bytes));
			}
		}
	}
	if (!e->p2p)
		return;
	for (k = 0; k < n; k++) {
		int q = ranks[k] % per_stage, rows[4];

		stage_rows(ranks[k] / per_stage, pp, rows);
		for (r = 0; r < 4; r++) {
			struct pipette_link *l = e->p2p + (size_t)rows[r] * per_stage + q;

			p2p_row(p, e->p2p + (size_t)rows[r] * per_stage, rows[r], pp,
				       per_stage, q, 1);
			if (e->pworst && e->pworst[rows[r]].have)
				worst_moved(&e->pworst[rows[r]], q,
					    pipette_p2p_s(e->pworst[rows[r]].bytes, l->gbps,
							  l->lat_us));
		}
	}
}

/* t->mapped_inv, the rank on each of the cluster's GPUs (-1: none), read
 * afresh from sigma; t->inv_ok when sigma is one-to-one into them. */
static void inv_fill(struct pipette_timer *t, const struct placement *p, int world)
{
	int gpus = pipette_cluster_node_count(p->cl) * p->G, r;

	t->inv_ok = 0;
	if (gpus > t->inv_cap) {
		int *a = realloc(t->mapped_inv, (size_t)gpus * sizeof(int));

		if (!a)
			return;
		t->mapped_inv = a;
		t->inv_cap = gpus;
	}
	t->inv_n = gpus;
	memset(t->mapped_inv, 0xff, (size_t)gpus * sizeof(int));
	for (r = 0; r < world; r++) {
		int g = t->mapped_sigma[r];

		if (g < 0 || g >= gpus || t->mapped_inv[g] >= 0)
			return;
		t->mapped_inv[g] = r;
	}
	t->inv_ok = 1;
}

/* t->mapped_inv after the n ranks of t->moved moved (their old GPUs
 * after them, at 2 * mapped_cap): emptied, then filled again. */
static void inv_move(struct pipette_timer *t, int n)
{
	const int *olds = t->moved + 2 * t->mapped_cap;
	int k;

	if (!t->inv_ok)
		return;
	for (k = 0; k < n; k++)
		t->mapped_inv[olds[k]] = -1;
	for (k = 0; k < n; k++) {
		int g = t->mapped_sigma[t->moved[k]];

		if (g < 0 || g >= t->inv_n || t->mapped_inv[g] >= 0) {
			t->inv_ok = 0;
			return;
		}
		t->mapped_inv[g] = t->moved[k];
	}
}

/* The entry of a mapped placement: the last one's, updated where sigma
 * moved ranks (a mapping search's move changes a few nodes), else read
 * afresh as its figures are asked for; NULL when out of memory. */
static struct grid_entry *mapped_lookup(struct pipette_timer *t, const struct placement *p,
					const struct pipette_config *c, const int key[7])
{
	struct grid_entry *e = &t->mapped;
	unsigned long stamp = pipette_cluster_version(p->cl);
	int world = pipette_config_world(c), n = 0, r;

	if (e->key[0] && !memcmp(e->key, key, sizeof(e->key)) && t->mapped_stamp == stamp &&
	    t->mapped_world == world) {
		/* one estimate asks many times; sigma is compared once */
		if (t->mapped_seen == t->estimates)
			return e;
		t->mapped_seen = t->estimates;
		for (r = 0; r < world; r++) {
			/* a move changes a few nodes: runs of SIGMA_RUN equal
			 * ranks are passed by memcmp (a rank at a time was a
			 * tenth of a 4096-node estimate) */
			if (r % SIGMA_RUN == 0 && r + SIGMA_RUN <= world &&
			    !memcmp(t->mapped_sigma + r, p->gpu_of_rank + r,
				    SIGMA_RUN * sizeof(int))) {
				r += SIGMA_RUN - 1;
				continue;
			}
			if (t->mapped_sigma[r] != p->gpu_of_rank[r]) {
				if (n >= MAPPED_UPDATE_MAX * world)
					break;
				t->moved[2 * t->mapped_cap + n] = t->mapped_sigma[r];
				t->mapped_sigma[r] = p->gpu_of_rank[r];
				t->moved[n++] = r;
			}
		}
		if (r == world) {
			if (n) {
				inv_move(t, n);
				mapped_update(t, p, c, e, t->moved, n);
			}
			return e;
		}
	}
	grid_clear(e);
	if (world > t->mapped_cap) {
		int *a = realloc(t->mapped_sigma, (size_t)world * sizeof(int));
		/* moved ranks, as many indices of scratch, their old GPUs */
		int *b = a ? realloc(t->moved, (size_t)world * 3 * sizeof(int)) : NULL;

		if (a)
			t->mapped_sigma = a;
		if (!a || !b)
			return NULL;
		t->moved = b;
		t->mapped_cap = world;
	}
	memcpy(t->mapped_sigma, p->gpu_of_rank, (size_t)world * sizeof(int));
	inv_fill(t, p, world);
	memcpy(e->key, key, sizeof(e->key));
	t->mapped_seen = t->estimates;
	t->mapped_stamp = stamp;
	t->mapped_world = world;
	return e;
}

/* The cached grid of c: a mapped placement's (mapped_lookup), or the
 * default placement's when pipette_timer_cache_links named this cluster;
 * else NULL. */
static struct grid_entry *grid_lookup(struct pipette_timer *t, const struct placement *p,
				      const struct pipette_config *c)
{
	int key[7] = { c->tp, c->cp, c->dp, c->pp, c->ep, c->etp, c->dp_shard }, i, victim = 0;

	if (p->gpu_of_rank)
		return mapped_lookup(t, p, c, key);
	if (!t->cache_cl || t->cache_cl != p->cl)
		return NULL;
	if (!t->grids && !(t->grids = calloc(GRID_CACHE, sizeof(*t->grids))))
		return NULL;
	/* one estimate asks for its grid many times in a row */
	if (t->grids[t->last_grid].key[0] && !memcmp(t->grids[t->last_grid].key, key, sizeof(key)))
		return &t->grids[t->last_grid];
	for (i = 0; i < GRID_CACHE; i++) {
		if (t->grids[i].key[0] && !memcmp(t->grids[i].key, key, sizeof(key))) {
			t->grids[i].used = ++t->clock;
			t->last_grid = i;
			return &t->grids[i];
		}
		if (t->grids[i].used < t->grids[victim].used)
			victim = i;
	}
	grid_clear(&t->grids[victim]);
	memcpy(t->grids[victim].key, key, sizeof(key));
	t->grids[victim].used = ++t->clock;
	t->last_grid = victim;
	return &t->grids[victim];
}

/* Every group of a kind in e, a mapped placement's, read through sigma
 * (the default placement's stay in the shape cache: default_stage). */
static void groups_fill(struct pipette_timer *t, const struct placement *p,
			const struct pipette_config *c, struct grid_entry *e, int kind, int size,
			int stride, int groups)
{
	int s, i;

	e->groups[kind] = malloc((size_t)c->pp * groups * sizeof(*e->groups[kind]));
	if (!e->groups[kind])
		return;
	e->per_stage[kind] = groups;
	for (s = 0; s < c->pp; s++)
		for (i = 0; i < groups; i++)
			group_links_of(t, p, c, s, size, stride, i, &e->groups[kind][s * groups + i]);
}

/* A stage's worst-group record (or a row's worst-link record) after
 * group (link) i was read again and now takes tt at the record's bytes (a
 * mapped placement's update): the first that takes longest, as a scan of
 * all of them would find it, or forgotten when only a scan can tell. */
static void worst_moved(struct stage_worst *w, int i, double tt)
{
	if (!w->have)
		return;
	if (i == w->idx) {
		/* no slower: still the first to take longest; else any group
		 * may be now */
		if (tt >= w->tt)
			w->tt = tt;
		else
			w->have = 0;
	} else if (tt > w->tt || (tt == w->tt && i < w->idx)) {
		w->idx = i;
		w->tt = tt;
	}
}

/* Whether group a takes at least as long as group b for every message size
 * and collective (coll_time): as slow and as long on the flat ring, and on
 * the hierarchical form where b has one (the same split over nodes), or
 * none itself (then its time is the flat ring's, which b's minimum cannot
 * exceed).  The ring forms are sums of a latency term growing with the
 * latency and a bandwidth term falling with the bandwidth, each monotone
 * in IEEE arithmetic, rounding included; a minimum of two is too.  A
 * NaN figure dominates nothing and is dominated by nothing. */
static int group_dominates(const struct group_links *a, const struct group_links *b)
{
	int ha = a->nodes > 1 && a->per_node > 1, hb = b->nodes > 1 && b->per_node > 1;

	if (!(a->n == b->n && a->bw <= b->bw && a->lat >= b->lat))
		return 0;
	if (!ha)
		return 1;
	return hb && a->nodes == b->nodes && a->per_node == b->per_node &&
	       a->intra_bw <= b->intra_bw && a->intra_lat >= b->intra_lat &&
	       a->inter_bw <= b->inter_bw && a->inter_lat >= b->inter_lat;
}

/* A stage's groups that no earlier group dominates (group_dominates), at
 * most FRONT_MAX of them; past that the stage is scanned whole.  The
 * first group that takes longest is among them for every message size
 * (a group it dominates that came earlier would take as long and come
 * first), so a scan over them in order finds what a scan over all finds.
 * Under the default placement a stage's groups of a kind are mostly
 * alike: on the generated 2048-node cluster of tests/bench/bench_plan.c a
 * handful of a stage's 1,024 TP groups. */
#define FRONT_MAX 64
#define FRONT_UNSET (-2)
#define FRONT_NONE (-1)

static void group_front(const struct group_links *g, int n, int *out, int *out_n)
{
	int i, j, m = 0;

	for (i = 0; i < n; i++) {
		for (j = 0; j < m && !group_dominates(&g[out[j]], &g[i]); j++)
			;
		if (j < m)
			continue;
		if (m == FRONT_MAX) {
			*out_n = FRONT_NONE;
			return;
		}
		out[m++] = i;
	}
	*out_n = m;
}

/* The fronts of every stage's groups of a kind in e under the default
 * placement, from the shape cache's groups (all, pp * groups of them):
 * -1 when out of memory. */
static int default_fronts(struct grid_entry *e, int kind, int pp, int groups,
			  const struct group_links *all)
{
	int *n = malloc((size_t)2 * pp * sizeof(int));
	int *idx = malloc((size_t)pp * FRONT_MAX * sizeof(int)), s, k, total = 0;

	if (!n || !idx)
		goto fail;
	for (s = 0; s < pp; s++) {
		group_front(all + (size_t)s * groups, groups, idx + (size_t)s * FRONT_MAX, &n[s]);
		n[pp + s] = total;
		total += n[s] > 0 ? n[s] : 0;
	}
	if (!(e->gfront[kind] = malloc((size_t)(total ? total : 1) * sizeof(struct group_links))))
		goto fail;
	for (s = 0; s < pp; s++)
		for (k = 0; k < n[s]; k++)
			e->gfront[kind][n[pp + s] + k] =
				all[(size_t)s * groups + idx[(size_t)s * FRONT_MAX + k]];
	free(idx);
	e->gfront_n[kind] = n;
	e->per_stage[kind] = groups;
	return 0;
fail:
	free(n);
	free(idx);
	return -1;
}

/* Stage s's groups of a kind to scan in e under the default placement:
 * its front (built for every stage when first asked), or where it has
 * none all its groups in the shape cache; *n of them; NULL when out of
 * memory. */
static const struct group_links *default_stage(struct pipette_timer *t, const struct placement *p,
					       const struct pipette_config *c, struct grid_entry *e,
					       int kind, int size, int stride, int groups, int s,
					       int *n)
{
	const struct group_links *all = NULL;

	if (!e->gfront_n[kind] &&
	    (!(all = shape_groups(t, p, size, stride, c->pp * groups)) ||
	     default_fronts(e, kind, c->pp, groups, all)))
		return NULL;
	*n = e->gfront_n[kind][s];
	if (*n >= 0)
		return e->gfront[kind] + e->gfront_n[kind][c->pp + s];
	if (!all && !(all = shape_groups(t, p, size, stride, c->pp * groups)))
		return NULL;
	*n = groups;
	return all + (size_t)s * groups;
}

/* The slowest group of a kind in stage s, judged at `bytes`: the first
 * that takes longest.  Of a cached grid, from its record when the last
 * judgement was at the same bytes, else over the stage's front (default
 * placement) or all its groups. */
static void worst_group(struct pipette_timer *t, const struct placement *p,
			const struct pipette_config *c, int s, enum group_kind kind,
			enum coll coll, double bytes, struct group_links *worst)
{
	int per_stage = c->tp * c->cp * c->dp, size, stride, i, groups, n = 0, idx = -1;
	struct grid_entry *e = grid_lookup(t, p, c);
	const struct group_links *g0 = NULL;
	struct stage_worst *w = NULL;
	double worst_t = -1;

	group_shape(c, kind, &size, &stride);
	memset(worst, 0, sizeof(*worst));
	worst->n = size;
	worst->bw = 1;
	if (size <= 1)
		return;
	groups = per_stage / size;
	if (e && !p->gpu_of_rank) {
		g0 = default_stage(t, p, c, e, kind, size, stride, groups, s, &n);
	} else if (e) {
		if (!e->groups[kind])
			groups_fill(t, p, c, e, kind, size, stride, groups);
		if (e->groups[kind]) {
			g0 = e->groups[kind] + (size_t)s * groups;
			n = groups;
		}
	}
	if (!g0) {
		for (i = 0; i < groups; i++) {
			struct group_links g;
			double tt;

			group_links_of(t, p, c, s, size, stride, i, &g);
			tt = coll_time(coll, &g, bytes);
			if (tt > worst_t) {
				worst_t = tt;
				*worst = g;
			}
		}
		return;
	}
	if (!e->worst[kind])
		e->worst[kind] = calloc((size_t)c->pp, sizeof(struct stage_worst));
	if (e->worst[kind]) {
		w = &e->worst[kind][s];
		if (w->have && w->coll == coll && w->bytes == bytes) {
			*worst = p->gpu_of_rank ? g0[w->idx] : w->g;
			return;
		}
	}
	for (i = 0; i < n; i++) {
		double tt = coll_time(coll, &g0[i], bytes);

		if (tt > worst_t) {
			worst_t = tt;
			idx = i;
		}
	}
	if (idx >= 0)
		*worst = g0[idx];
	if (w) {
		w->have = idx >= 0;
		w->coll = coll;
		w->bytes = bytes;
		w->tt = worst_t;
		w->idx = idx;
		if (idx >= 0)
			w->g = g0[idx];
	}
}

/* The p2p_entry of stage size ps, filled over the whole cluster; NULL when
 * out of memory. */
static const struct p2p_entry *p2p_links(struct pipette_timer *t, const struct placement *p,
					 int ps)
{
	unsigned long stamp = pipette_cluster_version(p->cl);
	int i, victim = 0, n = pipette_cluster_node_count(p->cl) * p->G - ps, r;
	struct p2p_entry *e;

	for (i = 0; i < P2P_CACHE; i++) {
		e = &t->p2ps[i];
		if (e->stamp == stamp && e->ps == ps) {
			e->used = ++t->clock;
			return e;
		}
		if (e->used < t->p2ps[victim].used)
			victim = i;
	}
	e = &t->p2ps[victim];
	free(e->fwd);
	free(e->bwd);
	memset(e, 0, sizeof(*e));
	if (n <= 0)
		return NULL;
	e->fwd = malloc((size_t)n * sizeof(*e->fwd));
	e->bwd = malloc((size_t)n * sizeof(*e->bwd));
	if (!e->fwd || !e->bwd)
		return NULL;
	for (r = 0; r < n; r++) {
		e->fwd[r] = pipette_cluster_link(p->cl, r, r + ps);
		e->bwd[r] = pipette_cluster_link(p->cl, r + ps, r);
	}
	e->ps = ps;
	e->n = n;
	e->stamp = stamp;
	e->used = ++t->clock;
	return e;
}

/* Of a row of n links, those that can be the row's slowest transfer for
 * some message size, in the row's order: a link is left out when an
 * earlier one is at least as slow and as long (it is never the first
 * slowest) or when a later one is strictly slower or longer and no faster
 * or shorter (it is never the slowest).  The scan of worst_p2p over these
 * returns what it returns over the whole row; a row of a large cluster
 * has a handful.  Returns the count kept in out, or -1 past P2P_FRONT_MAX
 * of them (then the row is read whole). */
#define P2P_FRONT_MAX 256
static int p2p_front(const struct pipette_link *row, int n, struct pipette_link *out)
{
	int i, j, k, m = 0;

	for (i = 0; i < n; i++) {
		struct pipette_link l = row[i];

		for (j = 0; j < m; j++)
			if (out[j].gbps <= l.gbps && out[j].lat_us >= l.lat_us)
				break;
		if (j < m)
			continue;
		for (j = k = 0; j < m; j++)
			if (!(l.gbps <= out[j].gbps && l.lat_us >= out[j].lat_us))
				out[k++] = out[j];
		m = k;
		if (m == P2P_FRONT_MAX)
			return -1;
		out[m++] = l;
	}
	return m;
}

/* Links n.. of row r through the placement: row a of slot 0 is stage a ->
 * a + 1 (pp - 1 -> 0 at a = pp - 1), slot 1 the reverse. */
static void p2p_row(const struct placement *p, struct pipette_link *row, int r, int pp,
			   int per_stage, int first, int n)
{
	int a = r % pp, from = per_stage * a, to = per_stage * ((a + 1) % pp), k;

	for (k = first; k < first + n; k++)
		row[k] = r < pp ? pipette_cluster_link(p->cl, gpu_of(p, from + k), gpu_of(p, to + k))
				: pipette_cluster_link(p->cl, gpu_of(p, to + k), gpu_of(p, from + k));
}

/* Under the default placement, the fronts of the 2 pp rows (p2p_front),
 * from the cached stage-to-stage links of the whole cluster (the rows
 * pp - 1 -> 0 read here): -1 when out of memory. */
static int p2p_default(struct pipette_timer *t, const struct placement *p, struct grid_entry *e,
		       int pp, int per_stage)
{
	const struct p2p_entry *pe = p2p_links(t, p, per_stage);
	struct pipette_link *wrap = malloc((size_t)per_stage * sizeof(*wrap));
	struct pipette_link *out = malloc((size_t)2 * pp * P2P_FRONT_MAX * sizeof(*out));
	int *n = malloc((size_t)4 * pp * sizeof(int)), r, k, total = 0, rv = -1;

	e->row_first = malloc((size_t)2 * pp * sizeof(*e->row_first));
	if (!pe || !wrap || !out || !n || !e->row_first)
		goto out;
	for (r = 0; r < 2 * pp; r++) {
		const struct pipette_link *row = r % pp == pp - 1 ? wrap
			: (r < pp ? pe->fwd : pe->bwd) + (size_t)(r % pp) * per_stage;

		if (r % pp == pp - 1)
			p2p_row(p, wrap, r, pp, per_stage, 0, per_stage);
		e->row_first[r] = row[0];
		n[r] = p2p_front(row, per_stage, out + (size_t)r * P2P_FRONT_MAX);
		n[2 * pp + r] = total;
		total += n[r] > 0 ? n[r] : 0;
	}
	if (!(e->front = malloc((size_t)(total ? total : 1) * sizeof(*e->front))))
		goto out;
	for (r = 0; r < 2 * pp; r++)
		for (k = 0; k < n[r]; k++)
			e->front[n[2 * pp + r] + k] = out[(size_t)r * P2P_FRONT_MAX + k];
	e->front_n = n;
	n = NULL;
	rv = 0;
out:
	if (rv) {
		free(e->row_first);
		e->row_first = NULL;
	}
	free(wrap);
	free(out);
	free(n);
	return rv;
}

/* The 2 pp rows of e->p2p read through a mapped placement's sigma. */
static void p2p_fill(const struct placement *p, struct grid_entry *e, int pp, int per_stage)
{
	int r;

	e->p2p = malloc((size_t)2 * pp * per_stage * sizeof(struct pipette_link));
	if (!e->p2p)
		return;
	for (r = 0; r < 2 * pp; r++)
		p2p_row(p, e->p2p + (size_t)r * per_stage, r, pp, per_stage, 0, per_stage);
	e->pworst = calloc((size_t)2 * pp, sizeof(*e->pworst));
}

/* Row r's worst link at `bytes` from a mapped placement's record, or
 * scanned and recorded: the first that takes longest (a link no slower
 * and no longer than the worst so far cannot be worse). */
static struct pipette_link row_worst(struct grid_entry *e, int r, int per_stage, double bytes)
{
	const struct pipette_link *row = e->p2p + (size_t)r * per_stage;
	struct stage_worst *w = &e->pworst[r];
	struct pipette_link worst = { HUGE_VAL, 0 };
	double worst_t = -1;
	int i, idx = -1;

	if (bytes <= 0)		/* every time 0: the first */
		return row[0];
	if (w->have && w->bytes == bytes)
		return row[w->idx];
	for (i = 0; i < per_stage; i++) {
		double tt;

		if (row[i].gbps >= worst.gbps && row[i].lat_us <= worst.lat_us)
			continue;
		tt = pipette_p2p_s(bytes, row[i].gbps, row[i].lat_us);
		if (tt > worst_t) {
			worst_t = tt;
			worst = row[i];
			idx = i;
		}
	}
	w->have = idx >= 0;
	w->bytes = bytes;
	w->tt = worst_t;
	w->idx = idx;
	return worst;
}

/* Slowest of the parallel point-to-point links between stage s and s2. */
static struct pipette_link worst_p2p(struct pipette_timer *t, const struct placement *p,
				     const struct pipette_config *c, int s, int s2,
				     double bytes)
{
	int per_stage = c->tp * c->cp * c->dp, pp = c->pp, i, slot = -1, idx = 0;
	struct pipette_link worst = { HUGE_VAL, 0 };
	struct grid_entry *e = grid_lookup(t, p, c);
	double worst_t = -1;

	/* Cached pairs: slot 0 = s -> s+1 (mod pp), slot 1 = s+1 -> s. */
	if (e && pp > 1) {
		if (s2 == (s + 1) % pp)
			slot = 0, idx = s;
		else if (s == (s2 + 1) % pp)
			slot = 1, idx = s2;
		if (slot >= 0 && p->gpu_of_rank && !e->p2p)
			p2p_fill(p, e, pp, per_stage);
		else if (slot >= 0 && !p->gpu_of_rank && !e->front_n)
			p2p_default(t, p, e, pp, per_stage);
		if (!e->p2p && !e->front_n)
			slot = -1;
	}
	if (slot >= 0 && e->pworst)
		return row_worst(e, slot * pp + idx, per_stage, bytes);
	if (slot >= 0 && e->front_n) {
		int r = slot * pp + idx, at = e->front_n[2 * pp + r];

		if (bytes <= 0)		/* every time 0: the scan keeps the first */
			return e->row_first[r];
		for (i = at; i < at + e->front_n[r]; i++) {
			double tt = pipette_p2p_s(bytes, e->front[i].gbps, e->front[i].lat_us);

			if (tt > worst_t) {
				worst_t = tt;
				worst = e->front[i];
			}
		}
		if (e->front_n[r] >= 0)
			return worst;
		slot = -1;	/* a row without a front: read whole */
	}
	for (i = 0; i < per_stage; i++) {
		struct pipette_link l = slot >= 0
			? e->p2p[((size_t)slot * pp + idx) * per_stage + i]
			: pipette_cluster_link(p->cl, gpu_of(p, per_stage * s + i),
					       gpu_of(p, per_stage * s2 + i));
		double tt;

		/* a link no slower and no longer than the worst cannot be
		 * worse (the time grows with latency, falls with bandwidth):
		 * most pairs of a large cluster are alike */
		if (l.gbps >= worst.gbps && l.lat_us <= worst.lat_us)
			continue;
		tt = pipette_p2p_s(bytes, l.gbps, l.lat_us);
		if (tt > worst_t) {
			worst_t = tt;
			worst = l;
		}
	}
	return worst;
}

/* ---- compute -------------------------------------------------------------- */

/* Memory-bound elementwise work (norms, activations, dropout, residuals,
 * softmax without FlashAttention): each stored activation byte is written
 * in the forward pass and read back, and the backward pass touches twice
 * that (Calculon's memory time: calculon-ai/calculon @caa4b11
 * calculon/system.py:77-81).  HBM efficiency 0.9 for large transfers
 * (mem1 "MB_efficiency" of Calculon's systems/a100_80g.json: 0.90 from
 * 100 MB). */
#define ELEMENTWISE_PASSES 2.0
#define HBM_EFF 0.9
/* The optimizer step and gradient clipping, memory-bound over the local
 * shard, as the HBM traffic that prices them at HBM_EFF: on one H100 SXM
 * (3350 GB/s) torch's fused AdamW over fp32 parameters, gradients and
 * moments took 11.0 ps per parameter and clip_grad_norm_ (the norm, then
 * the scaling) 4.8 ps (tests/data/kernels/h100-sxm-step-costs.csv), i.e.
 * 11.0e-12 x 3350e9 x 0.9 = 33.2 and 14.5 bytes.  (Adam moves 28 by count:
 * read+write the master, m and v, read the gradient; clipping 12.) */
#define OPTIMIZER_BYTES_PER_PARAM 33.2
#define CLIP_BYTES_PER_PARAM 14.5

static double gemm_s(const struct pipette_gpu_spec *g, double flops)
{
	double gflop = flops * 1e-9, eff;

	if (flops <= 0)
		return 0;
	eff = g->gemm_eff_max * gflop / (gflop + g->gemm_half_gflop);
	return flops / (g->peak_tflops * 1e12 * eff);
}

/* The dtype of a layer's linear GEMMs: its precision recipe's
 * (knobs.h), BF16 for the layers the recipe keeps in BF16. */
static enum pipette_gemm_dtype lin_dtype(const struct pipette_model *m,
					 const struct pipette_config *c, int layer)
{
	return pipette_config_layer_lowp(m, c, layer)
	       ? pipette_precision_facts(c->precision)->gemm : PIPETTE_GEMM_BF16;
}

/* A dtype's dense peak on GPU g (0: no tensor cores for it). */
static double dtype_peak(const struct pipette_gpu_spec *g, enum pipette_gemm_dtype dt)
{
	switch (dt) {
	case PIPETTE_GEMM_BF16:
		return g->peak_tflops;
	case PIPETTE_GEMM_NVFP4:
		return g->fp4_tflops;
	default:
		return g->fp8_tflops;
	}
}

/* What multiplies a measured kernel's rate in a step: the share a step
 * attains (the stack's, else the GPU table's) and the site's GPUs against
 * the table's (hardware.h kernel_scale). */
static double kernel_rate(const struct pipette_gpu_spec *g, const struct pipette_stack *st)
{
	return (st->kernel_share > 0 ? st->kernel_share : pipette_gpu_kernels(g)->step_share) *
	       (g->kernel_scale > 0 ? g->kernel_scale : 1.0);
}

/* On the efficiency curve, a dtype's own attained share of its peak
 * where the GPU table has one (hardware.h curve_share): the time's factor. */
static double curve_scale(const struct pipette_gpu_spec *g, enum pipette_gemm_dtype dt)
{
	return g->curve_share[dt] > 0 ? g->gemm_eff_max / g->curve_share[dt] : 1.0;
}

/* One GEMM of shape (m, n, k) in dtype dt.  On a GPU type with a measured
 * kernel table (inputs/kernels.h) it is the measured kernel's time over
 * the share of the kernels' rate a training step attains (the table's
 * step_share; stack.h's kernel_share overrides it).  Elsewhere the
 * efficiency curve of its FLOPs: BF16 on gemm_s; FP8 on a stack that
 * brings its own measured kernels (fp8_raw: DeepSeek-V3's, which the table
 * does not hold) at the FP8 peak times their share of it and the
 * framework's share of that (PIPETTE_FRAMEWORK_SHARE, as for BF16), plus
 * the fixed cost of a GEMM, gemm_half_gflop's worth at the BF16 rate
 * (launch, prologue, epilogue).  Communication kernels that hold
 * SMs (comm_sm_share) take their share of the throughput. */
static double shape_s(const struct pipette_gpu_spec *g, const struct pipette_stack *st,
		      enum pipette_gemm_dtype dt, double m, double n, double k)
{
	double sm = 1.0 - st->comm_sm_share, flops = 2.0 * m * n * k, fixed;
	const struct pipette_kernels *kt = pipette_gpu_kernels(g);

	if (!(m > 0 && n > 0 && k > 0))
		return 0;
	if (kt && (dt == PIPETTE_GEMM_BF16 || (kt->gemm[dt].tflops > 0 && st->fp8_raw <= 0)))
		return pipette_kernel_gemm_s(kt, dt, m, n, k) / (kernel_rate(g, st) * sm);
	if (dt == PIPETTE_GEMM_BF16 || !(dtype_peak(g, dt) > 0))
		return gemm_s(g, flops) * curve_scale(g, PIPETTE_GEMM_BF16) / sm;
	if (st->fp8_raw > 0) {
		fixed = g->gemm_half_gflop * 1e9 / (g->peak_tflops * 1e12 * g->gemm_eff_max);
		return (flops / (g->fp8_tflops * 1e12 * st->fp8_raw * PIPETTE_FRAMEWORK_SHARE) +
			fixed) / sm;
	}
	/* No measured kernels of this dtype: the BF16 curve at the dtype's
	 * peak, the same kernel run faster (its fixed cost, half_gflop's
	 * worth at the BF16 rate, stays) */
	return gemm_s(g, flops * g->peak_tflops / dtype_peak(g, dt)) * g->peak_tflops /
	       dtype_peak(g, dt) * curve_scale(g, dt) / sm;
}

/* The linear layers of one transformer layer: the GPU, the stack and the
 * layer's GEMM dtype. */
struct lin {
	const struct pipette_gpu_spec *g;
	const struct pipette_stack *st;
	enum pipette_gemm_dtype dt;
};

/* A linear layer's forward GEMM, tokens x n outputs from k inputs. */
static double lin_s(const struct lin *L, double tokens, double n, double k)
{
	return shape_s(L->g, L->st, L->dt, tokens, n, k);
}

/* Its three GEMMs, added to acc: the forward (tokens, n, k), the data
 * gradient (tokens, k, n) and the weight gradient (k, n, tokens), the
 * shapes the kernel table was measured in. */
struct lin3 {
	double f, b, w;
};

static void lin3_add(const struct lin *L, double tokens, double n, double k, struct lin3 *acc)
{
	acc->f += shape_s(L->g, L->st, L->dt, tokens, n, k);
	acc->b += shape_s(L->g, L->st, L->dt, tokens, k, n);
	acc->w += shape_s(L->g, L->st, L->dt, k, n, tokens);
}

/* Whether the attention core runs the GPU type's measured fused kernel
 * (inputs/kernels.h: cuDNN's, which Transformer Engine and torch's SDPA
 * pick on Hopper): the GPU has a table, and the stack's kernel is as fast
 * as the GEMMs (attn_utilization 0) or is the one measured (attn_measured). */
static int attn_measured(const struct pipette_gpu_spec *g, const struct pipette_stack *st)
{
	const struct pipette_kernels *kt = pipette_gpu_kernels(g);

	return kt && kt->attn_fwd.tflops > 0 && kt->attn_bwd.tflops > 0 &&
	       (st->attn_utilization <= 0 || st->attn_measured);
}

/* The attention core, one pass over `rows` query rows (backward: dQ, dK,
 * dV with the scores recomputed, `flops` counted already): the measured
 * kernel, else the stack's own share of peak where its kernel is slower
 * than the GEMMs, else the GEMM curve. */
static double attn_s(const struct pipette_gpu_spec *g, const struct pipette_stack *st,
		     int backward, double flops, double rows)
{
	double sm = 1.0 - st->comm_sm_share;

	if (attn_measured(g, st))
		return pipette_kernel_attn_s(pipette_gpu_kernels(g), backward, st->sdpa_flash2, flops,
					     rows) /
		       (kernel_rate(g, st) * sm);
	if (st->attn_utilization > 0)
		return flops / (g->peak_tflops * 1e12 * st->attn_utilization);
	return gemm_s(g, flops) * curve_scale(g, PIPETTE_GEMM_BF16) / sm;
}

struct layer_times {
	double f, b, w;		/* compute, s */
	double attn_f;		/* attention-core forward, s (hides CP) */
	double tp_f, tp_b;	/* TP collectives, s */
	double cp_f, cp_b;	/* exposed CP exchanges */
	double ep_f, ep_b;	/* expert all-to-all */
};

static int flash_attention(const struct pipette_config *c)
{
	return c->attention == PIPETTE_ATTN_FLASH;
}

/* Permutation: the dispatcher gathers each routed token copy into its
 * expert's slot before the dispatch and scatters it back after the
 * combine, a read and a write of h bf16 values each (Megatron-Core
 * megatron/core/transformer/moe/moe_utils.py:344 permute and :497
 * unpermute, NVIDIA/Megatron-LM @d98e8a64).  The router's fp32 logits:
 * the score function reads them and writes the scores, top-k reads those,
 * and the T x E routing_probs are written back (moe_utils.py:766,
 * topk_routing_with_score_function): four passes over T x E. */
#define PERMUTE_PASSES 2.0
#define ROUTER_PASSES 4.0

/* The expected number of distinct nodes a token's topk experts sit on,
 * of `nodes` nodes holding the EP group's experts evenly, when the
 * router picks experts uniformly: nodes * (1 - (1 - 1/nodes)^topk);
 * node-limited routing (DeepSeek-V3 §2.1.2: at most route_nodes nodes)
 * caps it. */
static double distinct_nodes(const struct pipette_model *m, int nodes)
{
	double d;

	if (nodes <= 1)
		return 1.0;
	d = nodes * (1.0 - pow(1.0 - 1.0 / nodes, m->topk));
	if (m->route_group_topk > 0 && m->route_groups >= nodes)
		d = fmin(d, (double)m->route_group_topk * nodes / m->route_groups);
	return d;
}

/* One direction of the EP exchange (dispatch, or combine: the same
 * bytes back) for the busiest rank, whose `copies` routed token copies of
 * h values of eb bytes come from (or go to) the EP group's ranks evenly.  The
 * intra-node share moves over NVLink and the rest over the rank's NIC at
 * once; an EP group spanning nodes pays its slowest inter-node path
 * (group_links: the ring's slowest edges).  The all-to-all dispatcher
 * sends every copy; DeepEP sends a token once per destination node
 * (distinct_nodes) and fans it out over NVLink there (DeepEP's
 * internode kernels: tests/data/stacks/deepseek-v3.md §4). */
static double ep_exchange_s(const struct pipette_model *m, const struct pipette_config *c,
			    const struct group_links *g, double tokens, double copies, double eb)
{
	double h = eb / 2.0 * m->hidden, n = g->n, intra_b, inter_b, lat;

	if (g->n <= 1 || copies <= 0)
		return 0;
	lat = (n - 1) * g->lat * 1e-6;
	if (g->nodes <= 1 || g->per_node <= 1)
		return lat + 2.0 * h * copies * (n - 1) / n / (g->bw * 1e9);
	intra_b = 2.0 * h * copies * (g->per_node - 1) / n;
	if (c->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP)
		inter_b = 2.0 * h * tokens * (copies / (tokens * m->topk)) *
			  distinct_nodes(m, g->nodes) * (g->nodes - 1) / g->nodes;
	else
		inter_b = 2.0 * h * copies * (n - g->per_node) / n;
	return fmax(intra_b / (g->intra_bw * 1e9), inter_b / (g->inter_bw * 1e9)) + lat;
}

/* The MoE block's computation, forward: the local experts' GEMMs on the
 * busiest rank's routed tokens (pipette_moe_routed_factor: imbalance or
 * capacity) as one GEMM over all copies and a gap per further expert, the
 * shared experts and the router GEMM, and the memory-bound permutation and
 * routing. */
static double moe_compute(const struct pipette_model *m, const struct lin *L,
			  const struct pipette_config *c, double T, double mats)
{
	const struct pipette_gpu_spec *g = L->g;
	double h = m->hidden, t = c->tp, local = (double)m->experts / c->ep;
	double routed = T * pipette_moe_routed_factor(m, c);
	double f = 0, bw = g->hbm_gbps * 1e9 * HBM_EFF;

	f += (lin_s(L, routed, m->expert_ffn * (mats - 1) / c->etp, h) +
	      lin_s(L, routed, h, m->expert_ffn / c->etp)) * c->etp / t +
	     2 * (local - 1) * PIPETTE_EXPERT_GEMM_GAP_S / (1.0 - L->st->comm_sm_share);
	if (m->shared_ffn)
		f += lin_s(L, T, m->shared_ffn * (mats - 1) / t, h) +
		     lin_s(L, T, h, m->shared_ffn / t);
	f += shape_s(g, L->st, PIPETTE_GEMM_BF16, T, m->experts, h);	/* router, BF16 */
	f += (PERMUTE_PASSES * 2 * 2.0 * h * routed + ROUTER_PASSES * 4.0 * T * m->experts) / bw;
	return f;
}

/* What selective recomputation by module adds to a layer's backward: the
 * forward of each recomputed module (memory.c drops what they save).
 * `mem` is the layer's elementwise time. */
static double modules_recompute(const struct pipette_model *m, const struct lin *L,
				const struct pipette_config *c, int moe, double T, double mats,
				double mem, double attn, double moe_f)
{
	const struct pipette_gpu_spec *g = L->g;
	unsigned mods = pipette_config_recompute_modules(c);
	double h = m->hidden, t = c->tp, r = 0, bw = g->hbm_gbps * 1e9 * HBM_EFF;

	if ((mods & PIPETTE_RM_CORE_ATTN) && !flash_attention(c))
		r += attn + mem * 0.5;	/* attention core and its softmax */
	if (mods & PIPETTE_RM_LAYERNORM)	/* the stand-alone norms (memory.c) */
		r += ((m->kv_lora_rank ? 1 : 0) + moe) * 2 * 2.0 * T * h / bw;
	if ((mods & PIPETTE_RM_MLA_UP_PROJ) && m->kv_lora_rank)
		r += lin_s(L, T, pipette_model_q_width(m) / t, m->q_lora_rank) +
		     lin_s(L, T, (double)m->heads * (m->qk_nope_dim + m->v_head_dim) / t,
			   m->kv_lora_rank);
	if (!moe && (mods & PIPETTE_RM_MLP))
		r += lin_s(L, T, m->ffn * (mats - 1) / t, h) + lin_s(L, T, h, m->ffn / t);
	if (moe && (mods & PIPETTE_RM_MOE))
		r += moe_f;	/* the block again (its exchange: layer_times) */
	else if (moe) {
		if ((mods & PIPETTE_RM_SHARED_EXPERTS) && m->shared_ffn)
			r += lin_s(L, T, m->shared_ffn * (mats - 1) / t, h) +
			     lin_s(L, T, h, m->shared_ffn / t);
		if (mods & PIPETTE_RM_MOE_ACT)	/* read 2 ffn, write ffn per copy */
			r += 2.0 * 3 * m->expert_ffn / c->etp * T *
			     pipette_moe_routed_factor(m, c) / bw;
	}
	return r;
}

/* The quantization passes of a low-precision layer (knobs.h facts: the
 * recipe's HBM traffic per bf16 element), per micro-batch: forward, each
 * linear layer's input; backward, the gradient of each one's output.
 * Weights are cast once per step, not per micro-batch (Transformer
 * Engine caches them from the first micro-batch, Linear.forward's
 * is_first_microbatch; with FP8 parameters they are stored quantized), so
 * they are left out.  The traffic runs at HBM speed times what a cast
 * kernel attains against a copy: torch.compile's tensorwise cast of 2^28
 * bf16 values took 3.42 ps per value on one H100 SXM, where its 5 bytes
 * (amax read, read, write) at the same run's copy rate (4 bytes in 1.42
 * ps) take 1.78 ps: 1.93 (tests/data/kernels/h100-sxm-step-costs.csv). */
#define CAST_OVERHEAD (3.42 / (5.0 * 1.42 / 4.0))

static void quantize_s(const struct pipette_model *m, const struct pipette_config *c,
		       const struct pipette_gpu_spec *g, int moe, double T, struct lin3 *out)
{
	const struct pipette_precision_facts *pf = pipette_precision_facts(c->precision);
	double h = m->hidden, t = c->tp, qw = pipette_model_q_width(m);
	double kvw = pipette_model_kv_width(m), in, grad, bytes;

	/* QKV and output projection (MLA's as its q/kv widths), then the MLP */
	in = T * (h + qw / t);
	grad = T * ((qw + 2 * kvw) / t + h);
	if (moe) {
		double copies = T * pipette_moe_routed_factor(m, c);

		in += copies * (h + m->expert_ffn / c->etp);
		grad += copies * (2 * m->expert_ffn / c->etp + h);
	} else {
		in += T * (h + m->ffn / t);
		grad += T * (2 * m->ffn / t + h);
	}
	bytes = g->fp4_tflops > 0 ? pf->cast : pf->cast_tn;
	out->f = in * bytes * CAST_OVERHEAD / (g->hbm_gbps * 1e9 * HBM_EFF);
	out->b = grad * bytes * CAST_OVERHEAD / (g->hbm_gbps * 1e9 * HBM_EFF);
}

/* A layer whose kernels take less than the host needs to issue them runs
 * at the host's pace (stack.h host_floor_s): its forward and backward
 * stretch alike to the floor. */
static void host_floor(const struct pipette_stack *st, const struct pipette_config *c,
		       struct layer_times *lt)
{
	double floor = st->host_floor_s[c->recompute], busy = lt->f + lt->b + lt->w, k;

	if (!(floor > busy && busy > 0))
		return;
	k = floor / busy;
	lt->f *= k;
	lt->b *= k;
	lt->w *= k;
}

/* The attention core of one layer, forward and backward (the input
 * gradients), for T tokens a rank holds.
 *
 * QK^T (query-key width) and AV (value width) are 2*T*s FLOPs per unit of
 * each (Narayanan et al.'s 4*T*s*h when both are h; MLA's differ);
 * FlashAttention skips the causal half.  BF16 in every stack (DeepSeek-V3
 * §3.3 keeps attention out of FP8).  The backward is two products per
 * forward one (dQ, dK and dV from dS, dP); FlashAttention's also
 * recomputes the scores, five products against the forward's two (Dao,
 * "FlashAttention-2", ICLR 2024, §3.1, the backward pass): 2.5x the FLOPs.
 * A measured kernel prices them at its own backward rate; elsewhere they
 * take 2.5x the forward's time.
 *
 * Context parallelism runs the core as a ring of cp steps, one kernel per
 * step of this rank's queries against the KV chunk it holds then (the
 * causal load balance gives each step 1/cp of the FLOPs), and merges each
 * step's partial result with the others'.  A measured kernel's cost per
 * query row (inputs/kernels.h) is counted once: it was fitted on causal
 * kernels, whose diagonal tiles it holds, and only the ring's first step
 * is causal.  Transformer Engine's ring (AttnFuncWithCPAndKVP2P,
 * transformer_engine/pytorch/attention/dot_product_attention/
 * context_parallel.py, NVIDIA/TransformerEngine@d0067d0d) issues the
 * forward's steps on two alternating streams (:1698-1700), so their fixed
 * costs overlap and the forward pays one; after them it corrects the
 * output into an fp32 sum, serially (:1981-2016: the first step's bf16
 * output read and written in fp32, each later one read with the sum read
 * and written, the sum cast back: 10 cp + 2 bytes per output element);
 * its backward runs the steps on one stream (:2460), each a kernel, and
 * adds each later step's dQ, dK and dV into bf16 sums (:2646-2698: 6
 * bytes per element).  PyTorch's ring (torch/distributed/tensor/
 * experimental/_attention.py, _templated_ring_attention and
 * _templated_ring_attention_backward, pytorch/pytorch@0123248a) runs
 * every step's kernel on one stream, merges each step's output in fp32
 * (_SDPAMerger: the bf16 output cast, then the sum read and written with
 * it, 18 bytes per element; the cast of the first and the final cast back,
 * 12) and accumulates every step's gradients into fp32 sums (10 bytes per
 * element, and the final casts, 6). */
#define TE_RING_OUT_BYTES(cp) (10.0 * (cp) + 2.0)
#define TE_RING_GRAD_BYTES(cp) (6.0 * ((cp) - 1))
#define TORCH_RING_OUT_BYTES(cp) (18.0 * ((cp) - 1) + 12.0)
#define TORCH_RING_GRAD_BYTES(cp) (10.0 * (cp) + 6.0)
void pipette_attention_times(const struct pipette_model *m, const struct pipette_gpu_spec *g,
			     const struct pipette_config *c, double T, double *fwd, double *bwd)
{
	const struct pipette_stack *st = pipette_config_stack(c);
	double t = c->tp, qw = pipette_model_q_width(m), kvw = pipette_model_kv_width(m);
	double avw = m->kv_lora_rank ? pipette_model_v_width(m) : qw;
	double flops = 2.0 * T * c->seq_len * (qw + avw) / t * (flash_attention(c) ? 0.5 : 1.0);
	double rows = T * m->heads / t, cp = c->cp, bw = g->hbm_gbps * 1e9 * HBM_EFF;
	double fsteps = cp > 1 && !st->cp_torch_ring ? 1 : cp;

	*fwd = fsteps * attn_s(g, st, 0, flops / fsteps, rows / fsteps);
	if (flash_attention(c) && attn_measured(g, st))
		*bwd = cp * attn_s(g, st, 1, 2.5 * flops / cp, rows / cp);
	else	/* each backward step 2.5x (2x) its forward kernel */
		*bwd = (flash_attention(c) ? 2.5 : 2.0) * cp * attn_s(g, st, 0, flops / cp, rows / cp);
	if (cp > 1) {
		*fwd += (st->cp_torch_ring ? TORCH_RING_OUT_BYTES(cp) : TE_RING_OUT_BYTES(cp)) *
			T * avw / t / bw;
		*bwd += (st->cp_torch_ring ? TORCH_RING_GRAD_BYTES(cp) : TE_RING_GRAD_BYTES(cp)) *
			T * (qw + 2 * kvw) / t / bw;
	}
}

static void layer_times(const struct pipette_model *m, const struct pipette_gpu_spec *g,
			const struct pipette_config *c, int layer,
			const struct group_links *tp, const struct group_links *cp,
			const struct group_links *ep, struct layer_times *lt)
{
	const struct pipette_stack *st = pipette_config_stack(c);
	double T = (double)c->micro_batch * c->seq_len / c->cp, h = m->hidden;
	double t = c->tp, qw = pipette_model_q_width(m), kvw = pipette_model_kv_width(m);
	double mats = m->ffn_kind == PIPETTE_FFN_SWIGLU ? 3.0 : 2.0;
	struct pipette_layer_params lp;
	struct lin3 gemm = { 0, 0, 0 };
	double attn, attn_b, act, mem, bytes_tp, cp_bytes, moe_f = 0, ep_one = 0;
	struct pipette_config none = *c;
	int moe = pipette_model_is_moe_layer(m, layer);
	const struct lin Lv = { g, st, lin_dtype(m, c, layer) }, *L = &Lv;
	struct lin3 cast = { 0, 0, 0 };

	memset(lt, 0, sizeof(*lt));
	pipette_model_layer_params(m, layer, &lp);
	if (L->dt != PIPETTE_GEMM_BF16)
		quantize_s(m, c, g, moe, T, &cast);
	/* Projections: QKV and output GEMMs sized by their own shapes. */
	if (m->kv_lora_rank) {		/* MLA's projections, as one of h inputs */
		lin3_add(L, T, lp.attn / t / h, h, &gemm);
	} else {
		lin3_add(L, T, (qw + 2 * kvw) / t, h, &gemm);
		lin3_add(L, T, h, qw / t, &gemm);
	}
	if (moe) {		/* the experts' three passes at the forward's shapes */
		moe_f = moe_compute(m, L, c, T, mats);
		gemm.f += moe_f;
		gemm.b += moe_f;
		gemm.w += moe_f;
	} else {
		lin3_add(L, T, m->ffn * (mats - 1) / t, h, &gemm);
		lin3_add(L, T, h, m->ffn / t, &gemm);
	}
	pipette_attention_times(m, g, c, T, &attn, &attn_b);
	/* Elementwise traffic, from the activations this layer stores. */
	none.recompute = PIPETTE_RECOMPUTE_NONE;
	act = pipette_memory_layer_activations(m, &none, layer);
	mem = ELEMENTWISE_PASSES * act / (g->hbm_gbps * 1e9 * HBM_EFF) * st->elementwise_factor;

	/* EP: dispatch and combine, each one exchange of the routed copies
	 * (tokens split over TP with SP). */
	if (moe && c->ep > 1) {
		double tok = T / (c->sequence_parallel ? t : 1.0);
		double copies = tok * fmin(pipette_moe_routed_factor(m, c),
					   c->moe.capacity_factor > 0 && !c->moe.pad
					   ? m->topk * c->moe.capacity_factor : HUGE_VAL);

		/* FP8 stacks dispatch in FP8 and combine in BF16
		 * (DeepSeek-V3 §3.3.4) */
		ep_one = ep_exchange_s(m, c, ep, tok, copies,
				       st->fp8_gemm && c->precision != PIPETTE_PREC_BF16 ? 1.0 : 2.0) +
			 ep_exchange_s(m, c, ep, tok, copies, 2.0);
		lt->ep_f = ep_one;
		lt->ep_b = ep_one;
	}

	lt->attn_f = attn;
	lt->f = gemm.f + attn + mem + cast.f;
	lt->b = gemm.b + attn_b + 2 * mem + cast.b;	/* input gradients */
	lt->w = gemm.w;				/* weight gradients */
	if (c->recompute == PIPETTE_RECOMPUTE_FULL) {
		lt->b += lt->f;
		lt->ep_b += lt->ep_f;
	} else if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE && st->selective_ops && !moe) {
		/* per-op SAC (memory.c, sac_ops_layer): the unsaved matmuls
		 * (wk, wo, w3) and the elementwise forward run again */
		lt->b += shape_s(g, st, PIPETTE_GEMM_BF16, T, kvw / t, h) +
			 shape_s(g, st, PIPETTE_GEMM_BF16, T, h, qw / t) +
			 (mats > 2 ? shape_s(g, st, PIPETTE_GEMM_BF16, T, m->ffn / t, h) : 0) + mem;
	} else if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE) {
		lt->b += modules_recompute(m, L, c, moe, T, mats, mem, attn, moe_f);
		if (moe && (pipette_config_recompute_modules(c) & PIPETTE_RM_MOE))
			lt->ep_b += ep_one;
	}

	host_floor(st, c, lt);

	/* TP: two all-reduces of the layer's activations forward and two
	 * backward (all-gather + reduce-scatter with SP: the same volume),
	 * of which the stack leaves tp_exposed unhidden (userbuffers
	 * pipeline them with the GEMMs: stack.h). */
	bytes_tp = 2.0 * T * h;
	lt->tp_f = 2 * coll_time(COLL_AR, tp, bytes_tp) * pipette_stack_tp_exposed(st, c);
	lt->tp_b = lt->tp_f;
	if (c->recompute == PIPETTE_RECOMPUTE_FULL)
		lt->tp_b += lt->tp_f;
	/* CP (ring attention): cp-1 exchanges of the local K and V chunk,
	 * twice as many backward, overlapped with the attention core. */
	if (c->cp > 1) {
		cp_bytes = 2.0 * 2.0 * T * kvw / t;
		lt->cp_f = fmax(0, (c->cp - 1) * pipette_p2p_s(cp_bytes, cp->bw, cp->lat) - attn);
		lt->cp_b = fmax(0, 2 * (c->cp - 1) * pipette_p2p_s(cp_bytes, cp->bw, cp->lat) -
				   2 * attn);
	}
}

double pipette_model_flops(const struct pipette_model *m, const struct pipette_config *c)
{
	double tokens = (double)c->global_batch * c->seq_len, total = 0;
	double mats = m->ffn_kind == PIPETTE_FFN_SWIGLU ? 3.0 : 2.0, h = m->hidden;
	double qw = pipette_model_q_width(m), kvw = pipette_model_kv_width(m);
	struct pipette_layer_params lp;
	int l;

	for (l = 0; l < m->layers; l++) {
		double proj;

		pipette_model_layer_params(m, l, &lp);
		proj = m->kv_lora_rank ? lp.attn : h * (2 * qw + 2 * kvw);
		total += 2 * proj;
		if (pipette_model_is_moe_layer(m, l))
			total += 2 * (mats * h * (m->topk * m->expert_ffn + m->shared_ffn) +
				      h * m->experts);
		else
			total += 2 * mats * h * m->ffn;
		total += 4.0 * c->seq_len * qw;	/* attention, full s^2 */
	}
	total += 2.0 * h * m->vocab;	/* logits */
	return 3.0 * tokens * total;	/* forward + backward (2x) */
}


/* ---- compression what-ifs (Optimus-CC, Song et al., ASPLOS'23) ------------ */

/* One n x m tensor at rank r: P (n x r) and Q (m x r) replace it.  The
 * compress/decompress work is 6*n*m*r FLOPs in skinny GEMMs (P = MQ,
 * Q = M^T P, M' = PQ^T: PowerSGD, Vogels et al., NeurIPS 2019, as
 * AIS-SNU/Optimus-CC @7f6437c megatron/mpu/reducers.py runs it), which
 * the GEMM efficiency curve prices as the small GEMMs they are. */
static double lowrank_elems(double n, double m, int r)
{
	double c = (double)r * (n + m);

	return c < n * m ? c : n * m;
}

static double lowrank_s(const struct pipette_gpu_spec *g, double n, double m, int r)
{
	return 3 * gemm_s(g, 2.0 * n * m * r);
}

/* PowerSGD over the 2-D gradients of stage s (QKV, output projection, MLP
 * matrices, local experts, embeddings); 1-D tensors stay uncompressed.
 * Returns the gradient elements the DP reduction moves and adds the
 * compression time and the number of compressed matrices. */
static double powersgd_stage(const struct pipette_model *m, const struct pipette_gpu_spec *g,
			     const struct pipette_config *c, int s, double dense_elems,
			     double *comp_s, int *matrices)
{
	int first = pipette_config_stage_first_layer(m, c, s);
	int n = pipette_config_stage_layers(m, c, s), l, r = c->compress.dp_rank;
	double h = m->hidden, t = c->tp, mats = m->ffn_kind == PIPETTE_FFN_SWIGLU ? 3 : 2;
	double qw = pipette_model_q_width(m), kvw = pipette_model_kv_width(m);
	double full = 0, sent = 0;
	double shapes[8][3];	/* n, m, count */
	int k, ns;

	*comp_s = 0;
	*matrices = 0;
	for (l = first; l < first + n; l++) {
		ns = 0;
		shapes[ns][0] = h; shapes[ns][1] = (qw + 2 * kvw) / t; shapes[ns++][2] = 1;
		shapes[ns][0] = qw / t; shapes[ns][1] = h; shapes[ns++][2] = 1;
		if (pipette_model_is_moe_layer(m, l)) {
			double fe = (double)m->expert_ffn / c->etp, local = m->experts / c->ep;

			shapes[ns][0] = h; shapes[ns][1] = (mats - 1) * fe; shapes[ns++][2] = local;
			shapes[ns][0] = fe; shapes[ns][1] = h; shapes[ns++][2] = local;
		} else {
			shapes[ns][0] = h; shapes[ns][1] = (mats - 1) * m->ffn / t; shapes[ns++][2] = 1;
			shapes[ns][0] = m->ffn / t; shapes[ns][1] = h; shapes[ns++][2] = 1;
		}
		if (l == first && (s == 0 || s == pipette_config_last_rank(c))) {
			shapes[ns][0] = (double)m->vocab / t; shapes[ns][1] = h; shapes[ns++][2] = 1;
		}
		for (k = 0; k < ns; k++) {
			double a = shapes[k][0], b = shapes[k][1], cnt = shapes[k][2];

			full += cnt * a * b;
			sent += cnt * lowrank_elems(a, b, r);
			*comp_s += cnt * lowrank_s(g, a, b, r);
			*matrices += (int)cnt;
		}
	}
	if (full > dense_elems)	/* expert matrices counted in full: cap */
		full = dense_elems;
	return dense_elems - full + sent;
}

/* ---- the estimate ---------------------------------------------------------- */

/* The point-to-point message between consecutive pipeline stages: one
 * micro-batch's activations forward (bf16, split over TP with sequence
 * parallelism), their gradient backward. */
struct pp_msgs {
	double fwd, bwd;	/* bytes */
	double cb_cost;		/* CB's compression time per backward send, s */
};

static void pp_messages(const struct pipette_model *m, const struct pipette_gpu_spec *gpu,
			const struct pipette_config *c, struct pp_msgs *pm)
{
	double T = (double)c->micro_batch * c->seq_len / c->cp, h = m->hidden;
	/* CB: the backward activation gradient, an n x h matrix (n tokens of
	 * this TP rank's scatter-gather share), sent as fp32 P and Q. */
	double cb_n = T / (c->sequence_parallel ? c->tp : 1);
	int cb_r = c->compress.pp_rank;

	pm->fwd = 2.0 * T * h / (c->sequence_parallel ? c->tp : 1);
	pm->bwd = cb_r ? fmin(pm->fwd, 4.0 * lowrank_elems(cb_n, h, cb_r)) : pm->fwd;
	pm->cb_cost = cb_r && pm->bwd < pm->fwd ? lowrank_s(gpu, cb_n, h, cb_r) : 0;
}

/* One pipeline stage's time per micro-batch, all its chunks together. */
struct stage_times {
	double f, b, w;		/* forward, input-gradient and weight-gradient passes */
	double tpc, cpc, epc;	/* the TP, CP and EP communication inside them */
	double lf, lb;		/* the transformer layers' share of f and b + w */
	double dpc;		/* FSDP collectives exposed inside f and b */
	double eph;		/* EP exchanges hidden by overlap */
};

/* EP overlap (Megatron-Core's combined 1F1B, DualPipe): a micro-batch's
 * forward runs beside another's backward, and each side's dispatch and
 * combine hide behind the other side's computation.  Only paired
 * operations overlap: the forwards before the first backward (the
 * schedule's warm-up, about its in-flight chunks) and the matching
 * backwards of the cool-down run alone.  Returns the share of a layer's
 * EP time left exposed. */
static double ep_exposed_share(const struct pipette_config *c, int s,
			       const struct layer_times *lt)
{
	int v = pipette_config_chunks(c);
	long mb = pipette_config_microbatches(c);
	double comm = lt->ep_f + lt->ep_b, comp = lt->f + lt->b + lt->w, warm, alone;

	if (!pipette_config_ep_overlap(c) || comm <= 0 || mb < 1)
		return 1.0;
	warm = pipette_schedule_inflight(c->schedule, c->pp, v, mb, s) * v - 1;
	alone = fmin(1.0, fmax(1.0, warm) / ((double)mb * v));
	return alone + (1.0 - alone) * fmax(0.0, comm - comp) / comm;
}

/* The layers of stage s: compute plus the TP, CP and EP collectives inside
 * each layer, on the stage's slowest group of each kind.  A stage's dense
 * layers cost the same, and so do its MoE layers: each kind is priced
 * once. */
static void stage_layers(struct pipette_timer *t, const struct placement *pl,
			 const struct pipette_model *m, const struct pipette_config *c, int s,
			 struct stage_times *st)
{
	double T = (double)c->micro_batch * c->seq_len / c->cp, h = m->hidden;
	struct group_links tp, cp, ep;
	/* [moe][recomputed][low precision]: with every-k-th-layer
	 * recomputation, or BF16 end layers of a low-precision recipe, a
	 * stage has layers of more than one kind */
	struct layer_times kinds[2][2][2];
	int have[2][2][2] = { { { 0 } } };
	int first = pipette_config_stage_first_layer(m, c, s);
	int n = pipette_config_stage_layers(m, c, s), l;

	memset(st, 0, sizeof(*st));
	worst_group(t, pl, c, s, G_TP, COLL_AR, 2.0 * T * h, &tp);
	worst_group(t, pl, c, s, G_CP, COLL_AG, 4.0 * T, &cp);
	worst_group(t, pl, c, s, G_EP, COLL_A2A, 2.0 * T * h, &ep);
	for (l = first; l < first + n; l++) {
		int is_moe = pipette_model_is_moe_layer(m, l);
		int rec = c->recompute != PIPETTE_RECOMPUTE_FULL ||
			  pipette_config_layer_recomputed(c, l - first);
		int lowp = pipette_config_layer_lowp(m, c, l);
		struct layer_times lt;

		if (!have[is_moe][rec][lowp]) {
			struct pipette_config kind = *c;

			if (!rec)
				kind.recompute = PIPETTE_RECOMPUTE_NONE;
			layer_times(m, pl->gpu, &kind, l, &tp, &cp, &ep, &kinds[is_moe][rec][lowp]);
			have[is_moe][rec][lowp] = 1;
		}
		lt = kinds[is_moe][rec][lowp];
		if (lt.ep_f + lt.ep_b > 0) {
			double keep = ep_exposed_share(c, s, &lt);

			st->eph += (lt.ep_f + lt.ep_b) * (1.0 - keep);
			lt.ep_f *= keep;
			lt.ep_b *= keep;
		}
		st->lf += lt.f + lt.tp_f + lt.cp_f + lt.ep_f;
		st->lb += lt.b + lt.tp_b + lt.cp_b + lt.ep_b + lt.w;
		st->f += lt.f + lt.tp_f + lt.cp_f + lt.ep_f;
		st->b += lt.b + lt.tp_b + lt.cp_b + lt.ep_b;
		st->w += lt.w;
		st->tpc += lt.tp_f + lt.tp_b;
		st->cpc += lt.cp_f + lt.cp_b;
		st->epc += lt.ep_f + lt.ep_b;
	}
}

/* Spread stage s's layer time over its chunks by their layer counts, into
 * the simulator's per-virtual-stage times (t->t_f, t_b, t_w); st's f, b
 * and w become the sums of what the chunks got.  The embedding lookup
 * (memory-bound, small) goes to the first virtual stage and the logits and
 * loss to the last one (on rank 0 for the V-shapes). */
static void stage_chunks(struct pipette_timer *t, const struct pipette_model *m,
			 const struct pipette_gpu_spec *gpu, const struct pipette_config *c,
			 int s, const struct pp_msgs *pm, struct stage_times *st)
{
	double T = (double)c->micro_batch * c->seq_len / c->cp, h = m->hidden;
	int p = c->pp, v = pipette_config_chunks(c), n = pipette_config_stage_layers(m, c, s), k;
	long mb = pipette_config_microbatches(c);
	const struct pipette_stack *stk = pipette_config_stack(c);
	double V = (double)m->vocab / c->tp;
	/* the output layer's three GEMMs, in BF16 in every recipe, and the
	 * loss's elementwise passes over the logits (stack.h loss_traffic) */
	double loss = stk->loss_traffic * T * V / (gpu->hbm_gbps * 1e9 * HBM_EFF);
	double logit_f = shape_s(gpu, stk, PIPETTE_GEMM_BF16, T, V, h) + loss / 3;
	double logit_b = shape_s(gpu, stk, PIPETTE_GEMM_BF16, T, h, V) + loss * 2 / 3;
	double logit_w = shape_s(gpu, stk, PIPETTE_GEMM_BF16, h, V, T);
	double embed = 2.0 * T * h / c->tp / (gpu->hbm_gbps * 1e9 * HBM_EFF);
	int fold = !pipette_schedule_splits_w(c->schedule);
	double fl = st->f, bl = st->b, wl = st->w;

	st->f = st->b = st->w = 0;
	for (k = 0; k < v; k++) {
		int vs = pipette_config_virtual_stage(c, s, k);
		double share = n ? (double)pipette_config_vstage_layers(m, c, vs) / n : 1.0 / v;
		double cf = fl * share, cb = bl * share, cw = wl * share;

		if (vs == 0)
			cf += embed;
		if (vs == p * v - 1) {
			cf += logit_f;
			cb += logit_b;
			cw += logit_w;
		}
		/* CB compresses every backward send but the first virtual
		 * stage's; epilogue-only, just the cooldown ones, about
		 * min(p - s, m) of the m micro-batches (Optimus-CC compresses
		 * the sends its 1F1B passes flush=True, the last steady one
		 * and the cooldown: megatron/schedules.py ~469-487, ~783-799
		 * of AIS-SNU/Optimus-CC @7f6437c). */
		if (pm->cb_cost > 0 && vs > 0)
			cb += pm->cb_cost * (c->compress.pp_epilogue_only
					     ? fmin((double)(p - s), (double)mb) / mb
					     : 1.0);
		/* Only the zero-bubble family (ZB-H1 and the V-shapes of Qi et
		 * al.) splits the backward; elsewhere W runs inside B. */
		if (fold) {
			cb += cw;
			cw = 0;
		}
		t->t_f[s * v + k] = cf;
		t->t_b[s * v + k] = cb;
		t->t_w[s * v + k] = cw;
		st->f += cf;
		st->b += cb;
		st->w += cw;
	}
}

/* Stage s's DP collectives (stage_dp): *rs the gradient reduction (a
 * reduce-scatter with the distributed optimizer, else an all-reduce),
 * *ag the distributed optimizer's parameter gather (0 without), *extra
 * what PowerSGD adds after the last backward (0 without). */
static void dp_colls(struct pipette_timer *t, const struct placement *pl,
		     const struct pipette_model *m, const struct pipette_config *c, int s,
		     const struct pipette_stage_memory *sm, double *rs, double *ag,
		     double *extra)
{
	double h = m->hidden, dense_p = sm->stage_params, grad_elems = dense_p;
	double comp_s = 0, gb = pipette_config_stack(c)->grad_bytes;
	int comp_mats = 0, p = c->pp;
	struct group_links dp;

	/* FE: the embedding gradient leaves the DP bucket and is reduced
	 * once over the first and last stages of all replicas. */
	if (c->compress.fused_embedding && m->tied_embeddings && p > 1 &&
	    (s == 0 || s == p - 1))
		grad_elems -= (double)m->vocab * h / c->tp;
	if (c->compress.dp_rank && (!c->compress.dp_stages || s < c->compress.dp_stages))
		grad_elems = powersgd_stage(m, pl->gpu, c, s, grad_elems, &comp_s, &comp_mats);
	worst_group(t, pl, c, s, G_DPCP, COLL_AR, gb * grad_elems, &dp);
	if (c->distributed_optimizer) {
		*ag = coll_time(COLL_AG, &dp, 2.0 * dense_p);
		*rs = coll_time(COLL_AG, &dp, gb * grad_elems);
	} else {
		*ag = 0;
		*rs = coll_time(COLL_AR, &dp, gb * grad_elems);
	}
	/* PowerSGD reduces P, orthogonalises, then reduces Q: two
	 * latency-bound collectives per matrix instead of one bucket, and
	 * the compression itself, all after the last backward. */
	*extra = comp_mats && dp.n > 1
		 ? comp_s + (2.0 * comp_mats - 1) * 2.0 * (dp.n - 1) * dp.lat * 1e-6 : 0;
}

/* DP gradient reduction of stage s over DP x CP (the stack's gradient
 * dtype, fp32 or bf16; reduce-
 * scatter + bf16 all-gather with the distributed optimizer).  It starts
 * with the last micro-batch's backward (--overlap-grad-reduce) and runs
 * past this stage's last op; the parameter all-gather of the distributed
 * optimizer hides behind the next iteration's first forward
 * (--overlap-param-gather).  Whether the reduction's tail is exposed
 * depends on when this stage finishes, known after the simulation: this
 * sets t->dp_rs[s], what runs after the last backward, and t->dp_win[s],
 * the backward window it starts in.  Returns the stage's whole DP time;
 * *exposed gets the part of the gather the first forward cannot hide. */
static double stage_dp(struct pipette_timer *t, const struct placement *pl,
		       const struct pipette_model *m, const struct pipette_config *c, int s,
		       const struct pipette_stage_memory *sm, const struct stage_times *st,
		       double *exposed)
{
	double dp_t, ag, extra;
	int overlap = pipette_config_stack(c)->dp_overlap;

	dp_colls(t, pl, m, c, s, sm, &t->dp_rs[s], &ag, &extra);
	if (c->distributed_optimizer) {
		dp_t = t->dp_rs[s] + ag;
		*exposed = overlap ? fmax(0, ag - st->f) : ag;
	} else {
		dp_t = t->dp_rs[s];
		*exposed = 0;
	}
	/* Without overlap the reduction waits for the last backward. */
	t->dp_win[s] = overlap ? st->b + st->w : 0;
	if (extra != 0) {
		dp_t += extra;
		t->dp_rs[s] += extra;
	}
	return dp_t;
}

/* FSDP's collectives on stage s (the stack's fsdp fact, a shard group
 * of N = dp_shard x cp > 1 ranks, R = dp / dp_shard replicas):
 *  - each layer's parameters all-gathered (gather_bytes) before its
 *    forward, and again before its backward when resharded after
 *    forward.  Under torch's pipelining a backward leaves the stage
 *    gathered for the next micro-batch (set_reshard_after_backward
 *    (False)), so only the first micro-batch's forward gathers, and
 *    resharding after forward costs one gather per backward;
 *  - each layer's gradient reduce-scattered (reduce_bytes) over the shard
 *    group and, with HSDP, the shard all-reduced over the R replicas:
 *    without a pipeline on every micro-batch when the stack syncs each
 *    one (else overlapped with the last backward); with one, after the
 *    stage's last backward (torch's REDUCE_GRAD), which runs past it:
 *    fc->tail, exposed as far as the stage's finish does not hide it;
 *  - prefetching issues layer i+1's gather while layer i computes, and
 *    the reduce of layer i runs while layer i-1's backward computes: per
 *    layer only what exceeds the neighbouring layer's compute is exposed,
 *    plus the first gather and the last reduce, which nothing hides; a
 *    backward gather issued only after the layer before it finished its
 *    backward (FSDP1's BACKWARD_POST) is exposed whole.
 * Sources: tests/data/stacks/torchtitan.md §3-4 (FSDP2 and torchtitan's
 * use of it), torch-schedules.md §2 (REDUCE_GRAD), composer-fsdp.md §3-4
 * (FSDP1); the ring times are coll_time's on the links the shard group
 * and its replicas really use. */
struct fsdp_cost {
	double f, b;		/* exposed per micro-batch, s */
	double once;		/* exposed once per iteration, s */
	double tail;		/* after the stage's last backward, s */
	double total;		/* all of it, exposed or not, per iteration */
};

static void stage_fsdp(struct pipette_timer *t, const struct placement *pl,
		       const struct pipette_config *c, int s, int n,
		       const struct pipette_stage_memory *sm, const struct stage_times *st,
		       struct fsdp_cost *fc)
{
	const struct pipette_stack *sk = pipette_config_stack(c);
	double N = pipette_config_shard_group(c), R = pipette_config_dp_replicate(c);
	double Pl = n > 0 ? sm->stage_params / n : sm->stage_params;
	double f_l = n > 0 ? st->lf / n : st->lf, b_l = n > 0 ? st->lb / n : st->lb;
	double ag, rs, ar = 0, red, agb, mb = (double)pipette_config_microbatches(c);
	double gb = pipette_stack_gather_bytes(sk, c->precision);
	int always = c->reshard == PIPETTE_RESHARD_ALWAYS, piped = c->pp > 1;
	int sync_mb = !piped && sk->sync_each_mb;
	struct group_links sh, rp;

	memset(fc, 0, sizeof(*fc));
	if (n < 1)
		n = 1;
	worst_group(t, pl, c, s, G_SHARD, COLL_AG, gb * Pl, &sh);
	ag = coll_time(COLL_AG, &sh, gb * Pl);
	rs = coll_time(COLL_AG, &sh, sk->reduce_bytes * Pl);
	if (R > 1) {
		worst_group(t, pl, c, s, G_REPL, COLL_AR, sk->reduce_bytes * Pl / N, &rp);
		ar = coll_time(COLL_AR, &rp, sk->reduce_bytes * Pl / N);
	}
	red = rs + ar;
	agb = always ? ag : 0;
	if (!piped)
		fc->f = n * fmax(0, ag - f_l) + ag;
	else
		fc->once += n * fmax(0, ag - f_l) + ag;
	if (always && !sk->prefetch_before_backward)	/* the gather waits, exposed */
		fc->b = n * (ag + fmax(0, (sync_mb ? red : 0) - b_l)) + (sync_mb ? red : 0);
	else
		fc->b = n * fmax(0, agb + (sync_mb ? red : 0) - b_l) + (sync_mb ? red : 0);
	if (piped)
		fc->tail = n * red;
	else if (!sync_mb)	/* the last micro-batch's backward also reduces */
		fc->once += n * (fmax(0, agb + red - b_l) - fmax(0, agb - b_l)) + red;
	fc->total = mb * n * ((piped ? 0 : ag) + agb + (sync_mb ? red : 0)) +
		    (piped ? n * ag : 0) + (sync_mb ? 0 : n * red);
}

/* CPU activation offloading (the stack's offload_layers, k of the stage's
 * n layers) for one micro-batch, as Transformer Engine schedules it by
 * default (NVIDIA/TransformerEngine @d0067d0d docs/features/
 * other_optimizations/cpu_offloading/cpu_offloading.rst:138-164): the
 * first k layers' activations are copied to the host, one layer after the
 * other, from when the layer saves them (its forward's start), and back in
 * reverse order for backward; at most n - k sets are on the GPU, so layer
 * j's forward waits until layer j - (n - k)'s copy is done, a reload waits
 * for the backward that frees its set (layer i's, for layer i + n - k),
 * and a layer's backward waits for its reload.  f and b are a layer's
 * forward and backward, x one layer's copy over the host link.  Returns
 * the time the forward and the backward take beyond n f and n b. */
static void offload_exposed(int n, int k, double f, double b, double x, double *xf, double *xb)
{
	double t = 0, start, r = 0, *done, *bend;
	int K = n - k, j;

	*xf = *xb = 0;
	if (k < 1 || K < 1)
		return;
	done = calloc((size_t)n + 1, sizeof(*done));
	bend = calloc((size_t)n + 2, sizeof(*bend));
	if (!done || !bend) {	/* no room to schedule: every copy exposed */
		free(done);
		free(bend);
		*xf = *xb = k * x;
		return;
	}
	for (j = 1; j <= n; j++) {		/* forward; done[i]: layer i on the host */
		start = t;
		if (j - K >= 1 && j - K <= k)
			start = fmax(start, done[j - K]);
		if (j <= k)
			done[j] = fmax(j > 1 ? done[j - 1] : 0, start) + x;
		t = start + f;
	}
	*xf = t - n * f;
	bend[n + 1] = t;
	for (j = n; j >= 1; j--) {		/* backward; r: the last reload done */
		start = bend[j + 1];
		if (j <= k) {
			/* layer j's reload: after the one before it, its own
			 * copy out and the backward that frees a set */
			r = fmax(fmax(j < k ? r : done[k], done[j]), bend[j + K]) + x;
			start = fmax(start, r);
		}
		bend[j] = start + b;
	}
	*xb = bend[1] - t - n * b;
	free(done);
	free(bend);
}

/* The optimizer step of a stage: memory-bound over its local share of the
 * optimizer state. */
static double optimizer_step_s(const struct pipette_gpu_spec *gpu, const struct pipette_config *c,
			       const struct pipette_stage_memory *sm)
{
	double opt_params = sm->optimizer_bytes / pipette_config_stack(c)->optim_bytes;

	return opt_params * (OPTIMIZER_BYTES_PER_PARAM + CLIP_BYTES_PER_PARAM) /
	       (gpu->hbm_gbps * 1e9 * HBM_EFF);
}

/* Point-to-point transfers between consecutive virtual stages (t->comm_f,
 * comm_b), each on the slowest of the parallel links between the two
 * ranks; the busiest stage's share goes to out->pp_comm_s. */
static void pp_transfers(struct pipette_timer *t, const struct placement *pl,
			 const struct pipette_config *c, const struct pp_msgs *pm, int busiest,
			 struct pipette_time *out)
{
	int p = c->pp, v = pipette_config_chunks(c), k;
	long mb = pipette_config_microbatches(c);

	for (k = 0; k + 1 < p * v; k++) {
		int ra, rb;
		struct pipette_link l;

		if (pipette_schedule_is_v(c->schedule)) {
			/* V-shape: chunk 0 runs 0..p-1, chunk 1 runs p-1..0 */
			ra = k < p ? k : 2 * p - 1 - k;
			rb = k + 1 < p ? k + 1 : 2 * p - 2 - k;
		} else {
			ra = k % p;
			rb = (k + 1) % p;
		}
		if (ra == rb) {
			t->comm_f[k] = t->comm_b[k] = 0;
			continue;
		}
		if (k >= p && !pipette_schedule_is_v(c->schedule)) {
			/* Interleaved: chunk boundary k links the same two
			 * stages, with the same messages, as k - p. */
			t->comm_f[k] = t->comm_f[k - p];
			t->comm_b[k] = t->comm_b[k - p];
		} else {
			l = worst_p2p(t, pl, c, ra, rb, pm->fwd);
			t->comm_f[k] = pipette_p2p_s(pm->fwd, l.gbps, l.lat_us);
			l = worst_p2p(t, pl, c, rb, ra, pm->bwd);
			t->comm_b[k] = pipette_p2p_s(pm->bwd, l.gbps, l.lat_us);
		}
		if (ra == busiest || rb == busiest)
			out->pp_comm_s += (t->comm_f[k] + t->comm_b[k]) * mb / 2;
	}
}

/* The pipeline's schedule input of the stage and link times set. */
static void sched_input(struct pipette_timer *t, const struct pipette_config *c,
			struct pipette_sched_input *in)
{
	int p = c->pp, v = pipette_config_chunks(c);

	memset(in, 0, sizeof(*in));
	in->kind = c->schedule;
	in->p = p;
	in->v = v;
	in->m = pipette_config_microbatches(c);
	in->t_f = t->t_f;
	in->t_b = t->t_b;
	in->t_w = t->t_w;
	in->comm_f = p * v > 1 ? t->comm_f : NULL;
	in->comm_b = p * v > 1 ? t->comm_b : NULL;
}

/* The pipeline's critical path: simulate the schedule as events over the
 * per-stage and per-link times.  Sets the makespan, the busiest stage's
 * compute and bubble and, with detail, what the PP transfers add (a second
 * simulation without them); fills t->inflight.  *dp_tail gets how far the
 * latest gradient reduction runs past the makespan. */
static int simulate_pipeline(struct pipette_timer *t, const struct pipette_config *c,
			     int busiest, int detail, struct pipette_time *out,
			     double *dp_tail, struct pipette_err *err)
{
	int p = c->pp, v = pipette_config_chunks(c), s;
	struct pipette_sched_input in;
	struct pipette_sched_result res;

	sched_input(t, c, &in);
	/* Without detail nothing reads the events: a pipeline simulated
	 * before, input for input, is not simulated again (schedmemo.h). */
	if (detail || !pipette_sched_memo_find(t->memo, &in, &res)) {
		if (pipette_sched_simulate(t->sched, &in, &res, err))
			return -1;
		if (!detail)
			pipette_sched_memo_keep(t->memo, &in, &res);
	}
	out->makespan_s = res.makespan;
	*dp_tail = 0;
	for (s = 0; s < p; s++) {
		double end = res.finish[s] - t->dp_win[s] + t->dp_rs[s];

		t->inflight[s] = (double)res.peak_fb[s] / v;
		if (end - res.makespan > *dp_tail)
			*dp_tail = end - res.makespan;
	}
	out->compute_s = res.busy[busiest] - out->tp_comm_s - out->cp_comm_s - out->ep_comm_s;
	out->bubble_s = res.makespan - res.busy[busiest];
	if (detail && p > 1) {
		struct pipette_sched_result bare;

		in.comm_f = in.comm_b = NULL;
		if (pipette_sched_simulate(t->sched, &in, &bare, err))
			return -1;
		out->pp_exposed_s = fmax(0, res.makespan - bare.makespan);
		/* restore the real simulation for timelines and in-flight */
		in.comm_f = t->comm_f;
		in.comm_b = t->comm_b;
		if (pipette_sched_simulate(t->sched, &in, &res, err))
			return -1;
	}
	return 0;
}

/* Tied embeddings with pp > 1: all-reduce the embedding gradient between
 * the first and the last stage (Megatron). */
static double embed_sync_s(struct pipette_timer *t, const struct placement *pl,
			   const struct pipette_model *m, const struct pipette_config *c)
{
	struct pipette_link l;
	double bytes;
	int ranks;

	if (!m->tied_embeddings || pipette_config_last_rank(c) == 0)
		return 0;
	l = worst_p2p(t, pl, c, 0, c->pp - 1, 1.0);
	bytes = 4.0 * (double)m->vocab * m->hidden / c->tp;
	/* FE (Optimus-CC): one all-reduce over the first and last stages of
	 * every replica instead of DP then a 2-rank one. */
	ranks = c->compress.fused_embedding ? 2 * c->dp * c->cp : 2;
	return pipette_allreduce_s(ranks, bytes, l.gbps, l.lat_us);
}

/* The site's calibration (calib.h): T = T_model + (compute - 1) C +
 * (comm - 1) E, the form the factors were fitted in.  C is the
 * computation: the busiest stage's passes, the pipeline's idle time
 * around them (bubble_s, which holds what PP transfers add) and the
 * optimizer step; E = T_model - C is the rest, the communication left
 * exposed (TP, CP and EP inside the passes, the DP tail, the embedding
 * sync).  Both are known whether or not the PP share was separated
 * (detail), so the search ranks with the correction the plan reports.
 * The terms are scaled with it so that the breakdown still adds up. */
static void site_correct(const struct pipette_gpu_spec *gpu, struct pipette_time *out)
{
	double a = gpu->site_compute > 0 ? gpu->site_compute : 1.0;
	double b = gpu->site_comm > 0 ? gpu->site_comm : 1.0;
	double c = out->compute_s + out->bubble_s + out->optimizer_s;
	double in_pipe = out->makespan_s - out->compute_s - out->bubble_s;

	out->model_s = out->iteration_s;
	out->model_compute_s = c;
	out->model_comm_s = fmax(0.0, out->iteration_s - c);
	if (a == 1.0 && b == 1.0)
		return;
	out->iteration_s += (a - 1) * c + (b - 1) * out->model_comm_s;
	out->makespan_s += (a - 1) * (out->compute_s + out->bubble_s) + (b - 1) * in_pipe;
	out->compute_s *= a;
	out->bubble_s *= a;
	out->optimizer_s *= a;
	out->pp_exposed_s *= a;		/* inside the bubble */
	out->tp_comm_s *= b;
	out->cp_comm_s *= b;
	out->ep_comm_s *= b;
	out->dp_exposed_s *= b;
	out->embed_sync_s *= b;
	out->exposed_comm_s = out->tp_comm_s + out->cp_comm_s + out->ep_comm_s +
			      out->pp_exposed_s + out->dp_exposed_s + out->embed_sync_s;
}

/* What the stages' loop of an estimate yields beyond *out. */
struct stages_sum {
	int busiest;
	double dp_exposed, in_pipe_dp;
};

/* The offloading's exposure added to stage s's forward and backward of
 * one micro-batch (offload_exposed), over the GPU's host link (hardware.h
 * host_gbps, one direction; a copy moves at the link's nominal rate);
 * out->offload_exposed_s: the iteration's. */
static void stage_offload(const struct pipette_model *m, const struct pipette_gpu_spec *gpu,
			  const struct pipette_config *c, int s, struct stage_times *st,
			  struct pipette_time *out)
{
	int n = pipette_config_stage_layers(m, c, s), k = pipette_config_stack(c)->offload_layers;
	double xf, xb, a = pipette_memory_offloaded_activations(m, c) / k;

	if (n < 1 || !(gpu->host_gbps > 0))
		return;
	offload_exposed(n, k, st->lf / n, st->lb / n, a / (gpu->host_gbps * 1e9), &xf, &xb);
	st->f += xf;
	st->b += xb;
	out->offload_exposed_s = (xf + xb) * (double)pipette_config_microbatches(c);
}

/* Every stage's times, DP and optimizer step; the busiest stage's into
 * out.  For a bound (pipette_time_bound) only the stage times. */
static void stages_times(struct pipette_timer *t, const struct placement *pl,
			 const struct pipette_model *m, const struct pipette_gpu_spec *gpu,
			 const struct pipette_config *c, const struct pp_msgs *pm, int bound,
			 struct pipette_time *out, struct stages_sum *sum)
{
	long mb = pipette_config_microbatches(c);
	double best_busy = -1;
	int s, sharded = pipette_config_shard_group(c) > 1;

	sum->busiest = 0;
	sum->dp_exposed = sum->in_pipe_dp = 0;
	for (s = 0; s < c->pp; s++) {
		struct stage_times st;
		struct pipette_stage_memory sm;
		struct fsdp_cost fc = { 0, 0, 0, 0, 0 };
		double dp_t, dp_exp, opt;

		stage_layers(t, pl, m, c, s, &st);
		if (sharded || !bound)
			pipette_memory_stage(m, gpu, c, s, 1.0, &sm);
		if (sharded) {
			stage_fsdp(t, pl, c, s, pipette_config_stage_layers(m, c, s), &sm, &st, &fc);
			st.f += fc.f;
			st.b += fc.b;
			st.dpc = fc.f + fc.b;
		}
		if (pipette_config_stack(c)->offload_layers > 0)
			stage_offload(m, gpu, c, s, &st, out);
		stage_chunks(t, m, gpu, c, s, pm, &st);
		if ((st.f + st.b + st.w) * mb > best_busy) {
			best_busy = (st.f + st.b + st.w) * mb;
			sum->busiest = s;
			out->tp_comm_s = st.tpc * mb;
			out->cp_comm_s = st.cpc * mb;
			out->ep_comm_s = st.epc * mb;
			out->ep_hidden_s = st.eph * mb;
			sum->in_pipe_dp = st.dpc * mb;
			out->stage_f_s = st.f;
			out->stage_b_s = st.b;
			out->stage_w_s = st.w;
		}
		if (bound)
			continue;
		if (sharded) {
			t->dp_rs[s] = fc.tail;
			t->dp_win[s] = 0;
			dp_t = fc.total;
			dp_exp = fc.once;
		} else {
			dp_t = stage_dp(t, pl, m, c, s, &sm, &st, &dp_exp);
		}
		if (dp_exp > sum->dp_exposed)
			sum->dp_exposed = dp_exp;
		if (dp_t > out->dp_comm_s)
			out->dp_comm_s = dp_t;
		opt = optimizer_step_s(gpu, c, &sm);
		if (opt > out->optimizer_s)
			out->optimizer_s = opt;
	}
	out->busiest_stage = sum->busiest;
}

static int estimate(struct pipette_timer *t, const struct pipette_model *m,
		    const struct pipette_gpu_spec *gpu, const struct pipette_config *c,
		    const struct pipette_cluster *cluster, const int *gpu_of_rank, int detail,
		    int bound, struct pipette_time *out, struct pipette_err *err)
{
	struct placement pl = { cluster, gpu, gpu_of_rank, pipette_cluster_gpus_per_node(cluster), -1 };
	int p = c->pp, v = pipette_config_chunks(c), world = pipette_config_world(c);
	struct pp_msgs pm;
	struct stages_sum sum;
	double dp_tail;

	memset(out, 0, sizeof(*out));
	if (pl.G > 0 && !(pl.G & (pl.G - 1)))
		pl.shift = __builtin_ctz((unsigned)pl.G);
	if (world > pipette_cluster_node_count(cluster) * pl.G)
		return pipette_fail(err, "the configuration needs %d GPUs, the cluster has %d",
				    world, pipette_cluster_node_count(cluster) * pl.G);
	if (reserve(t, p * v, world))
		return pipette_fail(err, "out of memory");
	t->estimates++;
	pp_messages(m, gpu, c, &pm);
	stages_times(t, &pl, m, gpu, c, &pm, bound, out, &sum);
	pp_transfers(t, &pl, c, &pm, sum.busiest, out);
	if (bound) {
		/* the pipeline is not simulated, but fails where it would */
		struct pipette_sched_input in;

		sched_input(t, c, &in);
		if (pipette_sched_prepare(t->sched, &in, err))
			return -1;
		out->embed_sync_s = embed_sync_s(t, &pl, m, c);
		site_correct(gpu, out);
		return 0;
	}
	if (simulate_pipeline(t, c, sum.busiest, detail, out, &dp_tail, err))
		return -1;
	sum.dp_exposed += dp_tail;
	/* FSDP's per-micro-batch exposure is inside the makespan already */
	out->compute_s -= sum.in_pipe_dp;
	out->dp_exposed_s = sum.dp_exposed + sum.in_pipe_dp;
	out->embed_sync_s = embed_sync_s(t, &pl, m, c);
	out->iteration_s = out->makespan_s + sum.dp_exposed + out->embed_sync_s + out->optimizer_s;
	out->exposed_comm_s = out->tp_comm_s + out->cp_comm_s + out->ep_comm_s +
			      out->pp_exposed_s + out->dp_exposed_s + out->embed_sync_s;
	site_correct(gpu, out);
	out->model_flops = pipette_model_flops(m, c);
	out->tokens_per_s = (double)c->global_batch * c->seq_len / out->iteration_s;
	out->tflops_per_gpu = out->model_flops / (out->iteration_s * world) / 1e12;
	/* against the dense peak of the recipe's GEMMs (BF16's for bf16) */
	out->mfu = out->tflops_per_gpu /
		   dtype_peak(gpu, pipette_precision_facts(c->precision)->gemm);
	return 0;
}

int pipette_time_estimate(struct pipette_timer *t, const struct pipette_model *m,
			  const struct pipette_gpu_spec *gpu,
			  const struct pipette_config *c,
			  const struct pipette_cluster *cluster,
			  const int *gpu_of_rank, int detail,
			  struct pipette_time *out, struct pipette_err *err)
{
	return estimate(t, m, gpu, c, cluster, gpu_of_rank, detail, 0, out, err);
}

int pipette_time_bound(struct pipette_timer *t, const struct pipette_model *m,
		       const struct pipette_gpu_spec *gpu, const struct pipette_config *c,
		       const struct pipette_cluster *cluster, struct pipette_time *out,
		       struct pipette_err *err)
{
	return estimate(t, m, gpu, c, cluster, NULL, 0, 1, out, err);
}

int pipette_time_dp_floor(struct pipette_timer *t, const struct pipette_model *m,
			  const struct pipette_gpu_spec *gpu, const struct pipette_config *c,
			  const struct pipette_cluster *cluster, int s,
			  struct pipette_dp_floor *out)
{
	struct placement pl = { cluster, gpu, NULL, pipette_cluster_gpus_per_node(cluster), -1 };
	struct pipette_stage_memory sm;
	double ag, extra;

	memset(out, 0, sizeof(*out));
	if (pl.G > 0 && !(pl.G & (pl.G - 1)))
		pl.shift = __builtin_ctz((unsigned)pl.G);
	if (s < 0 || s >= c->pp || pipette_config_shard_group(c) > 1 ||
	    pipette_config_world(c) > pipette_cluster_node_count(cluster) * pl.G ||
	    reserve(t, c->pp * pipette_config_chunks(c), pipette_config_world(c)))
		return -1;
	/* stages_times' memory and stage_dp's collectives, term for term */
	pipette_memory_stage(m, gpu, c, s, 1.0, &sm);
	dp_colls(t, &pl, m, c, s, &sm, &out->reduce_s, &ag, &extra);
	out->reduce_s += extra;
	out->overlap = pipette_config_stack(c)->dp_overlap;
	out->exposed_s = out->overlap ? 0 : ag;
	out->optimizer_s = optimizer_step_s(gpu, c, &sm);
	return 0;
}
