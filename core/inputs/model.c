#include "inputs/model.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "inputs/json.h"

/* Presets.  Dimensions as published in each model's configuration; the
 * source field says where: the paper and table, or the Hugging Face
 * repository whose config.json gives them. */
#define GPT(n, L, h, a, V, seq, src) \
	{ .name = n, .source = src, .layers = L, .hidden = h, .heads = a, \
	  .kv_heads = a, .head_dim = (h) / (a), .ffn = 4L * (h), \
	  .ffn_kind = PIPETTE_FFN_GELU, .norm = PIPETTE_NORM_LAYERNORM, \
	  .bias = 1, .vocab = V, .tied_embeddings = 1, .max_seq = seq, \
	  .moe_layer_freq = 1 }
#define LLAMA(n, L, h, a, k, f, V, seq, src) \
	{ .name = n, .source = src, .layers = L, .hidden = h, .heads = a, \
	  .kv_heads = k, .head_dim = (h) / (a), .ffn = f, \
	  .ffn_kind = PIPETTE_FFN_SWIGLU, .norm = PIPETTE_NORM_RMSNORM, \
	  .vocab = V, .max_seq = seq, .moe_layer_freq = 1 }

static const struct pipette_model presets[] = {
	/* GPT-3 175B: Brown et al. 2020 Table 2.1 (96 layers, d_model 12288,
	 * 96 heads, ctx 2048); GPT-2 BPE vocabulary padded to 51200 as in
	 * Megatron's runs (Narayanan et al. SC'21, examples/sc21/CONFIG.sh). */
	GPT("gpt3-175b", 96, 12288, 96, 51200, 2048,
	    "Brown et al. 2020 Table 2.1; Megatron examples/gpt3"),
	/* Korthikanti et al. (MLSys'23) Table 3 models (Calculon's models directory). */
	GPT("gpt-22b", 48, 6144, 64, 51200, 2048, "Korthikanti et al. 2022 Table 3"),
	GPT("gpt-530b", 105, 20480, 128, 51200, 2048, "Korthikanti et al. 2022 Table 3"),
	GPT("gpt-1t", 128, 25600, 160, 51200, 2048, "Korthikanti et al. 2022 Table 3"),
	LLAMA("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096,
	      "meta-llama/Llama-2-7b-hf config.json"),
	LLAMA("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096,
	      "meta-llama/Llama-2-13b-hf config.json"),
	LLAMA("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096,
	      "meta-llama/Llama-2-70b-hf config.json"),
	LLAMA("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192,
	      "meta-llama/Meta-Llama-3-8B config.json"),
	LLAMA("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192,
	      "meta-llama/Meta-Llama-3-70B config.json"),
	/* 8 KV heads (and head_dim 128) as in the config.json that
	 * transformers 4.45 wrote for meta-llama/Meta-Llama-3.1-405B; copies
	 * written by transformers 4.42-4.44 say 16. */
	LLAMA("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 131072,
	      "meta-llama/Meta-Llama-3.1-405B config.json"),
	LLAMA("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 32768,
	      "mistralai/Mistral-7B-v0.1 config.json"),
	{ .name = "mixtral-8x7b", .source = "mistralai/Mixtral-8x7B-v0.1 config.json",
	  .layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8, .head_dim = 128,
	  .ffn = 14336, .ffn_kind = PIPETTE_FFN_SWIGLU, .norm = PIPETTE_NORM_RMSNORM,
	  .vocab = 32000, .max_seq = 32768, .experts = 8, .topk = 2,
	  .expert_ffn = 14336, .moe_layer_freq = 1 },
	{ .name = "qwen2.5-72b", .source = "Qwen/Qwen2.5-72B config.json",
	  .layers = 80, .hidden = 8192, .heads = 64, .kv_heads = 8, .head_dim = 128,
	  .ffn = 29568, .ffn_kind = PIPETTE_FFN_SWIGLU, .norm = PIPETTE_NORM_RMSNORM,
	  .vocab = 152064, .max_seq = 32768, .moe_layer_freq = 1 },
	/* Nemotron-4: squared-ReLU two-matrix MLP, GQA with 8 KV heads, a
	 * 256000-token vocabulary, untied embeddings, no biases, 4096-token
	 * context: Parmar et al., "Nemotron-4 15B Technical Report", arXiv
	 * 2402.16819, §2 and Table 1 (32 layers, hidden 6144, 48 heads, ffn
	 * 4 x hidden); NVIDIA, "Nemotron-4 340B Technical Report", arXiv
	 * 2406.11704, §2.1 and Table 1 (96 layers, hidden 18432, 96 heads,
	 * ffn 73728). */
	{ .name = "nemotron4-15b", .source = "arXiv 2402.16819 Table 1",
	  .layers = 32, .hidden = 6144, .heads = 48, .kv_heads = 8, .head_dim = 128,
	  .ffn = 24576, .ffn_kind = PIPETTE_FFN_RELU2, .norm = PIPETTE_NORM_LAYERNORM,
	  .vocab = 256000, .max_seq = 4096, .moe_layer_freq = 1 },
	{ .name = "nemotron4-340b", .source = "arXiv 2406.11704 Table 1",
	  .layers = 96, .hidden = 18432, .heads = 96, .kv_heads = 8, .head_dim = 192,
	  .ffn = 73728, .ffn_kind = PIPETTE_FFN_RELU2, .norm = PIPETTE_NORM_LAYERNORM,
	  .vocab = 256000, .max_seq = 4096, .moe_layer_freq = 1 },
	/* DeepSeek-V3: github.com/deepseek-ai/DeepSeek-V3 @9b4e978,
	 * inference/configs/config_671B.json lines 2-20 (dimensions, experts,
	 * MLA ranks; lines 12-13: 8 expert groups, a token in at most 4 of
	 * them, which DeepSeek-V3 §2.1.2 deploys as nodes); the context (max_position_embeddings 163840) and the one
	 * MTP module (num_nextn_predict_layers 1) from the config.json of
	 * huggingface.co/deepseek-ai/DeepSeek-V3. */
	{ .name = "deepseek-v3", .source = "deepseek-ai/DeepSeek-V3 config_671B.json",
	  .layers = 61, .hidden = 7168, .heads = 128, .kv_heads = 128, .head_dim = 128,
	  .ffn = 18432, .ffn_kind = PIPETTE_FFN_SWIGLU, .norm = PIPETTE_NORM_RMSNORM,
	  .vocab = 129280, .max_seq = 163840, .experts = 256, .topk = 8,
	  .expert_ffn = 2048, .shared_experts = 1, .shared_ffn = 2048,
	  .first_dense_layers = 3, .moe_layer_freq = 1, .q_lora_rank = 1536,
	  .kv_lora_rank = 512, .qk_nope_dim = 128, .qk_rope_dim = 64,
	  .v_head_dim = 128, .mtp_layers = 1, .route_groups = 8, .route_group_topk = 4 },
};

