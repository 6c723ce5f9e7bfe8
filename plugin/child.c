/* spank_pipette: running the planner in a child process.
 *
 * slurmstepd is root-owned and serves every task of the node: nothing the
 * user names (a FIFO, a file on a hung file system, a huge cache, a model
 * that makes the search explode) may block it or make it grow.  So the
 * plan is computed in a forked child that runs as the job's user with an
 * address-space limit and a CPU-time limit, and writes its result into a
 * pipe; the parent reads at most a bounded number of bytes before a
 * wall-clock deadline and kills the child if it is not done by then.  The
 * parent only ever holds the result text.
 *
 * The child never returns into slurmstepd's code: it leaves with _exit(),
 * so no atexit handler or stdio buffer of slurmstepd runs twice. */
#define _GNU_SOURCE	/* pipe2, setresuid, setresgid */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"

/* After SIGKILL the child must be reaped; a process stuck in an
 * uninterruptible sleep (a hung NFS server) cannot be, so the parent waits
 * this long and then leaves it: PR_SET_PDEATHSIG ends it with slurmstepd. */
#define REAP_GRACE_MS 2000

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Stack the child touches before its address-space limit: under
 * RLIMIT_AS a stack that still has to grow cannot, and the planner dies of
 * SIGSEGV (a crash, which the sanitizer builds report) where an allocation
 * would have failed cleanly with "out of memory".  The planner runs in 128
 * KiB of stack (`ulimit -s 128`: the 8 x 8 exact mapping, the 128-node
 * example, a 4096-node cache); eight times that.  Touching the lowest byte
 * of a frame that large grows the stack's mapping over all of it at once:
 * the address space is what RLIMIT_AS counts, and the pages are filled
 * later, inside the mapping, as the planner reaches them.  One page fault
 * where touching every page took 256 (0.8 ms of every step on the build
 * machine); measured the same: a child that touched the lowest byte, then
 * set RLIMIT_AS to its size plus 64 KiB, recursed through 800 KiB of
 * stack, one that touched nothing died of SIGSEGV. */
#define STACK_RESERVE (1u << 20)


static void __attribute__((noinline)) touch_stack(void)
{
	volatile char pad[STACK_RESERVE];

	pad[0] = 0;
	(void)pad;
}

/* In the child: become the job's user for good (user_init runs with only
 * the effective ids dropped, so the saved set-user-ID is still root), then
 * set the limits.  Returns a static message on failure. */
