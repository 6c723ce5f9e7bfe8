#include "autoconf.h"

#include "fabric.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_NVML_FABRIC
#include <dlfcn.h>
#include <nvml.h>
#endif

#include "inputs/bwcache.h"

/* "<8>-<4>-<4>-<4>-<12>:<clique>" */
static void domain_name(const struct pipette_probe_fabric *g, char *name)
{
	static const int dash[] = { 4, 6, 8, 10 };
	size_t len = 0;
	int i, d = 0;

	for (i = 0; i < PIPETTE_PROBE_FABRIC_UUID_LEN; i++) {
		if (d < 4 && i == dash[d]) {
			name[len++] = '-';
			d++;
		}
		len += (size_t)snprintf(name + len, 3, "%02x", g->cluster_uuid[i]);
	}
	snprintf(name + len, PIPETTE_PROBE_DOMAIN_MAX - len, ":%lu", g->clique);
}

static const char *state_name(int state)
{
	switch (state) {
	case PIPETTE_FABRIC_NOT_STARTED:
		return "not started";
	case PIPETTE_FABRIC_IN_PROGRESS:
		return "in progress";
	default:
		return "in an unknown state";
	}
}

int pipette_probe_fabric_domain(const struct pipette_probe_fabric *g, int n, char *name,
				struct pipette_err *why)
{
	static const unsigned char zero[PIPETTE_PROBE_FABRIC_UUID_LEN];
	int i, first = -1, unsupported = 0;

	name[0] = '\0';
	for (i = 0; i < n; i++) {
		if (g[i].state == PIPETTE_FABRIC_NOT_SUPPORTED) {
			unsupported++;
			continue;
		}
		if (g[i].state != PIPETTE_FABRIC_COMPLETED)
			return pipette_fail(why, "GPU %d: its NVLink fabric registration is %s", i,
					    state_name(g[i].state));
		if (!g[i].status_ok)
			return pipette_fail(why, "GPU %d: its NVLink fabric registration failed",
					    i);
		if (!memcmp(g[i].cluster_uuid, zero, sizeof(zero)))
			return pipette_fail(why, "GPU %d: NVLink fabric cluster UUID is all zero",
					    i);
		if (first < 0) {
			first = i;
			continue;
		}
		if (memcmp(g[i].cluster_uuid, g[first].cluster_uuid, sizeof(zero)) ||
		    g[i].clique != g[first].clique) {
			char a[PIPETTE_PROBE_DOMAIN_MAX], b[PIPETTE_PROBE_DOMAIN_MAX];

			domain_name(&g[first], a);
			domain_name(&g[i], b);
			return pipette_fail(why, "GPU %d is in NVLink domain %s, GPU %d in %s: "
					    "one node's GPUs must share one", first, a, i, b);
		}
	}
	if (first >= 0 && unsupported)
		return pipette_fail(why, "GPU %d reports NVLink fabric info, %d other GPUs "
				    "none", first, unsupported);
	if (first < 0) {
		pipette_fail(why, n ? "its GPUs are in no multi-node NVLink domain"
				    : "no GPU");
		return 0;
	}
	domain_name(&g[first], name);
	return 1;
}

#ifdef HAVE_NVML_FABRIC
/* The NVML entry points, from the driver's library at run time. */
struct nvml {
	void *lib;
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	nvmlReturn_t (*count)(unsigned int *);
	nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
	const char *(*error)(nvmlReturn_t);
#if HAVE_DECL_NVMLDEVICEGETGPUFABRICINFOV
	nvmlReturn_t (*fabric_v)(nvmlDevice_t, nvmlGpuFabricInfoV_t *);
#endif
	nvmlReturn_t (*fabric)(nvmlDevice_t, nvmlGpuFabricInfo_t *);
};

static int nvml_open(struct nvml *m, struct pipette_err *err)
{
	memset(m, 0, sizeof(*m));
	m->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!m->lib)
		return pipette_fail(err, "NVML: %s", dlerror());
	*(void **)&m->init = dlsym(m->lib, "nvmlInit_v2");
	*(void **)&m->shutdown = dlsym(m->lib, "nvmlShutdown");
	*(void **)&m->count = dlsym(m->lib, "nvmlDeviceGetCount_v2");
	*(void **)&m->handle = dlsym(m->lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&m->error = dlsym(m->lib, "nvmlErrorString");
#if HAVE_DECL_NVMLDEVICEGETGPUFABRICINFOV
	*(void **)&m->fabric_v = dlsym(m->lib, "nvmlDeviceGetGpuFabricInfoV");
#endif
	*(void **)&m->fabric = dlsym(m->lib, "nvmlDeviceGetGpuFabricInfo");
	if (!m->init || !m->shutdown || !m->count || !m->handle || !m->error) {
		dlclose(m->lib);
		return pipette_fail(err, "NVML: libnvidia-ml.so.1 lacks nvmlInit_v2 and the "
				    "device calls");
	}
	return 0;
}

