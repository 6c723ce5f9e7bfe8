/* Unit tests: expert placement (experts.h) and `pipette experts`.
 *
 * The hand-derived instance (tests/data/routing/tiny.json, model
 * tiny-moe.json: 2 MoE layers, 4 experts, top-1), EP 2 with one rank per
 * node (2 nodes), weights 1 and 1 (objective = sum of busiest-rank loads +
 * cross-node token hops):
 *
 *   layer-0 loads [4 3 2 1]; layer-1 loads [1 2 4 3];
 *   transitions e->f: 0->2: 4, 1->3: 3, 2->0: 1, 2->1: 1, 3->1: 1 (10 tokens)
 *
 * Layer-0 pairs: {0,1}|{2,3} max 7, {0,2}|{1,3} max 6, {0,3}|{1,2} max 5.
 * Layer-1 pairs: {0,1}|{2,3} max 7, {0,2}|{1,3} max 5, {0,3}|{1,2} max 6.
 * Loads alone are at least 5 + 5 (each layer holds 10 tokens on 2 ranks),
 * reached only by {0,3}|{1,2} then {0,2}|{1,3}.  With experts 0,3 of layer
 * 0 on node A: f0,f2 on A gives cross 2->0 (1) + 3->1 (1) = 2, the other
 * way round 0->2 (4) + 1->3 (3) + 2->1 (1) = 8.  So 12 is reachable.
 * Cross 0 forces e2,e3,f0,f1 on one node and e0,e1,f2,f3 on the other
 * (loads 7 + 7 = 14); any placement with loads >= 11 needs cross <= 0 to
 * beat 12.  Optimum: 12 = 10 (loads) + 2 (cross), unique up to swapping
 * the two nodes; with expert 0 of layer 0 on rank 0 (the ILP's symmetry
 * fix): layer 0 [0 1 1 0], layer 1 [0 1 0 1].
 * Contiguous [0 0 1 1] on both layers: loads 7 + 7, cross 4+3+1+1+1 = 10,
 * objective 24. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inputs/cluster.h"
#include "plan/experts.h"
#include "inputs/hardware.h"
#include "inputs/model.h"
#include "estimate/timing.h"

#include "cli_run.h"
#include "check_run.h"

#define DATA TEST_DATADIR "/routing"
#define TINY_MODEL DATA "/tiny-moe.json"

static void tiny(struct pipette_model *m, struct pipette_routing **r)
{
	struct pipette_err err;

	ck_assert_msg(pipette_model_load(TINY_MODEL, NULL, m, &err) == 0, "%s", err.msg);
	ck_assert_msg(pipette_routing_read(DATA "/tiny.json", m, r, &err) == 0, "%s", err.msg);
}

static const int tiny_opt[8] = { 0, 1, 1, 0, 0, 1, 0, 1 };
static const int tiny_opt_swapped[8] = { 1, 0, 0, 1, 1, 0, 1, 0 };

START_TEST(test_tiny_evaluate)
{
	struct pipette_model m;
	struct pipette_routing *r;
	struct pipette_experts_opts o;
	struct pipette_experts_eval ev;
	struct pipette_err err;
	double mx[2], cr[2];
	int pl[8];

	tiny(&m, &r);
	pipette_experts_opts_init(&o, 2, 1);
	pipette_experts_contiguous(2, 4, 2, pl);
	ck_assert_int_eq(pl[0], 0);
	ck_assert_int_eq(pl[1], 0);
	ck_assert_int_eq(pl[2], 1);
	ck_assert_int_eq(pl[7], 1);
	ck_assert(pipette_experts_evaluate(r, &o, pl, &ev, mx, cr, &err) == 0);
	ck_assert_double_eq(mx[0], 7);
	ck_assert_double_eq(mx[1], 7);
	ck_assert_double_eq(cr[0], 0);
	ck_assert_double_eq(cr[1], 10);
	ck_assert_double_eq(ev.objective, 24);
	ck_assert(pipette_experts_evaluate(r, &o, tiny_opt, &ev, mx, cr, &err) == 0);
	ck_assert_double_eq(ev.max_load, 10);
	ck_assert_double_eq(ev.cross_tokens, 2);
	ck_assert_double_eq(ev.objective, 12);
	/* One node (both ranks together): no cross-node hops at all. */
	pipette_experts_opts_init(&o, 2, 2);
	ck_assert(pipette_experts_evaluate(r, &o, pl, &ev, NULL, NULL, &err) == 0);
	ck_assert_double_eq(ev.cross_tokens, 0);
	/* Invalid placements are errors, not crashes. */
	pl[0] = 1;
	ck_assert(pipette_experts_evaluate(r, &o, pl, &ev, NULL, NULL, &err) == -1);
	ck_assert_msg(strstr(err.msg, "hosts 1 experts; expected 2"), "%s", err.msg);
	pl[0] = 7;
	ck_assert(pipette_experts_evaluate(r, &o, pl, &ev, NULL, NULL, &err) == -1);
	ck_assert_msg(strstr(err.msg, "rank 7"), "%s", err.msg);
	pipette_experts_opts_init(&o, 3, 1);
	ck_assert(pipette_experts_evaluate(r, &o, tiny_opt, &ev, NULL, NULL, &err) == -1);
	ck_assert_msg(strstr(err.msg, "ep 3 does not divide the 4 experts"), "%s", err.msg);
	pipette_routing_destroy(r);
}
END_TEST

