/* pipette: Slurm's topology/block blocks (see topology.h). */
#include "inputs/topology.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "inputs/limits.h"
#include "inputs/readfile.h"

struct tnode {
	char *name;
	int block;
};

struct pipette_topology {
	char *source;
	char **block;		/* names */
	int *size;		/* nodes per block */
	int *line;		/* the line that defines each block */
	int n_blocks, cap_blocks;
	struct tnode *node;	/* sorted by name once read */
	int n_nodes, cap_nodes;
	int base;		/* BlockSizes' first, 0: none */
	/* SHA-256 of the file's bytes (pipette_topology_load) */
	unsigned char sha256[PIPETTE_SHA256_LEN];
	int has_sha256;
};

/* One logical line while parsing: its number and its text. */
struct tline {
	const char *src;
	int no;
	struct pipette_err *err;
};

__attribute__((format(printf, 2, 3)))
static int lerr(const struct tline *l, const char *fmt, ...)
{
	char msg[PIPETTE_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return pipette_fail(l->err, "%s: line %d: %s", l->src, l->no, msg);
}

void pipette_topology_destroy(struct pipette_topology *t)
{
	int i;

	if (!t)
		return;
	for (i = 0; i < t->n_blocks; i++)
		free(t->block[i]);
	for (i = 0; i < t->n_nodes; i++)
		free(t->node[i].name);
	free(t->block);
	free(t->size);
	free(t->line);
	free(t->node);
	free(t->source);
	free(t);
}

/* The next KEY=VALUE of a line at *p: key and value NUL-terminated in
 * place (a value may be "quoted"); 0 at the end of the line, -1 on a
 * token without '='. */
static int next_pair(char **p, char **key, char **val, const struct tline *l)
{
	char *s = *p, *e;

	while (*s && isspace((unsigned char)*s))
		s++;
	if (!*s)
		return 0;
	*key = s;
	while (*s && *s != '=' && !isspace((unsigned char)*s))
		s++;
	if (*s != '=')
		return lerr(l, "expected KEY=VALUE, got '%.*s'", (int)(s - *key), *key);
	*s++ = '\0';
	if (*s == '"') {
		*val = ++s;
		if (!(e = strchr(s, '"')))
			return lerr(l, "%s: unterminated quoted value", *key);
	} else {
		*val = s;
		for (e = s; *e && !isspace((unsigned char)*e); e++)
			;
	}
	*p = *e ? e + 1 : e;
	*e = '\0';
	return 1;
}

/* BlockSizes=B[,B*2^k...]: the base and its power-of-two multiples, as
 * block_record.c's _read_topo_file accepts them (levels up to 15). */
static int parse_sizes(struct pipette_topology *t, const char *val, const struct tline *l)
{
	const char *s = val;

	if (t->base)
		return lerr(l, "BlockSizes given twice");
	while (*s) {
		char *e;
		long v = strtol(s, &e, 10), q;
		int lv;

		if (e == s || v <= 0 || v > PIPETTE_MAX_NODES || (*e && *e != ','))
			return lerr(l, "BlockSizes=%.64s: expected node counts 1..%d separated "
				    "by commas", val, PIPETTE_MAX_NODES);
		if (!t->base)
			t->base = (int)v;
		q = v / t->base;
		for (lv = 0; (1L << lv) < q; lv++)
			;
		if (v % t->base || (1L << lv) != q || lv > 15)
			return lerr(l, "BlockSizes=%.64s: %ld is not the base size %d times a "
				    "power of two up to 2^15", val, v, t->base);
		s = *e ? e + 1 : e;
	}
	if (!t->base)
		return lerr(l, "BlockSizes is empty");
	return 0;
}

static int add_block(struct pipette_topology *t, const char *name, const char *nodes,
		     pipette_hostlist_fn expand, const struct tline *l)
{
	char **names = NULL;
	int n = 0, i;

	for (i = 0; i < t->n_blocks; i++)
		if (!strcmp(t->block[i], name))
			return lerr(l, "block '%.64s' is defined twice", name);
	if (!*name)
		return lerr(l, "BlockName is empty");
	if (!nodes || !*nodes)
		return lerr(l, "block '%.64s' has no Nodes=", name);
	if (t->n_blocks == t->cap_blocks) {
		int cap = t->cap_blocks ? 2 * t->cap_blocks : 16;
		char **b = realloc(t->block, (size_t)cap * sizeof(*b));
		int *sz = b ? realloc(t->size, (size_t)cap * sizeof(*sz)) : NULL;
		int *ln = sz ? realloc(t->line, (size_t)cap * sizeof(*ln)) : NULL;

		if (b)
			t->block = b;
		if (sz)
			t->size = sz;
		if (!b || !sz || !ln)
			return pipette_fail(l->err, "out of memory");
		t->line = ln;
		t->cap_blocks = cap;
	}
	if (expand(nodes, &names, &n, l->err) < 0)
		return pipette_fail_prefix(l->err, "%s: line %d: block '%.64s': ", l->src,
					   l->no, name);
	if (t->n_nodes + n > PIPETTE_MAX_NODES * 4) {
		for (i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return lerr(l, "more than %d nodes in blocks", PIPETTE_MAX_NODES * 4);
	}
	if (t->n_nodes + n > t->cap_nodes) {
		int cap = 2 * (t->n_nodes + n);
		struct tnode *v = realloc(t->node, (size_t)cap * sizeof(*v));

		if (!v) {
			for (i = 0; i < n; i++)
				free(names[i]);
			free(names);
			return pipette_fail(l->err, "out of memory");
		}
		t->node = v;
		t->cap_nodes = cap;
	}
	for (i = 0; i < n; i++) {
		t->node[t->n_nodes].name = names[i];
		t->node[t->n_nodes++].block = t->n_blocks;
	}
	free(names);
	if (!(t->block[t->n_blocks] = strdup(name)))
		return pipette_fail(l->err, "out of memory");
	t->line[t->n_blocks] = l->no;
	t->size[t->n_blocks++] = n;
	return 0;
}

/* One logical line (comment stripped). */
static int parse_line(struct pipette_topology *t, char *line, pipette_hostlist_fn expand,
		      const struct tline *l)
{
	char *p = line, *key = NULL, *val = NULL, *name = NULL, *nodes = NULL;
	int r, first = 1, sizes = 0;

	while ((r = next_pair(&p, &key, &val, l)) > 0) {
		if (first && !strcasecmp(key, "BlockName")) {
			name = val;
		} else if (first && !strcasecmp(key, "BlockSizes")) {
			sizes = 1;
			if (parse_sizes(t, val, l) < 0)
				return -1;
		} else if (name && !strcasecmp(key, "Nodes")) {
			if (nodes)
				return lerr(l, "Nodes given twice");
			nodes = val;
		} else if (first && !strcasecmp(key, "SwitchName")) {
			return lerr(l, "SwitchName: a topology/tree switch, not a topology/block "
				    "block (pipette reads BlockName lines as NVLink domains)");
		} else {
			return lerr(l, "unknown parameter '%.64s'%s", key, sizes ?
				    " (BlockSizes stands on a line of its own)" :
				    name ? " (a block has BlockName and Nodes)" :
				    " (expected BlockName=... Nodes=... or BlockSizes=...)");
		}
		first = 0;
	}
	if (r < 0)
		return -1;
	return name ? add_block(t, name, nodes, expand, l) : 0;
}

static int cmp_tnode(const void *a, const void *b)
{
	return strcmp(((const struct tnode *)a)->name, ((const struct tnode *)b)->name);
}

/* Sort the nodes by name; a node in two blocks, or a block smaller than
 * the base size, is an error. */
static int finish(struct pipette_topology *t, struct pipette_err *err)
{
	int i;

	if (!t->n_blocks)
		return pipette_fail(err, "%s: no BlockName lines (pipette reads Slurm's "
				    "topology/block blocks)", t->source);
	qsort(t->node, (size_t)t->n_nodes, sizeof(*t->node), cmp_tnode);
	for (i = 1; i < t->n_nodes; i++)
		if (!strcmp(t->node[i - 1].name, t->node[i].name)) {
			int a = t->node[i - 1].block, b = t->node[i].block;
			int lo = a < b ? a : b, hi = a < b ? b : a;

			return pipette_fail(err, "%s: line %d: node %.64s of block '%.64s' is "
					    "already in block '%.64s' (line %d)", t->source,
					    t->line[hi], t->node[i].name, t->block[hi], t->block[lo],
					    t->line[lo]);
		}
	for (i = 0; t->base && i < t->n_blocks; i++)
		if (t->size[i] < t->base)
			return pipette_fail(err, "%s: line %d: block '%.64s' has %d nodes, fewer "
					    "than the base block size %d (BlockSizes)", t->source,
					    t->line[i], t->block[i], t->size[i], t->base);
	return 0;
}

/* The text's lines, continuations joined, comments stripped. */
static int parse_text(struct pipette_topology *t, const char *text, size_t len,
		      pipette_hostlist_fn expand, struct pipette_err *err)
{
	char *buf = malloc(len + 1);
	size_t i = 0, k;
	struct tline l = { t->source, 1, err };
	int next = 1, rv = 0;

	if (!buf)
		return pipette_fail(err, "out of memory");
	while (i < len && !rv) {
		int comment = 0;

		l.no = next;
		for (k = 0; i < len; i++) {
			char ch = text[i];

			if (ch == '\r' && i + 1 < len && text[i + 1] == '\n')
				continue;	/* CRLF: the line ends at the LF */
			if (ch == '\n') {
				next++;
				if (k && buf[k - 1] == '\\' && !comment) {
					k--;	/* continued */
					continue;
				}
				i++;
				break;
			}
			if (ch == '\0') {
				rv = lerr(&l, "a NUL byte");
				break;
			}
			comment |= ch == '#';
			if (!comment)
				buf[k++] = ch == '\t' || ch == '\r' ? ' ' : ch;
		}
		buf[k] = '\0';
		if (!rv)
			rv = parse_line(t, buf, expand, &l);
	}
	free(buf);
	return rv;
}

int pipette_topology_parse(const char *text, size_t len, const char *source,
			   pipette_hostlist_fn expand, struct pipette_topology **out,
			   struct pipette_err *err)
{
	struct pipette_topology *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t || !(t->source = strdup(source ? source : "topology.conf"))) {
		free(t);
		return pipette_fail(err, "out of memory");
	}
	if (len > (size_t)PIPETTE_TOPO_MAX_FILE_BYTES) {
		pipette_fail(err, "%s: %zu bytes exceed the limit of %ld", t->source, len,
			     PIPETTE_TOPO_MAX_FILE_BYTES);
		pipette_topology_destroy(t);
		return -1;
	}
	if (parse_text(t, text, len, expand, err) < 0 || finish(t, err) < 0) {
		pipette_topology_destroy(t);
		return -1;
	}
	*out = t;
	return 0;
}

int pipette_topology_load(const char *path, pipette_hostlist_fn expand,
			  struct pipette_topology **out, struct pipette_err *err)
{
	struct pipette_file f;
	int rv;

	*out = NULL;
	if (pipette_read_file(path, "topology.conf", PIPETTE_TOPO_MAX_FILE_BYTES, &f, err))
		return -1;
	rv = pipette_topology_parse(f.data, f.len, path, expand, out, err);
	if (rv == 0) {
		memcpy((*out)->sha256, f.sha256, sizeof((*out)->sha256));
		(*out)->has_sha256 = 1;
	}
	pipette_file_free(&f);
	return rv;
}

const unsigned char *pipette_topology_sha256(const struct pipette_topology *t)
{
	return t->has_sha256 ? t->sha256 : NULL;
}

const char *pipette_topology_source(const struct pipette_topology *t)
{
	return t->source;
}

int pipette_topology_block_count(const struct pipette_topology *t)
{
	return t->n_blocks;
}

const char *pipette_topology_block_name(const struct pipette_topology *t, int block)
{
	return block >= 0 && block < t->n_blocks ? t->block[block] : NULL;
}

int pipette_topology_block_nodes(const struct pipette_topology *t, int block)
{
	return block >= 0 && block < t->n_blocks ? t->size[block] : 0;
}

int pipette_topology_block_of(const struct pipette_topology *t, const char *node)
{
	struct tnode key = { (char *)node, 0 };
	const struct tnode *hit;

	if (!node || !t->n_nodes)
		return -1;
	hit = bsearch(&key, t->node, (size_t)t->n_nodes, sizeof(*t->node), cmp_tnode);
	return hit ? hit->block : -1;
}

int pipette_topology_base_size(const struct pipette_topology *t)
{
	return t->base;
}
