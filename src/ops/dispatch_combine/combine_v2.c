/* SPDX-License-Identifier: Apache-2.0 */
/* ops/dispatch_combine/combine_v2.c: MoE Distribute Combine + Add + RMSNorm V2.
 *
 * One data phase on the combine symmetric buffer. Each token's home rank owns slots (token, k) for its
 * routed pairs and (token, K + s) for its shared experts, one BF16 row each, and with TP one set of
 * slots per TP rank of the sender. Every rank writes each row of expand_x into the slot its
 * assist_info names on its source rank (straight into the peer's memory when reachable, else by put),
 * raises the peers' signals and waits for all. With TP, the TP rank t of a destination pair sends
 * both blocks, so the two partial rows of each (token, k) meet at the source in slots t = 0 and 1;
 * their F32 sum rounded to BF16 is the reduce-scatter of the page. The home rank then computes each
 * token alone, in a fixed order, so the bits do not depend on timing or thread count. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
#include "ops/dispatch_combine/dc_internal.h"

typedef struct combine_plan {
    dc_topology t;
    dc_mask mask;
    int64_t bs, h, k, rows, bs_bound;
    int64_t block_rows[2]; /* rows of each TP block */
    const uint16_t *expand_x, *residual, *gamma, *shared_x, *ori_x, *const_v;
    const int32_t *ids, *assist;
    const float *weights;
    const void *alpha1, *alpha2;
    mm_dtype alpha_dtype;
    int alpha_2d;
    float eps;
} combine_plan;

/* (Bs, H) or (Bs, 1, H) BF16. */
static mm_status check_rows(const mm_tensor *t, const char *name, int64_t bs, int64_t h, int output,
                            mm_error *err) {
    mm_status st = mm_op_check_present(t, name, MM_OP_WORDS_DC, err);
    if (st) return st;
    int nd = t->ndim == 3 ? 3 : 2;
    st = mm_op_check_tensor(t, name, MM_DTYPE_BF16, nd, err);
    if (st) return st;
    if (t->shape[0] != bs || t->shape[nd - 1] != h || (nd == 3 && t->shape[1] != 1))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s must have shape (Bs, 1, H) or (Bs, H) with Bs = %" PRId64 ", H = %" PRId64 "%s",
                       name, bs, h, output ? "" : " (Bs from expert_ids, H from residual_x)");
    return MM_OK;
}

static mm_status check_alpha(const mm_tensor *a, const char *name, int64_t n, int64_t h, mm_error *err) {
    if (!a)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s is required when const_expert_num = %" PRId64 " > 0",
                       name, n);
    if (a->dtype != MM_DTYPE_F32 && a->dtype != MM_DTYPE_BF16)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s has dtype %s, expected f32 or bf16", name,
                       mm_dtype_name(a->dtype));
    mm_status st = mm_op_check_tensor(a, name, a->dtype, a->ndim == 2 ? 2 : 1, err);
    if (st) return st;
    if (a->shape[0] != n || (a->ndim == 2 && a->shape[1] != h))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s must have shape (const_expert_num,) = (%" PRId64
                       ",) or (const_expert_num, H) = (%" PRId64 ", %" PRId64 ")",
                       name, n, n, h);
    return MM_OK;
}

