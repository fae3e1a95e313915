/* format/decode_tables.c: fills the per-code F32 decode tables from the exact scalar decoders. */
#include "format/decode_tables.h"

#include "format/format_table.h"

int mm_format_decode_table(mm_dtype dtype, float *table) {
    int entries;
    switch (dtype) {
    case MM_DTYPE_FP4_E2M1:
    case MM_DTYPE_FP4_E1M2:
    case MM_DTYPE_INT4: entries = 16; break;
    case MM_DTYPE_FP8_E4M3FN:
    case MM_DTYPE_FP8_E5M2:
    case MM_DTYPE_E8M0:
    case MM_DTYPE_I8:
    case MM_DTYPE_U8: entries = 256; break;
    default: return 0;
    }
    if (!table) return 0;
    mm_to_f32_fn decode = mm_format_traits_of(dtype)->to_f32;
    for (int code = 0; code < entries; code++) table[code] = decode((uint32_t)code);
    return entries;
}
