/* pipette: the environment contract (DESIGN.md): the job variables every
 * task gets, and the per-task variables of the two launch modes.  The
 * table below is the one list of names: `pipette plan --format env` and the
 * plugin both render through it, and the plugin refuses any other name. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"

/* The job variables' values, named so that a table row and its value
 * cannot drift apart. */
enum job_value {
	V_TASK,	/* a per-task variable: pipette_plan_task_env sets it */
	V_TP, V_PP, V_DP, V_CP, V_EP, V_VPP, V_MICRO_BATCH, V_GLOBAL_BATCH, V_SCHEDULE,
	V_RECOMPUTE, V_SEQUENCE_PARALLEL, V_DISTRIBUTED_OPTIMIZER, V_MEGATRON_ARGS,
	V_ITER_S, V_MEM_GIB, V_MAPPING_GAIN, V_PLAN_HASH, V_STACK, V_LAUNCH_ARGS, V_PLAN_FILE,
	V_DEVICE_MAX_CONNECTIONS, V_DP_SHARD, V_DP_REPLICATE, V_FSDP_RESHARD, V_PRECISION,
};

static const struct {
	const char *name;
	enum job_value value;
} contract[] = {
	{ "PIPETTE_TP", V_TP }, { "PIPETTE_PP", V_PP }, { "PIPETTE_DP", V_DP },
	{ "PIPETTE_CP", V_CP }, { "PIPETTE_EP", V_EP }, { "PIPETTE_VPP", V_VPP },
	{ "PIPETTE_MICRO_BATCH", V_MICRO_BATCH }, { "PIPETTE_GLOBAL_BATCH", V_GLOBAL_BATCH },
	{ "PIPETTE_SCHEDULE", V_SCHEDULE }, { "PIPETTE_RECOMPUTE", V_RECOMPUTE },
	{ "PIPETTE_PRECISION", V_PRECISION },
	{ "PIPETTE_SEQUENCE_PARALLEL", V_SEQUENCE_PARALLEL },
	{ "PIPETTE_DISTRIBUTED_OPTIMIZER", V_DISTRIBUTED_OPTIMIZER },
	{ "PIPETTE_DP_SHARD", V_DP_SHARD }, { "PIPETTE_DP_REPLICATE", V_DP_REPLICATE },
	{ "PIPETTE_FSDP_RESHARD", V_FSDP_RESHARD },
	{ "PIPETTE_MEGATRON_ARGS", V_MEGATRON_ARGS },
	{ "PIPETTE_PREDICTED_ITER_S", V_ITER_S }, { "PIPETTE_PREDICTED_MEM_GIB", V_MEM_GIB },
	{ "PIPETTE_MAPPING_GAIN", V_MAPPING_GAIN }, { "PIPETTE_PLAN_HASH", V_PLAN_HASH },
	{ "PIPETTE_STACK", V_STACK }, { "PIPETTE_LAUNCH_ARGS", V_LAUNCH_ARGS },
	/* set by the plugin (plan_dir=DIR), not by the plan */
	{ "PIPETTE_PLAN_FILE", V_PLAN_FILE },
	{ "CUDA_DEVICE_MAX_CONNECTIONS", V_DEVICE_MAX_CONNECTIONS },
	{ "RANK", V_TASK }, { "LOCAL_RANK", V_TASK }, { "WORLD_SIZE", V_TASK },
	{ "LOCAL_WORLD_SIZE", V_TASK }, { "NODE_RANK", V_TASK }, { "MASTER_ADDR", V_TASK },
	{ "MASTER_PORT", V_TASK }, { "CUDA_VISIBLE_DEVICES", V_TASK },
	/* torchrun mode: what torchrun reads as its option defaults (PET_ +
	 * the option's name, torch/distributed/argparse_util.py env action;
	 * tests/data/stacks/torch-schedules.md §5), so that a bare `torchrun
	 * train.py` under srun uses the planned node ranks with the static
	 * rendezvous. */
	{ "PET_NODE_RANK", V_TASK }, { "PET_NNODES", V_TASK }, { "PET_NPROC_PER_NODE", V_TASK },
	{ "PET_MASTER_ADDR", V_TASK }, { "PET_MASTER_PORT", V_TASK },
	{ "PET_RDZV_BACKEND", V_TASK },
};

int pipette_env_scope(const char *name)
{
	size_t i;

	for (i = 0; name && i < sizeof(contract) / sizeof(contract[0]); i++)
		if (!strcmp(name, contract[i].name))
			return (int)(contract[i].value == V_TASK ? PIPETTE_ENV_TASK
								  : PIPETTE_ENV_JOB);
	return -1;
}

