/* Unit tests: the versions a replaced input keeps for the steps that
 * pinned it (versions.h): what a replacement keeps, what the reader finds,
 * what it refuses, and what the grace period sweeps. */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inputs/readfile.h"
#include "inputs/versions.h"

#include "check_run.h"

static char tmpdir[64], path[128], vdir[160];

static void setup(void)
{
	strcpy(tmpdir, "/tmp/test_versions.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/bw.json", tmpdir);
	snprintf(vdir, sizeof(vdir), "%s.versions", path);
	alarm(20);
}

static void teardown(void)
{
	char cmd[128];

	alarm(0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* The name a content gets: the first 16 hex digits of its SHA-256. */
static void name_of(const char *text, char out[PIPETTE_VERSION_HEX + 1])
{
	unsigned char sha[PIPETTE_SHA256_LEN];
	char hex[2 * PIPETTE_SHA256_LEN + 1];

	pipette_sha256(text, strlen(text), sha);
	pipette_sha256_hex(sha, hex);
	memcpy(out, hex, PIPETTE_VERSION_HEX);
	out[PIPETTE_VERSION_HEX] = '\0';
}

static void put(const char *text)
{
	struct pipette_err err = { .msg = "" };

	ck_assert_msg(pipette_versions_write_file(path, "--out", text, strlen(text), 0644, 1 << 20,
						  &err) == 0, "%s", err.msg);
}

static void expect_content(const char *file, const char *text)
{
	struct pipette_file f;

	ck_assert_int_eq(pipette_read_file(file, NULL, 1 << 20, &f, NULL), 0);
	ck_assert_str_eq(f.data, text);
	pipette_file_free(&f);
}

static int entries(const char *dir)
{
	char cmd[256];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

START_TEST(test_first_write_keeps_nothing)
{
	/* No file yet: no step can have pinned it, so no directory. */
	put("{\"a\": 1}\n");
	expect_content(path, "{\"a\": 1}\n");
	ck_assert_int_ne(access(vdir, F_OK), 0);
}
END_TEST

START_TEST(test_replacement_keeps_both)
{
	char a[PIPETTE_VERSION_HEX + 1], b[PIPETTE_VERSION_HEX + 1], found[256];
	struct pipette_err err = { .msg = "" };
	struct stat st;

	put("first\n");
	put("second\n");
	name_of("first\n", a);
	name_of("second\n", b);
	expect_content(path, "second\n");
	ck_assert_int_eq(entries(vdir), 2);
	/* The reader finds each by the pin (srun's 16 hex digits). */
	ck_assert_int_eq(pipette_versions_find(path, a, found, sizeof(found), &err), 1);
	expect_content(found, "first\n");
	ck_assert_int_eq(pipette_versions_find(path, b, found, sizeof(found), &err), 1);
	expect_content(found, "second\n");
	ck_assert_int_eq(stat(vdir, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0755);
	ck_assert_int_eq(stat(found, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0644);
	/* Neither a content never written nor a malformed pin. */
	ck_assert_int_eq(pipette_versions_find(path, "0123456789abcdef", found, sizeof(found),
					       &err), 0);
	ck_assert_int_eq(pipette_versions_find(path, "../bw.json", found, sizeof(found), &err), 0);
	ck_assert_int_eq(pipette_versions_find(path, "0123", found, sizeof(found), &err), 0);
}
END_TEST

/* A cache its group may write (0664): the versions are kept without the
 * group's write bit, so that a node reads them. */
START_TEST(test_group_writable_cache)
{
	char a[PIPETTE_VERSION_HEX + 1], found[256];
	struct pipette_err err = { .msg = "" };
	struct stat st;

	ck_assert_int_eq(pipette_versions_write_file(path, "--out", "one\n", 4, 0664, 1 << 20,
						     &err), 0);
	ck_assert_int_eq(chmod(path, 0664), 0);
	ck_assert_int_eq(pipette_versions_write_file(path, "--out", "two\n", 4, 0664, 1 << 20,
						     &err), 0);
	name_of("one\n", a);
	ck_assert_msg(pipette_versions_find(path, a, found, sizeof(found), &err) == 1, "%s",
		      err.msg);
	ck_assert_int_eq(stat(found, &st), 0);
	ck_assert_int_eq(st.st_mode & 022, 0);
}
END_TEST

/* A file some other tool wrote keeps its content when pipette replaces it. */
START_TEST(test_foreign_file_kept)
{
	char a[PIPETTE_VERSION_HEX + 1], found[256];
	struct pipette_err err = { .msg = "" };
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs("by cp\n", f);
	fclose(f);
	ck_assert_int_eq(pipette_versions_find(path, "0123456789abcdef", found, sizeof(found),
					       &err), 0);
	put("by pipette\n");
	name_of("by cp\n", a);
	ck_assert_int_eq(pipette_versions_find(path, a, found, sizeof(found), &err), 1);
	expect_content(found, "by cp\n");
}
END_TEST

/* Versions older than the grace period go at the next replacement; the
 * one just replaced stays however old it was (its time is when it stopped
 * being current), and so does the new one. */
START_TEST(test_grace_period_sweep)
{
	char a[PIPETTE_VERSION_HEX + 1], b[PIPETTE_VERSION_HEX + 1], c[PIPETTE_VERSION_HEX + 1];
	char file[256], tmp[256];
	struct timespec old[2] = { { time(NULL) - PIPETTE_VERSIONS_GRACE_S - 60, 0 },
				   { time(NULL) - PIPETTE_VERSIONS_GRACE_S - 60, 0 } };
	struct stat st;
	int fd;

	name_of("one\n", a);
	name_of("two\n", b);
	name_of("three\n", c);
	put("one\n");
	put("two\n");
	/* one: replaced 11 minutes ago; two: current all that time */
	snprintf(file, sizeof(file), "%s/%s", vdir, a);
	ck_assert_int_eq(utimensat(AT_FDCWD, file, old, 0), 0);
	snprintf(file, sizeof(file), "%s/%s", vdir, b);
	ck_assert_int_eq(utimensat(AT_FDCWD, file, old, 0), 0);
	/* a killed writer's temporary file, two hours old, and a young one */
	snprintf(tmp, sizeof(tmp), "%s/.tmp-AbCdEf", vdir);
	ck_assert_int_ge(fd = open(tmp, O_WRONLY | O_CREAT, 0600), 0);
	close(fd);
	old[0].tv_sec = old[1].tv_sec = time(NULL) - 7200;
	ck_assert_int_eq(utimensat(AT_FDCWD, tmp, old, 0), 0);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-young1", vdir);
	ck_assert_int_ge(fd = open(tmp, O_WRONLY | O_CREAT, 0600), 0);
	close(fd);
	put("three\n");
	snprintf(file, sizeof(file), "%s/%s", vdir, a);
	ck_assert_int_ne(access(file, F_OK), 0);
	snprintf(file, sizeof(file), "%s/%s", vdir, b);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_ge(st.st_mtime, time(NULL) - 60);
	snprintf(file, sizeof(file), "%s/%s", vdir, c);
	ck_assert_int_eq(access(file, F_OK), 0);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-AbCdEf", vdir);
	ck_assert_int_ne(access(tmp, F_OK), 0);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-young1", vdir);
	ck_assert_int_eq(access(tmp, F_OK), 0);
	ck_assert_int_eq(entries(vdir), 3);
}
END_TEST

/* No one but the file's owner may plant a version: a directory or a file
 * writable by others, a symbolic link, or something else than a regular
 * file is refused by the reader, and the writer refuses the directory. */
START_TEST(test_planted_versions_refused)
{
	char a[PIPETTE_VERSION_HEX + 1], found[256], file[256], other[256];
	struct pipette_err err = { .msg = "" };

	put("one\n");
	put("two\n");
	name_of("one\n", a);
	snprintf(file, sizeof(file), "%s/%s", vdir, a);

	ck_assert_int_eq(chmod(file, 0666), 0);
	ck_assert_int_eq(pipette_versions_find(path, a, found, sizeof(found), &err), -1);
	ck_assert_msg(strstr(err.msg, "writable by it alone"), "%s", err.msg);
	ck_assert_int_eq(chmod(file, 0644), 0);

	ck_assert_int_eq(chmod(vdir, 0777), 0);
	ck_assert_int_eq(pipette_versions_find(path, a, found, sizeof(found), &err), -1);
	ck_assert_msg(strstr(err.msg, "bw.json.versions: owned by uid"), "%s", err.msg);
	ck_assert_int_eq(pipette_versions_write_file(path, "--out", "x\n", 2, 0644, 1 << 20, &err),
			 -1);
	ck_assert_msg(strstr(err.msg, "--out: ") == err.msg && strstr(err.msg, "(remove it)"),
		      "%s", err.msg);
	expect_content(path, "two\n");		/* untouched */
	ck_assert_int_eq(chmod(vdir, 0755), 0);

	snprintf(other, sizeof(other), "%s/elsewhere", tmpdir);
	ck_assert_int_eq(rename(file, other), 0);
	ck_assert_int_eq(symlink(other, file), 0);
	ck_assert_int_eq(pipette_versions_find(path, a, found, sizeof(found), &err), -1);
	ck_assert_msg(strstr(err.msg, "a symbolic link"), "%s", err.msg);
	ck_assert_int_eq(unlink(file), 0);

	ck_assert_int_eq(mkfifo(file, 0644), 0);
	ck_assert_int_eq(pipette_versions_find(path, a, found, sizeof(found), &err), -1);
	ck_assert_msg(strstr(err.msg, "a FIFO"), "%s", err.msg);
	ck_assert_int_eq(unlink(file), 0);

	/* The directory a symbolic link to another: refused both ways. */
	snprintf(other, sizeof(other), "%s/realdir", tmpdir);
	ck_assert_int_eq(rename(vdir, other), 0);
	ck_assert_int_eq(symlink(other, vdir), 0);
	ck_assert_int_eq(pipette_versions_find(path, a, found, sizeof(found), &err), -1);
	ck_assert_msg(strstr(err.msg, "not a directory"), "%s", err.msg);
	ck_assert_int_eq(pipette_versions_write_file(path, "--out", "x\n", 2, 0644, 1 << 20, &err),
			 -1);
	ck_assert_msg(strstr(err.msg, "not a directory (remove it)"), "%s", err.msg);
	expect_content(path, "two\n");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("versions");
	TCase *tc = tcase_create("versions");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_first_write_keeps_nothing);
	tcase_add_test(tc, test_replacement_keeps_both);
	tcase_add_test(tc, test_group_writable_cache);
	tcase_add_test(tc, test_foreign_file_kept);
	tcase_add_test(tc, test_grace_period_sweep);
	tcase_add_test(tc, test_planted_versions_refused);
	suite_add_tcase(s, tc);
	return check_run(s);
}
