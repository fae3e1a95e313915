/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/weight_only_avx512.c: the weight-only pairs (BF16 activations x FP8 E4M3 with F32
 * block scales, FP4 E2M1 with MX scales, UINT4 with F32 group scales and zeros) on vdpbf16ps.
 *
 * The rule (docs/gemm.md, "Weight-only formats") dequantizes every weight to BF16 first,
 *   w' = BF16_RNE( F32( F32(decode(q) - zero) * scale ) ),
 * then computes the BF16 x BF16 GEMM. So each panel K block is prepared once per task into BF16 pairs
 * (the layout of a packed BF16 panel, gemm/packed.h) and the tile is bf16_avx512.c's (bf16_tile_avx512.h)
 * with the same pairs: the result is bit for bit mm_ukernel_bf16_bf16_avx512 on the matrix w'.
 *   FP8: the exact BF16 table decode, widened to F32 (exact), times the scale, vcvtne2ps2bf16 (RNE).
 *   UINT4: q - zero as a 16-bit integer, to F32 (exact), times the scale, vcvtne2ps2bf16.
 *   FP4 (MX): mx_avx512.c's prepare (the exponent addition is exact inside its scale window, its slow
 *   path is the same F32 multiply and rounding).
 * vcvtne2ps2bf16 flushes F32 subnormals to zero where the rule's BF16 rounding keeps a BF16 subnormal;
 * vdpbf16ps treats BF16 subnormal inputs as zero, so both give the same sums. The padding K of an odd K
 * is written as 0 whatever the zero point and scale (the packed BF16 panel holds 0 there). */
#include "format/decode_tables.h"
#include "gemm/kernels/avx512/bf16_tile_avx512.h"
#include "gemm/kernels/avx512/panel_codes_avx512.h"

void mm_ukernel_bf16_prepared_avx512(const mm_ukernel_args *p) {
    /* The activations are the caller's BF16 rows: an odd last K goes through the tile's tail pair, as in
     * bf16_avx512.c, never reading past the row. */
    const __m512i *block = (const __m512i *)(const void *)p->b_block;
    int64_t full_pairs = (p->k_end - p->k_begin) / 2;
    bf16_tile_run(p, block, full_pairs, (p->k_end & 1) ? block + 2 * full_pairs : NULL);
}

/* The scales (F32, one vector per (16-column half h, 8-column quarter q) in pair-lane order) and zero
 * points (16-bit lanes in pair order per half) of one scale block. */
typedef struct block_params {
    __m512 scale[2][2];
    __m512i zero[2];
} block_params;

static inline void load_block_params(const mm_ukernel_args *p, int64_t kb, block_params *bp) {
    static const uint16_t dup_columns[32] = {0, 0, 1, 1, 2,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,
                                             8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};
    const float *s = p->b_block_scale + kb * MM_GEMM_NR;
    for (int h = 0; h < 2; h++) {
        __m512 s16 = _mm512_loadu_ps(s + 16 * h);
        bp->scale[h][0] = panel_pair_scales(s16, 0);
        bp->scale[h][1] = panel_pair_scales(s16, 8);
    }
    if (!p->b_block_zero) {
        bp->zero[0] = bp->zero[1] = _mm512_setzero_si512();
        return;
    }
    __m512i z = _mm512_cvtepu8_epi16(
        _mm256_loadu_si256((const __m256i *)(const void *)(p->b_block_zero + kb * MM_GEMM_NR)));
    __m512i dup = _mm512_loadu_si512(dup_columns);
    bp->zero[0] = _mm512_permutexvar_epi16(dup, z);
    bp->zero[1] = _mm512_permutexvar_epi16(_mm512_add_epi16(dup, _mm512_set1_epi16(16)), z);
}

/* A pair whose second K lies in the next scale block (odd block_k): odd lanes take that block's. */
static inline void blend_odd_lanes(block_params *bp, const block_params *next) {
    for (int h = 0; h < 2; h++) {
        for (int q = 0; q < 2; q++)
            bp->scale[h][q] = _mm512_mask_blend_ps((__mmask16)0xAAAA, bp->scale[h][q], next->scale[h][q]);
        bp->zero[h] = _mm512_mask_blend_epi16((__mmask32)0xAAAAAAAAu, bp->zero[h], next->zero[h]);
    }
}

/* 32 lanes of F32-exact weights (before scaling) -> times the scales -> BF16 pairs. is_uint4: v holds
 * q - zero as 16-bit integers; else BF16 patterns of the FP8 values. */
static inline __m512i scale_to_bf16(__m512i v, const __m512 scale[2], int is_uint4) {
    __m512 f[2];
    for (int q = 0; q < 2; q++) {
        __m256i words = q ? _mm512_extracti64x4_epi64(v, 1) : _mm512_castsi512_si256(v);
        __m512 x = is_uint4 ? _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(words))
                            : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(words), 16));
        f[q] = _mm512_mul_ps(x, scale[q]);
    }
    return (__m512i)_mm512_cvtne2ps_pbh(f[1], f[0]);
}

static inline __attribute__((always_inline)) void prepare_block_scaled(const mm_ukernel_args *p,
                                                                       uint8_t *block, int is_uint4) {
    __m512i table[4];
    if (!is_uint4) {
        const uint16_t *bf16 = mm_format_lut_bf16(MM_DTYPE_FP8_E4M3FN);
        for (int i = 0; i < 4; i++) table[i] = _mm512_loadu_si512(bf16 + 32 * i);
    }
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    int64_t kb = p->k_begin / p->block_k, boundary = (kb + 1) * p->block_k;
    block_params bp, cur;
    load_block_params(p, kb, &bp);
    for (int64_t kp = first_pair; kp < end_pair; kp++) {
        int64_t k0 = 2 * kp;
        if (k0 >= boundary) {
            kb = k0 / p->block_k;
            boundary = (kb + 1) * p->block_k;
            load_block_params(p, kb, &bp);
        }
        cur = bp;
        if (k0 + 1 == boundary && k0 + 1 < p->k) {
            block_params next;
            load_block_params(p, kb + 1, &next);
            blend_odd_lanes(&cur, &next);
        }
        _mm_prefetch((const char *)(p->b + (kp + 128) * (is_uint4 ? 32 : 64)), _MM_HINT_T0);
        __m512i codes[2];
        panel_pair_codes(p->b, kp, is_uint4, codes);
        __m512i *dst = (__m512i *)(void *)(block + (kp - first_pair) * 128);
        for (int h = 0; h < 2; h++) {
            __m512i v =
                is_uint4 ? _mm512_sub_epi16(codes[h], cur.zero[h]) : panel_decode_fp8(codes[h], table);
            v = scale_to_bf16(v, cur.scale[h], is_uint4);
            /* The padding K of an odd K: 0, as in a packed BF16 panel. */
            if (k0 + 1 >= p->k) v = _mm512_maskz_mov_epi16((__mmask32)0x55555555u, v);
            _mm512_store_si512(dst + h, v);
        }
    }
}

void mm_prepare_panel_fp8_block_avx512(const mm_ukernel_args *p, uint8_t *block) {
    prepare_block_scaled(p, block, 0);
}
void mm_prepare_panel_uint4_avx512(const mm_ukernel_args *p, uint8_t *block) {
    prepare_block_scaled(p, block, 1);
}