START_TEST(test_tiny_optimum)
{
	struct pipette_model m;
	struct pipette_routing *r;
	struct pipette_experts_opts o;
	struct pipette_experts_result res;
	struct pipette_err err;
	int pl[8];

	tiny(&m, &r);
	pipette_experts_opts_init(&o, 2, 1);
	ck_assert_msg(pipette_experts_solve(r, &o, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.solver, "glpk");
	ck_assert_msg(!strncmp(res.status, "optimal", 7), "%s", res.status);
	ck_assert_double_eq(res.eval.objective, 12);
	ck_assert_double_eq(res.eval.max_load, 10);
	ck_assert_double_eq(res.eval.cross_tokens, 2);
	ck_assert_mem_eq(res.placement, tiny_opt, sizeof(tiny_opt));
	ck_assert_double_eq_tol(res.glpk_bound, 12, 1e-9);
	pipette_experts_result_free(&res);
	/* The greedy reaches it too here (either node labelling). */
	ck_assert(pipette_experts_greedy(r, &o, pl, &err) == 0);
	ck_assert(!memcmp(pl, tiny_opt, sizeof(pl)) || !memcmp(pl, tiny_opt_swapped, sizeof(pl)));
	/* Loads only (cross weight 0): both layers balanced 5/5, objective 10. */
	o.cross_weight = 0;
	ck_assert(pipette_experts_solve(r, &o, &res, &err) == 0);
	ck_assert_double_eq(res.eval.objective, 10);
	pipette_experts_result_free(&res);
	/* Cross only: the 14-load placement with no hop at all. */
	o.cross_weight = 1;
	o.load_weight = 0;
	ck_assert(pipette_experts_solve(r, &o, &res, &err) == 0);
	ck_assert_double_eq(res.eval.cross_tokens, 0);
	ck_assert_double_eq(res.eval.max_load, 14);
	pipette_experts_result_free(&res);
	pipette_routing_destroy(r);
}
END_TEST

/* Dispatch all-to-all of the tiny trace on one node of two H100s (nominal
 * links): contiguous layer 1 moves 0->2 (4) + 1->3 (3) = 7 tokens from
 * rank 0 to rank 1 and 2->0, 2->1, 3->1 = 3 tokens back, so rank 0's send
 * is the straggler: lat + 7 * 2 * 512 B / bw.  Layer 0 starts evenly:
 * rank 0 sends half of experts 2,3's (2+1)/2 = 1.5 tokens and receives
 * half of experts 0,1's 7/2 = 3.5: lat + 3.5 * 1024 / bw. */
START_TEST(test_alltoall_time)
{
	struct pipette_model m;
	struct pipette_routing *r;
	struct pipette_err err;
	const struct pipette_gpu_spec *gpu = pipette_gpu_lookup("h100", &err);
	const char *one[] = { "n1" }, *two[] = { "n1", "n2" };
	struct pipette_cluster *c1, *c2;
	struct pipette_link lk;
	int pl[8];
	double B;

	tiny(&m, &r);
	B = pipette_experts_token_bytes(&m);
	ck_assert_double_eq(B, 1024);
	c1 = pipette_cluster_create(one, 1, 2, NULL, gpu, NULL, 0, &err);
	c2 = pipette_cluster_create(two, 2, 1, NULL, gpu, NULL, 0, &err);
	ck_assert_ptr_nonnull(c1);
	ck_assert_ptr_nonnull(c2);
	pipette_experts_contiguous(2, 4, 2, pl);
	lk = pipette_cluster_link(c1, 0, 1);
	ck_assert_double_eq_tol(pipette_experts_alltoall_s(r, pl, 1, 2, c1, NULL, B),
				lk.lat_us * 1e-6 + 7 * B / (lk.gbps * 1e9), 1e-15);
	ck_assert_double_eq_tol(pipette_experts_alltoall_s(r, pl, 0, 2, c1, NULL, B),
				lk.lat_us * 1e-6 + 3.5 * B / (lk.gbps * 1e9), 1e-15);
	/* Uniform traffic equals the alpha-beta all-to-all of timing.h: with
	 * S = 7 tokens per rank, (n-1)/n * S leaves it. */
	ck_assert_double_eq_tol(pipette_experts_alltoall_s(r, pl, 0, 2, c1, NULL, B),
				pipette_alltoall_s(2, 7 * B, lk.gbps, lk.lat_us), 1e-15);
	/* Across two nodes the NIC carries it; the optimum moves only one
	 * token each way at layer 1 (2->0 and 3->1). */
	lk = pipette_cluster_link(c2, 0, 1);
	ck_assert_double_eq_tol(pipette_experts_alltoall_s(r, pl, 1, 2, c2, NULL, B),
				lk.lat_us * 1e-6 + 7 * B / (lk.gbps * 1e9), 1e-15);
	ck_assert_double_eq_tol(pipette_experts_alltoall_s(r, tiny_opt, 1, 2, c2, NULL, B),
				lk.lat_us * 1e-6 + 1 * B / (lk.gbps * 1e9), 1e-15);
	pipette_cluster_destroy(c1);
	pipette_cluster_destroy(c2);
	pipette_routing_destroy(r);
}
END_TEST

static struct pipette_routing *gen(const char *preset, unsigned long long seed, double skew,
				   long tokens, struct pipette_model *m)
{
	struct pipette_routing_gen g = { seed, skew, 0.6, tokens };
	struct pipette_routing *r;
	struct pipette_err err;

	ck_assert_msg(pipette_model_preset(preset, m, &err) == 0, "%s", err.msg);
	ck_assert_msg(pipette_routing_generate(m, &g, &r, &err) == 0, "%s", err.msg);
	return r;
}

/* The first n MoE layers of r (for quick ILPs). */
static struct pipette_routing *cut(struct pipette_routing *r, int n)
{
	struct pipette_err err;
	int E = pipette_routing_experts(r), l, e, f;
	struct pipette_routing *c = pipette_routing_create(n, E, pipette_routing_topk(r), &err);

	ck_assert_ptr_nonnull(c);
	for (l = 0; l < n; l++)
		for (e = 0; e < E; e++) {
			pipette_routing_set_load(c, l, e, pipette_routing_load(r, l, e));
			for (f = 0; f < E; f++)
				pipette_routing_set_next(c, l, e, f, pipette_routing_next(r, l, e, f));
		}
	pipette_routing_destroy(r);
	return c;
}

static char *dump(const struct pipette_routing *r, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(pipette_routing_write_json(r, "x", 100, f), 0);
	fclose(f);
	return buf;
}

START_TEST(test_generator)
{
	struct pipette_model m;
	struct pipette_routing *a = gen("mixtral-8x7b", 7, 1.2, 2000, &m);
	struct pipette_routing *b = gen("mixtral-8x7b", 7, 1.2, 2000, &m);
	struct pipette_routing *c = gen("mixtral-8x7b", 8, 1.2, 2000, &m), *back;
	struct pipette_err err;
	size_t la, lb, lc, lback;
	char *ta = dump(a, &la), *tb = dump(b, &lb), *tc = dump(c, &lc), *tback;
	int l, e, f, k = m.topk, E = m.experts;
	double maxw, minw;

	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(ta, tb, la);
	ck_assert(la != lc || memcmp(ta, tc, la));
	/* Every token picks k experts per layer: sum of loads = 2000 k; the
	 * pairs into expert f at layer l+1 = k * its load. */
	for (l = 0; l < pipette_routing_layers(a); l++) {
		double s = 0;

		for (e = 0; e < E; e++)
			s += pipette_routing_load(a, l, e);
		ck_assert_double_eq(s, 2000.0 * k);
		if (l == 0)
			continue;
		for (f = 0; f < E; f++) {
			double in = 0;

			for (e = 0; e < E; e++)
				in += pipette_routing_next(a, l - 1, e, f);
			ck_assert_double_eq(in, k * pipette_routing_load(a, l, f));
		}
	}
	/* Skewed: with Zipf exponent 1.2 over 8 experts the top expert gets
	 * 1/sum(1/i^1.2) ~ 0.37 of first choices, the last ~0.03; at layer 0
	 * (no affinity) the heaviest must clearly exceed the lightest. */
	maxw = minw = pipette_routing_load(a, 0, 0);
	for (e = 1; e < E; e++) {
		maxw = fmax(maxw, pipette_routing_load(a, 0, e));
		minw = fmin(minw, pipette_routing_load(a, 0, e));
	}
	ck_assert_msg(maxw > 3 * minw, "max %g min %g", maxw, minw);
	/* Round trip: parse what was written, write it again: same bytes. */
	ck_assert_msg(pipette_routing_parse(ta, la, "mem", &m, &back, &err) == 0, "%s", err.msg);
	tback = dump(back, &lback);
	ck_assert_uint_eq(la, lback);
	ck_assert_mem_eq(ta, tback, la);
	free(ta);
	free(tb);
	free(tc);
	free(tback);
	pipette_routing_destroy(a);
	pipette_routing_destroy(b);
	pipette_routing_destroy(c);
	pipette_routing_destroy(back);
}
END_TEST

/* Optimised never worse than contiguous, greedy or GLPK, over seeds, skews,
 * EP sizes and node sizes (a small node budget keeps it quick). */
START_TEST(test_never_worse)
{
	static const struct { int ep, rpn; } shapes[] = { { 2, 1 }, { 4, 2 }, { 8, 4 }, { 8, 8 },
							  { 4, 4 }, { 8, 2 } };
	struct pipette_model m;
	struct pipette_err err;
	unsigned long long seed;
	size_t s;

	for (seed = 1; seed <= 3; seed++)
		for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			struct pipette_routing *r = cut(gen("mixtral-8x7b", seed, 0.4 * seed, 500,
							    &m), 6);
			struct pipette_experts_opts o;
			struct pipette_experts_result res;
			struct pipette_experts_eval ec, eg;
			int *pl = malloc(sizeof(int) * 6 * 8);

			pipette_experts_opts_init(&o, shapes[s].ep, shapes[s].rpn);
			o.load_weight = 1.0;
			o.cross_weight = 0.5 * seed;
			o.node_limit = 5;
			pipette_experts_contiguous(6, 8, o.ep, pl);
			ck_assert(pipette_experts_evaluate(r, &o, pl, &ec, NULL, NULL, &err) == 0);
			ck_assert(pipette_experts_greedy(r, &o, pl, &err) == 0);
			ck_assert(pipette_experts_evaluate(r, &o, pl, &eg, NULL, NULL, &err) == 0);
			ck_assert_msg(eg.objective <= ec.objective, "greedy %g > contiguous %g",
				      eg.objective, ec.objective);
			ck_assert_msg(pipette_experts_solve(r, &o, &res, &err) == 0, "%s", err.msg);
			ck_assert_msg(res.eval.objective <= eg.objective, "%s %g > greedy %g",
				      res.status, res.eval.objective, eg.objective);
			free(pl);
			pipette_experts_result_free(&res);
			pipette_routing_destroy(r);
		}
}
END_TEST

