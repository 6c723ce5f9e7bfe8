/* Unit tests: the per-GPU memory estimator. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/config.h"
#include "inputs/hardware.h"
#include "estimate/memory.h"
#include "inputs/model.h"
#include "estimate/schedule.h"
#include "inputs/stack.h"
#include "check_run.h"


static void korthikanti_config(const char *name, int tp, int pp, int vpp, int mb,
			       long gbs, struct pipette_model *m, struct pipette_config *c)
{
	ck_assert_int_eq(pipette_model_preset(name, m, NULL), 0);
	pipette_config_init(c);
	c->tp = tp;
	c->pp = pp;
	c->vpp = vpp;
	c->schedule = vpp > 1 ? PIPETTE_SCHED_INTERLEAVED : PIPETTE_SCHED_1F1B;
	c->micro_batch = mb;
	c->global_batch = gbs;
	c->seq_len = 2048;
	c->attention = PIPETTE_ATTN_UNFUSED;	/* Megatron of 2022: no FlashAttention */
	ck_assert_int_eq(pipette_config_check(m, c, NULL), 0);
}

/* Weights + optimizer per GPU of a stage holding only transformer layers,
 * the quantity of Korthikanti et al. Fig. 1: 18 bytes x transformer
 * parameters / (t*p).  A middle stage has no embedding; with p = 1 the
 * embedding (V*h/t) and the final LayerNorm (2h) are taken out. */
static double layer_states(const struct pipette_model *m, const struct pipette_config *c)
{
	struct pipette_stage_memory st;
	int stage = c->pp > 2 ? 1 : 0;
	double total;

	pipette_memory_stage(m, NULL, c, stage, -1.0, &st);
	total = st.params_bytes + st.grads_bytes + st.optimizer_bytes;
	if (c->pp == 1)
		total -= 18.0 * ((double)m->vocab * m->hidden / c->tp + 2.0 * m->hidden);
	return total;
}

/* First-stage activations without the embedding terms: transformer layers
 * of stage 0 times its in-flight micro-batches. */
static double first_stage_layer_activations(const struct pipette_model *m,
					    const struct pipette_config *c)
{
	double per = 0, inflight = pipette_schedule_inflight(c->schedule, c->pp,
		pipette_config_chunks(c), pipette_config_microbatches(c), 0);
	int l;

	for (l = 0; l < pipette_config_stage_layers(m, c, 0); l++)
		per += pipette_memory_layer_activations(m, c, l);
	return per * inflight;
}

/* A low-precision recipe with BF16 end layers: a stage holding both kinds
 * stores each layer as its own kind (the BF16 layers save BF16 inputs),
 * not every layer as its first (test_timing: the same for its time). */
START_TEST(test_bf16_end_layers_in_stage)
{
	const struct pipette_gpu_spec *g = pipette_gpu_lookup("h100", NULL);
	struct pipette_stack st;
	struct pipette_model m;
	struct pipette_config c, bf;
	struct pipette_stage_memory lowp, mixed;
	int l;
	double per = 0;

	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	ck_assert_int_eq(pipette_stack_resolve("megatron", "", &st, NULL), 0);
	pipette_config_init(&c);
	c.stack = &st;
	c.global_batch = 1;
	c.seq_len = 4096;
	c.precision = PIPETTE_PREC_FP8_CURRENT;
	pipette_memory_stage(&m, g, &c, 0, -1.0, &lowp);
	bf = c;
	bf.bf16_last = 4;
	pipette_memory_stage(&m, g, &bf, 0, -1.0, &mixed);
	for (l = 0; l < m.layers; l++)
		per += pipette_memory_layer_activations(&m, &bf, l) -
		       pipette_memory_layer_activations(&m, &c, l);
	ck_assert(per > 0);	/* the 4 BF16 layers save more */
	ck_assert_double_eq_tol(mixed.activations_bytes - lowp.activations_bytes, per,
				1e-6 * per);
}
END_TEST

/* Korthikanti et al. (MLSys'23) Fig. 1, as transcribed in Calculon
 * (calculon-ai/calculon @caa4b11 calculon/llm/validation.py:61-97),
 * s = 2048, a in heads, t = 8:
 *   weights+optimizer = 18 * 12h^2 * L / (t*p) bytes;
 *   activations "none" = sbhL(10 + 24/t + 5as/(ht)) * (1 + (p-1)/(pv));
 *   activations "seq+sel" = 34 sbhL/t * (1 + (p-1)/(pv)).
 * e.g. 22B: s*b*h = 2048*4*6144 = 50,331,648; 10 + 3 + 5*64*2048/(6144*8)
 * = 26.333; x48 layers = 63,619,203,072 B = 59.25 GiB.  175B (p8 v3):
 * factor 1 + 7/24; 530B (p35 v3, 3 layers per stage): 1 + 34/105; 1T:
 * p = 64, v = 1, m = 512 -> the first stage holds 64 micro-batches of 2
 * layers = L layers' worth.  Our layer parameters include biases and
 * LayerNorms (12h^2 + 13h per layer): +13/(12h) < 0.02%. */
