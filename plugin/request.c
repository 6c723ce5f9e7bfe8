/* spank_pipette: from the user's options and the site's arguments to the
 * core's request.  Precedence: option (or PIPETTE_* input) > site argument
 * > the core's default (pipette_request_init). */
#include <string.h>

#include "plugin.h"
#include "cli/hostlist.h"

int pipette_request_build(const struct pipette_opts *o, const struct pipette_site *s,
			  enum pipette_launch_mode launch, struct pipette_request *req,
			  struct pipette_err *err)
{
	pipette_request_init(req);
	if (pipette_strlcpy(req->model, o->model, sizeof(req->model)))
		return pipette_fail(err, "--pipette-model: value too long");
	if (pipette_strlcpy(req->models_dir, s->models, sizeof(req->models_dir)))
		return pipette_fail(err, "plugstack argument models: value too long");
	if (pipette_strlcpy(req->calibration, s->calibration, sizeof(req->calibration)))
		return pipette_fail(err, "plugstack argument calibration: value too long");
	if (pipette_strlcpy(req->bandwidth, o->bandwidth[0] ? o->bandwidth : s->bandwidth,
			    sizeof(req->bandwidth)))
		return pipette_fail(err, "bandwidth cache path too long");
	if (pipette_strlcpy(req->topology, s->topology, sizeof(req->topology)))
		return pipette_fail(err, "plugstack argument topology: value too long");
	req->expand_hostlist = pipette_hostlist_expand;
	if (!s->gpu[0])
		return pipette_fail(err, "the site has not named the GPU type: add gpu=TYPE to "
				    "the pipette line of plugstack.conf");
	if (pipette_strlcpy(req->gpu, s->gpu, sizeof(req->gpu)))
		return pipette_fail(err, "plugstack argument gpu: value too long");
	if (o->global_batch < 1)
		return pipette_fail(err, "--pipette-global-batch=N is required (sequences per "
				    "iteration)");
	req->global_batch = o->global_batch;
	/* 0: the model's context length, resolved with the model
	 * (pipette_request_resolve). */
	req->seq_len = o->seq_len > 0 ? o->seq_len : 0;
	if (o->mem_fraction > 0)
		req->mem_fraction = o->mem_fraction;
	else if (s->mem_fraction > 0)
		req->mem_fraction = s->mem_fraction;
	req->pins = o->pins;
	if (o->schedule >= 0)
		req->pins.schedule = o->schedule;
	if (o->schedule_set) {
		req->pins.schedule = -1;
		req->pins.schedule_set = o->schedule_set;
	}
	if (o->mapping >= 0)
		req->mapping = (enum pipette_mapping_mode)o->mapping;
	req->launch = launch;
	if (s->budget > 0)
		req->budget = s->budget;
	req->stale_days = s->max_age_days;
	req->attention = s->attention;
	req->attention_given = s->attention_given;
	/* the job's recipes, else the site's, else the stack's */
	req->pins.precision_set = o->precision_set ? o->precision_set : s->precision_set;
	if (pipette_strlcpy(req->stack, o->stack[0] ? o->stack : s->stack, sizeof(req->stack)) ||
	    pipette_strlcpy(req->stack_options, s->stack_options, sizeof(req->stack_options)))
		return pipette_fail(err, "stack name or options too long");
	return 0;
}
