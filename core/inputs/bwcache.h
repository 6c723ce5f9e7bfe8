/* pipette: the bandwidth cache (schemas "pipette-bw/1" and "pipette-bw/2").
 *
 * One JSON file keyed by Slurm node names, so that the plugin finds a job's
 * nodes (SLURM_JOB_NODELIST) in it directly; man pipette-bandwidth(5):
 *
 *   {
 *     "schema": "pipette-bw/1", "units": "GB/s",
 *     "generated": "2025-01-01T00:00:00Z",          optional
 *     "generator": "pipette bandwidth generate ...", optional, free text
 *     "defaults": { "inter_gbps": 45, "intra_gbps": 380,
 *                   "lat_us": 5, "intra_lat_us": 2 },  all optional
 *     "inter": {                                     optional
 *       "tool": "nccl-tests sendrecv_perf", "metric": "busbw",
 *       "bytes": 31457280, "when": "2025-01-01T00:00:00Z", "lat_us": 5,
 *       "order": ["gpu001", "gpu002"],
 *       "matrix": [[null, 23.1], [23.0, null]],      i -> j, null = unmeasured
 *       "links": [ { "a": "gpu001", "b": "gpu002", "gbps": 12.0,
 *                    "lat_us": 6.1, "when": "...", "tool": "...",
 *                    "metric": "...", "bytes": 1048576 } ]
 *     },
 *     "nodes": {                                     optional
 *       "gpu001": { "gpus": [...], "topo": [...],    kept verbatim
 *                   "intra": { same keys as "inter" but no "order";
 *                              the matrix is indexed by Slurm's GPU index;
 *                              links name GPUs by index: "a": 0, "b": 3 } }
 *     }
 *   }
 *
 * A figure is one direction of one link: GB/s (1e9 bytes/s), a latency in
 * microseconds, and its provenance (tool, metric, message bytes, time).
 * "links" override the matrix (and inherit the section's provenance for
 * the keys they leave out); the section's "when" defaults to "generated".
 * Unmeasured figures fall back to "defaults", then to the GPU's nominal
 * figures (cluster.h).  Times are UTC, "YYYY-MM-DDTHH:MM:SSZ".
 *
 * "pipette-bw/2" states inter-node figures per group of nodes (a leaf
 * switch, a rack), so that a cache of thousands of nodes need not list
 * every node pair; everything of pipette-bw/1 keeps its meaning:
 *
 *     "inter": { ...,
 *       "order": ["gpu001", ..., "gpu064"],
 *       "groups": [ { "name": "leaf0", "nodes": [[0, 31]] },
 *                   { "name": "leaf1", "nodes": ["gpu033", [33, 63]] } ],
 *       "between": [[45.0, 40.5], [40.3, 44.8]],  group i -> group j;
 *                                    [g][g]: two nodes of group g
 *       "matrix": [...], "links": [...] }        both optional, as in /1
 *
 * A group's "nodes" are names from "order" or inclusive index ranges
 * [first, last] into it; a node is in at most one group.  A node pair's
 * figure is its link, else its matrix entry, else its groups' "between"
 * figure (with the section's provenance and latency); a group pair's
 * null says nothing.
 *
 * "pipette-bw/3" adds the NVLink domains that span nodes (a GB200/GB300
 * NVL72 rack: 18 Slurm nodes of 4 GPUs in one 72-GPU domain); everything
 * of pipette-bw/2 keeps its meaning:
 *
 *     "domains": [ { "name": "<fabric cluster UUID>:<clique id>",
 *                    "gpus": 72,                   optional: its size
 *                    "nodes": ["gpu001", [1, 15]] } ]
 *
 * A domain's "nodes" are names of the cache's nodes ("order", then the
 * keys of "nodes") or index ranges into $.inter.order; a node is in at
 * most one domain, a node in none is a domain of its own.  "gpus" is the
 * whole domain's GPU count, which may exceed its nodes' here (a rack with
 * trays out of service).  The figures measured between two nodes of one
 * domain (over NVLink) are the inter section's, as between any two nodes.
 * The writer emits /3 when the cache has domains, else /2 when it has
 * groups, else /1.
 *
 * Library only: json-c, no Slurm.  Hostlists are expanded by the CLI. */
#ifndef PIPETTE_BWCACHE_H
#define PIPETTE_BWCACHE_H