START_TEST(test_korthikanti_fig1)
{
	static const struct {
		const char *model;
		int pp, vpp, mb;
		long gbs;
		double states_gib, act_none_gib, act_seqsel_gib;
	} cases[] = {
		{ "gpt-22b", 1, 1, 4, 4, 45.5625, 59.25, 9.5625 },
		{ "gpt3-175b", 8, 3, 1, 64, 45.5625, 66.84375, 12.3515625 },
		{ "gpt-530b", 35, 3, 1, 280, 31.640625, 114.0234375, 23.076171875 },
		{ "gpt-1t", 64, 1, 1, 512, 32.958984375, 131.25, 26.5625 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pipette_model m;
		struct pipette_config c;
		double got;

		korthikanti_config(cases[i].model, 8, cases[i].pp, cases[i].vpp, cases[i].mb,
				   cases[i].gbs, &m, &c);
		got = layer_states(&m, &c) / PIPETTE_GIB;
		ck_assert_msg(fabs(got / cases[i].states_gib - 1) < 0.005,
			      "%s states %.4f vs %.4f", cases[i].model, got, cases[i].states_gib);
		got = first_stage_layer_activations(&m, &c) / PIPETTE_GIB;
		ck_assert_msg(fabs(got / cases[i].act_none_gib - 1) < 0.005,
			      "%s act none %.4f vs %.4f", cases[i].model, got,
			      cases[i].act_none_gib);
		c.sequence_parallel = 1;
		c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
		got = first_stage_layer_activations(&m, &c) / PIPETTE_GIB;
		ck_assert_msg(fabs(got / cases[i].act_seqsel_gib - 1) < 0.005,
			      "%s act seq+sel %.4f vs %.4f", cases[i].model, got,
			      cases[i].act_seqsel_gib);
	}
}
END_TEST

/* Korthikanti Table 2 variants for one GPT layer, 22B, t = 8, b = 4:
 * TP only: sbh(10 + 24/t + 5as/(ht)); TP+SP: sbh/t (34 + 5as/h);
 * TP+selective: sbh(10 + 24/t); full recompute: 2sbh (2sbh/t with SP). */
START_TEST(test_korthikanti_table2)
{
	struct pipette_model m;
	struct pipette_config c;
	double s = 2048, b = 4, h = 6144, a = 64, t = 8, sbh = s * b * h;

	korthikanti_config("gpt-22b", 8, 1, 1, 4, 4, &m, &c);
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0),
				sbh * (10 + 24 / t + 5 * a * s / (h * t)), 1);
	c.sequence_parallel = 1;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0),
				sbh / t * (34 + 5 * a * s / h), 1);
	c.sequence_parallel = 0;
	c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0),
				sbh * (10 + 24 / t), 1);
	c.recompute = PIPETTE_RECOMPUTE_FULL;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0), 2 * sbh, 1);
	c.sequence_parallel = 1;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0), 2 * sbh / t, 1);
}
END_TEST

/* Fujii et al.'s activations (sbh(12 + 4k/a + 8h_ffn/h) bytes per layer in
 * the author's memory-estimator.js @837b9f48, okoge-kaz/okoge-kaz.github.io)
 * for Llama-3-8B: k/a = 8/32, h_ffn/h = 3.5:
 * 12 + 4/4 + 28 = 41 sbh bytes per layer with TP+SP, divided by t*c.
 * Without SP the 8sbh of norm, QKV and MLP inputs stay replicated:
 * sbh(8 + 33/t).  CP divides s. */
/* The attention kernel: fused (FlashAttention) keeps no s x s scores, for
 * a GELU model too; unfused adds exactly 5as^2b/t per layer. */
START_TEST(test_attention_kernel)
{
	struct pipette_model m;
	struct pipette_config c;
	double s = 2048, b = 4, a = 64, t = 8, flash, unfused;

	korthikanti_config("gpt-22b", 8, 1, 1, 4, 4, &m, &c);
	unfused = pipette_memory_layer_activations(&m, &c, 0);
	c.attention = PIPETTE_ATTN_FLASH;
	flash = pipette_memory_layer_activations(&m, &c, 0);
	ck_assert_double_eq_tol(unfused - flash, 5 * a * s * s * b / t, 1);
	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	c.attention = PIPETTE_ATTN_UNFUSED;
	unfused = pipette_memory_layer_activations(&m, &c, 0);
	c.attention = PIPETTE_ATTN_FLASH;
	flash = pipette_memory_layer_activations(&m, &c, 0);
	ck_assert_double_eq_tol(unfused - flash, 5 * 32 * s * s * b / t, 1);
}
END_TEST

