/* Unit tests: the plan cache (plugin/plancache.c), the step's text every
 * node shares (plugin/stepbody.c), one node's result through the cache
 * (plugin/step.c) and the cache's key (plugin/digest.c).
 *
 * The cache must never change a plan, only skip computing it: a hit gives
 * the same bytes as a fresh plan, and those give each task exactly the
 * environment apply.c writes directly.  Whatever sits where an entry
 * belongs (another user's file, a symbolic link, a FIFO, a device, a
 * truncated, corrupt or misnamed entry, a directory, a file others may
 * write) is refused with the path and the reason, and the step gets the
 * fresh plan.  Steps that start together plan once.
 *
 * The cache's root must be root's in production; the tests pass their
 * own uid as the owner it must have (pipette_plancache_open's root_owner),
 * so they run as any user.  What needs root (a file of another uid, a
 * device node) runs when the tests do (make check as root, as CI does). */
#define _GNU_SOURCE	/* nftw */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_run.h"
#include "fake_env.h"
#include "plugin.h"
#include "inputs/readfile.h"
#include "inputs/versions.h"

#define KEY_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define KEY_B "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define UNIFORM TEST_DATADIR "/../../etc/examples/uniform-4x8-h100.json"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_rf(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A cache root like /tmp: sticky and world-writable, owned by the test. */
static void make_root(char root[64])
{
	strcpy(root, "/tmp/pipette-cache-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(chmod(root, 01777), 0);
}

static void open_cache(const char *root, struct pipette_plancache *c)
{
	struct pipette_err err;

	ck_assert_msg(pipette_plancache_open(c, root, (unsigned)geteuid(), (unsigned)geteuid(),
					     &err) == 0, "%s", err.msg);
}

static void entry_path(const struct pipette_plancache *c, const char *key, char *buf,
		       size_t len)
{
	snprintf(buf, len, "%s/%s.plan", c->dir, key);
}

static char *slurp(const char *path, size_t *len)
{
	struct pipette_file f;
	struct pipette_err err;

	ck_assert_msg(pipette_read_file(path, "test", 1 << 26, &f, &err) == 0, "%s", err.msg);
	*len = f.len;
	return f.data;
}

static void spit(const char *path, const char *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

/* get must refuse the entry of KEY_A with a message naming its path and
 * holding `why`. */
static void refused(struct pipette_plancache *c, const char *why)
{
	struct pipette_err err;
	char *body = NULL, path[PIPETTE_PATH_MAX + 128];
	size_t len;

	entry_path(c, KEY_A, path, sizeof(path));
	ck_assert_int_eq(pipette_plancache_get(c, KEY_A, &body, &len, &err), -1);
	ck_assert_ptr_null(body);
	ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, why), "%s", err.msg);
}

/* ---- the directory ------------------------------------------------------- */

START_TEST(test_store_and_read)
{
	char root[64], path[PIPETTE_PATH_MAX + 128];
	struct pipette_plancache c;
	struct pipette_err err;
	struct stat st;
	char *body = NULL;
	size_t len;
	static const char text[] = "J 1 PIPETTE_TP=2\nEND\n";

	make_root(root);
	open_cache(root, &c);
	ck_assert_int_eq(pipette_plancache_get(&c, KEY_A, &body, &len, &err), 1);
	ck_assert_msg(pipette_plancache_put(&c, KEY_A, text, strlen(text), &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(pipette_plancache_get(&c, KEY_A, &body, &len, &err), 0);
	ck_assert_uint_eq(len, strlen(text));
	ck_assert_str_eq(body, text);
	free(body);
	/* The per-user directory is the user's alone, so is the entry. */
	ck_assert_int_eq(stat(c.dir, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	ck_assert_uint_eq(st.st_uid, geteuid());
	entry_path(&c, KEY_A, path, sizeof(path));
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	/* Another key is another entry. */
	ck_assert_int_eq(pipette_plancache_get(&c, KEY_B, &body, &len, &err), 1);
	pipette_plancache_close(&c);
	rm_rf(root);
}
END_TEST

START_TEST(test_root_refused)
{
	char root[64], link[128];
	struct pipette_plancache c;
	struct pipette_err err;
	unsigned me = (unsigned)geteuid();

	make_root(root);
	/* World-writable without the sticky bit: others could replace a
	 * user's directory. */
	ck_assert_int_eq(chmod(root, 0777), 0);
	ck_assert_int_eq(pipette_plancache_open(&c, root, me, me, &err), -1);
	ck_assert_msg(strstr(err.msg, root) && strstr(err.msg, "without the sticky bit") &&
		      strstr(err.msg, "0777"), "%s", err.msg);
	/* Owned by its owner alone (0755) is the other accepted form. */
	ck_assert_int_eq(chmod(root, 0755), 0);
	open_cache(root, &c);
	pipette_plancache_close(&c);
	/* Not the owner it must have (root, in production). */
	ck_assert_int_eq(pipette_plancache_open(&c, root, me + 1, me, &err), -1);
	ck_assert_msg(strstr(err.msg, "owned by uid") && strstr(err.msg, root), "%s", err.msg);
	/* A symbolic link is refused, whatever it points to. */
	snprintf(link, sizeof(link), "%s-link", root);
	ck_assert_int_eq(symlink(root, link), 0);
	ck_assert_int_eq(pipette_plancache_open(&c, link, me, me, &err), -1);
	ck_assert_msg(strstr(err.msg, link) && strstr(err.msg, "symbolic link"), "%s", err.msg);
	unlink(link);
	ck_assert_int_eq(pipette_plancache_open(&c, "relative/dir", me, me, &err), -1);
	ck_assert_msg(strstr(err.msg, "not an absolute path"), "%s", err.msg);
	rm_rf(root);
}
END_TEST

START_TEST(test_user_dir_refused)
{
	char root[64], dir[128], other[128];
	struct pipette_plancache c;
	struct pipette_err err;
	unsigned me = (unsigned)geteuid();

	make_root(root);
	snprintf(dir, sizeof(dir), "%s/%u", root, me);
	/* Made by someone else first (here: for the uid after ours, made by
	 * us): the squatter's directory is not used, and the message names
	 * the owner found. */
	ck_assert_int_eq(pipette_plancache_open(&c, root, me, me + 1, &err), -1);
	snprintf(other, sizeof(other), "%s/%u", root, me + 1);
	ck_assert_msg(strstr(err.msg, other) && strstr(err.msg, "owned by uid") &&
		      strstr(err.msg, "not"), "%s", err.msg);
	/* Writable by others. */
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(chmod(dir, 0770), 0);
	ck_assert_int_eq(pipette_plancache_open(&c, root, me, me, &err), -1);
	ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "writable by group or others"),
		      "%s", err.msg);
	/* A symbolic link in its place, even to a good directory. */
	ck_assert_int_eq(rmdir(dir), 0);
	ck_assert_int_eq(mkdir(other, 0700) == 0 || errno == EEXIST, 1);
	ck_assert_int_eq(symlink(other, dir), 0);
	ck_assert_int_eq(pipette_plancache_open(&c, root, me, me, &err), -1);
	ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "symbolic link"), "%s", err.msg);
	/* A file in its place. */
	ck_assert_int_eq(unlink(dir), 0);
	spit(dir, "x", 1, 0600);
	ck_assert_int_eq(pipette_plancache_open(&c, root, me, me, &err), -1);
	ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "regular file"), "%s", err.msg);
	rm_rf(root);
}
END_TEST

