/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_mega_moe_weight_ext.c: MegaMoE's checkpoint-format extensions (docs/weight_formats.md)
 * against the float64 reference (support/ref, which implements them with its own format code): biases
 * for every weight format, weight1_interleave, and the A16 weight-only scenarios (A16W8-FP8 block
 * scaled, A16W4-MX, A16W4-INT with zero points), each x {transposed or not, bias or not, interleave or
 * not, shared experts, lists} on 1 and 3 thread ranks; the bit equality of each A16 scenario with A16W16
 * run on the weights dequantized to BF16 by the rule (same bits: the GEMM rule makes them identical);
 * and the validation messages of the new fields. */
#include <stdio.h>

#include "test_mega_moe_common.h"

static moe_spec base_spec(const mm_moe_scenario_row *sc, int ranks, uint64_t seed) {
    return moe_spec_scenario((moe_dims){ranks, 2 * ranks, 2, 96, 40, 6, 3}, sc, seed);
}

static void run_check(const moe_spec *sp, const char *label) {
    moe_case c;
    if (!moe_case_build(&c, sp)) return;
    moe_run_arg arg;
    mm_status st = moe_case_run_ok(&c, &arg);
    double e = st == MM_OK ? moe_case_check(&c, label) : -1;
    /* the unfused path (separate activation pass, plain GEMM1 packing) adds the bias at another place:
     * the same F32 operations, so the same bits */
    if (st == MM_OK) {
        uint16_t *fused[8];
        for (int r = 0; r < sp->ranks; r++) {
            size_t bytes = (size_t)(sp->bs[r] * sp->hidden) * 2;
            fused[r] = malloc(bytes + 2);
            memcpy(fused[r], c.y[r], bytes);
        }
        arg.unfused = 1;
        st = moe_case_run(&c, &arg);
        CHECK_OK(st, &arg.err[0]);
        for (int r = 0; r < sp->ranks; r++) {
            size_t bytes = (size_t)(sp->bs[r] * sp->hidden) * 2;
            if (st == MM_OK && memcmp(fused[r], c.y[r], bytes) != 0) {
                CHECK(!"fused and unfused paths give the same bits");
                fprintf(stderr, "  %s rank %d: unfused bits differ\n", label, r);
            }
            free(fused[r]);
        }
    }
    printf("  %-64s error %.3g\n", label, e);
    moe_case_free(&c);
}

/* The bias must move y: the same case without bias differs (so a dropped bias cannot pass). */
static void check_bias_matters(const moe_spec *sp, const char *label) {
    moe_spec nb = *sp;
    nb.with_bias = 0;
    moe_case a, b;
    if (!moe_case_build(&a, sp)) return;
    if (!moe_case_build(&b, &nb)) {
        moe_case_free(&a);
        return;
    }
    int64_t differ = 0;
    for (int r = 0; r < sp->ranks; r++)
        for (int64_t x = 0; x < sp->bs[r] * sp->hidden; x++)
            differ += a.ref.ranks[r].y[x] != b.ref.ranks[r].y[x];
    if (!(differ > 0)) {
        CHECK(differ > 0);
        fprintf(stderr, "  %s: the bias does not change the reference's y\n", label);
    }
    moe_case_free(&a);
    moe_case_free(&b);
}

/* Runs A16 case q, then A16W16 on the same inputs with BF16 weights holding the rule's dequantized values
 * (the same biases and layout), and requires the same y bits on every rank. */
