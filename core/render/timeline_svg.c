/* pipette: the simulated pipeline timeline as a standalone SVG document.
 *
 * A title with the model, the configuration and where the step's time
 * goes (the bubble share of the pipeline, the DP sync, the optimizer);
 * one row per pipeline rank with F, B and W blocks in three colours (a
 * lighter shade for odd chunks), the micro-batch number inside a block
 * when it fits, a tooltip on every block, and the rank's busy share at
 * the row's end; each inter-rank transfer as a line from the sender's row
 * at the send time to the receiver's row at the arrival time; a "step"
 * row with the DP gradient sync (the part hidden under the cool-down in a
 * lighter shade), the embedding sync and the optimizer step; a time axis
 * and a legend.
 *
 * Long runs are windowed.  When the average block would be narrower than
 * MIN_OP_PX on the full time axis (256 micro-batches of 1F1B on 4 ranks
 * give 2 px), the drawing shows three windows on one time scale: the
 * warm-up (until the busiest-to-fill rank's first backward ends), a window
 * of the steady state from the middle of the run, and the cool-down (from
 * the earliest last forward on any rank) with the step after it; a break
 * mark between windows says how much time it leaves out.  Reads the last
 * simulation through the public event API. */
#include "estimate/schedule.h"
#include "inputs/knobs.h"
#include "inputs/stack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SVG_LEFT 80.0	/* px: room for the rank labels */
#define SVG_PLOT 1200.0	/* px: width of the time axis */
#define SVG_RIGHT 86.0	/* px: the busy share */
#define SVG_TOP 78.0	/* px: three title lines and the break labels */
#define SVG_AXIS 40.0	/* px: ticks and their labels */
#define SVG_LEGEND 46.0	/* px: two legend lines */
#define SVG_GAP 28.0	/* px: a break between two windows */
#define MIN_OP_PX 6.0	/* px: narrower average blocks are windowed */
#define TICK_PX 70.0	/* px: the least room between two time ticks */

/* Colours: Tableau 10 (Tableau's default categorical palette) blue, orange,
 * green for F, B, W and its lighter shades for odd chunks; purple for the
 * DP sync, yellow for the embedding sync, teal for the optimizer step. */
static const char *const fill_even[3] = { "#4e79a7", "#f28e2b", "#59a14f" };
static const char *const fill_odd[3] = { "#a0cbe8", "#ffbe7d", "#8cd17d" };
#define FILL_DP "#b07aa1"
#define FILL_DP_HIDDEN "#d4a6c8"
#define FILL_EMBED "#edc948"
#define FILL_OPT "#76b7b2"
#define STROKE_XFER "#d62728"

static int type_index(char t)
{
	return t == 'F' ? 0 : t == 'B' ? 1 : 2;
}

static void put_escaped(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '&': fputs("&amp;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&apos;", out); break;
		default:
			/* control characters are not allowed in XML 1.0 */
			if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
				fputc(*s, out);
		}
	}
}

/* A duration in the unit that reads best: "72.791 s", "104.8 ms", "3.2 us". */
static const char *dur(double s, char *buf, size_t size)
{
	if (!(s > 0))
		snprintf(buf, size, "0 s");
	else if (s >= 1)
		snprintf(buf, size, "%.3f s", s);
	else if (s >= 1e-3)
		snprintf(buf, size, "%.1f ms", s * 1e3);
	else
		snprintf(buf, size, "%.1f us", s * 1e6);
	return buf;
}

