/* pipette: swaps of the node order aimed at the slowest links the
 * configuration's rings and pipeline pairs cross; see mapping_int.h. */
#include "plan/mapping_int.h"
#include "inputs/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The penalty of a link is (fastest / link)^8 (penalty() below): a
 * stand-in for the bottleneck that stays a sum over links, so that a swap
 * is priced on the links of its two blocks.  A link at half the fastest
 * weighs as much as 256 at full speed, one at 0.9 (a leaf-switch crossing
 * of the examples, etc/examples) 2.3: slow hops go first, then needless
 * crossings.
 *
 * The effort, measured with the plans of tests/bench/bench_plan.c on its
 * generated 1024-, 2048- and 4096-node clusters (mapping gains; CPU time
 * of the whole plan):
 *  - HOT_MAX, the blocks a pass tries to move, worst first: 64 lost gain
 *    at 2048 nodes (1.168 against 1.198), 1024 gained nothing over 256
 *    and took twice the time;
 *  - PARTNERS, the swap partners of one block (all positions up to this
 *    many, else this many drawn, seeded): 64, 128 and 256 gave 1.184,
 *    1.185, 1.183 at 1024 nodes, 1.198, 1.152, 1.198 at 2048 and 1.178,
 *    1.178, 1.182 at 4096, in 0.80, 0.85 and 0.94 s at 1024 and 1.41,
 *    1.53, 1.76 s at 2048: a slow link has many good replacements among a
 *    few dozen nodes, and the cost of a move must not grow with the
 *    cluster;
 *  - PASS_MAX: 2 and 32 passes gained as much as 8;
 *  - the exponent: 4, 8 and 16 gave 1.183, 1.184, 1.183 at 1024 nodes,
 *    1.170, 1.198, 1.196 at 2048 and 1.194, 1.178, 1.180 at 4096. */
#define HOT_MAX 256
#define PARTNERS 64
#define PASS_MAX 8
/* A swap must lower the penalty by this share of the total, so that
 * rounding never swaps back and forth. */
#define MIN_GAIN 1e-12

struct block_graph {
	int blocks;
	int *off;		/* adjacency of block k: adj[off[k] .. off[k+1]) */
	int *adj;
};

/* Index of the next member of rank q's ring (stage-local index q; the
 * group has `size` members `stride` apart, as timing.c's groups do). */
static int ring_next(int q, int size, int stride)
{
	int along = (q / stride) % size;

	return along < size - 1 ? q + stride : q - (size - 1) * stride;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Pairs of distinct blocks joined by a hop the estimate prices
 * (timing.c): the TP, CP and EP rings, the data-parallel ring over dp x cp
 * (with FSDP its shard and replica rings instead), each rank's next stage,
 * and last stage -> first where a transfer crosses it: interleaved chunks
 * or the tied embedding's all-reduce (a V-shaped schedule turns around on
 * the last stage and ends on the first: neither). */
static int graph_pairs(const struct pipette_config *c, int tied, int G, uint64_t **out,
		       size_t *n_out)
{
	int per_stage = c->tp * c->cp * c->dp, world = pipette_config_world(c), r, k;
	int shard = c->dp_shard > 1 ? c->dp_shard : 1, fsdp = pipette_config_shard_group(c) > 1;
	const int rings[][2] = {
		{ c->tp, 1 }, { c->cp, c->tp }, { c->ep, c->etp },
		{ fsdp ? c->cp * shard : c->cp * c->dp, c->tp },
		{ fsdp ? c->dp / shard : 1, c->tp * c->cp * shard },
	};
	int n_rings = (int)(sizeof(rings) / sizeof(rings[0]));
	int wrap = c->pp > 1 && !pipette_schedule_is_v(c->schedule) &&
		   (pipette_config_chunks(c) > 1 || tied);
	uint64_t blocks = (uint64_t)(world + G - 1) / (uint64_t)G;
	size_t cap = (size_t)world * (size_t)(n_rings + 1), n = 0;
	uint64_t *p = malloc(cap * sizeof(*p));

	if (!p)
		return -1;
	for (r = 0; r < world; r++) {
		int s = r / per_stage, q = r % per_stage, a = r / G;

		for (k = 0; k <= n_rings; k++) {
			int b;

			if (k < n_rings) {
				if (rings[k][0] < 2 || per_stage % (rings[k][0] * rings[k][1]))
					continue;
				b = (s * per_stage + ring_next(q, rings[k][0], rings[k][1])) / G;
			} else if (s < c->pp - 1) {
				b = (r + per_stage) / G;
			} else if (wrap) {
				b = q / G;
			} else {
				continue;
			}
			if (a != b)
				p[n++] = a < b ? (uint64_t)a * blocks + (uint64_t)b
					       : (uint64_t)b * blocks + (uint64_t)a;
		}
	}
	qsort(p, n, sizeof(*p), cmp_u64);
	for (r = 0, k = 0; (size_t)r < n; r++)
		if (k == 0 || p[r] != p[k - 1])
			p[k++] = p[r];
	*out = p;
	*n_out = (size_t)k;
	return 0;
}

