/* pipette: inter-node figures stated per group of nodes (pipette-bw/2,
 * bwcache.h): restating a cache's figures per group, and back.
 *
 * A group pair's figure stands for the figures of all its node pairs
 * that have none of their own.  So that restating loses nothing (at
 * tolerance 0) and the file can say it (one provenance and latency for
 * all group figures, the "inter" section's), a group pair gets a figure
 * only when every one of its node pairs is measured, all with the same
 * provenance and latency, the one most group pairs have; its figure is
 * the lower median of theirs.  Node pairs whose figure differs from it
 * keep their own. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/bwcache_int.h"

static int same_lat(float a, float b)
{
	return a == b || (isnan(a) && isnan(b));
}

/* Forget the groups (their figures with them). */
static void drop_groups(struct pipette_bwcache *bw)
{
	struct bw_inter *in = &bw->inter;
	int i;

	for (i = 0; i < in->n_groups; i++)
		free(in->group_name[i]);
	free(in->group_name);
	in->group_name = NULL;
	in->n_groups = in->cap_groups = 0;
	for (i = 0; i < bw->cap && in->group_of; i++)
		in->group_of[i] = -1;
	bw_mat_free(&in->between);
}

int pipette_bwcache_ungroup(struct pipette_bwcache *bw, struct pipette_err *err)
{
	int a, b;

	for (a = 0; a < bw->n && bw->inter.n_groups; a++)
		for (b = 0; b < bw->n; b++) {
			struct bw_entry own, grp;

			if (a == b)
				continue;
			bw_inter_own(bw, a, b, &own);
			if (!isnan(own.gbps))
				continue;
			bw_inter_get(bw, a, b, &grp);
			if (!isnan(grp.gbps) &&
			    bw_inter_set(bw, a, b, grp.gbps, grp.code, grp.lat, grp.prov, err) < 0)
				return -1;
		}
	drop_groups(bw);
	return 0;
}

/* A group pair whose node pairs all have one provenance and latency:
 * that key, how many node pairs, and the lower median of their figures. */
struct cand {
	int ga, gb;
	int prov;
	float lat;
	long pairs;
	double gbps;
	uint32_t code;
};

static int cmp_double(const void *pa, const void *pb)
{
	double x = *(const double *)pa, y = *(const double *)pb;

	return (x > y) - (x < y);
}

/* The nodes of each group, as index lists into one array: group g's are
 * mem[start[g] .. start[g + 1]). */
struct members {
	int *mem, *start;
};

static int members_of(const struct pipette_bwcache *bw, struct members *m)
{
	int ng = bw->inter.n_groups, i, g, *fill;

	m->mem = malloc(((size_t)bw->n + 1) * sizeof(int));
	m->start = calloc((size_t)ng + 2, sizeof(int));
	fill = calloc((size_t)ng + 1, sizeof(int));
	if (!m->mem || !m->start || !fill) {
		free(fill);
		return -1;
	}
	for (i = 0; i < bw->n; i++)
		if ((g = bw->inter.group_of[i]) >= 0)
			m->start[g + 1]++;
	for (g = 0; g < ng; g++)
		m->start[g + 1] += m->start[g];
	for (i = 0; i < bw->n; i++)
		if ((g = bw->inter.group_of[i]) >= 0)
			m->mem[m->start[g] + fill[g]++] = i;
	free(fill);
	return 0;
}

/* Group pair (ga, gb) as a candidate: 1 when complete and of one key
 * (*c filled), 0 when not, -1 when out of memory.  vals: scratch room
 * for the pair's figures. */
static int candidate(const struct pipette_bwcache *bw, const struct members *m, int ga,
		     int gb, double *vals, struct cand *c)
{
	long k = 0;
	int i, j;

	for (i = m->start[ga]; i < m->start[ga + 1]; i++)
		for (j = m->start[gb]; j < m->start[gb + 1]; j++) {
			struct bw_entry e;

			if (m->mem[i] == m->mem[j])
				continue;
			bw_inter_own(bw, m->mem[i], m->mem[j], &e);
			if (isnan(e.gbps) || (k && (e.prov != c->prov || !same_lat(e.lat, c->lat))))
				return 0;
			c->prov = e.prov;
			c->lat = e.lat;
			vals[k++] = e.gbps;
		}
	if (!k)
		return 0;
	qsort(vals, (size_t)k, sizeof(double), cmp_double);
	c->ga = ga;
	c->gb = gb;
	c->pairs = k;
	c->gbps = vals[(k - 1) / 2];
	c->code = bw_code_of(c->gbps);
	return 1;
}

static int cmp_cand_key(const void *pa, const void *pb)
{
	const struct cand *x = pa, *y = pb;

	if (x->prov != y->prov)
		return x->prov < y->prov ? -1 : 1;
	if (isnan(x->lat) || isnan(y->lat))
		return isnan(y->lat) - isnan(x->lat);
	if (x->lat != y->lat)
		return x->lat < y->lat ? -1 : 1;
	if (x->ga != y->ga)
		return x->ga < y->ga ? -1 : 1;
	return (x->gb > y->gb) - (x->gb < y->gb);
}

/* The key with the most node pairs among the candidates (ties: the
 * smallest key, so the choice is deterministic); the candidates are left
 * sorted by key. */
static void best_key(struct cand *cd, size_t n, int *prov, float *lat)
{
	size_t i, k;
	long best = -1;

	qsort(cd, n, sizeof(*cd), cmp_cand_key);
	for (i = 0; i < n; i = k) {
		long sum = 0;

		for (k = i; k < n && cd[k].prov == cd[i].prov && same_lat(cd[k].lat, cd[i].lat);
		     k++)
			sum += cd[k].pairs;
		if (sum > best) {
			best = sum;
			*prov = cd[i].prov;
			*lat = cd[i].lat;
		}
	}
}

