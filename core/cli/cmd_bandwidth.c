/* pipette bandwidth: validate, show, import, merge and generate bandwidth
 * caches (format: core/inputs/bwcache.h; man pipette-bandwidth(5)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "inputs/bwcache.h"
#include "cli.h"
#include "inputs/hardware.h"
#include "hostlist.h"
#include "inputs/limits.h"
#include "svg.h"

/* Figures older than this are used with a warning; `--stale-days`
 * changes it.  A site policy, not a measurement: links degrade and get
 * repaired on the scale of weeks, so a monthly probe is the default. */
#define BW_STALE_DAYS 30.0

static void usage(FILE *f)
{
	fprintf(f,
"usage: pipette bandwidth validate FILE... [--stale-days D] [--now TIME]\n"
"                              [--gpu TYPE] [--nvlink-domain N]\n"
"       pipette bandwidth show FILE [--nodes LIST] [--worst K] [--svg OUT]\n"
"                              [--switch-size S] [--nvlink-domain N] [--gpu TYPE]\n"
"                              [--stale-days D] [--now TIME]\n"
"       pipette bandwidth import --from pipette-legacy|nccl-tests IN... -o OUT\n"
"                              [--pair A,B] [--bytes N] [--tool NAME]\n"
"                              [--when TIME] [--gpus-per-node G]\n"
"       pipette bandwidth merge A B... -o OUT\n"
"       pipette bandwidth generate --seed N --nodes N [--gpus-per-node G]\n"
"                              [--gpu TYPE] [--efficiency E] [--noise F]\n"
"                              [--inter-gbps G] [--intra-gbps G]\n"
"                              [--slow-links FRAC] [--slow-range MIN,MAX]\n"
"                              [--switch-size S] [--cross-factor F]\n"
"                              [--slow-switch K:F] [--degraded-nvlink NODE[:F]]\n"
"                              [--nvlink-domain N] [--degraded-tray NODE[:F]]\n"
"                              [--prefix P] [--when TIME] -o OUT\n"
"       pipette bandwidth convert IN -o OUT\n"
"                              [--to pipette-bw/1|pipette-bw/2|pipette-bw/3]\n"
"                              [--domain NAME=HOSTLIST]... [--domain-gpus N]\n"
"                              [--group NAME=HOSTLIST]... [--switch-size S]\n"
"                              [--tolerance T]\n"
"\n"
"validate  check files against the pipette-bw/1, /2 and /3 schemas (exit 2\n"
"          on the first error in each, naming the file, the JSON path and\n"
"          the reason); with --gpu or --nvlink-domain, each NVLink domain\n"
"          (pipette-bw/3) against that domain size\n"
"show      per-node min/median/max of outgoing, incoming and intra-node\n"
"          bandwidth and the worst links; --svg draws the node x node heatmap\n"
"          (viridis, GB/s; beyond 256 nodes each cell is the median of a\n"
"          block of node pairs) with lines between switches (the cache's\n"
"          groups, or runs of --switch-size nodes) and NVLink domains\n"
"          (the cache's, else --nvlink-domain GPUs or the --gpu type's domain)\n"
"import    convert Pipette's {\"gpus\",\"bandwidth\"} JSON or nccl-tests text\n"
"          output; an nccl-tests file holds one node pair, named by its\n"
"          '#  Rank N ... on HOST device D' lines or by --pair A,B (one file);\n"
"          --bytes picks the row (default: the largest message); --when sets\n"
"          the measurement time (default: each input file's mtime)\n"
"merge     fold B, C... into A, link by link: newer figures win, figures a\n"
"          later file did not measure keep their values and timestamps\n"
"generate  a synthetic, seeded, deterministic cache (etc/examples)\n"
"convert   to pipette-bw/2: figures per group of nodes (--group, or runs of\n"
"          --switch-size nodes in the file's order), node pairs that differ\n"
"          from their group's figure by more than --tolerance (relative,\n"
"          default 0: any difference) keep their own; to pipette-bw/1: every\n"
"          node pair's figure written out; to pipette-bw/3: the NVLink\n"
"          domains --domain gives (replacing the file's; --domain-gpus: each\n"
"          one's stated size), groups kept or restated\n"
"TIME is UTC, YYYY-MM-DDTHH:MM:SSZ.  Writes are atomic.\n");
}

static int is_opt(const char *a, const char *name)
{
	return !strcmp(a, name);
}

/* The value of the option at argv[*i], or NULL when there is none (the
 * end, or the next argument is an option: "--nodes --worst 3"). */
static const char *need(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2))
		return NULL;
	return argv[++*i];
}

/* An option given twice is an error (which value was meant?); -o and
 * --output are one option.  Arguments that are no option pass. */
static int once(struct cli_seen *seen, const char *arg)
{
	if (arg[0] != '-' || !arg[1])
		return 0;
	return cli_once(seen, is_opt(arg, "-o") ? "--output" : arg);
}

static int parse_when(const char *opt, const char *v, time_t *out)
{
	if (!v)
		return cli_error("%s needs a value", opt);
	if (pipette_bw_parse_time(v, out) < 0)
		return cli_error("%s: '%.40s' is not a UTC time like "
				 "2025-01-02T03:04:05Z", opt, v);
	return 0;
}

