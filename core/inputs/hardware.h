/* pipette: GPU specifications (the system side of the model).
 *
 * A table, not `if` chains: each entry carries its sources. */
#ifndef PIPETTE_HARDWARE_H
#define PIPETTE_HARDWARE_H

#include <stddef.h>

#include "inputs/error.h"
#include "inputs/kernels.h"

/* Binary units of memory sizes (HBM, plans, caches). */
#define PIPETTE_MIB (1024.0 * 1024.0)
#define PIPETTE_GIB (1024.0 * PIPETTE_MIB)

/* The end-to-end share of the raw GEMM ceiling a framework attains
 * (hardware.c: Megatron's 0.69 over Calculon's 0.95 on A100). */
#define PIPETTE_FRAMEWORK_SHARE (0.69 / 0.95)
/* The share of the H100's measured kernel rates a Megatron-Core step
 * attains (hardware.c [KERN-H]); tests/validate fits it. */
#define PIPETTE_H100_STEP_SHARE 0.99

struct pipette_gpu_spec {
	const char *name;	/* canonical, e.g. "H100-SXM-80GB" */
	const char *aliases;	/* comma-separated, lower case */
	double peak_tflops;	/* dense BF16/FP16 tensor-core peak */
	double hbm_bytes;	/* usable device memory */
	double hbm_gbps;	/* HBM bandwidth, GB/s */
	double nvlink_gbps;	/* per-GPU NVLink bandwidth, one direction, GB/s */
	double nic_gbps;	/* per-GPU network bandwidth, one direction, GB/s */
	double host_gbps;	/* the GPU's link to host memory, one direction, GB/s */
	double nvlink_lat_us;	/* per-hop latency of an intra-node transfer */
	double nic_lat_us;	/* per-hop latency of an inter-node transfer */
	int gpus_per_node;	/* typical HGX/DGX board */
	/* Time-model efficiencies (see timing.h): attained fraction of the peak
	 * for large GEMMs, and the GEMM size (GFLOP) at which half of that is
	 * reached; attained fraction of nominal link bandwidth. */
	double gemm_eff_max;
	double gemm_half_gflop;
	double nvlink_eff;
	double nic_eff;
	const char *source;
	/* dense FP8 tensor-core peak (0: no FP8 tensor cores); dense NVFP4
	 * peak of Blackwell's block-scaled tensor cores (0: none, so no MXFP8
	 * or NVFP4 either) */
	double fp8_tflops;
	double fp4_tflops;
	/* GPUs sharing one NVLink domain in the system this type comes in:
	 * 72 on a GB200/GB300 NVL72 rack (18 trays of 4, each a Slurm node),
	 * 0 = one node's (an HGX board).  `--nvlink-domain` overrides it. */
	int nvlink_domain_gpus;
	/* The site's calibration (calib.h): the measured over the modelled
	 * time of computation and of exposed communication on this GPU type
	 * under the plan's stack; 0 = none (1). */
	double site_compute, site_comm;
	/* Measured kernel rates of this GPU type (kernels.h); NULL: none, the
	 * GEMM efficiency curve above stands for them. */
	const struct pipette_kernels *kernels;
	/* A site's own kernel table (`pipette kernels fit`, read by
	 * --calibration): it replaces the type's where has_site_kernels. */
	struct pipette_kernels site_kernels;
	int has_site_kernels;
	/* Without a kernel table: the share of each GEMM dtype's dense peak a
	 * training step attains at large shapes (0: gemm_eff_max), fitted on
	 * published runs of the GPU type (hardware.c names them). */
	double curve_share[PIPETTE_GEMM_DTYPE_COUNT];
	/* A site's GPUs against the table's: the BF16 GEMM ceiling
	 * pipette-probe --local measured on them over the one it measured on
	 * the table's GPU type, the same method on both (0 = 1).  The
	 * kernels' times are divided by it. */
	double kernel_scale;
};

/* The kernel table the time model uses on g: the site's, else the type's
 * (NULL: none, the efficiency curve). */
const struct pipette_kernels *pipette_gpu_kernels(const struct pipette_gpu_spec *g);

size_t pipette_gpu_count(void);
const struct pipette_gpu_spec *pipette_gpu_at(size_t i);
/* Case-insensitive lookup by name or alias; NULL with a message listing
 * the known types otherwise. */
const struct pipette_gpu_spec *pipette_gpu_lookup(const char *name,
						  struct pipette_err *err);

/* A calibration file may also hold a site's kernel table, the fit of its
 * own GPUs' kernels that `pipette kernels fit` writes:
 *   "kernels": { "gpu": NAME, "step_share": S (optional: the type's, else
 *     the H100's), "gemm": { "bf16": {"t0_s", "tflops", "out_s"},
 *     "fp8-tensorwise": {...}, "fp8-rowwise": {...} },
 *     "attn_fwd": {"t0_s", "tflops", "row_s"}, "attn_bwd": {...} }
 * Its figures are checked for plausibility against the type's peaks, and
 * the GPU names must agree; errors name the file and the key. */

/* Replace the time-model efficiencies of `base` with what pipette-probe
 * measured on one node (`pipette-probe --local --json FILE`: gemm.max_tflops
 * and gemm.half_gflop of the fitted curve, gpus[].hbm_gbps): the GEMM
 * ceiling becomes the measured rate over the peak times the share of a raw
 * GEMM rate that Megatron attains end to end (hardware.c), the half point
 * the measured one, HBM bandwidth the median measured.  A file with the
 * site's factors ("site", `pipette calibrate`, calib.h) and no "gemm"
 * leaves the table's figures as they are.  Errors name the file and the
 * key. */
int pipette_gpu_calibrate(const struct pipette_gpu_spec *base, const char *probe_json,
			  struct pipette_gpu_spec *out, struct pipette_err *err);
/* The same from the document already read (path names it in errors). */
struct json_object;
int pipette_gpu_calibrate_doc(const struct pipette_gpu_spec *base, struct json_object *root,
			      const char *path, struct pipette_gpu_spec *out,
			      struct pipette_err *err);
/* How a calibration file is read: a probe report is a few kilobytes, a
 * site's fit less; nesting as deep as the probe's report may go. */
#define PIPETTE_CALIBRATION_JSON_MAX (16 << 20)
#define PIPETTE_CALIBRATION_JSON_DEPTH 32

#endif
