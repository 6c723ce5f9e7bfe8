/* pipette: writing bandwidth cache files (format: bwcache.h): the
 * canonical text, the lock of concurrent writers, atomic replacement.  The
 * reader is bwcache_parse.c. */
#define _GNU_SOURCE	/* F_OFD_SETLK (glibc declares it for _GNU_SOURCE only) */
#include "inputs/bwcache.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inputs/bwcache_int.h"
#include "inputs/json.h"
#include "inputs/readfile.h"
#include "inputs/versions.h"

/* ------------------------------------------------------------------ */
/* writing                                                             */

struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

/* Room for n more bytes and the terminator (capacity doubled past
 * them); -1 and oom set when out of memory. */
static int sb_grow(struct sbuf *sb, size_t n)
{
	size_t cap = (sb->cap + n + 1) * 2;
	char *np = realloc(sb->p, cap);

	if (!np) {
		sb->oom = 1;
		return -1;
	}
	sb->p = np;
	sb->cap = cap;
	return 0;
}

__attribute__((format(printf, 2, 3)))
static void sb_add(struct sbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (sb->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(sb->p ? sb->p + sb->len : NULL, sb->cap - sb->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			sb->oom = 1;
			return;
		}
		if ((size_t)n < sb->cap - sb->len) {
			sb->len += (size_t)n;
			return;
		}
		if (sb_grow(sb, (size_t)n))
			return;
	}
}

static void sb_str(struct sbuf *sb, const char *s)
{
	const unsigned char *p;

	if (!s) {
		sb_add(sb, "null");
		return;
	}
	sb_add(sb, "\"");
	for (p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			sb_add(sb, "\\%c", *p);
		else if (*p < 0x20)
			sb_add(sb, "\\u%04x", *p);
		else
			sb_add(sb, "%c", *p);
	}
	sb_add(sb, "\"");
}

/* Shortest decimal that reads back as the same value (a double, or a float
 * when is_float), in plain notation for the magnitudes of bandwidths,
 * latencies and message sizes. */
static int reads_back(const char *buf, double v, int is_float)
{
	return is_float ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v;
}

static void sb_short(struct sbuf *sb, double v, int is_float)
{
	char buf[64];
	int prec;

	if (isnan(v)) {
		sb_add(sb, "null");
		return;
	}
	if (v == 0) {
		sb_add(sb, "0");	/* also -0 */
		return;
	}
	if (fabs(v) >= 1e-4 && fabs(v) < (is_float ? 1e7 : 1e15)) {
		for (prec = 0; prec <= 12; prec++) {
			snprintf(buf, sizeof(buf), "%.*f", prec, v);
			if (reads_back(buf, v, is_float)) {
				sb_add(sb, "%s", buf);
				return;
			}
		}
	}
	for (prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (reads_back(buf, v, is_float))
			break;
	}
	sb_add(sb, "%s", buf);
}

static void sb_num(struct sbuf *sb, double v)
{
	sb_short(sb, v, 0);
}

static void sb_flt(struct sbuf *sb, float v)
{
	sb_short(sb, (double)v, 1);
}

static void sb_time(struct sbuf *sb, time_t t)
{
	char buf[32];

	if (t == (time_t)-1)
		sb_add(sb, "null");
	else
		sb_add(sb, "\"%s\"", pipette_bw_format_time(t, buf, sizeof(buf)));
}

/* Bytes as they are, for the long runs of figures. */
static void sb_raw(struct sbuf *sb, const char *s, size_t n)
{
	if (sb->oom)
		return;
	if (sb->len + n + 1 > sb->cap && sb_grow(sb, n))
		return;
	memcpy(sb->p + sb->len, s, n);
	sb->len += n;
	sb->p[sb->len] = '\0';
}

/* A bandwidth: its short code's digits when they are what sb_num would
 * write (bw_code_text), else sb_num's. */
static void sb_gbps(struct sbuf *sb, const struct bw_entry *e)
{
	char buf[32];
	int n;

	if (isnan(e->gbps)) {
		sb_raw(sb, "null", 4);
		return;
	}
	if (e->code != BW_NONE && (n = bw_code_text(e->code, buf)) > 0)
		sb_raw(sb, buf, (size_t)n);
	else
		sb_num(sb, e->gbps);
}

