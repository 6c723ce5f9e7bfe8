/* pipette: configuration search; see search.h for the method. */
#include "plan/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/bwcache.h"
#include "estimate/schedule.h"
#include "inputs/stack.h"

/* Micro-batch sizes tried: powers of two up to 16.  Larger micro-batches
 * only add activation memory once GEMMs are large (Narayanan et al.,
 * SC'21, §3.4 find b = 1..8 best for GPT-scale models). */
static const int micro_batches[] = { 1, 2, 4, 8, 16 };
/* Largest context-parallel degree tried unpinned, to bound the search (a
 * pin may go beyond it): CP 16 keeps chunks of 8K tokens, the length from
 * which Megatron recommends CP (below), up to 128K-token sequences.
 * Interleaving is tried up to one layer per virtual stage: NVIDIA's NeMo
 * recipes run GPT-3 175B and Nemotron-4 340B that way, VP 12 on PP 8
 * (tests/data/stacks/nemo-h100-time.tsv). */
#define MAX_CP 16

static const char *const part_names[PIPETTE_MEM_PART_COUNT] = {
	"parameters", "gradients", "optimizer states", "activations",
	"buffers/context",
};

const char *pipette_mem_part_name(enum pipette_mem_part p)
{
	return (unsigned)p < PIPETTE_MEM_PART_COUNT ? part_names[p] : "?";
}

/* See the CP guideline in enumerate(). */
#define CP_MIN_SEQ 8192

#define CMP_FIELD(f) do { if (a->f != b->f) return a->f < b->f ? -1 : 1; } while (0)

int pipette_config_cmp(const struct pipette_config *a, const struct pipette_config *b)
{
	CMP_FIELD(tp);
	CMP_FIELD(pp);
	CMP_FIELD(cp);
	CMP_FIELD(dp);
	CMP_FIELD(ep);
	CMP_FIELD(etp);
	CMP_FIELD(vpp);
	CMP_FIELD(micro_batch);
	CMP_FIELD(schedule);
	CMP_FIELD(recompute);
	CMP_FIELD(recompute_every);
	CMP_FIELD(dp_shard);
	CMP_FIELD(reshard);
	CMP_FIELD(sequence_parallel);
	CMP_FIELD(distributed_optimizer);
	CMP_FIELD(first_stage_layers);
	CMP_FIELD(last_stage_layers);
	CMP_FIELD(compress.pp_rank);
	CMP_FIELD(compress.pp_epilogue_only);
	CMP_FIELD(compress.dp_rank);
	CMP_FIELD(compress.dp_stages);
	CMP_FIELD(compress.fused_embedding);
	CMP_FIELD(recompute_modules);
	CMP_FIELD(moe.dispatcher);
	CMP_FIELD(moe.ep_overlap);
	CMP_FIELD(precision);
	CMP_FIELD(bf16_first);
	CMP_FIELD(bf16_last);
	return 0;
}

int pipette_candidate_cmp(const struct pipette_candidate *a,
			  const struct pipette_candidate *b)
{
	if (a->time.iteration_s != b->time.iteration_s)
		return a->time.iteration_s < b->time.iteration_s ? -1 : 1;
	return pipette_config_cmp(&a->cfg, &b->cfg);
}

static int cmp_bound(const void *pa, const void *pb)
{
	const struct pipette_candidate *a = pa, *b = pb;

	if (a->lower_bound_s != b->lower_bound_s)
		return a->lower_bound_s < b->lower_bound_s ? -1 : 1;
	return pipette_config_cmp(&a->cfg, &b->cfg);
}

struct search {
	const struct pipette_search_input *in;
	struct pipette_search_stats *st;
	struct pipette_candidate *cand;	/* feasible, growing */
	long n, cap;
	struct pipette_err *err;
};

static enum pipette_mem_part dominant(const struct pipette_stage_memory *s)
{
	const double v[PIPETTE_MEM_PART_COUNT] = { s->params_bytes, s->grads_bytes,
		s->optimizer_bytes, s->activations_bytes, s->other_bytes };
	int i, best = 0;

	for (i = 1; i < PIPETTE_MEM_PART_COUNT; i++)
		if (v[i] > v[best])
			best = i;
	return (enum pipette_mem_part)best;
}

static void count_nofit(struct pipette_search_stats *st, const struct pipette_config *c,
			const struct pipette_memory *mem)
{
	double excess = mem->peak_bytes - mem->limit_bytes;

	st->pruned_memory++;
	st->pruned_part[dominant(&mem->peak)]++;
	if (st->pruned_memory == 1 || excess < st->least_excess_bytes ||
	    (excess == st->least_excess_bytes &&
	     pipette_config_cmp(c, &st->least_excess_cfg) < 0)) {
		st->least_excess_bytes = excess;
		st->least_excess_cfg = *c;
	}
}

static int pinned_ok(int pin, int v)
{
	return pin < 0 || pin == v;
}

/* One fully specified combination: validity, then memory.  Returns 1 when
 * it fits, 0 when not, -1 on error. */
static int consider(struct search *s, const struct pipette_config *c)
{
	struct pipette_memory mem;
	struct pipette_err e;
	double limit = s->in->mem_fraction * s->in->gpu->hbm_bytes;

	s->st->considered++;
	if (pipette_config_check(s->in->model, c, s->st->invalid ? NULL : &e)) {
		if (!s->st->invalid++)	/* the first reason, formatted once */
			pipette_strlcpy(s->st->invalid_msg, e.msg, sizeof(s->st->invalid_msg));
		return 0;
	}
	/* Stage 0 first (most in flight, plus the embedding): when it alone
	 * is over the limit, so is the peak, at 1/pp of the cost. */
	memset(&mem, 0, sizeof(mem));
	pipette_memory_stage(s->in->model, s->in->gpu, c, 0, -1.0, &mem.peak);
	if (mem.peak.total_bytes > limit) {
		mem.peak_bytes = mem.peak.total_bytes;
		mem.limit_bytes = limit;
		count_nofit(s->st, c, &mem);
		return 0;
	}
	pipette_memory_estimate_rest(s->in->model, s->in->gpu, c, s->in->mem_fraction,
				     &mem.peak, &mem);
	if (!mem.fits) {
		count_nofit(s->st, c, &mem);
		return 0;
	}
	if (s->n == s->cap) {
		long cap = s->cap ? 2 * s->cap : 256;
		struct pipette_candidate *p = realloc(s->cand, (size_t)cap * sizeof(*p));

		if (!p)
			return pipette_fail(s->err, "out of memory");
		s->cand = p;
		s->cap = cap;
	}
	memset(&s->cand[s->n], 0, sizeof(s->cand[s->n]));
	s->cand[s->n].cfg = *c;
	s->cand[s->n].mem = mem;
	s->n++;
	s->st->feasible++;
	return 1;
}

