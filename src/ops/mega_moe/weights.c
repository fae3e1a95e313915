/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/weights.c: mm_mega_moe_weights_create: checks one rank's expert weights against the
 * buffer's sizing and packs every expert's two matrices once for the grouped GEMM.
 *
 * Each of the six tensors of a group may come stacked (leading expert dimension) or as a per-expert
 * list; a small accessor hides which, so the checks and the packing are written once. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "format/format_table.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/buffer.h"
#include "ops/mega_moe/scenario_table.h"
#include "ops/mega_moe/weights.h"

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
    }
    free(s->w1);
    free(s->w2);
    memset(s, 0, sizeof *s);
}

/* Packs GEMM `which` (1 or 2) of expert e. */
static mm_status pack_one(const char *group, int which, int64_t e, mm_dtype dtype, int64_t k, int64_t n,
                          int transposed, const weight_view *w, const weight_view *sc, mm_dtype scale_dtype,
                          const weight_view *bias, float *scale_tmp, int interleave,
                          mm_gemm_packed_weights **out, mm_error *err) {
    mm_gemm_weight_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = dtype;
    d.k = k;
    d.n = n;
    d.transposed = transposed;
    d.data = view_data(w, e);
    mm_status st;
    if (mm_format_is_int_quant(dtype)) {
        if (scale_dtype == MM_DTYPE_U64) {
            st = mm_scale_u64_row_to_f32((const uint64_t *)view_data(sc, e), n, scale_tmp, err);
            if (st != MM_OK)
                return mm_error_prefix(err, "%s weight_scales%d of expert %" PRId64, group, which, e);
            d.scales = scale_tmp;
        } else {
            d.scales = (const float *)view_data(sc, e);
        }
        if (mm_moe_scenario_of_weight(dtype)->bias) d.bias = (const float *)view_data(bias, e);
    } else if (mm_format_is_mx(dtype)) {
        d.mx_scales = view_data(sc, e);
    }
    mm_gemm_pack_options opts = {interleave};
    st = mm_gemm_pack_weights_with(&d, &opts, out, err);
    if (st != MM_OK) return mm_error_prefix(err, "%s weight%d of expert %" PRId64, group, which, e);
    return MM_OK;
}