START_TEST(test_fujii_llama)
{
	struct pipette_model m;
	struct pipette_config c;
	double s = 8192, h = 4096, sbh = s * 1 * h;

	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	pipette_config_init(&c);
	c.seq_len = 8192;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0), 41 * sbh, 1);
	c.tp = 4;
	c.sequence_parallel = 1;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0), 41 * sbh / 4, 1);
	c.sequence_parallel = 0;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0),
				sbh * (8 + 33.0 / 4), 1);
	c.sequence_parallel = 1;
	c.cp = 2;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0),
				41 * sbh / 8, 1);
	/* Selective recompute saves nothing with FlashAttention. */
	c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0),
				41 * sbh / 8, 1);
}
END_TEST

/* A whole stage by hand: Llama-3-8B, t = p = d = 1, b = 1, s = 8192:
 * params 8,030,261,248 x (2 + 4 + 12) bytes; activations 32 x 41 sbh +
 * logits 4 s (h + V) + int64 token ids 8 s = 44,023,414,784 + 4,336,910,336
 * + 65,536; other = 500 MiB of
 * CUDA context + 5% of the activations (no NCCL communicator). */
START_TEST(test_stage_by_hand)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_memory mem;
	const struct pipette_gpu_spec *g = pipette_gpu_lookup("h100", NULL);
	double act = 32 * 41.0 * 8192 * 4096 + 4.0 * 8192 * (4096 + 128256) + 8.0 * 8192;

	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	pipette_config_init(&c);
	c.seq_len = 8192;
	pipette_memory_estimate(&m, g, &c, 0.8, NULL, NULL, &mem);
	ck_assert_double_eq_tol(mem.peak.params_bytes, 2 * 8030261248.0, 1);
	ck_assert_double_eq_tol(mem.peak.grads_bytes, 4 * 8030261248.0, 1);
	ck_assert_double_eq_tol(mem.peak.optimizer_bytes, 12 * 8030261248.0, 1);
	ck_assert_double_eq_tol(mem.peak.activations_bytes, act, 1);
	ck_assert_double_eq_tol(mem.peak.other_bytes, 500.0 * 1048576 + 0.05 * act, 1);
	ck_assert(!mem.fits);	/* 144.5 GB of states alone */
	ck_assert_double_eq(mem.limit_bytes, 0.8 * g->hbm_bytes);
}
END_TEST

/* Megatron: 6 + 12/d bytes per parameter with the distributed optimizer. */
START_TEST(test_distributed_optimizer)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_stage_memory a, b;

	ck_assert_int_eq(pipette_model_preset("llama2-7b", &m, NULL), 0);
	pipette_config_init(&c);
	c.dp = 8;
	c.global_batch = 8;
	pipette_memory_stage(&m, NULL, &c, 0, -1, &a);
	c.distributed_optimizer = 1;
	pipette_memory_stage(&m, NULL, &c, 0, -1, &b);
	ck_assert_double_eq_tol(b.optimizer_bytes, a.optimizer_bytes / 8, 1);
	ck_assert_double_eq_tol((b.params_bytes + b.grads_bytes + b.optimizer_bytes) /
				b.params_bytes * 2, 6 + 12.0 / 8, 1e-9);
}
END_TEST

/* 1F1B: stage s of p holds min(m, p - s) micro-batches; the first stage
 * therefore has the peak, and the last stage adds the logits. */
START_TEST(test_pipeline_stages)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_stage_memory st[4];
	struct pipette_memory mem;
	int s;

	ck_assert_int_eq(pipette_model_preset("llama2-13b", &m, NULL), 0);
	pipette_config_init(&c);
	c.pp = 4;
	c.global_batch = 8;
	pipette_memory_estimate(&m, pipette_gpu_lookup("a100", NULL), &c, 0.8, NULL, st, &mem);
	for (s = 0; s < 4; s++) {
		ck_assert_int_eq(st[s].layers, 10);
		ck_assert_double_eq(st[s].inflight, 4 - s);
	}
	ck_assert_int_eq(mem.peak_stage, 0);
	c.global_batch = 2;	/* m = 2 < p */
	pipette_memory_estimate(&m, pipette_gpu_lookup("a100", NULL), &c, 0.8, NULL, st, &mem);
	ck_assert_double_eq(st[0].inflight, 2);
	ck_assert_double_eq(st[3].inflight, 1);
	/* Uneven split: 7 + 13 + 13 + 7. */
	c.global_batch = 8;
	c.first_stage_layers = 7;
	c.last_stage_layers = 7;
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), 0);
	pipette_memory_estimate(&m, pipette_gpu_lookup("a100", NULL), &c, 0.8, NULL, st, &mem);
	ck_assert_int_eq(st[0].layers, 7);
	ck_assert_int_eq(st[1].layers, 13);
	ck_assert_int_eq(st[3].layers, 7);
	ck_assert_int_eq(mem.peak_stage, 1);
	/* Caller-provided in-flight figures (from a schedule simulation). */
	{
		double inflight[4] = { 1, 1, 1, 1 };
		struct pipette_stage_memory one[4];

		pipette_memory_estimate(&m, pipette_gpu_lookup("a100", NULL), &c, 0.8,
					inflight, one, &mem);
		ck_assert_double_eq(one[1].inflight, 1);
		ck_assert(one[1].activations_bytes < st[1].activations_bytes);
	}
}
END_TEST