/* The recomputation levels, lightest first: none; selective, which is
 * Megatron's core_attn or the stack's own; for stacks with Megatron-Core's
 * recompute modules, selective sets that each add modules, ordered by what
 * their recomputation costs against what they free: the norms and the
 * experts' activation (elementwise), MLA's up-projections (small GEMMs
 * against the largest saved tensors), the dense MLPs and shared experts,
 * the whole MoE block (its exchange again); full.  Modules a model does
 * not have are left out, and sets that come out equal are tried once.  A
 * stack with fixed modules runs those only; pinned modules are the one
 * selective level. */
static int recompute_plan(const struct search *s, int rcs[8], unsigned mods[8])
{
	const struct pipette_model *m = s->in->model;
	const struct pipette_stack *st = s->in->stack ? s->in->stack
		: pipette_stack_get(PIPETTE_STACK_MEGATRON_2022);
	const struct pipette_pins *pn = &s->in->pins;
	unsigned have = PIPETTE_RM_CORE_ATTN | PIPETTE_RM_LAYERNORM, add = 0;
	static const unsigned steps[] = {
		PIPETTE_RM_LAYERNORM | PIPETTE_RM_MOE_ACT, PIPETTE_RM_MLA_UP_PROJ,
		PIPETTE_RM_MLP | PIPETTE_RM_SHARED_EXPERTS, PIPETTE_RM_MOE,
	};
	int n = 0, i;

	if (st->fixed_modules) {
		rcs[0] = PIPETTE_RECOMPUTE_SELECTIVE, mods[0] = st->fixed_modules;
		return 1;
	}
	if (pn->recompute_modules > 0) {
		rcs[0] = PIPETTE_RECOMPUTE_SELECTIVE, mods[0] = (unsigned)pn->recompute_modules;
		return 1;
	}
	if (m->experts)
		have |= PIPETTE_RM_MOE_ACT | PIPETTE_RM_MOE |
			(m->shared_ffn ? PIPETTE_RM_SHARED_EXPERTS : 0);
	if (m->kv_lora_rank)
		have |= PIPETTE_RM_MLA_UP_PROJ;
	if (!m->experts || m->first_dense_layers || m->moe_layer_freq > 1)
		have |= PIPETTE_RM_MLP;
	rcs[n] = PIPETTE_RECOMPUTE_NONE, mods[n++] = 0;
	rcs[n] = PIPETTE_RECOMPUTE_SELECTIVE, mods[n++] = 0;
	for (i = 0; st->recompute_modules && i < (int)(sizeof(steps) / sizeof(steps[0])); i++) {
		if (!(steps[i] & have & ~add))
			continue;
		add |= steps[i] & have;
		rcs[n] = PIPETTE_RECOMPUTE_SELECTIVE, mods[n++] = PIPETTE_RM_CORE_ATTN | add;
	}
	rcs[n] = PIPETTE_RECOMPUTE_FULL, mods[n++] = 0;
	return n;
}

/* Recomputation from none to full: each level only adds compute (the
 * forward pass of what it drops, Korthikanti et al., MLSys'23), so once a
 * level fits the heavier ones cannot be faster and are counted as
 * dominated.  A pinned --recompute-every k makes "full" every k-th layer. */
static int recompute_levels(struct search *s, struct pipette_config *c)
{
	const struct pipette_pins *pn = &s->in->pins;
	int rcs[8], n, i, fit;
	unsigned mods[8];

	n = recompute_plan(s, rcs, mods);
	for (i = 0; i < n; i++) {
		if (!pinned_ok(pn->recompute, rcs[i]))
			continue;
		/* combined 1F1B refuses full and 'moe' recomputation */
		if (c->moe.ep_overlap && (rcs[i] == PIPETTE_RECOMPUTE_FULL || (mods[i] & PIPETTE_RM_MOE)))
			continue;
		/* every k-th layer only when asked: torchtitan after v0.2.2
		 * cannot say it (its recipe form is the default launch) */
		c->recompute = (enum pipette_recompute)rcs[i];
		c->recompute_modules = mods[i];
		c->recompute_every = rcs[i] == PIPETTE_RECOMPUTE_FULL && pn->recompute_every > 0
				     ? pn->recompute_every : 1;
		if ((fit = consider(s, c)) < 0)
			return -1;
		if (fit) {
			s->st->dominated += n - 1 - i;
			break;
		}
	}
	c->recompute_every = 1;
	c->recompute_modules = 0;
	return 0;
}

static int sharding_levels(struct search *s, struct pipette_config *c);

/* MoE execution: the dispatcher (DeepEP where the stack has it and the EP
 * group has more than one rank; Megatron-Core's all-to-all otherwise) and
 * the EP overlap of combined 1F1B, each tried where valid; capacity and
 * imbalance come with the request, never searched (dropping tokens changes
 * training). */
