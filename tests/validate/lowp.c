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

#include "estimate/memory.h"
#include "inputs/cluster.h"
#include "inputs/stack.h"
#include "validate.h"

#define COLS 34
#define GROUPS 32

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

static int estimate_row(struct pipette_timer *t, char **f, char **hdr, int nh,
			const struct pipette_stack *st, const double *scale, double *pred,
			double *mem_ratio, enum pipette_gemm_dtype *dt, char *why, size_t wlen)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_time tm;
	struct pipette_err err;
	struct pipette_cluster *cl;
	const struct pipette_gpu_spec *table = pipette_gpu_lookup(f[col(hdr, nh, "gpu")], NULL);
	struct pipette_gpu_spec gs, *g = &gs;
	struct pipette_stack fs;
	int rc;

	if (!table || row_model(f[col(hdr, nh, "model")], &m))
		return snprintf(why, wlen, "model or GPU not known"), -1;
	/* Megatron-FSDP and CPU activation offloading, as the row's flags
	 * name them ("CPU activation offload N layers") */
	if (atoi(f[col(hdr, nh, "fsdp")])) {
		static const char tag[] = "CPU activation offload ";
		const char *ol = strstr(f[col(hdr, nh, "flags")], tag);
		char opt[48];

		fs = *st;
		snprintf(opt, sizeof(opt), "cpu_offload=%d", ol ? atoi(ol + strlen(tag)) : 0);
		if (pipette_stack_option(&fs, "megatron_fsdp=on", &err) ||
		    pipette_stack_option(&fs, opt, &err))
			return snprintf(why, wlen, "%.180s", err.msg), -1;
		st = &fs;
	}
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
	if (st->mfsdp) {	/* sharded over every DP rank, its own optimizer */
		c.dp_shard = c.dp;
		c.distributed_optimizer = 0;
	}
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

		if (vs > 1 && m.layers % vs && (m.layers + 2) % vs == 0) {
			int k = (m.layers + 2) / vs - 1;

			/* a stage of the embedding or the loss alone: -1 */
			c.first_stage_layers = c.last_stage_layers = k ? k : -1;
		} else if (vs > 2 && m.layers % vs) {
			/* DeepSeek-V3's layouts in Megatron-Bridge: k = ceil(L / vs)
			 * decoder layers per virtual stage and the rest on the
			 * last, with the MTP and the loss (src/megatron/bridge/
			 * recipes/deepseek/h100/deepseek_v3.py:50-61,
			 * _get_deepseek_v3_pipeline_layout, NVIDIA-NeMo/
			 * Megatron-Bridge@067f987d); where that leaves the last
			 * stage no layer, it holds the loss alone and the first
			 * the remainder. */
			int k = (m.layers + vs - 1) / vs;

			if (m.layers - k * (vs - 1) >= 1) {
				c.first_stage_layers = k;
				c.last_stage_layers = m.layers - k * (vs - 1);
			} else {
				c.first_stage_layers = m.layers - k * (vs - 2);
				c.last_stage_layers = -1;
			}
		}
	}
	/* the table's GPU with each dtype's attained share divided by scale[] */
	gs = *table;
	for (int d = 0; d < PIPETTE_GEMM_DTYPE_COUNT; d++)
		gs.curve_share[d] = (table->curve_share[d] > 0 ? table->curve_share[d]
							       : table->gemm_eff_max) / scale[d];
	/* The recipe's MoE settings, as the row's flags name them: the flex
	 * dispatcher with DeepEP or HybridEP kernels, and the combined-1F1B
	 * overlap of the EP exchange (--overlap-moe-expert-parallel-comm). */
	if (strstr(f[col(hdr, nh, "flags")], "dispatcher deepep") ||
	    strstr(f[col(hdr, nh, "flags")], "dispatcher hybridep"))
		c.moe.dispatcher = PIPETTE_DISPATCH_DEEPEP;
	if (strstr(f[col(hdr, nh, "flags")], "EP a2a overlap"))
		c.moe.ep_overlap = 1;
	if (row_recompute(f[col(hdr, nh, "rec")], &c))
		return snprintf(why, wlen, "recompute '%.40s' unknown", f[col(hdr, nh, "rec")]), -1;
	if (pipette_precision_parse(f[col(hdr, nh, "precision")], &c.precision, &err) ||
	    pipette_stack_precision_check(st, g, c.precision, &err) ||
	    pipette_config_check(&m, &c, &err))
		return snprintf(why, wlen, "%.180s", err.msg), -1;
	/* NVL72 racks: jobs of 128 GPUs and more are placed in segments of
	 * 16 of a rack's 18 trays (NVIDIA, "Achieving Peak System and Workload
	 * Efficiency on NVIDIA GB200 NVL72 with Slurm Block Scheduling",
	 * technical blog, 2025: segment size 16 for large jobs such as MoE
	 * training), so each domain holds 64 of the job's GPUs. */
	if (gs.nvlink_domain_gpus > gs.gpus_per_node && pipette_config_world(&c) >= 128)
		gs.nvlink_domain_gpus = 16 * gs.gpus_per_node;
	if (!(cl = validate_cluster(pipette_config_world(&c), g, g->gpus_per_node)))
		return snprintf(why, wlen, "no cluster"), -1;
	rc = pipette_time_estimate(t, &m, g, &c, cl, NULL, 0, &tm, &err);
	pipette_cluster_destroy(cl);
	if (rc)
		return snprintf(why, wlen, "%.180s", err.msg), -1;
	*pred = tm.iteration_s;
	if (mem_ratio) {	/* the peak over HBM, the schedule's in-flight counts */
		struct pipette_memory mem;

		pipette_memory_estimate(&m, g, &c, 1.0, pipette_timer_inflight(t), NULL, &mem);
		*mem_ratio = mem.peak_bytes / mem.limit_bytes;
	}
	*dt = pipette_precision_facts(c.precision)->gemm;
	return 0;
}