/* Experts are sharded by EP: Mixtral with ep 8 keeps 1 of 8 experts. */
START_TEST(test_moe_params)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_stage_memory a, b;
	double expert_params = 32.0 * 8 * 3 * 4096 * 14336;

	ck_assert_int_eq(pipette_model_preset("mixtral-8x7b", &m, NULL), 0);
	pipette_config_init(&c);
	c.dp = 8;
	c.global_batch = 8;
	pipette_memory_stage(&m, NULL, &c, 0, -1, &a);
	c.ep = 8;
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), 0);
	pipette_memory_stage(&m, NULL, &c, 0, -1, &b);
	ck_assert_double_eq_tol(a.params_bytes - b.params_bytes,
				2 * expert_params * 7 / 8, 16);
}
END_TEST

/* MoE activations of one Mixtral layer (k/a = 8/32, top-2 of 8 experts,
 * expert FFN 14336), t = 1, no SP, s = 4096, b = 1, per token:
 *   replicated inputs 2h (QKV) + 2h (MLP) + 4h (norms)    =  32,768
 *   Q 2qw + K,V 4kvw + attention output 2qw = 4*4096 + 4*1024 = 20,480
 *   routed tokens: topk * (2h input copy + 4 tensors x 2 bytes x 14336)
 *     = 2 * (8,192 + 114,688)                               = 245,760
 *   router logits in fp32: 8 experts x 4 bytes               =      32
 * = 299,040 bytes per token; x 4096 tokens. */
START_TEST(test_moe_activations)
{
	struct pipette_model m;
	struct pipette_config c;

	ck_assert_int_eq(pipette_model_preset("mixtral-8x7b", &m, NULL), 0);
	pipette_config_init(&c);
	c.seq_len = 4096;
	c.dp = 4;
	c.ep = 4;
	c.global_batch = 4;
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), 0);
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0), 4096.0 * 299040, 1);
}
END_TEST

/* Expert optimizer states shard over the expert-data-parallel group,
 * edp = dp*cp*tp/(ep*etp) (Megatron theoretical_memory_usage.py:298-303):
 * Mixtral, dp 8, ep 4, distributed optimizer: edp = 2, so per GPU the
 * experts' 12 bytes/param are halved while dense ones are divided by 8. */
START_TEST(test_moe_optimizer_sharding)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_stage_memory st;
	double expert = 32.0 * 8 * 3 * 4096 * 14336 / 4;	/* ep 4 */
	double dense;

	ck_assert_int_eq(pipette_model_preset("mixtral-8x7b", &m, NULL), 0);
	pipette_config_init(&c);
	c.dp = 8;
	c.ep = 4;
	c.global_batch = 8;
	c.distributed_optimizer = 1;
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), 0);
	pipette_memory_stage(&m, NULL, &c, 0, -1, &st);
	dense = st.params_bytes / 2 - expert;
	ck_assert_double_eq_tol(st.optimizer_bytes, 12 * (dense / 8 + expert / 2), 64);
}
END_TEST

