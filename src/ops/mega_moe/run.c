/* ops/mega_moe/run.c: mm_mega_moe_run on one rank: dispatch, then the routed experts as their rows
 * arrive with the shared experts in the first wait (experts.c), then combine (combine.c).
 *
 *   1. Dispatch: each active row is quantized once into a local slot (data | MX scales | header), then
 *      copied into its K destination slots, straight into the peers' recv areas when they are
 *      load/store reachable (else by mm_symm_put). The destination of (token i, k) is fixed by the
 *      allgathered count matrix: block (local expert j, source me) of the destination, in token order.
 *      One signal per peer says "all my rows for you have landed".
 *   2. Experts (experts.c): an expert runs, as one GEMM group over the rows of all sources, as soon as
 *      every source that sends it rows has signalled; experts that complete together share one grouped
 *      GEMM (the GEMM layer splits it into (expert, N-block, M-block) tasks, so a hot expert uses every
 *      core and an expert without rows costs nothing). When nothing new is complete, the shared
 *      experts run (they need only local rows).
 *   3. Combine: each expert output row goes straight to its home rank's slot (i, k) (mode 0, BF16 or
 *      MX; BF16 rows of a reachable home are written by GEMM2's epilogue itself), or is first reduced
 *      per (token, rank) (mode 1) or per (token, domain) at a relay rank (mode 2). The home rank sums
 *      in the reference's order and rounds once to BF16 (combine.c).
 * Buffers are reused across calls: counters only grow, and every area is rewritten only after its
 * reader has signalled a later phase, so no extra barrier is needed. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/run_internal.h"

static size_t round_up(size_t v, size_t a) {
    return (v + a - 1) / a * a;
}

static void layout_of(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w, const mm_moe_call *c,
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

size_t mm_moe_run_workspace_bytes(const mm_mega_moe_buffer *buf, const mm_mega_moe_weights *w,
                                  const mm_moe_call *call) {
    run_layout l;
    layout_of(buf, w, call, &l);
    return l.total;
}

/* The most received rows the current workspace holds with this call's local layout (-1: not even
 * none). The layout grows with the rows, so a binary search over [0, recv_capacity] finds it. */
static int64_t workspace_rows(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w,
                              const mm_moe_call *c) {
    mm_moe_call t = *c;
    run_layout l;
    t.recv_rows = 0;
    layout_of(b, w, &t, &l);
    if (l.total > b->workspace_bytes) return -1;
    int64_t lo = 0, hi = b->recv_capacity;
    while (lo < hi) {
        t.recv_rows = lo + (hi - lo + 1) / 2;
        layout_of(b, w, &t, &l);
        if (l.total <= b->workspace_bytes)
            lo = t.recv_rows;
        else
            hi = t.recv_rows - 1;
    }
    return lo;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

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

static mm_status dispatch(run_state *s, mm_error *err) {
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

/* ---- shared experts ------------------------------------------------------------------------ */

mm_status mm_moe_run_shared(run_state *s, mm_error *err) {
    const mm_moe_call *c = s->c;
    int64_t S = s->w->shared.count, A = c->active_rows;
    if (!c->has_shared || A == 0 || s->shared_done) {
        s->shared_done = 1;
        return MM_OK;
    }
    double t0 = mm_now_seconds();
    int sep = mm_moe_separate_shared_stage(c);
    const uint8_t *base = sep ? s->shared_stage : s->stage;
    const float *scales = sep ? s->shared_stage_scale : s->stage_scale;
    mm_ffn_group groups[MM_MEGA_MOE_MAX_SHARED_EXPERTS];
    for (int64_t e = 0; e < S; e++)
        groups[e] = (mm_ffn_group){e * A,
                                   A,
                                   base,
                                   (int64_t)s->b->recv_slot_bytes,
                                   scales,
                                   base + s->b->recv_scale_offset,
                                   (int64_t)s->b->recv_slot_bytes,
                                   s->w->shared.w1[e],
                                   s->w->shared.w2[e]};
    mm_ffn_job job;
    mm_moe_ffn_job_init(&job, &c->shared, &c->act, &s->w->shared, s->H, s->b->sizing.intermediate_hidden,
                        NULL);
    job.n_groups = S;
    job.groups = groups;
    job.scratch = &s->shared_scratch;
    job.out = s->shared_out;
    s->shared_done = 1;
    mm_status st = mm_moe_ffn_run(&job, 0, err);
    mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_SHARED, t0, mm_now_seconds());
    return st;
}

/* ---- the call ------------------------------------------------------------------------------- */

static mm_status prepare(run_state *s, mm_error *err) {
    mm_mega_moe_buffer *b = s->b;
    const mm_moe_call *c = s->c;
    uint8_t *ws = s->ws;
    s->stage = ws + s->l.stage;
    s->stage_scale = (float *)(ws + s->l.stage_scale);
    s->shared_stage = ws + s->l.shared_stage;
    s->shared_stage_scale = (float *)(ws + s->l.shared_stage_scale);
    s->active_index = (int64_t *)(ws + s->l.active_index);
    s->dest_row = (int64_t *)(ws + s->l.dest_row);
    s->task_rows = (float *)(ws + s->l.task_rows);
    s->routed_scales = (float *)(ws + s->l.routed_scales);
    s->routed_weights = (float *)(ws + s->l.routed_weights);
    s->routed_out = (uint16_t *)(ws + s->l.routed_out);
    s->row_dst = (uint16_t **)(ws + s->l.row_dst);
    s->shared_out = (uint16_t *)(ws + s->l.shared_out);
    s->token_map = (int32_t *)(ws + s->l.token_map);
    int64_t I = b->sizing.intermediate_hidden;
    mm_ffn_scratch_init(&s->routed_scratch, ws + s->l.routed_scratch, c->recv_rows, s->H, I, s->w->routed.k2);
    if (c->has_shared)
        mm_ffn_scratch_init(&s->shared_scratch, ws + s->l.shared_scratch, s->w->shared.count * c->active_rows,
                            s->H, I, s->w->shared.k2);
    s->recv_local = mm_symm_local(b->recv);
    s->comb_local = mm_symm_local(b->comb);
    s->relay_local = b->relay ? mm_symm_local(b->relay) : NULL;
    for (int d = 0; d < s->R; d++) {
        s->recv_peer[d] = d == s->me ? s->recv_local : mm_symm_peer_ptr(b->recv, d);
        s->comb_peer[d] = d == s->me ? s->comb_local : mm_symm_peer_ptr(b->comb, d);
        s->relay_peer[d] = !b->relay ? NULL : d == s->me ? s->relay_local : mm_symm_peer_ptr(b->relay, d);
    }
    s->recv_block = malloc((size_t)(s->El * s->R) * sizeof *s->recv_block);
    if (!s->recv_block) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "receive block table: out of memory");
    int64_t off = 0;
    for (int64_t j = 0; j < s->El; j++)
        for (int64_t src = 0; src < s->R; src++) {
            s->recv_block[j * s->R + src] = off;
            off += c->counts[src * s->stride + s->me * s->El + j];
        }
    return MM_OK;
}