struct skey {
	int prov;
	float lat;
};

static int skey_cmp(const struct skey *a, const struct skey *b)
{
	if (a->prov != b->prov)
		return a->prov < b->prov ? -1 : 1;
	if (isnan(a->lat) || isnan(b->lat))
		return isnan(b->lat) - isnan(a->lat);
	return a->lat < b->lat ? -1 : a->lat > b->lat;
}

static int skey_eq(const struct skey *a, const struct bw_entry *e)
{
	struct skey k = { e->prov, e->lat };

	return skey_cmp(a, &k) == 0;
}

/* The cells a section writes: a node's GPU pairs, the node pairs (their
 * own figures, less those equal to their groups'), or the group pairs. */
struct wsec {
	const struct pipette_bwcache *bw;
	int node;	/* >= 0: its intra; W_INTER; W_BETWEEN */
	int n;
};

#define W_INTER (-1)
#define W_BETWEEN (-2)

static int same_entry(const struct bw_entry *a, const struct bw_entry *b)
{
	struct skey k = { a->prov, a->lat };

	return a->gbps == b->gbps && skey_eq(&k, b);
}

static void wget(const struct wsec *w, int a, int b, struct bw_entry *e)
{
	const struct pipette_bwcache *bw = w->bw;
	int ga, gb;

	if (w->node >= 0) {
		bw_intra_get(&bw->node[w->node], a, b, e);
		return;
	}
	if (w->node == W_BETWEEN) {
		bw_mat_get(&bw->inter.between, a, b, e);
		return;
	}
	bw_inter_own(bw, a, b, e);
	if (isnan(e->gbps) || !bw->inter.n_groups)
		return;
	ga = bw->inter.group_of[a];
	gb = bw->inter.group_of[b];
	if (ga >= 0 && gb >= 0) {
		struct bw_entry g;

		bw_mat_get(&bw->inter.between, ga, gb, &g);
		if (same_entry(e, &g))
			e->gbps = NAN;	/* the groups' figure says it */
	}
}

/* Counts of (provenance, latency) keys: a hash, since a matrix of 16.7M
 * cells holds a handful of keys (and sorting the cells took seconds). */
struct kcount {
	struct skey *key;
	size_t *cnt;
	size_t n, n_slot;
};

static uint32_t lat_bits(float lat)
{
	uint32_t u;

	if (isnan(lat))
		return 0x7fc00000u;
	if (lat == 0)
		lat = 0;	/* -0 counts as 0, as skey_cmp has it */
	memcpy(&u, &lat, sizeof(u));
	return u;
}

static size_t kslot(const struct kcount *kc, const struct skey *k)
{
	uint64_t h = ((uint64_t)(uint32_t)k->prov << 32 | lat_bits(k->lat)) *
		     0x9E3779B97F4A7C15ULL;	/* Fibonacci hashing, as bwmat.c */
	size_t s = (size_t)(h >> 32) & (kc->n_slot - 1);

	while (kc->cnt[s] && skey_cmp(&kc->key[s], k))
		s = (s + 1) & (kc->n_slot - 1);
	return s;
}

static int kcount_add(struct kcount *kc, const struct skey *k)
{
	size_t s;

	if (2 * (kc->n + 1) > kc->n_slot) {
		struct kcount g = { NULL, NULL, 0, kc->n_slot ? 2 * kc->n_slot : 16 };
		size_t i;

		g.key = malloc(g.n_slot * sizeof(*g.key));
		g.cnt = calloc(g.n_slot, sizeof(*g.cnt));
		if (!g.key || !g.cnt) {
			free(g.key);
			free(g.cnt);
			return -1;
		}
		for (i = 0; i < kc->n_slot; i++)
			if (kc->cnt[i]) {
				s = kslot(&g, &kc->key[i]);
				g.key[s] = kc->key[i];
				g.cnt[s] = kc->cnt[i];
			}
		g.n = kc->n;
		free(kc->key);
		free(kc->cnt);
		*kc = g;
	}
	s = kslot(kc, k);
	if (!kc->cnt[s]) {
		kc->key[s] = *k;
		kc->n++;
	}
	kc->cnt[s]++;
	return 0;
}

/* The (provenance, latency) shared by most measured cells; ties go to the
 * smallest key, so the choice is deterministic.  0: no measured cell. */
