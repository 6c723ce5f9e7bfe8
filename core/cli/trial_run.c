/* pipette trial: one candidate as an srun step on the job's nodes, watched
 * through its log (the observe parsers, trainlog.h) until it has measured
 * its steps, cannot win, fails or reaches its share of the budget. */
#define _GNU_SOURCE	/* setenv, memmem */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inputs/readfile.h"
#include "inputs/trainlog.h"
#include "trial.h"

/* How often the log is read, and how long srun has after SIGTERM to end
 * the step before SIGKILL (srun forwards the signal to the tasks and waits
 * for slurmstepd; Slurm's KillWait defaults to 30 s, which a stopped
 * trial need not wait out: srun's own exit ends the step). */
#define POLL_MS 100
#define STOP_GRACE_S 10.0
/* The log is read in pieces of FOLLOW_CHUNK, at most FOLLOW_LOOK bytes a
 * look while the step runs (a look then takes a fraction of a second, and
 * the trial's deadline and judgement are checked between two), all of it
 * once the step ended.  OOM_TAIL: more than the longest of oom_marks, kept
 * from a piece's end for a mark that spans two. */
#define FOLLOW_CHUNK (1 << 20)
#define FOLLOW_LOOK (64L << 20)
#define OOM_TAIL 32

/* What PyTorch prints when the caching allocator cannot allocate:
 * "CUDA out of memory. Tried to allocate ..." (pytorch/pytorch,
 * c10/cuda/CUDACachingAllocator.cpp, the message of the OutOfMemoryError
 * it throws), and the exception's Python name, torch.OutOfMemoryError
 * (torch.cuda.OutOfMemoryError before 2.5). */
static const char *const oom_marks[] = { "CUDA out of memory", "OutOfMemoryError" };

double trial_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* "{args}" and "{steps}" in one word of the command: the plan's launch
 * arguments and the steps a trial runs (warm-up included). */
