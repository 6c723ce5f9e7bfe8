/* pipette: one call from a request to a plan, and the plan's renderers.
 *
 * pipette_plan_compute: load the model, the GPU type and the bandwidth
 * cache; build the cluster; search configurations (search.h) under the
 * block mapping; map the best few (mapping.h) and rank them by their
 * mapped time; estimate the winner in detail.  Everything is a function of
 * the request and the cluster: no clock enters the plan (the search time
 * is measured for the table only and never written to JSON or env). */
#define _GNU_SOURCE	/* strverscmp */
#include "plan.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bwcache.h"
#include "cluster.h"
#include "hardware.h"
#include "mapping.h"
#include "memory.h"
#include "model.h"
#include "readfile.h"
#include "search.h"
#include "timing.h"

/* Configurations that get a mapping search before the final ranking: the
 * block-order ranking rarely reorders beyond the third (tests/bench), and
 * each mapping costs up to its budget of full estimates. */
#define MAP_TOP 3
/* Runners-up kept when the request does not say. */
#define DEFAULT_TOP_K 5
/* Seed of the mapping search: fixed, so every node computes one plan. */
#define MAPPING_SEED 0x7069706574746531ULL	/* "pipette1" */

static const double GIB = 1024.0 * 1024.0 * 1024.0;

struct plan_entry {
	struct pipette_config cfg;
	struct pipette_time time;	/* under its mapping (block if unmapped) */
	double block_s;
	int mapped;
	double peak_bytes;
};

struct pipette_plan {
	struct pipette_request req;
	struct pipette_model model;
	const struct pipette_gpu_spec *gpu;
	struct pipette_gpu_spec gpu_calibrated;
	int nodes, G, world;
	char **names;
	int *gpu_ids;
	struct pipette_config cfg;
	int *gpu_of_rank;	/* world */
	int *rank_at;		/* nodes*G, -1 = idle */
	struct pipette_time time;
	struct pipette_memory mem;
	struct pipette_stage_memory *stages;
	struct pipette_mapping_stats mstats;
	struct plan_entry *ranked;
	int n_ranked;
	struct pipette_search_stats sstats;
	char *warnings;
	double search_wall_s;
	char hash[PIPETTE_HASH_HEX + 1];
};

void pipette_request_init(struct pipette_request *req)
{
	memset(req, 0, sizeof(*req));
	req->global_batch = 0;
	req->seq_len = 0;
	req->mem_fraction = PIPETTE_DEFAULT_MEM_FRACTION;
	req->pins.tp = req->pins.pp = req->pins.dp = req->pins.cp = -1;
	req->pins.ep = req->pins.etp = req->pins.vpp = req->pins.micro_batch = -1;
	req->pins.schedule = req->pins.recompute = -1;
	req->pins.sequence_parallel = req->pins.distributed_optimizer = -1;
	req->mapping = PIPETTE_MAP_OPTIMIZE;
	req->launch = PIPETTE_LAUNCH_SRUN;
	req->budget = 0;
	req->top_k = DEFAULT_TOP_K;
	req->stale_days = 0;
}

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
	const int pins[] = { pn->tp, pn->pp, pn->dp, pn->cp, pn->ep, pn->etp, pn->vpp,
			     pn->micro_batch };
	static const char *const pin_names[] = { "tp", "pp", "dp", "cp", "ep", "etp",
						 "vpp", "micro-batch" };
	size_t i;
	int a, b;

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
	if (req->seq_len < 1)
		return pipette_fail(err, "sequence length %ld must be >= 1", req->seq_len);
	if (!(req->mem_fraction > 0 && req->mem_fraction <= 1))
		return pipette_fail(err, "memory fraction %g is not in (0, 1]",
				    req->mem_fraction);
	for (i = 0; i < sizeof(pins) / sizeof(pins[0]); i++)
		if (pins[i] == 0 || pins[i] < -1)
			return pipette_fail(err, "pinned %s %d must be >= 1 (or -1 = search)",
					    pin_names[i], pins[i]);
	if (pn->schedule < -1 || pn->schedule >= PIPETTE_SCHED_COUNT)
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
	char why[200] = "";
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

		snprintf(why, sizeof(why), "; %ld exceed %.0f%% of GPU memory (mostly %s); "
			 "the closest, tp %d pp %d dp %d cp %d micro-batch %d, is %.2f GiB over",
			 st->pruned_memory, 100 * req->mem_fraction,
			 pipette_mem_part_name((enum pipette_mem_part)best), c->tp, c->pp,
			 c->dp, c->cp, c->micro_batch, st->least_excess_bytes / GIB);
	}
	return pipette_fail_code(err, PIPETTE_E_NOFIT, PIPETTE_PLAN_NOFIT_PREFIX " %s on %d GPUs (global batch "
			    "%ld, seq len %ld): %ld combinations considered, %ld invalid "
			    "(divisibility or pins)%s", m->name, world, req->global_batch,
			    req->seq_len, st->considered, st->invalid, why);
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

static int compute_hash(struct pipette_plan *p);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int pipette_plan_compute(const struct pipette_request *req,
			 const struct pipette_cluster_spec *cs,
			 struct pipette_plan **out, struct pipette_err *err)
{
	struct pipette_plan *p = NULL;
	struct pipette_bwcache *bw = NULL;
	struct pipette_cluster *cl = NULL;
	struct pipette_timer *t = NULL;
	struct pipette_search_input in;
	struct pipette_search_result sr = { 0 };
	struct pipette_mapping_opts mo;
	struct pipette_mapping_stats ms[MAP_TOP];
	int *sigma = NULL, *best_sigma = NULL, rv = -1, i, n_map, best = 0, r;
	double t0 = now_s(), best_mapped = 0;

