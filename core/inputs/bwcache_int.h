/* pipette: bandwidth cache internals shared by bwcache*.c, bwmat.c,
 * bwscan.c, bwimport.c, bwgen.c and cluster.c.  Not installed; not part of
 * the API. */
#ifndef PIPETTE_BWCACHE_INT_H
#define PIPETTE_BWCACHE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <json-c/json.h>

#include "inputs/bwcache.h"
#include "inputs/readfile.h"

/* One directed figure, unpacked: gbps NaN = unmeasured, lat NaN = no
 * latency, prov an index into pipette_bwcache.prov (-1 = unknown); code
 * the short code it is stored as (BW_NONE: none). */
struct bw_entry {
	double gbps;
	float lat;
	int prov;
	uint32_t code;
};

/* ---- a bandwidth in four bytes (bwmat.c) ----
 *
 * A figure is stored as a code: a short decimal m / 10^k (m < 2^27, k <=
 * 15: m in the low 27 bits, k in the next 4), or, with the top bit set,
 * the index of an exact double in a side table (a figure with more than
 * eight significant digits).  Decoding a short decimal divides two doubles
 * that hold m and 10^k exactly (m < 2^53, 10^k <= 10^22), and an IEEE 754
 * division is correctly rounded, so the result is the double nearest to
 * m / 10^k, which is what strtod makes of the same decimal: a figure reads
 * back bit for bit as the file or the caller gave it. */
#define BW_NONE 0xffffffffu		/* unmeasured */
#define BW_EXACT 0x80000000u		/* low 31 bits: index of an exact double */
#define BW_M_BITS 27
#define BW_K_MAX 15

/* The short code of m x 10^e, or BW_NONE when it has none. */
uint32_t bw_code_decimal(uint64_t m, int e);
/* The short code of a double, or BW_NONE when no short decimal reads
 * back as exactly v. */
uint32_t bw_code_of(double v);
/* m / 10^k of a short code. */
double bw_code_value(uint32_t code);
/* The digits of a short code in the plain notation pipette writes, when
 * that is the shortest text that reads back as its value (value >= 1e-4
 * and k <= 12, bwcache_io.c's sb_short); buf needs 32 bytes.  Returns the
 * length, or 0 when the caller must format the value itself. */
int bw_code_text(uint32_t code, char *buf);

/* Exact figures that have no short code; slots of overwritten figures are
 * reused. */
struct bw_exact {
	double *v;
	uint32_t n, cap;
	uint32_t *free;
	uint32_t n_free, cap_free;
};

/* A square matrix of figures: 4 bytes per cell for the bandwidth; the
 * latency and provenance columns exist only once some measured cell
 * differs from the first one set (lat0, prov0), so a matrix measured in
 * one run costs 4 bytes per cell and one with per-link latencies 8. */
struct bw_mat {
	int n, cap;		/* n x n cells in use, rows of cap */
	uint32_t *code;		/* cap x cap */
	float *lat;		/* NULL: every measured cell has lat0 */
	int *prov;		/* NULL: every measured cell has prov0 */
	float lat0;
	int prov0, has0;	/* has0: lat0 and prov0 are set */
	struct bw_exact ex;
};

void bw_mat_free(struct bw_mat *m);
/* Use n x n cells (new ones unmeasured), allocating cap x cap (cap >= n)
 * when it must grow; -1 when out of memory. */
int bw_mat_reserve(struct bw_mat *m, int n, int cap);
static inline int bw_mat_has(const struct bw_mat *m, int i, int j)
{
	return m->code[(size_t)i * m->cap + j] != BW_NONE;
}
void bw_mat_get(const struct bw_mat *m, int i, int j, struct bw_entry *e);
/* Store a measured figure; code is bw_code_of(gbps) when the caller has
 * it, or BW_NONE to have it found.  -1 when out of memory. */
int bw_mat_set(struct bw_mat *m, int i, int j, double gbps, uint32_t code, float lat,
	       int prov);
