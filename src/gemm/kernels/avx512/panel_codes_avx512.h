/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/panel_codes_avx512.h: reading the codes of one K pair of an FP8 or 4-bit panel
 * (gemm/packed.h) as BF16-pair-ordered 16-bit lanes, two FP4 pairs grouped per column, and the FP8 -> BF16
 * table decode; shared by the MX kernels and the weight-only ones. Included only by *_avx512.c
 * files, which are compiled with AVX-512 flags. */
#ifndef MEGAMOE_GEMM_PANEL_CODES_AVX512_H
#define MEGAMOE_GEMM_PANEL_CODES_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* 16 E8M0 scale bytes -> their F32 values: b << 23 for 1..254, 2^-127 (the subnormal 0x00400000) for
 * 0, the quiet NaN for 255; for every valid column bit for bit the packed F32 scale array
 * (mm_e8m0_to_f32; padding columns hold 0 there and byte 127 here, and their codes are 0). The few-rows
 * kernels compute them from the E8M0 bytes instead of reading the F32 array: at decode the kernels
 * stream their weights, and the F32 array is 4 bytes per column and block where the E8M0 one is 1
 * (codes: 32 FP8, 16 FP4). */
static inline __m512 panel_e8m0_f32(const uint8_t *bytes) {
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)bytes));
    __m512i bits = _mm512_slli_epi32(b, 23);
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_setzero_si512()),
                                 _mm512_set1_epi32(0x00400000));
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_set1_epi32(0xFF)),
                                 _mm512_set1_epi32(0x7FC00000));
    return _mm512_castsi512_ps(bits);
}

/* The vpermb index that makes vpunpck{l,h}bw of 64 bytes looked up per FP8 code give the codes' words
 * 0..31 / 32..63 in order: vpunpcklbw takes bytes 0..7 of each 128-bit lane L, vpunpckhbw bytes 8..15, so
 * lane L of the low result must hold bytes 8L..8L+7 and of the high result bytes 32 + 8L..32 + 8L + 7.
 * The byte-table FP8 decoders (mx_decode_avx512.h, weight_only_decode_avx512.h) apply it to a pair's
 * codes before their lookups (vpermb: AVX512_VBMI, in their files). */
static inline __m512i panel_fp8_unpack_order(void) {
    _Alignas(64) uint8_t perm[64];
    for (int lane = 0; lane < 4; lane++)
        for (int i = 0; i < 8; i++) {
            perm[16 * lane + i] = (uint8_t)(8 * lane + i);
            perm[16 * lane + 8 + i] = (uint8_t)(32 + 8 * lane + i);
        }
    return _mm512_load_si512(perm);
}

/* The codes of K pair kp as two vectors of 32 16-bit lanes in BF16 pair order (lane 2c + k%2): [0]
 * columns 0..15, [1] columns 16..31. nibbles: the FP4 / UINT4 layout, else one byte per code. */
static inline void panel_pair_codes(const uint8_t *panel, int64_t kp, int nibbles, __m512i codes[2]) {
    if (nibbles) {
        __m512i bytes =
            _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(panel + kp * 32)));
        codes[0] = _mm512_and_si512(bytes, _mm512_set1_epi16(0x0F));
        codes[1] = _mm512_srli_epi16(bytes, 4);
    } else {
        const __m256i *at = (const __m256i *)(const void *)(panel + kp * 64);
        codes[0] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(at));
        codes[1] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(at + 1));
    }
}

/* The 64 code bytes of FP4 K pairs kp and kp + 1 (kp even) at `at`, each column's two 16-bit words side
 * by side: dword d holds column d's codes of K 2kp..2kp+3, the low nibbles of its bytes for column d and
 * the high nibbles for column d + 16 (nibbles 0 / 2 of the first word: K 2kp / 2kp+1, of the second:
 * 2kp+2 / 2kp+3). One vpermw, shared by the few-rows FP4 kernels (fp4_int_small, fp8_fp4_small). */
static inline __m512i panel_fp4_quads(const uint8_t *at) {
    /* Word j of the result is word (j % 2) * 16 + j / 2 of the input. */
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23,
                                           7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(order, _mm512_load_si512(at));
}

/* 32 FP8 codes (16-bit lanes) -> BF16 patterns of their exact values; table: the format's 128 BF16
 * magnitudes (format/decode_tables.h) in four vectors. */
static inline __m512i panel_decode_fp8(__m512i codes, const __m512i table[4]) {
    __m512i magnitude = _mm512_and_si512(codes, _mm512_set1_epi16(0x7F));
    __m512i low = _mm512_permutex2var_epi16(table[0], magnitude, table[1]);  /* magnitudes 0..63 */
    __m512i high = _mm512_permutex2var_epi16(table[2], magnitude, table[3]); /* 64..127 */
    __m512i v =
        _mm512_mask_blend_epi16(_mm512_test_epi16_mask(magnitude, _mm512_set1_epi16(0x40)), low, high);
    return _mm512_or_si512(v,
                           _mm512_and_si512(_mm512_slli_epi16(codes, 8), _mm512_set1_epi16((short)0x8000)));
}

/* F32 scale of column (base + lane / 2) for each of 16 lanes holding 8 columns x 2 K values. */
static inline __m512 panel_pair_scales(__m512 scales16, int base) {
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(_mm512_add_epi32(dup, _mm512_set1_epi32(base)), scales16);
}

/* The MX slow path: 32 codes (16-bit lanes, pair order) -> their F32 values (f32: the format's table;
 * FP4 by a permute of its 16 entries, FP8 by a gather) times the F32 scales of their columns (scales16:
 * columns 0..15 of the half) -> BF16 (RNE). */
static inline __m512i panel_decode_scaled_f32(__m512i codes, int is_fp4, const float *f32, __m512 scales16) {
    __m512 v[2];
    for (int half = 0; half < 2; half++) {
        __m256i words = half ? _mm512_extracti64x4_epi64(codes, 1) : _mm512_castsi512_si256(codes);
        __m512i idx = _mm512_cvtepu16_epi32(words);
        __m512 decoded =
            is_fp4 ? _mm512_permutexvar_ps(idx, _mm512_loadu_ps(f32)) : _mm512_i32gather_ps(idx, f32, 4);
        v[half] = _mm512_mul_ps(decoded, panel_pair_scales(scales16, half * 8));
    }
    return (__m512i)_mm512_cvtne2ps_pbh(v[1], v[0]);
}

#endif
