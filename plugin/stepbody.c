/* spank_pipette: a step's result for all its nodes, the text the plan
 * cache stores (plancache.c), and each node's share of it.
 *
 * A node's result (outcome.c) holds what differs between steps that share
 * a plan: Slurm's GPU list of the node (CUDA_VISIBLE_DEVICES is that list
 * permuted) and the step's MASTER_PORT.  So the stored text holds every
 * node's task records with the GPU slots 0..G-1 the plan is computed on
 * (remote.c: every node plans on canonical slots), without MASTER_PORT;
 * a node takes its records and puts its own GPUs in, and the caller adds
 * the port.  A fresh plan goes through the same text, so a node's result
 * is the same bytes whether the plan was computed or read.
 *
 *   W/L lines, J records     as in outcome.c
 *   N <node>                 the T records of <node> follow
 *   T <task> <ow> NAME=VALUE
 *   END
 *
 * With plan_dir, the cache entry holds after END the plan file's bytes
 * (the plan's JSON): node 0 writes them when it reads the plan instead of
 * planning (step.c), so the file exists whichever node planned.
 *
 * The text comes from a file of the user's: every record a node applies is
 * checked again when it is read (names of the environment contract only,
 * no control characters), so an edited entry can at most fail the step.
 * The task records of the other nodes are only walked past (each must be
 * a T line): they never reach this node's tasks, and parsing all of them
 * on every node cost 8192 ranks' records per node, most of a cached
 * step's time on 1024 nodes (tests/bench/plugin_load.sh). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

/* The longest CUDA_VISIBLE_DEVICES: 64 GPUs of UUIDs
 * ("GPU-" + 36 characters, nvidia-smi -L) with their commas; the same
 * bound as core/render/env.c's. */
#define CVD_MAX (PIPETTE_MAX_GPUS * 64)

int pipette_step_body_write(FILE *out, const struct pipette_plan *plan, char *const *nodes,
			    int nnodes, int gpus_per_node, int tasks_per_node,
			    struct pipette_err *err)
{
	char slot_text[PIPETTE_MAX_GPUS][4], *slots[PIPETTE_MAX_GPUS];
	struct pipette_task_ctx t = { 0 };
	int i, k;

	if (gpus_per_node < 1 || gpus_per_node > PIPETTE_MAX_GPUS)
		return pipette_fail(err, "%d GPUs on a node: expected 1 to %d", gpus_per_node,
				    PIPETTE_MAX_GPUS);
	for (i = 0; i < gpus_per_node; i++) {
		snprintf(slot_text[i], sizeof(slot_text[i]), "%d", i);
		slots[i] = slot_text[i];
	}
	if (pipette_outcome_record_job(out, plan, err))
		return -1;
	t.gpus = slots;
	t.ngpus = gpus_per_node;
	t.master_port = 0;	/* the step's, added per node */
	for (i = 0; i < nnodes; i++) {
		t.node = pipette_plan_node_index(plan, nodes[i]);
		if (t.node < 0)
			return pipette_fail(err, "node %s is not in the plan", nodes[i]);
		if (fprintf(out, "N %s\n", nodes[i]) < 0)
			return pipette_fail(err, "writing the result: out of memory");
		for (k = 0; k < tasks_per_node; k++) {
			t.local_task = k;
			if (pipette_outcome_record_task(out, plan, &t, err))
				return -1;
		}
	}
	return 0;
}

/* One GPU slot (decimal, below ngpus) at *p; -1 if there is none. */
static int slot_at(const char **p, int ngpus, long *slot)
{
	char *end;

	if (**p < '0' || **p > '9')
		return -1;
	*slot = strtol(*p, &end, 10);
	if (*slot >= ngpus || end - *p > 2)
		return -1;
	*p = end;
	return 0;
}

/* CUDA_VISIBLE_DEVICES with this node's GPUs for the slots. */
static int translate_gpus(const char *slots, char *const *gpus, int ngpus, char *buf,
			  size_t len, struct pipette_err *err)
{
	const char *p = slots;
	size_t off = 0;
	int w;

	buf[0] = '\0';
	while (*p) {
		long s;

		if (slot_at(&p, ngpus, &s))
			return pipette_fail(err, "CUDA_VISIBLE_DEVICES '%.64s': not a list of "
					    "GPU slots below %d", slots, ngpus);
		w = snprintf(buf + off, len - off, "%s%s", off ? "," : "", gpus[s]);
		if (w < 0 || (size_t)w >= len - off)
			return pipette_fail(err, "CUDA_VISIBLE_DEVICES is longer than %zu bytes",
					    len - 1);
		off += (size_t)w;
		if (*p == ',')
			p++;
		else if (*p)
			return pipette_fail(err, "CUDA_VISIBLE_DEVICES '%.64s': not a list of GPU "
					    "slots", slots);
	}
	return 0;
}

static int printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 && *s != '\t')
			return 0;
	return 1;
}

