/* pipette: the training stack, the software that runs the plan.
 *
 * Megatron-LM, NeMo 2.0 and the zero-bubble fork store gradients, save
 * activations, overlap communication and schedule pipelines differently;
 * a plan is made for one of them.  A stack is data: one row of facts per
 * stack (stack.c), each with the upstream line it was read from, and any
 * fact can be overridden by name (--stack-option key=value).  The
 * estimators read the facts; nothing else branches on the stack's name. */
#ifndef PIPETTE_STACK_H
#define PIPETTE_STACK_H

#include "inputs/knobs.h"
#include "inputs/error.h"

enum pipette_stack_id {
	PIPETTE_STACK_MEGATRON,		/* Megatron-LM pretrain_gpt.py, pipette's flags */
	PIPETTE_STACK_NEMO,		/* NeMo 2.0 performance recipes */
	PIPETTE_STACK_MEGATRON_ZB,	/* sail-sg/zero-bubble-pipeline-parallelism */
	PIPETTE_STACK_MEGATRON_2022,	/* the Megatron of the 2021-22 A100 papers */
	PIPETTE_STACK_TORCHTITAN,	/* pytorch/torchtitan: FSDP2, DTensor TP, torch pipelining */
	PIPETTE_STACK_COMPOSER_FSDP,	/* MosaicML Composer's FSDP1 (llm-foundry), estimate only */
	PIPETTE_STACK_DEEPSEEK,		/* DeepSeek-V3's own framework, estimate only */
	PIPETTE_STACK_MEGATRON_BRIDGE,	/* Megatron-Bridge performance recipes (NeMo 25.11 on) */
	PIPETTE_STACK_COUNT
};

/* How the stack's launch is written (rendering picks the renderer):
 * upstream Megatron-LM's arguments, the zero-bubble fork's (an older
 * Megatron with its own schedule flags), NeMo 2.0 recipe overrides, or
 * Megatron-Bridge's performance run script with its Hydra overrides. */
enum pipette_launch_form {
	PIPETTE_FORM_MEGATRON, PIPETTE_FORM_MEGATRON_ZB, PIPETTE_FORM_NEMO,
	PIPETTE_FORM_TORCHTITAN,	/* Trainer.Config fields (recipe, overrides, TOML) */
	PIPETTE_FORM_NONE,		/* estimate only: the env contract, no launch */
	PIPETTE_FORM_BRIDGE,		/* scripts/performance/bootstrap.py, -c and key=value */
};

/* device_max_connections: Megatron-Bridge's rule (render/env.c). */
#define PIPETTE_CDMC_BRIDGE 32

