/* pipette: training-log parsers (trainlog.h).
 *
 * Every format below was read from the stacks' sources at these commits
 * (the line numbers are theirs):
 *  [MLM]  NVIDIA/Megatron-LM @d98e8a64dd (2026-08-22)
 *  [M22]  NVIDIA/Megatron-LM @d63c254127 (2022-08-16), the Megatron of the
 *         2021-22 papers (megatron-2022)
 *  [ZB]   sail-sg/zero-bubble-pipeline-parallelism @39f2c186a2 (megatron-zb)
 *  [NEMO] NVIDIA/NeMo @8cfedd7203 (2025-09-20)
 *  [PL]   Lightning-AI/pytorch-lightning @7f0c3436cd
 *  [TT]   pytorch/torchtitan @b5bcd76c66 (2026-08-21)
 *  [TT24] pytorch/torchtitan @b39b8a47e9 (2024-11, before "wps" became "tps")
 *  [PT]   pytorch/pytorch @ca70f656c9 (torchrun's line prefix)
 *  [MB]   NVIDIA-NeMo/Megatron-Bridge @067f987df (megatron-bridge)
 *
 * Megatron-LM (megatron, megatron-zb, megatron-2022).  The last rank
 * prints (print_rank_last, [MLM] training/utils/common_utils.py:493-499)
 *   " [%Y-%m-%d %H:%M:%S.%f] iteration {:8d}/{:8d} | consumed samples: ...
 *    | elapsed time per iteration (ms): {:.1f} | ... | lm loss: ... |"
 * ([MLM] training/training.py:3567-3575; no ".%f" in [ZB]
 * training/training.py:907-913; no time stamp in [M22] training.py:614-619)
 * every --log-interval iterations ([MLM] training.py:3539).  The time is
 * the mean over the iterations since the last line: the interval timer's
 * time over advanced + skipped iterations ([MLM] training.py:3366,
 * 3547-3548; [M22] training.py:547-548, 608-609).  [MLM] also prints the
 * first iteration of a run (training.py:3539, "or is_first_iteration")
 * without resetting the timer (training.py:3289, 3547), so the next line's
 * mean includes that first step; trainlog tells that line by its iteration,
 * which is no multiple of the log interval (the gcd of the later lines).
 * The ranks of data-parallel rank 0 print
 *   "[Rank {}] (after {} iterations) memory (MB) | allocated: X
 *    | max allocated: X | reserved: X | max reserved: X"
 * ([MLM] training/utils/common_utils.py:321-334, values "{:.2f}"; [M22]
 * utils.py:95-106 and [ZB] training/utils.py:122-133, values "{}"), read
 * as the peaks (max allocated, max reserved).  Rank 0 prints the arguments,
 * "  {name} {dots} {value}" ([MLM] training/arguments.py:1994-2001; [M22]
 * arguments.py:335-343): pipeline_model_parallel_size and world_size give
 * a rank's stage.  The pipeline is the outermost rank axis (order
 * "tp-cp-ep-dp-pp", [MLM] training/initialize.py:395; [M22]
 * mpu/initialize.py:116, 185-187: ranks i, i + world/pp, ...), so
 * stage = rank / (world / pp); with use_tp_pp_dp_mapping True it is not
 * ("tp-cp-ep-pp-dp", the same line) and the stage stays unknown (-1) but
 * for rank 0, which is stage 0 in every order.  The arguments' header
 * begins a run.
 *
 * NeMo 2.0 (nemo).  Its ProgressPrinter replaces Lightning's progress bar
 * ([NEMO] lightning/pytorch/strategies/utils.py:146) and prints on global
 * rank 0 only (the same file, 148-149; [PL] src/lightning/pytorch/callbacks/
 * progress/progress_bar.py:177-178), every log interval (progress_printer.py
 * :215):
 *   "Training epoch {E}, iteration {n-1}/{total-1} | {metric}: {val} | ..."
 * (progress_printer.py:42, 140, with values "{val}" for whole numbers and
 * "{val:.4}" otherwise, 56-63), each metric the mean over the log interval
 * (progress_printer.py:82).  The step time is TimingCallback's
 * "train_step_timing in s" ([NEMO] utils/exp_manager.py:341, 370) and the
 * memory peaks, in bytes, MegatronStrategy's "max_memory_reserved" and
 * "max_memory_allocated" when log_memory_usage is set
 * (lightning/pytorch/strategies/megatron_strategy.py:786-812).  The
 * iteration printed is n-1, so the lines fall where n = iteration + 1 is a
 * multiple of the interval.  DeltaTimingCallback prints instead, for every
 * step, "Step {k}: train_step_timing in s={dt}" (exp_manager.py:450, 464);
 * the progress lines then carry no time.  Where a log has times of both
 * forms, those of the first one read count and the other's are ignored.
 *
 * torchtitan (torchtitan).  Every log_freq steps and at step 1
 * ([TT] components/metrics.py:367) the ranks that log print
 *   "[titan] ... - INFO - step: {step:2}  loss: {loss:8.5f}  grad_norm: ...
 *    memory: {max_reserved_gib:5.2f}GiB({pct:.2f}%)  tps: {round(tps):,}
 *    tflops: {tflops:,.2f}  mfu: {mfu:.2f}%"
 * in ANSI colours ([TT] metrics.py:528-535, tools/logging.py:21,
 * tools/utils.py:263-274; "wps:" for "tps:" in [TT24] train.py:394-399).
 * The memory is the peak reserved since the last line (metrics.py:531,
 * 541); torchtitan prints no allocated figure.  Ranks off the last
 * pipeline stage print the loss -1 ([TT] trainer.py:840).  torchtitan's
 * run_train.sh launches torchrun with --role rank --tee 3 (line 46), which
 * prefixes every line with "[rank{local_rank}]:" ([PT] torch/distributed/
 * elastic/multiprocessing/tail_log.py:36, 118): the local rank.  The steps
 * are read from one rank's lines: the first rank that prints a loss (the
 * last stage), else the first that prints a step; every rank's memory is
 * kept.  torchtitan prints no step time; it prints
 *   tps = ntokens_since_last_log / (time_delta x non_data_parallel_size)
 * ([TT] metrics.py:481-483), where ntokens_since_last_log counts the
 * tokens this rank loaded since the last line (trainer.py:662-663), i.e.
 * tokens_per_step / dp per step (every data-parallel rank loads its share
 * of a step's tokens, trainer.py:412-427, with dp = dp_replicate x dp_shard,
 * parallel_dims.py:280), and non_data_parallel_size = cp x tp x pp
 * (parallel_dims.py:660-661).  Hence the mean step time over the interval
 *   step_s = time_delta / steps = tokens_per_step / (tps x world_size),
 * world_size = pp x dp_replicate x dp_shard x cp x tp, both read from the
 * log when it has "Trainer is initialized with N tokens per DP rank, T
 * tokens per train step, ..." (trainer.py:621-629) and "Building device
 * mesh with parallelism: pp=, dp_replicate=, dp_shard=, cp=, tp=, ep="
 * (parallel_dims.py:274-278, after dp_shard -1 was resolved, line 179).
 * Without them (torchtitan before those lines, as [TT24]) step_s stays 0,
 * tokens_per_s holds the rate and pipette_trainlog_derive takes the two
 * figures from the caller.  tps is printed rounded to a whole number: the
 * step time is exact to 0.5 / tps.  "Training starts at step N"
 * (trainer.py:1022) begins a run.
 *
 * Every stack: a run also begins where the iteration does not increase
 * (a restarted job appending to the same log). */
