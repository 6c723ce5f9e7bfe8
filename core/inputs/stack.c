/* pipette: the facts of each training stack (stack.h).
 *
 * Sources, read at these commits (tests/data/stacks/README.md has the
 * lines and the rules pipette's launch output is checked against):
 *   Megatron-LM  NVIDIA/Megatron-LM, megatron/training/arguments.py,
 *                megatron/core/... (see each fact)
 *   NeMo 2.0     NVIDIA/NeMo @d2b21556, nemo/collections/llm/recipes/
 *   zero bubble  sail-sg/zero-bubble-pipeline-parallelism
 *   Megatron-Bridge  NVIDIA-NeMo/Megatron-Bridge @067f987d, src/megatron/
 *                bridge/perf_recipes/, training/, scripts/performance/ */
#include "inputs/stack.h"

#include "inputs/hardware.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SCHED(k) (1u << (k))
/* Megatron's own and the zero-bubble paper's (Qi et al.) schedules. */
#define ALL_SCHEDULES ((1u << (PIPETTE_SCHED_V_ZB + 1)) - 1)
/* Upstream Megatron-Core and NeMo run no pipelining, 1F1B and
 * interleaved 1F1B (megatron/core/pipeline_parallel/schedules.py,
 * get_forward_backward_func; NeMo's MegatronStrategy exposes only
 * virtual_pipeline_model_parallel_size). */
#define MEGATRON_SCHEDULES (SCHED(PIPETTE_SCHED_1F1B) | SCHED(PIPETTE_SCHED_INTERLEAVED))
/* Precision recipes each launch can express.  Megatron-Core's
 * --fp8-recipe {delayed, tensorwise, blockwise, mxfp8} and --fp4-recipe
 * nvfp4 (NVIDIA/Megatron-LM @d98e8a64 megatron/core/transformer/
 * transformer_config.py:587-679, fp8_utils.py:771-791); NeMo's and
 * Megatron-Bridge's mixed-precision recipes are the same TE recipes
 * (NVIDIA-NeMo/Megatron-Bridge @067f987d src/megatron/bridge/training/
 * mixed_precision.py:217-421).  torchtitan: torchao's Float8Linear
 * recipes tensorwise and rowwise and the MX converter's mxfp8
 * (pytorch/torchtitan @24e91056 torchtitan/config/job_config.py:572-617).
 * DeepSeek-V3 trained with 1x128 / 128x128 block scales (arXiv
 * 2412.19437 §3.3). */
#define PREC(p) PIPETTE_PREC_BIT(PIPETTE_PREC_##p)
#define TE_PRECISIONS (PREC(BF16) | PREC(FP8_DELAYED) | PREC(FP8_CURRENT) | \
		       PREC(FP8_BLOCKWISE) | PREC(MXFP8) | PREC(NVFP4))
#define TORCHAO_PRECISIONS (PREC(BF16) | PREC(FP8_CURRENT) | PREC(FP8_ROWWISE) | PREC(MXFP8))
/* torch.distributed.pipelining's schedules that torchtitan runs
 * (tests/data/stacks/torch-schedules.md).  Left out: LoopedBFS (every
 * forward of every local stage first: GPipe's memory times the chunks,
 * for no shorter bubble than Interleaved1F1B's), PipelineScheduleMulti
 * from a CSV file (any order a user writes; nothing to search) and
 * PipelineScheduleSingle (an abstract base torchtitan rejects). */
#define TORCH_SCHEDULES (SCHED(PIPETTE_SCHED_1F1B) | SCHED(PIPETTE_SCHED_INTERLEAVED) | \
			 SCHED(PIPETTE_SCHED_GPIPE) | SCHED(PIPETTE_SCHED_INTERLEAVED_ZB) | \
			 SCHED(PIPETTE_SCHED_ZBV) | SCHED(PIPETTE_SCHED_DUALPIPE_V))

/* The allocator's reserve: what torch's caching allocator holds beyond
 * what is allocated grows with the transient allocations (activations and
 * temporaries), not with the buffers of weights, gradients and optimizer
 * states, which Megatron allocates once.  In the two NeMo logs of
 * tests/data/stacks/nemo-h100-memory.tsv the reserved peak
 * (torch.cuda.max_memory_reserved) exceeds the bytes the model counts by
 * 25.5% (Nemotron-4 15B) and 18.5% (Llama 3.1 8B, whose peak the file
 * marks approximate) of the activations and temporaries: 25%, with a
 * floor that no site calibration may go below. */
#define RESERVE_FRACTION 0.25
#define RESERVE_FLOOR_BYTES (2.0 * PIPETTE_GIB)
/* Adam with fp32 master weights and moments: 4 + 4 + 4 bytes per
 * parameter (Megatron theoretical_memory_usage.py :293-296), sharded by
 * the distributed optimizer. */
#define ADAM_FP32 12.0
/* Temporaries: Megatron's theoretical_memory_usage.py adds 5% to the
 * activations ("buffer for optimizer and misc temporaries"). */
#define ACT_TEMP 0.05
/* FSDP's mixed precision (tests/data/stacks/torchtitan.md §3,
 * composer-fsdp.md §2): fp32 sharded parameters, bf16 all-gathers;
 * Adam's two fp32 moments beside them (the sharded fp32 parameters are
 * the master weights). */
#define FSDP_SHARD_BYTES 4.0
#define FSDP_GATHER_BYTES 2.0
#define ADAM_MOMENTS 8.0
/* torchtitan: reduce-scatter in fp32 (mixed_precision_reduce, the only
 * choice), gradient sync on every micro-batch of an accumulation without
 * PP (torchtitan.md §3-4); eager SwiGLU keeps four ffn-wide tensors (w1
 * and w3 outputs, the SiLU output and the product), compiled three
 * (inductor recomputes the SiLU from w1's output, as a fused kernel does).
 * Eager elementwise work: every op is its own kernel that reads its
 * inputs from HBM and writes its output, where the fused kernels the
 * memory-time model was calibrated with (Megatron-Core/TE) make one pass:
 * torchtitan's RMSNorm runs as square, mean, add, rsqrt and two products,
 * its complex RoPE as view, product and view-back per tensor, SwiGLU as
 * SiLU then product; about twice the traffic of the fused forms
 * (TT_EAGER_ELEMENTWISE).  torch.compile fuses them back (1.0).  Check,
 * not calibration: on Llama 3 8B (128 GPUs, local batch 2, per-op SAC) the
 * model then predicts a compile gain of 15.0%; torchtitan's benchmarks/llama3_h100_202412_torchtitan.md
 * measured 15.7% on 8 H100 (torchtitan.md §6). */
#define TT_REDUCE_BYTES 4.0
#define TT_SYNC_EACH_MB 1
#define TT_SWIGLU_SAVED 4.0
#define TT_COMPILE_SWIGLU_SAVED 3.0
#define TT_EAGER_ELEMENTWISE 2.0
/* torchtitan's loss is eager cross entropy over the bf16 logits upcast to
 * fp32 (torchtitan components/loss.py: cross_entropy(pred.float(), ...)).
 * On one H100 SXM that held 12.0 bytes per logit above the logits at its
 * peak (the fp32 copy, its softmax and its gradient alive together) and
 * took 17.0 ps per logit forward and backward, 51 bytes of traffic at
 * 3350 GB/s x 0.9 (tests/data/kernels/h100-sxm-step-costs.csv). */
