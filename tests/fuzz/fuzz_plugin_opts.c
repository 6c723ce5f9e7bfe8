/* Fuzz the SPANK plugin's option-value parsers (plugin/parse.c): every
 * --pipette-* option value (pipette_opts_set, which includes
 * --pipette-fix=tp=8,pp=4,... through pipette_parse_fix), and the step
 * layout strings Slurm hands the plugin (SLURM_STEP_TASKS_PER_NODE, GPU
 * lists).  All are NUL-terminated strings from the user or slurmstepd.
 *
 * Contract checked beyond "no crash": a value that sets an option sets
 * its bit and an in-range value; pinned degrees are positive. */
#include <stdint.h>

#include "fuzz_util.h"
#include "plugin.h"

static void check_pins(const struct pipette_pins *p)
{
	const int v[] = { p->tp, p->pp, p->dp, p->cp, p->ep, p->etp, p->vpp, p->micro_batch };
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		fuzz_require(v[i] == -1 || v[i] >= 1, "pin %zu = %d", i, v[i]);
	fuzz_require(p->sequence_parallel >= -1 && p->sequence_parallel <= 1, "sp pin");
	fuzz_require(p->distributed_optimizer >= -1 && p->distributed_optimizer <= 1, "do pin");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pipette_err err = { { 0 } };
	struct pipette_opts o;
	struct pipette_pins pins;
	char *s = fuzz_strdup(data, size), *gpus, *tok[PIPETTE_MAX_GPUS];
	long per_node, nodes;
	int id, rc, n, b;

	for (id = 0; id < PIPETTE_OPT_COUNT; id++) {
		pipette_opts_init(&o);
		rc = pipette_opts_set(&o, (enum pipette_opt_id)id, s, &err);
		fuzz_check_err(rc, &err, pipette_opt_name((enum pipette_opt_id)id));
		if (rc)
			continue;
		fuzz_require(o.set == 1u << id, "%s: set bits %#x",
			     pipette_opt_name((enum pipette_opt_id)id), o.set);
		check_pins(&o.pins);
		fuzz_require(memchr(o.model, '\0', sizeof(o.model)) &&
			     memchr(o.bandwidth, '\0', sizeof(o.bandwidth)), "unterminated value");
		fuzz_require(o.mem_fraction == 0 || (o.mem_fraction >= 0.05 && o.mem_fraction <= 1),
			     "mem_fraction %g", o.mem_fraction);
		rc = pipette_opts_check(&o, &err);
		fuzz_check_err(rc, &err, "pipette_opts_check");
	}

	rc = pipette_parse_fix(s, &pins, &err);
	fuzz_check_err(rc, &err, "pipette_parse_fix");
	if (rc == 0)
		check_pins(&pins);

	rc = pipette_tasks_per_node(s, &per_node, &nodes, &err);
	fuzz_check_err(rc, &err, "pipette_tasks_per_node");
	if (rc == 0)
		fuzz_require(nodes >= 1 && nodes <= PIPETTE_MAX_NODES && per_node >= 0,
			     "tasks per node %ld on %ld nodes", per_node, nodes);

	/* The list is split in place: give it its own copy. */
	gpus = fuzz_strdup(data, size);
	rc = pipette_split_gpus(gpus, tok, PIPETTE_MAX_GPUS, &n, &err);
	fuzz_check_err(rc, &err, "pipette_split_gpus");
	if (rc == 0) {
		fuzz_require(n >= 1 && n <= PIPETTE_MAX_GPUS, "%d GPUs", n);
		while (n--)
			fuzz_require(tok[n] >= gpus && tok[n] < gpus + size + 1 && *tok[n],
				     "GPU token %d outside the buffer or empty", n);
	}
	free(gpus);

	if (pipette_parse_bool(s, &b) == 0)
		fuzz_require(b == 0 || b == 1, "bool %d", b);
	free(s);
	return 0;
}