size_t pipette_model_preset_count(void)
{
	return sizeof(presets) / sizeof(presets[0]);
}

const struct pipette_model *pipette_model_preset_at(size_t i)
{
	return i < pipette_model_preset_count() ? &presets[i] : NULL;
}

int pipette_model_preset(const char *name, struct pipette_model *out,
			 struct pipette_err *err)
{
	size_t i;

	for (i = 0; i < pipette_model_preset_count(); i++)
		if (!strcasecmp(name, presets[i].name)) {
			*out = presets[i];
			return 0;
		}
	return pipette_fail(err, "unknown model '%.64s' (see 'pipette models' for "
			    "presets, or give a path to a config.json)", name);
}

/* ---- Hugging Face config.json ------------------------------------------ */

/* Refuse anything larger: a config.json is a few kilobytes. */

struct hf_ctx {
	const char *path;
	struct json_object *root;
	struct pipette_err *err;
};

static struct json_object *hf_get(struct hf_ctx *c, const char *key)
{
	struct json_object *v = NULL;

	if (!json_object_object_get_ex(c->root, key, &v) ||
	    json_object_get_type(v) == json_type_null)
		return NULL;
	return v;
}

/* Integer key in [min, max]; `required` says whether absence is an error.
 * Returns 1 if found, 0 if absent (and not required), -1 on error. */
