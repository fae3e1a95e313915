/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ref_mx.c: the MX scenarios (A8W8-FP E4M3 / E5M2, A8W4-FP, A4W4-FP) on a case where every
 * quantization is exact except one element that each dispatch format rounds the same way, and the
 * pre-quantized pass-through.
 *
 * R = 2, E = 4 (2 per rank), K = 2 with weights (0.5, 0.25), H = 32, I = 2, swiglustep clamp 2.
 * x = {1, -2, 0.5, 3, 1.0625, 0 ...} (amax 3, one block of 32):
 *   E4M3: b = 128 - 8, x * 2^7: 1.0625 * 128 = 136 is a tie between 128 and 144 -> 128 (even) -> 1.
 *   E5M2: b = 128 - 15, 1.0625 lies between 1 and 1.25 -> 1.   E2M1: b = 126, 2.125 -> 2 -> 1.
 *   So every dispatch dtype sees x = {1, -2, 0.5, 3, 1, 0 ...}; the rest is exact in every format.
 * weight1 (k, n), values in {+-0.5, +-1, 2} (exact in E4M3, E5M2 and E2M1):
 *   g0: W[0] = 2, W[3] = 1            -> 2 + 3 = 5           (silu 4.97 > 2)
 *   g1: W[1] = -1, W[4] = 1           -> 2 + 1 = 3           (silu 2.86 > 2)
 *   u0: W[2] = 1, W[4] = 0.5          -> 0.5 + 0.5 = 1       (1.03125 if x[4] were not quantized)
 *   u1: W[0] = -1, W[2] = 1, channel scale byte 128 (x2) -> (-1 + 0.5) * 2 = -1
 *   a = (2 * 1, 2 * -1) = (2, -2), exact in every GEMM2 input type.
 * weight2 (j, n): W2[0][n] = {1, -0.5, 2, 0}[n % 4], W2[1][n] = n < 16 ? 0.5 : -1; scale byte of
 *   expert e = 127 - e on every channel: O_e[n] = (2 W2[0][n] - 2 W2[1][n]) * 2^-e.
 * y[n] = 0.5 O_e0[n] + 0.25 O_e1[n], exact in F32 and BF16 (checked). */
#include <math.h>

#include "megamoe/formats.h"
#include "ref/mega_moe_ref.h"
#include "ref/ref_case.h"
#include "test_ref_common.h"
#include "testlib.h"

#define NH 32

static const int64_t row_counts[2] = {1, 1};
static const float x_row[5] = {1.0f, -2.0f, 0.5f, 3.0f, 1.0625f};
static const int experts[2][2] = {{3, 0}, {1, 2}};

static double w2_0(int64_t n) {
    static const double v[4] = {1.0, -0.5, 2.0, 0.0};
    return v[n % 4];
}
static double w2_1(int64_t n) {
    return n < 16 ? 0.5 : -1.0;
}

static void setw(mm_ref_case *c, mm_ref_case_weights *w, int which, int64_t e, int64_t k, int64_t n,
                 float v) {
    mm_ref_case_set_weight(&c->attrs, w, which, e, k, n, mm_dtype_from_f32(w->dtype, v));
}