static void graph_free(struct block_graph *g)
{
	free(g->off);
	free(g->adj);
}

static int graph_build(const struct pipette_config *c, int tied, int G, struct block_graph *g)
{
	uint64_t *pairs;
	size_t n, i;
	int k, *fill;

	memset(g, 0, sizeof(*g));
	g->blocks = (pipette_config_world(c) + G - 1) / G;
	if (graph_pairs(c, tied, G, &pairs, &n))
		return -1;
	g->off = calloc((size_t)g->blocks + 1, sizeof(int));
	g->adj = malloc((2 * n + 1) * sizeof(int));
	fill = calloc((size_t)g->blocks, sizeof(int));
	if (!g->off || !g->adj || !fill) {
		free(pairs);
		free(fill);
		graph_free(g);
		return -1;
	}
	for (i = 0; i < n; i++) {
		g->off[pairs[i] / (uint64_t)g->blocks + 1]++;
		g->off[pairs[i] % (uint64_t)g->blocks + 1]++;
	}
	for (k = 0; k < g->blocks; k++)
		g->off[k + 1] += g->off[k];
	for (i = 0; i < n; i++) {
		int a = (int)(pairs[i] / (uint64_t)g->blocks), b = (int)(pairs[i] % (uint64_t)g->blocks);

		g->adj[g->off[a] + fill[a]++] = b;
		g->adj[g->off[b] + fill[b]++] = a;
	}
	free(pairs);
	free(fill);
	return 0;
}

struct descent {
	const struct block_graph *g;
	const struct pipette_node_pairs *np;
	int *order, N;
	double ref;		/* fastest link of the start's pairs */
	double *pen;		/* penalty of each of np's figures; NULL: no
				 * table */
	long work;		/* node links read */
	char *rejected;		/* block's last swap undone, nothing near it
				 * moved since: its best swap is the same */
};

/* The penalty of a link of gbps. */
static double penalty_of(double ref, double gbps)
{
	double v = ref / fmax(gbps, 1e-9);

	v *= v;
	v *= v;
	return v * v;
}

/* The penalty of the link between nodes x and y, its slower direction:
 * from the table of the figures' penalties where there is one (the same
 * doubles). */
static double penalty(struct descent *d, int x, int y)
{
	d->work++;
	if (d->pen && x != y)
		return d->pen[d->np->idx[pipette_node_pairs_cell(x, y)]];
	return penalty_of(d->ref, pipette_node_pairs_gbps(d->np, x, y));
}

/* The penalty of block k's links with block k on node x (and block
 * `other`, when adjacent, on node y: a swap of k and other). */
static double block_penalty(struct descent *d, int k, int x, int other, int y)
{
	double sum = 0;
	int e;

	for (e = d->g->off[k]; e < d->g->off[k + 1]; e++) {
		int b = d->g->adj[e];

		sum += penalty(d, x, b == other ? y : d->order[b]);
	}
	return sum;
}

/* The change a swap of positions i (a block) and j (a block or an idle
 * node) makes to the penalty; the pair (i, j) itself keeps its link. */
