/* SPDX-License-Identifier: Apache-2.0 */
/* format/convert.h: private entry points of the exact scalar conversions (format/convert.c).
 *
 * The public scalar functions live in megamoe/formats.h; this header adds what the rest of the library
 * needs on top: the table adapters (uint32_t in/out, so one function-pointer type serves every row of
 * the format table) and the scaled encoder that MX quantization uses to compute convert(v * 2^k) with
 * exact exponent arithmetic instead of an F32 multiply. */
#ifndef MEGAMOE_FORMAT_CONVERT_H
#define MEGAMOE_FORMAT_CONVERT_H

#include <stdint.h>

#include "megamoe/dtype.h"

/* Encodes value * 2^scale_exp (value given as F32 bits, scale_exp any int in [-300, 300]) into elem,
 * which must be MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2 or MM_DTYPE_FP4_E2M1. The product is never
 * formed in F32, so it is exact even where it would leave F32's range; rounding (RNE), saturation and
 * NaN/Inf rules are those of the unscaled conversion. Returns 0 for any other elem. */
uint8_t mm_encode_scaled(mm_dtype elem, uint32_t f32_bits, int scale_exp);

/* x * 2^exp exactly as one rounding of the true product (also when the result is an F32 subnormal). */
float mm_scale_by_pow2(float x, int exp);

/* F32 bit pattern helpers (memcpy, so no aliasing questions). */
uint32_t mm_f32_bits(float value);
float mm_f32_from_bits(uint32_t bits);

/* Adapters for the format table (format_table.c): code in the low bits of a uint32_t. */
float mm_table_u8_to_f32(uint32_t bits);
float mm_table_i8_to_f32(uint32_t bits);
float mm_table_i16_to_f32(uint32_t bits);
float mm_table_int4_to_f32(uint32_t bits);
float mm_table_f16_to_f32(uint32_t bits);
float mm_table_bf16_to_f32(uint32_t bits);
float mm_table_f32_to_f32(uint32_t bits);
float mm_table_fp8_e4m3fn_to_f32(uint32_t bits);
float mm_table_fp8_e5m2_to_f32(uint32_t bits);
float mm_table_e8m0_to_f32(uint32_t bits);
float mm_table_fp4_e2m1_to_f32(uint32_t bits);
float mm_table_fp4_e1m2_to_f32(uint32_t bits);
uint32_t mm_table_f32_to_f16(float value);
uint32_t mm_table_f32_to_bf16(float value);
uint32_t mm_table_f32_encode(float value);
uint32_t mm_table_f32_to_fp8_e4m3fn(float value);
uint32_t mm_table_f32_to_fp8_e5m2(float value);
uint32_t mm_table_f32_to_fp4_e2m1(float value);

#endif
