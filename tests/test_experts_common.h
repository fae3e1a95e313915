/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_experts_common.h: the local experts call (megamoe/experts.h) on the random MegaMoE cases
 * of test_mega_moe_common.h: a handle from rank 0's weights (all experts, or a subset through an
 * expert map), a call on rank 0's inputs (header-only: the test glob compiles test_*.c files only). */
#ifndef MEGAMOE_TEST_EXPERTS_COMMON_H
#define MEGAMOE_TEST_EXPERTS_COMMON_H

#include "megamoe/experts.h"
#include "test_mega_moe_common.h"

/* Handle over rank 0's routed experts: all of them (map NULL), or the n_local experts globals[] in slots
 * 0.. (map built here; needs per-expert lists, so the case must have sp.lists = 1). with_shared: rank
 * 0's shared experts too. */
static inline mm_status ex_create(const moe_case *c, int n_local, const int *globals, int with_shared,
                                  mm_experts **out, mm_error *err) {
    const moe_spec *sp = &c->sp;
    const mm_ref_case_rank *k = &c->ref.ranks[0];
    moe_tensors *rt = calloc(1, sizeof *rt), *st = calloc(1, sizeof *st);
    moe_make_weights(c, &k->routed, rt);
    moe_make_weights(c, &k->shared, st);
    int32_t map[8];
    mm_mega_moe_expert_weights routed = rt->desc;
    mm_tensor l[6][8];
    const mm_tensor *full[6] = {rt->l_w1, rt->l_w2, rt->l_s1, rt->l_s2, rt->l_b1, rt->l_b2};
    const mm_tensor **dst[6] = {&routed.weight1_list,        &routed.weight2_list,
                                &routed.weight_scales1_list, &routed.weight_scales2_list,
                                &routed.bias1_list,          &routed.bias2_list};
    if (globals) {
        for (int g = 0; g < sp->experts; g++) map[g] = -1;
        for (int s = 0; s < n_local; s++) {
            map[globals[s]] = s;
            for (int q = 0; q < 6; q++) l[q][s] = full[q][globals[s]];
        }
        routed.count = n_local;
        for (int q = 0; q < 6; q++)
            if (*dst[q]) *dst[q] = l[q];
    }
    mm_experts_config cfg = {sp->experts, sp->hidden, sp->inter, globals ? map : NULL, sp->attrs.activation};
    mm_status s =
        mm_experts_create(&cfg, &routed, with_shared && k->shared.count ? &st->desc : NULL, out, err);
    free(rt);
    free(st);
    return s;
}

/* Rank 0's inputs as tensors; ids may be replaced (ids32 / ids64), x by another dtype. */
typedef struct ex_inputs {
    mm_tensor x, ids, tw, mask;
    uint16_t *wb;
    mm_experts_inputs in;
} ex_inputs;

static inline void ex_inputs_make(const moe_case *c, ex_inputs *e) {
    const moe_spec *sp = &c->sp;
    const mm_ref_case_rank *k = &c->ref.ranks[0];
    int64_t bs = k->bs, H = sp->hidden, K = sp->topk;
    int64_t xs[2] = {bs, H}, ks[2] = {bs, K}, ms[1] = {bs};
    memset(e, 0, sizeof *e);
    e->x = mm_tensor_make(MM_DTYPE_BF16, 2, xs, k->x_bf16);
    e->ids = mm_tensor_make(MM_DTYPE_I32, 2, ks, k->topk_ids);
    e->tw = mm_tensor_make(MM_DTYPE_F32, 2, ks, k->topk_weights);
    if (sp->bf16_weights) {
        e->wb = malloc((size_t)(bs * K + 1) * 2);
        for (int64_t q = 0; q < bs * K; q++) e->wb[q] = mm_f32_to_bf16(k->topk_weights[q]);
        e->tw = mm_tensor_make(MM_DTYPE_BF16, 2, ks, e->wb);
    }
    e->mask = mm_tensor_make(MM_DTYPE_I8, 1, ms, k->x_active_mask);
    e->in = (mm_experts_inputs){&e->x, &e->ids, &e->tw, sp->masked ? &e->mask : NULL, 0};
}

static inline void ex_inputs_free(ex_inputs *e) {
    free(e->wb);
}

/* y (bs, H) BF16 of one call; returns the status. */
static inline mm_status ex_call(const mm_experts *ex, const moe_case *c, const mm_experts_inputs *in,
                                uint16_t *y, mm_error *err) {
    int64_t ys[2] = {c->ref.ranks[0].bs, c->sp.hidden};
    mm_tensor yt = mm_tensor_make(MM_DTYPE_BF16, 2, ys, y);
    mm_mega_moe_attrs attrs = c->sp.attrs;
    return mm_experts_run(ex, &attrs, in, &yt, err);
}

/* Number of elements where a and b differ in bits (the first one reported). */
static inline int64_t ex_bits_differ(const uint16_t *a, const uint16_t *b, int64_t n, const char *label) {
    int64_t d = 0;
    for (int64_t q = 0; q < n; q++)
        if (a[q] != b[q]) {
            if (d == 0)
                fprintf(stderr, "  %s: element %lld: 0x%04x vs 0x%04x\n", label, (long long)q, a[q], b[q]);
            d++;
        }
    return d;
}

#endif
