#include "inputs/config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "inputs/limits.h"
#include "inputs/stack.h"

static const char *const recompute_names[] = { "none", "selective", "full" };
static const char *const reshard_names[] = { "default", "always", "never" };
/* Megatron-Core's names, in the order of enum pipette_recompute_module */
static const char *const module_names[PIPETTE_RM_COUNT] = {
	"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
};
static const char *const dispatcher_names[] = { "alltoall", "deepep" };

void pipette_config_init(struct pipette_config *c)
{
	memset(c, 0, sizeof(*c));
	c->tp = c->pp = c->dp = c->cp = c->ep = c->etp = c->vpp = 1;
	c->micro_batch = 1;
	c->global_batch = 1;
	c->seq_len = 2048;
	c->recompute = PIPETTE_RECOMPUTE_NONE;
	c->recompute_every = 1;
	c->dp_shard = 1;
	c->reshard = PIPETTE_RESHARD_ALWAYS;
	c->schedule = PIPETTE_SCHED_1F1B;
	c->attention = PIPETTE_ATTN_FLASH;
	c->precision = PIPETTE_PREC_BF16;
}

int pipette_config_layer_lowp(const struct pipette_model *m, const struct pipette_config *c,
			      int layer)
{
	return c->precision != PIPETTE_PREC_BF16 && layer >= c->bf16_first &&
	       layer < m->layers - c->bf16_last;
}

int pipette_config_world(const struct pipette_config *c)
{
	return c->tp * c->cp * c->dp * c->pp;
}

long pipette_config_microbatches(const struct pipette_config *c)
{
	long per = (long)c->dp * c->micro_batch;

	return per > 0 ? c->global_batch / per : 0;
}

int pipette_config_dp_replicate(const struct pipette_config *c)
{
	return c->dp_shard > 0 ? c->dp / c->dp_shard : c->dp;
}

int pipette_config_fsdp(const struct pipette_config *c)
{
	return c->stack && c->stack->fsdp;
}

int pipette_config_shard_group(const struct pipette_config *c)
{
	return pipette_config_fsdp(c) ? c->dp_shard * c->cp : 1;
}

enum pipette_reshard pipette_reshard_resolve(enum pipette_reshard r, int pp)
{
	if (r != PIPETTE_RESHARD_DEFAULT)
		return r;
	return pp > 1 ? PIPETTE_RESHARD_NEVER : PIPETTE_RESHARD_ALWAYS;
}

int pipette_config_layer_recomputed(const struct pipette_config *c, int index_in_stage)
{
	if (c->recompute != PIPETTE_RECOMPUTE_FULL)
		return 0;
	return c->recompute_every <= 1 || (index_in_stage + 1) % c->recompute_every == 0;
}


int pipette_config_chunks(const struct pipette_config *c)
{
	if (pipette_schedule_is_v(c->schedule))
		return 2;
	if (pipette_schedule_is_looped(c->schedule))
		return c->vpp;
	return 1;
}

int pipette_config_virtual_stage(const struct pipette_config *c, int s, int k)
{
	if (pipette_schedule_is_v(c->schedule))
		return k == 0 ? s : 2 * c->pp - 1 - s;
	return k * c->pp + s;
}

int pipette_config_last_rank(const struct pipette_config *c)
{
	return pipette_schedule_is_v(c->schedule) ? 0 : c->pp - 1;
}

/* Layers of each middle virtual stage of an uneven split over n. */
static int middle_layers(const struct pipette_model *m, const struct pipette_config *c, int n)
{
	int stages = n - (c->first_stage_layers ? 1 : 0) - (c->last_stage_layers ? 1 : 0);
	int layers = m->layers - (c->first_stage_layers > 0 ? c->first_stage_layers : 0) -
		     (c->last_stage_layers > 0 ? c->last_stage_layers : 0);

	return stages > 0 ? layers / stages : 0;
}

int pipette_config_vstage_layers(const struct pipette_model *m,
				 const struct pipette_config *c, int vs)
{
	int n = c->pp * pipette_config_chunks(c);

	if (n == 1)
		return m->layers;
	if (!c->first_stage_layers && !c->last_stage_layers)
		return m->layers / n;
	if (vs == 0 && c->first_stage_layers)
		return c->first_stage_layers > 0 ? c->first_stage_layers : 0;
	if (vs == n - 1 && c->last_stage_layers)
		return c->last_stage_layers > 0 ? c->last_stage_layers : 0;
	return middle_layers(m, c, n);
}

/* The sum of the rank's virtual stages' layers, without a call per
 * chunk (the search asks it per candidate): every chunk holds a middle
 * stage's layers but virtual stage 0, on rank 0, and the last, on the
 * last rank (pipette_config_last_rank), which differ in an uneven split. */
