/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/weights.c: mm_mega_moe_weights_create: checks one rank's expert weights against the
 * buffer's sizing and packs every expert's two matrices once for the grouped GEMM.
 *
 * Each tensor of a group may come stacked (leading expert dimension) or as a per-expert list; a small
 * accessor hides which, so the checks and the packing are written once. The checkpoint-format
 * extensions (block scales, zero points, biases for every format, weight1_interleave;
 * docs/weight_formats.md) are checked here and resolved at packing time (weights_layout.h), so the call
 * sees plain packed weights and a per-expert F32 bias. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/free_all.h"
#include "format/format_table.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/buffer.h"
#include "ops/mega_moe/scenario_table.h"
#include "ops/mega_moe/weights.h"
#include "ops/mega_moe/weights_layout.h"

/* One of the six tensors of a group, stacked or listed. */
typedef struct weight_view {
    const char *name; /* "weight1", ... */
    const mm_tensor *stacked, *list;
} weight_view;

static int view_present(const weight_view *v) {
    return v->stacked || v->list;
}

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t at = 0;
    at += (size_t)snprintf(buf + at, cap - at, "(");
    for (int d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (at < cap) snprintf(buf + at, cap - at, ")");
}

/* Checks dtype (one of mask) and the per-expert shape `inner` (ndim_inner dims) of every expert. */
static mm_status check_view(const char *group, const weight_view *v, int64_t count, uint64_t dtype_mask,
                            int ndim_inner, const int64_t *inner, const char *shape_rule, mm_dtype *dtype,
                            mm_error *err) {
    char want[128], have[128];
    if (v->stacked && v->list)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s %s is given both stacked and as a list (pass one)",
                       group, v->name);
    for (int64_t e = 0; e < (v->list ? count : 1); e++) {
        const mm_tensor *t = v->list ? &v->list[e] : v->stacked;
        int64_t full[MM_MAX_DIMS];
        int nd = v->list ? ndim_inner : ndim_inner + 1;
        if (v->list)
            memcpy(full, inner, (size_t)ndim_inner * sizeof *full);
        else {
            full[0] = count;
            memcpy(full + 1, inner, (size_t)ndim_inner * sizeof *full);
        }
        char label[64];
        if (v->list)
            snprintf(label, sizeof label, "%s %s_list[%" PRId64 "]", group, v->name, e);
        else
            snprintf(label, sizeof label, "%s %s", group, v->name);
        if (t->dtype <= MM_DTYPE_INVALID || t->dtype >= MM_DTYPE_COUNT ||
            !(dtype_mask & (UINT64_C(1) << t->dtype)))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s dtype %s is not accepted here", label,
                           mm_dtype_name(t->dtype));
        if (v->list && e > 0 && t->dtype != v->list[0].dtype)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s dtype %s differs from element 0's %s", label,
                           mm_dtype_name(t->dtype), mm_dtype_name(v->list[0].dtype));
        int same = t->ndim == nd;
        for (int d = 0; same && d < nd; d++) same = t->shape[d] == full[d];
        if (!same) {
            shape_text(want, sizeof want, nd, full);
            shape_text(have, sizeof have, t->ndim, t->shape);
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s shape %s must be %s %s", label, have, want,
                           shape_rule);
        }
        if (!t->data && mm_tensor_nbytes(t) > 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s data is NULL", label);
        *dtype = t->dtype;
    }
    return MM_OK;
}

/* Data of expert e. */
static const uint8_t *view_data(const weight_view *v, int64_t e) {
    if (!view_present(v)) return NULL;
    if (v->list) return v->list[e].data;
    mm_tensor one = *v->stacked;
    one.ndim -= 1;
    memmove(one.shape, one.shape + 1, (size_t)one.ndim * sizeof one.shape[0]);
    return (const uint8_t *)v->stacked->data + e * mm_tensor_nbytes(&one);
}

#define DT(d) (UINT64_C(1) << (d))

/* The weight dtypes of the scenario table. */
static uint64_t weight_dtypes(void) {
    uint64_t mask = 0;
    for (int i = 0; i < mm_moe_scenario_count; i++) mask |= DT(mm_moe_scenario_table[i].weight_dtype);
    return mask;
}

