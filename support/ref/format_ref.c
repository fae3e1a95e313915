/* SPDX-License-Identifier: Apache-2.0 */
/* ref/format_ref.c: the reference's independent format rules (ref/format_ref.h). Written from
 * docs/numerics.md without looking at src/format's technique: values by formula, rounding by searching
 * the neighbouring codes and comparing exact double distances, never by bit tricks on the F32 pattern. */
#include "ref/format_ref.h"

#include <math.h>
#include <string.h>

/* ---- BF16 ---- */

/* Magnitude of a BF16 code as a double (the code's sign bit ignored): (1 + m/128) 2^(e-127), or
 * m 2^-133 for e = 0; the code just past the largest finite one (e = 255) counts as 2^128, the value
 * an unbounded exponent would give it, so that rounding decides Inf like IEEE does. */
static double bf16_magnitude(uint16_t code) {
    int e = (code >> 7) & 0xFF, m = code & 0x7F;
    if (e == 0) return ldexp((double)m, -133);
    if (e == 255) return ldexp(1.0, 128);
    return ldexp((double)(128 + m), e - 134);
}

float mm_ref_fmt_bf16_to_f32(uint16_t code) {
    int e = (code >> 7) & 0xFF;
    double sign = (code & 0x8000) ? -1.0 : 1.0;
    if (e == 255) return (code & 0x7F) ? NAN : (float)(sign * INFINITY);
    return (float)(sign * bf16_magnitude(code));
}

uint16_t mm_ref_fmt_f32_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x0040); /* quiet, top payload bits kept */
    if (isinf(x)) return (uint16_t)(sign | 0x7F80);
    double a = fabs((double)x);
    /* the largest code not above |x|, by walking the exponent then the mantissa (no bit shifting) */
    uint16_t lo = 0;
    for (int bit = 14; bit >= 0; bit--) {
        uint16_t cand = (uint16_t)(lo | (1u << bit));
        if ((cand >> 7) != 0xFF && bf16_magnitude(cand) <= a) lo = cand;
    }
    double below = a - bf16_magnitude(lo), above = bf16_magnitude((uint16_t)(lo + 1)) - a;
    uint16_t code = lo;
    if (below > above || (below == above && (lo & 1))) code = (uint16_t)(lo + 1);
    return (uint16_t)(sign | code);
}

float mm_ref_fmt_bf16_round(float x) {
    return mm_ref_fmt_bf16_to_f32(mm_ref_fmt_f32_to_bf16(x));
}

float mm_ref_fmt_weight_only(double value, int zero, float scale) {
    /* value - zero is exact in F32 (E4M3 / E2M1 values, or integers in [-15, 15]); the product is one
     * F32 rounding (volatile: no contraction, no wider evaluation), then one BF16 rounding */
    volatile float centred = (float)(value - (double)zero);
    volatile float product = centred * scale;
    return mm_ref_fmt_bf16_round(product);
}

/* ---- FP8 / FP4 elements ---- */

typedef struct elem_fmt {
    int exp_bits, man_bits, bias;
    uint32_t max_code; /* largest finite non-negative code */
    uint32_t sign;     /* sign bit */
    int emax;          /* exponent of the largest normal value, for the MX scale */
} elem_fmt;

static elem_fmt elem_of(mm_dtype t) {
    switch (t) {
    case MM_DTYPE_FP8_E4M3FN: return (elem_fmt){4, 3, 7, 0x7E, 0x80, 8};
    case MM_DTYPE_FP8_E5M2: return (elem_fmt){5, 2, 15, 0x7B, 0x80, 15};
    default: return (elem_fmt){2, 1, 1, 0x7, 0x8, 2}; /* FP4 E2M1 */
    }
}

/* Magnitude of a non-negative finite code: the textbook formula. */
static double elem_magnitude(elem_fmt f, uint32_t code) {
    int e = (int)(code >> f.man_bits), m = (int)(code & ((1u << f.man_bits) - 1));
    if (e == 0) return ldexp((double)m, 1 - f.bias - f.man_bits);
    return ldexp((double)((1 << f.man_bits) + m), e - f.bias - f.man_bits);
}

