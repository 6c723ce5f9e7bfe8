/* pipette: the plan as a batch script that runs it without the plugin
 * (`pipette plan --format sbatch`).  The script holds what spank-pipette(8)
 * would set: the job variables of the environment contract (env.c), each
 * task's rank and permuted GPU list from the plan's mapping, MASTER_ADDR
 * (rank 0's node), MASTER_PORT and WORLD_SIZE, then starts the stack's
 * command line with one task per GPU (srun mode) or torchrun on one task
 * per node (torchrun mode).
 *
 * Nodes: a plan made for named nodes pins the job to them (--nodelist)
 * and finds each task's node by name; a plan made for a count of nodes
 * takes the job's nodes in Slurm's order (SLURM_NODEID, the position in
 * `scontrol show hostnames`), any of which fits a plan whose links were
 * not measured.  GPUs: the task permutes the list Slurm gave it
 * (CUDA_VISIBLE_DEVICES), never inventing one (DESIGN.md). */
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"

/* The plugin's default port rule for a job's first step: master_port
 * 61000 + job id mod port_range 4536 (plugin/args.c DEFAULT_MASTER_PORT,
 * DEFAULT_PORT_RANGE; spank-pipette(8) master_port=). */
#define SBATCH_PORT_BASE 61000
#define SBATCH_PORT_RANGE 4536

/* What one task of the plan gets: captured from pipette_plan_task_env. */
struct task_vars {
	char rank[16], local_rank[16], order[1024];
};

static int capture(void *ctx, const char *name, const char *value)
{
	struct task_vars *t = ctx;

	if (!strcmp(name, "RANK"))
		return pipette_strlcpy(t->rank, value, sizeof(t->rank));
	if (!strcmp(name, "LOCAL_RANK"))
		return pipette_strlcpy(t->local_rank, value, sizeof(t->local_rank));
	if (!strcmp(name, "CUDA_VISIBLE_DEVICES"))
		return pipette_strlcpy(t->order, value, sizeof(t->order));
	return 0;
}

static int export_var(void *ctx, const char *name, const char *value)
{
	FILE *f = ctx;
	const char *q;

	fprintf(f, "export %s='", name);
	for (q = value; *q; q++)
		if (*q == '\'')
			fputs("'\\''", f);
		else
			fputc(*q, f);
	return fputs("'\n", f) < 0 ? -1 : 0;
}

