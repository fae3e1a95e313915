/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_mega_moe_activation.c: the operator's F32 activations against the float64 reference
 * (ref/activation_ref.h), on a grid of (gate, up) values covering the clamp edges, large magnitudes and
 * special values. Bound: 4 F32 ulps plus 2 ulps per unit of the exponential's argument t (the F32
 * rounding of t, relative 2^-24, becomes a relative error |t| 2^-24 of exp(t)); NaN where the
 * reference gives NaN. The F32 evaluation is what the spec asks for ("activation in F32"). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ffn/activation.h"
#include "ffn/rowops.h"
#include "megamoe/formats.h"
#include "ref/activation_ref.h"
#include "testlib.h"

static double ulps(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INFINITY;
    if (a == b) return 0;
    float m = fmaxf(fabsf(a), fabsf(b));
    if (m < 1e-30f) return 0;
    return fabs((double)a - (double)b) / (double)(nextafterf(m, INFINITY) - m);
}

int main(void) {
    static const float values[] = {0.0f,   -0.0f,   1e-6f, -1e-6f, 0.5f,  -0.5f,  1.0f,  -1.0f,
                                   2.9f,   3.0f,    3.1f,  -3.0f,  6.99f, 7.0f,   7.01f, -7.0f,
                                   10.0f,  -10.0f,  20.0f, -20.0f, 50.0f, -50.0f, 88.0f, -88.0f,
                                   100.0f, -100.0f, 1e4f,  -1e4f,  NAN};
    size_t n = sizeof values / sizeof values[0];
    struct {
        mm_mega_moe_activation kind;
        int count;
        float p[3];
    } cases[] = {
        {MM_MEGA_MOE_SWIGLU, 0, {0}},
        {MM_MEGA_MOE_SWIGLU, 1, {7.0f}},
        {MM_MEGA_MOE_SWIGLUSTEP, 1, {3.0f}},
        {MM_MEGA_MOE_SWIGLUOAI, 0, {0}},
        {MM_MEGA_MOE_SWIGLUOAI, 3, {7.0f, 1.702f, 1.0f}},
        {MM_MEGA_MOE_SITUGLU, 0, {0}},
        {MM_MEGA_MOE_SITUGLU, 2, {2.0f, 0.5f}},
        {MM_MEGA_MOE_GELU, 1, {FLT_MAX}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mm_mega_moe_attrs a = mm_mega_moe_default_attrs();
        a.activation = cases[c].kind;
        a.activation_param_count = cases[c].count;
        for (int i = 0; i < 3; i++) a.activation_params[i] = cases[c].p[i];
        mm_ffn_act act;
        mm_error err;
        CHECK_OK(mm_ffn_act_resolve(a.activation, a.activation_params, a.activation_param_count, &act, &err),
                 &err);
        mm_ref_activation ref;
        CHECK_OK(
            mm_ref_activation_init(&ref, (mm_ref_act_kind)cases[c].kind, cases[c].p, cases[c].count, &err),
            &err);
        double worst = 0;
        for (size_t g = 0; g < n; g++)
            for (size_t u = 0; u < n; u++) {
                float got, want;
                if (cases[c].kind == MM_MEGA_MOE_GELU) {
                    got = mm_ffn_act_scalar(&act, values[g], 0.0f);
                    want = mm_ref_act_gelu(values[g]);
                } else {
                    got = mm_ffn_act_scalar(&act, values[g], values[u]);
                    want = mm_ref_act_gated(&ref, values[g], values[u]);
                }
                double d = ulps(got, want), z = fabs((double)values[g]);
                double t = cases[c].kind == MM_MEGA_MOE_GELU ? 1.5957691216057308 * (z + 0.044715 * z * z * z)
                           : cases[c].kind == MM_MEGA_MOE_SWIGLUOAI ? z * fabs((double)act.alpha)
                                                                    : z;
                if (isnan(t) || isinf(t)) t = 0;
                double bound = 4 + 2 * t;
                if (!(d <= bound)) {
                    CHECK(d <= bound);
                    fprintf(stderr, "  %s(%g, %g) = %.9g, reference %.9g\n",
                            mm_mega_moe_activation_name(a.activation), (double)values[g], (double)values[u],
                            (double)got, (double)want);
                }
                if (d > worst) worst = d;
            }
        printf("  %-12s params %d: worst %.1f ulp\n", mm_mega_moe_activation_name(a.activation),
               cases[c].count, worst);
    }
    /* the row form: gate/up halves, in place */
    {
        mm_mega_moe_attrs a = mm_mega_moe_default_attrs();
        mm_ffn_act act;
        CHECK_OK(mm_ffn_act_resolve(a.activation, a.activation_params, a.activation_param_count, &act, NULL),
                 NULL);
        float h[8] = {1, 2, -1, 0.5f, 3, -2, 0.25f, 4};
        float want[4];
        for (int j = 0; j < 4; j++) want[j] = mm_ffn_act_scalar(&act, h[j], h[4 + j]);
        mm_ffn_act_row(&act, h, 4, h);
        for (int j = 0; j < 4; j++) {
            uint32_t a_bits, b_bits;
            memcpy(&a_bits, &h[j], 4);
            memcpy(&b_bits, &want[j], 4);
            CHECK_EQ_HEX(a_bits, b_bits);
        }
    }
    /* dispatch rounding of a tie row: INT8 divides and rounds half away from zero (s = 127 / 127 = 1) */
    {
        static const float xs[8] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 126.5f, -3.5f};
        static const int8_t want[8] = {127, 1, 2, 3, -1, -3, 127, -4};
        uint16_t x[8];
        for (int i = 0; i < 8; i++) x[i] = mm_f32_to_bf16(xs[i]);
        int8_t q[8];
        float scale = 0, f32[8];
        mm_ffn_quantize_input(MM_DTYPE_I8, x, 8, (uint8_t *)q, NULL, &scale, f32);
        uint32_t scale_bits;
        memcpy(&scale_bits, &scale, sizeof scale_bits);
        CHECK_EQ_HEX(scale_bits, 0x3F800000u);
        for (int i = 0; i < 8; i++) CHECK_EQ_INT(q[i], want[i]);
        /* BF16 dispatch is a copy */
        uint16_t copy[8];
        mm_ffn_quantize_input(MM_DTYPE_BF16, x, 8, (uint8_t *)copy, NULL, &scale, f32);
        CHECK(memcmp(copy, x, sizeof x) == 0);
    }
    return mm_test_finish("test_mega_moe_activation");
}
