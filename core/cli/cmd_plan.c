/* pipette plan: what the SPANK plugin would choose for a job, and why. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hostlist.h"
#include "progress.h"
#include "inputs/limits.h"
#include "estimate/memory.h"
#include "plan/plan.h"

static const char usage_text[] =
"usage: pipette plan --model M --nodes LIST|N --gpu TYPE --global-batch B\n"
"                    [--seq-len S] [--stack NAME] [OPTIONS]\n"
"\n"
"Search the parallel configuration (TP/PP/DP/CP/EP, schedule, micro batch,\n"
"recomputation, ...) for all GPUs of the nodes, prune by memory, rank by\n"
"predicted iteration time on the links, and assign ranks to GPUs.\n"
"\n"
"  --model NAME|PATH        preset (pipette models) or a Hugging Face config.json\n"
"  --models-dir DIR         where NAME.json model configs may also be found\n"
"  --nodes LIST|N           Slurm hostlist (gpu[01-16]) or a count (node1..nodeN)\n"
"  --gpus-per-node G        GPUs per node (the GPU type's board, 8)\n"
"  --gpu-ids LIST           Slurm's GPU indices on each node (0..G-1), e.g. 0,1,4,5\n"
"  --gpu TYPE               GPU type (pipette gpus)\n"
"  --bandwidth FILE         bandwidth cache (pipette-bandwidth(5)); without it\n"
"                           every link gets the GPU type's nominal figures\n"
"  --max-age DAYS           warn when a figure of the cache used is older, or\n"
"                           has no timestamp (0: never, the default)\n"
"  --global-batch B         sequences per iteration\n"
"  --seq-len S              tokens per sequence (the model's context length)\n"
"  --stack NAME             the training stack the job runs: megatron (the\n"
"                           default), nemo, megatron-zb, megatron-2022,\n"
"                           torchtitan, composer-fsdp (estimate only)\n"
"                           (pipette stacks lists what each assumes)\n"
"  --stack-option K=V[,K=V] override a fact of the stack: grad_reduce=fp32|bf16,\n"
"                           tp_overlap=on|off, dp_overlap=on|off,\n"
"                           wgrad_deferral=N, reserve=F, adam_states=fp32|bf16,\n"
"                           compile=on|off (torchtitan)\n"
"  pins (the search keeps them fixed):\n"
"  --tp N --pp N --dp N --cp N --ep N --etp N --vpp N --micro-batch N\n"
"  --dp-shard N             FSDP stacks: shard over N x cp GPUs (dp/N replicas)\n"
"  --reshard default|always|never  FSDP: gather again for backward, or keep\n"
"  --schedule S[,S...]      1f1b, interleaved, zb-h1, v-min, v-half, v-zb,\n"
"                           gpipe, interleaved-zb, zbv, dualpipe-v: one pins\n"
"                           it, a list is what the search chooses from\n"
"  --recompute none|selective|full\n"
"  --recompute-every K      full recomputation of every K-th layer (torchtitan)\n"
"  --recompute-modules M[,M...]  selective recomputation of Megatron-Core's\n"
"                           modules: core_attn, moe_act, layernorm,\n"
"                           mla_up_proj, mlp, moe, shared_experts\n"
"  --dispatcher alltoall|deepep  MoE token dispatcher (megatron, nemo)\n"
"  --ep-overlap on|off      overlap EP dispatch/combine in combined 1F1B\n"
"  MoE facts of the job (not searched):\n"
"  --capacity-factor F      drop tokens over F x an expert's share (0: dropless)\n"
"  --pad-to-capacity        pad every expert to its capacity\n"
"  --imbalance F            the busiest EP rank's tokens over the mean (default:\n"
"                           balanced routing)\n"
"  --sequence-parallel | --no-sequence-parallel\n"
"  --distributed-optimizer | --no-distributed-optimizer\n"
"  --precision R[,R]        the linear layers' precision recipe, or the set the\n"
"                           search may choose from: bf16, fp8-delayed,\n"
"                           fp8-current, fp8-rowwise, fp8-blockwise, mxfp8,\n"
"                           nvfp4 (the stack's default: bf16, deepseek's\n"
"                           fp8-blockwise); never changed unasked\n"
"  --bf16-layers F,L        keep the first F and last L layers in BF16 (0,0)\n"
"  --nvlink-domain N        GPUs sharing one NVLink domain, a multiple of the\n"
"                           GPUs per node (the GPU type's system: 72 on\n"
"                           GB200/GB300 NVL72, else one node); TP, CP and EP\n"
"                           groups may span the nodes of one domain\n"
"  --topology FILE          Slurm's topology.conf: each topology/block block\n"
"                           (BlockName=... Nodes=...) is one NVLink domain\n"
"  --attention flash|unfused  the attention kernel (the stack's: flash, or\n"
"                           unfused for megatron-2022)\n"
"  --mem-fraction F         usable fraction of HBM (the stack's rule: all of it\n"
"                           with the allocator's reserve counted; 0.8 for\n"
"                           megatron-2022)\n"
"  --top K                  configurations listed (5)\n"
"  --launch srun|torchrun   one task per GPU (any mapping) or per node (srun)\n"
"  --mapping optimize|block search the rank-to-GPU mapping or keep Megatron's\n"
"                           order (optimize)\n"
"  --budget N               time estimates per mapping search (by GPU count)\n"
"  --calibration FILE       GEMM and HBM figures measured by\n"
"                           pipette-probe --local --json FILE on this GPU type\n"
"  --compress SPEC          apply communication compression to every candidate\n"
"                           (pp:R[:epilogue],dp:R[:stages=K],emb; Optimus-CC)\n"
"  --allow-compression      let the plan add Optimus-CC compression where it is\n"
"                           predicted faster (it changes training numerics)\n"
"  --format table|json|env|megatron|nemo|torchtitan|launch|sbatch   (table;\n"
"                           megatron, nemo: the command line to run, shell-\n"
"                           quoted, with CUDA_DEVICE_MAX_CONNECTIONS where the\n"
"                           stack asserts it; launch: the same in the stack's\n"
"                           own form (Megatron-LM, NeMo or torchtitan under\n"
"                           torchrun); torchtitan: a recipe module, its\n"
"                           --parallelism.* overrides and the v0.2.2 TOML;\n"
"                           sbatch: a batch script that runs the plan without\n"
"                           the plugin)\n"
"  --trainer CMD            the training command the megatron, nemo, launch and\n"
"                           sbatch formats run before the plan's arguments\n"
"                           (python pretrain_gpt.py; nemo llm pretrain -y;\n"
"                           -m torchtitan.train --module M --config C after\n"
"                           torchrun)\n"
"\n"
"Exit status: 0 planned, 1 no configuration fits, 2 bad arguments or input.\n";

/* "--tp" ... "--micro-batch": the pins' own table (config.h). */
static int *pin_field(struct pipette_pins *p, const char *name)
{
	return !strncmp(name, "--", 2) ? pipette_pin_slot(p, name + 2) : NULL;
}

