/* Unit tests: every launch line pipette emits is one its stack accepts.
 *
 * The flags each stack's parser defines and the rules its validation
 * enforces were read from the stacks' sources at pinned commits and are
 * carried in tests/data/stacks/ (megatron-args.tsv, megatron-rules.tsv,
 * megatron-schedules.md, zb-fork-args.tsv, nemo-keys.tsv,
 * torchtitan-config.tsv).  Plans for many models, cluster sizes,
 * schedules, pins and precision recipes are rendered for each stack;
 * every flag or key must be one the stack defines, with a value among
 * those the table lists, and the rules below, each named after its line
 * in megatron-rules.tsv or the schedule notes, must hold.  Also: a stack
 * never plans a schedule it cannot run, and the facts that differ between
 * stacks reach the memory estimate. */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "estimate/memory.h"
#include "inputs/model.h"
#include "plan/plan.h"
#include "inputs/stack.h"

#define DATA TEST_DATADIR "/stacks/"
#define MAX_KEYS 256

struct keyset {
	char key[MAX_KEYS][96];
	char rest[MAX_KEYS][512];	/* the row's other columns, for the values */
	int n;
};

/* The first column of a data file, skipping comments, the header and the
 * rows its second column marks MISSING; the other columns in rest. */
static void load_keys(const char *path, struct keyset *ks)
{
	FILE *f = fopen(path, "r");
	char line[2048];

	ck_assert_msg(f != NULL, "%s", path);
	ks->n = 0;
	while (fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t');

		/* a flag that does not exist says MISSING in its dest or its
		 * type column */
		if (line[0] == '#' || !tab || !strncmp(line, "flag\t", 5) ||
		    !strncmp(line, "key\t", 4) || !strncmp(tab + 1, "MISSING", 7) ||
		    (strchr(tab + 1, '\t') && !strncmp(strchr(tab + 1, '\t') + 1, "MISSING", 7)))
			continue;
		*tab = '\0';
		tab[1 + strcspn(tab + 1, "\n")] = '\0';
		ck_assert_int_lt(ks->n, MAX_KEYS);
		pipette_strlcpy(ks->rest[ks->n], tab + 1, sizeof(ks->rest[0]));
		pipette_strlcpy(ks->key[ks->n++], line, sizeof(ks->key[0]));
	}
	fclose(f);
	ck_assert_int_gt(ks->n, 10);
}

/* Key k's other columns, or NULL when the stack has no such key. */
static const char *rest_of(const struct keyset *ks, const char *k)
{
	int i;

	for (i = 0; i < ks->n; i++)
		if (!strcmp(ks->key[i], k))
			return ks->rest[i];
	return NULL;
}

static int has(const struct keyset *ks, const char *k)
{
	return rest_of(ks, k) != NULL;
}

/* Whether v is one of the n characters of list split at any of seps. */
static int listed(const char *list, size_t n, const char *seps, const char *v)
{
	size_t i = 0, k, vl = strlen(v);

	while (i < n) {
		i += strspn(list + i, seps);
		k = strcspn(list + i, seps);
		if (i + k > n)
			k = n - i;
		if (k == vl && k && !strncmp(list + i, v, k))
			return 1;
		i += k;
	}
	return 0;
}

/* The value after flag in a Megatron line ("" for a switch), or NULL. */
static const char *flag(const char *line, const char *name, char *val, size_t len)
{
	const char *p = line;
	size_t n = strlen(name);

	while ((p = strstr(p, name))) {
		if ((p == line || p[-1] == ' ') && (p[n] == ' ' || !p[n])) {
			const char *v = p + n;
			size_t k = 0;

			while (*v == ' ')
				v++;
			if (v[0] == '-' && v[1] == '-')
				v = "";
			while (v[k] && v[k] != ' ' && k + 1 < len) {
				val[k] = v[k];
				k++;
			}
			val[k] = '\0';
			return val;
		}
		p += n;
	}
	return NULL;
}

static long flag_long(const char *line, const char *name)
{
	char v[64];

	return flag(line, name, v, sizeof(v)) ? atol(v) : -1;
}

static struct pipette_plan *plan_with(const char *stack, const char *opts, const char *model,
				      int nodes, long gbs, long seq,
				      const struct pipette_pins *pins);

static struct pipette_plan *plan_for(const char *stack, const char *model, int nodes, long gbs,
				     long seq, const struct pipette_pins *pins)
{
	return plan_with(stack, "", model, nodes, gbs, seq, pins);
}

/* The plan of req on nodes n1 ... of G GPUs each, or NULL with err set. */
static struct pipette_plan *plan_req(const struct pipette_request *req, int nodes, int G,
				     struct pipette_err *err)
{
	static char buf[128][8];
	static const char *names[128];
	struct pipette_cluster_spec cs = { nodes, names, G, NULL };
	struct pipette_plan *p = NULL;
	int i;

	ck_assert_int_le(nodes, 128);
	for (i = 0; i < nodes; i++) {
		snprintf(buf[i], sizeof(buf[i]), "n%d", i + 1);
		names[i] = buf[i];
	}
	if (pipette_plan_compute(req, &cs, &p, err))
		return NULL;
	return p;
}

static struct pipette_plan *plan_with(const char *stack, const char *opts, const char *model,
				      int nodes, long gbs, long seq,
				      const struct pipette_pins *pins)
{
	struct pipette_request req;
	struct pipette_err err;

	pipette_request_init(&req);
	pipette_strlcpy(req.model, model, sizeof(req.model));
	pipette_strlcpy(req.gpu, "H100", sizeof(req.gpu));
	pipette_strlcpy(req.stack, stack, sizeof(req.stack));
	pipette_strlcpy(req.stack_options, opts, sizeof(req.stack_options));
	req.global_batch = gbs;
	req.seq_len = seq;
	req.mapping = PIPETTE_MAP_BLOCK;
	if (pins)
		req.pins = *pins;
	return plan_req(&req, nodes, 8, &err);	/* NULL: no fit under these pins */
}

/* megatron-rules.tsv, one check per rule id. */
static void check_megatron_rules(const struct pipette_plan *p, const char *line, int zb)
{
	const struct pipette_config *c = pipette_plan_config(p);
	const struct pipette_model *m = NULL;
	char v[64];
	long vpp = flag_long(line, "--num-virtual-stages-per-pipeline-rank");
	long lpv = flag_long(line, "--num-layers-per-virtual-pipeline-stage");
	long mbs = flag_long(line, "--micro-batch-size"), gbs = flag_long(line, "--global-batch-size");
	long M = gbs / (mbs * c->dp);

	(void)m;
	/* opg-needs-distopt, opg-needs-ogr */
	if (flag(line, "--overlap-param-gather", v, sizeof(v)))
		ck_assert_msg(flag(line, "--use-distributed-optimizer", v, sizeof(v)) &&
			      flag(line, "--overlap-grad-reduce", v, sizeof(v)), "%s", line);
	/* tpco-needs-sp, sp-tp1 */
	if (flag(line, "--tp-comm-overlap", v, sizeof(v)))
		ck_assert_msg(flag(line, "--sequence-parallel", v, sizeof(v)) != NULL, "%s", line);
	if (flag(line, "--sequence-parallel", v, sizeof(v)))
		ck_assert_msg(c->tp > 1, "%s", line);
	/* gbs-divisible */
	ck_assert_msg(gbs % (mbs * c->dp) == 0, "%s", line);
	/* cp-seq */
	if (c->cp > 1)
		ck_assert_msg(flag_long(line, "--seq-length") % (2 * c->cp) == 0, "%s", line);
	/* vpp-one-of, vpp-pp-size, vpp-mb-range, vpp-mb-remainder */
	ck_assert_msg(vpp < 0 || lpv < 0, "%s", line);
	if (vpp > 0 || lpv > 0) {
		ck_assert_msg(c->pp > 1 && M >= c->pp && M % c->pp == 0, "M %ld: %s", M, line);
		ck_assert_msg(flag(line, "--decoder-first-pipeline-num-layers", v, sizeof(v)) == NULL,
			      "uneven with VPP: %s", line);
	}
	/* uneven-first, uneven-last */
	if (flag(line, "--decoder-first-pipeline-num-layers", v, sizeof(v)))
		ck_assert_msg(atol(v) > 0, "%s", line);
	if (flag(line, "--decoder-last-pipeline-num-layers", v, sizeof(v)))
		ck_assert_msg(atol(v) > 0, "%s", line);
	/* recompute-full-method, recompute-full-num, recompute-sel-num, -sel-method */
	if (flag(line, "--recompute-granularity", v, sizeof(v))) {
		int full = !strcmp(v, "full");

		ck_assert_msg(!strcmp(v, "full") || !strcmp(v, "selective"), "%s", line);
		ck_assert_int_eq(full, flag(line, "--recompute-method", v, sizeof(v)) != NULL);
		ck_assert_int_eq(full, flag(line, "--recompute-num-layers", v, sizeof(v)) != NULL);
	}
	/* pao-needs-distopt, maingrads-needs-pao */
	if (flag(line, "--use-precision-aware-optimizer", v, sizeof(v)))
		ck_assert_msg(flag(line, "--use-distributed-optimizer", v, sizeof(v)) != NULL, "%s",
			      line);
	if (flag(line, "--exp-avg-dtype", v, sizeof(v)))
		ck_assert_msg(flag(line, "--use-precision-aware-optimizer", v, sizeof(v)) != NULL,
			      "%s", line);
	/* defer-wgrad-pp */
	if (flag(line, "--defer-embedding-wgrad-compute", v, sizeof(v)))
		ck_assert_msg(c->pp > 1, "%s", line);
	if (zb) {
		/* zbpp_utils.py:130-133: ZB with the distributed optimizer
		 * refuses DP overlap; :109-119: the V schedules set their
		 * own virtual stages, from an even count per stage. */
		if (flag(line, "--enable-zero-bubble", v, sizeof(v)) && c->distributed_optimizer)
			ck_assert_msg(!flag(line, "--overlap-grad-reduce", v, sizeof(v)) &&
				      !flag(line, "--overlap-param-gather", v, sizeof(v)), "%s", line);
		if (flag(line, "--zero-bubble-v-schedule", v, sizeof(v)))
			ck_assert_msg(lpv < 0, "%s", line);
		if (flag(line, "--enable-zero-bubble", v, sizeof(v)) ||
		    flag(line, "--zero-bubble-v-schedule", v, sizeof(v)))
			ck_assert_msg(flag(line, "--enable-zb-runtime", v, sizeof(v)) && c->pp > 1,
				      "%s", line);
	} else {
		ck_assert_msg(c->schedule == PIPETTE_SCHED_1F1B ||
			      c->schedule == PIPETTE_SCHED_INTERLEAVED, "%s", line);
	}
}

/* Every --flag of the line is one of the stack's, and the value after a
 * flag whose type column (megatron-args.tsv) lists choices=(...) is one
 * of them. */
static void check_flags_known(const char *line, const struct keyset *known)
{
	char copy[4096], *tok, *save = NULL;

	pipette_strlcpy(copy, line, sizeof(copy));
	for (tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		const char *rest, *type, *ch;
		char v[64];

		if (tok[0] != '-' || tok[1] != '-')
			continue;
		rest = rest_of(known, tok);
		ck_assert_msg(rest != NULL, "%s is not a flag of the stack's parser: %s", tok, line);
		type = strchr(rest, '\t');
		ch = type ? strstr(type + 1, "choices=(") : NULL;
		if (!ch || ch > type + 1 + strcspn(type + 1, "\t") ||
		    !flag(line, tok, v, sizeof(v)) || !v[0])
			continue;
		ch += 9;
		ck_assert_msg(listed(ch, strcspn(ch, ")"), ", ", v), "%s %s: not one of (%.*s): %s",
			      tok, v, (int)strcspn(ch, ")"), ch, line);
	}
}

static int env_value(void *ctx, const char *name, const char *value)
{
	if (!strcmp(name, "CUDA_DEVICE_MAX_CONNECTIONS"))
		pipette_strlcpy(ctx, value, 16);
	return 0;
}

/* cdmc-tp-cp (upstream), zbpp_utils.py:94-101 (the fork). */
static void check_connections(const struct pipette_plan *p, int zb)
{
	const struct pipette_config *c = pipette_plan_config(p);
	char v[16] = "";

	ck_assert_int_eq(pipette_plan_job_env(p, env_value, v), 0);
	if (zb)
		ck_assert_str_eq(v, "8");
	else if (c->tp > 1 || c->cp > 1)
		ck_assert_str_eq(v, "1");
	else
		ck_assert_str_eq(v, "");
}

struct job {
	const char *model;
	int nodes;
	long gbs, seq;
	int tp, pp, cp, vpp, sched, recompute;
};

static const struct job jobs[] = {
	{ "llama3-8b", 1, 64, 4096, -1, -1, -1, -1, -1, -1 },
	{ "llama3-8b", 4, 128, 8192, -1, -1, 2, -1, -1, -1 },
	{ "llama3-70b", 16, 512, 8192, -1, -1, -1, -1, -1, -1 },
	{ "llama3-70b", 16, 512, 4096, 8, 4, -1, 4, PIPETTE_SCHED_INTERLEAVED, -1 },
	{ "llama3-70b", 8, 256, 4096, 8, 8, -1, -1, PIPETTE_SCHED_1F1B, PIPETTE_RECOMPUTE_FULL },
	{ "llama3-70b", 8, 256, 4096, 4, 8, -1, -1, -1, PIPETTE_RECOMPUTE_SELECTIVE },
	{ "mixtral-8x7b", 8, 256, 4096, -1, -1, -1, -1, -1, -1 },
	{ "nemotron4-15b", 2, 64, 4096, -1, -1, -1, -1, -1, -1 },
	{ "nemotron4-340b", 16, 32, 4096, 8, 8, -1, 12, PIPETTE_SCHED_INTERLEAVED, PIPETTE_RECOMPUTE_FULL },
	{ "gpt3-175b", 16, 256, 2048, -1, -1, -1, -1, -1, -1 },
	{ "llama3-8b", 4, 64, 4096, 1, 4, -1, -1, PIPETTE_SCHED_ZB_H1, -1 },
	{ "llama3-8b", 4, 64, 4096, 2, 4, -1, -1, PIPETTE_SCHED_V_HALF, -1 },
	{ "llama3-8b", 4, 64, 4096, 2, 4, -1, -1, PIPETTE_SCHED_V_MIN, -1 },
	{ "llama3-8b", 4, 64, 4096, 1, 8, -1, -1, PIPETTE_SCHED_V_ZB, -1 },
};