static const char *child_setup(const struct pipette_child_limits *lim)
{
	struct rlimit r;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		return "prctl(PR_SET_PDEATHSIG) failed";
	if (getuid() == 0 && lim->uid != 0) {
		/* Regain root only to give it up: real, effective and saved
		 * ids all become the user's. */
		if (seteuid(0) != 0 || setresgid(lim->gid, lim->gid, lim->gid) != 0 ||
		    setresuid(lim->uid, lim->uid, lim->uid) != 0)
			return "could not switch to the job's user";
		if (setuid(0) == 0)
			return "root privileges could not be dropped";
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return "prctl(PR_SET_NO_NEW_PRIVS) failed";
	if (lim->memory_mib > 0) {
		touch_stack();
		r.rlim_cur = r.rlim_max = (rlim_t)lim->memory_mib << 20;
		if (setrlimit(RLIMIT_AS, &r) != 0)
			return "setrlimit(RLIMIT_AS) failed";
	}
	if (lim->cpu_s > 0) {
		/* SIGXCPU at the soft limit, SIGKILL one second later. */
		r.rlim_cur = (rlim_t)lim->cpu_s;
		r.rlim_max = (rlim_t)lim->cpu_s + 1;
		if (setrlimit(RLIMIT_CPU, &r) != 0)
			return "setrlimit(RLIMIT_CPU) failed";
	}
	/* Best effort: a planner at normal priority is still correct. */
	if (lim->nice)
		(void)setpriority(PRIO_PROCESS, 0, lim->nice);
	/* Nothing the planner writes may land in a core file of root's. */
	r.rlim_cur = r.rlim_max = 0;
	(void)setrlimit(RLIMIT_CORE, &r);
	return NULL;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static __attribute__((noreturn)) void child_main(int fd, const struct pipette_child_limits *lim,
						 pipette_child_fn fn, void *arg)
{
	const char *why = child_setup(lim);
	char *text = NULL;
	size_t len = 0;
	FILE *out;
	int rc = -1;

	if (why) {
		write_all(fd, why, strlen(why));
		_exit(3);
	}
	out = open_memstream(&text, &len);
	if (out) {
		rc = fn(arg, out);
		if (fclose(out) != 0)
			rc = -1;
	}
	if (rc == 0 && text)
		write_all(fd, text, len);
	else
		write_all(fd, "planner failed to write its result", 34);
	_exit(rc == 0 ? 0 : 3);
}

/* Read until EOF, the size limit or the deadline. 0 at EOF, 1 on the
 * deadline, 2 past the size limit, -1 on a read error. */
static int read_result(int fd, char *buf, size_t max, size_t *len, double deadline)
{
	*len = 0;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		double left = deadline - now_ms();
		ssize_t r;
		int pr;

		if (left <= 0)
			return 1;
		pr = poll(&pfd, 1, left > 1e6 ? 1000000 : (int)left + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return -1;
		if (pr == 0)
			continue;
		if (*len >= max)
			return 2;
		r = read(fd, buf + *len, max - *len);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return 0;
		*len += (size_t)r;
	}
}

/* How long reap waits between two looks, doubling from the least to the
 * most.  The child closes its end of the pipe as it exits, so once the
 * parent has read EOF it is a zombie soon: measured on the 2-core build
 * machine under load (a child that touched 1 MiB), 0.1 to 12 ms later,
 * 1 ms on average, at once for over half of them.  A fixed sleep of the
 * most (2 ms) cost every step up to that much. */
#define REAP_POLL_MIN_US 50
#define REAP_POLL_MAX_US 2000

/* wait4 with a bound: 0 with the status and the child's CPU seconds, or
 * -1 if the child is still there after the grace period. */
static int reap(pid_t pid, int *status, double *cpu_s, int grace_ms)
{
	double end = now_ms() + grace_ms;
	struct rusage ru;
	useconds_t poll_us = REAP_POLL_MIN_US;

	for (;;) {
		pid_t w;

		memset(&ru, 0, sizeof(ru));
		w = wait4(pid, status, WNOHANG, &ru);

		*cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
			 ru.ru_stime.tv_usec / 1e6;

		if (w == pid)
			return 0;
		if (w < 0 && errno != EINTR)
			return -1;
		if (now_ms() >= end)
			return -1;
		usleep(poll_us);
		if (poll_us < REAP_POLL_MAX_US)
			poll_us *= 2;
	}
}

static int explain_status(int status, double cpu_s, const struct pipette_child_limits *lim,
			  const char *text, struct pipette_err *err)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);

		if (sig == SIGXCPU || (sig == SIGKILL && lim->cpu_s > 0 && cpu_s >= lim->cpu_s))
			return pipette_fail(err, "the planner used more than %ld s of CPU time "
					    "(plugstack plan_cpu=%ld) and was stopped", lim->cpu_s,
					    lim->cpu_s);
		if (lim->memory_mib > 0)
			return pipette_fail(err, "the planner died of signal %d (%s); its memory "
					    "limit is %ld MiB (plugstack plan_memory)", sig,
					    strsignal(sig), lim->memory_mib);
		return pipette_fail(err, "the planner died of signal %d (%s)", sig, strsignal(sig));
	}
	/* Exit 3: the child said why in its output. */
	if (text && *text)
		return pipette_fail(err, "the planner failed: %.400s", text);
	return pipette_fail(err, "the planner exited with status %d", WEXITSTATUS(status));
}

int pipette_child_run(const struct pipette_child_limits *lim, pipette_child_fn fn, void *arg,
		      char **result, size_t *result_len, struct pipette_err *err)
{
	int fds[2], status = 0, rv = -1, rr;
	double cpu_s = 0;
	size_t max = lim->result_max, len = 0;
	char *buf = NULL;
	pid_t pid;

	*result = NULL;
	*result_len = 0;
	buf = malloc(max + 1);
	if (!buf)
		return pipette_fail(err, "out of memory");
	if (pipe2(fds, O_CLOEXEC) != 0) {
		pipette_fail(err, "pipe: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		pipette_fail(err, "fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		goto out;
	}
	if (pid == 0) {
		close(fds[0]);
		child_main(fds[1], lim, fn, arg);
	}
	close(fds[1]);
	rr = read_result(fds[0], buf, max, &len, now_ms() + lim->timeout_s * 1e3);
	close(fds[0]);
	buf[len] = '\0';
	if (rr != 0)
		kill(pid, SIGKILL);
	if (reap(pid, &status, &cpu_s, rr != 0 ? REAP_GRACE_MS : (int)(lim->timeout_s * 1e3) + 1000)) {
		kill(pid, SIGKILL);
		pipette_fail(err, "the planner did not finish within %ld s (plugstack "
			     "plan_timeout=%ld); is a file it reads on a hung file system?",
			     lim->timeout_s, lim->timeout_s);
		goto out;
	}
	if (rr == 1) {
		pipette_fail(err, "the planner did not finish within %ld s (plugstack "
			     "plan_timeout=%ld) and was stopped", lim->timeout_s, lim->timeout_s);
		goto out;
	}
	if (rr == 2) {
		pipette_fail(err, "the planner's result is longer than %zu bytes", max);
		goto out;
	}
	if (rr < 0) {
		pipette_fail(err, "reading the planner's result: %s", strerror(errno));
		goto out;
	}
	if (explain_status(status, cpu_s, lim, buf, err))
		goto out;
	*result = buf;
	*result_len = len;
	buf = NULL;
	rv = 0;
out:
	free(buf);
	return rv;
}