int pipette_config_stage_layers(const struct pipette_model *m,
				const struct pipette_config *c, int stage)
{
	int chunks = pipette_config_chunks(c), n = c->pp * chunks, mid, sum;

	if (n == 1)
		return m->layers;
	if (!c->first_stage_layers && !c->last_stage_layers)
		return chunks * (m->layers / n);
	mid = middle_layers(m, c, n);
	sum = chunks * mid;
	if (stage == 0 && c->first_stage_layers)
		sum += (c->first_stage_layers > 0 ? c->first_stage_layers : 0) - mid;
	if (stage == pipette_config_last_rank(c) && c->last_stage_layers)
		sum += (c->last_stage_layers > 0 ? c->last_stage_layers : 0) - mid;
	return sum;
}

/* The virtual stages before rank s's first one are 0..target-1: none is
 * the last (target <= pp - 1 < pp x chunks - 1 when there is more than
 * one), so all but stage 0 are middle stages of the same size. */
int pipette_config_stage_first_layer(const struct pipette_model *m,
				     const struct pipette_config *c, int stage)
{
	int target = pipette_config_virtual_stage(c, stage, 0);

	if (target <= 0)
		return 0;
	return pipette_config_vstage_layers(m, c, 0) +
	       (target - 1) * pipette_config_vstage_layers(m, c, 1);
}

static int check_uneven(const struct pipette_model *m,
			const struct pipette_config *c, struct pipette_err *err)
{
	int n = c->pp * pipette_config_chunks(c);
	int fixed = (c->first_stage_layers > 0 ? c->first_stage_layers : 0) +
		    (c->last_stage_layers > 0 ? c->last_stage_layers : 0);
	int middle_stages = n - (c->first_stage_layers ? 1 : 0) -
			    (c->last_stage_layers ? 1 : 0);
	int middle_layers = m->layers - fixed;

	if (c->first_stage_layers < -1 || c->last_stage_layers < -1)
		return pipette_fail(err, "first/last stage layers must be >= 0, or -1 "
				    "for a stage with no transformer layer");
	if (n < 2)
		return pipette_fail(err, "an uneven pipeline split needs pp >= 2");
	if (middle_stages == 0) {
		if (fixed != m->layers)
			return pipette_fail(err, "first + last stage layers (%d) must "
					    "equal the model's %d layers with 2 stages",
					    fixed, m->layers);
		return 0;
	}
	if (middle_layers <= 0 || middle_layers % middle_stages)
		return pipette_fail(err, "uneven split: the %d layers left for the "
				    "%d middle stages do not divide evenly",
				    middle_layers, middle_stages);
	return 0;
}

/* The schedule's shape: chunks per rank and micro-batch counts, as
 * Megatron (interleaved) and torch.distributed.pipelining check them
 * (tests/data/stacks/torch-schedules.md). */
static int check_schedule(const struct pipette_config *c, struct pipette_err *err)
{
	long mb = pipette_config_microbatches(c);

	if (pipette_schedule_is_looped(c->schedule)) {
		if (c->vpp < 2)
			return pipette_fail(err, "--schedule %s needs --vpp >= 2",
					    pipette_schedule_name(c->schedule));
		if (mb % c->pp)
			return pipette_fail(err, "%s schedule: %ld micro-batches are not a "
					    "multiple of pp %d (%s requires it)",
					    pipette_schedule_name(c->schedule), mb, c->pp,
					    c->schedule == PIPETTE_SCHED_INTERLEAVED
					    ? "Megatron" : "torch.distributed.pipelining");
	} else if (c->vpp != 1 && !pipette_schedule_is_v(c->schedule)) {
		return pipette_fail(err, "--vpp %d needs --schedule interleaved", c->vpp);
	}
	/* The zero-bubble fork's schedules run on its ZB runtime, which
	 * asserts a pipeline: the V schedules turn enable_zero_bubble on and
	 * that asserts PP > 1 (sail-sg/zero-bubble-pipeline-parallelism
	 * @39f2c186 megatron/core/zbpp_utils.py:121-134). */
	if (c->pp < 2 && pipette_config_stack(c)->id == PIPETTE_STACK_MEGATRON_ZB &&
	    (c->schedule == PIPETTE_SCHED_ZB_H1 || c->schedule == PIPETTE_SCHED_V_MIN ||
	     c->schedule == PIPETTE_SCHED_V_HALF || c->schedule == PIPETTE_SCHED_V_ZB))
		return pipette_fail(err, "%s schedule: the zero-bubble fork asserts pipeline "
				    "parallelism (pp > 1) for it", pipette_schedule_name(c->schedule));
	if (pipette_schedule_is_dualpipe(c->schedule) && mb < 2L * c->pp)
		return pipette_fail(err, "%s schedule: %ld micro-batches, fewer than 2 x pp = %d",
				    pipette_schedule_name(c->schedule), mb, 2 * c->pp);
	return 0;
}

