/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/weight_only_decode_avx512.h: one K pair of a weight-only panel (block-scaled FP8
 * E4M3, UINT4 with group scales and zeros, FP4 with MX scales) decoded to w' in registers, as the two
 * BF16 pair vectors of a packed BF16 panel (gemm/packed.h). Shared by the prepare functions (which store
 * them, weight_only_avx512.c and mx_avx512.c) and the few-rows kernels (weight_only_small_avx512.c,
 * which feed them to vdpbf16ps directly), so both see the same bits. Included only by *_avx512.c files.
 *
 * The rule (docs/gemm.md, "Weight-only formats"): w' = BF16_RNE(F32(F32(decode(q) - zero) * scale)).
 * The decoders compute F32(decode(q) - zero) exactly and do the one F32 multiply and vcvtne2ps2bf16:
 *   UINT4: the bit pattern 0x4B400000 + (q - zero) is the F32 1.5 * 2^23 + (q - zero) (unit steps between
 *     2^23 and 2^24), so one integer add of the per-lane constant 0x4B400000 - zero and one subtraction
 *     of 1.5 * 2^23 give q - zero exactly (0 as +0, like the integer conversion), for 4-bit codes in
 *     32-bit lanes.
 *   FP8: a code sign-extended to 32 bits, shifted left by 20 and masked to 0x87F00000 is the F32 whose
 *     value is decode(q) * 2^-120 (the E4M3 exponent field lands in the F32 one, E4M3 subnormals become
 *     F32 subnormals); times scale * 2^120, computed once per block, it is the exact product
 *     decode(q) * scale rounded once, as the rule. Not taken (the exact table decode below instead) for a
 *     pair holding a NaN code (0x7F / 0xFF), a block whose scale * 2^120 overflows, or when the caller's
 *     MXCSR has DAZ set (the F32 subnormal inputs would read as 0).
 *   FP8 with one finite scale for the 32 columns of a whole scale block (block_n >= 32, the common
 *     128 x 128 blocks), in files compiled with AVX512_VBMI: the rule's w' of all 128 magnitudes are
 *     computed once per block (the same F32 multiply and vcvtne2ps2bf16, so the same bits as above) into
 *     two 128-byte tables of their high and low bytes, and a pair is one vpermb, two vpermt2b, a
 *     vpternlogd for the sign and two vpunpck (6 instructions for 64 weights instead of ~20): rounding to
 *     nearest even is symmetric, so w'(-x) = -w'(x), NaN codes included (a NaN operand of the multiply
 *     passes through with its sign). Infinite or NaN scales keep the decoders above (0 * Inf and a NaN
 *     scale give a NaN whose sign is not the code's), and so does a caller whose MXCSR rounds other
 *     than to nearest (w'(-x) = -w'(x) needs a symmetric rounding of the multiply too).
 *   FP4 (MX): mx_avx512.c's decode, kept here as mx_panel_* (BF16 table, exponent addition inside the
 *     scale window, the F32 multiply outside it).
 * vcvtne2ps2bf16 flushes F32 subnormals to zero where the rule's BF16 rounding keeps a BF16 subnormal;
 * vdpbf16ps treats BF16 subnormal inputs as zero, so both give the same sums. */
#ifndef MEGAMOE_GEMM_WEIGHT_ONLY_DECODE_AVX512_H
#define MEGAMOE_GEMM_WEIGHT_ONLY_DECODE_AVX512_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "format/decode_tables.h"
#include "format/format_table.h"
#include "gemm/kernels/avx512/panel_codes_avx512.h"
#include "gemm/kernels/kernels.h"

#define WO_ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- block-scaled FP8 and UINT4 ---- */

/* The parameters of one scale block, per dword vector j of a pair (columns 8j..8j+7, lanes in pair
 * order: lane 2c + k % 2): the F32 scales, FP8: the scales times 2^120, UINT4: 0x4B400000 - zero and
 * zero * scale. */
