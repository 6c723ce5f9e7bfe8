/* pipette observe: a plan against what its job measured (the training log
 * of the plan's stack), and the observation `pipette calibrate` fits. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "learn/calib.h"
#include "cli.h"
#include "inputs/json.h"
#include "inputs/readfile.h"
#include "inputs/stack.h"
#include "inputs/trainlog.h"

static const char usage_text[] =
"usage: pipette observe --plan PLAN.json --log TRAIN.log [--warmup N]\n"
"                       [--record DIR] [--format table|json]\n"
"       pipette observe --report DIR --svg OUT.svg\n"
"\n"
"Compare a plan (pipette plan --format json, or the file PIPETTE_PLAN_FILE\n"
"names in the job) with what its job measured: the steady-state step time\n"
"and the memory peaks in the log of the plan's stack (Megatron-LM, NeMo,\n"
"torchtitan), matched to each rank's pipeline stage.\n"
"\n"
"  --plan FILE      the plan the job ran\n"
"  --log FILE       the job's training log\n"
"  --warmup N       steps to skip before the steady state (default: the\n"
"                   parser's, see man pipette)\n"
"  --record DIR     add the observation to the site's store (one file per\n"
"                   plan and log: recording a job again replaces it; written\n"
"                   atomically; pipette calibrate --from DIR)\n"
"  --format F       table (default) or json (the observation)\n"
"  --report DIR     with --svg: draw every observation of the store: the\n"
"                   predicted against the measured step time and memory per\n"
"                   stage (identity and +-10%% lines), and the histogram of\n"
"                   the step-time errors\n"
"  --svg FILE       where --report writes its SVG (atomically)\n";

struct obs_opts {
	const char *plan, *log, *record, *report, *svg;
	long warmup;
	enum pipette_format fmt;
};

/* What the plan says, read from its JSON. */
struct planned {
	char gpu[64], stack[32], hash[32], model[128];
	enum pipette_stack_id stack_id;
	double model_s, compute_s, comm_s, site_s;
	double tokens_per_step;		/* global batch x sequence length */
	long world, tp, dp, cp, global_batch, seq_len;
	long dp_shard, dp_replicate;	/* 0: the plan does not say */
	int pp, per_stage;	/* ranks per pipeline stage: world / pp */
	int nstages;
	double base[PIPETTE_OBS_MAX_STAGES], transient[PIPETTE_OBS_MAX_STAGES],
	       total[PIPETTE_OBS_MAX_STAGES];
};

/* A figure of the plan: finite, >= 0 and at most 1e15 (bytes of one
 * stage, seconds, counts). */
#define FIGURE_MAX 1e15

static int num(struct json_object *o, const char *where, const char *key, const char *src,
	       double *out)
{
	struct pipette_err err;
	char at[PIPETTE_ERR_MAX];

	snprintf(at, sizeof(at), "%.300s: %s", src, where);
	if (pipette_json_number(o, key, at, out, &err))
		return cli_error("--plan: %s", err.msg);
	if (!(*out >= 0 && *out <= FIGURE_MAX))
		return cli_error("--plan: %s: %s: %s: %g is not a figure in [0, %g]", src, where, key,
				 *out, FIGURE_MAX);
	return 0;
}

/* A parallel size: a whole number in [1, max]. */
static int size_of(struct json_object *cfg, const char *key, const char *src, double max,
		   double *out)
{
	if (num(cfg, "config", key, src, out))
		return PIPETTE_EXIT_USAGE;
	if (*out < 1 || *out > max || *out != floor(*out))
		return cli_error("--plan: %s: config: %s: %g is not a whole number in [1, %g]", src,
				 key, *out, max);
	return 0;
}

static int str(struct json_object *o, const char *key, const char *src, char *out, size_t len)
{
	struct pipette_err err;

	if (pipette_json_string(o, key, src, out, len, &err))
		return cli_error("--plan: %s", err.msg);
	return 0;
}

static int plan_stages(struct json_object *mem, const char *src, struct planned *p)
{
	struct json_object *per;
	size_t i;

	if (!json_object_object_get_ex(mem, "per_stage", &per) ||
	    json_object_get_type(per) != json_type_array ||
	    json_object_array_length(per) != (size_t)p->pp)
		return cli_error("--plan: %s: predicted.memory.per_stage: expected %d stages", src,
				 p->pp);
	p->nstages = p->pp;
	for (i = 0; i < (size_t)p->pp; i++) {
		struct json_object *st = json_object_array_get_idx(per, i);
		char where[64];
		double res, outside;

		snprintf(where, sizeof(where), "predicted.memory.per_stage[%zu]", i);
		if (num(st, where, "total_bytes", src, &p->total[i]) ||
		    num(st, where, "reserve_bytes", src, &res) ||
		    num(st, where, "transient_bytes", src, &p->transient[i]) ||
		    num(st, where, "outside_allocator_bytes", src, &outside))
			return PIPETTE_EXIT_USAGE;
		/* what torch's allocator holds beside its reserve: the log's
		 * reserved peak counts neither the CUDA context nor NCCL's
		 * buffers */
		p->base[i] = p->total[i] - res - outside;
	}
	return 0;
}

