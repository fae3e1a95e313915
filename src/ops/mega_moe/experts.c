/* ops/mega_moe/experts.c: the routed experts of one call on this rank, scheduled as their rows arrive,
 * and the sending half of combine.
 *
 * Scheduling: expert j is complete when every source that sends it rows has signalled (its rows are
 * contiguous in the recv area, all sources in order), and then runs as ONE GEMM group over all its
 * rows, so its weights stream from memory once per call whatever the number of sources. Experts that
 * become complete together form one batch: one grouped GEMM1 and one grouped GEMM2, which the GEMM
 * layer splits into (expert, N-block, M-block) tasks, so a hot expert spreads over every core and an
 * expert without rows produces no task. While no expert is complete, the shared experts run (they need
 * only local rows), then the rank waits for the next source.
 *
 * Combine sends right after each batch, while later experts are still waiting or computing: mode 0
 * rows go to their home slot (BF16 rows to a load/store reachable home are written by GEMM2's epilogue
 * itself, no copy), mode 2 rows to their relay slot, and mode 1 reduces a source's tokens as soon as
 * every expert holding rows of that source is done. Each row's result depends only on that row, so
 * the batching never changes bits. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/run_internal.h"

/* Rows source src sends to local expert j. */
static int64_t block_rows(const run_state *s, int64_t src, int64_t j) {
    return s->c->counts[src * s->stride + s->me * s->El + j];
}

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

/* Mode 1: token i of the source in token_map: the F32 sum in k order of its weighted rows held here
 * (one separately rounded product per term). Returns the first k with a row, or -1 when none. */
static int64_t reduce_token(const run_state *s, int64_t i, float *acc) {
    int64_t first = -1;
    for (int64_t k = 0; k < s->K; k++) {
        int32_t row = s->token_map[i * s->K + k];
        if (row < 0) continue;
        if (first < 0) {
            first = k;
            memset(acc, 0, (size_t)s->H * sizeof *acc);
        }
        const uint16_t *o = s->routed_out + (int64_t)row * s->H;
        if (s->attrs->topk_weights_type == 1)
            s->ops->add_bf16(acc, o, s->H);
        else
            s->ops->axpy_bf16(acc, mm_moe_header_of(s, row)->weight, o, s->H);
    }
    return first;
}

typedef struct reduce_ctx {
    run_state *s;
    int64_t src; /* the source whose tokens are reduced */
} reduce_ctx;

static void reduce_source_task(void *ctx_, int64_t t) {
    reduce_ctx *ctx = ctx_;
    run_state *s = ctx->s;
    int64_t src = ctx->src, bs = s->c->counts[src * s->stride + s->E];
    int64_t end = (t + 1) * ROWS_PER_TASK < bs ? (t + 1) * ROWS_PER_TASK : bs;
    float *acc = s->task_rows + t * 2 * s->H;
    for (int64_t i = t * ROWS_PER_TASK; i < end; i++) {
        int64_t first = reduce_token(s, i, acc);
        if (first < 0) continue;
        s->ops->to_bf16((uint16_t *)(s->comb_peer[src] + (i * s->K + first) * s->b->comb_slot_bytes), acc,
                        s->H);
    }
}

/* Mode 1: reduces every token of source src (all experts holding its rows are done) into its home. */
static mm_status reduce_source(run_state *s, int64_t src, mm_error *err) {
    mm_status st = MM_OK;
    int64_t bs = s->c->counts[src * s->stride + s->E];
    for (int64_t x = 0; x < bs * s->K; x++) s->token_map[x] = -1;
    for (int64_t j = 0; j < s->El; j++) {
        int64_t r0 = s->recv_block[j * s->R + src], cnt = block_rows(s, src, j);
        for (int64_t r = r0; r < r0 + cnt; r++) {
            const mm_moe_row_header *h = mm_moe_header_of(s, r);
            s->token_map[h->token * s->K + h->k] = (int32_t)r;
        }
    }
    if (s->comb_peer[src]) {
        reduce_ctx ctx = {s, src};
        mm_parallel_for((bs + ROWS_PER_TASK - 1) / ROWS_PER_TASK, reduce_source_task, &ctx);
        return MM_OK;
    }
    /* Unreachable home: reduce serially into one slot and put it. */
    uint16_t *tmp = (uint16_t *)(s->ws + s->l.temp_slot);
    for (int64_t i = 0; i < bs && st == MM_OK; i++) {
        int64_t first = reduce_token(s, i, s->task_rows);
        if (first < 0) continue;
        s->ops->to_bf16(tmp, s->task_rows, s->H);
        st = mm_symm_put(s->b->comb, (int)src, (size_t)(i * s->K + first) * s->b->comb_slot_bytes, tmp,
                         (size_t)(2 * s->H), err);
    }
    return st;
}

