/* SPDX-License-Identifier: Apache-2.0 */
/* ops/re_routing_check.c: every validation rule of MoeReRouting, applied before anything is written.
 *
 * The rules are listed in docs/operators.md ("MoeReRouting"). Each failure names the tensor or attribute,
 * its value and the rule. The result of a successful check is the small geometry record the copy needs
 * (A, H, N, E, row sizes), so the copy never re-derives anything from unchecked descriptors. */
#include "ops/re_routing_check.h"

#include <inttypes.h>

#include "core/error.h"
#include "ops/common/tensor_check.h"

static int is_token_dtype(mm_dtype d) {
    switch (d) {
    case MM_DTYPE_F16:
    case MM_DTYPE_BF16:
    case MM_DTYPE_I8:
    case MM_DTYPE_FP8_E5M2:
    case MM_DTYPE_FP8_E4M3FN:
    case MM_DTYPE_HIFLOAT8:
    case MM_DTYPE_FP4_E2M1:
    case MM_DTYPE_FP4_E1M2: return 1;
    default: return 0;
    }
}

static int64_t read_count(const mm_tensor *counts, int64_t i) {
    if (counts->dtype == MM_DTYPE_I32) return ((const int32_t *)counts->data)[i];
    return ((const int64_t *)counts->data)[i];
}

static mm_status check_tokens(const mm_tensor *tokens, mm_rr_geometry *g, mm_error *err) {
    mm_status st = mm_op_check_present(tokens, "tokens", MM_OP_WORDS_RR, err);
    if (st != MM_OK) return st;
    if (!is_token_dtype(tokens->dtype))
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "tokens dtype %s is not one of f16, bf16, int8, fp8_e5m2, fp8_e4m3fn, hifloat8, fp4_e2m1, "
            "fp4_e1m2",
            mm_dtype_name(tokens->dtype));
    st = mm_op_check_layout(tokens, "tokens", err);
    if (st != MM_OK) return st;
    if (tokens->ndim != 2)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tokens has %d dimensions, expected 2 (A, H)",
                       tokens->ndim);
    g->a = tokens->shape[0];
    g->h = tokens->shape[1];
    if (g->h <= 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tokens.shape[1] = H = %" PRId64 " must be positive",
                       g->h);
    if (g->a > INT32_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "tokens.shape[0] = A = %" PRId64 " exceeds %d: permute_token_idx is int32", g->a,
                       INT32_MAX);
    g->token_row_bytes = mm_dtype_row_bytes(tokens->dtype, g->h);
    return MM_OK;
}

static mm_status check_scales(const mm_tensor *scales, mm_rr_geometry *g, mm_error *err) {
    g->scale_row_bytes = 0;
    if (!scales) return MM_OK;
    if (scales->dtype != MM_DTYPE_F32 && scales->dtype != MM_DTYPE_E8M0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "per_token_scales dtype %s is not f32 or e8m0",
                       mm_dtype_name(scales->dtype));
    mm_status st = mm_op_check_layout(scales, "per_token_scales", err);
    if (st != MM_OK) return st;
    if (scales->shape[0] != g->a)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "per_token_scales.shape[0] = %" PRId64 " differs from the token count A = %" PRId64,
                       scales->shape[0], g->a);
    /* Bytes per token from the trailing dims alone, so that A = 0 still gives the row size. */
    int64_t row_elems = 1;
    for (int i = 1; i < scales->ndim; i++) {
        if (scales->shape[i] != 0 && row_elems > INT64_MAX / 4 / scales->shape[i])
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "per_token_scales is too large: a row overflows int64");
        row_elems *= scales->shape[i];
    }
    g->scale_row_bytes = row_elems * (mm_dtype_bits(scales->dtype) / 8);
    return MM_OK;
}

static mm_status check_counts(const mm_tensor *counts, mm_rr_geometry *g, mm_error *err) {
    mm_status st = mm_op_check_present(counts, "expert_token_num_per_rank", MM_OP_WORDS_RR, err);
    if (st != MM_OK) return st;
    if (counts->dtype != MM_DTYPE_I32 && counts->dtype != MM_DTYPE_I64)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "expert_token_num_per_rank dtype %s is not int32 or int64",
                       mm_dtype_name(counts->dtype));
    st = mm_op_check_layout(counts, "expert_token_num_per_rank", err);
    if (st != MM_OK) return st;
    if (counts->ndim != 2)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "expert_token_num_per_rank has %d dimensions, expected 2 (N, E)", counts->ndim);
    g->n = counts->shape[0];
    g->e = counts->shape[1];
    /* All counts are non-negative once checked, so the running sum only grows: stopping as soon as it
     * passes A both reports the first place it goes wrong and keeps it far from int64 overflow. One
     * flat loop over the N x E entries (a count that fits int64, as the byte size was checked): N may
     * be huge when E = 0, and a loop over the rows alone would then spin for nothing. */
    int64_t sum = 0, entries = g->n * g->e;
    for (int64_t i = 0; i < entries; i++) {
        int64_t c = read_count(counts, i);
        if (c < 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "expert_token_num_per_rank[%" PRId64 "][%" PRId64 "] = %" PRId64 " is negative",
                           i / g->e, i % g->e, c);
        if (c > g->a - sum)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "sum of expert_token_num_per_rank through [%" PRId64 "][%" PRId64
                           "] exceeds the token count A = %" PRId64 " (tokens.shape[0])",
                           i / g->e, i % g->e, g->a);
        sum += c;
    }
    if (sum != g->a)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "sum of expert_token_num_per_rank = %" PRId64
                       " differs from the token count A = %" PRId64 " (tokens.shape[0])",
                       sum, g->a);
    return MM_OK;
}