static int put(char *v, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* snprintf that fails when the value does not fit. */
static int put(char *v, size_t len, const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(v, len, fmt, ap);
	va_end(ap);
	return w >= 0 && (size_t)w < len ? 0 : -1;
}

/* CUDA_DEVICE_MAX_CONNECTIONS, 0 for unset.  Megatron-LM's validate_args
 * asserts one hardware queue when TP or CP > 1 on GPUs before Blackwell,
 * but for FSDP and the combined-1F1B EP overlap, where it only warns and
 * 1 is still allowed (NVIDIA/Megatron-LM @d98e8a64 megatron/training/
 * arguments.py:1453-1479; megatron-rules.tsv cdmc-tp-cp); the zero-bubble
 * runtime asserts at least 8 (sail-sg/zero-bubble-pipeline-parallelism
 * @39f2c186 megatron/core/zbpp_utils.py:94-101; megatron-schedules.md). */
int pipette_plan_device_max_connections(const struct pipette_plan *plan)
{
	const struct pipette_config *c = &plan->cfg;

	/* Megatron-Bridge's run script: 32 on Blackwell, 1 with TP or CP > 1
	 * without the EP all-to-all overlap, else 8, or 32 with the DeepEP
	 * (or HybridEP) backend (NVIDIA-NeMo/Megatron-Bridge @067f987d
	 * scripts/performance/utils/overrides.py:248-263).  The script
	 * installs its recipe's value only where the variable is unset
	 * (bootstrap.py:43-50), so the launch sets it every time. */
	if (plan->stack.device_max_connections == PIPETTE_CDMC_BRIDGE) {
		if (plan->gpu->fp4_tflops > 0)
			return 32;
		/* Megatron-FSDP refuses 1 (Megatron-Bridge training/config.py
		 * :1110-1111; Megatron-LM only warns with TP or CP on Hopper,
		 * megatron/training/arguments.py:1453-1465) */
		if ((c->tp > 1 || c->cp > 1) && !c->moe.ep_overlap && !plan->stack.mfsdp)
			return 1;
		return c->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP ? 32 : 8;
	}

	if (plan->stack.device_max_connections == 1 && (c->tp > 1 || c->cp > 1))
		return 1;
	return plan->stack.device_max_connections > 1 ? plan->stack.device_max_connections : 0;
}

/* Characters the shell takes literally in a word (POSIX 2.2: none of the
 * metacharacters, quotes, expansions or glob characters). */
static int shell_safe(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("_@%+=:,./-", ch));
}

void pipette_shell_word(struct pipette_args *a, const char *w, size_t n)
{
	size_t i;
	int safe = n > 0;

	for (i = 0; i < n; i++)
		safe &= shell_safe((unsigned char)w[i]);
	if (safe) {
		pipette_arg(a, "%.*s", (int)n, w);
		return;
	}
	/* single quotes keep everything but a single quote, written '\'' */
	pipette_arg(a, "'");
	for (i = 0; i < n; i++) {
		if (w[i] == '\'')
			pipette_arg(a, "'\\''");
		else
			pipette_arg(a, "%c", w[i]);
	}
	pipette_arg(a, "'");
}

void pipette_shell_words(struct pipette_args *a, const char *line)
{
	const char *p = line;
	int first = 1;

	while (*p) {
		size_t n;

		p += strspn(p, " ");
		n = strcspn(p, " ");
		if (!n)
			break;
		if (!first)
			pipette_arg(a, " ");
		pipette_shell_word(a, p, n);
		first = 0;
		p += n;
	}
}

