/* Unit tests: replay the fuzzers' committed inputs (tests/fuzz/corpus and
 * tests/fuzz/regress, one directory per parser) through the parsers with
 * the ordinary build, so `make check` keeps every past finding fixed even
 * where clang/libFuzzer is absent; `make sanitize` runs this under ASan and
 * UBSan.  The contract is the fuzz harnesses' (tests/fuzz/fuzz_*.c): each
 * input parses, or fails with -1 and a message; a parsed input writes back
 * in a form that parses to the same bytes.  The findings themselves have
 * named tests below that say what was wrong. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/bwcache.h"
#include "inputs/topology.h"
#include "hostlist.h"
#include "plan/experts.h"
#include "inputs/model.h"
#include "plugin.h"
#include "inputs/trainlog.h"
#include "../fuzz/small_moe.h"
#include "check_run.h"

#define FUZZ_DIR PIPETTE_SRCDIR "/tests/fuzz"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_msg(f != NULL, "%s: cannot open", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_ge(n, 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void expect_clean(int rc, const struct pipette_err *err, const char *path)
{
	ck_assert_msg(rc == 0 || rc == -1, "%s: returned %d", path, rc);
	if (rc)
		ck_assert_msg(err->msg[0] != '\0', "%s: failed without a message", path);
}

/* The small MoE model of tests/fuzz/fuzz_routing.c: 3 MoE layers of 4
 * experts, top-2. */
static char *routing_text(const struct pipette_routing *r, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(pipette_routing_write_json(r, "fuzz-moe", 1, f), 0);
	fclose(f);
	return buf;
}

static void bwcache_fixed_point(const struct pipette_bwcache *bw, const char *path)
{
	struct pipette_err err = { .msg = "" };
	struct pipette_bwcache *again = NULL;
	char *t1 = pipette_bwcache_serialize(bw, &err), *t2;

	ck_assert_msg(t1 != NULL, "%s: serialize: %s", path, err.msg);
	ck_assert_msg(pipette_bwcache_parse(t1, strlen(t1), "serialized", &again, &err) == 0,
		      "%s: the serialized cache does not parse: %s", path, err.msg);
	t2 = pipette_bwcache_serialize(again, &err);
	ck_assert_ptr_nonnull(t2);
	ck_assert_msg(!strcmp(t1, t2), "%s: serialize is not a fixed point", path);
	free(t1);
	free(t2);
	pipette_bwcache_destroy(again);
}

/* As in fuzz_trainlog.c: the reader of a growing log, fed the text in
 * pieces of 7 bytes (and a newline after a last line without one), gives
 * the parse's rc and error, or as many steps, memory reports and runs. */
static void replay_reader(const char *text, size_t len, const char *path,
			  enum pipette_stack_id stack, int rc, const struct pipette_err *perr,
			  const struct pipette_trainlog *want)
{
	struct pipette_err err = { .msg = "" };
	struct pipette_trainlog_reader *r = NULL;
	struct pipette_trainlog *l = NULL;
	size_t i;
	int got = pipette_trainlog_reader_create(path, stack, &r, &err);

	ck_assert_msg(got == 0, "%s: %s", path, err.msg);
	for (i = 0; i < len && got == 0; i += 7)
		got = pipette_trainlog_reader_feed(r, text + i, len - i < 7 ? len - i : 7, &err);
	if (got == 0 && len && text[len - 1] != '\n')
		got = pipette_trainlog_reader_feed(r, "\n", 1, &err);
	if (got == 0)
		got = pipette_trainlog_reader_take(r, &l, &err);
	ck_assert_msg(got == rc, "%s: reader %d (%s), parse %d (%s)", path, got, err.msg, rc,
		      perr->msg);
	if (rc)
		ck_assert_str_eq(err.msg, perr->msg);
	else
		ck_assert_msg(l->nsteps == want->nsteps && l->nmem == want->nmem &&
			      l->nruns == want->nruns, "%s: the reader's log differs", path);
	pipette_trainlog_destroy(l);
	pipette_trainlog_reader_destroy(r);
}

/* As in fuzz_trainlog.c: the log as each stack's; what parses has steps
 * whose steady state is ordered where it exists. */
