/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/call_state.h: what one mm_mega_moe_run call on one rank carries across its phases
 * (run.c sets it up; dispatch.c, experts.c, shared.c, combine_send.c and combine.c read and fill it). */
#ifndef MEGAMOE_OPS_MEGA_MOE_CALL_STATE_H
#define MEGAMOE_OPS_MEGA_MOE_CALL_STATE_H

#include <stdint.h>

#include "ffn/ffn.h"
#include "format/bf16_inline.h"
#include "megamoe/mega_moe.h"
#include "ops/mega_moe/buffer.h"
#include "ops/mega_moe/layout.h"
#include "ops/mega_moe/plan.h"
#include "ops/mega_moe/weights.h"

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
    uint16_t *out_y;
} run_state;

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

/* Rows source src sends to local expert j (a block of the recv area). */
static inline int64_t mm_moe_block_rows(const run_state *s, int64_t src, int64_t j) {
    return s->c->counts[src * s->stride + s->me * s->El + j];
}

#endif
