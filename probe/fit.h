/* pipette-probe: the α–β (latency–bandwidth) fit of a link.
 *
 * Hockney's model (R. W. Hockney, "The communication challenge for MPP:
 * Intel Paragon and Meiko CS-2", Parallel Computing 20(3), 1994): a message
 * of x bytes takes t(x) = α + x/β.  Fitted by ordinary least squares on
 * (bytes, seconds) points, usually the median time at 2–3 sizes. */
#ifndef PIPETTE_PROBE_FIT_H
#define PIPETTE_PROBE_FIT_H

#include <stddef.h>

#include "inputs/error.h"

struct pipette_probe_fit {
	double alpha_s;		/* latency α, seconds (≥ 0) */
	double beta_Bps;	/* bandwidth β, bytes per second (> 0) */
	int clamped;		/* 1: the free fit gave α < 0, so α = 0 and β
				 * was refitted through the origin */
};

/* Fit t = α + x/β to n points.  Needs at least two distinct sizes, finite
 * positive sizes and times, and a positive slope; the message names what
 * is wrong.  When the unconstrained intercept is negative (noise at small
 * sizes), α is set to 0 and β is the least-squares slope through the
 * origin: 1/β = Σxt / Σx². */
int pipette_probe_fit_alpha_beta(const double *bytes, const double *seconds,
				 size_t n, struct pipette_probe_fit *out,
				 struct pipette_err *err);

/* Median of n values (n ≥ 1); sorts a copy held in `scratch` (n entries).
 * For even n, the mean of the two middle values. */
double pipette_probe_median(const double *v, size_t n, double *scratch);

#endif
