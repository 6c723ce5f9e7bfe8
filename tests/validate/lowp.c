/* make validate, low precision and Blackwell: the 65 runs NVIDIA published
 * for Megatron-Bridge in the NeMo 25.11 and 26.02 containers (H100, B200,
 * B300, GB200 NVL72, GB300 NVL72; BF16, FP8 current scaling, MXFP8,
 * NVFP4), tests/data/stacks/megatron-bridge-lowp.csv, each row with its
 * source file and line and the recipe configuration it was matched to.
 * Each is estimated under the nemo stack (Megatron-Bridge's performance
 * recipes keep NeMo's: TP overlap, bf16 gradients, FP8 parameter gather)
 * with its own layout and recipe, on nodes of its system's GPUs.  Nothing
 * is fitted to these runs, so leave-one-out is the same figure. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/cluster.h"
#include "inputs/stack.h"
#include "validate.h"

#define COLS 34
#define GROUPS 32

/* One CSV line into fields (double quotes protect commas; "" is a quote). */
static int csv_split(char *line, char **f, int max)
{
	int n = 0;
	char *w = line, *r = line;

	while (n < max) {
		int quoted = *r == '"';

		f[n++] = w;
		if (quoted)
			r++;
		while (*r && (quoted || *r != ',') && *r != '\n') {
			if (quoted && *r == '"') {
				if (r[1] == '"') {
					*w++ = '"';
					r += 2;
					continue;
				}
				quoted = 0;
				r++;
				continue;
			}
			*w++ = *r++;
		}
		if (*r != ',') {
			*w = 0;
			break;
		}
		*w++ = 0;
		r++;
	}
	return n;
}

static int col(char **hdr, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(hdr[i], name))
			return i;
	return -1;
}

static int jint(struct json_object *o, const char *k, int dflt)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_int(v) : dflt;
}

/* The row's model: a preset, or its published dimensions. */
static int row_model(const char *spec, struct pipette_model *m)
{
	struct json_object *o = json_tokener_parse(spec), *v;
	int rc = -1;

	if (!o)
		return -1;
	memset(m, 0, sizeof(*m));
	if (json_object_object_get_ex(o, "preset", &v)) {
		rc = pipette_model_preset(json_object_get_string(v), m, NULL);
		m->mtp_layers = jint(o, "mtp", m->mtp_layers);
		json_object_put(o);
		return rc;
	}
	snprintf(m->name, sizeof(m->name), "%s-%dL-%d", jint(o, "experts", 0) ? "moe" : "llama",
		 jint(o, "layers", 0), jint(o, "hidden", 0));
	pipette_strlcpy(m->source, "tests/data/stacks/megatron-bridge-lowp.csv", sizeof(m->source));
	m->layers = jint(o, "layers", 0);
	m->hidden = jint(o, "hidden", 0);
	m->heads = jint(o, "heads", 0);
	m->kv_heads = jint(o, "kv_heads", m->heads);
	m->head_dim = jint(o, "head_dim", m->heads ? m->hidden / m->heads : 0);
	m->ffn = jint(o, "ffn", 0);
	m->ffn_kind = PIPETTE_FFN_SWIGLU;
	m->norm = PIPETTE_NORM_RMSNORM;
	m->vocab = jint(o, "vocab", 0);
	m->max_seq = 131072;
	m->experts = jint(o, "experts", 0);
	m->topk = jint(o, "topk", 0);
	m->expert_ffn = jint(o, "moe_ffn", 0);
	m->moe_layer_freq = 1;
	rc = pipette_model_validate(m, NULL);
	json_object_put(o);
	return rc;
}

/* "none", "unknown" (taken as none), "selective(default modules)",
 * "selective:mla_up_proj", "selective:layernorm+moe_act". */
