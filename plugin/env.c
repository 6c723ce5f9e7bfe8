/* spank_pipette: the env-ops table backed by SPANK (LLNL use-env's shape).
 * In slurmstepd (remote) it is the job's environment through spank_getenv
 * and spank_setenv; on the submitting side it is the process environment
 * (spank(8), "SPANK PLUGINS": Slurm doc/man/man8/spank.8:232-255 at tag
 * slurm-22-05-8-1). The unit tests pass their own table. */
#include <slurm/spank.h>
#include <stdlib.h>
#include <string.h>

#include "spank_pipette.h"

static int remote_get(void *ctx, const char *name, char *buf, size_t len,
		      struct pipette_err *err)
{
	spank_err_t rc = spank_getenv((spank_t)ctx, name, buf, (int)len);

	if (rc == ESPANK_SUCCESS)
		return 0;
	if (rc == ESPANK_ENV_NOEXIST)
		return 1;
	if (rc == ESPANK_NOSPACE)
		return pipette_fail(err, "value longer than %zu bytes", len - 1);
	return pipette_fail(err, "spank_getenv: %s", spank_strerror(rc));
}

static int remote_set(void *ctx, const char *name, const char *value, int overwrite,
		      struct pipette_err *err)
{
	spank_err_t rc = spank_setenv((spank_t)ctx, name, value, overwrite);

	if (rc == ESPANK_SUCCESS)
		return 0;
	if (rc == ESPANK_ENV_EXISTS)
		return 1;
	return pipette_fail(err, "setting %s: %s", name, spank_strerror(rc));
}

static int local_get(void *ctx, const char *name, char *buf, size_t len,
		     struct pipette_err *err)
{
	const char *v = getenv(name);

	(void)ctx;
	if (!v)
		return 1;
	if (pipette_strlcpy(buf, v, len))
		return pipette_fail(err, "value longer than %zu bytes", len - 1);
	return 0;
}

static int local_set(void *ctx, const char *name, const char *value, int overwrite,
		     struct pipette_err *err)
{
	(void)ctx;
	if (!overwrite && getenv(name))
		return 1;
	if (setenv(name, value, 1))
		return pipette_fail(err, "setting %s: out of memory", name);
	return 0;
}

void pipette_env_spank(struct pipette_env_ops *ops, spank_t sp)
{
	if (spank_remote(sp)) {
		ops->get = remote_get;
		ops->set = remote_set;
		ops->ctx = sp;
	} else {
		ops->get = local_get;
		ops->set = local_set;
		ops->ctx = NULL;
	}
}
