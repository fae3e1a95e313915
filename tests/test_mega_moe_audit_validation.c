/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_mega_moe_audit_validation.c: the rules of docs/mega_moe.md, Semantics, "Validation" that
 * test_mega_moe_validation.c does not reach (sizing, weights, outputs, optional inputs, attribute
 * ranges): each broken on one rank must give every rank the same status and a message naming the
 * parameter, its value and the rule, leave y and expert_token_nums untouched (fill pattern), and hang
 * nobody. A valid control run first shows that the harness itself passes. */
#include <float.h>
#include <stdio.h>

#include "core/error.h"
#include "test_mega_moe_common.h"

enum { RANKS = 2, BROKEN_RANK = 1 };

/* What a breaker may change on its rank before the buffer, the weights and the call are made. */
typedef struct call_parts {
    mm_mega_moe_sizing sizing;
    moe_tensors *routed, *shared;
    const mm_mega_moe_expert_weights *shared_desc; /* NULL: no shared experts */
    mm_mega_moe_attrs attrs;
    mm_tensor x, scales, ids, tw, mask, y, etn;
    mm_mega_moe_inputs in;
    uint64_t u64_scales[2 * 64]; /* room for a UINT64 form of weight_scales1 (E_l x 2I) */
    mm_tensor u64_tensor;
} call_parts;

typedef struct audit_case {
    const char *what;
    mm_dtype weights; /* routed (and shared) weight dtype of the valid case */
    int shared_count;
    void (*breaker)(call_parts *p);
    /* NULL: a control, which must succeed; its breaker (an equivalent spelling) applies on every rank */
    const char *fragment;
} audit_case;

typedef struct audit_run {
    moe_case *c;
    const audit_case *ac;
    mm_status status[RANKS];
    mm_error err[RANKS];
} audit_run;

static mm_status audit_rank(mm_comm *comm, void *arg_, mm_error *err) {
    audit_run *run = arg_;
    moe_case *c = run->c;
    const moe_spec *sp = &c->sp;
    int r = mm_comm_rank(comm);
    mm_ref_case_rank *k = &c->ref.ranks[r];
    int64_t H = sp->hidden, K = sp->topk, bs = k->bs, El = sp->experts / sp->ranks;
    int64_t xs[2] = {bs, H}, ks[2] = {bs, K}, ss[2] = {bs, (H + 31) / 32}, ms[1] = {bs}, es[1] = {El};
    call_parts *p = calloc(1, sizeof *p);
    mm_status s = MM_OK;
    if (!p) return mm_comm_agree(comm, mm_fail(err, MM_ERR_OUT_OF_MEMORY, "test: no memory"), err);
    p->sizing = (mm_mega_moe_sizing){sp->experts, 8, K, H, sp->inter, 0};
    p->routed = calloc(1, sizeof *p->routed);
    p->shared = calloc(1, sizeof *p->shared);
    moe_make_weights(c, &k->routed, p->routed);
    moe_make_weights(c, &k->shared, p->shared);
    p->shared_desc = k->shared.count ? &p->shared->desc : NULL;
    p->attrs = sp->attrs;
    p->x = mm_tensor_make(MM_DTYPE_BF16, 2, xs, k->x_bf16);
    p->scales = mm_tensor_make(MM_DTYPE_E8M0, 2, ss, k->x_scales ? (void *)k->x_scales : (void *)k->x_bf16);
    p->ids = mm_tensor_make(MM_DTYPE_I32, 2, ks, k->topk_ids);
    p->tw = mm_tensor_make(MM_DTYPE_F32, 2, ks, k->topk_weights);
    p->mask = mm_tensor_make(MM_DTYPE_I8, 1, ms, k->x_active_mask);
    p->y = mm_tensor_make(MM_DTYPE_BF16, 2, xs, c->y[r]);
    p->etn = mm_tensor_make(MM_DTYPE_I32, 1, es, c->etn[r]);
    p->in = (mm_mega_moe_inputs){&p->x, NULL, &p->ids, &p->tw, NULL};
    if ((r == BROKEN_RANK || !run->ac->fragment) && run->ac->breaker) run->ac->breaker(p);
    mm_mega_moe_outputs out = {&p->y, &p->etn};
    mm_mega_moe_buffer *buf = NULL;
    mm_mega_moe_weights *w = NULL;
    s = mm_mega_moe_buffer_create(comm, &p->sizing, &buf, err);
    if (s == MM_OK) {
        /* weights are local: agree so that a failure on one rank reaches all */
        s = mm_mega_moe_weights_create(buf, &p->routed->desc, p->shared_desc, &w, err);
        s = mm_comm_agree(comm, s, err);
    }
    if (s == MM_OK) s = mm_mega_moe_run(buf, w, &p->attrs, &p->in, &out, err);
    run->status[r] = s;
    if (s != MM_OK) run->err[r] = *err;
    mm_mega_moe_weights_free(w);
    mm_mega_moe_buffer_free(buf, NULL);
    free(p->routed);
    free(p->shared);
    free(p);
    return s;
}

