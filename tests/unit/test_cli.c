/* Unit tests: the pipette command's output and its errors, through the
 * built binary (PIPETTE_BIN). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Precision: the recipe is an input of estimate and plan, the plan says
 * which it used, and what a stack or a GPU cannot run is refused in one
 * line naming the stack, the GPU and the recipe. */
START_TEST(test_precision)
{
	expect("gpus", 0, "GB300-NVL72");
	expect("gpus --format json", 0, "\"fp4_tflops\":15000");
	expect("stacks", 0, "fp8-blockwise, mxfp8, nvfp4 (default bf16");
	expect("estimate --model llama3-8b --gpu h100 --tp 8 --seq-len 4096 --precision "
	       "fp8-current", 0, "precision fp8-current");
	expect("estimate --model llama3-8b --gpu h100 --tp 8 --seq-len 4096 --precision "
	       "fp8-current --format json", 0, "\"precision\":\"fp8-current\"");
	expect("estimate --model llama3-8b --gpu gb200 --tp 4 --seq-len 4096 --precision nvfp4 "
	       "--bf16-layers 1,1", 0, "(first 1 and last 1 layers in bf16)");
	expect("estimate --model llama3-8b --gpu h100 --precision mxfp8", 2,
	       "--precision mxfp8: the megatron stack cannot run it on H100-SXM-80GB, which has "
	       "no block-scaled (Blackwell) tensor cores");
	expect("estimate --model llama3-8b --gpu a100 --precision fp8-delayed", 2,
	       "cannot run it on A100-SXM-80GB, which has no FP8 tensor cores");
	expect("estimate --model llama3-8b --gpu h100 --stack torchtitan --dp 8 --dp-shard 8 "
	       "--precision fp8-delayed", 2,
	       "--precision fp8-delayed: the torchtitan stack does not run it on H100-SXM-80GB "
	       "(it runs bf16, fp8-current, fp8-rowwise, mxfp8)");
	expect("estimate --model llama3-8b --gpu h100 --precision fp8-current,bf16", 2,
	       "estimate takes one");
	expect("estimate --model llama3-8b --gpu h100 --precision fp8-current --bf16-layers 1", 2,
	       "--bf16-layers: '1': expected FIRST,LAST");
	expect("plan --model llama3-8b --nodes 1 --gpu h100 --global-batch 8 --seq-len 2048 "
	       "--precision fp8-current,fp8-delayed --format json", 0, "\"precision\":\"fp8-");
	expect("plan --model llama3-8b --nodes 1 --gpu h100 --global-batch 8 --seq-len 2048 "
	       "--format env", 0, "PIPETTE_PRECISION='bf16'");
	expect("plan --model llama3-8b --nodes 1 --gpu h100 --global-batch 8 --seq-len 2048 "
	       "--precision nvfp4", 2, "--precision nvfp4: the megatron stack cannot run it on "
	       "H100-SXM-80GB");
	expect("plan --model llama3-8b --nodes 1 --gpu h100 --global-batch 8 --seq-len 2048 "
	       "--precision fp8-current --bf16-layers 20,20", 2,
	       "--bf16-layers 20,20: expected two counts whose sum is at most the model's 32 "
	       "layers");
	expect("plan --model llama3-8b --nodes 1 --gpu h100 --global-batch 8 --seq-len 2048 "
	       "--precision fp16", 2, "precision 'fp16': expected bf16");
	/* The launch outputs name the recipe (test_launch.c checks them
	 * against the stacks' parsers); Megatron-Core refuses delayed
	 * scaling with BF16 layers, and so does the plan. */
	expect("plan --model llama3-8b --nodes 1 --gpu h100 --global-batch 8 --seq-len 2048 "
	       "--precision fp8-current --bf16-layers 1,1 --format megatron", 0,
	       " --bf16 --fp8-format hybrid --fp8-recipe tensorwise --first-last-layers-bf16 "
	       "--num-layers-at-start-in-bf16 1 --num-layers-at-end-in-bf16 1");
	expect("plan --model llama3-8b --nodes 1 --gpu gb200 --global-batch 8 --seq-len 2048 "
	       "--stack nemo --precision mxfp8 --format launch", 0,
	       "trainer.plugins.fp8=hybrid trainer.plugins.fp8_recipe=mxfp8 "
	       "trainer.plugins.fp8_param_gather=True");
	expect("plan --model llama3-8b --nodes 1 --gpu h100 --global-batch 8 --seq-len 2048 "
	       "--precision fp8-delayed --bf16-layers 1,1", 2,
	       "--bf16-layers 1,1: fp8-delayed cannot keep layers in BF16");
	/* the search never picks what Megatron-Core refuses: with PP 8 and
	 * 5 BF16 layers no configuration is valid, and the plan says why */
	expect("plan --model llama3-8b --nodes 2 --gpu h100 --global-batch 16 --seq-len 2048 "
	       "--pp 8 --precision fp8-current --bf16-layers 5,0 --format megatron", 1,
	       "the first: --bf16-layers 5,0: Megatron-Core keeps at most num_layers/PP = 4 "
	       "layers in BF16");
	expect("plan --model llama3-8b --nodes 2 --gpu h100 --global-batch 16 --seq-len 2048 "
	       "--stack torchtitan --precision fp8-rowwise", 0,
	       "torchtitan: no launch arguments: torchtitan after v0.2.2 sets the fp8-rowwise "
	       "converter in the model spec");
	expect("plan --model llama3-8b --nodes 2 --gpu h100 --global-batch 16 --seq-len 2048 "
	       "--stack torchtitan --precision fp8-current --format torchtitan", 0,
	       "[quantize.linear.float8]\nrecipe_name = \"tensorwise\"");
	/* NVLink domains: whole nodes only, named in the error */
	expect("plan --model llama3-8b --nodes 4 --gpu gb200 --global-batch 16 --seq-len 2048 "
	       "--nvlink-domain 6", 2, "--nvlink-domain 6: not a whole number of nodes of 4 GPUs");
	expect("estimate --model llama3-8b --gpu gb200 --tp 8 --seq-len 2048 --nvlink-domain 10",
	       2, "--nvlink-domain 10: not a whole number of nodes of 4 GPUs");
	expect("plan --model llama3-70b --nodes 18 --gpu gb200 --global-batch 72 --seq-len 8192 "
	       "--tp 8 --pp 9 --format json", 0, "\"tp\":8");
}
END_TEST