/* The fallback paths: greedy requested, ILP too large, node limit, and the
 * wall-clock safety net (1 ms against a root LP that takes seconds on
 * Mixtral's 32 layers x 8 experts over 2 nodes: 6048 columns). */
START_TEST(test_fallbacks)
{
	struct pipette_model m;
	struct pipette_routing *r = gen("mixtral-8x7b", 3, 1.0, 2000, &m);
	struct pipette_experts_opts o;
	struct pipette_experts_result res;
	struct pipette_err err;
	int *pl = malloc(sizeof(int) * 32 * 8);
	struct pipette_experts_eval eg;

	pipette_experts_opts_init(&o, 8, 4);
	o.cross_weight = 0.1;
	ck_assert(pipette_experts_greedy(r, &o, pl, &err) == 0);
	ck_assert(pipette_experts_evaluate(r, &o, pl, &eg, NULL, NULL, &err) == 0);

	o.solver = PIPETTE_EXPERTS_GREEDY;
	ck_assert(pipette_experts_solve(r, &o, &res, &err) == 0);
	ck_assert_str_eq(res.solver, "greedy");
	ck_assert_mem_eq(res.placement, pl, sizeof(int) * 32 * 8);
	pipette_experts_result_free(&res);

	o.solver = PIPETTE_EXPERTS_AUTO;
	o.max_columns = 100;
	ck_assert(pipette_experts_solve(r, &o, &res, &err) == 0);
	ck_assert_str_eq(res.solver, "greedy");
	ck_assert_msg(strstr(res.status, "ILP too large"), "%s", res.status);
	ck_assert_mem_eq(res.placement, pl, sizeof(int) * 32 * 8);
	pipette_experts_result_free(&res);

	/* One expert per rank on one node: every placement scores the same. */
	pipette_experts_opts_init(&o, 8, 8);
	ck_assert(pipette_experts_solve(r, &o, &res, &err) == 0);
	ck_assert_str_eq(res.solver, "trivial");
	pipette_experts_contiguous(32, 8, 8, pl);
	ck_assert_mem_eq(res.placement, pl, sizeof(int) * 32 * 8);
	pipette_experts_result_free(&res);
	pipette_experts_opts_init(&o, 8, 4);
	o.cross_weight = 0.1;
	ck_assert(pipette_experts_greedy(r, &o, pl, &err) == 0);

	o.time_limit_s = 0.001;
	ck_assert(pipette_experts_solve(r, &o, &res, &err) == 0);
	ck_assert_str_eq(res.solver, "greedy");
	ck_assert_msg(strstr(res.status, "time limit"), "%s", res.status);
	ck_assert_mem_eq(res.placement, pl, sizeof(int) * 32 * 8);
	ck_assert_double_eq(res.eval.objective, eg.objective);
	pipette_experts_result_free(&res);
	pipette_routing_destroy(r);
	free(pl);

	/* Node limit, on a smaller instance (4 layers). */
	{
		struct pipette_routing *small = cut(gen("mixtral-8x7b", 5, 1.0, 2000, &m), 4);
		struct pipette_experts_result r1, r2;
		pipette_experts_opts_init(&o, 4, 2);
		o.cross_weight = 0.3;
		o.node_limit = 2;
		ck_assert(pipette_experts_solve(small, &o, &r1, &err) == 0);
		ck_assert_str_eq(r1.solver, "glpk");
		ck_assert_msg(strstr(r1.status, "node limit 2"), "%s", r1.status);
		/* Deterministic: the same again. */
		ck_assert(pipette_experts_solve(small, &o, &r2, &err) == 0);
		ck_assert_mem_eq(r1.placement, r2.placement, sizeof(int) * 4 * 8);
		ck_assert_str_eq(r1.status, r2.status);
		/* A bound below the incumbent. */
		ck_assert(!isfinite(r1.glpk_bound) || r1.glpk_bound <= r1.eval.objective + 1e-9);
		pipette_experts_result_free(&r1);
		pipette_experts_result_free(&r2);
		pipette_routing_destroy(small);
	}
}
END_TEST

