/* SPDX-License-Identifier: Apache-2.0 */
/* ops/common/tensor_check.c: the tensor-descriptor checks of every operator (see tensor_check.h). */
#include "ops/common/tensor_check.h"

#include <inttypes.h>
#include <stdio.h>

#include "core/error.h"

int mm_op_dtype_in(mm_dtype d, uint64_t set) {
    return d > MM_DTYPE_INVALID && d < MM_DTYPE_COUNT && (set & MM_OP_DTYPE(d));
}

mm_status mm_op_check_present(const mm_tensor *t, const char *name, mm_op_wording w, mm_error *err) {
    if (t) return MM_OK;
    return mm_fail(err, MM_ERR_INVALID_ARGUMENT, w == MM_OP_WORDS_DC ? "%s is missing (NULL)" : "%s is NULL",
                   name);
}

mm_status mm_op_check_dtype(const mm_tensor *t, const char *name, mm_dtype dtype, mm_op_wording w,
                            mm_error *err) {
    if (t->dtype == dtype) return MM_OK;
    return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                   w == MM_OP_WORDS_DC ? "%s has dtype %s, expected %s"
                                       : "%s dtype %s differs from the required %s",
                   name, mm_dtype_name(t->dtype), mm_dtype_name(dtype));
}

mm_status mm_op_check_ndim(const mm_tensor *t, const char *name, int ndim, mm_error *err) {
    if (t->ndim == ndim) return MM_OK;
    return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s has %d dimensions, expected %d", name, t->ndim, ndim);
}

mm_status mm_op_check_extents(const mm_tensor *t, const char *name, mm_error *err) {
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s.shape[%d] = %" PRId64 " is negative", name, d,
                           t->shape[d]);
    return MM_OK;
}

mm_status mm_op_check_data(const mm_tensor *t, const char *name, mm_op_wording w, mm_error *err) {
    if (t->data) return MM_OK;
    switch (w) {
    case MM_OP_WORDS_DC:
        if (mm_tensor_numel(t) > 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s has elements but data is NULL", name);
        return MM_OK;
    case MM_OP_WORDS_RR: {
        int64_t nbytes = mm_tensor_nbytes(t);
        if (nbytes > 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "%s.data is NULL but the tensor holds %" PRId64 " bytes", name, nbytes);
        return MM_OK;
    }
    case MM_OP_WORDS_MOE:
        if (mm_tensor_nbytes(t) > 0) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s data is NULL", name);
        return MM_OK;
    }
    return MM_OK;
}

mm_status mm_op_check_tensor(const mm_tensor *t, const char *name, mm_dtype dtype, int ndim, mm_error *err) {
    mm_status st = mm_op_check_present(t, name, MM_OP_WORDS_DC, err);
    if (st == MM_OK) st = mm_op_check_dtype(t, name, dtype, MM_OP_WORDS_DC, err);
    if (st == MM_OK) st = mm_op_check_ndim(t, name, ndim, err);
    if (st == MM_OK) st = mm_op_check_extents(t, name, err);
    if (st == MM_OK) st = mm_op_check_data(t, name, MM_OP_WORDS_DC, err);
    return st;
}

mm_status mm_op_check_layout(const mm_tensor *t, const char *name, mm_error *err) {
    if (t->ndim < 1 || t->ndim > MM_MAX_DIMS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s has %d dimensions, expected 1 to %d", name, t->ndim,
                       MM_MAX_DIMS);
    mm_status st = mm_op_check_extents(t, name, err);
    if (st != MM_OK) return st;
    if (mm_tensor_nbytes(t) < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s (dtype %s) is too large: its byte size overflows int64", name,
                       mm_dtype_name(t->dtype));
    return mm_op_check_data(t, name, MM_OP_WORDS_RR, err);
}

mm_status mm_op_check_shaped(const mm_tensor *t, const char *name, uint64_t set, int ndim, int64_t d0,
                             int64_t d1, const char *rule, mm_error *err) {
    if (!mm_op_dtype_in(t->dtype, set))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s dtype %s is not accepted (%s)", name,
                       mm_dtype_name(t->dtype), rule);
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        if (ndim == 1)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "%s must have shape (%" PRId64 ") %s (has %d dims, dim 0 = %" PRId64 ")", name, d0,
                           rule, t->ndim, t->ndim > 0 ? t->shape[0] : -1);
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "%s must have shape (%" PRId64 ", %" PRId64 ") %s (has %d dims: %" PRId64 " x %" PRId64 ")", name,
            d0, d1, rule, t->ndim, t->ndim > 0 ? t->shape[0] : -1, t->ndim > 1 ? t->shape[1] : -1);
    }
    return mm_op_check_data(t, name, MM_OP_WORDS_MOE, err);
}

/* Writes "(d0, d1, ...)" into buf. */
static const char *format_shape(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (used < size) snprintf(buf + used, size - used, ")");
    return buf;
}

mm_status mm_op_check_like(const mm_tensor *t, const mm_tensor *want, const char *name, mm_error *err) {
    mm_status st = mm_op_check_present(t, name, MM_OP_WORDS_RR, err);
    if (st == MM_OK) st = mm_op_check_dtype(t, name, want->dtype, MM_OP_WORDS_RR, err);
    if (st != MM_OK) return st;
    int same = t->ndim == want->ndim;
    for (int i = 0; same && i < want->ndim; i++) same = t->shape[i] == want->shape[i];
    if (!same) {
        char got[160], need[160];
        if (t->ndim < 0 || t->ndim > MM_MAX_DIMS)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s has %d dimensions, required shape %s", name,
                           t->ndim, format_shape(need, sizeof need, want->ndim, want->shape));
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s shape %s differs from the required %s", name,
                       format_shape(got, sizeof got, t->ndim, t->shape),
                       format_shape(need, sizeof need, want->ndim, want->shape));
    }
    return mm_op_check_data(t, name, MM_OP_WORDS_RR, err);
}
