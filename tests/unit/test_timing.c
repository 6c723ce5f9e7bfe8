/* Unit tests: the iteration-time model. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/cluster.h"
#include "inputs/config.h"
#include "inputs/hardware.h"
#include "estimate/memory.h"
#include "inputs/model.h"
#include "inputs/rng.h"
#include "inputs/stack.h"
#include "estimate/kernels.h"
#include "estimate/timing.h"
#include "check_run.h"

/* alpha-beta ring forms (the bus-bandwidth factors of NVIDIA/nccl-tests
 * doc/PERFORMANCE.md plus a latency per step), by hand:
 *   ring all-reduce, n = 8, 1 GB, 100 GB/s, 10 us:
 *     2*7*10e-6 + 2*(7/8)*1e9/100e9 = 1.4e-4 + 0.0175 = 0.01764 s
 *   all-gather, n = 4, 400 MB, 50 GB/s, 5 us: 3*5e-6 + (3/4)*4e8/5e10 = 0.006015 s
 *   point-to-point, 10 MB, 25 GB/s, 20 us: 20e-6 + 1e7/25e9 = 0.00042 s */
START_TEST(test_collectives)
{
	ck_assert_double_eq_tol(pipette_allreduce_s(8, 1e9, 100, 10), 0.01764, 1e-12);
	ck_assert_double_eq_tol(pipette_allgather_s(4, 4e8, 50, 5), 0.006015, 1e-12);
	ck_assert_double_eq_tol(pipette_alltoall_s(4, 4e8, 50, 5), 0.006015, 1e-12);
	ck_assert_double_eq_tol(pipette_p2p_s(1e7, 25, 20), 0.00042, 1e-12);
	ck_assert_double_eq(pipette_allreduce_s(1, 1e9, 100, 10), 0);
	ck_assert_double_eq(pipette_p2p_s(0, 100, 10), 0);
}
END_TEST

/* Model FLOPs of a GPT are Narayanan et al.'s
 * 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) exactly: per token and layer
 * 2*4h^2 (QKV+O) + 2*8h^2 (MLP) + 4sh (attention) = 24h^2 + 4sh, x3 for
 * forward and backward; logits 2hV x3. */
START_TEST(test_model_flops)
{
	struct pipette_model m;
	struct pipette_config c;
	double B = 64, s = 2048, L = 96, h = 12288, V = 51200;

	ck_assert_int_eq(pipette_model_preset("gpt3-175b", &m, NULL), 0);
	pipette_config_init(&c);
	c.global_batch = 64;
	c.seq_len = 2048;
	ck_assert_double_eq_tol(pipette_model_flops(&m, &c) /
				(72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))),
				1.0, 1e-12);
}
END_TEST

static struct pipette_cluster *nominal(int nodes, int G, const char *gpu)
{
	char *names[64];
	char buf[64][16];
	struct pipette_cluster *cl;
	int i;

	for (i = 0; i < nodes; i++) {
		snprintf(buf[i], sizeof(buf[i]), "node%d", i + 1);
		names[i] = buf[i];
	}
	cl = pipette_cluster_create((const char *const *)names, nodes, G, NULL,
				    pipette_gpu_lookup(gpu, NULL), NULL, 0, NULL);
	ck_assert_ptr_nonnull(cl);
	return cl;
}

static double iter(const char *model, struct pipette_config *c, struct pipette_cluster *cl,
		   struct pipette_time *out)
{
	struct pipette_model m;
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_err err;
	struct pipette_time tm;

	ck_assert_int_eq(pipette_model_preset(model, &m, NULL), 0);
	ck_assert_msg(pipette_config_check(&m, c, &err) == 0, "%s", err.msg);
	ck_assert_msg(pipette_time_estimate(t, &m, pipette_gpu_lookup("a100", NULL), c, cl,
					    NULL, 1, &tm, &err) == 0, "%s", err.msg);
	pipette_timer_destroy(t);
	if (out)
		*out = tm;
	return tm.iteration_s;
}

/* Throughput identities: tokens/s = B s / t; TFLOP/s per GPU = model FLOPs
 * / (t * GPUs); MFU = that / peak.  The breakdown adds up: the pipeline
 * makespan is compute + exposed in-layer communication + bubble. */
START_TEST(test_breakdown_identities)
{
	struct pipette_config c;
	struct pipette_cluster *cl = nominal(4, 8, "a100");
	struct pipette_time t;

	pipette_config_init(&c);
	c.tp = 8;
	c.pp = 4;
	c.global_batch = 32;
	c.sequence_parallel = 1;
	c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	iter("gpt3-175b", &c, cl, &t);
	ck_assert_double_eq_tol(t.tokens_per_s, 32.0 * 2048 / t.iteration_s, 1e-6);
	ck_assert_double_eq_tol(t.tflops_per_gpu, t.model_flops / (t.iteration_s * 32) / 1e12,
				1e-9);
	ck_assert_double_eq_tol(t.mfu, t.tflops_per_gpu / 312.0, 1e-12);
	ck_assert_double_eq_tol(t.makespan_s, t.compute_s + t.tp_comm_s + t.cp_comm_s +
				t.ep_comm_s + t.bubble_s, 1e-9);
	ck_assert_double_eq_tol(t.iteration_s, t.makespan_s + t.dp_exposed_s + t.embed_sync_s +
				t.optimizer_s, 1e-9);
	ck_assert(t.tp_comm_s > 0 && t.bubble_s > 0 && t.mfu > 0.2 && t.mfu < 0.8);
	pipette_cluster_destroy(cl);
}
END_TEST

/* The stage time of one micro-batch of llama3-8b on one H100: seq tokens,
 * on `stack` with its `opts`, in recipe prec with its last bf16_last
 * layers in BF16. */
static double one_stage(const char *stack, const char *opts, enum pipette_recompute rc,
			long seq, enum pipette_precision prec, int bf16_last)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_stack st;
	struct pipette_cluster *cl = nominal(1, 1, "h100");
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_err err;
	struct pipette_time tm;

	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	ck_assert_int_eq(pipette_stack_resolve(stack, opts, &st, NULL), 0);
	pipette_config_init(&c);
	c.stack = &st;
	c.seq_len = seq;
	c.global_batch = 1;
	c.recompute = rc;
	c.precision = prec;
	c.bf16_last = bf16_last;
	ck_assert_msg(pipette_config_check(&m, &c, &err) == 0, "%s", err.msg);
	ck_assert_msg(pipette_time_estimate(t, &m, pipette_gpu_lookup("h100", NULL), &c, cl,
					    NULL, 0, &tm, &err) == 0, "%s", err.msg);
	pipette_timer_destroy(t);
	pipette_cluster_destroy(cl);
	return tm.stage_f_s + tm.stage_b_s + tm.stage_w_s;
}

/* A low-precision recipe's BF16 end layers run at BF16's rate: a stage
 * holding both kinds is slower than the same stage all in FP8 (each layer
 * timed as its own kind, not every layer as its first). */
START_TEST(test_bf16_end_layers_timed)
{
	double lowp = one_stage("megatron", "", PIPETTE_RECOMPUTE_NONE, 4096,
				PIPETTE_PREC_FP8_CURRENT, 0);
	double mixed = one_stage("megatron", "", PIPETTE_RECOMPUTE_NONE, 4096,
				 PIPETTE_PREC_FP8_CURRENT, 4);

	ck_assert(mixed > 1.01 * lowp);
}
END_TEST

/* A layer whose kernels take less than the host needs to issue them runs
 * at the host's pace: torchtitan's 32 layers at 128 tokens take at least
 * 32 floors (per-op SAC eager: 10.87 ms, compiled 2.90 ms; stack.c), while
 * Megatron's, without a floor, take far less. */