/* A tick step of 1, 2 or 5 times a power of ten, at least `least`. */
static double tick_step(double least)
{
	double mag, f;

	if (!(least > 0))
		return 1;
	mag = pow(10, floor(log10(least)));
	f = least / mag;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

/* A time window drawn from x0 (px) on: [t0, t1] seconds. */
struct seg {
	double t0, t1, x0;
};

/* The drawing's frame. */
struct frame {
	int p;			/* pipeline ranks */
	long n;			/* events */
	double makespan;	/* the pipeline's */
	double end;		/* the step's: makespan and what follows it */
	double xs;		/* px per second, the same in every window */
	int nseg;
	struct seg seg[3];
	double row, bar;	/* px: a rank's row and the block inside it */
	int label_every;	/* label every k-th rank when rows are thin */
	int step_row;		/* 1: draw the step after the pipeline */
	double *busy;		/* p: compute seconds per rank */
	double first_b_end, last_f_start, op_mean;
	const struct pipette_timeline_info *info;
};

static double x_of(const struct frame *fr, int k, double t)
{
	return fr->seg[k].x0 + (t - fr->seg[k].t0) * fr->xs;
}

static double rows_h(const struct frame *fr)
{
	return (fr->p + fr->step_row) * fr->row;
}

/* The extent of the run and its phases, in one pass over the events. */
static int measure(const struct pipette_sched *s, struct frame *fr)
{
	struct pipette_sched_event ev;
	double *first_b = NULL, *last_f = NULL, sum = 0;
	long i;
	int r, rc = -1;

	for (fr->n = 0; pipette_sched_event(s, fr->n, &ev) == 0; fr->n++) {
		if (ev.rank + 1 > fr->p)
			fr->p = ev.rank + 1;
		if (ev.end > fr->makespan)
			fr->makespan = ev.end;
	}
	if (fr->n == 0)
		return 0;
	fr->busy = calloc((size_t)fr->p, sizeof(double));
	first_b = malloc(sizeof(double) * (size_t)fr->p * 2);
	if (!fr->busy || !first_b)
		goto out;
	last_f = first_b + fr->p;
	for (r = 0; r < fr->p; r++) {
		first_b[r] = -1;
		last_f[r] = -1;
	}
	for (i = 0; i < fr->n; i++) {
		pipette_sched_event(s, i, &ev);
		fr->busy[ev.rank] += ev.end - ev.start;
		sum += ev.end - ev.start;
		if (ev.type == 'B' && first_b[ev.rank] < 0)
			first_b[ev.rank] = ev.end;
		if (ev.type == 'F')
			last_f[ev.rank] = ev.start;
	}
	fr->first_b_end = 0;
	fr->last_f_start = fr->makespan;
	for (r = 0; r < fr->p; r++) {
		fr->first_b_end = fmax(fr->first_b_end, first_b[r]);
		if (last_f[r] >= 0)
			fr->last_f_start = fmin(fr->last_f_start, last_f[r]);
	}
	fr->op_mean = sum / (double)fr->n;
	rc = 0;
out:
	free(first_b);
	return rc;
}

/* One window over the whole step, or three when the blocks would be too
 * thin: the warm-up, a window of the steady state and the cool-down. */
static void layout(struct frame *fr)
{
	const struct pipette_timeline_info *in = fr->info;
	double tail = 0, warm, cool, win, mid;

	if (in)
		tail = fmax(0, in->dp_tail_s) + fmax(0, in->embed_sync_s) + fmax(0, in->optimizer_s);
	fr->step_row = in && (in->dp_comm_s > 0 || tail > 0);
	fr->end = fr->makespan + tail;
	fr->row = fr->p <= 24 ? 26.0 : fmax(9.0, 624.0 / fr->p);
	fr->bar = fr->row * 0.78;
	fr->label_every = fr->row >= 14 ? 1 : (int)ceil(14 / fr->row);
	fr->nseg = 1;
	fr->seg[0] = (struct seg){ 0, fr->end, SVG_LEFT };
	fr->xs = fr->end > 0 ? SVG_PLOT / fr->end : 0;
	if (!(fr->op_mean * fr->xs < MIN_OP_PX))
		return;
	warm = fr->first_b_end;
	cool = fr->end - fr->last_f_start;
	/* the steady-state window: as long as the warm-up, and at least 8
	 * blocks long */
	win = fmax(warm, 8 * fr->op_mean);
	if (!(fr->last_f_start - warm > 1.5 * win))
		return;		/* too little steady state to leave out */
	mid = (warm + fr->last_f_start) / 2;
	fr->nseg = 3;
	fr->xs = (SVG_PLOT - 2 * SVG_GAP) / (warm + win + cool);
	fr->seg[0] = (struct seg){ 0, warm, SVG_LEFT };
	fr->seg[1] = (struct seg){ mid - win / 2, mid + win / 2, SVG_LEFT + warm * fr->xs + SVG_GAP };
	fr->seg[2] = (struct seg){ fr->last_f_start, fr->end,
				   fr->seg[1].x0 + win * fr->xs + SVG_GAP };
}

/* The configuration in one line: "llama3-70b, megatron: TP 8 PP 4 ...". */
static void title_config(FILE *out, const struct frame *fr)
{
	const struct pipette_timeline_info *in = fr->info;
	const struct pipette_config *c = in ? in->cfg : NULL;

	put_escaped(out, in && in->model ? in->model : "pipeline timeline");
	if (!c)
		return;
	if (c->stack) {
		fputs(" on ", out);
		put_escaped(out, c->stack->name);
	}
	fprintf(out, ": TP %d, PP %d, DP %d, CP %d", c->tp, c->pp, c->dp, c->cp);
	if (c->ep > 1)
		fprintf(out, ", EP %d", c->ep);
	if (pipette_config_chunks(c) > 1)
		fprintf(out, ", %d chunks per rank", pipette_config_chunks(c));
	fprintf(out, "; %s, %ld micro-batches of %d (global batch %ld), sequence %ld",
		pipette_schedule_name(c->schedule), pipette_config_microbatches(c),
		c->micro_batch, c->global_batch, c->seq_len);
}

/* The second and third title lines: the step's time and the windows. */
static void title_times(FILE *out, const struct frame *fr, double y)
{
	const struct pipette_timeline_info *in = fr->info;
	double busiest = 0, left;
	char a[32], b[32], c[32];
	int r;

	for (r = 0; r < fr->p; r++)
		busiest = fmax(busiest, fr->busy[r]);
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">", SVG_LEFT, y);
	if (in && in->iteration_s > 0)
		fprintf(out, "step %s: ", dur(in->iteration_s, a, sizeof(a)));
	fprintf(out, "pipeline %s, bubble %.1f%% (the busiest rank idles %s)",
		dur(fr->makespan, b, sizeof(b)), 100 * (1 - busiest / fr->makespan),
		dur(fr->makespan - busiest, c, sizeof(c)));
	if (fr->step_row && in->dp_comm_s > 0)
		fprintf(out, "; DP gradient sync %s (%s past the pipeline)",
			dur(in->dp_comm_s, a, sizeof(a)), dur(in->dp_tail_s, b, sizeof(b)));
	if (fr->step_row && in->embed_sync_s > 0)
		fprintf(out, "; embedding sync %s", dur(in->embed_sync_s, a, sizeof(a)));
	if (fr->step_row && in->optimizer_s > 0)
		fprintf(out, "; optimizer step %s", dur(in->optimizer_s, a, sizeof(a)));
	fputs("</text>\n", out);
	if (fr->nseg == 1)
		return;
	left = fr->end - (fr->seg[0].t1 - fr->seg[0].t0) - (fr->seg[1].t1 - fr->seg[1].t0) -
	       (fr->seg[2].t1 - fr->seg[2].t0);
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555555\">%ld operations: drawn are "
		"the warm-up, %s of the steady state and the cool-down, on one time scale; "
		"the two breaks leave out %s of the steady state</text>\n", SVG_LEFT, y + 17,
		fr->n, dur(fr->seg[1].t1 - fr->seg[1].t0, a, sizeof(a)), dur(left, b, sizeof(b)));
}