struct pipette_stack {
	enum pipette_stack_id id;
	const char *name;
	const char *what;		/* one line for `pipette stacks` */
	/* Memory. */
	double grad_bytes;		/* main-gradient buffer, bytes per parameter */
	double optim_bytes;		/* master weights and Adam moments, bytes per parameter */
	int optim_needs_distopt;	/* that layout exists only with the distributed optimizer */
	double swiglu_saved;		/* ffn-wide tensors a SwiGLU MLP saves */
	double logits_bytes;		/* last stage: bytes per logit kept for the loss */
	/* The loss's HBM traffic per logit, forward and backward, beyond the
	 * output layer's GEMMs (0: not priced) */
	double loss_traffic;
	double head_input_bytes;	/* last stage: bytes per hidden unit of the output layer's input */
	int wgrad_deferral_limit;	/* micro-batches of deferred embedding wgrad (0 = none) */
	double act_temp_factor;		/* temporaries, as a share of the activations */
	double reserve_fraction;	/* allocator reserve, a share of the activations and temporaries */
	double reserve_floor_bytes;	/* the reserve is never smaller */
	double mem_fraction;		/* > 0: the old flat rule, peak <= fraction x HBM */
	/* Fully sharded data parallelism (FSDP): the data-parallel ranks
	 * shard parameters, gradients and optimizer states over dp_shard x
	 * cp and gather each layer's parameters when it runs.  The sharded
	 * parameters are kept in fp32 (shard_param_bytes), gathered in
	 * gather_bytes, and gradients reduce-scattered in reduce_bytes; with
	 * gradient accumulation and no pipeline, sync_each_mb says whether
	 * every micro-batch reduce-scatters.  optim_bytes then counts only
	 * what the optimizer adds to the sharded parameters (its moments). */
	int fsdp;
	/* backward prefetch: the next layer's gather issued before the
	 * current layer's backward (FSDP2's implicit prefetch, FSDP1's
	 * BACKWARD_PRE) hides behind it; issued after it (FSDP1's
	 * BACKWARD_POST) it runs between the two layers' computations. */
	int prefetch_before_backward;
	double shard_param_bytes;
	double gather_bytes;
	double reduce_bytes;
	int sync_each_mb;
	double shard_grad_bytes;	/* the sharded gradients, bytes per parameter */
	/* Megatron-FSDP (--stack-option megatron_fsdp=on; Megatron-Core's
	 * --use-megatron-fsdp with optim_grads_params): sharded over all of
	 * dp x cp, without a pipeline, resharded after forward; beside the
	 * fp32 main-weight shards it keeps a shard of the compute weights in
	 * the gathered dtype (FP8 with the recipe's parameter gather:
	 * pipette_stack_gather_bytes), units of one transformer layer in two
	 * persistent buffers (fsdp_double_buffer), the embedding and the
	 * output layer, which are no units, gathered throughout. */
	int mfsdp;
	/* CPU activation offloading (--stack-option cpu_offload=N): the
	 * activations of the first N layers go to host memory during forward
	 * and come back for backward (Transformer Engine's default schedule);
	 * 0 = off. */
	int offload_layers;
	/* Activation checkpointing: selective_ops = the stack's "selective"
	 * saves matmul and attention outputs per op and recomputes the rest
	 * (torchtitan's per-op SAC) rather than only the attention core
	 * (Megatron); layer_ac = full checkpointing of every k-th layer. */
	int selective_ops;
	int layer_ac;
	/* Tensor parallelism always shards the norms' sequence (torchtitan's
	 * TP plan); Megatron makes it a choice (--sequence-parallel). */
	int sp_with_tp;
	/* torchtitan's async TP (compile.enable_async_tensor_parallel):
	 * Inductor pipelines the TP all-gathers and reduce-scatters with the
	 * matmuls beside them; tp_exposed is then what it leaves. */
	int async_tp;
	/* torch's SDPA runs FlashAttention-2, not cuDNN's fused kernel: what
	 * torchtitan ran on H100 until 2025-10-09 (pytorch/torchtitan
	 * 6a3a9da95 put cuDNN first on every GPU; before it, torch's own
	 * order, which made cuDNN opt-in from 2.5.1, pytorch/pytorch#138522,
	 * and torchtitan's FLASH_ATTENTION first on H100 from 3b85aa31f,
	 * 2025-05-14).  0 in every shipped stack (torchtitan v0.2.2 and HEAD
	 * put cuDNN first); the GPU's kernel table prices it at its
	 * FlashAttention-2 share (inputs/kernels.h flash2_share). */
	int sdpa_flash2;
	/* Context parallelism runs PyTorch's ring attention
	 * (torch.distributed.tensor.experimental context_parallel, as
	 * torchtitan does), not Transformer Engine's (estimate/timing.c,
	 * pipette_attention_times, prices each). */
	int cp_torch_ring;
	/* Only data parallelism: no TP, PP, CP or EP (Composer's FSDP as
	 * llm-foundry runs it). */
	int data_parallel_only;
	/* The attention kernel's share of peak FLOP/s when the stack's kernel
	 * is slower than the GEMMs (0: the GEMM efficiency curve, which the
	 * fused cuDNN/TE kernels of Megatron-Core and NeMo follow). */
	double attn_utilization;
	/* On a GPU type with a measured kernel table, the stack's attention
	 * is the table's kernel whatever attn_utilization says (torch's SDPA
	 * picks cuDNN's on Hopper). */
	int attn_measured;
	/* torch.compile: the share of the elementwise (memory-bound) time
	 * left once the compiler fuses it (1 = not compiled). */
	double elementwise_factor;
	/* The least time a layer's forward + backward of one micro-batch
	 * takes, per recomputation (enum pipette_recompute): what the host
	 * needs to issue its kernels (0: never the pace). */
	double host_floor_s[3];
	/* Mixture of experts and precision. */
	int recompute_modules;		/* Megatron-Core's --recompute-modules */
	unsigned fixed_modules;		/* != 0: the only recomputation the stack runs */
	/* EP dispatch/combine overlapped with another micro-batch's
	 * computation: 0 never, 1 on request (Megatron-Core's combined 1F1B),
	 * 2 always (DualPipe) */
	int moe_overlap;
	int deepep;			/* DeepEP's kernels: 0 no, 1 on request, 2 always */
	/* DeepSeek-V3's FP8 framework: under a low-precision recipe the EP
	 * dispatch moves FP8 and the experts' inputs are cached in FP8
	 * (arXiv 2412.19437 §3.3.3-§3.3.4) */
	int fp8_gemm;
	double fp8_raw;			/* their kernels' attained share of the FP8 peak */
	double comm_sm_share;		/* share of the SMs communication kernels hold */
	/* The share of a measured kernel table's rate this stack's step
	 * attains (inputs/kernels.h step_share); 0 = the GPU table's. */
	double kernel_share;
	/* Time. */
	double tp_exposed;		/* share of TP communication not hidden by GEMMs */
	int dp_overlap;			/* DP reduce-scatter / gather overlapped */
	/* The precision recipes its launch can express (PIPETTE_PREC_BIT),
	 * and the one it runs unless told (BF16 but DeepSeek's). */
	unsigned precisions;
	enum pipette_precision default_precision;
	/* Transformer Engine's modules: a linear layer saves its input for
	 * the weight gradient in the recipe's format, and keeps a
	 * low-precision copy of its weight (and its transpose where the GEMM
	 * needs one); with fp8_param_gather the BF16 weight is not kept and
	 * the DP all-gather moves the low-precision one. */
	int te_modules;
	int fp8_param_gather;
	/* Schedules it runs (bit (1 << enum pipette_schedule_kind)). */
	unsigned schedules;
	enum pipette_attention attention;
	enum pipette_launch_form form;
	/* CUDA_DEVICE_MAX_CONNECTIONS the launch must set: 1 when TP or CP >
	 * 1 (Megatron-Core asserts it on Hopper and earlier), 8 always (the
	 * zero-bubble runtime asserts >= 8), 0 never, PIPETTE_CDMC_BRIDGE:
	 * the value Megatron-Bridge's run script picks (1, 8 or 32). */
	int device_max_connections;
	/* What the launch can express: uneven first/last stages, expert
	 * tensor parallelism; a model with tied embeddings. */
	int uneven_split;
	int expert_tp;
	int tied_embeddings;
	/* The launch names every precision and overlap flag the prediction
	 * assumes (Megatron-Core's flags; megatron-2022 predates them). */
	int core_flags;
	/* What the stack's launch can turn on when asked (Megatron-Bridge's
	 * Megatron-FSDP and CPU activation offloading): --stack-option
	 * megatron_fsdp=on and cpu_offload=N are refused elsewhere. */
	int megatron_fsdp;
	int cpu_offload;
};