static int moe_levels(struct search *s, struct pipette_config *c)
{
	const struct pipette_pins *pn = &s->in->pins;
	const struct pipette_stack *st = pipette_config_stack(c);
	int d, ov;

	c->moe = s->in->moe;
	if (!s->in->model->experts) {
		memset(&c->moe, 0, sizeof(c->moe));
		return sharding_levels(s, c);
	}
	if (c->ep == 1) {	/* no exchange: nothing to choose */
		c->moe.dispatcher = st->deepep == 2 ? PIPETTE_DISPATCH_DEEPEP : PIPETTE_DISPATCH_ALLTOALL;
		c->moe.ep_overlap = 0;
		return sharding_levels(s, c);
	}
	for (d = 0; d < 2; d++) {
		if (!pinned_ok(pn->dispatcher, d) ||
		    (d == PIPETTE_DISPATCH_DEEPEP ? !st->deepep : st->deepep == 2) ||
		    (d == PIPETTE_DISPATCH_DEEPEP && c->moe.capacity_factor > 0))
			continue;
		/* DeepEP's gain is what it does not send between nodes: inside
		 * one it is the all-to-all (unless pinned or the only one) */
		if (d == PIPETTE_DISPATCH_DEEPEP && st->deepep == 1 && pn->dispatcher < 0 &&
		    c->ep * c->etp * c->tp <= pipette_cluster_gpus_per_node(s->in->cluster) *
					      pipette_cluster_domain_nodes(s->in->cluster))
			continue;
		c->moe.dispatcher = (enum pipette_dispatcher)d;
		for (ov = 0; ov < 2; ov++) {
			/* combined 1F1B runs without a pipeline or interleaved
			 * (megatron-rules.tsv moe-overlap-reqs) */
			if (!pinned_ok(pn->ep_overlap, ov) || (ov && st->moe_overlap != 1) ||
			    (ov && c->pp > 1 && c->schedule != PIPETTE_SCHED_INTERLEAVED))
				continue;
			c->moe.ep_overlap = ov;
			if (sharding_levels(s, c))
				return -1;
		}
	}
	c->moe = s->in->moe;
	return 0;
}

/* FSDP's shard degree (a divisor of dp: dp_shard = dp is full sharding,
 * 1 < dp_shard < dp is HSDP, 1 is DDP) and whether it reshards after
 * forward; stacks without FSDP keep dp_shard = 1. */
static int sharding_levels(struct search *s, struct pipette_config *c)
{
	const struct pipette_pins *pn = &s->in->pins;
	int ds, rs;

	if (!pipette_config_stack(c)->fsdp) {
		c->dp_shard = 1;
		c->reshard = PIPETTE_RESHARD_ALWAYS;
		return recompute_levels(s, c);
	}
	for (ds = 1; ds <= c->dp; ds++) {
		if (c->dp % ds || !pinned_ok(pn->dp_shard, ds))
			continue;
		c->dp_shard = ds;
		for (rs = PIPETTE_RESHARD_ALWAYS; rs <= PIPETTE_RESHARD_NEVER; rs++) {
			if (pn->reshard >= 0 &&
			    (int)pipette_reshard_resolve((enum pipette_reshard)pn->reshard, c->pp) != rs)
				continue;
			/* nothing sharded, nothing to reshard */
			if (ds * c->cp == 1 && rs != PIPETTE_RESHARD_ALWAYS)
				continue;
			c->reshard = (enum pipette_reshard)rs;
			if (recompute_levels(s, c))
				return -1;
		}
	}
	c->dp_shard = 1;
	c->reshard = PIPETTE_RESHARD_ALWAYS;
	return 0;
}

/* Uneven first/last stage splits (first, last) worth trying for pp
 * stages of L layers: the middle stages hold q = floor or ceil of L/pp
 * and the ends share the rest, each from one layer to q + 1, so the
 * embedding (first) and the logits, loss and MTP (last) stages may hold
 * fewer layers (NVIDIA's DeepSeek-V3 layout puts 4 layers first and 1
 * last: tests/data/stacks/nemo-deepseek-v3.md).  (0, 0) = even, listed
 * when L divides. */
static int uneven_splits(int L, int pp, int fl[][2], int max)
{
	int n = 0, q, f, k;

	if (L % pp == 0)
		fl[n][0] = fl[n][1] = 0, n++;
	if (pp < 2)
		return n;
	for (q = L / pp; q <= (L + pp - 1) / pp; q++) {
		int rem = L - q * (pp - 2);

		for (f = q + 1; f >= 1; f--) {
			int l = rem - f, dup = 0;

			if (l < 1 || l > q + 1)
				continue;
			if (f == q && l == q && L % pp == 0)
				continue;	/* that is the even split */
			for (k = 0; k < n; k++)
				if (fl[k][0] == f && fl[k][1] == l)
					dup = 1;
			if (!dup && n < max)
				fl[n][0] = f, fl[n][1] = l, n++;
		}
		if (L % pp == 0)
			break;	/* one q is enough when the layers divide */
	}
	return n;
}

