/* pipette: a saved plan read back and pinned (planfile.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "inputs/hardware.h"
#include "inputs/json.h"
#include "inputs/limits.h"
#include "inputs/model.h"
#include "inputs/stack.h"
#include "plan/planfile.h"

/* json-c nests a plan file 5 deep (predicted.memory.per_stage[i]); room. */
#define PLANFILE_DEPTH 32
/* Ranked configurations kept: `pipette plan --top` lists at most 1000. */
#define MAX_RANKED 1000

struct pipette_planfile {
	char path[PIPETTE_PATH_MAX];
	struct json_object *root;
	char model[128], stack[32], gpu[64], hash[PIPETTE_HASH_HEX + 1];
	char bandwidth[PIPETTE_PATH_MAX];
	char mapping[16];
	enum pipette_launch_mode launch;
	int gpus_per_node, nnodes;
	const char **nodes;		/* into root */
	struct json_object *config;	/* the plan's own */
	double time_s, peak_bytes;
	int nranked;
	struct json_object **ranked;	/* each entry's "config" */
	double *ranked_s, *ranked_peak;
};

void pipette_planfile_destroy(struct pipette_planfile *pf)
{
	if (!pf)
		return;
	json_object_put(pf->root);
	free(pf->nodes);
	free(pf->ranked);
	free(pf->ranked_s);
	free(pf->ranked_peak);
	free(pf);
}

/* A member that must be an object. */
static struct json_object *member(struct json_object *o, const char *key, const char *src,
				  const char *where, struct pipette_err *err)
{
	struct json_object *v = NULL;

	if (!o || !json_object_object_get_ex(o, key, &v) ||
	    json_object_get_type(v) != json_type_object) {
		pipette_fail(err, "%s: %s%s: expected an object (pipette plan --format json)", src,
			     where, key);
		return NULL;
	}
	return v;
}

/* A string that may be empty (recompute_modules, compression). */
static int text_of(struct json_object *o, const char *key, const char *src, char *out,
		   size_t len, struct pipette_err *err)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || json_object_get_type(v) != json_type_string)
		return pipette_fail(err, "%s: config.%s: expected a string", src, key);
	if (pipette_strlcpy(out, json_object_get_string(v), len))
		return pipette_fail(err, "%s: config.%s: longer than %zu bytes", src, key, len - 1);
	return 0;
}

/* A whole number of config in [lo, hi]. */
static int whole(struct json_object *cfg, const char *key, const char *src, long lo, long hi,
		 long *out, struct pipette_err *err)
{
	char at[PIPETTE_ERR_MAX];
	double v;

	snprintf(at, sizeof(at), "%.300s: config", src);
	if (pipette_json_number(cfg, key, at, &v, err))
		return -1;
	if (v < lo || v > hi || v != floor(v))
		return pipette_fail(err, "%s: config.%s: %g is not a whole number in [%ld, %ld]", src,
				    key, v, lo, hi);
	*out = (long)v;
	return 0;
}

static int flag(struct json_object *cfg, const char *key, const char *src, int *out,
		struct pipette_err *err)
{
	struct json_object *v;

	if (!json_object_object_get_ex(cfg, key, &v) || json_object_get_type(v) != json_type_boolean)
		return pipette_fail(err, "%s: config.%s: expected true or false", src, key);
	*out = json_object_get_boolean(v);
	return 0;
}

static int cluster_of(struct pipette_planfile *pf, struct json_object *cl, struct pipette_err *err)
{
	struct json_object *nodes, *v;
	double g;
	size_t i, n;

	if (!json_object_object_get_ex(cl, "nodes", &nodes) ||
	    json_object_get_type(nodes) != json_type_array ||
	    (n = json_object_array_length(nodes)) < 1 || n > PIPETTE_MAX_NODES)
		return pipette_fail(err, "%s: cluster.nodes: expected 1 to %d node names", pf->path,
				    PIPETTE_MAX_NODES);
	if (!(pf->nodes = calloc(n, sizeof(*pf->nodes))))
		return pipette_fail(err, "%s: out of memory", pf->path);
	for (i = 0; i < n; i++) {
		v = json_object_array_get_idx(nodes, i);
		if (json_object_get_type(v) != json_type_string || !*json_object_get_string(v))
			return pipette_fail(err, "%s: cluster.nodes[%zu]: expected a node name",
					    pf->path, i);
		pf->nodes[i] = json_object_get_string(v);
	}
	pf->nnodes = (int)n;
	if (pipette_json_number(cl, "gpus_per_node", pf->path, &g, err))
		return -1;
	if (g < 1 || g > PIPETTE_MAX_GPUS || g != floor(g))
		return pipette_fail(err, "%s: cluster.gpus_per_node: %g is not in [1, %d]", pf->path,
				    g, PIPETTE_MAX_GPUS);
	pf->gpus_per_node = (int)g;
	if (pipette_json_string(cl, "bandwidth", pf->path, pf->bandwidth, sizeof(pf->bandwidth),
				err))
		return -1;
	if (!strcmp(pf->bandwidth, "nominal"))
		pf->bandwidth[0] = '\0';
	return 0;
}

