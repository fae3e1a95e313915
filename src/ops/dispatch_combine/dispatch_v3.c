/* SPDX-License-Identifier: Apache-2.0 */
/* ops/dispatch_combine/dispatch_v3.c: MoE Distribute Dispatch V3.
 *
 * One data phase on the dispatch symmetric buffer. The buffer of every rank has one region per source
 * rank (communicator numbering); source s writes into destination d's region [s]: a header with its row
 * count per local expert of d, then its rows (grouped by local expert, in the source's (token, k)
 * order), their INT8 scales and their (source, token, k) triples. Rows are written straight into the
 * destination's memory when it is load/store reachable (threads; MPI on one node), else staged and put.
 * With TP = 2 a source writes its rows to both TP ranks of the destination: that is the all-gather
 * inside the TP pair, fused into the same phase. After its writes a source raises each peer's signal;
 * the destination waits for all, then copies the regions into expand_x in the output order (TP block,
 * local expert, source rank), which makes the result independent of timing and thread count. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "ffn/rowops.h"
#include "megamoe/formats.h"
#include "ops/dispatch_combine/dc_internal.h"

typedef struct dispatch_plan {
    dc_topology t;
    dc_mask mask;
    int64_t bs, h, k, max_rows;
    mm_dtype x_dtype, out_dtype;
    int quant;
    const float *smooth; /* (S + M, H) or NULL */
    size_t row_bytes;
} dispatch_plan;

typedef dc_region_layout region_layout;

static region_layout region_of(const dispatch_plan *p, int64_t bs_max) {
    return dc_region_of(p->t.L, p->k, bs_max, p->row_bytes);
}

static mm_status check_out(const mm_tensor *t, const char *name, mm_dtype dtype, int ndim, int64_t d0,
                           int64_t d1, int exact, mm_error *err) {
    mm_status st = mm_op_check_tensor(t, name, dtype, ndim, err);
    if (st) return st;
    if (exact ? t->shape[0] != d0 : t->shape[0] < d0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s.shape[0] = %" PRId64 " must be %s %" PRId64, name,
                       t->shape[0], exact ? "" : ">=", d0);
    if (ndim == 2 && t->shape[1] != d1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s.shape[1] = %" PRId64 " must be %" PRId64, name,
                       t->shape[1], d1);
    return MM_OK;
}