	*out = NULL;
	if (check_request(req, cs, err))
		return -1;
	p = calloc(1, sizeof(*p));
	if (!p) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	if (copy_cluster_spec(p, cs, err))
		goto out;
	p->req = *req;
	if (p->req.top_k < 1)
		p->req.top_k = DEFAULT_TOP_K;
	if (pipette_model_load(req->model, req->models_dir[0] ? req->models_dir : NULL,
			       &p->model, err))
		goto out;
	if (req->pin_model_sha256[0] &&
	    check_pin("model config", req->model, p->model.has_source_sha256 ?
		      p->model.source_sha256 : NULL, req->pin_model_sha256, err))
		goto out;
	if ((p->gpu = pipette_gpu_lookup(req->gpu, err)) && req->calibration[0]) {
		if (pipette_gpu_calibrate(p->gpu, req->calibration, &p->gpu_calibrated, err))
			p->gpu = NULL;
		else
			p->gpu = &p->gpu_calibrated;
	}
	if (!p->gpu)
		goto out;
	if (req->bandwidth[0]) {
		if (pipette_bwcache_load(req->bandwidth, &bw, err))
			goto out;
		if (req->pin_bandwidth_sha256[0] &&
		    check_pin("bandwidth cache", req->bandwidth, pipette_bwcache_sha256(bw),
			      req->pin_bandwidth_sha256, err))
			goto out;
		if (req->stale_days > 0) {
			char msg[512];

			if (pipette_bwcache_stale(bw, (const char *const *)p->names, p->nodes,
						  time(NULL), req->stale_days * 86400.0, msg,
						  sizeof(msg)) > 0 && add_warning(p, msg)) {
				pipette_fail(err, "out of memory");
				goto out;
			}
		}
	}
	cl = pipette_cluster_create((const char *const *)p->names, p->nodes, p->G,
				    p->gpu_ids, p->gpu, bw, 0, err);
	if (!cl) {
		if (req->bandwidth[0])
			pipette_fail_prefix(err, "%s: ", req->bandwidth);
		goto out;
	}
	if (add_warning(p, pipette_cluster_warnings(cl))) {
		pipette_fail(err, "out of memory");
		goto out;
	}

	memset(&in, 0, sizeof(in));
	in.model = &p->model;
	in.gpu = p->gpu;
	in.cluster = cl;
	in.global_batch = req->global_batch;
	in.seq_len = req->seq_len;
	in.mem_fraction = req->mem_fraction;
	in.pins = req->pins;
	in.compress = req->compress;
	in.attention = req->attention;
	in.allow_compression = req->allow_compression;
	in.top_k = p->req.top_k > MAP_TOP ? p->req.top_k : MAP_TOP;
	if (pipette_search_run(&in, &sr, err))
		goto out;
	p->sstats = sr.stats;
	if (sr.stats.failed) {
		char msg[400];

		snprintf(msg, sizeof(msg), "%ld configuration%s could not be estimated and "
			 "were skipped (first: %.200s)", sr.stats.failed,
			 sr.stats.failed == 1 ? "" : "s", sr.stats.failed_msg);
		if (add_warning(p, msg)) {
			pipette_fail(err, "out of memory");
			goto out;
		}
	}
	if (sr.n_top == 0) {
		fail_nofit(&sr.stats, &p->model, req, p->nodes * p->G, err);
		goto out;
	}

	/* Map the best few and rank them by their mapped time. */
	t = pipette_timer_create();
	p->ranked = calloc((size_t)sr.n_top, sizeof(*p->ranked));
	n_map = sr.n_top < MAP_TOP ? sr.n_top : MAP_TOP;
	p->world = pipette_config_world(&sr.top[0].cfg);
	sigma = calloc((size_t)p->world * (size_t)n_map, sizeof(int));
	best_sigma = calloc((size_t)p->world, sizeof(int));
	if (!t || !p->ranked || !sigma || !best_sigma) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	pipette_mapping_opts_init(&mo);
	mo.seed = MAPPING_SEED;
	mo.budget = req->budget;
	mo.block_only = req->mapping == PIPETTE_MAP_BLOCK;
	for (i = 0; i < sr.n_top; i++) {
		struct plan_entry *e = &p->ranked[i];

		e->cfg = sr.top[i].cfg;
		e->time = sr.top[i].time;
		e->block_s = sr.top[i].time.iteration_s;
		e->peak_bytes = sr.top[i].mem.peak_bytes;
		/* A configuration whose lower bound cannot beat the best
		 * mapped time so far cannot win: skip its mapping. */
		if (i < n_map && (i == 0 || sr.top[i].lower_bound_s < best_mapped)) {
			if (pipette_mapping_search(t, &p->model, p->gpu, &e->cfg, cl, &mo,
						   sigma + (size_t)i * p->world, &ms[i], err))
				goto out;
			if (pipette_time_estimate(t, &p->model, p->gpu, &e->cfg, cl,
						  sigma + (size_t)i * p->world, 0, &e->time, err))
				goto out;
			e->mapped = 1;
			if (i == 0 || e->time.iteration_s < best_mapped)
				best_mapped = e->time.iteration_s;
		}
	}
	/* Choose the winner among the mapped entries before sorting, so its
	 * sigma is found by index. */
	for (i = 1; i < n_map; i++)
		if (p->ranked[i].mapped && cmp_entry(&p->ranked[i], &p->ranked[best]) < 0)
			best = i;
	memcpy(best_sigma, sigma + (size_t)best * p->world, sizeof(int) * (size_t)p->world);
	p->cfg = p->ranked[best].cfg;
	qsort(p->ranked, (size_t)sr.n_top, sizeof(*p->ranked), cmp_entry);
	p->n_ranked = sr.n_top < p->req.top_k ? sr.n_top : p->req.top_k;

