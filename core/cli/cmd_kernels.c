/* pipette kernels fit: a site's kernel table, fitted from the kernels its
 * GPUs ran (tests/data/kernels/kernels.py writes the CSV), as the
 * calibration file `--calibration` reads (hardware.h). */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "inputs/hardware.h"
#include "inputs/json.h"
#include "inputs/knobs.h"
#include "learn/kernelfit.h"

static const char usage_text[] =
"usage: pipette kernels fit CSV --gpu TYPE [-o OUT.json]\n"
"\n"
"Fit the kernel model (t = t0 + 2mnk/rate + m*n*t_out per GEMM dtype,\n"
"t = t0 + flops/rate + rows*t_row per attention pass) to the kernels\n"
"timed on one GPU of TYPE (the CSV of kernels.py: gpu, kind, model, tp,\n"
"tokens_or_seq, op, pass, dtype, m, n, k, flops, seconds, tflops), print\n"
"each fit with its median and 95th-percentile error, and with -o write\n"
"it as a calibration file: --calibration OUT.json then prices compute on\n"
"the site's own kernels.\n";

static struct json_object *gemm_json(const struct pipette_gemm_fit *f)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "t0_s", json_object_new_double(f->t0_s));
	json_object_object_add(o, "tflops", json_object_new_double(f->tflops));
	json_object_object_add(o, "out_s", json_object_new_double(f->out_s));
	return o;
}

static struct json_object *attn_json(const struct pipette_attn_fit *f)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "t0_s", json_object_new_double(f->t0_s));
	json_object_object_add(o, "tflops", json_object_new_double(f->tflops));
	json_object_object_add(o, "row_s", json_object_new_double(f->row_s));
	return o;
}

static struct json_object *kernels_json(const struct pipette_kernels *k, const char *gpu,
					const char *csv)
{
	struct json_object *root = json_object_new_object(), *o = json_object_new_object();
	struct json_object *g = json_object_new_object();

	json_object_object_add(o, "gpu", json_object_new_string(gpu));
	json_object_object_add(o, "source", json_object_new_string(csv));
	for (int d = 0; d < 3; d++)
		if (k->gemm[d].tflops > 0)
			json_object_object_add(g, pipette_gemm_dtype_name((enum pipette_gemm_dtype)d), gemm_json(&k->gemm[d]));
	json_object_object_add(o, "gemm", g);
	if (k->attn_fwd.tflops > 0 && k->attn_bwd.tflops > 0) {
		json_object_object_add(o, "attn_fwd", attn_json(&k->attn_fwd));
		json_object_object_add(o, "attn_bwd", attn_json(&k->attn_bwd));
	}
	json_object_object_add(root, "kernels", o);
	return root;
}

int cmd_kernels(int argc, char **argv)
{
	static const char *const value_options[] = { "--gpu", "-o", "--output", NULL };
	struct cli_seen seen = { .n = 0 };
	const char *csv = NULL, *gpu = NULL, *out = NULL, *v;
	const struct pipette_gpu_spec *spec;
	struct pipette_ktable t;
	struct pipette_kernels k;
	struct pipette_err err;
	char name[32];
	int i, rc = PIPETTE_EXIT_USAGE;

	if (argc < 2 || strcmp(argv[1], "fit")) {
		fputs(usage_text, argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc >= 2 && !strcmp(argv[1], "--help") ? PIPETTE_EXIT_OK : PIPETTE_EXIT_USAGE;
	}
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return PIPETTE_EXIT_OK;
		}
		if (argv[i][0] != '-') {
			if (csv)
				return cli_error("kernels fit: one CSV, not '%.64s' too", argv[i]);
			csv = argv[i];
			continue;
		}
		if (cli_option(argc, argv, &i, "kernels fit", value_options, &seen, name,
			       sizeof(name), &v))
			return PIPETTE_EXIT_USAGE;
		*(!strcmp(name, "--gpu") ? &gpu : &out) = v;
	}
	if (!csv || !gpu)
		return cli_error("kernels fit: a CSV and --gpu TYPE are required");
	if (!(spec = pipette_gpu_lookup(gpu, &err)))
		return cli_error("--gpu: %s", err.msg);
	if (cli_check_input("kernels fit", csv))
		return PIPETTE_EXIT_USAGE;
	if (pipette_ktable_read(csv, &t, &err) || pipette_kernelfit(&t, NULL, &k, &err))
		return cli_error("%s", err.msg);
	printf("%s: %zu kernels, %s\n", csv, t.n, spec->name);
	for (int d = 0; d <= 3; d++) {
		enum pipette_krow_kind kind = d < 3 ? PIPETTE_KROW_GEMM : PIPETTE_KROW_ATTN_FWD;
		double med, p95;
		size_t n = pipette_kernelfit_errors(&t, &k, kind, d < 3 ? (enum pipette_gemm_dtype)d
							      : PIPETTE_GEMM_BF16, NULL, &med, &p95);

		if (!n)
			continue;
		if (d < 3)
			printf("  %-15s t0 %7.2f us  %7.1f TFLOP/s  %.4f ps per output element",
			       pipette_gemm_dtype_name((enum pipette_gemm_dtype)d), k.gemm[d].t0_s * 1e6, k.gemm[d].tflops,
			       k.gemm[d].out_s * 1e12);
		else
			printf("  %-15s forward t0 %.2f us %.1f TFLOP/s, backward t0 %.2f us %.1f "
			       "TFLOP/s", "attention", k.attn_fwd.t0_s * 1e6, k.attn_fwd.tflops,
			       k.attn_bwd.t0_s * 1e6, k.attn_bwd.tflops);
		printf("  (%zu rows: median error %.1f%%, 95%% within %.1f%%)\n", n, 100 * med,
		       100 * p95);
	}
	rc = PIPETTE_EXIT_OK;
	if (out) {
		struct json_object *doc = kernels_json(&k, spec->name, csv);
		struct pipette_gpu_spec check;

		/* what --calibration will read back, checked now */
		if (pipette_gpu_calibrate_doc(spec, doc, out, &check, &err) ||
		    pipette_json_write_file(out, "-o", doc, 0644, 1, &err))
			rc = cli_error("%s", err.msg);
		json_object_put(doc);
	}
	pipette_ktable_free(&t);
	return rc;
}
