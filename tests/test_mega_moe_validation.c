/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_mega_moe_validation.c: every validation rule of the operator: the status and a message
 * naming the parameter on every rank, outputs untouched (still the fill pattern), no hang; plus the
 * plan step's report, three identical calls on one buffer, and determinism across pool thread counts
 * (reuse with BS, scenario and layer changing between calls: test_mega_moe_audit_reuse.c). */
#include <float.h>
#include <stdio.h>

#include "core/parallel.h"
#include "test_mega_moe_common.h"

static moe_spec base_spec(void) {
    return moe_spec_make((moe_dims){3, 6, 2, 64, 32, 4, 1}, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, 5);
}

/* Runs sp with `breaker` applied on rank break_rank (-1: none) and expects status + message fragment
 * on every rank, and outputs untouched. */
static void expect_failure(const moe_spec *sp, int break_rank,
                           void (*breaker)(mm_mega_moe_attrs *, mm_tensor *, mm_tensor *, int64_t *),
                           mm_status want, const char *fragment, void (*edit)(moe_spec *)) {
    moe_case c;
    if (!moe_case_build(&c, sp)) return;
    if (edit) edit(&c.sp); /* after the reference ran on the valid spec */
    for (int r = 0; r < sp->ranks; r++) {
        memset(c.y[r], 0xAB, (size_t)(c.ref.ranks[r].bs * sp->hidden) * 2);
        memset(c.etn[r], 0xCD, (size_t)(sp->experts / sp->ranks) * 4);
    }
    moe_run_arg arg;
    memset(&arg, 0, sizeof arg);
    arg.break_rank = break_rank;
    arg.breaker = breaker;
    mm_status st = moe_case_run(&c, &arg);
    CHECK_EQ_INT(st, want);
    for (int r = 0; r < sp->ranks; r++) {
        CHECK_EQ_INT(arg.status[r], want);
        CHECK_STR_CONTAINS(arg.err[r].message, fragment);
        for (int64_t q = 0; q < c.ref.ranks[r].bs * sp->hidden; q++) CHECK_EQ_HEX(c.y[r][q], 0xABAB);
        CHECK_EQ_HEX((uint32_t)c.etn[r][0], 0xCDCDCDCDu);
    }
    printf("  %-40s -> %s\n", fragment, arg.err[0].message);
    moe_case_free(&c);
}

static void bad_id(mm_mega_moe_attrs *a, mm_tensor *ids, mm_tensor *x, int64_t *m) {
    (void)a, (void)x, (void)m;
    ((int32_t *)ids->data)[1 * 2 + 1] = 70;
}
static void dup_id(mm_mega_moe_attrs *a, mm_tensor *ids, mm_tensor *x, int64_t *m) {
    (void)a, (void)x, (void)m;
    int32_t *d = ids->data;
    d[2 * 2 + 1] = d[2 * 2 + 0];
}
static void neg_id(mm_mega_moe_attrs *a, mm_tensor *ids, mm_tensor *x, int64_t *m) {
    (void)a, (void)x, (void)m;
    ((int32_t *)ids->data)[0] = -1;
}
static void other_activation(mm_mega_moe_attrs *a, mm_tensor *ids, mm_tensor *x, int64_t *m) {
    (void)ids, (void)x, (void)m;
    a->activation = MM_MEGA_MOE_SWIGLUSTEP;
}
static void other_clamp(mm_mega_moe_attrs *a, mm_tensor *ids, mm_tensor *x, int64_t *m) {
    (void)ids, (void)x, (void)m;
    a->activation_param_count = 1;
    a->activation_params[0] = 3.0f;
}
static void wrong_hidden(mm_mega_moe_attrs *a, mm_tensor *ids, mm_tensor *x, int64_t *m) {
    (void)a, (void)ids, (void)m;
    x->shape[1] = 32;
}
static void x_f32(mm_mega_moe_attrs *a, mm_tensor *ids, mm_tensor *x, int64_t *m) {
    (void)a, (void)ids, (void)m;
    x->dtype = MM_DTYPE_F32;
}
static void small_capacity(mm_mega_moe_attrs *a, mm_tensor *ids, mm_tensor *x, int64_t *m) {
    (void)a, (void)ids, (void)x;
    *m = 2; /* BS above num_max_tokens_per_rank (and the sizing differs between ranks) */
}