/* Everything a rank can check alone. comm may be NULL (shape queries). */
static mm_status dispatch_check(mm_comm *comm, const mm_dispatch_v3_inputs *in, const mm_dc_attrs *attrs,
                                const mm_dispatch_v3_outputs *out, dispatch_plan *p, mm_error *err) {
    memset(p, 0, sizeof *p);
    if (!in) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "inputs is NULL");
    mm_status st = mm_dc_check_attrs(attrs, 0, &p->t, err);
    if (st) return st;
    if ((st = mm_dc_check_elastic(in->elastic_info, attrs, comm, &p->t, err))) return st;
    if ((st = mm_dc_check_expert_ids(in->expert_ids, &p->t, &p->bs, &p->k, err))) return st;
    if ((st = mm_op_check_present(in->x, "x", MM_OP_WORDS_DC, err))) return st;
    p->x_dtype = in->x->dtype;
    if (p->x_dtype != MM_DTYPE_BF16 && p->x_dtype != MM_DTYPE_F16)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "x has dtype %s, expected bf16 or f16",
                       mm_dtype_name(p->x_dtype));
    if ((st = mm_op_check_tensor(in->x, "x", p->x_dtype, 2, err))) return st;
    p->h = in->x->shape[1];
    if (in->x->shape[0] != p->bs)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "x.shape[0] = %" PRId64 " differs from expert_ids.shape[0] = %" PRId64,
                       in->x->shape[0], p->bs);
    if (p->h < 1 || p->h > DC_MAX_H)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "x.shape[1] = H = %" PRId64 " is outside [1, %d]", p->h,
                       DC_MAX_H);
    if (attrs->global_bs && p->bs > attrs->global_bs / attrs->ep_world_size)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "Bs = %" PRId64 " exceeds global_bs / ep_world_size = %" PRId64, p->bs,
                       attrs->global_bs / attrs->ep_world_size);
    if ((st = mm_dc_check_mask(in->x_active_mask, p->bs, p->k, &p->mask, err))) return st;
    p->quant = attrs->quant_mode == MM_DC_QUANT_INT8_PER_TOKEN;
    if (in->scales) {
        if (!p->quant)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "scales (smoothing factors) are given but quant_mode = %" PRId64
                           " (they need quant_mode 2)",
                           attrs->quant_mode);
        if ((st = mm_op_check_tensor(in->scales, "scales", MM_DTYPE_F32, 2, err))) return st;
        int64_t rows = p->t.S + attrs->moe_expert_num;
        if (in->scales->shape[0] != rows || in->scales->shape[1] != p->h)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "scales has shape (%" PRId64 ", %" PRId64
                           "), expected (shared_expert_num + moe_expert_num, H) "
                           "= (%" PRId64 ", %" PRId64 ")",
                           in->scales->shape[0], in->scales->shape[1], rows, p->h);
        p->smooth = in->scales->data;
    }
    p->out_dtype = p->quant ? MM_DTYPE_I8 : p->x_dtype;
    p->row_bytes = (size_t)mm_dtype_row_bytes(p->out_dtype, p->h);
    int64_t per_src = p->t.is_shared ? 1 : (p->k < p->t.L ? p->k : p->t.L);
    p->max_rows = mm_dc_bs_bound(attrs, p->bs) * p->t.R_eff * per_src * p->t.tpw;
    if (!out) return MM_OK;
    int64_t ep_counts = p->t.R * p->t.tpw * p->t.my_L;
    if ((st = check_out(out->expand_x, "expand_x", p->out_dtype, 2, p->max_rows, p->h, 0, err))) return st;
    if (p->quant &&
        (st = check_out(out->dynamic_scales, "dynamic_scales", MM_DTYPE_F32, 1, p->max_rows, 0, 0, err)))
        return st;
    if ((st = check_out(out->assist_info_for_combine, "assist_info_for_combine", MM_DTYPE_I32, 2, p->max_rows,
                        3, 0, err)))
        return st;
    if ((st = check_out(out->expert_token_nums, "expert_token_nums", MM_DTYPE_I64, 1, p->t.my_L, 0, 1, err)))
        return st;
    if ((st = check_out(out->ep_recv_counts, "ep_recv_counts", MM_DTYPE_I32, 1, ep_counts, 0, 1, err)))
        return st;
    if (attrs->tp_world_size > 0 && (st = check_out(out->tp_recv_counts, "tp_recv_counts", MM_DTYPE_I32, 1,
                                                    attrs->tp_world_size, 0, 1, err)))
        return st;
    return MM_OK;
}

mm_status mm_dispatch_v3_plan(const mm_dispatch_v3_inputs *in, const mm_dc_attrs *attrs,
                              mm_dispatch_v3_shapes *shapes, mm_error *err) {
    if (!shapes) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "shapes is NULL");
    memset(shapes, 0, sizeof *shapes);
    dispatch_plan p;
    mm_status st = dispatch_check(NULL, in, attrs, NULL, &p, err);
    if (st) return st;
    shapes->max_rows = p.max_rows;
    shapes->local_expert_num = p.t.my_L;
    shapes->is_shared_rank = p.t.is_shared;
    int64_t s2[2] = {p.max_rows, p.h};
    shapes->expand_x = mm_tensor_make(p.out_dtype, 2, s2, NULL);
    shapes->dynamic_scales = mm_tensor_make(MM_DTYPE_F32, 1, s2, NULL);
    int64_t s3[2] = {p.max_rows, 3};
    shapes->assist_info_for_combine = mm_tensor_make(MM_DTYPE_I32, 2, s3, NULL);
    shapes->expert_token_nums = mm_tensor_make(MM_DTYPE_I64, 1, &p.t.my_L, NULL);
    int64_t n = p.t.R * p.t.tpw * p.t.my_L;
    shapes->ep_recv_counts = mm_tensor_make(MM_DTYPE_I32, 1, &n, NULL);
    shapes->tp_recv_counts = mm_tensor_make(MM_DTYPE_I32, 1, &attrs->tp_world_size, NULL);
    return MM_OK;
}