/* torchtitan's split of the data parallelism, where the plan has it. */
static int dp_split(struct json_object *cfg, const char *src, struct planned *p)
{
	double v;

	p->dp_shard = p->dp_replicate = 0;
	if (json_object_object_get_ex(cfg, "dp_shard", NULL)) {
		if (size_of(cfg, "dp_shard", src, 1 << 20, &v))
			return -1;
		p->dp_shard = (long)v;
	}
	if (json_object_object_get_ex(cfg, "dp_replicate", NULL)) {
		if (size_of(cfg, "dp_replicate", src, 1 << 20, &v))
			return -1;
		p->dp_replicate = (long)v;
	}
	return 0;
}

static int read_plan(const char *path, struct planned *p)
{
	struct pipette_err err;
	struct json_object *root, *cfg, *pr, *t, *mem;
	struct pipette_stack st;
	double tp, dp, cp, ppd, gb, seq;
	int rc = PIPETTE_EXIT_USAGE;

	memset(p, 0, sizeof(*p));
	if (!(root = pipette_json_read(path, "--plan", 64 << 20, 64, NULL, &err)))
		return cli_error("%s", err.msg);
	if (str(root, "schema", path, p->model, sizeof(p->model)))
		goto out;
	if (strcmp(p->model, "pipette-plan/1")) {
		cli_error("--plan: %s: schema: expected \"pipette-plan/1\" (pipette plan --format json)",
			  path);
		goto out;
	}
	if (str(root, "model", path, p->model, sizeof(p->model)) ||
	    str(root, "gpu", path, p->gpu, sizeof(p->gpu)) ||
	    str(root, "stack", path, p->stack, sizeof(p->stack)) ||
	    str(root, "plan_hash", path, p->hash, sizeof(p->hash)))
		goto out;
	/* the hash names the observation's file: 16 hex digits, nothing else */
	if (strlen(p->hash) != 16 || strspn(p->hash, "0123456789abcdef") != 16) {
		cli_error("--plan: %s: plan_hash: '%.32s' is not 16 hex digits", path, p->hash);
		goto out;
	}
	if (pipette_stack_lookup(p->stack, &st, &err)) {
		cli_error("--plan: %s: stack: %s", path, err.msg);
		goto out;
	}
	p->stack_id = st.id;
	if (!json_object_object_get_ex(root, "config", &cfg) ||
	    !json_object_object_get_ex(root, "predicted", &pr) ||
	    !json_object_object_get_ex(pr, "time", &t) ||
	    !json_object_object_get_ex(pr, "memory", &mem)) {
		cli_error("--plan: %s: expected config, predicted.time and predicted.memory", path);
		goto out;
	}
	if (size_of(cfg, "tp", path, 1 << 20, &tp) || size_of(cfg, "pp", path,
							       PIPETTE_OBS_MAX_STAGES, &ppd) ||
	    size_of(cfg, "dp", path, 1 << 20, &dp) || size_of(cfg, "cp", path, 1 << 20, &cp) ||
	    num(cfg, "config", "global_batch", path, &gb) ||
	    num(cfg, "config", "seq_len", path, &seq) ||
	    num(t, "predicted.time", "iteration_s", path, &p->site_s) ||
	    num(t, "predicted.time", "model_s", path, &p->model_s) ||
	    num(t, "predicted.time", "model_compute_s", path, &p->compute_s) ||
	    num(t, "predicted.time", "model_comm_s", path, &p->comm_s))
		goto out;
	if (tp * dp * cp > 1 << 20 || !(p->model_s > 0)) {
		cli_error("--plan: %s: config.tp x dp x cp or predicted.time.model_s out of range",
			  path);
		goto out;
	}
	p->pp = (int)ppd;
	p->per_stage = (int)(tp * dp * cp);
	p->world = (long)(tp * dp * cp * ppd);
	p->tokens_per_step = gb * seq;
	p->tp = (long)tp;
	p->dp = (long)dp;
	p->cp = (long)cp;
	p->global_batch = (long)gb;
	p->seq_len = (long)seq;
	if (dp_split(cfg, path, p))
		goto out;
	rc = plan_stages(mem, path, p);
out:
	json_object_put(root);
	return rc;
}

