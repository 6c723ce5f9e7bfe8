/* pipette: the cluster a plan runs on.
 *
 * Ordered Slurm node names, the GPUs Slurm gave on each node, the GPU type
 * and every GPU-to-GPU link, resolved once at create time into arrays so
 * that a link query is O(1): the node x node links as indices into a
 * table of the distinct links (2 bytes each while there are at most 65536
 * of them; cluster.c), the GPU pairs of each node as the links.  Figures come from the bandwidth
 * cache (bwcache.h) in this order:
 *   inter-node: link override > matrix > cache defaults > gpu->nic_gbps
 *   intra-node: link override > the node's intra matrix (indexed by the
 *               Slurm GPU index) > cache defaults > gpu->nvlink_gbps
 * (overrides are folded into the matrix when the cache is loaded), and the
 * same for latency: the figure's lat_us > defaults > nic/nvlink_lat_us.
 * Inter-node figures are per node pair, as in the original Pipette's
 * measured matrix (one nccl-tests sendrecv busbw per node pair:
 * yimjinkyu1/date2024_pipette, Megatron-LM-2.5/strategy/nccl-test/
 * nccl-test-a100/round_robin_test.py:93-120 @a2b0683f); every GPU pair of
 * two nodes gets the node pair's figure.
 *
 * Nodes of one NVLink domain reach each other over NVLink: their
 * unmeasured links take the cache's intra-node defaults, else the GPU's
 * NVLink figure, not the NIC's; what a probe measured between them
 * stands.  A node's domain is, first found: its block in Slurm's
 * topology.conf (topology.h, when given), its domain in the bandwidth
 * cache (pipette-bw/3), its own when either names domains for any of the
 * cluster's nodes; else consecutive runs of gpu->nvlink_domain_gpus GPUs
 * in the cluster's order (which the plan makes canonical).  Where the
 * block and the cache both place nodes they must agree, and each domain
 * must fit the GPU type's domain size D (gpu->nvlink_domain_gpus, which
 * --nvlink-domain sets; one node's GPUs when it has none): a size the
 * cache states (the whole domain) must be D, the GPUs of a block's or a
 * cache domain's nodes at most D. */
#ifndef PIPETTE_CLUSTER_H
#define PIPETTE_CLUSTER_H

#include <stdint.h>

#include "inputs/bwcache.h"
#include "inputs/error.h"
#include "inputs/hardware.h"
#include "inputs/limits.h"

struct pipette_link {
	double gbps;	/* one direction, GB/s */
	double lat_us;
};

struct pipette_cluster;

/* nodes in Slurm order; gpu_ids: Slurm's GPU indices on each node (NULL =
 * 0..G-1), used to index the per-node intra matrix; bw may be NULL
 * (nominal figures of gpu).  A node missing from a non-NULL cache is an
 * error unless allow_missing (then defaults apply, with a warning text
 * retrievable from the cluster); so is a GPU index outside a node's
 * measured intra matrix.  1 <= n_nodes <= PIPETTE_MAX_NODES and
 * 1 <= gpus_per_node <= PIPETTE_MAX_GPUS (limits.h). */
struct pipette_cluster *pipette_cluster_create(const char *const *nodes,
					       int n_nodes, int gpus_per_node,
					       const int *gpu_ids,
					       const struct pipette_gpu_spec *gpu,
					       const struct pipette_bwcache *bw,
					       int allow_missing,
					       struct pipette_err *err);
/* The same with NVLink domains from Slurm's topology blocks too (topo may
 * be NULL). */
struct pipette_topology;
struct pipette_cluster *pipette_cluster_create_topo(const char *const *nodes,
						    int n_nodes, int gpus_per_node,
						    const int *gpu_ids,
						    const struct pipette_gpu_spec *gpu,
						    const struct pipette_bwcache *bw,
						    int allow_missing,
						    const struct pipette_topology *topo,
						    struct pipette_err *err);
void pipette_cluster_destroy(struct pipette_cluster *c);

/* A cluster of n nodes x g GPUs (slot = Slurm GPU index, nodes named
 * "position0".. ) whose every link is `l` until the caller sets it: the
 * optimistic clusters of the mapping search's lower bounds (mapping.c). */
struct pipette_cluster *pipette_cluster_create_blank(int n, int g,
						     const struct pipette_gpu_spec *gpu,
						     struct pipette_link l, struct pipette_err *err);
/* Set one direction of a link (a != b; out-of-range indices are ignored).
 * A blank cluster holds one figure for all its node links until the first
 * is set (then n x n of them): -1 when that allocation fails, or when the
 * store of the links must grow (cluster.c) and cannot. */
int pipette_cluster_set_node_link(struct pipette_cluster *c, int a, int b,
				  struct pipette_link l);
int pipette_cluster_set_intra_link(struct pipette_cluster *c, int node, int slot_a,
				   int slot_b, struct pipette_link l);
/* Every GPU pair of every node (slot a != b) at l; -1 when out of memory
 * (then the links are as before). */
int pipette_cluster_set_intra_all(struct pipette_cluster *c, struct pipette_link l);

int pipette_cluster_node_count(const struct pipette_cluster *c);
int pipette_cluster_gpus_per_node(const struct pipette_cluster *c);
const char *pipette_cluster_node_name(const struct pipette_cluster *c, int node);
/* Slurm's GPU index of a slot (the same on every node). */
int pipette_cluster_gpu_id(const struct pipette_cluster *c, int slot);
const struct pipette_gpu_spec *pipette_cluster_gpu(const struct pipette_cluster *c);

/* GPU index g = node*G + slot.  Direction a -> b, a != b (a == b gives
 * gbps = INFINITY, lat_us = 0).  O(1). */
struct pipette_link pipette_cluster_link(const struct pipette_cluster *c,
					 int gpu_a, int gpu_b);
/* Node-level inter-node figure a -> b (a != b). */
struct pipette_link pipette_cluster_node_link(const struct pipette_cluster *c,
					      int node_a, int node_b);
/* The node links at once, for a reader of all of them (plan/nodepairs.c):
 * the table of the distinct links and each ordered pair's 2-byte index
 * into it, pair (a, b) at a * n + b (the diagonal: a node with itself).
 * Returns the table's size, or 0 (and NULLs) when the cluster keeps its
 * node links otherwise (more than 65,536 distinct ones; a blank cluster's
 * one figure); then pipette_cluster_node_link reads them. */
int pipette_cluster_node_table(const struct pipette_cluster *c, const uint16_t **idx,
			       const struct pipette_link **tab);
/* The bandwidth of nodes a and b's link in its slower direction (GB/s):
 * what a ring or a pair that uses it both ways gets. */
double pipette_cluster_node_gbps(const struct pipette_cluster *c, int node_a, int node_b);

/* A stamp unique in the process to this cluster and its links: a new one
 * at creation and at every link set, so that figures derived from the
 * links can be cached by it. */
unsigned long pipette_cluster_version(const struct pipette_cluster *c);

/* Nodes per NVLink domain (1: each node its own); with domains of
 * several sizes (from the cache or Slurm's blocks), the greatest common
 * divisor of the nodes each has here, so that a group of that many
 * nodes' GPUs, or a divisor of it, tiles every domain. */
int pipette_cluster_domain_nodes(const struct pipette_cluster *c);
/* Whether nodes a and b share an NVLink domain. */
int pipette_cluster_same_domain(const struct pipette_cluster *c, int node_a, int node_b);

/* Newline-separated warnings from create, "" if none. */
const char *pipette_cluster_warnings(const struct pipette_cluster *c);

#endif
