/* SPDX-License-Identifier: Apache-2.0 */
/* format/format_table.c: the rows of the format-traits table (see format_table.h).
 * The to_f32/from_f32 entries are the exact scalar conversions of format/convert.c: a decoder wherever
 * the decode is exact in F32, an encoder only where docs/numerics.md defines the element rounding
 * (integers are quantized per row, never element by element; E1M2 and E8M0 are never produced here). */
#include "format/format_table.h"

#include "format/convert.h"

/* Shorthands for the columns most rows share. */
#define PLAIN(b) .bits = (b), .per_byte = 1, .block_size = 1, .mx_emax = -1
#define NIBBLE   .bits = 4, .per_byte = 2
#define MX_ELEM(emax, emin)                                                                                  \
    .block_size = MM_MX_BLOCK, .scale_dtype = MM_DTYPE_E8M0, .mx_emax = (emax), .mx_min_exp = (emin)
#define INT_QUANT .block_size = 1, .scale_dtype = MM_DTYPE_F32, .mx_emax = -1

const mm_format_traits mm_format_table[MM_DTYPE_COUNT] = {
    [MM_DTYPE_INVALID] = {.name = "invalid", .mx_emax = -1},
    [MM_DTYPE_BOOL] = {.name = "bool", .safetensors = "BOOL", PLAIN(8)},
    [MM_DTYPE_U8] =
        {.name = "u8", .safetensors = "U8", PLAIN(8), .decode_entries = 256, .to_f32 = mm_table_u8_to_f32},
    [MM_DTYPE_I8] = {.name = "int8",
                     .safetensors = "I8",
                     .bits = 8,
                     .per_byte = 1,
                     INT_QUANT,
                     .decode_entries = 256,
                     .to_f32 = mm_table_i8_to_f32},
    [MM_DTYPE_I16] = {.name = "int16", .safetensors = "I16", PLAIN(16), .to_f32 = mm_table_i16_to_f32},
    [MM_DTYPE_I32] = {.name = "int32", .safetensors = "I32", PLAIN(32)},
    [MM_DTYPE_I64] = {.name = "int64", .safetensors = "I64", PLAIN(64)},
    [MM_DTYPE_U64] = {.name = "uint64", .safetensors = "U64", PLAIN(64)},
    [MM_DTYPE_F16] = {.name = "f16",
                      .safetensors = "F16",
                      PLAIN(16),
                      .to_f32 = mm_table_f16_to_f32,
                      .from_f32 = mm_table_f32_to_f16},
    [MM_DTYPE_BF16] = {.name = "bf16",
                       .safetensors = "BF16",
                       PLAIN(16),
                       .to_f32 = mm_table_bf16_to_f32,
                       .from_f32 = mm_table_f32_to_bf16},
    [MM_DTYPE_F32] = {.name = "f32",
                      .safetensors = "F32",
                      PLAIN(32),
                      .to_f32 = mm_table_f32_to_f32,
                      .from_f32 = mm_table_f32_encode},
    [MM_DTYPE_F64] = {.name = "f64", .safetensors = "F64", PLAIN(64)},
    [MM_DTYPE_FP8_E4M3FN] = {.name = "fp8_e4m3fn",
                             .safetensors = "F8_E4M3",
                             .bits = 8,
                             .per_byte = 1,
                             MX_ELEM(8, -10),
                             .decode_entries = 256,
                             .to_f32 = mm_table_fp8_e4m3fn_to_f32,
                             .from_f32 = mm_table_f32_to_fp8_e4m3fn},
    [MM_DTYPE_FP8_E5M2] = {.name = "fp8_e5m2",
                           .safetensors = "F8_E5M2",
                           .bits = 8,
                           .per_byte = 1,
                           MX_ELEM(15, -17),
                           .decode_entries = 256,
                           .to_f32 = mm_table_fp8_e5m2_to_f32,
                           .from_f32 = mm_table_f32_to_fp8_e5m2},
    [MM_DTYPE_E8M0] = {.name = "e8m0",
                       .safetensors = "F8_E8M0",
                       PLAIN(8),
                       .decode_entries = 256,
                       .to_f32 = mm_table_e8m0_to_f32},
    [MM_DTYPE_FP4_E2M1] = {.name = "fp4_e2m1",
                           .safetensors = "F4",
                           NIBBLE,
                           MX_ELEM(2, -2),
                           .decode_entries = 16,
                           .to_f32 = mm_table_fp4_e2m1_to_f32,
                           .from_f32 = mm_table_f32_to_fp4_e2m1},
    [MM_DTYPE_FP4_E1M2] = {.name = "fp4_e1m2",
                           NIBBLE,
                           .block_size = 1,
                           .mx_emax = 0,
                           .decode_entries = 16,
                           .to_f32 = mm_table_fp4_e1m2_to_f32},
    [MM_DTYPE_HIFLOAT8] = {.name = "hifloat8", PLAIN(8)},
    [MM_DTYPE_INT4] =
        {.name = "int4", NIBBLE, INT_QUANT, .decode_entries = 16, .to_f32 = mm_table_int4_to_f32},
    /* Unsigned 4-bit codes with zero points: the code itself is the value before (q - zero) * scale. */
    [MM_DTYPE_UINT4] = {.name = "uint4",
                        NIBBLE,
                        .block_size = 1,
                        .mx_emax = -1,
                        .decode_entries = 16,
                        .to_f32 = mm_table_u8_to_f32},
};