static int parse_gpu_ids(const char *s, int *ids, long *n)
{
	struct pipette_err err;
	char buf[512], *tok, *save = NULL;
	long v;

	*n = 0;
	if (pipette_strlcpy(buf, s, sizeof(buf)))
		return cli_error("--gpu-ids: list too long");
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*n == PIPETTE_MAX_GPUS)
			return cli_error("--gpu-ids: more than %d GPUs", PIPETTE_MAX_GPUS);
		if (pipette_parse_long(tok, 0, 1 << 20, &v, "--gpu-ids", &err))
			return cli_error("%s", err.msg);
		ids[(*n)++] = (int)v;
	}
	return *n ? 0 : cli_error("--gpu-ids: empty list");
}

struct plan_opts {
	struct pipette_request req;
	const char *nodes;
	long gpus_per_node, n_ids;
	int gpu_ids[PIPETTE_MAX_GPUS];
	enum pipette_format fmt;
	const char *trainer;
	int have_batch, have_seq;
};

/* The options that take a value (the flags are matched first). */
static const char *const value_options[] = {
	"--tp", "--pp", "--dp", "--cp", "--ep", "--etp", "--vpp", "--micro-batch",
	"--model", "--models-dir", "--bandwidth", "--gpu", "--nodes", "--gpus-per-node",
	"--gpu-ids", "--global-batch", "--seq-len", "--mem-fraction", "--top",
	"--calibration", "--compress", "--budget", "--schedule", "--attention",
	"--recompute", "--launch", "--mapping", "--format", "--max-age", "--stack",
	"--stack-option", "--dp-shard", "--recompute-every", "--reshard", "--recompute-modules",
	"--dispatcher", "--ep-overlap", "--capacity-factor", "--imbalance", "--precision",
	"--bf16-layers", "--nvlink-domain", "--trainer", "--topology", NULL
};

