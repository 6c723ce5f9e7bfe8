#include "estimate/memory.h"

#include <math.h>
#include <string.h>

#include "estimate/schedule.h"
#include "inputs/stack.h"

/* Bytes per parameter: bf16 weights 2 (Megatron
 * theoretical_memory_usage.py:293-296); the main gradients and the
 * optimizer state are the stack's (stack.h: fp32 master weights and Adam
 * moments, 12, sharded over data parallel ranks by the distributed
 * optimizer). */
#define BYTES_PARAM 2.0

/* CUDA context and framework: "CUDA context 300-500 MB" in the notes of
 * Fujii's memory estimator (okoge-kaz.github.io memory-estimator.js);
 * the upper end, to stay on the safe side. */
#define CUDA_CONTEXT_BYTES (500.0 * PIPETTE_MIB)
/* NCCL buffers: 0.5 GB per communicator whose size is > 1 (same tool). */
#define NCCL_BYTES_PER_COMM 0.5e9

/* GPT-style blocks (GELU, LayerNorm) carry dropout and, in the runs of
 * Korthikanti et al., unfused attention; Llama-style blocks (SwiGLU,
 * RMSNorm) have no dropout and use FlashAttention (Fujii et al.). */
static int gpt_style(const struct pipette_model *m)
{
	return m->ffn_kind == PIPETTE_FFN_GELU;
}

/* torchtitan's per-op selective checkpointing of a dense block (tests/
 * data/stacks/torchtitan.md §5): the block's input and the outputs of
 * the saved ops are kept, everything else is recomputed in backward.  Of
 * the block's seven matmuls (wq, wk, wv, wo, w1, w3, w2) every other one
 * in call order is saved: wq (q), wv (v), w1 and w2; and the attention
 * kernel's output.  Bytes per token in bf16; q, v, the attention output
 * and w1's output are split over TP, the block input with sequence
 * parallelism, w2's output (a partial sum before the reduce) is not. */
static double sac_ops_layer(const struct pipette_model *m, const struct pipette_config *c)
{
	double s = (double)c->seq_len / c->cp, b = c->micro_batch, h = m->hidden, t = c->tp;
	double qw = pipette_model_q_width(m), kvw = pipette_model_kv_width(m);
	double shard = 2.0 * qw + 2.0 * kvw + 2.0 * qw + 2.0 * m->ffn;

	return s * b * (2.0 * h / (c->sequence_parallel ? t : 1.0) + 2.0 * h + shard / t);
}

/* The routed token copies an EP rank holds per micro-batch token: topk
 * with balanced routing; the busiest rank receives `imbalance` times its
 * share when dropless, at most capacity_factor times it when tokens are
 * dropped, exactly that when padded to capacity (Megatron-Core's
 * --moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity,
 * megatron-args.tsv). */
double pipette_moe_routed_factor(const struct pipette_model *m, const struct pipette_config *c)
{
	double imb = c->moe.imbalance >= 1.0 ? c->moe.imbalance : 1.0;
	double cf = c->moe.capacity_factor;

	if (cf <= 0)
		return m->topk * imb;
	return m->topk * (c->moe.pad ? cf : fmin(imb, cf));
}

/* Attention's saved tensors, bytes per token: replicated across TP
 * (unless sequence parallel) and split over TP by heads.  Standard
 * attention keeps Q (qw), K and V (kvw each) and the output (qw) with a
 * fused kernel (Korthikanti et al. Table 2, GQA widths after Fujii).
 * MLA (DeepSeek-V2 §2.1; Megatron-Core multi_latent_attention.py) keeps
 * the two compressed latents and their normed copies, the inputs of the
 * up-projections (q_lora_rank and kv_lora_rank + the shared RoPE key),
 * then the kernel's Q and K (heads x (nope + rope)), V and the output
 * (heads x v_head_dim).  Recomputing mla_up_proj drops Q, K and V: the
 * up-projections run again from the kept latents. */
