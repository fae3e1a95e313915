/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ref_invariants.c: properties of the reference on random data, for several scenarios.
 *   - Relabelling experts (moving expert e's weights to slot p(e), possibly on another rank, and mapping
 *     topk_ids through p) leaves every y bit unchanged and permutes expert_token_nums the same way.
 *   - K = 1 with weight 1 gives y = the expert's own BF16 output row, computed here with the expert
 *     layer alone (mm_ref_expert_load / mm_ref_expert_row) from the row's dispatch.
 *   - Appending a second expert with weight 0 changes nothing (its term is +0). */
#include <stdlib.h>

#include "megamoe/formats.h"
#include "ref/expert_ref.h"
#include "ref/mega_moe_ref.h"
#include "ref/ref_case.h"
#include "test_ref_common.h"
#include "testlib.h"

#define NR 4
#define NE 8
#define NH 64
#define NI 8

static const int64_t row_counts[NR] = {5, 0, 3, 7};

/* Deterministic value of (seed, a, b, c, d) in [0, 1). */
static double hash01(uint64_t seed, int64_t a, int64_t b, int64_t c, int64_t d) {
    uint64_t s = seed ^ ((uint64_t)a * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)b << 40) ^ ((uint64_t)c << 20) ^
                 (uint64_t)d;
    return (double)(mm_test_rand_u64(&s) >> 11) / 9007199254740992.0;
}

/* Raw code of weight (which, k, n) of global expert e for dtype. */
static uint32_t weight_code(mm_dtype dtype, int64_t e, int which, int64_t k, int64_t n) {
    double u = hash01(1234, e, which, k, n);
    switch (dtype) {
    case MM_DTYPE_BF16: return mm_f32_to_bf16((float)((u - 0.5) * 0.5));
    case MM_DTYPE_I8: return (uint32_t)(int32_t)(u * 255.0 - 127.0);
    case MM_DTYPE_INT4: return (uint32_t)(int32_t)(u * 15.0 - 7.0);
    default: return mm_dtype_from_f32(dtype, (float)((u - 0.5) * 8.0));
    }
}

/* Writes global expert e's weights (and scales / bias) into slot `slot` of weight group w. */
static void write_expert(mm_ref_case *c, mm_ref_case_weights *w, int64_t slot, int64_t e) {
    const mm_ref_attrs *a = &c->attrs;
    for (int which = 1; which <= 2; which++) {
        int64_t kl = mm_ref_case_gemm_k(a, which), nl = mm_ref_case_gemm_n(a, which);
        for (int64_t k = 0; k < kl; k++)
            for (int64_t n = 0; n < nl; n++)
                mm_ref_case_set_weight(a, w, which, slot, k, n, weight_code(w->dtype, e, which, k, n));
        for (int64_t n = 0; n < nl; n++) {
            float *scales = which == 1 ? w->scales1 : w->scales2;
            float *bias = which == 1 ? w->bias1 : w->bias2;
            if (scales) scales[slot * nl + n] = (float)(hash01(99, e, which, n, 0) + 0.5) / 256.0f;
            if (bias) bias[slot * nl + n] = (float)(hash01(98, e, which, n, 0) - 0.5);
            if (w->mx_scales1)
                for (int64_t g = 0; g < (kl + 31) / 32; g++)
                    mm_ref_case_set_mx_scale(a, w, which, slot, n, g,
                                             (uint8_t)(120 + (int)(hash01(97, e, which, n, g) * 4)));
        }
    }
}

typedef struct scenario_setup {
    mm_dtype weights, dispatch;
    mm_ref_act_kind act;
    int64_t shared;
    int weights_type;
} scenario_setup;

/* Builds the case with expert e stored at slot perm[e] and ids mapped through perm; topk is K, and
 * `zero_tail` sets the weight of every k >= 1 to 0. */
static void build(mm_ref_case *c, const scenario_setup *s, int64_t topk, const int *perm, int zero_tail) {
    mm_error err_storage, *err = &err_storage;
    mm_ref_attrs a = ref_attrs_sized(NE, NR, topk, NH, NI);
    a.dispatch_dtype = s->dispatch;
    a.topk_weights_type = s->weights_type;
    a.transpose_weight1 = 1;
    CHECK_OK(mm_ref_activation_init(&a.activation, s->act, NULL, 0, err), err);
    CHECK_OK(mm_ref_case_alloc(c, &a, row_counts, s->weights, s->shared, s->weights, err), err);
    int64_t local = NE / NR;
    for (int64_t e = 0; e < NE; e++) {
        int64_t slot = perm[e];
        write_expert(c, &c->ranks[slot / local].routed, slot % local, e);
    }
    for (int64_t r = 0; r < NR; r++) {
        mm_ref_case_rank *rk = &c->ranks[r];
        for (int64_t sx = 0; sx < rk->shared.count; sx++) write_expert(c, &rk->shared, sx, 100 + r * 4 + sx);
        for (int64_t t = 0; t < rk->bs; t++) {
            for (int64_t n = 0; n < NH; n++)
                rk->x_bf16[t * NH + n] = mm_f32_to_bf16((float)(hash01(7, r, t, n, 0) * 4.0 - 2.0));
            int64_t first = (int64_t)(hash01(8, r, t, 0, 0) * NE);
            for (int64_t k = 0; k < topk; k++) {
                rk->topk_ids[t * topk + k] = perm[(first + 3 * k) % NE]; /* distinct: 3 is coprime to 8 */
                rk->topk_weights[t * topk + k] =
                    (zero_tail && k > 0) ? 0.0f : (float)(hash01(9, r, t, k, 0) - 0.3);
            }
        }
    }
}