#include <stddef.h>
#include <time.h>

#include "inputs/error.h"
#include "inputs/limits.h"

#define PIPETTE_BW_SCHEMA "pipette-bw/1"
#define PIPETTE_BW_SCHEMA_V2 "pipette-bw/2"
#define PIPETTE_BW_SCHEMA_V3 "pipette-bw/3"
/* Input limits: a file beyond them is rejected, never half-read.  A cache
 * holds at most the nodes and GPUs per node a plan can use (limits.h). */
#define PIPETTE_BW_MAX_NODES PIPETTE_MAX_NODES
#define PIPETTE_BW_MAX_GPUS PIPETTE_MAX_GPUS
#define PIPETTE_BW_MAX_FILE_BYTES (256L << 20)
#define PIPETTE_BW_MAX_NAME 255
/* Plausibility bounds.  The fastest link in the GPU table is NVLink 5
 * (B200: 900 GB/s per direction, NVIDIA Blackwell datasheet); 10 TB/s is
 * an order of magnitude above it, so a larger figure is a unit error
 * (MB/s or Gb/s written as GB/s).  One second of latency is a dead link. */
#define PIPETTE_BW_MAX_GBPS 10000.0
#define PIPETTE_BW_MAX_LAT_US 1e6
#define PIPETTE_BW_MAX_BYTES 1099511627776.0	/* 1 TiB message */

struct pipette_bwcache;

/* Where a figure came from.  Strings may be NULL (unknown); bytes 0 =
 * unknown; when (time_t)-1 = unknown. */
struct pipette_bw_prov {
	const char *tool;
	const char *metric;
	double bytes;
	time_t when;
};

/* One direction of one link.  gbps and lat_us are NaN when unmeasured. */
struct pipette_bw_figure {
	double gbps;
	double lat_us;
	struct pipette_bw_prov prov;	/* strings owned by the cache */
};

/* Cache-wide fallbacks; NaN = not given. */
struct pipette_bw_defaults {
	double inter_gbps;
	double intra_gbps;
	double inter_lat_us;	/* JSON "lat_us" */
	double intra_lat_us;
};

/* ---- lifetime and I/O ---- */

/* An empty cache (no nodes, no defaults), or NULL when out of memory. */
struct pipette_bwcache *pipette_bwcache_create(void);
void pipette_bwcache_destroy(struct pipette_bwcache *bw);

/* Load and validate a file.  Every error names the file, the JSON path
 * ("$.inter.matrix[2][3]") or line, and what was expected. */
int pipette_bwcache_load(const char *path, struct pipette_bwcache **out,
			 struct pipette_err *err);
/* The same without the SHA-256 of the file (pipette_bwcache_sha256 gives
 * NULL), for a reader that pins no plan to it (bandwidth validate). */
int pipette_bwcache_load_unhashed(const char *path, struct pipette_bwcache **out,
				  struct pipette_err *err);
/* The same from memory; `source` names the input in messages. */
int pipette_bwcache_parse(const char *text, size_t len, const char *source,
			  struct pipette_bwcache **out, struct pipette_err *err);

/* The canonical JSON text (deterministic: same cache, same bytes); the
 * caller frees it.  NULL on error. */
char *pipette_bwcache_serialize(const struct pipette_bwcache *bw,
				struct pipette_err *err);
/* SHA-256 of the bytes the cache was loaded from (pipette_bwcache_load;
 * changes made since do not alter it), or NULL when it was not loaded
 * from a file. */
const unsigned char *pipette_bwcache_sha256(const struct pipette_bwcache *bw);

/* Writers of one cache file take turns: each holds an exclusive fcntl(2)
 * record lock of the file PATH.lock beside it (created when missing, left
 * in place) from before it reads what it will change until its new file
 * is in place, so that concurrent merges lose no update.  Waits at most
 * wait_s seconds, then fails naming the lock file; the file system must
 * support POSIX record locks across the nodes that write
 * (pipette-bandwidth(5)).  PATH must not be a directory or a device. */
#define PIPETTE_BW_LOCK_WAIT_S 120.0
struct pipette_bwcache_lock;
int pipette_bwcache_lock(const char *path, double wait_s,
			 struct pipette_bwcache_lock **out, struct pipette_err *err);
