/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_mega_moe_audit_reuse.c: one buffer serves a sequence of calls and layers (the original's
 * symmetric buffer, created once): BS changing per call and per rank (0, 1, the maximum), different
 * scenarios, activations, shared experts and combine modes from call to call, each call against its
 * own float64 reference; and a layer run again after others gives the same bits as the first time
 * (nothing of an earlier call leaks into a later one). */
#include <float.h>
#include <stdio.h>

#include "core/error.h"
#include "test_mega_moe_common.h"

enum { RANKS = 3, MAX_TOKENS = 7, LAYERS = 5 };

/* The common sizing: E = 6, K = 2, H = 64, I = 32, num_max_tokens_per_rank = 7. */
static moe_spec layer_spec(int which) {
    moe_dims d = {RANKS, 6, 2, 64, 32, 0, 0};
    moe_spec sp = moe_spec_make(d, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, 900 + (uint64_t)which);
    sp.max_tokens = MAX_TOKENS;
    static const int64_t bs[LAYERS][RANKS] = {{5, 0, 7}, {1, 6, 2}, {7, 7, 7}, {0, 3, 0}, {2, 7, 4}};
    for (int r = 0; r < RANKS; r++) sp.bs[r] = bs[which][r];
    switch (which) {
    case 0: break; /* A16W16, swiglu */
    case 1:        /* A8W8-INT with a shared A8W4-INT expert, weights after the activation */
        moe_set_quant(&sp, MM_DTYPE_I8, 2, MM_DTYPE_I8);
        sp.shared = MM_DTYPE_INT4;
        sp.shared_count = 1;
        sp.attrs.topk_weights_type = 1;
        break;
    case 2: /* A8W8-FP E4M3 at full capacity, combine quantized, hot expert */
        moe_set_quant(&sp, MM_DTYPE_FP8_E4M3FN, 4, MM_DTYPE_FP8_E4M3FN);
        sp.attrs.combine_quant_mode = 4;
        sp.hot = 1;
        break;
    case 3: /* A16W16 gelu with two shared experts, only rank 1 has tokens */
        sp.attrs.activation = MM_MEGA_MOE_GELU;
        sp.shared_count = 2;
        break;
    default: /* A4W4-FP, per-rank reduction, masked rows */
        moe_set_quant(&sp, MM_DTYPE_FP4_E2M1, 4, MM_DTYPE_FP4_E2M1);
        sp.attrs.combine_comm_mode = 1;
        sp.masked = 1;
        break;
    }
    return sp;
}

/* The calls in order: every layer once, then layer 0 and layer 2 again. */
static const int call_order[] = {0, 1, 2, 3, 4, 0, 2};
enum { CALLS = sizeof call_order / sizeof call_order[0] };

typedef struct reuse_run {
    moe_case *cases;           /* LAYERS */
    uint16_t *y[CALLS][RANKS]; /* each call's y, kept */
    int32_t *etn[CALLS][RANKS];
    mm_status status[RANKS];
} reuse_run;

static mm_status one_call(mm_comm *comm, mm_mega_moe_buffer *buf, moe_case *c, uint16_t *y_out,
                          int32_t *etn_out, mm_error *err) {
    const moe_spec *sp = &c->sp;
    int r = mm_comm_rank(comm);
    mm_ref_case_rank *k = &c->ref.ranks[r];
    int64_t H = sp->hidden, K = sp->topk, bs = k->bs, El = sp->experts / sp->ranks;
    int64_t xs[2] = {bs, H}, ks[2] = {bs, K}, ms[1] = {bs}, es[1] = {El};
    mm_tensor x = mm_tensor_make(MM_DTYPE_BF16, 2, xs, k->x_bf16);
    mm_tensor ids = mm_tensor_make(MM_DTYPE_I32, 2, ks, k->topk_ids);
    mm_tensor tw = mm_tensor_make(MM_DTYPE_F32, 2, ks, k->topk_weights);
    mm_tensor mask = mm_tensor_make(MM_DTYPE_I8, 1, ms, k->x_active_mask);
    mm_tensor y = mm_tensor_make(MM_DTYPE_BF16, 2, xs, y_out);
    mm_tensor etn = mm_tensor_make(MM_DTYPE_I32, 1, es, etn_out);
    mm_mega_moe_inputs in = {&x, NULL, &ids, &tw, sp->masked ? &mask : NULL};
    mm_mega_moe_outputs out = {&y, &etn};
    moe_tensors *rt = calloc(1, sizeof *rt), *st = calloc(1, sizeof *st);
    mm_mega_moe_weights *w = NULL;
    mm_status s = rt && st ? MM_OK : MM_ERR_OUT_OF_MEMORY;
    if (s == MM_OK) {
        moe_make_weights(c, &k->routed, rt);
        moe_make_weights(c, &k->shared, st);
        s = mm_mega_moe_weights_create(buf, &rt->desc, k->shared.count ? &st->desc : NULL, &w, err);
    }
    s = mm_comm_agree(comm, s, err);
    if (s == MM_OK) s = mm_mega_moe_run(buf, w, &sp->attrs, &in, &out, err);
    mm_mega_moe_weights_free(w);
    free(rt);
    free(st);
    return s;
}

