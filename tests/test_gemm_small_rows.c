/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_small_rows.c: the few-rows MX kernels that the registry picks for decode-sized groups
 * without AMX: mx_small_avx512.c for FP8 weights and fp8_fp4_small_avx512.c for FP8 x FP4, 1..3
 * rows or on Zen 4/5 1..12 (FP8 weights) and 1..8 (FP4); the integer kernel fp4_int_small_avx512.c for FP4 x
 * FP4, 1..8 rows or every group on Zen 4/5; with AMX: mx_amx_avx512.c, 1..16 rows): which kernel is chosen
 * for which row count, and each kernel's results against the float64 expectation (sum of exact products a' *
 * w' of the dequantized values) within its documented bound 2 K 2^-24 sum |a' w'|, on every MX format
 * pair, 1..8 and 16 rows (up to the kernel's MR), K and N around the block sizes (32-value MX blocks,
 * 256-value K blocks of the framework, 2048-value calls of the integer kernel, 32-column panels, odd K), the
 * same for the reference kernel on the same cases; and weight or activation scales outside the fast range
 * (tiny, huge, NaN), which take the kernels' slow paths where they have one: a NaN weight scale gives NaN in
 * exactly the columns that have one, a NaN activation scale in exactly the row that has one, the others stay
 * within the bound plus the flushing of values below 2^-126; and that the FP8-weight kernel gives each 4-row
 * block of a group the bits of a GEMM of those rows alone, with the rows that split their accumulator
 * chains pinned by hand-computed bits (test_split_rows). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gemm/kernel_registry.h"
#include "gemm/kernels/kernels.h"
#include "test_gemm_common.h"

static const mm_dtype pairs[][2] = {
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN}, {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2},   {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1},   {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1},
    {MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1},
};
#define N_PAIRS ((int)(sizeof pairs / sizeof pairs[0]))

static int small_available(void) {
    return mm_cpu_isa() >= MM_ISA_AVX512 && mm_cpu_has_avx512_vbmi();
}

/* Whether a dequantized weight of column j is beyond F32 (the reference's w' is then Inf). */
static int column_overflows(const gemm_case *c, int64_t j) {
    for (int64_t i = 0; i < c->k; i++)
        if (fabs(c->deq_w[i * c->n + j]) >= ldexp(1.0, 128)) return 1;
    return 0;
}

/* Whether a dequantized activation of row r is beyond F32 (the reference's a' is then Inf). */
static int row_overflows(const gemm_case *c, int64_t r) {
    for (int64_t i = 0; i < c->k; i++)
        if (fabs(c->deq_a[r * c->k + i]) >= ldexp(1.0, 128)) return 1;
    return 0;
}

/* Packs the case's weights and runs it with `kernel` into out (rows x ldc). */
static void run_kernel(const gemm_case *c, const mm_gemm_kernel *kernel, float *out, int64_t ldc) {
    mm_error err;
    mm_gemm_weight_desc desc = gemm_case_weights(c);
    mm_gemm_packed_weights *w = NULL;
    CHECK_OK(mm_gemm_pack_weights(&desc, &w, &err), &err);
    if (!w) return;
    mm_gemm_group g = gemm_case_group(c, w, out, ldc);
    mm_gemm_options opts = {kernel, NULL, NULL};
    CHECK_OK(mm_gemm_grouped(c->a_dtype, 1, &g, &opts, &err), &err);
    mm_gemm_packed_free(w);
}

/* Runs the case with `kernel` and compares every output with the float64 expectation. extra_per_k: an
 * allowance per K element for flushed tiny values. nan_cols: per column, 1 when NaN is expected; nan_row:
 * the row where NaN is expected (-1: none). */
