/* pipette: converters into the bandwidth cache: the original Pipette JSON
 * (written by round_robin_test.py:117-125 of yimjinkyu1/date2024_pipette
 * @a2b0683, Megatron-LM-2.5/strategy/nccl-test/nccl-test-a100/) and the
 * text output of NVIDIA/nccl-tests (columns: src/util.cu:756-758 @a0b82b2).
 * The cache format is in bwcache.h. */
#include "inputs/bwcache.h"

#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/json.h"
#include "inputs/readfile.h"

/* Pipette measures with one 30 MiB sendrecv_perf message: "-b 31457280
 * -e 31457280" (date2024_pipette @a2b0683, Megatron-LM-2.5/strategy/
 * nccl-test/nccl-test-a100/run_nccl_test.sh:5-6, 28, 50). */
#define LEGACY_BYTES 31457280.0
#define LEGACY_TOOL "pipette-legacy nccl-tests sendrecv_perf"
/* Latency is read from sendrecv rows of at most this size, where the
 * transfer time is small next to the fixed cost. */
#define NCCL_LAT_MAX_BYTES 65536.0
#define NCCL_MAX_LINE 4096

/* The importers' inputs: as large as a bandwidth cache at most. */
static int read_text(const char *path, const char *what, struct pipette_file *f,
		     struct pipette_err *err)
{
	return pipette_read_file(path, what, PIPETTE_BW_MAX_FILE_BYTES, f, err);
}

/* A legacy cell: "123.4" or 123.4; NaN for null, "" or "nan". */
static int legacy_cell(json_object *v, const char *path, size_t i, size_t j,
		       double *out, struct pipette_err *err)
{
	const char *s;
	char *end;

	if (!v || json_object_is_type(v, json_type_null)) {
		*out = NAN;
		return 0;
	}
	if (json_object_is_type(v, json_type_double) ||
	    json_object_is_type(v, json_type_int)) {
		*out = json_object_get_double(v);
	} else if (json_object_is_type(v, json_type_string)) {
		s = json_object_get_string(v);
		if (!*s || !strcasecmp(s, "nan")) {
			*out = NAN;
			return 0;
		}
		errno = 0;
		*out = strtod(s, &end);
		if (errno || *end)
			return pipette_fail(err, "%s: $.bandwidth[%zu][%zu]: expected "
					    "GB/s as a number or numeric string, got "
					    "\"%.32s\"", path, i, j, s);
	} else {
		return pipette_fail(err, "%s: $.bandwidth[%zu][%zu]: expected GB/s "
				    "as a number or numeric string", path, i, j);
	}
	if (!isfinite(*out) || *out <= 0 || *out > PIPETTE_BW_MAX_GBPS)
		return pipette_fail(err, "%s: $.bandwidth[%zu][%zu]: expected a "
				    "bandwidth in (0, %g] GB/s, got %g", path, i, j,
				    PIPETTE_BW_MAX_GBPS, *out);
	return 0;
}

int pipette_bwcache_import_legacy(struct pipette_bwcache *bw, const char *path,
				  int gpus_per_node, time_t when,
				  struct pipette_err *err)
{
	struct pipette_bw_prov prov = { LEGACY_TOOL, "busbw", LEGACY_BYTES, when };
	json_object *root = NULL, *gpus, *band;
	struct pipette_file f;
	size_t n, i, j;
	int rv = -1, a, b;

