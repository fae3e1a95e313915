/* ops/mega_moe/run_internal.h: the state of one mm_mega_moe_run on one rank, shared by run.c (dispatch,
 * shared experts, the call), experts.c (routed experts and combine sends) and combine.c (relay and
 * the home rank's sums). */
#ifndef MEGAMOE_OPS_MEGA_MOE_RUN_INTERNAL_H
#define MEGAMOE_OPS_MEGA_MOE_RUN_INTERNAL_H

#include "ops/mega_moe/mega_moe_internal.h"

/* Rows per pool task of the row loops (dispatch, combine): big enough to amortize a task, small
 * enough that both cores get work at decode sizes. */
#define ROWS_PER_TASK 16

/* Where everything of one call lives in the workspace. */
typedef struct run_layout {
    size_t stage, stage_scale, shared_stage, shared_stage_scale, active_index, dest_row, task_rows;
    size_t routed_scratch, routed_scales, routed_weights, routed_out, row_dst, shared_scratch, shared_out,
        token_map, temp_slot;
    size_t total;
    int64_t task_row_count; /* per-task F32 rows of 2H */
} run_layout;

/* State of one run on this rank. */
typedef struct run_state {
    mm_mega_moe_buffer *b;
    const mm_mega_moe_weights *w;
    const mm_mega_moe_attrs *attrs;
    const mm_moe_call *c;
    const mm_mega_moe_inputs *in;
    const mm_rowops *ops;
    int64_t R, E, El, K, H, M, me, stride;
    uint8_t *ws;
    run_layout l;
    uint8_t *stage, *shared_stage;
    float *stage_scale, *shared_stage_scale;
    int64_t *active_index, *dest_row;
    float *task_rows;
    uint8_t *recv_local, *comb_local, *relay_local;
    uint8_t *recv_peer[MM_COMM_MAX_RANKS], *comb_peer[MM_COMM_MAX_RANKS], *relay_peer[MM_COMM_MAX_RANKS];
    int64_t *recv_block; /* [j * R + s]: first recv row of block (local expert j, source s) */
    float *routed_scales, *routed_weights;
    uint16_t *routed_out, *shared_out;
    uint16_t **row_dst; /* per recv row: its home slot when GEMM2 may write it there directly, or NULL */
    int32_t *token_map;
    mm_ffn_scratch routed_scratch, shared_scratch;
    int shared_done;
    uint16_t *out_y;
} run_state;

static inline int mm_moe_separate_shared_stage(const mm_moe_call *c) {
    return c->has_shared && (c->shared_input_dtype != c->dispatch_dtype);
}

static inline float mm_moe_topk_weight(const run_state *s, int64_t i, int64_t k) {
    const mm_tensor *t = s->in->topk_weights;
    if (s->c->bf16_weights) return mm_bf16_to_f32_inline(((const uint16_t *)t->data)[i * s->K + k]);
    return ((const float *)t->data)[i * s->K + k];
}

static inline int mm_moe_row_active(const run_state *s, int64_t i) {
    return !s->c->mask || s->c->mask[i];
}

static inline const mm_moe_row_header *mm_moe_header_of(const run_state *s, int64_t row) {
    return (const mm_moe_row_header *)(s->recv_local + row * s->b->recv_slot_bytes +
                                       s->b->recv_header_offset);
}

/* run.c: the shared experts' whole FFN on the active rows (once per call; sets s->shared_done). */
mm_status mm_moe_run_shared(run_state *s, mm_error *err);
/* experts.c: every routed expert, each as soon as all its rows have arrived, the shared experts in the
 * first wait; finished rows are sent towards their home right after each batch. */
mm_status mm_moe_experts(run_state *s, mm_error *err);
/* combine.c: relay reduction (mode 2), the combine signal and wait, the home rank's sums into y. */
mm_status mm_moe_combine(run_state *s, mm_error *err);

#endif