	/* The winner in detail: time breakdown, memory with the simulated
	 * in-flight counts. */
	p->mstats = ms[best];
	if (pipette_time_estimate(t, &p->model, p->gpu, &p->cfg, cl, best_sigma, 1,
				  &p->time, err))
		goto out;
	p->stages = calloc((size_t)p->cfg.pp, sizeof(*p->stages));
	p->rank_at = malloc(sizeof(int) * (size_t)p->nodes * (size_t)p->G);
	if (!p->stages || !p->rank_at) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	pipette_memory_estimate(&p->model, p->gpu, &p->cfg, req->mem_fraction,
				pipette_timer_inflight(t), p->stages, &p->mem);
	for (i = 0; i < p->nodes * p->G; i++)
		p->rank_at[i] = -1;
	for (r = 0; r < p->world; r++)
		p->rank_at[best_sigma[r]] = r;
	p->gpu_of_rank = best_sigma;
	best_sigma = NULL;
	if (compute_hash(p)) {
		pipette_fail_code(err, PIPETTE_E_INTERNAL, "out of memory");
		goto out;
	}
	p->search_wall_s = now_s() - t0;
	*out = p;
	p = NULL;
	rv = 0;
out:
	free(sigma);
	free(best_sigma);
	pipette_search_result_free(&sr);
	pipette_timer_destroy(t);
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

int pipette_plan_world(const struct pipette_plan *plan)
{
	return plan->world;
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

double pipette_plan_mapping_gain(const struct pipette_plan *plan)
{
	return plan->time.iteration_s > 0 ? plan->mstats.block_s / plan->time.iteration_s : 1;
}

/* ---- environment ---------------------------------------------------------- */

int pipette_plan_megatron_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	size_t n = 0;
	int w;

#define ARG(...) do { \
		w = snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__); \
		if (w < 0) return -1; \
		n += (size_t)w; \
	} while (0)
	if (!len)
		return -1;
	buf[0] = '\0';
	ARG("--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
	    "--context-parallel-size %d", c->tp, c->pp, c->cp);
	if (plan->model.experts)
		ARG(" --expert-model-parallel-size %d --expert-tensor-parallel-size %d",
		    c->ep, c->etp);
	if (c->schedule == PIPETTE_SCHED_INTERLEAVED)
		ARG(" --num-virtual-stages-per-pipeline-rank %d", c->vpp);
	if (c->first_stage_layers)
		ARG(" --decoder-first-pipeline-num-layers %d", c->first_stage_layers);
	if (c->last_stage_layers)
		ARG(" --decoder-last-pipeline-num-layers %d", c->last_stage_layers);
	ARG(" --micro-batch-size %d --global-batch-size %ld --seq-length %ld",
	    c->micro_batch, c->global_batch, c->seq_len);
	if (c->sequence_parallel)
		ARG(" --sequence-parallel");
	if (c->distributed_optimizer)
		ARG(" --use-distributed-optimizer");
	/* Flash: Megatron-Core's default backend (auto) already picks a fused
	 * kernel; only the unfused one needs asking for. */
	if (c->attention == PIPETTE_ATTN_UNFUSED)
		ARG(" --attention-backend unfused");
	if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE)
		ARG(" --recompute-granularity selective");
	else if (c->recompute == PIPETTE_RECOMPUTE_FULL)
		ARG(" --recompute-granularity full --recompute-method uniform "
		    "--recompute-num-layers 1");
	/* Compression exists only in the Optimus-CC fork of Megatron-LM;
	 * its flag names (ecosystem.md §1.1). */
	if (c->compress.pp_rank) {
		ARG(" --inter_grad_comp --inter_grad_comp_rank %d --use_error_feedback",
		    c->compress.pp_rank);
		if (c->compress.pp_epilogue_only)
			ARG(" --inter_grad_comp_epilogue_only");
	}
	if (c->compress.dp_rank) {
		ARG(" --grad_comp --grad_comp_rank %d", c->compress.dp_rank);
		if (c->compress.dp_stages)
			ARG(" --selective_grad_comp --selective_grad_comp_way %d",
			    c->compress.dp_stages);
	}
	if (c->compress.fused_embedding)
		ARG(" --emb_comm_opt");
#undef ARG
	return n < len ? 0 : -1;
}

int pipette_plan_job_env(const struct pipette_plan *plan, pipette_env_set_fn set, void *ctx)
{
	const struct pipette_config *c = &plan->cfg;
	char args[1024], v[64];

#define SETI(name, val) do { snprintf(v, sizeof(v), "%ld", (long)(val)); \
		if (set(ctx, name, v)) return -1; } while (0)
#define SETD(name, fmt, val) do { snprintf(v, sizeof(v), fmt, val); \
		if (set(ctx, name, v)) return -1; } while (0)
	if (pipette_plan_megatron_args(plan, args, sizeof(args)))
		return -1;
	SETI("PIPETTE_TP", c->tp);
	SETI("PIPETTE_PP", c->pp);
	SETI("PIPETTE_DP", c->dp);
	SETI("PIPETTE_CP", c->cp);
	SETI("PIPETTE_EP", c->ep);
	SETI("PIPETTE_VPP", pipette_config_chunks(c));
	SETI("PIPETTE_MICRO_BATCH", c->micro_batch);
	SETI("PIPETTE_GLOBAL_BATCH", c->global_batch);
	if (set(ctx, "PIPETTE_SCHEDULE", pipette_schedule_name(c->schedule)) ||
	    set(ctx, "PIPETTE_RECOMPUTE", pipette_recompute_name(c->recompute)))
		return -1;
	SETI("PIPETTE_SEQUENCE_PARALLEL", c->sequence_parallel);
	SETI("PIPETTE_DISTRIBUTED_OPTIMIZER", c->distributed_optimizer);
	if (set(ctx, "PIPETTE_MEGATRON_ARGS", args))
		return -1;
	SETD("PIPETTE_PREDICTED_ITER_S", "%.4f", plan->time.iteration_s);
	SETD("PIPETTE_PREDICTED_MEM_GIB", "%.2f", plan->mem.peak_bytes / GIB);
	SETD("PIPETTE_MAPPING_GAIN", "%.4f", pipette_plan_mapping_gain(plan));
	if (set(ctx, "PIPETTE_PLAN_HASH", plan->hash))
		return -1;
