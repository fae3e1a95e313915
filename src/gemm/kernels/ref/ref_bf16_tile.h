/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/ref/ref_bf16_tile.h: the portable BF16 tile shared by ref_bf16.c and ref_weight_only.c,
 * so that a weight-only pair computes exactly the BF16 x BF16 sums once its weights are dequantized. */
#ifndef MEGAMOE_GEMM_REF_BF16_TILE_H
#define MEGAMOE_GEMM_REF_BF16_TILE_H

#include "gemm/kernels/kernels.h"

/* Writes the F32 values of the BF16 weights of row k, columns 0..n-1 of the panel, into wv. */
typedef void (*mm_ref_weight_row_fn)(const mm_ukernel_args *p, int64_t k, float *wv);

/* c = sum over k = k_begin..k_end-1, in k order, of f32(a[k]) * wv[k], one F32 accumulator per output
 * element, continued from / saved to `partial` between blocks (kernel.h). */
void mm_ref_bf16_tile(const mm_ukernel_args *p, mm_ref_weight_row_fn weight_row);

#endif
