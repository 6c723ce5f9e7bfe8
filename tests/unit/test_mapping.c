/* Unit tests: the rank-to-GPU mapping (core/plan/mapping.h). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/bwcache.h"
#include "inputs/cluster.h"
#include "plan/mapping.h"
#include "plan/mapping_int.h"
#include "estimate/timing.h"
#include "check_run.h"

static const char *const names4[] = { "n1", "n2", "n3", "n4" };

/* A cache with healthy defaults (45 GB/s between nodes, 400 GB/s inside,
 * 5 / 2 us) and nothing measured. */
static struct pipette_bwcache *healthy(void)
{
	struct pipette_bwcache *bw = pipette_bwcache_create();
	struct pipette_bw_defaults d = { 45, 400, 5, 2 };
	struct pipette_err err;

	ck_assert_ptr_nonnull(bw);
	ck_assert_int_eq(pipette_bwcache_set_defaults(bw, &d, &err), 0);
	return bw;
}

static struct pipette_cluster *make(const struct pipette_bwcache *bw, const char *const *names,
				    int n, int G)
{
	struct pipette_err err;
	struct pipette_cluster *cl = pipette_cluster_create(
		names, n, G, NULL, pipette_gpu_lookup("H100", &err), bw, 1, &err);

	ck_assert_msg(cl != NULL, "%s", err.msg);
	return cl;
}

static void llama(struct pipette_model *m, struct pipette_config *c, int tp, int pp, int dp,
		  long gb)
{
	struct pipette_err err;

	ck_assert_int_eq(pipette_model_preset("llama2-7b", m, &err), 0);
	pipette_config_init(c);
	c->tp = tp;
	c->pp = pp;
	c->dp = dp;
	c->global_batch = gb;
	c->seq_len = 4096;
	ck_assert_int_eq(pipette_config_check(m, c, &err), 0);
}

/* pipette_mapping_search with its own timer. */
static int map(const struct pipette_model *m, const struct pipette_gpu_spec *gpu,
	       const struct pipette_config *c, const struct pipette_cluster *cl,
	       const struct pipette_mapping_opts *o, int *sigma,
	       struct pipette_mapping_stats *st, struct pipette_err *err)
{
	struct pipette_timer *t = pipette_timer_create();
	int rc = pipette_mapping_search(t, m, gpu, c, cl, o, sigma, st, err);

	pipette_timer_destroy(t);
	return rc;
}

static double estimate(const struct pipette_model *m, const struct pipette_config *c,
		       const struct pipette_cluster *cl, const int *sigma)
{
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_time tm;
	struct pipette_err err;

	ck_assert_int_eq(pipette_time_estimate(t, m, pipette_cluster_gpu(cl), c, cl, sigma, 0,
					       &tm, &err), 0);
	pipette_timer_destroy(t);
	return tm.iteration_s;
}

static void assert_permutation(const int *sigma, int world, int gpus)
{
	char *seen = calloc((size_t)gpus, 1);
	int r;

	for (r = 0; r < world; r++) {
		ck_assert_int_ge(sigma[r], 0);
		ck_assert_int_lt(sigma[r], gpus);
		ck_assert_int_eq(seen[sigma[r]], 0);
		seen[sigma[r]] = 1;
	}
	free(seen);
}

/* One slow node pair, n2 <-> n3 at 1 GB/s.  tp 2 = the 2 GPUs of a node,
 * pp 4, dp 1: every node is one stage and the pipeline walks the node
 * order.  The block order n1-n2-n3-n4 sends every activation and gradient
 * between stages 1 and 2 over the slow pair (2*b*s*h = 2*4096*4096 bytes
 * = 33.6 MB per micro-batch: 33.6 ms at 1 GB/s against 0.75 ms at 45
 * GB/s, which with 64 micro-batches is far above any compute change).
 * Any order where n2 and n3 are not neighbours avoids it (n1-n2-n4-n3,
 * n2-n1-n3-n4, ...), and no other link differs, so the optimum is the
 * block time minus the slow transfers, and the optimised sigma must keep
 * n2 and n3 apart in the chain. */