/* ---- breakers (applied on rank 1 only) ---- */

static void b_experts_not_multiple(call_parts *p) {
    p->sizing.moe_expert_num = 5;
}
static void b_topk_zero(call_parts *p) {
    p->sizing.topk = 0;
}
static void b_topk_above_experts(call_parts *p) {
    p->sizing.topk = 5;
}
static void b_inter_odd(call_parts *p) {
    p->sizing.intermediate_hidden = 31;
}
static void b_capacity_zero(call_parts *p) {
    p->sizing.num_max_tokens_per_rank = 0;
}
static void b_recv_negative(call_parts *p) {
    p->sizing.max_recv_token_num = -4;
}
static void b_recv_overflow(call_parts *p) {
    /* 2^58 rows of a 128-byte slot wrap size_t: refused, not a 64-byte area behind a huge capacity */
    p->sizing.max_recv_token_num = INT64_C(1) << 58;
}
static void b_shared_five(call_parts *p) {
    p->shared->desc.count = 5;
}
static void b_routed_count(call_parts *p) {
    p->routed->desc.count = 1;
}
static void b_int4_no_bias(call_parts *p) {
    p->routed->desc.bias2 = NULL;
}
static void b_int8_bias_dtype(call_parts *p) {
    /* biases are accepted for every format (docs/weight_formats.md), but only as (E_l, 2I) F32 */
    p->routed->desc.bias1 = &p->routed->w1;
}
static void b_stacked_and_list(call_parts *p) {
    p->routed->desc.weight1_list = &p->routed->w1;
}
static void b_transpose2_flipped(call_parts *p) {
    p->routed->desc.transpose_weight2 = !p->routed->desc.transpose_weight2;
}
static void b_u64_high_bits(call_parts *p) {
    const mm_tensor *s1 = p->routed->desc.weight_scales1;
    int64_t n = s1->shape[0] * s1->shape[1];
    for (int64_t q = 0; q < n && q < 128; q++) {
        uint32_t bits;
        memcpy(&bits, (const float *)s1->data + q, 4);
        p->u64_scales[q] = bits | (q == 3 ? UINT64_C(1) << 40 : 0);
    }
    p->u64_tensor = mm_tensor_make(MM_DTYPE_U64, 2, s1->shape, p->u64_scales);
    p->routed->desc.weight_scales1 = &p->u64_tensor;
}
static void b_mx_hidden(call_parts *p) {
    p->attrs.combine_quant_mode = 3; /* MX blocks of 32 along H = 48 */
}
static void b_clamp_nan(call_parts *p) {
    p->attrs.activation_param_count = 1;
    p->attrs.activation_params[0] = NAN;
}
static void b_oai_beta_inf(call_parts *p) {
    p->attrs.activation = MM_MEGA_MOE_SWIGLUOAI;
    p->attrs.activation_param_count = 3;
    p->attrs.activation_params[0] = 7.0f;
    p->attrs.activation_params[1] = 1.702f;
    p->attrs.activation_params[2] = -INFINITY;
}
static void b_situ_linear_beta(call_parts *p) {
    p->attrs.activation = MM_MEGA_MOE_SITUGLU;
    p->attrs.activation_param_count = 2;
    p->attrs.activation_params[0] = 1.0f;
    p->attrs.activation_params[1] = -0.5f;
}
static void b_param_count(call_parts *p) {
    p->attrs.activation_param_count = 4;
}
static void b_activation_enum(call_parts *p) {
    p->attrs.activation = (mm_mega_moe_activation)7;
}
static void b_rps_negative(call_parts *p) {
    p->attrs.rank_num_per_server = -2;
}
static void b_gelu_weights(call_parts *p) {
    p->attrs.activation = MM_MEGA_MOE_GELU; /* weight2 was made with K = I, gelu needs 2I */
}
static void b_y_shape(call_parts *p) {
    p->y.shape[1] -= 1;
}
static void b_etn_length(call_parts *p) {
    p->etn.shape[0] = 3;
}
static void b_etn_dtype(call_parts *p) {
    p->etn.dtype = MM_DTYPE_I64;
}
static void b_mask_length(call_parts *p) {
    p->mask.shape[0] += 1;
    p->in.x_active_mask = &p->mask;
}
static void b_mask_dtype(call_parts *p) {
    p->mask.dtype = MM_DTYPE_F32;
    p->in.x_active_mask = &p->mask;
}
static void b_scales_unasked(call_parts *p) {
    p->in.scales = &p->scales;
}
static void b_no_ids(call_parts *p) {
    p->in.topk_ids = NULL;
}
static void b_weights_i32(call_parts *p) {
    p->tw.dtype = MM_DTYPE_I32;
}
static void b_x_1d(call_parts *p) {
    p->x.ndim = 1;
}
static void b_int_dispatch_undefined(call_parts *p) {
    /* mode 2 with an undefined dtype is int8 (the seed skips the check); on every rank: the attribute
     * equality check compares the values as passed, so one rank spelling it int8 and another
     * undefined is reported as a difference */
    p->attrs.dispatch_quant_out_dtype = MM_DTYPE_INVALID;
}
static void b_mx_mode_undefined(call_parts *p) {
    p->attrs.dispatch_quant_mode = 4;
    p->attrs.dispatch_quant_out_dtype = MM_DTYPE_INVALID;
}