/* A parse_* helper's answer for an option that is not its own. */
#define NOT_MINE (-1)

/* The options without a value; 1 if `a` is one of them. */
static int parse_flag(struct plan_opts *o, const char *a)
{
	if (!strcmp(a, "--sequence-parallel") || !strcmp(a, "--no-sequence-parallel")) {
		o->req.pins.sequence_parallel = a[2] != 'n';
		return 1;
	}
	if (!strcmp(a, "--distributed-optimizer") || !strcmp(a, "--no-distributed-optimizer")) {
		o->req.pins.distributed_optimizer = a[2] != 'n';
		return 1;
	}
	if (!strcmp(a, "--pad-to-capacity")) {
		o->req.moe.pad = 1;
		return 1;
	}
	if (!strcmp(a, "--allow-compression")) {
		o->req.allow_compression = 1;
		return 1;
	}
	return 0;
}

/* Names and paths, copied into the request. */
static int parse_text(struct plan_opts *o, const char *name, const char *v)
{
#define REQ_FIELD(f) offsetof(struct pipette_request, f), sizeof(((struct pipette_request *)0)->f)
	static const struct {
		const char *name;
		size_t off, size;
		const char *what;
	} texts[] = {
		{ "--model", REQ_FIELD(model), "name" },
		{ "--models-dir", REQ_FIELD(models_dir), "path" },
		{ "--bandwidth", REQ_FIELD(bandwidth), "path" },
		{ "--gpu", REQ_FIELD(gpu), "name" },
		{ "--calibration", REQ_FIELD(calibration), "path" },
		{ "--stack", REQ_FIELD(stack), "name" },
		{ "--stack-option", REQ_FIELD(stack_options), "list" },
	};
#undef REQ_FIELD
	size_t i;

	if (!strcmp(name, "--nodes")) {
		o->nodes = v;
		return 0;
	}
	if (!strcmp(name, "--trainer")) {
		if (!v[0] || strchr(v, '\n'))
			return cli_error("--trainer: expected a command on one line");
		o->trainer = v;
		return 0;
	}
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		if (!strcmp(name, texts[i].name)) {
			if (pipette_strlcpy((char *)&o->req + texts[i].off, v, texts[i].size))
				return cli_error("%s: %s too long", name, texts[i].what);
			return 0;
		}
	return NOT_MINE;
}