START_TEST(test_slow_pair_off_pipeline)
{
	struct pipette_bwcache *bw = healthy();
	struct pipette_cluster *cl;
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_mapping_stats st;
	struct pipette_err err;
	int sigma[8], pos[4], k;
	struct pipette_bw_prov prov = { NULL, NULL, 0, (time_t)-1 };

	ck_assert_int_eq(pipette_bwcache_set_inter(bw, "n2", "n3", 1.0, 5, &prov, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(bw, "n3", "n2", 1.0, 5, &prov, &err), 0);
	cl = make(bw, names4, 4, 2);
	llama(&m, &c, 2, 4, 1, 64);
	ck_assert_int_eq(map(&m,
						pipette_cluster_gpu(cl), &c, cl, NULL, sigma,
						&st, &err), 0);
	assert_permutation(sigma, 8, 8);
	ck_assert(pipette_mapping_is_node_block(sigma, 8, 2));
	for (k = 0; k < 4; k++)
		pos[sigma[2 * k] / 2] = k;	/* stage k runs on node sigma/2 */
	ck_assert_msg(abs(pos[1] - pos[2]) != 1, "n2 (stage %d) and n3 (stage %d) are "
		      "neighbours in the pipeline", pos[1], pos[2]);
	ck_assert(st.best_s < 0.9 * st.block_s);
	/* the exact search, which leaves out the orders that tie it (every
	 * one that keeps n2 and n3 apart): within 0.5% of the optimum */
	ck_assert_int_eq(st.end, PIPETTE_MAP_END_FLOOR);
	ck_assert(fabs(estimate(&m, &c, cl, sigma) - st.best_s) <= 1e-12 * st.best_s);
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);
}
END_TEST

/* One node, 4 GPUs, GPU 0 <-> 1 at 10 GB/s (NVLink 400).  tp 2, dp 2:
 * block puts TP group {0,1} on the slow pair, and TP all-reduces 4 times
 * per layer per micro-batch on the critical path (2 x (2-1)/2 x 33.6 MB
 * = 33.6 MB each: 3.4 ms at 10 GB/s vs 0.08 ms), while DP reduces once per
 * iteration, overlapped with the backward pass.  So the slot search must
 * pair GPU 0 and GPU 1 with others in TP and leave the slow pair to DP. */
START_TEST(test_slow_gpu_pair_off_tp)
{
	struct pipette_bwcache *bw = healthy();
	struct pipette_cluster *cl;
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_mapping_stats st;
	struct pipette_err err;
	struct pipette_bw_prov prov = { NULL, NULL, 0, (time_t)-1 };
	int sigma[4], a, b, g;

	for (a = 0; a < 4; a++)
		for (b = 0; b < 4; b++)
			if (a != b)
				ck_assert_int_eq(pipette_bwcache_set_intra(bw, "n1", a, b,
					(a + b == 1) ? 10.0 : 400.0, 2, &prov, &err), 0);
	cl = make(bw, names4, 1, 4);
	llama(&m, &c, 2, 1, 2, 16);
	ck_assert_int_eq(map(&m,
						pipette_cluster_gpu(cl), &c, cl, NULL, sigma,
						&st, &err), 0);
	assert_permutation(sigma, 4, 4);
	for (g = 0; g < 2; g++)	/* TP group g = ranks 2g, 2g+1 */
		ck_assert_msg(!((sigma[2 * g] == 0 && sigma[2 * g + 1] == 1) ||
				(sigma[2 * g] == 1 && sigma[2 * g + 1] == 0)),
			      "TP group %d runs on the slow GPU pair", g);
	ck_assert(st.best_s < st.block_s);
	ck_assert_int_eq(st.slot_nodes, 1);
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);
}
END_TEST

/* Annealing (forced, with a quarter of the brute-force count, n!/4 =
 * 10080 estimates) reaches the brute-force optimum over the 8! node
 * orders of 8 generated heterogeneous nodes, and neither is ever worse
 * than block.  Asked for a proof (opts.exact), an 8-node cluster gets the
 * brute-force order by branch and bound, then the slot descent, so its
 * result is never worse than the node-order optimum; with the default
 * options (what pipette plan uses) it is within 0.5% of it. */
