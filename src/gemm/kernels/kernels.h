/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/kernels.h: declarations of every micro-kernel, so that the registry (compiled for the
 * baseline ISA) can take their addresses without including any ISA-specific code. */
#ifndef MEGAMOE_GEMM_KERNELS_H
#define MEGAMOE_GEMM_KERNELS_H

#include "gemm/kernel.h"

/* Portable reference set: MR = MM_GEMM_REF_MR, any weight layout of gemm/packed.h. */
#define MM_GEMM_REF_MR 4
void mm_ukernel_bf16_bf16_ref(const mm_ukernel_args *args);
void mm_ukernel_i8_i8_ref(const mm_ukernel_args *args);
void mm_ukernel_i8_i4_ref(const mm_ukernel_args *args);
void mm_ukernel_fp8_fp8_ref(const mm_ukernel_args *args);
void mm_ukernel_fp8_fp4_ref(const mm_ukernel_args *args);
void mm_ukernel_fp4_fp4_ref(const mm_ukernel_args *args);
/* Weight-only pairs (BF16 activations x block-scaled FP8 E4M3, MX FP4, UINT4 with zeros): weights
 * dequantized to BF16, then the BF16 tile (ref_weight_only.c). */
void mm_ukernel_bf16_weight_only_ref(const mm_ukernel_args *args);

/* Activation preparation (portable, prepare_rows.c): an MX row to BF16 with its scales folded in. */
void mm_gemm_mx_row_to_bf16(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales, int64_t k,
                            uint16_t *out);
/* The rows of the AVX-512 MX kernels: mm_gemm_mx_row_to_bf16_vbmi where the CPU has AVX512_VBMI, else
 * mm_gemm_mx_row_to_bf16 (call only when mm_cpu_isa() >= MM_ISA_AVX512). */
void mm_gemm_mx_row_to_bf16_avx512(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales, int64_t k,
                                   uint16_t *out);

/* AVX-512 set (files kernels/avx512/NAME_avx512.c): call only when mm_cpu_isa() >= MM_ISA_AVX512. */
#define MM_GEMM_AVX512_MR 8
void mm_ukernel_bf16_bf16_avx512(const mm_ukernel_args *args);
/* K per call of the AVX-512 INT kernels (INT4, few-rows INT4; INT8: below): any K up to 8192 in one call. A
 * call moves its INT32 sums through `partial` and pays its dispatch, while the vpdpbusd kernels gain nothing
 * from a 256-K slice in L1 (at 64 rows the slice is read from L2 at well below its bandwidth; measured:
 * docs/gemm.md, 'K per call'). */
#define MM_GEMM_AVX512_INT_KC 8192
/* K per call of the INT8 x INT8 kernel: 2048, so that an M-block's tiles fetch the next K block while
 * they compute (kernel.h: prefetch): 64 rows, K 7168 x N 4096, one Zen 5 core, 5.5-6.5 -> 5.3-5.8 ms
 * (INT8 x INT4, whose weights are half the bytes, was faster with the whole K: 4.7 vs 5.0 ms). */
#define MM_GEMM_AVX512_I8_KC 2048
/* Rows per tile of the INT8 x INT8 kernel: 12 (24 accumulators), where the other AVX-512 kernels take 8.
 * Each K quad then loads its two weight vectors for 24 vpdpbusd instead of 16: one Zen 5 core, K 7168 x
 * N 4096, 256 rows, cold weights, 742 -> 816-820 GOP/s; 8 rows were kept for BF16, which gained nothing
 * (docs/gemm.md, 'INT8 in 12-row tiles'). */
#define MM_GEMM_AVX512_I8_MR 12
void mm_ukernel_i8_i8_avx512(const mm_ukernel_args *args);
void mm_ukernel_i8_i4_avx512(const mm_ukernel_args *args);
/* MX pairs: BF16 dot products over prepared rows (mm_gemm_mx_row_to_bf16_avx512) and prepared panel
 * blocks (the *_mx_avx512 prepares): mm_prepare_panel_*_vbmi where the CPU has AVX512_VBMI (the same
 * values but +0 for a zero weight of either sign, which changes no nonzero sum), else
 * mm_prepare_panel_*_avx512, the decoder of weight_only_decode_avx512.h (bit for bit; the FP4 one is also the
 * weight-only FP4 pair's prepare). */