/* Row i, cells j < n: code[j] as the scanner gives it (BW_NONE: leave the
 * cell; BW_EXACT: the figure is val[j]; val NULL: there is none), each
 * with lat and prov. */
int bw_mat_set_row(struct bw_mat *m, int i, const uint32_t *code, const double *val,
		   int n, float lat, int prov);
size_t bw_mat_bytes(const struct bw_mat *m);

/* Figures of some node pairs: a hash per row (open addressing, linear
 * probing), so that the pairs of one node lie together and a row of
 * lookups stays in cache; key = b + 1, 0 = empty slot. */
struct bw_pair {
	uint32_t key, code;
	float lat;
	int prov;
};

struct bw_pair_row {
	struct bw_pair *slot;
	uint32_t n_slot, count;
};

struct bw_pairs {
	struct bw_pair_row *row;	/* n_rows, by node a */
	int n_rows;
	uint32_t count;
	struct bw_exact ex;
};

void bw_pairs_free(struct bw_pairs *h);
/* The slot of a -> b, or NULL. */
const struct bw_pair *bw_pairs_find(const struct bw_pairs *h, int a, int b);
void bw_pair_entry(const struct bw_pairs *h, const struct bw_pair *p, struct bw_entry *e);
/* 1 and *e filled when the pair is there, else 0. */
int bw_pairs_get(const struct bw_pairs *h, int a, int b, struct bw_entry *e);
/* Room in row a for `more` pairs beyond those it holds, so that setting
 * them grows it no more (the same slots it would have grown to). */
int bw_pairs_reserve(struct bw_pairs *h, int a, uint32_t more);
int bw_pairs_set(struct bw_pairs *h, int a, int b, double gbps, uint32_t code, float lat,
		 int prov);
size_t bw_pairs_bytes(const struct bw_pairs *h);

/* ---- the cache ---- */

struct bw_prov_rec {
	char *tool;
	char *metric;
	double bytes;
	time_t when;
};

struct bw_node {
	char *name;
	struct bw_mat intra;	/* GPU x GPU, by Slurm index; intra.n = 0: none */
	char *gpus_json;	/* "gpus" and "topo", kept verbatim */
	char *topo_json;
	int domain;		/* index into pipette_bwcache.domain, -1: none */
};

/* An NVLink domain larger than a node (pipette-bw/3): its name (the
 * probe's NVML fabric cluster UUID and clique id) and its size in GPUs as
 * stated (0: not stated; the GPUs of its nodes). */
struct bw_domain {
	char *name;
	int gpus;
};

/* The inter-node figures: node pairs set one by one (the file's matrix and
 * links, and every set and merge since), in a hash while they are few and
 * in a dense matrix once they are many, over the figures between groups
 * of nodes (pipette-bw/2).  A pair's figure is its own when it has one,
 * else its groups'. */
struct bw_inter {
	int dense;		/* pairs are in mat, not in the hash */
	struct bw_mat mat;	/* dense: n x n */
	struct bw_pairs pairs;
	int n_groups, cap_groups;
	char **group_name;
	int *group_of;		/* per node (cap of the cache); -1: no group */
	struct bw_mat between;	/* n_groups x n_groups, [g][g]: inside g */
};

/* A slot of the node names' hash: the name (node k's, which never
 * changes) and its hash's high bits, so that a lookup compares names only
 * when those match and does not visit the node (k -1: empty). */
struct bw_name_slot {
	const char *name;
	uint32_t tag;
	int k;
};

struct pipette_bwcache {
	int n, cap;
	struct bw_node *node;
	struct bw_inter inter;
	struct bw_prov_rec *prov;
	int n_prov, cap_prov;
	int *prov_slots;	/* open-addressing hash of prov */
	int n_slots;
	struct bw_name_slot *name_slots;	/* open-addressing hash of node names */
	int n_name_slots;
	struct bw_domain *domain;
	int n_domains, cap_domains;
	struct pipette_bw_defaults def;
	time_t generated;
	char *generator;
	int schema_read;	/* version of the file loaded, 0 = built in memory */
	unsigned char sha256[PIPETTE_SHA256_LEN];	/* of the file loaded */
	int has_sha256;
};

