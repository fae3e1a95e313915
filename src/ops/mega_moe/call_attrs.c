/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/call_attrs.c: the attribute rules of a call that hold without communication: the
 * dispatch and shared-expert quantization, combine quantization, topk_weights_type, the activation and
 * its parameters, activation_out_dtype, the scenario paths of the routed and shared weights, GEMM2's K
 * and the hidden-size rules of MX and 4-bit values. MegaMoE's validation (validate.c) adds the
 * topology rules; the local experts call (ops/experts/) uses these alone, so both compute alike. */
#include <inttypes.h>
#include <stdio.h>

#include "core/error.h"
#include "format/format_table.h"
#include "ops/mega_moe/plan.h"

/* FP8 E4M3 weights come MX-scaled (A8W8-FP) or block-scaled (A16W8-FP8): the dispatch dtype picks the
 * scenario, and the weights must carry that scenario's scales. */
static mm_status scales_fit(const char *what, const mm_moe_expert_set *set, const mm_moe_path *path,
                            mm_error *err) {
    if (set->block_scaled == path->block_scales) return MM_OK;
    return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                   "%s %s weights have %s scales but scenario %s takes %s scales (docs/weight_formats.md)",
                   what, mm_dtype_name(set->dtype), set->block_scaled ? "F32 block" : "E8M0 MX",
                   mm_moe_scenario_name(path->scenario), path->block_scales ? "F32 block" : "E8M0 MX");
}