static int dominant(const struct wsec *w, struct skey *out)
{
	struct kcount kc = { NULL, NULL, 0, 0 };
	size_t best = 0, i;
	int a, b, rv = 0;

	for (a = 0; a < w->n; a++)
		for (b = 0; b < w->n; b++) {
			struct bw_entry e;
			struct skey k;

			wget(w, a, b, &e);
			if (isnan(e.gbps))
				continue;
			k.prov = e.prov;
			k.lat = e.lat;
			if (kcount_add(&kc, &k) < 0) {
				rv = -1;
				goto out;
			}
		}
	for (i = 0; i < kc.n_slot; i++)
		if (kc.cnt[i] && (kc.cnt[i] > best ||
				  (kc.cnt[i] == best && skey_cmp(&kc.key[i], out) < 0))) {
			best = kc.cnt[i];
			*out = kc.key[i];
		}
	rv = best > 0;
out:
	free(kc.key);
	free(kc.cnt);
	return rv;
}

static void write_prov(struct sbuf *sb, const struct pipette_bwcache *bw,
		       int prov, const char *sep)
{
	const struct bw_prov_rec *r = prov >= 0 ? &bw->prov[prov] : NULL;

	sb_add(sb, "\"tool\": ");
	sb_str(sb, r ? r->tool : NULL);
	sb_add(sb, ",%s\"metric\": ", sep);
	sb_str(sb, r ? r->metric : NULL);
	sb_add(sb, ",%s\"bytes\": ", sep);
	if (r && r->bytes > 0)
		sb_num(sb, r->bytes);
	else
		sb_add(sb, "null");
	sb_add(sb, ",%s\"when\": ", sep);
	sb_time(sb, r ? r->when : (time_t)-1);
}

static int streq_null(const char *a, const char *b)
{
	return a && b ? !strcmp(a, b) : a == b;
}

/* The keys of link e that differ from the section's (pipette-bw/2: a link
 * inherits the others). */
static void write_prov_diff(struct sbuf *sb, const struct pipette_bwcache *bw,
			    const struct bw_entry *e, const struct skey *sec)
{
	static const struct bw_prov_rec none = { NULL, NULL, 0, (time_t)-1 };
	const struct bw_prov_rec *r = e->prov >= 0 ? &bw->prov[e->prov] : &none;
	const struct bw_prov_rec *s = sec->prov >= 0 ? &bw->prov[sec->prov] : &none;

	if (skey_cmp(&(struct skey){ sec->prov, e->lat }, sec)) {
		sb_add(sb, ", \"lat_us\": ");
		sb_flt(sb, e->lat);
	}
	if (!streq_null(r->tool, s->tool)) {
		sb_add(sb, ", \"tool\": ");
		sb_str(sb, r->tool);
	}
	if (!streq_null(r->metric, s->metric)) {
		sb_add(sb, ", \"metric\": ");
		sb_str(sb, r->metric);
	}
	if ((r->bytes > 0 ? r->bytes : 0) != (s->bytes > 0 ? s->bytes : 0)) {
		sb_add(sb, ", \"bytes\": ");
		if (r->bytes > 0)
			sb_num(sb, r->bytes);
		else
			sb_add(sb, "null");
	}
	if (r->when != s->when) {
		sb_add(sb, ", \"when\": ");
		sb_time(sb, r->when);
	}
}

/* The matrix of a section: rows of figures, null where there is none. */
static void write_matrix(struct sbuf *sb, const struct wsec *w, const char *key,
			 const char *ind)
{
	int a, b;

	sb_add(sb, "%s  \"%s\": [", ind, key);
	for (a = 0; a < w->n; a++) {
		sb_add(sb, "%s\n%s    [", a ? "," : "", ind);
		for (b = 0; b < w->n; b++) {
			struct bw_entry e;

			if (b)
				sb_raw(sb, ", ", 2);
			wget(w, a, b, &e);
			sb_gbps(sb, &e);
		}
		sb_raw(sb, "]", 1);
	}
	if (w->n)
		sb_add(sb, "\n%s  ]", ind);
	else
		sb_add(sb, "]");
}

