/* pipette: fine-grained GPU assignment (the mapping sigma).
 *
 * sigma sends global rank r (Megatron order tp-cp-ep-dp-pp, config.h) to a
 * GPU g = node*G + slot.  The objective is the full predicted iteration
 * time, pipette_time_estimate() (timing.h), never a proxy: this fixes the
 * original Pipette's annealer, which minimised C_pp + C_dp over the
 * stage-0 DP nodes only, while its configurations were ranked by the full
 * time, which also dropped the m mod p micro-batches
 * (yimjinkyu1/date2024_pipette @a2b0683, Megatron-LM-2.5/strategy/merge4/:
 * mh_simulated_annealing_opt.py:112-153, stage 0 at :130;
 * llm_train_strategy_assignment_total_v3.py:512-530).
 *
 * Search space: node-block mappings.  Rank block k (ranks kG .. kG+G-1)
 * runs on node node_of_block[k], and local rank i of a node on the node's
 * slot perm[i].  Both launchers realise every such sigma (torchrun: node
 * rank + a permuted CUDA_VISIBLE_DEVICES; srun: per-task RANK), TP groups
 * (tp | G) stay inside a node, and the space still decides which nodes
 * hold which stages and replicas and which GPUs of a node form a TP group.
 *
 * Method, all deterministic (seeded splitmix64, iteration budgets, no
 * clock; the original annealed until a wall-clock limit, with T0 = 1 on a
 * delta scaled by its decimal magnitude: mh_simulated_annealing_opt.py
 * :187-247 of date2024_pipette @a2b0683):
 *  1. the block mapping (rank r on GPU r) and a constructive start that
 *     chains nodes by mutual bandwidth (nearest neighbour on min(a->b,
 *     b->a)), so consecutive rank blocks, which share DP rings and PP
 *     hops, sit on good links;
 *  2. node order: up to 8 nodes exact (branch and bound, mapping.c), to
 *     within 0.5%: it leaves out the orders that could not beat the best
 *     one found by more (opts.exact: none);
 *     above, link moves (mapping_int.h): swaps of the node order aimed at
 *     the slowest hops of the rings and pipeline pairs, first alone from
 *     the chain, then each judged by the estimate, kept when no worse
 *     (so the search crosses the plateaus of a bottleneck); then
 *     simulated annealing (swap, segment reversal and segment shift
 *     moves, start temperature calibrated so that 80% of uphill moves
 *     from the start are accepted, geometric cooling over each run, a run
 *     ends after a half of its iterations without a new best, further
 *     runs restart from the best state at a twentieth of the start
 *     temperature), then a swap, reversal and shift descent to a local
 *     optimum.  The search ends once the incumbent is within 0.5% of the
 *     placement bound (what is left to gain), when no move helps, or at
 *     its cap of 1500 estimates, which does not shrink with the cluster:
 *     a swap's estimate re-reads only the moved nodes' groups (timing.c),
 *     while the segment moves, which re-read the whole placement, share a
 *     fixed amount of work (about 3e6 rank visits);
 *  3. slots: on every node whose intra-node links are not uniform, the
 *     most uneven first, a first-improvement pairwise slot-swap descent
 *     (above 8 nodes within the segment moves' share of work).
 * The result is never worse than the block mapping (only strict
 * improvements replace it).  On a cluster whose links are all alike every
 * node-block mapping has the block time, and none is searched. */
#ifndef PIPETTE_MAPPING_H
#define PIPETTE_MAPPING_H

#include "inputs/cluster.h"
#include "inputs/config.h"
#include "inputs/error.h"
#include "inputs/hardware.h"
#include "inputs/model.h"
#include "estimate/timing.h"
#include "plan/nodepairs.h"

/* Up to this many nodes the node order is searched exactly (branch and
 * bound; mapping.c), whatever the budget. */
#define PIPETTE_MAPPING_EXACT_MAX 8

struct pipette_mapping_opts {
	long budget;		/* time estimates allowed (0 = mapping.c's cap,
				 * segment moves paid by GPU count) */
	unsigned long long seed;
	int restarts;		/* annealing restarts (0 = 3) */
	int force_exhaustive;	/* node order by brute force (n <= 10) */
	int exact;		/* up to 8 nodes, prove the optimum node order;
				 * by default the exact search leaves out what
				 * could gain no more than 0.5% (mapping.c) */
	int force_anneal;	/* never brute force (tests compare the two) */
	int block_only;		/* return the block mapping */
	int no_slots;		/* node order only: identity slots */
	double cutoff;		/* > 0: no search when the placement bound is
				 * at or above it (another configuration's
				 * mapped time); the block mapping returns */
	/* The cluster's node pairs (nodepairs.h), shared by the mappings of
	 * one plan, which keep in it the chain start and the last unjudged
	 * link moves' order (mapping.c); NULL: a search that needs them
	 * reads them itself. */
	struct pipette_node_pairs *pairs;
};

/* Why a heuristic search of the node order ended. */
enum pipette_mapping_end {
	PIPETTE_MAP_END_NONE,	/* no heuristic search (exact, cut, nothing to search) */
	PIPETTE_MAP_END_BOUND,	/* within GAP_STOP (0.5%) of the placement bound */
	PIPETTE_MAP_END_LOCAL,	/* no move improves it: a local optimum */
	PIPETTE_MAP_END_BUDGET,	/* its budget of estimates spent */
	PIPETTE_MAP_END_FLOOR,	/* exact search, cut where no order could beat
				 * the result by more than GAP_STOP (0.5%) */
};

struct pipette_mapping_stats {
	double block_s;		/* iteration time of the block mapping */
	double best_s;		/* of the returned mapping */
	double bound_s;		/* no placement is faster (0 = not computed) */
	long evaluations;	/* full time estimates made */
	long failed;		/* estimates that failed (placement rejected) */
	int exhaustive;		/* node order proven optimal (exact search,
				 * nothing cut at the 0.5% floor) */
	long bounds;		/* of the evaluations, branch-and-bound bounds */
	int slot_nodes;		/* nodes whose slot order was searched */
	int cut;		/* not searched: the bound met the cutoff */
	enum pipette_mapping_end end;
};

void pipette_mapping_opts_init(struct pipette_mapping_opts *o);

/* Search sigma for configuration c on cluster cl.  gpu_of_rank receives
 * world entries (node*G + slot, every GPU at most once).  When world is
 * not a multiple of G the block mapping is returned. */
int pipette_mapping_search(struct pipette_timer *t, const struct pipette_model *m,
			   const struct pipette_gpu_spec *gpu,
			   const struct pipette_config *c,
			   const struct pipette_cluster *cl,
			   const struct pipette_mapping_opts *o, int *gpu_of_rank,
			   struct pipette_mapping_stats *st, struct pipette_err *err);

/* 1 when sigma is node-block: every node holds ranks kG .. kG+G-1 of one k
 * (what torchrun can launch). */
int pipette_mapping_is_node_block(const int *gpu_of_rank, int world, int G);

#endif
