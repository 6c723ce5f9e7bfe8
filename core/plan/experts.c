/* pipette: expert placement from routing statistics (experts.h).
 *
 * The trace (read, write, generate), the cost model and the greedy + swap
 * heuristic; the GLPK integer program is in experts_ilp.c (its own
 * library, so that GLPK stays out of the SPANK plugin).  The greedy is a
 * pure function of its inputs (work budgets, never time). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "plan/experts.h"
#include "plan/experts_int.h"
#include "inputs/json.h"
#include "inputs/hardware.h"
#include "inputs/rng.h"
#include "estimate/timing.h"

#define MAX_EXPERTS 4096
/* A trace of DeepSeek-V3 (57 transitions of 256 x 256 counts, 3.7 M
 * numbers) is 8 MB as dense JSON for 4096 tokens and grows with the count
 * digits; leave room, but refuse what cannot be a trace. */
#define MAX_TRACE_BYTES (512L << 20)
/* BF16 activations travel in the all-to-all: a dispatch moves the s*b*k
 * routed tokens of a rank, h values each, in the training dtype, BF16 in
 * Megatron's recipes. */
#define ACT_BYTES 2.0
/* Swap evaluations the local search may spend (a budget in work, not time). */
#define SWAP_BUDGET 50000000L
#define SWAP_PASSES 50


/* ---- routing container ------------------------------------------------------ */

struct pipette_routing *pipette_routing_create(int layers, int experts, int topk,
					       struct pipette_err *err)
{
	struct pipette_routing *r;
	size_t nn;

	if (layers < 1 || layers > 100000)
		return pipette_fail(err, "routing: %d MoE layers: expected 1..100000", layers),
		       NULL;
	if (experts < 1 || experts > MAX_EXPERTS)
		return pipette_fail(err, "routing: %d experts: expected 1..%d", experts,
				    MAX_EXPERTS), NULL;
	if (topk < 1 || topk > experts)
		return pipette_fail(err, "routing: top-k %d: expected 1..%d", topk, experts),
		       NULL;
	r = calloc(1, sizeof(*r));
	nn = (size_t)(layers - 1) * experts * experts;
	if (!r || !(r->load = calloc((size_t)layers * experts, sizeof(double))) ||
	    (nn && !(r->next = calloc(nn, sizeof(double))))) {
		pipette_routing_destroy(r);
		return pipette_fail(err, "routing: out of memory"), NULL;
	}
	r->L = layers;
	r->E = experts;
	r->k = topk;
	return r;
}

void pipette_routing_destroy(struct pipette_routing *r)
{
	if (!r)
		return;
	free(r->load);
	free(r->next);
	free(r);
}

int pipette_routing_layers(const struct pipette_routing *r) { return r->L; }
int pipette_routing_experts(const struct pipette_routing *r) { return r->E; }
int pipette_routing_topk(const struct pipette_routing *r) { return r->k; }

double pipette_routing_load(const struct pipette_routing *r, int l, int e)
{
	return r->load[(size_t)l * r->E + e];
}

double *pipette_routing_next_at_(const struct pipette_routing *r, int l, int a, int b)
{
	return &r->next[((size_t)l * r->E + a) * r->E + b];
}

double pipette_routing_next(const struct pipette_routing *r, int l, int a, int b)
{
	return l < r->L - 1 ? *pipette_routing_next_at_(r, l, a, b) : 0;
}

void pipette_routing_set_load(struct pipette_routing *r, int l, int e, double v)
{
	r->load[(size_t)l * r->E + e] = v;
}

void pipette_routing_set_next(struct pipette_routing *r, int l, int a, int b, double v)
{
	if (l < r->L - 1)
		*pipette_routing_next_at_(r, l, a, b) = v;
}

/* ---- trace parser ----------------------------------------------------------- */

static int get_count(json_object *v, const char *src, const char *path, double *out,
		     struct pipette_err *err)
{
	double d;

	if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
		return pipette_fail(err, "%s: %s: expected a number, got %s", src, path,
				    v ? json_type_to_name(json_object_get_type(v)) : "null");
	d = json_object_get_double(v);
	if (!isfinite(d))
		return pipette_fail(err, "%s: %s: count is not finite", src, path);
	if (d < 0)
		return pipette_fail(err, "%s: %s: negative count %g", src, path, d);
	*out = d + 0.0;	/* -0 is a count of 0, and is written as 0 */
	return 0;
}

