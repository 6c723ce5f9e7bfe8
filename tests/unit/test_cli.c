/* Unit tests: the pipette command's output and its errors, through the
 * built binary (PIPETTE_BIN). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "cli_run.h"
#include "check_run.h"

#define OUT_MAX (1 << 20)

static char *out;

static void expect(const char *args, int code, const char *fragment)
{
	int rc = cli_run(args, out, OUT_MAX);

	ck_assert_msg(rc == code, "pipette %s: exit %d, expected %d; output:\n%s", args, rc,
		      code, out);
	ck_assert_msg(strstr(out, fragment) != NULL, "pipette %s: output lacks '%s':\n%s",
		      args, fragment, out);
}

START_TEST(test_lists)
{
	expect("models", 0, "llama3-405b");
	expect("models --format json", 0, "\"deepseek-v3\"");
	expect("gpus", 0, "H100-SXM-80GB");
	expect("gpus --format json", 0, "\"peak_tflops\":989");
	expect("gpus --format yaml", 2, "expected table or json");
	expect("--help", 0, "estimate");
	expect("frobnicate", 2, "unknown command 'frobnicate'");
}
END_TEST

START_TEST(test_estimate_json)
{
	struct json_object *root, *mem, *cfg, *v;
	static const char *const mem_keys[] = {
		"peak_bytes", "capacity_bytes", "fits", "params_bytes", "grads_bytes",
		"optimizer_bytes", "activations_bytes", "other_bytes", "per_stage",
	};
	static const char *const cfg_keys[] = {
		"tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch",
		"seq_len", "recompute", "sequence_parallel", "distributed_optimizer",
		"schedule",
	};
	size_t i;

	ck_assert_int_eq(cli_run("estimate --model llama3-70b --gpu h100 --tp 8 --pp 4 --dp 2 "
			     "--micro-batch 1 --global-batch 64 --seq-len 4096 "
			     "--sequence-parallel --distributed-optimizer --format json",
			     out, OUT_MAX), 0);
	root = json_tokener_parse(out);
	ck_assert_ptr_nonnull(root);
	ck_assert(json_object_object_get_ex(root, "memory", &mem));
	ck_assert(json_object_object_get_ex(root, "config", &cfg));
	for (i = 0; i < sizeof(mem_keys) / sizeof(mem_keys[0]); i++)
		ck_assert_msg(json_object_object_get_ex(mem, mem_keys[i], NULL), "%s", mem_keys[i]);
	for (i = 0; i < sizeof(cfg_keys) / sizeof(cfg_keys[0]); i++)
		ck_assert_msg(json_object_object_get_ex(cfg, cfg_keys[i], NULL), "%s", cfg_keys[i]);
	json_object_object_get_ex(mem, "per_stage", &v);
	ck_assert_int_eq(json_object_array_length(v), 4);
	json_object_object_get_ex(mem, "fits", &v);
	ck_assert(json_object_get_boolean(v));
	json_object_object_get_ex(cfg, "tp", &v);
	ck_assert_int_eq(json_object_get_int(v), 8);
	json_object_put(root);
}
END_TEST

START_TEST(test_estimate_table_and_nofit)
{
	expect("estimate --model llama3-8b --gpu h100 --tp 4 --global-batch 4", 0, "fits");
	expect("estimate --model llama3-8b --gpu h100 --tp 4 --global-batch 4 "
	       "--attention unfused", 0, "attention unfused");
	/* 70B on one 80 GB GPU cannot fit: exit 1, said plainly. */
	expect("estimate --model llama3-70b --gpu h100", 1, "DOES NOT FIT");
	expect("estimate --model " TEST_DATADIR "/hf/mixtral-8x7b.json --gpu a100 --tp 2 --ep 8 "
	       "--dp 8 --pp 2 --sequence-parallel --distributed-optimizer --global-batch 16", 0, "mixtral");
}
END_TEST

START_TEST(test_estimate_errors)
{
	expect("estimate --gpu h100", 2, "--model is required");
	expect("estimate --model llama3-8b", 2, "--gpu is required");
	expect("estimate --model nosuch --gpu h100", 2, "unknown model 'nosuch'");
	expect("estimate --model llama3-8b --gpu tpu", 2, "unknown GPU type 'tpu'");
	expect("estimate --model llama3-8b --gpu h100 --tp 3", 2, "--tp 3 does not divide");
	expect("estimate --model llama3-8b --gpu h100 --pp 64", 2, "--pp 64 exceeds");
	expect("estimate --model llama3-8b --gpu h100 --dp 4 --micro-batch 2 --global-batch 10",
	       2, "not a multiple of dp 4 x micro-batch 2");
	expect("estimate --model llama3-8b --gpu h100 --tp -2", 2, "--tp: -2 is out of range");
	expect("estimate --model llama3-8b --gpu h100 --tp 99999999999", 2, "--tp");
	expect("estimate --model llama3-8b --gpu h100 --tp abc", 2, "'abc' is not an integer");
	expect("estimate --model llama3-8b --gpu h100 --seq-len 0", 2, "--seq-len: 0");
	expect("estimate --model llama3-8b --gpu h100 --mem-fraction 7", 2, "--mem-fraction");
	expect("estimate --model llama3-8b --gpu h100 --recompute some", 2, "expected none");
	expect("estimate --model llama3-8b --gpu h100 --schedule gpipe", 2, "expected 1f1b");
	expect("estimate --model llama3-8b --gpu h100 --attention xformers", 2,
	       "--attention: attention 'xformers': expected flash or unfused");
	expect("estimate --model llama3-8b --gpu h100 --bogus 1", 2, "unknown option '--bogus'");
	expect("estimate --model llama3-8b --gpu h100 --tp", 2, "--tp needs a value");
	expect("estimate --model " TEST_DATADIR "/hf/bad-missing-hidden.json --gpu h100", 2,
	       "missing key 'hidden_size'");
	expect("estimate --model " TEST_DATADIR "/hf/bad-truncated.json --gpu h100", 2,
	       "bad-truncated.json: line 2, column 1: malformed JSON: unexpected end of file");
	expect("estimate --help", 0, "--distributed-optimizer");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("cli");
	int rc;

	out = malloc(OUT_MAX);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_lists);
	tcase_add_test(tc, test_estimate_json);
	tcase_add_test(tc, test_estimate_table_and_nofit);
	tcase_add_test(tc, test_estimate_errors);
	suite_add_tcase(s, tc);
	rc = check_run(s);
	free(out);
	return rc;
}
