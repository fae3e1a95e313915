/* SPDX-License-Identifier: Apache-2.0 */
/* format/dtype.c: the public dtype and tensor-descriptor helpers, all derived from the format table. */
#include <string.h>

#include "format/format_table.h"

const mm_format_traits *mm_format_traits_of(mm_dtype dtype) {
    if ((int)dtype <= (int)MM_DTYPE_INVALID || (int)dtype >= (int)MM_DTYPE_COUNT) return NULL;
    return &mm_format_table[dtype];
}

const char *mm_dtype_name(mm_dtype dtype) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    return t ? t->name : "invalid";
}

mm_dtype mm_dtype_from_name(const char *name) {
    if (!name) return MM_DTYPE_INVALID;
    for (int d = MM_DTYPE_INVALID + 1; d < MM_DTYPE_COUNT; d++) {
        const mm_format_traits *t = &mm_format_table[d];
        if (strcmp(t->name, name) == 0) return (mm_dtype)d;
        if (t->safetensors && strcmp(t->safetensors, name) == 0) return (mm_dtype)d;
    }
    return MM_DTYPE_INVALID;
}

int mm_dtype_bits(mm_dtype dtype) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    return t ? t->bits : 0;
}

int64_t mm_dtype_row_bytes(mm_dtype dtype, int64_t n) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    if (!t) return 0;
    if (t->per_byte > 1) return (n + t->per_byte - 1) / t->per_byte;
    return n * (t->bits / 8);
}

mm_tensor mm_tensor_make(mm_dtype dtype, int ndim, const int64_t *shape, void *data) {
    mm_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.ndim = ndim < 0 ? 0 : (ndim > MM_MAX_DIMS ? MM_MAX_DIMS : ndim);
    for (int i = 0; i < t.ndim; i++) t.shape[i] = shape[i];
    t.data = data;
    return t;
}

int64_t mm_tensor_numel(const mm_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0) return -1;
        if (t->shape[i] != 0 && n > INT64_MAX / t->shape[i]) return -1;
        n *= t->shape[i];
    }
    return n;
}

int64_t mm_tensor_nbytes(const mm_tensor *t) {
    int bits = mm_dtype_bits(t->dtype);
    if (bits == 0) return -1;
    if (t->ndim == 0) return mm_dtype_row_bytes(t->dtype, 1);
    int64_t rows = 1;
    for (int i = 0; i < t->ndim - 1; i++) {
        if (t->shape[i] < 0) return -1;
        if (t->shape[i] != 0 && rows > INT64_MAX / t->shape[i]) return -1;
        rows *= t->shape[i];
    }
    int64_t last = t->shape[t->ndim - 1];
    if (last < 0 || last > INT64_MAX / 8) return -1;
    int64_t row = mm_dtype_row_bytes(t->dtype, last);
    if (row != 0 && rows > INT64_MAX / row) return -1;
    return rows * row;
}
