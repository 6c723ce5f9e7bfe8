/* pipette: the cluster: nodes, GPUs and resolved links (see cluster.h). */
#include "cluster.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwcache_int.h"

struct pipette_cluster {
	int n, g;
	char **names;
	int *gpu_ids;			/* g */
	struct pipette_link *inter;	/* n x n, node level */
	struct pipette_link *intra;	/* n x g x g, by slot */
	const struct pipette_gpu_spec *gpu;
	char *warnings;
	size_t wlen, wcap;
};

void pipette_cluster_destroy(struct pipette_cluster *c)
{
	int i;

	if (!c)
		return;
	for (i = 0; c->names && i < c->n; i++)
		free(c->names[i]);
	free(c->names);
	free(c->gpu_ids);
	free(c->inter);
	free(c->intra);
	free(c->warnings);
	free(c);
}

__attribute__((format(printf, 2, 3)))
static int warn(struct pipette_cluster *c, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if (c->wlen + (size_t)n + 2 > c->wcap) {
		size_t cap = (c->wlen + (size_t)n + 2) * 2;
		char *p = realloc(c->warnings, cap);

		if (!p)
			return -1;
		c->warnings = p;
		c->wcap = cap;
	}
	if (c->wlen)
		c->warnings[c->wlen++] = '\n';
	va_start(ap, fmt);
	vsnprintf(c->warnings + c->wlen, c->wcap - c->wlen, fmt, ap);
	va_end(ap);
	c->wlen += (size_t)n;
	return 0;
}

static int check_spec(const struct pipette_gpu_spec *gpu, struct pipette_err *err)
{
	if (!gpu)
		return pipette_fail(err, "cluster: no GPU type given");
	if (!(gpu->nvlink_gbps > 0) || !(gpu->nic_gbps > 0) ||
	    !(gpu->nvlink_lat_us >= 0) || !(gpu->nic_lat_us >= 0))
		return pipette_fail(err, "cluster: GPU type %s has no nominal link "
				    "figures (nvlink_gbps, nic_gbps, latencies)",
				    gpu->name ? gpu->name : "?");
	return 0;
}

/* Fallback chain for one figure: measured > cache default > nominal. */
static void fill(struct pipette_link *l, const struct bw_entry *e, double def_gbps,
		 double def_lat, double nom_gbps, double nom_lat, int *unmeasured)
{
	if (e && !isnan(e->gbps)) {
		l->gbps = e->gbps;
	} else {
		l->gbps = !isnan(def_gbps) ? def_gbps : nom_gbps;
		(*unmeasured)++;
	}
	if (e && !isnan(e->gbps) && !isnan(e->lat))
		l->lat_us = e->lat;
	else
		l->lat_us = !isnan(def_lat) ? def_lat : nom_lat;
}

static const char *source_of(double def, const struct pipette_gpu_spec *gpu,
			     char *buf, size_t size, double nom)
{
	if (!isnan(def))
		snprintf(buf, size, "the cache default %g GB/s", def);
	else
		snprintf(buf, size, "%g GB/s (%s's nominal link x its efficiency)", nom,
			 gpu->name ? gpu->name : "the GPU");
	return buf;
}

/* What resolving the links reads besides the cluster: the cache, where
 * each node is in it, its defaults, and the nominal figures; and what it
 * counts for the warnings. */
struct resolve {
	const struct pipette_bwcache *bw;	/* NULL: nominal figures only */
	int *idx;		/* per node: its index in bw, -1 if absent */
	struct pipette_bw_defaults def;
	/* Nominal figures are peaks; what a transfer attains is the GPU
	 * spec's link efficiency times that (hardware.c).  Measured figures
	 * and cache defaults are attained already. */
	double nic_gbps, nvlink_gbps;
	int missing;		/* nodes not in bw */
	int un_inter, un_intra;	/* links with no measurement */
	int pairs_intra;
};

static int out_of_memory(struct pipette_err *err, int n, int g)
{
	return pipette_fail(err, "cluster: out of memory for %d nodes x %d GPUs", n, g);
}

/* The GPU index of every slot (the identity without gpu_ids): in range and
 * distinct. */
static int set_gpu_ids(struct pipette_cluster *c, const int *gpu_ids, struct pipette_err *err)
{
	int a, b;

	for (a = 0; a < c->g; a++) {
		c->gpu_ids[a] = gpu_ids ? gpu_ids[a] : a;
		if (c->gpu_ids[a] < 0 || c->gpu_ids[a] >= PIPETTE_BW_MAX_GPUS)
			return pipette_fail(err, "cluster: GPU index %d (slot %d) is outside "
					    "[0, %d)", c->gpu_ids[a], a, PIPETTE_BW_MAX_GPUS);
		for (b = 0; b < a; b++)
			if (c->gpu_ids[b] == c->gpu_ids[a])
				return pipette_fail(err, "cluster: GPU index %d given twice "
						    "(slots %d and %d)", c->gpu_ids[a], b, a);
	}
	return 0;
}