static mm_status check_handoff(const mm_combine_v2_inputs *in, const mm_dc_attrs *attrs, combine_plan *p,
                               mm_error *err) {
    const dc_topology *t = &p->t;
    int64_t n_counts = t->R * t->tpw * t->my_L;
    mm_status st = mm_op_check_tensor(in->ep_send_counts, "ep_send_counts", MM_DTYPE_I32, 1, err);
    if (st) return st;
    if (in->ep_send_counts->shape[0] != n_counts)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "ep_send_counts has %" PRId64
                       " entries, expected ep_world_size x max(tp_world_size, 1) x "
                       "local_expert_num = %" PRId64,
                       in->ep_send_counts->shape[0], n_counts);
    const int32_t *c = in->ep_send_counts->data;
    for (int64_t i = 0; i < n_counts; i++)
        if (c[i] < (i ? c[i - 1] : 0))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "ep_send_counts[%" PRId64 "] = %d is below %s (it is an inclusive prefix sum)", i,
                           c[i], i ? "the entry before it" : "0");
    p->rows = c[n_counts - 1];
    int64_t per_block = t->my_L * t->R;
    p->block_rows[0] = c[per_block - 1];
    p->block_rows[1] = t->tpw > 1 ? p->rows - p->block_rows[0] : 0;
    if (attrs->tp_world_size == 2 && !in->tp_send_counts)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tp_send_counts is required with tp_world_size = 2");
    if (in->tp_send_counts) {
        if ((st = mm_op_check_tensor(in->tp_send_counts, "tp_send_counts", MM_DTYPE_I32, 1, err))) return st;
        if (in->tp_send_counts->shape[0] != attrs->tp_world_size)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "tp_send_counts has %" PRId64 " entries, expected tp_world_size = %" PRId64,
                           in->tp_send_counts->shape[0], attrs->tp_world_size);
        const int32_t *tc = in->tp_send_counts->data;
        for (int64_t b = 0; b < attrs->tp_world_size; b++)
            if (tc[b] != p->block_rows[b] + (t->tpw == 1 ? p->block_rows[1] : 0))
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "tp_send_counts[%" PRId64 "] = %d but ep_send_counts gives %" PRId64
                               " rows for that TP block",
                               b, tc[b], p->block_rows[b]);
    }
    if ((st = mm_op_check_tensor(in->expand_x, "expand_x", MM_DTYPE_BF16, 2, err))) return st;
    if (in->expand_x->shape[0] < p->rows || in->expand_x->shape[1] != p->h)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "expand_x has shape (%" PRId64 ", %" PRId64 "), expected at least %" PRId64
                       " rows (ep_send_counts' total) of H = %" PRId64,
                       in->expand_x->shape[0], in->expand_x->shape[1], p->rows, p->h);
    if ((st = mm_op_check_tensor(in->assist_info_for_combine, "assist_info_for_combine", MM_DTYPE_I32, 2,
                                 err)))
        return st;
    if (in->assist_info_for_combine->shape[0] < p->rows || in->assist_info_for_combine->shape[1] != 3)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "assist_info_for_combine has shape (%" PRId64 ", %" PRId64 "), expected (>= %" PRId64
                       ", 3)",
                       in->assist_info_for_combine->shape[0], in->assist_info_for_combine->shape[1], p->rows);
    const int32_t *a = in->assist_info_for_combine->data;
    int64_t k_lo = 0, k_hi = p->k;
    if (t->is_shared) {
        k_lo = p->k + t->my_new / (t->shared_ranks / t->S);
        k_hi = k_lo + 1;
    }
    for (int64_t j = 0; j < p->rows; j++) {
        const int32_t *r = a + j * 3;
        if (r[0] < 0 || r[0] >= t->R_eff || r[1] < 0 || r[1] >= p->bs_bound || r[2] < k_lo || r[2] >= k_hi)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "assist_info_for_combine[%" PRId64
                           "] = (%d, %d, %d) is not (source rank in [0, %" PRId64 "), token in [0, %" PRId64
                           "), k in [%" PRId64 ", %" PRId64 "))",
                           j, r[0], r[1], r[2], t->R_eff, p->bs_bound, k_lo, k_hi);
    }
    p->expand_x = in->expand_x->data;
    p->assist = a;
    return MM_OK;
}

