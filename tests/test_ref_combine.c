/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ref_combine.c: the combine step of the reference: topk_weights_type, combine_quant_mode
 * 3/4, combine_comm_mode 1 and 2, shared experts (also with their own quantization), inactive rows,
 * BS = 0 and expert_token_nums, all with hand-derived values.
 *
 * "Controlled" experts (A16W16, swiglustep clamp 4, I = 2, H = 32): every row has x = {1, 0.25, 0 ...};
 * weight1 has gate0 = 16 * x[0] and up0 = x[1] (other columns 0), so a = (min(silu(16), 4) * 0.25, 0)
 * = (1, 0) exactly, and the expert output row is O_e[n] = weight2[e][0][n]: each test chooses its
 * expert rows freely (as BF16 values). With topk_weights_type 1, a = (w, 0) and O = bf16(w * row). */
#include <math.h>

#include "megamoe/formats.h"
#include "ref/mega_moe_ref.h"
#include "ref/ref_case.h"
#include "test_ref_common.h"
#include "testlib.h"

#define NH 32

typedef double (*row_fn)(int expert, int n);

static mm_ref_attrs ctrl_attrs(int ranks, int experts, int topk) {
    mm_ref_attrs a = ref_attrs_sized(experts, ranks, topk, NH, 2);
    float clamp = 4.0f;
    mm_ref_activation_init(&a.activation, MM_REF_ACT_SWIGLUSTEP, &clamp, 1, NULL);
    return a;
}

static void bf16_weight(mm_ref_case *c, mm_ref_case_weights *w, int which, int64_t e, int64_t k, int64_t n,
                        double v) {
    mm_ref_case_set_weight(&c->attrs, w, which, e, k, n, mm_f32_to_bf16((float)v));
}

/* Fills x and the controlled weights of every routed expert (rows from `row`) and of the BF16 shared
 * experts (shared expert s of rank r gets row(100 + 10 r + s, n)). */
static void fill_ctrl(mm_ref_case *c, row_fn row) {
    int64_t local = c->attrs.expert_num / c->attrs.world_size;
    for (int64_t r = 0; r < c->attrs.world_size; r++) {
        mm_ref_case_rank *rk = &c->ranks[r];
        for (int64_t t = 0; t < rk->bs; t++) {
            rk->x_bf16[t * NH + 0] = mm_f32_to_bf16(1.0f);
            rk->x_bf16[t * NH + 1] = mm_f32_to_bf16(0.25f);
        }
        for (int64_t le = 0; le < local; le++) {
            bf16_weight(c, &rk->routed, 1, le, 0, 0, 16.0);
            bf16_weight(c, &rk->routed, 1, le, 1, 2, 1.0);
            for (int n = 0; n < NH; n++)
                bf16_weight(c, &rk->routed, 2, le, 0, n, row((int)(r * local + le), n));
        }
        if (rk->shared.dtype == MM_DTYPE_BF16)
            for (int64_t s = 0; s < rk->shared.count; s++) {
                bf16_weight(c, &rk->shared, 1, s, 0, 0, 16.0);
                bf16_weight(c, &rk->shared, 1, s, 1, 2, 1.0);
                for (int n = 0; n < NH; n++)
                    bf16_weight(c, &rk->shared, 2, s, 0, n, row((int)(100 + 10 * r + s), n));
            }
    }
}

static void set_route(mm_ref_case *c, int r, int t, const int *ids, const float *w) {
    for (int64_t k = 0; k < c->attrs.topk; k++) {
        c->ranks[r].topk_ids[t * c->attrs.topk + k] = ids[k];
        c->ranks[r].topk_weights[t * c->attrs.topk + k] = w[k];
    }
}

static double row_exact(int e, int n) {
    return (double)(e + 1) * (double)(n - 16) / 8.0;
}

/* topk_weights_type 1 multiplies before GEMM2; on exact data it equals type 0. y = 0.5 O_a - 0.25 O_b. */
static void test_weights_type(void) {
    mm_error err_storage, *err = &err_storage;
    const int64_t bs[2] = {2, 1};
    uint16_t y0[3][NH];
    for (int type = 0; type < 2; type++) {
        mm_ref_attrs a = ctrl_attrs(2, 4, 2);
        a.topk_weights_type = type;
        mm_ref_case c;
        CHECK_OK(mm_ref_case_alloc(&c, &a, bs, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, err), err);
        fill_ctrl(&c, row_exact);
        const int ids0[2] = {3, 0}, ids1[2] = {1, 2}, ids2[2] = {2, 3};
        const float w[2] = {0.5f, -0.25f};
        set_route(&c, 0, 0, ids0, w);
        set_route(&c, 0, 1, ids1, w);
        set_route(&c, 1, 0, ids2, w);
        CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
        const int *all[3] = {ids0, ids1, ids2};
        for (int row = 0; row < 3; row++) {
            const uint16_t *y = row < 2 ? c.ranks[0].y + row * NH : c.ranks[1].y;
            for (int n = 0; n < NH; n++) {
                double expect = 0.5 * row_exact(all[row][0], n) - 0.25 * row_exact(all[row][1], n);
                CHECK(mm_bf16_to_f32(y[n]) == expect);
                if (type == 0)
                    y0[row][n] = y[n];
                else
                    CHECK_EQ_HEX(y[n], y0[row][n]);
            }
        }
        mm_ref_case_free(&c);
    }
}