/* Counts, sizes and fractions, each within its limit. */
static int parse_number(struct plan_opts *o, const char *name, const char *v)
{
	long n;
	int *pin = pin_field(&o->req.pins, name);

	if (pin) {
		if (cli_int(name, v, 1, PIPETTE_MAX_PIN, &n))
			return PIPETTE_EXIT_USAGE;
		*pin = (int)n;
	} else if (!strcmp(name, "--gpus-per-node")) {
		if (cli_int(name, v, 1, PIPETTE_MAX_GPUS, &o->gpus_per_node))
			return PIPETTE_EXIT_USAGE;
	} else if (!strcmp(name, "--gpu-ids")) {
		if (parse_gpu_ids(v, o->gpu_ids, &o->n_ids))
			return PIPETTE_EXIT_USAGE;
	} else if (!strcmp(name, "--global-batch")) {
		if (cli_int(name, v, 1, PIPETTE_MAX_GLOBAL_BATCH, &o->req.global_batch))
			return PIPETTE_EXIT_USAGE;
		o->have_batch = 1;
	} else if (!strcmp(name, "--seq-len")) {
		if (cli_int(name, v, 1, PIPETTE_MAX_SEQ_LEN, &o->req.seq_len))
			return PIPETTE_EXIT_USAGE;
		o->have_seq = 1;
	} else if (!strcmp(name, "--mem-fraction")) {
		if (cli_double(name, v, PIPETTE_MIN_MEM_FRACTION, PIPETTE_MAX_MEM_FRACTION,
			       &o->req.mem_fraction))
			return PIPETTE_EXIT_USAGE;
	} else if (!strcmp(name, "--top")) {
		if (cli_int(name, v, 1, 1000, &n))
			return PIPETTE_EXIT_USAGE;
		o->req.top_k = (int)n;
	} else if (!strcmp(name, "--budget")) {
		if (cli_int(name, v, 1, 1L << 30, &o->req.budget))
			return PIPETTE_EXIT_USAGE;
	} else if (!strcmp(name, "--max-age")) {
		if (cli_double(name, v, 0, PIPETTE_MAX_AGE_DAYS, &o->req.stale_days))
			return PIPETTE_EXIT_USAGE;
	} else {
		return NOT_MINE;
	}
	return 0;
}

/* The options that name one of a few choices. */
static int parse_choice(struct plan_opts *o, const char *name, const char *v)
{
	struct pipette_err err;
	int rc;

	if (!strcmp(name, "--schedule")) {
		if (pipette_schedule_pin_parse(v, &o->req.pins, &err))
			return cli_error("--schedule: %s", err.msg);
	} else if (!strcmp(name, "--recompute")) {
		enum pipette_recompute r;

		if (pipette_recompute_parse(v, &r, &err))
			return cli_error("--recompute: %s", err.msg);
		o->req.pins.recompute = (int)r;
	} else if (!strcmp(name, "--recompute-modules")) {
		unsigned mods;

		if (pipette_recompute_modules_parse(v, &mods, &err))
			return cli_error("--recompute-modules: %s", err.msg);
		o->req.pins.recompute_modules = mods;
		if (o->req.pins.recompute < 0)
			o->req.pins.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	} else if (!strcmp(name, "--dispatcher")) {
		enum pipette_dispatcher d;

		if (pipette_dispatcher_parse(v, &d, &err))
			return cli_error("--dispatcher: %s", err.msg);
		o->req.pins.dispatcher = (int)d;
	} else if (!strcmp(name, "--ep-overlap")) {
		if (strcmp(v, "on") && strcmp(v, "off"))
			return cli_error("--ep-overlap: '%.16s': expected on or off", v);
		o->req.pins.ep_overlap = !strcmp(v, "on");
	} else if (cli_moe_fact(name, v, &o->req.moe, &rc)) {
		return rc;
	} else if (!strcmp(name, "--reshard")) {
		enum pipette_reshard r;

		if (pipette_reshard_parse(v, &r, &err))
			return cli_error("--reshard: %s", err.msg);
		o->req.pins.reshard = (int)r;
	} else if (!strcmp(name, "--attention")) {
		if (pipette_attention_parse(v, &o->req.attention, &err))
			return cli_error("--attention: %s", err.msg);
		o->req.attention_given = 1;
	} else if (!strcmp(name, "--precision")) {
		if (pipette_precision_set_parse(v, &o->req.pins.precision_set, &err))
			return cli_error("--precision: %s", err.msg);
	} else if (!strcmp(name, "--bf16-layers")) {
		return cli_bf16_layers(v, &o->req.bf16_first, &o->req.bf16_last);
	} else if (!strcmp(name, "--topology")) {
		if (pipette_strlcpy(o->req.topology, v, sizeof(o->req.topology)))
			return cli_error("--topology: path longer than %d bytes",
					 PIPETTE_PATH_MAX - 1);
		o->req.expand_hostlist = pipette_hostlist_expand;
	} else if (!strcmp(name, "--nvlink-domain")) {
		long d;

		if (cli_int(name, v, 1, PIPETTE_MAX_PIN, &d))
			return PIPETTE_EXIT_USAGE;
		o->req.nvlink_domain = (int)d;
	} else if (!strcmp(name, "--compress")) {
		if (pipette_compression_parse(v, &o->req.compress, &err))
			return cli_error("%s", err.msg);
	} else if (!strcmp(name, "--launch")) {
		if (pipette_launch_parse(v, &o->req.launch, &err))
			return cli_error("--launch: %s", err.msg);
	} else if (!strcmp(name, "--mapping")) {
		if (pipette_mapping_parse(v, &o->req.mapping, &err))
			return cli_error("--mapping: %s", err.msg);
	} else if (!strcmp(name, "--format")) {
		if (cli_parse_format(v, 255, &o->fmt))
			return cli_error("--format: '%.32s': expected table, json, env, "
					 "megatron, nemo, torchtitan, launch or sbatch", v);
	} else {
		return NOT_MINE;
	}
	return 0;
}

