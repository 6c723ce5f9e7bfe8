#include "topo.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PCI class codes (PCI Code and ID Assignment Specification r1.x, PCI-SIG):
 * 0x03xx display (0x0300 VGA, 0x0302 3D controller), 0x0200 Ethernet,
 * 0x0207 InfiniBand, 0x0280 other network controller, 0x1200 processing
 * accelerator. */
static int is_gpu(hwloc_obj_t o)
{
	unsigned cls = o->attr->pcidev.class_id;

	return (cls >> 8) == 0x03 || cls == 0x1200;
}

static int is_nic(hwloc_obj_t o)
{
	unsigned cls = o->attr->pcidev.class_id;

	return cls == 0x0200 || cls == 0x0207 || cls == 0x0280;
}

static void pci_name(hwloc_obj_t o, char *buf, size_t size)
{
	snprintf(buf, size, "%04x:%02x:%02x.%01x", o->attr->pcidev.domain,
		 o->attr->pcidev.bus, o->attr->pcidev.dev, o->attr->pcidev.func);
}

static int numa_of(hwloc_topology_t t, hwloc_obj_t o)
{
	hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(t, o);

	return (a && a->nodeset) ? hwloc_bitmap_first(a->nodeset) : -1;
}

/* nvidia-smi's path classes from the common ancestor of two PCI devices. */
static const char *path_class(hwloc_topology_t t, hwloc_obj_t a, hwloc_obj_t b,
			      int *bridges)
{
	hwloc_obj_t c = hwloc_get_common_ancestor_obj(t, a, b), o;
	int n = 0;

	for (o = a->parent; o && o != c; o = o->parent)
		n += (o->type == HWLOC_OBJ_BRIDGE);
	for (o = b->parent; o && o != c; o = o->parent)
		n += (o->type == HWLOC_OBJ_BRIDGE);
	*bridges = n;
	if (c->type == HWLOC_OBJ_BRIDGE) {
		if (c->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
			return "PHB";
		return n == 0 ? "PIX" : "PXB";
	}
	if (c->type == HWLOC_OBJ_PCI_DEVICE)
		return "PIX";
	if (hwloc_get_non_io_ancestor_obj(t, a) == hwloc_get_non_io_ancestor_obj(t, b))
		return "NODE";
	return "SYS";
}

/* Rank of a path class, nearest first. */
static int path_rank(const char *p)
{
	static const char *order[] = { "PIX", "PXB", "PHB", "NODE", "SYS" };
	int i;

	for (i = 0; i < 5; i++)
		if (!strcmp(order[i], p))
			return i;
	return 5;
}

static struct json_object *dev_json(hwloc_topology_t t, hwloc_obj_t o)
{
	struct json_object *j = json_object_new_object(), *names;
	char buf[64];
	hwloc_obj_t c;

	pci_name(o, buf, sizeof(buf));
	json_object_object_add(j, "pci", json_object_new_string(buf));
	snprintf(buf, sizeof(buf), "0x%04x", o->attr->pcidev.vendor_id);
	json_object_object_add(j, "vendor", json_object_new_string(buf));
	snprintf(buf, sizeof(buf), "0x%04x", o->attr->pcidev.device_id);
	json_object_object_add(j, "device", json_object_new_string(buf));
	snprintf(buf, sizeof(buf), "0x%04x", o->attr->pcidev.class_id);
	json_object_object_add(j, "class", json_object_new_string(buf));
	json_object_object_add(j, "numa", json_object_new_int(numa_of(t, o)));
	if (o->attr->pcidev.linkspeed > 0)
		json_object_object_add(j, "link_gbps",
				       json_object_new_double(o->attr->pcidev.linkspeed));
	names = json_object_new_array();
	for (c = o->io_first_child; c; c = c->next_sibling)
		if (c->type == HWLOC_OBJ_OS_DEVICE && c->name)
			json_object_array_add(names, json_object_new_string(c->name));
	json_object_object_add(j, "os_devices", names);
	return j;
}

int pipette_probe_topology(const char *xml, struct json_object **out,
			   struct pipette_err *err)
{
	hwloc_topology_t t;
	hwloc_obj_t o, gpus[256], nics[256];
	struct json_object *root, *arr;
	int ngpu = 0, nnic = 0, i, k;

	if (hwloc_topology_init(&t) < 0)
		return pipette_fail(err, "hwloc_topology_init failed");
	hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (xml && hwloc_topology_set_xml(t, xml) < 0) {
		hwloc_topology_destroy(t);
		return pipette_fail(err, "%s: not a readable hwloc XML file", xml);
	}
	if (hwloc_topology_load(t) < 0) {
		hwloc_topology_destroy(t);
		return pipette_fail(err, "hwloc_topology_load failed%s%s",
				    xml ? " on " : "", xml ? xml : "");
	}
	root = json_object_new_object();
	json_object_object_add(root, "packages", json_object_new_int(
		hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE)));
	json_object_object_add(root, "cores", json_object_new_int(
		hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE)));
	json_object_object_add(root, "pus", json_object_new_int(
		hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU)));
	arr = json_object_new_array();
	for (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, NULL); o;
	     o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o)) {
		struct json_object *n = json_object_new_object();
		char *cpus = NULL;

		json_object_object_add(n, "index", json_object_new_int((int)o->os_index));
		hwloc_bitmap_list_asprintf(&cpus, o->cpuset);
		json_object_object_add(n, "cpus", json_object_new_string(cpus ? cpus : ""));
		free(cpus);
		json_object_object_add(n, "memory_bytes", json_object_new_int64(
			(int64_t)o->attr->numanode.local_memory));
		json_object_array_add(arr, n);
	}
	json_object_object_add(root, "numa", arr);
	for (o = hwloc_get_next_pcidev(t, NULL); o; o = hwloc_get_next_pcidev(t, o)) {
		if (is_gpu(o) && ngpu < 256)
			gpus[ngpu++] = o;
		else if (is_nic(o) && nnic < 256)
			nics[nnic++] = o;
	}
	arr = json_object_new_array();
	for (i = 0; i < ngpu; i++) {
		struct json_object *g = dev_json(t, gpus[i]);
		int best = -1, best_rank = 99, best_br = 0;

		for (k = 0; k < nnic; k++) {
			int br, r = path_rank(path_class(t, gpus[i], nics[k], &br));

			if (r < best_rank || (r == best_rank && br < best_br)) {
				best = k;
				best_rank = r;
				best_br = br;
			}
		}
		if (best >= 0) {
			char buf[32];
			int br;

			pci_name(nics[best], buf, sizeof(buf));
			json_object_object_add(g, "nearest_nic",
					       json_object_new_string(buf));
			json_object_object_add(g, "nic_path", json_object_new_string(
				path_class(t, gpus[i], nics[best], &br)));
		}
		json_object_array_add(arr, g);
	}
	json_object_object_add(root, "gpus", arr);
	arr = json_object_new_array();
	for (k = 0; k < nnic; k++)
		json_object_array_add(arr, dev_json(t, nics[k]));
	json_object_object_add(root, "nics", arr);
	/* GPU x GPU path classes over PCI (what nvidia-smi topo -m shows for
	 * pairs without NVLink). */
	arr = json_object_new_array();
	for (i = 0; i < ngpu; i++) {
		struct json_object *row = json_object_new_array();

		for (k = 0; k < ngpu; k++) {
			int br;

			json_object_array_add(row, json_object_new_string(
				i == k ? "X" : path_class(t, gpus[i], gpus[k], &br)));
		}
		json_object_array_add(arr, row);
	}
	json_object_object_add(root, "gpu_paths", arr);
	hwloc_topology_destroy(t);
	*out = root;
	return 0;
}
