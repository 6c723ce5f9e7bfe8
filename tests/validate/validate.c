/* make validate: predicted vs published iteration time on every calibration
 * case (Narayanan et al. SC'21 Table 1, Korthikanti et al. MLSys'23
 * Table 5, the zero-bubble paper's Tables 4 and 6, llm-foundry's H100
 * runs; each table, its upstream source and the derived columns are in
 * tests/validate/README.md), with the error per case and the MAPE; then
 * the per-layer compute against layers timed on an H100 and an H200
 * (tests/validate/gpu/).  Uses the same library calls as
 * `pipette estimate`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "inputs/cluster.h"
#include "inputs/config.h"
#include "inputs/hardware.h"
#include "estimate/memory.h"
#include "inputs/model.h"
#include "inputs/stack.h"
#include "estimate/timing.h"
#include "learn/kernelfit.h"
#include "validate.h"

struct gpt_case {
	const char *name;
	int heads, hidden, layers, tp, pp, dp, vpp, mb;
	long gbs;
	int seq, vocab;
	enum pipette_recompute rc;
	int sp;
	double published_s;	/* iteration time */
	const char *source;
};

/* Narayanan et al. Table 1: all runs full recompute; the published figure
 * is TFLOP/s, turned into an iteration time with 96 BsLh^2 (1 + s/6h +
 * V/16Lh) (README.md, "implied s").  Korthikanti et al. Table 5: measured
 * end-to-end iteration times. */
static const struct gpt_case cases[] = {
	{ "1.7B", 24, 2304, 24, 1, 1, 32, 1, 16, 512, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 3.53, "Narayanan T1" },
	{ "3.6B", 32, 3072, 30, 2, 1, 32, 1, 16, 512, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 3.70, "Narayanan T1" },
	{ "7.5B", 32, 4096, 36, 4, 1, 32, 1, 16, 512, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 3.70, "Narayanan T1" },
	{ "18B", 48, 6144, 40, 8, 1, 32, 1, 8, 1024, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 9.40, "Narayanan T1" },
	{ "39B", 64, 8192, 48, 8, 2, 32, 1, 4, 1536, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 14.45, "Narayanan T1" },
	{ "76B", 80, 10240, 60, 8, 4, 32, 3, 2, 1792, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 16.06, "Narayanan T1" },
	{ "145B", 96, 12288, 80, 8, 8, 24, 2, 2, 2304, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 24.82, "Narayanan T1" },
	{ "310B", 128, 16384, 96, 8, 16, 15, 2, 1, 2160, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 37.61, "Narayanan T1" },
	{ "530B", 128, 20480, 105, 8, 35, 9, 3, 1, 2520, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 54.08, "Narayanan T1" },
	{ "1T", 160, 25600, 128, 8, 64, 6, 1, 1, 3072, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 102.63, "Narayanan T1" },
	{ "22B full", 64, 6144, 48, 8, 1, 1, 1, 4, 4, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 1.42, "Korthikanti T5" },
	{ "175B full", 96, 12288, 96, 8, 8, 1, 3, 1, 64, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 18.13, "Korthikanti T5" },
	{ "530B full", 128, 20480, 105, 8, 35, 1, 3, 1, 280, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 49.05, "Korthikanti T5" },
	{ "1T full", 160, 25600, 128, 8, 64, 1, 1, 1, 512, 2048, 51200, PIPETTE_RECOMPUTE_FULL, 0, 94.42, "Korthikanti T5" },
	{ "22B sp+sel", 64, 6144, 48, 8, 1, 1, 1, 4, 4, 2048, 51200, PIPETTE_RECOMPUTE_SELECTIVE, 1, 1.10, "Korthikanti T5" },
	{ "175B sp+sel", 96, 12288, 96, 8, 8, 1, 3, 1, 64, 2048, 51200, PIPETTE_RECOMPUTE_SELECTIVE, 1, 13.75, "Korthikanti T5" },
	{ "530B sp+sel", 128, 20480, 105, 8, 35, 1, 3, 1, 280, 2048, 51200, PIPETTE_RECOMPUTE_SELECTIVE, 1, 37.83, "Korthikanti T5" },
	{ "1T sp+sel", 160, 25600, 128, 8, 64, 1, 1, 1, 512, 2048, 51200, PIPETTE_RECOMPUTE_SELECTIVE, 1, 71.49, "Korthikanti T5" },
};

/* The zero-bubble paper (Qi et al., ICLR'24, README.md), pure PP on A100
 * 80G, seq 1024, first and last stage one layer fewer; samples per GPU per
 * second for 1F1B, ZB-1p (our ZB-H1: the same memory limit p*M_B) and
 * ZB-V (our V-ZB). */
struct zb_case {
	const char *name;
	int layers, heads, hidden, pp, mb;
	long m;
	double sps_1f1b, sps_zb1p, sps_zbv;	/* 0 = not reported */
	const char *source;
};

static const struct zb_case zb_cases[] = {
	{ "1.5B", 22, 24, 2304, 8, 6, 24, 11.8, 12.9, 0, "ZB T4" },
	{ "1.5B", 22, 24, 2304, 8, 6, 32, 12.5, 13.4, 0, "ZB T4" },
	{ "1.5B", 22, 24, 2304, 8, 6, 64, 13.6, 14.2, 0, "ZB T4" },
	{ "6.2B", 30, 32, 4096, 8, 3, 24, 3.50, 3.88, 0, "ZB T4" },
	{ "6.2B", 30, 32, 4096, 8, 3, 32, 3.70, 4.00, 0, "ZB T4" },
	{ "6.2B", 30, 32, 4096, 8, 3, 64, 4.03, 4.20, 0, "ZB T4" },
	{ "14.6B", 46, 40, 5120, 16, 1, 48, 1.40, 1.61, 0, "ZB T4" },
	{ "14.6B", 46, 40, 5120, 16, 1, 64, 1.49, 1.67, 0, "ZB T4" },
	{ "14.6B", 46, 40, 5120, 16, 1, 128, 1.64, 1.76, 0, "ZB T4" },
	{ "28.3B", 62, 48, 6144, 32, 1, 96, 0.76, 0.87, 0, "ZB T4" },
	{ "28.3B", 62, 48, 6144, 32, 1, 128, 0.80, 0.90, 0, "ZB T4" },
	{ "28.3B", 62, 48, 6144, 32, 1, 256, 0.88, 0.96, 0, "ZB T4" },
	{ "6.2B", 30, 32, 4096, 16, 6, 48, 3.38, 3.87, 4.15, "ZB T6" },
	{ "6.2B", 30, 32, 4096, 16, 6, 64, 3.57, 4.00, 4.21, "ZB T6" },
	{ "6.2B", 30, 32, 4096, 16, 6, 128, 3.91, 4.29, 4.35, "ZB T6" },
	{ "14.6B", 46, 40, 5120, 24, 2, 72, 1.52, 1.72, 1.85, "ZB T6" },
	{ "14.6B", 46, 40, 5120, 24, 2, 96, 1.61, 1.78, 1.88, "ZB T6" },
	{ "14.6B", 46, 40, 5120, 24, 2, 192, 1.76, 1.89, 1.93, "ZB T6" },
	{ "28.3B", 62, 48, 6144, 32, 2, 96, 0.82, 0.94, 1.01, "ZB T6" },
	{ "28.3B", 62, 48, 6144, 32, 2, 128, 0.87, 0.97, 1.02, "ZB T6" },
	{ "28.3B", 62, 48, 6144, 32, 2, 256, 0.95, 1.03, 1.06, "ZB T6" },
};

