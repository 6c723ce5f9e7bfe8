#include "learn/kernelfit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inputs/knobs.h"
#include "inputs/readfile.h"
#include "estimate/kernels.h"

/* A table of a few thousand rows is ~300 KB; the bound stops a wrong file. */
#define KTABLE_MAX (64 << 20)
#define KTABLE_COLS 14

/* Split one CSV line in place (no quoted fields in this format). */
static int split(char *line, char **col, int max)
{
	int n = 0;

	col[n++] = line;
	for (char *p = line; *p; p++)
		if (*p == ',') {
			*p = 0;
			if (n == max)
				return max + 1;
			col[n++] = p + 1;
		}
	return n;
}

static int parse_num(const char *path, long line, const char *name, const char *s,
		     double *out, struct pipette_err *err)
{
	if (pipette_parse_double(s, 0, 1e30, out, name, err))
		return pipette_fail_prefix(err, "%s:%ld: column ", path, line);
	return 0;
}

static int parse_row(const char *path, long line, char **c, struct pipette_krow *r,
		     struct pipette_err *err)
{
	static const char *const num[] = { "m", "n", "k", "flops", "seconds" };
	double *dst[] = { &r->m, &r->n, &r->k, &r->flops, &r->seconds };
	double v;
	int i;

	memset(r, 0, sizeof(*r));
	if (!strcmp(c[1], "gemm")) {
		r->kind = PIPETTE_KROW_GEMM;
		for (i = 0; i < PIPETTE_GEMM_DTYPE_COUNT && strcmp(c[7], pipette_gemm_dtype_name((enum pipette_gemm_dtype)i)); i++)
			;
		if (i == PIPETTE_GEMM_DTYPE_COUNT)
			return pipette_fail(err, "%s:%ld: column dtype: '%.24s': expected bf16, "
					    "fp8-tensorwise, fp8-rowwise, mxfp8 or nvfp4", path, line,
					    c[7]);
		r->dtype = (enum pipette_gemm_dtype)i;
	} else if (!strcmp(c[1], "sdpa")) {
		if (!strcmp(c[6], "fwd"))
			r->kind = PIPETTE_KROW_ATTN_FWD;
		else if (!strcmp(c[6], "fwd+bwd"))
			r->kind = PIPETTE_KROW_ATTN_FWDBWD;
		else
			return pipette_fail(err, "%s:%ld: column pass: '%.24s': expected fwd or "
					    "fwd+bwd", path, line, c[6]);
	} else {
		return pipette_fail(err, "%s:%ld: column kind: '%.24s': expected gemm or sdpa",
				    path, line, c[1]);
	}
	pipette_strlcpy(r->model, c[2], sizeof(r->model));
	if (parse_num(path, line, "tp", c[3], &v, err))
		return -1;
	r->tp = (int)v;
	if (parse_num(path, line, "tokens_or_seq", c[4], &v, err))
		return -1;
	r->tokens = (long)v;
	for (i = 0; i < 5; i++)
		if (parse_num(path, line, num[i], c[8 + i], dst[i], err))
			return -1;
	if (!(r->seconds > 0) || !(r->flops > 0))
		return pipette_fail(err, "%s:%ld: columns flops and seconds: expected positive "
				    "numbers", path, line);
	return 0;
}