#define TT_LOGITS_BYTES (2.0 + 12.0)
/* torchtitan launches with PYTORCH_ALLOC_CONF="expandable_segments:True"
 * (run_train.sh:29-47, tests/data/stacks/torchtitan.md §7): the caching
 * allocator grows one mapped segment instead of carving fixed blocks, so
 * what it reserves beyond the allocated peak is the floor's worth, not
 * NeMo's 25% of the activations. */
#define TT_RESERVE_FRACTION 0.0
#define EAGER_CE_TRAFFIC 51.0
/* torch's scaled_dot_product_attention: on a GPU with a measured kernel
 * table it runs the table's kernel (PyTorch 2.11 picks cuDNN's on H100:
 * tests/data/kernels/README.md, 520-660 TFLOP/s, about twice
 * FlashAttention-2 forced through the same call).  Elsewhere
 * FlashAttention-2: "FlashAttention-2 achieving only 35% utilization on the
 * H100 GPU" (Shah et al., FlashAttention-3, NeurIPS 2024, arXiv 2407.08608,
 * abstract). */
#define FA2_UTILIZATION 0.35
/* MPT's attn_impl "triton" is the Triton port of the first FlashAttention
 * algorithm, which reaches "only 25-40% of the theoretical maximum
 * FLOPs/s" on A100 (Dao, FlashAttention-2, ICLR 2024, abstract); on H100,
 * without Hopper's asynchronous features, less: fitted on llm-foundry's
 * 52 H100 BF16 runs (tests/data/stacks/composer-fsdp.md §5.2, sequences
 * 512 to 65536, where attention goes from a small share of the step to
 * most of it), 0.19 of peak, leave-one-out MAPE 4.6%; `make validate`
 * refits it and fails if this drifts.  At 0.25 the runs of 8K tokens and
 * more were 10-32% faster than measured. */
#define FA1_TRITON_UTILIZATION 0.19
#define TT_COMPILE_ELEMENTWISE 1.0
/* The host's floor under one torchtitan block: a block's forward and
 * backward cannot take less than the CPU needs to issue its kernels
 * (eager PyTorch dispatches every op from Python; per-op SAC adds its
 * dispatch-mode policy call per op; torch.compile issues fused kernels).
 * Timed on one H100 SXM host (tests/data/kernels/h100-sxm-block.csv,
 * block.py PART=launch, PyTorch 2.11): the Llama 3 8B block at TP 8's
 * per-rank widths took the same time from 128 to 4096 tokens; its 128-token
 * rows, per recomputation (none, per-op selective, full), eager and
 * compiled, in seconds per block forward + backward. */
#define TT_FLOOR_EAGER { 3.93e-3, 10.87e-3, 7.48e-3 }
#define TT_FLOOR_COMPILED { 2.21e-3, 2.90e-3, 3.29e-3 }
static const double tt_floor_eager[3] = TT_FLOOR_EAGER, tt_floor_compiled[3] = TT_FLOOR_COMPILED;
/* The share of TP communication Transformer Engine's userbuffers leave
 * exposed (NeMo's and Megatron-Bridge's TP overlap): fitted by `make
 * validate` on the runs of tests/data/stacks/nemo-h100-time.tsv, each with
 * its own overlap setting, together with the H100's step share of its
 * measured kernels (hardware.h; tests/validate/current.c checks both
 * values).  Priced on measured kernels, more of TP's traffic shows than
 * the 5% the old GEMM-efficiency curve left room for. */
#define USERBUFFERS_TP_EXPOSED 0.60
/* What torchtitan's async TP leaves of the TP communication exposed: its
 * benchmark (pytorch/torchtitan @b5bcd76c benchmarks/asyncTP_llama3_h100_
 * 2025-06_torchtitan.md:22-36: Llama 3.1 8B and 70B, FSDP x TP 8 on 64 and
 * 256 H100, BF16 and both float8 recipes) measured async TP 1.04-1.16x
 * faster than vanilla; against each run's exposed TP time in pipette's
 * model that is 0.50-0.85 of it left exposed, the median 0.69 (`make
 * validate` refits it with leave-one-out and fails if this drifts). */
#define TT_ASYNC_TP_EXPOSED 0.69
/* Composer's FSDP as llm-foundry's benchmarks configure it
 * (composer-fsdp.md): decoupled_adamw (two fp32 moments), mixed precision
 * DEFAULT (bf16 gathers, fp32 reduce-scatter: the yamls' PURE is
 * overridden by submit_benchmarks.py), and a reduce-scatter on every
 * micro-batch (Composer's no_sync is for DDP only). */
#define CF_OPTIM_BYTES ADAM_MOMENTS
#define CF_REDUCE_BYTES 4.0
#define CF_SYNC_EACH_MB 1
/* DeepSeek-V3 (arXiv 2412.19437): fp32 master weights, BF16 AdamW
 * moments (§3.3.3), and 20 of the H800's 132 SMs kept for communication
 * (§3.2.2). */
#define DS_OPTIM_BYTES (4.0 + 2.0 + 2.0)
#define DS_COMM_SMS (20.0 / 132.0)
/* FP8 GEMMs with DeepSeek-V3's fine-grained (1x128, 128x128) scaling on
 * H800, on the training shapes of its experts (4 or 8 groups of 8192 or
 * 4096 tokens, 7168 x 4096 and 2048 x 7168): DeepGEMM's first release
 * measured 1297, 1099, 1288 and 1093 TFLOP/s, 1.2, 1.2, 1.2 and 1.1 times
 * DeepSeek's "internally and carefully optimized implementation based on
 * CUTLASS 3.6" (deepseek-ai/DeepGEMM @a6d97a1 README.md:11, 42-45), the
 * kernels of the training: 1080.8, 915.8, 1073.3 and 993.6 TFLOP/s, on
 * average 0.513 of the 1979 TFLOP/s FP8 peak.  Not modelled: the
 * quantization passes over HBM (§3.5.2). */
#define DS_FP8_RAW (((1297.0 / 1.2 + 1099.0 / 1.2 + 1288.0 / 1.2 + 1093.0 / 1.1) / 4) / 1979.0)

/* Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge @067f987d; the NeMo
 * performance recipes moved there from NeMo 2.0 in the 25.11 containers).
 * The launch names its precision by the run script's -c, which takes
 * bf16, fp8_cs, fp8_mx, fp8_sc and nvfp4 (scripts/performance/
 * argument_parser.py:694-702) and selects the flat performance recipe
 * whose mixed-precision config is bf16_mixed, bf16_with_fp8_current_
 * scaling_mixed, bf16_with_mxfp8_mixed, bf16_with_fp8_subchannel_
 * scaling_mixed or bf16_with_nvfp4_mixed (utils/precision.py:26-43,
 * src/megatron/bridge/perf_recipes/_common.py:99-123): delayed scaling
 * (bf16_with_fp8_delayed_scaling_mixed, training/mixed_precision.py
 * :216-232) has no -c and no flat recipe, so the stack does not run it. */
