/* pipette: a memo of pipeline simulations by their exact inputs.
 *
 * A plan estimates many placements and configurations whose pipelines
 * come out the same: orders of the mapping that keep every stage's links
 * and every transfer, slot swaps that move only a replica's ring, the
 * search's variants that leave the pipeline's times alone.  The
 * simulation is a pure function of its input (schedule.h), so the memo
 * hands back the results of one whose input was the same bit for bit,
 * and nothing else: the same numbers, and plans, as simulating again. */
#ifndef PIPETTE_SCHEDMEMO_H
#define PIPETTE_SCHEDMEMO_H

#include "estimate/schedule.h"

struct pipette_sched_memo;

struct pipette_sched_memo *pipette_sched_memo_create(void);
void pipette_sched_memo_destroy(struct pipette_sched_memo *m);

/* The results of a kept simulation of exactly `in`: 1 and *out filled
 * (its arrays valid until the next pipette_sched_memo_keep), else 0. */
int pipette_sched_memo_find(struct pipette_sched_memo *m, const struct pipette_sched_input *in,
			    struct pipette_sched_result *out);

/* Keep the results of simulating `in`; out of memory, nothing is kept. */
void pipette_sched_memo_keep(struct pipette_sched_memo *m, const struct pipette_sched_input *in,
			     const struct pipette_sched_result *res);

#endif