static int mapping_of(struct pipette_planfile *pf, struct json_object *m, struct pipette_err *err)
{
	enum pipette_mapping_mode mode;
	char launch[16];

	if (pipette_json_string(m, "mode", pf->path, pf->mapping, sizeof(pf->mapping), err) ||
	    pipette_json_string(m, "launch", pf->path, launch, sizeof(launch), err))
		return -1;
	if (pipette_mapping_parse(pf->mapping, &mode, err) ||
	    pipette_launch_parse(launch, &pf->launch, err))
		return pipette_fail_prefix(err, "%s: mapping: ", pf->path);
	return 0;
}

static int ranked_of(struct pipette_planfile *pf, struct json_object *a, struct pipette_err *err)
{
	size_t i, n;

	if (json_object_get_type(a) != json_type_array || (n = json_object_array_length(a)) < 1 ||
	    n > MAX_RANKED)
		return pipette_fail(err, "%s: ranked: expected 1 to %d configurations", pf->path,
				    MAX_RANKED);
	pf->ranked = calloc(n, sizeof(*pf->ranked));
	pf->ranked_s = calloc(n, sizeof(double));
	pf->ranked_peak = calloc(n, sizeof(double));
	if (!pf->ranked || !pf->ranked_s || !pf->ranked_peak)
		return pipette_fail(err, "%s: out of memory", pf->path);
	for (i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		char at[PIPETTE_PATH_MAX + 64];

		snprintf(at, sizeof(at), "ranked[%zu].", i);
		if (!(pf->ranked[i] = member(e, "config", pf->path, at, err)))
			return -1;
		snprintf(at, sizeof(at), "%.300s: ranked[%zu]", pf->path, i);
		if (pipette_json_number(e, "iteration_s", at, &pf->ranked_s[i], err) ||
		    pipette_json_number(e, "peak_bytes", at, &pf->ranked_peak[i], err))
			return -1;
	}
	pf->nranked = (int)n;
	return 0;
}

/* The top level: identity, cluster, mapping, configurations. */
static int fields(struct pipette_planfile *pf, struct pipette_err *err)
{
	struct json_object *r = pf->root, *cl, *m, *pr, *mem, *rk;
	char schema[32], at[PIPETTE_PATH_MAX + 32];

	if (pipette_json_string(r, "schema", pf->path, schema, sizeof(schema), err))
		return -1;
	if (strcmp(schema, "pipette-plan/1"))
		return pipette_fail(err, "%s: schema: '%s', expected \"pipette-plan/1\" (pipette plan "
				    "--format json)", pf->path, schema);
	if (pipette_json_string(r, "model", pf->path, pf->model, sizeof(pf->model), err) ||
	    pipette_json_string(r, "gpu", pf->path, pf->gpu, sizeof(pf->gpu), err) ||
	    pipette_json_string(r, "stack", pf->path, pf->stack, sizeof(pf->stack), err) ||
	    pipette_json_string(r, "plan_hash", pf->path, pf->hash, sizeof(pf->hash), err))
		return -1;
	if (strlen(pf->hash) != PIPETTE_HASH_HEX ||
	    strspn(pf->hash, "0123456789abcdef") != PIPETTE_HASH_HEX)
		return pipette_fail(err, "%s: plan_hash: '%s' is not %d hex digits", pf->path,
				    pf->hash, PIPETTE_HASH_HEX);
	if (!(cl = member(r, "cluster", pf->path, "", err)) || cluster_of(pf, cl, err) ||
	    !(m = member(r, "mapping", pf->path, "", err)) || mapping_of(pf, m, err) ||
	    !(pf->config = member(r, "config", pf->path, "", err)) ||
	    !(pr = member(r, "predicted", pf->path, "", err)) ||
	    !(mem = member(pr, "memory", pf->path, "predicted.", err)))
		return -1;
	snprintf(at, sizeof(at), "%s: predicted", pf->path);
	if (pipette_json_number(pr, "iteration_s", at, &pf->time_s, err))
		return -1;
	snprintf(at, sizeof(at), "%s: predicted.memory", pf->path);
	if (pipette_json_number(mem, "peak_bytes", at, &pf->peak_bytes, err))
		return -1;
	if (!json_object_object_get_ex(r, "ranked", &rk))
		return pipette_fail(err, "%s: ranked: missing", pf->path);
	return ranked_of(pf, rk, err);
}

