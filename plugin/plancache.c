/* spank_pipette: the per-user plan cache, a directory of finished step
 * results (plugstack key plan_cache=ROOT).
 *
 * A job's later steps with the same inputs get the same plan; the cache
 * lets them read it instead of planning again.  It is the job's user's
 * own: ROOT/UID, created by the planner child (which runs as the user)
 * with mode 0700, so no other user can write into it.  Everything is
 * checked on the open descriptor, never by path:
 *  - ROOT must be a directory (not a symbolic link) owned by root, and
 *    either sticky (like /tmp, 1777: users create their own directories)
 *    or writable by its owner alone (0755: the site makes them);
 *  - ROOT/UID must be a directory (not a symbolic link) owned by UID and
 *    writable by it alone;
 *  - an entry must be a regular file (not a symbolic link, FIFO or
 *    device: opened O_NOFOLLOW|O_NONBLOCK and fstat-checked) owned by UID,
 *    writable by it alone, of bounded size, whose header names the key
 *    asked for and whose body has the length and SHA-256 the header says.
 * Anything else is refused with the path and the reason; the caller then
 * plans as if there were no cache.  Entries are written to a temporary
 * file in the same directory and renamed into place, so a reader sees a
 * whole entry or none; a crash can still leave a short file behind on
 * some file systems, which the length and checksum catch.
 *
 * One lock file holds a record lock per key (fcntl, one byte at an offset
 * taken from the key), so that of the steps that start together one plans
 * and the others wait for its entry.  Record locks go with the process
 * that holds them: a planner killed at its limit releases its lock. */
#define _GNU_SOURCE	/* fdopendir, O_NOFOLLOW with openat */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"
#include "inputs/readfile.h"

#define MAGIC "pipette-plan-cache 1\n"
/* The header: the magic line, "key " + 64 hex, "size " + a decimal,
 * "sha256 " + 64 hex, an empty line. */
#define HEADER_MAX 256
#define ENTRY_SUFFIX ".plan"
#define TMP_PREFIX ".tmp-"
#define LOCK_NAME "lock"
/* How often a waiter whose alarm came before it was blocked looks again
 * (a signal that arrives between setitimer and fcntl is lost). */
#define LOCK_TICK_MS 20
/* A temporary file this old was left by a writer that was killed: writing
 * an entry takes milliseconds (README "Performance"). */
#define TMP_STALE_S 3600

/* Why openat(dirfd, name) failed, in words: ELOOP under O_NOFOLLOW (and
 * ENOTDIR under O_DIRECTORY) may mean a symbolic link. */
static void open_failed(int dirfd, const char *name, const char *path, int e,
			struct pipette_err *err)
{
	struct stat st;

	if ((e == ELOOP || e == ENOTDIR || e == ENXIO) &&
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode))) {
		pipette_fail(err, "%.300s: is %s, refused", path, pipette_file_kind(st.st_mode));
		return;
	}
	pipette_fail(err, "%.300s: cannot open: %s", path, strerror(e));
}

/* The site's root: a directory owned by root_owner, sticky or writable by
 * its owner alone. */
static int open_root(const char *root, unsigned root_owner, struct pipette_err *err)
{
	struct stat st;
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), e;

	if (fd < 0) {
		e = errno;
		open_failed(AT_FDCWD, root, root, e, err);
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		pipette_fail(err, "%.300s: cannot stat: %s", root, strerror(errno));
		goto fail;
	}
	if (st.st_uid != root_owner) {
		pipette_fail(err, "%.300s: owned by uid %u, not %u: the cache root must be "
			     "root's", root, (unsigned)st.st_uid, root_owner);
		goto fail;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		pipette_fail(err, "%.300s: writable by group or others without the sticky bit "
			     "(mode %04o): use 1777 or 0755", root, (unsigned)(st.st_mode & 07777));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* The user's directory ROOT/UID, made if it is missing. */
static int open_user_dir(struct pipette_plancache *c, int rootfd, const char *name,
			 struct pipette_err *err)
{
	struct stat st;
	int made = mkdirat(rootfd, name, 0700) == 0 ? 0 : errno, e;

	c->dirfd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->dirfd < 0) {
		e = errno;
		if (e == ENOENT && made && made != EEXIST)
			return pipette_fail(err, "%.300s: does not exist and cannot be made: %s "
					    "(a cache root that is not world-writable needs "
					    "per-user directories made by the site)", c->dir,
					    strerror(made));
		open_failed(rootfd, name, c->dir, e, err);
		return -1;
	}
	if (fstat(c->dirfd, &st) != 0)
		return pipette_fail(err, "%.300s: cannot stat: %s", c->dir, strerror(errno));
	if (st.st_uid != c->uid)
		return pipette_fail(err, "%.300s: owned by uid %u, not %u", c->dir,
				    (unsigned)st.st_uid, c->uid);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return pipette_fail(err, "%.300s: writable by group or others (mode %04o)",
				    c->dir, (unsigned)(st.st_mode & 07777));
	return 0;
}

