/* pipette: Slurm hostlists, expanded by Slurm's own functions
 * (slurm_hostlist_*), so that "gpu[001-016,020]" means exactly what it means
 * to Slurm.  Shared by both front ends: the pipette command links libslurm;
 * spank_pipette.so never does and uses the symbols of the Slurm process
 * that loads it (srun, slurmstepd).  Not part of libpipette, which never
 * sees Slurm: it gets the expanded names. */
#ifndef PIPETTE_HOSTLIST_H
#define PIPETTE_HOSTLIST_H

#include "inputs/error.h"

/* The node names of `list` in Slurm's order: at least one and at most
 * PIPETTE_MAX_NODES (limits.h), each a plain name, none twice.  The count
 * is checked before any name is expanded.  *names (n entries, malloc'd)
 * is the caller's: release it with pipette_hostlist_free.  Every error
 * names the list. */
int pipette_hostlist_expand(const char *list, char ***names, int *n,
			    struct pipette_err *err);
void pipette_hostlist_free(char **names, int n);

#endif