static void attention_saved(const struct pipette_model *m, unsigned mods, double *repl,
			    double *shard)
{
	double qw = pipette_model_q_width(m), kvw = pipette_model_kv_width(m);
	double vw = pipette_model_v_width(m);

	if (!m->kv_lora_rank) {
		*repl = 0;
		*shard = 2 * qw + 4 * kvw + 2 * qw;
		return;
	}
	*repl = 2.0 * (2.0 * m->q_lora_rank + 2.0 * m->kv_lora_rank + m->qk_rope_dim);
	*shard = 2.0 * vw;				/* the kernel's output */
	if (!(mods & PIPETTE_RM_MLA_UP_PROJ))
		*shard += 2.0 * (qw + kvw + vw);	/* Q, K, V */
}

/* The MLP side of a layer, bytes per token: shard (split over TP) and
 * routed (per EP rank, already per token of this rank).  A dense MLP keeps
 * ffn_tensors ffn-wide tensors; recomputing mlp drops them.  A MoE block
 * keeps, per routed token copy, the permuted input (h) and the experts'
 * intermediates (ffn_tensors x expert_ffn, split by expert TP; moe_act
 * drops the activation's output, one of them), the router's fp32 logits,
 * and the shared experts' intermediates (shared_experts drops them).
 * Recomputing moe keeps only the block's input. */
static void mlp_saved(const struct pipette_model *m, const struct pipette_config *c,
		      int layer, unsigned mods, double ffn_tensors, double *shard,
		      double *routed)
{
	double h = m->hidden, per, ab;

	*shard = *routed = 0;
	if (!pipette_model_is_moe_layer(m, layer)) {
		if (!(mods & PIPETTE_RM_MLP))
			*shard = 2 * ffn_tensors * m->ffn;
		return;
	}
	if (mods & PIPETTE_RM_MOE)
		return;
	if (m->shared_ffn && !(mods & PIPETTE_RM_SHARED_EXPERTS))
		*shard = 2 * ffn_tensors * m->shared_ffn;
	/* FP8 stacks cache the experts' input and the SwiGLU's input in
	 * FP8, one byte each (DeepSeek-V3 §3.3.3) */
	ab = pipette_config_stack(c)->fp8_gemm && c->precision != PIPETTE_PREC_BF16 ? 1.0 : 2.0;
	per = ab * h + (ab * 2 + 2 * (ffn_tensors - 2 - (mods & PIPETTE_RM_MOE_ACT ? 1 : 0))) *
		       m->expert_ffn / c->etp;
	*routed = pipette_moe_routed_factor(m, c) * per + m->experts * 4.0;
}

/* A low-precision layer of Transformer Engine's modules saves each linear
 * layer's input for its weight gradient quantized (knobs.h facts: `saved`
 * bytes per value): the normalized inputs of QKV and of a dense MLP's
 * FC1 (LayerNormLinear casts the norm's output, 2 bytes -> saved), and
 * FC2's input, one of the ffn-wide tensors; the output projection keeps a
 * quantized copy of the attention output beside the bf16 one the
 * attention kernel saves for its own backward (MLA's projections are
 * left as they are). */
static void lowp_saved(const struct pipette_model *m, const struct pipette_config *c, int layer,
		       unsigned mods, double tokens, double *repl, double *shard)
{
	double sb = pipette_precision_facts(c->precision)->saved, h = m->hidden;
	int moe = pipette_model_is_moe_layer(m, layer);

	*repl -= tokens * (2.0 - sb) * h * (moe ? 1 : 2);
	if (!m->kv_lora_rank)
		*shard += tokens * sb * pipette_model_q_width(m);
	if (!moe && !(mods & PIPETTE_RM_MLP))
		*shard -= tokens * (2.0 - sb) * m->ffn;
}

/* Korthikanti et al. (MLSys'23) Table 2 per-block breakdown, generalised
 * to GQA, SwiGLU and MoE widths as Fujii's memory-estimator.js @837b9f48
 * does (okoge-kaz/okoge-kaz.github.io):
 *   replicated across TP unless sequence parallel: QKV input 2sbh, MLP
 *   input 2sbh, two norm inputs 4sbh, dropout masks sbh + sbh (GPT only);
 *   sharded by TP: attention (attention_saved) and MLP intermediates
 *   2sb*ffn per tensor (mlp_saved);
 *   attention scores 5as^2b (softmax 2, dropout mask 1, dropout output 2)
 *   with the unfused attention kernel unless core_attn is recomputed
 *   (fused attention keeps none).
 * Megatron-Core's recompute modules drop what they recompute: layernorm
 * the outputs of the norms that stand alone (MLA's input norm, a MoE
 * block's pre-MLP norm), the others in attention_saved and mlp_saved. */