	if (gpus_per_node < 0 || gpus_per_node > PIPETTE_BW_MAX_GPUS)
		return pipette_fail(err, "%s: %d GPUs per node, expected 0..%d",
				    path, gpus_per_node, PIPETTE_BW_MAX_GPUS);
	if (read_text(path, "Pipette bandwidth JSON", &f, err) < 0)
		return -1;
	root = pipette_json_parse(f.data, f.len, path, JSON_TOKENER_DEFAULT_DEPTH, err);
	pipette_file_free(&f);
	if (!root)
		return -1;
	if (!json_object_object_get_ex(root, "gpus", &gpus) ||
	    !json_object_object_get_ex(root, "bandwidth", &band) ||
	    !json_object_is_type(gpus, json_type_array) ||
	    !json_object_is_type(band, json_type_array)) {
		pipette_fail(err, "%s: $: expected the original Pipette format "
			     "{\"gpus\": [host, ...], \"bandwidth\": [[GB/s, ...], ...]}",
			     path);
		goto fail;
	}
	n = json_object_array_length(gpus);
	if (n > PIPETTE_BW_MAX_NODES) {
		pipette_fail(err, "%s: $.gpus: %zu hosts exceed the limit of %d",
			     path, n, PIPETTE_BW_MAX_NODES);
		goto fail;
	}
	if (json_object_array_length(band) != n) {
		pipette_fail(err, "%s: $.bandwidth: expected %zu rows (one per host "
			     "in $.gpus), got %zu", path, n,
			     json_object_array_length(band));
		goto fail;
	}
	for (i = 0; i < n; i++) {
		json_object *h = json_object_array_get_idx(gpus, i);

		if (!json_object_is_type(h, json_type_string)) {
			pipette_fail(err, "%s: $.gpus[%zu]: expected a host name", path, i);
			goto fail;
		}
		for (j = 0; j < i; j++)
			if (!strcmp(json_object_get_string(h), json_object_get_string(
					    json_object_array_get_idx(gpus, j)))) {
				pipette_fail(err, "%s: $.gpus[%zu]: duplicated host "
					     "'%.64s' (also at $.gpus[%zu])", path, i,
					     json_object_get_string(h), j);
				goto fail;
			}
		if (pipette_bwcache_add_node(bw, json_object_get_string(h), err) < 0) {
			pipette_fail_prefix(err, "%s: $.gpus[%zu]: ", path, i);
			goto fail;
		}
	}
	for (i = 0; i < n; i++) {
		json_object *row = json_object_array_get_idx(band, i);
		const char *hi = json_object_get_string(json_object_array_get_idx(gpus, i));

		if (!json_object_is_type(row, json_type_array) ||
		    json_object_array_length(row) != n) {
			pipette_fail(err, "%s: $.bandwidth[%zu]: expected a row of %zu "
				     "values (the matrix must be square)", path, i, n);
			goto fail;
		}
		for (j = 0; j < n; j++) {
			const char *hj = json_object_get_string(
				json_object_array_get_idx(gpus, j));
			double g = NAN;

			if (legacy_cell(json_object_array_get_idx(row, j), path, i, j,
					&g, err) < 0)
				goto fail;
			if (isnan(g))
				continue;
			if (i != j) {
				if (pipette_bwcache_set_inter(bw, hi, hj, g, NAN, &prov,
							      err) < 0)
					goto fail;
				continue;
			}
			/* Diagonal: one 8-GPU intra-node busbw for the node. */
			for (a = 0; a < gpus_per_node; a++)
				for (b = 0; b < gpus_per_node; b++)
					if (a != b && pipette_bwcache_set_intra(
						    bw, hi, a, b, g, NAN, &prov, err) < 0)
						goto fail;
		}
	}
	rv = 0;
fail:
	json_object_put(root);
	return rv;
}

/* ------------------------------------------------------------------ */
/* nccl-tests                                                          */

struct nccl_rank {
	int rank;
	char host[PIPETTE_BW_MAX_NAME + 1];
	int dev;
};

static int split_ws(char *line, char **tok, int max)
{
	int n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(line, " \t\r\n", &save); t && n < max;
	     t = strtok_r(NULL, " \t\r\n", &save))
		tok[n++] = t;
	return n;
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

/* What one pass over an nccl-tests output finds. */
struct nccl_scan {
	struct nccl_rank *ranks;
	int n_ranks, cap_ranks;
	int busbw_col, time_col;	/* in the column header; -1 = not seen */
	char program[64];		/* "sendrecv_perf", from the banner */
	double best_bytes, best_bw;	/* the chosen row */
	int best_line;
	double lat, lat_bytes;		/* latency from the smallest row */
};

/* "#  Rank  0 Group  0 Pid 1234 on HOST device  0 [...] NAME" */
static int nccl_rank_line(struct nccl_scan *s, char **tok, const char *path,
			  struct pipette_err *err)
{
	struct nccl_rank *r;

	if (s->n_ranks == s->cap_ranks) {
		int cap = s->cap_ranks ? 2 * s->cap_ranks : 16;
		void *np = realloc(s->ranks, (size_t)cap * sizeof(*s->ranks));

		if (!np)
			return pipette_fail(err, "%s: out of memory", path);
		s->ranks = np;
		s->cap_ranks = cap;
	}
	r = &s->ranks[s->n_ranks++];
	r->rank = atoi(tok[1]);
	pipette_strlcpy(r->host, tok[7], sizeof(r->host));
	r->dev = atoi(tok[9]);
	return 0;
}

