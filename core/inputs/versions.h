/* pipette: the versions a replaced input keeps for the steps that pinned it.
 *
 * srun pins the content of the site's bandwidth cache and calibration
 * (plugin/digest.c: the first PIPETTE_VERSION_HEX hex digits of its
 * SHA-256), and every node of the step must plan from that content.  When
 * the file is replaced between srun's read and a node's, the node would
 * read other bytes and fail the step.  So pipette's writers of those files
 * (`pipette bandwidth merge` and every other writer of a cache,
 * `pipette-probe --out`, `pipette calibrate --out`) keep, when they replace
 * PATH, the content it held and the content it gets as
 *
 *     PATH.versions/HASH     HASH = PIPETTE_VERSION_HEX hex digits of the
 *                            SHA-256 of the content, the form of srun's pin
 *
 * and a node whose PATH holds other content than the pin reads the pinned
 * version instead (plugin/step.c).  PATH itself is replaced as before (a
 * temporary file, then a rename).  A version's modification time is the
 * last time it was PATH's content: each replacement sets it on the two it
 * keeps and removes the versions older than PIPETTE_VERSIONS_GRACE_S, the
 * time a launched step has to read what srun pinned.
 *
 * A version is read only when its directory and itself are owned by PATH's
 * owner (or root), writable by their owner alone and not symbolic links,
 * and the planner checks its content against the pin (plan.c): no one but
 * the file's owner can plant one. */
#ifndef PIPETTE_VERSIONS_H
#define PIPETTE_VERSIONS_H

#include <stddef.h>

#include "inputs/error.h"

#define PIPETTE_VERSIONS_SUFFIX ".versions"
/* The length of srun's pin of a file (PIPETTE_HASH_HEX, plan.h). */
#define PIPETTE_VERSION_HEX 16
/* How long a replaced version stays: a step reads its inputs within
 * seconds of srun's pin (the planner starts in user_init, right after the
 * launch), and within plan_timeout (60 s by default, plugin/args.c) at
 * the latest; ten minutes covers a launch delayed by a slow slurmctld or
 * a file system stalled for minutes. */
#define PIPETTE_VERSIONS_GRACE_S 600

/* Before PATH is replaced by data[len]: when PATH exists (a regular file
 * of at most max bytes), keep its content and data as versions with mode
 * `mode`, set their times to now and remove the versions older than the
 * grace period.  Nothing when PATH does not exist yet (no step can have
 * pinned it).  PATH.versions is made (0755) when missing; one that is not
 * a directory of the caller's, writable by it alone, is refused.  -1:
 * "WHAT: PATH.versions: REASON" in err. */
int pipette_versions_keep(const char *path, const char *what, const void *data, size_t len,
			  unsigned mode, size_t max, struct pipette_err *err);
/* pipette_write_file(path, what, data, len, mode, replace = 1) after
 * pipette_versions_keep. */
int pipette_versions_write_file(const char *path, const char *what, const void *data,
				size_t len, unsigned mode, size_t max, struct pipette_err *err);
/* The kept version of PATH whose name is hex (PIPETTE_VERSION_HEX lowercase
 * hex digits): 1 and its path in out; 0 when there is none; -1 when there is
 * one but it is refused (another owner than PATH's or root, writable by
 * others, a symbolic link, not a regular file): err names it and why. */
int pipette_versions_find(const char *path, const char *hex, char *out, size_t len,
			  struct pipette_err *err);

#endif