double pipette_memory_layer_activations(const struct pipette_model *m,
					const struct pipette_config *c, int layer)
{
	double s = (double)c->seq_len / c->cp, b = c->micro_batch, h = m->hidden;
	double t = c->tp, tokens = s * b;
	double ffn_tensors = m->ffn_kind == PIPETTE_FFN_SWIGLU
		? pipette_config_stack(c)->swiglu_saved : 2.0;
	unsigned mods = pipette_config_recompute_modules(c);
	double repl, shard, arepl, ashard, mshard, routed, scores = 0;

	if (c->recompute == PIPETTE_RECOMPUTE_FULL)	/* only the layer input */
		return 2.0 * tokens * h / (c->sequence_parallel ? t : 1.0);
	if (c->recompute == PIPETTE_RECOMPUTE_SELECTIVE &&
	    pipette_config_stack(c)->selective_ops && !pipette_model_is_moe_layer(m, layer))
		return sac_ops_layer(m, c);

	attention_saved(m, mods, &arepl, &ashard);
	mlp_saved(m, c, layer, mods, ffn_tensors, &mshard, &routed);
	repl = tokens * (8 * h + arepl + (gpt_style(m) ? 2 * h : 0));
	/* Transformer Engine fuses a norm into the linear after it unless
	 * that is MLA's down-projection or a MoE router (the norms it can
	 * recompute: megatron-moe notes, tests/data/stacks/README.md) */
	if (mods & PIPETTE_RM_LAYERNORM)
		repl -= tokens * 2 * h * ((m->kv_lora_rank ? 1 : 0) +
					  pipette_model_is_moe_layer(m, layer));
	shard = tokens * (ashard + mshard);
	if (pipette_config_stack(c)->te_modules && pipette_config_layer_lowp(m, c, layer))
		lowp_saved(m, c, layer, mods, tokens, &repl, &shard);
	routed *= tokens;
	if (c->sequence_parallel)	/* routed tokens already split over TP */
		routed /= t;
	if (c->attention == PIPETTE_ATTN_UNFUSED && !(mods & PIPETTE_RM_CORE_ATTN))
		scores = 5.0 * m->heads * s * s * b;
	if (c->sequence_parallel)
		return (repl + shard + scores) / t + routed;
	return repl + (shard + scores) / t + routed;
}

/* FSDP (the stack's fsdp fact) on a stage of P parameters (after TP and
 * EP), X of them routed experts, whose largest unit has P_l (a layer, or
 * the embedding on the first stage and the output layer on the last,
 * which are FSDP units of their own), sharded over N = dp_shard x cp;
 * torchtitan's experts are sharded over dp_shard x cp x tp / ep instead
 * (its efsdp mesh: EP borrows from the shard group and TP):
 *   parameters  shard_param_bytes per sharded parameter (the fp32 shards,
 *               which are the optimizer's master weights), plus the
 *               gathered copies in gather_bytes: resharding after forward
 *               and no pipeline, the unit computing and the one prefetched
 *               (2 P_l; torchtitan keeps the output layer, its last unit,
 *               gathered); otherwise every unit of the stage (P): without
 *               resharding they stay from forward to backward, and under
 *               torch's pipelining a backward leaves them gathered for the
 *               next micro-batch (set_reshard_after_backward(False));
 *               unsharded (N = 1) the model's working copy (P);
 *   gradients   fp32 shards 4 per sharded parameter, plus the unit being
 *               reduced: its gathered-dtype gradient and the reduce-dtype
 *               copy the reduce-scatter reads (FSDP2 casts before
 *               reducing); when the gradient sync waits for the last
 *               micro-batch (pipelining) the stage's unsharded gradients
 *               accumulate, in reduce_bytes;
 *   optimizer   optim_bytes per sharded parameter (Adam's moments).
 * Sources: tests/data/stacks/torchtitan.md §2-4 and composer-fsdp.md §2-4. */
