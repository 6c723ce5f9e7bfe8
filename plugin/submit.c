/* spank_pipette: the submitting side, srun (LOCAL) and sbatch/salloc
 * (ALLOCATOR).  It knows neither the step's nodes nor its GPUs
 * (spank.md §1.9), so it only registers the options and checks them early:
 * a typo fails the command at once, with slurm_error, before any job
 * exists.  The plan itself is made in slurmstepd (remote.c). */
#include <slurm/spank.h>

#include "spank_pipette.h"

int pipette_submit_init(spank_t sp, int ac, char **av)
{
	if (pipette_site_load(ac, av))
		return -1;
	return pipette_options_register(sp);
}

int pipette_submit_post_opt(spank_t sp)
{
	struct pipette_state *st = pipette_state();
	struct pipette_env_ops env;
	struct pipette_err err;

	pipette_env_spank(&env, sp);
	if (pipette_opts_fallback(&st->opts, &st->site, &env, &err)) {
		slurm_error("pipette: %s", err.msg);
		return -1;
	}
	if (!pipette_opts_wanted(&st->opts, &st->site))
		return 0;
	if (pipette_opts_check(&st->opts, &err)) {
		slurm_error("pipette: %s", err.msg);
		return -1;
	}
	return 0;
}
