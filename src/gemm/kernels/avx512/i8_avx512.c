/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/i8_avx512.c: INT8 x INT8 micro-kernel, 12 x 32 tile, vpdpbusd.
 *
 * vpdpbusd multiplies unsigned by signed bytes. The activations are signed, so each broadcast quad is
 * flipped to u = a + 128 (xor 0x80) and the kernel computes sum (a + 128) * w = acc + 128 * colsum(w);
 * the packed panel carries 128 * colsum per column (gemm/pack.c), subtracted afterwards. All in INT32
 * and exact for K <= MM_GEMM_INT_MAX_K, then scaled exactly as the reference (ref_int.c):
 * c = ((float)acc * s_W[n]) * s_X[row]. Bit-exact against the reference, by construction and by test.
 * The body is always inlined with a constant row count (the kernel dispatches on m), so each row count
 * gets its own unrolled loop and a tile with few rows costs only its rows. */
#include <immintrin.h>
#include <string.h>

#include "gemm/kernels/avx512/tile_store_avx512.h"
#include "gemm/kernels/kernels.h"

#define MR MM_GEMM_AVX512_I8_MR

/* acc + dot(u8 a, s8 b) per 32-bit lane. Written as inline asm because GCC 12 does not tie the
 * accumulator of _mm512_dpbusd_epi32 to its destination and copies all the accumulators every
 * iteration (measured: docs/gemm.md, 'vpdpbusd in inline asm'); the asm operand "+v" keeps each
 * accumulator in its register. */
static inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

static inline __m512i broadcast_quad(const uint8_t *at, size_t bytes, __m512i flip) {
    uint32_t v = 0;
    memcpy(&v, at, bytes);
    return _mm512_xor_si512(_mm512_set1_epi32((int)v), flip);
}

static inline __attribute__((always_inline)) void i8_body(const mm_ukernel_args *p, int rows) {
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
    int64_t quads = p->k_end / 4, first_quad = p->k_begin / 4;
    int64_t pf_per_step = tile_prefetch_per_step(p, quads - first_quad);
    for (int64_t q = first_quad; q < quads; q++) {
        tile_prefetch_step(p, q - first_quad, pf_per_step);
        /* Prefetch: few rows do little work per weight byte, and the hardware prefetcher alone keeps
         * too few reads in flight to reach the streaming bandwidth (2 KiB ahead; measured: docs/gemm.md,
         * 'AVX-512 prefetch distance'). */
        _mm_prefetch((const char *)(b + 2 * q) + 2048, _MM_HINT_T0);
        _mm_prefetch((const char *)(b + 2 * q) + 2048 + 64, _MM_HINT_T0);
        __m512i b0 = _mm512_load_si512(b + 2 * q);
        __m512i b1 = _mm512_load_si512(b + 2 * q + 1);
#pragma GCC unroll 12
        for (int r = 0; r < rows; r++) {
            __m512i a = broadcast_quad(row[r] + 4 * q, 4, flip);
            acc[r][0] = dpbusd(acc[r][0], a, b0);
            acc[r][1] = dpbusd(acc[r][1], a, b1);
        }
    }
    int tail = (int)(p->k_end & 3);
    if (tail) {
        /* The panel pads K with zero weights; missing activation bytes are 0 (then 128 after the flip),
         * which meet those zeros and add nothing. */
        __m512i b0 = _mm512_load_si512(b + 2 * quads);
        __m512i b1 = _mm512_load_si512(b + 2 * quads + 1);
        for (int r = 0; r < rows; r++) {
            __m512i a = broadcast_quad(row[r] + 4 * quads, (size_t)tail, flip);
            acc[r][0] = dpbusd(acc[r][0], a, b0);
            acc[r][1] = dpbusd(acc[r][1], a, b1);
        }
    }
    if (!p->last) {
        for (int r = 0; r < rows; r++) tile_store_partial_i32(partial, r, acc[r][0], acc[r][1]);
        return;
    }
    __m512i corr0 = _mm512_loadu_si512(p->col_sum_x128), corr1 = _mm512_loadu_si512(p->col_sum_x128 + 16);
    tile_int_epilogue e = tile_int_epilogue_load(p, 0);
    for (int r = 0; r < rows; r++) tile_int_epilogue_row(p, &e, r, acc[r][0], acc[r][1], corr0, corr1);
}

void mm_ukernel_i8_i8_avx512(const mm_ukernel_args *p) {
    switch (p->m) {
    case 1: i8_body(p, 1); break;
    case 2: i8_body(p, 2); break;
    case 3: i8_body(p, 3); break;
    case 4: i8_body(p, 4); break;
    case 5: i8_body(p, 5); break;
    case 6: i8_body(p, 6); break;
    case 7: i8_body(p, 7); break;
    case 8: i8_body(p, 8); break;
    case 9: i8_body(p, 9); break;
    case 10: i8_body(p, 10); break;
    case 11: i8_body(p, 11); break;
    default: i8_body(p, MR); break;
    }
}
