/* SPDX-License-Identifier: Apache-2.0 */
/* format/convert.c: exact scalar conversions between F32 and the element formats of docs/numerics.md.
 *
 * Every encoder works on the F32 bit pattern with integer arithmetic: the value is split into an
 * integer significand and a power of two, the dropped low bits decide round-to-nearest-even, and the
 * result code is compared with the format's largest finite code. Nothing depends on the FPU rounding
 * mode or on a double-precision detour (which could round twice). Decoders build the exact value from
 * an integer times a power of two, both exactly representable in F32. */
#include <string.h>

#include "format/bf16_inline.h"
#include "format/convert.h"
#include "megamoe/formats.h"

uint32_t mm_f32_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

float mm_f32_from_bits(uint32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

#define F32_SIGN 0x80000000u
#define F32_ABS  0x7FFFFFFFu
#define F32_INF  0x7F800000u
#define F32_QNAN 0x7FC00000u

/* 2^exp for exp in [-126, 127] (a normal F32, built from its exponent field). */
static float pow2_normal(int exp) {
    return mm_f32_from_bits((uint32_t)(exp + 127) << 23);
}

float mm_scale_by_pow2(float x, int exp) {
    /* Large shifts go in steps of normal powers of two. Only the last multiply can round: an earlier
     * step that overflows or becomes subnormal means the final result is Inf or far below 2^-149 (0)
     * anyway, so no value is rounded twice. */
    while (exp > 127) {
        x *= pow2_normal(127);
        exp -= 127;
    }
    while (exp < -126) {
        int step = exp + 126 < -64 ? -64 : exp + 64; /* the last step leaves exp = -64 */
        x *= pow2_normal(step);
        exp -= step;
    }
    return x * pow2_normal(exp);
}

/* Round |value| * 2^scale_exp to the nearest value of a binary format with mant_bits explicit
 * mantissa bits and the given exponent bias, ties to even, with an unbounded exponent range above.
 * abs_bits is a finite, non-negative F32 pattern. Returns the magnitude code (exponent field <<
 * mant_bits | mantissa); a result above the format's largest finite code means overflow. */
static uint32_t round_magnitude(uint32_t abs_bits, int scale_exp, int mant_bits, int bias) {
    if (abs_bits == 0) return 0;
    uint32_t exp_field = abs_bits >> 23;
    uint32_t sig;
    int lsb_exp;  /* value = sig * 2^lsb_exp */
    int lead_exp; /* floor(log2(value)) */
    if (exp_field == 0) {
        sig = abs_bits & 0x7FFFFFu;
        lsb_exp = -149;
        int top = 31 - __builtin_clz(sig);
        lead_exp = top - 149;
    } else {
        sig = (abs_bits & 0x7FFFFFu) | 0x800000u;
        lsb_exp = (int)exp_field - 150;
        lead_exp = (int)exp_field - 127;
    }
    lsb_exp += scale_exp;
    lead_exp += scale_exp;

    /* The target's quantum: 2^(e - M) in the binade of the value, 2^(emin - M) in the subnormal range. */
    int emin = 1 - bias;
    int binade = lead_exp > emin ? lead_exp : emin;
    int quantum_exp = binade - mant_bits;
    int shift = quantum_exp - lsb_exp; /* low bits of sig below the quantum */

    uint64_t count; /* value / quantum, rounded */
    if (shift <= 0) {
        count = (uint64_t)sig << -shift;
    } else if (shift > 40) {
        count = 0; /* sig < 2^24, so the value is far below half a quantum */
    } else {
        uint64_t wide = sig;
        count = wide >> shift;
        uint64_t rem = wide & ((1ull << shift) - 1);
        uint64_t half = 1ull << (shift - 1);
        if (rem > half || (rem == half && (count & 1))) count++;
    }
    /* count is in [2^M, 2^(M+1)] in a normal binade and in [0, 2^M] in the subnormal range; adding
     * (binade - emin) << M yields the code in both cases, and a carry to 2^(M+1) lands on the next
     * binade's code by itself. */
    int64_t code = ((int64_t)(binade - emin) << mant_bits) + (int64_t)count;
    return code > 0xFFFFFFFFll ? 0xFFFFFFFFu : (uint32_t)code;
}

/* Exact decode of a finite minifloat magnitude code. */
static float decode_magnitude(uint32_t code, int mant_bits, int bias) {
    uint32_t exp_field = code >> mant_bits;
    uint32_t mant = code & ((1u << mant_bits) - 1);
    if (exp_field == 0) return (float)mant * pow2_normal(1 - bias - mant_bits);
    return (float)((1u << mant_bits) | mant) * pow2_normal((int)exp_field - bias - mant_bits);
}

/* ---- BF16 ---- */

float mm_bf16_to_f32(uint16_t bits) {
    return mm_bf16_to_f32_inline(bits);
}

uint16_t mm_f32_to_bf16(float value) {
    return mm_f32_to_bf16_inline(value);
}

/* ---- F16 ---- */

float mm_f16_to_f32(uint16_t bits) {
    uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
    uint32_t exp_field = (bits >> 10) & 0x1Fu;
    uint32_t mant = bits & 0x3FFu;
    if (exp_field == 0x1F) {
        if (mant == 0) return mm_f32_from_bits(sign | F32_INF);
        return mm_f32_from_bits(sign | F32_QNAN | (mant << 13)); /* payload kept, quiet bit set */
    }
    float magnitude = decode_magnitude(bits & 0x7FFFu, 10, 15);
    return sign ? -magnitude : magnitude;
}

uint16_t mm_f32_to_f16(float value) {
    uint32_t bits = mm_f32_bits(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & F32_ABS;
    if (abs_bits > F32_INF) return (uint16_t)(sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu));
    if (abs_bits == F32_INF) return (uint16_t)(sign | 0x7C00u);
    uint32_t code = round_magnitude(abs_bits, 0, 10, 15);
    if (code > 0x7BFFu) code = 0x7C00u; /* IEEE overflow: RNE past 65504 + half an ulp is Inf */
    return (uint16_t)(sign | code);
}

/* ---- FP8 / FP4 ---- */

/* NaN and Inf handling per target, then RNE with saturation to the largest finite magnitude. */
uint8_t mm_encode_scaled(mm_dtype elem, uint32_t f32_bits, int scale_exp) {
    uint32_t abs_bits = f32_bits & F32_ABS;
    int negative = (f32_bits & F32_SIGN) != 0;
    switch (elem) {
    case MM_DTYPE_FP8_E4M3FN: {
        uint8_t sign = negative ? 0x80 : 0x00;
        if (abs_bits >= F32_INF) return (uint8_t)(sign | 0x7F); /* NaN and Inf both become NaN */
        uint32_t code = round_magnitude(abs_bits, scale_exp, 3, 7);
        return (uint8_t)(sign | (code > 0x7Eu ? 0x7Eu : code));
    }
    case MM_DTYPE_FP8_E5M2: {
        uint8_t sign = negative ? 0x80 : 0x00;
        if (abs_bits > F32_INF) return (uint8_t)(sign | 0x7F);
        if (abs_bits == F32_INF) return (uint8_t)(sign | 0x7C);
        uint32_t code = round_magnitude(abs_bits, scale_exp, 2, 15);
        return (uint8_t)(sign | (code > 0x7Bu ? 0x7Bu : code));
    }
    case MM_DTYPE_FP4_E2M1: {
        uint8_t sign = negative ? 0x8 : 0x0;
        if (abs_bits > F32_INF) return 0; /* no NaN code: +0 */
        if (abs_bits == F32_INF) return (uint8_t)(sign | 0x7);
        uint32_t code = round_magnitude(abs_bits, scale_exp, 1, 1);
        return (uint8_t)(sign | (code > 0x7u ? 0x7u : code));
    }
    default: return 0;
    }
}

float mm_fp8_e4m3fn_to_f32(uint8_t bits) {
    if ((bits & 0x7F) == 0x7F) return mm_f32_from_bits(((uint32_t)(bits & 0x80) << 24) | F32_QNAN);
    float magnitude = decode_magnitude(bits & 0x7Fu, 3, 7);
    return (bits & 0x80) ? -magnitude : magnitude;
}

uint8_t mm_f32_to_fp8_e4m3fn(float value) {
    return mm_encode_scaled(MM_DTYPE_FP8_E4M3FN, mm_f32_bits(value), 0);
}

float mm_fp8_e5m2_to_f32(uint8_t bits) {
    uint32_t sign = (uint32_t)(bits & 0x80) << 24;
    if ((bits & 0x7C) == 0x7C) {
        if ((bits & 0x03) == 0) return mm_f32_from_bits(sign | F32_INF);
        return mm_f32_from_bits(sign | F32_QNAN);
    }
    float magnitude = decode_magnitude(bits & 0x7Fu, 2, 15);
    return sign ? -magnitude : magnitude;
}

uint8_t mm_f32_to_fp8_e5m2(float value) {
    return mm_encode_scaled(MM_DTYPE_FP8_E5M2, mm_f32_bits(value), 0);
}

float mm_fp4_e2m1_to_f32(uint8_t nibble) {
    float magnitude = decode_magnitude(nibble & 0x7u, 1, 1);
    return (nibble & 0x8) ? -magnitude : magnitude;
}

uint8_t mm_f32_to_fp4_e2m1(float value) {
    return mm_encode_scaled(MM_DTYPE_FP4_E2M1, mm_f32_bits(value), 0);
}

float mm_fp4_e1m2_to_f32(uint8_t nibble) {
    float magnitude = decode_magnitude(nibble & 0x7u, 2, 1);
    return (nibble & 0x8) ? -magnitude : magnitude;
}

float mm_e8m0_to_f32(uint8_t bits) {
    if (bits == 0xFF) return mm_f32_from_bits(F32_QNAN);
    if (bits == 0) return mm_f32_from_bits(0x00400000u); /* 2^-127: the F32 subnormal 0.5 * 2^-126 */
    return mm_f32_from_bits((uint32_t)bits << 23);
}

/* ---- table adapters ---- */

float mm_table_u8_to_f32(uint32_t bits) {
    return (float)(uint8_t)bits;
}
float mm_table_i8_to_f32(uint32_t bits) {
    return (float)(int8_t)(uint8_t)bits;
}
float mm_table_i16_to_f32(uint32_t bits) {
    return (float)(int16_t)(uint16_t)bits;
}
float mm_table_int4_to_f32(uint32_t bits) {
    int nibble = (int)(bits & 0xFu);
    return (float)(nibble >= 8 ? nibble - 16 : nibble);
}
float mm_table_f32_to_f32(uint32_t bits) {
    return mm_f32_from_bits(bits);
}
uint32_t mm_table_f32_encode(float value) {
    return mm_f32_bits(value);
}

/* The float formats' adapters only narrow the code (mask: its width) or widen the result:
 * mm_table_<name>_to_f32 calls mm_<name>_to_f32, mm_table_f32_to_<name> calls mm_f32_to_<name>. */
#define TABLE_DECODER(name, code_type, mask)                                                                 \
    float mm_table_##name##_to_f32(uint32_t bits) {                                                          \
        return mm_##name##_to_f32((code_type)(bits & (mask)));                                               \
    }
