/* SPDX-License-Identifier: Apache-2.0 */
/* ref/mega_moe_ref.c: the global-view MegaMoE reference: dispatch, every expert, shared experts and the
 * combine orders of modes 0/1/2 (contract in ref/mega_moe_ref.h, rationale in docs/reference.md).
 *
 * Values do not depend on the order in which an expert processes its rows, so the reference walks the
 * experts one by one and, for each, all (home rank, row, k) slots routed to it; the expert output rows
 * are kept per slot on the home side, which is all the combine needs. */
#include "ref/mega_moe_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "megamoe/formats.h"
#include "ref/expert_ref.h"
#include "ref/format_ref.h"
#include "ref/mega_moe_ref_check.h"

/* Per-rank working state of one call. */
typedef struct rank_work {
    double *x_routed;    /* (bs, H) dispatched rows for the routed experts */
    float *scale_routed; /* (bs,) INT8 row scales */
    double *x_shared;    /* (bs, H) rows for the shared experts, or NULL: same as x_routed */
    float *scale_shared;
    uint16_t *routed_out; /* (bs, K, H) BF16 expert output row of each (row, k) slot */
    uint16_t *shared_out; /* (bs, S, H) */
    uint16_t *y;          /* (bs, H) result, copied to the caller's y only when everything succeeded */
    float *y_scale;       /* (bs, H) largest |summand| of the combine per element (mm_ref_rank_output) */
    int32_t *counts;      /* (E_l,) */
} rank_work;

static int row_active(const mm_ref_rank_input *in, int64_t i) {
    return !in->x_active_mask || in->x_active_mask[i];
}

static void work_free(rank_work *w, int64_t ranks) {
    if (!w) return;
    for (int64_t r = 0; r < ranks; r++) {
        free(w[r].x_routed);
        free(w[r].scale_routed);
        free(w[r].x_shared);
        free(w[r].scale_shared);
        free(w[r].routed_out);
        free(w[r].shared_out);
        free(w[r].y);
        free(w[r].y_scale);
        free(w[r].counts);
    }
    free(w);
}

/* calloc of at least one element, so that a zero-sized buffer is not mistaken for a failure. */
static void *alloc_zeroed(int64_t count, size_t size) {
    return calloc(count > 0 ? (size_t)count : 1, size);
}

static mm_status work_alloc(const mm_ref_attrs *a, const mm_ref_rank_input *inputs, int separate_shared,
                            rank_work *w, mm_error *err) {
    int64_t H = a->hidden, K = a->topk, local = a->expert_num / a->world_size;
    for (int64_t r = 0; r < a->world_size; r++) {
        int64_t bs = inputs[r].bs, S = inputs[r].shared.count;
        rank_work *rw = &w[r];
        rw->x_routed = alloc_zeroed(bs * H, sizeof(double));
        rw->scale_routed = alloc_zeroed(bs, sizeof(float));
        rw->routed_out = alloc_zeroed(bs * K * H, sizeof(uint16_t));
        rw->shared_out = alloc_zeroed(bs * S * H, sizeof(uint16_t));
        rw->y = alloc_zeroed(bs * H, sizeof(uint16_t));
        rw->y_scale = alloc_zeroed(bs * H, sizeof(float));
        rw->counts = alloc_zeroed(local, sizeof(int32_t));
        if (separate_shared && S > 0) {
            rw->x_shared = alloc_zeroed(bs * H, sizeof(double));
            rw->scale_shared = alloc_zeroed(bs, sizeof(float));
            if (!rw->x_shared || !rw->scale_shared) goto oom;
        }
        if (!rw->x_routed || !rw->scale_routed || !rw->routed_out || !rw->shared_out || !rw->y ||
            !rw->y_scale || !rw->counts)
            goto oom;
    }
    return MM_OK;
oom:
    return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "reference working buffers (hidden = %lld, topk = %lld)",
                   (long long)H, (long long)K);
}

