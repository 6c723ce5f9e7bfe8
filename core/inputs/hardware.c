#include "inputs/hardware.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "inputs/json.h"
#include "inputs/knobs.h"

/* Sources:
 *  [V100]  NVIDIA V100 datasheet (SXM2: 125 TFLOP/s FP16 tensor, 900 GB/s,
 *          NVLink 300 GB/s bidirectional); DGX-2: 8x100 Gb/s EDR for 16 GPUs.
 *  [A100]  NVIDIA A100 datasheet (312 TFLOP/s dense BF16; 40 GB: 1555 GB/s,
 *          80 GB: 2039 GB/s; NVLink 600 GB/s bidirectional); DGX A100:
 *          one 200 Gb/s HDR NIC per GPU.
 *  [H100]  NVIDIA H100 datasheet (SXM5: 989 TFLOP/s dense BF16, 3.35 TB/s,
 *          NVLink 900 GB/s bidirectional; FP8 3,958 TFLOP/s with sparsity, 1,979
 *          dense); DGX H100: one 400 Gb/s NDR per GPU.  H800 and H200 have the
 *          same tensor cores.
 *  [H800]  The export variant of the H100 SXM: the H100's compute and HBM
 *          with NVLink cut to 400 GB/s bidirectional (NVIDIA H800 product
 *          brief); DeepSeek-V3's cluster (Liu et al., arXiv 2412.19437,
 *          §3.1 and §3.2.2): 8 GPUs per node on NVLink/NVSwitch, one
 *          InfiniBand NIC per GPU at 50 GB/s.  The H100's measured GEMM
 *          ceiling stands for it (same die).
 *  [H200]  NVIDIA H200 datasheet (141 GB, 4.8 TB/s, 989 TFLOP/s dense BF16,
 *          NVLink 900 GB/s); HGX H200 with 400 Gb/s per GPU.
 *  [B200]  NVIDIA DGX B200 datasheet (1,440 GB HBM3e for 8 GPUs, 64 TB/s;
 *          72 PFLOP/s FP8 sparse training -> 4.5 PFLOP/s dense FP8 and
 *          2.25 PFLOP/s dense BF16 per GPU;
 *          NVLink 5: 1.8 TB/s bidirectional; 8x 400 Gb/s ConnectX-7).
 *  [HGX-B] NVIDIA HGX page, Blackwell table, 8-GPU boards (nvidia.com/en-us/
 *          data-center/hgx): HGX B200 FP4 "144 PFLOPS | 72 PFLOPS" (sparse |
 *          dense) -> 9 PFLOP/s dense per GPU; HGX B300 "144 | 108" -> 13.5;
 *          FP8 72 and BF16 36 PFLOP/s sparse for both (halved, as its
 *          footnote says: 4.5 and 2.25 per GPU); NVLink 1.8 TB/s
 *          bidirectional; 0.8 (B200, ConnectX-7 400 Gb/s) and 1.6 TB/s
 *          (B300, ConnectX-8 800 Gb/s) of networking per board, both ways.
 *  [BU]    Blackwell Ultra datasheet, individual GPU specifications: HGX
 *          B300 270 GB HBM3E at 7.7 TB/s; GB300 279 GB at 8 TB/s, FP4 "20 |
 *          15 PFLOPS" (sparse | dense: Blackwell Ultra's FP4 sparsity is
 *          1.33x, not 2x); 15 PFLOPS dense NVFP4 also in NVIDIA's "Inside
 *          NVIDIA Blackwell Ultra" blog.  Where it gives B300 FP4 as 14,
 *          the HGX page's 108/8 = 13.5 is taken (0.9 of GB300's, as BF16
 *          and FP8 are).  BF16 and FP8 are B200's: the cuts of Blackwell
 *          Ultra are FP64 and INT8.
 *  [GB200] NVIDIA GB200 NVL72 page: FP16/BF16 360, FP8 720 PFLOP/s sparse
 *          for 72 GPUs (2.5 and 5 dense per GPU), NVFP4 "1,440 | 720"
 *          (10 dense per GPU), 13.4 TB HBM3E at 576 TB/s (186 GB and 8 TB/s
 *          per GPU); DGX GB200 user guide, hardware: 72-GPU NVLink domains
 *          of 18 compute trays of 4 GPUs, NVLink 5 at 1.8 TB/s
 *          bidirectional per GPU, 4 ConnectX-7 400G NICs per tray.
 *  [GB300] NVIDIA GB300 NVL72 page: FP4 "1,440 | 1,080 PFLOPS" (1,080
 *          without sparsity: 15 per GPU), FP8 720 and BF16 360 sparse,
 *          ConnectX-8 at 800 Gb/s per GPU; GB300 NVL72 reference
 *          architecture: 4 GPUs per tray, 72 in one NVLink domain.
 *  [HOST]  The GPU's link to host memory (host_gbps, one direction: half
 *          the bidirectional figure): PCIe Gen5 x16, 128 GB/s bidirectional,
 *          on the x86 boards of H100, H800, H200, B200 and B300, and
 *          NVLink-C2C, 900 GB/s bidirectional per link, from each GPU to
 *          the Grace CPU of a GB200 superchip (NVIDIA/TransformerEngine
 *          @d0067d0d docs/features/other_optimizations/cpu_offloading/
 *          cpu_offloading.rst:35-42; the H100 and H200 datasheets give the
 *          same PCIe Gen5 128 GB/s); GB300 trays pair the same Grace over
 *          the same NVLink-C2C (inferred from [GB300]'s superchip, not
 *          stated there).  A100 PCIe Gen4 64 GB/s and V100 PCIe Gen3
 *          32 GB/s, bidirectional ([A100], [V100] datasheets).
 *  FP4 peaks are dense NVFP4; 0 = no block-scaled FP4 tensor cores.
 *  Capacities are what nvidia-smi reports (A100 81920 MiB, H100 81559 MiB,
 *  H200 143771 MiB; B200 183359 MiB, NVIDIA/TensorRT-LLM issue #10278's
 *  nvidia-smi, driver 580.95; GB200 189471 MiB, B300 275040 MiB and GB300
 *  284208 MiB, "reported by nvidia-smi" in NVIDIA's aiconfigurator,
 *  ai-dynamo/aiconfigurator@095f58a5 aic-core/src/aiconfigurator_core/
 *  systems/gb200.yaml:11, b300_sxm.yaml:11, gb300.yaml:11), not the
 *  marketing GB, which understates them (B200 "180 GB" is 192.3e9 bytes;
 *  [BU]'s B300 "270 GB" is 288.4e9).
 *  [CALC]  Calculon (Isaev et al., SC'23), github.com/calculon-ai/calculon
 *          @caa4b11: systems/a100_80g.json and calculon/processor.py.
 *  Latencies: 10 us per NVLink step and 20 us per network step, the A100
 *  system constants of [CALC] (a100_80g.json lines 49 and 62, "latency"
 *  1e-5 and 2e-5 s).  Link efficiencies: NVLink 0.65 and InfiniBand 0.9,
 *  the same file (lines 47 and 60).  GEMM efficiency: a saturating curve
 *  eff = max * G / (G + half).  The half point, 0.9 GFLOP, matches the
 *  shape of [CALC]'s A100 steps (0.95 at >= 128 GFLOP, 0.9 at >= 16, 0.6
 *  at >= 1: a100_80g.json lines 5-10, applied by processor.py:40-44).
 *  The ceiling, 0.69, is fitted once on 18 published A100 runs (`make
 *  validate`): Narayanan et al. (SC'21) Table 1, its configurations in
 *  NVIDIA/Megatron-LM examples/sc21/run_table_1.sh @6985e58938, and
 *  Korthikanti et al. (MLSys'23) Table 5, as transcribed in [CALC]'s
 *  calculon/llm/validation.py:286-304.  It is the end-to-end
 *  attained fraction of peak of large GEMMs inside Megatron, kernel
 *  launch gaps and non-GEMM kernels included, i.e. FRAMEWORK_SHARE (below)
 *  of the raw cuBLAS ceiling, 0.95 of peak for A100 in Calculon.
 *  [PROBE-H] H100 and H200: the raw ceiling measured by pipette-probe
 *  --local --gemm (BF16 cuBLAS on random data, 12 shapes, fitted; one
 *  H100 80GB HBM3 SXM at 700 W and one H200, driver 580.159, CUDA 13.0,
 *  2026-11-22): H100 806.4 and 808.7 TFLOP/s on two machines, H200 800.7,
 *  i.e. 0.817 and 0.810 of the 989 peak, not 0.95; times FRAMEWORK_SHARE.
 *  Half points 5.05, 7.37 (H100) and 6.29 (H200) GFLOP: 6.2 for both (one
 *  die).  Checked on the H100 runs of mosaicml/llm-foundry
 *  scripts/train/benchmarking/README.md @061f2c7c (`make validate`).  V100 and B200 are unmeasured: A100's ceiling, their half
 *  point scaled by peak (a faster GPU needs proportionally larger GEMMs to
 *  saturate), until pipette-probe measures them. */