/* Release the lock and free it (NULL is fine). */
void pipette_bwcache_unlock(struct pipette_bwcache_lock *lock);
/* Atomic write of the locked file: a temporary file ".BASE.tmp.PID.XXXXXX"
 * in the same directory, fsync, rename, fsync of the directory.  On
 * failure the old file is untouched and no temporary file is left;
 * temporary files a killed writer left are removed first (none can be a
 * live writer's: the lock is held).  The new file keeps the old one's
 * mode, or gets 0644 (the plugin reads it as the job's user). */
int pipette_bwcache_save_locked(const struct pipette_bwcache *bw,
				const struct pipette_bwcache_lock *lock,
				struct pipette_err *err);
/* Lock PATH (waiting up to PIPETTE_BW_LOCK_WAIT_S), save, unlock. */
int pipette_bwcache_save(const struct pipette_bwcache *bw, const char *path,
			 struct pipette_err *err);
/* Under PATH's lock: load the cache at PATH (none: start empty), fold
 * `src` into it (pipette_bwcache_merge) and save it. */
int pipette_bwcache_merge_file(const char *path, const struct pipette_bwcache *src,
			       struct pipette_err *err);

/* ---- queries ---- */

int pipette_bwcache_node_count(const struct pipette_bwcache *bw);
const char *pipette_bwcache_node_name(const struct pipette_bwcache *bw, int node);
/* Index of a node name, or -1. */
int pipette_bwcache_node_index(const struct pipette_bwcache *bw, const char *name);
/* Size of the node's intra matrix (0 = none measured). */
int pipette_bwcache_node_gpus(const struct pipette_bwcache *bw, int node);
/* Fill *out and return 1 when measured, 0 when not (NaN figures), -1 on
 * an index out of range. */
int pipette_bwcache_inter(const struct pipette_bwcache *bw, int a, int b,
			  struct pipette_bw_figure *out);
int pipette_bwcache_intra(const struct pipette_bwcache *bw, int node, int gpu_a,
			  int gpu_b, struct pipette_bw_figure *out);
void pipette_bwcache_get_defaults(const struct pipette_bwcache *bw,
				  struct pipette_bw_defaults *out);
/* (time_t)-1 when the file gave no "generated". */
time_t pipette_bwcache_generated(const struct pipette_bwcache *bw);
/* The schema of the file the cache was loaded from; for a cache built in
 * memory, the one pipette_bwcache_serialize writes (pipette-bw/2 when it
 * has groups). */
const char *pipette_bwcache_schema(const struct pipette_bwcache *bw);
/* Directed inter-node node pairs (a != b) with a measured figure, its own
 * or its groups'; -1 when out of memory. */
long pipette_bwcache_measured(const struct pipette_bwcache *bw);
/* Bytes the cache holds in memory (figures, names, provenance). */
size_t pipette_bwcache_bytes(const struct pipette_bwcache *bw);

/* NVLink domains (pipette-bw/3): how many, the name of domain d and its
 * stated size in GPUs (0: not stated; NULL / 0 when out of range), the
 * domain of a node (-1: none), the nodes of domain d. */
int pipette_bwcache_domain_count(const struct pipette_bwcache *bw);
const char *pipette_bwcache_domain_name(const struct pipette_bwcache *bw, int domain);
int pipette_bwcache_domain_gpus(const struct pipette_bwcache *bw, int domain);
int pipette_bwcache_node_domain(const struct pipette_bwcache *bw, int node);
int pipette_bwcache_domain_nodes(const struct pipette_bwcache *bw, int domain);
/* Drop every NVLink domain (nodes keep their figures). */
void pipette_bwcache_clear_domains(struct pipette_bwcache *bw);
/* Each domain's size against an NVLink domain of domain_gpus GPUs (the
 * GPU type's or --nvlink-domain's; <= 0: not checked) and nodes of
 * gpus_per_node GPUs (<= 0: not checked): a stated size must be a whole
 * number of nodes and equal it, the nodes in the cache at most fill it.
 * -1 with "$.domains[i]...: ..." (the caller names the file). */
int pipette_bwcache_check_domains(const struct pipette_bwcache *bw, int gpus_per_node,
				  int domain_gpus, struct pipette_err *err);
/* Directed node pairs inside one domain with a measured figure (its own
 * or its groups'); -1 when out of memory. */
