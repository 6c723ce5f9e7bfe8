/* pipette estimate: memory (and time) of one configuration. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "learn/calib.h"
#include "cli.h"
#include "inputs/cluster.h"
#include "inputs/hardware.h"
#include "inputs/limits.h"
#include "inputs/stack.h"
#include "estimate/memory.h"
#include "inputs/model.h"
#include "plan/plan.h"
#include "estimate/timing.h"

static const char usage_text[] =
"usage: pipette estimate --model NAME|config.json --gpu TYPE [OPTIONS]\n"
"\n"
"Estimate the per-GPU memory of one training configuration, per pipeline\n"
"stage, whether it fits, and its iteration time with a breakdown (ranks in\n"
"Megatron's default order on nodes with nominal links).\n"
"\n"
"  --model NAME|PATH        preset (pipette models) or a Hugging Face config.json\n"
"  --gpu TYPE               GPU type (pipette gpus), e.g. H100, A100-40GB\n"
"  --tp N --pp N --dp N     tensor, pipeline, data parallel sizes (1)\n"
"  --cp N                   context parallel size (1)\n"
"  --ep N --etp N           expert parallel and expert tensor parallel (MoE; 1)\n"
"  --vpp N                  model chunks per pipeline rank (interleaved; 1)\n"
"  --micro-batch N          sequences per micro-batch (1)\n"
"  --global-batch N         sequences per iteration (dp x micro-batch)\n"
"  --seq-len N              tokens per sequence (the model's context length)\n"
"  --stack NAME             the training stack (megatron, nemo, megatron-zb,\n"
"                           megatron-2022, torchtitan, composer-fsdp; pipette\n"
"                           stacks)\n"
"  --dp-shard N             FSDP shard degree, a divisor of dp (torchtitan;\n"
"                           dp/N replicas: HSDP) (1)\n"
"  --reshard default|always|never  FSDP: gather each layer's parameters again\n"
"                           for its backward (default: always without PP)\n"
"  --recompute-every K      with --recompute full: every K-th layer (1)\n"
"  --stack-option K=V[,K=V] override a fact of the stack (see pipette plan)\n"
"  --recompute none|selective|full\n"
"  --recompute-modules M[,M] selective recomputation of Megatron-Core's modules\n"
"                           (core_attn, moe_act, layernorm, mla_up_proj, mlp,\n"
"                           moe, shared_experts)\n"
"  --dispatcher alltoall|deepep  MoE token dispatcher\n"
"  --ep-overlap             overlap EP dispatch/combine (combined 1F1B)\n"
"  --capacity-factor F --pad-to-capacity  drop (or pad) at F x an expert's share\n"
"  --imbalance F            the busiest EP rank's tokens over the mean\n"
"  --routing FILE           measure that imbalance from a routing trace\n"
"  --sequence-parallel      shard norms/dropout activations over TP\n"
"  --distributed-optimizer  shard optimizer states over DP (ZeRO-1)\n"
"  --schedule S             1f1b, interleaved, zb-h1, v-min, v-half, v-zb,\n"
"                           gpipe, interleaved-zb, zbv, dualpipe-v, dualpipe\n"
"                           (1f1b)\n"
"  --precision R            the linear layers' recipe: bf16, fp8-delayed,\n"
"                           fp8-current, fp8-rowwise, fp8-blockwise, mxfp8,\n"
"                           nvfp4 (the stack's default, bf16 but deepseek's)\n"
"  --bf16-layers F,L        with a low-precision recipe, keep the first F and\n"
"                           last L transformer layers in BF16 (0,0)\n"
"  --attention flash|unfused  fused memory-efficient attention (FlashAttention,\n"
"                           cuDNN; the default) or the unfused kernel of\n"
"                           Megatron before 2022 (stores the s x s scores)\n"
"  --first-stage-layers N --last-stage-layers N   uneven pipeline split: layers\n"
"                           of the first/last virtual stage (-1: embedding or\n"
"                           loss only)\n"
"  --mem-fraction F         usable fraction of HBM (the stack's rule)\n"
"  --nodes N                nodes (enough for tp*pp*dp*cp GPUs)\n"
"  --gpus-per-node G        GPUs per node (the GPU type's board, 8)\n"
"  --nvlink-domain N        GPUs sharing one NVLink domain, a multiple of the\n"
"                           GPUs per node (the GPU type's system: 72 on\n"
"                           GB200/GB300 NVL72, else one node)\n"
"  --timeline FILE.svg      draw the simulated pipeline timeline\n"
"  --calibration FILE       GEMM and HBM figures measured by\n"
"                           pipette-probe --local --json FILE on this GPU type\n"
"  --compress SPEC          what-if communication compression (Optimus-CC):\n"
"                           pp:R[:epilogue] low-rank PP backward gradients,\n"
"                           dp:R[:stages=K] PowerSGD DP gradients (first K\n"
"                           stages), emb fused embedding sync; comma-separated\n"
"  --models-dir DIR         where NAME.json model configs may also be found\n"
"  --format table|json      output format (table)\n"
"\n"
"Exit status: 0 fits, 1 does not fit, 2 bad arguments or input.\n";

struct estimate_opts {
	const char *model;
	const char *gpu;
	const char *models_dir;
	const char *timeline;
	const char *calibration;
	long nodes, gpus_per_node, nvlink_domain;
	struct pipette_config cfg;
	int global_batch_set, seq_len_set, attention_set, precision_set;
	double mem_fraction;	/* 0: the stack's rule */
	const char *stack, *stack_options;
	const char *routing;	/* a routing trace: the imbalance it measures */
	enum pipette_reshard reshard;	/* as given: default until resolved */
	enum pipette_format fmt;
};

