/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/formats.h: exact scalar conversions and block quantizers of docs/numerics.md.
 *
 * These are the rules every operator and every test trusts: F32 <-> BF16/F16/FP8/FP4/E8M0 with
 * round-to-nearest-even and the saturation rules of the spec, MX block-32 quantization with the
 * floor scale rule, INT8 per-token quantization (div-away and mul-even), INT4 packing and Ascend's
 * UINT64 scale form. They are public so that people building reference data for accelerator kernels
 * can use exactly the same rounding. */
#ifndef MEGAMOE_FORMATS_H
#define MEGAMOE_FORMATS_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- scalar element conversions (exact; RNE; saturation/NaN rules of docs/numerics.md) ----
 * Encoders round to nearest, ties to even, by integer bit manipulation (independent of the FPU mode).
 * FP8/FP4: finite values beyond the largest finite magnitude saturate to it with their sign (so E4M3's
 * 464, halfway between 448 and the non-existent 480, gives 448). NaN -> 0x7F / 0xFF (FP8), +0 (FP4).
 * Inf -> 0x7C / 0xFC (E5M2), 0x7F / 0xFF (E4M3FN, sign kept), +-6 (FP4). F16 overflow -> Inf. BF16 and
 * F16 keep NaN payload bits that fit and set the quiet bit. Zero signs are kept. See docs/numerics.md. */
float mm_bf16_to_f32(uint16_t bits);
uint16_t mm_f32_to_bf16(float value);
float mm_f16_to_f32(uint16_t bits);
uint16_t mm_f32_to_f16(float value);
float mm_fp8_e4m3fn_to_f32(uint8_t bits);
uint8_t mm_f32_to_fp8_e4m3fn(float value);
float mm_fp8_e5m2_to_f32(uint8_t bits);
uint8_t mm_f32_to_fp8_e5m2(float value);
float mm_fp4_e2m1_to_f32(uint8_t nibble); /* low 4 bits used */
uint8_t mm_f32_to_fp4_e2m1(float value);  /* result in the low nibble */
float mm_fp4_e1m2_to_f32(uint8_t nibble); /* decode only: E1M2 is carried, never computed */
float mm_e8m0_to_f32(uint8_t bits); /* 2^(b-127); 0xFF gives NaN. b = 0 gives 2^-127 (needs F32 subnormal) */
/* Generic: decode / encode one element of `dtype` through F32 (see the format table). Returns NaN /
 * 0 for dtypes without a conversion. */
float mm_dtype_to_f32(mm_dtype dtype, uint32_t bits);
uint32_t mm_dtype_from_f32(mm_dtype dtype, float value);

/* ---- MX block-32 quantization (docs/numerics.md "MX block-32 quantization") ----
 * Quantizes one row of n BF16 values into `elem` (FP8 E4M3FN, FP8 E5M2 or FP4 E2M1). q receives
 * mm_dtype_row_bytes(elem, n) bytes (4-bit values packed, low nibble first); scales receives
 * ceil(n/32) E8M0 bytes. The last group may be shorter than 32. */
mm_status mm_mx_quantize_row_bf16(const uint16_t *x, int64_t n, mm_dtype elem, uint8_t *q, uint8_t *scales,
                                  mm_error *err);
/* Same, from F32 input: each value is first rounded to BF16 (as the spec says). */
mm_status mm_mx_quantize_row_f32(const float *x, int64_t n, mm_dtype elem, uint8_t *q, uint8_t *scales,
                                 mm_error *err);
/* Dequantize one row back to F32: v = q * 2^(b-127), one rounding (exact unless it leaves F32's range);
 * scale byte 0xFF gives NaN for the whole group. */
mm_status mm_mx_dequantize_row(const uint8_t *q, const uint8_t *scales, int64_t n, mm_dtype elem, float *out,
                               mm_error *err);
/* The E8M0 scale byte of an MX group with the given amax (rounded to BF16 first), for element elem
 * (E1M2 allowed, emax 0): 0xFF for Inf/NaN, 0 when amax is zero or a BF16 subnormal, else
 * max(e - emax, 0). Returns 0xFF for an elem that is not an MX element type. */
uint8_t mm_mx_scale_byte(float amax, mm_dtype elem);

/* ---- INT8 per-token quantization (docs/numerics.md "INT8 per-token quantization") ----
 * A row containing NaN or +-Inf gets *scale = NaN and q = 0 everywhere (the poison propagates through
 * dequantization; q stays defined). q is always in [-127, 127].
 * div-away: s = amax / 127, q = round_half_away(x / s). mul-even: m = 127 / amax, q = round_half_even(x * m).
 * A row with amax == 0 gives scale 0 and q = 0. *scale receives the stored scale of each rule:
 * div-away and MM_INT8_SCALE_AMAX_DIV_127: amax / 127; MM_INT8_SCALE_INV_MUL: 1 / m (DispatchV3). */
typedef enum mm_int8_scale_form {
    MM_INT8_SCALE_AMAX_DIV_127 = 0,
    MM_INT8_SCALE_INV_MUL = 1
} mm_int8_scale_form;
void mm_int8_quantize_row_div_away(const float *x, int64_t n, int8_t *q, float *scale);
void mm_int8_quantize_row_mul_even(const float *x, int64_t n, mm_int8_scale_form form, int8_t *q,
                                   float *scale);

/* ---- INT4 packing (two per byte, element 2i in the low nibble) ---- */
/* Packs n values (each in [-8, 7]) into ceil(n/2) bytes; an odd tail leaves the high nibble 0.
 * Fails naming the index when a value is out of range. */
mm_status mm_int4_pack(const int8_t *values, int64_t n, uint8_t *packed, mm_error *err);
void mm_int4_unpack(const uint8_t *packed, int64_t n, int8_t *values);
/* Element i of a packed 4-bit row (raw nibble, 0..15). */
static inline uint8_t mm_nibble_get(const uint8_t *packed, int64_t i) {
    return (uint8_t)((packed[i >> 1] >> ((i & 1) * 4)) & 0x0F);
}

/* ---- weight scales ---- */
/* Ascend's UINT64 scale: low 32 bits are the F32 pattern; high bits must be 0. */
mm_status mm_scale_u64_to_f32(uint64_t packed, float *out, mm_error *err);
/* Same for n scales; the message of a failure names the index ("scale[3]: UINT64 scale ..."). */
mm_status mm_scale_u64_row_to_f32(const uint64_t *packed, int64_t n, float *out, mm_error *err);
/* Lays out per-32-group MX weight scales, group_scales (n_rows, ceil(k_len/32)), as the spec's
 * (n_rows, ceil(k_len/64), 2) tensor, padding each row with a 0 byte when its group count is odd. */
mm_status mm_mx_weight_scales_pack(const uint8_t *group_scales, int64_t n_rows, int64_t k_len, uint8_t *out,
                                   mm_error *err);
/* MX weight scale of K-group g for output channel n in the (N, ceil(K/64), 2) layout. */
static inline uint8_t mm_mx_weight_scale(const uint8_t *scales, int64_t n, int64_t k_len, int64_t group) {
    int64_t pairs = (k_len + 63) / 64;
    return scales[n * pairs * 2 + group];
}

#ifdef __cplusplus
}
#endif
#endif
