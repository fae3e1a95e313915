/* gemm/kernels/avx512/mx_avx512.c: MX micro-kernels (FP8 x FP8, FP8 x FP4, FP4 x FP4) on vdpbf16ps.
 *
 * Every MX value times its E8M0 scale has at most 4 significant bits, so it is exact in BF16 (barring
 * values below 2^-126): the activations are decoded to BF16 once per call (mm_gemm_mx_row_to_bf16), the
 * panel once per (panel, K block) of a task by the prepare functions below, and the tile is then plain
 * BF16 dot products (bf16_tile_avx512.h). Decoding uses the tables of format_luts.c: a gather from the
 * 256-entry table for FP8, a vpermps from the 16-entry table for FP4; the weight scale is applied by one
 * F32 multiply, the same rounding as the reference's w' = lut[q] * scale.
 *
 * Tolerance against the reference kernel (ref_mx.c): both sum the same exact products a' * w' with one
 * F32 rounding per addition, in a different grouping (pairs), so as for BF16:
 *   |c_avx512 - c_ref| <= 2 * K * 2^-24 * sum_k |a'_k * w'_k|
 * plus, only for scales that push a value below 2^-126, the flushing of BF16 subnormals. */
#include "gemm/format_luts.h"
#include "gemm/kernels/avx512/bf16_tile_avx512.h"

void mm_ukernel_mx_avx512(const mm_ukernel_args *p) {
    /* Prepared rows are BF16 padded with zeros to an even K, the prepared block holds whole pairs. */
    int64_t n_pairs = (p->k_end - p->k_begin + 1) / 2;
    bf16_tile_run(p, (const __m512i *)(const void *)p->b_block, n_pairs, NULL);
}

/* Scale of column (base + lane / 2) for each of 16 lanes holding 8 columns x 2 K values. */
static inline __m512 pair_scales(__m512 scales16, int base) {
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(_mm512_add_epi32(dup, _mm512_set1_epi32(base)), scales16);
}

/* Stores 32 values (two vectors of 16 F32) as 32 BF16 (exact: the values fit). */
static inline void store_bf16(uint8_t *dst, __m512 first16, __m512 next16) {
    _mm512_store_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(next16, first16));
}

void mm_prepare_panel_fp8_avx512(const mm_ukernel_args *p, uint8_t *block) {
    const float *lut = mm_gemm_lut(p->w_dtype);
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    for (int64_t kp = first_pair; kp < end_pair; kp++) {
        /* One pair: 32 columns x 2 codes = 64 bytes, lane order (c, k%2), the same order as BF16 pairs. */
        const uint8_t *codes = p->b + kp * 64;
        const float *scale_row = p->b_mx_scale + (kp / 16) * MM_GEMM_NR;
        __m512 scales_lo = _mm512_loadu_ps(scale_row), scales_hi = _mm512_loadu_ps(scale_row + 16);
        __m512 v[4];
        for (int q = 0; q < 4; q++) {
            __m512i idx =
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(codes + 16 * q)));
            __m512 decoded = _mm512_i32gather_ps(idx, lut, 4);
            v[q] = _mm512_mul_ps(decoded, pair_scales(q < 2 ? scales_lo : scales_hi, (q & 1) * 8));
        }
        uint8_t *dst = block + (kp - first_pair) * 128;
        store_bf16(dst, v[0], v[1]);
        store_bf16(dst + 64, v[2], v[3]);
    }
}

void mm_prepare_panel_fp4_avx512(const mm_ukernel_args *p, uint8_t *block) {
    const __m512 lut = _mm512_loadu_ps(mm_gemm_lut(MM_DTYPE_FP4_E2M1));
    const __m512i dup_lo = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i dup_hi = _mm512_add_epi32(dup_lo, _mm512_set1_epi32(8));
    /* Even lanes take the low nibble (k even), odd lanes the high nibble (k odd). */
    const __m512i shifts = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    const __m512i nibble = _mm512_set1_epi32(0x0F);
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    for (int64_t kp = first_pair; kp < end_pair; kp++) {
        /* One pair: one byte per column (low nibble k even, high nibble k odd), 32 bytes. */
        const uint8_t *codes = p->b + kp * MM_GEMM_NR;
        const float *scale_row = p->b_mx_scale + (kp / 16) * MM_GEMM_NR;
        __m512 scales_lo = _mm512_loadu_ps(scale_row), scales_hi = _mm512_loadu_ps(scale_row + 16);
        __m512 v[4];
        for (int half = 0; half < 2; half++) {
            __m512i bytes =
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(codes + 16 * half)));
            __m512 scales = half ? scales_hi : scales_lo;
            for (int q = 0; q < 2; q++) {
                __m512i dup = _mm512_permutexvar_epi32(q ? dup_hi : dup_lo, bytes);
                __m512i idx = _mm512_and_si512(_mm512_srlv_epi32(dup, shifts), nibble);
                v[half * 2 + q] = _mm512_mul_ps(_mm512_permutexvar_ps(idx, lut), pair_scales(scales, q * 8));
            }
        }
        uint8_t *dst = block + (kp - first_pair) * 128;
        store_bf16(dst, v[0], v[1]);
        store_bf16(dst + 64, v[2], v[3]);
    }
}