/* Integer knobs that map onto struct pipette_config fields. */
static int *int_field(struct pipette_config *c, const char *name)
{
	static const struct { const char *name; size_t off; } fields[] = {
		{ "--tp", offsetof(struct pipette_config, tp) },
		{ "--pp", offsetof(struct pipette_config, pp) },
		{ "--dp", offsetof(struct pipette_config, dp) },
		{ "--cp", offsetof(struct pipette_config, cp) },
		{ "--ep", offsetof(struct pipette_config, ep) },
		{ "--etp", offsetof(struct pipette_config, etp) },
		{ "--vpp", offsetof(struct pipette_config, vpp) },
		{ "--micro-batch", offsetof(struct pipette_config, micro_batch) },
		{ "--dp-shard", offsetof(struct pipette_config, dp_shard) },
		{ "--recompute-every", offsetof(struct pipette_config, recompute_every) },
		{ "--first-stage-layers", offsetof(struct pipette_config, first_stage_layers) },
		{ "--last-stage-layers", offsetof(struct pipette_config, last_stage_layers) },
	};
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (!strcmp(name, fields[i].name))
			return (int *)((char *)c + fields[i].off);
	return NULL;
}

/* The options that take a value (the flags are matched first). */
static const char *const value_options[] = {
	"--tp", "--pp", "--dp", "--cp", "--ep", "--etp", "--vpp", "--micro-batch",
	"--first-stage-layers", "--last-stage-layers", "--model", "--gpu", "--nodes",
	"--gpus-per-node", "--compress", "--calibration", "--timeline", "--models-dir",
	"--global-batch", "--seq-len", "--mem-fraction", "--recompute", "--schedule",
	"--attention", "--format", "--stack", "--stack-option", "--dp-shard",
	"--recompute-every", "--reshard", "--recompute-modules", "--dispatcher",
	"--capacity-factor", "--imbalance", "--routing", "--precision", "--bf16-layers",
	"--nvlink-domain", NULL
};

