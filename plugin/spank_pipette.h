/* spank_pipette: what the SPANK-bound files share (the dispatcher, the
 * option table, the submitting side and the slurmstepd side). */
#ifndef PIPETTE_SPANK_PIPETTE_H
#define PIPETTE_SPANK_PIPETTE_H

#include <slurm/spank.h>

#include "plugin.h"

/* The plugin's state in one process (srun, sbatch or one slurmstepd): the
 * site's arguments and the user's options, filled in slurm_spank_init and
 * by the option callbacks. */
struct pipette_state {
	struct pipette_site site;
	struct pipette_opts opts;
};
/* state.c */
struct pipette_state *pipette_state(void);
/* Site arguments, parsed once per process. */
int pipette_site_load(int ac, char **av);

/* options.c */
int pipette_options_register(spank_t sp);

/* env.c */
void pipette_env_spank(struct pipette_env_ops *ops, spank_t sp);

/* submit.c: srun (local) and sbatch/salloc (allocator). */
int pipette_submit_init(spank_t sp, int ac, char **av);
int pipette_submit_post_opt(spank_t sp);
int pipette_submit_local_user_init(spank_t sp);
int pipette_submit_exit(void);

/* remote.c: slurmstepd. */
int pipette_remote_init(spank_t sp, int ac, char **av);
int pipette_remote_user_init(spank_t sp);
int pipette_remote_task_init(spank_t sp);
int pipette_remote_exit(spank_t sp);

#endif
