/* pipette: what a training job measured, read from its log.
 *
 * Megatron-LM, NeMo 2.0 and torchtitan each print the time of every
 * training step and, when asked, the memory peaks of the ranks that log.
 * A log is a user's file: it is read with the bounded, hostile-input
 * discipline of every other input (pipette_readfile), and every error names
 * the file, the line and what was expected there. */
#ifndef PIPETTE_TRAINLOG_H
#define PIPETTE_TRAINLOG_H

#include "inputs/error.h"
#include "inputs/readfile.h"
#include "inputs/stack.h"

/* One training step as the stack reported it. */
struct pipette_trainlog_step {
	long iteration;		/* the stack's own step number */
	double step_s;		/* wall time of the step, seconds (0: see torchtitan below) */
	double tokens_per_s;	/* when the stack prints it (torchtitan), else 0 */
	/* A report may be the mean of several steps: Megatron prints every
	 * --log-interval steps the mean over the steps since its last line,
	 * NeMo's ProgressPrinter the mean over its log interval, torchtitan
	 * the rate since its last line.  `first` is the first step the mean
	 * covers (== iteration for a report of one step); the steady state
	 * weighs a report by iteration - first + 1 steps. */
	long first;
	int run;		/* 0, 1, ...: a restart in the same log begins the next run */
	long line;		/* the log line it was read from */
};

/* One memory report: the peak of one rank. */
struct pipette_trainlog_mem {
	int rank;		/* the global rank that printed it, -1 unknown */
	int stage;		/* its pipeline stage when the log says, -1 unknown */
	double allocated_gib;	/* peak allocated by the caching allocator (0 when the
				 * stack does not print it: torchtitan) */
	double reserved_gib;	/* peak reserved (0 when the stack does not print it) */
	int local_rank;		/* torchrun's line prefix "[<role>N]:" names the local
				 * rank N (torchtitan's run_train.sh); -1 without it */
};

/* What a log states of its job's configuration, for a check against the
 * plan (pipette observe): 0 where it states nothing, -1 where runs of the
 * log state different values.  Megatron-LM prints its arguments
 * (world_size, tensor_, pipeline_model_parallel_size, context_parallel_
 * size, data_parallel_size, global_batch_size, seq_length); torchtitan
 * its device mesh (pp, dp_replicate, dp_shard, cp, tp; dp and world their
 * product) and its tokens per train step; NeMo's log none of them. */
struct pipette_trainlog_stated {
	long world, tp, pp, cp, dp, dp_replicate, dp_shard;
	long global_batch, seq_len;
	double tokens_per_step;
};

struct pipette_trainlog {
	enum pipette_stack_id stack;
	/* SHA-256 of the log's bytes: with the plan's hash, which job an
	 * observation is of (pipette observe --record keeps one per pair). */
	unsigned char sha256[PIPETTE_SHA256_LEN];
	struct pipette_trainlog_stated stated;
	long nsteps;
	struct pipette_trainlog_step *steps;	/* in log order */
	int nmem;
	struct pipette_trainlog_mem *mem;	/* the highest figures per rank (and
						 * torchrun prefix), each field's own peak */
	int nruns;		/* runs in the log (steps[].run < nruns) */
	/* torchtitan prints tokens per second per device, not the step time:
	 * step_s = tokens_per_step / (tokens_per_s x world_size) (trainlog.c),
	 * from the log's own "N tokens per train step" and "Building device
	 * mesh" lines when it has them (0 here and step_s 0 when it has not:
	 * pipette_trainlog_derive supplies them). */
	double tokens_per_step;
	long world_size;
	int step_rank;		/* the prefixed local rank whose steps were kept, -1 none */
};

/* Steady state: the steps after warm-up (the first `warmup` steps of each
 * run, and any report whose mean includes one of them), their median and
 * spread.  A report of the mean of k steps counts as k steps of that time. */
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
/* Characters of one line looked at (after its ANSI escapes are dropped),
 * and the raw bytes of one line read (trainlog.c); the plausible ranges of the numbers read
 * (their sources are in trainlog.c). */