static void check_case(const char *what, const gemm_case *c, const mm_gemm_kernel *kernel, double extra_per_k,
                       const int *nan_cols, int64_t nan_row) {
    int64_t ldc = c->n + 3;
    float *out = malloc((size_t)(c->rows * ldc) * sizeof *out);
    for (int64_t i = 0; i < c->rows * ldc; i++) out[i] = GEMM_GAP_FILL; /* the gaps must stay untouched */
    run_kernel(c, kernel, out, ldc);
    int bad = 0;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t j = 0; j < c->n; j++) {
            double value, abs_sum;
            float exact;
            gemm_case_expect(c, r, j, &value, &abs_sum, &exact);
            float got = out[r * ldc + j];
            int ok;
            if ((nan_cols && nan_cols[j]) || r == nan_row)
                ok = isnan(got);
            else if (!isfinite(value) || fabs(value) > 1e37 || column_overflows(c, j) || row_overflows(c, r))
                ok = 1; /* beyond the F32 range: Inf or NaN either way (documented) */
            else
                ok = fabs((double)got - value) <=
                     2 * gemm_f32_sum_bound(c->k, abs_sum) + extra_per_k * (double)c->k;
            if (!ok && bad++ == 0)
                fprintf(stderr, "%s %s: K=%lld N=%lld rows=%lld: c[%lld][%lld] = %.9g, expected %.9g\n", what,
                        kernel->name, (long long)c->k, (long long)c->n, (long long)c->rows, (long long)r,
                        (long long)j, got, value);
        }
    bad += gemm_gap_writes(what, c, out, ldc);
    CHECK_EQ_INT(bad, 0);
    free(out);
}

static int is_fp4_fp4(int p) {
    return pairs[p][0] == MM_DTYPE_FP4_E2M1 && pairs[p][1] == MM_DTYPE_FP4_E2M1;
}

static void test_selection(void) {
    int amx_few = mm_cpu_isa() >= MM_ISA_AMX && mm_cpu_has_avx512_vbmi();
    const mm_gemm_kernel_config *cfg = mm_gemm_kernel_config_get();
    /* The profile's thresholds (no tune cache steers these classes in the test environment). */
    for (int c = MM_KCLASS_MXFP8; c <= MM_KCLASS_MXFP4; c++) CHECK(!cfg->from_cache[c]);
    int fp4_few_max = cfg->rules[MM_KCLASS_MXFP4].avx512_few_max;
    CHECK(fp4_few_max == MM_MX_FP4_SMALL_MAX_ROWS || (fp4_few_max == MM_ROWS_ALL && !cfg->profile->amx));
    for (int p = 0; p < N_PAIRS; p++) {
        for (int64_t rows = 1; rows <= MM_GEMM_MX_FEW_AMX_MR + 2; rows++) {
            const mm_gemm_kernel *k = mm_gemm_kernel_select_rows(pairs[p][0], pairs[p][1], rows);
            CHECK(k != NULL);
            if (!k) continue;
            int is_small = strstr(k->name, "_small_") != NULL,
                is_few_amx = strstr(k->name, "_amx_few_") != NULL;
            /* With AMX, up to 16 rows go to the few-rows AMX kernel; without, to the AVX-512 few-rows
             * kernels up to the profile's rows (FP8 activations: 3, on Zen 4/5 12 with FP8 and 8 with FP4
             * weights; MXFP4 x MXFP4: 8, every group on Zen 4/5); more rows never go to either. */
            CHECK_EQ_INT(is_few_amx, amx_few && rows <= MM_GEMM_MX_FEW_AMX_MR);
            /* FP8 weights: mx_small_avx512.c (VBMI); FP4 weights: fp8_fp4_small_avx512.c and
             * fp4_int_small_avx512.c (AVX-512 alone); up to the rows of the profile in use. */
            int few_max = cfg->rules[mm_kernel_class_of(pairs[p][0], pairs[p][1])].avx512_few_max;
            CHECK_EQ_INT(is_small, !amx_few && rows <= few_max &&
                                       (pairs[p][1] == MM_DTYPE_FP4_E2M1 ? mm_cpu_isa() >= MM_ISA_AVX512
                                                                         : small_available()));
            if (is_small)
                CHECK_EQ_INT(k->mr, is_fp4_fp4(p)                      ? MM_GEMM_FP4_SMALL_MR
                                    : pairs[p][1] == MM_DTYPE_FP4_E2M1 ? MM_GEMM_FP8_FP4_SMALL_MR
                                                                       : MM_GEMM_MX_SMALL_MR);
            if (is_few_amx) CHECK_EQ_INT(k->mr, MM_GEMM_MX_FEW_AMX_MR);
        }
    }
    /* Non-MX pairs never get them. */
    const mm_gemm_kernel *k = mm_gemm_kernel_select_rows(MM_DTYPE_BF16, MM_DTYPE_BF16, 1);
    CHECK(k && strstr(k->name, "_small_") == NULL && strstr(k->name, "_few_") == NULL);
}

