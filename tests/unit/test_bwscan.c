/* Unit tests: the streaming reader of bandwidth caches (core/inputs/bwscan.c,
 * core/inputs/bwcache_parse.c), pipette-bw/2's groups (core/inputs/bwgroup.c), the
 * cluster's compact link store (core/inputs/cluster.c) and `pipette bandwidth
 * convert`.  Texts are written here, so that each case shows its input. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inputs/bwcache.h"
#include "inputs/bwcache_int.h"	/* what the syntax pass read whole */
#include "inputs/cluster.h"

#include "check_run.h"
#include "cli_run.h"

#define OUT_MAX (1 << 16)

/* A GPU type unlike any figure of the caches here (test_bwcache.c's). */
static const struct pipette_gpu_spec test_gpu = {
	.name = "TEST-GPU", .aliases = "test", .peak_tflops = 100, .hbm_bytes = 1e9,
	.hbm_gbps = 1000, .nvlink_gbps = 400, .nic_gbps = 40, .nvlink_lat_us = 3,
	.nic_lat_us = 7, .gpus_per_node = 2, .nvlink_eff = 0.5, .nic_eff = 0.75,
	.source = "test",
};

static struct pipette_bwcache *parse_ok(const char *text)
{
	struct pipette_bwcache *bw = NULL;
	struct pipette_err err = { .msg = "" };

	ck_assert_msg(pipette_bwcache_parse(text, strlen(text), "t.json", &bw, &err) == 0,
		      "%s", err.msg);
	return bw;
}

static double gbps(const struct pipette_bwcache *bw, const char *a, const char *b)
{
	struct pipette_bw_figure f;

	ck_assert_int_ge(pipette_bwcache_inter(bw, pipette_bwcache_node_index(bw, a),
					       pipette_bwcache_node_index(bw, b), &f), 0);
	return f.gbps;
}

static int same_bits(double x, double y)
{
	return !memcmp(&x, &y, sizeof(x));
}

/* ---------------------------------------------------------------- */
/* what the reader takes                                             */

#define HEAD "{\"schema\": \"pipette-bw/1\", "

START_TEST(test_scan_good)
{
	/* comments, tabs and CRLF, escapes where no key is decided, verbatim
	 * arrays of objects, exponents and many digits in the matrix */
	static const char text[] =
		"// a hand-edited cache\r\n"
		"{\"schema\": \"pipette-bw/1\", /* units */ \"units\": \"GB/s\",\r\n"
		"\t\"generator\": \"say \\\"hi\\\" \\u00e9\",\n"
		" \"inter\": {\"order\": [\"a\", \"b\", \"c\"], \"lat_us\": 4,\n"
		"   \"matrix\": [[null, 2.31e1, 23.123456789012345],\n"
		"              [ 7 , null,/* x */ 1E-1 ],\n"
		"              [null,12.5,null]],\n"
		"   \"links\": [], \"tool\": null},\n"
		" \"nodes\": {\"a\": {\"gpus\": [{\"index\": 0, \"x\": [1, {\"y\": null}]}],\n"
		"   \"intra\": {\"matrix\": [[null, 300], [299.5, null]],\n"
		"             \"links\": [{\"a\": 1, \"b\": 0, \"gbps\": 310, \"lat_us\": 2}]}}}}\n";
	struct pipette_bwcache *bw = parse_ok(text);
	struct pipette_bw_figure f;

	ck_assert_int_eq(pipette_bwcache_node_count(bw), 3);
	/* a figure reads back exactly as strtod reads its text */
	ck_assert(same_bits(gbps(bw, "a", "b"), strtod("2.31e1", NULL)));
	ck_assert(same_bits(gbps(bw, "a", "c"), strtod("23.123456789012345", NULL)));
	ck_assert(same_bits(gbps(bw, "b", "c"), strtod("1E-1", NULL)));
	ck_assert(same_bits(gbps(bw, "b", "a"), 7.0));
	ck_assert(same_bits(gbps(bw, "c", "b"), 12.5));
	ck_assert(isnan(gbps(bw, "c", "a")));
	ck_assert_int_eq(pipette_bwcache_inter(bw, 0, 1, &f), 1);
	ck_assert_double_eq(f.lat_us, 4);
	ck_assert_int_eq(pipette_bwcache_node_gpus(bw, 0), 2);
	ck_assert_int_eq(pipette_bwcache_intra(bw, 0, 1, 0, &f), 1);
	ck_assert_double_eq(f.gbps, 310);	/* the link overrides the matrix */
	ck_assert_double_eq(f.lat_us, 2);
	ck_assert_str_eq(pipette_bwcache_schema(bw), "pipette-bw/1");
	pipette_bwcache_destroy(bw);
}
END_TEST