/* MPT models trained by llm-foundry on H100 80GB (its benchmarking
 * README @061f2c7c, reference rows of tests/data/stacks/composer-fsdp.md
 * §5.2), BF16, data parallel only with Composer's FSDP (FSDP1 FULL_SHARD,
 * mixed precision DEFAULT, AdamW): estimated on the composer-fsdp stack,
 * every GPU in one shard group, parameters gathered again for backward.
 * MPT (composer-fsdp.md §1.3-1.4): GELU MLP of 4h, biases, LayerNorm,
 * multi-head attention, tied embeddings, vocabulary 50368, triton
 * FlashAttention; the 30b has 56 heads. */
struct mpt_case {
	const char *name;
	int d_model, layers, heads, seq, gpus, mb;
	long gbs;
	int act_ckpt;
	double tokens_per_gpu_s;
};

static const struct mpt_case mpt_cases[] = {
	{ "70b", 8192, 80, 64, 2048, 64, 8, 2048, 1, 1039 },
	{ "30b", 7168, 48, 56, 2048, 32, 14, 1344, 1, 2308 },
	{ "13b", 5120, 40, 40, 2048, 64, 2, 128, 0, 4800 },
	{ "7b", 4096, 32, 32, 2048, 8, 6, 48, 0, 10643 },
	{ "7b", 4096, 32, 32, 8192, 8, 8, 128, 1, 6935 },
	{ "1b", 2048, 24, 16, 2048, 64, 20, 1280, 0, 44402 },
};

static void gpt_model(struct pipette_model *m, const char *name, int layers, int hidden,
		      int heads, int vocab, int seq)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "gpt-%s", name);
	m->layers = layers;
	m->hidden = hidden;
	m->heads = m->kv_heads = heads;
	m->head_dim = hidden / heads;
	m->ffn = 4L * hidden;
	m->ffn_kind = PIPETTE_FFN_GELU;
	m->norm = PIPETTE_NORM_LAYERNORM;
	m->bias = 1;
	m->vocab = vocab;
	m->tied_embeddings = 1;
	m->max_seq = seq;
	m->moe_layer_freq = 1;
}

struct pipette_cluster *validate_cluster(int world, const struct pipette_gpu_spec *g, int per_node)
{
	int G = world < per_node ? world : per_node, n = (world + G - 1) / G, i;
	char **names = calloc((size_t)n, sizeof(char *));
	struct pipette_cluster *cl;

	for (i = 0; i < n; i++) {
		names[i] = malloc(16);
		snprintf(names[i], 16, "n%d", i);
	}
	cl = pipette_cluster_create((const char *const *)names, n, G, NULL, g, NULL, 0, NULL);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return cl;
}

int validate_estimate(struct pipette_timer *t, const struct pipette_model *m,
		      const struct pipette_gpu_spec *g, const struct pipette_config *c,
		      struct pipette_time *out)
{
	struct pipette_err err;
	struct pipette_cluster *cl;
	int rc;

	if (pipette_config_check(m, c, &err)) {
		fprintf(stderr, "validate: %s: %s\n", m->name, err.msg);
		return -1;
	}
	cl = validate_cluster(pipette_config_world(c), g, 8);
	rc = pipette_time_estimate(t, m, g, c, cl, NULL, 0, out, &err);
	if (rc)
		fprintf(stderr, "validate: %s: %s\n", m->name, err.msg);
	pipette_cluster_destroy(cl);
	return rc;
}

/* Per-layer compute (F and F+B+W, tp = 1 on the per-GPU shapes) of a
 * model with `layers` layers: the difference of 2 and 1 layers cancels the
 * embedding and the loss. */
static int layer_compute(struct pipette_timer *t, const struct pipette_gpu_spec *g,
			 struct json_object *r, double *f, double *fbw)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_time a, b;
	struct json_object *v;

#define GETI(key) (json_object_object_get_ex(r, key, &v) ? json_object_get_int(v) : 0)
	pipette_config_init(&c);
	c.seq_len = GETI("seq");
	c.micro_batch = c.global_batch = GETI("micro_batch");
	gpt_model(&m, json_object_object_get_ex(r, "name", &v) ? json_object_get_string(v) : "?",
		  2, GETI("hidden"), GETI("q_heads"), 32000, (int)c.seq_len);
	m.kv_heads = GETI("kv_heads");
	m.ffn = GETI("ffn");
#undef GETI
	m.head_dim = 128;	/* layers.py's head size, whatever the shard's width */
	if (json_object_object_get_ex(r, "swiglu", &v) && json_object_get_boolean(v)) {
		m.ffn_kind = PIPETTE_FFN_SWIGLU;
		m.norm = PIPETTE_NORM_RMSNORM;
		m.bias = 0;
	}
	if (validate_estimate(t, &m, g, &c, &a))
		return -1;
	m.layers = 1;
	if (validate_estimate(t, &m, g, &c, &b))
		return -1;
	*f = a.stage_f_s - b.stage_f_s;
	*fbw = *f + (a.stage_b_s + a.stage_w_s) - (b.stage_b_s + b.stage_w_s);
	return 0;
}

/* The transformer layers that tests/validate/gpu/layers.py timed with
 * torch.compile on one GPU (per-GPU shapes of TP shards), against the
 * model's per-layer compute.  The model stands for a whole training step
 * (its ceiling carries FRAMEWORK_SHARE, hardware.c), so an isolated,
 * compiled layer runs faster: the ratio says by how much, per shape. */
