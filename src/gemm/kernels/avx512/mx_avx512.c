/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/mx_avx512.c: MX micro-kernels (FP8 x FP8, FP8 x FP4, FP4 x FP4) on vdpbf16ps.
 *
 * Every MX value times its E8M0 scale has at most 4 significant bits, so it is exact in BF16 (barring
 * values below 2^-126): the activations are decoded to BF16 once per call (mm_gemm_mx_row_to_bf16), the
 * panel once per (panel, K block) of a task by the prepare functions below, and the tile is then plain
 * BF16 dot products (bf16_tile_avx512.h). Decoding uses the tables of format/decode_tables.c (BF16 patterns
 * of the exact decoders): vpermi2w over the 128 magnitudes for FP8, vpermw over the 16 codes for FP4. The
 * weight scale 2^(b-127) is applied by adding b - 127 to the BF16 exponent field, which is exact whenever
 * every finite nonzero value of the format stays a normal BF16 (b within [s_min, s_max] below); zeros, NaN
 * and Inf are left alone. A K block of 32 whose scales leave that range (extreme scales, NaN scale 0xFF)
 * takes the slow path: F32 decode, F32 multiply (the reference's rounding of w' = lut[q] * scale), rounding
 * to BF16.
 *
 * Tolerance against the reference kernel (ref_mx.c): both sum the same exact products a' * w' with one
 * F32 rounding per addition, in a different grouping (pairs), so as for BF16:
 *   |c_avx512 - c_ref| <= 2 * K * 2^-24 * sum_k |a'_k * w'_k|
 * plus, only for scales that push a value below 2^-126, the flushing of BF16 subnormals. */
#include "core/cpu.h"
#include "gemm/kernels/avx512/bf16_tile_avx512.h"
#include "gemm/kernels/avx512/weight_only_decode_avx512.h"

void mm_ukernel_mx_avx512(const mm_ukernel_args *p) {
    /* Prepared rows are BF16 padded with zeros to an even K, the prepared block holds whole pairs. */
    int64_t n_pairs = (p->k_end - p->k_begin + 1) / 2;
    bf16_tile_run(p, (const __m512i *)(const void *)p->b_block, n_pairs, NULL);
}

/* The panel decode of weight_only_decode_avx512.h (shared with the weight-only kernels), exact to the bit
 * (-0 stays -0). */
void mm_prepare_panel_fp8_avx512(const mm_ukernel_args *p, uint8_t *block) {
    wo_prepare_block(p, WO_MX_FP8, 0, block);
}
void mm_prepare_panel_fp4_avx512(const mm_ukernel_args *p, uint8_t *block) {
    wo_prepare_block(p, WO_FP4, 0, block);
}

/* The MX kernels' panel decode: with AVX512_VBMI the AMX kernels' decoder (mx_decode_avx512.h: two
 * byte-table lookups and a saturating subtraction per 64 codes, where the one above spends ~2.5x the
 * instructions): a 64-row FP8 x FP8 GEMM of K 7168 x N 4096 takes 10.0 instead of 11.1 ms on one Zen 5
 * core, once the next K block's codes come in while the tiles run (grouped.c). It writes +0 for a zero
 * weight of either sign, which changes no nonzero sum. */
static void prepare_mx(const mm_ukernel_args *p, uint8_t *block,
                       void (*without_vbmi)(const mm_ukernel_args *, uint8_t *)) {
    if (mm_cpu_has_avx512_vbmi())
        mm_prepare_panel_mx_vbmi(p, block, p->streams_weights);
    else
        without_vbmi(p, block);
}
void mm_prepare_panel_fp8_mx_avx512(const mm_ukernel_args *p, uint8_t *block) {
    prepare_mx(p, block, mm_prepare_panel_fp8_avx512);
}
void mm_prepare_panel_fp4_mx_avx512(const mm_ukernel_args *p, uint8_t *block) {
    prepare_mx(p, block, mm_prepare_panel_fp4_avx512);
}
