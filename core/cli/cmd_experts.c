/* pipette experts: expert placement from a routing trace (experts.h), and
 * `pipette experts generate`, a seeded synthetic trace. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "inputs/cluster.h"
#include "plan/experts.h"
#include "inputs/readfile.h"
#include "inputs/hardware.h"
#include "inputs/limits.h"
#include "inputs/model.h"

static const char usage_text[] =
"usage: pipette experts --model M --trace FILE --ep N [OPTIONS]\n"
"       pipette experts generate --model M --seed N --skew Z --tokens T\n"
"                                [--affinity A] [-o FILE]\n"
"\n"
"Choose which experts each expert-parallel rank hosts (E/ep per rank, every\n"
"expert once per MoE layer) so that the busiest rank's token load and the\n"
"tokens crossing nodes between consecutive MoE layers are small (after\n"
"MoETuner, arXiv 2502.06643): an integer program solved with GLPK, with a\n"
"greedy + swap fallback.  Reports the gain over Megatron's contiguous\n"
"placement (expert e on rank e / (E/ep)) and a placement per layer.\n"
"\n"
"  --model NAME|PATH        MoE preset (pipette models) or a config.json\n"
"  --models-dir DIR         where NAME.json model configs may also be found\n"
"  --trace FILE             routing trace (below)\n"
"  --ep N                   EP ranks; must divide the expert count\n"
"  --nodes LIST|N           Slurm hostlist or a count (enough for ep ranks)\n"
"  --gpus-per-node G        GPUs per node (the GPU type's board); EP rank r\n"
"                           runs on GPU r: node r / G, slot r mod G\n"
"  --gpu TYPE               GPU type (pipette gpus; H100-SXM-80GB)\n"
"  --bandwidth FILE         bandwidth cache; without it nominal links\n"
"  --time-limit S           GLPK wall-clock safety net (60); when it fires the\n"
"                           greedy placement is used and reported\n"
"  --node-limit N           branch-and-bound nodes (200): the deterministic\n"
"                           budget; the best integer solution found is used\n"
"  --solver auto|greedy     GLPK with greedy fallback, or the greedy only\n"
"  --format table|json      (table)\n"
"\n"
"Objective: sum over MoE layers of w_load * (busiest rank's tokens) +\n"
"w_cross * (token hops between nodes), w in seconds per token from the\n"
"model, the GPU and the slowest inter-node link.  The all-to-all times are\n"
"one dispatch per layer for the traced tokens on the given links.  Gains\n"
"are contiguous / optimized (JSON null where optimized is 0).\n"
"\n"
"Trace format (JSON, schema pipette-routing/1):\n"
"  {\"schema\": \"pipette-routing/1\", \"model\": \"...\", \"tokens\": T,\n"
"   \"layers\": [ {\"load\": [E counts: tokens routed to each expert],\n"
"                \"next\": [E rows of E counts: tokens on expert e here and\n"
"                          on expert e' at the next MoE layer]}, ...]}\n"
"  one entry per MoE layer of the model; \"next\" is absent or null on the\n"
"  last; counts >= 0; optional \"experts\", \"topk\" and per-layer \"layer\"\n"
"  (the model's layer number) are checked against the model.\n"
"\n"
"generate: T tokens, each routed to top-k experts per MoE layer; Zipf-like\n"
"popularity with exponent Z per layer (0 = uniform); with probability A\n"
"(0.6) a token follows one of two preferred successors of its previous\n"
"experts.  Same arguments, same bytes.\n"
"\n"
"Exit status: 0 done, 2 bad arguments or input.\n";

struct experts_opts {
	const char *model, *models_dir, *trace, *nodes, *gpu, *bandwidth, *out;
	long ep, gpus_per_node, node_limit, tokens, seed;
	double time_limit, skew, affinity;
	int greedy, json, have_seed, have_skew, have_tokens;
};

/* The options of `experts` (placement) and of `experts generate`; all
 * take a value. */
static const char *const place_options[] = {
	"--model", "--models-dir", "--trace", "--ep", "--nodes", "--gpus-per-node", "--gpu",
	"--bandwidth", "--time-limit", "--node-limit", "--solver", "--format", NULL
};
static const char *const generate_options[] = {
	"--model", "--models-dir", "-o", "--output", "--seed", "--skew", "--tokens",
	"--affinity", NULL
};

static int is_opt(const char *name, const char *want)
{
	return !strcmp(name, want);
}

