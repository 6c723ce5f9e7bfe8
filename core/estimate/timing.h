/* pipette: iteration-time model.
 *
 * Compute: FLOPs / (peak x efficiency(GEMM size)) per GEMM, plus
 * memory-bound elementwise traffic at HBM speed.  Communication: alpha-beta
 * collectives on the links each group actually uses (a ring is as slow as
 * its slowest edge; hierarchical when a group spans nodes).  Pipeline: the
 * schedule's event simulation over the real per-stage and per-link times
 * (schedule.h).  Sources: the ring forms behind NCCL's bus bandwidth
 * (NVIDIA/nccl-tests doc/PERFORMANCE.md); Megatron's per-layer TP traffic,
 * two all-reduces forward and two backward (Narayanan et al., SC'21,
 * §2.3); Calculon's op times, FLOPs at a size-dependent efficiency plus
 * memory time, and its exposure of DP and PP traffic (Isaev et al.,
 * SC'23; calculon-ai/calculon @caa4b11 calculon/llm/llm.py:1641-1669,
 * 1695-1760, 2130-2142); the original Pipette's point that in 1F1B the
 * round trip through all stages repeats every p micro-batches (Yim et al.,
 * DATE 2024; yimjinkyu1/date2024_pipette @a2b0683 Megatron-LM-2.5/strategy/
 * merge4/llm_train_strategy_assignment_total_v3.py:512-530). */
#ifndef PIPETTE_TIMING_H
#define PIPETTE_TIMING_H

#include "inputs/cluster.h"
#include "inputs/config.h"
#include "inputs/hardware.h"
#include "inputs/model.h"
#include "estimate/schedule.h"

struct pipette_time {
	double iteration_s;
	double compute_s;	/* compute of the busiest stage, m micro-batches */
	double bubble_s;	/* pipeline makespan minus that stage's busy time */
	double tp_comm_s;	/* exposed TP collectives on that stage */
	double cp_comm_s;	/* exposed context-parallel exchanges */
	double ep_comm_s;	/* expert dispatch and combine left exposed */
	double ep_hidden_s;	/* of them, what overlap with computation hides */
	double pp_comm_s;	/* point-to-point sends of that stage (mostly hidden) */
	double pp_exposed_s;	/* what PP transfers add to the makespan */
	double dp_comm_s;	/* gradient reduction (+ parameter gather) */
	double dp_exposed_s;
	double embed_sync_s;	/* tied embedding gradient all-reduce */
	/* CPU activation offloading: what the copies over the host link add
	 * to the iteration, inside compute_s (0: no offloading) */
	double offload_exposed_s;
	double optimizer_s;
	double exposed_comm_s;	/* all communication not hidden by compute */
	double makespan_s;	/* the simulated pipeline */
	/* The model's own figures, before the site's calibration (calib.h):
	 * its step time, its computation (compute, bubble and optimizer) and
	 * its exposed communication; what an observation records. */
	double model_s, model_compute_s, model_comm_s;
	/* Throughput.  Model FLOPs exclude recomputation (72 BsLh^2 form of
	 * Narayanan et al., generalised to GQA/SwiGLU/MoE); MFU is against
	 * the dense peak of the precision recipe's GEMMs. */
	double model_flops;
	double tokens_per_s;
	double tflops_per_gpu;
	double mfu;
	/* Per-stage, per-micro-batch times of the slowest stage (s). */
	double stage_f_s, stage_b_s, stage_w_s;
	int busiest_stage;	/* that stage's index */
};

/* A reusable workspace (schedule simulator and per-stage arrays). */
struct pipette_timer;

struct pipette_timer *pipette_timer_create(void);
void pipette_timer_destroy(struct pipette_timer *t);

/* Estimate one configuration on `cluster` (nodes x GPUs, links), with rank r
 * on GPU gpu_of_rank[r] (= node * G + slot); NULL places ranks in order
 * (Megatron's default: rank r on GPU r).  detail != 0 also separates the
 * exposed PP time (one more simulation). */
int pipette_time_estimate(struct pipette_timer *t, const struct pipette_model *m,
			  const struct pipette_gpu_spec *gpu,
			  const struct pipette_config *c,
			  const struct pipette_cluster *cluster,
			  const int *gpu_of_rank, int detail,
			  struct pipette_time *out, struct pipette_err *err);

/* What a lower bound of the search reads, as pipette_time_estimate (on
 * the default placement, without detail) would compute it: the busiest
 * stage's per-micro-batch times stage_f_s, stage_b_s, stage_w_s and
 * embed_sync_s; the other fields are not estimated.  It fails where the
 * estimate would, without simulating the pipeline. */
