/* pipette CLI: node lists through Slurm's own hostlist API (libslurm), so
 * "gpu[001-016,020]" means exactly what it means to Slurm.  The library
 * (core/) never sees Slurm; it gets the expanded names. */
#include <slurm/slurm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "limits.h"

void cli_free_nodes(char **names, int n)
{
	int i;

	for (i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

int cli_expand_nodes(const char *spec, char ***names, int *n,
		     struct pipette_err *err)
{
	hostlist_t hl;
	char **out = NULL, *h;
	int count = 0, cap = 0, i;

	*names = NULL;
	*n = 0;
	if (!spec || !*spec)
		return pipette_fail(err, "empty node list");
	if (all_digits(spec)) {
		long k = strtol(spec, NULL, 10);

		if (k < 1 || k > PIPETTE_MAX_NODES)
			return pipette_fail(err, "node count %s is not in [1, %d]",
					    spec, PIPETTE_MAX_NODES);
		out = calloc((size_t)k, sizeof(char *));
		if (!out)
			return pipette_fail(err, "out of memory");
		for (i = 0; i < k; i++) {
			out[i] = malloc(16);
			if (!out[i]) {
				cli_free_nodes(out, i);
				return pipette_fail(err, "out of memory");
			}
			snprintf(out[i], 16, "node%d", i + 1);
		}
		*names = out;
		*n = (int)k;
		return 0;
	}
	hl = slurm_hostlist_create(spec);
	if (!hl)
		return pipette_fail(err, "'%.64s' is not a valid Slurm hostlist", spec);
	while ((h = slurm_hostlist_shift(hl))) {
		/* libslurm passes some malformed lists through ("gpu[1-2"
		 * gives "gpu]", "[" gives ""): refuse what no node is named. */
		if (!*h || strpbrk(h, "[]{}, \t\n")) {
			pipette_fail(err, "node list '%.64s' is not a valid Slurm "
				     "hostlist (it yields the name '%.64s')", spec, h);
			free(h);
			goto fail;
		}
		if (count == PIPETTE_MAX_NODES) {
			free(h);
			pipette_fail(err, "node list '%.64s' has more than %d nodes",
				     spec, PIPETTE_MAX_NODES);
			goto fail;
		}
		for (i = 0; i < count; i++)
			if (!strcmp(out[i], h)) {
				pipette_fail(err, "node list '%.64s' names %s twice",
					     spec, h);
				free(h);
				goto fail;
			}
		if (count == cap) {
			int ncap = cap ? 2 * cap : 16;
			char **np = realloc(out, (size_t)ncap * sizeof(char *));

			if (!np) {
				free(h);
				pipette_fail(err, "out of memory");
				goto fail;
			}
			out = np;
			cap = ncap;
		}
		out[count++] = h;	/* malloc'd by libslurm; free() releases it */
	}
	slurm_hostlist_destroy(hl);
	if (!count) {
		free(out);
		return pipette_fail(err, "node list '%.64s' is empty", spec);
	}
	*names = out;
	*n = count;
	return 0;
fail:
	slurm_hostlist_destroy(hl);
	cli_free_nodes(out, count);
	return -1;
}
