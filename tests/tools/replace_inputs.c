/* replace_inputs: replace the site's bandwidth cache and calibration at a
 * fixed pace, the writer of tests/integration/test_plugin_concurrency.sh's
 * storm (issue 28: "a cache replaced every 20 ms and a calibration replaced
 * every 50 ms").  A shell loop of `pipette bandwidth merge` and
 * `pipette calibrate --out` reaches one replacement every 170-410 ms on a
 * two-core machine under the storm's load (a process start each, at the
 * planners' priority); this program does the same replacements from one
 * process, on absolute deadlines, at a real-time priority.
 *
 * Each replacement goes through the writers' own library calls:
 *  - the cache as `pipette bandwidth merge -o OUT A` does (core/cli/
 *    cmd_bandwidth.c, do_merge): pipette_bwcache_lock, then
 *    pipette_bwcache_save_locked (versions kept, a temporary file renamed
 *    over OUT), then pipette_bwcache_unlock; A and B are loaded once with
 *    pipette_bwcache_load, as merge loads its first input;
 *  - the calibration as `pipette calibrate --out OUT` does (core/cli/
 *    cmd_calibrate.c): pipette_json_write_versioned of the document, at most
 *    PIPETTE_CALIBRATION_JSON_MAX bytes; A and B are calibration files that
 *    `calibrate --out` wrote into a new file (its document is then
 *    {schema, site}, which json-c writes back byte for byte).
 * Each file alternates between B and A (B first: the test starts from A).
 *
 * usage: replace_inputs --log FILE --stop FILE [--seconds S]
 *            [--cache OUT A B MS] [--calibration OUT A B MS]
 * Runs until FILE --stop names exists, S seconds pass (default 600) or
 * SIGTERM/SIGINT.  Each replacement appends "KIND END LATE" to the log: KIND
 * "cache" or "calibration", END the CLOCK_MONOTONIC second it finished (the
 * rename), LATE how many milliseconds after its deadline it started.  A
 * deadline missed by a whole period is skipped, not caught up in a burst.
 * Exit 0, or 1 after a writer's error (printed; the writers stop). */
#define _GNU_SOURCE	/* sched_setscheduler's SCHED_FIFO */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "inputs/bwcache.h"
#include "inputs/error.h"
#include "inputs/hardware.h"
#include "inputs/json.h"

#define NS_PER_S 1000000000LL
/* The periods this program accepts: 1 ms (below, the deadlines would be
 * finer than a scheduler tick of a 1000 Hz kernel) to an hour. */
#define MIN_PERIOD_MS 1
#define MAX_PERIOD_MS 3600000
/* The default and largest run time: the test stops it within a minute or
 * two; ten minutes ends a writer whose test was killed without its trap. */
#define DEFAULT_SECONDS 600
/* The lowest real-time priority (sched(7): SCHED_FIFO 1..99): above every
 * ordinary process (the planners, Slurm's daemons), below the kernel's
 * threads.  When real-time is refused (a container without CAP_SYS_NICE),
 * nice -10 instead (setpriority(2); -20 is the highest). */
#define RT_PRIORITY 1
#define FALLBACK_NICE (-10)

struct writer {
	const char *kind, *out, *src[2];
	int cache;			/* 1: the bandwidth cache; 0: the calibration */
	long long period_ns, next_ns;
	struct pipette_bwcache *bw[2];	/* the cache's two contents */
	struct json_object *doc[2];	/* the calibration's */
	int turn;			/* which of the two goes next: B (1) first */
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static int usage(const char *why)
{
	fprintf(stderr, "replace_inputs: %s\nusage: replace_inputs --log FILE --stop FILE "
		"[--seconds S] [--cache OUT A B MS] [--calibration OUT A B MS]\n", why);
	return 2;
}

/* The two contents of w->src, loaded once. */
static int load(struct writer *w)
{
	struct pipette_err err;
	int i;

	for (i = 0; i < 2; i++) {
		if (w->cache) {
			if (pipette_bwcache_load(w->src[i], &w->bw[i], &err) < 0)
				return fprintf(stderr, "replace_inputs: %s\n", err.msg), -1;
			continue;
		}
		w->doc[i] = pipette_json_read(w->src[i], "calibration", PIPETTE_CALIBRATION_JSON_MAX,
					      16, NULL, &err);
		if (!w->doc[i])
			return fprintf(stderr, "replace_inputs: %s\n", err.msg), -1;
	}
	return 0;
}

/* One replacement of w->out by the next content, through its writer. */
static int replace(struct writer *w, struct pipette_err *err)
{
	struct pipette_bwcache_lock *lock;
	int i = w->turn, rv;

	w->turn = !w->turn;
	if (!w->cache)
		return pipette_json_write_versioned(w->out, "--out", w->doc[i], 0644,
						    PIPETTE_CALIBRATION_JSON_MAX, err);
	/* do_merge's wait for the lock (cmd_bandwidth.c). */
	if (pipette_bwcache_lock(w->out, PIPETTE_BW_LOCK_WAIT_S, &lock, err))
		return -1;
	rv = pipette_bwcache_save_locked(w->bw[i], lock, err);
	pipette_bwcache_unlock(lock);
	return rv;
}

/* The option at argv[*i] and its four values: the writer's fields. */
static int parse_writer(struct writer *w, const char *kind, int argc, char **argv, int *i)
{
	char *end;
	long ms;

	if (*i + 4 >= argc)
		return usage("--cache and --calibration need OUT A B MS");
	w->kind = kind;
	w->cache = !strcmp(kind, "cache");
	w->out = argv[++*i];
	w->src[0] = argv[++*i];
	w->src[1] = argv[++*i];
	errno = 0;
	ms = strtol(argv[++*i], &end, 10);
	if (errno || *end || end == argv[*i] || ms < MIN_PERIOD_MS || ms > MAX_PERIOD_MS)
		return usage("MS: a whole number of milliseconds, 1 to 3600000");
	w->period_ns = ms * 1000000LL;
	w->turn = 1;
	return 0;
}

/* Real time if allowed, else nice; which one, for the log. */
static const char *raise_priority(void)
{
	struct sched_param sp = { .sched_priority = RT_PRIORITY };

	if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
		return "SCHED_FIFO 1";
	if (setpriority(PRIO_PROCESS, 0, FALLBACK_NICE) == 0)
		return "nice -10";
	return "the default priority (both SCHED_FIFO and nice -10 refused)";
}

/* The writer due first; every deadline missed by a whole period moves on
 * to the next one still ahead. */
static struct writer *next_due(struct writer *w, int n)
{
	long long now = now_ns();
	struct writer *first = NULL;
	int i;

