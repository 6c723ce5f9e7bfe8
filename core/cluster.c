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
	struct pipette_link *inter;	/* n x n, node level; NULL: all `uniform` */
	struct pipette_link uniform;
	struct pipette_link *intra;	/* n x g x g, by slot */
	const struct pipette_gpu_spec *gpu;
	char *warnings;
	size_t wlen, wcap;
	unsigned long version;		/* a fresh stamp at creation and every set */
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

/* What pipette_cluster_create resolves the links from, and what it found
 * missing along the way. */
struct build {
	const struct pipette_bwcache *bw;	/* NULL: nominal figures only */
	const struct pipette_gpu_spec *gpu;
	struct pipette_bw_defaults def;		/* the cache's, or all NAN */
	int *idx;				/* each node's index in bw, or -1 */
	int allow_missing, missing;
	/* Nominal figures are peaks; what a transfer attains is the GPU
	 * spec's link efficiency times that (hardware.c).  Measured figures
	 * and cache defaults are attained already. */
	double nic_gbps, nvlink_gbps;
	int un_inter, un_intra, pairs_intra;	/* unmeasured links, GPU pairs */
};

static int out_of_memory(const struct pipette_cluster *c, struct pipette_err *err)
{
	return pipette_fail(err, "cluster: out of memory for %d nodes x %d GPUs", c->n, c->g);
}

/* Slurm's GPU index of each slot: in range, none twice. */
static int set_gpu_ids(struct pipette_cluster *c, const int *gpu_ids, struct pipette_err *err)
{
	int a, b;

	for (a = 0; a < c->g; a++) {
		c->gpu_ids[a] = gpu_ids ? gpu_ids[a] : a;
		if (c->gpu_ids[a] < 0 || c->gpu_ids[a] >= PIPETTE_MAX_GPUS)
			return pipette_fail(err, "cluster: GPU index %d (slot %d) is outside "
					    "[0, %d)", c->gpu_ids[a], a, PIPETTE_MAX_GPUS);
		for (b = 0; b < a; b++)
			if (c->gpu_ids[b] == c->gpu_ids[a])
				return pipette_fail(err, "cluster: GPU index %d given twice "
						    "(slots %d and %d)", c->gpu_ids[a], b, a);
	}
	return 0;
}

/* The node names (distinct) and each node's place in the cache.  O(n^2)
 * strcmp is ~0.5M compares at 1024 nodes. */
static int set_names(struct pipette_cluster *c, const char *const *nodes, struct build *b,
		     struct pipette_err *err)
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
			return out_of_memory(c, err);
		b->idx[i] = b->bw ? pipette_bwcache_node_index(b->bw, nodes[i]) : -1;
		if (b->bw && b->idx[i] < 0) {
			if (!b->allow_missing)
				return pipette_fail(err, "cluster: node '%.64s' is not in the "
						    "bandwidth cache (measure it, or allow "
						    "missing nodes to use defaults)", nodes[i]);
			b->missing++;
		}
	}
	return 0;
}

/* A GPU index outside a node's measured intra matrix: an error, or with
 * allow_missing a warning (its pairs then take the defaults). */
static int check_intra_indices(struct pipette_cluster *c, const struct build *b,
			       struct pipette_err *err)
{
	int i, a;

	for (i = 0; b->bw && i < c->n; i++) {
		const struct bw_node *nd;

		if (b->idx[i] < 0 || !b->bw->node[b->idx[i]].ngpus)
			continue;
		nd = &b->bw->node[b->idx[i]];
		for (a = 0; a < c->g; a++) {
			if (c->gpu_ids[a] < nd->ngpus)
				continue;
			if (!b->allow_missing)
				return pipette_fail(err, "cluster: node %.64s: GPU index %d is "
						    "outside its measured %dx%d intra matrix",
						    nd->name, c->gpu_ids[a], nd->ngpus, nd->ngpus);
			if (warn(c, "node %s: GPU index %d is outside its measured %dx%d "
				 "intra matrix: using defaults", nd->name, c->gpu_ids[a],
				 nd->ngpus, nd->ngpus) < 0)
				return out_of_memory(c, err);
		}
	}
	return 0;
}