typedef struct wo_block {
    __m512 scale[4];
    __m512 scale_x2p120[4];
    __m512i zero_bits[4];
    __m512 zero_scale[4];
    int fp8_fast;    /* FP8: no scale * 2^120 overflowed */
    int uint4_fused; /* UINT4: every scale allows wo_uint4_pair_fused */
} wo_block;

/* UINT4 scales for which zero * scale is exact for every zero 0..15 and normal: positive, at most 20
 * significant bits (the low 4 mantissa bits zero: FP16 and BF16 scales, as GPTQ / AWQ checkpoints
 * store them, have 11 and 8), in [2^-122, 2^123) (F32 bit patterns compared as unsigned, so a negative
 * scale fails too: q = zero would give +0 where the rule gives -0). Above the range zero * scale could
 * overflow; below it a subnormal scale under DAZ would again give +0 for the rule's -0. */
static inline int wo_uint4_scales_fused(const float *s) {
    __mmask16 ok = 0xFFFF;
    for (int h = 0; h < 2; h++) {
        __m512i bits = _mm512_loadu_si512(s + 16 * h);
        ok &= _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0xF)) &
              _mm512_cmpge_epu32_mask(bits, _mm512_set1_epi32(0x02800000)) &
              _mm512_cmplt_epu32_mask(bits, _mm512_set1_epi32(0x7D000000));
    }
    return ok == 0xFFFF;
}

/* Dword lane i takes element base + i / 2 of v. */
static inline __m512i wo_dup_pairs(__m512i v, int base) {
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_epi32(_mm512_add_epi32(dup, _mm512_set1_epi32(base)), v);
}

WO_ALWAYS_INLINE void wo_block_load(const mm_ukernel_args *p, int64_t kb, int is_uint4, wo_block *b) {
    const float *s = p->b_block_scale + kb * MM_GEMM_NR;
    b->fp8_fast = 1;
    b->uint4_fused = 0;
    for (int j = 0; j < 4; j++)
        b->scale[j] = panel_pair_scales(_mm512_loadu_ps(s + 16 * (j / 2)), 8 * (j % 2));
    if (is_uint4) {
        b->uint4_fused = wo_uint4_scales_fused(s);
        for (int h = 0; h < 2; h++) {
            __m512i z = _mm512_setzero_si512();
            if (p->b_block_zero)
                z = _mm512_cvtepu8_epi32(_mm_loadu_si128(
                    (const __m128i *)(const void *)(p->b_block_zero + kb * MM_GEMM_NR + 16 * h)));
            for (int q = 0; q < 2; q++) {
                __m512i zero = wo_dup_pairs(z, 8 * q);
                b->zero_bits[2 * h + q] = _mm512_sub_epi32(_mm512_set1_epi32(0x4B400000), zero);
                b->zero_scale[2 * h + q] = _mm512_mul_ps(_mm512_cvtepi32_ps(zero), b->scale[2 * h + q]);
            }
        }
        return;
    }
    __mmask16 overflow = 0;
    for (int j = 0; j < 4; j++) {
        b->scale_x2p120[j] = _mm512_mul_ps(b->scale[j], _mm512_set1_ps(0x1p120f));
        /* Infinite products of finite scales (an infinite scale stays infinite, as in the rule). */
        overflow |=
            _mm512_fpclass_ps_mask(b->scale_x2p120[j], 0x18) & ~_mm512_fpclass_ps_mask(b->scale[j], 0x18);
    }
    b->fp8_fast = overflow == 0;
}

/* A pair whose second K lies in the next scale block (odd block_k): odd lanes take that block's. */
WO_ALWAYS_INLINE void wo_block_blend_odd(wo_block *b, const wo_block *next, int is_uint4) {
    for (int j = 0; j < 4; j++) {
        b->scale[j] = _mm512_mask_blend_ps((__mmask16)0xAAAA, b->scale[j], next->scale[j]);
        if (is_uint4) {
            b->zero_bits[j] = _mm512_mask_blend_epi32((__mmask16)0xAAAA, b->zero_bits[j], next->zero_bits[j]);
            b->zero_scale[j] = _mm512_mask_blend_ps((__mmask16)0xAAAA, b->zero_scale[j], next->zero_scale[j]);
        } else
            b->scale_x2p120[j] =
                _mm512_mask_blend_ps((__mmask16)0xAAAA, b->scale_x2p120[j], next->scale_x2p120[j]);
    }
    b->fp8_fast &= next->fp8_fast;
    b->uint4_fused &= next->uint4_fused;
}