static void fsdp_state(const struct pipette_model *m, const struct pipette_config *c,
		       int stage, struct pipette_stage_memory *out)
{
	const struct pipette_stack *st = pipette_config_stack(c);
	double P = out->stage_params, X = out->expert_params, Pl = out->layer_params;
	double N = pipette_config_shard_group(c), emb = pipette_model_embedding_params(m) / c->tp;
	double Nx = fmax(1.0, (double)c->dp_shard * c->cp * c->tp / ((double)c->ep * c->etp));
	double sharded = (P - X) / N + X / Nx, work, head = 0, first = 0, unit;
	int sync_each = c->pp == 1 && st->sync_each_mb;

	if (stage == pipette_config_last_rank(c))
		head = emb;
	if (stage == 0)
		first = emb;
	/* the largest unit a reduce-scatter handles: a layer, or the
	 * embedding or output layer of the end stages */
	unit = fmax(Pl, fmax(head, first));
	if (N > 1 && c->reshard == PIPETTE_RESHARD_ALWAYS && c->pp == 1)
		work = fmin(P, fmax(2.0 * Pl + head, first + Pl));
	else
		work = P;
	out->params_bytes = st->shard_param_bytes * sharded + st->gather_bytes * work;
	out->grads_bytes = st->shard_grad_bytes * sharded;
	if (N > 1 || c->dp > 1) {
		if (c->pp == 1 && (sync_each || pipette_config_microbatches(c) == 1))
			out->grads_bytes += (st->gather_bytes +
					     (st->reduce_bytes != st->gather_bytes ? st->reduce_bytes : 0)) * unit;
		else
			out->grads_bytes += st->reduce_bytes * P;
	}
	out->optimizer_bytes = st->optim_bytes * sharded;
}

/* Megatron-FSDP (the stack's mfsdp fact) on the one stage of P
 * parameters, X of them routed experts, whose largest transformer layer
 * has P_l, sharded over N = dp x cp (experts over their expert-data-
 * parallel ranks, N_x), as its buffers lay them out (NVIDIA/Megatron-LM
 * @d98e8a64 megatron/core/distributed/fsdp/src/megatron_fsdp/
 * param_and_grad_buffer.py:2630-2790; docs/user-guide/features/
 * megatron_fsdp.md:351-429):
 *   parameters  per sharded parameter the fp32 main weight and the shard
 *               of the compute weight (held bytes: BF16 2, FP8 1, MXFP8's
 *               two layouts 2); two transformer layers gathered in the
 *               double buffer's persistent pair (fsdp_double_buffer, the
 *               FSDP units being TransformerLayer, mcore_fsdp_adapter.py
 *               :163-173); the embedding and the output layer, which are
 *               no units, gathered throughout in BF16 ("non-unit modules
 *               remain persistently un-sharded", megatron_fsdp.md:391-399);
 *   gradients   the BF16 main-gradient shards, the double buffer's two
 *               layers of unsharded BF16 gradients being reduced, and the
 *               non-unit modules' whole gradients;
 *   optimizer   optim_bytes (Adam's two fp32 moments) per sharded
 *               parameter. */
static void mfsdp_state(const struct pipette_model *m, const struct pipette_config *c,
			struct pipette_stage_memory *out)
{
	const struct pipette_stack *st = pipette_config_stack(c);
	double P = out->stage_params, X = out->expert_params, Pl = out->layer_params;
	double N = pipette_config_shard_group(c), emb = pipette_model_embedding_params(m) / c->tp;
	double Nx = fmax(1.0, (double)c->dp * c->cp * c->tp / ((double)c->ep * c->etp));
	double sharded = (P - X) / N + X / Nx, hb = pipette_stack_held_bytes(st, c->precision);
	double nonunit = emb + (m->tied_embeddings ? 0 : emb);

	out->params_bytes = (st->shard_param_bytes + hb) * sharded + hb * 2.0 * Pl +
			    BYTES_PARAM * nonunit;
	out->grads_bytes = st->shard_grad_bytes * sharded + st->reduce_bytes * (2.0 * Pl + nonunit);
	out->optimizer_bytes = st->optim_bytes * sharded;
}