START_TEST(test_anneal_equals_exhaustive)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw;
	struct pipette_cluster *cl;
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_mapping_opts o;
	struct pipette_mapping_stats sa, ex;
	struct pipette_err err;
	static const char *const names[] = { "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8" };
	int s1[64], s2[64], shape;
	static const int shapes[][3] = { { 8, 8, 1 }, { 4, 2, 8 }, { 2, 4, 8 } };

	pipette_bw_gen_init(&g);
	g.seed = 8;
	g.nodes = 8;
	g.gpus_per_node = 8;
	g.prefix = "g";
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	g.slow_frac = 0.3;
	ck_assert_int_eq(pipette_bwcache_generate(&g, &bw, &err), 0);
	cl = make(bw, names, 8, 8);
	ck_assert_int_eq(pipette_model_preset("llama2-13b", &m, &err), 0);
	for (shape = 0; shape < 3; shape++) {
		pipette_config_init(&c);
		c.tp = shapes[shape][0];
		c.pp = shapes[shape][1];
		c.dp = shapes[shape][2];
		c.global_batch = 64;
		c.seq_len = 2048;
		ck_assert_int_eq(pipette_config_check(&m, &c, &err), 0);
		pipette_mapping_opts_init(&o);
		o.force_anneal = 1;
		o.no_slots = 1;
		o.budget = 40320 / 4;
		ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, s1, &sa, &err), 0);
		ck_assert_int_le(sa.evaluations, 40320 / 4);
		o.budget = 0;
		o.force_anneal = 0;
		o.force_exhaustive = 1;
		ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, s2, &ex, &err), 0);
		ck_assert(ex.exhaustive);
		/* the block mapping, the placement bound, every order */
		ck_assert_int_eq(ex.evaluations, 1 + 1 + 40320);
		ck_assert_msg(fabs(sa.best_s - ex.best_s) <= 1e-12 * ex.best_s,
			      "shape %d: annealing %.9f, exhaustive %.9f", shape, sa.best_s,
			      ex.best_s);
		ck_assert(sa.best_s < sa.block_s);	/* 30% slow pairs */
		if (shape == 0) {
			struct pipette_mapping_stats df;

			/* the exact search asked for a proof: brute force's
			 * order, with fewer estimates; then the slots, never
			 * worse */
			pipette_mapping_opts_init(&o);
			o.no_slots = 1;
			o.exact = 1;
			ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, s1, &df, &err), 0);
			ck_assert(df.exhaustive);
			ck_assert_int_lt(df.evaluations, 40320);
			ck_assert_int_gt(df.bounds, 0);
			ck_assert(df.best_s == ex.best_s);
			ck_assert_mem_eq(s1, s2, sizeof(s1));
			o.no_slots = 0;
			ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, s2, &df, &err), 0);
			ck_assert(df.exhaustive);
			ck_assert(df.best_s <= ex.best_s);
			assert_permutation(s2, 64, 64);
			/* the default (what pipette plan uses): no order it
			 * leaves out beats its own by more than 0.5%, the
			 * slots only gain */
			pipette_mapping_opts_init(&o);
			ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, s2, &df, &err), 0);
			ck_assert(df.best_s * (1 - 0.005) <= ex.best_s);
			assert_permutation(s2, 64, 64);
		}
		ck_assert(ex.best_s <= ex.block_s);
		assert_permutation(s1, 64, 64);
		assert_permutation(s2, 64, 64);
	}
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);
}
END_TEST

