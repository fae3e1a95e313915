/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_dispatch_v3.c: the moe_distribute_dispatch_v3 case adapter (collective).
 *
 * inputs per rank: x, expert_ids, scales, x_active_mask, elastic_info; attributes of
 * docs/dispatch_combine.md (moe_expert_num required; ep_world_size defaults to ranks / max(tp, 1)).
 * outputs per rank: expand_x, dynamic_scales (quant_mode 2 only), assist_info_for_combine (exactly the
 * rows that arrived), expert_token_nums, ep_recv_counts, tp_recv_counts (tp_world_size > 0 only).
 * A rank removed by elastic scale-in has no tensors and no outputs. */
#include "case/case_dispatch_common.h"
#include "core/error.h"

static const char *const dispatch_inputs[] = {"x", "expert_ids", "scales", "x_active_mask", "elastic_info",
                                              NULL};
static const char *const dispatch_attributes[] = {"ep_world_size",
                                                  "moe_expert_num",
                                                  "tp_world_size",
                                                  "expert_shard_type",
                                                  "shared_expert_num",
                                                  "shared_expert_rank_num",
                                                  "quant_mode",
                                                  "global_bs",
                                                  "expert_token_nums_type",
                                                  "zero_expert_num",
                                                  "copy_expert_num",
                                                  "const_expert_num",
                                                  "comm_alg",
                                                  NULL};
static const char *const dispatch_outputs[] = {
    "expand_x",          "dynamic_scales", "assist_info_for_combine",
    "expert_token_nums", "ep_recv_counts", "tp_recv_counts"};
enum { IN_X, IN_IDS, IN_SCALES, IN_MASK, IN_ELASTIC };
enum { OUT_EXPAND, OUT_SCALES, OUT_ASSIST, OUT_TOKEN_NUMS, OUT_EP, OUT_TP };

static mm_status read_rank(mm_case_ctx *ctx, int64_t g, dcc_rank *r, mm_error *err) {
    mm_status st;
    if ((st = mm_case_input(ctx, g, "x", 1, MM_CASE_DTYPE(MM_DTYPE_BF16) | MM_CASE_DTYPE(MM_DTYPE_F16), 2, 2,
                            &r->in[IN_X], &r->has[IN_X], err)))
        return st;
    if ((st = mm_case_input(ctx, g, "expert_ids", 1, MM_CASE_DTYPE(MM_DTYPE_I32), 2, 2, &r->in[IN_IDS],
                            &r->has[IN_IDS], err)))
        return st;
    if ((st = mm_case_input(ctx, g, "scales", 0, MM_CASE_DTYPE(MM_DTYPE_F32), 2, 2, &r->in[IN_SCALES],
                            &r->has[IN_SCALES], err)))
        return st;
    if ((st = mm_case_input(ctx, g, "x_active_mask", 0, MM_CASE_DTYPE(MM_DTYPE_BOOL), 1, 2, &r->in[IN_MASK],
                            &r->has[IN_MASK], err)))
        return st;
    return mm_case_input(ctx, g, "elastic_info", 0, MM_CASE_DTYPE(MM_DTYPE_I32), 1, 1, &r->in[IN_ELASTIC],
                         &r->has[IN_ELASTIC], err);
}

static mm_dispatch_v3_inputs inputs_of(dcc_rank *r) {
    mm_dispatch_v3_inputs in = {&r->in[IN_X], &r->in[IN_IDS], r->has[IN_SCALES] ? &r->in[IN_SCALES] : NULL,
                                r->has[IN_MASK] ? &r->in[IN_MASK] : NULL,
                                r->has[IN_ELASTIC] ? &r->in[IN_ELASTIC] : NULL};
    return in;
}

static mm_status alloc_rank(mm_case_ctx *ctx, const mm_dc_attrs *attrs, dcc_rank *r, mm_error *err) {
    mm_dispatch_v3_inputs in = inputs_of(r);
    mm_dispatch_v3_shapes sh;
    mm_status st = mm_dispatch_v3_plan(&in, attrs, &sh, err);
    if (st) return st;
    r->out[OUT_EXPAND] = sh.expand_x;
    r->out[OUT_SCALES] = sh.dynamic_scales;
    r->out[OUT_ASSIST] = sh.assist_info_for_combine;
    r->out[OUT_TOKEN_NUMS] = sh.expert_token_nums;
    r->out[OUT_EP] = sh.ep_recv_counts;
    r->out[OUT_TP] = sh.tp_recv_counts;
    for (int o = 0; o < 6; o++) {
        r->out_on[o] = (o != OUT_SCALES || attrs->quant_mode == MM_DC_QUANT_INT8_PER_TOKEN) &&
                       (o != OUT_TP || attrs->tp_world_size > 0);
        if (r->out_on[o] && (st = mm_case_alloc_tensor(ctx, &r->out[o], dispatch_outputs[o], err))) return st;
    }
    return MM_OK;
}

static mm_status call_rank(mm_dc_workspace *ws, const mm_dc_attrs *attrs, dcc_rank *r, mm_error *err) {
    mm_dispatch_v3_inputs in = inputs_of(r);
    mm_dispatch_v3_outputs out = {&r->out[OUT_EXPAND], r->out_on[OUT_SCALES] ? &r->out[OUT_SCALES] : NULL,
                                  &r->out[OUT_ASSIST], &r->out[OUT_TOKEN_NUMS],
                                  &r->out[OUT_EP],     r->out_on[OUT_TP] ? &r->out[OUT_TP] : NULL};
    return mm_dispatch_v3(ws, &in, attrs, &out, &r->rows, err);
}

static const dcc_op dispatch_op = {
    dispatch_outputs, 6,        (1u << OUT_EXPAND) | (1u << OUT_SCALES) | (1u << OUT_ASSIST), "x", read_rank,
    alloc_rank,       call_rank};

static mm_status run_dispatch(mm_case_ctx *ctx, mm_error *err) {
    return mm_case_dc_read_and_run(ctx, &dispatch_op, 0, err);
}

const mm_case_op mm_case_op_dispatch_v3 = {"moe_distribute_dispatch_v3", 1, dispatch_inputs,
                                           dispatch_attributes, run_dispatch};