/* The links of a section: with a matrix, the cells whose provenance or
 * latency is not the section's, every key written (as pipette-bw/1 has
 * always had them); without (pipette-bw/2), every figure, with the keys
 * that differ from the section's. */
static void write_links(struct sbuf *sb, const struct wsec *w, const struct skey *dom,
			int with_matrix, const char *ind)
{
	const struct pipette_bwcache *bw = w->bw;
	int a, b, first = 1;

	for (a = 0; a < w->n; a++)
		for (b = 0; b < w->n; b++) {
			struct bw_entry e;

			wget(w, a, b, &e);
			if (isnan(e.gbps) || (with_matrix && skey_eq(dom, &e)))
				continue;
			sb_add(sb, first ? ",\n%s  \"links\": [\n" : ",\n", ind);
			first = 0;
			sb_add(sb, "%s    {\"a\": ", ind);
			if (w->node < 0) {
				sb_str(sb, bw->node[a].name);
				sb_add(sb, ", \"b\": ");
				sb_str(sb, bw->node[b].name);
			} else {
				sb_add(sb, "%d, \"b\": %d", a, b);
			}
			sb_add(sb, ", \"gbps\": ");
			sb_gbps(sb, &e);
			if (with_matrix) {
				sb_add(sb, ", \"lat_us\": ");
				sb_flt(sb, e.lat);
				sb_add(sb, ", ");
				write_prov(sb, bw, e.prov, " ");
			} else {
				write_prov_diff(sb, bw, &e, dom);
			}
			sb_add(sb, "}");
		}
	if (!first)
		sb_add(sb, "\n%s  ]", ind);
}

/* Runs of the nodes whose of[i] is v, as index ranges into "order". */
static void write_runs(struct sbuf *sb, const struct pipette_bwcache *bw, const int *of, int v)
{
	const char *sep = "";
	int i;

	for (i = 0; i < bw->n; i++) {
		int j = i;

		if (of[i] != v)
			continue;
		while (j + 1 < bw->n && of[j + 1] == v)
			j++;
		sb_add(sb, "%s[%d, %d]", sep, i, j);
		sep = ", ";
		i = j;
	}
}

/* $.inter.groups and $.inter.between: each group's nodes as index ranges
 * into "order". */
static void write_groups(struct sbuf *sb, const struct pipette_bwcache *bw)
{
	const struct bw_inter *in = &bw->inter;
	struct wsec w = { bw, W_BETWEEN, in->n_groups };
	int g;

	sb_add(sb, "    \"groups\": [");
	for (g = 0; g < in->n_groups; g++) {
		sb_add(sb, "%s\n      {\"name\": ", g ? "," : "");
		sb_str(sb, in->group_name[g]);
		sb_add(sb, ", \"nodes\": [");
		write_runs(sb, bw, in->group_of, g);
		sb_add(sb, "]}");
	}
	sb_add(sb, in->n_groups ? "\n    ],\n" : "],\n");
	write_matrix(sb, &w, "between", "  ");
}

/* $.domains (pipette-bw/3): each NVLink domain's nodes as index ranges
 * into "order" (every node is in it). */
static void write_domains(struct sbuf *sb, const struct pipette_bwcache *bw)
{
	int *of, d, i;

	if (!bw->n_domains)
		return;
	if (!(of = malloc(((size_t)bw->n + 1) * sizeof(int)))) {
		sb->oom = 1;
		return;
	}
	for (i = 0; i < bw->n; i++)
		of[i] = bw->node[i].domain;
	sb_add(sb, ",\n  \"domains\": [");
	for (d = 0, i = 0; d < bw->n_domains; d++) {
		int k;

		for (k = 0; k < bw->n && of[k] != d; k++)
			;
		if (k == bw->n)
			continue;	/* its nodes all moved (a merge) */
		sb_add(sb, "%s\n    {\"name\": ", i++ ? "," : "");
		sb_str(sb, bw->domain[d].name);
		if (bw->domain[d].gpus)
			sb_add(sb, ", \"gpus\": %d", bw->domain[d].gpus);
		sb_add(sb, ", \"nodes\": [");
		write_runs(sb, bw, of, d);
		sb_add(sb, "]}");
	}
	sb_add(sb, "\n  ]");
	free(of);
}