static int layer_check(struct pipette_timer *t, const char *file)
{
	FILE *fp = fopen(file, "r");
	char line[2048];
	const struct pipette_gpu_spec *g = NULL;
	int failures = 0;

	if (!fp) {
		printf("%s: not found (run from the build tree of a source checkout)\n", file);
		return 0;
	}
	while (fgets(line, sizeof(line), fp)) {
		struct json_object *r = json_tokener_parse(line), *v;
		double f, fbw, mf, mfbw;

		if (!r)
			continue;
		if (json_object_object_get_ex(r, "gpu", &v)) {
			const char *name = json_object_get_string(v);

			g = pipette_gpu_lookup(strstr(name, "H200") ? "h200" : "h100", NULL);
			printf("%s (%s)\n", name, file);
			printf("%-24s %9s %9s %9s %9s %6s %6s\n", "layer (per GPU)", "F model",
			       "F meas", "FBW model", "FBW meas", "F", "FBW");
		} else if (g && json_object_object_get_ex(r, "fwd_ms_per_layer", &v)) {
			mf = json_object_get_double(v);
			json_object_object_get_ex(r, "fwd_bwd_ms_per_layer", &v);
			mfbw = json_object_get_double(v);
			if (layer_compute(t, g, r, &f, &fbw)) {
				failures++;
			} else {
				json_object_object_get_ex(r, "name", &v);
				printf("%-24s %7.3fms %7.3fms %7.3fms %7.3fms %6.2f %6.2f\n",
				       json_object_get_string(v), 1e3 * f, mf, 1e3 * fbw, mfbw,
				       mf / (1e3 * f), mfbw / (1e3 * fbw));
			}
		}
		json_object_put(r);
	}
	fclose(fp);
	printf("(measured / model)\n\n");
	return failures;
}

/* Absolute relative errors of the cases printed: their mean (MAPE) and the
 * worst. */
struct errors {
	double sum, worst;
	int n;
	double signed_sum;	/* for the bias */
};

#define MAX_SUMMARY 40
static struct {
	char dataset[64], stack[16], gpu[24];
	int n;
	double mape, bias, loo;
} summary[MAX_SUMMARY];
static int nsummary;

void validate_summary(const char *dataset, const char *stack, const char *gpu, int n,
		      double mape, double bias, double loo)
{
	if (nsummary == MAX_SUMMARY || n < 1)
		return;
	snprintf(summary[nsummary].dataset, sizeof(summary[0].dataset), "%s", dataset);
	snprintf(summary[nsummary].stack, sizeof(summary[0].stack), "%s", stack);
	snprintf(summary[nsummary].gpu, sizeof(summary[0].gpu), "%s", gpu);
	summary[nsummary].n = n;
	summary[nsummary].mape = mape;
	summary[nsummary].bias = bias;
	summary[nsummary].loo = loo;
	nsummary++;
}

/* Every dataset's line, against issue 26's bar: no MAPE over 8%, no bias
 * beyond 5%.  Informational: each section keeps its own targets. */
static void print_summary(void)
{
	char b[16], l[24];

	printf("Every dataset the project holds: MAPE, bias and leave-one-out (bar: MAPE <= 8%%, "
	       "|bias| <= 5%%; '=': nothing fitted on it; kernels: LOO is the worst model left out)\n");
	printf("%-46s %-15s %-15s %4s %7s %7s %9s\n", "dataset", "stack", "GPU", "n", "MAPE",
	       "bias", "LOO MAPE");
	for (int i = 0; i < nsummary; i++) {
		int over = summary[i].mape > 0.08 ||
			   (!isnan(summary[i].bias) && fabs(summary[i].bias) > 0.05);

		if (isnan(summary[i].bias))
			snprintf(b, sizeof(b), "-");
		else
			snprintf(b, sizeof(b), "%+.1f%%", 100 * summary[i].bias);
		if (summary[i].loo < 0)
			snprintf(l, sizeof(l), "= %.1f%%", 100 * summary[i].mape);
		else
			snprintf(l, sizeof(l), "%.1f%%", 100 * summary[i].loo);
		printf("%-46s %-15s %-15s %4d %6.1f%% %7s %9s%s\n", summary[i].dataset,
		       summary[i].stack, summary[i].gpu, summary[i].n, 100 * summary[i].mape, b, l,
		       over ? "  over" : "");
	}
	printf("\n");
}

int validate_plan_rank(const struct pipette_plan *plan, const struct pipette_config *c)
{
	int i;

	for (i = 0; i < pipette_plan_ranked_count(plan); i++) {
		const struct pipette_config *e = pipette_plan_ranked_config(plan, i);

		if (e->tp == c->tp && e->pp == c->pp && e->dp == c->dp && e->cp == c->cp &&
		    pipette_config_chunks(e) == pipette_config_chunks(c) &&
		    e->micro_batch == c->micro_batch && e->schedule == c->schedule &&
		    e->recompute == c->recompute && e->sequence_parallel == c->sequence_parallel &&
		    e->distributed_optimizer == c->distributed_optimizer &&
		    !e->first_stage_layers && !e->last_stage_layers)
			return i + 1;
	}
	return 0;
}

static double relative_error(struct errors *e, double predicted, double published)
{
	double r = predicted / published - 1;

	e->sum += fabs(r);
	e->signed_sum += r;
	if (fabs(r) > e->worst)
		e->worst = fabs(r);
	e->n++;
	return r;
}

static double mape(const struct errors *e)
{
	return e->n ? 100 * e->sum / e->n : 0;
}

static double bias(const struct errors *e)
{
	return e->n ? e->signed_sum / e->n : 0;
}

/* One A100 case on g: its predicted iteration time in *out; -1 when the
 * estimate fails. */
static int gpt_estimate(struct pipette_timer *t, const struct pipette_gpu_spec *g,
			const struct gpt_case *k, double *out)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_time tm;

	gpt_model(&m, k->name, k->layers, k->hidden, k->heads, k->vocab, k->seq);
	pipette_config_init(&c);
	c.tp = k->tp;
	c.pp = k->pp;
	c.dp = k->dp;
	c.vpp = k->vpp;
	c.schedule = k->vpp > 1 ? PIPETTE_SCHED_INTERLEAVED : PIPETTE_SCHED_1F1B;
	c.micro_batch = k->mb;
	c.global_batch = k->gbs;
	c.seq_len = k->seq;
	c.recompute = k->rc;
	c.sequence_parallel = k->sp;
	c.attention = PIPETTE_ATTN_UNFUSED;	/* Megatron of 2021-22 */
	if (validate_estimate(t, &m, g, &c, &tm))
		return -1;
	*out = tm.iteration_s;
	return 0;
}

/* The A100's end-to-end share (hardware.c gemm_eff_max) was fitted on
 * these cases: refit it on a grid of 0.005, on all of them and leaving
 * each out in turn; *fit is the share, *loo the leave-one-out MAPE. */