/* A layer's parameters on this GPU, by kind (dense or MoE: the only way
 * pipette_model_layer_params depends on the layer): dense (attention,
 * MLP, router and shared experts, split over TP, and the norms) and
 * routed experts (split over EP x ETP). */
struct layer_kind {
	double dense, expert, norms;
};

static void layer_kind(const struct pipette_model *m, const struct pipette_config *c, int layer,
		       struct layer_kind *k)
{
	struct pipette_layer_params lp;

	pipette_model_layer_params(m, layer, &lp);
	k->dense = (lp.attn + lp.mlp) / c->tp + lp.norms;
	k->expert = lp.experts / ((double)c->ep * c->etp);
	k->norms = lp.norms;
}

static int moe_layer(const struct pipette_model *m, int layer)
{
	return m->experts && pipette_model_is_moe_layer(m, layer);
}

/* x added n times from 0, in order: what a loop over n layers of one kind
 * sums, bit for bit. */
static double repeat_sum(double x, int n)
{
	double sum = 0;

	while (n-- > 0)
		sum += x;
	return sum;
}

/* Layers of [first, first + n) in low precision (pipette_config_layer_lowp). */
static int lowp_layers(const struct pipette_model *m, const struct pipette_config *c,
		       int first, int n)
{
	int lo = first > c->bf16_first ? first : c->bf16_first;
	int hi = first + n < m->layers - c->bf16_last ? first + n : m->layers - c->bf16_last;

	return c->precision != PIPETTE_PREC_BF16 && hi > lo ? hi - lo : 0;
}

/* The n layers from `first`, summed layer by layer in order (the sums
 * are the same, bit for bit, as adding each layer's own figures): their
 * dense and expert parameters, the largest layer, and the linear
 * weights of the low-precision ones.  Without experts every layer is of
 * one kind. */
static void layers_params(const struct pipette_model *m, const struct pipette_config *c,
			  int first, int n, double *dense, double *expert, double *largest,
			  double *lowp)
{
	struct layer_kind kinds[2];
	double d = 0, e = 0, big = 0, lw = 0;
	int have[2] = { 0, 0 }, any_lowp = c->precision != PIPETTE_PREC_BF16, l;

	if (!m->experts) {
		if (n > 0) {
			layer_kind(m, c, first, &kinds[0]);
			d = repeat_sum(kinds[0].dense, n);
			e = repeat_sum(kinds[0].expert, n);
			big = fmax(0.0, kinds[0].dense + kinds[0].expert);
			lw = repeat_sum(kinds[0].dense + kinds[0].expert - kinds[0].norms,
					lowp_layers(m, c, first, n));
		}
		*dense = d, *expert = e, *largest = big, *lowp = lw;
		return;
	}
	for (l = first; l < first + n; l++) {
		int moe = pipette_model_is_moe_layer(m, l);
		const struct layer_kind *k = &kinds[moe];
		double lpar;

		if (!have[moe]) {
			layer_kind(m, c, l, &kinds[moe]);
			have[moe] = 1;
		}
		d += k->dense;
		e += k->expert;
		lpar = k->dense + k->expert;
		if (lpar > big)
			big = lpar;
		if (any_lowp && pipette_config_layer_lowp(m, c, l))
			lw += lpar - k->norms;
	}
	*dense = d, *expert = e, *largest = big, *lowp = lw;
}

/* The stage's own parameters beyond its layers: the embedding, the
 * output layer, the final norm and the MTP modules. */
static void stage_params(const struct pipette_model *m, const struct pipette_config *c,
			 int stage, double *dense, double *expert)
{
	struct pipette_layer_params lp;
	double emb = pipette_model_embedding_params(m) / c->tp;

	if (stage == 0)
		*dense += emb;
	if (stage == pipette_config_last_rank(c)) {
		/* Untied: the output layer.  Tied, on another rank than the
		 * embedding: Megatron keeps a copy of the word embeddings on the
		 * last stage. */
		if (!m->tied_embeddings || pipette_config_last_rank(c) != 0)
			*dense += emb;
		*dense += m->norm == PIPETTE_NORM_LAYERNORM ? 2.0 * m->hidden : m->hidden;
		if (m->mtp_layers) {
			/* Each MTP module: one more layer, a 2h x h projection
			 * and its norms (DeepSeek-V3 §2.2). */
			pipette_model_layer_params(m, m->layers - 1, &lp);
			*dense += m->mtp_layers * ((lp.attn + lp.mlp + 2.0 * m->hidden *
						    m->hidden) / c->tp + lp.norms);
			*expert += m->mtp_layers * lp.experts / ((double)c->ep * c->etp);
		}
	}
}