/* One figure the log states against the plan's: 0 when they agree or the
 * log does not state it, else the usage error naming the field. */
static int same(const char *log, const char *field, long stated, long want, const char *what)
{
	if (stated == 0 || stated == want)
		return 0;
	if (stated < 0)
		return cli_error("--log: %s: %s: the log's runs state different values: not the "
				 "log of one job", log, field);
	return cli_error("--log: %s: %s: the log states %ld, the plan %ld%s: not the log of "
			 "this plan's job", log, field, stated, want, what);
}

/* The log against the plan (pipette_trainlog_stated): a log of another
 * configuration is no observation of this plan.  Megatron's arguments
 * are named as Megatron prints them; torchtitan's mesh as it does. */
static int check_log(const struct planned *p, const struct pipette_trainlog *l, const char *log)
{
	const struct pipette_trainlog_stated *s = &l->stated;
	int tt = p->stack_id == PIPETTE_STACK_TORCHTITAN;
	double tokens = s->tokens_per_step;

	if (same(log, tt ? "world size (the device mesh)" : "world_size", s->world, p->world,
		 " GPUs") ||
	    same(log, tt ? "tp" : "tensor_model_parallel_size", s->tp, p->tp, " (tp)") ||
	    same(log, tt ? "pp" : "pipeline_model_parallel_size", s->pp, p->pp, " (pp)") ||
	    same(log, tt ? "cp" : "context_parallel_size", s->cp, p->cp, " (cp)") ||
	    same(log, tt ? "dp_replicate x dp_shard" : "data_parallel_size", s->dp, p->dp,
		 " (dp)") ||
	    (p->dp_shard && same(log, "dp_shard", s->dp_shard, p->dp_shard, " (dp_shard)")) ||
	    (p->dp_replicate && same(log, "dp_replicate", s->dp_replicate, p->dp_replicate,
				     " (dp_replicate)")) ||
	    same(log, "global_batch_size", s->global_batch, p->global_batch, " (global_batch)") ||
	    same(log, "seq_length", s->seq_len, p->seq_len, " (seq_len)"))
		return PIPETTE_EXIT_USAGE;
	if (tokens < 0)
		return cli_error("--log: %s: tokens per train step: the log's runs state different "
				 "values: not the log of one job", log);
	if (tokens > 0 && tokens != p->tokens_per_step)
		return cli_error("--log: %s: tokens per train step: the log states %.0f, the plan "
				 "%.0f (global_batch x seq_len): not the log of this plan's job", log,
				 tokens, p->tokens_per_step);
	return 0;
}

/* The highest reserved peak of each stage's ranks (Megatron, NeMo and
 * torchtitan all number ranks with the pipeline outermost: stage = rank /
 * (world / pp)); a report without a rank or a reserved figure is left out. */
static int stage_peaks(const struct pipette_trainlog *l, const struct planned *p, double *peak)
{
	int i, n = 0;

	for (i = 0; i < p->nstages; i++)
		peak[i] = 0;
	for (i = 0; i < l->nmem; i++) {
		const struct pipette_trainlog_mem *m = &l->mem[i];
		int s = m->stage >= 0 ? m->stage : m->rank >= 0 ? m->rank / p->per_stage : -1;

		if (s < 0 || s >= p->nstages || m->reserved_gib <= 0)
			continue;
		if (m->reserved_gib * 1073741824.0 > peak[s])
			peak[s] = m->reserved_gib * 1073741824.0;
		n++;
	}
	return n;
}

