/* SPDX-License-Identifier: Apache-2.0 */
/* ref/ref_case.c: buffer ownership and layout-aware setters for reference calls (see ref_case.h). */
#include "ref/ref_case.h"

#include <stdlib.h>
#include <string.h>

#include "format/format_table.h"
#include "core/error.h"
#include "ref/mega_moe_ref_check.h"

int64_t mm_ref_case_gemm_k(const mm_ref_attrs *attrs, int which) {
    return which == 1 ? attrs->hidden : mm_ref_activation_out_width(attrs->activation.kind, attrs->inter);
}

int64_t mm_ref_case_gemm_n(const mm_ref_attrs *attrs, int which) {
    return which == 1 ? 2 * attrs->inter : attrs->hidden;
}

static int64_t matrix_bytes(const mm_ref_attrs *a, mm_dtype dtype, int which) {
    int64_t k = mm_ref_case_gemm_k(a, which), n = mm_ref_case_gemm_n(a, which);
    int transposed = which == 1 ? a->transpose_weight1 : a->transpose_weight2;
    return transposed ? n * mm_dtype_row_bytes(dtype, k) : k * mm_dtype_row_bytes(dtype, n);
}

static int64_t mx_scale_bytes(const mm_ref_attrs *a, int which) {
    return mm_ref_case_gemm_n(a, which) * ((mm_ref_case_gemm_k(a, which) + 63) / 64) * 2;
}

static void *zeroed(int64_t count, size_t size) {
    return calloc(count > 0 ? (size_t)count : 1, size);
}

static float *filled_f32(int64_t count, float value) {
    float *p = zeroed(count, sizeof *p);
    if (p)
        for (int64_t i = 0; i < count; i++) p[i] = value;
    return p;
}

void mm_ref_case_block_dims(const mm_ref_attrs *attrs, int which, int64_t *nb, int64_t *kb) {
    int64_t bn = attrs->scale_block_n > 0 ? attrs->scale_block_n : 1;
    int64_t bk = attrs->scale_block_k > 0 ? attrs->scale_block_k : 1;
    *nb = (mm_ref_case_gemm_n(attrs, which) + bn - 1) / bn;
    *kb = (mm_ref_case_gemm_k(attrs, which) + bk - 1) / bk;
}

int mm_ref_case_block_scaled(mm_dtype dtype, mm_dtype input_dtype) {
    return dtype == MM_DTYPE_UINT4 || (dtype == MM_DTYPE_FP8_E4M3FN && input_dtype == MM_DTYPE_INVALID);
}

static int alloc_weights(const mm_ref_attrs *a, mm_ref_case_weights *w, mm_dtype dtype, int64_t count,
                         mm_dtype input_dtype) {
    w->dtype = dtype;
    w->count = count;
    if (count == 0) return 1;
    w->block_scaled = mm_ref_case_block_scaled(dtype, input_dtype);
    if (w->block_scaled) { /* scales 1.0, zero points 0 */
        for (int which = 1; which <= 2; which++) {
            int64_t nb, kb;
            mm_ref_case_block_dims(a, which, &nb, &kb);
            float **s = which == 1 ? &w->block_scales1 : &w->block_scales2;
            if (!(*s = filled_f32(count * nb * kb, 1.0f))) return 0;
            if (dtype == MM_DTYPE_UINT4) {
                uint8_t **z = which == 1 ? &w->zeros1 : &w->zeros2;
                if (!(*z = zeroed(count * nb * kb, 1))) return 0;
            }
        }
    }
    w->weight1 = zeroed(count * matrix_bytes(a, dtype, 1), 1);
    w->weight2 = zeroed(count * matrix_bytes(a, dtype, 2), 1);
    if (!w->weight1 || !w->weight2) return 0;
    if (mm_format_is_int_quant(dtype)) {
        w->scales1 = filled_f32(count * mm_ref_case_gemm_n(a, 1), 1.0f);
        w->scales2 = filled_f32(count * mm_ref_case_gemm_n(a, 2), 1.0f);
        if (!w->scales1 || !w->scales2) return 0;
    }
    if (dtype == MM_DTYPE_INT4 || a->with_bias) {
        w->bias1 = zeroed(count * mm_ref_case_gemm_n(a, 1), sizeof(float));
        w->bias2 = zeroed(count * mm_ref_case_gemm_n(a, 2), sizeof(float));
        if (!w->bias1 || !w->bias2) return 0;
    }
    if (mm_format_is_mx(dtype) && !w->block_scaled) {
        w->mx_scales1 = zeroed(count * mx_scale_bytes(a, 1), 1);
        w->mx_scales2 = zeroed(count * mx_scale_bytes(a, 2), 1);
        if (!w->mx_scales1 || !w->mx_scales2) return 0;
        memset(w->mx_scales1, 127, (size_t)(count * mx_scale_bytes(a, 1)));
        memset(w->mx_scales2, 127, (size_t)(count * mx_scale_bytes(a, 2)));
    }
    return 1;
}

static void free_weights(mm_ref_case_weights *w) {
    free(w->weight1);
    free(w->weight2);
    free(w->scales1);
    free(w->scales2);
    free(w->bias1);
    free(w->bias2);
    free(w->mx_scales1);
    free(w->mx_scales2);
    free(w->block_scales1);
    free(w->block_scales2);
    free(w->zeros1);
    free(w->zeros2);
}

static mm_ref_weights weights_view(const mm_ref_case_weights *w) {
    mm_ref_weights v = {w->dtype,         w->count,         w->weight1,    w->weight2, w->scales1,
                        w->scales2,       w->mx_scales1,    w->mx_scales2, w->bias1,   w->bias2,
                        w->block_scales1, w->block_scales2, w->zeros1,     w->zeros2};
    return v;
}

