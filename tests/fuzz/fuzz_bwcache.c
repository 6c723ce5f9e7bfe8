/* Fuzz the bandwidth cache parser, pipette_bwcache_parse (bwcache.h).
 *
 * Contract checked beyond "no crash, no leak": a cache that parses
 * serializes, the serialized text parses again, and serializing that gives
 * the same bytes (the canonical form is a fixed point).  Every query on a
 * parsed cache stays in bounds.  Restating its figures per group
 * (pipette-bw/2, tolerance 0) and back to pipette-bw/1 gives the same
 * bytes as writing it out as pipette-bw/1 directly. */
#include <math.h>
#include <stdint.h>

#include "inputs/bwcache.h"
#include "fuzz_util.h"

static void query_all(const struct pipette_bwcache *bw)
{
	struct pipette_bw_figure f;
	struct pipette_bw_defaults d;
	char msg[256];
	int n = pipette_bwcache_node_count(bw), i, j, g, a, b, rc;

	fuzz_require(n >= 0 && n <= PIPETTE_BW_MAX_NODES, "node count %d", n);
	pipette_bwcache_get_defaults(bw, &d);
	for (i = 0; i < n && i < 16; i++) {
		const char *name = pipette_bwcache_node_name(bw, i);

		fuzz_require(name != NULL, "node %d has no name", i);
		fuzz_require(pipette_bwcache_node_index(bw, name) == i,
			     "node '%s' is not found at its own index %d", name, i);
		for (j = 0; j < n && j < 16; j++) {
			rc = pipette_bwcache_inter(bw, i, j, &f);
			fuzz_require(rc == 0 || rc == 1, "inter(%d,%d) = %d", i, j, rc);
			fuzz_require(rc == 0 || (f.gbps > 0 && f.gbps <= PIPETTE_BW_MAX_GBPS),
				     "inter(%d,%d): %g GB/s accepted", i, j, f.gbps);
		}
		g = pipette_bwcache_node_gpus(bw, i);
		fuzz_require(g >= 0 && g <= PIPETTE_BW_MAX_GPUS, "node %d: %d GPUs", i, g);
		for (a = 0; a < g; a++)
			for (b = 0; b < g; b++) {
				rc = pipette_bwcache_intra(bw, i, a, b, &f);
				fuzz_require(rc == 0 || rc == 1, "intra = %d", rc);
			}
	}
	fuzz_require(pipette_bwcache_inter(bw, -1, 0, &f) == -1, "inter(-1, 0) accepted");
	fuzz_require(pipette_bwcache_inter(bw, n, 0, &f) == -1, "inter(n, 0) accepted");
	fuzz_require(pipette_bwcache_intra(bw, 0, 0, PIPETTE_BW_MAX_GPUS, &f) == -1,
		     "intra(0, 0, MAX_GPUS) accepted");
	/* NVLink domains (pipette-bw/3) */
	g = pipette_bwcache_domain_count(bw);
	fuzz_require(g >= 0 && g <= (n > 0 ? n : 0), "%d domains among %d nodes", g, n);
	for (i = 0, j = 0; i < g; i++) {
		int k = pipette_bwcache_domain_nodes(bw, i);

		fuzz_require(pipette_bwcache_domain_name(bw, i) != NULL, "domain %d unnamed", i);
		fuzz_require(k >= 0 && k <= n, "domain %d: %d nodes", i, k);
		fuzz_require(pipette_bwcache_domain_gpus(bw, i) >= 0, "domain %d: GPUs", i);
		j += k;
	}
	fuzz_require(j <= n, "%d nodes in domains, %d in the cache", j, n);
	for (i = 0; i < n && i < 16; i++) {
		a = pipette_bwcache_node_domain(bw, i);
		fuzz_require(a >= -1 && a < g, "node %d in domain %d of %d", i, a, g);
	}
	fuzz_require(pipette_bwcache_domain_name(bw, g) == NULL, "domain n has a name");
	fuzz_require(pipette_bwcache_domain_measured(bw) >= 0, "domain pairs measured < 0");
	{
		struct pipette_err derr = { { 0 } };

		/* a GB200 rack: 72 GPUs in nodes of 4 */
		rc = pipette_bwcache_check_domains(bw, 4, 72, &derr);
		fuzz_check_err(rc, &derr, "pipette_bwcache_check_domains");
	}
	/* 2026-01-01T00:00:00Z, one week. */
	pipette_bwcache_stale(bw, NULL, 0, 1767225600, 7 * 86400.0, msg, sizeof(msg));
	fuzz_require(memchr(msg, '\0', sizeof(msg)) != NULL, "stale message not terminated");
}

