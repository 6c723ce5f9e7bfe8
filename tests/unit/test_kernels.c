/* Unit tests: the measured kernel model (inputs/kernels.h), its fit
 * (learn/kernelfit.h) and the H100's shipped parameters. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "estimate/kernels.h"
#include "inputs/hardware.h"
#include "learn/kernelfit.h"
#include "check_run.h"

#define TABLE TEST_DATADIR "/kernels/h100-sxm-kernels.csv"
#define H200_TABLE TEST_DATADIR "/kernels/h200-kernels.csv"
#define PROBE_TABLE TEST_DATADIR "/kernels/h100-sxm-probe-kernels.csv"

/* t = t0 + 2mnk / rate + m n t_out, by hand: t0 10 us, 500 TFLOP/s,
 * 1 ps per output element, m = n = k = 4096:
 *   2 * 4096^3 / 500e12 = 274.878 us; 4096^2 * 1e-12 = 16.777 us;
 *   10 + 274.878 + 16.777 = 301.655 us.
 * Attention forward, t0 40 us at 600 TFLOP/s, 1 ns per row, 6e11 FLOPs
 * over 1e5 rows: 40 + 1000 + 100 us. */
START_TEST(test_formula)
{
	struct pipette_kernels k;

	memset(&k, 0, sizeof(k));
	k.gemm[PIPETTE_GEMM_BF16] = (struct pipette_gemm_fit){ 10e-6, 500.0, 1e-12 };
	k.attn_fwd = (struct pipette_attn_fit){ 40e-6, 600.0, 1e-9 };
	k.attn_bwd = (struct pipette_attn_fit){ 100e-6, 500.0, 0 };
	k.flash2_share = 0.5;
	ck_assert_double_eq_tol(pipette_kernel_gemm_s(&k, PIPETTE_GEMM_BF16, 4096, 4096, 4096),
				301.655e-6, 1e-9);
	/* an unmeasured dtype runs at the BF16 fit */
	ck_assert_double_eq(pipette_kernel_gemm_s(&k, PIPETTE_GEMM_FP8_ROW, 4096, 4096, 4096),
			    pipette_kernel_gemm_s(&k, PIPETTE_GEMM_BF16, 4096, 4096, 4096));
	ck_assert_double_eq(pipette_kernel_gemm_s(&k, PIPETTE_GEMM_BF16, 0, 4096, 4096), 0);
	ck_assert_double_eq_tol(pipette_kernel_attn_s(&k, 0, 0, 6e11, 1e5), 1140e-6, 1e-12);
	/* FlashAttention-2 at half the rate: 40 + 2000 + 100 us */
	ck_assert_double_eq_tol(pipette_kernel_attn_s(&k, 0, 1, 6e11, 1e5), 2140e-6, 1e-12);
	ck_assert_double_eq_tol(pipette_kernel_attn_s(&k, 1, 0, 5e11, 1e5), 1100e-6, 1e-12);
}
END_TEST

/* The fit recovers parameters it was made from: rows generated from
 * t0 8 us, 700 TFLOP/s, 0.4 ps per output element. */
START_TEST(test_fit_recovers)
{
	struct pipette_krow rows[60];
	struct pipette_ktable t = { rows, 0 };
	struct pipette_kernels truth, fit;
	struct pipette_err err;
	double med, p95;
	int i;

	memset(&truth, 0, sizeof(truth));
	truth.gemm[PIPETTE_GEMM_BF16] = (struct pipette_gemm_fit){ 8e-6, 700.0, 0.4e-12 };
	memset(rows, 0, sizeof(rows));
	for (i = 0; i < 60; i++) {
		struct pipette_krow *r = &rows[t.n++];

		r->kind = PIPETTE_KROW_GEMM;
		r->dtype = PIPETTE_GEMM_BF16;
		r->m = 512.0 * (1 + i % 7);
		r->n = 1024.0 * (1 + i % 5);
		r->k = 256.0 * (1 + i % 11);
		r->flops = 2 * r->m * r->n * r->k;
		r->seconds = pipette_krow_predict(&truth, r);
	}
	ck_assert_int_eq(pipette_kernelfit(&t, NULL, &fit, &err), 0);
	ck_assert_double_eq_tol(fit.gemm[PIPETTE_GEMM_BF16].t0_s, 8e-6, 1e-12);
	ck_assert_double_eq_tol(fit.gemm[PIPETTE_GEMM_BF16].tflops, 700.0, 1e-6);
	ck_assert_double_eq_tol(fit.gemm[PIPETTE_GEMM_BF16].out_s, 0.4e-12, 1e-18);
	ck_assert_uint_eq(pipette_kernelfit_errors(&t, &fit, PIPETTE_KROW_GEMM, PIPETTE_GEMM_BF16,
						   NULL, &med, &p95), 60);
	ck_assert(p95 < 1e-9);
	/* FP8 has no rows: left unmeasured */
	ck_assert_double_eq(fit.gemm[PIPETTE_GEMM_FP8_TENSOR].tflops, 0);
}
END_TEST

