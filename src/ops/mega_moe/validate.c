/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/validate.c: mm_mega_moe_plan: every rule of docs/mega_moe.md, Semantics, "Validation", checked
 * before any token moves, with the same verdict on every rank.
 *
 * Three steps: (1) local checks of this rank's attributes, weights, inputs and outputs, including the
 * counting pass over topk_ids; (2) one allgather of every rank's verdict, attributes and counts, so one
 * rank's error becomes everybody's (the lowest failing rank's, as mm_comm_agree reports it); (3) the
 * cross-rank rules, computed identically on every rank from the gathered records: attributes equal
 * (min == max of each), and the rows each rank would receive (from the count matrix) within capacity. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "format/format_table.h"
#include "ops/common/exchange.h"
#include "ops/common/tensor_check.h"
#include "ops/mega_moe/buffer.h"
#include "ops/mega_moe/layout.h"
#include "ops/mega_moe/plan.h"
#include "ops/mega_moe/weights.h"

#define DT(d) MM_OP_DTYPE(d)

static mm_status check_attrs(const mm_mega_moe_buffer *buf, const mm_mega_moe_weights *w,
                             const mm_mega_moe_attrs *a, mm_moe_call *c, mm_error *err) {
    mm_status st;
    int64_t H = buf->sizing.hidden, I = buf->sizing.intermediate_hidden;
    if (w->hidden != H || w->inter != I || w->local_experts != buf->local_experts)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weights were made for H = %" PRId64 ", I = %" PRId64 ", E / R = %" PRId64
                       ", the buffer has %" PRId64 ", %" PRId64 ", %" PRId64,
                       w->hidden, w->inter, w->local_experts, H, I, buf->local_experts);
    if ((st = mm_moe_check_compute_attrs(&w->routed, &w->shared, H, I, a, c, err)) != MM_OK) return st;
    int64_t rps = a->rank_num_per_server, R = buf->world;
    if (rps < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "rank_num_per_server = %" PRId64 " is negative", rps);
    c->layered = rps > 0 && rps < R;
    if (c->layered && R % rps != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "rank_num_per_server = %" PRId64 " must divide ep_world_size = %" PRId64
                       " (layered topology)",
                       rps, R);
    switch (a->combine_comm_mode) {
    case MM_MEGA_MOE_COMBINE_COMM_DIRECT: break;
    case MM_MEGA_MOE_COMBINE_COMM_FLAT:
    case MM_MEGA_MOE_COMBINE_COMM_LAYERED:
        if ((a->combine_comm_mode == MM_MEGA_MOE_COMBINE_COMM_LAYERED) != c->layered ||
            a->combine_quant_mode != MM_MEGA_MOE_COMBINE_QUANT_NONE)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "combine_comm_mode = %d needs a %s topology and combine_quant_mode 0 (have "
                           "rank_num_per_server = %" PRId64 " of %" PRId64
                           " ranks: %s; combine_quant_mode = %d)",
                           a->combine_comm_mode,
                           a->combine_comm_mode == MM_MEGA_MOE_COMBINE_COMM_LAYERED ? "layered" : "flat", rps,
                           R, c->layered ? "layered" : "flat", a->combine_quant_mode);
        break;
    default:
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "combine_comm_mode = %d is not 0, 1 or 2",
                       a->combine_comm_mode);
    }
    c->group_size = a->combine_comm_mode == MM_MEGA_MOE_COMBINE_COMM_LAYERED ? rps : 1;
    return MM_OK;
}