/* Megatron-FSDP as pipette prices it (stack.c option_mfsdp): its
 * optim_grads_params strategy shards over every data-parallel rank (HSDP
 * needs --num-distributed-optimizer-instances, which the launch does not
 * write), reshards after forward (megatron_fsdp.md:391-393), runs without
 * the distributed optimizer of the non-FSDP path, and without a pipeline,
 * as every Megatron-Bridge recipe that uses it (perf_recipes/llama/
 * {b200,b300,gb200,gb300}/llama3*.py: pipeline_model_parallel_size 1).
 * Its double buffer refuses the EP all-to-all overlap (NVIDIA/Megatron-LM
 * @d98e8a64 megatron/core/distributed/fsdp/mcore_fsdp_adapter.py:177-181). */
static int check_mfsdp(const struct pipette_config *c, struct pipette_err *err)
{
	if (c->pp > 1)
		return pipette_fail(err, "--pp %d: pipette prices Megatron-FSDP (megatron_fsdp=on) "
				    "without a pipeline, as Megatron-Bridge's recipes run it", c->pp);
	if (c->dp_shard != c->dp)
		return pipette_fail(err, "--dp-shard %d: Megatron-FSDP shards over all %d "
				    "data-parallel ranks", c->dp_shard, c->dp);
	if (c->reshard != PIPETTE_RESHARD_ALWAYS)
		return pipette_fail(err, "reshard never: Megatron-FSDP reshards each layer after "
				    "forward");
	if (c->distributed_optimizer)
		return pipette_fail(err, "--distributed-optimizer: Megatron-FSDP (megatron_fsdp=on) "
				    "shards the optimizer itself");
	if (c->moe.ep_overlap)
		return pipette_fail(err, "--ep-overlap: Megatron-FSDP's double buffer refuses the EP "
				    "all-to-all overlap");
	return 0;
}

/* CPU activation offloading (the stack's offload_layers) as Megatron-Core
 * validates it: fewer layers than the model's, no pipeline, no
 * recomputation (NVIDIA/Megatron-LM @d98e8a64 megatron/core/transformer/
 * transformer_config.py:1884-1899). */
static int check_offload(const struct pipette_model *m, const struct pipette_config *c,
			 struct pipette_err *err)
{
	int n = pipette_config_stack(c)->offload_layers;

	if (!n)
		return 0;
	if (n >= m->layers)
		return pipette_fail(err, "--stack-option cpu_offload=%d: Megatron-Core offloads fewer "
				    "layers than the model's %d", n, m->layers);
	if (c->pp > 1)
		return pipette_fail(err, "--pp %d: Megatron-Core's CPU offloading "
				    "(cpu_offload=%d) runs without a pipeline", c->pp, n);
	if (c->recompute != PIPETTE_RECOMPUTE_NONE)
		return pipette_fail(err, "--recompute %s: Megatron-Core's CPU offloading "
				    "(cpu_offload=%d) refuses recomputation",
				    pipette_recompute_name(c->recompute), n);
	return 0;
}