#include "inputs/trainlog.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/sha2.h>

#include "inputs/limits.h"
#include "inputs/readfile.h"

/* Limits of trainlog.h and their sources:
 *  PIPETTE_TRAINLOG_MAX_LINE 64 KiB: above the longest report line,
 *    Megatron's iteration line with per-layer MoE metrics ([MLM]
 *    training.py:3630 appends one " name: value |" of about 40 bytes per
 *    metric and layer): 3 metrics x 256 layers is about 31 KB.
 *  PIPETTE_TRAINLOG_LINE_READ, 4 x PIPETTE_TRAINLOG_MAX_LINE: the raw bytes
 *    of a line read, room for a report of MAX_LINE characters in colours
 *    (torchtitan wraps each field in a pair of ANSI escapes of 5 bytes,
 *    [TT] tools/utils.py:263-274: about as many bytes as the fields'
 *    own); a longer line counts as longer than MAX_LINE, and its bytes
 *    past the limit are not looked at, so that a log followed as it grows
 *    (pipette_trainlog_reader) keeps at most this much of a line.
 *  PIPETTE_TRAINLOG_MAX_STEP_S, a day: published steps take seconds to
 *    minutes; a bound on the arithmetic, not a policy.
 *  PIPETTE_TRAINLOG_MIN_STEP_S, 0.1 ms: the shortest step Megatron can
 *    print ("{:.1f}" ms, [MLM] training.py:3567-3575); a training step of any
 *    stack launches the kernels of a forward and a backward pass of every
 *    layer and an optimizer step, each kernel launch some microseconds,
 *    so a shorter one is a misprint, not a measurement (and calibrate's
 *    store, calib.c, refuses times far below a step's).
 *  PIPETTE_TRAINLOG_MAX_GIB, 4 TiB: over ten times the largest GPU memory
 *    (288 GB: NVIDIA B300 and AMD MI355X datasheets).
 *  PIPETTE_TRAINLOG_MAX_TPS, 10^10 tokens/s per device: a model of 10^6
 *    parameters (6 x 10^6 FLOP per token) on a device of 10 PFLOP/s makes
 *    1.7 x 10^9.
 *  PIPETTE_TRAINLOG_MAX_ITER, 10^12: 30 years at 1 ms a step.
 *  Ranks: below the GPUs of the largest plan (limits.h); tokens per step:
 *  at most PIPETTE_MAX_GLOBAL_BATCH x PIPETTE_MAX_SEQ_LEN (limits.h).
 *
 * PIPETTE_TRAINLOG_WARMUP, the default warm-up: 10 steps.  NeMo's own
 * throughput figure warns that "Step time will be less stable for initial
 * steps (~10 steps)" ([NEMO] collections/common/metrics/perf_metrics.py
 * :120-121): the first steps pay for CUDA graph capture, torch.compile,
 * NCCL communicator set-up and the caching allocator's first allocations. */
#define MAX_RANK ((long)PIPETTE_MAX_NODES * PIPETTE_MAX_GPUS)
#define MAX_TOKENS ((double)PIPETTE_MAX_GLOBAL_BATCH * (double)PIPETTE_MAX_SEQ_LEN)
#define MIB_PER_GIB 1024.0
#define BYTES_PER_GIB 1073741824.0
/* Characters of one number (the longest "{}" of a Python float is 24). */
#define NUM_MAX 64
/* The memory reports' index: twice PIPETTE_TRAINLOG_MAX_MEM, a power of 2. */
#define MEM_SLOTS (2 * PIPETTE_TRAINLOG_MAX_MEM)

#define MLM_ELAPSED "elapsed time per iteration (ms):"
#define MB_MAX_ALLOC "mem-max-allocated-gigabytes"
#define MB_MAX_RESV "mem-max-reserved-gigabytes"
#define BYTES_PER_GB 1e9
#define MLM_ARGS_HEADER "------------------------ arguments ------------------------"
#define NEMO_TIMING "train_step_timing in s"
#define TT_MESH "Building device mesh with parallelism:"
#define TT_TOKENS " tokens per train step"

enum fmt { FMT_MEGATRON, FMT_NEMO, FMT_TITAN };

/* A step report as read, before the steps of one rank are kept. */
struct raw {
	long iteration, line;
	double step_s, tps;
	int rank;			/* torchrun's prefix, -1 none */
	unsigned char newrun;		/* a run's start banner came before it */
	unsigned char loss_known;	/* not torchtitan's -1 of an earlier stage */
};

struct ctx {
	const char *name;
	enum fmt fmt;
	long line;
	int trunc;			/* the line is longer than MAX_LINE */
	struct pipette_err *err;
	struct raw *raw;
	long nraw, capraw;
	struct pipette_trainlog_mem *mem;
	int nmem, capmem;
	int *slot;			/* (rank, local rank) -> index in mem */
	int newrun;
	long mlm_pp, mlm_world;		/* Megatron's arguments, 0 unknown */
	long mlm_interval;
	int mlm_tp_pp_dp;
	long tt_pp, tt_world;		/* torchtitan's mesh, 0 unknown */
	struct pipette_trainlog_stated stated;	/* over all runs */
	double tt_tokens;
	int nemo_kind;			/* 0 none yet, 1 ProgressPrinter, 2 DeltaTimingCallback */
	long nemo_untimed, nemo_untimed_line;
};