long pipette_bwcache_domain_measured(const struct pipette_bwcache *bw);
/* Put `node` (added when new) in the NVLink domain `domain` (added when
 * new, stating `gpus`, 0: not stated).  A node already in another domain
 * is an error unless `move`; a stated size that differs from the
 * domain's is an error. */
int pipette_bwcache_set_domain(struct pipette_bwcache *bw, const char *node,
			       const char *domain, int gpus, int move,
			       struct pipette_err *err);
/* Groups of nodes (pipette-bw/2): how many, the name of group g (NULL
 * when out of range), the group of a node (-1: none). */
int pipette_bwcache_group_count(const struct pipette_bwcache *bw);
const char *pipette_bwcache_group_name(const struct pipette_bwcache *bw, int group);
int pipette_bwcache_node_group(const struct pipette_bwcache *bw, int node);
/* Restate the inter-node figures per group: group_of[i] is the group
 * (index into names[0..n_groups)) of cache node i, or -1.  A group pair
 * gets a figure only when every node pair of it is measured, all with one
 * provenance and latency, the one that covers the most node pairs among
 * such group pairs; its figure is the lower median of theirs (one of
 * them).  A node pair keeps a figure of its own where it differs from its
 * groups' by more than `tolerance` (relative, in [0, 1); 0: any
 * difference, so that nothing is lost); the others take the group's.
 * Groups the cache had are replaced.  Needs no hostlist: the CLI expands
 * them.  On failure the cache says what it said before (without groups). */
int pipette_bwcache_set_groups(struct pipette_bwcache *bw, int n_groups,
			       const char *const *names, const int *group_of,
			       double tolerance, struct pipette_err *err);
/* Give every node pair the figure its groups gave it and drop the groups,
 * so that the cache is written as pipette-bw/1. */
int pipette_bwcache_ungroup(struct pipette_bwcache *bw, struct pipette_err *err);

/* Count the measured figures among `nodes` (NULL = all) older than
 * max_age_s at `now`, or of unknown age.  When there are any, `msg` gets a
 * one-line warning naming the oldest figure.  Returns the count. */
int pipette_bwcache_stale(const struct pipette_bwcache *bw,
			  const char *const *nodes, int n_nodes, time_t now,
			  double max_age_s, char *msg, size_t msg_size);

/* ---- building (the probe and the importers) ---- */

int pipette_bwcache_set_defaults(struct pipette_bwcache *bw,
				 const struct pipette_bw_defaults *d,
				 struct pipette_err *err);
void pipette_bwcache_set_generated(struct pipette_bwcache *bw, time_t when);
/* Free text recorded as "generator" (e.g. the command line). */
int pipette_bwcache_set_generator(struct pipette_bwcache *bw, const char *text,
				  struct pipette_err *err);
/* Add a node (no figures) or find it; returns its index or -1. */
int pipette_bwcache_add_node(struct pipette_bwcache *bw, const char *name,
			     struct pipette_err *err);
/* Record one direction a -> b between nodes (added when new).  lat_us may
 * be NaN (not measured); gbps must be measured.  Replaces what was there. */
int pipette_bwcache_set_inter(struct pipette_bwcache *bw, const char *a,
			      const char *b, double gbps, double lat_us,
			      const struct pipette_bw_prov *prov,
			      struct pipette_err *err);
/* Record GPU gpu_a -> gpu_b (Slurm GPU indices) inside `node`; the node's
 * intra matrix grows to cover both indices. */
int pipette_bwcache_set_intra(struct pipette_bwcache *bw, const char *node,
			      int gpu_a, int gpu_b, double gbps, double lat_us,
			      const struct pipette_bw_prov *prov,
			      struct pipette_err *err);
/* Fold `src` into `dst`, link by link: a measured figure of src replaces
 * dst's when dst's is unmeasured or not newer (unknown time is oldest; on
 * equal times src wins).  Figures src did not measure keep dst's values
 * and timestamps.  Nodes new to dst are appended in src's order; src's
 * defaults replace dst's where given; a node src puts in an NVLink domain
 * moves to it (the newer probe saw it there), others keep dst's. */
int pipette_bwcache_merge(struct pipette_bwcache *dst,
			  const struct pipette_bwcache *src,
			  struct pipette_err *err);

/* ---- times ---- */

/* "YYYY-MM-DDTHH:MM:SSZ" <-> time_t (UTC).  parse returns -1 on a
 * malformed or out-of-range string. */