/* Each malformed input and the error it must get (after "t.json: "). */
static const struct {
	const char *text;
	const char *msg;
} bad[] = {
	/* syntax: line, column, what, and where in the document */
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1], [2, ",
	  "line 1, column 85: malformed JSON: unexpected end of file (expected a value), in "
	  "$.inter.matrix[1][1]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1], [2, nu]]}}",
	  "line 1, column 85: malformed JSON: expected a value, in $.inter.matrix[1][1]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1], [2 null]]}}",
	  "line 1, column 84: malformed JSON: expected ',' or ']', in $.inter.matrix[1][0]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1,], [2, null]]}}",
	  "line 1, column 79: malformed JSON: expected a value, in $.inter.matrix[0][2]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 01], [2, null]]}}",
	  "line 1, column 78: malformed JSON: expected ',' or ']', in $.inter.matrix[0][1]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1.], [2, null]]}}",
	  "line 1, column 77: malformed JSON: a malformed number, in $.inter.matrix[0][1]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, +1], [2, null]]}}",
	  "line 1, column 77: malformed JSON: expected a value, in $.inter.matrix[0][1]" },
	{ HEAD "\"inter\": {\"order\": ['a', \"b\"]}}",
	  "line 1, column 48: malformed JSON: expected a value, in $.inter.order[0]" },
	{ HEAD "\"generator\": \"a\tb\"}",
	  "line 1, column 41: malformed JSON: a string that does not end, or holds a "
	  "control character or a bad escape, in $.generator" },
	{ HEAD "\"generator\": \"abc", "malformed JSON: a string that does not end" },
	{ HEAD "\"units\": \"GB/s\"} x", "line 1, column 45: malformed JSON: text after the "
	  "top-level object, in $" },
	{ HEAD "\"units\": \"GB/s\"} /* open", "malformed JSON: a comment that does not end" },
	{ "[1, 2]", "line 1, column 1: malformed JSON: the top level must be an object, in $" },
	{ HEAD "\"int\\u0065r\": {}}", "line 1, column 28: malformed JSON: a key written "
	  "with an escape sequence (pipette reads these keys as written: write it plainly)" },
	{ HEAD "\"comment\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
	  "[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
	  "malformed JSON: nesting too deep (at most 64 arrays and objects), in $.comment[0]" },
	/* a key twice: the object and the key, where the second one is */
	{ HEAD "\"schema\": \"pipette-bw/1\"}",
	  "$: duplicate key \"schema\" (line 1, column 28)" },
	{ HEAD "\"inter\": {\"order\": [\"a\"], \"matrix\": [[null]], \"matrix\": [[null]]}}",
	  "$.inter: duplicate key \"matrix\" (line 1, column 74)" },
	{ HEAD "\"nodes\": {\"a\": {}, \"b\": {}, \"a\": {}}}",
	  "$.nodes: duplicate key \"a\" (line 1, column 56)" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"links\": [{\"a\": \"a\", \"b\": \"b\", "
	  "\"gbps\": 1, \"gbps\": 2}]}}", "$.inter.links[0]: duplicate key \"gbps\"" },
	/* in rows and links the pass reads whole, or would up to the error */
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1], [2, null], ]}}",
	  "line 1, column 92: malformed JSON: expected a value, in $.inter.matrix[2]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1] [2, null]]}}",
	  "line 1, column 80: malformed JSON: expected ',' or ']', in $.inter.matrix[0]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1.5x], [2, null]]}}",
	  "line 1, column 80: malformed JSON: expected ',' or ']', in $.inter.matrix[0][1]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1, 2], [2, null]]}}",
	  "$.inter.matrix[0]: expected 2 values (the matrix must be square), got 3" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1], [2, null]], "
	  "\"links\": [{\"a\": \"a\", \"b\": \"b\", \"gbps\": 1} {\"a\": \"b\"}]}}",
	  "line 1, column 135: malformed JSON: expected ',' or ']', in $.inter.links[0]" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"links\": [{\"a\": \"a\", \"b\": \"b\", "
	  "\"gbps\": 1}, {\"a\": \"a\", \"b\": \"z\", \"gbps\": 2}]}}",
	  "$.inter.links[1].b: unknown node 'z' (not in $.inter.order or $.nodes)" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"links\": [{\"a\": \"a\", \"b\": \"b\", "
	  "\"gbps\": 0}]}}",
	  "$.inter.links[0].gbps: expected a bandwidth in GB/s in (0, 10000], got 0" },
	{ HEAD "\"nodes\": {\"a\": {\"intra\": {\"matrix\": [[null, 1], [1, null]], "
	  "\"links\": [{\"a\": 0, \"b\": 5, \"gbps\": 1}]}}}}",
	  "$.nodes.a.intra.links[0].b: GPU index 5 is outside [0, 2) (the size of the intra "
	  "matrix)" },
	/* wrong types and shapes */
	{ HEAD "\"inter\": {\"order\": [\"a\"], \"matrix\": {}}}",
	  "$.inter.matrix: expected an array of rows, got an object" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1], 7]}}",
	  "$.inter.matrix[1]: expected a row (an array), got a number" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1], [2, null, 3]]}}",
	  "$.inter.matrix[1]: expected 2 values (the matrix must be square), got 3" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1]]}}",
	  "$.inter.matrix: expected 2 rows (one per name in $.inter.order), got 1" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, [1]], [2, null]]}}",
	  "$.inter.matrix[0][1]: expected a bandwidth in GB/s or null, got an array" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, true], [2, null]]}}",
	  "$.inter.matrix[0][1]: expected a bandwidth in GB/s or null, got a boolean" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1], [2, 3]]}}",
	  "$.inter.matrix[1][1]: expected null on the diagonal (intra-node figures go to "
	  "$.nodes.<name>.intra), got a number" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"links\": \"none\"}}",
	  "$.inter.links: expected an array of links, got a string" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"links\": [3]}}",
	  "$.inter.links[0]: expected a link object, got a number" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"links\": [{\"a\": \"a\", \"b\": \"a\", "
	  "\"gbps\": 1}]}}", "$.inter.links[0]: a link needs two different nodes" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"links\": [{\"a\": \"a\", \"b\": \"b\", "
	  "\"gbps\": \"1\"}]}}",
	  "$.inter.links[0].gbps: expected a bandwidth in GB/s, got a string \"1\"" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"links\": [{\"a\": \"a\", \"b\": \"b\", "
	  "\"gbps\": 1, \"lat_us\": -1}]}}",
	  "$.inter.links[0].lat_us: expected a latency in microseconds in [0, 1e+06], got -1" },
	/* figures out of range, by name */
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, NaN], [2, null]]}}",
	  "$.inter.matrix[0][1]: expected a bandwidth in GB/s in (0, 10000], got nan" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1], [-Infinity, "
	  "null]]}}", "$.inter.matrix[1][0]: expected a bandwidth in GB/s in (0, 10000], got -inf" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, -3], [2, null]]}}",
	  "$.inter.matrix[0][1]: expected a bandwidth in GB/s in (0, 10000], got -3" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 0], [2, null]]}}",
	  "$.inter.matrix[0][1]: expected a bandwidth in GB/s in (0, 10000], got 0" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 10000.5], [2, null]]}}",
	  "$.inter.matrix[0][1]: expected a bandwidth in GB/s in (0, 10000], got 10000.5" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1e400], [2, null]]}}",
	  "$.inter.matrix[0][1]: expected a bandwidth in GB/s in (0, 10000], got inf" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, 1e-400], [2, null]]}}",
	  "$.inter.matrix[0][1]: expected a bandwidth in GB/s in (0, 10000], got 0" },
	{ HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": [[null, "
	  "123456789012345678901234567890], [2, null]]}}",
	  "$.inter.matrix[0][1]: expected a bandwidth in GB/s in (0, 10000], got 1.23457e+29" },
	{ HEAD "\"nodes\": {\"a\": {\"intra\": {\"matrix\": [[null, 1], [1e5, null]]}}}}",
	  "$.nodes.a.intra.matrix[1][0]: expected a bandwidth in GB/s in (0, 10000], got "
	  "100000" },
	/* pipette-bw/2 */
	{ HEAD "\"inter\": {\"order\": [\"a\"], \"groups\": []}}",
	  "$.inter: unknown key 'groups'" },
	{ "{\"schema\": \"pipette-bw/2\", \"inter\": {\"order\": [\"a\", \"b\"], "
	  "\"groups\": [{\"name\": \"g\", \"nodes\": [\"a\", \"c\"]}]}}",
	  "$.inter.groups[0].nodes[1]: unknown node 'c' (not in $.inter.order)" },
	{ "{\"schema\": \"pipette-bw/2\", \"inter\": {\"order\": [\"a\", \"b\"], "
	  "\"groups\": [{\"name\": \"g\", \"nodes\": [[0, 1]]}, {\"name\": \"h\", "
	  "\"nodes\": [\"b\"]}]}}",
	  "$.inter.groups[1].nodes[0]: node 'b' is already in group 'g'" },
	{ "{\"schema\": \"pipette-bw/2\", \"inter\": {\"order\": [\"a\", \"b\"], "
	  "\"groups\": [{\"name\": \"g\", \"nodes\": [[1, 2]]}]}}",
	  "$.inter.groups[0].nodes[0]: index range [1, 2] is not within [0, 1]" },
	{ "{\"schema\": \"pipette-bw/2\", \"inter\": {\"order\": [\"a\", \"b\"], "
	  "\"groups\": [{\"name\": \"g\", \"nodes\": [[0, 1]]}, {\"name\": \"g\", "
	  "\"nodes\": []}]}}", "$.inter.groups[1].name: group 'g' is defined twice" },
	{ "{\"schema\": \"pipette-bw/2\", \"inter\": {\"order\": [\"a\", \"b\"], "
	  "\"groups\": [{\"name\": \"g\", \"nodes\": [[0, 1]]}], \"between\": [[1, 2]]}}",
	  "$.inter.between[0]: expected 1 values (the matrix must be square), got 2" },
	{ "{\"schema\": \"pipette-bw/2\", \"inter\": {\"order\": [\"a\", \"b\"], "
	  "\"groups\": [{\"name\": \"g\", \"nodes\": [[0, 1]]}], \"between\": [[0]]}}",
	  "$.inter.between[0][0]: expected a bandwidth in GB/s in (0, 10000], got 0" },
};