static void check_twin_bits(const moe_spec *sp, const char *label) {
    moe_case q, t;
    if (!moe_case_build(&q, sp)) return;
    moe_spec ts = *sp;
    ts.routed = ts.shared = MM_DTYPE_BF16;
    if (!moe_case_build(&t, &ts)) {
        moe_case_free(&q);
        return;
    }
    const mm_ref_attrs *qa = &q.ref.attrs, *ta = &t.ref.attrs;
    for (int r = 0; r < sp->ranks; r++) {
        mm_ref_case_rank *s = &q.ref.ranks[r], *d = &t.ref.ranks[r];
        memcpy(d->x_bf16, s->x_bf16, (size_t)(s->bs * sp->hidden) * 2);
        memcpy(d->topk_ids, s->topk_ids, (size_t)(s->bs * sp->topk) * sizeof(int32_t));
        memcpy(d->topk_weights, s->topk_weights, (size_t)(s->bs * sp->topk) * sizeof(float));
        memcpy(d->x_active_mask, s->x_active_mask, (size_t)s->bs);
        mm_ref_case_weights *gs[2] = {&s->routed, &s->shared}, *gd[2] = {&d->routed, &d->shared};
        for (int g = 0; g < 2; g++)
            for (int which = 1; which <= 2; which++) {
                int64_t K = mm_ref_case_gemm_k(qa, which), N = mm_ref_case_gemm_n(qa, which);
                for (int64_t e = 0; e < gs[g]->count; e++)
                    for (int64_t k = 0; k < K; k++)
                        for (int64_t n = 0; n < N; n++)
                            mm_ref_case_set_weight(
                                ta, gd[g], which, e, k, n,
                                mm_f32_to_bf16(moe_dequant_weight(qa, gs[g], which, e, k, n)));
                const float *bsrc = which == 1 ? gs[g]->bias1 : gs[g]->bias2;
                float *bdst = which == 1 ? gd[g]->bias1 : gd[g]->bias2;
                if (bsrc) memcpy(bdst, bsrc, (size_t)(gs[g]->count * N) * sizeof *bdst);
            }
    }
    moe_run_arg aq, at;
    memset(&aq, 0, sizeof aq);
    memset(&at, 0, sizeof at);
    aq.break_rank = at.break_rank = -1;
    mm_status s1 = moe_case_run(&q, &aq), s2 = moe_case_run(&t, &at);
    CHECK_OK(s1, &aq.err[0]);
    CHECK_OK(s2, &at.err[0]);
    if (s1 == MM_OK && s2 == MM_OK) {
        int64_t differ = 0, total = 0;
        for (int r = 0; r < sp->ranks; r++)
            for (int64_t x = 0; x < sp->bs[r] * sp->hidden; x++, total++) differ += q.y[r][x] != t.y[r][x];
        if (differ) {
            CHECK(differ == 0);
            fprintf(stderr, "  %s: %lld of %lld y elements differ from A16W16 on the dequantized weights\n",
                    label, (long long)differ, (long long)total);
        }
        printf("  %-64s %lld elements, bit-equal to A16W16 on w'\n", label, (long long)total);
    }
    moe_case_free(&q);
    moe_case_free(&t);
}

/* ---- validation of the new fields, through mm_mega_moe_weights_create on one rank ---- */

typedef struct ext_break {
    const char *what, *scenario;
    void (*edit)(moe_tensors *t, moe_case *c);
    const char *fragment;
} ext_break;

static uint8_t big_zero[4096];
static void e_block_n0(moe_tensors *t, moe_case *c) {
    (void)c;
    t->desc.scale_block_n = 0;
}
static void e_block_k_neg(moe_tensors *t, moe_case *c) {
    (void)c;
    t->desc.scale_block_k = -3;
}
static void e_zero_16(moe_tensors *t, moe_case *c) {
    (void)c;
    ((uint8_t *)t->z2.data)[3] = 16;
}
static void e_no_zeros(moe_tensors *t, moe_case *c) {
    (void)c;
    t->desc.weight_zeros1 = NULL;
}
static void e_scale_shape(moe_tensors *t, moe_case *c) {
    (void)c;
    t->s1.shape[2] += 1;
}
static void e_zeros_dtype(moe_tensors *t, moe_case *c) {
    (void)c;
    t->z1.dtype = MM_DTYPE_I8;
}
static void e_interleave_2(moe_tensors *t, moe_case *c) {
    (void)c;
    t->desc.weight1_interleave = 2;
}
static void e_bias_dtype(moe_tensors *t, moe_case *c) {
    (void)c;
    t->b1.dtype = MM_DTYPE_I32;
    t->desc.bias1 = &t->b1;
}
static void e_zeros_for_fp8(moe_tensors *t, moe_case *c) {
    (void)c;
    int64_t shape[3] = {t->s1.shape[0], t->s1.shape[1], t->s1.shape[2]};
    t->z1 = mm_tensor_make(MM_DTYPE_U8, 3, shape, big_zero);
    t->desc.weight_zeros1 = &t->z1;
}
static void e_block_for_bf16(moe_tensors *t, moe_case *c) {
    (void)c;
    t->desc.scale_block_n = 128;
}

