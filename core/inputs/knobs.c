#include "inputs/knobs.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const attention_names[] = { "flash", "unfused" };
/* Per recipe, from the formats of Transformer Engine's recipes
 * (NVIDIA/TransformerEngine @d0067d0d transformer_engine/common/recipe/
 * __init__.py:173-496) and the tensors that hold them:
 *   stored  FP8 1 byte; blockwise adds an fp32 scale per 128 values
 *           (4/128), MXFP8 an E8M0 byte per 32 (1/32); NVFP4 half a byte
 *           and an E4M3 byte per 16 (1/16);
 *   weight copies: a per-tensor FP8 weight keeps its data and, where FP8
 *           GEMMs take only the TN layout (Hopper), a transpose
 *           (pytorch/tensor/float8_tensor.py:418-428, utils.py:658-663);
 *           block-scaled formats keep a row-wise and a column-wise copy,
 *           each quantized from the high-precision tensor (the recipes'
 *           docstrings);
 *   saved   what a linear layer keeps for its weight gradient: its input,
 *           quantized (one copy);
 *   cast    the quantization's HBM traffic per bf16 element: read 2 bytes,
 *           write the copies; per-tensor current scaling reads the tensor
 *           once more for its amax first, delayed scaling takes the scale
 *           from the history (recipe/__init__.py:173, :286).
 * torchao's rowwise FP8 (fp8-rowwise) scales each orientation on its own:
 * two passes, each reading the tensor and writing one FP8 copy. */
#define BS (4.0 / 128)	/* blockwise fp32 scale per 128 */
#define MX (1.0 / 32)	/* MXFP8's E8M0 per 32 */
#define NV (1.0 / 16)	/* NVFP4's E4M3 per 16 */
static const struct pipette_precision_facts facts[PIPETTE_PREC_COUNT] = {
	[PIPETTE_PREC_BF16] = { PIPETTE_GEMM_BF16, 2, 2, 0, 0, 0, 0, 0 },
	[PIPETTE_PREC_FP8_DELAYED] = { PIPETTE_GEMM_FP8_TENSOR, 1, 1, 2, 1, 2 + 2, 2 + 1, 0 },
	[PIPETTE_PREC_FP8_CURRENT] = { PIPETTE_GEMM_FP8_TENSOR, 1, 1, 2, 1, 2 + 2 + 2, 2 + 2 + 1, 1 },
	[PIPETTE_PREC_FP8_ROWWISE] = { PIPETTE_GEMM_FP8_ROW, 1, 1, 0, 0, 2 * (2 + 1), 2 * (2 + 1), 0 },
	[PIPETTE_PREC_FP8_BLOCKWISE] = { PIPETTE_GEMM_FP8_ROW, 1 + BS, 1 + BS, 2 * (1 + BS),
					 2 * (1 + BS), 2 + 2 * (1 + BS), 2 + 2 * (1 + BS), 0 },
	[PIPETTE_PREC_MXFP8] = { PIPETTE_GEMM_MXFP8, 1 + MX, 1 + MX, 2 * (1 + MX), 2 * (1 + MX),
				 2 + 2 * (1 + MX), 2 + 2 * (1 + MX), 0 },
	[PIPETTE_PREC_NVFP4] = { PIPETTE_GEMM_NVFP4, 0.5 + NV, 0.5 + NV, 2 * (0.5 + NV),
				 2 * (0.5 + NV), 2 + 2 * (0.5 + NV), 2 + 2 * (0.5 + NV), 0 },
};

const struct pipette_precision_facts *pipette_precision_facts(enum pipette_precision p)
{
	return &facts[(unsigned)p < PIPETTE_PREC_COUNT ? p : PIPETTE_PREC_BF16];
}

static const char *const gemm_dtype_names[PIPETTE_GEMM_DTYPE_COUNT] = {
	"bf16", "fp8-tensorwise", "fp8-rowwise", "mxfp8", "nvfp4",
};