/* One run, its time split by what a GPU's attained shares scale: a step of
 * T = c_bf / s_bf + c_lp / s_lp + rest (c_* at the table's shares; the
 * BF16 GEMMs and attention, the recipe's GEMMs), from three estimates with
 * each share halved in turn. */
struct lrow {
	char name[48], system[24], precision[16];
	double meas, c_bf, c_lp, rest;
	double mem;		/* predicted peak over HBM: every run ran, so <= 1 */
	int rec_known;		/* the recipe's recomputation is pinned */
	double t_bf, t_lp;	/* the table's shares the c_* were estimated at */
	int family;		/* 0 Hopper (measured kernels), 1 Blackwell, 2 Blackwell Ultra */
	int rdt;		/* the recipe's factor: 0 bf16, 1 FP8, 2 MXFP8, 3 NVFP4 */
	int dense;
	int fsdp;		/* Megatron-FSDP (with CPU offloading): checks, not fitted */
};

#define MAX_LROWS 96
#define NFAM 3
#define NRDT 4

/* The fitted model: a share per die family (B200 and GB200 one die,
 * B300 and GB300 another; NVIDIA's peaks already carry their clocks), and
 * a factor per recipe family shared by all Blackwell GPUs (bf16 1). */
struct lfit {
	double fam[NFAM], rdt[NRDT];
};

static double lpredict(const struct lrow *r, const struct lfit *x)
{
	double s;

	if (r->family == 0)
		return r->c_bf + r->c_lp + r->rest;
	s = x->fam[r->family];
	return r->c_bf * r->t_bf / s + r->c_lp * r->t_lp / (s * x->rdt[r->rdt]) + r->rest;
}

static double lcost(const struct lrow *rows, int n, const struct lfit *x, int skip)
{
	double sum = 0;

	for (int i = 0; i < n; i++)
		if (i != skip && rows[i].family > 0 && rows[i].dense && !rows[i].fsdp)
			sum += fabs(lpredict(&rows[i], x) / rows[i].meas - 1);
	return sum;
}