static mm_status combine_check(mm_comm *comm, const mm_combine_v2_inputs *in, const mm_dc_attrs *attrs,
                               const mm_combine_v2_outputs *out, combine_plan *p, mm_error *err) {
    memset(p, 0, sizeof *p);
    if (!in) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "inputs is NULL");
    static const char *const reserved[] = {"activation_scale", "weight_scale", "group_list", "expand_scales"};
    const mm_tensor *res[] = {in->activation_scale, in->weight_scale, in->group_list, in->expand_scales};
    for (int i = 0; i < 4; i++)
        if (res[i])
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s is a reserved input and must be absent (NULL)",
                           reserved[i]);
    mm_status st = mm_dc_check_attrs(attrs, 1, &p->t, err);
    if (st) return st;
    if ((st = mm_dc_check_elastic(in->elastic_info, attrs, comm, &p->t, err))) return st;
    if ((st = mm_dc_check_expert_ids(in->expert_ids, &p->t, &p->bs, &p->k, err))) return st;
    p->bs_bound = mm_dc_bs_bound(attrs, p->bs);
    if (attrs->global_bs && p->bs > p->bs_bound)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "Bs = %" PRId64 " exceeds global_bs / ep_world_size = %" PRId64, p->bs, p->bs_bound);
    if ((st = mm_op_check_present(in->residual_x, "residual_x", MM_OP_WORDS_DC, err))) return st;
    p->h = in->residual_x->ndim >= 1 ? in->residual_x->shape[in->residual_x->ndim - 1] : 0;
    if (p->h < 1 || p->h > DC_MAX_H)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "residual_x's last dimension H = %" PRId64 " is outside [1, %d]", p->h, DC_MAX_H);
    if ((st = check_rows(in->residual_x, "residual_x", p->bs, p->h, 0, err))) return st;
    if ((st = mm_op_check_tensor(in->gamma, "gamma", MM_DTYPE_BF16, 1, err))) return st;
    if (in->gamma->shape[0] != p->h)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "gamma has %" PRId64 " entries, expected H = %" PRId64,
                       in->gamma->shape[0], p->h);
    if ((st = mm_op_check_tensor(in->expert_scales, "expert_scales", MM_DTYPE_F32, 2, err))) return st;
    if (in->expert_scales->shape[0] != p->bs || in->expert_scales->shape[1] != p->k)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "expert_scales has shape (%" PRId64 ", %" PRId64 "), expected (Bs, K) = (%" PRId64
                       ", %" PRId64 ")",
                       in->expert_scales->shape[0], in->expert_scales->shape[1], p->bs, p->k);
    if ((st = mm_dc_check_mask(in->x_active_mask, p->bs, p->k, &p->mask, err))) return st;
    if (in->shared_expert_x && (st = check_rows(in->shared_expert_x, "shared_expert_x", p->bs, p->h, 0, err)))
        return st;
    if (p->t.C + p->t.N > 0 && !in->ori_x)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "ori_x is required when copy_expert_num (%" PRId64 ") or const_expert_num (%" PRId64
                       ") > 0",
                       p->t.C, p->t.N);
    if (in->ori_x && (st = check_rows(in->ori_x, "ori_x", p->bs, p->h, 0, err))) return st;
    if (p->t.N > 0) {
        if ((st = check_alpha(in->const_expert_alpha_1, "const_expert_alpha_1", p->t.N, p->h, err)))
            return st;
        if ((st = check_alpha(in->const_expert_alpha_2, "const_expert_alpha_2", p->t.N, p->h, err)))
            return st;
        if (in->const_expert_alpha_1->ndim != in->const_expert_alpha_2->ndim ||
            in->const_expert_alpha_1->dtype != in->const_expert_alpha_2->dtype)
            return mm_fail(
                err, MM_ERR_INVALID_ARGUMENT,
                "const_expert_alpha_1 (%dD %s) and const_expert_alpha_2 (%dD %s) must have the same form",
                in->const_expert_alpha_1->ndim, mm_dtype_name(in->const_expert_alpha_1->dtype),
                in->const_expert_alpha_2->ndim, mm_dtype_name(in->const_expert_alpha_2->dtype));
        if ((st = mm_op_check_tensor(in->const_expert_v, "const_expert_v", MM_DTYPE_BF16, 2, err))) return st;
        if (in->const_expert_v->shape[0] != p->t.N || in->const_expert_v->shape[1] != p->h)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "const_expert_v has shape (%" PRId64 ", %" PRId64
                           "), expected (const_expert_num, H) = (%" PRId64 ", %" PRId64 ")",
                           in->const_expert_v->shape[0], in->const_expert_v->shape[1], p->t.N, p->h);
        p->alpha1 = in->const_expert_alpha_1->data;
        p->alpha2 = in->const_expert_alpha_2->data;
        p->alpha_dtype = in->const_expert_alpha_1->dtype;
        p->alpha_2d = in->const_expert_alpha_1->ndim == 2;
        p->const_v = in->const_expert_v->data;
    }
    if ((st = check_handoff(in, attrs, p, err))) return st;
    p->ids = in->expert_ids->data;
    p->weights = in->expert_scales->data;
    p->residual = in->residual_x->data;
    p->gamma = in->gamma->data;
    p->shared_x = in->shared_expert_x ? in->shared_expert_x->data : NULL;
    p->ori_x = in->ori_x ? in->ori_x->data : NULL;
    p->eps = attrs->norm_eps;
    if (!out) return MM_OK;
    if ((st = check_rows(out->y, "y", p->bs, p->h, 1, err))) return st;
    if ((st = check_rows(out->x, "x", p->bs, p->h, 1, err))) return st;
    if ((st = mm_op_check_present(out->rstd, "rstd", MM_OP_WORDS_DC, err))) return st;
    if ((st = mm_op_check_tensor(out->rstd, "rstd", MM_DTYPE_F32, out->rstd->ndim, err))) return st;
    if (mm_tensor_numel(out->rstd) != p->bs || out->rstd->ndim < 1 || out->rstd->ndim > 3 ||
        out->rstd->shape[0] != p->bs)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "rstd must have shape (Bs, 1, 1) or (Bs,) with Bs = %" PRId64, p->bs);
    return MM_OK;
}