static int hf_int(struct hf_ctx *c, const char *key, long min, long max,
		  int required, long *out)
{
	struct json_object *v = hf_get(c, key);
	int64_t x;

	if (!v) {
		if (required)
			return pipette_fail(c->err, "%s: missing key '%s'", c->path, key);
		return 0;
	}
	if (json_object_get_type(v) != json_type_int)
		return pipette_fail(c->err, "%s: key '%s': expected an integer, got %s",
				    c->path, key,
				    json_type_to_name(json_object_get_type(v)));
	errno = 0;
	x = json_object_get_int64(v);
	if (errno || x < min || x > max)
		return pipette_fail(c->err, "%s: key '%s': %lld is out of range "
				    "[%ld, %ld]", c->path, key, (long long)x, min, max);
	*out = (long)x;
	return 1;
}

static int hf_bool(struct hf_ctx *c, const char *key, int dflt, int *out)
{
	struct json_object *v = hf_get(c, key);

	if (!v) {
		*out = dflt;
		return 0;
	}
	if (json_object_get_type(v) != json_type_boolean)
		return pipette_fail(c->err, "%s: key '%s': expected true or false",
				    c->path, key);
	*out = json_object_get_boolean(v);
	return 0;
}

static const char *hf_str(struct hf_ctx *c, const char *key)
{
	struct json_object *v = hf_get(c, key);

	if (!v || json_object_get_type(v) != json_type_string)
		return NULL;
	return json_object_get_string(v);
}

/* Bounds that reject absurd sizes, well beyond any published model. */
#define MAX_LAYERS 4096
#define MAX_HIDDEN (1L << 20)
#define MAX_HEADS 65536
#define MAX_FFN (1L << 24)
#define MAX_VOCAB (1L << 24)
#define MAX_SEQ (1L << 26)
#define MAX_EXPERTS 65536

static int hf_common(struct hf_ctx *c, const char *k_layers, const char *k_hidden,
		     const char *k_heads, const char *k_pos, struct pipette_model *m)
{
	long v;

	if (hf_int(c, k_layers, 1, MAX_LAYERS, 1, &v) < 0)
		return -1;
	m->layers = (int)v;
	if (hf_int(c, k_hidden, 1, MAX_HIDDEN, 1, &v) < 0)
		return -1;
	m->hidden = (int)v;
	if (hf_int(c, k_heads, 1, MAX_HEADS, 1, &v) < 0)
		return -1;
	m->heads = (int)v;
	m->kv_heads = m->heads;
	if (hf_int(c, "vocab_size", 1, MAX_VOCAB, 1, &m->vocab) < 0)
		return -1;
	m->max_seq = 0;
	if (k_pos && hf_int(c, k_pos, 1, MAX_SEQ, 0, &m->max_seq) < 0)
		return -1;
	if (m->hidden % m->heads)
		return pipette_fail(c->err, "%s: key '%s' (%d) is not a multiple of "
				    "'%s' (%d)", c->path, k_hidden, m->hidden,
				    k_heads, m->heads);
	m->head_dim = m->hidden / m->heads;
	m->moe_layer_freq = 1;
	return 0;
}