START_TEST(test_scan_bad)
{
	struct pipette_bwcache *bw = (struct pipette_bwcache *)&bw;
	struct pipette_err err = { .msg = "" };
	const char *text = bad[_i].text;

	ck_assert_int_eq(pipette_bwcache_parse(text, strlen(text), "t.json", &bw, &err), -1);
	ck_assert_ptr_null(bw);
	ck_assert_msg(!strncmp(err.msg, "t.json: ", 8), "%s", err.msg);
	ck_assert_msg(strstr(err.msg, bad[_i].msg) != NULL, "case %d: got '%s', expected '%s'",
		      _i, err.msg, bad[_i].msg);
}
END_TEST

/* A NUL byte, in a comment too, is refused where it is: json-c stops at
 * one and hands back what it has built (bwscan.c's feed), which leaked. */
START_TEST(test_scan_nul)
{
	static const struct {
		const char text[64];
		size_t len;
		const char *where;
	} cases[] = {
		{ "{\"schema\": 1 // a\0b\n}", 21, "line 1, column 18: malformed JSON: a NUL byte, "
		  "in $.schema" },
		{ "{\"schema\": 1 /* a\0b */}", 23, "line 1, column 18: malformed JSON: a NUL byte, "
		  "in $.schema" },
		{ "{\"schema\": 1}\n// x\0", 19, "line 2, column 5: malformed JSON: a NUL byte, in $" },
		{ "{\"schema\":\0 1}", 14, "line 1, column 11: malformed JSON: a NUL byte, in $.schema" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pipette_bwcache *bw = NULL;
		struct pipette_err err = { .msg = "" };

		ck_assert_int_eq(pipette_bwcache_parse(cases[i].text, cases[i].len, "t.json", &bw,
						       &err), -1);
		ck_assert_ptr_null(bw);
		ck_assert_msg(strstr(err.msg, cases[i].where), "case %zu: %s", i, err.msg);
	}
}
END_TEST

/* Every prefix of a valid cache is refused (never a crash or a hang), and
 * so is every single-byte change that breaks it, each with a message
 * naming the source. */
START_TEST(test_scan_truncated)
{
	static const char text[] =
		"{\"schema\": \"pipette-bw/2\", \"inter\": {\"order\": [\"a\", \"b\", \"c\"], "
		"\"groups\": [{\"name\": \"g\", \"nodes\": [[0, 1]]}], \"between\": [[20.5]], "
		"\"matrix\": [[null, null, 3], [null, null, 4], [5, 6.25, null]], "
		"\"links\": [{\"a\": \"a\", \"b\": \"b\", \"gbps\": 7, \"tool\": \"x\"}]}, "
		"\"nodes\": {\"c\": {\"intra\": {\"matrix\": [[null, 9], [8, null]]}}}}";
	size_t len = strlen(text), k;

	for (k = 0; k < len; k++) {
		struct pipette_bwcache *bw = NULL;
		struct pipette_err err = { .msg = "" };

		ck_assert_msg(pipette_bwcache_parse(text, k, "t.json", &bw, &err) == -1,
			      "prefix of %zu bytes accepted", k);
		ck_assert_msg(!strncmp(err.msg, "t.json: ", 8), "%zu: %s", k, err.msg);
	}
	pipette_bwcache_destroy(parse_ok(text));
}
END_TEST

/* ---------------------------------------------------------------- */
static void assert_same_links(const struct pipette_bwcache *x, const struct pipette_bwcache *y);

/* the one pass: what it reads whole, what it leaves to the text       */

/* The text with every figure that has a decimal point written with 20
 * more zeros (22 significant digits or more: beyond the 19 the pass
 * reads, so every row and link holding one goes to the text's reader; its
 * value does not change).  A number is a figure when it follows '[', ' '
 * or ',' and ends at ',', ']' or '}', and is no link's end ("a": 1). */
static char *padded(const char *t)
{
	static const char zeros[] = "00000000000000000000";
	size_t len = strlen(t), i, o = 0;
	char *out = malloc(12 * len + 1);	/* "1.5," becomes 24 bytes */

	for (i = 0; i < len; i++) {
		size_t e = i;

		if (i > 0 && strchr("[ ,", t[i - 1]) && t[i] >= '0' && t[i] <= '9' &&
		    !(i >= 5 && (!strncmp(t + i - 5, "\"a\": ", 5) ||
				 !strncmp(t + i - 5, "\"b\": ", 5)))) {
			while (e < len && ((t[e] >= '0' && t[e] <= '9') || t[e] == '.'))
				e++;
			if (e < len && strchr(",]}", t[e]) && memchr(t + i, '.', e - i)) {
				memcpy(out + o, t + i, e - i);
				o += e - i;
				memcpy(out + o, zeros, sizeof(zeros) - 1);
				o += sizeof(zeros) - 1;
				i = e - 1;
				continue;
			}
		}
		out[o++] = t[i];
	}
	out[o] = '\0';
	return out;
}

/* Rows and links of the text the syntax pass read whole, and those it
 * left to the text (every span's). */
static void count_read(const char *text, size_t *rows, size_t *rows_text, size_t *links,
		       size_t *elems)
{
	struct bw_doc doc;
	struct pipette_err err = { .msg = "" };
	size_t k;

	ck_assert_msg(bw_scan_doc(text, strlen(text), "t.json", &doc, &err) == 0, "%s",
		      err.msg);
	*rows = *rows_text = *links = *elems = 0;
	for (k = 0; k < doc.n_span; k++) {
		const struct bw_span *sp = &doc.span[k];

		if (sp->kind == 'L') {
			*links += sp->n_link;
			*elems += sp->count;
		} else if (sp->grid) {
			*rows += sp->grid->n_read;
			*rows_text += sp->count - sp->grid->n_read;
		}
	}
	bw_doc_free(&doc);
}

/* A cache of 40 nodes x 4 GPUs in each form (pipette-bw/1; /2 with slow
 * pairs as links, and GPU links on one node): read in the one pass, and
 * with every figure left to the text's reader, it is the same cache, byte
 * for byte, and so is the cache it serializes to. */
START_TEST(test_one_pass_same)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw;
	struct pipette_err err;
	const char *names[] = { "s0", "s1", "s2", "s3", "s4" };
	int group_of[40], i, form;
	char *text[2];

	pipette_bw_gen_init(&g);
	g.seed = 7;
	g.nodes = 40;
	g.gpus_per_node = 4;
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	g.slow_frac = 0.05;
	g.switch_size = 8;
	ck_assert_msg(pipette_bwcache_generate(&g, &bw, &err) == 0, "%s", err.msg);
	text[0] = pipette_bwcache_serialize(bw, &err);
	for (i = 0; i < 40; i++)
		group_of[i] = i / 8;
	ck_assert_int_eq(pipette_bwcache_set_groups(bw, 5, names, group_of, 0.05, &err), 0);
	text[1] = pipette_bwcache_serialize(bw, &err);
	pipette_bwcache_destroy(bw);
	for (form = 0; form < 2; form++) {
		const char *intra = "\"intra\": {";
		char *at = strstr(text[form], intra), *t, *slow, *s1, *s2;
		size_t rows, rows_text, links, elems, len = strlen(text[form]);
		struct pipette_bwcache *x, *y;

		/* GPU links, in the pass's form and not (a tool of their own) */
		ck_assert_ptr_nonnull(at);
		t = malloc(len + 200);
		at += strlen(intra);
		snprintf(t, len + 200, "%.*s\"links\": [{\"a\": 1, \"b\": 0, \"gbps\": 123.5}, "
			 "{\"gbps\": 99, \"b\": 3, \"a\": 2, \"tool\": \"t\"}], %s",
			 (int)(at - text[form]), text[form], at);
		slow = padded(t);
		count_read(t, &rows, &rows_text, &links, &elems);
		/* every row (40 GPU matrices of 4 rows, and the nodes' 40 or the
		 * groups' 5), every link but the one with a tool */
		ck_assert_uint_eq(rows, (size_t)(form ? 40 * 4 + 5 : 40 * 4 + 40));
		ck_assert_uint_eq(rows_text, 0);
		ck_assert_uint_eq(links, elems - 1);
		ck_assert_uint_gt(links, form ? 20 : 0);
		count_read(slow, &rows, &rows_text, &links, &elems);
		ck_assert_uint_eq(rows, 0);
		ck_assert_uint_eq(links, 0);
		x = parse_ok(t);
		y = parse_ok(slow);
		assert_same_links(x, y);
		s1 = pipette_bwcache_serialize(x, &err);
		s2 = pipette_bwcache_serialize(y, &err);
		ck_assert_str_eq(s1, s2);
		ck_assert_ptr_nonnull(strstr(s1, "123.5"));
		free(s1);
		free(s2);
		free(slow);
		free(t);
		pipette_bwcache_destroy(x);
		pipette_bwcache_destroy(y);
		free(text[form]);
	}
}
END_TEST