/* Coordinate descent on a grid of 0.01: each parameter in turn at its
 * best value with the others held, until nothing moves. */
static void lfit_run(const struct lrow *rows, int n, int skip, struct lfit *x)
{
	for (int k = 0; k < NFAM; k++)
		x->fam[k] = 0.5;
	for (int k = 0; k < NRDT; k++)
		x->rdt[k] = 1.0;
	for (int sweep = 0, moved = 1; moved && sweep < 50; sweep++) {
		moved = 0;
		for (int p = 1; p < NFAM + NRDT; p++) {
			double *v = p < NFAM ? &x->fam[p] : &x->rdt[p - NFAM];
			double best = *v, bc = lcost(rows, n, x, skip);

			if (p == NFAM)
				continue;	/* bf16's factor is 1 */
			for (int g = 10; g <= 150; g++) {
				*v = g / 100.0;
				if (lcost(rows, n, x, skip) < bc - 1e-12) {
					bc = lcost(rows, n, x, skip);
					best = *v;
				}
			}
			if (fabs(*v - best) > 1e-12)
				moved = 1;
			*v = best;
		}
	}
}

static int family_of(const char *gpu)
{
	if (!strncmp(gpu, "gb300", 5) || !strncmp(gpu, "b300", 4))
		return 2;
	if (!strncmp(gpu, "gb200", 5) || !strncmp(gpu, "b200", 4))
		return 1;
	return 0;
}

static int rdt_of(enum pipette_gemm_dtype dt)
{
	switch (dt) {
	case PIPETTE_GEMM_BF16:
		return 0;
	case PIPETTE_GEMM_MXFP8:
		return 2;
	case PIPETTE_GEMM_NVFP4:
		return 3;
	default:
		return 1;
	}
}

/* Read and split every run; the skipped ones are printed. */
static int lrows_read(struct pipette_timer *t, FILE *fp, struct lrow *rows, int *skipped)
{
	char hline[2048], line[4096], *hdr[COLS + 1], *f[COLS + 1], why[200];
	const struct pipette_stack *st = pipette_stack_get(PIPETTE_STACK_MEGATRON_BRIDGE);
	int nh, n = 0;

	if (!fgets(hline, sizeof(hline), fp))
		return -1;
	nh = validate_csv_split(hline, hdr, COLS);
	while (n < MAX_LROWS && fgets(line, sizeof(line), fp)) {
		double one[PIPETTE_GEMM_DTYPE_COUNT], t0, tb, tl;
		enum pipette_gemm_dtype dt;
		struct lrow *r = &rows[n];

		if (validate_csv_split(line, f, COLS) != nh)
			continue;
		for (int d = 0; d < PIPETTE_GEMM_DTYPE_COUNT; d++)
			one[d] = 1.0;
		r->meas = atof(f[col(hdr, nh, "iter_s")]);
		if (estimate_row(t, f, hdr, nh, st, one, &t0, &r->mem, &dt, why, sizeof(why))) {
			printf("%-34s %-12s %-13s %9.2f %9s  skipped: %.70s\n", f[0],
			       f[col(hdr, nh, "system")], f[col(hdr, nh, "precision")], r->meas, "-",
			       why);
			(*skipped)++;
			continue;
		}
		one[PIPETTE_GEMM_BF16] = 2.0;	/* its share halved: its time doubled */
		estimate_row(t, f, hdr, nh, st, one, &tb, NULL, &dt, why, sizeof(why));
		one[PIPETTE_GEMM_BF16] = 1.0;
		one[dt] = 2.0;
		estimate_row(t, f, hdr, nh, st, one, &tl, NULL, &dt, why, sizeof(why));
		r->c_bf = tb - t0;
		r->c_lp = dt == PIPETTE_GEMM_BF16 ? 0 : tl - t0;
		r->rest = t0 - r->c_bf - r->c_lp;
		pipette_strlcpy(r->name, f[0], sizeof(r->name));
		pipette_strlcpy(r->system, f[col(hdr, nh, "system")], sizeof(r->system));
		pipette_strlcpy(r->precision, f[col(hdr, nh, "precision")], sizeof(r->precision));
		r->family = family_of(f[col(hdr, nh, "gpu")]);
		{
			const struct pipette_gpu_spec *g = pipette_gpu_lookup(f[col(hdr, nh, "gpu")], NULL);

			r->t_bf = g->curve_share[PIPETTE_GEMM_BF16] > 0
				  ? g->curve_share[PIPETTE_GEMM_BF16] : g->gemm_eff_max;
			r->t_lp = g->curve_share[dt] > 0 ? g->curve_share[dt] : g->gemm_eff_max;
		}
		r->rdt = rdt_of(dt);
		r->dense = !strstr(f[col(hdr, nh, "model")], "experts");
		r->fsdp = atoi(f[col(hdr, nh, "fsdp")]) != 0;
		r->rec_known = strcmp(f[col(hdr, nh, "rec")], "unknown") != 0;
		n++;
	}
	return n;
}

