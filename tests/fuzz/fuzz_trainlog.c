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
 * torchtitan log takes derived step times. */
#include <math.h>
#include <stdint.h>

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum pipette_stack_id stacks[] = {
		PIPETTE_STACK_MEGATRON, PIPETTE_STACK_MEGATRON_ZB, PIPETTE_STACK_MEGATRON_2022,
		PIPETTE_STACK_NEMO, PIPETTE_STACK_TORCHTITAN, PIPETTE_STACK_DEEPSEEK,
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