static int enumerate_tail(struct search *s, struct pipette_config *c)
{
	const struct pipette_pins *pn = &s->in->pins;
	const struct pipette_model *m = s->in->model;
	int sched, mbi, sp, dop, vpp, fli, nfl, fl[16][2];

	for (sched = 0; sched < PIPETTE_SCHED_COUNT; sched++) {
		int vlo, vhi;

		if (!pipette_pins_allow_schedule(pn, (enum pipette_schedule_kind)sched) ||
		    !pipette_stack_runs(pipette_config_stack(c), (enum pipette_schedule_kind)sched))
			continue;
		/* No pipeline, nothing to schedule: 1F1B stands for them all,
		 * unless the pins leave it out. */
		if (c->pp == 1 && sched != PIPETTE_SCHED_1F1B &&
		    pipette_pins_allow_schedule(pn, PIPETTE_SCHED_1F1B))
			continue;
		c->schedule = (enum pipette_schedule_kind)sched;
		if (pipette_schedule_is_looped((enum pipette_schedule_kind)sched)) {
			vlo = 2;
			vhi = m->layers / c->pp;
		} else if (pipette_schedule_is_v((enum pipette_schedule_kind)sched)) {
			vlo = vhi = 2;
		} else {
			vlo = vhi = 1;
		}
		for (vpp = vlo; vpp <= vhi; vpp++) {
			if (!pinned_ok(pn->vpp, vpp))
				continue;
			if (pipette_schedule_is_looped((enum pipette_schedule_kind)sched) &&
			    m->layers % (c->pp * vpp) && !pipette_config_stack(c)->uneven_split)
				continue;
			c->vpp = vpp;
			/* interleaved: uneven only where the layers do not
			 * divide over the virtual stages */
			if (!pipette_schedule_is_v((enum pipette_schedule_kind)sched) &&
			    pipette_config_stack(c)->uneven_split &&
			    (vpp == 1 || m->layers % (c->pp * vpp))) {
				nfl = uneven_splits(m->layers, c->pp * vpp, fl, 16);
			} else {
				nfl = 1;
				fl[0][0] = fl[0][1] = 0;
			}
			for (mbi = 0; mbi < (int)(sizeof(micro_batches) / sizeof(int)); mbi++) {
				int b = micro_batches[mbi];

				if (pn->micro_batch > 0)
					b = pn->micro_batch;
				else if (!pinned_ok(pn->micro_batch, b))
					continue;
				if (c->global_batch % ((long)c->dp * b)) {
					if (pn->micro_batch > 0)
						break;
					continue;
				}
				c->micro_batch = b;
				for (sp = 0; sp < 2; sp++) {
					if (!pinned_ok(pn->sequence_parallel, sp) ||
					    (sp && c->tp == 1 && pn->sequence_parallel < 0) ||
					    (!sp && c->tp > 1 && pipette_config_stack(c)->sp_with_tp))
						continue;
					c->sequence_parallel = sp;
					for (dop = 0; dop < 2; dop++) {
						if (!pinned_ok(pn->distributed_optimizer, dop) ||
						    (dop && c->dp * c->cp == 1 &&
						     pn->distributed_optimizer < 0) ||
						    (dop && pipette_config_stack(c)->fsdp) ||
						    (!dop && pipette_config_stack(c)->optim_needs_distopt))
							continue;
						c->distributed_optimizer = dop;
						for (fli = 0; fli < nfl; fli++) {
							c->first_stage_layers = fl[fli][0];
							c->last_stage_layers = fl[fli][1];
							if (moe_levels(s, c))
								return -1;
						}
					}
				}
				if (pn->micro_batch > 0)
					break;
			}
		}
	}
	c->first_stage_layers = c->last_stage_layers = 0;
	return 0;
}

/* D: the GPUs of one NVLink domain, which an unpinned TP degree divides. */
static int enumerate_precision(struct search *s, int world, int D,
			       enum pipette_precision precision)
{
	const struct pipette_pins *pn = &s->in->pins;
	const struct pipette_model *m = s->in->model;
	struct pipette_config c;
	int tp, cp, pp, ep;

	pipette_config_init(&c);
	c.attention = s->in->attention;
	c.stack = s->in->stack;
	c.global_batch = s->in->global_batch;
	c.seq_len = s->in->seq_len;
	c.precision = precision;
	c.bf16_first = s->in->bf16_first;
	c.bf16_last = s->in->bf16_last;
	for (tp = 1; tp <= world; tp++) {
		if (world % tp || !pinned_ok(pn->tp, tp) || (pn->tp < 0 && D % tp))
			continue;
		for (cp = 1; cp <= world / tp; cp++) {
			if ((world / tp) % cp || !pinned_ok(pn->cp, cp) ||
			    (pn->cp < 0 && cp > MAX_CP) || s->in->seq_len % cp)
				continue;
			/* Context parallelism only for long sequences unless pinned:
			 * Megatron's guideline is CP from 8K tokens (NVIDIA/
			 * Megatron-LM megatron/core/transformer/moe/README.md
			 * @d98e8a64dd); below that the model does not see the
			 * ring-attention kernels' inefficiency on short chunks. */
			if (pn->cp < 0 && cp > 1 && s->in->seq_len < CP_MIN_SEQ)
				continue;
			for (pp = 1; pp <= world / (tp * cp) && pp <= m->layers; pp++) {
				int dp;

				if ((world / (tp * cp)) % pp || !pinned_ok(pn->pp, pp))
					continue;
				dp = world / (tp * cp * pp);
				if (!pinned_ok(pn->dp, dp))
					continue;
				c.tp = tp;
				c.cp = cp;
				c.pp = pp;
				c.dp = dp;
				for (ep = 1; ep <= (m->experts ? m->experts : 1); ep++) {
					int etp;

					if (!pinned_ok(pn->ep, ep))
						continue;
					if (m->experts && m->experts % ep)
						continue;
					/* Expert tensor parallelism: a divisor of tp
					 * (Megatron's default is etp = tp; EP x ETP
					 * experts sharded over the same ranks). */
					int etp_max = m->experts && pipette_config_stack(&c)->expert_tp
						      ? tp : 1;

					for (etp = 1; etp <= etp_max; etp++) {
						if (tp % etp || !pinned_ok(pn->etp, etp))
							continue;
						if (m->experts && (dp * cp * tp) % (ep * etp))
							continue;
						c.ep = ep;
						c.etp = etp;
						if (enumerate_tail(s, &c))
							return -1;
					}
				}
			}
		}
	}
	return 0;
}

/* Every precision recipe the request allows (the pins' set, else the
 * stack's own), each a search of its own. */
static int enumerate(struct search *s, int world, int D)
{
	unsigned set = s->in->pins.precision_set;

	if (!set) {
		struct pipette_config c0;

		pipette_config_init(&c0);
		c0.stack = s->in->stack;
		set = PIPETTE_PREC_BIT(pipette_config_stack(&c0)->default_precision);
	}
	for (int p = 0; p < PIPETTE_PREC_COUNT; p++)
		if ((set & PIPETTE_PREC_BIT(p)) &&
		    enumerate_precision(s, world, D, (enum pipette_precision)p))
			return -1;
	return 0;
}