#define TABLE_ENCODER(name)                                                                                  \
    uint32_t mm_table_f32_to_##name(float value) {                                                           \
        return mm_f32_to_##name(value);                                                                      \
    }
TABLE_DECODER(f16, uint16_t, 0xFFFFu)
TABLE_DECODER(bf16, uint16_t, 0xFFFFu)
TABLE_DECODER(fp8_e4m3fn, uint8_t, 0xFFu)
TABLE_DECODER(fp8_e5m2, uint8_t, 0xFFu)
TABLE_DECODER(e8m0, uint8_t, 0xFFu)
TABLE_DECODER(fp4_e2m1, uint8_t, 0xFu)
TABLE_DECODER(fp4_e1m2, uint8_t, 0xFu)
TABLE_ENCODER(f16)
TABLE_ENCODER(bf16)
TABLE_ENCODER(fp8_e4m3fn)
TABLE_ENCODER(fp8_e5m2)
TABLE_ENCODER(fp4_e2m1)
#undef TABLE_DECODER
#undef TABLE_ENCODER

/* ---- generic, through the format table ---- */

#include "format/format_table.h"

float mm_dtype_to_f32(mm_dtype dtype, uint32_t bits) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    if (!t || !t->to_f32) return mm_f32_from_bits(F32_QNAN);
    return t->to_f32(bits);
}

uint32_t mm_dtype_from_f32(mm_dtype dtype, float value) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    if (!t || !t->from_f32) return 0;
    return t->from_f32(value);
}