static void svg_head(FILE *out, const struct frame *fr)
{
	double width = SVG_LEFT + SVG_PLOT + SVG_RIGHT;
	double height = SVG_TOP + rows_h(fr) + SVG_AXIS + SVG_LEGEND;

	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n",
		width, height, width, height);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n",
		width, height);
	fprintf(out, "<text x=\"%.1f\" y=\"20\" font-size=\"15\">", SVG_LEFT);
	title_config(out, fr);
	fputs("</text>\n", out);
	title_times(out, fr, 38);
}

/* One striped row per rank with its label and busy share, and the step
 * row; each window's background. */
static void svg_rows(FILE *out, const struct frame *fr)
{
	int r, k;

	for (r = 0; r < fr->p + fr->step_row; r++) {
		double y = SVG_TOP + r * fr->row;

		for (k = 0; k < fr->nseg; k++)
			fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
				"fill=\"%s\"/>\n", fr->seg[k].x0, y,
				(fr->seg[k].t1 - fr->seg[k].t0) * fr->xs, fr->row,
				r == fr->p ? "#ece8f0" : r % 2 ? "#f4f4f4" : "#ffffff");
		if (r == fr->p) {
			fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">step</text>\n",
				SVG_LEFT - 6, y + fr->row / 2 + 4);
			continue;
		}
		if (r % fr->label_every && r != fr->p - 1)
			continue;
		fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">PP rank %d</text>\n"
			"<text x=\"%.1f\" y=\"%.1f\">busy %.1f%%</text>\n",
			SVG_LEFT - 6, y + fr->row / 2 + 4, r, SVG_LEFT + SVG_PLOT + 6,
			y + fr->row / 2 + 4, 100 * fr->busy[r] / fr->makespan);
	}
}

