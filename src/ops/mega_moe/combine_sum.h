/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/combine_sum.h: the home side's sum of one token (combine_sum.c), in the reference's
 * order (ref/mega_moe_ref.h step 8): MegaMoE's combine (mode 0) and the local experts call
 * (ops/experts/) both use it, so they give the same bits. */
#ifndef MEGAMOE_OPS_MEGA_MOE_COMBINE_SUM_H
#define MEGAMOE_OPS_MEGA_MOE_COMBINE_SUM_H

#include <stddef.h>
#include <stdint.h>

#include "ffn/rowops.h"

/* How one token's routed rows are summed. */
typedef struct mm_moe_sum_rule {
    const mm_rowops *ops;
    int64_t H, K;
    size_t slot_bytes;      /* distance between consecutive slots */
    int combine_quant_mode; /* 0: BF16 slots; 3 / 4: MX FP8 E5M2 / E4M3 bytes followed by E8M0 scales */
    int weighted;           /* topk_weights_type 0: each row times its gating weight */
    int bf16_weights;       /* the gating weights are BF16 (else F32) */
} mm_moe_sum_rule;

/* acc (H floats) = the F32 sum in k order of [w_k *] row_k. Row k sits in slot index[k] of base
 * (index NULL: slot k; index[k] < 0: no row, skipped). weights: the token's K gating weights (read
 * only when weighted). deq: H floats of scratch (MX slots). */
void mm_moe_sum_routed(const mm_moe_sum_rule *r, const uint8_t *base, const int32_t *index,
                       const void *weights, float *acc, float *deq);

/* Adds S shared-expert BF16 rows (row e at shared + e * stride) to acc, then y = BF16(acc). */
void mm_moe_sum_finish(const mm_rowops *ops, int64_t H, float *acc, const uint16_t *shared, int64_t stride,
                       int64_t S, uint16_t *y);

#endif