/* Never worse than block, deterministic, and block_only returns block. */
START_TEST(test_never_worse_and_deterministic)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw;
	struct pipette_cluster *cl;
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_mapping_opts o;
	struct pipette_mapping_stats s1, s2;
	struct pipette_err err;
	const char *names[12];
	char buf[12][8];
	int a[96], b[96], i;

	for (i = 0; i < 12; i++) {
		snprintf(buf[i], sizeof(buf[i]), "h%d", i + 1);
		names[i] = buf[i];
	}
	pipette_bw_gen_init(&g);
	g.seed = 12;
	g.nodes = 12;
	g.gpus_per_node = 8;
	g.prefix = "h";
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	g.slow_frac = 0.2;
	g.degraded_node = 3;
	g.degraded_factor = 0.3;
	ck_assert_int_eq(pipette_bwcache_generate(&g, &bw, &err), 0);
	cl = make(bw, names, 12, 8);
	llama(&m, &c, 4, 4, 6, 96);
	pipette_mapping_opts_init(&o);
	o.budget = 300;
	ck_assert_int_eq(map(&m,
		pipette_cluster_gpu(cl), &c, cl, &o, a, &s1, &err), 0);
	ck_assert_int_eq(map(&m,
		pipette_cluster_gpu(cl), &c, cl, &o, b, &s2, &err), 0);
	ck_assert(memcmp(a, b, sizeof(a)) == 0);
	ck_assert(s1.best_s == s2.best_s);
	ck_assert(s1.best_s <= s1.block_s);
	ck_assert(s1.best_s < s1.block_s);	/* 20% slow pairs: something helps */
	assert_permutation(a, 96, 96);
	ck_assert(fabs(estimate(&m, &c, cl, a) - s1.best_s) <= 1e-12 * s1.best_s);
	ck_assert(fabs(estimate(&m, &c, cl, NULL) - s1.block_s) <= 1e-12 * s1.block_s);
	o.block_only = 1;
	ck_assert_int_eq(map(&m,
		pipette_cluster_gpu(cl), &c, cl, &o, a, &s1, &err), 0);
	for (i = 0; i < 96; i++)
		ck_assert_int_eq(a[i], i);
	ck_assert(s1.best_s == s1.block_s);
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);
}
END_TEST

/* Sixteen nodes of 8 GPUs, healthy but for two slow pairs, n4 <-> n5 and
 * n10 <-> n11 at 4 GB/s; tp 8, dp 16: one DP ring over the nodes in
 * order, which the block order runs over both slow pairs.  The link moves
 * alone (every swap kept) leave no slow hop in the ring, keep the order a
 * permutation, and an undone swap restores it exactly; the search reaches
 * the placement bound (no slow hop: every ring link is the fastest) and
 * says it stopped there. */
START_TEST(test_link_moves_clear_slow_hops)
{
	struct pipette_bwcache *bw = healthy();
	struct pipette_bw_prov prov = { NULL, NULL, 0, (time_t)-1 };
	struct pipette_link_moves *lm;
	struct pipette_node_pairs *np;
	struct pipette_cluster *cl;
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_mapping_stats st;
	struct pipette_err err;
	const char *names[16];
	char buf[16][8], seen[16] = { 0 };
	int order[16], sigma[128], i, j, k, swaps = 0;

	for (k = 0; k < 16; k++) {
		snprintf(buf[k], sizeof(buf[k]), "n%d", k + 1);
		names[k] = buf[k];
		order[k] = k;
	}
	ck_assert_int_eq(pipette_bwcache_set_inter(bw, "n4", "n5", 4.0, 5, &prov, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(bw, "n5", "n4", 4.0, 5, &prov, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(bw, "n10", "n11", 4.0, 5, &prov, &err), 0);
	ck_assert_int_eq(pipette_bwcache_set_inter(bw, "n11", "n10", 4.0, 5, &prov, &err), 0);
	cl = make(bw, names, 16, 8);
	llama(&m, &c, 8, 1, 16, 64);
	np = pipette_node_pairs_create(cl);
	ck_assert_ptr_nonnull(np);
	lm = pipette_link_moves_create(&m, &c, np, 8, 16, order);
	ck_assert_ptr_nonnull(lm);
	ck_assert(pipette_link_moves_next(lm, 1L << 30, &i, &j));
	ck_assert_int_ne(order[i], i);
	pipette_link_moves_verdict(lm, 0);
	for (k = 0; k < 16; k++)
		ck_assert_int_eq(order[k], k);
	while (pipette_link_moves_next(lm, 1L << 30, &i, &j)) {
		pipette_link_moves_verdict(lm, 1);
		ck_assert_int_lt(++swaps, 1000);
	}
	pipette_link_moves_destroy(lm);
	pipette_node_pairs_destroy(np);
	for (k = 0; k < 16; k++) {
		int a = order[k], b = order[(k + 1) % 16];

		ck_assert_int_eq(seen[a]++, 0);
		ck_assert_msg(pipette_cluster_node_link(cl, a, b).gbps > 40,
			      "ring hop n%d -> n%d is slow after %d swaps", a + 1, b + 1, swaps);
	}
	ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, NULL, sigma, &st, &err), 0);
	assert_permutation(sigma, 128, 128);
	ck_assert(st.best_s < st.block_s);
	ck_assert_msg(st.best_s <= st.bound_s * (1 + 1e-9), "%.9f s, bound %.9f s", st.best_s,
		      st.bound_s);
	ck_assert_int_eq(st.end, PIPETTE_MAP_END_BOUND);
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);
}
END_TEST

