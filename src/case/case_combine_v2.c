/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_combine_v2.c: the moe_distribute_combine_add_rms_norm_v2 case adapter (collective).
 *
 * inputs per rank: expand_x, expert_ids, assist_info_for_combine, ep_send_counts, tp_send_counts,
 * expert_scales, residual_x, gamma, x_active_mask, shared_expert_x, elastic_info, ori_x,
 * const_expert_alpha_1/2, const_expert_v, and the reserved activation_scale, weight_scale, group_list,
 * expand_scales (rejected by the operator when present). A dispatch output file is a valid source of
 * the handoff tensors: its ep_recv_counts / tp_recv_counts stand for ep_send_counts / tp_send_counts
 * (giving both is an error), and its expert_token_nums and dynamic_scales are accepted and not used.
 * outputs per rank: y (Bs, 1, H), rstd (Bs, 1, 1), x (Bs, 1, H). */
#include <stdio.h>

#include "case/case_dispatch_common.h"
#include "core/error.h"
#include "megamoe/safetensors.h"

static const char *const combine_inputs[] = {"expand_x",
                                             "expert_ids",
                                             "assist_info_for_combine",
                                             "ep_send_counts",
                                             "tp_send_counts",
                                             "expert_scales",
                                             "residual_x",
                                             "gamma",
                                             "x_active_mask",
                                             "shared_expert_x",
                                             "elastic_info",
                                             "ori_x",
                                             "const_expert_alpha_1",
                                             "const_expert_alpha_2",
                                             "const_expert_v",
                                             "activation_scale",
                                             "weight_scale",
                                             "group_list",
                                             "expand_scales",
                                             "ep_recv_counts",
                                             "tp_recv_counts",
                                             "expert_token_nums",
                                             "dynamic_scales",
                                             NULL};
static const char *const combine_attributes[] = {
    "ep_world_size",     "moe_expert_num",    "tp_world_size",
    "expert_shard_type", "shared_expert_num", "shared_expert_rank_num",
    "quant_mode",        "global_bs",         "expert_token_nums_type",
    "zero_expert_num",   "copy_expert_num",   "const_expert_num",
    "comm_alg",          "norm_eps",          "out_dtype",
    "comm_quant_mode",   "group_list_type",   NULL};
static const char *const combine_outputs[] = {"y", "rstd", "x"};

enum {
    IN_EXPAND,
    IN_IDS,
    IN_ASSIST,
    IN_EP,
    IN_TP,
    IN_WEIGHTS,
    IN_RESIDUAL,
    IN_GAMMA,
    IN_MASK,
    IN_SHARED,
    IN_ELASTIC,
    IN_ORI,
    IN_A1,
    IN_A2,
    IN_V,
    IN_RESERVED0, /* 4 reserved inputs */
    IN_COUNT = IN_RESERVED0 + 4
};

static const uint64_t any_dtype = ~UINT64_C(0);

