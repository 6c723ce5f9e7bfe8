/* pipette: the plan as one command line a shell runs as printed (`pipette
 * plan --format megatron|nemo|launch`): the environment the stack asserts
 * (CUDA_DEVICE_MAX_CONNECTIONS), the trainer and the plan's arguments,
 * every word shell-quoted so that a pipeline layout's '|' or a NeMo list's
 * brackets and quotes reach the trainer unchanged.  The rules each line is
 * checked against: tests/data/stacks/launch-rules.tsv. */
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"

/* The trainers each form runs unless told otherwise: Megatron-LM's GPT
 * entry point (pretrain_gpt.py at the root of NVIDIA/Megatron-LM), NeMo's
 * CLI, whose -y skips the confirmation prompt a non-interactive task
 * cannot answer (NVIDIA/NeMo @8cfedd72 nemo/collections/llm/recipes/
 * README.md:24,36-37), Megatron-Bridge's per-rank performance entry point
 * from the root of its checkout (NVIDIA-NeMo/Megatron-Bridge @067f987d
 * scripts/performance/setup_experiment.py:67, 149-165: python with
 * bootstrap.py, which then runs run_script.py), and torchtitan's trainer
 * under torchrun
 * (torchtitan.md §1). */
#define MEGATRON_TRAINER PIPETTE_MEGATRON_TRAINER
#define NEMO_TRAINER PIPETTE_NEMO_TRAINER

static enum pipette_line_form stack_line(const struct pipette_plan *plan)
{
	return plan->stack.form == PIPETTE_FORM_NEMO ? PIPETTE_LINE_NEMO : PIPETTE_LINE_MEGATRON;
}

/* The plan's arguments in the form, and the trainer to put before them
 * (entry: room for torchtitan's); the renderer's 0/1/-1. */
static int form_args(const struct pipette_plan *plan, enum pipette_line_form form,
		     const char *trainer, char *args, size_t len, char *entry, size_t elen,
		     const char **run)
{
	if (form == PIPETTE_LINE_STACK && plan->stack.form == PIPETTE_FORM_NONE) {
		snprintf(args, len, "stack %s is estimate-only: it has no launch form",
			 plan->stack.name);
		return 1;
	}
	if (form == PIPETTE_LINE_STACK && plan->stack.form == PIPETTE_FORM_TORCHTITAN) {
		char ep[256];
		int rc;

		if ((rc = pipette_plan_torchtitan_args(plan, args, len)))
			return rc;
		if (!trainer && pipette_plan_torchtitan_entry(plan, ep, sizeof(ep))) {
			snprintf(args, len, "%s", ep);
			return 1;
		}
		/* torchrun starts the node's G processes; the entry point
		 * follows its options */
		snprintf(entry, elen, "torchrun --nnodes=%d --nproc-per-node=%d %s", plan->nodes,
			 plan->G, trainer ? trainer : ep);
		*run = entry;
		return 0;
	}
	if (form == PIPETTE_LINE_STACK && plan->stack.form == PIPETTE_FORM_BRIDGE) {
		*run = trainer ? trainer : PIPETTE_BRIDGE_TRAINER;
		return pipette_plan_bridge_args(plan, args, len);
	}
	if (form == PIPETTE_LINE_STACK)
		form = stack_line(plan);
	if (form == PIPETTE_LINE_NEMO) {
		*run = trainer ? trainer : NEMO_TRAINER;
		return pipette_plan_nemo_args(plan, args, len);
	}
	*run = trainer ? trainer : MEGATRON_TRAINER;
	return pipette_plan_megatron_args(plan, args, len);
}

int pipette_plan_launch_line(const struct pipette_plan *plan, enum pipette_line_form form,
			     const char *trainer, char *buf, size_t len)
{
	char args[4096], entry[512];
	const char *run = NULL;
	struct pipette_args a = { buf, len, 0, 0 };
	int rc, cdmc = pipette_plan_device_max_connections(plan);

	if (!len)
		return -1;
	buf[0] = '\0';
	rc = form_args(plan, form, trainer, args, sizeof(args), entry, sizeof(entry), &run);
	if (rc) {
		if (rc == 1)
			snprintf(buf, len, "%s", args);
		return rc;
	}
	if (cdmc)
		pipette_arg(&a, "CUDA_DEVICE_MAX_CONNECTIONS=%d ", cdmc);
	pipette_arg(&a, "%s ", run);
	pipette_shell_words(&a, args);
	return !a.bad && a.n < len ? 0 : -1;
}