/* Four F32 vectors (columns 0..7, 8..15, 16..23, 24..31) -> the two BF16 pair vectors. */
WO_ALWAYS_INLINE void wo_to_bf16_pairs(const __m512 f[4], __m512i out[2]) {
    out[0] = (__m512i)_mm512_cvtne2ps_pbh(f[1], f[0]);
    out[1] = (__m512i)_mm512_cvtne2ps_pbh(f[3], f[2]);
}

/* UINT4 pair kp: bytes 0..15 hold columns 0..7 (low nibbles) and 16..23 (high), bytes 16..31 columns
 * 8..15 and 24..31. */
WO_ALWAYS_INLINE void wo_uint4_pair(const uint8_t *panel, int64_t kp, const wo_block *b, __m512i out[2]) {
    const uint8_t *at = panel + kp * 32;
    __m512i d0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)at));
    __m512i d1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(at + 16)));
    __m512i q[4] = {_mm512_and_si512(d0, _mm512_set1_epi32(0x0F)),
                    _mm512_and_si512(d1, _mm512_set1_epi32(0x0F)), _mm512_srli_epi32(d0, 4),
                    _mm512_srli_epi32(d1, 4)};
    __m512 f[4];
    for (int j = 0; j < 4; j++) {
        __m512 diff = _mm512_sub_ps(_mm512_castsi512_ps(_mm512_add_epi32(q[j], b->zero_bits[j])),
                                    _mm512_set1_ps(12582912.0f));
        f[j] = _mm512_mul_ps(diff, b->scale[j]);
    }
    wo_to_bf16_pairs(f, out);
}

/* UINT4 pair kp where the block's uint4_fused holds: q as F32 by vpermps over 0..15 (which reads the low
 * 4 bits of each index: the low nibble needs no mask), then one fused q * scale - zero * scale, whose one
 * rounding of the exact (q - zero) * scale is the rule's F32 product (zero * scale is exact there, and
 * q = zero gives +0 as (q - zero) * scale does for a positive scale): 14 instructions instead of 20. */
WO_ALWAYS_INLINE void wo_uint4_pair_fused(const uint8_t *panel, int64_t kp, const wo_block *b,
                                          __m512i out[2]) {
    const __m512 values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const uint8_t *at = panel + kp * 32;
    __m512i d0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)at));
    __m512i d1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(at + 16)));
    __m512 q[4] = {_mm512_permutexvar_ps(d0, values), _mm512_permutexvar_ps(d1, values),
                   _mm512_permutexvar_ps(_mm512_srli_epi32(d0, 4), values),
                   _mm512_permutexvar_ps(_mm512_srli_epi32(d1, 4), values)};
    __m512 f[4];
    for (int j = 0; j < 4; j++) f[j] = _mm512_fmsub_ps(q[j], b->scale[j], b->zero_scale[j]);
    wo_to_bf16_pairs(f, out);
}

/* FP8 pair kp the exact table way (NaN codes, overflowing scales, DAZ): BF16 decode, widened to F32,
 * times the scale (rare, inlined all the same: see wo_pairs below). */