/* Step 1: every active home row quantized once per plan (once more for the shared plan if it differs). */
static mm_status dispatch_all(const mm_ref_attrs *a, const mm_ref_rank_input *inputs,
                              const mm_ref_plan *routed, const mm_ref_plan *shared, rank_work *w,
                              mm_error *err) {
    int64_t H = a->hidden, scale_bytes = (H + 31) / 32;
    int64_t q_bytes = a->x_prequantized ? mm_dtype_row_bytes(a->dispatch_dtype, H) : 0;
    for (int64_t r = 0; r < a->world_size; r++) {
        const mm_ref_rank_input *in = &inputs[r];
        for (int64_t i = 0; i < in->bs; i++) {
            if (!row_active(in, i)) continue;
            const uint16_t *xb = a->x_prequantized ? NULL : in->x_bf16 + i * H;
            const uint8_t *xq = a->x_prequantized ? in->x_quant + i * q_bytes : NULL;
            const uint8_t *xs = a->x_prequantized ? in->x_scales + i * scale_bytes : NULL;
            mm_ref_row row = {w[r].x_routed + i * H, 1.0f};
            mm_status st = mm_ref_dispatch_row(routed, H, xb, xq, xs, &row, err);
            if (st != MM_OK)
                return mm_error_prefix(err, "rank %lld row %lld dispatch", (long long)r, (long long)i);
            w[r].scale_routed[i] = row.scale;
            if (w[r].x_shared) {
                mm_ref_row srow = {w[r].x_shared + i * H, 1.0f};
                st = mm_ref_dispatch_row(shared, H, xb, xq, xs, &srow, err);
                if (st != MM_OK)
                    return mm_error_prefix(err, "rank %lld row %lld shared input", (long long)r,
                                           (long long)i);
                w[r].scale_shared[i] = srow.scale;
            }
        }
    }
    return MM_OK;
}

/* Steps 2-6 for routed expert e (global id): every (home rank, row, k) slot routed to it. */
static mm_status run_routed_expert(const mm_ref_attrs *a, const mm_ref_rank_input *inputs,
                                   const mm_ref_plan *plan, int64_t e, rank_work *w, mm_error *err) {
    int64_t H = a->hidden, K = a->topk, local = a->expert_num / a->world_size;
    int64_t owner = e / local, index = e % local;
    mm_ref_expert ex;
    mm_status st = mm_ref_expert_load(&ex, plan, &inputs[owner].routed, index, a, err);
    if (st != MM_OK) return mm_error_prefix(err, "routed expert %lld", (long long)e);
    for (int64_t r = 0; r < a->world_size && st == MM_OK; r++) {
        const mm_ref_rank_input *in = &inputs[r];
        for (int64_t i = 0; i < in->bs && st == MM_OK; i++) {
            if (!row_active(in, i)) continue;
            for (int64_t k = 0; k < K && st == MM_OK; k++) {
                if (in->topk_ids[i * K + k] != e) continue;
                mm_ref_row row = {w[r].x_routed + i * H, w[r].scale_routed[i]};
                st = mm_ref_expert_row(&ex, &row, a->topk_weights_type == 1, in->topk_weights[i * K + k],
                                       w[r].routed_out + (i * K + k) * H, err);
                w[owner].counts[index]++;
            }
        }
    }
    mm_ref_expert_free(&ex);
    return st;
}

/* Step 7: shared expert s of rank r on all its active rows. */
static mm_status run_shared_expert(const mm_ref_attrs *a, const mm_ref_rank_input *in,
                                   const mm_ref_plan *plan, int64_t s, rank_work *rw, mm_error *err) {
    int64_t H = a->hidden, S = in->shared.count;
    double *x = rw->x_shared ? rw->x_shared : rw->x_routed;
    float *scale = rw->x_shared ? rw->scale_shared : rw->scale_routed;
    mm_ref_expert ex;
    mm_status st = mm_ref_expert_load(&ex, plan, &in->shared, s, a, err);
    if (st != MM_OK) return mm_error_prefix(err, "shared expert %lld", (long long)s);
    for (int64_t i = 0; i < in->bs && st == MM_OK; i++) {
        if (!row_active(in, i)) continue;
        mm_ref_row row = {x + i * H, scale[i]};
        st = mm_ref_expert_row(&ex, &row, 0, 1.0f, rw->shared_out + (i * S + s) * H, err);
    }
    mm_ref_expert_free(&ex);
    return st;
}

