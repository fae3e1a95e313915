/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_mega_moe_common.h: random MegaMoE cases, run through the operator on R thread ranks and
 * through the float64 reference (support/ref), and the comparison (header-only: the test glob compiles
 * test_*.c files only).
 *
 * A case is built once as a reference case (ref/ref_case.h: every rank's buffers); the operator gets
 * the same bytes as mm_tensor descriptors (stacked weights, or per-expert lists when asked). */
#ifndef MEGAMOE_TEST_MEGA_MOE_COMMON_H
#define MEGAMOE_TEST_MEGA_MOE_COMMON_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/format_table.h"
#include "megamoe/comm.h"
#include "megamoe/formats.h"
#include "megamoe/mega_moe.h"
#include "ops/mega_moe/scenario_table.h"
#include "ops/mega_moe/tolerance.h"
#include "ops/mega_moe/weights.h"
#include "ref/mega_moe_ref.h"
#include "ref/ref_case.h"
#include "test_ref_common.h"
#include "testlib.h"

typedef struct moe_spec {
    int ranks;
    int64_t experts, topk, hidden, inter;
    int64_t bs[8];           /* per rank */
    mm_dtype routed, shared; /* weight dtypes */
    int64_t shared_count;
    mm_mega_moe_attrs attrs; /* operator attributes (the reference's are derived) */
    int hot;                 /* every token's first expert is expert 0 */
    int masked;              /* every third row inactive */
    int bf16_weights;        /* topk_weights given as BF16 */
    int lists;               /* weights as per-expert lists */
    int transpose1, transpose2;
    int nonstandard_bias; /* A8W4-INT bias differs from 8 s colsum */
    int64_t max_recv;     /* sizing.max_recv_token_num */
    int64_t max_tokens;   /* sizing.num_max_tokens_per_rank; 0 = the largest bs */
    int ties;             /* x rows of half-integers with amax 127: exact ties for INT8 / MX rounding */
    int wide;             /* x elements spread over 2^-6..2^6: F32 sums in the GEMMs round */
    int int_data;         /* x and BF16 weights small integers (-8..8): exact F32 sums, and GEMM1
                           * outputs that are odd integers in 257..511 are exact BF16 ties */
    /* checkpoint-format extensions (docs/weight_formats.md) */
    int with_bias;            /* bias1 / bias2 for every weight dtype (INT4 always has them) */
    int interleave;           /* weight1_interleave */
    int64_t block_n, block_k; /* block-scaled weights; 0: 1 x 32 for UINT4, 16 x 32 for FP8 */
    uint64_t seed;
} moe_spec;

/* The shape a case starts from: rank r holds bs0 + bs_step * r tokens. */
typedef struct moe_dims {
    int ranks;
    int64_t experts, topk, hidden, inter;
    int64_t bs0, bs_step;
} moe_dims;

/* One weight dtype for the routed and the shared experts, and the dispatch quantization (0 and
 * MM_DTYPE_INVALID: none). */
static inline void moe_set_quant(moe_spec *sp, mm_dtype weights, int mode, mm_dtype dispatch) {
    sp->routed = weights;
    sp->shared = weights;
    sp->attrs.dispatch_quant_mode = mode;
    sp->attrs.dispatch_quant_out_dtype = dispatch;
}

/* A spec of that shape with moe_set_quant's weights and dispatch quantization and otherwise the default
 * attributes. Callers set what else their case varies. */
static inline moe_spec moe_spec_make(moe_dims d, mm_dtype weights, int mode, mm_dtype dispatch,
                                     uint64_t seed) {
    moe_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.ranks = d.ranks;
    sp.experts = d.experts;
    sp.topk = d.topk;
    sp.hidden = d.hidden;
    sp.inter = d.inter;
    for (int r = 0; r < d.ranks; r++) sp.bs[r] = d.bs0 + d.bs_step * r;
    sp.attrs = mm_mega_moe_default_attrs();
    moe_set_quant(&sp, weights, mode, dispatch);
    sp.seed = seed;
    return sp;
}

/* The same with a scenario row's weight dtype and dispatch quantization. */
static inline moe_spec moe_spec_scenario(moe_dims d, const mm_moe_scenario_row *sc, uint64_t seed) {
    return moe_spec_make(d, sc->weight_dtype, sc->dispatch_quant_mode, sc->dispatch_dtype, seed);
}

/* The larger two-rank case of the quantized sweeps: E = 8, K = 4, H = 256, I = 128, 24 and 17 tokens,
 * one shared expert. */
static inline moe_spec moe_spec_large(const mm_moe_scenario_row *sc, uint64_t seed) {
    moe_spec sp = moe_spec_scenario((moe_dims){2, 8, 4, 256, 128, 24, 0}, sc, seed);
    sp.bs[1] = 17;
    sp.shared_count = 1;
    return sp;
}

/* The activation with its first `count` parameters (the others stay as they are). */
static inline void moe_set_activation(mm_mega_moe_attrs *a, mm_mega_moe_activation act, int count,
                                      const float *params) {
    a->activation = act;
    a->activation_param_count = count;
    for (int i = 0; i < count; i++) a->activation_params[i] = params[i];
}

static inline mm_ref_act_kind moe_ref_kind(mm_mega_moe_activation a) {
    return (mm_ref_act_kind)a; /* same order: swiglu, swiglustep, swigluoai, situglu, gelu */
}

static inline mm_dtype moe_dispatch_dtype(const mm_mega_moe_attrs *a) {
    mm_dtype d = a->dispatch_quant_out_dtype;
    if (d == MM_DTYPE_BF16) d = MM_DTYPE_INVALID;
    if (a->dispatch_quant_mode == 2 && d == MM_DTYPE_INVALID) d = MM_DTYPE_I8;
    return d;
}

/* A random finite code of an element type, of moderate magnitude. */
static inline uint32_t moe_random_code(mm_dtype t, uint64_t *st) {
    switch (t) {
    case MM_DTYPE_BF16: return mm_f32_to_bf16((float)mm_test_rand_uniform(st, -0.5, 0.5));
    case MM_DTYPE_I8: return (uint32_t)(uint8_t)(int8_t)((int)(mm_test_rand_u64(st) % 255) - 127);
    case MM_DTYPE_INT4:
    case MM_DTYPE_UINT4: return (uint32_t)(mm_test_rand_u64(st) % 16);
    case MM_DTYPE_FP8_E4M3FN: return mm_f32_to_fp8_e4m3fn((float)mm_test_rand_uniform(st, -4.0, 4.0));
    case MM_DTYPE_FP8_E5M2: return mm_f32_to_fp8_e5m2((float)mm_test_rand_uniform(st, -4.0, 4.0));
    case MM_DTYPE_FP4_E2M1: return mm_f32_to_fp4_e2m1((float)mm_test_rand_uniform(st, -4.0, 4.0));
    default: return 0;
    }
}

static inline void moe_fill_weights(const moe_spec *sp, const mm_ref_attrs *a, mm_ref_case_weights *w,
                                    uint64_t *st) {
    for (int which = 1; which <= 2; which++) {
        int64_t K = mm_ref_case_gemm_k(a, which), N = mm_ref_case_gemm_n(a, which);
        for (int64_t e = 0; e < w->count; e++) {
            for (int64_t k = 0; k < K; k++)
                for (int64_t n = 0; n < N; n++)
                    mm_ref_case_set_weight(a, w, which, e, k, n,
                                           sp->int_data && w->dtype == MM_DTYPE_BF16
                                               ? mm_f32_to_bf16((float)((int)(mm_test_rand_u64(st) % 17) - 8))
                                               : moe_random_code(w->dtype, st));
            if (mm_format_is_int_quant(w->dtype)) {
                float *s = (which == 1 ? w->scales1 : w->scales2) + e * N;
                /* scale ~ 1 / (127 sqrt(K)) keeps outputs O(1) */
                for (int64_t n = 0; n < N; n++)
                    s[n] = (float)(mm_test_rand_uniform(st, 0.5, 1.5) /
                                   (sqrt((double)K) * (w->dtype == MM_DTYPE_I8 ? 40.0 : 3.0)));
            }
            if (w->dtype == MM_DTYPE_INT4) {
                /* bias = 8 s colsum (the standard one), optionally perturbed. The bias enters the
                 * GEMM output times the input's row scale s_X (~ 1/127 here): a perturbation of
                 * 100 s sqrt(K) ~ 33 moves the output by ~ 0.26, the size of the output itself
                 * (~ 0.8), so a bias that is dropped or misplaced cannot pass. */
                float *b = (which == 1 ? w->bias1 : w->bias2) + e * N;
                const float *s = (which == 1 ? w->scales1 : w->scales2) + e * N;
                for (int64_t n = 0; n < N; n++) {
                    b[n] = 0.0f;
                    if (sp->nonstandard_bias)
                        b[n] = (float)(mm_test_rand_uniform(st, -100.0, 100.0) * s[n] * sqrt((double)K));
                }
            }
            if (w->block_scaled) {
                /* weights of the size of the BF16 ones (std ~0.3, uniform in +-0.5): UINT4 (q - z) has std
                 * ~6.5, times s in [0.03, 0.06]; FP8 codes in [-4, 4] (std ~2.3) times [0.03, 0.125] */
                int64_t nb, kb;
                mm_ref_case_block_dims(a, which, &nb, &kb);
                float *s = (which == 1 ? w->block_scales1 : w->block_scales2) + e * nb * kb;
                uint8_t *z = w->zeros1 ? (which == 1 ? w->zeros1 : w->zeros2) + e * nb * kb : NULL;
                for (int64_t b = 0; b < nb * kb; b++) {
                    s[b] = (float)(w->dtype == MM_DTYPE_UINT4 ? mm_test_rand_uniform(st, 0.03, 0.06)
                                                              : mm_test_rand_uniform(st, 0.03, 0.125));
                    if (z) z[b] = (uint8_t)(mm_test_rand_u64(st) % 16);
                }
            }
            if (w->bias1 && w->dtype != MM_DTYPE_INT4) { /* outputs are O(1): a bias of that size shows */
                float *b = (which == 1 ? w->bias1 : w->bias2) + e * N;
                for (int64_t n = 0; n < N; n++) b[n] = (float)mm_test_rand_uniform(st, -0.5, 0.5);
            }
            if (w->mx_scales1) {
                int64_t groups = (K + 31) / 32;
                for (int64_t n = 0; n < N; n++)
                    for (int64_t g = 0; g < groups; g++)
                        mm_ref_case_set_mx_scale(a, w, which, e, n, g,
                                                 (uint8_t)(122 + mm_test_rand_u64(st) % 3));
            }
        }
    }
}

/* INT4 bias: the standard bias 8 s colsum of the raw weight integers (so the bracket's correction is
 * 0) plus the perturbation already stored. Needs the weights: computed through the setter's layout by
 * decoding the reference buffers. */
static inline void moe_standard_bias(const mm_ref_attrs *a, mm_ref_case_weights *w) {
    for (int which = 1; which <= 2; which++) {
        int64_t K = mm_ref_case_gemm_k(a, which), N = mm_ref_case_gemm_n(a, which);
        int t = which == 1 ? a->transpose_weight1 : a->transpose_weight2;
        const uint8_t *base = which == 1 ? w->weight1 : w->weight2;
        int64_t mat = t ? N * mm_dtype_row_bytes(MM_DTYPE_INT4, K) : K * mm_dtype_row_bytes(MM_DTYPE_INT4, N);
        for (int64_t e = 0; e < w->count; e++) {
            float *b = (which == 1 ? w->bias1 : w->bias2) + e * N;
            const float *s = (which == 1 ? w->scales1 : w->scales2) + e * N;
            for (int64_t n = 0; n < N; n++) {
                int64_t sum = 0;
                for (int64_t k = 0; k < K; k++) {
                    const uint8_t *m = base + e * mat;
                    uint8_t nib = t ? mm_nibble_get(m + n * mm_dtype_row_bytes(MM_DTYPE_INT4, K), k)
                                    : mm_nibble_get(m + k * mm_dtype_row_bytes(MM_DTYPE_INT4, N), n);
                    sum += nib >= 8 ? (int)nib - 16 : (int)nib;
                }
                b[n] += (float)(8.0 * (double)s[n] * (double)sum);
            }
        }
    }
}

typedef struct moe_case {
    moe_spec sp;
    mm_ref_case ref;
    uint16_t *y[8]; /* operator outputs per rank */
    int32_t *etn[8];
    float *weights_f32_bf16[8]; /* BF16 copies of topk weights when sp.bf16_weights */
    uint16_t *weights_bf16[8];
} moe_case;

static inline mm_ref_attrs moe_ref_attrs(const moe_spec *sp) {
    mm_ref_attrs a = ref_attrs_sized(sp->experts, sp->ranks, sp->topk, sp->hidden, sp->inter);
    mm_ref_activation_init(&a.activation, moe_ref_kind(sp->attrs.activation), sp->attrs.activation_params,
                           sp->attrs.activation_param_count, NULL);
    a.dispatch_dtype = moe_dispatch_dtype(&sp->attrs);
    a.x_prequantized = sp->attrs.dispatch_quant_mode == 0 && mm_format_is_mx(a.dispatch_dtype);
    a.shared_quant_dtype = sp->attrs.shared_expert_quant_out_dtype;
    a.activation_out_dtype = sp->attrs.activation_out_dtype;
    a.transpose_weight1 = sp->transpose1;
    a.transpose_weight2 = sp->transpose2;
    a.topk_weights_type = sp->attrs.topk_weights_type;
    a.combine_quant_mode = sp->attrs.combine_quant_mode;
    a.combine_comm_mode = sp->attrs.combine_comm_mode;
    a.rank_num_per_server = sp->attrs.rank_num_per_server;
    a.with_bias = sp->with_bias;
    a.weight1_interleave = sp->interleave;
    a.scale_block_n = sp->block_n ? sp->block_n : sp->routed == MM_DTYPE_UINT4 ? 1 : 16;
    a.scale_block_k = sp->block_k ? sp->block_k : 32;
    return a;
}

/* Builds the case and runs the reference. Returns 0 on failure (reported). */
static inline int moe_case_build(moe_case *c, const moe_spec *sp) {
    memset(c, 0, sizeof *c);
    c->sp = *sp;
    uint64_t st = sp->seed ? sp->seed : 1;
    mm_ref_attrs a = moe_ref_attrs(sp);
    mm_error err;
    mm_error_clear(&err);
    mm_status s = mm_ref_case_alloc(&c->ref, &a, sp->bs, sp->routed, sp->shared_count, sp->shared, &err);
    CHECK_OK(s, &err);
    if (s != MM_OK) return 0;
    int64_t E = sp->experts, K = sp->topk, H = sp->hidden;
    for (int r = 0; r < sp->ranks; r++) {
        mm_ref_case_rank *k = &c->ref.ranks[r];
        for (int64_t i = 0; i < k->bs; i++) {
            for (int64_t h = 0; h < H; h++) {
                float v = (float)mm_test_rand_uniform(&st, -1.0, 1.0);
                if (sp->wide) v = ldexpf(v, (int)(mm_test_rand_u64(&st) % 13) - 6);
                if (sp->int_data) v = (float)((int)(mm_test_rand_u64(&st) % 17) - 8);
                if (sp->ties) /* amax 127 makes the INT8 scale 1, so x / s = x.5 is a tie */
                    v = h == 0 ? 127.0f : (float)((int)(mm_test_rand_u64(&st) % 41) - 20) + 0.5f;
                if (k->x_bf16) k->x_bf16[i * H + h] = mm_f32_to_bf16(v);
            }
            if (a.x_prequantized) {
                uint16_t *row = malloc((size_t)H * 2);
                for (int64_t h = 0; h < H; h++)
                    row[h] = mm_f32_to_bf16((float)mm_test_rand_uniform(&st, -1.0, 1.0));
                mm_mx_quantize_row_bf16(row, H, a.dispatch_dtype,
                                        k->x_quant + i * mm_dtype_row_bytes(a.dispatch_dtype, H),
                                        k->x_scales + i * ((H + 31) / 32), NULL);
                free(row);
            }
            /* K distinct ids: a partial Fisher-Yates draw over E */
            for (int64_t kk = 0; kk < K; kk++) {
                int32_t id;
                int dup;
                do {
                    id = (int32_t)(mm_test_rand_u64(&st) % (uint64_t)E);
                    if (sp->hot && kk == 0) id = 0;
                    dup = 0;
                    for (int64_t j = 0; j < kk; j++) dup |= k->topk_ids[i * K + j] == id;
                } while (dup);
                k->topk_ids[i * K + kk] = id;
                float w = (float)mm_test_rand_uniform(&st, -0.2, 1.0);
                if (sp->bf16_weights) w = mm_bf16_to_f32(mm_f32_to_bf16(w));
                k->topk_weights[i * K + kk] = w;
            }
            if (sp->masked) k->x_active_mask[i] = (uint8_t)(i % 3 != 1);
        }
        moe_fill_weights(sp, &a, &k->routed, &st);
        if (sp->routed == MM_DTYPE_INT4) moe_standard_bias(&a, &k->routed);
        if (k->shared.count > 0) {
            moe_fill_weights(sp, &a, &k->shared, &st);
            if (sp->shared == MM_DTYPE_INT4) moe_standard_bias(&a, &k->shared);
        }
        c->y[r] = calloc((size_t)(k->bs * H + 1), 2);
        c->etn[r] = calloc((size_t)(E / sp->ranks), 4);
    }
    s = mm_ref_mega_moe(&c->ref.attrs, c->ref.inputs, c->ref.outputs, &err);
    CHECK_OK(s, &err);
    return s == MM_OK;
}

static inline void moe_case_free(moe_case *c) {
    for (int r = 0; r < c->sp.ranks; r++) {
        free(c->y[r]);
        free(c->etn[r]);
    }
    mm_ref_case_free(&c->ref);
}

/* ---- operator side ---- */

typedef struct moe_tensors {
    mm_tensor w1, w2, s1, s2, b1, b2, z1, z2;
    mm_tensor l_w1[8], l_w2[8], l_s1[8], l_s2[8], l_b1[8], l_b2[8], l_z1[8], l_z2[8];
    mm_mega_moe_expert_weights desc;
} moe_tensors;

static inline void moe_make_weights(const moe_case *c, const mm_ref_case_weights *w, moe_tensors *t) {
    const moe_spec *sp = &c->sp;
    memset(t, 0, sizeof *t);
    int64_t H = sp->hidden, I = sp->inter, n = w->count;
    /* the buffers were sized for the activation the reference ran with */
    int64_t k2 = c->ref.attrs.activation.kind == MM_REF_ACT_GELU ? 2 * I : I;
    int64_t s1[3] = {n, sp->transpose1 ? 2 * I : H, sp->transpose1 ? H : 2 * I};
    int64_t s2[3] = {n, sp->transpose2 ? H : k2, sp->transpose2 ? k2 : H};
    t->desc.count = n;
    t->desc.transpose_weight1 = sp->transpose1;
    t->desc.transpose_weight2 = sp->transpose2;
    if (n == 0) return;
    t->desc.weight1_interleave = sp->interleave;
    t->w1 = mm_tensor_make(w->dtype, 3, s1, w->weight1);
    t->w2 = mm_tensor_make(w->dtype, 3, s2, w->weight2);
    int has_scales = 0, has_bias = w->bias1 != NULL, has_zeros = w->zeros1 != NULL;
    if (w->block_scaled) {
        const mm_ref_attrs *ra = &c->ref.attrs;
        int64_t a1[3] = {n, 0, 0}, a2[3] = {n, 0, 0};
        mm_ref_case_block_dims(ra, 1, &a1[1], &a1[2]);
        mm_ref_case_block_dims(ra, 2, &a2[1], &a2[2]);
        t->s1 = mm_tensor_make(MM_DTYPE_F32, 3, a1, w->block_scales1);
        t->s2 = mm_tensor_make(MM_DTYPE_F32, 3, a2, w->block_scales2);
        if (has_zeros) {
            t->z1 = mm_tensor_make(MM_DTYPE_U8, 3, a1, w->zeros1);
            t->z2 = mm_tensor_make(MM_DTYPE_U8, 3, a2, w->zeros2);
        }
        t->desc.scale_block_n = ra->scale_block_n;
        t->desc.scale_block_k = ra->scale_block_k;
        has_scales = 1;
    } else if (mm_format_is_int_quant(w->dtype)) {
        int64_t a1[2] = {n, 2 * I}, a2[2] = {n, H};
        t->s1 = mm_tensor_make(MM_DTYPE_F32, 2, a1, w->scales1);
        t->s2 = mm_tensor_make(MM_DTYPE_F32, 2, a2, w->scales2);
        has_scales = 1;
    } else if (mm_format_is_mx(w->dtype)) {
        int64_t a1[4] = {n, 2 * I, (H + 63) / 64, 2}, a2[4] = {n, H, (k2 + 63) / 64, 2};
        t->s1 = mm_tensor_make(MM_DTYPE_E8M0, 4, a1, w->mx_scales1);
        t->s2 = mm_tensor_make(MM_DTYPE_E8M0, 4, a2, w->mx_scales2);
        has_scales = 1;
    }
    if (has_bias) {
        int64_t a1[2] = {n, 2 * I}, a2[2] = {n, H};
        t->b1 = mm_tensor_make(MM_DTYPE_F32, 2, a1, w->bias1);
        t->b2 = mm_tensor_make(MM_DTYPE_F32, 2, a2, w->bias2);
    }
    if (!sp->lists) {
        t->desc.weight1 = &t->w1;
        t->desc.weight2 = &t->w2;
        if (has_scales) {
            t->desc.weight_scales1 = &t->s1;
            t->desc.weight_scales2 = &t->s2;
        }
        if (has_bias) {
            t->desc.bias1 = &t->b1;
            t->desc.bias2 = &t->b2;
        }
        if (has_zeros) {
            t->desc.weight_zeros1 = &t->z1;
            t->desc.weight_zeros2 = &t->z2;
        }
        return;
    }
    /* per-expert lists: slices of the stacked buffers */
    mm_tensor *stk[8] = {&t->w1, &t->w2, &t->s1, &t->s2, &t->b1, &t->b2, &t->z1, &t->z2};
    mm_tensor *lst[8] = {t->l_w1, t->l_w2, t->l_s1, t->l_s2, t->l_b1, t->l_b2, t->l_z1, t->l_z2};
    for (int q = 0; q < 8; q++) {
        if (!stk[q]->data) continue;
        mm_tensor one = *stk[q];
        one.ndim -= 1;
        memmove(one.shape, one.shape + 1, (size_t)one.ndim * sizeof one.shape[0]);
        int64_t bytes = mm_tensor_nbytes(&one);
        for (int64_t e = 0; e < n; e++) {
            lst[q][e] = one;
            lst[q][e].data = (uint8_t *)stk[q]->data + e * bytes;
        }
    }
    t->desc.weight1_list = t->l_w1;
    t->desc.weight2_list = t->l_w2;
    if (has_scales) {
        t->desc.weight_scales1_list = t->l_s1;
        t->desc.weight_scales2_list = t->l_s2;
    }
    if (has_bias) {
        t->desc.bias1_list = t->l_b1;
        t->desc.bias2_list = t->l_b2;
    }
    if (has_zeros) {
        t->desc.weight_zeros1_list = t->l_z1;
        t->desc.weight_zeros2_list = t->l_z2;
    }
}

typedef struct moe_run_arg {
    moe_case *c;
    int calls;           /* run the call this many times on one buffer (reuse) */
    mm_status status[8]; /* per rank, of the last call */
    mm_error err[8];
    int break_rank; /* -1, or a rank whose inputs are altered by `breaker` */
    void (*breaker)(mm_mega_moe_attrs *attrs, mm_tensor *ids, mm_tensor *x, int64_t *max_tokens);
    int plan_only;
    mm_mega_moe_plan_info info[8];
    int unfused;              /* weights packed without the fused activation (ops/mega_moe/weights.h) */
    mm_mega_moe_stats *stats; /* NULL, or per rank: mm_mega_moe_last_stats after the last call */
} moe_run_arg;

static inline mm_status moe_rank_fn(mm_comm *comm, void *arg_, mm_error *err) {
    moe_run_arg *arg = arg_;
    moe_case *c = arg->c;
    const moe_spec *sp = &c->sp;
    int r = mm_comm_rank(comm);
    mm_ref_case_rank *k = &c->ref.ranks[r];
    int64_t H = sp->hidden, K = sp->topk, bs = k->bs, El = sp->experts / sp->ranks;
    mm_mega_moe_attrs attrs = sp->attrs;
    int64_t max_tokens = sp->max_tokens;
    if (!max_tokens)
        for (int q = 0; q < sp->ranks; q++) max_tokens = sp->bs[q] > max_tokens ? sp->bs[q] : max_tokens;
    if (max_tokens == 0) max_tokens = 1;
    mm_ref_attrs ra = moe_ref_attrs(sp);
    int64_t xs[2] = {bs, H}, ks[2] = {bs, K}, ss[2] = {bs, (H + 31) / 32}, ms[1] = {bs}, es[1] = {El};
    mm_tensor x = ra.x_prequantized ? mm_tensor_make(ra.dispatch_dtype, 2, xs, k->x_quant)
                                    : mm_tensor_make(MM_DTYPE_BF16, 2, xs, k->x_bf16);
    mm_tensor scales = mm_tensor_make(MM_DTYPE_E8M0, 2, ss, k->x_scales);
    mm_tensor ids = mm_tensor_make(MM_DTYPE_I32, 2, ks, k->topk_ids);
    uint16_t *wb = NULL;
    mm_tensor tw = mm_tensor_make(MM_DTYPE_F32, 2, ks, k->topk_weights);
    if (sp->bf16_weights) {
        wb = malloc((size_t)(bs * K + 1) * 2);
        for (int64_t q = 0; q < bs * K; q++) wb[q] = mm_f32_to_bf16(k->topk_weights[q]);
        tw = mm_tensor_make(MM_DTYPE_BF16, 2, ks, wb);
    }
    mm_tensor mask = mm_tensor_make(MM_DTYPE_I8, 1, ms, k->x_active_mask);
    mm_tensor y = mm_tensor_make(MM_DTYPE_BF16, 2, xs, c->y[r]);
    mm_tensor etn = mm_tensor_make(MM_DTYPE_I32, 1, es, c->etn[r]);
    if (arg->break_rank == r && arg->breaker) arg->breaker(&attrs, &ids, &x, &max_tokens);
    mm_mega_moe_sizing sizing = {sp->experts, max_tokens, K, H, sp->inter, sp->max_recv};
    mm_mega_moe_inputs in = {&x, ra.x_prequantized ? &scales : NULL, &ids, &tw, sp->masked ? &mask : NULL};
    mm_mega_moe_outputs out = {&y, &etn};
    moe_tensors *rt = calloc(1, sizeof *rt), *st = calloc(1, sizeof *st);
    moe_make_weights(c, &k->routed, rt);
    moe_make_weights(c, &k->shared, st);
    mm_mega_moe_buffer *buf = NULL;
    mm_mega_moe_weights *w = NULL;
    mm_status s = mm_mega_moe_buffer_create(comm, &sizing, &buf, err);
    if (s == MM_OK) {
        mm_status ws = mm_moe_weights_create_with(buf, &rt->desc, k->shared.count ? &st->desc : NULL,
                                                  !arg->unfused, &w, err);
        /* weights are local: make a failure collective so that no rank waits in the call */
        s = mm_comm_agree(comm, ws, err);
    }
    for (int call = 0; s == MM_OK && call < (arg->calls ? arg->calls : 1); call++) {
        if (arg->plan_only)
            s = mm_mega_moe_plan(buf, w, &attrs, &in, &arg->info[r], err);
        else
            s = mm_mega_moe_run(buf, w, &attrs, &in, &out, err);
    }
    if (s == MM_OK && arg->stats && !arg->plan_only) s = mm_mega_moe_last_stats(buf, &arg->stats[r], err);
    arg->status[r] = s;
    if (s != MM_OK && err) arg->err[r] = *err;
    mm_mega_moe_weights_free(w);
    mm_mega_moe_buffer_free(buf, NULL);
    free(rt);
    free(st);
    free(wb);
    return s;
}

/* Runs the operator on sp.ranks thread ranks. */
static inline mm_status moe_case_run(moe_case *c, moe_run_arg *arg) {
    arg->c = c;
    mm_error err;
    mm_error_clear(&err);
    return mm_comm_run_threads(c->sp.ranks, moe_rank_fn, arg, NULL, NULL, &err);
}

/* Runs the case as it is (arg reset: one call, nothing broken) and checks that it succeeds; returns the
 * status, arg holds the per-rank statuses and errors. */
static inline mm_status moe_case_run_ok(moe_case *c, moe_run_arg *arg) {
    memset(arg, 0, sizeof *arg);
    arg->break_rank = -1;
    mm_status st = moe_case_run(c, arg);
    CHECK_OK(st, &arg->err[0]);
    return st;
}

/* Builds the case and runs it on its thread ranks (failures reported); 0 when it could not be built
 * (nothing to free then). */
static inline int moe_case_build_run(moe_case *c, const moe_spec *sp) {
    if (!moe_case_build(c, sp)) return 0;
    moe_run_arg arg;
    moe_case_run_ok(c, &arg);
    return 1;
}

/* Normalized error of rank r: max |y - ref| / max |ref| (0 when both are 0). */
static inline double moe_case_error(const moe_case *c, int r) {
    const mm_ref_case_rank *k = &c->ref.ranks[r];
    double amax = 0, emax = 0;
    for (int64_t q = 0; q < k->bs * c->sp.hidden; q++) {
        double ref = mm_bf16_to_f32(k->y[q]), got = mm_bf16_to_f32(c->y[r][q]);
        if (fabs(ref) > amax) amax = fabs(ref);
        double e = fabs(ref - got);
        if (!(e <= emax)) emax = isnan(e) ? INFINITY : e;
    }
    int64_t active = 0;
    for (int64_t i = 0; i < k->bs; i++) active += k->x_active_mask[i] != 0;
    CHECK(active == 0 || amax > 0); /* a case whose output is all zero would test nothing */
    return amax > 0 ? emax / amax : emax;
}

/* One BF16 ulp at magnitude v: 2^(exponent of v - 7), the subnormal spacing 2^-133 below 2^-126. */
static inline double moe_bf16_ulp(double v) {
    v = fabs(v);
    if (!(v >= 0x1p-126)) return 0x1p-133;
    int e;
    frexp(v, &e); /* v = m 2^e, m in [0.5, 1) */
    return ldexp(1.0, e - 8);
}

/* Per-element statistics of rank r against the reference (active rows):
 *   ulps:  max over elements of |y - y_ref| / ulp_BF16(y_scale), y_scale being the largest |summand| of
 *          the combine at that element (mm_ref_rank_output.y_scale): the unit of the per-element bound;
 *   share: the fraction of elements with |y - y_ref| <= ulp_BF16(y_ref), one ulp of the output. */
typedef struct moe_ulp_stats {
    double ulps, share;
    int64_t elements;
} moe_ulp_stats;

static inline moe_ulp_stats moe_case_ulp_stats(const moe_case *c, int r) {
    const mm_ref_case_rank *k = &c->ref.ranks[r];
    int64_t H = c->sp.hidden, within = 0;
    moe_ulp_stats s = {0, 1, 0};
    for (int64_t i = 0; i < k->bs; i++) {
        if (!k->x_active_mask[i]) continue;
        for (int64_t h = 0; h < H; h++) {
            double ref = mm_bf16_to_f32(k->y[i * H + h]), got = mm_bf16_to_f32(c->y[r][i * H + h]);
            double d = fabs(got - ref), u = d / moe_bf16_ulp(k->y_scale[i * H + h]);
            if (!(u <= s.ulps)) s.ulps = isnan(u) ? INFINITY : u;
            within += d <= moe_bf16_ulp(ref);
            s.elements++;
        }
    }
    if (s.elements) s.share = (double)within / (double)s.elements;
    return s;
}

/* BF16 ulps of one step of an element format at the same magnitude: 2^(7 - mantissa bits). */
static inline double moe_step_ulps(mm_dtype t) {
    return t == MM_DTYPE_FP8_E4M3FN ? 16 : t == MM_DTYPE_FP8_E5M2 ? 32 : t == MM_DTYPE_FP4_E2M1 ? 64 : 0;
}

/* Per-element bound, in BF16 ulps of y_scale, of one weight group's path (docs/reference.md,
 * "Per-element bounds"): 2 ulps (one ulp of a BF16 expert row plus the final rounding) where every
 * rounding point after the GEMMs is BF16 or INT8; plus twice one step of the GEMM2 input's MX format
 * where a code of the GEMM2 input can flip. */
static inline double moe_path_ulps(mm_dtype weight, mm_dtype input, mm_dtype act_out) {
    if (!mm_format_is_mx(weight)) return 2;
    mm_dtype g2 = act_out != MM_DTYPE_INVALID                                    ? act_out
                  : weight == MM_DTYPE_FP8_E4M3FN || weight == MM_DTYPE_FP8_E5M2 ? input
                                                                                 : MM_DTYPE_FP8_E4M3FN;
    return 2 + 2 * moe_step_ulps(g2);
}

/* The scenario's per-element bound (max over the routed and shared paths, plus one step of the
 * combine's MX format with combine_quant_mode 3 / 4) and the least share of elements within one ulp of
 * y_ref. */
static inline double moe_ulp_bound(const moe_spec *sp) {
    const mm_mega_moe_attrs *a = &sp->attrs;
    mm_dtype in = moe_dispatch_dtype(a);
    double b = moe_path_ulps(sp->routed, in, a->activation_out_dtype);
    if (sp->shared_count) {
        mm_dtype sin =
            a->shared_expert_quant_out_dtype != MM_DTYPE_INVALID ? a->shared_expert_quant_out_dtype : in;
        double bs = moe_path_ulps(sp->shared, sin, a->activation_out_dtype);
        if (bs > b) b = bs;
    }
    if (a->combine_quant_mode == 3) b += 2 * moe_step_ulps(MM_DTYPE_FP8_E5M2);
    if (a->combine_quant_mode == 4) b += 2 * moe_step_ulps(MM_DTYPE_FP8_E4M3FN);
    return b;
}
#define MOE_MIN_SHARE_WITHIN_1ULP 0.995

/* Checks rank r against the reference: expert_token_nums exact, inactive rows exact +0, y within the
 * documented tolerance of the scenario (ops/mega_moe/tolerance.h), every element within the scenario's
 * per-element bound and at least MOE_MIN_SHARE_WITHIN_1ULP of them within one ulp of y_ref. Returns the
 * normalized error. */
static inline double moe_case_check_rank(const moe_case *c, int r, const char *label) {
    int64_t El = c->sp.experts / c->sp.ranks, H = c->sp.hidden;
    double tol = mm_mega_moe_tolerance(c->sp.routed, moe_dispatch_dtype(&c->sp.attrs),
                                       c->sp.shared_count ? c->sp.shared : MM_DTYPE_INVALID);
    const mm_ref_case_rank *k = &c->ref.ranks[r];
    for (int64_t j = 0; j < El; j++) CHECK_EQ_INT(c->etn[r][j], k->expert_token_nums[j]);
    for (int64_t i = 0; i < k->bs; i++)
        if (!k->x_active_mask[i])
            for (int64_t h = 0; h < H; h++) CHECK_EQ_HEX(c->y[r][i * H + h], 0);
    double e = moe_case_error(c, r);
    moe_ulp_stats u = moe_case_ulp_stats(c, r);
    double bound = moe_ulp_bound(&c->sp);
    if (getenv("MOE_ULP_TRACE"))
        fprintf(stderr, "ULP %s rank %d: max %.3g ulps (bound %.3g), within 1 ulp %.4f of %lld\n", label, r,
                u.ulps, bound, u.share, (long long)u.elements);
    if (!(u.ulps <= bound) || !(u.share >= MOE_MIN_SHARE_WITHIN_1ULP)) {
        CHECK(u.ulps <= bound);
        CHECK(u.share >= MOE_MIN_SHARE_WITHIN_1ULP);
        fprintf(stderr,
                "  %s rank %d: %.3g ulps (bound %.3g), %.4f of %lld elements within 1 ulp (least %.3f)\n",
                label, r, u.ulps, bound, u.share, (long long)u.elements, MOE_MIN_SHARE_WITHIN_1ULP);
    }
    if (!(e <= tol)) {
        CHECK(e <= tol);
        fprintf(stderr, "  %s rank %d: error %.4g above tolerance %.4g\n", label, r, e, tol);
    }
    return e;
}

/* All ranks; returns the worst normalized error. */
static inline double moe_case_check(const moe_case *c, const char *label) {
    double worst = 0;
    for (int r = 0; r < c->sp.ranks; r++) {
        double e = moe_case_check_rank(c, r, label);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

/* ---- the A16W16 twin of a quantized case: same x, ids and gating weights, BF16 weights holding the
 * dequantized values (rounded to BF16), run through the reference. ---- */

static inline uint32_t moe_get_code(const mm_ref_attrs *a, const mm_ref_case_weights *w, int which, int64_t e,
                                    int64_t k, int64_t n) {
    int64_t K = mm_ref_case_gemm_k(a, which), N = mm_ref_case_gemm_n(a, which);
    int t = which == 1 ? a->transpose_weight1 : a->transpose_weight2;
    int64_t rows = t ? N : K, cols = t ? K : N, r = t ? n : k, col = t ? k : n;
    int64_t rb = mm_dtype_row_bytes(w->dtype, cols);
    const uint8_t *m = (which == 1 ? w->weight1 : w->weight2) + e * rows * rb + r * rb;
    if (mm_dtype_bits(w->dtype) == 4) return mm_nibble_get(m, col);
    if (mm_dtype_bits(w->dtype) == 16) return ((const uint16_t *)m)[col];
    return m[col];
}

static inline float moe_dequant_weight(const mm_ref_attrs *a, const mm_ref_case_weights *w, int which,
                                       int64_t e, int64_t k, int64_t n) {
    uint32_t code = moe_get_code(a, w, which, e, k, n);
    int64_t K = mm_ref_case_gemm_k(a, which), N = mm_ref_case_gemm_n(a, which);
    if (w->block_scaled) { /* the A16 rule: BF16(F32(F32(value - zero) * scale)), as a BF16 value */
        int64_t nb, kb;
        mm_ref_case_block_dims(a, which, &nb, &kb);
        int64_t at = e * nb * kb + (n / a->scale_block_n) * kb + k / a->scale_block_k;
        float v = w->dtype == MM_DTYPE_UINT4 ? (float)code : mm_dtype_to_f32(w->dtype, code);
        float z = w->zeros1 ? (float)(which == 1 ? w->zeros1 : w->zeros2)[at] : 0.0f;
        volatile float prod = (v - z) * (which == 1 ? w->block_scales1 : w->block_scales2)[at];
        return mm_bf16_to_f32(mm_f32_to_bf16(prod));
    }
    switch (w->dtype) {
    case MM_DTYPE_BF16: return mm_bf16_to_f32((uint16_t)code);
    case MM_DTYPE_I8: return (float)(int8_t)code * (which == 1 ? w->scales1 : w->scales2)[e * N + n];
    case MM_DTYPE_INT4:
        return (float)(code >= 8 ? (int)code - 16 : (int)code) *
               (which == 1 ? w->scales1 : w->scales2)[e * N + n];
    default: {
        const uint8_t *sc = (which == 1 ? w->mx_scales1 : w->mx_scales2) + e * N * ((K + 63) / 64) * 2;
        return mm_dtype_to_f32(w->dtype, code) * mm_e8m0_to_f32(mm_mx_weight_scale(sc, n, K, k / 32));
    }
    }
}

/* Error of the operator's y of quantized case q against the A16W16 reference on dequantized weights
 * (worst rank, same metric as moe_case_error). Returns -1 on failure. */
static inline double moe_case_error_vs_a16w16(const moe_case *q) {
    const moe_spec *sp = &q->sp;
    moe_spec bs = *sp;
    bs.routed = MM_DTYPE_BF16;
    bs.shared = MM_DTYPE_BF16;
    bs.attrs.dispatch_quant_mode = 0;
    bs.attrs.dispatch_quant_out_dtype = MM_DTYPE_INVALID;
    bs.attrs.shared_expert_quant_out_dtype = MM_DTYPE_INVALID;
    bs.attrs.activation_out_dtype = MM_DTYPE_INVALID;
    bs.attrs.combine_quant_mode = 0;
    mm_ref_attrs a = moe_ref_attrs(&bs);
    mm_ref_case c;
    mm_error err;
    int64_t H = sp->hidden, K = sp->topk;
    if (mm_ref_case_alloc(&c, &a, sp->bs, MM_DTYPE_BF16, sp->shared_count, MM_DTYPE_BF16, &err) != MM_OK)
        return -1;
    const mm_ref_attrs *qa = &q->ref.attrs;
    for (int r = 0; r < sp->ranks; r++) {
        const mm_ref_case_rank *src = &q->ref.ranks[r];
        mm_ref_case_rank *dst = &c.ranks[r];
        for (int64_t i = 0; i < src->bs; i++) {
            for (int64_t h = 0; h < H; h++) {
                uint16_t v = src->x_bf16 ? src->x_bf16[i * H + h] : 0;
                if (qa->x_prequantized) { /* the BF16 twin sees the dequantized pre-quantized row */
                    float f = mm_dtype_to_f32(
                                  qa->dispatch_dtype,
                                  mm_dtype_bits(qa->dispatch_dtype) == 4
                                      ? mm_nibble_get(
                                            src->x_quant + i * mm_dtype_row_bytes(qa->dispatch_dtype, H), h)
                                      : src->x_quant[i * H + h]) *
                              mm_e8m0_to_f32(src->x_scales[i * ((H + 31) / 32) + h / 32]);
                    v = mm_f32_to_bf16(f);
                }
                dst->x_bf16[i * H + h] = v;
            }
            for (int64_t k = 0; k < K; k++) {
                dst->topk_ids[i * K + k] = src->topk_ids[i * K + k];
                dst->topk_weights[i * K + k] = src->topk_weights[i * K + k];
            }
            dst->x_active_mask[i] = src->x_active_mask[i];
        }
        const mm_ref_case_weights *gs[2] = {&src->routed, &src->shared};
        mm_ref_case_weights *gd[2] = {&dst->routed, &dst->shared};
        for (int g = 0; g < 2; g++)
            for (int which = 1; which <= 2; which++) {
                int64_t KK = mm_ref_case_gemm_k(qa, which), NN = mm_ref_case_gemm_n(qa, which);
                const float *bs_src = which == 1 ? gs[g]->bias1 : gs[g]->bias2;
                float *bs_dst = which == 1 ? gd[g]->bias1 : gd[g]->bias2;
                if (bs_src && bs_dst && gs[g]->dtype != MM_DTYPE_INT4) /* the F32 bias is the same bias */
                    memcpy(bs_dst, bs_src, (size_t)(gs[g]->count * NN) * sizeof *bs_dst);
                for (int64_t e = 0; e < gs[g]->count; e++)
                    for (int64_t k = 0; k < KK; k++)
                        for (int64_t n = 0; n < NN; n++)
                            mm_ref_case_set_weight(
                                &a, gd[g], which, e, k, n,
                                mm_f32_to_bf16(moe_dequant_weight(qa, gs[g], which, e, k, n)));
            }
    }
    double worst = -1;
    if (mm_ref_mega_moe(&c.attrs, c.inputs, c.outputs, &err) == MM_OK) {
        worst = 0;
        for (int r = 0; r < sp->ranks; r++) {
            double amax = 0, emax = 0;
            for (int64_t x = 0; x < sp->bs[r] * H; x++) {
                double ref = mm_bf16_to_f32(c.ranks[r].y[x]), got = mm_bf16_to_f32(q->y[r][x]);
                if (fabs(ref) > amax) amax = fabs(ref);
                if (fabs(ref - got) > emax) emax = fabs(ref - got);
            }
            double e = amax > 0 ? emax / amax : emax;
            if (e > worst) worst = e;
        }
    }
    mm_ref_case_free(&c);
    return worst;
}

#endif
