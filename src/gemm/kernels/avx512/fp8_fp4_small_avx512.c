/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/fp8_fp4_small_avx512.c: the few-rows MXFP8 x MXFP4 kernel (FP8 activations, FP4
 * weights; 1..4 rows x 32 columns), for decode-sized groups whose speed should be that of streaming the
 * packed FP4 weights once.
 *
 * The activations are prepared once per GEMM call to BF16 a' (code times scale, as for every MX kernel),
 * with each quad of K stored as (k, k+2, k+1, k+3). That order lets the weights decode with word
 * permutes alone: one vpermw puts the words of K pairs kp and kp+1 of each column side by side (see
 * fp4_int_small_avx512.c), so dword d of the result holds column d's codes of K 4j..4j+3 at bits 0-3
 * (k), 4-7 (column d+16, k), 8-11 (k+1), 12-15 (column d+16, k+1) of its first word and the same for
 * k+2, k+3 in its second. vpermw over a 32-entry BF16 table (the 16 FP4 values twice: it reads 5 index
 * bits) of that vector, and of it shifted right by 4, 8 and 12, gives BF16 pairs (k, k+2) and (k+1, k+3)
 * of columns 0..15 and 16..31, which vdpbf16ps multiplies with activation dwords broadcast straight
 * from the prepared row: 8 vector operations per 64 code bytes, where byte lookups and unpacks took 11,
 * and no activation vector is built per step.
 * The E8M0 weight scale is applied per K block of 32: the block's products a' * q (q the unscaled FP4
 * weight, exact in BF16 whatever the scale) are summed in F32 from zero, multiplied by the F32 scale
 * 2^(b-127) and added to the running sum. That multiply is exact unless the result leaves the normal F32
 * range (it then rounds to a subnormal, below 2^-126), and the NaN scale 0xFF makes the column NaN.
 * Limit: the block sum is formed before the weight scale, so activations a' beyond about 2^120 (E8M0
 * activation scale bytes near the top of their range) can overflow it where the reference, which
 * scales w' first, stays finite: the result is then Inf or NaN.
 * Tolerance against the reference kernel (ref_mx.c): the same exact products summed in F32 in another
 * order, so |c - c_ref| <= 2 K 2^-24 sum_k |a'_k w'_k|; activations a' below 2^-126 are flushed to zero
 * (vdpbf16ps reads BF16 subnormals as zero), and beyond the F32 range an Inf of the reference may be a
 * NaN here or the reverse. */
#include <immintrin.h>
#include <string.h>

#include "format/decode_tables.h"
#include "format/format_table.h"
#include "gemm/kernels/avx512/panel_codes_avx512.h"
#include "gemm/kernels/avx512/tile_store_avx512.h"
#include "gemm/kernels/kernels.h"

#define MR MM_GEMM_FP8_FP4_SMALL_MR
/* Bytes of panel prefetched ahead of the loads (4 MX blocks of 32 columns). */
#define PREFETCH_AHEAD 2048

static inline int64_t k_quads(int64_t k) {
    return (k + 3) / 4 * 4;
}

int64_t mm_gemm_fp8_fp4_prepared_row_bytes(int64_t k) {
    return k_quads(k) * 2;
}

void mm_gemm_fp8_fp4_prepare_row(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales, int64_t k,
                                 uint16_t *out) {
    mm_gemm_mx_row_to_bf16_avx512(a_dtype, row, mx_scales, k, out);
    for (int64_t i = k; i < k_quads(k); i++) out[i] = 0;
    for (int64_t q = 0; q < k; q += 4) {
        uint16_t second = out[q + 1];
        out[q + 1] = out[q + 2];
        out[q + 2] = second;
    }
}

/* acc + dot(BF16 pairs, the BF16 pair at `pair` broadcast), in inline asm so that the broadcast comes
 * from memory ({1to16}) and GCC does not copy the accumulators (see i4_small_avx512.c). The prepared
 * rows are input only: nothing in the kernel writes them. */
