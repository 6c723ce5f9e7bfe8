/* pipette: the plan as JSON (schema pipette-plan/1), and the pieces that
 * `pipette estimate --format json` shares with it. */
#include "autoconf.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"

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
	json_object_object_add(o, "precision",
			       json_object_new_string(pipette_precision_name(c->precision)));
	json_object_object_add(o, "bf16_first_layers", json_object_new_int(c->bf16_first));
	json_object_object_add(o, "bf16_last_layers", json_object_new_int(c->bf16_last));
	json_object_object_add(o, "recompute_every", json_object_new_int(c->recompute_every));
	{
		char mods[160];

		pipette_recompute_modules_format(pipette_config_recompute_modules(c), ",", mods,
						 sizeof(mods));
		json_object_object_add(o, "recompute_modules", json_object_new_string(mods));
	}
	json_object_object_add(o, "moe_dispatcher",
			       json_object_new_string(pipette_dispatcher_name(c->moe.dispatcher)));
	json_object_object_add(o, "ep_overlap", json_object_new_boolean(pipette_config_ep_overlap(c)));
	json_object_object_add(o, "moe_capacity_factor", json_object_new_double(c->moe.capacity_factor));
	json_object_object_add(o, "moe_pad_to_capacity", json_object_new_boolean(c->moe.pad));
	json_object_object_add(o, "moe_imbalance", json_object_new_double(c->moe.imbalance));
	json_object_object_add(o, "dp_shard", json_object_new_int(c->dp_shard));
	json_object_object_add(o, "dp_replicate",
			       json_object_new_int(pipette_config_dp_replicate(c)));
	json_object_object_add(o, "fsdp_reshard_after_forward",
			       json_object_new_string(pipette_reshard_name(c->reshard)));
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

struct json_object *pipette_time_json(const struct pipette_time *t)
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
	/* the model's own figures, before the site's calibration (calib.h) */
	json_object_object_add(o, "model_s", jd(t->model_s));
	json_object_object_add(o, "model_compute_s", jd(t->model_compute_s));
	json_object_object_add(o, "model_comm_s", jd(t->model_comm_s));
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
	json_object_object_add(o, "reserve_bytes", jd(s->reserve_bytes));
	json_object_object_add(o, "transient_bytes", jd(s->transient_bytes));
	json_object_object_add(o, "outside_allocator_bytes", jd(s->outside_bytes));
	json_object_object_add(o, "total_bytes", jd(s->total_bytes));
	return o;
}

static struct json_object *cluster_json(const struct pipette_plan *plan)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();
	int i;

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
	return o;
}

static struct json_object *predicted_json(const struct pipette_plan *plan)
{
	struct json_object *pr = json_object_new_object(), *mem = json_object_new_object();
	struct json_object *a = json_object_new_array();
	int i;

	json_object_object_add(pr, "iteration_s", jd(plan->time.iteration_s));
	json_object_object_add(pr, "tokens_per_s", jd(plan->time.tokens_per_s));
	json_object_object_add(pr, "tflops_per_gpu", jd(plan->time.tflops_per_gpu));
	json_object_object_add(pr, "mfu", jd(plan->time.mfu));
	json_object_object_add(pr, "time", pipette_time_json(&plan->time));
	json_object_object_add(mem, "peak_bytes", jd(plan->mem.peak_bytes));
	json_object_object_add(mem, "peak_stage", json_object_new_int(plan->mem.peak_stage));
	json_object_object_add(mem, "capacity_bytes", jd(plan->mem.capacity_bytes));
	json_object_object_add(mem, "limit_bytes", jd(plan->mem.limit_bytes));
	json_object_object_add(mem, "peak", stage_mem_json(&plan->mem.peak, -1));
	for (i = 0; i < plan->cfg.pp; i++)
		json_object_array_add(a, stage_mem_json(&plan->stages[i], i));
	json_object_object_add(mem, "per_stage", a);
	json_object_object_add(pr, "memory", mem);
	return pr;
}

