/* spank_pipette: the nodes of a step agree before any task starts
 * (plugstack step_barrier=DIR; remote.c runs this in a child process).
 *
 * Each node plans on its own, and a node that fails cannot stop another
 * node's tasks: SPANK has no hook that waits for the other nodes, and a
 * failure in task_init ends only that node's tasks (srun kills the others
 * only with --kill-on-bad-exit).  Most failures are the same on every node,
 * since the nodes plan from the same pinned inputs; what is left is
 * node-local (a planner limit overrun on a loaded node, a file one node
 * cannot read).  With a directory every node of a step shares, the nodes
 * agree: in DIR/UID (the plan cache's checks: plancache.c), each node i
 * records its outcome as the file "barrier-KEY.i", KEY naming the step,
 * and starts its tasks only once every node's file says it planned.
 *
 * Each file is made by link(2), which fails when the name exists, so each
 * is decided once: by its node, or, when the node has not written it
 * within the wait, by the first other node to give up on it, which writes
 * "absent" in its place.  Every node reads the same n files and so reaches
 * the same decision; a node whose own file was decided for it fails.  The
 * wait is bounded (the caller's, plan_timeout and the launch skew), and
 * the child that waits is killed past it: slurmstepd never waits on the
 * file system itself. */
#define _GNU_SOURCE	/* O_NOFOLLOW */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"
#include "inputs/readfile.h"

/* How often a waiting node looks for the others' files: the tasks of a
 * step start at most this much later than without the barrier. */
#define POLL_MS 20
/* A file this old belongs to a step long over (the wait is plan_timeout
 * and the skew, a few minutes at most): the next step of the user
 * removes it. */
#define STALE_S 3600
/* What a record holds: "ok" or "fail\t" and a message. */
#define RECORD_MAX (PIPETTE_ERR_MAX + 16)

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Decide node's record as `text` (node `by` writes it) unless it is
 * decided already: 0 made it, 1 it existed, -1 error (errno). */
static int decide(int dfd, const char *key, int node, int by, const char *text)
{
	char name[64], tmp[96];
	int fd, e = 0, rc;

	/* the temporary file is named by the node that writes it: unique
	 * across the nodes, whose process ids may coincide */
	snprintf(name, sizeof(name), "barrier-%s.%d", key, node);
	snprintf(tmp, sizeof(tmp), ".%s.by-%d", name, by);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (pipette_write_all(fd, text, strlen(text)))
		e = errno ? errno : EIO;
	if (close(fd) && !e)
		e = errno;
	rc = e ? -1 : linkat(dfd, tmp, dfd, name, 0);
	if (rc && !e)
		e = errno;
	unlinkat(dfd, tmp, 0);
	if (e == EEXIST)
		return 1;
	errno = e;
	return e ? -1 : 0;
}

/* Node's record, when it is there: 1 and its text; 0 not yet; -1 not a
 * record of this user (err). */
static int read_record(int dfd, const char *key, int node, unsigned uid, char *text,
		       size_t len, struct pipette_err *err)
{
	char name[64];
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(name, sizeof(name), "barrier-%s.%d", key, node);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return pipette_fail(err, "%s: %s", name, strerror(errno));
	if (fstat(fd, &st) || pipette_plancache_check_stat(&st, uid, name, err)) {
		close(fd);
		return pipette_fail_prefix(err, "step_barrier: ");
	}
	n = read(fd, text, len - 1);
	close(fd);
	if (n < 0)
		return pipette_fail(err, "%s: %s", name, strerror(errno));
	text[n] = '\0';
	return 1;
}

/* A record (or its temporary file) of a step long over. */
static long record_age(const char *name, void *ctx)
{
	(void)ctx;
	return strncmp(name, "barrier-", 8) && strncmp(name, ".barrier-", 9) ? -1 : STALE_S;
}

/* Remove this user's records of steps long over.  Best effort. */
static void sweep(int dfd)
{
	pipette_sweep(dfd, 0, record_age, NULL);
}

/* Wait for every node's record, deciding for those still missing at the
 * deadline; then the decision: "ok", or "fail FIRST\tMESSAGE" where FIRST
 * is the first node that planned (the one that says why) and MESSAGE the
 * first failed node's reason. */
static int gather(const struct pipette_barrier *b, int dfd, FILE *out, struct pipette_err *err)
{
	const struct timespec tick = { 0, POLL_MS * 1000000L };
	double deadline = now_ms() + (double)b->wait_ms;
	char text[RECORD_MAX], absent[160];
	int i = 0, rc, first_ok = -1, first_fail = -1;
	char reason[RECORD_MAX] = "";

	while (i < b->nnodes) {
		rc = read_record(dfd, b->key, i, b->uid, text, sizeof(text), err);
		if (rc < 0)
			return -1;
		if (rc == 0 && now_ms() < deadline) {
			nanosleep(&tick, NULL);
			continue;
		}
		if (rc == 0) {
			snprintf(absent, sizeof(absent), "fail\t%s: did not plan within %ld s "
				 "(plugstack step_barrier)\n", b->nodes[i], (b->wait_ms + 999) / 1000);
			rc = decide(dfd, b->key, i, b->node_id, absent);
			if (rc < 0)
				return pipette_fail(err, "step_barrier %s: %s", b->root,
						    strerror(errno));
			/* decided by another node: a network file system may
			 * show it a moment later; look again after a tick, not
			 * at once */
			if (rc == 1)
				nanosleep(&tick, NULL);
			continue;	/* read what was decided */
		}
		if (!strcmp(text, "ok\n")) {
			if (first_ok < 0)
				first_ok = i;
		} else if (first_fail < 0) {
			first_fail = i;
			snprintf(reason, sizeof(reason), "%s", strncmp(text, "fail\t", 5) ? "?" :
				 text + 5);
			reason[strcspn(reason, "\n")] = '\0';
		}
		i++;
	}
	if (first_fail < 0)
		return fputs("ok\n", out) < 0 ? -1 : 0;
	return fprintf(out, "fail %d\t%s\n", first_ok, reason) < 0 ? -1 : 0;
}

int pipette_barrier_run(const struct pipette_barrier *b, FILE *out)
{
	struct pipette_plancache c;
	struct pipette_err err;
	char mine[RECORD_MAX];
	int rc;

	if (pipette_plancache_open(&c, b->root, b->root_owner, b->uid, &err))
		goto fail;
	if (b->node_id == 0)
		sweep(c.dirfd);
	if (b->failure)
		snprintf(mine, sizeof(mine), "fail\t%s: %.*s\n", b->nodes[b->node_id],
			 PIPETTE_ERR_MAX - 128, b->failure);
	else
		snprintf(mine, sizeof(mine), "ok\n");
	for (rc = 0; mine[rc]; rc++)
		if (mine[rc] == '\n' && mine[rc + 1])
			mine[rc] = ' ';
	if (decide(c.dirfd, b->key, b->node_id, b->node_id, mine) < 0) {
		pipette_fail(&err, "step_barrier %s: %s", c.dir, strerror(errno));
		goto fail;
	}
	/* A node that failed fails whatever the others did: the others read
	 * its record, it need not wait for theirs. */
	if (b->failure)
		rc = fprintf(out, "fail -1\t%s", mine + 5) < 0 ? -1 : 0;
	else if ((rc = gather(b, c.dirfd, out, &err)) < 0)
		goto fail;
	pipette_plancache_close(&c);
	return rc;
fail:
	pipette_plancache_close(&c);
	return fprintf(out, "error\t%s\n", err.msg) < 0 ? -1 : 0;
}