/* The group pairs' figures: the candidates of the best key. */
static int group_figures(struct pipette_bwcache *bw, const struct members *m,
			 struct pipette_err *err)
{
	int ng = bw->inter.n_groups, ga, gb, prov = -1, r = 0;
	long most = 0;
	double *vals;
	struct cand *cd = malloc(((size_t)ng * (size_t)ng + 1) * sizeof(*cd));
	size_t n = 0, i;
	float lat = NAN;

	for (ga = 0; ga < ng; ga++)
		for (gb = 0; gb < ng; gb++) {
			long sz = (long)(m->start[ga + 1] - m->start[ga]) *
				  (m->start[gb + 1] - m->start[gb]);

			most = sz > most ? sz : most;
		}
	vals = malloc(((size_t)most + 1) * sizeof(double));
	for (ga = 0; cd && vals && ga < ng; ga++)
		for (gb = 0; gb < ng; gb++)
			n += (size_t)candidate(bw, m, ga, gb, vals, &cd[n]);
	if (!cd || !vals) {
		free(cd);
		free(vals);
		return pipette_fail(err, "out of memory restating figures per group");
	}
	if (n)
		best_key(cd, n, &prov, &lat);
	for (i = 0; i < n && r == 0; i++)
		if (cd[i].prov == prov && same_lat(cd[i].lat, lat))
			r = bw_mat_set(&bw->inter.between, cd[i].ga, cd[i].gb, cd[i].gbps,
				       cd[i].code, lat, prov);
	free(cd);
	free(vals);
	return r < 0 ? pipette_fail(err, "out of memory restating figures per group") : 0;
}

/* Whether own figure e of a -> b says no more than its groups' figure:
 * the same provenance and latency, and a bandwidth within tolerance. */
static int covered(const struct pipette_bwcache *bw, int a, int b, const struct bw_entry *e,
		   double tolerance)
{
	const struct bw_inter *in = &bw->inter;
	int ga = in->group_of[a], gb = in->group_of[b];
	struct bw_entry g;

	if (ga < 0 || gb < 0 || !bw_mat_has(&in->between, ga, gb))
		return 0;
	bw_mat_get(&in->between, ga, gb, &g);
	if (g.prov != e->prov || !same_lat(g.lat, e->lat))
		return 0;
	return tolerance > 0 ? fabs(e->gbps - g.gbps) <= tolerance * g.gbps
			     : e->gbps == g.gbps;
}

/* Keep the own figures the groups do not cover, in a store of their size
 * (a hash while they are few). */
static int keep_exceptions(struct pipette_bwcache *bw, double tolerance,
			   struct pipette_err *err)
{
	struct bw_inter *in = &bw->inter;
	struct bw_inter old = *in;
	int a, b;

	memset(&in->mat, 0, sizeof(in->mat));
	memset(&in->pairs, 0, sizeof(in->pairs));
	in->dense = 0;
	for (a = 0; a < bw->n; a++)
		for (b = 0; b < bw->n; b++) {
			struct bw_entry e;

			if (a == b)
				continue;
			if (old.dense)
				bw_mat_get(&old.mat, a, b, &e);
			else if (!bw_pairs_get(&old.pairs, a, b, &e))
				continue;
			if (isnan(e.gbps) || covered(bw, a, b, &e, tolerance))
				continue;
			if (bw_inter_set(bw, a, b, e.gbps, e.code, e.lat, e.prov, err) < 0) {
				bw_mat_free(&in->mat);	/* back to the old figures */
				bw_pairs_free(&in->pairs);
				in->mat = old.mat;
				in->pairs = old.pairs;
				in->dense = old.dense;
				return -1;
			}
		}
	bw_mat_free(&old.mat);
	bw_pairs_free(&old.pairs);
	return 0;
}

int pipette_bwcache_set_groups(struct pipette_bwcache *bw, int n_groups,
			       const char *const *names, const int *group_of,
			       double tolerance, struct pipette_err *err)
{
	struct members m = { NULL, NULL };
	int g, i;

	if (n_groups < 0 || n_groups > PIPETTE_BW_MAX_NODES)
		return pipette_fail(err, "%d groups, expected 0..%d", n_groups,
				    PIPETTE_BW_MAX_NODES);
	if (!(tolerance >= 0 && tolerance < 1))
		return pipette_fail(err, "tolerance %g is not in [0, 1)", tolerance);
	for (i = 0; i < bw->n; i++)
		if (group_of[i] < -1 || group_of[i] >= n_groups)
			return pipette_fail(err, "node %s: group %d is not in [-1, %d)",
					    bw->node[i].name, group_of[i], n_groups);
	if (pipette_bwcache_ungroup(bw, err) < 0)
		return -1;
	for (g = 0; g < n_groups; g++)
		if (bw_group_add(bw, names[g], err) < 0)
			goto fail;
	for (i = 0; i < bw->n; i++)
		bw->inter.group_of[i] = group_of[i];
	if (members_of(bw, &m) < 0) {
		pipette_fail(err, "out of memory restating figures per group");
		goto fail;
	}
	if (group_figures(bw, &m, err) < 0 || keep_exceptions(bw, tolerance, err) < 0)
		goto fail;
	free(m.mem);
	free(m.start);
	return 0;
fail:
	free(m.mem);
	free(m.start);
	/* the groups, with whatever figures they got, go: the own figures
	 * (all of them until keep_exceptions is done) say it all again */
	if (bw->inter.n_groups && pipette_bwcache_ungroup(bw, NULL) < 0)
		drop_groups(bw);
	return -1;
}