/* The value of a job variable; 1 when the plan sets none. */
static int job_value(const struct pipette_plan *plan, enum job_value which, char *v,
		     size_t len)
{
	const struct pipette_config *c = &plan->cfg;

	switch (which) {
	case V_TP:
		return put(v, len, "%d", c->tp);
	case V_PP:
		return put(v, len, "%d", c->pp);
	case V_DP:
		return put(v, len, "%d", c->dp);
	case V_CP:
		return put(v, len, "%d", c->cp);
	case V_EP:
		return put(v, len, "%d", c->ep);
	case V_VPP:
		return put(v, len, "%d", pipette_config_chunks(c));
	case V_MICRO_BATCH:
		return put(v, len, "%d", c->micro_batch);
	case V_GLOBAL_BATCH:
		return put(v, len, "%ld", c->global_batch);
	case V_SCHEDULE:
		return pipette_strlcpy(v, pipette_schedule_name(c->schedule), len);
	case V_RECOMPUTE:
		return pipette_strlcpy(v, pipette_recompute_name(c->recompute), len);
	case V_PRECISION:
		return pipette_strlcpy(v, pipette_precision_name(c->precision), len);
	case V_SEQUENCE_PARALLEL:
		return put(v, len, "%d", c->sequence_parallel);
	case V_DISTRIBUTED_OPTIMIZER:
		return put(v, len, "%d", c->distributed_optimizer);
	case V_MEGATRON_ARGS:
		/* Megatron's arguments only for the stacks that run them */
		if (plan->stack.form == PIPETTE_FORM_TORCHTITAN || plan->stack.form == PIPETTE_FORM_NONE)
			return 1;
		return pipette_plan_megatron_args(plan, v, len);
	case V_DP_SHARD:
		return put(v, len, "%d", c->dp_shard);
	case V_DP_REPLICATE:
		return put(v, len, "%d", pipette_config_dp_replicate(c));
	case V_FSDP_RESHARD:
		if (!plan->stack.fsdp)
			return 1;
		return pipette_strlcpy(v, pipette_reshard_name(c->reshard), len);
	case V_ITER_S:
		return put(v, len, "%.4f", plan->time.iteration_s);
	case V_MEM_GIB:
		return put(v, len, "%.2f", plan->mem.peak_bytes / PIPETTE_GIB);
	case V_MAPPING_GAIN:
		return put(v, len, "%.4f", pipette_plan_mapping_gain(plan));
	case V_PLAN_HASH:
		return pipette_strlcpy(v, plan->hash, len);
	case V_PLAN_FILE:
		return 1;
	case V_STACK:
		return pipette_strlcpy(v, plan->stack.name, len);
	case V_LAUNCH_ARGS:
		/* 1: the stack has no launch form for this plan (unset) */
		return pipette_plan_launch_args(plan, v, len);
	case V_DEVICE_MAX_CONNECTIONS:
		if (!pipette_plan_device_max_connections(plan))
			return 1;
		return put(v, len, "%d", pipette_plan_device_max_connections(plan));
	case V_TASK:
		break;
	}
	return -1;
}

int pipette_plan_job_env(const struct pipette_plan *plan, pipette_env_set_fn set, void *ctx)
{
	char v[2048];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(contract) / sizeof(contract[0]); i++) {
		if (contract[i].value == V_TASK)
			continue;
		rc = job_value(plan, contract[i].value, v, sizeof(v));
		if (rc == 1)
			continue;
		if (rc || set(ctx, contract[i].name, v))
			return -1;
	}
	return 0;
}

/* CUDA_VISIBLE_DEVICES for a node: Slurm's GPU list permuted so that index
 * i is the GPU of the node's i-th lowest rank; idle slots follow in slot
 * order.  The entries are Slurm's own tokens when given (indices or
 * UUIDs), else the plan's GPU indices.  Returns the number of ranks on the
 * node, or -1 when the list does not fit. */
static int node_devices(const struct pipette_plan *plan, int node, const char *const *gpus,
			int *slot_of_local, char *buf, size_t len)
{
	int G = plan->G, i, j, k = 0, n = 0;
	size_t off = 0;

	/* ranks on the node in ascending order (slot by slot selection) */
	for (i = 0; i < G; i++) {
		int pick = -1;

		for (j = 0; j < G; j++) {
			int r = plan->rank_at[node * G + j], used = 0, q;

			if (r < 0)
				continue;
			for (q = 0; q < k; q++)
				if (slot_of_local[q] == j)
					used = 1;
			if (!used && (pick < 0 || r < plan->rank_at[node * G + pick]))
				pick = j;
		}
		if (pick < 0)
			break;
		slot_of_local[k++] = pick;
	}
	n = k;
	for (j = 0; j < G; j++)
		if (plan->rank_at[node * G + j] < 0)
			slot_of_local[k++] = j;
	buf[0] = '\0';
	for (i = 0; i < G; i++) {
		int s = slot_of_local[i], w;

		w = gpus ? snprintf(buf + off, off < len ? len - off : 0, "%s%s", i ? "," : "",
				    gpus[s])
			 : snprintf(buf + off, off < len ? len - off : 0, "%s%d", i ? "," : "",
				    plan->gpu_ids[s]);
		if (w < 0 || (size_t)w >= (off < len ? len - off : 0))
			return -1;
		off += (size_t)w;
	}
	return n;
}

