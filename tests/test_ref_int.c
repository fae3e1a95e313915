/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ref_int.c: A8W8-INT and A8W4-INT through the whole reference, with integer accumulators
 * and scales derived by hand below.
 *
 * R = 2, E = 4 (2 per rank), K = 1 (weight 1), H = 32, I = 2, swiglustep with clamp 2 (so that
 * min(silu(g), 2) = 2 exactly for the gates used, and a = 2 * clip(u, -2, 2) is exact).
 * Rank 0 row 0 goes to expert 3 (rank 1), rank 1 row 0 goes to expert 0 (rank 0); same x, same weights.
 *
 * x = {127, -3, 5, 100, 0.5, 0, 2.5, 0 ..., x[31] = -127}: amax 127, s_X = 127/127 = 1,
 *   div-away q = {127, -3, 5, 100, 1, 0, 3, 0 ..., -127} (0.5 -> 1 and 2.5 -> 3: away from zero;
 *   half-even would give 0 and 2).
 * weight1 (k, n), all in INT4 range, per-column scales s_W1 = (1/64, 1/64, 1/256, 1/128):
 *   gate0 n=0: W[0]=2, W[1]=-1                           acc = 254 + 3         = 257 -> h = 4.015625
 *   gate1 n=1: W[0]=1, W[3]=1, W[2]=-7                   acc = 127 + 100 - 35  = 192 -> h = 3
 *   up0   n=2: W[0]=1, W[1]=-1, W[3]=-1, W[4]=2, W[6]=-1 acc = 127+3-100+2-3  = 29  -> h = 29/256
 *   up1   n=3: W[31]=1                                   acc = -127                -> h = -127/128
 *   silu(4.015625) = 3.94 and silu(3) = 2.86 exceed 2, so a = (2 h2, 2 h3) = (0.2265625, -1.984375).
 * GEMM2 input, mul-even: amax 1.984375 = 127/64, m = 127 / amax = 64 exactly, a0 * m = 14.5 is a tie:
 *   half-even gives q = (14, -127) (div-away would give 15); s_A = F32(1.984375 / 127) = 2^-6.
 * weight2 (j, n): W2[0][n] = n % 16 - 8, W2[1][n] = n % 3 - 1; s_W2 = 0.5.
 *   D[n] = 14 * W2[0][n] - 127 * W2[1][n]; O[n] = bf16(F32(D * 0.5 * 2^-6)); y = O (K = 1, w = 1).
 *   e.g. D[0] = -112 + 127 = 15 -> y = 15/128; D[8] = -127; D[17] = -98 - 127 = -225.
 * A8W4-INT with the standard bias (bias = 8 * s_W * colsum) gives the same y. With bias1 = standard
 * + (0, 0, 1, 0): u0 = 1 + 29/256, a = (2.2265625, -1.984375), m = F32(127 / 2.2265625) = 57.0386,
 * q = (127, rne(-113.19) = -113), s_A = F32(2.2265625 / 127); with bias2 = standard + 1:
 * O[n] = bf16(F32((D' * 0.5 + 1) * s_A)), D'[n] = 127 * W2[0][n] - 113 * W2[1][n]. */
#include "megamoe/formats.h"
#include "ref/mega_moe_ref.h"
#include "ref/ref_case.h"
#include "test_ref_common.h"
#include "testlib.h"

#define NH 32

static const int64_t row_counts[2] = {1, 1};

static int w2_0(int64_t n) {
    return (int)(n % 16) - 8;
}
static int w2_1(int64_t n) {
    return (int)(n % 3) - 1;
}

static void set_int(const mm_ref_attrs *a, mm_ref_case_weights *w, int which, int64_t e, int64_t k, int64_t n,
                    int v) {
    mm_ref_case_set_weight(a, w, which, e, k, n, (uint32_t)v);
}

/* Fills the case; bias_delta1 goes to column 2 of bias1, bias_delta2 to every column of bias2. */
static void fill(mm_ref_case *c, float bias_delta1, float bias_delta2) {
    const mm_ref_attrs *a = &c->attrs;
    static const float x[8] = {127.0f, -3.0f, 5.0f, 100.0f, 0.5f, 0.0f, 2.5f, 0.0f};
    for (int r = 0; r < 2; r++) {
        mm_ref_case_rank *rk = &c->ranks[r];
        for (int n = 0; n < NH; n++)
            rk->x_bf16[n] = mm_f32_to_bf16(n < 8 ? x[n] : (n == 31 ? -127.0f : 0.0f));
        rk->topk_ids[0] = r == 0 ? 3 : 0;
        rk->topk_weights[0] = 1.0f;
        for (int le = 0; le < 2; le++) {
            mm_ref_case_weights *w = &rk->routed;
            /* weight1 columns as in the header comment */
            static const float scales1[4] = {1.0f / 64.0f, 1.0f / 64.0f, 1.0f / 256.0f, 1.0f / 128.0f};
            set_int(a, w, 1, le, 0, 0, 2);
            set_int(a, w, 1, le, 1, 0, -1);
            set_int(a, w, 1, le, 0, 1, 1);
            set_int(a, w, 1, le, 3, 1, 1);
            set_int(a, w, 1, le, 2, 1, -7);
            set_int(a, w, 1, le, 0, 2, 1);
            set_int(a, w, 1, le, 1, 2, -1);
            set_int(a, w, 1, le, 3, 2, -1);
            set_int(a, w, 1, le, 4, 2, 2);
            set_int(a, w, 1, le, 6, 2, -1);
            set_int(a, w, 1, le, 31, 3, 1);
            for (int n = 0; n < 4; n++) w->scales1[le * 4 + n] = scales1[n];
            for (int n = 0; n < NH; n++) {
                set_int(a, w, 2, le, 0, n, w2_0(n));
                set_int(a, w, 2, le, 1, n, w2_1(n));
                w->scales2[le * NH + n] = 0.5f;
            }
            if (w->bias1) {
                /* standard bias: 8 * s_W * column sum (colsums 1, -5, 0, 1) */
                static const int colsum1[4] = {1, -5, 0, 1};
                for (int n = 0; n < 4; n++)
                    w->bias1[le * 4 + n] =
                        8.0f * scales1[n] * (float)colsum1[n] + (n == 2 ? bias_delta1 : 0.0f);
                for (int n = 0; n < NH; n++)
                    w->bias2[le * NH + n] = 4.0f * (float)(w2_0(n) + w2_1(n)) + bias_delta2;
            }
        }
    }
}

/* The case (transposed weights or not) with wdtype weights, allocated and filled (fill's bias deltas). */
static void int_case(mm_ref_case *c, mm_dtype wdtype, int transpose, float bias_delta1, float bias_delta2,
                     mm_error *err) {
    mm_ref_attrs a = ref_attrs_sized(4, 2, 1, NH, 2);
    float clamp = 2.0f;
    a.dispatch_dtype = MM_DTYPE_I8;
    a.transpose_weight1 = a.transpose_weight2 = transpose;
    mm_ref_activation_init(&a.activation, MM_REF_ACT_SWIGLUSTEP, &clamp, 1, NULL);
    CHECK_OK(mm_ref_case_alloc(c, &a, row_counts, wdtype, 0, MM_DTYPE_INVALID, err), err);
    fill(c, bias_delta1, bias_delta2);
}

/* Runs and compares y of both ranks with expect(n); checks expert_token_nums (rank 0: {1, 0},
 * rank 1: {0, 1}). */
static void run_and_check(mm_dtype wdtype, int transpose, float bias_delta1, float bias_delta2, int q0,
                          int q1, float a_amax, float o_offset) {
    mm_error err_storage, *err = &err_storage;
    mm_ref_case c;
    int_case(&c, wdtype, transpose, bias_delta1, bias_delta2, err);
    CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
    float s_a = a_amax / 127.0f;
    int bad = 0;
    for (int r = 0; r < 2; r++)
        for (int n = 0; n < NH; n++) {
            int d = q0 * w2_0(n) + q1 * w2_1(n);
            uint16_t expect = mm_f32_to_bf16((float)(((double)d * 0.5 + o_offset) * (double)s_a));
            if (c.ranks[r].y[n] != expect && bad++ < 3)
                mm_test_report_fail(__FILE__, __LINE__, "%s y[%d][%d] = 0x%04x, expected 0x%04x (D = %d)",
                                    mm_dtype_name(wdtype), r, n, c.ranks[r].y[n], expect, d);
        }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(c.ranks[0].expert_token_nums[0], 1);
    CHECK_EQ_INT(c.ranks[0].expert_token_nums[1], 0);
    CHECK_EQ_INT(c.ranks[1].expert_token_nums[0], 0);
    CHECK_EQ_INT(c.ranks[1].expert_token_nums[1], 1);
    mm_ref_case_free(&c);
}

static void test_spot_values(void) {
    /* D[0] = 14 * -8 - 127 * -1 = 15 -> 15 * 0.5 * 2^-6 = 15/128; D[8] = -127 -> -127/128;
     * D[17] = 14 * -7 - 127 * 1 = -225 -> -225/128 (exact in BF16) */
    mm_error err_storage, *err = &err_storage;
    mm_ref_case c;
    int_case(&c, MM_DTYPE_I8, 0, 0.0f, 0.0f, err);
    CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
    CHECK(mm_bf16_to_f32(c.ranks[0].y[0]) == 15.0f / 128.0f);
    CHECK(mm_bf16_to_f32(c.ranks[0].y[8]) == -127.0f / 128.0f);
    CHECK(mm_bf16_to_f32(c.ranks[1].y[17]) == -225.0f / 128.0f);
    mm_ref_case_free(&c);
}

static void test_errors(void) {
    mm_error err_storage, *err = &err_storage;
    mm_ref_case c;
    int_case(&c, MM_DTYPE_INT4, 0, 0.0f, 0.0f, err);
    c.inputs[1].routed.bias2 = NULL; /* A8W4-INT needs both biases */
    CHECK_STATUS(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "bias2");
    c.inputs[1].routed.bias2 = c.ranks[1].routed.bias2;
    c.attrs.dispatch_dtype = MM_DTYPE_FP8_E4M3FN; /* INT4 weights do not pair with MX dispatch */
    CHECK_STATUS(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "scenario");
    c.attrs.dispatch_dtype = MM_DTYPE_I8;
    c.attrs.activation_out_dtype = MM_DTYPE_FP8_E4M3FN; /* overrides only FP scenarios */
    CHECK_STATUS(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "activation_out_dtype");
    c.attrs.activation_out_dtype = MM_DTYPE_INVALID;
    c.ranks[0].topk_ids[0] = 4;
    CHECK_STATUS(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "topk_ids[0][0] = 4 is outside [0, 4)");
    CHECK_EQ_INT(c.ranks[0].y[0], 0); /* nothing written on failure */
    mm_ref_case_free(&c);
}

int main(void) {
    run_and_check(MM_DTYPE_I8, 0, 0.0f, 0.0f, 14, -127, 1.984375f, 0.0);
    run_and_check(MM_DTYPE_I8, 1, 0.0f, 0.0f, 14, -127, 1.984375f, 0.0);
    run_and_check(MM_DTYPE_INT4, 0, 0.0f, 0.0f, 14, -127, 1.984375f, 0.0); /* standard bias */
    run_and_check(MM_DTYPE_INT4, 1, 0.0f, 0.0f, 14, -127, 1.984375f, 0.0);
    run_and_check(MM_DTYPE_INT4, 0, 1.0f, 1.0f, 127, -113, 2.2265625f, 1.0); /* non-standard bias */
    run_and_check(MM_DTYPE_INT4, 1, 1.0f, 1.0f, 127, -113, 2.2265625f, 1.0);
    test_spot_values();
    test_errors();
    return mm_test_finish("test_ref_int");
}