#undef SETI
#undef SETD
	return 0;
}

const char *pipette_plan_hash(const struct pipette_plan *plan)
{
	return plan->hash;
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
	char hex[2 * PIPETTE_SHA256_LEN + 1], *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int i;

	if (!f)
		return -1;
	fprintf(f, "pipette-plan/1\nmodel=%s\ngpu=%s\nlaunch=%d\n", p->model.name, p->gpu->name,
		(int)p->req.launch);
	fprintf(f, "config=%d,%d,%d,%d,%d,%d,%d,%d,%ld,%ld,%d,%d,%d,%d,%d,%d,%d\n", c->tp, c->pp,
		c->dp, c->cp, c->ep, c->etp, c->vpp, c->micro_batch, c->global_batch, c->seq_len,
		(int)c->recompute, c->sequence_parallel, c->distributed_optimizer,
		(int)c->schedule, (int)c->attention, c->first_stage_layers, c->last_stage_layers);
	fprintf(f, "compress=%d,%d,%d,%d,%d\n", z->pp_rank, z->pp_epilogue_only, z->dp_rank,
		z->dp_stages, z->fused_embedding);
	fprintf(f, "predicted=%.4f,%.2f,%.4f\n", p->time.iteration_s, p->mem.peak_bytes / GIB,
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
	pipette_sha256_hex(sha, hex);
	memcpy(p->hash, hex, PIPETTE_HASH_HEX);
	p->hash[PIPETTE_HASH_HEX] = '\0';
	free(text);
	return 0;
}

/* CUDA_VISIBLE_DEVICES for a node: Slurm's GPU list permuted so that index
 * i is the GPU of the node's i-th lowest rank; idle slots follow in slot
 * order.  Returns the number of ranks on the node. */
static int node_devices(const struct pipette_plan *plan, int node, int *slot_of_local,
			char *buf, size_t len)
{
	int G = plan->G, i, j, k = 0, n = 0;
	size_t off = 0;

	/* ranks on the node in ascending order (slot by slot selection) */
	for (i = 0; i < G; i++) {
		int pick = -1;

		for (j = 0; j < G; j++) {
			int r = plan->rank_at[node * G + j], used = 0, q;

			if (r < 0)
				continue;
			for (q = 0; q < k; q++)
				if (slot_of_local[q] == j)
					used = 1;
			if (!used && (pick < 0 || r < plan->rank_at[node * G + pick]))
				pick = j;
		}
		if (pick < 0)
			break;
		slot_of_local[k++] = pick;
	}
	n = k;
	for (j = 0; j < G; j++)
		if (plan->rank_at[node * G + j] < 0)
			slot_of_local[k++] = j;
	buf[0] = '\0';
	for (i = 0; i < G; i++) {
		int w = snprintf(buf + off, off < len ? len - off : 0, "%s%d", i ? "," : "",
				 plan->gpu_ids[slot_of_local[i]]);

		if (w > 0)
			off += (size_t)w;
	}
	return n;
}

int pipette_plan_task_env(const struct pipette_plan *plan, int node, int local_task,
			  pipette_env_set_fn set, void *ctx, struct pipette_err *err)
{
	int slot_of_local[PIPETTE_BW_MAX_GPUS], n_local, G = plan->G, i;
	int master = plan->gpu_of_rank[0] / G;
	char cvd[PIPETTE_BW_MAX_GPUS * 12], v[32];

	if (node < 0 || node >= plan->nodes)
		return pipette_fail(err, "node index %d is outside the plan's %d nodes",
				    node, plan->nodes);
	n_local = node_devices(plan, node, slot_of_local, cvd, sizeof(cvd));
	if (n_local == 0)
		return pipette_fail(err, "node %s runs no rank of the plan (%d ranks on "
				    "%d nodes)", plan->names[node], plan->world, plan->nodes);
	/* Validate everything before the first set: no half-set environment. */
	if (plan->req.launch == PIPETTE_LAUNCH_TORCHRUN) {
		if (!pipette_mapping_is_node_block(plan->gpu_of_rank, plan->world, G) ||
		    n_local != G)
			return pipette_fail(err, "the plan's mapping is not node-block: "
					    "launch with srun (one task per GPU)");
	} else {
		if (local_task < 0 || local_task >= G)
			return pipette_fail(err, "local task %d is outside the node's %d GPUs",
					    local_task, G);
		if (plan->rank_at[node * G + local_task] < 0)
			return pipette_fail(err, "GPU %d of node %s runs no rank of the plan",
					    plan->gpu_ids[local_task], plan->names[node]);
	}
	if (set(ctx, "MASTER_ADDR", plan->names[master]))
		return pipette_fail(err, "cannot set MASTER_ADDR");
	snprintf(v, sizeof(v), "%d", plan->world);
	if (set(ctx, "WORLD_SIZE", v))
		return pipette_fail(err, "cannot set WORLD_SIZE");
	if (plan->req.launch == PIPETTE_LAUNCH_TORCHRUN) {
		int first = plan->rank_at[node * G + slot_of_local[0]];

		snprintf(v, sizeof(v), "%d", first / G);
		if (set(ctx, "NODE_RANK", v))
			return pipette_fail(err, "cannot set NODE_RANK");
	} else {
		int slot = local_task, rank = plan->rank_at[node * G + slot];

		for (i = 0; i < n_local; i++)
			if (slot_of_local[i] == slot)
				break;
		snprintf(v, sizeof(v), "%d", rank);
		if (set(ctx, "RANK", v))
			return pipette_fail(err, "cannot set RANK");
		snprintf(v, sizeof(v), "%d", i);
		if (set(ctx, "LOCAL_RANK", v))
			return pipette_fail(err, "cannot set LOCAL_RANK");
		snprintf(v, sizeof(v), "%d", n_local);
		if (set(ctx, "LOCAL_WORLD_SIZE", v))
			return pipette_fail(err, "cannot set LOCAL_WORLD_SIZE");
	}
	if (set(ctx, "CUDA_VISIBLE_DEVICES", cvd))
		return pipette_fail(err, "cannot set CUDA_VISIBLE_DEVICES");
	return 0;
}

/* ---- renderers ------------------------------------------------------------ */

static int print_env_var(void *ctx, const char *name, const char *value)
{
	FILE *f = ctx;

	return fprintf(f, "%s='%s'\n", name, value) < 0 ? -1 : 0;
}

int pipette_plan_write_env(const struct pipette_plan *plan, FILE *f)
{
	return pipette_plan_job_env(plan, print_env_var, f);
}

static const char *launch_name(enum pipette_launch_mode l)
{
	return l == PIPETTE_LAUNCH_TORCHRUN ? "torchrun" : "srun";
}

static void split_text(const struct pipette_config *c, char *buf, size_t len)
{
	if (c->first_stage_layers || c->last_stage_layers)
		snprintf(buf, len, "%d/../%d", c->first_stage_layers, c->last_stage_layers);
	else
		snprintf(buf, len, "even");
}

static struct json_object *jd(double v)
{
	return json_object_new_double(v);
}

struct json_object *pipette_config_json(const struct pipette_config *c)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "tp", json_object_new_int(c->tp));
	json_object_object_add(o, "pp", json_object_new_int(c->pp));
	json_object_object_add(o, "dp", json_object_new_int(c->dp));
	json_object_object_add(o, "cp", json_object_new_int(c->cp));
	json_object_object_add(o, "ep", json_object_new_int(c->ep));
	json_object_object_add(o, "etp", json_object_new_int(c->etp));
	json_object_object_add(o, "vpp", json_object_new_int(pipette_config_chunks(c)));
	json_object_object_add(o, "micro_batch", json_object_new_int(c->micro_batch));
	json_object_object_add(o, "global_batch", json_object_new_int64(c->global_batch));
	json_object_object_add(o, "seq_len", json_object_new_int64(c->seq_len));
	json_object_object_add(o, "microbatches",
			       json_object_new_int64(pipette_config_microbatches(c)));
	json_object_object_add(o, "schedule",
			       json_object_new_string(pipette_schedule_name(c->schedule)));
	json_object_object_add(o, "recompute",
			       json_object_new_string(pipette_recompute_name(c->recompute)));
	json_object_object_add(o, "sequence_parallel",
			       json_object_new_boolean(c->sequence_parallel));
	json_object_object_add(o, "distributed_optimizer",
			       json_object_new_boolean(c->distributed_optimizer));
	json_object_object_add(o, "attention",
			       json_object_new_string(pipette_attention_name(c->attention)));
	json_object_object_add(o, "first_stage_layers",
			       json_object_new_int(c->first_stage_layers));
	json_object_object_add(o, "last_stage_layers",
			       json_object_new_int(c->last_stage_layers));
	{
		char spec[96];

		pipette_compression_format(&c->compress, spec, sizeof(spec));
		json_object_object_add(o, "compression", json_object_new_string(spec));
	}
	return o;
}