static int parse(int argc, char **argv, int gen, struct experts_opts *o)
{
	struct cli_seen seen = { .n = 0 };
	char a[64];
	int i;

	memset(o, 0, sizeof(*o));
	o->time_limit = 60;
	o->node_limit = 200;
	o->affinity = 0.6;
	for (i = gen ? 2 : 1; i < argc; i++) {
		const char *v;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return -1;
		}
		if (strncmp(argv[i], "-", 1))
			return cli_error("experts: unexpected argument '%.64s'", argv[i]);
		/* -o/--output is one option */
		if (gen && is_opt(argv[i], "-o") && cli_once(&seen, "--output"))
			return PIPETTE_EXIT_USAGE;
		if (cli_option(argc, argv, &i, gen ? "experts generate" : "experts",
			       gen ? generate_options : place_options, &seen, a, sizeof(a), &v))
			return PIPETTE_EXIT_USAGE;
		if (is_opt(a, "--model")) {
			o->model = v;
		} else if (is_opt(a, "--models-dir")) {
			o->models_dir = v;
		} else if (gen && (is_opt(a, "-o") || is_opt(a, "--output"))) {
			o->out = v;
		} else if (gen && is_opt(a, "--seed")) {
			if (cli_int("--seed", v, 0, LONG_MAX, &o->seed))
				return PIPETTE_EXIT_USAGE;
			o->have_seed = 1;
		} else if (gen && is_opt(a, "--skew")) {
			if (cli_double("--skew", v, 0, 100, &o->skew))
				return PIPETTE_EXIT_USAGE;
			o->have_skew = 1;
		} else if (gen && is_opt(a, "--tokens")) {
			if (cli_int("--tokens", v, 1, 1L << 30, &o->tokens))
				return PIPETTE_EXIT_USAGE;
			o->have_tokens = 1;
		} else if (gen && is_opt(a, "--affinity")) {
			if (cli_double("--affinity", v, 0, 1, &o->affinity))
				return PIPETTE_EXIT_USAGE;
		} else if (!gen && is_opt(a, "--trace")) {
			o->trace = v;
		} else if (!gen && is_opt(a, "--ep")) {
			if (cli_int("--ep", v, 1, 4096, &o->ep))
				return PIPETTE_EXIT_USAGE;
		} else if (!gen && is_opt(a, "--nodes")) {
			o->nodes = v;
		} else if (!gen && is_opt(a, "--gpus-per-node")) {
			if (cli_int("--gpus-per-node", v, 1, PIPETTE_MAX_GPUS, &o->gpus_per_node))
				return PIPETTE_EXIT_USAGE;
		} else if (!gen && is_opt(a, "--gpu")) {
			o->gpu = v;
		} else if (!gen && is_opt(a, "--bandwidth")) {
			o->bandwidth = v;
		} else if (!gen && is_opt(a, "--time-limit")) {
			if (cli_double("--time-limit", v, 0.001, 86400, &o->time_limit))
				return PIPETTE_EXIT_USAGE;
		} else if (!gen && is_opt(a, "--node-limit")) {
			if (cli_int("--node-limit", v, 1, 1L << 40, &o->node_limit))
				return PIPETTE_EXIT_USAGE;
		} else if (!gen && is_opt(a, "--solver")) {
			if (strcmp(v, "auto") && strcmp(v, "greedy"))
				return cli_error("--solver: '%.32s': expected auto or greedy", v);
			o->greedy = !strcmp(v, "greedy");
		} else if (!gen && is_opt(a, "--format")) {
			if (strcmp(v, "table") && strcmp(v, "json"))
				return cli_error("--format: '%.32s': expected table or json", v);
			o->json = !strcmp(v, "json");
		} else {
			return cli_error("experts%s: unknown option %.64s (see pipette experts "
					 "--help)", gen ? " generate" : "", a);
		}
	}
	if (!o->model)
		return cli_error("experts: --model is required");
	if (gen) {
		if (!o->have_seed || !o->have_skew || !o->have_tokens)
			return cli_error("experts generate: --seed, --skew and --tokens are "
					 "required");
		return 0;
	}
	if (!o->trace)
		return cli_error("experts: --trace is required");
	if (!o->ep)
		return cli_error("experts: --ep is required");
	return 0;
}

static int load_model(const struct experts_opts *o, struct pipette_model *m)
{
	struct pipette_err err;
	int rc;

	if ((rc = cli_check_model(o->model, o->models_dir)))
		return rc;
	if (pipette_model_load(o->model, o->models_dir, m, &err) ||
	    pipette_model_validate(m, &err))
		return cli_error("--model: %s", err.msg);
	if (!m->experts)
		return cli_error("--model: %s is dense (no experts)", m->name);
	return 0;
}

