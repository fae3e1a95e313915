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
#include "format/decode_tables.h"
#include "format/format_table.h"
#include "gemm/kernels/avx512/bf16_tile_avx512.h"
#include "gemm/kernels/avx512/panel_codes_avx512.h"

void mm_ukernel_mx_avx512(const mm_ukernel_args *p) {
    /* Prepared rows are BF16 padded with zeros to an even K, the prepared block holds whole pairs. */
    int64_t n_pairs = (p->k_end - p->k_begin + 1) / 2;
    bf16_tile_run(p, (const __m512i *)(const void *)p->b_block, n_pairs, NULL);
}

/* Per weight format: the BF16 table, the F32 table and the scale bytes b for which scaling is an
 * exponent addition: the smallest nonzero magnitude 2^e_min and the largest below 2^(e_max+1) must stay
 * within BF16's normal range [2^-126, 2^128), so b in [1 - e_min, 254 - e_max]. */
typedef struct weight_format {
    int is_fp4;
    const uint16_t *bf16;
    const float *f32;
    uint8_t s_min, s_max;
} weight_format;

static weight_format weight_format_of(mm_dtype dtype) {
    weight_format f = {mm_format_is_nibble(dtype), mm_format_lut_bf16(dtype), mm_format_lut_f32(dtype), 0, 0};
    f.s_min = (uint8_t)mm_format_mx_bf16_scale_lowest(dtype);
    f.s_max = (uint8_t)mm_format_mx_bf16_scale_highest(dtype);
    return f;
}

/* Fast path: multiply by 2^delta (delta << 7 per lane) by exponent addition on finite nonzero values. */
static inline __m512i scale_bf16(__m512i v, __m512i delta_shifted) {
    __m512i magnitude_minus_1 =
        _mm512_sub_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(1));
    __mmask32 finite_nonzero = _mm512_cmplt_epu16_mask(magnitude_minus_1, _mm512_set1_epi16(0x7F7F));
    return _mm512_mask_add_epi16(v, finite_nonzero, v, delta_shifted);
}

/* Slow path: 32 codes -> F32 values times the F32 scales of their columns -> BF16 (RNE). */
static inline __m512i decode_scaled_f32(__m512i codes, const weight_format *f, __m512 scales16) {
    __m512 v[2];
    for (int half = 0; half < 2; half++) {
        __m256i words = half ? _mm512_extracti64x4_epi64(codes, 1) : _mm512_castsi512_si256(codes);
        __m512i idx = _mm512_cvtepu16_epi32(words);
        __m512 decoded = f->is_fp4 ? _mm512_permutexvar_ps(idx, _mm512_loadu_ps(f->f32))
                                   : _mm512_i32gather_ps(idx, f->f32, 4);
        v[half] = _mm512_mul_ps(decoded, panel_pair_scales(scales16, half * 8));
    }
    return (__m512i)_mm512_cvtne2ps_pbh(v[1], v[0]);
}

static inline __attribute__((always_inline)) void prepare_panel(const mm_ukernel_args *p, uint8_t *block,
                                                                int is_fp4) {
    weight_format f = weight_format_of(p->w_dtype);
    __m512i table[4];
    for (int i = 0; i < 4; i++) table[i] = _mm512_loadu_si512(f.bf16 + 32 * i);
    /* Lane i takes column i / 2 (16-bit lanes of a BF16 pair vector). */
    static const uint16_t dup_columns[32] = {0, 0, 1, 1, 2,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,
                                             8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};
    const __m512i dup_lo = _mm512_loadu_si512(dup_columns);
    const __m512i dup_hi = _mm512_add_epi16(dup_lo, _mm512_set1_epi16(16));
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    for (int64_t kp0 = first_pair; kp0 < end_pair;) {
        /* One K block of 32 (16 pairs) shares its scales. */
        int64_t kb = kp0 / 16, kp_end = (kb + 1) * 16 < end_pair ? (kb + 1) * 16 : end_pair;
        __m256i s = _mm256_loadu_si256((const __m256i *)(const void *)(p->b_mx_e8m0 + kb * MM_GEMM_NR));
        int safe = _mm256_cmplt_epu8_mask(s, _mm256_set1_epi8((char)f.s_min)) == 0 &&
                   _mm256_cmpgt_epu8_mask(s, _mm256_set1_epi8((char)f.s_max)) == 0;
        __m512i delta =
            _mm512_slli_epi16(_mm512_sub_epi16(_mm512_cvtepu8_epi16(s), _mm512_set1_epi16(127)), 7);
        __m512i delta_pairs[2] = {_mm512_permutexvar_epi16(dup_lo, delta),
                                  _mm512_permutexvar_epi16(dup_hi, delta)};
        __m512 scales[2] = {_mm512_loadu_ps(p->b_mx_scale + kb * MM_GEMM_NR),
                            _mm512_loadu_ps(p->b_mx_scale + kb * MM_GEMM_NR + 16)};
        for (int64_t kp = kp0; kp < kp_end; kp++) {
            __m512i codes[2];
            /* Few rows make this a streaming loop over the weights: fetch ahead of the hardware prefetcher.
             */
            _mm_prefetch((const char *)(p->b + (kp + 128) * (is_fp4 ? 32 : 64)), _MM_HINT_T0);
            panel_pair_codes(p->b, kp, is_fp4, codes);
            __m512i *dst = (__m512i *)(void *)(block + (kp - first_pair) * 128);
            for (int h = 0; h < 2; h++) {
                __m512i v;
                if (safe)
                    v = scale_bf16(is_fp4 ? _mm512_permutexvar_epi16(codes[h], table[0])
                                          : panel_decode_fp8(codes[h], table),
                                   delta_pairs[h]);
                else
                    v = decode_scaled_f32(codes[h], &f, scales[h]);
                _mm512_store_si512(dst + h, v);
            }
        }
        kp0 = kp_end;
    }
}

void mm_prepare_panel_fp8_avx512(const mm_ukernel_args *p, uint8_t *block) {
    prepare_panel(p, block, 0);
}
void mm_prepare_panel_fp4_avx512(const mm_ukernel_args *p, uint8_t *block) {
    prepare_panel(p, block, 1);
}
