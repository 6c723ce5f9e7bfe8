#include "results.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>


static size_t max_size(const struct pipette_probe_result *r)
{
	size_t m = 0;
	int s;

	for (s = 0; s < r->nsizes; s++)
		if (r->sizes[s] > m)
			m = r->sizes[s];
	return m;
}

int pipette_probe_result_to_cache(const struct pipette_probe_result *r,
				  const char *generator,
				  struct pipette_bwcache **out,
				  struct pipette_err *err)
{
	struct pipette_bwcache *bw = pipette_bwcache_create();
	struct pipette_bw_prov prov = { r->tool, r->metric, (double)max_size(r),
					r->when };
	int i, j, n = r->n;

	*out = NULL;
	if (!bw)
		return pipette_fail(err, "out of memory");
	pipette_bwcache_set_generated(bw, r->when);
	if (generator && pipette_bwcache_set_generator(bw, generator, err))
		goto fail;
	for (i = 0; i < n; i++)
		if (!r->left_out[i] && pipette_bwcache_add_node(bw, r->names[i], err) < 0)
			goto fail;
	/* Each node's NVLink domain as its task reported it (pipette-bw/3);
	 * the domain's size is NVML's to know, not the probe's: not stated. */
	for (i = 0; i < n; i++)
		if (!r->left_out[i] && r->domain[i][0] &&
		    pipette_bwcache_set_domain(bw, r->names[i], r->domain[i], 0, 1, err)) {
			pipette_fail_prefix(err, "node %s: ", r->names[i]);
			goto fail;
		}
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			size_t c = (size_t)i * n + j;

			if (i == j || isnan(r->gbps[c]))
				continue;
			if (pipette_bwcache_set_inter(bw, r->names[i], r->names[j],
						      r->gbps[c], r->lat_us[c],
						      &prov, err))
				goto fail;
		}
	*out = bw;
	return 0;
fail:
	pipette_bwcache_destroy(bw);
	return -1;
}

int pipette_probe_local_to_cache(const struct pipette_probe_local *l,
				 const char *node, time_t when,
				 const char *generator,
				 struct pipette_bwcache **out,
				 struct pipette_err *err)
{
	struct pipette_bwcache *bw = pipette_bwcache_create();
	struct pipette_bw_prov pn = { "pipette-probe nccl send/recv", "algbw",
				      (double)l->p2p_bytes, when };
	struct pipette_bw_prov pc = { "pipette-probe cudaMemcpyPeerAsync", "algbw",
				      (double)l->p2p_bytes, when };
	int i, j, n = l->ngpu;

	*out = NULL;
	if (!bw)
		return pipette_fail(err, "out of memory");
	pipette_bwcache_set_generated(bw, when);
	if ((generator && pipette_bwcache_set_generator(bw, generator, err)) ||
	    pipette_bwcache_add_node(bw, node, err) < 0)
		goto fail;
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			size_t c = (size_t)i * n + j;
			int nccl = !isnan(l->nccl_gbps[c]);

			if (i == j || (!nccl && isnan(l->p2p_gbps[c])))
				continue;
			if (pipette_bwcache_set_intra(bw, node, i, j,
						      nccl ? l->nccl_gbps[c]
							   : l->p2p_gbps[c],
						      NAN, nccl ? &pn : &pc, err))
				goto fail;
		}
	*out = bw;
	return 0;
fail:
	pipette_bwcache_destroy(bw);
	return -1;
}

static struct json_object *num(double v)
{
	return isnan(v) ? NULL : json_object_new_double(v);
}

static struct json_object *matrix(const double *m, int n)
{
	struct json_object *a = json_object_new_array();
	int i, j;

	for (i = 0; i < n; i++) {
		struct json_object *row = json_object_new_array();

		for (j = 0; j < n; j++)
			json_object_array_add(row, num(m[(size_t)i * n + j]));
		json_object_array_add(a, row);
	}
	return a;
}

static struct json_object *imatrix(const int *m, int n)
{
	struct json_object *a = json_object_new_array();
	int i, j;

	for (i = 0; i < n; i++) {
		struct json_object *row = json_object_new_array();

		for (j = 0; j < n; j++)
			json_object_array_add(row, i == j ? NULL :
					      json_object_new_int(m[(size_t)i * n + j]));
		json_object_array_add(a, row);
	}
	return a;
}

static void add_time(struct json_object *o, time_t when)
{
	char buf[32];

	json_object_object_add(o, "when", json_object_new_string(
		pipette_bw_format_time(when, buf, sizeof(buf))));
}

struct json_object *pipette_probe_result_json(const struct pipette_probe_result *r)
{
	struct json_object *o = json_object_new_object(), *a, *t;
	int i, j, s, n = r->n;