WO_ALWAYS_INLINE void wo_fp8_pair_table(const uint8_t *panel, int64_t kp, const wo_block *b,
                                        const uint16_t *lut, __m512i out[2]) {
    __m512i table[4];
    for (int i = 0; i < 4; i++) table[i] = _mm512_loadu_si512(lut + 32 * i);
    __m512i codes[2];
    panel_pair_codes(panel, kp, 0, codes);
    __m512 f[4];
    for (int h = 0; h < 2; h++) {
        __m512i v = panel_decode_fp8(codes[h], table);
        for (int q = 0; q < 2; q++) {
            __m256i words = q ? _mm512_extracti64x4_epi64(v, 1) : _mm512_castsi512_si256(v);
            __m512 x = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(words), 16));
            f[2 * h + q] = _mm512_mul_ps(x, b->scale[2 * h + q]);
        }
    }
    wo_to_bf16_pairs(f, out);
}

/* FP8 pair kp (64 bytes, column c's pair at bytes 2c, 2c + 1). fast: the block's fp8_fast and no DAZ;
 * lut: the E4M3 BF16 table (format/decode_tables.h). */
WO_ALWAYS_INLINE void wo_fp8_pair(const uint8_t *panel, int64_t kp, const wo_block *b, int fast,
                                  const uint16_t *lut, __m512i out[2]) {
    const uint8_t *at = panel + kp * 64;
    __m512i bytes = _mm512_loadu_si512(at);
    __mmask64 nan = _mm512_cmpeq_epi8_mask(_mm512_or_si512(bytes, _mm512_set1_epi8((char)0x80)),
                                           _mm512_set1_epi8((char)0xFF));
    if (__builtin_expect(!fast || nan != 0, 0)) {
        wo_fp8_pair_table(panel, kp, b, lut, out);
        return;
    }
    __m512 f[4];
    for (int j = 0; j < 4; j++) {
        __m512i x = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(at + 16 * j)));
        __m512i bits = _mm512_and_si512(_mm512_slli_epi32(x, 20), _mm512_set1_epi32((int)0x87F00000u));
        f[j] = _mm512_mul_ps(_mm512_castsi512_ps(bits), b->scale_x2p120[j]);
    }
    wo_to_bf16_pairs(f, out);
}

#ifdef __AVX512VBMI__
/* The byte tables of one FP8 scale block whose 32 columns share the finite scale s (see the top): t[0] /
 * t[1] the high bytes of w' for magnitudes 0..63 / 64..127, t[2] / t[3] the low bytes. The F32 values
 * are lut's BF16 patterns widened, as in wo_fp8_pair_table, and the multiply runs under the caller's
 * MXCSR like every other path's. */
WO_ALWAYS_INLINE void wo_fp8_tables_make(float s, const uint16_t *lut, __m512i t[4]) {
    __m512i w[4];
    for (int i = 0; i < 4; i++) {
        __m512i words = _mm512_loadu_si512(lut + 32 * i);
        __m512 x[2];
        for (int q = 0; q < 2; q++) {
            __m256i half = q ? _mm512_extracti64x4_epi64(words, 1) : _mm512_castsi512_si256(words);
            x[q] = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16)),
                                 _mm512_set1_ps(s));
        }
        w[i] = (__m512i)_mm512_cvtne2ps_pbh(x[1], x[0]);
    }
    /* Byte 2m + 1 / 2m of the 128-byte pair w[0]:w[1] (w[2]:w[3]) is the high / low byte of magnitude m. */
    _Alignas(64) uint8_t odd[64], even[64];
    for (int i = 0; i < 64; i++) odd[i] = (uint8_t)(2 * i + 1), even[i] = (uint8_t)(2 * i);
    __m512i odd_bytes = _mm512_load_si512(odd), even_bytes = _mm512_load_si512(even);
    t[0] = _mm512_permutex2var_epi8(w[0], odd_bytes, w[1]);
    t[1] = _mm512_permutex2var_epi8(w[2], odd_bytes, w[3]);
    t[2] = _mm512_permutex2var_epi8(w[0], even_bytes, w[1]);
    t[3] = _mm512_permutex2var_epi8(w[2], even_bytes, w[3]);
}

/* Whether scale block kb of the panel has one finite scale for its 32 columns (bit for bit: +0 and -0
 * differ); if so, its tables into t. Padding columns hold scale 0, so a last panel with padding and a
 * nonzero scale keeps the general decoders. */