/* End-to-end share of a raw large-GEMM rate: the A100 ceiling fitted on
 * Narayanan et al. Table 1 and Korthikanti et al. Table 5 (0.69, above)
 * over the raw cuBLAS efficiency of large A100 GEMMs in [CALC]'s
 * a100_80g.json (0.95 at >= 128 GFLOP, line 6). */
#define FRAMEWORK_SHARE PIPETTE_FRAMEWORK_SHARE
#define H100_RAW ((806.4 + 808.7) / 2 / 989.0)	/* [PROBE-H] */
#define H200_RAW (800.7 / 989.0)		/* [PROBE-H] */
/* [KERN-H] Kernels timed on one H100 80GB HBM3 SXM (700 W), PyTorch 2.11,
 * CUDA 13 (tests/data/kernels/h100-sxm-kernels.csv, 2,253 rows, and
 * kernels.py, which took them; README.md there): the forward, data- and
 * weight-gradient GEMMs of Llama 3 8B/70B/405B layers at TP 1-8 and 1k-16k
 * tokens in BF16 and FP8, and cuDNN's causal attention forward and
 * backward at 2k-32k tokens.  The parameters are that table's fit
 * (learn/kernelfit.h; tests/unit/test_kernels.c refits the file and checks
 * them and the fit's error: median 4.3% BF16, 3.0% FP8 tensorwise, 4.5%
 * rowwise, 4.7% attention).  FlashAttention-2 forced through SDPA on the
 * same GPU ran causal attention forward and backward at 0.56-0.62 of the
 * cuDNN kernel's rate on five shapes (h100-sxm-step-costs.csv there, the
 * median 0.56).
 * The H800 has the H100's die and clocks; its table is the H100's.
 * step_share: fitted with the nemo stack's TP exposure on NVIDIA's NeMo 2.0
 * H100 runs (tests/data/stacks; `make validate` prints the fit and its
 * leave-one-out).
 * [KERN-H200] The same grid timed by kernels.py on one H200 (700 W, driver
 * 580.159, PyTorch 2.11.0+cu130, 2026-11-27; tests/data/kernels/
 * h200-kernels.csv, 2,280 rows) and fitted the same way (median error
 * 4.8% BF16, 3.3% FP8 tensorwise, 2.6% rowwise, 4.9% attention): the
 * GEMM rates within 3% of the H100's, the attention kernel's fixed costs
 * 56/183 us against 45/114.  FlashAttention-2's share and step_share are
 * the H100's (the same die and stacks). */