/* A site's kernel table: `pipette kernels fit` writes the fit of its own
 * kernels as a calibration file; the H100's committed table fitted so
 * prices a step as the shipped H100 table does (the shipped parameters
 * are the same fit, to four figures: test_kernels); a table for another
 * GPU type, an implausible rate or a bad CSV is refused naming the key. */
START_TEST(test_kernels_fit)
{
	char dir[] = "/tmp/pipette-kfit-XXXXXX", cmd[512], ref[64], got[64], *p;
	const char *est = "estimate --model llama3-70b --gpu h100 --tp 8 --pp 4 --seq-len 4096 "
			  "--global-batch 8 --sequence-parallel --distributed-optimizer";

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "kernels fit %s/kernels/h100-sxm-kernels.csv --gpu h100 "
		 "-o %s/site.json", TEST_DATADIR, dir);
	expect(cmd, 0, "fp8-tensorwise  t0   19.63 us   1359.0 TFLOP/s");
	expect(est, 0, "iteration");
	p = strstr(out, "iteration ");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p, "iteration %63s", ref), 1);
	snprintf(cmd, sizeof(cmd), "%s --calibration %s/site.json", est, dir);
	expect(cmd, 0, "iteration");
	ck_assert_int_eq(sscanf(strstr(out, "iteration "), "iteration %63s", got), 1);
	ck_assert_double_eq_tol(atof(got), atof(ref), 2e-3 * atof(ref));
	snprintf(cmd, sizeof(cmd), "estimate --model llama3-8b --gpu a100 --calibration %s/site.json",
		 dir);
	expect(cmd, 2, "kernels.gpu: 'H100-SXM-80GB' is not the plan's GPU type A100-SXM-80GB");
	snprintf(cmd, sizeof(cmd), "kernels fit %s/site.json --gpu h100", dir);
	expect(cmd, 2, "expected the header of kernels.py's CSV");
	expect("kernels fit --gpu h100", 2, "a CSV and --gpu TYPE are required");
	expect("kernels frobnicate", 2, "usage: pipette kernels fit");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
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
	expect("estimate --model llama3-8b --gpu h100 --tp 4 --global-batch 4 --seq-len 2048 "
	       "--attention unfused", 0, "attention unfused");
	/* 70B on one 80 GB GPU cannot fit: exit 1, said plainly. */
	expect("estimate --model llama3-70b --gpu h100", 1, "DOES NOT FIT");
	expect("estimate --model " TEST_DATADIR "/hf/mixtral-8x7b.json --gpu a100 --tp 2 --ep 8 "
	       "--dp 8 --pp 2 --sequence-parallel --distributed-optimizer --global-batch 16 "
	       "--seq-len 2048", 0, "mixtral");
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
	expect("estimate --model llama3-8b --gpu h100 --schedule pipedream", 2, "expected 1f1b");
	expect("estimate --model llama3-8b --gpu h100 --attention xformers", 2,
	       "--attention: attention 'xformers': expected flash or unfused");
	expect("estimate --model llama3-8b --gpu h100 --bogus 1", 2, "unknown option --bogus");
	expect("estimate --model llama3-8b --gpu h100 --tp", 2, "--tp needs a value");
	expect("estimate --model " TEST_DATADIR "/hf/bad-missing-hidden.json --gpu h100", 2,
	       "missing key 'hidden_size'");
	expect("estimate --model " TEST_DATADIR "/hf/bad-truncated.json --gpu h100", 2,
	       "bad-truncated.json: line 2, column 1: malformed JSON: unexpected end of file");
	/* FSDP and torchtitan inputs: each names the option and what is wrong */
	expect("estimate --model llama3-8b --gpu h100 --stack torchtitan --dp 8 --dp-shard 3 "
	       "--global-batch 8", 2, "--dp-shard 3 does not divide dp 8");
	expect("estimate --model llama3-8b --gpu h100 --dp 8 --dp-shard 4 --global-batch 8", 2,
	       "--dp-shard 4: the megatron stack has no FSDP");
	expect("estimate --model llama3-8b --gpu h100 --stack torchtitan --reshard sometimes", 2,
	       "--reshard: reshard 'sometimes': expected default, always or never");
	expect("estimate --model llama3-8b --gpu h100 --stack torchtitan --recompute-every 2", 2,
	       "--recompute-every 2 needs --recompute full");
	expect("estimate --model llama3-8b --gpu h100 --stack torchtitan --pp 4 --global-batch 4 "
	       "--schedule dualpipe-v --vpp 2", 2, "dualpipe-v schedule: 4 micro-batches, fewer than "
	       "2 x pp = 8");
	expect("estimate --model llama3-8b --gpu h100 --stack torchtitan --stack-option compile=maybe",
	       2, "--stack-option compile: 'maybe': expected on or off");
	expect("estimate --model llama3-8b --gpu h100 --stack torchtitan --stack-option "
	       "grad_reduce=bf16", 2, "torchtitan reduces gradients in float32 only");
	expect("estimate --model llama3-8b --gpu h100 --stack composer-fsdp --tp 2", 2,
	       "the composer-fsdp stack runs data parallelism only");
	expect("plan --model llama3-8b --gpu h100 --nodes 2 --global-batch 32 --dp-shard 4", 2,
	       "--dp-shard/--reshard: the megatron stack has no FSDP");
	expect("plan --model llama3-8b --gpu h100 --nodes 2 --global-batch 32 --stack torchtitan "
	       "--recompute selective --recompute-every 2", 2, "--recompute-every 2 needs --recompute full");
	expect("estimate --help", 0, "--distributed-optimizer");
	/* the MoE options: each bad value names its option */
	expect("estimate --model deepseek-v3 --gpu h100 --recompute-modules core_attn,bogus", 2,
	       "--recompute-modules: recompute module 'bogus': expected core_attn");
	expect("estimate --model deepseek-v3 --gpu h100 --recompute-modules mlp,mlp", 2,
	       "recompute module mlp listed twice");
	expect("estimate --model mixtral-8x7b --gpu h100 --dispatcher nccl", 2,
	       "--dispatcher: dispatcher 'nccl': expected alltoall or deepep");
	expect("estimate --model mixtral-8x7b --gpu h100 --capacity-factor 99", 2,
	       "--capacity-factor: 99 is out of range");
	expect("estimate --model mixtral-8x7b --gpu h100 --imbalance 0.5", 2,
	       "--imbalance: 0.5 is out of range");
	expect("estimate --model mixtral-8x7b --gpu h100 --ep 8 --dp 8 --pad-to-capacity", 2,
	       "padding to capacity needs one");
	expect("estimate --model llama3-8b --gpu h100 --ep-overlap", 2,
	       "need a model with experts ('llama3-8b' has none)");
	expect("estimate --model mixtral-8x7b --gpu h100 --ep 4 --dp 4 --pp 2 --ep-overlap "
	       "--stack nemo --global-batch 8", 2, "the interleaved schedule when pp > 1");
	expect("estimate --model llama3-8b --gpu h100 --stack torchtitan --recompute-modules mlp", 2,
	       "--recompute-modules needs --recompute selective and a stack with Megatron-Core");
	expect("estimate --model deepseek-v3 --gpu h800 --stack deepseek --recompute full "
	       "--schedule dualpipe --vpp 2 --pp 2 --first-stage-layers 1 --last-stage-layers -1 "
	       "--dp 8 --ep 8 --global-batch 32", 2,
	       "the deepseek stack recomputes exactly");
	expect("estimate --model mixtral-8x7b --gpu h100 --ep 4 --dp 4 --routing "
	       TEST_DATADIR "/routing/bad-json.json", 2, "--routing: ");
	expect("plan --model llama3-8b --gpu h100 --nodes 2 --global-batch 32 --stack torchtitan "
	       "--recompute-modules mlp", 2, "the torchtitan stack has no Megatron-Core recompute");
	expect("plan --model mixtral-8x7b --gpu h100 --nodes 2 --global-batch 32 --ep-overlap maybe",
	       2, "--ep-overlap: 'maybe': expected on or off");
	expect("plan --model mixtral-8x7b --gpu h100 --nodes 2 --global-batch 32 --stack torchtitan "
	       "--dispatcher deepep", 2, "the torchtitan stack has no DeepEP dispatcher");
}
END_TEST

