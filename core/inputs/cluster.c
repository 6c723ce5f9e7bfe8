/* pipette: the cluster: nodes, GPUs and resolved links (see cluster.h). */
#include "inputs/cluster.h"

#include "inputs/topology.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/bwcache_int.h"

/* The link of a GPU or node with itself. */
static const struct pipette_link self = { INFINITY, 0 };

/* Links as indices into a table of the distinct links, exact to the bit.
 * A cluster's figures repeat: a cache's figures have a few significant
 * digits (measured: bench_cache's 4096-node cache, 0.01 GB/s steps, has
 * 2551 distinct figures in 16.7 million), defaults and nominal figures are
 * one value each.
 * So a link costs 2 bytes while there are at most 65536 distinct ones
 * (268 MB of 16-byte links at 4096 nodes become 34 MB), 4 bytes beyond,
 * and the links themselves (16 bytes) once the table would cost more. */
struct lstore {
	size_t cells;
	uint16_t *i16;
	uint32_t *i32;
	struct pipette_link *dense;
	struct pipette_link *tab;
	uint32_t n_tab, cap_tab;
	uint32_t *slot;		/* hash of tab: index + 1, 0 = empty */
	uint32_t n_slot;
};

static void ls_free(struct lstore *s)
{
	free(s->i16);
	free(s->i32);
	free(s->dense);
	free(s->tab);
	free(s->slot);
	memset(s, 0, sizeof(*s));
}

static inline struct pipette_link ls_get(const struct lstore *s, size_t i)
{
	if (s->i16)
		return s->tab[s->i16[i]];
	if (s->i32)
		return s->tab[s->i32[i]];
	return s->dense[i];
}

/* The table's hash: splitmix64's finaliser (Steele et al., "Fast
 * splittable pseudorandom number generators", OOPSLA 2014) over both
 * words.  A cache's figures are short decimals whose doubles share their
 * high bits, and the latencies are a handful of values: a single
 * multiply's middle bits left long probe runs (10 slots a lookup on the
 * generated 2048-node cache of tests/bench/bench_plan.c, 200 instructions
 * a link; callgrind), the finaliser about one. */
static uint32_t link_hash(const struct pipette_link *l)
{
	uint64_t w[2], x;

	memcpy(w, l, sizeof(w));
	x = w[0] ^ (w[1] * 0x9E3779B97F4A7C15ULL);
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return (uint32_t)(x ^ (x >> 31));
}

/* Bit for bit, as memcmp would, without its call. */
static inline int link_same(const struct pipette_link *a, const struct pipette_link *b)
{
	uint64_t x[2], y[2];

	memcpy(x, a, sizeof(x));
	memcpy(y, b, sizeof(y));
	return x[0] == y[0] && x[1] == y[1];
}

static int ls_rehash(struct lstore *s, uint32_t n_slot)
{
	uint32_t *slot = calloc(n_slot, sizeof(uint32_t)), i, h;

	if (!slot)
		return -1;
	for (i = 0; i < s->n_tab; i++) {
		for (h = link_hash(&s->tab[i]) & (n_slot - 1); slot[h]; h = (h + 1) & (n_slot - 1))
			;
		slot[h] = i + 1;
	}
	free(s->slot);
	s->slot = slot;
	s->n_slot = n_slot;
	return 0;
}

/* The links themselves from now on. */
static int ls_go_dense(struct lstore *s)
{
	struct pipette_link *d = malloc(s->cells * sizeof(*d));
	size_t i;

	if (!d)
		return -1;
	for (i = 0; i < s->cells; i++)
		d[i] = ls_get(s, i);
	free(s->i16);
	free(s->i32);
	free(s->tab);
	free(s->slot);
	s->i16 = NULL;
	s->i32 = NULL;
	s->tab = NULL;
	s->slot = NULL;
	s->n_tab = s->cap_tab = s->n_slot = 0;
	s->dense = d;
	return 0;
}

/* 2-byte indices become 4-byte ones. */
static int ls_widen(struct lstore *s)
{
	uint32_t *w = malloc(s->cells * sizeof(uint32_t));
	size_t i;

	if (!w)
		return -1;
	for (i = 0; i < s->cells; i++)
		w[i] = s->i16[i];
	free(s->i16);
	s->i16 = NULL;
	s->i32 = w;
	return 0;
}

/* The index of l in the table, added when new; -1 when out of memory,
 * -2 when the table should give way to the links themselves. */
