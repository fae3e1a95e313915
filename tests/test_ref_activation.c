/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ref_activation.c: the reference activations against closed forms written here in double,
 * hand-exact values (clamps, zeros), NaN propagation through clamps, and the activation_params rules. */
#include <float.h>
#include <math.h>

#include "ref/activation_ref.h"
#include "testlib.h"

static double sig(double z) {
    return 1.0 / (1.0 + exp(-z));
}

static mm_ref_activation make(mm_ref_act_kind kind, const float *params, int64_t count) {
    mm_ref_activation act;
    mm_error err_storage, *err = &err_storage;
    CHECK_OK(mm_ref_activation_init(&act, kind, params, count, err), err);
    return act;
}

static void test_defaults_and_closed_forms(void) {
    mm_ref_activation swiglu = make(MM_REF_ACT_SWIGLU, NULL, 0);
    CHECK(swiglu.clamp == 0.0f);
    /* silu(1) * 2 = 2 / (1 + e^-1) */
    CHECK(mm_ref_act_gated(&swiglu, 1.0f, 2.0f) == (float)(2.0 / (1.0 + exp(-1.0))));
    CHECK(mm_ref_act_gated(&swiglu, 0.0f, 5.0f) == 0.0f); /* silu(0) = 0 */
    /* large negative gate: silu -> 0 from below */
    CHECK(fabsf(mm_ref_act_gated(&swiglu, -100.0f, 1.0f)) < 1e-40f);

    mm_ref_activation oai = make(MM_REF_ACT_SWIGLUOAI, NULL, 0);
    CHECK(oai.alpha == 1.702f && oai.beta == 1.0f);
    double g = 0.75, u = -1.5;
    CHECK(mm_ref_act_gated(&oai, (float)g, (float)u) == (float)(g * sig((double)1.702f * g) * (u + 1.0)));
    CHECK(mm_ref_act_gated(&oai, 0.0f, 3.0f) == 0.0f);

    mm_ref_activation situ = make(MM_REF_ACT_SITUGLU, NULL, 0);
    CHECK(situ.beta == 1.0f && !situ.has_linear_beta);
    CHECK(mm_ref_act_gated(&situ, 2.0f, 3.0f) == (float)(tanh(2.0) * sig(2.0) * 3.0));

    float sp[2] = {2.0f, 4.0f};
    mm_ref_activation situ2 = make(MM_REF_ACT_SITUGLU, sp, 2);
    CHECK(mm_ref_act_gated(&situ2, 1.0f, 6.0f) == (float)(2.0 * tanh(0.5) * sig(1.0) * (4.0 * tanh(1.5))));

    /* gelu, tanh form: 0 -> 0; 1 -> 0.5 (1 + tanh(sqrt(2/pi) * 1.044715)) */
    CHECK(mm_ref_act_gelu(0.0f) == 0.0f);
    CHECK_NEAR(mm_ref_act_gelu(1.0f), 0.5 * (1.0 + tanh(sqrt(2.0 / M_PI) * 1.044715)), 1e-7);
    /* negative tail: tiny and negative, not the 0 that 1 + tanh(v) cancels to */
    CHECK(mm_ref_act_gelu(-8.0f) < 0.0f);
    CHECK_NEAR(mm_ref_act_gelu(-8.0f) / (-8.0 * sig(-sqrt(8.0 / M_PI) * (8.0 + 0.044715 * 512.0))), 1.0,
               1e-6);
    CHECK(mm_ref_act_gelu(10.0f) == 10.0f);   /* tanh saturates to 1 in double */
    CHECK(mm_ref_act_gelu(-10.0f) > -1e-20f); /* -> -0 from below */
    float placeholder = FLT_MAX;
    mm_ref_activation gelu = make(MM_REF_ACT_GELU, &placeholder, 1);
    CHECK_EQ_INT(mm_ref_activation_out_width(gelu.kind, 3), 6);
    CHECK_EQ_INT(mm_ref_activation_out_width(MM_REF_ACT_SWIGLU, 3), 3);
}