void mm_moe_expert_set_free(mm_moe_expert_set *s) {
    for (int64_t e = 0; e < s->count; e++) {
        if (s->w1) mm_gemm_packed_free(s->w1[e]);
        if (s->w2) mm_gemm_packed_free(s->w2[e]);
        if (s->bias1) free(s->bias1[e]);
        if (s->bias2) free(s->bias2[e]);
    }
    MM_FREE_ALL(s->w1, s->w2, s->bias1, s->bias2);
    memset(s, 0, sizeof *s);
}

/* What packing one group needs besides the expert index: the checked views and their dtypes. */
typedef struct pack_plan {
    const char *group;
    mm_dtype dtype, sd1, sd2;
    int64_t hidden, inter, k2;
    int t1, t2;
    int interleave; /* weight1_interleave */
    int block;      /* F32 block scales (and UINT4 zero points) */
    int64_t bn, bk;
    weight_view w1, w2, s1, s2, b1, b2, z1, z2;
} pack_plan;

/* Per-GEMM temporaries: the U64 -> F32 scales and the de-interleaved copies of weight1's tensors. */
typedef struct pack_tmp {
    float *scales;
    uint8_t *w, *s, *z;
    float *bias;
} pack_tmp;

static void pack_tmp_free(pack_tmp *t) {
    MM_FREE_ALL(t->scales, t->w, t->s, t->z, t->bias);
    memset(t, 0, sizeof *t);
}

static int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/* Packs GEMM `which` (1 or 2) of expert e; weight1 with weight1_interleave is first brought to channel
 * order (its scales, zero points and A8W4-INT bias too), so the packed layout and the hot path are those
 * of plain weights. */
static mm_status pack_one(const pack_plan *p, int which, int64_t e, int fuse, mm_gemm_packed_weights **out,
                          mm_error *err) {
    const char *group = p->group;
    int64_t k = which == 1 ? p->hidden : p->k2, n = which == 1 ? 2 * p->inter : p->hidden;
    int transposed = which == 1 ? p->t1 : p->t2;
    int il = which == 1 && p->interleave;
    const weight_view *w = which == 1 ? &p->w1 : &p->w2, *sc = which == 1 ? &p->s1 : &p->s2;
    const weight_view *z = which == 1 ? &p->z1 : &p->z2, *bias = which == 1 ? &p->b1 : &p->b2;
    mm_dtype scale_dtype = which == 1 ? p->sd1 : p->sd2;
    mm_dtype dtype = p->dtype;
    pack_tmp t = {0};
    mm_status st = MM_OK;
    mm_gemm_weight_desc d = {
        .dtype = dtype, .k = k, .n = n, .transposed = transposed, .data = view_data(w, e)};
    int bits = mm_dtype_bits(dtype);
    int64_t mat_bytes = transposed ? n * mm_dtype_row_bytes(dtype, k) : k * mm_dtype_row_bytes(dtype, n);
    if (il) {
        if (!(t.w = malloc((size_t)mat_bytes))) goto oom;
        if (transposed)
            mm_moe_deinterleave_rows(t.w, d.data, p->inter, mm_dtype_row_bytes(dtype, k));
        else
            mm_moe_deinterleave_cols(t.w, d.data, k, p->inter, bits);
        d.data = t.w;
    }
    if (p->block) {
        int64_t kb = ceil_div(k, p->bk);
        d.block_scales = (const float *)view_data(sc, e);
        d.zeros = view_data(z, e);
        d.block_n = p->bn;
        d.block_k = p->bk;
        if (il) { /* one scale row per channel, in channel order: exact, the same scale per element */
            if (!(t.s = malloc((size_t)(n * kb) * sizeof(float)))) goto oom;
            mm_moe_spread_block_rows(t.s, (const uint8_t *)d.block_scales, n, p->bn,
                                     kb * (int64_t)sizeof(float), p->inter, 1);
            d.block_scales = (const float *)t.s;
            if (d.zeros) {
                if (!(t.z = malloc((size_t)(n * kb)))) goto oom;
                mm_moe_spread_block_rows(t.z, d.zeros, n, p->bn, kb, p->inter, 1);
                d.zeros = t.z;
            }
            d.block_n = 1;
        }
    } else if (mm_format_is_int_quant(dtype)) {
        if (scale_dtype == MM_DTYPE_U64 || il) {
            if (!(t.scales = malloc((size_t)n * sizeof(float)))) goto oom;
            if (scale_dtype == MM_DTYPE_U64) {
                st = mm_scale_u64_row_to_f32((const uint64_t *)view_data(sc, e), n, t.scales, err);
                if (st != MM_OK) {
                    pack_tmp_free(&t);
                    return mm_error_prefix(err, "%s weight_scales%d of expert %" PRId64, group, which, e);
                }
            } else {
                memcpy(t.scales, view_data(sc, e), (size_t)n * sizeof(float));
            }
            if (il) {
                float *plain = t.scales;
                if (!(t.s = malloc((size_t)n * sizeof(float)))) goto oom;
                mm_moe_deinterleave_rows(t.s, (const uint8_t *)plain, p->inter, sizeof(float));
                d.scales = (const float *)t.s;
            } else {
                d.scales = t.scales;
            }
        } else {
            d.scales = (const float *)view_data(sc, e);
        }
        if (mm_moe_scenario_of_weight(dtype)->bias) {
            d.bias = (const float *)view_data(bias, e);
            if (il) {
                if (!(t.bias = malloc((size_t)n * sizeof(float)))) goto oom;
                mm_moe_deinterleave_rows((uint8_t *)t.bias, (const uint8_t *)d.bias, p->inter, sizeof(float));
                d.bias = t.bias;
            }
        }
    } else if (mm_format_is_mx(dtype)) {
        d.mx_scales = view_data(sc, e);
        if (il) {
            int64_t row = ceil_div(k, 64) * 2;
            if (!(t.s = malloc((size_t)(n * row)))) goto oom;
            mm_moe_deinterleave_rows(t.s, d.mx_scales, p->inter, row);
            d.mx_scales = t.s;
        }
    }
    mm_gemm_pack_options opts = {fuse};
    st = mm_gemm_pack_weights_with(&d, &opts, out, err);
    pack_tmp_free(&t);
    if (st != MM_OK) return mm_error_prefix(err, "%s weight%d of expert %" PRId64, group, which, e);
    return MM_OK;
oom:
    pack_tmp_free(&t);
    return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s weight%d of expert %" PRId64 ": out of memory", group,
                   which, e);
}

