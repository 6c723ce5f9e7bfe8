/* pipette: a planning request and every default it leaves open, decided
 * here and nowhere else: the CLI, the plugin and the tests fill what the
 * user said, pipette_plan_compute resolves the rest once, with the model
 * loaded once. */
#include <string.h>

#include "estimate/memory.h"
#include "inputs/model.h"
#include "plan/plan.h"
#include "inputs/stack.h"

/* Runners-up kept when the request does not say (the table's five rows). */
#define DEFAULT_TOP_K 5

void pipette_request_init(struct pipette_request *req)
{
	memset(req, 0, sizeof(*req));
	req->global_batch = 0;
	req->seq_len = 0;
	req->mem_fraction = 0;	/* the stack's rule */
	pipette_pins_init(&req->pins);
	req->mapping = PIPETTE_MAP_OPTIMIZE;
	req->launch = PIPETTE_LAUNCH_SRUN;
	req->budget = 0;
	req->top_k = DEFAULT_TOP_K;
	req->stale_days = 0;
}

/* Pins the stack cannot honour are errors, not silently dropped. */
static int check_stack_pins(struct pipette_pins *p, const struct pipette_stack *st,
			    struct pipette_err *err)
{
	if (!st->fsdp && ((p->dp_shard > 1) || p->reshard >= 0))
		return pipette_fail(err, "--dp-shard/--reshard: the %s stack has no FSDP "
				    "(--stack torchtitan has)", st->name);
	if (p->recompute_every > 1) {
		if (!st->layer_ac)
			return pipette_fail(err, "--recompute-every: the %s stack cannot recompute "
					    "every k-th layer only", st->name);
		if (p->recompute >= 0 && p->recompute != PIPETTE_RECOMPUTE_FULL)
			return pipette_fail(err, "--recompute-every %d needs --recompute full",
					    p->recompute_every);
		p->recompute = PIPETTE_RECOMPUTE_FULL;	/* it is a kind of full */
	}
	if (p->recompute_modules > 0 && (!st->recompute_modules || st->fixed_modules))
		return pipette_fail(err, "--recompute-modules: the %s stack %s", st->name,
				    st->fixed_modules ? "recomputes its own fixed modules"
						      : "has no Megatron-Core recompute modules");
	if (p->recompute_modules > 0 && p->recompute >= 0 &&
	    p->recompute != PIPETTE_RECOMPUTE_SELECTIVE)
		return pipette_fail(err, "--recompute-modules needs --recompute selective");
	if (p->dispatcher >= 0 && (p->dispatcher == PIPETTE_DISPATCH_DEEPEP ? !st->deepep
								      : st->deepep == 2))
		return pipette_fail(err, "--dispatcher %s: the %s stack %s",
				    pipette_dispatcher_name((enum pipette_dispatcher)p->dispatcher),
				    st->name, st->deepep == 2 ? "always uses DeepEP's kernels"
							       : "has no DeepEP dispatcher");
	if (p->ep_overlap > 0 && st->moe_overlap != 1)
		return pipette_fail(err, "--ep-overlap on: the %s stack %s", st->name,
				    st->moe_overlap ? "always overlaps EP communication"
						    : "has no EP overlap");
	if (st->data_parallel_only &&
	    (p->tp > 1 || p->pp > 1 || p->cp > 1 || p->ep > 1))
		return pipette_fail(err, "the %s stack runs data parallelism only: --tp, --pp, --cp "
				    "and --ep must be 1", st->name);
	return 0;
}

int pipette_request_resolve(const struct pipette_request *req, struct pipette_request *out,
			    struct pipette_model *model, struct pipette_stack *stack,
			    struct pipette_err *err)
{
	int k;

	*out = *req;
	if (out->top_k < 1)
		out->top_k = DEFAULT_TOP_K;
	if (pipette_stack_resolve(req->stack, req->stack_options, stack, err))
		return -1;
	/* The memory rule: the user's fraction, else the stack's (the flat
	 * 80% of megatron-2022, or the whole HBM with the allocator's
	 * reserve counted). */
	if (out->mem_fraction <= 0)
		out->mem_fraction = stack->mem_fraction > 0 ? stack->mem_fraction : 1.0;
	if (!out->attention_given)
		out->attention = stack->attention;
	/* A plan never emits what its stack would run differently: every
	 * schedule pinned or listed must be one the stack runs. */
	for (k = 0; k < PIPETTE_SCHED_COUNT; k++) {
		char runs[128];

		if (!(out->pins.schedule == k || (out->pins.schedule_set & (1u << k))) ||
		    pipette_stack_runs(stack, (enum pipette_schedule_kind)k))
			continue;
		pipette_stack_schedules_text(stack, runs, sizeof(runs));
		return pipette_fail(err, "stack %s does not run schedule %s (it runs %s): pin "
				    "one of those, or plan for --stack megatron-zb", stack->name,
				    pipette_schedule_name((enum pipette_schedule_kind)k), runs);
	}
	if (check_stack_pins(&out->pins, stack, err))
		return -1;
	if (pipette_model_load(req->model, req->models_dir[0] ? req->models_dir : NULL, model,
			       err))
		return -1;
	/* The fork predates multi-latent attention: no MLA module, no
	 * --q-lora-rank or --kv-lora-rank in its arguments (sail-sg/
	 * zero-bubble-pipeline-parallelism @39f2c186: neither megatron/
	 * training/arguments.py nor megatron/core/transformer has them). */
	if (stack->id == PIPETTE_STACK_MEGATRON_ZB && (model->q_lora_rank > 0 ||
						       model->kv_lora_rank > 0))
		return pipette_fail(err, "stack %s has no multi-latent attention (the zero-bubble "
				    "fork predates MLA) but model %s uses it: plan with --stack "
				    "megatron or nemo", stack->name, model->name);
	if (model->tied_embeddings && !stack->tied_embeddings)
		return pipette_fail(err, "stack %s needs untied embeddings (the zero-bubble fork "
				    "asserts --untie-embeddings-and-output-weights) but model %s ties "
				    "them", stack->name, model->name);
	return pipette_default_seq_len(model, out->seq_len, &out->seq_len, err);
}

int pipette_default_seq_len(const struct pipette_model *model, long given, long *out,
			    struct pipette_err *err)
{
	/* The model's context length (max_position_embeddings of its
	 * config) unless given. */
	if (given > 0) {
		*out = given;
		return 0;
	}
	if (model->max_seq < 1)
		return pipette_fail(err, "model %s names no context length: give the sequence "
				    "length", model->name);
	*out = model->max_seq;
	return 0;
}