static void test_clamps(void) {
    float c = 1.0f;
    mm_ref_activation swiglu = make(MM_REF_ACT_SWIGLU, &c, 1);
    /* g = 3 -> min(3, 1) = 1; u = -5 -> -1: a = silu(1) * -1 */
    CHECK(mm_ref_act_gated(&swiglu, 3.0f, -5.0f) == (float)(-sig(1.0)));
    /* the gate has no lower clamp: g = -3 stays */
    CHECK(mm_ref_act_gated(&swiglu, -3.0f, 0.5f) == (float)(-3.0 * sig(-3.0) * 0.5));
    CHECK(isnan(mm_ref_act_gated(&swiglu, NAN, 0.5f)));
    CHECK(isnan(mm_ref_act_gated(&swiglu, 0.5f, NAN)));

    float cs = 0.5f;
    mm_ref_activation step = make(MM_REF_ACT_SWIGLUSTEP, &cs, 1);
    /* silu(3) = 2.857.. > 0.5 -> 0.5; u = 0.25 inside: a = 0.125 exactly */
    CHECK(mm_ref_act_gated(&step, 3.0f, 0.25f) == 0.125f);
    /* silu(-1) = -0.2689 < 0.5 kept; u = 4 -> 0.5 */
    CHECK(mm_ref_act_gated(&step, -1.0f, 4.0f) == (float)(-sig(-1.0) * 0.5));

    float op[3] = {2.0f, 1.0f, 0.5f};
    mm_ref_activation oai = make(MM_REF_ACT_SWIGLUOAI, op, 3);
    /* g = 7 -> 2, u = -9 -> -2: a = 2 * sig(2) * (-2 + 0.5) */
    CHECK(mm_ref_act_gated(&oai, 7.0f, -9.0f) == (float)(2.0 * sig(2.0) * -1.5));

    /* clamp 0 means no clamp */
    float zero = 0.0f;
    mm_ref_activation none = make(MM_REF_ACT_SWIGLU, &zero, 1);
    CHECK(mm_ref_act_gated(&none, 30.0f, 40.0f) == (float)(30.0 * sig(30.0) * 40.0));

    float h[4] = {3.0f, -3.0f, -5.0f, 0.5f}; /* gate (3, -3), up (-5, 0.5) */
    float out[2];
    mm_ref_activation_row(&swiglu, h, 2, out);
    CHECK(out[0] == (float)(-sig(1.0)));
    CHECK(out[1] == (float)(-3.0 * sig(-3.0) * 0.5));
}

static void test_param_rules(void) {
    mm_ref_activation act;
    mm_error err_storage, *err = &err_storage;
    float neg = -1.0f, nan_v = NAN, two[2] = {1.0f, 2.0f}, bad_oai[3] = {1.0f, INFINITY, 1.0f};
    float bad_situ[2] = {1.0f, 0.0f}, one = 1.0f;
    CHECK_STATUS(mm_ref_activation_init(&act, MM_REF_ACT_SWIGLU, &neg, 1, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "clamp");
    CHECK_STATUS(mm_ref_activation_init(&act, MM_REF_ACT_SWIGLUSTEP, &nan_v, 1, err), MM_ERR_INVALID_ARGUMENT,
                 err);
    CHECK_STATUS(mm_ref_activation_init(&act, MM_REF_ACT_SWIGLU, two, 2, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "has 2 values");
    CHECK_STATUS(mm_ref_activation_init(&act, MM_REF_ACT_SWIGLUOAI, two, 1, err), MM_ERR_INVALID_ARGUMENT,
                 err);
    CHECK_STATUS(mm_ref_activation_init(&act, MM_REF_ACT_SWIGLUOAI, bad_oai, 3, err), MM_ERR_INVALID_ARGUMENT,
                 err);
    CHECK_STR_CONTAINS(err->message, "finite");
    CHECK_STATUS(mm_ref_activation_init(&act, MM_REF_ACT_SITUGLU, bad_situ, 2, err), MM_ERR_INVALID_ARGUMENT,
                 err);
    CHECK_STR_CONTAINS(err->message, "linear_beta");
    CHECK_STATUS(mm_ref_activation_init(&act, MM_REF_ACT_GELU, &one, 1, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STATUS(mm_ref_activation_init(&act, MM_REF_ACT_COUNT, NULL, 0, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_EQ_INT(mm_ref_act_from_name("swigluoai"), MM_REF_ACT_SWIGLUOAI);
    CHECK_EQ_INT(mm_ref_act_from_name("relu"), MM_REF_ACT_COUNT);
    CHECK(strcmp(mm_ref_act_name(MM_REF_ACT_GELU), "gelu") == 0);
}

int main(void) {
    test_defaults_and_closed_forms();
    test_clamps();
    test_param_rules();
    return mm_test_finish("test_ref_activation");
}
