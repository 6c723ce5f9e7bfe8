/* pipette observe --report: every stored observation as one SVG page.
 *
 * Three panels: the predicted against the measured step time of each job
 * (the model's own, before any site factors) with the identity line and
 * lines at +-10% (a legend inside says which is which); the same for
 * memory, one point per pipeline stage that reported its reserved peak;
 * and the histogram of the step-time errors, (predicted - measured) /
 * measured, in 5% bins with a scale of jobs.  Points are coloured by
 * model (a legend below names them), carry a tooltip naming the job (its
 * plan hash and file), the model, GPU and stack and both figures, and the
 * jobs furthest outside +-10% are labelled with their plan hash.  Axes
 * are at round values: Heckbert's nice numbers on a linear axis, 1-2-5 on
 * a logarithmic one (svg.h), which a scatter takes when its figures span
 * more than a factor of LOG_SPAN. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn/calib.h"
#include "cli.h"
#include "svg.h"

#define PANEL 320.0	/* px: each panel's plot square */
#define MARGIN 62.0	/* px: room for ticks and labels */
#define GAP 40.0
#define TOP 74.0
#define BIN 0.05	/* histogram bin, relative error */
#define BINS 16		/* -40% .. +40% */
#define LOG_SPAN 10.0	/* greatest / least figure beyond which a scatter is log */
#define LABELS 5	/* jobs outside +-10% labelled on the step-time panel */
#define BAND 0.10	/* the guide lines' relative error */
#define MAX_MODELS 8	/* colours; more models share the last, "other" */

/* Okabe and Ito's colour-blind-safe qualitative palette ("Color Universal
 * Design", 2008), black left out (the guides are dark), then grey. */
static const char *const model_colour[MAX_MODELS] = {
	"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#999999",
};

struct panel {
	double x0, y0;		/* the plot square's top-left corner */
	double lo, hi;		/* the range of both axes */
	int log;
	double tick[32];
	int nticks, digits;
};

/* One point: which observation (and stage, -1 for a job's step time). */
struct point {
	double x, y;		/* measured, predicted */
	int obs, stage;
};

/* The models in order of first appearance (obs are in name order). */
struct models {
	const char *name[MAX_MODELS];
	int count[MAX_MODELS];
	int n;
};

static double frac(const struct panel *p, double v)
{
	if (p->log)
		return log(v / p->lo) / log(p->hi / p->lo);
	return (v - p->lo) / (p->hi - p->lo);
}

static double px(const struct panel *p, double v)
{
	return p->x0 + frac(p, v) * PANEL;
}

static double py(const struct panel *p, double v)
{
	return p->y0 + PANEL - frac(p, v) * PANEL;
}

/* The axes' range and ticks over the points' figures. */
static void range(struct panel *p, const struct point *pt, int n)
{
	double lo = HUGE_VAL, hi = 0;
	struct svg_ticks t;
	int i;

	for (i = 0; i < n; i++) {
		lo = fmin(lo, fmin(pt[i].x, pt[i].y));
		hi = fmax(hi, fmax(pt[i].x, pt[i].y));
	}
	if (!n)
		lo = 0, hi = 1;
	/* at least a factor of 1.25, so that the +-10% lines show */
	lo = fmin(lo, hi / 1.25);
	p->log = lo > 0 && hi / lo > LOG_SPAN;
	if (p->log) {
		p->nticks = svg_log_ticks(lo, hi, p->tick, 32);
		p->lo = p->tick[0];
		p->hi = p->tick[p->nticks - 1];
		p->digits = -1;	/* %g: 0.5, 1, 2, 5, 10 */
		return;
	}
	svg_nice_ticks(lo, hi, 6, &t);
	p->lo = fmax(0, t.first);
	p->hi = t.last;
	p->digits = t.digits;
	for (p->nticks = 0; p->nticks < 32; p->nticks++) {
		double v = t.first + p->nticks * t.step;

		if (v > t.last + t.step / 2)
			break;
		p->tick[p->nticks] = v;
	}
}

