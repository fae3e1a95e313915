/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_format_mx.c: MX block-32 quantization (docs/numerics.md "MX block-32 quantization").
 *
 * Pins the spec's worked example byte for byte, the special groups (all zero, BF16-subnormal only,
 * NaN, Inf), the short last group, FP4 packing of an odd row, E5M2 and E2M1 variants, saturation of
 * scaled values, the scale extremes (b = 0 and b near 254) and compares random groups with a reference
 * that computes each group in double arithmetic from the code tables. Rows of adversarial BF16 / F32 patterns
 * (every exponent, subnormals, +-0, NaN, Inf) are compared element by element with the exact encoder:
 * the public quantizers run format/mx_quantize_avx512.c on an AVX-512 CPU and the scalar loop under
 * MEGAMOE_ISA=ref, and both must give these bits. */
#include <math.h>

#include "format/convert.h"
#include "format/mx_code_table.h"
#include "megamoe/formats.h"
#include "testlib.h"

static uint16_t bf16_of(float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return (uint16_t)(bits >> 16); /* test inputs are exact BF16 values */
}

/* The first n codes of q are want[0..n-1] (one check each). */
static void check_codes(const uint8_t *q, const uint8_t *want, int n) {
    for (int i = 0; i < n; i++) CHECK_EQ_HEX(q[i], want[i]);
}

static void test_worked_example(void) {
    uint16_t x[32] = {0};
    float xf[32] = {0};
    x[1] = bf16_of(8), x[2] = bf16_of(64), x[3] = bf16_of(512);
    xf[1] = 8, xf[2] = 64, xf[3] = 512;
    uint8_t q[32], scale = 0;
    mm_error err_record, *err = &err_record;
    CHECK_OK(mm_mx_quantize_row_bf16(x, 32, MM_DTYPE_FP8_E4M3FN, q, &scale, err), err);
    CHECK_EQ_HEX(scale, 128);
    check_codes(q, (const uint8_t[]){0x00, 0x48, 0x60, 0x78}, 4);
    int rest_zero = 1;
    for (int i = 4; i < 32; i++) rest_zero &= q[i] == 0;
    CHECK(rest_zero);
    uint8_t q2[32], scale2 = 0;
    CHECK_OK(mm_mx_quantize_row_f32(xf, 32, MM_DTYPE_FP8_E4M3FN, q2, &scale2, err), err);
    CHECK(memcmp(q, q2, 32) == 0 && scale2 == 128);
    float back[32];
    CHECK_OK(mm_mx_dequantize_row(q, &scale, 32, MM_DTYPE_FP8_E4M3FN, back, err), err);
    CHECK(back[0] == 0 && back[1] == 8 && back[2] == 64 && back[3] == 512 && back[31] == 0);
    CHECK_EQ_HEX(mm_mx_scale_byte(512.0f, MM_DTYPE_FP8_E4M3FN), 128);
}

