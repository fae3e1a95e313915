/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_int4_small.c: the few-rows INT8 x INT4 kernel (i4_small_avx512.c) that the registry
 * picks for groups of 1..10 rows, 1..9 on Zen 4/5 (8-row tiles): which kernel is chosen for which row count,
 * and its results bit for bit against the exact expectation (int64 sum of the integer products, then the
 * spec's F32 scaling, from test_gemm_common.h) and against the reference kernel, on edge shapes: 1..12 rows
 * (9 and 12 = a full 8-row tile plus a 1- or 4-row tile), K around the 8-value nibble groups, the
 * 64-byte row-sum chunks and the 256-value K blocks of the framework (odd K, K not a multiple of 4 or
 * 64), N from 1 to 70 (partial panels), both weight layouts, with and without an INT4 bias; and the
 * extreme values (activations -128 / 127, weights -8 / 7 at K = 4096), where the value + 8 correction
 * and the INT32 sum are largest. */
#include <stdio.h>
#include <string.h>

#include "gemm/kernel_registry.h"
#include "gemm/kernels/kernels.h"
#include "test_gemm_common.h"

static const char *const small_name = "i8xi4_avx512_small_8x32";

static const mm_gemm_kernel *small_kernel(void) {
    const mm_gemm_kernel *k = mm_gemm_kernel_select_rows(MM_DTYPE_I8, MM_DTYPE_INT4, 1);
    return k && strcmp(k->name, small_name) == 0 ? k : NULL;
}

/* Runs the case with `kernel`; out has rows x ldc floats, ldc = n + 3 (the gaps must stay untouched). */
static void run_case(const gemm_case *c, const mm_gemm_kernel *kernel, float *out, int64_t ldc) {
    mm_error err;
    mm_gemm_weight_desc desc = gemm_case_weights(c);
    mm_gemm_packed_weights *w = NULL;
    CHECK_OK(mm_gemm_pack_weights(&desc, &w, &err), &err);
    if (!w) return;
    for (int64_t i = 0; i < c->rows * ldc; i++) out[i] = GEMM_GAP_FILL;
    mm_gemm_group g = gemm_case_group(c, w, out, ldc);
    mm_gemm_options opts = {kernel, NULL, NULL};
    CHECK_OK(mm_gemm_grouped(MM_DTYPE_I8, 1, &g, &opts, &err), &err);
    mm_gemm_packed_free(w);
}

/* The small kernel against the exact expectation and the reference kernel, bit for bit. */
static void check_case(const char *what, const gemm_case *c, const mm_gemm_kernel *small) {
    const mm_gemm_kernel *ref = mm_gemm_kernel_lookup(MM_ISA_REF, MM_DTYPE_I8, MM_DTYPE_INT4);
    int64_t ldc = c->n + 3;
    float *got = malloc((size_t)(c->rows * ldc) * sizeof *got);
    float *want_ref = malloc((size_t)(c->rows * ldc) * sizeof *want_ref);
    run_case(c, small, got, ldc);
    run_case(c, ref, want_ref, ldc);
    int bad = 0;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t j = 0; j < c->n; j++) {
            double exact;
            uint32_t g = gemm_f32_bits(got[r * ldc + j]);
            if ((!gemm_case_output_ok(c, r, j, got[r * ldc + j], 1, &exact) ||
                 g != gemm_f32_bits(want_ref[r * ldc + j])) &&
                bad++ == 0)
                fprintf(stderr,
                        "%s: K=%lld N=%lld rows=%lld transposed=%d bias=%d: c[%lld][%lld] = %.9g (0x%08x), "
                        "exact %.9g, reference kernel %.9g\n",
                        what, (long long)c->k, (long long)c->n, (long long)c->rows, c->transposed,
                        c->with_bias, (long long)r, (long long)j, got[r * ldc + j], g, exact,
                        want_ref[r * ldc + j]);
        }
    bad += gemm_gap_writes(what, c, got, ldc);
    CHECK_EQ_INT(bad, 0);
    free(got);
    free(want_ref);
}

