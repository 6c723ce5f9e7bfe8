/* pipette: the mapping search's private parts (mapping.c). */
#ifndef PIPETTE_MAPPING_INT_H
#define PIPETTE_MAPPING_INT_H

#include "inputs/cluster.h"
#include "inputs/config.h"
#include "inputs/model.h"
#include "plan/nodepairs.h"

/* An index with a key, sorted by key, ties by index (qsort with
 * pipette_cmp_ranked: a deterministic order). */
struct pipette_ranked {
	double key;
	int id;
};

static inline int pipette_cmp_ranked(const void *a, const void *b)
{
	const struct pipette_ranked *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->id - y->id;
}

/* Swaps of the node order aimed at slow links (mapping_links.c).
 *
 * The estimate is a bottleneck function: a data-parallel ring runs at its
 * slowest hop, a pipeline boundary at the slowest of its parallel links
 * (timing.c).  On hundreds of nodes a random move of the order rarely
 * touches such a hop, and repairing one moves the estimate only once every
 * hop as slow is repaired too, so annealing on the estimate alone crosses
 * plateaus blind.  These moves work on the links instead: two rank blocks
 * are adjacent when a ring hop (TP, CP, the DP ring over dp x cp, FSDP's
 * shard and replica rings, EP; members in rank order, as timing.c walks
 * them) or a pipeline pair joins them, and each move lowers the sum over
 * adjacent blocks of (fastest / link)^8, a smooth stand-in for the slowest
 * link: in passes over the worst blocks (by that sum), each block's best
 * swap with any node (idle ones included; above 64 nodes, with the best
 * of 64 drawn), if it lowers the sum.  Passes
 * go on while one kept a swap.  The caller judges each swap (by the
 * estimate, or not at all) and keeps or undoes it; every kept swap lowers
 * the sum, so the moves never cycle.  Deterministic.
 *
 * order: N nodes, the first ceil(world / G) hold rank blocks; the moves
 * swap its entries in place, and the caller changes it only through the
 * verdicts. */
struct pipette_link_moves;

/* NULL when out of memory. */
struct pipette_link_moves *pipette_link_moves_create(const struct pipette_model *m,
						     const struct pipette_config *c,
						     const struct pipette_node_pairs *np, int G,
						     int N, int *order);
void pipette_link_moves_destroy(struct pipette_link_moves *lm);
/* Make the next swap (positions *i and *j of order): 1, or 0 when no swap
 * lowers the sum any more or work_max links have been read. */
int pipette_link_moves_next(struct pipette_link_moves *lm, long work_max, int *i, int *j);
/* Keep the swap just made, or undo it. */
void pipette_link_moves_verdict(struct pipette_link_moves *lm, int keep);
/* Node links read so far. */
long pipette_link_moves_work(const struct pipette_link_moves *lm);
/* The moves with every swap kept are a function of the block graph, the
 * start order and the node pairs: a run's result is kept in np, and a
 * later run on the same graph from the same start takes it.  recall: 1
 * and the result in order when order is that start; remember: keep this
 * run's (nothing kept when out of memory). */
int pipette_link_moves_recall(const struct pipette_link_moves *lm,
			      const struct pipette_node_pairs *np, int *order);
void pipette_link_moves_remember(const struct pipette_link_moves *lm,
				 struct pipette_node_pairs *np, const int *start, const int *order);

#endif
