/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/combine.c: the receiving half of combine on one rank: the relay reduction of combine
 * mode 2, the combine signal and wait, and the home rank's final sums into y. The sums follow the
 * reference's order exactly (ref/mega_moe_ref.h step 8); the row loops are the rowops of ffn/rowops.h
 * (AVX-512 when allowed, the same bits either way). The sending half is combine_send.c. */
#include "ops/mega_moe/combine.h"

#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/combine_sum.h"
#include "ops/mega_moe/stats.h"

/* Relay: token i of home h: F32 sum in k order of the domain's rows that arrived this call. */
static int64_t relay_token(const run_state *s, int64_t h, int64_t i, float *acc) {
    int64_t gs = s->c->group_size, first = -1;
    const uint8_t *base = s->relay_local + ((h / gs) * s->M + i) * s->K * s->b->relay_slot_bytes;
    for (int64_t k = 0; k < s->K; k++) {
        const uint8_t *slot = base + k * s->b->relay_slot_bytes;
        mm_moe_relay_header rh;
        memcpy(&rh, slot, sizeof rh);
        if (rh.epoch != s->b->relay_epoch) continue;
        mm_moe_add_routed_row(s, k, rh.weight, (const uint16_t *)(slot + sizeof rh), acc, &first);
    }
    return first;
}

static mm_status relay_reduce(run_state *s, mm_error *err) {
    mm_status st = MM_OK;
    int64_t gs = s->c->group_size;
    for (int64_t h = s->me % gs; h < s->R && st == MM_OK; h += gs)
        st = mm_moe_reduce_into_combine_slots(s, h, relay_token, err);
    return st;
}

void mm_moe_add_routed_row(const run_state *s, int64_t k, float weight, const uint16_t *o, float *acc,
                           int64_t *first) {
    if (*first < 0) {
        *first = k;
        memset(acc, 0, (size_t)s->H * sizeof *acc);
    }
    if (s->attrs->topk_weights_type == 1)
        s->ops->add_bf16(acc, o, s->H);
    else
        s->ops->axpy_bf16(acc, weight, o, s->H);
}

typedef struct reduce_task_ctx {
    run_state *s;
    int64_t peer; /* the home or source whose tokens this pass reduces */
    mm_moe_token_reducer reduce;
} reduce_task_ctx;

static void reduce_task(void *ctx_, int64_t t) {
    reduce_task_ctx *ctx = ctx_;
    run_state *s = ctx->s;
    int64_t peer = ctx->peer, bs = s->c->counts[peer * s->stride + s->E];
    int64_t end = (t + 1) * ROWS_PER_TASK < bs ? (t + 1) * ROWS_PER_TASK : bs;
    float *acc = s->task_rows + t * 2 * s->H;
    for (int64_t i = t * ROWS_PER_TASK; i < end; i++) {
        int64_t first = ctx->reduce(s, peer, i, acc);
        if (first < 0) continue;
        s->ops->to_bf16((uint16_t *)(s->comb_peer[peer] + (i * s->K + first) * s->b->comb_slot_bytes), acc,
                        s->H);
    }
}

mm_status mm_moe_reduce_into_combine_slots(run_state *s, int64_t peer, mm_moe_token_reducer reduce,
                                           mm_error *err) {
    int64_t bs = s->c->counts[peer * s->stride + s->E];
    if (s->comb_peer[peer]) {
        reduce_task_ctx ctx = {s, peer, reduce};
        mm_parallel_for((bs + ROWS_PER_TASK - 1) / ROWS_PER_TASK, reduce_task, &ctx);
        return MM_OK;
    }
    /* Unreachable peer: reduce serially into one slot and put it. */
    mm_status st = MM_OK;
    uint16_t *tmp = (uint16_t *)(s->ws + s->l.temp_slot);
    for (int64_t i = 0; i < bs && st == MM_OK; i++) {
        int64_t first = reduce(s, peer, i, s->task_rows);
        if (first < 0) continue;
        s->ops->to_bf16(tmp, s->task_rows, s->H);
        st = mm_symm_put(s->b->comb, (int)peer, (size_t)(i * s->K + first) * s->b->comb_slot_bytes, tmp,
                         (size_t)(2 * s->H), err);
    }
    return st;
}

