/* pipette: fine-grained GPU assignment; see mapping.h for the method. */
#include "plan/mapping.h"
#include "plan/mapping_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Annealing start temperature: accept this share of uphill moves at the
 * start (the usual calibration, Kirkpatrick et al. 1983; it replaces the
 * original's T0 = 1 on a delta normalised by its decimal magnitude,
 * mh_simulated_annealing_opt.py:217 of yimjinkyu1/date2024_pipette
 * @a2b0683). */
#define SA_ACCEPT0 0.8
/* Final temperature as a fraction of the start: the last moves are greedy. */
#define SA_TEND_FRAC 1e-3
/* Moves sampled to calibrate the start temperature. */
#define SA_CALIBRATION 16
/* Shortest annealing run, and the least patience of one. */
#define SA_MIN_RUN 50
/* Runs after the first restart from the best order at this fraction of
 * the start temperature (a reheat, not a new start): on the 8-node
 * generated clusters of tests/unit/test_mapping.c's kind (36 seeds x 5
 * shapes, llama2-13b, exhaustive optimum known), with n!/4 estimates,
 * a full reheat missed the optimum in 10 of 180 cases and 0.05 in 2
 * (by under 4e-4 of the time); the annealer before shift moves and
 * further runs missed it in 10. */
#define SA_REHEAT 0.05
/* Estimates one mapping search may make, whatever the cluster's size: the
 * deterministic cap of the search, which otherwise ends when what is
 * left to gain is below GAP_STOP or no move helps.  At 1500 the 4096 x 8
 * plan of tests/bench/bench_plan.c stays under its 5 s target. */
#define ESTIMATES_MAX 1500
/* Of those, the estimates of moves that carry whole segments of the node
 * order (annealing, the order descent) re-read the placement, O(world +
 * m*p*v) in rank visits and simulated pipeline operations: they share
 * this much work, ~0.2 s per configuration at 8192 GPUs on one core
 * (tests/bench/bench_plan.c), at least SWEEP_MIN of them.  A swap of two
 * nodes re-reads only their ranks' groups (timing.c). */
#define SWEEP_WORK 3e6
/* At least the start temperature's calibration and one shortest run. */
#define SWEEP_MIN (SA_CALIBRATION + SA_MIN_RUN)
/* An annealing run ends early after this share of its iterations without
 * a new best (deterministic: counted in iterations). */
#define SA_PATIENCE 0.5
/* A candidate must beat the incumbent by this relative margin, so that
 * floating-point noise never replaces a mapping with an equal one. */
#define STRICT_GAIN 1e-12
/* The heuristic search stops once the incumbent is within this share of
 * the placement bound: half the 1% under which a plan calls its mapping
 * gain negligible (PIPETTE_NEGLIGIBLE_GAIN, plan.h), so what a longer
 * search could still find would be negligible too. */
#define GAP_STOP 0.005
/* Node links one run of link moves may read (mapping_links.c): a bound
 * on a run that finds swap after swap, ~0.3 s on one core; the runs of
 * tests/bench/bench_plan.c's 4096-node plan read under 1.3e6. */
#define LINK_WORK_MAX 40000000L

void pipette_mapping_opts_init(struct pipette_mapping_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->seed = 0x9e3779b97f4a7c15ULL;
	o->restarts = 3;
}

/* Estimates of segment moves SWEEP_WORK pays for on configuration c. */
static long sweep_budget(const struct pipette_config *c)
{
	double ops = 3.0 * (double)pipette_config_microbatches(c) * c->pp *
		     pipette_config_chunks(c);
	double b = SWEEP_WORK / ((double)pipette_config_world(c) + ops + 1);

	return b < SWEEP_MIN ? SWEEP_MIN : b > ESTIMATES_MAX ? ESTIMATES_MAX : (long)b;
}

int pipette_mapping_is_node_block(const int *gpu_of_rank, int world, int G)
{
	int r;

	if (world % G)
		return 0;
	for (r = 0; r < world; r++)
		if (gpu_of_rank[r] / G != gpu_of_rank[r - r % G] / G)
			return 0;
	return 1;
}

/* splitmix64 (Steele, Lea, Flood, OOPSLA 2014): small, seedable, the same
 * sequence on every platform. */
