/* pipette: the plan as torchtitan reads it.  Every field written here is
 * a field of torchtitan's config classes, listed with its source line in
 * tests/data/stacks/torchtitan-config.tsv (pytorch/torchtitan @b5bcd76,
 * and v0.2.2 for the TOML form); tests/unit/test_launch.c checks each
 * emitted name against that list.
 *  - the recipe: a Python function returning a Trainer.Config derived
 *    from the user's base config function (torchtitan/config/README.md);
 *  - the same fields as command-line overrides (--parallelism.* ...,
 *    frozen but still accepted, and what the plugin exports);
 *  - the TOML job file of releases up to v0.2.2. */
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"

/* get_schedule_class's names (tests/data/stacks/torch-schedules.md). */
static const char *torch_schedule(enum pipette_schedule_kind k)
{
	switch (k) {
	case PIPETTE_SCHED_1F1B: return "1F1B";
	case PIPETTE_SCHED_INTERLEAVED: return "Interleaved1F1B";
	case PIPETTE_SCHED_GPIPE: return "GPipe";
	case PIPETTE_SCHED_INTERLEAVED_ZB: return "InterleavedZeroBubble";
	case PIPETTE_SCHED_ZBV: return "ZBVZeroBubble";
	case PIPETTE_SCHED_DUALPIPE_V: return "DualPipeV";
	default: return NULL;
	}
}

/* One field: its section, name and value as Python/TOML literal text. */
struct tt_field {
	const char *section;	/* "parallelism", "training", "compile" */
	const char *name;
	char value[48];
};

#define TT_MAX_FIELDS 20

/* The linear layers' recipe in torchtitan's terms (torchtitan-config.tsv,
 * the quantization rows).  At HEAD a converter config handed to the
 * model registry, which rewrites the model config before the model is
 * built (torchtitan/models/llama3/__init__.py:369-390): torchao's rowwise
 * Float8Linear (HEAD has no tensorwise: components/quantization/
 * float8.py:58) or MXFP8Linear on the Linears whose FQN contains one of
 * fqns (mx.py:53-58, 84-86).  Up to v0.2.2 a model converter named in
 * [model] converters with its [quantize.linear.*] section (job_config.py
 * :118, 738-791 @v0.2.2).  Both skip the Linears whose FQN contains a
 * filter_fqns entry (utils.py:16-30): the output layer, which pipette's
 * model keeps in BF16 (lm_head at HEAD, output in v0.2.2), and
 * "layers.<i>." for each BF16 layer at the ends (the trailing dot keeps
 * layers.1. from matching layers.10., as nvfp4.py:248-265 does). */
static const struct tt_recipe {
	const char *head;	/* HEAD's converter class; NULL: none */
	const char *toml;	/* v0.2.2's: quantize.linear.<toml> */
	const char *recipe;	/* its recipe_name */
} tt_recipes[PIPETTE_PREC_COUNT] = {
	[PIPETTE_PREC_FP8_CURRENT] = { NULL, "float8", "tensorwise" },
	[PIPETTE_PREC_FP8_ROWWISE] = { "Float8LinearConverter", "float8", "rowwise" },
	[PIPETTE_PREC_MXFP8] = { "MXFP8LinearConverter", "mx", "mxfp8_cublas" },
};

static int preset_mtp(const char *model);

/* Whether the plan's recipe needs no converter, or HEAD has its one. */
static int head_recipe(const struct pipette_config *c)
{
	return c->precision == PIPETTE_PREC_BF16 || tt_recipes[c->precision].head;
}

/* The fields of the plan at torchtitan HEAD (token-based batch fields,
 * num_pp_microbatches); 0, or -1 when the plan has what HEAD cannot say. */