/* Links as pipette writes them ({"a": A, "b": B, "gbps": G}, matched
 * whole by the pass) and the same links written otherwise (spaced, keys
 * in another order: read key by key) are read whole alike and give the
 * same cache; one the pass cannot take (a figure of 22 digits, an
 * escape in a name) goes to the text's reader in either form. */
START_TEST(test_plain_links)
{
	static const char *const forms[][2] = {
		{ "{\"a\": \"n1\", \"b\": \"n2\", \"gbps\": 12.5}",
		  "{ \"b\" : \"n2\",\"gbps\":12.5 , \"a\":\"n1\" }" },
		{ "{\"a\": \"n3\", \"b\": \"n1\", \"gbps\": 7}",
		  "{\"a\":\"n3\",\"b\":\"n1\",\"gbps\":7}" },
		{ "{\"a\": \"n2\", \"b\": \"n3\", \"gbps\": 1.0000000000000000000001}",
		  "{\"gbps\": 1.0000000000000000000001, \"a\": \"n2\", \"b\": \"n3\"}" },
		{ "{\"a\": \"n\\u0031\", \"b\": \"n3\", \"gbps\": 2}",
		  "{\"b\": \"n3\", \"a\": \"n\\u0031\", \"gbps\": 2}" },
	};
	struct pipette_bwcache *bw[2];
	char text[2][1024];
	size_t rows, rows_text, links, elems, k;
	int f;

	for (f = 0; f < 2; f++) {
		size_t o = (size_t)snprintf(text[f], sizeof(text[f]), HEAD "\"inter\": {\"tool\": "
					    "\"T\", \"metric\": \"busbw\", \"order\": [\"n1\", "
					    "\"n2\", \"n3\"], \"links\": [");
		for (k = 0; k < sizeof(forms) / sizeof(forms[0]); k++)
			o += (size_t)snprintf(text[f] + o, sizeof(text[f]) - o, "%s%s", k ? ", " : "",
					      forms[k][f]);
		snprintf(text[f] + o, sizeof(text[f]) - o, "]}}");
		count_read(text[f], &rows, &rows_text, &links, &elems);
		ck_assert_uint_eq(elems, 4);
		ck_assert_uint_eq(links, 2);	/* the first two */
		bw[f] = parse_ok(text[f]);
	}
	assert_same_links(bw[0], bw[1]);
	ck_assert(same_bits(gbps(bw[0], "n1", "n2"), 12.5));
	ck_assert(same_bits(gbps(bw[0], "n3", "n1"), 7));
	ck_assert(same_bits(gbps(bw[0], "n2", "n3"), 1.0000000000000000000001));
	ck_assert(same_bits(gbps(bw[0], "n1", "n3"), 2));
	pipette_bwcache_destroy(bw[0]);
	pipette_bwcache_destroy(bw[1]);
}
END_TEST

