/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/weight_only_vbmi_avx512.c: BF16 activations x block-scaled FP8 E4M3 on CPUs with
 * AVX512_VBMI: the prepare function of the general kernel and the few-rows kernel, whose scale blocks
 * with one finite scale for the panel's 32 columns (block_n >= 32: the usual 128 x 128 checkpoint blocks)
 * decode each K pair by two byte-table lookups (weight_only_decode_avx512.h, "FP8 with one finite
 * scale") instead of ~20 instructions of F32 arithmetic; every other block as on any AVX-512 CPU. The
 * same bits either way. mm_prepare_panel_fp8_block_avx512 and mm_ukernel_bf16_fp8_block_small_avx512
 * call these where the CPU has AVX512_VBMI. */
/* vpermb / vpermt2b: the callers check the CPU. */
#pragma GCC target("avx512vbmi")
#include "gemm/kernels/avx512/weight_only_small_avx512.h"

void mm_prepare_panel_fp8_block_vbmi(const mm_ukernel_args *p, uint8_t *block) {
    wo_prepare_block(p, WO_FP8, 1, block);
}

void mm_ukernel_bf16_fp8_block_small_vbmi(const mm_ukernel_args *p) {
    small_run(p, WO_FP8, 1);
}