static mm_status read_rank(mm_case_ctx *ctx, int64_t g, dcc_rank *r, mm_error *err) {
    const uint64_t bf16 = MM_CASE_DTYPE(MM_DTYPE_BF16), i32 = MM_CASE_DTYPE(MM_DTYPE_I32);
    const uint64_t f32 = MM_CASE_DTYPE(MM_DTYPE_F32), alpha = bf16 | f32;
    const struct {
        const char *name;
        int required;
        uint64_t dtypes;
        int nd_lo, nd_hi;
    } spec[IN_COUNT] = {
        {"expand_x", 1, bf16, 2, 2},
        {"expert_ids", 1, i32, 2, 2},
        {"assist_info_for_combine", 1, i32, 2, 2},
        {"ep_send_counts", 0, i32, 1, 1},
        {"tp_send_counts", 0, i32, 1, 1},
        {"expert_scales", 1, f32, 2, 2},
        {"residual_x", 1, bf16, 2, 3},
        {"gamma", 1, bf16, 1, 1},
        {"x_active_mask", 0, MM_CASE_DTYPE(MM_DTYPE_BOOL), 1, 2},
        {"shared_expert_x", 0, bf16, 2, 3},
        {"elastic_info", 0, i32, 1, 1},
        {"ori_x", 0, bf16, 2, 3},
        {"const_expert_alpha_1", 0, alpha, 1, 2},
        {"const_expert_alpha_2", 0, alpha, 1, 2},
        {"const_expert_v", 0, bf16, 2, 2},
        {"activation_scale", 0, any_dtype, 0, MM_MAX_DIMS},
        {"weight_scale", 0, any_dtype, 0, MM_MAX_DIMS},
        {"group_list", 0, any_dtype, 0, MM_MAX_DIMS},
        {"expand_scales", 0, any_dtype, 0, MM_MAX_DIMS},
    };
    mm_status st;
    for (int i = 0; i < IN_COUNT; i++)
        if ((st = mm_case_input(ctx, g, spec[i].name, spec[i].required, spec[i].dtypes, spec[i].nd_lo,
                                spec[i].nd_hi, &r->in[i], &r->has[i], err)))
            return st;
    /* Dispatch's output names for the counts. */
    static const char *const alias[2][2] = {{"ep_send_counts", "ep_recv_counts"},
                                            {"tp_send_counts", "tp_recv_counts"}};
    for (int j = 0; j < 2; j++) {
        int slot = j ? IN_TP : IN_EP, present = 0;
        mm_tensor t;
        if ((st = mm_case_input(ctx, g, alias[j][1], 0, i32, 1, 1, &t, &present, err))) return st;
        if (!present) continue;
        if (r->has[slot])
            return mm_fail(
                err, MM_ERR_INVALID_FILE,
                "tensor \"rank%lld.%s\" and tensor \"rank%lld.%s\" are both given (they are the same "
                "input: give one)",
                (long long)g, alias[j][0], (long long)g, alias[j][1]);
        r->in[slot] = t;
        r->has[slot] = 1;
    }
    if (!r->has[IN_EP])
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "tensor \"rank%lld.ep_send_counts\" is missing (or rank%lld.ep_recv_counts from a dispatch "
            "output; required by %s)",
            (long long)g, (long long)g, ctx->op->name);
    return MM_OK;
}

static mm_combine_v2_inputs inputs_of(dcc_rank *r) {
    mm_combine_v2_inputs in;
    const mm_tensor *p[IN_COUNT];
    for (int i = 0; i < IN_COUNT; i++) p[i] = r->has[i] ? &r->in[i] : NULL;
    in.expand_x = p[IN_EXPAND], in.expert_ids = p[IN_IDS], in.assist_info_for_combine = p[IN_ASSIST];
    in.ep_send_counts = p[IN_EP], in.expert_scales = p[IN_WEIGHTS], in.residual_x = p[IN_RESIDUAL];
    in.gamma = p[IN_GAMMA], in.tp_send_counts = p[IN_TP], in.x_active_mask = p[IN_MASK];
    in.shared_expert_x = p[IN_SHARED], in.elastic_info = p[IN_ELASTIC], in.ori_x = p[IN_ORI];
    in.const_expert_alpha_1 = p[IN_A1], in.const_expert_alpha_2 = p[IN_A2], in.const_expert_v = p[IN_V];
    in.activation_scale = p[IN_RESERVED0], in.weight_scale = p[IN_RESERVED0 + 1];
    in.group_list = p[IN_RESERVED0 + 2], in.expand_scales = p[IN_RESERVED0 + 3];
    return in;
}

static mm_status alloc_rank(mm_case_ctx *ctx, const mm_dc_attrs *attrs, dcc_rank *r, mm_error *err) {
    mm_combine_v2_inputs in = inputs_of(r);
    mm_status st = mm_combine_v2_plan(&in, attrs, &r->out[0], &r->out[1], &r->out[2], err);
    if (st) return st;
    for (int o = 0; o < 3; o++) {
        r->out_on[o] = 1;
        if ((st = mm_case_alloc_tensor(ctx, &r->out[o], combine_outputs[o], err))) return st;
    }
    return MM_OK;
}

static mm_status call_rank(mm_dc_workspace *ws, const mm_dc_attrs *attrs, dcc_rank *r, mm_error *err) {
    mm_combine_v2_inputs in = inputs_of(r);
    mm_combine_v2_outputs out = {&r->out[0], &r->out[1], &r->out[2]};
    return mm_combine_v2(ws, &in, attrs, &out, err);
}

static const dcc_op combine_op = {combine_outputs, 3, 0, "residual_x", read_rank, alloc_rank, call_rank};

static mm_status run_combine(mm_case_ctx *ctx, mm_error *err) {
    return mm_case_dc_read_and_run(ctx, &combine_op, 1, err);
}

const mm_case_op mm_case_op_combine_v2 = {"moe_distribute_combine_add_rms_norm_v2", 1, combine_inputs,
                                          combine_attributes, run_combine};