static void frame(FILE *out, const struct panel *p, const char *title, const char *xl,
		  const char *yl)
{
	int k;

	fprintf(out, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' "
		"stroke='#888'/>\n", p->x0, p->y0, PANEL, PANEL);
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' font-weight='bold'>%s</text>\n",
		p->x0 + PANEL / 2, p->y0 - 12, title);
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle'>%s%s</text>\n",
		p->x0 + PANEL / 2, p->y0 + PANEL + 36, xl, p->log ? " (log scale)" : "");
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' transform='rotate(-90 %.1f "
		"%.1f)'>%s%s</text>\n", p->x0 - 46, p->y0 + PANEL / 2, p->x0 - 46,
		p->y0 + PANEL / 2, yl, p->log ? " (log scale)" : "");
	for (k = 0; k < p->nticks; k++) {
		double v = p->tick[k], x = px(p, v), y = py(p, v);

		fprintf(out, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#eee'/>"
			"<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#eee'/>\n",
			x, p->y0, x, p->y0 + PANEL, p->x0, y, p->x0 + PANEL, y);
		char lab[32];

		if (p->digits < 0)
			snprintf(lab, sizeof(lab), "%g", v);
		else
			snprintf(lab, sizeof(lab), "%.*f", p->digits, v);
		fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='10'>%s"
			"</text><text x='%.1f' y='%.1f' text-anchor='end' font-size='10'>%s</text>\n",
			x, p->y0 + PANEL + 14, lab, p->x0 - 4, y + 3, lab);
	}
}

/* The identity line and the +-10% lines, clipped to the square, and a
 * legend saying which is which in the top-left corner. */
static void guides(FILE *out, const struct panel *p)
{
	static const double f[3] = { 1.0, 1.0 + BAND, 1.0 - BAND };
	double lx = p->x0 + 8, ly = p->y0 + 8;
	int k;

	for (k = 0; k < 3; k++) {
		double x1 = fmax(p->lo, p->lo / f[k]), x2 = fmin(p->hi, p->hi / f[k]);

		if (!(x2 > x1))
			continue;	/* the line misses a range narrower than the band */
		fprintf(out, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s' "
			"stroke-dasharray='%s'/>\n", px(p, x1), py(p, x1 * f[k]), px(p, x2),
			py(p, x2 * f[k]), k ? "#888" : "#333", k ? "5 3" : "none");
	}
	fprintf(out, "<rect x='%.1f' y='%.1f' width='150' height='38' fill='white' "
		"fill-opacity='0.85' stroke='#ccc'/>\n"
		"<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#333'/>"
		"<text x='%.1f' y='%.1f' font-size='10'>predicted = measured</text>\n"
		"<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#888' stroke-dasharray='5 3'/>"
		"<text x='%.1f' y='%.1f' font-size='10'>predicted &#177;%.0f%% off</text>\n",
		lx, ly, lx + 6, ly + 12, lx + 28, ly + 12, lx + 34, ly + 15, lx + 6, ly + 27,
		lx + 28, ly + 27, lx + 34, ly + 30, 100 * BAND);
}

/* The colour of a model: its own among the first MAX_MODELS - 1, else
 * the last ("other"). */
static int model_index(const struct models *md, const char *name)
{
	int k;

	for (k = 0; k < md->n && k < MAX_MODELS - 1; k++)
		if (!strcmp(md->name[k], name))
			return k;
	return MAX_MODELS - 1;
}

/* A point's tooltip: the job, its model, GPU and stack, both figures. */
static void tooltip(FILE *out, const struct pipette_observation *o, const struct point *q)
{
	fputs("<title>job ", out);
	svg_escaped(out, o->plan_hash[0] ? o->plan_hash : o->name);
	fputs(" (", out);
	svg_escaped(out, o->name);
	fputs("): ", out);
	svg_escaped(out, o->model[0] ? o->model : "model not recorded");
	fputs(" on ", out);
	svg_escaped(out, o->gpu);
	fputs(", ", out);
	svg_escaped(out, o->stack);
	if (q->stage < 0)
		fprintf(out, "; step time predicted %.4g s, measured %.4g s (%+.1f%%)</title>",
			q->y, q->x, 100 * (q->y - q->x) / q->x);
	else
		fprintf(out, "; stage %d memory predicted %.2f GiB, measured reserved peak %.2f GiB "
			"(%+.1f%%)</title>", q->stage, q->y, q->x, 100 * (q->y - q->x) / q->x);
}

static void scatter(FILE *out, const struct panel *p, const struct point *pt, int n,
		    const struct pipette_observation *obs, const struct models *md,
		    const char *cls)
{
	int i;

	for (i = 0; i < n; i++) {
		const struct pipette_observation *o = &obs[pt[i].obs];

		fprintf(out, "<circle class='%s' cx='%.1f' cy='%.1f' r='3.5' fill='%s' "
			"fill-opacity='0.8' stroke='#333' stroke-width='0.4'>", cls, px(p, pt[i].x),
			py(p, pt[i].y), model_colour[model_index(md, o->model)]);
		tooltip(out, o, &pt[i]);
		fputs("</circle>\n", out);
	}
}

