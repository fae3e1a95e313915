/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/layout.c: the workspace layout of one call (layout.h): one 64-byte aligned array after
 * the other, sized by the sizing, the weights and the plan (rows received, active rows). */
#include "ops/mega_moe/layout.h"

#include "ffn/ffn.h"
#include "ops/mega_moe/buffer.h"
#include "ops/mega_moe/weights.h"

static size_t round_up(size_t v, size_t a) {
    return (v + a - 1) / a * a;
}

void mm_moe_layout_of(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w, const mm_moe_call *c,
                      run_layout *l) {
    int64_t H = b->sizing.hidden, I = b->sizing.intermediate_hidden, K = b->sizing.topk, R = b->world;
    int64_t M = b->sizing.num_max_tokens_per_rank, A = c->active_rows, rows = c->recv_rows;
    int64_t S = c->has_shared ? w->shared.count : 0, k2 = w->routed.k2;
    size_t at = 0;
#define PLACE(field, bytes)                                                                                  \
    do {                                                                                                     \
        l->field = at;                                                                                       \
        at += round_up((size_t)(bytes), 64);                                                                 \
    } while (0)
    PLACE(stage, (size_t)A * b->recv_slot_bytes);
    PLACE(stage_scale, (size_t)A * sizeof(float));
    PLACE(shared_stage, mm_moe_separate_shared_stage(c) ? (size_t)A * b->recv_slot_bytes : 0);
    PLACE(shared_stage_scale, (size_t)A * sizeof(float));
    PLACE(active_index, (size_t)A * sizeof(int64_t));
    PLACE(dest_row, (size_t)(c->bs * K) * sizeof(int64_t));
    l->task_row_count = (R * M + ROWS_PER_TASK - 1) / ROWS_PER_TASK + 1;
    PLACE(task_rows, (size_t)(l->task_row_count * 2 * H) * sizeof(float));
    PLACE(routed_scratch, mm_ffn_scratch_bytes(rows, H, I, k2));
    PLACE(routed_scales, (size_t)rows * sizeof(float));
    PLACE(routed_weights, (size_t)rows * sizeof(float));
    PLACE(routed_out, (size_t)(rows * H) * sizeof(uint16_t));
    PLACE(row_dst, (size_t)rows * sizeof(uint16_t *));
    PLACE(shared_scratch, S ? mm_ffn_scratch_bytes(S * A, H, I, k2) : 0);
    PLACE(shared_out, (size_t)(S * A * H) * sizeof(uint16_t));
    PLACE(token_map, (size_t)(M * K) * sizeof(int32_t));
    size_t slot = b->recv_slot_bytes > b->comb_slot_bytes ? b->recv_slot_bytes : b->comb_slot_bytes;
    if (b->relay_slot_bytes > slot) slot = b->relay_slot_bytes;
    PLACE(temp_slot, slot);
#undef PLACE
    l->total = at + 64;
}

size_t mm_moe_layout_bytes(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w, const mm_moe_call *c) {
    run_layout l;
    mm_moe_layout_of(b, w, c, &l);
    return l.total;
}

/* The layout grows with the rows, so a binary search over [0, recv_capacity] finds the most. */
int64_t mm_moe_layout_workspace_rows(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w,
                                     const mm_moe_call *c) {
    mm_moe_call t = *c;
    run_layout l;
    t.recv_rows = 0;
    mm_moe_layout_of(b, w, &t, &l);
    if (l.total > b->workspace_bytes) return -1;
    int64_t lo = 0, hi = b->recv_capacity;
    while (lo < hi) {
        t.recv_rows = lo + (hi - lo + 1) / 2;
        mm_moe_layout_of(b, w, &t, &l);
        if (l.total <= b->workspace_bytes)
            lo = t.recv_rows;
        else
            hi = t.recv_rows - 1;
    }
    return lo;
}
