/* pipette: compact storage of bandwidth figures (bwcache_int.h): codes of
 * four bytes, matrices with optional latency and provenance columns, and
 * a hash of node pairs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/bwcache_int.h"

/* 10^0 .. 10^22: every one is a double exactly (5^22 < 2^53). */
static const double pow10_tab[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

static const uint64_t ipow10[] = {
	1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
	100000000ULL, 1000000000ULL,
};

uint32_t bw_code_decimal(uint64_t m, int e)
{
	if (m == 0)
		return BW_NONE;
	while (m % 10 == 0 && e < 0) {
		m /= 10;
		e++;
	}
	if (e > 0) {
		if (e > 9 || m >= ((uint64_t)1 << BW_M_BITS) / ipow10[e])
			return BW_NONE;
		m *= ipow10[e];
		e = 0;
	}
	if (-e > BW_K_MAX || m >= ((uint64_t)1 << BW_M_BITS))
		return BW_NONE;
	return (uint32_t)m | (uint32_t)(-e) << BW_M_BITS;
}

double bw_code_value(uint32_t code)
{
	uint32_t k = code >> BW_M_BITS, m = code & ((1u << BW_M_BITS) - 1);

	return k ? (double)m / pow10_tab[k] : (double)m;
}

uint32_t bw_code_of(double v)
{
	int k;

	if (!(v > 0) || v >= (double)(1u << BW_M_BITS))
		return BW_NONE;
	for (k = 0; k <= BW_K_MAX; k++) {
		double x = v * pow10_tab[k];
		uint64_t m;

		if (x >= (double)(1u << BW_M_BITS))
			return BW_NONE;
		m = (uint64_t)(x + 0.5);
		if (m && (k ? (double)m / pow10_tab[k] : (double)m) == v)
			return bw_code_decimal(m, -k);
	}
	return BW_NONE;
}

int bw_code_text(uint32_t code, char *buf)
{
	uint32_t k = code >> BW_M_BITS, m = code & ((1u << BW_M_BITS) - 1);
	char digits[16];
	int nd = 0, len = 0, i;

	/* value >= 1e-4 <=> m >= 10^(k-4); sb_short tries at most 12 places. */
	if (code & BW_EXACT || k > 12 || (k > 4 && m < ipow10[k - 4]))
		return 0;
	do {
		digits[nd++] = (char)('0' + m % 10);
		m /= 10;
	} while (m);
	while (nd <= (int)k)
		digits[nd++] = '0';	/* 0.0045: leading zeros */
	for (i = nd - 1; i >= 0; i--) {
		buf[len++] = digits[i];
		if (i == (int)k && k)
			buf[len++] = '.';
	}
	buf[len] = '\0';
	return len;
}

/* ------------------------------------------------------------------ */
/* exact figures                                                       */

static void exact_free(struct bw_exact *x)
{
	free(x->v);
	free(x->free);
	memset(x, 0, sizeof(*x));
}

/* The code of an exact figure stored in x (a freed slot when there is
 * one), or BW_NONE when out of memory. */
static uint32_t exact_put(struct bw_exact *x, double v)
{
	uint32_t i;

	if (x->n_free) {
		i = x->free[--x->n_free];
	} else {
		if (x->n == x->cap) {
			uint32_t cap = x->cap ? 2 * x->cap : 16;
			double *nv;

			if (cap > BW_EXACT - 1 || !(nv = realloc(x->v, cap * sizeof(double))))
				return BW_NONE;
			x->v = nv;
			x->cap = cap;
		}
		i = x->n++;
	}
	x->v[i] = v;
	return BW_EXACT | i;
}

/* The slot of an overwritten exact figure is free for the next. */
static int exact_drop(struct bw_exact *x, uint32_t code)
{
	if (code == BW_NONE || !(code & BW_EXACT))
		return 0;
	if (x->n_free == x->cap_free) {
		uint32_t cap = x->cap_free ? 2 * x->cap_free : 16;
		uint32_t *nf = realloc(x->free, cap * sizeof(uint32_t));

		if (!nf)
			return -1;
		x->free = nf;
		x->cap_free = cap;
	}
	x->free[x->n_free++] = code & ~BW_EXACT;
	return 0;
}

static double code_gbps(const struct bw_exact *x, uint32_t code)
{
	if (code == BW_NONE)
		return NAN;
	if (code & BW_EXACT)
		return x->v[code & ~BW_EXACT];
	return bw_code_value(code);
}

/* The code that stores gbps in place of old (whose exact slot, if any,
 * is reused); BW_NONE when out of memory. */
static uint32_t store_code(struct bw_exact *x, uint32_t old, double gbps, uint32_t code)
{
	if (code == BW_NONE)
		code = bw_code_of(gbps);
	if (code != BW_NONE)
		return exact_drop(x, old) < 0 ? BW_NONE : code;
	if (old != BW_NONE && (old & BW_EXACT)) {
		x->v[old & ~BW_EXACT] = gbps;
		return old;
	}
	return exact_put(x, gbps);
}

static size_t exact_bytes(const struct bw_exact *x)
{
	return x->cap * sizeof(double) + x->cap_free * sizeof(uint32_t);
}

/* ------------------------------------------------------------------ */
/* matrices                                                            */

void bw_mat_free(struct bw_mat *m)
{
	free(m->code);
	free(m->lat);
	free(m->prov);
	exact_free(&m->ex);
	memset(m, 0, sizeof(*m));
}

/* A copy of the cap x cap column `old` (elements of size sz) in a
 * ncap x ncap one, the new cells filled with `fill`; NULL when out of
 * memory (old then stays). */
static void *regrid(const void *old, int cap, int n, int ncap, size_t sz, const void *fill)
{
	char *p = malloc((size_t)ncap * (size_t)ncap * sz);
	size_t i, j;

	if (!p)
		return NULL;
	for (i = 0; i < (size_t)ncap; i++)
		for (j = 0; j < (size_t)ncap; j++) {
			char *d = p + (i * (size_t)ncap + j) * sz;

			if (old && i < (size_t)n && j < (size_t)n)
				memcpy(d, (const char *)old + (i * (size_t)cap + j) * sz, sz);
			else
				memcpy(d, fill, sz);
		}
	return p;
}

int bw_mat_reserve(struct bw_mat *m, int n, int cap)
{
	static const uint32_t none = BW_NONE;
	uint32_t *code;
	float *lat = NULL;
	int *prov = NULL;

	if (n <= m->cap && m->code) {
		if (n > m->n)
			m->n = n;
		return 0;
	}
	if (cap < n)
		cap = n;
	if (cap < 1)
		cap = 1;
	code = regrid(m->code, m->cap, m->n, cap, sizeof(*code), &none);
	if (code && m->lat)
		lat = regrid(m->lat, m->cap, m->n, cap, sizeof(*lat), &m->lat0);
	if (code && m->prov)
		prov = regrid(m->prov, m->cap, m->n, cap, sizeof(*prov), &m->prov0);
	if (!code || (m->lat && !lat) || (m->prov && !prov)) {
		free(code);
		free(lat);
		free(prov);
		return -1;
	}
	free(m->code);
	free(m->lat);
	free(m->prov);
	m->code = code;
	m->lat = lat;
	m->prov = prov;
	m->cap = cap;
	m->n = n;
	return 0;
}

void bw_mat_get(const struct bw_mat *m, int i, int j, struct bw_entry *e)
{
	size_t c = (size_t)i * m->cap + j;
	uint32_t code = m->code[c];

	if (code == BW_NONE) {
		e->gbps = NAN;
		e->lat = NAN;
		e->prov = -1;
		e->code = BW_NONE;
		return;
	}
	e->gbps = code & BW_EXACT ? m->ex.v[code & ~BW_EXACT] : bw_code_value(code);
	e->code = code & BW_EXACT ? BW_NONE : code;
	e->lat = m->lat ? m->lat[c] : m->lat0;
	e->prov = m->prov ? m->prov[c] : m->prov0;
}

static int same_lat(float a, float b)
{
	return a == b || (isnan(a) && isnan(b));
}

/* A column of cap x cap copies of v; NULL when out of memory. */
static void *column(int cap, size_t sz, const void *v)
{
	char *p = malloc((size_t)cap * (size_t)cap * sz);
	size_t i;

	for (i = 0; p && i < (size_t)cap * (size_t)cap; i++)
		memcpy(p + i * sz, v, sz);
	return p;
}

int bw_mat_set(struct bw_mat *m, int i, int j, double gbps, uint32_t code, float lat,
	       int prov)
{
	size_t c = (size_t)i * m->cap + j;

	if (!m->has0) {
		m->lat0 = lat;
		m->prov0 = prov;
		m->has0 = 1;
	}
	if (!m->lat && !same_lat(lat, m->lat0) &&
	    !(m->lat = column(m->cap, sizeof(float), &m->lat0)))
		return -1;
	if (!m->prov && prov != m->prov0 &&
	    !(m->prov = column(m->cap, sizeof(int), &m->prov0)))
		return -1;
	code = store_code(&m->ex, m->code[c], gbps, code);
	if (code == BW_NONE)
		return -1;
	m->code[c] = code;
	if (m->lat)
		m->lat[c] = lat;
	if (m->prov)
		m->prov[c] = prov;
	return 0;
}

int bw_mat_set_row(struct bw_mat *m, int i, const uint32_t *code, const double *val,
		   int n, float lat, int prov)
{
	uint32_t *row = m->code + (size_t)i * m->cap;
	int j, fast = !m->lat && !m->prov && m->has0 && same_lat(lat, m->lat0) &&
		      prov == m->prov0;

	for (j = 0; j < n; j++) {
		if (code[j] == BW_NONE)
			continue;
		/* a short code over a short code or none: the code is all */
		if (fast && code[j] != BW_EXACT && (row[j] == BW_NONE || !(row[j] & BW_EXACT))) {
			row[j] = code[j];
			continue;
		}
		if (bw_mat_set(m, i, j, code[j] == BW_EXACT ? val[j] : bw_code_value(code[j]),
			       code[j] == BW_EXACT ? BW_NONE : code[j], lat, prov) < 0)
			return -1;
		fast = !m->lat && !m->prov;	/* the first set fixes lat0 and prov0 */
	}
	return 0;
}

size_t bw_mat_bytes(const struct bw_mat *m)
{
	size_t cells = (size_t)m->cap * (size_t)m->cap;

	return cells * (sizeof(uint32_t) + (m->lat ? sizeof(float) : 0) +
			(m->prov ? sizeof(int) : 0)) + exact_bytes(&m->ex);
}

/* ------------------------------------------------------------------ */
/* node pairs                                                          */

/* Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4): the golden-ratio multiple
 * spreads consecutive keys over the table; n_slot is a power of two. */
static uint32_t pair_slot(uint32_t key, uint32_t n_slot)
{
	return (uint32_t)(((uint64_t)key * 0x9E3779B97F4A7C15ULL) >> 32) & (n_slot - 1);
}

void bw_pairs_free(struct bw_pairs *h)
{
	int a;

	for (a = 0; a < h->n_rows; a++)
		free(h->row[a].slot);
	free(h->row);
	exact_free(&h->ex);
	memset(h, 0, sizeof(*h));
}

const struct bw_pair *bw_pairs_find(const struct bw_pairs *h, int a, int b)
{
	const struct bw_pair_row *r;
	uint32_t key = (uint32_t)b + 1, s;

	if (a >= h->n_rows || !(r = &h->row[a])->n_slot)
		return NULL;
	for (s = pair_slot(key, r->n_slot); r->slot[s].key; s = (s + 1) & (r->n_slot - 1))
		if (r->slot[s].key == key)
			return &r->slot[s];
	return NULL;
}

void bw_pair_entry(const struct bw_pairs *h, const struct bw_pair *p, struct bw_entry *e)
{
	e->gbps = code_gbps(&h->ex, p->code);
	e->code = p->code & BW_EXACT ? BW_NONE : p->code;
	e->lat = p->lat;
	e->prov = p->prov;
}

int bw_pairs_get(const struct bw_pairs *h, int a, int b, struct bw_entry *e)
{
	const struct bw_pair *p = bw_pairs_find(h, a, b);

	if (!p)
		return 0;
	bw_pair_entry(h, p, e);
	return 1;
}

/* Row r with n slots (a power of two, more than it has), its pairs
 * placed again. */
static int row_resize(struct bw_pair_row *r, uint32_t n)
{
	uint32_t i, s;
	struct bw_pair *slot = calloc(n, sizeof(*slot));

	if (!slot)
		return -1;
	for (i = 0; i < r->n_slot; i++) {
		if (!r->slot[i].key)
			continue;
		for (s = pair_slot(r->slot[i].key, n); slot[s].key; s = (s + 1) & (n - 1))
			;
		slot[s] = r->slot[i];
	}
	free(r->slot);
	r->slot = slot;
	r->n_slot = n;
	return 0;
}

/* Rows up to a exist; -1 when out of memory. */
static int rows_reserve(struct bw_pairs *h, int a)
{
	int n = a + 1 > 2 * h->n_rows ? a + 1 : 2 * h->n_rows;
	struct bw_pair_row *rows;

	if (a < h->n_rows)
		return 0;
	if (!(rows = realloc(h->row, (size_t)n * sizeof(*rows))))
		return -1;
	memset(rows + h->n_rows, 0, (size_t)(n - h->n_rows) * sizeof(*rows));
	h->row = rows;
	h->n_rows = n;
	return 0;
}

/* The slots a row of count pairs has when it grew one pair at a time:
 * at most half full (a miss then probes about 2.5 slots, Knuth 6.4),
 * doubling from 8. */
static uint32_t row_slots(uint32_t n_slot, uint32_t count)
{
	uint32_t n = n_slot ? n_slot : 8;

	while (2 * count > n)
		n *= 2;
	return n;
}

int bw_pairs_reserve(struct bw_pairs *h, int a, uint32_t more)
{
	struct bw_pair_row *r;
	uint32_t n;

	if (rows_reserve(h, a) < 0)
		return -1;
	r = &h->row[a];
	n = row_slots(r->n_slot, r->count + more);
	return n > r->n_slot ? row_resize(r, n) : 0;
}

int bw_pairs_set(struct bw_pairs *h, int a, int b, double gbps, uint32_t code, float lat,
		 int prov)
{
	uint32_t key = (uint32_t)b + 1, s;
	struct bw_pair_row *r;

	if (rows_reserve(h, a) < 0)
		return -1;
	r = &h->row[a];
	if (2 * (r->count + 1) > r->n_slot &&
	    row_resize(r, row_slots(r->n_slot, r->count + 1)) < 0)
		return -1;
	for (s = pair_slot(key, r->n_slot); r->slot[s].key && r->slot[s].key != key;
	     s = (s + 1) & (r->n_slot - 1))
		;
	code = store_code(&h->ex, r->slot[s].key ? r->slot[s].code : BW_NONE, gbps, code);
	if (code == BW_NONE)
		return -1;
	if (!r->slot[s].key) {
		r->count++;
		h->count++;
	}
	r->slot[s].key = key;
	r->slot[s].code = code;
	r->slot[s].lat = lat;
	r->slot[s].prov = prov;
	return 0;
}

size_t bw_pairs_bytes(const struct bw_pairs *h)
{
	size_t sum = (size_t)h->n_rows * sizeof(struct bw_pair_row) + exact_bytes(&h->ex);
	int a;

	for (a = 0; a < h->n_rows; a++)
		sum += h->row[a].n_slot * sizeof(struct bw_pair);
	return sum;
}