START_TEST(test_host_floor)
{
	double sac = one_stage("torchtitan", "", PIPETTE_RECOMPUTE_SELECTIVE, 128,
			       PIPETTE_PREC_BF16, 0);
	double none = one_stage("torchtitan", "", PIPETTE_RECOMPUTE_NONE, 128,
				PIPETTE_PREC_BF16, 0);
	double comp = one_stage("torchtitan", "compile=on", PIPETTE_RECOMPUTE_SELECTIVE, 128,
				 PIPETTE_PREC_BF16, 0);
	double mega = one_stage("megatron", "", PIPETTE_RECOMPUTE_SELECTIVE, 128,
				PIPETTE_PREC_BF16, 0);

	ck_assert(sac >= 32 * 10.87e-3 && sac < 32 * 10.87e-3 + 0.05);
	ck_assert(none >= 32 * 3.93e-3 && none < sac);
	ck_assert(comp >= 32 * 2.90e-3 && comp < none);
	ck_assert(mega < 32 * 2.90e-3);
}
END_TEST

/* torchtitan's async TP leaves stack.c's share of the TP time exposed
 * and nothing else changes; vanilla TP leaves all of it. */
START_TEST(test_async_tp)
{
	struct pipette_stack vanilla, async;
	struct pipette_config c;
	struct pipette_cluster *cl = nominal(2, 8, "a100");
	struct pipette_time a, v;

	ck_assert_int_eq(pipette_stack_resolve("torchtitan", "compile=on", &vanilla, NULL), 0);
	ck_assert_int_eq(pipette_stack_resolve("torchtitan", "compile=on,tp_overlap=on", &async,
					       NULL), 0);
	pipette_config_init(&c);
	c.stack = &vanilla;
	c.tp = 8;
	c.dp = c.dp_shard = 2;
	c.sequence_parallel = 1;
	c.micro_batch = 2;
	c.global_batch = 4;
	c.seq_len = 4096;
	iter("llama3-8b", &c, cl, &v);
	c.stack = &async;
	iter("llama3-8b", &c, cl, &a);
	ck_assert(v.tp_comm_s > 0);
	ck_assert_double_eq_tol(a.tp_comm_s, v.tp_comm_s * async.tp_exposed, 1e-9);
	ck_assert_double_eq_tol(a.compute_s, v.compute_s, 1e-9);
	ck_assert(a.iteration_s < v.iteration_s);
	pipette_cluster_destroy(cl);
}
END_TEST

/* 1F1B with p stages: the bubble is (p-1) stage-micro-batch times.  With
 * m micro-batches the makespan is close to (m + p - 1)/m of the busiest
 * stage's work (uneven only by the logits on the last stage). */
START_TEST(test_pipeline_bubble)
{
	struct pipette_config c;
	struct pipette_cluster *cl = nominal(4, 8, "a100");
	struct pipette_time t;
	double per_mb;

	pipette_config_init(&c);
	c.tp = 8;
	c.pp = 4;
	c.global_batch = 16;
	c.sequence_parallel = 1;
	iter("gpt3-175b", &c, cl, &t);
	per_mb = t.stage_f_s + t.stage_b_s;
	/* The busiest stage is the last (logits); the three others wait
	 * (p - 1) = 3 of their own micro-batch times during fill/drain. */
	ck_assert(t.bubble_s > 2.5 * per_mb && t.bubble_s < 3.5 * per_mb);
	/* More micro-batches amortise it: 64 instead of 16. */
	c.global_batch = 64;
	{
		struct pipette_time t2;

		iter("gpt3-175b", &c, cl, &t2);
		ck_assert(t2.bubble_s / t2.makespan_s < t.bubble_s / t.makespan_s / 2.5);
	}
	pipette_cluster_destroy(cl);
}
END_TEST

/* A TP group that spans two nodes pays the NIC: with 4 GPUs per node,
 * tp 8 crosses nodes.  Llama-2-13B, b = 1, s = 2048: each all-reduce moves
 * S = 2*s*h = 20,971,520 bytes.  A100 nominal links times their efficiency
 * (hardware.c): NVLink 300 x 0.65 = 195 GB/s, 10 us; NIC 25 x 0.9 = 22.5
 * GB/s, 20 us.  Inside one node: 2*7*10us + 2*(7/8)*S/195e9 = 140 + 188.2
 * = 328.2 us.  Across two nodes the hierarchical form is reduce-scatter +
 * all-gather inside each node, 2*(3*10us + (3/4)*S/195e9) = 221.3 us, plus
 * an all-reduce of S/4 between the nodes, 2*20us + 2*(1/2)*(S/4)/22.5e9 =
 * 273.0 us: 494.3 us, a ratio of 1.506 (the flat ring over the NIC would
 * take 1911 us). */
START_TEST(test_tp_across_nodes)
{
	struct pipette_config c;
	struct pipette_cluster *in8 = nominal(1, 8, "a100"), *in4 = nominal(2, 4, "a100");
	struct pipette_time a, b;

	pipette_config_init(&c);
	c.tp = 8;
	c.global_batch = 1;
	iter("llama2-13b", &c, in8, &a);
	iter("llama2-13b", &c, in4, &b);
	ck_assert_msg(fabs(b.tp_comm_s / a.tp_comm_s - 1.506) < 0.005,
		      "ratio %.3f", b.tp_comm_s / a.tp_comm_s);
	ck_assert(b.iteration_s > a.iteration_s);
	pipette_cluster_destroy(in8);
	pipette_cluster_destroy(in4);
}
END_TEST

/* Recomputation costs time; the distributed optimizer shrinks the
 * optimizer step by DP; a faster GPU is faster. */
START_TEST(test_directions)
{
	struct pipette_config c;
	struct pipette_cluster *cl = nominal(2, 8, "a100");
	struct pipette_time none, full, dist;

	pipette_config_init(&c);
	c.tp = 4;
	c.dp = 4;
	c.global_batch = 32;
	iter("llama2-7b", &c, cl, &none);
	c.recompute = PIPETTE_RECOMPUTE_FULL;
	iter("llama2-7b", &c, cl, &full);
	ck_assert(full.iteration_s > 1.2 * none.iteration_s);
	ck_assert_double_eq_tol(full.model_flops, none.model_flops, 1);	/* MFU ignores it */
	c.recompute = PIPETTE_RECOMPUTE_NONE;
	c.distributed_optimizer = 1;
	iter("llama2-7b", &c, cl, &dist);
	ck_assert_double_eq_tol(dist.optimizer_s, none.optimizer_s / 4, 1e-9);
	pipette_cluster_destroy(cl);
}
END_TEST

/* Regression guard on the calibration (make validate prints the full
 * table): Korthikanti et al. Table 5, SP + selective recompute, A100,
 * published 1.10 s (22B, t8 p1 b4) and 13.75 s (175B, t8 p8 v3, m 64);
 * the prediction must stay within 15%. */
START_TEST(test_calibration_guard)
{
	struct pipette_config c;
	struct pipette_cluster *cl = nominal(8, 8, "a100");
	double t;

	pipette_config_init(&c);
	c.attention = PIPETTE_ATTN_UNFUSED;	/* Megatron of 2022 */
	c.tp = 8;
	c.micro_batch = 4;
	c.global_batch = 4;
	c.sequence_parallel = 1;
	c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	t = iter("gpt-22b", &c, cl, NULL);
	ck_assert_msg(fabs(t / 1.10 - 1) < 0.15, "22B: %.3f s", t);
	c.pp = 8;
	c.vpp = 3;
	c.schedule = PIPETTE_SCHED_INTERLEAVED;
	c.micro_batch = 1;
	c.global_batch = 64;
	t = iter("gpt3-175b", &c, cl, NULL);
	ck_assert_msg(fabs(t / 13.75 - 1) < 0.15, "175B: %.3f s", t);
	pipette_cluster_destroy(cl);
}
END_TEST

