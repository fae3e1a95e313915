/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_format_exhaustive.c: every code of every narrow format, and RNE against a reference.
 *
 * Decoders are checked code by code against the textbook formula sign * 2^(e - bias) * (1 + m / 2^M)
 * (or the subnormal 2^(1 - bias) * m / 2^M) evaluated in double; every code must re-encode to itself
 * (NaN codes to the canonical NaN). Encoders are checked on a large random sample of F32 inputs against
 * an independent reference that enumerates the format's code table, finds the two neighbours of |x| and
 * picks the nearer one (ties: the even code), saturating or overflowing to Inf per docs/numerics.md. */
#include <math.h>
#include <stdlib.h>

#include "megamoe/formats.h"
#include "testlib.h"

/* One binary minifloat format as the reference sees it. */
typedef struct ref_format {
    const char *name;
    int exp_bits, mant_bits, bias;
    uint32_t max_finite_code;  /* magnitude code of the largest finite value */
    int overflow_to_inf;       /* 1: IEEE overflow to the Inf code max+1; 0: saturate */
    uint32_t inf_code;         /* magnitude code that +-Inf becomes (spec: Inf, NaN or the maximum) */
    uint32_t (*encode)(float); /* the implementation under test */
} ref_format;

/* The formula value of a finite magnitude code. */
static double ref_value(const ref_format *f, uint32_t code) {
    uint32_t e = code >> f->mant_bits, m = code & ((1u << f->mant_bits) - 1);
    if (e == 0) return ldexp((double)m, 1 - f->bias - f->mant_bits);
    return ldexp(1.0 + ldexp((double)m, -f->mant_bits), (int)e - f->bias);
}

/* Reference RNE of a non-negative finite or infinite a, as a magnitude code. */
static uint32_t ref_round(const ref_format *f, double a) {
    if (isinf(a)) return f->inf_code;
    uint32_t top = f->max_finite_code;
    double top_value = ref_value(f, top);
    if (a > top_value) {
        if (!f->overflow_to_inf) return top;
        /* The next value past the top, 2^(emax+1), stands for Inf (its code is top + 1, even). */
        double next = ldexp(1.0, (int)(top >> f->mant_bits) - f->bias + 1);
        if (2 * a >= top_value + next) return top + 1; /* ties go to the even Inf code */
        return top;
    }
    uint32_t lo = 0, hi = top; /* invariant: value(lo) <= a <= value(hi) */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (ref_value(f, mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double vlo = ref_value(f, lo), vhi = ref_value(f, hi);
    if (a == vlo) return lo;
    if (a == vhi) return hi;
    double twice = 2 * a, sum = vlo + vhi; /* both exact in double */
    if (twice < sum) return lo;
    if (twice > sum) return hi;
    return (lo & 1) ? hi : lo;
}

static uint32_t enc_bf16(float v) {
    return mm_f32_to_bf16(v);
}
static uint32_t enc_f16(float v) {
    return mm_f32_to_f16(v);
}
static uint32_t enc_e4m3(float v) {
    return mm_f32_to_fp8_e4m3fn(v);
}
static uint32_t enc_e5m2(float v) {
    return mm_f32_to_fp8_e5m2(v);
}
static uint32_t enc_e2m1(float v) {
    return mm_f32_to_fp4_e2m1(v);
}

static const ref_format formats[] = {
    {"bf16", 8, 7, 127, 0x7F7F, 1, 0x7F80, enc_bf16}, {"f16", 5, 10, 15, 0x7BFF, 1, 0x7C00, enc_f16},
    {"e4m3fn", 4, 3, 7, 0x7E, 0, 0x7F, enc_e4m3},     {"e5m2", 5, 2, 15, 0x7B, 0, 0x7C, enc_e5m2},
    {"e2m1", 2, 1, 1, 0x7, 0, 0x7, enc_e2m1},
};

static int total_bits(const ref_format *f) {
    return 1 + f->exp_bits + f->mant_bits;
}

/* Checks one encode against the reference; reports the first few mismatches in detail. */
static int mismatches;
static void check_encode(const ref_format *f, float x) {
    uint32_t sign = mm_test_f32_bits(x) >> 31;
    double a = fabs((double)x);
    uint32_t expect = ref_round(f, a) | (sign << (total_bits(f) - 1));
    uint32_t got = f->encode(x);
    if (got == expect) {
        mm_test_passed++;
    } else if (mismatches++ < 10) {
        mm_test_report_fail(__FILE__, __LINE__, "%s encode(%a = 0x%08x) = 0x%x, reference 0x%x", f->name,
                            (double)x, mm_test_f32_bits(x), got, expect);
    } else {
        mm_test_failed++;
    }
}

static void test_fp8_codes(void) {
    for (int c = 0; c < 256; c++) {
        uint8_t code = (uint8_t)c;
        double sign = (c & 0x80) ? -1.0 : 1.0;
        /* E4M3FN: only s.1111.111 is NaN; everything else is finite. */
        float v = mm_fp8_e4m3fn_to_f32(code);
        if ((c & 0x7F) == 0x7F) {
            CHECK(isnan(v) && !!signbit(v) == !!(c & 0x80));
        } else {
            CHECK((double)v == sign * ref_value(&formats[2], (uint32_t)c & 0x7F) &&
                  !!signbit(v) == !!(c & 0x80));
        }
        CHECK_EQ_HEX(mm_f32_to_fp8_e4m3fn(v), code);
        /* E5M2: s.11111.00 is Inf, s.11111.xx (xx != 0) NaN, re-encoding to the canonical s.11111.11. */
        v = mm_fp8_e5m2_to_f32(code);
        if ((c & 0x7C) == 0x7C && (c & 3)) {
            CHECK(isnan(v));
            CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(v), (c & 0x80) | 0x7F);
        } else if ((c & 0x7F) == 0x7C) {
            CHECK((double)v == sign * INFINITY);
            CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(v), code);
        } else {
            CHECK((double)v == sign * ref_value(&formats[3], (uint32_t)c & 0x7F) &&
                  !!signbit(v) == !!(c & 0x80));
            CHECK_EQ_HEX(mm_f32_to_fp8_e5m2(v), code);
        }
    }
}