int pipette_time_bound(struct pipette_timer *t, const struct pipette_model *m,
		       const struct pipette_gpu_spec *gpu, const struct pipette_config *c,
		       const struct pipette_cluster *cluster, struct pipette_time *out,
		       struct pipette_err *err);

/* What the data-parallel step of stage s adds past the pipeline, as
 * pipette_time_estimate computes it on `cluster` under the default
 * placement, for a search's lower bound (search.c dp_bound):
 *  - reduce_s: the gradient reduction (and PowerSGD's work) that starts
 *    with the stage's last backward, or after it without overlap, and
 *    runs past it (the estimate's DP tail is how far the latest one runs
 *    past the makespan);
 *  - exposed_s: the least the distributed optimizer's parameter gather
 *    leaves exposed: all of it without overlap, else 0 (it hides behind
 *    the first forward, not estimated here);
 *  - optimizer_s: the stage's optimizer step (the estimate adds the
 *    largest stage's);
 *  - overlap: the stack's dp_overlap (the reduction starts with the last
 *    backward rather than after it).
 * Fails (-1) under FSDP (a shard group of more than one rank: its
 * collectives are priced elsewhere), for a stage out of range, a
 * configuration larger than the cluster, or out of memory. */
struct pipette_dp_floor {
	double reduce_s, exposed_s, optimizer_s;
	int overlap;
};
int pipette_time_dp_floor(struct pipette_timer *t, const struct pipette_model *m,
			  const struct pipette_gpu_spec *gpu, const struct pipette_config *c,
			  const struct pipette_cluster *cluster, int s,
			  struct pipette_dp_floor *out);

/* Keep the links of every rank grid estimated on `cluster` under the
 * default placement (gpu_of_rank NULL), for a search that evaluates many
 * configurations on one cluster; NULL turns it off and frees the cache.
 * The cluster must outlive the cache. */
void pipette_timer_cache_links(struct pipette_timer *t,
			       const struct pipette_cluster *cluster);

/* Per-stage peak in-flight micro-batches of the last simulation (full-stage
 * units, c->pp entries), for the memory estimate. */
const double *pipette_timer_inflight(const struct pipette_timer *t);
/* The last simulation (for timelines): that of the last estimate made
 * with detail (estimates without may reuse a simulation's results). */
const struct pipette_sched *pipette_timer_sched(const struct pipette_timer *t);

/* Model FLOPs of one iteration (forward + backward, no recomputation). */
/* The attention core of one layer (the first for models whose layers
 * differ) for `tokens` a rank holds: its forward and backward (input
 * gradients) seconds, context parallelism's ring steps and merges
 * included. */
void pipette_attention_times(const struct pipette_model *m, const struct pipette_gpu_spec *g,
			     const struct pipette_config *c, double tokens, double *fwd,
			     double *bwd);

double pipette_model_flops(const struct pipette_model *m, const struct pipette_config *c);

/* alpha-beta collectives: n ranks, S bytes, bandwidth GB/s, latency us. */
double pipette_allreduce_s(int n, double bytes, double gbps, double lat_us);
double pipette_allgather_s(int n, double bytes, double gbps, double lat_us);
double pipette_alltoall_s(int n, double bytes, double gbps, double lat_us);
double pipette_p2p_s(double bytes, double gbps, double lat_us);

/* What each local expert's GEMM adds beyond one GEMM over all the routed
 * copies, when the experts' GEMMs run back to back (Transformer Engine's
 * GroupedLinear loops over them; torch._grouped_mm groups them in one
 * kernel): the median over 17 MoE blocks timed on one H200 (Qwen3-30B-A3B,
 * Qwen3-235B-A22B, GPT-OSS-120B, DeepSeek-V3 at 16-32 local experts, 64 to
 * 16384 rows per expert, BF16, forward + backward replayed from a CUDA
 * graph) of (one GEMM per expert - one GEMM over all copies) / (6 x
 * (local - 1)): 2.2-13.5 us, 5.0 the median, 3.4 at 1024 rows per expert
 * and more (tests/data/kernels/h200-moe.csv, moe.py beside it).  The
 * kernel table's fixed cost per GEMM, 13.3 us, is an isolated kernel's;
 * charged to every expert it made 16 experts' GEMMs 1.2 ms slower per
 * micro-batch than measured. */
#define PIPETTE_EXPERT_GEMM_GAP_S 5.0e-6

#endif