/* ---- what may sit where an entry belongs -------------------------------- */

static void put_a(struct pipette_plancache *c, const char *text)
{
	struct pipette_err err;

	ck_assert_msg(pipette_plancache_put(c, KEY_A, text, strlen(text), &err) == 0, "%s",
		      err.msg);
}

START_TEST(test_entry_of_another_uid)
{
	char root[64], path[PIPETTE_PATH_MAX + 128];
	struct pipette_plancache c;
	struct pipette_err err;
	char *body;
	size_t len;
	unsigned me = (unsigned)geteuid();

	make_root(root);
	open_cache(root, &c);
	put_a(&c, "END\n");
	/* The entry's owner against the cache's user: as if the entry had
	 * been planted by another uid (what any user can arrange here). */
	c.uid = me + 1;
	entry_path(&c, KEY_A, path, sizeof(path));
	ck_assert_int_eq(pipette_plancache_get(&c, KEY_A, &body, &len, &err), -1);
	ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "owned by uid") &&
		      strstr(err.msg, "ignored"), "%s", err.msg);
	c.uid = me;
	/* The real thing needs root: a file of uid 4242 in the directory. */
	if (me == 0) {
		ck_assert_int_eq(chown(path, 4242, 4242), 0);
		refused(&c, "owned by uid 4242, not 0");
	}
	pipette_plancache_close(&c);
	rm_rf(root);
}
END_TEST

START_TEST(test_entry_symlink_fifo_device_dir)
{
	char root[64], path[PIPETTE_PATH_MAX + 128], target[PIPETTE_PATH_MAX + 128];
	struct pipette_plancache c;
	double t0;

	make_root(root);
	open_cache(root, &c);
	entry_path(&c, KEY_A, path, sizeof(path));
	/* A symbolic link to a valid entry of the same key. */
	entry_path(&c, KEY_B, target, sizeof(target));
	put_a(&c, "END\n");
	ck_assert_int_eq(rename(path, target), 0);
	ck_assert_int_eq(symlink(target, path), 0);
	refused(&c, "is a symbolic link");
	ck_assert_int_eq(unlink(path), 0);
	/* A FIFO nobody writes: refused at once, never read. */
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	t0 = now_s();
	refused(&c, "is a FIFO, not a regular file");
	ck_assert_double_lt(now_s() - t0, 1.0);
	ck_assert_int_eq(unlink(path), 0);
	/* A directory. */
	ck_assert_int_eq(mkdir(path, 0700), 0);
	refused(&c, "is a directory, not a regular file");
	ck_assert_int_eq(rmdir(path), 0);
	/* A device (mknod needs root): not even opened. */
	if (geteuid() == 0) {
		ck_assert_int_eq(mknod(path, S_IFCHR | 0600, makedev(1, 3)), 0);
		refused(&c, "is a character device, not a regular file");
		ck_assert_int_eq(unlink(path), 0);
	}
	pipette_plancache_close(&c);
	rm_rf(root);
}
END_TEST

START_TEST(test_entry_damaged)
{
	char root[64], path[PIPETTE_PATH_MAX + 128], pathb[PIPETTE_PATH_MAX + 128];
	struct pipette_plancache c;
	static const char text[] = "J 1 PIPETTE_TP=2\nJ 1 PIPETTE_PP=4\nEND\n";
	char *data;
	size_t len;

	make_root(root);
	open_cache(root, &c);
	entry_path(&c, KEY_A, path, sizeof(path));
	put_a(&c, text);
	data = slurp(path, &len);
	/* Truncated: the body is shorter than the header says. */
	spit(path, data, len - 5, 0600);
	refused(&c, "truncated");
	/* Cut inside the header. */
	spit(path, data, 30, 0600);
	refused(&c, "malformed header");
	/* One byte of the body changed. */
	data[len - 8] ^= 1;
	spit(path, data, len, 0600);
	refused(&c, "checksum mismatch");
	data[len - 8] ^= 1;
	/* Another key's entry under this key's name. */
	entry_path(&c, KEY_B, pathb, sizeof(pathb));
	ck_assert_int_eq(pipette_plancache_put(&c, KEY_B, text, strlen(text), NULL), 0);
	ck_assert_int_eq(rename(pathb, path), 0);
	refused(&c, "holds the plan of key 0123456789abcdef");
	/* Not an entry at all. */
	spit(path, "hello\n", 6, 0600);
	refused(&c, "not a plan cache entry");
	/* Writable by others: anyone could have written it. */
	spit(path, data, len, 0600);
	ck_assert_int_eq(chmod(path, 0622), 0);
	refused(&c, "writable by group or others (mode 0622)");
	ck_assert_int_eq(chmod(path, 0644), 0);
	{
		char *body = NULL;
		size_t blen;
		struct pipette_err err;

		/* Readable by others is fine, and the restored entry reads. */
		ck_assert_int_eq(pipette_plancache_get(&c, KEY_A, &body, &blen, &err), 0);
		ck_assert_str_eq(body, text);
		free(body);
	}
	free(data);
	pipette_plancache_close(&c);
	rm_rf(root);
}
END_TEST