/* A generated cluster of n nodes named t1..tn (noisy figures, 20% slow
 * pairs, 8-node switches, one degraded node). */
static struct pipette_cluster *generated(int n, char (*buf)[8], const char **names,
					 struct pipette_bwcache **bw)
{
	struct pipette_bw_gen g;
	struct pipette_err err;
	int k;

	for (k = 0; k < n; k++) {
		snprintf(buf[k], 8, "t%d", k + 1);
		names[k] = buf[k];
	}
	pipette_bw_gen_init(&g);
	g.seed = 40;
	g.nodes = n;
	g.gpus_per_node = 8;
	g.prefix = "t";
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	g.slow_frac = 0.2;
	g.switch_size = 8;
	g.degraded_node = 5;
	ck_assert_int_eq(pipette_bwcache_generate(&g, bw, &err), 0);
	return make(*bw, names, n, 8);
}

/* The node-pair table (plan/nodepairs.h) reads what the cluster reads,
 * bit for bit: every pair's slower direction, and the fastest bandwidth
 * and shortest latency over all ordered pairs (each folded on its own).
 * On 363 nodes whose 65,703 pairs all differ (past the 65,535 figures a
 * 2-byte index names) there is no table and the reads go to the cluster,
 * with the same results. */
START_TEST(test_node_pairs_match_cluster)
{
	struct pipette_bwcache *bw;
	struct pipette_node_pairs *np;
	struct pipette_cluster *cl;
	struct pipette_link best = { 0, HUGE_VAL };
	struct pipette_err err;
	const char *names[40];
	char buf[40][8];
	int x, y, n, round;

	for (round = 0; round < 2; round++) {
		if (round == 0) {
			n = 40;
			cl = generated(n, buf, names, &bw);
		} else {
			n = 363;
			bw = NULL;
			cl = pipette_cluster_create_blank(n, 8, pipette_gpu_lookup("H100", &err),
							  (struct pipette_link){ 45, 5 }, &err);
			ck_assert_ptr_nonnull(cl);
			for (x = 0; x < n; x++)
				for (y = 0; y < x; y++) {
					double v = 10 + 1e-3 * (x * n + y);

					ck_assert_int_eq(pipette_cluster_set_node_link(cl, x, y,
						(struct pipette_link){ v, 5 + 1e-3 * y }), 0);
					ck_assert_int_eq(pipette_cluster_set_node_link(cl, y, x,
						(struct pipette_link){ v + 1, 4 + 1e-3 * x }), 0);
				}
		}
		np = pipette_node_pairs_create(cl);
		ck_assert_ptr_nonnull(np);
		ck_assert_int_eq(np->idx != NULL, round == 0);
		best = (struct pipette_link){ 0, HUGE_VAL };
		for (x = 0; x < n; x++)
			for (y = 0; y < n; y++) {
				struct pipette_link l = pipette_cluster_node_link(cl, x, y);

				if (x == y)
					continue;
				ck_assert(pipette_node_pairs_gbps(np, x, y) ==
					  pipette_cluster_node_gbps(cl, x, y));
				best.gbps = fmax(best.gbps, l.gbps);
				best.lat_us = fmin(best.lat_us, l.lat_us);
			}
		ck_assert(np->best.gbps == best.gbps && np->best.lat_us == best.lat_us);
		if (round == 1)	/* the set figures: pair (362, 361) back, x = 1 back */
			ck_assert(best.gbps == 10 + 1e-3 * (362 * n + 361) + 1 && best.lat_us == 4 + 1e-3);
		pipette_node_pairs_destroy(np);
		pipette_cluster_destroy(cl);
		pipette_bwcache_destroy(bw);
	}
}
END_TEST