mm_status mm_dispatch_v3_shapes_of(const mm_dispatch_v3_inputs *in, const mm_dc_attrs *attrs,
                                   mm_dispatch_v3_shapes *shapes, mm_error *err) {
    return mm_dispatch_v3_plan(in, attrs, shapes, err);
}

/* ---- send side ---- */

void mm_dc_int8_quantize_row(const float *x, int64_t n, int8_t *q, float *scale) {
    /* Dispatch V3's rule (mul-even, stored scale 1 / m): the shared row kernel, AVX-512 when present. */
    mm_rowops_get()->int8_mul_even(x, n, MM_INT8_SCALE_INV_MUL, q, scale);
}

typedef struct send_item {
    int32_t dest;     /* EP rank (original numbering) */
    int32_t row;      /* row index inside the destination region */
    int32_t token, k; /* k >= K: shared expert k - K */
    int32_t smooth;   /* row of scales, -1 for none */
} send_item;

typedef struct send_ctx {
    const dispatch_plan *p;
    const region_layout *lay;
    const send_item *items;
    int64_t n_items, chunk;
    const void *x;
    unsigned char **bases; /* per destination EP rank x TP rank: where its region for me starts */
    int32_t src_new;
    float *scratch;    /* H floats per task */
    int64_t only_dest; /* -1: all; else items for this EP rank only (staged mode) */
} send_ctx;

/* Without smoothing every copy of a token quantizes to the same codes: the last quantized row of this
 * task is copied instead of quantized again (items come in token order, K copies per token). */
typedef struct quant_memo {
    int32_t token; /* -1: none yet */
    const int8_t *row;
    float scale;
} quant_memo;

static void write_item(const send_ctx *c, const send_item *it, unsigned char *base, float *f32,
                       quant_memo *memo) {
    const dispatch_plan *p = c->p;
    int32_t *assist = (int32_t *)(base + c->lay->assist_off) + (int64_t)it->row * 3;
    assist[0] = c->src_new;
    assist[1] = it->token;
    assist[2] = it->k;
    unsigned char *row = base + c->lay->rows_off + (size_t)it->row * p->row_bytes;
    const uint16_t *xr = (const uint16_t *)c->x + (size_t)it->token * (size_t)p->h;
    if (!p->quant) {
        memcpy(row, xr, p->row_bytes);
        return;
    }
    float *scale_at = (float *)(base + c->lay->scale_off) + it->row;
    if (!p->smooth && memo->token == it->token) {
        memcpy(row, memo->row, p->row_bytes);
        *scale_at = memo->scale;
        return;
    }
    for (int64_t j = 0; j < p->h; j++)
        f32[j] = p->x_dtype == MM_DTYPE_BF16 ? mm_bf16_to_f32_inline(xr[j]) : mm_f16_to_f32(xr[j]);
    if (p->smooth && it->smooth >= 0) {
        const float *s = p->smooth + (size_t)it->smooth * (size_t)p->h;
        for (int64_t j = 0; j < p->h; j++) f32[j] = f32[j] * s[j];
    }
    float scale;
    mm_dc_int8_quantize_row(f32, p->h, (int8_t *)row, &scale);
    *scale_at = scale;
    *memo = (quant_memo){it->token, (const int8_t *)row, scale};
}

static void send_task(void *ctx, int64_t task) {
    const send_ctx *c = ctx;
    float *f32 = c->scratch ? c->scratch + task * c->p->h : NULL; /* no scratch without quantization */
    int64_t end = (task + 1) * c->chunk < c->n_items ? (task + 1) * c->chunk : c->n_items;
    quant_memo memo = {-1, NULL, 0.0f};
    for (int64_t i = task * c->chunk; i < end; i++) {
        const send_item *it = &c->items[i];
        if (c->only_dest >= 0) {
            if (it->dest == c->only_dest) write_item(c, it, c->bases[0], f32, &memo);
            continue;
        }
        for (int64_t tt = 0; tt < c->p->t.tpw; tt++) {
            unsigned char *base = c->bases[it->dest * c->p->t.tpw + tt];
            if (tt == 0 || !c->p->quant) {
                write_item(c, it, base, f32, &memo);
            } else { /* the second TP copy of a quantized row: copy the first instead of requantizing */
                unsigned char *first = c->bases[it->dest * c->p->t.tpw];
                memcpy(base + c->lay->rows_off + (size_t)it->row * c->p->row_bytes,
                       first + c->lay->rows_off + (size_t)it->row * c->p->row_bytes, c->p->row_bytes);
                memcpy(base + c->lay->assist_off + (size_t)it->row * 12,
                       first + c->lay->assist_off + (size_t)it->row * 12, 12);
                ((float *)(base + c->lay->scale_off))[it->row] =
                    ((float *)(first + c->lay->scale_off))[it->row];
            }
        }
    }
}

