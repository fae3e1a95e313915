/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_re_routing_validation.c: every validation rule of MoeReRouting gives
 * MM_ERR_INVALID_ARGUMENT with a message naming the parameter and value, and leaves every output byte
 * as it was (outputs are filled with a sentinel before the call). */
#include "test_re_routing_case.h"

/* The worked example's counts: 2 ranks x 2 experts, A = 7. */
static const int64_t example_counts[4] = {1, 2, 3, 1};

typedef void (*break_fn)(rr_case *c, mm_re_routing_attrs *attrs);

/* Builds a valid example case (BF16 tokens, H 4, F32 scales (A, 2), INT32 counts), breaks one rule,
 * and checks status, message and untouched outputs. */
static void expect_rejected(break_fn breaker, const char *message_part, int line) {
    uint64_t rng = 99;
    rr_case c;
    case_init(&c, MM_DTYPE_BF16, 7, 4, MM_DTYPE_I32, 2, 2, example_counts, MM_DTYPE_F32, 2, 2, &rng);
    mm_re_routing_attrs attrs = mm_re_routing_default_attrs();
    breaker(&c, &attrs);
    mm_error err_record, *err = &err_record;
    mm_error_clear(err);
    mm_status st = mm_re_routing(&c.in, &attrs, &c.out, err);
    int failures_before = mm_test_failed;
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, message_part);
    CHECK(outputs_untouched(&c));
    if (mm_test_failed != failures_before) fprintf(stderr, "  (case at line %d)\n", line);
    case_free(&c);
}
#define EXPECT_REJECTED(breaker, part) expect_rejected(breaker, part, __LINE__)

static void null_inputs(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->in.tokens = NULL;
}
static void tokens_f32(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->tokens.dtype = MM_DTYPE_F32;
}
static void tokens_3d(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->tokens.ndim = 3;
    c->tokens.shape[2] = 1;
}
static void tokens_negative_a(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->tokens.shape[0] = -1;
}
static void tokens_h_zero(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->tokens.shape[1] = 0;
}
static void tokens_a_too_big(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->tokens.shape[0] = (int64_t)INT32_MAX + 1; /* data is never read: the count check comes first */
}
static void tokens_no_data(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    free(c->tokens.data);
    c->tokens.data = NULL;
}
static void counts_null(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->in.expert_token_num_per_rank = NULL;
}
static void counts_f32(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->counts.dtype = MM_DTYPE_F32;
}
static void counts_1d(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->counts.ndim = 1;
    c->counts.shape[0] = 4;
}
static void counts_negative(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    ((int32_t *)c->counts.data)[2] = -3; /* [1][0] */
}
static void counts_sum_short(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    ((int32_t *)c->counts.data)[3] = 0; /* sum 6 */
}
static void counts_sum_over(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    ((int32_t *)c->counts.data)[1] = 5; /* running sum passes 7 at [1][0] */
}
static void scales_bf16(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->scales.dtype = MM_DTYPE_BF16;
}
static void scales_wrong_rows(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->scales.shape[0] = 6;
}
static void scales_no_data(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    free(c->scales.data);
    c->scales.data = NULL;
}
static void bad_num_type(rr_case *c, mm_re_routing_attrs *a) {
    (void)c;
    a->expert_token_num_type = 2;
}
static void bad_idx_type(rr_case *c, mm_re_routing_attrs *a) {
    (void)c;
    a->idx_type = -1;
}
static void out_tokens_null(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->out.permute_tokens = NULL;
}
static void out_tokens_f16(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->out_tokens.dtype = MM_DTYPE_F16;
}
static void out_tokens_shape(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->out_tokens.shape[1] = 3;
}
static void out_tokens_no_data(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->out.permute_tokens = &c->spare;
    c->spare = c->out_tokens;
    c->spare.data = NULL;
}
static void out_scales_missing(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->out.permute_per_token_scales = NULL;
}
static void out_scales_shape(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->out_scales.ndim = 1;
}
static void out_idx_i64(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->out_idx.dtype = MM_DTYPE_I64;
}
static void out_num_i64(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->out_num.dtype = MM_DTYPE_I64;
}
static void out_num_shape(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->out_num.shape[0] = 3;
}
static void out_overlaps_input(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->spare = c->out_idx;
    c->spare.data = (uint8_t *)c->tokens.data + 8; /* inside tokens */
    c->out.permute_token_idx = &c->spare;
}
static void outputs_alias(rr_case *c, mm_re_routing_attrs *a) {
    (void)a;
    c->spare = c->out_num;
    c->spare.data = c->out_tokens.data; /* expert_token_num inside permute_tokens */
    c->out.expert_token_num = &c->spare;
}