static int parse(int argc, char **argv, struct estimate_opts *o)
{
	struct cli_seen seen = { .n = 0 };
	struct pipette_err err;
	char name[64];
	int i, rc;

	memset(o, 0, sizeof(*o));
	pipette_config_init(&o->cfg);
	o->mem_fraction = 0;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		long n;
		int *field;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage_text, stdout);
			return -1;
		}
		if (!strcmp(a, "--sequence-parallel")) {
			o->cfg.sequence_parallel = 1;
			continue;
		}
		if (!strcmp(a, "--distributed-optimizer")) {
			o->cfg.distributed_optimizer = 1;
			continue;
		}
		if (!strcmp(a, "--ep-overlap") || !strcmp(a, "--pad-to-capacity")) {
			*(a[2] == 'e' ? &o->cfg.moe.ep_overlap : &o->cfg.moe.pad) = 1;
			continue;
		}
		if (strncmp(a, "--", 2))
			return cli_error("estimate: unexpected argument '%.64s'", a);
		if (cli_option(argc, argv, &i, "estimate", value_options, &seen, name,
			       sizeof(name), &v))
			return PIPETTE_EXIT_USAGE;
		if ((field = int_field(&o->cfg, name))) {
			if (cli_int(name, v, strstr(name, "layers") ? -1 : 1, 1 << 20, &n))
				return PIPETTE_EXIT_USAGE;
			*field = (int)n;
		} else if (!strcmp(name, "--model")) {
			o->model = v;
		} else if (!strcmp(name, "--gpu")) {
			o->gpu = v;
		} else if (!strcmp(name, "--nodes")) {
			if (cli_int(name, v, 1, PIPETTE_MAX_NODES, &o->nodes))
				return PIPETTE_EXIT_USAGE;
		} else if (!strcmp(name, "--gpus-per-node")) {
			if (cli_int(name, v, 1, PIPETTE_MAX_GPUS, &o->gpus_per_node))
				return PIPETTE_EXIT_USAGE;
		} else if (!strcmp(name, "--nvlink-domain")) {
			if (cli_int(name, v, 1, PIPETTE_MAX_PIN, &o->nvlink_domain))
				return PIPETTE_EXIT_USAGE;
		} else if (!strcmp(name, "--compress")) {
			if (pipette_compression_parse(v, &o->cfg.compress, &err))
				return cli_error("%s", err.msg);
		} else if (!strcmp(name, "--calibration")) {
			o->calibration = v;
		} else if (!strcmp(name, "--timeline")) {
			o->timeline = v;
		} else if (!strcmp(name, "--models-dir")) {
			o->models_dir = v;
		} else if (!strcmp(name, "--global-batch")) {
			if (cli_int(name, v, 1, PIPETTE_MAX_GLOBAL_BATCH, &o->cfg.global_batch))
				return PIPETTE_EXIT_USAGE;
			o->global_batch_set = 1;
		} else if (!strcmp(name, "--seq-len")) {
			if (cli_int(name, v, 1, PIPETTE_MAX_SEQ_LEN, &o->cfg.seq_len))
				return PIPETTE_EXIT_USAGE;
			o->seq_len_set = 1;
		} else if (!strcmp(name, "--mem-fraction")) {
			if (cli_double(name, v, PIPETTE_MIN_MEM_FRACTION, PIPETTE_MAX_MEM_FRACTION,
				       &o->mem_fraction))
				return PIPETTE_EXIT_USAGE;
		} else if (!strcmp(name, "--recompute")) {
			if (pipette_recompute_parse(v, &o->cfg.recompute, &err))
				return cli_error("--recompute: %s", err.msg);
		} else if (!strcmp(name, "--schedule")) {
			if (pipette_schedule_parse(v, &o->cfg.schedule, &err))
				return cli_error("--schedule: %s", err.msg);
		} else if (!strcmp(name, "--reshard")) {
			if (pipette_reshard_parse(v, &o->reshard, &err))
				return cli_error("--reshard: %s", err.msg);
		} else if (!strcmp(name, "--attention")) {
			if (pipette_attention_parse(v, &o->cfg.attention, &err))
				return cli_error("--attention: %s", err.msg);
			o->attention_set = 1;
		} else if (!strcmp(name, "--precision")) {
			if (pipette_precision_parse(v, &o->cfg.precision, &err))
				return cli_error("--precision: %s (estimate takes one)", err.msg);
			o->precision_set = 1;
		} else if (!strcmp(name, "--bf16-layers")) {
			if (cli_bf16_layers(v, &o->cfg.bf16_first, &o->cfg.bf16_last))
				return PIPETTE_EXIT_USAGE;
		} else if ((rc = cli_moe_option(name, v, &o->cfg, &o->routing)) != CLI_NOT_MINE) {
			if (rc)
				return PIPETTE_EXIT_USAGE;
		} else if (!strcmp(name, "--stack") || !strcmp(name, "--stack-option")) {
			*(name[7] ? &o->stack_options : &o->stack) = v;
		} else if (!strcmp(name, "--format")) {
			if (cli_parse_format(v, 3, &o->fmt))
				return cli_error("--format: '%.32s': expected table or json", v);
		} else {
			return cli_error("estimate: unknown option %.64s (see pipette "
					 "estimate --help)", name);
		}
	}
	o->cfg.reshard = pipette_reshard_resolve(o->reshard, o->cfg.pp);
	if (!o->model)
		return cli_error("estimate: --model is required");
	if (!o->gpu)
		return cli_error("estimate: --gpu is required");
	return 0;
}