/* The fit at a clock factor c: rates times c, fixed costs as measured. */
#define H100_KERNELS(c, src) {								\
	.gemm = {									\
		[PIPETTE_GEMM_BF16] = { 13.27e-6, 703.0 * (c), 0.3392e-12 },		\
		[PIPETTE_GEMM_FP8_TENSOR] = { 19.63e-6, 1359.0 * (c), 0.4888e-12 },	\
		[PIPETTE_GEMM_FP8_ROW] = { 19.89e-6, 1262.2 * (c), 0.5112e-12 },	\
	},										\
	.attn_fwd = { 45.09e-6, 634.9 * (c), 0.1044e-9 },				\
	.attn_bwd = { 113.7e-6, 572.3 * (c), 1.304e-9 },				\
	.flash2_share = 0.56,								\
	.step_share = PIPETTE_H100_STEP_SHARE,						\
	.source = (src),								\
}
static const struct pipette_kernels h100_kernels = H100_KERNELS(1.0, "[KERN-H]");
static const struct pipette_kernels h200_kernels = {
	.gemm = {
		[PIPETTE_GEMM_BF16] = { 13.83e-6, 691.7, 0.3050e-12 },
		[PIPETTE_GEMM_FP8_TENSOR] = { 21.89e-6, 1345.6, 0.4805e-12 },
		[PIPETTE_GEMM_FP8_ROW] = { 22.60e-6, 1302.3, 0.5830e-12 },
	},
	.attn_fwd = { 56.07e-6, 627.9, 0.1054e-9 },
	.attn_bwd = { 182.7e-6, 567.7, 0.5941e-9 },
	.flash2_share = 0.56,
	.step_share = PIPETTE_H100_STEP_SHARE,
	.source = "[KERN-H200]",
};