/* The cluster for lower bounds: every link as fast as the real cluster's
 * fastest and as short as its shortest (search.h); split: the node links
 * only as fast and short as the real cluster's fastest and shortest node
 * link (pipe_bound). */
static struct pipette_cluster *ideal_cluster(const struct pipette_cluster *cl,
					     const struct pipette_node_pairs *np, int nodes,
					     int split, struct pipette_err *err)
{
	int N = pipette_cluster_node_count(cl), G = pipette_cluster_gpus_per_node(cl);
	struct pipette_bw_defaults d;
	struct pipette_bwcache *bw = pipette_bwcache_create();
	struct pipette_cluster *out = NULL;
	double gbps = 0, lat = HUGE_VAL, inter_gbps, inter_lat;
	char **names = NULL;
	int a, b, n, i;

	if (!bw) {
		pipette_fail(err, "out of memory");
		return NULL;
	}
	if (np && np->cl == cl) {	/* the same folds, read once */
		gbps = fmax(gbps, np->best.gbps);
		lat = fmin(lat, np->best.lat_us);
	} else {
		for (a = 0; a < N; a++)
			for (b = 0; b < N; b++) {
				struct pipette_link l;

				if (a == b)
					continue;
				l = pipette_cluster_node_link(cl, a, b);
				gbps = fmax(gbps, l.gbps);
				lat = fmin(lat, l.lat_us);
			}
	}
	inter_gbps = gbps;
	inter_lat = lat;
	for (n = 0; n < N; n++)
		for (a = 0; a < G; a++)
			for (b = 0; b < G; b++) {
				struct pipette_link l;

				if (a == b)
					continue;
				l = pipette_cluster_link(cl, n * G + a, n * G + b);
				if (l.gbps > gbps)	/* fmax's fold, without its call */
					gbps = l.gbps;
				if (l.lat_us < lat)
					lat = l.lat_us;
			}
	if (gbps <= 0)
		gbps = pipette_cluster_gpu(cl)->nvlink_gbps;
	if (!isfinite(lat))
		lat = 0;
	d.inter_gbps = d.intra_gbps = gbps;
	d.inter_lat_us = d.intra_lat_us = lat;
	if (split && N > 1) {
		d.inter_gbps = inter_gbps;
		d.inter_lat_us = inter_lat;
	}
	if (pipette_bwcache_set_defaults(bw, &d, err))
		goto out;
	names = calloc((size_t)nodes, sizeof(*names));
	if (!names) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	for (i = 0; i < nodes; i++) {
		names[i] = malloc(24);
		if (!names[i]) {
			pipette_fail(err, "out of memory");
			goto out;
		}
		snprintf(names[i], 24, "bound%d", i);
	}
	out = pipette_cluster_create((const char *const *)names, nodes, G, NULL,
				     pipette_cluster_gpu(cl), bw, 1, err);
out:
	for (i = 0; names && i < nodes; i++)
		free(names[i]);
	free(names);
	pipette_bwcache_destroy(bw);
	return out;
}

/* The reduced configuration of a lower bound: dp = 1 (MoE keeps its dp:
 * ep must divide it) and, unless all_mb, few micro-batches, p of them
 * when there are more than 2p (a multiple of p, as the interleaved
 * schedule needs).  The per-micro-batch stage times do not depend on
 * either, but for two shares of m that timing.c prices: the EP exchanges
 * left exposed by the overlap of combined 1F1B and DualPipe (the warm-up's
 * share, larger with fewer micro-batches) and the epilogue-only
 * compression of the backward sends (min(p - s, m) / m of them): there
 * every micro-batch is kept, or the bound can exceed the estimate (for
 * mixtral-8x7b on 4 x 8 H100 at global batch 256 it did by up to 3%, and
 * under --stack megatron the search returned ep 8 at 5.077 s where ep 4
 * takes 5.044 s). */
static void reduced(const struct pipette_model *m, const struct pipette_config *c, int all_mb,
		    struct pipette_config *r)
{
	long mb = pipette_config_microbatches(c);

	*r = *c;
	if (pipette_config_ep_overlap(c) || (c->compress.pp_rank && c->compress.pp_epilogue_only))
		all_mb = 1;
	if (mb > 2L * c->pp && !all_mb)
		mb = pipette_schedule_is_dualpipe(c->schedule) ? 2L * c->pp : c->pp;
	if (!m->experts) {
		r->dp = 1;
		r->dp_shard = 1;	/* FSDP only adds time: still a bound */
		r->distributed_optimizer = 0;
	}
	r->global_batch = mb * r->dp * r->micro_batch;
}

/* A candidate's reduced configuration, by which the bounds are shared. */
struct reduced_ref {
	struct pipette_config r;
	long i;
};

/* Reduced configurations equal in every field: pipette_config_cmp's and
 * the global batch (the search's input fixes the others); then the
 * candidate, for a deterministic order. */
static int cmp_reduced(const void *pa, const void *pb)
{
	const struct reduced_ref *a = pa, *b = pb;
	int d = pipette_config_cmp(&a->r, &b->r);

	if (d)
		return d;
	if (a->r.global_batch != b->r.global_batch)
		return a->r.global_batch < b->r.global_batch ? -1 : 1;
	return (a->i > b->i) - (a->i < b->i);
}

/* A site's calibration scales the estimate a bound is compared with
 * (timing.c site_correct: compute by a, the rest by b, so it is at least
 * min(a, b) times the model's time): a bound on the model's time scales
 * with the smaller factor below 1, or it could prune the winner. */
static double site_floor_of(const struct pipette_gpu_spec *gpu)
{
	double a = gpu->site_compute > 0 ? gpu->site_compute : 1.0;
	double b = gpu->site_comm > 0 ? gpu->site_comm : 1.0;

	return fmin(1.0, fmin(a, b));
}