static void test_fp4_codes(void) {
    static const ref_format e1m2 = {"e1m2", 1, 2, 1, 0x7, 0, 0x7, NULL};
    for (int c = 0; c < 16; c++) {
        double sign = (c & 8) ? -1.0 : 1.0;
        float v = mm_fp4_e2m1_to_f32((uint8_t)c);
        CHECK((double)v == sign * ref_value(&formats[4], (uint32_t)c & 7) && !!signbit(v) == !!(c & 8));
        CHECK_EQ_HEX(mm_f32_to_fp4_e2m1(v), c);
        v = mm_fp4_e1m2_to_f32((uint8_t)c);
        CHECK((double)v == sign * ref_value(&e1m2, (uint32_t)c & 7) && !!signbit(v) == !!(c & 8));
    }
}

static void test_e8m0_codes(void) {
    for (int b = 0; b < 256; b++) {
        float v = mm_e8m0_to_f32((uint8_t)b);
        if (b == 255)
            CHECK(isnan(v));
        else
            CHECK((double)v == ldexp(1.0, b - 127));
    }
}

static void test_16bit_codes(void) {
    int bad_bf16 = 0, bad_f16 = 0;
    for (uint32_t c = 0; c < 65536; c++) {
        double sign = (c & 0x8000) ? -1.0 : 1.0;
        /* BF16 */
        float v = mm_bf16_to_f32((uint16_t)c);
        uint32_t mag = c & 0x7FFF;
        if (mag > 0x7F80) {
            if (!isnan(v) || mm_f32_to_bf16(v) != (c | 0x40)) bad_bf16++;
        } else {
            double expect = mag == 0x7F80 ? sign * INFINITY : sign * ref_value(&formats[0], mag);
            if ((double)v != expect || !!signbit(v) != !!(c & 0x8000) || mm_f32_to_bf16(v) != c) bad_bf16++;
        }
        /* F16 */
        v = mm_f16_to_f32((uint16_t)c);
        if (mag > 0x7C00) {
            if (!isnan(v) || mm_f32_to_f16(v) != (c | 0x200)) bad_f16++;
        } else {
            double expect = mag == 0x7C00 ? sign * INFINITY : sign * ref_value(&formats[1], mag);
            if ((double)v != expect || !!signbit(v) != !!(c & 0x8000) || mm_f32_to_f16(v) != c) bad_f16++;
        }
    }
    CHECK_EQ_INT(bad_bf16, 0);
    CHECK_EQ_INT(bad_f16, 0);
}

/* Random F32 inputs: raw bit patterns (all magnitudes), values near the format's range with random
 * mantissas, and exact midpoints between neighbouring codes (+- 1 F32 ulp). */
static void test_rne_sample(void) {
    uint64_t state = 0x5EED1234u;
    for (size_t fi = 0; fi < sizeof formats / sizeof formats[0]; fi++) {
        const ref_format *f = &formats[fi];
        mismatches = 0;
        int emax = (int)(f->max_finite_code >> f->mant_bits) - f->bias;
        int emin_sub = 1 - f->bias - f->mant_bits;
        for (int i = 0; i < 200000; i++) {
            uint64_t r = mm_test_rand_u64(&state);
            uint32_t raw = (uint32_t)r;
            if ((raw & 0x7FFFFFFFu) <= 0x7F800000u) check_encode(f, mm_test_f32_from_bits(raw));
            /* near the range */
            int e = emin_sub - 3 + (int)((r >> 32) % (uint64_t)(emax - emin_sub + 6));
            float near = ldexpf(1.0f + (float)((r >> 40) & 0x7FFFFF) * 0x1p-23f, e);
            check_encode(f, (r >> 63) ? -near : near);
            /* midpoints of neighbouring codes */
            uint32_t code = (uint32_t)((r >> 24) % f->max_finite_code);
            float mid = (float)((ref_value(f, code) + ref_value(f, code + 1)) / 2);
            check_encode(f, mid);
            check_encode(f, -mid);
            check_encode(f, nextafterf(mid, 0.0f));
            check_encode(f, nextafterf(mid, INFINITY));
        }
        /* the overflow boundary */
        double top = ref_value(f, f->max_finite_code);
        double next = ldexp(1.0, emax + 1);
        float mid = (float)((top + next) / 2);
        check_encode(f, mid);
        check_encode(f, nextafterf(mid, 0.0f));
        check_encode(f, nextafterf(mid, INFINITY));
        check_encode(f, -mid);
        check_encode(f, INFINITY);
        check_encode(f, -INFINITY);
    }
}

int main(void) {
    test_fp8_codes();
    test_fp4_codes();
    test_e8m0_codes();
    test_16bit_codes();
    test_rne_sample();
    return mm_test_finish("test_format_exhaustive");
}