static int hf_llama_like(struct hf_ctx *c, struct pipette_model *m)
{
	long v;

	if (hf_common(c, "num_hidden_layers", "hidden_size", "num_attention_heads",
		      "max_position_embeddings", m))
		return -1;
	if (hf_int(c, "num_key_value_heads", 1, MAX_HEADS, 0, &v) < 0)
		return -1;
	if (hf_get(c, "num_key_value_heads"))
		m->kv_heads = (int)v;
	if (m->heads % m->kv_heads)
		return pipette_fail(c->err, "%s: key 'num_key_value_heads' (%d) does not "
				    "divide 'num_attention_heads' (%d)", c->path,
				    m->kv_heads, m->heads);
	if (hf_int(c, "head_dim", 1, MAX_HIDDEN, 0, &v) < 0)
		return -1;
	if (hf_get(c, "head_dim"))
		m->head_dim = (int)v;
	if (hf_int(c, "intermediate_size", 1, MAX_FFN, 1, &m->ffn) < 0)
		return -1;
	/* Every llama-like family here gates its MLP (gate, up, down). */
	m->ffn_kind = PIPETTE_FFN_SWIGLU;
	m->norm = PIPETTE_NORM_RMSNORM;
	return hf_bool(c, "tie_word_embeddings", 0, &m->tied_embeddings);
}

static int hf_mixtral(struct hf_ctx *c, struct pipette_model *m)
{
	long v;

	if (hf_llama_like(c, m))
		return -1;
	if (hf_int(c, "num_local_experts", 1, MAX_EXPERTS, 1, &v) < 0)
		return -1;
	m->experts = (int)v;
	if (hf_int(c, "num_experts_per_tok", 1, MAX_EXPERTS, 1, &v) < 0)
		return -1;
	m->topk = (int)v;
	m->expert_ffn = m->ffn;	/* Mixtral experts use intermediate_size */
	return 0;
}

static int hf_qwen2_moe(struct hf_ctx *c, struct pipette_model *m)
{
	long v;

	if (hf_llama_like(c, m))
		return -1;
	if (hf_int(c, "num_experts", 1, MAX_EXPERTS, 1, &v) < 0)
		return -1;
	m->experts = (int)v;
	if (hf_int(c, "num_experts_per_tok", 1, MAX_EXPERTS, 1, &v) < 0)
		return -1;
	m->topk = (int)v;
	if (hf_int(c, "moe_intermediate_size", 1, MAX_FFN, 1, &m->expert_ffn) < 0)
		return -1;
	if (hf_int(c, "shared_expert_intermediate_size", 0, MAX_FFN, 0,
		   &m->shared_ffn) < 0)
		return -1;
	m->shared_experts = m->shared_ffn > 0;
	if (hf_int(c, "decoder_sparse_step", 1, MAX_LAYERS, 0, &v) < 0)
		return -1;
	if (hf_get(c, "decoder_sparse_step"))
		m->moe_layer_freq = (int)v;
	return 0;
}

/* Qwen3-MoE: Qwen2-MoE's keys without shared experts; mlp_only_layers
 * (dense layers at any index) must be empty, the only form the MoE
 * layer pattern here can say.  Per-head q/k norms (2 x head_dim per
 * layer) are not counted. */
static int hf_qwen3_moe(struct hf_ctx *c, struct pipette_model *m)
{
	struct json_object *dense = hf_get(c, "mlp_only_layers");

	if (dense && (!json_object_is_type(dense, json_type_array) ||
		      json_object_array_length(dense) != 0)) {
		pipette_fail(c->err, "%s: key 'mlp_only_layers': only an empty list is supported",
			     c->path);
		return -1;
	}
	return hf_qwen2_moe(c, m);
}