static int cmp_err(const void *a, const void *b)
{
	const struct point *x = a, *y = b;
	double ex = fabs(x->y / x->x - 1), ey = fabs(y->y / y->x - 1);

	if (ex != ey)
		return ex < ey ? 1 : -1;
	return (x->obs > y->obs) - (x->obs < y->obs);
}

/* The LABELS jobs furthest outside the band, labelled with their plan
 * hash (or file name) beside their point. */
static int label_outliers(FILE *out, const struct panel *p, const struct point *pt, int n,
			  const struct pipette_observation *obs)
{
	struct point *s = malloc(sizeof(*s) * ((size_t)n + 1));
	double at[LABELS][2];
	int i, j, shown = 0;

	if (!s)
		return -1;
	memcpy(s, pt, sizeof(*s) * (size_t)n);
	qsort(s, (size_t)n, sizeof(*s), cmp_err);
	for (i = 0; i < n && shown < LABELS && fabs(s[i].y / s[i].x - 1) > BAND; i++) {
		const struct pipette_observation *o = &obs[s[i].obs];

		/* a label that would overlap one drawn is left to the tooltip */
		for (j = 0; j < shown; j++)
			if (fabs(at[j][0] - px(p, s[i].x)) < 52 && fabs(at[j][1] - py(p, s[i].y)) < 11)
				break;
		if (j < shown)
			continue;
		at[shown][0] = px(p, s[i].x);
		at[shown++][1] = py(p, s[i].y);
		fprintf(out, "<text x='%.1f' y='%.1f' font-size='9' fill='#333'>", px(p, s[i].x) + 5,
			py(p, s[i].y) - 4);
		fprintf(out, "%.8s", o->plan_hash[0] ? o->plan_hash : o->name);
		fputs("</text>\n", out);
	}
	free(s);
	return 0;
}

/* The error histogram with a y scale of jobs at round counts. */
static void histogram(FILE *out, double x0, double y0, const struct point *pt, int n)
{
	int count[BINS], k, i, top = 0;
	struct svg_ticks t;
	double v;

	memset(count, 0, sizeof(count));
	for (i = 0; i < n; i++) {
		/* clamped before the conversion: an error of 1e12 is the last bin */
		double e = (pt[i].y - pt[i].x) / pt[i].x;
		double b = floor(fmax(-BINS, fmin(BINS, e / BIN))) + BINS / 2;

		k = (int)b;
		count[k < 0 ? 0 : k >= BINS ? BINS - 1 : k]++;
	}
	for (k = 0; k < BINS; k++)
		top = count[k] > top ? count[k] : top;
	svg_nice_ticks(0, top > 0 ? top : 1, 5, &t);
	if (t.step < 1)
		t.step = 1, t.last = ceil(t.last);	/* whole jobs */
	fprintf(out, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' "
		"stroke='#888'/>\n", x0, y0, PANEL, PANEL);
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' font-weight='bold'>step-time "
		"error, %d jobs</text>\n", x0 + PANEL / 2, y0 - 12, n);
	for (v = 0; v <= t.last + t.step / 2; v += t.step) {
		double y = y0 + PANEL - v / t.last * PANEL;

		fprintf(out, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#eee'/>"
			"<text x='%.1f' y='%.1f' text-anchor='end' font-size='10'>%.0f</text>\n",
			x0, y, x0 + PANEL, y, x0 - 4, y + 3, v);
	}
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' transform='rotate(-90 %.1f "
		"%.1f)'>jobs</text>\n", x0 - 34, y0 + PANEL / 2, x0 - 34, y0 + PANEL / 2);
	for (k = 0; k < BINS; k++) {
		double h = (double)count[k] / t.last * PANEL;

		fprintf(out, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#0072b2'>"
			"<title>%+.0f%% to %+.0f%%: %d jobs</title></rect>\n",
			x0 + k * PANEL / BINS + 1, y0 + PANEL - h, PANEL / BINS - 2, h,
			100 * BIN * (k - BINS / 2), 100 * BIN * (k + 1 - BINS / 2), count[k]);
	}
	for (k = 0; k <= BINS; k += 4)
		fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='10'>%+.0f%%"
			"</text>\n", x0 + k * PANEL / BINS, y0 + PANEL + 14,
			100 * BIN * (k - BINS / 2));
	fprintf(out, "<text x='%.1f' y='%.1f' text-anchor='middle'>(predicted - measured) / "
		"measured (outer bins: beyond)</text>\n", x0 + PANEL / 2, y0 + PANEL + 36);
}

