/* format/format_table.c: the rows of the format-traits table (see format_table.h).
 * The to_f32/from_f32 entries are the exact scalar conversions of format/convert.c. */
#include "format/format_table.h"

const mm_format_traits mm_format_table[MM_DTYPE_COUNT] = {
    [MM_DTYPE_INVALID] = {.name = "invalid"},
    [MM_DTYPE_BOOL] = {.name = "bool", .safetensors = "BOOL", .bits = 8, .block_size = 1},
    [MM_DTYPE_U8] = {.name = "u8", .safetensors = "U8", .bits = 8, .block_size = 1},
    [MM_DTYPE_I8] = {.name = "int8", .safetensors = "I8", .bits = 8, .block_size = 1, .computable = 1},
    [MM_DTYPE_I16] = {.name = "int16", .safetensors = "I16", .bits = 16, .block_size = 1},
    [MM_DTYPE_I32] = {.name = "int32", .safetensors = "I32", .bits = 32, .block_size = 1},
    [MM_DTYPE_I64] = {.name = "int64", .safetensors = "I64", .bits = 64, .block_size = 1},
    [MM_DTYPE_U64] = {.name = "uint64", .safetensors = "U64", .bits = 64, .block_size = 1},
    [MM_DTYPE_F16] = {.name = "f16", .safetensors = "F16", .bits = 16, .block_size = 1, .is_float = 1, .computable = 1},
    [MM_DTYPE_BF16] = {.name = "bf16", .safetensors = "BF16", .bits = 16, .block_size = 1, .is_float = 1, .computable = 1},
    [MM_DTYPE_F32] = {.name = "f32", .safetensors = "F32", .bits = 32, .block_size = 1, .is_float = 1, .computable = 1},
    [MM_DTYPE_F64] = {.name = "f64", .safetensors = "F64", .bits = 64, .block_size = 1, .is_float = 1, .computable = 1},
    [MM_DTYPE_FP8_E4M3FN] = {.name = "fp8_e4m3fn", .safetensors = "F8_E4M3", .bits = 8, .block_size = 32, .is_float = 1, .computable = 1},
    [MM_DTYPE_FP8_E5M2] = {.name = "fp8_e5m2", .safetensors = "F8_E5M2", .bits = 8, .block_size = 32, .is_float = 1, .computable = 1},
    [MM_DTYPE_E8M0] = {.name = "e8m0", .safetensors = "F8_E8M0", .bits = 8, .block_size = 1, .is_float = 1, .computable = 1},
    [MM_DTYPE_FP4_E2M1] = {.name = "fp4_e2m1", .safetensors = "F4", .bits = 4, .block_size = 32, .is_float = 1, .computable = 1},
    [MM_DTYPE_FP4_E1M2] = {.name = "fp4_e1m2", .bits = 4, .block_size = 1, .is_float = 1},
    [MM_DTYPE_HIFLOAT8] = {.name = "hifloat8", .bits = 8, .block_size = 1, .is_float = 1},
    [MM_DTYPE_INT4] = {.name = "int4", .bits = 4, .block_size = 1, .computable = 1},
};
