/* pipette: the plan as the table `pipette plan` prints. */
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"

static void split_text(const struct pipette_config *c, char *buf, size_t len)
{
	if (c->first_stage_layers || c->last_stage_layers)
		snprintf(buf, len, "%d/../%d", c->first_stage_layers, c->last_stage_layers);
	else
		snprintf(buf, len, "even");
}

static void ranges(const int *v, int n, char *buf, size_t len)
{
	size_t off = 0;
	int i = 0;

	buf[0] = '\0';
	while (i < n && off < len) {
		int j = i, w;

		while (j + 1 < n && v[j + 1] == v[j] + 1)
			j++;
		w = j > i ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", v[i], v[j])
			  : snprintf(buf + off, len - off, "%s%d", off ? "," : "", v[i]);
		if (w < 0)
			break;
		off += (size_t)w;
		i = j + 1;
	}
}

static int collect(int *v, int n, int x)
{
	int i, j;

	for (i = 0; i < n && v[i] < x; i++)
		;
	if (i < n && v[i] == x)
		return n;
	for (j = n; j > i; j--)
		v[j] = v[j - 1];
	v[i] = x;
	return n + 1;
}

/* Which stages and replicas each node runs (the first lines only on big
 * clusters). */
#define TABLE_MAX_NODES 32

static void write_mapping(const struct pipette_plan *plan, FILE *f)
{
	const struct pipette_config *c = &plan->cfg;
	int G = plan->G, n, j, shown = 0;

	fprintf(f, "\nmapping (%s launch%s):\n", pipette_launch_name(plan->req.launch),
		pipette_mapping_is_node_block(plan->gpu_of_rank, plan->world, G)
			? ", node-block" : "");
	for (n = 0; n < plan->nodes && shown < TABLE_MAX_NODES; n++) {
		int stages[PIPETTE_BW_MAX_GPUS], reps[PIPETTE_BW_MAX_GPUS], ns = 0, nr = 0;
		int rk[PIPETTE_BW_MAX_GPUS], nk = 0;
		char sb[128], rb[128], kb[128];

		for (j = 0; j < G; j++) {
			int r = plan->rank_at[n * G + j];

			if (r < 0)
				continue;
			ns = collect(stages, ns, r / (c->tp * c->cp * c->dp));
			nr = collect(reps, nr, r / (c->tp * c->cp) % c->dp);
			nk = collect(rk, nk, r);
		}
		if (!nk)
			continue;
		ranges(stages, ns, sb, sizeof(sb));
		ranges(reps, nr, rb, sizeof(rb));
		ranges(rk, nk, kb, sizeof(kb));
		fprintf(f, "  %-16s stage %-7s replica %-9s ranks %s\n", plan->names[n],
			sb, rb, kb);
		shown++;
	}
	if (shown == TABLE_MAX_NODES && plan->nodes > TABLE_MAX_NODES)
		fprintf(f, "  ... (%d nodes; --format json lists every rank)\n", plan->nodes);
	fprintf(f, "default order %.4f s -> planned %.4f s: gain %.4fx (%ld time estimates%s)\n",
		plan->mstats.block_s, plan->time.iteration_s, pipette_plan_mapping_gain(plan),
		plan->mstats.evaluations,
		plan->req.mapping == PIPETTE_MAP_BLOCK ? ", --mapping block"
		: plan->mstats.exhaustive ? ", the optimum over node orders"
		: plan->mstats.end == PIPETTE_MAP_END_BOUND ? ", stopped within 0.5% of the bound"
		: plan->mstats.end == PIPETTE_MAP_END_LOCAL ? ", stopped: no move improved it"
		: plan->mstats.end == PIPETTE_MAP_END_BUDGET ? ", stopped: its budget was spent"
		: plan->mstats.end == PIPETTE_MAP_END_FLOOR ? ", within 0.5% of the optimum over node orders"
		: "");
	if (plan->mstats.bound_s > 0)
		fprintf(f, "placement bound %.4f s (every link as fast as the cluster's fastest): "
			"the planned mapping is within %.2f%% of it%s\n", plan->mstats.bound_s,
			100 * (plan->time.iteration_s - plan->mstats.bound_s) / plan->time.iteration_s,
			plan->mstats.exhaustive ? "" : ", the most a longer search could gain");
	if (pipette_plan_mapping_negligible(plan))
		fprintf(f, "the gain is negligible: on these links the placement changes the "
			"iteration by less than %.0f%%\n", 100 * (PIPETTE_NEGLIGIBLE_GAIN - 1));
}

