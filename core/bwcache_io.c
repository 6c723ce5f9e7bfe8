/* pipette: reading and writing "pipette-bw/1" files (format: bwcache.h). */
#define _GNU_SOURCE	/* F_OFD_SETLK (glibc declares it for _GNU_SOURCE only) */
#include "bwcache.h"

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

#include "bwcache_int.h"
#include "json.h"
#include "readfile.h"

/* ------------------------------------------------------------------ */
/* parsing                                                             */

struct pctx {
	const char *src;
	struct pipette_bwcache *bw;
	struct pipette_err *err;
};

/* Provenance and latency of a section or link while parsing. */
struct sprov {
	const char *tool, *metric;
	double bytes;
	time_t when;
	double lat;
};

__attribute__((format(printf, 3, 4)))
static int perr(struct pctx *c, const char *path, const char *fmt, ...)
{
	char msg[PIPETTE_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return pipette_fail(c->err, "%s: %s: %s", c->src, path, msg);
}

/* "a number", "null", ...: json.h's names of JSON types. */
static const char *jtype(json_object *v)
{
	return pipette_json_type_name(v);
}

static int is_number(json_object *v)
{
	return v && (json_object_is_type(v, json_type_double) ||
		     json_object_is_type(v, json_type_int));
}

static int check_keys(struct pctx *c, json_object *obj, const char *path,
		      const char *const *allowed)
{
	json_object_iter it;
	char list[256];
	size_t i, len = 0;

	json_object_object_foreachC(obj, it) {
		for (i = 0; allowed[i]; i++)
			if (!strcmp(it.key, allowed[i]))
				break;
		if (allowed[i])
			continue;
		list[0] = '\0';
		for (i = 0; allowed[i]; i++)
			len += (size_t)snprintf(list + len, len < sizeof(list) ?
						sizeof(list) - len : 0, "%s%s",
						i ? ", " : "", allowed[i]);
		return perr(c, path, "unknown key '%.64s' (expected one of: %s)",
			    it.key, list);
	}
	return 0;
}

/* A number in [lo, hi] (lo excluded when lo_open), or null (NaN) when
 * allow_null. */
static int get_num(struct pctx *c, json_object *v, const char *path,
		   const char *what, double lo, int lo_open, double hi,
		   int allow_null, double *out)
{
	double d;

	if (!v || json_object_is_type(v, json_type_null)) {
		if (allow_null) {
			*out = NAN;
			return 0;
		}
		return perr(c, path, "expected %s, got null", what);
	}
	if (!is_number(v))
		return perr(c, path, "expected %s%s, got %s%s%.32s%s", what,
			    allow_null ? " or null" : "", jtype(v),
			    json_object_is_type(v, json_type_string) ? " \"" : "",
			    json_object_is_type(v, json_type_string) ?
			    json_object_get_string(v) : "",
			    json_object_is_type(v, json_type_string) ? "\"" : "");
	d = json_object_get_double(v);
	if (!isfinite(d) || d < lo || (lo_open && d == lo) || d > hi)
		return perr(c, path, "expected %s in %s%g, %g], got %g", what,
			    lo_open ? "(" : "[", lo, hi, d);
	*out = d;
	return 0;
}

static int get_gbps(struct pctx *c, json_object *v, const char *path,
		    int allow_null, double *out)
{
	return get_num(c, v, path, "a bandwidth in GB/s", 0, 1,
		       PIPETTE_BW_MAX_GBPS, allow_null, out);
}

static int get_lat(struct pctx *c, json_object *v, const char *path, double *out)
{
	return get_num(c, v, path, "a latency in microseconds", 0, 0,
		       PIPETTE_BW_MAX_LAT_US, 1, out);
}

/* A string or null (NULL). */
static int get_str(struct pctx *c, json_object *v, const char *path,
		   const char **out)
{
	if (!v || json_object_is_type(v, json_type_null)) {
		*out = NULL;
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return perr(c, path, "expected a string, got %s", jtype(v));
	*out = json_object_get_string(v);
	return 0;
}

static int get_time(struct pctx *c, json_object *v, const char *path, time_t *out)
{
	const char *s = NULL;

	if (get_str(c, v, path, &s) < 0)
		return -1;
	if (!s) {
		*out = (time_t)-1;
		return 0;
	}
	if (pipette_bw_parse_time(s, out) < 0)
		return perr(c, path, "expected a UTC time like "
			    "\"2025-01-02T03:04:05Z\", got \"%.40s\"", s);
	return 0;
}

/* tool, metric, bytes, when, lat_us of a section or link: a missing key
 * inherits, an explicit null means unknown. */
static int parse_prov(struct pctx *c, json_object *obj, const char *path,
		      struct sprov *p)
{
	char sub[560];
	json_object *v;
	double d;

	if (json_object_object_get_ex(obj, "tool", &v)) {
		snprintf(sub, sizeof(sub), "%s.tool", path);
		if (get_str(c, v, sub, &p->tool) < 0)
			return -1;
	}
	if (json_object_object_get_ex(obj, "metric", &v)) {
		snprintf(sub, sizeof(sub), "%s.metric", path);
		if (get_str(c, v, sub, &p->metric) < 0)
			return -1;
	}
	if (json_object_object_get_ex(obj, "bytes", &v)) {
		snprintf(sub, sizeof(sub), "%s.bytes", path);
		if (get_num(c, v, sub, "a message size in bytes", 0, 1,
			    PIPETTE_BW_MAX_BYTES, 1, &d) < 0)
			return -1;
		p->bytes = isnan(d) ? 0 : d;
	}
	if (json_object_object_get_ex(obj, "when", &v)) {
		snprintf(sub, sizeof(sub), "%s.when", path);
		if (get_time(c, v, sub, &p->when) < 0)
			return -1;
	}
	if (json_object_object_get_ex(obj, "lat_us", &v)) {
		snprintf(sub, sizeof(sub), "%s.lat_us", path);
		if (get_lat(c, v, sub, &p->lat) < 0)
			return -1;
	}
	return 0;
}

static int intern(struct pctx *c, const struct sprov *sp)
{
	struct pipette_bw_prov p = { sp->tool, sp->metric, sp->bytes, sp->when };

	return bw_prov_intern(c->bw, &p, c->err);
}

/* The entry for index pair (a, b) of a section: node indices for inter
 * (through ord), GPU indices for intra. */
static struct bw_entry *sect_entry(struct pipette_bwcache *bw, int node,
				   const int *ord, int a, int b)
{
	if (node < 0)
		return BW_INTER(bw, ord[a], ord[b]);
	return &bw->node[node].intra[a * bw->node[node].ngpus + b];
}

/* One end of a link: a node name (inter) or a GPU index (intra). */
static int link_end(struct pctx *c, json_object *v, const char *path, int node,
		    int n, int *out)
{
	if (node < 0) {
		const char *name;
		int k;

		if (!v || !json_object_is_type(v, json_type_string))
			return perr(c, path, "expected a node name, got %s",
				    v ? jtype(v) : "nothing");
		name = json_object_get_string(v);
		k = pipette_bwcache_node_index(c->bw, name);
		if (k < 0)
			return perr(c, path, "unknown node '%.64s' (not in "
				    "$.inter.order or $.nodes)", name);
		*out = k;
		return 0;
	}
	if (!v || !json_object_is_type(v, json_type_int))
		return perr(c, path, "expected a GPU index, got %s",
			    v ? jtype(v) : "nothing");
	*out = json_object_get_int(v);
	if (*out < 0 || *out >= (n ? n : PIPETTE_BW_MAX_GPUS))
		return perr(c, path, "GPU index %d is outside [0, %d)%s", *out,
			    n ? n : PIPETTE_BW_MAX_GPUS,
			    n ? " (the size of the intra matrix)" : "");
	return 0;
}

static int parse_links(struct pctx *c, json_object *links, const char *path,
		       int node, int n, const struct sprov *sect)
{
	static const char *const keys[] = { "a", "b", "gbps", "lat_us", "when",
					    "tool", "metric", "bytes", NULL };
	char lp[480], sub[512];
	size_t i, len;

	if (!json_object_is_type(links, json_type_array))
		return perr(c, path, "expected an array of links, got %s",
			    jtype(links));
	len = json_object_array_length(links);
	for (i = 0; i < len; i++) {
		json_object *l = json_object_array_get_idx(links, i), *v;
		struct sprov p = *sect;
		struct bw_entry *e;
		double g;
		int a, b, pid;

		snprintf(lp, sizeof(lp), "%s[%zu]", path, i);
		if (!json_object_is_type(l, json_type_object))
			return perr(c, lp, "expected a link object, got %s", jtype(l));
		if (check_keys(c, l, lp, keys) < 0)
			return -1;
		snprintf(sub, sizeof(sub), "%s.a", lp);
		json_object_object_get_ex(l, "a", &v);
		if (link_end(c, json_object_object_get_ex(l, "a", &v) ? v : NULL,
			     sub, node, n, &a) < 0)
			return -1;
		snprintf(sub, sizeof(sub), "%s.b", lp);
		if (link_end(c, json_object_object_get_ex(l, "b", &v) ? v : NULL,
			     sub, node, n, &b) < 0)
			return -1;
		if (a == b)
			return perr(c, lp, "a link needs two different %s",
				    node < 0 ? "nodes" : "GPUs");
		snprintf(sub, sizeof(sub), "%s.gbps", lp);
		if (get_gbps(c, json_object_object_get_ex(l, "gbps", &v) ? v : NULL,
			     sub, 0, &g) < 0)
			return -1;
		if (parse_prov(c, l, lp, &p) < 0 || (pid = intern(c, &p)) < 0)
			return -1;
		if (node >= 0) {
			int need = (a > b ? a : b) + 1;

			if (bw_intra_reserve(&c->bw->node[node], need, c->err) < 0)
				return -1;
			e = &c->bw->node[node].intra[a * c->bw->node[node].ngpus + b];
		} else {
			e = BW_INTER(c->bw, a, b);
		}
		e->gbps = g;
		e->lat = (float)p.lat;
		e->prov = pid;
	}
	return 0;
}

/* "inter" (node < 0, matrix indexed through ord[n]) or a node's "intra". */
static int parse_section(struct pctx *c, json_object *sec, const char *path,
			 int node, const int *ord, int n, time_t generated)
{
	static const char *const inter_keys[] = { "tool", "metric", "bytes",
		"when", "lat_us", "order", "matrix", "links", NULL };
	static const char *const intra_keys[] = { "tool", "metric", "bytes",
		"when", "lat_us", "matrix", "links", NULL };
	struct sprov sp = { NULL, NULL, 0, generated, NAN };
	json_object *matrix = NULL, *links = NULL;
	char sub[400], cell[448];
	size_t i, j, rows;
	int pid;

	if (!json_object_is_type(sec, json_type_object))
		return perr(c, path, "expected an object, got %s", jtype(sec));
	if (check_keys(c, sec, path, node < 0 ? inter_keys : intra_keys) < 0 ||
	    parse_prov(c, sec, path, &sp) < 0)
		return -1;
	json_object_object_get_ex(sec, "matrix", &matrix);
	json_object_object_get_ex(sec, "links", &links);
	snprintf(sub, sizeof(sub), "%s.matrix", path);
	if (matrix) {
		if (!json_object_is_type(matrix, json_type_array))
			return perr(c, sub, "expected an array of rows, got %s",
				    jtype(matrix));
		rows = json_object_array_length(matrix);
		if (node >= 0) {
			if (rows > PIPETTE_BW_MAX_GPUS)
				return perr(c, sub, "%zu rows exceed the limit of "
					    "%d GPUs per node", rows,
					    PIPETTE_BW_MAX_GPUS);
			n = (int)rows;
			if (bw_intra_reserve(&c->bw->node[node], n, c->err) < 0)
				return -1;
		} else if (rows != (size_t)n) {
			return perr(c, sub, "expected %d rows (one per name in "
				    "$.inter.order), got %zu", n, rows);
		}
		if ((pid = intern(c, &sp)) < 0)
			return -1;
		for (i = 0; i < rows; i++) {
			json_object *row = json_object_array_get_idx(matrix, i);

			snprintf(cell, sizeof(cell), "%s[%zu]", sub, i);
			if (!json_object_is_type(row, json_type_array))
				return perr(c, cell, "expected a row (an array), got %s",
					    jtype(row));
			if (json_object_array_length(row) != rows)
				return perr(c, cell, "expected %zu values (the matrix "
					    "must be square), got %zu", rows,
					    json_object_array_length(row));
			for (j = 0; j < rows; j++) {
				json_object *v = json_object_array_get_idx(row, j);
				struct bw_entry *e;
				double g = NAN;

				snprintf(cell, sizeof(cell), "%s[%zu][%zu]", sub, i, j);
				if (i == j) {
					if (v && !json_object_is_type(v, json_type_null))
						return perr(c, cell, "expected null on the "
							    "diagonal%s, got %s",
							    node < 0 ? " (intra-node "
							    "figures go to $.nodes.<name>"
							    ".intra)" : "", jtype(v));
					continue;
				}
				if (get_gbps(c, v, cell, 1, &g) < 0)
					return -1;
				if (isnan(g))
					continue;
				e = sect_entry(c->bw, node, ord, (int)i, (int)j);
				e->gbps = g;
				e->lat = (float)sp.lat;
				e->prov = pid;
			}
		}
	} else if (node >= 0) {
		n = 0;	/* links alone: the matrix grows to fit */
	}
	if (links) {
		snprintf(sub, sizeof(sub), "%s.links", path);
		if (parse_links(c, links, sub, node, n, &sp) < 0)
			return -1;
	}
	return 0;
}

static int parse_defaults(struct pctx *c, json_object *d)
{
	static const char *const keys[] = { "inter_gbps", "intra_gbps", "lat_us",
					    "intra_lat_us", NULL };
	struct pipette_bw_defaults def = { NAN, NAN, NAN, NAN };
	json_object *v;

	if (!json_object_is_type(d, json_type_object))
		return perr(c, "$.defaults", "expected an object, got %s", jtype(d));
	if (check_keys(c, d, "$.defaults", keys) < 0)
		return -1;
	if ((json_object_object_get_ex(d, "inter_gbps", &v) &&
	     get_gbps(c, v, "$.defaults.inter_gbps", 1, &def.inter_gbps) < 0) ||
	    (json_object_object_get_ex(d, "intra_gbps", &v) &&
	     get_gbps(c, v, "$.defaults.intra_gbps", 1, &def.intra_gbps) < 0) ||
	    (json_object_object_get_ex(d, "lat_us", &v) &&
	     get_lat(c, v, "$.defaults.lat_us", &def.inter_lat_us) < 0) ||
	    (json_object_object_get_ex(d, "intra_lat_us", &v) &&
	     get_lat(c, v, "$.defaults.intra_lat_us", &def.intra_lat_us) < 0))
		return -1;
	c->bw->def = def;
	return 0;
}

/* Nodes named in $.inter.order, in order; duplicates are errors. */
static int parse_order(struct pctx *c, json_object *order, int **ord, int *n)
{
	char p[64];
	size_t i, len;

	if (!json_object_is_type(order, json_type_array))
		return perr(c, "$.inter.order", "expected an array of node names, "
			    "got %s", jtype(order));
	len = json_object_array_length(order);
	if (len > PIPETTE_BW_MAX_NODES)
		return perr(c, "$.inter.order", "%zu nodes exceed the limit of %d",
			    len, PIPETTE_BW_MAX_NODES);
	*ord = malloc((len + 1) * sizeof(int));
	if (!*ord || bw_reserve(c->bw, (int)len, c->err) < 0)
		return pipette_fail_prefix(c->err, "%s: ", c->src);
	for (i = 0; i < len; i++) {
		json_object *v = json_object_array_get_idx(order, i);
		const char *name;
		int k;

		snprintf(p, sizeof(p), "$.inter.order[%zu]", i);
		if (!json_object_is_type(v, json_type_string))
			return perr(c, p, "expected a node name, got %s", jtype(v));
		name = json_object_get_string(v);
		k = pipette_bwcache_node_index(c->bw, name);
		if (k >= 0)
			return perr(c, p, "duplicated node name '%.64s' (also at "
				    "$.inter.order[%d])", name, k);
		if ((k = pipette_bwcache_add_node(c->bw, name, c->err)) < 0)
			return pipette_fail_prefix(c->err, "%s: %s: ", c->src, p);
		(*ord)[i] = k;
	}
	*n = (int)len;
	return 0;
}

static int keep_verbatim(struct pctx *c, json_object *v, const char *path,
			 char **out)
{
	const char *s;

	if (!json_object_is_type(v, json_type_array))
		return perr(c, path, "expected an array, got %s", jtype(v));
	s = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
					   JSON_C_TO_STRING_NOSLASHESCAPE);
	free(*out);
	*out = strdup(s);
	if (!*out)
		return pipette_fail(c->err, "%s: out of memory", c->src);
	return 0;
}

static int parse_doc(struct pctx *c, json_object *root)
{
	static const char *const top_keys[] = { "schema", "units", "generated",
		"generator", "comment", "defaults", "inter", "nodes", NULL };
	static const char *const node_keys[] = { "gpus", "topo", "intra", NULL };
	json_object *v, *inter = NULL, *nodes = NULL, *order = NULL;
	const char *s;
	time_t generated = (time_t)-1;
	int *ord = NULL, n = 0, rv = -1;
	char path[320];

	if (!json_object_object_get_ex(root, "schema", &v)) {
		if (json_object_object_get_ex(root, "gpus", NULL) &&
		    json_object_object_get_ex(root, "bandwidth", NULL))
			return perr(c, "$.schema", "missing; this looks like the "
				    "original Pipette format: convert it with "
				    "'pipette bandwidth import --from pipette-legacy'");
		return perr(c, "$.schema", "missing, expected \"%s\"",
			    PIPETTE_BW_SCHEMA);
	}
	if (!json_object_is_type(v, json_type_string))
		return perr(c, "$.schema", "expected \"%s\", got %s",
			    PIPETTE_BW_SCHEMA, jtype(v));
	s = json_object_get_string(v);
	if (strcmp(s, PIPETTE_BW_SCHEMA))
		return perr(c, "$.schema", "unsupported schema \"%.40s\" (this "
			    "pipette reads \"%s\")", s, PIPETTE_BW_SCHEMA);
	if (check_keys(c, root, "$", top_keys) < 0)
		return -1;
	if (json_object_object_get_ex(root, "units", &v) &&
	    (!json_object_is_type(v, json_type_string) ||
	     strcmp(json_object_get_string(v), "GB/s")))
		return perr(c, "$.units", "expected \"GB/s\" (1e9 bytes/s), got "
			    "%s %.20s", jtype(v),
			    json_object_is_type(v, json_type_string) ?
			    json_object_get_string(v) : "");
	if (json_object_object_get_ex(root, "generated", &v) &&
	    get_time(c, v, "$.generated", &generated) < 0)
		return -1;
	c->bw->generated = generated;
	if (json_object_object_get_ex(root, "generator", &v)) {
		if (get_str(c, v, "$.generator", &s) < 0 ||
		    pipette_bwcache_set_generator(c->bw, s, c->err) < 0)
			return -1;
	}
	if (json_object_object_get_ex(root, "defaults", &v) &&
	    parse_defaults(c, v) < 0)
		return -1;
	json_object_object_get_ex(root, "inter", &inter);
	json_object_object_get_ex(root, "nodes", &nodes);
	if (inter) {
		if (!json_object_is_type(inter, json_type_object))
			return perr(c, "$.inter", "expected an object, got %s",
				    jtype(inter));
		if (json_object_object_get_ex(inter, "order", &order) &&
		    parse_order(c, order, &ord, &n) < 0)
			goto fail;
		if (!order && json_object_object_get_ex(inter, "matrix", NULL)) {
			perr(c, "$.inter.order", "missing (the matrix rows need "
			     "node names)");
			goto fail;
		}
	}
	if (nodes) {
		json_object_iter it;

		if (!json_object_is_type(nodes, json_type_object)) {
			perr(c, "$.nodes", "expected an object keyed by node name, "
			     "got %s", jtype(nodes));
			goto fail;
		}
		json_object_object_foreachC(nodes, it) {
			snprintf(path, sizeof(path), "$.nodes.%.255s", it.key);
			if (pipette_bwcache_add_node(c->bw, it.key, c->err) < 0) {
				pipette_fail_prefix(c->err, "%s: %s: ", c->src, path);
				goto fail;
			}
		}
	}
	if (inter && parse_section(c, inter, "$.inter", -1, ord, n, generated) < 0)
		goto fail;
	if (nodes) {
		json_object_iter it;

		json_object_object_foreachC(nodes, it) {
			int k = pipette_bwcache_node_index(c->bw, it.key);
			struct bw_node *nd = &c->bw->node[k];

			snprintf(path, sizeof(path), "$.nodes.%.255s", it.key);
			if (!json_object_is_type(it.val, json_type_object)) {
				perr(c, path, "expected an object, got %s",
				     jtype(it.val));
				goto fail;
			}
			if (check_keys(c, it.val, path, node_keys) < 0)
				goto fail;
			snprintf(path, sizeof(path), "$.nodes.%.255s.gpus", it.key);
			if (json_object_object_get_ex(it.val, "gpus", &v) &&
			    keep_verbatim(c, v, path, &nd->gpus_json) < 0)
				goto fail;
			snprintf(path, sizeof(path), "$.nodes.%.255s.topo", it.key);
			if (json_object_object_get_ex(it.val, "topo", &v) &&
			    keep_verbatim(c, v, path, &nd->topo_json) < 0)
				goto fail;
			snprintf(path, sizeof(path), "$.nodes.%.255s.intra", it.key);
			if (json_object_object_get_ex(it.val, "intra", &v) &&
			    parse_section(c, v, path, k, NULL, 0, generated) < 0)
				goto fail;
		}
	}
	rv = 0;
fail:
	free(ord);
	return rv;
}

int pipette_bwcache_parse(const char *text, size_t len, const char *source,
			  struct pipette_bwcache **out, struct pipette_err *err)
{
	struct pctx c;
	json_object *root;
	size_t i;

	*out = NULL;
	if (len > (size_t)PIPETTE_BW_MAX_FILE_BYTES)
		return pipette_fail(err, "%s: %zu bytes exceed the limit of %ld",
				    source, len, PIPETTE_BW_MAX_FILE_BYTES);
	for (i = 0; i < len && strchr(" \t\r\n", text[i]) && text[i]; i++)
		;
	if (i == len)
		return pipette_fail(err, "%s: empty file, expected a JSON object "
				    "with \"schema\": \"%s\"", source, PIPETTE_BW_SCHEMA);
	root = pipette_json_parse(text, len, source, 64, err);
	if (!root)
		return -1;
	c.src = source;
	c.err = err;
	c.bw = pipette_bwcache_create();
	if (!c.bw) {
		json_object_put(root);
		return pipette_fail(err, "%s: out of memory", source);
	}
	if (parse_doc(&c, root) < 0) {
		json_object_put(root);
		pipette_bwcache_destroy(c.bw);
		return -1;
	}
	json_object_put(root);
	*out = c.bw;
	return 0;
}

int pipette_bwcache_load(const char *path, struct pipette_bwcache **out,
			 struct pipette_err *err)
{
	struct pipette_file f;
	int rv;

	*out = NULL;
	if (pipette_read_file(path, "bandwidth cache", PIPETTE_BW_MAX_FILE_BYTES, &f, err))
		return -1;
	rv = pipette_bwcache_parse(f.data, f.len, path, out, err);
	if (rv == 0) {
		memcpy((*out)->sha256, f.sha256, sizeof((*out)->sha256));
		(*out)->has_sha256 = 1;
	}
	pipette_file_free(&f);
	return rv;
}

const unsigned char *pipette_bwcache_sha256(const struct pipette_bwcache *bw)
{
	return bw->has_sha256 ? bw->sha256 : NULL;
}

/* ------------------------------------------------------------------ */
/* writing                                                             */

struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

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
		{
			size_t cap = (sb->cap + (size_t)n + 1) * 2;
			char *np = realloc(sb->p, cap);

			if (!np) {
				sb->oom = 1;
				return;
			}
			sb->p = np;
			sb->cap = cap;
		}
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

struct skey {
	int prov;
	float lat;
};

static int skey_cmp(const void *pa, const void *pb)
{
	const struct skey *a = pa, *b = pb;

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

/* The (provenance, latency) shared by most measured entries; ties go to
 * the smallest key, so the choice is deterministic. */
static int dominant(const struct bw_entry *m, size_t stride, int n,
		    struct skey *out)
{
	struct skey *keys;
	size_t cnt = 0, best = 0, run, i, k;
	int a, b;

	keys = malloc(((size_t)n * (size_t)n + 1) * sizeof(*keys));
	if (!keys)
		return -1;
	for (a = 0; a < n; a++)
		for (b = 0; b < n; b++) {
			const struct bw_entry *e = &m[(size_t)a * stride + b];

			if (!isnan(e->gbps)) {
				keys[cnt].prov = e->prov;
				keys[cnt].lat = e->lat;
				cnt++;
			}
		}
	if (!cnt) {
		free(keys);
		return 0;
	}
	qsort(keys, cnt, sizeof(*keys), skey_cmp);
	*out = keys[0];
	for (i = 0; i < cnt; i = k) {
		for (k = i + 1; k < cnt && skey_cmp(&keys[i], &keys[k]) == 0; k++)
			;
		run = k - i;
		if (run > best) {
			best = run;
			*out = keys[i];
		}
	}
	free(keys);
	return 1;
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

/* One section: inter (node < 0) or node's intra; ind = its indentation. */
static int write_section(struct sbuf *sb, const struct pipette_bwcache *bw,
			 int node, const char *ind)
{
	const struct bw_entry *m;
	struct skey dom = { -1, NAN };
	size_t stride;
	int n, a, b, has, first;
	char sep[48];

	if (node < 0) {
		m = bw->inter;
		stride = (size_t)bw->cap;
		n = bw->n;
	} else {
		m = bw->node[node].intra;
		stride = (size_t)bw->node[node].ngpus;
		n = bw->node[node].ngpus;
	}
	has = dominant(m, stride, n, &dom);
	if (has < 0)
		return -1;
	sb_add(sb, "{\n");
	snprintf(sep, sizeof(sep), "\n%s  ", ind);
	if (has) {
		sb_add(sb, "%s  ", ind);
		write_prov(sb, bw, dom.prov, sep);
		sb_add(sb, ",\n");
		if (!isnan(dom.lat)) {
			sb_add(sb, "%s  \"lat_us\": ", ind);
			sb_flt(sb, dom.lat);
			sb_add(sb, ",\n");
		}
	}
	if (node < 0) {
		sb_add(sb, "%s  \"order\": [", ind);
		for (a = 0; a < n; a++) {
			sb_add(sb, a ? ", " : "");
			sb_str(sb, bw->node[a].name);
		}
		sb_add(sb, "],\n");
	}
	sb_add(sb, "%s  \"matrix\": [", ind);
	for (a = 0; a < n; a++) {
		sb_add(sb, "%s\n%s    [", a ? "," : "", ind);
		for (b = 0; b < n; b++) {
			sb_add(sb, b ? ", " : "");
			sb_num(sb, m[(size_t)a * stride + b].gbps);
		}
		sb_add(sb, "]");
	}
	if (n)
		sb_add(sb, "\n%s  ]", ind);
	else
		sb_add(sb, "]");
	first = 1;
	for (a = 0; a < n; a++)
		for (b = 0; b < n; b++) {
			const struct bw_entry *e = &m[(size_t)a * stride + b];

			if (isnan(e->gbps) || skey_eq(&dom, e))
				continue;
			sb_add(sb, first ? ",\n%s  \"links\": [\n" : ",\n", ind);
			first = 0;
			sb_add(sb, "%s    {\"a\": ", ind);
			if (node < 0) {
				sb_str(sb, bw->node[a].name);
				sb_add(sb, ", \"b\": ");
				sb_str(sb, bw->node[b].name);
			} else {
				sb_add(sb, "%d, \"b\": %d", a, b);
			}
			sb_add(sb, ", \"gbps\": ");
			sb_num(sb, e->gbps);
			sb_add(sb, ", \"lat_us\": ");
			sb_flt(sb, e->lat);
			sb_add(sb, ", ");
			write_prov(sb, bw, e->prov, " ");
			sb_add(sb, "}");
		}
	if (!first)
		sb_add(sb, "\n%s  ]", ind);
	sb_add(sb, "\n%s}", ind);
	return 0;
}

char *pipette_bwcache_serialize(const struct pipette_bwcache *bw,
				struct pipette_err *err)
{
	struct sbuf sb = { NULL, 0, 0, 0 };
	const struct pipette_bw_defaults *d = &bw->def;
	int i, first;

	sb_add(&sb, "{\n  \"schema\": \"%s\",\n  \"units\": \"GB/s\"", PIPETTE_BW_SCHEMA);
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

		if (!nd->ngpus && !nd->gpus_json && !nd->topo_json)
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
		if (nd->ngpus) {
			sb_add(&sb, "%s\n      \"intra\": ", sep);
			if (write_section(&sb, bw, i, "      ") < 0)
				sb.oom = 1;
		}
		sb_add(&sb, "\n    }");
	}
	if (!first)
		sb_add(&sb, "\n  }");
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
