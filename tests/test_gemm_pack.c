/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_pack.c: weight packing: the panel layout round-trips every element of both API
 * layouts, the precomputed column data (column sums, INT4 offsets, MX scales) has hand-computed values,
 * small GEMMs with hand-computed results, and the validation messages. */
#include "gemm/packed.h"
#include "test_gemm_common.h"

/* The weight formats the GEMM packs: BF16 and every format the format table gives a scale (INT8, INT4
 * per row; the MX element types per block), so a new scaled format is covered without an edit here. */
static int is_weight_type(mm_dtype d) {
    return d == MM_DTYPE_BF16 || mm_format_traits_of(d)->scale_dtype != MM_DTYPE_INVALID;
}

/* Every element of the panels equals the API element; padding (K beyond k, columns beyond n) is 0. */
static void check_layout_round_trip(mm_dtype w_dtype, int transposed) {
    mm_error err_storage, *err = &err_storage;
    gemm_case c;
    gemm_case_make(&c, MM_DTYPE_BF16, w_dtype, 0, 45, 37, transposed, 0, 7);
    mm_gemm_weight_desc d = gemm_case_weights(&c);
    d.bias = NULL;
    mm_gemm_packed_weights *w = NULL;
    CHECK_OK(mm_gemm_pack_weights(&d, &w, err), err);
    if (!w) return;
    CHECK_EQ_INT(w->n_panels, 2);
    CHECK_EQ_INT(w->k_padded % w->k_group, 0);
    CHECK_EQ_INT(w->panel_bytes % 64, 0);
    CHECK_EQ_INT((uintptr_t)w->panels % 64, 0);
    int bad = 0;
    for (int64_t p = 0; p < w->n_panels; p++)
        for (int cc = 0; cc < MM_GEMM_NR; cc++)
            for (int64_t k = 0; k < w->k_padded; k++) {
                int64_t n = p * MM_GEMM_NR + cc;
                uint32_t code = mm_packed_code(w_dtype, mm_packed_panel(w, p), k, cc);
                if (n >= c.n || k >= c.k)
                    bad += code != 0;
                else
                    bad += gemm_decode(w_dtype, code) *
                               (mm_format_is_mx(w_dtype) ? mm_e8m0_to_f32(c.w_mx[n * 2 + k / 32]) : 1.0) !=
                           c.deq_w[k * c.n + n];
            }
    CHECK_EQ_INT(bad, 0);
    mm_gemm_packed_free(w);
    gemm_case_free(&c);
}

static float run_one(mm_dtype a_dtype, const void *a, const float *a_scale, const uint8_t *a_mx,
                     const mm_gemm_weight_desc *d, int64_t col) {
    mm_error err_storage, *err = &err_storage;
    mm_gemm_packed_weights *w = NULL;
    float out[8] = {0};
    CHECK_OK(mm_gemm_pack_weights(d, &w, err), err);
    mm_gemm_group g = {.rows = 1,
                       .a = a,
                       .a_stride = 64,
                       .a_row_scales = a_scale,
                       .a_mx_scales = a_mx,
                       .a_mx_stride = 4,
                       .w = w,
                       .c = out,
                       .ldc = 8};
    CHECK_OK(mm_gemm_grouped(a_dtype, 1, &g, NULL, err), err);
    mm_gemm_packed_free(w);
    return out[col];
}