mm_status mm_mega_moe_run(mm_mega_moe_buffer *buffer, const mm_mega_moe_weights *weights,
                          const mm_mega_moe_attrs *attrs, const mm_mega_moe_inputs *inputs,
                          const mm_mega_moe_outputs *outputs, mm_error *err) {
    mm_moe_call c;
    if (!outputs) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "outputs is NULL");
    mm_status st = mm_moe_validate(buffer, weights, attrs, inputs, outputs, &c, workspace_rows, err);
    if (st != MM_OK) return st;
    mm_error local;
    mm_error_clear(&local);
    run_state s;
    memset(&s, 0, sizeof s);
    s.b = buffer;
    s.w = weights;
    s.attrs = attrs;
    s.c = &c;
    s.in = inputs;
    s.ops = mm_rowops_get();
    s.R = buffer->world;
    s.E = buffer->sizing.moe_expert_num;
    s.El = buffer->local_experts;
    s.K = buffer->sizing.topk;
    s.H = buffer->sizing.hidden;
    s.M = buffer->sizing.num_max_tokens_per_rank;
    s.me = buffer->rank;
    s.stride = MM_MOE_COUNT_STRIDE(s.E);
    s.out_y = outputs->y->data;
    layout_of(buffer, weights, &c, &s.l);
    void *ws = NULL;
    /* Local allocations first, then agree, so that no rank starts sending while another cannot run.
     * Validation told every rank whether any workspace grows; when none does, nothing can fail here and
     * the agree (a collective) is skipped. */
    st = mm_moe_workspace(buffer, s.l.total, &ws, &local);
    if (c.workspace_grows) st = mm_comm_agree(buffer->comm, st, &local);
    if (st == MM_OK && attrs->combine_comm_mode == MM_MEGA_MOE_COMBINE_COMM_LAYERED)
        st = mm_moe_relay_area(buffer, &local);
    if (st != MM_OK) goto fail;
    s.ws = (uint8_t *)(((uintptr_t)ws + 63) / 64 * 64);
    if ((st = prepare(&s, &local)) != MM_OK) goto fail;
    memset(&buffer->stats, 0, sizeof buffer->stats);
    buffer->stats.total_begin = mm_now_seconds();
    double t0 = mm_now_seconds();
    if ((st = dispatch(&s, &local)) != MM_OK) goto fail;
    mm_moe_stats_event(buffer, MM_MEGA_MOE_STAGE_DISPATCH, t0, mm_now_seconds());
    if ((st = mm_moe_experts(&s, &local)) != MM_OK) goto fail;
    if ((st = mm_moe_combine(&s, &local)) != MM_OK) goto fail;
    int32_t *etn = outputs->expert_token_nums->data;
    for (int64_t j = 0; j < s.El; j++) {
        int64_t n = 0;
        for (int64_t src = 0; src < s.R; src++) n += c.counts[src * s.stride + s.me * s.El + j];
        etn[j] = (int32_t)n;
    }
    buffer->stats.total_end = mm_now_seconds();
    free(s.recv_block);
    free(c.counts);
    return MM_OK;
fail:
    free(s.recv_block);
    free(c.counts);
    return mm_fail(err, st, "%s", local.message);
}
