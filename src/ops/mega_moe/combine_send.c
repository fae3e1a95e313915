/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/combine_send.c: the sending half of combine: the rows of each finished batch of routed
 * experts go towards their home right away, while later experts are still waiting or computing.
 *
 * Mode 0 rows go to their home slot (BF16 rows to a load/store reachable home were already written by
 * GEMM2's epilogue, no copy), mode 2 rows to their relay slot, and mode 1 reduces a source's tokens as
 * soon as every expert holding rows of that source is done. The experts scheduler (experts.c) calls
 * these through its hooks (experts.h); each row's result depends only on that row, so the batching
 * never changes bits. */
#include "ops/mega_moe/combine.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/stats.h"

/* Writes a BF16 expert output row into a home slot: BF16, or MX with combine quantization. */
static void encode_comb_row(const run_state *s, const uint16_t *o, uint8_t *dst) {
    int mode = s->attrs->combine_quant_mode;
    if (mode == 0) {
        memcpy(dst, o, (size_t)(2 * s->H));
        return;
    }
    mm_dtype t = mode == 3 ? MM_DTYPE_FP8_E5M2 : MM_DTYPE_FP8_E4M3FN;
    mm_mx_quantize_row_bf16(o, s->H, t, dst, dst + s->H, NULL);
}

typedef struct batch_rows {
    run_state *s;
    const int64_t *rows; /* pairs (recv row, source) */
    int64_t n;
} batch_rows;

/* Mode 0 / 2: each row goes to its home slot or its relay slot (rows GEMM2 already wrote home are
 * skipped). */
static void send_rows_task(void *ctx, int64_t t) {
    batch_rows *br = ctx;
    run_state *s = br->s;
    int64_t end = (t + 1) * ROWS_PER_TASK < br->n ? (t + 1) * ROWS_PER_TASK : br->n;
    for (int64_t x = t * ROWS_PER_TASK; x < end; x++) {
        int64_t row = br->rows[2 * x], src = br->rows[2 * x + 1];
        if (s->row_dst[row]) continue;
        const mm_moe_row_header *h = mm_moe_header_of(s, row);
        const uint16_t *o = s->routed_out + row * s->H;
        if (s->attrs->combine_comm_mode == 0) {
            if (s->comb_peer[src])
                encode_comb_row(s, o, s->comb_peer[src] + (h->token * s->K + h->k) * s->b->comb_slot_bytes);
        } else {
            int64_t gs = s->c->group_size, relay = (s->me / gs) * gs + src % gs;
            if (s->relay_peer[relay]) {
                uint8_t *dst = s->relay_peer[relay] +
                               (((src / gs) * s->M + h->token) * s->K + h->k) * s->b->relay_slot_bytes;
                mm_moe_relay_header rh = {s->b->relay_epoch + 1, h->weight, 0.0f};
                memcpy(dst, &rh, sizeof rh);
                memcpy(dst + sizeof rh, o, (size_t)(2 * s->H));
            }
        }
    }
}

/* Mode 0 / 2 rows of the finished experts whose home (or relay) is not load/store reachable: put one
 * by one through the communicator. */
static mm_status put_unreachable_rows(run_state *s, const int64_t *rows, int64_t n, mm_error *err) {
    mm_status st = MM_OK;
    uint8_t *tmp = s->ws + s->l.temp_slot;
    for (int64_t y = 0; y < n && st == MM_OK; y++) {
        int64_t row = rows[2 * y], src = rows[2 * y + 1];
        const mm_moe_row_header *h = mm_moe_header_of(s, row);
        const uint16_t *o = s->routed_out + row * s->H;
        if (s->attrs->combine_comm_mode == 0) {
            if (s->comb_peer[src]) continue;
            encode_comb_row(s, o, tmp);
            st = mm_symm_put(s->b->comb, (int)src, (size_t)(h->token * s->K + h->k) * s->b->comb_slot_bytes,
                             tmp, s->b->comb_slot_bytes, err);
        } else {
            int64_t gs = s->c->group_size, relay = (s->me / gs) * gs + src % gs;
            if (s->relay_peer[relay]) continue;
            mm_moe_relay_header rh = {s->b->relay_epoch + 1, h->weight, 0.0f};
            memcpy(tmp, &rh, sizeof rh);
            memcpy(tmp + sizeof rh, o, (size_t)(2 * s->H));
            st = mm_symm_put(s->b->relay, (int)relay,
                             (size_t)(((src / gs) * s->M + h->token) * s->K + h->k) * s->b->relay_slot_bytes,
                             tmp, s->b->relay_slot_bytes, err);
        }
    }
    return st;
}

/* Mode 1: token i of source src, mapped by token_map: the F32 sum in k order of its weighted rows held
 * here (one separately rounded product per term). Returns the first k with a row, or -1 when none. */
static int64_t reduce_token(const run_state *s, int64_t src, int64_t i, float *acc) {
    (void)src; /* token_map holds this source's rows only */
    int64_t first = -1;
    for (int64_t k = 0; k < s->K; k++) {
        int32_t row = s->token_map[i * s->K + k];
        if (row < 0) continue;
        mm_moe_add_routed_row(s, k, mm_moe_header_of(s, row)->weight, s->routed_out + (int64_t)row * s->H,
                              acc, &first);
    }
    return first;
}

/* Mode 1: reduces every token of source src (all experts holding its rows are done) into its home. */
static mm_status reduce_source(run_state *s, int64_t src, mm_error *err) {
    int64_t bs = s->c->counts[src * s->stride + s->E];
    for (int64_t x = 0; x < bs * s->K; x++) s->token_map[x] = -1;
    for (int64_t j = 0; j < s->El; j++) {
        int64_t r0 = s->recv_block[j * s->R + src], cnt = mm_moe_block_rows(s, src, j);
        for (int64_t r = r0; r < r0 + cnt; r++) {
            const mm_moe_row_header *h = mm_moe_header_of(s, r);
            s->token_map[h->token * s->K + h->k] = (int32_t)r;
        }
    }
    return mm_moe_reduce_into_combine_slots(s, src, reduce_token, err);
}

mm_status mm_moe_combine_send_batch(run_state *s, const int64_t *experts, int64_t n_experts, mm_error *err) {
    double t0 = mm_now_seconds();
    int64_t n_rows = 0;
    for (int64_t q = 0; q < n_experts; q++)
        for (int64_t src = 0; src < s->R; src++) n_rows += mm_moe_block_rows(s, src, experts[q]);
    int64_t *rows = malloc((size_t)(2 * n_rows + 2) * sizeof *rows);
    if (!rows) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "combine row list: out of memory");
    int64_t x = 0;
    for (int64_t q = 0; q < n_experts; q++)
        for (int64_t src = 0; src < s->R; src++) {
            int64_t r0 = s->recv_block[experts[q] * s->R + src], cnt = mm_moe_block_rows(s, src, experts[q]);
            for (int64_t r = r0; r < r0 + cnt; r++) {
                rows[2 * x] = r;
                rows[2 * x + 1] = src;
                x++;
            }
        }
    batch_rows br = {s, rows, n_rows};
    mm_parallel_for((n_rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK, send_rows_task, &br);
    mm_status st = put_unreachable_rows(s, rows, n_rows, err);
    mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_COMBINE, t0, mm_now_seconds());
    free(rows);
    return st;
}

mm_status mm_moe_combine_reduce_sources(run_state *s, const int64_t *sources, int64_t n, mm_error *err) {
    mm_status st = MM_OK;
    double t0 = mm_now_seconds();
    for (int64_t x = 0; x < n && st == MM_OK; x++) st = reduce_source(s, sources[x], err);
    mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_COMBINE, t0, mm_now_seconds());
    return st;
}
