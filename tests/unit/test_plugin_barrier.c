/* Unit tests: the nodes of a step agree before any task starts
 * (plugin/barrier.c, plugstack step_barrier).  Each "node" is a process,
 * as each is a slurmstepd on its own host: every one must reach the same
 * decision, whichever node fails, is late or never comes. */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"

#include "check_run.h"

#define N 4

static char root[64];
static char *const names[N] = { "node1", "node2", "node3", "node4" };

static void setup(void)
{
	strcpy(root, "/tmp/test_barrier.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	alarm(30);
}

static void teardown(void)
{
	char cmd[128];

	alarm(0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

static struct pipette_barrier args(int node, const char *key, long wait_ms, const char *failure)
{
	return (struct pipette_barrier){
		.root = root, .root_owner = (unsigned)getuid(), .uid = (unsigned)getuid(),
		.key = key, .nodes = names, .nnodes = N, .node_id = node, .wait_ms = wait_ms,
		.failure = failure,
	};
}

/* Run node `node` in a child process, after delay_ms, its line into
 * out[node] (read by collect). */
static pid_t start(int node, const char *key, long wait_ms, const char *failure, long delay_ms,
		   int *fd)
{
	int p[2];
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct pipette_barrier b = args(node, key, wait_ms, failure);
		struct timespec d = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };
		FILE *out;

		close(p[0]);
		nanosleep(&d, NULL);
		out = fdopen(p[1], "w");
		_exit(out && pipette_barrier_run(&b, out) == 0 && fclose(out) == 0 ? 0 : 1);
	}
	close(p[1]);
	*fd = p[0];
	return pid;
}

static void collect(pid_t pid, int fd, char *line, size_t len)
{
	ssize_t n, got = 0;
	int status;

	while ((n = read(fd, line + got, len - 1 - (size_t)got)) > 0)
		got += n;
	line[got] = '\0';
	close(fd);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "node exited %d", status);
}

/* Every node at once, with the failures given (NULL: planned), each
 * starting after delay[i] ms (-1: never). */
static void run_all(const char *key, long wait_ms, const char *const failure[N],
		    const long delay[N], char line[N][512])
{
	pid_t pid[N];
	int fd[N], i;

	for (i = 0; i < N; i++)
		if (delay[i] >= 0)
			pid[i] = start(i, key, wait_ms, failure[i], delay[i], &fd[i]);
	for (i = 0; i < N; i++)
		if (delay[i] >= 0)
			collect(pid[i], fd[i], line[i], sizeof(line[i]));
}

START_TEST(test_all_planned)
{
	const char *failure[N] = { NULL, NULL, NULL, NULL };
	const long delay[N] = { 0, 50, 10, 100 };
	char line[N][512];
	int i;

	run_all("00000000000000a1", 5000, failure, delay, line);
	for (i = 0; i < N; i++)
		ck_assert_str_eq(line[i], "ok\n");
}
END_TEST

/* node3 failed: every node that planned fails too, and the first of them
 * (node1) is named to say why, with node3's reason. */
START_TEST(test_one_failure_fails_all)
{
	const char *failure[N] = { NULL, NULL, "planner timed out (plan_timeout=1)", NULL };
	const long delay[N] = { 0, 0, 150, 0 };
	char line[N][512];

	run_all("00000000000000b2", 5000, failure, delay, line);
	ck_assert_str_eq(line[0], "fail 0\tnode3: planner timed out (plan_timeout=1)\n");
	ck_assert_str_eq(line[1], line[0]);
	ck_assert_str_eq(line[3], line[0]);
	ck_assert_str_eq(line[2], "fail -1\tnode3: planner timed out (plan_timeout=1)\n");
}
END_TEST

/* node4 never comes: the others give up after the wait and fail, naming
 * it; when it comes late, its record is decided already and it fails too.
 * With the first node failed, the first that planned (node2) speaks. */
START_TEST(test_absent_node)
{
	const char *failure[N] = { "no GPUs", NULL, NULL, NULL };
	const long delay[N] = { 0, 0, 0, -1 };
	const long late[N] = { -1, -1, -1, 0 };
	char line[N][512];
	double t0 = (double)time(NULL);

	run_all("00000000000000c3", 300, failure, delay, line);
	ck_assert_str_eq(line[1], "fail 1\tnode1: no GPUs\n");
	ck_assert_str_eq(line[2], line[1]);
	ck_assert_double_le((double)time(NULL) - t0, 5);
	run_all("00000000000000c3", 300, failure, late, line);
	ck_assert_str_eq(line[3], "fail 1\tnode1: no GPUs\n");

	/* Only node4 missing: the others say it did not plan in time. */
	{
		const char *none[N] = { NULL, NULL, NULL, NULL };

		run_all("00000000000000c4", 300, none, delay, line);
		ck_assert_str_eq(line[0], "fail 0\tnode4: did not plan within 1 s (plugstack "
					  "step_barrier)\n");
		ck_assert_str_eq(line[2], line[0]);
		run_all("00000000000000c4", 300, none, late, line);
		ck_assert_str_eq(line[3], line[0]);
	}
}
END_TEST

/* The directory is the plan cache's kind: one another user could write
 * (or a record that is not this user's, or writable by others) is an
 * error of the node, never a decision. */
START_TEST(test_unsafe_directory)
{
	const char *failure[N] = { NULL, NULL, NULL, NULL };
	const long one[N] = { 0, -1, -1, -1 };
	char line[N][512], rec[256];
	int fd;

	ck_assert_int_eq(chmod(root, 0777), 0);
	run_all("00000000000000d5", 100, failure, one, line);
	ck_assert_msg(!strncmp(line[0], "error\t", 6), "%s", line[0]);
	ck_assert_int_eq(chmod(root, 0700), 0);

	snprintf(rec, sizeof(rec), "%s/%u/barrier-00000000000000d6.1", root, (unsigned)getuid());
	run_all("00000000000000d5", 100, failure, one, line);	/* makes ROOT/UID */
	ck_assert_int_ge(fd = open(rec, O_WRONLY | O_CREAT, 0666), 0);
	ck_assert_int_eq(write(fd, "ok\n", 3), 3);
	ck_assert_int_eq(fchmod(fd, 0666), 0);
	close(fd);
	run_all("00000000000000d6", 1000, failure, one, line);
	ck_assert_msg(!strncmp(line[0], "error\tstep_barrier: ", 20) &&
		      strstr(line[0], "writable by group or others"), "%s", line[0]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("plugin_barrier");
	TCase *tc = tcase_create("barrier");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_all_planned);
	tcase_add_test(tc, test_one_failure_fails_all);
	tcase_add_test(tc, test_absent_node);
	tcase_add_test(tc, test_unsafe_directory);
	suite_add_tcase(s, tc);
	return check_run(s);
}
