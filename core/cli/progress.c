/* pipette CLI: the progress line (progress.h). */
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Redraws per second at most: often enough to look alive, rarely enough
 * to cost nothing next to the work (a terminal write is microseconds). */
#define PROGRESS_HZ 10.0

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cli_progress_start(struct cli_progress *p, const char *prefix,
			struct pipette_progress *core)
{
	memset(p, 0, sizeof(*p));
	p->prefix = prefix;
	p->on = isatty(STDERR_FILENO) == 1;
	core->fn = p->on ? cli_progress_update : NULL;
	core->ctx = p;
}

void cli_progress_update(void *ctx, const char *what, long done, long total)
{
	struct cli_progress *p = ctx;
	double t = now_s();
	int same = !strncmp(p->what, what, sizeof(p->what) - 1);

	/* a new phase shows at once; within one, at most PROGRESS_HZ */
	if (!p->on || (same && p->drawn && t - p->last < 1.0 / PROGRESS_HZ))
		return;
	snprintf(p->what, sizeof(p->what), "%s", what);
	if (total > 0)
		fprintf(stderr, "\r%s: %s %ld/%ld\033[K", p->prefix, p->what, done, total);
	else
		fprintf(stderr, "\r%s: %s...\033[K", p->prefix, p->what);
	fflush(stderr);
	p->drawn = 1;
	p->last = t;
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->on && p->drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	p->drawn = 0;
	p->what[0] = '\0';
}