/* The site's factors the plan applied (calib.h); null when none. */
static struct json_object *site_json(const struct pipette_plan *plan)
{
	struct json_object *o;

	if (!plan->site.observations && plan->site.compute == 1.0 && plan->site.comm == 1.0 &&
	    plan->site.reserve_fraction < 0)
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "compute_factor", jd(plan->site.compute));
	json_object_object_add(o, "comm_factor", jd(plan->site.comm));
	json_object_object_add(o, "reserve_fraction", plan->site.reserve_fraction >= 0
			       ? jd(plan->site.reserve_fraction) : NULL);
	json_object_object_add(o, "observations", json_object_new_int64(plan->site.observations));
	return o;
}

static struct json_object *mapping_json(const struct pipette_plan *plan)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();
	int i;

	json_object_object_add(o, "mode", json_object_new_string(
		pipette_mapping_name(plan->req.mapping)));
	json_object_object_add(o, "launch", json_object_new_string(pipette_launch_name(plan->req.launch)));
	json_object_object_add(o, "node_block", json_object_new_boolean(
		pipette_mapping_is_node_block(plan->gpu_of_rank, plan->world, plan->G)));
	json_object_object_add(o, "block_iteration_s", jd(plan->mstats.block_s));
	json_object_object_add(o, "iteration_s", jd(plan->time.iteration_s));
	json_object_object_add(o, "gain", jd(pipette_plan_mapping_gain(plan)));
	json_object_object_add(o, "evaluations", json_object_new_int64(plan->mstats.evaluations));
	json_object_object_add(o, "exhaustive", json_object_new_boolean(plan->mstats.exhaustive));
	json_object_object_add(o, "search_end", plan->mstats.end == PIPETTE_MAP_END_NONE ? NULL
			       : json_object_new_string(plan->mstats.end == PIPETTE_MAP_END_BOUND ? "bound"
				 : plan->mstats.end == PIPETTE_MAP_END_LOCAL ? "local optimum"
				 : plan->mstats.end == PIPETTE_MAP_END_FLOOR ? "within 0.5% of the optimum"
				 : "budget"));
	json_object_object_add(o, "placement_bound_s",
			       plan->mstats.bound_s > 0 ? jd(plan->mstats.bound_s) : NULL);
	for (i = 0; i < plan->world; i++) {
		struct json_object *e = json_object_new_object();
		int g = plan->gpu_of_rank[i];

		json_object_object_add(e, "rank", json_object_new_int(i));
		json_object_object_add(e, "node", json_object_new_string(plan->names[g / plan->G]));
		json_object_object_add(e, "gpu", json_object_new_int(plan->gpu_ids[g % plan->G]));
		json_object_array_add(a, e);
	}
	json_object_object_add(o, "sigma", a);
	return o;
}

static struct json_object *ranked_json(const struct pipette_plan *plan)
{
	struct json_object *a = json_object_new_array();
	int i;

	for (i = 0; i < plan->n_ranked; i++) {
		const struct plan_entry *e = &plan->ranked[i];
		struct json_object *r = json_object_new_object();

		json_object_object_add(r, "config", pipette_config_json(&e->cfg));
		json_object_object_add(r, "iteration_s", jd(e->time.iteration_s));
		json_object_object_add(r, "block_iteration_s", jd(e->block_s));
		json_object_object_add(r, "mapped", json_object_new_boolean(e->mapped));
		json_object_object_add(r, "placement_bound_s",
				       e->bound_s > 0 ? jd(e->bound_s) : NULL);
		json_object_object_add(r, "tokens_per_s", jd(e->time.tokens_per_s));
		json_object_object_add(r, "mfu", jd(e->time.mfu));
		json_object_object_add(r, "peak_bytes", jd(e->peak_bytes));
		json_object_array_add(a, r);
	}
	return a;
}

