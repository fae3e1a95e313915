/* format/decode_tables.h: F32 lookup tables for decoding narrow weight/activation codes fast.
 *
 * A GEMM over FP4/FP8/INT4 weights decodes each code once per use; a 16- or 256-entry table (filled
 * once per call, on the stack) turns that into one load. The entries are exactly the scalar decoders'
 * results (format/convert.c), so a kernel using the table is bit-identical to one using the scalar path. */
#ifndef MEGAMOE_FORMAT_DECODE_TABLES_H
#define MEGAMOE_FORMAT_DECODE_TABLES_H

#include "megamoe/dtype.h"

/* Largest table any dtype needs, in floats. */
#define MM_DECODE_TABLE_MAX 256

/* Fills table[code] = F32 value of `code` for every code of dtype and returns the entry count: 16 for
 * FP4 E2M1, FP4 E1M2 and INT4 (code = the raw nibble, INT4 two's complement); 256 for FP8 E4M3FN,
 * FP8 E5M2, E8M0, INT8 and U8. Returns 0 (table untouched) for any other dtype. NaN codes give a quiet
 * NaN with the code's sign. */
int mm_format_decode_table(mm_dtype dtype, float *table);

#endif
