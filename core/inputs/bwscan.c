/* pipette: the scanner of bandwidth cache files (bwcache_int.h).
 *
 * json-c builds a tree of the whole document, over 100 bytes per number (a
 * json_object, its array slot, the allocator's overhead; measured: a
 * 4096-node plan peaked at 2073 MiB when the cache went through json-c
 * whole).  So the large values of a cache (its matrices and lists of
 * links) are set aside: one pass checks the syntax of the whole text,
 * notes where they lie and reads what is plain in them as it goes (rows
 * of figures into a grid that becomes the cache's matrix, links into
 * records), json-c parses the rest with a placeholder in their stead, and
 * the cache's reader takes the rows and links the pass read and goes back
 * to the text only for the others (which it reads, and refuses, as it
 * always has).
 *
 * The pass takes JSON (RFC 8259) and the two extensions of json-c's that a
 * hand-edited cache may hold: comments, and the literals NaN, Infinity and
 * -Infinity (which the reader then refuses by name, as figures).  What it
 * refuses gets "line L, column C: malformed JSON: WHY, in PATH"; a key
 * given twice in one object is an error too (json-c would keep the last
 * one and say nothing). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/bwcache_int.h"

/* json-c's tokener here nests at most 64 containers (json_tokener_new_ex
 * with depth 64, as pipette_bwcache_parse has always asked; measured with
 * json-c 0.16: an object holding 63 nested arrays parses, 64 fail "nesting
 * too deep"); the pass allows the same. */
#define SCAN_DEPTH 64

/* Where a value lies in the document: its role decides whether it is set
 * aside (the last three: a list of links, a matrix, $.inter.between) and
 * what its members are. */
enum role { R_OTHER, R_ROOT, R_INTER, R_NODES, R_NODE, R_INTRA, R_LINKS, R_MATRIX,
	    R_BETWEEN };

/* The bw_span kind of a value of role r, or 0 when it is not set aside. */
static char span_kind(int r)
{
	return r == R_LINKS ? 'L' : r == R_MATRIX ? 'M' : r == R_BETWEEN ? 'B' : 0;
}

struct frame {
	char kind;		/* '{' or '[' */
	unsigned char role;	/* of the object, deciding its members' */
	char skind;		/* the span kind of the array this is, or 0 */
	long span;		/* the span this container is, or -1 */
	size_t count;		/* members begun */
	size_t key_s, key_e;	/* the current member's key, quotes included */
	size_t key0;		/* the object's first entry in scan.keys */
};

/* A key of an open object: where it starts (a file is at most
 * PIPETTE_BW_MAX_FILE_BYTES, below 2^32) and a hash of its bytes. */
struct key_ref {
	uint32_t hash, pos;
};

struct scan {
	const char *t;
	size_t len, pos;
	struct frame st[SCAN_DEPTH];
	int depth;
	struct bw_doc *doc;
	const char *why;	/* the error at pos */
	int dup;		/* it is a duplicate key (of the object on top) */
	struct key_ref *keys;
	size_t n_keys, cap_keys;
	uint32_t *cells;	/* a matrix's first row read whole, until its length is known */
};

