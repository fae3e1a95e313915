/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_format_scalar.c: hand-computed bit patterns for every scalar conversion rule of
 * docs/numerics.md: RNE ties in both directions, saturation, subnormals (smallest, largest, rounding into
 * the normal range), signed zero, NaN and Inf, for BF16, F16, FP8 E4M3FN/E5M2, FP4 E2M1/E1M2 and E8M0. */
#include <math.h>

#include "megamoe/formats.h"
#include "testlib.h"

static void test_bf16(void) {
    CHECK_EQ_HEX(mm_f32_to_bf16(1.0f), 0x3F80);
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x3F808000u)), 0x3F80); /* tie, kept part even: down */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x3F818000u)), 0x3F82); /* tie, kept part odd: up */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x3F808001u)), 0x3F81); /* just above half */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x3F807FFFu)), 0x3F80); /* just below half */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0xBF818000u)), 0xBF82); /* negative tie */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x7F7F7FFFu)), 0x7F7F);
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x7F7F8000u)),
                 0x7F80); /* tie at the top rounds to Inf */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x7F7FFFFFu)), 0x7F80);
    CHECK_EQ_HEX(mm_f32_to_bf16(INFINITY), 0x7F80);
    CHECK_EQ_HEX(mm_f32_to_bf16(-INFINITY), 0xFF80);
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x7F800001u)),
                 0x7FC0); /* signalling NaN: quieted, not Inf */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0xFF810000u)), 0xFFC1); /* payload kept, sign kept */
    CHECK_EQ_HEX(mm_f32_to_bf16(-0.0f), 0x8000);
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x00008000u)), 0x0000); /* subnormal tie to even 0 */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x00018000u)), 0x0002); /* subnormal tie to even 2 */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x007FFFFFu)),
                 0x0080); /* largest F32 subnormal -> 2^-126 */
    CHECK_EQ_HEX(mm_f32_to_bf16(mm_test_f32_from_bits(0x80000001u)), 0x8000);
    CHECK_EQ_HEX(mm_test_f32_bits(mm_bf16_to_f32(0x3F81)), 0x3F810000u);
    CHECK_EQ_HEX(mm_test_f32_bits(mm_bf16_to_f32(0x0001)), 0x00010000u);
    CHECK(isnan(mm_bf16_to_f32(0xFFC1)));
}

static void test_f16(void) {
    CHECK_EQ_HEX(mm_f32_to_f16(1.0f), 0x3C00);
    CHECK_EQ_HEX(mm_f32_to_f16(-2.0f), 0xC000);
    CHECK_EQ_HEX(mm_f32_to_f16(65504.0f), 0x7BFF);
    CHECK_EQ_HEX(mm_f32_to_f16(65519.0f), 0x7BFF);
    CHECK_EQ_HEX(mm_f32_to_f16(65520.0f), 0x7C00); /* halfway to 2^16, odd mantissa: Inf */
    CHECK_EQ_HEX(mm_f32_to_f16(-1e9f), 0xFC00);
    CHECK_EQ_HEX(mm_f32_to_f16(1.0f + 0x1p-11f), 0x3C00);     /* tie down to even */
    CHECK_EQ_HEX(mm_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02); /* tie up to even */
    CHECK_EQ_HEX(mm_f32_to_f16(0x1p-24f), 0x0001);            /* smallest subnormal */
    CHECK_EQ_HEX(mm_f32_to_f16(0x1p-25f), 0x0000);            /* tie between 0 and 2^-24 */
    CHECK_EQ_HEX(mm_f32_to_f16(-0x1p-25f), 0x8000);           /* keeps the sign of zero */
    CHECK_EQ_HEX(mm_f32_to_f16(0x1.8p-25f), 0x0001);          /* above half */
    CHECK_EQ_HEX(mm_f32_to_f16(0x1.8p-24f), 0x0002);          /* 1.5 quanta: tie to even 2 */
    CHECK_EQ_HEX(mm_f32_to_f16(1023 * 0x1p-24f), 0x03FF);     /* largest subnormal */
    CHECK_EQ_HEX(mm_f32_to_f16(1023.5f * 0x1p-24f), 0x0400);  /* rounds into the normal range */
    CHECK_EQ_HEX(mm_f32_to_f16(mm_test_f32_from_bits(0x00000001u)), 0x0000); /* F32 subnormal */
    CHECK_EQ_HEX(mm_f32_to_f16(INFINITY), 0x7C00);
    CHECK_EQ_HEX(mm_f32_to_f16(mm_test_f32_from_bits(0x7FC00000u)), 0x7E00);
    CHECK_EQ_HEX(mm_f32_to_f16(mm_test_f32_from_bits(0xFF800001u)) & 0xFE00,
                 0xFE00); /* quiet NaN, sign kept */
    CHECK_EQ_HEX(mm_f32_to_f16(-0.0f), 0x8000);
    CHECK_EQ_HEX(mm_test_f32_bits(mm_f16_to_f32(0x0001)), mm_test_f32_bits(0x1p-24f));
    CHECK_EQ_HEX(mm_test_f32_bits(mm_f16_to_f32(0x7BFF)), mm_test_f32_bits(65504.0f));
    CHECK_EQ_HEX(mm_test_f32_bits(mm_f16_to_f32(0xFC00)), 0xFF800000u);
    CHECK_EQ_HEX(mm_test_f32_bits(mm_f16_to_f32(0x8000)), 0x80000000u);
    CHECK(isnan(mm_f16_to_f32(0x7C01)));
}

