/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_model_router.c: the public routers (megamoe/model.h) against hand-computed values: exact
 * BF16 dot products for the logits, softmax probabilities, top-k order with ties to the lower index,
 * the renormalized and plain rules, a row of huge logits, and the argument errors. */
#include <math.h>

#include "megamoe/formats.h"
#include "megamoe/model.h"
#include "testlib.h"

static mm_tensor t2(mm_dtype d, int64_t a, int64_t b, void *data) {
    int64_t s[2] = {a, b};
    return mm_tensor_make(d, 2, s, data);
}

static void test_logits(void) {
    mm_error err;
    /* x rows [1, 2, -0.5] and [0.25, -3, 8]; gate rows [0.5, 0.25, 2] and [-1, 1, 4]: every value is
     * exact in BF16 and every product and sum exact in F32. */
    const float xv[6] = {1, 2, -0.5f, 0.25f, -3, 8}, gv[6] = {0.5f, 0.25f, 2, -1, 1, 4};
    uint16_t xb[6], gb[6];
    for (int i = 0; i < 6; i++) xb[i] = mm_f32_to_bf16(xv[i]), gb[i] = mm_f32_to_bf16(gv[i]);
    float out[4] = {9, 9, 9, 9};
    mm_tensor x = t2(MM_DTYPE_BF16, 2, 3, xb), g = t2(MM_DTYPE_BF16, 2, 3, gb),
              l = t2(MM_DTYPE_F32, 2, 2, out);
    CHECK_OK(mm_router_logits(&x, &g, &l, &err), &err);
    CHECK(out[0] == 0.0f);                   /* 0.5 + 0.5 - 1 */
    CHECK(out[1] == -1.0f);                  /* -1 + 2 - 2 */
    CHECK(out[2] == 0.125f - 0.75f + 16.0f); /* 15.375 */
    CHECK(out[3] == -0.25f - 3.0f + 32.0f);  /* 28.75 */
    mm_tensor bad = t2(MM_DTYPE_F32, 2, 3, NULL);
    CHECK_STATUS(mm_router_logits(&bad, &g, &l, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "x has dtype f32, must be bf16");
    mm_tensor l3 = t2(MM_DTYPE_F32, 2, 3, out);
    CHECK_STATUS(mm_router_logits(&x, &g, &l3, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "logits has shape [2, 3], must be [2, 2] (T, E)");
}

static void test_topk(void) {
    mm_error err;
    /* row 0: p proportional to [1, 2, 2, 4] (logits 0, ln 2, ln 2, ln 4): expert 3, then the tie of 1 and
     * 2 goes to 1. row 1: all equal: experts 0, 1 with p = 1/4. row 2: huge logits 1000 and 999 (the
     * softmax subtracts the maximum): p = 1 / (1 + e^-1), e^-1 / (1 + e^-1); the others underflow to 0. */
    const float ln2 = logf(2.0f);
    float logits[12] = {0, ln2, ln2, 2 * ln2, 5, 5, 5, 5, 999, 1000, -1000, -1000};
    int32_t ids[6];
    float w[6];
    mm_tensor l = t2(MM_DTYPE_F32, 3, 4, logits), ti = t2(MM_DTYPE_I32, 3, 2, ids),
              tw = t2(MM_DTYPE_F32, 3, 2, w);
    CHECK_OK(mm_router_topk(MM_ROUTER_SOFTMAX_TOPK, &l, &ti, &tw, &err), &err);
    CHECK_EQ_INT(ids[0], 3);
    CHECK_EQ_INT(ids[1], 1);
    CHECK_NEAR(w[0], 4.0 / 9.0, 1e-6);
    CHECK_NEAR(w[1], 2.0 / 9.0, 1e-6);
    CHECK_EQ_INT(ids[2], 0);
    CHECK_EQ_INT(ids[3], 1);
    CHECK(w[2] == 0.25f && w[3] == 0.25f);
    CHECK_EQ_INT(ids[4], 1);
    CHECK_EQ_INT(ids[5], 0);
    CHECK_NEAR(w[4], 1.0 / (1.0 + exp(-1.0)), 1e-6);
    CHECK_NEAR(w[5], exp(-1.0) / (1.0 + exp(-1.0)), 1e-6);
    CHECK_OK(mm_router_topk(MM_ROUTER_SOFTMAX_TOPK_RENORM, &l, &ti, &tw, &err), &err);
    CHECK_EQ_INT(ids[0], 3);
    CHECK_EQ_INT(ids[1], 1);
    CHECK_NEAR(w[0], 2.0 / 3.0, 1e-6);
    CHECK_NEAR(w[1], 1.0 / 3.0, 1e-6);
    CHECK(w[2] == 0.5f && w[3] == 0.5f);
    CHECK_NEAR(w[4] + w[5], 1.0, 1e-6);
    CHECK_NEAR(w[4], 1.0 / (1.0 + exp(-1.0)), 1e-6); /* p_0 + p_1 = 1 already */
    /* K = E: every expert once, in descending p, ties by index */
    int32_t all[4];
    float wa[4];
    mm_tensor la = t2(MM_DTYPE_F32, 1, 4, logits), ta = t2(MM_DTYPE_I32, 1, 4, all),
              twa = t2(MM_DTYPE_F32, 1, 4, wa);
    CHECK_OK(mm_router_topk(MM_ROUTER_SOFTMAX_TOPK_RENORM, &la, &ta, &twa, &err), &err);
    CHECK(all[0] == 3 && all[1] == 1 && all[2] == 2 && all[3] == 0);
    CHECK_NEAR(wa[3], 1.0 / 9.0, 1e-6);
    /* T = 0 is fine */
    mm_tensor l0 = t2(MM_DTYPE_F32, 0, 4, NULL), i0 = t2(MM_DTYPE_I32, 0, 2, NULL),
              w0 = t2(MM_DTYPE_F32, 0, 2, NULL);
    CHECK_OK(mm_router_topk(MM_ROUTER_SOFTMAX_TOPK, &l0, &i0, &w0, &err), &err);
}

static void test_errors(void) {
    mm_error err;
    float logits[4] = {0, 1, NAN, 2};
    int32_t ids[3];
    float w[3];
    mm_tensor l = t2(MM_DTYPE_F32, 2, 2, logits), ti = t2(MM_DTYPE_I32, 2, 1, ids),
              tw = t2(MM_DTYPE_F32, 2, 1, w);
    CHECK_STATUS(mm_router_topk(MM_ROUTER_SOFTMAX_TOPK, &l, &ti, &tw, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "logits[1][0] = nan is not finite");
    mm_tensor l1 = t2(MM_DTYPE_F32, 1, 2, logits), i3 = t2(MM_DTYPE_I32, 1, 3, ids),
              w3 = t2(MM_DTYPE_F32, 1, 3, w);
    CHECK_STATUS(mm_router_topk(MM_ROUTER_SOFTMAX_TOPK, &l1, &i3, &w3, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "topk = 3 is outside [1, 2]");
    mm_tensor wi = t2(MM_DTYPE_I32, 2, 1, w);
    CHECK_STATUS(mm_router_topk(MM_ROUTER_SOFTMAX_TOPK, &l, &ti, &wi, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "topk_weights has dtype int32, must be f32");
    CHECK_STATUS(mm_router_topk((mm_router_rule)7, &l, &ti, &tw, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "rule = 7 is not a router rule");
    CHECK(strcmp(mm_router_rule_name(MM_ROUTER_SOFTMAX_TOPK_RENORM), "softmax-topk-renorm") == 0);
    CHECK(strcmp(mm_router_rule_name(MM_ROUTER_SOFTMAX_TOPK), "softmax-topk") == 0);
    CHECK(strcmp(mm_router_rule_name((mm_router_rule)9), "invalid") == 0);
}

int main(void) {
    test_logits();
    test_topk();
    test_errors();
    return mm_test_finish("test_model_router");
}
