/* ops/mega_moe/run.c: mm_mega_moe_run on one rank: dispatch, routed experts as their rows arrive,
 * shared experts while waiting, combine.
 *
 *   1. Dispatch: each active row is quantized once into a local slot (data | MX scales | header), then
 *      copied into its K destination slots, straight into the peers' recv areas when they are
 *      load/store reachable (else by mm_symm_put). The destination of (token i, k) is fixed by the
 *      allgathered count matrix: block (local expert j, source me) of the destination, in token order.
 *      One signal per peer says "all my rows for you have landed".
 *   2. Experts: whichever sources have signalled form a batch; every (expert, source) block of the
 *      batch is one GEMM group, so an expert starts on the rows that have arrived. When nothing new has
 *      arrived, the shared experts run (they need only local rows).
 *   3. Combine: each expert output row goes straight to its home rank's slot (i, k) (mode 0, BF16 or
 *      MX), or is first reduced per (token, rank) (mode 1) or per (token, domain) at a relay rank
 *      (mode 2). The home rank sums in the reference's order and rounds once to BF16.
 * Buffers are reused across calls: counters only grow, and every area is rewritten only after its
 * reader has signalled a later phase, so no extra barrier is needed. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/mega_moe_internal.h"

#define ROWS_PER_TASK 16

static size_t round_up(size_t v, size_t a) {
    return (v + a - 1) / a * a;
}

/* Where everything of one call lives in the workspace. */
typedef struct run_layout {
    size_t stage, stage_scale, shared_stage, shared_stage_scale, active_index, dest_row, task_rows;
    size_t routed_scratch, routed_scales, routed_weights, routed_out, shared_scratch, shared_out, token_map,
        temp_slot;
    size_t total;
    int64_t task_row_count; /* per-task F32 rows of 2H */
} run_layout;

static int separate_shared_stage(const mm_moe_call *c) {
    return c->has_shared && (c->shared_input_dtype != c->dispatch_dtype);
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
    PLACE(shared_stage, separate_shared_stage(c) ? (size_t)A * b->recv_slot_bytes : 0);
    PLACE(shared_stage_scale, (size_t)A * sizeof(float));
    PLACE(active_index, (size_t)A * sizeof(int64_t));
    PLACE(dest_row, (size_t)(c->bs * K) * sizeof(int64_t));
    l->task_row_count = (R * M + ROWS_PER_TASK - 1) / ROWS_PER_TASK + 1;
    PLACE(task_rows, (size_t)(l->task_row_count * 2 * H) * sizeof(float));
    PLACE(routed_scratch, mm_moe_ffn_scratch_bytes(rows, H, I, k2));
    PLACE(routed_scales, (size_t)rows * sizeof(float));
    PLACE(routed_weights, (size_t)rows * sizeof(float));
    PLACE(routed_out, (size_t)(rows * H) * sizeof(uint16_t));
    PLACE(shared_scratch, S ? mm_moe_ffn_scratch_bytes(S * A, H, I, k2) : 0);
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

/* State of one run on this rank. */
typedef struct run_state {
    mm_mega_moe_buffer *b;
    const mm_mega_moe_weights *w;
    const mm_mega_moe_attrs *attrs;
    const mm_moe_call *c;
    const mm_mega_moe_inputs *in;
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
    int32_t *token_map;
    mm_moe_ffn_scratch routed_scratch, shared_scratch;
    int64_t batch_source; /* mode 1: the source whose tokens reduce_source_task handles */
    uint16_t *out_y;
} run_state;

static float topk_weight(const run_state *s, int64_t i, int64_t k) {
    const mm_tensor *t = s->in->topk_weights;
    if (s->c->bf16_weights) return mm_moe_bf16_to_f32(((const uint16_t *)t->data)[i * s->K + k]);
    return ((const float *)t->data)[i * s->K + k];
}

static int row_active(const run_state *s, int64_t i) {
    return !s->c->mask || s->c->mask[i];
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
            mm_moe_quantize_input(c->dispatch_dtype, x, s->H, slot, slot + s->b->recv_scale_offset,
                                  &s->stage_scale[a], f32);
            if (separate_shared_stage(c)) {
                uint8_t *sh = s->shared_stage + a * s->b->recv_slot_bytes;
                mm_moe_quantize_input(c->shared_input_dtype, x, s->H, sh, sh + s->b->recv_scale_offset,
                                      &s->shared_stage_scale[a], f32);
            }
        }
    }
}