static int row_recompute(const char *s, struct pipette_config *c)
{
	if (!strcmp(s, "none") || !strcmp(s, "unknown"))
		return 0;
	if (strncmp(s, "selective", 9))
		return -1;
	c->recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	if (s[9] == ':') {
		char mods[64];

		pipette_strlcpy(mods, s + 10, sizeof(mods));
		for (char *p = mods; *p; p++)
			if (*p == '+')
				*p = ',';
		return pipette_recompute_modules_parse(mods, &c->recompute_modules, NULL);
	}
	return 0;
}

struct group {
	char name[48];
	int n;
	double abs, sum;
};

static void add(struct group *g, int *ng, const char *name, double e)
{
	int i;

	for (i = 0; i < *ng && strcmp(g[i].name, name); i++)
		;
	if (i == *ng) {
		if (*ng == GROUPS)
			return;
		pipette_strlcpy(g[i].name, name, sizeof(g[i].name));
		(*ng)++;
	}
	g[i].n++;
	g[i].abs += fabs(e);
	g[i].sum += e;
}

static struct pipette_cluster *nodes_of(int world, const struct pipette_gpu_spec *g)
{
	int G = world < g->gpus_per_node ? world : g->gpus_per_node, n = (world + G - 1) / G;
	char **names = calloc((size_t)n, sizeof(char *));
	struct pipette_cluster *cl;

	for (int i = 0; i < n; i++) {
		names[i] = malloc(16);
		snprintf(names[i], 16, "n%d", i);
	}
	cl = pipette_cluster_create((const char *const *)names, n, G, NULL, g, NULL, 0, NULL);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return cl;
}

static int estimate_row(struct pipette_timer *t, char **f, char **hdr, int nh,
			const struct pipette_stack *st, double *pred, char *why, size_t wlen)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_time tm;
	struct pipette_err err;
	struct pipette_cluster *cl;
	const struct pipette_gpu_spec *g = pipette_gpu_lookup(f[col(hdr, nh, "gpu")], NULL);
	int rc;

	if (!g || row_model(f[col(hdr, nh, "model")], &m))
		return snprintf(why, wlen, "model or GPU not known"), -1;
	if (atoi(f[col(hdr, nh, "fsdp")]))
		return snprintf(why, wlen, "Megatron-FSDP with CPU offload: not modelled"), -1;
	pipette_config_init(&c);
	c.stack = st;
	c.tp = atoi(f[col(hdr, nh, "tp")]);
	c.pp = atoi(f[col(hdr, nh, "pp")]);
	c.cp = atoi(f[col(hdr, nh, "cp")]);
	c.ep = atoi(f[col(hdr, nh, "ep")]);
	c.etp = atoi(f[col(hdr, nh, "etp")]);
	c.dp = atoi(f[col(hdr, nh, "dp")]);
	c.micro_batch = atoi(f[col(hdr, nh, "mbs")]);
	c.global_batch = atol(f[col(hdr, nh, "gbs")]);
	c.seq_len = atol(f[col(hdr, nh, "seq")]);
	c.sequence_parallel = atoi(f[col(hdr, nh, "sp")]);
	c.distributed_optimizer = atoi(f[col(hdr, nh, "dopt")]);
	c.bf16_first = atoi(f[col(hdr, nh, "first")]);
	c.bf16_last = atoi(f[col(hdr, nh, "last")]);
	if (atoi(f[col(hdr, nh, "vpp")]) > 1) {
		c.schedule = PIPETTE_SCHED_INTERLEAVED;
		c.vpp = atoi(f[col(hdr, nh, "vpp")]);
	}
	/* Layers that do not divide over the virtual stages: the recipes
	 * count the embedding and the loss as a layer each of the first and
	 * last virtual stage (Megatron-Core's account_for_embedding_in_
	 * pipeline_split and account_for_loss_in_pipeline_split), as
	 * pipette's uneven first and last stages. */
	{
		int vs = c.pp * pipette_config_chunks(&c);

		if (vs > 1 && m.layers % vs && (m.layers + 2) % vs == 0)
			c.first_stage_layers = c.last_stage_layers = (m.layers + 2) / vs - 1;
	}
	if (row_recompute(f[col(hdr, nh, "rec")], &c))
		return snprintf(why, wlen, "recompute '%.40s' unknown", f[col(hdr, nh, "rec")]), -1;
	if (pipette_precision_parse(f[col(hdr, nh, "precision")], &c.precision, &err) ||
	    pipette_stack_precision_check(st, g, c.precision, &err) ||
	    pipette_config_check(&m, &c, &err))
		return snprintf(why, wlen, "%.180s", err.msg), -1;
	if (!(cl = nodes_of(pipette_config_world(&c), g)))
		return snprintf(why, wlen, "no cluster"), -1;
	rc = pipette_time_estimate(t, &m, g, &c, cl, NULL, 0, &tm, &err);
	pipette_cluster_destroy(cl);
	if (rc)
		return snprintf(why, wlen, "%.180s", err.msg), -1;
	*pred = tm.iteration_s;
	return 0;
}