int pipette_plancache_open(struct pipette_plancache *c, const char *root, unsigned root_owner,
			   unsigned uid, struct pipette_err *err)
{
	char name[16];
	int rootfd, rc;

	c->dirfd = c->lockfd = -1;
	c->uid = uid;
	snprintf(name, sizeof(name), "%u", uid);
	if (snprintf(c->dir, sizeof(c->dir), "%s/%s", root, name) >= (int)sizeof(c->dir))
		return pipette_fail(err, "%.300s: path too long", root);
	if (root[0] != '/')
		return pipette_fail(err, "%.300s: not an absolute path", root);
	rootfd = open_root(root, root_owner, err);
	if (rootfd < 0)
		return -1;
	rc = open_user_dir(c, rootfd, name, err);
	close(rootfd);
	if (rc)
		pipette_plancache_close(c);
	return rc;
}

void pipette_plancache_close(struct pipette_plancache *c)
{
	if (c->lockfd >= 0)
		close(c->lockfd);
	if (c->dirfd >= 0)
		close(c->dirfd);
	c->dirfd = c->lockfd = -1;
}

static int key_ok(const char *key)
{
	size_t i;

	for (i = 0; i < PIPETTE_PLAN_KEY_HEX; i++)
		if (!key[i] || !strchr("0123456789abcdef", key[i]))
			return 0;
	return key[i] == '\0';
}

/* The checks on an entry's own inode, before a byte is read. */
int pipette_plancache_check_stat(const struct stat *st, unsigned uid, const char *path,
				 struct pipette_err *err)
{
	if (!S_ISREG(st->st_mode))
		return pipette_fail(err, "%.300s: is %s, not a regular file: ignored", path,
				    pipette_file_kind(st->st_mode));
	if (st->st_uid != uid)
		return pipette_fail(err, "%.300s: owned by uid %u, not %u: ignored", path,
				    (unsigned)st->st_uid, uid);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return pipette_fail(err, "%.300s: writable by group or others (mode %04o): "
				    "ignored", path, (unsigned)(st->st_mode & 07777));
	if (st->st_size > (off_t)(PIPETTE_PLANCACHE_ENTRY_MAX + HEADER_MAX))
		return pipette_fail(err, "%.300s: %lld bytes exceed the limit of %u: ignored",
				    path, (long long)st->st_size,
				    (unsigned)(PIPETTE_PLANCACHE_ENTRY_MAX + HEADER_MAX));
	return 0;
}