/* w_u0_x4: weight1 entry (k = 4, n = u0); 0.5 in the base case. */
static void fill(mm_ref_case *c, float w_u0_x4) {
    const mm_ref_attrs *a = &c->attrs;
    for (int r = 0; r < 2; r++) {
        mm_ref_case_rank *rk = &c->ranks[r];
        if (!a->x_prequantized) {
            for (int n = 0; n < NH; n++) rk->x_bf16[n] = mm_f32_to_bf16(n < 5 ? x_row[n] : 0.0f);
        } else { /* the producer quantized x itself: same bytes as the operator would make */
            uint16_t xb[NH];
            for (int n = 0; n < NH; n++) xb[n] = mm_f32_to_bf16(n < 5 ? x_row[n] : 0.0f);
            CHECK_OK(mm_mx_quantize_row_bf16(xb, NH, a->dispatch_dtype, rk->x_quant, rk->x_scales, NULL),
                     NULL);
        }
        rk->topk_ids[0] = experts[r][0];
        rk->topk_ids[1] = experts[r][1];
        rk->topk_weights[0] = 0.5f;
        rk->topk_weights[1] = 0.25f;
        for (int le = 0; le < 2; le++) {
            mm_ref_case_weights *w = &rk->routed;
            int64_t e = r * 2 + le;
            setw(c, w, 1, le, 0, 0, 2.0f);
            setw(c, w, 1, le, 3, 0, 1.0f);
            setw(c, w, 1, le, 1, 1, -1.0f);
            setw(c, w, 1, le, 4, 1, 1.0f);
            setw(c, w, 1, le, 2, 2, 1.0f);
            setw(c, w, 1, le, 4, 2, w_u0_x4);
            setw(c, w, 1, le, 0, 3, -1.0f);
            setw(c, w, 1, le, 2, 3, 1.0f);
            if (w->mx_scales1) mm_ref_case_set_mx_scale(a, w, 1, le, 3, 0, 128);
            for (int n = 0; n < NH; n++) {
                setw(c, w, 2, le, 0, n, (float)w2_0(n));
                setw(c, w, 2, le, 1, n, (float)w2_1(n));
                if (w->mx_scales2) mm_ref_case_set_mx_scale(a, w, 2, le, n, 0, (uint8_t)(127 - e));
            }
        }
    }
}

/* The case's attributes: R = 2, E = 4, K = 2, H = 32, I = 2, swiglustep clamp 2. */
static mm_ref_attrs mx_attrs(mm_dtype dispatch, mm_dtype act_out, int transpose, int prequantized,
                             mm_error *err) {
    mm_ref_attrs a = ref_attrs_sized(4, 2, 2, NH, 2);
    float clamp = 2.0f;
    a.dispatch_dtype = dispatch;
    a.activation_out_dtype = act_out;
    a.x_prequantized = prequantized;
    a.transpose_weight1 = a.transpose_weight2 = transpose;
    CHECK_OK(mm_ref_activation_init(&a.activation, MM_REF_ACT_SWIGLUSTEP, &clamp, 1, err), err);
    return a;
}

/* w_u0_x4 sets u0 = 0.5 + w_u0_x4 and a0 = 2 u0 before GEMM2; a0_gemm2 is a0 as the GEMM2 input type
 * represents it (the base case: 2). */
static void run_case_a0(mm_dtype wdtype, mm_dtype dispatch, mm_dtype act_out, int transpose, int prequantized,
                        float w_u0_x4, double a0_gemm2) {
    mm_error err_storage, *err = &err_storage;
    mm_ref_attrs a = mx_attrs(dispatch, act_out, transpose, prequantized, err);
    mm_ref_case c;
    CHECK_OK(mm_ref_case_alloc(&c, &a, row_counts, wdtype, 0, MM_DTYPE_INVALID, err), err);
    fill(&c, w_u0_x4);
    CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
    int bad = 0;
    for (int r = 0; r < 2; r++)
        for (int n = 0; n < NH; n++) {
            double base = a0_gemm2 * w2_0(n) - 2.0 * w2_1(n);
            double expect =
                0.5 * base * ldexp(1.0, -experts[r][0]) + 0.25 * base * ldexp(1.0, -experts[r][1]);
            CHECK(mm_bf16_to_f32(mm_f32_to_bf16((float)expect)) == expect); /* the case is exact */
            if (mm_bf16_to_f32(c.ranks[r].y[n]) != expect && bad++ < 3)
                mm_test_report_fail(__FILE__, __LINE__, "%s/%s: y[%d][%d] = %g, expected %g",
                                    mm_dtype_name(wdtype), mm_dtype_name(dispatch), r, n,
                                    (double)mm_bf16_to_f32(c.ranks[r].y[n]), expect);
        }
    CHECK_EQ_INT(bad, 0);
    for (int e = 0; e < 4; e++) CHECK_EQ_INT(c.ranks[e / 2].expert_token_nums[e % 2], 1);
    mm_ref_case_free(&c);
}

