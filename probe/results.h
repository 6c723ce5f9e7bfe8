/* pipette-probe: what the probe hands on — the bandwidth cache (through
 * core/inputs/bwcache.h, the same code as `pipette bandwidth merge`) and a raw
 * JSON report of everything measured. */
#ifndef PIPETTE_PROBE_RESULTS_H
#define PIPETTE_PROBE_RESULTS_H

#include <json-c/json.h>

#include "inputs/bwcache.h"
#include "inputs/error.h"
#include "gpu.h"
#include "inter.h"

/* The node x node figures of a run as a cache: every measured direction
 * with its α (lat_us) and β (gbps), provenance tool/metric, the largest
 * message size and the run's start time.  A node left out appears only
 * through links it finished before it failed. */
int pipette_probe_result_to_cache(const struct pipette_probe_result *r,
				  const char *generator,
				  struct pipette_bwcache **out,
				  struct pipette_err *err);

/* One node's GPU pairs as a cache: NCCL send/recv where measured, else the
 * CUDA peer copies; `when` is the measurement time. */
int pipette_probe_local_to_cache(const struct pipette_probe_local *l,
				 const char *node, time_t when,
				 const char *generator,
				 struct pipette_bwcache **out,
				 struct pipette_err *err);

/* Merging into the cache file (--out) is pipette_bwcache_merge_file: the
 * same lock, merge and atomic save as `pipette bandwidth merge`. */

/* Raw reports ("schema": "pipette-probe/1"). */
struct json_object *pipette_probe_result_json(const struct pipette_probe_result *r);
struct json_object *pipette_probe_local_json(const struct pipette_probe_local *l,
					     const char *node);

/* Write a JSON document to path ("-" = stdout), pretty-printed. */
int pipette_probe_write_json(struct json_object *j, const char *path,
			     struct pipette_err *err);

#endif