/* A matrix the pass read whole becomes the cache's own (no copy beside
 * it): 512 nodes cost 4 bytes per node pair and little more; and where
 * $.nodes adds a node that $.inter.order lacks, the rows go into a
 * matrix that holds it too. */
START_TEST(test_one_pass_grid)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw, *x;
	struct pipette_bw_figure f;
	struct pipette_err err;
	char *t;

	pipette_bw_gen_init(&g);
	g.seed = 3;
	g.nodes = 512;
	g.gpus_per_node = 2;
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	ck_assert_msg(pipette_bwcache_generate(&g, &bw, &err) == 0, "%s", err.msg);
	t = pipette_bwcache_serialize(bw, &err);
	x = parse_ok(t);
	/* 512^2 x 4 = 1 MiB of cells, the rest names and 512 2 x 2 matrices */
	ck_assert_uint_lt(pipette_bwcache_bytes(x), 512 * 512 * 4 + 256 * 1024);
	assert_same_links(x, bw);
	free(t);
	pipette_bwcache_destroy(x);
	pipette_bwcache_destroy(bw);
	x = parse_ok(HEAD "\"inter\": {\"order\": [\"a\", \"b\"], \"matrix\": "
		     "[[null, 1.5], [2, null]]}, \"nodes\": {\"c\": {}}}");
	ck_assert_int_eq(pipette_bwcache_node_count(x), 3);
	ck_assert(same_bits(gbps(x, "a", "b"), 1.5));
	ck_assert(same_bits(gbps(x, "b", "a"), 2));
	ck_assert_int_eq(pipette_bwcache_inter(x, 2, 0, &f), 0);
	ck_assert_int_eq(pipette_bwcache_inter(x, 0, 2, &f), 0);
	pipette_bwcache_destroy(x);
}
END_TEST

/* ---------------------------------------------------------------- */
/* pipette-bw/2 against pipette-bw/1                                 */

/* Five nodes: group g1 = n1, n2, n3; group g2 = n4; n5 in none.  The
 * section's figures: 4 us, tool T, 2025-01-01. */
#define SECT "\"tool\": \"T\", \"metric\": \"busbw\", \"bytes\": 1000, " \
	     "\"when\": \"2025-01-01T00:00:00Z\", \"lat_us\": 4, " \
	     "\"order\": [\"n1\", \"n2\", \"n3\", \"n4\", \"n5\"]"

/* the grouped form: g1 inside 40, g1 -> g2 30, g2 -> g1 31, g2 inside
 * unmeasured (one node); exceptions n1 -> n2 12.5 (its own latency and
 * time) and n3 -> n4 25; n5's links as links */
static const char v2_links[] =
	"{\"schema\": \"pipette-bw/2\", \"inter\": {" SECT ", "
	"\"groups\": [{\"name\": \"g1\", \"nodes\": [\"n1\", [1, 2]]}, "
	"{\"name\": \"g2\", \"nodes\": [\"n4\"]}], "
	"\"between\": [[40, 30], [31, null]], "
	"\"links\": [{\"a\": \"n1\", \"b\": \"n2\", \"gbps\": 12.5, \"lat_us\": 6, "
	"\"when\": \"2025-02-01T00:00:00Z\"}, {\"a\": \"n3\", \"b\": \"n4\", \"gbps\": 25}, "
	"{\"a\": \"n5\", \"b\": \"n1\", \"gbps\": 9}, {\"a\": \"n2\", \"b\": \"n5\", "
	"\"gbps\": 8.75}]}}";

/* the same with the exceptions as a matrix (n1 -> n2's latency and time
 * can only be a link) */
static const char v2_matrix[] =
	"{\"schema\": \"pipette-bw/2\", \"inter\": {" SECT ", "
	"\"groups\": [{\"name\": \"g1\", \"nodes\": [[0, 2]]}, "
	"{\"name\": \"g2\", \"nodes\": [[3, 3]]}], "
	"\"between\": [[40, 30], [31, null]], "
	"\"matrix\": [[null, null, null, null, null], [null, null, null, null, 8.75], "
	"[null, null, null, 25, null], [null, null, null, null, null], "
	"[9, null, null, null, null]], "
	"\"links\": [{\"a\": \"n1\", \"b\": \"n2\", \"gbps\": 12.5, \"lat_us\": 6, "
	"\"when\": \"2025-02-01T00:00:00Z\", \"tool\": \"T\", \"metric\": \"busbw\", "
	"\"bytes\": 1000}]}}";

/* every node pair spelled out */
static const char v1_full[] =
	"{\"schema\": \"pipette-bw/1\", \"inter\": {" SECT ", "
	"\"matrix\": [[null, 40, 40, 30, null], [40, null, 40, 30, 8.75], "
	"[40, 40, null, 25, null], [31, 31, 31, null, null], [9, null, null, null, null]], "
	"\"links\": [{\"a\": \"n1\", \"b\": \"n2\", \"gbps\": 12.5, \"lat_us\": 6, "
	"\"when\": \"2025-02-01T00:00:00Z\", \"tool\": \"T\", \"metric\": \"busbw\", "
	"\"bytes\": 1000}]}}";

/* Two caches say the same of every node pair, figure and provenance. */
static void assert_same_links(const struct pipette_bwcache *x, const struct pipette_bwcache *y)
{
	int n = pipette_bwcache_node_count(x), a, b;

	ck_assert_int_eq(n, pipette_bwcache_node_count(y));
	for (a = 0; a < n; a++)
		for (b = 0; b < n; b++) {
			struct pipette_bw_figure f, g;
			int ra = pipette_bwcache_inter(x, a, b, &f);
			int rb = pipette_bwcache_inter(y, a, b, &g);

			ck_assert_str_eq(pipette_bwcache_node_name(x, a),
					 pipette_bwcache_node_name(y, a));
			ck_assert_msg(ra == rb, "%d -> %d measured in one only", a, b);
			if (ra != 1)
				continue;
			ck_assert_msg(same_bits(f.gbps, g.gbps), "%d -> %d: %g vs %g", a, b,
				      f.gbps, g.gbps);
			ck_assert(same_bits(f.lat_us, g.lat_us));
			ck_assert_str_eq(f.prov.tool, g.prov.tool);
			ck_assert_str_eq(f.prov.metric, g.prov.metric);
			ck_assert_double_eq(f.prov.bytes, g.prov.bytes);
			ck_assert_int_eq(f.prov.when, g.prov.when);
		}
}