static int required(const struct plan_opts *o)
{
	if (!o->req.model[0])
		return cli_error("plan: --model is required");
	if (!o->req.gpu[0])
		return cli_error("plan: --gpu is required");
	if (!o->nodes)
		return cli_error("plan: --nodes is required");
	if (!o->have_batch)
		return cli_error("plan: --global-batch is required");
	return 0;
}

/* 0 with the options in *o, -1 after --help, or an exit status. */
static int parse(int argc, char **argv, struct plan_opts *o)
{
	struct cli_seen seen = { .n = 0 };
	char name[64];
	int i, rc;

	memset(o, 0, sizeof(*o));
	pipette_request_init(&o->req);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage_text, stdout);
			return -1;
		}
		if (parse_flag(o, a))
			continue;
		if (strncmp(a, "--", 2))
			return cli_error("plan: unexpected argument '%.64s'", a);
		if (cli_option(argc, argv, &i, "plan", value_options, &seen, name, sizeof(name),
			       &v))
			return PIPETTE_EXIT_USAGE;
		if ((rc = parse_text(o, name, v)) == NOT_MINE &&
		    (rc = parse_number(o, name, v)) == NOT_MINE &&
		    (rc = parse_choice(o, name, v)) == NOT_MINE)
			return cli_error("plan: unknown option %.64s (see pipette plan --help)",
					 name);
		if (rc)
			return rc;
	}
	return required(o);
}

static const char *const format_names[] = { "table", "json", "env", "megatron", "nemo",
					     "launch", "torchtitan", "sbatch" };

/* A hostlist names the plan's nodes (the batch script pins them); a count
 * names none. */
static int names_nodes(const char *nodes)
{
	return nodes[strspn(nodes, "0123456789")] != '\0';
}

/* The plan in o's format: 0, -1 when writing failed, or
 * PIPETTE_EXIT_USAGE when the format cannot say the plan (printed, with
 * the stack and the setting). */
