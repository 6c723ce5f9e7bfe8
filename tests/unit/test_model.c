/* Unit tests: model presets, Hugging Face config.json loading, GPU table. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inputs/hardware.h"
#include "inputs/model.h"
#include "check_run.h"

#define HF(name) TEST_DATADIR "/hf/" name

START_TEST(test_every_preset_valid)
{
	struct pipette_err err;
	struct pipette_model m;
	size_t i;

	ck_assert_uint_ge(pipette_model_preset_count(), 10);
	for (i = 0; i < pipette_model_preset_count(); i++) {
		const struct pipette_model *p = pipette_model_preset_at(i);

		ck_assert_msg(pipette_model_validate(p, &err) == 0, "%s: %s", p->name, err.msg);
		ck_assert_int_eq(pipette_model_preset(p->name, &m, &err), 0);
		ck_assert_str_eq(m.name, p->name);
		ck_assert_msg(strlen(p->source) > 0, "%s has no source", p->name);
	}
	ck_assert_ptr_null(pipette_model_preset_at(pipette_model_preset_count()));
}
END_TEST

START_TEST(test_required_presets)
{
	static const char *const names[] = {
		"gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b",
		"llama3-70b", "llama3-405b", "mixtral-8x7b", "qwen2.5-72b", "deepseek-v3",
	};
	struct pipette_model m;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_msg(pipette_model_preset(names[i], &m, NULL) == 0, "%s", names[i]);
	ck_assert_int_eq(pipette_model_preset("LLAMA3-8B", &m, NULL), 0);
}
END_TEST

/* Parameter counts against the totals published for each model (HF model
 * cards / safetensors metadata), derived layer by layer:
 *   llama2-7b: per layer 4h^2 (attention, no GQA) + 3*h*11008 + 2h
 *     = 67,108,864 + 135,266,304 + 8,192 = 202,383,360; x32 = 6,476,267,520;
 *     + 2*32000*4096 (untied) + 4096 (final norm) = 6,738,415,616.
 *   llama3-8b: attention 2*4096*4096 + 2*4096*1024 = 41,943,040; MLP
 *     3*4096*14336 = 176,160,768; norms 8,192 -> 218,112,000 x32 =
 *     6,979,584,000; + 2*128256*4096 + 4096 = 8,030,261,248.
 *   mixtral-8x7b: attention 41,943,040 + router 32,768 + 8 experts
 *     x 176,160,768 + norms 8,192 = 1,451,270,144 x32 = 46,440,644,608;
 *     + 2*32000*4096 + 4096 = 46,702,792,704.
 *   deepseek-v3 (MLA): q 7168*1536 + 1536 + 1536*128*192 = 48,760,320;
 *     kv 7168*576 + 512 + 512*128*256 = 20,906,496; o 128*128*7168 =
 *     117,440,512; dense MLP 3*7168*18432; MoE: router 7168*256, shared
 *     3*7168*2048, 256 experts of 3*7168*2048.  3 dense layers of
 *     583,483,392 + 58 MoE layers of 11,507,286,016 + 2*129280*7168 + 7168
 *     = 671,026,404,352 (DeepSeek's 671B; the published 671,026,419,200
 *     adds the 58 x 256 routing-bias terms we do not count). */
START_TEST(test_param_counts)
{
	struct pipette_model m;

	ck_assert_int_eq(pipette_model_preset("llama2-7b", &m, NULL), 0);
	ck_assert_double_eq(pipette_model_params_total(&m), 6738415616.0);
	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, NULL), 0);
	ck_assert_double_eq(pipette_model_params_total(&m), 8030261248.0);
	ck_assert_int_eq(pipette_model_preset("mixtral-8x7b", &m, NULL), 0);
	ck_assert_double_eq(pipette_model_params_total(&m), 46702792704.0);
	/* Active: 2 of 8 experts: 46,702,792,704 - 32 x 6 x 176,160,768. */
	ck_assert_double_eq(pipette_model_params_active(&m),
			    46702792704.0 - 32.0 * 6 * 176160768.0);
	/* "12.9B active parameters" (Mistral AI, "Mixtral of experts", 2023) */
	ck_assert_double_eq_tol(pipette_model_params_active(&m), 12.9e9, 0.05e9);
	ck_assert_int_eq(pipette_model_preset("deepseek-v3", &m, NULL), 0);
	ck_assert_double_eq(pipette_model_params_total(&m), 671026404352.0);
	ck_assert_int_eq(pipette_model_moe_layer_count(&m), 58);
	/* "37B activated for each token" (DeepSeek-V3 technical report,
	 * arXiv 2412.19437, abstract): 8 routed experts and the shared one */
	ck_assert_double_ge(pipette_model_params_active(&m), 37.0e9);
	ck_assert_double_lt(pipette_model_params_active(&m), 38.0e9);
}
END_TEST