/* A '#' line: the banner naming the program, a rank line, or the column
 * header "#  size count type redop root time algbw busbw #wrong time algbw
 * busbw #wrong" (the first busbw is out-of-place: nccl-tests
 * src/util.cu:756-758). */
static int nccl_comment(struct nccl_scan *s, char *buf, const char *path,
			struct pipette_err *err)
{
	const char *key = "Collective test starting:";
	char *p = buf + 1, *tok[32];
	int nt, i;

	while (*p == ' ')
		p++;
	if (!strncmp(p, key, strlen(key))) {
		if (sscanf(p + strlen(key), " %63s", s->program) != 1)
			s->program[0] = '\0';
		return 0;
	}
	nt = split_ws(p, tok, 32);
	if (nt >= 10 && !strcmp(tok[0], "Rank") && !strcmp(tok[6], "on") &&
	    !strcmp(tok[8], "device"))
		return nccl_rank_line(s, tok, path, err);
	if (s->busbw_col < 0 && nt >= 3 && !strcmp(tok[0], "size")) {
		for (i = 0; i < nt; i++) {
			if (!strcmp(tok[i], "busbw") && s->busbw_col < 0)
				s->busbw_col = i;
			if (!strcmp(tok[i], "time") && s->time_col < 0)
				s->time_col = i;
		}
	}
	return 0;
}

/* A result row under the header: keep the row of the wanted size (or the
 * largest) and the smallest sendrecv time for the latency. */
static int nccl_row(struct nccl_scan *s, char **tok, int nt, int lineno, double want,
		    const char *path, struct pipette_err *err)
{
	int bc = s->busbw_col;
	double size = strtod(tok[0], NULL), g, t;
	char *end;

	if (nt <= bc)
		return pipette_fail(err, "%s: line %d: expected at least %d columns "
				    "(busbw is column %d of the header), got %d",
				    path, lineno, bc + 1, bc + 1, nt);
	errno = 0;
	g = strtod(tok[bc], &end);
	if (errno || *end || !isfinite(g) || g < 0)
		return pipette_fail(err, "%s: line %d: busbw column: expected GB/s, got "
				    "'%.32s'", path, lineno, tok[bc]);
	if (nt > bc + 1 && all_digits(tok[bc + 1]) && atol(tok[bc + 1]) != 0)
		return pipette_fail(err, "%s: line %d: nccl-tests reports %s wrong results "
				    "(#wrong): the run is not a valid measurement", path,
				    lineno, tok[bc + 1]);
	if ((want > 0 && size == want) || (want <= 0 && size > s->best_bytes)) {
		s->best_bytes = size;
		s->best_bw = g;
		s->best_line = lineno;
	}
	if (s->time_col >= 0 && s->time_col < nt && size <= NCCL_LAT_MAX_BYTES &&
	    size < s->lat_bytes) {
		t = strtod(tok[s->time_col], &end);
		if (!*end && isfinite(t) && t >= 0 && t <= PIPETTE_BW_MAX_LAT_US) {
			s->lat = t;
			s->lat_bytes = size;
		}
	}
	return 0;
}

/* One pass over the text (changed in place by strtok_r), then the checks
 * that a figure was found. */
static int nccl_scan_text(struct nccl_scan *s, char *text, double want, const char *path,
			  struct pipette_err *err)
{
	char *line, *save = NULL;
	int lineno = 0;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char buf[NCCL_MAX_LINE], *tok[32];
		int nt;

		lineno++;
		if (strlen(line) >= sizeof(buf))
			continue;	/* not an nccl-tests line */
		memcpy(buf, line, strlen(line) + 1);
		if (line[0] == '#') {
			if (nccl_comment(s, buf, path, err))
				return -1;
			continue;
		}
		nt = split_ws(buf, tok, 32);
		if (nt < 1 || !all_digits(tok[0]) || s->busbw_col < 0)
			continue;
		if (nccl_row(s, tok, nt, lineno, want, path, err))
			return -1;
	}
	if (s->busbw_col < 0)
		return pipette_fail(err, "%s: no nccl-tests header line (\"#  size count "
				    "type ... busbw ...\") found", path);
	if (isnan(s->best_bw)) {
		if (want > 0)
			return pipette_fail(err, "%s: no result row for %.0f bytes", path, want);
		return pipette_fail(err, "%s: no result rows under the header", path);
	}
	if (!(s->best_bw > 0) || s->best_bw > PIPETTE_BW_MAX_GBPS)
		return pipette_fail(err, "%s: line %d: busbw %g GB/s is not in (0, %g]",
				    path, s->best_line, s->best_bw, PIPETTE_BW_MAX_GBPS);
	return 0;
}