START_TEST(test_config_errors)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_err err;

	ck_assert_int_eq(pipette_model_preset("llama2-7b", &m, NULL), 0);
	pipette_config_init(&c);
	c.tp = 3;
	ck_assert_int_eq(pipette_config_check(&m, &c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "--tp 3 does not divide"));
	pipette_config_init(&c);
	c.pp = 33;
	ck_assert_int_eq(pipette_config_check(&m, &c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "--pp 33 exceeds"));
	pipette_config_init(&c);
	c.pp = 3;
	ck_assert_int_eq(pipette_config_check(&m, &c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "do not divide into pp 3"));
	pipette_config_init(&c);
	c.dp = 4;
	c.micro_batch = 2;
	c.global_batch = 12;
	ck_assert_int_eq(pipette_config_check(&m, &c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a multiple of dp 4 x micro-batch 2"));
	pipette_config_init(&c);
	c.ep = 2;
	ck_assert_int_eq(pipette_config_check(&m, &c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "has none"));
	pipette_config_init(&c);
	c.schedule = PIPETTE_SCHED_INTERLEAVED;
	c.vpp = 2;
	c.pp = 4;
	c.global_batch = 6;
	ck_assert_int_eq(pipette_config_check(&m, &c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "multiple of pp 4"));
	pipette_config_init(&c);
	c.cp = 3;
	ck_assert_int_eq(pipette_config_check(&m, &c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "--cp 3 does not divide"));
}
END_TEST

/* FSDP on torchtitan, by hand for Llama 3 8B (32 layers, h 4096, 8 KV
 * heads of 128, ffn 14336, vocab 128256, untied): a layer holds
 * 2*4096^2 (wq, wo) + 2*4096*1024 (wk, wv) + 3*4096*14336 (MLP) + 2*4096
 * (norms) = 218,112,000 parameters; the stage 32 of them plus 2 x
 * 128256*4096 (embedding and output) + 4096 (final norm) = 8,030,261,248. */
START_TEST(test_fsdp_hand)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_stage_memory st;
	const double layer = 218112000.0, P = 8030261248.0, head = 128256.0 * 4096;
	const double N = 64;

	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	pipette_config_init(&c);
	c.stack = pipette_stack_get(PIPETTE_STACK_TORCHTITAN);
	c.dp = 64;
	c.dp_shard = 64;
	c.reshard = PIPETTE_RESHARD_ALWAYS;
	c.micro_batch = 1;
	c.global_batch = 64;
	c.seq_len = 8192;
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), 0);
	pipette_memory_stage(&m, NULL, &c, 0, -1.0, &st);
	ck_assert_double_eq_tol(st.stage_params, P, 1);
	ck_assert_double_eq_tol(st.layer_params, layer, 1);
	/* fp32 shards (4 P / N) + bf16 gathers of two layers and the output
	 * layer, which torchtitan keeps gathered (2 x (2 x layer + head)) */
	ck_assert_double_eq_tol(st.params_bytes, 4 * P / N + 2 * (2 * layer + head), 16);
	/* fp32 gradient shards + the largest unit's bf16 gradient and its
	 * fp32 copy: the output layer (128256 x 4096 > a layer's 218M) */
	ck_assert_double_eq_tol(st.grads_bytes, 4 * P / N + (2 + 4) * head, 16);
	/* Adam's two fp32 moments, sharded */
	ck_assert_double_eq_tol(st.optimizer_bytes, 8 * P / N, 16);

	/* never resharded: every layer stays gathered from forward to backward */
	c.reshard = PIPETTE_RESHARD_NEVER;
	pipette_memory_stage(&m, NULL, &c, 0, -1.0, &st);
	ck_assert_double_eq_tol(st.params_bytes, 4 * P / N + 2 * P, 16);

	/* HSDP 8 x 8: shards over 8, the same per-layer buffers */
	c.reshard = PIPETTE_RESHARD_ALWAYS;
	c.dp_shard = 8;
	pipette_memory_stage(&m, NULL, &c, 0, -1.0, &st);
	ck_assert_double_eq_tol(st.optimizer_bytes, 8 * P / 8, 16);
	ck_assert_double_eq_tol(st.params_bytes, 4 * P / 8 + 2 * (2 * layer + head), 16);

	/* with a pipeline the gradients wait for the last micro-batch: the
	 * stage's unsharded fp32 gradients accumulate (a middle stage of 8
	 * holds 4 layers), and its parameters stay gathered */
	c.dp = 8;
	c.pp = 8;
	c.global_batch = 64;
	c.reshard = pipette_reshard_resolve(PIPETTE_RESHARD_DEFAULT, c.pp);
	ck_assert_int_eq(c.reshard, PIPETTE_RESHARD_NEVER);
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), 0);
	pipette_memory_stage(&m, NULL, &c, 1, -1.0, &st);
	ck_assert_double_eq_tol(st.stage_params, 4 * layer, 1);
	ck_assert_double_eq_tol(st.grads_bytes, 4 * 4 * layer / 8 + 4 * 4 * layer, 16);
	c.reshard = PIPETTE_RESHARD_ALWAYS;
	pipette_memory_stage(&m, NULL, &c, 1, -1.0, &st);
	ck_assert_double_eq_tol(st.params_bytes, 4 * 4 * layer / 8 + 2 * 4 * layer, 16);

	/* torchtitan's experts shard over dp_shard x cp x tp / ep: with EP
	 * the per-GPU expert state stays what FSDP alone gives */
	{
		struct pipette_model mx;
		struct pipette_config e;
		struct pipette_stage_memory a, b;

		ck_assert_int_eq(pipette_model_preset("mixtral-8x7b", &mx, NULL), 0);
		pipette_config_init(&e);
		e.stack = pipette_stack_get(PIPETTE_STACK_TORCHTITAN);
		e.dp = e.dp_shard = 16;
		e.global_batch = 16;
		e.seq_len = 4096;
		pipette_memory_stage(&mx, NULL, &e, 0, -1.0, &a);
		e.ep = 8;
		ck_assert_int_eq(pipette_config_check(&mx, &e, NULL), 0);
		pipette_memory_stage(&mx, NULL, &e, 0, -1.0, &b);
		ck_assert_double_eq_tol(b.optimizer_bytes, a.optimizer_bytes, 1e3);
		e.dp_shard = 2;		/* ep must divide dp_shard x cp x tp */
		ck_assert_int_eq(pipette_config_check(&mx, &e, NULL), -1);
	}

	/* a Megatron stack refuses the shard degree */
	c.stack = pipette_stack_get(PIPETTE_STACK_MEGATRON);
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), -1);
}
END_TEST