/* Node names: present and distinct (O(n^2) strcmp is ~0.5M compares at
 * 1024 nodes), each found in the cache unless allow_missing. */
static int set_names(struct pipette_cluster *c, const char *const *nodes, struct resolve *rs,
		     int allow_missing, struct pipette_err *err)
{
	int i, j;

	for (i = 0; i < c->n; i++) {
		if (!nodes[i] || !*nodes[i])
			return pipette_fail(err, "cluster: node %d has no name", i);
		for (j = 0; j < i; j++)
			if (!strcmp(nodes[i], nodes[j]))
				return pipette_fail(err, "cluster: node '%.64s' given twice "
						    "(positions %d and %d)", nodes[i], j, i);
		c->names[i] = strdup(nodes[i]);
		if (!c->names[i])
			return out_of_memory(err, c->n, c->g);
		rs->idx[i] = rs->bw ? pipette_bwcache_node_index(rs->bw, nodes[i]) : -1;
		if (rs->bw && rs->idx[i] < 0) {
			if (!allow_missing)
				return pipette_fail(err, "cluster: node '%.64s' is not in the "
						    "bandwidth cache (measure it, or allow "
						    "missing nodes to use defaults)", nodes[i]);
			rs->missing++;
		}
	}
	return 0;
}

/* A GPU index outside a node's measured intra matrix: an error, or with
 * allow_missing a warning (its links take the defaults). */
static int check_intra_ids(struct pipette_cluster *c, const struct resolve *rs,
			   int allow_missing, struct pipette_err *err)
{
	int i, a;

	for (i = 0; rs->bw && i < c->n; i++) {
		const struct bw_node *nd;

		if (rs->idx[i] < 0 || !rs->bw->node[rs->idx[i]].ngpus)
			continue;
		nd = &rs->bw->node[rs->idx[i]];
		for (a = 0; a < c->g; a++)
			if (c->gpu_ids[a] >= nd->ngpus) {
				if (!allow_missing)
					return pipette_fail(err, "cluster: node %.64s: GPU "
							    "index %d is outside its measured "
							    "%dx%d intra matrix", nd->name,
							    c->gpu_ids[a], nd->ngpus, nd->ngpus);
				if (warn(c, "node %s: GPU index %d is outside its "
					 "measured %dx%d intra matrix: using defaults",
					 nd->name, c->gpu_ids[a], nd->ngpus, nd->ngpus) < 0)
					return out_of_memory(err, c->n, c->g);
			}
	}
	return 0;
}

/* Every node pair's link (node level) and every GPU pair's inside each
 * node (by slot), through the fallback chain of fill(). */
static void resolve_links(struct pipette_cluster *c, struct resolve *rs)
{
	int n = c->n, g = c->g, i, j, a, b;

	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			struct pipette_link *l = &c->inter[(size_t)i * n + j];
			const struct bw_entry *e = NULL;

			if (i == j) {
				l->gbps = INFINITY;
				l->lat_us = 0;
				continue;
			}
			if (rs->idx[i] >= 0 && rs->idx[j] >= 0)
				e = BW_INTER(rs->bw, rs->idx[i], rs->idx[j]);
			fill(l, e, rs->def.inter_gbps, rs->def.inter_lat_us, rs->nic_gbps,
			     c->gpu->nic_lat_us, &rs->un_inter);
		}
	for (i = 0; i < n; i++) {
		const struct bw_node *nd = rs->idx[i] >= 0 ? &rs->bw->node[rs->idx[i]] : NULL;

		for (a = 0; a < g; a++)
			for (b = 0; b < g; b++) {
				struct pipette_link *l = &c->intra[((size_t)i * g + a) * g + b];
				const struct bw_entry *e = NULL;
				int ia = c->gpu_ids[a], ib = c->gpu_ids[b];

				if (a == b) {
					l->gbps = INFINITY;
					l->lat_us = 0;
					continue;
				}
				rs->pairs_intra++;
				if (nd && ia < nd->ngpus && ib < nd->ngpus)
					e = &nd->intra[ia * nd->ngpus + ib];
				fill(l, e, rs->def.intra_gbps, rs->def.intra_lat_us,
				     rs->nvlink_gbps, c->gpu->nvlink_lat_us, &rs->un_intra);
			}
	}
}

/* Warnings for what the cache did not have: nodes (the first eight
 * named), inter-node links and intra-node pairs, with what was used. */