/* Read a whole entry (bounded; a file that grows while read is refused). */
static int read_entry(int fd, const struct stat *st, const char *path, char **data,
		      size_t *len, struct pipette_err *err)
{
	size_t want = (size_t)st->st_size, got = 0;
	char *buf = malloc(want + 2);

	if (!buf)
		return pipette_fail(err, "%.300s: out of memory", path);
	while (got < want + 1) {
		ssize_t r = read(fd, buf + got, want + 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			pipette_fail(err, "%.300s: read error: %s: ignored", path, strerror(errno));
			free(buf);
			return -1;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got != want) {
		pipette_fail(err, "%.300s: changed while read: ignored", path);
		free(buf);
		return -1;
	}
	buf[got] = '\0';
	*data = buf;
	*len = got;
	return 0;
}

/* "NAME " followed by exactly n characters of set (n = 0: 1 to 20 decimal
 * digits) and a newline, copied into out; the position after it, or NULL. */
static const char *header_field(const char *p, const char *name, const char *set, size_t n,
				char *out)
{
	size_t k = strlen(name), i;

	if (strncmp(p, name, k) || p[k] != ' ')
		return NULL;
	p += k + 1;
	for (i = 0; p[i] && strchr(set, p[i]) && i < (n ? n : 20); i++)
		out[i] = p[i];
	if ((n ? i != n : i == 0) || p[i] != '\n')
		return NULL;
	out[i] = '\0';
	return p + i + 1;
}

/* Check the header against the key, the body against its length and
 * checksum; *body points into data. */
static int verify(const char *data, size_t len, const char *key, const char *path,
		  const char **body, size_t *body_len, struct pipette_err *err)
{
	static const char hexset[] = "0123456789abcdef";
	char kbuf[PIPETTE_PLAN_KEY_HEX + 1], sbuf[2 * PIPETTE_SHA256_LEN + 1], nbuf[24];
	char hex[2 * PIPETTE_SHA256_LEN + 1];
	unsigned char sha[PIPETTE_SHA256_LEN];
	unsigned long long size;
	const char *p = data;

	if (len < sizeof(MAGIC) - 1 || memcmp(data, MAGIC, sizeof(MAGIC) - 1))
		return pipette_fail(err, "%.300s: not a plan cache entry of this version "
				    "(truncated or corrupt): ignored", path);
	p += sizeof(MAGIC) - 1;
	if (!(p = header_field(p, "key", hexset, PIPETTE_PLAN_KEY_HEX, kbuf)) ||
	    !(p = header_field(p, "size", "0123456789", 0, nbuf)) ||
	    !(p = header_field(p, "sha256", hexset, 2 * PIPETTE_SHA256_LEN, sbuf)) || *p != '\n')
		return pipette_fail(err, "%.300s: malformed header (truncated or corrupt): "
				    "ignored", path);
	p++;
	if (strcmp(kbuf, key))
		return pipette_fail(err, "%.300s: holds the plan of key %.16s..., not of "
				    "its name: ignored", path, kbuf);
	size = strtoull(nbuf, NULL, 10);
	if (size != (unsigned long long)(len - (size_t)(p - data)))
		return pipette_fail(err, "%.300s: truncated or extended: %zu bytes of body, "
				    "the header says %s: ignored", path,
				    len - (size_t)(p - data), nbuf);
	pipette_sha256(p, (size_t)size, sha);
	pipette_sha256_hex(sha, hex);
	if (strcmp(hex, sbuf))
		return pipette_fail(err, "%.300s: checksum mismatch (corrupt): ignored", path);
	*body = p;
	*body_len = (size_t)size;
	return 0;
}

int pipette_plancache_get(struct pipette_plancache *c, const char *key, char **body,
			  size_t *body_len, struct pipette_err *err)
{
	char name[PIPETTE_PLAN_KEY_HEX + 8], path[sizeof(c->dir) + sizeof(name) + 1];
	char *data = NULL;
	const char *b = NULL;
	size_t len = 0;
	struct stat st;
	int fd, rv = -1;

	*body = NULL;
	*body_len = 0;
	if (!key_ok(key))
		return pipette_fail(err, "plan cache: malformed key");
	snprintf(name, sizeof(name), "%s" ENTRY_SUFFIX, key);
	snprintf(path, sizeof(path), "%s/%s", c->dir, name);
	/* Not even opened unless it is a regular file (a device's open may
	 * act); checked again on the descriptor. */
	if (fstatat(c->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT)
			return 1;
		return pipette_fail(err, "%.300s: cannot stat: %s", path, strerror(errno));
	}
	if (!S_ISREG(st.st_mode))
		return pipette_plancache_check_stat(&st, c->uid, path, err);
	fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		open_failed(c->dirfd, name, path, errno, err);
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		pipette_fail(err, "%.300s: cannot stat: %s", path, strerror(errno));
		goto out;
	}
	if (pipette_plancache_check_stat(&st, c->uid, path, err) ||
	    read_entry(fd, &st, path, &data, &len, err) ||
	    verify(data, len, key, path, &b, &len, err))
		goto out;
	memmove(data, b, len);
	data[len] = '\0';
	*body = data;
	*body_len = len;
	data = NULL;
	rv = 0;
out:
	free(data);
	close(fd);
	return rv;
}