static struct json_object *search_json(const struct pipette_search_stats *st)
{
	struct json_object *o = json_object_new_object(), *why = json_object_new_object();
	int i;

	json_object_object_add(o, "considered", json_object_new_int64(st->considered));
	json_object_object_add(o, "invalid", json_object_new_int64(st->invalid));
	json_object_object_add(o, "pruned_memory", json_object_new_int64(st->pruned_memory));
	for (i = 0; i < PIPETTE_MEM_PART_COUNT; i++)
		json_object_object_add(why, pipette_mem_part_name((enum pipette_mem_part)i),
				       json_object_new_int64(st->pruned_part[i]));
	json_object_object_add(o, "pruned_memory_by_dominant_part", why);
	json_object_object_add(o, "feasible", json_object_new_int64(st->feasible));
	json_object_object_add(o, "dominated", json_object_new_int64(st->dominated));
	json_object_object_add(o, "lower_bounds", json_object_new_int64(st->bounded));
	json_object_object_add(o, "pruned_by_bound", json_object_new_int64(st->pruned_bound));
	json_object_object_add(o, "evaluated", json_object_new_int64(st->evaluated));
	json_object_object_add(o, "failed", json_object_new_int64(st->failed));
	return o;
}

/* One string per line of the warnings. */
static struct json_object *warnings_json(const char *s)
{
	struct json_object *a = json_object_new_array();

	while (s && *s) {
		const char *e = strchr(s, '\n');
		size_t n = e ? (size_t)(e - s) : strlen(s);

		json_object_array_add(a, json_object_new_string_len(s, (int)n));
		s += n + (e ? 1 : 0);
	}
	return a;
}

int pipette_plan_write_json(const struct pipette_plan *plan, FILE *f)
{
	struct json_object *root = json_object_new_object();
	char args[1024];
	int rc, margs;

	if (!root)
		return -1;
	if ((margs = pipette_plan_megatron_args(plan, args, sizeof(args))) < 0) {
		json_object_put(root);
		return -1;
	}
	json_object_object_add(root, "schema", json_object_new_string("pipette-plan/1"));
	json_object_object_add(root, "model", json_object_new_string(plan->model.name));
	json_object_object_add(root, "gpu", json_object_new_string(plan->gpu->name));
	json_object_object_add(root, "stack", json_object_new_string(plan->stack.name));
	json_object_object_add(root, "plan_hash", json_object_new_string(plan->hash));
	json_object_object_add(root, "pipette_version", json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(root, "cluster", cluster_json(plan));
	json_object_object_add(root, "config", pipette_config_json(&plan->cfg));
	/* null, and the reason, when Megatron-Core would refuse the recipe */
	json_object_object_add(root, "megatron_args", margs ? NULL : json_object_new_string(args));
	if (margs)
		json_object_object_add(root, "megatron_args_refused", json_object_new_string(args));
	json_object_object_add(root, "predicted", predicted_json(plan));
	json_object_object_add(root, "site_calibration", site_json(plan));
	json_object_object_add(root, "mapping", mapping_json(plan));
	json_object_object_add(root, "ranked", ranked_json(plan));
	json_object_object_add(root, "search", search_json(&plan->sstats));
	json_object_object_add(root, "mapping_gain_negligible",
			       json_object_new_boolean(pipette_plan_mapping_negligible(plan)));
	json_object_object_add(root, "sharding_note", json_object_new_string(plan->sharding_note));
	if (plan->stack.fsdp) {
		char mf[512];

		if (pipette_plan_megatron_fsdp_args(plan, mf, sizeof(mf)) == 0)
			json_object_object_add(root, "megatron_fsdp_args", json_object_new_string(mf));
	}
	json_object_object_add(root, "warnings", warnings_json(plan->warnings));
	rc = fprintf(f, "%s\n", json_object_to_json_string_ext(root,
		JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE)) < 0 ? -1 : 0;
	json_object_put(root);
	return rc;
}

/* "0-3,6" style list of sorted distinct ints. */
