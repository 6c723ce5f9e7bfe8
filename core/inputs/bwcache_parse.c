/* pipette: reading "pipette-bw/1", "/2" and "/3" files (format:
 * bwcache.h).
 *
 * The document goes through the scanner (bwscan.c): json-c parses all but
 * the matrices and link lists, whose plain rows and links the scanner read
 * as it checked them; the others are read from the text, row by row, into
 * the cache's compact arrays; a cell the fast path refuses is handed to
 * json-c alone, so that every error names its value as json-c reads it. */
#include "inputs/bwcache.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inputs/bwcache_int.h"
#include "inputs/json.h"
#include "inputs/readfile.h"

struct pctx {
	const char *src;
	struct pipette_bwcache *bw;
	struct pipette_err *err;
	struct bw_doc *doc;	/* the scanner's spans (a matrix's rows become the cache's) */
	int version;			/* of the schema: 1, 2 or 3 */
	/* The last node name end_of resolved for each end of a link, a and
	 * b (its span in the text and its index): a writer lists a node's
	 * links together, so a link's a is most often the last one's, which
	 * a memo of both ends together (b between two a's) never found. */
	size_t last_s[2], last_len[2];
	int last_k[2];
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

static int oom(struct pctx *c)
{
	return pipette_fail_code(c->err, PIPETTE_E_INTERNAL, "%s: out of memory", c->src);
}

/* "a number", "null", ...: json.h's names of JSON types. */
static const char *jtype(json_object *v)
{
	return pipette_json_type_name(v);
}

/* The name of the type of a value the scanner set aside, from its first
 * byte, in the same words. */
static const char *stype(char first)
{
	switch (first) {
	case '[': return "an array";
	case '{': return "an object";
	case '"': return "a string";
	case 'n': return "null";
	case 't':
	case 'f': return "a boolean";
	}
	return "a number";
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

/* ------------------------------------------------------------------ */
/* matrices                                                            */

/* Where the cells of a matrix go: a node's GPU pairs, the node pairs
 * (the nodes of "order" are the cache's first ones, in order), or the
 * group pairs. */
enum mkind { M_INTRA, M_INTER, M_BETWEEN };

struct mtarget {
	enum mkind kind;
	struct bw_mat *mat;
	float lat;
	int prov;
	const char *path;	/* "$.inter.matrix" */
	size_t rows;
	uint32_t *code;		/* a row's cells, rows of them */
	double *val;
};

static int put(struct pctx *c, const struct mtarget *t, size_t i, size_t j, double g,
	       uint32_t code)
{
	return bw_mat_set(t->mat, (int)i, (int)j, g, code, t->lat, t->prov) < 0 ? oom(c) : 0;
}

/* One cell (json-c's value v): its figure in *g (NaN for null), or an
 * error: a matrix wants null on its diagonal, a figure or null elsewhere. */
static int cell_check(struct pctx *c, const struct mtarget *t, json_object *v, size_t i,
		      size_t j, double *g)
{
	char cell[448];

	*g = NAN;
	snprintf(cell, sizeof(cell), "%s[%zu][%zu]", t->path, i, j);
	if (i == j && t->kind != M_BETWEEN) {
		if (v && !json_object_is_type(v, json_type_null))
			return perr(c, cell, "expected null on the diagonal%s, got %s",
				    t->kind == M_INTER ? " (intra-node figures go to "
				    "$.nodes.<name>.intra)" : "", jtype(v));
		return 0;
	}
	return get_gbps(c, v, cell, 1, g);
}

/* The shape of a row: an array of as many values as the matrix has rows. */
static int row_shape(struct pctx *c, const struct mtarget *t, size_t i, const char *type,
		     int is_array, size_t len)
{
	char cell[448];

	snprintf(cell, sizeof(cell), "%s[%zu]", t->path, i);
	if (!is_array)
		return perr(c, cell, "expected a row (an array), got %s", type);
	if (len != t->rows)
		return perr(c, cell, "expected %zu values (the matrix must be square), "
			    "got %zu", t->rows, len);
	return 0;
}

/* Row i, a row the scanner flagged, cell by cell with json-c's values:
 * json-c has the last word on what a cell holds. */
static int row_careful(struct pctx *c, const struct mtarget *t, size_t rs, size_t re,
		       size_t i)
{
	const char *text = c->doc->text;
	struct bw_span row = { .start = rs, .end = re, .type = '[' };
	size_t pos = rs, vs, ve, j;

	for (j = 0; bw_scan_next(text, &row, &pos, &vs, &ve); j++) {
		int bad;
		json_object *v = bw_scan_value(text, vs, ve, 1, &bad);
		double g;

		if (bad)
			return oom(c);
		bad = cell_check(c, t, v, i, j, &g) < 0 ||
		      (!isnan(g) && put(c, t, i, j, g, BW_NONE) < 0);
		json_object_put(v);
		if (bad)
			return -1;
	}
	return 0;
}

/* Row i, scanned (info) from the text. */
static int row_text(struct pctx *c, const struct mtarget *t, const struct bw_row *info,
		    size_t i)
{
	if (row_shape(c, t, i, stype(info->type), info->type == '[', info->len) < 0)
		return -1;
	if (info->bad != (size_t)-1)
		return row_careful(c, t, info->start, info->end, i);
	return bw_mat_set_row(t->mat, (int)i, t->code, t->val, (int)t->rows, t->lat,
			      t->prov) < 0 ? oom(c) : 0;
}

/* A matrix whose rows the scanner read whole, every one, into a square
 * grid, over a target that no figure was set in yet: the grid becomes
 * the target's cells as they are (each row's bw_mat_set_row would store
 * the same codes, with the section's latency and provenance: lat0 and
 * prov0 once a figure is there).  1 when it did. */
static int grid_adopt(struct mtarget *t, struct bw_grid *g)
{
	struct bw_mat *m = t->mat;

	if (!g || !t->rows || g->n_read != t->rows || g->stride != t->rows ||
	    g->rows != t->rows || m->n != (int)t->rows || m->has0 || m->lat || m->prov)
		return 0;
	free(m->code);
	m->code = g->code;
	m->cap = (int)t->rows;
	g->code = NULL;
	g->rows = 0;
	g->n_read = 0;
	if (g->measured) {
		m->lat0 = t->lat;
		m->prov0 = t->prov;
		m->has0 = 1;
	}
	return 1;
}

/* Row i of a matrix span: from the scanner's grid g when it read it
 * whole, else from the text. */
static int matrix_row(struct pctx *c, struct mtarget *t, const struct bw_span *sp,
		      const struct bw_grid *g, size_t i)
{
	struct bw_row info;

	if (!g || i >= g->n_row)
		return pipette_fail_code(c->err, PIPETTE_E_INTERNAL, "%s: %s[%zu]: row not "
					 "scanned", c->src, t->path, i);
	if (g->row[i] & BW_ROW_READ) {
		if (row_shape(c, t, i, "an array", 1, g->stride) < 0)
			return -1;
		return bw_mat_set_row(t->mat, (int)i, g->code + i * g->stride, NULL,
				      (int)t->rows, t->lat, t->prov) < 0 ? oom(c) : 0;
	}
	bw_scan_row(c->doc->text, g->row[i], sp->end, t->kind == M_BETWEEN ? -1 : (long)i,
		    t->rows, t->code, t->val, &info);
	return row_text(c, t, &info, i);
}

/* The rows of a matrix span (as many as parse_matrix found), each read
 * once. */
static int matrix_rows(struct pctx *c, struct mtarget *t, struct bw_span *sp)
{
	size_t i;
	int rv = 0;

	if (grid_adopt(t, sp->grid))
		return 0;
	t->code = malloc((t->rows + 1) * sizeof(uint32_t));
	t->val = malloc((t->rows + 1) * sizeof(double));
	if (!t->code || !t->val)
		rv = oom(c);
	for (i = 0; !rv && i < t->rows; i++)
		rv = matrix_row(c, t, sp, sp->grid, i);
	free(t->code);
	free(t->val);
	return rv;
}

/* A matrix value: its type, its row count (the rows expected, or at most
 * max when expect < 0), then its rows.  *rows gets the count. */
static int parse_matrix(struct pctx *c, struct mtarget *t, json_object *m, long expect,
			long max, const char *expect_what)
{
	const struct bw_span *sp = bw_doc_span(c->doc, m);

	if (sp->type != '[')
		return perr(c, t->path, "expected an array of rows, got %s", stype(sp->type));
	t->rows = sp->count;
	if (expect < 0 && t->rows > (size_t)max)
		return perr(c, t->path, "%zu rows exceed the limit of %ld GPUs per node",
			    t->rows, max);
	if (expect >= 0 && t->rows != (size_t)expect)
		return perr(c, t->path, "expected %ld rows (one per %s), got %zu", expect,
			    expect_what, t->rows);
	return 0;
}

/* A value json-c holds for a key the scanner reads: absent, or JSON
 * null. */
static int is_null(struct pctx *c, json_object *v)
{
	const struct bw_span *sp = bw_doc_span(c->doc, v);

	return !sp || sp->type == 'n';
}

/* ------------------------------------------------------------------ */
/* links                                                               */

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

/* Link lp (json-c's value l) of a section. */
static int link_one(struct pctx *c, json_object *l, const char *lp, int node, int n,
		    const struct sprov *sect)
{
	static const char *const keys[] = { "a", "b", "gbps", "lat_us", "when",
					    "tool", "metric", "bytes", NULL };
	struct sprov p = *sect;
	char sub[512];
	json_object *v;
	double g;
	int a, b, pid;

	if (!json_object_is_type(l, json_type_object))
		return perr(c, lp, "expected a link object, got %s", jtype(l));
	if (check_keys(c, l, lp, keys) < 0)
		return -1;
	snprintf(sub, sizeof(sub), "%s.a", lp);
	if (link_end(c, json_object_object_get_ex(l, "a", &v) ? v : NULL, sub, node, n, &a) < 0)
		return -1;
	snprintf(sub, sizeof(sub), "%s.b", lp);
	if (link_end(c, json_object_object_get_ex(l, "b", &v) ? v : NULL, sub, node, n, &b) < 0)
		return -1;
	if (a == b)
		return perr(c, lp, "a link needs two different %s", node < 0 ? "nodes" : "GPUs");
	snprintf(sub, sizeof(sub), "%s.gbps", lp);
	if (get_gbps(c, json_object_object_get_ex(l, "gbps", &v) ? v : NULL, sub, 0, &g) < 0)
		return -1;
	if (parse_prov(c, l, lp, &p) < 0 || (pid = intern(c, &p)) < 0)
		return -1;
	if (node < 0)
		return bw_inter_set(c->bw, a, b, g, BW_NONE, (float)p.lat, pid, c->err) < 0
		       ? pipette_fail_prefix(c->err, "%s: ", c->src) : 0;
	if (bw_intra_reserve(&c->bw->node[node], (a > b ? a : b) + 1, c->err) < 0 ||
	    bw_mat_set(&c->bw->node[node].intra, a, b, g, BW_NONE, (float)p.lat, pid) < 0)
		return oom(c);
	return 0;
}

/* The bytes [s, e) of a text value (quotes dropped) into buf of size
 * size: 1, or 0 when they do not fit. */
static int text_of(const char *t, size_t s, size_t e, char *buf, size_t size)
{
	if (t[s] == '"') {
		s++;
		e--;
	}
	if (e - s >= size)
		return 0;
	memcpy(buf, t + s, e - s);
	buf[e - s] = '\0';
	return 1;
}

/* A number [s, e) in [lo, hi] (lo excluded when lo_open), or null (NaN):
 * 1, or 0 when it is neither. */
static int num_of(const char *t, size_t s, size_t e, double lo, int lo_open, double hi,
		  double *out)
{
	char buf[64];
	char *end;

	if (t[s] == 'n') {
		*out = NAN;
		return 1;
	}
	if (!text_of(t, s, e, buf, sizeof(buf)))
		return 0;
	*out = strtod(buf, &end);
	return !*end && isfinite(*out) && *out >= lo && !(lo_open && *out == lo) && *out <= hi;
}

/* End `end` (0 a, 1 b) of a link [s, e): a node's index, or a GPU index
 * in [0, n) (n 0: within the limit). */
static int end_of(struct pctx *c, int end, size_t s, size_t e, int node, int n, int *out)
{
	const char *t = c->doc->text;
	long v = 0;
	size_t p;

	if (node < 0) {
		size_t len = e - s - 2;

		if (t[s] != '"' || e - s < 2 || len > PIPETTE_BW_MAX_NAME)
			return 0;
		if (c->last_len[end] && len == c->last_len[end] &&
		    !memcmp(t + s + 1, t + c->last_s[end], len)) {
			*out = c->last_k[end];
			return 1;
		}
		if ((*out = bw_node_index_n(c->bw, t + s + 1, len)) < 0)
			return 0;
		c->last_s[end] = s + 1;
		c->last_len[end] = len;
		c->last_k[end] = *out;
		return 1;
	}
	for (p = s; p < e && p - s < 4 && t[p] >= '0' && t[p] <= '9'; p++)
		v = v * 10 + (t[p] - '0');
	*out = (int)v;
	return p == e && p > s && v < (n ? n : PIPETTE_BW_MAX_GPUS);
}

/* A string value [s, e) (into buf, 256 bytes) or null (NULL): 1, or 0
 * when it is neither. */
static int str_of(const char *t, size_t s, size_t e, char *buf, const char **out)
{
	if (t[s] == 'n') {
		*out = NULL;
		return 1;
	}
	if (t[s] != '"' || !text_of(t, s, e, buf, 256))
		return 0;
	*out = buf;
	return 1;
}

/* The provenance keys of a link (value spans vs, ve, in the order of
 * link_fast's keys) over the section's: 1, or 0 when a value is not one
 * parse_prov takes. */
static int prov_of(const char *t, const size_t *vs, const size_t *ve, struct sprov *p,
		   char *tool, char *metric)
{
	char when[256];
	const char *w;
	double d;

	if (vs[3] != ve[3] && !num_of(t, vs[3], ve[3], 0, 0, PIPETTE_BW_MAX_LAT_US, &p->lat))
		return 0;
	if (vs[4] != ve[4]) {
		if (!str_of(t, vs[4], ve[4], when, &w))
			return 0;
		if (!w)
			p->when = (time_t)-1;
		else if (pipette_bw_parse_time(w, &p->when) < 0)
			return 0;
	}
	if ((vs[5] != ve[5] && !str_of(t, vs[5], ve[5], tool, &p->tool)) ||
	    (vs[6] != ve[6] && !str_of(t, vs[6], ve[6], metric, &p->metric)))
		return 0;
	if (vs[7] != ve[7]) {
		if (!num_of(t, vs[7], ve[7], 0, 1, PIPETTE_BW_MAX_BYTES, &d))
			return 0;
		p->bytes = isnan(d) ? 0 : d;
	}
	return 1;
}

/* Link [s, e) of a section, read from the text when it is plain (keys
 * and values as pipette writes them): 1 done, 0 for link_one to read
 * (and to name what is wrong), -1 out of memory.  sect_pid: the
 * section's provenance, interned. */
static int link_fast(struct pctx *c, size_t s, size_t e, int node, int n,
		     const struct sprov *sect, int sect_pid)
{
	static const char *const keys[] = { "a", "b", "gbps", "lat_us", "when",
					    "tool", "metric", "bytes", NULL };
	const char *t = c->doc->text;
	size_t vs[8], ve[8];
	struct sprov p = *sect;
	char tool[256], metric[256];
	uint32_t code;
	double g;
	int a, b, pid = sect_pid, k;

	if (!bw_scan_object(t, s, e, keys, vs, ve) || vs[0] == ve[0] || vs[1] == ve[1] ||
	    !end_of(c, 0, vs[0], ve[0], node, n, &a) || !end_of(c, 1, vs[1], ve[1], node, n, &b) ||
	    a == b || !bw_scan_gbps(t, vs[2], ve[2], &code, &g) ||
	    !prov_of(t, vs, ve, &p, tool, metric))
		return 0;
	for (k = 4; k < 8 && vs[k] == ve[k]; k++)
		;
	if (k < 8 && (pid = intern(c, &p)) < 0)
		return -1;
	if (node < 0)
		return bw_inter_set(c->bw, a, b, g, code, (float)p.lat, pid, c->err) < 0 ? -1 : 1;
	if (bw_intra_reserve(&c->bw->node[node], (a > b ? a : b) + 1, c->err) < 0)
		return -1;
	if (bw_mat_set(&c->bw->node[node].intra, a, b, g, code, (float)p.lat, pid) < 0)
		return pipette_fail(c->err, "out of memory");
	return 1;
}

/* A link the scanner read whole (bwcache_int.h): 1 done, 0 for the text's
 * readers (an end that is no node or GPU, a link from a node to itself),
 * -1 out of memory.  sect_pid: the section's provenance, interned. */
static int link_read(struct pctx *c, const struct bw_link *l, int node, int n, int sect_pid,
		     float lat)
{
	size_t s = l->start;
	double g = bw_code_value(l->code);
	int a, b;

	if (!end_of(c, 0, s + l->a, s + l->a + l->a_len, node, n, &a) ||
	    !end_of(c, 1, s + l->b, s + l->b + l->b_len, node, n, &b) || a == b)
		return 0;
	if (node < 0)
		return bw_inter_set(c->bw, a, b, g, l->code, lat, sect_pid, c->err) < 0 ? -1 : 1;
	if (bw_intra_reserve(&c->bw->node[node], (a > b ? a : b) + 1, c->err) < 0)
		return -1;
	if (bw_mat_set(&c->bw->node[node].intra, a, b, g, l->code, lat, sect_pid) < 0)
		return pipette_fail(c->err, "out of memory");
	return 1;
}

/* Room in the node pairs' hash for the run of links read whole from l on
 * that start at the same node (a writer lists a node's links together):
 * its row is sized once, not doubled up to its size and filled again at
 * each step.  *run_end: the first link after the run.  -1 out of
 * memory; a first end that is no node leaves it to link_read. */
static int reserve_run(struct pctx *c, const struct bw_link *l, const struct bw_link *last,
		       const struct bw_link **run_end)
{
	const char *t = c->doc->text, *a_text = t + l->start + l->a;
	const struct bw_link *m;
	int a;

	for (m = l + 1; m < last && m->a_len == l->a_len &&
	     !memcmp(t + m->start + m->a, a_text, l->a_len); m++)
		;
	*run_end = m;
	if (!end_of(c, 0, l->start + l->a, l->start + l->a + l->a_len, -1, 0, &a))
		return 0;
	return bw_inter_reserve(c->bw, a, (uint32_t)(m - l), c->err);
}

static int parse_links(struct pctx *c, json_object *links, const char *path,
		       int node, int n, const struct sprov *sect)
{
	const struct bw_span *sp = bw_doc_span(c->doc, links);
	const struct bw_link *l = c->doc->link ? c->doc->link + sp->link0 : NULL;
	const struct bw_link *last = l ? l + sp->n_link : NULL;
	const struct bw_link *run_end = l;
	const char *text = c->doc->text;
	char lp[480];
	size_t i, pos, vs, ve;
	int sect_pid;

	if (sp->type != '[')
		return perr(c, path, "expected an array of links, got %s", stype(sp->type));
	if ((sect_pid = intern(c, sect)) < 0)
		return -1;
	pos = sp->start;
	for (i = 0; (vs = bw_scan_elem(text, sp, pos)) < sp->end; i++) {
		const struct bw_link *whole = l < last && l->start == vs ? l++ : NULL;
		int bad = 0;
		json_object *l1;

		if (whole && node < 0 && whole >= run_end &&
		    reserve_run(c, whole, last, &run_end) < 0)
			return pipette_fail_prefix(c->err, "%s: ", c->src);
		if (whole)
			bad = link_read(c, whole, node, n, sect_pid, (float)sect->lat);

		ve = pos = whole ? vs + whole->len : bw_scan_skip(text, vs, sp->end);
		if (!bad)
			bad = link_fast(c, vs, ve, node, n, sect, sect_pid);
		if (bad < 0)
			return pipette_fail_prefix(c->err, "%s: ", c->src);
		if (bad)
			continue;
		/* the general way: json-c's tree of one link */
		if (!(l1 = bw_scan_value(text, vs, ve, 0, &bad)))
			return oom(c);
		snprintf(lp, sizeof(lp), "%s[%zu]", path, i);
		bad = link_one(c, l1, lp, node, n, sect) < 0;
		json_object_put(l1);
		if (bad)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* groups (pipette-bw/2)                                               */

/* Element of a group's or domain's "nodes": a name of one of the cache's
 * first `named` nodes, or an index range [first, last] into
 * $.inter.order (its n nodes). */
static int member_range(struct pctx *c, json_object *v, const char *path, int n, int named,
			int *first, int *last)
{
	if (json_object_is_type(v, json_type_string)) {
		int k = pipette_bwcache_node_index(c->bw, json_object_get_string(v));

		if (k < 0 || k >= named)
			return perr(c, path, "unknown node '%.64s' (not in %s)",
				    json_object_get_string(v), named > n ?
				    "$.inter.order or $.nodes" : "$.inter.order");
		*first = *last = k;
	} else if (json_object_is_type(v, json_type_array) &&
		   json_object_array_length(v) == 2 &&
		   json_object_is_type(json_object_array_get_idx(v, 0), json_type_int) &&
		   json_object_is_type(json_object_array_get_idx(v, 1), json_type_int)) {
		int64_t a = json_object_get_int64(json_object_array_get_idx(v, 0));
		int64_t b = json_object_get_int64(json_object_array_get_idx(v, 1));

		if (a < 0 || a > b || b >= n)
			return perr(c, path, "index range [%lld, %lld] is not within "
				    "[0, %d] (the indices of $.inter.order) with first <= "
				    "last", (long long)a, (long long)b, n - 1);
		*first = (int)a;
		*last = (int)b;
	} else {
		return perr(c, path, "expected a node name or an index range [first, "
			    "last], got %s", jtype(v));
	}
	return 0;
}

/* Element k of a group's "nodes"; its nodes join group g. */
static int group_member(struct pctx *c, json_object *v, const char *path, int g, int n)
{
	int *of = c->bw->inter.group_of, first, last, k;

	if (member_range(c, v, path, n, n, &first, &last) < 0)
		return -1;
	for (k = first; k <= last; k++) {
		if (of[k] >= 0)
			return perr(c, path, "node '%.64s' is already in group '%.64s'",
				    c->bw->node[k].name, c->bw->inter.group_name[of[k]]);
		of[k] = g;
	}
	return 0;
}

static int parse_group(struct pctx *c, json_object *gr, const char *path, int n)
{
	static const char *const keys[] = { "name", "nodes", NULL };
	json_object *name = NULL, *nodes = NULL;
	char sub[96];
	size_t k, len;
	int g;

	if (!json_object_is_type(gr, json_type_object))
		return perr(c, path, "expected a group object, got %s", jtype(gr));
	if (check_keys(c, gr, path, keys) < 0)
		return -1;
	json_object_object_get_ex(gr, "name", &name);
	json_object_object_get_ex(gr, "nodes", &nodes);
	snprintf(sub, sizeof(sub), "%s.name", path);
	if (!json_object_is_type(name, json_type_string))
		return perr(c, sub, "expected the group's name, got %s",
			    name ? jtype(name) : "nothing");
	if ((g = bw_group_add(c->bw, json_object_get_string(name), c->err)) < 0)
		return pipette_fail_prefix(c->err, "%s: %s: ", c->src, sub);
	snprintf(sub, sizeof(sub), "%s.nodes", path);
	if (!json_object_is_type(nodes, json_type_array))
		return perr(c, sub, "expected an array of node names and index ranges, "
			    "got %s", nodes ? jtype(nodes) : "nothing");
	len = json_object_array_length(nodes);
	for (k = 0; k < len; k++) {
		snprintf(sub, sizeof(sub), "%s.nodes[%zu]", path, k);
		if (group_member(c, json_object_array_get_idx(nodes, k), sub, g, n) < 0)
			return -1;
	}
	return 0;
}

/* $.inter.groups and $.inter.between, with the section's provenance. */
static int parse_groups(struct pctx *c, json_object *sec, int n, float lat, int prov)
{
	json_object *groups = NULL, *between = NULL;
	struct mtarget t = { M_BETWEEN, &c->bw->inter.between, lat, prov,
			     "$.inter.between", 0, NULL, NULL };
	char path[64];
	size_t i, len;

	json_object_object_get_ex(sec, "groups", &groups);
	json_object_object_get_ex(sec, "between", &between);
	if (groups) {
		if (!json_object_is_type(groups, json_type_array))
			return perr(c, "$.inter.groups", "expected an array of groups, "
				    "got %s", jtype(groups));
		len = json_object_array_length(groups);
		for (i = 0; i < len; i++) {
			snprintf(path, sizeof(path), "$.inter.groups[%zu]", i);
			if (parse_group(c, json_object_array_get_idx(groups, i), path, n) < 0)
				return -1;
		}
	}
	if (is_null(c, between))
		return 0;
	return parse_matrix(c, &t, between, c->bw->inter.n_groups, 0,
			    "group in $.inter.groups") < 0 ||
	       matrix_rows(c, &t, bw_doc_span(c->doc, between)) < 0 ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* NVLink domains (pipette-bw/3)                                       */

/* $.domains[i]: {"name", "gpus", "nodes"}; n nodes in $.inter.order. */
static int parse_domain(struct pctx *c, json_object *dm, const char *path, int n)
{
	static const char *const keys[] = { "name", "gpus", "nodes", NULL };
	json_object *name = NULL, *gpus = NULL, *nodes = NULL;
	char sub[96];
	size_t k, len;
	int d, first, last, i, size = 0;

	if (!json_object_is_type(dm, json_type_object))
		return perr(c, path, "expected a domain object, got %s", jtype(dm));
	if (check_keys(c, dm, path, keys) < 0)
		return -1;
	json_object_object_get_ex(dm, "name", &name);
	json_object_object_get_ex(dm, "gpus", &gpus);
	json_object_object_get_ex(dm, "nodes", &nodes);
	snprintf(sub, sizeof(sub), "%s.name", path);
	if (!json_object_is_type(name, json_type_string))
		return perr(c, sub, "expected the domain's name, got %s",
			    name ? jtype(name) : "nothing");
	snprintf(sub, sizeof(sub), "%s.gpus", path);
	if (gpus) {
		int64_t g = json_object_get_int64(gpus);

		if (!json_object_is_type(gpus, json_type_int) || g < 1 ||
		    g > (int64_t)PIPETTE_BW_MAX_NODES * PIPETTE_BW_MAX_GPUS)
			return perr(c, sub, "expected the domain's GPU count, an integer in "
				    "[1, %d], got %s", PIPETTE_BW_MAX_NODES * PIPETTE_BW_MAX_GPUS,
				    jtype(gpus));
		size = (int)g;
	}
	if (bw_domain_index(c->bw, json_object_get_string(name)) >= 0)
		return perr(c, path, "NVLink domain '%.64s' is defined twice",
			    json_object_get_string(name));
	if ((d = bw_domain_add(c->bw, json_object_get_string(name), size, c->err)) < 0)
		return pipette_fail_prefix(c->err, "%s: %s: ", c->src, path);
	snprintf(sub, sizeof(sub), "%s.nodes", path);
	if (!json_object_is_type(nodes, json_type_array) || !json_object_array_length(nodes))
		return perr(c, sub, "expected a non-empty array of node names and index "
			    "ranges, got %s", nodes ? jtype(nodes) : "nothing");
	len = json_object_array_length(nodes);
	for (k = 0; k < len; k++) {
		snprintf(sub, sizeof(sub), "%s.nodes[%zu]", path, k);
		if (member_range(c, json_object_array_get_idx(nodes, k), sub, n, c->bw->n,
				 &first, &last) < 0)
			return -1;
		for (i = first; i <= last; i++) {
			struct bw_node *nd = &c->bw->node[i];

			if (nd->domain >= 0)
				return perr(c, sub, "node '%.64s' is already in NVLink domain "
					    "'%.64s'", nd->name, c->bw->domain[nd->domain].name);
			nd->domain = d;
		}
	}
	return 0;
}

/* $.domains and the check of each domain's stated size against the GPUs
 * of its nodes (their intra matrices, where measured). */
static int parse_domains(struct pctx *c, json_object *domains, int n)
{
	char path[64];
	size_t i, len;
	int d, k;

	if (!json_object_is_type(domains, json_type_array))
		return perr(c, "$.domains", "expected an array of NVLink domains, got %s",
			    jtype(domains));
	len = json_object_array_length(domains);
	for (i = 0; i < len; i++) {
		snprintf(path, sizeof(path), "$.domains[%zu]", i);
		if (parse_domain(c, json_object_array_get_idx(domains, i), path, n) < 0)
			return -1;
	}
	for (d = 0; d < c->bw->n_domains; d++) {
		long gpus = 0;

		for (k = 0; k < c->bw->n; k++)
			if (c->bw->node[k].domain == d)
				gpus += c->bw->node[k].intra.n;
		if (c->bw->domain[d].gpus && gpus > c->bw->domain[d].gpus) {
			snprintf(path, sizeof(path), "$.domains[%d].gpus", d);
			return perr(c, path, "NVLink domain '%.64s' states %d GPUs, but its "
				    "nodes' intra matrices hold %ld", c->bw->domain[d].name,
				    c->bw->domain[d].gpus, gpus);
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* sections and the document                                           */

static int section_matrix(struct pctx *c, json_object *matrix, const char *sub, int node,
			  int *n, float lat, int prov)
{
	struct mtarget t = { node < 0 ? M_INTER : M_INTRA, NULL, lat, prov, sub, 0,
			     NULL, NULL };

	if (node >= 0) {
		if (parse_matrix(c, &t, matrix, -1, PIPETTE_BW_MAX_GPUS, NULL) < 0)
			return -1;
		*n = (int)t.rows;
		if (bw_intra_reserve(&c->bw->node[node], *n, c->err) < 0)
			return -1;
		t.mat = &c->bw->node[node].intra;
	} else {
		struct bw_inter *in = &c->bw->inter;

		if (parse_matrix(c, &t, matrix, *n, 0, "name in $.inter.order") < 0)
			return -1;
		t.mat = &in->mat;
		/* the grid as the dense matrix, before one is made beside it */
		if (!in->dense && !in->pairs.count && c->bw->n == (int)t.rows) {
			in->mat.n = c->bw->n;
			if (grid_adopt(&t, bw_doc_span(c->doc, matrix)->grid)) {
				bw_pairs_free(&in->pairs);
				in->dense = 1;
				return 0;
			}
			in->mat.n = 0;
		}
		if (bw_inter_make_dense(c->bw, c->err) < 0)
			return -1;
	}
	return matrix_rows(c, &t, bw_doc_span(c->doc, matrix));
}

/* "inter" (node < 0, n nodes in "order") or a node's "intra". */
static int parse_section(struct pctx *c, json_object *sec, const char *path,
			 int node, int n, time_t generated)
{
	static const char *const inter_keys[] = { "tool", "metric", "bytes",
		"when", "lat_us", "order", "matrix", "links", NULL };
	static const char *const inter2_keys[] = { "tool", "metric", "bytes",
		"when", "lat_us", "order", "groups", "between", "matrix", "links", NULL };
	static const char *const intra_keys[] = { "tool", "metric", "bytes",
		"when", "lat_us", "matrix", "links", NULL };
	struct sprov sp = { NULL, NULL, 0, generated, NAN };
	json_object *matrix = NULL, *links = NULL;
	char sub[400];
	int pid = -1;

	if (!json_object_is_type(sec, json_type_object))
		return perr(c, path, "expected an object, got %s", jtype(sec));
	if (check_keys(c, sec, path, node >= 0 ? intra_keys : c->version >= 2 ?
		       inter2_keys : inter_keys) < 0 ||
	    parse_prov(c, sec, path, &sp) < 0)
		return -1;
	json_object_object_get_ex(sec, "matrix", &matrix);
	json_object_object_get_ex(sec, "links", &links);
	if (node < 0 && c->version >= 2 &&
	    ((pid = intern(c, &sp)) < 0 || parse_groups(c, sec, n, (float)sp.lat, pid) < 0))
		return -1;
	snprintf(sub, sizeof(sub), "%s.matrix", path);
	if (!is_null(c, matrix)) {
		if ((pid < 0 && (pid = intern(c, &sp)) < 0) ||
		    section_matrix(c, matrix, sub, node, &n, (float)sp.lat, pid) < 0)
			return -1;
	} else if (node >= 0) {
		n = 0;	/* links alone: the matrix grows to fit */
	}
	if (!is_null(c, links)) {
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

/* Nodes named in $.inter.order, in order (they are the cache's first
 * nodes: nothing was added before); duplicates are errors. */
static int parse_order(struct pctx *c, json_object *order, int *n)
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
	if (bw_reserve(c->bw, (int)len, c->err) < 0)
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
		return oom(c);
	return 0;
}

/* $.schema: which version of the format the document is. */
static int parse_schema(struct pctx *c, json_object *root)
{
	static const char *const known[] = { PIPETTE_BW_SCHEMA, PIPETTE_BW_SCHEMA_V2,
					     PIPETTE_BW_SCHEMA_V3 };
	json_object *v;
	const char *s;
	int k;

	if (!json_object_object_get_ex(root, "schema", &v)) {
		if (json_object_object_get_ex(root, "gpus", NULL) &&
		    json_object_object_get_ex(root, "bandwidth", NULL))
			return perr(c, "$.schema", "missing; this looks like the "
				    "original Pipette format: convert it with "
				    "'pipette bandwidth import --from pipette-legacy'");
		return perr(c, "$.schema", "missing, expected \"%s\", \"%s\" or \"%s\"",
			    known[0], known[1], known[2]);
	}
	if (!json_object_is_type(v, json_type_string))
		return perr(c, "$.schema", "expected \"%s\", \"%s\" or \"%s\", got %s",
			    known[0], known[1], known[2], jtype(v));
	s = json_object_get_string(v);
	for (k = 0; k < 3 && strcmp(s, known[k]); k++)
		;
	if (k == 3)
		return perr(c, "$.schema", "unsupported schema \"%.40s\" (this pipette "
			    "reads \"%s\", \"%s\" and \"%s\")", s, known[0], known[1],
			    known[2]);
	c->version = k + 1;
	c->bw->schema_read = c->version;
	return 0;
}

/* The top level up to the sections: schema, keys, units, times, defaults. */
static int parse_head(struct pctx *c, json_object *root, time_t *generated)
{
	static const char *const top_keys[] = { "schema", "units", "generated",
		"generator", "comment", "defaults", "inter", "nodes", NULL };
	static const char *const top3_keys[] = { "schema", "units", "generated",
		"generator", "comment", "defaults", "inter", "nodes", "domains", NULL };
	json_object *v;
	const char *s;

	if (parse_schema(c, root) < 0 ||
	    check_keys(c, root, "$", c->version >= 3 ? top3_keys : top_keys) < 0)
		return -1;
	if (json_object_object_get_ex(root, "units", &v) &&
	    (!json_object_is_type(v, json_type_string) ||
	     strcmp(json_object_get_string(v), "GB/s")))
		return perr(c, "$.units", "expected \"GB/s\" (1e9 bytes/s), got "
			    "%s %.20s", jtype(v),
			    json_object_is_type(v, json_type_string) ?
			    json_object_get_string(v) : "");
	if (json_object_object_get_ex(root, "generated", &v) &&
	    get_time(c, v, "$.generated", generated) < 0)
		return -1;
	c->bw->generated = *generated;
	if (json_object_object_get_ex(root, "generator", &v) &&
	    (get_str(c, v, "$.generator", &s) < 0 ||
	     pipette_bwcache_set_generator(c->bw, s, c->err) < 0))
		return -1;
	if (json_object_object_get_ex(root, "defaults", &v) && parse_defaults(c, v) < 0)
		return -1;
	return 0;
}

/* Every key of $.nodes becomes a node (after those of $.inter.order). */
static int add_nodes(struct pctx *c, json_object *nodes)
{
	json_object_iter it;
	char path[320];

	if (!json_object_is_type(nodes, json_type_object))
		return perr(c, "$.nodes", "expected an object keyed by node name, got %s",
			    jtype(nodes));
	json_object_object_foreachC(nodes, it) {
		snprintf(path, sizeof(path), "$.nodes.%.255s", it.key);
		if (pipette_bwcache_add_node(c->bw, it.key, c->err) < 0)
			return pipette_fail_prefix(c->err, "%s: %s: ", c->src, path);
	}
	return 0;
}

static int parse_nodes(struct pctx *c, json_object *nodes, time_t generated)
{
	static const char *const node_keys[] = { "gpus", "topo", "intra", NULL };
	json_object_iter it;
	json_object *v;
	char path[320];

	json_object_object_foreachC(nodes, it) {
		int k = pipette_bwcache_node_index(c->bw, it.key);
		struct bw_node *nd = &c->bw->node[k];

		snprintf(path, sizeof(path), "$.nodes.%.255s", it.key);
		if (!json_object_is_type(it.val, json_type_object))
			return perr(c, path, "expected an object, got %s", jtype(it.val));
		if (check_keys(c, it.val, path, node_keys) < 0)
			return -1;
		snprintf(path, sizeof(path), "$.nodes.%.255s.gpus", it.key);
		if (json_object_object_get_ex(it.val, "gpus", &v) &&
		    keep_verbatim(c, v, path, &nd->gpus_json) < 0)
			return -1;
		snprintf(path, sizeof(path), "$.nodes.%.255s.topo", it.key);
		if (json_object_object_get_ex(it.val, "topo", &v) &&
		    keep_verbatim(c, v, path, &nd->topo_json) < 0)
			return -1;
		snprintf(path, sizeof(path), "$.nodes.%.255s.intra", it.key);
		if (json_object_object_get_ex(it.val, "intra", &v) &&
		    parse_section(c, v, path, k, 0, generated) < 0)
			return -1;
	}
	return 0;
}

static int parse_doc(struct pctx *c, json_object *root)
{
	json_object *inter = NULL, *nodes = NULL, *order = NULL, *domains = NULL;
	time_t generated = (time_t)-1;
	int n = 0;

	if (parse_head(c, root, &generated) < 0)
		return -1;
	json_object_object_get_ex(root, "inter", &inter);
	json_object_object_get_ex(root, "nodes", &nodes);
	if (inter) {
		if (!json_object_is_type(inter, json_type_object))
			return perr(c, "$.inter", "expected an object, got %s", jtype(inter));
		if (json_object_object_get_ex(inter, "order", &order) &&
		    parse_order(c, order, &n) < 0)
			return -1;
		if (!order && json_object_object_get_ex(inter, "matrix", NULL))
			return perr(c, "$.inter.order", "missing (the matrix rows need node names)");
	}
	if ((nodes && add_nodes(c, nodes) < 0) ||
	    (inter && parse_section(c, inter, "$.inter", -1, n, generated) < 0) ||
	    (nodes && parse_nodes(c, nodes, generated) < 0))
		return -1;
	if (json_object_object_get_ex(root, "domains", &domains) &&
	    parse_domains(c, domains, n) < 0)
		return -1;
	return 0;
}

int pipette_bwcache_parse(const char *text, size_t len, const char *source,
			  struct pipette_bwcache **out, struct pipette_err *err)
{
	struct pctx c;
	struct bw_doc doc;
	size_t i;
	int rv;

	*out = NULL;
	if (len > (size_t)PIPETTE_BW_MAX_FILE_BYTES)
		return pipette_fail(err, "%s: %zu bytes exceed the limit of %ld",
				    source, len, PIPETTE_BW_MAX_FILE_BYTES);
	for (i = 0; i < len && strchr(" \t\r\n", text[i]) && text[i]; i++)
		;
	if (i == len)
		return pipette_fail(err, "%s: empty file, expected a JSON object "
				    "with \"schema\": \"%s\"", source, PIPETTE_BW_SCHEMA);
	if (bw_scan_doc(text, len, source, &doc, err) < 0)
		return -1;
	memset(&c, 0, sizeof(c));
	c.src = source;
	c.err = err;
	c.doc = &doc;
	c.bw = pipette_bwcache_create();
	rv = c.bw ? parse_doc(&c, doc.root) : oom(&c);
	bw_doc_free(&doc);
	if (rv < 0) {
		pipette_bwcache_destroy(c.bw);
		return -1;
	}
	*out = c.bw;
	return 0;
}

static int load(const char *path, int hash, struct pipette_bwcache **out,
		struct pipette_err *err)
{
	struct pipette_file f;
	int rv;

	*out = NULL;
	rv = hash ? pipette_read_file(path, "bandwidth cache", PIPETTE_BW_MAX_FILE_BYTES, &f, err)
		  : pipette_read_file_unhashed(path, "bandwidth cache", PIPETTE_BW_MAX_FILE_BYTES,
					       &f, err);
	if (rv)
		return -1;
	rv = pipette_bwcache_parse(f.data, f.len, path, out, err);
	if (rv == 0 && hash) {
		memcpy((*out)->sha256, f.sha256, sizeof((*out)->sha256));
		(*out)->has_sha256 = 1;
	}
	pipette_file_free(&f);
	return rv;
}

int pipette_bwcache_load(const char *path, struct pipette_bwcache **out,
			 struct pipette_err *err)
{
	return load(path, 1, out, err);
}

int pipette_bwcache_load_unhashed(const char *path, struct pipette_bwcache **out,
				  struct pipette_err *err)
{
	return load(path, 0, out, err);
}

const unsigned char *pipette_bwcache_sha256(const struct pipette_bwcache *bw)
{
	return bw->has_sha256 ? bw->sha256 : NULL;
}
