/* pipette: the node pairs of one cluster in a compact table; see
 * nodepairs.h. */
#include "plan/nodepairs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Most distinct figures a 2-byte index can name. */
#define VALS_MAX 65535
/* Tile edge of the read: a tile's rows of both directions (64 links each)
 * stay in cache while its transposed half is read. */
#define TILE 64

/* Distinct figures by their bits: open addressing, keys stored plus one
 * (0 = empty), at most half full.  It starts small: a cache's few
 * thousand figures stay in the first level of cache with their keys. */
#define HASH_MIN 4096
struct vals_hash {
	uint64_t *key;
	uint16_t *val;
	uint32_t mask;
};

/* Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4). */
static uint32_t hash_slot(uint64_t k, uint32_t mask)
{
	return (uint32_t)((k * 0x9e3779b97f4a7c15ULL) >> 40) & mask;
}

static int hash_init(struct vals_hash *h, uint32_t slots)
{
	h->mask = slots - 1;
	h->key = calloc(slots, sizeof(*h->key));
	h->val = malloc(slots * sizeof(*h->val));
	return h->key && h->val ? 0 : -1;
}

/* Twice the slots; -1 when out of memory (h unchanged). */
static int hash_grow(struct vals_hash *h)
{
	struct vals_hash g;
	uint32_t i, j;

	if (hash_init(&g, 2 * (h->mask + 1))) {
		free(g.key);
		free(g.val);
		return -1;
	}
	for (i = 0; i <= h->mask; i++)
		if (h->key[i]) {
			for (j = hash_slot(h->key[i], g.mask); g.key[j]; j = (j + 1) & g.mask)
				;
			g.key[j] = h->key[i];
			g.val[j] = h->val[i];
		}
	free(h->key);
	free(h->val);
	*h = g;
	return 0;
}

/* The index of figure v, added when new; -1 past VALS_MAX figures or out
 * of memory. */
static long vals_index(struct pipette_node_pairs *np, struct vals_hash *h, double v)
{
	uint64_t k;
	uint32_t i;

	memcpy(&k, &v, sizeof(k));
	k++;
	for (i = hash_slot(k, h->mask); h->key[i]; i = (i + 1) & h->mask)
		if (h->key[i] == k)
			return h->val[i];
	if (np->n_vals == VALS_MAX)
		return -1;
	if (2 * ((uint32_t)np->n_vals + 1) > h->mask + 1) {
		if (hash_grow(h))
			return -1;
		for (i = hash_slot(k, h->mask); h->key[i]; i = (i + 1) & h->mask)
			;
	}
	h->key[i] = k;
	h->val[i] = (uint16_t)np->n_vals;
	np->vals[np->n_vals] = v;
	return np->n_vals++;
}

/* The pairs of tile (X, Y), Y <= X: each pair's slower direction into the
 * table while there is one, every link into np->best. */
static void read_tile(struct pipette_node_pairs *np, struct vals_hash *h, int X, int Y)
{
	int x, y;

	for (x = X; x < X + TILE && x < np->n; x++)
		for (y = Y; y < Y + TILE && y < x; y++) {
			struct pipette_link a = pipette_cluster_node_link(np->cl, x, y);
			struct pipette_link b = pipette_cluster_node_link(np->cl, y, x);
			long k;

			/* fmax's and fmin's folds (a NaN never wins), without
			 * their calls */
			if (a.gbps > np->best.gbps)
				np->best.gbps = a.gbps;
			if (b.gbps > np->best.gbps)
				np->best.gbps = b.gbps;
			if (a.lat_us < np->best.lat_us)
				np->best.lat_us = a.lat_us;
			if (b.lat_us < np->best.lat_us)
				np->best.lat_us = b.lat_us;
			if (!np->idx)
				continue;
			/* pipette_cluster_node_gbps's min, the same double */
			k = vals_index(np, h, a.gbps < b.gbps ? a.gbps : b.gbps);
			if (k < 0) {
				free(np->idx);	/* too many figures (or no memory
						 * for them): no table */
				np->idx = NULL;
				continue;
			}
			np->idx[pipette_node_pairs_cell(x, y)] = (uint16_t)k;
		}
}

