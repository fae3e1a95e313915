/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/fp4_int_small_avx512.c: the few-rows MXFP4 x MXFP4 kernel (1..8 rows x 32
 * columns) in exact integer arithmetic, for decode-sized groups whose speed should be that of streaming
 * the packed FP4 weights once.
 *
 * Twice an E2M1 value is an integer in [-12, 12], so inside one MX block (32 K values sharing one
 * activation and one weight scale) the dot product is an integer: sum_k (2a_k)(2w_k) = 4 sum a_k w_k,
 * |.| <= 32 * 144. vpdpbusd computes it 64 products per instruction: the weights take its unsigned side
 * as u = 2w + 12 in [0, 24] (one vpshufb per 64 codes, the table built from the format's decode table),
 * the activations its signed side as s = 2a (decoded once per call into a small buffer), and
 * 12 * sum_k s_k per (row, block) is subtracted at the block's end. The exact block integer R then
 * enters the F32 sum once: acc += R * (2^(ew-127) * 2^(ea-127) / 4), a product that is exact while the
 * block's scales keep every value normal (below), so the only rounding is one addition per block and
 * column, where the general kernels round one product and one addition per K.
 * Layout: the packed FP4 panel holds pair k/2 of column c in the 16-bit word c % 16 of the pair's 32
 * bytes (low nibbles columns 0..15, high nibbles 16..31); one vpermw puts the words of pairs kp and kp+1
 * of each column side by side, so "and 0x0F" / ">> 4" give the quads (K 4j..4j+3) of columns 0..15 /
 * 16..31 in dword order, as vpdpbusd wants them.
 * Scales: a block is computed so when every scale byte of the tile's rows (ea) and of the panel's valid
 * columns (ew) satisfies ea in [3, 252], ew in [1, 252] and 130 <= ea + ew <= 369: then a' and w' are
 * finite in F32, every nonzero product a' * w' (>= 2^(ea+ew-256)) is normal, and |R| * 2^(ea+ew-256)
 * cannot overflow. Other blocks (tiny, huge or NaN scales) are computed like the reference kernel
 * (ref_mx.c): F32 products of the decoded values added in K order.
 * Tolerance against the reference: the same exact products, summed in another order with fewer
 * roundings, so |c - c_ref| <= 2 K 2^-24 sum_k |a'_k w'_k| (docs/gemm.md); the slow blocks add exactly
 * as the reference does. */
#include <immintrin.h>
#include <string.h>

#include "format/decode_tables.h"
#include "format/format_table.h"
#include "gemm/kernels/avx512/panel_codes_avx512.h"
#include "gemm/kernels/avx512/tile_store_avx512.h"
#include "gemm/kernels/kernels.h"

#define MR              MM_GEMM_FP4_SMALL_MR
#define KC              MM_GEMM_FP4_SMALL_KC
#define BLOCKS_PER_CALL (KC / 32)
/* Bytes of panel prefetched ahead of the loads (4 MX blocks of 32 columns). */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 2048
#endif
/* The fast range of the scale bytes (see the file comment). */
#define SCALE_MAX        252
#define ACT_SCALE_MIN    3
#define WEIGHT_SCALE_MIN 1
#define SUM_MIN          130
#define SUM_MAX          369
/* u = 2w + OFFSET is the unsigned weight operand. */
#define OFFSET 12

/* acc + dot(u8 weights, s8 quad broadcast from memory), in inline asm for the reasons given in
 * i4_small_avx512.c (GCC 12 copies accumulators of the intrinsic; an "m" operand makes it spill them).
 * The quads are the prepared rows, input only: nothing in the kernel writes them. */
static inline __m512i dpbusd_bcst(__m512i acc, __m512i weights, const int8_t *quad) {
    __asm__("vpdpbusd (%2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(weights), "r"(quad));
    return acc;
}

/* The prepared row (once per GEMM call, by mm_gemm_fp4_int_prepare_row): s = 2a as int8 for K
 * [0, k128) (0 past k), k128 = k rounded up to 128; then per MX block the correction OFFSET * sum s
 * (int32), the F32 factor 2^(ea-127) / 4 and the scale byte ea. */
typedef struct prepared_row {
    const int8_t *s;
    const int32_t *correction;
    const float *scale_quarter;
    const uint8_t *scale;
} prepared_row;

static inline int64_t k_rounded(int64_t k) {
    return (k + 127) / 128 * 128;
}

static inline prepared_row prepared_row_at(const uint8_t *row, int64_t k) {
    int64_t blocks = (k + 31) / 32;
    prepared_row pr;
    pr.s = (const int8_t *)row;
    pr.correction = (const int32_t *)(const void *)(row + k_rounded(k));
    pr.scale_quarter = (const float *)(const void *)(pr.correction + blocks);
    pr.scale = (const uint8_t *)(pr.scale_quarter + blocks);
    return pr;
}

int64_t mm_gemm_fp4_int_prepared_row_bytes(int64_t k) {
    return k_rounded(k) + (k + 31) / 32 * 9;
}

/* A vpshufb table (16 entries in every 128-bit lane) of 2 * value + offset over the 16 FP4 codes. */
static __m512i code_table(int offset) {
    const float *lut = mm_format_lut_f32(MM_DTYPE_FP4_E2M1);
    _Alignas(64) int8_t t[64];
    for (int i = 0; i < 64; i++) t[i] = (int8_t)((int)(2.0f * lut[i & 15]) + offset);
    return _mm512_load_si512(t);
}

void mm_gemm_fp4_int_prepare_row(mm_dtype a_dtype, const uint8_t *raw, const uint8_t *mx_scales, int64_t k,
                                 uint16_t *out) {
    (void)a_dtype; /* registered for FP4 activations only */
    uint8_t *dst = (uint8_t *)out;
    prepared_row pr = prepared_row_at(dst, k);
    int32_t *correction = (int32_t *)(uintptr_t)pr.correction;
    const __m512i s_table = code_table(0), nibble = _mm512_set1_epi8(0x0F),
                  flip = _mm512_set1_epi8((char)0x80);
    const __m512i order_lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    const __m512i order_hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    int64_t raw_bytes = (k + 1) / 2, blocks = (k + 31) / 32;
    for (int64_t off = 0; off < k; off += 128) {
        int64_t left = raw_bytes - off / 2;
        __mmask64 load_mask = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
        __m512i x = _mm512_maskz_loadu_epi8(load_mask, raw + off / 2);
        __m512i lo = _mm512_shuffle_epi8(s_table, _mm512_and_si512(x, nibble));
        __m512i hi = _mm512_shuffle_epi8(s_table, _mm512_and_si512(_mm512_srli_epi16(x, 4), nibble));
        /* Byte i holds K 2i (low nibble) and 2i + 1: interleave, then put each lane's halves in order. */
        __m512i a = _mm512_unpacklo_epi8(lo, hi), b = _mm512_unpackhi_epi8(lo, hi);
        __m512i half[2] = {_mm512_permutex2var_epi64(a, order_lo, b),
                           _mm512_permutex2var_epi64(a, order_hi, b)};
        for (int h = 0; h < 2; h++) {
            int64_t valid = k - off - 64 * h; /* K values of this half before k */
            if (valid <= 0) half[h] = _mm512_setzero_si512();
            if (valid > 0 && valid < 64)
                half[h] = _mm512_maskz_mov_epi8(((__mmask64)1 << valid) - 1, half[h]);
            _mm512_storeu_si512(dst + off + 64 * h, half[h]);
            /* sum (s + 128) per 8 bytes; a block is 4 of them. */
            _Alignas(64) uint64_t sums[8];
            _mm512_store_si512(sums,
                               _mm512_sad_epu8(_mm512_xor_si512(half[h], flip), _mm512_setzero_si512()));
            for (int q = 0; q < 2; q++) {
                int64_t blk = (off + 64 * h) / 32 + q;
                if (blk >= blocks) break;
                int64_t sum =
                    (int64_t)(sums[4 * q] + sums[4 * q + 1] + sums[4 * q + 2] + sums[4 * q + 3]) - 32 * 128;
                correction[blk] = (int32_t)(OFFSET * sum);
            }
        }
    }
    const float *e8m0_f32 = mm_format_lut_f32(MM_DTYPE_E8M0);
    float *scale_quarter = (float *)(uintptr_t)pr.scale_quarter;
    uint8_t *scale = (uint8_t *)(uintptr_t)pr.scale;
    for (int64_t blk = 0; blk < blocks; blk++) {
        uint8_t b = mx_scales[blk];
        /* An all-zero block (the MX quantizer gives it scale byte 0, outside the fast range) contributes
         * +-0 whatever its scale, except NaN: give it a neutral scale, so that a zero row does not send
         * its whole tile to the reference arithmetic. */
        __m256i values = _mm256_loadu_si256((const __m256i *)(const void *)(dst + 32 * blk));
        if (b != 0xFF && _mm256_testz_si256(values, values)) b = 127;
        scale_quarter[blk] = e8m0_f32[b] * 0.25f;
        scale[blk] = b;
    }
}

/* The smallest and largest activation scale byte of the tile's rows per block of the call. */
typedef struct tile_scales {
    _Alignas(64) uint8_t min[BLOCKS_PER_CALL], max[BLOCKS_PER_CALL];
} tile_scales;

static void tile_scales_of(const prepared_row *rows, int n_rows, int64_t b0, int64_t blocks,
                           tile_scales *ts) {
    __mmask64 mask = blocks >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << blocks) - 1);
    __m512i lo = _mm512_set1_epi8((char)0xFF), hi = _mm512_setzero_si512();
    for (int r = 0; r < n_rows; r++) {
        __m512i v = _mm512_maskz_loadu_epi8(mask, rows[r].scale + b0);
        lo = _mm512_min_epu8(lo, v);
        hi = _mm512_max_epu8(hi, v);
    }
    _mm512_store_si512(ts->min, lo);
    _mm512_store_si512(ts->max, hi);
}