static void test_selection(void) {
    /* Up to the profile's rows: 10 (generic, Xeon), 12 (Zen 4/5). */
    int64_t few_max = mm_gemm_kernel_config_get()->rules[MM_KCLASS_INT8_INT4].avx512_few_max;
    CHECK(few_max == MM_I4_SMALL_MAX_ROWS || few_max == MM_I4_SMALL_MAX_ROWS_ZEN5);
    for (int64_t rows = 1; rows <= few_max; rows++) {
        const mm_gemm_kernel *k = mm_gemm_kernel_select_rows(MM_DTYPE_I8, MM_DTYPE_INT4, rows);
        CHECK(k != NULL && strcmp(k->name, small_name) == 0 && k->mr == 8);
    }
    const mm_gemm_kernel *k = mm_gemm_kernel_select_rows(MM_DTYPE_I8, MM_DTYPE_INT4, few_max + 1);
    CHECK(k != NULL && strcmp(k->name, small_name) != 0);
    /* Other pairs are unaffected: INT8 x INT8 never takes it. */
    k = mm_gemm_kernel_select_rows(MM_DTYPE_I8, MM_DTYPE_I8, 1);
    CHECK(k != NULL && strcmp(k->name, small_name) != 0);
}

static void test_edge_shapes(const mm_gemm_kernel *small) {
    static const int64_t ks[] = {1, 3, 7, 8, 9, 63, 64, 65, 255, 257, 1001};
    static const int64_t ns[] = {1, 15, 16, 17, 32, 33, 64, 70};
    static const int64_t rows_list[] = {1, 2, 3, 4, 7, 8, 9, 12};
    uint64_t seed = 1;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
                /* Every (layout, bias) combination appears for every K and every N. */
                int combo = (int)((ki + ni + ri) % 4);
                gemm_case c;
                gemm_case_make(&c, MM_DTYPE_I8, MM_DTYPE_INT4, rows_list[ri], ks[ki], ns[ni], combo & 1,
                               combo >> 1, seed++);
                check_case("edge shape", &c, small);
                gemm_case_free(&c);
            }
}

/* Activations at -128 or 127 and weights at -8 or 7, in runs so the sums are far from 0. */
static void test_extremes(const mm_gemm_kernel *small) {
    for (int pattern = 0; pattern < 3; pattern++) {
        gemm_case c;
        gemm_case_make(&c, MM_DTYPE_I8, MM_DTYPE_INT4, 3, 4096, 40, pattern & 1, pattern == 2, 77 + pattern);
        for (int64_t r = 0; r < c.rows; r++)
            for (int64_t i = 0; i < c.k; i++) {
                int8_t v = (pattern == 0 || (i / 100 + r) % 2) ? -128 : 127;
                c.a[r * c.a_stride + i] = (uint8_t)v;
                c.int_a[r * c.k + i] = v;
            }
        int64_t stored_rows = c.transposed ? c.n : c.k, stored_len = c.transposed ? c.k : c.n;
        int64_t row_bytes = mm_dtype_row_bytes(MM_DTYPE_INT4, stored_len);
        memset(c.w, 0, (size_t)(stored_rows * row_bytes));
        for (int64_t i = 0; i < c.k; i++)
            for (int64_t j = 0; j < c.n; j++) {
                int v = (pattern == 0 || (i / 64 + j) % 3 == 0) ? 7 : -8;
                int64_t srow = c.transposed ? j : i, scol = c.transposed ? i : j;
                gemm_put(MM_DTYPE_INT4, c.w + srow * row_bytes, scol, (uint32_t)v & 0x0Fu);
                c.int_w[i * c.n + j] = v;
            }
        check_case("extremes", &c, small);
        gemm_case_free(&c);
    }
}

int main(void) {
    const mm_gemm_kernel *small = small_kernel();
    if (mm_cpu_isa() < MM_ISA_AVX512) {
        /* Without AVX-512 the registry must not offer it. */
        CHECK(small == NULL);
        printf("no AVX-512: the few-rows INT4 kernel is not registered (checked)\n");
        return mm_test_finish("test_gemm_int4_small");
    }
    CHECK(small != NULL);
    if (!small) return mm_test_finish("test_gemm_int4_small");
    test_selection();
    test_edge_shapes(small);
    test_extremes(small);
    return mm_test_finish("test_gemm_int4_small");
}