double mm_ref_fmt_decode(mm_dtype elem, uint32_t code) {
    elem_fmt f = elem_of(elem);
    double sign = (code & f.sign) ? -1.0 : 1.0;
    uint32_t mag = code & (f.sign - 1);
    if (elem == MM_DTYPE_FP8_E4M3FN && mag == 0x7F) return NAN;
    if (elem == MM_DTYPE_FP8_E5M2 && mag >= 0x7C) return mag == 0x7C ? sign * INFINITY : NAN;
    return sign * elem_magnitude(f, mag);
}

uint32_t mm_ref_fmt_encode(mm_dtype elem, double v) {
    elem_fmt f = elem_of(elem);
    uint32_t sign = signbit(v) ? f.sign : 0;
    double a = fabs(v);
    if (a >= elem_magnitude(f, f.max_code)) return sign | f.max_code; /* saturation */
    uint32_t lo = 0; /* codes are increasing in value: walk to the largest one not above a */
    while (lo < f.max_code && elem_magnitude(f, lo + 1) <= a) lo++;
    double below = a - elem_magnitude(f, lo), above = elem_magnitude(f, lo + 1) - a;
    uint32_t code = lo;
    if (below > above || (below == above && (lo & 1))) code = lo + 1;
    return sign | code;
}

/* ---- E8M0, nibbles, weight-scale layout ---- */

float mm_ref_fmt_e8m0_to_f32(uint8_t b) {
    return b == 0xFF ? NAN : (float)ldexp(1.0, (int)b - 127);
}

uint8_t mm_ref_fmt_nibble(const uint8_t *packed, int64_t i) {
    uint8_t byte = packed[i / 2];
    return (uint8_t)(i % 2 == 0 ? byte % 16 : byte / 16);
}

int mm_ref_fmt_int4_value(uint8_t nibble) {
    return nibble >= 8 ? (int)nibble - 16 : (int)nibble;
}

uint8_t mm_ref_fmt_mx_weight_scale(const uint8_t *scales, int64_t n, int64_t k_len, int64_t group) {
    int64_t pairs = (k_len + 63) / 64; /* (N, pairs, 2): group g is pair g / 2, slot g % 2 */
    return scales[(n * pairs + group / 2) * 2 + group % 2];
}

/* ---- MX block-32 ---- */

uint8_t mm_ref_fmt_mx_scale_byte(mm_dtype elem, float amax) {
    /* the exponent field of amax as a BF16 value: 127 + floor(log2 amax) for normal amax, 0 below */
    int e = 0;
    if (amax >= 0x1p-126f) {
        int ex;
        frexp((double)amax, &ex); /* amax = m 2^ex, m in [0.5, 1) */
        e = ex - 1 + 127;
    }
    if (e == 0) return 0;
    int b = e - elem_of(elem).emax;
    return (uint8_t)(b > 0 ? b : 0);
}

static void put_code(uint8_t *q, mm_dtype elem, int64_t i, uint32_t code) {
    if (elem != MM_DTYPE_FP4_E2M1) {
        q[i] = (uint8_t)code;
        return;
    }
    if (i % 2 == 0)
        q[i / 2] = (uint8_t)code; /* the high nibble follows (or stays 0 for an odd tail) */
    else
        q[i / 2] = (uint8_t)(q[i / 2] + 16 * code);
}