/* The F32 bias of GEMM `which` of expert e in channel order, for every format but A8W4-INT. */
static mm_status copy_bias(const pack_plan *p, int which, int64_t e, float **out, mm_error *err) {
    const weight_view *v = which == 1 ? &p->b1 : &p->b2;
    int64_t n = which == 1 ? 2 * p->inter : p->hidden;
    *out = NULL;
    if (!view_present(v)) return MM_OK;
    float *b = malloc((size_t)n * sizeof *b);
    if (!b) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s bias%d: out of memory", p->group, which);
    if (which == 1 && p->interleave)
        mm_moe_deinterleave_rows((uint8_t *)b, view_data(v, e), p->inter, sizeof(float));
    else
        memcpy(b, view_data(v, e), (size_t)n * sizeof *b);
    *out = b;
    return MM_OK;
}

/* The block-scale tensors of a block-scaled group: block sizes, scales (count, ceil(N/bn), ceil(K/bk))
 * F32, and for UINT4 the zero points, U8 of the same shape with values 0..15. */
static mm_status check_block_scales(pack_plan *p, const mm_mega_moe_expert_weights *src, int64_t count,
                                    mm_error *err) {
    const char *group = p->group;
    mm_status st;
    if (src->scale_block_n < 1 || src->scale_block_k < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s scale_block_%s = %" PRId64 " must be >= 1 with %s weights and F32 block scales",
                       group, src->scale_block_n < 1 ? "n" : "k",
                       src->scale_block_n < 1 ? src->scale_block_n : src->scale_block_k,
                       mm_dtype_name(p->dtype));
    p->bn = src->scale_block_n;
    p->bk = src->scale_block_k;
    int64_t sh1[2] = {ceil_div(2 * p->inter, p->bn), ceil_div(p->hidden, p->bk)};
    int64_t sh2[2] = {ceil_div(p->hidden, p->bn), ceil_div(p->k2, p->bk)};
    const char *r1 = "(count, ceil(2I / scale_block_n), ceil(H / scale_block_k))";
    const char *r2 = "(count, ceil(H / scale_block_n), ceil(K2 / scale_block_k))";
    if ((st = check_view(group, &p->s1, count, DT(MM_DTYPE_F32), 2, sh1, r1, &p->sd1, err)) != MM_OK)
        return st;
    if ((st = check_view(group, &p->s2, count, DT(MM_DTYPE_F32), 2, sh2, r2, &p->sd2, err)) != MM_OK)
        return st;
    if (p->dtype != MM_DTYPE_UINT4) {
        if (view_present(&p->z1) || view_present(&p->z2))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "%s weight_zeros are given with %s weights (uint4 only)", group,
                           mm_dtype_name(p->dtype));
        return MM_OK;
    }
    if (!view_present(&p->z1) || !view_present(&p->z2))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s %s is missing (required with uint4 weights)", group,
                       view_present(&p->z1) ? "weight_zeros2" : "weight_zeros1");
    mm_dtype zd;
    if ((st = check_view(group, &p->z1, count, DT(MM_DTYPE_U8), 2, sh1, r1, &zd, err)) != MM_OK) return st;
    if ((st = check_view(group, &p->z2, count, DT(MM_DTYPE_U8), 2, sh2, r2, &zd, err)) != MM_OK) return st;
    for (int which = 1; which <= 2; which++) {
        const weight_view *z = which == 1 ? &p->z1 : &p->z2;
        int64_t per = which == 1 ? sh1[0] * sh1[1] : sh2[0] * sh2[1];
        for (int64_t e = 0; e < count; e++) {
            const uint8_t *v = view_data(z, e);
            for (int64_t i = 0; i < per; i++)
                if (v[i] > 15)
                    return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                                   "%s weight_zeros%d of expert %" PRId64 " [%" PRId64 "][%" PRId64
                                   "] = %u is outside [0, 15]",
                                   group, which, e, i / (which == 1 ? sh1[1] : sh2[1]),
                                   i % (which == 1 ? sh1[1] : sh2[1]), (unsigned)v[i]);
        }
    }
    return MM_OK;
}

