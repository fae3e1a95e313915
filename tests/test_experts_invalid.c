/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_experts_invalid.c: every rule of mm_experts_create and mm_experts_run is enforced with a
 * message naming the parameter and value, and a rejected call writes nothing to y; T = 0 is a valid
 * call that writes nothing. */
#include <stdio.h>

#include "test_experts_common.h"

static moe_case the_case;
static uint16_t *y;

static moe_spec spec(void) {
    moe_spec sp = moe_spec_make((moe_dims){1, 4, 2, 64, 32, 5, 0}, MM_DTYPE_I8, 2, MM_DTYPE_I8, 3);
    sp.lists = 1;
    return sp;
}

/* ---- create ---- */

static void expect_create(const mm_experts_config *cfg, const mm_mega_moe_expert_weights *routed,
                          const char *want) {
    mm_experts *ex = (mm_experts *)(uintptr_t)1;
    mm_error err;
    mm_error_clear(&err);
    mm_status s = mm_experts_create(cfg, routed, NULL, &ex, &err);
    CHECK_STATUS(s, MM_ERR_INVALID_ARGUMENT, &err);
    CHECK(ex == NULL);
    CHECK_STR_CONTAINS(err.message, want);
}

static void check_create(void) {
    const moe_case *c = &the_case;
    moe_tensors *rt = calloc(1, sizeof *rt);
    moe_make_weights(c, &c->ref.ranks[0].routed, rt);
    mm_experts_config ok = {4, 64, 32, NULL, MM_MEGA_MOE_SWIGLU};
    mm_experts_config cfg = ok;
    cfg.num_experts = 0;
    expect_create(&cfg, &rt->desc, "num_experts = 0 must be >= 1");
    cfg = ok;
    cfg.intermediate_hidden = 33;
    expect_create(&cfg, &rt->desc, "intermediate_hidden = 33 must be even");
    cfg = ok;
    cfg.activation = (mm_mega_moe_activation)9;
    expect_create(&cfg, &rt->desc, "activation = 9");
    cfg = ok;
    cfg.num_experts = 5; /* without a map every expert is local: routed count must be num_experts */
    expect_create(&cfg, &rt->desc, "routed count = 4 must be num_experts = 5");
    cfg = ok;
    cfg.hidden = 32;
    expect_create(&cfg, &rt->desc, "routed weight1_list[0] shape (64, 64) must be (32, 64)");
    cfg = ok;
    cfg.activation = MM_MEGA_MOE_GELU; /* gelu needs weight2 with K = 2I */
    expect_create(&cfg, &rt->desc, "routed weight2 has K = 32 but activation gelu needs 64 (I = 32)");
    /* maps: two experts in slots 0 and 1 */
    mm_mega_moe_expert_weights two = rt->desc;
    two.count = 2;
    int32_t dup[4] = {0, -1, 0, -1}, range[4] = {0, 2, -1, -1}, neg[4] = {0, 1, -2, -1},
            unused[4] = {-1, 1, -1, -1};
    cfg = ok;
    cfg.expert_map = dup;
    expect_create(&cfg, &two, "expert_map[2] = 0 repeats expert_map[0] (each slot once)");
    cfg.expert_map = range;
    expect_create(&cfg, &two, "expert_map[1] = 2 is neither -1 nor a slot in [0, 2)");
    cfg.expert_map = neg;
    expect_create(&cfg, &two, "expert_map[2] = -2 is neither -1 nor a slot in [0, 2)");
    cfg.expert_map = unused;
    expect_create(&cfg, &two, "expert_map maps 1 experts but routed count = 2 (slot 0 is unused)");
    mm_mega_moe_expert_weights none = two;
    none.count = 0;
    expect_create(&cfg, &none, "routed count = 0 with an expert_map");
    /* a valid map */
    int32_t good[4] = {-1, 1, 0, -1};
    cfg.expert_map = good;
    mm_experts *ex = NULL;
    mm_error err;
    CHECK_OK(mm_experts_create(&cfg, &two, NULL, &ex, &err), &err);
    mm_experts_free(ex);
    mm_experts_free(NULL);
    CHECK(mm_experts_bytes(NULL) == 0);
    free(rt);
}