/* And the clusters made from them have the same links, bit for bit. */
static void assert_same_clusters(const struct pipette_bwcache *x,
				 const struct pipette_bwcache *y)
{
	const char *names[] = { "n5", "n4", "n3", "n2", "n1" };
	struct pipette_err err;
	struct pipette_cluster *cx, *cy;
	int a, b;

	cx = pipette_cluster_create(names, 5, 2, NULL, &test_gpu, x, 0, &err);
	ck_assert_msg(cx != NULL, "%s", err.msg);
	cy = pipette_cluster_create(names, 5, 2, NULL, &test_gpu, y, 0, &err);
	ck_assert_msg(cy != NULL, "%s", err.msg);
	for (a = 0; a < 10; a++)
		for (b = 0; b < 10; b++) {
			struct pipette_link lx = pipette_cluster_link(cx, a, b);
			struct pipette_link ly = pipette_cluster_link(cy, a, b);

			ck_assert(!memcmp(&lx, &ly, sizeof(lx)));
		}
	ck_assert_str_eq(pipette_cluster_warnings(cx), pipette_cluster_warnings(cy));
	pipette_cluster_destroy(cx);
	pipette_cluster_destroy(cy);
}

START_TEST(test_v1_v2_equivalent)
{
	struct pipette_bwcache *l = parse_ok(v2_links), *m = parse_ok(v2_matrix);
	struct pipette_bwcache *full = parse_ok(v1_full);
	struct pipette_err err;
	char *s_full, *s_l;

	ck_assert_str_eq(pipette_bwcache_schema(l), "pipette-bw/2");
	ck_assert_int_eq(pipette_bwcache_group_count(l), 2);
	ck_assert_str_eq(pipette_bwcache_group_name(l, 1), "g2");
	ck_assert_int_eq(pipette_bwcache_node_group(l, 2), 0);
	ck_assert_int_eq(pipette_bwcache_node_group(l, 4), -1);
	/* 6 pairs inside g1, 3 each way between g1 and g2, 2 links of n5 */
	ck_assert_int_eq(pipette_bwcache_measured(l), 6 + 3 + 3 + 2);
	ck_assert_int_eq(pipette_bwcache_measured(full), 6 + 3 + 3 + 2);
	ck_assert_double_eq(gbps(l, "n1", "n2"), 12.5);
	ck_assert_double_eq(gbps(l, "n2", "n1"), 40);
	ck_assert_double_eq(gbps(l, "n3", "n4"), 25);
	ck_assert_double_eq(gbps(l, "n4", "n3"), 31);
	ck_assert(isnan(gbps(l, "n4", "n5")));
	assert_same_links(l, full);
	assert_same_links(m, full);
	assert_same_clusters(l, full);
	assert_same_clusters(m, full);
	/* the grouped form written out node pair by node pair is the full one */
	ck_assert_int_eq(pipette_bwcache_ungroup(l, &err), 0);
	ck_assert_int_eq(pipette_bwcache_group_count(l), 0);
	s_full = pipette_bwcache_serialize(full, &err);
	s_l = pipette_bwcache_serialize(l, &err);
	ck_assert_str_eq(s_l, s_full);
	ck_assert_ptr_nonnull(strstr(s_l, "\"schema\": \"pipette-bw/1\""));
	free(s_full);
	free(s_l);
	pipette_bwcache_destroy(l);
	pipette_bwcache_destroy(m);
	pipette_bwcache_destroy(full);
}
END_TEST

/* A generated cache restated per switch and back is the same cache, byte
 * for byte; with a tolerance, pairs near their group's figure take it and
 * the slow ones keep their own. */
START_TEST(test_convert_roundtrip)
{
	struct pipette_bw_gen g;
	struct pipette_bwcache *bw, *v2, *orig;
	struct pipette_err err;
	const char *names[] = { "s0", "s1", "s2", "s3" };
	int group_of[64], i, a, b, changed = 0, kept = 0;
	char *t1, *t2, *t3;

	pipette_bw_gen_init(&g);
	g.seed = 5;
	g.nodes = 64;
	g.gpus_per_node = 2;
	g.inter_gbps = 45;
	g.intra_gbps = 400;
	g.inter_lat_us = 20;
	g.intra_lat_us = 10;
	g.slow_frac = 0.05;
	g.switch_size = 16;
	g.cross_factor = 0.9;
	ck_assert_msg(pipette_bwcache_generate(&g, &bw, &err) == 0, "%s", err.msg);
	t1 = pipette_bwcache_serialize(bw, &err);
	for (i = 0; i < 64; i++)
		group_of[i] = i / 16;
	ck_assert_msg(pipette_bwcache_set_groups(bw, 4, names, group_of, 0, &err) == 0, "%s",
		      err.msg);
	t2 = pipette_bwcache_serialize(bw, &err);
	ck_assert_ptr_nonnull(strstr(t2, "\"schema\": \"pipette-bw/2\""));
	ck_assert_ptr_nonnull(strstr(t2, "{\"name\": \"s3\", \"nodes\": [[48, 63]]}"));
	v2 = parse_ok(t2);
	ck_assert_int_eq(pipette_bwcache_group_count(v2), 4);
	orig = parse_ok(t1);
	assert_same_links(v2, orig);
	ck_assert_int_eq(pipette_bwcache_ungroup(v2, &err), 0);
	t3 = pipette_bwcache_serialize(v2, &err);
	ck_assert_str_eq(t3, t1);
	free(t2);
	free(t3);
	pipette_bwcache_destroy(v2);
	/* tolerance 5%: noise is 3%, slow pairs are at 30..60% (at most
	 * 45 x 0.6 x 1.03 = 27.8 GB/s, group figures at least 45 x 0.9 x 0.97) */
	ck_assert_int_eq(pipette_bwcache_set_groups(bw, 4, names, group_of, 0.05, &err), 0);
	for (a = 0; a < 64; a++)
		for (b = 0; b < 64; b++) {
			struct pipette_bw_figure f, o;

			if (a == b)
				continue;
			ck_assert_int_eq(pipette_bwcache_inter(bw, a, b, &f), 1);
			ck_assert_int_eq(pipette_bwcache_inter(orig, a, b, &o), 1);
			if (o.gbps < 30) {
				ck_assert_msg(f.gbps == o.gbps, "slow %d -> %d: %g became %g", a,
					      b, o.gbps, f.gbps);
				kept++;
			} else if (f.gbps != o.gbps) {
				ck_assert_msg(fabs(f.gbps - o.gbps) <= 0.05 * f.gbps,
					      "%d -> %d: %g became %g", a, b, o.gbps, f.gbps);
				changed++;
			}
		}
	ck_assert_int_gt(kept, 20);
	ck_assert_int_gt(changed, 1000);
	t2 = pipette_bwcache_serialize(bw, &err);
	ck_assert_uint_lt(strlen(t2), strlen(t1));
	free(t1);
	free(t2);
	pipette_bwcache_destroy(bw);
	pipette_bwcache_destroy(orig);
}
END_TEST