static struct pipette_pins pins_of(const struct job *j)
{
	struct pipette_pins p;

	pipette_pins_init(&p);
	p.tp = j->tp;
	p.pp = j->pp;
	p.cp = j->cp;
	p.vpp = j->vpp;
	p.schedule = j->sched;
	p.recompute = j->recompute;
	return p;
}

START_TEST(test_megatron_lines)
{
	static const char *const stacks[] = { "megatron", "megatron-zb", "megatron-2022" };
	struct keyset *upstream = malloc(sizeof(*upstream)), *fork = malloc(sizeof(*fork));
	char line[4096];
	size_t s, j;
	int planned = 0;

	load_keys(DATA "megatron-args.tsv", upstream);
	load_keys(DATA "zb-fork-args.tsv", fork);
	for (s = 0; s < 3; s++)
		for (j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++) {
			struct pipette_pins pins = pins_of(&jobs[j]);
			struct pipette_plan *p = plan_for(stacks[s], jobs[j].model, jobs[j].nodes,
							  jobs[j].gbs, jobs[j].seq, &pins);
			int zb = s == 1;

			if (!p)
				continue;
			planned++;
			ck_assert_int_eq(pipette_plan_megatron_args(p, line, sizeof(line)), 0);
			/* The 2022 stack is Megatron before Megatron-Core's flags:
			 * its names are checked, not today's rules. */
			check_flags_known(line, zb ? fork : upstream);
			if (s != 2) {
				check_megatron_rules(p, line, zb);
				check_connections(p, zb);
			}
			pipette_plan_destroy(p);
		}
	/* Every override the megatron stack's launch can say. */
	for (j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++) {
		struct pipette_pins pins = pins_of(&jobs[j]);
		struct pipette_plan *p = plan_with("megatron",
						   "adam_states=bf16,grad_reduce=bf16,tp_overlap=on",
						   jobs[j].model, jobs[j].nodes, jobs[j].gbs,
						   jobs[j].seq, &pins);

		if (!p)
			continue;
		planned++;
		ck_assert(pipette_plan_config(p)->distributed_optimizer);
		ck_assert_int_eq(pipette_plan_megatron_args(p, line, sizeof(line)), 0);
		ck_assert_ptr_nonnull(strstr(line, "--exp-avg-dtype bf16"));
		check_flags_known(line, upstream);
		check_megatron_rules(p, line, 0);
		pipette_plan_destroy(p);
	}
	/* The pins above are plannable on each stack but some: not vacuous. */
	ck_assert_int_ge(planned, 30);
	free(upstream);
	free(fork);
}
END_TEST

/* MoE plans as both stacks launch them (megatron-args.tsv, the MoE rules
 * of megatron-rules.tsv, nemo-keys.tsv): DeepSeek-V3 with NVIDIA's H100
 * layout (tp 1, pp 8, vpp 2, ep 64, 4 layers first and 1 last with the
 * MTP layer and the loss, mla_up_proj/mlp/moe recomputed, DeepEP), and
 * Mixtral searched freely on 4 nodes.  layout-grammar and layout-content:
 * E first, L last, one t per layer, one m per MTP layer, pp x vpp
 * stages; moe-overlap-reqs; recompute-modules (moe_act needs grouped
 * GEMMs); the flex dispatcher with the deepep backend. */
static void check_moe_line(const struct pipette_plan *p, const char *line)
{
	const struct pipette_config *c = pipette_plan_config(p);
	char v[512];
	int t = 0, m = 0, bars = 0;
	const char *q;

	if (flag(line, "--pipeline-model-parallel-layout", v, sizeof(v))) {
		ck_assert_msg(v[0] == 'E' && v[strlen(v) - 1] == 'L', "%s", line);
		for (q = v; *q; q++) {
			t += *q == 't';
			m += *q == 'm';
			bars += *q == '|';
			ck_assert_msg(strchr("Etm|L", *q) != NULL, "%s", line);
		}
		ck_assert_int_eq(t, 61);
		ck_assert_int_eq(m, (int)flag_long(line, "--mtp-num-layers"));
		ck_assert_int_eq(bars + 1, c->pp * c->vpp);
		ck_assert(!flag(line, "--num-virtual-stages-per-pipeline-rank", v, sizeof(v)));
		ck_assert(!flag(line, "--decoder-first-pipeline-num-layers", v, sizeof(v)));
	}
	if (flag(line, "--overlap-moe-expert-parallel-comm", v, sizeof(v))) {
		ck_assert(c->ep > 1 && (c->pp == 1 || c->schedule == PIPETTE_SCHED_INTERLEAVED));
		ck_assert(c->recompute != PIPETTE_RECOMPUTE_FULL);
		ck_assert(!(pipette_config_recompute_modules(c) & PIPETTE_RM_MOE));
	}
	if (strstr(line, "moe_act"))
		ck_assert(flag(line, "--moe-grouped-gemm", v, sizeof(v)) != NULL);
	if (flag(line, "--moe-flex-dispatcher-backend", v, sizeof(v))) {
		ck_assert_str_eq(v, "deepep");
		ck_assert(flag(line, "--moe-token-dispatcher-type", v, sizeof(v)) != NULL);
		ck_assert_str_eq(v, "flex");
		ck_assert(!flag(line, "--moe-pad-expert-input-to-capacity", v, sizeof(v)));
	}
	ck_assert(flag(line, "--moe-token-dispatcher-type", v, sizeof(v)) != NULL);
}

/* VALUE is one nemo-keys.tsv writes for the key: one of its '|'-separated
 * values, where "int" and "float" stand for any number of that kind;
 * values of type str and lists are not checked. */
static void check_nemo_value(const char *rest, const char *key, const char *v)
{
	size_t n = strcspn(rest, "\t");
	char *end;

	if (!strncmp(rest, "str", 3) || !strncmp(rest, "list", 4) || listed(rest, n, "|", v))
		return;
	if (listed(rest, n, "|", "int") && (strtol(v, &end, 10), v[0] && !*end))
		return;
	if (listed(rest, n, "|", "float") && (strtod(v, &end), v[0] && !*end))
		return;
	ck_abort_msg("%s=%s: not one of %.*s", key, v, (int)n, rest);
}

/* A list value NeMo-Run's List[str] parser takes: a Python literal of
 * double-quoted names, "[\"a\",\"b\"]" (launch-rules.tsv nemo-list-literal),
 * each one of those nemo-keys.tsv lists for the key ("list of a|b|..."). */
static void check_py_list(const char *key, const char *v, const char *rest)
{
	const char *q = v + 1, *names = strstr(rest, "list of ");

	ck_assert_msg(v[0] == '[' && v[strlen(v) - 1] == ']', "%s=%s: not a list", key, v);
	while (*q != ']') {
		size_t n;

		ck_assert_msg(*q == '"', "%s=%s: an unquoted list element", key, v);
		n = strcspn(q + 1, "\"");
		ck_assert_msg(n > 0 && q[1 + n] == '"', "%s=%s", key, v);
		ck_assert_msg(names != NULL, "%s: no list in nemo-keys.tsv", key);
		{
			char el[64];

			snprintf(el, sizeof(el), "%.*s", (int)n, q + 1);
			ck_assert_msg(listed(names + 8, strcspn(names + 8, "\t"), "|", el),
				      "%s=%s: %s is not one of %s", key, v, el, names + 8);
		}
		q += n + 2;
		ck_assert_msg(*q == ',' || *q == ']', "%s=%s", key, v);
		q += *q == ',';
	}
}

/* key with every [digits] made [] (nemo-keys.tsv lists indexed keys so). */
static void unindex(const char *key, char *out, size_t len)
{
	size_t o = 0;

	for (; *key && o + 1 < len; key++) {
		out[o++] = *key;
		if (*key == '[')
			key += strspn(key + 1, "0123456789");
	}
	out[o] = '\0';
}

/* A NeMo override line: --factory RECIPE(...) and KEY=VALUE words, every
 * key one of nemo-keys.tsv; sp-tp1-core: Megatron-Core raises on SP
 * without TP. */
static void check_nemo_line(const struct keyset *keys, const struct pipette_plan *p,
			    const char *line)
{
	char copy[4096], *tok, *save = NULL;

	pipette_strlcpy(copy, line, sizeof(copy));
	for (tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '='), key[160];

		if (!strcmp(tok, "--factory")) {
			ck_assert(has(keys, tok));
			tok = strtok_r(NULL, " ", &save);
			ck_assert_msg(tok && strchr(tok, '(') && tok[strlen(tok) - 1] == ')', "%s", line);
			continue;
		}
		ck_assert_msg(eq != NULL, "%s", line);
		*eq = '\0';
		unindex(tok, key, sizeof(key));
		ck_assert_msg(has(keys, key), "%s is not a NeMo override key: %s", tok, line);
		if (eq[1] == '[')
			check_py_list(tok, eq + 1, rest_of(keys, key));
		check_nemo_value(rest_of(keys, key), tok, eq + 1);
		if (!strcmp(tok, "trainer.strategy.sequence_parallel") &&
		    pipette_plan_config(p)->tp == 1)
			ck_assert_str_eq(eq + 1, "False");
	}
}

/* The plan's Megatron line, checked against megatron-args.tsv, the
 * upstream rules and the MoE rules; left in line. */
static void check_moe_megatron(const struct pipette_plan *p, const struct keyset *upstream,
			       char *line, size_t len)
{
	ck_assert_int_eq(pipette_plan_megatron_args(p, line, len), 0);
	check_flags_known(line, upstream);
	check_megatron_rules(p, line, 0);
	check_moe_line(p, line);
}

START_TEST(test_moe_lines)
{
	struct keyset *upstream = malloc(sizeof(*upstream)), *keys = malloc(sizeof(*keys));
	static const char *const stacks[] = { "megatron", "nemo" };
	char line[4096];
	struct pipette_pins pins;
	size_t s;

	load_keys(DATA "megatron-args.tsv", upstream);
	load_keys(DATA "nemo-keys.tsv", keys);
	for (s = 0; s < 2; s++) {
		struct pipette_plan *p;

		pipette_pins_init(&pins);
		pins.tp = 1, pins.pp = 8, pins.vpp = 2, pins.ep = 64;
		pins.schedule = PIPETTE_SCHED_INTERLEAVED;
		pins.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
		pins.recompute_modules = PIPETTE_RM_MLA_UP_PROJ | PIPETTE_RM_MLP | PIPETTE_RM_MOE;
		pins.dispatcher = PIPETTE_DISPATCH_DEEPEP;
		p = plan_for(stacks[s], "deepseek-v3", 128, 8192, 4096, &pins);
		ck_assert_ptr_nonnull(p);
		check_moe_megatron(p, upstream, line, sizeof(line));
		ck_assert_ptr_nonnull(strstr(line, "--recompute-modules mla_up_proj mlp moe"));
		ck_assert_int_eq(pipette_plan_launch_args(p, line, sizeof(line)), 0);
		if (s == 1) {
			ck_assert_ptr_nonnull(strstr(line, "model.config.moe_enable_deepep=True"));
			ck_assert_ptr_nonnull(strstr(line, "pipeline_model_parallel_layout=Et"));
			check_nemo_line(keys, p, line);
		}
		pipette_plan_destroy(p);
		pipette_pins_init(&pins);
		p = plan_for(stacks[s], "mixtral-8x7b", 4, 256, 4096, &pins);
		ck_assert_ptr_nonnull(p);
		check_moe_megatron(p, upstream, line, sizeof(line));
		/* NeMo's Mixtral performance recipe drops tokens in a callback
		 * that asserts the alltoall dispatcher: a DeepEP plan has no
		 * nemo form, and says why; with alltoall pinned it has one */
		if (s == 1 && pipette_plan_config(p)->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP) {
			ck_assert_int_eq(pipette_plan_launch_args(p, line, sizeof(line)), 1);
			ck_assert_ptr_nonnull(strstr(line, "asserts the alltoall dispatcher"));
			pipette_plan_destroy(p);
			pins.dispatcher = PIPETTE_DISPATCH_ALLTOALL;
			p = plan_for(stacks[s], "mixtral-8x7b", 4, 256, 4096, &pins);
			ck_assert_ptr_nonnull(p);
		}
		ck_assert_int_eq(pipette_plan_launch_args(p, line, sizeof(line)), 0);
		if (s == 1)
			check_nemo_line(keys, p, line);
		pipette_plan_destroy(p);
	}
	free(upstream);
	free(keys);
}
END_TEST

START_TEST(test_nemo_lines)
{
	struct keyset *keys = malloc(sizeof(*keys));
	char line[4096];
	size_t j;
	int planned = 0;

	load_keys(DATA "nemo-keys.tsv", keys);
	for (j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++) {
		struct pipette_pins pins = pins_of(&jobs[j]);
		struct pipette_plan *p = plan_for("nemo", jobs[j].model, jobs[j].nodes, jobs[j].gbs,
						  jobs[j].seq, &pins);

		if (!p)
			continue;
		planned++;
		ck_assert_int_eq(pipette_plan_launch_args(p, line, sizeof(line)), 0);
		check_nemo_line(keys, p, line);
		/* The performance recipes reduce gradients in bf16. */
		ck_assert_ptr_nonnull(strstr(line, "trainer.plugins.grad_reduce_in_fp32=False"));
		check_connections(p, 0);
		pipette_plan_destroy(p);
	}
	ck_assert_int_ge(planned, 8);
	free(keys);
}
END_TEST