static long ls_intern(struct lstore *s, const struct pipette_link *l)
{
	uint32_t h;

	for (h = link_hash(l) & (s->n_slot - 1); s->slot[h]; h = (h + 1) & (s->n_slot - 1))
		if (link_same(&s->tab[s->slot[h] - 1], l))
			return s->slot[h] - 1;
	/* a table entry with its hash slots takes 24 bytes, an index 4: past
	 * one distinct link in two, 16-byte links are smaller */
	if ((size_t)s->n_tab * 2 >= s->cells)
		return -2;
	if (s->n_tab == s->cap_tab) {
		uint32_t cap = 2 * s->cap_tab;
		struct pipette_link *t = realloc(s->tab, cap * sizeof(*t));

		if (!t)
			return -1;
		s->tab = t;
		s->cap_tab = cap;
	}
	s->tab[s->n_tab] = *l;
	s->slot[h] = ++s->n_tab;
	if (2 * s->n_tab > s->n_slot && ls_rehash(s, 2 * s->n_slot) < 0)
		return -1;
	return s->n_tab - 1;
}

static int ls_set(struct lstore *s, size_t i, struct pipette_link l)
{
	long k;

	if (s->dense) {
		s->dense[i] = l;
		return 0;
	}
	k = ls_intern(s, &l);
	if (k == -2)
		return ls_go_dense(s) < 0 ? -1 : ls_set(s, i, l);
	if (k < 0)
		return -1;
	if (s->i16 && k > UINT16_MAX && ls_widen(s) < 0)
		return -1;
	if (s->i16)
		s->i16[i] = (uint16_t)k;
	else
		s->i32[i] = (uint32_t)k;
	return 0;
}

/* `cells` links, all `fill`; -1 when out of memory. */
static int ls_init(struct lstore *s, size_t cells, struct pipette_link fill)
{
	memset(s, 0, sizeof(*s));
	s->cells = cells;
	s->i16 = calloc(cells ? cells : 1, sizeof(uint16_t));
	s->tab = malloc(16 * sizeof(*s->tab));
	s->cap_tab = 16;
	if (!s->i16 || !s->tab) {
		ls_free(s);
		return -1;
	}
	s->tab[0] = fill;
	s->n_tab = 1;
	if (ls_rehash(s, 32) < 0) {
		ls_free(s);
		return -1;
	}
	return 0;
}

struct pipette_cluster {
	int n, g;
	int g_shift;			/* g = 1 << g_shift, or -1 */
	char **names;
	int *gpu_ids;			/* g */
	struct lstore inter;		/* n x n, node level; cells 0: all `uniform` */
	struct pipette_link uniform;
	/* n x g x g, by slot, in the same store (a node's 64 links in 128
	 * bytes, not 1 KiB: the mapping's estimates read a few links of
	 * each node they place, nodes in random order; the link reads of
	 * the 2048-node plan of tests/bench/bench_plan.c missed a 2 MiB
	 * cache 1.96 M times, now 0.36 M: callgrind's cache simulation) */
	struct lstore intra;
	const struct pipette_gpu_spec *gpu;
	char *warnings;
	size_t wlen, wcap;
	unsigned long version;		/* a fresh stamp at creation and every set */
	int domain_nodes;		/* nodes per NVLink domain (cluster.h) */
	int *dom;			/* n: each node's domain; NULL: runs of domain_nodes */
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
	free(c->dom);
	ls_free(&c->inter);
	ls_free(&c->intra);
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
static struct pipette_link fill(const struct bw_entry *e, double def_gbps, double def_lat,
				double nom_gbps, double nom_lat, int *unmeasured)
{
	struct pipette_link l;

	if (!isnan(e->gbps)) {
		l.gbps = e->gbps;
	} else {
		l.gbps = !isnan(def_gbps) ? def_gbps : nom_gbps;
		(*unmeasured)++;
	}
	if (!isnan(e->gbps) && !isnan(e->lat))
		l.lat_us = e->lat;
	else
		l.lat_us = !isnan(def_lat) ? def_lat : nom_lat;
	return l;
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
/* FNV-1a over a node's name (Fowler, Noll and Vo; the 64-bit offset
 * basis and prime of draft-eastlake-fnv). */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* Each node's name, none twice (a hash of the names seen: a comparison
 * with every earlier name cost 8 million strcmp calls at 4096 nodes), and
 * its index in the cache. */
static int set_names(struct pipette_cluster *c, const char *const *nodes, struct build *b,
		     struct pipette_err *err)
{
	uint32_t n_slot = 2, h;
	int *slot, i, rv = 0;