static double comm_buffers(const struct pipette_config *c)
{
	int groups = (c->tp > 1) + (c->pp > 1) + (c->dp > 1) + (c->cp > 1) + (c->ep > 1) +
		     (pipette_config_fsdp(c) && c->dp_shard > 1 && c->dp > c->dp_shard);

	return groups * NCCL_BYTES_PER_COMM;
}

/* The last stage's loss, for one micro-batch: the output layer's input
 * and the logits as the stack keeps them (megatron-2022: fp32 logits and
 * input, Megatron's theoretical_memory_usage.py :367-376; current stacks:
 * bf16 logits plus the fp32 copy vocab-parallel cross entropy saves as its
 * softmax, 6 bytes), and the deferred embedding weight gradient: with PP,
 * the last stage keeps each micro-batch's logit gradient and input for up
 * to wgrad_deferral_limit micro-batches (Megatron-Core tensor_parallel/
 * layers.py, tests/data/stacks/memory-terms.md). */
static double loss_bytes(const struct pipette_model *m, const struct pipette_config *c)
{
	const struct pipette_stack *st = pipette_config_stack(c);
	double s = (double)c->seq_len / c->cp, b = c->micro_batch, t = c->tp;
	double h = m->hidden, v = m->vocab;
	double bytes = s * b * (st->head_input_bytes * h + st->logits_bytes * v) / t;
	long mbs = pipette_config_microbatches(c);

	if (st->wgrad_deferral_limit > 0 && c->pp > 1)
		bytes += (double)(mbs < st->wgrad_deferral_limit ? mbs : st->wgrad_deferral_limit) *
			 2.0 * s * b * (v + h) / t;
	return bytes;
}

/* One micro-batch's activations of the n layers from `first`: a stage's
 * dense layers store the same, and so do its MoE layers, so each kind,
 * recomputed or not (every k-th layer recomputed, the others keep
 * everything) and low-precision or not (a recipe's BF16 end layers save
 * BF16 inputs), is computed once. */
static double stage_layer_activations(const struct pipette_model *m,
				      const struct pipette_config *c, int first, int n)
{
	double kinds[2][2][2], act = 0;
	int have[2][2][2] = { { { 0 } } }, l, full = c->recompute == PIPETTE_RECOMPUTE_FULL;
	int mixed = c->precision != PIPETTE_PREC_BF16 && (c->bf16_first || c->bf16_last);

	if (!m->experts && !full && !mixed)	/* one kind */
		return n > 0 ? repeat_sum(pipette_memory_layer_activations(m, c, first), n) : 0;
	for (l = first; l < first + n; l++) {
		int moe = moe_layer(m, l), lowp = pipette_config_layer_lowp(m, c, l);
		int keep = full && !pipette_config_layer_recomputed(c, l - first);

		if (!have[moe][keep][lowp]) {
			struct pipette_config kept;

			if (keep) {
				kept = *c;
				kept.recompute = PIPETTE_RECOMPUTE_NONE;
			}
			kinds[moe][keep][lowp] = pipette_memory_layer_activations(m, keep ? &kept : c,
										   l);
			have[moe][keep][lowp] = 1;
		}
		act += kinds[moe][keep][lowp];
	}
	return act;
}

double pipette_memory_offloaded_activations(const struct pipette_model *m,
					    const struct pipette_config *c)
{
	int k = pipette_config_stack(c)->offload_layers;

	return k > 0 && k < m->layers ? stage_layer_activations(m, c, 0, k) : 0;
}