/* Write the trace whole or not at all (pipette_write_file): a failed run
 * never leaves a truncated trace behind. */
static int generate(const struct experts_opts *o)
{
	struct pipette_routing_gen g = { (unsigned long long)o->seed, o->skew, o->affinity,
					 o->tokens };
	struct pipette_model m;
	struct pipette_routing *r = NULL;
	struct pipette_err err;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc, to_file = o->out && strcmp(o->out, "-");

	if ((rc = load_model(o, &m)))
		return rc;
	if (pipette_routing_generate(&m, &g, &r, &err))
		return cli_error("experts generate: %s", err.msg);
	f = to_file ? open_memstream(&text, &len) : stdout;
	rc = !f || pipette_routing_write_json(r, m.name, o->tokens, f) ? -1 : 0;
	if (f && (to_file ? fclose(f) : fflush(stdout)))
		rc = -1;
	if (rc)
		rc = cli_error("experts generate: writing the output failed");
	else if (to_file && pipette_write_file(o->out, "-o", text, len, 0644, 1, &err))
		rc = cli_error("%s", err.msg);	/* a trace is not secret: 0644 */
	else
		rc = PIPETTE_EXIT_OK;
	free(text);
	pipette_routing_destroy(r);
	return rc;
}

struct side {
	struct pipette_experts_eval ev;
	double *max, *cross, *a2a;	/* per layer */
	double a2a_total;
};

static int side_fill(struct side *s, const struct pipette_routing *r,
		     const struct pipette_experts_opts *eo, const int *pl,
		     const struct pipette_cluster *c, double bpt)
{
	int L = pipette_routing_layers(r), l;
	struct pipette_err err;

	s->max = calloc((size_t)L, sizeof(double));
	s->cross = calloc((size_t)L, sizeof(double));
	s->a2a = calloc((size_t)L, sizeof(double));
	if (!s->max || !s->cross || !s->a2a)
		return cli_error("experts: out of memory");
	if (pipette_experts_evaluate(r, eo, pl, &s->ev, s->max, s->cross, &err))
		return cli_error("experts: %s", err.msg);
	s->a2a_total = 0;
	for (l = 0; l < L; l++) {
		s->a2a[l] = pipette_experts_alltoall_s(r, pl, l, eo->ep, c, NULL, bpt);
		s->a2a_total += s->a2a[l];
	}
	return 0;
}

static void side_free(struct side *s)
{
	free(s->max);
	free(s->cross);
	free(s->a2a);
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : a > 0 ? INFINITY : 1.0;
}

static void jnum(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fputs("null", f);
}

static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void j_side(FILE *f, const char *name, const struct side *s, int L)
{
	fprintf(f, "  ");
	jstr(f, name);
	fputs(": {\"objective\": ", f);
	jnum(f, s->ev.objective);
	fputs(", \"max_load_tokens\": ", f);
	jnum(f, s->ev.max_load);
	fputs(", \"cross_node_tokens\": ", f);
	jnum(f, s->ev.cross_tokens);
	fputs(", \"alltoall_s\": ", f);
	jnum(f, s->a2a_total);
	fputs(", \"alltoall_s_per_layer\": ", f);
	jnum(f, s->a2a_total / L);
	fputs("},\n", f);
}