/* The job's name: given, else pipette-MODEL with only [A-Za-z0-9._-]. */
static void job_name(const struct pipette_plan *plan, const char *given, char *buf, size_t len)
{
	const char *m = strrchr(plan->model.name, '/');
	size_t i;

	snprintf(buf, len, "%s%.48s", given ? "" : "pipette-",
		 given ? given : m ? m + 1 : plan->model.name);
	for (i = 0; buf[i]; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", buf[i]))
			buf[i] = '_';
}

/* One case arm per node: the GPU order (slot indices into the node's
 * CUDA_VISIBLE_DEVICES), and in srun mode each slot's RANK and LOCAL_RANK
 * (-1: the slot runs no rank) and the node's rank count, in torchrun mode
 * the node rank (its lowest rank over G).  0, or 1 with why. */
static int node_arms(const struct pipette_plan *plan, int torchrun, int by_name, FILE *f,
		     char *why, size_t wlen)
{
	char slot_names[PIPETTE_BW_MAX_GPUS][8];
	const char *slots[PIPETTE_BW_MAX_GPUS];
	int n, t, G = plan->G;

	for (t = 0; t < G; t++) {
		snprintf(slot_names[t], sizeof(slot_names[t]), "%d", t);
		slots[t] = slot_names[t];
	}
	for (n = 0; n < plan->nodes; n++) {
		struct task_vars v;
		struct pipette_err err;
		char ranks[1024] = "", locals[1024] = "", order[1024] = "";
		int low = -1, count = 0;

		for (t = 0; t < G; t++) {
			int r = plan->rank_at[n * G + t];

			memset(&v, 0, sizeof(v));
			if (r >= 0 && pipette_plan_task_env(plan, n, t, slots, capture, &v, &err)) {
				snprintf(why, wlen, "node %s: %s", plan->names[n], err.msg);
				return 1;
			}
			if (r >= 0) {
				pipette_strlcpy(order, v.order, sizeof(order));
				low = low < 0 || r < low ? r : low;
				count++;
			}
			snprintf(ranks + strlen(ranks), sizeof(ranks) - strlen(ranks), "%s%d",
				 t ? "," : "", r);
			snprintf(locals + strlen(locals), sizeof(locals) - strlen(locals), "%s%s",
				 t ? "," : "", r >= 0 ? v.local_rank : "-1");
		}
		if (by_name)
			fprintf(f, "%s)", plan->names[n]);
		else
			fprintf(f, "%d)", n);
		if (torchrun)
			fprintf(f, " order=%s node_rank=%d ;;\n", order, low / G);
		else
			fprintf(f, " order=%s ranks=%s locals=%s lws=%d ;;\n", order, ranks, locals,
				count);
	}
	return 0;
}

/* The trainer and the plan's arguments, shell-quoted, for the task body. */
static int command(const struct pipette_plan *plan, const char *trainer, int torchrun,
		   char *buf, size_t len, char *why, size_t wlen)
{
	char args[4096], ep[256] = "";
	struct pipette_args a = { buf, len, 0, 0 };
	int rc = pipette_plan_launch_args(plan, args, sizeof(args));

	if (rc == 1 && !args[0])
		snprintf(why, wlen, "stack %s is estimate-only: it has no launch form",
			 plan->stack.name);
	else if (rc)
		snprintf(why, wlen, "%s", rc == 1 ? args : "the launch arguments do not fit");
	if (rc)
		return 1;
	if (!trainer && plan->stack.form == PIPETTE_FORM_TORCHTITAN &&
	    pipette_plan_torchtitan_entry(plan, ep, sizeof(ep))) {
		snprintf(why, wlen, "%s", ep);
		return 1;
	}
	if (torchrun)
		pipette_arg(&a, "torchrun --nnodes=%d --nproc-per-node=%d --node-rank=\"$node_rank\" "
			    "--rdzv-backend=static --master-addr=\"$MASTER_ADDR\" "
			    "--master-port=\"$MASTER_PORT\" ", plan->nodes, plan->G);
	if (trainer)
		pipette_arg(&a, "%s ", trainer);
	else if (plan->stack.form == PIPETTE_FORM_TORCHTITAN)
		pipette_arg(&a, "%s%s ", torchrun ? "" : "python ", ep);
	else
		pipette_arg(&a, "%s ", plan->stack.form == PIPETTE_FORM_NEMO ? PIPETTE_NEMO_TRAINER
				: plan->stack.form == PIPETTE_FORM_BRIDGE ? PIPETTE_BRIDGE_TRAINER
				: PIPETTE_MEGATRON_TRAINER);
	pipette_shell_words(&a, args);
	if (a.bad || a.n >= len) {
		snprintf(why, wlen, "the command line is longer than %zu bytes", len - 1);
		return 1;
	}
	return 0;
}

/* The task body, up to the node arms (node_arms) and after them
 * (write_task_tail), read into PIPETTE_TASK for `bash -c` on every task. */
static void write_task_head(int by_name, FILE *f)
{
	fprintf(f, "read -r -d '' PIPETTE_TASK <<'PIPETTE_TASK_END' || true\nset -eu\n"
		"case $%s in\n", by_name ? "SLURMD_NODENAME" : "SLURM_NODEID");
}

static void write_task_tail(const struct pipette_plan *plan, int torchrun, const char *cmd,
			    FILE *f)
{
	int t;

	fprintf(f, "*) echo \"pipette: node $SLURMD_NODENAME ($SLURM_NODEID) is not one of the "
		"plan's %d nodes\" >&2; exit 1 ;;\nesac\n", plan->nodes);
	/* Slurm's GPUs of the node, in the order it gave them */
	fprintf(f, "IFS=, read -r -a have <<<\"${CUDA_VISIBLE_DEVICES:-");
	for (t = 0; t < plan->G; t++)
		fprintf(f, "%s%d", t ? "," : "", t);
	fprintf(f, "}\"\nif [ \"${#have[@]}\" -ne %d ]; then\n"
		"    echo \"pipette: $SLURMD_NODENAME has ${#have[@]} GPUs for this task, the plan "
		"%d\" >&2; exit 1\nfi\ncvd=\nfor i in ${order//,/ }; do cvd=${cvd:+$cvd,}${have[$i]}; "
		"done\nexport CUDA_VISIBLE_DEVICES=$cvd\n", plan->G, plan->G);
	if (!torchrun)
		fprintf(f, "IFS=, read -r -a r <<<\"$ranks\"\nIFS=, read -r -a l <<<\"$locals\"\n"
			"RANK=${r[$SLURM_LOCALID]} LOCAL_RANK=${l[$SLURM_LOCALID]}\n"
			"if [ \"$RANK\" -lt 0 ]; then exit 0; fi\n"
			"export RANK LOCAL_RANK LOCAL_WORLD_SIZE=$lws\n");
	else
		fprintf(f, "export NODE_RANK=$node_rank\n");
	fprintf(f, "exec %s\nPIPETTE_TASK_END\nexport PIPETTE_TASK\n", cmd);
}

int pipette_plan_write_sbatch(const struct pipette_plan *plan,
			      const struct pipette_sbatch_opts *o, FILE *f, char *why,
			      size_t why_len)
{
	const struct pipette_config *c = &plan->cfg;
	int torchrun = plan->req.launch == PIPETTE_LAUNCH_TORCHRUN ||
		       (plan->stack.form == PIPETTE_FORM_TORCHTITAN &&
			pipette_mapping_is_node_block(plan->gpu_of_rank, plan->world, plan->G));
	int by_name = o->nodelist != NULL, master = plan->gpu_of_rank[0] / plan->G;
	char name[64], cmd[8192];

	if (command(plan, o->trainer, torchrun, cmd, sizeof(cmd), why, why_len))
		return 1;
	job_name(plan, o->job_name, name, sizeof(name));
	fprintf(f, "#!/bin/bash\n# pipette plan %s for stack %s: %s on %d nodes x %d GPUs, tp %d "
		"pp %d dp %d cp %d ep %d, %s; predicted %.4f s per iteration.\n"
		"# Runs without the pipette plugin: sbatch this file.\n", plan->hash,
		plan->stack.name, plan->model.name, plan->nodes, plan->G, c->tp, c->pp, c->dp,
		c->cp, c->ep, pipette_schedule_name(c->schedule), plan->time.iteration_s);
	fprintf(f, "#SBATCH --job-name=%s\n#SBATCH --nodes=%d\n#SBATCH --ntasks-per-node=%d\n"
		"#SBATCH --gpus-per-node=%d\n", name, plan->nodes, torchrun ? 1 : plan->G, plan->G);
	if (by_name)
		fprintf(f, "#SBATCH --nodelist=%s\n", o->nodelist);
	fprintf(f, "set -euo pipefail\n\n# The plan's job variables (spank-pipette(8), ENVIRONMENT)\n");
	if (pipette_plan_job_env(plan, export_var, f)) {
		snprintf(why, why_len, "a job variable does not fit");
		return 1;
	}
	fprintf(f, "\n# rank 0 runs on the plan's node %s\n", plan->names[master]);
	if (by_name)
		fprintf(f, "export MASTER_ADDR=%s\n", plan->names[master]);
	else
		fprintf(f, "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | "
			"sed -n '%dp')\nexport MASTER_ADDR\n", master + 1);
	fprintf(f, "export MASTER_PORT=${MASTER_PORT:-$((%d + SLURM_JOB_ID %% %d))}\n"
		"export WORLD_SIZE=%d\n\n# Each task: its node's GPU order and ranks from the "
		"plan's mapping\n", SBATCH_PORT_BASE, SBATCH_PORT_RANGE, plan->world);
	write_task_head(by_name, f);
	if (node_arms(plan, torchrun, by_name, f, why, why_len))
		return 1;
	write_task_tail(plan, torchrun, cmd, f);
	fprintf(f, "srun --kill-on-bad-exit=1 bash -c \"$PIPETTE_TASK\"\n");
	return ferror(f) ? -1 : 0;
}
