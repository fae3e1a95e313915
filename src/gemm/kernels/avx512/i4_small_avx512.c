/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/i4_small_avx512.c: the few-rows INT8 x INT4 kernel (1..8 rows x 32 columns), for
 * decode-sized groups, whose speed should be that of streaming the packed INT4 weights once.
 *
 * What differs from the general kernel (i4_avx512.c), and why:
 * - The weights take the unsigned side of vpdpbusd: a nibble code q (two's complement -8..7) becomes
 *   u = q ^ 8 = value + 8 in 0..15 with one vpternlogd ((x & 0x0F) ^ 0x08), instead of a vpshufb table
 *   lookup; the activations stay signed and are broadcast straight from memory by the instruction's
 *   {1to16} operand, so no per-row broadcast or sign flip costs a vector uop. The sum of u * a is
 *   corrected by 8 * sum_k a[k] per row (computed once per tile at the last K block), which gives the
 *   exact INT32 sum of w * a: |sum u * a| <= 15 * 128 * 65536 < 2^31 for K <= MM_GEMM_INT_MAX_K.
 * - Up to 4 rows, every row has four independent accumulator chains (column half x low/high nibble
 *   quad) instead of two, so one or two rows are not bound by the vpdpbusd latency.
 * - The panel is prefetched ahead: a few rows do little work per weight byte, and the hardware
 *   prefetcher alone does not keep enough reads in flight to reach the streaming bandwidth.
 * Scaling as the reference (ref_int.c): c = ((float)acc * s_W[n] + offset[n]) * s_X[row]; the INT32 sum
 * is the same integer, so the result is bit-exact with every other INT8 x INT4 kernel. */
#include <immintrin.h>
#include <string.h>

#include "gemm/kernels/avx512/tile_store_avx512.h"
#include "gemm/kernels/kernels.h"

#define MR MM_GEMM_I4_SMALL_MR
/* Bytes of panel prefetched ahead of the loads (16 groups of 8 K x 32 columns). */
#define PREFETCH_AHEAD 2048

/* acc + dot(u8 weights, s8 activation quad broadcast from memory). Inline asm: GCC 12 copies the
 * accumulators of _mm512_dpbusd_epi32 every iteration (see i4_avx512.c), and the embedded broadcast
 * saves the broadcast uop. The quad's address goes in a register and the read is not declared to GCC:
 * with an "m" operand GCC must assume the read may alias the accumulator array, and stored every
 * accumulator to the stack before each instruction (16 stores per K group at 8 rows, which bound the
 * kernel even with hot weights; measured: docs/gemm.md, 'vpdpbusd in inline asm'). This is safe because
 * the activation rows are
 * input only: nothing in the kernel writes them. */
static inline __m512i dpbusd_bcst(__m512i acc, __m512i weights, const uint8_t *quad) {
    __asm__("vpdpbusd (%2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(weights), "r"(quad));
    return acc;
}

/* The same with the read declared, for a quad the kernel itself has just written (the K tail). */
static inline __m512i dpbusd_bcst_declared(__m512i acc, __m512i weights, const uint8_t *quad) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0"
            : "+v"(acc)
            : "v"(weights), "m"(*(const int32_t *)(const void *)quad));
    return acc;
}

static inline __m512i dpbusd(__m512i acc, __m512i u, __m512i s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
    return acc;
}

/* 64 packed bytes (16 columns x 8 K) -> u = value + 8 of K 0..3 ([0]) and K 4..7 ([1]) of each column. */
static inline void decode_unsigned(__m512i packed, __m512i out[2]) {
    const __m512i low_nibbles = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(0x08);
    /* 0x6A = (A & B) ^ C for A = bytes, B = 0x0F, C = 0x08 (bit A*4 + B*2 + C of the table). */
    out[0] = _mm512_ternarylogic_epi32(packed, low_nibbles, eight, 0x6A);
    out[1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(packed, 4), low_nibbles, eight, 0x6A);
}

/* sum of the signed bytes row[0..k): vpdpbusd with ones on the unsigned side, the tail masked. */
static inline int32_t row_sum(const uint8_t *row, int64_t k) {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i sum = _mm512_setzero_si512();
    int64_t i = 0;
    for (; i + 64 <= k; i += 64) sum = dpbusd(sum, ones, _mm512_loadu_si512(row + i));
    if (i < k) {
        __mmask64 mask = (__mmask64)((1ull << (k - i)) - 1); /* k - i < 64 */
        sum = dpbusd(sum, ones, _mm512_maskz_loadu_epi8(mask, row + i));
    }
    return _mm512_reduce_add_epi32(sum);
}