static int head_fields(const struct pipette_plan *plan, struct tt_field *f, int *n)
{
	const struct pipette_config *c = &plan->cfg;
	long mb = pipette_config_microbatches(c);
	int k = 0;

#define FIELD(sec, nm, ...) do { f[k].section = sec; f[k].name = nm; \
	snprintf(f[k].value, sizeof(f[k].value), __VA_ARGS__); k++; } while (0)
	if (!torch_schedule(c->schedule) || c->recompute_every > 1 || !head_recipe(c))
		return -1;
	FIELD("parallelism", "data_parallel_replicate_degree", "%d", pipette_config_dp_replicate(c));
	FIELD("parallelism", "data_parallel_shard_degree", "%d", c->dp_shard);
	FIELD("parallelism", "fsdp_reshard_after_forward", "\"%s\"",
	      pipette_reshard_name(c->reshard));
	FIELD("parallelism", "tensor_parallel_degree", "%d", c->tp);
	FIELD("parallelism", "context_parallel_degree", "%d", c->cp);
	FIELD("parallelism", "expert_parallel_degree", "%d", c->ep);
	FIELD("parallelism", "pipeline_parallel_degree", "%d", c->pp);
	if (c->pp > 1) {
		FIELD("parallelism", "pipeline_parallel_schedule", "\"%s\"", torch_schedule(c->schedule));
		FIELD("parallelism", "pipeline_parallel_layers_per_stage", "%d",
		      plan->model.layers / (c->pp * pipette_config_chunks(c)));
		FIELD("parallelism", "pipeline_parallel_first_stage_less_layers", "0");
		FIELD("parallelism", "pipeline_parallel_last_stage_less_layers", "0");
		/* every micro-batch of the step goes through the pipeline */
		FIELD("parallelism", "num_pp_microbatches", "%ld", mb);
		FIELD("training", "disable_cuda_graphs", "True");
	}
	FIELD("training", "max_context_length", "%ld", c->seq_len);
	FIELD("training", "num_tokens_per_microbatch_per_dp_rank", "%ld",
	      (long)c->micro_batch * c->seq_len);
	FIELD("training", "num_tokens_per_train_step", "%ld", c->global_batch * c->seq_len);
	FIELD("compile", "enable", "%s", plan->stack.elementwise_factor < 1.5 ? "True" : "False");
	/* async TP: CompileConfig at HEAD (torchtitan-config.tsv) */
	if (plan->stack.async_tp && c->tp > 1)
		FIELD("compile", "enable_async_tensor_parallel", "True");
#undef FIELD
	*n = k;
	return 0;
}

/* activation_checkpoint at HEAD: a config class, or None. */
static const char *head_ac(const struct pipette_config *c)
{
	return c->recompute == PIPETTE_RECOMPUTE_FULL ? "FullAC.Config()"
	       : c->recompute == PIPETTE_RECOMPUTE_SELECTIVE ? "SelectiveAC.Config()" : "None";
}

/* The tyro subcommand that picks the same class on the command line. */
static const char *head_ac_cli(const struct pipette_config *c)
{
	return c->recompute == PIPETTE_RECOMPUTE_FULL ? "full"
	       : c->recompute == PIPETTE_RECOMPUTE_SELECTIVE ? "selective" : "none";
}

/* The reason the HEAD forms cannot express the plan, in buf; returns 1. */
static int why_not(const struct pipette_plan *plan, char *buf, size_t len)
{
	if (!torch_schedule(plan->cfg.schedule))
		snprintf(buf, len, "torchtitan cannot run the %s schedule",
			 pipette_schedule_name(plan->cfg.schedule));
	else if (!tt_recipes[plan->cfg.precision].toml && !head_recipe(&plan->cfg))
		snprintf(buf, len, "torchtitan has no %s recipe (torchao's are tensorwise and "
			 "rowwise float8 and MXFP8)", pipette_precision_name(plan->cfg.precision));
	else if (!head_recipe(&plan->cfg))
		snprintf(buf, len, "torchtitan after v0.2.2 has no tensorwise float8 "
			 "(Float8LinearConverter takes rowwise or rowwise_with_gw_hp); --format "
			 "torchtitan prints the v0.2.2 TOML, which has it");
	else
		snprintf(buf, len, "torchtitan after v0.2.2 has no every-k-th-layer "
			 "checkpointing (--recompute-every %d); --format torchtitan prints the "
			 "v0.2.2 TOML, which has it", plan->cfg.recompute_every);
	return 1;
}

