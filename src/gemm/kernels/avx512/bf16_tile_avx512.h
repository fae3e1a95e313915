/* gemm/kernels/avx512/bf16_tile_avx512.h: the 8 x 32 vdpbf16ps register tile shared by the BF16 and
 * MX kernels (included only by *_avx512.c files, which are compiled with AVX-512 flags).
 *
 * Operands: MR activation rows of BF16 read as 32-bit pairs, and panel pairs laid out as in
 * gemm/packed.h (per K pair, 32 columns x 2 BF16 = two 64-byte vectors). 16 accumulators, 2 loads and 8
 * broadcasts per 16 vdpbf16ps. */
#ifndef MEGAMOE_GEMM_BF16_TILE_AVX512_H
#define MEGAMOE_GEMM_BF16_TILE_AVX512_H

#include <immintrin.h>
#include <string.h>

#include "gemm/kernels/kernels.h"

#define BF16_TILE_MR MM_GEMM_AVX512_MR

typedef struct bf16_tile {
    __m512 acc[BF16_TILE_MR][2];
    const uint8_t *rows[BF16_TILE_MR];
} bf16_tile;

/* Row pointers (rows beyond m repeat row 0: computed, never stored, never read out of bounds) and the
 * accumulators: zero on the first K block, else the partial sums of the previous block. */
static inline void bf16_tile_begin(bf16_tile *t, const mm_ukernel_args *p) {
    const float *partial = p->partial;
    for (int r = 0; r < BF16_TILE_MR; r++) {
        t->rows[r] = p->a + (r < p->m ? r : 0) * p->a_stride;
        t->acc[r][0] = p->first ? _mm512_setzero_ps() : _mm512_loadu_ps(partial + r * MM_GEMM_NR);
        t->acc[r][1] = p->first ? _mm512_setzero_ps() : _mm512_loadu_ps(partial + r * MM_GEMM_NR + 16);
    }
}

static inline __m512bh bf16_tile_broadcast_pair(const uint8_t *at) {
    uint32_t v;
    memcpy(&v, at, sizeof v);
    return (__m512bh)_mm512_set1_epi32((int)v);
}

/* n_pairs K pairs: activations from byte a_offset of each row, panel pairs from b (64-byte aligned). */
static inline void bf16_tile_accumulate(bf16_tile *t, int64_t a_offset, const __m512i *b, int64_t n_pairs) {
    __m512 acc[BF16_TILE_MR][2];
    const uint8_t *rows[BF16_TILE_MR];
    /* Local copies so that the compiler keeps the accumulators in registers. */
    memcpy(acc, t->acc, sizeof acc);
    for (int r = 0; r < BF16_TILE_MR; r++) rows[r] = t->rows[r] + a_offset;
    for (int64_t i = 0; i < n_pairs; i++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(b + 2 * i);
        __m512bh b1 = (__m512bh)_mm512_load_si512(b + 2 * i + 1);
#pragma GCC unroll 8
        for (int r = 0; r < BF16_TILE_MR; r++) {
            __m512bh a = bf16_tile_broadcast_pair(rows[r] + 4 * i);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
        }
    }
    memcpy(t->acc, acc, sizeof acc);
}

/* Not the last K block: keep the sums in partial. Last block: masked stores of the m x n corner. */
static inline void bf16_tile_end(const bf16_tile *t, const mm_ukernel_args *p) {
    if (!p->last) {
        float *partial = p->partial;
        for (int r = 0; r < BF16_TILE_MR; r++) {
            _mm512_storeu_ps(partial + r * MM_GEMM_NR, t->acc[r][0]);
            _mm512_storeu_ps(partial + r * MM_GEMM_NR + 16, t->acc[r][1]);
        }
        return;
    }
    __mmask16 mask0 = p->n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << p->n) - 1);
    __mmask16 mask1 = p->n >= 32 ? (__mmask16)0xFFFF : p->n <= 16 ? 0 : (__mmask16)((1u << (p->n - 16)) - 1);
    for (int r = 0; r < p->m; r++) {
        _mm512_mask_storeu_ps(p->c + r * p->ldc, mask0, t->acc[r][0]);
        _mm512_mask_storeu_ps(p->c + r * p->ldc + 16, mask1, t->acc[r][1]);
    }
}

#endif
