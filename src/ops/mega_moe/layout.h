/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/layout.h: where everything of one call lives in the buffer's workspace (layout.c),
 * computed from the sizing, the weights and the plan alone, so that validation (the workspace's size
 * in rows, the plan's workspace bytes) and the call (the offsets) agree by construction. */
#ifndef MEGAMOE_OPS_MEGA_MOE_LAYOUT_H
#define MEGAMOE_OPS_MEGA_MOE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/mega_moe.h"
#include "ops/mega_moe/plan.h"

/* Rows per pool task of the row loops (dispatch, combine): big enough to amortize a task, small
 * enough that both cores get work at decode sizes. The layout holds one F32 row pair per task. */
#define ROWS_PER_TASK 16

/* Byte offsets of one call's arrays in the (64-byte aligned) workspace. */
typedef struct run_layout {
    size_t stage, stage_scale, shared_stage, shared_stage_scale, active_index, dest_row, task_rows;
    size_t routed_scratch, routed_scales, routed_weights, routed_out, row_dst, shared_scratch, shared_out,
        token_map, temp_slot;
    size_t total;
    int64_t task_row_count; /* per-task F32 rows of 2H */
} run_layout;

void mm_moe_layout_of(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w, const mm_moe_call *c,
                      run_layout *l);
/* The workspace bytes of the call (mm_moe_layout_of's total). */
size_t mm_moe_layout_bytes(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w, const mm_moe_call *c);
/* The most received rows the current workspace holds with this call's layout (-1: not even none); an
 * mm_moe_ws_rows_fn for validation. */
int64_t mm_moe_layout_workspace_rows(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w,
                                     const mm_moe_call *c);

#endif