static void fill_inter(struct pipette_cluster *c, struct build *b)
{
	int i, j;

	for (i = 0; i < c->n; i++)
		for (j = 0; j < c->n; j++) {
			struct pipette_link *l = &c->inter[(size_t)i * c->n + j];
			const struct bw_entry *e = NULL;

			if (i == j) {
				l->gbps = INFINITY;
				l->lat_us = 0;
				continue;
			}
			if (b->idx[i] >= 0 && b->idx[j] >= 0)
				e = BW_INTER(b->bw, b->idx[i], b->idx[j]);
			fill(l, e, b->def.inter_gbps, b->def.inter_lat_us, b->nic_gbps,
			     b->gpu->nic_lat_us, &b->un_inter);
		}
}

static void fill_intra(struct pipette_cluster *c, struct build *b)
{
	int i, a, g = c->g;

	for (i = 0; i < c->n; i++) {
		const struct bw_node *nd = b->idx[i] >= 0 ? &b->bw->node[b->idx[i]] : NULL;

		for (a = 0; a < g; a++) {
			int k;

			for (k = 0; k < g; k++) {
				struct pipette_link *l = &c->intra[((size_t)i * g + a) * g + k];
				const struct bw_entry *e = NULL;
				int ia = c->gpu_ids[a], ib = c->gpu_ids[k];

				if (a == k) {
					l->gbps = INFINITY;
					l->lat_us = 0;
					continue;
				}
				b->pairs_intra++;
				if (nd && ia < nd->ngpus && ib < nd->ngpus)
					e = &nd->intra[ia * nd->ngpus + ib];
				fill(l, e, b->def.intra_gbps, b->def.intra_lat_us,
				     b->nvlink_gbps, b->gpu->nvlink_lat_us, &b->un_intra);
			}
		}
	}
}

/* The warnings of a cache that does not cover the cluster: nodes missing
 * from it, unmeasured links and GPU pairs. */
static int warn_coverage(struct pipette_cluster *c, const char *const *nodes,
			 const struct build *b)
{
	char src[160];

	if (!b->bw)
		return 0;
	if (b->missing) {
		int shown = 0, i;
		char list[256];
		size_t len = 0;

		list[0] = '\0';
		for (i = 0; i < c->n && shown < 8; i++)
			if (b->idx[i] < 0) {
				len += (size_t)snprintf(list + len, len < sizeof(list) ?
							sizeof(list) - len : 0,
							"%s%s", shown ? ", " : "", nodes[i]);
				shown++;
			}
		if (warn(c, "%d of %d nodes are not in the bandwidth cache (%s%s): "
			 "using defaults for their links", b->missing, c->n, list,
			 b->missing > shown ? ", ..." : "") < 0)
			return -1;
	}
	if (b->un_inter &&
	    warn(c, "%d of %d inter-node links are unmeasured: using %s", b->un_inter,
		 c->n * (c->n - 1), source_of(b->def.inter_gbps, b->gpu, src, sizeof(src),
					      b->nic_gbps)) < 0)
		return -1;
	if (b->un_intra &&
	    warn(c, "%d of %d intra-node GPU pairs are unmeasured: using %s", b->un_intra,
		 b->pairs_intra, source_of(b->def.intra_gbps, b->gpu, src, sizeof(src),
					   b->nvlink_gbps)) < 0)
		return -1;
	return 0;
}

/* Stamps unique in the process, so that a cluster freed and another
 * created at its address never share one. */
static unsigned long next_stamp(void)
{
	static unsigned long stamp;

	return __atomic_add_fetch(&stamp, 1, __ATOMIC_RELAXED);
}

/* The cluster's arrays, uninitialised; NULL when out of memory. */
static struct pipette_cluster *cluster_alloc(int n, int g, const struct pipette_gpu_spec *gpu)
{
	struct pipette_cluster *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->n = n;
	c->g = g;
	c->gpu = gpu;
	c->version = next_stamp();
	c->names = calloc((size_t)n, sizeof(char *));
	c->gpu_ids = malloc((size_t)g * sizeof(int));
	c->inter = malloc((size_t)n * (size_t)n * sizeof(*c->inter));
	c->intra = malloc((size_t)n * (size_t)g * (size_t)g * sizeof(*c->intra));
	c->warnings = calloc(1, 1);
	c->wcap = 1;
	if (!c->names || !c->gpu_ids || !c->inter || !c->intra || !c->warnings) {
		pipette_cluster_destroy(c);
		return NULL;
	}
	return c;
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
	struct build b = {
		.bw = bw,
		.gpu = gpu,
		.def = { NAN, NAN, NAN, NAN },
		.allow_missing = allow_missing,
		.nic_gbps = gpu ? gpu->nic_gbps * gpu->nic_eff : 0,
		.nvlink_gbps = gpu ? gpu->nvlink_gbps * gpu->nvlink_eff : 0,
	};
	int n = n_nodes, g = gpus_per_node;

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
	c = cluster_alloc(n, g, gpu);
	b.idx = malloc((size_t)n * sizeof(int));
	if (!c || !b.idx) {
		pipette_fail(err, "cluster: out of memory for %d nodes x %d GPUs", n, g);
		goto fail;
	}
	if (set_gpu_ids(c, gpu_ids, err) || set_names(c, nodes, &b, err))
		goto fail;
	if (bw)
		b.def = bw->def;
	if (check_intra_indices(c, &b, err))
		goto fail;
	fill_inter(c, &b);
	fill_intra(c, &b);
	if (warn_coverage(c, nodes, &b) < 0) {
		out_of_memory(c, err);
		goto fail;
	}
	free(b.idx);
	return c;
fail:
	free(b.idx);
	pipette_cluster_destroy(c);
	return NULL;
}