int pipette_planfile_parse(const char *text, size_t len, const char *name,
			   struct pipette_planfile **out, struct pipette_err *err)
{
	struct pipette_planfile *pf = calloc(1, sizeof(*pf));

	*out = NULL;
	if (!pf)
		return pipette_fail(err, "%s: out of memory", name);
	(void)pipette_strlcpy(pf->path, name, sizeof(pf->path));
	if (!(pf->root = pipette_json_parse(text, len, name, PLANFILE_DEPTH, err)) ||
	    fields(pf, err)) {
		pipette_planfile_destroy(pf);
		return -1;
	}
	*out = pf;
	return 0;
}

int pipette_planfile_read(const char *path, struct pipette_planfile **out,
			  struct pipette_err *err)
{
	struct pipette_file f;
	int rc;

	*out = NULL;
	if (pipette_read_file(path, "plan file", PIPETTE_PLANFILE_MAX_BYTES, &f, err))
		return -1;
	rc = pipette_planfile_parse(f.data, f.len, path, out, err);
	pipette_file_free(&f);
	return rc;
}

const char *pipette_planfile_hash(const struct pipette_planfile *pf) { return pf->hash; }
const char *pipette_planfile_model(const struct pipette_planfile *pf) { return pf->model; }
const char *pipette_planfile_stack(const struct pipette_planfile *pf) { return pf->stack; }
const char *pipette_planfile_gpu(const struct pipette_planfile *pf) { return pf->gpu; }
const char *pipette_planfile_bandwidth(const struct pipette_planfile *pf) { return pf->bandwidth; }
enum pipette_launch_mode pipette_planfile_launch(const struct pipette_planfile *pf)
{
	return pf->launch;
}
int pipette_planfile_gpus_per_node(const struct pipette_planfile *pf) { return pf->gpus_per_node; }
int pipette_planfile_ranked_count(const struct pipette_planfile *pf) { return pf->nranked; }

static struct json_object *config_at(const struct pipette_planfile *pf, int k)
{
	return k < 0 || k >= pf->nranked ? pf->config : pf->ranked[k];
}

static long config_long(const struct pipette_planfile *pf, int k, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(config_at(pf, k), key, &v) ? json_object_get_int64(v) : 0;
}

static const char *config_str(const struct pipette_planfile *pf, int k, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(config_at(pf, k), key, &v) &&
	       json_object_get_type(v) == json_type_string ? json_object_get_string(v) : "?";
}

long pipette_planfile_global_batch(const struct pipette_planfile *pf)
{
	return config_long(pf, -1, "global_batch");
}

long pipette_planfile_seq_len(const struct pipette_planfile *pf)
{
	return config_long(pf, -1, "seq_len");
}

double pipette_planfile_time(const struct pipette_planfile *pf, int k)
{
	return k < 0 || k >= pf->nranked ? pf->time_s : pf->ranked_s[k];
}

double pipette_planfile_peak_bytes(const struct pipette_planfile *pf, int k)
{
	return k < 0 || k >= pf->nranked ? pf->peak_bytes : pf->ranked_peak[k];
}

