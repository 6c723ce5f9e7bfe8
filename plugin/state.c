/* spank_pipette: the plugin's state in one process (srun, sbatch or one
 * slurmstepd), which the option callbacks (options.c) fill and the context
 * files (submit.c, remote.c) read.  It lives here, below all of them, so
 * that the dispatcher (spank_pipette.c) only calls into the context files
 * and nothing calls back into it. */
#include <slurm/spank.h>

#include "spank_pipette.h"

static struct pipette_state state;

struct pipette_state *pipette_state(void)
{
	return &state;
}

int pipette_site_load(int ac, char **av)
{
	struct pipette_err err;

	pipette_opts_init(&state.opts);
	if (pipette_site_parse(&state.site, ac, av, &err)) {
		slurm_error("pipette: plugstack.conf: %s", err.msg);
		return -1;
	}
	return 0;
}
