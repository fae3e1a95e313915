/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_model_router_route.c: mm_router_route's DeepSeek-V3 and gpt-oss rules against hand-computed
 * cases: group scores (sum of the top 2 biased scores), the kept groups with a tie, the best single
 * expert of a dropped group left out, transformers' masked_fill(0.0) letting dropped experts beat
 * negative biased scores, weights from the unbiased sigmoid (normalized or not, scaled), ties to the
 * lower index; gpt-oss's bias, top-k of the logits and the softmax over the chosen; parameter errors. */
#include <math.h>
#include <string.h>

#include "megamoe/model.h"
#include "testlib.h"

static mm_tensor t2(mm_dtype d, int64_t a, int64_t b, void *data) {
    int64_t s[2] = {a, b};
    return mm_tensor_make(d, 2, s, data);
}

static mm_tensor t1(float *data, int64_t n) {
    return mm_tensor_make(MM_DTYPE_F32, 1, &n, data);
}

static void test_groups(void) {
    mm_error err;
    /* logits 0: s = 0.5 exactly. bias (multiples of 1/8, exact): c = 0.5 + bias =
     * [0.625, 0.5 | 0.75, 0.375 | 0.625, 0.625 | 0, 0.875]; group scores 1.125, 1.125, 1.25, 0.875:
     * groups 2 and 0 kept (0 and 1 tie: the lower index), so expert 7 (the best c) is out;
     * masked c = [0.625, 0.5, 0, 0, 0.625, 0.625, 0, 0]: top 3 = 0, 4, 5 (a three-way tie, by index). */
    float logits[8] = {0}, bias[8] = {0.125f, 0, 0.25f, -0.125f, 0.125f, 0.125f, -0.5f, 0.375f};
    int32_t ids[3];
    float w[3];
    mm_tensor l = t2(MM_DTYPE_F32, 1, 8, logits), ti = t2(MM_DTYPE_I32, 1, 3, ids),
              tw = t2(MM_DTYPE_F32, 1, 3, w), tb = t1(bias, 8);
    mm_router_params p = mm_router_default_params(MM_ROUTER_SIGMOID_GROUP_TOPK);
    p.n_group = 4;
    p.topk_group = 2;
    p.scaling = 2.5f;
    p.bias = &tb;
    CHECK_OK(mm_router_route(&p, &l, &ti, &tw, &err), &err);
    CHECK(ids[0] == 0 && ids[1] == 4 && ids[2] == 5);
    CHECK(w[0] == 1.25f && w[1] == 1.25f && w[2] == 1.25f); /* 0.5 * 2.5, not normalized */
    p.normalize = 1;
    CHECK_OK(mm_router_route(&p, &l, &ti, &tw, &err), &err);
    CHECK_NEAR(w[0], 2.5 / 3.0, 1e-6);
    CHECK_NEAR(w[0] + w[1] + w[2], 2.5, 1e-6);
    /* topk_group 3: group 1 (c 0.75) joins: top 3 = 2, 0, 4 */
    p.topk_group = 3;
    CHECK_OK(mm_router_route(&p, &l, &ti, &tw, &err), &err);
    CHECK(ids[0] == 2 && ids[1] == 0 && ids[2] == 4);
    /* no bias, logits ln 3 and -ln 3: s = 0.75 and 0.25 */
    float l2v[8] = {0, logf(3.0f), -logf(3.0f), 0, 0, 0, 0, 0};
    mm_tensor l2 = t2(MM_DTYPE_F32, 1, 8, l2v);
    p.bias = NULL;
    p.normalize = 0;
    p.scaling = 1.0f;
    p.topk_group = 1; /* group 0 (0.5 + 0.75) beats group 1 (0.25 + 0.5) and groups 2, 3 (1.0) */
    int32_t ids2[2];
    float w2[2];
    mm_tensor ti2 = t2(MM_DTYPE_I32, 1, 2, ids2), tw2 = t2(MM_DTYPE_F32, 1, 2, w2);
    CHECK_OK(mm_router_route(&p, &l2, &ti2, &tw2, &err), &err);
    CHECK(ids2[0] == 1 && ids2[1] == 0);
    CHECK_NEAR(w2[0], 0.75, 1e-6);
    CHECK_NEAR(w2[1], 0.5, 1e-6);
}

static void test_masked_zero(void) {
    mm_error err;
    /* c = 0.5 + bias = [-0.25, -0.125 | -0.5, -0.5]: group 0 kept (-0.375 > -1); transformers fills the
     * dropped experts' c with 0.0, which beats the kept experts' negative c: experts 2 and 3 win. */
    float logits[4] = {0}, bias[4] = {-0.75f, -0.625f, -1, -1};
    int32_t ids[2];
    float w[2];
    mm_tensor l = t2(MM_DTYPE_F32, 1, 4, logits), ti = t2(MM_DTYPE_I32, 1, 2, ids),
              tw = t2(MM_DTYPE_F32, 1, 2, w), tb = t1(bias, 4);
    mm_router_params p = mm_router_default_params(MM_ROUTER_SIGMOID_GROUP_TOPK);
    p.n_group = 2;
    p.topk_group = 1;
    p.bias = &tb;
    CHECK_OK(mm_router_route(&p, &l, &ti, &tw, &err), &err);
    CHECK(ids[0] == 2 && ids[1] == 3);
    CHECK(w[0] == 0.5f && w[1] == 0.5f);
}