mm_status mm_moe_check_compute_attrs(const mm_moe_expert_set *routed, const mm_moe_expert_set *shared,
                                     int64_t H, int64_t I, const mm_mega_moe_attrs *a, mm_moe_call *c,
                                     mm_error *err) {
    mm_status st;
    mm_dtype dd = a->dispatch_quant_out_dtype;
    if (dd == MM_DTYPE_BF16) dd = MM_DTYPE_INVALID; /* "same as the BF16 weights" means no quantization */
    switch (a->dispatch_quant_mode) {
    case MM_MEGA_MOE_DISPATCH_QUANT_NONE:
        if (dd != MM_DTYPE_INVALID && !mm_format_is_mx(dd))
            return mm_fail(
                err, MM_ERR_INVALID_ARGUMENT,
                "dispatch_quant_out_dtype = %s with dispatch_quant_mode 0: only none/bf16, or an MX "
                "type for pre-quantized x",
                mm_dtype_name(dd));
        c->prequantized = dd != MM_DTYPE_INVALID;
        break;
    case MM_MEGA_MOE_DISPATCH_QUANT_INT8:
        if (dd == MM_DTYPE_INVALID) dd = MM_DTYPE_I8;
        if (dd != MM_DTYPE_I8)
            return mm_fail(
                err, MM_ERR_INVALID_ARGUMENT,
                "dispatch_quant_out_dtype = %s with dispatch_quant_mode 2 (INT8 per token): must be int8",
                mm_dtype_name(dd));
        break;
    case MM_MEGA_MOE_DISPATCH_QUANT_MX:
        if (!mm_format_is_mx(dd))
            return mm_fail(
                err, MM_ERR_INVALID_ARGUMENT,
                "dispatch_quant_out_dtype = %s with dispatch_quant_mode 4 (MX): must be fp8_e4m3fn, "
                "fp8_e5m2 or fp4_e2m1",
                dd == MM_DTYPE_INVALID ? "undefined" : mm_dtype_name(dd));
        break;
    default:
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "dispatch_quant_mode = %d is not 0, 2 or 4",
                       a->dispatch_quant_mode);
    }
    mm_dtype sd = a->shared_expert_quant_out_dtype;
    if (sd == MM_DTYPE_BF16) sd = MM_DTYPE_INVALID;
    if (sd == MM_DTYPE_INVALID) sd = dd;
    if (sd != MM_DTYPE_INVALID && sd != MM_DTYPE_I8 && !mm_format_is_mx(sd))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "shared_expert_quant_out_dtype = %s is not int8, fp8_e4m3fn, fp8_e5m2 or fp4_e2m1",
                       mm_dtype_name(sd));
    if (c->prequantized && sd != dd)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "shared_expert_quant_out_dtype = %s must be undefined or equal dispatch_quant_out_dtype = %s "
            "with pre-quantized x",
            mm_dtype_name(sd), mm_dtype_name(dd));
    if (a->combine_quant_mode != MM_MEGA_MOE_COMBINE_QUANT_NONE &&
        a->combine_quant_mode != MM_MEGA_MOE_COMBINE_QUANT_MX_E5M2 &&
        a->combine_quant_mode != MM_MEGA_MOE_COMBINE_QUANT_MX_E4M3)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "combine_quant_mode = %d is not 0, 3 or 4",
                       a->combine_quant_mode);
    if (a->topk_weights_type != MM_MEGA_MOE_WEIGHTS_AT_COMBINE &&
        a->topk_weights_type != MM_MEGA_MOE_WEIGHTS_AFTER_ACTIVATION)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "topk_weights_type = %d is not 0 or 1",
                       a->topk_weights_type);
    if ((st = mm_ffn_act_resolve(a->activation, a->activation_params, a->activation_param_count, &c->act,
                                 err)) != MM_OK)
        return st;
    if (a->activation_out_dtype != MM_DTYPE_INVALID && a->activation_out_dtype != MM_DTYPE_FP8_E4M3FN &&
        a->activation_out_dtype != MM_DTYPE_FP8_E5M2)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "activation_out_dtype = %s: only undefined, fp8_e4m3fn or fp8_e5m2",
                       mm_dtype_name(a->activation_out_dtype));
    st = mm_moe_path_make(routed->dtype, dd, a->activation_out_dtype, "routed", &c->routed, err);
    if (st == MM_OK) st = scales_fit("routed", routed, &c->routed, err);
    if (st != MM_OK) return st;
    c->has_shared = shared->count > 0;
    if (c->has_shared) {
        st = mm_moe_path_make(shared->dtype, sd, a->activation_out_dtype, "shared", &c->shared, err);
        if (st == MM_OK) st = scales_fit("shared", shared, &c->shared, err);
        if (st != MM_OK) return st;
    }
    int64_t k2 = mm_ffn_act_k2(a->activation, I); /* the activation table's GEMM2 K factor */
    if (routed->k2 != k2 || (c->has_shared && shared->k2 != k2)) {
        char factor[64] = "";
        if (k2 != I)
            snprintf(factor, sizeof factor, ", times %" PRId64 " for %s", I ? k2 / I : 0,
                     mm_mega_moe_activation_name(a->activation));
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s weight2 has K = %" PRId64 " but activation %s needs %" PRId64 " (I = %" PRId64
                       "%s)",
                       routed->k2 != k2 ? "routed" : "shared", routed->k2 != k2 ? routed->k2 : shared->k2,
                       mm_mega_moe_activation_name(a->activation), k2, I, factor);
    }
    int any_mx = mm_format_is_mx(dd) || mm_format_is_mx(sd) || mm_format_is_mx(routed->dtype) ||
                 (c->has_shared && mm_format_is_mx(shared->dtype)) ||
                 a->combine_quant_mode != MM_MEGA_MOE_COMBINE_QUANT_NONE;
    if (any_mx && H % 32 != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "hidden = %" PRId64 " must be a multiple of 32 with MX quantization", H);
    int any_4bit = mm_format_is_nibble(dd) || mm_format_is_nibble(sd) || mm_format_is_nibble(routed->dtype) ||
                   (c->has_shared && mm_format_is_nibble(shared->dtype));
    if (any_4bit && H % 2 != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "hidden = %" PRId64 " must be even with 4-bit values",
                       H);
    c->dispatch_dtype = c->routed.input_dtype;
    c->shared_input_dtype = c->has_shared ? c->shared.input_dtype : MM_DTYPE_INVALID;
    return MM_OK;
}