/* ---- receive side ---- */

typedef struct recv_segment {
    const unsigned char *region;
    int64_t first, count, out_row;
} recv_segment;

typedef struct recv_ctx {
    const dispatch_plan *p;
    const region_layout *lay;
    const recv_segment *segs;
    const mm_dispatch_v3_outputs *out;
} recv_ctx;

static void recv_task(void *ctx, int64_t task) {
    const recv_ctx *c = ctx;
    const recv_segment *s = &c->segs[task];
    const dispatch_plan *p = c->p;
    memcpy((unsigned char *)c->out->expand_x->data + (size_t)s->out_row * p->row_bytes,
           s->region + c->lay->rows_off + (size_t)s->first * p->row_bytes, (size_t)s->count * p->row_bytes);
    memcpy((int32_t *)c->out->assist_info_for_combine->data + s->out_row * 3,
           s->region + c->lay->assist_off + (size_t)s->first * 12, (size_t)s->count * 12);
    if (p->quant)
        memcpy((float *)c->out->dynamic_scales->data + s->out_row,
               s->region + c->lay->scale_off + (size_t)s->first * sizeof(float),
               (size_t)s->count * sizeof(float));
}

/* Lists the rows this rank sends (items) with their destination row, and the per-destination header
 * counts (counts[o * L + le]). */
static void plan_sends(const dispatch_plan *p, const int32_t *ids, send_item *items, int64_t *n_items,
                       int32_t *counts) {
    const dc_topology *t = &p->t;
    int64_t n = 0;
    for (int64_t i = 0; i < p->bs; i++) {
        if (!mm_dc_token_active(&p->mask, i)) continue;
        for (int64_t k = 0; k < p->k; k++) {
            int64_t e = ids[i * p->k + k];
            if (!dc_pair_active(&p->mask, i, k) || dc_kind(t, e) != DC_ROUTED) continue;
            send_item it = {(int32_t)dc_routed_rank(t, e), (int32_t)(e % t->L), (int32_t)i, (int32_t)k,
                            (int32_t)(e + t->S)};
            items[n++] = it; /* row holds the local expert until the offsets are known */
        }
        for (int64_t s = 0; s < t->S; s++) {
            send_item it = {(int32_t)dc_shared_rank(t, t->my_new, s), 0, (int32_t)i, (int32_t)(p->k + s),
                            (int32_t)s};
            items[n++] = it;
        }
    }
    memset(counts, 0, sizeof(int32_t) * (size_t)(t->R * t->L));
    for (int64_t j = 0; j < n; j++) counts[items[j].dest * t->L + items[j].row]++;
    /* Row = start of its local expert's block + rank among that expert's rows (token, k order). */
    int32_t *cursor = calloc((size_t)(t->R * t->L), sizeof(int32_t));
    if (cursor) {
        for (int64_t o = 0; o < t->R; o++) {
            int32_t at = 0;
            for (int64_t le = 0; le < t->L; le++) {
                cursor[o * t->L + le] = at;
                at += counts[o * t->L + le];
            }
        }
        for (int64_t j = 0; j < n; j++) items[j].row = cursor[items[j].dest * t->L + items[j].row]++;
        free(cursor);
    } else {
        n = -1;
    }
    *n_items = n;
    if (!p->smooth)
        for (int64_t j = 0; j < n; j++) items[j].smooth = -1;
}