void mm_ukernel_mx_avx512(const mm_ukernel_args *args);
void mm_prepare_panel_fp8_mx_avx512(const mm_ukernel_args *args, uint8_t *block);
void mm_prepare_panel_fp4_mx_avx512(const mm_ukernel_args *args, uint8_t *block);
void mm_prepare_panel_fp8_avx512(const mm_ukernel_args *args, uint8_t *block);
void mm_prepare_panel_fp4_avx512(const mm_ukernel_args *args, uint8_t *block);
/* Weight-only pairs (weight_only_avx512.c): BF16 activation rows as given, panel blocks prepared to
 * BF16 w' by the prepare functions (FP4 MX: mm_prepare_panel_fp4_avx512), then bf16_avx512.c's tile. */
void mm_ukernel_bf16_prepared_avx512(const mm_ukernel_args *args);
void mm_prepare_panel_fp8_block_avx512(const mm_ukernel_args *args, uint8_t *block);
void mm_prepare_panel_uint4_avx512(const mm_ukernel_args *args, uint8_t *block);
/* The FP8 ones above on a CPU with AVX512_VBMI (weight_only_vbmi_avx512.c): scale blocks with one finite
 * scale per panel decode by byte tables, the same bits. The *_avx512 functions call them on such CPUs. */
void mm_prepare_panel_fp8_block_vbmi(const mm_ukernel_args *args, uint8_t *block);
void mm_ukernel_bf16_fp8_block_small_vbmi(const mm_ukernel_args *args);
/* FP8 x FP8 with few rows (m <= MM_GEMM_MX_SMALL_MR, mx_small_avx512.c): BF16 dot products over prepared
 * rows and the raw packed panel (FP8 codes looked up to BF16 in registers, scales per K block). Also
 * needs AVX512_VBMI. K per call: MM_GEMM_MX_SMALL_KC (a call builds its lookup tables). */
#define MM_GEMM_MX_SMALL_MR 8
#define MM_GEMM_MX_SMALL_KC 2048
void mm_ukernel_mx_small_avx512(const mm_ukernel_args *args);
/* MXFP4 x MXFP4 with few rows (m <= MM_GEMM_FP4_SMALL_MR, fp4_int_small_avx512.c): exact integer block
 * sums on vpdpbusd (2 x E2M1 is an integer), the raw packed panel, rows prepared once per GEMM call to
 * int8 (mm_gemm_fp4_int_prepare_row), one F32 multiply-add per MX block. K per call: MM_GEMM_FP4_SMALL_KC. */
#define MM_GEMM_FP4_SMALL_MR 8
#define MM_GEMM_FP4_SMALL_KC 2048
void mm_ukernel_fp4_fp4_small_avx512(const mm_ukernel_args *args);
/* Its prepared rows: 2 x E2M1 as int8 and per MX block the scale and correction (not BF16). */
void mm_gemm_fp4_int_prepare_row(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales, int64_t k,
                                 uint16_t *out);
int64_t mm_gemm_fp4_int_prepared_row_bytes(int64_t k);
/* MXFP8 x MXFP4 (FP8 activations, FP4 weights) with few rows (m <= MM_GEMM_FP8_FP4_SMALL_MR,
 * fp8_fp4_small_avx512.c): FP4 codes to BF16 by word permutes, vdpbf16ps with activation pairs broadcast
 * from rows prepared to BF16 in the quad order (k, k+2, k+1, k+3). K per call: MM_GEMM_FP8_FP4_SMALL_KC. */
#define MM_GEMM_FP8_FP4_SMALL_MR 4
#define MM_GEMM_FP8_FP4_SMALL_KC 2048
void mm_ukernel_fp8_fp4_small_avx512(const mm_ukernel_args *args);
void mm_gemm_fp8_fp4_prepare_row(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales, int64_t k,
                                 uint16_t *out);
int64_t mm_gemm_fp8_fp4_prepared_row_bytes(int64_t k);
/* Weight-only pairs with few rows (m <= MM_GEMM_WO_SMALL_MR, weight_only_small_avx512.c): each K pair of
 * the packed panel decoded to w' in registers and fed to vdpbf16ps (no prepared block), bit for bit the
 * general kernels' results. K per call: MM_GEMM_WO_SMALL_KC. */
#define MM_GEMM_WO_SMALL_MR 8
#define MM_GEMM_WO_SMALL_KC 2048
/* Rows up to which they take two panels per call (mm_gemm_kernel.pairs_panels): with 1-2 rows the
 * vdpbf16ps chains wait on their latency; from 3 rows, two panels streamed by one task were slower. */
