#include "inputs/error.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int vfail(struct pipette_err *err, enum pipette_err_code code, const char *fmt,
		 va_list ap)
{
	if (err) {
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		err->code = code;
	}
	return -1;
}

int pipette_fail(struct pipette_err *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(err, PIPETTE_E_INPUT, fmt, ap);
	va_end(ap);
	return -1;
}

int pipette_fail_code(struct pipette_err *err, enum pipette_err_code code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(err, code, fmt, ap);
	va_end(ap);
	return -1;
}

enum pipette_err_code pipette_err_code(const struct pipette_err *err)
{
	return err ? err->code : PIPETTE_E_INPUT;
}

int pipette_fail_prefix(struct pipette_err *err, const char *fmt, ...)
{
	char prefix[PIPETTE_ERR_MAX];
	char old[PIPETTE_ERR_MAX];
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* Truncation is acceptable: the message stays terminated. */
	if (snprintf(err->msg, sizeof(err->msg), "%s%s", prefix, old) < 0)
		err->msg[0] = '\0';
	return -1;
}

int pipette_parse_long(const char *s, long min, long max, long *out,
		       const char *what, struct pipette_err *err)
{
	char *end = NULL;
	long v;

	if (!s || !*s)
		return pipette_fail(err, "%s: empty value, expected an integer", what);
	/* Plain decimal digits, '-' for a negative number: strtol would also
	 * take leading white space and a '+' (" 64", "+64"). */
	if (!isdigit((unsigned char)s[s[0] == '-']))
		return pipette_fail(err, "%s: '%.64s' is not an integer", what, s);
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end != '\0')
		return pipette_fail(err, "%s: '%.64s' is not an integer", what, s);
	if (v < min || v > max)
		return pipette_fail(err, "%s: %ld is out of range [%ld, %ld]",
				    what, v, min, max);
	*out = v;
	return 0;
}

int pipette_parse_double(const char *s, double min, double max, double *out,
			 const char *what, struct pipette_err *err)
{
	const char *p;
	char *end = NULL;
	double v;

	if (!s || !*s)
		return pipette_fail(err, "%s: empty value, expected a number", what);
	/* Decimal only: strtod would also take leading white space, a '+',
	 * hexadecimal ("0x1p3") and "inf". */
	p = s + (s[0] == '-');
	if (!(isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) ||
	    strpbrk(s, "xX"))
		return pipette_fail(err, "%s: '%.64s' is not a number", what, s);
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end != '\0' || !isfinite(v))
		return pipette_fail(err, "%s: '%.64s' is not a number", what, s);
	if (v < min || v > max)
		return pipette_fail(err, "%s: %g is out of range [%g, %g]",
				    what, v, min, max);
	*out = v;
	return 0;
}

int pipette_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size == 0)
		return -1;
	if (n >= size) {
		memcpy(dst, src, size - 1);
		dst[size - 1] = '\0';
		return -1;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

void pipette_arg(struct pipette_args *a, const char *fmt, ...)
{
	size_t room = a->n < a->len ? a->len - a->n : 0;
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(a->buf + (room ? a->n : 0), room, fmt, ap);
	va_end(ap);
	if (w < 0)
		a->bad = 1;
	else
		a->n += (size_t)w;
}
