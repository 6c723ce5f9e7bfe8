/* pipette: the versions a replaced input keeps for the steps that pinned it
 * (versions.h). */
#define _GNU_SOURCE	/* O_DIRECTORY, O_NOFOLLOW */
#include "inputs/versions.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inputs/readfile.h"

/* A writer's temporary file in the directory: ".tmp-" and mkstemp's six
 * characters; one older than an hour was left by a killed writer (the
 * bound of readfile.c's whole-file writer). */
#define TMP_PREFIX ".tmp-"
#define TMP_STALE_S 3600

static int hex_name(const char *s)
{
	return strlen(s) == PIPETTE_VERSION_HEX &&
	       strspn(s, "0123456789abcdef") == PIPETTE_VERSION_HEX;
}

static int dir_path(const char *path, char *dir, size_t len)
{
	return (size_t)snprintf(dir, len, "%s" PIPETTE_VERSIONS_SUFFIX, path) >= len ? -1 : 0;
}

/* PATH.versions, made when missing, opened without following a link and
 * checked on the descriptor: the caller's, writable by it alone. */
static int open_dir(const char *dir, const char *what, struct pipette_err *err)
{
	struct stat st = { 0 };
	int fd;

	if (mkdir(dir, 0755) && errno != EEXIST)
		return pipette_fail(err, "%s: %s: cannot make it: %s", what, dir, strerror(errno));
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return pipette_fail(err, "%s: %s: %s", what, dir, errno == ENOTDIR || errno == ELOOP
				    ? "not a directory (remove it)" : strerror(errno));
	if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & 022))
		return fd;
	close(fd);
	return pipette_fail(err, "%s: %s: owned by uid %u and mode %03o, where the versions of "
			    "the file need a directory of uid %u writable by it alone (remove it)",
			    what, dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777),
			    (unsigned)geteuid());
}

/* Keep data as version hex in dfd (dir for messages): the file when it is
 * there already, else a temporary file renamed to its name; its time is
 * now either way. */