static void run_case(mm_dtype wdtype, mm_dtype dispatch, mm_dtype act_out, int transpose, int prequantized) {
    run_case_a0(wdtype, dispatch, act_out, transpose, prequantized, 0.5f, 2.0);
}

/* Control: the same case in A16W16 (BF16 weights with the MX scales folded into the values), where x
 * is not quantized. Then u0 = 0.5 + 0.5 * 1.0625 = 1.03125, a0 = 2.0625, and y[0] (W2[0][0] = 1,
 * W2[1][0] = 0.5) = 0.5 * 1.0625 * 2^-3 + 0.25 * 1.0625 * 2^0 = 0.33203125 instead of the MX cases'
 * 0.5 * 2^-3 + 0.25 = 0.3125: the MX results above pin the dispatch quantization. */
static void test_dispatch_rounding_matters(void) {
    mm_error err_storage, *err = &err_storage;
    mm_ref_attrs a = mx_attrs(MM_DTYPE_INVALID, MM_DTYPE_INVALID, 0, 0, err);
    mm_ref_case c;
    CHECK_OK(mm_ref_case_alloc(&c, &a, row_counts, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, err), err);
    fill(&c, 0.5f);
    for (int r = 0; r < 2; r++)
        for (int le = 0; le < 2; le++) {
            int64_t e = r * 2 + le;
            setw(&c, &c.ranks[r].routed, 1, le, 0, 3, -2.0f);
            setw(&c, &c.ranks[r].routed, 1, le, 2, 3, 2.0f);
            for (int n = 0; n < NH; n++) {
                setw(&c, &c.ranks[r].routed, 2, le, 0, n, (float)ldexp(w2_0(n), (int)-e));
                setw(&c, &c.ranks[r].routed, 2, le, 1, n, (float)ldexp(w2_1(n), (int)-e));
            }
        }
    CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
    double expect0 = 0.5 * 1.0625 * ldexp(1.0, -experts[0][0]) + 0.25 * 1.0625 * ldexp(1.0, -experts[0][1]);
    CHECK(expect0 == 0.33203125);
    CHECK(mm_bf16_to_f32(c.ranks[0].y[0]) == (float)expect0);
    mm_ref_case_free(&c);
}

int main(void) {
    run_case(MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_INVALID, 1, 0);
    run_case(MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_INVALID, 0, 0);
    run_case(MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2, MM_DTYPE_INVALID, 1, 0);
    run_case(MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN, 1, 0); /* activation_out_dtype */
    run_case(MM_DTYPE_FP4_E2M1, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_INVALID, 1, 0);  /* A8W4-FP */
    run_case(MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, MM_DTYPE_INVALID, 1, 0);    /* A4W4-FP */
    run_case(MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, MM_DTYPE_FP8_E5M2, 0, 0);
    run_case(MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_INVALID, 1, 1); /* pre-quantized x */
    run_case(MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, MM_DTYPE_INVALID, 1, 1);
    /* The GEMM2 input type: with weight1 (4, u0) = 0.4375 (exact in E4M3), u0 = 0.9375 and a0 = 1.875 =
     * 1.111b. In an E4M3 block of amax 2 it is exact; E5M2 keeps 2 mantissa bits, and 1.875 is the tie
     * between 1.75 (odd mantissa) and 2.0 (even) -> 2.0. So activation_out_dtype E5M2 gives the base
     * case's a0 = 2 and E4M3 keeps 1.875. */
    run_case_a0(MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_INVALID, 1, 0, 0.4375f, 1.875);
    run_case_a0(MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, 1, 0, 0.4375f, 2.0);
    test_dispatch_rounding_matters();
    return mm_test_finish("test_ref_mx");
}
