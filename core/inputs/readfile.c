/* pipette: the one reader of input files, and the one writer of whole files
 * (readfile.h). */
#define _GNU_SOURCE	/* O_DIRECTORY, O_NOFOLLOW, fdopendir */
#include "inputs/readfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nettle/sha2.h>
#include <nettle/version.h>

/* The first buffer when the size fstat reports is no guide (0 for files
 * in /proc and /sys, which have content all the same). */
#define READ_CHUNK 4096
/* The whole-file writer's temporary file of TARGET is ".TARGET.tmp-" and
 * mkstemp's six characters, beside TARGET (the basename cut to
 * TMP_BASE_MAX bytes so the name fits NAME_MAX).  One older than
 * TMP_STALE_S was left by a writer that was killed: writing takes
 * milliseconds to seconds (an fsync on a slow file system), never an
 * hour; the plan cache uses the same bound (plugin/plancache.c). */
#define TMP_SUFFIX ".tmp-"
#define TMP_RANDOM 6
#define TMP_BASE_MAX 200
#define TMP_STALE_S 3600

static const char *sep(const char *what)
{
	return what ? ": " : "";
}

const char *pipette_file_kind(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISLNK(m))
		return "a symbolic link";
	if (S_ISREG(m))
		return "a regular file";
	return "a special file";
}

/* Open path for reading as a regular file, without blocking: POSIX open()
 * returns at once for a FIFO opened O_RDONLY|O_NONBLOCK, where a plain
 * O_RDONLY waits for a writer (POSIX.1-2017, open(), "O_NONBLOCK").  The
 * type is checked on the open descriptor (no window between a stat and
 * the open); only then is O_NONBLOCK cleared for the reads.  Returns the
 * descriptor (with *st filled) or -1. */
static int open_regular(const char *path, const char *what, struct stat *st,
			struct pipette_err *err)
{
	const char *w = what ? what : "";
	int fd, fl, e;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		/* open() of a UNIX socket fails with ENXIO: say what it is. */
		if (e == ENXIO && stat(path, st) == 0 && S_ISSOCK(st->st_mode))
			return pipette_fail(err, "%s%s%s: is a socket, not a regular file",
					    w, sep(what), path);
		return pipette_fail(err, "%s%s%s: cannot open: %s", w, sep(what), path,
				    strerror(e));
	}
	if (fstat(fd, st) < 0) {
		e = errno;
		close(fd);
		return pipette_fail(err, "%s%s%s: cannot stat: %s", w, sep(what), path,
				    strerror(e));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return pipette_fail(err, "%s%s%s: is %s, not a regular file", w, sep(what),
				    path, pipette_file_kind(st->st_mode));
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		e = errno;
		close(fd);
		return pipette_fail(err, "%s%s%s: cannot open: %s", w, sep(what), path,
				    strerror(e));
	}
	return fd;
}