/* The scales of a group by its weight dtype: per-channel F32 (INT), E8M0 MX (FP8 / FP4) or F32 blocks
 * (FP8 E4M3 given F32 scales, UINT4); none for BF16. */
static mm_status check_scales(pack_plan *p, const mm_mega_moe_expert_weights *src, int64_t count,
                              mm_error *err) {
    const char *group = p->group;
    mm_dtype dtype = p->dtype;
    mm_status st;
    int is_int = mm_format_is_int_quant(dtype), is_mx = mm_format_is_mx(dtype);
    const mm_tensor *first = p->s1.list ? &p->s1.list[0] : p->s1.stacked;
    p->block =
        dtype == MM_DTYPE_UINT4 || (dtype == MM_DTYPE_FP8_E4M3FN && first && first->dtype == MM_DTYPE_F32);
    if (!p->block && (src->scale_block_n != 0 || src->scale_block_k != 0))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s scale_block_n = %" PRId64 ", scale_block_k = %" PRId64
                       " must be 0 without block scales (fp8_e4m3fn with F32 scales, or uint4)",
                       group, src->scale_block_n, src->scale_block_k);
    if (!p->block && (view_present(&p->z1) || view_present(&p->z2)))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s weight_zeros are given with %s weights (uint4 only)",
                       group, mm_dtype_name(dtype));
    if (!is_int && !is_mx && !p->block) {
        if (view_present(&p->s1) || view_present(&p->s2))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "%s weight scales are given for bf16 weights (none allowed)", group);
        return MM_OK;
    }
    if (!view_present(&p->s1) || !view_present(&p->s2))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s %s is missing (required with %s weights)", group,
                       view_present(&p->s1) ? "weight_scales2" : "weight_scales1", mm_dtype_name(dtype));
    if (p->block) return check_block_scales(p, src, count, err);
    int64_t n1 = 2 * p->inter, hidden = p->hidden;
    if (is_int) {
        int64_t sh1[1] = {n1}, sh2[1] = {hidden};
        uint64_t mask = DT(MM_DTYPE_F32) | DT(MM_DTYPE_U64);
        if ((st = check_view(group, &p->s1, count, mask, 1, sh1, "(count, 2I)", &p->sd1, err)) != MM_OK)
            return st;
        return check_view(group, &p->s2, count, mask, 1, sh2, "(count, H)", &p->sd2, err);
    }
    int64_t sh1[3] = {n1, (hidden + 63) / 64, 2}, sh2[3] = {hidden, (p->k2 + 63) / 64, 2};
    uint64_t mask = DT(MM_DTYPE_E8M0) | DT(MM_DTYPE_U8);
    if ((st = check_view(group, &p->s1, count, mask, 3, sh1, "(count, 2I, ceil(H/64), 2)", &p->sd1, err)) !=
        MM_OK)
        return st;
    return check_view(group, &p->s2, count, mask, 3, sh2, "(count, H, ceil(K2/64), 2)", &p->sd2, err);
}