static int hf_deepseek(struct hf_ctx *c, struct pipette_model *m)
{
	long v;

	if (hf_llama_like(c, m))
		return -1;
	if (hf_int(c, "n_routed_experts", 1, MAX_EXPERTS, 1, &v) < 0)
		return -1;
	m->experts = (int)v;
	if (hf_int(c, "num_experts_per_tok", 1, MAX_EXPERTS, 1, &v) < 0)
		return -1;
	m->topk = (int)v;
	if (hf_int(c, "moe_intermediate_size", 1, MAX_FFN, 1, &m->expert_ffn) < 0)
		return -1;
	v = 0;
	if (hf_int(c, "n_shared_experts", 0, MAX_EXPERTS, 0, &v) < 0)
		return -1;
	m->shared_experts = (int)v;
	m->shared_ffn = v * m->expert_ffn;
	v = 0;
	if (hf_int(c, "first_k_dense_replace", 0, MAX_LAYERS, 0, &v) < 0)
		return -1;
	m->first_dense_layers = (int)v;
	if (hf_int(c, "moe_layer_freq", 1, MAX_LAYERS, 0, &v) > 0)
		m->moe_layer_freq = (int)v;
	v = 0;
	if (hf_int(c, "q_lora_rank", 1, MAX_HIDDEN, 0, &v) < 0)
		return -1;
	m->q_lora_rank = (int)v;
	if (hf_int(c, "kv_lora_rank", 1, MAX_HIDDEN, 1, &v) < 0)
		return -1;
	m->kv_lora_rank = (int)v;
	if (hf_int(c, "qk_nope_head_dim", 1, MAX_HIDDEN, 1, &v) < 0)
		return -1;
	m->qk_nope_dim = (int)v;
	if (hf_int(c, "qk_rope_head_dim", 0, MAX_HIDDEN, 1, &v) < 0)
		return -1;
	m->qk_rope_dim = (int)v;
	if (hf_int(c, "v_head_dim", 1, MAX_HIDDEN, 1, &v) < 0)
		return -1;
	m->v_head_dim = (int)v;
	v = 0;
	if (hf_int(c, "num_nextn_predict_layers", 0, 64, 0, &v) < 0)
		return -1;
	m->mtp_layers = (int)v;
	m->head_dim = m->qk_nope_dim + m->qk_rope_dim;
	v = 0;
	if (hf_int(c, "n_group", 1, MAX_EXPERTS, 0, &v) < 0)
		return -1;
	m->route_groups = (int)v;
	v = 0;
	if (hf_int(c, "topk_group", 1, MAX_EXPERTS, 0, &v) < 0)
		return -1;
	m->route_group_topk = (int)v;
	if (m->route_groups && (m->experts % m->route_groups ||
				m->route_group_topk > m->route_groups)) {
		pipette_fail(c->err, "%s: n_group %d and topk_group %d: the %d experts must split "
			     "into n_group groups of which topk_group are used", c->path,
			     m->route_groups, m->route_group_topk, m->experts);
		return -1;
	}
	return 0;
}

static int hf_gpt2(struct hf_ctx *c, struct pipette_model *m)
{
	long v;

	if (hf_common(c, "n_layer", "n_embd", "n_head", "n_positions", m))
		return -1;
	m->ffn = 4L * m->hidden;
	if (hf_int(c, "n_inner", 1, MAX_FFN, 0, &v) > 0)
		m->ffn = v;
	m->ffn_kind = PIPETTE_FFN_GELU;
	m->norm = PIPETTE_NORM_LAYERNORM;
	m->bias = 1;
	return hf_bool(c, "tie_word_embeddings", 1, &m->tied_embeddings);
}

static int hf_neox(struct hf_ctx *c, struct pipette_model *m)
{
	if (hf_common(c, "num_hidden_layers", "hidden_size", "num_attention_heads",
		      "max_position_embeddings", m))
		return -1;
	if (hf_int(c, "intermediate_size", 1, MAX_FFN, 1, &m->ffn) < 0)
		return -1;
	m->ffn_kind = PIPETTE_FFN_GELU;
	m->norm = PIPETTE_NORM_LAYERNORM;
	m->bias = 1;
	return hf_bool(c, "tie_word_embeddings", 0, &m->tied_embeddings);
}