struct pipette_cluster *pipette_cluster_create_blank(int n, int g,
						     const struct pipette_gpu_spec *gpu,
						     struct pipette_link l, struct pipette_err *err)
{
	struct pipette_cluster *c;
	size_t i;
	int k;

	if (n < 1 || n > PIPETTE_MAX_NODES || g < 1 || g > PIPETTE_MAX_GPUS ||
	    check_spec(gpu, err) < 0) {
		pipette_fail(err, "cluster: %d nodes x %d GPUs, expected 1..%d x 1..%d", n, g,
			     PIPETTE_MAX_NODES, PIPETTE_MAX_GPUS);
		return NULL;
	}
	if (!(c = cluster_alloc(n, g, gpu)) || set_gpu_ids(c, NULL, err)) {
		pipette_cluster_destroy(c);
		pipette_fail(err, "cluster: out of memory for %d nodes x %d GPUs", n, g);
		return NULL;
	}
	for (k = 0; k < n; k++) {
		char name[24];

		snprintf(name, sizeof(name), "position%d", k);
		if (!(c->names[k] = strdup(name))) {
			pipette_cluster_destroy(c);
			pipette_fail(err, "cluster: out of memory");
			return NULL;
		}
	}
	free(c->inter);		/* every node link is `l` until one is set */
	c->inter = NULL;
	c->uniform = l;
	for (i = 0; i < (size_t)n * (size_t)g * (size_t)g; i++)
		c->intra[i] = (i % ((size_t)g * g)) % ((size_t)g + 1) ? l
			      : (struct pipette_link){ INFINITY, 0 };
	return c;
}

int pipette_cluster_set_node_link(struct pipette_cluster *c, int a, int b,
				  struct pipette_link l)
{
	size_t i;

	if (a == b || a < 0 || b < 0 || a >= c->n || b >= c->n)
		return 0;
	if (!c->inter) {
		c->inter = malloc((size_t)c->n * (size_t)c->n * sizeof(*c->inter));
		if (!c->inter)
			return -1;
		for (i = 0; i < (size_t)c->n * (size_t)c->n; i++)
			c->inter[i] = i % ((size_t)c->n + 1) ? c->uniform
				      : (struct pipette_link){ INFINITY, 0 };
	}
	c->inter[(size_t)a * c->n + b] = l;
	c->version = next_stamp();
	return 0;
}

void pipette_cluster_set_intra_link(struct pipette_cluster *c, int node, int slot_a,
				    int slot_b, struct pipette_link l)
{
	if (slot_a != slot_b && node >= 0 && node < c->n && slot_a >= 0 && slot_b >= 0 &&
	    slot_a < c->g && slot_b < c->g) {
		c->intra[((size_t)node * c->g + slot_a) * c->g + slot_b] = l;
		c->version = next_stamp();
	}
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
	return c->inter ? c->inter[(size_t)na * c->n + nb] : c->uniform;
}

struct pipette_link pipette_cluster_node_link(const struct pipette_cluster *c,
					      int node_a, int node_b)
{
	if (!c->inter)
		return node_a == node_b ? (struct pipette_link){ INFINITY, 0 } : c->uniform;
	return c->inter[(size_t)node_a * c->n + node_b];
}

unsigned long pipette_cluster_version(const struct pipette_cluster *c)
{
	return c->version;
}

const char *pipette_cluster_warnings(const struct pipette_cluster *c)
{
	return c->warnings;
}
