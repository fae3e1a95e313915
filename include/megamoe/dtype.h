/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/dtype.h: element types and the plain tensor descriptor used by every operator.
 *
 * A tensor is dense, row-major and contiguous. Its shape counts logical elements; 4-bit types are
 * packed two per byte along the last dimension (element 2i in the low nibble), so a row of n 4-bit
 * values takes ceil(n/2) bytes and rows are byte-aligned. */
#ifndef MEGAMOE_DTYPE_H
#define MEGAMOE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mm_dtype {
    MM_DTYPE_INVALID = 0,
    MM_DTYPE_BOOL,
    MM_DTYPE_U8,
    MM_DTYPE_I8,
    MM_DTYPE_I16,
    MM_DTYPE_I32,
    MM_DTYPE_I64,
    MM_DTYPE_U64, /* also Ascend's packed weight scale: low 32 bits = F32 pattern, high 32 = 0 */
    MM_DTYPE_F16,
    MM_DTYPE_BF16,
    MM_DTYPE_F32,
    MM_DTYPE_F64,
    MM_DTYPE_FP8_E4M3FN,
    MM_DTYPE_FP8_E5M2,
    MM_DTYPE_E8M0,
    MM_DTYPE_FP4_E2M1,
    MM_DTYPE_FP4_E1M2, /* carried only, never computed */
    MM_DTYPE_HIFLOAT8, /* carried only, opaque bytes */
    MM_DTYPE_INT4,
    MM_DTYPE_UINT4, /* unsigned 4-bit codes 0..15 with zero points (group-wise INT4 of AWQ/GPTQ checkpoints)
                     */
    MM_DTYPE_COUNT
} mm_dtype;

#define MM_MAX_DIMS 8

typedef struct mm_tensor {
    mm_dtype dtype;
    int ndim; /* 0 .. MM_MAX_DIMS; a 0-d tensor holds one element */
    int64_t shape[MM_MAX_DIMS];
    void *data; /* may be NULL when the tensor has no elements */
} mm_tensor;

/* Canonical lower-case name ("bf16", "fp8_e4m3fn", "int4", ...), "invalid" for out-of-range values. */
const char *mm_dtype_name(mm_dtype dtype);
/* Parse a canonical name; also accepts the case-file dtype spellings listed in docs/case_files.md.
 * Returns MM_DTYPE_INVALID when unknown. */
mm_dtype mm_dtype_from_name(const char *name);
/* Bits per element: 4, 8, 16, 32 or 64 (BOOL is 8). 0 for MM_DTYPE_INVALID. */
int mm_dtype_bits(mm_dtype dtype);
/* Bytes of one row of n elements (ceil(n/2) for 4-bit types). */
int64_t mm_dtype_row_bytes(mm_dtype dtype, int64_t n);

/* Descriptor helpers. mm_tensor_make fills a descriptor (no allocation). */
mm_tensor mm_tensor_make(mm_dtype dtype, int ndim, const int64_t *shape, void *data);
/* Number of logical elements (product of the shape; 1 for 0-d). */
int64_t mm_tensor_numel(const mm_tensor *t);
/* Bytes the data occupies: rows x row_bytes(last dim). Returns -1 on overflow of int64. */
int64_t mm_tensor_nbytes(const mm_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