static unsigned long long rng_next(unsigned long long *s)
{
	unsigned long long z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int rng_below(unsigned long long *s, int n)
{
	return (int)(rng_next(s) % (unsigned long long)n);
}

static double rng_unit(unsigned long long *s)
{
	return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

struct mapper {
	struct pipette_timer *t;
	const struct pipette_model *m;
	const struct pipette_gpu_spec *gpu;
	const struct pipette_config *c;
	const struct pipette_cluster *cl;
	int N, G, world, blocks;
	int *order;		/* node at rank-block position k (N entries) */
	int *slot;		/* slot of local rank i on node n: [n*G + i] */
	int *best_order, *best_slot;
	int *sigma;		/* scratch gpu_of_rank */
	/* What sigma was last written from: the node of each rank block
	 * (-1: not written), and the nodes whose slots changed since
	 * (evaluate writes only the blocks either touches). */
	int *sigma_node;
	char *slot_moved;
	double best;
	double bound;		/* placement_bound, 0 = none */
	/* The exact search cuts a subtree whose bound cannot beat the
	 * incumbent by more than GAP_STOP (floor = 1 - GAP_STOP), or, when
	 * asked to prove the optimum, only one that cannot tie it (floor =
	 * 1 + BOUND_SLACK); floored: it cut one the proof would search. */
	double floor;
	int floored;
	long evals, budget, failed;
	struct pipette_err *err;
	/* the cluster's node pairs: the options', or read by order_search
	 * (own_pairs) */
	struct pipette_node_pairs *pairs;
	int own_pairs;
};

static int evaluate(struct mapper *mp, double *out)
{
	struct pipette_time tm;
	int r;

	/* node block by node block (a division per rank cost a tenth of an
	 * estimate at 16,384 ranks), only those whose node or its slots
	 * changed since sigma was last written: a move changes a few, and
	 * writing all 16,384 ranks of the 2048-node plan of
	 * tests/bench/bench_plan.c for each of its 1,148 estimates cost
	 * 185 M instructions, 3.5% of the plan (callgrind) */
	for (r = 0; r < mp->world; r += mp->G) {
		const int b = r / mp->G, n = mp->order[b], *sl = mp->slot + (size_t)n * mp->G;
		int i, k = mp->world - r < mp->G ? mp->world - r : mp->G;

		if (mp->sigma_node[b] == n && !mp->slot_moved[n])
			continue;
		for (i = 0; i < k; i++)
			mp->sigma[r + i] = n * mp->G + sl[i];
		mp->sigma_node[b] = n;
		mp->slot_moved[n] = 0;
	}
	mp->evals++;
	if (pipette_time_estimate(mp->t, mp->m, mp->gpu, mp->c, mp->cl, mp->sigma, 0,
				  &tm, mp->err)) {
		/* A placement the estimator cannot simulate is never chosen;
		 * only the block mapping's failure is an error. */
		if (mp->evals == 1)
			return -1;
		mp->failed++;
		*out = HUGE_VAL;
		return 0;
	}
	*out = tm.iteration_s;
	return 0;
}

static int better(double cand, double inc)
{
	return cand < inc * (1.0 - STRICT_GAIN);
}

static void keep_best(struct mapper *mp, double f)
{
	mp->best = f;
	memcpy(mp->best_order, mp->order, sizeof(int) * (size_t)mp->N);
	memcpy(mp->best_slot, mp->slot, sizeof(int) * (size_t)mp->N * (size_t)mp->G);
}

static void restore_best(struct mapper *mp)
{
	memcpy(mp->order, mp->best_order, sizeof(int) * (size_t)mp->N);
	memcpy(mp->slot, mp->best_slot, sizeof(int) * (size_t)mp->N * (size_t)mp->G);
	memset(mp->slot_moved, 1, (size_t)mp->N);
}

/* Nearest-neighbour chain on the mutual bandwidth min(a->b, b->a),
 * starting at node 0; ties go to the lower node index.  It depends on the
 * cluster only: the mappings of a plan share it (mp->pairs->chain). */
static void chain_start(struct mapper *mp)
{
	const struct pipette_node_pairs *np = mp->pairs;
	char *used;
	int k, x;

	if (np->chain) {
		memcpy(mp->order, np->chain, sizeof(int) * (size_t)mp->N);
		return;
	}
	if (!(used = calloc((size_t)mp->N, 1)))
		return;		/* keep the current order */
	mp->order[0] = 0;
	used[0] = 1;
	for (k = 1; k < mp->N; k++) {
		int last = mp->order[k - 1], pick = -1;
		double pick_bw = -1;

		for (x = 0; x < mp->N; x++) {
			double bw;

			if (used[x])
				continue;
			bw = pipette_node_pairs_gbps(np, last, x);
			if (bw > pick_bw) {
				pick_bw = bw;
				pick = x;
			}
		}
		mp->order[k] = pick;
		used[pick] = 1;
	}
	free(used);
	if ((mp->pairs->chain = malloc(sizeof(int) * (size_t)mp->N)))
		memcpy(mp->pairs->chain, mp->order, sizeof(int) * (size_t)mp->N);
}

/* Lexicographic next permutation; 0 after the last one. */
static int next_perm(int *a, int n)
{
	int i = n - 2, j, tmp;

	while (i >= 0 && a[i] >= a[i + 1])
		i--;
	if (i < 0)
		return 0;
	j = n - 1;
	while (a[j] <= a[i])
		j--;
	tmp = a[i];
	a[i] = a[j];
	a[j] = tmp;
	for (i++, j = n - 1; i < j; i++, j--) {
		tmp = a[i];
		a[i] = a[j];
		a[j] = tmp;
	}
	return 1;
}

/* Leaf order: an exact comparison of the estimates, ties to the
 * lexicographically smaller node order (the tie-break of both exact
 * searches: brute force meets the orders in that order). */
static int lex_less(const int *a, const int *b, int n)
{
	int k;

	for (k = 0; k < n; k++)
		if (a[k] != b[k])
			return a[k] < b[k];
	return 0;
}

static void keep_if_best_exact(struct mapper *mp, double f)
{
	if (f < mp->best || (f == mp->best && lex_less(mp->order, mp->best_order, mp->N)))
		keep_best(mp, f);
}

static int exhaustive(struct mapper *mp)
{
	int k;
	double f;

	for (k = 0; k < mp->N; k++)
		mp->order[k] = k;
	do {
		if (evaluate(mp, &f))
			return -1;
		keep_if_best_exact(mp, f);
	} while (next_perm(mp->order, mp->N));
	restore_best(mp);
	return 0;
}

/* ---- exact search by branch and bound (small clusters) -------------------
 *
 * The search assigns the nodes one at a time, weakest first (slowest
 * intra-node link, then slowest link to another node), each to an open
 * position of the node order, or, when the configuration leaves nodes
 * idle, to none.  Weak nodes first: the bound below is loose exactly where
 * a slow node is still unassigned (every open position is credited with
 * the fastest remaining one), so placing the slow nodes first makes it
 * tight near the root, where a cut saves the most: filling positions in
 * turn took ~22,000 estimates per configuration on hetero-8x8 (llama3-70b,
 * the 8-node case of tests/bench/bench_plan.c), weakest node first ~300.
 *
 * The bound of a partial assignment is the estimate on an optimistic
 * cluster of positions: links between two assigned positions are the real
 * ones, every link that touches an open position is the best (fastest,
 * shortest) the unassigned nodes could give it, and an open position's
 * GPUs get, pair by pair, the best intra-node link of the unassigned
 * nodes.  The estimate only grows when a link slows (collectives,
 * point-to-point and the pipeline's max-plus recurrence are monotone in
 * each link), so the bound is below every completion.  Children are
 * expanded best bound first.  A subtree is cut when its bound cannot beat
 * the incumbent by more than GAP_STOP, the share under which the plan's
 * searches stop (what is left to gain is negligible; the heuristic one
 * stops there too), and the search is not entered when the placement
 * bound is that close already.  Asked to prove the optimum (opts.exact),
 * it cuts only where the bound exceeds the incumbent by more than
 * BOUND_SLACK (the floating-point margin of that monotonicity), so no
 * order that could tie the optimum is ever cut, and leaves keep the exact
 * rule of keep_if_best_exact: the result is brute force's whatever the
 * branching order (tests/unit/test_mapping.c checks both on random
 * caches).  The cut at GAP_STOP took the 8-node plan of issue 30
 * (llama3-70b, global batch 2048, 10 chunks x 2048 micro-batches) from
 * 26,179 estimates to none, for a gain of 1.0002 it no longer claims. */
#define BOUND_SLACK 1e-9
/* Nodes left below which the search estimates every completion rather
 * than bounding: fewest estimates over tests/unit/test_mapping.c's random
 * caches (45,705, 45,424 and 52,752 at 1, 2 and 3) and on the README's
 * 8-node case (761, 758, 824). */
#define LEAF_DEPTH 2

struct bnb {
	struct pipette_cluster *pos;	/* optimistic cluster of positions */
	struct pipette_link *inter;	/* real node links, N x N */
	struct pipette_link *intra;	/* real intra links, N x G x G */
	int *at;			/* node at position p, -1 open */
	char *used;			/* node assigned (to a position or idle) */
	int *weak;			/* nodes in branching order */
	int *ident;			/* identity sigma over the world */
	int idle_left;			/* nodes still allowed to stay idle */
	long bounds;
};

static struct pipette_link link_best(struct pipette_link a, struct pipette_link b)
{
	return (struct pipette_link){ fmax(a.gbps, b.gbps), fmin(a.lat_us, b.lat_us) };
}

#define NO_LINK ((struct pipette_link){ 0, HUGE_VAL })

/* Links of the optimistic cluster for the assignment in b->at. */
static int bnb_links(const struct mapper *mp, struct bnb *b)
{
	int N = mp->N, G = mp->G, p, q, x, y, a, c;
	struct pipette_link out[PIPETTE_MAPPING_EXACT_MAX], in[PIPETTE_MAPPING_EXACT_MAX];
	struct pipette_link open = NO_LINK;

	for (p = 0; p < mp->blocks; p++) {
		out[p] = in[p] = NO_LINK;
		if (b->at[p] < 0)
			continue;
		for (x = 0; x < N; x++)
			if (!b->used[x]) {
				out[p] = link_best(out[p], b->inter[b->at[p] * N + x]);
				in[p] = link_best(in[p], b->inter[x * N + b->at[p]]);
			}
	}
	for (x = 0; x < N; x++)
		for (y = 0; y < N; y++)
			if (x != y && !b->used[x] && !b->used[y])
				open = link_best(open, b->inter[x * N + y]);
	for (p = 0; p < mp->blocks; p++)
		for (q = 0; q < mp->blocks; q++) {
			int u = b->at[p], w = b->at[q];

			if (p != q && pipette_cluster_set_node_link(b->pos, p, q,
				u >= 0 && w >= 0 ? b->inter[u * N + w]
				: u >= 0 ? out[p] : w >= 0 ? in[q] : open))
				return -1;
		}
	for (a = 0; a < G; a++)
		for (c = 0; c < G; c++) {
			struct pipette_link l = NO_LINK;

			if (a == c)
				continue;
			for (x = 0; x < N; x++)
				if (!b->used[x])
					l = link_best(l, b->intra[((size_t)x * G + a) * G + c]);
			for (p = 0; p < mp->blocks; p++)
				if (pipette_cluster_set_intra_link(b->pos, p, a, c, b->at[p] >= 0
					? b->intra[((size_t)b->at[p] * G + a) * G + c] : l))
					return -1;
		}
	return 0;
}

static int bnb_bound(struct mapper *mp, struct bnb *b, double *lb)
{
	struct pipette_time tm;

	if (bnb_links(mp, b))
		return pipette_fail(mp->err, "out of memory");
	mp->evals++;
	b->bounds++;
	if (pipette_time_estimate(mp->t, mp->m, mp->gpu, mp->c, b->pos, b->ident, 0, &tm,
				  mp->err)) {
		*lb = 0;	/* no bound: the subtree is searched */
		return 0;
	}
	*lb = tm.iteration_s;
	return 0;
}

/* A complete assignment: the node order, idle nodes after it ascending. */
static int bnb_leaf(struct mapper *mp, struct bnb *b)
{
	int k = mp->blocks, x, p;
	double f;

	for (p = 0; p < mp->blocks; p++)
		mp->order[p] = b->at[p];
	for (x = 0; x < mp->N; x++) {
		for (p = 0; p < mp->blocks && b->at[p] != x; p++)
			;
		if (p == mp->blocks)
			mp->order[k++] = x;
	}
	if (evaluate(mp, &f))
		return -1;
	keep_if_best_exact(mp, f);
	return 0;
}

/* Put node x at position p (p < 0: idle), or take it back. */
static void bnb_put(struct bnb *b, int x, int p)
{
	b->used[x] = 1;
	if (p >= 0)
		b->at[p] = x;
	else
		b->idle_left--;
}

static void bnb_take(struct bnb *b, int x, int p)
{
	b->used[x] = 0;
	if (p >= 0)
		b->at[p] = -1;
	else
		b->idle_left++;
}

/* Every completion from the d-th node of the branching order on. */
static int bnb_leaves(struct mapper *mp, struct bnb *b, int d)
{
	int x, p, rv = 0;

	if (d == mp->N)
		return bnb_leaf(mp, b);
	x = b->weak[d];
	for (p = b->idle_left > 0 ? -1 : 0; p < mp->blocks && !rv; p++) {
		if (p >= 0 && b->at[p] >= 0)
			continue;
		bnb_put(b, x, p);
		rv = bnb_leaves(mp, b, d + 1);
		bnb_take(b, x, p);
	}
	return rv;
}

static int bnb_visit(struct mapper *mp, struct bnb *b, int d)
{
	struct pipette_ranked ch[PIPETTE_MAPPING_EXACT_MAX + 1];	/* bound, position */
	int n = 0, x = b->weak[d], p, k;

	/* Near the leaves a bound costs as much as the orders it could cut:
	 * with LEAF_DEPTH nodes or fewer left, every completion is
	 * estimated. */
	if (mp->N - d <= LEAF_DEPTH)
		return bnb_leaves(mp, b, d);
	for (p = b->idle_left > 0 ? -1 : 0; p < mp->blocks; p++) {
		if (p >= 0 && b->at[p] >= 0)
			continue;
		bnb_put(b, x, p);
		ch[n].id = p;
		if (bnb_bound(mp, b, &ch[n++].key)) {
			bnb_take(b, x, p);
			return -1;
		}
		bnb_take(b, x, p);
	}
	qsort(ch, (size_t)n, sizeof(ch[0]), pipette_cmp_ranked);
	for (k = 0; k < n; k++) {
		int rv;

		if (!(ch[k].key <= mp->best * mp->floor)) {
			/* sorted: the rest are cut too; a proof would search
			 * this one if it could tie the incumbent */
			mp->floored |= ch[k].key <= mp->best * (1 + BOUND_SLACK);
			break;
		}
		bnb_put(b, x, ch[k].id);
		rv = bnb_visit(mp, b, d + 1);
		bnb_take(b, x, ch[k].id);
		if (rv)
			return -1;
	}
	return 0;
}

/* How weak node x is, for the branching order: the sum of its links to
 * the other nodes, both ways, then its slowest intra-node link (GB/s;
 * lower is weaker).  The sum beat the slowest link (57,153 against
 * 45,424 estimates over tests/unit/test_mapping.c's random caches; 1,186
 * against 758 on the README's 8-node case). */
struct weakness {
	double inter, intra;
	int node;
};

static int cmp_weak(const void *a, const void *b)
{
	const struct weakness *x = a, *y = b;

	if (x->inter != y->inter)
		return x->inter < y->inter ? -1 : 1;
	if (x->intra != y->intra)
		return x->intra < y->intra ? -1 : 1;
	return x->node - y->node;
}

static void bnb_order(const struct mapper *mp, struct bnb *b)
{
	struct weakness w[PIPETTE_MAPPING_EXACT_MAX] = { { 0, 0, 0 } };
	int N = mp->N, G = mp->G, x, y, k;

	for (x = 0; x < N; x++) {
		w[x] = (struct weakness){ 0, HUGE_VAL, x };
		for (y = 0; y < N; y++)
			if (y != x)
				w[x].inter += b->inter[x * N + y].gbps + b->inter[y * N + x].gbps;
		for (k = 0; k < G * G; k++)
			if (k % (G + 1))
				w[x].intra = fmin(w[x].intra, b->intra[(size_t)x * G * G + k].gbps);
	}
	qsort(w, (size_t)N, sizeof(w[0]), cmp_weak);
	for (x = 0; x < N; x++)
		b->weak[x] = w[x].node;
}

/* The exact node order by branch and bound, from the incumbent in mp->best
 * (the block mapping's, or better). */
static int branch_and_bound(struct mapper *mp, long *bounds)
{
	struct bnb b;
	int N = mp->N, G = mp->G, x, y, a, c, rv = -1;
	struct pipette_err e2;

	memset(&b, 0, sizeof(b));
	b.inter = malloc((size_t)N * N * sizeof(*b.inter));
	b.intra = malloc((size_t)N * G * G * sizeof(*b.intra));
	b.at = malloc((size_t)N * sizeof(int));
	b.used = calloc((size_t)N, 1);
	b.weak = malloc((size_t)N * sizeof(int));
	b.ident = malloc((size_t)mp->world * sizeof(int));
	b.pos = pipette_cluster_create_blank(mp->blocks, G, mp->gpu, NO_LINK, &e2);
	if (!b.inter || !b.intra || !b.at || !b.used || !b.weak || !b.ident || !b.pos) {
		pipette_fail(mp->err, "out of memory");
		goto out;
	}
	b.idle_left = N - mp->blocks;
	for (x = 0; x < N; x++)
		b.at[x] = -1;
	for (x = 0; x < mp->world; x++)
		b.ident[x] = x;
	for (x = 0; x < N; x++)
		for (y = 0; y < N; y++)
			b.inter[x * N + y] = pipette_cluster_node_link(mp->cl, x, y);
	for (x = 0; x < N; x++)
		for (a = 0; a < G; a++)
			for (c = 0; c < G; c++)
				b.intra[((size_t)x * G + a) * G + c] =
					pipette_cluster_link(mp->cl, x * G + a, x * G + c);
	bnb_order(mp, &b);
	rv = bnb_visit(mp, &b, 0);
	restore_best(mp);
	*bounds = b.bounds;
out:
	pipette_cluster_destroy(b.pos);
	free(b.inter);
	free(b.intra);
	free(b.at);
	free(b.used);
	free(b.weak);
	free(b.ident);
	return rv;
}

/* The mapping's lower bound: the configuration on a cluster of the real
 * one's shape whose node links are all the real cluster's fastest (and
 * shortest) and whose GPU pairs inside a node all get the fastest such
 * pair of any node (slots are permuted too, so no pair keeps its own).  No placement beats it (the estimate is
 * monotone in each link; see the branch and bound above), so best - bound
 * is the most any further search could gain.  HUGE_VAL-free: 0 when the
 * estimate fails. */
static int placement_bound(struct mapper *mp, double *lb)
{
	int N = mp->N, G = mp->G, x, y, a, c, rv = -1;
	struct pipette_link best = NO_LINK, fast = NO_LINK;
	struct pipette_cluster *pos;
	struct pipette_time tm;
	struct pipette_err e2;
	int *ident = malloc((size_t)mp->world * sizeof(int));

	if (mp->pairs)
		best = mp->pairs->best;	/* the same folds, read once */
	else
		for (x = 0; x < N; x++)
			for (y = 0; y < N; y++)
				if (x != y)
					best = link_best(best, pipette_cluster_node_link(mp->cl, x, y));
	pos = pipette_cluster_create_blank(N, G, mp->gpu, best, &e2);
	if (!pos || !ident) {
		pipette_fail(mp->err, "out of memory");
		goto out;
	}
	for (x = 0; x < N; x++)
		for (a = 0; a < G; a++)
			for (c = 0; c < G; c++)
				if (a != c)
					fast = link_best(fast, pipette_cluster_link(mp->cl, x * G + a,
										      x * G + c));
	if (pipette_cluster_set_intra_all(pos, fast)) {
		pipette_fail(mp->err, "out of memory");
		goto out;
	}
	for (x = 0; x < mp->world; x++)
		ident[x] = x;
	mp->evals++;
	*lb = pipette_time_estimate(mp->t, mp->m, mp->gpu, mp->c, pos, ident, 0, &tm, &e2)
	      ? 0 : tm.iteration_s;
	rv = 0;
out:
	pipette_cluster_destroy(pos);
	free(ident);
	return rv;
}

/* Moves on the node order (positions 0 .. N-1; the first `blocks` hold
 * rank blocks, the rest are unused nodes):
 *  - swap two positions, one of them used (the original's move);
 *  - reverse a used segment [i, j] (2-opt: a pipeline or DP chain walked
 *    backwards keeps its links);
 *  - move the used segment [i, i+len) to start at position j (or-opt: a
 *    stage or replica of len nodes changes its place in the chain, the
 *    others keep their order).
 * Swaps and reversals are their own inverses; a move's inverse moves the
 * segment back from j to i. */
enum { MV_SWAP, MV_REVERSE, MV_SHIFT, MV_KINDS };
/* Longest segment a shift move carries (a stage of up to 4 nodes). */
#define SHIFT_MAX 4

struct move {
	int kind, i, j, len;
};

static void reverse_range(int *a, int i, int j)
{
	for (; i < j; i++, j--) {
		int tmp = a[i];

		a[i] = a[j];
		a[j] = tmp;
	}
}

static void apply_move(struct mapper *mp, const struct move *mv)
{
	int *a = mp->order, i = mv->i, j = mv->j, len = mv->len;

	switch (mv->kind) {
	case MV_SWAP: {
		int tmp = a[i];

		a[i] = a[j];
		a[j] = tmp;
		break;
	}
	case MV_REVERSE:
		reverse_range(a, i, j);
		break;
	default:
		/* rotate [min, max + len) so that the segment lands at j:
		 * a rotation is three reversals */
		if (j < i) {
			reverse_range(a, j, i - 1);
			reverse_range(a, i, i + len - 1);
			reverse_range(a, j, i + len - 1);
		} else if (j > i) {
			reverse_range(a, i, i + len - 1);
			reverse_range(a, i + len, j + len - 1);
			reverse_range(a, i, j + len - 1);
		}
		break;
	}
}

static void undo_move(struct mapper *mp, const struct move *mv)
{
	struct move inv = *mv;

	if (mv->kind == MV_SHIFT) {
		inv.i = mv->j;
		inv.j = mv->i;
	}
	apply_move(mp, &inv);
}

/* A random move, each kind equally likely where it exists. */
static void random_move(struct mapper *mp, unsigned long long *rng, struct move *mv)
{
	int kinds = mp->blocks >= 3 ? 3 : mp->blocks >= 2 ? 2 : 1;
	int kind = rng_below(rng, kinds), i, j;

	mv->len = 1;
	if (kind == MV_SHIFT) {
		int lmax = mp->blocks - 1 < SHIFT_MAX ? mp->blocks - 1 : SHIFT_MAX;

		mv->kind = MV_SHIFT;
		mv->len = 1 + rng_below(rng, lmax);
		i = rng_below(rng, mp->blocks - mv->len + 1);
		j = rng_below(rng, mp->blocks - mv->len);
		if (j >= i)
			j++;
		mv->i = i;
		mv->j = j;
		return;
	}
	if (kind == MV_REVERSE) {
		i = rng_below(rng, mp->blocks);
		j = rng_below(rng, mp->blocks - 1);
	} else {
		i = rng_below(rng, mp->blocks);
		j = rng_below(rng, mp->N - 1);
	}
	if (j >= i)
		j++;
	mv->kind = kind;
	mv->i = i < j ? i : j;
	mv->j = i < j ? j : i;
}

/* Evaluations the final descent keeps back from annealing: about one
 * pass over the swaps, reversals and shifts of the used positions. */
static long descent_reserve(const struct mapper *mp)
{
	long b = mp->blocks, n = mp->N;

	return b * (n - 1) / 2 + b * (b - 1) / 2 + b * (b - 1) * (SHIFT_MAX < b ? SHIFT_MAX : b) / 2;
}

/* What is left to gain is below GAP_STOP of the incumbent. */
static int closed(const struct mapper *mp)
{
	return mp->bound > 0 && mp->best - mp->bound <= GAP_STOP * mp->best;
}

/* Simulated annealing over the node order.  The first o->restarts runs
 * share what the budget leaves after the descent's reserve; a run ends
 * after SA_PATIENCE of its iterations without a new best, and what it
 * leaves goes to further runs, until the budget is spent.  Every run
 * after the first starts from the best order found, at SA_REHEAT of the
 * calibrated start temperature (iterated annealing). */
static int anneal(struct mapper *mp, const struct pipette_mapping_opts *o)
{
	unsigned long long rng = o->seed;
	int restarts = o->restarts > 0 ? o->restarts : 3, rs, k;
	double fcur, t0 = 0, up = 0;
	long reserve = descent_reserve(mp);
	int n_up = 0;
	struct move mv;

	if (mp->N < 2)
		return 0;
	if (reserve > mp->budget / 4)
		reserve = mp->budget / 4;
	restore_best(mp);
	fcur = mp->best;
	/* Calibrate T0 on random moves from the start state. */
	for (k = 0; k < SA_CALIBRATION && mp->evals < mp->budget; k++) {
		double f;

		random_move(mp, &rng, &mv);
		apply_move(mp, &mv);
		if (evaluate(mp, &f))
			return -1;
		if (f > fcur && isfinite(f)) {
			up += f - fcur;
			n_up++;
		} else if (better(f, mp->best)) {
			keep_best(mp, f);
		}
		undo_move(mp, &mv);
	}
	t0 = n_up ? (up / n_up) / -log(SA_ACCEPT0) : mp->best * 1e-9;
	for (rs = 0;; rs++) {
		long left = mp->budget - reserve - mp->evals, it;
		long iters = rs < restarts ? left / (restarts - rs) : left;
		long patience = (long)(SA_PATIENCE * (double)iters), last_gain = 0;
		double temp = rs ? t0 * SA_REHEAT : t0, alpha;

		if (iters < SA_MIN_RUN || closed(mp))
			break;
		alpha = pow(SA_TEND_FRAC, 1.0 / (double)iters);
		restore_best(mp);
		fcur = mp->best;
		if (patience < SA_MIN_RUN)
			patience = SA_MIN_RUN;
		for (it = 0; it < iters && it - last_gain < patience; it++, temp *= alpha) {
			double f, d;

			random_move(mp, &rng, &mv);
			apply_move(mp, &mv);
			if (evaluate(mp, &f))
				return -1;
			d = f - fcur;
			if (d <= 0 || rng_unit(&rng) < exp(-d / temp)) {
				fcur = f;
				if (better(f, mp->best)) {
					keep_best(mp, f);
					last_gain = it;
				}
			} else {
				undo_move(mp, &mv);
			}
		}
	}
	restore_best(mp);
	return 0;
}

/* Descent to a local optimum of the node order: every swap, segment
 * reversal and segment shift (up to SHIFT_MAX nodes), first improvement,
 * until a full pass improves nothing or the budget is spent.  After
 * annealing this closes the last gap to the optimum on small clusters
 * (tests/unit/test_mapping.c, tests/bench/bench_plan.c). */
static int order_descent(struct mapper *mp)
{
	int improved = 1, kind, i, j, len;

	restore_best(mp);
	while (improved && mp->evals < mp->budget && !closed(mp)) {
		improved = 0;
		for (kind = 0; kind < MV_KINDS; kind++)
			for (len = 1; len <= (kind == MV_SHIFT ? SHIFT_MAX : 1); len++)
				for (i = 0; i < mp->blocks && mp->evals < mp->budget; i++) {
					int jmax = kind == MV_SWAP ? mp->N : kind == MV_REVERSE
						   ? mp->blocks : mp->blocks - len + 1;

					if (kind == MV_SHIFT && i + len > mp->blocks)
						break;
					for (j = kind == MV_SHIFT ? 0 : i + 1;
					     j < jmax && mp->evals < mp->budget; j++) {
						struct move mv = { kind, i, j, len };
						double f;

						if ((kind == MV_REVERSE && j == i + 1) ||
						    (kind == MV_SHIFT && (j == i || (len == 1 && abs(j - i) == 1))))
							continue;	/* a swap already tried */
						apply_move(mp, &mv);
						if (evaluate(mp, &f))
							return -1;
						if (better(f, mp->best)) {
							keep_best(mp, f);
							improved = 1;
						} else {
							undo_move(mp, &mv);
						}
					}
				}
	}
	restore_best(mp);
	return 0;
}

static int intra_uniform(const struct pipette_cluster *cl, int node, int G)
{
	struct pipette_link ref = pipette_cluster_link(cl, node * G, node * G + 1);
	int a, b;

	for (a = 0; a < G; a++)
		for (b = 0; b < G; b++) {
			struct pipette_link l;

			if (a == b)
				continue;
			l = pipette_cluster_link(cl, node * G + a, node * G + b);
			if (l.gbps != ref.gbps || l.lat_us != ref.lat_us)
				return 0;
		}
	return 1;
}

/* How uneven node n's GPU pairs are: its slowest over its fastest (1 =
 * alike in bandwidth). */
static double intra_spread(const struct pipette_cluster *cl, int node, int G)
{
	double lo = HUGE_VAL, hi = 0;
	int a, b;

	for (a = 0; a < G; a++)
		for (b = 0; b < G; b++)
			if (a != b) {
				double bw = pipette_cluster_link(cl, node * G + a, node * G + b).gbps;

				lo = fmin(lo, bw);
				hi = fmax(hi, bw);
			}
	return hi > 0 ? lo / hi : 1;
}

/* First-improvement pairwise slot swaps on each used non-uniform node,
 * the most uneven first (where a budget that cannot cover every node of
 * a large cluster gains most: a degraded GPU before the noise of healthy
 * ones), until a full pass improves nothing or the budget is spent. */
static int slot_descent(struct mapper *mp, int *searched)
{
	int k, a, b, G = mp->G, n_used = 0;
	struct pipette_ranked *by = malloc((size_t)mp->blocks * sizeof(*by));	/* spread, block */

	*searched = 0;
	if (!by)
		return pipette_fail(mp->err, "out of memory");
	for (k = 0; G > 1 && k < mp->blocks; k++)
		if (!intra_uniform(mp->cl, mp->order[k], G))
			by[n_used++] = (struct pipette_ranked){ intra_spread(mp->cl, mp->order[k], G), k };
	qsort(by, (size_t)n_used, sizeof(*by), pipette_cmp_ranked);
	for (k = 0; k < n_used && mp->evals < mp->budget; k++) {
		int *s = mp->slot + (size_t)mp->order[by[k].id] * G, improved = 1;

		(*searched)++;
		while (improved && mp->evals < mp->budget) {
			improved = 0;
			for (a = 0; a < G && mp->evals < mp->budget; a++)
				for (b = a + 1; b < G && mp->evals < mp->budget; b++) {
					int tmp = s[a];
					double f;

					s[a] = s[b];
					s[b] = tmp;
					mp->slot_moved[mp->order[by[k].id]] = 1;
					if (evaluate(mp, &f)) {
						free(by);
						return -1;
					}
					if (better(f, mp->best)) {
						keep_best(mp, f);
						improved = 1;
					} else {
						s[b] = s[a];
						s[a] = tmp;
						mp->slot_moved[mp->order[by[k].id]] = 1;
					}
				}
		}
	}
	free(by);
	return 0;
}

/* The link moves (mapping_int.h) from the incumbent (order = best_order),
 * each swap kept only when the estimate is no worse (equal estimates
 * cross the plateaus of the slowest link; the incumbent still changes
 * only on a strict gain), until the moves run out or the budget is
 * spent. */
static int link_moves(struct mapper *mp)
{
	struct pipette_link_moves *lm =
		pipette_link_moves_create(mp->m, mp->c, mp->pairs, mp->G, mp->N, mp->order);
	double f, cur = mp->best;	/* judged moves start from the incumbent */
	int i, j, rv = 0;

	if (!lm)
		return pipette_fail(mp->err, "out of memory");
	while (mp->evals < mp->budget && !closed(mp) &&
	       pipette_link_moves_next(lm, LINK_WORK_MAX, &i, &j)) {
		int keep;

		if (evaluate(mp, &f)) {
			rv = -1;
			break;
		}
		keep = f <= cur * (1 + STRICT_GAIN);
		if (keep)
			cur = f;
		if (better(f, mp->best))
			keep_best(mp, f);
		pipette_link_moves_verdict(lm, keep);
	}
	pipette_link_moves_destroy(lm);
	return rv;
}

/* The link moves alone (every swap kept) from the current order.  Their
 * result depends on the block graph and the start only: a configuration
 * mapped next whose graph is the same (one that differs in the schedule's
 * chunks or the micro-batches: the 2048 x 8 GPU plan of
 * tests/bench/bench_plan.c maps two such) takes it from the node pairs. */
static int unjudged_moves(struct mapper *mp)
{
	struct pipette_link_moves *lm =
		pipette_link_moves_create(mp->m, mp->c, mp->pairs, mp->G, mp->N, mp->order);
	int *start = malloc(sizeof(int) * (size_t)mp->N), i, j;

	if (!lm || !start) {
		pipette_link_moves_destroy(lm);
		free(start);
		return pipette_fail(mp->err, "out of memory");
	}
	if (!pipette_link_moves_recall(lm, mp->pairs, mp->order)) {
		memcpy(start, mp->order, sizeof(int) * (size_t)mp->N);
		while (pipette_link_moves_next(lm, LINK_WORK_MAX, &i, &j))
			pipette_link_moves_verdict(lm, 1);
		pipette_link_moves_remember(lm, mp->pairs, start, mp->order);
	}
	pipette_link_moves_destroy(lm);
	free(start);
	return 0;
}

/* Unless a budget was given, what is left of it shrinks to what
 * SWEEP_WORK pays for from here (moves that re-read every rank). */
static void sweep_share(struct mapper *mp, const struct pipette_mapping_opts *o)
{
	if (!o->budget && mp->evals + sweep_budget(mp->c) < mp->budget)
		mp->budget = mp->evals + sweep_budget(mp->c);
}

/* The node order above PIPETTE_MAPPING_EXACT_MAX nodes (or annealed on
 * request).  From the chain; on a large cluster the link moves alone from
 * there (a start: on the generated 1024-4096-node clusters of
 * tests/bench/bench_plan.c, starting them from the block order too gained
 * nothing and cost a tenth of the plan's time), then the link moves judged
 * by the estimate from the best order; then annealing and the order
 * descent, which share what SWEEP_WORK pays for (unless a budget was
 * given) and what the budget leaves.  Annealing starts from the
 * incumbent: orders the judged moves reached on a plateau of equal
 * estimates beyond it are not kept. */
static int order_search(struct mapper *mp, const struct pipette_mapping_opts *o,
			enum pipette_mapping_end *end)
{
	long cap = mp->budget;
	double f;

	if (!mp->pairs) {
		if (!(mp->pairs = pipette_node_pairs_create(mp->cl)))
			return pipette_fail(mp->err, "out of memory");
		mp->own_pairs = 1;
	}
	chain_start(mp);
	if (evaluate(mp, &f))
		return -1;
	if (better(f, mp->best))
		keep_best(mp, f);
	if (mp->N > PIPETTE_MAPPING_EXACT_MAX && mp->evals < mp->budget) {
		if (unjudged_moves(mp) || evaluate(mp, &f))
			return -1;
		if (better(f, mp->best))
			keep_best(mp, f);
		restore_best(mp);
		if (link_moves(mp))
			return -1;
	}
	sweep_share(mp, o);
	if (anneal(mp, o) || order_descent(mp))
		return -1;
	*end = closed(mp) ? PIPETTE_MAP_END_BOUND : mp->evals >= mp->budget
	       ? PIPETTE_MAP_END_BUDGET : PIPETTE_MAP_END_LOCAL;
	mp->budget = cap;
	return 0;
}

/* Every inter-node link alike and every intra-node link alike: then
 * every node-block mapping has the block mapping's time. */
static int cluster_uniform(const struct pipette_cluster *cl, int N, int G)
{
	struct pipette_link ref, l;
	int a;

	if (N > 1) {
		ref = pipette_cluster_node_link(cl, 0, 1);
		for (a = 0; a < N; a++)
			for (int b = 0; b < N; b++) {
				if (a == b)
					continue;
				l = pipette_cluster_node_link(cl, a, b);
				if (l.gbps != ref.gbps || l.lat_us != ref.lat_us)
					return 0;
			}
	}
	if (G > 1) {
		ref = pipette_cluster_link(cl, 0, 1);
		for (a = 0; a < N; a++) {
			if (!intra_uniform(cl, a, G))
				return 0;
			l = pipette_cluster_link(cl, a * G, a * G + 1);
			if (l.gbps != ref.gbps || l.lat_us != ref.lat_us)
				return 0;
		}
	}
	return 1;
}

int pipette_mapping_search(struct pipette_timer *t, const struct pipette_model *m,
			   const struct pipette_gpu_spec *gpu,
			   const struct pipette_config *c,
			   const struct pipette_cluster *cl,
			   const struct pipette_mapping_opts *o, int *gpu_of_rank,
			   struct pipette_mapping_stats *st, struct pipette_err *err)
{
	struct mapper mp;
	struct pipette_mapping_opts defaults;
	int rv = -1, k, r, exact_order = 0;
	double f;

	if (!o) {
		pipette_mapping_opts_init(&defaults);
		o = &defaults;
	}
	memset(st, 0, sizeof(*st));
	memset(&mp, 0, sizeof(mp));
	mp.t = t;
	mp.m = m;
	mp.gpu = gpu;
	mp.c = c;
	mp.cl = cl;
	mp.err = err;
	mp.pairs = o->pairs && o->pairs->cl == cl ? o->pairs : NULL;
	mp.N = pipette_cluster_node_count(cl);
	mp.G = pipette_cluster_gpus_per_node(cl);
	mp.world = pipette_config_world(c);
	if (mp.world > mp.N * mp.G)
		return pipette_fail(err, "the configuration needs %d GPUs, the cluster has %d",
				    mp.world, mp.N * mp.G);
	mp.blocks = (mp.world + mp.G - 1) / mp.G;
	mp.budget = o->budget > 0 ? o->budget : ESTIMATES_MAX;
	mp.order = calloc((size_t)mp.N, sizeof(int));
	mp.best_order = calloc((size_t)mp.N, sizeof(int));
	mp.slot = calloc((size_t)mp.N * (size_t)mp.G, sizeof(int));
	mp.best_slot = calloc((size_t)mp.N * (size_t)mp.G, sizeof(int));
	mp.sigma = calloc((size_t)mp.world, sizeof(int));
	mp.sigma_node = malloc((size_t)mp.blocks * sizeof(int));
	mp.slot_moved = malloc((size_t)mp.N);
	if (!mp.order || !mp.best_order || !mp.slot || !mp.best_slot || !mp.sigma ||
	    !mp.sigma_node || !mp.slot_moved) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	for (k = 0; k < mp.N; k++)
		mp.order[k] = k;
	for (k = 0; k < mp.N * mp.G; k++)
		mp.slot[k] = k % mp.G;
	for (k = 0; k < mp.blocks; k++)
		mp.sigma_node[k] = -1;
	memset(mp.slot_moved, 0, (size_t)mp.N);
	if (evaluate(&mp, &f))
		goto out;
	keep_best(&mp, f);
	st->block_s = f;
	if (o->block_only || (mp.world == mp.N * mp.G && cluster_uniform(cl, mp.N, mp.G))) {
		/* nothing to search: the block mapping is optimal */
	} else if (placement_bound(&mp, &mp.bound)) {
		goto out;
	} else if (o->cutoff > 0 && mp.bound >= o->cutoff) {
		st->cut = 1;		/* no placement reaches the cutoff */
	} else if (mp.bound > 0 && mp.best <= mp.bound) {
		st->exhaustive = 1;	/* the block mapping meets the bound */
	} else if (mp.world % mp.G == 0 && mp.N >= 2) {
		if (o->force_exhaustive && mp.N <= 10) {
			if (exhaustive(&mp))
				goto out;
			st->exhaustive = 1;
		} else if (!o->force_anneal && mp.N <= PIPETTE_MAPPING_EXACT_MAX &&
			   (o->exact || !closed(&mp))) {
			mp.floor = o->exact ? 1 + BOUND_SLACK : 1 - GAP_STOP;
			if (branch_and_bound(&mp, &st->bounds))
				goto out;
			st->exhaustive = !mp.floored;
			st->end = mp.floored ? PIPETTE_MAP_END_FLOOR : PIPETTE_MAP_END_NONE;
			exact_order = 1;
		} else if (closed(&mp)) {
			st->end = PIPETTE_MAP_END_BOUND;
		} else if (order_search(&mp, o, &st->end)) {
			goto out;
		}
		/* Slot descent may spend a little beyond a budget the order
		 * search used up: it needs at least one pass per node. */
		if (mp.evals >= mp.budget)
			mp.budget = mp.evals + (long)mp.G * (mp.G - 1) / 2 * 2;
		/* After the exact order, two passes over every node's slot
		 * pairs (they gain as much again as the order on hetero-8x8,
		 * tests/bench/bench_plan.c). */
		if (exact_order && mp.evals + (long)mp.blocks * mp.G * (mp.G - 1) > mp.budget)
			mp.budget = mp.evals + (long)mp.blocks * mp.G * (mp.G - 1);
		/* Above the exact search, slot swaps share what SWEEP_WORK
		 * pays for, with what the budget leaves. */
		if (!exact_order)
			sweep_share(&mp, o);
		restore_best(&mp);
		if (!o->no_slots && slot_descent(&mp, &st->slot_nodes))
			goto out;
	} else if (mp.world % mp.G == 0 && mp.world == mp.G && !o->no_slots) {
		/* One node: only its slot order can change. */
		if (slot_descent(&mp, &st->slot_nodes))
			goto out;
	}
	restore_best(&mp);
	for (r = 0; r < mp.world; r++) {
		int n = mp.order[r / mp.G];

		gpu_of_rank[r] = n * mp.G + mp.slot[n * mp.G + r % mp.G];
	}
	st->best_s = mp.best;
	st->bound_s = mp.bound;
	st->evaluations = mp.evals;
	st->failed = mp.failed;
	rv = 0;
out:
	if (mp.own_pairs)
		pipette_node_pairs_destroy(mp.pairs);
	free(mp.order);
	free(mp.best_order);
	free(mp.slot);
	free(mp.best_slot);
	free(mp.sigma);
	free(mp.sigma_node);
	free(mp.slot_moved);
	return rv;
}
