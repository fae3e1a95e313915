/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/dispatch.c: the dispatch phase of mm_mega_moe_run: each active row is quantized once
 * into a local slot (data | MX scales | header), then copied into its K destination slots, straight into
 * the peers' recv areas when they are load/store reachable (else by mm_symm_put). The destination of
 * (token i, k) is fixed by the allgathered count matrix: block (local expert j, source me) of the
 * destination, in token order. One signal per peer says "all my rows for you have landed". */
#include "ops/mega_moe/dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
/* Quantizes active rows [t * ROWS_PER_TASK, ...) once per input type. */
static void quantize_task(void *ctx, int64_t t) {
    run_state *s = ctx;
    const mm_moe_call *c = s->c;
    float *f32 = s->task_rows + t * 2 * s->H;
    int64_t end = (t + 1) * ROWS_PER_TASK < c->active_rows ? (t + 1) * ROWS_PER_TASK : c->active_rows;
    for (int64_t a = t * ROWS_PER_TASK; a < end; a++) {
        int64_t i = s->active_index[a];
        uint8_t *slot = s->stage + a * s->b->recv_slot_bytes;
        if (c->prequantized) {
            int64_t bytes = mm_dtype_row_bytes(c->dispatch_dtype, s->H), nscale = (s->H + 31) / 32;
            memcpy(slot, (const uint8_t *)s->in->x->data + i * bytes, (size_t)bytes);
            memcpy(slot + s->b->recv_scale_offset, (const uint8_t *)s->in->scales->data + i * nscale,
                   (size_t)nscale);
            s->stage_scale[a] = 1.0f;
        } else {
            const uint16_t *x = (const uint16_t *)s->in->x->data + i * s->H;
            mm_ffn_quantize_input(c->dispatch_dtype, x, s->H, slot, slot + s->b->recv_scale_offset,
                                  &s->stage_scale[a], f32);
            if (mm_moe_separate_shared_stage(c)) {
                uint8_t *sh = s->shared_stage + a * s->b->recv_slot_bytes;
                mm_ffn_quantize_input(c->shared_input_dtype, x, s->H, sh, sh + s->b->recv_scale_offset,
                                      &s->shared_stage_scale[a], f32);
            }
        }
    }
}

static void fill_slot(const run_state *s, uint8_t *dst, int64_t a, int64_t i, int64_t k) {
    memcpy(dst, s->stage + a * s->b->recv_slot_bytes, s->b->recv_header_offset);
    mm_moe_row_header h = {(int32_t)i, (int32_t)k, mm_moe_topk_weight(s, i, k), s->stage_scale[a]};
    memcpy(dst + s->b->recv_header_offset, &h, sizeof h);
}

/* Copies active rows of a task into their K destination slots of reachable peers. */
static void send_task(void *ctx, int64_t t) {
    run_state *s = ctx;
    int64_t end = (t + 1) * ROWS_PER_TASK < s->c->active_rows ? (t + 1) * ROWS_PER_TASK : s->c->active_rows;
    const int32_t *ids = s->in->topk_ids->data;
    for (int64_t a = t * ROWS_PER_TASK; a < end; a++) {
        int64_t i = s->active_index[a];
        for (int64_t k = 0; k < s->K; k++) {
            int64_t d = ids[i * s->K + k] / s->El;
            if (s->recv_peer[d])
                fill_slot(s, s->recv_peer[d] + s->dest_row[i * s->K + k] * s->b->recv_slot_bytes, a, i, k);
        }
    }
}

mm_status mm_moe_dispatch(run_state *s, mm_error *err) {
    const mm_moe_call *c = s->c;
    const int32_t *ids = s->in->topk_ids->data;
    int64_t a = 0;
    mm_status st = MM_OK;
    for (int64_t i = 0; i < c->bs; i++)
        if (mm_moe_row_active(s, i)) s->active_index[a++] = i;
    /* Destination rows: block (j, me) of rank d, in token order. */
    int64_t *next = calloc((size_t)s->E, sizeof *next);
    if (!next) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "dispatch offsets: out of memory");
    for (int64_t e = 0; e < s->E; e++) {
        int64_t d = e / s->El, j = e % s->El, off = 0;
        for (int64_t jj = 0; jj < j; jj++)
            for (int64_t src = 0; src < s->R; src++) off += c->counts[src * s->stride + d * s->El + jj];
        for (int64_t src = 0; src < s->me; src++) off += c->counts[src * s->stride + e];
        next[e] = off;
    }
    for (int64_t i = 0; i < c->bs; i++)
        for (int64_t k = 0; k < s->K; k++)
            s->dest_row[i * s->K + k] = mm_moe_row_active(s, i) ? next[ids[i * s->K + k]]++ : -1;
    free(next);
    int64_t tasks = (c->active_rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    mm_parallel_for(tasks, quantize_task, s);
    mm_parallel_for(tasks, send_task, s);
    uint8_t *tmp = s->ws + s->l.temp_slot;
    for (int64_t aa = 0; aa < c->active_rows && st == MM_OK; aa++) {
        int64_t i = s->active_index[aa];
        for (int64_t k = 0; k < s->K && st == MM_OK; k++) {
            int64_t d = ids[i * s->K + k] / s->El;
            if (s->recv_peer[d]) continue;
            fill_slot(s, tmp, aa, i, k);
            st = mm_symm_put(s->b->recv, (int)d, (size_t)s->dest_row[i * s->K + k] * s->b->recv_slot_bytes,
                             tmp, s->b->recv_slot_bytes, err);
        }
    }
    for (int d = 0; d < s->R && st == MM_OK; d++) st = mm_symm_signal(s->b->recv, d, 1, err);
    s->b->recv_epoch++;
    return st;
}