void mm_ref_case_free(mm_ref_case *c) {
    if (c->ranks) {
        for (int64_t r = 0; r < c->attrs.world_size; r++) {
            mm_ref_case_rank *k = &c->ranks[r];
            free(k->x_bf16);
            free(k->x_quant);
            free(k->x_scales);
            free(k->topk_ids);
            free(k->topk_weights);
            free(k->x_active_mask);
            free(k->y);
            free(k->y_scale);
            free(k->expert_token_nums);
            free_weights(&k->routed);
            free_weights(&k->shared);
        }
    }
    free(c->ranks);
    free(c->inputs);
    free(c->outputs);
    memset(c, 0, sizeof *c);
}

mm_status mm_ref_case_alloc(mm_ref_case *c, const mm_ref_attrs *attrs, const int64_t *bs,
                            mm_dtype routed_dtype, int64_t shared_count, mm_dtype shared_dtype,
                            mm_error *err) {
    memset(c, 0, sizeof *c);
    c->attrs = *attrs;
    int64_t R = attrs->world_size, H = attrs->hidden, K = attrs->topk;
    if (R < 1 || attrs->expert_num < R || attrs->expert_num % R != 0 || H < 1 || K < 1 || attrs->inter < 1)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "reference case: world_size = %lld, expert_num = %lld, hidden = %lld, topk = %lld, inter = "
            "%lld do not describe a case",
            (long long)R, (long long)attrs->expert_num, (long long)H, (long long)K, (long long)attrs->inter);
    c->ranks = calloc((size_t)R, sizeof *c->ranks);
    c->inputs = calloc((size_t)R, sizeof *c->inputs);
    c->outputs = calloc((size_t)R, sizeof *c->outputs);
    if (!c->ranks || !c->inputs || !c->outputs) goto oom;
    for (int64_t r = 0; r < R; r++) {
        mm_ref_case_rank *k = &c->ranks[r];
        int64_t n = bs[r];
        k->bs = n;
        if (attrs->x_prequantized) {
            k->x_quant = zeroed(n * mm_dtype_row_bytes(attrs->dispatch_dtype, H), 1);
            k->x_scales = zeroed(n * ((H + 31) / 32), 1);
            if (!k->x_quant || !k->x_scales) goto oom;
        } else {
            k->x_bf16 = zeroed(n * H, sizeof(uint16_t));
            if (!k->x_bf16) goto oom;
        }
        k->topk_ids = zeroed(n * K, sizeof(int32_t));
        k->topk_weights = zeroed(n * K, sizeof(float));
        k->x_active_mask = zeroed(n, 1);
        k->y = zeroed(n * H, sizeof(uint16_t));
        k->y_scale = zeroed(n * H, sizeof(float));
        k->expert_token_nums = zeroed(attrs->expert_num / R, sizeof(int32_t));
        if (!k->topk_ids || !k->topk_weights || !k->x_active_mask || !k->y || !k->y_scale ||
            !k->expert_token_nums)
            goto oom;
        memset(k->x_active_mask, 1, (size_t)n);
        if (!alloc_weights(attrs, &k->routed, routed_dtype, attrs->expert_num / R, attrs->dispatch_dtype))
            goto oom;
        if (!alloc_weights(attrs, &k->shared, shared_dtype, shared_count, mm_ref_shared_input_dtype(attrs)))
            goto oom;
        c->inputs[r] = (mm_ref_rank_input){n,
                                           k->x_bf16,
                                           k->x_quant,
                                           k->x_scales,
                                           k->topk_ids,
                                           k->topk_weights,
                                           k->x_active_mask,
                                           weights_view(&k->routed),
                                           weights_view(&k->shared)};
        c->outputs[r] = (mm_ref_rank_output){k->y, k->expert_token_nums, k->y_scale};
    }
    return MM_OK;
oom:
    mm_ref_case_free(c);
    return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "reference case buffers (hidden = %lld)", (long long)H);
}

void mm_ref_case_set_weight(const mm_ref_attrs *attrs, mm_ref_case_weights *w, int which, int64_t expert,
                            int64_t k, int64_t n, uint32_t bits) {
    int64_t k_len = mm_ref_case_gemm_k(attrs, which), n_len = mm_ref_case_gemm_n(attrs, which);
    int transposed = which == 1 ? attrs->transpose_weight1 : attrs->transpose_weight2;
    int64_t row = transposed ? n : k, col = transposed ? k : n, row_len = transposed ? k_len : n_len;
    int64_t row_bytes = mm_dtype_row_bytes(w->dtype, row_len);
    uint8_t *base = (which == 1 ? w->weight1 : w->weight2) + expert * matrix_bytes(attrs, w->dtype, which);
    uint8_t *p = base + row * row_bytes;
    switch (mm_dtype_bits(w->dtype)) {
    case 4: {
        uint8_t *byte = p + col / 2;
        int shift = (int)(col & 1) * 4;
        *byte = (uint8_t)((*byte & ~(0x0F << shift)) | ((bits & 0x0F) << shift));
        break;
    }
    case 16: {
        uint16_t v = (uint16_t)bits;
        memcpy(p + 2 * col, &v, sizeof v);
        break;
    }
    default: p[col] = (uint8_t)bits; break;
    }
}

void mm_ref_case_set_mx_scale(const mm_ref_attrs *attrs, mm_ref_case_weights *w, int which, int64_t expert,
                              int64_t n, int64_t group, uint8_t scale) {
    int64_t pairs = (mm_ref_case_gemm_k(attrs, which) + 63) / 64;
    uint8_t *s = (which == 1 ? w->mx_scales1 : w->mx_scales2) + expert * mx_scale_bytes(attrs, which);
    s[n * pairs * 2 + group] = scale;
}