const struct pipette_stack *pipette_stack_get(enum pipette_stack_id id);
/* By name ("megatron", "nemo", "megatron-zb", "megatron-2022", ...,
 * "megatron-bridge"). */
int pipette_stack_lookup(const char *name, struct pipette_stack *out, struct pipette_err *err);
/* The stack named ("" = the default) with "key=value,key=value" overrides. */
int pipette_stack_resolve(const char *name, const char *options, struct pipette_stack *out,
			  struct pipette_err *err);
/* Override one fact: "grad_reduce=fp32|bf16", "tp_overlap=on|off",
 * "dp_overlap=on|off", "wgrad_deferral=N", "reserve=F", "compile=on|off"
 * (torchtitan); an override the
 * stack's launch cannot express is an error naming it. */
int pipette_stack_option(struct pipette_stack *s, const char *kv, struct pipette_err *err);
/* Whether the stack runs precision recipe p on GPU type g: its launch
 * can express it (the precisions fact) and g has the tensor cores it
 * needs (FP8: fp8_tflops; MXFP8 and NVFP4: Blackwell's block-scaled
 * ones, fp4_tflops).  The refusal is one line naming the stack, the GPU
 * and the recipe. */
struct pipette_gpu_spec;
int pipette_stack_precision_check(const struct pipette_stack *s, const struct pipette_gpu_spec *g,
				  enum pipette_precision p, struct pipette_err *err);
/* FSDP's gathered parameters, bytes per parameter: what one all-gather
 * moves (gather) and what a unit's compute weights hold (held), under
 * precision recipe p.  The stack's gather_bytes but under Megatron-FSDP
 * with the recipe's FP8 parameter gather (fp8_param_gather): per-tensor
 * FP8 1 and 1, MXFP8 1 and 2 (its row-wise data gathered for forward, its
 * column-wise for backward, both buffered). */
double pipette_stack_gather_bytes(const struct pipette_stack *s, enum pipette_precision p);
double pipette_stack_held_bytes(const struct pipette_stack *s, enum pipette_precision p);
/* Whether the stack keeps parameters quantized and gathers them so under
 * recipe p (its fp8_param_gather fact): the per-tensor FP8 recipes and
 * MXFP8; never blockwise FP8 or NVFP4, whose recipes gather in BF16
 * (NVIDIA-NeMo/Megatron-Bridge @067f987d src/megatron/bridge/training/
 * mixed_precision.py:373-421; NeMo's alike).  What memory.c prices and
 * every launch form says. */
int pipette_stack_gathers_lowp(const struct pipette_stack *s, enum pipette_precision p);
/* Whether the stack runs this schedule. */
int pipette_stack_runs(const struct pipette_stack *s, enum pipette_schedule_kind k);
/* "1f1b, interleaved" */
void pipette_stack_schedules_text(const struct pipette_stack *s, char *buf, size_t len);
/* One line per fact with its source, for `pipette stacks`. */
int pipette_stack_describe(const struct pipette_stack *s, char *buf, size_t len);
const char *pipette_stack_default_name(void);

#endif