static void test_shapes(int p, const mm_gemm_kernel *small, const mm_gemm_kernel *ref) {
    static const int64_t ks[] = {1, 2, 3, 31, 32, 33, 63, 64, 65, 255, 256, 257, 300, 513, 2047, 2049, 4100};
    static const int64_t ns[] = {1, 15, 16, 17, 32, 33, 70};
    uint64_t seed = 1 + 1000 * (uint64_t)p;
    static const int64_t rows_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 16};
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0] && rows_list[ri] <= small->mr; ri++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                /* Every K with two N, every N with two K: covers the grid's edges without its cost. */
                if (ni > 1 && ki % 4 != ni % 4) continue;
                int64_t rows = rows_list[ri];
                gemm_case c;
                gemm_case_make(&c, pairs[p][0], pairs[p][1], rows, ks[ki], ns[ni], (int)(seed & 1), 0, seed);
                seed++;
                check_case("shape", &c, small, 0, NULL, -1);
                if (rows == 1 && ref) check_case("shape", &c, ref, 0, NULL, -1);
                gemm_case_free(&c);
            }
}

/* Scale bytes outside the fast range in some blocks: tiny (values flushed), huge, NaN; in weight columns
 * (on_rows = 0) or in activation rows (on_rows = 1). */
static void test_extreme_scales(int p, const mm_gemm_kernel *small, int on_rows) {
    static const uint8_t extremes[] = {0, 1, 2, 3, 9, 16, 200, 247, 253, 254, 255};
    uint64_t seed = 99 + 1000 * (uint64_t)p + 500 * (uint64_t)on_rows;
    for (size_t e = 0; e < sizeof extremes / sizeof extremes[0]; e++) {
        int64_t k = 300, n = 40, blocks = (k + 31) / 32, slots = (k + 63) / 64 * 2;
        gemm_case c;
        gemm_case_make(&c, pairs[p][0], pairs[p][1], 3, k, n, 0, 0, seed++);
        int nan_cols[40] = {0};
        int64_t nan_row = -1;
        double max_a = 0, max_w = 0;
        for (int64_t i = 0; i < c.rows * k; i++)
            if (fabs(c.deq_a[i]) > max_a) max_a = fabs(c.deq_a[i]);
        for (int64_t i = 0; i < k * n; i++)
            if (fabs(c.deq_w[i]) > max_w) max_w = fabs(c.deq_w[i]);
        if (!on_rows) {
            /* Columns 3, 20 and 39 get the extreme scale in block 2; column 21 in the last block. */
            const int64_t cols[][2] = {{3, 2}, {20, 2}, {39, 2}, {21, blocks - 1}};
            for (size_t t = 0; t < 4; t++) {
                int64_t j = cols[t][0], b = cols[t][1];
                uint8_t *s = &c.w_mx[j * slots + b];
                double old = mm_e8m0_to_f32(*s);
                *s = extremes[e];
                for (int64_t i = b * 32; i < k && i < (b + 1) * 32; i++)
                    c.deq_w[i * n + j] = c.deq_w[i * n + j] / old * ldexp(1.0, (int)extremes[e] - 127);
                if (extremes[e] == 0xFF) nan_cols[j] = 1;
            }
        } else {
            /* Row 1 gets the extreme scale in block 2 and in the last block. */
            const int64_t row_blocks[] = {2, blocks - 1};
            for (size_t t = 0; t < 2; t++) {
                int64_t b = row_blocks[t];
                uint8_t *s = &c.a_mx[1 * c.a_mx_stride + b];
                double old = mm_e8m0_to_f32(*s);
                *s = extremes[e];
                for (int64_t i = b * 32; i < k && i < (b + 1) * 32; i++)
                    c.deq_a[1 * k + i] = c.deq_a[1 * k + i] / old * ldexp(1.0, (int)extremes[e] - 127);
            }
            if (extremes[e] == 0xFF) nan_row = 1;
        }
        /* Products below 2^-126 may be flushed: at most 8 per K element of the tiny side times the other. */
        check_case(on_rows ? "extreme activation scale" : "extreme weight scale", &c, small,
                   (on_rows ? max_w : max_a) * ldexp(1.0, -126) * 8, nan_cols, nan_row);
        gemm_case_free(&c);
    }
}