START_TEST(test_entry_stat_checks)
{
	struct stat st;
	struct pipette_err err;

	memset(&st, 0, sizeof(st));
	st.st_mode = S_IFREG | 0600;
	st.st_uid = 1000;
	st.st_size = 100;
	ck_assert_int_eq(pipette_plancache_check_stat(&st, 1000, "/c/1000/k.plan", &err), 0);
	st.st_size = PIPETTE_PLANCACHE_ENTRY_MAX + 4096;
	ck_assert_int_eq(pipette_plancache_check_stat(&st, 1000, "/c/1000/k.plan", &err), -1);
	ck_assert_msg(strstr(err.msg, "exceed the limit"), "%s", err.msg);
	st.st_size = 100;
	st.st_uid = 0;
	ck_assert_int_eq(pipette_plancache_check_stat(&st, 1000, "/c/1000/k.plan", &err), -1);
	ck_assert_msg(strstr(err.msg, "/c/1000/k.plan: owned by uid 0, not 1000"), "%s", err.msg);
	st.st_uid = 1000;
	st.st_mode = S_IFSOCK | 0600;
	ck_assert_int_eq(pipette_plancache_check_stat(&st, 1000, "/c/1000/k.plan", &err), -1);
	ck_assert_msg(strstr(err.msg, "is a socket"), "%s", err.msg);
}
END_TEST

/* A write that fails half-way (here: past RLIMIT_FSIZE, as on a full
 * disk) leaves nothing behind, and says why. */
START_TEST(test_put_fails_cleanly)
{
	char root[64], path[PIPETTE_PATH_MAX + 128];
	struct pipette_plancache c;
	struct pipette_err err;
	struct rlimit r = { 4096, 4096 };
	static char big[64 * 1024];
	struct stat st;
	DIR *d;
	struct dirent *de;
	int files = 0;

	make_root(root);
	open_cache(root, &c);
	memset(big, 'x', sizeof(big) - 1);
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &r), 0);
	ck_assert_int_eq(pipette_plancache_put(&c, KEY_A, big, sizeof(big) - 1, &err), -1);
	ck_assert_msg(strstr(err.msg, c.dir) && strstr(err.msg, "File too large") &&
		      strstr(err.msg, "not stored"), "%s", err.msg);
	entry_path(&c, KEY_A, path, sizeof(path));
	ck_assert_int_eq(stat(path, &st), -1);
	d = opendir(c.dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		files += de->d_name[0] != '.' || !strncmp(de->d_name, ".tmp-", 5);
	closedir(d);
	ck_assert_int_eq(files, 0);	/* no temporary file left either */
	pipette_plancache_close(&c);
	rm_rf(root);
}
END_TEST

START_TEST(test_prune)
{
	char root[64], path[PIPETTE_PATH_MAX + 128], name[80];
	struct pipette_plancache c;
	struct timespec times[2];
	int i, n = PIPETTE_PLANCACHE_MAX_ENTRIES + 20, left = 0;
	time_t now = time(NULL);
	struct stat st;

	make_root(root);
	open_cache(root, &c);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%064x.plan", i);
		snprintf(path, sizeof(path), "%s/%s", c.dir, name);
		spit(path, "x", 1, 0600);
		times[0].tv_sec = times[1].tv_sec = now - 10000 + i;	/* i = 0 oldest */
		times[0].tv_nsec = times[1].tv_nsec = 0;
		ck_assert_int_eq(utimensat(AT_FDCWD, path, times, 0), 0);
	}
	/* A temporary file of a writer killed two hours ago, and one of now. */
	snprintf(path, sizeof(path), "%s/.tmp-old", c.dir);
	spit(path, "x", 1, 0600);
	times[0].tv_sec = times[1].tv_sec = now - 7200;
	ck_assert_int_eq(utimensat(AT_FDCWD, path, times, 0), 0);
	snprintf(path, sizeof(path), "%s/.tmp-new", c.dir);
	spit(path, "x", 1, 0600);
	/* Keep entry 0, the oldest: it is the one just written. */
	snprintf(name, sizeof(name), "%064x", 0);
	pipette_plancache_prune(&c, name);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%064x.plan", c.dir, i);
		if (stat(path, &st) == 0)
			left++;
		else
			ck_assert_msg(i >= 1 && i <= 20, "entry %d (not among the oldest) removed", i);
	}
	ck_assert_int_eq(left, PIPETTE_PLANCACHE_MAX_ENTRIES);
	snprintf(path, sizeof(path), "%s/%064x.plan", c.dir, 0);
	ck_assert_int_eq(stat(path, &st), 0);
	snprintf(path, sizeof(path), "%s/.tmp-old", c.dir);
	ck_assert_int_eq(stat(path, &st), -1);
	snprintf(path, sizeof(path), "%s/.tmp-new", c.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	pipette_plancache_close(&c);
	rm_rf(root);
}
END_TEST

/* ---- one planner per key -------------------------------------------------- */

START_TEST(test_lock_bounded_wait)
{
	char root[64];
	struct pipette_plancache c;
	struct pipette_err err;
	int go[2], back[2], status;
	pid_t pid;
	char b;
	double t0;

	make_root(root);
	open_cache(root, &c);
	ck_assert_int_eq(pipette_plancache_lock(&c, KEY_A, 1000, &err), 0);
	ck_assert_int_eq(pipette_plancache_lock(&c, KEY_B, 1000, &err), 0);	/* other key */
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(back), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct pipette_plancache w;
		int rc;

		open_cache(root, &w);
		t0 = now_s();
		/* Held: the bounded wait runs out. */
		rc = pipette_plancache_lock(&w, KEY_A, 300, &err);
		if (rc != 2 || now_s() - t0 < 0.25 || now_s() - t0 > 2.0)
			_exit(1);
		if (write(go[1], "w", 1) != 1)
			_exit(2);
		/* Released while waiting: the waiter learns it at once ... */
		t0 = now_s();
		rc = pipette_plancache_lock(&w, KEY_A, 10000, &err);
		if (rc != 1 || now_s() - t0 > 5.0)
			_exit(3);
		/* ... and does not keep the lock: the parent takes it while
		 * this process lives. */
		if (write(go[1], "r", 1) != 1 || read(back[0], &b, 1) != 1)
			_exit(4);
		_exit(0);
	}
	ck_assert_int_eq(read(go[0], &b, 1), 1);
	usleep(200 * 1000);
	pipette_plancache_unlock(&c, KEY_A);
	ck_assert_int_eq(read(go[0], &b, 1), 1);
	ck_assert_int_eq(pipette_plancache_lock(&c, KEY_A, 0, &err), 0);
	ck_assert_int_eq(write(back[1], "d", 1), 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "waiter status %d", status);
	pipette_plancache_close(&c);
	rm_rf(root);
}
END_TEST

