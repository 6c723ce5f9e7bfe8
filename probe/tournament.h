/* pipette-probe: the round-robin tournament that schedules node pairs.
 *
 * The circle method (a 1-factorisation of the complete graph K_m, m even;
 * Kirkman 1847, as in Lucas' "Récréations mathématiques" II, 1883): m−1
 * rounds of m/2 disjoint pairs cover every pair exactly once.  For odd n a
 * dummy node m−1 = n is added and its partner sits the round out.  This
 * fixes the original Pipette's recursive halving, which needs n to be a
 * power of two (round_robin_test.py:36-72 of yimjinkyu1/date2024_pipette
 * @a2b0683, under Megatron-LM-2.5/strategy/nccl-test/nccl-test-a100/,
 * raises "Inappropriate node combinations" otherwise).
 *
 * The schedule is a pure function of (n, round, node), so every process
 * computes its own partner without talking to anyone. */
#ifndef PIPETTE_PROBE_TOURNAMENT_H
#define PIPETTE_PROBE_TOURNAMENT_H

#include "inputs/error.h"
#include "inputs/limits.h"

/* Largest node count the probe accepts (one task per node): the nodes a
 * cache and a plan can hold (limits.h). */
#define PIPETTE_PROBE_MAX_NODES PIPETTE_MAX_NODES

/* Number of rounds for n nodes: n−1 for even n, n for odd n (0 for n < 2). */
int pipette_probe_rounds(int n);

/* Partner of `node` in round `round` (0-based), or -1 when the node sits
 * the round out (odd n) or an argument is out of range. */
int pipette_probe_peer(int n, int round, int node);

/* Fill pairs[0..2*k) with the k pairs of one round, lower index first,
 * ordered by the lower index; returns k, or -1 with a message when n or
 * round is out of range.  `pairs` must hold n entries (n/2 pairs). */
int pipette_probe_round_pairs(int n, int round, int *pairs,
			      struct pipette_err *err);

#endif