static void test_relabel(const scenario_setup *s) {
    mm_error err_storage, *err = &err_storage;
    int ident[NE], perm[NE] = {5, 2, 7, 0, 3, 6, 1, 4};
    for (int e = 0; e < NE; e++) ident[e] = e;
    mm_ref_case base, moved;
    build(&base, s, 3, ident, 0);
    build(&moved, s, 3, perm, 0);
    for (int r = 0; r < NR; r++) moved.inputs[r].x_active_mask = NULL; /* NULL = all active, like all-ones */
    CHECK_OK(mm_ref_mega_moe(&base.attrs, base.inputs, base.outputs, err), err);
    CHECK_OK(mm_ref_mega_moe(&moved.attrs, moved.inputs, moved.outputs, err), err);
    int diff = 0, nonzero = 0;
    for (int r = 0; r < NR; r++)
        for (int64_t i = 0; i < row_counts[r] * NH; i++) {
            diff += base.ranks[r].y[i] != moved.ranks[r].y[i];
            nonzero += base.ranks[r].y[i] != 0;
        }
    CHECK_EQ_INT(diff, 0);
    CHECK(nonzero > row_counts[0] * NH); /* the data is not degenerate */
    for (int e = 0; e < NE; e++)
        CHECK_EQ_INT(base.ranks[e / 2].expert_token_nums[e % 2],
                     moved.ranks[perm[e] / 2].expert_token_nums[perm[e] % 2]);
    mm_ref_case_free(&base);
    mm_ref_case_free(&moved);
}

/* K = 1, w = 1 (no shared experts): y is the expert's BF16 row; K = 2 with a zero second weight is the
 * same. */
static void test_single_expert(const scenario_setup *setup) {
    scenario_setup no_shared = *setup;
    no_shared.shared = 0;
    const scenario_setup *s = &no_shared;
    mm_error err_storage, *err = &err_storage;
    int ident[NE];
    for (int e = 0; e < NE; e++) ident[e] = e;
    mm_ref_case one, two;
    build(&one, s, 1, ident, 0);
    build(&two, s, 2, ident, 1);
    for (int r = 0; r < NR; r++)
        for (int64_t t = 0; t < row_counts[r]; t++) {
            one.ranks[r].topk_weights[t] = 1.0f;
            two.ranks[r].topk_weights[t * 2] = 1.0f;
        }
    CHECK_OK(mm_ref_mega_moe(&one.attrs, one.inputs, one.outputs, err), err);
    CHECK_OK(mm_ref_mega_moe(&two.attrs, two.inputs, two.outputs, err), err);
    mm_ref_plan plan;
    CHECK_OK(mm_ref_plan_make(s->weights, s->dispatch, MM_DTYPE_INVALID, "routed", &plan, err), err);
    int diff_expert = 0, diff_two = 0;
    double values[NH];
    uint16_t out[NH];
    for (int r = 0; r < NR; r++)
        for (int64_t t = 0; t < row_counts[r]; t++) {
            int e = one.ranks[r].topk_ids[t];
            mm_ref_expert ex;
            mm_ref_row row = {values, 1.0f};
            CHECK_OK(mm_ref_dispatch_row(&plan, NH, one.ranks[r].x_bf16 + t * NH, NULL, NULL, &row, err),
                     err);
            CHECK_OK(mm_ref_expert_load(&ex, &plan, &one.inputs[e / 2].routed, e % 2, &one.attrs, err), err);
            CHECK_OK(mm_ref_expert_row(&ex, &row, s->weights_type == 1, 1.0f, out, err), err);
            mm_ref_expert_free(&ex);
            for (int n = 0; n < NH; n++) {
                diff_expert += one.ranks[r].y[t * NH + n] != out[n];
                diff_two += two.ranks[r].y[t * NH + n] != out[n];
            }
        }
    CHECK_EQ_INT(diff_expert, 0);
    CHECK_EQ_INT(diff_two, 0);
    mm_ref_case_free(&one);
    mm_ref_case_free(&two);
}

int main(void) {
    const scenario_setup setups[] = {
        {MM_DTYPE_BF16, MM_DTYPE_INVALID, MM_REF_ACT_SWIGLU, 1, 0},
        {MM_DTYPE_BF16, MM_DTYPE_INVALID, MM_REF_ACT_GELU, 0, 1},
        {MM_DTYPE_I8, MM_DTYPE_I8, MM_REF_ACT_SWIGLUOAI, 0, 0},
        {MM_DTYPE_INT4, MM_DTYPE_I8, MM_REF_ACT_SITUGLU, 2, 1},
        {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, MM_REF_ACT_SWIGLU, 1, 0},
        {MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, MM_REF_ACT_SWIGLUSTEP, 0, 0},
    };
    for (size_t i = 0; i < sizeof setups / sizeof setups[0]; i++) {
        test_relabel(&setups[i]);
        test_single_expert(&setups[i]);
    }
    return mm_test_finish("test_ref_invariants");
}