static void write_json(FILE *f, const struct experts_opts *o, const struct pipette_model *m,
		       const struct pipette_routing *r, const struct pipette_experts_opts *eo,
		       const struct pipette_experts_result *res, const struct side *c,
		       const struct side *p, int nodes_used)
{
	int L = pipette_routing_layers(r), E = pipette_routing_experts(r), l, e, layer;

	fputs("{\n  \"model\": ", f);
	jstr(f, m->name);
	fputs(",\n  \"trace\": ", f);
	jstr(f, o->trace);
	fprintf(f, ",\n  \"experts\": %d, \"topk\": %d, \"moe_layers\": %d,\n", E,
		pipette_routing_topk(r), L);
	fprintf(f, "  \"ep\": %d, \"ranks_per_node\": %d, \"nodes\": %d,\n", eo->ep,
		eo->ranks_per_node, nodes_used);
	fputs("  \"solver\": ", f);
	jstr(f, res->solver);
	fputs(", \"status\": ", f);
	jstr(f, res->status);
	fputs(",\n  \"weights\": {\"load_s_per_token\": ", f);
	jnum(f, eo->load_weight);
	fputs(", \"cross_s_per_token\": ", f);
	jnum(f, eo->cross_weight);
	fputs("}, \"bound\": ", f);
	jnum(f, res->glpk_bound);
	fputs(",\n", f);
	j_side(f, "contiguous", c, L);
	j_side(f, "optimized", p, L);
	fputs("  \"gain\": {\"objective\": ", f);
	jnum(f, ratio(c->ev.objective, p->ev.objective));
	fputs(", \"max_load\": ", f);
	jnum(f, ratio(c->ev.max_load, p->ev.max_load));
	fputs(", \"cross_node_tokens\": ", f);
	jnum(f, ratio(c->ev.cross_tokens, p->ev.cross_tokens));
	fputs(", \"alltoall\": ", f);
	jnum(f, ratio(c->a2a_total, p->a2a_total));
	fputs("},\n  \"layers\": [\n", f);
	for (l = 0, layer = 0; l < L; l++, layer++) {
		while (!pipette_model_is_moe_layer(m, layer))
			layer++;
		fprintf(f, "    {\"moe_layer\": %d, \"layer\": %d, \"max_load_tokens\": [", l,
			layer);
		jnum(f, c->max[l]);
		fputs(", ", f);
		jnum(f, p->max[l]);
		fputs("], \"cross_node_tokens\": [", f);
		jnum(f, c->cross[l]);
		fputs(", ", f);
		jnum(f, p->cross[l]);
		fputs("], \"alltoall_s\": [", f);
		jnum(f, c->a2a[l]);
		fputs(", ", f);
		jnum(f, p->a2a[l]);
		fprintf(f, "]}%s\n", l + 1 < L ? "," : "");
	}
	fputs("  ],\n  \"placement\": [\n", f);
	for (l = 0; l < L; l++) {
		fputs("    [", f);
		for (e = 0; e < E; e++)
			fprintf(f, "%s%d", e ? "," : "", res->placement[(size_t)l * E + e]);
		fprintf(f, "]%s\n", l + 1 < L ? "," : "");
	}
	fputs("  ]\n}\n", f);
}

static void write_table(FILE *f, const struct experts_opts *o, const struct pipette_model *m,
			const struct pipette_routing *r, const struct pipette_experts_opts *eo,
			const struct pipette_experts_result *res, const struct side *c,
			const struct side *p, int nodes_used)
{
	int L = pipette_routing_layers(r), E = pipette_routing_experts(r), l, e;

	fprintf(f, "expert placement: %s (%d experts, top-%d, %d MoE layers), trace %s\n",
		m->name, E, pipette_routing_topk(r), L, o->trace);
	fprintf(f, "EP %d over %d node(s) x %d ranks; solver %s: %s\n\n", eo->ep, nodes_used,
		eo->ranks_per_node, res->solver, res->status);
	fprintf(f, "%-34s %14s %14s %8s\n", "", "contiguous", "optimized", "gain");
	fprintf(f, "%-34s %14.0f %14.0f %7.2fx\n", "busiest-rank tokens (sum of layers)",
		c->ev.max_load, p->ev.max_load, ratio(c->ev.max_load, p->ev.max_load));
	fprintf(f, "%-34s %14.0f %14.0f %7.2fx\n", "cross-node token hops",
		c->ev.cross_tokens, p->ev.cross_tokens,
		ratio(c->ev.cross_tokens, p->ev.cross_tokens));
	fprintf(f, "%-34s %14.4f %14.4f %7.2fx\n", "all-to-all per layer (ms)",
		c->a2a_total / L * 1e3, p->a2a_total / L * 1e3,
		ratio(c->a2a_total, p->a2a_total));
	fprintf(f, "%-34s %14.4g %14.4g %7.2fx\n\n", "objective (s)", c->ev.objective,
		p->ev.objective, ratio(c->ev.objective, p->ev.objective));
	fprintf(f, "%5s %19s %19s %19s  %s\n", "layer", "busiest (c/o)", "cross (c/o)",
		"a2a ms (c/o)", "rank of expert 0..E-1");
	for (l = 0; l < L; l++) {
		fprintf(f, "%5d %9.0f/%-9.0f %9.0f/%-9.0f %9.4f/%-9.4f  ", l, c->max[l], p->max[l],
			c->cross[l], p->cross[l], c->a2a[l] * 1e3, p->a2a[l] * 1e3);
		for (e = 0; e < E; e++)
			fprintf(f, "%s%d", e ? "," : "", res->placement[(size_t)l * E + e]);
		fputc('\n', f);
	}
}

