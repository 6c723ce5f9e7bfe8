/* The small MoE model the routing harness and its regression replay share:
 * 4 layers (the first dense), 4 experts, top-2. */
#ifndef PIPETTE_FUZZ_SMALL_MOE_H
#define PIPETTE_FUZZ_SMALL_MOE_H

#include <stdio.h>
#include <string.h>

#include "inputs/model.h"

static inline void small_moe(struct pipette_model *m)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "fuzz-moe");
	m->layers = 4;
	m->hidden = 256;
	m->heads = 4;
	m->kv_heads = 4;
	m->head_dim = 64;
	m->ffn = 1024;
	m->ffn_kind = PIPETTE_FFN_SWIGLU;
	m->norm = PIPETTE_NORM_RMSNORM;
	m->vocab = 1000;
	m->max_seq = 4096;
	m->experts = 4;
	m->topk = 2;
	m->expert_ffn = 512;
	m->first_dense_layers = 1;
	m->moe_layer_freq = 1;
}

#endif