static void replay_trainlog(const char *text, size_t len, const char *path)
{
	static const enum pipette_stack_id stacks[] = {
		PIPETTE_STACK_MEGATRON, PIPETTE_STACK_MEGATRON_ZB, PIPETTE_STACK_MEGATRON_2022,
		PIPETTE_STACK_NEMO, PIPETTE_STACK_TORCHTITAN,
	};
	size_t k;

	for (k = 0; k < sizeof(stacks) / sizeof(stacks[0]); k++) {
		struct pipette_err err = { .msg = "" };
		struct pipette_trainlog *l = NULL;
		struct pipette_trainlog_steady st;
		int rc = pipette_trainlog_parse(text, len, path, stacks[k], &l, &err);

		expect_clean(rc, &err, path);
		replay_reader(text, len, path, stacks[k], rc, &err, l);
		if (rc)
			continue;
		ck_assert_msg(l->nsteps >= 1, "%s: a log without steps", path);
		rc = pipette_trainlog_steady(l, -1, &st, &err);
		expect_clean(rc, &err, path);
		if (rc == 0)
			ck_assert_msg(st.p10_s <= st.median_s && st.median_s <= st.p90_s &&
				      st.mad_s >= 0, "%s: steady state out of order", path);
		pipette_trainlog_destroy(l);
	}
}

static void replay_one(const char *parser, const char *path)
{
	struct pipette_err err = { .msg = "" };
	struct pipette_bwcache *bw = NULL;
	size_t len;
	char *text = slurp(path, &len);
	int rc;

	if (!strcmp(parser, "hf_config")) {
		struct pipette_model m;

		expect_clean(pipette_model_load_hf(path, &m, &err), &err, path);
	} else if (!strcmp(parser, "bwcache")) {
		rc = pipette_bwcache_parse(text, len, path, &bw, &err);
		expect_clean(rc, &err, path);
		if (rc == 0)
			bwcache_fixed_point(bw, path);
	} else if (!strcmp(parser, "nccl")) {
		struct pipette_nccl_import opt = { .when = (time_t)-1 };

		bw = pipette_bwcache_create();
		ck_assert_ptr_nonnull(bw);
		rc = pipette_bwcache_import_nccl(bw, path, &opt, &err);
		expect_clean(rc, &err, path);
		if (rc == 0)
			bwcache_fixed_point(bw, path);
	} else if (!strcmp(parser, "legacy")) {
		/* A leading control byte picks the GPU count in the harness;
		 * such inputs are only meaningful there. */
		if (len && (unsigned char)text[0] < 0x20 && !strchr("\n\t\r", text[0]))
			goto out;
		bw = pipette_bwcache_create();
		ck_assert_ptr_nonnull(bw);
		rc = pipette_bwcache_import_legacy(bw, path, 8, 0, &err);
		expect_clean(rc, &err, path);
		if (rc == 0)
			bwcache_fixed_point(bw, path);
	} else if (!strcmp(parser, "routing")) {
		struct pipette_routing *r = NULL, *again = NULL;
		struct pipette_model m;
		char *t1, *t2;
		size_t l1, l2;

		small_moe(&m);
		rc = pipette_routing_parse(text, len, path, &m, &r, &err);
		expect_clean(rc, &err, path);
		if (rc == 0) {
			t1 = routing_text(r, &l1);
			ck_assert_msg(pipette_routing_parse(t1, l1, "written", &m, &again, &err) == 0,
				      "%s: the written trace does not parse: %s", path, err.msg);
			t2 = routing_text(again, &l2);
			ck_assert_msg(l1 == l2 && !memcmp(t1, t2, l1),
				      "%s: write_json is not a fixed point", path);
			free(t1);
			free(t2);
			pipette_routing_destroy(again);
			pipette_routing_destroy(r);
		}
	} else if (!strcmp(parser, "plugin_opts")) {
		struct pipette_opts o;
		struct pipette_pins pins;
		long per, nodes;
		int id;

		for (id = 0; id < PIPETTE_OPT_COUNT; id++) {
			pipette_opts_init(&o);
			expect_clean(pipette_opts_set(&o, (enum pipette_opt_id)id, text, &err),
				     &err, path);
		}
		expect_clean(pipette_parse_fix(text, &pins, &err), &err, path);
		expect_clean(pipette_tasks_per_node(text, &per, &nodes, &err), &err, path);
	} else if (!strcmp(parser, "plugin_args")) {
		struct pipette_site site;
		char *av[64], *nl;
		size_t i = 0;
		int ac = 0;

		/* One argument per line, as in fuzz_plugin_args.c. */
		while (i < len && ac < 64) {
			av[ac++] = text + i;
			if (!(nl = memchr(text + i, '\n', len - i)))
				break;
			*nl = '\0';
			i = (size_t)(nl - text) + 1;
		}
		expect_clean(pipette_site_parse(&site, ac, av, &err), &err, path);
	} else if (!strcmp(parser, "trainlog")) {
		replay_trainlog(text, len, path);
	} else if (!strcmp(parser, "topology")) {
		struct pipette_topology *t = NULL;

		rc = pipette_topology_parse(text, len, path, pipette_hostlist_expand, &t, &err);
		expect_clean(rc, &err, path);
		/* the seeds say which they are: bad-* fail naming the file and
		 * the line, the others are blocks */
		if (strstr(path, "/corpus/topology/bad-"))
			ck_assert_msg(rc == -1 && strstr(err.msg, path) && strstr(err.msg, "line"),
				      "%s: %s", path, rc ? err.msg : "accepted");
		else if (strstr(path, "/corpus/topology/"))
			ck_assert_msg(rc == 0 && pipette_topology_block_count(t) >= 2, "%s: %s",
				      path, rc ? err.msg : "fewer than 2 blocks");
		pipette_topology_destroy(t);
	} else {
		ck_abort_msg("%s: no replay for parser '%s'; add one to %s", path, parser,
			     __FILE__);
	}
out:
	pipette_bwcache_destroy(bw);
	free(text);
}

