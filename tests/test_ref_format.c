/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ref_format.c: the reference's independent format code (support/ref/format_ref.c) agrees
 * with the library's (src/format) bit for bit, exhaustively where the domain is small: every BF16 code
 * and every F32 high half with the low halves that decide rounding (0, 1, half-1, half, half+1, all
 * ones); every FP8/FP4 code and every BF16 value plus each midpoint between neighbouring codes +- one
 * F32 ulp; every E8M0 byte; MX quantization with amax at every BF16 exponent, every element code below
 * it, special groups and short tails; dequantization of every code with every scale byte; INT8 rows
 * with exact ties, tiny, zero and non-finite rows. The two are written independently, so a bug in
 * either shows here, and a bug in the library's format code no longer hides behind a shared reference
 * (docs/reference.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "megamoe/formats.h"
#include "ref/format_ref.h"
#include "testlib.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* same F32 value, NaN matching any NaN */
static int same_f32(float a, float b) {
    return (isnan(a) && isnan(b)) || f32_bits(a) == f32_bits(b);
}

static int64_t mismatches;
static void note(int ok, const char *what, uint32_t input, uint32_t mine, uint32_t lib) {
    if (ok) return;
    if (mismatches++ < 10)
        fprintf(stderr, "  %s: input 0x%08x: reference 0x%x, library 0x%x\n", what, input, mine, lib);
}

static void test_bf16(void) {
    mismatches = 0;
    for (uint32_t c = 0; c < 65536; c++) {
        float a = mm_ref_fmt_bf16_to_f32((uint16_t)c), b = mm_bf16_to_f32((uint16_t)c);
        note(same_f32(a, b), "bf16 decode", c, f32_bits(a), f32_bits(b));
    }
    static const uint32_t lows[] = {0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x1234, 0xC000};
    for (uint32_t hi = 0; hi < 65536; hi++)
        for (size_t l = 0; l < sizeof lows / sizeof lows[0]; l++) {
            uint32_t u = hi << 16 | lows[l];
            uint16_t a = mm_ref_fmt_f32_to_bf16(bits_f32(u)), b = mm_f32_to_bf16(bits_f32(u));
            note(a == b, "f32 -> bf16", u, a, b);
        }
    CHECK_EQ_INT(mismatches, 0);
}

static const mm_dtype elems[] = {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1};

static void test_elements(void) {
    mismatches = 0;
    for (size_t t = 0; t < 3; t++) {
        mm_dtype d = elems[t];
        uint32_t codes = d == MM_DTYPE_FP4_E2M1 ? 16 : 256;
        for (uint32_t c = 0; c < codes; c++) {
            float a = (float)mm_ref_fmt_decode(d, c), b = mm_dtype_to_f32(d, c);
            note(same_f32(a, b), mm_dtype_name(d), c, f32_bits(a), f32_bits(b));
        }
        /* every finite BF16 value (the MX elements are encoded from BF16 values times a power of 2) */
        for (uint32_t c = 0; c < 65536; c++) {
            float v = mm_bf16_to_f32((uint16_t)c);
            if (!isfinite(v)) continue;
            uint32_t a = mm_ref_fmt_encode(d, v), b = mm_dtype_from_f32(d, v);
            note(a == b, "encode bf16 value", f32_bits(v), a, b);
        }
        /* midpoints of neighbouring codes (ties) and one F32 ulp either side, both signs */
        uint32_t half = codes / 2;
        for (uint32_t c = 0; c + 1 < half; c++) {
            double lo = mm_ref_fmt_decode(d, c), hi = mm_ref_fmt_decode(d, c + 1);
            if (!isfinite(hi)) continue;
            float mid = (float)((lo + hi) / 2);
            float probes[6] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
            for (int p = 0; p < 3; p++) probes[3 + p] = -probes[p];
            for (int p = 0; p < 6; p++) {
                uint32_t a = mm_ref_fmt_encode(d, probes[p]), b = mm_dtype_from_f32(d, probes[p]);
                note(a == b, "encode midpoint", f32_bits(probes[p]), a, b);
            }
        }
    }
    for (uint32_t b = 0; b < 256; b++) {
        float x = mm_ref_fmt_e8m0_to_f32((uint8_t)b), y = mm_e8m0_to_f32((uint8_t)b);
        note(same_f32(x, y), "e8m0", b, f32_bits(x), f32_bits(y));
    }
    uint8_t row[128];
    for (int i = 0; i < 128; i++) row[i] = (uint8_t)(i * 2 + 1);
    for (int64_t i = 0; i < 256; i++) {
        note(mm_ref_fmt_nibble(row, i) == mm_nibble_get(row, i), "nibble", (uint32_t)i,
             mm_ref_fmt_nibble(row, i), mm_nibble_get(row, i));
        int8_t v;
        uint8_t byte = (uint8_t)i;
        mm_int4_unpack(&byte, 1, &v);
        note(mm_ref_fmt_int4_value((uint8_t)(i % 16)) == v, "int4", (uint32_t)i,
             (uint32_t)mm_ref_fmt_int4_value((uint8_t)(i % 16)), (uint32_t)v);
    }
    uint8_t scales[3 * 3 * 2];
    for (int i = 0; i < 18; i++) scales[i] = (uint8_t)(100 + i);
    for (int64_t k_len = 33; k_len <= 160; k_len += 63) /* 33: one pair; 96: 2 pairs; 159: 3 pairs */
        for (int64_t n = 0; n < 3; n++)
            for (int64_t g = 0; g < (k_len + 31) / 32; g++)
                note(mm_ref_fmt_mx_weight_scale(scales, n, k_len, g) ==
                         mm_mx_weight_scale(scales, n, k_len, g),
                     "weight scale", (uint32_t)(n * 100 + g), mm_ref_fmt_mx_weight_scale(scales, n, k_len, g),
                     mm_mx_weight_scale(scales, n, k_len, g));
    CHECK_EQ_INT(mismatches, 0);
}

/* quantizes row x (n BF16 codes) both ways and compares codes and scales */
static void compare_mx_row(mm_dtype d, const uint16_t *x, int64_t n, const char *what) {
    uint8_t qa[64], qb[64], sa[4], sb[4];
    memset(qa, 0xAA, sizeof qa);
    memset(qb, 0xAA, sizeof qb);
    mm_error err;
    mm_ref_fmt_mx_quantize_bf16(x, n, d, qa, sa);
    CHECK_OK(mm_mx_quantize_row_bf16(x, n, d, qb, sb, &err), &err);
    int64_t bytes = mm_dtype_row_bytes(d, n);
    for (int64_t g = 0; g < (n + 31) / 32; g++) note(sa[g] == sb[g], what, x[g * 32], sa[g], sb[g]);
    for (int64_t i = 0; i < bytes; i++) note(qa[i] == qb[i], what, (uint32_t)i, qa[i], qb[i]);
    /* and back */
    float fa[64], fb[64];
    mm_ref_fmt_mx_dequantize(qb, sb, n, d, fa);
    CHECK_OK(mm_mx_dequantize_row(qb, sb, n, d, fb, &err), &err);
    for (int64_t i = 0; i < n; i++)
        note(same_f32(fa[i], fb[i]), "mx dequantize", (uint32_t)i, f32_bits(fa[i]), f32_bits(fb[i]));
}

static void test_mx(void) {
    mismatches = 0;
    for (size_t t = 0; t < 3; t++) {
        mm_dtype d = elems[t];
        /* amax at every BF16 exponent field (largest and smallest mantissa), the other 31 slots walking
         * every BF16 code of either sign from amax down to 2^-24 amax (every code that does not
         * quantize to 0 in any of the formats, and the first ones that do) */
        for (uint32_t e = 1; e < 255; e++)
            for (uint32_t top = 0; top <= 0x7F; top += 0x7F) {
                uint16_t amax = (uint16_t)(e << 7 | top), x[32];
                float a = mm_bf16_to_f32(amax);
                x[0] = amax;
                uint32_t c = 0, slot = 1;
                while (c < 65536) {
                    for (slot = 1; slot < 32 && c < 65536; c++) {
                        float v = fabsf(mm_bf16_to_f32((uint16_t)c));
                        if (isfinite(v) && v <= a && v >= a * 0x1p-24f) x[slot++] = (uint16_t)c;
                    }
                    compare_mx_row(d, x, (int64_t)slot, "mx quantize");
                }
            }
        /* special groups: zeros (both signs), subnormals only, NaN, Inf, a short odd tail */
        uint16_t x[40];
        for (int i = 0; i < 40; i++) x[i] = (uint16_t)(i % 2 ? 0x8000 : 0);
        compare_mx_row(d, x, 40, "zero group");
        for (int i = 0; i < 40; i++) x[i] = (uint16_t)(i * 3 % 128 | (i % 3 ? 0x8000 : 0));
        compare_mx_row(d, x, 40, "subnormal group");
        x[5] = 0x7FC1;
        compare_mx_row(d, x, 33, "nan group");
        x[5] = 0xFF80;
        compare_mx_row(d, x, 37, "inf group");
        uint64_t st = 5 + t;
        for (int r = 0; r < 400; r++) {
            float f[37];
            for (int i = 0; i < 37; i++)
                f[i] = (float)ldexp(mm_test_rand_uniform(&st, -1, 1), (int)(mm_test_rand_u64(&st) % 40) - 20);
            uint8_t qa[40], qb[40], sa[2], sb[2];
            mm_error err;
            mm_ref_fmt_mx_quantize_f32(f, 37, d, qa, sa);
            CHECK_OK(mm_mx_quantize_row_f32(f, 37, d, qb, sb, &err), &err);
            note(memcmp(qa, qb, (size_t)mm_dtype_row_bytes(d, 37)) == 0 && memcmp(sa, sb, 2) == 0,
                 "mx quantize f32", (uint32_t)r, qa[0], qb[0]);
        }
        /* every code with every scale byte */
        uint32_t codes = d == MM_DTYPE_FP4_E2M1 ? 16 : 256;
        for (uint32_t b = 0; b < 256; b++) {
            uint8_t q[256], s[8];
            float fa[256], fb[256];
            mm_error err;
            for (uint32_t c = 0; c < codes; c++) {
                if (d == MM_DTYPE_FP4_E2M1)
                    q[c / 2] = (uint8_t)(c % 2 ? q[c / 2] | c << 4 : c);
                else
                    q[c] = (uint8_t)c;
            }
            memset(s, (int)b, sizeof s);
            mm_ref_fmt_mx_dequantize(q, s, codes, d, fa);
            CHECK_OK(mm_mx_dequantize_row(q, s, codes, d, fb, &err), &err);
            for (uint32_t c = 0; c < codes; c++)
                note(same_f32(fa[c], fb[c]), "mx dequantize all", b << 8 | c, f32_bits(fa[c]),
                     f32_bits(fb[c]));
        }
    }
    CHECK_EQ_INT(mismatches, 0);
}

static void compare_int8(const float *x, int64_t n, const char *what) {
    int8_t qa[64], qb[64];
    float sa, sb;
    mm_ref_fmt_int8_div_away(x, n, qa, &sa);
    mm_int8_quantize_row_div_away(x, n, qb, &sb);
    note(same_f32(sa, sb) && memcmp(qa, qb, (size_t)n) == 0, what, f32_bits(x[0]), f32_bits(sa),
         f32_bits(sb));
    mm_ref_fmt_int8_mul_even(x, n, qa, &sa);
    mm_int8_quantize_row_mul_even(x, n, MM_INT8_SCALE_AMAX_DIV_127, qb, &sb);
    note(same_f32(sa, sb) && memcmp(qa, qb, (size_t)n) == 0, what, f32_bits(x[0]), f32_bits(sa),
         f32_bits(sb));
}

static void test_int8(void) {
    mismatches = 0;
    uint64_t st = 3;
    float x[64];
    for (int r = 0; r < 4000; r++) {
        int scale = (int)(mm_test_rand_u64(&st) % 60) - 30;
        for (int i = 0; i < 64; i++) x[i] = (float)ldexp(mm_test_rand_uniform(&st, -1, 1), scale);
        compare_int8(x, 64, "int8 random");
    }
    for (int a = 1; a <= 254; a++) { /* amax a: integers and half-integers, exact ties for both rules */
        x[0] = (float)a;
        for (int i = 1; i < 64; i++) x[i] = (float)((i * 37) % (2 * a + 1) - a) + (i % 2 ? 0.5f : 0.0f);
        for (int i = 1; i < 64; i++) x[i] = fminf(fmaxf(x[i], -(float)a), (float)a);
        compare_int8(x, 64, "int8 ties");
    }
    memset(x, 0, sizeof x);
    compare_int8(x, 64, "int8 zeros");
    x[3] = 0x1p-140f;
    x[4] = -0x1p-149f;
    compare_int8(x, 64, "int8 tiny");
    x[7] = NAN;
    compare_int8(x, 64, "int8 nan");
    x[7] = -INFINITY;
    compare_int8(x, 64, "int8 inf");
    CHECK_EQ_INT(mismatches, 0);
}

int main(void) {
    test_bf16();
    test_elements();
    test_mx();
    test_int8();
    return mm_test_finish("test_ref_format");
}
