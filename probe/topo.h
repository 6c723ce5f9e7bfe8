/* pipette-probe: the node's topology from hwloc (no GPU needed).
 *
 * NUMA nodes, GPUs and NICs found on the PCI bus, and for every GPU the
 * nearest NIC with the path class nvidia-smi topo -m uses (PIX, PXB, PHB,
 * NODE, SYS: the legend `nvidia-smi topo -m` prints, NVML's
 * nvmlGpuTopologyLevel_t).  Debian's hwloc has no NVML or CUDA backend
 * (bookworm's libhwloc-plugins 2.9.0-1 ships only the gl, opencl, pci and
 * xml_libxml plugins), so NVLink is not seen here: the measured matrix
 * (gpu.h) is the authority for GPU pairs. */
#ifndef PIPETTE_PROBE_TOPO_H
#define PIPETTE_PROBE_TOPO_H

#include <json-c/json.h>

#include "inputs/error.h"

/* Discover this machine (or, when xml is not NULL, an lstopo XML export)
 * and describe it as a JSON object the caller puts. */
int pipette_probe_topology(const char *xml, struct json_object **out,
			   struct pipette_err *err);

#endif