/* GPU i's fabric info; the versioned call where the driver has it. */
static nvmlReturn_t nvml_fabric(const struct nvml *m, nvmlDevice_t dev,
				struct pipette_probe_fabric *out)
{
	nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;

#if HAVE_DECL_NVMLDEVICEGETGPUFABRICINFOV
	if (m->fabric_v) {
		nvmlGpuFabricInfoV_t v;

		memset(&v, 0, sizeof(v));
		v.version = nvmlGpuFabricInfo_v2;
		if ((rc = m->fabric_v(dev, &v)) == NVML_SUCCESS) {
			out->state = v.state;
			out->status_ok = v.status == NVML_SUCCESS;
			memcpy(out->cluster_uuid, v.clusterUuid, sizeof(out->cluster_uuid));
			out->clique = v.cliqueId;
		}
		/* a driver older than the header refuses v2's version:
		 * the unversioned call below, where it has one */
		if (rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH || !m->fabric)
			return rc;
	}
#endif
	if (m->fabric) {
		nvmlGpuFabricInfo_t f;

		memset(&f, 0, sizeof(f));
		if ((rc = m->fabric(dev, &f)) == NVML_SUCCESS) {
			out->state = f.state;
			out->status_ok = f.status == NVML_SUCCESS;
			memcpy(out->cluster_uuid, f.clusterUuid, sizeof(out->cluster_uuid));
			out->clique = f.cliqueId;
		}
	}
	return rc;
}

int pipette_probe_fabric_read(struct pipette_probe_fabric **out, int *n,
			      struct pipette_err *err)
{
	struct pipette_probe_fabric *g = NULL;
	struct nvml m;
	unsigned int count = 0, i;
	nvmlReturn_t rc;
	int rv = -1;

	*out = NULL;
	*n = 0;
	if (nvml_open(&m, err))
		return -1;
	if ((rc = m.init()) != NVML_SUCCESS) {
		pipette_fail(err, "NVML: nvmlInit: %s", m.error(rc));
		dlclose(m.lib);
		return -1;
	}
	if ((rc = m.count(&count)) != NVML_SUCCESS) {
		pipette_fail(err, "NVML: nvmlDeviceGetCount: %s", m.error(rc));
		goto out;
	}
	if (count && !(g = calloc(count, sizeof(*g)))) {
		pipette_fail(err, "out of memory");
		goto out;
	}
	for (i = 0; i < count; i++) {
		nvmlDevice_t dev;

		if ((rc = m.handle(i, &dev)) != NVML_SUCCESS) {
			pipette_fail(err, "NVML: GPU %u: %s", i, m.error(rc));
			goto out;
		}
		rc = nvml_fabric(&m, dev, &g[i]);
		if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
			g[i].state = PIPETTE_FABRIC_NOT_SUPPORTED;
		} else if (rc != NVML_SUCCESS) {
			pipette_fail(err, "NVML: GPU %u: fabric info: %s", i, m.error(rc));
			goto out;
		}
	}
	*out = g;
	*n = (int)count;
	g = NULL;
	rv = 0;
out:
	free(g);
	m.shutdown();
	dlclose(m.lib);
	return rv;
}
#else
int pipette_probe_fabric_read(struct pipette_probe_fabric **out, int *n,
			      struct pipette_err *err)
{
	*out = NULL;
	*n = 0;
	return pipette_fail(err, "this pipette-probe was built without NVML's fabric info "
			    "(nvml.h with nvmlDeviceGetGpuFabricInfo)");
}
#endif

int pipette_probe_node_domain(pipette_probe_getenv_fn get, void *ctx, char *name,
			      struct pipette_err *why)
{
	const char *env = get(ctx, "PIPETTE_PROBE_DOMAIN");
	struct pipette_probe_fabric *g;
	struct pipette_bwcache *bw;
	int n, rc;

	name[0] = '\0';
	why->msg[0] = '\0';
	if (env && *env) {
		if (!strcmp(env, "none"))
			return 0;
		if (strlen(env) >= PIPETTE_PROBE_DOMAIN_MAX)
			return pipette_fail(why, "PIPETTE_PROBE_DOMAIN: longer than %d characters",
					    PIPETTE_PROBE_DOMAIN_MAX - 1);
		/* the cache's own check of a domain name */
		if (!(bw = pipette_bwcache_create()))
			return pipette_fail(why, "out of memory");
		rc = pipette_bwcache_set_domain(bw, "probe", env, 0, 0, why);
		pipette_bwcache_destroy(bw);
		if (rc)
			return pipette_fail_prefix(why, "PIPETTE_PROBE_DOMAIN: ");
		memcpy(name, env, strlen(env) + 1);
		return 0;
	}
	if (pipette_probe_fabric_read(&g, &n, why))
		return 0;	/* no NVML here: no domain, why says so */
	rc = pipette_probe_fabric_domain(g, n, name, why);
	free(g);
	return rc < 0 ? -1 : 0;
}
