/* pipette: expert placement from routing statistics (after MoETuner).
 *
 * Given how many tokens each expert of each MoE layer received and how
 * tokens moved from the experts of one MoE layer to those of the next,
 * choose which experts each expert-parallel (EP) rank hosts so that the
 * busiest rank's load and the cross-node all-to-all volume are small.
 * Go and Mahajan, "MoETuner", arXiv 2502.06643, solve this as an ILP over
 * token load and the routing dependency between consecutive layers (their
 * abstract; the formulation itself could not be read).  The ILP here is
 * our reconstruction from that abstract (its variables and rows are
 * described in experts_ilp.c), solved with GLPK, with a greedy +
 * pairwise-swap fallback that is always computed.
 *
 * Routing trace, schema "pipette-routing/1" (JSON):
 *
 *   { "schema": "pipette-routing/1",
 *     "model": "mixtral-8x7b",          optional, informational
 *     "tokens": 4096,                   optional, tokens profiled
 *     "layers": [                       one entry per MoE layer, in order
 *       { "load": [c_0, ..., c_{E-1}],  tokens routed to expert e
 *         "next": [[...E...], ...E rows] tokens routed to expert e here AND
 *                                       to expert e' at the next MoE layer
 *                                       (row e, column e'); a token with
 *                                       top-k routing adds k*k pairs.
 *                                       Absent or null on the last layer.
 *       }, ... ] }
 *
 * Counts are finite numbers >= 0.  The number of layers must equal the
 * model's MoE layer count and every "load" must have the model's expert
 * count E; every "next" is E x E.  Errors name the file and the JSON path
 * (e.g. "t.json: layers[3].next[2][5]: negative count -1").
 *
 * Cost model (per MoE layer l, EP rank r on node r / ranks_per_node):
 *   load_l(r)   = sum of load[l][e] over the experts e on r
 *   cross_l     = sum over e, e' of next[l-1][e][e'] / topk where e (layer
 *                 l-1) and e' (layer l) sit on different nodes: a token
 *                 moves from the rank of its layer-(l-1) expert to the rank
 *                 of its layer-l expert (MoETuner's "token routing
 *                 dependency"); each of its k copies there comes from one
 *                 of its k copies before, hence / topk.
 *   objective   = sum_l load_weight * max_r load_l(r)
 *               + cross_weight * sum_l cross_l
 * pipette_experts_default_weights derives both weights, in seconds per
 * token, from the model and the links. */
#ifndef PIPETTE_EXPERTS_H
#define PIPETTE_EXPERTS_H

#include <stdio.h>

#include "inputs/cluster.h"
#include "inputs/error.h"
#include "inputs/model.h"

#define PIPETTE_ROUTING_SCHEMA "pipette-routing/1"

/* ---- routing statistics ---------------------------------------------------- */

struct pipette_routing;

/* All counts zero.  layers >= 1, 1 <= experts <= 4096, 1 <= topk <= experts. */
struct pipette_routing *pipette_routing_create(int layers, int experts, int topk,
					       struct pipette_err *err);
void pipette_routing_destroy(struct pipette_routing *r);

int pipette_routing_layers(const struct pipette_routing *r);
int pipette_routing_experts(const struct pipette_routing *r);
int pipette_routing_topk(const struct pipette_routing *r);
double pipette_routing_load(const struct pipette_routing *r, int layer, int expert);
/* Tokens on `from` at `layer` and on `to` at layer + 1 (layer < layers-1). */
double pipette_routing_next(const struct pipette_routing *r, int layer, int from, int to);
void pipette_routing_set_load(struct pipette_routing *r, int layer, int expert, double v);
void pipette_routing_set_next(struct pipette_routing *r, int layer, int from, int to,
			      double v);

/* Read a trace for model m (its MoE layer count, experts and top-k). */
int pipette_routing_read(const char *path, const struct pipette_model *m,
			 struct pipette_routing **out, struct pipette_err *err);
/* The same from memory; `source` names the input in errors. */
int pipette_routing_parse(const char *text, size_t len, const char *source,
			  const struct pipette_model *m, struct pipette_routing **out,
			  struct pipette_err *err);
/* Write the trace (same schema); byte-identical for identical contents. */
int pipette_routing_write_json(const struct pipette_routing *r, const char *model_name,
			       long tokens, FILE *f);

/* Synthetic skewed trace: `tokens` tokens each pick topk distinct experts
 * per MoE layer.  Expert popularity per layer is Zipf-like, weight
 * 1/(rank+1)^skew over a seeded permutation (skew 0 = uniform).  Each
 * expert has two preferred successors at the next layer; a token's next
 * choice follows one of them with probability `affinity`, else the
 * popularity.  Deterministic in (model, seed, skew, affinity, tokens). */