/* The section's header: provenance and latency of its matrix figures. */
static void write_header(struct sbuf *sb, const struct pipette_bwcache *bw,
			 const struct skey *dom, const char *ind)
{
	char sep[48];

	snprintf(sep, sizeof(sep), "\n%s  ", ind);
	sb_add(sb, "%s  ", ind);
	write_prov(sb, bw, dom->prov, sep);
	sb_add(sb, ",\n");
	if (!isnan(dom->lat)) {
		sb_add(sb, "%s  \"lat_us\": ", ind);
		sb_flt(sb, dom->lat);
		sb_add(sb, ",\n");
	}
}

/* Whether a pipette-bw/2 section writes a matrix: when more than one pair
 * in eight has a figure of its own, where a matrix is the shorter text
 * (about 6 bytes a cell against about 45 a link). */
static int v2_matrix(const struct wsec *w)
{
	size_t cnt = 0;
	int a, b;

	for (a = 0; a < w->n; a++)
		for (b = 0; b < w->n; b++) {
			struct bw_entry e;

			wget(w, a, b, &e);
			cnt += !isnan(e.gbps);
		}
	return cnt * 8 > (size_t)w->n * (size_t)w->n;
}

/* One section: inter (node < 0) or node's intra; ind = its indentation. */
static int write_section(struct sbuf *sb, const struct pipette_bwcache *bw,
			 int node, const char *ind)
{
	struct wsec w = { bw, node, node < 0 ? bw->n : bw->node[node].intra.n };
	const struct bw_mat *bt = &bw->inter.between;
	struct skey dom = { -1, NAN };
	int has, a, groups = node < 0 && bw->inter.n_groups, matrix = 1;

	if (groups && bt->has0) {
		dom.prov = bt->prov0;	/* every group figure has these */
		dom.lat = bt->lat0;
		has = 1;
	} else if ((has = dominant(&w, &dom)) < 0) {
		return -1;
	}
	sb_add(sb, "{\n");
	if (has)
		write_header(sb, bw, &dom, ind);
	if (node < 0) {
		sb_add(sb, "%s  \"order\": [", ind);
		for (a = 0; a < w.n; a++) {
			sb_add(sb, a ? ", " : "");
			sb_str(sb, bw->node[a].name);
		}
		sb_add(sb, "],\n");
	}
	if (groups) {
		write_groups(sb, bw);
		if ((matrix = v2_matrix(&w)))
			sb_add(sb, ",\n");
	}
	if (matrix)
		write_matrix(sb, &w, "matrix", ind);
	write_links(sb, &w, &dom, matrix, ind);
	sb_add(sb, "\n%s}", ind);
	return 0;
}

char *pipette_bwcache_serialize(const struct pipette_bwcache *bw,
				struct pipette_err *err)
{
	struct sbuf sb = { NULL, 0, 0, 0 };
	const struct pipette_bw_defaults *d = &bw->def;
	int i, first;

