/* pipette fuzzing: helpers shared by the libFuzzer harnesses.
 *
 * Test code, not part of libpipette: the harnesses are built by
 * tests/fuzz/run.sh with clang -fsanitize=fuzzer,address,undefined.  A
 * harness may only abort (through a sanitizer or fuzz_require) when a
 * parser breaks its contract: every input either parses or fails with
 * -1 and a message; nothing crashes, leaks or reads out of bounds. */
#ifndef PIPETTE_FUZZ_UTIL_H
#define PIPETTE_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inputs/error.h"

/* Abort with a message: libFuzzer records the input as a crash. */
#define fuzz_require(cond, ...)                                              \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz: %s:%d: %s: ", __FILE__,       \
				__LINE__, #cond);                            \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			abort();                                             \
		}                                                            \
	} while (0)

/* A failed call must leave a terminated, non-empty message. */
static inline void fuzz_check_err(int rc, const struct pipette_err *err,
				  const char *what)
{
	fuzz_require(rc == 0 || rc == -1, "%s returned %d", what, rc);
	if (rc == 0)
		return;
	fuzz_require(memchr(err->msg, '\0', sizeof(err->msg)) != NULL,
		     "%s: error message not terminated", what);
	fuzz_require(err->msg[0] != '\0', "%s failed without a message", what);
}

/* A NUL-terminated heap copy of the input (the exact size, so ASan sees
 * any read past the terminator). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

static char fuzz_path[4096];

static inline void fuzz_unlink_file(void)
{
	if (fuzz_path[0])
		unlink(fuzz_path);
}

/* The file-based parsers read a path: write the input to a per-process
 * temporary file (created once, rewritten for every input, removed at
 * exit). */
static inline const char *fuzz_write_file(const uint8_t *data, size_t size)
{
	char *path = fuzz_path;
	FILE *f;

	if (!path[0]) {
		const char *dir = getenv("TMPDIR");
		int fd;

		snprintf(path, sizeof(fuzz_path), "%s/pipette-fuzz-XXXXXX",
			 dir && *dir && strlen(dir) < 4000 ? dir : "/tmp");
		fd = mkstemp(path);
		if (fd < 0) {
			perror("fuzz: mkstemp");
			abort();
		}
		close(fd);
		atexit(fuzz_unlink_file);
	}
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f)) {
		perror("fuzz: writing the input file");
		abort();
	}
	return path;
}

#endif
