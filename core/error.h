/* pipette: errors are values.
 *
 * Every fallible call takes a `struct pipette_err *` (may be NULL) and
 * returns 0 on success or -1 on failure, with a message that names the
 * input and the field.  The caller decides how to report it. */
#ifndef PIPETTE_ERROR_H
#define PIPETTE_ERROR_H

#include <stddef.h>

#define PIPETTE_ERR_MAX 512

struct pipette_err {
	char msg[PIPETTE_ERR_MAX];
};

/* Format a message into err (if not NULL) and return -1, so that callers
 * can write `return pipette_fail(err, "...")`. */
int pipette_fail(struct pipette_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

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

#endif