	sb_add(&sb, "{\n  \"schema\": \"%s\",\n  \"units\": \"GB/s\"",
	       bw->n_domains ? PIPETTE_BW_SCHEMA_V3 : bw->inter.n_groups ? PIPETTE_BW_SCHEMA_V2
									 : PIPETTE_BW_SCHEMA);
	if (bw->generated != (time_t)-1) {
		sb_add(&sb, ",\n  \"generated\": ");
		sb_time(&sb, bw->generated);
	}
	if (bw->generator) {
		sb_add(&sb, ",\n  \"generator\": ");
		sb_str(&sb, bw->generator);
	}
	if (!isnan(d->inter_gbps) || !isnan(d->intra_gbps) ||
	    !isnan(d->inter_lat_us) || !isnan(d->intra_lat_us)) {
		const char *sep = "";

		sb_add(&sb, ",\n  \"defaults\": {");
		if (!isnan(d->inter_gbps)) {
			sb_add(&sb, "\"inter_gbps\": ");
			sb_num(&sb, d->inter_gbps);
			sep = ", ";
		}
		if (!isnan(d->intra_gbps)) {
			sb_add(&sb, "%s\"intra_gbps\": ", sep);
			sb_num(&sb, d->intra_gbps);
			sep = ", ";
		}
		if (!isnan(d->inter_lat_us)) {
			sb_add(&sb, "%s\"lat_us\": ", sep);
			sb_num(&sb, d->inter_lat_us);
			sep = ", ";
		}
		if (!isnan(d->intra_lat_us)) {
			sb_add(&sb, "%s\"intra_lat_us\": ", sep);
			sb_num(&sb, d->intra_lat_us);
		}
		sb_add(&sb, "}");
	}
	sb_add(&sb, ",\n  \"inter\": ");
	if (write_section(&sb, bw, -1, "  ") < 0)
		sb.oom = 1;
	first = 1;
	for (i = 0; i < bw->n; i++) {
		const struct bw_node *nd = &bw->node[i];
		const char *sep = "";

		if (!nd->intra.n && !nd->gpus_json && !nd->topo_json)
			continue;
		sb_add(&sb, first ? ",\n  \"nodes\": {\n    " : ",\n    ");
		first = 0;
		sb_str(&sb, nd->name);
		sb_add(&sb, ": {");
		if (nd->gpus_json) {
			sb_add(&sb, "\n      \"gpus\": %s", nd->gpus_json);
			sep = ",";
		}
		if (nd->topo_json) {
			sb_add(&sb, "%s\n      \"topo\": %s", sep, nd->topo_json);
			sep = ",";
		}
		if (nd->intra.n) {
			sb_add(&sb, "%s\n      \"intra\": ", sep);
			if (write_section(&sb, bw, i, "      ") < 0)
				sb.oom = 1;
		}
		sb_add(&sb, "\n    }");
	}
	if (!first)
		sb_add(&sb, "\n  }");
	write_domains(&sb, bw);
	sb_add(&sb, "\n}\n");
	if (sb.oom) {
		free(sb.p);
		pipette_fail(err, "out of memory writing the bandwidth cache");
		return NULL;
	}
	return sb.p;
}

/* ------------------------------------------------------------------ */
/* one writer at a time                                                */

struct pipette_bwcache_lock {
	int fd;
	char *path;		/* the cache file */
	char *lock_path;	/* PATH.lock */
};

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One attempt at an exclusive lock of the whole lock file.  Open file
 * description locks (F_OFD_SETLK, Linux >= 3.15, fcntl(2)) belong to the
 * descriptor, not the process, so a second descriptor in this process
 * cannot take or drop the lock by accident; where they are missing
 * (EINVAL: an older kernel or a file system without them) the classic
 * process-owned record lock serves, which is the same lock on the server
 * for NFS and the parallel file systems.  Never flock(2): on some of those
 * it locks only within one node.  *ofd says which kind is in use. */
static int try_lock(int fd, int *ofd)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
#ifdef F_OFD_SETLK
	if (*ofd) {
		if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
			return 0;
		if (errno != EINVAL)
			return -1;
		*ofd = 0;
	}
#endif
	*ofd = 0;
	return fcntl(fd, F_SETLK, &fl);
}

/* Lock attempts back off from 5 ms to 100 ms: a save of a large cache
 * takes tens of milliseconds, and a waiter should not spin. */
#define LOCK_SLEEP_MIN_S 0.005
#define LOCK_SLEEP_MAX_S 0.1

static int wait_lock(int fd, const char *path, const char *lock_path, double wait_s,
		     struct pipette_err *err)
{
	double deadline = mono_now() + wait_s, nap = LOCK_SLEEP_MIN_S;
	int ofd = 1;

