/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/amx/mx_decode_avx512.h: the fast MX weight decoder of the AMX MX kernels: a K block of
 * 32 (one E8M0 scale per column) of FP8 or FP4 codes to BF16 with the scale folded in, in the BF16 pair
 * layout of gemm/packed.h (per K pair 128 bytes: columns 0..15, then 16..31), which is the AMX B layout.
 * Included only by AMX files (their CPUs have AVX512_VBMI, which the includer enables with its pragma).
 *
 * Fast path (every scale byte b of the block's 32 columns within [s_min, s_max], no NaN/Inf code):
 *   FP8: vpermb puts the 64 codes of a K pair in the order that makes vpunpck{l,h}bw give columns in
 *        order, two vpermt2b over 128-byte tables give the high and low bytes of the BF16 patterns of the
 *        128 magnitudes, the sign is added to the high byte of negative nonzero codes (see below);
 *   FP4: vpmovzxbw + and / shift give the codes of columns 0..15 / 16..31 as words in order, vpermw
 *        looks them up (sign included);
 *   and the scale 2^(b-127) is one vpsubusw per 32 values: the tables hold every value times
 *   2^(s_max-127) (still a normal BF16: that is what s_max means), and subtracting (s_max - b) << 7 from
 *   the pattern lowers the exponent by s_max - b, exactly, while the result stays normal (b >= s_min),
 *   i.e. for every nonzero value; a zero pattern saturates at zero, which is why zero weights decode
 *   to +0 (a -0 pattern would not saturate; the sign of a zero weight changes no sum).
 * NaN/Inf codes carry a flag bit (bit 0 of the low byte, always 0 in a finite FP8 value's pattern:
 * they have at most 3 mantissa bits); a block that shows it, or whose scales leave the range (NaN scale
 * 0xFF included), is decoded again by the slow path: F32 decode, F32 multiply by the F32 scale (the
 * reference's w' = lut[q] * scale), rounding to BF16. Values of the slow path below 2^-126 are flushed
 * later by the BF16 instructions, as in mx_avx512.c. */
#ifndef MEGAMOE_GEMM_MX_DECODE_AVX512_H
#define MEGAMOE_GEMM_MX_DECODE_AVX512_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "format/decode_tables.h"
#include "format/format_table.h"
#include "gemm/kernels/avx512/panel_codes_avx512.h"
#include "gemm/kernels/kernels.h"

typedef struct mx_decoder {
    __m512i t[4]; /* FP8: high bytes of magnitudes 0..63 / 64..127, low bytes 0..63 / 64..127; FP4: t[0]
                     the 16 code patterns twice (words) */
    __m512i perm; /* FP8: vpermb index applied to a pair's 64 codes before the lookups */
    const float *f32;
    int is_fp4;
    uint16_t s_min, s_max;
} mx_decoder;

/* Biased BF16 patterns of 32 codes: value * 2^(s_max-127), 0 for zeros, 0x7FC1 (NaN + flag) for NaN/Inf. */
static inline __m512i mx_biased_patterns(__m512i v, uint16_t s_max) {
    __m512i magnitude = _mm512_and_si512(v, _mm512_set1_epi16(0x7FFF));
    __mmask32 nonzero = _mm512_test_epi16_mask(magnitude, magnitude);
    __mmask32 special = _mm512_cmpge_epu16_mask(magnitude, _mm512_set1_epi16(0x7F80));
    __m512i b = _mm512_maskz_add_epi16(nonzero, v, _mm512_set1_epi16((short)((s_max - 127) << 7)));
    return _mm512_mask_mov_epi16(b, special, _mm512_set1_epi16(0x7FC1));
}

static inline void mx_decoder_make(mx_decoder *d, mm_dtype w_dtype) {
    const uint16_t *lut = mm_format_lut_bf16(w_dtype);
    d->f32 = mm_format_lut_f32(w_dtype);
    d->is_fp4 = mm_format_is_nibble(w_dtype);
    /* The scale bytes for which every finite nonzero scaled value is a normal BF16 (mx_avx512.c). */
    d->s_min = (uint16_t)mm_format_mx_bf16_scale_lowest(w_dtype);
    d->s_max = (uint16_t)mm_format_mx_bf16_scale_highest(w_dtype);
    if (d->is_fp4) {
        /* lut repeats codes 0..15 beyond 16, so the 32 words are the 16 codes twice. */
        d->t[0] = mx_biased_patterns(_mm512_loadu_si512(lut), d->s_max);
        d->t[1] = d->t[2] = d->t[3] = d->perm = _mm512_setzero_si512();
        return;
    }
    __m256i hi[4], lo[4];
    for (int i = 0; i < 4; i++) {
        __m512i b = mx_biased_patterns(_mm512_loadu_si512(lut + 32 * i), d->s_max);
        hi[i] = _mm512_cvtepi16_epi8(_mm512_srli_epi16(b, 8));
        lo[i] = _mm512_cvtepi16_epi8(b);
    }
    d->t[0] = _mm512_inserti64x4(_mm512_castsi256_si512(hi[0]), hi[1], 1);
    d->t[1] = _mm512_inserti64x4(_mm512_castsi256_si512(hi[2]), hi[3], 1);
    d->t[2] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[0]), lo[1], 1);
    d->t[3] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[2]), lo[3], 1);
    d->perm = panel_fp8_unpack_order();
}

/* The per-word exponent shifts (s_max - b) << 7 of one block's 32 columns in pair order ([0] columns
 * 0..15, [1] 16..31); returns whether every scale byte allows the fast path. */