/* Scratch of the combine of one row. */
typedef struct combine_scratch {
    float *terms; /* (K, H): the F32 term of each k (w * O, or O with topk_weights_type 1) */
    float *acc, *partial;
    uint8_t *mx_q, *mx_scales;
} combine_scratch;

/* The F32 value of routed row O as it arrives home: BF16, or its MX round trip (combine quant 3/4). */
static mm_status arriving_row(const mm_ref_attrs *a, const uint16_t *o, combine_scratch *cs, float *out,
                              mm_error *err) {
    int64_t H = a->hidden;
    if (a->combine_quant_mode == 0) {
        for (int64_t n = 0; n < H; n++) out[n] = mm_ref_fmt_bf16_to_f32(o[n]);
        return MM_OK;
    }
    mm_dtype elem = a->combine_quant_mode == 3 ? MM_DTYPE_FP8_E5M2 : MM_DTYPE_FP8_E4M3FN;
    (void)err;
    mm_ref_fmt_mx_quantize_bf16(o, H, elem, cs->mx_q, cs->mx_scales);
    mm_ref_fmt_mx_dequantize(cs->mx_q, cs->mx_scales, H, elem, out);
    return MM_OK;
}

/* Step 8 for row i of home rank r: writes y (BF16) into rw->y. */
static mm_status combine_row(const mm_ref_attrs *a, const mm_ref_rank_input *in, rank_work *rw, int64_t i,
                             combine_scratch *cs, mm_error *err) {
    int64_t H = a->hidden, K = a->topk, S = in->shared.count, local = a->expert_num / a->world_size;
    uint16_t *y = rw->y + i * H;
    float *scale = rw->y_scale + i * H;
    if (!row_active(in, i)) {
        for (int64_t n = 0; n < H; n++) y[n] = 0;
        return MM_OK;
    }
    for (int64_t k = 0; k < K; k++) {
        float *t = cs->terms + k * H;
        mm_status st = arriving_row(a, rw->routed_out + (i * K + k) * H, cs, t, err);
        if (st != MM_OK) return st;
        if (a->topk_weights_type == 0) {
            float wk = in->topk_weights[i * K + k];
            for (int64_t n = 0; n < H; n++) t[n] = wk * t[n];
        }
    }
    for (int64_t n = 0; n < H; n++) {
        cs->acc[n] = 0.0f;
        scale[n] = 0.0f;
        for (int64_t k = 0; k < K; k++) scale[n] = fmaxf(scale[n], fabsf(cs->terms[k * H + n]));
    }
    if (a->combine_comm_mode == 0) {
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < H; n++) cs->acc[n] = cs->acc[n] + cs->terms[k * H + n];
    } else {
        /* groups: single ranks (mode 1) or domains of rank_num_per_server ranks (mode 2) */
        int64_t group_size = a->combine_comm_mode == 1 ? 1 : a->rank_num_per_server;
        int64_t groups = a->world_size / group_size;
        for (int64_t g = 0; g < groups; g++) {
            int any = 0;
            for (int64_t n = 0; n < H; n++) cs->partial[n] = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                if (in->topk_ids[i * K + k] / local / group_size != g) continue;
                any = 1;
                for (int64_t n = 0; n < H; n++) cs->partial[n] = cs->partial[n] + cs->terms[k * H + n];
            }
            if (!any) continue;
            for (int64_t n = 0; n < H; n++) {
                float p = mm_ref_fmt_bf16_round(cs->partial[n]);
                scale[n] = fmaxf(scale[n], fabsf(p));
                cs->acc[n] = cs->acc[n] + p;
            }
        }
    }
    for (int64_t s = 0; s < S; s++) {
        const uint16_t *o = rw->shared_out + (i * S + s) * H;
        for (int64_t n = 0; n < H; n++) {
            scale[n] = fmaxf(scale[n], fabsf(mm_ref_fmt_bf16_to_f32(o[n])));
            cs->acc[n] = cs->acc[n] + mm_ref_fmt_bf16_to_f32(o[n]);
        }
    }
    for (int64_t n = 0; n < H; n++) {
        y[n] = mm_ref_fmt_f32_to_bf16(cs->acc[n]);
        scale[n] = fmaxf(scale[n], fabsf(mm_ref_fmt_bf16_to_f32(y[n])));
    }
    return MM_OK;
}