static void test_rules(void) {
    EXPECT_REJECTED(null_inputs, "tokens is NULL");
    EXPECT_REJECTED(tokens_f32, "tokens dtype f32 is not one of");
    EXPECT_REJECTED(tokens_3d, "tokens has 3 dimensions, expected 2");
    EXPECT_REJECTED(tokens_negative_a, "tokens.shape[0] = -1 is negative");
    EXPECT_REJECTED(tokens_h_zero, "tokens.shape[1] = H = 0 must be positive");
    EXPECT_REJECTED(tokens_a_too_big, "A = 2147483648 exceeds 2147483647");
    EXPECT_REJECTED(tokens_no_data, "tokens.data is NULL but the tensor holds 56 bytes");
    EXPECT_REJECTED(counts_null, "expert_token_num_per_rank is NULL");
    EXPECT_REJECTED(counts_f32, "expert_token_num_per_rank dtype f32 is not int32 or int64");
    EXPECT_REJECTED(counts_1d, "expert_token_num_per_rank has 1 dimensions, expected 2 (N, E)");
    EXPECT_REJECTED(counts_negative, "expert_token_num_per_rank[1][0] = -3 is negative");
    EXPECT_REJECTED(counts_sum_short,
                    "sum of expert_token_num_per_rank = 6 differs from the token count A = 7");
    EXPECT_REJECTED(counts_sum_over, "through [1][0] exceeds the token count A = 7");
    EXPECT_REJECTED(scales_bf16, "per_token_scales dtype bf16 is not f32 or e8m0");
    EXPECT_REJECTED(scales_wrong_rows, "per_token_scales.shape[0] = 6 differs from the token count A = 7");
    EXPECT_REJECTED(scales_no_data, "per_token_scales.data is NULL");
    EXPECT_REJECTED(bad_num_type, "expert_token_num_type = 2 is not 0");
    EXPECT_REJECTED(bad_idx_type, "idx_type = -1 is not 0 (gather) or 1 (scatter)");
    EXPECT_REJECTED(out_tokens_null, "output permute_tokens is NULL");
    EXPECT_REJECTED(out_tokens_f16, "output permute_tokens dtype f16 differs from the required bf16");
    EXPECT_REJECTED(out_tokens_shape, "output permute_tokens shape (7, 3) differs from the required (7, 4)");
    EXPECT_REJECTED(out_tokens_no_data, "output permute_tokens.data is NULL but the tensor holds 56 bytes");
    EXPECT_REJECTED(out_scales_missing, "output permute_per_token_scales is NULL");
    EXPECT_REJECTED(out_scales_shape,
                    "output permute_per_token_scales shape (7) differs from the required (7, 2)");
    EXPECT_REJECTED(out_idx_i64, "output permute_token_idx dtype int64 differs from the required int32");
    EXPECT_REJECTED(out_num_i64, "output expert_token_num dtype int64 differs from the required int32");
    EXPECT_REJECTED(out_num_shape, "output expert_token_num shape (3) differs from the required (2)");
    EXPECT_REJECTED(out_overlaps_input, "output permute_token_idx overlaps input tokens");
    EXPECT_REJECTED(outputs_alias, "output expert_token_num overlaps output permute_tokens");
}

static void test_null_containers(void) {
    uint64_t rng = 1;
    rr_case c;
    case_init(&c, MM_DTYPE_BF16, 7, 4, MM_DTYPE_I32, 2, 2, example_counts, MM_DTYPE_F32, 0, 0, &rng);
    mm_error err_record, *err = &err_record;
    CHECK_STATUS(mm_re_routing(NULL, NULL, &c.out, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "inputs (in) is NULL");
    CHECK_STATUS(mm_re_routing(&c.in, NULL, NULL, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "outputs (out) is NULL");
    CHECK(outputs_untouched(&c));
    /* output_shapes applies the same input rules */
    ((int32_t *)c.counts.data)[2] = -3;
    mm_tensor pt;
    CHECK_STATUS(mm_re_routing_output_shapes(&c.in, NULL, &pt, NULL, NULL, NULL, err),
                 MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "expert_token_num_per_rank[1][0] = -3 is negative");
    /* a NULL error record is allowed */
    CHECK_EQ_INT(mm_re_routing(&c.in, NULL, &c.out, NULL), MM_ERR_INVALID_ARGUMENT);
    CHECK(outputs_untouched(&c));
    case_free(&c);
}

/* INT64 counts are read as 64-bit: a count beyond int32 is reported with its full value. */
static void test_int64_counts(void) {
    const int64_t huge[4] = {1, 2, (int64_t)1 << 40, 1};
    uint64_t rng = 2;
    rr_case c;
    case_init(&c, MM_DTYPE_I8, 7, 4, MM_DTYPE_I64, 2, 2, huge, MM_DTYPE_F32, 0, 0, &rng);
    mm_error err_record, *err = &err_record;
    CHECK_STATUS(mm_re_routing(&c.in, NULL, &c.out, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "through [1][0] exceeds the token count A = 7");
    CHECK(outputs_untouched(&c));
    ((int64_t *)c.counts.data)[2] = INT64_MIN;
    CHECK_STATUS(mm_re_routing(&c.in, NULL, &c.out, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "expert_token_num_per_rank[1][0] = -9223372036854775808 is negative");
    CHECK(outputs_untouched(&c));
    case_free(&c);
}

int main(void) {
    test_rules();
    test_null_containers();
    test_int64_counts();
    return mm_test_finish("test_re_routing_validation");
}