#define BRIDGE_PRECISIONS (PREC(BF16) | PREC(FP8_CURRENT) | PREC(FP8_BLOCKWISE) | \
			   PREC(MXFP8) | PREC(NVFP4))
/* Every flat recipe sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
 * (e.g. perf_recipes/llama/h100/llama3.py:61, 103): as for torchtitan,
 * the allocator reserves the floor's worth beyond the allocated peak, not
 * the 25% of the activations fitted on NeMo 2.0's logs. */
#define BRIDGE_RESERVE_FRACTION 0.0

static const struct pipette_stack stacks[PIPETTE_STACK_COUNT] = {
	[PIPETTE_STACK_MEGATRON] = {
		.id = PIPETTE_STACK_MEGATRON, .name = "megatron",
		.what = "Megatron-LM pretrain_gpt.py with the flags pipette emits (--bf16, "
			"distributed optimizer, DP overlap)",
		/* --bf16 keeps fp32 main gradients unless --grad-reduce-in-bf16 */
		.grad_bytes = 4, .optim_bytes = ADAM_FP32, .swiglu_saved = 3,
		.logits_bytes = 6, .head_input_bytes = 2,
		.wgrad_deferral_limit = 0, .act_temp_factor = ACT_TEMP,
		.reserve_fraction = RESERVE_FRACTION, .reserve_floor_bytes = RESERVE_FLOOR_BYTES,
		.elementwise_factor = 1.0,
		.tp_exposed = 1.0, .dp_overlap = 1, .schedules = MEGATRON_SCHEDULES,
		.attention = PIPETTE_ATTN_FLASH, .form = PIPETTE_FORM_MEGATRON,
		.device_max_connections = 1, .core_flags = 1,
		.uneven_split = 1, .expert_tp = 1, .tied_embeddings = 1,
		.recompute_modules = 1, .moe_overlap = 1, .deepep = 1,
		.precisions = TE_PRECISIONS, .te_modules = 1,
	},
	[PIPETTE_STACK_NEMO] = {
		.id = PIPETTE_STACK_NEMO, .name = "nemo",
		.what = "NeMo 2.0 performance recipes (bf16 gradients, TP overlap with "
			"userbuffers, deferred embedding wgrad)",
		.grad_bytes = 2, .optim_bytes = ADAM_FP32, .swiglu_saved = 3,
		.logits_bytes = 6, .head_input_bytes = 2,
		.wgrad_deferral_limit = 22, .act_temp_factor = ACT_TEMP,
		.reserve_fraction = RESERVE_FRACTION, .reserve_floor_bytes = RESERVE_FLOOR_BYTES,
		.elementwise_factor = 1.0,
		.tp_exposed = USERBUFFERS_TP_EXPOSED, .dp_overlap = 1, .schedules = MEGATRON_SCHEDULES,
		.attention = PIPETTE_ATTN_FLASH, .form = PIPETTE_FORM_NEMO,
		.device_max_connections = 1, .core_flags = 1,
		.uneven_split = 1, .expert_tp = 1, .tied_embeddings = 1,
		.recompute_modules = 1, .moe_overlap = 1, .deepep = 1,
		/* NeMo's recipes gather parameters in FP8 (fp8_param_gather
		 * True in mixed_precision.py:217-421 but the subchannel one) */
		.precisions = TE_PRECISIONS, .te_modules = 1, .fp8_param_gather = 1,
	},
	/* The fork at 39f2c186 (tests/data/stacks/megatron-schedules.md §3):
	 * untied embeddings only, no deferred embedding wgrad, DP overlap off
	 * with the distributed optimizer under its schedules (zbpp_utils.py
	 * :77-78, 130-133), CUDA_DEVICE_MAX_CONNECTIONS >= 8 (:94-101); its
	 * older arguments.py has no uneven first/last stages, no expert TP
	 * and no --grad-reduce-in-bf16. */
	[PIPETTE_STACK_MEGATRON_ZB] = {
		.id = PIPETTE_STACK_MEGATRON_ZB, .name = "megatron-zb",
		.what = "the zero-bubble fork of Megatron-LM (ZB-H1, V-Min, V-Half, V-ZB)",
		.grad_bytes = 4, .optim_bytes = ADAM_FP32, .swiglu_saved = 3,
		.logits_bytes = 6, .head_input_bytes = 2,
		.wgrad_deferral_limit = 0, .act_temp_factor = ACT_TEMP,
		.reserve_fraction = RESERVE_FRACTION, .reserve_floor_bytes = RESERVE_FLOOR_BYTES,
		.elementwise_factor = 1.0,
		.tp_exposed = 1.0, .dp_overlap = 0, .schedules = ALL_SCHEDULES,
		.attention = PIPETTE_ATTN_FLASH, .form = PIPETTE_FORM_MEGATRON_ZB,
		.device_max_connections = 8, .core_flags = 1,
		.uneven_split = 0, .expert_tp = 0, .tied_embeddings = 0,
		.precisions = PREC(BF16),
	},
	[PIPETTE_STACK_MEGATRON_2022] = {
		.id = PIPETTE_STACK_MEGATRON_2022, .name = "megatron-2022",
		.what = "the Megatron of the 2021-22 A100 papers: unfused attention, fp32 "
			"gradients, the 80% rule of Fujii et al.",
		/* Megatron's theoretical_memory_usage.py: 4 bytes of fp32 logits
		 * and of the output layer's input; Fujii et al.'s 8*ffn bytes
		 * for an unfused SwiGLU (four ffn-wide tensors). */
		.grad_bytes = 4, .optim_bytes = ADAM_FP32, .swiglu_saved = 4,
		.logits_bytes = 4, .head_input_bytes = 4,
		.wgrad_deferral_limit = 0, .act_temp_factor = ACT_TEMP,
		.mem_fraction = 0.8, .elementwise_factor = 1.0,
		.tp_exposed = 1.0, .dp_overlap = 1, .schedules = ALL_SCHEDULES,
		.attention = PIPETTE_ATTN_UNFUSED, .form = PIPETTE_FORM_MEGATRON,
		.device_max_connections = 0,
		.uneven_split = 1, .expert_tp = 1, .tied_embeddings = 1,
		.precisions = PREC(BF16),
	},
	/* torchtitan (tests/data/stacks/torchtitan.md has each fact's line). */
	[PIPETTE_STACK_TORCHTITAN] = {
		.id = PIPETTE_STACK_TORCHTITAN, .name = "torchtitan",
		.what = "FSDP2/HSDP data parallelism, DTensor TP, torch.distributed.pipelining "
			"schedules, per-op selective checkpointing",
		.grad_bytes = 4, .optim_bytes = ADAM_MOMENTS, .swiglu_saved = TT_SWIGLU_SAVED,
		.logits_bytes = TT_LOGITS_BYTES, .loss_traffic = EAGER_CE_TRAFFIC,
		.head_input_bytes = 2,
		.wgrad_deferral_limit = 0, .act_temp_factor = ACT_TEMP,
		.reserve_fraction = TT_RESERVE_FRACTION, .reserve_floor_bytes = RESERVE_FLOOR_BYTES,
		.fsdp = 1, .prefetch_before_backward = 1,
		.shard_param_bytes = FSDP_SHARD_BYTES, .gather_bytes = FSDP_GATHER_BYTES,
		.reduce_bytes = TT_REDUCE_BYTES, .sync_each_mb = TT_SYNC_EACH_MB,
		.shard_grad_bytes = FSDP_SHARD_BYTES,
		.selective_ops = 1, .layer_ac = 1, .sp_with_tp = 1,
		.elementwise_factor = TT_EAGER_ELEMENTWISE, .attn_utilization = FA2_UTILIZATION,
		.attn_measured = 1, .cp_torch_ring = 1, .host_floor_s = TT_FLOOR_EAGER,
		.tp_exposed = 1.0, .dp_overlap = 1, .schedules = TORCH_SCHEDULES,
		.attention = PIPETTE_ATTN_FLASH, .form = PIPETTE_FORM_TORCHTITAN,
		.device_max_connections = 0, .core_flags = 0,
		.uneven_split = 0, .expert_tp = 0, .tied_embeddings = 0,
		.precisions = TORCHAO_PRECISIONS,
	},
	/* Composer's FSDP1 FULL_SHARD as llm-foundry's benchmarks ran it
	 * (tests/data/stacks/composer-fsdp.md): no pipeline, no TP. */
	[PIPETTE_STACK_COMPOSER_FSDP] = {
		.id = PIPETTE_STACK_COMPOSER_FSDP, .name = "composer-fsdp",
		.what = "MosaicML Composer's FSDP (FSDP1 FULL_SHARD) as llm-foundry runs it; "
			"estimate only",
		.grad_bytes = 4, .optim_bytes = CF_OPTIM_BYTES, .swiglu_saved = 4,
		.logits_bytes = 6, .head_input_bytes = 2,
		.wgrad_deferral_limit = 0, .act_temp_factor = ACT_TEMP,
		.reserve_fraction = RESERVE_FRACTION, .reserve_floor_bytes = RESERVE_FLOOR_BYTES,
		/* backward_prefetch BACKWARD_POST, Composer's default
		 * (composer-fsdp.md §1.2, §4.2) */
		.fsdp = 1, .prefetch_before_backward = 0,
		.shard_param_bytes = FSDP_SHARD_BYTES, .gather_bytes = FSDP_GATHER_BYTES,
		.reduce_bytes = CF_REDUCE_BYTES, .sync_each_mb = CF_SYNC_EACH_MB,
		.shard_grad_bytes = FSDP_SHARD_BYTES,
		/* eager PyTorch, no torch.compile (composer-fsdp.md §1.3) */
		.selective_ops = 0, .layer_ac = 0, .data_parallel_only = 1,
		.elementwise_factor = TT_EAGER_ELEMENTWISE,
		.attn_utilization = FA1_TRITON_UTILIZATION,
		.tp_exposed = 1.0, .dp_overlap = 1, .schedules = SCHED(PIPETTE_SCHED_1F1B),
		.attention = PIPETTE_ATTN_FLASH, .form = PIPETTE_FORM_NONE,
		.device_max_connections = 0, .core_flags = 0,
		.uneven_split = 0, .expert_tp = 0, .tied_embeddings = 1,
		.precisions = PREC(BF16),
	},
	/* DeepSeek-V3's framework as its report describes it (Liu et al.,
	 * arXiv 2412.19437; tests/data/stacks/deepseek-v3.md has each
	 * fact's section): no TP, DualPipe, ZeRO-1 (§3.2); FP8 GEMMs in the
	 * linear layers, BF16 attention, gating, norms, embedding and head,
	 * fp32 master weights and gradients, BF16 AdamW moments (§3.3.3:
	 * 4 + 2 + 2 bytes of optimizer state); RMSNorm and the MLA
	 * up-projections recomputed (§3.2.3), and the experts' SwiGLU
	 * output, whose input is cached in FP8 like the experts' input
	 * (§3.3.3: moe_act in Megatron's terms); dispatch to at most 4 nodes,
	 * sent once per node over InfiniBand and forwarded over NVLink, with
	 * 20 of the H800's 132 SMs running the communication (§3.2.2); the
	 * all-to-all hidden by DualPipe's forward/backward pairs (§3.2.1).
	 * Not modelled: FP8 caching of activations outside the experts
	 * (§3.3.3; kept in BF16, an upper bound), and the EMA kept in CPU
	 * memory (§3.2.3: no GPU memory). */
	[PIPETTE_STACK_DEEPSEEK] = {
		.id = PIPETTE_STACK_DEEPSEEK, .name = "deepseek",
		.what = "DeepSeek-V3's own framework as its report describes it: DualPipe, FP8 "
			"GEMMs, node-limited dispatch, ZeRO-1; estimate only",
		.grad_bytes = 4, .optim_bytes = DS_OPTIM_BYTES, .optim_needs_distopt = 1,
		.swiglu_saved = 3, .logits_bytes = 6, .head_input_bytes = 2,
		.wgrad_deferral_limit = 0, .act_temp_factor = ACT_TEMP,
		.reserve_fraction = RESERVE_FRACTION, .reserve_floor_bytes = RESERVE_FLOOR_BYTES,
		.elementwise_factor = 1.0,
		.recompute_modules = 1,
		.fixed_modules = PIPETTE_RM_LAYERNORM | PIPETTE_RM_MLA_UP_PROJ | PIPETTE_RM_MOE_ACT,
		.moe_overlap = 2, .deepep = 2, .fp8_gemm = 1, .fp8_raw = DS_FP8_RAW,
		.comm_sm_share = DS_COMM_SMS,
		.tp_exposed = 1.0, .dp_overlap = 1, .schedules = SCHED(PIPETTE_SCHED_DUALPIPE),
		.attention = PIPETTE_ATTN_FLASH, .form = PIPETTE_FORM_NONE,
		.device_max_connections = 0, .core_flags = 0,
		.uneven_split = 1, .expert_tp = 0, .tied_embeddings = 0,
		.precisions = PREC(FP8_BLOCKWISE), .default_precision = PIPETTE_PREC_FP8_BLOCKWISE,
	},
	/* Megatron-Bridge's flat performance recipes as its run script
	 * takes them (core/render/bridge.c writes the launch).  Gradients:
	 * _benchmark_common sets mixed_precision.grad_reduce_in_fp32 and
	 * ddp.grad_reduce_in_fp32 False, a bf16 buffer (perf_recipes/
	 * _common.py:72-74).  TP overlap: userbuffers through CommOverlapConfig
	 * (tp_comm_overlap=True, recipes/llama/h100/llama3.py:796-799), which
	 * the config turns off itself at TP 1 or without sequence parallelism
	 * (training/comm_overlap.py:441-447); the exposed share is NeMo's, the
	 * same Transformer Engine userbuffers.  DP overlap: on with DP > 1
	 * (comm_overlap.py:576-579).  The embedding's wgrad is not deferred in
	 * the pretraining recipes (defer_embedding_wgrad_compute defaults
	 * False, comm_overlap.py:436; only the SFT recipes set it).  Low
	 * precision gathers parameters in FP8/FP4 but with blockwise scales
	 * (fp8_param_gather in mixed_precision.py:254-421).  MoE: alltoall,
	 * or the flex dispatcher with DeepEP or HybridEP (scripts/performance/
	 * argument_parser.py:869-878); the all-to-all overlap on request
	 * (comm_overlap.overlap_moe_expert_parallel_comm).  Megatron-FSDP
	 * (overrides.py:94-114) and CPU activation offloading (:163-173) on
	 * request: option_mfsdp and option_offload. */
	[PIPETTE_STACK_MEGATRON_BRIDGE] = {
		.id = PIPETTE_STACK_MEGATRON_BRIDGE, .name = "megatron-bridge",
		.what = "Megatron-Bridge performance recipes (NeMo 25.11 on: bf16 gradients, "
			"userbuffers TP overlap, recipe precision by -c)",
		.grad_bytes = 2, .optim_bytes = ADAM_FP32, .swiglu_saved = 3,
		.logits_bytes = 6, .head_input_bytes = 2,
		.wgrad_deferral_limit = 0, .act_temp_factor = ACT_TEMP,
		.reserve_fraction = BRIDGE_RESERVE_FRACTION,
		.reserve_floor_bytes = RESERVE_FLOOR_BYTES,
		.elementwise_factor = 1.0,
		.tp_exposed = USERBUFFERS_TP_EXPOSED, .dp_overlap = 1, .schedules = MEGATRON_SCHEDULES,
		.attention = PIPETTE_ATTN_FLASH, .form = PIPETTE_FORM_BRIDGE,
		.device_max_connections = PIPETTE_CDMC_BRIDGE, .core_flags = 1,
		.uneven_split = 1, .expert_tp = 1, .tied_embeddings = 1,
		.recompute_modules = 1, .moe_overlap = 1, .deepep = 1,
		.precisions = BRIDGE_PRECISIONS, .te_modules = 1, .fp8_param_gather = 1,
		.megatron_fsdp = 1, .cpu_offload = 1,
	},
};

