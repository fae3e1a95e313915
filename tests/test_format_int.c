/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_format_int.c: INT8 per-token quantization (div-away, mul-even, both scale forms), the
 * NaN/Inf row rule, INT4 packing, UINT64 scales, the MX weight-scale layout and the decode tables. */
#include <math.h>

#include "format/decode_tables.h"
#include "megamoe/formats.h"
#include "testlib.h"

static void test_int8_ties(void) {
    /* amax 127: s = 1 and m = 1 exactly, so x / s and x * m are the x below, ties included */
    const float x[8] = {127, 2.5f, -2.5f, 0.5f, -0.5f, 3.5f, 126.5f, -127};
    const int away[8] = {127, 3, -3, 1, -1, 4, 127, -127};
    const int even[8] = {127, 2, -2, 0, 0, 4, 126, -127};
    int8_t q[8];
    float s = -1;
    mm_int8_quantize_row_div_away(x, 8, q, &s);
    CHECK(s == 1.0f);
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(q[i], away[i]);
    mm_int8_quantize_row_mul_even(x, 8, MM_INT8_SCALE_AMAX_DIV_127, q, &s);
    CHECK(s == 1.0f);
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(q[i], even[i]);

    /* amax 254: s = 2, m = 0.5; 5 -> 2.5 and 7 -> 3.5 */
    const float y[4] = {-254, 5, 7, -5};
    mm_int8_quantize_row_div_away(y, 4, q, &s);
    CHECK(s == 2.0f);
    CHECK(q[0] == -127 && q[1] == 3 && q[2] == 4 && q[3] == -3);
    mm_int8_quantize_row_mul_even(y, 4, MM_INT8_SCALE_INV_MUL, q, &s);
    CHECK(s == 2.0f);
    CHECK(q[0] == -127 && q[1] == 2 && q[2] == 4 && q[3] == -2);
}

static void test_int8_scale_forms(void) {
    /* amax 11: m = 127/11 = 0x4138ba2f; 1/m = 0x3db162c5 differs from amax/127 = 0x3db162c6
     * (values from correctly rounded F32 arithmetic worked out separately). */
    const float x[3] = {11, -1, 4};
    int8_t q[3];
    float s;
    mm_int8_quantize_row_mul_even(x, 3, MM_INT8_SCALE_INV_MUL, q, &s);
    CHECK_EQ_HEX(mm_test_f32_bits(s), 0x3db162c5u);
    mm_int8_quantize_row_mul_even(x, 3, MM_INT8_SCALE_AMAX_DIV_127, q, &s);
    CHECK_EQ_HEX(mm_test_f32_bits(s), 0x3db162c6u);
    mm_int8_quantize_row_div_away(x, 3, q, &s);
    CHECK_EQ_HEX(mm_test_f32_bits(s), 0x3db162c6u);
    /* 4 * 11.545454 = 46.18 -> 46; -1 -> -11.55 -> -12 */
    CHECK(q[0] == 127 && q[1] == -12 && q[2] == 46);
}

static void test_int8_zero_clamp_and_nonfinite(void) {
    int8_t q[4] = {9, 9, 9, 9};
    float s = -1;
    const float zeros[4] = {0, -0.0f, 0, -0.0f};
    mm_int8_quantize_row_div_away(zeros, 4, q, &s);
    CHECK(s == 0 && !signbit(s) && q[0] == 0 && q[1] == 0 && q[3] == 0);
    s = -1;
    q[0] = 9;
    mm_int8_quantize_row_mul_even(zeros, 4, MM_INT8_SCALE_INV_MUL, q, &s);
    CHECK(s == 0 && q[0] == 0 && q[2] == 0);

    /* amax 2^-140: s = RN(2^-140 / 127) = 2^-147, so amax / s = 128 must clamp to 127; m = 127 / amax
     * overflows to Inf, and 0 * Inf (NaN) must give 0, not an undefined conversion. */
    const float tiny[4] = {0x1p-140f, -0x1p-140f, 0, 0x1p-141f};
    mm_int8_quantize_row_div_away(tiny, 4, q, &s);
    CHECK_EQ_HEX(mm_test_f32_bits(s), mm_test_f32_bits(0x1p-147f));
    CHECK(q[0] == 127 && q[1] == -127 && q[2] == 0 && q[3] == 64);
    mm_int8_quantize_row_mul_even(tiny, 4, MM_INT8_SCALE_INV_MUL, q, &s);
    CHECK(s == 0);
    CHECK(q[0] == 127 && q[1] == -127 && q[2] == 0 && q[3] == 127);

    /* rows with NaN or Inf: scale NaN, every q 0 (both rules) */
    const float with_nan[3] = {1, NAN, 2};
    const float with_inf[3] = {1, 2, -INFINITY};
    memset(q, 5, sizeof q);
    mm_int8_quantize_row_div_away(with_nan, 3, q, &s);
    CHECK(isnan(s) && q[0] == 0 && q[1] == 0 && q[2] == 0);
    memset(q, 5, sizeof q);
    mm_int8_quantize_row_mul_even(with_inf, 3, MM_INT8_SCALE_AMAX_DIV_127, q, &s);
    CHECK(isnan(s) && q[0] == 0 && q[1] == 0 && q[2] == 0);
    memset(q, 5, sizeof q);
    mm_int8_quantize_row_mul_even(with_nan, 3, MM_INT8_SCALE_INV_MUL, q, &s);
    CHECK(isnan(s) && q[0] == 0 && q[2] == 0);
}

