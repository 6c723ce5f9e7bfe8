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

/* The fields of the plan at torchtitan HEAD (token-based batch fields,
 * num_pp_microbatches); 0, or -1 when the plan has what HEAD cannot say. */
static int head_fields(const struct pipette_plan *plan, struct tt_field *f, int *n)
{
	const struct pipette_config *c = &plan->cfg;
	long mb = pipette_config_microbatches(c);
	int k = 0;

#define FIELD(sec, nm, ...) do { f[k].section = sec; f[k].name = nm; \
	snprintf(f[k].value, sizeof(f[k].value), __VA_ARGS__); k++; } while (0)
	if (!torch_schedule(c->schedule) || c->recompute_every > 1)
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
	return overrides(plan, f, n, buf, len);
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
	if (c->pp > 1)
		fprintf(out, "pipeline_parallel_schedule = \"%s\"\n"
			"pipeline_parallel_layers_per_stage = %d\n"
			"pipeline_parallel_microbatch_size = %d\n",
			torch_schedule(c->schedule),
			plan->model.layers / (c->pp * pipette_config_chunks(c)), c->micro_batch);
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
}

/* torchtitan's own config function for pipette's Llama 3 presets
 * (torchtitan/models/llama3/config_registry.py: llama3_8b, llama3_70b,
 * llama3_405b; torchtitan.md §1, §8), or NULL. */
static const char *base_config(const char *model, char *buf, size_t len)
{
	static const char *const known[] = { "llama3-8b", "llama3-70b", "llama3-405b" };
	size_t i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(model, known[i])) {
			snprintf(buf, len, "llama3_%s", model + 7);
			return buf;
		}
	return NULL;
}

int pipette_plan_write_torchtitan(const struct pipette_plan *plan, FILE *out)
{
	struct tt_field f[TT_MAX_FIELDS];
	char args[2048], base[32];
	const char *fn = base_config(plan->model.name, base, sizeof(base));
	int n, i, head;

	head = head_fields(plan, f, &n) == 0;
	fprintf(out, "# pipette plan %s for torchtitan: %s\n", plan->hash, plan->model.name);
	if (head) {
		fprintf(out, "# A recipe module for torchtitan after v0.2.2: torchrun ... -m "
			"torchtitan.train --module <this module> --config pipette_plan\n");
		if (fn)
			fprintf(out, "from torchtitan.models.llama3.config_registry import %s as base\n",
				fn);
		else
			fprintf(out, "# %s has no config function in torchtitan: import yours as base\n"
				"from my_configs import my_base as base\n", plan->model.name);
		fprintf(out, "from torchtitan.distributed.activation_checkpoint import FullAC, "
			"SelectiveAC\n\n\ndef pipette_plan():\n    c = base()\n");
		for (i = 0; i < n; i++)
			fprintf(out, "    c.%s.%s = %s\n", f[i].section, f[i].name, f[i].value);
		fprintf(out, "    c.activation_checkpoint = %s\n    return c\n", head_ac(&plan->cfg));
		if (overrides(plan, f, n, args, sizeof(args)) == 0)
			fprintf(out, "\n# The same as overrides of --module llama3 --config %s "
				"(accepted, frozen):\n# %s\n", fn ? fn : "<yours>", args);
	} else {
		why_not(plan, args, sizeof(args));
		fprintf(out, "# No recipe for torchtitan after v0.2.2: %s.\n", args);
	}
	fprintf(out, "\n# The TOML job file of torchtitan up to v0.2.2:\n");
	write_toml(plan, out);
	return ferror(out) ? -1 : 0;
}