/* The HEAD fields as --section.field overrides and the checkpointing
 * subcommand; 0, or -1 when buf is too small. */
static int overrides(const struct pipette_plan *plan, const struct tt_field *f, int n,
		     char *buf, size_t len)
{
	struct pipette_args a = { buf, len, 0, 0 };
	int i;

	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		const char *v = f[i].value;
		size_t vl = strlen(v);

		/* the command line takes strings unquoted */
		if (vl >= 2 && v[0] == '"')
			pipette_arg(&a, "%s--%s.%s=%.*s", a.n ? " " : "", f[i].section, f[i].name,
				    (int)(vl - 2), v + 1);
		else if (!strcmp(v, "True"))	/* a flag, given when set */
			pipette_arg(&a, "%s--%s.%s", a.n ? " " : "", f[i].section, f[i].name);
		else if (strcmp(v, "False"))	/* False: every boolean's default */
			pipette_arg(&a, "%s--%s.%s=%s", a.n ? " " : "", f[i].section, f[i].name, v);
	}
	pipette_arg(&a, " activation-checkpoint:%s", head_ac_cli(&plan->cfg));
	return !a.bad && a.n < len ? 0 : -1;
}

/* 0, 1 when torchtitan after v0.2.2 cannot express the plan (buf says
 * why), -1 when buf is too small. */
int pipette_plan_torchtitan_args(const struct pipette_plan *plan, char *buf, size_t len)
{
	struct tt_field f[TT_MAX_FIELDS];
	int n;

	if (!len)
		return -1;
	if (head_fields(plan, f, &n))
		return why_not(plan, buf, len);
	if (plan->cfg.precision != PIPETTE_PREC_BF16) {
		snprintf(buf, len, "torchtitan after v0.2.2 sets the %s converter in the model "
			 "spec, which is off the command line; --format torchtitan prints a recipe "
			 "module that sets it", pipette_precision_name(plan->cfg.precision));
		return 1;
	}
	if (preset_mtp(plan->model.name) && plan->model.mtp_layers > 0) {
		snprintf(buf, len, "torchtitan after v0.2.2 sets the %d MTP layers in the model spec, "
			 "which is off the command line; --format torchtitan prints a recipe module "
			 "that sets them", plan->model.mtp_layers);
		return 1;
	}
	return overrides(plan, f, n, buf, len);
}

/* The Linears a recipe leaves in BF16, as a Python/TOML list: the
 * output layer (named out) and each BF16 layer at the ends. */
static void write_bf16_fqns(const struct pipette_plan *plan, const char *out_fqn, FILE *out)
{
	int i;

	fprintf(out, "[\"%s\"", out_fqn);
	for (i = 0; i < plan->model.layers; i++)
		if (!pipette_config_layer_lowp(&plan->model, &plan->cfg, i))
			fprintf(out, ", \"layers.%d.\"", i);
	fprintf(out, "]");
}

/* v0.2.2: the converter and its section (nothing for BF16). */
static void write_toml_recipe(const struct pipette_plan *plan, FILE *out)
{
	const struct tt_recipe *r = &tt_recipes[plan->cfg.precision];

	if (plan->cfg.precision == PIPETTE_PREC_BF16)
		return;
	if (!r->toml) {
		fprintf(out, "\n# torchtitan has no %s recipe: nothing above quantizes the "
			"linear layers\n", pipette_precision_name(plan->cfg.precision));
		return;
	}
	fprintf(out, "\n[model]\nconverters = [\"quantize.linear.%s\"]\n\n"
		"[quantize.linear.%s]\nrecipe_name = \"%s\"\nfilter_fqns = ", r->toml, r->toml,
		r->recipe);
	write_bf16_fqns(plan, "output", out);
	fprintf(out, "\n");
}

/* HEAD: the model spec rebuilt with the recipe's converter, from the
 * flavor's registry entry for torchtitan's own configs, else by
 * converting the base config's model in place (nothing for BF16). */
