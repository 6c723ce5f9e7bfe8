/* pipette: Slurm's topology/block blocks (topology.conf) as NVLink domains.
 *
 * A site that runs GB200/GB300 NVL72 racks under Slurm's topology/block
 * plugin describes each rack as a block (topology.conf(5), "topology/block";
 * SchedMD/slurm src/plugins/topology/block/block_record.c @284c3b95,
 * _read_topo_file):
 *
 *   BlockName=rack1 Nodes=gb[001-018]
 *   BlockName=rack2 Nodes=gb[019-036]
 *   BlockSizes=18,36
 *
 * Parameter names are case-insensitive, '#' starts a comment to the end
 * of the line, a '\' at the end of a line continues it.  BlockSizes lists
 * the planning base block size (nodes) and larger sizes, each the base
 * times a power of two (at most 2^15).  pipette reads each block as one
 * NVLink domain (cluster.h).  Node expressions are Slurm hostlists: the
 * caller expands them (libpipette never links Slurm; core/cli/hostlist.c
 * wraps slurm_hostlist_*). */
#ifndef PIPETTE_TOPOLOGY_H
#define PIPETTE_TOPOLOGY_H

#include <stddef.h>

#include "inputs/error.h"

/* Expand a Slurm hostlist expression into *n malloc'd names in *names
 * (each and the array released with free()); 0, or -1 with the message. */
typedef int (*pipette_hostlist_fn)(const char *list, char ***names, int *n,
				   struct pipette_err *err);

/* The largest topology.conf read (bytes): a file of 4096 blocks of
 * 64-character lines is a quarter of it. */
#define PIPETTE_TOPO_MAX_FILE_BYTES (1L << 20)

struct pipette_topology;

/* Read the blocks of a topology.conf.  Every error names the source and
 * the line: an unknown parameter (a topology/tree SwitchName line is not
 * a block), a block without Nodes or defined twice, a node in two blocks,
 * a block smaller than the base block size, a malformed BlockSizes. */
int pipette_topology_parse(const char *text, size_t len, const char *source,
			   pipette_hostlist_fn expand, struct pipette_topology **out,
			   struct pipette_err *err);
int pipette_topology_load(const char *path, pipette_hostlist_fn expand,
			  struct pipette_topology **out, struct pipette_err *err);
void pipette_topology_destroy(struct pipette_topology *t);

const char *pipette_topology_source(const struct pipette_topology *t);
/* SHA-256 of the bytes pipette_topology_load read (NULL: parsed from
 * memory), so that a Slurm step can pin every node to srun's file. */
const unsigned char *pipette_topology_sha256(const struct pipette_topology *t);
int pipette_topology_block_count(const struct pipette_topology *t);
const char *pipette_topology_block_name(const struct pipette_topology *t, int block);
/* Nodes of a block (0 when out of range). */
int pipette_topology_block_nodes(const struct pipette_topology *t, int block);
/* The block of a node, or -1.  O(log nodes). */
int pipette_topology_block_of(const struct pipette_topology *t, const char *node);
/* BlockSizes' base block size in nodes (0: not given). */
int pipette_topology_base_size(const struct pipette_topology *t);

#endif