/* [H100-500W] Meta's Grand Teton H100 that torchtitan benchmarks on
 * (pytorch/torchtitan docs/performance.md, and its benchmarks/
 * llama3_h100_202412_torchtitan.md lines 11-15: 96GB HBM2e at 2.4 TB/s,
 * 400 Gb/s RDMA per GPU, the default 500 W power limit).  Its kernels are
 * the H100's [KERN-H] at the clocks a 500 W cap allows: dynamic power
 * grows as C V^2 f with V rising with f (Weste and Harris, "CMOS VLSI
 * Design", 4th ed., §5.2), so the clock, and a compute-bound kernel's
 * rate, scale as the cube root of the power; the table's kernels drew
 * 630-690 W (tests/data/kernels/README.md), 660 W in the middle. */
#define H100_500W_CLOCK (0.9116)	/* cbrt(500 / 660) */
static const struct pipette_kernels h100_500w_kernels =
	H100_KERNELS(H100_500W_CLOCK, "[KERN-H] [H100-500W]");

/* [LOWP] Blackwell has no measured kernel table yet: the share of each
 * dtype's dense peak a Megatron-Core step attains is fitted on the dense
 * runs NVIDIA published for Megatron-Bridge (Llama 3 8B, 70B, 405B in FP8,
 * MXFP8 and NVFP4 on B200, GB200 NVL72, GB300 NVL72; tests/data/stacks/
 * megatron-bridge-lowp.csv, each row with its source): one share per die
 * (B200 and GB200 one die, B300 and GB300 another; the datasheet peaks
 * carry their clocks) and one factor per recipe shared by every
 * Blackwell GPU.  `make validate` refits them, prints leave-one-out, and
 * fails when these values drift from the fit. */
#define BLACKWELL_SHARE 0.32
#define BLACKWELL_ULTRA_SHARE 0.38
#define BW_FP8 1.08
#define BW_MXFP8 0.92
#define BW_NVFP4 0.31
#define BW_SHARES(s) { [PIPETTE_GEMM_BF16] = (s), [PIPETTE_GEMM_FP8_TENSOR] = (s) * BW_FP8, \
		       [PIPETTE_GEMM_FP8_ROW] = (s) * BW_FP8, [PIPETTE_GEMM_MXFP8] = (s) * BW_MXFP8, \
		       [PIPETTE_GEMM_NVFP4] = (s) * BW_NVFP4 }