typedef struct attr_case {
    const char *fragment;
    void (*edit)(moe_spec *);
} attr_case;

static void e_mode(moe_spec *s) {
    s->attrs.dispatch_quant_mode = 3;
}
static void e_pair(moe_spec *s) {
    s->attrs.dispatch_quant_mode = 2;
    s->attrs.dispatch_quant_out_dtype = MM_DTYPE_I8; /* BF16 weights with INT8 dispatch */
}
static void e_cq(moe_spec *s) {
    s->attrs.combine_quant_mode = 2;
}
static void e_cc_flat(moe_spec *s) {
    s->attrs.combine_comm_mode = 2;
}
static void e_cc_quant(moe_spec *s) {
    s->attrs.combine_comm_mode = 1;
    s->attrs.combine_quant_mode = 4;
}
static void e_rps(moe_spec *s) {
    s->attrs.rank_num_per_server = 2; /* does not divide 3 */
}
static void e_twt(moe_spec *s) {
    s->attrs.topk_weights_type = 2;
}
static void e_params(moe_spec *s) {
    s->attrs.activation_param_count = 2; /* swiglu takes [] or [clamp] */
}
static void e_clamp_neg(moe_spec *s) {
    s->attrs.activation_param_count = 1;
    s->attrs.activation_params[0] = -1.0f;
}
static void e_gelu(moe_spec *s) {
    s->attrs.activation = MM_MEGA_MOE_GELU;
    s->attrs.activation_param_count = 1;
    s->attrs.activation_params[0] = 5.0f;
}
static void e_situ(moe_spec *s) {
    s->attrs.activation = MM_MEGA_MOE_SITUGLU;
    s->attrs.activation_param_count = 1;
    s->attrs.activation_params[0] = 0.0f;
}
static void e_oai(moe_spec *s) {
    s->attrs.activation = MM_MEGA_MOE_SWIGLUOAI;
    s->attrs.activation_param_count = 3;
    s->attrs.activation_params[0] = 1.0f;
    s->attrs.activation_params[1] = INFINITY;
    s->attrs.activation_params[2] = 1.0f;
}
static void e_aod(moe_spec *s) {
    s->attrs.activation_out_dtype = MM_DTYPE_FP8_E4M3FN; /* A16W16 */
}
static void e_recv(moe_spec *s) {
    s->max_recv = 3; /* with hot: expert 0's rank receives every row */
}