static mm_status reuse_rank(mm_comm *comm, void *arg_, mm_error *err) {
    reuse_run *run = arg_;
    int r = mm_comm_rank(comm);
    const moe_spec *sp = &run->cases[0].sp;
    mm_mega_moe_sizing sizing = {sp->experts, MAX_TOKENS, sp->topk, sp->hidden, sp->inter, 0};
    mm_mega_moe_buffer *buf = NULL;
    mm_status s = mm_mega_moe_buffer_create(comm, &sizing, &buf, err);
    /* The pre-allocation estimate is the library's own sizing: exactly what create allocated. */
    if (s == MM_OK && mm_mega_moe_buffer_bytes_for(&sizing, mm_comm_size(comm), 0) !=
                          mm_mega_moe_buffer_symmetric_bytes(buf))
        s = mm_fail(err, MM_ERR_INTERNAL, "mm_mega_moe_buffer_bytes_for = %zu, the buffer holds %zu",
                    mm_mega_moe_buffer_bytes_for(&sizing, mm_comm_size(comm), 0),
                    mm_mega_moe_buffer_symmetric_bytes(buf));
    for (int q = 0; s == MM_OK && q < CALLS; q++)
        s = one_call(comm, buf, &run->cases[call_order[q]], run->y[q][r], run->etn[q][r], err);
    mm_status fs = mm_mega_moe_buffer_free(buf, s == MM_OK ? err : NULL);
    if (s == MM_OK) s = fs;
    run->status[r] = s;
    return s;
}

int main(void) {
    static moe_case cases[LAYERS];
    int built = 1;
    for (int l = 0; l < LAYERS; l++) {
        moe_spec sp = layer_spec(l);
        built &= moe_case_build(&cases[l], &sp);
    }
    if (!built) return mm_test_finish("test_mega_moe_audit_reuse");
    static reuse_run run;
    run.cases = cases;
    for (int q = 0; q < CALLS; q++)
        for (int r = 0; r < RANKS; r++) {
            /* a fill pattern: a row the call does not write would show up */
            size_t ybytes = (size_t)(cases[call_order[q]].ref.ranks[r].bs * 64) * 2;
            run.y[q][r] = malloc(ybytes + 2);
            memset(run.y[q][r], 0xA5, ybytes + 2);
            run.etn[q][r] = malloc(2 * 4);
            memset(run.etn[q][r], 0xA5, 2 * 4);
        }
    mm_error err;
    mm_error_clear(&err);
    CHECK_OK(mm_comm_run_threads(RANKS, reuse_rank, &run, NULL, NULL, &err), &err);
    for (int r = 0; r < RANKS; r++) CHECK_EQ_INT(run.status[r], MM_OK);
    for (int q = 0; q < CALLS; q++) {
        moe_case *c = &cases[call_order[q]];
        for (int r = 0; r < RANKS; r++) {
            size_t ybytes = (size_t)(c->ref.ranks[r].bs * 64) * 2;
            memcpy(c->y[r], run.y[q][r], ybytes);
            memcpy(c->etn[r], run.etn[q][r], 2 * 4);
        }
        char label[64];
        snprintf(label, sizeof label, "call %d (layer %d)", q, call_order[q]);
        double e = moe_case_check(c, label);
        printf("  %-24s BS %lld/%lld/%lld  error %.3g\n", label, (long long)c->sp.bs[0],
               (long long)c->sp.bs[1], (long long)c->sp.bs[2], e);
    }
    /* the repeated layers give the same bits as their first call */
    for (int q = LAYERS; q < CALLS; q++) {
        int first = call_order[q];
        for (int r = 0; r < RANKS; r++) {
            size_t ybytes = (size_t)(cases[first].ref.ranks[r].bs * 64) * 2;
            CHECK(memcmp(run.y[q][r], run.y[first][r], ybytes) == 0);
            CHECK(memcmp(run.etn[q][r], run.etn[first][r], 2 * 4) == 0);
        }
    }
    for (int q = 0; q < CALLS; q++)
        for (int r = 0; r < RANKS; r++) {
            free(run.y[q][r]);
            free(run.etn[q][r]);
        }
    for (int l = 0; l < LAYERS; l++) moe_case_free(&cases[l]);
    return mm_test_finish("test_mega_moe_audit_reuse");
}