static int put(FILE *out, struct pipette_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int put(FILE *out, struct pipette_err *err, const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vfprintf(out, fmt, ap);
	va_end(ap);
	return w < 0 ? pipette_fail(err, "writing the result: out of memory") : 0;
}

/* Where the walk is: before the first N, in node's section, in another's. */
struct node_walk {
	const char *node;
	char *const *gpus;
	int ngpus;
	FILE *out;
	int in_nodes, mine, found;
};

static int one_record(struct node_walk *w, struct pipette_record *r, struct pipette_err *err)
{
	char cvd[CVD_MAX];
	const char *value = r->value;
	int scope;

	if ((r->text && !printable(r->text)) || (r->value && !printable(r->value)))
		return pipette_fail(err, "a control character in a record");
	if (r->tag == 'N') {
		w->in_nodes = 1;
		w->mine = w->node && !strcmp(r->text, w->node);
		if (w->mine && w->found)
			return pipette_fail(err, "node %.64s appears twice", w->node);
		w->found |= w->mine;
		return 0;
	}
	if (r->tag != 'T' && w->in_nodes)
		return pipette_fail(err, "a '%c' record among the nodes' records", r->tag);
	if (r->tag == 'T' && !w->in_nodes)
		return pipette_fail(err, "a task record before any node");
	if (r->tag == 'W' || r->tag == 'L')
		return put(w->out, err, "%c %s\n", r->tag, r->text);
	scope = pipette_env_scope(r->name);
	if (scope != (r->tag == 'J' ? PIPETTE_ENV_JOB : PIPETTE_ENV_TASK))
		return pipette_fail(err, "variable %.32s: not a %s variable of the environment "
				    "contract", r->name, r->tag == 'J' ? "job" : "task");
	if (r->tag == 'J')
		return put(w->out, err, "J %d %s=%s\n", r->overwrite, r->name, r->value);
	if (!w->mine)
		return 0;
	if (!strcmp(r->name, "CUDA_VISIBLE_DEVICES")) {
		if (translate_gpus(r->value, w->gpus, w->ngpus, cvd, sizeof(cvd), err))
			return -1;
		value = cvd;
	}
	return put(w->out, err, "T %ld %d %s=%s\n", r->task, r->overwrite, r->name, value);
}

int pipette_step_body_node(const char *body, const char *node, char *const *gpus, int ngpus,
			   FILE *out, struct pipette_err *err)
{
	struct node_walk w = { .node = node, .gpus = gpus, .ngpus = ngpus, .out = out };
	char line[PIPETTE_OUTCOME_LINE_MAX];
	struct pipette_record r;
	const char *p = body, *nl;
	int n = 0, ended = 0;

	for (; *p; p = nl + 1, n++) {
		size_t len;

		nl = strchr(p, '\n');
		if (!nl || ended)
			return pipette_fail(err, "the step's result is %s (record %d)",
					    nl ? "malformed" : "truncated", n + 1);
		/* another node's task record: not this node's to check */
		if (w.in_nodes && !w.mine && p[0] == 'T' && p[1] == ' ')
			continue;
		len = (size_t)(nl - p);
		if (len >= sizeof(line))
			return pipette_fail(err, "the step's result: record %d is too long", n + 1);
		memcpy(line, p, len);
		line[len] = '\0';
		if (pipette_outcome_parse_record(line, "WLJNT", &r))
			return pipette_fail(err, "the step's result is malformed (record %d)", n + 1);
		if (r.tag == '.') {
			ended = 1;
			continue;
		}
		if (one_record(&w, &r, err))
			return pipette_fail_prefix(err, "the step's result, record %d: ", n + 1);
	}
	if (!ended)
		return pipette_fail(err, "the step's result is truncated (no END)");
	if (node && !w.found)
		return pipette_fail(err, "node %.64s is not in the plan", node);
	return 0;
}

size_t pipette_step_body_len(const char *entry, size_t len)
{
	const char *p = entry, *end = entry + len, *nl;

	for (; p < end; p = nl + 1) {
		if (!(nl = memchr(p, '\n', (size_t)(end - p))))
			break;
		if (nl - p == 3 && !memcmp(p, "END", 3))
			return (size_t)(nl + 1 - entry);
	}
	return len;
}

/* "pipette-plan-" + 1 to 32 hex digits + ".json" (step.c's name). */
static int plan_file_name_ok(const char *name)
{
	size_t n = strlen(name), k = strlen("pipette-plan-"), h;

	if (n <= k + 5 || strncmp(name, "pipette-plan-", k) || strcmp(name + n - 5, ".json"))
		return 0;
	h = n - k - 5;
	return h <= 32 && strspn(name + k, "0123456789abcdef") == h;
}

int pipette_step_body_plan_file(const char *body, const char *dir, unsigned uid, char *name,
				size_t len)
{
	static const char rec[] = "J 1 PIPETTE_PLAN_FILE=";
	char prefix[PIPETTE_PATH_MAX + 16];
	const char *p, *nl;
	size_t k;

	for (p = body; *p; p = nl + 1) {
		if (!(nl = strchr(p, '\n')) || (nl - p == 3 && !strncmp(p, "END", 3)))
			return 0;
		if (!strncmp(p, rec, sizeof(rec) - 1))
			break;
	}
	if (!*p)
		return 0;
	p += sizeof(rec) - 1;
	k = (size_t)snprintf(prefix, sizeof(prefix), "%s/%u/", dir, uid);
	if (k >= sizeof(prefix) || strncmp(p, prefix, k) || (size_t)(nl - p) - k >= len)
		return -1;
	memcpy(name, p + k, (size_t)(nl - p) - k);
	name[(size_t)(nl - p) - k] = '\0';
	return plan_file_name_ok(name) ? 1 : -1;
}