static int fail_at(struct ctx *c, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "NAME: line N: FIELD: what" */
static int fail_at(struct ctx *c, const char *field, const char *fmt, ...)
{
	char m[PIPETTE_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	return pipette_fail(c->err, "%s: line %ld: %s: %.400s", c->name, c->line, field, m);
}

static const char *blanks(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* The number at p after blanks into tok: its characters [0-9.eE+-], and
 * thousands separators ',' dropped where `commas` (Python's "{:,}").
 * Returns the end, or NULL when it is longer than NUM_MAX - 1. */
static const char *num_token(const char *p, int commas, char tok[NUM_MAX])
{
	size_t n = 0;

	for (p = blanks(p); *p && strchr("0123456789.eE+-,", *p); p++) {
		if (*p == ',') {
			if (!commas)
				break;
			continue;
		}
		if (n + 1 >= NUM_MAX)
			return NULL;
		tok[n++] = *p;
	}
	tok[n] = '\0';
	return p;
}

/* A number at *pp in [lo, hi] (lo excluded where `open`); *pp moves past it. */
static int read_num(struct ctx *c, const char **pp, const char *field, int commas,
		    double lo, double hi, int open, double *out)
{
	struct pipette_err e = { .msg = "" };
	char tok[NUM_MAX];
	const char *q = num_token(*pp, commas, tok);

	if (!q || !tok[0])
		return fail_at(c, field, "expected a number, got '%.24s'", blanks(*pp));
	/* "0x10": the token stops at the x, and would read as 0 */
	if (*q == 'x' || *q == 'X')
		return fail_at(c, field, "'%.*s' is not a decimal number",
			       (int)strcspn(blanks(*pp), " \t|,()"), blanks(*pp));
	if (pipette_parse_double(tok, lo, hi, out, field, &e) < 0)
		return pipette_fail(c->err, "%s: line %ld: %s", c->name, c->line, e.msg);
	if (open && *out <= lo)
		return fail_at(c, field, "%g is not above %g", *out, lo);
	*pp = q;
	return 0;
}

/* A whole number at *pp in [lo, hi]: digits only. */
static int read_int(struct ctx *c, const char **pp, const char *field, long lo, long hi,
		    long *out)
{
	struct pipette_err e = { .msg = "" };
	const char *p = blanks(*pp), *q = p;
	char tok[NUM_MAX];
	size_t n;

	while (isdigit((unsigned char)*q))
		q++;
	n = (size_t)(q - p);
	if (n == 0 || n >= NUM_MAX)
		return fail_at(c, field, "expected a whole number, got '%.24s'", p);
	memcpy(tok, p, n);
	tok[n] = '\0';
	if (pipette_parse_long(tok, lo, hi, out, field, &e) < 0)
		return pipette_fail(c->err, "%s: line %ld: %s", c->name, c->line, e.msg);
	*pp = q;
	return 0;
}

/* The text after `key` in msg, or NULL. */
static const char *after(const char *msg, const char *key)
{
	const char *p = strstr(msg, key);

	return p ? p + strlen(key) : NULL;
}

static int too_long(struct ctx *c, const char *what)
{
	return fail_at(c, what, "the line is longer than the %d bytes a report may have",
		       PIPETTE_TRAINLOG_MAX_LINE);
}

static int oom(struct ctx *c)
{
	return pipette_fail_code(c->err, PIPETTE_E_INTERNAL, "%s: line %ld: out of memory",
				 c->name, c->line);
}

static int add_step(struct ctx *c, long it, double step_s, double tps, int rank, int loss)
{
	struct raw *r;

	if (c->nraw == PIPETTE_TRAINLOG_MAX_STEPS)
		return fail_at(c, "step report", "more than %ld step reports in one log",
			       PIPETTE_TRAINLOG_MAX_STEPS);
	if (c->nraw == c->capraw) {
		long cap = c->capraw ? 2 * c->capraw : 256;

		if (cap > PIPETTE_TRAINLOG_MAX_STEPS)
			cap = PIPETTE_TRAINLOG_MAX_STEPS;
		if (!(r = realloc(c->raw, (size_t)cap * sizeof(*r))))
			return oom(c);
		c->raw = r;
		c->capraw = cap;
	}
	r = &c->raw[c->nraw++];
	r->iteration = it;
	r->line = c->line;
	r->step_s = step_s;
	r->tps = tps;
	r->rank = rank;
	r->newrun = (unsigned char)c->newrun;
	r->loss_known = (unsigned char)loss;
	c->newrun = 0;
	return 0;
}

static unsigned mem_hash(int rank, int local)
{
	unsigned h = (unsigned)rank * 2654435761u ^ (unsigned)local * 40503u;

	return (h ^ h >> 15) & (MEM_SLOTS - 1);
}

/* One memory report: the rank's entry keeps the highest figures. */
static int add_mem(struct ctx *c, int rank, int local, double alloc, double resv)
{
	struct pipette_trainlog_mem *m;
	unsigned h;
	int i;

	if (!c->slot) {
		if (!(c->slot = malloc(MEM_SLOTS * sizeof(*c->slot))))
			return oom(c);
		for (i = 0; i < MEM_SLOTS; i++)
			c->slot[i] = -1;
	}
	for (h = mem_hash(rank, local); c->slot[h] >= 0; h = (h + 1) & (MEM_SLOTS - 1)) {
		m = &c->mem[c->slot[h]];
		if (m->rank == rank && m->local_rank == local) {
			m->allocated_gib = fmax(m->allocated_gib, alloc);
			m->reserved_gib = fmax(m->reserved_gib, resv);
			return 0;
		}
	}
	if (c->nmem == PIPETTE_TRAINLOG_MAX_MEM)
		return fail_at(c, "memory report", "more than %d ranks report memory",
			       PIPETTE_TRAINLOG_MAX_MEM);
	if (c->nmem == c->capmem) {
		int cap = c->capmem ? 2 * c->capmem : 16;

		if (!(m = realloc(c->mem, (size_t)cap * sizeof(*m))))
			return oom(c);
		c->mem = m;
		c->capmem = cap;
	}
	m = &c->mem[c->nmem];
	m->rank = rank;
	m->local_rank = local;
	m->stage = -1;
	m->allocated_gib = alloc;
	m->reserved_gib = resv;
	c->slot[h] = c->nmem++;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Megatron-LM                                                         */

/* " iteration {:8d}/{:8d} |": the word, blanks, digits, '/', blanks,
 * digits, blanks, '|'.  Returns the first digit, or NULL. */
static const char *mlm_iteration(const char *msg)
{
	const char *h = msg, *p, *d;

	while ((h = strstr(h, "iteration")) != NULL) {
		p = h += 9;
		if (*p != ' ')
			continue;
		d = p = blanks(p);
		if (!isdigit((unsigned char)*p))
			continue;
		while (isdigit((unsigned char)*p))
			p++;
		if (*p++ != '/')
			continue;
		p = blanks(p);
		if (!isdigit((unsigned char)*p))
			continue;
		while (isdigit((unsigned char)*p))
			p++;
		if (*blanks(p) == '|')
			return d;
	}
	return NULL;
}

static int mlm_step(struct ctx *c, const char *msg, const char *d, int local)
{
	const char *p = d;
	double ms;
	long it;

	if (c->trunc)
		return too_long(c, "iteration report");
	if (read_int(c, &p, "iteration", 0, PIPETTE_TRAINLOG_MAX_ITER, &it) < 0)
		return -1;
	if (!(p = after(msg, MLM_ELAPSED)))
		return fail_at(c, "elapsed time per iteration (ms)",
			       "missing from the iteration report");
	if (read_num(c, &p, "elapsed time per iteration (ms)", 0,
		     PIPETTE_TRAINLOG_MIN_STEP_S * 1000.0, PIPETTE_TRAINLOG_MAX_STEP_S * 1000.0, 0,
		     &ms) < 0)
		return -1;
	return add_step(c, it, ms / 1000.0, 0.0, local, 1);
}

/* The two memory reports' peaks: Megatron-LM's in MiB, Megatron-Bridge's
 * in GB of 1e9 bytes (the head of this file). */
static const struct mem_form {
	const char *alloc, *resv;	/* the fields, as errors name them */
	double gib_per_unit;
} mem_forms[2] = {
	{ "max allocated", "max reserved", 1.0 / MIB_PER_GIB },
	{ MB_MAX_ALLOC, MB_MAX_RESV, BYTES_PER_GB / BYTES_PER_GIB },
};

/* The figure "| {name}: X" of a memory report, in GiB. */
static int mem_figure(struct ctx *c, const char *m, const char *name, double gib_per_unit,
		      double *gib)
{
	char key[64];
	const char *p;
	double v;

	snprintf(key, sizeof(key), "| %s:", name);
	if (!(p = after(m, key)))
		return fail_at(c, name, "missing from the memory report");
	if (read_num(c, &p, name, 0, 0.0, PIPETTE_TRAINLOG_MAX_GIB / gib_per_unit, 0, &v) < 0)
		return -1;
	*gib = v * gib_per_unit;
	return 0;
}

/* "[Rank {}] {name} memory (MB) | allocated: ... | max allocated: X |
 * reserved: ... | max reserved: X", or Megatron-Bridge's in GB (gb) */
static int mlm_memory(struct ctx *c, const char *msg, const char *m, int local, int gb)
{
	const struct mem_form *f = &mem_forms[gb != 0];
	const char *r = strstr(msg, "[Rank "), *p;
	double alloc, resv;
	long rank = -1;

	if (c->trunc)
		return too_long(c, "memory report");
	if (r && r < m) {
		p = r + 6;
		if (read_int(c, &p, "[Rank N]", 0, MAX_RANK - 1, &rank) < 0)
			return -1;
		if (*p != ']')
			return fail_at(c, "[Rank N]", "expected ']' after the rank, got '%.24s'", p);
	}
	if (mem_figure(c, m, f->alloc, f->gib_per_unit, &alloc) ||
	    mem_figure(c, m, f->resv, f->gib_per_unit, &resv))
		return -1;
	return add_mem(c, (int)rank, local, alloc, resv);
}

/* What a log states, over its runs: a second value unlike the first is
 * -1 (the runs were configured differently). */
static void state(long *field, long v)
{
	*field = !*field || *field == v ? v : -1;
}

static void state_tokens(double *field, double v)
{
	*field = *field == 0 || *field == v ? v : -1;
}

/* The Megatron arguments pipette reads: those that place a rank in the
 * pipeline, the log interval, and the configuration observe holds against
 * the plan. */
enum mlm_arg { ARG_MAPPING, ARG_PP, ARG_WORLD, ARG_INTERVAL, ARG_TP, ARG_CP, ARG_DP, ARG_GB,
	       ARG_SEQ, ARG_COUNT };

static const char *const mlm_keys[ARG_COUNT] = {
	"use_tp_pp_dp_mapping", "pipeline_model_parallel_size", "world_size", "log_interval",
	"tensor_model_parallel_size", "context_parallel_size", "data_parallel_size",
	"global_batch_size", "seq_length",
};

static void mlm_store(struct ctx *c, enum mlm_arg k, long v)
{
	struct pipette_trainlog_stated *s = &c->stated;
	long *const field[ARG_COUNT] = {
		[ARG_PP] = &s->pp, [ARG_WORLD] = &s->world, [ARG_TP] = &s->tp, [ARG_CP] = &s->cp,
		[ARG_DP] = &s->dp, [ARG_GB] = &s->global_batch, [ARG_SEQ] = &s->seq_len,
	};

	if (k == ARG_PP)
		c->mlm_pp = v;
	else if (k == ARG_WORLD)
		c->mlm_world = v;
	else if (k == ARG_INTERVAL)
		c->mlm_interval = v;
	if (field[k])
		state(field[k], v);
}

/* "  {name} {dots} {value}"; a value "None" states nothing. */
static int mlm_argument(struct ctx *c, const char *msg)
{
	const char *p = blanks(msg), *q;
	long v, hi;
	size_t n;
	int k;

	for (k = 0; k < ARG_COUNT; k++) {
		n = strlen(mlm_keys[k]);
		if (strncmp(p, mlm_keys[k], n) || p[n] != ' ' || p[n + 1] != '.')
			continue;
		for (q = p + n + 1; *q == '.'; q++)
			;
		if (*q != ' ')
			return 0;
		q = blanks(q);
		if (k == ARG_MAPPING) {
			if (strncmp(q, "True", 4) && strncmp(q, "False", 5))
				return fail_at(c, mlm_keys[k], "expected True or False, got '%.24s'", q);
			c->mlm_tp_pp_dp = *q == 'T';
			q += *q == 'T' ? 4 : 5;
		} else if (!strncmp(q, "None", 4) && !*blanks(q + 4)) {
			return 0;
		} else {
			hi = k == ARG_INTERVAL ? PIPETTE_TRAINLOG_MAX_ITER : k == ARG_GB ?
			     PIPETTE_MAX_GLOBAL_BATCH : k == ARG_SEQ ? PIPETTE_MAX_SEQ_LEN :
			     PIPETTE_MAX_PIN;
			if (read_int(c, &q, mlm_keys[k], 1, hi, &v) < 0)
				return -1;
			mlm_store(c, (enum mlm_arg)k, v);
		}
		if (*blanks(q))
			return fail_at(c, mlm_keys[k], "unexpected '%.24s' after the value",
				       blanks(q));
		return 0;
	}
	return 0;
}

static int mlm_line(struct ctx *c, const char *msg, int local)
{
	const char *p;

	if ((p = mlm_iteration(msg)))
		return mlm_step(c, msg, p, local);
	if ((p = strstr(msg, " memory (MB)")))
		return mlm_memory(c, msg, p, local, 0);
	if ((p = strstr(msg, " memory (GB)")))
		return mlm_memory(c, msg, p, local, 1);
	if (strstr(msg, MLM_ARGS_HEADER)) {
		c->newrun = 1;
		c->mlm_pp = c->mlm_world = c->mlm_interval = 0;
		c->mlm_tp_pp_dp = 0;
		return 0;
	}
	return mlm_argument(c, msg);
}

/* ------------------------------------------------------------------ */
/* NeMo 2.0                                                            */

/* "Training epoch {E}, iteration {n-1}/" at msg: the iteration's first
 * digit, or NULL. */
static const char *nemo_progress(const char *msg)
{
	const char *p = after(msg, "Training epoch "), *d;

	if (!p || !isdigit((unsigned char)*p))
		return NULL;
	while (isdigit((unsigned char)*p))
		p++;
	if (strncmp(p, ", iteration ", 12))
		return NULL;
	d = p += 12;
	if (!isdigit((unsigned char)*p))
		return NULL;
	while (isdigit((unsigned char)*p))
		p++;
	return *p == '/' ? d : NULL;
}

/* MegatronStrategy's peaks in bytes, " | max_memory_...: {val}". */
static int nemo_memory(struct ctx *c, const char *msg, int local)
{
	const char *a = after(msg, "| max_memory_allocated:");
	const char *r = after(msg, "| max_memory_reserved:");
	double alloc = 0, resv = 0;

	if (!a && !r)
		return 0;
	if (a && read_num(c, &a, "max_memory_allocated", 0, 0.0,
			  PIPETTE_TRAINLOG_MAX_GIB * BYTES_PER_GIB, 0, &alloc) < 0)
		return -1;
	if (r && read_num(c, &r, "max_memory_reserved", 0, 0.0,
			  PIPETTE_TRAINLOG_MAX_GIB * BYTES_PER_GIB, 0, &resv) < 0)
		return -1;
	/* Global rank 0 prints ([NEMO] strategies/utils.py:148-149), the
	 * first stage in every rank order. */
	return add_mem(c, 0, local, alloc / BYTES_PER_GIB, resv / BYTES_PER_GIB);
}

static int nemo_printer(struct ctx *c, const char *msg, const char *d, int local)
{
	const char *p = d;
	double s;
	long it;

	if (c->trunc)
		return too_long(c, "progress report");
	if (read_int(c, &p, "iteration", 0, PIPETTE_TRAINLOG_MAX_ITER, &it) < 0)
		return -1;
	if (nemo_memory(c, msg, local) < 0)
		return -1;
	if (!(p = after(msg, "| " NEMO_TIMING ":"))) {
		if (!c->nemo_untimed++)
			c->nemo_untimed_line = c->line;
		return 0;
	}
	/* Its memory is read in any case; its time only where the log's
	 * times are TimingCallback's. */
	if (c->nemo_kind == 2)
		return 0;
	c->nemo_kind = 1;
	if (read_num(c, &p, NEMO_TIMING, 0, PIPETTE_TRAINLOG_MIN_STEP_S,
		     PIPETTE_TRAINLOG_MAX_STEP_S, 0, &s) < 0)
		return -1;
	return add_step(c, it, s, 0.0, local, 1);
}

/* DeltaTimingCallback: "Step {k}: train_step_timing in s={dt}". */
static int nemo_delta(struct ctx *c, const char *msg, const char *t, int local)
{
	const char *p = t, *q;
	double s;
	long it;

	if (c->trunc)
		return too_long(c, "step timing");
	while (p > msg && isdigit((unsigned char)p[-1]))
		p--;
	if (p == t || p - msg < 5 || strncmp(p - 5, "Step ", 5))
		return fail_at(c, "Step", "expected 'Step N' before '%s'", NEMO_TIMING);
	q = p;
	if (read_int(c, &q, "Step", 0, PIPETTE_TRAINLOG_MAX_ITER, &it) < 0)
		return -1;
	p = t + strlen(": " NEMO_TIMING "=");
	if (read_num(c, &p, NEMO_TIMING, 0, PIPETTE_TRAINLOG_MIN_STEP_S,
		     PIPETTE_TRAINLOG_MAX_STEP_S, 0, &s) < 0)
		return -1;
	return add_step(c, it, s, 0.0, local, 1);
}

static int nemo_line(struct ctx *c, const char *msg, int local)
{
	const char *p;

	if ((p = nemo_progress(msg)))
		return nemo_printer(c, msg, p, local);
	if ((p = strstr(msg, ": " NEMO_TIMING "="))) {
		if (c->nemo_kind == 1)
			return 0;
		c->nemo_kind = 2;
		return nemo_delta(c, msg, p, local);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* torchtitan                                                          */

/* "step: {step:2}  loss:": the "step:" of a training report; NULL for
 * anything else, validation reports ("validate step:") included. */
static const char *tt_report(const char *msg)
{
	const char *h = msg, *p;

	while ((h = strstr(h, "step:")) != NULL) {
		p = h;
		h += 5;
		if (p > msg && p[-1] != ' ')
			continue;
		if (p - msg >= 9 && !strncmp(p - 9, "validate ", 9))
			return NULL;
		p = blanks(h);
		if (!isdigit((unsigned char)*p))
			continue;
		while (isdigit((unsigned char)*p))
			p++;
		if (!strncmp(blanks(p), "loss:", 5))
			return h;
	}
	return NULL;
}

static int tt_step(struct ctx *c, const char *msg, const char *s, int local)
{
	const char *p = s, *q;
	double loss, gib, tps;
	int known = 1;
	long it;

	if (c->trunc)
		return too_long(c, "step report");
	if (read_int(c, &p, "step", 0, PIPETTE_TRAINLOG_MAX_ITER, &it) < 0)
		return -1;
	p = blanks(p) + 5;
	/* A diverged run prints nan or inf ("{:8.5f}"): the rank is still the
	 * last stage's. */
	q = blanks(p);
	q += *q == '-';
	if (strncmp(q, "nan", 3) && strncmp(q, "inf", 3)) {
		if (read_num(c, &p, "loss", 0, -DBL_MAX, DBL_MAX, 0, &loss) < 0)
			return -1;
		known = loss >= 0;
	}
	if (!(p = after(msg, " memory:")))
		return fail_at(c, "memory", "missing from the step report");
	if (read_num(c, &p, "memory", 0, 0.0, PIPETTE_TRAINLOG_MAX_GIB, 0, &gib) < 0)
		return -1;
	if (strncmp(p, "GiB", 3))
		return fail_at(c, "memory", "expected GiB after the figure, got '%.24s'", p);
	if (!(p = after(msg, " tps:")) && !(p = after(msg, " wps:")))
		return fail_at(c, "tps", "missing from the step report");
	if (read_num(c, &p, "tps", 1, 0.0, PIPETTE_TRAINLOG_MAX_TPS, 1, &tps) < 0)
		return -1;
	if (add_step(c, it, 0.0, tps, local, known) < 0)
		return -1;
	return add_mem(c, -1, local, 0.0, gib);
}

/* "Building device mesh with parallelism: pp=, dp_replicate=, dp_shard=,
 * cp=, tp=, ep=": the pipeline degree and the world size. */
static int tt_mesh(struct ctx *c, const char *msg)
{
	static const char *const dims[] = { "pp=", "dp_replicate=", "dp_shard=", "cp=", "tp=" };
	const char *p = msg;
	long v, world = 1, dim[5];
	size_t k;

	if (c->trunc)
		return too_long(c, "device mesh");
	for (k = 0; k < sizeof(dims) / sizeof(dims[0]); k++) {
		if (!(p = after(p, dims[k])))
			return fail_at(c, dims[k], "missing from the device mesh line");
		if (read_int(c, &p, dims[k], 1, PIPETTE_MAX_PIN, &v) < 0)
			return -1;
		if (v > PIPETTE_MAX_PIN / world)
			return fail_at(c, dims[k], "the mesh has more than %ld ranks",
				       (long)PIPETTE_MAX_PIN);
		world *= v;
		dim[k] = v;
	}
	c->tt_pp = dim[0];
	c->tt_world = world;
	state(&c->stated.pp, dim[0]);
	state(&c->stated.dp_replicate, dim[1]);
	state(&c->stated.dp_shard, dim[2]);
	state(&c->stated.dp, dim[1] * dim[2]);
	state(&c->stated.cp, dim[3]);
	state(&c->stated.tp, dim[4]);
	state(&c->stated.world, world);
	return 0;
}

/* "Trainer is initialized with N tokens per DP rank, T tokens per train
 * step, ..." */
static int tt_tokens(struct ctx *c, const char *msg)
{
	const char *p = after(msg, " tokens per DP rank, ");

	if (c->trunc)
		return too_long(c, "tokens per train step");
	if (!p)
		return fail_at(c, "tokens per DP rank", "missing before the tokens per train step");
	if (read_num(c, &p, "tokens per train step", 0, 1.0, MAX_TOKENS, 0, &c->tt_tokens) < 0)
		return -1;
	if (strncmp(p, TT_TOKENS, strlen(TT_TOKENS)))
		return fail_at(c, "tokens per train step", "expected '%s' after the figure",
			       TT_TOKENS);
	state_tokens(&c->stated.tokens_per_step, c->tt_tokens);
	return 0;
}

static int tt_line(struct ctx *c, const char *msg, int local)
{
	const char *p;

	if ((p = tt_report(msg)))
		return tt_step(c, msg, p, local);
	if (strstr(msg, TT_MESH))
		return tt_mesh(c, msg);
	if (strstr(msg, "Trainer is initialized with ") && strstr(msg, TT_TOKENS))
		return tt_tokens(c, msg);
	if (strstr(msg, "Training starts at step "))
		c->newrun = 1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Lines                                                               */

/* Copy a line for parsing: ANSI control sequences (ESC '[' parameters,
 * then a final byte in 0x40-0x7e: ECMA-48 5.4) dropped, other control
 * bytes (a NUL, a carriage return) made blanks, at most MAX_LINE bytes
 * kept.  Returns 1 when the line was longer. */
static int clean_line(char *dst, const char *src, size_t n)
{
	size_t i = 0, k = 0;
	unsigned char b;

	while (i < n) {
		b = (unsigned char)src[i];
		if (b == 0x1b && i + 1 < n && src[i + 1] == '[') {
			for (i += 2; i < n && ((unsigned char)src[i] < 0x40 ||
					       (unsigned char)src[i] > 0x7e); i++)
				;
			i++;
			continue;
		}
		if (k == PIPETTE_TRAINLOG_MAX_LINE) {
			dst[k] = '\0';
			return 1;
		}
		dst[k++] = b < 0x20 || b == 0x7f ? ' ' : (char)b;
		i++;
	}
	dst[k] = '\0';
	return 0;
}

/* torchrun's "[{role}{local_rank}]:" at the start of the line ([PT]
 * tail_log.py:118): the local rank, and *msg past it; -1 without. */
static int local_prefix(const char *line, const char **msg)
{
	const char *p = line + 1;
	long r = 0;
	int digits = 0;

	*msg = line;
	if (*line != '[')
		return -1;
	while (isalpha((unsigned char)*p) || *p == '_' || *p == '-')
		p++;
	for (; isdigit((unsigned char)*p) && digits < 7; p++, digits++)
		r = 10 * r + (*p - '0');
	if (!digits || p[0] != ']' || p[1] != ':' || r >= MAX_RANK)
		return -1;
	*msg = p + 2;
	return (int)r;
}

/* One line of n bytes (at most LINE_READ of them read; `cut`: it had more
 * than were kept) with `line` as the room for its clean copy. */
static int parse_line(struct ctx *c, char *line, const char *src, size_t n, int cut)
{
	const char *msg;
	int local;

	c->line++;
	cut |= n > (size_t)PIPETTE_TRAINLOG_LINE_READ;
	if (n > (size_t)PIPETTE_TRAINLOG_LINE_READ)
		n = (size_t)PIPETTE_TRAINLOG_LINE_READ;
	c->trunc = clean_line(line, src, n) | cut;
	local = local_prefix(line, &msg);
	if (c->fmt == FMT_MEGATRON)
		return mlm_line(c, msg, local);
	if (c->fmt == FMT_NEMO)
		return nemo_line(c, msg, local);
	return tt_line(c, msg, local);
}

/* The lines of buf[len], with `line` as the room for their clean copies;
 * the last one may lack its newline. */
static int parse_lines(struct ctx *c, char *line, const char *buf, size_t len)
{
	const char *nl;
	size_t i = 0, n;
	int rc = 0;

	while (i < len && rc == 0) {
		nl = memchr(buf + i, '\n', len - i);
		n = nl ? (size_t)(nl - (buf + i)) : len - i;
		rc = parse_line(c, line, buf + i, n, 0);
		i += n + 1;
	}
	return rc;
}

/* ------------------------------------------------------------------ */
/* The log                                                             */

static long gcd(long a, long b)
{
	while (b) {
		long t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* The first step each report's mean covers, run by run (trainlog.h).  The
 * log interval is Megatron's log_interval argument where the log has it,
 * else the gcd of the run's counters after the first report (the lines
 * fall on its multiples), or with a single one the gap to it.  A first
 * report on a multiple covers the interval before it; off a multiple, it
 * covers its own step. */
static void assign_first(struct pipette_trainlog *l, enum fmt fmt, long interval)
{
	struct pipette_trainlog_step *s = l->steps;
	long a = 0, b, j, g, c0;
	/* NeMo's printer logs iteration n-1 where n is a multiple. */
	long off = fmt == FMT_NEMO ? 1 : 0;
	int noreset;

	while (a < l->nsteps) {
		for (b = a + 1; b < l->nsteps && s[b].run == s[a].run; b++)
			;
		for (g = 0, j = a + 1; j < b; j++)
			g = gcd(g, s[j].iteration + off);
		if (b == a + 2)
			g = s[a + 1].iteration - s[a].iteration;
		if (interval > 0 && b > a + 1)
			g = interval;
		c0 = s[a].iteration + off;
		s[a].first = s[a].iteration;
		noreset = 0;
		if (g > 0 && c0 % g == 0 && s[a].iteration - g + 1 >= 0)
			s[a].first = s[a].iteration - g + 1;
		else if (g > 0)
			/* A line off the interval: Megatron's first-iteration
			 * report, which does not reset the timer. */
			noreset = fmt == FMT_MEGATRON;
		for (j = a + 1; j < b; j++) {
			s[j].first = noreset ? s[j - 1].first : s[j - 1].iteration + 1;
			noreset = 0;
		}
		a = b;
	}
}

/* The rank whose steps are kept: the first that prints a loss, else the
 * first that prints a step. */
static int timing_rank(const struct ctx *c)
{
	long i;

	for (i = 0; i < c->nraw; i++)
		if (c->raw[i].loss_known)
			return c->raw[i].rank;
	return c->raw[0].rank;
}

static int keep_steps(struct ctx *c, struct pipette_trainlog *l)
{
	struct pipette_trainlog_step *s;
	int rank = timing_rank(c), newrun = 0, run = -1;
	long i, n = 0;

	for (i = 0; i < c->nraw; i++)
		n += c->raw[i].rank == rank;
	if (!(l->steps = calloc((size_t)n, sizeof(*l->steps))))
		return oom(c);
	for (i = 0; i < c->nraw; i++) {
		const struct raw *r = &c->raw[i];

		newrun |= r->newrun;
		if (r->rank != rank)
			continue;
		s = &l->steps[l->nsteps];
		if (run < 0 || newrun || r->iteration <= s[-1].iteration)
			run++;
		newrun = 0;
		s->iteration = r->iteration;
		s->line = r->line;
		s->step_s = r->step_s;
		s->tokens_per_s = r->tps;
		s->run = run;
		l->nsteps++;
	}
	l->nruns = run + 1;
	l->step_rank = rank;
	assign_first(l, c->fmt, c->fmt == FMT_MEGATRON ? c->mlm_interval : 0);
	return 0;
}

/* torchtitan: step_s = tokens_per_step / (tps x world_size) (above). */
static int derive(struct pipette_trainlog *l, const char *name, double tokens, long world,
		  struct pipette_err *err)
{
	long i;

	for (i = 0; i < l->nsteps; i++) {
		struct pipette_trainlog_step *s = &l->steps[i];
		double t;

		if (s->tokens_per_s <= 0)
			continue;
		t = tokens / (s->tokens_per_s * (double)world);
		if (!(t >= PIPETTE_TRAINLOG_MIN_STEP_S && t <= PIPETTE_TRAINLOG_MAX_STEP_S))
			return pipette_fail(err, "%s: line %ld: tps: %g tokens/s per device on %ld "
					    "GPUs at %g tokens per step is a step of %g s, not in "
					    "[%g, %g]", name, s->line, s->tokens_per_s, world,
					    tokens, t, PIPETTE_TRAINLOG_MIN_STEP_S,
					    PIPETTE_TRAINLOG_MAX_STEP_S);
		s->step_s = t;
	}
	l->tokens_per_step = tokens;
	l->world_size = world;
	return 0;
}

static void assign_stages(const struct ctx *c, struct pipette_trainlog *l)
{
	int i;

	for (i = 0; i < l->nmem; i++) {
		struct pipette_trainlog_mem *m = &l->mem[i];
		long pp = c->fmt == FMT_TITAN ? c->tt_pp : c->mlm_pp, w = c->mlm_world;

		m->stage = -1;
		if (m->rank == 0 || pp == 1)
			m->stage = 0;
		else if (c->fmt == FMT_MEGATRON && m->rank > 0 && pp > 1 && w % pp == 0 &&
			 m->rank < w && !c->mlm_tp_pp_dp)
			m->stage = (int)(m->rank / (w / pp));
	}
}

static int no_steps(const struct ctx *c, const char *stack)
{
	static const char *const expect[] = {
		"' iteration N/ M | ... | elapsed time per iteration (ms): X |'",
		"'Training epoch E, iteration N/M | ... | train_step_timing in s: X'",
		"'step: N  loss: X  ...  memory: X GiB(X%)  tps: X'",
	};

	if (c->fmt == FMT_NEMO && c->nemo_untimed)
		return pipette_fail(c->err, "%s: line %ld: %s: %ld progress lines and none has "
				    "'%s' (NeMo prints it with the TimingCallback of "
				    "nemo.utils.exp_manager)", c->name, c->nemo_untimed_line,
				    NEMO_TIMING, c->nemo_untimed, NEMO_TIMING);
	return pipette_fail(c->err, "%s: line %ld: step report: the log ends without a %s "
			    "step report (expected lines like %s)", c->name, c->line, stack,
			    expect[c->fmt]);
}

static int finish(struct ctx *c, const char *stack, struct pipette_trainlog *l)
{
	if (!c->nraw)
		return no_steps(c, stack);
	if (keep_steps(c, l) < 0)
		return -1;
	/* a copy: a log read as it grows (pipette_trainlog_reader) is taken
	 * again after more reports */
	if (c->nmem && !(l->mem = malloc(sizeof(*l->mem) * (size_t)c->nmem)))
		return oom(c);
	if (c->nmem)
		memcpy(l->mem, c->mem, sizeof(*l->mem) * (size_t)c->nmem);
	l->nmem = c->nmem;
	l->stated = c->stated;
	assign_stages(c, l);
	if (c->fmt == FMT_TITAN && c->tt_tokens > 0 && c->tt_world > 0)
		return derive(l, c->name, c->tt_tokens, c->tt_world, c->err);
	return 0;
}

static int stack_format(enum pipette_stack_id stack, enum fmt *f, const char **name,
			struct pipette_err *err)
{
	const struct pipette_stack *s = pipette_stack_get(stack);

	if (!s)
		return pipette_fail(err, "training log: unknown stack %d", (int)stack);
	*name = s->name;
	switch (stack) {
	case PIPETTE_STACK_MEGATRON:
	case PIPETTE_STACK_MEGATRON_ZB:
	case PIPETTE_STACK_MEGATRON_2022:
	case PIPETTE_STACK_MEGATRON_BRIDGE:
		*f = FMT_MEGATRON;
		return 0;
	case PIPETTE_STACK_NEMO:
		*f = FMT_NEMO;
		return 0;
	case PIPETTE_STACK_TORCHTITAN:
		*f = FMT_TITAN;
		return 0;
	default:
		return pipette_fail(err, "training log: no log format is known for stack '%s' "
				    "(pipette reads the logs of megatron, megatron-zb, "
				    "megatron-2022, megatron-bridge, nemo and torchtitan)", s->name);
	}
}

int pipette_trainlog_parse(const char *buf, size_t len, const char *name,
			   enum pipette_stack_id stack, struct pipette_trainlog **out,
			   struct pipette_err *err)
{
	struct ctx c = { .name = name ? name : "training log", .err = err };
	struct pipette_trainlog *l;
	const char *sname;
	char *line;
	int rc;

	*out = NULL;
	if (stack_format(stack, &c.fmt, &sname, err) < 0)
		return -1;
	if (!buf && len)
		return pipette_fail(err, "%s: no text", c.name);
	if (len > (size_t)PIPETTE_TRAINLOG_MAX_BYTES)
		return pipette_fail(err, "%s: %zu bytes exceed the limit of %ld bytes", c.name,
				    len, PIPETTE_TRAINLOG_MAX_BYTES);
	if (!(l = calloc(1, sizeof(*l))))
		return pipette_fail_code(err, PIPETTE_E_INTERNAL, "%s: out of memory", c.name);
	l->stack = stack;
	l->step_rank = -1;
	pipette_sha256(buf ? buf : "", buf ? len : 0, l->sha256);
	line = malloc(PIPETTE_TRAINLOG_MAX_LINE + 1);
	rc = line ? parse_lines(&c, line, buf ? buf : "", len) : oom(&c);
	if (rc == 0)
		rc = finish(&c, sname, l);
	free(line);
	free(c.raw);
	free(c.slot);
	free(c.mem);
	if (rc < 0) {
		pipette_trainlog_destroy(l);
		return -1;
	}
	*out = l;
	return 0;
}

int pipette_trainlog_read(const char *path, enum pipette_stack_id stack,
			  struct pipette_trainlog **out, struct pipette_err *err)
{
	struct pipette_file f;
	enum fmt fmt;
	const char *sname;
	int rc;

	*out = NULL;
	if (stack_format(stack, &fmt, &sname, err) < 0)
		return -1;
	if (pipette_read_file(path, "training log", (size_t)PIPETTE_TRAINLOG_MAX_BYTES, &f,
			      err) < 0)
		return -1;
	rc = pipette_trainlog_parse(f.data, f.len, path, stack, out, err);
	pipette_file_free(&f);
	return rc;
}

/* ------------------------------------------------------------------ */
/* A log read as it grows                                              */

struct pipette_trainlog_reader {
	struct ctx c;
	enum pipette_stack_id stack;
	const char *sname;
	char *name;
	char *line;			/* room for a line's clean copy */
	char *part;			/* the line not yet ended: its first LINE_READ bytes */
	size_t npart;
	int cut;			/* ... and it had more */
	struct sha256_ctx all, done;	/* every byte fed; the complete lines' */
	int failed;
	struct pipette_err fail;	/* a line's error, returned from then on */
};

int pipette_trainlog_reader_create(const char *name, enum pipette_stack_id stack,
				   struct pipette_trainlog_reader **out, struct pipette_err *err)
{
	struct pipette_trainlog_reader *r;
	enum fmt fmt;
	const char *sname;

	*out = NULL;
	if (stack_format(stack, &fmt, &sname, err) < 0)
		return -1;
	if (!(r = calloc(1, sizeof(*r))) || !(r->name = strdup(name ? name : "training log")) ||
	    !(r->line = malloc(PIPETTE_TRAINLOG_MAX_LINE + 1)) ||
	    !(r->part = malloc(PIPETTE_TRAINLOG_LINE_READ))) {
		pipette_trainlog_reader_destroy(r);
		return pipette_fail_code(err, PIPETTE_E_INTERNAL, "%s: out of memory",
					 name ? name : "training log");
	}
	r->c.name = r->name;
	r->c.fmt = fmt;
	r->c.err = &r->fail;
	r->stack = stack;
	r->sname = sname;
	sha256_init(&r->all);
	sha256_init(&r->done);
	*out = r;
	return 0;
}

/* n more bytes of the line not yet ended: those within LINE_READ kept. */
static void keep_part(struct pipette_trainlog_reader *r, const char *src, size_t n)
{
	size_t room = (size_t)PIPETTE_TRAINLOG_LINE_READ - r->npart;

	memcpy(r->part + r->npart, src, n < room ? n : room);
	r->npart += n < room ? n : room;
	r->cut |= n > room;
}

static int failed(struct pipette_trainlog_reader *r, struct pipette_err *err)
{
	r->failed = 1;
	*err = r->fail;
	return -1;
}

int pipette_trainlog_reader_feed(struct pipette_trainlog_reader *r, const char *buf, size_t len,
				 struct pipette_err *err)
{
	size_t upto = len, first;

	if (r->failed)
		return failed(r, err);
	while (upto > 0 && buf[upto - 1] != '\n')
		upto--;
	if (!upto) {	/* no line ends here */
		sha256_update(&r->all, len, (const uint8_t *)buf);
		keep_part(r, buf, len);
		return 0;
	}
	sha256_update(&r->all, upto, (const uint8_t *)buf);
	r->done = r->all;
	sha256_update(&r->all, len - upto, (const uint8_t *)buf + upto);
	/* the line that was waiting ends at the first newline */
	first = (size_t)((const char *)memchr(buf, '\n', upto) - buf);
	keep_part(r, buf, first);
	if (parse_line(&r->c, r->line, r->part, r->npart, r->cut) < 0 ||
	    parse_lines(&r->c, r->line, buf + first + 1, upto - first - 1) < 0)
		return failed(r, err);
	r->npart = 0;
	r->cut = 0;
	keep_part(r, buf + upto, len - upto);
	return 0;
}

int pipette_trainlog_reader_take(struct pipette_trainlog_reader *r, struct pipette_trainlog **out,
				 struct pipette_err *err)
{
	struct pipette_trainlog *l;
	struct sha256_ctx done = r->done;
	int rc;

	*out = NULL;
	if (r->failed)
		return failed(r, err);
	if (!(l = calloc(1, sizeof(*l))))
		return pipette_fail_code(err, PIPETTE_E_INTERNAL, "%s: out of memory", r->name);
	l->stack = r->stack;
	l->step_rank = -1;
	pipette_sha256_digest(&done, l->sha256);
	/* no step yet is no error of the log's: the next take may have one */
	r->c.err = err;
	rc = finish(&r->c, r->sname, l);
	r->c.err = &r->fail;
	if (rc < 0) {
		pipette_trainlog_destroy(l);
		return -1;
	}
	*out = l;
	return 0;
}

void pipette_trainlog_reader_destroy(struct pipette_trainlog_reader *r)
{
	if (!r)
		return;
	free(r->c.raw);
	free(r->c.slot);
	free(r->c.mem);
	free(r->name);
	free(r->line);
	free(r->part);
	free(r);
}

void pipette_trainlog_destroy(struct pipette_trainlog *l)
{
	if (!l)
		return;
	free(l->steps);
	free(l->mem);
	free(l);
}

int pipette_trainlog_derive(struct pipette_trainlog *l, double tokens_per_step,
			    long world_size, struct pipette_err *err)
{
	if (!l)
		return pipette_fail(err, "training log: none to derive step times for");
	if (l->stack != PIPETTE_STACK_TORCHTITAN)
		return pipette_fail(err, "training log: step times are derived from tokens per "
				    "second for torchtitan only, not '%s'",
				    pipette_stack_get(l->stack)->name);
	if (!(isfinite(tokens_per_step) && tokens_per_step >= 1 && tokens_per_step <= MAX_TOKENS))
		return pipette_fail(err, "training log: tokens per step: %g is not in [1, %g]",
				    tokens_per_step, MAX_TOKENS);
	if (world_size < 1 || world_size > PIPETTE_MAX_PIN)
		return pipette_fail(err, "training log: world size: %ld is not in [1, %ld]",
				    world_size, (long)PIPETTE_MAX_PIN);
	return derive(l, "training log", tokens_per_step, world_size, err);
}

/* ------------------------------------------------------------------ */
/* Steady state                                                        */

struct wv {
	double v;
	long w;
};

static int wv_cmp(const void *a, const void *b)
{
	double x = ((const struct wv *)a)->v, y = ((const struct wv *)b)->v;

	return (x > y) - (x < y);
}

/* The k-th (from 0) value of the sorted sample where a[i].v appears a[i].w times. */
static double wv_at(const struct wv *a, long n, long k)
{
	long i;

	for (i = 0; i < n - 1 && k >= a[i].w; i++)
		k -= a[i].w;
	return a[i].v;
}

/* numpy.percentile's default ("linear", definition 7 of Hyndman and Fan,
 * The American Statistician 50(4), 1996) of that sample: with h = p (W - 1),
 * x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]).  a is sorted. */
static double wv_quantile(const struct wv *a, long n, long total, double p)
{
	double h = p * (double)(total - 1), f;
	long k = (long)floor(h);
	double lo = wv_at(a, n, k), hi;

	f = h - (double)k;
	hi = f > 0 ? wv_at(a, n, k + 1) : lo;
	return lo + f * (hi - lo);
}

/* The steps counted: their times and weights into a (sorted), *used and
 * *skipped in steps, *timed = reports with a time.  Returns how many. */
static long steady_sample(const struct pipette_trainlog *l, long warmup, struct wv *a,
			  long *used, long *skipped, long *timed)
{
	long i, n = 0, base = 0;

	*used = *skipped = *timed = 0;
	for (i = 0; i < l->nsteps; i++) {
		const struct pipette_trainlog_step *s = &l->steps[i];
		long w = s->iteration - s->first + 1;

		if (i == 0 || s->run != s[-1].run)
			base = s->first;
		if (w < 1)
			w = 1;
		/* Megatron's first-iteration report: the next report's mean
		 * covers its step again. */
		if (i + 1 < l->nsteps && s[1].run == s->run && s[1].first == s->first)
			continue;
		if (!(s->step_s > 0))
			continue;
		++*timed;
		if (s->first - base < warmup) {
			*skipped += w;
			continue;
		}
		a[n].v = s->step_s;
		a[n++].w = w;
		*used += w;
	}
	qsort(a, (size_t)n, sizeof(*a), wv_cmp);
	return n;
}

int pipette_trainlog_steady(const struct pipette_trainlog *l, long warmup,
			    struct pipette_trainlog_steady *out, struct pipette_err *err)
{
	struct wv *a;
	long n, i, timed;
	double med;

	memset(out, 0, sizeof(*out));
	if (!l || l->nsteps < 1)
		return pipette_fail(err, "training log: no step to take a steady state of");
	if (warmup < 0)
		warmup = PIPETTE_TRAINLOG_WARMUP;
	if (!(a = malloc((size_t)l->nsteps * sizeof(*a))))
		return pipette_fail_code(err, PIPETTE_E_INTERNAL, "training log: out of memory");
	n = steady_sample(l, warmup, a, &out->used, &out->skipped, &timed);
	if (n == 0) {
		free(a);
		if (!timed)
			return pipette_fail(err, "training log: no step time: the torchtitan log "
					    "gives tokens per second but not the tokens per step and "
					    "the world size (its 'tokens per train step' and 'Building "
					    "device mesh' lines); pipette_trainlog_derive supplies them");
		return pipette_fail(err, "training log: all %ld steps are warm-up (the first %ld "
				    "of each run and the reports that include them); no step is "
				    "left for the steady state", out->skipped, warmup);
	}
	out->median_s = med = wv_quantile(a, n, out->used, 0.5);
	out->p10_s = wv_quantile(a, n, out->used, 0.1);
	out->p90_s = wv_quantile(a, n, out->used, 0.9);
	for (i = 0; i < n; i++)
		a[i].v = fabs(a[i].v - med);
	qsort(a, (size_t)n, sizeof(*a), wv_cmp);
	out->mad_s = wv_quantile(a, n, out->used, 0.5);
	free(a);
	return 0;
}