/* The part of [a, b] that window k shows, in px; 0 when none. */
static int clip(const struct frame *fr, int k, double a, double b, double *x, double *w)
{
	double lo = fmax(a, fr->seg[k].t0), hi = fmin(b, fr->seg[k].t1);

	if (!(hi > lo) && !(a == b && a >= fr->seg[k].t0 && a <= fr->seg[k].t1))
		return 0;
	*x = x_of(fr, k, lo);
	*w = fmax(0, hi - lo) * fr->xs;
	return 1;
}

/* The n ops as blocks (with a tooltip) in every window they reach. */
static void svg_blocks(FILE *out, const struct pipette_sched *s, const struct frame *fr)
{
	struct pipette_sched_event ev;
	double x, w;
	long i;
	int k;

	fputs("<g stroke=\"#333333\" stroke-width=\"0.3\">\n", out);
	for (i = 0; i < fr->n; i++) {
		int ti;

		pipette_sched_event(s, i, &ev);
		ti = type_index(ev.type);
		for (k = 0; k < fr->nseg; k++) {
			if (!clip(fr, k, ev.start, ev.end, &x, &w))
				continue;
			fprintf(out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
				"fill=\"%s\"><title>rank %d %c chunk %d stage %d mb %ld: "
				"%.4f-%.4f ms</title></rect>\n", x,
				SVG_TOP + ev.rank * fr->row + (fr->row - fr->bar) / 2, w, fr->bar,
				ev.chunk % 2 ? fill_odd[ti] : fill_even[ti], ev.rank, ev.type,
				ev.chunk, ev.stage, ev.mb, ev.start * 1e3, ev.end * 1e3);
		}
	}
	fputs("</g>\n", out);
}

/* The micro-batch numbers inside the blocks wide enough for them. */
static void svg_numbers(FILE *out, const struct pipette_sched *s, const struct frame *fr)
{
	struct pipette_sched_event ev;
	double x, w;
	long i;
	int k;

	if (fr->bar < 10)
		return;	/* no room for a digit's height */
	fputs("<g font-size=\"9\" text-anchor=\"middle\" fill=\"#000000\">\n", out);
	for (i = 0; i < fr->n; i++) {
		char num[24];
		int len;

		pipette_sched_event(s, i, &ev);
		len = snprintf(num, sizeof(num), "%ld", ev.mb);
		for (k = 0; k < fr->nseg; k++)
			if (clip(fr, k, ev.start, ev.end, &x, &w) && w >= 6.0 * len + 2)
				fprintf(out, "<text x=\"%.2f\" y=\"%.1f\">%s</text>\n", x + w / 2,
					SVG_TOP + ev.rank * fr->row + fr->row / 2 + 3, num);
	}
	fputs("</g>\n", out);
}

/* Transfers: sender's row edge at send time to receiver's at arrival,
 * where one window holds both ends. */