/* torchtitan's per-op SAC keeps the block input, q, v, the attention
 * output, w1's and w2's outputs: per token 2h + 2*4096 + 2*1024 + 2*4096
 * + 2*14336 + 2h bytes for Llama 3 8B at TP 1. */
/* Megatron-Core's recompute modules on DeepSeek-V3 (nemo stack: fused
 * SwiGLU keeps 3 ffn-wide tensors), t = 1, b = 1, s = 4096, bytes per
 * token of a MoE layer without recomputation:
 *   norms and their inputs 8h = 57,344; MLA latents and their normed
 *   copies 2(2*1536 + 2*512 + 64) = 8,320;
 *   MLA Q, K (128 x 192 each), V and the output (128 x 128 each):
 *   2(24576 + 24576 + 16384 + 16384) = 163,840;
 *   shared expert 2*3*2048 = 12,288;
 *   routed: 8 copies of (2h + 2*3*2048) = 212,992, router logits 4*256;
 *   total 455,808.
 * Each module drops its own: mla_up_proj Q, K, V (131,072), layernorm the
 * two stand-alone norms' outputs (MLA's input norm, the pre-MoE norm:
 * 2 x 2h = 28,672), moe_act one ffn-wide tensor per copy (8 x 4096),
 * shared_experts 12,288, moe the routed copies, the logits and the
 * shared expert (226,304); a dense layer's mlp its 2*3*18432. */
START_TEST(test_recompute_modules_hand)
{
	struct pipette_model m;
	struct pipette_config c;
	double T = 4096, base;
	static const struct { unsigned mods; double drop; int layer; } cases[] = {
		{ PIPETTE_RM_MLA_UP_PROJ, 131072, 10 },
		{ PIPETTE_RM_LAYERNORM, 28672, 10 },
		{ PIPETTE_RM_MOE_ACT, 32768, 10 },
		{ PIPETTE_RM_SHARED_EXPERTS, 12288, 10 },
		{ PIPETTE_RM_MOE, 226304, 10 },
		{ PIPETTE_RM_MLP, 110592, 0 },
		{ PIPETTE_RM_CORE_ATTN, 0, 10 },
		{ PIPETTE_RM_MLA_UP_PROJ | PIPETTE_RM_MOE_ACT, 131072 + 32768, 10 },
	};
	size_t i;

	ck_assert_int_eq(pipette_model_preset("deepseek-v3", &m, NULL), 0);
	pipette_config_init(&c);
	c.stack = pipette_stack_get(PIPETTE_STACK_NEMO);
	c.seq_len = 4096;
	c.ep = 1;
	base = pipette_memory_layer_activations(&m, &c, 10);
	ck_assert_double_eq_tol(base, T * 455808, 1e-3);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double none;

		c.recompute = PIPETTE_RECOMPUTE_NONE;
		c.recompute_modules = 0;
		none = pipette_memory_layer_activations(&m, &c, cases[i].layer);
		c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
		c.recompute_modules = cases[i].mods;
		ck_assert_double_eq_tol(none - pipette_memory_layer_activations(&m, &c, cases[i].layer),
					T * cases[i].drop, 1e-3);
	}
	/* imbalance and capacity scale the routed copies only */
	c.recompute = PIPETTE_RECOMPUTE_NONE;
	c.recompute_modules = 0;
	c.moe.imbalance = 1.25;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 10) - base,
				T * 0.25 * 8 * (2 * 7168.0 + 2 * 3 * 2048), 1e-3);
	c.moe.imbalance = 0;
	c.moe.capacity_factor = 1.5;
	c.moe.pad = 1;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 10) - base,
				T * 0.5 * 8 * (2 * 7168.0 + 2 * 3 * 2048), 1e-3);
}
END_TEST

START_TEST(test_sac_ops_hand)
{
	struct pipette_model m;
	struct pipette_config c;
	double per_token = 2 * 4096 + 2 * 4096 + 2 * 1024 + 2 * 4096 + 2 * 14336 + 2 * 4096;

	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	pipette_config_init(&c);
	c.stack = pipette_stack_get(PIPETTE_STACK_TORCHTITAN);
	c.seq_len = 8192;
	c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &c, 0), 8192 * per_token, 1);
	/* every other layer fully recomputed: the 2nd, 4th, ... */
	c.recompute = PIPETTE_RECOMPUTE_FULL;
	c.recompute_every = 2;
	ck_assert(!pipette_config_layer_recomputed(&c, 0));
	ck_assert(pipette_config_layer_recomputed(&c, 1));
}
END_TEST