static const char *opt_num(double v, const char *unit, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%g %s", v, unit);
	return buf;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* min / median / max of v[0..n) (sorted in place); "-" when n == 0. */
static const char *stats(double *v, int n, char *buf, size_t size)
{
	double med;

	if (n == 0) {
		snprintf(buf, size, "%23s", "-");
		return buf;
	}
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	snprintf(buf, size, "%7.1f %7.1f %7.1f", v[0], med, v[n - 1]);
	return buf;
}

static void warn_stale(const struct pipette_bwcache *bw, const char *file,
		       const char *const *nodes, int n, time_t now, double days)
{
	char msg[PIPETTE_ERR_MAX];

	if (pipette_bwcache_stale(bw, nodes, n, now, days * 86400.0, msg,
				  sizeof(msg)) > 0)
		fprintf(stderr, "pipette: warning: %s: %s\n", file, msg);
}

/* Common --stale-days / --now handling. */
struct stale_opt {
	double days;
	time_t now;
};

static int stale_arg(int argc, char **argv, int *i, struct stale_opt *s, int *rc)
{
	if (is_opt(argv[*i], "--stale-days")) {
		*rc = cli_double("--stale-days", need(argc, argv, i), 0, PIPETTE_MAX_AGE_DAYS,
				 &s->days);
		return 1;
	}
	if (is_opt(argv[*i], "--now")) {
		*rc = parse_when("--now", need(argc, argv, i), &s->now);
		return 1;
	}
	return 0;
}

/* ---------------------------------------------------------------- */

/* validate's check of the NVLink domains against --gpu's and
 * --nvlink-domain's sizes: the GPUs per node and the domain's GPUs (0:
 * not given). */
struct domain_opt {
	long gpus_per_node, domain;
	int given;
};

static int validate_arg(int argc, char **argv, int *ip, struct domain_opt *d, int *r)
{
	int i = *ip;

	if (is_opt(argv[i], "--gpu")) {
		struct pipette_err err;
		const struct pipette_gpu_spec *spec =
			pipette_gpu_lookup(need(argc, argv, &i), &err);

		if (!spec) {
			*r = cli_error("--gpu: %s", err.msg);
		} else {
			d->gpus_per_node = spec->gpus_per_node;
			if (!d->domain)
				d->domain = spec->nvlink_domain_gpus > spec->gpus_per_node
					    ? spec->nvlink_domain_gpus : spec->gpus_per_node;
		}
	} else if (is_opt(argv[i], "--nvlink-domain")) {
		*r = cli_int("--nvlink-domain", need(argc, argv, &i), 1, PIPETTE_MAX_PIN,
			     &d->domain);
		d->given = 1;
	} else {
		return 0;
	}
	*ip = i;
	return 1;
}

/* One file: its summary line, or its first error. */
static int validate_one(const char *path, const struct domain_opt *d,
			const struct stale_opt *so)
{
	struct pipette_bwcache *bw;
	struct pipette_err err;
	int n, a, intra = 0, nd;
	long meas, dmeas = 0;

	/* no plan is pinned to it: its SHA-256 is not needed */
	if (pipette_bwcache_load_unhashed(path, &bw, &err) < 0) {
		cli_error("%s", err.msg);
		return PIPETTE_EXIT_USAGE;
	}
	if ((d->domain || d->gpus_per_node) &&
	    pipette_bwcache_check_domains(bw, (int)d->gpus_per_node, (int)d->domain,
					  &err) < 0) {
		cli_error("%s: %s%s", path, err.msg, d->given ? " (--nvlink-domain)" : " (--gpu)");
		pipette_bwcache_destroy(bw);
		return PIPETTE_EXIT_USAGE;
	}
	n = pipette_bwcache_node_count(bw);
	for (a = 0; a < n; a++)
		if (pipette_bwcache_node_gpus(bw, a))
			intra++;
	nd = pipette_bwcache_domain_count(bw);
	if ((meas = pipette_bwcache_measured(bw)) < 0 ||
	    (nd && (dmeas = pipette_bwcache_domain_measured(bw)) < 0)) {
		pipette_bwcache_destroy(bw);
		return cli_error("%s: out of memory", path);
	}
	printf("%s: ok: %s, %d nodes", path, pipette_bwcache_schema(bw), n);
	if (pipette_bwcache_group_count(bw))
		printf(" in %d groups", pipette_bwcache_group_count(bw));
	if (nd)
		printf(", %d NVLink domains", nd);
	printf(", %ld of %ld inter-node figures measured", meas, (long)n * (n - 1));
	if (nd)
		printf(" (%ld inside domains)", dmeas);
	printf(", %d nodes with intra-node matrices\n", intra);
	warn_stale(bw, path, NULL, 0, so->now, so->days);
	pipette_bwcache_destroy(bw);
	return PIPETTE_EXIT_OK;
}

static int do_validate(int argc, char **argv)
{
	struct stale_opt so = { BW_STALE_DAYS, time(NULL) };
	struct domain_opt dom = { 0, 0, 0 };
	struct cli_seen seen = { .n = 0 };
	int i, rc = PIPETTE_EXIT_OK, files = 0;

	for (i = 1; i < argc; i++) {
		int r = 0;

		if (once(&seen, argv[i]))
			return PIPETTE_EXIT_USAGE;
		if (stale_arg(argc, argv, &i, &so, &r) || validate_arg(argc, argv, &i, &dom, &r)) {
			if (r)
				return r;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return cli_error("bandwidth validate: unknown option %.64s", argv[i]);
		}
	}
	for (i = 1; i < argc; i++) {
		int r;

		if (is_opt(argv[i], "--stale-days") || is_opt(argv[i], "--now") ||
		    is_opt(argv[i], "--gpu") || is_opt(argv[i], "--nvlink-domain")) {
			i++;
			continue;
		}
		files++;
		if ((r = validate_one(argv[i], &dom, &so)) == PIPETTE_EXIT_USAGE)
			rc = r;
		else if (r)
			return r;
	}
	if (!files)
		return cli_error("bandwidth validate: no file given");
	return rc;
}

/* ---------------------------------------------------------------- */

struct link_row {
	int a, b;
	double gbps;
};

static int cmp_link(const void *pa, const void *pb)
{
	const struct link_row *x = pa, *y = pb;

	if (x->gbps != y->gbps)
		return x->gbps < y->gbps ? -1 : 1;
	if (x->a != y->a)
		return x->a < y->a ? -1 : 1;
	return (x->b > y->b) - (x->b < y->b);
}

/* ---- the heatmap (show --svg) ------------------------------------- */

#define HEAT_MAX_CELLS 256	/* cells per side: beyond, nodes share a cell */
#define HEAT_SIDE 768.0		/* px: the matrix's side at most */
#define HEAT_MIN_GAP 6.0	/* px: boundaries closer than this are left out */
#define HEAT_LOG_SPAN 8.0	/* greatest / least figure beyond which the scale is log */

struct heat {
	const struct pipette_bwcache *bw;
	const int *idx;		/* the nodes shown, cache indices */
	int n, block, cells;	/* nodes per cell (a side), cells per side */
	double cell, side;	/* px */
	double x0, y0;		/* the matrix's top-left corner */
	/* The colour scale, GB/s: linear over round ticks, or logarithmic
	 * (1-2-5 ticks) when the figures span more than HEAT_LOG_SPAN, as
	 * NVLink inside a domain and the network between nodes do. */
	int log;
	double tick[32];
	int nticks;
	long switch_size;	/* --switch-size; 0: the cache's groups */
	int domain_nodes;	/* nodes per NVLink domain; <= 1: none */
	int cache_domains;	/* 1: the cache's own domains (pipette-bw/3) */
	double *v;		/* scratch: block x block figures */
	struct heat_stat {	/* per cell: its figures' median, least, greatest */
		double med, lo, hi;
		int k;		/* how many (0: none measured) */
	} *stat;		/* cells x cells */
};

/* Cell (I, J): the median, least and greatest measured figure of its
 * node pairs (off the diagonal); returns how many there are. */
static int heat_cell(const struct heat *h, int I, int J, double *med, double *lo, double *hi)
{
	int i, j, k = 0, i1 = (I + 1) * h->block, j1 = (J + 1) * h->block;

	for (i = I * h->block; i < i1 && i < h->n; i++)
		for (j = J * h->block; j < j1 && j < h->n; j++) {
			struct pipette_bw_figure f;

			if (i != j && pipette_bwcache_inter(h->bw, h->idx[i], h->idx[j], &f) == 1)
				h->v[k++] = f.gbps;
		}
	if (!k)
		return 0;
	qsort(h->v, (size_t)k, sizeof(double), cmp_double);
	*lo = h->v[0];
	*hi = h->v[k - 1];
	*med = k % 2 ? h->v[k / 2] : (h->v[k / 2 - 1] + h->v[k / 2]) / 2;
	return k;
}

static void heat_tooltip(FILE *f, const struct heat *h, int I, int J, int k, double med,
			 double lo, double hi)
{
	const struct pipette_bwcache *bw = h->bw;
	int a1 = (I + 1) * h->block - 1, b1 = (J + 1) * h->block - 1;

	if (h->block == 1) {
		fprintf(f, "<title>%s -&gt; %s: %.2f GB/s</title>",
			pipette_bwcache_node_name(bw, h->idx[I]),
			pipette_bwcache_node_name(bw, h->idx[J]), med);
		return;
	}
	fprintf(f, "<title>%s..%s -&gt; %s..%s: median %.2f GB/s (least %.2f, greatest %.2f; "
		"%d pairs)</title>", pipette_bwcache_node_name(bw, h->idx[I * h->block]),
		pipette_bwcache_node_name(bw, h->idx[a1 < h->n ? a1 : h->n - 1]),
		pipette_bwcache_node_name(bw, h->idx[J * h->block]),
		pipette_bwcache_node_name(bw, h->idx[b1 < h->n ? b1 : h->n - 1]), med, lo, hi, k);
}

/* The cells, coloured by their median on the viridis scale; grey where
 * nothing is measured, white on the diagonal of single nodes. */
/* A figure's place on the colour scale, 0 to 1. */
static double heat_t(const struct heat *h, double gbps)
{
	double a = h->tick[0], b = h->tick[h->nticks - 1];

	if (h->log)
		return log(gbps / a) / log(b / a);
	return (gbps - a) / (b - a);
}

/* Every cell's figures, and the range of what the cells show (their
 * medians: the colour scale spans what is drawn). */
static void heat_measure(struct heat *h, double *lo, double *hi)
{
	int I, J;

	*lo = NAN;
	*hi = NAN;
	for (I = 0; I < h->cells; I++)
		for (J = 0; J < h->cells; J++) {
			struct heat_stat *c = &h->stat[(size_t)I * h->cells + J];

			c->k = heat_cell(h, I, J, &c->med, &c->lo, &c->hi);
			if (c->k && !(c->med >= *lo))
				*lo = c->med;
			if (c->k && !(c->med <= *hi))
				*hi = c->med;
		}
}

static void heat_matrix(FILE *f, const struct heat *h)
{
	int I, J;

	/* whole pixels and crisp edges: no seams between neighbouring cells */
	fputs("<g shape-rendering=\"crispEdges\">\n", f);
	for (I = 0; I < h->cells; I++)
		for (J = 0; J < h->cells; J++) {
			const struct heat_stat *c = &h->stat[(size_t)I * h->cells + J];
			char col[8];

			fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
				"fill=\"%s\"", h->x0 + J * h->cell, h->y0 + I * h->cell, h->cell,
				h->cell, c->k ? svg_viridis(heat_t(h, c->med), col) :
				h->block == 1 && I == J ? "#ffffff" : "#bdbdbd");
			if (!c->k) {
				fputs("/>\n", f);
				continue;
			}
			fputc('>', f);
			heat_tooltip(f, h, I, J, c->k, c->med, c->lo, c->hi);
			fputs("</rect>\n", f);
		}
	fputs("</g>\n", f);
	fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
		"stroke=\"#000000\" stroke-width=\"0.8\"/>\n", h->x0, h->y0, h->side, h->side);
}

/* The switch (or group) of the node shown at position k: --switch-size
 * runs in the order shown, else the cache's groups (-1: none). */
static int heat_switch(const struct heat *h, int k)
{
	if (h->switch_size > 0)
		return (int)(k / h->switch_size);
	return pipette_bwcache_node_group(h->bw, h->idx[k]);
}

/* Lines across the matrix between switches; none when they would crowd
 * closer than HEAT_MIN_GAP.  Returns 1 when drawn, 0 when there are no
 * switches, -1 when left out. */