/* Both directions of one node pair get the figure. */
static int nccl_set_pair(struct pipette_bwcache *bw, const char *a, const char *b,
			 const struct nccl_scan *s, const struct pipette_bw_prov *prov,
			 const char *path, struct pipette_err *err)
{
	if (pipette_bwcache_set_inter(bw, a, b, s->best_bw, s->lat, prov, err) < 0 ||
	    pipette_bwcache_set_inter(bw, b, a, s->best_bw, s->lat, prov, err) < 0)
		return pipette_fail_prefix(err, "%s: ", path);
	return 0;
}

/* Record the figure: the pair given, the two hosts of the rank lines, or
 * one host's ring of devices. */
static int nccl_record(struct pipette_bwcache *bw, const struct nccl_scan *s,
		       const struct pipette_nccl_import *opt,
		       const struct pipette_bw_prov *prov, const char *path,
		       struct pipette_err *err)
{
	const char *hosts[2] = { NULL, NULL };
	int n_hosts = 0, i, k;

	if (opt->pair_a || opt->pair_b) {
		if (!opt->pair_a || !opt->pair_b || !strcmp(opt->pair_a, opt->pair_b))
			return pipette_fail(err, "%s: --pair needs two different node names",
					    path);
		return nccl_set_pair(bw, opt->pair_a, opt->pair_b, s, prov, path, err);
	}
	for (i = 0; i < s->n_ranks; i++) {
		for (k = 0; k < n_hosts; k++)
			if (!strcmp(hosts[k], s->ranks[i].host))
				break;
		if (k < n_hosts)
			continue;
		if (n_hosts == 2)
			return pipette_fail(err, "%s: the ranks run on more than two hosts "
					    "(%s, %s, %s, ...); pipette needs one node pair "
					    "per file", path, hosts[0], hosts[1],
					    s->ranks[i].host);
		hosts[n_hosts++] = s->ranks[i].host;
	}
	if (n_hosts == 0)
		return pipette_fail(err, "%s: no \"#  Rank N ... on HOST device D\" lines: "
				    "give the node pair with --pair A,B", path);
	if (n_hosts == 2)
		return nccl_set_pair(bw, hosts[0], hosts[1], s, prov, path, err);
	if (s->n_ranks < 2)
		return pipette_fail(err, "%s: a single rank measures no link", path);
	/* One host: the ring of devices in rank order. */
	for (i = 0; i < s->n_ranks; i++) {
		int a = s->ranks[i].dev, b = s->ranks[(i + 1) % s->n_ranks].dev;

		if (a != b && pipette_bwcache_set_intra(bw, hosts[0], a, b, s->best_bw, s->lat,
							prov, err) < 0)
			return pipette_fail_prefix(err, "%s: ", path);
	}
	return 0;
}

int pipette_bwcache_import_nccl(struct pipette_bwcache *bw, const char *path,
				const struct pipette_nccl_import *opt,
				struct pipette_err *err)
{
	struct nccl_scan s;
	struct pipette_file f;
	struct pipette_bw_prov prov;
	char tool[128];
	int rv = -1;

	memset(&s, 0, sizeof(s));
	s.busbw_col = s.time_col = -1;
	s.best_bytes = -1;
	s.best_bw = s.lat = NAN;
	s.lat_bytes = INFINITY;
	if (read_text(path, "nccl-tests output", &f, err) < 0)
		return -1;
	if (nccl_scan_text(&s, f.data, opt->bytes, path, err))
		goto out;
	if (opt->tool)
		pipette_strlcpy(tool, opt->tool, sizeof(tool));
	else
		snprintf(tool, sizeof(tool), "nccl-tests%s%s", s.program[0] ? " " : "",
			 s.program);
	if (!strstr(tool, "sendrecv"))
		s.lat = NAN;	/* a collective's time is not one hop's latency */
	prov.tool = tool;
	prov.metric = "busbw";
	prov.bytes = s.best_bytes;
	prov.when = opt->when;
	rv = nccl_record(bw, &s, opt, &prov, path, err);
out:
	free(s.ranks);
	pipette_file_free(&f);
	return rv;
}