static void check_hand_computed(void) {
    /* A8W4-INT, K = 3 (odd), N = 2. W = [[1, -8], [7, 2], [-3, 0]] stored (K, N), one byte per row.
     * colsum = (5, -6); offsets = bias - 8 s colsum = (1 - 8*0.5*5, 2 - 8*0.25*(-6)) = (-19, 14).
     * a = (2, -1, 4): acc = (2 - 7 - 12, -16 - 2 + 0) = (-17, -18).
     * H = ((-17 * 0.5) + (-19)) * s_x = -27.5 * s_x and ((-18 * 0.25) + 14) * s_x = 9.5 * s_x. */
    const uint8_t w_kn[3] = {0x81, 0x27, 0x0D};              /* (1,-8), (7,2), (-3,0) */
    const uint8_t w_nk[2][2] = {{0x71, 0x0D}, {0x28, 0x00}}; /* rows (1,7,-3) and (-8,2,0) */
    const float s_w[2] = {0.5f, 0.25f}, bias[2] = {1.0f, 2.0f};
    const int8_t a[64] = {2, -1, 4};
    const float s_x = 0.1f;
    mm_gemm_packed_weights *w = NULL;
    mm_error err_storage, *err = &err_storage;
    mm_gemm_weight_desc d = {
        .dtype = MM_DTYPE_INT4, .k = 3, .n = 2, .data = w_kn, .scales = s_w, .bias = bias};
    CHECK_OK(mm_gemm_pack_weights(&d, &w, err), err);
    if (w) {
        CHECK_EQ_INT(w->col_sum_x128[0], 5 * 128);
        CHECK_EQ_INT(w->col_sum_x128[1], -6 * 128);
        CHECK_EQ_HEX(gemm_f32_bits(w->col_offset[0]), gemm_f32_bits(-19.0f));
        CHECK_EQ_HEX(gemm_f32_bits(w->col_offset[1]), gemm_f32_bits(14.0f));
        mm_gemm_packed_free(w);
    }
    for (int t = 0; t < 2; t++) {
        d.transposed = t;
        d.data = t ? (const void *)w_nk : (const void *)w_kn;
        CHECK_EQ_HEX(gemm_f32_bits(run_one(MM_DTYPE_I8, a, &s_x, NULL, &d, 0)), gemm_f32_bits(-27.5f * s_x));
        CHECK_EQ_HEX(gemm_f32_bits(run_one(MM_DTYPE_I8, a, &s_x, NULL, &d, 1)), gemm_f32_bits(9.5f * s_x));
    }
    /* Standard bias (none given): plain acc * s_W * s_X. */
    d.bias = NULL;
    CHECK_EQ_HEX(gemm_f32_bits(run_one(MM_DTYPE_I8, a, &s_x, NULL, &d, 1)), gemm_f32_bits(-4.5f * s_x));

    /* INT8: W column (3, -2, 100), a = (2, -1, 4): acc = 6 + 2 + 400 = 408; s_W 0.5, s_X 0.1. */
    const int8_t w8[3] = {3, -2, 100};
    mm_gemm_weight_desc d8 = {.dtype = MM_DTYPE_I8, .k = 3, .n = 1, .data = w8, .scales = s_w};
    CHECK_EQ_HEX(gemm_f32_bits(run_one(MM_DTYPE_I8, a, &s_x, NULL, &d8, 0)), gemm_f32_bits(204.0f * s_x));

    /* BF16: a = (1.5, -2), W column (3, 0.25): 4.5 - 0.5 = 4. */
    const uint16_t a16[32] = {0x3FC0, 0xC000};
    const uint16_t w16[2] = {0x4040, 0x3E80};
    mm_gemm_weight_desc d16 = {.dtype = MM_DTYPE_BF16, .k = 2, .n = 1, .data = w16};
    CHECK_EQ_HEX(gemm_f32_bits(run_one(MM_DTYPE_BF16, a16, NULL, NULL, &d16, 0)), gemm_f32_bits(4.0f));

    /* MX E4M3: a = (1.0 = 0x38, 2.0 = 0x40) with scale byte 128 (x2) -> (2, 4);
     * W column (0.5 = 0x30, -1 = 0xB8) with scale byte 126 (x0.5) -> (0.25, -0.5); C = 0.5 - 2 = -1.5. */
    const uint8_t a8[64] = {0x38, 0x40};
    const uint8_t a_mx[4] = {128};
    const uint8_t w_fp8[2] = {0x30, 0xB8};
    const uint8_t w_mx[2] = {126, 0};
    mm_gemm_weight_desc dmx = {
        .dtype = MM_DTYPE_FP8_E4M3FN, .k = 2, .n = 1, .data = w_fp8, .mx_scales = w_mx};
    CHECK_EQ_HEX(gemm_f32_bits(run_one(MM_DTYPE_FP8_E4M3FN, a8, NULL, a_mx, &dmx, 0)), gemm_f32_bits(-1.5f));

    /* MX FP4 x FP4 with K = 33 (two groups): a = 6 (0x7) at k = 0 and -0.5 (0x9) at k = 32, scales 127
     * and 129 (x4); W column 1.5 (0x3) at k = 0 and 3 (0x5) at k = 32, scales 127 and 126.
     * C = 6 * 1.5 + (-0.5 * 4) * (3 * 0.5) = 9 - 3 = 6. */
    uint8_t a4[64] = {0};
    a4[0] = 0x07, a4[16] = 0x09;
    const uint8_t a4_mx[4] = {127, 129};
    uint8_t w4[17] = {0};
    w4[0] = 0x03, w4[16] = 0x05;
    const uint8_t w4_mx[2] = {127, 126};
    mm_gemm_weight_desc d4 = {
        .dtype = MM_DTYPE_FP4_E2M1, .k = 33, .n = 1, .transposed = 1, .data = w4, .mx_scales = w4_mx};
    CHECK_EQ_HEX(gemm_f32_bits(run_one(MM_DTYPE_FP4_E2M1, a4, NULL, a4_mx, &d4, 0)), gemm_f32_bits(6.0f));
}

