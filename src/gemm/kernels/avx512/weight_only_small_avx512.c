/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/weight_only_small_avx512.c: the few-rows kernels of the weight-only pairs (BF16
 * activations x block-scaled FP8 E4M3, MX FP4, UINT4 with group scales and zeros), 1..8 rows x 32
 * columns, for decode-sized groups whose speed should be that of streaming the packed codes once.
 *
 * The general kernels (weight_only_avx512.c) dequantize each K block of the panel into a BF16 buffer and
 * then run the 8 x 32 tile over it; with one row the buffer's stores and reloads are most of the work.
 * Here each K pair is decoded in registers (weight_only_decode_avx512.h, the same decoders as the
 * prepare functions) and fed to vdpbf16ps at once: one instruction per pair and accumulator, in K order,
 * the odd K's tail pair with its missing activation as 0, exactly as bf16_tile_body runs over the
 * prepared block. So the result is bit for bit that of the general kernel and of the BF16 x BF16 GEMM on
 * w'. The decode is paid once per tile, so the CPU profiles choose these kernels for one tile of rows
 * (MM_GEMM_WO_SMALL_MR), or a few tiles where the decode is cheap enough (zen5: a16-fp8b to 32 rows,
 * a16-mxfp4 to 16; kernel_profiles.h). */
#include "core/cpu.h"
#include "gemm/kernels/avx512/weight_only_small_avx512.h"

/* With AVX512_VBMI, FP8 blocks with one scale per panel decode by byte tables (weight_only_vbmi_avx512.c). */
void mm_ukernel_bf16_fp8_block_small_avx512(const mm_ukernel_args *p) {
    if (mm_cpu_has_avx512_vbmi())
        mm_ukernel_bf16_fp8_block_small_vbmi(p);
    else
        small_run(p, WO_FP8, 0);
}
void mm_ukernel_bf16_uint4_small_avx512(const mm_ukernel_args *p) {
    small_run(p, WO_UINT4, 0);
}
void mm_ukernel_bf16_fp4_small_avx512(const mm_ukernel_args *p) {
    small_run(p, WO_FP4, 0);
}