/* Full recomputation's backward recomputes one layer at a time: the
 * largest layer's activations for one micro-batch, as the stack keeps
 * them while recomputing.  A layer's figure depends on it only through
 * its kind (MoE or dense) and its precision (low or BF16), so each kind
 * is computed once. */
static double worst_recomputed_layer(const struct pipette_model *m,
				     const struct pipette_config *c, int first, int n)
{
	struct pipette_config full = *c;
	double kinds[2][2], worst = 0;
	int have[2][2] = { { 0, 0 }, { 0, 0 } }, any_lowp = c->precision != PIPETTE_PREC_BF16, l;

	full.recompute = pipette_config_stack(c)->selective_ops ? PIPETTE_RECOMPUTE_NONE
								: PIPETTE_RECOMPUTE_SELECTIVE;
	for (l = first; l < first + n; l++) {
		int moe = moe_layer(m, l), lowp = any_lowp && pipette_config_layer_lowp(m, c, l);

		if (have[moe][lowp])
			continue;
		kinds[moe][lowp] = pipette_memory_layer_activations(m, &full, l);
		have[moe][lowp] = 1;
		if (kinds[moe][lowp] > worst)
			worst = kinds[moe][lowp];
	}
	return worst;
}

/* Bytes per linear weight of a low-precision layer beyond its BF16
 * parameter: the quantized copies Transformer Engine keeps (knobs.h
 * facts; per-tensor FP8 adds a transpose where the GPU's FP8 GEMMs are
 * TN-only, every GPU without Blackwell's block-scaled tensor cores), less
 * the BF16 copy when parameters are gathered and kept quantized
 * (fp8_param_gather; NeMo's and Megatron-Bridge's recipes but the
 * blockwise one, mixed_precision.py:217-421). */
static double lowp_weight_bytes(const struct pipette_config *c, const struct pipette_gpu_spec *g)
{
	const struct pipette_stack *st = pipette_config_stack(c);
	const struct pipette_precision_facts *pf = pipette_precision_facts(c->precision);
	double b;

	if (!st->te_modules || c->precision == PIPETTE_PREC_BF16)
		return 0;
	b = g && g->fp4_tflops > 0 ? pf->weight_copies : pf->weight_copies_tn;
	/* NeMo's recipes gather FP8 parameters; its NVFP4 one has no FP4
	 * parameter gather (NVIDIA/NeMo @8cfedd72, the launch's plugin keys) */
	if (pipette_stack_gathers_lowp(st, c->precision))
		b -= BYTES_PARAM;
	return b;
}

