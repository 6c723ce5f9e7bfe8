/* pipette: what experts.c and experts_ilp.c share (not installed). */
#ifndef PIPETTE_EXPERTS_INT_H
#define PIPETTE_EXPERTS_INT_H

#include "plan/experts.h"

struct pipette_routing {
	int L, E, k;
	double *load;	/* L * E */
	double *next;	/* (L - 1) * E * E */
};

/* &next[l][a][b], l < L - 1. */
double *pipette_routing_next_at_(const struct pipette_routing *r, int l, int a, int b);
/* ep divides E, ranks per node >= 1, weights finite and >= 0. */
int pipette_experts_check_opts_(const struct pipette_routing *r,
				const struct pipette_experts_opts *o, struct pipette_err *err);

#endif