/* Sets every activation scale byte to ea and every weight scale byte to ew (-1: random bytes 0..255 for
 * each), and the float64 values with them. */
static void set_scales(gemm_case *c, int ea, int ew, uint64_t *rng) {
    int64_t blocks = (c->k + 31) / 32, slots = (c->k + 63) / 64 * 2;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *s = &c->a_mx[r * c->a_mx_stride + b];
            double old = mm_e8m0_to_f32(*s);
            *s = (uint8_t)(ea >= 0 ? ea : (int)(mm_test_rand_u64(rng) & 0xFF));
            for (int64_t i = b * 32; i < c->k && i < (b + 1) * 32; i++)
                c->deq_a[r * c->k + i] = c->deq_a[r * c->k + i] / old * ldexp(1.0, (int)*s - 127);
        }
    for (int64_t j = 0; j < c->n; j++)
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *s = &c->w_mx[j * slots + b];
            double old = mm_e8m0_to_f32(*s);
            *s = (uint8_t)(ew >= 0 ? ew : (int)(mm_test_rand_u64(rng) & 0xFF));
            for (int64_t i = b * 32; i < c->k && i < (b + 1) * 32; i++)
                c->deq_w[i * c->n + j] = c->deq_w[i * c->n + j] / old * ldexp(1.0, (int)*s - 127);
        }
}

/* Weight scale byte 0 (2^-127, the F32 subnormal of the packed F32 array) in every block, with
 * activations scaled up by 2^73 (byte 200, low enough that the block sums of a' * q stay finite for E5M2
 * weights, the kernels' documented limit): every product a' * w' is a normal number, so a kernel that read
 * scale byte 0 as zero (the few-rows kernels compute the F32 scale from the E8M0 byte) would give 0 where
 * the expectation is not (products from about 2^-86 up, all normal). */
static void test_weight_scale_zero_byte(int p, const mm_gemm_kernel *small) {
    uint64_t rng = 515 + (uint64_t)p;
    for (int64_t rows = 1; rows <= small->mr && rows <= 4; rows += 3) {
        gemm_case c;
        gemm_case_make(&c, pairs[p][0], pairs[p][1], rows, 200, 40, 0, 0, 8100 + (uint64_t)p);
        set_scales(&c, 200, 0, &rng);
        check_case("weight scale byte 0", &c, small, 0, NULL, -1);
        gemm_case_free(&c);
    }
}

/* 0 finite, 1 +Inf, 2 -Inf, 3 NaN. */
static int value_class(float v) {
    return isnan(v) ? 3 : isinf(v) ? (v > 0 ? 1 : 2) : 0;
}

/* FP4 x FP4's integer kernel at the edges of its fast range (scale bytes ea in [3, 252], ew in [1, 252],
 * 130 <= ea + ew <= 369) and at random scales over the whole E8M0 range: every output has the class of
 * the reference kernel's (finite, +Inf, -Inf, NaN) and, when finite, lies within the bound of the float64
 * value (plus the rounding of products below 2^-126, which both kernels round alike). */