void mm_ref_fmt_mx_quantize_bf16(const uint16_t *x, int64_t n, mm_dtype elem, uint8_t *q, uint8_t *scales) {
    for (int64_t g0 = 0; g0 < n; g0 += 32) {
        int64_t g1 = g0 + 32 < n ? g0 + 32 : n;
        int nonfinite = 0;
        float amax = 0.0f;
        for (int64_t i = g0; i < g1; i++) {
            float v = mm_ref_fmt_bf16_to_f32(x[i]);
            if (!isfinite(v))
                nonfinite = 1;
            else if (fabsf(v) > amax)
                amax = fabsf(v);
        }
        uint8_t b = nonfinite ? 0xFF : mm_ref_fmt_mx_scale_byte(elem, amax);
        scales[g0 / 32] = b;
        for (int64_t i = g0; i < g1; i++) {
            float v = mm_ref_fmt_bf16_to_f32(x[i]);
            uint32_t code;
            if (nonfinite) /* FP8: NaN with the element's sign; FP4 has no NaN: 0 */
                code = elem == MM_DTYPE_FP4_E2M1 ? 0 : (signbit(v) ? 0xFFu : 0x7Fu);
            else if (b == 0 && amax < 0x1p-126f) /* zeros and subnormals only: all +0 */
                code = 0;
            else
                code = mm_ref_fmt_encode(elem, ldexp((double)v, 127 - b));
            put_code(q, elem, i, code);
        }
    }
}

void mm_ref_fmt_mx_quantize_f32(const float *x, int64_t n, mm_dtype elem, uint8_t *q, uint8_t *scales) {
    for (int64_t g0 = 0; g0 < n; g0 += 32) {
        uint16_t row[32];
        int64_t len = n - g0 < 32 ? n - g0 : 32;
        for (int64_t i = 0; i < len; i++) row[i] = mm_ref_fmt_f32_to_bf16(x[g0 + i]);
        uint8_t *qg = elem == MM_DTYPE_FP4_E2M1 ? q + g0 / 2 : q + g0;
        mm_ref_fmt_mx_quantize_bf16(row, len, elem, qg, scales + g0 / 32);
    }
}

void mm_ref_fmt_mx_dequantize(const uint8_t *q, const uint8_t *scales, int64_t n, mm_dtype elem, float *out) {
    for (int64_t i = 0; i < n; i++) {
        uint8_t b = scales[i / 32];
        uint32_t code = elem == MM_DTYPE_FP4_E2M1 ? mm_ref_fmt_nibble(q, i) : q[i];
        out[i] = b == 0xFF ? NAN : (float)(mm_ref_fmt_decode(elem, code) * ldexp(1.0, (int)b - 127));
    }
}

/* ---- INT8 per token ---- */

/* amax of a row; -1 when it holds a NaN or Inf */
static float row_amax(const float *x, int64_t n) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return -1.0f;
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
    }
    return amax;
}

static int8_t clamp127(double r) {
    return (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
}

/* the row's special cases (NaN / Inf, all zero); returns 1 when handled */
static int int8_special(float amax, int64_t n, int8_t *q, float *scale) {
    if (amax > 0.0f) return 0;
    *scale = amax < 0.0f ? NAN : 0.0f;
    memset(q, 0, (size_t)n);
    return 1;
}

void mm_ref_fmt_int8_div_away(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = row_amax(x, n);
    if (int8_special(amax, n, q, scale)) return;
    volatile float s = amax / 127.0f; /* the rule's F32 division */
    *scale = s;
    for (int64_t i = 0; i < n; i++) {
        volatile float t = x[i] / s;
        q[i] = clamp127(round((double)t)); /* half away from zero */
    }
}

void mm_ref_fmt_int8_mul_even(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = row_amax(x, n);
    if (int8_special(amax, n, q, scale)) return;
    volatile float m = 127.0f / amax, s = amax / 127.0f;
    *scale = s;
    for (int64_t i = 0; i < n; i++) {
        volatile float t = x[i] * m;
        double r = (double)t;
        if (isnan(r)) r = 0; /* 0 * Inf of a tiny row */
        /* half to even, by hand: the nearest integer, the even one on an exact half */
        double fl = floor(r), frac = r - fl;
        double k = frac > 0.5 ? fl + 1 : frac < 0.5 ? fl : (fmod(fl, 2.0) == 0 ? fl : fl + 1);
        q[i] = clamp127(isinf(r) ? r : k);
    }
}