mm_status mm_moe_expert_set_make(const char *group, const mm_mega_moe_expert_weights *src,
                                 const char *count_name, int64_t count_rule_lo, int64_t count_rule_hi,
                                 int64_t hidden, int64_t inter, int fuse_activation, mm_moe_expert_set *set,
                                 mm_error *err) {
    mm_status st = MM_OK;
    memset(set, 0, sizeof *set);
    int64_t count = src ? src->count : 0;
    if (count < count_rule_lo || count > count_rule_hi) {
        if (count_rule_lo == count_rule_hi)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s count = %" PRId64 " must be %s = %" PRId64,
                           group, count, count_name, count_rule_lo);
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s count = %" PRId64 " is outside [%" PRId64 ", %" PRId64 "]", group, count,
                       count_rule_lo, count_rule_hi);
    }
    if (count == 0) return MM_OK;
    pack_plan p = {.group = group,
                   .hidden = hidden,
                   .inter = inter,
                   .w1 = {"weight1", src->weight1, src->weight1_list},
                   .w2 = {"weight2", src->weight2, src->weight2_list},
                   .s1 = {"weight_scales1", src->weight_scales1, src->weight_scales1_list},
                   .s2 = {"weight_scales2", src->weight_scales2, src->weight_scales2_list},
                   .b1 = {"bias1", src->bias1, src->bias1_list},
                   .b2 = {"bias2", src->bias2, src->bias2_list},
                   .z1 = {"weight_zeros1", src->weight_zeros1, src->weight_zeros1_list},
                   .z2 = {"weight_zeros2", src->weight_zeros2, src->weight_zeros2_list}};
    if (!view_present(&p.w1) || !view_present(&p.w2))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s %s is missing", group,
                       view_present(&p.w1) ? "weight2" : "weight1");
    if (src->weight1_interleave != 0 && src->weight1_interleave != 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s weight1_interleave = %d is not 0 or 1", group,
                       src->weight1_interleave);
    p.interleave = src->weight1_interleave;
    int t1 = p.t1 = src->transpose_weight1 != 0, t2 = p.t2 = src->transpose_weight2 != 0;
    int64_t n1 = 2 * inter;
    int64_t shape1[2] = {t1 ? n1 : hidden, t1 ? hidden : n1};
    mm_dtype dtype = MM_DTYPE_INVALID, dtype2 = MM_DTYPE_INVALID;
    st = check_view(group, &p.w1, count, weight_dtypes(), 2, shape1,
                    t1 ? "(count, 2I, H) with transpose_weight1" : "(count, H, 2I)", &dtype, err);
    if (st != MM_OK) return st;
    /* GEMM2's K is I, or 2I for gelu weights: read it from the shape (the call checks the activation). */
    const mm_tensor *w2t = p.w2.list ? &p.w2.list[0] : p.w2.stacked;
    int64_t k2 = inter;
    int k_dim = (p.w2.list ? 0 : 1) + (t2 ? 1 : 0);
    if (w2t->ndim == (p.w2.list ? 2 : 3) && w2t->shape[k_dim] == 2 * inter) k2 = 2 * inter;
    p.k2 = k2;
    int64_t shape2[2] = {t2 ? hidden : k2, t2 ? k2 : hidden};
    st = check_view(group, &p.w2, count, weight_dtypes(), 2, shape2,
                    t2 ? "(count, H, I) with transpose_weight2 (2I for gelu)" : "(count, I, H) (2I for gelu)",
                    &dtype2, err);
    if (st != MM_OK) return st;
    if (dtype2 != dtype)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s weight2 dtype %s differs from weight1's %s", group,
                       mm_dtype_name(dtype2), mm_dtype_name(dtype));
    p.dtype = dtype;
    if ((st = check_scales(&p, src, count, err)) != MM_OK) return st;
    /* Biases: required by A8W4-INT's formula (its seed meaning); optional F32 for every other format. */
    int seed_bias = mm_moe_scenario_of_weight(dtype)->bias;
    if (seed_bias && (!view_present(&p.b1) || !view_present(&p.b2)))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s %s is missing (required with int4 weights, A8W4-INT)", group,
                       view_present(&p.b1) ? "bias2" : "bias1");
    mm_dtype bd = MM_DTYPE_INVALID;
    int64_t bsh1[1] = {n1}, bsh2[1] = {hidden};
    if (view_present(&p.b1) &&
        (st = check_view(group, &p.b1, count, DT(MM_DTYPE_F32), 1, bsh1, "(count, 2I)", &bd, err)) != MM_OK)
        return st;
    if (view_present(&p.b2) &&
        (st = check_view(group, &p.b2, count, DT(MM_DTYPE_F32), 1, bsh2, "(count, H)", &bd, err)) != MM_OK)
        return st;
    set->count = count;
    set->dtype = dtype;
    set->k2 = k2;
    set->block_scaled = p.block;
    set->w1 = calloc((size_t)count, sizeof *set->w1);
    set->w2 = calloc((size_t)count, sizeof *set->w2);
    int own_bias = !seed_bias && (view_present(&p.b1) || view_present(&p.b2));
    if (own_bias) {
        set->bias1 = calloc((size_t)count, sizeof *set->bias1);
        set->bias2 = calloc((size_t)count, sizeof *set->bias2);
    }
    if (!set->w1 || !set->w2 || (own_bias && (!set->bias1 || !set->bias2))) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s weights: out of memory", group);
        goto fail;
    }
    /* Gated weights (K2 = I) get gate/up interleaved panels, so that GEMM1's epilogue sees both halves
     * of an activation output in one tile and applies the activation there (ffn.c). */
    int fuse = fuse_activation && k2 == inter;
    for (int64_t e = 0; e < count; e++) {
        if ((st = pack_one(&p, 1, e, fuse, &set->w1[e], err)) != MM_OK) goto fail;
        if ((st = pack_one(&p, 2, e, 0, &set->w2[e], err)) != MM_OK) goto fail;
        if (own_bias && ((st = copy_bias(&p, 1, e, &set->bias1[e], err)) != MM_OK ||
                         (st = copy_bias(&p, 2, e, &set->bias2[e], err)) != MM_OK))
            goto fail;
    }
    return MM_OK;