/* Rows of 5 significant bits: O[n] = 1 + (n % 16) / 16. */
static double row_fine(int e, int n) {
    (void)e;
    return 1.0 + (double)(n % 16) / 16.0;
}
/* Rows with at most 2 significant bits and a small range: exact in E4M3 and E5M2 blocks. */
static double row_coarse(int e, int n) {
    return (double)((n % 4) + 1) * ldexp(1.0, -e) * (n % 2 ? -1.0 : 1.0);
}

/* combine_quant_mode 3/4: every routed row (also the home rank's own expert) takes the MX round trip,
 * the shared row does not. K = 1, w = 1: rank 0 row -> expert 0 (home), rank 1 row -> expert 0 (remote).
 * The fine row 1 + m/16 in a block of amax 1.9375: E4M3 (scale 2^-8 of the element grid, elements
 * 256..496, step 32, saturating at 448 = 1.75) and E5M2 (step 0.25 in value, max 1.75 * 2^15). */
static void test_combine_quant(void) {
    static const double e4m3[16] = {1,   1,   1.125, 1.25, 1.25, 1.25, 1.375, 1.5,
                                    1.5, 1.5, 1.625, 1.75, 1.75, 1.75, 1.75,  1.75};
    static const double e5m2[16] = {1,   1,   1,   1.25, 1.25, 1.25, 1.5,  1.5,
                                    1.5, 1.5, 1.5, 1.75, 1.75, 1.75, 1.75, 1.75};
    mm_error err_storage, *err = &err_storage;
    const int64_t bs[2] = {1, 1};
    for (int mode = 3; mode <= 4; mode++) {
        for (int fine = 0; fine < 2; fine++) {
            mm_ref_attrs a = ctrl_attrs(2, 4, 1);
            a.combine_quant_mode = mode;
            mm_ref_case c;
            CHECK_OK(mm_ref_case_alloc(&c, &a, bs, MM_DTYPE_BF16, 1, MM_DTYPE_BF16, err), err);
            fill_ctrl(&c, fine ? row_fine : row_coarse);
            /* the shared row: 1.0625 everywhere (not representable in either FP8 block) */
            for (int r = 0; r < 2; r++)
                for (int n = 0; n < NH; n++) bf16_weight(&c, &c.ranks[r].shared, 2, 0, 0, n, 1.0625);
            const int ids[1] = {0};
            const float w[1] = {1.0f};
            set_route(&c, 0, 0, ids, w);
            set_route(&c, 1, 0, ids, w);
            CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
            for (int r = 0; r < 2; r++)
                for (int n = 0; n < NH; n++) {
                    double routed = fine ? (mode == 4 ? e4m3[n % 16] : e5m2[n % 16]) : row_coarse(0, n);
                    CHECK(mm_bf16_to_f32(c.ranks[r].y[n]) == routed + 1.0625);
                }
            mm_ref_case_free(&c);
        }
    }
}

/* Rows for the order tests: expert e's row is v[e] everywhere. */
static double order_values[4];
static double row_const(int e, int n) {
    (void)n;
    return e < 4 ? order_values[e] : 0.0;
}

/* One row on rank 0 with K = 3, all weights w; returns y[0] as F32 for the given comm mode / topology. */
static float order_case(int ranks, int experts, const int *ids, float w, int comm_mode, int64_t per_server) {
    mm_error err_storage, *err = &err_storage;
    int64_t bs[4] = {1, 0, 0, 0};
    mm_ref_attrs a = ctrl_attrs(ranks, experts, 3);
    a.combine_comm_mode = comm_mode;
    a.rank_num_per_server = per_server;
    mm_ref_case c;
    CHECK_OK(mm_ref_case_alloc(&c, &a, bs, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, err), err);
    fill_ctrl(&c, row_const);
    const float ws[3] = {w, w, w};
    set_route(&c, 0, 0, ids, ws);
    CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
    float y = mm_bf16_to_f32(c.ranks[0].y[0]);
    for (int n = 1; n < NH; n++) CHECK_EQ_HEX(c.ranks[0].y[n], c.ranks[0].y[0]);
    mm_ref_case_free(&c);
    return y;
}