static inline __m512 dpbf16_bcst(__m512 acc, __m512i weights, const uint16_t *pair) {
    __asm__("vdpbf16ps (%2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(weights), "r"(pair));
    return acc;
}

/* One step: K 4i..4i+3 of the 32 columns (64 packed bytes at `at`) into the chains of every row
 * (columns 0..15 / 16..31 times pairs (k, k+2) / (k+1, k+3): acc[r][first + 0..3]). */
static inline __attribute__((always_inline)) void step(const uint8_t *at, __m512i table, int rows,
                                                       const uint16_t *const *row, int64_t k, __m512 acc[][8],
                                                       int first) {
    _mm_prefetch((const char *)at + PREFETCH_AHEAD, _MM_HINT_T0);
    __m512i x = panel_fp4_quads(at);
    __m512i w[4] = {_mm512_permutexvar_epi16(x, table),
                    _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 4), table),
                    _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 8), table),
                    _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 12), table)};
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        acc[r][first + 0] = dpbf16_bcst(acc[r][first + 0], w[0], row[r] + k);
        acc[r][first + 1] = dpbf16_bcst(acc[r][first + 1], w[1], row[r] + k);
        acc[r][first + 2] = dpbf16_bcst(acc[r][first + 2], w[2], row[r] + k + 2);
        acc[r][first + 3] = dpbf16_bcst(acc[r][first + 3], w[3], row[r] + k + 2);
    }
}

static inline __attribute__((always_inline)) void small_tile(const mm_ukernel_args *p, int rows) {
    /* Chains per row: 4 (columns x pair order), 8 (also even / odd steps) up to 2 rows. */
    const int split = rows <= 2;
    const uint16_t *row[MR];
    for (int r = 0; r < rows; r++) row[r] = (const uint16_t *)(const void *)(p->a + r * p->a_stride);
    _Alignas(64) float sum[MR][MM_GEMM_NR];
    tile_f32_start(p, rows, sum);
    const uint16_t *lut = mm_format_lut_bf16(MM_DTYPE_FP4_E2M1);
    _Alignas(64) uint16_t words[32];
    for (int j = 0; j < 32; j++) words[j] = lut[j & 15];
    const __m512i table = _mm512_load_si512(words);
    for (int64_t k0 = p->k_begin; k0 < p->k_end; k0 += 32) {
        int64_t b = k0 / 32, k1 = k0 + 32 < p->k_end ? k0 + 32 : p->k_end;
        __m512 acc[MR][8];
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < 8; c++) acc[r][c] = _mm512_setzero_ps();
        int64_t steps = (k1 - k0 + 3) / 4, i = 0;
        const uint8_t *at = p->b + 16 * k0; /* 32 bytes per K pair */
        /* Two steps per iteration, so that the chain indices are constants (registers, not memory). */
        for (; i + 2 <= steps; i += 2, at += 128) {
            step(at, table, rows, row, k0 + 4 * i, acc, 0);
            step(at + 64, table, rows, row, k0 + 4 * i + 4, acc, split ? 4 : 0);
        }
        if (i < steps) step(at, table, rows, row, k0 + 4 * i, acc, 0);
        const __m512 w_scale[2] = {panel_e8m0_f32(p->b_mx_e8m0 + b * MM_GEMM_NR),
                                   panel_e8m0_f32(p->b_mx_e8m0 + b * MM_GEMM_NR + 16)};
        for (int r = 0; r < rows; r++)
            for (int h = 0; h < 2; h++) {
                __m512 block = _mm512_add_ps(_mm512_add_ps(acc[r][h], acc[r][h + 2]),
                                             _mm512_add_ps(acc[r][h + 4], acc[r][h + 6]));
                __m512 running = _mm512_fmadd_ps(block, w_scale[h], _mm512_load_ps(sum[r] + 16 * h));
                _mm512_store_ps(sum[r] + 16 * h, running);
            }
    }
    tile_f32_finish(p, rows, sum);
}

void mm_ukernel_fp8_fp4_small_avx512(const mm_ukernel_args *p) {
    switch (p->m) {
    case 1: small_tile(p, 1); break;
    case 2: small_tile(p, 2); break;
    case 3: small_tile(p, 3); break;
    default: small_tile(p, MR); break;
    }
}