/* Why the expert layout: how many experts each GPU holds and how, where
 * the first EP group runs, and what its all-to-all costs. */
static void write_experts_line(const struct pipette_plan *plan, FILE *f)
{
	const struct pipette_config *c = &plan->cfg;
	const struct pipette_time *t = &plan->time;
	int k, j, nodes = 0;

	for (k = 0; k < c->ep; k++) {
		int node = plan->gpu_of_rank[k * c->etp] / plan->G, seen = 0;

		for (j = 0; j < k && !seen; j++)
			seen = plan->gpu_of_rank[j * c->etp] / plan->G == node;
		nodes += !seen;
	}
	fprintf(f, "experts: ep %d x etp %d: each GPU holds %d of %d experts%s; an EP group "
		"spans %d node%s (%s); dispatch+combine %.3f s exposed per iteration (%.1f%% of "
		"it)", c->ep, c->etp, plan->model.experts / c->ep, plan->model.experts,
		c->etp > 1 ? " sharded over its ETP group" : "", nodes, nodes == 1 ? "" : "s",
		c->ep == 1 ? "no all-to-all" : nodes == 1 ? "NVLink" : "the network",
		t->ep_comm_s, t->iteration_s > 0 ? 100.0 * t->ep_comm_s / t->iteration_s : 0.0);
	if (t->ep_hidden_s > 0)
		fprintf(f, ", %.3f s more hidden by EP overlap", t->ep_hidden_s);
	fprintf(f, "\n         dispatcher %s%s, EP overlap %s, %s, busiest rank %.3f x its share\n",
		pipette_dispatcher_name(c->moe.dispatcher),
		c->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP ? " (a token crosses to a node once)"
							     : "",
		pipette_config_ep_overlap(c) ? "on (combined 1F1B / DualPipe)" : "off",
		c->moe.capacity_factor > 0 ? (c->moe.pad ? "padded to capacity" : "drops over capacity")
					   : "dropless",
		pipette_moe_routed_factor(&plan->model, c) / plan->model.topk);
}

/* One row of the ranked table (position i). */
static void write_ranked_row(const struct pipette_plan *plan, const struct plan_entry *e, int i,
			     FILE *f)
{
	char split[32], shard[16], rc[16], mapped[24];

	split_text(&e->cfg, split, sizeof(split));
	/* FSDP stacks: the shard degree, k after it when the
	 * parameters are kept gathered (no reshard after forward) */
	if (plan->stack.fsdp)
		snprintf(shard, sizeof(shard), "%d%s", e->cfg.dp_shard,
			 e->cfg.reshard == PIPETTE_RESHARD_NEVER && e->cfg.dp_shard * e->cfg.cp > 1
			 ? "k" : "");
	else
		snprintf(shard, sizeof(shard), "%s", e->cfg.distributed_optimizer ? "y" : "n");
	if (e->cfg.recompute_every > 1)
		snprintf(rc, sizeof(rc), "full/%d", e->cfg.recompute_every);
	else
		snprintf(rc, sizeof(rc), "%s", pipette_recompute_name(e->cfg.recompute));
	if (e->mapped)
		snprintf(mapped, sizeof(mapped), "%.4f", e->time.iteration_s);
	else if (e->bound_s > 0)
		snprintf(mapped, sizeof(mapped), ">=%.4f", e->bound_s);
	else
		snprintf(mapped, sizeof(mapped), "-");
	fprintf(f, "%2d %3d %3d %4d %3d %3d %3d %3d %-14s %-9s %2s %3s %-9s %9s %10.4f "
		"%10.0f %5.1f%% %.1f/%.1f\n", i + 1, e->cfg.tp, e->cfg.pp, e->cfg.dp,
		e->cfg.cp, e->cfg.ep, pipette_config_chunks(&e->cfg), e->cfg.micro_batch,
		pipette_schedule_name(e->cfg.schedule), rc,
		e->cfg.sequence_parallel ? "y" : "n", shard, split, mapped,
		e->block_s, e->time.tokens_per_s, 100 * e->time.mfu, e->peak_bytes / PIPETTE_GIB,
		plan->mem.capacity_bytes / PIPETTE_GIB);
}