/* ---- the step through the cache ----------------------------------------- */

struct fixture {
	struct pipette_site site;
	struct pipette_opts opts;
	char *nodes[4];
	char *gpus[8];
	struct pipette_step st;
};

static char node_text[4][8] = { "node1", "node2", "node3", "node4" };
/* This node's GPUs as Slurm gave them: not 0..7, so that a result with
 * the plan's slots in place of Slurm's GPUs shows. */
static char gpu_text[8][4] = { "4", "5", "6", "7", "0", "1", "2", "3" };

static void fixture(struct fixture *f, const char *root, enum pipette_launch_mode launch,
		    int node_id)
{
	struct pipette_err err;
	int i;

	memset(f, 0, sizeof(*f));
	pipette_site_init(&f->site);
	strcpy(f->site.gpu, "H100");
	strcpy(f->site.bandwidth, UNIFORM);
	strcpy(f->site.plan_cache, root);
	pipette_opts_init(&f->opts);
	ck_assert_int_eq(pipette_opts_set(&f->opts, PIPETTE_OPT_MODEL, "llama3-8b", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&f->opts, PIPETTE_OPT_GLOBAL_BATCH, "64", &err), 0);
	ck_assert_int_eq(pipette_opts_set(&f->opts, PIPETTE_OPT_SEQ_LEN, "2048", &err), 0);
	for (i = 0; i < 4; i++)
		f->nodes[i] = node_text[i];
	for (i = 0; i < 8; i++)
		f->gpus[i] = gpu_text[i];
	f->st.opts = &f->opts;
	f->st.site = &f->site;
	f->st.digest = "";
	f->st.nodes = f->nodes;
	f->st.nnodes = 4;
	f->st.node_id = node_id;
	f->st.gpus = f->gpus;
	f->st.ngpus = 8;
	f->st.launch = launch;
	f->st.local_tasks = launch == PIPETTE_LAUNCH_SRUN ? 8 : 1;
	f->st.master_port = 61234;
	f->st.uid = (unsigned)geteuid();
	f->st.cache_owner = (unsigned)geteuid();
	f->st.now = time(NULL);
}

static char *step_run(const struct pipette_step *st)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(pipette_step_result(st, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	return text;
}

/* The text without the lines whose tag is in tags (the I lines that say
 * where a plan came from, the M lines of the cache's problems). */
static char *without(const char *text, const char *tags)
{
	char *out = malloc(strlen(text) + 1), *o = out;
	const char *p = text;

	ck_assert_ptr_nonnull(out);
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);

		if (!(p[0] && p[1] == ' ' && strchr(tags, p[0]))) {
			memcpy(o, p, n);
			o += n;
		}
		p += n;
	}
	*o = '\0';
	return out;
}

/* Lines tagged tag. */
static int count_tag(const char *text, char tag)
{
	int n = 0;

	for (; *text; text = strchr(text, '\n') ? strchr(text, '\n') + 1 : text + strlen(text))
		n += text[0] == tag && text[1] == ' ';
	return n;
}

static int count_lines(const char *text, const char *needle)
{
	int n = 0;

	for (; (text = strstr(text, needle)); text++)
		n++;
	return n;
}

START_TEST(test_hit_same_bytes)
{
	static const enum pipette_launch_mode modes[] = { PIPETTE_LAUNCH_SRUN,
							   PIPETTE_LAUNCH_TORCHRUN };
	char root[64];
	size_t m;
	int node;

	make_root(root);
	for (m = 0; m < 2; m++) {
		for (node = 0; node < 4; node += 3) {
			struct fixture f;
			char *fresh, *stored, *hit, *a, *b;

			fixture(&f, "", modes[m], node);
			fresh = step_run(&f.st);
			ck_assert_msg(!strstr(fresh, "\nE ") && fresh[0] != 'E', "%s", fresh);
			ck_assert_ptr_null(strstr(fresh, "plan cache"));
			strcpy(f.site.plan_cache, root);
			stored = step_run(&f.st);
			hit = step_run(&f.st);
			/* node 3 finds the entry node 0 stored */
			ck_assert_int_eq(count_lines(stored, node == 0 ? "was stored in" :
						     "comes from"), 1);
			ck_assert_int_eq(count_lines(hit, "comes from"), 1);
			ck_assert_int_eq(count_tag(stored, 'M'), 0);
			a = without(stored, "I");
			b = without(hit, "I");
			ck_assert_str_eq(a, fresh);
			ck_assert_str_eq(b, fresh);
			/* Slurm's GPUs of this node, never the plan's slots. */
			ck_assert_ptr_nonnull(strstr(hit, "CUDA_VISIBLE_DEVICES="));
			ck_assert_ptr_nonnull(strstr(hit, "MASTER_PORT=61234"));
			free(fresh);
			free(stored);
			free(hit);
			free(a);
			free(b);
		}
	}
	rm_rf(root);
}
END_TEST

/* A cached result gives every task exactly what apply.c writes from the
 * plan itself, with this node's GPUs and the step's port. */