/* Low-precision recipes, term by term on Llama 3 70B (h 8192, q width
 * 8192, kv width 1024, ffn 28672), TP 8 with sequence parallelism, PP 4
 * (20 layers a stage), sequence 8192, micro-batch 1.
 * Linear weights of one layer: QKV 8192 x (8192 + 2 x 1024) = 83,886,080,
 * output 8192 x 8192 = 67,108,864, MLP 3 x 8192 x 28672 = 704,643,072:
 * 855,638,016, over TP 8: 106,954,752; 20 layers: 2,139,095,040 a GPU.
 *   fp8-current, megatron stack (TE, no FP8 parameter gather), on a
 *   TN-only GPU (Hopper): data + transpose, 2 bytes each: +4,278,190,080;
 *   the nemo stack gathers parameters in FP8 and drops the BF16 copy:
 *   2 - 2 = +0;
 *   mxfp8 on GB200 (block-scaled tensor cores): row- and column-wise
 *   copies with an E8M0 per 32, 2 x (1 + 1/32) = 2.0625: +4,411,883,520.
 * Saved activations per token and layer (TE saves each linear's input
 * quantized, 1 byte in FP8): the QKV and FC1 inputs 2 x 8192 x (2 - 1) =
 * 16,384 less, a quantized copy of the attention output 8192 more, FC2's
 * input 28672 x (2 - 1) less: -36,864, over TP 8 (SP): -4,608; x 8192
 * tokens: -37,748,736 bytes per layer. */
START_TEST(test_precision_terms_hand)
{
	struct pipette_model m;
	struct pipette_config c, f8;
	struct pipette_stage_memory a, b;
	const struct pipette_gpu_spec *gb200 = pipette_gpu_lookup("gb200", NULL);
	struct pipette_stack nemo = *pipette_stack_get(PIPETTE_STACK_NEMO);

	ck_assert_int_eq(pipette_model_preset("llama3-70b", &m, NULL), 0);
	pipette_config_init(&c);
	c.stack = pipette_stack_get(PIPETTE_STACK_MEGATRON);
	c.tp = 8;
	c.pp = 4;
	c.sequence_parallel = 1;
	c.seq_len = 8192;
	c.global_batch = 4;
	ck_assert_int_eq(pipette_config_check(&m, &c, NULL), 0);
	f8 = c;
	f8.precision = PIPETTE_PREC_FP8_CURRENT;
	pipette_memory_stage(&m, NULL, &c, 1, 1.0, &a);
	pipette_memory_stage(&m, NULL, &f8, 1, 1.0, &b);
	ck_assert_double_eq_tol(b.params_bytes - a.params_bytes, 4278190080.0, 1.0);
	ck_assert_double_eq_tol(pipette_memory_layer_activations(&m, &f8, 30) -
				pipette_memory_layer_activations(&m, &c, 30), -37748736.0, 1.0);
	ck_assert_double_eq_tol(b.activations_bytes - a.activations_bytes, 20 * -37748736.0, 1.0);
	/* FP8 parameter gather: no extra weight bytes */
	c.stack = f8.stack = &nemo;
	pipette_memory_stage(&m, NULL, &c, 1, 1.0, &a);
	pipette_memory_stage(&m, NULL, &f8, 1, 1.0, &b);
	ck_assert_double_eq_tol(b.params_bytes - a.params_bytes, 0.0, 1.0);
	/* MXFP8 on Blackwell, megatron stack */
	c.stack = f8.stack = pipette_stack_get(PIPETTE_STACK_MEGATRON);
	f8.precision = PIPETTE_PREC_MXFP8;
	pipette_memory_stage(&m, gb200, &c, 1, 1.0, &a);
	pipette_memory_stage(&m, gb200, &f8, 1, 1.0, &b);
	ck_assert_double_eq_tol(b.params_bytes - a.params_bytes, 4411883520.0, 1.0);
	/* the layers kept in BF16 at the ends take none of it: stage 1 holds
	 * layers 20-39, so keeping the last 60 in BF16 leaves it as BF16 */
	f8.bf16_last = 60;
	pipette_memory_stage(&m, gb200, &f8, 1, 1.0, &b);
	ck_assert_double_eq(b.params_bytes, a.params_bytes);
	ck_assert_double_eq(b.activations_bytes, a.activations_bytes);
}
END_TEST

/* Megatron-FSDP and CPU offloading on Llama 3 70B as NVIDIA's GB200 run
 * (64 GPUs, TP 1, micro-batch 2, 8192 tokens, FP8 current scaling, 40
 * layers offloaded), by hand.  A layer: attention 8192 x (8192 + 2 x 1024
 * + 8192) + the output 8192 x 8192 = 150994944, the MLP 3 x 8192 x 28672 =
 * 704643072, two norms 16384: 855654400.  The embedding and the output
 * layer 128256 x 8192 = 1050673152 each, the final norm 8192: P = 80 x
 * 855654400 + 2 x 1050673152 + 8192 = 70553706496, P / 64 = 1102401664
 * per GPU.
 *   params     (4 fp32 main + 1 FP8 compute) x 1102401664 + 1 x 2 layers
 *              (the double buffer) + 2 x 2101346304 (BF16 embedding and
 *              output layer, no FSDP units) = 11426009728;
 *   grads      2 x 1102401664 (BF16 shards) + 2 x (2 x 855654400 +
 *              2101346304) = 9830113536;
 *   optimizer  8 x 1102401664 = 8819213312;
 *   offloaded  40 of the 80 layers' activations, all of one kind: the
 *              activations drop by 40 layers' and the host holds them. */