fail:
    set->count = count;
    mm_moe_expert_set_free(set);
    return st;
}

mm_status mm_mega_moe_weights_create(const mm_mega_moe_buffer *buffer,
                                     const mm_mega_moe_expert_weights *routed,
                                     const mm_mega_moe_expert_weights *shared, mm_mega_moe_weights **out,
                                     mm_error *err) {
    return mm_moe_weights_create_with(buffer, routed, shared, 1, out, err);
}

mm_status mm_moe_weights_create_with(const mm_mega_moe_buffer *buffer,
                                     const mm_mega_moe_expert_weights *routed,
                                     const mm_mega_moe_expert_weights *shared, int fuse_activation,
                                     mm_mega_moe_weights **out, mm_error *err) {
    mm_status st;
    if (!buffer || !routed || !out)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "buffer, routed and out must not be NULL");
    *out = NULL;
    mm_mega_moe_weights *w = calloc(1, sizeof *w);
    if (!w) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "weights handle: out of memory");
    w->hidden = buffer->sizing.hidden;
    w->inter = buffer->sizing.intermediate_hidden;
    w->local_experts = buffer->local_experts;
    st = mm_moe_expert_set_make("routed", routed, "E / R", buffer->local_experts, buffer->local_experts,
                                w->hidden, w->inter, fuse_activation, &w->routed, err);
    if (st != MM_OK) goto fail;
    st = mm_moe_expert_set_make("shared", shared, "", 0, MM_MEGA_MOE_MAX_SHARED_EXPERTS, w->hidden, w->inter,
                                fuse_activation, &w->shared, err);
    if (st != MM_OK) goto fail;
    *out = w;
    return MM_OK;
fail:
    mm_mega_moe_weights_free(w);
    return st;
}

void mm_mega_moe_weights_free(mm_mega_moe_weights *w) {
    if (!w) return;
    mm_moe_expert_set_free(&w->routed);
    mm_moe_expert_set_free(&w->shared);
    free(w);
}