int pipette_bw_parse_time(const char *s, time_t *out);
/* buf needs 21 bytes; (time_t)-1 prints "unknown". */
const char *pipette_bw_format_time(time_t t, char *buf, size_t size);

/* ---- converters (bwimport.c) ---- */

/* Pipette's original {"gpus": [hosts], "bandwidth": [["GB/s", ...]]}
 * (round_robin_test.py:117-125 of yimjinkyu1/date2024_pipette @a2b0683,
 * under Megatron-LM-2.5/strategy/nccl-test/nccl-test-a100/): node x node
 * sendrecv busbw as strings or
 * numbers, symmetric; the diagonal, an 8-GPU intra-node sendrecv busbw, is
 * recorded for every GPU pair 0..gpus_per_node-1 of that node.  Figures are
 * added into bw with tool "pipette-legacy nccl-tests sendrecv_perf",
 * metric busbw, 30 MiB, time `when`. */
int pipette_bwcache_import_legacy(struct pipette_bwcache *bw, const char *path,
				  int gpus_per_node, time_t when,
				  struct pipette_err *err);

/* nccl-tests text output (sendrecv_perf, all_reduce_perf, ...) of one run.
 * The node pair comes from pair_a/pair_b when given, else from the
 * "#  Rank N Group G Pid P on HOST device D" lines: two hosts = one
 * inter-node pair (both directions get the figure: a two-node sendrecv
 * ring sends both ways at once); one host = intra-node, every hop of the
 * ring of devices r -> r+1 gets it.  The figure is the out-of-place busbw
 * (column found by name in the header) of the row with `bytes` (0 = the
 * largest size).  For sendrecv_perf the time of the smallest message of at
 * most 64 KiB becomes lat_us. */
struct pipette_nccl_import {
	const char *pair_a, *pair_b;	/* NULL: from the Rank lines */
	double bytes;			/* 0: largest size in the table */
	const char *tool;		/* NULL: "nccl-tests " + program */
	time_t when;
};
int pipette_bwcache_import_nccl(struct pipette_bwcache *bw, const char *path,
				const struct pipette_nccl_import *opt,
				struct pipette_err *err);

/* ---- synthetic caches for the examples and tests (bwgen.c) ---- */

/* Deterministic: the same parameters give the same cache, byte for byte
 * once serialized, on every platform (splitmix64, no libc rand). */
struct pipette_bw_gen {
	unsigned long long seed;
	int nodes;
	int gpus_per_node;
	const char *prefix;		/* node names prefix1..prefixN */
	double inter_gbps, intra_gbps;	/* healthy figures */
	double inter_lat_us, intra_lat_us;
	double noise;			/* each figure x U[1-noise, 1+noise] */
	double slow_frac;		/* node pairs slowed to x U[slow_min, slow_max] */
	double slow_min, slow_max;
	int switch_size;		/* nodes per leaf switch, 0 = one switch */
	double cross_factor;		/* pairs on different switches */
	int slow_switch;		/* -1 = none; else all its nodes' links */
	double slow_switch_factor;
	int degraded_node;		/* -1 = none; one GPU's NVLinks degraded */
	double degraded_factor;
	/* NVLink domains larger than a node (GB200/GB300 NVL72: 18 trays of
	 * 4 GPUs): consecutive blocks of domain_nodes nodes reach each other
	 * at the intra-node figures (0 or 1: each node alone); one tray's
	 * links to the others of its domain at degraded_tray_factor. */
	int domain_nodes;
	/* Or any layout: domain_of[i] is node i's domain (-1: none), for
	 * domain_of NULL the runs above.  The cache records them (pipette-bw/3)
	 * named prefix0, prefix1, ... (domain_prefix NULL: "nvl"), each
	 * stating domain_gpus GPUs (0: its nodes'). */
	const int *domain_of;
	const char *domain_prefix;
	int domain_gpus;
	int degraded_tray;		/* -1 = none */
	double degraded_tray_factor;
	time_t when;
	const char *tool;		/* provenance recorded in the file */
};
/* The defaults above made explicit (noise 0.03, slow range 0.3..0.6, ...)
 * with every "none" set; callers then change what they need. */
void pipette_bw_gen_init(struct pipette_bw_gen *g);
int pipette_bwcache_generate(const struct pipette_bw_gen *g,
			     struct pipette_bwcache **out,
			     struct pipette_err *err);

#endif
