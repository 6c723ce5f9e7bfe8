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

struct pipette_cluster *pipette_cluster_create(const char *const *nodes,
					       int n_nodes, int gpus_per_node,
					       const int *gpu_ids,
					       const struct pipette_gpu_spec *gpu,
					       const struct pipette_bwcache *bw,
					       int allow_missing,
					       struct pipette_err *err)
{
	struct pipette_cluster *c = NULL;
	struct pipette_bw_defaults def = { NAN, NAN, NAN, NAN };
	int *idx = NULL, n = n_nodes, g = gpus_per_node;
	int i, j, a, b, missing = 0, un_inter = 0, un_intra = 0, pairs_intra = 0;
	char src[160];
	/* Nominal figures are peaks; what a transfer attains is the GPU
	 * spec's link efficiency times that (hardware.c).  Measured figures
	 * and cache defaults are attained already. */
	double nic_gbps = gpu ? gpu->nic_gbps * gpu->nic_eff : 0;
	double nvlink_gbps = gpu ? gpu->nvlink_gbps * gpu->nvlink_eff : 0;

	if (!nodes || n < 1 || n > PIPETTE_MAX_NODES) {
		pipette_fail(err, "cluster: %d nodes given, expected 1..%d", n,
			     PIPETTE_MAX_NODES);
		return NULL;
	}
	if (g < 1 || g > PIPETTE_MAX_GPUS) {
		pipette_fail(err, "cluster: %d GPUs per node, expected 1..%d", g,
			     PIPETTE_MAX_GPUS);
		return NULL;
	}
	if (check_spec(gpu, err) < 0)
		return NULL;
	c = calloc(1, sizeof(*c));
	idx = malloc((size_t)n * sizeof(int));
	if (!c || !idx)
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
	for (a = 0; a < g; a++) {
		c->gpu_ids[a] = gpu_ids ? gpu_ids[a] : a;
		if (c->gpu_ids[a] < 0 || c->gpu_ids[a] >= PIPETTE_MAX_GPUS) {
			pipette_fail(err, "cluster: GPU index %d (slot %d) is outside "
				     "[0, %d)", c->gpu_ids[a], a, PIPETTE_MAX_GPUS);
			goto fail;
		}
		for (b = 0; b < a; b++)
			if (c->gpu_ids[b] == c->gpu_ids[a]) {
				pipette_fail(err, "cluster: GPU index %d given twice "
					     "(slots %d and %d)", c->gpu_ids[a], b, a);
				goto fail;
			}
	}
	/* Names: distinct.  O(n^2) strcmp is ~0.5M compares at 1024 nodes. */
	for (i = 0; i < n; i++) {
		if (!nodes[i] || !*nodes[i]) {
			pipette_fail(err, "cluster: node %d has no name", i);
			goto fail;
		}
		for (j = 0; j < i; j++)
			if (!strcmp(nodes[i], nodes[j])) {
				pipette_fail(err, "cluster: node '%.64s' given twice "
					     "(positions %d and %d)", nodes[i], j, i);
				goto fail;
			}
		c->names[i] = strdup(nodes[i]);
		if (!c->names[i])
			goto oom;
		idx[i] = bw ? pipette_bwcache_node_index(bw, nodes[i]) : -1;
		if (bw && idx[i] < 0) {
			if (!allow_missing) {
				pipette_fail(err, "cluster: node '%.64s' is not in the "
					     "bandwidth cache (measure it, or allow "
					     "missing nodes to use defaults)", nodes[i]);
				goto fail;
			}
			missing++;
		}
	}
	if (bw)
		def = bw->def;
	/* Intra: GPU index outside a node's measured matrix. */
	for (i = 0; bw && i < n; i++) {
		const struct bw_node *nd;

		if (idx[i] < 0 || !bw->node[idx[i]].ngpus)
			continue;
		nd = &bw->node[idx[i]];
		for (a = 0; a < g; a++)
			if (c->gpu_ids[a] >= nd->ngpus) {
				if (!allow_missing) {
					pipette_fail(err, "cluster: node %.64s: GPU "
						     "index %d is outside its measured "
						     "%dx%d intra matrix", nd->name,
						     c->gpu_ids[a], nd->ngpus, nd->ngpus);
					goto fail;
				}
				if (warn(c, "node %s: GPU index %d is outside its "
					 "measured %dx%d intra matrix: using defaults",
					 nd->name, c->gpu_ids[a], nd->ngpus,
					 nd->ngpus) < 0)
					goto oom;
			}
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			struct pipette_link *l = &c->inter[(size_t)i * n + j];
			const struct bw_entry *e = NULL;

			if (i == j) {
				l->gbps = INFINITY;
				l->lat_us = 0;
				continue;
			}
			if (idx[i] >= 0 && idx[j] >= 0)
				e = BW_INTER(bw, idx[i], idx[j]);
			fill(l, e, def.inter_gbps, def.inter_lat_us, nic_gbps,
			     gpu->nic_lat_us, &un_inter);
		}
	for (i = 0; i < n; i++) {
		const struct bw_node *nd = idx[i] >= 0 ? &bw->node[idx[i]] : NULL;

		for (a = 0; a < g; a++)
			for (b = 0; b < g; b++) {
				struct pipette_link *l =
					&c->intra[((size_t)i * g + a) * g + b];
				const struct bw_entry *e = NULL;
				int ia = c->gpu_ids[a], ib = c->gpu_ids[b];

				if (a == b) {
					l->gbps = INFINITY;
					l->lat_us = 0;
					continue;
				}
				pairs_intra++;
				if (nd && ia < nd->ngpus && ib < nd->ngpus)
					e = &nd->intra[ia * nd->ngpus + ib];
				fill(l, e, def.intra_gbps, def.intra_lat_us,
				     nvlink_gbps, gpu->nvlink_lat_us, &un_intra);
			}
	}
	if (bw && missing) {
		int shown = 0;
		char list[256];
		size_t len = 0;

		list[0] = '\0';
		for (i = 0; i < n && shown < 8; i++)
			if (idx[i] < 0) {
				len += (size_t)snprintf(list + len, len < sizeof(list) ?
							sizeof(list) - len : 0,
							"%s%s", shown ? ", " : "",
							nodes[i]);
				shown++;
			}
		if (warn(c, "%d of %d nodes are not in the bandwidth cache (%s%s): "
			 "using defaults for their links", missing, n, list,
			 missing > shown ? ", ..." : "") < 0)
			goto oom;
	}
	if (bw && un_inter &&
	    warn(c, "%d of %d inter-node links are unmeasured: using %s", un_inter,
		 n * (n - 1), source_of(def.inter_gbps, gpu, src, sizeof(src),
					nic_gbps)) < 0)
		goto oom;
	if (bw && un_intra &&
	    warn(c, "%d of %d intra-node GPU pairs are unmeasured: using %s",
		 un_intra, pairs_intra, source_of(def.intra_gbps, gpu, src,
						  sizeof(src), nvlink_gbps)) < 0)
		goto oom;
	free(idx);
	return c;
oom:
	pipette_fail(err, "cluster: out of memory for %d nodes x %d GPUs", n, g);
fail:
	free(idx);
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