static void test_special_groups(void) {
    mm_error err_record, *err = &err_record;
    uint16_t x[64];
    uint8_t q[64], scales[2];
    /* group 0: zeros with signs; group 1: BF16 subnormals only (exponent field 0) */
    for (int i = 0; i < 32; i++) x[i] = (i & 1) ? 0x8000 : 0x0000;
    for (int i = 32; i < 64; i++) x[i] = (uint16_t)(((i & 1) ? 0x8000 : 0) | (i & 0x7F));
    x[40] = 0x007F; /* largest positive BF16 subnormal */
    CHECK_OK(mm_mx_quantize_row_bf16(x, 64, MM_DTYPE_FP8_E4M3FN, q, scales, err), err);
    CHECK_EQ_HEX(scales[0], 0);
    CHECK_EQ_HEX(scales[1], 0);
    int all_plus_zero = 1;
    for (int i = 0; i < 64; i++) all_plus_zero &= q[i] == 0x00;
    CHECK(all_plus_zero);

    /* NaN group (E4M3): scale 0xFF, every element NaN with its own sign */
    for (int i = 0; i < 32; i++) x[i] = bf16_of((i & 1) ? -1.0f : 2.0f);
    x[5] = 0x7FC1;
    CHECK_OK(mm_mx_quantize_row_bf16(x, 32, MM_DTYPE_FP8_E4M3FN, q, scales, err), err);
    CHECK_EQ_HEX(scales[0], 0xFF);
    CHECK_EQ_HEX(q[0], 0x7F);
    CHECK_EQ_HEX(q[1], 0xFF);
    CHECK_EQ_HEX(q[5], 0x7F); /* the NaN itself: 0x7FC1 is a positive NaN */
    CHECK_EQ_HEX(q[6], 0x7F);
    float back[64];
    CHECK_OK(mm_mx_dequantize_row(q, scales, 32, MM_DTYPE_FP8_E4M3FN, back, err), err);
    CHECK(isnan(back[0]) && isnan(back[31]));

    /* Inf group (E5M2): also scale 0xFF and NaN elements (the Inf too) */
    for (int i = 0; i < 32; i++) x[i] = bf16_of(1.0f);
    x[7] = 0xFF80; /* -Inf */
    CHECK_OK(mm_mx_quantize_row_bf16(x, 32, MM_DTYPE_FP8_E5M2, q, scales, err), err);
    CHECK_EQ_HEX(scales[0], 0xFF);
    CHECK_EQ_HEX(q[0], 0x7F);
    CHECK_EQ_HEX(q[7], 0xFF);

    /* NaN group (E2M1): FP4 has no NaN, elements are 0 */
    uint8_t packed[16];
    memset(packed, 0xAA, sizeof packed);
    for (int i = 0; i < 32; i++) x[i] = bf16_of(-3.0f);
    x[0] = 0x7F80;
    CHECK_OK(mm_mx_quantize_row_bf16(x, 32, MM_DTYPE_FP4_E2M1, packed, scales, err), err);
    CHECK_EQ_HEX(scales[0], 0xFF);
    int zero = 1;
    for (int i = 0; i < 16; i++) zero &= packed[i] == 0;
    CHECK(zero);
    CHECK_EQ_HEX(mm_mx_scale_byte(INFINITY, MM_DTYPE_FP8_E4M3FN), 0xFF);
    CHECK_EQ_HEX(mm_mx_scale_byte(NAN, MM_DTYPE_FP4_E2M1), 0xFF);
    CHECK_EQ_HEX(mm_mx_scale_byte(0.0f, MM_DTYPE_FP8_E5M2), 0);
    CHECK_EQ_HEX(mm_mx_scale_byte(0x1p-130f, MM_DTYPE_FP8_E5M2), 0); /* BF16 subnormal */
}

/* A NaN element keeps its own sign. */
static void test_nan_sign(void) {
    uint16_t x[2] = {0x7FC1, 0xFFC1};
    uint8_t q[2], scale;
    mm_error *no_err = NULL; /* err may be NULL */
    CHECK_OK(mm_mx_quantize_row_bf16(x, 2, MM_DTYPE_FP8_E4M3FN, q, &scale, no_err), no_err);
    CHECK_EQ_HEX(q[0], 0x7F);
    CHECK_EQ_HEX(q[1], 0xFF);
}

static void test_short_group_and_variants(void) {
    mm_error err_record, *err = &err_record;
    /* n = 40: the second group holds 8 elements and its amax is taken over them only. */
    uint16_t x[40];
    for (int i = 0; i < 32; i++) x[i] = bf16_of(1024.0f);
    for (int i = 32; i < 40; i++) x[i] = bf16_of((float)(i - 32) * 0.25f); /* amax 1.75: e = 127 */
    uint8_t q[40], scales[2];
    CHECK_OK(mm_mx_quantize_row_bf16(x, 40, MM_DTYPE_FP8_E4M3FN, q, scales, err), err);
    CHECK_EQ_HEX(scales[0], 137 - 8); /* 1024: e = 137 */
    CHECK_EQ_HEX(scales[1], 127 - 8);
    CHECK_EQ_HEX(q[0], 0x78);  /* 1024 * 2^-2 = 256 */
    CHECK_EQ_HEX(q[33], 0x68); /* 0.25 * 2^8 = 64: exponent field 13 */
    CHECK_EQ_HEX(q[39], 0x7E); /* 1.75 * 2^8 = 448: exponent field 15, mantissa 6 */

    /* E5M2: (1, -3, 0.5): amax 3 has e = 128, b = 113, factor 2^14 */
    uint16_t y[3] = {bf16_of(1.0f), bf16_of(-3.0f), bf16_of(0.5f)};
    uint8_t qy[3], sy;
    CHECK_OK(mm_mx_quantize_row_bf16(y, 3, MM_DTYPE_FP8_E5M2, qy, &sy, err), err);
    CHECK_EQ_HEX(sy, 113);
    check_codes(qy, (const uint8_t[]){0x74, 0xFA, 0x70}, 3);

    /* E2M1 on an odd row: (6, -1.5, 0.25, 3, 1): amax 6 has e = 129, b = 127, factor 1 */
    uint16_t z[5] = {bf16_of(6.0f), bf16_of(-1.5f), bf16_of(0.25f), bf16_of(3.0f), bf16_of(1.0f)};
    uint8_t qz[3] = {0xEE, 0xEE, 0xEE}, sz;
    CHECK_OK(mm_mx_quantize_row_bf16(z, 5, MM_DTYPE_FP4_E2M1, qz, &sz, err), err);
    CHECK_EQ_HEX(sz, 127);
    CHECK_EQ_HEX(qz[0], 0xB7);
    CHECK_EQ_HEX(qz[1], 0x50); /* 0.25 is a tie between 0 and 0.5: even 0 */
    CHECK_EQ_HEX(qz[2], 0x02); /* the high nibble of the odd tail is 0 */
    float back[5];
    CHECK_OK(mm_mx_dequantize_row(qz, &sz, 5, MM_DTYPE_FP4_E2M1, back, err), err);
    CHECK(back[0] == 6 && back[1] == -1.5f && back[2] == 0 && back[3] == 3 && back[4] == 1);
}