/* How an FSDP plan shards its data parallelism, why, and the same in
 * Megatron-FSDP's flags. */
static void write_sharding(const struct pipette_plan *plan, FILE *f)
{
	const struct pipette_config *c = &plan->cfg;
	char mf[512];
	int rc;

	if (!plan->stack.fsdp)
		return;
	if (c->dp_shard * c->cp == 1) {
		fprintf(f, "data parallel: not sharded (DDP), %d replica%s\n", c->dp,
			c->dp == 1 ? "" : "s");
		return;
	}
	fprintf(f, "data parallel: %s, shard group %d GPUs (dp_shard %d x cp %d), %d replica%s, "
		"parameters %s\n", pipette_config_dp_replicate(c) > 1 ? "HSDP" : "FSDP",
		c->dp_shard * c->cp, c->dp_shard, c->cp, pipette_config_dp_replicate(c),
		pipette_config_dp_replicate(c) == 1 ? "" : "s",
		c->reshard == PIPETTE_RESHARD_ALWAYS ? "gathered again for each backward"
						     : "kept gathered until the backward");
	if (plan->sharding_note[0])
		fprintf(f, "  why: %s\n", plan->sharding_note);
	rc = pipette_plan_megatron_fsdp_args(plan, mf, sizeof(mf));
	if (rc >= 0)
		fprintf(f, "  in Megatron-LM: %s%s\n", rc ? "none, " : "", mf);
}