static int heat_switches(FILE *f, const struct heat *h)
{
	int k, count = 0;

	for (k = 1; k < h->n; k++)
		count += heat_switch(h, k) != heat_switch(h, k - 1);
	if (!count)
		return 0;
	if (h->side / (count + 1) < HEAT_MIN_GAP)
		return -1;
	fputs("<g stroke=\"#000000\" stroke-width=\"0.8\">\n", f);
	for (k = 1; k < h->n; k++) {
		double at = (double)k / h->block * h->cell;

		if (heat_switch(h, k) != heat_switch(h, k - 1))
			fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>"
				"<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n",
				h->x0 + at, h->y0, h->x0 + at, h->y0 + h->side,
				h->x0, h->y0 + at, h->x0 + h->side, h->y0 + at);
	}
	fputs("</g>\n", f);
	return 1;
}

/* The cache's NVLink domain of the node shown at k (-1: none). */
static int heat_domain_of(const struct heat *h, int k)
{
	return pipette_bwcache_node_domain(h->bw, h->idx[k]);
}

/* The end of the run of nodes of one domain that starts at k. */
static int heat_run_end(const struct heat *h, int k)
{
	int d = heat_domain_of(h, k), e = k + 1;

	while (e < h->n && heat_domain_of(h, e) == d)
		e++;
	return e;
}

/* The cache's domains: each run of nodes of one domain in the order shown
 * (a domain need not be contiguous: --nodes orders them as given) as a
 * dashed rectangle wherever two runs of one domain meet, the diagonal
 * included; runs smaller than HEAT_MIN_GAP are left out.  The same
 * returns as heat_domains. */
static int heat_cache_domains(FILE *f, const struct heat *h)
{
	double per = h->cell / h->block;	/* px per node */
	int a, b, ea, eb, drawn = 0, runs = 0;

	for (a = 0; a < h->n; a = heat_run_end(h, a))
		runs += heat_domain_of(h, a) >= 0;
	if (!runs)
		return 0;
	fputs("<g stroke=\"#e7298a\" stroke-width=\"1.2\" stroke-dasharray=\"4 3\" "
	      "fill=\"none\">\n", f);
	for (a = 0; a < h->n; a = ea) {
		ea = heat_run_end(h, a);
		if (heat_domain_of(h, a) < 0 || (ea - a) * per < HEAT_MIN_GAP)
			continue;
		for (b = 0; b < h->n; b = eb) {
			eb = heat_run_end(h, b);
			/* off the diagonal only while the runs stay few */
			if (heat_domain_of(h, b) != heat_domain_of(h, a) ||
			    (eb - b) * per < HEAT_MIN_GAP || (a != b && runs > HEAT_MAX_CELLS))
				continue;
			fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>\n",
				h->x0 + b * per, h->y0 + a * per, (eb - b) * per, (ea - a) * per);
			drawn = 1;
		}
	}
	fputs("</g>\n", f);
	return drawn ? 1 : -1;
}

/* Each NVLink domain (the cache's, else runs of domain_nodes nodes in the
 * order shown) as a dashed square on the diagonal, where its nodes meet;
 * the same returns. */
static int heat_domains(FILE *f, const struct heat *h)
{
	double per = h->cell / h->block;	/* px per node */
	int k;

	if (h->cache_domains)
		return heat_cache_domains(f, h);
	if (h->domain_nodes <= 1 || h->domain_nodes >= h->n)
		return 0;
	if (h->domain_nodes * per < HEAT_MIN_GAP)
		return -1;
	fputs("<g stroke=\"#e7298a\" stroke-width=\"1.2\" stroke-dasharray=\"4 3\" "
	      "fill=\"none\">\n", f);
	for (k = 0; k < h->n; k += h->domain_nodes) {
		int e = k + h->domain_nodes < h->n ? k + h->domain_nodes : h->n;

		fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>\n",
			h->x0 + k * per, h->y0 + k * per, (e - k) * per, (e - k) * per);
	}
	fputs("</g>\n", f);
	return 1;
}

/* One label on both axes at node position `at` (fractional, centred). */
static void heat_label(FILE *f, const struct heat *h, double at, const char *text)
{
	double p = at / h->block * h->cell;

	fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">", h->x0 - 4, h->y0 + p + 3);
	svg_escaped(f, text);
	fprintf(f, "</text><text transform=\"translate(%.2f,%.2f) rotate(-90)\">",
		h->x0 + p + 3, h->y0 - 4);
	svg_escaped(f, text);
	fputs("</text>\n", f);
}

/* The switches' names at their middles, every one while they are 24 px
 * apart, else every k-th. */
static void heat_switch_labels(FILE *f, const struct heat *h, int runs)
{
	int every = (int)ceil(24 / (h->side / runs)), start = 0, k;

	for (runs = 0, k = 1; k <= h->n; k++) {
		int g = heat_switch(h, start);
		char name[64];

		if (k < h->n && heat_switch(h, k) == g)
			continue;
		if (h->switch_size > 0 || !pipette_bwcache_group_name(h->bw, g))
			snprintf(name, sizeof(name), "switch %d", g);
		else
			snprintf(name, sizeof(name), "%.60s", pipette_bwcache_group_name(h->bw, g));
		if (runs++ % every == 0)
			heat_label(f, h, (start + k) / 2.0, name);
		start = k;
	}
}

/* Axis labels: every node while they fit (12 px apart), else the
 * switches while they are 6 px apart, else every k-th node. */
static void heat_labels(FILE *f, const struct heat *h)
{
	double per = h->cell / h->block;	/* px per node */
	int k, runs = 1, every = per >= 12 ? 1 : (int)ceil(40 / per);

	for (k = 1; k < h->n && every > 1; k++)
		runs += heat_switch(h, k) != heat_switch(h, k - 1);
	if (every > 1 && heat_switch(h, 0) >= 0 && runs > 1 && h->side / runs >= 6) {
		heat_switch_labels(f, h, runs);
		return;
	}
	for (k = 0; k < h->n; k += every)
		heat_label(f, h, k + 0.5, pipette_bwcache_node_name(h->bw, h->idx[k]));
}

/* The colour bar in GB/s at round values, and what grey and the lines mean. */
static void heat_colourbar(FILE *f, const struct heat *h, int sw, int dom)
{
	double x = h->x0 + h->side + 24, y = h->y0, ht = fmax(h->side, 200), ly;
	int k;

	fputs("<defs><linearGradient id=\"viridis\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n", f);
	svg_viridis_stops(f);
	fputs("</linearGradient></defs>\n", f);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">GB/s%s</text>\n"
		"<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"%.1f\" fill=\"url(#viridis)\" "
		"stroke=\"#000000\" stroke-width=\"0.5\"/>\n", x, y - 8,
		h->log ? " (log scale)" : "", x, y, ht);
	for (k = 0; k < h->nticks; k++) {
		double yy = y + ht - heat_t(h, h->tick[k]) * ht;

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#000000\"/>"
			"<text x=\"%.1f\" y=\"%.2f\">%g</text>\n", x + 18, yy, x + 23, yy, x + 26,
			yy + 3.5, h->tick[k]);
	}
	ly = y + ht + 24;
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"12\" fill=\"#bdbdbd\"/>"
		"<text x=\"%.1f\" y=\"%.1f\">unmeasured</text>\n", x, ly, x + 24, ly + 10);
	if (sw) {
		ly += 18;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\" "
			"stroke-width=\"0.8\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x, ly + 6,
			x + 18, ly + 6, x + 24, ly + 10,
			sw > 0 ? "switch boundary" : "switches: too many to draw");
	}
	if (dom) {
		ly += 18;
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"12\" fill=\"none\" "
			"stroke=\"#e7298a\" stroke-width=\"1.2\" stroke-dasharray=\"4 3\"/>"
			"<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x, ly, x + 24, ly + 10,
			dom > 0 ? "NVLink domain" : "NVLink domains: too small to draw");
	}
}

static void heat_scale(struct heat *h, double lo, double hi)
{
	struct svg_ticks t;
	int k;

	h->log = lo > 0 && hi / lo > HEAT_LOG_SPAN;
	if (h->log) {
		h->nticks = svg_log_ticks(lo, hi, h->tick, 32);
		return;
	}
	svg_nice_ticks(isnan(lo) ? 0 : lo, isnan(hi) ? 1 : hi, 6, &t);
	for (k = 0; k < 32 && t.first + k * t.step <= t.last + t.step / 2; k++)
		h->tick[k] = t.first + k * t.step;
	h->nticks = k;
}