const char *pipette_stack_default_name(void)
{
	return stacks[PIPETTE_STACK_MEGATRON].name;
}

const struct pipette_stack *pipette_stack_get(enum pipette_stack_id id)
{
	return (unsigned)id < PIPETTE_STACK_COUNT ? &stacks[id] : NULL;
}


int pipette_stack_lookup(const char *name, struct pipette_stack *out, struct pipette_err *err)
{
	int i;

	for (i = 0; name && i < PIPETTE_STACK_COUNT; i++)
		if (!strcmp(name, stacks[i].name)) {
			*out = stacks[i];
			return 0;
		}
	return pipette_fail(err, "stack '%.32s': expected megatron, nemo, megatron-zb, "
			    "megatron-2022, torchtitan, composer-fsdp, deepseek or megatron-bridge "
			    "('pipette stacks' lists them)", name ? name : "");
}

static int on_off(const char *key, const char *v, int *out, struct pipette_err *err)
{
	if (!strcmp(v, "on") || !strcmp(v, "1"))
		*out = 1;
	else if (!strcmp(v, "off") || !strcmp(v, "0"))
		*out = 0;
	else
		return pipette_fail(err, "--stack-option %s: '%.16s': expected on or off", key, v);
	return 0;
}

/* grad_reduce=fp32|bf16: the main-gradient buffer, or FSDP's
 * reduce-scatter dtype. */