static const audit_case cases[] = {
    {"control: a valid A16W16 call", MM_DTYPE_BF16, 1, NULL, NULL},
    {"control: mode 2 with an undefined dtype means int8", MM_DTYPE_I8, 0, b_int_dispatch_undefined, NULL},
    {"E % R", MM_DTYPE_BF16, 0, b_experts_not_multiple,
     "moe_expert_num = 5 must be a positive multiple of ep_world_size = 2"},
    {"K = 0", MM_DTYPE_BF16, 0, b_topk_zero, "topk = 0 is outside [1, moe_expert_num = 4]"},
    {"K > E", MM_DTYPE_BF16, 0, b_topk_above_experts, "topk = 5 is outside [1, moe_expert_num = 4]"},
    {"I odd", MM_DTYPE_BF16, 0, b_inter_odd, "intermediate_hidden = 31 must be even"},
    {"capacity 0", MM_DTYPE_BF16, 0, b_capacity_zero, "num_max_tokens_per_rank = 0 is outside [1, "},
    {"max_recv negative", MM_DTYPE_BF16, 0, b_recv_negative, "max_recv_token_num = -4 is negative"},
    {"max_recv overflow", MM_DTYPE_BF16, 0, b_recv_overflow,
     "max_recv_token_num = 288230376151711744, num_max_tokens_per_rank = 8, topk = 2, hidden = 64, 2 "
     "ranks) overflow the address space"},
    {"S = 5", MM_DTYPE_BF16, 1, b_shared_five, "shared count = 5 is outside [0, 4]"},
    {"routed count", MM_DTYPE_BF16, 0, b_routed_count, "routed count = 1 must be E / R = 2"},
    {"INT4 without bias2", MM_DTYPE_INT4, 0, b_int4_no_bias, "routed bias2 is missing (required with int4"},
    {"INT8 bias of int8 dtype", MM_DTYPE_I8, 0, b_int8_bias_dtype,
     "routed bias1 dtype int8 is not accepted here"},
    {"stacked and list", MM_DTYPE_BF16, 0, b_stacked_and_list,
     "routed weight1 is given both stacked and as a list"},
    {"transpose_weight2 flipped", MM_DTYPE_BF16, 0, b_transpose2_flipped,
     "routed weight2 shape (2, 32, 64) must be (2, 64, "},
    {"UINT64 scale high bits", MM_DTYPE_I8, 0, b_u64_high_bits, "has nonzero high 32 bits"},
    {"MX needs H % 32", MM_DTYPE_BF16, 0, b_mx_hidden,
     "hidden = 48 must be a multiple of 32 with MX quantization"},
    {"clamp NaN", MM_DTYPE_BF16, 0, b_clamp_nan, "clamp = nan must be >= 0 and not NaN"},
    {"swigluoai beta", MM_DTYPE_BF16, 0, b_oai_beta_inf, "beta = -inf: both must be finite"},
    {"situglu linear_beta", MM_DTYPE_BF16, 0, b_situ_linear_beta,
     "activation_params[1] (linear_beta) = -0.5 must be finite and > 0"},
    {"param count 4", MM_DTYPE_BF16, 0, b_param_count, "activation_param_count = 4 is outside [0, 3]"},
    {"activation 7", MM_DTYPE_BF16, 0, b_activation_enum, "activation = 7 is not a known activation"},
    {"rank_num_per_server", MM_DTYPE_BF16, 0, b_rps_negative, "rank_num_per_server = -2 is negative"},
    {"gelu vs weight2", MM_DTYPE_BF16, 0, b_gelu_weights,
     "routed weight2 has K = 32 but activation gelu needs 64"},
    {"y shape", MM_DTYPE_BF16, 0, b_y_shape, "y must have shape (5, 64) (BS, H) BF16"},
    {"expert_token_nums length", MM_DTYPE_BF16, 0, b_etn_length, "expert_token_nums must have shape (2)"},
    {"expert_token_nums dtype", MM_DTYPE_BF16, 0, b_etn_dtype,
     "expert_token_nums dtype int64 is not accepted"},
    {"mask length", MM_DTYPE_BF16, 0, b_mask_length, "x_active_mask must have shape (5)"},
    {"mask dtype", MM_DTYPE_BF16, 0, b_mask_dtype, "x_active_mask dtype f32 is not accepted"},
    {"scales without pre-quantized x", MM_DTYPE_BF16, 0, b_scales_unasked,
     "scales is given but x is not pre-quantized"},
    {"topk_ids NULL", MM_DTYPE_BF16, 0, b_no_ids, "inputs x, topk_ids and topk_weights are required"},
    {"topk_weights I32", MM_DTYPE_BF16, 0, b_weights_i32, "topk_weights dtype int32 is not accepted"},
    {"x 1-D", MM_DTYPE_BF16, 0, b_x_1d, "x must be 2-D (BS, H), has 1 dims"},
    {"mode 4 without a dtype", MM_DTYPE_FP8_E4M3FN, 0, b_mx_mode_undefined,
     "dispatch_quant_out_dtype = undefined with dispatch_quant_mode 4"},
};