static struct json_object *time_json(const struct pipette_time *t)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "iteration_s", jd(t->iteration_s));
	json_object_object_add(o, "makespan_s", jd(t->makespan_s));
	json_object_object_add(o, "compute_s", jd(t->compute_s));
	json_object_object_add(o, "bubble_s", jd(t->bubble_s));
	json_object_object_add(o, "tp_comm_s", jd(t->tp_comm_s));
	json_object_object_add(o, "cp_comm_s", jd(t->cp_comm_s));
	json_object_object_add(o, "ep_comm_s", jd(t->ep_comm_s));
	json_object_object_add(o, "pp_comm_s", jd(t->pp_comm_s));
	json_object_object_add(o, "pp_exposed_s", jd(t->pp_exposed_s));
	json_object_object_add(o, "dp_comm_s", jd(t->dp_comm_s));
	json_object_object_add(o, "dp_exposed_s", jd(t->dp_exposed_s));
	json_object_object_add(o, "embed_sync_s", jd(t->embed_sync_s));
	json_object_object_add(o, "optimizer_s", jd(t->optimizer_s));
	json_object_object_add(o, "exposed_comm_s", jd(t->exposed_comm_s));
	return o;
}

static struct json_object *stage_mem_json(const struct pipette_stage_memory *s, int idx)
{
	struct json_object *o = json_object_new_object();

	if (idx >= 0)
		json_object_object_add(o, "stage", json_object_new_int(idx));
	json_object_object_add(o, "layers", json_object_new_int(s->layers));
	json_object_object_add(o, "inflight_microbatches", jd(s->inflight));
	json_object_object_add(o, "params_bytes", jd(s->params_bytes));
	json_object_object_add(o, "grads_bytes", jd(s->grads_bytes));
	json_object_object_add(o, "optimizer_bytes", jd(s->optimizer_bytes));
	json_object_object_add(o, "activations_bytes", jd(s->activations_bytes));
	json_object_object_add(o, "other_bytes", jd(s->other_bytes));
	json_object_object_add(o, "total_bytes", jd(s->total_bytes));
	return o;
}