START_TEST(test_mfsdp_offload_hand)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_stage_memory a, b;
	struct pipette_stack st, off;
	struct pipette_err err;
	const struct pipette_gpu_spec *gb200 = pipette_gpu_lookup("gb200", NULL);
	double layer;

	ck_assert_int_eq(pipette_model_preset("llama3-70b", &m, NULL), 0);
	ck_assert_int_eq(pipette_stack_resolve("megatron-bridge", "megatron_fsdp=on", &st, &err), 0);
	ck_assert_int_eq(pipette_stack_resolve("megatron-bridge", "megatron_fsdp=on,cpu_offload=40",
					       &off, &err), 0);
	pipette_config_init(&c);
	c.stack = &st;
	c.dp = c.dp_shard = 64;
	c.micro_batch = 2;
	c.global_batch = 256;
	c.seq_len = 8192;
	c.precision = PIPETTE_PREC_FP8_CURRENT;
	ck_assert_int_eq(pipette_config_check(&m, &c, &err), 0);
	pipette_memory_stage(&m, gb200, &c, 0, 1.0, &a);
	ck_assert_double_eq_tol(a.params_bytes, 11426009728.0, 1.0);
	ck_assert_double_eq_tol(a.grads_bytes, 9830113536.0, 1.0);
	ck_assert_double_eq_tol(a.optimizer_bytes, 8819213312.0, 1.0);
	ck_assert_double_eq(a.offloaded_bytes, 0.0);
	/* BF16 gathers: 4 + 2 per shard, 2 per buffered layer */
	c.precision = PIPETTE_PREC_BF16;
	pipette_memory_stage(&m, gb200, &c, 0, 1.0, &b);
	ck_assert_double_eq_tol(b.params_bytes - a.params_bytes,
				1102401664.0 + 2 * 855654400.0, 1.0);
	c.precision = PIPETTE_PREC_FP8_CURRENT;
	c.stack = &off;
	ck_assert_int_eq(pipette_config_check(&m, &c, &err), 0);
	pipette_memory_stage(&m, gb200, &c, 0, 1.0, &b);
	layer = pipette_memory_layer_activations(&m, &c, 0);
	ck_assert_double_eq_tol(a.activations_bytes - b.activations_bytes, 40 * layer, 1.0);
	ck_assert_double_eq_tol(b.offloaded_bytes, 40 * layer, 1.0);
	ck_assert_double_eq(b.params_bytes, a.params_bytes);
	/* what Megatron-Core refuses, and what pipette does not price */
	c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	ck_assert_int_ne(pipette_config_check(&m, &c, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "recompute"));
	c.recompute = PIPETTE_RECOMPUTE_NONE;
	c.dp_shard = 32;
	ck_assert_int_ne(pipette_config_check(&m, &c, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "dp-shard"));
	c.dp_shard = 64;
	ck_assert_int_eq(pipette_stack_resolve("megatron-bridge", "megatron_fsdp=on,cpu_offload=80", &off,
					       &err), 0);
	ck_assert_int_ne(pipette_config_check(&m, &c, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "cpu_offload=80"));
	c.stack = &st;
	c.dp = c.dp_shard = 16;
	c.pp = 4;
	ck_assert_int_ne(pipette_config_check(&m, &c, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "Megatron-FSDP"));
	ck_assert_int_ne(pipette_stack_resolve("megatron", "megatron_fsdp=on", &st, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "megatron_fsdp=on"));
	ck_assert_int_ne(pipette_stack_resolve("megatron-bridge", "cpu_offload=on", &st, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "cpu_offload"));
	ck_assert_int_ne(pipette_stack_resolve("megatron-bridge", "grad_reduce=fp32,megatron_fsdp=on",
					       &st, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "BF16"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("memory");
	TCase *tc = tcase_create("memory");

	tcase_add_test(tc, test_korthikanti_fig1);
	tcase_add_test(tc, test_korthikanti_table2);
	tcase_add_test(tc, test_attention_kernel);
	tcase_add_test(tc, test_fujii_llama);
	tcase_add_test(tc, test_stage_by_hand);
	tcase_add_test(tc, test_distributed_optimizer);
	tcase_add_test(tc, test_pipeline_stages);
	tcase_add_test(tc, test_moe_params);
	tcase_add_test(tc, test_moe_activations);
	tcase_add_test(tc, test_moe_optimizer_sharding);
	tcase_add_test(tc, test_config_errors);
	tcase_add_test(tc, test_fsdp_hand);
	tcase_add_test(tc, test_sac_ops_hand);
	tcase_add_test(tc, test_recompute_modules_hand);
	tcase_add_test(tc, test_precision_terms_hand);
	tcase_add_test(tc, test_bf16_end_layers_in_stage);
	tcase_add_test(tc, test_mfsdp_offload_hand);
	suite_add_tcase(s, tc);
	return check_run(s);
}
