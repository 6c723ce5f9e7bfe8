#include "fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int pipette_probe_fit_alpha_beta(const double *bytes, const double *seconds,
				 size_t n, struct pipette_probe_fit *out,
				 struct pipette_err *err)
{
	double mx = 0, mt = 0, sxx = 0, sxt = 0, slope, icpt;
	size_t i;

	if (n < 2)
		return pipette_fail(err, "alpha-beta fit: %zu point(s), need at "
				    "least 2 message sizes", n);
	for (i = 0; i < n; i++) {
		if (!isfinite(bytes[i]) || bytes[i] <= 0)
			return pipette_fail(err, "alpha-beta fit: point %zu: size "
					    "%g bytes is not positive", i, bytes[i]);
		if (!isfinite(seconds[i]) || seconds[i] <= 0)
			return pipette_fail(err, "alpha-beta fit: point %zu: time "
					    "%g s is not positive", i, seconds[i]);
		mx += bytes[i];
		mt += seconds[i];
	}
	mx /= (double)n;
	mt /= (double)n;
	for (i = 0; i < n; i++) {
		sxx += (bytes[i] - mx) * (bytes[i] - mx);
		sxt += (bytes[i] - mx) * (seconds[i] - mt);
	}
	if (sxx <= 0)
		return pipette_fail(err, "alpha-beta fit: all %zu points have the "
				    "same size (%g bytes), need 2 distinct sizes",
				    n, bytes[0]);
	slope = sxt / sxx;
	icpt = mt - slope * mx;
	out->clamped = 0;
	if (icpt < 0) {
		double sx2 = 0, sxt0 = 0;

		for (i = 0; i < n; i++) {
			sx2 += bytes[i] * bytes[i];
			sxt0 += bytes[i] * seconds[i];
		}
		slope = sxt0 / sx2;
		icpt = 0;
		out->clamped = 1;
	}
	if (!(slope > 0))
		return pipette_fail(err, "alpha-beta fit: time does not grow with "
				    "size (slope %g s/byte); the link is too noisy "
				    "at these sizes", slope);
	out->alpha_s = icpt;
	out->beta_Bps = 1.0 / slope;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double pipette_probe_median(const double *v, size_t n, double *scratch)
{
	memcpy(scratch, v, n * sizeof(*v));
	qsort(scratch, n, sizeof(*scratch), cmp_double);
	if (n % 2)
		return scratch[n / 2];
	return 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
}
