/* SPDX-License-Identifier: Apache-2.0 */
/* ops/common/tensor_check.h: the tensor-descriptor checks every operator makes (presence, dtype,
 * dimensions, extents, byte size, data), in one place with their messages.
 *
 * Each message names the tensor. The operators grew three wordings for the same failures before the
 * checks were shared, and callers and golden outputs match those words, so the few failure classes
 * that differ take an mm_op_wording: the words stay exactly as each operator printed them. */
#ifndef MEGAMOE_OPS_COMMON_TENSOR_CHECK_H
#define MEGAMOE_OPS_COMMON_TENSOR_CHECK_H

#include <stdint.h>

#include "megamoe/dtype.h"
#include "megamoe/status.h"

typedef enum mm_op_wording {
    MM_OP_WORDS_DC, /* Dispatch V3 / Combine V2: "x is missing (NULL)", "x has elements but data is NULL" */
    MM_OP_WORDS_RR, /* MoeReRouting: "tokens is NULL", "tokens.data is NULL but the tensor holds N bytes" */
    MM_OP_WORDS_MOE /* MegaMoE: "x data is NULL" */
} mm_op_wording;

/* A set of dtypes as a bit mask: MM_OP_DTYPE(MM_DTYPE_F32) | MM_OP_DTYPE(MM_DTYPE_BF16). */
#define MM_OP_DTYPE(d) (UINT64_C(1) << (d))
int mm_op_dtype_in(mm_dtype d, uint64_t set);

/* t is not NULL. */
mm_status mm_op_check_present(const mm_tensor *t, const char *name, mm_op_wording w, mm_error *err);
/* t->dtype == dtype. */
mm_status mm_op_check_dtype(const mm_tensor *t, const char *name, mm_dtype dtype, mm_op_wording w,
                            mm_error *err);
/* t->ndim == ndim ("%s has %d dimensions, expected %d"). */
mm_status mm_op_check_ndim(const mm_tensor *t, const char *name, int ndim, mm_error *err);
/* No negative extent in the first t->ndim dimensions. */
mm_status mm_op_check_extents(const mm_tensor *t, const char *name, mm_error *err);
/* Data present when the tensor holds anything (elements for DC, bytes for RR and MOE). */
mm_status mm_op_check_data(const mm_tensor *t, const char *name, mm_op_wording w, mm_error *err);

/* The basic descriptor check (DC wording): present, dtype, ndim, no negative extent, data. */
mm_status mm_op_check_tensor(const mm_tensor *t, const char *name, mm_dtype dtype, int ndim, mm_error *err);
/* Structure alone (RR wording), after the dtype was checked: 1 to MM_MAX_DIMS dimensions, no negative
 * extent, byte size countable in int64, data present when there are bytes. */
mm_status mm_op_check_layout(const mm_tensor *t, const char *name, mm_error *err);
/* A 1-D or 2-D tensor of one of the dtypes in set and of shape (d0) or (d0, d1), with data (MOE
 * wording); rule says what was expected, e.g. "(BS, K) INT32". t must not be NULL. */
mm_status mm_op_check_shaped(const mm_tensor *t, const char *name, uint64_t set, int ndim, int64_t d0,
                             int64_t d1, const char *rule, mm_error *err);
/* An output that must match want's dtype and shape exactly, with data when it holds bytes (RR
 * wording; name includes the "output " prefix). */
mm_status mm_op_check_like(const mm_tensor *t, const mm_tensor *want, const char *name, mm_error *err);

#endif
