/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/weights.h: the packed expert weights of MegaMoE (weights.c packs them). */
#ifndef MEGAMOE_OPS_MEGA_MOE_WEIGHTS_H
#define MEGAMOE_OPS_MEGA_MOE_WEIGHTS_H

#include <stdint.h>

#include "gemm/gemm.h"
#include "megamoe/mega_moe.h"

/* Packed weights of one group of experts. */
typedef struct mm_moe_expert_set {
    int64_t count;
    mm_dtype dtype;
    int64_t k2;       /* GEMM2 reduction length: I, or 2I for gelu weights */
    int block_scaled; /* F32 block scales (FP8 E4M3 / UINT4): only the A16 weight-only scenarios take them */
    mm_gemm_packed_weights **w1, **w2;
    /* Biases added in F32 to the GEMM outputs (docs/weight_formats.md), per expert, bias1 in channel
     * order (gate [0, I), up [I, 2I), whatever weight1_interleave was); NULL when not given, and for
     * A8W4-INT, whose bias is part of the GEMM's formula. */
    float **bias1, **bias2;
} mm_moe_expert_set;

/* Expert e's bias of GEMM `which` (1 or 2), or NULL. */
static inline const float *mm_moe_expert_bias(const mm_moe_expert_set *set, int which, int64_t e) {
    float **b = which == 1 ? set->bias1 : set->bias2;
    return b ? b[e] : NULL;
}

struct mm_mega_moe_weights {
    int64_t hidden, inter, local_experts;
    mm_moe_expert_set routed, shared;
};

/* Checks one group of experts (shapes against hidden / inter, dtypes, scales and bias by the scenario
 * table, count within [count_lo, count_hi], named count_name in the message when both are equal) and
 * packs it; fuse_activation as below. Also used by the local experts call (ops/experts/). On failure
 * set is empty. */
mm_status mm_moe_expert_set_make(const char *group, const mm_mega_moe_expert_weights *src,
                                 const char *count_name, int64_t count_lo, int64_t count_hi, int64_t hidden,
                                 int64_t inter, int fuse_activation, mm_moe_expert_set *set, mm_error *err);
/* Frees the packed matrices of a set (any state mm_moe_expert_set_make left) and empties it. */
void mm_moe_expert_set_free(mm_moe_expert_set *set);

/* mm_mega_moe_weights_create with a choice: fuse_activation 1 (what the public function does) packs
 * gated GEMM1 weights gate/up interleaved so the activation runs in GEMM1's epilogue; 0 keeps the plain
 * layout and the separate activation pass (the unfused path, kept for gelu and as the tests' baseline). */
mm_status mm_moe_weights_create_with(const mm_mega_moe_buffer *buffer,
                                     const mm_mega_moe_expert_weights *routed,
                                     const mm_mega_moe_expert_weights *shared, int fuse_activation,
                                     mm_mega_moe_weights **out, mm_error *err);

#endif