/* Every candidate's lower bound: the busiest stage computes its m
 * micro-batches one at a time, so the makespan is at least m times its
 * per-micro-batch time (estimated on the reduced configuration, on a
 * small ideal cluster), plus the embedding sync.  Candidates whose
 * reduced configurations are equal share one estimate (those differing
 * in dp, the distributed optimizer, the shard degree or a count of
 * micro-batches past 2p), as they would compute the same one.  Where it
 * cannot be estimated the bound is 0 (estimated early rather than
 * never).  *ideal_nodes gets the ideal clusters' size, for pipe_bound. */
static int lower_bounds(struct search *s, struct pipette_search_stats *st,
			struct pipette_timer *t, int *ideal_nodes, struct pipette_err *err)
{
	const struct pipette_search_input *in = s->in;
	double site_floor = site_floor_of(in->gpu);
	int G = pipette_cluster_gpus_per_node(in->cluster), max_world = 1;
	struct reduced_ref *ref = malloc((size_t)s->n * sizeof(*ref));
	struct pipette_cluster *ideal = NULL;
	struct pipette_time tm;
	struct pipette_err e2;
	long i, j;
	int ok = 0;

	if (!ref)
		return pipette_fail(err, "out of memory");
	for (i = 0; i < s->n; i++) {
		reduced(in->model, &s->cand[i].cfg, 0, &ref[i].r);
		ref[i].i = i;
		if (pipette_config_world(&ref[i].r) > max_world)
			max_world = pipette_config_world(&ref[i].r);
	}
	*ideal_nodes = (max_world + G - 1) / G;
	if (!(ideal = ideal_cluster(in->cluster, in->pairs, *ideal_nodes, 0, err))) {
		free(ref);
		return -1;
	}
	qsort(ref, (size_t)s->n, sizeof(*ref), cmp_reduced);
	/* the bounds of one rank grid share its links (MoE keeps dp) */
	pipette_timer_cache_links(t, ideal);
	for (j = 0; j < s->n; j++) {
		struct pipette_candidate *c = &s->cand[ref[j].i];

		if (j == 0 || pipette_config_cmp(&ref[j - 1].r, &ref[j].r) != 0 ||
		    ref[j - 1].r.global_batch != ref[j].r.global_batch)
			ok = !pipette_time_bound(t, in->model, in->gpu, &ref[j].r, ideal, &tm, &e2);
		if (!ok) {
			c->lower_bound_s = 0;
			c->bound_stage = -1;
			continue;
		}
		c->lower_bound_s = site_floor * ((double)pipette_config_microbatches(&c->cfg) *
			(tm.stage_f_s + tm.stage_b_s + tm.stage_w_s) + tm.embed_sync_s);
		c->bound_stage = tm.busiest_stage;
		c->bound_bw_s = tm.stage_b_s + tm.stage_w_s;
		st->bounded++;
	}
	pipette_timer_cache_links(t, NULL);
	pipette_cluster_destroy(ideal);
	free(ref);
	return 0;
}

/* The pipeline bound, for a candidate the others leave to estimate when the
 * full estimate is dear: the makespan of its pipeline and the embedding
 * sync, from the configuration reduced to dp = 1 with all its
 * micro-batches, estimated whole on a small cluster whose node links are
 * all the real cluster's fastest node link and whose GPU pairs inside a
 * node are all its fastest link of any kind (lower_bounds' second ideal
 * cluster).  Why no placement on the real links is faster:
 *  - each TP and CP group of the reduced configuration is, GPU for GPU, a
 *    group of the candidate's block mapping, and each of its stages holds
 *    groups of the same shape, spread over the nodes alike (the groups'
 *    blocks of tp x cp ranks start on a node or inside one, when tp x cp
 *    divides the GPUs of a node or they divide it): the same GPU pairs
 *    inside a node and the same node hops, each no slower on the ideal
 *    cluster, and a collective's time only grows when a link slows;
 *  - every point-to-point transfer of the candidate (a stage to the
 *    next, the embedding's first and last stage) crosses nodes (tp x cp x
 *    dp >= the GPUs of a node), so no link of the reduced one is slower;
 *  - so each operation and transfer of its pipeline takes no longer, and
 *    its schedule is the candidate's (the same kind, p, v and m: the
 *    operation order is a function of them, timing.c), whose simulation
 *    is a max-plus recurrence, monotone in every time, rounding
 *    included; the makespan is no longer;
 *  - the step adds the DP tail and the optimizer to the makespan
 *    (timing.c), and the site's calibration scales the model's step by
 *    no less than site_floor (above).
 * MoE (its groups keep dp), FSDP (its shard groups grow with dp) and a
 * candidate that could take the Optimus-CC recipe (allow_compression;
 * the bound is the uncompressed one's) are left to the full estimate.
 * The estimate is read without the calibration (gpu) and on a timer of
 * its own, so the search's caches of the real links stay as they are.
 *
 * Where the full estimate reads at least PIPE_BOUND_DP times the GPUs of
 * the reduced configuration, it costs about that much more in links (the
 * simulation costs the same): this bound takes the 2048 x 8 GPU plan of
 * tests/bench/bench_plan.c from 4,775 full estimates to 1,556 (4,227
 * bounds), the estimates and bounds from 1.0 to 0.45 s of CPU (perf, on
 * the loaded 2-core build machine; after the DP bound, 1,704 bounds
 * prune 1,382 of what it leaves); on the 8- and 16-node hard cases,
 * where dp is small and the simulation is most of an estimate, it would
 * only add. */
#define PIPE_BOUND_DP 8
/* Floating-point margin of the comparison with the k-th best: the bound
 * and the estimate scale by the calibration in different orders. */
#define PIPE_BOUND_SLACK 1e-9