/* Hugging Face "nemotron" (transformers models/nemotron/
 * configuration_nemotron.py): llama-like keys, a squared-ReLU MLP
 * (hidden_act "relu2") of two matrices, LayerNorm, untied by default. */
static int hf_nemotron(struct hf_ctx *c, struct pipette_model *m)
{
	const char *act;

	if (hf_llama_like(c, m))
		return -1;
	act = hf_str(c, "hidden_act");
	if (act && strcmp(act, "relu2"))
		return pipette_fail(c->err, "%s: key 'hidden_act': '%.32s' is not supported for "
				    "nemotron (relu2)", c->path, act);
	m->ffn_kind = PIPETTE_FFN_RELU2;
	m->norm = PIPETTE_NORM_LAYERNORM;
	return 0;
}

static const struct {
	const char *type;
	int (*load)(struct hf_ctx *, struct pipette_model *);
} hf_types[] = {
	{ "nemotron", hf_nemotron },
	{ "llama", hf_llama_like },
	{ "mistral", hf_llama_like },
	{ "qwen2", hf_llama_like },
	{ "mixtral", hf_mixtral },
	{ "qwen2_moe", hf_qwen2_moe },
	{ "qwen3_moe", hf_qwen3_moe },
	{ "deepseek_v3", hf_deepseek },
	{ "deepseek_v2", hf_deepseek },
	{ "gpt2", hf_gpt2 },
	{ "gpt_neox", hf_neox },
};

int pipette_model_load_hf(const char *path, struct pipette_model *out,
			  struct pipette_err *err)
{
	struct hf_ctx c = { .path = path, .err = err };
	struct pipette_model m;
	const char *type;
	size_t i;
	int rc = -1;

	memset(&m, 0, sizeof(m));
	c.root = pipette_json_read(path, "model config", PIPETTE_MODEL_MAX_FILE_BYTES,
				   JSON_TOKENER_DEFAULT_DEPTH, m.source_sha256, err);
	if (!c.root)
		return -1;
	m.has_source_sha256 = 1;
	type = hf_str(&c, "model_type");
	if (!type) {
		pipette_fail(err, "%s: missing key 'model_type' (a string such as "
			     "\"llama\")", path);
		goto out;
	}
	for (i = 0; i < sizeof(hf_types) / sizeof(hf_types[0]); i++)
		if (!strcmp(type, hf_types[i].type))
			break;
	if (i == sizeof(hf_types) / sizeof(hf_types[0])) {
		pipette_fail(err, "%s: key 'model_type': '%.48s' is not supported "
			     "(llama, mistral, qwen2, nemotron, mixtral, qwen2_moe, deepseek_v3, "
			     "deepseek_v2, gpt2, gpt_neox)", path, type);
		goto out;
	}
	if (hf_types[i].load(&c, &m))
		goto out;
	snprintf(m.name, sizeof(m.name), "%s", type);
	snprintf(m.source, sizeof(m.source), "%s", path);
	if (pipette_model_validate(&m, err)) {
		pipette_fail_prefix(err, "%s: ", path);
		goto out;
	}
	*out = m;
	rc = 0;
out:
	json_object_put(c.root);
	return rc;
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether a site directory holds an entry of that name that is not a
 * directory: the reader then says what is wrong with it (a FIFO, a
 * device, too large), rather than the name falling through to "unknown
 * model". */
static int is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

int pipette_model_config_path(const char *name_or_path, const char *site_dir,
			       char *path, size_t size, struct pipette_err *err)
{
	size_t i;

	if (size)
		path[0] = '\0';
	if (!name_or_path || !*name_or_path)
		return pipette_fail(err, "model: empty name");
	if (size < PATH_MAX)
		return pipette_fail(err, "model: %zu bytes are too few for a path", size);
	if (strlen(name_or_path) >= PATH_MAX - 16)
		return pipette_fail(err, "model: name or path too long");
	if (strchr(name_or_path, '/') || strstr(name_or_path, ".json")) {
		if (is_dir(name_or_path))
			snprintf(path, size, "%s/config.json", name_or_path);
		else
			snprintf(path, size, "%s", name_or_path);
		return 1;
	}
	for (i = 0; i < pipette_model_preset_count(); i++)
		if (!strcasecmp(name_or_path, presets[i].name))
			return 0;
	if (site_dir && *site_dir && strlen(site_dir) < PATH_MAX - 300) {
		snprintf(path, size, "%s/%s.json", site_dir, name_or_path);
		if (is_file(path))
			return 2;
		snprintf(path, size, "%s/%s/config.json", site_dir, name_or_path);
		if (is_file(path))
			return 2;
		path[0] = '\0';
	}
	return 0;
}

int pipette_model_load(const char *name_or_path, const char *site_dir,
		       struct pipette_model *out, struct pipette_err *err)
{
	char path[PATH_MAX];
	int r = pipette_model_config_path(name_or_path, site_dir, path, sizeof(path), err);

