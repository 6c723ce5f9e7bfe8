/* Fuzz Slurm's topology.conf reader, pipette_topology_parse (topology.h),
 * with node lists expanded by Slurm's own hostlist functions, as
 * `pipette plan --topology` and the plugin's topology= expand them.
 *
 * fuzz-libs: -lslurm
 *
 * Contract checked beyond "no crash, no leak": every input parses or fails
 * with -1 and a message naming the source; a parsed file has blocks of at
 * least one node each, named, none larger than the node limit, every
 * query stays in bounds, and parsing the same bytes again gives the same
 * blocks. */
#include <stdint.h>

#include "cli/hostlist.c"
#include "inputs/limits.h"
#include "inputs/topology.h"
#include "fuzz_util.h"

static void check(const struct pipette_topology *t, const struct pipette_topology *again)
{
	int n = pipette_topology_block_count(t), b, total = 0;

	fuzz_require(n >= 0 && n == pipette_topology_block_count(again), "%d blocks", n);
	fuzz_require(pipette_topology_base_size(t) >= 0 &&
		     pipette_topology_base_size(t) == pipette_topology_base_size(again),
		     "base size %d", pipette_topology_base_size(t));
	for (b = 0; b < n; b++) {
		const char *name = pipette_topology_block_name(t, b);
		int k = pipette_topology_block_nodes(t, b);

		fuzz_require(name && *name, "block %d has no name", b);
		fuzz_require(!strcmp(name, pipette_topology_block_name(again, b)),
			     "block %d: '%s' the second time", b, name);
		fuzz_require(k >= 1 && k <= PIPETTE_MAX_NODES &&
			     k == pipette_topology_block_nodes(again, b), "block %d: %d nodes", b, k);
		total += k;
	}
	fuzz_require(total <= PIPETTE_MAX_NODES * (n ? n : 1), "%d nodes in all", total);
	fuzz_require(pipette_topology_block_name(t, n) == NULL, "block n has a name");
	fuzz_require(pipette_topology_block_nodes(t, -1) == 0, "block -1 has nodes");
	fuzz_require(pipette_topology_block_of(t, "") == -1, "the empty name is in a block");
	fuzz_require(!strcmp(pipette_topology_source(t), "fuzz"), "source '%s'",
		     pipette_topology_source(t));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pipette_topology *t = NULL, *again = NULL;
	struct pipette_err err = { { 0 } };
	int rc = pipette_topology_parse((const char *)data, size, "fuzz",
					pipette_hostlist_expand, &t, &err);

	fuzz_check_err(rc, &err, "pipette_topology_parse");
	if (rc == 0) {
		fuzz_require(t != NULL, "parsed without a result");
		rc = pipette_topology_parse((const char *)data, size, "fuzz",
					    pipette_hostlist_expand, &again, &err);
		fuzz_require(rc == 0 && again, "the same bytes failed the second time: %s",
			     err.msg);
		check(t, again);
	} else {
		fuzz_require(t == NULL, "failed with a result");
		fuzz_require(strstr(err.msg, "fuzz") != NULL, "the error names no source: %s",
			     err.msg);
	}
	pipette_topology_destroy(t);
	pipette_topology_destroy(again);
	return 0;
}
