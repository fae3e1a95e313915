/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/ref/ref_weight_only.c: portable micro-kernel of the weight-only pairs (BF16 activations x
 * FP8 E4M3 with F32 block scales, FP4 E2M1 with E8M0 MX scales, UINT4 with F32 group scales and zeros).
 *
 * Arithmetic (docs/gemm.md, "Weight-only formats"): each weight is first dequantized to BF16,
 *   w' = BF16_RNE( F32( F32(decode(q) - zero) * scale ) )
 * (zero = 0 except UINT4; scale = the block scale, or 2^(e-127) for MX), and the tile is then exactly
 * ref_bf16.c's (ref_bf16_tile.h), so this kernel on Q gives the bits of mm_ukernel_bf16_bf16_ref on the
 * matrix w'. */
#include "format/decode_tables.h"
#include "gemm/kernels/ref/ref_bf16_tile.h"
#include "megamoe/formats.h"

static void dequantized_row(const mm_ukernel_args *p, int64_t k, float *wv) {
    const float *lut = mm_format_lut_f32(p->w_dtype);
    const float *e8m0 = mm_format_lut_f32(MM_DTYPE_E8M0);
    for (int c = 0; c < p->n; c++) {
        float q = lut[mm_packed_code(p->w_dtype, p->b, k, c)], scale;
        if (p->b_block_scale) {
            int64_t at = (k / p->block_k) * MM_GEMM_NR + c;
            scale = p->b_block_scale[at];
            if (p->b_block_zero) q -= (float)p->b_block_zero[at];
        } else {
            scale = e8m0[p->b_mx_e8m0[(k >> 5) * MM_GEMM_NR + c]];
        }
        wv[c] = mm_bf16_to_f32(mm_f32_to_bf16(q * scale));
    }
}

void mm_ukernel_bf16_weight_only_ref(const mm_ukernel_args *p) {
    mm_ref_bf16_tile(p, dequantized_row);
}