/* FSDP and layer-wise recomputation exist only in the stacks that run them. */
static int check_sharding(const struct pipette_config *c, struct pipette_err *err)
{
	const struct pipette_stack *st = pipette_config_stack(c);

	if (c->dp_shard < 1 || c->dp % c->dp_shard)
		return pipette_fail(err, "--dp-shard %d does not divide dp %d", c->dp_shard, c->dp);
	if (c->dp_shard > 1 && !st->fsdp)
		return pipette_fail(err, "--dp-shard %d: the %s stack has no FSDP "
				    "(--stack torchtitan has)", c->dp_shard, st->name);
	if (c->reshard != PIPETTE_RESHARD_ALWAYS && c->reshard != PIPETTE_RESHARD_NEVER)
		return pipette_fail(err, "reshard: expected always or never once resolved");
	if (c->recompute_every < 1)
		return pipette_fail(err, "--recompute-every %d: expected >= 1", c->recompute_every);
	if (c->recompute_every > 1 && (c->recompute != PIPETTE_RECOMPUTE_FULL || !st->layer_ac))
		return pipette_fail(err, "--recompute-every %d needs --recompute full and a stack "
				    "that checkpoints every k-th layer (torchtitan)", c->recompute_every);
	if (st->data_parallel_only && (c->tp > 1 || c->pp > 1 || c->cp > 1 || c->ep > 1))
		return pipette_fail(err, "the %s stack runs data parallelism only", st->name);
	if (st->mfsdp)
		return check_mfsdp(c, err);
	/* torchtitan's Trainer: a micro-batch's tokens divide by TP (sequence
	 * parallel) times 2 CP (load-balanced chunks), torchtitan.md §2 */
	if (st->fsdp && ((long)c->micro_batch * c->seq_len) %
			((long)(c->sequence_parallel ? c->tp : 1) * (c->cp > 1 ? 2 * c->cp : 1)))
		return pipette_fail(err, "micro-batch %d x sequence %ld tokens do not divide by tp "
				    "x 2 cp, as torchtitan requires", c->micro_batch, c->seq_len);
	/* torchtitan's EP borrows from the shard group and TP (its efsdp
	 * mesh, torchtitan.md §2): ep must divide dp_shard x cp x tp */
	if (st->fsdp && (c->dp_shard * c->cp * c->tp) % c->ep)
		return pipette_fail(err, "--ep %d does not divide dp_shard %d x cp %d x tp %d (FSDP "
				    "stacks take EP from those ranks)", c->ep, c->dp_shard, c->cp, c->tp);
	if (st->fsdp && c->distributed_optimizer)
		return pipette_fail(err, "--distributed-optimizer: the %s stack shards with FSDP "
				    "(--dp-shard) instead", st->name);
	return 0;
}

/* Recomputation by module and the MoE execution, as Megatron-Core
 * validates them (tests/data/stacks/megatron-rules.tsv: recompute-modules,
 * moe-overlap-reqs and the MoE rules after them). */
static int check_moe(const struct pipette_model *m, const struct pipette_config *c,
		     struct pipette_err *err)
{
	const struct pipette_stack *st = pipette_config_stack(c);
	const struct pipette_moe_exec *x = &c->moe;
	char mods[128];

	if (c->recompute_modules && (c->recompute != PIPETTE_RECOMPUTE_SELECTIVE ||
				     !st->recompute_modules))
		return pipette_fail(err, "--recompute-modules needs --recompute selective and a "
				    "stack with Megatron-Core's recompute modules (megatron, nemo)");
	if (st->fixed_modules && (c->recompute != PIPETTE_RECOMPUTE_SELECTIVE ||
				  c->recompute_modules != st->fixed_modules)) {
		pipette_recompute_modules_format(st->fixed_modules, ",", mods, sizeof(mods));
		return pipette_fail(err, "the %s stack recomputes exactly %s (--recompute selective "
				    "--recompute-modules %s)", st->name, mods, mods);
	}
	if (!m->experts) {
		if (x->ep_overlap || x->dispatcher != PIPETTE_DISPATCH_ALLTOALL ||
		    x->capacity_factor > 0 || x->pad || x->imbalance > 0)
			return pipette_fail(err, "EP overlap, the dispatcher, capacity and imbalance "
					    "need a model with experts ('%s' has none)", m->name);
		return 0;
	}
	if (x->dispatcher == PIPETTE_DISPATCH_DEEPEP ? !st->deepep : st->deepep == 2)
		return pipette_fail(err, "--dispatcher %s: the %s stack %s", pipette_dispatcher_name(
					    x->dispatcher), st->name, st->deepep == 2
				    ? "always uses DeepEP's kernels" : "has no DeepEP dispatcher");
	if (x->capacity_factor < 0 || x->capacity_factor > 64 || (x->pad && x->capacity_factor <= 0))
		return pipette_fail(err, "--capacity-factor %g: expected 0 (dropless) or (0, 64]; "
				    "padding to capacity needs one", x->capacity_factor);
	if (x->capacity_factor > 0 && x->dispatcher == PIPETTE_DISPATCH_DEEPEP)
		return pipette_fail(err, "--capacity-factor: the DeepEP dispatcher is dropless");
	if (x->imbalance != 0 && (x->imbalance < 1 || x->imbalance > (double)m->experts / m->topk))
		return pipette_fail(err, "--imbalance %g: expected 1 to experts/topk = %g", x->imbalance,
				    (double)m->experts / m->topk);
	if (!x->ep_overlap)
		return 0;
	if (st->moe_overlap != 1)
		return pipette_fail(err, "--ep-overlap: the %s stack %s", st->name, st->moe_overlap
				    ? "always overlaps EP communication" : "has no EP overlap");
	if (c->ep < 2 || (c->pp > 1 && c->schedule != PIPETTE_SCHED_INTERLEAVED) ||
	    c->recompute == PIPETTE_RECOMPUTE_FULL ||
	    (pipette_config_recompute_modules(c) & PIPETTE_RM_MOE) || m->mtp_layers > 1)
		return pipette_fail(err, "--ep-overlap (--overlap-moe-expert-parallel-comm) needs "
				    "ep > 1, the interleaved schedule when pp > 1, no full "
				    "recomputation, no 'moe' recompute module and at most one MTP "
				    "layer (Megatron-Core transformer_config.py:3002-3046)");
	return 0;
}