void pipette_planfile_config_text(const struct pipette_planfile *pf, int k, char *buf, size_t len)
{
	const char *sched = config_str(pf, k, "schedule"), *prec = config_str(pf, k, "precision");
	long vpp = config_long(pf, k, "vpp"), shard = config_long(pf, k, "dp_shard");
	size_t n;

	snprintf(buf, len, "tp=%ld pp=%ld dp=%ld cp=%ld", config_long(pf, k, "tp"),
		 config_long(pf, k, "pp"), config_long(pf, k, "dp"), config_long(pf, k, "cp"));
	n = strlen(buf);
	if (config_long(pf, k, "ep") > 1 && n < len)
		n += (size_t)snprintf(buf + n, len - n, " ep=%ld", config_long(pf, k, "ep"));
	if (!strcmp(pf->stack, "torchtitan") && shard > 1 && n < len)
		n += (size_t)snprintf(buf + n, len - n, " shard=%ld", shard);
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, " mb=%ld %s", config_long(pf, k, "micro_batch"),
				      sched);
	if (vpp > 1 && n < len)
		n += (size_t)snprintf(buf + n, len - n, " vpp=%ld", vpp);
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, " recompute=%s",
				      config_str(pf, k, "recompute"));
	if (strcmp(prec, "bf16") && n < len)
		snprintf(buf + n, len - n, " %s", prec);
}

/* ---- pinning ------------------------------------------------------------ */

/* The parallel sizes, the micro batch and the schedule with its chunks. */
static int pin_sizes(const struct pipette_planfile *pf, struct json_object *c,
		     struct pipette_request *req, struct pipette_err *err)
{
	static const char *const sizes[] = { "tp", "pp", "dp", "cp", "ep", "etp", "micro_batch" };
	enum pipette_schedule_kind kind;
	char name[32];
	size_t i;
	long v;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (whole(c, sizes[i], pf->path, 1, PIPETTE_MAX_PIN, &v, err))
			return -1;
		*pipette_pin_slot(&req->pins, sizes[i]) = (int)v;
	}
	if (text_of(c, "schedule", pf->path, name, sizeof(name), err))
		return -1;
	if (pipette_schedule_parse(name, &kind, err))
		return pipette_fail_prefix(err, "%s: config.schedule: ", pf->path);
	req->pins.schedule = (int)kind;
	req->pins.schedule_set = 0;
	if (whole(c, "vpp", pf->path, 1, PIPETTE_MAX_PIN, &v, err))
		return -1;
	/* "vpp" is the chunks per pipeline rank: a V schedule's 2 is its
	 * shape, not a pin */
	if (pipette_schedule_is_looped(kind) && !pipette_schedule_is_v(kind))
		req->pins.vpp = (int)v;
	return 0;
}

/* Recomputation, sharding, precision, MoE dispatch, compression. */
static int pin_knobs(const struct pipette_planfile *pf, struct json_object *c,
		     struct pipette_request *req, struct pipette_err *err)
{
	struct pipette_stack st;
	enum pipette_recompute rc;
	enum pipette_reshard rs;
	enum pipette_dispatcher d;
	char s[256];
	unsigned mods;
	long v;

	if (text_of(c, "recompute", pf->path, s, sizeof(s), err))
		return -1;
	if (pipette_recompute_parse(s, &rc, err))
		return pipette_fail_prefix(err, "%s: config.recompute: ", pf->path);
	req->pins.recompute = (int)rc;
	if (text_of(c, "recompute_modules", pf->path, s, sizeof(s), err))
		return -1;
	if (s[0] && pipette_recompute_modules_parse(s, &mods, err))
		return pipette_fail_prefix(err, "%s: config.recompute_modules: ", pf->path);
	if (s[0])
		req->pins.recompute_modules = mods;
	if (flag(c, "sequence_parallel", pf->path, &req->pins.sequence_parallel, err) ||
	    flag(c, "distributed_optimizer", pf->path, &req->pins.distributed_optimizer, err) ||
	    text_of(c, "precision", pf->path, s, sizeof(s), err))
		return -1;
	if (pipette_precision_set_parse(s, &req->pins.precision_set, err))
		return pipette_fail_prefix(err, "%s: config.precision: ", pf->path);
	if (pipette_stack_lookup(pf->stack, &st, err))
		return pipette_fail_prefix(err, "%s: stack: ", pf->path);
	if (st.fsdp) {
		if (whole(c, "dp_shard", pf->path, 1, PIPETTE_MAX_PIN, &v, err))
			return -1;
		req->pins.dp_shard = (int)v;
		if (whole(c, "recompute_every", pf->path, 1, PIPETTE_MAX_PIN, &v, err))
			return -1;
		req->pins.recompute_every = (int)v;
		if (text_of(c, "fsdp_reshard_after_forward", pf->path, s, sizeof(s), err))
			return -1;
		if (pipette_reshard_parse(s, &rs, err))
			return pipette_fail_prefix(err, "%s: config.fsdp_reshard_after_forward: ",
						   pf->path);
		req->pins.reshard = (int)rs;
	} else {
		if (text_of(c, "moe_dispatcher", pf->path, s, sizeof(s), err))
			return -1;
		if (pipette_dispatcher_parse(s, &d, err))
			return pipette_fail_prefix(err, "%s: config.moe_dispatcher: ", pf->path);
		req->pins.dispatcher = (int)d;
		if (flag(c, "ep_overlap", pf->path, &req->pins.ep_overlap, err))
			return -1;
	}
	if (text_of(c, "compression", pf->path, s, sizeof(s), err))
		return -1;
	if (s[0] && pipette_compression_parse(s, &req->compress, err))
		return pipette_fail_prefix(err, "%s: config.compression: ", pf->path);
	return 0;
}