#define A100_GRID 41
#define A100_SHARE(j) (0.60 + 0.005 * (j))
#define NCASES (sizeof(cases) / sizeof(cases[0]))
static int a100_share_fit(struct pipette_timer *t, const struct pipette_gpu_spec *a100,
			  double *fit, double *loo)
{
	static double pred[NCASES][A100_GRID];
	struct pipette_gpu_spec g = *a100;

	for (int j = 0; j < A100_GRID; j++) {
		g.gemm_eff_max = A100_SHARE(j);
		for (size_t i = 0; i < NCASES; i++)
			if (gpt_estimate(t, &g, &cases[i], &pred[i][j]))
				return -1;
	}
	*loo = 0;
	for (size_t skip = 0; skip <= NCASES; skip++) {
		double best = HUGE_VAL;
		int bj = 0;

		for (int j = 0; j < A100_GRID; j++) {
			double sum = 0;

			for (size_t i = 0; i < NCASES; i++)
				if (i != skip)
					sum += fabs(pred[i][j] / cases[i].published_s - 1);
			if (sum < best - 1e-12) {
				best = sum;
				bj = j;
			}
		}
		if (skip < NCASES)
			*loo += fabs(pred[skip][bj] / cases[skip].published_s - 1) / NCASES;
		else
			*fit = A100_SHARE(bj);
	}
	return 0;
}

/* The A100 iteration times (cases[]).  Returns the failed estimates. */
static int check_gpt(struct pipette_timer *t, const struct pipette_gpu_spec *a100)
{
	struct errors err = { 0 };
	int failures = 0;
	double fit = 0, loo = -1;
	size_t i;

	printf("A100 iteration time, predicted vs published (Narayanan et al. SC'21 T1, "
	       "Korthikanti et al. MLSys'23 T5)\n");
	printf("%-12s %-15s %5s %4s %4s %3s %10s %10s %8s\n", "case", "source", "tp", "pp",
	       "dp", "v", "published", "predicted", "error");
	for (i = 0; i < NCASES; i++) {
		const struct gpt_case *k = &cases[i];
		double it, e;

		if (gpt_estimate(t, a100, k, &it)) {
			failures++;
			continue;
		}
		e = relative_error(&err, it, k->published_s);
		printf("%-12s %-15s %5d %4d %4d %3d %9.2fs %9.2fs %+7.1f%%\n", k->name, k->source,
		       k->tp, k->pp, k->dp, k->vpp, k->published_s, it, 100 * e);
	}
	if (a100_share_fit(t, a100, &fit, &loo))
		failures++;
	printf("MAPE %.1f%% over %d cases, worst %.1f%% (targets: <= 10%%, no case > 20%%); "
	       "the A100 share refitted here %.3f (hardware.c %.3f), leave-one-out MAPE %.1f%%\n\n",
	       mape(&err), err.n, 100 * err.worst, fit, a100->gemm_eff_max, 100 * loo);
	validate_summary("A100 Megatron papers (Narayanan, Korthikanti)", "megatron-2022",
			 a100->name, err.n, mape(&err) / 100, bias(&err), loo);
	return failures;
}

/* Samples per GPU per second of zero-bubble case k under one schedule:
 * *sps, or -1 when the estimate fails. */
static int zb_samples(struct pipette_timer *t, const struct pipette_gpu_spec *a100,
		      const struct zb_case *k, enum pipette_schedule_kind kind, double *sps)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_time tm;
	int vstages = k->pp * (kind == PIPETTE_SCHED_V_ZB ? 2 : 1);
	int fl = (k->layers + 2) / vstages - 1;

	gpt_model(&m, k->name, k->layers, k->hidden, k->heads, 51200, 1024);
	pipette_config_init(&c);
	c.pp = k->pp;
	c.micro_batch = k->mb;
	c.global_batch = k->m * k->mb;
	c.seq_len = 1024;
	c.attention = PIPETTE_ATTN_UNFUSED;	/* their Megatron fork */
	c.schedule = kind;
	/* "First and last stage carry one layer fewer" (compensating for
	 * embedding and loss); for ZB-V the first and last of the 2p chunks,
	 * which with these layer counts (2p - 2) leaves them empty. */
	c.first_stage_layers = c.last_stage_layers = fl > 0 ? fl : -1;
	if (validate_estimate(t, &m, a100, &c, &tm))
		return -1;
	*sps = (double)c.global_batch / tm.iteration_s / k->pp;
	return 0;
}

/* The zero-bubble schedules (zb_cases[]): throughput, and whether the
 * published order of the schedules is reproduced.  Returns the failed
 * estimates. */
static int check_zb(struct pipette_timer *t, const struct pipette_gpu_spec *a100)
{
	static const enum pipette_schedule_kind kinds[3] = {
		PIPETTE_SCHED_1F1B, PIPETTE_SCHED_ZB_H1, PIPETTE_SCHED_V_ZB };
	int order_ok = 0, order_total = 0, failures = 0;
	struct errors err = { 0 };
	size_t i;

	printf("Zero-bubble schedules, pure PP (Qi et al. ICLR'24 T4, T6): samples/GPU/s, "
	       "published -> predicted\n");
	printf("%-6s %4s %3s %4s  %-20s %-20s %-20s %s\n", "model", "pp", "b", "m", "1F1B",
	       "ZB-1p (zb-h1)", "ZB-V (v-zb)", "order");
	for (i = 0; i < sizeof(zb_cases) / sizeof(zb_cases[0]); i++) {
		const struct zb_case *k = &zb_cases[i];
		const double pub[3] = { k->sps_1f1b, k->sps_zb1p, k->sps_zbv };
		double pred[3] = { 0, 0, 0 };
		char cell[3][32];
		int j, ok = 1;

		for (j = 0; j < 3; j++) {
			snprintf(cell[j], sizeof(cell[j]), "-");
			if (!pub[j])
				continue;
			if (zb_samples(t, a100, k, kinds[j], &pred[j])) {
				failures++;
				continue;
			}
			snprintf(cell[j], sizeof(cell[j]), "%5.2f -> %5.2f", pub[j], pred[j]);
			relative_error(&err, pred[j], pub[j]);
		}
		for (j = 0; j < 2; j++)
			if (pub[j + 1] && pred[j + 1]) {
				int pub_faster = pub[j + 1] > pub[j];
				int pred_faster = pred[j + 1] > pred[j];

				ok &= pub_faster == pred_faster;
			}
		order_total++;
		order_ok += ok;
		printf("%-6s %4d %3d %4ld  %-20s %-20s %-20s %s\n", k->name, k->pp, k->mb, k->m,
		       cell[0], cell[1], cell[2], ok ? "ok" : "WRONG");
	}
	printf("schedule ordering reproduced on %d of %d cases; throughput MAPE %.1f%%, bias "
	       "%+.1f%% over %d figures\n\n", order_ok, order_total, mape(&err), 100 * bias(&err),
	       err.n);
	validate_summary("zero-bubble schedules (Qi et al. T4, T6)", "megatron-2022", a100->name,
			 err.n, mape(&err) / 100, bias(&err), -1);
	return failures;
}

/* The H100 MPT throughputs (mpt_cases[]).  Returns the failed estimates. */
/* One MPT run on the composer-fsdp stack: its predicted tokens/s per GPU
 * in *out; -1 when the estimate fails. */