int pipette_plan_write_json(const struct pipette_plan *plan, FILE *f)
{
	struct json_object *root = json_object_new_object(), *o, *a, *pr, *mem;
	const struct pipette_search_stats *st = &plan->sstats;
	char args[1024];
	int i, rc;

	if (!root || pipette_plan_megatron_args(plan, args, sizeof(args)))
		return -1;
	json_object_object_add(root, "schema", json_object_new_string("pipette-plan/1"));
	json_object_object_add(root, "model", json_object_new_string(plan->model.name));
	json_object_object_add(root, "gpu", json_object_new_string(plan->gpu->name));
	json_object_object_add(root, "plan_hash", json_object_new_string(plan->hash));
	o = json_object_new_object();
	a = json_object_new_array();
	for (i = 0; i < plan->nodes; i++)
		json_object_array_add(a, json_object_new_string(plan->names[i]));
	json_object_object_add(o, "nodes", a);
	json_object_object_add(o, "gpus_per_node", json_object_new_int(plan->G));
	a = json_object_new_array();
	for (i = 0; i < plan->G; i++)
		json_object_array_add(a, json_object_new_int(plan->gpu_ids[i]));
	json_object_object_add(o, "gpu_ids", a);
	json_object_object_add(o, "bandwidth", json_object_new_string(
		plan->req.bandwidth[0] ? plan->req.bandwidth : "nominal"));
	json_object_object_add(root, "cluster", o);
	json_object_object_add(root, "config", pipette_config_json(&plan->cfg));
	json_object_object_add(root, "megatron_args", json_object_new_string(args));

	pr = json_object_new_object();
	json_object_object_add(pr, "iteration_s", jd(plan->time.iteration_s));
	json_object_object_add(pr, "tokens_per_s", jd(plan->time.tokens_per_s));
	json_object_object_add(pr, "tflops_per_gpu", jd(plan->time.tflops_per_gpu));
	json_object_object_add(pr, "mfu", jd(plan->time.mfu));
	json_object_object_add(pr, "time", time_json(&plan->time));
	mem = json_object_new_object();
	json_object_object_add(mem, "peak_bytes", jd(plan->mem.peak_bytes));
	json_object_object_add(mem, "peak_stage", json_object_new_int(plan->mem.peak_stage));
	json_object_object_add(mem, "capacity_bytes", jd(plan->mem.capacity_bytes));
	json_object_object_add(mem, "limit_bytes", jd(plan->mem.limit_bytes));
	json_object_object_add(mem, "peak", stage_mem_json(&plan->mem.peak, -1));
	a = json_object_new_array();
	for (i = 0; i < plan->cfg.pp; i++)
		json_object_array_add(a, stage_mem_json(&plan->stages[i], i));
	json_object_object_add(mem, "per_stage", a);
	json_object_object_add(pr, "memory", mem);
	json_object_object_add(root, "predicted", pr);

	o = json_object_new_object();
	json_object_object_add(o, "mode", json_object_new_string(
		plan->req.mapping == PIPETTE_MAP_BLOCK ? "block" : "optimize"));
	json_object_object_add(o, "launch", json_object_new_string(launch_name(plan->req.launch)));
	json_object_object_add(o, "node_block", json_object_new_boolean(
		pipette_mapping_is_node_block(plan->gpu_of_rank, plan->world, plan->G)));
	json_object_object_add(o, "block_iteration_s", jd(plan->mstats.block_s));
	json_object_object_add(o, "iteration_s", jd(plan->time.iteration_s));
	json_object_object_add(o, "gain", jd(pipette_plan_mapping_gain(plan)));
	json_object_object_add(o, "evaluations", json_object_new_int64(plan->mstats.evaluations));
	json_object_object_add(o, "exhaustive", json_object_new_boolean(plan->mstats.exhaustive));
	a = json_object_new_array();
	for (i = 0; i < plan->world; i++) {
		struct json_object *e = json_object_new_object();
		int g = plan->gpu_of_rank[i];

		json_object_object_add(e, "rank", json_object_new_int(i));
		json_object_object_add(e, "node", json_object_new_string(plan->names[g / plan->G]));
		json_object_object_add(e, "gpu", json_object_new_int(plan->gpu_ids[g % plan->G]));
		json_object_array_add(a, e);
	}
	json_object_object_add(o, "sigma", a);
	json_object_object_add(root, "mapping", o);

	a = json_object_new_array();
	for (i = 0; i < plan->n_ranked; i++) {
		const struct plan_entry *e = &plan->ranked[i];
		struct json_object *r = json_object_new_object();

		json_object_object_add(r, "config", pipette_config_json(&e->cfg));
		json_object_object_add(r, "iteration_s", jd(e->time.iteration_s));
		json_object_object_add(r, "block_iteration_s", jd(e->block_s));
		json_object_object_add(r, "mapped", json_object_new_boolean(e->mapped));
		json_object_object_add(r, "tokens_per_s", jd(e->time.tokens_per_s));
		json_object_object_add(r, "mfu", jd(e->time.mfu));
		json_object_object_add(r, "peak_bytes", jd(e->peak_bytes));
		json_object_array_add(a, r);
	}
	json_object_object_add(root, "ranked", a);

	o = json_object_new_object();
	json_object_object_add(o, "considered", json_object_new_int64(st->considered));
	json_object_object_add(o, "invalid", json_object_new_int64(st->invalid));
	json_object_object_add(o, "pruned_memory", json_object_new_int64(st->pruned_memory));
	{
		struct json_object *why = json_object_new_object();

		for (i = 0; i < PIPETTE_MEM_PART_COUNT; i++)
			json_object_object_add(why, pipette_mem_part_name((enum pipette_mem_part)i),
					       json_object_new_int64(st->pruned_part[i]));
		json_object_object_add(o, "pruned_memory_by_dominant_part", why);
	}
	json_object_object_add(o, "feasible", json_object_new_int64(st->feasible));
	json_object_object_add(o, "dominated", json_object_new_int64(st->dominated));
	json_object_object_add(o, "lower_bounds", json_object_new_int64(st->bounded));
	json_object_object_add(o, "pruned_by_bound", json_object_new_int64(st->pruned_bound));
	json_object_object_add(o, "evaluated", json_object_new_int64(st->evaluated));
	json_object_object_add(o, "failed", json_object_new_int64(st->failed));
	json_object_object_add(root, "search", o);
	a = json_object_new_array();
	if (plan->warnings) {
		const char *s = plan->warnings;

		while (*s) {
			const char *e = strchr(s, '\n');
			size_t n = e ? (size_t)(e - s) : strlen(s);

			json_object_array_add(a, json_object_new_string_len(s, (int)n));
			s += n + (e ? 1 : 0);
		}
	}
	json_object_object_add(root, "warnings", a);
	rc = fprintf(f, "%s\n", json_object_to_json_string_ext(root,
		JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE)) < 0 ? -1 : 0;
	json_object_put(root);
	return rc;
}

