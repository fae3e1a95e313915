/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_common.h: random GEMM cases in API form and their independent expectations, shared
 * by the tests/test_gemm_*.c programs (header-only: the test glob compiles test_*.c files only).
 *
 * The expectation is computed here with plain loops from the dequantized values, written apart from the
 * GEMM code: elements are decoded with the scalar decoders of megamoe/formats.h (not the GEMM's tables),
 * products and sums in float64 for float pairs; for INT pairs the INT32 accumulator is an exact int64
 * sum and the spec's scaling formula is applied in F32, which gives the exact expected bits. */
#ifndef MEGAMOE_TEST_GEMM_COMMON_H
#define MEGAMOE_TEST_GEMM_COMMON_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/format_table.h"
#include "gemm/gemm.h"
#include "megamoe/formats.h"
#include "testlib.h"

typedef struct gemm_case {
    mm_dtype a_dtype, w_dtype;
    int64_t rows, k, n;
    int transposed, with_bias;
    uint8_t *a; /* rows x a_stride bytes */
    int64_t a_stride;
    float *a_row_scales; /* I8 */
    uint8_t *a_mx;       /* MX: rows x a_mx_stride */
    int64_t a_mx_stride;
    uint8_t *w; /* API form */
    float *w_scales, *w_bias;
    uint8_t *w_mx; /* (N, ceil(K/64), 2) */
    double *deq_a; /* rows x k */
    double *deq_w; /* k x n */
    int64_t *int_a, *int_w;
} gemm_case;

static inline uint32_t gemm_random_code(mm_dtype d, uint64_t *rng) {
    for (;;) {
        uint32_t code = (uint32_t)(mm_test_rand_u64(rng) & 0xFF);
        switch (d) {
        case MM_DTYPE_I8:
            if (code == 0x80) continue; /* activations and weights use [-127, 127] */
            return code;
        case MM_DTYPE_INT4:
        case MM_DTYPE_FP4_E2M1: return code & 0x0F;
        case MM_DTYPE_FP8_E4M3FN:
            if ((code & 0x7F) == 0x7F) continue; /* NaN */
            return code;
        case MM_DTYPE_FP8_E5M2:
            if ((code & 0x7C) == 0x7C) continue; /* Inf / NaN */
            return code;
        default: /* BF16: a value in [-4, 4) with a full 8-bit significand */
            return mm_f32_to_bf16((float)mm_test_rand_uniform(rng, -4.0, 4.0));
        }
    }
}

static inline double gemm_decode(mm_dtype d, uint32_t code) {
    switch (d) {
    case MM_DTYPE_BF16: return mm_bf16_to_f32((uint16_t)code);
    case MM_DTYPE_I8: return (int8_t)code;
    case MM_DTYPE_INT4: return (code & 8) ? (double)code - 16.0 : (double)code;
    case MM_DTYPE_FP8_E4M3FN: return mm_fp8_e4m3fn_to_f32((uint8_t)code);
    case MM_DTYPE_FP8_E5M2: return mm_fp8_e5m2_to_f32((uint8_t)code);
    default: return mm_fp4_e2m1_to_f32((uint8_t)code);
    }
}

/* Writes a code at logical index i of a row in API storage. */
static inline void gemm_put(mm_dtype d, uint8_t *row, int64_t i, uint32_t code) {
    if (mm_format_is_nibble(d))
        row[i / 2] |= (uint8_t)(code << ((i & 1) * 4));
    else if (d == MM_DTYPE_BF16) {
        uint16_t v = (uint16_t)code;
        memcpy(row + 2 * i, &v, 2);
    } else
        row[i] = (uint8_t)code;
}

static inline void gemm_case_make(gemm_case *c, mm_dtype a_dtype, mm_dtype w_dtype, int64_t rows, int64_t k,
                                  int64_t n, int transposed, int with_bias, uint64_t seed) {
    uint64_t rng = seed;
    memset(c, 0, sizeof *c);
    c->a_dtype = a_dtype, c->w_dtype = w_dtype, c->rows = rows, c->k = k, c->n = n;
    c->transposed = transposed, c->with_bias = with_bias;
    /* Row stride with slack so kernels reading past a row would read garbage, not the next row. */
    c->a_stride = mm_dtype_row_bytes(a_dtype, k) + 5;
    c->a = calloc((size_t)(rows * c->a_stride + 1), 1);
    c->deq_a = calloc((size_t)(rows * k + 1), sizeof(double));
    c->int_a = calloc((size_t)(rows * k + 1), sizeof(int64_t));
    int64_t kb = (k + 31) / 32;
    c->a_mx_stride = kb + 2;
    c->a_row_scales = calloc((size_t)rows + 1, sizeof(float));
    c->a_mx = calloc((size_t)(rows * c->a_mx_stride + 1), 1);
    for (int64_t r = 0; r < rows; r++) {
        memset(c->a + r * c->a_stride, 0xA5, (size_t)c->a_stride); /* slack bytes are garbage */
        memset(c->a + r * c->a_stride, 0, (size_t)mm_dtype_row_bytes(a_dtype, k));
        c->a_row_scales[r] = (float)mm_test_rand_uniform(&rng, 0.001, 0.1);
        for (int64_t g = 0; g < kb; g++)
            c->a_mx[r * c->a_mx_stride + g] = (uint8_t)(118 + mm_test_rand_u64(&rng) % 18);
        for (int64_t i = 0; i < k; i++) {
            uint32_t code = gemm_random_code(a_dtype, &rng);
            gemm_put(a_dtype, c->a + r * c->a_stride, i, code);
            double v = gemm_decode(a_dtype, code);
            c->int_a[r * k + i] = (int64_t)v;
            if (mm_format_is_mx(a_dtype)) v *= mm_e8m0_to_f32(c->a_mx[r * c->a_mx_stride + i / 32]);
            c->deq_a[r * k + i] = v;
        }
        /* An odd K leaves a padding nibble in the last byte of a 4-bit row: the caller may leave anything
         * there (docs/operators.md), so the kernels must ignore it. */
        if (mm_format_is_nibble(a_dtype) && (k & 1)) gemm_put(a_dtype, c->a + r * c->a_stride, k, 0x7);
    }
    int64_t stored_rows = transposed ? n : k, stored_len = transposed ? k : n;
    int64_t row_bytes = mm_dtype_row_bytes(w_dtype, stored_len);
    c->w = calloc((size_t)(stored_rows * row_bytes), 1);
    c->deq_w = calloc((size_t)(k * n), sizeof(double));
    c->int_w = calloc((size_t)(k * n), sizeof(int64_t));
    c->w_scales = calloc((size_t)n, sizeof(float));
    c->w_bias = calloc((size_t)n, sizeof(float));
    int64_t pairs = (k + 63) / 64;
    c->w_mx = calloc((size_t)(n * pairs * 2), 1);
    for (int64_t j = 0; j < n; j++) {
        c->w_scales[j] = (float)mm_test_rand_uniform(&rng, 0.001, 0.05);
        c->w_bias[j] = (float)mm_test_rand_uniform(&rng, -1.0, 1.0);
        for (int64_t g = 0; g < kb; g++)
            c->w_mx[j * pairs * 2 + g] = (uint8_t)(118 + mm_test_rand_u64(&rng) % 18);
    }
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++) {
            uint32_t code = gemm_random_code(w_dtype, &rng);
            int64_t srow = transposed ? j : i, scol = transposed ? i : j;
            gemm_put(w_dtype, c->w + srow * row_bytes, scol, code);
            double v = gemm_decode(w_dtype, code);
            c->int_w[i * n + j] = (int64_t)v;
            if (mm_format_is_mx(w_dtype)) v *= mm_e8m0_to_f32(c->w_mx[j * pairs * 2 + i / 32]);
            c->deq_w[i * n + j] = v;
        }
}

