/* SPDX-License-Identifier: Apache-2.0 */
/* ffn/activation.h: the activation table of the expert FFN, the one place that knows an activation.
 *
 * Each row of the table (activation.c) gives the activation's name, its parameter rules (how many
 * activation_params it takes, which values are allowed, the defaults), whether it is gated (GEMM1
 * writes [gate | up], 2I values, and the activation returns I) or elementwise (all 2I values
 * activated), the GEMM2 reduction factor that follows (I or 2I input), its scalar form and, when it
 * has one, its AVX-512 row form (activation_avx512.c), bit-identical to the scalar form.
 *
 * Adding an activation: the enum value in include/megamoe/mega_moe.h, one row here (activation.c), its
 * vector form in activation_avx512.c if it has one, its float64 definition in support/ref/activation_ref.c.
 *
 * The fast forms evaluate in F32 (the spec says "activation in F32") with the exp below, which the
 * vector forms repeat operation for operation, and the C library's tanhf; the float64 reference rounds
 * an exact evaluation once, so the two agree to a few F32 ulps (tests/test_mega_moe_activation.c). */
#ifndef MEGAMOE_FFN_ACTIVATION_H
#define MEGAMOE_FFN_ACTIVATION_H

#include <stdint.h>
#include <string.h>

#include "megamoe/mega_moe.h"

struct mm_ffn_act;
/* out[j] = the activation of (g[j], u[j]) for j < n (u unused when not gated; out may be g). */
typedef void (*mm_ffn_act_rows_fn)(const struct mm_ffn_act *act, const float *g, const float *u, float *out,
                                   int64_t n);

/* An activation with its parameters resolved. */
typedef struct mm_ffn_act {
    mm_mega_moe_activation kind;
    float clamp; /* 0 = none */
    float alpha, beta;
    int has_linear_beta;
    float linear_beta;
    /* The row form chosen once by mm_ffn_act_resolve (vector or portable), so the GEMM1 epilogue's
     * per-tile calls skip the table lookup and CPU check; NULL (an act not made by resolve): chosen
     * per call. */
    mm_ffn_act_rows_fn rows;
} mm_ffn_act;

/* One row of the activation table. */
typedef struct mm_ffn_act_info {
    mm_mega_moe_activation kind;
    const char *name;
    int gated;                  /* 1: out[j] = f(h[j], h[I + j]), j < I; 0: out[j] = f(h[j]), j < 2I */
    int k2_factor;              /* GEMM2 reduction length = k2_factor * I (its input width) */
    int min_params, max_params; /* activation_param_count is 0 (defaults) or in [min, max] */
    const char *param_rule;     /* the accepted lists, for messages */
    /* Checks the values of a non-empty parameter list and writes them into act (defaults already set). */
    mm_status (*params)(const float *p, int n, mm_ffn_act *act, mm_error *err);
    float (*scalar)(const mm_ffn_act *act, float g, float u); /* u unused when not gated */
    mm_ffn_act_rows_fn vector;                                /* AVX-512 rows, NULL = scalar loop */
} mm_ffn_act_info;

/* The table entry of kind (NULL for an unknown value), and the whole table in enum order. */
const mm_ffn_act_info *mm_ffn_act_info_of(mm_mega_moe_activation kind);
const mm_ffn_act_info *mm_ffn_act_table(int *count);

/* Resolves an activation and its parameter list by the table's rules; fails naming the rule. */
mm_status mm_ffn_act_resolve(mm_mega_moe_activation kind, const float *params, int param_count,
                             mm_ffn_act *act, mm_error *err);
/* GEMM2's reduction length for intermediate size inter (0 for an unknown activation). */
int64_t mm_ffn_act_k2(mm_mega_moe_activation kind, int64_t inter);

/* Rows of the activation: the vector form when the CPU has AVX-512 (and MEGAMOE_ISA is not ref) and
 * the activation has one, else the scalar loop; both give the same bits. */
void mm_ffn_act_rows(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n);
void mm_ffn_act_rows_portable(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n);
/* One GEMM1 output row h (2I values, gate then up) to its k2_factor * I activation values (out may
 * be h: output j reads only inputs j and I + j). */
void mm_ffn_act_row(const mm_ffn_act *act, const float *h, int64_t inter, float *out);

/* Scalar forms, for the tests and callers that evaluate one value. */
float mm_ffn_act_scalar(const mm_ffn_act *act, float g, float u);

/* exp in F32 for the activations, written so that a vector version (activation_avx512.c) repeats it
 * operation for operation and gives the same bits: x clamped to [-87, 88] (the sigmoids saturate long
 * before: beyond it 1 + e^x is exactly 1 or e^x alone), x = k ln2 + r with k = round(x / ln2) (the
 * 1.5 * 2^23 trick) and ln2 in two parts (k * LN2_HI exact), e^r by its degree-7 Taylor polynomial
 * (|r| <= ln2 / 2: truncation below 0.1 ulp), times 2^k built from the exponent bits. NaN stays NaN.
 * Every product and sum is one rounded F32 operation (no contraction in ISO C mode). */
#define MM_FFN_EXP_HI     88.0f
#define MM_FFN_EXP_LO     (-87.0f)
#define MM_FFN_EXP_LOG2E  1.44269504f
#define MM_FFN_EXP_MAGIC  12582912.0f /* 1.5 * 2^23, bits 0x4B400000 */
#define MM_FFN_EXP_LN2_HI 0.693359375f
#define MM_FFN_EXP_LN2_LO (-2.12194440e-4f)
#define MM_FFN_EXP_C7     1.98412701e-4f /* 1/5040 */
#define MM_FFN_EXP_C6     1.38888892e-3f /* 1/720 */
#define MM_FFN_EXP_C5     8.33333377e-3f /* 1/120 */
#define MM_FFN_EXP_C4     4.16666679e-2f /* 1/24 */
#define MM_FFN_EXP_C3     1.66666672e-1f /* 1/6 */
#define MM_FFN_EXP_C2     0.5f

static inline float mm_ffn_exp_f32(float x) {
    x = x > MM_FFN_EXP_HI ? MM_FFN_EXP_HI : x;
    x = x < MM_FFN_EXP_LO ? MM_FFN_EXP_LO : x;
    float t = x * MM_FFN_EXP_LOG2E;
    t = t + MM_FFN_EXP_MAGIC;
    float kf = t - MM_FFN_EXP_MAGIC;
    uint32_t tb;
    memcpy(&tb, &t, 4);
    uint32_t sb = (tb - 0x4B400000u + 127u) << 23; /* 2^k, k in [-126, 127] */
    float r = x - kf * MM_FFN_EXP_LN2_HI;
    r = r - kf * MM_FFN_EXP_LN2_LO;
    float p = MM_FFN_EXP_C7;
    p = p * r + MM_FFN_EXP_C6;
    p = p * r + MM_FFN_EXP_C5;
    p = p * r + MM_FFN_EXP_C4;
    p = p * r + MM_FFN_EXP_C3;
    p = p * r + MM_FFN_EXP_C2;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    float scale;
    memcpy(&scale, &sb, 4);
    return p * scale;
}

static inline float mm_ffn_sigmoid_f32(float z) {
    return 1.0f / (1.0f + mm_ffn_exp_f32(-z));
}

/* activation_avx512.c: the vector forms (call only when mm_cpu_isa() >= MM_ISA_AVX512). */
void mm_ffn_swiglu_avx512(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n);
void mm_ffn_swiglustep_avx512(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n);
void mm_ffn_swigluoai_avx512(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n);

#endif