struct pipe_bound {
	const struct pipette_search_input *in;
	int G;				/* GPUs per node */
	/* lower_bounds' second ideal cluster, of ideal_nodes nodes (0: no
	 * bounds), built when a candidate first needs it: most searches
	 * (every one with few nodes) never do */
	int ideal_nodes;
	struct pipette_cluster *ideal;
	struct pipette_timer *t;	/* its own, NULL until first needed */
	struct pipette_gpu_spec gpu;	/* in->gpu without the site's calibration */
	double site_floor;
	/* The last reduced configuration and its bound: candidates that
	 * differ only in the distributed optimizer reduce alike, and come
	 * one after the other in bound order (pipette_config_cmp). */
	struct pipette_config last;
	double last_bound;
	int have_last;
};

static int pipe_bound_applies(const struct pipe_bound *pb, const struct pipette_config *c)
{
	int block = c->tp * c->cp;

	return pb->ideal_nodes > 0 && !pb->in->model->experts && !pipette_config_fsdp(c) &&
	       c->dp >= PIPE_BOUND_DP && (pb->G % block == 0 || block % pb->G == 0) &&
	       block * c->dp >= pb->G &&
	       !(pb->in->allow_compression && !pipette_compression_enabled(&pb->in->compress));
}

/* The bound of candidate c, 0 when it cannot be estimated. */
static double pipe_bound(struct pipe_bound *pb, const struct pipette_config *c,
			 struct pipette_search_stats *st)
{
	struct pipette_config r;
	struct pipette_time tm;
	struct pipette_err e2;

	if (!pb->t) {
		/* out of memory here only leaves the candidate to its estimate */
		if (!(pb->ideal = ideal_cluster(pb->in->cluster, pb->in->pairs, pb->ideal_nodes, 1,
						&e2)) ||
		    !(pb->t = pipette_timer_create())) {
			pb->ideal_nodes = 0;
			return 0;
		}
		pipette_timer_cache_links(pb->t, pb->ideal);
	}
	reduced(pb->in->model, c, 1, &r);
	if (pb->have_last && !pipette_config_cmp(&r, &pb->last) &&
	    r.global_batch == pb->last.global_batch)
		return pb->last_bound;
	st->pipe_bounded++;
	pb->last = r;
	pb->have_last = 1;
	pb->last_bound = pipette_time_estimate(pb->t, pb->in->model, &pb->gpu, &r, pb->ideal, NULL,
					       0, &tm, &e2)
			 ? 0 : pb->site_floor * (tm.makespan_s + tm.embed_sync_s);
	return pb->last_bound;
}

/* The third bound, for a candidate the first leaves to estimate: the
 * first with the data-parallel step the pipeline cannot hide.  The
 * estimate (timing.c) is the makespan, plus the DP tail (how far the
 * latest stage's gradient reduction runs past the makespan), the gather
 * the first forward leaves exposed, the embedding sync and the largest
 * optimizer step.  Stage s's reduction starts at its finish less its
 * last backward's window (B + W of one micro-batch with the stack's
 * overlap, else 0) and takes reduce_s, so the makespan plus the tail is
 * at least finish - window + reduce_s, and finish is at least the
 * stage's m micro-batches of F + B + W.  m (F + B + W) - (B + W) =
 * (m - 1)(F + B + W) + F only grows with each time, so the busiest
 * stage's times of the first bound (each no longer than the real ones,
 * the first bound's argument, stage for stage) keep it a bound.
 * reduce_s, the gather and the optimizer step are the estimate's own on
 * the real links (pipette_time_dp_floor: the slowest DP group of the
 * stage under the block mapping, the same collectives and bytes), read
 * from the search's link caches.  Not under FSDP (its shard groups are
 * priced elsewhere) nor where the search may add the Optimus-CC recipe
 * (the recipe's estimate can be faster).  0 where it cannot be computed.
 *
 * On tests/bench/bench_plan.c's generated 2048-node cluster (dp 128 to
 * 2048, few micro-batches: the DP tail is much of the step) it prunes
 * 2,915 of the 4,770 candidates the first bound leaves, and the full
 * estimates go from 1,556 to 478 (the pipeline bound's from 4,227 to
 * 1,704), the search from 1.48 to 1.19 G instructions (callgrind); each
 * costs about 12 k instructions, a full estimate there 730 k. */
double pipette_search_dp_bound(const struct pipette_search_input *in, struct pipette_timer *t,
			       const struct pipette_candidate *c)
{
	struct pipette_dp_floor f;

	if (c->bound_stage < 0 || c->cfg.dp * c->cfg.cp <= 1 ||
	    (in->allow_compression && !pipette_compression_enabled(&in->compress)) ||
	    pipette_time_dp_floor(t, in->model, in->gpu, &c->cfg, in->cluster, c->bound_stage,
				  &f))
		return 0;
	return c->lower_bound_s + site_floor_of(in->gpu) *
				  (f.reduce_s - (f.overlap ? c->bound_bw_s : 0) + f.exposed_s +
				   f.optimizer_s);
}

/* Whether the DP bound prunes c against the k-th best time kth. */
static int dp_pruned(const struct pipette_search_input *in, struct pipette_timer *t,
		     const struct pipette_candidate *c, double kth,
		     struct pipette_search_stats *st)
{
	if (c->bound_stage < 0)
		return 0;
	st->dp_bounded++;
	if (pipette_search_dp_bound(in, t, c) <= kth * (1 + PIPE_BOUND_SLACK))
		return 0;
	st->pruned_bound++;
	st->dp_pruned++;
	return 1;
}

static int insert_top(struct pipette_search_result *out, int k,
		      const struct pipette_candidate *c)
{
	int i = out->n_top;

	if (i == k) {
		if (pipette_candidate_cmp(c, &out->top[k - 1]) >= 0)
			return 0;
		i = k - 1;
	} else {
		out->n_top++;
	}
	while (i > 0 && pipette_candidate_cmp(c, &out->top[i - 1]) < 0) {
		out->top[i] = out->top[i - 1];
		i--;
	}
	out->top[i] = *c;
	return 0;
}

static void try_compression(const struct pipette_search_input *in, struct pipette_timer *t,
			    const struct pipette_cluster *cl, struct pipette_candidate *c);