/* What Megatron-Core's TransformerConfig refuses of a recipe (NVIDIA/
 * Megatron-LM @d98e8a64 megatron/core/transformer/transformer_config.py:
 * 1529 delayed scaling with BF16 end layers, 1538-1555 at most
 * num_layers/PP BF16 layers at each end; tests/data/stacks/
 * megatron-rules.tsv fp8-bf16-layers, fp8-recompute), so that the search
 * never picks a plan its launch would refuse. */
int pipette_bf16_layers_check(const struct pipette_model *m, enum pipette_precision p,
			      int first, int last, struct pipette_err *err)
{
	if (first < 0 || last < 0 || first + last > m->layers)
		return pipette_fail(err, "--bf16-layers %d,%d: expected two counts whose sum is at "
				    "most the model's %d layers", first, last, m->layers);
	/* "Delayed scaling does not support first / last layer in BF16"
	 * (transformer_config.py:1528-1530), and every stack that runs the
	 * delayed recipe is built on Megatron-Core. */
	if (p == PIPETTE_PREC_FP8_DELAYED && (first > 0 || last > 0))
		return pipette_fail(err, "--bf16-layers %d,%d: fp8-delayed cannot keep layers in "
				    "BF16 (Megatron-Core refuses delayed scaling with BF16 first "
				    "and last layers); use --bf16-layers 0,0 or another recipe",
				    first, last);
	return 0;
}

static int check_precision(const struct pipette_model *m, const struct pipette_config *c,
			   struct pipette_err *err)
{
	const struct pipette_stack *st = pipette_config_stack(c);
	int cap = m->layers / c->pp;

	if (pipette_bf16_layers_check(m, c->precision, c->bf16_first, c->bf16_last, err))
		return -1;
	if (!st->core_flags || c->precision == PIPETTE_PREC_BF16 ||
	    c->precision == PIPETTE_PREC_NVFP4)
		return 0;
	if (c->bf16_first > cap || c->bf16_last > cap)
		return pipette_fail(err, "--bf16-layers %d,%d: Megatron-Core keeps at most "
				    "num_layers/PP = %d layers in BF16 at each end with an FP8 "
				    "recipe", c->bf16_first, c->bf16_last, cap);
	if (c->precision == PIPETTE_PREC_FP8_DELAYED &&
	    (pipette_config_recompute_modules(c) & (PIPETTE_RM_LAYERNORM | PIPETTE_RM_MOE_ACT)))
		return pipette_fail(err, "--precision fp8-delayed: Megatron-Core's delayed scaling "
				    "cannot recompute the layernorm or moe_act modules");
	return 0;
}

