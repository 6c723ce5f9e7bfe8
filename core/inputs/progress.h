/* pipette: how far a long computation has come, for a front end to show.
 *
 * The core never writes to a terminal (and the plugin never shows
 * progress): a long loop calls fn, when the caller set it, as it goes,
 * with what it is doing ("estimating configurations"), how many items are
 * done and how many there are (0: not known).  It may call often; the
 * front end decides how often to draw (core/cli/progress.h). */
#ifndef PIPETTE_PROGRESS_H
#define PIPETTE_PROGRESS_H

struct pipette_progress {
	void (*fn)(void *ctx, const char *what, long done, long total);
	void *ctx;
};

static inline void pipette_progress_report(const struct pipette_progress *p, const char *what,
					   long done, long total)
{
	if (p && p->fn)
		p->fn(p->ctx, what, done, total);
}

#endif