/* Byte counts print as integers, not as 42028851865.599998. */
static struct json_object *bytes_json(double v)
{
	return json_object_new_int64((int64_t)llround(v));
}

static struct json_object *stage_json(const struct pipette_stage_memory *s, int idx)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "stage", json_object_new_int(idx));
	json_object_object_add(o, "layers", json_object_new_int(s->layers));
	json_object_object_add(o, "inflight_microbatches", json_object_new_double(s->inflight));
	json_object_object_add(o, "params_bytes", bytes_json(s->params_bytes));
	json_object_object_add(o, "grads_bytes", bytes_json(s->grads_bytes));
	json_object_object_add(o, "optimizer_bytes", bytes_json(s->optimizer_bytes));
	json_object_object_add(o, "activations_bytes", bytes_json(s->activations_bytes));
	json_object_object_add(o, "other_bytes", bytes_json(s->other_bytes));
	json_object_object_add(o, "reserve_bytes", bytes_json(s->reserve_bytes));
	json_object_object_add(o, "total_bytes", bytes_json(s->total_bytes));
	return o;
}

/* Predicted gain of each compression class alone and of all together:
 * iteration time without compression minus with it. */
struct compress_gains {
	int on;
	double base_s, pp_s, dp_s, emb_s, all_s;
};

static int compression_gains(struct pipette_timer *timer, const struct pipette_model *m,
			     const struct pipette_gpu_spec *g, const struct pipette_config *c,
			     const struct pipette_cluster *cl, double with_all,
			     struct compress_gains *out, struct pipette_err *err)
{
	struct pipette_config k = *c;
	struct pipette_time t;

	memset(out, 0, sizeof(*out));
	if (!pipette_compression_enabled(&c->compress))
		return 0;
	out->on = 1;
	memset(&k.compress, 0, sizeof(k.compress));
	if (pipette_time_estimate(timer, m, g, &k, cl, NULL, 0, &t, err))
		return -1;
	out->base_s = t.iteration_s;
	out->all_s = t.iteration_s - with_all;
	if (c->compress.pp_rank) {
		k.compress.pp_rank = c->compress.pp_rank;
		k.compress.pp_epilogue_only = c->compress.pp_epilogue_only;
		if (pipette_time_estimate(timer, m, g, &k, cl, NULL, 0, &t, err))
			return -1;
		out->pp_s = out->base_s - t.iteration_s;
		memset(&k.compress, 0, sizeof(k.compress));
	}
	if (c->compress.dp_rank) {
		k.compress.dp_rank = c->compress.dp_rank;
		k.compress.dp_stages = c->compress.dp_stages;
		if (pipette_time_estimate(timer, m, g, &k, cl, NULL, 0, &t, err))
			return -1;
		out->dp_s = out->base_s - t.iteration_s;
		memset(&k.compress, 0, sizeof(k.compress));
	}
	if (c->compress.fused_embedding) {
		k.compress.fused_embedding = 1;
		if (pipette_time_estimate(timer, m, g, &k, cl, NULL, 0, &t, err))
			return -1;
		out->emb_s = out->base_s - t.iteration_s;
	}
	return 0;
}

