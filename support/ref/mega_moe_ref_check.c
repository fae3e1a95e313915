/* SPDX-License-Identifier: Apache-2.0 */
/* ref/mega_moe_ref_check.c: validation for the reference. It checks what the reference's math and its
 * memory accesses rely on (shapes, pointers, id ranges, the scenario table, mode/topology pairs), so a
 * wrong test setup fails with a message instead of reading out of bounds. The operator's full
 * validation (capacities, cross-rank attribute equality, ...) lives with the operator. */
#include "ref/mega_moe_ref_check.h"

#include <stdlib.h>

#include "format/format_table.h"
#include "core/error.h"

mm_dtype mm_ref_shared_input_dtype(const mm_ref_attrs *attrs) {
    return attrs->shared_quant_dtype != MM_DTYPE_INVALID ? attrs->shared_quant_dtype : attrs->dispatch_dtype;
}

int mm_ref_is_layered(const mm_ref_attrs *attrs) {
    return attrs->rank_num_per_server > 0 && attrs->rank_num_per_server < attrs->world_size;
}

static mm_status check_attrs(const mm_ref_attrs *a, mm_error *err) {
    if (a->world_size < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "ep_world_size = %lld must be >= 1",
                       (long long)a->world_size);
    if (a->expert_num < 1 || a->expert_num % a->world_size != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "moe_expert_num = %lld must be a positive multiple of ep_world_size = %lld",
                       (long long)a->expert_num, (long long)a->world_size);
    if (a->topk < 1 || a->topk > a->expert_num)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "topk = %lld is outside [1, moe_expert_num = %lld]",
                       (long long)a->topk, (long long)a->expert_num);
    if (a->hidden < 1 || a->inter < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "hidden = %lld and intermediate_hidden = %lld must be >= 1", (long long)a->hidden,
                       (long long)a->inter);
    if ((int)a->activation.kind < 0 || a->activation.kind >= MM_REF_ACT_COUNT)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation = %d is not a known activation",
                       (int)a->activation.kind);
    if (a->topk_weights_type != 0 && a->topk_weights_type != 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "topk_weights_type = %d is not 0 or 1",
                       a->topk_weights_type);
    if (a->combine_quant_mode != 0 && a->combine_quant_mode != 3 && a->combine_quant_mode != 4)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "combine_quant_mode = %d is not 0, 3 or 4",
                       a->combine_quant_mode);
    if (a->rank_num_per_server < 0 || a->rank_num_per_server > a->world_size ||
        (mm_ref_is_layered(a) && a->world_size % a->rank_num_per_server != 0))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "rank_num_per_server = %lld must be in [0, ep_world_size = %lld] and divide it",
                       (long long)a->rank_num_per_server, (long long)a->world_size);
    switch (a->combine_comm_mode) {
    case 0: break;
    case 1:
    case 2: {
        int wants_layered = a->combine_comm_mode == 2;
        if (wants_layered != mm_ref_is_layered(a) || a->combine_quant_mode != 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "combine_comm_mode = %d needs a %s topology and combine_quant_mode 0 (have "
                           "rank_num_per_server = %lld of %lld ranks, combine_quant_mode = %d)",
                           a->combine_comm_mode, wants_layered ? "layered" : "flat",
                           (long long)a->rank_num_per_server, (long long)a->world_size,
                           a->combine_quant_mode);
        break;
    }
    default:
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "combine_comm_mode = %d is not 0, 1 or 2",
                       a->combine_comm_mode);
    }
    if (a->x_prequantized && !mm_format_is_mx(a->dispatch_dtype))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "pre-quantized x needs an MX dispatch dtype, have dispatch_quant_out_dtype = %s",
                       mm_dtype_name(a->dispatch_dtype));
    if (a->x_prequantized && mm_ref_shared_input_dtype(a) != a->dispatch_dtype)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "shared_expert_quant_out_dtype = %s must equal dispatch_quant_out_dtype = %s with "
                       "pre-quantized x",
                       mm_dtype_name(a->shared_quant_dtype), mm_dtype_name(a->dispatch_dtype));
    return MM_OK;
}

/* Pointers a weight group needs for its scenario; bias required for A8W4-INT (optional elsewhere), block
 * scales for A16W8-FP8 / A16W4-INT, zero points for A16W4-INT. */
static mm_status check_weights(const mm_ref_weights *w, const mm_ref_plan *plan, int64_t rank,
                               const char *what, mm_error *err) {
    int is_int = plan->scenario == MM_REF_SCENARIO_A8W8_INT || plan->scenario == MM_REF_SCENARIO_A8W4_INT;
    int is_int4 = plan->scenario == MM_REF_SCENARIO_A8W4_INT;
    int is_int4u = plan->scenario == MM_REF_SCENARIO_A16W4_INT;
    int is_block = is_int4u || plan->scenario == MM_REF_SCENARIO_A16W8_FP8;
    int is_mx = !is_int && !is_block && plan->scenario != MM_REF_SCENARIO_A16W16;
    /* both GEMMs' pointers of each part, in the order a missing one is reported:
     * "<name><1 or 2><suffix>" */
    const struct {
        int needed;
        const void *p[2];
        const char *name, *suffix;
    } parts[] = {{1, {w->weight1, w->weight2}, "weight", ""},
                 {is_int, {w->scales1, w->scales2}, "weight_scales", ""},
                 {is_mx, {w->mx_scales1, w->mx_scales2}, "weight_scales", " (E8M0)"},
                 {is_int4, {w->bias1, w->bias2}, "bias", ""},
                 {is_block, {w->block_scales1, w->block_scales2}, "weight_scales", " (F32 blocks)"},
                 {is_int4u, {w->zeros1, w->zeros2}, "weight_zeros", ""}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        for (int g = 0; g < 2; g++)
            if (parts[i].needed && !parts[i].p[g])
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "rank %lld: %s %s%d%s is missing (scenario %s)",
                               (long long)rank, what, parts[i].name, g + 1, parts[i].suffix,
                               mm_ref_scenario_name(plan->scenario));
    return MM_OK;
}

