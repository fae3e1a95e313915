/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/mx_small_avx512.c: the few-rows MX kernel for FP8 weights (FP8 x FP8, any mix of
 * E4M3 and E5M2; 1..8 rows), for decode-sized groups, whose speed is that of streaming the packed
 * weights once. A tile decodes each K pair once for all its rows: with 4-row tiles, 8 rows decoded every
 * pair twice, 10 decode instructions next to 16 vdpbf16ps per pair instead of 5 (8 rows, K 7168 x N
 * 1024, hot, 1 thread on Zen 5: 0.441 -> 0.382 ms; docs/gemm.md). (FP4 weights have their own:
 * fp8_fp4_small_avx512.c, fp4_int_small_avx512.c.)
 *
 * The general MX kernel (mx_avx512.c) writes every panel block to a BF16 buffer with the weight scales
 * folded in (a dozen vector operations per 32 codes), which is what bounds a 1-row group. Here the codes
 * go straight from the packed panel to BF16 registers without their scale: two vpermt2b over 128-byte
 * tables give the high and low bytes of the BF16 pattern of the magnitude (index = the code's low 7
 * bits), the sign is or-ed into the high byte, and vpunpck{l,h}bw interleaves low and high bytes into
 * BF16 words. Every FP8 value is a normal BF16 (or a zero, Inf or NaN), so the unscaled decode is exact.
 * The interleave works inside each 128-bit lane, so the dot products accumulate the 32 columns in a
 * permuted order, which is undone once per tile when the results are written. The activation pair of a
 * step is broadcast straight from the prepared BF16 row by vdpbf16ps itself.
 * The E8M0 weight scale is applied per K block of 32: the block's products a' * q (a' the prepared BF16
 * activation with its own scale, q the unscaled weight) are summed in F32 from zero, then multiplied by
 * the F32 scale 2^(b-127) and added to the running sum: exact unless the result leaves the normal F32
 * range (it then rounds to a subnormal); the NaN scale 0xFF makes the column NaN. Limit: the block sum
 * is formed before the weight scale, so activations a' beyond about 2^114 (with E4M3 weights up to 448;
 * E8M0 activation scale bytes near the top of their range) can overflow it where the reference, which
 * scales w' first, stays finite: the result is then Inf or NaN.
 *
 * Tolerance against the reference kernel (ref_mx.c): the same exact products, summed in F32 in another
 * order (per block, pairs and chains grouped), so |c - c_ref| <= 2 K 2^-24 sum_k |a'_k w'_k|; beyond the
 * F32 range an Inf of the reference may be a NaN here or the reverse (a block sum overflows where single
 * products do not, or the other way), and activations a' below 2^-126 are flushed to zero (vdpbf16ps). */
/* vpermt2b (AVX512_VBMI): the registry offers this kernel only when the CPU has it. */
#pragma GCC target("avx512vbmi")
#include <immintrin.h>
#include <string.h>

#include "format/decode_tables.h"
#include "format/format_table.h"
#include "gemm/kernels/avx512/panel_codes_avx512.h"
#include "gemm/kernels/kernels.h"

#define MR MM_GEMM_MX_SMALL_MR
/* Bytes of panel prefetched ahead of the loads (2 MX blocks of 32 columns). */
#define PREFETCH_AHEAD 2048

/* The BF16 tables of one weight format: [0..1] high bytes, [2..3] low bytes of the 128 magnitudes. */
typedef struct byte_tables {
    __m512i t[4];
} byte_tables;

static void tables_make(mm_dtype w_dtype, byte_tables *bt) {
    const uint16_t *lut = mm_format_lut_bf16(w_dtype);
    _Alignas(64) uint8_t bytes[4][64];
    for (int i = 0; i < 128; i++) {
        bytes[i / 64][i % 64] = (uint8_t)(lut[i] >> 8);
        bytes[2 + i / 64][i % 64] = (uint8_t)lut[i];
    }
    for (int i = 0; i < 4; i++) bt->t[i] = _mm512_load_si512(bytes[i]);
}

/* Panel column held by dword lane j of accumulator vector v: vector 0 = unpacklo of the 64 code bytes
 * (bytes 0..7 of each 128-bit lane = columns 8L..8L+3), vector 1 = unpackhi (8L+4..8L+7). */
static inline int lane_column(int v, int j) {
    return 8 * (j / 4) + 4 * v + j % 4;
}

/* FP8 codes of one K pair (64 bytes) -> two BF16 vectors in accumulator order, unscaled. */
static inline void decode_fp8(__m512i codes, const byte_tables *bt, __m512i w[2]) {
    __m512i hi = _mm512_permutex2var_epi8(bt->t[0], codes, bt->t[1]);
    __m512i lo = _mm512_permutex2var_epi8(bt->t[2], codes, bt->t[3]);
    hi = _mm512_ternarylogic_epi32(hi, codes, _mm512_set1_epi8((char)0x80), 0xF8); /* hi | (codes & 0x80) */
    w[0] = _mm512_unpacklo_epi8(lo, hi);
    w[1] = _mm512_unpackhi_epi8(lo, hi);
}

/* acc + dot(BF16 pairs, the BF16 pair at `pair` broadcast), in inline asm so that the broadcast comes
 * from memory ({1to16}) and GCC does not copy the accumulators (see i4_small_avx512.c). The prepared
 * rows are input only: nothing in the kernel writes them. */