/* Inputs and outputs, and the counting pass (counts has E + 2 entries: per expert, then BS, active). */
static mm_status check_inputs(const mm_mega_moe_buffer *buf, const mm_mega_moe_inputs *in,
                              const mm_mega_moe_outputs *out, mm_moe_call *c, int64_t *counts, int32_t *stamp,
                              mm_error *err) {
    mm_status st;
    int64_t H = buf->sizing.hidden, K = buf->sizing.topk, E = buf->sizing.moe_expert_num;
    if (!in->x || !in->topk_ids || !in->topk_weights)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "inputs x, topk_ids and topk_weights are required");
    const mm_tensor *x = in->x;
    int64_t bs = x->ndim >= 1 ? x->shape[0] : -1;
    if (bs < 0 || x->ndim != 2)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "x must be 2-D (BS, H), has %d dims", x->ndim);
    if (bs > buf->sizing.num_max_tokens_per_rank)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "x has BS = %" PRId64 " rows, above num_max_tokens_per_rank = %" PRId64, bs,
                       buf->sizing.num_max_tokens_per_rank);
    mm_dtype xd = c->prequantized ? c->dispatch_dtype : MM_DTYPE_BF16;
    uint64_t xmask = DT(xd);
    if ((st = mm_op_check_shaped(
             x, "x", xmask, 2, bs, H,
             c->prequantized ? "(BS, H) in dispatch_quant_out_dtype, pre-quantized" : "(BS, H) BF16", err)) !=
        MM_OK)
        return st;
    if (c->prequantized) {
        if (!in->scales)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "scales is required with pre-quantized x (dispatch_quant_mode 0, "
                           "dispatch_quant_out_dtype %s)",
                           mm_dtype_name(c->dispatch_dtype));
        st = mm_op_check_shaped(in->scales, "scales", DT(MM_DTYPE_E8M0) | DT(MM_DTYPE_U8), 2, bs,
                                (H + 31) / 32, "(BS, ceil(H/32)) E8M0", err);
        if (st != MM_OK) return st;
    } else if (in->scales) {
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "scales is given but x is not pre-quantized (pass NULL)");
    }
    if ((st = mm_op_check_shaped(in->topk_ids, "topk_ids", DT(MM_DTYPE_I32), 2, bs, K, "(BS, K) INT32",
                                 err)) != MM_OK)
        return st;
    st = mm_op_check_shaped(in->topk_weights, "topk_weights", DT(MM_DTYPE_F32) | DT(MM_DTYPE_BF16), 2, bs, K,
                            "(BS, K) F32 or BF16", err);
    if (st != MM_OK) return st;
    c->bf16_weights = in->topk_weights->dtype == MM_DTYPE_BF16;
    c->mask = NULL;
    if (in->x_active_mask) {
        st = mm_op_check_shaped(in->x_active_mask, "x_active_mask", DT(MM_DTYPE_BOOL) | DT(MM_DTYPE_I8), 1,
                                bs, 0, "(BS,) BOOL or INT8", err);
        if (st != MM_OK) return st;
        c->mask = in->x_active_mask->data;
    }
    if (out) {
        if (!out->y || !out->expert_token_nums)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "outputs y and expert_token_nums are required");
        if ((st = mm_op_check_shaped(out->y, "y", DT(MM_DTYPE_BF16), 2, bs, H, "(BS, H) BF16", err)) != MM_OK)
            return st;
        st = mm_op_check_shaped(out->expert_token_nums, "expert_token_nums", DT(MM_DTYPE_I32), 1,
                                buf->local_experts, 0, "(E / R,) INT32", err);
        if (st != MM_OK) return st;
    }
    const int32_t *ids = in->topk_ids->data;
    int64_t active = 0;
    memset(counts, 0, (size_t)(E + 2) * sizeof *counts);
    for (int64_t e = 0; e < E; e++) stamp[e] = -1;
    for (int64_t i = 0; i < bs; i++) {
        if (c->mask && !c->mask[i]) continue;
        active++;
        for (int64_t k = 0; k < K; k++) {
            int32_t id = ids[i * K + k];
            if (id < 0 || id >= E)
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "topk_ids[%" PRId64 "][%" PRId64 "] = %d is outside [0, %" PRId64 ")", i, k,
                               (int)id, E);
            if (stamp[id] == (int32_t)i) {
                int64_t j = 0;
                while (ids[i * K + j] != id) j++;
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "topk_ids[%" PRId64 "][%" PRId64 "] = %d repeats topk_ids[%" PRId64
                               "][%" PRId64 "] (ids of a row must be unique)",
                               i, k, (int)id, i, j);
            }
            stamp[id] = (int32_t)i;
            counts[id]++;
        }
    }
    counts[E] = bs;
    counts[E + 1] = active;
    c->bs = bs;
    c->active_rows = active;
    return MM_OK;
}