mm_status mm_combine_v2_plan(const mm_combine_v2_inputs *in, const mm_dc_attrs *attrs, mm_tensor *y,
                             mm_tensor *rstd, mm_tensor *x, mm_error *err) {
    combine_plan p;
    mm_status st = combine_check(NULL, in, attrs, NULL, &p, err);
    if (st) return st;
    int64_t s[3] = {p.bs, 1, p.h}, r[3] = {p.bs, 1, 1};
    if (y) *y = mm_tensor_make(MM_DTYPE_BF16, 3, s, NULL);
    if (x) *x = mm_tensor_make(MM_DTYPE_BF16, 3, s, NULL);
    if (rstd) *rstd = mm_tensor_make(MM_DTYPE_F32, 3, r, NULL);
    return MM_OK;
}

mm_status mm_combine_v2_shapes_of(const mm_combine_v2_inputs *in, const mm_dc_attrs *attrs, mm_tensor *y,
                                  mm_tensor *rstd, mm_tensor *x, mm_error *err) {
    return mm_combine_v2_plan(in, attrs, y, rstd, x, err);
}

/* ---- the data phase ---- */

typedef struct send_ctx {
    const combine_plan *p;
    mm_symm *symm;
    int64_t slots; /* per TP part: bs_max x (K + S) */
    int64_t chunk;
    int direct;
    mm_status *task_status;
    mm_error *task_err;
} send_ctx;

static void send_task(void *ctx, int64_t task) {
    const send_ctx *c = ctx;
    const combine_plan *p = c->p;
    const dc_topology *t = &p->t;
    size_t rb = (size_t)p->h * 2;
    int64_t end = (task + 1) * c->chunk < p->rows ? (task + 1) * c->chunk : p->rows;
    for (int64_t j = task * c->chunk; j < end; j++) {
        const int32_t *a = p->assist + j * 3;
        int64_t block = j < p->block_rows[0] ? 0 : 1;
        int g = (int)(t->old_of_new[a[0]] * t->tpw + block);
        size_t off =
            ((size_t)(t->tp_rank * c->slots) + (size_t)a[1] * (size_t)(p->k + t->S) + (size_t)a[2]) * rb;
        const uint16_t *src = p->expand_x + (size_t)j * (size_t)p->h;
        if (c->direct) {
            memcpy((unsigned char *)mm_symm_peer_ptr(c->symm, g) + off, src, rb);
        } else if (c->task_status[task] == MM_OK) {
            c->task_status[task] = mm_symm_put(c->symm, g, off, src, rb, &c->task_err[task]);
        }
    }
}

typedef struct token_ctx {
    const combine_plan *p;
    const uint16_t *slots_base;
    int64_t slots;
    float *scratch; /* 2H floats per task */
    int64_t chunk;
    const mm_combine_v2_outputs *out;
} token_ctx;

static float alpha_at(const combine_plan *p, const void *a, int64_t i) {
    return p->alpha_dtype == MM_DTYPE_F32 ? ((const float *)a)[i]
                                          : mm_bf16_to_f32_inline(((const uint16_t *)a)[i]);
}