static int mpt_estimate_on(struct pipette_timer *t, const struct pipette_gpu_spec *h100,
			   const struct pipette_stack *st, const struct mpt_case *k, double *out)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_time tm;

	gpt_model(&m, k->name, k->layers, k->d_model, k->heads, 50368, k->seq);
	pipette_config_init(&c);
	c.stack = st;
	c.dp = c.dp_shard = k->gpus;
	c.reshard = PIPETTE_RESHARD_ALWAYS;
	c.micro_batch = k->mb;
	c.global_batch = k->gbs;
	c.seq_len = k->seq;
	c.recompute = k->act_ckpt ? PIPETTE_RECOMPUTE_FULL : PIPETTE_RECOMPUTE_NONE;
	if (validate_estimate(t, &m, h100, &c, &tm))
		return -1;
	*out = (double)k->gbs * k->seq / tm.iteration_s / k->gpus;
	return 0;
}

static int mpt_estimate(struct pipette_timer *t, const struct pipette_gpu_spec *h100,
			const struct mpt_case *k, double *out)
{
	return mpt_estimate_on(t, h100, pipette_stack_get(PIPETTE_STACK_COMPOSER_FSDP), k, out);
}

static int check_mpt(struct pipette_timer *t, const struct pipette_gpu_spec *h100)
{
	struct errors err = { 0 };
	int failures = 0;
	size_t i;

	printf("H100 throughput, llm-foundry MPT, FSDP data parallel (its benchmarking "
	       "README): tokens/s per GPU\n");
	printf("%-5s %6s %5s %4s %5s %10s %10s %8s\n", "model", "seq", "gpus", "mb", "ckpt",
	       "published", "predicted", "error");
	for (i = 0; i < sizeof(mpt_cases) / sizeof(mpt_cases[0]); i++) {
		const struct mpt_case *k = &mpt_cases[i];
		double pred, e;

		if (mpt_estimate(t, h100, k, &pred)) {
			failures++;
			continue;
		}
		e = relative_error(&err, pred, k->tokens_per_gpu_s);
		printf("%-5s %6d %5d %4d %5s %10.0f %10.0f %+7.1f%%\n", k->name, k->seq, k->gpus,
		       k->mb, k->act_ckpt ? "full" : "none", k->tokens_per_gpu_s, pred, 100 * e);
	}
	printf("MAPE %.1f%% over %d cases, worst %.1f%% (composer-fsdp stack: FSDP's gathers "
	       "and reduce-scatters on every micro-batch; its attention kernel's share of peak is "
	       "fitted on all 52 rows of the benchmark, below)\n\n", mape(&err), err.n,
	       100 * err.worst);
	return failures;
}

/* Every H100 BF16 row of the benchmark (composer-fsdp.md §5.2, 52 rows:
 * sequences from 512 to 65536, 8 to 64 GPUs), with the MPT sizes of its
 * §1.3 table, read from that file.  Printed as a wider check of the same
 * stack; the target is the six reference rows above. */
struct mpt_size {
	char name[16];
	int d, heads, layers;
};

static int mpt_sizes(FILE *f, struct mpt_size *sz, int max)
{
	char line[1024];
	int n = 0;

	rewind(f);
	while (fgets(line, sizeof(line), f) && n < max)
		if (sscanf(line, "| %15[0-9a-z] | %d | %d | %d |", sz[n].name, &sz[n].d,
			   &sz[n].heads, &sz[n].layers) == 4)
			n++;
	return n;
}

/* MPT's attention is the Triton port of the first FlashAttention (stack.c
 * FA1_TRITON_UTILIZATION): its share of peak, refitted on the benchmark's
 * rows on a grid of 0.005 with leave-one-out.  pred[i][j]: row i at share
 * MPT_SHARE(j). */
#define MPT_ROWS 64
#define MPT_GRID 51
#define MPT_SHARE(j) (0.10 + 0.005 * (j))

static int mpt_best(const struct mpt_case *k, double pred[][MPT_GRID], int n, int skip)
{
	double best = HUGE_VAL;
	int bj = 0;

	for (int j = 0; j < MPT_GRID; j++) {
		double sum = 0;

		for (int i = 0; i < n; i++)
			if (i != skip)
				sum += fabs(pred[i][j] / k[i].tokens_per_gpu_s - 1);
		if (sum < best - 1e-12) {
			best = sum;
			bj = j;
		}
	}
	return bj;
}

/* The rows of composer-fsdp.md §5.2 into k[] (names in names[]); their
 * count, or -1. */
static int mpt_rows(FILE *f, struct mpt_case *k, char names[][16], int max)
{
	struct mpt_size sz[16];
	char line[1024];
	int nsz = mpt_sizes(f, sz, 16), in = 0, n = 0;

	rewind(f);
	while (fgets(line, sizeof(line), f) && n < max) {
		char ckpt[8];
		int seq, gpus, mb, i;
		long gbs;
		double tps;

		if (!strncmp(line, "### 5.2", 7))
			in = 1;
		else if (!strncmp(line, "### 5.3", 7))
			break;
		if (!in || sscanf(line, "%15[0-9a-z],%d,%d,h100_80gb,%*[^,],%*[^,],%*[^,],%d,%*d,%ld,"
				  "%*[^,],%*[^,],%lf,%*[^,],%*[^,],%*[^,],%*[^,],%7[A-Za-z]",
				  names[n], &seq, &gpus, &mb, &gbs, &tps, ckpt) != 7)
			continue;
		for (i = 0; i < nsz && strcmp(sz[i].name, names[n]); i++)
			;
		if (i == nsz) {
			fprintf(stderr, "validate: composer-fsdp.md: no size for %s\n", names[n]);
			return -1;
		}
		k[n] = (struct mpt_case){ names[n], sz[i].d, sz[i].layers, sz[i].heads, seq, gpus, mb,
					  gbs, !strcmp(ckpt, "True"), tps };
		n++;
	}
	return n;
}