static const struct pipette_gpu_spec gpus[] = {
	{ .name = "V100-SXM-32GB", .aliases = "v100,v100-32gb,v100-sxm2-32gb",
	  .peak_tflops = 125.0, .fp8_tflops = 0, .fp4_tflops = 0,
	  .hbm_bytes = 32768 * PIPETTE_MIB, .hbm_gbps = 900.0, .nvlink_gbps = 150.0, .nic_gbps = 6.25,
	  .host_gbps = 16.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 8,
	  .gemm_eff_max = 0.69, .gemm_half_gflop = 0.9 * 125.0 / 312.0, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[V100]", .kernels = NULL },
	{ .name = "A100-SXM-40GB", .aliases = "a100-40gb,a100-sxm4-40gb",
	  .peak_tflops = 312.0, .fp8_tflops = 0, .fp4_tflops = 0,
	  .hbm_bytes = 40960 * PIPETTE_MIB, .hbm_gbps = 1555.0, .nvlink_gbps = 300.0, .nic_gbps = 25.0,
	  .host_gbps = 32.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 8,
	  .gemm_eff_max = 0.69, .gemm_half_gflop = 0.9, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[A100]", .kernels = NULL },
	{ .name = "A100-SXM-80GB", .aliases = "a100,a100-80gb,a100-sxm4-80gb",
	  .peak_tflops = 312.0, .fp8_tflops = 0, .fp4_tflops = 0,
	  .hbm_bytes = 81920 * PIPETTE_MIB, .hbm_gbps = 2039.0, .nvlink_gbps = 300.0, .nic_gbps = 25.0,
	  .host_gbps = 32.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 8,
	  .gemm_eff_max = 0.69, .gemm_half_gflop = 0.9, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[A100]", .kernels = NULL },
	{ .name = "H100-SXM-80GB", .aliases = "h100,h100-80gb,h100-sxm5-80gb,h100-sxm",
	  .peak_tflops = 989.0, .fp8_tflops = 1979.0, .fp4_tflops = 0,
	  .hbm_bytes = 81559 * PIPETTE_MIB, .hbm_gbps = 3350.0, .nvlink_gbps = 450.0, .nic_gbps = 50.0,
	  .host_gbps = 64.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 8,
	  .gemm_eff_max = H100_RAW * FRAMEWORK_SHARE, .gemm_half_gflop = 6.2, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[H100] [PROBE-H] [KERN-H]", .kernels = &h100_kernels },
	{ .name = "H800-SXM-80GB", .aliases = "h800,h800-80gb,h800-sxm",
	  .peak_tflops = 989.0, .fp8_tflops = 1979.0, .fp4_tflops = 0,
	  .hbm_bytes = 81559 * PIPETTE_MIB, .hbm_gbps = 3350.0, .nvlink_gbps = 200.0, .nic_gbps = 50.0,
	  .host_gbps = 64.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 8,
	  .gemm_eff_max = H100_RAW * FRAMEWORK_SHARE, .gemm_half_gflop = 6.2, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[H800] [PROBE-H] [KERN-H]", .kernels = &h100_kernels },
	{ .name = "H100-96GB-500W", .aliases = "h100-96gb,h100-500w,grand-teton",
	  .peak_tflops = 989.0 * H100_500W_CLOCK, .fp8_tflops = 1979.0 * H100_500W_CLOCK, .fp4_tflops = 0,
	  .hbm_bytes = 96e9, .hbm_gbps = 2400.0, .nvlink_gbps = 450.0, .nic_gbps = 50.0,
	  .host_gbps = 64.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 8,
	  .gemm_eff_max = H100_RAW * FRAMEWORK_SHARE, .gemm_half_gflop = 6.2, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[H100-500W] [KERN-H]", .kernels = &h100_500w_kernels },
	{ .name = "H200-SXM-141GB", .aliases = "h200,h200-141gb,h200-sxm",
	  .peak_tflops = 989.0, .fp8_tflops = 1979.0, .fp4_tflops = 0,
	  .hbm_bytes = 143771 * PIPETTE_MIB, .hbm_gbps = 4800.0, .nvlink_gbps = 450.0, .nic_gbps = 50.0,
	  .host_gbps = 64.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 8,
	  .gemm_eff_max = H200_RAW * FRAMEWORK_SHARE, .gemm_half_gflop = 6.2, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[H200] [PROBE-H] [KERN-H200]", .kernels = &h200_kernels },
	{ .name = "B200-SXM-180GB", .aliases = "b200,b200-180gb",
	  .peak_tflops = 2250.0, .fp8_tflops = 4500.0, .fp4_tflops = 9000.0,
	  .hbm_bytes = 183359 * PIPETTE_MIB, .hbm_gbps = 8000.0, .nvlink_gbps = 900.0, .nic_gbps = 50.0,
	  .host_gbps = 64.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 8,
	  .gemm_eff_max = 0.69, .gemm_half_gflop = 0.9 * 2250.0 / 312.0, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[B200] [HGX-B]", .curve_share = BW_SHARES(BLACKWELL_SHARE),
	  .kernels = NULL },
	{ .name = "B300-SXM-270GB", .aliases = "b300,b300-270gb",
	  .peak_tflops = 2250.0, .fp8_tflops = 4500.0, .fp4_tflops = 13500.0,
	  .hbm_bytes = 275040 * PIPETTE_MIB, .hbm_gbps = 7700.0, .nvlink_gbps = 900.0, .nic_gbps = 100.0,
	  .host_gbps = 64.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 8,
	  .gemm_eff_max = 0.69, .gemm_half_gflop = 0.9 * 2250.0 / 312.0, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[HGX-B] [BU]", .curve_share = BW_SHARES(BLACKWELL_ULTRA_SHARE),
	  .kernels = NULL },
	{ .name = "GB200-NVL72", .aliases = "gb200,gb200-186gb,gb200-nvl72",
	  .peak_tflops = 2500.0, .fp8_tflops = 5000.0, .fp4_tflops = 10000.0,
	  .hbm_bytes = 189471 * PIPETTE_MIB, .hbm_gbps = 8000.0, .nvlink_gbps = 900.0, .nic_gbps = 50.0,
	  .host_gbps = 450.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 4,
	  .gemm_eff_max = 0.69, .gemm_half_gflop = 0.9 * 2500.0 / 312.0, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[GB200]", .curve_share = BW_SHARES(BLACKWELL_SHARE),
	  .kernels = NULL,
	  .nvlink_domain_gpus = 72 },
	{ .name = "GB300-NVL72", .aliases = "gb300,gb300-279gb,gb300-nvl72",
	  .peak_tflops = 2500.0, .fp8_tflops = 5000.0, .fp4_tflops = 15000.0,
	  .hbm_bytes = 284208 * PIPETTE_MIB, .hbm_gbps = 8000.0, .nvlink_gbps = 900.0, .nic_gbps = 100.0,
	  .host_gbps = 450.0, .nvlink_lat_us = 10.0, .nic_lat_us = 20.0, .gpus_per_node = 4,
	  .gemm_eff_max = 0.69, .gemm_half_gflop = 0.9 * 2500.0 / 312.0, .nvlink_eff = 0.65, .nic_eff = 0.9,
	  .source = "[GB300] [BU]", .curve_share = BW_SHARES(BLACKWELL_ULTRA_SHARE),
	  .kernels = NULL,
	  .nvlink_domain_gpus = 72 },
};

size_t pipette_gpu_count(void)
{
	return sizeof(gpus) / sizeof(gpus[0]);
}

const struct pipette_gpu_spec *pipette_gpu_at(size_t i)
{
	return i < pipette_gpu_count() ? &gpus[i] : NULL;
}

static int alias_match(const char *aliases, const char *name)
{
	size_t n = strlen(name);
	const char *p = aliases;

	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == n && !strncasecmp(p, name, n))
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

const struct pipette_gpu_spec *pipette_gpu_lookup(const char *name,
						  struct pipette_err *err)
{
	size_t i;

	if (name)
		for (i = 0; i < pipette_gpu_count(); i++)
			if (!strcasecmp(name, gpus[i].name) ||
			    alias_match(gpus[i].aliases, name))
				return &gpus[i];
	pipette_fail(err, "unknown GPU type '%.48s' (known: V100, A100-40GB, "
		     "A100 (80GB), H100, H800, H100-96GB-500W, H200, B200, B300, GB200, GB300; 'pipette gpus' lists them)",
		     name ? name : "");
	return NULL;
}


static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

const struct pipette_kernels *pipette_gpu_kernels(const struct pipette_gpu_spec *g)
{
	return g->has_site_kernels ? &g->site_kernels : g->kernels;
}

/* One fit's numbers: obj[names[i]] for i < n, each in (0, max[i]]
 * (lo_zero: [0, max]), under `what` in errors. */
static int kernel_numbers(struct json_object *obj, const char *path, const char *what,
			  const char *const *names, const double *max, int n, double *out,
			  struct pipette_err *err)
{
	for (int i = 0; i < n; i++) {
		if (pipette_json_number(obj, names[i], path, &out[i], err))
			return pipette_fail_prefix(err, "kernels.%s: ", what);
		if (!(out[i] >= 0 && out[i] <= max[i]) || (i == 1 && !(out[i] > 0)))
			return pipette_fail(err, "%s: kernels.%s.%s: %g is not plausible (expected "
					    "%s0 and at most %g)", path, what, names[i], out[i],
					    i == 1 ? "above " : "at least ", max[i]);
	}
	return 0;
}

/* The site's kernel table of a calibration document (hardware.h). */
static int site_kernels(const struct pipette_gpu_spec *base, struct json_object *k,
			const char *path, struct pipette_gpu_spec *out, struct pipette_err *err)
{
	static const char *const gnames[] = { "t0_s", "tflops", "out_s" };
	static const char *const anames[] = { "t0_s", "tflops", "row_s" };
	struct pipette_kernels *kt = &out->site_kernels;
	struct json_object *gemm, *one;
	double v[3], gmax[3] = { 0.01, 0, 1e-6 }, amax[3] = { 0.01, 0, 1e-6 }, share;
	char gpu[64];

	memset(kt, 0, sizeof(*kt));
	if (pipette_json_string(k, "gpu", path, gpu, sizeof(gpu), err))
		return pipette_fail_prefix(err, "kernels: ");
	if (strcasecmp(gpu, base->name))
		return pipette_fail(err, "%s: kernels.gpu: '%s' is not the plan's GPU type %s", path,
				    gpu, base->name);
	if (!json_object_object_get_ex(k, "gemm", &gemm) ||
	    !json_object_object_get_ex(gemm, "bf16", &one))
		return pipette_fail(err, "%s: kernels.gemm.bf16: missing (pipette kernels fit "
				    "writes it)", path);
	for (int d = 0; d < 3; d++) {
		char what[48];

		if (!json_object_object_get_ex(gemm, pipette_gemm_dtype_name((enum pipette_gemm_dtype)d), &one))
			continue;	/* not measured */
		gmax[1] = 2.0 * (d ? base->fp8_tflops : base->peak_tflops);
		snprintf(what, sizeof(what), "gemm.%s", pipette_gemm_dtype_name((enum pipette_gemm_dtype)d));
		if (kernel_numbers(one, path, what, gnames, gmax, 3, v, err))
			return -1;
		kt->gemm[d] = (struct pipette_gemm_fit){ v[0], v[1], v[2] };
	}
	amax[1] = 2.0 * base->peak_tflops;
	if (json_object_object_get_ex(k, "attn_fwd", &one) &&
	    json_object_object_get_ex(k, "attn_bwd", &gemm)) {
		if (kernel_numbers(one, path, "attn_fwd", anames, amax, 3, v, err))
			return -1;
		kt->attn_fwd = (struct pipette_attn_fit){ v[0], v[1], v[2] };
		if (kernel_numbers(gemm, path, "attn_bwd", anames, amax, 3, v, err))
			return -1;
		kt->attn_bwd = (struct pipette_attn_fit){ v[0], v[1], v[2] };
	}
	/* What a step attains of the kernels: the file's, else the type's,
	 * else the H100's (the only GPU with a fitted share). */
	share = base->kernels ? base->kernels->step_share : PIPETTE_H100_STEP_SHARE;
	if (json_object_object_get_ex(k, "step_share", &one) &&
	    (pipette_json_number(k, "step_share", path, &share, err) || !(share > 0 && share <= 1)))
		return pipette_fail(err, "%s: kernels.step_share: expected a share in (0, 1]", path);
	kt->step_share = share;
	kt->flash2_share = base->kernels ? base->kernels->flash2_share : 0;
	kt->source = "the site's kernel table (--calibration)";
	out->has_site_kernels = 1;
	return 0;
}

int pipette_gpu_calibrate_doc(const struct pipette_gpu_spec *base, struct json_object *root,
			      const char *path, struct pipette_gpu_spec *out,
			      struct pipette_err *err)
{
	struct json_object *gemm, *list, *k;
	double rmax, half, hbm[64];
	int nh = 0, i;

	*out = *base;
	if (json_object_object_get_ex(root, "kernels", &k) &&
	    site_kernels(base, k, path, out, err))
		return -1;
	if (!json_object_object_get_ex(root, "gemm", &gemm) &&
	    (json_object_object_get_ex(root, "site", &list) || out->has_site_kernels))
		return 0;	/* the site's factors or kernels alone */
	if (!json_object_object_get_ex(root, "gemm", &gemm) ||
	    pipette_json_number(gemm, "max_tflops", path, &rmax, NULL) ||
	    pipette_json_number(gemm, "half_gflop", path, &half, NULL))
		return pipette_fail(err, "%s: gemm.max_tflops and gemm.half_gflop: expected the "
				    "numbers of pipette-probe --local --gemm", path);
	if (!(rmax > 0 && rmax <= 2 * base->peak_tflops) || !(half > 0 && half < 1e6))
		return pipette_fail(err, "%s: gemm.max_tflops %g / half_gflop %g are not plausible "
				    "for %s (peak %g TFLOP/s)", path, rmax, half, base->name,
				    base->peak_tflops);
	out->gemm_eff_max = rmax / base->peak_tflops * FRAMEWORK_SHARE;
	if (base->kernels && !out->has_site_kernels)	/* the site's GPUs against the table's */
		out->kernel_scale = out->gemm_eff_max / base->gemm_eff_max;
	out->gemm_half_gflop = half;
	if (json_object_object_get_ex(root, "gpus", &list) &&
	    json_object_get_type(list) == json_type_array) {
		for (i = 0; i < (int)json_object_array_length(list) && nh < 64; i++) {
			double v;

			if (!pipette_json_number(json_object_array_get_idx(list, (size_t)i), "hbm_gbps",
						 path, &v, NULL) &&
			    v > 0 && v <= 10 * base->hbm_gbps)
				hbm[nh++] = v;
		}
		if (nh) {
			qsort(hbm, (size_t)nh, sizeof(double), cmp_double);
			out->hbm_gbps = hbm[nh / 2];
		}
	}
	return 0;
}

int pipette_gpu_calibrate(const struct pipette_gpu_spec *base, const char *path,
			  struct pipette_gpu_spec *out, struct pipette_err *err)
{
	struct json_object *root;
	int rv;

	if (!(root = pipette_json_read(path, "calibration", PIPETTE_CALIBRATION_JSON_MAX,
				       PIPETTE_CALIBRATION_JSON_DEPTH, NULL, err)))
		return -1;
	rv = pipette_gpu_calibrate_doc(base, root, path, out, err);
	json_object_put(root);
	return rv;
}
