/* pipette: the bandwidth cache: build, query, merge.
 *
 * Every directed figure reads as one entry (GB/s, latency, index of its
 * provenance in an interned table), so link overrides, merges and per-link
 * timestamps need no special cases: the file's matrix/links split is only
 * a compact spelling, recomputed on save (the most common provenance goes
 * to the section header, the rest become links).  The entries are stored
 * compactly (bwmat.c): four bytes of bandwidth per figure, latency and
 * provenance columns only where they vary, and inter-node figures stated
 * per group of nodes (pipette-bw/2) cost one figure per group pair. */
#define _GNU_SOURCE	/* timegm */
#include "inputs/bwcache.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inputs/bwcache_int.h"

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int streq_null(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

int pipette_bw_parse_time(const char *s, time_t *out)
{
	int y, mo, d, h, mi, sec, n = 0;
	struct tm tm, back;
	time_t t;

	if (!s || strlen(s) != 20)
		return -1;
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &y, &mo, &d, &h, &mi, &sec,
		   &n) != 6 || n != 20)
		return -1;
	if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 ||
	    h > 23 || mi > 59 || sec > 59 || h < 0 || mi < 0 || sec < 0)
		return -1;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t == (time_t)-1 || !gmtime_r(&t, &back) || back.tm_mday != d ||
	    back.tm_mon != mo - 1)
		return -1;	/* e.g. February 30 */
	*out = t;
	return 0;
}

const char *pipette_bw_format_time(time_t t, char *buf, size_t size)
{
	struct tm tm;

	if (t == (time_t)-1 || !gmtime_r(&t, &tm) ||
	    !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "unknown");
	return buf;
}

/* ------------------------------------------------------------------ */
/* provenance table (interned, hashed)                                 */