/* The mapping reads the same with the table as through the cluster: on 40
 * generated nodes (above the exact search, so the chain and the link
 * moves run), a search given a table and one given the same pairs without
 * it return the same sigma, time and count of estimates; a third, given
 * nothing, reads its own; a second search given the first's pairs, which
 * takes the chain and the unjudged moves' order kept there, too. */
START_TEST(test_node_pairs_same_mapping)
{
	struct pipette_bwcache *bw;
	struct pipette_node_pairs *with, *without;
	struct pipette_cluster *cl;
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_mapping_opts o;
	struct pipette_mapping_stats s1, s2, s3;
	struct pipette_err err;
	const char *names[40];
	char buf[40][8];
	int a[320], b[320], d[320];

	cl = generated(40, buf, names, &bw);
	llama(&m, &c, 8, 4, 10, 160);
	with = pipette_node_pairs_create(cl);
	without = pipette_node_pairs_create(cl);
	ck_assert_ptr_nonnull(with);
	ck_assert_ptr_nonnull(without);
	ck_assert_ptr_nonnull(with->idx);
	free(without->idx);
	without->idx = NULL;
	pipette_mapping_opts_init(&o);
	o.budget = 120;
	o.pairs = with;
	ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, a, &s1, &err), 0);
	ck_assert_ptr_nonnull(with->chain);	/* kept for the next search */
	ck_assert_ptr_nonnull(with->memo_order);	/* and the unjudged moves' order */
	ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, b, &s2, &err), 0);
	ck_assert_mem_eq(a, b, sizeof(a));		/* recalled: the same search */
	ck_assert(s1.best_s == s2.best_s);
	ck_assert_int_eq(s1.evaluations, s2.evaluations);
	o.pairs = without;
	ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, b, &s2, &err), 0);
	o.pairs = NULL;
	ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, d, &s3, &err), 0);
	ck_assert(s1.best_s < s1.block_s);
	ck_assert_mem_eq(a, b, sizeof(a));
	ck_assert_mem_eq(a, d, sizeof(a));
	ck_assert(s1.best_s == s2.best_s && s1.best_s == s3.best_s);
	ck_assert_int_eq(s1.evaluations, s2.evaluations);
	ck_assert_int_eq(s1.evaluations, s3.evaluations);
	assert_permutation(a, 320, 320);
	pipette_node_pairs_destroy(with);
	pipette_node_pairs_destroy(without);
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);
}
END_TEST

/* The exact search (branch and bound) returns brute force's mapping, the
 * lexicographically smallest node order among those of least estimate,
 * on random caches: 5 to 8 nodes of 4 GPUs, slow pairs, noisy figures
 * and a slow switch, over pipeline-, data- and tensor-heavy shapes, and
 * one that leaves a node idle (its GPUs unused: brute force orders all N
 * nodes, the idle one last among equals). */
