/* SPDX-License-Identifier: Apache-2.0 */
/* format/format_table.h: the one table of number-format traits, indexed by mm_dtype.
 *
 * Every place that needs to know something about a format (size, packing, whether it is an MX element
 * type and with which scale, its decode table, name in case files, how to turn one element into F32
 * and back) reads it from this table or from the accessors below, so a new format is one enum value
 * and one row, and tests that loop over the table (tests/test_format_table.c) cover it at once.
 *
 * Internal API for tools: `megamoe run` (tools/run/run_moe_data.c) and `megamoe case-gen mega-moe`
 * (tools/case/case_gen_mega_moe.c) read format facts from it; not part of include/megamoe/. */
#ifndef MEGAMOE_FORMAT_TABLE_H
#define MEGAMOE_FORMAT_TABLE_H

#include <stdint.h>

#include "megamoe/dtype.h"

/* Elements sharing one E8M0 scale in an MX row (docs/numerics.md). */
#define MM_MX_BLOCK 32

/* Element decode/encode through F32. `bits` holds the element's code in its low bits (a 4-bit element
 * in the low nibble). NULL where the format is carried only (HiFloat8) or not an element format. */
typedef float (*mm_to_f32_fn)(uint32_t bits);
typedef uint32_t (*mm_from_f32_fn)(float value);

typedef struct mm_format_traits {
    const char *name;        /* canonical lower-case name, e.g. "fp8_e4m3fn" */
    const char *safetensors; /* standard safetensors dtype string, or NULL (stored as U8 + metadata) */
    int bits;                /* bits per element */
    int per_byte;            /* elements per byte: 2 for the packed 4-bit formats (element 2i in the low
                                nibble), 1 otherwise (0 for the INVALID row) */
    int block_size;       /* elements sharing one scale: MM_MX_BLOCK for the MX element types, 1 otherwise */
    mm_dtype scale_dtype; /* the scale a quantized row of this format carries: E8M0 per MX block, F32
                             per row for the integer quantization (INT8, INT4), INVALID when none */
    int decode_entries;   /* codes a decode table covers (format/decode_tables.h): 16 or 256, 0 = none */
    int mx_emax; /* emax of an MX element (docs/numerics.md, "MX block-32 quantization"; E1M2 too), -1 = none
                  */
    int mx_min_exp;          /* MX elements: exponent of half the smallest subnormal (anything below: 0) */
    mm_to_f32_fn to_f32;     /* exact decode */
    mm_from_f32_fn from_f32; /* RNE with the saturation rule of docs/numerics.md */
} mm_format_traits;

/* Row for dtype, or NULL when dtype is out of range or MM_DTYPE_INVALID. */
const mm_format_traits *mm_format_traits_of(mm_dtype dtype);

/* Filled in by the conversion code (format/convert.c) so that the table stays one declaration. */
extern const mm_format_traits mm_format_table[MM_DTYPE_COUNT];

/* An MX element type (FP8 E4M3FN, FP8 E5M2, FP4 E2M1): groups of MM_MX_BLOCK with one E8M0 scale. */
static inline int mm_format_is_mx(mm_dtype dtype) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    return t && t->scale_dtype == MM_DTYPE_E8M0;
}

/* An integer format quantized per row with an F32 scale (INT8, INT4). */
static inline int mm_format_is_int_quant(mm_dtype dtype) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    return t && t->scale_dtype == MM_DTYPE_F32;
}

/* A packed 4-bit format (two elements per byte). */
static inline int mm_format_is_nibble(mm_dtype dtype) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    return t && t->per_byte == 2;
}

/* The E8M0 scale bytes [lowest, highest] for which every finite nonzero element of an MX type, times
 * 2^(s - 127), is a normal BF16 (the fast MX kernels fold the scale into BF16 inside that window): the
 * smallest subnormal is 2^(mx_min_exp + 1), so s >= -mx_min_exp keeps it >= 2^-126; the largest finite
 * value is below 2^(mx_emax + 1), so s <= 254 - mx_emax keeps it below 2^128. E4M3: 10 .. 246, E5M2:
 * 17 .. 239, E2M1: 2 .. 252. */
static inline int mm_format_mx_bf16_scale_lowest(mm_dtype dtype) {
    return -mm_format_traits_of(dtype)->mx_min_exp;
}
static inline int mm_format_mx_bf16_scale_highest(mm_dtype dtype) {
    return 254 - mm_format_traits_of(dtype)->mx_emax;
}

#endif