int pipette_config_check(const struct pipette_model *m,
			 const struct pipette_config *c, struct pipette_err *err)
{
	int chunks = pipette_config_chunks(c);
	long per_step;
	int s;

	if (c->tp < 1 || c->pp < 1 || c->dp < 1 || c->cp < 1 || c->ep < 1 ||
	    c->etp < 1 || c->vpp < 1 || c->micro_batch < 1)
		return pipette_fail(err, "tp, pp, dp, cp, ep, etp, vpp and "
				    "micro-batch must all be >= 1");
	if (m->heads % c->tp)
		return pipette_fail(err, "--tp %d does not divide the model's %d "
				    "attention heads", c->tp, m->heads);
	if (m->kv_heads % c->tp && c->tp % m->kv_heads)
		return pipette_fail(err, "--tp %d and the model's %d KV heads: one "
				    "must divide the other", c->tp, m->kv_heads);
	if (c->pp > m->layers)
		return pipette_fail(err, "--pp %d exceeds the model's %d layers",
				    c->pp, m->layers);
	if (c->first_stage_layers || c->last_stage_layers) {
		if (check_uneven(m, c, err))
			return -1;
	} else if (m->layers % (c->pp * chunks)) {
		return pipette_fail(err, "the model's %d layers do not divide into "
				    "pp %d x %d chunks per rank", m->layers, c->pp, chunks);
	}
	for (s = 0; s < c->pp; s++)
		if (pipette_config_stage_layers(m, c, s) < 1 &&
		    c->first_stage_layers >= 0 && c->last_stage_layers >= 0)
			return pipette_fail(err, "pipeline stage %d has no layers", s);
	if (c->seq_len < 1 || c->seq_len > PIPETTE_MAX_SEQ_LEN)
		return pipette_fail(err, "--seq-len %ld is out of range [1, %ld]",
				    c->seq_len, PIPETTE_MAX_SEQ_LEN);
	if (c->seq_len % c->cp)
		return pipette_fail(err, "--cp %d does not divide --seq-len %ld",
				    c->cp, c->seq_len);
	per_step = (long)c->dp * c->micro_batch;
	if (c->global_batch < 1 || c->global_batch % per_step)
		return pipette_fail(err, "--global-batch %ld is not a multiple of "
				    "dp %d x micro-batch %d", c->global_batch, c->dp,
				    c->micro_batch);
	if (check_schedule(c, err) || check_sharding(c, err) || check_offload(m, c, err) ||
	    check_moe(m, c, err) || check_precision(m, c, err))
		return -1;
	if (m->experts) {
		if (m->experts % c->ep)
			return pipette_fail(err, "--ep %d does not divide the model's %d "
					    "experts", c->ep, m->experts);
		if ((c->dp * c->cp * c->tp) % (c->ep * c->etp))
			return pipette_fail(err, "--ep %d x etp %d must divide dp x cp x tp "
					    "= %d", c->ep, c->etp, c->dp * c->cp * c->tp);
		/* the zero-bubble fork's older rule: EP divides DP
		 * (sail-sg/zero-bubble-pipeline-parallelism @39f2c186
		 * megatron/core/parallel_state.py:509-516) */
		if (pipette_config_stack(c)->id == PIPETTE_STACK_MEGATRON_ZB && c->dp % c->ep)
			return pipette_fail(err, "--ep %d does not divide dp %d (the zero-bubble fork "
					    "takes EP from the data-parallel ranks)", c->ep, c->dp);
		if (c->ep > 1 && c->tp > 1 && !c->sequence_parallel)
			return pipette_fail(err, "Megatron needs --sequence-parallel when "
					    "tp > 1 and ep > 1");
	} else if (c->ep != 1 || c->etp != 1) {
		return pipette_fail(err, "--ep/--etp need a model with experts ('%s' "
				    "has none)", m->name);
	}
	if (c->sequence_parallel && c->tp == 1)
		return pipette_fail(err, "--sequence-parallel needs tp > 1");
	return 0;
}


const char *pipette_reshard_name(enum pipette_reshard r)
{
	return (unsigned)r < 3 ? reshard_names[r] : "?";
}

int pipette_reshard_parse(const char *s, enum pipette_reshard *out, struct pipette_err *err)
{
	int i = pipette_name_index(s, reshard_names, 3);

	if (i < 0)
		return pipette_fail(err, "reshard '%.32s': expected default, always or never", s);
	*out = (enum pipette_reshard)i;
	return 0;
}

int pipette_recompute_modules_parse(const char *s, unsigned *out, struct pipette_err *err)
{
	char buf[256], *item, *save = NULL;
	unsigned mods = 0;
	int i;

	if (pipette_strlcpy(buf, s, sizeof(buf)))
		return pipette_fail(err, "recompute modules '%.32s...': too long", s);
	for (item = strtok_r(buf, ", ", &save); item; item = strtok_r(NULL, ", ", &save)) {
		i = pipette_name_index(item, module_names, PIPETTE_RM_COUNT);
		if (i < 0)
			return pipette_fail(err, "recompute module '%.32s': expected core_attn, "
					    "moe_act, layernorm, mla_up_proj, mlp, moe or "
					    "shared_experts", item);
		if (mods & (1u << i))
			return pipette_fail(err, "recompute module %s listed twice", module_names[i]);
		mods |= 1u << i;
	}
	if (!mods)
		return pipette_fail(err, "empty recompute module list");
	*out = mods;
	return 0;
}

void pipette_recompute_modules_format(unsigned mods, const char *sep, char *buf, size_t len)
{
	size_t used = 0;
	int i;

	if (len)
		buf[0] = '\0';
	for (i = 0; i < PIPETTE_RM_COUNT && used < len; i++) {
		if (!(mods & (1u << i)))
			continue;
		used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? sep : "",
					 module_names[i]);
	}
}

unsigned pipette_config_recompute_modules(const struct pipette_config *c)
{
	if (c->recompute != PIPETTE_RECOMPUTE_SELECTIVE)
		return 0;
	return c->recompute_modules ? c->recompute_modules : PIPETTE_RM_CORE_ATTN;
}

int pipette_config_ep_overlap(const struct pipette_config *c)
{
	return c->ep > 1 && (c->moe.ep_overlap || pipette_config_stack(c)->moe_overlap == 2);
}

const char *pipette_dispatcher_name(enum pipette_dispatcher d)
{
	return (unsigned)d < 2 ? dispatcher_names[d] : "?";
}

