/* pipette: synthetic bandwidth caches (etc/examples, tests).
 *
 * Not measurements: a healthy figure per link with multiplicative noise,
 * then faults: links far below nominal, the "static interconnect
 * assumption" the original Pipette was built against (README of
 * yimjinkyu1/date2024_pipette @a2b0683; its measured sample,
 * Megatron-LM-2.5/mpigraph/temp/mpigraph_file.json, has 11072 and 14497
 * MB/s for the two directions of one pair), and two of our own to
 * exercise the mapping, a slower leaf switch and a GPU with NVLinks down.
 * The random stream is splitmix64 (Steele, Lea, Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014), drawn in a fixed order so
 * the output depends only on the parameters. */
#include "inputs/bwcache.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/bwcache_int.h"
#include "inputs/rng.h"

/* Figures are rounded to 0.01 GB/s: measurements are not more precise,
 * and the files stay readable.  The figure is m / 100 for the integer m
 * returned here (at least 1: 0.01 GB/s); m / 100.0 is the double the
 * written "%.2f"-style text reads back as (bwcache_int.h). */
static uint64_t hundredths(double x)
{
	double m = floor(x * 100.0 + 0.5);

	return m < 1 ? 1 : (uint64_t)m;
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
	g->domain_nodes = 0;
	g->domain_of = NULL;
	g->domain_prefix = NULL;
	g->domain_gpus = 0;
	g->degraded_tray = -1;
	g->degraded_tray_factor = 0.5;
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

/* The parameters, each against its range. */
static int check_gen(const struct pipette_bw_gen *g, struct pipette_err *err)
{
	int i;

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
	    check_frac(g->degraded_factor, 0.01, 1, "degraded NVLink factor", err) < 0 ||
	    check_frac(g->degraded_tray_factor, 0.01, 1, "degraded tray factor", err) < 0)
		return -1;
	if (g->domain_nodes < 0 || g->domain_nodes > g->nodes)
		return pipette_fail(err, "generate: %d nodes per NVLink domain is not in [0, %d]",
				    g->domain_nodes, g->nodes);
	for (i = 0; g->domain_of && i < g->nodes; i++)
		if (g->domain_of[i] < -1 || g->domain_of[i] >= g->nodes)
			return pipette_fail(err, "generate: node %d's NVLink domain %d is not in "
					    "[-1, %d)", i + 1, g->domain_of[i], g->nodes);
	if (g->degraded_tray >= g->nodes ||
	    (g->degraded_tray >= 0 && g->domain_nodes < 2 && !g->domain_of))
		return pipette_fail(err, "generate: degraded tray %d needs an NVLink domain of "
				    "several nodes and one of the %d nodes", g->degraded_tray + 1,
				    g->nodes);
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
	return 0;
}

/* What every generated figure claims to be: nccl-tests bus bandwidth at
 * 30 MiB, taken at g->when by g->tool. */
static struct pipette_bw_prov gen_prov(const struct pipette_bw_gen *g)
{
	struct pipette_bw_prov p = { g->tool, "busbw", 31457280.0, g->when };

	return p;
}

/* One generated figure, checked as pipette_bwcache_set_inter and _intra
 * check theirs. */
static int gen_figure(uint64_t m, const char *what_a, const char *what_b, int gpu_a,
		      int gpu_b, double *v, uint32_t *code, struct pipette_err *err)
{
	*v = (double)m / 100.0;
	*code = bw_code_decimal(m, -2);
	if (*v <= PIPETTE_BW_MAX_GBPS)
		return 0;
	if (gpu_a < 0)
		return pipette_fail(err, "link %.255s -> %.255s: bandwidth %g GB/s is not "
				    "in (0, %g]", what_a, what_b, *v, PIPETTE_BW_MAX_GBPS);
	return pipette_fail(err, "node %.255s GPU %d -> %d: bandwidth %g GB/s is not in "
			    "(0, %g]", what_a, gpu_a, gpu_b, *v, PIPETTE_BW_MAX_GBPS);
}

