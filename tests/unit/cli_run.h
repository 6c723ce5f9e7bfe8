/* Shared by the unit tests that drive the built `pipette` (PIPETTE_BIN from
 * tests/local.mk): run it, capture stdout and stderr, return its status. */
#ifndef PIPETTE_TEST_CLI_RUN_H
#define PIPETTE_TEST_CLI_RUN_H

#include <check.h>
#include <stdio.h>
#include <sys/wait.h>

/* `pipette ARGS` into out[len] (NUL-terminated); the exit status, or -1
 * when it did not exit normally. */
static inline int cli_run(const char *args, char *out, size_t len)
{
	char cmd[4096];
	size_t n = 0, k;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", PIPETTE_BIN, args);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (n + 1 < len && (k = fread(out + n, 1, len - 1 - n, p)) > 0)
		n += k;
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