static void heat_head(FILE *f, const struct heat *h, const char *file, double w, double ht)
{
	const char *base = strrchr(file, '/');

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/"
		"2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"font-family=\"sans-serif\" font-size=\"10\">\n<rect width=\"100%%\" height=\"100%%\" "
		"fill=\"#ffffff\"/>\n<text x=\"10\" y=\"20\" font-size=\"15\">Inter-node bandwidth, "
		"%d nodes (", w, ht, w, ht, h->n);
	svg_escaped(f, base ? base + 1 : file);
	fputs(")</text>\n<text x=\"10\" y=\"37\" font-size=\"11\" fill=\"#444444\">row sends to "
	      "column; ", f);
	if (h->block == 1)
		fputs("one cell per node pair", f);
	else
		fprintf(f, "each cell the median of %d x %d node pairs (its tooltip: least and "
			"greatest)", h->block, h->block);
	fputs("</text>\n", f);
}

/* Node x node heatmap (row = sender, column = receiver) on the viridis
 * scale, with a colour bar, switch and NVLink-domain boundaries. */
static int write_svg(const char *path, const char *file, struct heat *h)
{
	double margin = 16, w, ht, lo, hi;
	FILE *f;
	int k, sw, dom, rc = 0;

	for (k = 0; k < h->n && h->n <= 4 * HEAT_MAX_CELLS; k++)
		margin = fmax(margin, 10 + 6.0 * (double)strlen(pipette_bwcache_node_name(h->bw,
										    h->idx[k])));
	margin = fmin(fmax(margin, 60), 160);
	h->block = (h->n + HEAT_MAX_CELLS - 1) / HEAT_MAX_CELLS;
	h->cells = (h->n + h->block - 1) / h->block;
	h->cell = fmin(28, floor(HEAT_SIDE / h->cells));
	h->side = h->cell * h->cells;
	h->x0 = margin + 10;
	h->y0 = 50 + margin;
	h->v = malloc(sizeof(double) * (size_t)h->block * (size_t)h->block);
	h->stat = malloc(sizeof(*h->stat) * (size_t)h->cells * (size_t)h->cells);
	f = h->v && h->stat ? fopen(path, "w") : NULL;
	if (!f) {
		free(h->v);
		free(h->stat);
		return h->v && h->stat ? cli_error("%s: cannot write: %m", path) :
					 cli_error("out of memory");
	}
	heat_measure(h, &lo, &hi);
	heat_scale(h, lo, hi);
	w = h->x0 + h->side + 250;
	ht = h->y0 + fmax(h->side, 200) + 90;
	heat_head(f, h, file, w, ht);
	heat_matrix(f, h);
	sw = heat_switches(f, h);
	dom = heat_domains(f, h);
	heat_labels(f, h);
	heat_colourbar(f, h, sw, dom);
	fputs("</svg>\n", f);
	free(h->v);
	free(h->stat);
	if (ferror(f))
		rc = cli_error("%s: write error", path);
	if (fclose(f) != 0 && !rc)
		rc = cli_error("%s: write error", path);
	return rc;
}

struct show_opts {
	struct stale_opt so;
	const char *file, *nodes_spec, *svg, *gpu;
	long worst, switch_size, nvlink_domain;
};

static int show_parse(int argc, char **argv, struct show_opts *o)
{
	struct cli_seen seen = { .n = 0 };
	int i;

	o->so.days = BW_STALE_DAYS;
	o->so.now = time(NULL);
	o->file = o->nodes_spec = o->svg = o->gpu = NULL;
	o->worst = 10;
	o->switch_size = o->nvlink_domain = 0;
	for (i = 1; i < argc; i++) {
		int r = 0;

		if (once(&seen, argv[i]))
			return PIPETTE_EXIT_USAGE;
		if (stale_arg(argc, argv, &i, &o->so, &r)) {
			if (r)
				return r;
		} else if (is_opt(argv[i], "--nodes")) {
			if (!(o->nodes_spec = need(argc, argv, &i)))
				return cli_error("--nodes needs a node list");
		} else if (is_opt(argv[i], "--svg")) {
			if (!(o->svg = need(argc, argv, &i)))
				return cli_error("--svg needs a file name");
		} else if (is_opt(argv[i], "--worst")) {
			if ((r = cli_int("--worst", need(argc, argv, &i), 0, 1000000, &o->worst)))
				return r;
		} else if (is_opt(argv[i], "--switch-size")) {
			if ((r = cli_int("--switch-size", need(argc, argv, &i), 1, PIPETTE_MAX_NODES,
					 &o->switch_size)))
				return r;
		} else if (is_opt(argv[i], "--nvlink-domain")) {
			if ((r = cli_int("--nvlink-domain", need(argc, argv, &i), 1, PIPETTE_MAX_PIN,
					 &o->nvlink_domain)))
				return r;
		} else if (is_opt(argv[i], "--gpu")) {
			if (!(o->gpu = need(argc, argv, &i)))
				return cli_error("--gpu needs a GPU type");
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return cli_error("bandwidth show: unknown option %.64s", argv[i]);
		} else if (o->file) {
			return cli_error("bandwidth show: one file at a time ('%.64s' "
					 "and '%.64s')", o->file, argv[i]);
		} else {
			o->file = argv[i];
		}
	}
	if (!o->file)
		return cli_error("bandwidth show: no file given");
	if (!o->svg && (o->switch_size || o->nvlink_domain || o->gpu))
		return cli_error("bandwidth show: --switch-size, --nvlink-domain and --gpu draw "
				 "boundaries in the heatmap: they go with --svg");
	return 0;
}

/* Nodes per NVLink domain for the heatmap: --nvlink-domain GPUs (else the
 * --gpu type's domain) over the GPUs per node (the first node's intra
 * matrix, else the type's board); 0 when neither option is given. */
static int show_domain(const struct pipette_bwcache *bw, const struct show_opts *o,
		       const int *idx, int n, int *nodes)
{
	const struct pipette_gpu_spec *spec = NULL;
	struct pipette_err err;
	long domain = o->nvlink_domain;
	int g = n ? pipette_bwcache_node_gpus(bw, idx[0]) : 0;

	*nodes = 0;
	if (o->gpu && !(spec = pipette_gpu_lookup(o->gpu, &err)))
		return cli_error("--gpu: %s", err.msg);
	if (!g && spec)
		g = spec->gpus_per_node;
	if (!domain && spec)
		domain = spec->nvlink_domain_gpus;
	if (!domain)
		return 0;
	if (!g)
		return cli_error("--nvlink-domain %ld: the cache has no intra-node matrix to tell "
				 "the GPUs per node; name the type with --gpu", domain);
	if (domain % g)
		return cli_error("--nvlink-domain %ld: not a whole number of nodes of %d GPUs",
				 domain, g);
	*nodes = (int)(domain / g);
	return 0;
}

/* The nodes shown, as cache indices: --nodes in its order (names[] keeps
 * the expanded list), else every node of the cache. */
static int show_select(const struct pipette_bwcache *bw, const struct show_opts *o,
		       char ***names, int *n_names, int **idx, int *n)
{
	struct pipette_err err;
	int i;

	if (o->nodes_spec) {
		if (cli_expand_nodes(o->nodes_spec, names, n_names, &err) < 0)
			return cli_error("--nodes: %s", err.msg);
		if (!(*idx = malloc((size_t)*n_names * sizeof(int))))
			return cli_error("out of memory");
		for (i = 0; i < *n_names; i++) {
			(*idx)[i] = pipette_bwcache_node_index(bw, (*names)[i]);
			if ((*idx)[i] < 0)
				return cli_error("%s: node '%s' (from --nodes) is not in the "
						 "cache", o->file, (*names)[i]);
		}
		*n = *n_names;
		return 0;
	}
	*n = pipette_bwcache_node_count(bw);
	if (!(*idx = malloc(((size_t)*n + 1) * sizeof(int))))
		return cli_error("out of memory");
	for (i = 0; i < *n; i++)
		(*idx)[i] = i;
	return 0;
}

/* One line per node: min / median / max of its outgoing, incoming and
 * intra-node figures (v: scratch for n + G*G values). */
static void show_node_lines(const struct pipette_bwcache *bw, const int *idx, int n,
			    double *v)
{
	char s1[40], s2[40], s3[40];
	int i, j, a, b;

	printf("%-20s %23s  %23s  %23s\n", "node", "out GB/s min/med/max",
	       "in GB/s min/med/max", "intra GB/s min/med/max");
	for (i = 0; i < n; i++) {
		int k = 0, ng = pipette_bwcache_node_gpus(bw, idx[i]);
		struct pipette_bw_figure f;

		for (j = 0; j < n; j++)
			if (j != i && pipette_bwcache_inter(bw, idx[i], idx[j], &f) == 1)
				v[k++] = f.gbps;
		stats(v, k, s1, sizeof(s1));
		k = 0;
		for (j = 0; j < n; j++)
			if (j != i && pipette_bwcache_inter(bw, idx[j], idx[i], &f) == 1)
				v[k++] = f.gbps;
		stats(v, k, s2, sizeof(s2));
		k = 0;
		for (a = 0; a < ng; a++)
			for (b = 0; b < ng; b++)
				if (a != b && pipette_bwcache_intra(bw, idx[i], a, b, &f) == 1)
					v[k++] = f.gbps;
		stats(v, k, s3, sizeof(s3));
		printf("%-20s %s  %s  %s\n", pipette_bwcache_node_name(bw, idx[i]),
		       s1, s2, s3);
	}
}

