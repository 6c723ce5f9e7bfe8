/* spank_pipette: one node's result for a step, in the planner child
 * (remote.c runs pipette_step_result under child.c's limits).
 *
 * Without a plan cache the child plans and writes the result.  With one
 * (plugstack plan_cache=ROOT), the step's result for every node is kept
 * in the user's directory under a key that covers every input of the
 * result text (digest.c), so a job's later steps with the same inputs
 * read it instead of planning:
 *
 *   look the key up                      a hit: done
 *   take the key's lock (bounded wait)   one planner per key; those that
 *                                        waited look again
 *   plan, store, let go of the lock
 *
 * Steps that start together thus plan once.  The wait is bounded by half
 * of plan_timeout, which leaves the waiter time to plan itself within the
 * limit if the planner it waited for was slow; a waiter whose planner
 * left no entry (it failed) plans at once, without the lock, as every
 * node would without the cache.  Whatever goes wrong with the cache (the
 * directory's owner or mode, a planted, truncated or corrupt entry, a
 * full disk) is one notice naming the path and the reason, and the plan
 * is then computed as without the cache: the cache can cost a step time,
 * never its plan.  Only plans computed from the request as given are
 * stored, never a fall-back or an error.
 *
 * With plan_dir, node 0 writes the plan file whether it planned or read
 * the plan: the entry keeps the plan's JSON after the step's text. */
#define _GNU_SOURCE	/* O_NOFOLLOW, O_DIRECTORY with openat */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin.h"
#include "inputs/readfile.h"
#include "inputs/versions.h"

_Static_assert(PIPETTE_VERSION_HEX == PIPETTE_HASH_HEX, "a version is named by srun's pin");

struct cache_use {
	struct pipette_plancache c;
	int open;
	int noted;			/* a refused entry was reported */
	char key[PIPETTE_PLAN_KEY_HEX + 1];
	/* The pins the key covers and the planner is held to: srun's digest,
	 * completed by this node's reads (digest.c).  Without the cache, the
	 * pins are srun's alone. */
	char pin[PIPETTE_DIGEST_MAX];
};