static mm_status check_attrs(const mm_re_routing_attrs *attrs, mm_error *err) {
    if (attrs->expert_token_num_type != MM_RE_ROUTING_TOKEN_NUM_CUMULATIVE &&
        attrs->expert_token_num_type != MM_RE_ROUTING_TOKEN_NUM_COUNTS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "expert_token_num_type = %" PRId64 " is not 0 (cumulative sum) or 1 (counts)",
                       attrs->expert_token_num_type);
    if (attrs->idx_type != MM_RE_ROUTING_IDX_GATHER && attrs->idx_type != MM_RE_ROUTING_IDX_SCATTER)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "idx_type = %" PRId64 " is not 0 (gather) or 1 (scatter)", attrs->idx_type);
    return MM_OK;
}

mm_status mm_rr_check_inputs(const mm_re_routing_inputs *in, const mm_re_routing_attrs *attrs,
                             mm_rr_geometry *g, mm_error *err) {
    if (!in) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "inputs (in) is NULL");
    mm_status st = check_tokens(in->tokens, g, err);
    if (st == MM_OK) st = check_counts(in->expert_token_num_per_rank, g, err);
    if (st == MM_OK) st = check_scales(in->per_token_scales, g, err);
    if (st == MM_OK) st = check_attrs(attrs, err);
    return st;
}

void mm_rr_fill_output_shapes(const mm_re_routing_inputs *in, const mm_rr_geometry *g,
                              mm_tensor *permute_tokens, mm_tensor *permute_per_token_scales,
                              mm_tensor *permute_token_idx, mm_tensor *expert_token_num) {
    if (permute_tokens) *permute_tokens = mm_tensor_make(in->tokens->dtype, 2, in->tokens->shape, NULL);
    if (permute_per_token_scales) {
        const mm_tensor *s = in->per_token_scales;
        *permute_per_token_scales = s ? mm_tensor_make(s->dtype, s->ndim, s->shape, NULL)
                                      : mm_tensor_make(MM_DTYPE_INVALID, 0, NULL, NULL);
    }
    if (permute_token_idx) *permute_token_idx = mm_tensor_make(MM_DTYPE_I32, 1, &g->a, NULL);
    if (expert_token_num)
        *expert_token_num = mm_tensor_make(in->expert_token_num_per_rank->dtype, 1, &g->e, NULL);
}

typedef struct byte_range {
    const char *name;
    uintptr_t begin, end;
} byte_range;

static byte_range range_of(const mm_tensor *t, const char *name) {
    byte_range r = {name, 0, 0};
    if (t && t->data) {
        r.begin = (uintptr_t)t->data;
        r.end = r.begin + (uintptr_t)mm_tensor_nbytes(t);
    }
    return r;
}

/* memcpy between overlapping buffers is undefined, and an output overlapping an input would be read
 * after being partly overwritten: both are rejected. */
static mm_status check_no_overlap(const mm_re_routing_inputs *in, const mm_re_routing_outputs *out,
                                  mm_error *err) {
    byte_range ranges[7] = {
        range_of(in->tokens, "tokens"),
        range_of(in->expert_token_num_per_rank, "expert_token_num_per_rank"),
        range_of(in->per_token_scales, "per_token_scales"),
        range_of(out->permute_tokens, "permute_tokens"),
        range_of(in->per_token_scales ? out->permute_per_token_scales : NULL, "permute_per_token_scales"),
        range_of(out->permute_token_idx, "permute_token_idx"),
        range_of(out->expert_token_num, "expert_token_num"),
    };
    for (int o = 3; o < 7; o++)
        for (int other = 0; other < o; other++) {
            const byte_range *x = &ranges[o], *y = &ranges[other];
            if (x->begin < x->end && y->begin < y->end && x->begin < y->end && y->begin < x->end)
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "output %s overlaps %s%s in memory", x->name,
                               other < 3 ? "input " : "output ", y->name);
        }
    return MM_OK;
}

mm_status mm_rr_check_outputs(const mm_re_routing_inputs *in, const mm_rr_geometry *g,
                              const mm_re_routing_outputs *out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "outputs (out) is NULL");
    mm_tensor want_tokens, want_scales, want_idx, want_num;
    mm_rr_fill_output_shapes(in, g, &want_tokens, &want_scales, &want_idx, &want_num);
    mm_status st = mm_op_check_like(out->permute_tokens, &want_tokens, "output permute_tokens", err);
    if (st == MM_OK && in->per_token_scales)
        st = mm_op_check_like(out->permute_per_token_scales, &want_scales, "output permute_per_token_scales",
                              err);
    if (st == MM_OK)
        st = mm_op_check_like(out->permute_token_idx, &want_idx, "output permute_token_idx", err);
    if (st == MM_OK) st = mm_op_check_like(out->expert_token_num, &want_num, "output expert_token_num", err);
    if (st == MM_OK) st = check_no_overlap(in, out, err);
    return st;
}