	json_object_object_add(o, "schema", json_object_new_string("pipette-probe/1"));
	json_object_object_add(o, "kind", json_object_new_string("inter"));
	json_object_object_add(o, "tool", json_object_new_string(r->tool));
	json_object_object_add(o, "metric", json_object_new_string(r->metric));
	add_time(o, r->when);
	a = json_object_new_array();
	for (i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_string(r->names[i]));
	json_object_object_add(o, "order", a);
	a = json_object_new_array();
	for (s = 0; s < r->nsizes; s++)
		json_object_array_add(a, json_object_new_int64((int64_t)r->sizes[s]));
	json_object_object_add(o, "sizes", a);
	json_object_object_add(o, "gbps", matrix(r->gbps, n));
	json_object_object_add(o, "lat_us", matrix(r->lat_us, n));
	/* median_s[i][j] = [t(size_0), t(size_1), ...] or null */
	a = json_object_new_array();
	for (i = 0; i < n; i++) {
		struct json_object *row = json_object_new_array();

		for (j = 0; j < n; j++) {
			const double *m = &r->median_s[((size_t)i * n + j) * r->nsizes];

			if (isnan(m[0])) {
				json_object_array_add(row, NULL);
				continue;
			}
			t = json_object_new_array();
			for (s = 0; s < r->nsizes; s++)
				json_object_array_add(t, num(m[s]));
			json_object_array_add(row, t);
		}
		json_object_array_add(a, row);
	}
	json_object_object_add(o, "median_s", a);
	/* domain[i]: node i's NVLink domain or null; nvlink[i][j]: the pair
	 * i -> j lies inside one domain (measured over NVLink) */
	a = json_object_new_array();
	t = json_object_new_array();
	for (i = 0; i < n; i++) {
		struct json_object *row = json_object_new_array();

		json_object_array_add(a, r->domain[i][0] ? json_object_new_string(r->domain[i])
							 : NULL);
		for (j = 0; j < n; j++)
			json_object_array_add(row, json_object_new_boolean(
						   pipette_probe_same_domain(r, i, j)));
		json_object_array_add(t, row);
	}
	json_object_object_add(o, "domain", a);
	json_object_object_add(o, "nvlink", t);
	a = json_object_new_array();
	for (i = 0; i < n; i++)
		if (r->left_out[i]) {
			t = json_object_new_object();
			json_object_object_add(t, "node",
					       json_object_new_string(r->names[i]));
			json_object_object_add(t, "reason",
					       json_object_new_string(r->reason[i]));
			json_object_array_add(a, t);
		}
	json_object_object_add(o, "left_out", a);
	json_object_object_add(o, "pair_failures", json_object_new_int(r->link_failures));
	return o;
}

struct json_object *pipette_probe_local_json(const struct pipette_probe_local *l,
					     const char *node)
{
	struct json_object *o = json_object_new_object(), *a, *g;
	int i, n = l->ngpu;

	json_object_object_add(o, "schema", json_object_new_string("pipette-probe/1"));
	json_object_object_add(o, "kind", json_object_new_string("local"));
	json_object_object_add(o, "node", json_object_new_string(node));
	json_object_object_add(o, "reps", json_object_new_int(l->reps));
	a = json_object_new_array();
	for (i = 0; i < n; i++) {
		g = json_object_new_object();
		json_object_object_add(g, "index", json_object_new_int(i));
		json_object_object_add(g, "name", json_object_new_string(l->gpu_name[i]));
		json_object_object_add(g, "pci", json_object_new_string(l->gpu_pci[i]));
		json_object_object_add(g, "hbm_gbps", num(l->hbm_gbps[i]));
		json_object_array_add(a, g);
	}
	json_object_object_add(o, "gpus", a);
	g = json_object_new_object();
	json_object_object_add(g, "bytes", json_object_new_int64((int64_t)l->p2p_bytes));
	json_object_object_add(g, "memcpy_peer_gbps", matrix(l->p2p_gbps, n));
	json_object_object_add(g, "nccl_sendrecv_gbps", matrix(l->nccl_gbps, n));
	json_object_object_add(g, "access", imatrix(l->p2p_access, n));
	json_object_object_add(g, "performance_rank", imatrix(l->p2p_rank, n));
	json_object_object_add(g, "native_atomic", imatrix(l->p2p_atomic, n));
	json_object_object_add(o, "p2p", g);
	g = json_object_new_object();
	json_object_object_add(g, "dtype", json_object_new_string("bf16, fp32 accumulate"));
	a = json_object_new_array();
	for (i = 0; i < l->ngemm; i++) {
		struct json_object *s = json_object_new_object();

		json_object_object_add(s, "what", json_object_new_string(l->gemm[i].what));
		json_object_object_add(s, "m", json_object_new_int(l->gemm[i].m));
		json_object_object_add(s, "n", json_object_new_int(l->gemm[i].n));
		json_object_object_add(s, "k", json_object_new_int(l->gemm[i].k));
		json_object_object_add(s, "tflops", num(l->gemm[i].tflops));
		json_object_array_add(a, s);
	}
	json_object_object_add(g, "shapes", a);
	json_object_object_add(g, "max_tflops", num(l->gemm_max_tflops));
	json_object_object_add(g, "half_gflop", num(l->gemm_half_gflop));
	json_object_object_add(o, "gemm", g);
	json_object_object_add(o, "hbm_bytes", json_object_new_int64((int64_t)l->hbm_bytes));
	return o;
}

int pipette_probe_write_json(struct json_object *j, const char *path,
			     struct pipette_err *err)
{
	const char *s = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY |
						       JSON_C_TO_STRING_NOSLASHESCAPE);
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;

	if (!f)
		return pipette_fail(err, "%s: %s", path, strerror(errno));
	fprintf(f, "%s\n", s);
	if (f != stdout) {
		if (fclose(f))
			return pipette_fail(err, "%s: %s", path, strerror(errno));
	} else {
		fflush(f);
	}
	return 0;
}