static int check_mpt_all(struct pipette_timer *t, const struct pipette_gpu_spec *h100)
{
	FILE *f = fopen(PIPETTE_SRCDIR "/tests/data/stacks/composer-fsdp.md", "r");
	static struct mpt_case k[MPT_ROWS];
	static char names[MPT_ROWS][16];
	static double pred[MPT_ROWS][MPT_GRID];
	struct pipette_stack st = *pipette_stack_get(PIPETTE_STACK_COMPOSER_FSDP);
	struct errors err = { 0 }, loo = { 0 };
	int n, fit;

	if (!f) {
		fprintf(stderr, "validate: tests/data/stacks/composer-fsdp.md: cannot open\n");
		return 1;
	}
	n = mpt_rows(f, k, names, MPT_ROWS);
	fclose(f);
	if (n <= 0)
		return 1;
	for (int j = 0; j < MPT_GRID; j++) {
		st.attn_utilization = MPT_SHARE(j);
		for (int i = 0; i < n; i++)
			if (mpt_estimate_on(t, h100, &st, &k[i], &pred[i][j]))
				return 1;
	}
	fit = mpt_best(k, pred, n, -1);
	for (int i = 0; i < n; i++) {
		double shipped;

		if (mpt_estimate(t, h100, &k[i], &shipped))
			return 1;
		relative_error(&err, shipped, k[i].tokens_per_gpu_s);
		relative_error(&loo, pred[i][mpt_best(k, pred, n, i)], k[i].tokens_per_gpu_s);
	}
	printf("All %d H100 BF16 rows of the same benchmark (composer-fsdp.md §5.2): MAPE %.1f%%, "
	       "bias %+.1f%%, worst %.1f%%; the attention kernel's share refitted on them %.3f "
	       "(core/inputs/stack.c %.3f), leave-one-out MAPE %.1f%%\n\n", err.n, mape(&err),
	       100 * bias(&err), 100 * err.worst, MPT_SHARE(fit),
	       pipette_stack_get(PIPETTE_STACK_COMPOSER_FSDP)->attn_utilization, mape(&loo));
	validate_summary("llm-foundry MPT, all H100 BF16 rows", "composer-fsdp", h100->name, err.n,
			 mape(&err) / 100, bias(&err), mape(&loo) / 100);
	return fabs(MPT_SHARE(fit) -
		    pipette_stack_get(PIPETTE_STACK_COMPOSER_FSDP)->attn_utilization) > 0.0026;
}

/* torchtitan's published Llama 3.1 8B throughput on H100
 * (tests/data/stacks/torchtitan.md §6: benchmarks/llama3_h100_202412_
 * torchtitan.md Tables 1 and 3, FSDP over every GPU, local batch 2,
 * per-op selective checkpointing, sequence 8192).  A check of the
 * torchtitan stack, not a calibration: pipette calibrates only on the
 * data of reference models.md and stacks.md, and prints the gap. */
static const struct tt_case {
	int gpus, compile;
	double tokens_per_gpu_s, mem_gib;	/* the tables' memory column */
} tt_cases[] = {
	{ 8, 0, 5762, 82.4 }, { 8, 1, 6667, 77.0 }, { 128, 0, 5605, 67.0 }, { 128, 1, 6514, 62.0 },
};

static int check_torchtitan(struct pipette_timer *t, const struct pipette_gpu_spec *h100)
{
	struct errors err = { 0 };
	int failures = 0;
	size_t i;

	printf("H100 throughput, torchtitan Llama 3.1 8B, FSDP (its benchmarks, a check): "
	       "tokens/s per GPU\n");
	printf("%5s %8s %10s %10s %8s %9s %9s\n", "gpus", "compile", "published", "predicted",
	       "error", "mem pub", "mem pred");
	for (i = 0; i < sizeof(tt_cases) / sizeof(tt_cases[0]); i++) {
		const struct tt_case *k = &tt_cases[i];
		struct pipette_stack st;
		struct pipette_model m;
		struct pipette_config c;
		struct pipette_time tm;
		struct pipette_memory mem;
		double pred;

		if (pipette_model_preset("llama3-8b", &m, NULL) ||
		    pipette_stack_resolve("torchtitan", k->compile ? "compile=on" : "", &st, NULL)) {
			failures++;
			continue;
		}
		st.sdpa_flash2 = 1;	/* torch of 2024-12-23: stack.h sdpa_flash2 */
		pipette_config_init(&c);
		c.stack = &st;
		c.dp = c.dp_shard = k->gpus;
		c.reshard = PIPETTE_RESHARD_ALWAYS;
		c.micro_batch = 2;
		c.global_batch = 2L * k->gpus;
		c.seq_len = 8192;
		c.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
		if (validate_estimate(t, &m, h100, &c, &tm)) {
			failures++;
			continue;
		}
		pred = (double)c.global_batch * c.seq_len / tm.iteration_s / k->gpus;
		pipette_memory_estimate(&m, h100, &c, 1.0, NULL, NULL, &mem);
		printf("%5d %8s %10.0f %10.0f %+7.1f%% %9.1f %9.1f\n", k->gpus,
		       k->compile ? "yes" : "no", k->tokens_per_gpu_s, pred,
		       100 * relative_error(&err, pred, k->tokens_per_gpu_s), k->mem_gib,
		       mem.peak_bytes / PIPETTE_GIB);
	}
	printf("MAPE %.1f%% over %d cases (not a target: these runs are outside the "
	       "calibration data)\n\n", mape(&err), err.n);
	validate_summary("torchtitan's published Llama 3.1 8B runs", "torchtitan", h100->name, err.n,
			 mape(&err) / 100, bias(&err), -1);
	return failures;
}

/* torchtitan's async TP benchmark (pytorch/torchtitan @b5bcd76c
 * benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md:22-36): Llama 3.1
 * 70B on 256 and 8B on 64 of Grand Teton's 500 W H100, FSDP x TP 8,
 * torch.compile, tokens/s per GPU with vanilla and async TP per recipe.
 * Sequence 8192 is the configs' at the torchtitan commit the benchmark
 * names (pytorch/torchtitan @820504e2 torchtitan/models/llama3/
 * train_configs/llama3_8b.toml:34 and llama3_70b.toml:34; not stated in
 * the benchmark); local batch is per data-parallel rank.  The speedups measure what async TP hides: with the
 * vanilla step T and its exposed TP time E, async TP leaves x of E
 * exposed where T / (T - (1 - x) E) is the measured speedup.  x is the
 * median over the runs, with leave-one-out. */
