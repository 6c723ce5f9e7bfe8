/* pipette CLI: what its SVG figures share (svg.h). */
#include "svg.h"

#include <math.h>

void svg_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
				fputc(*s, f);
		}
	}
}

/* Heckbert's nicenum(): a 1, 2, 5 or 10 times a power of ten near x,
 * rounded to the nearest (round) or the next above (ceiling). */
static double nicenum(double x, int round_it)
{
	double e = floor(log10(x)), f = x / pow(10, e), nf;

	if (round_it)
		nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
	else
		nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
	return nf * pow(10, e);
}

void svg_nice_ticks(double lo, double hi, int want, struct svg_ticks *t)
{
	double range;

	if (!(hi > lo)) {
		double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;

		lo -= pad;
		hi += pad;
	}
	if (want < 2)
		want = 2;
	range = nicenum(hi - lo, 0);
	t->step = nicenum(range / (want - 1), 1);
	t->first = floor(lo / t->step) * t->step;
	t->last = ceil(hi / t->step) * t->step;
	t->digits = (int)fmax(-floor(log10(t->step)), 0);
}

int svg_log_ticks(double lo, double hi, double *v, int max)
{
	static const double m[3] = { 1, 2, 5 };
	double e = floor(log10(lo));
	int n = 0, k = 0;

	/* the largest 1-2-5 value at or below lo */
	while (k < 2 && m[k + 1] * pow(10, e) <= lo * (1 + 1e-12))
		k++;
	while (n < max) {
		v[n] = m[k] * pow(10, e);
		if (v[n++] >= hi * (1 - 1e-12))
			break;
		if (++k == 3) {
			k = 0;
			e++;
		}
	}
	return n;
}

/* Viridis at 16 of its 256 entries (0, 17, 34, ..., 255) of _viridis_data
 * in lib/matplotlib/_cm_listed.py, matplotlib/matplotlib @88987b9; the
 * colours between are interpolated linearly in sRGB, which stays within
 * 7/255 of every entry of the full table. */
#define VIRIDIS_N 16
static const double viridis[VIRIDIS_N][3] = {
	{ 0.267004, 0.004874, 0.329415 }, { 0.282656, 0.100196, 0.422160 },
	{ 0.277134, 0.185228, 0.489898 }, { 0.253935, 0.265254, 0.529983 },
	{ 0.221989, 0.339161, 0.548752 }, { 0.190631, 0.407061, 0.556089 },
	{ 0.163625, 0.471133, 0.558148 }, { 0.139147, 0.533812, 0.555298 },
	{ 0.120565, 0.596422, 0.543611 }, { 0.134692, 0.658636, 0.517649 },
	{ 0.208030, 0.718701, 0.472873 }, { 0.327796, 0.773980, 0.406640 },
	{ 0.477504, 0.821444, 0.318195 }, { 0.647257, 0.858400, 0.209861 },
	{ 0.824940, 0.884720, 0.106217 }, { 0.993248, 0.906157, 0.143936 },
};

/* The table's positions of the control points: entry / 255 = k / 15. */
static double stop_at(int k)
{
	return k / (VIRIDIS_N - 1.0);
}

const char *svg_viridis(double t, char buf[8])
{
	int k = 0, c, v[3];

	if (!(t > 0))
		t = 0;	/* NaN too */
	if (t > 1)
		t = 1;
	while (k < VIRIDIS_N - 2 && t > stop_at(k + 1))
		k++;
	for (c = 0; c < 3; c++) {
		double a = stop_at(k), b = stop_at(k + 1), u = (t - a) / (b - a);

		v[c] = (int)lround(255 * (viridis[k][c] + u * (viridis[k + 1][c] - viridis[k][c])));
	}
	snprintf(buf, 8, "#%02x%02x%02x", v[0] & 0xff, v[1] & 0xff, v[2] & 0xff);
	return buf;
}

void svg_viridis_stops(FILE *f)
{
	char col[8];
	int k;

	for (k = 0; k < VIRIDIS_N; k++)
		fprintf(f, "<stop offset=\"%.4f\" stop-color=\"%s\"/>\n", stop_at(k),
			svg_viridis(stop_at(k), col));
}
