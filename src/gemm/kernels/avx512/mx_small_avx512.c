/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/mx_small_avx512.c: the few-rows MX kernel (FP8 or FP4 weights, 1..4 rows), for
 * decode-sized groups, whose speed is that of streaming the packed weights once.
 *
 * The general MX kernel (mx_avx512.c) writes every panel block to a BF16 buffer with the weight scales
 * folded in (a dozen vector operations per 32 codes), which is what bounds a 1-row group. Here the
 * codes go straight from the packed panel to BF16 registers without their scale, by byte lookups:
 *   FP8: two vpermt2b over 128-byte tables give the high and low bytes of the BF16 pattern of the
 *        magnitude (index = the code's low 7 bits), the sign is or-ed into the high byte;
 *   FP4: two vpshufb over 16-entry tables (sign included) per nibble vector;
 * and vpunpck{l,h}bw interleaves low and high bytes into BF16 words. The interleave works inside each
 * 128-bit lane, so the dot products accumulate the 32 columns in a permuted order (and, for FP4, two K
 * pairs side by side), which is undone once per tile when the results are written.
 * The E8M0 weight scale is applied per K block of 32: the block's products a' * q (a' the prepared BF16
 * activation with its own scale, q the unscaled weight) are summed in F32 from zero, then the block sum
 * is multiplied by 2^(b-127) (exact) and added to the running sum. Blocks whose scales leave the range
 * where every scaled value is a normal BF16 (see mx_avx512.c; NaN scale 0xFF included) are decoded with
 * the scale folded in, as the general kernel's slow path does, and added to the running sum directly.
 *
 * Tolerance against the reference kernel (ref_mx.c): the same exact products, summed in F32 in another
 * order (per block, and pairs / lanes grouped), so |c - c_ref| <= 2 K 2^-24 sum_k |a'_k w'_k|; beyond
 * the F32 range an Inf of the reference may be a NaN here or the reverse (a block sum overflows where
 * single products do not, or the other way), and products below 2^-126 may be flushed. */
/* vpermt2b (AVX512_VBMI): the registry offers this kernel only when the CPU has it. */
#pragma GCC target("avx512vbmi")
#include <immintrin.h>
#include <string.h>

#include "format/decode_tables.h"
#include "format/format_table.h"
#include "gemm/kernels/kernels.h"

/* Accumulator vectors per row: FP8 2 (16 columns each), FP4 4 (8 columns x 2 K pairs each). */
#define MAX_VECS 4

/* The BF16 tables of one weight format: [0..1] high bytes, [2..3] low bytes, of the 128 magnitudes
 * (FP8) or of the 16 signed codes repeated in every 128-bit lane (FP4); and the safe scale range. */
typedef struct byte_tables {
    __m512i t[4];
    uint8_t s_min, s_max;
} byte_tables;

static void tables_make(mm_dtype w_dtype, byte_tables *bt) {
    const uint16_t *lut = mm_format_lut_bf16(w_dtype);
    _Alignas(64) uint8_t bytes[4][64];
    for (int i = 0; i < 128; i++) {
        uint16_t v = mm_format_is_nibble(w_dtype) ? lut[i & 15] : lut[i];
        bytes[i / 64][i % 64] = (uint8_t)(v >> 8);
        bytes[2 + i / 64][i % 64] = (uint8_t)v;
    }
    for (int i = 0; i < 4; i++) bt->t[i] = _mm512_load_si512(bytes[i]);
    /* As in mx_avx512.c: the scale bytes for which every finite nonzero scaled value is a normal BF16. */
    bt->s_min = (uint8_t)mm_format_mx_bf16_scale_lowest(w_dtype);
    bt->s_max = (uint8_t)mm_format_mx_bf16_scale_highest(w_dtype);
}

/* Panel column held by dword lane j of accumulator vector v. FP8: vector 0 = unpacklo of the 64 code
 * bytes (bytes 0..7 of each 128-bit lane = columns 8L..8L+3), vector 1 = unpackhi (8L+4..8L+7). FP4:
 * vectors 0/1 as FP8 for the low nibbles (columns 0..15, lanes 0..7 one K pair and 8..15 the next),
 * 2/3 for the high nibbles (columns 16..31). */
static inline int lane_column(int is_fp4, int v, int j) {
    if (!is_fp4) return 8 * (j / 4) + 4 * v + j % 4;
    return 16 * (v / 2) + 8 * ((j / 4) % 2) + 4 * (v % 2) + j % 4;
}

/* Per-lane F32 scales of each accumulator vector for one K block. */
static inline void block_scales(const float *scales32, const __m512i idx[MAX_VECS], int n_vecs,
                                __m512 out[MAX_VECS]) {
    __m512 lo = _mm512_loadu_ps(scales32), hi = _mm512_loadu_ps(scales32 + 16);
    for (int v = 0; v < n_vecs; v++) out[v] = _mm512_permutex2var_ps(lo, idx[v], hi);
}

/* FP8 codes of one K pair (64 bytes) -> two BF16 vectors in accumulator order, unscaled. */
static inline void decode_fp8(__m512i codes, const byte_tables *bt, __m512i w[2]) {
    __m512i hi = _mm512_permutex2var_epi8(bt->t[0], codes, bt->t[1]);
    __m512i lo = _mm512_permutex2var_epi8(bt->t[2], codes, bt->t[3]);
    hi = _mm512_ternarylogic_epi32(hi, codes, _mm512_set1_epi8((char)0x80), 0xF8); /* hi | (codes & 0x80) */
    w[0] = _mm512_unpacklo_epi8(lo, hi);
    w[1] = _mm512_unpackhi_epi8(lo, hi);
}

/* FP4 codes of two K pairs (64 bytes) -> four BF16 vectors in accumulator order, unscaled. */
static inline void decode_fp4(__m512i bytes, const byte_tables *bt, __m512i w[4]) {
    __m512i nib[2] = {_mm512_and_si512(bytes, _mm512_set1_epi8(0x0F)),
                      _mm512_and_si512(_mm512_srli_epi16(bytes, 4), _mm512_set1_epi8(0x0F))};
    for (int h = 0; h < 2; h++) {
        __m512i hi = _mm512_shuffle_epi8(bt->t[0], nib[h]), lo = _mm512_shuffle_epi8(bt->t[2], nib[h]);
        w[2 * h] = _mm512_unpacklo_epi8(lo, hi);
        w[2 * h + 1] = _mm512_unpackhi_epi8(lo, hi);
    }
}

/* Slow path: the codes already spread to 16-bit words in accumulator order -> BF16 of code * scale. */
static inline __m512i decode_scaled(__m512i code_words, const float *lut_f32, __m512 scale_lo,
                                    __m512 scale_hi) {
    __m512 v[2];
    for (int half = 0; half < 2; half++) {
        __m256i words = half ? _mm512_extracti64x4_epi64(code_words, 1) : _mm512_castsi512_si256(code_words);
        __m512 decoded = _mm512_i32gather_ps(_mm512_cvtepu16_epi32(words), lut_f32, 4);
        v[half] = _mm512_mul_ps(decoded, half ? scale_hi : scale_lo);
    }
    return (__m512i)_mm512_cvtne2ps_pbh(v[1], v[0]);
}

/* Scales of the two 16-word halves of a BF16 vector whose dword lane j has scale s[j]: word t of half h
 * belongs to dword 8h + t/2. */
static inline void word_scales(__m512 s, __m512 out[2]) {
    const __m512i dup_lo = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    out[0] = _mm512_permutexvar_ps(dup_lo, s);
    out[1] = _mm512_permutexvar_ps(_mm512_add_epi32(dup_lo, _mm512_set1_epi32(8)), s);
}

/* Activation dwords (BF16 pairs) for one step: FP8 one pair in every lane; FP4 pair kp in lanes 0..7
 * and pair kp + 1 in lanes 8..15 (0 when that pair is past the block: `two` = 0). */
static inline __m512bh activation(const uint8_t *row, int64_t kp, int is_fp4, int two) {
    uint32_t v[2] = {0, 0};
    memcpy(&v[0], row + 4 * kp, 4);
    if (!is_fp4) return (__m512bh)_mm512_set1_epi32((int)v[0]);
    if (two) memcpy(&v[1], row + 4 * kp + 4, 4);
    return (__m512bh)_mm512_inserti64x4(_mm512_set1_epi32((int)v[0]), _mm256_set1_epi32((int)v[1]), 1);
}

static inline __attribute__((always_inline)) void small_tile(const mm_ukernel_args *p, int rows, int is_fp4) {
    const int n_vecs = is_fp4 ? 4 : 2, pairs_per_step = is_fp4 ? 2 : 1;
    byte_tables bt;
    tables_make(p->w_dtype, &bt);
    const float *lut_f32 = mm_format_lut_f32(p->w_dtype);
    __m512i idx[MAX_VECS];
    for (int v = 0; v < n_vecs; v++) {
        _Alignas(64) int32_t cols[16];
        for (int j = 0; j < 16; j++) cols[j] = lane_column(is_fp4, v, j);
        idx[v] = _mm512_load_si512(cols);
    }
    const uint8_t *row[4];
    __m512 acc[4][MAX_VECS];
    float *partial = p->partial;
    for (int r = 0; r < rows; r++) {
        row[r] = p->a + r * p->a_stride;
        for (int v = 0; v < n_vecs; v++)
            acc[r][v] = p->first ? _mm512_setzero_ps() : _mm512_loadu_ps(partial + (r * MAX_VECS + v) * 16);
    }
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    for (int64_t kp0 = first_pair; kp0 < end_pair; kp0 += 16) {
        int64_t kb = kp0 / 16, kp_end = kp0 + 16 < end_pair ? kp0 + 16 : end_pair;
        const uint8_t *e8m0 = p->b_mx_e8m0 + kb * MM_GEMM_NR;
        __m256i s = _mm256_loadu_si256((const __m256i *)(const void *)e8m0);
        int safe = _mm256_cmplt_epu8_mask(s, _mm256_set1_epi8((char)bt.s_min)) == 0 &&
                   _mm256_cmpgt_epu8_mask(s, _mm256_set1_epi8((char)bt.s_max)) == 0;
        __m512 scale[MAX_VECS];
        block_scales(p->b_mx_scale + kb * MM_GEMM_NR, idx, n_vecs, scale);
        __m512 blk[4][MAX_VECS];
        for (int r = 0; r < rows; r++)
            for (int v = 0; v < n_vecs; v++) blk[r][v] = _mm512_setzero_ps();
        for (int64_t kp = kp0; kp < kp_end; kp += pairs_per_step) {
            int two = kp + 1 < kp_end;
            const uint8_t *at = p->b + kp * (is_fp4 ? 32 : 64);
            _mm_prefetch((const char *)(at + 1024), _MM_HINT_T0);
            __m512i codes =
                is_fp4 && !two ? _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)at))
                               : _mm512_loadu_si512(at);
            __m512i w[MAX_VECS];
            if (safe) {
                if (is_fp4)
                    decode_fp4(codes, &bt, w);
                else
                    decode_fp8(codes, &bt, w);
            } else {
                /* Codes as words in accumulator order, then decoded with their scales. */
                __m512i words[MAX_VECS];
                if (is_fp4) {
                    __m512i nib[2] = {_mm512_and_si512(codes, _mm512_set1_epi8(0x0F)),
                                      _mm512_and_si512(_mm512_srli_epi16(codes, 4), _mm512_set1_epi8(0x0F))};
                    for (int h = 0; h < 2; h++) {
                        words[2 * h] = _mm512_unpacklo_epi8(nib[h], _mm512_setzero_si512());
                        words[2 * h + 1] = _mm512_unpackhi_epi8(nib[h], _mm512_setzero_si512());
                    }
                } else {
                    words[0] = _mm512_unpacklo_epi8(codes, _mm512_setzero_si512());
                    words[1] = _mm512_unpackhi_epi8(codes, _mm512_setzero_si512());
                }
                for (int v = 0; v < n_vecs; v++) {
                    __m512 ws[2];
                    word_scales(scale[v], ws);
                    w[v] = decode_scaled(words[v], lut_f32, ws[0], ws[1]);
                }
            }
            for (int r = 0; r < rows; r++) {
                __m512bh a = activation(row[r], kp, is_fp4, two);
                for (int v = 0; v < n_vecs; v++) blk[r][v] = _mm512_dpbf16_ps(blk[r][v], a, (__m512bh)w[v]);
            }
        }
        for (int r = 0; r < rows; r++)
            for (int v = 0; v < n_vecs; v++)
                acc[r][v] = safe ? _mm512_fmadd_ps(blk[r][v], scale[v], acc[r][v])
                                 : _mm512_add_ps(acc[r][v], blk[r][v]);
    }
    if (!p->last) {
        for (int r = 0; r < rows; r++)
            for (int v = 0; v < n_vecs; v++) _mm512_storeu_ps(partial + (r * MAX_VECS + v) * 16, acc[r][v]);
        return;
    }
    /* Back to column order; FP4 adds its two K-pair halves (lanes j and j + 8 hold the same column). */
    for (int r = 0; r < rows; r++) {
        _Alignas(64) float lanes[MAX_VECS][16];
        float out[MM_GEMM_NR] = {0};
        for (int v = 0; v < n_vecs; v++) _mm512_store_ps(lanes[v], acc[r][v]);
        for (int v = 0; v < n_vecs; v++)
            for (int j = 0; j < (is_fp4 ? 8 : 16); j++)
                out[lane_column(is_fp4, v, j)] = is_fp4 ? lanes[v][j] + lanes[v][j + 8] : lanes[v][j];
        memcpy(p->c + r * p->ldc, out, (size_t)p->n * sizeof(float));
    }
}

void mm_ukernel_mx_small_avx512(const mm_ukernel_args *p) {
    int is_fp4 = mm_format_is_nibble(p->w_dtype);
    switch (p->m * 2 + is_fp4) {
    case 2: small_tile(p, 1, 0); break;
    case 3: small_tile(p, 1, 1); break;
    case 4: small_tile(p, 2, 0); break;
    case 5: small_tile(p, 2, 1); break;
    case 6: small_tile(p, 3, 0); break;
    case 7: small_tile(p, 3, 1); break;
    case 8: small_tile(p, 4, 0); break;
    default: small_tile(p, 4, 1); break;
    }
}
