/* pipette: the one reader of input files (model configs, bandwidth caches,
 * calibration reports, nccl-tests output, ...).
 *
 * A path named on a command line or in a site configuration may be
 * anything: a FIFO nobody writes to, a terminal, /dev/zero, a directory,
 * a file that keeps growing.  The reader never blocks on any of them and
 * never holds more than the caller's limit: it opens without blocking,
 * refuses what is not a regular file before reading a byte, and stops
 * reading at the limit even when the file grows under it.  It also hands
 * back the SHA-256 of the bytes it read, so that a result can say exactly
 * which input it was computed from. */
#ifndef PIPETTE_READFILE_H
#define PIPETTE_READFILE_H

#include <stddef.h>
#include <sys/types.h>

#include "inputs/error.h"

#define PIPETTE_SHA256_LEN 32

struct pipette_file {
	char *data;		/* NUL-terminated copy of the content; caller frees via pipette_file_free */
	size_t len;
	unsigned char sha256[PIPETTE_SHA256_LEN];	/* of the bytes read */
};

/* Read a regular file of at most max bytes.  `what` names the input in
 * errors ("--bandwidth", "model config"; NULL: the path alone).  Errors
 * read "WHAT: PATH: REASON", the reason one of: "is a FIFO, not a regular
 * file" (or a character device, directory, socket, block device), "N bytes
 * exceed the limit of MAX bytes", "cannot open: STRERROR", "read error:
 * STRERROR".  Never blocks on a FIFO or device: it opens with
 * O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC, checks the type with fstat before
 * any read, and clears O_NONBLOCK only for a regular file.  The size bound
 * holds while reading too (the file may grow).  On error *f is empty
 * (data NULL) and needs no free. */
int pipette_read_file(const char *path, const char *what, size_t max,
		      struct pipette_file *f, struct pipette_err *err);
/* The same, without the SHA-256 (f->sha256 left zero), for a caller that
 * only reads the content: hashing is a tenth of loading a 4096-node
 * bandwidth cache (tests/bench/bench_cache.c). */
int pipette_read_file_unhashed(const char *path, const char *what, size_t max,
			       struct pipette_file *f, struct pipette_err *err);
void pipette_file_free(struct pipette_file *f);
/* Write data[len] to `path` whole or not at all: a temporary file beside
 * it (".BASENAME.tmp-XXXXXX", mode `mode`), flushed to disk, then linked
 * to `path` (replace = 0: returns 1, "exists", when path does; never
 * follows a symbolic link there) or renamed over it (replace = 1).  A
 * writer killed before its rename leaves its temporary file; each write
 * first removes those of the same target that are regular files of the
 * caller's, older than an hour (a writer at work is younger).  Errors
 * (-1): "WHAT: PATH: REASON". */
int pipette_write_file(const char *path, const char *what, const void *data, size_t len,
		       unsigned mode, int replace, struct pipette_err *err);
/* How many seconds a file named `name` must be untouched before
 * pipette_sweep removes it; negative: never. */
typedef long (*pipette_sweep_age_fn)(const char *name, void *ctx);
/* Remove the regular files (never a link) of directory dfd that age()
 * names and that are older than it says; with mine, only the caller's
 * own.  Best effort: the files of killed writers, of steps long over. */
void pipette_sweep(int dfd, int mine, pipette_sweep_age_fn age, void *ctx);
/* Write all of data[len] to fd, again after a short write or EINTR: 0, or
 * -1 with errno set. */
int pipette_write_all(int fd, const void *data, size_t len);
/* What a file of mode m is, for messages: "a FIFO", "a directory", "a
 * symbolic link", "a regular file", ... */
const char *pipette_file_kind(mode_t m);

/* The same checks as pipette_read_file up to the first read (it opens,
 * does not block, refuses what is not a regular file) without reading:
 * for a caller that wants an input named by its option before the work
 * that reads it starts.  The reader checks again; this is no substitute. */
int pipette_check_file(const char *path, const char *what, struct pipette_err *err);

/* 64 lowercase hex chars + NUL */
void pipette_sha256_hex(const unsigned char d[PIPETTE_SHA256_LEN],
			char out[2 * PIPETTE_SHA256_LEN + 1]);
/* SHA-256 of a memory buffer (for digests of other inputs) */
void pipette_sha256(const void *data, size_t len, unsigned char out[PIPETTE_SHA256_LEN]);
/* The digest of Nettle's running SHA-256 (its signature changed in Nettle
 * 4.0), for a digest taken piece by piece. */
struct sha256_ctx;
void pipette_sha256_digest(struct sha256_ctx *ctx, unsigned char out[PIPETTE_SHA256_LEN]);

#endif