static void parse_fails(const char *text, const char *fragment)
{
	struct pipette_model m;
	struct pipette_routing *r = NULL;
	struct pipette_err err;

	ck_assert(pipette_model_load(TINY_MODEL, NULL, &m, &err) == 0);
	ck_assert_msg(pipette_routing_parse(text, strlen(text), "t.json", &m, &r, &err) == -1,
		      "accepted: %s", text);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(err.msg, "t.json: ") == err.msg, "%s", err.msg);
	ck_assert_msg(strstr(err.msg, fragment), "'%s' lacks '%s'", err.msg, fragment);
}

#define HDR "{\"schema\": \"pipette-routing/1\", "
#define L1 "{\"load\": [1, 2, 4, 3]}"

START_TEST(test_parse_errors)
{
	parse_fails("", "malformed JSON");
	parse_fails("{\"schema\": ", "line 1, column 12: malformed JSON: unexpected end");
	parse_fails("[1, 2]", "expected a JSON object");
	parse_fails("{\"layers\": []}", "schema: expected \"pipette-routing/1\"");
	parse_fails(HDR "\"layers\": 3}", "layers: expected an array of 2 MoE layers");
	parse_fails(HDR "\"layers\": [" L1 "]}", "layers: 1 entries, but model mixtral has 2");
	parse_fails(HDR "\"layers\": [{\"load\": [1, 2, 3]}, " L1 "]}",
		    "layers[0].load: 3 entries, expected 4 expert counts");
	parse_fails(HDR "\"layers\": [{\"load\": [1, 2, 3, -4]}, " L1 "]}",
		    "layers[0].load[3]: negative count -4");
	parse_fails(HDR "\"layers\": [{\"load\": [1, 2, \"x\", 4]}, " L1 "]}",
		    "layers[0].load[2]: expected a number, got string");
	parse_fails(HDR "\"layers\": [{\"next\": []}, " L1 "]}", "layers[0].load: missing");
	parse_fails(HDR "\"layers\": [{\"load\": [1,1,1,1], \"next\": [[1,1,1,1]]}, " L1 "]}",
		    "layers[0].next: expected 4 rows of 4 counts");
	parse_fails(HDR "\"layers\": [{\"load\": [1,1,1,1], \"next\": [[1,1,1,1],[1,1,1,1],"
		    "[1,1,1],[1,1,1,1]]}, " L1 "]}", "layers[0].next[2]: 3 entries, expected 4");
	parse_fails(HDR "\"layers\": [{\"load\": [1,1,1,1], \"next\": [[1,1,1,1],[1,1,1,1],"
		    "[1,1,1,1],[1,1,-2,1]]}, " L1 "]}", "layers[0].next[3][2]: negative count");
	parse_fails(HDR "\"layers\": [" L1 ", {\"load\": [1,1,1,1], \"next\": []}]}",
		    "layers[1].next: the last MoE layer has no next layer");
	parse_fails(HDR "\"layers\": [{\"lode\": [1,1,1,1]}, " L1 "]}",
		    "layers[0]: unknown key \"lode\"");
	parse_fails(HDR "\"experts\": 8, \"layers\": [" L1 ", " L1 "]}",
		    "experts: 8, but model mixtral has 4 experts");
	parse_fails(HDR "\"topk\": 2, \"layers\": [" L1 ", " L1 "]}", "topk: 2");
	parse_fails(HDR "\"layers\": [{\"layer\": 1, \"load\": [1,1,1,1]}, " L1 "]}",
		    "layers[0].layer: expected 0");
	parse_fails(HDR "\"layers\": [" L1 ", " L1 "]} x", "text after the top-level object");
	parse_fails(HDR "\"layers\": [" L1 ", " L1 "], \"zzz\": 1}", "unknown key \"zzz\"");
}
END_TEST