static int parse_row(json_object *arr, int n, const char *src, const char *path,
		     const char *what, double *out, struct pipette_err *err)
{
	char p[128];
	int i;

	if (!json_object_is_type(arr, json_type_array))
		return pipette_fail(err, "%s: %s: expected an array of %d %s, got %s", src,
				    path, n, what,
				    arr ? json_type_to_name(json_object_get_type(arr)) : "null");
	if ((int)json_object_array_length(arr) != n)
		return pipette_fail(err, "%s: %s: %zu entries, expected %d %s", src, path,
				    json_object_array_length(arr), n, what);
	for (i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s[%d]", path, i);
		if (get_count(json_object_array_get_idx(arr, i), src, p, &out[i], err))
			return -1;
	}
	return 0;
}

static int check_keys(json_object *o, const char *const *allowed, const char *src,
		      const char *path, struct pipette_err *err)
{
	size_t i;

	json_object_object_foreach(o, key, val) {
		(void)val;
		for (i = 0; allowed[i]; i++)
			if (!strcmp(key, allowed[i]))
				break;
		if (!allowed[i])
			return pipette_fail(err, "%s: %s: unknown key \"%.64s\"", src, path, key);
	}
	return 0;
}

static int parse_layer(json_object *lo, int l, int moe_index, const char *src,
		       struct pipette_routing *r, struct pipette_err *err)
{
	static const char *const keys[] = { "layer", "load", "next", NULL };
	json_object *v;
	char path[96], p2[128];
	int a;

	snprintf(path, sizeof(path), "layers[%d]", l);
	if (!json_object_is_type(lo, json_type_object))
		return pipette_fail(err, "%s: %s: expected an object with \"load\" and \"next\"",
				    src, path);
	if (check_keys(lo, keys, src, path, err))
		return -1;
	if (json_object_object_get_ex(lo, "layer", &v)) {
		if (!json_object_is_type(v, json_type_int) ||
		    json_object_get_int64(v) != moe_index)
			return pipette_fail(err, "%s: %s.layer: expected %d (the model's MoE "
					    "layer number %d)", src, path, moe_index, l);
	}
	snprintf(p2, sizeof(p2), "%s.load", path);
	if (!json_object_object_get_ex(lo, "load", &v))
		return pipette_fail(err, "%s: %s: missing", src, p2);
	if (parse_row(v, r->E, src, p2, "expert counts", &r->load[(size_t)l * r->E], err))
		return -1;
	snprintf(p2, sizeof(p2), "%s.next", path);
	if (!json_object_object_get_ex(lo, "next", &v) || !v)
		return 0;	/* no transitions known: zeros */
	if (l == r->L - 1)
		return pipette_fail(err, "%s: %s: the last MoE layer has no next layer; "
				    "expected null or no \"next\"", src, p2);
	if (!json_object_is_type(v, json_type_array) ||
	    (int)json_object_array_length(v) != r->E)
		return pipette_fail(err, "%s: %s: expected %d rows of %d counts (experts x "
				    "experts)", src, p2, r->E, r->E);
	for (a = 0; a < r->E; a++) {
		char p3[160];
		json_object *row = json_object_array_get_idx(v, a);

		snprintf(p3, sizeof(p3), "%s[%d]", p2, a);
		if (parse_row(row, r->E, src, p3, "counts", pipette_routing_next_at_(r, l, a, 0), err))
			return -1;
	}
	return 0;
}

static int parse_root(json_object *root, const char *src, const struct pipette_model *m,
		      struct pipette_routing **out, struct pipette_err *err)
{
	static const char *const keys[] = { "schema", "model", "tokens", "experts", "topk",
					    "layers", NULL };
	struct pipette_routing *r = NULL;
	json_object *v, *layers;
	int L, l, layer;