/* A grouped cache of 4096 nodes costs what it states: 256 switch figures
 * and a few exceptions, not 4096^2 cells. */
START_TEST(test_grouped_memory)
{
	size_t cap = 1 << 20, len = 0;
	char *t = malloc(cap);
	struct pipette_bwcache *bw;
	int i, j;

	len += (size_t)snprintf(t + len, cap - len, "{\"schema\": \"pipette-bw/2\", \"inter\": "
				"{\"lat_us\": 5, \"order\": [");
	for (i = 0; i < 4096; i++)
		len += (size_t)snprintf(t + len, cap - len, "%s\"n%d\"", i ? ", " : "", i);
	len += (size_t)snprintf(t + len, cap - len, "], \"groups\": [");
	for (i = 0; i < 16; i++)
		len += (size_t)snprintf(t + len, cap - len, "%s{\"name\": \"sw%d\", "
					"\"nodes\": [[%d, %d]]}", i ? ", " : "", i, 256 * i,
					256 * i + 255);
	len += (size_t)snprintf(t + len, cap - len, "], \"between\": [");
	for (i = 0; i < 16; i++)
		for (j = 0; j < 16; j++)
			len += (size_t)snprintf(t + len, cap - len, "%s%s%g%s", j ? "" : i ? ", [" : "[",
						j ? ", " : "", i == j ? 45.0 : 40.5, j == 15 ? "]" : "");
	len += (size_t)snprintf(t + len, cap - len, "], \"links\": [");
	for (i = 0; i < 100; i++)
		len += (size_t)snprintf(t + len, cap - len, "%s{\"a\": \"n%d\", \"b\": \"n%d\", "
					"\"gbps\": %d.5}", i ? ", " : "", i * 37, i * 41 + 1, i + 1);
	snprintf(t + len, cap - len, "]}}");
	bw = parse_ok(t);
	ck_assert_int_eq(pipette_bwcache_measured(bw), 4096L * 4095);
	ck_assert_double_eq(gbps(bw, "n0", "n4095"), 40.5);
	ck_assert_double_eq(gbps(bw, "n259", "n257"), 45);
	ck_assert_double_eq(gbps(bw, "n37", "n42"), 2.5);
	/* a dense matrix would take 4096^2 x 4 B = 64 MiB */
	ck_assert_msg(pipette_bwcache_bytes(bw) < (1 << 20), "%zu bytes",
		      pipette_bwcache_bytes(bw));
	pipette_bwcache_destroy(bw);
	free(t);
}
END_TEST

/* ---------------------------------------------------------------- */
/* the cluster's compact store                                       */

/* Every link reads back as set while the store goes from 2-byte indices
 * to 4-byte ones (past 65536 distinct links) to the links themselves
 * (past one distinct link per two cells); the version moves on each set. */
START_TEST(test_cluster_store)
{
	const struct pipette_link u = { 10, 1 };
	struct pipette_err err;
	struct pipette_cluster *c = pipette_cluster_create_blank(400, 2, &test_gpu, u, &err);
	unsigned long v;
	int a, b, k = 0;

	ck_assert_msg(c != NULL, "%s", err.msg);
	ck_assert(pipette_cluster_node_link(c, 3, 3).gbps == INFINITY);
	ck_assert(pipette_cluster_node_link(c, 3, 4).gbps == 10);
	v = pipette_cluster_version(c);
	for (a = 0; a < 400 && k < 100000; a++)
		for (b = 0; b < 400 && k < 100000; b++) {
			struct pipette_link l = { 1 + k * 1e-3, (double)(k % 7) };

			if (a == b)
				continue;
			ck_assert_int_eq(pipette_cluster_set_node_link(c, a, b, l), 0);
			k++;
		}
	ck_assert_uint_gt(pipette_cluster_version(c), v);
	for (a = 0, k = 0; a < 400; a++)
		for (b = 0; b < 400; b++) {
			struct pipette_link l = pipette_cluster_node_link(c, a, b);

			if (a == b) {
				ck_assert(l.gbps == INFINITY && l.lat_us == 0);
			} else if (k < 100000) {
				ck_assert(l.gbps == 1 + k * 1e-3 && l.lat_us == (double)(k % 7));
				ck_assert(pipette_cluster_link(c, 2 * a + 1, 2 * b).gbps == l.gbps);
				k++;
			} else {
				ck_assert(l.gbps == 10 && l.lat_us == 1);
			}
		}
	pipette_cluster_destroy(c);
	/* GPU links by global index, on boards of 6 (a division) and 8 (a
	 * shift) */
	for (k = 6; k <= 8; k += 2) {
		const struct pipette_link l = { 77, 2 };

		c = pipette_cluster_create_blank(3, k, &test_gpu, u, &err);
		ck_assert_msg(c != NULL, "%s", err.msg);
		pipette_cluster_set_intra_link(c, 1, 2, 5, l);
		ck_assert(pipette_cluster_link(c, k + 2, k + 5).gbps == 77);
		ck_assert(pipette_cluster_link(c, k + 5, k + 2).gbps == 10);
		ck_assert(pipette_cluster_link(c, 2, 5).gbps == 10);
		ck_assert(pipette_cluster_link(c, k + 3, k + 3).gbps == INFINITY);
		ck_assert(pipette_cluster_link(c, k + 2, 2 * k + 5).gbps == 10);
		pipette_cluster_destroy(c);
	}
}
END_TEST

/* The GPU pairs of every node are kept the same way (cluster.c): 3,000
 * nodes of 8 GPUs, 192,000 cells, read back as set at 2-byte indices,
 * past 65,536 distinct links (4-byte ones) and past 96,000 (the links
 * themselves); each GPU with itself stays INFINITY; then every pair at
 * once (pipette_cluster_set_intra_all), a new version. */
