/* Shared by the unit tests that drive the built `pipette` (PIPETTE_BIN from
 * tests/local.mk): run it, capture stdout and stderr, return its status. */
#ifndef PIPETTE_TEST_CLI_RUN_H
#define PIPETTE_TEST_CLI_RUN_H

#include <check.h>
#include <stdio.h>
#include <sys/wait.h>

/* `pipette ARGS` into out[len] (NUL-terminated), killed after `seconds`
 * (0: no limit) by coreutils' timeout(1), which then exits 124: a command
 * that would hang fails the test instead.  The exit status, or -1 when it
 * did not exit normally. */
static inline int cli_run_within(unsigned seconds, const char *args, char *out, size_t len)
{
	char cmd[4096], limit[32] = "";
	size_t n = 0, k;
	FILE *p;
	int st;

	if (seconds)
		snprintf(limit, sizeof(limit), "timeout -s KILL %u ", seconds);
	snprintf(cmd, sizeof(cmd), "%s%s %s 2>&1", limit, PIPETTE_BIN, args);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (n + 1 < len && (k = fread(out + n, 1, len - 1 - n, p)) > 0)
		n += k;
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `pipette ARGS`, no time limit. */
static inline int cli_run(const char *args, char *out, size_t len)
{
	return cli_run_within(0, args, out, len);
}

#endif
