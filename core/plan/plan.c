/* pipette: one call from a request to a plan (its renderers are in
 * core/render/).
 *
 * pipette_plan_compute: load the model, the GPU type and the bandwidth
 * cache; build the cluster; search configurations (search.h) under the
 * block mapping; map the best few (mapping.h) and rank them by their
 * mapped time; estimate the winner in detail.  Everything is a function of
 * the request and the cluster: no clock enters the plan (the search time
 * is measured for the table only and never written to JSON or env). */
#define _GNU_SOURCE	/* strverscmp */
#include "plan/plan.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inputs/bwcache.h"
#include "inputs/cluster.h"
#include "inputs/hardware.h"
#include "plan/mapping.h"
#include "estimate/memory.h"
#include "inputs/model.h"
#include "inputs/readfile.h"
#include "plan/search.h"
#include "plan/plan_int.h"
#include "estimate/timing.h"

/* Configurations that get a mapping search before the final ranking: the
 * block-order ranking rarely reorders beyond the third (tests/bench), and
 * each mapping costs up to its budget of full estimates. */
#define MAP_TOP 3
/* Seed of the mapping search: fixed, so every node computes one plan. */
#define MAPPING_SEED 0x7069706574746531ULL	/* "pipette1" */

void pipette_plan_destroy(struct pipette_plan *p)
{
	int i;

	if (!p)
		return;
	for (i = 0; p->names && i < p->nodes; i++)
		free(p->names[i]);
	free(p->names);
	free(p->gpu_ids);
	free(p->gpu_of_rank);
	free(p->rank_at);
	free(p->stages);
	free(p->ranked);
	free(p->warnings);
	free(p);
}

static int add_warning(struct pipette_plan *p, const char *text)
{
	size_t old = p->warnings ? strlen(p->warnings) : 0, add = strlen(text);
	char *w;

	if (!add)
		return 0;
	w = realloc(p->warnings, old + add + 2);
	if (!w)
		return -1;
	if (old)
		w[old++] = '\n';
	memcpy(w + old, text, add + 1);
	p->warnings = w;
	return 0;
}