static double swap_delta(struct descent *d, int i, int j, const double *local)
{
	int x = d->order[i], y = d->order[j];
	double before = local[i], after = block_penalty(d, i, y, j, x);

	if (j < d->g->blocks) {
		before += local[j];
		after += block_penalty(d, j, x, i, y);
	}
	return after - before;
}

/* Block k moved: its penalty and its neighbours', whose best swaps may
 * differ now. */
static void refresh(struct descent *d, double *local, int k)
{
	int e;

	local[k] = block_penalty(d, k, d->order[k], -1, -1);
	d->rejected[k] = 0;
	for (e = d->g->off[k]; e < d->g->off[k + 1]; e++) {
		int b = d->g->adj[e];

		local[b] = block_penalty(d, b, d->order[b], -1, -1);
		d->rejected[b] = 0;
	}
}

struct pipette_link_moves {
	struct block_graph g;
	struct descent d;
	double *local;		/* penalty of each block's links */
	struct pipette_ranked *hot;	/* this pass's blocks, worst first:
					 * minus their penalty, block */
	double total;
	int n_hot, h;		/* hot blocks of the pass, the next one */
	int pass, kept;		/* passes begun, swaps kept in this one */
	int i, j;		/* the swap made last */
	double delta;
	uint64_t rng;		/* draws the partners */
};

struct pipette_link_moves *pipette_link_moves_create(const struct pipette_model *m,
						     const struct pipette_config *c,
						     const struct pipette_node_pairs *np, int G,
						     int N, int *order)
{
	struct pipette_link_moves *lm = calloc(1, sizeof(*lm));
	int k, e;

	if (!lm)
		return NULL;
	if (graph_build(c, m->tied_embeddings, G, &lm->g)) {
		free(lm);
		return NULL;
	}
	lm->d = (struct descent){ &lm->g, np, order, N, 0, NULL, 0,
				  calloc((size_t)lm->g.blocks, 1) };
	lm->local = malloc((size_t)lm->g.blocks * sizeof(*lm->local));
	lm->hot = malloc((size_t)lm->g.blocks * sizeof(*lm->hot));
	if (!lm->local || !lm->hot || !lm->d.rejected) {
		pipette_link_moves_destroy(lm);
		return NULL;
	}
	for (k = 0; k < lm->g.blocks; k++)
		for (e = lm->g.off[k]; e < lm->g.off[k + 1]; e++) {
			int x = order[k], y = order[lm->g.adj[e]];

			lm->d.ref = fmax(lm->d.ref, pipette_node_pairs_gbps(np, x, y));
		}
	if (np->idx) {
		if (!(lm->d.pen = malloc((size_t)(np->n_vals ? np->n_vals : 1) *
					 sizeof(*lm->d.pen)))) {
			pipette_link_moves_destroy(lm);
			return NULL;
		}
		for (k = 0; k < np->n_vals; k++)
			lm->d.pen[k] = penalty_of(lm->d.ref, np->vals[k]);
	}
	lm->h = -1;
	lm->rng = 0x6c696e6b73ULL;	/* "links" */
	return lm;
}

void pipette_link_moves_destroy(struct pipette_link_moves *lm)
{
	if (!lm)
		return;
	graph_free(&lm->g);
	free(lm->local);
	free(lm->hot);
	free(lm->d.rejected);
	free(lm->d.pen);
	free(lm);
}

long pipette_link_moves_work(const struct pipette_link_moves *lm)
{
	return lm->d.work;
}

/* A pass begins: every block's penalty, the HOT_MAX worst first. */
static void pass_begin(struct pipette_link_moves *lm)
{
	int B = lm->g.blocks, k;

	lm->total = 0;
	for (k = 0; k < B; k++) {
		lm->local[k] = block_penalty(&lm->d, k, lm->d.order[k], -1, -1);
		lm->hot[k] = (struct pipette_ranked){ -lm->local[k], k };
		lm->total += lm->local[k];
	}
	qsort(lm->hot, (size_t)B, sizeof(*lm->hot), pipette_cmp_ranked);
	/* drawn partners are new ones: a rejected block may find another */
	if (lm->d.N > PARTNERS)
		memset(lm->d.rejected, 0, (size_t)B);
	lm->n_hot = B < HOT_MAX ? B : HOT_MAX;
	lm->h = 0;
	lm->kept = 0;
	lm->pass++;
}