static inline int mx_block_shifts(const mx_decoder *d, const uint8_t *e8m0, __m512i sh[2]) {
    __m256i s = _mm256_loadu_si256((const __m256i *)(const void *)e8m0);
    int safe = _mm256_cmplt_epu8_mask(s, _mm256_set1_epi8((char)d->s_min)) == 0 &&
               _mm256_cmpgt_epu8_mask(s, _mm256_set1_epi8((char)d->s_max)) == 0;
    __m512i shift =
        _mm512_slli_epi16(_mm512_sub_epi16(_mm512_set1_epi16((short)d->s_max), _mm512_cvtepu8_epi16(s)), 7);
    const __m512i dup = _mm512_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 6,
                                         6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    sh[0] = _mm512_permutexvar_epi16(dup, shift);
    sh[1] = _mm512_permutexvar_epi16(_mm512_add_epi16(dup, _mm512_set1_epi16(16)), shift);
    return safe;
}

/* Fast path, FP8: the 64 codes of one K pair to 2 x 64 bytes at dst; or-s the low bytes into *flags. */
static inline void mx_decode_pair_fp8(const mx_decoder *d, const uint8_t *codes_at, const __m512i sh[2],
                                      __m512i *flags, __m512i *dst) {
    __m512i c = _mm512_permutexvar_epi8(d->perm, _mm512_loadu_si512(codes_at));
    /* Negative and nonzero (unsigned code > 0x80): the sign goes into the high byte, whose bit 7 is 0. */
    __mmask64 negative = _mm512_cmpgt_epu8_mask(c, _mm512_set1_epi8((char)0x80));
    __m512i hi = _mm512_permutex2var_epi8(d->t[0], c, d->t[1]);
    __m512i lo = _mm512_permutex2var_epi8(d->t[2], c, d->t[3]);
    hi = _mm512_mask_add_epi8(hi, negative, hi, _mm512_set1_epi8((char)0x80));
    *flags = _mm512_or_si512(*flags, lo);
    _mm512_store_si512(dst, _mm512_subs_epu16(_mm512_unpacklo_epi8(lo, hi), sh[0]));
    _mm512_store_si512(dst + 1, _mm512_subs_epu16(_mm512_unpackhi_epi8(lo, hi), sh[1]));
}

/* Fast path, FP4: the 32 code bytes of one K pair to 2 x 64 bytes at dst. */
static inline void mx_decode_pair_fp4(const mx_decoder *d, const uint8_t *codes_at, const __m512i sh[2],
                                      __m512i *dst) {
    __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)codes_at));
    /* vpermw reads bits 0..4 of an index, and the table holds the 16 codes twice: the low nibble needs no
     * masking. */
    _mm512_store_si512(dst, _mm512_subs_epu16(_mm512_permutexvar_epi16(bytes, d->t[0]), sh[0]));
    _mm512_store_si512(
        dst + 1, _mm512_subs_epu16(_mm512_permutexvar_epi16(_mm512_srli_epi16(bytes, 4), d->t[0]), sh[1]));
}

/* Decodes n pairs (n <= 16) of one K block, the first at pair kp0 of the panel, into dst (128 bytes per
 * pair), with the block's E8M0 (e8m0) and F32 (scales) column scales. prefetch / prefetch_l2: bytes ahead
 * of the codes to fetch into L1 / L2 (0: none). */
static inline __attribute__((always_inline)) void mx_decode_block(const mx_decoder *d, const uint8_t *panel,
                                                                  int64_t kp0, int n, const uint8_t *e8m0,
                                                                  const float *scales, uint8_t *dst,
                                                                  int prefetch, int prefetch_l2) {
    __m512i sh[2];
    int safe = mx_block_shifts(d, e8m0, sh);
    __m512i *out = (__m512i *)(void *)dst;
    if (safe) {
        if (d->is_fp4) {
            const uint8_t *at = panel + kp0 * 32;
            for (int i = 0; i < n; i++) {
                if (prefetch && !(i & 1)) _mm_prefetch((const char *)(at + 32 * i + prefetch), _MM_HINT_T0);
                if (prefetch_l2 && !(i & 1))
                    _mm_prefetch((const char *)(at + 32 * i + prefetch_l2), _MM_HINT_T1);
                mx_decode_pair_fp4(d, at + 32 * i, sh, out + 2 * i);
            }
            return;
        }
        const uint8_t *at = panel + kp0 * 64;
        __m512i flags = _mm512_setzero_si512();
        for (int i = 0; i < n; i++) {
            if (prefetch) _mm_prefetch((const char *)(at + 64 * i + prefetch), _MM_HINT_T0);
            if (prefetch_l2) _mm_prefetch((const char *)(at + 64 * i + prefetch_l2), _MM_HINT_T1);
            mx_decode_pair_fp8(d, at + 64 * i, sh, &flags, out + 2 * i);
        }
        if (!_mm512_test_epi8_mask(flags, _mm512_set1_epi8(1))) return;
    }
    __m512 s16[2] = {_mm512_loadu_ps(scales), _mm512_loadu_ps(scales + 16)};
    for (int i = 0; i < n; i++) {
        __m512i codes[2];
        if (d->is_fp4) {
            __m512i bytes = _mm512_cvtepu8_epi16(
                _mm256_loadu_si256((const __m256i *)(const void *)(panel + (kp0 + i) * 32)));
            codes[0] = _mm512_and_si512(bytes, _mm512_set1_epi16(0x0F));
            codes[1] = _mm512_srli_epi16(bytes, 4);
        } else {
            const __m256i *at = (const __m256i *)(const void *)(panel + (kp0 + i) * 64);
            codes[0] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(at));
            codes[1] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(at + 1));
        }
        for (int h = 0; h < 2; h++)
            _mm512_store_si512(out + 2 * i + h, panel_decode_scaled_f32(codes[h], d->is_fp4, d->f32, s16[h]));
    }
}

#endif
