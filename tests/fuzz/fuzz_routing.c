/* Fuzz the MoE routing-trace parser, pipette_routing_parse (experts.h).
 * fuzz-requires: core/plan/experts.c
 *
 * The trace is read for a small MoE model (4 layers, the first dense, so
 * 3 MoE layers; 4 experts, top-2) that the fuzzer can satisfy.  Contract
 * checked beyond "no crash, no leak": a trace that parses writes back as
 * JSON that parses again and writes the same bytes; the greedy placement
 * on 2 EP ranks (one per node) is valid and evaluates to a number, not a
 * crash, whatever the counts (0, huge, 1e308). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "plan/experts.h"
#include "fuzz_util.h"
#include "small_moe.h"

static char *write_trace(const struct pipette_routing *r, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		abort();
	fuzz_require(pipette_routing_write_json(r, "fuzz-moe", 1, f) == 0, "write_json failed");
	fclose(f);
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pipette_err err = { { 0 } };
	struct pipette_experts_opts o;
	struct pipette_experts_eval ev;
	struct pipette_routing *r = NULL, *again = NULL;
	struct pipette_model m;
	char *text, *text2;
	size_t len, len2;
	int *pl, rc, n;

	small_moe(&m);
	fuzz_require(pipette_model_validate(&m, &err) == 0, "the harness's model: %s", err.msg);
	/* Not terminated: ASan reports any read past the length. */
	rc = pipette_routing_parse((const char *)data, size, "fuzz.json", &m, &r, &err);
	fuzz_check_err(rc, &err, "pipette_routing_parse");
	if (rc)
		return 0;
	fuzz_require(r && pipette_routing_layers(r) == 3 && pipette_routing_experts(r) == 4 &&
		     pipette_routing_topk(r) == 2, "shape of the parsed trace");

	text = write_trace(r, &len);
	rc = pipette_routing_parse(text, len, "written", &m, &again, &err);
	fuzz_require(rc == 0, "the written trace does not parse: %s\n%s", err.msg, text);
	text2 = write_trace(again, &len2);
	fuzz_require(len == len2 && !memcmp(text, text2, len),
		     "write_json is not a fixed point:\n%s\n---\n%s", text, text2);
	free(text2);
	free(text);
	pipette_routing_destroy(again);

	n = pipette_routing_layers(r) * pipette_routing_experts(r);
	pl = calloc((size_t)n, sizeof(int));
	if (!pl)
		abort();
	pipette_experts_opts_init(&o, 2, 1);
	o.solver = PIPETTE_EXPERTS_GREEDY;
	rc = pipette_experts_greedy(r, &o, pl, &err);
	fuzz_check_err(rc, &err, "pipette_experts_greedy");
	if (rc == 0) {
		rc = pipette_experts_evaluate(r, &o, pl, &ev, NULL, NULL, &err);
		fuzz_require(rc == 0, "the greedy placement does not evaluate: %s", err.msg);
		fuzz_require(!isnan(ev.objective), "objective is NaN");
	}
	pipette_experts_contiguous(3, 4, 2, pl);
	rc = pipette_experts_evaluate(r, &o, pl, &ev, NULL, NULL, &err);
	fuzz_require(rc == 0, "the contiguous placement does not evaluate: %s", err.msg);
	free(pl);
	pipette_routing_destroy(r);
	return 0;
}