/* acc += w * (the expert row in slot (i, kk)), with the TP partial rows summed first. */
static void add_slot(const token_ctx *c, int64_t i, int64_t kk, float w, int weighted, float *acc) {
    const combine_plan *p = c->p;
    size_t at = ((size_t)i * (size_t)(p->k + p->t.S) + (size_t)kk) * (size_t)p->h;
    const uint16_t *r0 = c->slots_base + at;
    const uint16_t *r1 = r0 + (size_t)c->slots * (size_t)p->h;
    if (p->t.tpw > 1) {
        for (int64_t h = 0; h < p->h; h++) {
            float v = mm_bf16_to_f32_inline(
                mm_f32_to_bf16_inline(mm_bf16_to_f32_inline(r0[h]) + mm_bf16_to_f32_inline(r1[h])));
            acc[h] = weighted ? acc[h] + w * v : acc[h] + v;
        }
    } else if (weighted) {
        for (int64_t h = 0; h < p->h; h++) acc[h] = acc[h] + w * mm_bf16_to_f32_inline(r0[h]);
    } else {
        for (int64_t h = 0; h < p->h; h++) acc[h] = acc[h] + mm_bf16_to_f32_inline(r0[h]);
    }
}

static void const_expert(const combine_plan *p, int64_t c, const uint16_t *ori, float w, float *acc) {
    const uint16_t *v = p->const_v + (size_t)c * (size_t)p->h;
    float a1, a2;
    if (!p->alpha_2d) {
        a1 = alpha_at(p, p->alpha1, c);
        a2 = alpha_at(p, p->alpha2, c);
    } else {
        float d1 = 0.0f, d2 = 0.0f;
        for (int64_t h = 0; h < p->h; h++) {
            float o = mm_bf16_to_f32_inline(ori[h]);
            d1 = d1 + alpha_at(p, p->alpha1, c * p->h + h) * o;
            d2 = d2 + alpha_at(p, p->alpha2, c * p->h + h) * o;
        }
        float m = d1 > d2 ? d1 : d2;
        float e1 = expf(d1 - m), e2 = expf(d2 - m);
        a1 = e1 / (e1 + e2);
        a2 = e2 / (e1 + e2);
    }
    for (int64_t h = 0; h < p->h; h++) {
        float out = a1 * mm_bf16_to_f32_inline(ori[h]) + a2 * mm_bf16_to_f32_inline(v[h]);
        acc[h] = acc[h] + w * out;
    }
}

static void token_task(void *ctx, int64_t task) {
    const token_ctx *c = ctx;
    const combine_plan *p = c->p;
    const dc_topology *t = &p->t;
    float *acc = c->scratch + task * p->h;
    int64_t end = (task + 1) * c->chunk < p->bs ? (task + 1) * c->chunk : p->bs;
    uint16_t *y = c->out->y->data, *xo = c->out->x->data;
    float *rstd = c->out->rstd->data;
    for (int64_t i = task * c->chunk; i < end; i++) {
        size_t row = (size_t)i * (size_t)p->h;
        if (!mm_dc_token_active(&p->mask, i)) {
            memset(y + row, 0, (size_t)p->h * 2);
            memset(xo + row, 0, (size_t)p->h * 2);
            rstd[i] = 0.0f;
            continue;
        }
        for (int64_t h = 0; h < p->h; h++) acc[h] = 0.0f;
        const uint16_t *ori = p->ori_x ? p->ori_x + row : NULL;
        for (int64_t k = 0; k < p->k; k++) {
            if (!dc_pair_active(&p->mask, i, k)) continue;
            int64_t e = p->ids[i * p->k + k];
            float w = p->weights[i * p->k + k];
            switch (dc_kind(t, e)) {
            case DC_ROUTED: add_slot(c, i, k, w, 1, acc); break;
            case DC_ZERO: break;
            case DC_COPY:
                for (int64_t h = 0; h < p->h; h++) acc[h] = acc[h] + w * mm_bf16_to_f32_inline(ori[h]);
                break;
            case DC_CONST: const_expert(p, e - t->routed_experts - t->Z - t->C, ori, w, acc); break;
            }
        }
        for (int64_t s = 0; s < t->S; s++) add_slot(c, i, p->k + s, 1.0f, 0, acc);
        if (p->shared_x)
            for (int64_t h = 0; h < p->h; h++) acc[h] = acc[h] + mm_bf16_to_f32_inline(p->shared_x[row + h]);
        double sumsq = 0.0;
        for (int64_t h = 0; h < p->h; h++) {
            float x = acc[h] + mm_bf16_to_f32_inline(p->residual[row + h]);
            acc[h] = x;
            xo[row + h] = mm_f32_to_bf16_inline(x);
            sumsq += (double)x * (double)x;
        }
        float r = 1.0f / sqrtf((float)(sumsq / (double)p->h) + p->eps);
        rstd[i] = r;
        for (int64_t h = 0; h < p->h; h++) {
            float n = mm_bf16_to_f32_inline(mm_f32_to_bf16_inline(acc[h] * r));
            y[row + h] = mm_f32_to_bf16_inline(n * mm_bf16_to_f32_inline(p->gamma[h]));
        }
    }
}