/* On a GPU type with a measured kernel table the layer's GEMMs and
 * attention are the kernels' times over the step share and the site's
 * kernel_scale, and nothing else is: with the forward f = K / scale + E
 * (E the memory-bound elementwise time, which the scale does not touch),
 * f(0.5) - f(1) = K = 2 (f(1) - f(2)). */
START_TEST(test_kernel_scale)
{
	const struct pipette_gpu_spec *h100 = pipette_gpu_lookup("h100", NULL);
	struct pipette_gpu_spec g = *h100;
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_cluster *cl = nominal(1, 8, "h100");
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_time tm;
	double f[3], scale[3] = { 0.5, 1.0, 2.0 };
	int i;

	ck_assert_ptr_nonnull(h100->kernels);
	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	pipette_config_init(&c);
	c.stack = pipette_stack_get(PIPETTE_STACK_MEGATRON);
	c.attention = c.stack->attention;
	c.tp = 8;
	c.sequence_parallel = 1;
	c.global_batch = 1;
	c.seq_len = 4096;
	for (i = 0; i < 3; i++) {
		g.kernel_scale = scale[i];
		ck_assert_int_eq(pipette_time_estimate(t, &m, &g, &c, cl, NULL, 0, &tm, NULL), 0);
		f[i] = tm.stage_f_s;
	}
	ck_assert(f[0] > f[1] && f[1] > f[2]);
	ck_assert_double_eq_tol(f[0] - f[1], 2 * (f[1] - f[2]), 1e-9 * f[1]);
	/* kernel_scale 0 is 1 */
	g.kernel_scale = 0;
	ck_assert_int_eq(pipette_time_estimate(t, &m, &g, &c, cl, NULL, 0, &tm, NULL), 0);
	ck_assert_double_eq_tol(tm.stage_f_s, f[1], 1e-12 * f[1]);
	pipette_timer_destroy(t);
	pipette_cluster_destroy(cl);
}
END_TEST

/* NVLink domains larger than a node (GB200 NVL72: 72 GPUs on trays of 4,
 * hardware.c [GB200]): nodes of one domain reach each other at NVLink's
 * nominal 900 GB/s x 0.65 = 585 GB/s and its 10 us, nodes of two domains
 * at the NIC's 50 GB/s x 0.9 = 45 GB/s and 20 us; a TP group of 8 on two
 * trays is faster inside a domain than across the NIC. */
START_TEST(test_nvlink_domain)
{
	const struct pipette_gpu_spec *gb200 = pipette_gpu_lookup("gb200", NULL);
	struct pipette_gpu_spec trays = *gb200;
	struct pipette_cluster *rack, *apart;
	struct pipette_link l;
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_time in, out;
	const char *names[36];
	char buf[36][8];
	int i;

	for (i = 0; i < 36; i++) {
		snprintf(buf[i], sizeof(buf[i]), "n%02d", i);
		names[i] = buf[i];
	}
	ck_assert_int_eq(gb200->nvlink_domain_gpus, 72);
	rack = pipette_cluster_create(names, 36, 4, NULL, gb200, NULL, 0, NULL);
	ck_assert_ptr_nonnull(rack);
	ck_assert_int_eq(pipette_cluster_domain_nodes(rack), 18);
	ck_assert(pipette_cluster_same_domain(rack, 0, 17));
	ck_assert(!pipette_cluster_same_domain(rack, 17, 18));
	l = pipette_cluster_node_link(rack, 0, 17);
	ck_assert_double_eq_tol(l.gbps, 585.0, 1e-9);
	ck_assert_double_eq(l.lat_us, 10.0);
	l = pipette_cluster_node_link(rack, 17, 18);
	ck_assert_double_eq_tol(l.gbps, 45.0, 1e-9);
	ck_assert_double_eq(l.lat_us, 20.0);
	trays.nvlink_domain_gpus = 0;	/* each tray its own domain */
	apart = pipette_cluster_create(names, 36, 4, NULL, &trays, NULL, 0, NULL);
	ck_assert_int_eq(pipette_cluster_domain_nodes(apart), 1);
	ck_assert_double_eq_tol(pipette_cluster_node_link(apart, 0, 1).gbps, 45.0, 1e-9);
	/* a domain that is not whole nodes is refused */
	trays.nvlink_domain_gpus = 6;
	ck_assert_ptr_null(pipette_cluster_create(names, 36, 4, NULL, &trays, NULL, 0, NULL));

	ck_assert_int_eq(pipette_model_preset("llama3-70b", &m, NULL), 0);
	pipette_config_init(&c);
	c.stack = pipette_stack_get(PIPETTE_STACK_MEGATRON);
	c.tp = 8;
	c.pp = 10;
	c.sequence_parallel = 1;
	c.seq_len = 8192;
	c.global_batch = 10;
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), 0);
	ck_assert_int_eq(pipette_time_estimate(t, &m, gb200, &c, rack, NULL, 0, &in, NULL), 0);
	ck_assert_int_eq(pipette_time_estimate(t, &m, &trays, &c, apart, NULL, 0, &out, NULL), 0);
	ck_assert_msg(in.tp_comm_s * 2 < out.tp_comm_s, "TP %.4f s in a domain, %.4f s across",
		      in.tp_comm_s, out.tp_comm_s);
	pipette_timer_destroy(t);
	pipette_cluster_destroy(rack);
	pipette_cluster_destroy(apart);
}
END_TEST

/* The simulated in-flight counts feed the memory estimate: 1F1B stage s
 * holds p - s micro-batches. */
START_TEST(test_inflight_from_simulation)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_cluster *cl = nominal(4, 8, "a100");
	struct pipette_time tm;
	const double *inf;
	int s;

	ck_assert_int_eq(pipette_model_preset("llama2-13b", &m, NULL), 0);
	pipette_config_init(&c);
	c.tp = 8;
	c.pp = 4;
	c.global_batch = 16;
	ck_assert_int_eq(pipette_time_estimate(t, &m, pipette_gpu_lookup("a100", NULL), &c, cl,
					       NULL, 0, &tm, NULL), 0);
	inf = pipette_timer_inflight(t);
	for (s = 0; s < 4; s++)
		ck_assert_double_eq(inf[s], 4 - s);
	pipette_timer_destroy(t);
	pipette_cluster_destroy(cl);
}
END_TEST

START_TEST(test_too_few_gpus)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_cluster *cl = nominal(1, 8, "a100");
	struct pipette_time tm;
	struct pipette_err err;

	ck_assert_int_eq(pipette_model_preset("llama2-7b", &m, NULL), 0);
	pipette_config_init(&c);
	c.dp = 16;
	c.global_batch = 16;
	ck_assert_int_eq(pipette_time_estimate(t, &m, pipette_gpu_lookup("a100", NULL), &c, cl,
					       NULL, 0, &tm, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "needs 16 GPUs, the cluster has 8"));
	pipette_timer_destroy(t);
	pipette_cluster_destroy(cl);
}
END_TEST

/* Optimus-CC what-ifs.  GPT-3 175B, t8 p8 d8 on 64 A100 nodes, full
 * recompute: the DP reduction of the first stage (2.9 GB of fp32 gradients
 * per GPU over 8 ranks on 22.5 GB/s NICs) outlasts its last backward and
 * is exposed.  PowerSGD at rank 128 shrinks it; compressing only stages
 * 0..2 gains as much, because the later stages finish earlier in 1F1B and
 * hide their reduction in the cooldown (Optimus-CC's selective stage
 * compression, --selective_grad_comp_way, megatron/mpu/initialize.py of
 * AIS-SNU/Optimus-CC @7f6437c).  Low-rank PP
 * gradients and the fused embedding sync each gain a little. */