/* The attributes every rank must pass identically, compared as integers (floats by bit pattern). The
 * transpose flags are not among them: they describe how one rank's weights are stored, which packing
 * removes, so ranks may differ there. The shared dtype enters twice, with different sentinels for "no
 * shared experts", so that a rank without shared experts differs from one with them in min and max. */
enum { N_ATTR = 16 };
static const char *const attr_names[N_ATTR] = {"dispatch_quant_mode",
                                               "dispatch_quant_out_dtype",
                                               "shared_expert_quant_out_dtype",
                                               "combine_quant_mode",
                                               "activation",
                                               "activation_params (count)",
                                               "activation_params[0]",
                                               "activation_params[1]",
                                               "activation_params[2]",
                                               "activation_out_dtype",
                                               "topk_weights_type",
                                               "combine_comm_mode",
                                               "rank_num_per_server",
                                               "weight1 dtype (routed)",
                                               "shared weight dtype",
                                               "shared weight dtype"};

static void attr_vector(const mm_mega_moe_attrs *a, const mm_mega_moe_weights *w, int64_t *v) {
    int64_t p[3] = {0, 0, 0};
    for (int i = 0; i < a->activation_param_count && i < 3; i++) {
        uint32_t bits;
        memcpy(&bits, &a->activation_params[i], 4);
        p[i] = bits;
    }
    int64_t shared = w->shared.count > 0 ? (int64_t)w->shared.dtype : -1;
    int64_t vals[N_ATTR] = {a->dispatch_quant_mode,
                            a->dispatch_quant_out_dtype,
                            a->shared_expert_quant_out_dtype,
                            a->combine_quant_mode,
                            a->activation,
                            a->activation_param_count,
                            p[0],
                            p[1],
                            p[2],
                            a->activation_out_dtype,
                            a->topk_weights_type,
                            a->combine_comm_mode,
                            a->rank_num_per_server,
                            w->routed.dtype,
                            shared >= 0 ? shared : INT64_MAX,
                            shared >= 0 ? shared : INT64_MIN};
    memcpy(v, vals, sizeof vals);
}

/* What every rank contributes to the one exchange of a call (ops/common/exchange.h): its attributes,
 * how many received rows its workspace holds, then, as payload, its row of the count matrix. */
enum { F_WS_ROWS = N_ATTR, N_FIELDS };

size_t mm_moe_check_record_bytes(int64_t E) {
    return mm_op_exchange_record_bytes(N_FIELDS, (size_t)MM_MOE_COUNT_STRIDE(E) * sizeof(int64_t));
}

