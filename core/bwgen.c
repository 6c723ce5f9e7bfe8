/* pipette: synthetic bandwidth caches (etc/examples, tests).
 *
 * Not measurements: a healthy figure per link with multiplicative noise,
 * then the faults a real cluster shows (links heterogeneous and far below
 * nominal: Yim et al., Pipette, DATE 2024, motivation 1, as restated in
 * yimjinkyu1/date2024_pipette README.md:7 @a2b0683f; slower leaf
 * switches; a GPU with NVLinks down).  The
 * random stream is splitmix64 (Steele, Lea, Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014), drawn in a fixed order so
 * the output depends only on the parameters. */
#include "bwcache.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwcache_int.h"
#include "rng.h"

/* Round to 0.01 GB/s: measurements are not more precise, and the files
 * stay readable. */
static double round2(double x)
{
	return floor(x * 100.0 + 0.5) / 100.0;
}

void pipette_bw_gen_init(struct pipette_bw_gen *g)
{
	memset(g, 0, sizeof(*g));
	g->seed = 1;
	g->nodes = 4;
	g->gpus_per_node = 8;
	g->prefix = "node";
	g->inter_gbps = NAN;
	g->intra_gbps = NAN;
	g->inter_lat_us = NAN;
	g->intra_lat_us = NAN;
	g->noise = 0.03;
	g->slow_frac = 0;
	g->slow_min = 0.3;
	g->slow_max = 0.6;
	g->switch_size = 0;
	g->cross_factor = 1.0;
	g->slow_switch = -1;
	g->slow_switch_factor = 1.0;
	g->degraded_node = -1;
	g->degraded_factor = 0.5;
	g->when = 1735689600;	/* 2025-01-01T00:00:00Z */
	g->tool = "pipette bandwidth generate (synthetic)";
}

static int check_frac(double v, double lo, double hi, const char *what,
		      struct pipette_err *err)
{
	if (!(v >= lo && v <= hi))
		return pipette_fail(err, "generate: %s %g is not in [%g, %g]", what,
				    v, lo, hi);
	return 0;
}

int pipette_bwcache_generate(const struct pipette_bw_gen *g,
			     struct pipette_bwcache **out,
			     struct pipette_err *err)
{
	struct pipette_bw_prov inter_prov = { g->tool, "busbw", 31457280.0, g->when };
	struct pipette_bw_prov intra_prov = { g->tool, "busbw", 31457280.0, g->when };
	struct pipette_bw_defaults def;
	struct pipette_bwcache *bw = NULL;
	char **names = NULL;
	uint64_t s = g->seed;
	int i, j, a, b, bad_gpu;
	size_t plen;