WO_ALWAYS_INLINE int wo_fp8_tables_load(const mm_ukernel_args *p, int64_t kb, const uint16_t *lut,
                                        __m512i t[4]) {
    const float *s = p->b_block_scale + kb * MM_GEMM_NR;
    __m512i first = _mm512_castps_si512(_mm512_set1_ps(s[0]));
    if (_mm512_cmpneq_epi32_mask(_mm512_loadu_si512(s), first) |
        _mm512_cmpneq_epi32_mask(_mm512_loadu_si512(s + 16), first))
        return 0;
    if (!(s[0] - s[0] == 0.0f)) return 0; /* Inf or NaN */
    wo_fp8_tables_make(s[0], lut, t);
    return 1;
}

/* FP8 pair kp by the tables t; order: panel_fp8_unpack_order(). */
WO_ALWAYS_INLINE void wo_fp8_pair_tables(const uint8_t *panel, int64_t kp, const __m512i t[4], __m512i order,
                                         __m512i out[2]) {
    __m512i c = _mm512_permutexvar_epi8(order, _mm512_loadu_si512(panel + kp * 64));
    __m512i hi = _mm512_permutex2var_epi8(t[0], c, t[1]); /* vpermt2b reads index bits 0..6: the magnitude */
    __m512i lo = _mm512_permutex2var_epi8(t[2], c, t[3]);
    hi = _mm512_ternarylogic_epi32(hi, c, _mm512_set1_epi8((char)0x80), 0x78); /* hi ^ (c & 0x80) */
    out[0] = _mm512_unpacklo_epi8(lo, hi);
    out[1] = _mm512_unpackhi_epi8(lo, hi);
}
#endif

/* 1 when the caller's MXCSR reads F32 subnormal inputs as zero (DAZ): the FP8 fast decode is off. */
static inline int wo_daz(void) {
    return (_mm_getcsr() & 0x40) != 0;
}

/* 1 when the caller's MXCSR rounds to nearest (RC = 0): the FP8 byte tables rely on w'(-x) = -w'(x),
 * which a directed rounding of the rule's multiply breaks (round up: -x * s rounds toward +Inf, so
 * toward zero where x * s rounds away from it). */
static inline int wo_round_nearest(void) {
    return (_mm_getcsr() & 0x6000) == 0;
}

/* ---- FP4 with MX scales (and MX FP8, for mx_avx512.c) ---- */

/* Per weight format: the BF16 table, the F32 table and the scale bytes b for which scaling is an
 * exponent addition: the smallest nonzero magnitude 2^e_min and the largest below 2^(e_max+1) must stay
 * within BF16's normal range [2^-126, 2^128), so b in [1 - e_min, 254 - e_max]. */
typedef struct mx_panel_format {
    int is_fp4;
    const uint16_t *bf16;
    const float *f32;
    uint8_t s_min, s_max;
} mx_panel_format;

static inline mx_panel_format mx_panel_format_of(mm_dtype dtype) {
    mx_panel_format f = {mm_format_is_nibble(dtype), mm_format_lut_bf16(dtype), mm_format_lut_f32(dtype), 0,
                         0};
    f.s_min = (uint8_t)mm_format_mx_bf16_scale_lowest(dtype);
    f.s_max = (uint8_t)mm_format_mx_bf16_scale_highest(dtype);
    return f;
}

/* One MX K block of 32 (16 pairs): whether the exponent addition is exact, the exponent deltas in pair
 * lanes per column half, and the F32 scales for the slow path. */
typedef struct mx_panel_block {
    int safe;
    __m512i delta_pairs[2];
    __m512 scales[2];
} mx_panel_block;

