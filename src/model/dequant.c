/* SPDX-License-Identifier: Apache-2.0 */
/* model/dequant.c: "dequantize on load" (mm_moe_layer_options.dequantize_to_bf16, `--weights bf16`):
 * checkpoint weights in FP8 E4M3 with F32 block scales (DeepSeek-V3) or MXFP4 with E8M0 scales
 * (gpt-oss) to BF16 by the rule of the A16 weight-only formats (docs/weight_formats.md),
 *   w' = BF16_RNE(F32(decode(q) * scale)),
 * one F32 product then one rounding, so the A16W16 GEMM on w' gives the bits of the native formats. */
#include "megamoe/formats.h"
#include "model/model_internal.h"

void mm_model_dequant_fp8_block(const uint8_t *q, int64_t rows, int64_t cols, const float *scales,
                                int64_t block_n, int64_t block_k, uint16_t *out) {
    int64_t scale_cols = (cols + block_k - 1) / block_k;
    for (int64_t i = 0; i < rows; i++) {
        const float *sr = scales + (i / block_n) * scale_cols;
        for (int64_t j = 0; j < cols; j++)
            out[i * cols + j] = mm_f32_to_bf16(mm_fp8_e4m3fn_to_f32(q[i * cols + j]) * sr[j / block_k]);
    }
}

void mm_model_dequant_mxfp4(const uint8_t *blocks, const uint8_t *scales, int64_t rows, int64_t cols,
                            uint16_t *out) {
    /* row i: cols / 32 groups of 16 bytes; element 2m of a group is the low nibble of byte m (the nibble
     * order of transformers' convert_moe_packed_tensors), the group's scale is 2^(s - 127) */
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            uint8_t byte = blocks[(i * cols + j) / 2];
            float v = mm_fp4_e2m1_to_f32(j % 2 ? (uint8_t)(byte >> 4) : byte);
            out[i * cols + j] = mm_f32_to_bf16(v * mm_e8m0_to_f32(scales[i * (cols / 32) + j / 32]));
        }
}