/* Mode 1: terms t_k = w * O_k; ids (2, 3, 0) on R = 2, E = 4: experts 2 and 3 live on rank 1, 0 on rank 0.
 * With w = 0.5 and rows (2, 2^-7, 2^-7) for experts (2, 3, 0), the terms are (1, 2^-8, 2^-8).
 *   mode 0: ((0 + 1) + 2^-8) + 2^-8 = 1 + 2^-7 in F32 -> BF16 1.0078125.
 *   mode 1: rank 1's partial BF16(1 + 2^-8) = 1 (tie to even), rank 0's BF16(2^-8);
 *           ascending ranks: 2^-8 + 1 -> BF16 1 (tie to even). Not equal, by design.
 * On exact data (terms 1, 0.5, 0.25) both give 1.75.
 * Mode 2: R = 4, domains {0, 1} and {2, 3} (rank_num_per_server 2), E = 4 (one per rank), ids (1, 2, 3),
 * terms (2^-8, 1, 2^-8): domain 0 partial 2^-8, domain 1 partial BF16(1 + 2^-8) = 1; y = BF16(2^-8 + 1)
 * = 1. Mode 0 on the same: 1.0078125; mode 1 on a flat R = 4 (per-rank partials 2^-8, 1, 2^-8, summed
 * in F32): 1.0078125 as well. */
static void test_comm_modes(void) {
    const int ids_flat[3] = {2, 3, 0};
    order_values[0] = ldexp(1.0, -7);
    order_values[1] = 0.0;
    order_values[2] = 2.0;
    order_values[3] = ldexp(1.0, -7);
    CHECK(order_case(2, 4, ids_flat, 0.5f, 0, 0) == 1.0078125f);
    CHECK(order_case(2, 4, ids_flat, 0.5f, 1, 0) == 1.0f);
    order_values[2] = 2.0;
    order_values[3] = 1.0;
    order_values[0] = 0.5;
    CHECK(order_case(2, 4, ids_flat, 0.5f, 0, 0) == 1.75f);
    CHECK(order_case(2, 4, ids_flat, 0.5f, 1, 0) == 1.75f);

    const int ids_layered[3] = {1, 2, 3};
    order_values[0] = 0.0;
    order_values[1] = ldexp(1.0, -8);
    order_values[2] = 1.0;
    order_values[3] = ldexp(1.0, -8);
    CHECK(order_case(4, 4, ids_layered, 1.0f, 0, 2) == 1.0078125f);
    CHECK(order_case(4, 4, ids_layered, 1.0f, 2, 2) == 1.0f);
    CHECK(order_case(4, 4, ids_layered, 1.0f, 1, 0) == 1.0078125f);
}

/* Shared experts: S = 2 BF16 shared experts (rows row_exact(100 + 10 r + s)) added unweighted in order;
 * inactive rows give 0 and are not counted; rank 1 has BS = 0. */
static void test_shared_inactive_bs0(void) {
    mm_error err_storage, *err = &err_storage;
    const int64_t bs[2] = {3, 0};
    mm_ref_attrs a = ctrl_attrs(2, 4, 2);
    mm_ref_case c;
    CHECK_OK(mm_ref_case_alloc(&c, &a, bs, MM_DTYPE_BF16, 2, MM_DTYPE_BF16, err), err);
    order_values[0] = 1.0;
    order_values[1] = 2.0;
    order_values[2] = 4.0;
    order_values[3] = 8.0;
    fill_ctrl(&c, row_const);
    for (int s = 0; s < 2; s++)
        for (int n = 0; n < NH; n++) bf16_weight(&c, &c.ranks[0].shared, 2, s, 0, n, s == 0 ? 0.5 : 0.125);
    const int ids0[2] = {0, 3}, ids2[2] = {2, 3}, junk[2] = {-1, 99};
    const float w0[2] = {1.0f, 0.25f}, w2[2] = {-1.0f, 0.5f};
    set_route(&c, 0, 0, ids0, w0);
    set_route(&c, 0, 1, junk, w0); /* inactive: ids are not looked at */
    set_route(&c, 0, 2, ids2, w2);
    c.ranks[0].x_active_mask[1] = 0;
    CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
    for (int n = 0; n < NH; n++) {
        CHECK(mm_bf16_to_f32(c.ranks[0].y[0 * NH + n]) == 1.0 + 0.25 * 8.0 + 0.5 + 0.125); /* 3.625 */
        CHECK_EQ_HEX(c.ranks[0].y[1 * NH + n], 0x0000);
        CHECK(mm_bf16_to_f32(c.ranks[0].y[2 * NH + n]) == -4.0 + 0.5 * 8.0 + 0.5 + 0.125); /* 0.625 */
    }
    CHECK_EQ_INT(c.ranks[0].expert_token_nums[0], 1); /* expert 0: row 0 */
    CHECK_EQ_INT(c.ranks[0].expert_token_nums[1], 0);
    CHECK_EQ_INT(c.ranks[1].expert_token_nums[0], 1); /* expert 2: row 2 */
    CHECK_EQ_INT(c.ranks[1].expert_token_nums[1], 2); /* expert 3: rows 0 and 2 */
    mm_ref_case_free(&c);
}