/* The `worst` slowest links (links[] sorted here), against the median. */
static void show_worst(const struct pipette_bwcache *bw, struct link_row *links,
		       int n_links, long worst, double med_all)
{
	char when[32];
	int i;

	qsort(links, (size_t)n_links, sizeof(*links), cmp_link);
	printf("\nworst inter-node links (median %.2f GB/s):\n", med_all);
	for (i = 0; i < n_links && i < worst; i++) {
		struct pipette_bw_figure f;

		pipette_bwcache_inter(bw, links[i].a, links[i].b, &f);
		printf("  %-20s -> %-20s %8.2f GB/s %4.0f%%  %s %s %.0f B %s\n",
		       pipette_bwcache_node_name(bw, links[i].a),
		       pipette_bwcache_node_name(bw, links[i].b), f.gbps,
		       100.0 * f.gbps / med_all, f.prov.tool ? f.prov.tool : "?",
		       f.prov.metric ? f.prov.metric : "?", f.prov.bytes,
		       pipette_bw_format_time(f.prov.when, when, sizeof(when)));
	}
}

static int do_show(int argc, char **argv)
{
	struct show_opts o;
	struct pipette_bwcache *bw = NULL;
	struct pipette_bw_defaults def;
	struct pipette_err err;
	struct link_row *links = NULL;
	double *v = NULL, *all = NULL, med_all = NAN;
	char **names = NULL, when[32], s1[40], s2[40], s3[40];
	int *idx = NULL, n = 0, n_names = 0, n_links = 0, n_all = 0;
	int i, j, rc = PIPETTE_EXIT_USAGE;

	if ((rc = show_parse(argc, argv, &o)))
		return rc;
	rc = PIPETTE_EXIT_USAGE;
	if (pipette_bwcache_load(o.file, &bw, &err) < 0)
		return cli_error("%s", err.msg);
	if (show_select(bw, &o, &names, &n_names, &idx, &n))
		goto out;
	v = malloc(((size_t)n * PIPETTE_MAX_GPUS + PIPETTE_MAX_GPUS *
		    PIPETTE_MAX_GPUS + 1) * sizeof(double));
	links = malloc(((size_t)n * (size_t)n + 1) * sizeof(*links));
	all = malloc(((size_t)n * (size_t)n + 1) * sizeof(double));
	if (!v || !links || !all) {
		cli_error("out of memory");
		goto out;
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			struct pipette_bw_figure f;

			if (i != j && pipette_bwcache_inter(bw, idx[i], idx[j], &f) == 1) {
				links[n_links].a = idx[i];
				links[n_links].b = idx[j];
				links[n_links].gbps = f.gbps;
				n_links++;
				all[n_all++] = f.gbps;
			}
		}
	if (n_all) {
		stats(all, n_all, s1, sizeof(s1));
		med_all = n_all % 2 ? all[n_all / 2] :
			(all[n_all / 2 - 1] + all[n_all / 2]) / 2;
	}
	pipette_bwcache_get_defaults(bw, &def);
	printf("%s: %s, generated %s, %d of %d nodes shown, %d of %d inter-node "
	       "figures measured\n", o.file, PIPETTE_BW_SCHEMA,
	       pipette_bw_format_time(pipette_bwcache_generated(bw), when,
				      sizeof(when)),
	       n, pipette_bwcache_node_count(bw), n_links, n * (n - 1));
	printf("defaults: inter %s, intra %s, latency inter %s / intra %s",
	       opt_num(def.inter_gbps, "GB/s", s1, sizeof(s1)),
	       opt_num(def.intra_gbps, "GB/s", s2, sizeof(s2)),
	       opt_num(def.inter_lat_us, "us", s3, sizeof(s3)),
	       opt_num(def.intra_lat_us, "us", when, sizeof(when)));
	printf("\n(unmeasured figures fall back to these, then to the GPU's "
	       "nominal figures)\n\n");
	show_node_lines(bw, idx, n, v);
	if (n_links && o.worst > 0)
		show_worst(bw, links, n_links, o.worst, med_all);
	warn_stale(bw, o.file, (const char *const *)names, n_names, o.so.now, o.so.days);
	if (o.svg) {
		struct heat h = { .bw = bw, .idx = idx, .n = n, .switch_size = o.switch_size,
				  .cache_domains = pipette_bwcache_domain_count(bw) > 0 };

		if (show_domain(bw, &o, idx, n, &h.domain_nodes) ||
		    write_svg(o.svg, o.file, &h))
			goto out;
	}
	rc = PIPETTE_EXIT_OK;
out:
	free(v);
	free(all);
	free(links);
	free(idx);
	pipette_hostlist_free(names, n_names);
	pipette_bwcache_destroy(bw);
	return rc;
}

/* ---------------------------------------------------------------- */

static int save(const struct pipette_bwcache *bw, const char *out)
{
	struct pipette_err err;

	if (pipette_bwcache_save(bw, out, &err) < 0)
		return cli_error("%s", err.msg);
	return 0;
}

/* --pair A,B into pa and pb (PIPETTE_BW_MAX_NAME + 1 bytes each). */
static int split_pair(const char *pair, const char *from, int n_in, char *pa, char *pb)
{
	const char *comma = strchr(pair, ',');

	if (strcmp(from, "nccl-tests"))
		return cli_error("bandwidth import: --pair applies to nccl-tests only");
	if (n_in != 1)
		return cli_error("bandwidth import: --pair names the nodes of one file; with "
				 "several, each file's '#  Rank' lines name its pair");
	if (!comma || comma == pair || !comma[1] || strchr(comma + 1, ',') ||
	    (size_t)(comma - pair) > PIPETTE_BW_MAX_NAME ||
	    strlen(comma + 1) > PIPETTE_BW_MAX_NAME)
		return cli_error("--pair: expected two node names A,B, got '%.64s'", pair);
	memcpy(pa, pair, (size_t)(comma - pair));
	pa[comma - pair] = '\0';
	strcpy(pb, comma + 1);
	return 0;
}

static int do_import(int argc, char **argv)
{
	const char *from = NULL, *out = NULL, *pair = NULL, *tool = NULL;
	const char **in = NULL;
	struct pipette_bwcache *bw = NULL;
	struct pipette_err err;
	char pa[PIPETTE_BW_MAX_NAME + 1], pb[PIPETTE_BW_MAX_NAME + 1];
	double bytes = 0;
	/* Pipette's intra-node test runs on 8 GPUs: "-g 8" in run_nccl_test.sh:28
	 * (date2024_pipette @a2b0683, under strategy/nccl-test/nccl-test-a100/). */
	long gpn = 8;
	time_t when = (time_t)-1, newest = (time_t)-1;
	struct cli_seen seen = { .n = 0 };
	int i, n_in = 0, rc = PIPETTE_EXIT_USAGE;

	in = calloc((size_t)argc, sizeof(char *));
	if (!in)
		return cli_error("out of memory");
	for (i = 1; i < argc; i++) {
		int r = once(&seen, argv[i]);

		if (r) {
			goto out;
		} else if (is_opt(argv[i], "--from")) {
			from = need(argc, argv, &i);
		} else if (is_opt(argv[i], "-o") || is_opt(argv[i], "--output")) {
			out = need(argc, argv, &i);
		} else if (is_opt(argv[i], "--pair")) {
			pair = need(argc, argv, &i);
		} else if (is_opt(argv[i], "--tool")) {
			tool = need(argc, argv, &i);
		} else if (is_opt(argv[i], "--bytes")) {
			r = cli_double("--bytes", need(argc, argv, &i), 1,
				       PIPETTE_BW_MAX_BYTES, &bytes);
		} else if (is_opt(argv[i], "--gpus-per-node")) {
			r = cli_int("--gpus-per-node", need(argc, argv, &i), 0,
				    PIPETTE_MAX_GPUS, &gpn);
		} else if (is_opt(argv[i], "--when")) {
			r = parse_when("--when", need(argc, argv, &i), &when);
		} else if (argv[i][0] == '-' && argv[i][1]) {
			r = cli_error("bandwidth import: unknown option %.64s", argv[i]);
		} else {
			in[n_in++] = argv[i];
		}
		if (r)
			goto out;
	}
	if (!from || (strcmp(from, "pipette-legacy") && strcmp(from, "nccl-tests"))) {
		cli_error("bandwidth import: --from must be pipette-legacy or nccl-tests");
		goto out;
	}
	if (!out) {
		cli_error("bandwidth import: no output file (-o OUT)");
		goto out;
	}
	if (!n_in) {
		cli_error("bandwidth import: no input file");
		goto out;
	}
	if (pair && split_pair(pair, from, n_in, pa, pb))
		goto out;
	bw = pipette_bwcache_create();
	if (!bw) {
		cli_error("out of memory");
		goto out;
	}
	for (i = 0; i < n_in; i++) {
		time_t t = when;
		struct stat st;
		int r;

		if (t == (time_t)-1 && stat(in[i], &st) == 0)
			t = st.st_mtime;
		if (!strcmp(from, "pipette-legacy")) {
			r = pipette_bwcache_import_legacy(bw, in[i], (int)gpn, t, &err);
		} else {
			struct pipette_nccl_import o;

			o.pair_a = pair ? pa : NULL;
			o.pair_b = pair ? pb : NULL;
			o.bytes = bytes;
			o.tool = tool;
			o.when = t;
			r = pipette_bwcache_import_nccl(bw, in[i], &o, &err);
		}
		if (r < 0) {
			cli_error("%s", err.msg);
			goto out;
		}
		if (t != (time_t)-1 && (newest == (time_t)-1 || t > newest))
			newest = t;
	}
	pipette_bwcache_set_generated(bw, newest);
	if (save(bw, out))
		goto out;
	printf("%s: %d nodes from %d file%s\n", out, pipette_bwcache_node_count(bw),
	       n_in, n_in == 1 ? "" : "s");
	rc = PIPETTE_EXIT_OK;
out:
	free(in);
	pipette_bwcache_destroy(bw);
	return rc;
}