/* "0-3,6" style list of sorted distinct ints. */
static void ranges(const int *v, int n, char *buf, size_t len)
{
	size_t off = 0;
	int i = 0;

	buf[0] = '\0';
	while (i < n && off < len) {
		int j = i, w;

		while (j + 1 < n && v[j + 1] == v[j] + 1)
			j++;
		w = j > i ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", v[i], v[j])
			  : snprintf(buf + off, len - off, "%s%d", off ? "," : "", v[i]);
		if (w < 0)
			break;
		off += (size_t)w;
		i = j + 1;
	}
}

static int collect(int *v, int n, int x)
{
	int i, j;

	for (i = 0; i < n && v[i] < x; i++)
		;
	if (i < n && v[i] == x)
		return n;
	for (j = n; j > i; j--)
		v[j] = v[j - 1];
	v[i] = x;
	return n + 1;
}

/* Which stages and replicas each node runs (the first lines only on big
 * clusters). */
#define TABLE_MAX_NODES 32

static void write_mapping(const struct pipette_plan *plan, FILE *f)
{
	const struct pipette_config *c = &plan->cfg;
	int G = plan->G, n, j, shown = 0;

	fprintf(f, "\nmapping (%s launch%s):\n", launch_name(plan->req.launch),
		pipette_mapping_is_node_block(plan->gpu_of_rank, plan->world, G)
			? ", node-block" : "");
	for (n = 0; n < plan->nodes && shown < TABLE_MAX_NODES; n++) {
		int stages[PIPETTE_BW_MAX_GPUS], reps[PIPETTE_BW_MAX_GPUS], ns = 0, nr = 0;
		int rk[PIPETTE_BW_MAX_GPUS], nk = 0;
		char sb[128], rb[128], kb[128];

		for (j = 0; j < G; j++) {
			int r = plan->rank_at[n * G + j];

			if (r < 0)
				continue;
			ns = collect(stages, ns, r / (c->tp * c->cp * c->dp));
			nr = collect(reps, nr, r / (c->tp * c->cp) % c->dp);
			nk = collect(rk, nk, r);
		}
		if (!nk)
			continue;
		ranges(stages, ns, sb, sizeof(sb));
		ranges(reps, nr, rb, sizeof(rb));
		ranges(rk, nk, kb, sizeof(kb));
		fprintf(f, "  %-16s stage %-7s replica %-9s ranks %s\n", plan->names[n],
			sb, rb, kb);
		shown++;
	}
	if (shown == TABLE_MAX_NODES && plan->nodes > TABLE_MAX_NODES)
		fprintf(f, "  ... (%d nodes; --format json lists every rank)\n", plan->nodes);
	fprintf(f, "default order %.4f s -> planned %.4f s: gain %.4fx (%ld time estimates%s)\n",
		plan->mstats.block_s, plan->time.iteration_s, pipette_plan_mapping_gain(plan),
		plan->mstats.evaluations,
		plan->req.mapping == PIPETTE_MAP_BLOCK ? ", --mapping block"
		: plan->mstats.exhaustive ? ", exhaustive over node orders"
					  : ", simulated annealing");
}

/* Why the expert layout: how many experts each GPU holds and how, where
 * the first EP group runs, and what its all-to-all costs. */
static void write_experts_line(const struct pipette_plan *plan, FILE *f)
{
	const struct pipette_config *c = &plan->cfg;
	const struct pipette_time *t = &plan->time;
	int k, j, nodes = 0;

	for (k = 0; k < c->ep; k++) {
		int node = plan->gpu_of_rank[k * c->etp] / plan->G, seen = 0;

		for (j = 0; j < k && !seen; j++)
			seen = plan->gpu_of_rank[j * c->etp] / plan->G == node;
		nodes += !seen;
	}
	fprintf(f, "experts: ep %d x etp %d: each GPU holds %d of %d experts%s; an EP group "
		"spans %d node%s (%s); all-to-all %.3f s per iteration (%.1f%% of it)\n",
		c->ep, c->etp, plan->model.experts / c->ep, plan->model.experts,
		c->etp > 1 ? " sharded over its ETP group" : "", nodes, nodes == 1 ? "" : "s",
		c->ep == 1 ? "no all-to-all" : nodes == 1 ? "NVLink" : "the network",
		t->ep_comm_s, t->iteration_s > 0 ? 100.0 * t->ep_comm_s / t->iteration_s : 0.0);
}