int pipette_plan_write_table(const struct pipette_plan *plan, FILE *f)
{
	const struct pipette_config *c = &plan->cfg;
	const struct pipette_time *t = &plan->time;
	const struct pipette_search_stats *st = &plan->sstats;
	const struct pipette_stage_memory *pk = &plan->mem.peak;
	char args[2048];
	const char *launcher;
	int i, rc;

	fprintf(f, "pipette plan: %s on %d node%s x %d %s (%s)\n", plan->model.name,
		plan->nodes, plan->nodes == 1 ? "" : "s", plan->G, plan->gpu->name,
		plan->req.bandwidth[0] ? plan->req.bandwidth : "nominal links");
	fprintf(f, "stack %s, global batch %ld, sequence length %ld, memory limit %.0f%% of "
		"%.1f GiB%s\n\n", plan->stack.name, c->global_batch, c->seq_len,
		100 * plan->req.mem_fraction, plan->mem.capacity_bytes / PIPETTE_GIB,
		plan->stack.mem_fraction > 0 ? "" : " (the allocator's reserve counted)");
	fprintf(f, "%2s %3s %3s %4s %3s %3s %3s %3s %-14s %-9s %2s %3s %-9s %9s %9s %10s %6s %s\n",
		"#", "TP", "PP", "DP", "CP", "EP", "VPP", "MB", "SCHEDULE", "RECOMPUTE", "SP",
		plan->stack.fsdp ? "SH" : "DO", "SPLIT", "MAPPED(s)", "DEFAULT(s)", "TOKENS/s", "MFU",
		"MEM(GiB)");
	for (i = 0; i < plan->n_ranked; i++)
		write_ranked_row(plan, &plan->ranked[i], i, f);
	fprintf(f, "(rows rank by MAPPED, then unmapped rows by DEFAULT; MAPPED: with the "
		"configuration's own searched mapping, >= its placement bound where that bound "
		"cannot beat row 1, - not mapped; DEFAULT: every row with ranks in the stack's "
		"own order; TOKENS/s and MFU: at the row's best known time%s)\n",
		plan->stack.fsdp ? "; SH: FSDP shard degree over DP, k = parameters kept "
				   "gathered from forward to backward" : "");

	fprintf(f, "\nchosen: tp %d pp %d dp %d cp %d ep %d, %s", c->tp, c->pp, c->dp, c->cp,
		c->ep, pipette_schedule_name(c->schedule));
	if (pipette_config_chunks(c) > 1)
		fprintf(f, " (%d chunks per rank)", pipette_config_chunks(c));
	fprintf(f, ", micro-batch %d (%ld per pipeline), recompute %s", c->micro_batch,
		pipette_config_microbatches(c), pipette_recompute_name(c->recompute));
	if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE && c->recompute_modules) {
		char mods[160];

		pipette_recompute_modules_format(c->recompute_modules, ",", mods, sizeof(mods));
		fprintf(f, " (%s)", mods);
	}
	fprintf(f, ", precision %s", pipette_precision_name(c->precision));
	if (c->precision != PIPETTE_PREC_BF16 && (c->bf16_first || c->bf16_last))
		fprintf(f, " (first %d and last %d layers in bf16)", c->bf16_first, c->bf16_last);
	fputc('\n', f);
	write_sharding(plan, f);
	if (pipette_compression_enabled(&c->compress)) {
		char spec[96];

		pipette_compression_format(&c->compress, spec, sizeof(spec));
		fprintf(f, "compression: %s (Optimus-CC; changes training numerics)\n", spec);
	}
	if (plan->model.experts)
		write_experts_line(plan, f);
	fprintf(f, "memory, stage %d (peak): params %.2f + grads %.2f + optimizer %.2f + "
		"activations %.2f + other %.2f", plan->mem.peak_stage,
		pk->params_bytes / PIPETTE_GIB, pk->grads_bytes / PIPETTE_GIB,
		pk->optimizer_bytes / PIPETTE_GIB, pk->activations_bytes / PIPETTE_GIB,
		pk->other_bytes / PIPETTE_GIB);
	if (pk->reserve_bytes > 0)
		fprintf(f, " + allocator reserve %.2f", pk->reserve_bytes / PIPETTE_GIB);
	fprintf(f, " = %.2f GiB of %.2f GiB limit\n", plan->mem.peak_bytes / PIPETTE_GIB,
		plan->mem.limit_bytes / PIPETTE_GIB);
	fprintf(f, "time: iteration %.4f s = pipeline %.4f (compute %.4f, TP %.4f, CP %.4f, "
		"EP %.4f, bubble %.4f, PP exposed %.4f) + DP exposed %.4f + embedding %.4f + "
		"optimizer %.4f\n", t->iteration_s, t->makespan_s, t->compute_s, t->tp_comm_s,
		t->cp_comm_s, t->ep_comm_s, t->bubble_s, t->pp_exposed_s, t->dp_exposed_s,
		t->embed_sync_s, t->optimizer_s);
	fprintf(f, "      %.0f tokens/s, %.1f TFLOP/s per GPU, MFU %.1f%%\n", t->tokens_per_s,
		t->tflops_per_gpu, 100 * t->mfu);
	write_mapping(plan, f);
	rc = pipette_plan_launch_args(plan, args, sizeof(args));
	launcher = plan->stack.form == PIPETTE_FORM_TORCHTITAN ? "torchtitan"
		   : plan->stack.form == PIPETTE_FORM_NEMO ? "NeMo"
		   : plan->stack.form == PIPETTE_FORM_BRIDGE ? "Megatron-Bridge" : "Megatron";
	if (rc == 0)
		fprintf(f, "\n%s: %s\n", launcher, args);
	/* a recipe the launch cannot say (the BF16 cases warn in the plan) */
	else if (rc == 1 && args[0] && plan->cfg.precision != PIPETTE_PREC_BF16)
		fprintf(f, "\n%s: no launch arguments: %s\n", launcher, args);

	fprintf(f, "\nsearch: %ld combinations, %ld invalid, %ld over the memory limit",
		st->considered, st->invalid, st->pruned_memory);
	if (st->pruned_memory) {
		int first = 1;

		fprintf(f, " (dominated by");
		for (i = 0; i < PIPETTE_MEM_PART_COUNT; i++)
			if (st->pruned_part[i]) {
				fprintf(f, "%s %s %ld", first ? "" : ",",
					pipette_mem_part_name((enum pipette_mem_part)i),
					st->pruned_part[i]);
				first = 0;
			}
		fprintf(f, ")");
	}
	fprintf(f, ", %ld fit, %ld skipped as heavier recomputation of a fitting one; "
		"%ld estimated on the links, %ld skipped by the lower bound; %.3f s\n",
		st->feasible, st->dominated, st->evaluated, st->pruned_bound,
		plan->search_wall_s);
	if (plan->warnings && *plan->warnings)
		fprintf(f, "\nwarnings:\n%s\n", plan->warnings);
	return ferror(f) ? -1 : 0;
}