static void svg_transfers(FILE *out, const struct pipette_sched *s, const struct frame *fr)
{
	struct pipette_sched_event ev;
	long i;
	int k;

	fputs("<g stroke=\"" STROKE_XFER "\" stroke-width=\"0.8\" stroke-opacity=\"0.7\">\n",
	      out);
	for (i = 0; i < fr->n; i++) {
		double y0, y1, edge = fr->row > 8 ? 2 : 0;

		pipette_sched_event(s, i, &ev);
		if (ev.from_rank < 0 || !(ev.xfer_end > ev.xfer_start))
			continue;
		y0 = SVG_TOP + ev.from_rank * fr->row + (ev.from_rank < ev.rank ? fr->row - edge : edge);
		y1 = SVG_TOP + ev.rank * fr->row + (ev.from_rank < ev.rank ? edge : fr->row - edge);
		for (k = 0; k < fr->nseg; k++)
			if (ev.xfer_start >= fr->seg[k].t0 && ev.xfer_end <= fr->seg[k].t1)
				fprintf(out, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>\n",
					x_of(fr, k, ev.xfer_start), y0, x_of(fr, k, ev.xfer_end), y1);
	}
	fputs("</g>\n", out);
}

/* One phase of the step row, at least 2 px wide so that it shows. */
static void step_phase(FILE *out, const struct frame *fr, double a, double b, const char *fill,
		       const char *what)
{
	double x, w, y = SVG_TOP + fr->p * fr->row + (fr->row - fr->bar) / 2;
	char d[32];
	int k;

	if (!(b > a))
		return;
	for (k = 0; k < fr->nseg; k++)
		if (clip(fr, k, a, b, &x, &w))
			fprintf(out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
				"fill=\"%s\" stroke=\"#333333\" stroke-width=\"0.3\"><title>%s: %s"
				"</title></rect>\n", x, y, fmax(w, 2), fr->bar, fill, what,
				dur(b - a, d, sizeof(d)));
}

/* The step after the pipeline: the DP sync (its part under the cool-down
 * lighter), the embedding sync, the optimizer step. */
static void svg_step(FILE *out, const struct frame *fr)
{
	const struct pipette_timeline_info *in = fr->info;
	double t = fr->makespan, dp_end;

	if (!fr->step_row)
		return;
	dp_end = t + fmax(0, in->dp_tail_s);
	step_phase(out, fr, fmax(0, dp_end - in->dp_comm_s), fmin(t, dp_end), FILL_DP_HIDDEN,
		   "DP gradient sync, hidden under the cool-down");
	step_phase(out, fr, t, dp_end, FILL_DP, "DP gradient sync past the pipeline");
	t = dp_end;
	step_phase(out, fr, t, t + fmax(0, in->embed_sync_s), FILL_EMBED, "embedding sync");
	t += fmax(0, in->embed_sync_s);
	step_phase(out, fr, t, t + fmax(0, in->optimizer_s), FILL_OPT, "optimizer step");
}

/* The breaks between windows: a grey band with two slanted strokes over
 * the rows and the axis, and above it the time it leaves out. */
static void svg_breaks(FILE *out, const struct frame *fr)
{
	double y0 = SVG_TOP - 4, y1 = SVG_TOP + rows_h(fr) + 6;
	char d[32];
	int k;

	for (k = 0; k + 1 < fr->nseg; k++) {
		double xa = x_of(fr, k, fr->seg[k].t1), xb = fr->seg[k + 1].x0;

		fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			"fill=\"#dddddd\"/>\n<path d=\"M%.1f %.1f L%.1f %.1f M%.1f %.1f L%.1f %.1f\" "
			"stroke=\"#555555\" stroke-width=\"1.5\" fill=\"none\"/>\n",
			xa + 4, y0, xb - xa - 8, y1 - y0, xa + 4, y1, xa + 12, y0, xb - 12, y1, xb - 4,
			y0);
		fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555555\">"
			"%s left out</text>\n", (xa + xb) / 2, SVG_TOP - 8,
			dur(fr->seg[k + 1].t0 - fr->seg[k].t1, d, sizeof(d)));
	}
}