#define PIPETTE_TRAINLOG_MAX_LINE 65536
#define PIPETTE_TRAINLOG_LINE_READ (4 * PIPETTE_TRAINLOG_MAX_LINE)
#define PIPETTE_TRAINLOG_MIN_STEP_S 1e-4
#define PIPETTE_TRAINLOG_MAX_STEP_S 86400.0
#define PIPETTE_TRAINLOG_MAX_GIB 4096.0
#define PIPETTE_TRAINLOG_MAX_TPS 1e10
#define PIPETTE_TRAINLOG_MAX_ITER 1000000000000L
/* The warm-up steps pipette_trainlog_steady skips by default. */
#define PIPETTE_TRAINLOG_WARMUP 10

/* Parse `path` as a log of `stack` (Megatron-LM and the zero-bubble fork
 * share Megatron's format; NeMo; torchtitan; any other stack is an error).
 * Lines of other shapes are skipped; a line that starts like a step or
 * memory report but does not parse is an error naming the file, the line
 * and the field.  No step at all is an error.
 * *out is allocated; free it with pipette_trainlog_destroy. */
int pipette_trainlog_read(const char *path, enum pipette_stack_id stack,
			  struct pipette_trainlog **out, struct pipette_err *err);
/* The same from a buffer (the fuzz harness and the tests); `name` is what
 * error messages call it. */
int pipette_trainlog_parse(const char *buf, size_t len, const char *name,
			   enum pipette_stack_id stack, struct pipette_trainlog **out,
			   struct pipette_err *err);
void pipette_trainlog_destroy(struct pipette_trainlog *l);

/* A log read as it grows (pipette trial follows a running job's log, which
 * may grow past PIPETTE_TRAINLOG_MAX_BYTES): its bytes are fed as they
 * come, in pieces of any size, and taken at any time, which gives what
 * pipette_trainlog_parse gives for the complete lines fed so far (their
 * SHA-256 included); a last line without its newline waits for it.  The
 * log's size has no bound: what is kept is the steps and memory reports
 * (at most PIPETTE_TRAINLOG_MAX_STEPS and PIPETTE_TRAINLOG_MAX_MEM) and
 * the first PIPETTE_TRAINLOG_LINE_READ bytes of the line not yet ended.
 * After an error in a line, feed and take return that error again.
 * `name` is what error messages call the log (copied). */
struct pipette_trainlog_reader;
int pipette_trainlog_reader_create(const char *name, enum pipette_stack_id stack,
				   struct pipette_trainlog_reader **out, struct pipette_err *err);
int pipette_trainlog_reader_feed(struct pipette_trainlog_reader *r, const char *buf, size_t len,
				 struct pipette_err *err);
/* The log so far (*out allocated: pipette_trainlog_destroy), or -1 as
 * pipette_trainlog_parse: no step yet is an error. */
int pipette_trainlog_reader_take(struct pipette_trainlog_reader *r, struct pipette_trainlog **out,
				 struct pipette_err *err);
void pipette_trainlog_reader_destroy(struct pipette_trainlog_reader *r);

/* The steady-state step time, skipping `warmup` steps (< 0: the default,
 * documented in trainlog.c with its source).  -1 when no step is left. */
int pipette_trainlog_steady(const struct pipette_trainlog *l, long warmup,
			    struct pipette_trainlog_steady *out, struct pipette_err *err);

/* torchtitan's step times from its tokens per second when the log does
 * not say how many tokens a step takes or how many GPUs ran it: the
 * caller's figures (the plan's global batch x sequence length, and its
 * GPU count) replace the log's. */
int pipette_trainlog_derive(struct pipette_trainlog *l, double tokens_per_step,
			    long world_size, struct pipette_err *err);

#endif