int bw_prov_intern(struct pipette_bwcache *bw, const struct pipette_bw_prov *p,
		   struct pipette_err *err);
time_t bw_prov_when(const struct pipette_bwcache *bw, int prov);
/* The index of the node named by the len bytes at name, or -1. */
int bw_node_index_n(const struct pipette_bwcache *bw, const char *name, size_t len);
int bw_reserve(struct pipette_bwcache *bw, int want, struct pipette_err *err);
int bw_intra_reserve(struct bw_node *nd, int ng, struct pipette_err *err);

/* The figure a -> b as the cache resolves it (the pair's own, else its
 * groups'); gbps NaN when there is none. */
void bw_inter_get(const struct pipette_bwcache *bw, int a, int b, struct bw_entry *e);
/* The pair's own figure only. */
void bw_inter_own(const struct pipette_bwcache *bw, int a, int b, struct bw_entry *e);
int bw_inter_set(struct pipette_bwcache *bw, int a, int b, double gbps, uint32_t code,
		 float lat, int prov, struct pipette_err *err);
/* Room for `more` pairs from node a about to be set (nothing when the
 * pairs are dense): -1 out of memory. */
int bw_inter_reserve(struct pipette_bwcache *bw, int a, uint32_t more, struct pipette_err *err);
/* Keep the pairs in a dense matrix from now on (a file's matrix, a
 * generated cache). */
int bw_inter_make_dense(struct pipette_bwcache *bw, struct pipette_err *err);
/* Pairs that have a figure of their own. */
size_t bw_inter_own_count(const struct pipette_bwcache *bw);
static inline void bw_intra_get(const struct bw_node *nd, int a, int b, struct bw_entry *e)
{
	bw_mat_get(&nd->intra, a, b, e);
}
/* Find or add the NVLink domain `name` (pipette-bw/3) stating `gpus` (0:
 * not stated; a stated size never changes: another is an error); its
 * index or -1. */
int bw_domain_add(struct pipette_bwcache *bw, const char *name, int gpus,
		  struct pipette_err *err);
int bw_domain_index(const struct pipette_bwcache *bw, const char *name);
/* Add a group of nodes (pipette-bw/2); its index or -1. */
int bw_group_add(struct pipette_bwcache *bw, const char *name, struct pipette_err *err);
int bw_group_index(const struct pipette_bwcache *bw, const char *name);

/* ---- the scanner of cache files (bwscan.c) ----
 *
 * A document (JSON with comments and NaN/Infinity allowed, nesting at most
 * 64 deep as json-c's tokener here, no key twice in an object) is parsed
 * by json-c except for the values that can be large: $.inter.matrix,
 * $.inter.between, $.inter.links and $.nodes.NAME.intra.matrix and .links.
 * json-c sees the string "#K" in their place, and span K holds the value's
 * bytes.  The one pass that checks the syntax also reads what is plain in
 * them (rows of figures, links of two ends and a figure), so that the
 * cache's reader takes those without going over the text again; the rest
 * it reads from the text. */

/* A link the pass read whole: an object of the keys "a", "b" and "gbps"
 * only, each once and written plainly, its ends strings without escapes
 * or numbers, its figure a bandwidth with a short code.  Offsets are from
 * the link's first byte; an end's bytes include a string's quotes. */
struct bw_link {
	uint32_t start;		/* the link's first byte in the text */
	uint32_t code;		/* its figure */
	uint16_t len;		/* its bytes */
	uint16_t a, b;		/* where its ends' values start */
	uint8_t a_len, b_len;
};

/* The rows of a matrix the pass read whole: each null or a bandwidth
 * with a short code (null on the diagonal of a "matrix"), all of one
 * length (the first such row's).  row[i] is where row i starts, with
 * BW_ROW_READ set when it was read whole (its cells at code + i x
 * stride); the first PIPETTE_BW_MAX_NODES rows have one (no matrix the
 * format takes has more). */