	if (!json_object_is_type(root, json_type_object))
		return pipette_fail(err, "%s: expected a JSON object with \"schema\": \"%s\"",
				    src, PIPETTE_ROUTING_SCHEMA);
	if (!json_object_object_get_ex(root, "schema", &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    strcmp(json_object_get_string(v), PIPETTE_ROUTING_SCHEMA))
		return pipette_fail(err, "%s: schema: expected \"%s\"", src,
				    PIPETTE_ROUTING_SCHEMA);
	if (check_keys(root, keys, src, "(top level)", err))
		return -1;
	if (!m->experts)
		return pipette_fail(err, "%s: model %s has no experts (dense)", src, m->name);
	if (json_object_object_get_ex(root, "experts", &v) &&
	    (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) != m->experts))
		return pipette_fail(err, "%s: experts: %s, but model %s has %d experts", src,
				    json_object_get_string(v), m->name, m->experts);
	if (json_object_object_get_ex(root, "topk", &v) &&
	    (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) != m->topk))
		return pipette_fail(err, "%s: topk: %s, but model %s routes each token to "
				    "%d experts", src, json_object_get_string(v), m->name, m->topk);
	if (json_object_object_get_ex(root, "tokens", &v) &&
	    (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0))
		return pipette_fail(err, "%s: tokens: expected an integer >= 0", src);
	L = pipette_model_moe_layer_count(m);
	if (!json_object_object_get_ex(root, "layers", &layers) ||
	    !json_object_is_type(layers, json_type_array))
		return pipette_fail(err, "%s: layers: expected an array of %d MoE layers", src, L);
	if ((int)json_object_array_length(layers) != L)
		return pipette_fail(err, "%s: layers: %zu entries, but model %s has %d MoE "
				    "layers", src, json_object_array_length(layers), m->name, L);
	if (!(r = pipette_routing_create(L, m->experts, m->topk, err)))
		return pipette_fail_prefix(err, "%s: ", src);
	for (l = 0, layer = 0; l < L; l++, layer++) {
		while (!pipette_model_is_moe_layer(m, layer))
			layer++;
		if (parse_layer(json_object_array_get_idx(layers, l), l, layer, src, r, err)) {
			pipette_routing_destroy(r);
			return -1;
		}
	}
	*out = r;
	return 0;
}

int pipette_routing_parse(const char *text, size_t len, const char *source,
			  const struct pipette_model *m, struct pipette_routing **out,
			  struct pipette_err *err)
{
	json_object *root;
	int rv;

	*out = NULL;
	root = pipette_json_parse(text, len, source, JSON_TOKENER_DEFAULT_DEPTH, err);
	if (!root)
		return -1;
	rv = parse_root(root, source, m, out, err);
	json_object_put(root);
	return rv;
}

int pipette_routing_read(const char *path, const struct pipette_model *m,
			 struct pipette_routing **out, struct pipette_err *err)
{
	struct stat st;
	char *text = NULL;
	size_t n = 0, cap = 1 << 16, got;
	FILE *f;
	int rv = -1;

	*out = NULL;
	if (!(f = fopen(path, "rb")))
		return pipette_fail(err, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode)) {
		pipette_fail(err, "%s: not a regular file", path);
		goto out;
	}
	for (;;) {
		char *t;

		if (n + 1 >= cap) {
			if (cap > (size_t)MAX_TRACE_BYTES) {
				pipette_fail(err, "%s: larger than %ld bytes; not a routing trace",
					     path, MAX_TRACE_BYTES);
				goto out;
			}
			cap *= 2;
		}
		if (!(t = realloc(text, cap))) {
			pipette_fail(err, "%s: out of memory", path);
			goto out;
		}
		text = t;
		got = fread(text + n, 1, cap - 1 - n, f);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		pipette_fail(err, "%s: read error", path);
		goto out;
	}
	text[n] = '\0';
	rv = pipette_routing_parse(text, n, path, m, out, err);
out:
	free(text);
	fclose(f);
	return rv;
}

/* ---- trace writer ----------------------------------------------------------- */

static void put_num(FILE *f, double v)
{
	v += 0.0;	/* never "-0" */
	if (v == floor(v) && fabs(v) < 9e15)
		fprintf(f, "%.0f", v);
	else
		fprintf(f, "%.17g", v);
}

static void put_row(FILE *f, const double *v, int n)
{
	int i;

	fputc('[', f);
	for (i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		put_num(f, v[i]);
	}
	fputc(']', f);
}

int pipette_routing_write_json(const struct pipette_routing *r, const char *model_name,
			       long tokens, FILE *f)
{
	json_object *name = json_object_new_string(model_name ? model_name : "");
	int l, a;

	if (!name)
		return -1;
	fprintf(f, "{\n  \"schema\": \"%s\",\n  \"model\": %s,\n", PIPETTE_ROUTING_SCHEMA,
		json_object_to_json_string_ext(name, JSON_C_TO_STRING_PLAIN));
	json_object_put(name);
	if (tokens >= 0)
		fprintf(f, "  \"tokens\": %ld,\n", tokens);
	fprintf(f, "  \"experts\": %d,\n  \"topk\": %d,\n  \"layers\": [\n", r->E, r->k);
	for (l = 0; l < r->L; l++) {
		fputs("    {\"load\": ", f);
		put_row(f, &r->load[(size_t)l * r->E], r->E);
		if (l < r->L - 1) {
			fputs(",\n     \"next\": [", f);
			for (a = 0; a < r->E; a++) {
				if (a)
					fputs(",\n              ", f);
				put_row(f, pipette_routing_next_at_(r, l, a, 0), r->E);
			}
			fputc(']', f);
		}
		fputs(l < r->L - 1 ? "},\n" : "}\n", f);
	}
	fputs("  ]\n}\n", f);
	return ferror(f) ? -1 : 0;
}