int pipette_plan_task_env(const struct pipette_plan *plan, int node, int local_task,
			  const char *const *gpus, pipette_env_set_fn set, void *ctx,
			  struct pipette_err *err)
{
	int slot_of_local[PIPETTE_BW_MAX_GPUS], n_local, G = plan->G, i;
	int master = plan->gpu_of_rank[0] / G;
	char cvd[PIPETTE_BW_MAX_GPUS * 64], v[32];

	if (node < 0 || node >= plan->nodes)
		return pipette_fail(err, "node index %d is outside the plan's %d nodes",
				    node, plan->nodes);
	n_local = node_devices(plan, node, gpus, slot_of_local, cvd, sizeof(cvd));
	if (n_local < 0)
		return pipette_fail(err, "CUDA_VISIBLE_DEVICES of node %s is longer than %zu "
				    "bytes", plan->names[node], sizeof(cvd) - 1);
	if (n_local == 0)
		return pipette_fail(err, "node %s runs no rank of the plan (%d ranks on "
				    "%d nodes)", plan->names[node], plan->world, plan->nodes);
	/* Validate everything before the first set: no half-set environment. */
	if (plan->req.launch == PIPETTE_LAUNCH_TORCHRUN) {
		if (!pipette_mapping_is_node_block(plan->gpu_of_rank, plan->world, G) ||
		    n_local != G)
			return pipette_fail(err, "the plan's mapping is not node-block: "
					    "launch with srun (one task per GPU)");
	} else {
		if (local_task < 0 || local_task >= G)
			return pipette_fail(err, "local task %d is outside the node's %d GPUs",
					    local_task, G);
		if (plan->rank_at[node * G + local_task] < 0)
			return pipette_fail(err, "GPU %d of node %s runs no rank of the plan",
					    plan->gpu_ids[local_task], plan->names[node]);
	}
	if (set(ctx, "MASTER_ADDR", plan->names[master]))
		return pipette_fail(err, "cannot set MASTER_ADDR");
	snprintf(v, sizeof(v), "%d", plan->world);
	if (set(ctx, "WORLD_SIZE", v))
		return pipette_fail(err, "cannot set WORLD_SIZE");
	if (plan->req.launch == PIPETTE_LAUNCH_TORCHRUN) {
		int first = plan->rank_at[node * G + slot_of_local[0]];

		snprintf(v, sizeof(v), "%d", first / G);
		if (set(ctx, "NODE_RANK", v) || set(ctx, "PET_NODE_RANK", v))
			return pipette_fail(err, "cannot set NODE_RANK");
		snprintf(v, sizeof(v), "%d", plan->world / G);
		if (set(ctx, "PET_NNODES", v))
			return pipette_fail(err, "cannot set PET_NNODES");
		snprintf(v, sizeof(v), "%d", G);
		if (set(ctx, "PET_NPROC_PER_NODE", v) || set(ctx, "PET_RDZV_BACKEND", "static") ||
		    set(ctx, "PET_MASTER_ADDR", plan->names[master]))
			return pipette_fail(err, "cannot set torchrun's PET_ variables");
	} else {
		int slot = local_task, rank = plan->rank_at[node * G + slot];

		for (i = 0; i < n_local; i++)
			if (slot_of_local[i] == slot)
				break;
		snprintf(v, sizeof(v), "%d", rank);
		if (set(ctx, "RANK", v))
			return pipette_fail(err, "cannot set RANK");
		snprintf(v, sizeof(v), "%d", i);
		if (set(ctx, "LOCAL_RANK", v))
			return pipette_fail(err, "cannot set LOCAL_RANK");
		snprintf(v, sizeof(v), "%d", n_local);
		if (set(ctx, "LOCAL_WORLD_SIZE", v))
			return pipette_fail(err, "cannot set LOCAL_WORLD_SIZE");
	}
	if (set(ctx, "CUDA_VISIBLE_DEVICES", cvd))
		return pipette_fail(err, "cannot set CUDA_VISIBLE_DEVICES");
	return 0;
}

/* ---- renderers ------------------------------------------------------------ */

/* NAME='VALUE', the value single-quoted even where it need not be (the
 * form pipette(1) documents), a single quote in it as '\''. */
static int print_env_var(void *ctx, const char *name, const char *value)
{
	FILE *f = ctx;
	const char *q;

	if (fprintf(f, "%s='", name) < 0)
		return -1;
	for (q = value; *q; q++)
		if ((*q == '\'' ? fputs("'\\''", f) : fputc(*q, f)) < 0)
			return -1;
	return fputs("'\n", f) < 0 ? -1 : 0;
}

int pipette_plan_write_env(const struct pipette_plan *plan, FILE *f)
{
	return pipette_plan_job_env(plan, print_env_var, f);
}

