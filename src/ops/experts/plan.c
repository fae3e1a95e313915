/* SPDX-License-Identifier: Apache-2.0 */
/* ops/experts/plan.c: validation of one local experts call: the attributes by MegaMoE's own rules
 * (ops/mega_moe/call_attrs.c) plus "no communication", the tensors, and the counting pass over the
 * top-k ids (each id in [0, E), or negative and skipped when asked; ids of inactive rows unchecked, as
 * in MegaMoE). Nothing is written before every rule holds. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "format/format_table.h"
#include "ops/common/tensor_check.h"
#include "ops/experts/experts_internal.h"

#define DT(d) MM_OP_DTYPE(d)

static mm_status check_attrs(const mm_experts *ex, const mm_mega_moe_attrs *a, mm_experts_plan *p,
                             mm_error *err) {
    if (a->combine_comm_mode != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "combine_comm_mode = %d: the local experts call has no communication (must be 0)",
                       a->combine_comm_mode);
    if (a->rank_num_per_server != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "rank_num_per_server = %" PRId64
                       ": the local experts call has no communication (must be 0)",
                       a->rank_num_per_server);
    if (a->dispatch_quant_mode == MM_MEGA_MOE_DISPATCH_QUANT_NONE &&
        mm_format_is_mx(a->dispatch_quant_out_dtype))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "dispatch_quant_mode 0 with dispatch_quant_out_dtype = %s (pre-quantized x) is not "
                       "available: x is BF16, F16 or F32 here",
                       mm_dtype_name(a->dispatch_quant_out_dtype));
    return mm_moe_check_compute_attrs(&ex->routed, &ex->shared, ex->H, ex->I, a, &p->c, err);
}

static mm_status check_tensors(const mm_experts *ex, const mm_experts_inputs *in, const mm_tensor *y,
                               mm_experts_plan *p, mm_error *err) {
    mm_status st;
    if (!in->x || !in->topk_ids || !in->topk_weights)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "inputs x, topk_ids and topk_weights are required");
    if (!y) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "y is NULL");
    if (in->flags & ~MM_EXPERTS_SKIP_NEGATIVE_IDS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "flags = %d has bits other than MM_EXPERTS_* (%d)",
                       in->flags, MM_EXPERTS_SKIP_NEGATIVE_IDS);
    const mm_tensor *x = in->x, *ids = in->topk_ids;
    if (x->ndim != 2 || x->shape[0] < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "x must be 2-D (T, H), has %d dims", x->ndim);
    if (ids->ndim != 2 || ids->shape[1] < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "topk_ids must be 2-D (T, K) with K >= 1, has %d dims%s",
                       ids->ndim, ids->ndim == 2 ? " and K < 1" : "");
    int64_t T = x->shape[0], K = ids->shape[1];
    if (K > INT32_MAX / (T > 0 ? T : 1))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "topk_ids holds T x K = %" PRId64 " x %" PRId64
                       " choices, above %d (one call's routed rows "
                       "are numbered in 32 bits)",
                       T, K, INT32_MAX);
    st = mm_op_check_shaped(x, "x", DT(MM_DTYPE_BF16) | DT(MM_DTYPE_F16) | DT(MM_DTYPE_F32), 2, T, ex->H,
                            "(T, H) BF16, F16 or F32", err);
    if (st != MM_OK) return st;
    st = mm_op_check_shaped(ids, "topk_ids", DT(MM_DTYPE_I32) | DT(MM_DTYPE_I64), 2, T, K,
                            "(T, K) INT32 or INT64, T as x", err);
    if (st != MM_OK) return st;
    st = mm_op_check_shaped(in->topk_weights, "topk_weights", DT(MM_DTYPE_F32) | DT(MM_DTYPE_BF16), 2, T, K,
                            "(T, K) F32 or BF16, as topk_ids", err);
    if (st != MM_OK) return st;
    p->mask = NULL;
    if (in->x_active_mask) {
        st = mm_op_check_shaped(in->x_active_mask, "x_active_mask", DT(MM_DTYPE_BOOL) | DT(MM_DTYPE_I8), 1, T,
                                0, "(T,) BOOL or INT8", err);
        if (st != MM_OK) return st;
        p->mask = in->x_active_mask->data;
    }
    st = mm_op_check_shaped(y, "y", DT(MM_DTYPE_BF16) | DT(MM_DTYPE_F32), 2, T, ex->H, "(T, H) BF16 or F32",
                            err);
    if (st != MM_OK) return st;
    p->T = T;
    p->K = K;
    p->x_dtype = x->dtype;
    p->ids64 = ids->dtype == MM_DTYPE_I64;
    p->y_f32 = y->dtype == MM_DTYPE_F32;
    p->c.bf16_weights = in->topk_weights->dtype == MM_DTYPE_BF16;
    return MM_OK;
}

/* Checks every id of the active rows and counts the rows of each local expert. */
static mm_status count_rows(const mm_experts *ex, const mm_experts_inputs *in, mm_experts_plan *p,
                            mm_error *err) {
    int skip = (in->flags & MM_EXPERTS_SKIP_NEGATIVE_IDS) != 0;
    const void *ids = in->topk_ids->data;
    p->counts = calloc((size_t)ex->local + 1, sizeof *p->counts);
    if (!p->counts) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert row counts: out of memory");
    for (int64_t i = 0; i < p->T; i++) {
        if (p->mask && !p->mask[i]) continue;
        p->A++;
        for (int64_t k = 0; k < p->K; k++) {
            int64_t id =
                p->ids64 ? ((const int64_t *)ids)[i * p->K + k] : ((const int32_t *)ids)[i * p->K + k];
            if (id >= ex->E || (id < 0 && !skip)) {
                mm_status st = mm_fail(
                    err, MM_ERR_INVALID_ARGUMENT,
                    "topk_ids[%" PRId64 "][%" PRId64 "] = %" PRId64 " is outside [0, %" PRId64 ")%s", i, k,
                    id, ex->E,
                    id < 0 ? " (negative ids are skipped only with MM_EXPERTS_SKIP_NEGATIVE_IDS)" : "");
                free(p->counts);
                p->counts = NULL;
                return st;
            }
            int64_t slot = mm_experts_slot_of(ex, p, ids, i, k);
            if (slot >= 0) {
                p->counts[slot]++;
                p->N++;
            }
        }
    }
    return MM_OK;
}

mm_status mm_experts_plan_make(const mm_experts *ex, const mm_mega_moe_attrs *attrs,
                               const mm_experts_inputs *in, const mm_tensor *y, mm_experts_plan *p,
                               mm_error *err) {
    memset(p, 0, sizeof *p);
    if (!ex || !attrs || !in)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "experts, attrs and inputs must not be NULL");
    mm_status st = check_attrs(ex, attrs, p, err);
    if (st == MM_OK) st = check_tensors(ex, in, y, p, err);
    if (st == MM_OK) st = count_rows(ex, in, p, err);
    return st;
}
