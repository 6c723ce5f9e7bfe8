/* pipette: what a training job measured, read from its log.
 *
 * Megatron-LM, NeMo 2.0 and torchtitan each print the time of every
 * training step and, when asked, the memory peaks of the ranks that log.
 * A log is a user's file: it is read with the bounded, hostile-input
 * discipline of every other input (pipette_readfile), and every error names
 * the file, the line and what was expected there. */
#ifndef PIPETTE_TRAINLOG_H
#define PIPETTE_TRAINLOG_H

#include "error.h"
#include "stack.h"

/* One training step as the stack reported it. */
struct pipette_trainlog_step {
	long iteration;		/* the stack's own step number */
	double step_s;		/* wall time of the step, seconds */
	double tokens_per_s;	/* when the stack prints it (torchtitan), else 0 */
};

/* One memory report: the peak of one rank. */
struct pipette_trainlog_mem {
	int rank;		/* the global rank that printed it, -1 unknown */
	int stage;		/* its pipeline stage when the log says, -1 unknown */
	double allocated_gib;	/* peak allocated by the caching allocator */
	double reserved_gib;	/* peak reserved (0 when the stack does not print it) */
};

struct pipette_trainlog {
	enum pipette_stack_id stack;
	long nsteps;
	struct pipette_trainlog_step *steps;	/* in log order */
	int nmem;
	struct pipette_trainlog_mem *mem;	/* the highest report per rank */
};

/* Steady state: the steps after warm-up (the first `warmup` steps, and any
 * step whose iteration precedes them), their median and spread. */
struct pipette_trainlog_steady {
	long used;		/* steps counted */
	long skipped;		/* warm-up steps left out */
	double median_s;
	double p10_s, p90_s;	/* 10th and 90th percentiles */
	double mad_s;		/* median absolute deviation */
};

/* The largest log read, and the most steps and memory reports kept. */
#define PIPETTE_TRAINLOG_MAX_BYTES (256L << 20)
#define PIPETTE_TRAINLOG_MAX_STEPS 1000000L
#define PIPETTE_TRAINLOG_MAX_MEM 65536

/* Parse `path` as a log of `stack` (Megatron-LM and the zero-bubble fork
 * share Megatron's format; NeMo; torchtitan).  Lines of other shapes are
 * skipped; a line that starts like a step or memory report but does not
 * parse is an error naming the file and line.  No step at all is an error.
 * *out is allocated; free it with pipette_trainlog_destroy. */
int pipette_trainlog_read(const char *path, enum pipette_stack_id stack,
			  struct pipette_trainlog **out, struct pipette_err *err);
/* The same from a buffer (the fuzz harness and the tests); `name` is what
 * error messages call it. */
int pipette_trainlog_parse(const char *buf, size_t len, const char *name,
			   enum pipette_stack_id stack, struct pipette_trainlog **out,
			   struct pipette_err *err);
void pipette_trainlog_destroy(struct pipette_trainlog *l);

/* The steady-state step time, skipping `warmup` steps (< 0: the default,
 * documented in trainlog.c with its source).  -1 when no step is left. */
int pipette_trainlog_steady(const struct pipette_trainlog *l, long warmup,
			    struct pipette_trainlog_steady *out, struct pipette_err *err);

#endif