static void notice(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void notice(FILE *out, const char *fmt, ...)
{
	char msg[PIPETTE_ERR_MAX + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	(void)pipette_outcome_notice(out, msg);
}

static void info(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void info(FILE *out, const char *fmt, ...)
{
	char msg[PIPETTE_ERR_MAX + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	(void)pipette_outcome_info(out, msg);
}

/* Copy a renderer's output into the result as plan lines. */
static int plan_lines(FILE *out, int (*write)(const struct pipette_plan *, FILE *),
		      const struct pipette_plan *plan)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int rv = -1;

	if (!f)
		return -1;
	if (write(plan, f) == 0 && fflush(f) == 0)
		rv = pipette_outcome_lines(out, text);
	fclose(f);
	free(text);
	return rv;
}

/* A pinned file that was replaced since srun read it: point the request
 * at the version its writer kept of the pinned content (versions.h), for
 * the bandwidth cache and the calibration (the files pipette's own writers
 * replace).  1 when the request now names a version; a version refused
 * (planted, or of another owner) is a notice, and the step fails as it
 * would have. */
static int pinned_versions(struct pipette_request *req, FILE *out)
{
	struct {
		const char *what, *pin;
		char *path;
		size_t size;
	} f[] = {
		{ "bandwidth cache", req->pin_bandwidth_sha256, req->bandwidth, sizeof(req->bandwidth) },
		{ "calibration", req->pin_calibration_sha256, req->calibration,
		  sizeof(req->calibration) },
	};
	char path[PIPETTE_PATH_MAX + 64];
	struct pipette_err err;
	size_t i;
	int rc, found = 0;

	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (!f[i].path[0] || !f[i].pin[0])
			continue;
		rc = pipette_versions_find(f[i].path, f[i].pin, path, sizeof(path), &err);
		if (rc < 0)
			notice(out, "%s %s: the version srun pinned is refused: %s", f[i].what,
			       f[i].path, err.msg);
		if (rc != 1 || pipette_strlcpy(f[i].path, path, f[i].size))
			continue;
		info(out, "%s: planning from %s, the content srun pinned", f[i].what, path);
		found = 1;
	}
	return found;
}

/* Plan under the pins of `pin`; a bandwidth cache or calibration replaced
 * since is read from the version of the pinned content.  When the pins
 * hold more than srun's (the cache's key pinned a file srun did not) and
 * that file changed since it was hashed and kept no version, plan again
 * from what it holds now, as without the cache: *fresh then stays 0, since
 * the plan is not the key's. */
static int plan_pinned(const struct pipette_step *st, const char *pin,
		       struct pipette_request *req, const struct pipette_cluster_spec *spec,
		       struct pipette_plan **plan, int *fresh, FILE *out, struct pipette_err *err)
{
	const char *srun = st->digest ? st->digest : "";

	if (pipette_plan_compute(req, spec, plan, err) == 0 ||
	    (pipette_err_code(err) == PIPETTE_E_CHANGED && pinned_versions(req, out) &&
	     pipette_plan_compute(req, spec, plan, err) == 0)) {
		*fresh = 1;
		return 0;
	}
	if (!strcmp(pin, srun) || pipette_err_code(err) != PIPETTE_E_CHANGED)
		return -1;
	if (pipette_pin_inputs(srun, st->opts, req, err))
		return -1;
	return pipette_plan_compute(req, spec, plan, err);
}

/* The plan, or NULL with fallback=block when even the fall-back failed
 * (the step then starts untouched); warnings go to out (the step's text),
 * this node's notices to note (its result).  *fresh: planned
 * from the request as given, under the pins of the cache's key (what the
 * cache may keep). */
static int compute(const struct pipette_step *st, const char *pin, FILE *out, FILE *note,
		   struct pipette_plan **plan, int *fresh, struct pipette_err *err)
{
	struct pipette_cluster_spec spec = {
		.nodes = st->nnodes,
		.node_names = (const char *const *)st->nodes,
		.gpus_per_node = st->ngpus,
		/* Canonical slots 0..G-1, not this node's GPU indices: every
		 * node then plans from identical inputs even when nodes got
		 * different GPU indices; stepbody.c maps slots back to
		 * Slurm's list. */
		.gpu_ids = NULL,
	};
	struct pipette_request req;
	struct pipette_err first;
	char msg[PIPETTE_ERR_MAX + 128];

	*plan = NULL;
	*fresh = 0;
	if (pipette_request_build(st->opts, st->site, st->launch, &req, err) ||
	    pipette_pin_inputs(pin, st->opts, &req, err)) {
		if (!st->site->fallback_block)
			return -1;
		goto untouched;
	}
	if (st->opts->plan_file[0])	/* a saved plan, as is: never a fall-back */
		return pipette_planfile_step(st, &req, &spec, plan, err);
	if (plan_pinned(st, pin, &req, &spec, plan, fresh, note, err) == 0)
		return 0;
	if (!st->site->fallback_block || pipette_err_code(err) == PIPETTE_E_CHANGED)
		return -1;
	/* fallback=block: retry on nominal links in Slurm's order; if even
	 * that fails, start the step untouched.  Never fail the job, unless
	 * the nodes would disagree (an input changed under them). */
	first = *err;
	req.mapping = PIPETTE_MAP_BLOCK;
	req.bandwidth[0] = '\0';
	if (pipette_plan_compute(&req, &spec, plan, err) == 0) {
		snprintf(msg, sizeof(msg), "%s; planned on nominal links in Slurm's order "
			 "instead (fallback=block)", first.msg);
		return pipette_outcome_warnings(out, msg);
	}
	*err = first;
untouched:
	snprintf(msg, sizeof(msg), "%s; starting without a plan in Slurm's order "
		 "(fallback=block)", err->msg);
	return pipette_outcome_warnings(out, msg);
}

/* The plan file of plan_dir=DIR: DIR/UID/pipette-plan-HASH.json, in the
 * user's own directory (a shared 1777 spool lets no one plant or hold a
 * name another user's job will read), named by the plan's hash so that
 * every step applying the plan (the plan cache's too) finds it. */
static int plan_file_name(const struct pipette_step *st, const struct pipette_plan *plan,
			  char *name, size_t nlen, char *path, size_t plen)
{
	if ((size_t)snprintf(name, nlen, "pipette-plan-%s.json", pipette_plan_hash(plan)) >= nlen)
		return -1;
	return (size_t)snprintf(path, plen, "%s/%u/%s", st->site->plan_dir, st->uid, name) >=
	       plen ? -1 : 0;
}

/* DIR/UID, made (0700) when missing, opened without following a symbolic
 * link and checked on the descriptor: the user's, writable by no one
 * else.  -1 with errno set (EPERM when it is someone else's). */
static int user_dir(const char *root, unsigned uid)
{
	char name[16];
	struct stat sb;
	int rfd, dfd = -1, e = 0;

	snprintf(name, sizeof(name), "%u", uid);
	if ((rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	if (mkdirat(rfd, name, 0700) && errno != EEXIST)
		e = errno;
	else if ((dfd = openat(rfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		e = errno;
	else if (fstat(dfd, &sb) || sb.st_uid != uid || (sb.st_mode & 022))
		e = EPERM;
	close(rfd);
	if (e) {
		if (dfd >= 0)
			close(dfd);
		errno = e;
		return -1;
	}
	return dfd;
}

/* Node 0 writes the plan the step applies, as the job's user (the planner
 * child runs as the user), whichever way the plan came (planned here, or
 * read from the plan cache, where another node or an earlier step stored
 * it): the file the text's PIPETTE_PLAN_FILE names, with `json` (the plan
 * as pipette_plan_write_json renders it).  A new temporary file beside
 * the name (O_EXCL, named by host and process), the bytes, then a rename
 * over the name (no fsync: a spool, and a slow file system must not hold
 * the step).  A failure is a notice: the plan file never costs a step its
 * plan. */
static void write_plan_file(const struct pipette_step *st, const char *body, const char *json,
			    size_t jlen, FILE *out)
{
	char name[64], tmp[160], host[64];
	int dfd = -1, fd, made = 0, e = 0, rc;

	if (!st->site->plan_dir[0] || st->node_id != 0)
		return;
	rc = pipette_step_body_plan_file(body, st->site->plan_dir, st->uid, name, sizeof(name));
	if (rc == 0)
		return;		/* no plan: fallback=block started the step untouched */
	if (rc < 0 || !json || !jlen) {
		notice(out, "plan file under %s/%u: %s: not written", st->site->plan_dir, st->uid,
		       rc < 0 ? "the step's text names another path"
		       : "the plan cache entry holds no plan file");
		return;
	}
	if (gethostname(host, sizeof(host)))
		strcpy(host, "host");
	host[sizeof(host) - 1] = '\0';
	snprintf(tmp, sizeof(tmp), ".%s.%.40s.%ld", name, host, (long)getpid());
	if ((dfd = user_dir(st->site->plan_dir, st->uid)) < 0)
		e = errno;
	else if ((fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			      0644)) < 0)
		e = errno;
	else {
		made = 1;
		if (pipette_write_all(fd, json, jlen))
			e = errno ? errno : EIO;
		if (close(fd) && !e)
			e = errno ? errno : EIO;
	}
	if (!e && renameat(dfd, tmp, dfd, name))
		e = errno;
	if (e) {
		notice(out, "plan file %s/%u/%s: cannot write it: %s", st->site->plan_dir, st->uid,
		       name, strerror(e));
		if (made)
			unlinkat(dfd, tmp, 0);
	}
	if (dfd >= 0)
		close(dfd);
}

/* The plan file's bytes (plan_dir): the plan's JSON, in *json. */
static int render_json(const struct pipette_plan *plan, char **json, size_t *jlen)
{
	FILE *f = open_memstream(json, jlen);
	int rv = -1;

	if (!f)
		return -1;
	if (pipette_plan_write_json(plan, f) == 0 && fflush(f) == 0)
		rv = 0;
	if (fclose(f) != 0)
		rv = -1;
	if (rv) {
		free(*json);
		*json = NULL;
		*jlen = 0;
	}
	return rv;
}

/* The plan's part of the step's text: warnings, the table and variables
 * for --pipette-explain and --pipette-dry-run, every node's records. */
static int plan_text(const struct pipette_step *st, FILE *f, const struct pipette_plan *plan,
		     struct pipette_err *err)
{
	const struct pipette_opts *o = st->opts;
	int per_node = st->launch == PIPETTE_LAUNCH_SRUN ? st->ngpus : 1;

	if (pipette_outcome_warnings(f, pipette_plan_warnings(plan)) ||
	    ((o->explain == 1 || o->dry_run == 1) &&
	     plan_lines(f, pipette_plan_write_table, plan)) ||
	    (o->dry_run == 1 && plan_lines(f, pipette_plan_write_env, plan)))
		return pipette_fail(err, "writing the result: out of memory");
	if (st->site->plan_dir[0]) {
		char name[64], path[PIPETTE_PATH_MAX + 96];

		if (plan_file_name(st, plan, name, sizeof(name), path, sizeof(path)))
			return pipette_fail(err, "plan_dir: the plan file's path is too long");
		if (pipette_outcome_record_var(f, "PIPETTE_PLAN_FILE", path, err))
			return -1;
	}
	if (st->batch)
		return pipette_outcome_record_job(f, plan, err);
	return pipette_step_body_write(f, plan, st->nodes, st->nnodes, st->ngpus, per_node, err);
}

/* Plan, and write the step's text into *body.  *planned: there is a plan
 * (0: fallback=block starts the step untouched).  With plan_dir, *json
 * gets the plan file's bytes (node 0 writes them; the cache keeps them). */
static int build_body(const struct pipette_step *st, const char *pin, FILE *note, char **body,
		      size_t *len, int *planned, int *fresh, char **json, size_t *jlen,
		      struct pipette_err *err)
{
	struct pipette_plan *plan = NULL;
	FILE *f = open_memstream(body, len);
	int rv = -1;

	*planned = 0;
	*json = NULL;
	*jlen = 0;
	if (!f)
		return pipette_fail(err, "writing the result: out of memory");
	if (compute(st, pin, f, note, &plan, fresh, err) == 0 && (!plan || plan_text(st, f, plan, err) == 0) &&
	    pipette_outcome_end(f) == 0)
		rv = 0;
	if (rv == 0 && plan && st->site->plan_dir[0] && render_json(plan, json, jlen))
		rv = pipette_fail(err, "writing the plan file: out of memory");
	*planned = plan != NULL;
	pipette_plan_destroy(plan);
	if (fclose(f) != 0 && rv == 0)
		rv = pipette_fail(err, "writing the result: out of memory");
	if (rv) {
		free(*body);
		*body = NULL;
		free(*json);
		*json = NULL;
		*jlen = 0;
	}
	return rv;
}

/* This node's records of the step's text (no END). */
static int node_records(const struct pipette_step *st, const char *body, int planned,
			char **text, size_t *len, struct pipette_err *err)
{
	const char *node = planned && !st->batch ? st->nodes[st->node_id] : NULL;
	FILE *f = open_memstream(text, len);
	int rv;

	if (!f)
		return pipette_fail(err, "writing the result: out of memory");
	rv = pipette_step_body_node(body, node, st->gpus, st->ngpus, f, err);
	if (fclose(f) != 0 && rv == 0)
		rv = pipette_fail(err, "writing the result: out of memory");
	if (rv) {
		free(*text);
		*text = NULL;
	}
	return rv;
}

static void cache_open(const struct pipette_step *st, struct cache_use *cu, FILE *out)
{
	struct pipette_err err;

	memset(cu, 0, sizeof(*cu));
	cu->c.dirfd = cu->c.lockfd = -1;
	(void)pipette_strlcpy(cu->pin, st->digest ? st->digest : "", sizeof(cu->pin));
	if (!st->site->plan_cache[0] || st->opts->plan_file[0])	/* planfile.c: not cached */
		return;
	if (pipette_plancache_open(&cu->c, st->site->plan_cache, st->cache_owner, st->uid,
				   &err)) {
		notice(out, "plan cache %s; planning without the cache", err.msg);
		return;
	}
	if (pipette_plan_key(st, cu->key, cu->pin, &err)) {
		/* An input that cannot be read or a malformed digest: the
		 * planner fails on it and says so. */
		(void)pipette_strlcpy(cu->pin, st->digest ? st->digest : "", sizeof(cu->pin));
		pipette_plancache_close(&cu->c);
		return;
	}
	cu->open = 1;
}

/* This node's records of a cache entry: the step's text, then the plan
 * file's bytes (stepbody.c); node 0 writes those. */
static int entry_records(const struct pipette_step *st, char *entry, size_t len, FILE *out,
			 char **text, size_t *tlen, struct pipette_err *err)
{
	size_t n = pipette_step_body_len(entry, len);
	char saved = entry[n];
	int rv;

	entry[n] = '\0';
	rv = node_records(st, entry, 1, text, tlen, err);
	entry[n] = saved;
	if (rv == 0)
		write_plan_file(st, entry, entry + n, len - n, out);
	return rv;
}

/* A hit: this node's records in *text.  A refused entry is reported once. */
static int lookup(const struct pipette_step *st, struct cache_use *cu, FILE *out, char **text,
		  size_t *len)
{
	struct pipette_err err;
	char *body = NULL;
	size_t blen;
	int rc = pipette_plancache_get(&cu->c, cu->key, &body, &blen, &err);

	if (rc == 0 && entry_records(st, body, blen, out, text, len, &err) == 0) {
		free(body);
		info(out, "plan cache: the plan of this step comes from %s/%s.plan", cu->c.dir,
		     cu->key);
		return 1;
	}
	if (rc == 0)
		pipette_fail_prefix(&err, "%s/%s.plan: ", cu->c.dir, cu->key);
	free(body);
	if (rc != 1 && !cu->noted) {
		notice(out, "plan cache entry %s; the plan is computed afresh", err.msg);
		cu->noted = 1;
	}
	return 0;
}

/* Keep the step's text and the plan file's bytes after it (stepbody.c). */
static void store(struct cache_use *cu, const char *body, size_t blen, const char *json,
		  size_t jlen, FILE *out)
{
	struct pipette_err e;
	char *entry = malloc(blen + jlen + 1);

	if (!entry) {
		notice(out, "plan cache %s: out of memory: not stored", cu->c.dir);
		return;
	}
	memcpy(entry, body, blen);
	if (jlen)
		memcpy(entry + blen, json, jlen);
	if (pipette_plancache_put(&cu->c, cu->key, entry, blen + jlen, &e))
		notice(out, "plan cache %s", e.msg);
	else
		info(out, "plan cache: the plan of this step was stored in %s/%s.plan", cu->c.dir,
		     cu->key);
	free(entry);
}

/* Plan, write the plan file (node 0), store what may be kept, and take
 * this node's records. */
static int plan_and_store(const struct pipette_step *st, struct cache_use *cu, FILE *out,
			  char **text, size_t *len, int *planned, struct pipette_err *err)
{
	char *body = NULL, *json = NULL;
	size_t blen = 0, jlen = 0;
	int fresh = 0, rv;

	/* Best effort, as child.c's limits: a plan at normal priority is
	 * still correct. */
	if (st->plan_nice)
		(void)setpriority(PRIO_PROCESS, 0, st->plan_nice);
	if (build_body(st, cu->pin, out, &body, &blen, planned, &fresh, &json, &jlen, err))
		return -1;
	write_plan_file(st, body, json, jlen, out);
	if (cu->open && fresh)
		store(cu, body, blen, json, jlen, out);
	rv = node_records(st, body, *planned, text, len, err);
	free(body);
	free(json);
	return rv;
}

/* This node's records: from the cache, or planned (and stored) under the
 * key's lock. */
static int step_records(const struct pipette_step *st, struct cache_use *cu, FILE *out,
			char **text, size_t *len, int *planned, struct pipette_err *err)
{
	/* Half of the planner's limit: what is left is for planning. */
	long wait_ms = st->site->plan_timeout_s * 500;
	struct pipette_err e;
	int lk = -1, rv;

	*planned = 1;
	if (!cu->open)
		return plan_and_store(st, cu, out, text, len, planned, err);
	if (lookup(st, cu, out, text, len))
		return 0;
	lk = pipette_plancache_lock(&cu->c, cu->key, wait_ms, &e);
	if (lk < 0)
		notice(out, "plan cache %s; planning without the lock", e.msg);
	else if (lk == 2)
		notice(out, "plan cache %s: another step planned the same inputs for more than "
		       "%ld s (half of plan_timeout); planning without waiting longer", cu->c.dir,
		       wait_ms / 1000);
	else if (lookup(st, cu, out, text, len)) {
		if (lk == 0)
			pipette_plancache_unlock(&cu->c, cu->key);
		return 0;
	}
	/* lk 1: the planner waited for left no entry (it failed, or could
	 * not store): plan now, alongside the others that waited. */
	rv = plan_and_store(st, cu, out, text, len, planned, err);
	if (lk == 0)
		pipette_plancache_unlock(&cu->c, cu->key);
	return rv;
}

int pipette_step_result(const struct pipette_step *st, FILE *out)
{
	struct cache_use cu;
	struct pipette_err err;
	char *text = NULL;
	size_t len = 0;
	long k, tasks = st->launch == PIPETTE_LAUNCH_SRUN ? st->local_tasks : 1;
	int planned = 0, rv;

	cache_open(st, &cu, out);
	pipette_test_hook_before(st->site, (uint32_t)st->node_id);
	rv = step_records(st, &cu, out, &text, &len, &planned, &err);
	pipette_test_hook_after(st->site, (uint32_t)st->node_id);
	pipette_plancache_close(&cu.c);
	if (rv == 0 && fwrite(text, 1, len, out) != len)
		rv = pipette_fail(&err, "writing the result: out of memory");
	free(text);
	for (k = 0; rv == 0 && planned && !st->batch && k < tasks; k++)
		rv = pipette_outcome_record_port(out, st->launch, (int)k, st->master_port, &err);
	if (rv)
		return pipette_outcome_error(out, err.msg);
	return pipette_outcome_end(out);
}