START_TEST(test_read_errors)
{
	struct pipette_model m, dense;
	struct pipette_routing *r = NULL;
	struct pipette_err err;

	ck_assert(pipette_model_load(TINY_MODEL, NULL, &m, &err) == 0);
	ck_assert(pipette_routing_read(DATA "/missing.json", &m, &r, &err) == -1);
	ck_assert_msg(strstr(err.msg, "missing.json: cannot open"), "%s", err.msg);
	ck_assert(pipette_routing_read(DATA "/bad-negative.json", &m, &r, &err) == -1);
	ck_assert_msg(strstr(err.msg, "bad-negative.json: layers[0].next[2][1]: negative count"),
		      "%s", err.msg);
	ck_assert(pipette_routing_read(DATA "/bad-json.json", &m, &r, &err) == -1);
	ck_assert_msg(strstr(err.msg, "bad-json.json: line 3"), "%s", err.msg);
	ck_assert(pipette_routing_read(DATA, &m, &r, &err) == -1);
	ck_assert_msg(strstr(err.msg, "not a regular file"), "%s", err.msg);
	ck_assert(pipette_model_preset("llama3-8b", &dense, &err) == 0);
	ck_assert(pipette_routing_read(DATA "/tiny.json", &dense, &r, &err) == -1);
	ck_assert_msg(strstr(err.msg, "has no experts"), "%s", err.msg);
	ck_assert_ptr_null(r);
}
END_TEST