static inline __attribute__((always_inline)) void small_body(const mm_ukernel_args *p, int rows) {
    /* Chains per row: 4 (column half 0/1 x nibble quad low/high) up to 4 rows, else 2. */
    enum { MAX_CHAINS = 4 };
    const int split = rows <= 4;
    __m512i acc[MR][MAX_CHAINS];
    const uint8_t *row[MR];
    /* Between K blocks the partial holds the raw sums of u * a, 32 per row. */
    int32_t *partial = p->partial;
    for (int r = 0; r < rows; r++) {
        row[r] = p->a + r * p->a_stride;
        acc[r][0] = p->first ? _mm512_setzero_si512() : _mm512_loadu_si512(partial + r * MM_GEMM_NR);
        acc[r][1] = p->first ? _mm512_setzero_si512() : _mm512_loadu_si512(partial + r * MM_GEMM_NR + 16);
        acc[r][2] = acc[r][3] = _mm512_setzero_si512();
    }
    const uint8_t *b = p->b;
    int64_t groups = p->k_end / 8;
    for (int64_t g = p->k_begin / 8; g < groups; g++) {
        const uint8_t *at = b + 128 * g;
        _mm_prefetch((const char *)at + PREFETCH_AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)at + PREFETCH_AHEAD + 64, _MM_HINT_T0);
        __m512i w0[2], w1[2];
        decode_unsigned(_mm512_load_si512(at), w0);
        decode_unsigned(_mm512_load_si512(at + 64), w1);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const uint8_t *quad = row[r] + 8 * g;
            acc[r][0] = dpbusd_bcst(acc[r][0], w0[0], quad);
            acc[r][1] = dpbusd_bcst(acc[r][1], w1[0], quad);
            acc[r][split ? 2 : 0] = dpbusd_bcst(acc[r][split ? 2 : 0], w0[1], quad + 4);
            acc[r][split ? 3 : 1] = dpbusd_bcst(acc[r][split ? 3 : 1], w1[1], quad + 4);
        }
    }
    int tail = (int)(p->k_end & 7);
    if (tail) {
        /* Padded weight nibbles decode to u = 8, so the missing activation bytes must be 0. */
        const uint8_t *at = b + 128 * groups;
        __m512i w0[2], w1[2];
        decode_unsigned(_mm512_load_si512(at), w0);
        decode_unsigned(_mm512_load_si512(at + 64), w1);
        for (int r = 0; r < rows; r++) {
            _Alignas(8) uint8_t quad[8] = {0};
            memcpy(quad, row[r] + 8 * groups, (size_t)tail);
            acc[r][0] = dpbusd_bcst_declared(acc[r][0], w0[0], quad);
            acc[r][1] = dpbusd_bcst_declared(acc[r][1], w1[0], quad);
            acc[r][2] = dpbusd_bcst_declared(acc[r][2], w0[1], quad + 4);
            acc[r][3] = dpbusd_bcst_declared(acc[r][3], w1[1], quad + 4);
        }
    }
    for (int r = 0; r < rows; r++) {
        acc[r][0] = _mm512_add_epi32(acc[r][0], acc[r][2]);
        acc[r][1] = _mm512_add_epi32(acc[r][1], acc[r][3]);
    }
    if (!p->last) {
        for (int r = 0; r < rows; r++) tile_store_partial_i32(partial, r, acc[r][0], acc[r][1]);
        return;
    }
    tile_int_epilogue e = tile_int_epilogue_load(p, 1);
    for (int r = 0; r < rows; r++) {
        __m512i correction = _mm512_set1_epi32(8 * row_sum(row[r], p->k));
        tile_int_epilogue_row(p, &e, r, acc[r][0], acc[r][1], correction, correction);
    }
}

void mm_ukernel_i8_i4_small_avx512(const mm_ukernel_args *p) {
    switch (p->m) {
    case 1: small_body(p, 1); break;
    case 2: small_body(p, 2); break;
    case 3: small_body(p, 3); break;
    case 4: small_body(p, 4); break;
    case 5: small_body(p, 5); break;
    case 6: small_body(p, 6); break;
    case 7: small_body(p, 7); break;
    default: small_body(p, MR); break;
    }
}