/* ---- argument parsing -------------------------------------------------- */

#define PLAN_OK "plan --model llama3-8b --gpu h100 --seq-len 2048 "

/* Integers are plain decimal digits: strtol alone took " 64" and "+64". */
START_TEST(test_integers_are_digits)
{
	expect(PLAN_OK "--nodes 2 --global-batch ' 64'", 2, "--global-batch: ' 64' is not an integer");
	expect(PLAN_OK "--nodes 2 --global-batch '64 '", 2, "--global-batch: '64 ' is not an integer");
	expect(PLAN_OK "--nodes 2 --global-batch +64", 2, "--global-batch: '+64' is not an integer");
	expect(PLAN_OK "--nodes 2 --global-batch 0x40", 2, "--global-batch: '0x40' is not an integer");
	expect(PLAN_OK "--nodes 2 --global-batch=", 2, "--global-batch: empty value");
	expect("estimate --model llama3-8b --gpu h100 --mem-fraction ' 0.5'", 2,
	       "--mem-fraction: ' 0.5' is not a number");
	expect("estimate --model llama3-8b --gpu h100 --mem-fraction 0x1p-1", 2,
	       "--mem-fraction: '0x1p-1' is not a number");
	/* what is allowed stays allowed: a negative value where the range has
	 * one, and "--opt=value" */
	expect("estimate --model llama3-8b --gpu h100 --tp 4 --pp 2 --first-stage-layers -1", 0,
	       "STAGE LAYERS");
	expect("estimate --model llama3-8b --gpu h100 --tp=4 --mem-fraction=.9", 0, "fits");
}
END_TEST