/* ---- run ---- */

static mm_experts *handle;

typedef struct call_args {
    mm_tensor x, ids, tw, mask, y;
    mm_experts_inputs in;
    mm_mega_moe_attrs attrs;
} call_args;

static void args_make(call_args *a) {
    const mm_ref_case_rank *k = &the_case.ref.ranks[0];
    int64_t xs[2] = {5, 64}, ks[2] = {5, 2}, ms[1] = {5};
    a->x = mm_tensor_make(MM_DTYPE_BF16, 2, xs, k->x_bf16);
    a->ids = mm_tensor_make(MM_DTYPE_I32, 2, ks, k->topk_ids);
    a->tw = mm_tensor_make(MM_DTYPE_F32, 2, ks, k->topk_weights);
    a->mask = mm_tensor_make(MM_DTYPE_I8, 1, ms, k->x_active_mask);
    a->y = mm_tensor_make(MM_DTYPE_BF16, 2, xs, y);
    a->in = (mm_experts_inputs){&a->x, &a->ids, &a->tw, NULL, 0};
    a->attrs = the_case.sp.attrs;
}

static void expect_run(call_args *a, const char *want) {
    memset(y, 0x5A, 5 * 64 * 2);
    mm_error err;
    mm_error_clear(&err);
    mm_status s = mm_experts_run(handle, &a->attrs, &a->in, &a->y, &err);
    CHECK_STATUS(s, MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, want);
    int64_t touched = 0;
    for (int q = 0; q < 5 * 64; q++) touched += y[q] != 0x5A5A;
    CHECK_EQ_INT(touched, 0);
}

/* One rejected call: the valid arguments in the caller's call_args `a`, one change (an expression on
 * `a`), and the message expected. */
#define EXPECT_RUN_REJECTS(change, want)                                                                     \
    do {                                                                                                     \
        args_make(&a);                                                                                       \
        change;                                                                                              \
        expect_run(&a, want);                                                                                \
    } while (0)