/* Every file under FUZZ_DIR/<kind>/<parser>/; returns how many. */
static int replay_tree(const char *kind)
{
	char dir[1024], sub[1280], path[1600];
	struct dirent *p, *f;
	DIR *top, *d;
	int n = 0;

	snprintf(dir, sizeof(dir), "%s/%s", FUZZ_DIR, kind);
	top = opendir(dir);
	if (!top)
		return 0;
	while ((p = readdir(top))) {
		if (p->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, p->d_name);
		if (!(d = opendir(sub)))
			continue;
		while ((f = readdir(d))) {
			if (f->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", sub, f->d_name);
			replay_one(p->d_name, path);
			n++;
		}
		closedir(d);
	}
	closedir(top);
	return n;
}

START_TEST(test_replay_seeds)
{
	/* 8 parsers, each with a handful of seeds: fewer than 50 files means
	 * the corpus was not found. */
	ck_assert_int_ge(replay_tree("corpus"), 50);
}
END_TEST

START_TEST(test_replay_regressions)
{
	ck_assert_int_ge(replay_tree("regress"), 2);
}
END_TEST

/* Finding: a config.json holding the JSON literal null made
 * pipette_model_load_hf fail with an empty message (json-c returns NULL
 * for null with json_tokener_success). */
START_TEST(test_hf_null_names_the_problem)
{
	struct pipette_err err = { .msg = "" };
	struct pipette_model m;
	const char *path = FUZZ_DIR "/regress/hf_config/top-level-null.json";

	ck_assert_int_eq(pipette_model_load_hf(path, &m, &err), -1);
	/* (The file's name holds "null": look for the whole sentence.) */
	ck_assert_msg(strstr(err.msg, path) &&
		      strstr(err.msg, ": top level is null, expected a JSON object"),
		      "message: %s", err.msg);
}
END_TEST

/* Finding: a routing count of -0.0 passed the ">= 0" check and was written
 * back as "-0", which reads as the integer 0: write_json then gave
 * different bytes for the same contents. */
START_TEST(test_routing_negative_zero_written_as_zero)
{
	struct pipette_err err = { .msg = "" };
	struct pipette_routing *r = NULL;
	struct pipette_model m;
	size_t len;
	char *text = slurp(FUZZ_DIR "/regress/routing/negative-zero.json", &len), *out;

	small_moe(&m);
	ck_assert_msg(pipette_routing_parse(text, len, "negative-zero.json", &m, &r, &err) == 0,
		      "%s", err.msg);
	out = routing_text(r, &len);
	ck_assert_msg(strstr(out, "-0") == NULL, "written: %.160s", out);
	free(out);
	free(text);
	pipette_routing_destroy(r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuzz_regress");
	TCase *tc = tcase_create("replay");

	/* Check's default of 4 s: the replay takes ~20 ms alone, and ran out
	 * once on a CI machine busy with other work (every parser on ~200
	 * seeds, the training logs under six stacks each). */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_replay_seeds);
	tcase_add_test(tc, test_replay_regressions);
	tcase_add_test(tc, test_hf_null_names_the_problem);
	tcase_add_test(tc, test_routing_negative_zero_written_as_zero);
	suite_add_tcase(s, tc);
	return check_run(s);
}