/* The factor of a node pair whose nodes are on switches si and sj. */
static double switch_factor(const struct pipette_bw_gen *g, int si, int sj)
{
	double f = 1.0;

	if (si != sj)
		f *= g->cross_factor;
	if (si == g->slow_switch || sj == g->slow_switch)
		f *= g->slow_switch_factor;
	return f;
}

/* Node i's NVLink domain, -1: none. */
static int domain_of(const struct pipette_bw_gen *g, int i)
{
	if (g->domain_of)
		return g->domain_of[i];
	return g->domain_nodes > 1 ? i / g->domain_nodes : -1;
}

static int switch_of(const struct pipette_bw_gen *g, int node)
{
	return g->switch_size > 0 ? node / g->switch_size : 0;
}

/* Inter-node links: per unordered pair, four draws in a fixed order (is it
 * slow, how slow, noise i->j, noise j->i), then the switch factors. */
static int gen_inter(const struct pipette_bw_gen *g, struct pipette_bwcache *bw,
		     uint64_t *s, int prov, struct pipette_err *err)
{
	int i, j;

	for (i = 0; i < g->nodes; i++)
		for (j = i + 1; j < g->nodes; j++) {
			double u_slow = pipette_rng_unit(s), u_fac = pipette_rng_unit(s);
			double u_ij = pipette_rng_unit(s), u_ji = pipette_rng_unit(s);
			double f = g->switch_size > 0 ?
				   switch_factor(g, switch_of(g, i), switch_of(g, j)) : 1.0, v;
			/* one NVLink domain: the NVLink figures, no switch */
			int dom = domain_of(g, i) >= 0 && domain_of(g, i) == domain_of(g, j);
			double base = dom ? g->intra_gbps : g->inter_gbps;
			float lat = (float)(dom ? g->intra_lat_us : g->inter_lat_us);
			uint32_t code;

			if (dom)
				f = i == g->degraded_tray || j == g->degraded_tray
				    ? g->degraded_tray_factor : 1.0;
			if (u_slow < g->slow_frac)
				f *= g->slow_min + (g->slow_max - g->slow_min) * u_fac;
			if (gen_figure(hundredths(base * f * (1 + g->noise * (2 * u_ij - 1))),
				       bw->node[i].name, bw->node[j].name, -1, -1, &v, &code,
				       err) < 0 ||
			    bw_inter_set(bw, i, j, v, code, lat, prov, err) < 0 ||
			    gen_figure(hundredths(base * f * (1 + g->noise * (2 * u_ji - 1))),
				       bw->node[j].name, bw->node[i].name, -1, -1, &v, &code,
				       err) < 0 ||
			    bw_inter_set(bw, j, i, v, code, lat, prov, err) < 0)
				return -1;
		}
	return 0;
}

/* Intra-node links: one draw per ordered GPU pair; one GPU of the
 * degraded node (drawn first) has NVLinks down. */
static int gen_intra(const struct pipette_bw_gen *g, struct pipette_bwcache *bw,
		     uint64_t *s, int prov, struct pipette_err *err)
{
	int i, a, b, bad_gpu = (int)(pipette_rng_next(s) % (uint64_t)g->gpus_per_node);

	for (i = 0; i < g->nodes; i++) {
		struct bw_node *nd = &bw->node[i];

		if (bw_intra_reserve(nd, g->gpus_per_node, err) < 0)
			return -1;
		for (a = 0; a < g->gpus_per_node; a++)
			for (b = 0; b < g->gpus_per_node; b++) {
				double u = pipette_rng_unit(s), f = 1.0, v;
				uint32_t code;

				if (a == b)
					continue;
				if (i == g->degraded_node && (a == bad_gpu || b == bad_gpu))
					f = g->degraded_factor;
				if (gen_figure(hundredths(g->intra_gbps * f *
							  (1 + g->noise * (2 * u - 1))),
					       nd->name, NULL, a, b, &v, &code, err) < 0)
					return -1;
				if (bw_mat_set(&nd->intra, a, b, v, code, (float)g->intra_lat_us,
					       prov) < 0)
					return pipette_fail(err, "generate: out of memory");
			}
	}
	return 0;
}