	*out = NULL;
	if (g->nodes < 1 || g->nodes > PIPETTE_BW_MAX_NODES)
		return pipette_fail(err, "generate: %d nodes, expected 1..%d",
				    g->nodes, PIPETTE_BW_MAX_NODES);
	if (g->gpus_per_node < 1 || g->gpus_per_node > PIPETTE_BW_MAX_GPUS)
		return pipette_fail(err, "generate: %d GPUs per node, expected 1..%d",
				    g->gpus_per_node, PIPETTE_BW_MAX_GPUS);
	if (!(g->inter_gbps > 0 && g->inter_gbps <= PIPETTE_BW_MAX_GBPS) ||
	    !(g->intra_gbps > 0 && g->intra_gbps <= PIPETTE_BW_MAX_GBPS))
		return pipette_fail(err, "generate: healthy inter/intra bandwidths "
				    "must be in (0, %g] GB/s", PIPETTE_BW_MAX_GBPS);
	if (check_frac(g->noise, 0, 0.5, "noise", err) < 0 ||
	    check_frac(g->slow_frac, 0, 1, "slow fraction", err) < 0 ||
	    check_frac(g->slow_min, 0.01, 1, "slow minimum", err) < 0 ||
	    check_frac(g->slow_max, g->slow_min, 1, "slow maximum", err) < 0 ||
	    check_frac(g->cross_factor, 0.01, 1, "cross-switch factor", err) < 0 ||
	    check_frac(g->slow_switch_factor, 0.01, 1, "slow-switch factor", err) < 0 ||
	    check_frac(g->degraded_factor, 0.01, 1, "degraded NVLink factor", err) < 0)
		return -1;
	if (g->switch_size < 0 || g->switch_size > g->nodes)
		return pipette_fail(err, "generate: switch size %d is not in [0, %d]",
				    g->switch_size, g->nodes);
	if (g->slow_switch >= 0 &&
	    (g->switch_size == 0 ||
	     g->slow_switch >= (g->nodes + g->switch_size - 1) / g->switch_size))
		return pipette_fail(err, "generate: slow switch %d does not exist "
				    "(%d nodes, %d per switch)", g->slow_switch,
				    g->nodes, g->switch_size);
	if (g->degraded_node >= g->nodes)
		return pipette_fail(err, "generate: degraded node index %d is not "
				    "below %d", g->degraded_node, g->nodes);
	if (!g->prefix || strlen(g->prefix) > PIPETTE_BW_MAX_NAME - 8)
		return pipette_fail(err, "generate: bad node name prefix");
	bw = pipette_bwcache_create();
	names = calloc((size_t)g->nodes, sizeof(char *));
	if (!bw || !names)
		goto oom;
	plen = strlen(g->prefix) + 12;
	for (i = 0; i < g->nodes; i++) {
		names[i] = malloc(plen);
		if (!names[i])
			goto oom;
		snprintf(names[i], plen, "%s%d", g->prefix, i + 1);
		if (pipette_bwcache_add_node(bw, names[i], err) < 0)
			goto fail;
	}
	/* Inter: per unordered pair, four draws in a fixed order. */
	for (i = 0; i < g->nodes; i++)
		for (j = i + 1; j < g->nodes; j++) {
			double u_slow = pipette_rng_unit(&s), u_fac = pipette_rng_unit(&s);
			double u_ij = pipette_rng_unit(&s), u_ji = pipette_rng_unit(&s);
			double f = 1.0, gij, gji;

			if (g->switch_size > 0) {
				int si = i / g->switch_size, sj = j / g->switch_size;

				if (si != sj)
					f *= g->cross_factor;
				if (si == g->slow_switch || sj == g->slow_switch)
					f *= g->slow_switch_factor;
			}
			if (u_slow < g->slow_frac)
				f *= g->slow_min + (g->slow_max - g->slow_min) * u_fac;
			gij = round2(g->inter_gbps * f * (1 + g->noise * (2 * u_ij - 1)));
			gji = round2(g->inter_gbps * f * (1 + g->noise * (2 * u_ji - 1)));
			if (gij < 0.01)
				gij = 0.01;
			if (gji < 0.01)
				gji = 0.01;
			if (pipette_bwcache_set_inter(bw, names[i], names[j], gij,
						      g->inter_lat_us, &inter_prov, err) < 0 ||
			    pipette_bwcache_set_inter(bw, names[j], names[i], gji,
						      g->inter_lat_us, &inter_prov, err) < 0)
				goto fail;
		}
	/* Intra: one GPU of the degraded node has NVLinks down. */
	bad_gpu = (int)(pipette_rng_next(&s) % (uint64_t)g->gpus_per_node);
	for (i = 0; i < g->nodes; i++)
		for (a = 0; a < g->gpus_per_node; a++)
			for (b = 0; b < g->gpus_per_node; b++) {
				double u = pipette_rng_unit(&s), f = 1.0, v;

				if (a == b)
					continue;
				if (i == g->degraded_node && (a == bad_gpu || b == bad_gpu))
					f = g->degraded_factor;
				v = round2(g->intra_gbps * f * (1 + g->noise * (2 * u - 1)));
				if (v < 0.01)
					v = 0.01;
				if (pipette_bwcache_set_intra(bw, names[i], a, b, v,
							      g->intra_lat_us, &intra_prov,
							      err) < 0)
					goto fail;
			}
	def.inter_gbps = g->inter_gbps;
	def.intra_gbps = g->intra_gbps;
	def.inter_lat_us = g->inter_lat_us;
	def.intra_lat_us = g->intra_lat_us;
	if (pipette_bwcache_set_defaults(bw, &def, err) < 0)
		goto fail;
	pipette_bwcache_set_generated(bw, g->when);
	for (i = 0; i < g->nodes; i++)
		free(names[i]);
	free(names);
	*out = bw;
	return 0;
oom:
	pipette_fail(err, "generate: out of memory");
fail:
	for (i = 0; names && i < g->nodes; i++)
		free(names[i]);
	free(names);
	pipette_bwcache_destroy(bw);
	return -1;
}