static const ext_break breaks[] = {
    {"scale_block_n 0", "a16w4-int", e_block_n0, "routed scale_block_n = 0 must be >= 1"},
    {"scale_block_k -3", "a16w8-fp8", e_block_k_neg, "routed scale_block_k = -3 must be >= 1"},
    {"zero point 16", "a16w4-int", e_zero_16,
     "routed weight_zeros2 of expert 0 [1][1] = 16 is outside [0, 15]"},
    {"zeros missing", "a16w4-int", e_no_zeros,
     "routed weight_zeros1 is missing (required with uint4 weights)"},
    {"scale shape", "a16w4-int", e_scale_shape, "routed weight_scales1 shape (2, 80, 4) must be (2, 80, 3)"},
    {"zeros dtype", "a16w4-int", e_zeros_dtype, "routed weight_zeros1 dtype int8 is not accepted here"},
    {"interleave 2", "a16w16", e_interleave_2, "routed weight1_interleave = 2 is not 0 or 1"},
    {"bias dtype", "a16w16", e_bias_dtype, "routed bias1 dtype int32 is not accepted here"},
    {"zeros for fp8", "a16w8-fp8", e_zeros_for_fp8, "routed weight_zeros are given with fp8_e4m3fn weights"},
    {"block sizes without blocks", "a16w16", e_block_for_bf16,
     "routed scale_block_n = 128, scale_block_k = 0 must be 0 without block scales"},
};

typedef struct break_run {
    const ext_break *b;
    moe_case *c;
    mm_status st; /* of mm_mega_moe_weights_create */
    mm_error err;
} break_run;

static mm_status break_rank(mm_comm *comm, void *arg_, mm_error *err) {
    break_run *run = arg_;
    const moe_spec *sp = &run->c->sp;
    mm_mega_moe_sizing sz = {sp->experts, sp->bs[0], sp->topk, sp->hidden, sp->inter, 0};
    mm_mega_moe_buffer *buf = NULL;
    mm_mega_moe_weights *w = NULL;
    mm_status st = mm_mega_moe_buffer_create(comm, &sz, &buf, err);
    if (st != MM_OK) return st;
    moe_tensors t;
    moe_make_weights(run->c, &run->c->ref.ranks[0].routed, &t);
    run->b->edit(&t, run->c);
    mm_error_clear(&run->err);
    run->st = mm_mega_moe_weights_create(buf, &t.desc, NULL, &w, &run->err);
    mm_mega_moe_weights_free(w);
    return mm_mega_moe_buffer_free(buf, err);
}

static void check_breaks(void) {
    for (size_t i = 0; i < sizeof breaks / sizeof breaks[0]; i++) {
        const ext_break *b = &breaks[i];
        moe_spec sp = base_spec(mm_moe_scenario_by_name(b->scenario), 1, 900 + i);
        sp.with_bias = 1;
        moe_case c;
        if (!moe_case_build(&c, &sp)) continue;
        break_run run = {b, &c, MM_OK, {0}};
        mm_error err;
        mm_error_clear(&err);
        CHECK_OK(mm_comm_run_threads(1, break_rank, &run, NULL, NULL, &err), &err);
        CHECK_STATUS(run.st, MM_ERR_INVALID_ARGUMENT, &run.err);
        if (!strstr(run.err.message, b->fragment)) {
            CHECK(!"message names the field, value and rule");
            fprintf(stderr, "  %s: message \"%s\" lacks \"%s\"\n", b->what, run.err.message, b->fragment);
        }
        moe_case_free(&c);
    }
}

int main(void) {
    /* biases and interleave on every scenario of the table; the A16 weight-only rows on top */
    for (int q = 0; q < mm_moe_scenario_count; q++) {
        const mm_moe_scenario_row *sc = &mm_moe_scenario_table[q];
        int a16 = sc->dispatch_dtype == MM_DTYPE_INVALID && sc->weight_dtype != MM_DTYPE_BF16;
        for (int v = 0; v < (a16 ? 8 : 4); v++) {
            int ranks = v % 2 ? 3 : 1;
            moe_spec sp = base_spec(sc, ranks, 300 + (uint64_t)(q * 16 + v));
            sp.with_bias = sc->weight_dtype != MM_DTYPE_INT4 ? (v & 1) || v >= 2 : 0;
            sp.interleave = v >= 2;
            sp.transpose1 = v % 3 == 1;
            sp.transpose2 = v % 2 == 0;
            if (v >= 4) { /* shared experts, lists, weights after the activation, odd block shapes */
                sp.shared_count = 1 + v % 2;
                sp.lists = 1;
                sp.attrs.topk_weights_type = 1;
                sp.masked = 1;
                sp.block_n = v == 4 ? 3 : 1;
                sp.block_k = v == 4 ? 40 : 7;
            }
            char label[160];
            snprintf(label, sizeof label, "%s R=%d bias=%d interleave=%d t1=%d t2=%d S=%lld", sc->label,
                     ranks, sp.with_bias, sp.interleave, sp.transpose1, sp.transpose2,
                     (long long)sp.shared_count);
            run_check(&sp, label);
            if (v == 3 && sp.with_bias) check_bias_matters(&sp, label);
            if (a16) check_twin_bits(&sp, label);
        }
    }
    check_breaks();
    return mm_test_finish("test_mega_moe_weight_ext");
}