static struct json_object *observation(const struct planned *p, const struct obs_opts *o,
				       const struct pipette_trainlog *l,
				       const struct pipette_trainlog_steady *ss,
				       const double *peak)
{
	char sha[2 * PIPETTE_SHA256_LEN + 1];
	struct json_object *root = json_object_new_object(), *pr = json_object_new_object();
	struct json_object *me = json_object_new_object(), *stages = json_object_new_array();
	char when[32];
	time_t now = time(NULL);
	int i;

	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	json_object_object_add(root, "schema", json_object_new_string("pipette-obs/1"));
	json_object_object_add(root, "gpu", json_object_new_string(p->gpu));
	json_object_object_add(root, "stack", json_object_new_string(p->stack));
	json_object_object_add(root, "model", json_object_new_string(p->model));
	json_object_object_add(root, "plan_hash", json_object_new_string(p->hash));
	json_object_object_add(root, "recorded", json_object_new_string(when));
	json_object_object_add(root, "uid", json_object_new_int((int)getuid()));
	json_object_object_add(root, "log", json_object_new_string(o->log));
	pipette_sha256_hex(l->sha256, sha);
	json_object_object_add(root, "log_sha256", json_object_new_string(sha));
	json_object_object_add(pr, "iteration_s", json_object_new_double(p->model_s));
	json_object_object_add(pr, "compute_s", json_object_new_double(p->compute_s));
	json_object_object_add(pr, "comm_s", json_object_new_double(p->comm_s));
	json_object_object_add(pr, "calibrated_s", json_object_new_double(p->site_s));
	json_object_object_add(root, "predicted", pr);
	json_object_object_add(me, "iteration_s", json_object_new_double(ss->median_s));
	json_object_object_add(me, "p10_s", json_object_new_double(ss->p10_s));
	json_object_object_add(me, "p90_s", json_object_new_double(ss->p90_s));
	json_object_object_add(me, "steps", json_object_new_int64(ss->used));
	json_object_object_add(me, "warmup_steps", json_object_new_int64(ss->skipped));
	json_object_object_add(root, "measured", me);
	for (i = 0; i < p->nstages; i++) {
		struct json_object *s = json_object_new_object();

		json_object_object_add(s, "base_bytes", json_object_new_double(p->base[i]));
		json_object_object_add(s, "transient_bytes", json_object_new_double(p->transient[i]));
		json_object_object_add(s, "measured_reserved_bytes", json_object_new_double(peak[i]));
		json_object_object_add(s, "predicted_bytes", json_object_new_double(p->total[i]));
		json_object_array_add(stages, s);
	}
	json_object_object_add(root, "stages", stages);
	return root;
}

static void print_table(const struct planned *p, const struct pipette_trainlog_steady *ss,
			const double *peak)
{
	int i;

	printf("plan %s: %s on %s, stack %s\n", p->hash, p->model, p->gpu, p->stack);
	printf("step time: measured %.4f s (median of %ld steady steps, %ld warm-up skipped; "
	       "p10 %.4f, p90 %.4f)\n", ss->median_s, ss->used, ss->skipped, ss->p10_s, ss->p90_s);
	printf("           predicted %.4f s (%+.1f%%)", p->site_s,
	       100 * (p->site_s - ss->median_s) / ss->median_s);
	if (p->site_s != p->model_s)
		printf("; the model alone %.4f s (%+.1f%%)", p->model_s,
		       100 * (p->model_s - ss->median_s) / ss->median_s);
	printf("\n           of which computation %.4f s, exposed communication %.4f s\n",
	       p->compute_s, p->comm_s);
	for (i = 0; i < p->nstages; i++) {
		printf("stage %-3d memory: predicted %.2f GiB", i, p->total[i] / 1073741824.0);
		if (peak[i] > 0)
			printf(", measured reserved peak %.2f GiB (%+.1f%%)\n", peak[i] / 1073741824.0,
			       100 * (p->total[i] - peak[i]) / peak[i]);
		else
			printf(", not reported in the log\n");
	}
}

static int parse(int argc, char **argv, struct obs_opts *o)
{
	static const char *const known[] = { "--plan", "--log", "--warmup", "--record", "--format",
					      "--report", "--svg", NULL };
	struct cli_seen seen = { .n = 0 };
	char name[32];
	const char *v;
	int i, rc;

	memset(o, 0, sizeof(*o));
	o->warmup = -1;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return -1;
		}
		if ((rc = cli_option(argc, argv, &i, "observe", known, &seen, name, sizeof(name), &v)))
			return rc;
		if (!strcmp(name, "--plan"))
			o->plan = v;
		else if (!strcmp(name, "--log"))
			o->log = v;
		else if (!strcmp(name, "--record"))
			o->record = v;
		else if (!strcmp(name, "--report"))
			o->report = v;
		else if (!strcmp(name, "--svg"))
			o->svg = v;
		else if (!strcmp(name, "--warmup")) {
			if ((rc = cli_int("--warmup", v, 0, PIPETTE_TRAINLOG_MAX_STEPS, &o->warmup)))
				return rc;
		} else if (cli_parse_format(v, 3, &o->fmt))
			return cli_error("--format: '%.32s': expected table or json", v);
	}
	if (o->report || o->svg) {
		if (!o->report || !o->svg || o->plan || o->log || o->record)
			return cli_error("observe: --report DIR and --svg FILE go together, without "
					 "--plan, --log or --record");
		return 0;
	}
	if (!o->plan || !o->log)
		return cli_error("observe: --plan and --log are required (see pipette observe --help)");
	if ((rc = cli_check_input("--plan", o->plan)) || (rc = cli_check_input("--log", o->log)))
		return rc;
	return 0;
}

