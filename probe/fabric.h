/* pipette-probe: the NVLink domain of a node, from NVML's GPU fabric info.
 *
 * On a multi-node NVLink system (GB200/GB300 NVL72: 18 trays of 4 GPUs
 * behind NVLink switches) every GPU registers with the fabric manager;
 * NVML then reports, per GPU, the registration's state and status, the
 * fabric's cluster UUID and the clique: GPUs of one cluster UUID and one
 * clique id reach each other over NVLink (nvml.h, nvmlGpuFabricInfo_v2_t
 * and nvmlDeviceGetGpuFabricInfoV; NCCL treats two ranks as one multi-node
 * NVLink domain exactly when every registration is COMPLETED and both
 * fields match: ncclMnnvlCheck in NVIDIA/nccl, since NCCL 2.19).
 *
 * pipette names such a domain "<cluster UUID>:<clique id>", the UUID in
 * its canonical 8-4-4-4-12 lower-case hex form, the clique in decimal:
 * the name the probe writes into the bandwidth cache (pipette-bw/3
 * "domains"), so that the nodes that share it plan as one NVLink domain.
 *
 * NVML is opened at run time (dlopen of libnvidia-ml.so.1, the driver's
 * library) when the build found an nvml.h with the fabric info, so that
 * the probe still runs on nodes without a driver (--transport tcp); a
 * build without that header reads no fabric info and writes no domain. */
#ifndef PIPETTE_PROBE_FABRIC_H
#define PIPETTE_PROBE_FABRIC_H

#include <stddef.h>

#include "args.h"
#include "inputs/error.h"

/* NVML_GPU_FABRIC_UUID_LEN (nvml.h). */
#define PIPETTE_PROBE_FABRIC_UUID_LEN 16
/* 36 characters of UUID, ':', up to 10 digits of a 32-bit clique id. */
#define PIPETTE_PROBE_DOMAIN_MAX 64

/* NVML's registration states, NVML_GPU_FABRIC_STATE_* (nvml.h). */
enum pipette_probe_fabric_state {
	PIPETTE_FABRIC_NOT_SUPPORTED = 0,
	PIPETTE_FABRIC_NOT_STARTED = 1,
	PIPETTE_FABRIC_IN_PROGRESS = 2,
	PIPETTE_FABRIC_COMPLETED = 3,
};

/* One GPU's fabric info, as NVML gives it. */
struct pipette_probe_fabric {
	int state;			/* enum pipette_probe_fabric_state */
	int status_ok;			/* status == NVML_SUCCESS */
	unsigned char cluster_uuid[PIPETTE_PROBE_FABRIC_UUID_LEN];
	unsigned long clique;
};

/* The domain of a node whose GPUs report `g[0..n)`: 1 with its name in
 * name (PIPETTE_PROBE_DOMAIN_MAX bytes); 0 when the node is in no
 * multi-node domain (no GPU, or none supports fabric registration: an
 * H100 board), with why; -1 when its GPUs say something unusable (a
 * registration not completed or failed, an all-zero cluster UUID, GPUs of
 * one node in different cliques), with the GPU and the reason. */
int pipette_probe_fabric_domain(const struct pipette_probe_fabric *g, int n, char *name,
				struct pipette_err *why);

/* Every GPU's fabric info through NVML: 0 with *out (n entries, free()),
 * or -1 when NVML cannot be read (no driver, a build without nvml.h). */
int pipette_probe_fabric_read(struct pipette_probe_fabric **out, int *n,
			      struct pipette_err *err);

/* This node's domain into name ("" = none): PIPETTE_PROBE_DOMAIN from the
 * environment when set ("none": none; else the name, checked as the cache
 * checks it), else NVML's.  0 with the domain, or none and why (no NVML
 * here, no multi-node domain); -1 when the environment or the GPUs say
 * something unusable, with why (the domain is then ""): the caller says it
 * and goes on, since the links are worth measuring without it. */
int pipette_probe_node_domain(pipette_probe_getenv_fn get, void *ctx, char *name,
			      struct pipette_err *why);

#endif
