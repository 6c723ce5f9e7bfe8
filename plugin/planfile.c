/* spank_pipette: --pipette-plan-file=FILE (or the input variable
 * PIPETTE_PLAN_FILE): a step applies a saved plan as is.
 *
 * The file is what `pipette trial` keeps (the plan of the configuration
 * its trials measured fastest) or what plan_dir wrote for an earlier step:
 * the JSON of pipette plan --format json.  The planner child reads it
 * (as the job's user, under its limits, like every other input), refuses
 * it when it was made for another model, stack or GPU type, other nodes,
 * another GPU count per node or another launch mode (the field named),
 * plans its configuration again with every knob pinned on the step's
 * nodes and inputs, and refuses the result unless it is the file's plan
 * (its hash): what a step applies is exactly what the file says, or
 * nothing.  Such a step never falls back (fallback=block) and never uses
 * the plan cache: planning one pinned configuration is one mapping
 * search.  SPANK-free. */
#include "plan/planfile.h"
#include "plugin.h"

int pipette_planfile_step(const struct pipette_step *st, struct pipette_request *req,
			  const struct pipette_cluster_spec *spec, struct pipette_plan **plan,
			  struct pipette_err *err)
{
	struct pipette_planfile *pf = NULL;
	enum pipette_launch_mode launch = st->launch;
	int rv = -1;

	*plan = NULL;
	if (pipette_planfile_read(st->opts->plan_file, &pf, err))
		return pipette_fail_prefix(err, "--pipette-plan-file: ");
	/* The batch step guesses its steps' launch (remote.c): it takes the
	 * file's, and exports the job's variables only. */
	if (st->batch)
		launch = req->launch = pipette_planfile_launch(pf);
	if (pipette_planfile_check(pf, req, spec, launch, err) ||
	    pipette_planfile_pin(pf, -1, req, err))
		goto out;
	if (pipette_plan_compute(req, spec, plan, err)) {
		pipette_fail_prefix(err, "plan file %s: planning its configuration on these nodes: ",
				    st->opts->plan_file);
		goto out;
	}
	if (pipette_planfile_verify(pf, *plan, err))
		goto out;
	rv = 0;
out:
	if (rv) {
		pipette_plan_destroy(*plan);
		*plan = NULL;
	}
	pipette_planfile_destroy(pf);
	return rv;
}
