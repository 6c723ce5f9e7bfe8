/* Unit tests: the one reader of input files (readfile.h). */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "inputs/readfile.h"

#include "check_run.h"

static char tmpdir[64];

static void setup(void)
{
	strcpy(tmpdir, "/tmp/test_readfile.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	/* A regression that blocks fails the test instead of hanging it. */
	alarm(20);
}

static void teardown(void)
{
	char cmd[128];

	alarm(0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static void expect_error(const char *path, size_t max, const char *fragment)
{
	struct pipette_file f;
	struct pipette_err err = { .msg = "" };
	char want[256];

	ck_assert_int_eq(pipette_read_file(path, "--thing", max, &f, &err), -1);
	ck_assert_ptr_null(f.data);
	/* "WHAT: PATH: reason" */
	snprintf(want, sizeof(want), "--thing: %s: ", path);
	ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0, "%s", err.msg);
	ck_assert_msg(strstr(err.msg, fragment) != NULL, "'%s' lacks '%s'", err.msg, fragment);
}

/* FIPS 180-2, Appendix B.1 ("abc") and the digest of no bytes. */
START_TEST(test_read_and_digest)
{
	struct pipette_file f;
	struct pipette_err err;
	char path[128], hex[2 * PIPETTE_SHA256_LEN + 1];
	unsigned char d[PIPETTE_SHA256_LEN];

	snprintf(path, sizeof(path), "%s/abc", tmpdir);
	write_file(path, "abc");
	ck_assert_msg(pipette_read_file(path, "test", 3, &f, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(f.len, 3);
	ck_assert_str_eq(f.data, "abc");
	pipette_sha256_hex(f.sha256, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	pipette_sha256("abc", 3, d);
	ck_assert(memcmp(d, f.sha256, sizeof(d)) == 0);
	pipette_file_free(&f);
	ck_assert_ptr_null(f.data);
	/* the same bytes without the digest */
	ck_assert_msg(pipette_read_file_unhashed(path, "test", 3, &f, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(f.len, 3);
	ck_assert_str_eq(f.data, "abc");
	memset(d, 0, sizeof(d));
	ck_assert(memcmp(d, f.sha256, sizeof(d)) == 0);
	pipette_file_free(&f);
	ck_assert_int_eq(pipette_read_file_unhashed(path, "--thing", 2, &f, &err), -1);
	ck_assert_msg(strstr(err.msg, "exceed the limit of 2 bytes"), "%s", err.msg);
	snprintf(path, sizeof(path), "%s/empty", tmpdir);
	write_file(path, "");
	ck_assert_int_eq(pipette_read_file(path, NULL, 0, &f, &err), 0);
	ck_assert_uint_eq(f.len, 0);
	ck_assert_str_eq(f.data, "");
	pipette_sha256_hex(f.sha256, hex);
	ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	pipette_file_free(&f);
	pipette_file_free(NULL);
}
END_TEST

START_TEST(test_limits)
{
	struct pipette_file f;
	struct pipette_err err;
	char path[128];

	snprintf(path, sizeof(path), "%s/four", tmpdir);
	write_file(path, "four");
	expect_error(path, 3, "4 bytes exceed the limit of 3 bytes");
	ck_assert_int_eq(pipette_read_file(path, "x", 4, &f, &err), 0);
	pipette_file_free(&f);
	/* /proc files say size 0 and have content: the bound holds while
	 * reading, as for a file that grows. */
	expect_error("/proc/self/maps", 8, "grew beyond the limit of 8 bytes");
	ck_assert_int_eq(pipette_read_file("/proc/self/maps", "x", 1 << 20, &f, &err), 0);
	ck_assert_uint_gt(f.len, 8);
	ck_assert_uint_eq(strlen(f.data), f.len);
	pipette_file_free(&f);
}
END_TEST

/* Nothing but a regular file is read, and nothing blocks: a FIFO with no
 * writer would hang a plain open() for ever (the alarm fails the test). */
START_TEST(test_not_regular)
{
	struct sockaddr_un sa;
	struct pipette_err err;
	char path[128];
	int s;

	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	expect_error(path, 100, "is a FIFO, not a regular file");
	ck_assert_int_eq(pipette_check_file(path, "--thing", &err), -1);
	ck_assert_msg(strstr(err.msg, "--thing: ") && strstr(err.msg, "is a FIFO"), "%s",
		      err.msg);
	expect_error("/dev/null", 100, "is a character device, not a regular file");
	expect_error(tmpdir, 100, "is a directory, not a regular file");
	snprintf(path, sizeof(path), "%s/sock", tmpdir);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(s, 0);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	expect_error(path, 100, "is a socket, not a regular file");
	close(s);
	snprintf(path, sizeof(path), "%s/none", tmpdir);
	expect_error(path, 100, "cannot open: No such file or directory");
	snprintf(path, sizeof(path), "%s/abc", tmpdir);
	write_file(path, "abc");
	ck_assert_int_eq(pipette_check_file(path, "--thing", &err), 0);
}
END_TEST

/* Make path, then set its mtime `age` seconds back (without following a
 * link). */
static void aged(const char *path, long age)
{
	struct timespec ts[2];

	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= age;
	ts[1] = ts[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* The names in tmpdir that start with '.', sorted, one per line. */
static void hidden_names(char *out, size_t len)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	char *names[32];
	int n = 0, i, j;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) && n < 32)
		if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			names[n++] = strdup(e->d_name);
	closedir(d);
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		strncat(out, names[i], len - strlen(out) - 2);
		strcat(out, "\n");
		free(names[i]);
	}
}

/* The whole-file writer leaves no temporary file of its own, and sweeps
 * the stale ones an earlier writer of the same target left when it was
 * killed (issue 28, item 5): older than an hour and the caller's.  A
 * young one (a writer at work), another target's, and anything that is
 * not a regular file stay. */
START_TEST(test_write_sweeps_stale_temporaries)
{
	struct pipette_err err;
	struct pipette_file f;
	char path[128], p[192], names[1024];

	snprintf(path, sizeof(path), "%s/out.json", tmpdir);
	snprintf(p, sizeof(p), "%s/.out.json.tmp-AbC123", tmpdir);
	write_file(p, "{ half");
	aged(p, 2 * 3600);
	snprintf(p, sizeof(p), "%s/.out.json.tmp-young1", tmpdir);
	write_file(p, "{ at work");
	aged(p, 60);
	snprintf(p, sizeof(p), "%s/.other.json.tmp-old123", tmpdir);
	write_file(p, "{ another target");
	aged(p, 2 * 3600);
	snprintf(p, sizeof(p), "%s/.out.json.tmp-link12", tmpdir);
	ck_assert_int_eq(symlink("/nonexistent", p), 0);
	aged(p, 2 * 3600);
	snprintf(p, sizeof(p), "%s/.out.json.tmp-dir123", tmpdir);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	aged(p, 2 * 3600);
	ck_assert_msg(pipette_write_file(path, "--out", "{}\n", 3, 0644, 1, &err) == 0, "%s",
		      err.msg);
	hidden_names(names, sizeof(names));
	ck_assert_str_eq(names, ".other.json.tmp-old123\n.out.json.tmp-dir123\n"
			 ".out.json.tmp-link12\n.out.json.tmp-young1\n");
	ck_assert_int_eq(pipette_read_file(path, NULL, 64, &f, &err), 0);
	ck_assert_str_eq(f.data, "{}\n");
	pipette_file_free(&f);
	/* link mode (no replace): the same sweep, and "exists" leaves nothing */
	snprintf(p, sizeof(p), "%s/.out.json.tmp-AbC123", tmpdir);
	write_file(p, "{ half");
	aged(p, 2 * 3600);
	ck_assert_int_eq(pipette_write_file(path, "--out", "{}\n", 3, 0644, 0, &err), 1);
	hidden_names(names, sizeof(names));
	ck_assert_str_eq(names, ".other.json.tmp-old123\n.out.json.tmp-dir123\n"
			 ".out.json.tmp-link12\n.out.json.tmp-young1\n");
	/* another uid's stale temporary stays (needs root to make one) */
	if (geteuid() == 0) {
		write_file(p, "{ half");
		ck_assert_int_eq(chown(p, 4242, 4242), 0);
		aged(p, 2 * 3600);
		ck_assert_int_eq(pipette_write_file(path, "--out", "{}\n", 3, 0644, 1, &err), 0);
		ck_assert_int_eq(access(p, F_OK), 0);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("readfile");
	TCase *tc = tcase_create("readfile");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_read_and_digest);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_not_regular);
	tcase_add_test(tc, test_write_sweeps_stale_temporaries);
	suite_add_tcase(s, tc);
	return check_run(s);
}