static void write_head_recipe(const struct pipette_plan *plan, const char *flavor,
			      const char *mtp, FILE *out)
{
	const struct pipette_config *c = &plan->cfg;
	const struct tt_recipe *r = &tt_recipes[c->precision];

	if (c->precision == PIPETTE_PREC_BF16) {
		if (flavor && mtp[0])	/* the flavor with the plan's MTP layers */
			fprintf(out, "    c.model_spec = model_registry(\"%s\"%s)\n", flavor, mtp);
		return;
	}
	if (c->bf16_first + c->bf16_last >= plan->model.layers) {
		/* an empty fqns would convert every Linear (mx.py:83) */
		fprintf(out, "    # every layer stays BF16: no %s converter\n",
			pipette_precision_name(c->precision));
		return;
	}
	fprintf(out, "    # %s in the linear layers of layers %d-%d; the rest stay BF16\n",
		pipette_precision_name(c->precision), c->bf16_first,
		plan->model.layers - c->bf16_last - 1);
	if (flavor)
		fprintf(out, "    c.model_spec = model_registry(\"%s\"%s, converters=[%s.Config(\n",
			flavor, mtp, r->head);
	else
		fprintf(out, "    # converted in place: my_base's Linear layers must not be converted "
			"already\n    c.model_spec.model = %s.Config(\n", r->head);
	if (c->precision == PIPETTE_PREC_MXFP8)
		fprintf(out, "        fqns=[f\"layers.{i}.\" for i in range(%d, %d)],\n",
			c->bf16_first, plan->model.layers - c->bf16_last);
	else {
		fprintf(out, "        recipe_name=\"%s\", filter_fqns=", r->recipe);
		write_bf16_fqns(plan, "lm_head", out);
		fprintf(out, ",\n");
	}
	fprintf(out, "        model_compile_enabled=c.compile.enable and \"model\" in "
		"c.compile.components)%s\n", flavor ? "])" : ".build().convert(c.model_spec.model)");
}

/* v0.2.2's TOML: [parallelism], [training] with local and global batch
 * sizes in sequences, [activation_checkpoint] mode and option, [compile]. */
static void write_toml(const struct pipette_plan *plan, FILE *out)
{
	const struct pipette_config *c = &plan->cfg;
	long mb = pipette_config_microbatches(c);

	fprintf(out, "[parallelism]\ndata_parallel_replicate_degree = %d\n"
		"data_parallel_shard_degree = %d\nfsdp_reshard_after_forward = \"%s\"\n"
		"tensor_parallel_degree = %d\ncontext_parallel_degree = %d\n"
		"expert_parallel_degree = %d\npipeline_parallel_degree = %d\n",
		pipette_config_dp_replicate(c), c->dp_shard, pipette_reshard_name(c->reshard),
		c->tp, c->cp, c->ep, c->pp);
	/* the embedding and the output layer weigh nothing in the split:
	 * with v0.2.2's defaults of 1 each the stage count would be
	 * ceil((layers + 2) / layers_per_stage), which PP need not divide
	 * (pytorch/torchtitan @v0.2.2 torchtitan/config/job_config.py:377-393,
	 * torchtitan/distributed/pipeline_parallel.py:66-92) */
	if (c->pp > 1)
		fprintf(out, "pipeline_parallel_schedule = \"%s\"\n"
			"pipeline_parallel_layers_per_stage = %d\n"
			"pipeline_parallel_first_stage_less_layers = 0\n"
			"pipeline_parallel_last_stage_less_layers = 0\n"
			"pipeline_parallel_microbatch_size = %d\n",
			torch_schedule(c->schedule),
			plan->model.layers / (c->pp * pipette_config_chunks(c)), c->micro_batch);
	/* async TP: [parallelism] up to v0.2.2 (torchtitan-config.tsv) */
	if (plan->stack.async_tp && c->tp > 1)
		fprintf(out, "enable_async_tensor_parallel = true\n");
	/* local_batch_size: sequences per DP rank per forward-backward
	 * step; with PP the whole pipeline's micro-batches */
	fprintf(out, "\n[training]\nlocal_batch_size = %ld\nglobal_batch_size = %ld\n"
		"seq_len = %ld\n", c->pp > 1 ? mb * c->micro_batch : (long)c->micro_batch,
		c->global_batch, c->seq_len);
	fprintf(out, "\n[activation_checkpoint]\nmode = \"%s\"\n",
		c->recompute == PIPETTE_RECOMPUTE_NONE ? "none"
		: c->recompute == PIPETTE_RECOMPUTE_FULL && c->recompute_every == 1 ? "full"
		: "selective");
	if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE)
		fprintf(out, "selective_ac_option = \"op\"\n");
	else if (c->recompute_every > 1)
		fprintf(out, "selective_ac_option = \"%d\"\n", c->recompute_every);
	fprintf(out, "\n[compile]\nenable = %s\n",
		plan->stack.elementwise_factor < 1.5 ? "true" : "false");
	write_toml_recipe(plan, out);
}

