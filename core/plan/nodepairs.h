/* pipette: the node pairs of one cluster, read once for every search of a
 * plan (the configuration search's ideal links, each mapping's chain and
 * link moves).
 *
 * The cluster keeps one link per ordered node pair (cluster.h); what the
 * mapping reads of a pair is its slower direction's bandwidth
 * (pipette_cluster_node_gbps), at random pairs, twice per read.  Here each
 * unordered pair holds a 2-byte index into the table of the distinct
 * figures (a cache's figures carry a few printed digits: 2,463 distinct
 * among the 8.4 million pairs of tests/bench/bench_plan.c's generated
 * 4096-node cluster), in a triangle of n (n - 1) / 2 cells: 16 MiB at 4096
 * nodes, read once.  Past 65,535 distinct figures there is no table and
 * every read goes to the cluster, as before.  The figures are the
 * cluster's doubles, unchanged: whatever is computed from them is what
 * the cluster's reads would give, bit for bit. */
#ifndef PIPETTE_NODEPAIRS_H
#define PIPETTE_NODEPAIRS_H

#include <stddef.h>
#include <stdint.h>

#include "inputs/cluster.h"

struct pipette_node_pairs {
	const struct pipette_cluster *cl;
	int n;
	uint16_t *idx;		/* pair x > y at x (x - 1) / 2 + y; NULL: no table */
	double *vals;		/* the distinct figures, as first read */
	int n_vals;
	/* Over every ordered pair of distinct nodes: the fastest bandwidth
	 * and the shortest latency (each on its own), {0, HUGE_VAL} for one
	 * node. */
	struct pipette_link best;
	int *chain;		/* the mapping's chain start (mapping.c), n; NULL
				 * until first asked */
	/* The last unjudged run of the mapping's link moves (mapping_links.c):
	 * its block graph (blocks, offsets, adjacency: memo_len ints), its
	 * start and the order it reached (n each); NULL until one ran. */
	int *memo_graph, *memo_start, *memo_order;
	size_t memo_len;
};

/* Reads every node pair of cl once; NULL when out of memory.  cl must
 * outlive it and stay unchanged. */
struct pipette_node_pairs *pipette_node_pairs_create(const struct pipette_cluster *cl);
void pipette_node_pairs_destroy(struct pipette_node_pairs *np);

/* The table's index of nodes x != y (np->idx set). */
static inline size_t pipette_node_pairs_cell(int x, int y)
{
	int hi = x > y ? x : y, lo = x > y ? y : x;

	return (size_t)hi * (size_t)(hi - 1) / 2 + (size_t)lo;
}

/* pipette_cluster_node_gbps(cl, x, y), from the table where there is one. */
static inline double pipette_node_pairs_gbps(const struct pipette_node_pairs *np, int x, int y)
{
	if (np->idx && x != y)
		return np->vals[np->idx[pipette_node_pairs_cell(x, y)]];
	return pipette_cluster_node_gbps(np->cl, x, y);
}

#endif