/* Three groups (node i in group i % 3) over a copy of the cache (text,
 * canonical), through the text of pipette-bw/2, and back. */
static void regroup(const char *text)
{
	static const char *const names[] = { "g0", "g1", "g2" };
	struct pipette_err err = { { 0 } };
	struct pipette_bwcache *bw = NULL, *v2 = NULL;
	char *flat, *grouped, *back;
	int *group_of, n, i;

	fuzz_require(pipette_bwcache_parse(text, strlen(text), "canonical", &bw, &err) == 0,
		     "%s", err.msg);
	fuzz_require(pipette_bwcache_ungroup(bw, &err) == 0, "ungroup: %s", err.msg);
	flat = pipette_bwcache_serialize(bw, &err);
	n = pipette_bwcache_node_count(bw);
	group_of = malloc(((size_t)n + 1) * sizeof(int));
	fuzz_require(flat && group_of, "out of memory");
	for (i = 0; i < n; i++)
		group_of[i] = i % 3;
	fuzz_require(pipette_bwcache_set_groups(bw, 3, names, group_of, 0, &err) == 0,
		     "set_groups: %s", err.msg);
	grouped = pipette_bwcache_serialize(bw, &err);
	fuzz_require(grouped != NULL, "serialize of the grouped cache: %s", err.msg);
	fuzz_require(pipette_bwcache_parse(grouped, strlen(grouped), "grouped", &v2, &err) == 0,
		     "the grouped cache does not parse: %s\n%s", err.msg, grouped);
	fuzz_require(pipette_bwcache_ungroup(v2, &err) == 0, "ungroup: %s", err.msg);
	back = pipette_bwcache_serialize(v2, &err);
	fuzz_require(back && !strcmp(flat, back), "grouped and back is another cache:\n%s\n"
		     "---\n%s\n---\n%s", flat, grouped, back ? back : "");
	free(back);
	free(grouped);
	free(flat);
	free(group_of);
	pipette_bwcache_destroy(v2);
	pipette_bwcache_destroy(bw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pipette_err err = { { 0 } };
	struct pipette_bwcache *bw = NULL, *again = NULL;
	char *text, *text2;
	int rc;

	/* The parser takes a length: the buffer is not terminated, so ASan
	 * reports any read past it. */
	rc = pipette_bwcache_parse((const char *)data, size, "fuzz.json", &bw, &err);
	fuzz_check_err(rc, &err, "pipette_bwcache_parse");
	if (rc)
		return 0;
	fuzz_require(bw != NULL, "parse succeeded without a cache");
	query_all(bw);

	text = pipette_bwcache_serialize(bw, &err);
	fuzz_require(text != NULL, "serialize failed on a parsed cache: %s", err.msg);
	rc = pipette_bwcache_parse(text, strlen(text), "serialized", &again, &err);
	fuzz_require(rc == 0, "the serialized cache does not parse: %s\n%s", err.msg, text);
	text2 = pipette_bwcache_serialize(again, &err);
	fuzz_require(text2 != NULL, "serialize failed on a re-parsed cache: %s", err.msg);
	fuzz_require(!strcmp(text, text2), "serialize is not a fixed point:\n%s\n---\n%s",
		     text, text2);
	regroup(text);
	free(text2);
	free(text);
	pipette_bwcache_destroy(again);
	pipette_bwcache_destroy(bw);
	return 0;
}