static int warn_unmeasured(struct pipette_cluster *c, const char *const *nodes,
			   const struct resolve *rs)
{
	char src[160];
	int n = c->n;

	if (!rs->bw)
		return 0;
	if (rs->missing) {
		int i, shown = 0;
		char list[256];
		size_t len = 0;

		list[0] = '\0';
		for (i = 0; i < n && shown < 8; i++)
			if (rs->idx[i] < 0) {
				len += (size_t)snprintf(list + len, len < sizeof(list) ?
							sizeof(list) - len : 0,
							"%s%s", shown ? ", " : "", nodes[i]);
				shown++;
			}
		if (warn(c, "%d of %d nodes are not in the bandwidth cache (%s%s): "
			 "using defaults for their links", rs->missing, n, list,
			 rs->missing > shown ? ", ..." : "") < 0)
			return -1;
	}
	if (rs->un_inter &&
	    warn(c, "%d of %d inter-node links are unmeasured: using %s", rs->un_inter,
		 n * (n - 1), source_of(rs->def.inter_gbps, c->gpu, src, sizeof(src),
					rs->nic_gbps)) < 0)
		return -1;
	if (rs->un_intra &&
	    warn(c, "%d of %d intra-node GPU pairs are unmeasured: using %s",
		 rs->un_intra, rs->pairs_intra, source_of(rs->def.intra_gbps, c->gpu, src,
							  sizeof(src), rs->nvlink_gbps)) < 0)
		return -1;
	return 0;
}

struct pipette_cluster *pipette_cluster_create(const char *const *nodes,
					       int n_nodes, int gpus_per_node,
					       const int *gpu_ids,
					       const struct pipette_gpu_spec *gpu,
					       const struct pipette_bwcache *bw,
					       int allow_missing,
					       struct pipette_err *err)
{
	struct pipette_cluster *c = NULL;
	struct resolve rs = { bw, NULL, { NAN, NAN, NAN, NAN }, 0, 0, 0, 0, 0, 0 };
	int n = n_nodes, g = gpus_per_node;

	if (!nodes || n < 1 || n > PIPETTE_BW_MAX_NODES) {
		pipette_fail(err, "cluster: %d nodes given, expected 1..%d", n,
			     PIPETTE_BW_MAX_NODES);
		return NULL;
	}
	if (g < 1 || g > PIPETTE_BW_MAX_GPUS) {
		pipette_fail(err, "cluster: %d GPUs per node, expected 1..%d", g,
			     PIPETTE_BW_MAX_GPUS);
		return NULL;
	}
	if (check_spec(gpu, err) < 0)
		return NULL;
	rs.nic_gbps = gpu->nic_gbps * gpu->nic_eff;
	rs.nvlink_gbps = gpu->nvlink_gbps * gpu->nvlink_eff;
	c = calloc(1, sizeof(*c));
	rs.idx = malloc((size_t)n * sizeof(int));
	if (!c || !rs.idx)
		goto oom;
	c->n = n;
	c->g = g;
	c->gpu = gpu;
	c->names = calloc((size_t)n, sizeof(char *));
	c->gpu_ids = malloc((size_t)g * sizeof(int));
	c->inter = malloc((size_t)n * (size_t)n * sizeof(*c->inter));
	c->intra = malloc((size_t)n * (size_t)g * (size_t)g * sizeof(*c->intra));
	c->warnings = calloc(1, 1);
	if (!c->names || !c->gpu_ids || !c->inter || !c->intra || !c->warnings)
		goto oom;
	c->wcap = 1;
	if (set_gpu_ids(c, gpu_ids, err) < 0 || set_names(c, nodes, &rs, allow_missing, err) < 0)
		goto fail;
	if (bw)
		rs.def = bw->def;
	if (check_intra_ids(c, &rs, allow_missing, err) < 0)
		goto fail;
	resolve_links(c, &rs);
	if (warn_unmeasured(c, nodes, &rs) < 0)
		goto oom;
	free(rs.idx);
	return c;
oom:
	out_of_memory(err, n, g);
fail:
	free(rs.idx);
	pipette_cluster_destroy(c);
	return NULL;
}

int pipette_cluster_node_count(const struct pipette_cluster *c)
{
	return c->n;
}

int pipette_cluster_gpus_per_node(const struct pipette_cluster *c)
{
	return c->g;
}

const char *pipette_cluster_node_name(const struct pipette_cluster *c, int node)
{
	return node >= 0 && node < c->n ? c->names[node] : NULL;
}

int pipette_cluster_gpu_id(const struct pipette_cluster *c, int slot)
{
	return slot >= 0 && slot < c->g ? c->gpu_ids[slot] : -1;
}

const struct pipette_gpu_spec *pipette_cluster_gpu(const struct pipette_cluster *c)
{
	return c->gpu;
}

struct pipette_link pipette_cluster_link(const struct pipette_cluster *c,
					 int gpu_a, int gpu_b)
{
	int na = gpu_a / c->g, nb = gpu_b / c->g;

	if (na == nb)
		return c->intra[((size_t)na * c->g + gpu_a % c->g) * c->g +
				gpu_b % c->g];
	return c->inter[(size_t)na * c->n + nb];
}

struct pipette_link pipette_cluster_node_link(const struct pipette_cluster *c,
					      int node_a, int node_b)
{
	return c->inter[(size_t)node_a * c->n + node_b];
}

const char *pipette_cluster_warnings(const struct pipette_cluster *c)
{
	return c->warnings;
}