	while (n_slot < 2u * (uint32_t)c->n)
		n_slot *= 2;
	if (!(slot = malloc(n_slot * sizeof(int))))
		return out_of_memory(c, err);
	for (h = 0; h < n_slot; h++)
		slot[h] = -1;
	for (i = 0; i < c->n && !rv; i++) {
		if (!nodes[i] || !*nodes[i]) {
			rv = pipette_fail(err, "cluster: node %d has no name", i);
			break;
		}
		for (h = (uint32_t)name_hash(nodes[i]) & (n_slot - 1); slot[h] >= 0;
		     h = (h + 1) & (n_slot - 1))
			if (!strcmp(nodes[i], nodes[slot[h]]))
				break;
		if (slot[h] >= 0) {
			rv = pipette_fail(err, "cluster: node '%.64s' given twice (positions %d "
					  "and %d)", nodes[i], slot[h], i);
			break;
		}
		slot[h] = i;
		c->names[i] = strdup(nodes[i]);
		if (!c->names[i]) {
			rv = out_of_memory(c, err);
			break;
		}
		b->idx[i] = b->bw ? pipette_bwcache_node_index(b->bw, nodes[i]) : -1;
		if (b->bw && b->idx[i] < 0) {
			if (!b->allow_missing)
				rv = pipette_fail(err, "cluster: node '%.64s' is not in the "
						  "bandwidth cache (measure it, or allow "
						  "missing nodes to use defaults)", nodes[i]);
			b->missing++;
		}
	}
	free(slot);
	return rv;
}

/* A GPU index outside a node's measured intra matrix: an error, or with
 * allow_missing a warning (its pairs then take the defaults). */
static int check_intra_indices(struct pipette_cluster *c, const struct build *b,
			       struct pipette_err *err)
{
	int i, a;

	for (i = 0; b->bw && i < c->n; i++) {
		const struct bw_node *nd;

		if (b->idx[i] < 0 || !b->bw->node[b->idx[i]].intra.n)
			continue;
		nd = &b->bw->node[b->idx[i]];
		for (a = 0; a < c->g; a++) {
			if (c->gpu_ids[a] < nd->intra.n)
				continue;
			if (!b->allow_missing)
				return pipette_fail(err, "cluster: node %.64s: GPU index %d is "
						    "outside its measured %dx%d intra matrix",
						    nd->name, c->gpu_ids[a], nd->intra.n,
						    nd->intra.n);
			if (warn(c, "node %s: GPU index %d is outside its measured %dx%d "
				 "intra matrix: using defaults", nd->name, c->gpu_ids[a],
				 nd->intra.n, nd->intra.n) < 0)
				return out_of_memory(c, err);
		}
	}
	return 0;
}

/* The links fill_inter resolved, by what the cache gave: a figure's code
 * and latency, or "unmeasured", and whether the two nodes share an NVLink
 * domain; fill's result and the link's place in the store depend on
 * nothing else.  A cache has a few thousand distinct figures (lstore
 * above), so INTER_MEMO direct-mapped entries resolve nearly every node
 * pair without the fallback chain and the store's hash.  Where the
 * cache's pairs are a dense matrix of their own figures (a file's matrix,
 * a generated cache; bwcache_int.h) the codes are read from its rows as
 * they are, without decoding them; else from bw_inter_get's entry (whose
 * exact figures have no code: resolved one by one).  On the generated
 * 1024-node cache of tests/bench/bench_plan.c the cluster's build went
 * from 392 instructions a node pair to 184 with the memo and the table's
 * hash above, and to 61 with the rows read directly (55 at 4096 nodes,
 * where it was 1.0 s of the plan's CPU and is 0.12 s; callgrind, perf). */
#define INTER_MEMO_BITS 12
struct inter_memo {
	uint64_t key;		/* code << 32 | the latency's float bits; code
				 * BW_NONE: unmeasured (latency 0) */
	int tag;		/* 1 + same domain; 0: empty */
	uint32_t k;		/* the link's index in the store's table */
	struct pipette_link l;
};

static inline uint64_t inter_key64(uint32_t code, uint32_t lat)
{
	return (uint64_t)code << 32 | lat;
}

/* Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4) of the memo's key. */
static inline uint32_t inter_slot(uint64_t key, int dom)
{
	return (uint32_t)(((key ^ (uint64_t)dom << 31) * 0x9E3779B97F4A7C15ULL) >>
			  (64 - INTER_MEMO_BITS));
}

/* Node pair i -> j's link set from the memo when it holds it; 1 when it
 * did, 0 when the caller must resolve it. */
static int inter_from_memo(struct lstore *s, size_t cell, const struct inter_memo *m,
			   uint64_t key, int dom)
{
	if (m->tag != 1 + dom || m->key != key)
		return 0;
	if (s->i16 && m->k <= UINT16_MAX)
		s->i16[cell] = (uint16_t)m->k;
	else if (s->i32)
		s->i32[cell] = m->k;
	else if (s->dense)
		s->dense[cell] = m->l;
	else
		return 0;
	return 1;
}

/* The cache's matrix when every pair's figure is its own there: dense and
 * without node groups (whose figures would stand for the pairs'). */
static const struct bw_mat *own_matrix(const struct build *b)
{
	return b->bw && b->bw->inter.dense && !b->bw->inter.n_groups ? &b->bw->inter.mat : NULL;
}

/* The memo's key of cache pair (ci, cj) (-1: a node the cache lacks): 1
 * with *code and *lat set, or 0 when the pair has none (an exact figure
 * read through bw_inter_get); *e is the pair's entry when *have_e. */
static int inter_key(const struct build *b, const struct bw_mat *own, int ci, int cj,
		     uint32_t *code, uint32_t *lat, struct bw_entry *e, int *have_e)
{
	*lat = 0;
	*have_e = 0;
	if (own) {
		size_t at = (size_t)ci * own->cap + cj;

		*code = ci >= 0 && cj >= 0 ? own->code[at] : BW_NONE;
		if (*code != BW_NONE) {
			float l = own->lat ? own->lat[at] : own->lat0;

			memcpy(lat, &l, sizeof(*lat));
		}
		return 1;
	}
	if (ci >= 0 && cj >= 0)
		bw_inter_get(b->bw, ci, cj, e);
	*have_e = 1;
	if (isnan(e->gbps)) {		/* fill ignores the latency */
		*code = BW_NONE;
		return 1;
	}
	*code = e->code;
	memcpy(lat, &e->lat, sizeof(*lat));
	return e->code != BW_NONE;
}

/* Pair i -> j resolved through the fallback chain and stored (e: its
 * entry when have_e), and remembered under its key when keyed; -1 when
 * out of memory. */
static int inter_resolve(struct pipette_cluster *c, struct build *b, struct inter_memo *memo,
			 int i, int j, int dom, int keyed, uint32_t code, uint32_t lat,
			 struct bw_entry *e, int have_e)
{
	size_t cell = (size_t)i * c->n + j;
	struct inter_memo *m;