static int row_active(const mm_ref_rank_input *in, int64_t i) {
    return !in->x_active_mask || in->x_active_mask[i];
}

static mm_status check_rank(const mm_ref_attrs *a, const mm_ref_rank_input *in, const mm_ref_rank_output *out,
                            int64_t r, mm_error *err) {
    int64_t K = a->topk;
    if (in->bs < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "rank %lld: BS = %lld is negative", (long long)r,
                       (long long)in->bs);
    if (!out->expert_token_nums || (in->bs > 0 && !out->y))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "rank %lld: output y or expert_token_nums is NULL",
                       (long long)r);
    if (in->bs == 0) return MM_OK;
    int has_x = a->x_prequantized ? (in->x_quant && in->x_scales) : in->x_bf16 != NULL;
    if (!has_x || !in->topk_ids || !in->topk_weights)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "rank %lld: x%s, topk_ids and topk_weights are required",
                       (long long)r, a->x_prequantized ? " (quantized bytes and scales)" : "");
    for (int64_t i = 0; i < in->bs; i++) {
        if (!row_active(in, i)) continue;
        for (int64_t k = 0; k < K; k++) {
            int32_t id = in->topk_ids[i * K + k];
            if (id < 0 || id >= a->expert_num)
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "rank %lld: topk_ids[%lld][%lld] = %d is outside [0, %lld)", (long long)r,
                               (long long)i, (long long)k, (int)id, (long long)a->expert_num);
            for (int64_t j = 0; j < k; j++)
                if (in->topk_ids[i * K + j] == id)
                    return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                                   "rank %lld: topk_ids[%lld][%lld] = %d repeats topk_ids[%lld][%lld]",
                                   (long long)r, (long long)i, (long long)k, (int)id, (long long)i,
                                   (long long)j);
        }
    }
    return MM_OK;
}

mm_status mm_ref_check(const mm_ref_attrs *attrs, const mm_ref_rank_input *inputs,
                       const mm_ref_rank_output *outputs, mm_ref_plan *routed, mm_ref_plan *shared,
                       mm_error *err) {
    mm_status st;
    if (!attrs || !inputs || !outputs)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "attrs, inputs and outputs must not be NULL");
    if ((st = check_attrs(attrs, err)) != MM_OK) return st;
    int64_t R = attrs->world_size, local = attrs->expert_num / R;
    mm_dtype shared_dtype = MM_DTYPE_INVALID;
    for (int64_t r = 0; r < R; r++) {
        const mm_ref_weights *w = &inputs[r].routed, *s = &inputs[r].shared;
        if (w->count != local)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "rank %lld: routed expert count %lld != E / R = %lld", (long long)r,
                           (long long)w->count, (long long)local);
        if (w->dtype != inputs[0].routed.dtype)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "rank %lld: weight dtype %s differs from rank 0's %s", (long long)r,
                           mm_dtype_name(w->dtype), mm_dtype_name(inputs[0].routed.dtype));
        if (s->count < 0 || s->count > 4)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "rank %lld: shared expert count %lld is outside [0, 4]", (long long)r,
                           (long long)s->count);
        if (s->count > 0 && shared_dtype != MM_DTYPE_INVALID && s->dtype != shared_dtype)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "rank %lld: shared weight dtype %s differs from %s",
                           (long long)r, mm_dtype_name(s->dtype), mm_dtype_name(shared_dtype));
        if (s->count > 0) shared_dtype = s->dtype;
    }
    st = mm_ref_plan_make(inputs[0].routed.dtype, attrs->dispatch_dtype, attrs->activation_out_dtype,
                          "routed", routed, err);
    if (st != MM_OK) return st;
    *shared = (mm_ref_plan){MM_REF_SCENARIO_INVALID, MM_DTYPE_INVALID, MM_DTYPE_INVALID};
    if (shared_dtype != MM_DTYPE_INVALID) {
        st = mm_ref_plan_make(shared_dtype, mm_ref_shared_input_dtype(attrs), attrs->activation_out_dtype,
                              "shared", shared, err);
        if (st != MM_OK) return st;
    }
    for (int64_t r = 0; r < R; r++) {
        if ((st = check_weights(&inputs[r].routed, routed, r, "routed", err)) != MM_OK) return st;
        if (inputs[r].shared.count > 0 &&
            (st = check_weights(&inputs[r].shared, shared, r, "shared", err)) != MM_OK)
            return st;
        if ((st = check_rank(attrs, &inputs[r], &outputs[r], r, err)) != MM_OK) return st;
    }
    return MM_OK;
}
