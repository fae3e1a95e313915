/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/experts.c: the routed experts scheduler of one call on this rank: which expert batches
 * run when, as their rows arrive.
 *
 * Expert j is complete when every source that sends it rows has signalled (its rows are contiguous in
 * the recv area, all sources in order), and then runs as ONE GEMM group over all its rows, so its
 * weights stream from memory once per call whatever the number of sources. Experts that become
 * complete together form one batch: one grouped GEMM1 and one grouped GEMM2, which the GEMM layer
 * splits into (expert, N-block, M-block) tasks, so a hot expert spreads over every core and an expert
 * without rows produces no task. While no expert is complete, the idle hook runs (the shared experts:
 * they need only local rows), then the rank waits for the next source.
 *
 * The caller's hooks (experts.h) act at once on what each batch finished (combine sends its rows
 * home, combine_send.c) while later experts are still waiting or computing. Each row's result depends
 * only on that row, so the batching never changes bits. */
#include "ops/mega_moe/experts.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/mega_moe/ffn_call.h"
#include "ops/mega_moe/gate.h"
#include "ops/mega_moe/stats.h"

/* Per recv row of expert j: the header's scale and weight where the GEMMs read them, and the home
 * slot GEMM2 may write directly (mode 0, no combine quantization, reachable home). */
static void stage_expert_rows(run_state *s, int64_t j) {
    int direct = s->attrs->combine_comm_mode == 0 && s->attrs->combine_quant_mode == 0;
    for (int64_t src = 0; src < s->R; src++) {
        int64_t r0 = s->recv_block[j * s->R + src], cnt = mm_moe_block_rows(s, src, j);
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

/* Runs the experts in `ready` (all complete) as one batch, then hands them to hooks->batch_done. */
static mm_status run_ready(run_state *s, const int64_t *ready, int64_t n_ready,
                           const mm_moe_expert_hooks *hooks, mm_error *err) {
    mm_status st = MM_OK;
    mm_ffn_group *groups = calloc((size_t)n_ready, sizeof *groups);
    if (!groups) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert groups: out of memory");
    int batch = mm_moe_stats_batch(s->b);
    for (int64_t q = 0; q < n_ready; q++) {
        int64_t j = ready[q], r0 = s->recv_block[j * s->R], cnt = 0;
        for (int64_t src = 0; src < s->R; src++) cnt += mm_moe_block_rows(s, src, j);
        mm_moe_stats_expert(s->b, batch, s->me * s->El + j, cnt);
        stage_expert_rows(s, j);
        const uint8_t *a = s->recv_local + r0 * s->b->recv_slot_bytes;
        groups[q] = mm_moe_expert_group(&s->w->routed, j, r0, cnt, a, (int64_t)s->b->recv_slot_bytes,
                                        s->b->recv_scale_offset, s->routed_scales + r0);
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
    st = mm_moe_ffn_run(&job, 1, err);
    free(groups);
    if (st == MM_OK && hooks->batch_done) st = hooks->batch_done(s, ready, n_ready, err);
    return st;
}

/* Scheduling state: which sources have signalled, which experts are done, which sources finished. */
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
        if (!q->arrived[src] && mm_moe_block_rows(s, src, j) > 0) return 0;
    return 1;
}

/* Sources whose rows are all computed here go to hooks->sources_done (each once). */
static mm_status finish_sources(run_state *s, sched *q, const mm_moe_expert_hooks *hooks, mm_error *err) {
    if (!hooks->sources_done) return MM_OK;
    int64_t done[MM_COMM_MAX_RANKS], n = 0;
    for (int64_t src = 0; src < s->R; src++) {
        if (q->reduced[src] || !q->arrived[src]) continue;
        int finished = 1;
        for (int64_t j = 0; j < s->El && finished; j++)
            if (mm_moe_block_rows(s, src, j) > 0 && !q->expert_done[j]) finished = 0;
        if (!finished) continue;
        q->reduced[src] = 1;
        done[n++] = src;
    }
    return n > 0 ? hooks->sources_done(s, done, n, err) : MM_OK;
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
        for (int64_t src = 0; src < s->R; src++) rows += mm_moe_block_rows(s, src, j);
        if (rows > 0) ready[n++] = j; /* an expert without rows costs nothing */
    }
    return n;
}

mm_status mm_moe_experts(run_state *s, const mm_moe_expert_hooks *hooks, mm_error *err) {
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
    int idle_done = 0;
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
            st = run_ready(s, q.ready, n_ready, hooks, err);
            mm_moe_gate_leave();
            if (st == MM_OK) st = finish_sources(s, &q, hooks, err);
            continue;
        }
        if ((st = finish_sources(s, &q, hooks, err)) != MM_OK) break;
        if (!idle_done) {
            idle_done = 1;
            if (hooks->idle) st = hooks->idle(s, err);
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
    if (st == MM_OK && !idle_done && hooks->idle) st = hooks->idle(s, err);
    if (st == MM_OK) st = finish_sources(s, &q, hooks, err);
done:
    free(q.expert_done);
    free(q.ready);
    return st;
}