/* The latency every figure of a kind gets, checked as set_inter and
 * set_intra check theirs, naming the first figure that has it. */
static int check_lat(double l, const char *a, const char *b, struct pipette_err *err)
{
	if (isnan(l) || (isfinite(l) && l >= 0 && l <= PIPETTE_BW_MAX_LAT_US))
		return 0;
	if (b)
		return pipette_fail(err, "link %.255s -> %.255s: latency %g us is not in "
				    "[0, %g]", a, b, l, PIPETTE_BW_MAX_LAT_US);
	return pipette_fail(err, "node %.255s GPU 0 -> 1: latency %g us is not in [0, %g]",
			    a, l, PIPETTE_BW_MAX_LAT_US);
}

/* Each node's NVLink domain, named prefix0.. (pipette-bw/3). */
static int gen_domains(const struct pipette_bw_gen *g, struct pipette_bwcache *bw,
		       struct pipette_err *err)
{
	const char *prefix = g->domain_prefix ? g->domain_prefix : "nvl";
	char name[PIPETTE_BW_MAX_NAME + 1];
	int i;

	for (i = 0; i < g->nodes; i++) {
		if (domain_of(g, i) < 0)
			continue;
		snprintf(name, sizeof(name), "%.200s%d", prefix, domain_of(g, i));
		if (pipette_bwcache_set_domain(bw, bw->node[i].name, name, g->domain_gpus, 0,
					       err) < 0)
			return pipette_fail_prefix(err, "generate: ");
	}
	return 0;
}

/* Node names prefix1..prefixN, then the figures. */
static int gen_all(const struct pipette_bw_gen *g, struct pipette_bwcache *bw,
		   struct pipette_err *err)
{
	struct pipette_bw_prov prov = gen_prov(g);
	size_t plen = strlen(g->prefix) + 12;
	char *name = malloc(plen);
	uint64_t s = g->seed;
	int i, p;

	if (!name)
		return pipette_fail(err, "generate: out of memory");
	for (i = 0; i < g->nodes; i++) {
		snprintf(name, plen, "%s%d", g->prefix, i + 1);
		if (pipette_bwcache_add_node(bw, name, err) < 0) {
			free(name);
			return -1;
		}
	}
	free(name);
	if ((g->nodes > 1 &&
	     check_lat(g->inter_lat_us, bw->node[0].name, bw->node[1].name, err) < 0) ||
	    (g->gpus_per_node > 1 && check_lat(g->intra_lat_us, bw->node[0].name, NULL, err) < 0))
		return -1;
	if ((p = bw_prov_intern(bw, &prov, err)) < 0 || bw_inter_make_dense(bw, err) < 0 ||
	    gen_inter(g, bw, &s, p, err) < 0 || gen_intra(g, bw, &s, p, err) < 0)
		return -1;
	return gen_domains(g, bw, err);
}

int pipette_bwcache_generate(const struct pipette_bw_gen *g,
			     struct pipette_bwcache **out,
			     struct pipette_err *err)
{
	struct pipette_bw_defaults def;
	struct pipette_bwcache *bw;

	*out = NULL;
	if (check_gen(g, err) < 0)
		return -1;
	if (!(bw = pipette_bwcache_create()))
		return pipette_fail(err, "generate: out of memory");
	def.inter_gbps = g->inter_gbps;
	def.intra_gbps = g->intra_gbps;
	def.inter_lat_us = g->inter_lat_us;
	def.intra_lat_us = g->intra_lat_us;
	if (gen_all(g, bw, err) < 0 || pipette_bwcache_set_defaults(bw, &def, err) < 0) {
		pipette_bwcache_destroy(bw);
		return -1;
	}
	pipette_bwcache_set_generated(bw, g->when);
	*out = bw;
	return 0;
}