/* The full estimate of candidate c on the real links under the block
 * mapping; into the best k when it fits. */
static void estimate_candidate(const struct pipette_search_input *in, struct pipette_timer *t,
			       struct pipette_candidate *c, struct pipette_search_result *out,
			       int k)
{
	struct pipette_err e2;

	out->stats.evaluated++;
	if (pipette_time_estimate(t, in->model, in->gpu, &c->cfg, in->cluster, NULL, 0,
				  &c->time, &e2)) {
		/* The estimator could not simulate it: never recommend it,
		 * say so once. */
		if (!out->stats.failed++)
			snprintf(out->stats.failed_msg, sizeof(out->stats.failed_msg), "%.200s",
				 e2.msg);
		return;
	}
	/* Re-check memory with the simulated in-flight counts (they depend
	 * on the operation order only, not on the links). */
	pipette_memory_estimate(in->model, in->gpu, &c->cfg, in->mem_fraction,
				pipette_timer_inflight(t), NULL, &c->mem);
	if (!c->mem.fits) {
		out->stats.feasible--;
		count_nofit(&out->stats, &c->cfg, &c->mem);
		return;
	}
	if (in->allow_compression && !pipette_compression_enabled(&in->compress))
		try_compression(in, t, in->cluster, c);
	insert_top(out, k, c);
}

int pipette_search_run(const struct pipette_search_input *in,
		       struct pipette_search_result *out, struct pipette_err *err)
{
	const struct pipette_cluster *cl = in->cluster;
	int G = pipette_cluster_gpus_per_node(cl), world = pipette_cluster_node_count(cl) * G;
	int k = in->top_k > 0 ? in->top_k : 1, rv = -1;
	struct search s = { in, &out->stats, NULL, 0, 0, err };
	struct pipette_timer *t = in->timer ? in->timer : pipette_timer_create();
	struct pipe_bound pb = { .in = in, .G = G, .gpu = *in->gpu,
				 .site_floor = site_floor_of(in->gpu) };
	long i;

	memset(out, 0, sizeof(*out));
	out->top = calloc((size_t)k, sizeof(*out->top));
	if (!t || !out->top) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	pb.gpu.site_compute = pb.gpu.site_comm = 0;
	/* TP groups stay inside one NVLink domain: a node, or the trays of
	 * an NVL72 rack (cluster.h) */
	if (enumerate(&s, world, G * pipette_cluster_domain_nodes(cl)))
		goto out;
	/* Lower bounds on one small ideal cluster. */
	if (s.n && lower_bounds(&s, &out->stats, t, &pb.ideal_nodes, err))
		goto out;
	/* Many candidates share a rank grid: read its links once. */
	pipette_timer_cache_links(t, cl);
	if (s.n > 1)	/* qsort wants a non-NULL base even for 0 items */
		qsort(s.cand, (size_t)s.n, sizeof(*s.cand), cmp_bound);
	for (i = 0; i < s.n; i++) {
		struct pipette_candidate *c = &s.cand[i];

		c->cfg.compress = in->compress;
		if (out->n_top == k && c->lower_bound_s >= out->top[k - 1].time.iteration_s) {
			out->stats.pruned_bound += s.n - i;
			break;
		}
		if (out->n_top == k && dp_pruned(in, t, c, out->top[k - 1].time.iteration_s,
						 &out->stats))
			continue;
		if (out->n_top == k && pipe_bound_applies(&pb, &c->cfg) &&
		    pipe_bound(&pb, &c->cfg, &out->stats) > out->top[k - 1].time.iteration_s *
							     (1 + PIPE_BOUND_SLACK)) {
			out->stats.pruned_bound++;
			out->stats.pipe_pruned++;
			continue;
		}
		pipette_progress_report(&in->progress, "estimating configurations", i, s.n);
		estimate_candidate(in, t, c, out, k);
	}
	rv = 0;
out:
	if (rv)
		pipette_search_result_free(out);
	free(s.cand);
	pipette_timer_destroy(pb.t);
	pipette_cluster_destroy(pb.ideal);
	if (in->timer)
		pipette_timer_cache_links(t, NULL);
	else
		pipette_timer_destroy(t);
	return rv;
}

/* The Optimus-CC recipe for this configuration, that of the paper's
 * scripts (ASPLOS23/tbl2_fig9_tbl4/ of AIS-SNU/Optimus-CC @7f6437c: CB at
 * rank 16 on the cooldown sends, PowerSGD at rank 128 on stages 0..2 of
 * PP 4, i.e. all but the last, fused embedding sync), kept when it is
 * predicted faster. */
void pipette_compression_recipe(const struct pipette_model *m,
				const struct pipette_config *c,
				struct pipette_compression *k)
{
	memset(k, 0, sizeof(*k));
	if (c->pp > 1) {
		k->pp_rank = 16;
		k->pp_epilogue_only = 1;
	}
	if (c->dp * c->cp > 1) {
		k->dp_rank = 128;
		k->dp_stages = c->pp > 1 ? c->pp - 1 : 0;
	}
	k->fused_embedding = m->tied_embeddings && c->pp > 1 && c->dp * c->cp > 1;
}

static void try_compression(const struct pipette_search_input *in, struct pipette_timer *t,
			    const struct pipette_cluster *cl, struct pipette_candidate *c)
{
	struct pipette_config k = c->cfg;
	struct pipette_time tm;

	pipette_compression_recipe(in->model, &c->cfg, &k.compress);
	if (!pipette_compression_enabled(&k.compress))
		return;
	if (pipette_time_estimate(t, in->model, in->gpu, &k, cl, NULL, 0, &tm, NULL))
		return;
	if (tm.iteration_s < c->time.iteration_s) {
		c->cfg = k;
		c->time = tm;
	}
}

void pipette_search_result_free(struct pipette_search_result *r)
{
	free(r->top);
	r->top = NULL;
	r->n_top = 0;
}