static void test_topk_softmax(void) {
    mm_error err;
    /* l = logits + bias = [1, 3, 3.5, 2.5]: top 2 = 2, 1; w = softmax(3.5, 3). Row 1, no bias effect
     * (below) on a tie: [2, 2, 1.5, 1.5] -> 0, 1 with 0.5 each. */
    float logits[8] = {1, 3, 2, 3, 2, 2, 1.5f, 1.5f}, bias[4] = {0, 0, 1.5f, -0.5f};
    int32_t ids[4];
    float w[4];
    mm_tensor l = t2(MM_DTYPE_F32, 2, 4, logits), ti = t2(MM_DTYPE_I32, 2, 2, ids),
              tw = t2(MM_DTYPE_F32, 2, 2, w), tb = t1(bias, 4);
    mm_router_params p = mm_router_default_params(MM_ROUTER_TOPK_SOFTMAX);
    p.bias = &tb;
    CHECK_OK(mm_router_route(&p, &l, &ti, &tw, &err), &err);
    CHECK(ids[0] == 2 && ids[1] == 1);
    CHECK_NEAR(w[0], 1.0 / (1.0 + exp(-0.5)), 1e-6);
    CHECK_NEAR(w[1], exp(-0.5) / (1.0 + exp(-0.5)), 1e-6);
    /* row 1: l = [2, 2, 3, 1]: 2, then the tie of 0 and 1 goes to 0 */
    CHECK(ids[2] == 2 && ids[3] == 0);
    CHECK_NEAR(w[2], 1.0 / (1.0 + exp(-1.0)), 1e-6);
    p.bias = NULL; /* row 1 without bias: [2, 2, 1.5, 1.5] -> 0, 1 at 0.5 */
    CHECK_OK(mm_router_route(&p, &l, &ti, &tw, &err), &err);
    CHECK(ids[2] == 0 && ids[3] == 1 && w[2] == 0.5f && w[3] == 0.5f);
    CHECK(strcmp(mm_router_rule_name(MM_ROUTER_TOPK_SOFTMAX), "topk-softmax") == 0);
    CHECK(strcmp(mm_router_rule_name(MM_ROUTER_SIGMOID_GROUP_TOPK), "sigmoid-group-topk") == 0);
}

/* The call fails as invalid, with a message containing needle. */
static void expect_route_error(const mm_router_params *p, const mm_tensor *l, mm_tensor *ti, mm_tensor *tw,
                               const char *needle) {
    mm_error err;
    CHECK_STATUS(mm_router_route(p, l, ti, tw, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, needle);
}

static void test_errors(void) {
    mm_error err;
    float logits[6] = {0}, bias[6] = {0, 0, 0, 0, 0, INFINITY};
    int32_t ids[4];
    float w[4];
    mm_tensor l = t2(MM_DTYPE_F32, 1, 6, logits), ti = t2(MM_DTYPE_I32, 1, 4, ids),
              tw = t2(MM_DTYPE_F32, 1, 4, w), tb = t1(bias, 6), tb5 = t1(bias, 5);
    mm_router_params p = mm_router_default_params(MM_ROUTER_SIGMOID_GROUP_TOPK);
    p.n_group = 4;
    expect_route_error(&p, &l, &ti, &tw, "n_group = 4 must divide the 6 experts into groups of at least 2");
    p.n_group = 3;
    p.topk_group = 4;
    expect_route_error(&p, &l, &ti, &tw, "topk_group = 4 is outside [1, n_group = 3]");
    p.topk_group = 1;
    expect_route_error(&p, &l, &ti, &tw, "topk = 4 exceeds the 2 experts of the topk_group = 1 kept groups");
    p.topk_group = 2;
    p.scaling = 0.0f;
    expect_route_error(&p, &l, &ti, &tw, "scaling (routed_scaling_factor) = 0 must be finite and > 0");
    p.scaling = 1.0f;
    p.bias = &tb;
    expect_route_error(&p, &l, &ti, &tw, "bias[5] = inf is not finite");
    p.bias = &tb5;
    expect_route_error(&p, &l, &ti, &tw, "bias must be (6,) F32");
    mm_router_params s = mm_router_default_params(MM_ROUTER_SOFTMAX_TOPK);
    s.bias = &tb;
    expect_route_error(&s, &l, &ti, &tw, "router rule softmax-topk takes no bias");
    CHECK_STATUS(mm_router_route(NULL, &l, &ti, &tw, &err), MM_ERR_INVALID_ARGUMENT, &err);
}

int main(void) {
    test_groups();
    test_masked_zero();
    test_topk_softmax();
    test_errors();
    return mm_test_finish("test_model_router_route");
}
