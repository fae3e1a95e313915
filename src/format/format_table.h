/* format/format_table.h: the one table of number-format traits, indexed by mm_dtype.
 *
 * Every place that needs to know something about a format (size, name in case files, how to turn one
 * element into F32 and back) reads it from this table, so a new format is one enum value and one row,
 * and tests that loop over the table cover it at once. */
#ifndef MEGAMOE_FORMAT_TABLE_H
#define MEGAMOE_FORMAT_TABLE_H

#include <stdint.h>

#include "megamoe/dtype.h"

/* Element decode/encode through F32. `bits` holds the element's code in its low bits (a 4-bit element
 * in the low nibble). NULL where the format is carried only (HiFloat8) or not an element format. */
typedef float (*mm_to_f32_fn)(uint32_t bits);
typedef uint32_t (*mm_from_f32_fn)(float value);

typedef struct mm_format_traits {
    const char *name;        /* canonical lower-case name, e.g. "fp8_e4m3fn" */
    const char *safetensors; /* standard safetensors dtype string, or NULL (stored as U8 + metadata) */
    int bits;                /* bits per element */
    int block_size;          /* elements sharing one scale in MX use (32), 1 otherwise */
    int is_float;            /* 1 for floating formats (including E8M0) */
    int computable;          /* 0 for formats only carried as bytes (E1M2, HiFloat8) */
    mm_to_f32_fn to_f32;     /* exact decode */
    mm_from_f32_fn from_f32; /* RNE with the saturation rule of spec/formats.md */
} mm_format_traits;

/* Row for dtype, or NULL when dtype is out of range or MM_DTYPE_INVALID. */
const mm_format_traits *mm_format_traits_of(mm_dtype dtype);

/* Filled in by the conversion code (format/convert.c) so that the table stays one declaration. */
extern const mm_format_traits mm_format_table[MM_DTYPE_COUNT];

#endif
