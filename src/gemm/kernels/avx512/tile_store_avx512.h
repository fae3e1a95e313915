/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/tile_store_avx512.h: how every 32-column AVX-512/AMX tile leaves its registers
 * (included only by *_avx512.c files, which are compiled with AVX-512 flags).
 *
 * One place for what all kernels do alike at the end of a K block: the edge masks of a tile narrower
 * than 32 columns, the raw INT32 sums kept in `partial` between K blocks, and the dequantizing epilogue of
 * the INT kernels, C = (F32(acc - correction) * s_W[n] (+ offset[n])) * s_X[row], with a separate multiply
 * and add (no FMA) because the reference rounds the product before adding. */
#ifndef MEGAMOE_GEMM_TILE_STORE_AVX512_H
#define MEGAMOE_GEMM_TILE_STORE_AVX512_H

#include <immintrin.h>
#include <string.h>

#include "gemm/kernels/kernels.h"

/* Masks of the valid columns among 0..15 and 16..31 of a tile n columns wide. */
static inline __mmask16 tile_mask_lo(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
}
static inline __mmask16 tile_mask_hi(int64_t n) {
    return n >= 32 ? (__mmask16)0xFFFF : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
}

/* Lines of the next K block (kernel.h: prefetch) to fetch per step of a kernel's loop of `steps` steps, so
 * that its share is spread over the whole loop; at least one per step while any is left. */
static inline __attribute__((always_inline)) int64_t tile_prefetch_per_step(const mm_ukernel_args *p,
                                                                            int64_t steps) {
    return steps > 0 ? (p->prefetch_lines + steps - 1) / steps : 0;
}
/* The lines of step `step` (0-based) into L2. */
static inline __attribute__((always_inline)) void tile_prefetch_step(const mm_ukernel_args *p, int64_t step,
                                                                     int64_t per_step) {
    for (int64_t j = step * per_step; j < (step + 1) * per_step && j < p->prefetch_lines; j++)
        _mm_prefetch((const char *)(p->prefetch + 64 * j), _MM_HINT_T1);
}

/* F32 running sums of `rows` rows x 32 columns kept in memory by a kernel (the few-rows MX kernels add
 * one block at a time): start from zero or from `partial`, end into `partial` or C. */
static inline void tile_f32_start(const mm_ukernel_args *p, int rows, float (*sum)[MM_GEMM_NR]) {
    if (p->first)
        memset(sum, 0, (size_t)rows * sizeof sum[0]);
    else
        memcpy(sum, p->partial, (size_t)rows * sizeof sum[0]);
}

static inline void tile_f32_finish(const mm_ukernel_args *p, int rows, float (*sum)[MM_GEMM_NR]) {
    if (!p->last) {
        memcpy(p->partial, sum, (size_t)rows * sizeof sum[0]);
        return;
    }
    for (int r = 0; r < rows; r++) {
        _mm512_mask_storeu_ps(p->c + r * p->ldc, tile_mask_lo(p->n), _mm512_loadu_ps(sum[r]));
        _mm512_mask_storeu_ps(p->c + r * p->ldc + 16, tile_mask_hi(p->n), _mm512_loadu_ps(sum[r] + 16));
    }
}

/* Row r of the raw sums, kept between K blocks. */
static inline void tile_store_partial_i32(int32_t *partial, int r, __m512i acc0, __m512i acc1) {
    _mm512_storeu_si512(partial + r * MM_GEMM_NR, acc0);
    _mm512_storeu_si512(partial + r * MM_GEMM_NR + 16, acc1);
}

/* The per-column data of the INT epilogue, loaded once per tile. */
typedef struct tile_int_epilogue {
    __m512 scale0, scale1, offset0, offset1;
    __mmask16 mask0, mask1;
    int with_offset; /* INT4 weights: the per-column offset of the MSD identity (docs/gemm.md) */
} tile_int_epilogue;

static inline tile_int_epilogue tile_int_epilogue_load(const mm_ukernel_args *p, int with_offset) {
    tile_int_epilogue e;
    e.scale0 = _mm512_loadu_ps(p->col_scale);
    e.scale1 = _mm512_loadu_ps(p->col_scale + 16);
    e.offset0 = with_offset ? _mm512_loadu_ps(p->col_offset) : _mm512_setzero_ps();
    e.offset1 = with_offset ? _mm512_loadu_ps(p->col_offset + 16) : _mm512_setzero_ps();
    e.mask0 = tile_mask_lo(p->n);
    e.mask1 = tile_mask_hi(p->n);
    e.with_offset = with_offset;
    return e;
}

/* Writes row r of C from its INT32 sums minus the given corrections. */
static inline void tile_int_epilogue_row(const mm_ukernel_args *p, const tile_int_epilogue *e, int r,
                                         __m512i acc0, __m512i acc1, __m512i corr0, __m512i corr1) {
    __m512 row_scale = _mm512_set1_ps(p->a_row_scales[r]);
    __m512 h0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc0, corr0)), e->scale0);
    __m512 h1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc1, corr1)), e->scale1);
    if (e->with_offset) {
        h0 = _mm512_add_ps(h0, e->offset0);
        h1 = _mm512_add_ps(h1, e->offset1);
    }
    _mm512_mask_storeu_ps(p->c + r * p->ldc, e->mask0, _mm512_mul_ps(h0, row_scale));
    _mm512_mask_storeu_ps(p->c + r * p->ldc + 16, e->mask1, _mm512_mul_ps(h1, row_scale));
}

#endif
