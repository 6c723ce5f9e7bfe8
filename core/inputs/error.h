/* pipette: errors are values.
 *
 * Every fallible call takes a `struct pipette_err *` (may be NULL) and
 * returns 0 on success or -1 on failure, with a message that names the
 * input and the field.  The caller decides how to report it. */
#ifndef PIPETTE_ERROR_H
#define PIPETTE_ERROR_H

#include <stddef.h>

#define PIPETTE_ERR_MAX 512

/* What kind of failure: exit statuses and the plugin's reports derive
 * from it, never from the message's text. */
enum pipette_err_code {
	PIPETTE_E_INPUT = 0,	/* bad input: arguments, files, options (the default) */
	PIPETTE_E_NOFIT,	/* a valid request, but no configuration fits */
	PIPETTE_E_CHANGED,	/* an input differs from the one pinned for the step */
	PIPETTE_E_LIMIT,	/* the planner overran a limit the site set */
	PIPETTE_E_INTERNAL,	/* out of memory, a failed system call */
};

struct pipette_err {
	char msg[PIPETTE_ERR_MAX];
	enum pipette_err_code code;
};

/* Format a message into err (if not NULL) and return -1, so that callers
 * can write `return pipette_fail(err, "...")`. */
int pipette_fail(struct pipette_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* pipette_fail with a code other than PIPETTE_E_INPUT. */
int pipette_fail_code(struct pipette_err *err, enum pipette_err_code code,
		      const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The code of the last failure (PIPETTE_E_INPUT when err is NULL). */
enum pipette_err_code pipette_err_code(const struct pipette_err *err);

/* Prefix the existing message with more context ("file.json: " + msg). */
int pipette_fail_prefix(struct pipette_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Parse a decimal integer in [min, max]: digits, with a '-' for a negative
 * number, nothing else (no white space, '+' or "0x"); names `what` in the
 * error. */
int pipette_parse_long(const char *s, long min, long max, long *out,
		       const char *what, struct pipette_err *err);
/* Parse a finite double in [min, max], written in decimal ("1", "-0.5",
 * ".5", "1e9"; no white space, '+', hexadecimal, inf or nan). */
int pipette_parse_double(const char *s, double min, double max, double *out,
			 const char *what, struct pipette_err *err);

/* Bounded string copy that always terminates; returns -1 on truncation. */
int pipette_strlcpy(char *dst, const char *src, size_t size);

/* Text built in the caller's buffer, one piece at a time (launch lines,
 * descriptions): `bad` once a format fails; it fits when n < len. */
struct pipette_args {
	char *buf;
	size_t len, n;
	int bad;
};

void pipette_arg(struct pipette_args *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