static void test_fp4_scale_edges(const mm_gemm_kernel *kernel, const mm_gemm_kernel *ref) {
    static const int edges[][2] = {{252, 117}, {253, 116}, {116, 253}, {252, 0},   {0, 130},   {3, 127},
                                   {2, 128},   {129, 1},   {130, 0},   {64, 65},   {65, 65},   {185, 184},
                                   {185, 185}, {255, 127}, {127, 255}, {254, 120}, {120, 254}, {200, 169}};
    const int n_edges = (int)(sizeof edges / sizeof edges[0]), n_random = 40;
    uint64_t rng = 4242;
    for (int t = 0; t < n_edges + n_random; t++) {
        gemm_case c;
        int64_t rows = t % 2 ? 9 : 3, k = t % 3 ? 96 : 77, n = 40, ldc = n;
        gemm_case_make(&c, MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, rows, k, n, 0, 0, 7000 + (uint64_t)t);
        set_scales(&c, t < n_edges ? edges[t][0] : -1, t < n_edges ? edges[t][1] : -1, &rng);
        float *got = malloc((size_t)(rows * n) * sizeof *got),
              *want = malloc((size_t)(rows * n) * sizeof *want);
        run_kernel(&c, kernel, got, ldc);
        run_kernel(&c, ref, want, ldc);
        int bad = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n; j++) {
                double value, abs_sum;
                float exact;
                gemm_case_expect(&c, r, j, &value, &abs_sum, &exact);
                float g = got[r * n + j], w = want[r * n + j];
                int ok =
                    value_class(g) == value_class(w) &&
                    (value_class(g) != 0 || fabs((double)g - value) <= 2 * gemm_f32_sum_bound(k, abs_sum) +
                                                                           (double)k * ldexp(1.0, -148));
                if (!ok && bad++ == 0)
                    fprintf(stderr,
                            "fp4 scales %d/%d (case %d) %s: c[%lld][%lld] = %.9g, reference %.9g, expected "
                            "%.9g\n",
                            t < n_edges ? edges[t][0] : -1, t < n_edges ? edges[t][1] : -1, t, kernel->name,
                            (long long)r, (long long)j, g, w, value);
            }
        CHECK_EQ_INT(bad, 0);
        free(got), free(want);
        gemm_case_free(&c);
    }
}

/* Groups larger than one tile (the zen5 profile gives the integer FP4 x FP4 kernel every group). */
static void test_many_rows(const mm_gemm_kernel *kernel) {
    static const int64_t rows_list[] = {9, 17, 130};
    static const int64_t ks[] = {33, 2049};
    uint64_t seed = 900;
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            gemm_case c;
            gemm_case_make(&c, MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, rows_list[ri], ks[ki], 45, 0, 0, seed++);
            check_case("many rows", &c, kernel, 0, NULL, -1);
            gemm_case_free(&c);
        }
}

/* The FP8-weight kernel (mx_small_avx512.c, tiles of up to 8 rows) gives each row the bits it had from
 * tiles of 4 rows: the rows of each 4-row block of a group equal a GEMM of that block's rows alone, bit
 * for bit (a block of 1-2 rows splits its chains, one of 3-4 does not, wherever it lies in a tile). */
static void test_row_blocks(int p, const mm_gemm_kernel *kernel) {
    static const int64_t rows_list[] = {3, 5, 6, 7, 8, 10, 13};
    mm_error err;
    uint64_t seed = 700 + 1000 * (uint64_t)p;
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
        int64_t rows = rows_list[ri], k = 333, n = 40;
        gemm_case c;
        gemm_case_make(&c, pairs[p][0], pairs[p][1], rows, k, n, 0, 0, seed++);
        mm_gemm_weight_desc desc = gemm_case_weights(&c);
        mm_gemm_packed_weights *w = NULL;
        CHECK_OK(mm_gemm_pack_weights(&desc, &w, &err), &err);
        float *whole = malloc((size_t)(rows * n) * sizeof *whole),
              *part = malloc((size_t)(4 * n) * sizeof *part);
        mm_gemm_options opts = {kernel, NULL, NULL};
        mm_gemm_group g = gemm_case_group(&c, w, whole, n);
        CHECK_OK(mm_gemm_grouped(c.a_dtype, 1, &g, &opts, &err), &err);
        int bad = 0;
        for (int64_t r0 = 0; r0 < rows; r0 += 4) {
            mm_gemm_group b = gemm_case_group(&c, w, part, n);
            b.rows = rows - r0 < 4 ? rows - r0 : 4;
            b.a = (const uint8_t *)c.a + r0 * c.a_stride;
            b.a_mx_scales = c.a_mx + r0 * c.a_mx_stride;
            CHECK_OK(mm_gemm_grouped(c.a_dtype, 1, &b, &opts, &err), &err);
            bad += memcmp(part, whole + r0 * n, (size_t)(b.rows * n) * sizeof *part) != 0;
        }
        if (bad)
            fprintf(stderr, "row blocks %s: %lld rows differ from their 4-row blocks\n", kernel->name,
                    (long long)rows);
        CHECK_EQ_INT(bad, 0);
        free(whole);
        free(part);
        mm_gemm_packed_free(w);
        gemm_case_free(&c);
    }
}