/* Whether block blk of the call is in the fast range for the tile's rows and the panel's valid columns. */
static inline int block_fast(const tile_scales *ts, int64_t blk, __m256i weight_scales, __mmask32 columns) {
    int a_min = ts->min[blk], a_max = ts->max[blk];
    if (a_min < ACT_SCALE_MIN || a_max > SCALE_MAX) return 0;
    int lo = SUM_MIN - a_min > WEIGHT_SCALE_MIN ? SUM_MIN - a_min : WEIGHT_SCALE_MIN;
    int hi = SUM_MAX - a_max < SCALE_MAX ? SUM_MAX - a_max : SCALE_MAX;
    __mmask32 out = _mm256_mask_cmplt_epu8_mask(columns, weight_scales, _mm256_set1_epi8((char)lo)) |
                    _mm256_mask_cmpgt_epu8_mask(columns, weight_scales, _mm256_set1_epi8((char)hi));
    return out == 0;
}

/* A block outside the fast range, as the reference computes it: acc[r][c] += a' * w' in K order, with
 * a' = (s / 2) * 2^(ea-127) (s / 2 is the E2M1 value, exactly). */
static void block_reference(const mm_ukernel_args *p, const prepared_row *rows, int n_rows, int64_t k0,
                            int64_t k1, float (*acc)[MM_GEMM_NR]) {
    const float *lut = mm_format_lut_f32(MM_DTYPE_FP4_E2M1), *e8m0_f32 = mm_format_lut_f32(MM_DTYPE_E8M0);
    const float *w_scale = p->b_mx_scale + (k0 / 32) * MM_GEMM_NR;
    for (int64_t k = k0; k < k1; k++) {
        float wv[MM_GEMM_NR];
        for (int c = 0; c < MM_GEMM_NR; c++)
            wv[c] = lut[mm_packed_code(MM_DTYPE_FP4_E2M1, p->b, k, c)] * w_scale[c];
        for (int r = 0; r < n_rows; r++) {
            float av = 0.5f * (float)rows[r].s[k] * e8m0_f32[rows[r].scale[k >> 5]];
            for (int c = 0; c < MM_GEMM_NR; c++) {
                /* Two statements: a compiler that contracts within an expression (clang) must not fuse
                 * the product into the addition, which the reference rounds separately. */
                float product = av * wv[c];
                acc[r][c] += product;
            }
        }
    }
}