const char *pipette_gemm_dtype_name(enum pipette_gemm_dtype d)
{
	return (unsigned)d < PIPETTE_GEMM_DTYPE_COUNT ? gemm_dtype_names[d] : "?";
}

static const char *const precision_names[PIPETTE_PREC_COUNT] = {
	"bf16", "fp8-delayed", "fp8-current", "fp8-rowwise", "fp8-blockwise", "mxfp8", "nvfp4",
};
static const char *const schedule_names[PIPETTE_SCHED_COUNT] = {
	"1f1b", "interleaved", "zb-h1", "v-min", "v-half", "v-zb",
	"gpipe", "interleaved-zb", "zbv", "dualpipe-v", "dualpipe",
};

int pipette_name_index(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcasecmp(s, names[i]))
			return i;
	return -1;
}

int pipette_schedule_splits_w(enum pipette_schedule_kind k)
{
	return k != PIPETTE_SCHED_1F1B && k != PIPETTE_SCHED_INTERLEAVED &&
	       k != PIPETTE_SCHED_GPIPE;
}

const char *pipette_attention_name(enum pipette_attention a)
{
	return (unsigned)a < 2 ? attention_names[a] : "?";
}

int pipette_attention_parse(const char *s, enum pipette_attention *out,
			    struct pipette_err *err)
{
	int i = pipette_name_index(s, attention_names, 2);

	if (i < 0)
		return pipette_fail(err, "attention '%.32s': expected flash or unfused", s);
	*out = (enum pipette_attention)i;
	return 0;
}

const char *pipette_schedule_name(enum pipette_schedule_kind k)
{
	return (unsigned)k < PIPETTE_SCHED_COUNT ? schedule_names[k] : "?";
}

int pipette_schedule_parse(const char *s, enum pipette_schedule_kind *out,
			   struct pipette_err *err)
{
	int i = pipette_name_index(s, schedule_names, PIPETTE_SCHED_COUNT);

	if (i < 0)
		return pipette_fail(err, "schedule '%.32s': expected 1f1b, interleaved, "
				    "zb-h1, v-min, v-half, v-zb, gpipe, interleaved-zb, zbv or "
				    "dualpipe-v", s);
	*out = (enum pipette_schedule_kind)i;
	return 0;
}

const char *pipette_precision_name(enum pipette_precision p)
{
	return (unsigned)p < PIPETTE_PREC_COUNT ? precision_names[p] : "?";
}

int pipette_precision_parse(const char *s, enum pipette_precision *out, struct pipette_err *err)
{
	int i = pipette_name_index(s, precision_names, PIPETTE_PREC_COUNT);

	if (i < 0)
		return pipette_fail(err, "precision '%.32s': expected bf16, fp8-delayed, fp8-current, "
				    "fp8-rowwise, fp8-blockwise, mxfp8 or nvfp4", s);
	*out = (enum pipette_precision)i;
	return 0;
}

int pipette_precision_set_parse(const char *s, unsigned *set, struct pipette_err *err)
{
	char item[32];
	const char *p = s;

	*set = 0;
	for (;;) {
		size_t n = strcspn(p, ",");
		enum pipette_precision one;

		if (n == 0 || n >= sizeof(item))
			return pipette_fail(err, "precision list '%.48s': expected names separated "
					    "by commas", s);
		memcpy(item, p, n);
		item[n] = 0;
		if (pipette_precision_parse(item, &one, err))
			return -1;
		*set |= PIPETTE_PREC_BIT(one);
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

void pipette_precision_set_text(unsigned set, char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = 0;
	for (int p = 0; p < PIPETTE_PREC_COUNT && used < len; p++)
		if (set & PIPETTE_PREC_BIT(p)) {
			int w = snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
					 precision_names[p]);

			if (w < 0)
				return;
			used += (size_t)w;
		}
}