/* "--nodes -1" named a node "-1"; no host name begins with a sign. */
START_TEST(test_nodes_not_signed)
{
	const char *msg = "--nodes: '-1' is neither a node count (1, 2, ...) nor a Slurm hostlist";

	expect(PLAN_OK "--global-batch 8 --nodes -1", 2, msg);
	expect(PLAN_OK "--global-batch 8 --nodes=+2", 2, "--nodes: '+2' is neither");
	expect(PLAN_OK "--global-batch 8 --nodes 'gpu1,-x'", 2, "yields the name '-x'");
	expect("bandwidth show " TEST_DATADIR "/bw/good-3.json --nodes -1", 2, msg);
}
END_TEST

/* "--nodes ' 4'" planned one node named "4" (issue 28, item 8): a count
 * or a hostlist with blanks is refused, naming the input. */
START_TEST(test_nodes_blanks)
{
	expect(PLAN_OK "--global-batch 8 --nodes ' 4'", 2,
	       "--nodes: ' 4' is neither a node count (1, 2, ...) nor a Slurm hostlist: it has "
	       "blanks");
	expect(PLAN_OK "--global-batch 8 --nodes '4 '", 2, "--nodes: '4 ' is neither");
	expect(PLAN_OK "--global-batch 8 --nodes 'gpu1, gpu2'", 2, "--nodes: 'gpu1, gpu2' is neither");
	expect("bandwidth show " TEST_DATADIR "/bw/good-3.json --nodes ' 2'", 2,
	       "--nodes: ' 2' is neither");
	expect(PLAN_OK "--global-batch 8 --nodes 4", 0, "on 4 nodes");
}
END_TEST

/* An option given twice is an error naming it: which value was meant? */
START_TEST(test_option_twice)
{
	expect(PLAN_OK "--nodes 2 --global-batch 8 --tp 2 --tp 4", 2, "--tp given twice");
	expect(PLAN_OK "--nodes 2 --global-batch 8 --tp=2 --tp 2", 2, "--tp given twice");
	expect(PLAN_OK "--nodes 2 --nodes 4 --global-batch 8", 2, "--nodes given twice");
	expect("estimate --model llama3-8b --gpu h100 --gpu a100", 2, "--gpu given twice");
	expect("experts --model mixtral-8x7b --ep 8 --ep 4 --trace x", 2, "--ep given twice");
	expect("experts generate --model mixtral-8x7b -o a --output b", 2, "--output given twice");
	expect("bandwidth show x --worst 1 --worst 2", 2, "--worst given twice");
	expect("bandwidth validate x --now 2025-01-01T00:00:00Z --now 2025-01-01T00:00:00Z", 2,
	       "--now given twice");
	expect("bandwidth generate --seed 1 --seed 2 --nodes 2 -o x", 2, "--seed given twice");
	expect("bandwidth import --from nccl-tests --from pipette-legacy x -o y", 2,
	       "--from given twice");
	expect("bandwidth merge a b -o x --output y", 2, "--output given twice");
}
END_TEST

