/* pipette: a saved plan read back (schema pipette-plan/1: what `pipette
 * plan --format json` prints and the plugin's plan_dir writes).
 *
 * A plan is a function of its request and the cluster (plan.h:
 * determinism), so a saved plan is applied by planning again with every
 * knob of its configuration pinned, on the same nodes and inputs, and
 * checking that the result has the saved plan's hash.  `pipette trial`
 * makes its candidates so, from the runners-up of a plan; the plugin's
 * --pipette-plan-file applies a saved plan so.  Every refusal names the
 * file and the field. */
#ifndef PIPETTE_PLANFILE_H
#define PIPETTE_PLANFILE_H

#include <stddef.h>

#include "inputs/error.h"
#include "plan/plan.h"

/* The largest plan file read: the JSON of the 4096-node plan (the mapping
 * lists every rank) is a few MiB; the plan cache's entry bound. */
#define PIPETTE_PLANFILE_MAX_BYTES (16u << 20)

struct pipette_planfile;

/* Read and check a plan file: schema, model, gpu, stack, plan_hash (16
 * hex digits), cluster (nodes, gpus_per_node), mapping (mode, launch),
 * config and the ranked list.  *out is allocated; free it with
 * pipette_planfile_destroy. */
int pipette_planfile_read(const char *path, struct pipette_planfile **out,
			  struct pipette_err *err);
/* The same from a buffer; `name` is what messages call it. */
int pipette_planfile_parse(const char *text, size_t len, const char *name,
			   struct pipette_planfile **out, struct pipette_err *err);
void pipette_planfile_destroy(struct pipette_planfile *pf);

const char *pipette_planfile_hash(const struct pipette_planfile *pf);
const char *pipette_planfile_model(const struct pipette_planfile *pf);
const char *pipette_planfile_stack(const struct pipette_planfile *pf);
const char *pipette_planfile_gpu(const struct pipette_planfile *pf);
/* cluster.bandwidth: a path, or "" when the plan was made on nominal links. */
const char *pipette_planfile_bandwidth(const struct pipette_planfile *pf);
enum pipette_launch_mode pipette_planfile_launch(const struct pipette_planfile *pf);
int pipette_planfile_gpus_per_node(const struct pipette_planfile *pf);
long pipette_planfile_global_batch(const struct pipette_planfile *pf);
long pipette_planfile_seq_len(const struct pipette_planfile *pf);

/* The configurations: -1 is the plan's own, 0 .. count-1 its ranked list
 * (the winner first).  Predicted iteration time and peak memory. */
int pipette_planfile_ranked_count(const struct pipette_planfile *pf);
double pipette_planfile_time(const struct pipette_planfile *pf, int k);
double pipette_planfile_peak_bytes(const struct pipette_planfile *pf, int k);
/* "tp=1 pp=2 dp=8 cp=1 mb=2 interleaved vpp=2 recompute=none", for tables. */
void pipette_planfile_config_text(const struct pipette_planfile *pf, int k, char *buf,
				  size_t len);

/* Pin configuration k in req: every knob the search would choose (the
 * parallel sizes, micro batch, schedule and its chunks, recomputation,
 * sequence parallelism, the distributed optimizer or FSDP sharding,
 * precision, MoE dispatcher, compression), the job's facts the plan
 * records (global batch, sequence length, attention, BF16 layers, MoE
 * capacity and imbalance) and the mapping mode.  A global batch or
 * sequence length the request already names must be the file's. */
int pipette_planfile_pin(const struct pipette_planfile *pf, int k, struct pipette_request *req,
			 struct pipette_err *err);
/* Refuse a plan file made for something else than the request on the
 * cluster: another model, stack or GPU type, other nodes (as a set; the
 * plan orders them itself), another GPU count per node, another launch
 * mode.  The field is named. */
int pipette_planfile_check(const struct pipette_planfile *pf, const struct pipette_request *req,
			   const struct pipette_cluster_spec *cs, enum pipette_launch_mode launch,
			   struct pipette_err *err);
/* The plan computed from the pins must be the file's (its hash). */
int pipette_planfile_verify(const struct pipette_planfile *pf, const struct pipette_plan *plan,
			    struct pipette_err *err);
/* Whether plan's configuration is configuration k of the file (what the
 * JSON says of both, the split of layers over uneven stages aside: the
 * search chooses it for the pinned knobs). */
int pipette_planfile_same_config(const struct pipette_planfile *pf, int k,
				 const struct pipette_plan *plan);

#endif
