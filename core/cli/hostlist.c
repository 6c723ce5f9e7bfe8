/* pipette: Slurm hostlists through Slurm's own API (see hostlist.h). */
#include <slurm/slurm.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"
#include "inputs/limits.h"

void pipette_hostlist_free(char **names, int n)
{
	int i;

	for (i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

struct named {
	const char *name;
	int pos;
};

static int by_name_then_pos(const void *a, const void *b)
{
	const struct named *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* The position of the first name, in list order, that repeats an earlier
 * one, or -1 (-2 when out of memory).  Sorting keeps a 4096-node list to
 * some 50k comparisons where comparing every pair would take 8M. */
static int first_repeat(char *const *names, int n)
{
	struct named *v = malloc((size_t)n * sizeof(*v));
	int i, first = -1;

	if (!v)
		return -2;
	for (i = 0; i < n; i++) {
		v[i].name = names[i];
		v[i].pos = i;
	}
	qsort(v, (size_t)n, sizeof(*v), by_name_then_pos);
	for (i = 1; i < n; i++)
		if (!strcmp(v[i - 1].name, v[i].name) && (first < 0 || v[i].pos < first))
			first = v[i].pos;
	free(v);
	return first;
}

/* Shift the n names out of hl into out[]; 0, or -1 with the message. */
static int shift_names(hostlist_t hl, const char *list, char **out, int n,
		       struct pipette_err *err)
{
	int i;

	for (i = 0; i < n; i++) {
		/* Released with free(): slurm.h, slurm_hostlist_shift. */
		char *h = slurm_hostlist_shift(hl);

		if (!h)
			return pipette_fail(err, "node list '%.64s' ended after %d of its %d "
					    "nodes", list, i, n);
		out[i] = h;
		/* libslurm passes some malformed lists through ("gpu[1-2"
		 * gives "gpu]", "[" gives ""): refuse what names no node. */
		if (!*h || strpbrk(h, "[]{}, \t\n") || h[0] == '-')
			return pipette_fail(err, "node list '%.64s' is not a valid Slurm "
					    "hostlist (it yields the name '%.64s')", list, h);
	}
	return 0;
}

int pipette_hostlist_expand(const char *list, char ***names, int *n,
			    struct pipette_err *err)
{
	hostlist_t hl;
	char **out = NULL;
	int count, dup, rv = -1;

	*names = NULL;
	*n = 0;
	if (!list || !*list)
		return pipette_fail(err, "empty node list");
	/* "-1", "+4": a signed count is no count, and no host name begins
	 * with a sign (RFC 952 "ASSUMPTIONS" 1 and RFC 1123 section 2.1: a
	 * name begins with a letter or a digit). */
	if (list[0] == '-' || list[0] == '+')
		return pipette_fail(err, "'%.64s' is neither a node count (1, 2, ...) nor a "
				    "Slurm hostlist", list);
	/* " 4": libslurm splits on blanks as on commas and named one node
	 * "4"; a blank is in no host name (RFC 952) and in no count. */
	if (strpbrk(list, " \t\n\r\v\f"))
		return pipette_fail(err, "'%.64s' is neither a node count (1, 2, ...) nor a "
				    "Slurm hostlist: it has blanks", list);
	hl = slurm_hostlist_create(list);
	if (!hl)
		return pipette_fail(err, "node list '%.64s' is not a valid Slurm hostlist",
				    list);
	count = slurm_hostlist_count(hl);
	if (count < 1) {
		pipette_fail(err, "node list '%.64s' is empty", list);
		goto out;
	}
	if (count > PIPETTE_MAX_NODES) {
		pipette_fail(err, "node list '%.64s' has %d nodes, more than %d", list,
			     count, PIPETTE_MAX_NODES);
		goto out;
	}
	out = calloc((size_t)count, sizeof(*out));
	if (!out) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	if (shift_names(hl, list, out, count, err))
		goto out;
	dup = first_repeat(out, count);
	if (dup != -1) {
		if (dup == -2)
			pipette_fail(err, "out of memory");
		else
			pipette_fail(err, "node list '%.64s' names %.64s twice", list,
				     out[dup]);
		goto out;
	}
	*names = out;
	*n = count;
	out = NULL;
	rv = 0;
out:
	pipette_hostlist_free(out, count);
	slurm_hostlist_destroy(hl);
	return rv;
}
