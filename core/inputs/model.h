/* pipette: the model (architecture) description.
 *
 * Everything the memory and time models need about a transformer, loaded
 * from a built-in preset or a Hugging Face config.json.  Plain data: the
 * estimators are pure functions of (model, hardware, execution). */
#ifndef PIPETTE_MODEL_H
#define PIPETTE_MODEL_H

#include <stddef.h>

#include "inputs/error.h"
#include "inputs/readfile.h"

enum pipette_ffn_kind {
	PIPETTE_FFN_GELU,	/* two matrices, h -> ffn -> h (GPT-2/3, NeoX) */
	PIPETTE_FFN_SWIGLU,	/* three matrices: gate, up, down (Llama family) */
	PIPETTE_FFN_RELU2,	/* squared ReLU, two matrices h -> ffn -> h (Nemotron-4) */
};

enum pipette_norm_kind {
	PIPETTE_NORM_LAYERNORM,	/* weight + bias: 2h parameters */
	PIPETTE_NORM_RMSNORM,	/* weight only: h parameters */
};

struct pipette_model {
	char name[64];
	char source[160];	/* where the dimensions come from */
	int layers;
	int hidden;
	int heads;
	int kv_heads;		/* == heads without GQA */
	int head_dim;		/* usually hidden / heads */
	long ffn;		/* dense FFN intermediate size */
	enum pipette_ffn_kind ffn_kind;
	enum pipette_norm_kind norm;
	int bias;		/* linear layers carry biases */
	long vocab;
	int tied_embeddings;
	long max_seq;

	/* Mixture of experts (experts == 0: dense). */
	int experts;		/* routed experts per MoE layer */
	int topk;		/* experts per token */
	long expert_ffn;	/* FFN size of one routed expert */
	int shared_experts;	/* always-on (shared) experts */
	long shared_ffn;	/* their total FFN size (0 = none) */
	int first_dense_layers;	/* leading layers that stay dense */
	int moe_layer_freq;	/* every k-th layer after those is MoE (1 = all) */
	/* Node-limited (group-limited) routing: the experts form route_groups
	 * groups and a token may use at most route_group_topk of them
	 * (DeepSeek-V3's n_group and topk_group; 0 = unlimited). */
	int route_groups;
	int route_group_topk;

	/* Multi-head latent attention (DeepSeek-V2/V3); 0 = standard MHA/GQA. */
	int q_lora_rank;
	int kv_lora_rank;
	int qk_nope_dim;
	int qk_rope_dim;
	int v_head_dim;
	int mtp_layers;		/* multi-token-prediction modules */

	/* SHA-256 of the config.json the model was loaded from (readfile.h);
	 * presets leave has_source_sha256 = 0. */
	unsigned char source_sha256[PIPETTE_SHA256_LEN];
	int has_source_sha256;
};

/* Parameter counts of one transformer layer. */
struct pipette_layer_params {
	double attn;		/* attention projections (sharded by TP) */
	double mlp;		/* dense MLP, or shared experts + router in MoE layers */
	double experts;		/* all routed experts of the layer (sharded by EP) */
	double norms;		/* norms: replicated across TP */
};

size_t pipette_model_preset_count(void);
const struct pipette_model *pipette_model_preset_at(size_t i);
/* Look up a preset by name (case-insensitive). */
int pipette_model_preset(const char *name, struct pipette_model *out,
			 struct pipette_err *err);
/* Load a Hugging Face config.json; errors name the file and the key. */
int pipette_model_load_hf(const char *path, struct pipette_model *out,
			  struct pipette_err *err);
/* NAME (preset), PATH (a config.json or a directory holding one), or a
 * NAME found as SITE_DIR/NAME.json or SITE_DIR/NAME/config.json. */
int pipette_model_load(const char *name_or_path, const char *site_dir,
		       struct pipette_model *out, struct pipette_err *err);
/* Largest config.json read (Hugging Face configs are a few KiB). */
#define PIPETTE_MODEL_MAX_FILE_BYTES (4 << 20)
/* The config.json pipette_model_load would read for the same arguments,
 * its path in path[size] (size >= PATH_MAX): 1 when name_or_path names
 * it, 2 when it was found in site_dir; 0 when NAME would be looked up
 * among the presets (path empty), -1 on an empty or too long name.  For
 * callers that check the file before the work that loads it. */
int pipette_model_config_path(const char *name_or_path, const char *site_dir,
			      char *path, size_t size, struct pipette_err *err);
/* Check that the dimensions are positive, consistent and not absurd. */
int pipette_model_validate(const struct pipette_model *m, struct pipette_err *err);

int pipette_model_is_moe_layer(const struct pipette_model *m, int layer);
int pipette_model_moe_layer_count(const struct pipette_model *m);
void pipette_model_layer_params(const struct pipette_model *m, int layer,
				struct pipette_layer_params *out);
/* Query and key/value projection widths (a*d_h and k*d_h; MLA-aware). */
double pipette_model_q_width(const struct pipette_model *m);
double pipette_model_kv_width(const struct pipette_model *m);
/* Value width a*d_v (MLA: heads x v_head_dim; otherwise the K width). */
double pipette_model_v_width(const struct pipette_model *m);
double pipette_model_embedding_params(const struct pipette_model *m);
/* Total parameters (embeddings, output layer if untied, final norm). */
double pipette_model_params_total(const struct pipette_model *m);
/* The multi-token-prediction modules' parameters (0 without); with_copies
 * adds the embedding and output head each module shares with the main
 * model, which a checkpoint stores again (DeepSeek-V3's 685B). */
double pipette_model_params_mtp(const struct pipette_model *m, int with_copies);
/* Parameters a token touches: routed experts count top-k, not all. */
double pipette_model_params_active(const struct pipette_model *m);

#endif