/* ---- generator -------------------------------------------------------------- */

/* Index i with cum[i-1] <= u*total < cum[i]. */
static int sample_cum(const double *cum, int n, uint64_t *s)
{
	double u = pipette_rng_unit(s) * cum[n - 1];
	int lo = 0, hi = n - 1;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (cum[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static int contains(const int *v, int n, int x)
{
	int i;

	for (i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

/* Weighted draw among experts not yet in chosen[0..n). */
static int sample_excluding(const double *w, int E, const int *chosen, int n, uint64_t *s)
{
	double total = 0, u, acc = 0;
	int e, last = -1;

	for (e = 0; e < E; e++)
		if (!contains(chosen, n, e))
			total += w[e];
	u = pipette_rng_unit(s) * total;
	for (e = 0; e < E; e++) {
		if (contains(chosen, n, e))
			continue;
		last = e;
		acc += w[e];
		if (acc > u && w[e] > 0)
			return e;
	}
	return last;
}

int pipette_routing_generate(const struct pipette_model *m,
			     const struct pipette_routing_gen *g,
			     struct pipette_routing **out, struct pipette_err *err)
{
	struct pipette_routing *r = NULL;
	double *w = NULL, *cum = NULL;
	int *succ = NULL, *perm = NULL, *prev = NULL, *cur = NULL;
	int L, E, k, l, e, i, j, rv = -1;
	uint64_t s = g->seed;
	long t;

	*out = NULL;
	if (!m->experts)
		return pipette_fail(err, "generate: model %s has no experts (dense)", m->name);
	if (!(g->skew >= 0 && g->skew <= 100))
		return pipette_fail(err, "generate: skew %g: expected 0..100", g->skew);
	if (!(g->affinity >= 0 && g->affinity <= 1))
		return pipette_fail(err, "generate: affinity %g: expected 0..1", g->affinity);
	if (g->tokens < 1 || g->tokens > (1L << 30))
		return pipette_fail(err, "generate: tokens %ld: expected 1..2^30", g->tokens);
	L = pipette_model_moe_layer_count(m);
	E = m->experts;
	k = m->topk;
	if (!(r = pipette_routing_create(L, E, k, err)))
		return -1;
	w = calloc((size_t)L * E, sizeof(double));
	cum = calloc((size_t)L * E, sizeof(double));
	succ = calloc((size_t)L * E * 2, sizeof(int));
	perm = calloc((size_t)E, sizeof(int));
	prev = calloc((size_t)k, sizeof(int));
	cur = calloc((size_t)k, sizeof(int));
	if (!w || !cum || !succ || !perm || !prev || !cur) {
		pipette_fail(err, "generate: out of memory");
		goto out;
	}
	/* Popularity: Zipf weights over a random order of the experts. */
	for (l = 0; l < L; l++) {
		for (e = 0; e < E; e++)
			perm[e] = e;
		for (e = E - 1; e > 0; e--) {
			int x = pipette_rng_below(&s, e + 1), tmp = perm[e];

			perm[e] = perm[x];
			perm[x] = tmp;
		}
		for (i = 0; i < E; i++)
			w[(size_t)l * E + perm[i]] = pow(i + 1.0, -g->skew);
		for (e = 0; e < E; e++)
			cum[(size_t)l * E + e] = w[(size_t)l * E + e] +
						 (e ? cum[(size_t)l * E + e - 1] : 0);
		/* Two preferred successors of each expert at the next layer. */
		for (e = 0; e < E; e++) {
			int *sc = &succ[((size_t)l * E + e) * 2];

			sc[0] = pipette_rng_below(&s, E);
			sc[1] = E > 1 ? (sc[0] + 1 + pipette_rng_below(&s, E - 1)) % E : 0;
		}
	}
	for (t = 0; t < g->tokens; t++) {
		for (l = 0; l < L; l++) {
			const double *wl = &w[(size_t)l * E], *cl = &cum[(size_t)l * E];
			int n = 0, tries = 0;

			while (n < k) {
				int c;

				if (tries++ >= 32) {
					c = sample_excluding(wl, E, cur, n, &s);
				} else if (l > 0 && pipette_rng_unit(&s) < g->affinity) {
					c = succ[((size_t)(l - 1) * E + prev[pipette_rng_below(&s, k)]) * 2 +
						 pipette_rng_below(&s, 2)];
				} else {
					c = sample_cum(cl, E, &s);
				}
				if (!contains(cur, n, c))
					cur[n++] = c;
			}
			for (i = 0; i < k; i++) {
				r->load[(size_t)l * E + cur[i]] += 1;
				if (l > 0)
					for (j = 0; j < k; j++)
						*pipette_routing_next_at_(r, l - 1, prev[j], cur[i]) += 1;
			}
			memcpy(prev, cur, sizeof(int) * k);
		}
	}
	*out = r;
	r = NULL;
	rv = 0;
out:
	pipette_routing_destroy(r);
	free(w);
	free(cum);
	free(succ);
	free(perm);
	free(prev);
	free(cur);
	return rv;
}

/* ---- cost model --------------------------------------------------------------- */

void pipette_experts_opts_init(struct pipette_experts_opts *o, int ep, int ranks_per_node)
{
	memset(o, 0, sizeof(*o));
	o->ep = ep;
	o->ranks_per_node = ranks_per_node;
	o->load_weight = 1;
	o->cross_weight = 1;
	o->solver = PIPETTE_EXPERTS_AUTO;
	o->time_limit_s = 60;
	o->node_limit = 200;
	o->max_columns = 200000;
}

void pipette_experts_default_weights(const struct pipette_model *m,
				     const struct pipette_cluster *c, int ep,
				     struct pipette_experts_opts *o)
{
	const struct pipette_gpu_spec *gpu = pipette_cluster_gpu(c);
	int G = pipette_cluster_gpus_per_node(c);
	int nodes = (ep + G - 1) / G, a, b;
	double mats = m->ffn_kind == PIPETTE_FFN_SWIGLU ? 3.0 : 2.0;
	double flops = 2.0 * mats * m->hidden * (double)m->expert_ffn, bw = INFINITY;

	/* Large-GEMM rate: the expert GEMMs of a busy rank are large. */
	o->load_weight = flops / (gpu->peak_tflops * 1e12 * gpu->gemm_eff_max);
	if (nodes > pipette_cluster_node_count(c))
		nodes = pipette_cluster_node_count(c);
	for (a = 0; a < nodes; a++)
		for (b = 0; b < nodes; b++)
			if (a != b)
				bw = fmin(bw, pipette_cluster_node_link(c, a, b).gbps);
	o->cross_weight = isfinite(bw) && bw > 0 ?
		2.0 * ACT_BYTES * m->hidden / (bw * 1e9) / ep : 0;
}

double pipette_experts_token_bytes(const struct pipette_model *m)
{
	return ACT_BYTES * m->hidden;
}

void pipette_experts_contiguous(int layers, int experts, int ep, int *placement)
{
	int l, e, per = experts / ep;

	for (l = 0; l < layers; l++)
		for (e = 0; e < experts; e++)
			placement[(size_t)l * experts + e] = e / per;
}

int pipette_experts_check_opts_(const struct pipette_routing *r,
				const struct pipette_experts_opts *o, struct pipette_err *err)
{
	if (o->ep < 1 || o->ep > r->E)
		return pipette_fail(err, "ep %d: expected 1..%d (the expert count)", o->ep, r->E);
	if (r->E % o->ep)
		return pipette_fail(err, "ep %d does not divide the %d experts per layer",
				    o->ep, r->E);
	if (o->ranks_per_node < 1)
		return pipette_fail(err, "ranks per node %d: expected >= 1", o->ranks_per_node);
	if (!(o->load_weight >= 0) || !(o->cross_weight >= 0) ||
	    !isfinite(o->load_weight) || !isfinite(o->cross_weight))
		return pipette_fail(err, "objective weights must be finite and >= 0");
	return 0;
}

static int node_of(const struct pipette_experts_opts *o, int rank)
{
	return rank / o->ranks_per_node;
}

int pipette_experts_evaluate(const struct pipette_routing *r,
			     const struct pipette_experts_opts *o, const int *pl,
			     struct pipette_experts_eval *out, double *per_max,
			     double *per_cross, struct pipette_err *err)
{
	int L = r->L, E = r->E, l, e, f, *cnt;
	double *ld;

	if (pipette_experts_check_opts_(r, o, err))
		return -1;
	cnt = calloc((size_t)o->ep, sizeof(int));
	ld = calloc((size_t)o->ep, sizeof(double));
	if (!cnt || !ld) {
		free(cnt);
		free(ld);
		return pipette_fail(err, "out of memory");
	}
	memset(out, 0, sizeof(*out));
	for (l = 0; l < L; l++) {
		const int *p = &pl[(size_t)l * E], *q = p - E;
		double mx = 0, cross = 0;

		memset(cnt, 0, sizeof(int) * o->ep);
		memset(ld, 0, sizeof(double) * o->ep);
		for (e = 0; e < E; e++) {
			if (p[e] < 0 || p[e] >= o->ep) {
				free(cnt);
				free(ld);
				return pipette_fail(err, "placement: layer %d expert %d on rank %d; "
						    "expected 0..%d", l, e, p[e], o->ep - 1);
			}
			cnt[p[e]]++;
			ld[p[e]] += r->load[(size_t)l * E + e];
		}
		for (e = 0; e < o->ep; e++) {
			if (cnt[e] != E / o->ep) {
				int c = cnt[e];

				free(cnt);
				free(ld);
				return pipette_fail(err, "placement: layer %d rank %d hosts %d "
						    "experts; expected %d", l, e, c, E / o->ep);
			}
			mx = fmax(mx, ld[e]);
		}
		if (l > 0)
			for (e = 0; e < E; e++)
				for (f = 0; f < E; f++)
					if (node_of(o, q[e]) != node_of(o, p[f]))
						cross += *pipette_routing_next_at_(r, l - 1, e, f);
		cross /= r->k;
		if (per_max)
			per_max[l] = mx;
		if (per_cross)
			per_cross[l] = cross;
		out->max_load += mx;
		out->cross_tokens += cross;
	}
	out->objective = o->load_weight * out->max_load + o->cross_weight * out->cross_tokens;
	free(cnt);
	free(ld);
	return 0;
}

double pipette_experts_alltoall_s(const struct pipette_routing *r, const int *pl,
				  int layer, int ep, const struct pipette_cluster *c,
				  const int *gpu_of_rank, double bytes_per_token)
{
	int E = r->E, G = pipette_cluster_gpus_per_node(c), a, b, e, f;
	const int *p = &pl[(size_t)layer * E], *q = p - E;
	double *T = calloc((size_t)ep * ep, sizeof(double)), worst = 0;

	if (!T)
		return NAN;
	if (layer == 0) {
		for (e = 0; e < E; e++)
			for (a = 0; a < ep; a++)
				T[(size_t)a * ep + p[e]] += r->load[e] / ep;
	} else {
		for (e = 0; e < E; e++)
			for (f = 0; f < E; f++)
				T[(size_t)q[e] * ep + p[f]] += *pipette_routing_next_at_(r, layer - 1, e, f) / r->k;
	}
	for (a = 0; a < ep; a++) {
		int ga = gpu_of_rank ? gpu_of_rank[a] : a;
		double s_in = 0, s_out = 0, r_in = 0, r_out = 0;

		for (b = 0; b < ep; b++) {
			int gb = gpu_of_rank ? gpu_of_rank[b] : b;
			int same = ga / G == gb / G;
			struct pipette_link lk;
			double t;

			if (b == a)
				continue;
			lk = pipette_cluster_link(c, ga, gb);
			t = pipette_p2p_s(T[(size_t)a * ep + b] * bytes_per_token, lk.gbps,
					  lk.lat_us);
			*(same ? &s_in : &s_out) += t;
			lk = pipette_cluster_link(c, gb, ga);
			t = pipette_p2p_s(T[(size_t)b * ep + a] * bytes_per_token, lk.gbps,
					  lk.lat_us);
			*(same ? &r_in : &r_out) += t;
		}
		worst = fmax(worst, fmax(fmax(s_in, s_out), fmax(r_in, r_out)));
	}
	free(T);
	return worst;
}

/* ---- greedy + swaps --------------------------------------------------------- */

struct ls {
	const struct pipette_routing *r;
	const struct pipette_experts_opts *o;
	int L, E, ep, N;
	int *pl;		/* L * E */
	double *ld;		/* L * ep rank loads */
	double *in;		/* L * E * N: tokens reaching (l, e) from node n at l-1 */
	double *out;		/* L * E * N: tokens leaving (l, e) to node n at l+1 */
};

static void ls_free(struct ls *s)
{
	free(s->ld);
	free(s->in);
	free(s->out);
}

static int ls_init(struct ls *s, const struct pipette_routing *r,
		   const struct pipette_experts_opts *o, int *pl)
{
	int l, e, f;

	memset(s, 0, sizeof(*s));
	s->r = r;
	s->o = o;
	s->L = r->L;
	s->E = r->E;
	s->ep = o->ep;
	s->N = (o->ep + o->ranks_per_node - 1) / o->ranks_per_node;
	s->pl = pl;
	s->ld = calloc((size_t)s->L * s->ep, sizeof(double));
	s->in = calloc((size_t)s->L * s->E * s->N, sizeof(double));
	s->out = calloc((size_t)s->L * s->E * s->N, sizeof(double));
	if (!s->ld || !s->in || !s->out) {
		ls_free(s);
		return -1;
	}
	for (l = 0; l < s->L; l++) {
		for (e = 0; e < s->E; e++)
			s->ld[(size_t)l * s->ep + pl[(size_t)l * s->E + e]] +=
				r->load[(size_t)l * s->E + e];
		if (l == 0)
			continue;
		for (e = 0; e < s->E; e++)
			for (f = 0; f < s->E; f++) {
				double v = *pipette_routing_next_at_(r, l - 1, e, f);
				int ne = node_of(o, pl[(size_t)(l - 1) * s->E + e]);
				int nf = node_of(o, pl[(size_t)l * s->E + f]);

				s->in[((size_t)l * s->E + f) * s->N + ne] += v;
				s->out[((size_t)(l - 1) * s->E + e) * s->N + nf] += v;
			}
	}
	return 0;
}

/* The three most loaded ranks of layer l (-1 where ep < 3). */
static void top3(const struct ls *s, int l, int *t)
{
	const double *ld = &s->ld[(size_t)l * s->ep];
	int g, i, j;

	t[0] = t[1] = t[2] = -1;
	for (g = 0; g < s->ep; g++)
		for (i = 0; i < 3; i++)
			if (t[i] < 0 || ld[g] > ld[t[i]]) {
				for (j = 2; j > i; j--)
					t[j] = t[j - 1];
				t[i] = g;
				break;
			}
}

/* The largest load at layer l among ranks other than x and y. */
static double max_except(const struct ls *s, int l, const int *t, int x, int y)
{
	int i;

	for (i = 0; i < 3; i++)
		if (t[i] >= 0 && t[i] != x && t[i] != y)
			return s->ld[(size_t)l * s->ep + t[i]];
	return 0;
}

/* Move the transition sums after expert e of layer l went from node n1 to n2. */
static void ls_move(struct ls *s, int l, int e, int n1, int n2)
{
	int f, E = s->E, N = s->N;

	if (n1 == n2)
		return;
	if (l + 1 < s->L)
		for (f = 0; f < E; f++) {
			double v = *pipette_routing_next_at_(s->r, l, e, f);

			s->in[((size_t)(l + 1) * E + f) * N + n1] -= v;
			s->in[((size_t)(l + 1) * E + f) * N + n2] += v;
		}
	if (l > 0)
		for (f = 0; f < E; f++) {
			double v = *pipette_routing_next_at_(s->r, l - 1, f, e);

			s->out[((size_t)(l - 1) * E + f) * N + n1] -= v;
			s->out[((size_t)(l - 1) * E + f) * N + n2] += v;
		}
}

/* First-improvement pairwise swaps until none helps (or the work budget is
 * spent).  A swap must lower the objective, or keep it and lower the sum
 * of squared rank loads (which breaks ties between equal maxima). */
static void ls_run(struct ls *s)
{
	const struct pipette_experts_opts *o = s->o;
	double wl = o->load_weight, wc = o->cross_weight / s->r->k;
	long evals = 0;
	int pass, improved = 1, l, a, b, E = s->E, N = s->N;

	for (pass = 0; pass < SWAP_PASSES && improved && evals < SWAP_BUDGET; pass++) {
		improved = 0;
		for (l = 0; l < s->L; l++) {
			int *p = &s->pl[(size_t)l * E];
			double *ld = &s->ld[(size_t)l * s->ep];
			const double *w = &s->r->load[(size_t)l * E];
			int t[3];

			top3(s, l, t);
			for (a = 0; a < E; a++)
				for (b = a + 1; b < E; b++) {
					int g1 = p[a], g2 = p[b], n1, n2;
					double cur, oth, l1, l2, nmax, dobj, dsq, dcross = 0, scale;

					if (g1 == g2 || (w[a] == w[b] &&
							   node_of(o, g1) == node_of(o, g2)))
						continue;
					evals++;
					l1 = ld[g1] - w[a] + w[b];
					l2 = ld[g2] - w[b] + w[a];
					oth = max_except(s, l, t, g1, g2);
					cur = fmax(oth, fmax(ld[g1], ld[g2]));
					nmax = fmax(oth, fmax(l1, l2));
					n1 = node_of(o, g1);
					n2 = node_of(o, g2);
					if (n1 != n2) {
						const double *ia = &s->in[((size_t)l * E + a) * N];
						const double *ib = &s->in[((size_t)l * E + b) * N];
						const double *oa = &s->out[((size_t)l * E + a) * N];
						const double *ob = &s->out[((size_t)l * E + b) * N];

						/* cross = total - same-node; moving a n1->n2
						 * changes same-node by (ia[n2] - ia[n1]). */
						dcross = (ia[n1] - ia[n2]) + (ib[n2] - ib[n1]) +
							 (oa[n1] - oa[n2]) + (ob[n2] - ob[n1]);
					}
					dobj = wl * (nmax - cur) + wc * dcross;
					dsq = l1 * l1 + l2 * l2 - ld[g1] * ld[g1] - ld[g2] * ld[g2];
					scale = 1e-12 * (wl * cur + 1e-300);
					if (dobj < -scale || (dobj <= scale && dsq < -1e-9 * (cur * cur + 1))) {
						p[a] = g2;
						p[b] = g1;
						ld[g1] = l1;
						ld[g2] = l2;
						ls_move(s, l, a, n1, n2);
						ls_move(s, l, b, n2, n1);
						top3(s, l, t);
						improved = 1;
					}
				}
		}
	}
}

/* Heaviest expert first onto the rank where it adds least to the
 * objective given the previous layer (ties: lighter rank, lower rank). */
static int greedy_build(const struct pipette_routing *r, const struct pipette_experts_opts *o,
			int *pl)
{
	int E = r->E, ep = o->ep, cap = E / ep, N = (ep + o->ranks_per_node - 1) / o->ranks_per_node;
	int *order = calloc((size_t)E, sizeof(int)), *cnt = calloc((size_t)ep, sizeof(int));
	double *ld = calloc((size_t)ep, sizeof(double)), *tonode = calloc((size_t)N, sizeof(double));
	double wc = o->cross_weight / r->k;
	int l, i, j, g, e;

	if (!order || !cnt || !ld || !tonode) {
		free(order);
		free(cnt);
		free(ld);
		free(tonode);
		return -1;
	}
	for (l = 0; l < r->L; l++) {
		const double *w = &r->load[(size_t)l * E];
		double curmax = 0;

		for (i = 0; i < E; i++)
			order[i] = i;
		for (i = 1; i < E; i++)	/* insertion sort: stable, heaviest first */
			for (j = i; j > 0 && w[order[j]] > w[order[j - 1]]; j--) {
				int t = order[j];

				order[j] = order[j - 1];
				order[j - 1] = t;
			}
		memset(cnt, 0, sizeof(int) * ep);
		memset(ld, 0, sizeof(double) * ep);
		for (i = 0; i < E; i++) {
			double total = 0, best = INFINITY;
			int bg = -1;

			e = order[i];
			memset(tonode, 0, sizeof(double) * N);
			if (l > 0)
				for (j = 0; j < E; j++) {
					double v = *pipette_routing_next_at_(r, l - 1, j, e);

					tonode[node_of(o, pl[(size_t)(l - 1) * E + j])] += v;
					total += v;
				}
			for (g = 0; g < ep; g++) {
				double sc;

				if (cnt[g] == cap)
					continue;
				sc = o->load_weight * (fmax(curmax, ld[g] + w[e]) - curmax) +
				     wc * (total - tonode[node_of(o, g)]);
				if (bg < 0 || sc < best - 1e-12 * fabs(best) ||
				    (sc <= best + 1e-12 * fabs(best) && ld[g] < ld[bg])) {
					best = sc;
					bg = g;
				}
			}
			pl[(size_t)l * E + e] = bg;
			cnt[bg]++;
			ld[bg] += w[e];
			curmax = fmax(curmax, ld[bg]);
		}
	}
	free(order);
	free(cnt);
	free(ld);
	free(tonode);
	return 0;
}

static int improve(const struct pipette_routing *r, const struct pipette_experts_opts *o,
		   int *pl)
{
	struct ls s;

	if (ls_init(&s, r, o, pl))
		return -1;
	ls_run(&s);
	ls_free(&s);
	return 0;
}

int pipette_experts_greedy(const struct pipette_routing *r,
			   const struct pipette_experts_opts *o, int *pl,
			   struct pipette_err *err)
{
	size_t n = (size_t)r->L * r->E;
	int *alt = NULL, rv = -1;
	struct pipette_experts_eval ea, eb;

	if (pipette_experts_check_opts_(r, o, err))
		return -1;
	if (!(alt = malloc(n * sizeof(int))) || greedy_build(r, o, pl) || improve(r, o, pl)) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	/* Also polish Megatron's default order, so that the result is never
	 * worse than it; keep the better (the greedy one on a tie). */
	pipette_experts_contiguous(r->L, r->E, o->ep, alt);
	if (improve(r, o, alt)) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	if (pipette_experts_evaluate(r, o, pl, &ea, NULL, NULL, err) ||
	    pipette_experts_evaluate(r, o, alt, &eb, NULL, NULL, err))
		goto out;
	if (eb.objective < ea.objective)
		memcpy(pl, alt, n * sizeof(int));
	rv = 0;
out:
	free(alt);
	return rv;
}