static void check_run(void) {
    call_args a;
    int32_t ids[10];
    memcpy(ids, the_case.ref.ranks[0].topk_ids, sizeof ids);
    EXPECT_RUN_REJECTS(a.x.dtype = MM_DTYPE_I8, "x dtype int8");
    EXPECT_RUN_REJECTS(a.x.shape[1] = 63,
                       "x must have shape (5, 64) (T, H) BF16, F16 or F32 (has 2 dims: 5 x 63)");
    EXPECT_RUN_REJECTS(a.ids.dtype = MM_DTYPE_F32, "topk_ids dtype f32");
    EXPECT_RUN_REJECTS(a.ids.shape[0] = 4,
                       "topk_ids must have shape (5, 2) (T, K) INT32 or INT64, T as x (has 2 dims: 4 x 2)");
    EXPECT_RUN_REJECTS(a.tw.shape[1] = 3, "topk_weights must have shape (5, 2)");
    EXPECT_RUN_REJECTS((a.mask.shape[0] = 6, a.in.x_active_mask = &a.mask),
                       "x_active_mask must have shape (5) (T,) BOOL or INT8 (has 1 dims, dim 0 = 6)");
    EXPECT_RUN_REJECTS(a.y.dtype = MM_DTYPE_F16, "y dtype f16");
    EXPECT_RUN_REJECTS(a.y.shape[0] = 4, "y must have shape (5, 64) (T, H) BF16 or F32 (has 2 dims: 4 x 64)");
    EXPECT_RUN_REJECTS(a.in.flags = 2, "flags = 2");
    args_make(&a);
    int32_t bad[10];
    memcpy(bad, ids, sizeof bad);
    bad[2 * 2 + 1] = 4;
    a.ids.data = bad;
    expect_run(&a, "topk_ids[2][1] = 4 is outside [0, 4)");
    bad[2 * 2 + 1] = -3;
    expect_run(&a, "topk_ids[2][1] = -3 is outside [0, 4) (negative ids are skipped only with");
    int64_t bad64[10];
    for (int q = 0; q < 10; q++) bad64[q] = ids[q];
    bad64[3 * 2 + 0] = (int64_t)1 << 40;
    a.ids.data = bad64;
    a.ids.dtype = MM_DTYPE_I64;
    expect_run(&a, "topk_ids[3][0] = 1099511627776 is outside [0, 4)");
    /* 5 x 2^29 choices: beyond 32-bit row numbers (no data read) */
    EXPECT_RUN_REJECTS(a.ids.shape[1] = (int64_t)1 << 29,
                       "topk_ids holds T x K = 5 x 536870912 choices, above 2147483647");
    /* attributes */
    EXPECT_RUN_REJECTS(a.attrs.combine_comm_mode = 1,
                       "combine_comm_mode = 1: the local experts call has no communication");
    EXPECT_RUN_REJECTS(a.attrs.rank_num_per_server = 2,
                       "rank_num_per_server = 2: the local experts call has no communication");
    EXPECT_RUN_REJECTS((a.attrs.dispatch_quant_mode = 0, a.attrs.dispatch_quant_out_dtype = MM_DTYPE_INVALID),
                       "routed weight dtype int8 does not pair with dispatch dtype none");
    EXPECT_RUN_REJECTS(a.attrs.activation = MM_MEGA_MOE_GELU,
                       "routed weight2 has K = 32 but activation gelu needs 64");
    EXPECT_RUN_REJECTS(a.attrs.topk_weights_type = 2, "topk_weights_type = 2 is not 0 or 1");
    EXPECT_RUN_REJECTS(a.attrs.combine_quant_mode = 1, "combine_quant_mode = 1 is not 0, 3 or 4");
    /* NULLs */
    EXPECT_RUN_REJECTS(a.in.topk_weights = NULL, "inputs x, topk_ids and topk_weights are required");
    mm_error err;
    CHECK_STATUS(mm_experts_run(NULL, &a.attrs, &a.in, &a.y, &err), MM_ERR_INVALID_ARGUMENT, &err);
    args_make(&a);
    CHECK_STATUS(mm_experts_run(handle, &a.attrs, &a.in, NULL, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "y is NULL");
    /* pre-quantized x does not exist here */
    EXPECT_RUN_REJECTS(
        (a.attrs.dispatch_quant_mode = 0, a.attrs.dispatch_quant_out_dtype = MM_DTYPE_FP8_E4M3FN),
        "pre-quantized x");
    /* T = 0: valid, nothing written */
    args_make(&a);
    a.x.shape[0] = a.ids.shape[0] = a.tw.shape[0] = a.y.shape[0] = 0;
    memset(y, 0x5A, 5 * 64 * 2);
    CHECK_OK(mm_experts_run(handle, &a.attrs, &a.in, &a.y, &err), &err);
    CHECK_EQ_HEX(y[0], 0x5A5A);
    /* and the valid call succeeds (the rejections above are about their one change) */
    args_make(&a);
    CHECK_OK(mm_experts_run(handle, &a.attrs, &a.in, &a.y, &err), &err);
}

int main(void) {
    moe_spec sp = spec();
    if (!moe_case_build(&the_case, &sp)) return mm_test_finish("test_experts_invalid");
    y = calloc(5 * 64, 2);
    check_create();
    mm_error err;
    CHECK_OK(ex_create(&the_case, 0, NULL, 0, &handle, &err), &err);
    if (handle) check_run();
    mm_experts_free(handle);
    free(y);
    moe_case_free(&the_case);
    return mm_test_finish("test_experts_invalid");
}
