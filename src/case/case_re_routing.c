/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_re_routing.c: the moe_re_routing case adapter (not collective: plain tensor names).
 *
 * inputs: tokens (A, H), expert_token_num_per_rank (N, E), per_token_scales (optional);
 * attributes: expert_token_num_type (default 1), idx_type (default 0);
 * outputs: permute_tokens, permute_per_token_scales (only with scales), permute_token_idx,
 * expert_token_num. The adapter checks what the file decides (presence, dtype, rank, attribute
 * literals and ranges); mm_re_routing checks the rest (H range, counts, their sum) with messages that
 * name the tensor the same way. */
#include "case/case_context.h"
#include "megamoe/re_routing.h"

static const char *const re_routing_inputs[] = {"tokens", "expert_token_num_per_rank", "per_token_scales",
                                                NULL};
static const char *const re_routing_attributes[] = {"expert_token_num_type", "idx_type", NULL};

static const uint64_t token_dtypes = MM_CASE_DTYPE(MM_DTYPE_F16) | MM_CASE_DTYPE(MM_DTYPE_BF16) |
                                     MM_CASE_DTYPE(MM_DTYPE_I8) | MM_CASE_DTYPE(MM_DTYPE_FP8_E5M2) |
                                     MM_CASE_DTYPE(MM_DTYPE_FP8_E4M3FN) | MM_CASE_DTYPE(MM_DTYPE_HIFLOAT8) |
                                     MM_CASE_DTYPE(MM_DTYPE_FP4_E2M1) | MM_CASE_DTYPE(MM_DTYPE_FP4_E1M2);
static const uint64_t count_dtypes = MM_CASE_DTYPE(MM_DTYPE_I32) | MM_CASE_DTYPE(MM_DTYPE_I64);
static const uint64_t scale_dtypes = MM_CASE_DTYPE(MM_DTYPE_F32) | MM_CASE_DTYPE(MM_DTYPE_E8M0);

static mm_status run_re_routing(mm_case_ctx *ctx, mm_error *err) {
    mm_tensor tokens, counts, scales;
    mm_tensor permute_tokens, permute_scales, permute_idx, expert_num;
    int has_scales = 0;
    mm_re_routing_attrs attrs = mm_re_routing_default_attrs();
    mm_status st;
    if ((st = mm_case_input(ctx, MM_CASE_NO_RANK, "tokens", 1, token_dtypes, 2, 2, &tokens, NULL, err)) !=
        MM_OK)
        return st;
    if ((st = mm_case_input(ctx, MM_CASE_NO_RANK, "expert_token_num_per_rank", 1, count_dtypes, 2, 2, &counts,
                            NULL, err)) != MM_OK)
        return st;
    if ((st = mm_case_input(ctx, MM_CASE_NO_RANK, "per_token_scales", 0, scale_dtypes, 1, MM_MAX_DIMS,
                            &scales, &has_scales, err)) != MM_OK)
        return st;
    if ((st = mm_case_attr_int64(ctx, "expert_token_num_type", attrs.expert_token_num_type, 0, 1,
                                 &attrs.expert_token_num_type, err)) != MM_OK)
        return st;
    if ((st = mm_case_attr_int64(ctx, "idx_type", attrs.idx_type, 0, 1, &attrs.idx_type, err)) != MM_OK)
        return st;

    mm_re_routing_inputs in = {&tokens, &counts, has_scales ? &scales : NULL};
    if ((st = mm_re_routing_plan(&in, &attrs, &permute_tokens, has_scales ? &permute_scales : NULL,
                                 &permute_idx, &expert_num, err)) != MM_OK)
        return st;
    if ((st = mm_case_alloc_tensor(ctx, &permute_tokens, "permute_tokens", err)) != MM_OK) return st;
    if (has_scales &&
        (st = mm_case_alloc_tensor(ctx, &permute_scales, "permute_per_token_scales", err)) != MM_OK)
        return st;
    if ((st = mm_case_alloc_tensor(ctx, &permute_idx, "permute_token_idx", err)) != MM_OK) return st;
    if ((st = mm_case_alloc_tensor(ctx, &expert_num, "expert_token_num", err)) != MM_OK) return st;
    mm_re_routing_outputs out = {&permute_tokens, has_scales ? &permute_scales : NULL, &permute_idx,
                                 &expert_num};
    if ((st = mm_re_routing(&in, &attrs, &out, err)) != MM_OK) return st;

    if ((st = mm_case_output(ctx, MM_CASE_NO_RANK, "permute_tokens", &permute_tokens, err)) != MM_OK)
        return st;
    if (has_scales && (st = mm_case_output(ctx, MM_CASE_NO_RANK, "permute_per_token_scales", &permute_scales,
                                           err)) != MM_OK)
        return st;
    if ((st = mm_case_output(ctx, MM_CASE_NO_RANK, "permute_token_idx", &permute_idx, err)) != MM_OK)
        return st;
    return mm_case_output(ctx, MM_CASE_NO_RANK, "expert_token_num", &expert_num, err);
}

const mm_case_op mm_case_op_re_routing = {
    .name = "moe_re_routing",
    .collective = 0,
    .inputs = re_routing_inputs,
    .attributes = re_routing_attributes,
    .run = run_re_routing,
};
