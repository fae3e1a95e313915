/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/i4_avx512.c: INT8 x INT4 micro-kernel, 8 x 32 tile, nibbles decoded in registers
 * feeding vpdpbusd.
 *
 * The INT4 panel (gemm/packed.h) stores 8 K values per column in 4 bytes: low nibbles hold k..k+3, high
 * nibbles k+4..k+7. One 64-byte load covers 16 columns x 8 K; "and 0x0F" and ">> 4, and 0x0F" give two
 * byte quads per column, and a vpshufb table maps each nibble to its signed value (two's complement
 * -8..7), which is the signed operand of vpdpbusd. The activations take the unsigned side as a + 128,
 * corrected by 128 * colsum(w) (precomputed at pack time), exactly as in i8_avx512.c. The weights thus
 * stream from memory at half a byte each, which is what matters when few rows reach an expert.
 * Scaling as the reference (ref_int.c): c = ((float)acc * s_W[n] + offset[n]) * s_X[row]; bit-exact.
 * The body is always inlined with a constant row count (the kernel dispatches on m). */
#include <immintrin.h>
#include <string.h>

#include "gemm/kernels/avx512/tile_store_avx512.h"
#include "gemm/kernels/kernels.h"

#define MR MM_GEMM_AVX512_MR

/* acc + dot(u8 a, s8 b) per 32-bit lane. Written as inline asm because GCC 12 does not tie the
 * accumulator of _mm512_dpbusd_epi32 to its destination and copies all 16 accumulators every
 * iteration (measured: docs/gemm.md, 'vpdpbusd in inline asm'); the asm operand "+v" keeps each
 * accumulator in its register. */
static inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

static inline __m512i broadcast_quad(const uint8_t *at, __m512i flip) {
    uint32_t v;
    memcpy(&v, at, sizeof v);
    return _mm512_xor_si512(_mm512_set1_epi32((int)v), flip);
}

/* Signed weights of one group of 8 K for 16 columns: [0] = K 0..3, [1] = K 4..7 of each column. */
static inline void decode_nibbles(__m512i packed, __m512i out[2]) {
    const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
    /* Nibble code -> signed value, per 128-bit lane for vpshufb. */
    const __m512i to_signed =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1));
    out[0] = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(packed, low_nibbles));
    out[1] = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_nibbles));
}

static inline __attribute__((always_inline)) void i4_body(const mm_ukernel_args *p, int rows) {
    __m512i acc[MR][2];
    const uint8_t *row[MR];
    /* Between K blocks the partial holds the raw sums of (a + 128) * w. */
    int32_t *partial = p->partial;
    for (int r = 0; r < rows; r++) {
        row[r] = p->a + r * p->a_stride;
        acc[r][0] = p->first ? _mm512_setzero_si512() : _mm512_loadu_si512(partial + r * MM_GEMM_NR);
        acc[r][1] = p->first ? _mm512_setzero_si512() : _mm512_loadu_si512(partial + r * MM_GEMM_NR + 16);
    }
    const __m512i flip = _mm512_set1_epi32((int)0x80808080u);
    const __m512i *b = (const __m512i *)(const void *)p->b;
    int64_t groups = p->k_end / 8, first_group = p->k_begin / 8;
    int64_t pf_per_step = tile_prefetch_per_step(p, groups - first_group);
    for (int64_t g = first_group; g < groups; g++) {
        tile_prefetch_step(p, g - first_group, pf_per_step);
        __m512i w0[2], w1[2];
        decode_nibbles(_mm512_load_si512(b + 2 * g), w0);
        decode_nibbles(_mm512_load_si512(b + 2 * g + 1), w1);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            __m512i a_lo = broadcast_quad(row[r] + 8 * g, flip);
            __m512i a_hi = broadcast_quad(row[r] + 8 * g + 4, flip);
            acc[r][0] = dpbusd(acc[r][0], a_lo, w0[0]);
            acc[r][1] = dpbusd(acc[r][1], a_lo, w1[0]);
            acc[r][0] = dpbusd(acc[r][0], a_hi, w0[1]);
            acc[r][1] = dpbusd(acc[r][1], a_hi, w1[1]);
        }
    }
    int tail = (int)(p->k_end & 7);
    if (tail) {
        /* The panel pads K with zero nibbles; missing activation bytes are 0 (128 after the flip). */
        __m512i w0[2], w1[2];
        decode_nibbles(_mm512_load_si512(b + 2 * groups), w0);
        decode_nibbles(_mm512_load_si512(b + 2 * groups + 1), w1);
        for (int r = 0; r < rows; r++) {
            uint8_t bytes[8] = {0};
            memcpy(bytes, row[r] + 8 * groups, (size_t)tail);
            __m512i a_lo = broadcast_quad(bytes, flip), a_hi = broadcast_quad(bytes + 4, flip);
            acc[r][0] = dpbusd(acc[r][0], a_lo, w0[0]);
            acc[r][1] = dpbusd(acc[r][1], a_lo, w1[0]);
            acc[r][0] = dpbusd(acc[r][0], a_hi, w0[1]);
            acc[r][1] = dpbusd(acc[r][1], a_hi, w1[1]);
        }
    }
    if (!p->last) {
        for (int r = 0; r < rows; r++) tile_store_partial_i32(partial, r, acc[r][0], acc[r][1]);
        return;
    }
    __m512i corr0 = _mm512_loadu_si512(p->col_sum_x128), corr1 = _mm512_loadu_si512(p->col_sum_x128 + 16);
    tile_int_epilogue e = tile_int_epilogue_load(p, 1);
    for (int r = 0; r < rows; r++) tile_int_epilogue_row(p, &e, r, acc[r][0], acc[r][1], corr0, corr1);
}

void mm_ukernel_i8_i4_avx512(const mm_ukernel_args *p) {
    switch (p->m) {
    case 1: i4_body(p, 1); break;
    case 2: i4_body(p, 2); break;
    case 3: i4_body(p, 3); break;
    case 4: i4_body(p, 4); break;
    case 5: i4_body(p, 5); break;
    case 6: i4_body(p, 6); break;
    case 7: i4_body(p, 7); break;
    default: i4_body(p, MR); break;
    }
}