static void test_saturation_and_scale_extremes(void) {
    mm_error err_record, *err = &err_record;
    /* E4M3: amax 510 (e = 135, b = 127): scaled values up to 510 exceed 448 and saturate */
    uint16_t x[4] = {bf16_of(510.0f), bf16_of(-480.0f), bf16_of(464.0f), bf16_of(448.0f)};
    uint8_t q[4], s;
    CHECK_OK(mm_mx_quantize_row_bf16(x, 4, MM_DTYPE_FP8_E4M3FN, q, &s, err), err);
    CHECK_EQ_HEX(s, 127);
    check_codes(q, (const uint8_t[]){0x7E, 0xFE, 0x7E, 0x7E}, 4);
    /* E2M1: amax 7 (e = 129, b = 127): 7 saturates to 6 */
    uint16_t y[2] = {bf16_of(7.0f), bf16_of(-5.0f)};
    uint8_t qy, sy;
    CHECK_OK(mm_mx_quantize_row_bf16(y, 2, MM_DTYPE_FP4_E2M1, &qy, &sy, err), err);
    CHECK_EQ_HEX(qy, 0xE7); /* 7 -> 6 (0x7), -5 -> tie 4 | 6 -> -4 (0xE) */

    /* b = 0 with e > 0: amax 2^-120 (e = 7 <= emax 8); the factor is 2^127. Element 2^-130 is a BF16
     * subnormal whose scaled value 2^-3 must not be lost. */
    uint16_t t[3] = {bf16_of(0x1p-120f), 0x0008 /* 2^-130 */, 0x8001 /* -2^-133 */};
    uint8_t qt[3], st;
    CHECK_OK(mm_mx_quantize_row_bf16(t, 3, MM_DTYPE_FP8_E4M3FN, qt, &st, err), err);
    CHECK_EQ_HEX(st, 0);
    CHECK_EQ_HEX(qt[0], 0x70); /* 128 */
    CHECK_EQ_HEX(qt[1], 0x20); /* 0.125 */
    CHECK_EQ_HEX(qt[2], 0x88); /* -2^-6 */
    float back[3];
    CHECK_OK(mm_mx_dequantize_row(qt, &st, 3, MM_DTYPE_FP8_E4M3FN, back, err), err);
    CHECK(back[0] == 0x1p-120f && back[1] == 0x1p-130f && back[2] == -0x1p-133f); /* F32 subnormals */
    CHECK_EQ_HEX(mm_mx_scale_byte(0x1p-118f, MM_DTYPE_FP8_E4M3FN), 1);

    /* largest scale: amax 1.5 * 2^127 (e = 254), b = 246, factor 2^-119 */
    uint16_t h[2] = {bf16_of(0x1.8p127f), bf16_of(1.0f)};
    uint8_t qh[2], sh;
    CHECK_OK(mm_mx_quantize_row_bf16(h, 2, MM_DTYPE_FP8_E4M3FN, qh, &sh, err), err);
    CHECK_EQ_HEX(sh, 246);
    CHECK_EQ_HEX(qh[0], 0x7C); /* 384 */
    CHECK_EQ_HEX(qh[1], 0x00);
    CHECK_OK(mm_mx_dequantize_row(qh, &sh, 2, MM_DTYPE_FP8_E4M3FN, back, err), err);
    CHECK(back[0] == 0x1.8p127f && back[1] == 0);
    /* amax is rounded to BF16 first: 511.99997 becomes 512 (e = 136) */
    float just_below;
    uint32_t jb = 0x43FFFFFFu;
    memcpy(&just_below, &jb, sizeof jb);
    CHECK_EQ_HEX(mm_mx_scale_byte(just_below, MM_DTYPE_FP8_E4M3FN), 128);
    CHECK_EQ_HEX(mm_mx_scale_byte(1.0f, MM_DTYPE_FP4_E2M1), 125);
    CHECK_EQ_HEX(mm_mx_scale_byte(1.0f, MM_DTYPE_FP4_E1M2), 127);
    CHECK_EQ_HEX(mm_mx_scale_byte(1.0f, MM_DTYPE_BF16), 0xFF);
}

