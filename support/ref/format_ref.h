/* SPDX-License-Identifier: Apache-2.0 */
/* ref/format_ref.h: the reference's own element formats and quantization rules, written independently
 * of src/format from the rules of docs/numerics.md, so that a bug in the library's format code (which
 * the fast path uses) shows up end to end instead of being shared by the reference.
 *
 * Deliberately plain: values are decoded by the textbook formula, encoded by walking the code table for
 * the two neighbours of |v| (ties to the even code), and all arithmetic that the rules do not pin to F32
 * is exact double arithmetic. tests/test_ref_format.c checks every function against src/format over
 * every code (BF16, FP8, FP4, E8M0, nibbles), every scale byte of the MX rules and INT8 rows with ties. */
#ifndef MEGAMOE_REF_FORMAT_REF_H
#define MEGAMOE_REF_FORMAT_REF_H

#include <stdint.h>

#include "megamoe/formats.h"

/* BF16 <-> F32: the value of a code; round to nearest even (NaN quiet with its payload's top bits). */
float mm_ref_fmt_bf16_to_f32(uint16_t code);
uint16_t mm_ref_fmt_f32_to_bf16(float x);
/* round x to BF16 and back */
float mm_ref_fmt_bf16_round(float x);

/* Value of an FP8 E4M3FN / E5M2 or FP4 E2M1 code (NaN / Inf codes give NaN / Inf). */
double mm_ref_fmt_decode(mm_dtype elem, uint32_t code);
/* The code of finite v in an FP8 E4M3FN / E5M2 or FP4 E2M1 element: nearest, ties to the even code,
 * beyond the largest finite value the largest finite code; the sign is kept (also for zero). */
uint32_t mm_ref_fmt_encode(mm_dtype elem, double v);

/* The A16 weight-only rule (docs/weight_formats.md): the BF16 value BF16(F32(F32(value - zero) * scale))
 * of a weight element whose code decodes to `value` (E4M3 / E2M1 value, or the UINT4 integer), with its
 * zero point (0 except UINT4) and F32 scale (the block scale, or 2^(e - 127) of an E8M0 scale). */
float mm_ref_fmt_weight_only(double value, int zero, float scale);

/* E8M0: 2^(b - 127) (b = 0 is the F32 subnormal 2^-127); 0xFF is NaN. */
float mm_ref_fmt_e8m0_to_f32(uint8_t b);
/* The E8M0 scale byte of an MX block whose largest BF16 magnitude is amax (finite). */
uint8_t mm_ref_fmt_mx_scale_byte(mm_dtype elem, float amax);
/* Nibble i of a packed 4-bit row (low nibble first); signed value of an INT4 nibble. */
uint8_t mm_ref_fmt_nibble(const uint8_t *packed, int64_t i);
int mm_ref_fmt_int4_value(uint8_t nibble);
/* Scale byte of K-group `group` of output channel n in the (N, ceil(K/64), 2) weight-scale layout. */
uint8_t mm_ref_fmt_mx_weight_scale(const uint8_t *scales, int64_t n, int64_t k_len, int64_t group);

/* MX block-32 quantization of a BF16 row (q packed for 4-bit elements; scales one byte per 32), of an
 * F32 row (rounded to BF16 first), and dequantization (one rounding to F32). */
void mm_ref_fmt_mx_quantize_bf16(const uint16_t *x, int64_t n, mm_dtype elem, uint8_t *q, uint8_t *scales);
void mm_ref_fmt_mx_quantize_f32(const float *x, int64_t n, mm_dtype elem, uint8_t *q, uint8_t *scales);
void mm_ref_fmt_mx_dequantize(const uint8_t *q, const uint8_t *scales, int64_t n, mm_dtype elem, float *out);

/* INT8 per-token quantization: div-away (s = amax / 127, q = round half away (x / s)) and mul-even
 * (m = 127 / amax, q = round half even (x * m), stored scale amax / 127), in F32 as the rules say;
 * a row with NaN / Inf gets scale NaN and q = 0, an all-zero row scale +0. */
void mm_ref_fmt_int8_div_away(const float *x, int64_t n, int8_t *q, float *scale);
void mm_ref_fmt_int8_mul_even(const float *x, int64_t n, int8_t *q, float *scale);

#endif