/* The store's unit is a job: one file per plan and log, HASH-LOG.json
 * (the plan's hash and the first 16 hex digits of the log's SHA-256), so
 * that recording one job again replaces its observation (and says so)
 * instead of weighing it twice in the fit.  Written atomically. */
static int record(const char *dir, const struct planned *p,
		  const struct pipette_trainlog *l, struct json_object *obs)
{
	struct pipette_err err;
	char path[4096], sha[2 * PIPETTE_SHA256_LEN + 1];
	struct stat st;
	int again;

	pipette_sha256_hex(l->sha256, sha);
	if ((size_t)snprintf(path, sizeof(path), "%s/%s-%.16s.json", dir, p->hash, sha) >=
	    sizeof(path))
		return cli_error("--record: %s: path too long", dir);
	again = lstat(path, &st) == 0;
	if (again && st.st_uid != geteuid()) {
		/* a shared store: another user's file, which this user may
		 * not replace (and need not: it is the same job) */
		fprintf(stderr, "pipette: the store already holds the observation of this plan "
			"and log, recorded by uid %u: not recorded again: %s\n",
			(unsigned)st.st_uid, path);
		return 0;
	}
	if (pipette_json_write_file(path, "--record", obs, 0644, 1, &err))
		return cli_error("%s", err.msg);
	if (again)
		fprintf(stderr, "pipette: replaced the earlier observation of this plan and log: "
			"%s\n", path);
	else
		fprintf(stderr, "pipette: recorded %s\n", path);
	return 0;
}

/* --report DIR --svg OUT, written whole or not at all. */
static int report(const struct obs_opts *o)
{
	struct pipette_observation *obs = NULL;
	struct pipette_err err;
	char *svg = NULL;
	size_t len = 0;
	FILE *f;
	int n = 0, rc;

	if ((rc = cli_obs_load("--report", o->report, &obs, &n)))
		return rc;
	if ((f = open_memstream(&svg, &len)) && cli_obs_report_svg(obs, n, f))
		rc = -1;
	if (!f || fclose(f) || rc) {
		rc = cli_error("--svg: %s: out of memory", o->svg);
	} else if (pipette_write_file(o->svg, "--svg", svg, len, 0644, 1, &err)) {
		rc = cli_error("%s", err.msg);
	} else {
		fprintf(stderr, "pipette: %d observations drawn in %s\n", n, o->svg);
	}
	free(svg);
	pipette_obs_free(obs, n);
	return rc;
}

int cmd_observe(int argc, char **argv)
{
	struct obs_opts o;
	struct planned p;
	struct pipette_trainlog *l = NULL;
	struct pipette_trainlog_steady ss;
	struct pipette_err err;
	struct json_object *obs = NULL;
	double peak[PIPETTE_OBS_MAX_STAGES];
	int rc = parse(argc, argv, &o);

	if (rc)
		return rc < 0 ? PIPETTE_EXIT_OK : rc;
	if (o.report)
		return report(&o);
	if ((rc = read_plan(o.plan, &p)))
		return rc;
	if (pipette_trainlog_read(o.log, p.stack_id, &l, &err))
		return cli_error("--log: %s", err.msg);
	if ((rc = check_log(&p, l, o.log))) {
		pipette_trainlog_destroy(l);
		return rc;
	}
	/* torchtitan prints tokens per second: the plan says how many
	 * tokens a step takes and on how many GPUs */
	if ((p.stack_id == PIPETTE_STACK_TORCHTITAN &&
	     pipette_trainlog_derive(l, p.tokens_per_step, p.world, &err)) ||
	    pipette_trainlog_steady(l, o.warmup, &ss, &err)) {
		pipette_trainlog_destroy(l);
		return cli_error("--log: %s", err.msg);
	}
	stage_peaks(l, &p, peak);
	obs = observation(&p, &o, l, &ss, peak);
	if (o.fmt == PIPETTE_FMT_JSON)
		printf("%s\n", json_object_to_json_string_ext(obs, JSON_C_TO_STRING_PRETTY |
							       JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		print_table(&p, &ss, peak);
	rc = o.record ? record(o.record, &p, l, obs) : PIPETTE_EXIT_OK;
	json_object_put(obs);
	pipette_trainlog_destroy(l);
	return rc;
}