/* ---- reference: one group in double arithmetic from the code tables ---- */

static double ref_decode(mm_dtype elem, int mag) {
    int mant_bits = elem == MM_DTYPE_FP8_E4M3FN ? 3 : (elem == MM_DTYPE_FP8_E5M2 ? 2 : 1);
    int bias = elem == MM_DTYPE_FP8_E4M3FN ? 7 : (elem == MM_DTYPE_FP8_E5M2 ? 15 : 1);
    int e = mag >> mant_bits, m = mag & ((1 << mant_bits) - 1);
    if (e == 0) return ldexp(m, 1 - bias - mant_bits);
    return ldexp((1 << mant_bits) + m, e - bias - mant_bits);
}

static int ref_encode(mm_dtype elem, double v) {
    int top = elem == MM_DTYPE_FP8_E4M3FN ? 0x7E : (elem == MM_DTYPE_FP8_E5M2 ? 0x7B : 7);
    int sign_bit = elem == MM_DTYPE_FP4_E2M1 ? 8 : 0x80;
    double a = fabs(v);
    int best = 0;
    for (int c = 1; c <= top; c++) { /* nearest by distance; ties keep the even code */
        double dc = fabs(ref_decode(elem, c) - a), db = fabs(ref_decode(elem, best) - a);
        if (dc < db || (dc == db && (c & 1) == 0)) best = c;
    }
    return best | (signbit(v) ? sign_bit : 0);
}

static void test_random_against_reference(void) {
    static const mm_dtype elems[3] = {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1};
    static const int emaxes[3] = {8, 15, 2};
    uint64_t state = 77;
    int mismatches = 0;
    for (int round = 0; round < 600; round++) {
        int which = round % 3;
        mm_dtype elem = elems[which];
        int n = 1 + (int)(mm_test_rand_u64(&state) % 96);
        int center = (int)(mm_test_rand_u64(&state) % 250) + 2; /* biased exponent around which values sit */
        uint16_t x[96];
        for (int i = 0; i < n; i++) {
            uint64_t r = mm_test_rand_u64(&state);
            int e = center - (int)(r % 12);
            if (e < 0) e = 0;
            if (e > 254) e = 254;
            x[i] = (uint16_t)(((r >> 8) & 1) << 15 | (uint32_t)e << 7 | ((r >> 16) & 0x7F));
        }
        uint8_t q[96], scales[3];
        mm_error err_record, *err = &err_record;
        CHECK_OK(mm_mx_quantize_row_bf16(x, n, elem, q, scales, err), err);
        for (int g = 0; g * 32 < n; g++) {
            int len = n - g * 32 < 32 ? n - g * 32 : 32;
            double amax = 0;
            for (int i = 0; i < len; i++) {
                uint32_t bits = (uint32_t)x[g * 32 + i] << 16;
                float v;
                memcpy(&v, &bits, sizeof v);
                if (fabs((double)v) > amax) amax = fabs((double)v);
            }
            int e = 0;
            if (amax > 0) {
                int ex;
                frexp(amax, &ex);
                e = ex - 1 + 127; /* floor(log2(amax)) + 127 */
                if (e < 1) e = 0; /* BF16 subnormal amax */
            }
            int b = e == 0 ? 0 : (e - emaxes[which] > 0 ? e - emaxes[which] : 0);
            if (scales[g] != b && mismatches++ < 5)
                mm_test_report_fail(__FILE__, __LINE__, "group %d scale %d, reference %d", g, scales[g], b);
            for (int i = 0; i < len; i++) {
                int idx = g * 32 + i;
                uint32_t bits = (uint32_t)x[idx] << 16;
                float v;
                memcpy(&v, &bits, sizeof v);
                int expect = e == 0 ? 0 : ref_encode(elem, ldexp((double)v, 127 - b));
                int got = elem == MM_DTYPE_FP4_E2M1 ? mm_nibble_get(q, idx) : q[idx];
                if (got != expect) {
                    if (mismatches++ < 5)
                        mm_test_report_fail(__FILE__, __LINE__, "%s x[%d] = %a: 0x%x, reference 0x%x",
                                            mm_dtype_name(elem), idx, (double)v, got, expect);
                    else
                        mm_test_failed++;
                } else {
                    mm_test_passed++;
                }
            }
        }
    }
}

