/* spank_pipette: the submitting side, srun (LOCAL) and sbatch/salloc
 * (ALLOCATOR).  It knows neither the step's nodes nor its GPUs, so it
 * registers the options and checks them early (a typo fails the command at
 * once, with slurm_error, before any job exists), and srun pins what the
 * step's nodes must plan from (digest.c).  The plan itself is made in
 * slurmstepd (remote.c). */
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

/* srun, once the allocation exists and before the step is launched:
 * export the digest of the inputs, which reaches every task's environment
 * (and so every node's slurmstepd) unless --export=NONE drops it. */
int pipette_submit_local_user_init(spank_t sp)
{
	struct pipette_state *st = pipette_state();
	struct pipette_env_ops env;
	struct pipette_err err;
	char digest[PIPETTE_DIGEST_MAX];

	if (!pipette_opts_wanted(&st->opts, &st->site))
		return 0;
	pipette_env_spank(&env, sp);
	if (pipette_input_digest(&st->opts, &st->site, digest, sizeof(digest)) ||
	    env.set(env.ctx, PIPETTE_DIGEST_VAR, digest, 1, &err) < 0) {
		slurm_error("pipette: could not pin the step's inputs: %s", err.msg);
		return -1;
	}
	return 0;
}