/* A shipped table against the file it was fitted on: the parameters to
 * four significant figures, each dtype's and the attention kernel's median
 * error within 5%, 95% of all rows within 15%. */
static void check_table(const char *gpu, const char *path, size_t rows, size_t per_dtype)
{
	const struct pipette_gpu_spec *g = pipette_gpu_lookup(gpu, NULL);
	struct pipette_ktable t;
	struct pipette_kernels fit;
	struct pipette_err err;
	size_t all = 0, within = 0;
	int d;

	ck_assert_ptr_nonnull(g);
	ck_assert_ptr_nonnull(g->kernels);
	ck_assert_msg(pipette_ktable_read(path, &t, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(t.n, rows);
	ck_assert_int_eq(pipette_kernelfit(&t, NULL, &fit, &err), 0);
	/* the table holds BF16 and FP8 (tensorwise and rowwise), not the
	 * block-scaled formats, which Hopper has no tensor cores for */
	ck_assert_double_eq(fit.gemm[PIPETTE_GEMM_MXFP8].tflops, 0);
	ck_assert_double_eq(fit.gemm[PIPETTE_GEMM_NVFP4].tflops, 0);
	for (d = 0; d <= PIPETTE_GEMM_FP8_ROW; d++) {
		const struct pipette_gemm_fit *a = &fit.gemm[d], *b = &g->kernels->gemm[d];
		double med, p95;

		/* shipped to four significant figures */
		ck_assert_double_eq_tol(b->tflops / a->tflops, 1.0, 5e-4);
		ck_assert_double_eq_tol(b->t0_s / a->t0_s, 1.0, 5e-4);
		ck_assert_double_eq_tol(b->out_s / a->out_s, 1.0, 5e-4);
		ck_assert_uint_eq(pipette_kernelfit_errors(&t, g->kernels, PIPETTE_KROW_GEMM,
							   (enum pipette_gemm_dtype)d, NULL,
							   &med, &p95), per_dtype);
		ck_assert_msg(med <= 0.05, "dtype %d: median error %.3f", d, med);
	}
	ck_assert_double_eq_tol(g->kernels->attn_fwd.tflops / fit.attn_fwd.tflops, 1.0, 5e-4);
	ck_assert_double_eq_tol(g->kernels->attn_bwd.tflops / fit.attn_bwd.tflops, 1.0, 5e-4);
	ck_assert_double_eq_tol(g->kernels->attn_fwd.t0_s / fit.attn_fwd.t0_s, 1.0, 5e-4);
	ck_assert_double_eq_tol(g->kernels->attn_bwd.t0_s / fit.attn_bwd.t0_s, 1.0, 5e-4);
	ck_assert_double_eq_tol(g->kernels->attn_fwd.row_s / fit.attn_fwd.row_s, 1.0, 5e-4);
	ck_assert_double_eq_tol(g->kernels->attn_bwd.row_s / fit.attn_bwd.row_s, 1.0, 5e-4);
	{
		double med, p95;

		ck_assert_uint_eq(pipette_kernelfit_errors(&t, g->kernels, PIPETTE_KROW_ATTN_FWD,
							   PIPETTE_GEMM_BF16, NULL, &med, &p95), 120);
		ck_assert_msg(med <= 0.05, "attention: median error %.3f", med);
	}
	for (size_t i = 0; i < t.n; i++) {
		double e = fabs(pipette_krow_predict(g->kernels, &t.rows[i]) / t.rows[i].seconds - 1);

		all++;
		within += e <= 0.15;
	}
	ck_assert_msg(within >= 0.95 * all, "%zu of %zu rows within 15%%", within, all);
	pipette_ktable_free(&t);
}

START_TEST(test_h100_table)
{
	check_table("h100", TABLE, 2253, 711);
}
END_TEST

/* The H200's own table (the same grid, another die of the same design):
 * its fit ships, and the H100's kernels predict its GEMMs within a median
 * 6% (5.3% BF16, 3.5% and 3.3% FP8 when taken). */
START_TEST(test_h200_table)
{
	const struct pipette_gpu_spec *h100 = pipette_gpu_lookup("h100", NULL);
	struct pipette_ktable t;
	struct pipette_err err;

	check_table("h200", H200_TABLE, 2280, 720);
	ck_assert_msg(pipette_ktable_read(H200_TABLE, &t, &err) == 0, "%s", err.msg);
	for (int d = 0; d <= PIPETTE_GEMM_FP8_ROW; d++) {
		double med, p95;

		pipette_kernelfit_errors(&t, h100->kernels, PIPETTE_KROW_GEMM,
					 (enum pipette_gemm_dtype)d, NULL, &med, &p95);
		ck_assert_msg(med <= 0.06, "dtype %d: the H100's kernels off by %.3f", d, med);
	}
	pipette_ktable_free(&t);
}
END_TEST

/* The same grid timed by pipette-probe --kernels (cuBLAS called from C) on
 * another H100 SXM: the shipped H100 kernels, fitted on PyTorch's timings,
 * predict its BF16 and FP8 rows within 5% median error, and a fit of its
 * own has no attention (the probe times none). */
START_TEST(test_probe_table)
{
	const struct pipette_gpu_spec *g = pipette_gpu_lookup("h100", NULL);
	struct pipette_ktable t;
	struct pipette_kernels fit;
	struct pipette_err err;

	ck_assert_msg(pipette_ktable_read(PROBE_TABLE, &t, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(t.n, 1440);
	ck_assert_int_eq(pipette_kernelfit(&t, NULL, &fit, &err), 0);
	ck_assert_double_eq(fit.attn_fwd.tflops, 0);
	ck_assert_double_eq(fit.gemm[PIPETTE_GEMM_FP8_ROW].tflops, 0);
	for (int d = PIPETTE_GEMM_BF16; d <= PIPETTE_GEMM_FP8_TENSOR; d++) {
		double med, p95;

		ck_assert_uint_eq(pipette_kernelfit_errors(&t, g->kernels, PIPETTE_KROW_GEMM,
							   (enum pipette_gemm_dtype)d, NULL,
							   &med, &p95), 720);
		ck_assert_msg(med <= 0.05, "dtype %d: median error %.3f", d, med);
		ck_assert_double_eq_tol(fit.gemm[d].tflops / g->kernels->gemm[d].tflops, 1.0, 0.05);
	}
	pipette_ktable_free(&t);
}
END_TEST

/* Bad tables: one error naming the file, the line and the column. */
static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

#define HEADER "gpu,kind,model,tp,tokens_or_seq,op,pass,dtype,m,n,k,flops,seconds,tflops\n"

START_TEST(test_bad_tables)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "a,b,c\n", ":1: expected the header" },
		{ HEADER "H100,gemm,8b,1,1024,qkv,fwd,bf16,1,2,3\n", ":2: expected 14 columns" },
		{ HEADER "H100,gemm,8b,1,1024,qkv,fwd,int4,1,2,3,12,1e-5,1\n", ":2: column dtype" },
		{ HEADER "H100,conv,8b,1,1024,qkv,fwd,bf16,1,2,3,12,1e-5,1\n", ":2: column kind" },
		{ HEADER "H100,gemm,8b,1,1024,qkv,fwd,bf16,x,2,3,12,1e-5,1\n", ":2: column m" },
		{ HEADER "H100,gemm,8b,1,1024,qkv,fwd,bf16,1,2,3,12,0,1\n", ":2: columns flops and seconds" },
		{ HEADER, "no kernel rows" },
	};
	char path[] = "/tmp/pipette-ktable-XXXXXX";
	int fd = mkstemp(path);
	struct pipette_ktable t;
	struct pipette_err err;
	size_t i;

	ck_assert_int_ge(fd, 0);
	close(fd);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_file(path, cases[i].text);
		ck_assert_int_ne(pipette_ktable_read(path, &t, &err), 0);
		ck_assert_msg(strstr(err.msg, cases[i].want) && strstr(err.msg, path),
			      "case %zu: %s", i, err.msg);
		ck_assert_ptr_null(t.rows);
	}
	unlink(path);
	/* a FIFO where the table belongs: refused, not waited on */
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	ck_assert_int_ne(pipette_ktable_read(path, &t, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "FIFO"));
	unlink(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kernels");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_formula);
	tcase_add_test(tc, test_fit_recovers);
	tcase_add_test(tc, test_h100_table);
	tcase_add_test(tc, test_h200_table);
	tcase_add_test(tc, test_probe_table);
	tcase_add_test(tc, test_bad_tables);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return check_run(s);
}