/* An unknown option is called unknown, even last (it used to "need a
 * value"); a missing value is said to be missing, also when the next
 * argument is another option. */
START_TEST(test_unknown_option)
{
	expect(PLAN_OK "--nodes 2 --global-batch 8 --bogus", 2,
	       "plan: unknown option --bogus (see pipette plan --help)");
	expect(PLAN_OK "--nodes 2 --global-batch 8 --bogus=1", 2, "plan: unknown option --bogus ");
	expect("estimate --model llama3-8b --gpu h100 --bogus", 2,
	       "estimate: unknown option --bogus");
	expect("experts --model mixtral-8x7b --bogus", 2, "experts: unknown option --bogus");
	expect("experts generate --model mixtral-8x7b --bogus", 2,
	       "experts generate: unknown option --bogus");
	expect("bandwidth show x --bogus", 2, "bandwidth show: unknown option --bogus");
	expect("bandwidth validate x --bogus", 2, "bandwidth validate: unknown option --bogus");
	expect("bandwidth import --bogus", 2, "bandwidth import: unknown option --bogus");
	expect("bandwidth merge a --bogus", 2, "bandwidth merge: unknown option --bogus");
	expect("bandwidth generate --bogus", 2, "bandwidth generate: unknown option --bogus");
	expect(PLAN_OK "--nodes 2 --global-batch", 2, "--global-batch needs a value");
	expect("plan --model --gpu h100 --nodes 2 --global-batch 8 --seq-len 2048", 2,
	       "--model needs a value");
	expect("bandwidth show x --nodes --worst 3", 2, "--nodes needs a node list");
}
END_TEST

/* ---- input files that are not regular files ----------------------------- */

static char tmpdir[64];