static struct json_object *gains_json(const struct compress_gains *g, const struct pipette_config *c)
{
	struct json_object *o = json_object_new_object();
	char spec[96];

	pipette_compression_format(&c->compress, spec, sizeof(spec));
	json_object_object_add(o, "spec", json_object_new_string(spec));
	json_object_object_add(o, "uncompressed_iteration_s", json_object_new_double(g->base_s));
	json_object_object_add(o, "gain_pp_s", json_object_new_double(g->pp_s));
	json_object_object_add(o, "gain_dp_s", json_object_new_double(g->dp_s));
	json_object_object_add(o, "gain_emb_s", json_object_new_double(g->emb_s));
	json_object_object_add(o, "gain_total_s", json_object_new_double(g->all_s));
	return o;
}

static void print_gains(const struct compress_gains *g)
{
	if (!g->on)
		return;
	printf("\ncompression what-if (changes training numerics): %.3f s -> %.3f s "
	       "(%.1f%% faster)\n", g->base_s, g->base_s - g->all_s,
	       100.0 * g->all_s / g->base_s);
	printf("  alone: PP backward %+.3f s   DP gradients %+.3f s   embedding %+.3f s\n",
	       -g->pp_s, -g->dp_s, -g->emb_s);
}

static struct json_object *throughput_json(const struct pipette_time *t)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "tokens_per_s", json_object_new_double(t->tokens_per_s));
	json_object_object_add(o, "tflops_per_gpu", json_object_new_double(t->tflops_per_gpu));
	json_object_object_add(o, "mfu", json_object_new_double(t->mfu));
	json_object_object_add(o, "model_flops", json_object_new_double(t->model_flops));
	return o;
}

static void print_json(const struct pipette_model *m, const struct pipette_gpu_spec *g,
		       const struct pipette_config *c, const struct pipette_memory *mem,
		       const struct pipette_stage_memory *stages, const struct pipette_time *t,
		       const struct compress_gains *gains)
{
	struct json_object *root = json_object_new_object(), *jm, *arr;
	int s;

	json_object_object_add(root, "model", json_object_new_string(m->name));
	json_object_object_add(root, "gpu", json_object_new_string(g->name));
	json_object_object_add(root, "config", pipette_config_json(c));
	jm = json_object_new_object();
	json_object_object_add(jm, "peak_bytes", bytes_json(mem->peak_bytes));
	json_object_object_add(jm, "peak_stage", json_object_new_int(mem->peak_stage));
	json_object_object_add(jm, "capacity_bytes", bytes_json(mem->capacity_bytes));
	json_object_object_add(jm, "limit_bytes", bytes_json(mem->limit_bytes));
	json_object_object_add(jm, "fits", json_object_new_boolean(mem->fits));
	json_object_object_add(jm, "params_bytes", bytes_json(mem->peak.params_bytes));
	json_object_object_add(jm, "grads_bytes", bytes_json(mem->peak.grads_bytes));
	json_object_object_add(jm, "optimizer_bytes",
			       bytes_json(mem->peak.optimizer_bytes));
	json_object_object_add(jm, "activations_bytes",
			       bytes_json(mem->peak.activations_bytes));
	json_object_object_add(jm, "other_bytes", bytes_json(mem->peak.other_bytes));
	json_object_object_add(jm, "reserve_bytes", bytes_json(mem->peak.reserve_bytes));
	arr = json_object_new_array();
	for (s = 0; s < c->pp; s++)
		json_object_array_add(arr, stage_json(&stages[s], s));
	json_object_object_add(jm, "per_stage", arr);
	json_object_object_add(root, "memory", jm);
	json_object_object_add(root, "time", pipette_time_json(t));
	json_object_object_add(root, "throughput", throughput_json(t));
	if (gains->on)
		json_object_object_add(root, "compression", gains_json(gains, c));
	puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
						  JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
}