/* Home: y for active rows [t * ROWS_PER_TASK, ...). */
static void final_task(void *ctx, int64_t t) {
    run_state *s = ctx;
    const mm_moe_call *c = s->c;
    int64_t end = (t + 1) * ROWS_PER_TASK < c->active_rows ? (t + 1) * ROWS_PER_TASK : c->active_rows;
    float *acc = s->task_rows + t * 2 * s->H, *deq = acc + s->H;
    const int32_t *ids = s->in->topk_ids->data;
    int mode = s->attrs->combine_comm_mode;
    int64_t gs = c->group_size, n_groups = s->R / gs, S = c->has_shared ? s->w->shared.count : 0;
    mm_moe_sum_rule rule = {s->ops,
                            s->H,
                            s->K,
                            s->b->comb_slot_bytes,
                            s->attrs->combine_quant_mode,
                            s->attrs->topk_weights_type == 0,
                            c->bf16_weights};
    size_t wbytes = c->bf16_weights ? 2 : 4;
    for (int64_t a = t * ROWS_PER_TASK; a < end; a++) {
        int64_t i = s->active_index[a];
        if (mode == 0) {
            const uint8_t *w = (const uint8_t *)s->in->topk_weights->data + (size_t)(i * s->K) * wbytes;
            mm_moe_sum_routed(&rule, s->comb_local + i * s->K * s->b->comb_slot_bytes, NULL, w, acc, deq);
        } else {
            memset(acc, 0, (size_t)s->H * sizeof *acc);
            /* One partial per group holding any of the row's experts, in ascending group order; the
             * partial sits in the slot of the group's first k. */
            for (int64_t g = 0; g < n_groups; g++) {
                for (int64_t k = 0; k < s->K; k++) {
                    if ((ids[i * s->K + k] / s->El) / gs != g) continue;
                    const uint16_t *o =
                        (const uint16_t *)(s->comb_local + (i * s->K + k) * s->b->comb_slot_bytes);
                    s->ops->add_bf16(acc, o, s->H);
                    break;
                }
            }
        }
        mm_moe_sum_finish(s->ops, s->H, acc, s->shared_out + a * s->H, c->active_rows * s->H, S,
                          s->out_y + i * s->H);
    }
}

mm_status mm_moe_combine(run_state *s, mm_error *err) {
    mm_mega_moe_buffer *b = s->b;
    mm_status st = MM_OK;
    double t0 = mm_now_seconds();
    if (s->attrs->combine_comm_mode == 2) {
        for (int d = 0; d < s->R && st == MM_OK; d++) st = mm_symm_signal(b->relay, d, 1, err);
        b->relay_epoch++;
        if (st == MM_OK) st = mm_symm_wait_all(b->relay, b->relay_epoch, err);
        if (st == MM_OK) st = relay_reduce(s, err);
    }
    for (int d = 0; d < s->R && st == MM_OK; d++) st = mm_symm_signal(b->comb, d, 1, err);
    b->comb_epoch++;
    if (st == MM_OK) st = mm_symm_wait_all(b->comb, b->comb_epoch, err);
    if (st != MM_OK) return st;
    mm_parallel_for((s->c->active_rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK, final_task, s);
    for (int64_t i = 0; i < s->c->bs; i++)
        if (!mm_moe_row_active(s, i)) memset(s->out_y + i * s->H, 0, (size_t)(2 * s->H));
    mm_moe_stats_event(b, MM_MEGA_MOE_STAGE_COMBINE, t0, mm_now_seconds());
    return MM_OK;
}