static char *expand_word(const char *w, const char *args, const char *steps)
{
	size_t len = strlen(w) + 1, n = 0;
	const char *p;
	char *out;

	for (p = w; (p = strchr(p, '{')); p++)
		len += strlen(args) + strlen(steps);
	if (!(out = malloc(len)))
		return NULL;
	for (p = w; *p;) {
		if (!strncmp(p, "{args}", 6)) {
			n += (size_t)sprintf(out + n, "%s", args);
			p += 6;
		} else if (!strncmp(p, "{steps}", 7)) {
			n += (size_t)sprintf(out + n, "%s", steps);
			p += 7;
		} else {
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
	return out;
}

static int push(char ***v, int *n, int *cap, char *s)
{
	if (!s)
		return -1;
	if (*n + 2 > *cap) {
		char **nv = realloc(*v, sizeof(char *) * (size_t)(*cap * 2 + 64));

		if (!nv) {
			free(s);
			return -1;
		}
		*v = nv;
		*cap = *cap * 2 + 64;
	}
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
	return 0;
}

static char *fmt(const char *f, const char *a)
{
	char *s = NULL;

	return asprintf(&s, f, a) < 0 ? NULL : s;
}

void trial_argv_free(char **argv, int argc)
{
	int i;

	for (i = 0; argv && i < argc; i++)
		free(argv[i]);
	free(argv);
}

/* The word "{args}" alone becomes the launch arguments, one word each. */
static int push_args(char ***v, int *n, int *cap, const char *args)
{
	char *copy = strdup(args), *tok, *save = NULL;
	int rc = copy ? 0 : -1;

	for (tok = copy ? strtok_r(copy, " ", &save) : NULL; tok && !rc;
	     tok = strtok_r(NULL, " ", &save))
		rc = push(v, n, cap, strdup(tok));
	free(copy);
	return rc;
}

char **trial_argv(const struct trial_ctx *x, const struct trial_cand *c, int *argc)
{
	char **v = NULL, args[4096] = "", num[64];
	int n = 0, cap = 0, i, rc = 0, tpn;

	tpn = pipette_plan_launch(c->plan) == PIPETTE_LAUNCH_SRUN ? x->gpus_per_node : 1;
	if (pipette_plan_launch_args(c->plan, args, sizeof(args)))
		args[0] = '\0';	/* no launch form: "{args}" is empty */
	snprintf(num, sizeof(num), "%d", x->nnodes);
	rc |= push(&v, &n, &cap, strdup("srun")) | push(&v, &n, &cap, fmt("--nodes=%s", num)) |
	      push(&v, &n, &cap, fmt("--nodelist=%s", x->nodelist));
	snprintf(num, sizeof(num), "%d", tpn);
	rc |= push(&v, &n, &cap, fmt("--ntasks-per-node=%s", num));
	snprintf(num, sizeof(num), "%d", x->gpus_per_node);
	rc |= push(&v, &n, &cap, fmt("--gpus-per-node=%s", num)) |
	      push(&v, &n, &cap, strdup("--kill-on-bad-exit=1"));
	if (x->plugin) {
		const struct pipette_config *cfg = pipette_plan_config(c->plan);
		char gb[32], seq[32];

		snprintf(gb, sizeof(gb), "%ld", cfg->global_batch);
		snprintf(seq, sizeof(seq), "%ld", cfg->seq_len);
		rc |= push(&v, &n, &cap, fmt("--pipette-model=%s", x->model)) |
		      push(&v, &n, &cap, fmt("--pipette-global-batch=%s", gb)) |
		      push(&v, &n, &cap, fmt("--pipette-seq-len=%s", seq)) |
		      push(&v, &n, &cap, fmt("--pipette-stack=%s", x->stack_name));
		if (x->bandwidth[0])
			rc |= push(&v, &n, &cap, fmt("--pipette-bandwidth=%s", x->bandwidth));
		if (x->mem_fraction[0])
			rc |= push(&v, &n, &cap, fmt("--pipette-mem-fraction=%s", x->mem_fraction));
		rc |= push(&v, &n, &cap, fmt("--pipette-plan-file=%s", c->file));
	}
	snprintf(num, sizeof(num), "%ld", x->warmup + x->steps);
	for (i = 0; i < x->ncmd && !rc; i++)
		rc = !strcmp(x->cmd[i], "{args}") ? push_args(&v, &n, &cap, args)
		     : push(&v, &n, &cap, expand_word(x->cmd[i], args, num));
	if (rc) {
		trial_argv_free(v, n);
		return NULL;
	}
	*argc = n;
	return v;
}

static int set_env(void *ctx, const char *name, const char *value)
{
	(void)ctx;
	return setenv(name, value, 1);
}

/* In the child: the log as stdout and stderr, its own process group (so
 * that a stop reaches srun and nothing else), the environment, srun. */
static void __attribute__((noreturn)) child(const struct trial_ctx *x, const struct trial_cand *c,
					    char **argv, int fd)
{
	char steps[32];
	int in = open("/dev/null", O_RDONLY);

	setpgid(0, 0);
	if (in >= 0)
		dup2(in, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	snprintf(steps, sizeof(steps), "%ld", x->warmup + x->steps);
	setenv("PIPETTE_TRIAL_STEPS", steps, 1);
	/* Without the plugin the plan's job variables are the step's
	 * environment (srun exports it to every task). */
	if (!x->plugin && (pipette_plan_job_env(c->plan, set_env, NULL) ||
			   setenv("PIPETTE_PLAN_FILE", c->file, 1))) {
		fprintf(stderr, "pipette trial: cannot set the plan's environment\n");
		_exit(127);
	}
	execvp(argv[0], argv);
	fprintf(stderr, "pipette trial: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* A trial's log, read as it grows: where the last look stopped, the
 * parser's state (trainlog.h, pipette_trainlog_reader) and whether an OOM
 * was seen.  The log may grow past what a whole-file read allows
 * (PIPETTE_TRAINLOG_MAX_BYTES): each byte is read once. */
struct follow {
	struct pipette_trainlog_reader *r;
	char *buf;
	off_t off;
	char tail[2 * OOM_TAIL];
	size_t ntail;
	int oom;
};

/* Whether buf[len] shows PyTorch running out of GPU memory; a mark that
 * began in the previous piece is found through f->tail. */
static void oom_in(struct follow *f, const char *buf, size_t len)
{
	size_t i, k = len < OOM_TAIL ? len : OOM_TAIL;

	memcpy(f->tail + f->ntail, buf, k);
	for (i = 0; i < sizeof(oom_marks) / sizeof(oom_marks[0]); i++)
		if (memmem(buf, len, oom_marks[i], strlen(oom_marks[i])) ||
		    memmem(f->tail, f->ntail + k, oom_marks[i], strlen(oom_marks[i])))
			f->oom = 1;
	if (len >= OOM_TAIL) {
		memcpy(f->tail, buf + len - OOM_TAIL, OOM_TAIL);
		f->ntail = OOM_TAIL;
	} else {	/* the last OOM_TAIL bytes of the old tail and buf */
		size_t keep = f->ntail + k > OOM_TAIL ? OOM_TAIL : f->ntail + k;

		memmove(f->tail, f->tail + f->ntail + k - keep, keep);
		f->ntail = keep;
	}
}

/* The log's bytes since the last look (at most FOLLOW_LOOK; all: to its
 * end) into the parser.  -1 when it cannot be read. */
static int follow_read(struct follow *f, const char *path, int all, struct pipette_err *err)
{
	struct pipette_err perr;
	long looked = 0;
	ssize_t n = 0;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return pipette_fail(err, "%s: %s", path, strerror(errno));
	while ((all || looked < FOLLOW_LOOK) &&
	       (n = pread(fd, f->buf, FOLLOW_CHUNK, f->off)) > 0) {
		oom_in(f, f->buf, (size_t)n);
		/* a report the parser refuses stays its error, which the next
		 * take returns; the rest is still read for an OOM */
		(void)pipette_trainlog_reader_feed(f->r, f->buf, (size_t)n, &perr);
		f->off += n;
		looked += n;
	}
	close(fd);
	return n < 0 ? pipette_fail(err, "%s: %s", path, strerror(errno)) : 0;
}

/* The log so far: the steady state of its complete lines.  0 with *ss
 * when it has steady steps, 1 when not yet, -1 (why in err) when it
 * cannot be read. */
static int read_log(const struct trial_ctx *x, const struct trial_cand *c, struct follow *f,
		    int all, struct pipette_trainlog_steady *ss, struct pipette_err *err)
{
	const struct pipette_config *cfg = pipette_plan_config(c->plan);
	struct pipette_trainlog *l = NULL;
	int rc = 1;

	if (follow_read(f, c->log, all, err))
		return -1;
	if (pipette_trainlog_reader_take(f->r, &l, err) == 0) {
		if ((x->stack != PIPETTE_STACK_TORCHTITAN ||
		     pipette_trainlog_derive(l, (double)cfg->global_batch * (double)cfg->seq_len,
					     pipette_plan_world(c->plan), err) == 0) &&
		    pipette_trainlog_steady(l, x->warmup, ss, err) == 0)
			rc = 0;
		pipette_trainlog_destroy(l);
	}
	return rc;
}

/* End the step: SIGTERM to srun's process group, SIGKILL after the grace. */
static int stop(pid_t pid)
{
	double end = trial_now() + STOP_GRACE_S;
	int status = 0;

	kill(-pid, SIGTERM);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (trial_now() > end) {
			kill(-pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		nap_ms(POLL_MS);
	}
	return status;
}

/* One look at a running trial: 1 when it must stop now (c->status and
 * c->note say why), else 0. */
static int judge(const struct trial_ctx *x, struct trial_cand *c,
		 const struct pipette_trainlog_steady *ss, int have)
{
	if (have && ss->used >= x->steps) {
		c->status = TRIAL_MEASURED;
		return 1;
	}
	if (have && x->best_s > 0 && ss->used >= x->stop_after &&
	    ss->median_s > x->best_s * (1 + x->noise)) {
		c->status = TRIAL_STOPPED;
		snprintf(c->note, sizeof(c->note), "stopped after %ld steady steps: %+.1f%% over "
			 "the fastest so far, beyond the %.0f%% noise", ss->used,
			 100 * (ss->median_s / x->best_s - 1), 100 * x->noise);
		return 1;
	}
	if (trial_now() < x->deadline)
		return 0;
	if (have && ss->used >= x->stop_after) {
		c->status = TRIAL_MEASURED;
		snprintf(c->note, sizeof(c->note), "cut at its share of the budget after %ld "
			 "steady steps", ss->used);
	} else {
		c->status = TRIAL_HUNG;
		snprintf(c->note, sizeof(c->note), "hung: %ld steady steps within its share of "
			 "the budget; stopped", have ? ss->used : 0L);
	}
	return 1;
}

/* The step ended by itself: how. */
static void ended(struct trial_cand *c, int status, int have, int oom,
		  const struct pipette_trainlog_steady *ss, const struct pipette_err *err)
{
	c->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (oom) {
		c->status = TRIAL_OOM;
		snprintf(c->note, sizeof(c->note), "out of GPU memory (exit status %d)",
			 c->exit_status);
	} else if (c->exit_status == 0 && have) {
		c->status = TRIAL_MEASURED;
		snprintf(c->note, sizeof(c->note), "ended by itself after %ld steady steps",
			 ss->used);
	} else if (c->exit_status == 0) {
		c->status = TRIAL_CRASHED;
		snprintf(c->note, sizeof(c->note), "ended without a steady step: %.400s", err->msg);
	} else {
		c->status = TRIAL_CRASHED;
		snprintf(c->note, sizeof(c->note), "crashed (exit status %d)", c->exit_status);
	}
}

/* The plugin's refusal ("pipette: NODE: ..."), kept as the note. */
static void refused(struct trial_cand *c)
{
	struct pipette_file f;
	const char *p, *e;

	if (pipette_read_file(c->log, NULL, 1 << 20, &f, NULL))
		return;
	/* slurmstepd's slurm_error on srun's stderr: "...: error: pipette: NODE: why" */
	if ((p = strstr(f.data, "error: pipette: "))) {
		p += 7;
		e = strchr(p, '\n');
		c->status = TRIAL_REFUSED;
		snprintf(c->note, sizeof(c->note), "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
	}
	pipette_file_free(&f);
}

/* Run the step and watch its log until it ends or must stop. */
static void watch(const struct trial_ctx *x, struct trial_cand *c, pid_t pid, struct follow *f)
{
	struct pipette_trainlog_steady ss;
	struct pipette_err err = { 0 };
	int status = 0, have = 0;

	memset(&ss, 0, sizeof(ss));
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		struct stat lst;

		/* read again only when the log grew, and all of it once the
		 * step ended */
		if (w == pid || stat(c->log, &lst) || lst.st_size != f->off)
			have = read_log(x, c, f, w == pid, &ss, &err) == 0;
		if (w == pid) {
			ended(c, status, have, f->oom, &ss, &err);
			break;
		}
		if (judge(x, c, &ss, have)) {
			stop(pid);
			break;
		}
		nap_ms(POLL_MS);
	}
	if (have) {
		c->measured_s = ss.median_s;
		c->p10_s = ss.p10_s;
		c->p90_s = ss.p90_s;
		c->steps = ss.used;
	}
	if (c->status == TRIAL_CRASHED && !have)
		refused(c);
}

int trial_run(const struct trial_ctx *x, struct trial_cand *c)
{
	struct follow f = { .r = NULL };
	struct pipette_err err;
	double t0 = trial_now();
	char **argv;
	int argc = 0, fd = -1;
	pid_t pid = -1;

	if (!(argv = trial_argv(x, c, &argc)))
		return -1;
	if (pipette_trainlog_reader_create(c->log, x->stack, &f.r, &err) == 0 &&
	    (f.buf = malloc(FOLLOW_CHUNK)) &&
	    (fd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) >= 0)
		pid = fork();
	if (pid == 0)
		child(x, c, argv, fd);
	if (fd >= 0)
		close(fd);
	trial_argv_free(argv, argc);
	if (pid > 0) {
		setpgid(pid, pid);
		c->exit_status = -1;
		watch(x, c, pid, &f);
		c->wall_s = trial_now() - t0;
	}
	pipette_trainlog_reader_destroy(f.r);
	free(f.buf);
	return pid > 0 ? 0 : -1;
}

int trial_self(char *const *args, const char *out_path, char *err_buf, size_t len)
{
	int ep[2] = { -1, -1 }, status = 0;
	size_t n = 0;
	pid_t pid;

	if (err_buf && pipe(ep))
		return -1;
	if ((pid = fork()) < 0) {
		if (err_buf) {
			close(ep[0]);
			close(ep[1]);
		}
		return -1;
	}
	if (pid == 0) {
		if (out_path) {
			int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

			if (fd < 0 || dup2(fd, 1) < 0)
				_exit(127);
		}
		if (err_buf && dup2(ep[1], 2) < 0)
			_exit(127);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	if (err_buf) {
		ssize_t r;

		close(ep[1]);
		while (n + 1 < len && (r = read(ep[0], err_buf + n, len - 1 - n)) > 0)
			n += (size_t)r;
		err_buf[n] = '\0';
		close(ep[0]);
	}
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