static uint64_t prov_hash(const char *tool, const char *metric, double bytes,
			  time_t when)
{
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a 64-bit offset basis */
	const unsigned char *p;
	unsigned char raw[sizeof(double) + sizeof(time_t)];
	size_t i;

	for (p = (const unsigned char *)(tool ? tool : "\x01"); *p; p++)
		h = (h ^ *p) * 1099511628211ULL;	/* FNV prime */
	h = (h ^ 0xff) * 1099511628211ULL;
	for (p = (const unsigned char *)(metric ? metric : "\x01"); *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	memcpy(raw, &bytes, sizeof(double));
	memcpy(raw + sizeof(double), &when, sizeof(time_t));
	for (i = 0; i < sizeof(raw); i++)
		h = (h ^ raw[i]) * 1099511628211ULL;
	return h;
}

static int prov_rehash(struct pipette_bwcache *bw, int size)
{
	int *slots = malloc((size_t)size * sizeof(int));
	int i;

	if (!slots)
		return -1;
	for (i = 0; i < size; i++)
		slots[i] = -1;
	for (i = 0; i < bw->n_prov; i++) {
		const struct bw_prov_rec *r = &bw->prov[i];
		uint64_t h = prov_hash(r->tool, r->metric, r->bytes, r->when);
		int s = (int)(h & (uint64_t)(size - 1));

		while (slots[s] >= 0)
			s = (s + 1) & (size - 1);
		slots[s] = i;
	}
	free(bw->prov_slots);
	bw->prov_slots = slots;
	bw->n_slots = size;
	return 0;
}

/* Index of the provenance record equal to p, added when new; -1 on OOM. */
int bw_prov_intern(struct pipette_bwcache *bw, const struct pipette_bw_prov *p,
		   struct pipette_err *err)
{
	static const struct pipette_bw_prov none = { NULL, NULL, 0, (time_t)-1 };
	struct bw_prov_rec *r;
	uint64_t h;
	int s;

	if (!p)
		p = &none;
	if (bw->n_slots == 0 && prov_rehash(bw, 64) < 0)
		goto oom;
	h = prov_hash(p->tool, p->metric, p->bytes, p->when);
	for (s = (int)(h & (uint64_t)(bw->n_slots - 1)); bw->prov_slots[s] >= 0;
	     s = (s + 1) & (bw->n_slots - 1)) {
		r = &bw->prov[bw->prov_slots[s]];
		if (streq_null(r->tool, p->tool) &&
		    streq_null(r->metric, p->metric) && r->bytes == p->bytes &&
		    r->when == p->when)
			return bw->prov_slots[s];
	}
	if (bw->n_prov == bw->cap_prov) {
		int cap = bw->cap_prov ? 2 * bw->cap_prov : 8;
		void *np = realloc(bw->prov, (size_t)cap * sizeof(*bw->prov));

		if (!np)
			goto oom;
		bw->prov = np;
		bw->cap_prov = cap;
	}
	r = &bw->prov[bw->n_prov];
	r->tool = xstrdup(p->tool);
	r->metric = xstrdup(p->metric);
	if ((p->tool && !r->tool) || (p->metric && !r->metric)) {
		free(r->tool);
		free(r->metric);
		goto oom;
	}
	r->bytes = p->bytes;
	r->when = p->when;
	bw->prov_slots[s] = bw->n_prov++;
	if (2 * bw->n_prov > bw->n_slots && prov_rehash(bw, 2 * bw->n_slots) < 0)
		goto oom;
	return bw->n_prov - 1;
oom:
	return pipette_fail(err, "out of memory recording a provenance");
}

static void prov_get(const struct pipette_bwcache *bw, int id,
		     struct pipette_bw_prov *out)
{
	if (id < 0) {
		out->tool = out->metric = NULL;
		out->bytes = 0;
		out->when = (time_t)-1;
		return;
	}
	out->tool = bw->prov[id].tool;
	out->metric = bw->prov[id].metric;
	out->bytes = bw->prov[id].bytes;
	out->when = bw->prov[id].when;
}

time_t bw_prov_when(const struct pipette_bwcache *bw, int prov)
{
	return prov < 0 ? (time_t)-1 : bw->prov[prov].when;
}

/* ------------------------------------------------------------------ */
/* lifetime, nodes, groups                                             */

struct pipette_bwcache *pipette_bwcache_create(void)
{
	struct pipette_bwcache *bw = calloc(1, sizeof(*bw));

	if (!bw)
		return NULL;
	bw->def.inter_gbps = bw->def.intra_gbps = NAN;
	bw->def.inter_lat_us = bw->def.intra_lat_us = NAN;
	bw->generated = (time_t)-1;
	return bw;
}

void pipette_bwcache_destroy(struct pipette_bwcache *bw)
{
	int i;

	if (!bw)
		return;
	for (i = 0; i < bw->n; i++) {
		free(bw->node[i].name);
		bw_mat_free(&bw->node[i].intra);
		free(bw->node[i].gpus_json);
		free(bw->node[i].topo_json);
	}
	for (i = 0; i < bw->n_prov; i++) {
		free(bw->prov[i].tool);
		free(bw->prov[i].metric);
	}
	for (i = 0; i < bw->n_domains; i++)
		free(bw->domain[i].name);
	free(bw->domain);
	for (i = 0; i < bw->inter.n_groups; i++)
		free(bw->inter.group_name[i]);
	free(bw->inter.group_name);
	free(bw->inter.group_of);
	bw_mat_free(&bw->inter.mat);
	bw_mat_free(&bw->inter.between);
	bw_pairs_free(&bw->inter.pairs);
	free(bw->node);
	free(bw->prov);
	free(bw->prov_slots);
	free(bw->name_slots);
	free(bw->generator);
	free(bw);
}

/* The capacity to allocate for n rows of a growing node x node or group x
 * group matrix: half again what it had, so that adding nodes one by one
 * copies O(n^2) cells in all, never beyond the limit. */
static int grown_cap(int cap, int n)
{
	cap += cap / 2;
	if (cap < n)
		cap = n;
	if (cap < 8)
		cap = 8;
	return cap > PIPETTE_BW_MAX_NODES ? (n > PIPETTE_BW_MAX_NODES ? n : PIPETTE_BW_MAX_NODES)
					  : cap;
}

/* Make room for `want` nodes. */
int bw_reserve(struct pipette_bwcache *bw, int want, struct pipette_err *err)
{
	struct bw_node *node;
	int *group_of;
	int cap, i;

	if (want > PIPETTE_BW_MAX_NODES)
		return pipette_fail(err, "%d nodes exceed the limit of %d per cache",
				    want, PIPETTE_BW_MAX_NODES);
	if (bw->inter.dense &&
	    bw_mat_reserve(&bw->inter.mat, want, grown_cap(bw->inter.mat.cap, want)) < 0)
		return pipette_fail(err, "out of memory for %d nodes", want);
	if (want <= bw->cap)
		return 0;
	cap = grown_cap(bw->cap, want);
	node = realloc(bw->node, (size_t)cap * sizeof(*node));
	if (node)
		bw->node = node;
	group_of = realloc(bw->inter.group_of, (size_t)cap * sizeof(int));
	if (group_of)
		bw->inter.group_of = group_of;
	if (!node || !group_of)
		return pipette_fail(err, "out of memory for %d nodes", want);
	for (i = bw->cap; i < cap; i++)
		group_of[i] = -1;
	bw->cap = cap;
	return 0;
}

/* A Slurm NodeName: non-empty, printable, no blanks, commas or brackets
 * (which a hostlist would split or expand). */
static const char *bad_name(const char *name)
{
	const unsigned char *p;

	if (!*name)
		return "is empty";
	if (strlen(name) > PIPETTE_BW_MAX_NAME)
		return "is longer than 255 characters";
	for (p = (const unsigned char *)name; *p; p++)
		if (*p <= ' ' || *p == 0x7f || *p == ',' || *p == '[' ||
		    *p == ']' || *p == '"' || *p == '\\')
			return "contains a blank, control character, comma, "
			       "bracket, quote or backslash";
	return NULL;
}

/* A group name: as a node name, and no '=' (the CLI takes groups as
 * NAME=HOSTLIST). */
static const char *bad_group_name(const char *name)
{
	const char *why = bad_name(name);

	return why ? why : strchr(name, '=') ? "contains '='" : NULL;
}

/* FNV-1a (as prov_hash) of len bytes, then mixed: the index takes the
 * low bits, and FNV-1a's low bits depend only on the low bits of the
 * bytes, so names that differ in digits ("node1".."node4096") crowd a few
 * runs of slots (measured: a fifth of validating a 4096-node cache went
 * to probing).  The mix is splitmix64's finalizer (rng.h). */
static uint64_t name_hash_n(const char *name, size_t len)
{
	uint64_t h = 1469598103934665603ULL;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

static uint64_t name_hash(const char *name)
{
	return name_hash_n(name, strlen(name));
}

/* Node k into the first free slot from its hash's. */
static void name_slot_put(struct bw_name_slot *slots, int size, const char *name, int k)
{
	uint64_t h = name_hash(name);
	int s = (int)(h & (uint64_t)(size - 1));

	while (slots[s].k >= 0)
		s = (s + 1) & (size - 1);
	slots[s].name = name;
	slots[s].tag = (uint32_t)(h >> 32);
	slots[s].k = k;
}

/* Rebuild the name index with `size` slots (a power of two). */
static int name_rehash(struct pipette_bwcache *bw, int size)
{
	struct bw_name_slot *slots = malloc((size_t)size * sizeof(*slots));
	int i;

	if (!slots)
		return -1;
	for (i = 0; i < size; i++)
		slots[i].k = -1;
	for (i = 0; i < bw->n; i++)
		name_slot_put(slots, size, bw->node[i].name, i);
	free(bw->name_slots);
	bw->name_slots = slots;
	bw->n_name_slots = size;
	return 0;
}

int bw_node_index_n(const struct pipette_bwcache *bw, const char *name, size_t len)
{
	const struct bw_name_slot *p;
	uint64_t h;
	int s;

	if (!bw->n_name_slots)
		return -1;
	h = name_hash_n(name, len);
	for (s = (int)(h & (uint64_t)(bw->n_name_slots - 1)); (p = &bw->name_slots[s])->k >= 0;
	     s = (s + 1) & (bw->n_name_slots - 1))
		if (p->tag == (uint32_t)(h >> 32) && !strncmp(p->name, name, len) &&
		    !p->name[len])
			return p->k;
	return -1;
}

int pipette_bwcache_node_index(const struct pipette_bwcache *bw, const char *name)
{
	return bw_node_index_n(bw, name, strlen(name));
}

int pipette_bwcache_add_node(struct pipette_bwcache *bw, const char *name,
			     struct pipette_err *err)
{
	const char *why;
	struct bw_node *nd;
	int i = pipette_bwcache_node_index(bw, name);

	if (i >= 0)
		return i;
	why = bad_name(name);
	if (why)
		return pipette_fail(err, "node name '%.64s' %s", name, why);
	if (bw_reserve(bw, bw->n + 1, err) < 0)
		return -1;
	nd = &bw->node[bw->n];
	memset(nd, 0, sizeof(*nd));
	nd->name = strdup(name);
	if (!nd->name)
		return pipette_fail(err, "out of memory");
	nd->domain = -1;
	bw->inter.group_of[bw->n] = -1;
	bw->n++;
	/* keep the index at most half full */
	if (2 * bw->n > bw->n_name_slots) {
		if (name_rehash(bw, bw->n_name_slots ? 2 * bw->n_name_slots : 64) < 0)
			return pipette_fail(err, "out of memory");
	} else {
		name_slot_put(bw->name_slots, bw->n_name_slots, nd->name, bw->n - 1);
	}
	return bw->n - 1;
}

/* Grow a node's intra matrix to ng x ng. */
int bw_intra_reserve(struct bw_node *nd, int ng, struct pipette_err *err)
{
	if (ng <= nd->intra.n)
		return 0;
	if (ng > PIPETTE_BW_MAX_GPUS)
		return pipette_fail(err, "node %s: GPU index %d exceeds the limit "
				    "of %d GPUs per node", nd->name, ng - 1,
				    PIPETTE_BW_MAX_GPUS);
	if (bw_mat_reserve(&nd->intra, ng, ng) < 0)
		return pipette_fail(err, "out of memory");
	return 0;
}

int bw_group_index(const struct pipette_bwcache *bw, const char *name)
{
	int g;

	for (g = 0; g < bw->inter.n_groups; g++)
		if (!strcmp(bw->inter.group_name[g], name))
			return g;
	return -1;
}

int bw_group_add(struct pipette_bwcache *bw, const char *name, struct pipette_err *err)
{
	struct bw_inter *in = &bw->inter;
	const char *why = bad_group_name(name);

	if (why)
		return pipette_fail(err, "group name '%.64s' %s", name, why);
	if (bw_group_index(bw, name) >= 0)
		return pipette_fail(err, "group '%.64s' is defined twice", name);
	if (in->n_groups >= PIPETTE_BW_MAX_NODES)
		return pipette_fail(err, "more than %d groups", PIPETTE_BW_MAX_NODES);
	if (in->n_groups == in->cap_groups) {
		int cap = in->cap_groups ? 2 * in->cap_groups : 8;
		char **p = realloc(in->group_name, (size_t)cap * sizeof(char *));

		if (!p)
			return pipette_fail(err, "out of memory");
		in->group_name = p;
		in->cap_groups = cap;
	}
	if (bw_mat_reserve(&in->between, in->n_groups + 1,
			   grown_cap(in->between.cap, in->n_groups + 1)) < 0 ||
	    !(in->group_name[in->n_groups] = strdup(name)))
		return pipette_fail(err, "out of memory");
	return in->n_groups++;
}

int bw_domain_index(const struct pipette_bwcache *bw, const char *name)
{
	int d;

	for (d = 0; d < bw->n_domains; d++)
		if (!strcmp(bw->domain[d].name, name))
			return d;
	return -1;
}

int bw_domain_add(struct pipette_bwcache *bw, const char *name, int gpus,
		  struct pipette_err *err)
{
	const char *why = bad_group_name(name);
	int d;

	if (why)
		return pipette_fail(err, "NVLink domain name '%.64s' %s", name, why);
	if (gpus < 0 || gpus > PIPETTE_BW_MAX_NODES * PIPETTE_BW_MAX_GPUS)
		return pipette_fail(err, "NVLink domain '%.64s': %d GPUs is not in [1, %d]",
				    name, gpus, PIPETTE_BW_MAX_NODES * PIPETTE_BW_MAX_GPUS);
	if ((d = bw_domain_index(bw, name)) >= 0) {
		if (gpus && bw->domain[d].gpus && gpus != bw->domain[d].gpus)
			return pipette_fail(err, "NVLink domain '%.64s' is stated as %d GPUs "
					    "and as %d", name, bw->domain[d].gpus, gpus);
		if (gpus)
			bw->domain[d].gpus = gpus;
		return d;
	}
	if (bw->n_domains >= PIPETTE_BW_MAX_NODES)
		return pipette_fail(err, "more than %d NVLink domains", PIPETTE_BW_MAX_NODES);
	if (bw->n_domains == bw->cap_domains) {
		int cap = bw->cap_domains ? 2 * bw->cap_domains : 8;
		struct bw_domain *p = realloc(bw->domain, (size_t)cap * sizeof(*p));

		if (!p)
			return pipette_fail(err, "out of memory");
		bw->domain = p;
		bw->cap_domains = cap;
	}
	if (!(bw->domain[bw->n_domains].name = strdup(name)))
		return pipette_fail(err, "out of memory");
	bw->domain[bw->n_domains].gpus = gpus;
	return bw->n_domains++;
}

int pipette_bwcache_set_domain(struct pipette_bwcache *bw, const char *node,
			       const char *domain, int gpus, int move,
			       struct pipette_err *err)
{
	int k = pipette_bwcache_add_node(bw, node, err), d;

	if (k < 0 || (d = bw_domain_add(bw, domain, gpus, err)) < 0)
		return -1;
	if (bw->node[k].domain >= 0 && bw->node[k].domain != d && !move)
		return pipette_fail(err, "node '%.64s' is in NVLink domains '%.64s' and '%.64s'",
				    node, bw->domain[bw->node[k].domain].name, domain);
	bw->node[k].domain = d;
	return 0;
}

void pipette_bwcache_clear_domains(struct pipette_bwcache *bw)
{
	int i;

	for (i = 0; i < bw->n_domains; i++)
		free(bw->domain[i].name);
	bw->n_domains = 0;
	for (i = 0; i < bw->n; i++)
		bw->node[i].domain = -1;
}

int pipette_bwcache_domain_count(const struct pipette_bwcache *bw)
{
	return bw->n_domains;
}

const char *pipette_bwcache_domain_name(const struct pipette_bwcache *bw, int domain)
{
	return domain >= 0 && domain < bw->n_domains ? bw->domain[domain].name : NULL;
}

int pipette_bwcache_domain_gpus(const struct pipette_bwcache *bw, int domain)
{
	return domain >= 0 && domain < bw->n_domains ? bw->domain[domain].gpus : 0;
}

int pipette_bwcache_node_domain(const struct pipette_bwcache *bw, int node)
{
	return node >= 0 && node < bw->n ? bw->node[node].domain : -1;
}

int pipette_bwcache_domain_nodes(const struct pipette_bwcache *bw, int domain)
{
	int i, n = 0;

	for (i = 0; i < bw->n; i++)
		n += bw->node[i].domain == domain && domain >= 0;
	return n;
}

int pipette_bwcache_check_domains(const struct pipette_bwcache *bw, int gpus_per_node,
				  int domain_gpus, struct pipette_err *err)
{
	int d;

	for (d = 0; d < bw->n_domains; d++) {
		long m = pipette_bwcache_domain_nodes(bw, d), gpus = bw->domain[d].gpus, held = 0;
		int i;

		if (!m)
			continue;
		for (i = 0; i < bw->n; i++)
			held += bw->node[i].domain == d ? bw->node[i].intra.n : 0;
		if (gpus && held > gpus)
			return pipette_fail(err, "$.domains[%d].gpus: NVLink domain '%.64s' states "
					    "%ld GPUs, but its nodes' intra matrices hold %ld", d,
					    bw->domain[d].name, gpus, held);
		if (gpus && gpus_per_node > 0 && gpus % gpus_per_node)
			return pipette_fail(err, "$.domains[%d].gpus: NVLink domain '%.64s' states "
					    "%ld GPUs, not a whole number of nodes of %d GPUs", d,
					    bw->domain[d].name, gpus, gpus_per_node);
		if (gpus && domain_gpus > 0 && gpus != domain_gpus)
			return pipette_fail(err, "$.domains[%d].gpus: NVLink domain '%.64s' states "
					    "%ld GPUs, but the NVLink domain given has %d", d,
					    bw->domain[d].name, gpus, domain_gpus);
		if (domain_gpus > 0 && gpus_per_node > 0 && m * gpus_per_node > domain_gpus)
			return pipette_fail(err, "$.domains[%d].nodes: NVLink domain '%.64s' has %ld "
					    "nodes of %d GPUs, more than the %d of the NVLink domain "
					    "given", d, bw->domain[d].name, m, gpus_per_node, domain_gpus);
	}
	return 0;
}

long pipette_bwcache_domain_measured(const struct pipette_bwcache *bw)
{
	int *by = malloc(((size_t)bw->n + 1) * sizeof(int)), *start;
	int i, d, a, b;
	long cnt = 0;

	start = calloc((size_t)bw->n_domains + 2, sizeof(int));
	if (!by || !start) {
		free(by);
		free(start);
		return -1;
	}
	/* the nodes of each domain together: a counting sort by domain */
	for (i = 0; i < bw->n; i++)
		if (bw->node[i].domain >= 0)
			start[bw->node[i].domain + 2]++;
	for (d = 0; d < bw->n_domains; d++)
		start[d + 2] += start[d + 1];
	for (i = 0; i < bw->n; i++)
		if (bw->node[i].domain >= 0)
			by[start[bw->node[i].domain + 1]++] = i;
	for (d = 0; d < bw->n_domains; d++)
		for (a = start[d]; a < start[d + 1]; a++)
			for (b = start[d]; b < start[d + 1]; b++) {
				struct bw_entry e;

				if (a == b)
					continue;
				bw_inter_get(bw, by[a], by[b], &e);
				cnt += !isnan(e.gbps);
			}
	free(by);
	free(start);
	return cnt;
}

/* ------------------------------------------------------------------ */
/* inter-node figures                                                  */

static void unmeasured(struct bw_entry *e)
{
	e->gbps = NAN;
	e->lat = NAN;
	e->prov = -1;
	e->code = BW_NONE;
}

void bw_inter_own(const struct pipette_bwcache *bw, int a, int b, struct bw_entry *e)
{
	if (bw->inter.dense)
		bw_mat_get(&bw->inter.mat, a, b, e);
	else if (!bw_pairs_get(&bw->inter.pairs, a, b, e))
		unmeasured(e);
}

void bw_inter_get(const struct pipette_bwcache *bw, int a, int b, struct bw_entry *e)
{
	int ga, gb;

	bw_inter_own(bw, a, b, e);
	if (!isnan(e->gbps) || !bw->inter.n_groups || a == b)
		return;
	ga = bw->inter.group_of[a];
	gb = bw->inter.group_of[b];
	if (ga >= 0 && gb >= 0)
		bw_mat_get(&bw->inter.between, ga, gb, e);
}

int bw_inter_make_dense(struct pipette_bwcache *bw, struct pipette_err *err)
{
	struct bw_inter *in = &bw->inter;
	const struct bw_pairs *old = &in->pairs;
	uint32_t s;
	int a;

	if (in->dense)
		return 0;
	if (bw_mat_reserve(&in->mat, bw->n, bw->cap > 0 ? bw->cap : 8) < 0)
		return pipette_fail(err, "out of memory for %d x %d figures", bw->n, bw->n);
	in->mat.n = bw->n;
	for (a = 0; a < old->n_rows; a++)
		for (s = 0; s < old->row[a].n_slot; s++) {
			const struct bw_pair *p = &old->row[a].slot[s];
			struct bw_entry e;

			if (!p->key)
				continue;
			bw_pair_entry(old, p, &e);
			if (bw_mat_set(&in->mat, a, (int)p->key - 1, e.gbps, e.code, e.lat,
				       e.prov) < 0) {
				bw_mat_free(&in->mat);
				return pipette_fail(err, "out of memory for %d x %d figures",
						    bw->n, bw->n);
			}
		}
	bw_pairs_free(&in->pairs);
	in->dense = 1;
	return 0;
}

int bw_inter_set(struct pipette_bwcache *bw, int a, int b, double gbps, uint32_t code,
		 float lat, int prov, struct pipette_err *err)
{
	struct bw_inter *in = &bw->inter;

	if (in->dense) {
		if (bw_mat_set(&in->mat, a, b, gbps, code, lat, prov) < 0)
			return pipette_fail(err, "out of memory");
		return 0;
	}
	if (bw_pairs_set(&in->pairs, a, b, gbps, code, lat, prov) < 0)
		return pipette_fail(err, "out of memory");
	/* A hashed pair takes 16 bytes at most half full, a dense cell 4:
	 * beyond n^2 / 8 pairs the matrix is the smaller. */
	if ((size_t)in->pairs.count * 8 > (size_t)bw->n * (size_t)bw->n)
		return bw_inter_make_dense(bw, err);
	return 0;
}

int bw_inter_reserve(struct pipette_bwcache *bw, int a, uint32_t more, struct pipette_err *err)
{
	if (bw->inter.dense || bw_pairs_reserve(&bw->inter.pairs, a, more) == 0)
		return 0;
	return pipette_fail(err, "out of memory");
}

size_t bw_inter_own_count(const struct pipette_bwcache *bw)
{
	size_t cnt = 0;
	int a, b;

	if (!bw->inter.dense)
		return bw->inter.pairs.count;
	for (a = 0; a < bw->n; a++)
		for (b = 0; b < bw->n; b++)
			cnt += bw_mat_has(&bw->inter.mat, a, b);
	return cnt;
}

/* ------------------------------------------------------------------ */
/* queries                                                             */

int pipette_bwcache_node_count(const struct pipette_bwcache *bw)
{
	return bw->n;
}

const char *pipette_bwcache_node_name(const struct pipette_bwcache *bw, int node)
{
	return node >= 0 && node < bw->n ? bw->node[node].name : NULL;
}

int pipette_bwcache_node_gpus(const struct pipette_bwcache *bw, int node)
{
	return node >= 0 && node < bw->n ? bw->node[node].intra.n : 0;
}

static int figure_of(const struct pipette_bwcache *bw, const struct bw_entry *e,
		     struct pipette_bw_figure *out)
{
	out->gbps = e->gbps;
	out->lat_us = e->lat;
	prov_get(bw, e->prov, &out->prov);
	return isnan(e->gbps) ? 0 : 1;
}

int pipette_bwcache_inter(const struct pipette_bwcache *bw, int a, int b,
			  struct pipette_bw_figure *out)
{
	struct bw_entry e;

	if (a < 0 || b < 0 || a >= bw->n || b >= bw->n)
		return -1;
	bw_inter_get(bw, a, b, &e);
	return figure_of(bw, &e, out);
}

int pipette_bwcache_intra(const struct pipette_bwcache *bw, int node, int gpu_a,
			  int gpu_b, struct pipette_bw_figure *out)
{
	const struct bw_node *nd;
	struct bw_entry e;

	if (node < 0 || node >= bw->n)
		return -1;
	nd = &bw->node[node];
	if (gpu_a < 0 || gpu_b < 0 || gpu_a >= nd->intra.n || gpu_b >= nd->intra.n)
		return -1;
	bw_intra_get(nd, gpu_a, gpu_b, &e);
	return figure_of(bw, &e, out);
}

void pipette_bwcache_get_defaults(const struct pipette_bwcache *bw,
				  struct pipette_bw_defaults *out)
{
	*out = bw->def;
}

time_t pipette_bwcache_generated(const struct pipette_bwcache *bw)
{
	return bw->generated;
}

int pipette_bwcache_group_count(const struct pipette_bwcache *bw)
{
	return bw->inter.n_groups;
}

const char *pipette_bwcache_group_name(const struct pipette_bwcache *bw, int group)
{
	return group >= 0 && group < bw->inter.n_groups ? bw->inter.group_name[group] : NULL;
}

int pipette_bwcache_node_group(const struct pipette_bwcache *bw, int node)
{
	return node >= 0 && node < bw->n ? bw->inter.group_of[node] : -1;
}

const char *pipette_bwcache_schema(const struct pipette_bwcache *bw)
{
	static const char *const names[] = { PIPETTE_BW_SCHEMA, PIPETTE_BW_SCHEMA,
					     PIPETTE_BW_SCHEMA_V2, PIPETTE_BW_SCHEMA_V3 };

	if (bw->schema_read)
		return names[bw->schema_read];
	return bw->n_domains ? PIPETTE_BW_SCHEMA_V3 : bw->inter.n_groups ? PIPETTE_BW_SCHEMA_V2
									 : PIPETTE_BW_SCHEMA;
}

/* Nodes of each group; the caller frees it.  NULL when out of memory. */
static long *group_sizes(const struct pipette_bwcache *bw)
{
	long *size = calloc((size_t)bw->inter.n_groups + 1, sizeof(long));
	int i;

	for (i = 0; size && i < bw->n; i++)
		if (bw->inter.group_of[i] >= 0)
			size[bw->inter.group_of[i]]++;
	return size;
}

/* The pairs of a cache's hash (not dense) that have a figure of their
 * own and no group figure: those the loop over every pair below counts,
 * found by visiting the pairs there are (a grouped 4096-node cache holds
 * a few of its 16.8 million). */
static long own_uncovered(const struct pipette_bwcache *bw)
{
	const struct bw_inter *in = &bw->inter;
	long cnt = 0;
	uint32_t s;
	int a, b, ga, gb;

	for (a = 0; a < in->pairs.n_rows && a < bw->n; a++)
		for (s = 0; s < in->pairs.row[a].n_slot; s++) {
			const struct bw_pair *p = &in->pairs.row[a].slot[s];
			struct bw_entry e;

			if (!p->key || (b = (int)p->key - 1) == a || b >= bw->n)
				continue;
			ga = in->group_of[a];
			gb = in->group_of[b];
			if (ga >= 0 && gb >= 0 && bw_mat_has(&in->between, ga, gb))
				continue;
			bw_pair_entry(&in->pairs, p, &e);
			cnt += !isnan(e.gbps);
		}
	return cnt;
}

long pipette_bwcache_measured(const struct pipette_bwcache *bw)
{
	const struct bw_inter *in = &bw->inter;
	long cnt = 0, *size;
	int a, b, ga, gb;

	if (!in->n_groups)
		return (long)bw_inter_own_count(bw);
	if (!(size = group_sizes(bw)))
		return -1;
	/* the pairs a group figure covers, then the own figures of the rest */
	for (ga = 0; ga < in->n_groups; ga++)
		for (gb = 0; gb < in->n_groups; gb++)
			if (bw_mat_has(&in->between, ga, gb))
				cnt += size[ga] * (size[gb] - (ga == gb));
	free(size);
	if (!in->dense)
		return cnt + own_uncovered(bw);
	for (a = 0; a < bw->n; a++)
		for (b = 0; b < bw->n; b++) {
			struct bw_entry e;

			ga = in->group_of[a];
			gb = in->group_of[b];
			if (a == b || (ga >= 0 && gb >= 0 && bw_mat_has(&in->between, ga, gb)))
				continue;
			bw_inter_own(bw, a, b, &e);
			cnt += !isnan(e.gbps);
		}
	return cnt;
}

size_t pipette_bwcache_bytes(const struct pipette_bwcache *bw)
{
	const struct bw_inter *in = &bw->inter;
	size_t sum = sizeof(*bw) + (size_t)bw->cap * (sizeof(struct bw_node) + sizeof(int));
	int i;

	sum += bw_mat_bytes(&in->mat) + bw_pairs_bytes(&in->pairs) +
	       bw_mat_bytes(&in->between) + (size_t)in->cap_groups * sizeof(char *);
	for (i = 0; i < in->n_groups; i++)
		sum += strlen(in->group_name[i]) + 1;
	for (i = 0; i < bw->n; i++)
		sum += strlen(bw->node[i].name) + 1 + bw_mat_bytes(&bw->node[i].intra) +
		       (bw->node[i].gpus_json ? strlen(bw->node[i].gpus_json) + 1 : 0) +
		       (bw->node[i].topo_json ? strlen(bw->node[i].topo_json) + 1 : 0);
	for (i = 0; i < bw->n_prov; i++)
		sum += sizeof(struct bw_prov_rec) + sizeof(int) * 2 +
		       (bw->prov[i].tool ? strlen(bw->prov[i].tool) + 1 : 0) +
		       (bw->prov[i].metric ? strlen(bw->prov[i].metric) + 1 : 0);
	return sum + (size_t)bw->n_name_slots * sizeof(struct bw_name_slot) +
	       (bw->generator ? strlen(bw->generator) + 1 : 0);
}

/* ------------------------------------------------------------------ */
/* building                                                            */

static int check_gbps(double g, const char *what, struct pipette_err *err)
{
	if (!isfinite(g) || g <= 0 || g > PIPETTE_BW_MAX_GBPS)
		return pipette_fail(err, "%s: bandwidth %g GB/s is not in (0, %g]",
				    what, g, PIPETTE_BW_MAX_GBPS);
	return 0;
}

static int check_lat(double l, const char *what, struct pipette_err *err)
{
	if (isnan(l))
		return 0;
	if (!isfinite(l) || l < 0 || l > PIPETTE_BW_MAX_LAT_US)
		return pipette_fail(err, "%s: latency %g us is not in [0, %g]",
				    what, l, PIPETTE_BW_MAX_LAT_US);
	return 0;
}

static int check_prov(const struct pipette_bw_prov *p, const char *what,
		      struct pipette_err *err)
{
	if (p && (!(p->bytes >= 0) || p->bytes > PIPETTE_BW_MAX_BYTES))
		return pipette_fail(err, "%s: message size %g bytes is not in "
				    "[0, %g]", what, p->bytes, PIPETTE_BW_MAX_BYTES);
	return 0;
}

int pipette_bwcache_set_defaults(struct pipette_bwcache *bw,
				 const struct pipette_bw_defaults *d,
				 struct pipette_err *err)
{
	if ((!isnan(d->inter_gbps) && check_gbps(d->inter_gbps, "defaults.inter_gbps", err) < 0) ||
	    (!isnan(d->intra_gbps) && check_gbps(d->intra_gbps, "defaults.intra_gbps", err) < 0) ||
	    check_lat(d->inter_lat_us, "defaults.lat_us", err) < 0 ||
	    check_lat(d->intra_lat_us, "defaults.intra_lat_us", err) < 0)
		return -1;
	bw->def = *d;
	return 0;
}

void pipette_bwcache_set_generated(struct pipette_bwcache *bw, time_t when)
{
	bw->generated = when;
}

int pipette_bwcache_set_generator(struct pipette_bwcache *bw, const char *text,
				  struct pipette_err *err)
{
	char *s = xstrdup(text);

	if (text && !s)
		return pipette_fail(err, "out of memory");
	free(bw->generator);
	bw->generator = s;
	return 0;
}

int pipette_bwcache_set_inter(struct pipette_bwcache *bw, const char *a,
			      const char *b, double gbps, double lat_us,
			      const struct pipette_bw_prov *prov,
			      struct pipette_err *err)
{
	char what[2 * PIPETTE_BW_MAX_NAME + 16];
	int ia, ib, p;

	snprintf(what, sizeof(what), "link %.255s -> %.255s", a, b);
	if (!strcmp(a, b))
		return pipette_fail(err, "%s: a node has no link to itself "
				    "(intra-node figures go to set_intra)", what);
	if (check_gbps(gbps, what, err) < 0 || check_lat(lat_us, what, err) < 0 ||
	    check_prov(prov, what, err) < 0)
		return -1;
	if ((ia = pipette_bwcache_add_node(bw, a, err)) < 0 ||
	    (ib = pipette_bwcache_add_node(bw, b, err)) < 0 ||
	    (p = bw_prov_intern(bw, prov, err)) < 0)
		return -1;
	return bw_inter_set(bw, ia, ib, gbps, BW_NONE, (float)lat_us, p, err);
}

int pipette_bwcache_set_intra(struct pipette_bwcache *bw, const char *node,
			      int gpu_a, int gpu_b, double gbps, double lat_us,
			      const struct pipette_bw_prov *prov,
			      struct pipette_err *err)
{
	struct bw_node *nd;
	char what[PIPETTE_BW_MAX_NAME + 64];
	int in, p, ng;

	snprintf(what, sizeof(what), "node %.255s GPU %d -> %d", node, gpu_a, gpu_b);
	if (gpu_a < 0 || gpu_b < 0 || gpu_a == gpu_b)
		return pipette_fail(err, "%s: expected two distinct GPU indices >= 0",
				    what);
	if (check_gbps(gbps, what, err) < 0 || check_lat(lat_us, what, err) < 0 ||
	    check_prov(prov, what, err) < 0)
		return -1;
	if ((in = pipette_bwcache_add_node(bw, node, err)) < 0)
		return -1;
	nd = &bw->node[in];
	ng = (gpu_a > gpu_b ? gpu_a : gpu_b) + 1;
	if (bw_intra_reserve(nd, ng, err) < 0 || (p = bw_prov_intern(bw, prov, err)) < 0)
		return -1;
	if (bw_mat_set(&nd->intra, gpu_a, gpu_b, gbps, BW_NONE, (float)lat_us, p) < 0)
		return pipette_fail(err, "out of memory");
	return 0;
}

/* ------------------------------------------------------------------ */
/* merging                                                             */

/* src replaces dst when src is measured and not older. */
static int replaces(const struct bw_entry *d, const struct pipette_bwcache *dbw,
		    const struct bw_entry *s, const struct pipette_bwcache *sbw)
{
	time_t td, ts;

	if (isnan(s->gbps))
		return 0;
	if (!isnan(d->gbps)) {
		td = bw_prov_when(dbw, d->prov);
		ts = bw_prov_when(sbw, s->prov);
		if (td != (time_t)-1 && (ts == (time_t)-1 || ts < td))
			return 0;
	}
	return 1;
}

static int merge_inter(struct pipette_bwcache *dst, const struct pipette_bwcache *src,
		       const int *map, const int *prov_map, struct pipette_err *err)
{
	int i, j;

	for (i = 0; i < src->n; i++)
		for (j = 0; j < src->n; j++) {
			struct bw_entry s, d;

			if (i == j)
				continue;
			bw_inter_get(src, i, j, &s);
			if (isnan(s.gbps))
				continue;
			bw_inter_get(dst, map[i], map[j], &d);
			if (replaces(&d, dst, &s, src) &&
			    bw_inter_set(dst, map[i], map[j], s.gbps, s.code, s.lat,
					 s.prov < 0 ? -1 : prov_map[s.prov], err) < 0)
				return -1;
		}
	return 0;
}

static int copy_json(char **dst, const char *src)
{
	char *s;

	if (!src)
		return 0;
	if (!(s = strdup(src)))
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

static int merge_node(struct bw_node *dn, struct pipette_bwcache *dst, const struct bw_node *sn,
		      const struct pipette_bwcache *src, const int *prov_map,
		      struct pipette_err *err)
{
	int a, b;

	if (bw_intra_reserve(dn, sn->intra.n, err) < 0)
		return -1;
	for (a = 0; a < sn->intra.n; a++)
		for (b = 0; b < sn->intra.n; b++) {
			struct bw_entry s, d;

			bw_intra_get(sn, a, b, &s);
			bw_intra_get(dn, a, b, &d);
			if (replaces(&d, dst, &s, src) &&
			    bw_mat_set(&dn->intra, a, b, s.gbps, s.code, s.lat,
				       s.prov < 0 ? -1 : prov_map[s.prov]) < 0)
				return pipette_fail(err, "out of memory merging caches");
		}
	if (copy_json(&dn->gpus_json, sn->gpus_json) < 0 ||
	    copy_json(&dn->topo_json, sn->topo_json) < 0)
		return pipette_fail(err, "out of memory merging caches");
	return 0;
}

int pipette_bwcache_merge(struct pipette_bwcache *dst,
			  const struct pipette_bwcache *src,
			  struct pipette_err *err)
{
	int *map = NULL, *prov_map = NULL;
	int rv = -1, i;

	map = malloc(((size_t)src->n + 1) * sizeof(int));
	prov_map = malloc(((size_t)src->n_prov + 1) * sizeof(int));
	if (!map || !prov_map) {
		pipette_fail(err, "out of memory merging caches");
		goto fail;
	}
	for (i = 0; i < src->n_prov; i++) {
		struct pipette_bw_prov p;

		prov_get(src, i, &p);
		if ((prov_map[i] = bw_prov_intern(dst, &p, err)) < 0)
			goto fail;
	}
	for (i = 0; i < src->n; i++)
		if ((map[i] = pipette_bwcache_add_node(dst, src->node[i].name, err)) < 0)
			goto fail;
	if (merge_inter(dst, src, map, prov_map, err) < 0)
		goto fail;
	for (i = 0; i < src->n; i++)
		if (merge_node(&dst->node[map[i]], dst, &src->node[i], src, prov_map, err) < 0 ||
		    (src->node[i].domain >= 0 &&
		     pipette_bwcache_set_domain(dst, src->node[i].name,
						src->domain[src->node[i].domain].name,
						src->domain[src->node[i].domain].gpus, 1, err) < 0))
			goto fail;
	if (!isnan(src->def.inter_gbps))
		dst->def.inter_gbps = src->def.inter_gbps;
	if (!isnan(src->def.intra_gbps))
		dst->def.intra_gbps = src->def.intra_gbps;
	if (!isnan(src->def.inter_lat_us))
		dst->def.inter_lat_us = src->def.inter_lat_us;
	if (!isnan(src->def.intra_lat_us))
		dst->def.intra_lat_us = src->def.intra_lat_us;
	if (src->generated != (time_t)-1 &&
	    (dst->generated == (time_t)-1 || src->generated > dst->generated))
		dst->generated = src->generated;
	rv = 0;
fail:
	free(map);
	free(prov_map);
	return rv;
}

/* ------------------------------------------------------------------ */
/* staleness                                                           */

struct stale_acc {
	const struct pipette_bwcache *bw;
	time_t cutoff;
	int count, unknown, total;
	time_t oldest;
	char where[2 * PIPETTE_BW_MAX_NAME + 32];
	/* The first pass counts figures by provenance (hist[prov + 1]; prov
	 * -1, no timestamp, at 0), the second finds the first figure, in
	 * the order of the nodes, of the oldest stale time: find >= 0. */
	long *hist;
	time_t find;
	int found;
};

/* Count a figure of provenance prov (-2: none, unmeasured); in the second
 * pass, 1 for the first figure of the oldest stale time. */
static int stale_visit(struct stale_acc *acc, int prov)
{
	if (prov == -2 || acc->found)
		return 0;
	if (acc->find == (time_t)-1) {
		acc->hist[prov + 1]++;
		return 0;
	}
	if (prov < 0 || bw_prov_when(acc->bw, prov) != acc->find)
		return 0;
	acc->found = 1;
	return 1;
}

/* The provenance of the figure a -> b (its own, else its groups'), -2
 * when there is none: what staleness needs, without decoding figures. */
static int inter_prov(const struct pipette_bwcache *bw, int a, int b)
{
	const struct bw_inter *in = &bw->inter;
	struct bw_entry e;
	int ga, gb;

	if (in->dense) {
		size_t c = (size_t)a * in->mat.cap + b;

		if (in->mat.code[c] != BW_NONE)
			return in->mat.prov ? in->mat.prov[c] : in->mat.prov0;
	} else if (bw_pairs_get(&in->pairs, a, b, &e)) {
		return e.prov;
	}
	if (!in->n_groups || (ga = in->group_of[a]) < 0 || (gb = in->group_of[b]) < 0 ||
	    !bw_mat_has(&in->between, ga, gb))
		return -2;
	return in->between.prov ? in->between.prov[(size_t)ga * in->between.cap + gb]
				: in->between.prov0;
}

/* The provenance of group ga's figure to each group g into gprov[g] (-2:
 * none). */
static void group_provs(const struct pipette_bwcache *bw, int ga, int *gprov)
{
	const struct bw_inter *in = &bw->inter;
	int g;

	for (g = 0; ga >= 0 && g < in->n_groups; g++)
		gprov[g] = !bw_mat_has(&in->between, ga, g) ? -2 :
			   in->between.prov ? in->between.prov[(size_t)ga * in->between.cap + g]
					    : in->between.prov0;
}

/* The first pass's counts of node idx[i]'s figures to the other nodes
 * of idx, as stale_row_sparse's row and stale_node would count them, but
 * without the row: each group's figure once per node of idx in that
 * group (in_group; i itself not), then each pair of the node's own in
 * place of its group's figure.  A node's cost is its groups and pairs,
 * not the cache's nodes. */
static void stale_count_sparse(struct stale_acc *acc, const int *idx, int i, const int *pos,
			       int *gprov, const long *in_group)
{
	const struct bw_inter *in = &acc->bw->inter;
	int a = idx[i], ga = in->n_groups ? in->group_of[a] : -1, g, j;
	const struct bw_pair_row *r;
	uint32_t s;

	group_provs(acc->bw, ga, gprov);
	for (g = 0; ga >= 0 && g < in->n_groups; g++)
		if (gprov[g] != -2)
			acc->hist[gprov[g] + 1] += in_group[g] - (g == ga);
	if (a >= in->pairs.n_rows)
		return;
	r = &in->pairs.row[a];
	for (s = 0; s < r->n_slot; s++) {
		int b, gb;

		if (!r->slot[s].key || (j = pos[(b = (int)r->slot[s].key - 1)]) < 0 || j == i)
			continue;
		gb = ga >= 0 ? in->group_of[b] : -1;
		if (gb >= 0 && gprov[gb] != -2)
			acc->hist[gprov[gb] + 1]--;
		acc->hist[r->slot[s].prov + 1]++;
	}
}

/* The first pass's counts of node idx[i]'s figures to the other nodes
 * of a dense cache: inter_prov's provenance of each pair, read off the
 * node's row of codes in one loop. */
static void stale_count_dense(struct stale_acc *acc, const int *idx, int n, int i)
{
	const struct bw_inter *in = &acc->bw->inter;
	const struct bw_mat *m = &in->mat;
	size_t row = (size_t)idx[i] * m->cap;
	int j;

	for (j = 0; j < n; j++) {
		size_t c = row + idx[j];

		if (j == i)
			continue;
		if (m->code[c] != BW_NONE)
			acc->hist[(m->prov ? m->prov[c] : m->prov0) + 1]++;
		else
			stale_visit(acc, inter_prov(acc->bw, idx[i], idx[j]));
	}
}

/* The provenance of every figure idx[i] -> idx[j] into row[j] (-2: none),
 * as inter_prov gives it, from one pass over the node's own pairs and its
 * group's row of "between" instead of a lookup per node pair: staleness
 * visits every pair of a 4096-node cache (issue 30: validate <= 0.5 s).
 * pos[k] is cache node k's place in idx (-1: not there); gprov has room
 * for the groups. */
static void stale_row_sparse(const struct pipette_bwcache *bw, const int *idx, int n, int i,
			     const int *pos, int *gprov, int *row)
{
	const struct bw_inter *in = &bw->inter;
	int a = idx[i], ga = in->n_groups ? in->group_of[a] : -1, j;
	const struct bw_pair_row *r;
	uint32_t s;

	group_provs(bw, ga, gprov);
	for (j = 0; j < n; j++) {
		int gb = ga >= 0 ? in->group_of[idx[j]] : -1;

		row[j] = gb >= 0 ? gprov[gb] : -2;
	}
	if (a >= in->pairs.n_rows)
		return;
	r = &in->pairs.row[a];
	for (s = 0; s < r->n_slot; s++)
		if (r->slot[s].key && (j = pos[r->slot[s].key - 1]) >= 0)
			row[j] = r->slot[s].prov;
}

/* The figures between the GPUs of node nd. */
static void stale_intra(struct stale_acc *acc, const struct bw_node *nd)
{
	struct bw_entry e;
	int a, b;

	for (a = 0; a < nd->intra.n; a++)
		for (b = 0; b < nd->intra.n; b++) {
			bw_intra_get(nd, a, b, &e);
			if (stale_visit(acc, isnan(e.gbps) ? -2 : e.prov))
				snprintf(acc->where, sizeof(acc->where), "%s GPU %d -> %d",
					 nd->name, a, b);
		}
}

/* The figures of one node: to the other nodes (row: their provenance, or
 * NULL to look each up), and between its GPUs. */
static void stale_node(struct stale_acc *acc, const int *idx, int n, int i, const int *row)
{
	const struct pipette_bwcache *bw = acc->bw;
	const struct bw_node *nd = &bw->node[idx[i]];
	int j;

	if (row && acc->find == (time_t)-1) {	/* the first pass: counts only */
		for (j = 0; j < n; j++)
			if (j != i && row[j] != -2)
				acc->hist[row[j] + 1]++;
	} else {
		for (j = 0; j < n && !acc->found; j++) {
			if (i == j)
				continue;
			if (stale_visit(acc, row ? row[j] : inter_prov(bw, idx[i], idx[j])))
				snprintf(acc->where, sizeof(acc->where), "%s -> %s", nd->name,
					 bw->node[idx[j]].name);
		}
	}
	stale_intra(acc, nd);
}

/* Every node's figures in the order of idx (one pass: acc->find -1, the
 * counts; else until the figure found); sparse caches row by row. */
static void stale_nodes(struct stale_acc *acc, const int *idx, int n)
{
	const struct pipette_bwcache *bw = acc->bw;
	int *pos = NULL, *row = NULL, *gprov = NULL, i;
	long *in_group = NULL;

	if (!bw->inter.dense) {
		pos = malloc(((size_t)bw->n + 1) * sizeof(int));
		row = malloc(((size_t)n + 1) * sizeof(int));
		gprov = malloc(((size_t)bw->inter.n_groups + 1) * sizeof(int));
		in_group = calloc((size_t)bw->inter.n_groups + 1, sizeof(long));
		if (pos && row && gprov && in_group) {
			for (i = 0; i < bw->n; i++)
				pos[i] = -1;
			for (i = 0; i < n && pos; i++) {
				if (pos[idx[i]] >= 0) {	/* a node named twice */
					free(pos);
					pos = NULL;
				} else {
					pos[idx[i]] = i;
				}
			}
		}
	}
	for (i = 0; pos && in_group && i < n; i++)
		if (bw->inter.group_of[idx[i]] >= 0)
			in_group[bw->inter.group_of[idx[i]]]++;
	for (i = 0; i < n && !acc->found; i++) {
		int fast = pos && row && gprov && in_group;

		if (acc->find == (time_t)-1 && (fast || bw->inter.dense)) {
			/* the first pass: counts only */
			if (fast)
				stale_count_sparse(acc, idx, i, pos, gprov, in_group);
			else
				stale_count_dense(acc, idx, n, i);
			stale_intra(acc, &bw->node[idx[i]]);
			continue;
		}
		if (fast)
			stale_row_sparse(bw, idx, n, i, pos, gprov, row);
		stale_node(acc, idx, n, i, fast ? row : NULL);
	}
	free(pos);
	free(row);
	free(gprov);
	free(in_group);
}

/* The counts of the first pass: the stale and untimed figures, and the
 * oldest stale time (-1: none). */
static void stale_tally(struct stale_acc *acc)
{
	const struct pipette_bwcache *bw = acc->bw;

	for (int p = -1; p < bw->n_prov; p++) {
		long c = acc->hist[p + 1];
		time_t t = bw_prov_when(bw, p);

		if (!c)
			continue;
		acc->total += (int)c;
		if (t == (time_t)-1)
			acc->unknown += (int)c;
		else if (t < acc->cutoff) {
			acc->count += (int)c;
			if (acc->oldest == (time_t)-1 || t < acc->oldest)
				acc->oldest = t;
		}
	}
}

int pipette_bwcache_stale(const struct pipette_bwcache *bw,
			  const char *const *nodes, int n_nodes, time_t now,
			  double max_age_s, char *msg, size_t msg_size)
{
	struct stale_acc acc;
	int *idx, n = 0, i;
	char when[32];

	if (msg && msg_size)
		msg[0] = '\0';
	memset(&acc, 0, sizeof(acc));
	acc.bw = bw;
	acc.oldest = acc.find = (time_t)-1;
	acc.cutoff = now - (time_t)max_age_s;
	idx = malloc(((size_t)(nodes ? n_nodes : bw->n) + 1) * sizeof(int));
	acc.hist = calloc((size_t)bw->n_prov + 1, sizeof(long));
	if (!idx || !acc.hist) {
		free(idx);
		free(acc.hist);
		return 0;
	}
	if (nodes) {
		for (i = 0; i < n_nodes; i++) {
			int k = pipette_bwcache_node_index(bw, nodes[i]);

			if (k >= 0)
				idx[n++] = k;
		}
	} else {
		for (i = 0; i < bw->n; i++)
			idx[n++] = i;
	}
	stale_nodes(&acc, idx, n);
	stale_tally(&acc);
	if (acc.count) {	/* where the oldest stale figure is: the first in order */
		acc.find = acc.oldest;
		stale_nodes(&acc, idx, n);
	}
	free(idx);
	free(acc.hist);
	if (msg && acc.count)
		snprintf(msg, msg_size, "%d of %d measured figures are older than "
			 "%g days (oldest: %s, measured %s)%s", acc.count, acc.total,
			 max_age_s / 86400.0, acc.where,
			 pipette_bw_format_time(acc.oldest, when, sizeof(when)),
			 acc.unknown ? "; others have no timestamp" : "");
	else if (msg && acc.unknown)
		snprintf(msg, msg_size, "%d of %d measured figures have no "
			 "timestamp; their age is unknown", acc.unknown, acc.total);
	return acc.count + acc.unknown;
}
