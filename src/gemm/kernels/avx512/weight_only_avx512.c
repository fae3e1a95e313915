/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/weight_only_avx512.c: the weight-only pairs (BF16 activations x FP8 E4M3 with F32
 * block scales, FP4 E2M1 with MX scales, UINT4 with F32 group scales and zeros) on vdpbf16ps.
 *
 * The rule (docs/gemm.md, "Weight-only formats") dequantizes every weight to BF16 first,
 *   w' = BF16_RNE( F32( F32(decode(q) - zero) * scale ) ),
 * then computes the BF16 x BF16 GEMM. So each panel K block is prepared once per task into BF16 pairs
 * (the layout of a packed BF16 panel, gemm/packed.h) and the tile is bf16_avx512.c's (bf16_tile_avx512.h)
 * with the same pairs: the result is bit for bit mm_ukernel_bf16_bf16_avx512 on the matrix w'. The
 * decoders (exact F32 value, one F32 multiply, vcvtne2ps2bf16) are weight_only_decode_avx512.h's, shared
 * with the few-rows kernels (weight_only_small_avx512.c); FP4 (MX) is prepared by mx_avx512.c. The
 * padding K of an odd K is written as 0 whatever the zero point and scale (the packed BF16 panel holds 0
 * there). */
#include "core/cpu.h"
#include "gemm/kernels/avx512/bf16_tile_avx512.h"
#include "gemm/kernels/avx512/weight_only_decode_avx512.h"

void mm_ukernel_bf16_prepared_avx512(const mm_ukernel_args *p) {
    /* The activations are the caller's BF16 rows: an odd last K goes through the tile's tail pair, as in
     * bf16_avx512.c, never reading past the row. */
    const __m512i *block = (const __m512i *)(const void *)p->b_block;
    int64_t full_pairs = (p->k_end - p->k_begin) / 2;
    bf16_tile_run(p, block, full_pairs, (p->k_end & 1) ? block + 2 * full_pairs : NULL);
}

/* With AVX512_VBMI, FP8 blocks with one scale per panel decode by byte tables (weight_only_vbmi_avx512.c). */
void mm_prepare_panel_fp8_block_avx512(const mm_ukernel_args *p, uint8_t *block) {
    if (mm_cpu_has_avx512_vbmi())
        mm_prepare_panel_fp8_block_vbmi(p, block);
    else
        wo_prepare_block(p, WO_FP8, 0, block);
}
void mm_prepare_panel_uint4_avx512(const mm_ukernel_args *p, uint8_t *block) {
    wo_prepare_block(p, WO_UINT4, 0, block);
}