static inline __m512 dpbf16_bcst(__m512 acc, __m512i weights, const uint8_t *pair) {
    __asm__("vdpbf16ps (%2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(weights), "r"(pair));
    return acc;
}

/* Whether row r of a tile of `rows` rows splits its dot products over 4 chains (even / odd K pairs apart)
 * rather than 2: a row whose 4-row tile (rows 0..3, 4..7: the kernel's tiles were 4 rows before) would
 * have had at most 2 rows, where the 2 chains wait on the vdpbf16ps latency. Kept per 4-row half so that
 * every row gets the same bits as it did from 4-row tiles: 5 rows are rows 0..3 on 2 chains and row 4
 * on 4. */
static inline int row_splits(int rows, int r) {
    return r < 4 ? rows <= 2 : rows <= 6;
}

/* One K pair kp into the chains of every row: chain 0 / 1 (the two vectors), or 2 / 3 for an odd pair of
 * a row that splits. */
static inline __attribute__((always_inline)) void step(const uint8_t *at, const byte_tables *bt, int rows,
                                                       const uint8_t *const *row, int64_t kp, __m512 acc[][4],
                                                       int odd) {
    _mm_prefetch((const char *)at + PREFETCH_AHEAD, _MM_HINT_T0);
    __m512i w[2];
    decode_fp8(_mm512_load_si512(at), bt, w);
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) {
        int first = odd && row_splits(rows, r) ? 2 : 0;
        acc[r][first] = dpbf16_bcst(acc[r][first], w[0], row[r] + 4 * kp);
        acc[r][first + 1] = dpbf16_bcst(acc[r][first + 1], w[1], row[r] + 4 * kp);
    }
}

static inline __attribute__((always_inline)) void small_tile(const mm_ukernel_args *p, int rows) {
    byte_tables bt;
    tables_make(p->w_dtype, &bt);
    __m512i idx[2];
    for (int v = 0; v < 2; v++) {
        _Alignas(64) int32_t cols[16];
        for (int j = 0; j < 16; j++) cols[j] = lane_column(v, j);
        idx[v] = _mm512_load_si512(cols);
    }
    const uint8_t *row[MR];
    __m512 sum[MR][2];
    float *partial = p->partial;
    for (int r = 0; r < rows; r++) {
        row[r] = p->a + r * p->a_stride;
        for (int v = 0; v < 2; v++)
            sum[r][v] = p->first ? _mm512_setzero_ps() : _mm512_loadu_ps(partial + (r * 2 + v) * 16);
    }
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    for (int64_t kp0 = first_pair; kp0 < end_pair; kp0 += 16) {
        int64_t kb = kp0 / 16, kp_end = kp0 + 16 < end_pair ? kp0 + 16 : end_pair;
        /* The block's weight scales in accumulator order. */
        const uint8_t *e8m0 = p->b_mx_e8m0 + kb * MM_GEMM_NR;
        __m512 lo = panel_e8m0_f32(e8m0), hi = panel_e8m0_f32(e8m0 + 16);
        __m512 scale[2] = {_mm512_permutex2var_ps(lo, idx[0], hi), _mm512_permutex2var_ps(lo, idx[1], hi)};
        __m512 acc[MR][4];
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
        const uint8_t *at = p->b + kp0 * 64;
        int64_t kp = kp0;
        /* Two pairs per iteration, so that the chain indices are constants (registers, not memory). */
        for (; kp + 2 <= kp_end; kp += 2, at += 128) {
            step(at, &bt, rows, row, kp, acc, 0);
            step(at + 64, &bt, rows, row, kp + 1, acc, 1);
        }
        if (kp < kp_end) step(at, &bt, rows, row, kp, acc, 0);
        for (int r = 0; r < rows; r++)
            for (int v = 0; v < 2; v++)
                sum[r][v] = _mm512_fmadd_ps(_mm512_add_ps(acc[r][v], acc[r][v + 2]), scale[v], sum[r][v]);
    }
    if (!p->last) {
        for (int r = 0; r < rows; r++)
            for (int v = 0; v < 2; v++) _mm512_storeu_ps(partial + (r * 2 + v) * 16, sum[r][v]);
        return;
    }
    /* Back to column order. */
    for (int r = 0; r < rows; r++) {
        _Alignas(64) float lanes[2][16];
        float out[MM_GEMM_NR];
        for (int v = 0; v < 2; v++) _mm512_store_ps(lanes[v], sum[r][v]);
        for (int v = 0; v < 2; v++)
            for (int j = 0; j < 16; j++) out[lane_column(v, j)] = lanes[v][j];
        memcpy(p->c + r * p->ldc, out, (size_t)p->n * sizeof(float));
    }
}

void mm_ukernel_mx_small_avx512(const mm_ukernel_args *p) {
    switch (p->m) {
    case 1: small_tile(p, 1); break;
    case 2: small_tile(p, 2); break;
    case 3: small_tile(p, 3); break;
    case 4: small_tile(p, 4); break;
    case 5: small_tile(p, 5); break;
    case 6: small_tile(p, 6); break;
    case 7: small_tile(p, 7); break;
    default: small_tile(p, MR); break;
    }
}
