/* pipette: the one pseudo-random stream of the project.
 *
 * splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014): tiny, seedable, and the same sequence on
 * every machine, which the deterministic search, the mapping's annealing
 * and the seeded example generators rely on. */
#ifndef PIPETTE_RNG_H
#define PIPETTE_RNG_H

#include <stdint.h>

static inline uint64_t pipette_rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double pipette_rng_unit(uint64_t *s)
{
	return (double)(pipette_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n >= 1. */
static inline int pipette_rng_below(uint64_t *s, int n)
{
	return (int)(pipette_rng_next(s) % (uint64_t)n);
}

#endif