	if (!have_e && b->idx[i] >= 0 && b->idx[j] >= 0)
		bw_inter_get(b->bw, b->idx[i], b->idx[j], e);
	if (ls_set(&c->inter, cell,
		   dom ? fill(e, b->def.intra_gbps, b->def.intra_lat_us, b->nvlink_gbps,
			      b->gpu->nvlink_lat_us, &b->un_inter)
		       : fill(e, b->def.inter_gbps, b->def.inter_lat_us, b->nic_gbps,
			      b->gpu->nic_lat_us, &b->un_inter)) < 0)
		return -1;
	if (!keyed)
		return 0;
	m = &memo[inter_slot(inter_key64(code, lat), dom)];
	m->tag = 1 + dom;
	m->key = inter_key64(code, lat);
	m->k = c->inter.i16 ? c->inter.i16[cell] : c->inter.i32 ? c->inter.i32[cell] : 0;
	m->l = ls_get(&c->inter, cell);
	return 0;
}

/* Row i of the node links from the cache's own matrix while the store
 * keeps 2-byte indices: the hot loop of a large cluster's build, so
 * each pair is a read of its code and latency and a probe of the memo;
 * the rest falls to inter_resolve.  Where every node is its own NVLink
 * domain and the matrix has one latency (a generated or a probed cache),
 * a pair's link is a function of its code alone: CODE_MEMO direct-mapped
 * entries give its index first (the cluster's build on the 2048-node
 * cache of tests/bench/bench_plan.c took 270 M instructions before, 162 M
 * with them; callgrind). */
#define CODE_MEMO_BITS 12
struct code_memo {
	uint32_t code;		/* BW_NONE: empty */
	uint16_t k;
};

static int fill_row_own(struct pipette_cluster *c, struct build *b, const struct bw_mat *own,
			struct inter_memo *memo, struct code_memo *cm, const int *dm, int i)
{
	int ci = b->idx[i], di = dm[i], n = c->n, j;
	const uint32_t *crow = ci >= 0 ? own->code + (size_t)ci * own->cap : NULL;
	const float *lrow = ci >= 0 && own->lat ? own->lat + (size_t)ci * own->cap : NULL;
	const int *idx = b->idx;
	uint16_t *out = c->inter.i16 + (size_t)i * n;	/* NULL once widened */
	uint32_t lat0, lat;
	long un = 0;