int validate_lowp(struct pipette_timer *t, const char *path)
{
	FILE *fp = fopen(path, "r");
	char hline[2048], line[4096], *hdr[COLS + 1], *f[COLS + 1], why[200];
	struct group sys[GROUPS], prec[GROUPS];
	int nh, ns = 0, np = 0, skipped = 0, n = 0;
	double all_abs = 0, all_sum = 0;
	const struct pipette_stack *st = pipette_stack_get(PIPETTE_STACK_NEMO);

	if (!fp || !fgets(hline, sizeof(hline), fp)) {
		fprintf(stderr, "validate: %s: cannot read\n", path);
		if (fp)
			fclose(fp);
		return 1;
	}
	nh = csv_split(hline, hdr, COLS);
	printf("Low precision and Blackwell: Megatron-Bridge runs NVIDIA published (%s), "
	       "stack nemo, nothing fitted\n", path);
	printf("%-34s %-12s %-13s %9s %9s %8s\n", "run", "system", "precision", "measured",
	       "predicted", "error");
	while (fgets(line, sizeof(line), fp)) {
		double pred, meas, e;
		char key[48];

		if (csv_split(line, f, COLS) != nh)
			continue;
		meas = atof(f[col(hdr, nh, "iter_s")]);
		if (estimate_row(t, f, hdr, nh, st, &pred, why, sizeof(why))) {
			printf("%-34s %-12s %-13s %9.2f %9s  skipped: %.70s\n", f[0],
			       f[col(hdr, nh, "system")], f[col(hdr, nh, "precision")], meas, "-", why);
			skipped++;
			continue;
		}
		e = pred / meas - 1;
		printf("%-34s %-12s %-13s %9.2f %9.2f %+7.1f%%\n", f[0], f[col(hdr, nh, "system")],
		       f[col(hdr, nh, "precision")], meas, pred, 100 * e);
		add(sys, &ns, f[col(hdr, nh, "system")], e);
		snprintf(key, sizeof(key), "%s %s", f[col(hdr, nh, "system")],
			 f[col(hdr, nh, "precision")]);
		add(prec, &np, key, e);
		all_abs += fabs(e);
		all_sum += e;
		n++;
	}
	fclose(fp);
	printf("%-26s %4s %8s %8s   (leave-one-out: the same, nothing is fitted)\n", "group",
	       "runs", "MAPE", "bias");
	for (int i = 0; i < ns; i++)
		printf("%-26s %4d %7.1f%% %+7.1f%%\n", sys[i].name, sys[i].n,
		       100 * sys[i].abs / sys[i].n, 100 * sys[i].sum / sys[i].n);
	for (int i = 0; i < np; i++)
		printf("  %-24s %4d %7.1f%% %+7.1f%%\n", prec[i].name, prec[i].n,
		       100 * prec[i].abs / prec[i].n, 100 * prec[i].sum / prec[i].n);
	printf("all %d runs: MAPE %.1f%%, bias %+.1f%%; %d skipped (not a target yet: the "
	       "NVLink domains of the NVL72 racks are not modelled)\n\n", n,
	       n ? 100 * all_abs / n : 0, n ? 100 * all_sum / n : 0, skipped);
	return 0;
}