static inline void gemm_case_free(gemm_case *c) {
    free(c->a), free(c->a_row_scales), free(c->a_mx), free(c->w), free(c->w_scales), free(c->w_bias);
    free(c->w_mx), free(c->deq_a), free(c->deq_w), free(c->int_a), free(c->int_w);
}

static inline mm_gemm_weight_desc gemm_case_weights(const gemm_case *c) {
    mm_gemm_weight_desc d = {0};
    d.dtype = c->w_dtype, d.k = c->k, d.n = c->n, d.transposed = c->transposed, d.data = c->w;
    if (mm_format_is_int_quant(c->w_dtype)) d.scales = c->w_scales;
    if (c->w_dtype == MM_DTYPE_INT4 && c->with_bias) d.bias = c->w_bias;
    if (mm_format_is_mx(c->w_dtype)) d.mx_scales = c->w_mx;
    return d;
}

static inline mm_gemm_group gemm_case_group(const gemm_case *c, const mm_gemm_packed_weights *w, float *out,
                                            int64_t ldc) {
    mm_gemm_group g = {0};
    g.rows = c->rows, g.a = c->a, g.a_stride = c->a_stride, g.w = w, g.c = out, g.ldc = ldc;
    if (c->a_dtype == MM_DTYPE_I8) g.a_row_scales = c->a_row_scales;
    if (mm_format_is_mx(c->a_dtype)) g.a_mx_scales = c->a_mx, g.a_mx_stride = c->a_mx_stride;
    return g;
}