int pipette_ktable_read(const char *path, struct pipette_ktable *t, struct pipette_err *err)
{
	struct pipette_file f;
	char *line, *next, *col[KTABLE_COLS + 1];
	long lineno = 0;
	size_t cap = 0;
	int rv = -1;

	memset(t, 0, sizeof(*t));
	if (pipette_read_file(path, "kernel table", KTABLE_MAX, &f, err))
		return -1;
	for (line = f.data; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		lineno++;
		if (lineno == 1) {
			if (strncmp(line, "gpu,kind,model,tp,tokens_or_seq,op,pass,dtype,m,n,k,"
				    "flops,seconds,tflops", 71)) {
				pipette_fail(err, "%s:1: expected the header of kernels.py's CSV "
					     "(gpu,kind,model,...)", path);
				goto fail;
			}
			continue;
		}
		if (!*line)
			continue;
		if (split(line, col, KTABLE_COLS) != KTABLE_COLS) {
			pipette_fail(err, "%s:%ld: expected %d columns", path, lineno, KTABLE_COLS);
			goto fail;
		}
		if (t->n == cap) {
			struct pipette_krow *g;

			cap = cap ? 2 * cap : 1024;
			g = realloc(t->rows, cap * sizeof(*g));
			if (!g) {
				pipette_fail(err, "%s: out of memory", path);
				goto fail;
			}
			t->rows = g;
		}
		if (parse_row(path, lineno, col, &t->rows[t->n], err))
			goto fail;
		t->n++;
	}
	if (!t->n) {
		pipette_fail(err, "%s: no kernel rows", path);
		goto fail;
	}
	rv = 0;
fail:
	pipette_file_free(&f);
	if (rv)
		pipette_ktable_free(t);
	return rv;
}

void pipette_ktable_free(struct pipette_ktable *t)
{
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

/* Least squares on relative error: minimise sum ((x.a - t) / t)^2 over
 * the parameters a (n of them, n <= 3): the normal equations, solved by
 * Gaussian elimination with partial pivoting.  Returns -1 when singular. */
struct lsq {
	int n;
	double ata[3][3], atb[3];
};

static void lsq_add(struct lsq *q, const double *x, double t)
{
	for (int i = 0; i < q->n; i++) {
		for (int j = 0; j < q->n; j++)
			q->ata[i][j] += x[i] * x[j] / (t * t);
		q->atb[i] += x[i] / t;	/* x_i * t / t^2 */
	}
}

static int lsq_solve(struct lsq *q, double *a)
{
	int n = q->n;

	for (int c = 0; c < n; c++) {
		int p = c;

		for (int r = c + 1; r < n; r++)
			if (fabs(q->ata[r][c]) > fabs(q->ata[p][c]))
				p = r;
		if (q->ata[p][c] == 0)
			return -1;
		for (int j = 0; j < n; j++) {
			double s = q->ata[c][j];

			q->ata[c][j] = q->ata[p][j];
			q->ata[p][j] = s;
		}
		double s = q->atb[c];

		q->atb[c] = q->atb[p];
		q->atb[p] = s;
		for (int r = 0; r < n; r++) {
			double f;

			if (r == c)
				continue;
			f = q->ata[r][c] / q->ata[c][c];
			for (int j = c; j < n; j++)
				q->ata[r][j] -= f * q->ata[c][j];
			q->atb[r] -= f * q->atb[c];
		}
	}
	for (int i = 0; i < n; i++)
		a[i] = q->atb[i] / q->ata[i][i];
	return 0;
}

static int kept(const struct pipette_krow *r, const char *leave_out)
{
	return !leave_out || strcmp(r->model, leave_out);
}

/* The forward row of the same attention shape as a fwd+bwd row. */
static const struct pipette_krow *attn_forward_of(const struct pipette_ktable *t,
						  const struct pipette_krow *r)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct pipette_krow *f = &t->rows[i];

		if (f->kind == PIPETTE_KROW_ATTN_FWD && f->tp == r->tp && f->tokens == r->tokens &&
		    f->m == r->m && f->n == r->n && f->k == r->k && !strcmp(f->model, r->model))
			return f;
	}
	return NULL;
}

static void fit_gemm(const struct pipette_ktable *t, const char *leave_out,
		     enum pipette_gemm_dtype dt, struct pipette_gemm_fit *out)
{
	struct lsq q = { .n = 3 };
	double a[3];
	int rows = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < t->n; i++) {
		const struct pipette_krow *r = &t->rows[i];
		double x[3] = { 1.0, 2.0 * r->m * r->n * r->k, r->m * r->n };

		if (r->kind != PIPETTE_KROW_GEMM || r->dtype != dt || !kept(r, leave_out))
			continue;
		lsq_add(&q, x, r->seconds);
		rows++;
	}
	if (rows < 3 || lsq_solve(&q, a) || !(a[1] > 0))
		return;
	out->t0_s = a[0];
	out->tflops = 1.0 / a[1] / 1e12;
	out->out_s = a[2];
}

