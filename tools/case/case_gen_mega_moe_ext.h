/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/case_gen_mega_moe_ext.h: what `case-gen mega-moe` and `case-gen mega-moe-ext` share: the
 * options, and the weight-group tensors of op mega_moe_ext (case_gen_mega_moe_ext.c). */
#ifndef MEGAMOE_TOOLS_CASE_GEN_MEGA_MOE_EXT_H
#define MEGAMOE_TOOLS_CASE_GEN_MEGA_MOE_EXT_H

#include <stdint.h>

#include "megamoe/dtype.h"
#include "ops/mega_moe/scenario_table.h"

typedef struct gen_options {
    const char *scenario;
    int64_t ranks, tokens, zero_rank, hidden, inter, experts, topk, shared, topk_weights_type, cq, cc, rps,
        seed;
    int prequantized, mask, transpose, activation;
    double clamp;
    /* op mega_moe_ext (docs/weight_formats.md) */
    int ext, bias, interleave;
    int64_t bn, bk; /* F32 block sizes of block-scaled rows, 0 for the others */
} gen_options;

/* The per-channel values make_group drew for one matrix (count x N each; MX scales count x N x
 * ceil(K/64) x 2): per-channel scales, INT4's bias, E8M0 scales. */
typedef struct case_gen_ext_buffers {
    float *scales, *bias;
    uint8_t *mx;
} case_gen_ext_buffers;

/* Adds matrix `which` (0: GEMM1, 1: GEMM2; N outputs, K reductions) of op mega_moe_ext's group: its
 * scales (per channel, MX, or F32 blocks drawn here with U8 zero points for UINT4) at t[2 + which],
 * its bias (INT4's, or with --bias one drawn here) at t[4 + which], zero points at t[6 + which].
 * Buffers it allocates go to keep. Returns 0 when out of memory. */
int case_gen_ext_group(const gen_options *o, const mm_moe_scenario_row *scenario, int64_t count, int which,
                       int64_t N, int64_t K, const case_gen_ext_buffers *b, uint64_t *s, mm_tensor *t,
                       int *has, void **keep, int *nkeep);

#endif