/* The table's shares against the fit: Blackwell's entries of hardware.c
 * hold fam x rdt. */
static int table_matches(const struct lfit *x)
{
	static const struct { const char *gpu; int fam; } g[] = {
		{ "b200", 1 }, { "gb200", 1 }, { "b300", 2 }, { "gb300", 2 },
	};
	static const enum pipette_gemm_dtype dts[NRDT] = {
		PIPETTE_GEMM_BF16, PIPETTE_GEMM_FP8_TENSOR, PIPETTE_GEMM_MXFP8, PIPETTE_GEMM_NVFP4,
	};
	int bad = 0;

	for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		const struct pipette_gpu_spec *s = pipette_gpu_lookup(g[i].gpu, NULL);

		for (int k = 0; k < NRDT; k++)
			bad += fabs(s->curve_share[dts[k]] - x->fam[g[i].fam] * x->rdt[k]) > 0.0051;
	}
	return bad;
}

int validate_lowp(struct pipette_timer *t, const char *path)
{
	FILE *fp = fopen(path, "r");
	static struct lrow rows[MAX_LROWS];
	struct group sys[GROUPS] = { { "", 0, 0, 0 } }, prec[GROUPS] = { { "", 0, 0, 0 } };
	struct group loo_sys[GROUPS] = { { "", 0, 0, 0 } }, loo_prec[GROUPS] = { { "", 0, 0, 0 } };
	int ns = 0, np = 0, nl = 0, nlp = 0, skipped = 0, n, bad;
	double all_abs = 0, all_sum = 0, dense_abs = 0, dense_loo = 0, dense_sum = 0;
	int dense_n = 0, mem_pinned = 0, mem_over = 0;
	struct lfit x;

	if (!fp) {
		fprintf(stderr, "validate: %s: cannot read\n", path);
		return 1;
	}
	printf("Low precision and Blackwell: Megatron-Bridge runs NVIDIA published (%s), "
	       "stack megatron-bridge\n", path);
	printf("%-34s %-12s %-13s %9s %9s %8s %9s %8s %6s\n", "run", "system", "precision",
	       "measured", "fitted", "error", "LOO", "error", "memory");
	n = lrows_read(t, fp, rows, &skipped);
	fclose(fp);
	if (n < 0)
		return 1;
	lfit_run(rows, n, -1, &x);
	for (int i = 0; i < n; i++) {
		const struct lrow *r = &rows[i];
		struct lfit lx;
		double e, el, pl;
		char key[48];

		lfit_run(rows, n, i, &lx);
		e = lpredict(r, &x) / r->meas - 1;
		pl = lpredict(r, &lx);
		el = pl / r->meas - 1;
		printf("%-34s %-12s %-13s %9.2f %9.2f %+7.1f%% %9.2f %+7.1f%% %5.0f%%%s\n", r->name,
		       r->system, r->precision, r->meas, lpredict(r, &x), 100 * e, pl, 100 * el,
		       100 * r->mem, r->mem <= 1 ? "" : r->rec_known ? " DOES NOT FIT"
		       : " (recompute not pinned)");
		mem_pinned += r->rec_known;
		mem_over += r->rec_known && r->mem > 1;
		if (r->dense) {
			dense_n++;
			dense_abs += fabs(e);
			dense_loo += fabs(el);
			dense_sum += e;
		}
		add(sys, &ns, r->system, e);
		add(loo_sys, &nl, r->system, el);
		snprintf(key, sizeof(key), "%s %s", r->system, r->precision);
		add(prec, &np, key, e);
		add(loo_prec, &nlp, key, el);
		all_abs += fabs(e);
		all_sum += e;
	}
	printf("fitted on the dense Blackwell runs (MoE runs: checks): attained share of the dense peak %.2f (B200, "
	       "GB200), %.2f (B300, GB300); of it, FP8 %.2f, MXFP8 %.2f, NVFP4 %.2f (bf16 1); "
	       "H100 runs use its measured kernels, not fitted\n", x.fam[1], x.fam[2], x.rdt[1],
	       x.rdt[2], x.rdt[3]);
	printf("memory: %d of the %d runs whose recomputation the recipe pins are judged not to "
	       "fit (every run ran; 'memory' is the predicted peak over HBM)\n", mem_over,
	       mem_pinned);
	printf("%-26s %4s %8s %8s %12s\n", "group", "runs", "MAPE", "bias", "LOO MAPE");
	for (int i = 0; i < ns; i++) {
		char label[64];

		printf("%-26s %4d %7.1f%% %+7.1f%% %11.1f%%\n", sys[i].name, sys[i].n,
		       100 * sys[i].abs / sys[i].n, 100 * sys[i].sum / sys[i].n,
		       100 * loo_sys[i].abs / loo_sys[i].n);
		snprintf(label, sizeof(label), "Megatron-Bridge low precision, %.24s", sys[i].name);
		validate_summary(label, "megatron-bridge", sys[i].name, sys[i].n, sys[i].abs / sys[i].n,
				 sys[i].sum / sys[i].n, loo_sys[i].abs / loo_sys[i].n);
	}
	for (int i = 0; i < np; i++)
		printf("  %-24s %4d %7.1f%% %+7.1f%% %11.1f%%\n", prec[i].name, prec[i].n,
		       100 * prec[i].abs / prec[i].n, 100 * prec[i].sum / prec[i].n,
		       100 * loo_prec[i].abs / loo_prec[i].n);
	printf("dense runs (Llama 3 8B, 70B, 405B), %d: MAPE %.1f%%, bias %+.1f%%, "
	       "leave-one-out %.1f%%\n", dense_n, dense_n ? 100 * dense_abs / dense_n : 0,
	       dense_n ? 100 * dense_sum / dense_n : 0, dense_n ? 100 * dense_loo / dense_n : 0);
	validate_summary("Megatron-Bridge low precision, dense runs", "megatron-bridge", "H100, Blackwell",
			 dense_n, dense_n ? dense_abs / dense_n : 0, dense_n ? dense_sum / dense_n : 0,
			 dense_n ? dense_loo / dense_n : 0);
	bad = table_matches(&x);
	printf("all %d runs: MAPE %.1f%%, bias %+.1f%%; %d skipped; core/inputs/hardware.c's "
	       "Blackwell shares %s the fit\n\n", n, n ? 100 * all_abs / n : 0,
	       n ? 100 * all_sum / n : 0, skipped, bad ? "DO NOT MATCH" : "match");
	return bad ? 1 : 0;
}