/* The table-driven element encoder must equal the exact scaled encoder for every element a finite group
 * can hold: all scale bytes b, every BF16 exponent from the subnormals up to b + emax, both signs, all
 * mantissas (exponents far below the table are included: they must give signed zero). */
static void test_code_table_matches_exact_encoder(void) {
    static const mm_dtype elems[3] = {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1};
    static const int emaxes[3] = {8, 15, 2};
    long long bad = 0, checked = 0;
    CHECK(mm_mx_code_table_of(MM_DTYPE_BF16) == NULL);
    for (int t = 0; t < 3; t++) {
        const mm_mx_code_table *table = mm_mx_code_table_of(elems[t]);
        CHECK(table != NULL);
        if (!table) continue;
        for (int b = 0; b <= 254; b++) {
            int top = b + emaxes[t] < 254 ? b + emaxes[t] : 254;
            int low = b + table->min_exp - 3;
            for (int ev = 0; ev <= top; ev++) {
                if (ev > 2 && ev < low) continue; /* the same "rounds to zero" branch as ev = low */
                for (uint32_t sm = 0; sm < 256; sm++) {
                    uint16_t v = (uint16_t)((sm & 0x80u) << 8 | (uint32_t)ev << 7 | (sm & 0x7Fu));
                    uint8_t fast = mm_mx_encode_element(elems[t], table, v, b);
                    uint8_t exact = mm_encode_scaled(elems[t], (uint32_t)v << 16, 127 - b);
                    checked++;
                    if (fast != exact && bad++ < 5)
                        mm_test_report_fail(__FILE__, __LINE__, "%s v 0x%04x b %d: table 0x%x, exact 0x%x",
                                            mm_dtype_name(elems[t]), v, b, fast, exact);
                }
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(checked > 3000000);
}

static void test_argument_errors(void) {
    mm_error err_record, *err = &err_record;
    uint16_t x[2] = {0};
    uint8_t q[2], s[1];
    CHECK_STATUS(mm_mx_quantize_row_bf16(x, -1, MM_DTYPE_FP8_E4M3FN, q, s, err), MM_ERR_INVALID_ARGUMENT,
                 err);
    CHECK_STR_CONTAINS(err->message, "n = -1");
    CHECK_STATUS(mm_mx_quantize_row_bf16(x, 2, MM_DTYPE_FP4_E1M2, q, s, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "fp4_e1m2");
    CHECK_STATUS(mm_mx_quantize_row_bf16(x, 2, MM_DTYPE_FP8_E5M2, q, NULL, err), MM_ERR_INVALID_ARGUMENT,
                 err);
    CHECK_STR_CONTAINS(err->message, "scales is NULL");
    CHECK_OK(mm_mx_quantize_row_bf16(NULL, 0, MM_DTYPE_FP8_E5M2, NULL, NULL, err), err);
    float out[2];
    CHECK_STATUS(mm_mx_dequantize_row(q, s, 2, MM_DTYPE_INT4, out, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "int4");
}

/* One BF16 pattern of the adversarial mix: any exponent, or near a group-wide center, zeros, BF16
 * subnormals, Inf and NaN (rarely, so most groups stay finite). */
static uint16_t adversarial_bf16(uint64_t *state, int center) {
    uint64_t r = mm_test_rand_u64(state);
    uint16_t sign = (uint16_t)(((r >> 60) & 1) << 15), mantissa = (uint16_t)((r >> 16) & 0x7F);
    switch (r % 64) {
    case 0: return sign;                                 /* +-0 */
    case 1: return (uint16_t)(sign | (mantissa | 1));    /* subnormal */
    case 2: return (uint16_t)(sign | 0x7F80);            /* Inf, rare: 1 in 64 */
    case 3: return (uint16_t)(sign | 0x7FC0 | mantissa); /* NaN */
    case 4:
    case 5:
    case 6: return (uint16_t)(sign | ((r >> 24) % 255) << 7 | mantissa); /* anywhere */
    default: {
        int e = center - (int)((r >> 32) % 24);
        if (e < 0) e = 0;
        return (uint16_t)(sign | (uint32_t)e << 7 | mantissa);
    }
    }
}

/* The codes and scales of a quantized row, recomputed element by element with the exact encoder. */
static void expected_row(const uint16_t *x, int n, mm_dtype elem, int emax, uint8_t *codes, uint8_t *scales) {
    for (int g = 0; g * 32 < n; g++) {
        int len = n - g * 32 < 32 ? n - g * 32 : 32;
        uint16_t amax = 0;
        for (int i = 0; i < len; i++)
            if ((x[g * 32 + i] & 0x7FFF) > amax) amax = (uint16_t)(x[g * 32 + i] & 0x7FFF);
        int b = amax >= 0x7F80 ? 0xFF : (amax >> 7) > emax ? (amax >> 7) - emax : 0;
        scales[g] = (uint8_t)b;
        for (int i = 0; i < len; i++) {
            uint16_t v = x[g * 32 + i];
            int nibble = elem == MM_DTYPE_FP4_E2M1;
            if (b == 0xFF)
                codes[g * 32 + i] = nibble ? 0 : (uint8_t)((v & 0x8000 ? 0x80 : 0) | 0x7F);
            else if ((amax >> 7) == 0)
                codes[g * 32 + i] = 0;
            else
                codes[g * 32 + i] = mm_encode_scaled(elem, (uint32_t)v << 16, 127 - b);
        }
    }
}

static void test_adversarial_rows_same_bits(void) {
    static const mm_dtype elems[3] = {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1};
    static const int emaxes[3] = {8, 15, 2};
    enum { MAX_N = 32 * 9 + 7 };
    uint64_t state = 2026;
    long long bad = 0, compared = 0;
    for (int round = 0; round < 3000; round++) {
        int which = round % 3, f32_input = (round / 3) % 2;
        mm_dtype elem = elems[which];
        int nibble = elem == MM_DTYPE_FP4_E2M1;
        int n = 1 + (int)(mm_test_rand_u64(&state) % MAX_N);
        int center = 1 + (int)(mm_test_rand_u64(&state) % 254);
        uint16_t x[MAX_N];
        float xf[MAX_N];
        for (int i = 0; i < n; i++) {
            x[i] = adversarial_bf16(&state, center);
            uint32_t bits = (uint32_t)x[i] << 16;
            /* F32 input: the BF16 value plus low bits that round to it or to a neighbour (ties
             * included); NaNs keep their payload bits, which the rounding quiets */
            if (f32_input)
                bits |= (uint32_t)(mm_test_rand_u64(&state) % 3 == 0 ? 0x8000
                                                                     : mm_test_rand_u64(&state) & 0xFFFF);
            memcpy(&xf[i], &bits, 4);
            if (f32_input) x[i] = mm_f32_to_bf16(xf[i]);
        }
        uint8_t q[MAX_N], scales[MAX_N / 32 + 1], want[MAX_N], want_scales[MAX_N / 32 + 1];
        mm_error err_record, *err = &err_record;
        if (f32_input)
            CHECK_OK(mm_mx_quantize_row_f32(xf, n, elem, q, scales, err), err);
        else
            CHECK_OK(mm_mx_quantize_row_bf16(x, n, elem, q, scales, err), err);
        expected_row(x, n, elem, emaxes[which], want, want_scales);
        for (int g = 0; g * 32 < n; g++) bad += scales[g] != want_scales[g];
        for (int i = 0; i < n; i++) {
            uint8_t got = nibble ? mm_nibble_get(q, i) : q[i];
            bad += got != want[i];
            compared++;
        }
    }
    CHECK(compared > 400000);
    CHECK_EQ_INT(bad, 0);
}

int main(void) {
    test_worked_example();
    test_special_groups();
    test_nan_sign();
    test_short_group_and_variants();
    test_saturation_and_scale_extremes();
    test_random_against_reference();
    test_code_table_matches_exact_encoder();
    test_adversarial_rows_same_bits();
    test_argument_errors();
    return mm_test_finish("test_format_mx");
}
