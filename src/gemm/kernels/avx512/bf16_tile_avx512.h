/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/bf16_tile_avx512.h: the 8 x 32 vdpbf16ps register tile shared by the BF16 and
 * MX kernels (included only by *_avx512.c files, which are compiled with AVX-512 flags).
 *
 * Operands: activation rows of BF16 read as 32-bit pairs, and panel pairs laid out as in gemm/packed.h
 * (per K pair, 32 columns x 2 BF16 = two 64-byte vectors). 16 accumulators, 2 loads and 8 broadcasts per
 * 16 vdpbf16ps. The tile body is always inlined with a constant row count (bf16_tile_run dispatches on
 * m), so each row count gets its own fully unrolled loop with the accumulators in registers, and a tile
 * with few rows (an expert that received one token) costs only its rows. */
#ifndef MEGAMOE_GEMM_BF16_TILE_AVX512_H
#define MEGAMOE_GEMM_BF16_TILE_AVX512_H

#include <immintrin.h>
#include <string.h>

#include "gemm/kernels/avx512/tile_store_avx512.h"
#include "gemm/kernels/kernels.h"

#define BF16_TILE_MR MM_GEMM_AVX512_MR

static inline __m512bh bf16_tile_broadcast(const uint8_t *at, size_t bytes) {
    uint32_t v = 0;
    memcpy(&v, at, bytes);
    return (__m512bh)_mm512_set1_epi32((int)v);
}

/* n_pairs K pairs from panel pairs b; activations start at byte 2 * k_begin of each row. With tail_b,
 * one more pair whose second activation is missing (odd K): its second half is taken as 0 rather than
 * read past the row (the panel's padding weight there is 0 anyway). */
/* The tile's rows (from byte 2 * k_begin) and accumulators at the start of a call: zero on the first K
 * block, else the running sums in `partial`. */
static inline __attribute__((always_inline)) void bf16_tile_start(const mm_ukernel_args *p, int rows,
                                                                  __m512 acc[][2], const uint8_t *row[]) {
    const float *partial = p->partial;
    for (int r = 0; r < rows; r++) {
        row[r] = p->a + r * p->a_stride + 2 * p->k_begin;
        acc[r][0] = p->first ? _mm512_setzero_ps() : _mm512_loadu_ps(partial + r * MM_GEMM_NR);
        acc[r][1] = p->first ? _mm512_setzero_ps() : _mm512_loadu_ps(partial + r * MM_GEMM_NR + 16);
    }
}

/* The sums at the end of a call: to `partial`, or on the last K block to the tile's corner of C. */
static inline __attribute__((always_inline)) void bf16_tile_finish(const mm_ukernel_args *p, int rows,
                                                                   __m512 acc[][2]) {
    float *partial = p->partial;
    if (!p->last) {
        for (int r = 0; r < rows; r++) {
            _mm512_storeu_ps(partial + r * MM_GEMM_NR, acc[r][0]);
            _mm512_storeu_ps(partial + r * MM_GEMM_NR + 16, acc[r][1]);
        }
        return;
    }
    __mmask16 mask0 = tile_mask_lo(p->n), mask1 = tile_mask_hi(p->n);
    for (int r = 0; r < rows; r++) {
        _mm512_mask_storeu_ps(p->c + r * p->ldc, mask0, acc[r][0]);
        _mm512_mask_storeu_ps(p->c + r * p->ldc + 16, mask1, acc[r][1]);
    }
}

static inline __attribute__((always_inline)) void
bf16_tile_body(const mm_ukernel_args *p, const __m512i *b, int64_t n_pairs, const __m512i *tail_b, int rows) {
    __m512 acc[BF16_TILE_MR][2];
    const uint8_t *row[BF16_TILE_MR];
    bf16_tile_start(p, rows, acc, row);
    int64_t pf_per_step = tile_prefetch_per_step(p, n_pairs);
    for (int64_t i = 0; i < n_pairs; i++) {
        tile_prefetch_step(p, i, pf_per_step);
        /* With few rows this loop streams the weights: fetch 2 KiB ahead of the hardware prefetcher
         * (measured: docs/gemm.md, 'AVX-512 prefetch distance'). */
        _mm_prefetch((const char *)(b + 2 * i + 32), _MM_HINT_T0);
        _mm_prefetch((const char *)(b + 2 * i + 33), _MM_HINT_T0);
        __m512bh b0 = (__m512bh)_mm512_load_si512(b + 2 * i);
        __m512bh b1 = (__m512bh)_mm512_load_si512(b + 2 * i + 1);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            __m512bh a = bf16_tile_broadcast(row[r] + 4 * i, 4);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
        }
    }
    if (tail_b) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(tail_b), b1 = (__m512bh)_mm512_load_si512(tail_b + 1);
        for (int r = 0; r < rows; r++) {
            __m512bh a = bf16_tile_broadcast(row[r] + 4 * n_pairs, 2);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
        }
    }
    bf16_tile_finish(p, rows, acc);
}

static inline void bf16_tile_run(const mm_ukernel_args *p, const __m512i *b, int64_t n_pairs,
                                 const __m512i *tail_b) {
    switch (p->m) {
    case 1: bf16_tile_body(p, b, n_pairs, tail_b, 1); break;
    case 2: bf16_tile_body(p, b, n_pairs, tail_b, 2); break;
    case 3: bf16_tile_body(p, b, n_pairs, tail_b, 3); break;
    case 4: bf16_tile_body(p, b, n_pairs, tail_b, 4); break;
    case 5: bf16_tile_body(p, b, n_pairs, tail_b, 5); break;
    case 6: bf16_tile_body(p, b, n_pairs, tail_b, 6); break;
    case 7: bf16_tile_body(p, b, n_pairs, tail_b, 7); break;
    default: bf16_tile_body(p, b, n_pairs, tail_b, BF16_TILE_MR); break;
    }
}

#endif