int pipette_link_moves_next(struct pipette_link_moves *lm, long work_max, int *i, int *j)
{
	struct descent *d = &lm->d;

	if (d->ref <= 0)
		return 0;
	for (;;) {
		if (lm->h < 0)
			pass_begin(lm);
		while (lm->h < lm->n_hot && d->work < work_max) {
			int a = lm->hot[lm->h++].id, b, n, best_j = -1;
			int tries = d->N <= PARTNERS ? d->N : PARTNERS;
			double best = -MIN_GAIN * lm->total;

			if (d->rejected[a])
				continue;
			for (n = 0; n < tries; n++) {
				double delta;

				b = d->N <= PARTNERS ? n : pipette_rng_below(&lm->rng, d->N);
				if (b == a)
					continue;
				delta = swap_delta(d, a, b, lm->local);
				if (delta < best) {
					best = delta;
					best_j = b;
				}
			}
			if (best_j < 0)
				continue;
			lm->i = *i = a;
			lm->j = *j = best_j;
			lm->delta = best;
			b = d->order[a];
			d->order[a] = d->order[best_j];
			d->order[best_j] = b;
			return 1;
		}
		if (d->work >= work_max || !lm->kept || lm->pass >= PASS_MAX)
			return 0;
		lm->h = -1;
	}
}

void pipette_link_moves_verdict(struct pipette_link_moves *lm, int keep)
{
	struct descent *d = &lm->d;
	int tmp;

	if (keep) {
		lm->total += 2 * lm->delta;	/* each link counts in both blocks */
		lm->kept++;
		refresh(d, lm->local, lm->i);
		if (lm->j < lm->g.blocks)
			refresh(d, lm->local, lm->j);
		return;
	}
	tmp = d->order[lm->i];
	d->order[lm->i] = d->order[lm->j];
	d->order[lm->j] = tmp;
	d->rejected[lm->i] = 1;
}

/* The block graph as memo_graph holds it: blocks, off[0..blocks],
 * adj[0..off[blocks]); its length in ints. */
static size_t graph_len(const struct block_graph *g)
{
	return 1 + (size_t)g->blocks + 1 + (size_t)g->off[g->blocks];
}

int pipette_link_moves_recall(const struct pipette_link_moves *lm,
			      const struct pipette_node_pairs *np, int *order)
{
	const struct block_graph *g = &lm->g;
	size_t n = (size_t)lm->d.N * sizeof(int);

	if (!np->memo_graph || np->memo_len != graph_len(g) || np->memo_graph[0] != g->blocks ||
	    memcmp(np->memo_graph + 1, g->off, ((size_t)g->blocks + 1) * sizeof(int)) ||
	    memcmp(np->memo_graph + 2 + g->blocks, g->adj, (size_t)g->off[g->blocks] * sizeof(int)) ||
	    memcmp(np->memo_start, order, n))
		return 0;
	memcpy(order, np->memo_order, n);
	return 1;
}

void pipette_link_moves_remember(const struct pipette_link_moves *lm,
				 struct pipette_node_pairs *np, const int *start, const int *order)
{
	const struct block_graph *g = &lm->g;
	size_t len = graph_len(g), n = (size_t)lm->d.N * sizeof(int);
	int *graph = malloc(len * sizeof(int)), *st = malloc(n), *to = malloc(n);

	if (!graph || !st || !to) {	/* nothing kept: the next one runs */
		free(graph);
		free(st);
		free(to);
		return;
	}
	graph[0] = g->blocks;
	memcpy(graph + 1, g->off, ((size_t)g->blocks + 1) * sizeof(int));
	memcpy(graph + 2 + g->blocks, g->adj, (size_t)g->off[g->blocks] * sizeof(int));
	memcpy(st, start, n);
	memcpy(to, order, n);
	free(np->memo_graph);
	free(np->memo_start);
	free(np->memo_order);
	np->memo_graph = graph;
	np->memo_start = st;
	np->memo_order = to;
	np->memo_len = len;
}
