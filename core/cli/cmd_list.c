/* pipette models / pipette gpus: list the built-in tables. */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "inputs/hardware.h"
#include "inputs/model.h"
#include "inputs/stack.h"

static int list_format(int argc, char **argv, const char *cmd, enum pipette_format *fmt)
{
	int i;

	*fmt = PIPETTE_FMT_TABLE;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: pipette %s [--format table|json]\n", cmd);
			return -1;
		}
		if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			if (cli_parse_format(argv[++i], 3, fmt))
				return cli_error("--format: '%.32s': expected table or json",
						 argv[i]);
			continue;
		}
		return cli_error("%s: unknown argument '%.64s'", cmd, argv[i]);
	}
	return 0;
}

static const char *ffn_name(const struct pipette_model *m)
{
	return m->ffn_kind == PIPETTE_FFN_SWIGLU ? "swiglu"
	       : m->ffn_kind == PIPETTE_FFN_RELU2 ? "relu2" : "gelu";
}

int cmd_models(int argc, char **argv)
{
	enum pipette_format fmt;
	size_t i;
	int rc = list_format(argc, argv, "models", &fmt);

	if (rc)
		return rc > 0 ? rc : PIPETTE_EXIT_OK;
	if (fmt == PIPETTE_FMT_JSON) {
		struct json_object *arr = json_object_new_array();

		for (i = 0; i < pipette_model_preset_count(); i++) {
			const struct pipette_model *m = pipette_model_preset_at(i);
			struct json_object *o = json_object_new_object();

			json_object_object_add(o, "name", json_object_new_string(m->name));
			json_object_object_add(o, "params", json_object_new_double(
				pipette_model_params_total(m)));
			json_object_object_add(o, "layers", json_object_new_int(m->layers));
			json_object_object_add(o, "hidden", json_object_new_int(m->hidden));
			json_object_object_add(o, "heads", json_object_new_int(m->heads));
			json_object_object_add(o, "kv_heads", json_object_new_int(m->kv_heads));
			json_object_object_add(o, "ffn", json_object_new_int64(m->ffn));
			json_object_object_add(o, "ffn_kind", json_object_new_string(ffn_name(m)));
			json_object_object_add(o, "vocab", json_object_new_int64(m->vocab));
			json_object_object_add(o, "tied_embeddings",
					       json_object_new_boolean(m->tied_embeddings));
			json_object_object_add(o, "max_seq", json_object_new_int64(m->max_seq));
			json_object_object_add(o, "experts", json_object_new_int(m->experts));
			json_object_object_add(o, "topk", json_object_new_int(m->topk));
			json_object_object_add(o, "expert_ffn", json_object_new_int64(m->expert_ffn));
			json_object_object_add(o, "source", json_object_new_string(m->source));
			json_object_array_add(arr, o);
		}
		puts(json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY |
							 JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(arr);
		return PIPETTE_EXIT_OK;
	}
	printf("%-14s %9s %6s %6s %5s %4s %7s %-6s %7s %s\n", "NAME", "PARAMS", "LAYERS",
	       "HIDDEN", "HEADS", "KV", "FFN", "KIND", "VOCAB", "EXPERTS");
	for (i = 0; i < pipette_model_preset_count(); i++) {
		const struct pipette_model *m = pipette_model_preset_at(i);
		char experts[32] = "-";

		if (m->experts)
			snprintf(experts, sizeof(experts), "%d top-%d", m->experts, m->topk);
		printf("%-14s %8.1fB %6d %6d %5d %4d %7ld %-6s %7ld %s\n", m->name,
		       pipette_model_params_total(m) / 1e9, m->layers, m->hidden, m->heads,
		       m->kv_heads, m->ffn, ffn_name(m), m->vocab, experts);
	}
	return PIPETTE_EXIT_OK;
}

int cmd_gpus(int argc, char **argv)
{
	enum pipette_format fmt;
	size_t i;
	int rc = list_format(argc, argv, "gpus", &fmt);

	if (rc)
		return rc > 0 ? rc : PIPETTE_EXIT_OK;
	if (fmt == PIPETTE_FMT_JSON) {
		struct json_object *arr = json_object_new_array();

		for (i = 0; i < pipette_gpu_count(); i++) {
			const struct pipette_gpu_spec *g = pipette_gpu_at(i);
			struct json_object *o = json_object_new_object();

			json_object_object_add(o, "name", json_object_new_string(g->name));
			json_object_object_add(o, "aliases", json_object_new_string(g->aliases));
			json_object_object_add(o, "peak_tflops", json_object_new_double(g->peak_tflops));
			json_object_object_add(o, "fp8_tflops", json_object_new_double(g->fp8_tflops));
			json_object_object_add(o, "fp4_tflops", json_object_new_double(g->fp4_tflops));
			json_object_object_add(o, "measured_kernels",
					       json_object_new_boolean(g->kernels != NULL));
			json_object_object_add(o, "hbm_bytes", json_object_new_double(g->hbm_bytes));
			json_object_object_add(o, "hbm_gbps", json_object_new_double(g->hbm_gbps));
			json_object_object_add(o, "nvlink_gbps", json_object_new_double(g->nvlink_gbps));
			json_object_object_add(o, "nic_gbps", json_object_new_double(g->nic_gbps));
			json_object_object_add(o, "gpus_per_node", json_object_new_int(g->gpus_per_node));
			json_object_object_add(o, "nvlink_domain_gpus",
					       json_object_new_int(g->nvlink_domain_gpus > g->gpus_per_node
								   ? g->nvlink_domain_gpus
								   : g->gpus_per_node));
			json_object_object_add(o, "source", json_object_new_string(g->source));
			json_object_array_add(arr, o);
		}
		puts(json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY |
							 JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(arr);
		return PIPETTE_EXIT_OK;
	}
	printf("%-15s %9s %8s %8s %8s %9s %12s %9s %6s %s\n", "NAME", "BF16 TF/s", "FP8", "FP4",
	       "HBM GiB", "HBM GB/s", "NVLink GB/s", "NIC GB/s", "DOMAIN", "KERNELS");
	for (i = 0; i < pipette_gpu_count(); i++) {
		const struct pipette_gpu_spec *g = pipette_gpu_at(i);

		printf("%-15s %9.0f %8.0f %8.0f %8.1f %9.0f %12.0f %9.1f %6d %s\n", g->name,
		       g->peak_tflops, g->fp8_tflops, g->fp4_tflops, g->hbm_bytes / PIPETTE_GIB,
		       g->hbm_gbps, g->nvlink_gbps, g->nic_gbps,
		       g->nvlink_domain_gpus > g->gpus_per_node ? g->nvlink_domain_gpus
								 : g->gpus_per_node,
		       g->kernels ? "measured" : "curve");
	}
	printf("(dense peaks, 0: no such tensor cores; DOMAIN: GPUs per NVLink domain; KERNELS: "
	       "the time model's GEMM and attention rates from a measured kernel table, or an "
	       "efficiency curve of the peak)\n");
	return PIPETTE_EXIT_OK;
}

int cmd_stacks(int argc, char **argv)
{
	enum pipette_format fmt;
	char text[2048];
	int i, rc = list_format(argc, argv, "stacks", &fmt);

	if (rc)
		return rc > 0 ? rc : PIPETTE_EXIT_OK;
	if (fmt == PIPETTE_FMT_JSON) {
		struct json_object *arr = json_object_new_array();

		for (i = 0; i < PIPETTE_STACK_COUNT; i++) {
			const struct pipette_stack *s = pipette_stack_get((enum pipette_stack_id)i);
			struct json_object *o = json_object_new_object();

			pipette_stack_schedules_text(s, text, sizeof(text));
			json_object_object_add(o, "name", json_object_new_string(s->name));
			json_object_object_add(o, "what", json_object_new_string(s->what));
			json_object_object_add(o, "grad_bytes", json_object_new_double(s->grad_bytes));
			json_object_object_add(o, "swiglu_saved", json_object_new_double(s->swiglu_saved));
			json_object_object_add(o, "logits_bytes", json_object_new_double(s->logits_bytes));
			json_object_object_add(o, "wgrad_deferral_limit",
					       json_object_new_int(s->wgrad_deferral_limit));
			json_object_object_add(o, "reserve_fraction",
					       json_object_new_double(s->reserve_fraction));
			json_object_object_add(o, "mem_fraction", json_object_new_double(s->mem_fraction));
			json_object_object_add(o, "tp_exposed", json_object_new_double(s->tp_exposed));
			json_object_object_add(o, "dp_overlap", json_object_new_boolean(s->dp_overlap));
			json_object_object_add(o, "optim_bytes", json_object_new_double(s->optim_bytes));
			json_object_object_add(o, "fsdp", json_object_new_boolean(s->fsdp));
			if (s->fsdp) {
				json_object_object_add(o, "gather_bytes",
						       json_object_new_double(s->gather_bytes));
				json_object_object_add(o, "reduce_bytes",
						       json_object_new_double(s->reduce_bytes));
				json_object_object_add(o, "reduce_every_micro_batch",
						       json_object_new_boolean(s->sync_each_mb));
				json_object_object_add(o, "prefetch_before_backward",
						       json_object_new_boolean(s->prefetch_before_backward));
			}
			json_object_object_add(o, "selective", json_object_new_string(
				s->selective_ops ? "per-op" : "attention core"));
			json_object_object_add(o, "attn_utilization",
					       json_object_new_double(s->attn_utilization));
			json_object_object_add(o, "elementwise_factor",
					       json_object_new_double(s->elementwise_factor));
			json_object_object_add(o, "schedules", json_object_new_string(text));
			json_object_object_add(o, "attention", json_object_new_string(
				pipette_attention_name(s->attention)));
			json_object_array_add(arr, o);
		}
		rc = puts(json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY)) < 0;
		json_object_put(arr);
		return rc ? PIPETTE_EXIT_USAGE : PIPETTE_EXIT_OK;
	}
	for (i = 0; i < PIPETTE_STACK_COUNT; i++) {
		if (pipette_stack_describe(pipette_stack_get((enum pipette_stack_id)i), text,
					   sizeof(text)))
			return cli_error("stacks: description too long");
		printf("%s%s", i ? "\n" : "", text);
	}
	printf("\nThe default is %s.  Sources: tests/data/stacks/README.md.\n",
	       pipette_stack_default_name());
	return PIPETTE_EXIT_OK;
}
