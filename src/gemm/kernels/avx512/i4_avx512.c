/* gemm/kernels/avx512/i4_avx512.c: INT8 x INT4 micro-kernel, 8 x 32 tile, nibbles decoded in registers
 * feeding vpdpbusd.
 *
 * The INT4 panel (gemm/packed.h) stores 8 K values per column in 4 bytes: low nibbles hold k..k+3, high
 * nibbles k+4..k+7. One 64-byte load covers 16 columns x 8 K; "and 0x0F" and ">> 4, and 0x0F" give two
 * byte quads per column, and a vpshufb table maps each nibble to its signed value (two's complement
 * -8..7), which is the signed operand of vpdpbusd. The activations take the unsigned side as a + 128,
 * corrected by 128 * colsum(w) (precomputed at pack time), exactly as in i8_avx512.c. The weights thus
 * stream from memory at half a byte each, which is what matters when few rows reach an expert.
 * Scaling as the reference (ref_int.c): c = ((float)acc * s_W[n] + offset[n]) * s_X[row]; bit-exact. */
#include <immintrin.h>
#include <string.h>

#include "gemm/kernels/kernels.h"

#define MR MM_GEMM_AVX512_MR

static inline __m512i broadcast_quad(const uint8_t *row, int64_t byte, __m512i flip) {
    uint32_t v;
    memcpy(&v, row + byte, sizeof v);
    return _mm512_xor_si512(_mm512_set1_epi32((int)v), flip);
}

void mm_ukernel_i8_i4_avx512(const mm_ukernel_args *p) {
    __m512i acc[MR][2];
    const uint8_t *rows[MR];
    /* Rows beyond m repeat row 0: computed, never stored, never read out of bounds. */
    for (int r = 0; r < MR; r++) rows[r] = p->a + (r < p->m ? r : 0) * p->a_stride;
    /* Between K blocks the partial holds the raw sums of (a + 128) * w. */
    int32_t *partial = p->partial;
    for (int r = 0; r < MR; r++) {
        acc[r][0] = p->first ? _mm512_setzero_si512() : _mm512_loadu_si512(partial + r * MM_GEMM_NR);
        acc[r][1] = p->first ? _mm512_setzero_si512() : _mm512_loadu_si512(partial + r * MM_GEMM_NR + 16);
    }

    const __m512i flip = _mm512_set1_epi32((int)0x80808080u);
    const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
    /* Nibble code -> signed value, per 128-bit lane for vpshufb. */
    const __m512i to_signed =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1));
    const __m512i *b = (const __m512i *)(const void *)p->b;
    int64_t groups = p->k_end / 8;
    for (int64_t g = p->k_begin / 8; g < groups; g++) {
        __m512i v0 = _mm512_load_si512(b + 2 * g), v1 = _mm512_load_si512(b + 2 * g + 1);
        __m512i lo0 = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(v0, low_nibbles));
        __m512i lo1 = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(v1, low_nibbles));
        __m512i hi0 = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(_mm512_srli_epi16(v0, 4), low_nibbles));
        __m512i hi1 = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(_mm512_srli_epi16(v1, 4), low_nibbles));
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            __m512i a_lo = broadcast_quad(rows[r], 8 * g, flip);
            __m512i a_hi = broadcast_quad(rows[r], 8 * g + 4, flip);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a_lo, lo0);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a_lo, lo1);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a_hi, hi0);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a_hi, hi1);
        }
    }
    int tail = (int)(p->k_end & 7);
    if (tail) {
        /* The panel pads K with zero nibbles; missing activation bytes are 0 (128 after the flip). */
        __m512i v0 = _mm512_load_si512(b + 2 * groups), v1 = _mm512_load_si512(b + 2 * groups + 1);
        __m512i lo0 = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(v0, low_nibbles));
        __m512i lo1 = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(v1, low_nibbles));
        __m512i hi0 = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(_mm512_srli_epi16(v0, 4), low_nibbles));
        __m512i hi1 = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(_mm512_srli_epi16(v1, 4), low_nibbles));
        for (int r = 0; r < MR; r++) {
            uint8_t bytes[8] = {0};
            memcpy(bytes, rows[r] + 8 * groups, (size_t)tail);
            __m512i a_lo = broadcast_quad(bytes, 0, flip), a_hi = broadcast_quad(bytes, 4, flip);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a_lo, lo0);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a_lo, lo1);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a_hi, hi0);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a_hi, hi1);
        }
    }
    if (!p->last) {
        for (int r = 0; r < MR; r++) {
            _mm512_storeu_si512(partial + r * MM_GEMM_NR, acc[r][0]);
            _mm512_storeu_si512(partial + r * MM_GEMM_NR + 16, acc[r][1]);
        }
        return;
    }

    __m512i corr0 = _mm512_loadu_si512(p->col_sum_x128), corr1 = _mm512_loadu_si512(p->col_sum_x128 + 16);
    __m512 scale0 = _mm512_loadu_ps(p->col_scale), scale1 = _mm512_loadu_ps(p->col_scale + 16);
    __m512 offset0 = _mm512_loadu_ps(p->col_offset), offset1 = _mm512_loadu_ps(p->col_offset + 16);
    __mmask16 mask0 = p->n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << p->n) - 1);
    __mmask16 mask1 = p->n >= 32 ? (__mmask16)0xFFFF : p->n <= 16 ? 0 : (__mmask16)((1u << (p->n - 16)) - 1);
    for (int r = 0; r < p->m; r++) {
        __m512 row_scale = _mm512_set1_ps(p->a_row_scales[r]);
        /* Separate multiply and add (no FMA): the reference rounds the product before adding. */
        __m512 h0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][0], corr0)), scale0);
        __m512 h1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][1], corr1)), scale1);
        h0 = _mm512_add_ps(h0, offset0);
        h1 = _mm512_add_ps(h1, offset1);
        _mm512_mask_storeu_ps(p->c + r * p->ldc, mask0, _mm512_mul_ps(h0, row_scale));
        _mm512_mask_storeu_ps(p->c + r * p->ldc + 16, mask1, _mm512_mul_ps(h1, row_scale));
    }
}