mm_status mm_moe_validate(mm_mega_moe_buffer *buf, const mm_mega_moe_weights *weights,
                          const mm_mega_moe_attrs *attrs, const mm_mega_moe_inputs *in,
                          const mm_mega_moe_outputs *out, mm_moe_call *c, mm_moe_ws_rows_fn ws_rows,
                          mm_error *err) {
    mm_error local;
    mm_error_clear(&local);
    memset(c, 0, sizeof *c);
    if (!buf) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "buffer is NULL");
    int64_t E = buf->sizing.moe_expert_num, R = buf->world, stride = MM_MOE_COUNT_STRIDE(E);
    int64_t *counts = calloc((size_t)(R * stride), sizeof *counts);
    int32_t *stamp = malloc((size_t)E * sizeof *stamp);
    mm_status st = MM_OK;
    if (!counts || !stamp)
        st = mm_fail(&local, MM_ERR_OUT_OF_MEMORY, "count matrix: out of memory");
    else if (!weights || !attrs || !in)
        st = mm_fail(&local, MM_ERR_INVALID_ARGUMENT, "weights, attrs and inputs must not be NULL");
    if (st == MM_OK) st = check_attrs(buf, weights, attrs, c, &local);
    if (st == MM_OK) st = check_inputs(buf, in, out, c, counts + buf->rank * stride, stamp, &local);
    free(stamp);
    /* One exchange carries the verdicts, the attributes and the counts (it was agree, two allreduces
     * and an allgather: each collective of rank-threads on 2 cores can wait a time slice for a peer).
     * The records live in the buffer, so that a rank short of memory still sends its verdict. */
    int64_t fields[N_FIELDS];
    if (st == MM_OK) {
        attr_vector(attrs, weights, fields);
        fields[F_WS_ROWS] = ws_rows ? ws_rows(buf, weights, c) : INT64_MAX;
    }
    mm_op_exchange x = {.local = st,
                        .message = local.message,
                        .fields = st == MM_OK ? fields : NULL,
                        .nfields = N_FIELDS,
                        .ncompare = N_ATTR,
                        .payload = st == MM_OK ? counts + buf->rank * stride : NULL,
                        .payload_bytes = (size_t)stride * sizeof *counts,
                        .area = buf->check_area};
    st = mm_op_exchange_run(buf->comm, &x, &local);
    if (st != MM_OK) goto fail;
    for (int64_t r = 0; r < R; r++)
        memcpy(counts + r * stride, mm_op_exchange_payload_of(&x, (int)r), (size_t)stride * sizeof *counts);
    /* Attributes equal on all ranks. */
    const int64_t *lo = x.lo, *hi = x.hi;
    for (int i = 0; i < N_ATTR; i++) {
        int differ = lo[i] != hi[i];
        if (i == 14) differ = lo[14] != INT64_MAX && lo[14] != hi[15]; /* among ranks with shared experts */
        if (i == 15) continue;
        if (differ) {
            st = mm_fail(&local, MM_ERR_INVALID_ARGUMENT,
                         "attribute %s differs between ranks (values from %" PRId64 " to %" PRId64
                         "): all ranks must pass the same",
                         attr_names[i], lo[i], i == 14 ? hi[15] : hi[i]);
            goto fail;
        }
    }
    int64_t El = buf->local_experts;
    for (int64_t d = 0; d < R; d++) {
        int64_t rows = 0;
        for (int64_t s = 0; s < R; s++)
            for (int64_t j = 0; j < El; j++) rows += counts[s * stride + d * El + j];
        if (d == buf->rank) c->recv_rows = rows;
        if (rows > c->max_recv_rows) c->max_recv_rows = rows;
        if (rows > mm_op_exchange_fields_of(&x, (int)d)[F_WS_ROWS]) c->workspace_grows = 1;
        if (rows > buf->recv_capacity) {
            st = mm_fail(&local, MM_ERR_INVALID_ARGUMENT,
                         "rank %" PRId64 " would receive %" PRId64 " rows, above %s = %" PRId64
                         " (rows are never dropped)",
                         d, rows,
                         buf->sizing.max_recv_token_num > 0 ? "max_recv_token_num" : "the automatic capacity",
                         buf->recv_capacity);
            goto fail;
        }
    }
    c->counts = counts;
    return MM_OK;
fail:
    free(counts);
    c->counts = NULL;
    return mm_fail(err, st, "%s", local.message);
}

mm_status mm_mega_moe_plan(mm_mega_moe_buffer *buffer, const mm_mega_moe_weights *weights,
                           const mm_mega_moe_attrs *attrs, const mm_mega_moe_inputs *inputs,
                           mm_mega_moe_plan_info *info, mm_error *err) {
    mm_moe_call c;
    mm_status st = mm_moe_validate(buffer, weights, attrs, inputs, NULL, &c, NULL, err);
    if (st != MM_OK) return st;
    if (info) {
        info->scenario = mm_moe_scenario_name(c.routed.scenario);
        info->shared_scenario = c.has_shared ? mm_moe_scenario_name(c.shared.scenario) : "none";
        info->bs = c.bs;
        info->active_rows = c.active_rows;
        info->recv_rows = c.recv_rows;
        info->max_recv_rows = c.max_recv_rows;
        info->recv_capacity = buffer->recv_capacity;
        info->workspace_bytes = mm_moe_layout_bytes(buffer, weights, &c);
    }
    free(c.counts);
    return MM_OK;
}

/* The attributes a caller starts from: no quantization, swiglu, weights at combine, direct combine. */
mm_mega_moe_attrs mm_mega_moe_default_attrs(void) {
    return (mm_mega_moe_attrs){.dispatch_quant_out_dtype = MM_DTYPE_INVALID,
                               .shared_expert_quant_out_dtype = MM_DTYPE_INVALID,
                               .activation_out_dtype = MM_DTYPE_INVALID,
                               .activation = MM_MEGA_MOE_SWIGLU};
}