static void test_e4m3(void) {
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(1.0f), 0x38);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(240.0f), 0x77);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(448.0f), 0x7E);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(464.0f), 0x7E); /* halfway 448..480: saturates to 448 */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(465.0f), 0x7E); /* would round to 480 = NaN code: saturates */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(1e30f), 0x7E);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(-1e30f), 0xFE);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(mm_test_f32_from_bits(0x7F7FFFFFu)), 0x7E);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(INFINITY), 0x7F);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(-INFINITY), 0xFF);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(NAN), 0x7F);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(-NAN), 0xFF);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(1.0625f), 0x38); /* tie 1 | 1.125: even 0x38 */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(1.1875f), 0x3A); /* tie 1.125 | 1.25: even 0x3A */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(-1.1875f), 0xBA);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(0x1p-9f), 0x01);   /* smallest subnormal */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(0x1p-10f), 0x00);  /* tie 0 | 2^-9 */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(-0x1p-10f), 0x80); /* signed zero result */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(0x1.8p-10f), 0x01);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(0x1.8p-9f), 0x02);      /* 1.5 steps: tie to even 2 */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(7 * 0x1p-9f), 0x07);    /* largest subnormal */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(7.5f * 0x1p-9f), 0x08); /* rounds into 2^-6, the smallest normal */
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(0x1p-6f), 0x08);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(mm_test_f32_from_bits(0x00000001u)), 0x00);
    CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(-0.0f), 0x80);
    CHECK_EQ_HEX(mm_test_f32_bits(mm_fp8_e4m3fn_to_f32(0x7E)), mm_test_f32_bits(448.0f));
    CHECK_EQ_HEX(mm_test_f32_bits(mm_fp8_e4m3fn_to_f32(0x01)), mm_test_f32_bits(0x1p-9f));
    CHECK_EQ_HEX(mm_test_f32_bits(mm_fp8_e4m3fn_to_f32(0x80)), 0x80000000u);
    CHECK_EQ_HEX(mm_test_f32_bits(mm_fp8_e4m3fn_to_f32(0xB9)), mm_test_f32_bits(-1.125f));
    CHECK(isnan(mm_fp8_e4m3fn_to_f32(0x7F)));
    CHECK(isnan(mm_fp8_e4m3fn_to_f32(0xFF)) && signbit(mm_fp8_e4m3fn_to_f32(0xFF)));
    CHECK(!isnan(mm_fp8_e4m3fn_to_f32(0x78)) && mm_fp8_e4m3fn_to_f32(0x78) == 256.0f); /* no Inf code */
}

static void test_e5m2(void) {
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(1.0f), 0x3C);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(57344.0f), 0x7B);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(61440.0f), 0x7B); /* halfway 57344..65536: saturates */
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(1e10f), 0x7B);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(-1e10f), 0xFB);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(INFINITY), 0x7C);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(-INFINITY), 0xFC);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(NAN), 0x7F);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(-NAN), 0xFF);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(1.125f), 0x3C); /* tie 1 | 1.25 */
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(1.375f), 0x3E); /* tie 1.25 | 1.5 */
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(0x1p-16f), 0x01);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(0x1p-17f), 0x00);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(-0x1p-17f), 0x80);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(0x1.8p-16f), 0x02);
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(3 * 0x1p-16f), 0x03);    /* largest subnormal */
    CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(3.5f * 0x1p-16f), 0x04); /* into 2^-14 */
    CHECK_EQ_HEX(mm_test_f32_bits(mm_fp8_e5m2_to_f32(0x7B)), mm_test_f32_bits(57344.0f));
    CHECK_EQ_HEX(mm_test_f32_bits(mm_fp8_e5m2_to_f32(0x7C)), 0x7F800000u);
    CHECK_EQ_HEX(mm_test_f32_bits(mm_fp8_e5m2_to_f32(0xFC)), 0xFF800000u);
    CHECK(isnan(mm_fp8_e5m2_to_f32(0x7D)) && isnan(mm_fp8_e5m2_to_f32(0x7E)) &&
          isnan(mm_fp8_e5m2_to_f32(0xFF)));
    CHECK_EQ_HEX(mm_test_f32_bits(mm_fp8_e5m2_to_f32(0x01)), mm_test_f32_bits(0x1p-16f));
}