/* The recipe each stack's launch must name for each of pipette's recipes:
 * Megatron-LM's flags as Megatron-Bridge's recipes set the same
 * TransformerConfig fields (NVIDIA-NeMo/Megatron-Bridge @067f987d
 * src/megatron/bridge/training/mixed_precision.py: delayed :217-232,
 * MXFP8 :255-266 (e4m3), tensorwise :285-303, blockwise :373-385, NVFP4
 * :405-417), NeMo 2.0's plugin arguments as NeMo's recipes set them
 * (NVIDIA/NeMo @8cfedd72 nemo/collections/llm/recipes/precision/
 * mixed_precision.py: hybrid for every FP8 recipe, parameters gathered in
 * FP8 but with blockwise scales, :56-216). */
static const struct {
	const char *format_flag, *format, *recipe_flag, *recipe;	/* Megatron-LM */
	const char *nemo;	/* NeMo's fp8_recipe, or NULL for FP4 */
	int gather;		/* NeMo's fp8_param_gather */
} expect_recipe[PIPETTE_PREC_COUNT] = {
	[PIPETTE_PREC_FP8_DELAYED] = { "--fp8-format", "hybrid", "--fp8-recipe", "delayed",
				       "delayed", 1 },
	[PIPETTE_PREC_FP8_CURRENT] = { "--fp8-format", "hybrid", "--fp8-recipe", "tensorwise",
				       "tensorwise", 1 },
	[PIPETTE_PREC_FP8_BLOCKWISE] = { "--fp8-format", "hybrid", "--fp8-recipe", "blockwise",
					 "blockwise", 0 },
	[PIPETTE_PREC_MXFP8] = { "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "mxfp8", 1 },
	[PIPETTE_PREC_NVFP4] = { "--fp4-format", "e2m1", "--fp4-recipe", "nvfp4", NULL, 0 },
};

/* megatron-rules.tsv's precision rules on the Megatron line of a plan of a
 * model of `layers` transformer layers (fp8-fp4-exclusive, fp8-param-
 * distopt, fp4-param-needs-fp4, fp8-bf16-layers, bf16-layers-switch,
 * fp8-recompute; a recipe flag means nothing without its format), and
 * the layers it keeps in BF16 are the plan's. */
static void check_megatron_precision(const struct pipette_plan *p, const char *line, int layers)
{
	const struct pipette_config *c = pipette_plan_config(p);
	char v[64], recipe[64] = "delayed";	/* --fp8-recipe's default */
	int fp8 = flag(line, "--fp8-format", v, sizeof(v)) != NULL;
	int fp4 = flag(line, "--fp4-format", v, sizeof(v)) != NULL;
	int sw = flag(line, "--first-last-layers-bf16", v, sizeof(v)) != NULL;
	long start = flag_long(line, "--num-layers-at-start-in-bf16");
	long end = flag_long(line, "--num-layers-at-end-in-bf16");

	ck_assert_msg(!(fp8 && fp4), "%s", line);
	flag(line, "--fp8-recipe", recipe, sizeof(recipe));
	if (flag(line, "--fp8-recipe", v, sizeof(v)))
		ck_assert_msg(fp8, "%s", line);
	if (flag(line, "--fp4-recipe", v, sizeof(v)))
		ck_assert_msg(fp4, "%s", line);
	if (flag(line, "--fp8-param-gather", v, sizeof(v)))
		ck_assert_msg(fp8 && flag(line, "--use-distributed-optimizer", v, sizeof(v)), "%s",
			      line);
	if (flag(line, "--fp4-param-gather", v, sizeof(v)))
		ck_assert_msg(fp4, "%s", line);
	if (start >= 0 || end >= 0)
		ck_assert_msg(sw, "%s", line);
	if (sw)
		ck_assert_msg(fp8 || fp4, "%s", line);
	if (sw && fp8)
		ck_assert_msg(strcmp(recipe, "delayed") && start <= layers / c->pp &&
			      end <= layers / c->pp, "%s", line);
	if (fp8 && !strcmp(recipe, "delayed"))
		ck_assert_msg(!strstr(line, " moe_act") && !strstr(line, " layernorm"), "%s", line);
	/* both counts default to 1 */
	ck_assert_int_eq(sw && (fp8 || fp4) ? (start < 0 ? 1 : start) : 0, c->bf16_first);
	ck_assert_int_eq(sw && (fp8 || fp4) ? (end < 0 ? 1 : end) : 0, c->bf16_last);
	if (c->precision == PIPETTE_PREC_BF16) {
		ck_assert_msg(!fp8 && !fp4, "%s", line);
		return;
	}
	ck_assert_msg(flag(line, expect_recipe[c->precision].format_flag, v, sizeof(v)) &&
		      !strcmp(v, expect_recipe[c->precision].format), "%s", line);
	ck_assert_msg(flag(line, expect_recipe[c->precision].recipe_flag, v, sizeof(v)) &&
		      !strcmp(v, expect_recipe[c->precision].recipe), "%s", line);
	/* parameters gathered quantized where the plan's memory assumes it
	 * (the stack's fp8_param_gather, NeMo's recipes' gather per recipe) */
	{
		int want = pipette_config_stack(c)->fp8_param_gather &&
			   (c->distributed_optimizer || pipette_config_stack(c)->mfsdp) &&
			   expect_recipe[c->precision].gather;

		ck_assert_msg(want == (flag(line, "--fp8-param-gather", v, sizeof(v)) != NULL), "%s",
			      line);
		ck_assert_msg((want && c->precision == PIPETTE_PREC_MXFP8) ==
			      (flag(line, "--reuse-grad-buf-for-mxfp8-param-ag", v, sizeof(v)) != NULL),
			      "%s", line);
	}
}

/* The value of KEY in a NeMo override line, or NULL. */
static const char *nemo_value(const char *line, const char *key, char *v, size_t len)
{
	char pat[128];
	const char *q;

	snprintf(pat, sizeof(pat), "%s=", key);
	for (q = strstr(line, pat); q && q != line && q[-1] != ' '; q = strstr(q + 1, pat))
		;
	if (!q)
		return NULL;
	q += strlen(pat);
	snprintf(v, len, "%.*s", (int)strcspn(q, " "), q);
	return v;
}

/* The same rules on a NeMo line: the plugin's fields land on Megatron-
 * Core's TransformerConfig (nemo-keys.tsv), whose checks are
 * fp8-fp4-exclusive, fp8_param needing fp8 (fp8-param-distopt's second
 * half) and fp8-bf16-layers; NeMo's counts default to 0.  Parameters are
 * gathered in FP8 as NeMo's recipes do where the plan's stack assumes it
 * (its fp8_param_gather fact: the nemo stack). */
static void check_nemo_precision(const struct pipette_plan *p, const char *line, int layers,
				 int stack_gathers)
{
	const struct pipette_config *c = pipette_plan_config(p);
	char v[64], recipe[64] = "delayed";	/* the plugin's default */
	int fp8 = nemo_value(line, "trainer.plugins.fp8", v, sizeof(v)) && strcmp(v, "None");
	int fp4 = nemo_value(line, "trainer.plugins.fp4", v, sizeof(v)) && strcmp(v, "None");
	int sw = nemo_value(line, "trainer.plugins.first_last_layers_bf16", v, sizeof(v)) &&
		 !strcmp(v, "True");
	long start = nemo_value(line, "trainer.plugins.num_layers_at_start_in_bf16", v, sizeof(v))
		     ? atol(v) : 0;
	long end = nemo_value(line, "trainer.plugins.num_layers_at_end_in_bf16", v, sizeof(v))
		   ? atol(v) : 0;
	int gather = nemo_value(line, "trainer.plugins.fp8_param_gather", v, sizeof(v)) &&
		     !strcmp(v, "True");

	nemo_value(line, "trainer.plugins.fp8_recipe", recipe, sizeof(recipe));
	ck_assert_msg(!(fp8 && fp4), "%s", line);
	ck_assert_msg(!gather || fp8, "%s", line);
	if (sw && fp8)
		ck_assert_msg(strcmp(recipe, "delayed") && start <= layers / c->pp &&
			      end <= layers / c->pp, "%s", line);
	ck_assert_int_eq(sw && (fp8 || fp4) ? start : 0, c->bf16_first);
	ck_assert_int_eq(sw && (fp8 || fp4) ? end : 0, c->bf16_last);
	if (c->precision == PIPETTE_PREC_BF16) {
		ck_assert_msg(!fp8 && !fp4, "%s", line);
		return;
	}
	if (!expect_recipe[c->precision].nemo) {
		ck_assert_msg(fp4 && nemo_value(line, "trainer.plugins.fp4", v, sizeof(v)) &&
			      !strcmp(v, "e2m1"), "%s", line);
		return;
	}
	ck_assert_msg(fp8 && nemo_value(line, "trainer.plugins.fp8", v, sizeof(v)) &&
		      !strcmp(v, "hybrid"), "%s", line);
	ck_assert_str_eq(recipe, expect_recipe[c->precision].nemo);
	ck_assert_int_eq(gather, stack_gathers && expect_recipe[c->precision].gather);
	if (gather && c->precision == PIPETTE_PREC_MXFP8)
		ck_assert_ptr_nonnull(strstr(line, "trainer.plugins.reuse_grad_buf_for_mxfp8_param_ag"
						   "=True"));
}

struct prec_job {
	const char *model, *gpu;
	int G, nodes;
	long gbs, seq;
	enum pipette_precision precision;
	int bf16_first, bf16_last;
};

/* FP8 on H100 (every Transformer Engine recipe Hopper runs, one with BF16
 * end layers, a MoE model), MXFP8 and NVFP4 on GB200 NVL72 trays (18 of
 * 4 GPUs: one 72-GPU NVLink domain). */
static const struct prec_job prec_jobs[] = {
	{ "llama3-70b", "H100", 8, 16, 512, 8192, PIPETTE_PREC_FP8_CURRENT, 1, 1 },
	{ "llama3-70b", "H100", 8, 16, 512, 8192, PIPETTE_PREC_FP8_DELAYED, 0, 0 },
	{ "llama3-8b", "H100", 8, 4, 64, 4096, PIPETTE_PREC_FP8_BLOCKWISE, 2, 0 },
	{ "mixtral-8x7b", "H100", 8, 8, 256, 4096, PIPETTE_PREC_FP8_CURRENT, 0, 0 },
	{ "llama3-70b", "GB200", 4, 18, 512, 8192, PIPETTE_PREC_MXFP8, 0, 0 },
	{ "llama3-70b", "GB200", 4, 18, 512, 8192, PIPETTE_PREC_NVFP4, 1, 1 },
};

static struct pipette_plan *plan_prec(const char *stack, const struct prec_job *j,
				      const struct pipette_pins *pins, struct pipette_err *err)
{
	struct pipette_request req;

	pipette_request_init(&req);
	pipette_strlcpy(req.model, j->model, sizeof(req.model));
	pipette_strlcpy(req.gpu, j->gpu, sizeof(req.gpu));
	pipette_strlcpy(req.stack, stack, sizeof(req.stack));
	req.global_batch = j->gbs;
	req.seq_len = j->seq;
	req.mapping = PIPETTE_MAP_BLOCK;
	if (pins)
		req.pins = *pins;
	req.pins.precision_set = PIPETTE_PREC_BIT(j->precision);
	req.bf16_first = j->bf16_first;
	req.bf16_last = j->bf16_last;
	return plan_req(&req, j->nodes, j->G, err);
}

static int model_layers(const char *name)
{
	struct pipette_model m;
	struct pipette_err err;

	ck_assert_int_eq(pipette_model_preset(name, &m, &err), 0);
	return m.layers;
}

/* Every launch line of a low-precision plan on the Megatron stacks names
 * flags and keys their parsers define, with values they accept, obeys
 * the rules on them and says the plan's recipe. */
START_TEST(test_precision_lines)
{
	struct keyset *upstream = malloc(sizeof(*upstream)), *keys = malloc(sizeof(*keys));
	static const char *const stacks[] = { "megatron", "nemo" };
	char line[4096];
	size_t s, j;

	load_keys(DATA "megatron-args.tsv", upstream);
	load_keys(DATA "nemo-keys.tsv", keys);
	for (s = 0; s < 2; s++)
		for (j = 0; j < sizeof(prec_jobs) / sizeof(prec_jobs[0]); j++) {
			struct pipette_err err;
			struct pipette_plan *p = plan_prec(stacks[s], &prec_jobs[j], NULL, &err);
			int layers = model_layers(prec_jobs[j].model);
			struct pipette_stack st;

			ck_assert_msg(p != NULL, "%s job %zu: %s", stacks[s], j, err.msg);
			ck_assert_int_eq(pipette_stack_lookup(stacks[s], &st, &err), 0);
			ck_assert_int_eq(pipette_plan_config(p)->precision, prec_jobs[j].precision);
			ck_assert_int_eq(pipette_plan_megatron_args(p, line, sizeof(line)), 0);
			check_flags_known(line, upstream);
			check_megatron_rules(p, line, 0);
			check_megatron_precision(p, line, layers);
			ck_assert_int_eq(pipette_plan_nemo_args(p, line, sizeof(line)), 0);
			check_nemo_line(keys, p, line);
			check_nemo_precision(p, line, layers, st.fp8_param_gather);
			ck_assert_int_eq(pipette_plan_launch_args(p, line, sizeof(line)), 0);
			pipette_plan_destroy(p);
		}
	free(upstream);
	free(keys);
}
END_TEST

/* What Megatron-Core would refuse is never planned, and the plan says
 * why: BF16 layers beyond num_layers / PP with an FP8 recipe, delayed
 * scaling with the layernorm recomputed (megatron-rules.tsv
 * fp8-bf16-layers, fp8-recompute), and delayed scaling with BF16 layers,
 * naming --bf16-layers. */
START_TEST(test_precision_refused)
{
	struct prec_job j = { "llama3-70b", "H100", 8, 8, 256, 4096, PIPETTE_PREC_FP8_CURRENT,
			      11, 0 };
	struct pipette_pins pins;
	struct pipette_err err;
	struct pipette_plan *p;
	char line[4096];

	pipette_pins_init(&pins);
	pins.tp = 8;
	pins.pp = 8;	/* 80 layers: at most 10 in BF16 at each end */
	/* the search refuses it (config.c check_precision), naming it */
	p = plan_prec("megatron", &j, &pins, &err);
	ck_assert_ptr_null(p);
	ck_assert_msg(strstr(err.msg, "at most num_layers/PP = 10 layers in BF16") != NULL, "%s",
		      err.msg);
	j.bf16_first = 10;	/* the bound itself runs */
	p = plan_prec("megatron", &j, &pins, &err);
	ck_assert_msg(p != NULL, "%s", err.msg);
	ck_assert_int_eq(pipette_plan_megatron_args(p, line, sizeof(line)), 0);
	ck_assert_ptr_nonnull(strstr(line, "--num-layers-at-start-in-bf16 10 "));
	pipette_plan_destroy(p);

	j.precision = PIPETTE_PREC_FP8_DELAYED;
	j.bf16_first = 0;
	pins.recompute = PIPETTE_RECOMPUTE_SELECTIVE;
	pins.recompute_modules = PIPETTE_RM_LAYERNORM;
	p = plan_prec("nemo", &j, &pins, &err);
	ck_assert_ptr_null(p);
	ck_assert_msg(strstr(err.msg, "delayed scaling cannot recompute the layernorm") != NULL,
		      "%s", err.msg);

	j.bf16_first = j.bf16_last = 1;
	pipette_pins_init(&pins);
	for (int k = 0; k < 2; k++) {
		ck_assert_ptr_null(plan_prec(k ? "nemo" : "megatron", &j, &pins, &err));
		ck_assert_msg(strstr(err.msg, "--bf16-layers 1,1: fp8-delayed cannot keep layers "
				     "in BF16") != NULL, "%s", err.msg);
	}
}
END_TEST

/* Upstream Megatron and NeMo run 1F1B and interleaved only: no default
 * plan picks another, and a pin on one is an error naming the stack. */
START_TEST(test_schedules_per_stack)
{
	struct pipette_request req;
	const char *const names[] = { "n1", "n2", "n3", "n4" };
	struct pipette_cluster_spec cs = { 4, names, 8, NULL };
	struct pipette_plan *p = NULL;
	struct pipette_err err;
	int k;

	for (k = 0; k < 2; k++) {
		p = plan_for(k ? "nemo" : "megatron", "llama3-70b", 4, 256, 4096, NULL);
		ck_assert_ptr_nonnull(p);
		ck_assert(pipette_plan_config(p)->schedule == PIPETTE_SCHED_1F1B ||
			  pipette_plan_config(p)->schedule == PIPETTE_SCHED_INTERLEAVED);
		pipette_plan_destroy(p);
	}
	pipette_request_init(&req);
	pipette_strlcpy(req.model, "llama3-8b", sizeof(req.model));
	pipette_strlcpy(req.gpu, "H100", sizeof(req.gpu));
	req.global_batch = 64;
	req.pins.schedule = PIPETTE_SCHED_V_ZB;
	ck_assert_int_eq(pipette_plan_compute(&req, &cs, &p, &err), -1);
	ck_assert_msg(strstr(err.msg, "stack megatron does not run schedule v-zb"), "%s", err.msg);
	pipette_strlcpy(req.stack, "megatron-zb", sizeof(req.stack));
	ck_assert_msg(pipette_plan_compute(&req, &cs, &p, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(pipette_plan_config(p)->schedule, PIPETTE_SCHED_V_ZB);
	pipette_plan_destroy(p);
	/* A list: the search chooses among the schedules listed, all of
	 * which the stack must run. */
	req.pins.schedule = -1;
	ck_assert_int_eq(pipette_schedule_pin_parse("1f1b,v-half", &req.pins, &err), 0);
	ck_assert_msg(pipette_plan_compute(&req, &cs, &p, &err) == 0, "%s", err.msg);
	ck_assert(pipette_plan_config(p)->schedule == PIPETTE_SCHED_1F1B ||
		  pipette_plan_config(p)->schedule == PIPETTE_SCHED_V_HALF);
	pipette_plan_destroy(p);
	pipette_strlcpy(req.stack, "nemo", sizeof(req.stack));
	ck_assert_int_eq(pipette_plan_compute(&req, &cs, &p, &err), -1);
	ck_assert_msg(strstr(err.msg, "stack nemo does not run schedule v-half"), "%s", err.msg);
	pipette_strlcpy(req.stack, "megatron-zb", sizeof(req.stack));
	/* The fork needs untied embeddings. */
	pipette_strlcpy(req.model, "gpt3-175b", sizeof(req.model));
	ck_assert_int_eq(pipette_plan_compute(&req, &cs, &p, &err), -1);
	ck_assert_msg(strstr(err.msg, "needs untied embeddings"), "%s", err.msg);
}
END_TEST

/* The facts reach the estimate: Llama-3.1-8B on 8 GPUs as NeMo's log ran
 * it (tests/data/stacks/nemo-h100-memory.tsv: TP 1, DP 4, CP 2).  Per GPU
 * 8.03e9 parameters: bf16 weights 2 B, bf16 gradients 2 B (fp32: 4 B),
 * Adam 12 B over DP x CP = 8, i.e. 14.96 + 14.96 + 11.22 = 41.14 GiB
 * against the logged 41.23 GiB. */
START_TEST(test_stack_memory_facts)
{
	struct pipette_model m;
	struct pipette_config c;
	struct pipette_stack nemo, meg;
	struct pipette_memory mem;
	struct pipette_err err;
	double stat;

	ck_assert_int_eq(pipette_model_preset("llama3-8b", &m, &err), 0);
	ck_assert_int_eq(pipette_stack_lookup("nemo", &nemo, &err), 0);
	ck_assert_int_eq(pipette_stack_lookup("megatron", &meg, &err), 0);
	pipette_config_init(&c);
	c.dp = 4;
	c.cp = 2;
	c.global_batch = 128;
	c.seq_len = 8192;
	c.distributed_optimizer = 1;
	c.stack = &nemo;
	pipette_memory_estimate(&m, pipette_gpu_lookup("H100", NULL), &c, 1.0, NULL, NULL, &mem);
	stat = (mem.peak.params_bytes + mem.peak.grads_bytes + mem.peak.optimizer_bytes) / (1 << 30);
	ck_assert_double_eq_tol(stat, 41.14, 0.05);
	ck_assert_double_eq_tol(stat / 41.23, 1.0, 0.03);
	ck_assert_double_eq_tol(mem.peak.grads_bytes, mem.peak.params_bytes, 1);
	/* The reserve: 11% of the counted bytes, never below 2 GiB. */
	ck_assert_double_gt(mem.peak.reserve_bytes, 2.0 * (1 << 30));
	c.stack = &meg;	/* fp32 main gradients */
	pipette_memory_estimate(&m, pipette_gpu_lookup("H100", NULL), &c, 1.0, NULL, NULL, &mem);
	ck_assert_double_eq_tol(mem.peak.grads_bytes, 2 * mem.peak.params_bytes, 1);
	c.stack = NULL;	/* megatron-2022: the flat rule, no reserve */
	pipette_memory_estimate(&m, pipette_gpu_lookup("H100", NULL), &c, 0.8, NULL, NULL, &mem);
	ck_assert_double_eq(mem.peak.reserve_bytes, 0);
}
END_TEST

START_TEST(test_stack_options)
{
	struct pipette_stack s;
	struct pipette_err err;

	ck_assert_int_eq(pipette_stack_resolve("megatron", "grad_reduce=bf16,tp_overlap=on", &s,
					       &err), 0);
	ck_assert_double_eq(s.grad_bytes, 2);
	ck_assert_double_lt(s.tp_exposed, 1);
	ck_assert_int_eq(pipette_stack_resolve("megatron", "adam_states=bf16", &s, &err), 0);
	ck_assert_double_eq(s.optim_bytes, 8);	/* fp32 master 4 + bf16 moments 2 + 2 */
	ck_assert_int_eq(s.optim_needs_distopt, 1);
	ck_assert_int_eq(pipette_stack_resolve("nemo", "adam_states=bf16", &s, &err), -1);
	ck_assert_int_eq(pipette_stack_resolve("", "", &s, &err), 0);
	ck_assert_str_eq(s.name, "megatron");
	ck_assert_int_eq(pipette_stack_resolve("megatron-2022", "grad_reduce=bf16", &s, &err), -1);
	ck_assert_msg(strstr(err.msg, "no --grad-reduce-in-bf16"), "%s", err.msg);
	ck_assert_int_eq(pipette_stack_resolve("nemo", "dp_overlap=off", &s, &err), -1);
	ck_assert_int_eq(pipette_stack_resolve("megatron-zb", "dp_overlap=on", &s, &err), -1);
	ck_assert_int_eq(pipette_stack_resolve("megatron", "bogus=1", &s, &err), -1);
	ck_assert_msg(strstr(err.msg, "unknown key 'bogus'"), "%s", err.msg);
	ck_assert_int_eq(pipette_stack_resolve("megatron", "grad_reduce=fp16", &s, &err), -1);
	ck_assert_int_eq(pipette_stack_resolve("deepspeed", "", &s, &err), -1);
	ck_assert_msg(strstr(err.msg, "stack 'deepspeed'"), "%s", err.msg);
	/* torchtitan's async TP: only with the compiled model, whichever
	 * order the options come in; Composer has no TP overlap */
	ck_assert_int_eq(pipette_stack_resolve("torchtitan", "tp_overlap=on", &s, &err), -1);
	ck_assert_msg(strstr(err.msg, "compile=on"), "%s", err.msg);
	ck_assert_int_eq(pipette_stack_resolve("torchtitan", "tp_overlap=on,compile=on", &s, &err), 0);
	ck_assert_int_eq(s.async_tp, 1);
	ck_assert_double_lt(s.tp_exposed, 1);
	ck_assert_int_eq(pipette_stack_resolve("torchtitan", "compile=on", &s, &err), 0);
	ck_assert_int_eq(s.async_tp, 0);
	ck_assert_double_eq(s.tp_exposed, 1);
	ck_assert_int_eq(pipette_stack_resolve("composer-fsdp", "tp_overlap=on", &s, &err), -1);
	/* megatron_fsdp=off leaves a stack's own FSDP as it is */
	{
		struct pipette_stack own;

		ck_assert_int_eq(pipette_stack_resolve("torchtitan", "", &own, &err), 0);
		ck_assert_int_eq(pipette_stack_resolve("torchtitan", "megatron_fsdp=off", &s, &err), 0);
		ck_assert_int_eq(s.fsdp, 1);
		ck_assert_int_eq(memcmp(&s, &own, sizeof(s)), 0);
		/* under Megatron-FSDP, fp32 Adam states are the moments
		 * beside the fp32 main-weight shards, whatever the order */
		ck_assert_int_eq(pipette_stack_resolve("megatron-bridge", "megatron_fsdp=on", &own,
						       &err), 0);
		ck_assert_int_eq(pipette_stack_resolve("megatron-bridge",
						       "megatron_fsdp=on,adam_states=fp32", &s, &err), 0);
		ck_assert_double_eq(s.optim_bytes, own.optim_bytes);
		ck_assert_int_eq(pipette_stack_resolve("megatron-bridge",
						       "adam_states=fp32,megatron_fsdp=on", &s, &err), 0);
		ck_assert_double_eq(s.optim_bytes, own.optim_bytes);
	}
}
END_TEST

/* torchtitan-config.tsv: "section.field" for the HEAD classes and, with
 * toml set, the v0.2.2 names ("Parallelism@v0.2.2" rows list several);
 * the Trainer.Config attributes and the quantization converters' fields
 * under their class names.  rest holds the choices column. */
static void load_torchtitan(struct keyset *ks, int toml)
{
	static const char *const head[][2] = {
		{ "ParallelismConfig", "parallelism" }, { "TrainingConfig", "training" },
		{ "CompileConfig", "compile" }, { "Trainer.Config", "Trainer.Config" },
		{ "QuantizationConverter.Config", "QuantizationConverter.Config" },
		{ "Float8LinearConverter.Config", "Float8LinearConverter.Config" },
		{ "MXFP8LinearConverter.Config", "MXFP8LinearConverter.Config" },
	};
	static const char *const old[][2] = {
		{ "Parallelism@v0.2.2", "parallelism" }, { "Training@v0.2.2", "training" },
		{ "ActivationCheckpoint@v0.2.2", "activation_checkpoint" },
		{ "Compile@v0.2.2", "compile" }, { "Model@v0.2.2", "model" },
		{ "Float8Linear@v0.2.2", "quantize.linear.float8" },
		{ "MXLinear@v0.2.2", "quantize.linear.mx" },
	};
	FILE *f = fopen(DATA "torchtitan-config.tsv", "r");
	char line[2048];

	ck_assert_ptr_nonnull(f);
	ks->n = 0;
	while (fgets(line, sizeof(line), f)) {
		char *sec = strtok(line, "\t"), *names = strtok(NULL, "\t"), *type = strtok(NULL, "\t");
		char *choices = (strtok(NULL, "\t"), strtok(NULL, "\t"));
		const char *const (*tab)[2] = toml ? old : head;
		size_t i, n = toml ? sizeof(old) / sizeof(old[0]) : sizeof(head) / sizeof(head[0]);

		if (!sec || !names || !type || sec[0] == '#' || !strcmp(type, "-"))
			continue;
		for (i = 0; i < n; i++) {
			char *nm, *save = NULL;

			if (strcmp(sec, tab[i][0]))
				continue;
			for (nm = strtok_r(names, ",/", &save); nm; nm = strtok_r(NULL, ",/", &save)) {
				while (*nm == ' ')
					nm++;
				nm[strcspn(nm, " ")] = '\0';
				ck_assert_int_lt(ks->n, MAX_KEYS);
				pipette_strlcpy(ks->rest[ks->n], choices ? choices : "",
						sizeof(ks->rest[0]));
				snprintf(ks->key[ks->n++], sizeof(ks->key[0]), "%s.%s", tab[i][1], nm);
			}
		}
	}
	fclose(f);
	ck_assert_int_gt(ks->n, 10);
}

/* v (quotes and list brackets stripped, each element of a list) is one
 * of key's choices in torchtitan-config.tsv (before any "; note"). */
static void check_tt_value(const struct keyset *ks, const char *key, const char *v)
{
	const char *ch = rest_of(ks, key);
	char el[96];
	size_t i = 0, k;

	ck_assert_msg(ch != NULL, "%s is not a torchtitan field", key);
	while (v[i]) {
		i += strspn(v + i, "[]\", ");
		k = strcspn(v + i, "[]\", ");
		if (!k)
			continue;
		snprintf(el, sizeof(el), "%.*s", (int)k, v + i);
		ck_assert_msg(listed(ch, strcspn(ch, ";"), " |", el), "%s = %s: not one of %s", key,
			      el, ch);
		i += k;
	}
}

/* Whether global layer i of the plan runs its low-precision recipe. */
static int lowp_layer(const struct pipette_plan *p, int layers, int i)
{
	const struct pipette_config *c = pipette_plan_config(p);

	return c->precision != PIPETTE_PREC_BF16 && i >= c->bf16_first && i < layers - c->bf16_last;
}

/* A list of FQN filters (filter_fqns) leaves out of the recipe exactly the
 * output layer, named out, and the plan's BF16 layers. */
static void check_tt_filter(const struct pipette_plan *p, const char *list, const char *out,
			    int layers)
{
	char q[32];
	int i;

	snprintf(q, sizeof(q), "\"%s\"", out);
	ck_assert_msg(strstr(list, q) != NULL, "%s", list);
	for (i = 0; i < layers; i++) {
		snprintf(q, sizeof(q), "\"layers.%d.\"", i);
		ck_assert_msg((strstr(list, q) == NULL) == lowp_layer(p, layers, i), "layer %d: %s", i,
			      list);
	}
}

/* The model-spec statement of a recipe module: a Trainer.Config attribute
 * rebuilt with torchtitan's converter config for the plan's recipe, every
 * argument a field of it (torchtitan-config.tsv), recipe_name one of its
 * choices, and the Linears it converts those of the plan's low-precision
 * layers (MXFP8's fqns select them, float8's filter_fqns leave out the
 * rest); the output layer, lm_head, stays BF16 either way. */
static void check_tt_converter(const struct pipette_plan *p, const char *stmt,
			       const struct keyset *head, int layers)
{
	const struct pipette_config *c = pipette_plan_config(p);
	int mx = c->precision == PIPETTE_PREC_MXFP8;
	const char *q = strstr(stmt, "Converter.Config("), *a, *e;
	char cls[64], key[160], v[64];

	ck_assert(has(head, "Trainer.Config.model_spec"));
	ck_assert_msg(q != NULL, "%s", stmt);
	for (a = q; a > stmt && (isalnum((unsigned char)a[-1]) || a[-1] == '_'); a--)
		;
	snprintf(cls, sizeof(cls), "%.*s", (int)(q + 16 - a), a);
	ck_assert_str_eq(cls, mx ? "MXFP8LinearConverter.Config" : "Float8LinearConverter.Config");
	for (e = q + 17; (e = strchr(e, '=')); e++) {
		for (a = e; a > q && (isalnum((unsigned char)a[-1]) || a[-1] == '_'); a--)
			;
		snprintf(key, sizeof(key), "%s.%.*s", cls, (int)(e - a), a);
		if (!has(head, key))
			snprintf(key, sizeof(key), "QuantizationConverter.Config.%.*s", (int)(e - a), a);
		ck_assert_msg(has(head, key), "%.*s is not a field of %s: %s", (int)(e - a), a, cls,
			      stmt);
	}
	ck_assert_ptr_nonnull(strstr(stmt, "model_compile_enabled="));
	if (mx) {
		snprintf(key, sizeof(key), "fqns=[f\"layers.{i}.\" for i in range(%d, %d)]",
			 c->bf16_first, layers - c->bf16_last);
		ck_assert_msg(strstr(stmt, key) != NULL, "%s", stmt);
		return;
	}
	ck_assert_int_eq(sscanf(strstr(stmt, "recipe_name=") + 12, "%63[^,)]", v), 1);
	snprintf(key, sizeof(key), "%s.recipe_name", cls);
	check_tt_value(head, key, v);
	ck_assert_str_eq(v, "\"rowwise\"");
	check_tt_filter(p, strstr(stmt, "filter_fqns="), "lm_head", layers);
}

/* A v0.2.2 TOML key and its value: a field of torchtitan-config.tsv; the
 * converter and recipe one of their choices and the plan's; the filter
 * the output layer and the plan's BF16 layers.  1 for the converter. */
static int check_tt_toml(const struct pipette_plan *p, const char *full, const char *v,
			 const struct keyset *toml, int layers)
{
	static const char *const want[PIPETTE_PREC_COUNT][2] = {
		[PIPETTE_PREC_FP8_CURRENT] = { "float8", "tensorwise" },
		[PIPETTE_PREC_FP8_ROWWISE] = { "float8", "rowwise" },
		[PIPETTE_PREC_MXFP8] = { "mx", "mxfp8_cublas" },
	};
	enum pipette_precision pr = pipette_plan_config(p)->precision;
	char w[96];

	ck_assert_msg(has(toml, full), "TOML: %s", full);
	if (!strcmp(full, "model.converters") || strstr(full, ".recipe_name")) {
		check_tt_value(toml, full, v);
		ck_assert_ptr_nonnull(want[pr][0]);
		if (strstr(full, ".recipe_name"))
			snprintf(w, sizeof(w), "quantize.linear.%s.recipe_name = \"%s\"", want[pr][0],
				 want[pr][1]);
		else
			snprintf(w, sizeof(w), "model.converters = [\"quantize.linear.%s\"]",
				 want[pr][0]);
		ck_assert_msg(!strncmp(w, full, strlen(full)) && !strcmp(w + strlen(full) + 3, v),
			      "%s = %s, expected %s", full, v, w);
	} else if (strstr(full, ".filter_fqns"))
		check_tt_filter(p, v, "output", layers);
	return !strcmp(full, "model.converters");
}

/* The recipe module and the TOML of a plan: every field torchtitan's
 * (HEAD for the recipe, v0.2.2 for the TOML), and the plan's recipe in
 * both where they can say it. */
static void check_tt_file(const struct pipette_plan *p, const struct keyset *head,
			  const struct keyset *toml, int layers)
{
	char *buf = NULL, *l, *lsave = NULL, stmt[4096] = "", section[48] = "";
	size_t blen = 0;
	FILE *mem = open_memstream(&buf, &blen);
	const struct pipette_config *c = pipette_plan_config(p);
	int lowp = c->precision != PIPETTE_PREC_BF16;
	int module = 0, spec = 0, converters = 0;

	ck_assert_int_eq(pipette_plan_write_torchtitan(p, mem), 0);
	fclose(mem);
	for (l = strtok_r(buf, "\n", &lsave); l; l = strtok_r(NULL, "\n", &lsave)) {
		char key[128], full[192], v[1024];

		if (stmt[0] && !strncmp(l, "        ", 8)) {	/* the statement goes on */
			snprintf(stmt + strlen(stmt), sizeof(stmt) - strlen(stmt), "%s", l + 7);
			continue;
		}
		if (stmt[0] && !strstr(stmt, "Converter.Config(")) {
			/* the flavor rebuilt with the MTP layers: model_registry's
			 * num_mtp_layers (torchtitan-config.tsv, DeepSeek-V3) */
			ck_assert_msg(strstr(stmt, "= model_registry(\"") && strstr(stmt, "num_mtp_layers="),
				      "%s", stmt);
			stmt[0] = '\0';
		} else if (stmt[0]) {
			check_tt_converter(p, stmt, head, layers);
			stmt[0] = '\0';
			spec++;
		}
		module |= !strncmp(l, "def pipette_plan", 16);
		if (!strncmp(l, "    c.model_spec", 16))
			pipette_strlcpy(stmt, l, sizeof(stmt));
		else if (sscanf(l, "    c.%127[a-z_.] =", key) == 1 &&
			 strncmp(key, "activation", 10))
			ck_assert_msg(has(head, key), "recipe: %s", key);
		else if (l[0] == '[')
			sscanf(l, "[%47[a-z0-9_.]]", section);
		else if (section[0] && sscanf(l, "%63[a-z_] = %1023[^\n]", key, v) == 2) {
			snprintf(full, sizeof(full), "%s.%s", section, key);
			converters += check_tt_toml(p, full, v, toml, layers);
		}
	}
	ck_assert_int_eq(spec, module && lowp && c->bf16_first + c->bf16_last < layers);
	ck_assert_int_eq(converters, lowp);
	free(buf);
}

struct tt_job {
	const char *model;
	int nodes;
	long gbs, seq;
	int tp, pp, sched;
};

static const struct tt_job tt_jobs[] = {
	{ "llama3-8b", 16, 256, 8192, -1, -1, -1 },
	{ "llama3-8b", 4, 128, 8192, 2, -1, -1 },
	{ "llama3-70b", 8, 256, 4096, 8, 4, PIPETTE_SCHED_GPIPE },
	{ "llama3-70b", 8, 256, 4096, 8, 4, PIPETTE_SCHED_1F1B },
	{ "llama3-70b", 16, 256, 4096, 8, 4, PIPETTE_SCHED_INTERLEAVED },
	{ "llama3-70b", 16, 256, 4096, 8, 4, PIPETTE_SCHED_INTERLEAVED_ZB },
	{ "llama3-70b", 16, 256, 4096, 8, 4, PIPETTE_SCHED_ZBV },
	{ "llama3-70b", 16, 256, 4096, 8, 4, PIPETTE_SCHED_DUALPIPE_V },
};

/* Every field the torchtitan forms set exists in torchtitan's config
 * classes (HEAD for the recipe and the overrides, v0.2.2 for the TOML),
 * and the values are ones torchtitan accepts. */
START_TEST(test_torchtitan_fields)
{
	struct keyset *head = malloc(sizeof(*head)), *toml = malloc(sizeof(*toml));
	struct keyset *mflags = malloc(sizeof(*mflags));
	int megatron_named = 0;
	static const char *const scheds = " 1F1B GPipe Interleaved1F1B InterleavedZeroBubble "
					  "ZBVZeroBubble DualPipeV ";
	char line[4096], *tok, *save = NULL;
	size_t j;
	int planned = 0;

	load_torchtitan(head, 0);
	load_torchtitan(toml, 1);
	load_keys(DATA "megatron-args.tsv", mflags);
	for (j = 0; j < sizeof(tt_jobs) / sizeof(tt_jobs[0]); j++) {
		struct pipette_pins pins;
		struct pipette_plan *p;

		pipette_pins_init(&pins);
		pins.tp = tt_jobs[j].tp;
		pins.pp = tt_jobs[j].pp;
		pins.schedule = tt_jobs[j].sched;
		p = plan_for("torchtitan", tt_jobs[j].model, tt_jobs[j].nodes, tt_jobs[j].gbs,
			     tt_jobs[j].seq, &pins);
		ck_assert_msg(p != NULL, "torchtitan job %zu has no plan", j);
		planned++;
		/* the overrides */
		ck_assert_int_eq(pipette_plan_launch_args(p, line, sizeof(line)), 0);
		for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
			char key[128], *eq;

			if (!strncmp(tok, "activation-checkpoint:", 22)) {
				char pad[64];

				snprintf(pad, sizeof(pad), " %.32s ", tok + 22);
				ck_assert_msg(strstr(" none selective full ", pad) != NULL, "%s", tok);
				continue;
			}
			ck_assert_msg(!strncmp(tok, "--", 2), "%s", tok);
			pipette_strlcpy(key, tok + 2, sizeof(key));
			if ((eq = strchr(key, '=')))
				*eq++ = '\0';
			ck_assert_msg(has(head, key), "%s is not a torchtitan field", key);
			if (!strcmp(key, "parallelism.pipeline_parallel_schedule")) {
				char pad[64];

				snprintf(pad, sizeof(pad), " %s ", eq);
				ck_assert_msg(strstr(scheds, pad) != NULL, "schedule %s", eq);
			}
		}
		save = NULL;
		/* the same sharding in Megatron-LM's flags, when it has them */
		if (pipette_plan_megatron_fsdp_args(p, line, sizeof(line)) == 0) {
			for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
				if (!strncmp(tok, "--", 2))
					ck_assert_msg(has(mflags, tok), "%s is not a Megatron-LM flag", tok);
			save = NULL;
			megatron_named++;
		}
		/* the recipe and the TOML */
		check_tt_file(p, head, toml, model_layers(tt_jobs[j].model));
		pipette_plan_destroy(p);
	}
	ck_assert_int_eq(planned, (int)(sizeof(tt_jobs) / sizeof(tt_jobs[0])));
	ck_assert_int_ge(megatron_named, 1);
	free(head);
	free(toml);
	free(mflags);
}
END_TEST

/* torchtitan plans with a torchao recipe: rowwise FP8 with BF16 end layers
 * and tensorwise on H100 (HEAD has no tensorwise: only the v0.2.2 TOML
 * says it), MXFP8 on GB200 trays, and a model torchtitan has no config
 * function for (its model converted in place).  Every field exists, the
 * values are ones torchtitan accepts, the converted Linears are the
 * plan's, and the overrides, which cannot reach the model spec, refuse
 * with the reason instead of launching BF16. */
START_TEST(test_torchtitan_precision)
{
	static const struct prec_job tt_prec[] = {
		{ "llama3-8b", "H100", 8, 16, 256, 8192, PIPETTE_PREC_FP8_ROWWISE, 1, 1 },
		{ "llama3-8b", "H100", 8, 16, 256, 8192, PIPETTE_PREC_FP8_CURRENT, 0, 0 },
		{ "llama3-70b", "GB200", 4, 16, 256, 8192, PIPETTE_PREC_MXFP8, 2, 1 },
		{ "nemotron4-15b", "H100", 8, 4, 64, 4096, PIPETTE_PREC_FP8_ROWWISE, 0, 2 },
	};
	struct keyset *head = malloc(sizeof(*head)), *toml = malloc(sizeof(*toml));
	char line[4096];
	size_t j;

	load_torchtitan(head, 0);
	load_torchtitan(toml, 1);
	for (j = 0; j < sizeof(tt_prec) / sizeof(tt_prec[0]); j++) {
		struct pipette_err err;
		struct pipette_plan *p = plan_prec("torchtitan", &tt_prec[j], NULL, &err);

		ck_assert_msg(p != NULL, "torchtitan job %zu: %s", j, err.msg);
		ck_assert_int_eq(pipette_plan_config(p)->precision, tt_prec[j].precision);
		check_tt_file(p, head, toml, model_layers(tt_prec[j].model));
		ck_assert_int_eq(pipette_plan_launch_args(p, line, sizeof(line)), 1);
		ck_assert_msg(strstr(line, tt_prec[j].precision == PIPETTE_PREC_FP8_CURRENT
				     ? "has no tensorwise float8" : "in the model spec, which is off "
				     "the command line") != NULL, "%s", line);
		pipette_plan_destroy(p);
	}
	free(head);
	free(toml);
}
END_TEST

/* The done-when plan: Llama 3 8B on 16 H100 nodes at 256 x 8192 tokens
 * shards its data parallelism, as torchtitan's own recipes do. */
START_TEST(test_torchtitan_shards)
{
	struct pipette_plan *p = plan_for("torchtitan", "llama3-8b", 16, 256, 8192, NULL);
	const struct pipette_config *c;

	ck_assert_ptr_nonnull(p);
	c = pipette_plan_config(p);
	ck_assert_int_gt(c->dp_shard * c->cp, 1);
	ck_assert_int_eq(c->distributed_optimizer, 0);
	pipette_plan_destroy(p);
}
END_TEST

/* ---- every stack x every format (launch-rules.tsv) ------------------------ */

enum rule {
	R_SHELL, R_CDMC, R_NEMO_LIST, R_NEMO_SPLIT, R_NEMO_FACTORY, R_NEMO_CB, R_TT_STAGES,
	R_TT_OWN, R_TT_PRESET, R_ZB_MLA, R_ZB_EPDP, R_ZB_PP, R_REFUSAL, R_SB_SYNTAX, R_SB_LINES,
	R_SB_RANKS, R_TT_ASYNC, R_BR_KEYS, R_BR_SELECT, R_BR_SPLIT, R_BR_PREC, R_BR_OVERLAP,
	R_BR_CDMC, R_BR_FSDP, R_COUNT
};
static const char *const rule_ids[R_COUNT] = {
	"shell-words", "cdmc-prefix", "nemo-list-literal", "nemo-split-keys", "nemo-factory",
	"nemo-callbacks", "tt-stage-count", "tt-own-stack", "tt-preset", "zb-no-mla", "zb-ep-dp",
	"zb-pp", "refusal-named", "sbatch-syntax", "sbatch-lines", "sbatch-ranks", "tt-async-tp",
	"bridge-keys", "bridge-selector", "bridge-split-keys", "bridge-precision",
	"bridge-overlap", "bridge-cdmc", "bridge-fsdp-offload",
};
static int rule_used[R_COUNT];

#define MAX_WORDS 256

/* The words the shell makes of line (quote removal only: single quotes,
 * double quotes without expansions, backslash); 0 when a character the
 * shell would treat specially is left unquoted (rule shell-words). */
static int shell_split(const char *line, char w[][512], int *n)
{
	const char *p = line;
	size_t k = 0;
	int in = 0;

	*n = 0;
	for (;; p++) {
		if (!*p || *p == ' ') {
			if (in) {
				w[(*n)++][k] = '\0';
				k = 0;
				in = 0;
			}
			if (!*p)
				return 1;
			continue;
		}
		if (!in && *n == MAX_WORDS)
			return 0;
		in = 1;
		if (*p == '\'') {
			while (*++p && *p != '\'')
				w[*n][k++] = *p;
			if (!*p)
				return 0;
		} else if (*p == '"') {
			while (*++p && *p != '"') {
				if (strchr("$`\\", *p))
					return 0;
				w[*n][k++] = *p;
			}
			if (!*p)
				return 0;
		} else if (strchr("|&;<>()$`\\\"*?[]{}~#!\t", *p)) {
			return 0;
		} else
			w[*n][k++] = *p;
		ck_assert_int_lt(k, 511);
	}
}

/* shell-words and cdmc-prefix: line is prefix + trainer + args, word for
 * word, with CUDA_DEVICE_MAX_CONNECTIONS exactly as the plan needs. */
static void check_line(const struct pipette_plan *p, const char *line, const char *trainer,
		       const char *args)
{
	static char got[MAX_WORDS][512];
	char want[8192], v[16] = "";
	int n, i = 0, k;
	char *tok, *save = NULL;

	ck_assert_msg(shell_split(line, got, &n), "the shell would not read back: %s", line);
	ck_assert_int_eq(pipette_plan_job_env(p, env_value, v), 0);
	rule_used[R_SHELL]++;
	rule_used[R_CDMC]++;
	if (v[0]) {
		char pre[64];

		snprintf(pre, sizeof(pre), "CUDA_DEVICE_MAX_CONNECTIONS=%s", v);
		ck_assert_msg(n > 0 && !strcmp(got[0], pre), "%s missing: %s", pre, line);
		i = 1;
	} else
		ck_assert_msg(!strstr(line, "CUDA_DEVICE_MAX_CONNECTIONS"), "%s", line);
	snprintf(want, sizeof(want), "%s %s", trainer, args);
	for (tok = strtok_r(want, " ", &save), k = i; tok; tok = strtok_r(NULL, " ", &save), k++)
		ck_assert_msg(k < n && !strcmp(got[k], tok), "word %d: %s != %s in %s", k,
			      k < n ? got[k] : "(none)", tok, line);
	ck_assert_int_eq(k, n);
}

/* nemo-list-literal, nemo-split-keys, nemo-factory, nemo-callbacks. */
static void check_nemo_rules(const struct pipette_plan *p, const struct keyset *keys,
			     const char *args, int nodes)
{
	const struct pipette_config *c = pipette_plan_config(p);
	const struct pipette_stack *st = pipette_config_stack(c);
	static const char *const split[] = {
		"trainer.strategy.pipeline_model_parallel_layout",
		"trainer.strategy.num_layers_in_first_pipeline_stage",
		"trainer.strategy.num_layers_in_last_pipeline_stage",
		"trainer.strategy.account_for_embedding_in_pipeline_split",
		"trainer.strategy.account_for_loss_in_pipeline_split",
	};
	char v[512], key[96], want[256];
	const char *q;
	size_t i;
	int layout, cb;

	if ((q = strstr(args, "model.config.recompute_modules="))) {
		snprintf(v, sizeof(v), "%.*s", (int)strcspn(q + 31, " "), q + 31);
		check_py_list("model.config.recompute_modules", v,
			      rest_of(keys, "model.config.recompute_modules"));
		rule_used[R_NEMO_LIST]++;
	}
	for (i = 0; i < 5; i++)
		ck_assert_msg(nemo_value(args, split[i], v, sizeof(v)), "%s missing: %s", split[i], args);
	layout = nemo_value(args, split[0], v, sizeof(v)) && strcmp(v, "None");
	for (i = 1; i < 5; i++) {
		nemo_value(args, split[i], v, sizeof(v));
		if (layout || i > 2)
			ck_assert_msg(!strcmp(v, i > 2 ? "False" : "None"), "%s=%s with a layout: %s",
				      split[i], v, args);
	}
	rule_used[R_NEMO_SPLIT]++;
	ck_assert_int_eq(sscanf(args, "--factory %95[a-z0-9_](", key), 1);
	snprintf(want, sizeof(want), "--factory %s(num_nodes=%d,num_gpus_per_node=%d,"
		 "performance_mode=True) ", key, nodes, pipette_plan_gpus_per_node(p));
	ck_assert_msg(!strncmp(args, want, strlen(want)), "%s", args);
	rule_used[R_NEMO_FACTORY]++;
	ck_assert_msg((q = strstr(args, "trainer.callbacks[")) && sscanf(q, "trainer.callbacks[%d]",
		      &cb) == 1, "%s", args);
	snprintf(key, sizeof(key), "trainer.callbacks[%d].tp_comm_overlap", cb);
	ck_assert_msg(nemo_value(args, key, v, sizeof(v)) &&
		      !strcmp(v, pipette_stack_tp_exposed(st, c) < 1 ? "True" : "False"), "%s", args);
	snprintf(key, sizeof(key), "trainer.callbacks[%d].defer_embedding_wgrad_compute", cb);
	ck_assert_msg(nemo_value(args, key, v, sizeof(v)) &&
		      !strcmp(v, c->pp > 1 && st->wgrad_deferral_limit ? "True" : "False"), "%s", args);
	snprintf(key, sizeof(key), "trainer.callbacks[%d].wgrad_deferral_limit", cb);
	if (c->pp > 1 && st->wgrad_deferral_limit)
		ck_assert_msg(nemo_value(args, key, v, sizeof(v)) && atoi(v) == st->wgrad_deferral_limit,
			      "%s", args);
	rule_used[R_NEMO_CB]++;
}

/* ---- Megatron-Bridge's run script (bridge-keys.tsv, launch-rules.tsv) ---- */

/* The value of "-x V" or "key=V" in a bridge line, or NULL. */
static const char *bridge_value(const char *args, const char *key, char *v, size_t len)
{
	char pat[96];
	const char *q;

	if (key[0] != '-')
		return nemo_value(args, key, v, len);
	snprintf(pat, sizeof(pat), "%s ", key);
	for (q = strstr(args, pat); q && q != args && q[-1] != ' '; q = strstr(q + 1, pat))
		;
	if (!q)
		return NULL;
	q += strlen(pat);
	snprintf(v, len, "%.*s", (int)strcspn(q, " "), q);
	return v;
}

/* bridge-keys: every option (with its value) and every key=value the line
 * writes is one bridge-keys.tsv lists, with a value it lists. */
static void check_bridge_keys(const struct keyset *keys, const char *args)
{
	char copy[4096], *w, *save = NULL, *opt = NULL;

	ck_assert_int_lt(strlen(args), sizeof(copy));
	strcpy(copy, args);
	for (w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(w, '=');

		if (opt) {
			check_nemo_value(rest_of(keys, opt), opt, w);
			opt = NULL;
		} else if (w[0] == '-') {
			ck_assert_msg(has(keys, w), "%s: not a run-script option: %s", w, args);
			opt = w;
		} else {
			ck_assert_msg(eq != NULL, "%s: neither option nor override: %s", w, args);
			*eq = '\0';
			ck_assert_msg(has(keys, w), "%s: not a ConfigContainer key: %s", w, args);
			check_nemo_value(rest_of(keys, w), w, eq + 1);
		}
	}
	ck_assert_msg(!opt, "option without a value: %s", args);
	rule_used[R_BR_KEYS]++;
}

/* Whether the bridge line sets key to want. */
static int bridge_is(const char *args, const char *key, const char *want)
{
	char v[256];

	return bridge_value(args, key, v, sizeof(v)) && !strcmp(v, want);
}

static const char *hy(int b)
{
	return b ? "true" : "false";
}

/* bridge-selector: -m/-mr/-g/-c/-ng first, -g the GPU's family, -c the
 * script's name of the plan's recipe (argument_parser.py:694-702), the
 * batch and sequence as planned. */
static void check_bridge_selector(const struct pipette_plan *p, const char *gpu,
				  const char *args)
{
	static const char *const dtype[PIPETTE_PREC_COUNT] = {
		[PIPETTE_PREC_BF16] = "bf16", [PIPETTE_PREC_FP8_CURRENT] = "fp8_cs",
		[PIPETTE_PREC_FP8_BLOCKWISE] = "fp8_sc", [PIPETTE_PREC_MXFP8] = "fp8_mx",
		[PIPETTE_PREC_NVFP4] = "nvfp4",
	};
	const struct pipette_config *c = pipette_plan_config(p);
	char g[16], v[64];
	size_t i;

	ck_assert_msg(!strncmp(args, "-m ", 3), "%s", args);
	for (i = 0; gpu[i] && gpu[i] != '-' && i + 1 < sizeof(g); i++)
		g[i] = (char)tolower((unsigned char)gpu[i]);
	g[i] = '\0';
	ck_assert_msg(bridge_is(args, "-g", g), "-g %s: %s", g, args);
	ck_assert_ptr_nonnull(dtype[c->precision]);
	ck_assert_msg(bridge_is(args, "-c", dtype[c->precision]), "%s", args);
	ck_assert_int_eq(atol(bridge_value(args, "-ng", v, sizeof(v))), pipette_plan_world(p));
	ck_assert_int_eq(atol(bridge_value(args, "-gb", v, sizeof(v))), c->global_batch);
	ck_assert_int_eq(atol(bridge_value(args, "-mb", v, sizeof(v))), c->micro_batch);
	ck_assert_int_eq(atol(bridge_value(args, "-sl", v, sizeof(v))), c->seq_len);
	ck_assert_ptr_nonnull(bridge_value(args, "-mr", v, sizeof(v)));
	rule_used[R_BR_SELECT]++;
}

/* bridge-split-keys: the whole split, the layout as the script's string
 * option only, exclusive with the stage counts; no accounting. */
static void check_bridge_split(const char *args)
{
	char v[512];
	int layout = bridge_value(args, "--pipeline_model_parallel_layout", v, sizeof(v)) != NULL;

	ck_assert_msg(bridge_is(args, "model.pipeline_model_parallel_layout", "null"), "%s", args);
	ck_assert(bridge_value(args, "model.num_layers_in_first_pipeline_stage", v, sizeof(v)));
	ck_assert_msg(!layout || !strcmp(v, "null"), "%s", args);
	ck_assert(bridge_value(args, "model.num_layers_in_last_pipeline_stage", v, sizeof(v)));
	ck_assert_msg(!layout || !strcmp(v, "null"), "%s", args);
	ck_assert(bridge_is(args, "model.account_for_embedding_in_pipeline_split", "false"));
	ck_assert(bridge_is(args, "model.account_for_loss_in_pipeline_split", "false"));
	rule_used[R_BR_SPLIT]++;
}

/* bridge-precision: the gradient dtype the stack prices; FP8 parameter
 * gather with per-tensor and MX scales only, MXFP8's into the gradient
 * buffer (config.py:1490-1497), no FP4 gather; the planned BF16 ends. */
static void check_bridge_precision(const struct pipette_plan *p, const char *args)
{
	const struct pipette_config *c = pipette_plan_config(p);
	const struct pipette_stack *st = pipette_config_stack(c);
	int gather = st->fp8_param_gather && (c->precision == PIPETTE_PREC_FP8_CURRENT ||
					      c->precision == PIPETTE_PREC_MXFP8);
	char v[32];

	ck_assert(bridge_is(args, "mixed_precision.grad_reduce_in_fp32", hy(st->grad_bytes == 4)));
	ck_assert(bridge_is(args, "ddp.grad_reduce_in_fp32", hy(st->grad_bytes == 4)));
	if (c->precision == PIPETTE_PREC_BF16) {
		ck_assert_msg(!strstr(args, "param_gather=") || !strstr(args, "mixed_precision.fp"),
			      "%s", args);
	} else {
		if (c->precision == PIPETTE_PREC_NVFP4)
			ck_assert(bridge_is(args, "mixed_precision.fp4_param_gather", "false"));
		else
			ck_assert_msg(bridge_is(args, "mixed_precision.fp8_param_gather", hy(gather)),
				      "%s", args);
		if (c->precision == PIPETTE_PREC_MXFP8 && gather)
			ck_assert(bridge_is(args, "mixed_precision.reuse_grad_buf_for_mxfp8_param_ag",
					    "true"));
		snprintf(v, sizeof(v), "%d", c->bf16_first);
		ck_assert(bridge_is(args, "mixed_precision.num_layers_at_start_in_bf16", v));
		snprintf(v, sizeof(v), "%d", c->bf16_last);
		ck_assert(bridge_is(args, "mixed_precision.num_layers_at_end_in_bf16", v));
		ck_assert(bridge_is(args, "mixed_precision.first_last_layers_bf16",
				    hy(c->bf16_first > 0 || c->bf16_last > 0)));
	}
	rule_used[R_BR_PREC]++;
}

/* bridge-overlap: TP overlap exactly where the plan prices it hidden, the
 * wgrad deferral only with a pipeline, DP overlap; the EP overlap within
 * CommOverlapConfig's checks (comm_overlap.py:478-535). */
static void check_bridge_overlap(const struct pipette_plan *p, const char *args)
{
	const struct pipette_config *c = pipette_plan_config(p);
	const struct pipette_stack *st = pipette_config_stack(c);
	char v[128];

	ck_assert(bridge_is(args, "comm_overlap.tp_comm_overlap",
			    hy(pipette_stack_tp_exposed(st, c) < 1)));
	ck_assert(bridge_is(args, "comm_overlap.defer_embedding_wgrad_compute",
			    hy(c->pp > 1 && st->wgrad_deferral_limit > 0)));
	ck_assert(bridge_is(args, "comm_overlap.overlap_grad_reduce", hy(st->dp_overlap)));
	if (bridge_is(args, "comm_overlap.overlap_moe_expert_parallel_comm", "true")) {
		ck_assert(c->pp == 1 || !bridge_is(args, "model.virtual_pipeline_model_parallel_size",
						   "null"));
		ck_assert(!bridge_is(args, "model.recompute_granularity", "full"));
		ck_assert(!bridge_value(args, "--recompute_modules", v, sizeof(v)) ||
			  !listed(v, strlen(v), ",", "moe"));
		ck_assert(bridge_is(args, "comm_overlap.delay_wgrad_compute", "true"));
	} else
		ck_assert(!bridge_is(args, "comm_overlap.delay_wgrad_compute", "true"));
	rule_used[R_BR_OVERLAP]++;
}

/* bridge-cdmc: the run script's rule (overrides.py:248-263), from the
 * plan's GPU family and settings. */
static void check_bridge_cdmc(const struct pipette_plan *p, const char *gpu)
{
	const struct pipette_config *c = pipette_plan_config(p);
	int blackwell = gpu[0] == 'B' || !strncmp(gpu, "GB", 2), want;
	char v[16] = "", w[16];

	ck_assert_int_eq(pipette_plan_job_env(p, env_value, v), 0);
	want = blackwell ? 32
	       : (c->tp > 1 || c->cp > 1) && !c->moe.ep_overlap && !pipette_config_stack(c)->mfsdp ? 1
	       : c->moe.dispatcher == PIPETTE_DISPATCH_DEEPEP ? 32 : 8;
	snprintf(w, sizeof(w), "%d", want);
	ck_assert_str_eq(v, w);
	rule_used[R_BR_CDMC]++;
}

/* bridge-fsdp-offload: Megatron-FSDP and CPU offloading on exactly when
 * the plan's stack prices them, as the recipes set them (perf_recipes/
 * llama/gb200/llama3.py:272-284), within what Megatron-Core accepts
 * (transformer_config.py:1884-1899). */
static void check_bridge_fsdp(const struct pipette_plan *p, const char *args)
{
	const struct pipette_config *c = pipette_plan_config(p);
	const struct pipette_stack *st = pipette_config_stack(c);
	char v[64];

	ck_assert_msg(bridge_is(args, "ddp.use_megatron_fsdp", hy(st->mfsdp)), "%s", args);
	if (st->mfsdp) {
		ck_assert(bridge_is(args, "ddp.data_parallel_sharding_strategy", "optim_grads_params"));
		ck_assert(bridge_is(args, "ddp.fsdp_double_buffer", "true"));
		ck_assert(bridge_is(args, "ddp.keep_fp8_transpose_cache", "false"));
		ck_assert(bridge_is(args, "ddp.use_distributed_optimizer", "true"));
		ck_assert(bridge_is(args, "comm_overlap.overlap_param_gather", "true"));
		ck_assert(bridge_is(args, "model.pipeline_model_parallel_size", "1"));
		ck_assert_int_eq(c->dp_shard, c->dp);
	} else {
		ck_assert(!bridge_value(args, "ddp.data_parallel_sharding_strategy", v, sizeof(v)));
	}
	ck_assert_msg(bridge_is(args, "model.cpu_offloading", hy(st->offload_layers > 0)), "%s", args);
	if (st->offload_layers > 0) {
		ck_assert(bridge_is(args, "model.cpu_offloading_weights", "false"));
		ck_assert_int_eq(atoi(bridge_value(args, "model.cpu_offloading_num_layers", v,
						   sizeof(v))), st->offload_layers);
		ck_assert(bridge_is(args, "model.pipeline_model_parallel_size", "1"));
		ck_assert(bridge_is(args, "model.recompute_granularity", "null"));
	} else {
		ck_assert(!bridge_value(args, "model.cpu_offloading_num_layers", v, sizeof(v)));
	}
	rule_used[R_BR_FSDP]++;
}

static void check_bridge_line(const struct keyset *keys, const struct pipette_plan *p,
			      const char *gpu, const char *line)
{
	char args[4096];

	ck_assert_int_eq(pipette_plan_bridge_args(p, args, sizeof(args)), 0);
	check_line(p, line, "python scripts/performance/bootstrap.py", args);
	check_bridge_keys(keys, args);
	check_bridge_selector(p, gpu, args);
	check_bridge_split(args);
	check_bridge_precision(p, args);
	check_bridge_overlap(p, args);
	check_bridge_cdmc(p, gpu);
	check_bridge_fsdp(p, args);
}

/* zb-no-mla, zb-ep-dp, zb-pp on a plan of the zero-bubble fork. */
static void check_zb_rules(const struct pipette_plan *p, const char *model, const char *args)
{
	const struct pipette_config *c = pipette_plan_config(p);
	struct pipette_model m;
	struct pipette_err err;
	char v[64];

	ck_assert_int_eq(pipette_model_preset(model, &m, &err), 0);
	ck_assert(m.q_lora_rank == 0 && m.kv_lora_rank == 0);
	rule_used[R_ZB_MLA]++;
	if (m.experts) {
		ck_assert_msg(c->dp % c->ep == 0, "dp %d ep %d: %s", c->dp, c->ep, args);
		rule_used[R_ZB_EPDP]++;
	}
	if (flag(args, "--enable-zero-bubble", v, sizeof(v)) ||
	    flag(args, "--zero-bubble-v-schedule", v, sizeof(v))) {
		ck_assert_msg(c->pp > 1, "%s", args);
		rule_used[R_ZB_PP]++;
	}
}

/* tt-stage-count on the TOML (layers per stage and both weights) and
 * tt-preset on the recipe module's import. */
static void check_tt_rules(const struct pipette_plan *p, const char *model)
{
	const struct pipette_config *c = pipette_plan_config(p);
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	const char *q;
	int lps = -1, first = 1, last = 1, layers = model_layers(model), stages, per_rank;

	ck_assert_int_eq(pipette_plan_write_torchtitan(p, mem), 0);
	fclose(mem);
	if (!strcmp(model, "llama3-8b") || !strcmp(model, "llama3-70b") ||
	    !strcmp(model, "deepseek-v3")) {
		ck_assert_msg(!strstr(buf, "my_base") && strstr(buf, "config_registry import"), "%s", buf);
		rule_used[R_TT_PRESET]++;
	}
	/* tt-async-tp: the async TP the plan was timed with is set, and only
	 * beside the compiled model, in both forms */
	if (pipette_config_stack(c)->async_tp && c->tp > 1) {
		const char *toml = strstr(buf, "\n[parallelism]");

		ck_assert_msg(strstr(buf, "c.compile.enable_async_tensor_parallel = True\n") &&
			      strstr(buf, "c.compile.enable = True\n"), "%s", buf);
		ck_assert_msg(toml && strstr(toml, "enable_async_tensor_parallel = true\n") &&
			      strstr(toml, "\n[compile]\nenable = true\n"), "%s", buf);
		rule_used[R_TT_ASYNC]++;
	} else {
		ck_assert_msg(!strstr(buf, "enable_async_tensor_parallel"), "%s", buf);
	}
	if (c->pp > 1) {
		q = strstr(buf, "\n[parallelism]");
		ck_assert_ptr_nonnull(q);
		sscanf(strstr(q, "pipeline_parallel_layers_per_stage = "), "%*[^=]= %d", &lps);
		if ((q = strstr(q, "pipeline_parallel_first_stage_less_layers = ")))
			sscanf(q, "%*[^=]= %d", &first);
		if ((q = strstr(buf, "\n[parallelism]")) &&
		    (q = strstr(q, "pipeline_parallel_last_stage_less_layers = ")))
			sscanf(q, "%*[^=]= %d", &last);
		ck_assert_int_gt(lps, 0);
		stages = (layers + first + last + lps - 1) / lps;
		/* the plan's stages per rank: 1 for single-stage schedules,
		 * at least 2 for the looped ones (pipeline_parallel.py:94-109) */
		per_rank = pipette_config_chunks(c);
		ck_assert_int_eq(per_rank == 1, c->schedule == PIPETTE_SCHED_1F1B ||
						c->schedule == PIPETTE_SCHED_GPIPE);
		ck_assert_msg(stages == c->pp * per_rank, "%d stages for pp %d x %d: %s", stages, c->pp,
			      per_rank, buf);
		rule_used[R_TT_STAGES]++;
	}
	free(buf);
}

/* sbatch-syntax, sbatch-lines, sbatch-ranks on the script of a plan. */
static void check_sbatch(const struct pipette_plan *p, const char *script, int nodes,
			 const char *launch)
{
	const struct pipette_config *c = pipette_plan_config(p);
	int G = pipette_plan_gpus_per_node(p), W = pipette_plan_world(p);
	int torchrun = strstr(script, "exec torchrun ") != NULL, seen[4096] = { 0 }, arms = 0;
	char path[] = "/tmp/pipette-sbatch-XXXXXX", want[160], cmd[96];
	const char *q;
	FILE *f;
	int fd = mkstemp(path), i;

	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	fputs(script, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "bash -n %s", path);
	ck_assert_msg(system(cmd) == 0, "bash -n refuses:\n%s", script);
	unlink(path);
	rule_used[R_SB_SYNTAX]++;
	snprintf(want, sizeof(want), "\n#SBATCH --nodes=%d\n#SBATCH --ntasks-per-node=%d\n"
		 "#SBATCH --gpus-per-node=%d\n", nodes, torchrun ? 1 : G, G);
	ck_assert_msg(strstr(script, want) && strstr(script, "\n#SBATCH --job-name="), "%s", script);
	rule_used[R_SB_LINES]++;
	for (q = strstr(script, ") order="); q; q = strstr(q + 1, ") order=")) {
		char order[256], ranks[1024] = "";
		int slot[64] = { 0 }, k, v, nr;
		const char *t;

		ck_assert_int_eq(sscanf(q, ") order=%255s", order), 1);
		for (t = order, k = 0; *t; k++, t += strcspn(t, ",") + (t[strcspn(t, ",")] == ',')) {
			v = atoi(t);
			ck_assert(v >= 0 && v < G && !slot[v]++);
		}
		ck_assert_int_eq(k, G);
		if (torchrun) {
			ck_assert_int_eq(sscanf(strstr(q, "node_rank="), "node_rank=%d", &nr), 1);
			ck_assert(nr >= 0 && nr < nodes && !seen[nr]++);
		} else {
			ck_assert_int_eq(sscanf(strstr(q, "ranks="), "ranks=%1023s", ranks), 1);
			for (t = ranks; *t; t += strcspn(t, ",") + (t[strcspn(t, ",")] == ','))
				if ((v = atoi(t)) >= 0)
					ck_assert(v < W && !seen[v]++);
		}
		arms++;
	}
	ck_assert_int_eq(arms, nodes);
	for (i = 0; i < (torchrun ? nodes : W); i++)
		ck_assert_msg(seen[i] == 1, "rank %d", i);
	/* the executed command is the plan's own launch line (torchrun's
	 * rendezvous options before it in torchrun mode) */
	q = strstr(script, "\nexec ");
	ck_assert_ptr_nonnull(q);
	ck_assert_msg(strstr(q, launch) == q + 6 + (torchrun ? strcspn(q + 6, "-") : 0) ||
		      strstr(q, launch), "%s\n---\n%s", launch, q);
	(void)c;
	rule_used[R_SB_RANKS]++;
}

/* A refusal names the plan's stack or its model (refusal-named). */
static void check_refusal(const struct pipette_plan *p, const char *model, const char *why)
{
	const struct pipette_stack *st = pipette_config_stack(pipette_plan_config(p));

	ck_assert_msg(why[0] && (strstr(why, st->name) || strstr(why, model)), "%s", why);
	rule_used[R_REFUSAL]++;
}

struct fmt_job {
	const char *model;
	int nodes;
	long gbs, seq;
	int tp, pp, cp, ep, vpp, sched;
	unsigned rmods;
	int deepep;
};

/* dense, CP, uneven PP, VPP, full recompute, MoE, MLA with an uneven
 * interleaved layout, FSDP-sized data parallelism, the fork's schedules. */
static const struct fmt_job fmt_jobs[] = {
	{ "llama3-8b", 1, 64, 4096, -1, -1, -1, -1, -1, -1, 0, 0 },
	{ "llama3-8b", 4, 128, 8192, -1, -1, 2, -1, -1, -1, 0, 0 },
	{ "llama3-70b", 4, 256, 8192, -1, -1, -1, -1, -1, -1, 0, 0 },
	{ "llama3-70b", 16, 256, 4096, 8, 4, -1, -1, 4, PIPETTE_SCHED_INTERLEAVED, 0, 0 },
	{ "llama3-70b", 8, 256, 4096, 8, 4, -1, -1, -1, PIPETTE_SCHED_1F1B, 0, 0 },
	{ "llama3-8b", 16, 256, 8192, -1, -1, -1, -1, -1, -1, 0, 0 },
	{ "mixtral-8x7b", 8, 256, 4096, -1, -1, -1, -1, -1, -1, 0, 0 },
	{ "deepseek-v3", 128, 8192, 4096, 1, 8, -1, 64, 2, PIPETTE_SCHED_INTERLEAVED,
	  PIPETTE_RM_MLA_UP_PROJ | PIPETTE_RM_MLP | PIPETTE_RM_MOE, 1 },
	{ "llama3-8b", 4, 64, 4096, 1, 4, -1, -1, -1, PIPETTE_SCHED_ZB_H1, 0, 0 },
	{ "llama3-8b", 4, 64, 4096, 2, 4, -1, -1, -1, PIPETTE_SCHED_V_HALF, 0, 0 },
	{ "llama3-8b", 1, 64, 4096, -1, -1, -1, -1, -1, PIPETTE_SCHED_V_MIN, 0, 0 },
	/* MLA searched freely; EP 8 over DP 4 (16 GPUs at TP 4), which
	 * upstream takes and the fork does not */
	{ "deepseek-v3", 64, 1024, 4096, -1, -1, -1, -1, -1, -1, 0, 0 },
	{ "mixtral-8x7b", 2, 64, 4096, 4, -1, -1, 8, -1, -1, 0, 0 },
};

struct fmt_keys {
	struct keyset upstream, fork, nemo, tt_head, tt_toml, bridge;
};

/* What a stack's own form may refuse: what it cannot say. */
static int own_refusal(const struct pipette_stack *st, const char *why)
{
	return st->form == PIPETTE_FORM_NONE || strstr(why, "MTP") ||
	       strstr(why, "has no performance recipe") ||
	       strstr(why, "asserts the alltoall dispatcher") ||
	       strstr(why, "EP all-to-all overlap");
}

/* The megatron, nemo and launch lines of a plan, checked or refused. */
static void check_lines(const struct pipette_plan *p, const struct fmt_job *j,
			const struct fmt_keys *k)
{
	const struct pipette_stack *st = pipette_config_stack(pipette_plan_config(p));
	static const enum pipette_line_form forms[] = { PIPETTE_LINE_MEGATRON, PIPETTE_LINE_NEMO,
							PIPETTE_LINE_STACK };
	char line[8192], args[4096];
	size_t f;

	for (f = 0; f < 3; f++) {
		int form = forms[f] == PIPETTE_LINE_STACK ? (st->form == PIPETTE_FORM_NEMO
			   ? PIPETTE_LINE_NEMO : st->form == PIPETTE_FORM_TORCHTITAN ? 9
			   : st->form == PIPETTE_FORM_BRIDGE ? 10
			   : PIPETTE_LINE_MEGATRON) : (int)forms[f];
		int rc = pipette_plan_launch_line(p, forms[f], NULL, line, sizeof(line));

		ck_assert_int_ge(rc, 0);
		if (rc == 1) {
			check_refusal(p, j->model, line);
			/* a stack's own form refuses only what it cannot say */
			if (forms[f] == PIPETTE_LINE_STACK)
				ck_assert_msg(own_refusal(st, line) || strstr(line, "--trainer"), "%s",
					      line);
			continue;
		}
		if (form == 10) {
			check_bridge_line(&k->bridge, p, "H100", line);
			continue;
		}
		if (form == 9) {	/* torchtitan's overrides: test_torchtitan_fields */
			ck_assert_ptr_nonnull(strstr(line, "torchrun --nnodes="));
			continue;
		}
		if (form == PIPETTE_LINE_NEMO) {
			ck_assert_int_eq(pipette_plan_nemo_args(p, args, sizeof(args)), 0);
			check_line(p, line, "nemo llm pretrain -y", args);
			check_nemo_line(&k->nemo, p, args);
			check_nemo_rules(p, &k->nemo, args, j->nodes);
			continue;
		}
		ck_assert_int_eq(pipette_plan_megatron_args(p, args, sizeof(args)), 0);
		check_line(p, line, "python pretrain_gpt.py", args);
		check_flags_known(args, st->form == PIPETTE_FORM_MEGATRON_ZB ? &k->fork : &k->upstream);
		if (strcmp(st->name, "megatron-2022"))
			check_megatron_rules(p, args, st->form == PIPETTE_FORM_MEGATRON_ZB);
		if (st->form == PIPETTE_FORM_MEGATRON_ZB)
			check_zb_rules(p, j->model, args);
	}
}

/* The torchtitan form and the batch script of a plan, checked or refused. */
static void check_files(const struct pipette_plan *p, const struct fmt_job *j,
			const struct fmt_keys *k)
{
	const struct pipette_stack *st = pipette_config_stack(pipette_plan_config(p));
	struct pipette_sbatch_opts so = { NULL, NULL, NULL };
	char why[1024], line[8192];
	char *buf = NULL;
	size_t len = 0;
	FILE *mem;
	int rc = pipette_plan_torchtitan_check(p, why, sizeof(why));

	ck_assert_int_eq(rc, st->form != PIPETTE_FORM_TORCHTITAN);
	rule_used[R_TT_OWN]++;
	if (rc)
		check_refusal(p, j->model, why);
	else {
		check_tt_file(p, &k->tt_head, &k->tt_toml, model_layers(j->model));
		check_tt_rules(p, j->model);
	}
	mem = open_memstream(&buf, &len);
	rc = pipette_plan_write_sbatch(p, &so, mem, why, sizeof(why));
	fclose(mem);
	ck_assert_int_ge(rc, 0);
	if (rc == 1 && strstr(why, "--trainer")) {	/* no entry point of torchtitan's own */
		check_refusal(p, j->model, why);
		free(buf);
		so.trainer = "train.py";
		mem = open_memstream(&buf, &len);
		rc = pipette_plan_write_sbatch(p, &so, mem, why, sizeof(why));
		fclose(mem);
		ck_assert_msg(rc == 0, "%s", why);
	}
	if (rc == 1) {
		check_refusal(p, j->model, why);
		ck_assert_msg(own_refusal(st, why), "%s", why);
	} else {
		char args[4096];

		ck_assert_int_eq(pipette_plan_launch_args(p, args, sizeof(args)), 0);
		snprintf(line, sizeof(line), "%s", args);
		{
			struct pipette_args a = { line, sizeof(line), 0, 0 };

			line[0] = '\0';
			pipette_shell_words(&a, args);
		}
		check_sbatch(p, buf, j->nodes, line);
	}
	free(buf);
}

/* The low-precision plans of prec_jobs on the megatron-bridge stack: the
 * recipes its run script selects, checked; the others refused. */
static void check_bridge_precisions(const struct keyset *keys)
{
	char line[8192];
	size_t j;
	int checked = 0;

	for (j = 0; j < sizeof(prec_jobs) / sizeof(prec_jobs[0]); j++) {
		struct pipette_err err;
		struct pipette_plan *p = plan_prec("megatron-bridge", &prec_jobs[j], NULL, &err);
		int rc;

		if (!p) {	/* delayed scaling: no -c for it */
			ck_assert_msg(prec_jobs[j].precision == PIPETTE_PREC_FP8_DELAYED, "%s", err.msg);
			ck_assert_ptr_nonnull(strstr(err.msg, "megatron-bridge"));
			continue;
		}
		rc = pipette_plan_launch_line(p, PIPETTE_LINE_STACK, NULL, line, sizeof(line));
		ck_assert_int_ge(rc, 0);
		if (rc == 1) {
			check_refusal(p, prec_jobs[j].model, line);
			ck_assert_msg(own_refusal(pipette_config_stack(pipette_plan_config(p)), line),
				      "%s", line);
		} else {
			check_bridge_line(keys, p, prec_jobs[j].gpu, line);
			checked++;
		}
		pipette_plan_destroy(p);
	}
	ck_assert_int_ge(checked, 3);
}

START_TEST(test_all_formats)
{
	static const char *const stacks[][2] = {
		{ "megatron", "" }, { "nemo", "" }, { "megatron-zb", "" }, { "megatron-2022", "" },
		{ "torchtitan", "" }, { "composer-fsdp", "" }, { "megatron-bridge", "" },
		{ "torchtitan", "compile=on,tp_overlap=on" },	/* async TP */
		{ "megatron-bridge", "megatron_fsdp=on" },
		{ "megatron-bridge", "megatron_fsdp=on,cpu_offload=8" },
		{ "megatron-bridge", "cpu_offload=4" },
	};
	struct fmt_keys *k = malloc(sizeof(*k));
	int own[11] = { 0 }, i, found[R_COUNT] = { 0 };
	size_t s, j;
	FILE *f = fopen(DATA "launch-rules.tsv", "r");
	char row[2048];

	/* the rule list and the checks name the same rules */
	ck_assert_ptr_nonnull(f);
	while (fgets(row, sizeof(row), f)) {
		if (row[0] == '#' || !strncmp(row, "rule-id\t", 8))
			continue;
		row[strcspn(row, "\t")] = '\0';
		for (i = 0; i < R_COUNT && strcmp(row, rule_ids[i]); i++)
			;
		ck_assert_msg(i < R_COUNT, "launch-rules.tsv: rule %s has no check", row);
		found[i]++;
	}
	fclose(f);
	for (i = 0; i < R_COUNT; i++)
		ck_assert_msg(found[i] == 1, "rule %s is not in launch-rules.tsv once", rule_ids[i]);
	load_keys(DATA "megatron-args.tsv", &k->upstream);
	load_keys(DATA "zb-fork-args.tsv", &k->fork);
	load_keys(DATA "nemo-keys.tsv", &k->nemo);
	load_torchtitan(&k->tt_head, 0);
	load_torchtitan(&k->tt_toml, 1);
	load_keys(DATA "bridge-keys.tsv", &k->bridge);
	memset(rule_used, 0, sizeof(rule_used));
	check_bridge_precisions(&k->bridge);
	for (s = 0; s < sizeof(stacks) / sizeof(stacks[0]); s++)
		for (j = 0; j < sizeof(fmt_jobs) / sizeof(fmt_jobs[0]); j++) {
			const struct fmt_job *fj = &fmt_jobs[j];
			struct pipette_pins pins;
			struct pipette_plan *p;

			pipette_pins_init(&pins);
			pins.tp = fj->tp, pins.pp = fj->pp, pins.cp = fj->cp, pins.ep = fj->ep;
			pins.vpp = fj->vpp, pins.schedule = fj->sched;
			if (fj->rmods)
				pins.recompute = PIPETTE_RECOMPUTE_SELECTIVE, pins.recompute_modules = fj->rmods;
			if (fj->deepep)
				pins.dispatcher = PIPETTE_DISPATCH_DEEPEP;
			p = plan_with(stacks[s][0], stacks[s][1], fj->model, fj->nodes, fj->gbs, fj->seq,
				      &pins);
			if (!p)
				continue;	/* the stack cannot run these pins */
			own[s]++;
			if (s < 3)	/* the Megatron-Core stacks */
				check_connections(p, s == 2);
			check_lines(p, fj, k);
			check_files(p, fj, k);
			pipette_plan_destroy(p);
		}
	for (s = 0; s < sizeof(stacks) / sizeof(stacks[0]); s++)
		ck_assert_msg(own[s] >= 2, "stack %s %s planned %d of the jobs", stacks[s][0],
			      stacks[s][1], own[s]);
	for (i = 0; i < R_COUNT; i++)
		ck_assert_msg(rule_used[i] > 0, "no output exercised rule %s", rule_ids[i]);
	free(k);
}
END_TEST

/* The shell check itself can fail: a bare pipe, a bare list, an unclosed
 * quote are not read back. */
START_TEST(test_shell_split)
{
	static char w[MAX_WORDS][512];
	int n;

	ck_assert(!shell_split("x --layout Et|tL", w, &n));
	ck_assert(!shell_split("x a=[\"b\"]", w, &n));
	ck_assert(!shell_split("x 'open", w, &n));
	ck_assert(shell_split("x --layout 'Et|tL' 'a=[\"b\"]'", w, &n));
	ck_assert_int_eq(n, 4);
	ck_assert_str_eq(w[2], "Et|tL");
	ck_assert_str_eq(w[3], "a=[\"b\"]");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("launch");
	TCase *tc = tcase_create("stacks");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_megatron_lines);
	tcase_add_test(tc, test_nemo_lines);
	tcase_add_test(tc, test_moe_lines);
	tcase_add_test(tc, test_precision_lines);
	tcase_add_test(tc, test_precision_refused);
	tcase_add_test(tc, test_schedules_per_stack);
	tcase_add_test(tc, test_stack_memory_facts);
	tcase_add_test(tc, test_stack_options);
	tcase_add_test(tc, test_torchtitan_fields);
	tcase_add_test(tc, test_torchtitan_precision);
	tcase_add_test(tc, test_torchtitan_shards);
	tcase_add_test(tc, test_shell_split);
	tcase_add_test(tc, test_all_formats);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