START_TEST(test_exact_equals_brute_force)
{
	static const char *const names[] = { "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8" };
	/* tp, pp, dp; 0: whatever uses all N nodes, -1: all nodes but one */
	static const int shapes[][3] = { { 4, 0, 1 }, { 2, 0, 2 }, { 4, 1, 0 }, { 1, 2, 0 },
					 { 4, 1, -1 } };
	int seed, cases = 0, cut = 0, idle = 0, floored = 0;

	for (seed = 1; seed <= 30; seed++) {
		struct pipette_bw_gen g;
		struct pipette_bwcache *bw;
		struct pipette_cluster *cl;
		struct pipette_model m;
		struct pipette_config c;
		struct pipette_mapping_opts o;
		struct pipette_mapping_stats bb, bf, fl;
		struct pipette_err err;
		int N = 5 + seed % 4, sh = seed % 5, s1[32], s2[32], k, used;
		long orders = 1;

		pipette_bw_gen_init(&g);
		g.seed = 1000 + (unsigned long long)seed;
		g.nodes = N;
		g.gpus_per_node = 4;
		g.prefix = "r";
		g.inter_gbps = 45;
		g.intra_gbps = 400;
		g.slow_frac = 0.1 + 0.05 * (seed % 5);
		g.switch_size = seed % 3 ? 4 : 0;
		g.cross_factor = 0.8;
		ck_assert_int_eq(pipette_bwcache_generate(&g, &bw, &err), 0);
		cl = make(bw, names, N, 4);
		ck_assert_int_eq(pipette_model_preset("llama2-7b", &m, &err), 0);
		pipette_config_init(&c);
		used = N - (shapes[sh][1] < 0 || shapes[sh][2] < 0);
		c.tp = shapes[sh][0];
		c.pp = shapes[sh][1] > 0 ? shapes[sh][1] : 4 * used / c.tp / shapes[sh][2];
		c.dp = shapes[sh][2] > 0 ? shapes[sh][2] : 4 * used / c.tp / c.pp;
		c.global_batch = 16L * c.dp;
		c.seq_len = 2048;
		if (pipette_config_check(&m, &c, &err)) {
			pipette_cluster_destroy(cl);
			pipette_bwcache_destroy(bw);
			continue;	/* layers that do not split over pp */
		}
		pipette_mapping_opts_init(&o);
		o.no_slots = 1;
		ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, s1, &fl, &err), 0);
		o.exact = 1;
		ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, s1, &bb, &err), 0);
		o.force_exhaustive = 1;
		ck_assert_int_eq(map(&m, pipette_cluster_gpu(cl), &c, cl, &o, s2, &bf, &err), 0);
		for (k = 2; k <= N; k++)
			orders *= k;
		ck_assert(bb.exhaustive && bf.exhaustive);
		ck_assert_msg(bb.best_s == bf.best_s, "seed %d (%d nodes, tp %d pp %d dp %d): exact "
			      "%.12f, brute force %.12f", seed, N, c.tp, c.pp, c.dp, bb.best_s,
			      bf.best_s);
		ck_assert_msg(!memcmp(s1, s2, sizeof(int) * (size_t)pipette_config_world(&c)),
			      "seed %d: a different order of equal estimate", seed);
		ck_assert(bb.bound_s > 0 && bb.bound_s <= bb.best_s);
		/* by default, what it leaves out could not beat its order by
		 * more than 0.5%, for no more estimates than the proof */
		ck_assert_msg(fl.best_s * (1 - 0.005) <= bf.best_s && fl.evaluations <= bb.evaluations,
			      "seed %d: %.12f in %ld estimates; exact %.12f in %ld", seed, fl.best_s,
			      fl.evaluations, bb.best_s, bb.evaluations);
		floored += fl.evaluations < bb.evaluations;
		cut += bb.evaluations < orders;
		idle += pipette_config_world(&c) < 4 * N;
		cases++;
		pipette_cluster_destroy(cl);
		pipette_bwcache_destroy(bw);
	}
	ck_assert_int_ge(cases, 15);
	ck_assert_int_ge(idle, 3);
	ck_assert_int_ge(cut, cases / 2);	/* the bound prunes */
	ck_assert_int_ge(floored, cases / 2);	/* and the floor more */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mapping");
	TCase *tc = tcase_create("mapping");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_slow_pair_off_pipeline);
	tcase_add_test(tc, test_slow_gpu_pair_off_tp);
	tcase_add_test(tc, test_anneal_equals_exhaustive);
	tcase_add_test(tc, test_never_worse_and_deterministic);
	tcase_add_test(tc, test_exact_equals_brute_force);
	tcase_add_test(tc, test_link_moves_clear_slow_hops);
	tcase_add_test(tc, test_node_pairs_match_cluster);
	tcase_add_test(tc, test_node_pairs_same_mapping);
	suite_add_tcase(s, tc);
	return check_run(s);
}