void pipette_memory_stage(const struct pipette_model *m, const struct pipette_gpu_spec *gpu,
			  const struct pipette_config *c, int stage,
			  double inflight, struct pipette_stage_memory *out)
{
	const struct pipette_stack *st = pipette_config_stack(c);
	double dense, expert, act = 0, s = (double)c->seq_len / c->cp, transient;
	double b = c->micro_batch, t = c->tp;
	double dp_opt = c->distributed_optimizer ? (double)c->dp * c->cp : 1.0;
	double edp_opt = c->distributed_optimizer
		? (double)c->dp * c->cp * c->tp / ((double)c->ep * c->etp) : 1.0;
	int first = pipette_config_stage_first_layer(m, c, stage);
	int n = pipette_config_stage_layers(m, c, stage);
	double lowp_params = 0;	/* linear weights of the stage's low-precision layers */

	memset(out, 0, sizeof(*out));
	if (inflight < 0)
		inflight = pipette_schedule_inflight(c->schedule, c->pp,
						     pipette_config_chunks(c),
						     pipette_config_microbatches(c), stage);
	out->layers = n;
	out->inflight = inflight;

	layers_params(m, c, first, n, &dense, &expert, &out->layer_params, &lowp_params);
	stage_params(m, c, stage, &dense, &expert);
	out->stage_params = dense + expert;
	out->expert_params = expert;
	if (st->mfsdp) {
		mfsdp_state(m, c, out);
	} else if (pipette_config_fsdp(c)) {
		fsdp_state(m, c, stage, out);
	} else {
		out->params_bytes = BYTES_PARAM * (dense + expert) +
				    lowp_weight_bytes(c, gpu) * lowp_params;
		out->grads_bytes = st->grad_bytes * (dense + expert);
		out->optimizer_bytes = st->optim_bytes * (dense / dp_opt + expert / edp_opt);
	}
	/* DualPipe keeps two copies of the model's parameters (arXiv
	 * 2412.19437 §3.2.1, Table 2: "2x"); they are one set of weights,
	 * whose gradients accumulate in one buffer and one optimizer updates
	 * (inference: the table doubles the parameters only). */
	if (c->schedule == PIPETTE_SCHED_DUALPIPE)
		out->params_bytes *= 2;

	/* CPU offloading: of the stage's n layers (the model's: no pipeline),
	 * at most n - N sets of activations are on the GPU at any time
	 * (Transformer Engine's default schedule: NVIDIA/TransformerEngine
	 * @d0067d0d docs/features/other_optimizations/cpu_offloading/
	 * cpu_offloading.rst:138-149), the last layers' */
	if (st->offload_layers > 0 && st->offload_layers < n) {
		act = stage_layer_activations(m, c, first + st->offload_layers,
					      n - st->offload_layers);
		out->offloaded_bytes = inflight * pipette_memory_offloaded_activations(m, c);
	} else {
		act = stage_layer_activations(m, c, first, n);
	}
	act *= inflight;
	if (c->recompute == PIPETTE_RECOMPUTE_FULL)
		act += worst_recomputed_layer(m, c, first, n);
	if (stage == 0)	/* token ids (int64) and, for GPT, the dropout mask */
		act += inflight * s * b * (8.0 + (gpt_style(m) ? m->hidden : 0)) / t;
	if (stage == pipette_config_last_rank(c))
		act += loss_bytes(m, c);
	out->activations_bytes = act;
	out->outside_bytes = CUDA_CONTEXT_BYTES + comm_buffers(c);
	out->other_bytes = out->outside_bytes + st->act_temp_factor * act;
	transient = act + st->act_temp_factor * act;
	out->transient_bytes = transient;
	if (st->mem_fraction <= 0)
		out->reserve_bytes = fmax(st->reserve_floor_bytes, st->reserve_fraction * transient);
	out->total_bytes = out->params_bytes + out->grads_bytes + out->optimizer_bytes +
			   out->activations_bytes + out->other_bytes + out->reserve_bytes;
}

static void estimate(const struct pipette_model *m, const struct pipette_gpu_spec *gpu,
		     const struct pipette_config *c, double mem_fraction, const double *inflight,
		     const struct pipette_stage_memory *stage0,
		     struct pipette_stage_memory *per_stage, struct pipette_memory *out)
{
	struct pipette_stage_memory st, first;
	int s;

	if (stage0)
		first = *stage0;	/* it may lie in *out */
	memset(out, 0, sizeof(*out));
	out->peak_stage = -1;
	for (s = 0; s < c->pp; s++) {
		if (s == 0 && stage0)
			st = first;
		else
			pipette_memory_stage(m, gpu, c, s, inflight ? inflight[s] : -1.0, &st);
		if (per_stage)
			per_stage[s] = st;
		if (out->peak_stage < 0 || st.total_bytes > out->peak_bytes) {
			out->peak_bytes = st.total_bytes;
			out->peak_stage = s;
			out->peak = st;
		}
	}
	out->capacity_bytes = gpu->hbm_bytes;
	out->limit_bytes = mem_fraction * gpu->hbm_bytes;
	out->fits = out->peak_bytes <= out->limit_bytes;
}

void pipette_memory_estimate(const struct pipette_model *m,
			     const struct pipette_gpu_spec *gpu,
			     const struct pipette_config *c, double mem_fraction,
			     const double *inflight,
			     struct pipette_stage_memory *per_stage,
			     struct pipette_memory *out)
{
	estimate(m, gpu, c, mem_fraction, inflight, NULL, per_stage, out);
}

void pipette_memory_estimate_rest(const struct pipette_model *m,
				  const struct pipette_gpu_spec *gpu,
				  const struct pipette_config *c, double mem_fraction,
				  const struct pipette_stage_memory *stage0,
				  struct pipette_memory *out)
{
	estimate(m, gpu, c, mem_fraction, NULL, stage0, NULL, out);
}