/* torchtitan's own model module, config function and flavor for pipette's
 * presets it has (pytorch/torchtitan @b5bcd76 torchtitan/models/llama3/
 * config_registry.py: llama3_8b, llama3_70b, llama3_405b, __init__.py
 * :363-365; torchtitan/models/deepseek_v3/config_registry.py:209
 * deepseek_v3_671b, __init__.py:612-627, whose model_registry takes
 * num_mtp_layers (0 by default; the debug config sets 1, :76-78);
 * torchtitan.md §1, §8), or NULL. */
static const struct tt_preset {
	const char *model, *module, *fn, *flavor;
	int mtp;	/* model_registry takes num_mtp_layers */
} tt_presets[] = {
	{ "llama3-8b", "llama3", "llama3_8b", "8B", 0 },
	{ "llama3-70b", "llama3", "llama3_70b", "70B", 0 },
	{ "llama3-405b", "llama3", "llama3_405b", "405B", 0 },
	{ "deepseek-v3", "deepseek_v3", "deepseek_v3_671b", "671B", 1 },
};

static const struct tt_preset *preset_of(const char *model)
{
	size_t i;

	for (i = 0; i < sizeof(tt_presets) / sizeof(tt_presets[0]); i++)
		if (!strcmp(model, tt_presets[i].model))
			return &tt_presets[i];
	return NULL;
}

/* Whether the model's torchtitan preset takes num_mtp_layers. */
static int preset_mtp(const char *model)
{
	const struct tt_preset *p = preset_of(model);

	return p && p->mtp;
}

/* The recipe module for torchtitan after v0.2.2, and the same as
 * command-line overrides where they can say it. */
static void write_head_module(const struct pipette_plan *plan, const struct tt_field *f, int n,
			      FILE *out)
{
	const struct tt_preset *pre = preset_of(plan->model.name);
	const struct tt_recipe *r = &tt_recipes[plan->cfg.precision];
	char args[2048], mtp[32] = "";
	int i, rc;

	if (pre && pre->mtp && plan->model.mtp_layers > 0)
		snprintf(mtp, sizeof(mtp), ", num_mtp_layers=%d", plan->model.mtp_layers);
	fprintf(out, "# A recipe module for torchtitan after v0.2.2: torchrun ... -m "
		"torchtitan.train --module <this module> --config pipette_plan\n");
	if (pre)
		fprintf(out, "from torchtitan.models.%s.config_registry import %s as base\n",
			pre->module, pre->fn);
	else
		fprintf(out, "# %s has no config function in torchtitan: import yours as base\n"
			"from my_configs import my_base as base\n", plan->model.name);
	fprintf(out, "from torchtitan.distributed.activation_checkpoint import FullAC, "
		"SelectiveAC\n");
	if (plan->cfg.precision != PIPETTE_PREC_BF16)
		fprintf(out, "from torchtitan.components.quantization import %s\n", r->head);
	if (pre && (plan->cfg.precision != PIPETTE_PREC_BF16 || mtp[0]))
		fprintf(out, "from torchtitan.models.%s import model_registry\n", pre->module);
	fprintf(out, "\n\ndef pipette_plan():\n    c = base()\n");
	for (i = 0; i < n; i++)
		fprintf(out, "    c.%s.%s = %s\n", f[i].section, f[i].name, f[i].value);
	write_head_recipe(plan, pre ? pre->flavor : NULL, mtp, out);
	fprintf(out, "    c.activation_checkpoint = %s\n    return c\n", head_ac(&plan->cfg));
	rc = pipette_plan_torchtitan_args(plan, args, sizeof(args));
	if (rc == 0 && !mtp[0])
		fprintf(out, "\n# The same as overrides of --module %s --config %s "
			"(accepted, frozen):\n# %s\n", pre ? pre->module : "<yours>",
			pre ? pre->fn : "<yours>", args);
	else if (rc == 0)
		fprintf(out, "\n# No overrides: the %d MTP layers are set in the model spec, "
			"which is off the command line.\n", plan->model.mtp_layers);
	else if (rc == 1)
		fprintf(out, "\n# No overrides: %s.\n", args);
}