static moe_spec spec_for(const audit_case *ac) {
    moe_dims d = {RANKS, 4, 2, ac->breaker == b_mx_hidden ? 48 : 64, 32, 4, 1};
    int integer = ac->weights == MM_DTYPE_I8 || ac->weights == MM_DTYPE_INT4,
        fp = ac->weights != MM_DTYPE_BF16;
    moe_spec sp = integer ? moe_spec_make(d, ac->weights, 2, MM_DTYPE_I8, 77)
                  : fp    ? moe_spec_make(d, ac->weights, 4, ac->weights, 77)
                          : moe_spec_make(d, ac->weights, 0, MM_DTYPE_INVALID, 77);
    sp.shared_count = ac->shared_count;
    return sp;
}

int main(void) {
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        const audit_case *ac = &cases[q];
        moe_spec sp = spec_for(ac);
        moe_case c;
        if (!moe_case_build(&c, &sp)) continue;
        int64_t El = sp.experts / sp.ranks;
        for (int r = 0; r < RANKS; r++) {
            memset(c.y[r], 0xAB, (size_t)(c.ref.ranks[r].bs * sp.hidden) * 2);
            memset(c.etn[r], 0xCD, (size_t)El * 4);
        }
        audit_run run;
        memset(&run, 0, sizeof run);
        run.c = &c;
        run.ac = ac;
        mm_error err;
        mm_error_clear(&err);
        mm_status st = mm_comm_run_threads(RANKS, audit_rank, &run, NULL, NULL, &err);
        if (!ac->fragment) {
            CHECK_OK(st, &err);
            if (st == MM_OK) moe_case_check(&c, ac->what);
            printf("  %-44s -> ok\n", ac->what);
        } else {
            CHECK_EQ_INT(st, MM_ERR_INVALID_ARGUMENT);
            for (int r = 0; r < RANKS; r++) {
                CHECK_EQ_INT(run.status[r], MM_ERR_INVALID_ARGUMENT);
                CHECK_STR_CONTAINS(run.err[r].message, ac->fragment);
                /* the rank that found it is named */
                CHECK_STR_CONTAINS(run.err[r].message, "rank 1: ");
                for (int64_t i = 0; i < c.ref.ranks[r].bs * sp.hidden; i++) CHECK_EQ_HEX(c.y[r][i], 0xABAB);
                for (int64_t j = 0; j < El; j++) CHECK_EQ_HEX((uint32_t)c.etn[r][j], 0xCDCDCDCDu);
            }
            printf("  %-44s -> %s\n", ac->what, run.err[0].message);
        }
        moe_case_free(&c);
    }
    return mm_test_finish("test_mega_moe_audit_validation");
}