static void make_specials(void)
{
	char path[128];

	strcpy(tmpdir, "/tmp/test_cli.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	/* a site models directory whose "mine" is a FIFO */
	snprintf(path, sizeof(path), "%s/models", tmpdir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/models/mine.json", tmpdir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
}

static void remove_specials(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* pipette ARGS (with %s for the test directory, up to three times) fails
 * at once, exit 2, with one line that holds every fragment.  A reader that
 * opens the FIFO blocking waits for a writer for ever: the 5 s limit turns
 * that into a failure (exit 137). */
static void expect_refused(const char *fmt, const char *f1, const char *f2, const char *f3)
{
	char args[1024], want[3][256];
	const char *frag[3] = { f1, f2, f3 };
	int rc, i;

	snprintf(args, sizeof(args), fmt, tmpdir, tmpdir, tmpdir);
	rc = cli_run_within(5, args, out, OUT_MAX);
	ck_assert_msg(rc == 2, "pipette %s: exit %d, expected 2 at once; output:\n%s", args, rc,
		      out);
	ck_assert_msg(strchr(out, '\n') == out + strlen(out) - 1, "pipette %s: not one line:\n%s",
		      args, out);
	for (i = 0; i < 3 && frag[i]; i++) {
		snprintf(want[i], sizeof(want[i]), frag[i], tmpdir);
		ck_assert_msg(strstr(out, want[i]) != NULL, "pipette %s: output lacks '%s':\n%s",
			      args, want[i], out);
	}
}

#define PLAN "plan --gpu h100 --nodes 2 --global-batch 8 --seq-len 2048 "

START_TEST(test_fifo_inputs)
{
	const char *fifo = "is a FIFO, not a regular file";

	expect_refused(PLAN "--model %s/fifo", "--model: %s/fifo: ", fifo, NULL);
	expect_refused(PLAN "--model llama3-8b --bandwidth %s/fifo", "--bandwidth: %s/fifo: ",
		       fifo, NULL);
	expect_refused(PLAN "--model llama3-8b --calibration %s/fifo",
		       "--calibration: %s/fifo: ", fifo, NULL);
	expect_refused(PLAN "--model mine --models-dir %s/models",
		       "--models-dir: %s/models/mine.json: ", fifo, NULL);
	expect_refused("estimate --gpu h100 --model %s/fifo", "--model: %s/fifo: ", fifo, NULL);
	expect_refused("estimate --gpu h100 --model llama3-8b --calibration %s/fifo",
		       "--calibration: %s/fifo: ", fifo, NULL);
	expect_refused("estimate --gpu h100 --model mine --models-dir %s/models",
		       "--models-dir: %s/models/mine.json: ", fifo, NULL);
	expect_refused("experts --model mixtral-8x7b --ep 8 --trace %s/fifo",
		       "--trace: %s/fifo: ", fifo, NULL);
	expect_refused("estimate --gpu h100 --model mixtral-8x7b --ep 8 --dp 8 --routing %s/fifo",
		       "--routing: %s/fifo: ", fifo, NULL);
	expect_refused("bandwidth validate %s/fifo", "bandwidth cache: %s/fifo: ", fifo, NULL);
	expect_refused("bandwidth show %s/fifo", "bandwidth cache: %s/fifo: ", fifo, NULL);
	expect_refused("bandwidth merge %s/fifo %s/fifo -o %s/out.json",
		       "bandwidth cache: %s/fifo: ", fifo, NULL);
	expect_refused("bandwidth import --from nccl-tests %s/fifo -o %s/out.json",
		       "nccl-tests output: %s/fifo: ", fifo, NULL);
	expect_refused("bandwidth import --from pipette-legacy %s/fifo -o %s/out.json",
		       "Pipette bandwidth JSON: %s/fifo: ", fifo, NULL);
}
END_TEST

/* A character device and a directory, likewise. */
START_TEST(test_device_and_directory_inputs)
{
	const char *dev = "is a character device, not a regular file";
	const char *dir = "is a directory, not a regular file";

	expect_refused(PLAN "--model llama3-8b --bandwidth /dev/null", "--bandwidth: /dev/null: ",
		       dev, NULL);
	expect_refused(PLAN "--model /dev/null", "--model: /dev/null: ", dev, NULL);
	expect_refused(PLAN "--model llama3-8b --calibration /dev/null",
		       "--calibration: /dev/null: ", dev, NULL);
	expect_refused("bandwidth validate /dev/null", "bandwidth cache: /dev/null: ", dev, NULL);
	expect_refused(PLAN "--model llama3-8b --bandwidth %s", "--bandwidth: %s: ", dir, NULL);
	expect_refused(PLAN "--model llama3-8b --calibration %s", "--calibration: %s: ", dir,
		       NULL);
	/* a directory as --model means DIR/config.json, which is missing */
	expect_refused(PLAN "--model %s", "--model: %s/config.json: ",
		       "cannot open: No such file or directory", NULL);
	expect_refused("bandwidth validate %s", "bandwidth cache: %s: ", dir, NULL);
	/* a cache is never written over a device */
	expect_refused("bandwidth generate --seed 1 --nodes 2 -o /dev/null",
		       "/dev/null: is a special file, not a regular file", NULL, NULL);
}
END_TEST

/* observe, calibrate: a plan file whose fields are wrong is refused with
 * the file and the field; a FIFO as the plan, the log or the store is
 * refused at once. */
static void write_plan_variant(const char *name, const char *after, const char *from,
			       const char *to)
{
	char path[128], *p, *hit;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	p = strdup(out);
	ck_assert_ptr_nonnull(p);
	hit = after ? strstr(p, after) : p;
	ck_assert_msg(hit != NULL, "the plan has no '%s'", after);
	hit = strstr(hit, from);
	ck_assert_msg(hit != NULL, "the plan has no '%s'", from);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%.*s%s%s", (int)(hit - p), p, to, hit + strlen(from));
	fclose(f);
	free(p);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

#define MLM_PLAN "plan --gpu h100 --model llama3-8b --global-batch 64 --seq-len 4096 "

/* observe of good.json with a Megatron step time of `ms` fails, naming
 * the log, the line and the field, with `why`. */
static void observe_time_fails(const char *ms, const char *why)
{
	char args[512], want[256];

	snprintf(args, sizeof(args), "%s/one.log", tmpdir);
	snprintf(want, sizeof(want), " iteration 5/ 10 | elapsed time per iteration (ms): %s |\n",
		 ms);
	write_text(args, want);
	snprintf(args, sizeof(args), "observe --plan %s/good.json --log %s/one.log", tmpdir,
		 tmpdir);
	snprintf(want, sizeof(want), "one.log: line 1: elapsed time per iteration (ms): %s", why);
	expect(args, 2, want);
}

/* observe refuses a log whose job ran another configuration than the plan
 * (issue 28, item 4: a log of world 16, PP 4 was recorded against a
 * 32-GPU PP 1 plan), naming the field; what the log does not state is not
 * held against the plan. */
static void observe_mismatch(const char *plan_args, const char *log, const char *want)
{
	char args[512];

	ck_assert_msg(cli_run(plan_args, out, OUT_MAX) == 0, "%s: %s", plan_args, out);
	write_plan_variant("other.json", NULL, "\"tp\":", "\"tp\":");
	snprintf(args, sizeof(args), "observe --plan %s/other.json --log %s/trainlogs/%s", tmpdir,
		 TEST_DATADIR, log);
	expect(args, 2, want);
}

START_TEST(test_observe_log_matches_plan)
{
	observe_mismatch(MLM_PLAN "--nodes 4 --tp 2 --pp 1 --dp 16 --format json", "megatron.log",
			 "megatron.log: world_size: the log states 16, the plan 32 GPUs");
	observe_mismatch(MLM_PLAN "--nodes 2 --tp 2 --pp 2 --dp 4 --format json", "megatron.log",
			 "megatron.log: pipeline_model_parallel_size: the log states 4, the plan 2 "
			 "(pp)");
	observe_mismatch(MLM_PLAN "--nodes 2 --tp 4 --pp 4 --dp 1 --format json", "megatron.log",
			 "megatron.log: tensor_model_parallel_size: the log states 2, the plan 4 (tp)");
	observe_mismatch("plan --gpu h100 --model llama3-8b --global-batch 128 --seq-len 4096 "
			 "--nodes 2 --tp 2 --pp 4 --dp 2 --format json", "megatron.log",
			 "megatron.log: global_batch_size: the log states 64, the plan 128 "
			 "(global_batch)");
	observe_mismatch("plan --gpu h100 --model llama3-8b --global-batch 64 --seq-len 2048 "
			 "--nodes 2 --tp 2 --pp 4 --dp 2 --format json", "megatron.log",
			 "megatron.log: seq_length: the log states 4096, the plan 2048 (seq_len)");
	/* torchtitan's mesh: pp=2, dp_replicate=1, dp_shard=2, cp=1, tp=2, and
	 * 131072 tokens a step (16 x 8192) */
	observe_mismatch("plan --gpu h100 --model llama3-8b --stack torchtitan --nodes 1 "
			 "--global-batch 16 --seq-len 8192 --tp 2 --pp 1 --dp-shard 4 --format json",
			 "torchtitan.log", "torchtitan.log: pp: the log states 2, the plan 1 (pp)");
	observe_mismatch("plan --gpu h100 --model llama3-8b --stack torchtitan --nodes 1 "
			 "--global-batch 32 --seq-len 8192 --tp 2 --pp 2 --dp-shard 2 --format json",
			 "torchtitan.log", "torchtitan.log: tokens per train step: the log states "
			 "131072, the plan 262144 (global_batch x seq_len)");
	observe_mismatch("plan --gpu h100 --model llama3-8b --stack torchtitan --nodes 1 "
			 "--global-batch 16 --seq-len 8192 --tp 2 --pp 2 --dp 2 --dp-shard 1 "
			 "--format json", "torchtitan.log",
			 "torchtitan.log: dp_shard: the log states 2, the plan 1 (dp_shard)");
	/* the log states no configuration (NeMo's): nothing to hold */
	ck_assert_int_eq(cli_run("plan --gpu h100 --model llama3-8b --stack nemo --nodes 4 "
				 "--global-batch 64 --seq-len 4096 --format json", out, OUT_MAX), 0);
	write_plan_variant("nemo.json", NULL, "\"tp\":", "\"tp\":");
	{
		char args[512];

		snprintf(args, sizeof(args), "observe --plan %s/nemo.json --log %s/trainlogs/nemo.log",
			 tmpdir, TEST_DATADIR);
		expect(args, 0, "step time: measured");
	}
}
END_TEST

/* The store's unit is a job (issue 28, item 2): every observe --record of
 * one plan and log wrote a new observation, so one job recorded 20 times
 * weighed 20 in the fit.  Now a repeat replaces the observation of that
 * plan and log, and calibrate counts copies of one (the same plan and log
 * under other names) once, saying so in one line. */
static int store_files(const char *dir)
{
	char cmd[256];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

START_TEST(test_observe_record_once)
{
	char args[512], store[128], cmd[512];
	int k;

	ck_assert_int_eq(cli_run(MLM_PLAN "--nodes 2 --tp 2 --pp 4 --dp 2 --format json", out,
				 OUT_MAX), 0);
	write_plan_variant("rec.json", NULL, "\"tp\":", "\"tp\":");
	snprintf(store, sizeof(store), "%s/store", tmpdir);
	ck_assert_int_eq(mkdir(store, 0755), 0);
	snprintf(args, sizeof(args), "observe --plan %s/rec.json --log %s/trainlogs/megatron.log "
		 "--record %s", tmpdir, TEST_DATADIR, store);
	expect(args, 0, "pipette: recorded ");
	for (k = 0; k < 3; k++)
		expect(args, 0, "pipette: replaced the earlier observation of this plan and log");
	ck_assert_int_eq(store_files(store), 1);
	/* the same observation under other names (a store written by hand,
	 * or by an earlier pipette): counted once */
	snprintf(cmd, sizeof(cmd), "cd '%s' && f=$(ls) && for i in 1 2 3; do cp \"$f\" copy$i.json; done",
		 store);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(store_files(store), 4);
	snprintf(args, sizeof(args), "calibrate --from %s --format json", store);
	expect(args, 0, "3 observations repeat the plan and log of an earlier one and are left "
	       "out: copy1.json, copy2.json, copy3.json\n");
	ck_assert_msg(strstr(out, "\"observations\":1,"), "%s", out);
}
END_TEST

START_TEST(test_observe_errors)
{
	const char *fifo = "is a FIFO, not a regular file";
	char args[512];

	ck_assert_int_eq(cli_run(PLAN "--model llama3-8b --tp 2 --pp 2 --dp 4 --format json", out,
				 OUT_MAX), 0);
	write_plan_variant("hash.json", NULL, "\"plan_hash\":\"", "\"plan_hash\":\"../");
	write_plan_variant("tp.json", NULL, "\"tp\":2,", "\"tp\":2.5,");
	write_plan_variant("tps.json", NULL, "\"tp\":2,", "\"tp\":\"two\",");
	write_plan_variant("reserve.json", "\"per_stage\"", "\"reserve_bytes\":",
			   "\"reserve_bytes\":-");
#define LOG TEST_DATADIR "/trainlogs/megatron.log"
	snprintf(args, sizeof(args), "observe --plan %s/hash.json --log " LOG, tmpdir);
	expect(args, 2, "hash.json: plan_hash: '../");
	snprintf(args, sizeof(args), "observe --plan %s/tp.json --log " LOG, tmpdir);
	expect(args, 2, "tp.json: config: tp: 2.5 is not a whole number");
	snprintf(args, sizeof(args), "observe --plan %s/tps.json --log " LOG, tmpdir);
	expect(args, 2, "tps.json: config: tp: expected a number, got a string");
	snprintf(args, sizeof(args), "observe --plan %s/reserve.json --log " LOG, tmpdir);
	expect(args, 2, "reserve.json: predicted.memory.per_stage[0]: reserve_bytes: -");
	/* the plan megatron.log ran: world 16, TP 2, PP 4, DP 2, batch 64 of 4096 */
	ck_assert_int_eq(cli_run(MLM_PLAN "--nodes 2 --tp 2 --pp 4 --dp 2 --format json", out, OUT_MAX),
			 0);
	write_plan_variant("good.json", NULL, "\"tp\":2,", "\"tp\":2,");
	snprintf(args, sizeof(args), "observe --plan %s/good.json --log " LOG, tmpdir);
	expect(args, 0, "step time: measured 1.5010 s");
	/* a step time calibrate would refuse, and a hexadecimal one (issue
	 * 28, item 8) */
	observe_time_fails("1e-300", "1e-300 is out of range [0.1, 8.64e+07]");
	observe_time_fails("0x10", "'0x10' is not a decimal number");
#undef LOG
	expect_refused("observe --plan %s/fifo --log %s/fifo", "--plan: %s/fifo: ", fifo, NULL);
	expect_refused("observe --plan %s/good.json --log %s/fifo", "--log: %s/fifo: ", fifo,
		       NULL);
	expect("observe --report /nonexistent-store --svg /tmp/x.svg", 2,
	       "--report: /nonexistent-store: not a directory that can be read");
	expect("observe --report /tmp", 2, "--report DIR and --svg FILE go together");
	expect("calibrate --from /nonexistent-store", 2,
	       "--from: /nonexistent-store: not a directory that can be read");
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
	tcase_add_test(tc, test_precision);
	tcase_add_test(tc, test_kernels_fit);
	tcase_add_test(tc, test_estimate_json);
	tcase_add_test(tc, test_estimate_table_and_nofit);
	tcase_add_test(tc, test_estimate_errors);
	tcase_add_test(tc, test_integers_are_digits);
	tcase_add_test(tc, test_nodes_not_signed);
	tcase_add_test(tc, test_nodes_blanks);
	tcase_add_test(tc, test_option_twice);
	tcase_add_test(tc, test_unknown_option);
	suite_add_tcase(s, tc);
	tc = tcase_create("special files");
	tcase_add_checked_fixture(tc, make_specials, remove_specials);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fifo_inputs);
	tcase_add_test(tc, test_device_and_directory_inputs);
	tcase_add_test(tc, test_observe_errors);
	tcase_add_test(tc, test_observe_log_matches_plan);
	tcase_add_test(tc, test_observe_record_once);
	suite_add_tcase(s, tc);
	rc = check_run(s);
	free(out);
	return rc;
}