/* One step: K 4i..4i+3 of the 32 columns (64 packed bytes at `at`) into chains `chain` and `chain + 1`
 * of every row; k: the step's first K. */
static inline __attribute__((always_inline)) void step(const uint8_t *at, __m512i u_table, __m512i nibble,
                                                       int n_rows, const prepared_row *rows, int64_t k,
                                                       __m512i sums[][4], int chain) {
    _mm_prefetch((const char *)at + PREFETCH_AHEAD, _MM_HINT_T0);
    __m512i x = panel_fp4_quads(at);
    __m512i u_lo = _mm512_shuffle_epi8(u_table, _mm512_and_si512(x, nibble));
    __m512i u_hi = _mm512_shuffle_epi8(u_table, _mm512_and_si512(_mm512_srli_epi16(x, 4), nibble));
#pragma GCC unroll 8
    for (int r = 0; r < n_rows; r++) {
        sums[r][chain] = dpbusd_bcst(sums[r][chain], u_lo, rows[r].s + k);
        sums[r][chain + 1] = dpbusd_bcst(sums[r][chain + 1], u_hi, rows[r].s + k);
    }
}

static inline __attribute__((always_inline)) void small_tile(const mm_ukernel_args *p, int n_rows) {
    /* The prepared rows are read by asm that does not declare it (dpbusd_bcst): they were written before
     * this call, and nothing here writes them; the barrier only makes that explicit. */
    __asm__ volatile("" ::: "memory");
    /* Chains per row: 4 (columns 0..15 / 16..31 x even / odd steps) up to 4 rows, else 2. */
    enum { MAX_CHAINS = 4 };
    const int split = n_rows <= 4;
    prepared_row rows[MR];
    for (int r = 0; r < n_rows; r++) rows[r] = prepared_row_at(p->a + r * p->a_stride, p->k);
    int64_t b0 = p->k_begin / 32, blocks = (p->k_end - p->k_begin + 31) / 32;
    tile_scales ts;
    tile_scales_of(rows, n_rows, b0, blocks, &ts);
    _Alignas(64) float acc[MR][MM_GEMM_NR];
    tile_f32_start(p, n_rows, acc);
    const __m512i u_table = code_table(OFFSET), nibble = _mm512_set1_epi8(0x0F);
    const __mmask32 columns = p->n >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << p->n) - 1);
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t b = b0 + blk, k0 = 32 * b, k1 = k0 + 32 < p->k_end ? k0 + 32 : p->k_end;
        __m256i e8m0 = _mm256_loadu_si256((const __m256i *)(const void *)(p->b_mx_e8m0 + b * MM_GEMM_NR));
        if (!block_fast(&ts, blk, e8m0, columns)) {
            block_reference(p, rows, n_rows, k0, k1, acc);
            continue;
        }
        __m512i sums[MR][MAX_CHAINS];
        for (int r = 0; r < n_rows; r++)
            for (int c = 0; c < MAX_CHAINS; c++) sums[r][c] = _mm512_setzero_si512();
        int64_t steps = (k1 - k0 + 3) / 4;
        const uint8_t *at = p->b + 16 * k0; /* 32 bytes per K pair */
        /* Two steps per iteration, so that the chain indices are constants (registers, not memory). */
        int64_t i = 0;
        for (; i + 2 <= steps; i += 2, at += 128) {
            step(at, u_table, nibble, n_rows, rows, k0 + 4 * i, sums, 0);
            step(at + 64, u_table, nibble, n_rows, rows, k0 + 4 * i + 4, sums, split ? 2 : 0);
        }
        if (i < steps) step(at, u_table, nibble, n_rows, rows, k0 + 4 * i, sums, 0);
        /* Weight scales 2^(ew-127) from the E8M0 bytes (ew >= 1 here, so a normal F32 exponent). */
        __m512 w_scale[2] = {
            _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(e8m0)), 23)),
            _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(e8m0, 1)), 23))};
        for (int r = 0; r < n_rows; r++) {
            __m512i correction = _mm512_set1_epi32(rows[r].correction[b]);
            __m512 factor = _mm512_set1_ps(rows[r].scale_quarter[b]);
            for (int h = 0; h < 2; h++) {
                __m512i exact = _mm512_sub_epi32(_mm512_add_epi32(sums[r][h], sums[r][h + 2]), correction);
                __m512 running = _mm512_load_ps(acc[r] + 16 * h);
                running =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(w_scale[h], factor), running);
                _mm512_store_ps(acc[r] + 16 * h, running);
            }
        }
    }
    tile_f32_finish(p, n_rows, acc);
}

void mm_ukernel_fp4_fp4_small_avx512(const mm_ukernel_args *p) {
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