/* The output is locked before the first input is read and until it is
 * replaced: `merge OUT NEW -o OUT` run by many jobs at once loses no
 * job's figures (without the lock, each would fold its NEW into the OUT
 * it read, and the last rename would win). */
static int do_merge(int argc, char **argv)
{
	struct pipette_bwcache *dst = NULL, *src;
	struct pipette_bwcache_lock *lock = NULL;
	struct pipette_err err;
	const char *out = NULL;
	struct cli_seen seen = { .n = 0 };
	int i, n_in = 0, rc = PIPETTE_EXIT_USAGE;

	for (i = 1; i < argc; i++)
		if (once(&seen, argv[i])) {
			return PIPETTE_EXIT_USAGE;
		} else if (is_opt(argv[i], "-o") || is_opt(argv[i], "--output")) {
			if (!(out = need(argc, argv, &i)))
				return cli_error("-o needs a file name");
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return cli_error("bandwidth merge: unknown option %.64s", argv[i]);
		} else {
			n_in++;
		}
	if (!out)
		return cli_error("bandwidth merge: no output file (-o OUT)");
	if (n_in < 1)
		return cli_error("bandwidth merge: no input files");
	if (pipette_bwcache_lock(out, PIPETTE_BW_LOCK_WAIT_S, &lock, &err))
		return cli_error("%s", err.msg);
	for (i = 1; i < argc; i++) {
		int r;

		if (is_opt(argv[i], "-o") || is_opt(argv[i], "--output")) {
			i++;
			continue;
		}
		if (pipette_bwcache_load(argv[i], &src, &err) < 0) {
			cli_error("%s", err.msg);
			goto out;
		}
		if (!dst) {
			dst = src;
			continue;
		}
		r = pipette_bwcache_merge(dst, src, &err);
		pipette_bwcache_destroy(src);
		if (r < 0) {
			cli_error("%s: %s", argv[i], err.msg);
			goto out;
		}
	}
	if (pipette_bwcache_save_locked(dst, lock, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	printf("%s: %d nodes merged from %d file%s\n", out,
	       pipette_bwcache_node_count(dst), n_in, n_in == 1 ? "" : "s");
	rc = PIPETTE_EXIT_OK;
out:
	pipette_bwcache_unlock(lock);
	pipette_bwcache_destroy(dst);
	return rc;
}

/* ---------------------------------------------------------------- */

static int split2(const char *opt, const char *v, char sep, double *x, double *y,
		  int y_optional)
{
	char a[64];
	const char *p;
	struct pipette_err err;

	if (!v)
		return cli_error("%s needs a value", opt);
	p = strchr(v, sep);
	if (!p && !y_optional)
		return cli_error("%s: expected X%cY, got '%.40s'", opt, sep, v);
	if ((p ? (size_t)(p - v) : strlen(v)) >= sizeof(a))
		return cli_error("%s: value too long", opt);
	memcpy(a, v, p ? (size_t)(p - v) : strlen(v) + 1);
	if (p)
		a[p - v] = '\0';
	if (pipette_parse_double(a, -1e9, 1e9, x, opt, &err) < 0 ||
	    (p && pipette_parse_double(p + 1, -1e9, 1e9, y, opt, &err) < 0))
		return cli_error("%s", err.msg);
	return 0;
}

/* The command (without -o), recorded so that the file says how to remake
 * it; NULL when out of memory. */
static char *generator_line(int argc, char **argv)
{
	size_t len = 64;
	char *line;
	int i;

	for (i = 1; i < argc; i++)
		len += strlen(argv[i]) + 1;
	if (!(line = malloc(len)))
		return NULL;
	strcpy(line, "pipette bandwidth generate");
	for (i = 1; i < argc; i++) {
		if (is_opt(argv[i], "-o") || is_opt(argv[i], "--output")) {
			i++;
			continue;
		}
		strcat(line, " ");
		strcat(line, argv[i]);
	}
	return line;
}

/* generate's switch, NVLink-domain and degradation options: 1 when argv[*i]
 * is one of them (*r: its parse status), 0 otherwise. */
static int gen_topology(int argc, char **argv, int *ip, struct pipette_bw_gen *g, long *domain,
			int *r)
{
	int i = *ip;
	double x = 0, y = 0;
	long l;

	if (is_opt(argv[i], "--switch-size")) {
		*r = cli_int("--switch-size", need(argc, argv, &i), 0, PIPETTE_MAX_NODES, &l);
		g->switch_size = (int)l;
	} else if (is_opt(argv[i], "--cross-factor")) {
		*r = cli_double("--cross-factor", need(argc, argv, &i), 0.01, 1, &g->cross_factor);
	} else if (is_opt(argv[i], "--slow-switch")) {
		*r = split2("--slow-switch", need(argc, argv, &i), ':', &x, &y, 0);
		if (!*r && (x < 0 || x != floor(x) || x > PIPETTE_MAX_NODES))
			*r = cli_error("--slow-switch: switch number %g is not 0, 1, ...", x);
		g->slow_switch = (int)x;
		g->slow_switch_factor = y;
	} else if (is_opt(argv[i], "--degraded-nvlink")) {
		y = g->degraded_factor;
		*r = split2("--degraded-nvlink", need(argc, argv, &i), ':', &x, &y, 1);
		if (!*r && (x < 1 || x != floor(x) || x > PIPETTE_MAX_NODES))
			*r = cli_error("--degraded-nvlink: node number %g is not 1, 2, ...", x);
		g->degraded_node = (int)x - 1;
		g->degraded_factor = y;
	} else if (is_opt(argv[i], "--nvlink-domain")) {
		*r = cli_int("--nvlink-domain", need(argc, argv, &i), 1, PIPETTE_MAX_PIN, &l);
		*domain = l;
	} else if (is_opt(argv[i], "--degraded-tray")) {
		y = g->degraded_tray_factor;
		*r = split2("--degraded-tray", need(argc, argv, &i), ':', &x, &y, 1);
		if (!*r && (x < 1 || x != floor(x) || x > PIPETTE_MAX_NODES))
			*r = cli_error("--degraded-tray: node number %g is not 1, 2, ...", x);
		g->degraded_tray = (int)x - 1;
		g->degraded_tray_factor = y;
	} else {
		return 0;
	}
	*ip = i;
	return 1;
}

static int do_generate(int argc, char **argv)
{
	struct pipette_bw_gen g;
	const struct pipette_gpu_spec *spec;
	struct pipette_bwcache *bw = NULL;
	struct pipette_err err;
	const char *out = NULL, *gpu = "H100";
	double eff = 1.0, inter = NAN, intra = NAN;
	long domain = 0;
	char *cmdline = NULL;
	long l;
	struct cli_seen seen = { .n = 0 };
	int i, r = 0, have_seed = 0, have_nodes = 0, have_gpn = 0, rc = PIPETTE_EXIT_USAGE;

	pipette_bw_gen_init(&g);
	for (i = 1; i < argc && !r; i++) {
		if ((r = once(&seen, argv[i]))) {
			break;
		} else if (is_opt(argv[i], "-o") || is_opt(argv[i], "--output")) {
			out = need(argc, argv, &i);
		} else if (is_opt(argv[i], "--seed")) {
			r = cli_int("--seed", need(argc, argv, &i), 0, 2147483647L, &l);
			g.seed = (unsigned long long)l;
			have_seed = 1;
		} else if (is_opt(argv[i], "--nodes")) {
			r = cli_int("--nodes", need(argc, argv, &i), 1,
				    PIPETTE_MAX_NODES, &l);
			g.nodes = (int)l;
			have_nodes = 1;
		} else if (is_opt(argv[i], "--gpus-per-node")) {
			r = cli_int("--gpus-per-node", need(argc, argv, &i), 1,
				    PIPETTE_MAX_GPUS, &l);
			g.gpus_per_node = (int)l;
			have_gpn = 1;
		} else if (is_opt(argv[i], "--gpu")) {
			if (!(gpu = need(argc, argv, &i)))
				r = cli_error("--gpu needs a GPU type");
		} else if (is_opt(argv[i], "--prefix")) {
			if (!(g.prefix = need(argc, argv, &i)))
				r = cli_error("--prefix needs a value");
		} else if (is_opt(argv[i], "--efficiency")) {
			r = cli_double("--efficiency", need(argc, argv, &i), 0.01, 1, &eff);
		} else if (is_opt(argv[i], "--inter-gbps")) {
			r = cli_double("--inter-gbps", need(argc, argv, &i), 0.01,
				       PIPETTE_BW_MAX_GBPS, &inter);
		} else if (is_opt(argv[i], "--intra-gbps")) {
			r = cli_double("--intra-gbps", need(argc, argv, &i), 0.01,
				       PIPETTE_BW_MAX_GBPS, &intra);
		} else if (is_opt(argv[i], "--noise")) {
			r = cli_double("--noise", need(argc, argv, &i), 0, 0.5, &g.noise);
		} else if (is_opt(argv[i], "--slow-links")) {
			r = cli_double("--slow-links", need(argc, argv, &i), 0, 1,
				       &g.slow_frac);
		} else if (is_opt(argv[i], "--slow-range")) {
			r = split2("--slow-range", need(argc, argv, &i), ',', &g.slow_min,
				   &g.slow_max, 0);
		} else if (gen_topology(argc, argv, &i, &g, &domain, &r)) {
			continue;
		} else if (is_opt(argv[i], "--when")) {
			r = parse_when("--when", need(argc, argv, &i), &g.when);
		} else {
			r = cli_error("bandwidth generate: unknown %s %.64s",
				      argv[i][0] == '-' ? "option" : "argument", argv[i]);
		}
	}
	if (r)
		return r;
	if (!have_seed || !have_nodes)
		return cli_error("bandwidth generate: --seed and --nodes are required");
	if (!out)
		return cli_error("bandwidth generate: no output file (-o OUT)");
	spec = pipette_gpu_lookup(gpu, &err);
	if (!spec)
		return cli_error("--gpu: %s", err.msg);
	if (!have_gpn)
		g.gpus_per_node = spec->gpus_per_node;	/* the type's board or tray */
	if (!domain && spec->nvlink_domain_gpus > g.gpus_per_node)
		domain = spec->nvlink_domain_gpus;
	if (domain % g.gpus_per_node)
		return cli_error("--nvlink-domain %ld: not a whole number of nodes of %d GPUs",
				 domain, g.gpus_per_node);
	g.domain_nodes = (int)(domain / g.gpus_per_node);
	g.domain_gpus = g.domain_nodes > 1 ? (int)domain : 0;
	if (g.domain_nodes > g.nodes)
		g.domain_nodes = g.nodes;	/* a partial domain: all the nodes */
	g.inter_gbps = isnan(inter) ? spec->nic_gbps * eff : inter;
	g.intra_gbps = isnan(intra) ? spec->nvlink_gbps * eff : intra;
	g.inter_lat_us = spec->nic_lat_us;
	g.intra_lat_us = spec->nvlink_lat_us;
	if (!(cmdline = generator_line(argc, argv)))
		return cli_error("out of memory");
	if (pipette_bwcache_generate(&g, &bw, &err) < 0 ||
	    pipette_bwcache_set_generator(bw, cmdline, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	if (save(bw, out))
		goto out;
	rc = PIPETTE_EXIT_OK;
out:
	free(cmdline);
	pipette_bwcache_destroy(bw);
	return rc;
}

/* ---------------------------------------------------------------- */

/* What convert restates the figures by: groups given by name and
 * hostlist, or runs of switch_size nodes in the cache's order. */
struct groups_opt {
	const char *spec[PIPETTE_MAX_NODES + 1];	/* NAME=HOSTLIST */
	int n_spec;
	long switch_size;
	const char *domain[PIPETTE_MAX_NODES + 1];	/* --domain NAME=HOSTLIST */
	int n_domain;
	long domain_gpus;				/* --domain-gpus: stated size */
};

/* convert --domain: the file's NVLink domains replaced by the given ones
 * (pipette-bw/3); every node must be in the cache, in one domain. */
static int set_domains(struct pipette_bwcache *bw, const struct groups_opt *opt)
{
	struct pipette_err err;
	int d, k, rc = 0;

	if (opt->n_domain)
		pipette_bwcache_clear_domains(bw);
	for (d = 0; d < opt->n_domain && !rc; d++) {
		const char *eq = strchr(opt->domain[d], '=');
		char **nodes, name[PIPETTE_BW_MAX_NAME + 1];
		int n;

		if (!eq || eq == opt->domain[d] || !eq[1] ||
		    (size_t)(eq - opt->domain[d]) > PIPETTE_BW_MAX_NAME)
			return cli_error("--domain: expected NAME=HOSTLIST, got '%.64s'",
					 opt->domain[d]);
		snprintf(name, sizeof(name), "%.*s", (int)(eq - opt->domain[d]), opt->domain[d]);
		if (pipette_hostlist_expand(eq + 1, &nodes, &n, &err) < 0)
			return cli_error("--domain %s: %s", name, err.msg);
		for (k = 0; k < n && !rc; k++)
			if (pipette_bwcache_node_index(bw, nodes[k]) < 0)
				rc = cli_error("--domain %s: node %s is not in the cache", name,
					       nodes[k]);
			else if (pipette_bwcache_set_domain(bw, nodes[k], name, (int)opt->domain_gpus,
							    0, &err) < 0)
				rc = cli_error("--domain %s: %s", name, err.msg);
		pipette_hostlist_free(nodes, n);
	}
	if (!rc && pipette_bwcache_check_domains(bw, 0, 0, &err) < 0)
		rc = cli_error("--domain: %s", err.msg);
	return rc;
}

/* Group g (NAME=HOSTLIST) into names[g] and group_of; every node must be
 * in the cache, and in one group at most. */
static int group_from_spec(const struct pipette_bwcache *bw, const char *spec, int g,
			   char **names, int *group_of)
{
	const char *eq = strchr(spec, '=');
	struct pipette_err err;
	char **nodes;
	int n, k, rc = 0;

	if (!eq || eq == spec || !eq[1])
		return cli_error("--group: expected NAME=HOSTLIST, got '%.64s'", spec);
	if (!(names[g] = strndup(spec, (size_t)(eq - spec))))
		return cli_error("out of memory");
	if (pipette_hostlist_expand(eq + 1, &nodes, &n, &err) < 0)
		return cli_error("--group %s: %s", names[g], err.msg);
	for (k = 0; k < n && !rc; k++) {
		int i = pipette_bwcache_node_index(bw, nodes[k]);

		if (i < 0)
			rc = cli_error("--group %s: node %s is not in the cache", names[g],
				       nodes[k]);
		else if (group_of[i] >= 0)
			rc = cli_error("--group %s: node %s is already in group %s", names[g],
				       nodes[k], names[group_of[i]]);
		else
			group_of[i] = g;
	}
	pipette_hostlist_free(nodes, n);
	return rc;
}

/* The groups of opt over the cache's nodes: *n_groups names (malloc'd,
 * the caller frees them) and each node's group (-1: none). */
static int make_groups(const struct pipette_bwcache *bw, const struct groups_opt *opt,
		       char **names, int *n_groups, int *group_of)
{
	int n = pipette_bwcache_node_count(bw), i, g;

	for (i = 0; i < n; i++)
		group_of[i] = -1;
	*n_groups = 0;
	if (opt->switch_size > 0) {
		for (i = 0; i < n; i++) {
			g = (int)(i / opt->switch_size);
			if (g == *n_groups) {
				char name[32];

				snprintf(name, sizeof(name), "switch%d", g);
				if (!(names[g] = strdup(name)))
					return cli_error("out of memory");
				(*n_groups)++;
			}
			group_of[i] = g;
		}
		return 0;
	}
	for (g = 0; g < opt->n_spec; g++) {
		(*n_groups)++;
		if (group_from_spec(bw, opt->spec[g], g, names, group_of))
			return PIPETTE_EXIT_USAGE;
	}
	return 0;
}

/* Restate bw per the groups of opt (pipette-bw/2), or give every node
 * pair its figure and drop the groups (to_v1). */
static int convert_cache(struct pipette_bwcache *bw, int to_v1, const struct groups_opt *opt,
			 double tolerance)
{
	int n = pipette_bwcache_node_count(bw), n_groups = 0, g, rc = PIPETTE_EXIT_USAGE;
	char **names = calloc((size_t)n + PIPETTE_MAX_NODES + 1, sizeof(char *));
	int *group_of = malloc(((size_t)n + 1) * sizeof(int));
	struct pipette_err err;

	if (!names || !group_of) {
		cli_error("out of memory");
		goto out;
	}
	if (to_v1) {
		if (pipette_bwcache_ungroup(bw, &err) < 0)
			cli_error("%s", err.msg);
		else
			rc = PIPETTE_EXIT_OK;
		goto out;
	}
	if (make_groups(bw, opt, names, &n_groups, group_of))
		goto out;
	if (pipette_bwcache_set_groups(bw, n_groups, (const char *const *)names, group_of,
				       tolerance, &err) < 0)
		cli_error("%s", err.msg);
	else
		rc = PIPETTE_EXIT_OK;
out:
	for (g = 0; names && g < n_groups; g++)
		free(names[g]);
	free(names);
	free(group_of);
	return rc;
}

static int do_convert(int argc, char **argv)
{
	static struct groups_opt opt;
	struct pipette_bwcache *bw = NULL;
	struct pipette_bwcache_lock *lock = NULL;
	struct pipette_err err;
	const char *out = NULL, *in = NULL, *to = NULL;
	double tolerance = 0;
	struct cli_seen seen = { .n = 0 };
	int i, r = 0, rc = PIPETTE_EXIT_USAGE;

	memset(&opt, 0, sizeof(opt));
	for (i = 1; i < argc && !r; i++) {
		if (!is_opt(argv[i], "--group") && !is_opt(argv[i], "--domain") &&
		    (r = once(&seen, argv[i]))) {
			break;
		} else if (is_opt(argv[i], "-o") || is_opt(argv[i], "--output")) {
			if (!(out = need(argc, argv, &i)))
				r = cli_error("-o needs a file name");
		} else if (is_opt(argv[i], "--to")) {
			if (!(to = need(argc, argv, &i)) || (strcmp(to, PIPETTE_BW_SCHEMA) &&
							     strcmp(to, PIPETTE_BW_SCHEMA_V2) &&
							     strcmp(to, PIPETTE_BW_SCHEMA_V3)))
				r = cli_error("--to: expected %s, %s or %s", PIPETTE_BW_SCHEMA,
					      PIPETTE_BW_SCHEMA_V2, PIPETTE_BW_SCHEMA_V3);
		} else if (is_opt(argv[i], "--domain")) {
			if (!(opt.domain[opt.n_domain] = need(argc, argv, &i)))
				r = cli_error("--domain needs NAME=HOSTLIST");
			else if (++opt.n_domain > PIPETTE_MAX_NODES)
				r = cli_error("--domain: more than %d domains", PIPETTE_MAX_NODES);
		} else if (is_opt(argv[i], "--domain-gpus")) {
			r = cli_int("--domain-gpus", need(argc, argv, &i), 1,
				    PIPETTE_MAX_NODES * PIPETTE_MAX_GPUS, &opt.domain_gpus);
		} else if (is_opt(argv[i], "--group")) {
			if (!(opt.spec[opt.n_spec] = need(argc, argv, &i)))
				r = cli_error("--group needs NAME=HOSTLIST");
			else if (++opt.n_spec > PIPETTE_MAX_NODES)
				r = cli_error("--group: more than %d groups", PIPETTE_MAX_NODES);
		} else if (is_opt(argv[i], "--switch-size")) {
			r = cli_int("--switch-size", need(argc, argv, &i), 1, PIPETTE_MAX_NODES,
				    &opt.switch_size);
		} else if (is_opt(argv[i], "--tolerance")) {
			/* at most 0.5: a figure half its group's is a slow link
			 * (the generator's are 0.3..0.6 of healthy, bwgen.c), not
			 * noise to smooth over */
			r = cli_double("--tolerance", need(argc, argv, &i), 0, 0.5, &tolerance);
		} else if (argv[i][0] == '-' && argv[i][1]) {
			r = cli_error("bandwidth convert: unknown option %.64s", argv[i]);
		} else if (in) {
			r = cli_error("bandwidth convert: one input file only");
		} else {
			in = argv[i];
		}
	}
	if (r)
		return r;
	if (!in || !out)
		return cli_error("bandwidth convert: expected IN -o OUT");
	if (!to)
		to = opt.n_domain ? PIPETTE_BW_SCHEMA_V3 : opt.n_spec || opt.switch_size
			? PIPETTE_BW_SCHEMA_V2 : PIPETTE_BW_SCHEMA;
	if (strcmp(to, PIPETTE_BW_SCHEMA_V3) && (opt.n_domain || opt.domain_gpus))
		return cli_error("bandwidth convert: --domain and --domain-gpus make %s",
				 PIPETTE_BW_SCHEMA_V3);
	if (!strcmp(to, PIPETTE_BW_SCHEMA) && (opt.n_spec || opt.switch_size))
		return cli_error("bandwidth convert: --group and --switch-size make %s",
				 PIPETTE_BW_SCHEMA_V2);
	if (!strcmp(to, PIPETTE_BW_SCHEMA_V2) && !opt.n_spec == !opt.switch_size)
		return cli_error("bandwidth convert: %s needs either --group (one or more) "
				 "or --switch-size", PIPETTE_BW_SCHEMA_V2);
	if (pipette_bwcache_lock(out, PIPETTE_BW_LOCK_WAIT_S, &lock, &err))
		return cli_error("%s", err.msg);
	if (pipette_bwcache_load(in, &bw, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	if (!strcmp(to, PIPETTE_BW_SCHEMA_V3)) {
		if ((opt.n_spec || opt.switch_size) &&
		    (rc = convert_cache(bw, 0, &opt, tolerance)))
			goto out;
		if ((rc = set_domains(bw, &opt)))
			goto out;
		rc = PIPETTE_EXIT_USAGE;
		if (!pipette_bwcache_domain_count(bw)) {
			cli_error("bandwidth convert: %s holds NVLink domains: give --domain "
				  "NAME=HOSTLIST (%s has none)", PIPETTE_BW_SCHEMA_V3, in);
			goto out;
		}
	} else if (pipette_bwcache_domain_count(bw)) {
		cli_error("bandwidth convert: %s has NVLink domains, which only %s holds", in,
			  PIPETTE_BW_SCHEMA_V3);
		goto out;
	} else if ((rc = convert_cache(bw, !strcmp(to, PIPETTE_BW_SCHEMA), &opt, tolerance))) {
		goto out;
	}
	rc = PIPETTE_EXIT_USAGE;
	if (pipette_bwcache_save_locked(bw, lock, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	printf("%s: %s, %d nodes, %d groups, ", out, pipette_bwcache_domain_count(bw) ?
	       PIPETTE_BW_SCHEMA_V3 : pipette_bwcache_group_count(bw) ? PIPETTE_BW_SCHEMA_V2 :
	       PIPETTE_BW_SCHEMA, pipette_bwcache_node_count(bw), pipette_bwcache_group_count(bw));
	if (pipette_bwcache_domain_count(bw))
		printf("%d NVLink domains, ", pipette_bwcache_domain_count(bw));
	printf("%ld of %ld inter-node figures measured\n", pipette_bwcache_measured(bw),
	       (long)pipette_bwcache_node_count(bw) * (pipette_bwcache_node_count(bw) - 1));
	rc = PIPETTE_EXIT_OK;
out:
	pipette_bwcache_unlock(lock);
	pipette_bwcache_destroy(bw);
	return rc;
}

/* `pipette bandwidth SUB --help` anywhere in SUB's arguments: the usage. */
static int wants_help(int argc, char **argv)
{
	int i;

	for (i = 2; i < argc; i++)
		if (is_opt(argv[i], "--help") || is_opt(argv[i], "-h"))
			return 1;
	return 0;
}

int cmd_bandwidth(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return PIPETTE_EXIT_USAGE;
	}
	if (wants_help(argc, argv)) {
		usage(stdout);
		return PIPETTE_EXIT_OK;
	}
	if (is_opt(argv[1], "--help") || is_opt(argv[1], "-h") ||
	    is_opt(argv[1], "help")) {
		usage(stdout);
		return PIPETTE_EXIT_OK;
	}
	if (is_opt(argv[1], "validate"))
		return do_validate(argc - 1, argv + 1);
	if (is_opt(argv[1], "show"))
		return do_show(argc - 1, argv + 1);
	if (is_opt(argv[1], "import"))
		return do_import(argc - 1, argv + 1);
	if (is_opt(argv[1], "merge"))
		return do_merge(argc - 1, argv + 1);
	if (is_opt(argv[1], "generate"))
		return do_generate(argc - 1, argv + 1);
	if (is_opt(argv[1], "convert"))
		return do_convert(argc - 1, argv + 1);
	cli_error("bandwidth: unknown subcommand '%.64s'", argv[1]);
	usage(stderr);
	return PIPETTE_EXIT_USAGE;
}