static void fit_attn(const struct pipette_ktable *t, const char *leave_out, int backward,
		     struct pipette_attn_fit *out)
{
	struct lsq q = { .n = 3 };
	double a[3];
	int rows = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < t->n; i++) {
		const struct pipette_krow *r = &t->rows[i], *f;
		double x[3], sec;

		if (!kept(r, leave_out))
			continue;
		if (!backward && r->kind == PIPETTE_KROW_ATTN_FWD) {
			x[1] = r->flops;
			sec = r->seconds;
		} else if (backward && r->kind == PIPETTE_KROW_ATTN_FWDBWD &&
			   (f = attn_forward_of(t, r)) && r->seconds > f->seconds) {
			x[1] = r->flops - f->flops;
			sec = r->seconds - f->seconds;
		} else {
			continue;
		}
		x[0] = 1.0;
		x[2] = r->m * r->tokens;	/* heads x queries (batch 1) */
		lsq_add(&q, x, sec);
		rows++;
	}
	if (rows < 3 || lsq_solve(&q, a) || !(a[1] > 0))
		return;
	out->t0_s = a[0];
	out->tflops = 1.0 / a[1] / 1e12;
	out->row_s = a[2];
}

int pipette_kernelfit(const struct pipette_ktable *t, const char *leave_out,
		      struct pipette_kernels *out, struct pipette_err *err)
{
	int any = 0;

	memset(out, 0, sizeof(*out));
	for (int d = 0; d < PIPETTE_GEMM_DTYPE_COUNT; d++) {
		fit_gemm(t, leave_out, (enum pipette_gemm_dtype)d, &out->gemm[d]);
		any |= out->gemm[d].tflops > 0;
	}
	fit_attn(t, leave_out, 0, &out->attn_fwd);
	fit_attn(t, leave_out, 1, &out->attn_bwd);
	if (!any || !(out->gemm[PIPETTE_GEMM_BF16].tflops > 0))
		return pipette_fail(err, "kernel table: no BF16 GEMM rows to fit");
	return 0;
}

double pipette_krow_predict(const struct pipette_kernels *k, const struct pipette_krow *r)
{
	switch (r->kind) {
	case PIPETTE_KROW_GEMM:
		return pipette_kernel_gemm_s(k, r->dtype, r->m, r->n, r->k);
	case PIPETTE_KROW_ATTN_FWD:
		return pipette_kernel_attn_s(k, 0, 0, r->flops, r->m * r->tokens);
	case PIPETTE_KROW_ATTN_FWDBWD:	/* flops: forward 1, backward 2.5 of it */
		return pipette_kernel_attn_s(k, 0, 0, r->flops / 3.5, r->m * r->tokens) +
		       pipette_kernel_attn_s(k, 1, 0, r->flops * 2.5 / 3.5, r->m * r->tokens);
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

size_t pipette_kernelfit_errors(const struct pipette_ktable *t, const struct pipette_kernels *k,
				enum pipette_krow_kind kind, enum pipette_gemm_dtype dt,
				const char *only, double *median, double *p95)
{
	double *e = malloc((t->n ? t->n : 1) * sizeof(double));
	size_t n = 0;

	*median = *p95 = 0;
	if (!e)
		return 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct pipette_krow *r = &t->rows[i];
		int match = kind == PIPETTE_KROW_GEMM
			    ? r->kind == PIPETTE_KROW_GEMM && r->dtype == dt
			    : r->kind != PIPETTE_KROW_GEMM;

		if (!match || (only && strcmp(r->model, only)))
			continue;
		e[n++] = fabs(pipette_krow_predict(k, r) / r->seconds - 1.0);
	}
	if (n) {
		qsort(e, n, sizeof(double), cmp_double);
		*median = n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2;
		*p95 = e[(size_t)ceil(0.95 * n) - 1];
	}
	free(e);
	return n;
}