static void print_time(const struct pipette_time *t)
{
	printf("\niteration %.3f s   %.0f tokens/s   %.1f TFLOP/s per GPU   MFU %.1f%%\n",
	       t->iteration_s, t->tokens_per_s, t->tflops_per_gpu, 100 * t->mfu);
	printf("  pipeline (simulated)  %8.3f s  = compute %.3f + TP %.3f + CP %.3f + EP %.3f"
	       " + bubble %.3f\n", t->makespan_s, t->compute_s, t->tp_comm_s, t->cp_comm_s,
	       t->ep_comm_s, t->bubble_s);
	if (t->ep_comm_s > 0 || t->ep_hidden_s > 0)
		printf("  EP dispatch+combine   %8.3f s  exposed (%.3f s more hidden by overlap)\n",
		       t->ep_comm_s, t->ep_hidden_s);
	printf("  PP transfers          %8.3f s  (%.3f s on the critical path)\n",
	       t->pp_comm_s, t->pp_exposed_s);
	printf("  DP gradient sync      %8.3f s  (%.3f s exposed)\n", t->dp_comm_s,
	       t->dp_exposed_s);
	printf("  embedding sync        %8.3f s\n", t->embed_sync_s);
	printf("  optimizer step        %8.3f s\n", t->optimizer_s);
	printf("  exposed communication %8.3f s\n", t->exposed_comm_s);
	printf("  per micro-batch on the busiest stage: F %.2f ms  B %.2f ms  W %.2f ms\n",
	       1e3 * t->stage_f_s, 1e3 * t->stage_b_s, 1e3 * t->stage_w_s);
}

/* Recompute modules and the MoE execution, when they apply. */
static void print_moe(const struct pipette_model *m, const struct pipette_config *c)
{
	char mods[160];

	if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE && c->recompute_modules) {
		pipette_recompute_modules_format(c->recompute_modules, ",", mods, sizeof(mods));
		printf("recompute modules %s\n", mods);
	}
	if (!m->experts)
		return;
	printf("MoE: dispatcher %s  EP overlap %s  %s  routed tokens on the busiest rank "
	       "%.3f x topk\n", pipette_dispatcher_name(c->moe.dispatcher),
	       pipette_config_ep_overlap(c) ? "on" : "off",
	       c->moe.capacity_factor > 0 ? (c->moe.pad ? "padded to capacity" : "drops over capacity")
					  : "dropless",
	       pipette_moe_routed_factor(m, c) / m->topk);
}

static void print_table(const struct pipette_model *m, const struct pipette_gpu_spec *g,
			const struct pipette_config *c, const struct pipette_memory *mem,
			const struct pipette_stage_memory *stages)
{
	int s;

	printf("model %s (%.2fB parameters) on %s\n", m->name,
	       pipette_model_params_total(m) / 1e9, g->name);
	printf("tp %d  pp %d  dp %d  cp %d  ep %d  vpp %d  micro-batch %d  global batch %ld"
	       "  seq %ld\n", c->tp, c->pp, c->dp, c->cp, c->ep, c->vpp, c->micro_batch,
	       c->global_batch, c->seq_len);
	printf("stack %s  schedule %s  recompute %s  sequence parallel %s  distributed optimizer %s"
	       "  attention %s  micro-batches %ld\n", pipette_config_stack(c)->name,
	       pipette_schedule_name(c->schedule),
	       pipette_recompute_name(c->recompute), c->sequence_parallel ? "on" : "off",
	       c->distributed_optimizer ? "on" : "off", pipette_attention_name(c->attention),
	       pipette_config_microbatches(c));
	printf("precision %s", pipette_precision_name(c->precision));
	if (c->precision != PIPETTE_PREC_BF16 && (c->bf16_first || c->bf16_last))
		printf("  (first %d and last %d layers in bf16)", c->bf16_first, c->bf16_last);
	printf("\n");
	if (pipette_config_fsdp(c))
		printf("FSDP: shard group %d (dp_shard %d x cp %d), %d replica%s, reshard %s%s\n",
		       pipette_config_shard_group(c), c->dp_shard, c->cp,
		       pipette_config_dp_replicate(c), pipette_config_dp_replicate(c) == 1 ? "" : "s",
		       pipette_reshard_name(c->reshard),
		       c->recompute_every > 1 ? ", full recomputation every k-th layer" : "");
	print_moe(m, c);
	putchar('\n');
	printf("%5s %6s %8s %9s %9s %9s %9s %9s %9s %9s\n", "STAGE", "LAYERS", "IN-FLT",
	       "PARAMS", "GRADS", "OPTIM", "ACTIV", "OTHER", "RESERVE", "TOTAL");
	for (s = 0; s < c->pp; s++) {
		const struct pipette_stage_memory *st = &stages[s];

		printf("%5d %6d %8.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f%s\n", s,
		       st->layers, st->inflight, st->params_bytes / PIPETTE_GIB,
		       st->grads_bytes / PIPETTE_GIB, st->optimizer_bytes / PIPETTE_GIB,
		       st->activations_bytes / PIPETTE_GIB, st->other_bytes / PIPETTE_GIB,
		       st->reserve_bytes / PIPETTE_GIB, st->total_bytes / PIPETTE_GIB,
		       s == mem->peak_stage ? "  <- peak" : "");
	}
	printf("(GiB per GPU)\n\npeak %.2f GiB of %.2f GiB (limit %.2f GiB at %.0f%%): %s\n",
	       mem->peak_bytes / PIPETTE_GIB, mem->capacity_bytes / PIPETTE_GIB,
	       mem->limit_bytes / PIPETTE_GIB,
	       100.0 * mem->limit_bytes / mem->capacity_bytes,
	       mem->fits ? "fits" : "DOES NOT FIT");
}