struct pipette_routing_gen {
	unsigned long long seed;
	double skew;		/* >= 0 */
	double affinity;	/* [0, 1] */
	long tokens;		/* >= 1 */
};

int pipette_routing_generate(const struct pipette_model *m,
			     const struct pipette_routing_gen *g,
			     struct pipette_routing **out, struct pipette_err *err);

/* ---- placement ------------------------------------------------------------- */

enum pipette_experts_solver {
	PIPETTE_EXPERTS_AUTO,	/* GLPK, falling back to the greedy */
	PIPETTE_EXPERTS_GREEDY,	/* greedy + swaps only */
};

struct pipette_experts_opts {
	int ep;			/* EP ranks; divides the expert count */
	int ranks_per_node;	/* EP rank r runs on node r / ranks_per_node */
	double load_weight;	/* objective weight of max-rank load (s/token) */
	double cross_weight;	/* ... of one cross-node token hop (s/token) */
	enum pipette_experts_solver solver;
	double time_limit_s;	/* GLPK wall-clock safety net (0 = none) */
	long node_limit;	/* deterministic branch-and-bound node budget */
	long max_columns;	/* larger ILPs are not built (greedy only) */
};

/* ep, ranks_per_node given; weights 1 and 1; AUTO; 60 s; 200 nodes;
 * 200000 columns. */
void pipette_experts_opts_init(struct pipette_experts_opts *o, int ep, int ranks_per_node);

/* Weights in seconds per token (forward pass): load_weight = one token's
 * FLOPs through one expert at the GPU's large-GEMM rate; cross_weight =
 * dispatch + combine of one hidden vector (bf16) over the slowest
 * inter-node link of the EP ranks, spread over the ep senders. */
void pipette_experts_default_weights(const struct pipette_model *m,
				     const struct pipette_cluster *c, int ep,
				     struct pipette_experts_opts *o);

/* Megatron's default: expert e on rank e / (E / ep).  placement: layers*E. */
void pipette_experts_contiguous(int layers, int experts, int ep, int *placement);

struct pipette_experts_eval {
	double objective;
	double max_load;	/* sum over layers of the busiest rank's load */
	double cross_tokens;	/* sum over layers of cross-node token hops */
};

/* Check a placement (every rank hosts E/ep experts of each layer) and
 * evaluate it.  per_layer_max / per_layer_cross: NULL or `layers` doubles. */
int pipette_experts_evaluate(const struct pipette_routing *r,
			     const struct pipette_experts_opts *o, const int *placement,
			     struct pipette_experts_eval *out, double *per_layer_max,
			     double *per_layer_cross, struct pipette_err *err);

/* Bytes one token's hidden vector occupies in the all-to-all (BF16). */
double pipette_experts_token_bytes(const struct pipette_model *m);

/* Predicted time of layer `layer`'s dispatch all-to-all (s): EP rank r on
 * GPU gpu_of_rank[r] of c (NULL: GPU r).  Layer 0's tokens start evenly
 * spread over the ranks; layer l's start on the ranks of their layer-(l-1)
 * experts.  Each rank's sends and receives go one message per peer
 * (pipette_p2p_s on that link); intra- and inter-node traffic overlap; the
 * layer takes as long as its slowest rank. */
double pipette_experts_alltoall_s(const struct pipette_routing *r, const int *placement,
				  int layer, int ep, const struct pipette_cluster *c,
				  const int *gpu_of_rank, double bytes_per_token);

struct pipette_experts_result {
	int *placement;		/* layers * E: rank of expert e at layer l */
	struct pipette_experts_eval eval;
	char solver[32];	/* "glpk", "greedy" */
	char status[160];	/* e.g. "optimal", "node limit 20000: best of ..." */
	double glpk_bound;	/* GLPK's best bound on the objective (NAN if none) */
};

/* Greedy + swaps only (the fallback), into placement (layers * E). */
int pipette_experts_greedy(const struct pipette_routing *r,
			   const struct pipette_experts_opts *o, int *placement,
			   struct pipette_err *err);
/* Solve: the greedy, then GLPK seeded with it (experts_ilp.c, in
 * libpipette_experts: link it before libpipette, with -lglpk).  GLPK is
 * skipped (status says why) for ep 1, for the GREEDY solver and above
 * max_columns; stopped by node_limit it returns its best integer solution;
 * when time_limit_s fires the greedy is returned.  out->placement is
 * allocated (free with pipette_experts_result_free). */
int pipette_experts_solve(const struct pipette_routing *r,
			  const struct pipette_experts_opts *o,
			  struct pipette_experts_result *out, struct pipette_err *err);
void pipette_experts_result_free(struct pipette_experts_result *res);

#endif
