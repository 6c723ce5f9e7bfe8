/* pipette observe --report: every stored observation as one SVG page.
 *
 * Three panels: the predicted against the measured step time of each job
 * (the model's own, before any site factors) with the identity line and
 * lines at +-10%; the same for memory, one point per pipeline stage that
 * reported its reserved peak; and the histogram of the step-time errors,
 * (predicted - measured) / measured, in 5% bins. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn/calib.h"
#include "cli.h"

#define PANEL 300.0	/* px: each panel's plot square */
#define MARGIN 56.0	/* px: room for ticks and labels */
#define GAP 40.0
#define TOP 48.0
#define BIN 0.05	/* histogram bin, relative error */
#define BINS 16		/* -40% .. +40% */

struct panel {
	double x0, y0;		/* the plot square's top-left corner */
	double lo, hi;		/* the data range of both axes (scatter) */
};

static double px(const struct panel *p, double v)
{
	return p->x0 + (v - p->lo) / (p->hi - p->lo) * PANEL;
}

static double py(const struct panel *p, double v)
{
	return p->y0 + PANEL - (v - p->lo) / (p->hi - p->lo) * PANEL;
}

/* A range with 5% room around [lo, hi], never empty. */
static void range(struct panel *p, double lo, double hi)
{
	double pad = (hi - lo) * 0.05;

	if (!(hi > lo))
		pad = fmax(fabs(hi) * 0.1, 1e-3);
	p->lo = fmax(0, lo - pad);
	p->hi = hi + pad;
}

static void frame(FILE *out, const struct panel *p, const char *title, const char *xl,
		  const char *yl)
{
	int k;

	fprintf(out, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' "
		"stroke='#888'/>\n", p->x0, p->y0, PANEL, PANEL);
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' font-weight='bold'>%s</text>\n",
		p->x0 + PANEL / 2, p->y0 - 12, title);
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle'>%s</text>\n",
		p->x0 + PANEL / 2, p->y0 + PANEL + 38, xl);
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' transform='rotate(-90 %.1f "
		"%.1f)'>%s</text>\n", p->x0 - 42, p->y0 + PANEL / 2, p->x0 - 42,
		p->y0 + PANEL / 2, yl);
	for (k = 0; k <= 4 && p->hi > p->lo; k++) {
		double v = p->lo + (p->hi - p->lo) * k / 4;

		fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='10'>%.3g"
			"</text>\n", px(p, v), p->y0 + PANEL + 14, v);
		fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='end' font-size='10'>%.3g</text>\n",
			p->x0 - 4, py(p, v) + 3, v);
	}
}

/* The identity line and the +-10% lines, clipped to the square. */
static void guides(FILE *out, const struct panel *p)
{
	static const double f[3] = { 1.0, 1.1, 0.9 };
	int k;

	for (k = 0; k < 3; k++) {
		double x1 = fmax(p->lo, p->lo / f[k]), x2 = fmin(p->hi, p->hi / f[k]);

		fprintf(out, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s' "
			"stroke-dasharray='%s'/>\n", px(p, x1), py(p, fmin(p->hi, x1 * f[k])),
			px(p, x2), py(p, fmin(p->hi, x2 * f[k])), k ? "#bbb" : "#555",
			k ? "4 3" : "none");
	}
}

static void scatter(FILE *out, const struct panel *p, const double *x, const double *y, int n,
		    const char *colour)
{
	int i;

	for (i = 0; i < n; i++)
		fprintf(out, "<circle cx='%.1f' cy='%.1f' r='3.5' fill='%s' fill-opacity='0.75'/>\n",
			px(p, x[i]), py(p, y[i]), colour);
}