	for (;;) {
		struct timespec ts;

		if (try_lock(fd, &ofd) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EACCES && errno != EAGAIN)
			return pipette_fail(err, "%s: cannot lock %s: %s (the file system "
					    "needs POSIX record locks: see "
					    "pipette-bandwidth(5))", path, lock_path,
					    strerror(errno));
		if (mono_now() + nap > deadline)
			return pipette_fail(err, "%s: another writer has held %s for more "
					    "than %g s; nothing was written", path,
					    lock_path, wait_s);
		ts.tv_sec = (time_t)nap;
		ts.tv_nsec = (long)((nap - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
		nap = nap * 2 > LOCK_SLEEP_MAX_S ? LOCK_SLEEP_MAX_S : nap * 2;
	}
}

int pipette_bwcache_lock(const char *path, double wait_s,
			 struct pipette_bwcache_lock **out, struct pipette_err *err)
{
	struct pipette_bwcache_lock *l;
	struct stat st;
	size_t n;

	*out = NULL;
	if (!path || !*path)
		return pipette_fail(err, "no output file given");
	/* The cache is replaced by rename(2): refuse to replace a directory
	 * or a device (a cache written to /dev/null must not become one). */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return pipette_fail(err, "%s: is %s, not a regular file (a cache is "
				    "replaced by rename)", path,
				    S_ISDIR(st.st_mode) ? "a directory" : "a special file");
	n = strlen(path) + sizeof(".lock");
	l = calloc(1, sizeof(*l));
	if (!l || !(l->path = strdup(path)) || !(l->lock_path = malloc(n))) {
		pipette_bwcache_unlock(l);
		return pipette_fail(err, "%s: out of memory", path);
	}
	l->fd = -1;
	snprintf(l->lock_path, n, "%s.lock", path);
	/* O_NONBLOCK: a FIFO planted as the lock file must not hang us. */
	l->fd = open(l->lock_path, O_RDWR | O_CREAT | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW |
		     O_CLOEXEC, 0644);
	if (l->fd < 0) {
		pipette_fail(err, "%s: cannot create the lock file %s: %s", path,
			     l->lock_path, strerror(errno));
		goto fail;
	}
	if (fstat(l->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		pipette_fail(err, "%s: the lock file %s is not a regular file", path,
			     l->lock_path);
		goto fail;
	}
	if (wait_lock(l->fd, path, l->lock_path, wait_s, err))
		goto fail;
	*out = l;
	return 0;
fail:
	pipette_bwcache_unlock(l);
	return -1;
}

void pipette_bwcache_unlock(struct pipette_bwcache_lock *l)
{
	if (!l)
		return;
	/* Closing the descriptor releases the lock; the lock file stays:
	 * removing it would let a waiter lock a file no longer in the
	 * directory while the next writer locks a new one. */
	if (l->fd >= 0)
		close(l->fd);
	free(l->path);
	free(l->lock_path);
	free(l);
}

/* ------------------------------------------------------------------ */
/* atomic replacement                                                  */

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Temporary files are ".BASE.tmp.PID.XXXXXX" beside the cache (mkstemp
 * fills the X); older versions of pipette named them ".BASE.tmp-XXXXXX".
 * One that exists while the lock is held is a killed writer's: every
 * writer holds the lock from before it creates its temporary file until
 * after it renamed or removed it. */
static int is_temp_name(const char *name, const char *base)
{
	size_t b = strlen(base), i;
	const char *p;

	if (name[0] != '.' || strncmp(name + 1, base, b) || strncmp(name + 1 + b, ".tmp", 4))
		return 0;
	p = name + 1 + b + 4;
	if (*p == '-')
		return strlen(p + 1) == 6;
	if (*p++ != '.' || !isdigit((unsigned char)*p))
		return 0;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p++ != '.' || strlen(p) != 6)
		return 0;
	for (i = 0; i < 6; i++)
		if (!isalnum((unsigned char)p[i]))
			return 0;
	return 1;
}

static void remove_dead_temps(const char *dir, const char *base)
{
	char full[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!is_temp_name(de->d_name, base) ||
		    snprintf(full, sizeof(full), "%s/%s", dir, de->d_name) >= (int)sizeof(full))
			continue;
		/* Best effort: a leftover we cannot remove harms nothing. */
		if (lstat(full, &st) == 0 && S_ISREG(st.st_mode))
			unlink(full);
	}
	closedir(d);
}

/* Write text to a temporary file in dir, fsync it, give it `mode`. */
static int write_temp(const char *path, const char *dir, const char *base,
		      const char *text, mode_t mode, char **tmp_out, struct pipette_err *err)
{
	size_t tlen = strlen(dir) + strlen(base) + 48;
	char *tmp = malloc(tlen);
	int fd, bad, e;

	*tmp_out = NULL;
	if (!tmp)
		return pipette_fail(err, "%s: out of memory", path);
	snprintf(tmp, tlen, "%s/.%s.tmp.%ld.XXXXXX", dir, base, (long)getpid());
	fd = mkstemp(tmp);
	if (fd < 0) {
		pipette_fail(err, "%s: cannot create a temporary file in %s: %s", path, dir,
			     strerror(errno));
		free(tmp);
		return -1;
	}
	bad = write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0 || fchmod(fd, mode) < 0;
	e = errno;
	if (close(fd) < 0 && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad) {
		pipette_fail(err, "%s: cannot write %s: %s (the old file is untouched)", path,
			     tmp, strerror(e));
		unlink(tmp);
		free(tmp);
		return -1;
	}
	*tmp_out = tmp;
	return 0;
}

int pipette_bwcache_save_locked(const struct pipette_bwcache *bw,
				const struct pipette_bwcache_lock *lock,
				struct pipette_err *err)
{
	const char *path = lock->path, *dir, *base;
	char *text = NULL, *tmp = NULL, *dcopy = NULL, *bcopy = NULL;
	mode_t mode = 0644;
	struct stat st;
	int dfd, rv = -1;

