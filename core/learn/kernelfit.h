/* pipette: fit a GPU type's kernel rates (inputs/kernels.h) from kernels
 * timed on it.
 *
 * The table is the CSV that tests/data/kernels/kernels.py writes (one row
 * per kernel: gpu, kind, model, tp, tokens_or_seq, op, pass, dtype, m, n,
 * k, flops, seconds, tflops).  Each GEMM dtype is fitted by least squares
 * on relative error (weights 1/t^2: a 20 us kernel counts as much as a
 * 20 ms one) to t = t0 + 2mnk/rate + m*n*t_out, linear in its three
 * parameters; attention forward to t0 + flops/rate + heads*queries*t_row
 * (the row's m is its heads, tokens its sequence), and the backward alone
 * (the fwd+bwd row less its forward row) the same way. */
#ifndef PIPETTE_KERNELFIT_H
#define PIPETTE_KERNELFIT_H

#include <stddef.h>

#include "inputs/error.h"
#include "inputs/kernels.h"

enum pipette_krow_kind { PIPETTE_KROW_GEMM, PIPETTE_KROW_ATTN_FWD, PIPETTE_KROW_ATTN_FWDBWD };

struct pipette_krow {
	enum pipette_krow_kind kind;
	enum pipette_gemm_dtype dtype;	/* GEMM rows */
	char model[16];			/* the row's model label (leave-one-out groups) */
	int tp;
	long tokens;			/* tokens (GEMM) or sequence (attention) */
	double m, n, k, flops, seconds;
};

struct pipette_ktable {
	struct pipette_krow *rows;
	size_t n;
};

/* Read a kernels CSV; errors name the file, the line and the column. */
int pipette_ktable_read(const char *path, struct pipette_ktable *t, struct pipette_err *err);
void pipette_ktable_free(struct pipette_ktable *t);

/* Fit every dtype and the attention kernel from the rows whose model label
 * is not `leave_out` (NULL: all rows).  A dtype with fewer than 3 rows is
 * left unmeasured (tflops 0); no attention rows leave attn_* zero. */
int pipette_kernelfit(const struct pipette_ktable *t, const char *leave_out,
		      struct pipette_kernels *out, struct pipette_err *err);

/* Predicted seconds of one row under a fit (fwd+bwd attention rows: the
 * two passes). */
double pipette_krow_predict(const struct pipette_kernels *k, const struct pipette_krow *r);

/* The median and 95th percentile of |predicted / measured - 1| over the
 * rows of one GEMM dtype (kind GEMM) or the attention rows (kind ATTN_*:
 * both passes), only the rows of model `only` when not NULL; the number of
 * rows compared, or 0. */
size_t pipette_kernelfit_errors(const struct pipette_ktable *t, const struct pipette_kernels *k,
				enum pipette_krow_kind kind, enum pipette_gemm_dtype dt,
				const char *only, double *median, double *p95);

#endif