	if (r < 0)
		return -1;
	if (r)
		return pipette_model_load_hf(path, out, err);
	return pipette_model_preset(name_or_path, out, err);
}

int pipette_model_validate(const struct pipette_model *m, struct pipette_err *err)
{
	if (m->layers < 1 || m->layers > MAX_LAYERS)
		return pipette_fail(err, "layers %d out of range [1, %d]", m->layers,
				    MAX_LAYERS);
	if (m->hidden < 1 || m->hidden > MAX_HIDDEN)
		return pipette_fail(err, "hidden size %d out of range", m->hidden);
	if (m->heads < 1 || m->kv_heads < 1 || m->heads % m->kv_heads)
		return pipette_fail(err, "heads %d / KV heads %d: KV heads must divide "
				    "heads", m->heads, m->kv_heads);
	if (m->head_dim < 1)
		return pipette_fail(err, "head dimension must be >= 1");
	if (m->ffn < 1 && !m->experts)
		return pipette_fail(err, "FFN size must be >= 1");
	if (m->vocab < 1)
		return pipette_fail(err, "vocabulary size must be >= 1");
	if (m->experts) {
		if (m->topk < 1 || m->topk > m->experts)
			return pipette_fail(err, "experts per token %d must be in [1, %d]",
					    m->topk, m->experts);
		if (m->expert_ffn < 1)
			return pipette_fail(err, "expert FFN size must be >= 1");
		if (m->first_dense_layers >= m->layers)
			return pipette_fail(err, "all %d layers are dense but experts "
					    "are declared", m->layers);
		if (m->moe_layer_freq < 1)
			return pipette_fail(err, "MoE layer frequency must be >= 1");
	}
	return 0;
}

int pipette_model_is_moe_layer(const struct pipette_model *m, int layer)
{
	if (!m->experts || layer < m->first_dense_layers)
		return 0;
	return (layer - m->first_dense_layers) % (m->moe_layer_freq > 0 ? m->moe_layer_freq : 1) == 0;
}

int pipette_model_moe_layer_count(const struct pipette_model *m)
{
	int l, n = 0;

	for (l = 0; l < m->layers; l++)
		n += pipette_model_is_moe_layer(m, l);
	return n;
}

double pipette_model_q_width(const struct pipette_model *m)
{
	if (m->kv_lora_rank)
		return (double)m->heads * (m->qk_nope_dim + m->qk_rope_dim);
	return (double)m->heads * m->head_dim;
}

double pipette_model_kv_width(const struct pipette_model *m)
{
	if (m->kv_lora_rank)	/* per-head K after decompression */
		return (double)m->heads * (m->qk_nope_dim + m->qk_rope_dim);
	return (double)m->kv_heads * m->head_dim;
}

double pipette_model_v_width(const struct pipette_model *m)
{
	if (m->kv_lora_rank)
		return (double)m->heads * m->v_head_dim;
	return pipette_model_kv_width(m);
}

static double ffn_params(const struct pipette_model *m, double ffn)
{
	double mats = m->ffn_kind == PIPETTE_FFN_SWIGLU ? 3.0 : 2.0;
	double bias = m->bias ? (m->ffn_kind == PIPETTE_FFN_SWIGLU ? 2 * ffn : ffn) + m->hidden : 0;

	return mats * m->hidden * ffn + bias;
}

void pipette_model_layer_params(const struct pipette_model *m, int layer,
				struct pipette_layer_params *out)
{
	double h = m->hidden;
	double qw = pipette_model_q_width(m), kvw = pipette_model_kv_width(m);
	double norm = m->norm == PIPETTE_NORM_LAYERNORM ? 2 * h : h;