static int option_grad_reduce(struct pipette_stack *s, const char *v, struct pipette_err *err)
{
	if (s->mfsdp && strcmp(v, "bf16"))
		return pipette_fail(err, "--stack-option grad_reduce=%.16s: under Megatron-FSDP "
				    "(megatron_fsdp=on) gradients are kept and reduced in BF16", v);
	if (!strcmp(v, "fp32"))
		s->grad_bytes = 4;
	else if (!strcmp(v, "bf16"))
		s->grad_bytes = 2;
	else
		return pipette_fail(err, "--stack-option grad_reduce: '%.16s': expected "
				    "fp32 or bf16", v);
	if (s->fsdp) {
		/* FSDP: the reduce-scatter's dtype; torchtitan's
		 * mixed_precision_reduce takes float32 only
		 * (torchtitan-config.tsv), Composer's PURE reduces in
		 * bf16 */
		if (s->grad_bytes != 4 && s->form == PIPETTE_FORM_TORCHTITAN)
			return pipette_fail(err, "--stack-option grad_reduce=bf16: torchtitan "
					    "reduces gradients in float32 only");
		s->reduce_bytes = s->grad_bytes;
		s->grad_bytes = 4;
		return 0;
	}
	if ((s->id == PIPETTE_STACK_MEGATRON_2022 || s->id == PIPETTE_STACK_MEGATRON_ZB) &&
	    s->grad_bytes != 4)
		return pipette_fail(err, "--stack-option grad_reduce=bf16: %s has no "
				    "--grad-reduce-in-bf16", s->name);
	return 0;
}

/* Megatron-FSDP as Megatron-Bridge's recipes run it (NVIDIA-NeMo/
 * Megatron-Bridge @067f987d src/megatron/bridge/perf_recipes/llama/gb200/
 * llama3.py:272-279: use_megatron_fsdp, data_parallel_sharding_strategy
 * "optim_grads_params", fsdp_double_buffer; scripts/performance/utils/
 * overrides.py:94-114), read in NVIDIA/Megatron-LM @d98e8a64:
 *  - ZeRO-3: optimizer states, gradients and parameters sharded over the
 *    data-parallel (and context-parallel) ranks, the gradients
 *    reduce-scattered on every micro-batch, the next unit's parameters
 *    prefetched before forward and before backward (docs/user-guide/
 *    features/megatron_fsdp.md:385-402, 450-452);
 *  - main weights fp32 (megatron_fsdp_main_params_dtype, core/distributed/
 *    distributed_data_parallel_config.py:188), main gradients in the
 *    compute weights' dtype, BF16 (main_grads_dtype None, :195-199; BF16
 *    also for FP8 parameters, fsdp/src/megatron_fsdp/param_and_grad_buffer.py
 *    :2313-2322), reduced in it (grad_comm_dtype None, :201-212);
 *  - Adam's two fp32 moments beside the fp32 main weights (Megatron-Core's
 *    distributed optimizer, which Megatron-FSDP v1 always uses:
 *    Megatron-Bridge training/config.py:1079-1085).
 * Not modelled: HSDP and Hybrid-FSDP (--num-distributed-optimizer-
 * instances), which the recipes do not use. */
#define MFSDP_MAIN_PARAM_BYTES 4.0
#define MFSDP_GRAD_BYTES 2.0

