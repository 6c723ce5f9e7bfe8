/* Fuzz the training-log parsers, pipette_trainlog_parse (trainlog.h).
 * fuzz-requires: core/inputs/trainlog.c
 *
 * Every input is read as a log of each stack with a format (megatron,
 * megatron-zb, megatron-2022, nemo, torchtitan) and of one without (an
 * error).  Contract checked beyond "no crash, no leak, no read past the
 * length": a log that parses has steps, each inside the plausible ranges
 * of trainlog.h with first <= iteration and its run below nruns; memory
 * figures are finite and in range; the steady state either fails with a
 * message or gives p10 <= median <= p90 and a MAD >= 0, all finite; a
 * torchtitan log takes derived step times.  And the reader of a growing
 * log (pipette_trainlog_reader), fed the input in pieces of a size the
 * input's first byte picks (and a newline after a last line without one),
 * takes what the parse gave: the same error, or the same steps, memory
 * reports, runs and stated configuration (the SHA-256 too when the input
 * ends with its newline). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "inputs/trainlog.h"

static void check_log(const struct pipette_trainlog *l)
{
	long i;
	int j;

	fuzz_require(l && l->nsteps >= 1 && l->nsteps <= PIPETTE_TRAINLOG_MAX_STEPS,
		     "nsteps = %ld", l ? l->nsteps : -1);
	fuzz_require(l->nruns >= 1 && l->nmem >= 0 && l->nmem <= PIPETTE_TRAINLOG_MAX_MEM,
		     "nruns %d, nmem %d", l->nruns, l->nmem);
	for (i = 0; i < l->nsteps; i++) {
		const struct pipette_trainlog_step *s = &l->steps[i];

		fuzz_require(s->first >= 0 && s->first <= s->iteration &&
			     s->iteration <= PIPETTE_TRAINLOG_MAX_ITER, "step %ld: first %ld, "
			     "iteration %ld", i, s->first, s->iteration);
		fuzz_require(s->run >= 0 && s->run < l->nruns && (i == 0 || s->run >= s[-1].run),
			     "step %ld: run %d of %d", i, s->run, l->nruns);
		fuzz_require(s->step_s >= 0 && s->step_s <= PIPETTE_TRAINLOG_MAX_STEP_S &&
			     s->tokens_per_s >= 0 && s->tokens_per_s <= PIPETTE_TRAINLOG_MAX_TPS,
			     "step %ld: %g s, %g tokens/s", i, s->step_s, s->tokens_per_s);
		fuzz_require(s->step_s > 0 || s->tokens_per_s > 0, "step %ld: no figure", i);
	}
	for (j = 0; j < l->nmem; j++) {
		const struct pipette_trainlog_mem *m = &l->mem[j];

		fuzz_require(m->allocated_gib >= 0 && m->allocated_gib <= PIPETTE_TRAINLOG_MAX_GIB &&
			     m->reserved_gib >= 0 && m->reserved_gib <= PIPETTE_TRAINLOG_MAX_GIB,
			     "memory %d: %g / %g GiB", j, m->allocated_gib, m->reserved_gib);
		fuzz_require(m->rank >= -1 && m->local_rank >= -1 && m->stage >= -1,
			     "memory %d: rank %d, local %d, stage %d", j, m->rank,
			     m->local_rank, m->stage);
	}
}

static void check_steady(const struct pipette_trainlog *l, long warmup)
{
	struct pipette_err err = { { 0 } };
	struct pipette_trainlog_steady st;
	int rc = pipette_trainlog_steady(l, warmup, &st, &err);

	fuzz_check_err(rc, &err, "pipette_trainlog_steady");
	if (rc)
		return;
	fuzz_require(st.used >= 1 && st.skipped >= 0, "used %ld, skipped %ld", st.used,
		     st.skipped);
	fuzz_require(isfinite(st.median_s) && isfinite(st.mad_s) && st.mad_s >= 0 &&
		     st.p10_s > 0 && st.p10_s <= st.median_s && st.median_s <= st.p90_s &&
		     st.p90_s <= PIPETTE_TRAINLOG_MAX_STEP_S,
		     "p10 %g, median %g, p90 %g, mad %g", st.p10_s, st.median_s, st.p90_s,
		     st.mad_s);
}

/* A difference between the parse and the reader: what differs. */
static void same_log(const struct pipette_trainlog *a, const struct pipette_trainlog *b,
		     int same_bytes)
{
	long i;
	int j;

	fuzz_require(a->nsteps == b->nsteps && a->nmem == b->nmem && a->nruns == b->nruns &&
		     a->step_rank == b->step_rank && a->world_size == b->world_size &&
		     a->tokens_per_step == b->tokens_per_step &&
		     !memcmp(&a->stated, &b->stated, sizeof(a->stated)),
		     "reader: %ld steps, %d memory reports, %d runs; parse: %ld, %d, %d",
		     b->nsteps, b->nmem, b->nruns, a->nsteps, a->nmem, a->nruns);
	fuzz_require(!same_bytes || !memcmp(a->sha256, b->sha256, sizeof(a->sha256)),
		     "reader: another SHA-256");
	for (i = 0; i < a->nsteps; i++) {
		const struct pipette_trainlog_step *x = &a->steps[i], *y = &b->steps[i];

		fuzz_require(x->iteration == y->iteration && x->first == y->first &&
			     x->run == y->run && x->line == y->line && x->step_s == y->step_s &&
			     x->tokens_per_s == y->tokens_per_s, "reader: step %ld differs", i);
	}
	for (j = 0; j < a->nmem; j++) {
		const struct pipette_trainlog_mem *x = &a->mem[j], *y = &b->mem[j];

		fuzz_require(x->rank == y->rank && x->stage == y->stage &&
			     x->local_rank == y->local_rank && x->allocated_gib == y->allocated_gib &&
			     x->reserved_gib == y->reserved_gib, "reader: memory %d differs", j);
	}
}