/* Nodes named node1..nodeN with the GPU type's nominal links. */
static struct pipette_cluster *nominal_cluster(const struct estimate_opts *o,
					       const struct pipette_gpu_spec *gpu,
					       struct pipette_err *err)
{
	int world = pipette_config_world(&o->cfg);
	int G = o->gpus_per_node ? (int)o->gpus_per_node
				 : (world < gpu->gpus_per_node ? world : gpu->gpus_per_node);
	int n = o->nodes ? (int)o->nodes : (world + G - 1) / G, i;
	struct pipette_cluster *cl;
	struct pipette_gpu_spec domained = *gpu;
	char **names;

	if (o->nvlink_domain) {
		if (o->nvlink_domain % G) {
			pipette_fail(err, "--nvlink-domain %ld: not a whole number of nodes of %d "
				     "GPUs", o->nvlink_domain, G);
			return NULL;
		}
		domained.nvlink_domain_gpus = (int)o->nvlink_domain;
	}
	names = calloc((size_t)n, sizeof(*names));
	if (!names) {
		pipette_fail(err, "out of memory");
		return NULL;
	}
	for (i = 0; i < n; i++) {
		names[i] = malloc(24);
		if (names[i])
			snprintf(names[i], 24, "node%d", i + 1);
	}
	cl = pipette_cluster_create((const char *const *)names, n, G, NULL, &domained, NULL, 0,
				    err);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return cl;
}