/* read_tile from the cluster's table of distinct links (cluster.h
 * pipette_cluster_node_table): a pair's slower direction is one of its two
 * links' table entries, whose figure is looked up once per entry (vidx,
 * -1 until first needed), and each entry joins np->best when first seen,
 * in read_tile's order, so that the folds keep the same figure (the first
 * of equals).  At 4096 nodes, 8.4 million pairs: 890 M instructions to
 * 400 M (callgrind). */
struct node_table {
	const uint16_t *idx;
	const struct pipette_link *tab;
	int32_t *vidx;
	char *seen;
};

static void fold_best(struct pipette_node_pairs *np, const struct pipette_link *l)
{
	if (l->gbps > np->best.gbps)
		np->best.gbps = l->gbps;
	if (l->lat_us < np->best.lat_us)
		np->best.lat_us = l->lat_us;
}

static void read_tile_table(struct pipette_node_pairs *np, struct vals_hash *h,
			    struct node_table *nt, int X, int Y)
{
	size_t n = (size_t)np->n;
	int x, y;

	for (x = X; x < X + TILE && x < np->n; x++)
		for (y = Y; y < Y + TILE && y < x; y++) {
			uint16_t ka = nt->idx[(size_t)x * n + y], kb = nt->idx[(size_t)y * n + x], k;

			if (!nt->seen[ka]) {
				nt->seen[ka] = 1;
				fold_best(np, &nt->tab[ka]);
			}
			if (!nt->seen[kb]) {
				nt->seen[kb] = 1;
				fold_best(np, &nt->tab[kb]);
			}
			if (!np->idx)
				continue;
			/* pipette_cluster_node_gbps's min, the same double */
			k = nt->tab[ka].gbps < nt->tab[kb].gbps ? ka : kb;
			if (nt->vidx[k] < 0) {
				long v = vals_index(np, h, nt->tab[k].gbps);

				if (v < 0) {
					free(np->idx);	/* too many figures: no table */
					np->idx = NULL;
					continue;
				}
				nt->vidx[k] = (int32_t)v;
			}
			np->idx[pipette_node_pairs_cell(x, y)] = (uint16_t)nt->vidx[k];
		}
}

struct pipette_node_pairs *pipette_node_pairs_create(const struct pipette_cluster *cl)
{
	struct pipette_node_pairs *np = calloc(1, sizeof(*np));
	struct vals_hash h = { NULL, NULL, 0 };
	struct node_table nt = { NULL, NULL, NULL, NULL };
	size_t cells;
	int X, Y, n_tab;

	if (!np)
		return NULL;
	np->cl = cl;
	np->n = pipette_cluster_node_count(cl);
	np->best = (struct pipette_link){ 0, HUGE_VAL };
	cells = np->n > 1 ? (size_t)np->n * (size_t)(np->n - 1) / 2 : 1;
	np->idx = malloc(cells * sizeof(*np->idx));
	np->vals = malloc(VALS_MAX * sizeof(*np->vals));
	if (hash_init(&h, HASH_MIN) || !np->idx || !np->vals) {
		free(h.key);
		free(h.val);
		pipette_node_pairs_destroy(np);
		return NULL;
	}
	n_tab = pipette_cluster_node_table(cl, &nt.idx, &nt.tab);
	if (n_tab > 0) {
		nt.vidx = malloc((size_t)n_tab * sizeof(*nt.vidx));
		nt.seen = calloc((size_t)n_tab, 1);
		if (nt.vidx)
			memset(nt.vidx, 0xff, (size_t)n_tab * sizeof(*nt.vidx));	/* -1 */
	}
	for (X = 0; X < np->n; X += TILE)
		for (Y = 0; Y <= X; Y += TILE)
			if (nt.vidx && nt.seen)
				read_tile_table(np, &h, &nt, X, Y);
			else
				read_tile(np, &h, X, Y);
	free(nt.vidx);
	free(nt.seen);
	free(h.key);
	free(h.val);
	return np;
}

void pipette_node_pairs_destroy(struct pipette_node_pairs *np)
{
	if (!np)
		return;
	free(np->idx);
	free(np->vals);
	free(np->chain);
	free(np->memo_graph);
	free(np->memo_start);
	free(np->memo_order);
	free(np);
}
