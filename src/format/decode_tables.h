/* SPDX-License-Identifier: Apache-2.0 */
/* format/decode_tables.h: F32 (and BF16) lookup tables for decoding narrow weight/activation codes fast.
 *
 * A GEMM over FP4/FP8/INT4 weights decodes each code once per use; a 16- or 256-entry table turns that
 * into one load. The entries are exactly the scalar decoders' results (the to_f32 column of the format
 * table, format/convert.c), so a kernel using a table is bit-identical to one using the scalar path.
 * This is the one home of such tables: a caller-filled copy (mm_format_decode_table) and the
 * process-wide ones the GEMM kernels share (mm_format_lut_f32 / mm_format_lut_bf16). */
#ifndef MEGAMOE_FORMAT_DECODE_TABLES_H
#define MEGAMOE_FORMAT_DECODE_TABLES_H

#include <stdint.h>

#include "megamoe/dtype.h"

/* Largest table any dtype needs, in floats. */
#define MM_DECODE_TABLE_MAX 256

/* Fills table[code] = F32 value of `code` for every code of dtype and returns the entry count (the
 * format table's decode_entries): 16 for FP4 E2M1, FP4 E1M2 and INT4 (code = the raw nibble, INT4 two's
 * complement); 256 for FP8 E4M3FN, FP8 E5M2, E8M0, INT8 and U8. Returns 0 (table untouched) for any
 * other dtype. NaN codes give a quiet NaN with the code's sign. */
int mm_format_decode_table(mm_dtype dtype, float *table);

/* Process-wide read-only tables (built once, pthread_once, so threads share them): 256 entries indexed
 * by the code byte for every dtype with a decode table (a 4-bit format decodes the low nibble, so its
 * 16 values repeat), or NULL. */
const float *mm_format_lut_f32(mm_dtype dtype);
/* The same values as BF16 bit patterns, for the MX element types only (every FP8/FP4 value is exactly
 * a BF16 value), or NULL. */
const uint16_t *mm_format_lut_bf16(mm_dtype dtype);

#endif