/* Per recv row of expert j: the header's scale and weight where the GEMMs read them, and the home
 * slot GEMM2 may write directly (mode 0, no combine quantization, reachable home). */
static void stage_expert_rows(run_state *s, int64_t j) {
    int direct = s->attrs->combine_comm_mode == 0 && s->attrs->combine_quant_mode == 0;
    for (int64_t src = 0; src < s->R; src++) {
        int64_t r0 = s->recv_block[j * s->R + src], cnt = block_rows(s, src, j);
        uint8_t *home = direct ? s->comb_peer[src] : NULL;
        for (int64_t r = r0; r < r0 + cnt; r++) {
            const mm_moe_row_header *h = mm_moe_header_of(s, r);
            s->routed_scales[r] = h->int8_scale;
            s->routed_weights[r] = h->weight;
            s->row_dst[r] =
                home ? (uint16_t *)(home + (h->token * s->K + h->k) * s->b->comb_slot_bytes) : NULL;
        }
    }
}

/* Runs the experts in `ready` (all complete) as one batch, then sends their rows towards home. */
static mm_status run_ready(run_state *s, const int64_t *ready, int64_t n_ready, mm_error *err) {
    mm_status st = MM_OK;
    int64_t n_rows = 0;
    mm_ffn_group *groups = calloc((size_t)n_ready, sizeof *groups);
    int64_t *rows = NULL;
    if (!groups) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert groups: out of memory");
    for (int64_t q = 0; q < n_ready; q++) {
        int64_t j = ready[q], r0 = s->recv_block[j * s->R], cnt = 0;
        for (int64_t src = 0; src < s->R; src++) cnt += block_rows(s, src, j);
        stage_expert_rows(s, j);
        const uint8_t *a = s->recv_local + r0 * s->b->recv_slot_bytes;
        groups[q] = (mm_ffn_group){r0,
                                   cnt,
                                   a,
                                   (int64_t)s->b->recv_slot_bytes,
                                   s->routed_scales + r0,
                                   a + s->b->recv_scale_offset,
                                   (int64_t)s->b->recv_slot_bytes,
                                   s->w->routed.w1[j],
                                   s->w->routed.w2[j]};
        n_rows += cnt;
    }
    mm_ffn_job job;
    mm_moe_ffn_job_init(&job, &s->c->routed, &s->c->act, &s->w->routed, s->H,
                        s->b->sizing.intermediate_hidden, s->b);
    job.n_groups = n_ready;
    job.groups = groups;
    job.row_weights = s->attrs->topk_weights_type == 1 ? s->routed_weights : NULL;
    job.scratch = &s->routed_scratch;
    job.out = s->routed_out;
    job.row_dst = s->row_dst;
    if ((st = mm_moe_ffn_run(&job, 1, err)) != MM_OK) goto done;
    if (s->attrs->combine_comm_mode == 1) goto done; /* reduced per source by the caller */
    double t0 = mm_now_seconds();
    rows = malloc((size_t)(2 * n_rows + 2) * sizeof *rows);
    if (!rows) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "combine row list: out of memory");
        goto done;
    }
    int64_t x = 0;
    for (int64_t q = 0; q < n_ready; q++)
        for (int64_t src = 0; src < s->R; src++) {
            int64_t r0 = s->recv_block[ready[q] * s->R + src], cnt = block_rows(s, src, ready[q]);
            for (int64_t r = r0; r < r0 + cnt; r++) {
                rows[2 * x] = r;
                rows[2 * x + 1] = src;
                x++;
            }
        }
    batch_rows br = {s, rows, n_rows};
    mm_parallel_for((n_rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK, send_rows_task, &br);
    st = put_unreachable_rows(s, rows, n_rows, err);
    mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_COMBINE, t0, mm_now_seconds());
done:
    free(groups);
    free(rows);
    return st;
}

/* Scheduling state: which sources have signalled, which experts are done, which sources reduced. */
typedef struct sched {
    int arrived[MM_COMM_MAX_RANKS];
    int reduced[MM_COMM_MAX_RANKS];
    int64_t n_arrived;
    uint8_t *expert_done;
    int64_t *ready;
} sched;