START_TEST(test_cluster_intra_store)
{
	const struct pipette_link u = { 10, 1 }, w = { 55, 3 };
	struct pipette_err err;
	struct pipette_cluster *c = pipette_cluster_create_blank(3000, 8, &test_gpu, u, &err);
	static const int stop[] = { 1000, 70000, 100000 };
	unsigned long v;
	int x, a, b, k, i;

	ck_assert_msg(c != NULL, "%s", err.msg);
	for (i = 0; i < 3; i++) {
		for (x = 0, k = 0; x < 3000 && k < stop[i]; x++)
			for (a = 0; a < 8 && k < stop[i]; a++)
				for (b = 0; b < 8 && k < stop[i]; b++)
					if (a != b) {
						ck_assert_int_eq(pipette_cluster_set_intra_link(c, x, a, b,
							(struct pipette_link){ 1 + k * 1e-3, (double)(k % 5) }), 0);
						k++;
					}
		for (x = 0, k = 0; x < 3000; x++)
			for (a = 0; a < 8; a++)
				for (b = 0; b < 8; b++) {
					struct pipette_link l = pipette_cluster_link(c, 8 * x + a, 8 * x + b);

					if (a == b)
						ck_assert(l.gbps == INFINITY && l.lat_us == 0);
					else if (k < stop[i]) {
						ck_assert(l.gbps == 1 + k * 1e-3 && l.lat_us == (double)(k % 5));
						k++;
					}
					else
						ck_assert(l.gbps == 10 && l.lat_us == 1);
				}
	}
	v = pipette_cluster_version(c);
	ck_assert_int_eq(pipette_cluster_set_intra_all(c, w), 0);
	ck_assert_uint_gt(pipette_cluster_version(c), v);
	for (x = 0; x < 3000; x += 7)
		for (a = 0; a < 8; a++)
			for (b = 0; b < 8; b++) {
				struct pipette_link l = pipette_cluster_link(c, 8 * x + a, 8 * x + b);

				ck_assert(a == b ? l.gbps == INFINITY && l.lat_us == 0
						 : l.gbps == 55 && l.lat_us == 3);
			}
	pipette_cluster_destroy(c);
}
END_TEST

/* ---------------------------------------------------------------- */
/* pipette bandwidth convert                                         */

static char out[OUT_MAX];

static void expect(const char *args, int code, const char *fragment)
{
	int rc = cli_run_within(60, args, out, sizeof(out));

	ck_assert_msg(rc == code, "pipette %s: exit %d, expected %d\n%s", args, rc, code, out);
	ck_assert_msg(strstr(out, fragment) != NULL, "pipette %s: expected '%s' in\n%s", args,
		      fragment, out);
}

START_TEST(test_cli_convert)
{
	char dir[] = "/tmp/test_bwscan.XXXXXX", args[1024], a[128], b[128], c[128];
	struct pipette_bwcache *x, *y;
	struct pipette_err err;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(a, sizeof(a), "%s/v1.json", dir);
	snprintf(b, sizeof(b), "%s/v2.json", dir);
	snprintf(c, sizeof(c), "%s/back.json", dir);
	snprintf(args, sizeof(args), "bandwidth generate --seed 9 --nodes 12 --gpus-per-node 2 "
		 "--switch-size 4 -o %s", a);
	expect(args, 0, "");
	snprintf(args, sizeof(args), "bandwidth convert %s -o %s --group 'lo=node[1-6]' "
		 "--group 'hi=node[7-12]'", a, b);
	expect(args, 0, "pipette-bw/2, 12 nodes, 2 groups, 132 of 132 inter-node figures");
	snprintf(args, sizeof(args), "bandwidth validate %s", b);
	expect(args, 0, ": ok: pipette-bw/2, 12 nodes in 2 groups, 132 of 132");
	snprintf(args, sizeof(args), "bandwidth convert %s -o %s --to pipette-bw/1", b, c);
	expect(args, 0, "pipette-bw/1, 12 nodes, 0 groups");
	ck_assert_int_eq(pipette_bwcache_load(a, &x, &err), 0);
	ck_assert_int_eq(pipette_bwcache_load(c, &y, &err), 0);
	assert_same_links(x, y);
	pipette_bwcache_destroy(x);
	pipette_bwcache_destroy(y);
	snprintf(args, sizeof(args), "bandwidth convert %s -o %s --switch-size 4 --tolerance "
		 "0.1", a, b);
	expect(args, 0, "pipette-bw/2, 12 nodes, 3 groups");
	snprintf(args, sizeof(args), "bandwidth convert %s -o %s --group 'x=node[1-3]' "
		 "--group 'y=node[3-4]'", a, b);
	expect(args, 2, "--group y: node node3 is already in group x");
	snprintf(args, sizeof(args), "bandwidth convert %s -o %s --group 'x=gpu1'", a, b);
	expect(args, 2, "--group x: node gpu1 is not in the cache");
	snprintf(args, sizeof(args), "bandwidth convert %s -o %s --group x", a, b);
	expect(args, 2, "--group: expected NAME=HOSTLIST, got 'x'");
	snprintf(args, sizeof(args), "bandwidth convert %s -o %s --to pipette-bw/1 "
		 "--switch-size 4", a, b);
	expect(args, 2, "--group and --switch-size make pipette-bw/2");
	snprintf(args, sizeof(args), "bandwidth convert %s -o %s --to pipette-bw/2", a, b);
	expect(args, 2, "pipette-bw/2 needs either --group (one or more) or --switch-size");
	snprintf(args, sizeof(args), "bandwidth convert %s --switch-size 4", a);
	expect(args, 2, "bandwidth convert: expected IN -o OUT");
	snprintf(args, sizeof(args), "bandwidth convert %s -o %s --switch-size 4 --tolerance 2",
		 a, b);
	expect(args, 2, "--tolerance");
	snprintf(args, sizeof(args), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(args), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("bwscan");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_scan_good);
	tcase_add_loop_test(tc, test_scan_bad, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, test_scan_truncated);
	tcase_add_test(tc, test_scan_nul);
	tcase_add_test(tc, test_plain_links);
	tcase_add_test(tc, test_one_pass_same);
	tcase_add_test(tc, test_one_pass_grid);
	tcase_add_test(tc, test_v1_v2_equivalent);
	tcase_add_test(tc, test_convert_roundtrip);
	tcase_add_test(tc, test_grouped_memory);
	tcase_add_test(tc, test_cluster_store);
	tcase_add_test(tc, test_cluster_intra_store);
	tcase_add_test(tc, test_cli_convert);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