WO_ALWAYS_INLINE void mx_panel_block_load(const mm_ukernel_args *p, const mx_panel_format *f, int64_t kb,
                                          mx_panel_block *b) {
    /* Lane i takes column i / 2 (16-bit lanes of a BF16 pair vector). */
    static const uint16_t dup_columns[32] = {0, 0, 1, 1, 2,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,
                                             8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};
    const __m512i dup_lo = _mm512_loadu_si512(dup_columns);
    const __m512i dup_hi = _mm512_add_epi16(dup_lo, _mm512_set1_epi16(16));
    __m256i s = _mm256_loadu_si256((const __m256i *)(const void *)(p->b_mx_e8m0 + kb * MM_GEMM_NR));
    b->safe = _mm256_cmplt_epu8_mask(s, _mm256_set1_epi8((char)f->s_min)) == 0 &&
              _mm256_cmpgt_epu8_mask(s, _mm256_set1_epi8((char)f->s_max)) == 0;
    __m512i delta = _mm512_slli_epi16(_mm512_sub_epi16(_mm512_cvtepu8_epi16(s), _mm512_set1_epi16(127)), 7);
    b->delta_pairs[0] = _mm512_permutexvar_epi16(dup_lo, delta);
    b->delta_pairs[1] = _mm512_permutexvar_epi16(dup_hi, delta);
    /* The F32 scales only where the slow path needs them: they are 4 bytes per column and block against
     * the codes' 16 (FP4) or 32 (FP8), a stream of their own that no prefetch covers. */
    b->scales[0] = b->scales[1] = _mm512_setzero_ps();
    if (!b->safe) {
        b->scales[0] = _mm512_loadu_ps(p->b_mx_scale + kb * MM_GEMM_NR);
        b->scales[1] = _mm512_loadu_ps(p->b_mx_scale + kb * MM_GEMM_NR + 16);
    }
}

/* Fast path: multiply by 2^delta (delta << 7 per lane) by exponent addition on finite nonzero values. */
static inline __m512i mx_panel_scale_bf16(__m512i v, __m512i delta_shifted) {
    __m512i magnitude_minus_1 =
        _mm512_sub_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(1));
    __mmask32 finite_nonzero = _mm512_cmplt_epu16_mask(magnitude_minus_1, _mm512_set1_epi16(0x7F7F));
    return _mm512_mask_add_epi16(v, finite_nonzero, v, delta_shifted);
}

/* MX pair kp of a panel; table: the format's BF16 table in four vectors; safe: b->safe (a constant where
 * the caller loops over a block per case, which keeps the other case's values out of its registers). */
WO_ALWAYS_INLINE void mx_panel_pair(const uint8_t *panel, int64_t kp, const mx_panel_format *f,
                                    const __m512i table[4], const mx_panel_block *b, int is_fp4, int safe,
                                    __m512i out[2]) {
    __m512i codes[2];
    panel_pair_codes(panel, kp, is_fp4, codes);
    for (int h = 0; h < 2; h++) {
        if (safe && is_fp4) {
            /* An E2M1 code is zero exactly when its magnitude bits are (codes 0 and 8); every other code
             * is finite and nonzero, so its mask is that of mx_panel_scale_bf16 at one instruction. */
            __m512i v = _mm512_permutexvar_epi16(codes[h], table[0]);
            __mmask32 nonzero = _mm512_test_epi16_mask(codes[h], _mm512_set1_epi16(0x7));
            out[h] = _mm512_mask_add_epi16(v, nonzero, v, b->delta_pairs[h]);
        } else if (safe)
            out[h] = mx_panel_scale_bf16(panel_decode_fp8(codes[h], table), b->delta_pairs[h]);
        else
            out[h] = panel_decode_scaled_f32(codes[h], is_fp4, f->f32, b->scales[h]);
    }
}

/* ---- walking the pairs of a K block ---- */

/* The pairs of [k_begin, k_end) are visited in K order by loops of the caller's (so that its
 * accumulators stay in registers): wo_pairs_begin; then, segment by segment, wo_pairs_renew(kp) sets the
 * scale parameters of the segment that starts at pair kp and ends before it.renew_at (the rest of a scale
 * block, or one pair that straddles two blocks), and wo_pair(kp) returns the two BF16 pair vectors of w'
 * for each pair of the segment. Everything is inlined, the rare paths too: every zmm register is
 * caller-saved, and with a call anywhere in the kernel GCC keeps the accumulators in memory and stores
 * them after every pair. */