static mm_status exchange(mm_dc_workspace *ws, const dispatch_plan *p, const dc_call *call,
                          const mm_dispatch_v3_inputs *in, const mm_dispatch_v3_outputs *out,
                          int64_t *rows_out, mm_error *err) {
    const dc_topology *t = &p->t;
    mm_comm *comm = ws->comm;
    int size = mm_comm_size(comm), me = mm_comm_rank(comm);
    region_layout lay = region_of(p, call->bs_max);
    mm_status st =
        mm_op_symm_area_ensure(ws->comm, &ws->dispatch, lay.bytes * (size_t)size, MM_OP_GROW_HALF_AGAIN, err);
    if (st) return st;
    mm_symm *symm = ws->dispatch.symm;
    int64_t max_items = p->bs * (p->k + t->S);
    send_item *items = malloc(sizeof(send_item) * (size_t)(max_items ? max_items : 1));
    int32_t *counts = malloc(sizeof(int32_t) * (size_t)(t->R * t->L));
    unsigned char **bases = calloc((size_t)size, sizeof *bases);
    recv_segment *segs = NULL;
    if (!items || !counts || !bases) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "dispatch: out of memory for the send plan");
        goto fail;
    }
    int64_t n_items;
    plan_sends(p, in->expert_ids->data, items, &n_items, counts);
    if (n_items < 0) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "dispatch: out of memory for the send plan");
        goto fail;
    }
    int direct = 1;
    for (int g = 0; g < size; g++) {
        if (!mm_comm_is_alive(comm, g)) continue;
        unsigned char *peer = mm_symm_peer_ptr(symm, g);
        if (!peer) direct = 0;
        bases[g] = peer ? peer + (size_t)me * lay.bytes : NULL;
    }
    int64_t chunk = 8, n_tasks = (n_items + chunk - 1) / chunk;
    if (n_tasks > 64) {
        chunk = (n_items + 63) / 64;
        n_tasks = (n_items + chunk - 1) / chunk;
    }
    if (p->quant && (st = mm_dc_scratch_ensure(ws, (size_t)(n_tasks ? n_tasks : 1) * (size_t)p->h, err)))
        goto fail;
    send_ctx sc = {p, &lay, items, n_items, chunk, in->x->data, bases, (int32_t)t->my_new, ws->scratch, -1};
    if (direct) {
        for (int g = 0; g < size; g++)
            if (bases[g]) memcpy(bases[g], counts + (g / t->tpw) * t->L, sizeof(int32_t) * (size_t)t->L);
        mm_dc_run_tasks(n_tasks, send_task, &sc, (size_t)n_items * p->row_bytes * (size_t)t->tpw);
    } else {
        if ((st = mm_dc_staging_ensure(ws, lay.bytes, err))) goto fail;
        unsigned char *stage = ws->staging;
        unsigned char *one[1] = {stage};
        for (int64_t o = 0; o < t->R; o++) {
            if (!mm_comm_is_alive(comm, (int)(o * t->tpw))) continue;
            const int32_t *cnt = counts + o * t->L;
            int64_t rows = 0;
            for (int64_t le = 0; le < t->L; le++) rows += cnt[le];
            memcpy(stage, cnt, sizeof(int32_t) * (size_t)t->L);
            sc.bases = one;
            sc.only_dest = o;
            mm_dc_run_tasks(n_tasks, send_task, &sc, (size_t)n_items * p->row_bytes * (size_t)t->tpw);
            for (int64_t tt = 0; tt < t->tpw; tt++) {
                int g = (int)(o * t->tpw + tt);
                size_t at = (size_t)me * lay.bytes;
                if ((st = mm_symm_put(symm, g, at, stage, lay.hdr, err)) ||
                    (st = mm_symm_put(symm, g, at + lay.assist_off, stage + lay.assist_off, (size_t)rows * 12,
                                      err)) ||
                    (p->quant && (st = mm_symm_put(symm, g, at + lay.scale_off, stage + lay.scale_off,
                                                   (size_t)rows * sizeof(float), err))) ||
                    (st = mm_symm_put(symm, g, at + lay.rows_off, stage + lay.rows_off,
                                      (size_t)rows * p->row_bytes, err)))
                    goto fail;
            }
        }
    }
    for (int g = 0; g < size; g++)
        if (mm_comm_is_alive(comm, g) && (st = mm_symm_signal(symm, g, 1, err))) goto fail;
    ws->dispatch.epoch++;
    if ((st = mm_symm_wait_all(symm, ws->dispatch.epoch, err))) goto fail;

    /* Receive: TP block, then local expert, then source rank (new numbering). */
    int64_t n_segs = t->tpw * t->my_L * t->R_eff;
    segs = malloc(sizeof *segs * (size_t)(n_segs ? n_segs : 1));
    if (!segs) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "dispatch: out of memory for the receive plan");
        goto fail;
    }
    const unsigned char *local = mm_symm_local(symm);
    int32_t *ep_counts = out->ep_recv_counts->data;
    int64_t *tok_nums = out->expert_token_nums->data;
    int64_t row = 0, ns = 0;
    for (int64_t le = 0; le < t->my_L; le++) tok_nums[le] = 0;
    /* first_of[src]: the rows src sent for the local experts before le (a running prefix sum, so the
     * plan is linear in L: summing the header afresh for each le was O(tp x R x L^2)). */
    int64_t first_of[DC_MAX_RANKS];
    for (int64_t tt = 0; tt < t->tpw; tt++) {
        int64_t block_start = row;
        memset(first_of, 0, sizeof first_of);
        for (int64_t le = 0; le < t->my_L; le++)
            for (int64_t src = 0; src < t->R; src++) {
                int64_t cnt = 0, first = 0;
                if (src < t->R_eff) {
                    int64_t g = t->old_of_new[src] * t->tpw + tt;
                    const unsigned char *region = local + (size_t)g * lay.bytes;
                    const int32_t *hdr = (const int32_t *)region;
                    first = first_of[src];
                    cnt = hdr[le];
                    first_of[src] += cnt;
                    if (cnt < 0 || first + cnt > lay.cap || row + cnt > p->max_rows) {
                        st = mm_fail(err, MM_ERR_INTERNAL,
                                     "dispatch: rank %" PRId64 " announced %" PRId64
                                     " rows for local expert %" PRId64 ", more than fit (capacity %" PRId64
                                     ", rows so far %" PRId64 " of %" PRId64 ")",
                                     g, cnt, le, lay.cap, row, p->max_rows);
                        goto fail;
                    }
                    if (cnt) segs[ns++] = (recv_segment){region, first, cnt, row};
                }
                row += cnt;
                tok_nums[le] += cnt;
                ep_counts[(tt * t->my_L + le) * t->R + src] = (int32_t)row;
            }
        if (out->tp_recv_counts && p->t.tpw > 1)
            ((int32_t *)out->tp_recv_counts->data)[tt] = (int32_t)(row - block_start);
    }
    if (p->t.tpw == 1 && out->tp_recv_counts && out->tp_recv_counts->shape[0] == 1)
        ((int32_t *)out->tp_recv_counts->data)[0] = (int32_t)row;
    recv_ctx rc = {p, &lay, segs, out};
    mm_dc_run_tasks(ns, recv_task, &rc, (size_t)row * p->row_bytes);
    *rows_out = row;
    st = MM_OK;