/* Which rows split their chains, by hand-computed bits (E4M3 x E4M3, K 8 = 4 pairs, one column, every row
 * alike): the products of the pairs are 64, 2^-18, 0, 2^-18 (codes 0x50 = 8 and 0x01 = 2^-9, scales 1).
 * On one chain 64 + 2^-18 is a tie that rounds back to 64 twice: 64. Split, the even pairs give 64 and
 * the odd ones 2^-17, one ulp of 64: 64 + 2^-17. The rows of a 4-row block of 1-2 rows split; of 3-4 rows
 * they do not, wherever the block lies in a tile. */
static void test_split_rows(const mm_gemm_kernel *kernel) {
    static const uint8_t codes[8] = {0x50, 0, 0x01, 0, 0, 0, 0x01, 0};
    for (int64_t rows = 1; rows <= 13; rows++) {
        gemm_case c;
        gemm_case_make(&c, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, rows, 8, 1, 1, 0, 1);
        for (int64_t r = 0; r < rows; r++) {
            memcpy(c.a + r * c.a_stride, codes, sizeof codes);
            c.a_mx[r * c.a_mx_stride] = 127;
        }
        memcpy(c.w, codes, sizeof codes); /* transposed: the column's 8 codes */
        c.w_mx[0] = 127;
        float out[13];
        run_kernel(&c, kernel, out, 1);
        int bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            int64_t block_rows = rows - r / 4 * 4 < 4 ? rows - r / 4 * 4 : 4;
            float expected = block_rows <= 2 ? nextafterf(64.0f, 100.0f) : 64.0f;
            if (out[r] != expected && bad++ == 0)
                fprintf(stderr, "split rows %s: %lld rows: row %lld = %a, expected %a\n", kernel->name,
                        (long long)rows, (long long)r, (double)out[r], (double)expected);
        }
        CHECK_EQ_INT(bad, 0);
        gemm_case_free(&c);
    }
}

int main(void) {
    test_selection();
    /* Every few-rows MX kernel the hardware has, per pair (MXFP4 x MXFP4 has its own on AVX-512). */
    int tested = 0;
    for (int isa = MM_ISA_AVX512; isa < MM_ISA_COUNT; isa++)
        for (int p = 0; p < N_PAIRS; p++) {
            const mm_gemm_kernel *few = mm_gemm_kernel_lookup_few_rows((mm_isa)isa, pairs[p][0], pairs[p][1]);
            if (!few) {
                if (p == 0)
                    mm_test_skip("%s few-rows MX kernels: not run, %s", mm_isa_name((mm_isa)isa),
                                 !mm_cpu_supports((mm_isa)isa) ? "the CPU lacks it"
                                 : isa > (int)mm_cpu_isa()     ? "MEGAMOE_ISA caps the ISA"
                                                               : "the CPU lacks AVX-512 VBMI");
                continue;
            }
            test_shapes(p, few, mm_gemm_kernel_lookup(MM_ISA_REF, pairs[p][0], pairs[p][1]));
            test_extreme_scales(p, few, 0);
            test_extreme_scales(p, few, 1);
            test_weight_scale_zero_byte(p, few);
            if (pairs[p][1] != MM_DTYPE_FP4_E2M1 && isa == MM_ISA_AVX512) test_row_blocks(p, few);
            if (p == 0 && isa == MM_ISA_AVX512) test_split_rows(few);
            if (is_fp4_fp4(p) && strstr(few->name, "_int_")) {
                test_fp4_scale_edges(few, mm_gemm_kernel_lookup(MM_ISA_REF, pairs[p][0], pairs[p][1]));
                test_many_rows(few);
            }
            tested++;
        }
    if (!tested) printf("test_gemm_small_rows: no AVX-512 here, only the selection was checked\n");
    return mm_test_finish("test_gemm_small_rows");
}