#define BW_ROW_READ 0x80000000u
struct bw_grid {
	uint32_t *code;
	size_t stride, rows;	/* cells per row; rows allocated */
	uint32_t *row;
	size_t n_row, cap_row;
	size_t n_read;		/* rows read whole */
	int measured;		/* one of them holds a figure */
};

struct bw_span {
	size_t start, end;	/* the value's bytes */
	size_t count;		/* elements, when it is an array */
	char type;		/* its first byte: [ { " n t f, or 0 for a number */
	char kind;		/* 'L' links, 'M' a matrix, 'B' $.inter.between */
	size_t link0, n_link;	/* links: its links read whole, in bw_doc.link */
	struct bw_grid *grid;	/* a matrix: its rows (NULL: none read) */
};

struct bw_doc {
	json_object *root;
	struct bw_span *span;
	size_t n_span, cap_span;
	struct bw_link *link;
	size_t n_link, cap_link;
	const char *text;
	size_t len;
};

/* 0: parsed, spans set aside; -1: malformed (err: "SOURCE: line L,
 * column C: malformed JSON: WHY, in PATH", or "SOURCE: PATH: duplicate
 * key ...") or out of memory. */
int bw_scan_doc(const char *text, size_t len, const char *source, struct bw_doc *doc,
		struct pipette_err *err);
void bw_doc_free(struct bw_doc *doc);
/* The span json-c holds as the placeholder v, or NULL. */
struct bw_span *bw_doc_span(const struct bw_doc *doc, json_object *v);

/* One row of a matrix span, scanned: where it lies, its length, and the
 * first cell that is neither a bandwidth in (0, PIPETTE_BW_MAX_GBPS] nor
 * null, or is not null on the diagonal (cell diag). */
struct bw_row {
	size_t start, end;	/* the row's bytes */
	size_t len;
	char type;		/* the row's first byte; '[' when it is a row */
	size_t bad;		/* index of that cell, (size_t)-1 when none */
};
/* The row at pos (white space before it skipped): cells j < want go to
 * code[j] (BW_NONE for null) and, when they have no short code, their
 * value to val[j]; returns the position of the next row (past the
 * comma). */
size_t bw_scan_row(const char *text, size_t pos, size_t end, long diag, size_t want,
		   uint32_t *code, double *val, struct bw_row *row);
/* The first byte of the element of array span sp after position pos
 * (start with sp->start: the elements, one after another, with pos the
 * end of the last), or sp->end when there is none. */
size_t bw_scan_elem(const char *text, const struct bw_span *sp, size_t pos);
/* The end of the valid JSON value at pos (end: where to stop). */
size_t bw_scan_skip(const char *text, size_t pos, size_t end);
/* The next element of an array span after position *pos (start with
 * span->start); 1 with [*vs, *ve) set, 0 at the end. */
int bw_scan_next(const char *text, const struct bw_span *sp, size_t *pos, size_t *vs,
		 size_t *ve);
/* A number [s, e) that is a bandwidth in (0, PIPETTE_BW_MAX_GBPS]: 1,
 * with its value (as strtod reads it) and its short code (BW_NONE when
 * it has none); 0 when it is not. */
int bw_scan_gbps(const char *text, size_t s, size_t e, uint32_t *code, double *v);
/* An object [s, e) whose keys, each written plainly, are among keys[]
 * (NULL-terminated), with values that are strings without escapes,
 * numbers or null: 1, with the bytes of key k's value in [vs[k], ve[k])
 * (vs[k] == ve[k] when it is absent); 0 for anything else. */
int bw_scan_object(const char *text, size_t s, size_t e, const char *const *keys,
		   size_t *vs, size_t *ve);
/* json-c's value for the bytes [s, e) of a valid JSON value; with
 * shallow, containers come back empty (when only their type is asked
 * for).  NULL is JSON null, or *oom is set. */
json_object *bw_scan_value(const char *text, size_t s, size_t e, int shallow, int *oom);

#endif
