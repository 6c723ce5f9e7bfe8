/* Fuzz the nccl-tests text importer, pipette_bwcache_import_nccl
 * (bwcache.h).  It reads a path, so the input goes through a temporary
 * file.  Each input is imported twice: with the node pair from the
 * "# Rank" lines and the largest message size, and with an explicit pair
 * and a 1 MiB row; what imports must serialize and parse back. */
#include <stdint.h>

#include "inputs/bwcache.h"
#include "fuzz_util.h"

static void import_once(const char *path, const struct pipette_nccl_import *opt)
{
	struct pipette_err err = { { 0 } };
	struct pipette_bwcache *bw = pipette_bwcache_create(), *again = NULL;
	char *text;
	int rc;

	if (!bw)
		abort();
	rc = pipette_bwcache_import_nccl(bw, path, opt, &err);
	fuzz_check_err(rc, &err, "pipette_bwcache_import_nccl");
	if (rc == 0) {
		text = pipette_bwcache_serialize(bw, &err);
		fuzz_require(text != NULL, "serialize after import: %s", err.msg);
		rc = pipette_bwcache_parse(text, strlen(text), "imported", &again, &err);
		fuzz_require(rc == 0, "imported cache does not parse back: %s\n%s", err.msg, text);
		pipette_bwcache_destroy(again);
		free(text);
	}
	pipette_bwcache_destroy(bw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_write_file(data, size);
	struct pipette_nccl_import from_ranks = { .when = (time_t)-1 };
	struct pipette_nccl_import pair = {
		.pair_a = "node1", .pair_b = "node2", .bytes = 1048576,
		.tool = "fuzz", .when = 1767225600,	/* 2026-01-01T00:00:00Z */
	};

	import_once(path, &from_ranks);
	import_once(path, &pair);
	return 0;
}