int pipette_plan_write_table(const struct pipette_plan *plan, FILE *f)
{
	const struct pipette_config *c = &plan->cfg;
	const struct pipette_time *t = &plan->time;
	const struct pipette_search_stats *st = &plan->sstats;
	const struct pipette_stage_memory *pk = &plan->mem.peak;
	char split[32], args[1024];
	int i;

	fprintf(f, "pipette plan: %s on %d node%s x %d %s (%s)\n", plan->model.name,
		plan->nodes, plan->nodes == 1 ? "" : "s", plan->G, plan->gpu->name,
		plan->req.bandwidth[0] ? plan->req.bandwidth : "nominal links");
	fprintf(f, "global batch %ld, sequence length %ld, memory limit %.0f%% of %.1f GiB\n\n",
		c->global_batch, c->seq_len, 100 * plan->req.mem_fraction,
		plan->mem.capacity_bytes / GIB);
	fprintf(f, "%2s %3s %3s %4s %3s %3s %3s %3s %-11s %-9s %2s %2s %-9s %9s %9s %10s %6s %s\n",
		"#", "TP", "PP", "DP", "CP", "EP", "VPP", "MB", "SCHEDULE", "RECOMPUTE", "SP",
		"DO", "SPLIT", "ITER(s)", "DEFAULT", "TOKENS/s", "MFU", "MEM(GiB)");
	for (i = 0; i < plan->n_ranked; i++) {
		const struct plan_entry *e = &plan->ranked[i];

		split_text(&e->cfg, split, sizeof(split));
		fprintf(f, "%2d %3d %3d %4d %3d %3d %3d %3d %-11s %-9s %2s %2s %-9s %9.4f %9.4f "
			"%10.0f %5.1f%% %.1f/%.1f%s\n", i + 1, e->cfg.tp, e->cfg.pp, e->cfg.dp,
			e->cfg.cp, e->cfg.ep, pipette_config_chunks(&e->cfg), e->cfg.micro_batch,
			pipette_schedule_name(e->cfg.schedule),
			pipette_recompute_name(e->cfg.recompute),
			e->cfg.sequence_parallel ? "y" : "n",
			e->cfg.distributed_optimizer ? "y" : "n", split, e->time.iteration_s,
			e->block_s, e->time.tokens_per_s, 100 * e->time.mfu, e->peak_bytes / GIB,
			plan->mem.capacity_bytes / GIB, e->mapped ? "" : "  (not mapped)");
	}
	fprintf(f, "(ITER: with its planned mapping; DEFAULT: ranks in Megatron's order)\n");

	fprintf(f, "\nchosen: tp %d pp %d dp %d cp %d ep %d, %s", c->tp, c->pp, c->dp, c->cp,
		c->ep, pipette_schedule_name(c->schedule));
	if (pipette_config_chunks(c) > 1)
		fprintf(f, " (%d chunks per rank)", pipette_config_chunks(c));
	fprintf(f, ", micro-batch %d (%ld per pipeline), recompute %s\n", c->micro_batch,
		pipette_config_microbatches(c), pipette_recompute_name(c->recompute));
	if (pipette_compression_enabled(&c->compress)) {
		char spec[96];

		pipette_compression_format(&c->compress, spec, sizeof(spec));
		fprintf(f, "compression: %s (Optimus-CC; changes training numerics)\n", spec);
	}
	if (plan->model.experts)
		write_experts_line(plan, f);
	fprintf(f, "memory, stage %d (peak): params %.2f + grads %.2f + optimizer %.2f + "
		"activations %.2f + other %.2f = %.2f GiB of %.2f GiB limit\n",
		plan->mem.peak_stage, pk->params_bytes / GIB, pk->grads_bytes / GIB,
		pk->optimizer_bytes / GIB, pk->activations_bytes / GIB, pk->other_bytes / GIB,
		plan->mem.peak_bytes / GIB, plan->mem.limit_bytes / GIB);
	fprintf(f, "time: iteration %.4f s = pipeline %.4f (compute %.4f, TP %.4f, CP %.4f, "
		"EP %.4f, bubble %.4f, PP exposed %.4f) + DP exposed %.4f + embedding %.4f + "
		"optimizer %.4f\n", t->iteration_s, t->makespan_s, t->compute_s, t->tp_comm_s,
		t->cp_comm_s, t->ep_comm_s, t->bubble_s, t->pp_exposed_s, t->dp_exposed_s,
		t->embed_sync_s, t->optimizer_s);
	fprintf(f, "      %.0f tokens/s, %.1f TFLOP/s per GPU, MFU %.1f%%\n", t->tokens_per_s,
		t->tflops_per_gpu, 100 * t->mfu);
	write_mapping(plan, f);
	if (pipette_plan_megatron_args(plan, args, sizeof(args)) == 0)
		fprintf(f, "\nMegatron: %s\n", args);

	fprintf(f, "\nsearch: %ld combinations, %ld invalid, %ld over the memory limit",
		st->considered, st->invalid, st->pruned_memory);
	if (st->pruned_memory) {
		int first = 1;

		fprintf(f, " (dominated by");
		for (i = 0; i < PIPETTE_MEM_PART_COUNT; i++)
			if (st->pruned_part[i]) {
				fprintf(f, "%s %s %ld", first ? "" : ",",
					pipette_mem_part_name((enum pipette_mem_part)i),
					st->pruned_part[i]);
				first = 0;
			}
		fprintf(f, ")");
	}
	fprintf(f, ", %ld fit, %ld skipped as heavier recomputation of a fitting one; "
		"%ld estimated on the links, %ld skipped by the lower bound; %.3f s\n",
		st->feasible, st->dominated, st->evaluated, st->pruned_bound,
		plan->search_wall_s);
	if (plan->warnings && *plan->warnings)
		fprintf(f, "\nwarnings:\n%s\n", plan->warnings);
	return ferror(f) ? -1 : 0;
}
