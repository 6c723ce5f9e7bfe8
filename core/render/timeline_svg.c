/* pipette: the simulated pipeline timeline as a standalone SVG document.
 *
 * One row per pipeline rank; F, B and W blocks in three colours (a lighter
 * shade for odd chunks), the micro-batch number inside a block when it
 * fits, each inter-rank transfer as a line from the sender's row at the
 * send time to the receiver's row at the arrival time, a time axis in ms
 * and a legend.  Reads the last simulation through the public event API. */
#include "estimate/schedule.h"

#include <math.h>
#include <string.h>

#define SVG_LEFT 64.0	/* px: room for the rank labels */
#define SVG_PLOT 1200.0	/* px: width of the time axis */
#define SVG_RIGHT 24.0
#define SVG_TOP 40.0	/* px: title */
#define SVG_ROW 26.0	/* px per rank */
#define SVG_BAR 20.0	/* px: block height inside a row */
#define SVG_AXIS 36.0	/* px: ticks and their labels */
#define SVG_LEGEND 30.0

/* Colours: Tableau 10 blue/orange/green, and lighter shades for odd chunks. */
static const char *const fill_even[3] = { "#4e79a7", "#f28e2b", "#59a14f" };
static const char *const fill_odd[3] = { "#a0cbe8", "#ffbe7d", "#8cd17d" };

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

/* A tick step of 1, 2 or 5 times a power of ten giving about 8 ticks. */
static double tick_step(double span_ms)
{
	double raw = span_ms / 8, mag, f;

	if (!(raw > 0))
		return 1;
	mag = pow(10, floor(log10(raw)));
	f = raw / mag;
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

/* The drawing's frame: p rank rows, time scaled by xs px per second. */
struct frame {
	int p;
	double makespan, xs;
};

static void svg_head(FILE *out, const struct frame *fr, const char *title)
{
	double width = SVG_LEFT + SVG_PLOT + SVG_RIGHT;
	double height = SVG_TOP + fr->p * SVG_ROW + SVG_AXIS + SVG_LEGEND;

	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n",
		width, height, width, height);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n",
		width, height);
	fprintf(out, "<text x=\"%.1f\" y=\"24\" font-size=\"15\">", SVG_LEFT);
	put_escaped(out, title ? title : "pipeline timeline");
	fprintf(out, " (makespan %.3f ms)</text>\n", fr->makespan * 1e3);
}

/* One striped row per rank, with its label. */
static void svg_rows(FILE *out, const struct frame *fr)
{
	int r;

	for (r = 0; r < fr->p; r++) {
		double y = SVG_TOP + r * SVG_ROW;

		fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
			SVG_LEFT, y, SVG_PLOT, SVG_ROW, r % 2 ? "#f4f4f4" : "#ffffff");
		fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">rank %d</text>\n",
			SVG_LEFT - 6, y + SVG_ROW / 2 + 4, r);
	}
}

/* The n ops as blocks (with a tooltip), then their micro-batch numbers
 * where they fit. */
static void svg_blocks(FILE *out, const struct pipette_sched *s, long n,
		       const struct frame *fr)
{
	struct pipette_sched_event ev;
	long i;

	fputs("<g stroke=\"#333333\" stroke-width=\"0.3\">\n", out);
	for (i = 0; i < n; i++) {
		double x, w, y;
		int ti;

		pipette_sched_event(s, i, &ev);
		ti = type_index(ev.type);
		x = SVG_LEFT + ev.start * fr->xs;
		w = (ev.end - ev.start) * fr->xs;
		y = SVG_TOP + ev.rank * SVG_ROW + (SVG_ROW - SVG_BAR) / 2;
		fprintf(out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
			"<title>rank %d %c chunk %d stage %d mb %ld: %.4f-%.4f ms</title></rect>\n",
			x, y, w, SVG_BAR, ev.chunk % 2 ? fill_odd[ti] : fill_even[ti],
			ev.rank, ev.type, ev.chunk, ev.stage, ev.mb, ev.start * 1e3, ev.end * 1e3);
	}
	fputs("</g>\n<g font-size=\"9\" text-anchor=\"middle\" fill=\"#000000\">\n", out);
	for (i = 0; i < n; i++) {
		char num[24];
		double w;
		int k;

		pipette_sched_event(s, i, &ev);
		w = (ev.end - ev.start) * fr->xs;
		k = snprintf(num, sizeof(num), "%ld", ev.mb);
		if (w < 6.0 * k + 2)
			continue;	/* the number does not fit */
		fprintf(out, "<text x=\"%.2f\" y=\"%.1f\">%s</text>\n",
			SVG_LEFT + (ev.start + ev.end) / 2 * fr->xs,
			SVG_TOP + ev.rank * SVG_ROW + SVG_ROW / 2 + 3, num);
	}
	fputs("</g>\n", out);
}