static const struct tt_async_case {
	const char *model, *precision;
	int gpus, local_batch, full_ac;
	double vanilla, async;	/* tokens/s per GPU */
} tt_async_cases[] = {
	{ "llama3-70b", "bf16", 256, 16, 1, 597.3, 652.4 },
	{ "llama3-70b", "fp8-current", 256, 16, 1, 809.8, 942.4 },
	{ "llama3-70b", "fp8-rowwise", 256, 16, 1, 599.6, 624.8 },
	{ "llama3-8b", "bf16", 64, 12, 0, 4378, 4809.4 },
	{ "llama3-8b", "fp8-current", 64, 12, 0, 5078.1, 5570.1 },
	{ "llama3-8b", "fp8-rowwise", 64, 12, 0, 3708.5, 3914.9 },
};
#define TT_ASYNC_N (sizeof(tt_async_cases) / sizeof(tt_async_cases[0]))

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int validate_csv_split(char *line, char **f, int max)
{
	int n = 0;
	char *w = line, *r = line;

	while (n < max) {
		int quoted = *r == '"';

		f[n++] = w;
		if (quoted)
			r++;
		while (*r && (quoted || *r != ',') && *r != '\n' && *r != '\r') {
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

double validate_median(const double *v, size_t n, size_t skip)
{
	double w[VALIDATE_MEDIAN_MAX];
	size_t k = 0;

	if (n > VALIDATE_MEDIAN_MAX)
		return NAN;
	for (size_t i = 0; i < n; i++)
		if (i != skip)
			w[k++] = v[i];
	if (!k)
		return NAN;
	qsort(w, k, sizeof(w[0]), dbl_cmp);
	return k % 2 ? w[k / 2] : (w[k / 2 - 1] + w[k / 2]) / 2;
}

/* One run, vanilla TP: its step time and exposed TP time. */
static int tt_async_estimate(struct pipette_timer *t, const struct pipette_gpu_spec *g,
			     const struct tt_async_case *k, const char *options,
			     struct pipette_time *tm)
{
	struct pipette_stack st;
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_err err;

	if (pipette_model_preset(k->model, &m, NULL) ||
	    pipette_stack_resolve("torchtitan", options, &st, &err))
		return -1;
	st.sdpa_flash2 = 1;	/* torchtitan of 2025-06: stack.h sdpa_flash2 */
	pipette_config_init(&c);
	c.stack = &st;
	c.tp = 8;
	c.dp = c.dp_shard = k->gpus / 8;
	c.sequence_parallel = 1;	/* torchtitan's TP plan (stack.h sp_with_tp) */
	c.reshard = PIPETTE_RESHARD_ALWAYS;
	c.micro_batch = k->local_batch;
	c.global_batch = (long)k->local_batch * c.dp;
	c.seq_len = 8192;
	c.recompute = k->full_ac ? PIPETTE_RECOMPUTE_FULL : PIPETTE_RECOMPUTE_SELECTIVE;
	if (pipette_precision_parse(k->precision, &c.precision, &err))
		return -1;
	return validate_estimate(t, &m, g, &c, tm);
}

static int check_tt_async(struct pipette_timer *t, const struct pipette_gpu_spec *g)
{
	struct errors van = { 0 }, asy = { 0 }, loo = { 0 };
	double x[TT_ASYNC_N], T[TT_ASYNC_N], E[TT_ASYNC_N], fit, shipped;
	struct pipette_stack st;
	size_t i;

	for (i = 0; i < TT_ASYNC_N; i++) {
		struct pipette_time tm;
		double speedup = tt_async_cases[i].async / tt_async_cases[i].vanilla;

		if (tt_async_estimate(t, g, &tt_async_cases[i], "compile=on", &tm))
			return 1;
		T[i] = tm.iteration_s;
		E[i] = tm.tp_comm_s;
		x[i] = E[i] > 0 ? 1 - T[i] * (1 - 1 / speedup) / E[i] : 1;
	}
	fit = validate_median(x, TT_ASYNC_N, TT_ASYNC_N);
	if (pipette_stack_resolve("torchtitan", "compile=on,tp_overlap=on", &st, NULL))
		return 1;
	shipped = st.tp_exposed;
	printf("torchtitan async TP on Grand Teton's 500 W H100 (its benchmark, "
	       "asyncTP_llama3_h100_2025-06): tokens/s per GPU\n");
	printf("%-11s %-12s %5s %10s %10s %8s %10s %10s %8s %7s %8s\n", "model", "recipe", "gpus",
	       "vanilla", "predicted", "error", "async", "predicted", "error", "x", "LOO err");
	for (i = 0; i < TT_ASYNC_N; i++) {
		const struct tt_async_case *k = &tt_async_cases[i];
		double tok = (double)k->local_batch * 8192 / 8;	/* per GPU per step */
		double xl = validate_median(x, TT_ASYNC_N, i);
		double pv = tok / T[i], pa = tok / (T[i] - (1 - shipped) * E[i]);
		double pl = tok / (T[i] - (1 - xl) * E[i]), ev, ea, el;

		ev = relative_error(&van, pv, k->vanilla);
		ea = relative_error(&asy, pa, k->async);
		el = relative_error(&loo, pl / pv, k->async / k->vanilla);
		printf("%-11s %-12s %5d %10.1f %10.1f %+7.1f%% %10.1f %10.1f %+7.1f%% %7.2f %+7.1f%%\n",
		       k->model, k->precision, k->gpus, k->vanilla, pv, 100 * ev, k->async, pa,
		       100 * ea, x[i], 100 * el);
	}
	printf("async TP leaves %.2f of TP exposed (median of the runs; core/inputs/stack.c "
	       "has %.2f); the speedup's leave-one-out error %.1f%%; vanilla MAPE %.1f%%, bias "
	       "%+.1f%%\n\n", fit, shipped, mape(&loo), mape(&van), 100 * bias(&van));
	validate_summary("torchtitan async-TP benchmark, 12 runs", "torchtitan", g->name,
			 van.n + asy.n, (van.sum + asy.sum) / (van.n + asy.n),
			 (van.signed_sum + asy.signed_sum) / (van.n + asy.n), -1);
	return fabs(fit - shipped) > 0.005;
}

/* One torchtitan block, forward + backward, timed on one H100 SXM
 * (tests/data/kernels/h100-sxm-block.csv, block.py): the model's layer
 * (2 layers less 1, tp 1 on the block's own widths) per recomputation,
 * eager and compiled, from GPU-bound shapes to launch-bound ones.  A check
 * of the torchtitan stack's layer against the physics, beside its
 * published runs above. */
static int check_tt_blocks(struct pipette_timer *t, const char *path, const char *gpu,
			   const char *label, const char *dataset)
{
	const struct pipette_gpu_spec *g = pipette_gpu_lookup(gpu, NULL);
	FILE *fp = fopen(path, "r");
	struct errors err = { 0 };
	char line[512], name[48];
	int failures = 0;

	if (!fp) {
		printf("%s: not found\n", path);
		return 1;
	}
	printf("torchtitan blocks timed on one %s (%s): seconds per block, forward + "
	       "backward\n%-28s %9s %9s %8s\n", label, path, "case", "measured", "model", "error");
	while (fgets(line, sizeof(line), fp)) {
		int dim, ffn, heads, kv, batch, seq, compiled;
		double sec, model;
		struct pipette_model m;
		struct pipette_config c;
		struct pipette_stack st;
		struct pipette_time a, b;

		if (sscanf(line, "%47[^,],%d,%d,%d,%d,%d,%d,%lf", name, &dim, &ffn, &heads, &kv,
			   &batch, &seq, &sec) != 8 || !heads)
			continue;	/* the header and the output layer's row */
		compiled = strstr(name, "_compiled") != NULL;
		if (pipette_stack_resolve("torchtitan", compiled ? "compile=on" : "", &st, NULL))
			return failures + 1;
		gpt_model(&m, name, 2, dim, heads, 128256, seq);
		m.kv_heads = kv;
		m.head_dim = 128;	/* block.py's, whatever the shard's width */
		m.ffn = ffn;
		m.ffn_kind = PIPETTE_FFN_SWIGLU;
		m.norm = PIPETTE_NORM_RMSNORM;
		m.bias = 0;
		m.tied_embeddings = 0;
		pipette_config_init(&c);
		c.stack = &st;
		c.micro_batch = c.global_batch = batch;
		c.seq_len = seq;
		c.recompute = strstr(name, "_sac_op") ? PIPETTE_RECOMPUTE_SELECTIVE
			      : strstr(name, "_full") ? PIPETTE_RECOMPUTE_FULL
			      : PIPETTE_RECOMPUTE_NONE;
		if (validate_estimate(t, &m, g, &c, &a))
			return failures + 1;
		m.layers = 1;
		if (validate_estimate(t, &m, g, &c, &b))
			return failures + 1;
		model = a.stage_f_s + a.stage_b_s + a.stage_w_s -
			(b.stage_f_s + b.stage_b_s + b.stage_w_s);
		printf("%-28s %9.4f %9.4f %+7.1f%%\n", name, sec, model,
		       100 * relative_error(&err, model, sec));
	}
	fclose(fp);
	printf("MAPE %.1f%%, bias %+.1f%% over %d blocks (a check: the stack's layer against "
	       "the physics)\n\n", mape(&err), 100 * bias(&err), err.n);
	validate_summary(dataset, "torchtitan", g->name, err.n, mape(&err) / 100, bias(&err), -1);
	return failures;
}

/* A measured kernel table (tests/data/kernels) against the kernel model
 * GPU `gpu` ships: the shipped fit's error per GEMM dtype and for the
 * attention kernel, and leave-one-model-out (fitted without the 8B, 70B or
 * 405B rows, judged on them).  Targets: median within 5%, 95% of the rows
 * within 15%.  `label` names the GPU the table was timed on ("H100"). */
static int check_kernels(const char *path, const char *gpu, const char *label)
{
	static const char *const models[] = { "8b", "70b", "405b" };
	const struct pipette_gpu_spec *g = pipette_gpu_lookup(gpu, NULL);
	struct pipette_ktable t;
	struct pipette_err err;
	int failures = 0;

	if (pipette_ktable_read(path, &t, &err)) {
		fprintf(stderr, "validate: %s\n", err.msg);
		return 1;
	}
	printf("Kernel model against the kernels timed on one %s SXM (%s, %zu rows)\n", label, path,
	       t.n);
	printf("%-16s %5s %8s %8s   leave-one-model-out median / p95: %s %s %s\n", "kernel",
	       "rows", "median", "p95", models[0], models[1], models[2]);
	/* the measured dtypes (BF16, FP8 tensorwise and rowwise), then attention */
	for (int d = 0; d <= 3; d++) {
		enum pipette_krow_kind kind = d < 3 ? PIPETTE_KROW_GEMM : PIPETTE_KROW_ATTN_FWD;
		enum pipette_gemm_dtype dt = d < 3 ? (enum pipette_gemm_dtype)d : PIPETTE_GEMM_BF16;
		double med, p95, worst_loo = 0;
		size_t n = pipette_kernelfit_errors(&t, g->kernels, kind, dt, NULL, &med, &p95);
		char name[64];

		printf("%-16s %5zu %7.1f%% %7.1f%%  ", d < 3 ? pipette_gemm_dtype_name((enum pipette_gemm_dtype)d) : "attention (cuDNN)", n,
		       100 * med, 100 * p95);
		failures += med > 0.05;
		for (int k = 0; k < 3; k++) {
			struct pipette_kernels loo;
			double lm, lp;

			if (pipette_kernelfit(&t, models[k], &loo, &err) ||
			    !pipette_kernelfit_errors(&t, &loo, kind, dt, models[k], &lm, &lp)) {
				printf(" %s: -", models[k]);
				continue;
			}
			printf(" %4.1f%% / %4.1f%%", 100 * lm, 100 * lp);
			worst_loo = fmax(worst_loo, lm);
		}
		printf("\n");
		snprintf(name, sizeof(name), "%s kernels, %s (median error)", label,
			 d < 3 ? pipette_gemm_dtype_name((enum pipette_gemm_dtype)d) : "attention");
		validate_summary(name, "-", g->name, (int)n, med, NAN, worst_loo);
	}
	printf("(the shipped parameters: core/inputs/hardware.c %s)\n\n", g->kernels->source);
	pipette_ktable_free(&t);
	return failures;
}

int main(int argc, char **argv)
{
	struct pipette_timer *t = pipette_timer_create();
	int failures = 0, i;

	failures += check_kernels(PIPETTE_SRCDIR "/tests/data/kernels/h100-sxm-kernels.csv", "h100",
				  "H100");
	failures += check_kernels(PIPETTE_SRCDIR "/tests/data/kernels/h200-kernels.csv", "h200",
				  "H200");
	failures += check_gpt(t, pipette_gpu_lookup("a100", NULL));
	failures += check_zb(t, pipette_gpu_lookup("a100", NULL));
	failures += check_mpt(t, pipette_gpu_lookup("h100", NULL));
	failures += check_mpt_all(t, pipette_gpu_lookup("h100", NULL));
	/* torchtitan's runs: Grand Teton's 500 W H100 (hardware.c [H100-500W]) */
	failures += check_torchtitan(t, pipette_gpu_lookup("h100-500w", NULL));
	failures += check_tt_async(t, pipette_gpu_lookup("h100-500w", NULL));
	/* the torchtitan stack's host floors (stack.h) are the H100 file's
	 * launch-bound rows */
	failures += check_tt_blocks(t, PIPETTE_SRCDIR "/tests/data/kernels/h100-sxm-block.csv", "h100",
				    "H100 SXM", "torchtitan blocks (host floors taken here)");
	failures += check_tt_blocks(t, PIPETTE_SRCDIR "/tests/data/kernels/h200-block.csv", "h200",
				    "H200 SXM", "torchtitan blocks, another GPU and host");
	failures += validate_current(t, PIPETTE_SRCDIR "/tests/data/stacks");
	failures += validate_moe(t);
	failures += validate_moe_block(PIPETTE_SRCDIR "/tests/data/kernels/h200-moe.csv");
	failures += validate_lowp(t, PIPETTE_SRCDIR "/tests/data/stacks/megatron-bridge-lowp.csv");
	printf("Per-layer compute against layers timed in isolation (torch.compile, BF16)\n");
	for (i = 1; i < argc; i++)
		failures += layer_check(t, argv[i]);
	print_summary();
	pipette_timer_destroy(t);
	return failures ? 1 : 0;
}