/* The input through a reader, compared with the parse's rc, error and log. */
static void check_reader(const uint8_t *data, size_t size, enum pipette_stack_id stack, int rc,
			 const struct pipette_err *perr, const struct pipette_trainlog *want)
{
	struct pipette_err err = { { 0 } };
	struct pipette_trainlog_reader *r = NULL;
	struct pipette_trainlog *l = NULL;
	size_t i, n, piece = size ? 1 + data[0] % 97 : 1;
	int got = pipette_trainlog_reader_create("fuzz.log", stack, &r, &err);

	fuzz_check_err(got, &err, "pipette_trainlog_reader_create");
	if (got)
		return;
	for (i = 0; i < size && got == 0; i += n) {
		n = size - i < piece ? size - i : piece;
		got = pipette_trainlog_reader_feed(r, (const char *)data + i, n, &err);
	}
	if (got == 0 && size && data[size - 1] != '\n')
		got = pipette_trainlog_reader_feed(r, "\n", 1, &err);
	if (got == 0)
		got = pipette_trainlog_reader_take(r, &l, &err);
	fuzz_check_err(got, &err, "pipette_trainlog_reader");
	fuzz_require(got == rc, "reader: %d, parse: %d (%s / %s)", got, rc, err.msg, perr->msg);
	if (rc)
		fuzz_require(!strcmp(err.msg, perr->msg), "reader: '%s', parse: '%s'", err.msg,
			     perr->msg);
	else
		same_log(want, l, !size || data[size - 1] == '\n');
	pipette_trainlog_destroy(l);
	pipette_trainlog_reader_destroy(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum pipette_stack_id stacks[] = {
		PIPETTE_STACK_MEGATRON, PIPETTE_STACK_MEGATRON_ZB, PIPETTE_STACK_MEGATRON_2022,
		PIPETTE_STACK_MEGATRON_BRIDGE, PIPETTE_STACK_NEMO, PIPETTE_STACK_TORCHTITAN,
		PIPETTE_STACK_DEEPSEEK,
	};
	size_t k;

	for (k = 0; k < sizeof(stacks) / sizeof(stacks[0]); k++) {
		struct pipette_err err = { { 0 } };
		struct pipette_trainlog *l = NULL;
		/* Not terminated: ASan reports any read past the length. */
		int rc = pipette_trainlog_parse((const char *)data, size, "fuzz.log", stacks[k],
						&l, &err);

		fuzz_check_err(rc, &err, "pipette_trainlog_parse");
		fuzz_require(stacks[k] != PIPETTE_STACK_DEEPSEEK || rc == -1,
			     "a log parsed for a stack without a format");
		if (stacks[k] != PIPETTE_STACK_DEEPSEEK)
			check_reader(data, size, stacks[k], rc, &err, l);
		if (rc) {
			fuzz_require(l == NULL, "a failed parse left a log");
			continue;
		}
		check_log(l);
		check_steady(l, -1);
		check_steady(l, 0);
		if (stacks[k] == PIPETTE_STACK_TORCHTITAN) {
			rc = pipette_trainlog_derive(l, 131072, 8, &err);
			fuzz_check_err(rc, &err, "pipette_trainlog_derive");
			if (rc == 0)
				check_steady(l, 0);
		}
		pipette_trainlog_destroy(l);
	}
	return 0;
}
