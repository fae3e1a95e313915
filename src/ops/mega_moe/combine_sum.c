/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/combine_sum.c: the sum of one token's expert rows and shared-expert rows, rounded once
 * to BF16 (combine_sum.h). The row loops are the rowops of ffn/rowops.h (AVX-512 when allowed, the same
 * bits either way); MX rows are dequantized exactly, then each weighted term is one rounded F32
 * product added in k order. */
#include "ops/mega_moe/combine_sum.h"

#include <string.h>

#include "format/bf16_inline.h"
#include "megamoe/formats.h"

static float weight_of(const mm_moe_sum_rule *r, const void *weights, int64_t k) {
    if (r->bf16_weights) return mm_bf16_to_f32_inline(((const uint16_t *)weights)[k]);
    return ((const float *)weights)[k];
}

void mm_moe_sum_routed(const mm_moe_sum_rule *r, const uint8_t *base, const int32_t *index,
                       const void *weights, float *acc, float *deq) {
    int64_t H = r->H;
    int cq = r->combine_quant_mode;
    memset(acc, 0, (size_t)H * sizeof *acc);
    for (int64_t k = 0; k < r->K; k++) {
        int64_t at = index ? index[k] : k;
        if (at < 0) continue;
        const uint8_t *slot = base + (size_t)at * r->slot_bytes;
        float w = r->weighted ? weight_of(r, weights, k) : 1.0f;
        if (cq == 0) {
            const uint16_t *o = (const uint16_t *)slot;
            if (r->weighted)
                r->ops->axpy_bf16(acc, w, o, H);
            else
                r->ops->add_bf16(acc, o, H);
            continue;
        }
        mm_mx_dequantize_row(slot, slot + H, H, cq == 3 ? MM_DTYPE_FP8_E5M2 : MM_DTYPE_FP8_E4M3FN, deq, NULL);
        if (r->weighted)
            for (int64_t x = 0; x < H; x++) {
                float term = w * deq[x];
                acc[x] += term;
            }
        else
            for (int64_t x = 0; x < H; x++) acc[x] += deq[x];
    }
}

void mm_moe_sum_finish(const mm_rowops *ops, int64_t H, float *acc, const uint16_t *shared, int64_t stride,
                       int64_t S, uint16_t *y) {
    for (int64_t e = 0; e < S; e++) ops->add_bf16(acc, shared + e * stride, H);
    ops->to_bf16(y, acc, H);
}
