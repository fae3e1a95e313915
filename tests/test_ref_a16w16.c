/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ref_a16w16.c: the whole reference in the A16W16 scenario with every activation, on a tiny
 * case whose every step except the activation is exact, so y is predicted bit for bit by a closed form
 * computed here (libm, double) with the contract's rounding points.
 *
 * Case: R = 2 ranks, E = 4 experts (2 per rank), K = 2, H = 32, I = 2; rank 0 has 3 rows, rank 1 has 2.
 *   x[r][t][n]   = T[(n + 3t + 5r) % 8], T = {0.5, -1.5, 2, -0.25, 3, -2.5, 1.25, -4} (exact BF16).
 *   weight1[e]   : column n < 2I has the single entry (k = n) = 1 for gate columns, e + 1 for up columns,
 *                  so gate_j = x[j], up_j = (e + 1) * x[I + j]: small exact products, BF16 exact.
 *   weight2[e]   : row j has entry f(n) = (n < 16 ? 1 : -2) at every column n with n % width == j, so
 *                  O[n] = f(n) * bf16(a[n % width]) exactly (width = I, or 2I for gelu).
 *   topk_ids     : k0 = (t + r) % 4, k1 = (k0 + 1 + t % 3) % 4; weights w0 = 0.5 + 0.25 t, w1 = -0.375.
 *   y[n]         = bf16(F32(0 + F32(w0 * O0[n]) + F32(w1 * O1[n]))).
 * expert_token_nums is checked against a count of the ids. */
#include <float.h>
#include <math.h>

#include "megamoe/formats.h"
#include "ref/mega_moe_ref.h"
#include "ref/ref_case.h"
#include "test_ref_common.h"
#include "testlib.h"

#define NR 2
#define NE 4
#define NK 2
#define NH 32
#define NI 2

static const float table[8] = {0.5f, -1.5f, 2.0f, -0.25f, 3.0f, -2.5f, 1.25f, -4.0f};
static const int64_t row_counts[NR] = {3, 2};

static double sig(double z) {
    return 1.0 / (1.0 + exp(-z));
}

/* The activation written independently from support/ref, straight from docs/mega_moe.md, Semantics,
 * "Activations". */
static double closed_form(mm_ref_act_kind kind, const float *p, int np, double g, double u) {
    double c = (np >= 1 && kind != MM_REF_ACT_SITUGLU) ? p[0] : 0.0;
    switch (kind) {
    case MM_REF_ACT_SWIGLU:
        if (c > 0) {
            g = fmin(g, c);
            u = fmax(-c, fmin(u, c));
        }
        return g / (1.0 + exp(-g)) * u;
    case MM_REF_ACT_SWIGLUSTEP: {
        double s = g / (1.0 + exp(-g));
        if (c > 0) {
            s = fmin(s, c);
            u = fmax(-c, fmin(u, c));
        }
        return s * u;
    }
    case MM_REF_ACT_SWIGLUOAI: {
        double alpha = np == 3 ? p[1] : (double)1.702f, beta = np == 3 ? p[2] : 1.0;
        if (c > 0) {
            g = fmin(g, c);
            u = fmax(-c, fmin(u, c));
        }
        return g * sig(alpha * g) * (u + beta);
    }
    case MM_REF_ACT_SITUGLU: {
        double beta = np >= 1 ? p[0] : 1.0;
        double lin = np == 2 ? p[1] * tanh(u / p[1]) : u;
        return beta * tanh(g / beta) * sig(g) * lin;
    }
    default: /* gelu on g only */ return g * sig(sqrt(8.0 / M_PI) * (g + 0.044715 * g * g * g));
    }
}

static float bf16_round(float v) {
    return mm_bf16_to_f32(mm_f32_to_bf16(v));
}

static int expert_of(int64_t r, int64_t t, int64_t k) {
    int k0 = (int)((t + r) % NE);
    return k == 0 ? k0 : (int)((k0 + 1 + t % 3) % NE);
}