/* ---- the command ------------------------------------------------------------ */

static void expect(const char *args, int code, const char *fragment)
{
	static char out[1 << 16];
	int rc = cli_run(args, out, sizeof(out));

	ck_assert_msg(rc == code, "pipette %s: exit %d, expected %d:\n%s", args, rc, code, out);
	ck_assert_msg(strstr(out, fragment), "pipette %s: lacks '%s':\n%s", args, fragment, out);
}

#define TINY_ARGS "experts --model " TINY_MODEL " --trace " DATA "/tiny.json "

START_TEST(test_cli)
{
	char a[256], b[256], cmd[1024];
	static char out[1 << 16];

	expect("experts --help", 0, "pipette-routing/1");
	expect("--help", 0, "experts");
	expect(TINY_ARGS "--ep 3", 2, "--ep 3 does not divide the 4 experts");
	expect(TINY_ARGS, 2, "--ep is required");
	expect("experts --model llama3-8b --trace x --ep 2", 2, "dense");
	expect("experts --model " TINY_MODEL " --trace " DATA "/bad-layers.json --ep 2", 2,
	       "bad-layers.json: layers: 1 entries, but model mixtral has 2 MoE layers");
	expect(TINY_ARGS "--ep 2 --gpus-per-node 1 --format xml", 2, "expected table or json");
	expect(TINY_ARGS "--ep 4 --nodes 1 --gpus-per-node 2", 2, "fewer than --ep 4");
	expect(TINY_ARGS "--ep 2 --gpus-per-node 1 --format json", 0, "\"placement\": [");
	expect(TINY_ARGS "--ep 2 --gpus-per-node 1 --format json", 0, "\"solver\": \"glpk\"");
	expect(TINY_ARGS "--ep 2 --gpus-per-node 1 --solver greedy", 0, "solver greedy");
	/* JSON output is byte-identical run to run. */
	ck_assert_int_eq(cli_run(TINY_ARGS "--ep 2 --gpus-per-node 1 --format json", out,
			     sizeof(out)), 0);
	{
		static char again[1 << 16];

		ck_assert_int_eq(cli_run(TINY_ARGS "--ep 2 --gpus-per-node 1 --format json", again,
				     sizeof(again)), 0);
		ck_assert_str_eq(out, again);
	}
	/* generate: the same seed gives the same bytes, another seed others. */
	snprintf(a, sizeof(a), "/tmp/pipette-experts-%d-a.json", (int)getpid());
	snprintf(b, sizeof(b), "/tmp/pipette-experts-%d-b.json", (int)getpid());
	snprintf(cmd, sizeof(cmd), "experts generate --model mixtral-8x7b --seed 42 --skew 1.1 "
		 "--tokens 300 -o %s", a);
	expect(cmd, 0, "");
	snprintf(cmd, sizeof(cmd), "experts generate --model mixtral-8x7b --seed 42 --skew 1.1 "
		 "--tokens 300 -o %s", b);
	expect(cmd, 0, "");
	snprintf(cmd, sizeof(cmd), "cmp -s %s %s", a, b);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "experts generate --model mixtral-8x7b --seed 43 --skew 1.1 "
		 "--tokens 300 -o %s", b);
	expect(cmd, 0, "");
	snprintf(cmd, sizeof(cmd), "cmp -s %s %s", a, b);
	ck_assert_int_ne(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "experts --model mixtral-8x7b --trace %s --ep 4 "
		 "--gpus-per-node 2 --node-limit 3 --format json", a);
	expect(cmd, 0, "\"gain\": {\"objective\": ");
	expect("experts generate --model mixtral-8x7b --seed 1 --tokens 5", 2,
	       "--seed, --skew and --tokens are required");
	expect("experts generate --model mixtral-8x7b --seed 1 --skew -1 --tokens 5", 2,
	       "--skew");
	remove(a);
	remove(b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("experts");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_tiny_evaluate);
	tcase_add_test(tc, test_tiny_optimum);
	tcase_add_test(tc, test_alltoall_time);
	tcase_add_test(tc, test_generator);
	tcase_add_test(tc, test_never_worse);
	tcase_add_test(tc, test_fallbacks);
	tcase_add_test(tc, test_parse_errors);
	tcase_add_test(tc, test_read_errors);
	tcase_add_test(tc, test_cli);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
