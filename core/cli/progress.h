/* pipette CLI: a progress line on the terminal for work that takes more
 * than a moment (a plan on thousands of nodes, the probe's rounds, a
 * calibration over a large store):
 *
 *     pipette: estimating configurations 1234/5678
 *
 * on stderr, redrawn in place ("\r") at most PROGRESS_HZ times a second,
 * and only when stderr is a terminal (isatty): a redirected stderr, a log
 * file or a pipe never gets it, nor does the plugin, which has no terminal.
 * cli_progress_end clears the line before the command prints its answer. */
#ifndef PIPETTE_CLI_PROGRESS_H
#define PIPETTE_CLI_PROGRESS_H

#include "inputs/progress.h"

struct cli_progress {
	int on;			/* stderr is a terminal */
	int drawn;		/* a line is on the screen */
	double last;		/* when it was drawn (monotonic s) */
	const char *prefix;	/* "pipette", "pipette-probe" */
	char what[80];		/* the phase drawn last */
};

/* Start: *core gets the callback to hand to the core, with fn NULL when
 * stderr is not a terminal. */
void cli_progress_start(struct cli_progress *p, const char *prefix,
			struct pipette_progress *core);
/* The callback (ctx: the struct cli_progress). */
void cli_progress_update(void *ctx, const char *what, long done, long total);
/* Clear the line (if one was drawn). */
void cli_progress_end(struct cli_progress *p);

#endif