#define MM_GEMM_WO_PAIRS_MAX_ROWS 2
void mm_ukernel_bf16_fp8_block_small_avx512(const mm_ukernel_args *args);
void mm_ukernel_bf16_uint4_small_avx512(const mm_ukernel_args *args);
void mm_ukernel_bf16_fp4_small_avx512(const mm_ukernel_args *args);
/* INT8 x INT4 with few rows (m <= MM_GEMM_I4_SMALL_MR, i4_small_avx512.c): the raw packed panel as the
 * unsigned operand of vpdpbusd (value + 8), activations broadcast from memory, the panel prefetched. */
#define MM_GEMM_I4_SMALL_MR 8
void mm_ukernel_i8_i4_small_avx512(const mm_ukernel_args *args);

/* AMX set (files kernels/amx/NAME_amx_avx512.c): call only when mm_cpu_isa() >= MM_ISA_AMX. */
/* 32 rows: one A tile times two B tiles up to 16 rows, 2 x 2 tiles beyond. */
#define MM_GEMM_AMX_MR 32
/* K per call of the AMX kernels that read the packed panel directly: each call reloads the tile
 * configuration and moves its C tiles through `partial`, which at MM_GEMM_KC (8 tile products per call)
 * costs about as much as the products; at 2048 the panel slice (64 KiB INT8, 128 KiB BF16) stays in L2
 * while the M tiles pass (measured: docs/gemm.md, 'K per call'). */
#define MM_GEMM_AMX_KC 2048
void mm_ukernel_bf16_bf16_amx(const mm_ukernel_args *args);
/* K per call of the AMX INT kernels: any K up to 8192 (hidden sizes up to 8192) in one call. Each call
 * loads the tile configuration and, between blocks, moves its four C tiles through `partial`: a tile store
 * then a tile load of the same lines, which at 2048 (INT8 K 7168: four calls per tile) was a sizeable
 * share of the hot kernel (measured: docs/gemm.md, 'AMX call overhead'). The panel slice of a call
 * (8192 x 32 bytes = 256 KiB INT8) still stays in L2 for the next M tile. */
#define MM_GEMM_AMX_INT_KC 8192
void mm_ukernel_i8_i8_amx(const mm_ukernel_args *args);
/* INT8 x INT4: the INT8 tile over panel blocks decoded to INT8 by mm_prepare_panel_i4_amx. */
void mm_ukernel_i8_i4_amx(const mm_ukernel_args *args);
void mm_prepare_panel_i4_amx(const mm_ukernel_args *args, uint8_t *block);
/* MX pairs: the BF16 tile over prepared rows and panel blocks decoded by mm_prepare_panel_*_vbmi
 * (mx_amx_avx512.c: lookups in registers, scale as an exponent subtraction; needs AVX512_VBMI, which every
 * AMX CPU has, and no tile instruction: the AVX-512 MX kernels use them too where the CPU has VBMI). */
void mm_ukernel_mx_amx(const mm_ukernel_args *args);
void mm_prepare_panel_fp8_vbmi(const mm_ukernel_args *args, uint8_t *block);
/* mm_gemm_mx_row_to_bf16 vectorized with AVX512_VBMI (mx_amx_avx512.c, no tile instruction: it runs on
 * every CPU with AVX-512 VBMI; zeros become +0, which changes no sum): the AMX MX kernels' rows. */
void mm_gemm_mx_row_to_bf16_vbmi(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales, int64_t k,
                                 uint16_t *out);
void mm_prepare_panel_fp4_vbmi(const mm_ukernel_args *args, uint8_t *block);
/* Their body, for FP8 and FP4 weights alike; stream: prefetch ahead (a task of one M tile, whose decode
 * streams the weights: the AVX-512 MX kernels pass args->streams_weights). */
void mm_prepare_panel_mx_vbmi(const mm_ukernel_args *args, uint8_t *block, int stream);
/* MX pairs with few rows (m <= MM_GEMM_MX_FEW_AMX_MR, mx_amx_avx512.c): each K block of 32 decoded from
 * the raw panel into two B tiles in L1 and multiplied at once, no prepared block. */
#define MM_GEMM_MX_FEW_AMX_MR 16
/* Its K per call: it needs no prepared block, and every call costs a tile configuration, a release and
 * (between calls) a C round trip through `partial` (measured: docs/gemm.md, 'AMX call overhead'), so one
 * call per panel for any usual K. */
#define MM_GEMM_MX_FEW_AMX_KC 16384
void mm_ukernel_mx_few_amx(const mm_ukernel_args *args);

#endif