typedef struct wo_pairs {
    int format; /* WO_FP8, WO_UINT4, WO_FP4 */
    int64_t first_pair, end_pair;
    int64_t renew_at; /* the first pair after the current segment */
    int fast;         /* FP8: the fast decode is exact for the current parameters */
    wo_block block;   /* FP8 / UINT4: the parameters of the current pair */
    mx_panel_format mx;
    mx_panel_block mx_block;
    __m512i table[4];        /* MX: the BF16 table */
    const uint16_t *fp8_lut; /* FP8: the E4M3 BF16 table for the exact decode */
    int daz;
    int fp8_tables_allowed; /* compiled with AVX512_VBMI, on a CPU with it, MXCSR rounding to nearest */
    int fp8_tables;         /* the current segment is decoded by fp8_table (format WO_FP8_TABLES) */
    __m512i fp8_table[4];
    __m512i fp8_order;
} wo_pairs;

/* WO_FP8_TABLES / WO_UINT4_FUSED: the format of an FP8 segment whose it.fp8_tables is set, of a UINT4
 * segment whose block.uint4_fused is (the callers' loops choose them per segment, as they do the MX safe
 * case). */
enum { WO_FP8, WO_UINT4, WO_FP4, WO_MX_FP8, WO_FP8_TABLES, WO_UINT4_FUSED };

/* Pairs of a segment below which the FP8 tables (~30 instructions) cost more than they save. */
#define WO_FP8_TABLES_MIN_PAIRS 4

/* The parameters of the segment starting at pair kp: its scale block's; a pair straddling two blocks
 * (odd block_k) takes the next block's in its odd lanes and is a segment alone. */
WO_ALWAYS_INLINE void wo_pairs_renew(const mm_ukernel_args *p, wo_pairs *it, int64_t kp) {
    if (it->format == WO_FP4 || it->format == WO_MX_FP8) {
        int64_t kb = kp / 16;
        mx_panel_block_load(p, &it->mx, kb, &it->mx_block);
        it->renew_at = (kb + 1) * 16;
        return;
    }
    int is_uint4 = it->format == WO_UINT4;
    int64_t kb = 2 * kp / p->block_k, boundary = (kb + 1) * p->block_k;
    wo_block_load(p, kb, is_uint4, &it->block);
    if (2 * kp + 1 == boundary) {
        if (2 * kp + 1 < p->k) {
            wo_block next;
            wo_block_load(p, kb + 1, is_uint4, &next);
            wo_block_blend_odd(&it->block, &next, is_uint4);
        }
        it->renew_at = kp + 1;
    } else {
        it->renew_at = boundary / 2;
    }
    it->fast = it->block.fp8_fast && !it->daz;
    it->fp8_tables = 0;
#ifdef __AVX512VBMI__
    if (it->fp8_tables_allowed && !is_uint4 && it->renew_at - kp >= WO_FP8_TABLES_MIN_PAIRS)
        it->fp8_tables = wo_fp8_tables_load(p, kb, it->fp8_lut, it->fp8_table);
#endif
}

/* Call before the accumulators are set: it calls out of line (see above). */
WO_ALWAYS_INLINE void wo_pairs_begin(const mm_ukernel_args *p, int format, int fp8_tables_allowed,
                                     wo_pairs *it) {
    it->format = format;
    it->fp8_tables_allowed = fp8_tables_allowed && wo_round_nearest();
    it->fp8_tables = 0;
#ifdef __AVX512VBMI__
    it->fp8_order = panel_fp8_unpack_order();
    /* Set per segment where used; zeroed so that no compiler sees them read unset. */
    for (int i = 0; i < 4; i++) it->fp8_table[i] = _mm512_setzero_si512();
#endif
    it->mx_block.safe = 0;
    it->fp8_lut = mm_format_lut_bf16(MM_DTYPE_FP8_E4M3FN);
    it->daz = wo_daz();
    it->first_pair = p->k_begin / 2;
    it->end_pair = (p->k_end + 1) / 2;
    if (format == WO_FP4 || format == WO_MX_FP8) {
        it->mx = mx_panel_format_of(p->w_dtype);
        for (int i = 0; i < 4; i++) it->table[i] = _mm512_loadu_si512(it->mx.bf16 + 32 * i);
    }
}