START_TEST(test_compression)
{
	struct pipette_config c;
	struct pipette_cluster *cl = nominal(64, 8, "a100");
	struct pipette_time base, dp, dp3, pp, emb;
	struct pipette_err err;

	pipette_config_init(&c);
	c.tp = 8;
	c.pp = 8;
	c.dp = 8;
	c.global_batch = 256;
	c.recompute = PIPETTE_RECOMPUTE_FULL;
	iter("gpt3-175b", &c, cl, &base);
	ck_assert(base.dp_exposed_s > 0.1);
	ck_assert_int_eq(pipette_compression_parse("dp:128", &c.compress, &err), 0);
	iter("gpt3-175b", &c, cl, &dp);
	ck_assert(dp.dp_comm_s < base.dp_comm_s / 5);
	ck_assert(dp.iteration_s < base.iteration_s - 0.9 * base.dp_exposed_s);
	ck_assert_int_eq(pipette_compression_parse("dp:128:stages=3", &c.compress, &err), 0);
	iter("gpt3-175b", &c, cl, &dp3);
	ck_assert_double_eq_tol(dp3.iteration_s, dp.iteration_s, 0.01 * dp.iteration_s);
	ck_assert_int_eq(pipette_compression_parse("pp:16:epilogue", &c.compress, &err), 0);
	iter("gpt3-175b", &c, cl, &pp);
	ck_assert(pp.iteration_s < base.iteration_s);
	ck_assert(pp.pp_comm_s < base.pp_comm_s);
	ck_assert_int_eq(pipette_compression_parse("emb", &c.compress, &err), 0);
	iter("gpt3-175b", &c, cl, &emb);
	ck_assert(emb.embed_sync_s > 0 && emb.iteration_s <= base.iteration_s);
	pipette_cluster_destroy(cl);
}
END_TEST

START_TEST(test_compression_parse)
{
	struct pipette_compression k;
	struct pipette_err err;
	char buf[96];

	ck_assert_int_eq(pipette_compression_parse("pp:16:epilogue,dp:128:stages=3,emb", &k,
						   &err), 0);
	ck_assert_int_eq(k.pp_rank, 16);
	ck_assert_int_eq(k.pp_epilogue_only, 1);
	ck_assert_int_eq(k.dp_rank, 128);
	ck_assert_int_eq(k.dp_stages, 3);
	ck_assert_int_eq(k.fused_embedding, 1);
	pipette_compression_format(&k, buf, sizeof(buf));
	ck_assert_str_eq(buf, "pp:16:epilogue,dp:128:stages=3,emb");
	ck_assert_int_eq(pipette_compression_parse("pp:0", &k, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "--compress pp rank"));
	ck_assert_int_eq(pipette_compression_parse("dp:64:stage=2", &k, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "expected stages=K"));
	ck_assert_int_eq(pipette_compression_parse("tp:4", &k, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "'tp'"));
	ck_assert_int_eq(pipette_compression_parse("pp:16:all", &k, &err), -1);
	ck_assert_int_eq(pipette_compression_enabled(&k), 0);
}
END_TEST

/* Expert all-to-all: Mixtral, ep 4 inside one H100 node, t = 1, b = 1,
 * s = 4096.  Each MoE layer dispatches and combines T*topk hidden vectors
 * per rank forward, and again backward: S = 2 bytes x 4096 x 2 x 4096 =
 * 67,108,864 bytes per all-to-all.  NVLink 450 GB/s x 0.65 = 292.5 GB/s,
 * 10 us per step: 3*10us + (3/4)*S/292.5e9 = 30 + 172.07 = 202.07 us.
 * Four per layer, 32 layers, one micro-batch: 25.86 ms. */
START_TEST(test_expert_alltoall)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_cluster *cl = nominal(1, 8, "h100");
	struct pipette_time tm;
	struct pipette_err err;
	double one = 30e-6 + 0.75 * 67108864.0 / 292.5e9;

	ck_assert_int_eq(pipette_model_preset("mixtral-8x7b", &m, NULL), 0);
	pipette_config_init(&c);
	c.seq_len = 4096;
	c.dp = 4;
	c.ep = 4;
	c.global_batch = 4;
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), 0);
	ck_assert_msg(pipette_time_estimate(t, &m, pipette_gpu_lookup("h100", NULL), &c, cl,
					    NULL, 0, &tm, &err) == 0, "%s", err.msg);
	ck_assert_double_eq_tol(tm.ep_comm_s, 32 * 4 * one, 1e-9);
	/* On 2 nodes x 2 GPUs the EP group spans both nodes: a rank's one
	 * peer on its node takes S/4 over NVLink while the two on the other
	 * node take S/2 over the NIC (50 x 0.9 = 45 GB/s) at once, with the
	 * ring's largest latency (20 us) per step: 3*20us + S/2/45e9 =
	 * 805.7 us, 4.0x the NVLink figure. */
	pipette_cluster_destroy(cl);
	cl = nominal(2, 2, "h100");
	ck_assert_int_eq(pipette_time_estimate(t, &m, pipette_gpu_lookup("h100", NULL), &c, cl,
					       NULL, 0, &tm, &err), 0);
	ck_assert_double_eq_tol(tm.ep_comm_s, 32 * 4 * (60e-6 + 0.5 * 67108864.0 / 45e9), 1e-9);
	pipette_timer_destroy(t);
	pipette_cluster_destroy(cl);
}
END_TEST

/* EP overlap and the dispatcher, Mixtral on 2 nodes x 8 H100 (nemo), ep 8,
 * no pipeline, 8 micro-batches.  Combined 1F1B pairs each micro-batch's
 * forward with the previous one's backward: only the first forward and
 * the last backward run alone, so when a layer's exchanges are shorter
 * than its computation 1/m of them stays exposed and the rest is hidden;
 * the total is conserved.  DeepEP sends a token to the other node once:
 * top-2 over 2 nodes reaches 2(1 - 1/4) = 1.5 nodes on average, of which
 * 0.75 remote, against the all-to-all's 2 x 1/2 = 1 remote copy. */
