/* spank_pipette: the SPANK entry points.  Each callback only switches on
 * spank_context() to the file of that context (pyxis_dispatch.c's shape):
 *
 *   srun (LOCAL), sbatch/salloc (ALLOCATOR)  submit.c   validate options;
 *                                                       srun pins the inputs
 *   slurmstepd (REMOTE)                      remote.c   plan in user_init,
 *                                                       apply in task_init
 *   slurmd, prolog/epilog                    nothing
 *
 * Only slurm_spank_* and plugin_* leave the .so (pipette.lds). */
#include <slurm/spank.h>

#include "spank_pipette.h"

SPANK_PLUGIN(pipette, 1);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		return pipette_submit_init(sp, ac, av);
	case S_CTX_REMOTE:
		return pipette_remote_init(sp, ac, av);
	default:
		return 0;
	}
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		return pipette_submit_post_opt(sp);
	default:
		return 0;
	}
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_LOCAL)
		return 0;
	return pipette_submit_local_user_init(sp);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return pipette_remote_user_init(sp);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return pipette_remote_task_init(sp);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() == S_CTX_LOCAL)
		return pipette_submit_exit();
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return pipette_remote_exit(sp);
}