fail:
    free(items);
    free(counts);
    free(bases);
    free(segs);
    return st;
}

mm_status mm_dispatch_v3(mm_dc_workspace *ws, const mm_dispatch_v3_inputs *in, const mm_dc_attrs *attrs,
                         const mm_dispatch_v3_outputs *out, int64_t *rows_out, mm_error *err) {
    if (rows_out) *rows_out = 0;
    if (!ws) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "ws (workspace) is NULL");
    dispatch_plan p;
    memset(&p, 0, sizeof p);
    mm_error local = {MM_OK, ""};
    mm_status st = out ? dispatch_check(ws->comm, in, attrs, out, &p, &local)
                       : mm_fail(&local, MM_ERR_INVALID_ARGUMENT, "outputs is NULL");
    dc_call call;
    st = mm_dc_call_begin(ws->comm, st, &local, attrs, p.bs, p.h, p.k, p.x_dtype, p.mask.kind,
                          in ? in->elastic_info : NULL, "dispatch_v3", &call, err);
    if (st) return st;
    int64_t rows = 0;
    if ((st = exchange(ws, &p, &call, in, out, &rows, err))) return st;
    if (attrs->expert_token_nums_type == MM_DC_TOKEN_NUMS_CUMULATIVE) {
        int64_t *n = out->expert_token_nums->data;
        for (int64_t le = 1; le < p.t.my_L; le++) n[le] += n[le - 1];
    }
    if (rows_out) *rows_out = rows;
    return MM_OK;
}