static void fill_slot(const run_state *s, uint8_t *dst, int64_t a, int64_t i, int64_t k) {
    memcpy(dst, s->stage + a * s->b->recv_slot_bytes, s->b->recv_header_offset);
    mm_moe_row_header h = {(int32_t)i, (int32_t)k, topk_weight(s, i, k), s->stage_scale[a]};
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
        if (row_active(s, i)) s->active_index[a++] = i;
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
            s->dest_row[i * s->K + k] = row_active(s, i) ? next[ids[i * s->K + k]]++ : -1;
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

static mm_status run_shared(run_state *s, mm_error *err) {
    const mm_moe_call *c = s->c;
    int64_t S = s->w->shared.count, A = c->active_rows;
    if (!c->has_shared || A == 0) return MM_OK;
    double t0 = mm_moe_now();
    int sep = separate_shared_stage(c);
    const uint8_t *base = sep ? s->shared_stage : s->stage;
    const float *scales = sep ? s->shared_stage_scale : s->stage_scale;
    mm_moe_ffn_group groups[MM_MEGA_MOE_MAX_SHARED_EXPERTS];
    for (int64_t e = 0; e < S; e++)
        groups[e] = (mm_moe_ffn_group){e * A,
                                       A,
                                       base,
                                       (int64_t)s->b->recv_slot_bytes,
                                       scales,
                                       base + s->b->recv_scale_offset,
                                       (int64_t)s->b->recv_slot_bytes,
                                       s->w->shared.w1[e],
                                       s->w->shared.w2[e]};
    mm_moe_ffn_job job = {&c->shared,
                          &c->act,
                          s->H,
                          s->b->sizing.intermediate_hidden,
                          s->w->shared.k2,
                          S,
                          groups,
                          NULL,
                          &s->shared_scratch,
                          s->shared_out,
                          NULL};
    mm_status st = mm_moe_ffn_run(&job, err);
    mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_SHARED, t0, mm_moe_now());
    return st;
}

/* ---- combine: sending ---------------------------------------------------------------------- */

static const mm_moe_row_header *header_of(const run_state *s, int64_t row) {
    return (const mm_moe_row_header *)(s->recv_local + row * s->b->recv_slot_bytes +
                                       s->b->recv_header_offset);
}

/* Writes expert output row `row` (BF16) into a home slot: BF16, or MX with combine quantization. */
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
    const int64_t *rows; /* recv rows of the batch */
    int64_t n;
} batch_rows;