static void histogram(FILE *out, double x0, double y0, const double *err, int n)
{
	int count[BINS], k, i, top = 1;

	memset(count, 0, sizeof(count));
	for (i = 0; i < n; i++) {
		/* clamped before the conversion: an error of 1e12 is the last bin */
		double b = floor(fmax(-BINS, fmin(BINS, err[i] / BIN))) + BINS / 2;

		k = (int)b;
		count[k < 0 ? 0 : k >= BINS ? BINS - 1 : k]++;
	}
	for (k = 0; k < BINS; k++)
		if (count[k] > top)
			top = count[k];
	fprintf(out, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' "
		"stroke='#888'/>\n", x0, y0, PANEL, PANEL);
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' font-weight='bold'>step-time "
		"error, %d jobs</text>\n", x0 + PANEL / 2, y0 - 12, n);
	for (k = 0; k < BINS; k++) {
		double h = (double)count[k] / top * (PANEL - 10);

		fprintf(out, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#4e79a7'/>\n",
			x0 + k * PANEL / BINS + 1, y0 + PANEL - h, PANEL / BINS - 2, h);
	}
	for (k = 0; k <= BINS; k += 4)
		fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='10'>%+.0f%%"
			"</text>\n", x0 + k * PANEL / BINS, y0 + PANEL + 14,
			100 * BIN * (k - BINS / 2));
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle'>(predicted - measured) / "
		"measured (outer bins: beyond)</text>\n", x0 + PANEL / 2, y0 + PANEL + 38);
}

/* Points of the two scatters and the errors; counts in *nt and *nm. */
static void points(const struct pipette_observation *obs, int n, double *tx, double *ty,
		   double *terr, int *nt, double *mx, double *my, int *nm)
{
	int i, s;

	*nt = *nm = 0;
	for (i = 0; i < n; i++) {
		tx[*nt] = obs[i].measured_s;
		ty[*nt] = obs[i].model_s;
		terr[(*nt)++] = (obs[i].model_s - obs[i].measured_s) / obs[i].measured_s;
		for (s = 0; s < obs[i].nstages; s++) {
			const struct pipette_obs_stage *st = &obs[i].stages[s];

			if (st->measured_bytes > 0 && st->predicted_bytes > 0) {
				mx[*nm] = st->measured_bytes / 1073741824.0;
				my[(*nm)++] = st->predicted_bytes / 1073741824.0;
			}
		}
	}
}

static double lo_of(const double *a, const double *b, int n)
{
	double v = HUGE_VAL;
	int i;

	for (i = 0; i < n; i++)
		v = fmin(v, fmin(a[i], b[i]));
	return n ? v : 0;
}

static double hi_of(const double *a, const double *b, int n)
{
	double v = 0;
	int i;

	for (i = 0; i < n; i++)
		v = fmax(v, fmax(a[i], b[i]));
	return n ? v : 1;
}

int cli_obs_report_svg(const struct pipette_observation *obs, int n, FILE *out)
{
	struct panel t = { MARGIN, TOP, 0, 1 }, m = { MARGIN * 2 + PANEL + GAP, TOP, 0, 1 };
	double width = 3 * (PANEL + MARGIN) + 2 * GAP + 24, height = TOP + PANEL + 60;
	double *tx, *ty, *terr, *mx, *my;
	size_t stages = 0;
	int nt, nm, i;

	for (i = 0; i < n; i++)
		stages += (size_t)obs[i].nstages;
	if (!(tx = malloc(sizeof(double) * (3 * (size_t)n + 2 * stages + 1))))
		return -1;
	ty = tx + n;
	terr = ty + n;
	mx = terr + n;
	my = mx + stages;
	points(obs, n, tx, ty, terr, &nt, mx, my, &nm);
	range(&t, lo_of(tx, ty, nt), hi_of(tx, ty, nt));
	range(&m, lo_of(mx, my, nm), hi_of(mx, my, nm));
	fprintf(out, "<?xml version='1.0' encoding='UTF-8'?>\n<svg xmlns='http://www.w3.org/2000/svg' "
		"width='%.0f' height='%.0f' font-family='sans-serif' font-size='12'>\n"
		"<rect width='100%%' height='100%%' fill='white'/>\n", width, height);
	frame(out, &t, "step time, s (model, before site factors)", "measured", "predicted");
	guides(out, &t);
	scatter(out, &t, tx, ty, nt, "#4e79a7");
	frame(out, &m, "memory per stage, GiB", "measured reserved peak", "predicted");
	guides(out, &m);
	scatter(out, &m, mx, my, nm, "#f28e2b");
	histogram(out, MARGIN * 3 + 2 * PANEL + 2 * GAP, TOP, terr, nt);
	fputs("</svg>\n", out);
	free(tx);
	return ferror(out) ? -1 : 0;
}