/* DeepSeek-V3's MTP module (§2.2): one MoE layer of 11,507,286,016, the
 * 7168 x 14336 projection (102,760,448) and three norms (21,504):
 * 11,610,067,968 unique parameters ("11.5B" of the weights README); with the
 * embedding and head the checkpoint stores again (2 x 129280 x 7168 =
 * 1,853,358,080) 13.46B, and the Hugging Face checkpoint's total
 * 684.49B, published as 685B (tests/data/stacks/deepseek-v3.md).
 * Qwen3-30B-A3B (its config.json): 30.5B total, 3.3B activated (Qwen3
 * model card), q/k norms not counted; Mixtral's paper rounds to 47B/13B. */
START_TEST(test_moe_published_totals)
{
	struct pipette_model m;
	struct pipette_err err;

	ck_assert_int_eq(pipette_model_preset("deepseek-v3", &m, NULL), 0);
	ck_assert_double_eq(pipette_model_params_mtp(&m, 0),
			    11507286016.0 + 7168.0 * 14336 + 3 * 7168.0);
	ck_assert_double_eq_tol(pipette_model_params_mtp(&m, 0), 11.5e9, 0.15e9);
	ck_assert_double_eq_tol(pipette_model_params_total(&m) + pipette_model_params_mtp(&m, 1),
				685e9, 0.6e9);
	ck_assert_msg(pipette_model_load_hf(HF("qwen3-30b-a3b.json"), &m, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(m.experts, 128);
	ck_assert_int_eq(m.topk, 8);
	ck_assert_int_eq(m.shared_ffn, 0);
	ck_assert_double_eq_tol(pipette_model_params_total(&m), 30.5e9, 0.05e9);
	/* 3.353B: within the published figure's last digit */
	ck_assert_double_eq_tol(pipette_model_params_active(&m), 3.3e9, 0.06e9);
	ck_assert_int_eq(pipette_model_preset("mixtral-8x7b", &m, NULL), 0);
	ck_assert_double_eq_tol(pipette_model_params_total(&m), 47e9, 0.5e9);
	ck_assert_double_eq_tol(pipette_model_params_active(&m), 13e9, 0.5e9);
}
END_TEST

/* GPT-3 175B: 12*L*h^2*(1 + 13/(12h) + V/(12*L*h)) without the 2048x12288
 * learned position embeddings = 174.6B (Narayanan et al. Table 1 counts
 * 175B including them and the sequence term). */
START_TEST(test_gpt_params)
{
	struct pipette_model m;
	double L = 96, h = 12288, V = 51200;

	ck_assert_int_eq(pipette_model_preset("gpt3-175b", &m, NULL), 0);
	ck_assert_double_eq_tol(pipette_model_params_total(&m),
				12 * L * h * h * (1 + 13 / (12 * h) + V / (12 * L * h)) + 2 * h,
				1.0);
}
END_TEST

START_TEST(test_hf_llama)
{
	struct pipette_model m, p;
	struct pipette_err err;

	ck_assert_msg(pipette_model_load_hf(HF("llama3-8b.json"), &m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(pipette_model_preset("llama3-8b", &p, NULL), 0);
	ck_assert_int_eq(m.layers, 32);
	ck_assert_int_eq(m.kv_heads, 8);
	ck_assert_int_eq(m.ffn_kind, PIPETTE_FFN_SWIGLU);
	ck_assert_int_eq(m.tied_embeddings, 0);
	ck_assert_int_eq(m.max_seq, 8192);
	ck_assert_double_eq(pipette_model_params_total(&m), pipette_model_params_total(&p));
}
END_TEST

START_TEST(test_hf_families)
{
	struct pipette_model m;
	struct pipette_err err;

	ck_assert_msg(pipette_model_load_hf(HF("mistral-7b.json"), &m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(m.kv_heads, 8);
	ck_assert_msg(pipette_model_load_hf(HF("mixtral-8x7b.json"), &m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(m.experts, 8);
	ck_assert_int_eq(m.topk, 2);
	ck_assert_int_eq(m.expert_ffn, 14336);
	ck_assert_double_eq(pipette_model_params_total(&m), 46702792704.0);
	/* Qwen2-0.5B ties embeddings: 24 x (2*896*896 + 2*896*128 + 3*896*4864
	 * + 2*896) + 151936*896 + 896 = 494,005,120.  The published count,
	 * 494,032,768, adds Qwen2's QKV biases (24 x (896 + 2*128) = 27,648),
	 * which this model does not carry. */
	ck_assert_msg(pipette_model_load_hf(HF("qwen2-0.5b.json"), &m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(m.tied_embeddings, 1);
	ck_assert_double_eq(pipette_model_params_total(&m), 494032768.0 - 27648.0);
	/* GPT-2 124M: 12 x (12h^2 + 13h) + 50257*768 + 2*768 = 123,653,376,
	 * i.e. HF's 124,439,808 less the 1024 x 768 position embeddings. */
	ck_assert_msg(pipette_model_load_hf(HF("gpt2.json"), &m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(m.ffn, 4 * 768);
	ck_assert_int_eq(m.tied_embeddings, 1);
	ck_assert_double_eq(pipette_model_params_total(&m), 123653376.0);
	ck_assert_msg(pipette_model_load_hf(HF("pythia-1b.json"), &m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(m.ffn_kind, PIPETTE_FFN_GELU);
	ck_assert_int_eq(m.tied_embeddings, 0);
	ck_assert_msg(pipette_model_load_hf(HF("deepseek-v3.json"), &m, &err) == 0, "%s", err.msg);
	ck_assert_double_eq(pipette_model_params_total(&m), 671026404352.0);
	ck_assert_int_eq(m.first_dense_layers, 3);
	ck_assert_int_eq(m.mtp_layers, 1);
}
END_TEST

static void expect_error(const char *file, const char *fragment)
{
	struct pipette_model m;
	struct pipette_err err = { .msg = "" };

	ck_assert_int_eq(pipette_model_load_hf(file, &m, &err), -1);
	ck_assert_msg(strstr(err.msg, fragment) != NULL, "'%s' lacks '%s'", err.msg, fragment);
	ck_assert_msg(strstr(err.msg, file) != NULL, "'%s' does not name the file", err.msg);
}

START_TEST(test_hf_errors)
{
	expect_error(HF("bad-truncated.json"), "line 2, column 1: malformed JSON: unexpected end of file");
	expect_error(HF("bad-missing-hidden.json"), "missing key 'hidden_size'");
	expect_error(HF("bad-type.json"), "'num_hidden_layers': expected an integer");
	expect_error(HF("bad-negative.json"), "'hidden_size': -4096 is out of range");
	expect_error(HF("bad-absurd.json"), "'vocab_size'");
	expect_error(HF("bad-mlp-only.json"), "key 'mlp_only_layers': only an empty list");
	expect_error(HF("bad-kv.json"), "'num_key_value_heads' (5) does not divide");
	expect_error(HF("bad-unknown-type.json"), "'t5' is not supported");
	expect_error(HF("bad-array.json"), "expected a JSON object");
	expect_error(HF("bad-trailing.json"), "text after the top-level object");
	expect_error(HF("does-not-exist.json"), "cannot open");
	expect_error(TEST_DATADIR "/hf", "not a regular file");
}
END_TEST

/* Valid JSON that is not an object is named for what it is, newline or
 * not: json-c completes a bare literal only once it sees a terminator,
 * so "null" without one used to read as "unexpected end of file". */
START_TEST(test_hf_not_an_object)
{
	static const char *const docs[][2] = {
		{ "null", "config.json: top level is null, expected a JSON object" },
		{ "null\n", "config.json: top level is null, expected a JSON object" },
		{ "42", "config.json: top level is a number, expected a JSON object" },
		{ "\"llama\"", "config.json: top level is a string, expected" },
		{ " true ", "config.json: top level is a boolean, expected" },
		{ "nul", "config.json: line 1, column 4: malformed JSON: unexpected end of file" },
	};
	char dir[] = "/tmp/test_model_XXXXXX", path[64];
	size_t i;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/config.json", dir);
	for (i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		FILE *f = fopen(path, "w");

		ck_assert_ptr_nonnull(f);
		fputs(docs[i][0], f);
		fclose(f);
		expect_error(path, docs[i][1]);
	}
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* A model from a config.json records the file's SHA-256; a preset none. */
START_TEST(test_hf_sha256)
{
	struct pipette_model m;
	struct pipette_err err;
	unsigned char want[PIPETTE_SHA256_LEN];
	char text[1 << 16];
	size_t n;
	FILE *f = fopen(HF("pythia-1b.json"), "rb");

	ck_assert_ptr_nonnull(f);
	n = fread(text, 1, sizeof(text), f);
	fclose(f);
	ck_assert_uint_lt(n, sizeof(text));
	pipette_sha256(text, n, want);
	ck_assert_msg(pipette_model_load_hf(HF("pythia-1b.json"), &m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(m.has_source_sha256, 1);
	ck_assert(memcmp(m.source_sha256, want, sizeof(want)) == 0);
	ck_assert_int_eq(pipette_model_load("llama3-8b", NULL, &m, &err), 0);
	ck_assert_int_eq(m.has_source_sha256, 0);
}
END_TEST

START_TEST(test_load_dispatch)
{
	struct pipette_model m;
	struct pipette_err err;

	ck_assert_int_eq(pipette_model_load("llama2-70b", NULL, &m, &err), 0);
	ck_assert_int_eq(m.kv_heads, 8);
	/* A bare name found in the site directory. */
	ck_assert_msg(pipette_model_load("pythia-1b", TEST_DATADIR "/hf", &m, &err) == 0,
		      "%s", err.msg);
	ck_assert_int_eq(m.layers, 16);
	ck_assert_int_eq(pipette_model_load("no-such-model", TEST_DATADIR "/hf", &m, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown model 'no-such-model'"));
	ck_assert_int_eq(pipette_model_load("", NULL, &m, &err), -1);
}
END_TEST

START_TEST(test_gpus)
{
	static const char *const needed[] = { "A100-40GB", "A100", "H100", "H200", "V100", "B200" };
	struct pipette_err err;
	size_t i;

	for (i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
		const struct pipette_gpu_spec *g = pipette_gpu_lookup(needed[i], &err);

		ck_assert_msg(g != NULL, "%s: %s", needed[i], err.msg);
		ck_assert(g->peak_tflops > 0 && g->hbm_bytes > 0 && g->nvlink_gbps > g->nic_gbps);
		ck_assert(strlen(g->source) > 0);
	}
	ck_assert_double_eq(pipette_gpu_lookup("a100", NULL)->peak_tflops, 312.0);
	ck_assert_double_eq(pipette_gpu_lookup("H100-SXM-80GB", NULL)->peak_tflops, 989.0);
	ck_assert_double_eq(pipette_gpu_lookup("a100-40gb", NULL)->hbm_bytes, 40960.0 * 1048576);
	ck_assert_ptr_null(pipette_gpu_lookup("tpu-v5", &err));
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown GPU type 'tpu-v5'"));
}
END_TEST

/* A pipette-probe --local report replaces the time model's efficiencies:
 * ceiling = 720 / 989 measured-over-peak x 0.69 / 0.95 (the A100 fit over
 * Calculon's raw large-GEMM efficiency) = 0.52876; half point 4 GFLOP;
 * HBM the measured 2900.5 GB/s. */
START_TEST(test_calibration)
{
	const struct pipette_gpu_spec *h100 = pipette_gpu_lookup("h100", NULL);
	struct pipette_gpu_spec c;
	struct pipette_err err;

	ck_assert_msg(pipette_gpu_calibrate(h100, TEST_DATADIR "/probe/local-h100.json", &c,
					    &err) == 0, "%s", err.msg);
	ck_assert_double_eq_tol(c.gemm_eff_max, 720.0 / 989.0 * 0.69 / 0.95, 1e-12);
	ck_assert_double_eq(c.gemm_half_gflop, 4.0);
	ck_assert_double_eq(c.hbm_gbps, 2900.5);
	ck_assert_double_eq(c.peak_tflops, h100->peak_tflops);
	/* the measured kernels run at the site's ceiling over the one the
	 * probe measured on the table's GPU (806.4 and 808.7, hardware.c
	 * [PROBE-H]): 720 / 807.55 */
	ck_assert_ptr_eq(c.kernels, h100->kernels);
	ck_assert_double_eq_tol(c.kernel_scale, 720.0 / ((806.4 + 808.7) / 2), 1e-12);
	ck_assert_int_eq(pipette_gpu_calibrate(h100, TEST_DATADIR "/probe/bad-implausible.json",
					       &c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "bad-implausible.json: gemm.max_tflops 5000"));
	ck_assert_int_eq(pipette_gpu_calibrate(h100, TEST_DATADIR "/probe/bad-no-gemm.json",
					       &c, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "gemm.max_tflops and gemm.half_gflop"));
	ck_assert_int_eq(pipette_gpu_calibrate(h100, TEST_DATADIR "/probe/none.json", &c,
					       &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "cannot open"));
}
END_TEST

/* The table's H100 and H200 GEMM figures are the probe's measurements
 * (hardware.c [PROBE-H]): calibrating from each recorded report lands
 * within 1% of the table's ceiling, the half point within the spread of
 * the runs, and the HBM copy rate below the datasheet's. */
START_TEST(test_table_matches_probe_reports)
{
	static const struct { const char *gpu, *file; } runs[] = {
		{ "h100", TEST_DATADIR "/probe/h100-sxm-run1.json" },
		{ "h100", TEST_DATADIR "/probe/h100-sxm-run2.json" },
		{ "h200", TEST_DATADIR "/probe/h200-sxm.json" },
	};
	size_t i;

	for (i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		const struct pipette_gpu_spec *g = pipette_gpu_lookup(runs[i].gpu, NULL);
		struct pipette_gpu_spec c;
		struct pipette_err err;

		ck_assert_msg(pipette_gpu_calibrate(g, runs[i].file, &c, &err) == 0, "%s",
			      err.msg);
		ck_assert_msg(fabs(c.gemm_eff_max / g->gemm_eff_max - 1) < 0.01,
			      "%s: measured ceiling %.4f, table %.4f", runs[i].file,
			      c.gemm_eff_max, g->gemm_eff_max);
		ck_assert_msg(c.gemm_half_gflop > 0.75 * g->gemm_half_gflop &&
			      c.gemm_half_gflop < 1.25 * g->gemm_half_gflop,
			      "%s: half point %.2f, table %.2f", runs[i].file,
			      c.gemm_half_gflop, g->gemm_half_gflop);
		ck_assert_msg(c.hbm_gbps > 0.8 * g->hbm_gbps && c.hbm_gbps < g->hbm_gbps,
			      "%s: HBM %.0f GB/s, datasheet %.0f", runs[i].file, c.hbm_gbps,
			      g->hbm_gbps);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("model");
	TCase *tc = tcase_create("model");

	tcase_add_test(tc, test_every_preset_valid);
	tcase_add_test(tc, test_required_presets);
	tcase_add_test(tc, test_param_counts);
	tcase_add_test(tc, test_moe_published_totals);
	tcase_add_test(tc, test_gpt_params);
	tcase_add_test(tc, test_hf_llama);
	tcase_add_test(tc, test_hf_families);
	tcase_add_test(tc, test_hf_errors);
	tcase_add_test(tc, test_hf_not_an_object);
	tcase_add_test(tc, test_hf_sha256);
	tcase_add_test(tc, test_load_dispatch);
	tcase_add_test(tc, test_gpus);
	tcase_add_test(tc, test_calibration);
	tcase_add_test(tc, test_table_matches_probe_reports);
	suite_add_tcase(s, tc);
	return check_run(s);
}