int main(void) {
    moe_spec sp = base_spec();
    expect_failure(&sp, 1, bad_id, MM_ERR_INVALID_ARGUMENT, "topk_ids[1][1] = 70 is outside [0, 6)", NULL);
    expect_failure(&sp, 2, dup_id, MM_ERR_INVALID_ARGUMENT, "repeats topk_ids[2][0]", NULL);
    expect_failure(&sp, 0, neg_id, MM_ERR_INVALID_ARGUMENT, "topk_ids[0][0] = -1", NULL);
    expect_failure(&sp, 2, other_activation, MM_ERR_INVALID_ARGUMENT, "attribute activation differs", NULL);
    expect_failure(&sp, 1, other_clamp, MM_ERR_INVALID_ARGUMENT, "differs between ranks", NULL);
    expect_failure(&sp, 1, wrong_hidden, MM_ERR_INVALID_ARGUMENT, "x must have shape (5, 64)", NULL);
    expect_failure(&sp, 0, x_f32, MM_ERR_INVALID_ARGUMENT, "x dtype f32", NULL);
    moe_spec cap = base_spec();
    cap.max_tokens = 5;
    expect_failure(&cap, 2, small_capacity, MM_ERR_INVALID_ARGUMENT, "sizing num_max_tokens_per_rank differs",
                   NULL);
    /* the message names the ranks that differ, not only the range */
    expect_failure(&cap, 2, small_capacity, MM_ERR_INVALID_ARGUMENT,
                   "(from 2 to 5): it must be equal (rank 0 has 5, rank 2 has 2)", NULL);
    cap.bs[2] = 6;
    expect_failure(&cap, -1, NULL, MM_ERR_INVALID_ARGUMENT, "BS = 6 rows, above num_max_tokens_per_rank = 5",
                   NULL);
    static const attr_case attrs[] = {
        {"dispatch_quant_mode = 3", e_mode},
        {"does not pair with dispatch dtype int8", e_pair},
        {"combine_quant_mode = 2", e_cq},
        {"combine_comm_mode = 2 needs a layered topology", e_cc_flat},
        {"combine_comm_mode = 1 needs a flat topology and combine_quant_mode 0", e_cc_quant},
        {"rank_num_per_server = 2 must divide", e_rps},
        {"topk_weights_type = 2", e_twt},
        {"activation_params has 2 values", e_params},
        {"clamp = -1", e_clamp_neg},
        {"only the placeholder FLT_MAX", e_gelu},
        {"(beta) = 0 must be finite and > 0", e_situ},
        {"alpha = inf", e_oai},
        {"activation_out_dtype = fp8_e4m3fn", e_aod},
        {"above max_recv_token_num = 3", e_recv},
    };
    for (size_t q = 0; q < sizeof attrs / sizeof attrs[0]; q++) {
        moe_spec s = base_spec();
        s.hot = attrs[q].edit == e_recv;
        expect_failure(&s, -1, NULL, MM_ERR_INVALID_ARGUMENT, attrs[q].fragment, attrs[q].edit);
    }

    /* plan reports the rows and scenario; the buffer is reused for 3 calls; 1 vs 2 pool threads */
    {
        moe_spec s = base_spec();
        s.hot = 1;
        s.shared_count = 1;
        moe_case c;
        if (moe_case_build(&c, &s)) {
            moe_run_arg arg;
            memset(&arg, 0, sizeof arg);
            arg.break_rank = -1;
            arg.plan_only = 1;
            CHECK_OK(moe_case_run(&c, &arg), &arg.err[0]);
            int64_t total_active = 0, total_recv = 0;
            for (int r = 0; r < s.ranks; r++) {
                CHECK(strcmp(arg.info[r].scenario, "A16W16") == 0);
                CHECK(strcmp(arg.info[r].shared_scenario, "A16W16") == 0);
                CHECK_EQ_INT(arg.info[r].bs, s.bs[r]);
                total_active += arg.info[r].active_rows;
                total_recv += arg.info[r].recv_rows;
                CHECK(arg.info[r].workspace_bytes > 0);
            }
            CHECK_EQ_INT(total_recv, total_active * s.topk); /* every active row goes to K experts */
            CHECK_EQ_INT(arg.info[0].max_recv_rows, arg.info[0].recv_rows); /* rank 0 holds hot expert 0 */
            memset(&arg, 0, sizeof arg);
            arg.break_rank = -1;
            arg.calls = 3;
            mm_parallel_set_num_threads(1);
            CHECK_OK(moe_case_run(&c, &arg), &arg.err[0]);
            moe_case_check(&c, "reuse, 1 thread");
            uint16_t *y1[3];
            for (int r = 0; r < 3; r++) {
                y1[r] = malloc((size_t)(s.bs[r] * s.hidden) * 2 + 2);
                memcpy(y1[r], c.y[r], (size_t)(s.bs[r] * s.hidden) * 2);
                memset(c.y[r], 0, (size_t)(s.bs[r] * s.hidden) * 2);
            }
            mm_parallel_set_num_threads(2);
            CHECK_OK(moe_case_run(&c, &arg), &arg.err[0]);
            for (int r = 0; r < 3; r++) {
                CHECK(memcmp(y1[r], c.y[r], (size_t)(s.bs[r] * s.hidden) * 2) == 0);
                free(y1[r]);
            }
            moe_case_free(&c);
        }
    }
    return mm_test_finish("test_mega_moe_validation");
}