static int write_format(const struct plan_opts *o, const struct pipette_plan *plan)
{
	static const enum pipette_line_form lines[] = {
		[PIPETTE_FMT_MEGATRON] = PIPETTE_LINE_MEGATRON, [PIPETTE_FMT_NEMO] = PIPETTE_LINE_NEMO,
		[PIPETTE_FMT_LAUNCH] = PIPETTE_LINE_STACK,
	};
	struct pipette_sbatch_opts so = { o->trainer, names_nodes(o->nodes) ? o->nodes : NULL, NULL };
	char buf[8192];
	int rc;

	switch (o->fmt) {
	case PIPETTE_FMT_JSON:
		return pipette_plan_write_json(plan, stdout);
	case PIPETTE_FMT_ENV:
		return pipette_plan_write_env(plan, stdout);
	case PIPETTE_FMT_MEGATRON:
	case PIPETTE_FMT_NEMO:
	case PIPETTE_FMT_LAUNCH:
		rc = pipette_plan_launch_line(plan, lines[o->fmt], o->trainer, buf, sizeof(buf));
		if (!rc)
			return puts(buf) < 0 ? -1 : 0;
		break;
	case PIPETTE_FMT_TORCHTITAN:
		if (!(rc = pipette_plan_torchtitan_check(plan, buf, sizeof(buf))))
			return pipette_plan_write_torchtitan(plan, stdout);
		break;
	case PIPETTE_FMT_SBATCH:
		rc = pipette_plan_write_sbatch(plan, &so, stdout, buf, sizeof(buf));
		break;
	default:
		return pipette_plan_write_table(plan, stdout);
	}
	if (rc != 1)
		return rc;
	return cli_error("plan: --format %s: %s", format_names[o->fmt], buf);
}

int cmd_plan(int argc, char **argv)
{
	struct plan_opts o;
	struct pipette_cluster_spec cs;
	struct pipette_plan *plan = NULL;
	struct pipette_err err;
	const struct pipette_gpu_spec *gpu;
	char **names = NULL;
	struct cli_progress progress;
	int n = 0, rc = parse(argc, argv, &o), G, prc;

	if (rc)
		return rc > 0 ? rc : PIPETTE_EXIT_OK;
	/* Input files the plan reads, refused before the search starts. */
	if ((rc = cli_check_model(o.req.model, o.req.models_dir[0] ? o.req.models_dir : NULL)) ||
	    (o.req.bandwidth[0] && (rc = cli_check_input("--bandwidth", o.req.bandwidth))) ||
	    (o.req.calibration[0] && (rc = cli_check_input("--calibration", o.req.calibration))))
		return rc;
	if (!(gpu = pipette_gpu_lookup(o.req.gpu, &err)))
		return cli_error("--gpu: %s", err.msg);
	G = o.gpus_per_node ? (int)o.gpus_per_node
	    : o.n_ids ? (int)o.n_ids : gpu->gpus_per_node;
	if (o.n_ids && o.n_ids != G)
		return cli_error("--gpu-ids lists %ld GPUs, --gpus-per-node says %d",
				 o.n_ids, G);
	if (cli_expand_nodes(o.nodes, &names, &n, &err))
		return cli_error("--nodes: %s", err.msg);
	memset(&cs, 0, sizeof(cs));
	cs.nodes = n;
	cs.node_names = (const char *const *)names;
	cs.gpus_per_node = G;
	cs.gpu_ids = o.n_ids ? o.gpu_ids : NULL;
	cli_progress_start(&progress, "pipette", &o.req.progress);
	prc = pipette_plan_compute(&o.req, &cs, &plan, &err);
	cli_progress_end(&progress);
	if (prc) {
		rc = pipette_err_code(&err) == PIPETTE_E_NOFIT ? PIPETTE_EXIT_NOFIT
							       : PIPETTE_EXIT_USAGE;
		cli_error("%s", err.msg);
		goto out;
	}
	if (*pipette_plan_warnings(plan) && o.fmt != PIPETTE_FMT_TABLE)
		fprintf(stderr, "pipette: warning: %s\n", pipette_plan_warnings(plan));
	rc = write_format(&o, plan);
	if (rc > 0)
		goto out;	/* refused, with the reason printed */
	if (rc) {
		rc = cli_error("plan: writing the output failed");
		goto out;
	}
	rc = PIPETTE_EXIT_OK;
out:
	pipette_plan_destroy(plan);
	pipette_hostlist_free(names, n);
	return rc;
}