	memcpy(&lat0, &own->lat0, sizeof(lat0));
	for (j = 0; j < n; j++) {
		int cj = idx[j], dom;
		uint32_t code = crow && cj >= 0 ? crow[cj] : BW_NONE;
		uint64_t key;
		const struct inter_memo *m;
		struct code_memo *q = NULL;

		if (j == i)
			continue;	/* the store's fill: INFINITY, 0 */
		if (cm && code != BW_NONE) {
			q = &cm[(code * 0x9E3779B1u) >> (32 - CODE_MEMO_BITS)];
			if (q->code == code && out) {
				out[j] = q->k;
				continue;
			}
		}
		dom = di == dm[j];
		lat = code == BW_NONE ? 0 : lat0;
		if (code != BW_NONE && lrow)
			memcpy(&lat, &lrow[cj], sizeof(lat));
		key = inter_key64(code, lat);
		m = &memo[inter_slot(key, dom)];
		/* an entry made while the store had 2-byte indices has one */
		if (out && m->tag == 1 + dom && m->key == key) {
			out[j] = (uint16_t)m->k;
			un += code == BW_NONE;
		} else {
			struct bw_entry e = { NAN, NAN, -1, BW_NONE };

			if (inter_resolve(c, b, memo, i, j, dom, 1, code, lat, &e, 0) < 0)
				return -1;
			out = c->inter.i16 ? c->inter.i16 + (size_t)i * n : NULL;
			if (!out)
				continue;
		}
		if (q) {
			q->code = code;
			q->k = out[j];
		}
	}
	b->un_inter += (int)un;
	return 0;
}

static int fill_inter(struct pipette_cluster *c, struct build *b)
{
	const struct bw_mat *own = own_matrix(b);
	struct inter_memo *memo = calloc((size_t)1 << INTER_MEMO_BITS, sizeof(*memo));
	int *dm = malloc((size_t)c->n * sizeof(int)), i, j, rv = 0;	/* each node's domain */
	/* a pair's link depends on its code alone: no shared domains, one
	 * latency */
	struct code_memo *cm = own && !own->lat && !c->dom && c->domain_nodes == 1
			       ? malloc(((size_t)1 << CODE_MEMO_BITS) * sizeof(*cm)) : NULL;

	if (!memo || !dm) {
		free(memo);
		free(dm);
		free(cm);
		return -1;
	}
	for (i = 0; cm && i < 1 << CODE_MEMO_BITS; i++)
		cm[i].code = BW_NONE;
	for (i = 0; i < c->n; i++)
		dm[i] = c->dom ? c->dom[i] : i / c->domain_nodes;	/* same_domain's test */
	for (i = 0; i < c->n && !rv; i++) {
		if (own && c->inter.i16) {
			rv = fill_row_own(c, b, own, memo, cm, dm, i);
			continue;
		}
		for (j = 0; j < c->n && !rv; j++) {
			struct bw_entry e = { NAN, NAN, -1, BW_NONE };
			uint32_t code, lat;
			int dom = dm[i] == dm[j], have_e, keyed;

			if (i == j)
				continue;	/* the store's fill: INFINITY, 0 */
			keyed = inter_key(b, own, b->idx[i], b->idx[j], &code, &lat, &e, &have_e);
			if (keyed && inter_from_memo(&c->inter, (size_t)i * c->n + j,
						     &memo[inter_slot(inter_key64(code, lat), dom)],
						     inter_key64(code, lat), dom)) {
				b->un_inter += code == BW_NONE;
				continue;
			}
			rv = inter_resolve(c, b, memo, i, j, dom, keyed, code, lat, &e, have_e);
		}
	}
	free(memo);
	free(dm);
	free(cm);
	return rv;
}

static int fill_intra(struct pipette_cluster *c, struct build *b)
{
	struct bw_entry none = { NAN, NAN, -1, BW_NONE };
	int i, a, k, g = c->g;

	for (i = 0; i < c->n; i++) {
		const struct bw_node *nd = b->idx[i] >= 0 ? &b->bw->node[b->idx[i]] : NULL;

		for (a = 0; a < g; a++)
			for (k = 0; k < g; k++) {
				struct bw_entry e = none;
				int ia = c->gpu_ids[a], ib = c->gpu_ids[k];

				if (a == k)
					continue;	/* the store's fill: `self` */
				b->pairs_intra++;
				if (nd && ia < nd->intra.n && ib < nd->intra.n)
					bw_intra_get(nd, ia, ib, &e);
				if (ls_set(&c->intra, ((size_t)i * g + a) * g + k,
					   fill(&e, b->def.intra_gbps, b->def.intra_lat_us,
						b->nvlink_gbps, b->gpu->nvlink_lat_us,
						&b->un_intra)) < 0)
					return -1;
			}
	}
	return 0;
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

/* The cluster's arrays, every link `self`; NULL when out of memory. */
static struct pipette_cluster *cluster_alloc(int n, int g, const struct pipette_gpu_spec *gpu)
{
	struct pipette_cluster *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->n = n;
	c->g = g;
	for (c->g_shift = 0; (1 << c->g_shift) < g; c->g_shift++)
		;
	if (1 << c->g_shift != g)
		c->g_shift = -1;
	c->gpu = gpu;
	c->domain_nodes = 1;
	c->version = next_stamp();
	c->names = calloc((size_t)n, sizeof(char *));
	c->gpu_ids = malloc((size_t)g * sizeof(int));
	c->warnings = calloc(1, 1);
	c->wcap = 1;
	if (!c->names || !c->gpu_ids || !c->warnings ||
	    ls_init(&c->inter, (size_t)n * (size_t)n, self) < 0 ||
	    ls_init(&c->intra, (size_t)n * (size_t)g * (size_t)g, self) < 0) {
		pipette_cluster_destroy(c);
		return NULL;
	}
	return c;
}

static int gcd(int a, int b)
{
	while (b) {
		int t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Where each node's NVLink domain comes from: Slurm's topology block
 * (tb, -1: none) and the cache's domain (cd, -1: none). */
struct domsrc {
	const struct pipette_topology *topo;
	const struct pipette_bwcache *bw;
	int *tb, *cd;
	int n_blocks, n_domains;
};

/* The two sources must put the same nodes together where both speak. */
static int domains_agree(const struct pipette_cluster *c, const struct domsrc *d,
			 struct pipette_err *err)
{
	int *b_of_d = malloc(((size_t)d->n_domains + 1) * sizeof(int));
	int *d_of_b = malloc(((size_t)d->n_blocks + 1) * sizeof(int));
	int i, rv = 0;

	if (!b_of_d || !d_of_b) {
		rv = out_of_memory(c, err);
		goto out;
	}
	for (i = 0; i < d->n_domains; i++)
		b_of_d[i] = -1;
	for (i = 0; i < d->n_blocks; i++)
		d_of_b[i] = -1;
	for (i = 0; i < c->n && !rv; i++) {
		int tb = d->tb[i], cd = d->cd[i];

		if (tb < 0 || cd < 0)
			continue;
		if ((b_of_d[cd] >= 0 && b_of_d[cd] != tb) || (d_of_b[tb] >= 0 && d_of_b[tb] != cd))
			rv = pipette_fail(err, "cluster: node %.64s is in block '%.64s' of %s and "
					  "in NVLink domain '%.64s' of the bandwidth cache ($.domains), "
					  "which %s", c->names[i],
					  pipette_topology_block_name(d->topo, tb),
					  pipette_topology_source(d->topo),
					  pipette_bwcache_domain_name(d->bw, cd),
					  b_of_d[cd] >= 0 && b_of_d[cd] != tb
					  ? "also holds nodes of another block"
					  : "disagree: the block holds nodes of another domain");
		b_of_d[cd] = tb;
		d_of_b[tb] = cd;
	}
out:
	free(b_of_d);
	free(d_of_b);
	return rv;
}

/* A domain of `gpus` GPUs (stated: the whole domain) against the GPU
 * type's (or --nvlink-domain's) D: a stated size must be D, one counted
 * from its nodes (those a probe saw, or a Slurm block's, which may leave
 * out trays out of service) at most D. */
static int domain_size_ok(const struct pipette_cluster *c, const char *what, const char *name,
			  long gpus, int stated, struct pipette_err *err)
{
	int D = c->gpu->nvlink_domain_gpus > c->g ? c->gpu->nvlink_domain_gpus : c->g;

	if (stated ? gpus == D : gpus <= D)
		return 0;
	return pipette_fail(err, "cluster: NVLink domain '%.64s' (%s) has %ld GPUs, but an "
			    "NVLink domain of %s has %s%d (the GPU type's system, or "
			    "--nvlink-domain)", name, what, gpus,
			    c->gpu->name ? c->gpu->name : "the GPU type",
			    stated ? "" : "at most ", D);
}

/* Each node's domain: its topology block, else its cache domain, else
 * its own; nodes per domain = the gcd of the domains' nodes here. */
static int assign_domains(struct pipette_cluster *c, const struct domsrc *d,
			  struct pipette_err *err)
{
	int *count = calloc((size_t)(d->n_blocks + d->n_domains + c->n) + 1, sizeof(int));
	int i, k, g = 0;

	c->dom = malloc((size_t)c->n * sizeof(int));
	if (!count || !c->dom) {
		free(count);
		return out_of_memory(c, err);
	}
	for (i = 0; i < c->n; i++) {
		c->dom[i] = d->tb[i] >= 0 ? d->tb[i]
			    : d->cd[i] >= 0 ? d->n_blocks + d->cd[i]
					    : d->n_blocks + d->n_domains + i;
		count[c->dom[i]]++;
	}
	for (k = 0; k < d->n_blocks + d->n_domains + c->n; k++) {
		int bad = 0;

		if (!count[k])
			continue;
		g = gcd(g, count[k]);
		if (k < d->n_blocks)
			bad = domain_size_ok(c, pipette_topology_source(d->topo),
					     pipette_topology_block_name(d->topo, k),
					     (long)pipette_topology_block_nodes(d->topo, k) * c->g,
					     0, err);
		else if (k < d->n_blocks + d->n_domains) {
			int dd = k - d->n_blocks, st = pipette_bwcache_domain_gpus(d->bw, dd);

			bad = domain_size_ok(c, "the bandwidth cache's $.domains",
					     pipette_bwcache_domain_name(d->bw, dd),
					     st ? st : (long)pipette_bwcache_domain_nodes(d->bw, dd) *
						       c->g, st > 0, err);
		}
		if (bad) {
			free(count);
			return -1;
		}
	}
	free(count);
	c->domain_nodes = g > 0 ? g : 1;
	return 0;
}

/* NVLink domains from Slurm's topology blocks and the cache's domains
 * (pipette-bw/3), when either names any; else the GPU type's runs stand. */
static int set_domains(struct pipette_cluster *c, const struct build *b,
		       const struct pipette_topology *topo, struct pipette_err *err)
{
	struct domsrc d = { topo, b->bw, NULL, NULL,
			    topo ? pipette_topology_block_count(topo) : 0,
			    b->bw ? pipette_bwcache_domain_count(b->bw) : 0 };
	int i, any = 0, rv;

	if (!d.n_blocks && !d.n_domains)
		return 0;
	d.tb = malloc((size_t)c->n * sizeof(int));
	d.cd = malloc((size_t)c->n * sizeof(int));
	if (!d.tb || !d.cd) {
		free(d.tb);
		free(d.cd);
		return out_of_memory(c, err);
	}
	for (i = 0; i < c->n; i++) {
		d.tb[i] = topo ? pipette_topology_block_of(topo, c->names[i]) : -1;
		d.cd[i] = b->idx[i] >= 0 && b->bw ? pipette_bwcache_node_domain(b->bw, b->idx[i])
						  : -1;
		any |= d.tb[i] >= 0 || d.cd[i] >= 0;
	}
	rv = !any ? 0 : domains_agree(c, &d, err) || assign_domains(c, &d, err) ? -1 : 0;
	free(d.tb);
	free(d.cd);
	return rv;
}

struct pipette_cluster *pipette_cluster_create(const char *const *nodes,
					       int n_nodes, int gpus_per_node,
					       const int *gpu_ids,
					       const struct pipette_gpu_spec *gpu,
					       const struct pipette_bwcache *bw,
					       int allow_missing,
					       struct pipette_err *err)
{
	return pipette_cluster_create_topo(nodes, n_nodes, gpus_per_node, gpu_ids, gpu, bw,
					   allow_missing, NULL, err);
}

struct pipette_cluster *pipette_cluster_create_topo(const char *const *nodes,
						    int n_nodes, int gpus_per_node,
						    const int *gpu_ids,
						    const struct pipette_gpu_spec *gpu,
						    const struct pipette_bwcache *bw,
						    int allow_missing,
						    const struct pipette_topology *topo,
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
	if (gpu->nvlink_domain_gpus > g && gpu->nvlink_domain_gpus % g) {
		pipette_fail(err, "cluster: an NVLink domain of %d GPUs (%s) is not a whole number "
			     "of nodes of %d GPUs", gpu->nvlink_domain_gpus, gpu->name, g);
		return NULL;
	}
	c = cluster_alloc(n, g, gpu);
	if (c && gpu->nvlink_domain_gpus > g)
		c->domain_nodes = gpu->nvlink_domain_gpus / g;
	b.idx = malloc((size_t)n * sizeof(int));
	if (!c || !b.idx) {
		pipette_fail(err, "cluster: out of memory for %d nodes x %d GPUs", n, g);
		goto fail;
	}
	if (set_gpu_ids(c, gpu_ids, err) || set_names(c, nodes, &b, err))
		goto fail;
	if (bw)
		b.def = bw->def;
	if (check_intra_indices(c, &b, err) || set_domains(c, &b, topo, err))
		goto fail;
	if (fill_intra(c, &b) < 0 || fill_inter(c, &b) < 0 || warn_coverage(c, nodes, &b) < 0) {
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

int pipette_cluster_domain_nodes(const struct pipette_cluster *c)
{
	return c->domain_nodes;
}

int pipette_cluster_same_domain(const struct pipette_cluster *c, int node_a, int node_b)
{
	if (c->dom)
		return c->dom[node_a] == c->dom[node_b];
	return node_a / c->domain_nodes == node_b / c->domain_nodes;
}

struct pipette_cluster *pipette_cluster_create_blank(int n, int g,
						     const struct pipette_gpu_spec *gpu,
						     struct pipette_link l, struct pipette_err *err)
{
	struct pipette_cluster *c;
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
	ls_free(&c->inter);	/* every node link is `l` until one is set */
	c->uniform = l;
	if (pipette_cluster_set_intra_all(c, l) < 0) {
		pipette_cluster_destroy(c);
		pipette_fail(err, "cluster: out of memory for %d nodes x %d GPUs", n, g);
		return NULL;
	}
	return c;
}

/* A blank cluster's node links, n x n of them, once the first is set. */
static int unblank(struct pipette_cluster *c)
{
	size_t n = (size_t)c->n, i;

	if (ls_init(&c->inter, n * n, c->uniform) < 0)
		return -1;
	for (i = 0; i < n; i++)
		if (ls_set(&c->inter, i * n + i, self) < 0) {
			ls_free(&c->inter);
			return -1;
		}
	return 0;
}

int pipette_cluster_set_node_link(struct pipette_cluster *c, int a, int b,
				  struct pipette_link l)
{
	if (a == b || a < 0 || b < 0 || a >= c->n || b >= c->n)
		return 0;
	if (!c->inter.cells && unblank(c) < 0)
		return -1;
	if (ls_set(&c->inter, (size_t)a * c->n + b, l) < 0)
		return -1;
	c->version = next_stamp();
	return 0;
}

int pipette_cluster_set_intra_all(struct pipette_cluster *c, struct pipette_link l)
{
	size_t cells = (size_t)c->n * (size_t)c->g * (size_t)c->g, i;
	struct lstore s;

	if (ls_init(&s, cells, l) < 0)
		return -1;
	for (i = 0; i < (size_t)c->n * (size_t)c->g; i++)	/* each GPU with itself */
		if (ls_set(&s, i * (size_t)c->g + i % (size_t)c->g, self) < 0) {
			ls_free(&s);
			return -1;
		}
	ls_free(&c->intra);
	c->intra = s;
	c->version = next_stamp();
	return 0;
}

int pipette_cluster_set_intra_link(struct pipette_cluster *c, int node, int slot_a,
				   int slot_b, struct pipette_link l)
{
	if (slot_a != slot_b && node >= 0 && node < c->n && slot_a >= 0 && slot_b >= 0 &&
	    slot_a < c->g && slot_b < c->g) {
		if (ls_set(&c->intra, ((size_t)node * c->g + slot_a) * c->g + slot_b, l) < 0)
			return -1;
		c->version = next_stamp();
	}
	return 0;
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
	int na, nb;

	/* the search asks this in its inner loops: a shift, not a division,
	 * for the usual power-of-two boards */
	if (c->g_shift >= 0) {
		na = gpu_a >> c->g_shift;
		nb = gpu_b >> c->g_shift;
		if (na == nb)
			return ls_get(&c->intra, ((size_t)gpu_a << c->g_shift) + (gpu_b & (c->g - 1)));
	} else {
		na = gpu_a / c->g;
		nb = gpu_b / c->g;
		if (na == nb)
			return ls_get(&c->intra,
				      ((size_t)na * c->g + gpu_a % c->g) * c->g + gpu_b % c->g);
	}
	return c->inter.cells ? ls_get(&c->inter, (size_t)na * c->n + nb) : c->uniform;
}

struct pipette_link pipette_cluster_node_link(const struct pipette_cluster *c,
					      int node_a, int node_b)
{
	if (!c->inter.cells)
		return node_a == node_b ? self : c->uniform;
	return ls_get(&c->inter, (size_t)node_a * c->n + node_b);
}

int pipette_cluster_node_table(const struct pipette_cluster *c, const uint16_t **idx,
			       const struct pipette_link **tab)
{
	*idx = c->inter.i16;
	*tab = c->inter.i16 ? c->inter.tab : NULL;
	return c->inter.i16 ? (int)c->inter.n_tab : 0;
}

double pipette_cluster_node_gbps(const struct pipette_cluster *c, int node_a, int node_b)
{
	double ab = pipette_cluster_node_link(c, node_a, node_b).gbps;
	double ba = pipette_cluster_node_link(c, node_b, node_a).gbps;

	return ab < ba ? ab : ba;
}

unsigned long pipette_cluster_version(const struct pipette_cluster *c)
{
	return c->version;
}

const char *pipette_cluster_warnings(const struct pipette_cluster *c)
{
	return c->warnings;
}