/* Mode 0 / 2: each row goes to its home slot or its relay slot. */
static void send_rows_task(void *ctx, int64_t t) {
    batch_rows *br = ctx;
    run_state *s = br->s;
    int64_t end = (t + 1) * ROWS_PER_TASK < br->n ? (t + 1) * ROWS_PER_TASK : br->n;
    for (int64_t x = t * ROWS_PER_TASK; x < end; x++) {
        int64_t row = br->rows[2 * x], src = br->rows[2 * x + 1];
        const mm_moe_row_header *h = header_of(s, row);
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

/* Mode 1: token i of the source in token_map: the F32 sum in k order of its weighted rows held here
 * (one separately rounded product per term). Returns the first k with a row, or -1 when none. */
static int64_t reduce_token(const run_state *s, int64_t i, float *acc) {
    int64_t first = -1;
    for (int64_t k = 0; k < s->K; k++) {
        int32_t row = s->token_map[i * s->K + k];
        if (row < 0) continue;
        if (first < 0) {
            first = k;
            for (int64_t x = 0; x < s->H; x++) acc[x] = 0.0f;
        }
        const uint16_t *o = s->routed_out + (int64_t)row * s->H;
        if (s->attrs->topk_weights_type == 1) {
            for (int64_t x = 0; x < s->H; x++) acc[x] += mm_moe_bf16_to_f32(o[x]);
        } else {
            float w = header_of(s, row)->weight;
            for (int64_t x = 0; x < s->H; x++) {
                float term = w * mm_moe_bf16_to_f32(o[x]);
                acc[x] += term;
            }
        }
    }
    return first;
}

static void reduce_source_task(void *ctx, int64_t t) {
    run_state *s = ctx;
    int64_t src = s->batch_source, bs = s->c->counts[src * s->stride + s->E];
    int64_t end = (t + 1) * ROWS_PER_TASK < bs ? (t + 1) * ROWS_PER_TASK : bs;
    float *acc = s->task_rows + t * 2 * s->H;
    for (int64_t i = t * ROWS_PER_TASK; i < end; i++) {
        int64_t first = reduce_token(s, i, acc);
        if (first < 0) continue;
        uint16_t *out = (uint16_t *)(s->comb_peer[src] + (i * s->K + first) * s->b->comb_slot_bytes);
        for (int64_t x = 0; x < s->H; x++) out[x] = mm_moe_f32_to_bf16(acc[x]);
    }
}

static mm_status mm_moe_run_batch(run_state *s, const int64_t *sources, int64_t n_sources, mm_error *err) {
    mm_status st = MM_OK;
    int64_t El = s->El, n_groups = 0, n_rows = 0;
    mm_moe_ffn_group *groups = calloc((size_t)(El * n_sources), sizeof *groups);
    int64_t *rows = NULL;
    if (!groups) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert groups: out of memory");
    for (int64_t j = 0; j < El; j++)
        for (int64_t b = 0; b < n_sources; b++) {
            int64_t src = sources[b], cnt = s->c->counts[src * s->stride + s->me * El + j];
            if (!cnt) continue;
            int64_t r0 = s->recv_block[j * s->R + src];
            for (int64_t r = r0; r < r0 + cnt; r++) {
                const mm_moe_row_header *h = header_of(s, r);
                s->routed_scales[r] = h->int8_scale;
                s->routed_weights[r] = h->weight;
            }
            const uint8_t *a = s->recv_local + r0 * s->b->recv_slot_bytes;
            groups[n_groups++] = (mm_moe_ffn_group){r0,
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
    if (n_groups == 0) goto done;
    mm_moe_ffn_job job = {&s->c->routed,
                          &s->c->act,
                          s->H,
                          s->b->sizing.intermediate_hidden,
                          s->w->routed.k2,
                          n_groups,
                          groups,
                          s->attrs->topk_weights_type == 1 ? s->routed_weights : NULL,
                          &s->routed_scratch,
                          s->routed_out,
                          s->b};
    if ((st = mm_moe_ffn_run(&job, err)) != MM_OK) goto done;
    double t0 = mm_moe_now();
    if (s->attrs->combine_comm_mode == 1) {
        for (int64_t b = 0; b < n_sources && st == MM_OK; b++) {
            int64_t src = sources[b], bs = s->c->counts[src * s->stride + s->E];
            for (int64_t x = 0; x < bs * s->K; x++) s->token_map[x] = -1;
            for (int64_t j = 0; j < El; j++) {
                int64_t cnt = s->c->counts[src * s->stride + s->me * El + j],
                        r0 = s->recv_block[j * s->R + src];
                for (int64_t r = r0; r < r0 + cnt; r++) {
                    const mm_moe_row_header *h = header_of(s, r);
                    s->token_map[h->token * s->K + h->k] = (int32_t)r;
                }
            }
            s->batch_source = src;
            if (s->comb_peer[src]) {
                mm_parallel_for((bs + ROWS_PER_TASK - 1) / ROWS_PER_TASK, reduce_source_task, s);
            } else {
                /* Unreachable home: reduce serially into one slot and put it. */
                uint16_t *tmp = (uint16_t *)(s->ws + s->l.temp_slot);
                for (int64_t i = 0; i < bs && st == MM_OK; i++) {
                    int64_t first = reduce_token(s, i, s->task_rows);
                    if (first < 0) continue;
                    for (int64_t x = 0; x < s->H; x++) tmp[x] = mm_moe_f32_to_bf16(s->task_rows[x]);
                    st = mm_symm_put(s->b->comb, (int)src, (size_t)(i * s->K + first) * s->b->comb_slot_bytes,
                                     tmp, (size_t)(2 * s->H), err);
                }
            }
        }
    } else {
        rows = malloc((size_t)(2 * n_rows) * sizeof *rows);
        if (!rows) {
            st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "combine row list: out of memory");
            goto done;
        }
        int64_t x = 0;
        for (int64_t g = 0; g < n_groups; g++) {
            /* group g = block (j, src): recover src from the first row's block */
            for (int64_t r = groups[g].row0; r < groups[g].row0 + groups[g].rows; r++) {
                rows[2 * x] = r;
                rows[2 * x + 1] = -1;
                x++;
            }
        }
        /* source of each row: the block it lies in */
        x = 0;
        for (int64_t j = 0; j < El; j++)
            for (int64_t b = 0; b < n_sources; b++) {
                int64_t src = sources[b], cnt = s->c->counts[src * s->stride + s->me * El + j];
                for (int64_t r = 0; r < cnt; r++) rows[2 * (x++) + 1] = src;
            }
        batch_rows br = {s, rows, n_rows};
        mm_parallel_for((n_rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK, send_rows_task, &br);
        uint8_t *tmp = s->ws + s->l.temp_slot;
        for (int64_t y = 0; y < n_rows && st == MM_OK; y++) {
            int64_t row = rows[2 * y], src = rows[2 * y + 1];
            const mm_moe_row_header *h = header_of(s, row);
            const uint16_t *o = s->routed_out + row * s->H;
            if (s->attrs->combine_comm_mode == 0) {
                if (s->comb_peer[src]) continue;
                encode_comb_row(s, o, tmp);
                st = mm_symm_put(s->b->comb, (int)src,
                                 (size_t)(h->token * s->K + h->k) * s->b->comb_slot_bytes, tmp,
                                 s->b->comb_slot_bytes, err);
            } else {
                int64_t gs = s->c->group_size, relay = (s->me / gs) * gs + src % gs;
                if (s->relay_peer[relay]) continue;
                mm_moe_relay_header rh = {s->b->relay_epoch + 1, h->weight, 0.0f};
                memcpy(tmp, &rh, sizeof rh);
                memcpy(tmp + sizeof rh, o, (size_t)(2 * s->H));
                st = mm_symm_put(s->b->relay, (int)relay,
                                 (size_t)(((src / gs) * s->M + h->token) * s->K + h->k) *
                                     s->b->relay_slot_bytes,
                                 tmp, s->b->relay_slot_bytes, err);
            }
        }
    }
    mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_COMBINE, t0, mm_moe_now());
done:
    free(groups);
    free(rows);
    return st;
}

/* ---- combine: relay (mode 2) and home --------------------------------------------------------- */

typedef struct relay_task_ctx {
    run_state *s;
    int64_t home; /* the home whose tokens this pass reduces */
} relay_task_ctx;

/* Relay: token i of home h: F32 sum in k order of the domain's rows that arrived this call. */
static int64_t relay_token(const run_state *s, int64_t h, int64_t i, float *acc) {
    int64_t gs = s->c->group_size, first = -1;
    const uint8_t *base = s->relay_local + ((h / gs) * s->M + i) * s->K * s->b->relay_slot_bytes;
    for (int64_t k = 0; k < s->K; k++) {
        const uint8_t *slot = base + k * s->b->relay_slot_bytes;
        mm_moe_relay_header rh;
        memcpy(&rh, slot, sizeof rh);
        if (rh.epoch != s->b->relay_epoch) continue;
        if (first < 0) {
            first = k;
            for (int64_t x = 0; x < s->H; x++) acc[x] = 0.0f;
        }
        const uint16_t *o = (const uint16_t *)(slot + sizeof rh);
        if (s->attrs->topk_weights_type == 1) {
            for (int64_t x = 0; x < s->H; x++) acc[x] += mm_moe_bf16_to_f32(o[x]);
        } else {
            for (int64_t x = 0; x < s->H; x++) {
                float term = rh.weight * mm_moe_bf16_to_f32(o[x]);
                acc[x] += term;
            }
        }
    }
    return first;
}

static void relay_task(void *ctx_, int64_t t) {
    relay_task_ctx *ctx = ctx_;
    run_state *s = ctx->s;
    int64_t h = ctx->home, bs = s->c->counts[h * s->stride + s->E];
    int64_t end = (t + 1) * ROWS_PER_TASK < bs ? (t + 1) * ROWS_PER_TASK : bs;
    float *acc = s->task_rows + t * 2 * s->H;
    for (int64_t i = t * ROWS_PER_TASK; i < end; i++) {
        int64_t first = relay_token(s, h, i, acc);
        if (first < 0) continue;
        uint16_t *out = (uint16_t *)(s->comb_peer[h] + (i * s->K + first) * s->b->comb_slot_bytes);
        for (int64_t x = 0; x < s->H; x++) out[x] = mm_moe_f32_to_bf16(acc[x]);
    }
}

static mm_status relay_reduce(run_state *s, mm_error *err) {
    mm_status st = MM_OK;
    int64_t gs = s->c->group_size;
    for (int64_t h = s->me % gs; h < s->R && st == MM_OK; h += gs) {
        int64_t bs = s->c->counts[h * s->stride + s->E];
        if (s->comb_peer[h]) {
            relay_task_ctx ctx = {s, h};
            mm_parallel_for((bs + ROWS_PER_TASK - 1) / ROWS_PER_TASK, relay_task, &ctx);
            continue;
        }
        uint16_t *tmp = (uint16_t *)(s->ws + s->l.temp_slot);
        for (int64_t i = 0; i < bs && st == MM_OK; i++) {
            int64_t first = relay_token(s, h, i, s->task_rows);
            if (first < 0) continue;
            for (int64_t x = 0; x < s->H; x++) tmp[x] = mm_moe_f32_to_bf16(s->task_rows[x]);
            st = mm_symm_put(s->b->comb, (int)h, (size_t)(i * s->K + first) * s->b->comb_slot_bytes, tmp,
                             (size_t)(2 * s->H), err);
        }
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
    int mode = s->attrs->combine_comm_mode, cq = s->attrs->combine_quant_mode;
    int weighted = s->attrs->topk_weights_type == 0;
    int64_t gs = c->group_size, n_groups = s->R / gs, S = c->has_shared ? s->w->shared.count : 0;
    for (int64_t a = t * ROWS_PER_TASK; a < end; a++) {
        int64_t i = s->active_index[a];
        for (int64_t x = 0; x < s->H; x++) acc[x] = 0.0f;
        if (mode == 0) {
            for (int64_t k = 0; k < s->K; k++) {
                const uint8_t *slot = s->comb_local + (i * s->K + k) * s->b->comb_slot_bytes;
                float w = weighted ? topk_weight(s, i, k) : 1.0f;
                if (cq == 0) {
                    const uint16_t *o = (const uint16_t *)slot;
                    for (int64_t x = 0; x < s->H; x++) deq[x] = mm_moe_bf16_to_f32(o[x]);
                } else {
                    mm_mx_dequantize_row(slot, slot + s->H, s->H,
                                         cq == 3 ? MM_DTYPE_FP8_E5M2 : MM_DTYPE_FP8_E4M3FN, deq, NULL);
                }
                if (weighted)
                    for (int64_t x = 0; x < s->H; x++) {
                        float term = w * deq[x];
                        acc[x] += term;
                    }
                else
                    for (int64_t x = 0; x < s->H; x++) acc[x] += deq[x];
            }
        } else {
            /* One partial per group holding any of the row's experts, in ascending group order; the
             * partial sits in the slot of the group's first k. */
            for (int64_t g = 0; g < n_groups; g++) {
                for (int64_t k = 0; k < s->K; k++) {
                    if ((ids[i * s->K + k] / s->El) / gs != g) continue;
                    const uint16_t *o =
                        (const uint16_t *)(s->comb_local + (i * s->K + k) * s->b->comb_slot_bytes);
                    for (int64_t x = 0; x < s->H; x++) acc[x] += mm_moe_bf16_to_f32(o[x]);
                    break;
                }
            }
        }
        for (int64_t e = 0; e < S; e++) {
            const uint16_t *o = s->shared_out + (e * c->active_rows + a) * s->H;
            for (int64_t x = 0; x < s->H; x++) acc[x] += mm_moe_bf16_to_f32(o[x]);
        }
        uint16_t *out = (uint16_t *)s->out_y + i * s->H;
        for (int64_t x = 0; x < s->H; x++) out[x] = mm_moe_f32_to_bf16(acc[x]);
    }
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
    s->shared_out = (uint16_t *)(ws + s->l.shared_out);
    s->token_map = (int32_t *)(ws + s->l.token_map);
    int64_t I = b->sizing.intermediate_hidden;
    mm_moe_ffn_scratch_init(&s->routed_scratch, ws + s->l.routed_scratch, c->recv_rows, s->H, I,
                            s->w->routed.k2);
    if (c->has_shared)
        mm_moe_ffn_scratch_init(&s->shared_scratch, ws + s->l.shared_scratch,
                                s->w->shared.count * c->active_rows, s->H, I, s->w->shared.k2);
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

/* Runs the routed experts on sources as they arrive; the shared experts fill the first wait. */
static mm_status experts(run_state *s, mm_error *err) {
    mm_status st = MM_OK;
    int arrived[MM_COMM_MAX_RANKS] = {0};
    int64_t batch[MM_COMM_MAX_RANKS], done = 0;
    int shared_done = 0;
    uint64_t epoch = s->b->recv_epoch;
    while (done < s->R && st == MM_OK) {
        int64_t n = 0;
        for (int src = 0; src < s->R; src++)
            if (!arrived[src] && mm_symm_signal_value(s->b->recv, src) >= epoch) {
                arrived[src] = 1;
                batch[n++] = src;
            }
        if (n == 0) {
            if (!shared_done) {
                shared_done = 1;
                st = run_shared(s, err);
                continue;
            }
            int src = 0;
            while (arrived[src]) src++;
            double t0 = mm_moe_now();
            st = mm_symm_wait(s->b->recv, src, epoch, err);
            mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_DISPATCH, t0, mm_moe_now());
            continue;
        }
        done += n;
        st = mm_moe_run_batch(s, batch, n, err);
    }
    if (st == MM_OK && !shared_done) st = run_shared(s, err);
    return st;
}

static mm_status combine(run_state *s, mm_error *err) {
    mm_mega_moe_buffer *b = s->b;
    mm_status st = MM_OK;
    double t0 = mm_moe_now();
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
        if (!row_active(s, i)) memset(s->out_y + i * s->H, 0, (size_t)(2 * s->H));
    mm_moe_stats_event(b, MM_MEGA_MOE_STAGE_COMBINE, t0, mm_moe_now());
    return MM_OK;
}

mm_status mm_mega_moe_run(mm_mega_moe_buffer *buffer, const mm_mega_moe_weights *weights,
                          const mm_mega_moe_attrs *attrs, const mm_mega_moe_inputs *inputs,
                          const mm_mega_moe_outputs *outputs, mm_error *err) {
    mm_moe_call c;
    if (!outputs) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "outputs is NULL");
    mm_status st = mm_moe_validate(buffer, weights, attrs, inputs, outputs, &c, err);
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
    /* Local allocations first, then agree, so that no rank starts sending while another cannot run. */
    st = mm_moe_workspace(buffer, s.l.total, &ws, &local);
    st = mm_comm_agree(buffer->comm, st, &local);
    if (st == MM_OK && attrs->combine_comm_mode == 2) st = mm_moe_relay_area(buffer, &local);
    if (st != MM_OK) goto fail;
    s.ws = (uint8_t *)(((uintptr_t)ws + 63) / 64 * 64);
    if ((st = prepare(&s, &local)) != MM_OK) goto fail;
    memset(&buffer->stats, 0, sizeof buffer->stats);
    buffer->stats.total_begin = mm_moe_now();
    double t0 = mm_moe_now();
    if ((st = dispatch(&s, &local)) != MM_OK) goto fail;
    mm_moe_stats_event(buffer, MM_MEGA_MOE_STAGE_DISPATCH, t0, mm_moe_now());
    if ((st = experts(&s, &local)) != MM_OK) goto fail;
    if ((st = combine(&s, &local)) != MM_OK) goto fail;
    int32_t *etn = outputs->expert_token_nums->data;
    for (int64_t j = 0; j < s.El; j++) {
        int64_t n = 0;
        for (int64_t src = 0; src < s.R; src++) n += c.counts[src * s.stride + s.me * s.El + j];
        etn[j] = (int32_t)n;
    }
    buffer->stats.total_end = mm_moe_now();
    free(s.recv_block);
    free(c.counts);
    return MM_OK;
fail:
    free(s.recv_block);
    free(c.counts);
    return mm_fail(err, st, "%s", local.message);
}
