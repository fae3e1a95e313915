/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_experts_megamoe.c: the local experts call gives y with the same bits as mm_mega_moe_run on
 * a one-rank threads world with the same weights and attributes: every scenario of the scenario table
 * (A16W16, A8W8-INT, A8W4-INT, A8W8-FP E4M3 and E5M2, A8W4-FP, A4W4-FP) x every activation, plain and
 * with shared experts, x_active_mask, topk_weights_type 1, BF16 gating weights, transposed or listed
 * weights, activation parameters, combine_quant_mode 3 / 4, shared experts quantized differently and
 * activation_out_dtype. MegaMoE's own y is checked against the float64 reference first, so the bits
 * compared are right ones, not merely equal ones. */
#include <float.h>
#include <stdio.h>

#include "ffn/activation.h"
#include "test_experts_common.h"

static int cases, compared;

static void params_of(mm_mega_moe_attrs *a) {
    switch (a->activation) {
    case MM_MEGA_MOE_SWIGLU:
    case MM_MEGA_MOE_SWIGLUSTEP: a->activation_param_count = 1, a->activation_params[0] = 0.7f; break;
    case MM_MEGA_MOE_SWIGLUOAI:
        a->activation_param_count = 3, a->activation_params[0] = 0.7f, a->activation_params[1] = 1.702f,
        a->activation_params[2] = 1.0f;
        break;
    case MM_MEGA_MOE_SITUGLU:
        a->activation_param_count = 2, a->activation_params[0] = 2.0f, a->activation_params[1] = 0.5f;
        break;
    default: a->activation_param_count = 1, a->activation_params[0] = FLT_MAX; break;
    }
}

static void compare(const moe_spec *sp, const char *label) {
    moe_case c;
    cases++;
    if (!moe_case_build(&c, sp)) return;
    moe_run_arg arg;
    mm_status st = moe_case_run_ok(&c, &arg);
    if (st == MM_OK) moe_case_check_rank(&c, 0, label);
    mm_experts *ex = NULL;
    mm_error err;
    mm_error_clear(&err);
    mm_status s = ex_create(&c, 0, NULL, 1, &ex, &err);
    CHECK_OK(s, &err);
    int64_t n = c.ref.ranks[0].bs * sp->hidden;
    uint16_t *y = malloc((size_t)(n + 1) * 2);
    memset(y, 0xEE, (size_t)(n + 1) * 2);
    ex_inputs in;
    ex_inputs_make(&c, &in);
    if (s == MM_OK) {
        s = ex_call(ex, &c, &in.in, y, &err);
        CHECK_OK(s, &err);
        if (s != MM_OK) fprintf(stderr, "  %s: %s\n", label, err.message);
    }
    if (s == MM_OK && st == MM_OK) {
        int64_t d = ex_bits_differ(y, c.y[0], n, label);
        CHECK_EQ_INT(d, 0);
        compared++;
        /* A second call on the same handle (its working memory reused) gives the same bits. */
        memset(y, 0xEE, (size_t)n * 2);
        CHECK_OK(ex_call(ex, &c, &in.in, y, &err), &err);
        CHECK_EQ_INT(ex_bits_differ(y, c.y[0], n, label), 0);
    }
    ex_inputs_free(&in);
    free(y);
    mm_experts_free(ex);
    moe_case_free(&c);
}

static moe_spec base(const mm_moe_scenario_row *sc, mm_mega_moe_activation act, uint64_t seed) {
    moe_spec sp = moe_spec_scenario((moe_dims){1, 8, 3, 64, 32, 11, 0}, sc, seed);
    sp.attrs.activation = act;
    return sp;
}

int main(void) {
    int n_act = 0;
    const mm_ffn_act_info *acts = mm_ffn_act_table(&n_act);
    for (int q = 0; q < mm_moe_scenario_count; q++) {
        const mm_moe_scenario_row *sc = &mm_moe_scenario_table[q];
        for (int a = 0; a < n_act; a++) {
            mm_mega_moe_activation act = acts[a].kind;
            char label[160];
            moe_spec sp = base(sc, act, 100 + (uint64_t)(q * 10 + a));
            snprintf(label, sizeof label, "%s %s", sc->label, mm_mega_moe_activation_name(act));
            compare(&sp, label);
            /* shared experts, mask, weights after the activation, BF16 gating weights, layouts, params */
            sp.shared_count = 1 + (q + a) % 2;
            sp.masked = 1;
            sp.attrs.topk_weights_type = 1;
            sp.bf16_weights = 1;
            sp.lists = 1;
            sp.transpose1 = a % 2;
            sp.transpose2 = (a + 1) % 2;
            sp.hot = 1;
            sp.nonstandard_bias = 1;
            params_of(&sp.attrs);
            snprintf(label, sizeof label, "%s %s shared=%d mask type1 bf16-weights params", sc->label,
                     mm_mega_moe_activation_name(act), (int)sp.shared_count);
            compare(&sp, label);
        }
        /* combine quantization, with and without shared experts and weights after the activation */
        for (int cq = 3; cq <= 4; cq++) {
            moe_spec sp = base(sc, MM_MEGA_MOE_SWIGLU, 300 + (uint64_t)(q * 2 + cq));
            sp.attrs.combine_quant_mode = cq;
            sp.shared_count = cq - 2;
            sp.masked = cq == 4;
            sp.attrs.topk_weights_type = cq == 4;
            char label[160];
            snprintf(label, sizeof label, "%s combine_quant_mode=%d shared=%d", sc->label, cq,
                     (int)sp.shared_count);
            compare(&sp, label);
        }
    }
    /* shared experts with their own quantization of x (a separate stage), activation_out_dtype */
    {
        const mm_moe_scenario_row *a4 = mm_moe_scenario_by_name("a4w4-fp");
        moe_spec sp = base(a4, MM_MEGA_MOE_SWIGLU, 401);
        sp.shared_count = 2;
        sp.attrs.shared_expert_quant_out_dtype = MM_DTYPE_FP8_E4M3FN;
        sp.masked = 1;
        compare(&sp, "A4W4-FP routed, A8W4-FP shared (own quantization of x)");
        sp = base(mm_moe_scenario_by_name("a8w4-fp"), MM_MEGA_MOE_SWIGLUSTEP, 402);
        sp.attrs.activation_out_dtype = MM_DTYPE_FP8_E5M2;
        sp.shared_count = 1;
        compare(&sp, "A8W4-FP activation_out_dtype=e5m2");
        /* larger rows and more tokens than one row task (16) */
        sp = base(mm_moe_scenario_by_name("a8w8-int"), MM_MEGA_MOE_SWIGLU, 403);
        sp.hidden = 256;
        sp.inter = 64;
        sp.bs[0] = 70;
        sp.topk = 4;
        sp.shared_count = 1;
        sp.masked = 1;
        compare(&sp, "A8W8-INT H=256 T=70 K=4 shared mask");
    }
    printf("  %d cases, %d compared bit for bit\n", cases, compared);
    CHECK_EQ_INT(compared, cases);
    return mm_test_finish("test_experts_megamoe");
}