/* Random rows against the spec formulas evaluated with libm's rounding in double (round() is half away,
 * rint() in the default mode is half even). The F32 quotient/product is the spec's own definition. */
static void test_int8_random(void) {
    uint64_t state = 4242;
    int bad = 0;
    for (int row = 0; row < 2000; row++) {
        float x[64];
        int n = 1 + (int)(mm_test_rand_u64(&state) % 64);
        double mag = ldexp(1.0, (int)(mm_test_rand_u64(&state) % 60) - 30);
        for (int i = 0; i < n; i++) x[i] = (float)mm_test_rand_uniform(&state, -mag, mag);
        float amax = 0;
        for (int i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        int8_t q[64];
        float s;
        mm_int8_quantize_row_div_away(x, n, q, &s);
        float s_ref = amax / 127.0f;
        bad += mm_test_f32_bits(s) != mm_test_f32_bits(s_ref);
        for (int i = 0; i < n; i++) {
            double r = round((double)(x[i] / s_ref));
            r = r > 127 ? 127 : (r < -127 ? -127 : r);
            bad += q[i] != (int)r;
        }
        mm_int8_quantize_row_mul_even(x, n, MM_INT8_SCALE_INV_MUL, q, &s);
        float m = 127.0f / amax;
        bad += mm_test_f32_bits(s) != mm_test_f32_bits(1.0f / m);
        int saw_full = 0;
        for (int i = 0; i < n; i++) {
            double r = rint((double)(x[i] * m));
            r = r > 127 ? 127 : (r < -127 ? -127 : r);
            bad += q[i] != (int)r;
            saw_full |= q[i] == 127 || q[i] == -127;
        }
        bad += !saw_full; /* the amax element always maps to +-127 */
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_int4(void) {
    mm_error err_record, *err = &err_record;
    const int8_t v[5] = {1, -1, 7, -8, 3};
    uint8_t packed[3] = {0xAA, 0xAA, 0xAA};
    CHECK_OK(mm_int4_pack(v, 5, packed, err), err);
    CHECK_EQ_HEX(packed[0], 0xF1);
    CHECK_EQ_HEX(packed[1], 0x87);
    CHECK_EQ_HEX(packed[2], 0x03); /* odd tail: high nibble 0 */
    int8_t back[5];
    mm_int4_unpack(packed, 5, back);
    CHECK(memcmp(back, v, sizeof v) == 0);
    CHECK_EQ_INT(mm_nibble_get(packed, 3), 0x8);

    int8_t all[16];
    for (int i = 0; i < 16; i++) all[i] = (int8_t)(i - 8);
    uint8_t p16[8];
    CHECK_OK(mm_int4_pack(all, 16, p16, err), err);
    int8_t all_back[16];
    mm_int4_unpack(p16, 16, all_back);
    CHECK(memcmp(all, all_back, sizeof all) == 0);
    CHECK_EQ_HEX(p16[0], 0x98); /* -8 -> 0x8 low, -7 -> 0x9 high */

    const int8_t bad[3] = {0, 1, 8};
    uint8_t untouched[2] = {0x55, 0x55};
    CHECK_STATUS(mm_int4_pack(bad, 3, untouched, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "values[2] = 8");
    CHECK(untouched[0] == 0x55 && untouched[1] == 0x55);
    const int8_t low[1] = {-9};
    CHECK_STATUS(mm_int4_pack(low, 1, untouched, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "values[0] = -9");
    CHECK_STATUS(mm_int4_pack(v, -2, packed, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "n = -2");
    CHECK_OK(mm_int4_pack(NULL, 0, NULL, err), err);
}

static void test_u64_scales(void) {
    mm_error err_record, *err = &err_record;
    float s = 0;
    CHECK_OK(mm_scale_u64_to_f32(0x3F800000ull, &s, err), err);
    CHECK(s == 1.0f);
    CHECK_OK(mm_scale_u64_to_f32(0xBE000000ull, &s, err), err);
    CHECK(s == -0.125f);
    CHECK_STATUS(mm_scale_u64_to_f32(0x13F800000ull, &s, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "0x000000013f800000");
    CHECK_STR_CONTAINS(err->message, "high 32 bits");
    const uint64_t row[3] = {0x40000000ull, 0x8000000040000000ull, 0};
    float out[3];
    CHECK_STATUS(mm_scale_u64_row_to_f32(row, 3, out, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "scale[1]: ");
    CHECK_OK(mm_scale_u64_row_to_f32(row + 2, 1, out, err), err);
    CHECK(out[0] == 0 && !signbit(out[0]));
    CHECK_STATUS(mm_scale_u64_to_f32(1, NULL, err), MM_ERR_INVALID_ARGUMENT, err);
}

static void test_weight_scale_layout(void) {
    mm_error err_record, *err = &err_record;
    /* K = 96: 3 groups of 32 per row -> 2 pairs, the 4th byte is padding 0 */
    const uint8_t groups[6] = {10, 11, 12, 20, 21, 22};
    uint8_t out[8];
    memset(out, 0xEE, sizeof out);
    CHECK_OK(mm_mx_weight_scales_pack(groups, 2, 96, out, err), err);
    const uint8_t expect[8] = {10, 11, 12, 0, 20, 21, 22, 0};
    CHECK(memcmp(out, expect, 8) == 0);
    CHECK_EQ_INT(mm_mx_weight_scale(out, 1, 96, 2), 22);
    CHECK_EQ_INT(mm_mx_weight_scale(out, 0, 96, 1), 11);
    /* K = 64: 2 groups, no padding */
    uint8_t out64[4];
    CHECK_OK(mm_mx_weight_scales_pack(groups, 2, 64, out64, err), err);
    CHECK(out64[0] == 10 && out64[1] == 11 && out64[2] == 12 && out64[3] == 20);
    CHECK_STATUS(mm_mx_weight_scales_pack(groups, -1, 64, out64, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "n_rows = -1");
}

static void test_decode_tables(void) {
    float table[MM_DECODE_TABLE_MAX];
    static const mm_dtype dtypes[] = {MM_DTYPE_FP4_E2M1,   MM_DTYPE_FP4_E1M2, MM_DTYPE_INT4,
                                      MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, MM_DTYPE_E8M0,
                                      MM_DTYPE_I8,         MM_DTYPE_U8};
    static const int counts[] = {16, 16, 16, 256, 256, 256, 256, 256};
    for (int d = 0; d < 8; d++) {
        CHECK_EQ_INT(mm_format_decode_table(dtypes[d], table), counts[d]);
        int same = 1;
        for (int c = 0; c < counts[d]; c++)
            same &= mm_test_f32_bits(table[c]) == mm_test_f32_bits(mm_dtype_to_f32(dtypes[d], (uint32_t)c));
        CHECK(same);
    }
    mm_format_decode_table(MM_DTYPE_INT4, table);
    CHECK(table[0x8] == -8 && table[0xF] == -1 && table[0x7] == 7);
    mm_format_decode_table(MM_DTYPE_FP8_E4M3FN, table);
    CHECK(table[0x7E] == 448 && isnan(table[0xFF]));
    mm_format_decode_table(MM_DTYPE_FP4_E2M1, table);
    CHECK(table[0xF] == -6 && table[0x1] == 0.5f);
    mm_format_decode_table(MM_DTYPE_E8M0, table);
    CHECK(mm_test_f32_bits(table[0]) == 0x00400000u && table[127] == 1.0f);
    table[0] = 123;
    CHECK_EQ_INT(mm_format_decode_table(MM_DTYPE_BF16, table), 0);
    CHECK(table[0] == 123);
}

int main(void) {
    test_int8_ties();
    test_int8_scale_forms();
    test_int8_zero_clamp_and_nonfinite();
    test_int8_random();
    test_int4();
    test_u64_scales();
    test_weight_scale_layout();
    test_decode_tables();
    return mm_test_finish("test_format_int");
}