static int option_mfsdp(struct pipette_stack *s, const char *v, struct pipette_err *err)
{
	const struct pipette_stack *d = &stacks[s->id];
	int b = 0;

	if (on_off("megatron_fsdp", v, &b, err))
		return -1;
	if (b == s->mfsdp)	/* already so: off leaves a stack's own FSDP alone */
		return 0;
	if (b && !s->megatron_fsdp)
		return pipette_fail(err, "--stack-option megatron_fsdp=on: the %s stack's launch has "
				    "no such setting (megatron-bridge has)", s->name);
	if (b && s->grad_bytes != 2)
		return pipette_fail(err, "--stack-option megatron_fsdp=on: Megatron-FSDP keeps and "
				    "reduces gradients in BF16 as the recipes run it; drop grad_reduce=fp32");
	if (b && s->wgrad_deferral_limit)
		return pipette_fail(err, "--stack-option megatron_fsdp=on: Megatron-Bridge turns the "
				    "deferred embedding wgrad off under Megatron-FSDP; drop wgrad_deferral");
	s->fsdp = s->mfsdp = b;
	s->prefetch_before_backward = b ? 1 : d->prefetch_before_backward;
	s->shard_param_bytes = b ? MFSDP_MAIN_PARAM_BYTES : d->shard_param_bytes;
	s->shard_grad_bytes = b ? MFSDP_GRAD_BYTES : d->shard_grad_bytes;
	s->gather_bytes = b ? 2.0 : d->gather_bytes;
	s->reduce_bytes = b ? MFSDP_GRAD_BYTES : d->reduce_bytes;
	s->sync_each_mb = b ? 1 : d->sync_each_mb;
	s->optim_bytes = b ? ADAM_MOMENTS : d->optim_bytes;
	s->optim_needs_distopt = b ? 0 : d->optim_needs_distopt;
	return 0;
}

/* cpu_offload=N (0 or off: none): Megatron-Core's cpu_offloading with
 * cpu_offloading_num_layers N and activations only (Megatron-Bridge's -ol
 * and the recipes: cpu_offloading_weights False, overrides.py:163-173),
 * which Transformer Engine's get_cpu_offload_context runs (megatron/core/
 * transformer/transformer_block.py:304-318); N below the model's layers,
 * no pipeline, no recomputation (transformer_config.py:1884-1899: checked
 * against the plan in inputs/config.c). */
static int option_offload(struct pipette_stack *s, const char *v, struct pipette_err *err)
{
	long n = 0;

	if (strcmp(v, "off") &&
	    pipette_parse_long(v, 0, 4096, &n, "--stack-option cpu_offload (layers, or off)", err))
		return -1;
	if (n && !s->cpu_offload)
		return pipette_fail(err, "--stack-option cpu_offload=%ld: the %s stack's launch has no "
				    "such setting (megatron-bridge has)", n, s->name);
	s->offload_layers = (int)n;
	return 0;
}

static int option_wgrad_deferral(struct pipette_stack *s, const char *v, struct pipette_err *err)
{
	long n;

	if (pipette_parse_long(v, 0, 1000, &n, "--stack-option wgrad_deferral", err))
		return -1;
	if (n && (s->id == PIPETTE_STACK_MEGATRON_2022 || s->id == PIPETTE_STACK_MEGATRON_ZB))
		return pipette_fail(err, "--stack-option wgrad_deferral: %s cannot defer "
				    "the embedding's weight gradient", s->name);
	if (n && s->mfsdp)
		return pipette_fail(err, "--stack-option wgrad_deferral: Megatron-Bridge turns "
				    "it off under Megatron-FSDP (megatron_fsdp=on)");
	s->wgrad_deferral_limit = (int)n;
	return 0;
}

int pipette_stack_option(struct pipette_stack *s, const char *kv, struct pipette_err *err)
{
	char key[32];
	const char *eq = kv ? strchr(kv, '=') : NULL, *v;
	int b = 0;

	if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key))
		return pipette_fail(err, "--stack-option '%.48s': expected key=value", kv ? kv : "");
	memcpy(key, kv, (size_t)(eq - kv));
	key[eq - kv] = '\0';
	v = eq + 1;
	if (!strcmp(key, "grad_reduce"))
		return option_grad_reduce(s, v, err);
	if (!strcmp(key, "tp_overlap")) {
		if (on_off(key, v, &b, err))
			return -1;
		if (s->form == PIPETTE_FORM_TORCHTITAN) {	/* async TP */
			s->async_tp = b;
			s->tp_exposed = b ? TT_ASYNC_TP_EXPOSED : 1.0;
			return 0;
		}
		if (b && (s->id == PIPETTE_STACK_MEGATRON_2022 || (s->fsdp && !s->mfsdp)))
			return pipette_fail(err, "--stack-option tp_overlap=on: %s has no "
					    "userbuffers TP overlap", s->name);
		if (!b && s->form == PIPETTE_FORM_NEMO)
			return pipette_fail(err, "--stack-option tp_overlap=off: NeMo's performance "
					    "recipes set it in their comm-overlap callback, which the "
					    "recipe overrides cannot reach by name");
		/* With userbuffers, what stays exposed is NeMo's calibrated
		 * share; without, all of it. */
		s->tp_exposed = b ? stacks[PIPETTE_STACK_NEMO].tp_exposed : 1.0;
		return 0;
	}
	if (!strcmp(key, "dp_overlap")) {
		if (on_off(key, v, &b, err))
			return -1;
		if (s->fsdp)
			return pipette_fail(err, "--stack-option dp_overlap: %s overlaps FSDP's "
					    "collectives by prefetching; pipette models that", s->name);
		if (b && s->id == PIPETTE_STACK_MEGATRON_ZB)
			return pipette_fail(err, "--stack-option dp_overlap=on: the zero-bubble "
					    "schedules refuse DP overlap with the distributed optimizer");
		/* NeMo's comm-overlap callback turns it on again with DP > 1
		 * and the distributed optimizer (nemo.md, note 2). */
		if (!b && s->form == PIPETTE_FORM_NEMO)
			return pipette_fail(err, "--stack-option dp_overlap=off: NeMo's "
					    "performance recipes overlap DP communication regardless");
		s->dp_overlap = b;
		return 0;
	}
	if (!strcmp(key, "wgrad_deferral"))
		return option_wgrad_deferral(s, v, err);
	if (!strcmp(key, "adam_states")) {
		/* Megatron-Core's precision-aware optimizer keeps the fp32
		 * master weights and the two moments in bf16: 4 + 2 + 2 bytes
		 * (--use-precision-aware-optimizer --exp-avg-dtype bf16
		 * --exp-avg-sq-dtype bf16, megatron-args.tsv), and only with
		 * the distributed optimizer (megatron-rules.tsv,
		 * pao-needs-distopt). */
		if (!strcmp(v, "fp32")) {	/* the stack's own fp32 layout */
			/* Megatron-FSDP counts the fp32 master weights in its
			 * shards (shard_param_bytes): the moments alone */
			s->optim_bytes = s->mfsdp ? ADAM_MOMENTS : stacks[s->id].optim_bytes;
			s->optim_needs_distopt = 0;
			return 0;
		}
		if (strcmp(v, "bf16"))
			return pipette_fail(err, "--stack-option adam_states: '%.16s': expected "
					    "fp32 or bf16", v);
		if (s->id != PIPETTE_STACK_MEGATRON)
			return pipette_fail(err, "--stack-option adam_states=bf16: only the megatron "
					    "stack's launch can say it (--exp-avg-dtype)");
		s->optim_bytes = 4 + 2 + 2;
		s->optim_needs_distopt = 1;
		return 0;
	}
	if (!strcmp(key, "compile")) {
		if (on_off(key, v, &b, err))
			return -1;
		if (b && s->id != PIPETTE_STACK_TORCHTITAN)
			return pipette_fail(err, "--stack-option compile=on: only torchtitan's "
					    "launch can say it (compile.enable)");
		s->elementwise_factor = b ? TT_COMPILE_ELEMENTWISE : TT_EAGER_ELEMENTWISE;
		memcpy(s->host_floor_s, b ? tt_floor_compiled : tt_floor_eager,
		       sizeof(s->host_floor_s));
		s->swiglu_saved = b ? TT_COMPILE_SWIGLU_SAVED : stacks[s->id].swiglu_saved;
		return 0;
	}
	if (!strcmp(key, "fp8")) {
		if (on_off(key, v, &b, err))
			return -1;
		if (b && s->form != PIPETTE_FORM_NONE)
			return pipette_fail(err, "--stack-option fp8=on: only an estimate-only stack "
					    "(deepseek) models FP8 GEMMs");
		/* its FP8 framework, and the recipe it runs unless told */
		s->fp8_gemm = b;
		s->default_precision = b ? PIPETTE_PREC_FP8_BLOCKWISE : PIPETTE_PREC_BF16;
		s->precisions |= PIPETTE_PREC_BIT(s->default_precision);
		return 0;
	}
	if (!strcmp(key, "megatron_fsdp"))
		return option_mfsdp(s, v, err);
	if (!strcmp(key, "cpu_offload"))
		return option_offload(s, v, err);
	if (!strcmp(key, "reserve")) {
		double f;

		if (pipette_parse_double(v, 0, 1, &f, "--stack-option reserve", err))
			return -1;
		s->reserve_fraction = f;
		return 0;
	}
	return pipette_fail(err, "--stack-option '%.48s': unknown key '%s' (known: grad_reduce, "
			    "tp_overlap, dp_overlap, wgrad_deferral, reserve, adam_states, compile, "
			    "fp8, megatron_fsdp, cpu_offload)", kv, key);
}