/* Shared experts with their own quantization: routed A16W16, shared A4W4-FP (FP4 weights, FP4 input).
 * The shared input x = {1, 0.25, 0.625, 0 ...} is MX-quantized to E2M1: block amax 1, scale 2^-2,
 * elements (4, 1, 2.5 -> 2 (tie to even), ...): 0.625 arrives as 0.5. Shared weight1: gate0 = 4 with
 * channel scale 2^2 (16), up0 = x[1] + x[2] = 0.75 (0.875 unquantized); a = (4 * 0.75, 0) = (3, 0),
 * exact in E4M3 (GEMM2 input); weight2 row 0 = 0.5: O_shared = 1.5 (1.75 if x were not quantized).
 * The routed rows use x[2] nowhere; routed expert 1 (row 2.0), w = 0.5: y = 1 + 1.5 = 2.5. */
static void test_shared_own_quant(void) {
    mm_error err_storage, *err = &err_storage;
    const int64_t bs[2] = {1, 1};
    mm_ref_attrs a = ctrl_attrs(2, 4, 1);
    a.shared_quant_dtype = MM_DTYPE_FP4_E2M1;
    mm_ref_case c;
    CHECK_OK(mm_ref_case_alloc(&c, &a, bs, MM_DTYPE_BF16, 1, MM_DTYPE_FP4_E2M1, err), err);
    order_values[1] = 2.0;
    fill_ctrl(&c, row_const);
    for (int r = 0; r < 2; r++) {
        mm_ref_case_rank *rk = &c.ranks[r];
        rk->x_bf16[2] = mm_f32_to_bf16(0.625f);
        mm_ref_case_set_weight(&a, &rk->shared, 1, 0, 0, 0, mm_f32_to_fp4_e2m1(4.0f));
        mm_ref_case_set_mx_scale(&a, &rk->shared, 1, 0, 0, 0, 129);
        mm_ref_case_set_weight(&a, &rk->shared, 1, 0, 1, 2, mm_f32_to_fp4_e2m1(1.0f));
        mm_ref_case_set_weight(&a, &rk->shared, 1, 0, 2, 2, mm_f32_to_fp4_e2m1(1.0f));
        for (int n = 0; n < NH; n++)
            mm_ref_case_set_weight(&a, &rk->shared, 2, 0, 0, n, mm_f32_to_fp4_e2m1(0.5f));
        const int ids[1] = {1};
        const float w[1] = {0.5f};
        set_route(&c, r, 0, ids, w);
    }
    CHECK_OK(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), err);
    for (int r = 0; r < 2; r++)
        for (int n = 0; n < NH; n++) CHECK(mm_bf16_to_f32(c.ranks[r].y[n]) == 2.5f);
    mm_ref_case_free(&c);
}

static void test_mode_rules(void) {
    mm_error err_storage, *err = &err_storage;
    const int64_t bs[4] = {1, 1, 1, 1};
    mm_ref_attrs a = ctrl_attrs(4, 4, 1);
    mm_ref_case c;
    CHECK_OK(mm_ref_case_alloc(&c, &a, bs, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, err), err);
    c.attrs.combine_comm_mode = 2; /* flat topology */
    CHECK_STATUS(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "layered");
    c.attrs.combine_comm_mode = 1;
    c.attrs.combine_quant_mode = 4;
    CHECK_STATUS(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), MM_ERR_INVALID_ARGUMENT, err);
    c.attrs.combine_quant_mode = 0;
    c.attrs.rank_num_per_server = 3; /* does not divide 4 */
    CHECK_STATUS(mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "rank_num_per_server = 3");
    mm_ref_case_free(&c);
}

int main(void) {
    test_weights_type();
    test_combine_quant();
    test_comm_modes();
    test_shared_inactive_bs0();
    test_shared_own_quant();
    test_mode_rules();
    return mm_test_finish("test_ref_combine");
}