/* The models' colours, below the panels. */
static void model_legend(FILE *out, const struct models *md, double y)
{
	double x = MARGIN;
	int k;

	fprintf(out, "<text x='%.1f' y='%.1f' font-weight='bold'>model</text>\n", x, y + 10);
	x += 46;
	for (k = 0; k < md->n; k++) {
		fprintf(out, "<circle cx='%.1f' cy='%.1f' r='4.5' fill='%s' stroke='#333' "
			"stroke-width='0.4'/><text x='%.1f' y='%.1f'>", x + 5, y + 6,
			model_colour[k], x + 14, y + 10);
		char count[24];
		int len = snprintf(count, sizeof(count), " (%d)", md->count[k]);

		svg_escaped(out, md->name[k][0] ? md->name[k] : "not recorded");
		fprintf(out, "%s</text>\n", count);
		len += (int)strlen(md->name[k][0] ? md->name[k] : "not recorded");
		x += 14 + 7.0 * len + 24;	/* 7 px a character at 12 px */
	}
}

/* Points of the two scatters; counts in *nt and *nm; the models seen. */
static void points(const struct pipette_observation *obs, int n, struct point *t, int *nt,
		   struct point *m, int *nm, struct models *md)
{
	int i, s;

	*nt = *nm = 0;
	md->n = 0;
	for (i = 0; i < n; i++) {
		int k = model_index(md, obs[i].model);

		if (k == MAX_MODELS - 1 && md->n < MAX_MODELS) {
			k = md->n++;
			md->name[k] = k == MAX_MODELS - 1 ? "other" : obs[i].model;
			md->count[k] = 0;
		}
		md->count[k]++;
		t[(*nt)++] = (struct point){ obs[i].measured_s, obs[i].model_s, i, -1 };
		for (s = 0; s < obs[i].nstages; s++) {
			const struct pipette_obs_stage *st = &obs[i].stages[s];

			if (st->measured_bytes > 0 && st->predicted_bytes > 0)
				m[(*nm)++] = (struct point){ st->measured_bytes / 1073741824.0,
							     st->predicted_bytes / 1073741824.0, i, s };
		}
	}
}

int cli_obs_report_svg(const struct pipette_observation *obs, int n, FILE *out)
{
	struct panel t = { .x0 = MARGIN, .y0 = TOP }, m = { .x0 = MARGIN * 2 + PANEL + GAP, .y0 = TOP };
	double width = 3 * (PANEL + MARGIN) + 2 * GAP + 24, height = TOP + PANEL + 86;
	struct point *tp, *mp;
	struct models md;
	size_t stages = 0;
	int nt, nm, i, rc = 0;

	for (i = 0; i < n; i++)
		stages += (size_t)obs[i].nstages;
	if (!(tp = calloc((size_t)n + stages + 1, sizeof(*tp))))
		return -1;
	mp = tp + n;
	points(obs, n, tp, &nt, mp, &nm, &md);
	range(&t, tp, nt);
	range(&m, mp, nm);
	fprintf(out, "<?xml version='1.0' encoding='UTF-8'?>\n<svg xmlns='http://www.w3.org/2000/svg' "
		"width='%.0f' height='%.0f' font-family='sans-serif' font-size='12'>\n"
		"<rect width='100%%' height='100%%' fill='white'/>\n"
		"<text x='%.1f' y='24' font-size='15'>Predicted against measured: %d jobs of %d "
		"model%s</text>\n", width, height, MARGIN, n, md.n, md.n == 1 ? "" : "s");
	frame(out, &t, "step time, s (model, before site factors)", "measured", "predicted");
	guides(out, &t);
	scatter(out, &t, tp, nt, obs, &md, "obs-step");
	rc |= label_outliers(out, &t, tp, nt, obs);
	frame(out, &m, "memory per stage, GiB", "measured reserved peak", "predicted");
	guides(out, &m);
	scatter(out, &m, mp, nm, obs, &md, "obs-mem");
	histogram(out, MARGIN * 3 + 2 * PANEL + 2 * GAP, TOP, tp, nt);
	model_legend(out, &md, TOP + PANEL + 56);
	fputs("</svg>\n", out);
	free(tp);
	return rc || ferror(out) ? -1 : 0;
}