static void test_fp4(void) {
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    static const float e1m2[8] = {0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f};
    for (int c = 0; c < 16; c++) {
        float expect = (c & 8) ? -e2m1[c & 7] : e2m1[c & 7];
        CHECK_EQ_HEX(mm_test_f32_bits(mm_fp4_e2m1_to_f32((uint8_t)c)), mm_test_f32_bits(expect));
        expect = (c & 8) ? -e1m2[c & 7] : e1m2[c & 7];
        CHECK_EQ_HEX(mm_test_f32_bits(mm_fp4_e1m2_to_f32((uint8_t)c)), mm_test_f32_bits(expect));
    }
    CHECK_EQ_HEX(mm_test_f32_bits(mm_fp4_e2m1_to_f32(0xF3)), mm_test_f32_bits(1.5f)); /* high bits ignored */
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(0.25f), 0x0);                                     /* tie 0 | 0.5 */
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(0.26f), 0x1);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(0.75f), 0x2); /* tie 0.5 | 1 (subnormal into normal) */
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(1.25f), 0x2); /* tie 1 | 1.5 */
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(1.75f), 0x4); /* tie 1.5 | 2 */
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(2.5f), 0x4);  /* tie 2 | 3 */
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(3.5f), 0x6);  /* tie 3 | 4 */
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(5.0f), 0x6);  /* tie 4 | 6 */
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(5.01f), 0x7);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(7.0f), 0x7); /* halfway 6 | 8: saturates */
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(100.0f), 0x7);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(-100.0f), 0xF);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(-2.5f), 0xC);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(INFINITY), 0x7);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(-INFINITY), 0xF);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(NAN), 0x0);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(-NAN), 0x0);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(-0.0f), 0x8);
    CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(-0.25f), 0x8);
}

static void test_e8m0(void) {
    CHECK_EQ_HEX(mm_test_f32_bits(mm_e8m0_to_f32(127)), mm_test_f32_bits(1.0f));
    CHECK_EQ_HEX(mm_test_f32_bits(mm_e8m0_to_f32(128)), mm_test_f32_bits(2.0f));
    CHECK_EQ_HEX(mm_test_f32_bits(mm_e8m0_to_f32(1)), mm_test_f32_bits(0x1p-126f));
    CHECK_EQ_HEX(mm_test_f32_bits(mm_e8m0_to_f32(0)), 0x00400000u); /* 2^-127, an F32 subnormal */
    CHECK_EQ_HEX(mm_test_f32_bits(mm_e8m0_to_f32(254)), mm_test_f32_bits(0x1p127f));
    CHECK(isnan(mm_e8m0_to_f32(0xFF)));
}

static void test_generic(void) {
    CHECK_EQ_HEX(mm_dtype_from_f32(MM_DTYPE_FP8_E4M3FN, 448.0f), 0x7E);
    CHECK_EQ_HEX(mm_dtype_from_f32(MM_DTYPE_FP8_E5M2, -INFINITY), 0xFC);
    CHECK_EQ_HEX(mm_dtype_from_f32(MM_DTYPE_BF16, 1.0f), 0x3F80);
    CHECK_EQ_HEX(mm_dtype_from_f32(MM_DTYPE_F16, 1.0f), 0x3C00);
    CHECK_EQ_HEX(mm_dtype_from_f32(MM_DTYPE_F32, -2.0f), 0xC0000000u);
    CHECK_EQ_HEX(mm_dtype_from_f32(MM_DTYPE_FP4_E2M1, -6.0f), 0xF);
    CHECK_EQ_HEX(mm_dtype_from_f32(MM_DTYPE_HIFLOAT8, 1.0f), 0);
    CHECK_EQ_HEX(mm_dtype_from_f32(MM_DTYPE_COUNT, 1.0f), 0);
    CHECK(mm_dtype_to_f32(MM_DTYPE_INT4, 0xF) == -1.0f);
    CHECK(mm_dtype_to_f32(MM_DTYPE_INT4, 0x7) == 7.0f);
    CHECK(mm_dtype_to_f32(MM_DTYPE_INT4, 0x8) == -8.0f);
    CHECK(mm_dtype_to_f32(MM_DTYPE_I8, 0x80) == -128.0f);
    CHECK(mm_dtype_to_f32(MM_DTYPE_U8, 0x80) == 128.0f);
    CHECK(mm_dtype_to_f32(MM_DTYPE_I16, 0x8001) == -32767.0f);
    CHECK(mm_dtype_to_f32(MM_DTYPE_E8M0, 130) == 8.0f);
    CHECK(mm_dtype_to_f32(MM_DTYPE_FP4_E1M2, 0xD) == -1.25f);
    CHECK(isnan(mm_dtype_to_f32(MM_DTYPE_HIFLOAT8, 0x10)));
    CHECK(isnan(mm_dtype_to_f32(MM_DTYPE_INVALID, 0)));
}

int main(void) {
    test_bf16();
    test_f16();
    test_e4m3();
    test_e5m2();
    test_fp4();
    test_e8m0();
    test_generic();
    return mm_test_finish("test_format_scalar");
}