/* One figure of the job the request may name already: it must agree. */
static int agree(const struct pipette_planfile *pf, const char *key, long file, long *req,
		 const char *opt, struct pipette_err *err)
{
	if (*req > 0 && *req != file)
		return pipette_fail(err, "plan file %s: config.%s: the plan is for %ld, the request "
				    "names %ld (%s)", pf->path, key, file, *req, opt);
	*req = file;
	return 0;
}

/* The job's facts the plan records. */
static int pin_facts(const struct pipette_planfile *pf, struct json_object *c,
		     struct pipette_request *req, struct pipette_err *err)
{
	long gb, seq, first, last;
	double cap, imb;
	int pad;
	char s[32];

	if (whole(c, "global_batch", pf->path, 1, PIPETTE_MAX_GLOBAL_BATCH, &gb, err) ||
	    whole(c, "seq_len", pf->path, 1, PIPETTE_MAX_SEQ_LEN, &seq, err) ||
	    agree(pf, "global_batch", gb, &req->global_batch, "global batch", err) ||
	    agree(pf, "seq_len", seq, &req->seq_len, "sequence length", err) ||
	    text_of(c, "attention", pf->path, s, sizeof(s), err))
		return -1;
	if (pipette_attention_parse(s, &req->attention, err))
		return pipette_fail_prefix(err, "%s: config.attention: ", pf->path);
	req->attention_given = 1;
	if (whole(c, "bf16_first_layers", pf->path, 0, 1 << 16, &first, err) ||
	    whole(c, "bf16_last_layers", pf->path, 0, 1 << 16, &last, err) ||
	    pipette_json_number(c, "moe_capacity_factor", pf->path, &cap, err) ||
	    pipette_json_number(c, "moe_imbalance", pf->path, &imb, err) ||
	    flag(c, "moe_pad_to_capacity", pf->path, &pad, err))
		return -1;
	req->bf16_first = (int)first;
	req->bf16_last = (int)last;
	if (cap < 0 || cap > 64 || (imb != 0 && (imb < 1 || imb > 65536)))
		return pipette_fail(err, "%s: config.moe_capacity_factor or moe_imbalance out of "
				    "range", pf->path);
	req->moe.capacity_factor = cap;
	req->moe.pad = pad;
	/* 0: a dense model's (plan.h prints the configuration's field) */
	if (imb >= 1)
		req->moe.imbalance = imb;
	return pipette_mapping_parse(pf->mapping, &req->mapping, err);
}

int pipette_planfile_pin(const struct pipette_planfile *pf, int k, struct pipette_request *req,
			 struct pipette_err *err)
{
	struct json_object *c = config_at(pf, k);

	pipette_pins_init(&req->pins);
	return pin_sizes(pf, c, req, err) || pin_knobs(pf, c, req, err) ||
	       pin_facts(pf, c, req, err) ? -1 : 0;
}

/* ---- checks ------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "node1, node2, ... (16 nodes)": the first few of a sorted list. */
static void some_nodes(const char **names, int n, char *buf, size_t len)
{
	size_t used = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < n && i < 4 && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
	if (used < len)
		snprintf(buf + used, len - used, "%s (%d node%s)", n > 4 ? ", ..." : "", n,
			 n == 1 ? "" : "s");
}

