/* Fuzz the original-Pipette JSON importer, pipette_bwcache_import_legacy
 * (bwcache.h).  It reads a path, so the input goes through a temporary
 * file.  The first byte picks gpus_per_node (0..8, 0 and out-of-range
 * values must be rejected cleanly); what imports must serialize and parse
 * back. */
#include <stdint.h>

#include "inputs/bwcache.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pipette_err err = { { 0 } };
	struct pipette_bwcache *bw, *again = NULL;
	const char *path;
	char *text;
	int rc, gpus = 8;

	/* Seeds are plain JSON files, whose first byte is '{' or blank: keep
	 * 8 GPUs for those so the seeds exercise the importer as written. */
	if (size > 0 && data[0] < 0x20 && data[0] != '\n' && data[0] != '\t' &&
	    data[0] != '\r') {
		gpus = data[0] % 10 == 9 ? PIPETTE_BW_MAX_GPUS + 1 : data[0] % 10;
		data++;
		size--;
	}
	path = fuzz_write_file(data, size);
	bw = pipette_bwcache_create();
	if (!bw)
		abort();
	rc = pipette_bwcache_import_legacy(bw, path, gpus, 1767225600, &err);
	fuzz_check_err(rc, &err, "pipette_bwcache_import_legacy");
	if (rc == 0) {
		text = pipette_bwcache_serialize(bw, &err);
		fuzz_require(text != NULL, "serialize after import: %s", err.msg);
		rc = pipette_bwcache_parse(text, strlen(text), "imported", &again, &err);
		fuzz_require(rc == 0, "imported cache does not parse back: %s\n%s", err.msg, text);
		pipette_bwcache_destroy(again);
		free(text);
	}
	pipette_bwcache_destroy(bw);
	return 0;
}