static int place(const struct experts_opts *o)
{
	struct pipette_model m;
	struct pipette_routing *r = NULL;
	struct pipette_bwcache *bw = NULL;
	struct pipette_cluster *cl = NULL;
	const struct pipette_gpu_spec *gpu;
	struct pipette_experts_opts eo;
	struct pipette_experts_result res;
	struct side sc, sp;
	struct pipette_err err;
	char **names = NULL, count[32];
	int n = 0, rc, G, *contig = NULL, nodes_used, L, E;

	memset(&res, 0, sizeof(res));
	memset(&sc, 0, sizeof(sc));
	memset(&sp, 0, sizeof(sp));
	if ((rc = load_model(o, &m)))
		return rc;
	if (!(gpu = pipette_gpu_lookup(o->gpu ? o->gpu : "H100-SXM-80GB", &err)))
		return cli_error("--gpu: %s", err.msg);
	G = o->gpus_per_node ? (int)o->gpus_per_node : gpu->gpus_per_node;
	if (m.experts % o->ep)
		return cli_error("--ep %ld does not divide the %d experts of %s", o->ep,
				 m.experts, m.name);
	/* The trace reader (experts.c) opens with fopen(), which waits for
	 * ever on a FIFO: refuse what is not a regular file first. */
	if ((rc = cli_check_input("--trace", o->trace)))
		return rc;
	if (pipette_routing_read(o->trace, &m, &r, &err))
		return cli_error("--trace: %s", err.msg);
	snprintf(count, sizeof(count), "%ld", (o->ep + G - 1) / G);
	if (cli_expand_nodes(o->nodes ? o->nodes : count, &names, &n, &err)) {
		rc = cli_error("--nodes: %s", err.msg);
		goto out;
	}
	if ((long)n * G < o->ep) {
		rc = cli_error("--nodes: %d node(s) x %d GPUs hold fewer than --ep %ld ranks", n,
			       G, o->ep);
		goto out;
	}
	if (o->bandwidth && (rc = cli_check_input("--bandwidth", o->bandwidth)))
		goto out;
	if (o->bandwidth && pipette_bwcache_load(o->bandwidth, &bw, &err)) {
		rc = cli_error("--bandwidth: %s", err.msg);
		goto out;
	}
	if (!(cl = pipette_cluster_create((const char *const *)names, n, G, NULL, gpu, bw, 0,
					  &err))) {
		rc = cli_error("%s%s%s", o->bandwidth ? o->bandwidth : "",
			       o->bandwidth ? ": " : "", err.msg);
		goto out;
	}
	pipette_experts_opts_init(&eo, (int)o->ep, G);
	pipette_experts_default_weights(&m, cl, (int)o->ep, &eo);
	eo.time_limit_s = o->time_limit;
	eo.node_limit = o->node_limit;
	eo.solver = o->greedy ? PIPETTE_EXPERTS_GREEDY : PIPETTE_EXPERTS_AUTO;
	if (pipette_experts_solve(r, &eo, &res, &err)) {
		rc = cli_error("experts: %s", err.msg);
		goto out;
	}
	L = pipette_routing_layers(r);
	E = pipette_routing_experts(r);
	if (!(contig = malloc(sizeof(int) * (size_t)L * E))) {
		rc = cli_error("experts: out of memory");
		goto out;
	}
	pipette_experts_contiguous(L, E, (int)o->ep, contig);
	if ((rc = side_fill(&sc, r, &eo, contig, cl, pipette_experts_token_bytes(&m))) ||
	    (rc = side_fill(&sp, r, &eo, res.placement, cl, pipette_experts_token_bytes(&m))))
		goto out;
	nodes_used = (int)((o->ep + G - 1) / G);
	if (o->json)
		write_json(stdout, o, &m, r, &eo, &res, &sc, &sp, nodes_used);
	else
		write_table(stdout, o, &m, r, &eo, &res, &sc, &sp, nodes_used);
	rc = fflush(stdout) || ferror(stdout) ? cli_error("experts: writing the output failed")
					      : PIPETTE_EXIT_OK;
out:
	side_free(&sc);
	side_free(&sp);
	free(contig);
	pipette_experts_result_free(&res);
	pipette_cluster_destroy(cl);
	pipette_bwcache_destroy(bw);
	pipette_hostlist_free(names, n);
	pipette_routing_destroy(r);
	return rc;
}

int cmd_experts(int argc, char **argv)
{
	struct experts_opts o;
	int gen = argc > 1 && !strcmp(argv[1], "generate");
	int rc = parse(argc, argv, gen, &o);

	if (rc)
		return rc > 0 ? rc : PIPETTE_EXIT_OK;
	return gen ? generate(&o) : place(&o);
}