/* Transfers: sender's row edge at send time to receiver's at arrival. */
static void svg_transfers(FILE *out, const struct pipette_sched *s, long n,
			  const struct frame *fr)
{
	struct pipette_sched_event ev;
	long i;

	fputs("<g stroke=\"#d62728\" stroke-width=\"0.8\" stroke-opacity=\"0.7\">\n", out);
	for (i = 0; i < n; i++) {
		double y0, y1;

		pipette_sched_event(s, i, &ev);
		if (ev.from_rank < 0 || !(ev.xfer_end > ev.xfer_start))
			continue;
		y0 = SVG_TOP + ev.from_rank * SVG_ROW + (ev.from_rank < ev.rank ? SVG_ROW - 2 : 2);
		y1 = SVG_TOP + ev.rank * SVG_ROW + (ev.from_rank < ev.rank ? 2 : SVG_ROW - 2);
		fprintf(out, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>\n",
			SVG_LEFT + ev.xfer_start * fr->xs, y0, SVG_LEFT + ev.xfer_end * fr->xs, y1);
	}
	fputs("</g>\n", out);
}

/* Time axis in ms. */
static void svg_axis(FILE *out, const struct frame *fr)
{
	double ya = SVG_TOP + fr->p * SVG_ROW, span_ms = fr->makespan * 1e3, step, t;

	fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>\n",
		SVG_LEFT, ya, SVG_LEFT + SVG_PLOT, ya);
	step = tick_step(span_ms);
	for (t = 0; span_ms > 0 && t <= span_ms * (1 + 1e-9); t += step) {
		double x = SVG_LEFT + t / span_ms * SVG_PLOT;

		fprintf(out, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000000\"/>"
			"<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
			x, ya, x, ya + 5, x, ya + 17, t);
	}
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">ms</text>\n",
		SVG_LEFT + SVG_PLOT, ya + 31);
}

static void svg_legend(FILE *out, const struct frame *fr)
{
	static const char *const names[3] = { "F forward", "B backward (input grad; +W when folded)",
					     "W weight grad" };
	double yl = SVG_TOP + fr->p * SVG_ROW + SVG_AXIS + 6, x = SVG_LEFT;
	int k;

	for (k = 0; k < 3; k++) {
		fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"12\" fill=\"%s\"/>"
			"<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"12\" fill=\"%s\"/>"
			"<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
			x, yl, fill_even[k], x + 15, yl, fill_odd[k], x + 34, yl + 10, names[k]);
		x += 34 + 7.0 * (double)strlen(names[k]) + 20;
	}
	fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\"/>"
		"<text x=\"%.1f\" y=\"%.1f\">transfer; lighter shade = odd chunk</text>\n",
		x, yl + 6, x + 24, yl + 6, x + 30, yl + 10);
}

int pipette_sched_write_svg(const struct pipette_sched *s, FILE *out,
			    const char *title, struct pipette_err *err)
{
	struct pipette_sched_event ev;
	struct frame fr = { 0, 0, 0 };
	long n;

	if (!out)
		return pipette_fail(err, "timeline svg: no output stream");
	for (n = 0; pipette_sched_event(s, n, &ev) == 0; n++) {
		if (ev.rank + 1 > fr.p)
			fr.p = ev.rank + 1;
		if (ev.end > fr.makespan)
			fr.makespan = ev.end;
	}
	if (n == 0)
		return pipette_fail(err, "timeline svg: no simulation to draw (call pipette_sched_simulate first)");
	fr.xs = fr.makespan > 0 ? SVG_PLOT / fr.makespan : 0;
	svg_head(out, &fr, title);
	svg_rows(out, &fr);
	svg_blocks(out, s, n, &fr);
	svg_transfers(out, s, n, &fr);
	svg_axis(out, &fr);
	svg_legend(out, &fr);
	fputs("</svg>\n", out);
	if (ferror(out))
		return pipette_fail(err, "timeline svg: write error");
	return 0;
}