static int check_request(const struct pipette_request *req,
			 const struct pipette_cluster_spec *cs, struct pipette_err *err)
{
	const struct pipette_pins *pn = &req->pins;
	int a, b, i;

	if (!cs || cs->nodes < 1 || !cs->node_names)
		return pipette_fail(err, "the cluster has no nodes");
	if (cs->gpus_per_node < 1 || cs->gpus_per_node > PIPETTE_BW_MAX_GPUS)
		return pipette_fail(err, "gpus per node %d is not in [1, %d]",
				    cs->gpus_per_node, PIPETTE_BW_MAX_GPUS);
	for (a = 0; cs->gpu_ids && a < cs->gpus_per_node; a++) {
		if (cs->gpu_ids[a] < 0)
			return pipette_fail(err, "GPU index %d is negative", cs->gpu_ids[a]);
		for (b = 0; b < a; b++)
			if (cs->gpu_ids[a] == cs->gpu_ids[b])
				return pipette_fail(err, "GPU index %d is listed twice",
						    cs->gpu_ids[a]);
	}
	if (req->global_batch < 1)
		return pipette_fail(err, "global batch %ld must be >= 1", req->global_batch);
	if (req->seq_len < 0)
		return pipette_fail(err, "sequence length %ld must be >= 1 (or 0: the model's)",
				    req->seq_len);
	if (!(req->mem_fraction >= 0 && req->mem_fraction <= 1))
		return pipette_fail(err, "memory fraction %g is not in (0, 1] (0: the stack's)",
				    req->mem_fraction);
	for (i = 0; i < PIPETTE_INT_PINS; i++)
		if (pipette_pin_value(pn, i) == 0 || pipette_pin_value(pn, i) < -1)
			return pipette_fail(err, "pinned %s %d must be >= 1 (or -1 = search)",
					    pipette_pin_name(i), pipette_pin_value(pn, i));
	if (pn->precision_set >= (1u << PIPETTE_PREC_COUNT))
		return pipette_fail(err, "precision set %#x names an unknown recipe",
				    pn->precision_set);
	if (pn->schedule < -1 || pn->schedule >= PIPETTE_SCHED_COUNT ||
	    pn->schedule_set >= (1u << PIPETTE_SCHED_COUNT))
		return pipette_fail(err, "pinned schedule %d is unknown", pn->schedule);
	if (pn->recompute < -1 || pn->recompute > PIPETTE_RECOMPUTE_FULL)
		return pipette_fail(err, "pinned recompute %d is unknown", pn->recompute);
	if (pn->sequence_parallel < -1 || pn->sequence_parallel > 1 ||
	    pn->distributed_optimizer < -1 || pn->distributed_optimizer > 1)
		return pipette_fail(err, "sequence parallel and distributed optimizer "
				    "pins are 0, 1 or -1");
	if (req->budget < 0)
		return pipette_fail(err, "budget %ld must be >= 0", req->budget);
	if ((unsigned)req->attention > PIPETTE_ATTN_UNFUSED)
		return pipette_fail(err, "attention %d is unknown", (int)req->attention);
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* The plan is a function of the set of nodes, not of the order Slurm (or
 * the user) listed them in: the nodes are planned in one canonical order,
 * glibc's strverscmp (node2 before node10), and the mapping's baseline,
 * Megatron's rank order, runs over the nodes in that order too.  Callers
 * find a node's index with pipette_plan_node_index. */
static int copy_cluster_spec(struct pipette_plan *p, const struct pipette_cluster_spec *cs,
			     struct pipette_err *err)
{
	int i;

	p->nodes = cs->nodes;
	p->G = cs->gpus_per_node;
	p->names = calloc((size_t)p->nodes, sizeof(char *));
	p->gpu_ids = calloc((size_t)p->G, sizeof(int));
	if (!p->names || !p->gpu_ids)
		return pipette_fail(err, "out of memory");
	for (i = 0; i < p->nodes; i++)
		if (!(p->names[i] = strdup(cs->node_names[i] ? cs->node_names[i] : "")))
			return pipette_fail(err, "out of memory");
	qsort(p->names, (size_t)p->nodes, sizeof(char *), cmp_name);
	for (i = 1; i < p->nodes; i++)
		if (!strcmp(p->names[i - 1], p->names[i]))
			return pipette_fail(err, "node %.64s is listed twice", p->names[i]);
	for (i = 0; i < p->G; i++)
		p->gpu_ids[i] = cs->gpu_ids ? cs->gpu_ids[i] : i;
	return 0;
}

int pipette_plan_node_index(const struct pipette_plan *plan, const char *name)
{
	char *const *hit;

	if (!name)
		return -1;
	hit = bsearch(&name, plan->names, (size_t)plan->nodes, sizeof(char *), cmp_name);
	return hit ? (int)(hit - plan->names) : -1;
}

/* "no configuration fits" with the search's reasons. */
static int fail_nofit(const struct pipette_search_stats *st, const struct pipette_model *m,
		      const struct pipette_request *req, int world, struct pipette_err *err)
{
	char why[256] = "";
	int i, best = -1;

	for (i = 0; i < PIPETTE_MEM_PART_COUNT; i++)
		if (st->pruned_part[i] && (best < 0 || st->pruned_part[i] > st->pruned_part[best]))
			best = i;
	if (!st->considered)
		return pipette_fail_code(err, PIPETTE_E_NOFIT, PIPETTE_PLAN_NOFIT_PREFIX " %s on %d GPUs: no "
				    "combination matches the pins (tp x cp x pp x dp must be "
				    "the %d GPUs, tp unpinned divides the GPUs per node, pp at "
				    "most the %d layers, global batch %ld a multiple of dp x "
				    "micro-batch)", m->name, world, world, m->layers,
				    req->global_batch);
	if (st->pruned_memory) {
		const struct pipette_config *c = &st->least_excess_cfg;

		char limit[64];

		if (c->stack && c->stack->mem_fraction <= 0 && req->mem_fraction >= 1)
			snprintf(limit, sizeof(limit), "the GPU memory with the allocator's reserve");
		else
			snprintf(limit, sizeof(limit), "%.0f%% of GPU memory", 100 * req->mem_fraction);
		snprintf(why, sizeof(why), "; %ld exceed %s (mostly %s); "
			 "the closest, tp %d pp %d dp %d cp %d micro-batch %d, is %.2f GiB over",
			 st->pruned_memory, limit,
			 pipette_mem_part_name((enum pipette_mem_part)best), c->tp, c->pp,
			 c->dp, c->cp, c->micro_batch, st->least_excess_bytes / PIPETTE_GIB);
	}
	return pipette_fail_code(err, PIPETTE_E_NOFIT, PIPETTE_PLAN_NOFIT_PREFIX " %s on %d GPUs (global batch "
			    "%ld, seq len %ld): %ld combinations considered, %ld invalid "
			    "(divisibility or pins%s%s)%s", m->name, world, req->global_batch,
			    req->seq_len, st->considered, st->invalid,
			    st->invalid == st->considered ? "; the first: " : "",
			    st->invalid == st->considered ? st->invalid_msg : "", why);
}

static int cmp_entry(const void *pa, const void *pb)
{
	const struct plan_entry *a = pa, *b = pb;

	if (a->mapped != b->mapped)
		return a->mapped ? -1 : 1;
	if (a->time.iteration_s != b->time.iteration_s)
		return a->time.iteration_s < b->time.iteration_s ? -1 : 1;
	return pipette_config_cmp(&a->cfg, &b->cfg);
}

/* The bytes read must be those pinned (a hex prefix of their SHA-256). */
static int check_pin(const char *what, const char *path, const unsigned char *sha,
		     const char *pin, struct pipette_err *err)
{
	char hex[2 * PIPETTE_SHA256_LEN + 1];

	if (!sha)
		return pipette_fail_code(err, PIPETTE_E_CHANGED, "%s %.200s: pinned by srun to "
					 "content %s but not read from a file here", what, path,
					 pin);
	pipette_sha256_hex(sha, hex);
	if (strncmp(hex, pin, strlen(pin)))
		return pipette_fail_code(err, PIPETTE_E_CHANGED, "%s %.200s changed while the "
					 "step started: srun read content %s, this node read "
					 "%.*s; the nodes of a step must plan from the same file "
					 "(run the step again)", what, path, pin, (int)strlen(pin),
					 hex);
	return 0;
}

/* The plan's identity is everything a task receives, which derives from
 * the model, the configuration, the predictions (exported too), the node
 * names in the plan's order and the mapping.  Hash them in a canonical
 * text, field by field, so that the hash does not depend on any renderer. */
static int compute_hash(struct pipette_plan *p)
{
	const struct pipette_config *c = &p->cfg;
	const struct pipette_compression *z = &c->compress;
	unsigned char sha[PIPETTE_SHA256_LEN];
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int i;

	if (!f)
		return -1;
	fprintf(f, "pipette-plan/1\nmodel=%s\ngpu=%s,%d\nlaunch=%d\nstack=%s,%s\n", p->model.name,
		p->gpu->name, p->gpu->nvlink_domain_gpus, (int)p->req.launch, p->stack.name,
		p->req.stack_options);
	fprintf(f, "config=%d,%d,%d,%d,%d,%d,%d,%d,%ld,%ld,%d,%d,%d,%d,%d,%d,%d\n", c->tp, c->pp,
		c->dp, c->cp, c->ep, c->etp, c->vpp, c->micro_batch, c->global_batch, c->seq_len,
		(int)c->recompute, c->sequence_parallel, c->distributed_optimizer,
		(int)c->schedule, (int)c->attention, c->first_stage_layers, c->last_stage_layers);
	fprintf(f, "compress=%d,%d,%d,%d,%d\n", z->pp_rank, z->pp_epilogue_only, z->dp_rank,
		z->dp_stages, z->fused_embedding);
	fprintf(f, "moe=%u,%d,%d,%.6g,%d,%.6g\n", c->recompute_modules, (int)c->moe.dispatcher,
		c->moe.ep_overlap, c->moe.capacity_factor, c->moe.pad, c->moe.imbalance);
	fprintf(f, "precision=%s,%d,%d\n", pipette_precision_name(c->precision), c->bf16_first,
		c->bf16_last);
	fprintf(f, "site=%.6g,%.6g,%.6g\n", p->site.compute, p->site.comm, p->site.reserve_fraction);
	fprintf(f, "predicted=%.4f,%.2f,%.4f\n", p->time.iteration_s, p->mem.peak_bytes / PIPETTE_GIB,
		pipette_plan_mapping_gain(p));
	for (i = 0; i < p->nodes; i++)
		fprintf(f, "node=%s\n", p->names[i]);
	for (i = 0; i < p->G; i++)
		fprintf(f, "gpu=%d\n", p->gpu_ids[i]);
	for (i = 0; i < p->world; i++)
		fprintf(f, "rank=%d\n", p->gpu_of_rank[i]);
	if (fclose(f) != 0) {
		free(text);
		return -1;
	}
	pipette_sha256(text, len, sha);
	pipette_hash_short(sha, p->hash);
	free(text);
	return 0;
}

void pipette_hash_short(const unsigned char sha[PIPETTE_SHA256_LEN],
			char out[PIPETTE_HASH_HEX + 1])
{
	char hex[2 * PIPETTE_SHA256_LEN + 1];

	pipette_sha256_hex(sha, hex);
	memcpy(out, hex, PIPETTE_HASH_HEX);
	out[PIPETTE_HASH_HEX] = '\0';
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --calibration: the probe's GEMM and HBM figures and the site's factors
 * for this GPU type and stack (calib.h), whichever the file has. */
static int calibrate(struct pipette_plan *p, const char *path, struct pipette_err *err)
{
	char msg[PIPETTE_PATH_MAX + 160];
	unsigned char sha[PIPETTE_SHA256_LEN];
	int missing;

	if (pipette_calibration_apply(path, p->gpu, &p->stack, p->req.stack_options,
				      &p->gpu_calibrated, &p->site, &missing, sha, err))
		return -1;
	if (p->req.pin_calibration_sha256[0] &&
	    check_pin("calibration", path, sha, p->req.pin_calibration_sha256, err))
		return -1;
	if (missing) {
		snprintf(msg, sizeof(msg), "%.2000s: its site list has no entry for %s under "
			 "stack %s: the plan uses the model's own figures", path, p->gpu->name,
			 p->stack.name);
		if (add_warning(p, msg))
			return pipette_fail(err, "out of memory");
	}
	return 0;
}

/* The inputs: the model (resolving the request's defaults with it), the
 * GPU type, the bandwidth cache checked against its pin, and the cluster
 * built from them. */
/* Every recipe the request names runs on its stack and GPU, and the BF16
 * layers at the ends leave some layers to the recipe. */
static int check_precisions(const struct pipette_plan *p, struct pipette_err *err)
{
	unsigned set = p->req.pins.precision_set;

	if (!set)
		set = PIPETTE_PREC_BIT(p->stack.default_precision);
	for (int k = 0; k < PIPETTE_PREC_COUNT; k++)
		if ((set & PIPETTE_PREC_BIT(k)) &&
		    (pipette_stack_precision_check(&p->stack, p->gpu, (enum pipette_precision)k,
						   err) ||
		     pipette_bf16_layers_check(&p->model, (enum pipette_precision)k,
					       p->req.bf16_first, p->req.bf16_last, err)))
			return -1;
	return 0;
}

static int load_inputs(struct pipette_plan *p, const struct pipette_request *req,
		       struct pipette_bwcache **bw, struct pipette_cluster **cl,
		       struct pipette_err *err)
{
	struct pipette_topology *topo = NULL;

	if (pipette_request_resolve(req, &p->req, &p->model, &p->stack, err))
		return -1;
	req = &p->req;
	if (req->pin_model_sha256[0] &&
	    check_pin("model config", req->model, p->model.has_source_sha256 ?
		      p->model.source_sha256 : NULL, req->pin_model_sha256, err))
		return -1;
	if ((p->gpu = pipette_gpu_lookup(req->gpu, err)) && req->calibration[0]) {
		if (calibrate(p, req->calibration, err))
			p->gpu = NULL;
		else
			p->gpu = &p->gpu_calibrated;
	}
	if (p->gpu && req->nvlink_domain > 0) {
		if (req->nvlink_domain % p->G)
			return pipette_fail(err, "--nvlink-domain %d: not a whole number of nodes "
					    "of %d GPUs", req->nvlink_domain, p->G);
		if (p->gpu != &p->gpu_calibrated)
			p->gpu_calibrated = *p->gpu;
		p->gpu_calibrated.nvlink_domain_gpus = req->nvlink_domain;
		p->gpu = &p->gpu_calibrated;
	}
	if (!p->gpu || check_precisions(p, err))
		return -1;
	if (req->bandwidth[0]) {
		pipette_progress_report(&req->progress, "reading the bandwidth cache", 0, 0);
		if (pipette_bwcache_load(req->bandwidth, bw, err))
			return -1;
		if (req->pin_bandwidth_sha256[0] &&
		    check_pin("bandwidth cache", req->bandwidth, pipette_bwcache_sha256(*bw),
			      req->pin_bandwidth_sha256, err))
			return -1;
		if (req->stale_days > 0) {
			char msg[512];

			if (pipette_bwcache_stale(*bw, (const char *const *)p->names, p->nodes,
						  time(NULL), req->stale_days * 86400.0, msg,
						  sizeof(msg)) > 0 && add_warning(p, msg))
				return pipette_fail(err, "out of memory");
		}
	}
	pipette_progress_report(&req->progress, "building the cluster's links", 0, 0);
	if (req->topology[0]) {
		if (!req->expand_hostlist)
			return pipette_fail(err, "topology %s: no hostlist expander given",
					    req->topology);
		if (pipette_topology_load(req->topology, req->expand_hostlist, &topo, err))
			return -1;
		if (req->pin_topology_sha256[0] &&
		    check_pin("topology", req->topology, pipette_topology_sha256(topo),
			      req->pin_topology_sha256, err)) {
			pipette_topology_destroy(topo);
			return -1;
		}
	}
	*cl = pipette_cluster_create_topo((const char *const *)p->names, p->nodes, p->G,
					  p->gpu_ids, p->gpu, *bw, 0, topo, err);
	pipette_topology_destroy(topo);
	if (!*cl) {
		if (req->bandwidth[0])
			pipette_fail_prefix(err, "%s: ", req->bandwidth);
		return -1;
	}
	if (add_warning(p, pipette_cluster_warnings(*cl)))
		return pipette_fail(err, "out of memory");
	return 0;
}

/* The configuration search under Megatron's order (search.h): the best
 * few, ranked by their block-order time. */
static int search(struct pipette_plan *p, const struct pipette_cluster *cl,
		  const struct pipette_node_pairs *np, struct pipette_timer *t,
		  struct pipette_search_result *sr, struct pipette_err *err)
{
	const struct pipette_request *req = &p->req;
	struct pipette_search_input in;

	memset(&in, 0, sizeof(in));
	in.model = &p->model;
	in.gpu = p->gpu;
	in.cluster = cl;
	in.global_batch = req->global_batch;
	in.seq_len = req->seq_len;
	in.mem_fraction = req->mem_fraction;
	in.pins = req->pins;
	in.moe = req->moe;
	in.compress = req->compress;
	in.attention = req->attention;
	in.bf16_first = req->bf16_first;
	in.bf16_last = req->bf16_last;
	in.stack = &p->stack;
	in.allow_compression = req->allow_compression;
	in.top_k = req->top_k > MAP_TOP ? req->top_k : MAP_TOP;
	in.progress = req->progress;
	pipette_progress_report(&req->progress, "enumerating configurations", 0, 0);
	in.timer = t;	/* the mapping reuses the pipelines it built */
	in.pairs = np;
	if (pipette_search_run(&in, sr, err))
		return -1;
	p->sstats = sr->stats;
	if (sr->stats.failed) {
		char msg[400];

		snprintf(msg, sizeof(msg), "%ld configuration%s could not be estimated and "
			 "were skipped (first: %.200s)", sr->stats.failed,
			 sr->stats.failed == 1 ? "" : "s", sr->stats.failed_msg);
		if (add_warning(p, msg))
			return pipette_fail(err, "out of memory");
	}
	if (sr->n_top == 0)
		return fail_nofit(&sr->stats, &p->model, req, p->nodes * p->G, err);
	return 0;
}

/* Map the best few and rank every candidate by its mapped time (block
 * time when unmapped); the winner's mapping goes to best_sigma. */
static int map_and_rank(struct pipette_plan *p, const struct pipette_cluster *cl,
			struct pipette_node_pairs *np, struct pipette_timer *t,
			const struct pipette_search_result *sr, int *best_sigma,
			struct pipette_err *err)
{
	struct pipette_mapping_opts mo;
	struct pipette_mapping_stats ms[MAP_TOP];
	int n_map = sr->n_top < MAP_TOP ? sr->n_top : MAP_TOP, i, best = 0, rv = -1;
	int *sigma = calloc((size_t)p->world * (size_t)n_map, sizeof(int));
	double best_mapped = 0;

	if (!sigma)
		return pipette_fail(err, "out of memory");
	pipette_mapping_opts_init(&mo);
	mo.seed = MAPPING_SEED;
	mo.budget = p->req.budget;
	mo.block_only = p->req.mapping == PIPETTE_MAP_BLOCK;
	mo.pairs = np;
	for (i = 0; i < sr->n_top; i++) {
		struct plan_entry *e = &p->ranked[i];
		int *s = sigma + (size_t)i * p->world;

		e->cfg = sr->top[i].cfg;
		e->time = sr->top[i].time;
		e->block_s = sr->top[i].time.iteration_s;
		e->peak_bytes = sr->top[i].mem.peak_bytes;
		/* A configuration whose lower bound cannot beat the best
		 * mapped time so far cannot win: skip its mapping. */
		if (i >= n_map || (i > 0 && sr->top[i].lower_bound_s >= best_mapped))
			continue;
		mo.cutoff = i > 0 ? best_mapped : 0;
		pipette_progress_report(&p->req.progress, "placing ranks on GPUs", i, n_map);
		if (pipette_mapping_search(t, &p->model, p->gpu, &e->cfg, cl, &mo, s, &ms[i],
					   err))
			goto out;
		e->bound_s = ms[i].bound_s;
		if (ms[i].cut)
			continue;	/* its placement bound cannot beat the best */
		if (pipette_time_estimate(t, &p->model, p->gpu, &e->cfg, cl, s, 0, &e->time, err))
			goto out;
		e->mapped = 1;
		if (i == 0 || e->time.iteration_s < best_mapped)
			best_mapped = e->time.iteration_s;
	}
	/* Choose the winner among the mapped entries before sorting, so its
	 * sigma is found by index. */
	for (i = 1; i < n_map; i++)
		if (p->ranked[i].mapped && cmp_entry(&p->ranked[i], &p->ranked[best]) < 0)
			best = i;
	memcpy(best_sigma, sigma + (size_t)best * p->world, sizeof(int) * (size_t)p->world);
	p->cfg = p->ranked[best].cfg;
	p->mstats = ms[best];
	qsort(p->ranked, (size_t)sr->n_top, sizeof(*p->ranked), cmp_entry);
	p->n_ranked = sr->n_top < p->req.top_k ? sr->n_top : p->req.top_k;
	rv = 0;
out:
	free(sigma);
	return rv;
}

/* The slowest link between two nodes that hold ranks of the group
 * {first + k*stride, k < n} under the stack's order (GPU r = rank r);
 * HUGE_VAL when the group stays in one node or spans more than 512. */
static double group_worst_link(const struct pipette_plan *p, const struct pipette_cluster *cl,
			       int first, int stride, int n)
{
	double worst = HUGE_VAL;
	int nodes[512], nn = 0, k, j;

	for (k = 0; k < n; k++) {
		int node = (first + k * stride) / p->G;

		if (nn && nodes[nn - 1] == node)
			continue;	/* ranks ascend: a node's ranks are adjacent */
		if (nn == 512)
			return HUGE_VAL;
		nodes[nn++] = node;
	}
	for (k = 0; k < nn; k++)
		for (j = 0; j < nn; j++)
			if (j != k)
				worst = fmin(worst, pipette_cluster_node_link(cl, nodes[k],
									      nodes[j]).gbps);
	return worst;
}

/* Why the plan's FSDP shard group is what it is, in the plan's words:
 * when it stays inside a node of a multi-node plan, the links it avoids;
 * when it shards over fewer than all data-parallel ranks, what sharding
 * over all of them would cost on the same links (the stack's order). */
static int explain_sharding(struct pipette_plan *p, const struct pipette_cluster *cl,
			    struct pipette_timer *t, struct pipette_err *err)
{
	const struct pipette_config *c = &p->cfg;
	int n = c->dp_shard * c->cp, k, node0 = p->gpu_of_rank[0] / p->G, inside = 1;
	size_t len = sizeof(p->sharding_note), used;
	double inter = HUGE_VAL;

	p->sharding_note[0] = '\0';
	if (!p->stack.fsdp || n < 2)
		return 0;
	for (k = 0; k < n; k++)
		inside &= p->gpu_of_rank[k * c->tp] / p->G == node0;
	for (k = 0; k < p->nodes; k++)
		if (k != node0)
			inter = fmin(inter, pipette_cluster_node_link(cl, node0, k).gbps);
	if (inside && p->nodes > 1)
		snprintf(p->sharding_note, len, "the shard group stays inside a node; the links "
			 "from that node to the others measure down to %.2f GB/s", inter);
	if (c->dp_shard < c->dp) {
		struct pipette_config full = *c;
		struct pipette_time tm;
		double worst;

		double base = p->mstats.block_s > 0 ? p->mstats.block_s : p->time.iteration_s;

		/* both in the stack's order: the mapping's gain is not sharding's */
		full.dp_shard = full.dp;
		if (pipette_time_estimate(t, &p->model, p->gpu, &full, cl, NULL, 0, &tm, err))
			return -1;
		worst = group_worst_link(p, cl, 0, full.tp, full.dp * full.cp);
		used = strlen(p->sharding_note);
		snprintf(p->sharding_note + used, len - used, "%ssharding over all %d "
			 "data-parallel ranks would take %.4f s in the stack's order (%+.1f%%)",
			 used ? "; " : "",
			 full.dp * full.cp, tm.iteration_s, 100.0 * (tm.iteration_s / base - 1));
		used = strlen(p->sharding_note);
		if (isfinite(worst))
			snprintf(p->sharding_note + used, len - used, ", its collectives crossing "
				 "links of %.2f GB/s", worst);
	}
	return 0;
}

/* The winner in detail: time breakdown, memory with the simulated
 * in-flight counts, the rank placement and the plan's hash. */
static int detail(struct pipette_plan *p, const struct pipette_cluster *cl,
		  struct pipette_timer *t, struct pipette_err *err)
{
	int i, r;

	if (pipette_time_estimate(t, &p->model, p->gpu, &p->cfg, cl, p->gpu_of_rank, 1,
				  &p->time, err))
		return -1;
	p->stages = calloc((size_t)p->cfg.pp, sizeof(*p->stages));
	p->rank_at = malloc(sizeof(int) * (size_t)p->nodes * (size_t)p->G);
	if (!p->stages || !p->rank_at)
		return pipette_fail(err, "out of memory");
	pipette_memory_estimate(&p->model, p->gpu, &p->cfg, p->req.mem_fraction,
				pipette_timer_inflight(t), p->stages, &p->mem);
	for (i = 0; i < p->nodes * p->G; i++)
		p->rank_at[i] = -1;
	for (r = 0; r < p->world; r++)
		p->rank_at[p->gpu_of_rank[r]] = r;
	if (explain_sharding(p, cl, t, err))
		return -1;
	/* a pinned knob the stack's current launch cannot say (render/
	 * torchtitan.c writes the TOML form that can) */
	if (p->stack.form == PIPETTE_FORM_TORCHTITAN && p->cfg.recompute_every > 1 &&
	    add_warning(p, "torchtitan after v0.2.2 has no every-k-th-layer checkpointing: "
			"PIPETTE_LAUNCH_ARGS is not set; --format torchtitan prints the v0.2.2 TOML"))
		return pipette_fail(err, "out of memory");
	if (p->stack.form == PIPETTE_FORM_TORCHTITAN && p->cfg.precision != PIPETTE_PREC_BF16 &&
	    add_warning(p, "torchtitan takes a low-precision converter in its model spec, not on "
			"its command line: PIPETTE_LAUNCH_ARGS is not set; --format torchtitan "
			"prints the recipe module and the v0.2.2 TOML"))
		return pipette_fail(err, "out of memory");
	if (compute_hash(p))
		return pipette_fail_code(err, PIPETTE_E_INTERNAL, "out of memory");
	return 0;
}

int pipette_plan_compute(const struct pipette_request *req,
			 const struct pipette_cluster_spec *cs,
			 struct pipette_plan **out, struct pipette_err *err)
{
	struct pipette_plan *p = NULL;
	struct pipette_bwcache *bw = NULL;
	struct pipette_cluster *cl = NULL;
	struct pipette_node_pairs *np = NULL;
	struct pipette_timer *t = NULL;
	struct pipette_search_result sr = { 0 };
	int *best_sigma = NULL, rv = -1;
	double t0 = now_s();

	*out = NULL;
	if (check_request(req, cs, err))
		return -1;
	p = calloc(1, sizeof(*p));
	if (!p) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	pipette_site_factors_init(&p->site);
	if (copy_cluster_spec(p, cs, err) || load_inputs(p, req, &bw, &cl, err))
		goto out;
	/* the cluster holds what the plan reads of the cache from here */
	pipette_bwcache_destroy(bw);
	bw = NULL;
	if (!(np = pipette_node_pairs_create(cl)) || !(t = pipette_timer_create())) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	if (search(p, cl, np, t, &sr, err))
		goto out;
	p->ranked = calloc((size_t)sr.n_top, sizeof(*p->ranked));
	p->world = pipette_config_world(&sr.top[0].cfg);
	best_sigma = calloc((size_t)p->world, sizeof(int));
	if (!p->ranked || !best_sigma) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	if (map_and_rank(p, cl, np, t, &sr, best_sigma, err))
		goto out;
	p->gpu_of_rank = best_sigma;
	best_sigma = NULL;
	if (detail(p, cl, t, err))
		goto out;
	p->search_wall_s = now_s() - t0;
	*out = p;
	p = NULL;
	rv = 0;
out:
	free(best_sigma);
	pipette_search_result_free(&sr);
	pipette_timer_destroy(t);
	pipette_node_pairs_destroy(np);
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);
	pipette_plan_destroy(p);
	return rv;
}

/* ---- accessors ------------------------------------------------------------ */

const struct pipette_config *pipette_plan_config(const struct pipette_plan *plan)
{
	return &plan->cfg;
}

enum pipette_launch_mode pipette_plan_launch(const struct pipette_plan *plan)
{
	return plan->req.launch;
}

int pipette_plan_world(const struct pipette_plan *plan)
{
	return plan->world;
}

int pipette_plan_ranked_count(const struct pipette_plan *plan)
{
	return plan->n_ranked;
}

const struct pipette_config *pipette_plan_ranked_config(const struct pipette_plan *plan, int i)
{
	return i >= 0 && i < plan->n_ranked ? &plan->ranked[i].cfg : NULL;
}

int pipette_plan_gpus_per_node(const struct pipette_plan *plan)
{
	return plan->G;
}

const char *pipette_plan_warnings(const struct pipette_plan *plan)
{
	return plan->warnings ? plan->warnings : "";
}

void pipette_plan_rank_location(const struct pipette_plan *plan, int rank, int *node,
				int *slot)
{
	if (rank < 0 || rank >= plan->world) {
		*node = *slot = -1;
		return;
	}
	*node = plan->gpu_of_rank[rank] / plan->G;
	*slot = plan->gpu_of_rank[rank] % plan->G;
}

int pipette_plan_rank_at(const struct pipette_plan *plan, int node, int slot)
{
	if (node < 0 || node >= plan->nodes || slot < 0 || slot >= plan->G)
		return -1;
	return plan->rank_at[node * plan->G + slot];
}

double pipette_plan_iteration_s(const struct pipette_plan *plan)
{
	return plan->time.iteration_s;
}

double pipette_plan_block_iteration_s(const struct pipette_plan *plan)
{
	return plan->mstats.block_s;
}

int pipette_plan_mapping_negligible(const struct pipette_plan *plan)
{
	return pipette_plan_mapping_gain(plan) < PIPETTE_NEGLIGIBLE_GAIN;
}

double pipette_plan_mapping_gain(const struct pipette_plan *plan)
{
	return plan->time.iteration_s > 0 ? plan->mstats.block_s / plan->time.iteration_s : 1;
}

const struct pipette_time *pipette_plan_time(const struct pipette_plan *plan)
{
	return &plan->time;
}

const char *pipette_plan_hash(const struct pipette_plan *plan)
{
	return plan->hash;
}