int pipette_stack_resolve(const char *name, const char *options, struct pipette_stack *out,
			  struct pipette_err *err)
{
	char opts[256], *item, *save = NULL;

	if (pipette_stack_lookup(name && *name ? name : pipette_stack_default_name(), out, err))
		return -1;
	if (!options || !*options)
		return 0;
	if (pipette_strlcpy(opts, options, sizeof(opts)))
		return pipette_fail(err, "--stack-option: longer than %zu bytes", sizeof(opts) - 1);
	for (item = strtok_r(opts, ",", &save); item; item = strtok_r(NULL, ",", &save))
		if (pipette_stack_option(out, item, err))
			return -1;
	/* torchtitan refuses async TP without the compiled model
	 * (pytorch/torchtitan @b5bcd76c torchtitan/config/configs.py:306-313) */
	if (out->async_tp && out->elementwise_factor >= TT_EAGER_ELEMENTWISE)
		return pipette_fail(err, "--stack-option tp_overlap=on: torchtitan's async TP "
				    "needs the compiled model (add compile=on)");
	return 0;
}

int pipette_stack_precision_check(const struct pipette_stack *s, const struct pipette_gpu_spec *g,
				  enum pipette_precision p, struct pipette_err *err)
{
	char runs[128];
	int block_scaled = p == PIPETTE_PREC_MXFP8 || p == PIPETTE_PREC_NVFP4;

	if ((unsigned)p >= PIPETTE_PREC_COUNT)
		return pipette_fail(err, "precision %d is not a recipe", (int)p);
	if (!(s->precisions & PIPETTE_PREC_BIT(p))) {
		pipette_precision_set_text(s->precisions, runs, sizeof(runs));
		return pipette_fail(err, "--precision %s: the %s stack does not run it on %s (it "
				    "runs %s)", pipette_precision_name(p), s->name, g->name, runs);
	}
	/* TE's checks: FP8 needs compute capability 8.9 or later, MXFP8
	 * 10.x, NVFP4 10.0 or later (NVIDIA/TransformerEngine @d0067d0d
	 * transformer_engine/pytorch/quantization.py:150-185); torchao's
	 * float8 SM89+, MX SM100+ (torchtitan float8.py:86-95, mx.py:70). */
	if (p != PIPETTE_PREC_BF16 && !(g->fp8_tflops > 0))
		return pipette_fail(err, "--precision %s: the %s stack cannot run it on %s, which "
				    "has no FP8 tensor cores", pipette_precision_name(p), s->name,
				    g->name);
	if (block_scaled && !(g->fp4_tflops > 0))
		return pipette_fail(err, "--precision %s: the %s stack cannot run it on %s, which "
				    "has no block-scaled (Blackwell) tensor cores",
				    pipette_precision_name(p), s->name, g->name);
	return 0;
}

/* Megatron-FSDP's compute-weight buffer is a Transformer Engine FP8
 * tensor's storage under the recipe's parameter gather (uint8, fsdp/src/
 * megatron_fsdp/param_and_grad_buffer.py:2630-2643), with a second,
 * transposed buffer where the recipe's FP8 data is not transposable
 * (MXFP8: fp8_need_transpose_data; docs/user-guide/features/
 * megatron_fsdp.md:561, 582); the gather moves the one a pass needs.  The
 * bridge stack gathers FP8 under per-tensor current scaling and MXFP8
 * (fp8_param_gather, render/bridge.c precision_keys), not under the
 * blockwise and NVFP4 recipes. */
int pipette_stack_gathers_lowp(const struct pipette_stack *s, enum pipette_precision p)
{
	return s->fp8_param_gather && (p == PIPETTE_PREC_FP8_CURRENT ||
				       p == PIPETTE_PREC_FP8_DELAYED || p == PIPETTE_PREC_MXFP8);
}

static int mfsdp_fp8_gather(const struct pipette_stack *s, enum pipette_precision p)
{
	return s->mfsdp && pipette_stack_gathers_lowp(s, p);
}

double pipette_stack_gather_bytes(const struct pipette_stack *s, enum pipette_precision p)
{
	return mfsdp_fp8_gather(s, p) ? 1.0 : s->gather_bytes;
}

double pipette_stack_held_bytes(const struct pipette_stack *s, enum pipette_precision p)
{
	if (!mfsdp_fp8_gather(s, p))
		return s->gather_bytes;
	return p == PIPETTE_PREC_MXFP8 ? 2.0 : 1.0;
}

int pipette_stack_runs(const struct pipette_stack *s, enum pipette_schedule_kind k)
{
	return (unsigned)k < PIPETTE_SCHED_COUNT && (s->schedules & SCHED(k));
}

void pipette_stack_schedules_text(const struct pipette_stack *s, char *buf, size_t len)
{
	struct pipette_args a = { buf, len, 0, 0 };
	int k;

	buf[0] = '\0';
	for (k = 0; k < PIPETTE_SCHED_COUNT; k++)
		if (pipette_stack_runs(s, (enum pipette_schedule_kind)k))
			pipette_arg(&a, "%s%s", a.n ? ", " : "",
				    pipette_schedule_name((enum pipette_schedule_kind)k));
}