int pipette_dispatcher_parse(const char *s, enum pipette_dispatcher *out, struct pipette_err *err)
{
	int i = pipette_name_index(s, dispatcher_names, 2);

	if (i < 0)
		return pipette_fail(err, "dispatcher '%.32s': expected alltoall or deepep", s);
	*out = (enum pipette_dispatcher)i;
	return 0;
}

const char *pipette_recompute_name(enum pipette_recompute r)
{
	return (unsigned)r < 3 ? recompute_names[r] : "?";
}

int pipette_recompute_parse(const char *s, enum pipette_recompute *out,
			    struct pipette_err *err)
{
	int i = pipette_name_index(s, recompute_names, 3);

	if (i < 0)
		return pipette_fail(err, "recompute '%.32s': expected none, selective or "
				    "full", s);
	*out = (enum pipette_recompute)i;
	return 0;
}



int pipette_compression_enabled(const struct pipette_compression *c)
{
	return c->pp_rank > 0 || c->dp_rank > 0 || c->fused_embedding;
}

/* Ranks above this are no compression at all for any real tensor. */
#define MAX_COMPRESSION_RANK 4096

static int parse_rank(const char *item, const char *val, int *out, struct pipette_err *err)
{
	long v;

	if (pipette_parse_long(val, 1, MAX_COMPRESSION_RANK, &v, item, err))
		return -1;
	*out = (int)v;
	return 0;
}

static int compression_parse(const char *s, struct pipette_compression *c,
			     struct pipette_err *err)
{
	char buf[256], *save = NULL, *item;

	memset(c, 0, sizeof(*c));
	if (!s || strlen(s) >= sizeof(buf))
		return pipette_fail(err, "--compress: expected pp:R[:epilogue],dp:R[:stages=K],emb");
	snprintf(buf, sizeof(buf), "%s", s);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *f1 = strchr(item, ':'), *f2 = NULL;

		if (f1) {
			*f1++ = '\0';
			f2 = strchr(f1, ':');
			if (f2)
				*f2++ = '\0';
		}
		if (!strcmp(item, "pp") && f1) {
			if (parse_rank("--compress pp rank", f1, &c->pp_rank, err))
				return -1;
			if (f2 && strcmp(f2, "epilogue"))
				return pipette_fail(err, "--compress pp: '%.32s': expected "
						    "'epilogue'", f2);
			c->pp_epilogue_only = f2 != NULL;
		} else if (!strcmp(item, "dp") && f1) {
			long k;

			if (parse_rank("--compress dp rank", f1, &c->dp_rank, err))
				return -1;
			if (f2) {
				if (strncmp(f2, "stages=", 7))
					return pipette_fail(err, "--compress dp: '%.32s': expected "
							    "stages=K", f2);
				if (pipette_parse_long(f2 + 7, 1, 1 << 16, &k,
						       "--compress dp stages", err))
					return -1;
				c->dp_stages = (int)k;
			}
		} else if (!strcmp(item, "emb") && !f1) {
			c->fused_embedding = 1;
		} else {
			return pipette_fail(err, "--compress: '%.32s' is not pp:R[:epilogue], "
					    "dp:R[:stages=K] or emb", item);
		}
	}
	return 0;
}

/* All or nothing: a bad item leaves *out switched off. */
int pipette_compression_parse(const char *s, struct pipette_compression *out,
			      struct pipette_err *err)
{
	struct pipette_compression c;

	memset(out, 0, sizeof(*out));
	if (compression_parse(s, &c, err))
		return -1;
	*out = c;
	return 0;
}

void pipette_compression_format(const struct pipette_compression *c, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	if (c->pp_rank)
		n += (size_t)snprintf(buf + n, len - n, "pp:%d%s", c->pp_rank,
				      c->pp_epilogue_only ? ":epilogue" : "");
	if (c->dp_rank && n < len) {
		n += (size_t)snprintf(buf + n, len - n, "%sdp:%d", n ? "," : "", c->dp_rank);
		if (c->dp_stages && n < len)
			n += (size_t)snprintf(buf + n, len - n, ":stages=%d", c->dp_stages);
	}
	if (c->fused_embedding && n < len)
		snprintf(buf + n, len - n, "%semb", n ? "," : "");
}

const char *pipette_mapping_name(enum pipette_mapping_mode m)
{
	return m == PIPETTE_MAP_BLOCK ? "block" : "optimize";
}

const char *pipette_launch_name(enum pipette_launch_mode l)
{
	return l == PIPETTE_LAUNCH_TORCHRUN ? "torchrun" : "srun";
}