static int same_nodes(const struct pipette_planfile *pf, const struct pipette_cluster_spec *cs,
		      struct pipette_err *err)
{
	const char **a = malloc(sizeof(char *) * (size_t)pf->nnodes);
	const char **b = malloc(sizeof(char *) * (size_t)(cs->nodes > 0 ? cs->nodes : 1));
	char fa[256], fb[256];
	int i, same = pf->nnodes == cs->nodes, rv = 0;

	if (!a || !b) {
		free(a);
		free(b);
		return pipette_fail(err, "plan file %s: out of memory", pf->path);
	}
	memcpy(a, pf->nodes, sizeof(char *) * (size_t)pf->nnodes);
	for (i = 0; i < cs->nodes; i++)
		b[i] = cs->node_names[i];
	qsort(a, (size_t)pf->nnodes, sizeof(char *), cmp_str);
	qsort(b, (size_t)cs->nodes, sizeof(char *), cmp_str);
	for (i = 0; same && i < cs->nodes; i++)
		same = !strcmp(a[i], b[i]);
	if (!same) {
		some_nodes(a, pf->nnodes, fa, sizeof(fa));
		some_nodes(b, cs->nodes, fb, sizeof(fb));
		rv = pipette_fail(err, "plan file %s: cluster.nodes: made for %s, the step runs on "
				  "%s", pf->path, fa, fb);
	}
	free(a);
	free(b);
	return rv;
}

int pipette_planfile_check(const struct pipette_planfile *pf, const struct pipette_request *req,
			   const struct pipette_cluster_spec *cs, enum pipette_launch_mode launch,
			   struct pipette_err *err)
{
	const struct pipette_gpu_spec *gpu;
	struct pipette_request res;
	struct pipette_model model;
	struct pipette_stack stack;

	if (pipette_request_resolve(req, &res, &model, &stack, err))
		return -1;
	if (strcmp(model.name, pf->model))
		return pipette_fail(err, "plan file %s: model: made for %s, the step asks for %s",
				    pf->path, pf->model, model.name);
	if (strcmp(stack.name, pf->stack))
		return pipette_fail(err, "plan file %s: stack: made for %s, the step runs %s",
				    pf->path, pf->stack, stack.name);
	if (!(gpu = pipette_gpu_lookup(req->gpu, err)))
		return -1;
	if (strcmp(gpu->name, pf->gpu))
		return pipette_fail(err, "plan file %s: gpu: made for %s, the step's GPUs are %s",
				    pf->path, pf->gpu, gpu->name);
	if (same_nodes(pf, cs, err))
		return -1;
	if (cs->gpus_per_node != pf->gpus_per_node)
		return pipette_fail(err, "plan file %s: cluster.gpus_per_node: made for %d GPUs per "
				    "node, the step has %d", pf->path, pf->gpus_per_node,
				    cs->gpus_per_node);
	if (launch != pf->launch)
		return pipette_fail(err, "plan file %s: mapping.launch: made for %s launch, the step "
				    "runs %s (one task per %s)", pf->path,
				    pipette_launch_name(pf->launch), pipette_launch_name(launch),
				    launch == PIPETTE_LAUNCH_SRUN ? "GPU" : "node");
	return 0;
}

int pipette_planfile_verify(const struct pipette_planfile *pf, const struct pipette_plan *plan,
			    struct pipette_err *err)
{
	if (!strcmp(pipette_plan_hash(plan), pf->hash))
		return 0;
	return pipette_fail(err, "plan file %s: plan_hash: the file's plan is %s, but planning "
			    "its configuration again on these nodes gives %s: the bandwidth cache, "
			    "the calibration, the stack's options or the mapping budget differ from "
			    "those it was made with", pf->path, pf->hash, pipette_plan_hash(plan));
}

int pipette_planfile_same_config(const struct pipette_planfile *pf, int k,
				 const struct pipette_plan *plan)
{
	struct json_object *mine = pipette_config_json(pipette_plan_config(plan));
	struct json_object *want = config_at(pf, k);
	int same = mine != NULL;

	json_object_object_foreach(want, key, val) {
		struct json_object *v;

		if (!same)
			break;
		if (!strcmp(key, "first_stage_layers") || !strcmp(key, "last_stage_layers"))
			continue;
		same = json_object_object_get_ex(mine, key, &v) && json_object_equal(val, v);
	}
	json_object_put(mine);
	return same;
}
