/* Fuzz the Hugging Face config.json loader, pipette_model_load_hf
 * (model.h).  It reads a path, so the input goes through a temporary file.
 *
 * Contract checked beyond "no crash, no leak": a model that loads passes
 * pipette_model_validate, and the parameter counts derived from it are
 * finite and positive (the estimators divide by them). */
#include <math.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "inputs/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pipette_err err = { { 0 } };
	struct pipette_layer_params lp;
	struct pipette_model m;
	const char *path = fuzz_write_file(data, size);
	double total, active;
	int rc, l;

	rc = pipette_model_load_hf(path, &m, &err);
	fuzz_check_err(rc, &err, "pipette_model_load_hf");
	if (rc)
		return 0;
	fuzz_require(pipette_model_validate(&m, &err) == 0,
		     "a loaded model fails validation: %s", err.msg);
	fuzz_require(memchr(m.name, '\0', sizeof(m.name)) &&
		     memchr(m.source, '\0', sizeof(m.source)), "unterminated name");
	total = pipette_model_params_total(&m);
	active = pipette_model_params_active(&m);
	fuzz_require(isfinite(total) && total > 0, "params_total = %g", total);
	fuzz_require(isfinite(active) && active > 0 && active <= total * (1 + 1e-9),
		     "params_active = %g of %g", active, total);
	fuzz_require(pipette_model_moe_layer_count(&m) <= m.layers, "more MoE layers than layers");
	for (l = 0; l < m.layers && l < 256; l++) {
		pipette_model_layer_params(&m, l, &lp);
		fuzz_require(isfinite(lp.attn + lp.mlp + lp.experts + lp.norms),
			     "layer %d: non-finite parameter count", l);
	}
	fuzz_require(isfinite(pipette_model_q_width(&m)) && isfinite(pipette_model_kv_width(&m)),
		     "non-finite projection widths");
	return 0;
}