int pipette_check_file(const char *path, const char *what, struct pipette_err *err)
{
	struct stat st;
	int fd = open_regular(path, what, &st, err);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* pipette_read_file, hashing what it read when `hash` is set. */
static int read_file(const char *path, const char *what, size_t max, int hash,
		     struct pipette_file *f, struct pipette_err *err)
{
	const char *w = what ? what : "";
	struct stat st;
	char *buf = NULL, *nb;
	size_t len = 0, cap;
	ssize_t r;
	int fd, rv = -1;

	memset(f, 0, sizeof(*f));
	if (max > SIZE_MAX / 2)
		max = SIZE_MAX / 2;	/* so that max + 1 cannot wrap */
	fd = open_regular(path, what, &st, err);
	if (fd < 0)
		return -1;
	if ((unsigned long long)st.st_size > (unsigned long long)max) {
		pipette_fail(err, "%s%s%s: %lld bytes exceed the limit of %zu bytes", w,
			     sep(what), path, (long long)st.st_size, max);
		goto fail;
	}
	/* One byte more than the file had: a file that grew shows at once. */
	cap = (size_t)st.st_size < READ_CHUNK ? READ_CHUNK : (size_t)st.st_size + 1;
	if (cap > max + 1)
		cap = max + 1;
	if (!(buf = malloc(cap + 1))) {
		pipette_fail(err, "%s%s%s: out of memory", w, sep(what), path);
		goto fail;
	}
	for (;;) {
		if (len == cap) {
			size_t ncap = cap > (max + 1) / 2 ? max + 1 : 2 * cap;

			if (!(nb = realloc(buf, ncap + 1))) {
				pipette_fail(err, "%s%s%s: out of memory", w, sep(what), path);
				goto fail;
			}
			buf = nb;
			cap = ncap;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			pipette_fail(err, "%s%s%s: read error: %s", w, sep(what), path,
				     strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > max) {
			pipette_fail(err, "%s%s%s: grew beyond the limit of %zu bytes while "
				     "being read", w, sep(what), path, max);
			goto fail;
		}
	}
	buf[len] = '\0';
	if (hash)
		pipette_sha256(buf, len, f->sha256);
	f->data = buf;
	f->len = len;
	buf = NULL;
	rv = 0;
fail:
	free(buf);
	close(fd);
	return rv;
}

int pipette_read_file(const char *path, const char *what, size_t max,
		      struct pipette_file *f, struct pipette_err *err)
{
	return read_file(path, what, max, 1, f, err);
}

int pipette_read_file_unhashed(const char *path, const char *what, size_t max,
			       struct pipette_file *f, struct pipette_err *err)
{
	return read_file(path, what, max, 0, f, err);
}

void pipette_file_free(struct pipette_file *f)
{
	if (!f)
		return;
	free(f->data);
	f->data = NULL;
	f->len = 0;
}

void pipette_sha256(const void *data, size_t len, unsigned char out[PIPETTE_SHA256_LEN])
{
	struct sha256_ctx ctx;

	sha256_init(&ctx);
	sha256_update(&ctx, len, data);
	pipette_sha256_digest(&ctx, out);
}

void pipette_sha256_digest(struct sha256_ctx *ctx, unsigned char out[PIPETTE_SHA256_LEN])
{
	/* Nettle 4.0 dropped the digest-size argument of the *_digest
	 * functions (Nettle's NEWS, "Interface changes" of 4.0). */
#if NETTLE_VERSION_MAJOR >= 4
	sha256_digest(ctx, out);
#else
	sha256_digest(ctx, SHA256_DIGEST_SIZE, out);
#endif
}

void pipette_sha256_hex(const unsigned char d[PIPETTE_SHA256_LEN],
			char out[2 * PIPETTE_SHA256_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < PIPETTE_SHA256_LEN; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * PIPETTE_SHA256_LEN] = '\0';
}

int pipette_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* The name prefix ".BASE.tmp-" of the temporaries of the target whose
 * basename is base. */
static void tmp_prefix(const char *base, char *out, size_t len)
{
	snprintf(out, len, ".%.*s" TMP_SUFFIX, TMP_BASE_MAX, base);
}

void pipette_sweep(int dfd, int mine, pipette_sweep_age_fn age, void *ctx)
{
	time_t now = time(NULL);
	struct dirent *e;
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		struct stat st;
		long a = age(e->d_name, ctx);

		if (a < 0 || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || (mine && st.st_uid != geteuid()) ||
		    now - st.st_mtime <= a)
			continue;
		(void)unlinkat(dfd, e->d_name, 0);
	}
	closedir(d);
}

/* A temporary file of the target: prefix + six characters. */
static long tmp_age(const char *name, void *ctx)
{
	const char *prefix = ctx;
	size_t plen = strlen(prefix);

	return strncmp(name, prefix, plen) || strlen(name) != plen + TMP_RANDOM ? -1 : TMP_STALE_S;
}

/* Remove the temporary files of the same target that writers killed
 * before their rename left in dir (dirlen bytes of path; "" is "."): a
 * regular file, not a link, named prefix + six characters, owned by the
 * caller and older than TMP_STALE_S.  Best effort: nothing here fails a
 * write. */
static void sweep_stale(const char *path, size_t dirlen, const char *prefix)
{
	char dir[PATH_MAX];
	int fd;

	snprintf(dir, sizeof(dir), "%.*s", (int)(dirlen ? dirlen : 1), dirlen ? path : ".");
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	pipette_sweep(fd, 1, tmp_age, (void *)prefix);
	close(fd);
}

int pipette_write_file(const char *path, const char *what, const void *data, size_t len,
		       unsigned mode, int replace, struct pipette_err *err)
{
	char tmp[PATH_MAX], prefix[TMP_BASE_MAX + 16];
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
	int fd, e = 0;

	tmp_prefix(path + dirlen, prefix, sizeof(prefix));
	if ((size_t)snprintf(tmp, sizeof(tmp), "%.*s%sXXXXXX", (int)dirlen, path, prefix) >=
	    sizeof(tmp))
		return pipette_fail(err, "%s: %s: path too long", what, path);
	sweep_stale(path, dirlen, prefix);
	if ((fd = mkstemp(tmp)) < 0)
		return pipette_fail(err, "%s: %s: cannot create a file beside it: %s", what, path,
				    strerror(errno));
	errno = 0;
	if (fchmod(fd, (mode_t)mode) || pipette_write_all(fd, data, len) || fsync(fd))
		e = errno ? errno : EIO;
	if (close(fd) && !e)
		e = errno;
	if (!e && (replace ? rename(tmp, path) : link(tmp, path)))
		e = errno;
	if (e || !replace)
		unlink(tmp);
	if (e == EEXIST && !replace) {
		pipette_fail(err, "%s: %s: exists", what, path);
		return 1;
	}
	if (e)
		return pipette_fail(err, "%s: %s: cannot write: %s", what, path, strerror(e));
	return 0;
}
