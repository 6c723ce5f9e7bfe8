/* Unit tests: a saved plan read back and pinned (planfile.h).
 *
 * The claim the plugin's --pipette-plan-file and pipette trial rest on: a
 * plan's JSON, read back with its configuration pinned and planned again
 * on the same nodes and inputs, is the same plan (the same hash), and each
 * runner-up pins to a plan of that very configuration.  And every refusal
 * names the file and the field. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/planfile.h"

#include "check_run.h"

static const char *const two[] = { "node2", "node1" };	/* any order: the plan sorts */

static void request(struct pipette_request *req, const char *model)
{
	pipette_request_init(req);
	strcpy(req->model, model);
	strcpy(req->gpu, "h100");
	req->global_batch = 64;
	req->seq_len = 2048;
	req->top_k = 8;
}

static struct pipette_cluster_spec cluster(const char *const *names, int n)
{
	struct pipette_cluster_spec cs = { .nodes = n, .node_names = names, .gpus_per_node = 8 };

	return cs;
}

/* The JSON of llama3-8b on two H100 nodes, and the plan's hash. */
static char *saved(char hash[PIPETTE_HASH_HEX + 1])
{
	struct pipette_cluster_spec cs = cluster(two, 2);
	struct pipette_request req;
	struct pipette_plan *plan = NULL;
	struct pipette_err err = { .msg = "" };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	request(&req, "llama3-8b");
	ck_assert_msg(pipette_plan_compute(&req, &cs, &plan, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(pipette_plan_write_json(plan, f), 0);
	fclose(f);
	strcpy(hash, pipette_plan_hash(plan));
	pipette_plan_destroy(plan);
	return text;
}

static struct pipette_planfile *parse_ok(const char *text)
{
	struct pipette_planfile *pf = NULL;
	struct pipette_err err = { .msg = "" };

	ck_assert_msg(pipette_planfile_parse(text, strlen(text), "p.json", &pf, &err) == 0, "%s",
		      err.msg);
	return pf;
}

/* Pin configuration k of pf into a fresh request of `model` and plan it on
 * the two nodes. */
static struct pipette_plan *replan(const struct pipette_planfile *pf, int k)
{
	struct pipette_cluster_spec cs = cluster(two, 2);
	struct pipette_request req;
	struct pipette_plan *plan = NULL;
	struct pipette_err err = { .msg = "" };

	request(&req, "llama3-8b");
	ck_assert_msg(pipette_planfile_pin(pf, k, &req, &err) == 0, "%s", err.msg);
	ck_assert_msg(pipette_plan_compute(&req, &cs, &plan, &err) == 0, "%s", err.msg);
	return plan;
}

START_TEST(test_round_trip)
{
	char hash[PIPETTE_HASH_HEX + 1], *text = saved(hash);
	struct pipette_planfile *pf = parse_ok(text);
	struct pipette_err err = { .msg = "" };
	struct pipette_plan *plan;
	int k, n = pipette_planfile_ranked_count(pf);

	ck_assert_str_eq(pipette_planfile_hash(pf), hash);
	ck_assert_str_eq(pipette_planfile_model(pf), "llama3-8b");
	ck_assert_str_eq(pipette_planfile_stack(pf), "megatron");
	ck_assert_int_eq(pipette_planfile_global_batch(pf), 64);
	ck_assert_int_eq(pipette_planfile_seq_len(pf), 2048);
	ck_assert_int_ge(n, 4);
	/* the plan's own configuration: the same plan, byte for byte (hash) */
	plan = replan(pf, -1);
	ck_assert_msg(pipette_planfile_verify(pf, plan, &err) == 0, "%s", err.msg);
	pipette_plan_destroy(plan);
	/* every runner-up: a plan of that configuration (uneven stages aside) */
	for (k = 0; k < n; k++) {
		plan = replan(pf, k);
		ck_assert_msg(pipette_planfile_same_config(pf, k, plan), "ranked[%d]", k);
		if (k == 0)
			ck_assert_str_eq(pipette_plan_hash(plan), hash);
		pipette_plan_destroy(plan);
	}
	/* and a plan of another configuration is not configuration 0 */
	plan = replan(pf, 1);
	ck_assert(!pipette_planfile_same_config(pf, 0, plan));
	pipette_plan_destroy(plan);
	pipette_planfile_destroy(pf);
	free(text);
}
END_TEST

/* check() of pf against `model`, `stack` on names[n] x gpus with launch. */
static void check_fails(const struct pipette_planfile *pf, const char *model, const char *stack,
			const char *const *names, int n, int gpus, enum pipette_launch_mode launch,
			const char *want)
{
	struct pipette_cluster_spec cs = cluster(names, n);
	struct pipette_request req;
	struct pipette_err err = { .msg = "" };

	request(&req, model);
	strcpy(req.stack, stack);
	cs.gpus_per_node = gpus;
	ck_assert_int_eq(pipette_planfile_check(pf, &req, &cs, launch, &err), -1);
	ck_assert_msg(!strcmp(err.msg, want), "\n got: %s\nwant: %s", err.msg, want);
}

START_TEST(test_refusals)
{
	static const char *const other[] = { "node3" };
	char hash[PIPETTE_HASH_HEX + 1], *text = saved(hash);
	struct pipette_planfile *pf = parse_ok(text);
	struct pipette_cluster_spec cs = cluster(two, 2);
	struct pipette_request req;
	struct pipette_err err = { .msg = "" };

	request(&req, "llama3-8b");
	ck_assert_msg(pipette_planfile_check(pf, &req, &cs, PIPETTE_LAUNCH_SRUN, &err) == 0, "%s",
		      err.msg);
	check_fails(pf, "llama3-8b", "", other, 1, 8, PIPETTE_LAUNCH_SRUN,
		    "plan file p.json: cluster.nodes: made for node1, node2 (2 nodes), the step "
		    "runs on node3 (1 node)");
	check_fails(pf, "llama3-70b", "", two, 2, 8, PIPETTE_LAUNCH_SRUN,
		    "plan file p.json: model: made for llama3-8b, the step asks for llama3-70b");
	check_fails(pf, "llama3-8b", "nemo", two, 2, 8, PIPETTE_LAUNCH_SRUN,
		    "plan file p.json: stack: made for megatron, the step runs nemo");
	check_fails(pf, "llama3-8b", "", two, 2, 4, PIPETTE_LAUNCH_SRUN,
		    "plan file p.json: cluster.gpus_per_node: made for 8 GPUs per node, the step "
		    "has 4");
	check_fails(pf, "llama3-8b", "", two, 2, 8, PIPETTE_LAUNCH_TORCHRUN,
		    "plan file p.json: mapping.launch: made for srun launch, the step runs "
		    "torchrun (one task per node)");
	/* a global batch the request names must be the plan's */
	req.global_batch = 128;
	ck_assert_int_eq(pipette_planfile_pin(pf, -1, &req, &err), -1);
	ck_assert_str_eq(err.msg, "plan file p.json: config.global_batch: the plan is for 64, the "
			 "request names 128 (global batch)");
	pipette_planfile_destroy(pf);
	free(text);
}
END_TEST

/* The text with the first `from` replaced by `to`, parsed: it fails with
 * a message that contains `want`. */
static void edited_fails(const char *text, const char *from, const char *to, const char *want)
{
	struct pipette_planfile *pf = NULL;
	struct pipette_err err = { .msg = "" };
	const char *at = strstr(text, from);
	char *t = malloc(strlen(text) + strlen(to) + 1);

	ck_assert_ptr_nonnull(at);
	sprintf(t, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	ck_assert_int_eq(pipette_planfile_parse(t, strlen(t), "p.json", &pf, &err), -1);
	ck_assert_ptr_null(pf);
	ck_assert_msg(strstr(err.msg, want), "\n got: %s\nwant: ...%s...", err.msg, want);
	free(t);
}

START_TEST(test_bad_files)
{
	char hash[PIPETTE_HASH_HEX + 1], *text = saved(hash), tampered[64];
	struct pipette_planfile *pf;
	struct pipette_plan *plan;
	struct pipette_err err = { .msg = "" };
	char *t;

	edited_fails(text, "pipette-plan/1", "pipette-obs/1",
		     "p.json: schema: 'pipette-obs/1', expected \"pipette-plan/1\"");
	edited_fails(text, hash, "12345", "p.json: plan_hash: '12345' is not 16 hex digits");
	edited_fails(text, "\"cluster\":", "\"klaster\":", "p.json: cluster: expected an object");
	edited_fails(text, "\"ranked\":", "\"rankd\":", "p.json: ranked: missing");
	edited_fails(text, "\"gpus_per_node\":8", "\"gpus_per_node\":0",
		     "p.json: cluster.gpus_per_node: 0 is not in [1, 64]");
	edited_fails(text, "{", "[", "p.json: line 2, column 11: malformed JSON");
	/* a file whose hash is not what its configuration plans to: refused
	 * after planning, naming plan_hash */
	t = strdup(text);
	memcpy(strstr(t, hash), "0123456789abcdef", PIPETTE_HASH_HEX);
	pf = parse_ok(t);
	plan = replan(pf, -1);
	ck_assert_int_eq(pipette_planfile_verify(pf, plan, &err), -1);
	snprintf(tampered, sizeof(tampered), "gives %s:", hash);
	ck_assert_msg(strstr(err.msg, "plan file p.json: plan_hash: the file's plan is "
				      "0123456789abcdef, but planning its configuration again") &&
		      strstr(err.msg, tampered), "%s", err.msg);
	pipette_plan_destroy(plan);
	pipette_planfile_destroy(pf);
	free(t);
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("planfile");
	TCase *tc = tcase_create("planfile");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_bad_files);
	suite_add_tcase(s, tc);
	return check_run(s);
}