int pipette_stack_describe(const struct pipette_stack *s, char *buf, size_t len)
{
	struct pipette_args a = { buf, len, 0, 0 };
	char sched[160], precs[128];

	if (!len)
		return -1;
	buf[0] = '\0';
	pipette_stack_schedules_text(s, sched, sizeof(sched));
	pipette_arg(&a, "%s: %s\n", s->name, s->what);
	if (s->mfsdp)
		pipette_arg(&a, "  data parallel      Megatron-FSDP (optim_grads_params) over dp x cp, "
			      "no pipeline: fp32 main-weight and bf16 gradient shards, a compute-weight "
			      "shard, bf16 gathers (FP8 with the recipe's parameter gather), bf16 "
			      "reduce-scatter on every micro-batch, layers double-buffered, embedding "
			      "and output layer kept gathered\n");
	else if (s->fsdp)
		pipette_arg(&a, "  data parallel      FSDP over dp_shard x cp (HSDP with "
			      "replicas): fp32 shards, %s gathers, %s reduce-scatter%s; backward "
			      "gathers prefetched %s the layer before\n",
			      s->gather_bytes == 2 ? "bf16" : "fp32",
			      s->reduce_bytes == 2 ? "bf16" : "fp32",
			      s->sync_each_mb ? " on every micro-batch" : "",
			      s->prefetch_before_backward ? "during" : "after");
	else
		pipette_arg(&a, "  gradients          %s main-gradient buffer\n",
			      s->grad_bytes == 2 ? "bf16" : "fp32");
	pipette_arg(&a, "  optimizer          %g bytes per parameter%s\n",
		      s->optim_bytes, s->fsdp ? " beside the fp32 shards" : "");
	pipette_arg(&a, "  SwiGLU saves       %g ffn-wide tensors per token\n",
		      s->swiglu_saved);
	pipette_arg(&a, "  loss               %g bytes per logit, %g per output-layer "
		      "input unit\n", s->logits_bytes, s->head_input_bytes);
	pipette_arg(&a, "  recomputation      selective = %s%s\n",
		      s->selective_ops ? "per-op (matmul and attention outputs kept)"
				       : "the attention core",
		      s->layer_ac ? "; full on every k-th layer when pinned (v0.2.2 TOML)" : "");
	pipette_arg(&a, "  embedding wgrad    %s\n", s->wgrad_deferral_limit
		      ? "deferred (limit below)" : "not deferred");
	pipette_arg(&a, "  fit                %s\n", s->mem_fraction > 0
		      ? "peak <= mem-fraction x HBM" : "peak + allocator reserve <= HBM");
	pipette_precision_set_text(s->precisions, precs, sizeof(precs));
	pipette_arg(&a, "  precision          %s (default %s; FP8 on Hopper and later, MXFP8 "
		      "and NVFP4 on Blackwell)\n", precs,
		      pipette_precision_name(s->default_precision));
	pipette_arg(&a, "  TP communication   %.0f%% exposed%s\n", 100.0 * s->tp_exposed,
		    s->async_tp ? " (async TP: tp_overlap=on)" : "");
	if (!s->fsdp)
		pipette_arg(&a, "  DP communication   %s\n", s->dp_overlap
			      ? "overlapped with backward and forward" : "exposed");
	pipette_arg(&a, "  schedules          %s\n", sched);
	pipette_arg(&a, "  attention          %s%s\n", pipette_attention_name(s->attention),
		      s->attn_utilization > 0 ? ", at a fixed share of peak (below)" : "");
	if (s->attn_utilization > 0)
		pipette_arg(&a, "  attention kernel   %.0f%% of peak FLOP/s%s\n",
			      100 * s->attn_utilization, s->attn_measured
			      ? " (the measured kernel on a GPU with a kernel table)" : "");
	if (s->elementwise_factor != 1.0)
		pipette_arg(&a, "  elementwise        %gx the fused kernels' traffic "
			      "(eager; --stack-option compile=on fuses)\n", s->elementwise_factor);
	if (s->host_floor_s[0] > 0)
		pipette_arg(&a, "  host floor         %.1f / %.1f / %.1f ms per layer forward + backward "
			      "(no / selective / full recomputation: the CPU's pace)\n",
			      1e3 * s->host_floor_s[0], 1e3 * s->host_floor_s[1],
			      1e3 * s->host_floor_s[2]);
	pipette_arg(&a, "  launch             %s%s\n",
		      s->form == PIPETTE_FORM_NEMO ? "NeMo 2.0 recipe overrides"
		      : s->form == PIPETTE_FORM_BRIDGE ? "scripts/performance/bootstrap.py: the flat "
							"recipe by -m/-mr/-g/-c, Hydra overrides"
		      : s->form == PIPETTE_FORM_MEGATRON_ZB ? "the fork's Megatron-LM arguments"
		      : s->form == PIPETTE_FORM_TORCHTITAN ? "a torchtitan recipe, --parallelism.* "
							    "overrides, v0.2.2 TOML"
		      : s->form == PIPETTE_FORM_NONE ? "none (estimate only: the env contract)"
		      : "Megatron-LM arguments",
		      s->device_max_connections == 1 ? ", CUDA_DEVICE_MAX_CONNECTIONS=1 with TP or CP > 1"
		      : s->device_max_connections == PIPETTE_CDMC_BRIDGE
		      ? ", CUDA_DEVICE_MAX_CONNECTIONS as its script picks (1 with TP or CP > 1 on "
			"Hopper, else 8; 32 on Blackwell or with DeepEP)"
		      : s->device_max_connections ? ", CUDA_DEVICE_MAX_CONNECTIONS=8" : "");
	if (s->wgrad_deferral_limit)
		pipette_arg(&a, "  wgrad deferral     %d micro-batches\n",
			      s->wgrad_deferral_limit);
	if (s->form == PIPETTE_FORM_BRIDGE)
		pipette_arg(&a, "  MoE dispatch       alltoall or DeepEP (flex backends; HybridEP not "
			    "priced: the launch pins one of the two); EP overlap on request\n");
	if (s->offload_layers)
		pipette_arg(&a, "  CPU offload        the activations of the first %d layers in host "
			    "memory, copied over the GPU's host link (no pipeline, no recomputation)\n",
			    s->offload_layers);
	else if (s->megatron_fsdp || s->cpu_offload)
		pipette_arg(&a, "  on request         %s%s%s\n",
			    s->megatron_fsdp && !s->mfsdp ? "Megatron-FSDP (--stack-option megatron_fsdp=on)"
							  : "",
			    s->megatron_fsdp && !s->mfsdp && s->cpu_offload ? ", " : "",
			    s->cpu_offload ? "CPU activation offloading (--stack-option cpu_offload=N)"
					   : "");
	if (s->mem_fraction <= 0)
		pipette_arg(&a, "  allocator reserve  %.0f%% of the activations and "
			      "temporaries, at least %.1f GiB\n", 100 * s->reserve_fraction,
			      s->reserve_floor_bytes / PIPETTE_GIB);
	return !a.bad && a.n < len ? 0 : -1;
}
