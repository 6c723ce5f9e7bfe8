/* pipette CLI: what its SVG figures share (svg.c): XML escaping, round
 * tick values, and a colour-blind-safe sequential palette. */
#ifndef PIPETTE_CLI_SVG_H
#define PIPETTE_CLI_SVG_H

#include <stdio.h>

/* Write s with XML's special characters escaped (and control characters,
 * which XML 1.0 does not allow, left out). */
void svg_escaped(FILE *f, const char *s);

/* "Nice numbers for graph labels" (P. S. Heckbert, Graphics Gems, 1990,
 * pp. 61-63, its loose labelling): about `want` ticks over [lo, hi] at a
 * step of 1, 2 or 5 times a power of ten, from *first <= lo to
 * *last >= hi; *digits is how many decimals a label needs.  A range of
 * nothing (hi <= lo) is widened around lo. */
struct svg_ticks {
	double first, last, step;
	int digits;
};
void svg_nice_ticks(double lo, double hi, int want, struct svg_ticks *t);

/* Ticks of a logarithmic axis over [lo, hi] (0 < lo < hi): the values
 * 1, 2 and 5 times a power of ten, from the largest at or below lo to the
 * smallest at or above hi, into v[max]; returns how many. */
int svg_log_ticks(double lo, double hi, double *v, int max);

/* Viridis (van der Walt and Smith, matplotlib's default colour map since
 * 2.0: perceptually uniform, readable with the common colour-vision
 * deficiencies and in grey), t in [0, 1] from dark purple to yellow, as
 * "#rrggbb" into buf[8]. */
const char *svg_viridis(double t, char buf[8]);
/* Its control points as SVG gradient stops, offset 0 = t 0, for a
 * colour bar. */
void svg_viridis_stops(FILE *f);

#endif
