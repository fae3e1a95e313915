/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/plan.h: the plan of one call: everything validation (validate.c) decides before any
 * token moves, identical on every rank, and what the call's phases read from it. */
#ifndef MEGAMOE_OPS_MEGA_MOE_PLAN_H
#define MEGAMOE_OPS_MEGA_MOE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "ffn/activation.h"
#include "megamoe/mega_moe.h"
#include "ops/mega_moe/path.h"
#include "ops/mega_moe/weights.h"

/* Everything a validated call needs (validate.c fills it; the call's phases read it). */
typedef struct mm_moe_call {
    mm_moe_path routed, shared;
    int has_shared;
    mm_ffn_act act;
    int prequantized;        /* x arrives as MX bytes + scales */
    mm_dtype dispatch_dtype; /* BF16, I8 or MX */
    mm_dtype shared_input_dtype;
    int64_t bs, active_rows;
    const uint8_t *mask; /* NULL = all active (BOOL / I8 bytes) */
    int bf16_weights;    /* topk_weights is BF16 */
    int layered;
    int64_t group_size; /* combine modes 1/2: ranks per reduction group (1 or rank_num_per_server) */
    /* from the allgather: counts[s * (E + 2) + e] rows source s sends to expert e; then BS_s, active_s */
    int64_t *counts;
    int64_t recv_rows, max_recv_rows;
    int workspace_grows; /* some rank's workspace must grow for this call (run.c then agrees on it) */
} mm_moe_call;

#define MM_MOE_COUNT_STRIDE(E) ((E) + 2)

/* The shared experts read their own quantization of x (not the dispatch's) when the dtypes differ. */
static inline int mm_moe_separate_shared_stage(const mm_moe_call *c) {
    return c->has_shared && (c->shared_input_dtype != c->dispatch_dtype);
}

/* call_attrs.c: the attribute rules that need no communication, for the weight groups routed and
 * shared (shared->count 0 = none) of hidden H and intermediate I; fills c's paths, activation,
 * prequantized flag, dispatch and shared input dtypes and has_shared. */
mm_status mm_moe_check_compute_attrs(const mm_moe_expert_set *routed, const mm_moe_expert_set *shared,
                                     int64_t H, int64_t I, const mm_mega_moe_attrs *a, mm_moe_call *c,
                                     mm_error *err);

/* Bytes of one rank's record in validation's allgather, for E routed experts (validate.c). */
size_t mm_moe_check_record_bytes(int64_t E);

/* How many received rows the current workspace of buf holds for this call's local layout (layout.c). */
typedef int64_t (*mm_moe_ws_rows_fn)(const mm_mega_moe_buffer *buf, const mm_mega_moe_weights *w,
                                     const mm_moe_call *call);

/* validate.c: the whole plan; on success call->counts is allocated (free it). ws_rows (NULL: plan)
 * reports this rank's workspace in rows, so that every rank learns whether any workspace grows. */
mm_status mm_moe_validate(mm_mega_moe_buffer *buf, const mm_mega_moe_weights *weights,
                          const mm_mega_moe_attrs *attrs, const mm_mega_moe_inputs *in,
                          const mm_mega_moe_outputs *out, mm_moe_call *call, mm_moe_ws_rows_fn ws_rows,
                          mm_error *err);

#endif