	text = pipette_bwcache_serialize(bw, err);
	if (!text)
		return pipette_fail_prefix(err, "%s: ", path);
	dcopy = strdup(path);
	bcopy = strdup(path);
	if (!dcopy || !bcopy) {
		pipette_fail(err, "%s: out of memory", path);
		goto fail;
	}
	dir = dirname(dcopy);
	base = basename(bcopy);
	remove_dead_temps(dir, base);
	if (stat(path, &st) == 0) {
		if (!S_ISREG(st.st_mode)) {
			pipette_fail(err, "%s: not a regular file", path);
			goto fail;
		}
		mode = st.st_mode & 07777;
	}
	if (write_temp(path, dir, base, text, mode, &tmp, err))
		goto fail;
	/* Before the rename: the content it held and the one it gets stay
	 * readable for the steps that pinned them (versions.h). */
	if (pipette_versions_keep(path, "keeping the replaced version", text, strlen(text), mode,
				  PIPETTE_BW_MAX_FILE_BYTES, err)) {
		char why[PIPETTE_ERR_MAX];

		(void)pipette_strlcpy(why, err->msg, sizeof(why));
		pipette_fail(err, "%s: %.*s (the old file is untouched)", path, PIPETTE_ERR_MAX / 2,
			     why);
		unlink(tmp);
		goto fail;
	}
	if (rename(tmp, path) < 0) {
		pipette_fail(err, "%s: cannot replace it: %s (the old file is "
			     "untouched)", path, strerror(errno));
		unlink(tmp);
		goto fail;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		/* Make the rename durable; some file systems refuse fsync on
		 * a directory (EINVAL), which is not an error of ours. */
		if (fsync(dfd) < 0 && errno != EINVAL) {
			pipette_fail(err, "%s: written, but syncing %s failed: %s",
				     path, dir, strerror(errno));
			close(dfd);
			goto fail;
		}
		close(dfd);
	}
	rv = 0;
fail:
	free(text);
	free(tmp);
	free(dcopy);
	free(bcopy);
	return rv;
}

int pipette_bwcache_save(const struct pipette_bwcache *bw, const char *path,
			 struct pipette_err *err)
{
	struct pipette_bwcache_lock *lock;
	int rv;

	if (pipette_bwcache_lock(path, PIPETTE_BW_LOCK_WAIT_S, &lock, err))
		return -1;
	rv = pipette_bwcache_save_locked(bw, lock, err);
	pipette_bwcache_unlock(lock);
	return rv;
}

int pipette_bwcache_merge_file(const char *path, const struct pipette_bwcache *src,
			       struct pipette_err *err)
{
	struct pipette_bwcache_lock *lock;
	struct pipette_bwcache *dst = NULL;
	struct stat st;
	int rv = -1;

	if (pipette_bwcache_lock(path, PIPETTE_BW_LOCK_WAIT_S, &lock, err))
		return -1;
	if (stat(path, &st) < 0) {
		if (errno != ENOENT)
			pipette_fail(err, "%s: %s", path, strerror(errno));
		else
			rv = pipette_bwcache_save_locked(src, lock, err);
		goto out;
	}
	if (pipette_bwcache_load(path, &dst, err) ||
	    pipette_bwcache_merge(dst, src, err) ||
	    pipette_bwcache_save_locked(dst, lock, err))
		goto out;
	rv = 0;
out:
	pipette_bwcache_destroy(dst);
	pipette_bwcache_unlock(lock);
	return rv;
}