/* The time axis: ticks at round times in each window, in s or ms. */
static void svg_axis(FILE *out, const struct frame *fr)
{
	double ya = SVG_TOP + rows_h(fr), unit = fr->end >= 10 ? 1 : 1e-3;
	double step_u = tick_step(TICK_PX / (fr->xs * unit)), step = step_u * unit;
	int k;

	for (k = 0; k < fr->nseg && fr->xs > 0; k++) {
		const struct seg *g = &fr->seg[k];
		double xe = x_of(fr, k, g->t1), t;

		fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			"stroke=\"#000000\"/>\n", g->x0, ya, xe, ya);
		for (t = ceil(g->t0 / step - 1e-9) * step; t <= g->t1 * (1 + 1e-12); t += step) {
			double x = x_of(fr, k, t);

			/* a label near a break would run into the next window's */
			if (k + 1 < fr->nseg && xe - x < 30)
				continue;
			fprintf(out, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" "
				"stroke=\"#000000\"/><text x=\"%.2f\" y=\"%.1f\" "
				"text-anchor=\"middle\">%g</text>\n", x, ya, x, ya + 5, x, ya + 17,
				round(t / step) * step_u + 0.0);
		}
	}
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">time, %s</text>\n",
		SVG_LEFT + SVG_PLOT, ya + 32, unit == 1 ? "s" : "ms");
}

/* One legend entry: a swatch (or two), its text; returns the next x. */
static double legend_item(FILE *out, double x, double y, const char *a, const char *b,
			  const char *text)
{
	fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"12\" fill=\"%s\"/>", x, y,
		a);
	if (b)
		fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"12\" fill=\"%s\"/>",
			x + 15, y, b);
	x += b ? 34 : 19;
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x, y + 10, text);
	return x + 6.2 * (double)strlen(text) + 22;
}

static void svg_legend(FILE *out, const struct frame *fr)
{
	double y = SVG_TOP + rows_h(fr) + SVG_AXIS + 2, x = SVG_LEFT;

	x = legend_item(out, x, y, fill_even[0], fill_odd[0], "F forward");
	x = legend_item(out, x, y, fill_even[1], fill_odd[1],
			"B backward (input grad; +W when folded)");
	x = legend_item(out, x, y, fill_even[2], fill_odd[2], "W weight grad");
	fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\""
		STROKE_XFER "\"/><text x=\"%.1f\" y=\"%.1f\">transfer between ranks; lighter "
		"shade = odd chunk</text>\n", x, y + 6, x + 24, y + 6, x + 30, y + 10);
	if (!fr->step_row)
		return;
	y += 18;
	x = SVG_LEFT;
	if (fr->info->dp_comm_s > 0)
		x = legend_item(out, x, y, FILL_DP_HIDDEN, FILL_DP,
				"DP gradient sync (hidden under the cool-down; past the pipeline)");
	if (fr->info->embed_sync_s > 0)
		x = legend_item(out, x, y, FILL_EMBED, NULL, "embedding sync");
	if (fr->info->optimizer_s > 0)
		legend_item(out, x, y, FILL_OPT, NULL, "optimizer step");
}

int pipette_sched_write_timeline_svg(const struct pipette_sched *s,
				     const struct pipette_timeline_info *info, FILE *out,
				     struct pipette_err *err)
{
	struct frame fr;

	if (!out)
		return pipette_fail(err, "timeline svg: no output stream");
	memset(&fr, 0, sizeof(fr));
	fr.info = info;
	if (measure(s, &fr)) {
		free(fr.busy);
		return pipette_fail(err, "timeline svg: out of memory");
	}
	if (fr.n == 0)
		return pipette_fail(err, "timeline svg: no simulation to draw (call pipette_sched_simulate first)");
	layout(&fr);
	svg_head(out, &fr);
	svg_rows(out, &fr);
	svg_blocks(out, s, &fr);
	svg_numbers(out, s, &fr);
	svg_transfers(out, s, &fr);
	svg_step(out, &fr);
	svg_breaks(out, &fr);
	svg_axis(out, &fr);
	svg_legend(out, &fr);
	fputs("</svg>\n", out);
	free(fr.busy);
	if (ferror(out))
		return pipette_fail(err, "timeline svg: write error");
	return 0;
}

int pipette_sched_write_svg(const struct pipette_sched *s, FILE *out,
			    const char *title, struct pipette_err *err)
{
	struct pipette_timeline_info info;

	memset(&info, 0, sizeof(info));
	info.model = title;
	return pipette_sched_write_timeline_svg(s, &info, out, err);
}