/* interleave_gate_up: packed column 32p + c is gate column 16p + c or up column I + 16p + c - 16, with
 * the values of the plain GEMM at those columns; columns past I are 0. */
static void check_interleave(mm_dtype a_dtype, mm_dtype w_dtype, int64_t half) {
    mm_error err_storage, *err = &err_storage;
    gemm_case c;
    gemm_case_make(&c, a_dtype, w_dtype, 11, 70, 2 * half, 1, 0, 99);
    mm_gemm_weight_desc d = gemm_case_weights(&c);
    mm_gemm_pack_options po = {.interleave_gate_up = 1};
    mm_gemm_packed_weights *w = NULL;
    CHECK_OK(mm_gemm_pack_weights_with(&d, &po, &w, err), err);
    if (!w) return;
    int64_t n_out = mm_gemm_packed_n_out(w);
    CHECK_EQ_INT(n_out, 32 * ((half + 15) / 16));
    float *out = calloc((size_t)(c.rows * n_out), sizeof(float));
    mm_gemm_group g = gemm_case_group(&c, w, out, n_out);
    CHECK_OK(mm_gemm_grouped(a_dtype, 1, &g, NULL, err), err);
    int bad = 0;
    for (int64_t r = 0; r < c.rows; r++)
        for (int64_t pc = 0; pc < n_out; pc++) {
            int64_t lane = pc % 32, j = pc / 32 * 16 + lane % 16;
            float got = out[r * n_out + pc];
            if (j >= half) {
                bad += got != 0.0f;
                continue;
            }
            double value, abs_sum;
            float exact;
            gemm_case_expect(&c, r, lane < 16 ? j : half + j, &value, &abs_sum, &exact);
            bad += mm_format_is_int_quant(w_dtype)
                       ? gemm_f32_bits(got) != gemm_f32_bits(exact)
                       : fabs((double)got - value) > gemm_f32_sum_bound(c.k, abs_sum);
        }
    CHECK_EQ_INT(bad, 0);
    free(out);
    mm_gemm_packed_free(w);
    d.n = 2 * half + 1;
    CHECK_STATUS(mm_gemm_pack_weights_with(&d, &po, &w, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "is odd: interleave_gate_up needs N = 2I");
    gemm_case_free(&c);
}

static void check_validation(void) {
    mm_error err_storage, *err = &err_storage;
    mm_gemm_packed_weights *w = (mm_gemm_packed_weights *)&err_storage; /* must be reset to NULL */
    const float scales[4] = {1, 1, 1, 1};
    uint8_t data[64] = {0};
    mm_gemm_weight_desc d = {.dtype = MM_DTYPE_F32, .k = 4, .n = 4, .data = data};
    CHECK_STATUS(mm_gemm_pack_weights(&d, &w, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "weight dtype f32 is not a GEMM weight type");
    CHECK(w == NULL);
    d.dtype = MM_DTYPE_I8;
    d.k = 0;
    CHECK_STATUS(mm_gemm_pack_weights(&d, &w, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "K = 0, N = 4: both must be >= 1");
    d.k = 4;
    CHECK_STATUS(mm_gemm_pack_weights(&d, &w, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "weight scales are NULL: int8 weights need (N,) F32 scales");
    d.scales = scales;
    d.bias = scales;
    CHECK_STATUS(mm_gemm_pack_weights(&d, &w, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "only int4 takes a bias");
    d.bias = NULL;
    d.k = MM_GEMM_INT_MAX_K + 1;
    CHECK_STATUS(mm_gemm_pack_weights(&d, &w, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "weight K = 65537 exceeds 65536");
    d.k = 4;
    d.dtype = MM_DTYPE_FP8_E5M2;
    CHECK_STATUS(mm_gemm_pack_weights(&d, &w, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "weight mx_scales are NULL");
    CHECK_STATUS(mm_gemm_pack_weights(NULL, &w, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STATUS(mm_gemm_pack_weights(&d, NULL, err), MM_ERR_INVALID_ARGUMENT, err);
    mm_gemm_packed_free(NULL);
}

int main(void) {
    for (int d = MM_DTYPE_INVALID + 1; d < MM_DTYPE_COUNT; d++)
        if (is_weight_type((mm_dtype)d))
            for (int t = 0; t < 2; t++) check_layout_round_trip((mm_dtype)d, t);
    check_hand_computed();
    check_interleave(MM_DTYPE_I8, MM_DTYPE_I8, 21);
    check_interleave(MM_DTYPE_I8, MM_DTYPE_INT4, 32);
    check_interleave(MM_DTYPE_BF16, MM_DTYPE_BF16, 40);
    check_interleave(MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, 17);
    check_validation();
    return mm_test_finish("test_gemm_pack");
}
