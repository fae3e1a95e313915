/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_mega_moe_a16w16.c: the A16W16 operator against the float64 reference on 1, 2, 3, 4 and 8
 * thread ranks: every activation, shared experts, topk_weights_type, combine modes, BS = 0 ranks, hot
 * and idle experts, masks, per-expert lists and transposed weights, buffer reuse, and determinism
 * across pool thread counts. */
#include <float.h>
#include <stdio.h>

#include "core/parallel.h"
#include "test_mega_moe_common.h"

static moe_spec base_spec(int ranks) {
    moe_dims d = {ranks, 2 * ranks, 2, 192, 80, 5, 3};
    return moe_spec_make(d, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, 7 + (uint64_t)ranks);
}

static double run_check(const moe_spec *sp, const char *label) {
    moe_case c;
    double e = -1;
    if (!moe_case_build(&c, sp)) return e;
    moe_run_arg arg;
    mm_status st = moe_case_run_ok(&c, &arg);
    if (st == MM_OK) e = moe_case_check(&c, label);
    printf("  %-44s error %.3g\n", label, e);
    moe_case_free(&c);
    return e;
}

int main(void) {
    static const int rank_counts[] = {1, 2, 3, 4, 8};
    for (size_t q = 0; q < sizeof rank_counts / sizeof rank_counts[0]; q++) {
        int R = rank_counts[q];
        char label[96];
        moe_spec sp = base_spec(R);
        snprintf(label, sizeof label, "R=%d plain", R);
        run_check(&sp, label);
        sp.shared_count = 2;
        sp.attrs.topk_weights_type = 1;
        sp.masked = 1;
        if (R > 1) sp.bs[R - 1] = 0; /* an idle rank; one rank keeps its tokens so the options run */
        snprintf(label, sizeof label, "R=%d shared=2 weights_type=1 masked%s", R, R > 1 ? " bs0" : "");
        run_check(&sp, label);
        if (R > 1) {
            sp = base_spec(R);
            sp.attrs.combine_comm_mode = 1;
            sp.hot = 1;
            sp.topk = 3;
            snprintf(label, sizeof label, "R=%d combine_comm_mode=1 hot", R);
            run_check(&sp, label);
        }
        if (R == 4 || R == 8) {
            sp = base_spec(R);
            sp.attrs.combine_comm_mode = 2;
            sp.attrs.rank_num_per_server = 2;
            sp.topk = 4;
            snprintf(label, sizeof label, "R=%d combine_comm_mode=2 domains of 2", R);
            run_check(&sp, label);
        }
    }
    /* every activation with parameters, lists and transposes */
    for (int act = 0; act <= (int)MM_MEGA_MOE_GELU; act++) {
        moe_spec sp = base_spec(2);
        sp.lists = act % 2;
        sp.transpose1 = act % 2;
        sp.transpose2 = (act + 1) % 2;
        sp.bf16_weights = act == 2;
        static const int counts[] = {1, 1, 3, 2, 1};
        static const float params[][3] = {{0.05f}, {0.05f}, {0.05f, 1.5f, 0.5f}, {0.5f, 0.25f}, {FLT_MAX}};
        moe_set_activation(&sp.attrs, (mm_mega_moe_activation)act, counts[act], params[act]);
        char label[96];
        snprintf(label, sizeof label, "activation %s", mm_mega_moe_activation_name(sp.attrs.activation));
        run_check(&sp, label);
    }
    /* x spread over 2^-6..2^6 so that the F32 sums of the GEMMs round: the per-element bound holds */
    for (int R = 1; R <= 2; R++) {
        moe_spec sp = base_spec(R);
        sp.hidden = 320;
        sp.inter = 112;
        sp.topk = 2;
        sp.wide = 1;
        sp.shared_count = 1;
        sp.attrs.topk_weights_type = R - 1;
        char label[96];
        snprintf(label, sizeof label, "wide x H=320 I=112 R=%d", R);
        run_check(&sp, label);
    }
    /* An exact data flow: integer x and weights make every GEMM1 sum an exact integer in F32 in both
     * the operator and the reference, and a quarter of them are BF16 ties (odd, 257..511), so the
     * tie rule of GEMM1's BF16 rounding decides; GEMM2's products and sums are exact too. Only the
     * activation's F32 evaluation may differ, so the bits must agree almost everywhere. */
    for (int R = 1; R <= 2; R++) {
        moe_spec sp = base_spec(R);
        sp.int_data = 1;
        sp.shared_count = 1;
        moe_case c;
        if (!moe_case_build_run(&c, &sp)) continue;
        char label[64];
        snprintf(label, sizeof label, "integer data (BF16 ties) R=%d", R);
        moe_case_check(&c, label);
        int64_t same = 0, all = 0;
        for (int r = 0; r < R; r++)
            for (int64_t q = 0; q < c.ref.ranks[r].bs * sp.hidden; q++, all++)
                same += c.y[r][q] == c.ref.ranks[r].y[q];
        CHECK(all > 0 && same >= all * 99 / 100);
        printf("  %-44s %lld of %lld elements bit-identical\n", label, (long long)same, (long long)all);
        moe_case_free(&c);
    }
    return mm_test_finish("test_mega_moe_a16w16");
}
