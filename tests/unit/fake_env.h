/* Shared by the plugin's unit tests: the environment as a plain array
 * behind the pipette_env_ops table (plugin.h), what the plugin sees
 * through spank in slurmstepd. */
#ifndef PIPETTE_TEST_FAKE_ENV_H
#define PIPETTE_TEST_FAKE_ENV_H

#include <check.h>
#include <string.h>

#include "plugin.h"

struct var {
	char name[32];
	char value[8192];
	int overwrite;
};

struct fake_env {
	struct var v[64];
	int n;
};

static inline int fake_set(void *ctx, const char *name, const char *value, int overwrite,
			   struct pipette_err *err)
{
	struct fake_env *e = ctx;
	int i;

	for (i = 0; i < e->n; i++)
		if (!strcmp(e->v[i].name, name)) {
			if (!overwrite)
				return 1;
			break;
		}
	if (i == e->n) {
		if (e->n == 64)
			return pipette_fail(err, "full");
		e->n++;
	}
	pipette_strlcpy(e->v[i].name, name, sizeof(e->v[i].name));
	pipette_strlcpy(e->v[i].value, value, sizeof(e->v[i].value));
	e->v[i].overwrite = overwrite;
	return 0;
}

static inline int fake_get(void *ctx, const char *name, char *buf, size_t len,
			   struct pipette_err *err)
{
	struct fake_env *e = ctx;
	int i;

	(void)err;
	for (i = 0; i < e->n; i++)
		if (!strcmp(e->v[i].name, name))
			return pipette_strlcpy(buf, e->v[i].value, len) ? -1 : 0;
	return 1;
}

/* The value of name, NULL when unset. */
static inline const char *fake_value(const struct fake_env *e, const char *name)
{
	int i;

	for (i = 0; i < e->n; i++)
		if (!strcmp(e->v[i].name, name))
			return e->v[i].value;
	return NULL;
}

/* b holds exactly a's variables, with a's values. */
static inline void fake_env_same(const struct fake_env *a, const struct fake_env *b)
{
	int i;

	ck_assert_int_eq(a->n, b->n);
	for (i = 0; i < a->n; i++) {
		const char *v = fake_value(b, a->v[i].name);

		ck_assert_msg(v, "%s missing", a->v[i].name);
		ck_assert_str_eq(v, a->v[i].value);
	}
}

#endif