static void fill(mm_ref_case *c) {
    const mm_ref_attrs *a = &c->attrs;
    int64_t width = mm_ref_activation_out_width(a->activation.kind, NI);
    for (int64_t r = 0; r < NR; r++) {
        mm_ref_case_rank *rk = &c->ranks[r];
        for (int64_t t = 0; t < rk->bs; t++) {
            for (int64_t n = 0; n < NH; n++)
                rk->x_bf16[t * NH + n] = mm_f32_to_bf16(table[(n + 3 * t + 5 * r) % 8]);
            for (int64_t k = 0; k < NK; k++) rk->topk_ids[t * NK + k] = expert_of(r, t, k);
            rk->topk_weights[t * NK + 0] = 0.5f + 0.25f * (float)t;
            rk->topk_weights[t * NK + 1] = -0.375f;
        }
        for (int64_t le = 0; le < NE / NR; le++) {
            int64_t e = r * (NE / NR) + le;
            for (int64_t n = 0; n < 2 * NI; n++)
                mm_ref_case_set_weight(a, &rk->routed, 1, le, n, n,
                                       mm_f32_to_bf16(n < NI ? 1.0f : (float)(e + 1)));
            for (int64_t n = 0; n < NH; n++)
                mm_ref_case_set_weight(a, &rk->routed, 2, le, n % width, n,
                                       mm_f32_to_bf16(n < 16 ? 1.0f : -2.0f));
        }
    }
}