	if (m->kv_lora_rank) {
		/* MLA (DeepSeek-V2 §2.1): low-rank Q and joint KV compression. */
		double q = m->q_lora_rank
			? h * m->q_lora_rank + m->q_lora_rank + (double)m->q_lora_rank * qw
			: h * qw;
		double kv = h * (m->kv_lora_rank + m->qk_rope_dim) + m->kv_lora_rank +
			    (double)m->kv_lora_rank * m->heads *
				    (m->qk_nope_dim + m->v_head_dim);
		double o = (double)m->heads * m->v_head_dim * h;

		out->attn = q + kv + o;
	} else {
		/* Q and O: h x (a d_h); K and V: h x (k d_h) (Megatron
		 * theoretical_memory_usage.py self_attn term). */
		out->attn = 2 * h * qw + 2 * h * kvw;
		if (m->bias)
			out->attn += qw + 2 * kvw + h;
	}
	out->norms = 2 * norm;
	out->experts = 0;
	if (pipette_model_is_moe_layer(m, layer)) {
		out->mlp = h * m->experts;	/* router */
		if (m->shared_ffn)
			out->mlp += ffn_params(m, (double)m->shared_ffn);
		out->experts = m->experts * ffn_params(m, (double)m->expert_ffn);
	} else {
		out->mlp = ffn_params(m, (double)m->ffn);
	}
}

double pipette_model_embedding_params(const struct pipette_model *m)
{
	return (double)m->hidden * m->vocab;
}

static double params_sum(const struct pipette_model *m, int active)
{
	struct pipette_layer_params lp;
	double total = 0, h = m->hidden;
	int l;

	for (l = 0; l < m->layers; l++) {
		pipette_model_layer_params(m, l, &lp);
		total += lp.attn + lp.mlp + lp.norms;
		if (lp.experts)
			total += active ? lp.experts * m->topk / m->experts : lp.experts;
	}
	total += pipette_model_embedding_params(m) * (m->tied_embeddings ? 1 : 2);
	total += m->norm == PIPETTE_NORM_LAYERNORM ? 2 * h : h;
	return total;
}

double pipette_model_params_total(const struct pipette_model *m)
{
	return params_sum(m, 0);
}

double pipette_model_params_mtp(const struct pipette_model *m, int with_copies)
{
	struct pipette_layer_params lp;
	double h = m->hidden, one;

	if (!m->mtp_layers)
		return 0;
	pipette_model_layer_params(m, m->layers - 1, &lp);
	/* DeepSeek-V3 §2.2: a layer, the 2h -> h projection M_k, and the
	 * two norms of its inputs plus the head's norm */
	one = lp.attn + lp.mlp + lp.norms + lp.experts + 2.0 * h * h + 3.0 * h;
	if (with_copies)
		one += 2.0 * pipette_model_embedding_params(m);
	return m->mtp_layers * one;
}

double pipette_model_params_active(const struct pipette_model *m)
{
	return params_sum(m, 1);
}
