/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/i8_avx512.c: INT8 x INT8 micro-kernel, 8 x 32 tile, vpdpbusd.
 *
 * vpdpbusd multiplies unsigned by signed bytes. The activations are signed, so the kernel computes
 * sum (a + 128) * w = acc + 128 * colsum(w) on rows prepared once per GEMM call as u = a + 128 (a ^ 0x80,
 * mm_gemm_i8_flip_row, K padded to whole quads with 0x80, the flipped 0); the packed panel carries 128 *
 * colsum per column (gemm/pack.c), subtracted afterwards. Flipping each broadcast quad in the loop
 * instead cost one vector uop per row and quad next to the two vpdpbusd (Zen 5, 1 thread: 2-5 % of one
 * GEMM, 3-6 % of the FFN at 64-256 rows; docs/gemm.md, 'INT8 rows flipped once'). All in INT32 and exact for
 * K <= MM_GEMM_INT_MAX_K, then scaled exactly as the reference (ref_int.c): c = ((float)acc * s_W[n]) *
 * s_X[row]. Bit-exact against the reference, by construction and by test.
 * The body is always inlined with a constant row count (the kernel dispatches on m), so each row count
 * gets its own unrolled loop and a tile with few rows costs only its rows. */
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

int64_t mm_gemm_i8_flipped_row_bytes(int64_t k) {
    return (k + 3) / 4 * 4;
}

void mm_gemm_i8_flip_row(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales, int64_t k,
                         uint16_t *out) {
    (void)a_dtype, (void)mx_scales; /* registered for INT8 activations, which have row scales only */
    uint8_t *u = (uint8_t *)out;
    int64_t i = 0;
    for (; i + 64 <= k; i += 64)
        _mm512_storeu_si512(u + i,
                            _mm512_xor_si512(_mm512_loadu_si512(row + i), _mm512_set1_epi8((char)0x80)));
    for (; i < k; i++) u[i] = (uint8_t)(row[i] ^ 0x80u);
    for (; i < mm_gemm_i8_flipped_row_bytes(k); i++) u[i] = 0x80;
}

/* The prepared quad at `at` in every 32-bit lane (vpbroadcastd from memory: a load, no vector uop). */
static inline __m512i broadcast_quad(const uint8_t *at) {
    int32_t v;
    memcpy(&v, at, sizeof v);
    return _mm512_set1_epi32(v);
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
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            __m512i a = broadcast_quad(row[r] + 4 * q);
            acc[r][0] = dpbusd(acc[r][0], a, b0);
            acc[r][1] = dpbusd(acc[r][1], a, b1);
        }
    }
    if (p->k_end & 3) {
        /* The panel pads K with zero weights and the prepared rows with 0x80 (the flipped 0), which
         * meet those zeros and add nothing. */
        __m512i b0 = _mm512_load_si512(b + 2 * quads);
        __m512i b1 = _mm512_load_si512(b + 2 * quads + 1);
        for (int r = 0; r < rows; r++) {
            __m512i a = broadcast_quad(row[r] + 4 * quads);
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
    default: i8_body(p, MR); break;
    }
}