static int keep_one(int dfd, const char *dir, const char *hex, const void *data, size_t len,
		    unsigned mode, const char *what, struct pipette_err *err)
{
	char tmp[PATH_MAX];
	struct stat st;
	int fd, e = 0;

	/* A node reads a version only when nobody but its owner can write it
	 * (pipette_versions_find): the version drops the group's and others'
	 * write bits a cache of a writing group has. */
	mode &= ~022u;
	if (fstatat(dfd, hex, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid()) {
		if ((st.st_mode & 022) && fchmodat(dfd, hex, st.st_mode & 07755, 0))
			return pipette_fail(err, "%s: %s/%s: cannot set its mode: %s", what, dir,
					    hex, strerror(errno));
		if (utimensat(dfd, hex, NULL, AT_SYMLINK_NOFOLLOW))
			return pipette_fail(err, "%s: %s/%s: cannot set its time: %s", what, dir, hex,
					    strerror(errno));
		return 0;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/" TMP_PREFIX "XXXXXX", dir) >= sizeof(tmp))
		return pipette_fail(err, "%s: %s: path too long", what, dir);
	if ((fd = mkstemp(tmp)) < 0)
		return pipette_fail(err, "%s: %s: cannot create a file in it: %s", what, dir,
				    strerror(errno));
	errno = 0;
	if (fchmod(fd, (mode_t)mode) || pipette_write_all(fd, data, len))
		e = errno ? errno : EIO;
	if (close(fd) && !e)
		e = errno;
	if (!e && renameat(AT_FDCWD, tmp, dfd, hex))
		e = errno;
	if (e) {
		unlink(tmp);
		return pipette_fail(err, "%s: %s/%s: cannot write it: %s", what, dir, hex,
				    strerror(e));
	}
	return 0;
}

/* A version (but those named in keep) after the grace period, a killed
 * writer's temporary file after an hour; nothing else. */
static long version_age(const char *name, void *ctx)
{
	const char *const *keep = ctx;

	if (hex_name(name))
		return strcmp(name, keep[0]) && strcmp(name, keep[1]) ? PIPETTE_VERSIONS_GRACE_S
								      : -1;
	return strncmp(name, TMP_PREFIX, 5) ? -1 : TMP_STALE_S;
}

/* Remove the versions older than the grace period but those named in
 * keep, and the temporary files of killed writers.  Best effort. */
static void sweep(int dfd, const char *const keep[2])
{
	pipette_sweep(dfd, 1, version_age, (void *)keep);
}

static void short_hex(const unsigned char sha[PIPETTE_SHA256_LEN],
		      char out[PIPETTE_VERSION_HEX + 1])
{
	char hex[2 * PIPETTE_SHA256_LEN + 1];

	pipette_sha256_hex(sha, hex);
	memcpy(out, hex, PIPETTE_VERSION_HEX);
	out[PIPETTE_VERSION_HEX] = '\0';
}

int pipette_versions_keep(const char *path, const char *what, const void *data, size_t len,
			  unsigned mode, size_t max, struct pipette_err *err)
{
	char dir[PATH_MAX], cur[PIPETTE_VERSION_HEX + 1], next[PIPETTE_VERSION_HEX + 1];
	const char *keep[2] = { cur, next };
	unsigned char sha[PIPETTE_SHA256_LEN];
	struct pipette_file f;
	struct stat st;
	int dfd, rv = -1;

	if (lstat(path, &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size > max)
		return 0;	/* nothing a step can have pinned */
	if (pipette_read_file(path, NULL, max, &f, NULL))
		return 0;
	if (dir_path(path, dir, sizeof(dir))) {
		pipette_file_free(&f);
		return pipette_fail(err, "%s: %s: path too long", what, path);
	}
	short_hex(f.sha256, cur);
	pipette_sha256(data, len, sha);
	short_hex(sha, next);
	if ((dfd = open_dir(dir, what, err)) < 0) {
		pipette_file_free(&f);
		return -1;
	}
	if (keep_one(dfd, dir, cur, f.data, f.len, st.st_mode & 07777, what, err) == 0 &&
	    keep_one(dfd, dir, next, data, len, mode, what, err) == 0)
		rv = 0;
	if (rv == 0)
		sweep(dfd, keep);
	close(dfd);
	pipette_file_free(&f);
	return rv;
}

int pipette_versions_write_file(const char *path, const char *what, const void *data,
				size_t len, unsigned mode, size_t max, struct pipette_err *err)
{
	if (pipette_versions_keep(path, what, data, len, mode, max, err))
		return -1;
	return pipette_write_file(path, what, data, len, mode, 1, err);
}

/* Owned by owner or root, writable by its owner alone. */
static int trusted(const struct stat *st, uid_t owner)
{
	return (st->st_uid == owner || st->st_uid == 0) && !(st->st_mode & 022);
}

int pipette_versions_find(const char *path, const char *hex, char *out, size_t len,
			  struct pipette_err *err)
{
	char dir[PATH_MAX];
	struct stat pst, st = { 0 };
	int dfd, fd;

	if (!hex_name(hex) || dir_path(path, dir, sizeof(dir)) || stat(path, &pst))
		return 0;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : pipette_fail(err, "%s: %s", dir, errno == ENOTDIR ||
							  errno == ELOOP ? "not a directory" :
							  strerror(errno));
	if (fstat(dfd, &st) || !trusted(&st, pst.st_uid)) {
		close(dfd);
		return pipette_fail(err, "%s: owned by uid %u, mode %03o: not the file's owner's "
				    "(uid %u) or root's, writable by it alone", dir,
				    (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777),
				    (unsigned)pst.st_uid);
	}
	fd = openat(dfd, hex, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return errno == ENOENT ? 0 : pipette_fail(err, "%s/%s: %s", dir, hex, errno == ELOOP
							  ? "a symbolic link" : strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !trusted(&st, pst.st_uid)) {
		close(fd);
		return pipette_fail(err, "%s/%s: %s, uid %u, mode %03o: not a regular file of "
				    "the file's owner (uid %u) or root's, writable by it alone", dir,
				    hex, pipette_file_kind(st.st_mode), (unsigned)st.st_uid,
				    (unsigned)(st.st_mode & 0777), (unsigned)pst.st_uid);
	}
	close(fd);
	if ((size_t)snprintf(out, len, "%s/%s", dir, hex) >= len)
		return pipette_fail(err, "%s/%s: path too long", dir, hex);
	return 1;
}