	for (i = 0; i < n; i++) {
		if (now - w[i].next_ns >= w[i].period_ns)
			w[i].next_ns += (now - w[i].next_ns) / w[i].period_ns * w[i].period_ns;
		if (!first || w[i].next_ns < first->next_ns)
			first = &w[i];
	}
	return first;
}

static int run(struct writer *w, int n, FILE *log, const char *stop, long long end_ns)
{
	struct pipette_err err;
	struct timespec ts;
	struct writer *d;
	long long t;
	int i, count[2] = { 0, 0 };

	for (i = 0, t = now_ns(); i < n; i++)
		w[i].next_ns = t + w[i].period_ns;
	while (!stop_signal && access(stop, F_OK) != 0 && now_ns() < end_ns) {
		d = next_due(w, n);
		ts.tv_sec = d->next_ns / NS_PER_S;
		ts.tv_nsec = d->next_ns % NS_PER_S;
		if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
			continue;	/* a signal: look at the flags again */
		t = now_ns();
		if (replace(d, &err)) {
			fprintf(stderr, "replace_inputs: %s: %s\n", d->kind, err.msg);
			return 1;
		}
		count[d - w]++;
		fprintf(log, "%s %.6f %.3f\n", d->kind, now_ns() / 1e9, (t - d->next_ns) / 1e6);
		fflush(log);
		d->next_ns += d->period_ns;
	}
	for (i = 0; i < n; i++)
		printf("%s: %d replacements\n", w[i].kind, count[i]);
	return 0;
}

int main(int argc, char **argv)
{
	struct writer w[2];
	const char *logpath = NULL, *stop = NULL;
	long seconds = DEFAULT_SECONDS;
	int i, n = 0, rc = 1;
	FILE *log;

	memset(w, 0, sizeof(w));
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--log") && i + 1 < argc) {
			logpath = argv[++i];
		} else if (!strcmp(argv[i], "--stop") && i + 1 < argc) {
			stop = argv[++i];
		} else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			seconds = strtol(argv[++i], NULL, 10);
			if (seconds < 1 || seconds > DEFAULT_SECONDS)
				return usage("--seconds: 1 to 600");
		} else if ((!strcmp(argv[i], "--cache") || !strcmp(argv[i], "--calibration")) &&
			   n < 2) {
			if (parse_writer(&w[n], argv[i] + 2, argc, argv, &i))
				return 2;
			n++;
		} else {
			return usage(argv[i]);
		}
	}
	if (!logpath || !stop || !n)
		return usage("--log, --stop and a --cache or --calibration are needed");
	for (i = 0; i < n; i++)
		if (load(&w[i]))
			goto out;
	if (!(log = fopen(logpath, "a")))
		return fprintf(stderr, "replace_inputs: %s: %s\n", logpath, strerror(errno)), 1;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	fprintf(stderr, "replace_inputs: at %s\n", raise_priority());
	rc = run(w, n, log, stop, now_ns() + seconds * NS_PER_S);
	fclose(log);
out:
	for (i = 0; i < n; i++) {
		pipette_bwcache_destroy(w[i].bw[0]);
		pipette_bwcache_destroy(w[i].bw[1]);
		json_object_put(w[i].doc[0]);
		json_object_put(w[i].doc[1]);
	}
	return rc;
}