static void poll_sources(run_state *s, sched *q) {
    uint64_t epoch = s->b->recv_epoch;
    for (int src = 0; src < s->R; src++)
        if (!q->arrived[src] && mm_symm_signal_value(s->b->recv, src) >= epoch) {
            q->arrived[src] = 1;
            q->n_arrived++;
        }
}

static int expert_complete(const run_state *s, const sched *q, int64_t j) {
    for (int64_t src = 0; src < s->R; src++)
        if (!q->arrived[src] && block_rows(s, src, j) > 0) return 0;
    return 1;
}

/* Mode 1: sources whose tokens are all computed here are reduced now. */
static mm_status reduce_finished_sources(run_state *s, sched *q, mm_error *err) {
    mm_status st = MM_OK;
    double t0 = mm_now_seconds();
    int any = 0;
    for (int64_t src = 0; src < s->R && st == MM_OK; src++) {
        if (q->reduced[src] || !q->arrived[src]) continue;
        int finished = 1;
        for (int64_t j = 0; j < s->El && finished; j++)
            if (block_rows(s, src, j) > 0 && !q->expert_done[j]) finished = 0;
        if (!finished) continue;
        q->reduced[src] = 1;
        any = 1;
        st = reduce_source(s, src, err);
    }
    if (any) mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_COMBINE, t0, mm_now_seconds());
    return st;
}

/* Marks the experts that became complete as done and appends those with rows to ready; returns how
 * many it appended. */
static int64_t collect_ready(const run_state *s, sched *q, int64_t *ready, int64_t *left) {
    int64_t n = 0;
    for (int64_t j = 0; j < s->El; j++) {
        if (q->expert_done[j] || !expert_complete(s, q, j)) continue;
        q->expert_done[j] = 1;
        (*left)--;
        int64_t rows = 0;
        for (int64_t src = 0; src < s->R; src++) rows += block_rows(s, src, j);
        if (rows > 0) ready[n++] = j; /* an expert without rows costs nothing */
    }
    return n;
}

mm_status mm_moe_experts(run_state *s, mm_error *err) {
    mm_status st = MM_OK;
    sched q;
    memset(&q, 0, sizeof q);
    q.expert_done = calloc((size_t)s->El + 1, 1);
    q.ready = malloc(((size_t)s->El + 1) * sizeof *q.ready);
    if (!q.expert_done || !q.ready) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert schedule: out of memory");
        goto done;
    }
    int64_t left = s->El;
    while (st == MM_OK && (left > 0 || q.n_arrived < s->R)) {
        poll_sources(s, &q);
        int64_t n_ready = collect_ready(s, &q, q.ready, &left);
        if (n_ready > 0) {
            /* Late binding: the batch takes every expert complete once this rank holds the compute
             * gate. Waiting for the gate lets more sources arrive, so a call runs fewer, larger
             * batches: fewer gate handoffs (each a thread wake-up; measured: docs/mega_moe.md,
             * Performance, 'Compute gate for rank-threads') and fewer passes. */
            mm_moe_gate_enter();
            poll_sources(s, &q);
            n_ready += collect_ready(s, &q, q.ready + n_ready, &left);
            st = run_ready(s, q.ready, n_ready, err);
            mm_moe_gate_leave();
            if (st == MM_OK && s->attrs->combine_comm_mode == 1) st = reduce_finished_sources(s, &q, err);
            continue;
        }
        if (s->attrs->combine_comm_mode == 1 && (st = reduce_finished_sources(s, &q, err)) != MM_OK) break;
        if (!s->shared_done) {
            st = mm_moe_run_shared(s, err);
            continue;
        }
        if (q.n_arrived == s->R) break;
        /* Nothing to compute: sleep on the first missing source (the comm layer's wait does not spin
         * on a core that other ranks need). */
        int src = 0;
        while (q.arrived[src]) src++;
        double t0 = mm_now_seconds();
        st = mm_symm_wait(s->b->recv, src, s->b->recv_epoch, err);
        mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_DISPATCH, t0, mm_now_seconds());
    }
    if (st == MM_OK) st = mm_moe_run_shared(s, err);
    if (st == MM_OK && s->attrs->combine_comm_mode == 1) st = reduce_finished_sources(s, &q, err);
done:
    free(q.expert_done);
    free(q.ready);
    return st;
}