START_TEST(test_hit_matches_apply)
{
	char root[64], *text;
	struct fixture f;
	struct pipette_request req;
	struct pipette_cluster_spec cs;
	struct pipette_plan *plan = NULL;
	struct pipette_outcome o;
	struct pipette_err err;
	struct pipette_task_ctx t = { 0 };
	int k;

	make_root(root);
	fixture(&f, root, PIPETTE_LAUNCH_SRUN, 2);
	free(step_run(&f.st));			/* stores */
	text = step_run(&f.st);			/* reads */
	ck_assert_int_eq(count_lines(text, "comes from"), 1);
	ck_assert_msg(pipette_outcome_parse(text, &o, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(o.failed, 0);
	cs.nodes = 4;
	cs.node_names = (const char *const *)f.nodes;
	cs.gpus_per_node = 8;
	cs.gpu_ids = NULL;
	ck_assert_int_eq(pipette_request_build(&f.opts, &f.site, PIPETTE_LAUNCH_SRUN, &req, &err),
			 0);
	ck_assert_msg(pipette_plan_compute(&req, &cs, &plan, &err) == 0, "%s", err.msg);
	t.node = pipette_plan_node_index(plan, "node3");
	t.gpus = f.gpus;
	t.ngpus = 8;
	t.master_port = f.st.master_port;
	for (k = 0; k < 8; k++) {
		struct fake_env direct = { 0 }, replayed = { 0 };
		struct pipette_env_ops de = { fake_get, fake_set, &direct };
		struct pipette_env_ops re = { fake_get, fake_set, &replayed };

		t.local_task = k;
		ck_assert_int_eq(pipette_apply_task(plan, &t, &de, &err), 0);
		ck_assert_int_eq(pipette_outcome_apply(&o, k, &re, &err), 0);
		fake_env_same(&direct, &replayed);
	}
	pipette_plan_destroy(plan);
	free(text);
	rm_rf(root);
}
END_TEST

/* Each failure of the cache is one notice naming the path and the
 * reason, and the step gets the fresh plan; a bad entry is replaced. */
START_TEST(test_step_degrades)
{
	char root[64], path[PIPETTE_PATH_MAX + 128], *fresh, *text, *rest, *body;
	struct fixture f;
	struct pipette_plancache c;
	struct pipette_err err;
	size_t len;

	make_root(root);
	fixture(&f, "", PIPETTE_LAUNCH_SRUN, 0);
	fresh = step_run(&f.st);
	strcpy(f.site.plan_cache, root);
	free(step_run(&f.st));
	open_cache(root, &c);
	{
		char key[PIPETTE_PLAN_KEY_HEX + 1];

		ck_assert_int_eq(pipette_plan_key(&f.st, key, NULL, &err), 0);
		entry_path(&c, key, path, sizeof(path));
		/* Corrupt: one byte of the stored entry flipped. */
		body = slurp(path, &len);
		body[len - 3] ^= 0x20;
		spit(path, body, len, 0600);
		free(body);
		text = step_run(&f.st);
		ck_assert_int_eq(count_lines(text, "M plan cache entry "), 1);
		ck_assert_msg(strstr(text, path) && strstr(text, "checksum mismatch") &&
			      strstr(text, "computed afresh"), "%s", text);
		rest = without(text, "MI");
		ck_assert_str_eq(rest, fresh);
		free(rest);
		free(text);
		/* ... and replaced by a good one. */
		ck_assert_int_eq(pipette_plancache_get(&c, key, &body, &len, &err), 0);
		free(body);
		/* A directory where the entry belongs: it can be neither read
		 * nor replaced; two notices, the plan all the same. */
		ck_assert_int_eq(unlink(path), 0);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		text = step_run(&f.st);
		ck_assert_msg(strstr(text, "is a directory") && strstr(text, "not stored"), "%s",
			      text);
		ck_assert_int_eq(count_tag(text, 'M'), 2);
		rest = without(text, "MI");
		ck_assert_str_eq(rest, fresh);
		free(rest);
		free(text);
		ck_assert_int_eq(rmdir(path), 0);
	}
	pipette_plancache_close(&c);
	/* A root others may write into: no cache at all. */
	ck_assert_int_eq(chmod(root, 0777), 0);
	text = step_run(&f.st);
	ck_assert_msg(strstr(text, "M plan cache ") && strstr(text, root) &&
		      strstr(text, "sticky") && strstr(text, "planning without the cache"), "%s",
		      text);
	rest = without(text, "MI");
	ck_assert_str_eq(rest, fresh);
	free(rest);
	free(text);
	free(fresh);
	rm_rf(root);
}
END_TEST

/* An entry of another uid, in a real Slurm job's terms: it is ignored and
 * reported, and the user's fresh plan replaces it (needs root to make a
 * file of another uid). */
START_TEST(test_step_planted_entry)
{
	char root[64], path[PIPETTE_PATH_MAX + 128], key[PIPETTE_PLAN_KEY_HEX + 1], *fresh, *text, *rest;
	struct fixture f;
	struct pipette_plancache c;
	struct pipette_err err;
	struct stat st;

	if (geteuid() != 0)
		return;
	make_root(root);
	fixture(&f, "", PIPETTE_LAUNCH_TORCHRUN, 1);
	fresh = step_run(&f.st);
	strcpy(f.site.plan_cache, root);
	free(step_run(&f.st));
	open_cache(root, &c);
	ck_assert_int_eq(pipette_plan_key(&f.st, key, NULL, &err), 0);
	entry_path(&c, key, path, sizeof(path));
	ck_assert_int_eq(chown(path, 4242, 4242), 0);
	text = step_run(&f.st);
	ck_assert_msg(strstr(text, path) && strstr(text, "owned by uid 4242, not 0") &&
		      strstr(text, "ignored"), "%s", text);
	rest = without(text, "MI");
	ck_assert_str_eq(rest, fresh);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_uid, 0);	/* replaced */
	free(rest);
	free(text);
	free(fresh);
	pipette_plancache_close(&c);
	rm_rf(root);
}
END_TEST

/* plan_dir with the cache: node 0 writes the plan file whenever the step
 * applies a plan, whichever way it got it (issue 28, item 1): after
 * another node planned and stored it (node 0 waited for its lock), and on
 * a later step's hit after the file was removed; the bytes are those node
 * 0 writes when it plans itself. */
static void plan_file_of(const char *text, char *path, size_t len)
{
	const char *p = strstr(text, "PIPETTE_PLAN_FILE="), *nl;

	ck_assert_msg(p != NULL, "%s", text);
	p += strlen("PIPETTE_PLAN_FILE=");
	nl = strchr(p, '\n');
	ck_assert(nl && (size_t)(nl - p) < len);
	memcpy(path, p, (size_t)(nl - p));
	path[nl - p] = '\0';
}

/* The file holds exactly want[len]. */
static void same_bytes(const char *path, const char *want, size_t len)
{
	size_t glen;
	char *got = slurp(path, &glen);

	ck_assert_uint_eq(glen, len);
	ck_assert_int_eq(memcmp(got, want, len), 0);
	free(got);
}

START_TEST(test_plan_file_on_hit)
{
	char root[64], dir[64], udir[96], file[PIPETTE_PATH_MAX + 128], *text, *want;
	struct fixture f;
	size_t wlen;

	make_root(root);
	make_root(dir);
	snprintf(udir, sizeof(udir), "%s/%u", dir, (unsigned)geteuid());
	/* Node 0 plans without the cache: the reference bytes. */
	fixture(&f, "", PIPETTE_LAUNCH_SRUN, 0);
	strcpy(f.site.plan_dir, dir);
	text = step_run(&f.st);
	plan_file_of(text, file, sizeof(file));
	free(text);
	want = slurp(file, &wlen);
	rm_rf(udir);
	/* Node 3 plans and stores; it writes no plan file. */
	fixture(&f, root, PIPETTE_LAUNCH_SRUN, 3);
	strcpy(f.site.plan_dir, dir);
	text = step_run(&f.st);
	ck_assert_int_eq(count_lines(text, "was stored in"), 1);
	free(text);
	ck_assert_int_ne(access(file, F_OK), 0);
	/* Node 0 reads node 3's plan: it writes the file all the same. */
	fixture(&f, root, PIPETTE_LAUNCH_SRUN, 0);
	strcpy(f.site.plan_dir, dir);
	text = step_run(&f.st);
	ck_assert_int_eq(count_lines(text, "comes from"), 1);
	ck_assert_int_eq(count_tag(text, 'M'), 0);
	free(text);
	same_bytes(file, want, wlen);
	/* A later step, the user's directory removed in between. */
	rm_rf(udir);
	text = step_run(&f.st);
	ck_assert_int_eq(count_lines(text, "comes from"), 1);
	free(text);
	same_bytes(file, want, wlen);
	free(want);
	rm_rf(dir);
	rm_rf(root);
}
END_TEST

/* Steps that start together plan once: one stores, the others read. */
START_TEST(test_concurrent_steps_plan_once)
{
	enum { N = 6 };
	char root[64], out[N][128], *text[N], *rest0 = NULL;
	struct fixture f;
	pid_t pid[N];
	int i, stored = 0, read_back = 0, status;
	size_t len;

	make_root(root);
	fixture(&f, root, PIPETTE_LAUNCH_SRUN, 0);
	for (i = 0; i < N; i++) {
		snprintf(out[i], sizeof(out[i]), "%s/out.%d", root, i);
		pid[i] = fork();
		ck_assert_int_ge(pid[i], 0);
		if (pid[i] == 0) {
			FILE *o = fopen(out[i], "w");

			_exit(o && pipette_step_result(&f.st, o) == 0 && fclose(o) == 0 ? 0 : 1);
		}
	}
	for (i = 0; i < N; i++) {
		ck_assert_int_eq(waitpid(pid[i], &status, 0), pid[i]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	for (i = 0; i < N; i++) {
		char *rest;

		text[i] = slurp(out[i], &len);
		stored += count_lines(text[i], "was stored in");
		read_back += count_lines(text[i], "comes from");
		rest = without(text[i], "I");
		if (!rest0)
			rest0 = rest;
		else {
			ck_assert_str_eq(rest, rest0);
			free(rest);
		}
		ck_assert_int_eq(count_tag(text[i], 'M'), 0);
		free(text[i]);
	}
	ck_assert_int_eq(stored, 1);
	ck_assert_int_eq(read_back, N - 1);
	free(rest0);
	rm_rf(root);
}
END_TEST

/* ---- the key ------------------------------------------------------------ */

/* The entries (*.plan) in the user's directory of root. */
static int count_entries(const char *root)
{
	struct pipette_plancache c;
	struct dirent *de;
	DIR *d;
	int n = 0;

	open_cache(root, &c);
	d = opendir(c.dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		n += strlen(de->d_name) > 5 && !strcmp(de->d_name + strlen(de->d_name) - 5, ".plan");
	closedir(d);
	pipette_plancache_close(&c);
	return n;
}

/* Without srun's pin the key hashes the bandwidth cache as this node reads
 * it; replaced before the planner reads it (the test_cache_swap hook holds
 * node 1 until then), the step gets the plan of the new file, as without
 * the cache, and nothing is stored under the key of the old one. */
START_TEST(test_key_pins_what_it_hashed)
{
	char root[64], dir[] = "/tmp/pipette-pin-XXXXXX", bw[96], next[96];
	char *a, *b, *p, *fresh, *first, *text, *rest;
	struct fixture f;
	size_t len;
	pid_t pid;
	int status;

	make_root(root);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(bw, sizeof(bw), "%s/bw.json", dir);
	snprintf(next, sizeof(next), "%s/next.json", dir);
	a = slurp(UNIFORM, &len);
	/* The second version: a slow node1-node2 link (as in
	 * tests/integration/test_plugin_reliability.sh). */
	b = strdup(a);
	ck_assert_ptr_nonnull(b);
	p = strstr(b, "[null, 45, 45, 45]");
	ck_assert_ptr_nonnull(p);
	memcpy(p, "[null,  3, 45, 45]", 18);
	fixture(&f, "", PIPETTE_LAUNCH_SRUN, 1);
	strcpy(f.site.bandwidth, bw);
	spit(bw, b, len, 0644);
	fresh = step_run(&f.st);
	spit(bw, a, len, 0644);
	first = step_run(&f.st);
	ck_assert_str_ne(first, fresh);		/* the two versions plan differently */
	strcpy(f.site.plan_cache, root);
	strcpy(f.site.test_cache_swap, next);
	spit(next, b, len, 0644);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* After the key (milliseconds), before the planner's read. */
		usleep(300 * 1000);
		_exit(rename(next, bw) == 0 ? 0 : 1);
	}
	text = step_run(&f.st);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rest = without(text, "MI");
	ck_assert_str_eq(rest, fresh);
	ck_assert_int_eq(count_entries(root), 0);
	/* Unchanged from the key to the read: stored as before. */
	free(text);
	text = step_run(&f.st);
	ck_assert_int_eq(count_lines(text, "was stored in"), 1);
	ck_assert_int_eq(count_entries(root), 1);
	free(text);
	free(rest);
	free(first);
	free(fresh);
	free(a);
	free(b);
	unlink(bw);
	rmdir(dir);
	rm_rf(root);
}
END_TEST

/* Issue 28, item 7: a cache replaced by pipette's writer after srun pinned
 * it.  Before, the node read the new cache and failed the step ("changed
 * while the step started"); now it plans from the version of the pinned
 * content the writer kept, the same records as before the replacement,
 * with and without the plan cache, and says so in an I line.  Without a
 * kept version (another tool replaced the file) the step still fails. */
START_TEST(test_step_reads_pinned_version)
{
	char root[64], dir[] = "/tmp/pipette-ver-XXXXXX", bw[96], digest[PIPETTE_DIGEST_MAX];
	char cmd[160], *a, *b, *p, *before, *text, *rest;
	struct pipette_err err;
	struct fixture f;
	size_t len;
	int cached;

	make_root(root);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(bw, sizeof(bw), "%s/bw.json", dir);
	a = slurp(UNIFORM, &len);
	b = strdup(a);
	ck_assert_ptr_nonnull(b);
	p = strstr(b, "[null, 45, 45, 45]");
	ck_assert_ptr_nonnull(p);
	memcpy(p, "[null,  3, 45, 45]", 18);
	for (cached = 0; cached < 2; cached++) {
		fixture(&f, cached ? root : "", PIPETTE_LAUNCH_SRUN, 1);
		strcpy(f.site.bandwidth, bw);
		spit(bw, a, len, 0644);
		ck_assert_int_eq(pipette_input_digest(&f.opts, &f.site, digest, sizeof(digest)), 0);
		f.st.digest = digest;
		text = step_run(&f.st);
		before = without(text, "MI");
		free(text);
		ck_assert_msg(!strstr(before, "E "), "%s", before);
		if (cached)
			rm_rf(root), make_root(root);	/* plan again, not from the entry */
		ck_assert_msg(pipette_versions_write_file(bw, "--out", b, len, 0644, 1 << 24, &err) == 0,
			      "%s", err.msg);
		text = step_run(&f.st);
		rest = without(text, "MI");
		ck_assert_str_eq(rest, before);
		ck_assert_msg(strstr(text, "I bandwidth cache: planning from ") &&
			      strstr(text, "/bw.json.versions/"), "%s", text);
		free(text);
		free(rest);
		/* No version of the pinned content: the step fails as before. */
		snprintf(cmd, sizeof(cmd), "rm -rf '%s.versions'", bw);
		ck_assert_int_eq(system(cmd), 0);
		if (cached)
			rm_rf(root), make_root(root);
		text = step_run(&f.st);
		ck_assert_msg(strstr(text, "E ") && strstr(text, "changed while the step started"),
			      "%s", text);
		free(text);
		free(before);
	}
	free(a);
	free(b);
	unlink(bw);
	rmdir(dir);
	rm_rf(root);
}
END_TEST


static void key_of(const struct pipette_step *st, char *out)
{
	struct pipette_err err;

	ck_assert_msg(pipette_plan_key(st, out, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(strlen(out), PIPETTE_PLAN_KEY_HEX);
}

START_TEST(test_key_covers_inputs)
{
	char dir[] = "/tmp/pipette-key-XXXXXX", bw[96], *data, k0[65], k[65];
	struct fixture f;
	struct pipette_err err;
	size_t len;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(bw, sizeof(bw), "%s/bw.json", dir);
	data = slurp(UNIFORM, &len);
	spit(bw, data, len, 0644);
	fixture(&f, "/nonexistent", PIPETTE_LAUNCH_SRUN, 0);
	strcpy(f.site.bandwidth, bw);
	key_of(&f.st, k0);
	key_of(&f.st, k);
	ck_assert_str_eq(k, k0);			/* same inputs, same key */
	f.st.node_id = 3;				/* every node of the step */
	f.st.gpus = (char *const[]){ "0", "1", "2", "3", "4", "5", "6", "7" };
	f.st.master_port = 61999;			/* and every step */
	key_of(&f.st, k);
	ck_assert_str_eq(k, k0);
#define DIFFERS(what, change, undo) do { change; key_of(&f.st, k); \
	ck_assert_msg(strcmp(k, k0), "the key ignores %s", what); undo; } while (0)
	DIFFERS("the global batch", f.opts.global_batch = 128, f.opts.global_batch = 64);
	DIFFERS("a pin", f.opts.pins.tp = 2, f.opts.pins.tp = -1);
	DIFFERS("--pipette-explain", f.opts.explain = 1, f.opts.explain = -1);
	DIFFERS("a site argument", f.site.budget = 5, f.site.budget = 0);
	DIFFERS("the site's stack options", strcpy(f.site.stack_options, "grad_reduce=bf16"),
		f.site.stack_options[0] = '\0');
	DIFFERS("the node set", f.nodes[3] = "node9", f.nodes[3] = node_text[3]);
	DIFFERS("the node count", f.st.nnodes = 3, f.st.nnodes = 4);
	DIFFERS("the GPUs per node", f.st.ngpus = 4, f.st.ngpus = 8);
	DIFFERS("the launch mode", f.st.launch = PIPETTE_LAUNCH_TORCHRUN,
		f.st.launch = PIPETTE_LAUNCH_SRUN);
	DIFFERS("the batch step", f.st.batch = 1, f.st.batch = 0);
	DIFFERS("srun's digest", f.st.digest = "3:0123456789abcdef:-:-:-:-", f.st.digest = "");
	/* The file by its content: one byte more is another key. */
	spit(bw, data, len, 0644);
	DIFFERS("the bandwidth cache's content", spit(bw, "\n", 1, 0644) , spit(bw, data, len, 0644));
	/* max_age's warning depends on the hour. */
	f.site.max_age_days = 30;
	key_of(&f.st, k0);
	DIFFERS("the hour with max_age", f.st.now += 3600, f.st.now -= 3600);
#undef DIFFERS
	/* srun's pin stands for the file: the key needs no read of it. */
	unlink(bw);
	ck_assert_int_eq(pipette_plan_key(&f.st, k, NULL, &err), -1);
	ck_assert_msg(strstr(err.msg, bw), "%s", err.msg);
	f.st.digest = "3:0123456789abcdef:fedcba9876543210:-:-:-";
	key_of(&f.st, k);
	free(data);
	rmdir(dir);
}
END_TEST

/* ---- the step's text ---------------------------------------------------- */

/* What node1 applies of a step's text: `want`. */
static void node1_gets(const char *body, char **gpus, const char *want)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct pipette_err err;

	ck_assert_int_eq(pipette_step_body_node(body, "node1", gpus, 2, f, &err), 0);
	fclose(f);
	ck_assert_str_eq(text, want);
	free(text);
}

START_TEST(test_body_refuses_tampering)
{
	static const struct {
		const char *body, *why;
	} bad[] = {
		{ "J 1 LD_PRELOAD=/tmp/x.so\nEND\n", "not a job variable" },
		{ "N node1\nT 0 1 LD_PRELOAD=/tmp/x.so\nEND\n", "not a task variable" },
		{ "T 0 1 RANK=0\nEND\n", "before any node" },
		{ "N node1\nJ 1 PIPETTE_TP=2\nEND\n", "among the nodes" },
		{ "N node1\nT 0 1 CUDA_VISIBLE_DEVICES=0,9\nEND\n", "GPU slots" },
		{ "N node1\nT 0 1 CUDA_VISIBLE_DEVICES=0,,1\nEND\n", "GPU slots" },
		{ "N node1\nN node1\nEND\n", "appears twice" },
		{ "N node2\nT 0 1 RANK=0\nEND\n", "node node1 is not in the plan" },
		{ "J 1 PIPETTE_TP=2\n", "truncated" },
		{ "J 1 PIPETTE_TP=2\tx\x01\nEND\n", "control character" },
		{ "Q what\nEND\n", "malformed" },
		/* another node's section holds task records only */
		{ "N node2\nJ 1 PIPETTE_TP=2\nN node1\nEND\n", "among the nodes" },
	};
	char *gpus[2] = { "7", "3" };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		struct pipette_err err;

		ck_assert_int_eq(pipette_step_body_node(bad[i].body, "node1", gpus, 2, f, &err), -1);
		ck_assert_msg(strstr(err.msg, bad[i].why), "case %zu: %s", i, err.msg);
		fclose(f);
		free(text);
	}
	node1_gets("W old\nJ 1 PIPETTE_TP=2\nN node0\nT 0 1 RANK=9\nN node1\n"
		   "T 1 1 CUDA_VISIBLE_DEVICES=1,0\nEND\n", gpus,
		   "W old\nJ 1 PIPETTE_TP=2\nT 1 1 CUDA_VISIBLE_DEVICES=3,7\n");
	/* Another node's task records are walked past, not checked: they
	 * never reach this node's tasks (stepbody.c); this node's are. */
	node1_gets("J 1 PIPETTE_TP=2\nN node0\nT 0 1 LD_PRELOAD=/tmp/x.so\nT x\nN node1\n"
		   "T 0 1 RANK=4\nN node2\nT 9 9 Q\x01\nEND\n", gpus,
		   "J 1 PIPETTE_TP=2\nT 0 1 RANK=4\n");
}
END_TEST

/* The nice value of the child after a step: its own (0) when the plan
 * came from the cache, plan_nice when it planned. */
static int nice_after_step(const struct pipette_step *st)
{
	int fd[2], nice = -100;
	pid_t pid;

	ck_assert_int_eq(pipe(fd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		int v;

		close(fd[0]);
		if (!f || pipette_step_result(st, f) || fclose(f) || strstr(text, "\nE "))
			_exit(1);
		errno = 0;
		v = getpriority(PRIO_PROCESS, 0);
		_exit(write(fd[1], &v, sizeof(v)) == sizeof(v) && !errno ? 0 : 1);
	}
	close(fd[1]);
	ck_assert_int_eq(read(fd[0], &nice, sizeof(nice)), sizeof(nice));
	close(fd[0]);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	return nice;
}

/* The child plans at plan_nice, and reads a cached plan at its own
 * priority (remote.c, PLANNER_NICE). */
START_TEST(test_nice_only_to_plan)
{
	char root[64];
	struct fixture f;
	int base = getpriority(PRIO_PROCESS, 0), want;

	/* nice values stop at 19 (setpriority(2)) */
	ck_assert_msg(base <= 12, "the tests run at nice %d: this test needs 12 or less", base);
	want = base + 7;
	make_root(root);
	fixture(&f, root, PIPETTE_LAUNCH_SRUN, 0);
	f.st.plan_nice = want;
	ck_assert_int_eq(nice_after_step(&f.st), want);		/* planned, stored */
	ck_assert_int_eq(nice_after_step(&f.st), base);		/* read */
	strcpy(f.site.plan_cache, "");
	ck_assert_int_eq(nice_after_step(&f.st), want);		/* no cache: planned */
	rm_rf(root);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("plugin_cache");
	TCase *tc = tcase_create("directory");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_and_read);
	tcase_add_test(tc, test_root_refused);
	tcase_add_test(tc, test_user_dir_refused);
	tcase_add_test(tc, test_entry_of_another_uid);
	tcase_add_test(tc, test_entry_symlink_fifo_device_dir);
	tcase_add_test(tc, test_entry_damaged);
	tcase_add_test(tc, test_entry_stat_checks);
	tcase_add_test(tc, test_put_fails_cleanly);
	tcase_add_test(tc, test_prune);
	tcase_add_test(tc, test_lock_bounded_wait);
	suite_add_tcase(s, tc);
	tc = tcase_create("step");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_hit_same_bytes);
	tcase_add_test(tc, test_hit_matches_apply);
	tcase_add_test(tc, test_step_degrades);
	tcase_add_test(tc, test_step_planted_entry);
	tcase_add_test(tc, test_plan_file_on_hit);
	tcase_add_test(tc, test_concurrent_steps_plan_once);
	tcase_add_test(tc, test_key_pins_what_it_hashed);
	tcase_add_test(tc, test_step_reads_pinned_version);
	tcase_add_test(tc, test_key_covers_inputs);
	tcase_add_test(tc, test_body_refuses_tampering);
	tcase_add_test(tc, test_nice_only_to_plan);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