static void run_case(mm_ref_act_kind kind, const float *params, int np, int transpose) {
    mm_ref_attrs a = ref_attrs_sized(NE, NR, NK, NH, NI);
    mm_error err_storage, *err = &err_storage;
    a.transpose_weight1 = a.transpose_weight2 = transpose;
    CHECK_OK(mm_ref_activation_init(&a.activation, kind, params, np, err), err);
    mm_ref_case c;
    CHECK_OK(mm_ref_case_alloc(&c, &a, row_counts, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, err), err);
    fill(&c);
    CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
    int64_t width = mm_ref_activation_out_width(kind, NI);
    int counts[NE] = {0};
    int mismatches = 0;
    for (int64_t r = 0; r < NR; r++) {
        for (int64_t t = 0; t < row_counts[r]; t++) {
            float x[NH];
            for (int64_t n = 0; n < NH; n++) x[n] = table[(n + 3 * t + 5 * r) % 8];
            float acc[NH] = {0};
            for (int64_t k = 0; k < NK; k++) {
                int e = expert_of(r, t, k);
                counts[e]++;
                float abf[2 * NI];
                for (int64_t j = 0; j < width; j++) {
                    double h = j < NI ? x[j] : (double)(e + 1) * x[j]; /* gelu uses all 2I columns */
                    double av = kind == MM_REF_ACT_GELU
                                    ? closed_form(kind, params, np, h, 0.0)
                                    : closed_form(kind, params, np, x[j], (e + 1) * x[NI + j]);
                    abf[j] = bf16_round((float)av);
                }
                float w = c.ranks[r].topk_weights[t * NK + k];
                for (int64_t n = 0; n < NH; n++) {
                    float o = bf16_round(abf[n % width] * (n < 16 ? 1.0f : -2.0f));
                    float term = w * o;
                    acc[n] = acc[n] + term;
                }
            }
            for (int64_t n = 0; n < NH; n++)
                if (c.ranks[r].y[t * NH + n] != mm_f32_to_bf16(acc[n])) {
                    if (mismatches++ < 4)
                        mm_test_report_fail(__FILE__, __LINE__,
                                            "%s: y[%lld][%lld][%lld] = 0x%04x, expected 0x%04x",
                                            mm_ref_act_name(kind), (long long)r, (long long)t, (long long)n,
                                            c.ranks[r].y[t * NH + n], mm_f32_to_bf16(acc[n]));
                }
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    for (int e = 0; e < NE; e++) CHECK_EQ_INT(c.ranks[e / 2].expert_token_nums[e % 2], counts[e]);
    mm_ref_case_free(&c);
}

/* GEMM1's output is rounded to BF16 before the activation (A16W16): one rank, one expert, K = 1.
 * gate = x[0] + x[2] = 1 + 3 * 2^-9 = 1.005859375 rounds to BF16 1.0078125 (ulp 2^-7); up = x[1] = 96.
 * a = F32(silu(1.0078125) * 96) -> BF16 71.0, while the unrounded gate would give 70.5. weight2 row 0
 * is 1 everywhere, so y = O = 71.0. */
static void test_gemm1_bf16_rounding(void) {
    mm_ref_attrs a = ref_attrs_sized(1, 1, 1, NH, NI);
    mm_error err_storage, *err = &err_storage;
    const int64_t one_row = 1;
    CHECK_OK(mm_ref_activation_init(&a.activation, MM_REF_ACT_SWIGLU, NULL, 0, err), err);
    mm_ref_case c;
    CHECK_OK(mm_ref_case_alloc(&c, &a, &one_row, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, err), err);
    mm_ref_case_rank *rk = &c.ranks[0];
    rk->x_bf16[0] = mm_f32_to_bf16(1.0f);
    rk->x_bf16[1] = mm_f32_to_bf16(96.0f);
    rk->x_bf16[2] = mm_f32_to_bf16(3.0f / 512.0f);
    rk->topk_weights[0] = 1.0f;
    mm_ref_case_set_weight(&a, &rk->routed, 1, 0, 0, 0, mm_f32_to_bf16(1.0f));
    mm_ref_case_set_weight(&a, &rk->routed, 1, 0, 2, 0, mm_f32_to_bf16(1.0f));
    mm_ref_case_set_weight(&a, &rk->routed, 1, 0, 1, NI, mm_f32_to_bf16(1.0f));
    for (int64_t n = 0; n < NH; n++)
        mm_ref_case_set_weight(&a, &rk->routed, 2, 0, 0, n, mm_f32_to_bf16(1.0f));
    CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
    float rounded = bf16_round((float)(closed_form(MM_REF_ACT_SWIGLU, NULL, 0, 1.0078125, 96.0)));
    float unrounded = bf16_round((float)(closed_form(MM_REF_ACT_SWIGLU, NULL, 0, 1.005859375, 96.0)));
    CHECK(rounded == 71.0f);
    CHECK(unrounded == 70.5f);
    for (int64_t n = 0; n < NH; n++) CHECK(mm_bf16_to_f32(rk->y[n]) == rounded);
    mm_ref_case_free(&c);
}

int main(void) {
    float clamp1 = 1.0f, clamp2 = 2.0f, oai[3] = {1.5f, 1.0f, 0.5f}, situ1 = 2.0f, situ2[2] = {1.0f, 3.0f};
    float placeholder = FLT_MAX;
    run_case(MM_REF_ACT_SWIGLU, NULL, 0, 0);
    run_case(MM_REF_ACT_SWIGLU, &clamp1, 1, 0);
    run_case(MM_REF_ACT_SWIGLU, &clamp1, 1, 1); /* transposed weights: same values */
    run_case(MM_REF_ACT_SWIGLUSTEP, &clamp2, 1, 0);
    run_case(MM_REF_ACT_SWIGLUSTEP, NULL, 0, 1);
    run_case(MM_REF_ACT_SWIGLUOAI, NULL, 0, 0);
    run_case(MM_REF_ACT_SWIGLUOAI, oai, 3, 0);
    run_case(MM_REF_ACT_SITUGLU, &situ1, 1, 0);
    run_case(MM_REF_ACT_SITUGLU, situ2, 2, 1);
    run_case(MM_REF_ACT_GELU, NULL, 0, 0);
    run_case(MM_REF_ACT_GELU, &placeholder, 1, 1);
    test_gemm1_bf16_rounding();
    return mm_test_finish("test_ref_a16w16");
}
