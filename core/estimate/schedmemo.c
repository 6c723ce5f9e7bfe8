/* pipette: a memo of pipeline simulations; see schedmemo.h. */
#include "estimate/schedmemo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Entries, direct-mapped by the input's hash: over the plans of
 * tests/bench/bench_plan.c's hard cases (8 and 16 nodes, llama3-70b) a
 * plan makes 3,300 to 5,700 simulations of 1,400 to 2,300 distinct
 * inputs, the repeats mostly close to each other; a miss only simulates
 * again.  The keys take 5 p v doubles each (1.6 MiB at p v = 160). */
#define MEMO_BITS 8

struct memo_entry {
	uint64_t hash;
	int valid, kind, p, v;
	long m;
	size_t n_key, cap_key;
	double *key;		/* t_f, t_b, t_w, comm_f, comm_b */
	struct pipette_sched_result res;
	double *arr;		/* busy, finish, peak_fb_stages, peak_fw_stages */
	int *peaks;		/* peak_fb, peak_fw */
	int cap_p;
};

struct pipette_sched_memo {
	struct memo_entry e[1 << MEMO_BITS];
};

struct pipette_sched_memo *pipette_sched_memo_create(void)
{
	return calloc(1, sizeof(struct pipette_sched_memo));
}

void pipette_sched_memo_destroy(struct pipette_sched_memo *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < sizeof(m->e) / sizeof(m->e[0]); i++) {
		free(m->e[i].key);
		free(m->e[i].arr);
		free(m->e[i].peaks);
	}
	free(m);
}

/* The key's arrays in order: NULL arrays read as zeros. */
static const double *key_part(const struct pipette_sched_input *in, int k, size_t *n)
{
	size_t S = (size_t)in->p * in->v;
	const double *a[5] = { in->t_f, in->t_b, in->t_w, in->comm_f, in->comm_b };

	*n = k < 3 ? S : S - 1;
	return a[k];
}

/* FNV-1a over the shape and every time's bits (Fowler, Noll, Vo; the
 * 64-bit offset basis and prime of the IETF draft-eastlake-fnv). */
static uint64_t hash_input(const struct pipette_sched_input *in)
{
	uint64_t h = 14695981039346656037ULL;
	long shape[4] = { in->kind, in->p, in->v, in->m };
	size_t i, n;
	int k;

	for (i = 0; i < 4; i++)
		h = (h ^ (uint64_t)shape[i]) * 1099511628211ULL;
	for (k = 0; k < 5; k++) {
		const double *a = key_part(in, k, &n);

		for (i = 0; i < n; i++) {
			uint64_t b = 0;

			if (a)
				memcpy(&b, &a[i], sizeof(b));
			h = (h ^ b) * 1099511628211ULL;
		}
	}
	return h;
}

static int same_input(const struct memo_entry *e, const struct pipette_sched_input *in,
		      uint64_t h)
{
	size_t off = 0, n;
	int k;

	if (!e->valid || e->hash != h || e->kind != (int)in->kind || e->p != in->p ||
	    e->v != in->v || e->m != in->m)
		return 0;
	for (k = 0; k < 5; k++, off += n) {
		const double *a = key_part(in, k, &n);
		size_t i;

		if (a) {
			if (memcmp(e->key + off, a, n * sizeof(double)))
				return 0;
			continue;
		}
		for (i = 0; i < n; i++) {	/* NULL: every bit zero */
			uint64_t b;

			memcpy(&b, &e->key[off + i], sizeof(b));
			if (b)
				return 0;
		}
	}
	return 1;
}

int pipette_sched_memo_find(struct pipette_sched_memo *m, const struct pipette_sched_input *in,
			    struct pipette_sched_result *out)
{
	uint64_t h = hash_input(in);
	struct memo_entry *e = &m->e[h & ((1u << MEMO_BITS) - 1)];

	if (!same_input(e, in, h))
		return 0;
	*out = e->res;
	return 1;
}

static int grow_entry(struct memo_entry *e, size_t n_key, int p)
{
	if (n_key > e->cap_key) {
		double *k = realloc(e->key, n_key * sizeof(double));

		if (!k)
			return -1;
		e->key = k;
		e->cap_key = n_key;
	}
	if (p > e->cap_p) {
		double *a = realloc(e->arr, (size_t)p * 4 * sizeof(double));
		int *q;

		if (!a)
			return -1;
		e->arr = a;
		q = realloc(e->peaks, (size_t)p * 2 * sizeof(int));
		if (!q)
			return -1;
		e->peaks = q;
		e->cap_p = p;
	}
	return 0;
}

void pipette_sched_memo_keep(struct pipette_sched_memo *m, const struct pipette_sched_input *in,
			     const struct pipette_sched_result *res)
{
	uint64_t h = hash_input(in);
	struct memo_entry *e = &m->e[h & ((1u << MEMO_BITS) - 1)];
	size_t S = (size_t)in->p * in->v, off = 0, n, p = (size_t)in->p;
	int k;

	e->valid = 0;
	if (grow_entry(e, 5 * S, in->p))
		return;
	for (k = 0; k < 5; k++, off += n) {
		const double *a = key_part(in, k, &n);

		if (a)
			memcpy(e->key + off, a, n * sizeof(double));
		else
			memset(e->key + off, 0, n * sizeof(double));
	}
	memcpy(e->arr, res->busy, p * sizeof(double));
	memcpy(e->arr + p, res->finish, p * sizeof(double));
	memcpy(e->arr + 2 * p, res->peak_fb_stages, p * sizeof(double));
	memcpy(e->arr + 3 * p, res->peak_fw_stages, p * sizeof(double));
	memcpy(e->peaks, res->peak_fb, p * sizeof(int));
	memcpy(e->peaks + p, res->peak_fw, p * sizeof(int));
	e->res = *res;
	e->res.busy = e->arr;
	e->res.finish = e->arr + p;
	e->res.peak_fb_stages = e->arr + 2 * p;
	e->res.peak_fw_stages = e->arr + 3 * p;
	e->res.peak_fb = e->peaks;
	e->res.peak_fw = e->peaks + p;
	e->res.n_simulated = 0;
	e->res.n_stored = 0;
	e->hash = h;
	e->kind = (int)in->kind;
	e->p = in->p;
	e->v = in->v;
	e->m = in->m;
	e->n_key = 5 * S;
	e->valid = 1;
}