/* Few rows make the loops over pairs stream the weights: fetch 4 KiB ahead of the hardware prefetcher. */
#define WO_PREFETCH_PAIRS 128

/* The BF16 pair vectors of w' for pair kp of the current segment. The padding K of an odd K is 0 for FP8
 * and UINT4 (as in a packed BF16 panel); MX pairs keep their decoded padding code (0), as before.
 * mx_safe: it->mx_block.safe (MX only). */
WO_ALWAYS_INLINE void wo_pair(const mm_ukernel_args *p, wo_pairs *it, int format, int mx_safe, int64_t kp,
                              __m512i v[2]) {
    int nibbles = format == WO_UINT4 || format == WO_UINT4_FUSED || format == WO_FP4;
    _mm_prefetch((const char *)(p->b + (kp + WO_PREFETCH_PAIRS) * (nibbles ? 32 : 64)), _MM_HINT_T0);
    if (format == WO_FP4 || format == WO_MX_FP8) {
        mx_panel_pair(p->b, kp, &it->mx, it->table, &it->mx_block, format == WO_FP4, mx_safe, v);
        return;
    }
    if (format == WO_UINT4)
        wo_uint4_pair(p->b, kp, &it->block, v);
    else if (format == WO_UINT4_FUSED)
        wo_uint4_pair_fused(p->b, kp, &it->block, v);
#ifdef __AVX512VBMI__
    else if (format == WO_FP8_TABLES)
        wo_fp8_pair_tables(p->b, kp, it->fp8_table, it->fp8_order, v);
#endif
    else
        wo_fp8_pair(p->b, kp, &it->block, it->fast, it->fp8_lut, v);
    if (2 * kp + 1 >= p->k)
        for (int h = 0; h < 2; h++) v[h] = _mm512_maskz_mov_epi16((__mmask32)0x55555555u, v[h]);
}

/* The prepare functions: every pair of the call into `block` (pair i at byte 128 * i). */
WO_ALWAYS_INLINE void wo_prepare_segment(const mm_ukernel_args *p, wo_pairs *it, int format, int64_t kp,
                                         int64_t end, uint8_t *block) {
    for (; kp < end; kp++) {
        __m512i v[2];
        wo_pair(p, it, format, it->mx_block.safe, kp, v);
        __m512i *dst = (__m512i *)(void *)(block + (kp - it->first_pair) * 128);
        _mm512_store_si512(dst, v[0]);
        _mm512_store_si512(dst + 1, v[1]);
    }
}

/* fp8_tables_allowed: as in wo_pairs_begin (1 only from a file compiled with AVX512_VBMI). */
WO_ALWAYS_INLINE void wo_prepare_block(const mm_ukernel_args *p, int format, int fp8_tables_allowed,
                                       uint8_t *block) {
    wo_pairs it;
    wo_pairs_begin(p, format, fp8_tables_allowed, &it);
    for (int64_t kp = it.first_pair; kp < it.end_pair;) {
        wo_pairs_renew(p, &it, kp);
        int64_t segment_end = it.renew_at < it.end_pair ? it.renew_at : it.end_pair;
        if (format == WO_FP8 && it.fp8_tables)
            wo_prepare_segment(p, &it, WO_FP8_TABLES, kp, segment_end, block);
        else if (format == WO_UINT4 && it.block.uint4_fused)
            wo_prepare_segment(p, &it, WO_UINT4_FUSED, kp, segment_end, block);
        else
            wo_prepare_segment(p, &it, format, kp, segment_end, block);
        kp = segment_end;
    }
}

#endif