static mm_status combine_all(const mm_ref_attrs *a, const mm_ref_rank_input *inputs, rank_work *w,
                             mm_error *err) {
    int64_t H = a->hidden, K = a->topk;
    mm_status st = MM_OK;
    combine_scratch cs = {alloc_zeroed(K * H, sizeof(float)), alloc_zeroed(H, sizeof(float)),
                          alloc_zeroed(H, sizeof(float)), alloc_zeroed(H, 1), alloc_zeroed((H + 31) / 32, 1)};
    if (!cs.terms || !cs.acc || !cs.partial || !cs.mx_q || !cs.mx_scales) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "reference combine scratch (hidden = %lld)", (long long)H);
        goto done;
    }
    for (int64_t r = 0; r < a->world_size && st == MM_OK; r++)
        for (int64_t i = 0; i < inputs[r].bs && st == MM_OK; i++) {
            st = combine_row(a, &inputs[r], &w[r], i, &cs, err);
            if (st != MM_OK) mm_error_prefix(err, "rank %lld row %lld combine", (long long)r, (long long)i);
        }
done:
    free(cs.terms);
    free(cs.acc);
    free(cs.partial);
    free(cs.mx_q);
    free(cs.mx_scales);
    return st;
}

mm_status mm_ref_mega_moe(const mm_ref_attrs *attrs, const mm_ref_rank_input *inputs,
                          mm_ref_rank_output *outputs, mm_error *err) {
    mm_ref_plan routed, shared;
    mm_status st = mm_ref_check(attrs, inputs, outputs, &routed, &shared, err);
    if (st != MM_OK) return st;
    int64_t R = attrs->world_size, local = attrs->expert_num / R;
    int separate_shared =
        shared.scenario != MM_REF_SCENARIO_INVALID && shared.input_dtype != routed.input_dtype;
    rank_work *w = calloc((size_t)R, sizeof *w);
    if (!w) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "reference state of %lld ranks", (long long)R);
    if ((st = work_alloc(attrs, inputs, separate_shared, w, err)) != MM_OK) goto done;
    if ((st = dispatch_all(attrs, inputs, &routed, &shared, w, err)) != MM_OK) goto done;
    for (int64_t e = 0; e < attrs->expert_num; e++)
        if ((st = run_routed_expert(attrs, inputs, &routed, e, w, err)) != MM_OK) goto done;
    for (int64_t r = 0; r < R; r++)
        for (int64_t s = 0; s < inputs[r].shared.count; s++)
            if ((st = run_shared_expert(attrs, &inputs[r], &shared, s, &w[r], err)) != MM_OK) goto done;
    if ((st = combine_all(attrs, inputs, w, err)) != MM_OK) goto done;
    for (int64_t r = 0; r < R; r++) {
        if (inputs[r].bs > 0)
            memcpy(outputs[r].y, w[r].y, (size_t)(inputs[r].bs * attrs->hidden) * sizeof(uint16_t));
        if (inputs[r].bs > 0 && outputs[r].y_scale)
            memcpy(outputs[r].y_scale, w[r].y_scale, (size_t)(inputs[r].bs * attrs->hidden) * sizeof(float));
        memcpy(outputs[r].expert_token_nums, w[r].counts, (size_t)local * sizeof(int32_t));
    }
done:
    work_free(w, R);
    return st;
}