/* Write the temporary file: header, body, fsync. */
static int write_tmp(int fd, const char *key, const char *body, size_t len)
{
	char header[HEADER_MAX], hex[2 * PIPETTE_SHA256_LEN + 1];
	unsigned char sha[PIPETTE_SHA256_LEN];
	int n;

	pipette_sha256(body, len, sha);
	pipette_sha256_hex(sha, hex);
	n = snprintf(header, sizeof(header), MAGIC "key %s\nsize %zu\nsha256 %s\n\n", key, len,
		     hex);
	if (n < 0 || (size_t)n >= sizeof(header)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (pipette_write_all(fd, header, (size_t)n) || pipette_write_all(fd, body, len) ||
	    fsync(fd))
		return -1;
	return 0;
}

int pipette_plancache_put(struct pipette_plancache *c, const char *key, const char *body,
			  size_t len, struct pipette_err *err)
{
	static unsigned serial;
	char name[PIPETTE_PLAN_KEY_HEX + 8], tmp[PIPETTE_PLAN_KEY_HEX + 64];
	int fd, e;

	if (!key_ok(key))
		return pipette_fail(err, "plan cache: malformed key");
	if (len > PIPETTE_PLANCACHE_ENTRY_MAX)
		return pipette_fail(err, "%.300s: a result of %zu bytes exceeds the entry limit "
				    "of %u: not stored", c->dir, len,
				    (unsigned)PIPETTE_PLANCACHE_ENTRY_MAX);
	snprintf(name, sizeof(name), "%s" ENTRY_SUFFIX, key);
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%.16s-%ld-%u", key, (long)getpid(), serial++);
	fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return pipette_fail(err, "%.300s/%s: cannot create: %s: not stored", c->dir, tmp,
				    strerror(errno));
	if (write_tmp(fd, key, body, len)) {
		e = errno;
		close(fd);
		unlinkat(c->dirfd, tmp, 0);
		return pipette_fail(err, "%.300s/%s: cannot write: %s: not stored", c->dir, tmp,
				    strerror(e));
	}
	if (close(fd) != 0 || renameat(c->dirfd, tmp, c->dirfd, name) != 0) {
		e = errno;
		unlinkat(c->dirfd, tmp, 0);
		return pipette_fail(err, "%.300s/%s: cannot store: %s: not stored", c->dir, name,
				    strerror(e));
	}
	pipette_plancache_prune(c, key);
	return 0;
}

/* ---- the bound on the directory ----------------------------------------- */

struct entry_info {
	char name[PIPETTE_PLAN_KEY_HEX + 8];
	time_t mtime;
	off_t size;
};

static int by_age(const void *a, const void *b)
{
	const struct entry_info *x = a, *y = b;

	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int is_entry_name(const char *name)
{
	size_t n = strlen(name);

	return n == PIPETTE_PLAN_KEY_HEX + sizeof(ENTRY_SUFFIX) - 1 &&
	       !strcmp(name + PIPETTE_PLAN_KEY_HEX, ENTRY_SUFFIX);
}

/* List the entries (and remove stale temporary files): count, malloc'd. */
static int list_entries(struct pipette_plancache *c, struct entry_info **out, size_t *n)
{
	int fd = dup(c->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct entry_info *v = NULL;
	size_t cap = 0;
	struct dirent *de;
	time_t now = time(NULL);

	*n = 0;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (fstatat(c->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (!strncmp(de->d_name, TMP_PREFIX, sizeof(TMP_PREFIX) - 1)) {
			if (now - st.st_mtime > TMP_STALE_S)
				unlinkat(c->dirfd, de->d_name, 0);
			continue;
		}
		if (!is_entry_name(de->d_name))
			continue;
		if (*n == cap) {
			struct entry_info *w = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));

			if (!w)
				break;
			v = w;
		}
		snprintf(v[*n].name, sizeof(v[*n].name), "%s", de->d_name);
		v[*n].mtime = st.st_mtime;
		v[*n].size = st.st_size;
		(*n)++;
	}
	closedir(d);
	*out = v;
	return 0;
}

void pipette_plancache_prune(struct pipette_plancache *c, const char *keep)
{
	struct entry_info *v = NULL;
	size_t n, i, left;
	unsigned long long bytes = 0;

	if (list_entries(c, &v, &n))
		return;
	for (i = 0; i < n; i++)
		bytes += (unsigned long long)v[i].size;
	if (n > 1)	/* an empty directory lists nothing: v is NULL */
		qsort(v, n, sizeof(*v), by_age);
	/* Oldest first, never the entry just written. */
	for (i = 0, left = n; i < n && (left > PIPETTE_PLANCACHE_MAX_ENTRIES ||
					 bytes > PIPETTE_PLANCACHE_MAX_BYTES); i++) {
		if (keep && !strncmp(v[i].name, keep, PIPETTE_PLAN_KEY_HEX))
			continue;
		if (unlinkat(c->dirfd, v[i].name, 0) == 0) {
			left--;
			bytes -= (unsigned long long)v[i].size;
		}
	}
	free(v);
}

/* ---- one writer per key --------------------------------------------------- */

static void on_alarm(int sig)
{
	(void)sig;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* F_SETLKW bounded by wait_ms: an interval timer interrupts it (SIGALRM
 * without SA_RESTART); every LOCK_TICK_MS after the first expiry, so that
 * a signal lost before the call blocked is followed by another.  0 locked,
 * 1 timed out, -1 error (errno). */
static int lock_wait(int fd, struct flock *fl, long wait_ms)
{
	struct sigaction sa, old_sa;
	struct itimerval it, old_it;
	sigset_t alrm, old_mask;
	double deadline = now_ms() + (double)wait_ms;
	int rc, e;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	memset(&it, 0, sizeof(it));
	it.it_value.tv_sec = wait_ms / 1000;
	it.it_value.tv_usec = (wait_ms % 1000) * 1000 + 1;
	it.it_interval.tv_usec = LOCK_TICK_MS * 1000;
	if (sigaction(SIGALRM, &sa, &old_sa) != 0)
		return -1;
	sigprocmask(SIG_UNBLOCK, &alrm, &old_mask);
	setitimer(ITIMER_REAL, &it, &old_it);
	for (;;) {
		rc = fcntl(fd, F_SETLKW, fl);
		e = errno;
		if (rc == 0 || e != EINTR)
			break;
		if (now_ms() >= deadline) {
			rc = 1;
			break;
		}
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	errno = e;
	return rc < 0 ? -1 : rc;
}

/* The byte of the lock file that stands for key: its first 31 bits. */
static off_t lock_offset(const char *key)
{
	unsigned long v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 4 | (unsigned long)(key[i] <= '9' ? key[i] - '0' : key[i] - 'a' + 10);
	return (off_t)(v & 0x7fffffffUL);
}

static int open_lock(struct pipette_plancache *c, struct pipette_err *err)
{
	char path[sizeof(c->dir) + sizeof(LOCK_NAME) + 1];
	struct stat st;

	if (c->lockfd >= 0)
		return 0;
	snprintf(path, sizeof(path), "%s/" LOCK_NAME, c->dir);
	c->lockfd = openat(c->dirfd, LOCK_NAME,
			   O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
	if (c->lockfd < 0) {
		open_failed(c->dirfd, LOCK_NAME, path, errno, err);
		return -1;
	}
	if (fstat(c->lockfd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != c->uid ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		pipette_fail(err, "%.300s: not a regular file of uid %u writable by it alone",
			     path, c->uid);
		close(c->lockfd);
		c->lockfd = -1;
		return -1;
	}
	return 0;
}

int pipette_plancache_lock(struct pipette_plancache *c, const char *key, long wait_ms,
			   struct pipette_err *err)
{
	struct flock fl;
	int rc;

	if (!key_ok(key))
		return pipette_fail(err, "plan cache: malformed key");
	if (open_lock(c, err))
		return -1;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = lock_offset(key);
	fl.l_len = 1;
	if (fcntl(c->lockfd, F_SETLK, &fl) == 0)
		return 0;
	if (errno != EAGAIN && errno != EACCES)
		return pipette_fail(err, "%.300s/" LOCK_NAME ": cannot lock: %s", c->dir,
				    strerror(errno));
	rc = wait_ms > 0 ? lock_wait(c->lockfd, &fl, wait_ms) : 1;
	if (rc < 0)
		return pipette_fail(err, "%.300s/" LOCK_NAME ": cannot lock: %s", c->dir,
				    strerror(errno));
	if (rc == 1)
		return 2;
	/* The planner let go: its entry is there, or it failed.  Let go at
	 * once, so that the waiters read the entry together, or, when there
	 * is none, each plans at once as without the cache instead of one
	 * after another, each holding up the rest. */
	pipette_plancache_unlock(c, key);
	return 1;
}

void pipette_plancache_unlock(struct pipette_plancache *c, const char *key)
{
	struct flock fl;

	if (c->lockfd < 0 || !key_ok(key))
		return;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_UNLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = lock_offset(key);
	fl.l_len = 1;
	(void)fcntl(c->lockfd, F_SETLK, &fl);
}