static int is_ws(char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* White space and comments; a comment that does not end is left for the
 * caller to refuse, and so is a NUL byte in one (where json-c, which
 * stops at a NUL, would end the document: bwscan's parse_rest). */
static size_t skip_ws_slow(const char *t, size_t pos, size_t len)
{
	for (;;) {
		while (pos < len && is_ws(t[pos]))
			pos++;
		if (pos + 1 >= len || t[pos] != '/')
			return pos;
		if (t[pos + 1] == '/') {
			const char *nl = memchr(t + pos, '\n', len - pos);
			size_t end = nl ? (size_t)(nl - t) + 1 : len;
			const char *nul = memchr(t + pos, '\0', end - pos);

			if (nul)
				return (size_t)(nul - t);
			pos = end;
		} else if (t[pos + 1] == '*') {
			size_t p;

			for (p = pos + 2; p + 1 < len && t[p] && !(t[p] == '*' && t[p + 1] == '/'); p++)
				;
			if (p < len && !t[p])
				return p;
			if (p + 1 >= len)
				return pos;
			pos = p + 2;
		} else {
			return pos;
		}
	}
}

/* The same, the common cases (nothing, one blank) inline. */
static inline size_t skip_ws(const char *t, size_t pos, size_t len)
{
	if (pos < len && t[pos] == ' ')
		pos++;
	if (pos < len && !is_ws(t[pos]) && t[pos] != '/')
		return pos;
	return skip_ws_slow(t, pos, len);
}

/* A string at pos ('"'): the position after it, or 0 when it is not
 * JSON.  *esc: it has an escape. */
static size_t scan_string(const char *t, size_t pos, size_t len, int *esc)
{
	*esc = 0;
	for (pos++; pos < len; pos++) {
		unsigned char c = (unsigned char)t[pos];
		int k;

		if (c == '"')
			return pos + 1;
		if (c < 0x20)
			return 0;
		if (c != '\\')
			continue;
		*esc = 1;
		if (++pos >= len)
			return 0;
		if (t[pos] == 'u') {
			for (k = 1; k <= 4; k++)
				if (pos + k >= len || !t[pos + k] ||
				    !strchr("0123456789abcdefABCDEF", t[pos + k]))
					return 0;
			pos += 4;
		} else if (!t[pos] || !strchr("\"\\/bfnrt", t[pos])) {
			return 0;
		}
	}
	return 0;
}

/* A number (RFC 8259 section 6) at pos: the position after it, or 0. */
static size_t scan_number(const char *t, size_t pos, size_t len)
{
	size_t d;

	if (pos < len && t[pos] == '-')
		pos++;
	if (pos >= len || !is_digit(t[pos]))
		return 0;
	if (t[pos] == '0')
		pos++;
	else
		while (pos < len && is_digit(t[pos]))
			pos++;
	if (pos < len && t[pos] == '.') {
		for (d = ++pos; pos < len && is_digit(t[pos]); pos++)
			;
		if (pos == d)
			return 0;
	}
	if (pos < len && (t[pos] == 'e' || t[pos] == 'E')) {
		pos++;
		if (pos < len && (t[pos] == '+' || t[pos] == '-'))
			pos++;
		for (d = pos; pos < len && is_digit(t[pos]); pos++)
			;
		if (pos == d)
			return 0;
	}
	return pos;
}

/* JSON's literals and json-c's NaN, Infinity, -Infinity. */
static size_t scan_literal(const char *t, size_t pos, size_t len)
{
	static const char *const lit[] = { "true", "false", "null", "NaN", "Infinity",
					   "-Infinity" };
	size_t i, n;

	for (i = 0; i < sizeof(lit) / sizeof(lit[0]); i++) {
		n = strlen(lit[i]);
		if (len - pos >= n && !memcmp(t + pos, lit[i], n))
			return pos + n;
	}
	return 0;
}

static int fail(struct scan *s, const char *why)
{
	s->why = why;
	return 0;
}

/* ------------------------------------------------------------------ */
/* keys                                                                */

static int key_is(const char *t, size_t ks, size_t ke, const char *word)
{
	size_t n = strlen(word);

	return ke - ks == n + 2 && !memcmp(t + ks + 1, word, n);
}

/* The role of the value of key [ks, ke) in an object of role `parent`. */
static int child_role(int parent, const char *t, size_t ks, size_t ke)
{
	switch (parent) {
	case R_ROOT:
		return key_is(t, ks, ke, "inter") ? R_INTER :
		       key_is(t, ks, ke, "nodes") ? R_NODES : R_OTHER;
	case R_INTER:
		return key_is(t, ks, ke, "matrix") ? R_MATRIX :
		       key_is(t, ks, ke, "between") ? R_BETWEEN :
		       key_is(t, ks, ke, "links") ? R_LINKS : R_OTHER;
	case R_NODES:
		return R_NODE;
	case R_NODE:
		return key_is(t, ks, ke, "intra") ? R_INTRA : R_OTHER;
	case R_INTRA:
		return key_is(t, ks, ke, "matrix") ? R_MATRIX :
		       key_is(t, ks, ke, "links") ? R_LINKS : R_OTHER;
	}
	return R_OTHER;
}

/* FNV-1a (Fowler, Noll, Vo) over the key's bytes. */
static uint32_t key_hash(const char *t, size_t ks, size_t ke)
{
	uint32_t h = 2166136261u;

	for (; ks < ke; ks++)
		h = (h ^ (unsigned char)t[ks]) * 16777619u;
	return h;
}

static int push_key(struct scan *s, size_t ks, size_t ke)
{
	if (s->n_keys == s->cap_keys) {
		size_t cap = s->cap_keys ? 2 * s->cap_keys : 64;
		struct key_ref *k = realloc(s->keys, cap * sizeof(*k));

		if (!k)
			return -1;
		s->keys = k;
		s->cap_keys = cap;
	}
	s->keys[s->n_keys].hash = key_hash(s->t, ks, ke);
	s->keys[s->n_keys].pos = (uint32_t)ks;
	s->n_keys++;
	return 0;
}

/* Keys at a and b are the same bytes (as written: escapes are compared
 * as they are spelled). */
static int same_key(const struct scan *s, const struct key_ref *a, const struct key_ref *b)
{
	int esc;
	size_t ea, eb;

	if (a->hash != b->hash)
		return 0;
	ea = scan_string(s->t, a->pos, s->len, &esc);
	eb = scan_string(s->t, b->pos, s->len, &esc);
	return ea - a->pos == eb - b->pos && !memcmp(s->t + a->pos, s->t + b->pos, ea - a->pos);
}

static int cmp_key_ref(const void *pa, const void *pb)
{
	const struct key_ref *a = pa, *b = pb;

	if (a->hash != b->hash)
		return a->hash < b->hash ? -1 : 1;
	return (a->pos > b->pos) - (a->pos < b->pos);
}

/* The first key (in the text) of the object on top that repeats an
 * earlier one: its position, or 0 when there is none.  Pairwise up to 16
 * keys (every object of the format but "nodes" has at most 10: the
 * inter section's, bwcache_parse.c), else sorted by hash, so that 4096
 * node names cost O(n log n). */
static size_t find_dup(struct scan *s)
{
	size_t n = s->n_keys - s->st[s->depth - 1].key0, i, j, first = 0;
	struct key_ref *k;

	if (n < 2)
		return 0;
	k = s->keys + s->st[s->depth - 1].key0;
	if (n > 16)
		qsort(k, n, sizeof(*k), cmp_key_ref);
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n && (n <= 16 || k[j].hash == k[i].hash); j++) {
			size_t later = k[i].pos > k[j].pos ? k[i].pos : k[j].pos;

			if (same_key(s, &k[i], &k[j]) && (!first || later < first))
				first = later;
		}
	return first;
}

/* ------------------------------------------------------------------ */
/* the pass                                                            */

/* A new span of kind `kind` at pos; its index, or -1 when out of
 * memory. */
static long span_open(struct scan *s, size_t pos, char kind)
{
	struct bw_doc *d = s->doc;
	char c = s->t[pos];

	if (d->n_span == d->cap_span) {
		size_t cap = d->cap_span ? 2 * d->cap_span : 16;
		struct bw_span *p = realloc(d->span, cap * sizeof(*p));

		if (!p)
			return -1;
		d->span = p;
		d->cap_span = cap;
	}
	d->span[d->n_span].start = pos;
	d->span[d->n_span].end = pos;
	d->span[d->n_span].count = 0;
	d->span[d->n_span].type =
		(c == '-' && pos + 1 < s->len && s->t[pos + 1] != 'I') || is_digit(c) ? '0' : c;
	d->span[d->n_span].kind = kind;
	d->span[d->n_span].link0 = d->n_link;
	d->span[d->n_span].n_link = 0;
	d->span[d->n_span].grid = NULL;
	return (long)d->n_span++;
}

/* One scalar value at s->pos; 1 done, 0 not JSON. */
static int scan_scalar(struct scan *s)
{
	const char *t = s->t;
	size_t p = s->pos;
	int esc;

	if (t[p] == '"') {
		if (!(p = scan_string(t, p, s->len, &esc)))
			return fail(s, "a string that does not end, or holds a control "
				    "character or a bad escape");
	} else if ((t[p] == '-' && p + 1 < s->len && t[p + 1] != 'I') || is_digit(t[p])) {
		if (!(p = scan_number(t, p, s->len)))
			return fail(s, "a malformed number");
	} else if (!(p = scan_literal(t, p, s->len))) {
		return fail(s, "expected a value");
	}
	s->pos = p;
	return 1;
}

/* A value of role `role` at s->pos: a container is opened (pushed: 2), a
 * scalar read (1); 0: not JSON; -1: out of memory. */
static int scan_value(struct scan *s, int role)
{
	long span = -1;
	char c;

	s->pos = skip_ws(s->t, s->pos, s->len);
	if (s->pos >= s->len)
		return fail(s, "expected a value");
	c = s->t[s->pos];
	if (span_kind(role) && (span = span_open(s, s->pos, span_kind(role))) < 0)
		return -1;
	if (c == '{' || c == '[') {
		struct frame *f;

		if (s->depth == SCAN_DEPTH)
			return fail(s, "nesting too deep (at most 64 arrays and objects)");
		f = &s->st[s->depth++];
		f->kind = c;
		f->role = (unsigned char)(c == '{' && !span_kind(role) ? role : R_OTHER);
		f->skind = c == '[' ? span_kind(role) : 0;
		f->span = span;
		f->count = 0;
		f->key_s = f->key_e = 0;
		f->key0 = s->n_keys;
		s->pos++;
		return 2;
	}
	if (!scan_scalar(s))
		return 0;
	if (span >= 0)
		s->doc->span[span].end = s->pos;
	return 1;
}

/* A key and its colon in the object on top; *role: its value's.  1, 0
 * (not JSON), -1 (out of memory). */
static int scan_key(struct scan *s, int *role)
{
	struct frame *f = &s->st[s->depth - 1];
	size_t ks, ke;
	int esc;

	s->pos = skip_ws(s->t, s->pos, s->len);
	if (s->pos >= s->len || s->t[s->pos] != '"')
		return fail(s, "expected a key (a string)");
	ks = s->pos;
	if (!(ke = scan_string(s->t, s->pos, s->len, &esc)))
		return fail(s, "a key that does not end, or holds a control character or "
			    "a bad escape");
	if (esc && f->role != R_OTHER)
		return fail(s, "a key written with an escape sequence (pipette reads "
			    "these keys as written: write it plainly)");
	f->key_s = ks;
	f->key_e = ke;
	f->count++;
	if (push_key(s, ks, ke) < 0)
		return -1;
	s->pos = skip_ws(s->t, ke, s->len);
	if (s->pos >= s->len || s->t[s->pos] != ':')
		return fail(s, "expected ':' after the key");
	s->pos++;
	*role = child_role(f->role, s->t, ks, ke);
	return 1;
}

/* The container on top ends at s->pos (its closing bracket); 0 when an
 * object repeats a key. */
static int scan_close(struct scan *s)
{
	struct frame *f = &s->st[s->depth - 1];
	size_t dup;

	if (f->kind == '{' && (dup = find_dup(s))) {
		s->pos = dup;
		s->dup = 1;
		return fail(s, "duplicate key");
	}
	s->pos++;
	if (f->span >= 0) {
		s->doc->span[f->span].end = s->pos;
		s->doc->span[f->span].count = f->count;
	}
	s->n_keys = f->key0;
	s->depth--;
	return 1;
}

/* The next member of the container on top, after a value or its opening:
 * 1 with *role its role (a key read), 2 when containers closed down to
 * the top level, 0, -1. */
static int scan_next(struct scan *s, int *role, int opened)
{
	for (;;) {
		struct frame *f = &s->st[s->depth - 1];
		char close = f->kind == '{' ? '}' : ']';

		s->pos = skip_ws(s->t, s->pos, s->len);
		if (s->pos >= s->len)
			return fail(s, f->kind == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
		if (s->t[s->pos] == close) {
			if (!scan_close(s))
				return 0;
			if (!s->depth)
				return 2;
			opened = 0;
			continue;
		}
		if (!opened) {
			if (s->t[s->pos] != ',')
				return fail(s, f->kind == '{' ? "expected ',' or '}'"
							      : "expected ',' or ']'");
			s->pos++;
		}
		if (f->kind == '{')
			return scan_key(s, role);
		f->count++;
		*role = R_OTHER;
		return 1;
	}
}

/* A run of numbers and nulls, each with its comma, in the array on top
 * (most of a matrix): read here in a tight loop, up to the first element
 * that is something else or has no comma after it, which the caller then
 * reads (and refuses) the general way. */
static void scan_run(struct scan *s)
{
	const char *t = s->t;
	size_t p = s->pos, q, len = s->len;
	struct frame *f = &s->st[s->depth - 1];

	for (;;) {
		p = skip_ws(t, p, len);
		if (p >= len)
			return;
		if (is_digit(t[p]) || t[p] == '-')
			q = scan_number(t, p, len);
		else if (len - p >= 4 && !memcmp(t + p, "null", 4))
			q = p + 4;
		else
			return;
		if (!q)
			return;
		q = skip_ws(t, q, len);
		if (q >= len || t[q] != ',')
			return;
		f->count++;	/* the next element begins */
		s->pos = p = q + 1;
	}
}

/* ------------------------------------------------------------------ */
/* what the pass reads whole                                           */

static const double pow10_exact[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* A short code m / 10^k within (0, PIPETTE_BW_MAX_GBPS]: cm / 10^k <=
 * max <=> cm <= max x 10^k, in integers (k >= 5: below 2^27 / 10^5). */
static int code_in_range(uint32_t code)
{
	static const uint32_t max_m[] = {
		(uint32_t)PIPETTE_BW_MAX_GBPS, (uint32_t)PIPETTE_BW_MAX_GBPS * 10,
		(uint32_t)PIPETTE_BW_MAX_GBPS * 100, (uint32_t)PIPETTE_BW_MAX_GBPS * 1000,
		(uint32_t)PIPETTE_BW_MAX_GBPS * 10000,
	};
	uint32_t k = code >> BW_M_BITS, cm = code & ((1u << BW_M_BITS) - 1);

	return k >= 5 || cm <= max_m[k];
}

/* A JSON number at p (RFC 8259 section 6) that is a bandwidth with a
 * short code: 1 with *end after it and *code; 0 for anything else (not a
 * number, not a bandwidth, more than 19 significant digits, no short
 * code), which the text's reader then takes.  The digits give m x 10^e
 * as read_gbps's do. */
static int short_gbps(const char *t, size_t p, size_t len, size_t *end, uint32_t *code)
{
	uint64_t m = 0;
	int nd = 0, e = 0, x = 0, sign = 1;
	size_t d;

	if (p >= len || !is_digit(t[p]))
		return 0;	/* a sign: no bandwidth */
	if (t[p] == '0')
		p++;
	else
		for (; p < len && is_digit(t[p]); p++) {
			if (nd >= 19)
				return 0;
			m = m * 10 + (uint64_t)(t[p] - '0');
			nd++;
		}
	if (p < len && t[p] == '.') {
		for (d = ++p; p < len && is_digit(t[p]); p++, e--) {
			if (nd >= 19)
				return 0;
			m = m * 10 + (uint64_t)(t[p] - '0');
			nd += m != 0;
		}
		if (p == d)
			return 0;
	}
	if (p < len && (t[p] == 'e' || t[p] == 'E')) {
		if (++p < len && (t[p] == '+' || t[p] == '-'))
			sign = t[p++] == '-' ? -1 : 1;
		for (d = p; p < len && is_digit(t[p]); p++)
			if (x < 100000)
				x = x * 10 + (t[p] - '0');
		if (p == d)
			return 0;
		e += sign * x;
	}
	*end = p;
	/* what bw_code_decimal gives, at once when there is nothing to
	 * normalize (no trailing zero after the point, no exponent left) */
	if (m && m < (1u << BW_M_BITS) && e <= 0 && e >= -BW_K_MAX && (!e || m % 10))
		*code = (uint32_t)m | (uint32_t)-e << BW_M_BITS;
	else
		*code = bw_code_decimal(m, e);
	return *code != BW_NONE && code_in_range(*code);
}

/* A string at p without escapes or control characters: the position
 * after it, or 0. */
static size_t plain_string(const char *t, size_t p, size_t len)
{
	if (p >= len || t[p] != '"')
		return 0;
	for (p++; p < len; p++) {
		unsigned char c = (unsigned char)t[p];

		if (c == '"')
			return p + 1;
		if (c < 0x20 || c == '\\')
			return 0;
	}
	return 0;
}

/* Value k of a link (0 "a", 1 "b", 2 "gbps") at v: its end, or 0 when
 * it is not one read_link takes. */
static size_t link_value(const char *t, size_t v, size_t len, int k, size_t p,
			 struct bw_link *l)
{
	size_t e;

	if (k == 2)
		return short_gbps(t, v, len, &e, &l->code) ? e : 0;
	e = t[v] == '"' ? plain_string(t, v, len) : is_digit(t[v]) || t[v] == '-' ?
	    scan_number(t, v, len) : 0;
	if (!e || e - v > UINT8_MAX || v - p > UINT16_MAX)
		return 0;
	if (k == 0) {
		l->a = (uint16_t)(v - p);
		l->a_len = (uint8_t)(e - v);
	} else {
		l->b = (uint16_t)(v - p);
		l->b_len = (uint8_t)(e - v);
	}
	return e;
}

/* A link at p written as pipette writes it (bwcache_io.c: {"a": A, "b":
 * B, "gbps": G}, nothing else): 1 with *l as read_link gives it, 0 when
 * it is written any other way.  Most links of a large cache: matching
 * the text between the values whole costs less than reading each key. */
/* Value k of a plain link at q, after the text `key` (n bytes): its end,
 * or 0.  Inline, so that the comparison of a constant is no call. */
static inline size_t plain_member(const char *t, size_t q, size_t len, const char *key, size_t n,
				  int k, size_t p, struct bw_link *l)
{
	if (!q || len - q <= n || memcmp(t + q, key, n))
		return 0;
	return link_value(t, q + n, len, k, p, l);
}

static int read_link_plain(const char *t, size_t p, size_t len, struct bw_link *l)
{
	static const char ka[] = "{\"a\": ", kb[] = ", \"b\": ", kg[] = ", \"gbps\": ";
	size_t q = plain_member(t, p, len, ka, sizeof(ka) - 1, 0, p, l);

	q = plain_member(t, q, len, kb, sizeof(kb) - 1, 1, p, l);
	q = plain_member(t, q, len, kg, sizeof(kg) - 1, 2, p, l);
	if (!q || q >= len || t[q] != '}' || q + 1 - p > UINT16_MAX)
		return 0;
	l->start = (uint32_t)p;
	l->len = (uint16_t)(q + 1 - p);
	return 1;
}

/* A link at p as bw_link describes it: 1 with *l, 0 when it is anything
 * else (the general pass then checks it, and the reader reads it from
 * the text). */
static int read_link(const char *t, size_t p, size_t len, struct bw_link *l)
{
	size_t q, v;
	int seen = 0, k;

	if (p >= len || t[p] != '{')
		return 0;
	if (read_link_plain(t, p, len, l))
		return 1;
	for (q = skip_ws(t, p + 1, len);; q = skip_ws(t, q + 1, len)) {
		if (q + 2 < len && t[q] == '"' && (t[q + 1] == 'a' || t[q + 1] == 'b') &&
		    t[q + 2] == '"') {
			k = t[q + 1] - 'a';
			q += 3;
		} else if (len - q >= 6 && !memcmp(t + q, "\"gbps\"", 6)) {
			k = 2;
			q += 6;
		} else {
			return 0;
		}
		if (seen & 1 << k)
			return 0;	/* a duplicate key: the general pass says so */
		seen |= 1 << k;
		q = skip_ws(t, q, len);
		if (q >= len || t[q] != ':')
			return 0;
		v = skip_ws(t, q + 1, len);
		if (v >= len || !(q = link_value(t, v, len, k, p, l)))
			return 0;
		q = skip_ws(t, q, len);
		if (q >= len || (t[q] != ',' && t[q] != '}'))
			return 0;
		if (t[q] == '}')
			break;
	}
	if (seen != 7 || q + 1 - p > UINT16_MAX)
		return 0;
	l->start = (uint32_t)p;
	l->len = (uint16_t)(q + 1 - p);
	return 1;
}

static int push_link(struct bw_doc *d, const struct bw_link *l)
{
	if (d->n_link == d->cap_link) {
		size_t cap = d->cap_link ? 2 * d->cap_link : 256;
		struct bw_link *p = realloc(d->link, cap * sizeof(*p));

		if (!p)
			return -1;
		d->link = p;
		d->cap_link = cap;
	}
	d->link[d->n_link++] = *l;
	return 0;
}

/* The links of the list on top, read whole while they are as bw_link
 * says, each with its comma: 1 when the last one read ends the list's
 * run (s->pos after it), 0 when the element at s->pos is for the general
 * pass, -1 out of memory. */
static int run_links(struct scan *s)
{
	struct frame *f = &s->st[s->depth - 1];
	struct bw_span *sp = &s->doc->span[f->span];
	struct bw_link l;
	size_t p, q;

	for (;;) {
		p = skip_ws(s->t, s->pos, s->len);
		if (!read_link(s->t, p, s->len, &l))
			return 0;
		if (push_link(s->doc, &l) < 0)
			return -1;
		sp->n_link++;
		q = skip_ws(s->t, p + l.len, s->len);
		if (q >= s->len || s->t[q] != ',') {
			s->pos = p + l.len;
			return 1;
		}
		f->count++;	/* the next element begins */
		s->pos = q + 1;
	}
}

/* Room in grid g for rows [0, need) (need <= stride): a quarter more
 * than before, so that the rows of a matrix cost what they hold.  -1 out
 * of memory. */
static int grid_rows(struct bw_grid *g, size_t need)
{
	size_t rows = g->rows + g->rows / 4;
	uint32_t *p;

	if (need <= g->rows)
		return 0;
	if (rows < need)
		rows = need;
	if (rows < 16)
		rows = 16;
	if (rows > g->stride)
		rows = g->stride;
	if (!(p = realloc(g->code, rows * g->stride * sizeof(uint32_t))))
		return -1;
	g->code = p;
	g->rows = rows;
	return 0;
}

/* Row i of a matrix at p, read whole into `out` (room for `max` cells)
 * when it is as bw_grid says: its length, with *end after it and
 * *measured set when it holds a figure; 0 when it is anything else. */
static size_t read_row(const char *t, size_t p, size_t len, size_t i, int diag,
		       uint32_t *out, size_t max, size_t *end, int *measured)
{
	size_t j = 0, q, e;

	if (p >= len || t[p] != '[')
		return 0;
	for (q = skip_ws(t, p + 1, len);; q = skip_ws(t, q + 1, len)) {
		uint32_t c = BW_NONE;

		if (q >= len || j >= max)
			return 0;
		if (t[q] == 'n') {
			if (len - q < 4 || memcmp(t + q, "null", 4))
				return 0;
			e = q + 4;
		} else if (!short_gbps(t, q, len, &e, &c) || (diag && j == i)) {
			return 0;	/* the reader names what is wrong */
		}
		*measured |= c != BW_NONE;
		out[j++] = c;
		q = skip_ws(t, e, len);
		if (q >= len || (t[q] != ',' && t[q] != ']'))
			return 0;
		if (t[q] == ']')
			break;
	}
	*end = q + 1;
	return j;
}

/* Row i of a matrix at p into its grid g: 1 read whole (*end after
 * it), 0 not, -1 out of memory. */
static int grid_row(struct scan *s, struct bw_grid *g, size_t p, size_t i, int diag,
		    size_t *end)
{
	size_t n;
	int measured = 0;

	if (g->stride) {
		if (i >= g->stride || grid_rows(g, i + 1) < 0)
			return i >= g->stride ? 0 : -1;
		n = read_row(s->t, p, s->len, i, diag, g->code + i * g->stride, g->stride, end,
			     &measured);
		if (n != g->stride)
			return 0;
	} else {
		if (!s->cells &&
		    !(s->cells = malloc(PIPETTE_BW_MAX_NODES * sizeof(uint32_t))))
			return -1;
		n = read_row(s->t, p, s->len, i, diag, s->cells, PIPETTE_BW_MAX_NODES, end,
			     &measured);
		if (!n || i >= n)
			return 0;
		g->stride = n;
		if (grid_rows(g, i + 1) < 0)
			return -1;
		memcpy(g->code + i * n, s->cells, n * sizeof(uint32_t));
	}
	g->measured |= measured;
	g->n_read++;
	return 1;
}

/* Where row i starts, and whether it was read whole, in grid g. */
static int note_row(struct bw_grid *g, size_t i, size_t p, int read)
{
	if (i >= PIPETTE_BW_MAX_NODES)
		return 0;
	if (g->n_row == g->cap_row) {
		size_t cap = g->cap_row ? 2 * g->cap_row : 8;
		uint32_t *r = realloc(g->row, cap * sizeof(uint32_t));

		if (!r)
			return -1;
		g->row = r;
		g->cap_row = cap;
	}
	g->row[g->n_row++] = (uint32_t)p | (read ? BW_ROW_READ : 0);
	return 0;
}

/* The rows of the matrix on top, read whole while they are as bw_grid
 * says, each with its comma; returns as run_links. */
static int run_rows(struct scan *s)
{
	struct frame *f = &s->st[s->depth - 1];
	struct bw_span *sp = &s->doc->span[f->span];
	size_t p, q, end;
	int r;

	if (!sp->grid && !(sp->grid = calloc(1, sizeof(*sp->grid))))
		return -1;
	for (;;) {
		p = skip_ws(s->t, s->pos, s->len);
		r = grid_row(s, sp->grid, p, f->count - 1, f->skind == 'M', &end);
		if (r < 0 || note_row(sp->grid, f->count - 1, p, r) < 0)
			return -1;
		if (!r)
			return 0;
		q = skip_ws(s->t, end, s->len);
		if (q >= s->len || s->t[q] != ',') {
			s->pos = end;
			return 1;
		}
		f->count++;
		s->pos = q + 1;
	}
}

/* An element of the array on top begins at s->pos: read it (and those
 * after it) here when it can be; returns as run_links. */
static int scan_elems(struct scan *s)
{
	char k = s->st[s->depth - 1].skind;

	if (k == 'L')
		return run_links(s);
	if (k == 'M' || k == 'B')
		return run_rows(s);
	scan_run(s);
	return 0;
}

/* The whole text: 1 (spans noted), 0 (s->why at s->pos), -1 out of
 * memory. */
static int scan_text(struct scan *s)
{
	int role = R_ROOT, r, read = 0;

	s->pos = skip_ws(s->t, 0, s->len);
	if (s->pos >= s->len || s->t[s->pos] != '{')
		return fail(s, "the top level must be an object");
	for (;;) {
		if (!read && (r = scan_value(s, role)) <= 0)
			return r;
		r = scan_next(s, &role, !read && r == 2);
		if (r <= 0)
			return r;
		if (r == 2)
			break;
		read = 0;
		if (s->st[s->depth - 1].kind == '[' && (read = scan_elems(s)) < 0)
			return -1;
	}
	s->pos = skip_ws(s->t, s->pos, s->len);
	if (s->pos < s->len)
		return fail(s, s->t[s->pos] == '/' ? "a comment that does not end"
						   : "text after the top-level object");
	return 1;
}

/* ------------------------------------------------------------------ */
/* what went wrong, and where                                          */

/* "$.inter.matrix[3]": the members that lead to the error (the top
 * object's own member too unless it is the duplicate key's object). */
static void where(const struct scan *s, int with_top, char *buf, size_t size)
{
	size_t len = 0;
	int i;

	len += (size_t)snprintf(buf, size, "$");
	for (i = 0; i < s->depth && len < size; i++) {
		const struct frame *f = &s->st[i];

		if (!f->count || (i == s->depth - 1 && !with_top))
			continue;
		if (f->kind == '[')
			len += (size_t)snprintf(buf + len, size - len, "[%zu]", f->count - 1);
		else
			len += (size_t)snprintf(buf + len, size - len, ".%.*s",
						(int)(f->key_e - f->key_s - 2 > 64 ? 64 :
						      f->key_e - f->key_s - 2),
						s->t + f->key_s + 1);
	}
}

static void line_col(const char *t, size_t len, size_t pos, int *line, int *col)
{
	size_t i;

	*line = 1;
	*col = 1;
	for (i = 0; i < pos && i < len; i++) {
		if (t[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

static int scan_error(const struct scan *s, const char *source, struct pipette_err *err)
{
	const char *why = s->pos < s->len && !s->t[s->pos] ? "a NUL byte" : s->why;
	char path[512];
	int line, col, esc;

	line_col(s->t, s->len, s->pos, &line, &col);
	where(s, !s->dup, path, sizeof(path));
	if (s->dup) {
		size_t e = scan_string(s->t, s->pos, s->len, &esc);

		return pipette_fail(err, "%s: %s: duplicate key %.*s (line %d, column %d)",
				    source, path, (int)(e - s->pos > 66 ? 66 : e - s->pos),
				    s->t + s->pos, line, col);
	}
	if (s->pos >= s->len)
		return pipette_fail(err, "%s: line %d, column %d: malformed JSON: unexpected "
				    "end of file (%s), in %s", source, line, col, why, path);
	return pipette_fail(err, "%s: line %d, column %d: malformed JSON: %s, in %s", source,
			    line, col, why, path);
}

/* ------------------------------------------------------------------ */
/* json-c over the rest                                                */

/* One piece of the text to json-c; *root: the last value it handed back.
 * json-c may hand one back before the text ends (it stops at a NUL byte,
 * one in a comment too, with what it has built: measured with json-c
 * 0.16) and then fails on what follows: that value is kept for the caller
 * to free, never dropped (tests/fuzz/regress/bwcache). */
static int feed(struct json_tokener *tok, const char *p, size_t n, json_object **root)
{
	json_object *r;

	if (!n)
		return 0;
	if (n > INT_MAX)
		return -1;
	r = json_tokener_parse_ex(tok, p, (int)n);
	if (r) {
		json_object_put(*root);
		*root = r;
	}
	return json_tokener_get_error(tok) == json_tokener_continue ||
	       json_tokener_get_error(tok) == json_tokener_success ? 0 : -1;
}

/* json-c's tree of the document with "#K" in place of span K. */
static json_object *parse_rest(const struct bw_doc *d, const char *source,
			       struct pipette_err *err)
{
	struct json_tokener *tok = json_tokener_new_ex(SCAN_DEPTH);
	json_object *root = NULL;
	size_t pos = 0, k;
	char ph[32];
	int bad = !tok;

	errno = 0;
	for (k = 0; !bad && k < d->n_span; k++) {
		snprintf(ph, sizeof(ph), "\"#%zu\"", k);
		bad = feed(tok, d->text + pos, d->span[k].start - pos, &root) < 0 ||
		      feed(tok, ph, strlen(ph), &root) < 0;
		pos = d->span[k].end;
	}
	if (!bad)
		bad = feed(tok, d->text + pos, d->len - pos, &root) < 0;
	if (!bad && json_tokener_get_error(tok) != json_tokener_success)
		bad = 1;
	if (bad || !root || !json_object_is_type(root, json_type_object)) {
		/* the pass took the text, so json-c fails for want of memory */
		if (tok && errno != ENOMEM && json_tokener_get_error(tok) != json_tokener_success)
			pipette_fail(err, "%s: malformed JSON: %s", source,
				     json_tokener_error_desc(json_tokener_get_error(tok)));
		else
			pipette_fail_code(err, PIPETTE_E_LIMIT, "%s: out of memory while "
					  "parsing %zu bytes of JSON", source, d->len);
		json_object_put(root);
		root = NULL;
	}
	if (tok)
		json_tokener_free(tok);
	return root;
}

int bw_scan_doc(const char *text, size_t len, const char *source, struct bw_doc *doc,
		struct pipette_err *err)
{
	struct scan *s = calloc(1, sizeof(*s));
	int r;

	memset(doc, 0, sizeof(*doc));
	doc->text = text;
	doc->len = len;
	if (!s)
		return pipette_fail(err, "%s: out of memory", source);
	s->t = text;
	s->len = len;
	s->doc = doc;
	r = scan_text(s);
	if (r == 0)
		scan_error(s, source, err);
	else if (r < 0)
		pipette_fail(err, "%s: out of memory", source);
	free(s->keys);
	free(s->cells);
	free(s);
	if (r == 1 && !(doc->root = parse_rest(doc, source, err)))
		r = -1;
	if (r != 1) {
		bw_doc_free(doc);
		return -1;
	}
	return 0;
}

void bw_doc_free(struct bw_doc *doc)
{
	size_t k;

	json_object_put(doc->root);
	for (k = 0; k < doc->n_span; k++)
		if (doc->span[k].grid) {
			free(doc->span[k].grid->code);
			free(doc->span[k].grid->row);
			free(doc->span[k].grid);
		}
	free(doc->link);
	free(doc->span);
	memset(doc, 0, sizeof(*doc));
}

struct bw_span *bw_doc_span(const struct bw_doc *doc, json_object *v)
{
	const char *s;
	char *end;
	unsigned long k;

	if (!doc || !doc->span || !v || !json_object_is_type(v, json_type_string))
		return NULL;
	s = json_object_get_string(v);
	if (s[0] != '#' || !is_digit(s[1]))
		return NULL;
	errno = 0;
	k = strtoul(s + 1, &end, 10);
	if (errno || *end || k >= doc->n_span)
		return NULL;
	return &doc->span[k];
}

/* ------------------------------------------------------------------ */
/* reading what was set aside (the text there is strict JSON)          */

/* The end of the value at pos. */
static size_t skip_value(const char *t, size_t pos, size_t end)
{
	int depth = 0, esc;

	do {
		pos = skip_ws(t, pos, end);
		if (pos >= end)
			return end;
		switch (t[pos]) {
		case '"':
			pos = scan_string(t, pos, end, &esc);
			if (!pos)
				return end;
			break;
		case '[':
		case '{':
			depth++;
			pos++;
			break;
		case ']':
		case '}':
			depth--;
			pos++;
			break;
		case ',':
		case ':':
			pos++;
			break;
		default:
			while (pos < end && !is_ws(t[pos]) && !strchr(",:]}", t[pos]))
				pos++;
		}
	} while (depth > 0);
	return pos;
}

/* Past white space and one comma after a value at pos. */
static size_t after_sep(const char *t, size_t pos, size_t end)
{
	pos = skip_ws(t, pos, end);
	if (pos < end && t[pos] == ',')
		pos = skip_ws(t, pos + 1, end);
	return pos;
}

/* A JSON number at pos: 1 when it is a bandwidth in (0, max], with *code
 * its short code (BW_NONE when it has none, *v its value then); *next
 * after it.  A value m x 10^e with m < 2^53 and |e| <= 22 is one correctly
 * rounded operation on exact doubles (Clinger, "How to read floating point
 * numbers accurately", PLDI 1990), so it equals strtod's; strtod reads the
 * rest. */
static int read_gbps(const char *t, size_t pos, size_t end, size_t *next, uint32_t *code,
		     double *v)
{
	uint64_t m = 0;
	int nd = 0, e = 0, lost = 0, neg = t[pos] == '-';
	size_t p = pos + neg;

	for (; p < end && is_digit(t[p]); p++) {
		if (nd < 19) {
			m = m * 10 + (uint64_t)(t[p] - '0');
			nd += m != 0;
		} else {
			e++;
			lost |= t[p] != '0';
		}
	}
	if (p < end && t[p] == '.')
		for (p++; p < end && is_digit(t[p]); p++) {
			if (nd < 19) {
				m = m * 10 + (uint64_t)(t[p] - '0');
				nd += m != 0;
				e--;
			} else {
				lost |= t[p] != '0';
			}
		}
	if (p < end && (t[p] == 'e' || t[p] == 'E')) {
		int sign = 1, x = 0;

		if (++p < end && (t[p] == '+' || t[p] == '-'))
			sign = t[p++] == '-' ? -1 : 1;
		for (; p < end && is_digit(t[p]); p++)
			if (x < 100000)
				x = x * 10 + (t[p] - '0');
		e += sign * x;
	}
	*next = p;
	if (neg || m == 0)
		return 0;
	*code = lost ? BW_NONE : bw_code_decimal(m, e);
	if (*code != BW_NONE)
		return code_in_range(*code);
	if (!lost && m < (1ULL << 53) && e >= -22 && e <= 22)
		*v = e < 0 ? (double)m / pow10_exact[-e] : (double)m * pow10_exact[e];
	else
		*v = strtod(t + pos, NULL);	/* the text goes on past the number */
	return isfinite(*v) && *v > 0 && *v <= PIPETTE_BW_MAX_GBPS;
}


size_t bw_scan_row(const char *t, size_t pos, size_t end, long diag, size_t want,
		   uint32_t *code, double *val, struct bw_row *row)
{
	size_t j;

	row->len = 0;
	row->bad = (size_t)-1;
	pos = row->start = skip_ws(t, pos, end);
	row->end = end;
	if (pos >= end)
		return end;
	row->type = is_digit(t[pos]) || (t[pos] == '-' && pos + 1 < end && t[pos + 1] != 'I')
		    ? '0' : t[pos];
	if (t[pos] != '[') {
		row->end = skip_value(t, pos, end);
		return after_sep(t, row->end, end);
	}
	pos = skip_ws(t, pos + 1, end);
	for (j = 0; pos < end && t[pos] != ']'; j++) {
		size_t cs = pos, ce;
		uint32_t c = BW_NONE;
		double v = NAN;
		int ok = 1;

		if (t[cs] == 'n') {
			ce = cs + 4;
		} else if (is_digit(t[cs]) || (t[cs] == '-' && cs + 1 < end && is_digit(t[cs + 1]))) {
			ok = read_gbps(t, cs, end, &ce, &c, &v) && (long)j != diag;
			if (ok && c == BW_NONE)
				c = BW_EXACT;	/* the value is in val[j] */
		} else {
			ce = skip_value(t, cs, end);
			ok = 0;
		}
		if (!ok && row->bad == (size_t)-1)
			row->bad = j;
		else if (ok && j < want) {
			code[j] = c;
			val[j] = v;
		}
		row->len++;
		pos = after_sep(t, ce, end);
	}
	row->end = pos < end ? pos + 1 : end;
	return after_sep(t, row->end, end);
}

size_t bw_scan_elem(const char *t, const struct bw_span *sp, size_t pos)
{
	if (pos == sp->start)
		pos++;	/* the '[' */
	pos = skip_ws(t, pos, sp->end);
	if (pos < sp->end && t[pos] == ',')
		pos = skip_ws(t, pos + 1, sp->end);
	return pos >= sp->end || t[pos] == ']' ? sp->end : pos;
}

size_t bw_scan_skip(const char *t, size_t pos, size_t end)
{
	return skip_value(t, pos, end);
}

int bw_scan_next(const char *t, const struct bw_span *sp, size_t *pos, size_t *vs,
		 size_t *ve)
{
	size_t p = bw_scan_elem(t, sp, *pos);

	if (p >= sp->end) {
		*pos = sp->end;
		return 0;
	}
	*vs = p;
	*ve = *pos = skip_value(t, p, sp->end);
	return 1;
}

int bw_scan_gbps(const char *t, size_t s, size_t e, uint32_t *code, double *v)
{
	size_t next;

	*code = BW_NONE;
	if (s >= e || !(is_digit(t[s]) || (t[s] == '-' && s + 1 < e && is_digit(t[s + 1]))) ||
	    !read_gbps(t, s, e, &next, code, v) || next != e)
		return 0;
	if (*code != BW_NONE)
		*v = bw_code_value(*code);
	return 1;
}

int bw_scan_object(const char *t, size_t s, size_t e, const char *const *keys, size_t *vs,
		   size_t *ve)
{
	size_t p = skip_ws(t, s, e), ks, ke, k, n;
	int esc;

	for (n = 0; keys[n]; n++)
		vs[n] = ve[n] = 0;
	if (p >= e || t[p] != '{')
		return 0;
	for (p = skip_ws(t, p + 1, e); p < e && t[p] != '}'; p = after_sep(t, p, e)) {
		ks = p;
		if (t[p] != '"' || !(ke = scan_string(t, p, e, &esc)) || esc)
			return 0;
		for (k = 0; k < n && !key_is(t, ks, ke, keys[k]); k++)
			;
		if (k == n)
			return 0;
		p = skip_ws(t, ke, e);
		if (p >= e || t[p] != ':')
			return 0;
		p = vs[k] = skip_ws(t, p + 1, e);
		if (p >= e)
			return 0;
		if (t[p] == '"') {
			if (!(p = scan_string(t, p, e, &esc)) || esc)
				return 0;
		} else if (is_digit(t[p]) || (t[p] == '-' && p + 1 < e && is_digit(t[p + 1]))) {
			p = scan_number(t, p, e);
		} else if (e - p >= 4 && !memcmp(t + p, "null", 4)) {
			p += 4;
		} else {
			return 0;
		}
		ve[k] = p;
	}
	return p < e;
}

json_object *bw_scan_value(const char *t, size_t s, size_t e, int shallow, int *oom)
{
	struct json_tokener *tok;
	json_object *v;

	*oom = 0;
	if (t[s] == 'n')
		return NULL;
	if (is_digit(t[s]) || (t[s] == '-' && s + 1 < e && is_digit(t[s + 1]))) {
		/* as strtod reads it: json-c clamps integers beyond 64 bits */
		v = json_object_new_double(strtod(t + s, NULL));
		*oom = !v;
		return v;
	}
	if (shallow && (t[s] == '[' || t[s] == '{')) {
		v = t[s] == '[' ? json_object_new_array() : json_object_new_object();
		*oom = !v;
		return v;
	}
	if (e - s > INT_MAX || !(tok = json_tokener_new_ex(SCAN_DEPTH))) {
		*oom = 1;
		return NULL;
	}
	v = json_tokener_parse_ex(tok, t + s, (int)(e - s));
	if (!v && json_tokener_get_error(tok) == json_tokener_continue)
		v = json_tokener_parse_ex(tok, "", 1);	/* a number needs its end */
	json_tokener_free(tok);
	*oom = !v;
	return v;
}