int cmd_estimate(int argc, char **argv)
{
	struct estimate_opts o;
	struct pipette_model m;
	struct pipette_err err;
	struct pipette_memory mem;
	struct pipette_stage_memory *stages = NULL;
	struct pipette_time tm;
	struct compress_gains gains;
	struct pipette_cluster *cl = NULL;
	struct pipette_timer *timer = NULL;
	const struct pipette_gpu_spec *gpu;
	struct pipette_gpu_spec calibrated;
	struct pipette_stack stack;
	int rc = parse(argc, argv, &o);

	if (rc)
		return rc > 0 ? rc : PIPETTE_EXIT_OK;
	if ((rc = cli_check_model(o.model, o.models_dir)) ||
	    (o.calibration && (rc = cli_check_input("--calibration", o.calibration))))
		return rc;
	if (pipette_model_load(o.model, o.models_dir, &m, &err))
		return cli_error("--model: %s", err.msg);
	if (!(gpu = pipette_gpu_lookup(o.gpu, &err)))
		return cli_error("--gpu: %s", err.msg);
	if (pipette_stack_resolve(o.stack, o.stack_options, &stack, &err))
		return cli_error("--stack: %s", err.msg);
	if (o.calibration) {
		struct pipette_site_factors site;
		int missing;

		if (pipette_calibration_apply(o.calibration, gpu, &stack, o.stack_options,
					      &calibrated, &site, &missing, NULL, &err))
			return cli_error("--calibration: %s", err.msg);
		if (missing)
			fprintf(stderr, "pipette: warning: %s: its site list has no entry for %s "
				"under stack %s\n", o.calibration, gpu->name, stack.name);
		gpu = &calibrated;
	}
	o.cfg.stack = &stack;
	if (!o.attention_set)
		o.cfg.attention = stack.attention;
	if (!o.precision_set)
		o.cfg.precision = stack.default_precision;
	if (pipette_stack_precision_check(&stack, gpu, o.cfg.precision, &err))
		return cli_error("%s", err.msg);
	if (o.mem_fraction <= 0)
		o.mem_fraction = stack.mem_fraction > 0 ? stack.mem_fraction : 1.0;
	if (!pipette_stack_runs(&stack, o.cfg.schedule))
		return cli_error("--schedule %s: stack %s does not run it (see pipette stacks)",
				 pipette_schedule_name(o.cfg.schedule), stack.name);
	if (pipette_default_seq_len(&m, o.seq_len_set ? o.cfg.seq_len : 0, &o.cfg.seq_len, &err))
		return cli_error("--seq-len: %s", err.msg);
	if (!o.global_batch_set)
		o.cfg.global_batch = (long)o.cfg.dp * o.cfg.micro_batch;
	cli_stack_defaults(&m, &o.cfg);
	if (o.routing && cli_routing_imbalance(o.routing, &m, &o.cfg))
		return PIPETTE_EXIT_USAGE;
	if (pipette_config_check(&m, &o.cfg, &err))
		return cli_error("%s", err.msg);
	rc = PIPETTE_EXIT_USAGE;
	if (!(cl = nominal_cluster(&o, gpu, &err))) {
		cli_error("%s", err.msg);
		goto out;
	}
	timer = pipette_timer_create();
	stages = calloc((size_t)o.cfg.pp, sizeof(*stages));
	if (!timer || !stages) {
		cli_error("out of memory");
		goto out;
	}
	if (pipette_time_estimate(timer, &m, gpu, &o.cfg, cl, NULL, 1, &tm, &err)) {
		cli_error("%s", err.msg);
		goto out;
	}
	/* Memory uses the in-flight micro-batches of the simulated schedule. */
	pipette_memory_estimate(&m, gpu, &o.cfg, o.mem_fraction,
				pipette_timer_inflight(timer), stages, &mem);
	if (compression_gains(timer, &m, gpu, &o.cfg, cl, tm.iteration_s, &gains, &err)) {
		cli_error("%s", err.msg);
		goto out;
	}
	if (o.timeline) {
		FILE *f = fopen(o.timeline, "w");
		struct pipette_timeline_info ti = { m.name, &o.cfg, tm.dp_comm_s, 0,
						    tm.embed_sync_s, tm.optimizer_s, tm.iteration_s };

		/* what the step adds past the pipeline besides the embedding
		 * sync and the optimizer is the DP sync's tail (timing.c) */
		ti.dp_tail_s = fmax(0, tm.iteration_s - tm.makespan_s - tm.embed_sync_s -
				    tm.optimizer_s);
		if (!f || pipette_sched_write_timeline_svg(pipette_timer_sched(timer), &ti, f, &err)) {
			cli_error("--timeline %s: %s", o.timeline, f ? err.msg : "cannot create");
			if (f)
				fclose(f);
			goto out;
		}
		if (fclose(f)) {
			cli_error("--timeline %s: write failed", o.timeline);
			goto out;
		}
	}
	if (o.fmt == PIPETTE_FMT_JSON) {
		print_json(&m, gpu, &o.cfg, &mem, stages, &tm, &gains);
	} else {
		print_table(&m, gpu, &o.cfg, &mem, stages);
		print_time(&tm);
		print_gains(&gains);
	}
	rc = mem.fits ? PIPETTE_EXIT_OK : PIPETTE_EXIT_NOFIT;
out:
	free(stages);
	pipette_timer_destroy(timer);
	pipette_cluster_destroy(cl);
	return rc;
}