/* Expected value of output (r, j). INT pairs: *exact receives the exact F32 bits of the spec formula.
 * Float pairs: *value is the float64 sum and *abs_sum the sum of |products| (for error bounds). */
static inline void gemm_case_expect(const gemm_case *c, int64_t r, int64_t j, double *value, double *abs_sum,
                                    float *exact) {
    if (mm_format_is_int_quant(c->w_dtype)) {
        int64_t acc = 0, colsum = 0;
        for (int64_t i = 0; i < c->k; i++) {
            acc += c->int_a[r * c->k + i] * c->int_w[i * c->n + j];
            colsum += c->int_w[i * c->n + j];
        }
        float s = c->w_scales[j];
        float h = (float)acc * s;
        /* Without a bias the packed offset is 0 and is still added (as the kernels do). */
        if (c->w_dtype == MM_DTYPE_INT4) h += c->with_bias ? c->w_bias[j] - 8.0f * s * (float)colsum : 0.0f;
        *exact = h * c->a_row_scales[r];
        *value = *exact, *abs_sum = 0;
        return;
    }
    double sum = 0, abs = 0;
    for (int64_t i = 0; i < c->k; i++) {
        double p = c->deq_a[r * c->k + i] * c->deq_w[i * c->n + j];
        sum += p, abs += fabs(p);
    }
    *value = sum, *abs_sum = abs, *exact = 0;
}

/* The bound every F32 sequential sum of K exact products meets (documented with the kernels). */
static inline double gemm_f32_sum_bound(int64_t k, double abs_sum) {
    return (double)(k + 1) * ldexp(1.0, -24) * abs_sum + 1e-30;
}

static inline uint32_t gemm_f32_bits(float v) {
    return mm_test_f32_bits(v);
}

/* Whether got is output (r, j) as expected: the exact F32 bits of the spec formula for INT pairs,
 * otherwise within bound_scale x gemm_f32_sum_bound of the float64 sum (a NaN never is). *value receives
 * the expected value. */
static inline int gemm_case_output_ok(const gemm_case *c, int64_t r, int64_t j, float got, double bound_scale,
                                      double *value) {
    double abs_sum;
    float exact;
    gemm_case_expect(c, r, j, value, &abs_sum, &exact);
    if (mm_format_is_int_quant(c->w_dtype)) return gemm_f32_bits(got) == gemm_f32_bits(exact);
    return fabs((double)got - *value) <= bound_scale * gemm_f32_sum_bound(c->k, abs_sum);
}

/* What the tests write into an output before a call whose ldc leaves gaps after column N. */
#define GEMM_GAP_FILL 12345.0f

/* The number of gap elements (columns N..ldc-1) of a rows x ldc output that a call changed from
 * GEMM_GAP_FILL; says so once on stderr when there are any. */
static inline int gemm_gap_writes(const char *what, const gemm_case *c, const float *out, int64_t ldc) {
    int changed = 0;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t j = c->n; j < ldc; j++) changed += out[r * ldc + j] != GEMM_GAP_FILL;
    if (changed) fprintf(stderr, "%s: wrote past column N\n", what);
    return changed;
}

#endif