int pipette_mapping_parse(const char *s, enum pipette_mapping_mode *out, struct pipette_err *err)
{
	if (!strcmp(s, "optimize"))
		*out = PIPETTE_MAP_OPTIMIZE;
	else if (!strcmp(s, "block"))
		*out = PIPETTE_MAP_BLOCK;
	else
		return pipette_fail(err, "'%.32s': expected optimize or block", s);
	return 0;
}

int pipette_launch_parse(const char *s, enum pipette_launch_mode *out, struct pipette_err *err)
{
	if (!strcmp(s, "srun"))
		*out = PIPETTE_LAUNCH_SRUN;
	else if (!strcmp(s, "torchrun"))
		*out = PIPETTE_LAUNCH_TORCHRUN;
	else
		return pipette_fail(err, "'%.32s': expected srun or torchrun", s);
	return 0;
}

static const struct {
	const char *name, *alias, *alias2;
	size_t off;
} int_pins[PIPETTE_INT_PINS] = {
	{ "tp", NULL, NULL, offsetof(struct pipette_pins, tp) },
	{ "pp", NULL, NULL, offsetof(struct pipette_pins, pp) },
	{ "dp", NULL, NULL, offsetof(struct pipette_pins, dp) },
	{ "cp", NULL, NULL, offsetof(struct pipette_pins, cp) },
	{ "ep", NULL, NULL, offsetof(struct pipette_pins, ep) },
	{ "etp", NULL, NULL, offsetof(struct pipette_pins, etp) },
	{ "vpp", NULL, NULL, offsetof(struct pipette_pins, vpp) },
	{ "micro_batch", "mb", "micro-batch", offsetof(struct pipette_pins, micro_batch) },
	{ "dp_shard", "dp-shard", NULL, offsetof(struct pipette_pins, dp_shard) },
	{ "recompute_every", "recompute-every", NULL, offsetof(struct pipette_pins, recompute_every) },
};

int *pipette_pin_slot(struct pipette_pins *p, const char *name)
{
	int i;

	for (i = 0; name && i < PIPETTE_INT_PINS; i++)
		if (!strcmp(name, int_pins[i].name) ||
		    (int_pins[i].alias && !strcmp(name, int_pins[i].alias)) ||
		    (int_pins[i].alias2 && !strcmp(name, int_pins[i].alias2)))
			return (int *)((char *)p + int_pins[i].off);
	return NULL;
}

const char *pipette_pin_name(int i)
{
	return i >= 0 && i < PIPETTE_INT_PINS ? int_pins[i].name : "?";
}

int pipette_pin_value(const struct pipette_pins *p, int i)
{
	return i >= 0 && i < PIPETTE_INT_PINS ? *(const int *)((const char *)p + int_pins[i].off)
					       : -1;
}

void pipette_pins_init(struct pipette_pins *p)
{
	int i;

	memset(p, 0, sizeof(*p));
	for (i = 0; i < PIPETTE_INT_PINS; i++)
		*(int *)((char *)p + int_pins[i].off) = -1;
	p->schedule = p->recompute = p->sequence_parallel = p->distributed_optimizer = -1;
	p->reshard = p->dispatcher = p->ep_overlap = -1;
	p->recompute_modules = -1;
	p->schedule_set = 0;
	p->precision_set = 0;
}

int pipette_schedule_pin_parse(const char *s, struct pipette_pins *p, struct pipette_err *err)
{
	char buf[128], *item, *save = NULL;
	enum pipette_schedule_kind k;
	unsigned set = 0;
	int n = 0;

	if (pipette_strlcpy(buf, s, sizeof(buf)))
		return pipette_fail(err, "schedule list '%.32s...': too long", s);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (pipette_schedule_parse(item, &k, err))
			return -1;
		if (set & (1u << k))
			return pipette_fail(err, "schedule %s listed twice", item);
		set |= 1u << k;
		n++;
	}
	if (!n)
		return pipette_fail(err, "empty schedule list");
	p->schedule = n == 1 ? (int)k : -1;
	p->schedule_set = n == 1 ? 0 : set;
	return 0;
}

int pipette_pins_allow_schedule(const struct pipette_pins *p, enum pipette_schedule_kind k)
{
	if (p->schedule >= 0)
		return p->schedule == (int)k;
	return !p->schedule_set || (p->schedule_set & (1u << k));
}

const struct pipette_stack *pipette_config_stack(const struct pipette_config *c)
{
	return c->stack ? c->stack : pipette_stack_get(PIPETTE_STACK_MEGATRON_2022);
}

double pipette_stack_tp_exposed(const struct pipette_stack *s, const struct pipette_config *c)
{
	return c->tp > 1 && c->sequence_parallel ? s->tp_exposed : 1.0;
}