static mm_status exchange(mm_dc_workspace *ws, const combine_plan *p, const dc_call *call,
                          const mm_combine_v2_outputs *out, mm_error *err) {
    const dc_topology *t = &p->t;
    mm_comm *comm = ws->comm;
    int size = mm_comm_size(comm);
    int64_t slots = call->bs_max * (p->k + t->S);
    size_t bytes = dc_combine_bytes(t->tpw, call->bs_max, p->k, t->S, p->h);
    mm_status st = mm_op_symm_area_ensure(ws->comm, &ws->combine, bytes, MM_OP_GROW_HALF_AGAIN, err);
    if (st) return st;
    mm_symm *symm = ws->combine.symm;
    int direct = 1;
    for (int g = 0; g < size; g++)
        if (mm_comm_is_alive(comm, g) && !mm_symm_peer_ptr(symm, g)) direct = 0;
    int64_t chunk = 4, n_tasks = (p->rows + chunk - 1) / chunk;
    if (n_tasks > 64) {
        chunk = (p->rows + 63) / 64;
        n_tasks = (p->rows + chunk - 1) / chunk;
    }
    mm_status task_status[64];
    mm_error *task_err = calloc(64, sizeof *task_err);
    if (!task_err) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "combine: out of memory");
    for (int i = 0; i < 64; i++) task_status[i] = MM_OK;
    send_ctx sc = {p, symm, slots, chunk, direct, task_status, task_err};
    if (direct)
        mm_dc_run_tasks(n_tasks, send_task, &sc, (size_t)p->rows * (size_t)p->h * 2);
    else /* puts go through the backend one at a time */
        for (int64_t task = 0; task < n_tasks; task++) send_task(&sc, task);
    for (int64_t i = 0; i < n_tasks; i++)
        if (task_status[i] != MM_OK) {
            st = mm_fail(err, task_status[i], "combine: %s", task_err[i].message);
            free(task_err);
            return st;
        }
    free(task_err);
    for (int g = 0; g < size; g++)
        if (mm_comm_is_alive(comm, g) && (st = mm_symm_signal(symm, g, 1, err))) return st;
    ws->combine.epoch++;
    if ((st = mm_symm_wait_all(symm, ws->combine.epoch, err))) return st;

    int64_t tchunk = 1, t_tasks = p->bs;
    if (t_tasks > 64) {
        tchunk = (p->bs + 63) / 64;
        t_tasks = (p->bs + tchunk - 1) / tchunk;
    }
    if ((st = mm_dc_scratch_ensure(ws, (size_t)(t_tasks ? t_tasks : 1) * (size_t)p->h, err))) return st;
    token_ctx tc = {p, mm_symm_local(symm), slots, ws->scratch, tchunk, out};
    mm_dc_run_tasks(t_tasks, token_task, &tc, (size_t)p->bs * (size_t)(p->k + t->S) * (size_t)p->h * 2);
    return MM_OK;
}

mm_status mm_combine_v2(mm_dc_workspace *ws, const mm_combine_v2_inputs *in, const mm_dc_attrs *attrs,
                        const mm_combine_v2_outputs *out, mm_error *err) {
    if (!ws) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "ws (workspace) is NULL");
    combine_plan p;
    memset(&p, 0, sizeof p);
    mm_error local = {MM_OK, ""};
    mm_status st = out ? combine_check(ws->comm, in, attrs, out, &p, &local)
                       : mm_fail(&local, MM_ERR_INVALID_ARGUMENT, "outputs is NULL");
    dc_call call;
    st = mm_dc_call_begin(ws->comm, st, &local, attrs, p.bs, p.h, p.k, MM_DTYPE_BF16, p.mask.kind,
                          in ? in->elastic_info : NULL, "combine_add_rms_norm_v2", &call, err);
    if (st) return st;
    return exchange(ws, &p, &call, out, err);
}