mm_status mm_moe_expert_set_make(const char *group, const mm_mega_moe_expert_weights *src,
                                 const char *count_name, int64_t count_rule_lo, int64_t count_rule_hi,
                                 int64_t hidden, int64_t inter, int fuse_activation, mm_moe_expert_set *set,
                                 mm_error *err) {
    mm_status st = MM_OK;
    float *scale_tmp = NULL;
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
    weight_view w1 = {"weight1", src->weight1, src->weight1_list};
    weight_view w2 = {"weight2", src->weight2, src->weight2_list};
    weight_view s1 = {"weight_scales1", src->weight_scales1, src->weight_scales1_list};
    weight_view s2 = {"weight_scales2", src->weight_scales2, src->weight_scales2_list};
    weight_view b1 = {"bias1", src->bias1, src->bias1_list};
    weight_view b2 = {"bias2", src->bias2, src->bias2_list};
    if (!view_present(&w1) || !view_present(&w2))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s %s is missing", group,
                       view_present(&w1) ? "weight2" : "weight1");
    int t1 = src->transpose_weight1 != 0, t2 = src->transpose_weight2 != 0;
    int64_t n1 = 2 * inter;
    int64_t shape1[2] = {t1 ? n1 : hidden, t1 ? hidden : n1};
    mm_dtype dtype = MM_DTYPE_INVALID, dtype2 = MM_DTYPE_INVALID;
    st = check_view(group, &w1, count, weight_dtypes(), 2, shape1,
                    t1 ? "(count, 2I, H) with transpose_weight1" : "(count, H, 2I)", &dtype, err);
    if (st != MM_OK) return st;
    /* GEMM2's K is I, or 2I for gelu weights: read it from the shape (the call checks the activation). */
    const mm_tensor *w2t = w2.list ? &w2.list[0] : w2.stacked;
    int64_t k2 = inter;
    int k_dim = (w2.list ? 0 : 1) + (t2 ? 1 : 0);
    if (w2t->ndim == (w2.list ? 2 : 3) && w2t->shape[k_dim] == 2 * inter) k2 = 2 * inter;
    int64_t shape2[2] = {t2 ? hidden : k2, t2 ? k2 : hidden};
    st = check_view(group, &w2, count, weight_dtypes(), 2, shape2,
                    t2 ? "(count, H, I) with transpose_weight2 (2I for gelu)" : "(count, I, H) (2I for gelu)",
                    &dtype2, err);
    if (st != MM_OK) return st;
    if (dtype2 != dtype)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s weight2 dtype %s differs from weight1's %s", group,
                       mm_dtype_name(dtype2), mm_dtype_name(dtype));
    int is_int = mm_format_is_int_quant(dtype);
    int is_mx = mm_format_is_mx(dtype);
    int bias = mm_moe_scenario_of_weight(dtype)->bias;
    mm_dtype sd1 = MM_DTYPE_INVALID, sd2 = MM_DTYPE_INVALID, bd = MM_DTYPE_INVALID;
    if (is_int || is_mx) {
        if (!view_present(&s1) || !view_present(&s2))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s %s is missing (required with %s weights)", group,
                           view_present(&s1) ? "weight_scales2" : "weight_scales1", mm_dtype_name(dtype));
        if (is_int) {
            int64_t sh1[1] = {n1}, sh2[1] = {hidden};
            uint64_t mask = DT(MM_DTYPE_F32) | DT(MM_DTYPE_U64);
            if ((st = check_view(group, &s1, count, mask, 1, sh1, "(count, 2I)", &sd1, err)) != MM_OK)
                return st;
            if ((st = check_view(group, &s2, count, mask, 1, sh2, "(count, H)", &sd2, err)) != MM_OK)
                return st;
        } else {
            int64_t sh1[3] = {n1, (hidden + 63) / 64, 2}, sh2[3] = {hidden, (k2 + 63) / 64, 2};
            uint64_t mask = DT(MM_DTYPE_E8M0) | DT(MM_DTYPE_U8);
            if ((st = check_view(group, &s1, count, mask, 3, sh1, "(count, 2I, ceil(H/64), 2)", &sd1, err)) !=
                MM_OK)
                return st;
            if ((st = check_view(group, &s2, count, mask, 3, sh2, "(count, H, ceil(K2/64), 2)", &sd2, err)) !=
                MM_OK)
                return st;
        }
    } else if (view_present(&s1) || view_present(&s2)) {
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s weight scales are given for bf16 weights (none allowed)", group);
    }
    if (bias) {
        if (!view_present(&b1) || !view_present(&b2))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "%s %s is missing (required with int4 weights, A8W4-INT)", group,
                           view_present(&b1) ? "bias2" : "bias1");
        int64_t sh1[1] = {n1}, sh2[1] = {hidden};
        if ((st = check_view(group, &b1, count, DT(MM_DTYPE_F32), 1, sh1, "(count, 2I)", &bd, err)) != MM_OK)
            return st;
        if ((st = check_view(group, &b2, count, DT(MM_DTYPE_F32), 1, sh2, "(count, H)", &bd, err)) != MM_OK)
            return st;
    } else if (view_present(&b1) || view_present(&b2)) {
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s bias is given with %s weights (bias only with int4 weights, A8W4-INT)", group,
                       mm_dtype_name(dtype));
    }
    set->count = count;
    set->dtype = dtype;
    set->k2 = k2;
    set->w1 = calloc((size_t)count, sizeof *set->w1);
    set->w2 = calloc((size_t)count, sizeof *set->w2);
    scale_tmp = malloc((size_t)(n1 > hidden ? n1 : hidden) * sizeof *scale_tmp);
    if (!set->w1 || !set->w2 || !scale_tmp) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s weights: out of memory", group);
        goto fail;
    }
    /* Gated weights (K2 = I) get gate/up interleaved panels, so that GEMM1's epilogue sees both halves
     * of an activation output in one tile and applies the activation there (ffn.c). */
    int interleave = fuse_activation && k2 == inter;
    for (int64_t e = 0; e < count; e++) {
        st = pack_one(group, 1, e, dtype, hidden, n1, t1, &w1, &s1, sd1, &b1, scale_tmp, interleave,
                      &set->w1[e], err);
        if (st != MM_OK) goto fail;
        st = pack_one(group, 2, e, dtype, k2, hidden, t2, &w2, &s2, sd2, &b2, scale_tmp, 0, &set->w2[e], err);
        if (st != MM_OK) goto fail;
    }
    free(scale_tmp);
    return MM_OK;
fail:
    free(scale_tmp);
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