START_TEST(test_ep_overlap_dispatcher)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_cluster *cl = nominal(2, 8, "h100");
	const struct pipette_gpu_spec *g = pipette_gpu_lookup("h100", NULL);
	struct pipette_time plain, ov, dee;
	struct pipette_err err;

	ck_assert_int_eq(pipette_model_preset("mixtral-8x7b", &m, NULL), 0);
	pipette_config_init(&c);
	c.stack = pipette_stack_get(PIPETTE_STACK_NEMO);
	c.seq_len = 4096;
	c.dp = 16;
	c.ep = 8;
	c.global_batch = 16 * 8;
	c.distributed_optimizer = 1;
	ck_assert_msg(pipette_config_check(&m, &c, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(pipette_time_estimate(t, &m, g, &c, cl, NULL, 0, &plain, &err), 0);
	c.moe.ep_overlap = 1;
	ck_assert_msg(pipette_config_check(&m, &c, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(pipette_time_estimate(t, &m, g, &c, cl, NULL, 0, &ov, &err), 0);
	ck_assert_double_eq_tol(ov.ep_comm_s, plain.ep_comm_s / 8, 1e-9);
	ck_assert_double_eq_tol(ov.ep_comm_s + ov.ep_hidden_s, plain.ep_comm_s, 1e-9);
	ck_assert(ov.iteration_s < plain.iteration_s);
	/* on 4 nodes of 4 GPUs the EP group of 8 spans two nodes */
	c.moe.ep_overlap = 0;
	c.moe.dispatcher = PIPETTE_DISPATCH_DEEPEP;
	ck_assert_msg(pipette_config_check(&m, &c, &err) == 0, "%s", err.msg);
	pipette_cluster_destroy(cl);
	cl = nominal(4, 4, "h100");	/* ep 8 = 2 nodes of 4 */
	ck_assert_int_eq(pipette_time_estimate(t, &m, g, &c, cl, NULL, 0, &dee, &err), 0);
	c.moe.dispatcher = PIPETTE_DISPATCH_ALLTOALL;
	ck_assert_int_eq(pipette_time_estimate(t, &m, g, &c, cl, NULL, 0, &plain, &err), 0);
	ck_assert_msg(dee.ep_comm_s / plain.ep_comm_s > 0.7 && dee.ep_comm_s / plain.ep_comm_s < 0.8,
		      "deepep %g alltoall %g", dee.ep_comm_s, plain.ep_comm_s);
	/* the overlap needs EP and, with a pipeline, the interleaved schedule */
	c.moe.ep_overlap = 1;
	c.pp = 2;
	c.dp = 8;
	c.global_batch = 8 * 8;
	ck_assert_int_ne(pipette_config_check(&m, &c, &err), 0);
	ck_assert(strstr(err.msg, "interleaved") != NULL);
	pipette_timer_destroy(t);
	pipette_cluster_destroy(cl);
}
END_TEST

/* One node of 8 H100 with a measured intra-node matrix, tp 8.  NCCL orders
 * the ring inside a node itself, so one slow pair (0-1 at 30 GB/s, the
 * rest 300) is routed around: every GPU still has two 300 GB/s links and
 * the TP time equals the uniform node's.  A GPU whose every link is slow
 * (GPU 0 at 30 GB/s to all) cannot be avoided: the ring runs at 30 GB/s. */
static struct pipette_cluster *node_with(double slow01, double slow0all)
{
	struct pipette_bwcache *bw = pipette_bwcache_create();
	struct pipette_bw_prov prov = { "test", "busbw", 1e8, 0 };
	const char *names[] = { "n1" };
	struct pipette_cluster *cl;
	int a, b;

	for (a = 0; a < 8; a++)
		for (b = 0; b < 8; b++) {
			double g = 300;

			if (a == b)
				continue;
			if ((a == 0 && b == 1) || (a == 1 && b == 0))
				g = slow01;
			if (a == 0 || b == 0)
				g = g < slow0all ? g : slow0all;
			ck_assert_int_eq(pipette_bwcache_set_intra(bw, "n1", a, b, g, 10, &prov,
								   NULL), 0);
		}
	cl = pipette_cluster_create(names, 1, 8, NULL, pipette_gpu_lookup("h100", NULL), bw,
				    0, NULL);
	pipette_bwcache_destroy(bw);
	ck_assert_ptr_nonnull(cl);
	return cl;
}

START_TEST(test_intra_node_ring)
{
	struct pipette_config c;
	struct pipette_cluster *uni = node_with(300, 300), *pair = node_with(30, 300);
	struct pipette_cluster *gpu0 = node_with(300, 30);
	struct pipette_time a, b, d;

	pipette_config_init(&c);
	c.tp = 8;
	c.global_batch = 1;
	iter("llama2-13b", &c, uni, &a);
	iter("llama2-13b", &c, pair, &b);
	iter("llama2-13b", &c, gpu0, &d);
	ck_assert_double_eq_tol(b.tp_comm_s, a.tp_comm_s, 1e-12);
	ck_assert(d.tp_comm_s > 5 * a.tp_comm_s);
	pipette_cluster_destroy(uni);
	pipette_cluster_destroy(pair);
	pipette_cluster_destroy(gpu0);
}
END_TEST

/* A seeded cluster of n nodes x 8 GPUs whose every link differs: node
 * links 10-50 GB/s and 2-8 us, GPU pairs 100-400 GB/s. */
static struct pipette_cluster *random_links(int n, uint64_t seed)
{
	struct pipette_cluster *cl = pipette_cluster_create_blank(
		n, 8, pipette_gpu_lookup("H100", NULL), (struct pipette_link){ 40, 5 }, NULL);
	int a, b, x;

	ck_assert_ptr_nonnull(cl);
	for (a = 0; a < n; a++)
		for (b = 0; b < n; b++)
			if (a != b)
				ck_assert_int_eq(pipette_cluster_set_node_link(cl, a, b,
					(struct pipette_link){ 10 + 40 * pipette_rng_unit(&seed),
							       2 + 6 * pipette_rng_unit(&seed) }), 0);
	for (x = 0; x < n; x++)
		for (a = 0; a < 8; a++)
			for (b = 0; b < 8; b++)
				if (a != b)
					pipette_cluster_set_intra_link(cl, x, a, b,
						(struct pipette_link){ 100 + 300 * pipette_rng_unit(&seed),
								       1 });
	return cl;
}

/* A timer that has estimated other placements (and so updates the links
 * it kept for the last one where a few ranks moved, or reads them afresh
 * where many did) gives exactly what a new timer gives, for every group
 * kind: TP, CP and DP rings, pipeline pairs around an interleaved
 * pipeline, expert rings, FSDP's shard and replica rings.  32 nodes of 8
 * GPUs: a node swap moves 16 of 256 ranks, which the timer updates (up to
 * a quarter of the ranks); a reshuffle moves most, which it reads afresh. */
/* A timer that kept what earlier estimates read (kept, on sigma) against
 * a new timer (on fresh_sigma: the same placement read another way): the
 * same estimate, bit for bit.  what: the case, for the message. */
static void same_as_new(struct pipette_timer *kept, const struct pipette_model *m,
			const struct pipette_gpu_spec *gpu, const struct pipette_config *c,
			const struct pipette_cluster *cl, const int *sigma, const int *fresh_sigma,
			const char *what)
{
	struct pipette_timer *fresh = pipette_timer_create();
	struct pipette_time a, b;
	struct pipette_err err;

	ck_assert_int_eq(pipette_time_estimate(kept, m, gpu, c, cl, sigma, 1, &a, &err), 0);
	ck_assert_int_eq(pipette_time_estimate(fresh, m, gpu, c, cl, fresh_sigma, 1, &b, &err), 0);
	ck_assert_msg(!memcmp(&a, &b, sizeof(a)), "%s: %.12g s, a new timer %.12g s", what,
		      a.iteration_s, b.iteration_s);
	pipette_timer_destroy(fresh);
}

START_TEST(test_mapped_estimates_reused)
{
	static const struct {
		const char *model;
		int tp, pp, dp, cp, ep, vpp, dp_shard;
		enum pipette_schedule_kind sched;
		enum pipette_stack_id stack;
	} cases[] = {
		{ "llama2-13b", 2, 4, 32, 1, 1, 1, 1, PIPETTE_SCHED_1F1B, PIPETTE_STACK_MEGATRON },
		{ "llama2-13b", 2, 4, 16, 2, 1, 2, 1, PIPETTE_SCHED_INTERLEAVED,
		  PIPETTE_STACK_MEGATRON },
		{ "mixtral-8x7b", 1, 2, 128, 1, 8, 1, 1, PIPETTE_SCHED_1F1B, PIPETTE_STACK_MEGATRON },
		{ "llama3-8b", 2, 2, 64, 1, 1, 1, 4, PIPETTE_SCHED_1F1B, PIPETTE_STACK_TORCHTITAN },
		/* tied embeddings: the embedding sync's 1-byte judgement of the
		 * last stage's link to the first, beside the pipeline's */
		{ "gpt-22b", 2, 4, 32, 1, 1, 2, 1, PIPETTE_SCHED_INTERLEAVED,
		  PIPETTE_STACK_MEGATRON },
	};
	struct pipette_cluster *cl = random_links(32, 42);
	struct pipette_timer *kept = pipette_timer_create();
	const struct pipette_gpu_spec *gpu = pipette_gpu_lookup("H100", NULL);
	uint64_t rng = 7;
	int sigma[256], i, step;

	for (i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
		struct pipette_config c;
		struct pipette_model m;
		struct pipette_err err;
		char what[32];

		pipette_config_init(&c);
		c.tp = cases[i].tp;
		c.pp = cases[i].pp;
		c.dp = cases[i].dp;
		c.cp = cases[i].cp;
		c.ep = cases[i].ep;
		c.vpp = cases[i].vpp;
		c.dp_shard = cases[i].dp_shard;
		c.schedule = cases[i].sched;
		c.stack = pipette_stack_get(cases[i].stack);
		c.seq_len = 4096;
		c.global_batch = 4L * c.dp;
		ck_assert_int_eq(pipette_model_preset(cases[i].model, &m, NULL), 0);
		ck_assert_msg(pipette_config_check(&m, &c, &err) == 0, "case %d: %s", i, err.msg);
		for (step = 0; step < 256; step++)
			sigma[step] = step;
		/* the identity placement read through sigma, as the default one
		 * is read without it (every group and link scanned) */
		snprintf(what, sizeof(what), "case %d, unmapped", i);
		same_as_new(kept, &m, gpu, &c, cl, sigma, NULL, what);
		for (step = 0; step < 40; step++) {
			int x = pipette_rng_below(&rng, 32), y = pipette_rng_below(&rng, 32), k, tmp;

			if (step % 10 == 9) {		/* many ranks: read afresh */
				for (k = 255; k > 0; k--) {
					int j = pipette_rng_below(&rng, k + 1);

					tmp = sigma[k];
					sigma[k] = sigma[j];
					sigma[j] = tmp;
				}
			} else if (step % 3 == 2) {	/* two GPUs of a node */
				y %= 8;
				tmp = sigma[x * 8 + y];
				sigma[x * 8 + y] = sigma[x * 8 + (y + 3) % 8];
				sigma[x * 8 + (y + 3) % 8] = tmp;
			} else {			/* two nodes' blocks */
				for (k = 0; k < 8; k++) {
					tmp = sigma[x * 8 + k];
					sigma[x * 8 + k] = sigma[y * 8 + k];
					sigma[y * 8 + k] = tmp;
				}
			}
			snprintf(what, sizeof(what), "case %d step %d", i, step);
			same_as_new(kept, &m, gpu, &c, cl, sigma, sigma, what);
		}
	}
	pipette_timer_destroy(kept);
	pipette_cluster_destroy(cl);
}
END_TEST

/* A DP ring of RING_TREE_MIN (64) members or more is kept edge by edge
 * on a mapped placement, and a move re-reads only the edges and nodes
 * next to the moved ranks (timing.c ring_update): after random moves
 * (single GPUs swapped between nodes, which splits nodes' members
 * unevenly, two GPUs of a node, two nodes' blocks, all at once) a timer
 * that kept the rings gives exactly what a new timer gives, which reads
 * every ring whole (ring_links).  One or two DP rings a stage, 64 to 512
 * members, on 64 nodes of 8 GPUs, so that the estimate's slowest ring
 * is the ring updated, and a slow GPU on some nodes, so that its bound
 * inside nodes counts. */
START_TEST(test_mapped_rings_kept)
{
	static const struct {
		int tp, pp, dp, cp, dp_shard;
		enum pipette_stack_id stack;
	} cases[] = {
		{ 1, 1, 512, 1, 1, PIPETTE_STACK_MEGATRON },
		{ 1, 2, 256, 1, 1, PIPETTE_STACK_MEGATRON },
		{ 2, 2, 64, 2, 1, PIPETTE_STACK_MEGATRON },
		{ 1, 2, 256, 1, 64, PIPETTE_STACK_TORCHTITAN },
	};
	struct pipette_cluster *cl = random_links(64, 11);
	struct pipette_timer *kept = pipette_timer_create();
	const struct pipette_gpu_spec *gpu = pipette_gpu_lookup("H100", NULL);
	uint64_t rng = 5;
	int sigma[512], i, step, k;

	/* one slow GPU on every third node (5-9 GB/s to the others, below
	 * every node link), so that a ring's bound inside the nodes it has
	 * two members or more on decides its flat ring too */
	for (i = 0; i < 64; i += 3)
		for (k = 0; k < 8; k++)
			if (k != i % 8) {
				struct pipette_link l = { 5 + 4 * pipette_rng_unit(&rng), 1 };

				pipette_cluster_set_intra_link(cl, i, i % 8, k, l);
				pipette_cluster_set_intra_link(cl, i, k, i % 8, l);
			}

	for (i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
		struct pipette_config c;
		struct pipette_model m;
		struct pipette_err err;
		char what[32];

		pipette_config_init(&c);
		c.tp = cases[i].tp;
		c.pp = cases[i].pp;
		c.dp = cases[i].dp;
		c.cp = cases[i].cp;
		c.dp_shard = cases[i].dp_shard;
		c.stack = pipette_stack_get(cases[i].stack);
		c.seq_len = 2048;
		c.global_batch = 2L * c.dp;
		ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
		ck_assert_msg(pipette_config_check(&m, &c, &err) == 0, "case %d: %s", i, err.msg);
		for (k = 0; k < 512; k++)
			sigma[k] = k;
		for (step = 0; step < 60; step++) {
			int x = pipette_rng_below(&rng, 512), y = pipette_rng_below(&rng, 512), tmp;

			if (step % 20 == 19) {		/* all at once: read afresh */
				for (k = 511; k > 0; k--) {
					int j = pipette_rng_below(&rng, k + 1);

					tmp = sigma[k];
					sigma[k] = sigma[j];
					sigma[j] = tmp;
				}
			} else if (step % 4 == 3) {	/* two nodes' blocks */
				for (k = 0; k < 8; k++) {
					tmp = sigma[x / 8 * 8 + k];
					sigma[x / 8 * 8 + k] = sigma[y / 8 * 8 + k];
					sigma[y / 8 * 8 + k] = tmp;
				}
			} else if (step % 4 == 2) {	/* two GPUs of a node */
				y = x / 8 * 8 + (x + 3) % 8;
				tmp = sigma[x];
				sigma[x] = sigma[y];
				sigma[y] = tmp;
			} else {			/* GPUs of other nodes */
				for (k = 0; k < 1 + step % 3; k++) {
					x = pipette_rng_below(&rng, 512);
					y = pipette_rng_below(&rng, 512);
					tmp = sigma[x];
					sigma[x] = sigma[y];
					sigma[y] = tmp;
				}
			}
			snprintf(what, sizeof(what), "case %d step %d", i, step);
			same_as_new(kept, &m, gpu, &c, cl, sigma, sigma, what);
		}
	}
	pipette_timer_destroy(kept);
	pipette_cluster_destroy(cl);
}
END_TEST

/* Under the default placement a timer that keeps each rank grid's links
 * (pipette_timer_cache_links) judges a stage's slowest group over the
 * groups no earlier one dominates, and remembers it for the next estimate
 * at the same message size (timing.c group_front, worst_group); a timer
 * that keeps nothing scans every group.  The two give the same estimate,
 * bit for bit, on random links (fronts of a few groups) and on nodes
 * whose NVLink rings are each faster but longer than the one before, so
 * that no node's TP group dominates another's (with tp 8, 80 per stage,
 * more than FRONT_MAX: scanned whole; with tp 4 and pp 2, a front of 40),
 * across configurations and micro-batch sizes in an order that comes
 * back to each grid at other sizes and at the same one.  On those nodes
 * (node x: 100 + 5x GB/s, 6 sqrt(x) us) the slowest TP-8 all-reduce of
 * llama2-13b's layer at sequence 4096 is node 79's at micro-batch 1,
 * node 1's at 2 and node 0's at 4 (14 lat + 1.75 B / bw, B = 2 T h). */
static struct pipette_cluster *antichain_links(int n)
{
	struct pipette_cluster *cl = random_links(n, 3);
	int x, a, b;

	for (x = 0; x < n; x++)
		for (a = 0; a < 8; a++)
			for (b = 0; b < 8; b++)
				if (a != b)
					pipette_cluster_set_intra_link(cl, x, a, b,
						(struct pipette_link){ 100 + 5 * x, 6 * sqrt(x) });
	return cl;
}

START_TEST(test_default_groups_cached)
{
	static const struct { int nodes, tp, pp, dp, cp, mb; } cases[] = {
		{ 32, 2, 4, 32, 1, 1 }, { 32, 2, 4, 32, 1, 2 }, { 32, 4, 2, 16, 2, 1 },
		{ 32, 2, 4, 32, 1, 1 }, { 32, 8, 2, 16, 1, 1 }, { 32, 4, 2, 16, 2, 2 },
		{ 32, 2, 4, 32, 1, 4 }, { 32, 2, 4, 32, 1, 4 }, { 80, 8, 1, 80, 1, 1 },
		{ 80, 8, 1, 80, 1, 2 }, { 80, 8, 1, 80, 1, 4 }, { 80, 8, 1, 80, 1, 1 },
		{ 80, 4, 2, 80, 1, 1 }, { 80, 4, 2, 80, 1, 2 }, { 80, 4, 2, 80, 1, 4 },
	};
	struct pipette_cluster *cl[2] = { random_links(32, 11), antichain_links(80) };
	struct pipette_timer *kept[2] = { pipette_timer_create(), pipette_timer_create() };
	const struct pipette_gpu_spec *gpu = pipette_gpu_lookup("H100", NULL);
	struct pipette_model m;
	int i;

	ck_assert_int_eq(pipette_model_preset("llama2-13b", &m, NULL), 0);
	pipette_timer_cache_links(kept[0], cl[0]);
	pipette_timer_cache_links(kept[1], cl[1]);
	for (i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
		int k = cases[i].nodes == 80;
		struct pipette_config c;
		struct pipette_err err;
		char what[32];

		pipette_config_init(&c);
		c.tp = cases[i].tp;
		c.pp = cases[i].pp;
		c.dp = cases[i].dp;
		c.cp = cases[i].cp;
		c.micro_batch = cases[i].mb;
		c.distributed_optimizer = i % 2;
		c.seq_len = 4096;
		c.global_batch = 8L * c.dp;
		ck_assert_msg(pipette_config_check(&m, &c, &err) == 0, "case %d: %s", i, err.msg);
		snprintf(what, sizeof(what), "case %d", i);
		same_as_new(kept[k], &m, gpu, &c, cl[k], NULL, NULL, what);
	}
	for (i = 0; i < 2; i++) {
		pipette_timer_destroy(kept[i]);
		pipette_cluster_destroy(cl[i]);
	}
}
END_TEST

/* The same for the pipeline's point-to-point links: a timer that keeps
 * the grid's links judges a row of stage-to-stage links over those that
 * can be its slowest (timing.c p2p_front) and reads a row whose front
 * passes P2P_FRONT_MAX (256) whole; a new timer reads every link.  Nodes
 * of one GPU, pp 2: link x -> x + n/2 (and back) of 100 + x GB/s and 2 +
 * 15 x us, each faster but longer than the one before, so that every
 * link of a row can be its slowest at some message size: at 200 links
 * per row a front of 200 (kept), at 300 none.  The estimates agree bit
 * for bit at micro-batches of 1, 2 and 4 (llama2-13b's activations at
 * sequence 4096, 84 MB a micro-batch: one more GB/s saves 8.4 us at
 * 100 GB/s and mb 1, less than 15 us, so the last link is the slowest;
 * at mb 4 one in the middle). */
START_TEST(test_default_p2p_cached)
{
	static const int rows[] = { 200, 300 };
	const struct pipette_gpu_spec *gpu = pipette_gpu_lookup("H100", NULL);
	struct pipette_model m;
	int i, x, mb;

	ck_assert_int_eq(pipette_model_preset("llama2-13b", &m, NULL), 0);
	for (i = 0; i < 2; i++) {
		int n = 2 * rows[i];
		struct pipette_cluster *cl = pipette_cluster_create_blank(
			n, 1, gpu, (struct pipette_link){ 40, 5 }, NULL);
		struct pipette_timer *kept = pipette_timer_create();

		ck_assert_ptr_nonnull(cl);
		for (x = 0; x < rows[i]; x++) {
			struct pipette_link l = { 100 + x, 2 + 15.0 * x };

			ck_assert_int_eq(pipette_cluster_set_node_link(cl, x, x + rows[i], l), 0);
			ck_assert_int_eq(pipette_cluster_set_node_link(cl, x + rows[i], x, l), 0);
		}
		pipette_timer_cache_links(kept, cl);
		for (mb = 1; mb <= 4; mb *= 2) {
			struct pipette_config c;
			struct pipette_err err;
			char what[32];

			pipette_config_init(&c);
			c.pp = 2;
			c.dp = rows[i];
			c.micro_batch = mb;
			c.seq_len = 4096;
			c.global_batch = 8L * c.dp;
			ck_assert_msg(pipette_config_check(&m, &c, &err) == 0, "%s", err.msg);
			snprintf(what, sizeof(what), "%d links, mb %d", rows[i], mb);
			same_as_new(kept, &m, gpu, &c, cl, NULL, NULL, what);
		}
		pipette_timer_destroy(kept);
		pipette_cluster_destroy(cl);
	}
}
END_TEST

/* CPU offloading's schedule (timing.c offload_exposed) on Llama 3 8B, one
 * GB200 (NVLink-C2C at 450 GB/s one way), micro-batch 1 of 8192 tokens,
 * where one layer's copy x (its activations over the link) is shorter
 * than its forward: with 16 of the 32 layers offloaded, 16 sets stay on
 * the GPU and every copy hides (nothing added); with 31, one set stays:
 * the forward still hides each copy behind the next layer, but each of
 * the 31 reloads waits for the backward before it and the backward waits
 * for it, 31 x added to the backward (TE's cpu_offloading.rst:146-148:
 * "compute and transfers cannot overlap"). */
static void offload_run(const char *opts, struct pipette_time *tm, double *x)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_stack st;
	struct pipette_err err;
	struct pipette_timer *t = pipette_timer_create();
	struct pipette_cluster *cl = nominal(1, 4, "gb200");
	const struct pipette_gpu_spec *g = pipette_gpu_lookup("gb200", NULL);

	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	ck_assert_int_eq(pipette_stack_resolve("megatron-bridge", opts, &st, &err), 0);
	pipette_config_init(&c);
	c.stack = &st;
	c.seq_len = 8192;
	c.global_batch = 1;
	ck_assert_msg(pipette_config_check(&m, &c, &err) == 0, "%s", err.msg);
	ck_assert_msg(pipette_time_estimate(t, &m, g, &c, cl, NULL, 0, tm, &err) == 0, "%s",
		      err.msg);
	*x = st.offload_layers ? pipette_memory_offloaded_activations(&m, &c) / st.offload_layers /
				 (g->host_gbps * 1e9) : 0;
	pipette_timer_destroy(t);
	pipette_cluster_destroy(cl);
}

START_TEST(test_offload_schedule)
{
	struct pipette_time base, half, most;
	double x0, x;

	offload_run("", &base, &x0);
	ck_assert_double_eq(base.offload_exposed_s, 0.0);
	offload_run("cpu_offload=16", &half, &x);
	ck_assert_double_eq_tol(half.stage_f_s, base.stage_f_s, 1e-12);
	ck_assert_double_eq_tol(half.stage_b_s, base.stage_b_s, 1e-12);
	ck_assert_double_eq_tol(half.offload_exposed_s, 0.0, 1e-12);
	offload_run("cpu_offload=31", &most, &x);
	ck_assert(x > 0 && x < base.stage_f_s / 32);	/* the case the comment derives */
	ck_assert_double_eq_tol(most.stage_f_s, base.stage_f_s, 1e-12);
	ck_assert_double_eq_tol(most.stage_b_s - base.stage_b_s, 31 * x, 1e-9);
	ck_assert_double_eq_tol(most.offload_exposed_s, 31 * x, 1e-9);
	ck_assert_double_eq_tol(most.iteration_s - base.iteration_s, 31 * x, 1e-9);
}
END_TEST

/* Context parallelism's ring, by hand on H100's measured attention kernel
 * (Llama 3 8B, TP 1, sequence 8192, CP 4: 2048 tokens a rank): one
 * forward kernel and 4 backward ones of a quarter of the FLOPs each in
 * Transformer Engine's ring (its forward's steps overlap on two streams),
 * 4 and 4 in PyTorch's; the query-row cost once; the merges' bytes at
 * HBM_EFF 0.9 of the HBM rate (timing.c, pipette_attention_times). */
static void ring_by_hand(enum pipette_stack_id id, int cp, int fsteps, double out_bytes,
			 double grad_bytes)
{
	const struct pipette_gpu_spec *g = pipette_gpu_lookup("h100", NULL);
	const struct pipette_kernels *k = g->kernels;
	struct pipette_model m;
	struct pipette_config c;
	double T = 8192.0 / cp, flops, rows, rate, bw = g->hbm_gbps * 1e9 * 0.9, f, b, ef, eb;

	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	pipette_config_init(&c);
	c.stack = pipette_stack_get(id);
	c.attention = c.stack->attention;
	c.cp = cp;
	c.seq_len = 8192;
	rate = (c.stack->kernel_share > 0 ? c.stack->kernel_share : k->step_share) *
	       (1 - c.stack->comm_sm_share);
	flops = 2.0 * T * 8192 * (4096 + 4096) * 0.5;	/* causal QK^T and AV */
	rows = T * 32;
	ef = fsteps * pipette_kernel_attn_s(k, 0, 0, flops / fsteps, rows / fsteps) / rate +
	     out_bytes * T * 4096 / bw;
	eb = cp * pipette_kernel_attn_s(k, 1, 0, 2.5 * flops / cp, rows / cp) / rate +
	     grad_bytes * T * (4096 + 2 * 1024) / bw;
	pipette_attention_times(&m, g, &c, T, &f, &b);
	ck_assert_msg(fabs(f / ef - 1) < 1e-12, "forward %g s, by hand %g s", f, ef);
	ck_assert_msg(fabs(b / eb - 1) < 1e-12, "backward %g s, by hand %g s", b, eb);
}

START_TEST(test_cp_ring)
{
	const struct pipette_kernels *k = pipette_gpu_lookup("h100", NULL)->kernels;

	ring_by_hand(PIPETTE_STACK_MEGATRON, 1, 1, 0, 0);
	ring_by_hand(PIPETTE_STACK_TORCHTITAN, 1, 1, 0, 0);
	/* TE: 10 cp + 2 bytes of output corrections, 6 (cp - 1) of sums */
	ring_by_hand(PIPETTE_STACK_MEGATRON, 4, 1, 42, 18);
	ring_by_hand(PIPETTE_STACK_NEMO, 2, 1, 22, 6);
	/* PyTorch: 18 (cp - 1) + 12 and 10 cp + 6 bytes, every step a kernel */
	ring_by_hand(PIPETTE_STACK_TORCHTITAN, 4, 4, 66, 46);
	/* the ring costs more than one kernel of the same FLOPs: its backward
	 * pays cp - 1 more fixed costs at least */
	{
		const struct pipette_gpu_spec *g = pipette_gpu_lookup("h100", NULL);
		struct pipette_model m;
		struct pipette_config c;
		double f1, b1, f4, b4;

		ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
		pipette_config_init(&c);
		c.stack = pipette_stack_get(PIPETTE_STACK_MEGATRON);
		c.attention = c.stack->attention;
		c.seq_len = 8192;
		c.micro_batch = 4;	/* 4 x 8192 / 4 tokens a rank, as below */
		c.cp = 4;
		pipette_attention_times(&m, g, &c, 8192, &f4, &b4);
		c.cp = 1;
		c.micro_batch = 1;
		pipette_attention_times(&m, g, &c, 8192, &f1, &b1);
		ck_assert(f4 > f1);
		ck_assert(b4 - b1 > 3 * k->attn_bwd.t0_s);
	}
	/* On the efficiency curve (no measured kernels: B200), each backward
	 * step is 2.5x its forward kernel: the ring's backward kernels cost
	 * 2.5x the forward's one kernel and a little more (smaller kernels
	 * run less efficiently on the curve), not cp times that */
	{
		const struct pipette_gpu_spec *g = pipette_gpu_lookup("b200", NULL);
		double T = 2048, bw = g->hbm_gbps * 1e9 * 0.9, f, b, fk, bk;
		struct pipette_model m;
		struct pipette_config c;

		ck_assert_ptr_null(g->kernels);
		ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
		pipette_config_init(&c);
		c.stack = pipette_stack_get(PIPETTE_STACK_MEGATRON);
		c.attention = c.stack->attention;
		c.seq_len = 8192;
		c.cp = 4;
		pipette_attention_times(&m, g, &c, T, &f, &b);
		fk = f - 42 * T * 4096 / bw;
		bk = b - 18 * T * (4096 + 2 * 1024) / bw;
		ck_assert_msg(bk >= 2.5 * fk * (1 - 1e-12) && bk < 2.5 * fk * 1.2,
			      "backward kernels %g s, forward kernel %g s", bk, fk);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("timing");
	TCase *tc = tcase_create("timing");

	tcase_add_test(tc, test_offload_schedule);
	tcase_add_test(tc, test_cp_ring);

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_collectives);
	tcase_add_test(tc, test_model_flops);
	tcase_add_test(tc, test_breakdown_identities);
	tcase_add_test(tc, test_pipeline_bubble);
	tcase_add_test(tc, test_tp_across_nodes);
	tcase_add_test(tc, test_directions);
	tcase_add_test(tc, test_calibration_guard);
	tcase_add_test(tc, test_kernel_scale);
	tcase_add_test(tc, test_nvlink_domain);
	tcase_add_test(tc, test_inflight_from_simulation);
	tcase_add_test(tc, test_too_few_gpus);
	tcase_add_test(tc, test_compression);
	tcase_add_test(tc, test_compression_parse);
	tcase_add_test(tc, test_expert_alltoall);
	tcase_add_test(tc, test_ep_overlap_dispatcher);
	tcase_add_test(tc, test_intra_node_ring);
	tcase_add_test(tc, test_mapped_estimates_reused);
	tcase_add_test(tc, test_mapped_rings_kept);
	tcase_add_test(tc, test_default_groups_cached);
	tcase_add_test(tc, test_default_p2p_cached);
	tcase_add_test(tc, test_host_floor);
	tcase_add_test(tc, test_async_tp);
	tcase_add_test(tc, test_bf16_end_layers_timed);
	suite_add_tcase(s, tc);
	return check_run(s);
}
