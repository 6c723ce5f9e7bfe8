/* pipette: GPU specifications (the system side of the model).
 *
 * A table, not `if` chains: each entry carries its sources. */
#ifndef PIPETTE_HARDWARE_H
#define PIPETTE_HARDWARE_H

#include <stddef.h>

#include "error.h"

struct pipette_gpu_spec {
	const char *name;	/* canonical, e.g. "H100-SXM-80GB" */
	const char *aliases;	/* comma-separated, lower case */
	double peak_tflops;	/* dense BF16/FP16 tensor-core peak */
	double hbm_bytes;	/* usable device memory */
	double hbm_gbps;	/* HBM bandwidth, GB/s */
	double nvlink_gbps;	/* per-GPU NVLink bandwidth, one direction, GB/s */
	double nic_gbps;	/* per-GPU network bandwidth, one direction, GB/s */
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
};

size_t pipette_gpu_count(void);
const struct pipette_gpu_spec *pipette_gpu_at(size_t i);
/* Case-insensitive lookup by name or alias; NULL with a message listing
 * the known types otherwise. */
const struct pipette_gpu_spec *pipette_gpu_lookup(const char *name,
						  struct pipette_err *err);

#endif