/* The entry point torchrun runs for the plan: torchtitan's trainer with
 * the preset's module and config function; 1 when torchtitan has none
 * for the model (the caller must be told which). */
int pipette_plan_torchtitan_entry(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct tt_preset *pre = preset_of(plan->model.name);

	if (!pre) {
		snprintf(buf, len, "torchtitan has no config function for model %s: name your "
			 "entry point with --trainer", plan->model.name);
		return 1;
	}
	snprintf(buf, len, "-m torchtitan.train --module %s --config %s", pre->module, pre->fn);
	return 0;
}

/* A plan made for another stack is not rendered in torchtitan's form: its
 * settings are ones torchtitan has no field for, or its predictions
 * another stack's.  0, or 1 with the stack and the setting in buf. */
int pipette_plan_torchtitan_check(const struct pipette_plan *plan, char *buf, size_t len)
{
	const struct pipette_config *c = &plan->cfg;
	const char *st = plan->stack.name;

	if (plan->stack.form == PIPETTE_FORM_TORCHTITAN)
		return 0;
	if (c->distributed_optimizer)
		snprintf(buf, len, "stack %s: the distributed optimizer (ZeRO-1) has no torchtitan "
			 "field (torchtitan shards with FSDP: plan with --stack torchtitan)", st);
	else if (c->first_stage_layers || c->last_stage_layers)
		snprintf(buf, len, "stack %s: uneven first/last stages (%d, %d layers) have no "
			 "torchtitan field (its split is even: plan with --stack torchtitan)", st,
			 c->first_stage_layers, c->last_stage_layers);
	else if (!torch_schedule(c->schedule))
		snprintf(buf, len, "stack %s: torchtitan cannot run the %s schedule", st,
			 pipette_schedule_name(c->schedule));
	else if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE && c->recompute_modules)
		snprintf(buf, len, "stack %s: --recompute-modules are Megatron-Core's; torchtitan's "
			 "selective checkpointing has no such field", st);
	else if (c->etp > 1 || c->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP)
		snprintf(buf, len, "stack %s: expert TP and DeepEP are Megatron-Core's settings", st);
	else
		snprintf(buf, len, "stack %s: the plan's memory and timing are that stack's (%s): "
			 "plan with --stack torchtitan", st, plan->stack.what);
	return 1;
}

int pipette_plan_write_torchtitan(const struct pipette_plan *plan, FILE *out)
{
	struct tt_field f[TT_MAX_FIELDS];
	int n;

	fprintf(out, "# pipette plan %s for torchtitan: %s\n", plan->hash, plan->model.name);
	if (head_fields(plan, f, &n) == 0)
		write_head_module(plan, f, n, out);
	else {
		char why[256];

		why_not(plan, why, sizeof(why));
		fprintf(out, "# No recipe for torchtitan after v0.2.2: %s.\n", why);
	}
	fprintf(out, "\n# The TOML job file of torchtitan up to v0.2.2:\n");
	write_toml(plan, out);
	return ferror(out) ? -1 : 0;
}
