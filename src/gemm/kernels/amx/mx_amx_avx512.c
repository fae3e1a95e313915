/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/amx/mx_amx_avx512.c: the MX weight decoding of the AMX kernels (FP8 x FP8, FP8 x FP4,
 * FP4 x FP4) and the few-rows MX AMX kernel, which decodes each K block of 32 straight from the packed
 * panel into the two AMX B tiles it then multiplies.
 *
 * Prefill (many rows): mm_prepare_panel_{fp8,fp4}_amx decode a panel's K block once per task into the
 * BF16 block that mm_ukernel_mx_amx (bf16_amx_avx512.c) multiplies with every M tile; the decoder is
 * mx_decode_avx512.h (lookups in registers, the scale as one saturating subtraction).
 * Decode (1..16 rows, mm_ukernel_mx_few_amx): one M tile per panel, so there is nothing to share between
 * tiles; decoding 16 K pairs (2 KiB of BF16, in L1) and feeding them to two tdpbf16ps at once keeps the
 * weights streaming from memory while the decoder and the tile unit work on what has arrived (the
 * prepared 128 KiB block of the prefill path would go through L2 twice and serialize decode and
 * products). Two B buffers alternate so that decoding the next block need not wait for the tile loads
 * of the previous one.
 *
 * Tolerance against the reference kernel (ref_mx.c): tdpbf16ps sums the exact products a' * w' in F32
 * in its own order and flushes subnormals, so |c - c_ref| <= 2 K 2^-24 sum_k |a'_k w'_k| (+ the flushing
 * of products below 2^-126 that only extreme scales produce), as for every BF16/MX kernel. */
#pragma GCC target("amx-tile,amx-bf16,avx512vbmi")
#include <immintrin.h>
#include <string.h>

#include "format/format_table.h"
#include "gemm/kernels/amx/amx_tiles.h"
#include "gemm/kernels/amx/mx_decode_avx512.h"
#include "gemm/kernels/avx512/tile_store_avx512.h"
#include "gemm/kernels/kernels.h"
#include "megamoe/formats.h"

/* Bytes ahead of the decoder that the few-rows kernel prefetches (it is the weight-streaming loop): into
 * L1 2 KiB ahead, and into L2 8 KiB ahead, which keeps more lines in flight than the L1 fill buffers
 * allow (measured: docs/gemm.md, 'MX few-rows prefetch'). */
#define FEW_PREFETCH    2048
#define FEW_PREFETCH_L2 8192

/* stream: the decode is the loop that streams the weights (one M tile per task): it fetches ahead as the
 * few-rows kernel does (the AVX-512 MX kernels, 8 rows, K 7168 x N 4096, one Zen 5 core: 2.95 -> 2.21
 * ms). With more tiles the AVX-512 tiles fetch each next block while they run, and prefetching here too
 * was slower (10.2 -> 10.7 ms at 64 rows); the AMX MX kernels (many rows) leave it to the hardware
 * prefetcher. */
void mm_prepare_panel_mx_vbmi(const mm_ukernel_args *p, uint8_t *block, int stream) {
    mx_decoder d;
    mx_decoder_make(&d, p->w_dtype);
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    for (int64_t kp0 = first_pair; kp0 < end_pair; kp0 += 16) {
        int64_t kb = kp0 / 16;
        int n = end_pair - kp0 < 16 ? (int)(end_pair - kp0) : 16;
        mx_decode_block(&d, p->b, kp0, n, p->b_mx_e8m0 + kb * MM_GEMM_NR, p->b_mx_scale + kb * MM_GEMM_NR,
                        block + (kp0 - first_pair) * 128, stream ? FEW_PREFETCH : 0,
                        stream ? FEW_PREFETCH_L2 : 0);
    }
}

void mm_prepare_panel_fp8_vbmi(const mm_ukernel_args *p, uint8_t *block) {
    mm_prepare_panel_mx_vbmi(p, block, 0);
}
void mm_prepare_panel_fp4_vbmi(const mm_ukernel_args *p, uint8_t *block) {
    mm_prepare_panel_mx_vbmi(p, block, 0);
}

/* Decodes step s (pairs first_pair + 16 s ...) of the kernel's K range into b, zeros past the end. */
static inline __attribute__((always_inline)) void few_decode_step(const mx_decoder *d,
                                                                  const mm_ukernel_args *p,
                                                                  int64_t first_pair, int64_t end_pair,
                                                                  int64_t s, uint8_t *b) {
    int64_t kp0 = first_pair + 16 * s, kb = kp0 / 16;
    const uint8_t *e8m0 = p->b_mx_e8m0 + kb * MM_GEMM_NR;
    const float *scales = p->b_mx_scale + kb * MM_GEMM_NR;
    if (end_pair - kp0 >= 16) {
        mx_decode_block(d, p->b, kp0, 16, e8m0, scales, b, FEW_PREFETCH, FEW_PREFETCH_L2);
        _mm_prefetch((const char *)(e8m0 + 8 * MM_GEMM_NR), _MM_HINT_T0);
    } else {
        int n = (int)(end_pair - kp0);
        mx_decode_block(d, p->b, kp0, n, e8m0, scales, b, 0, 0);
        memset(b + n * 128, 0, (size_t)(16 - n) * 128);
    }
}

/* Tiles of the few-rows kernel. A step's two products take 2 x 16 x 32 BF16 products whatever the row
 * count, but each also waits for the previous product into the same C tile: with one C pair the steps
 * ran at the tdpbf16ps latency (measured: docs/gemm.md, 'AMX call overhead'). Even and odd steps therefore
 * accumulate into separate C pairs, added at the end (a fixed order: K blocks start on multiples of 8
 * steps, so a step's parity does not depend on the block size), and take separate A tiles. */
#define FEW_C0_0 0
#define FEW_C1_0 1
#define FEW_C0_1 2
#define FEW_C1_1 3
#define FEW_A_0  4
#define FEW_A_1  5
#define FEW_B0   6
#define FEW_B1   7

/* One step: decodes step s + 1 (software pipelining, see below), then multiplies step s into the C pair
 * of its parity `odd` (a literal, for the tile intrinsics). */
static inline __attribute__((always_inline)) void
few_step(const mx_decoder *d, const mm_ukernel_args *p, const uint8_t *a, int64_t first_pair,
         int64_t end_pair, int64_t steps, int64_t s, uint8_t b_tiles[2][16 * 128], uint8_t *a_tail, int odd) {
    if (s + 1 < steps) few_decode_step(d, p, first_pair, end_pair, s + 1, b_tiles[(s + 1) & 1]);
    const uint8_t *b = b_tiles[s & 1];
    const uint8_t *a_at = a + 64 * s;
    int64_t a_stride = p->a_stride;
    if (s + 1 == steps && (p->k_end - p->k_begin) % 32 != 0) {
        /* Short last step: the K values present, then zeros (a NaN of garbage times a zero weight would
         * not vanish; the B tiles are zero-filled past the block too). */
        memset(a_tail, 0, 16 * 64);
        size_t a_bytes = (size_t)(2 * (p->k_end - (p->k_begin + 32 * s)));
        for (int r = 0; r < p->m; r++) memcpy(a_tail + 64 * r, a_at + r * p->a_stride, a_bytes);
        a_at = a_tail, a_stride = 64;
    }
    _tile_loadd(FEW_B0, b, 128);
    _tile_loadd(FEW_B1, b + 64, 128);
    if (!odd) {
        _tile_loadd(FEW_A_0, a_at, a_stride);
        _tile_dpbf16ps(FEW_C0_0, FEW_A_0, FEW_B0);
        _tile_dpbf16ps(FEW_C1_0, FEW_A_0, FEW_B1);
    } else {
        _tile_loadd(FEW_A_1, a_at, a_stride);
        _tile_dpbf16ps(FEW_C0_1, FEW_A_1, FEW_B0);
        _tile_dpbf16ps(FEW_C1_1, FEW_A_1, FEW_B1);
    }
}

void mm_ukernel_mx_few_amx(const mm_ukernel_args *p) {
    mx_decoder d;
    mx_decoder_make(&d, p->w_dtype);
    amx_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.bytes_per_row[t] = 64;
        cfg.rows[t] = (uint8_t)(t == FEW_B0 || t == FEW_B1 ? 16 : p->m);
    }
    _tile_loadconfig(&cfg);
    /* partial: rows 0..15 the even steps' sums, rows 16..31 the odd steps' (MM_GEMM_MR_MAX = 32). */
    float *partial = p->partial;
    const int stride = MM_GEMM_NR * 4;
    if (p->first) {
        _tile_zero(FEW_C0_0);
        _tile_zero(FEW_C1_0);
        _tile_zero(FEW_C0_1);
        _tile_zero(FEW_C1_1);
    } else {
        _tile_loadd(FEW_C0_0, partial, stride);
        _tile_loadd(FEW_C1_0, partial + 16, stride);
        _tile_loadd(FEW_C0_1, partial + 16 * MM_GEMM_NR, stride);
        _tile_loadd(FEW_C1_1, partial + 16 * MM_GEMM_NR + 16, stride);
    }
    _Alignas(64) uint8_t b_tiles[2][16 * 128];
    _Alignas(64) uint8_t a_tail[16 * 64];
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    int64_t steps = (end_pair - first_pair + 15) / 16;
    const uint8_t *a = p->a + 2 * p->k_begin;
    /* Software-pipelined by one step: block s + 1 is decoded before the tiles of block s are loaded, so
     * the decoder's stores of a block are not the ones the next tile loads wait for. */
    few_decode_step(&d, p, first_pair, end_pair, 0, b_tiles[0]);
    for (int64_t s = 0; s < steps; s += 2) {
        few_step(&d, p, a, first_pair, end_pair, steps, s, b_tiles, a_tail, 0);
        if (s + 1 < steps) few_step(&d, p, a, first_pair, end_pair, steps, s + 1, b_tiles, a_tail, 1);
    }
    _Alignas(64) float out[2][16 * MM_GEMM_NR];
    float *sums = p->last ? out[0] : partial;
    _tile_stored(FEW_C0_0, sums, stride);
    _tile_stored(FEW_C1_0, sums + 16, stride);
    _tile_stored(FEW_C0_1, sums + 16 * MM_GEMM_NR, stride);
    _tile_stored(FEW_C1_1, sums + 16 * MM_GEMM_NR + 16, stride);
    _tile_release();
    if (!p->last) return;
    __mmask16 mask0 = tile_mask_lo(p->n), mask1 = tile_mask_hi(p->n);
    for (int r = 0; r < p->m; r++) {
        const float *even = out[0] + r * MM_GEMM_NR, *odd = out[1] + r * MM_GEMM_NR;
        _mm512_mask_storeu_ps(p->c + r * p->ldc, mask0,
                              _mm512_add_ps(_mm512_load_ps(even), _mm512_load_ps(odd)));
        _mm512_mask_storeu_ps(p->c + r * p->ldc + 16, mask1,
                              _mm512_add_ps(_mm512_load_ps(even + 16), _mm512_load_ps(odd + 16)));
    }
}

/* Values [begin, end) of a row (begin a multiple of 64) by the scalar conversion. */
static void row_chunk_scalar(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales, int64_t begin,
                             int64_t end, uint16_t *out) {
    int64_t first_byte = mm_format_is_nibble(a_dtype) ? begin / 2 : begin;
    mm_gemm_mx_row_to_bf16(a_dtype, row + first_byte, mx_scales + begin / 32, end - begin, out + begin);
}

/* Activation rows of the MX kernels with AVX512_VBMI (the AMX ones, and the AVX-512 ones through
 * mm_gemm_mx_row_to_bf16_avx512): as mm_gemm_mx_row_to_bf16 (prepare_rows.c), 64 values (two MX blocks)
 * at a time with the decoder above (each block's scale as one subtraction); chunks with a scale outside
 * the fast range or a NaN/Inf code, and the tail, take the scalar conversion. Same values, except that a
 * zero activation of either sign becomes +0 (the sign of a zero product changes no nonzero sum, x + (-0) =
 * x; only a sum that is itself -0, e.g. a flushed tiny negative one, may come out +0). No tile
 * instruction: it runs on any CPU with AVX512_VBMI. */
void mm_gemm_mx_row_to_bf16_vbmi(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales, int64_t k,
                                 uint16_t *out) {
    mx_decoder d;
    mx_decoder_make(&d, a_dtype);
    __m512i fp4_hi = _mm512_setzero_si512(), fp4_lo = fp4_hi, fp4_idx = fp4_hi;
    if (d.is_fp4) {
        fp4_hi = _mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_srli_epi16(d.t[0], 8)));
        fp4_lo = _mm512_castsi256_si512(_mm512_cvtepi16_epi8(d.t[0]));
        /* Byte 2j and 2j + 1 of the duplicated row = code byte j, taken in the order that makes vpunpck
         * give values in order (the FP8 decoder's permutation). */
        _Alignas(64) uint8_t perm[64], idx[64];
        _mm512_store_si512(perm, panel_fp8_unpack_order());
        for (int i = 0; i < 64; i++) idx[i] = (uint8_t)(perm[i] / 2);
        fp4_idx = _mm512_load_si512(idx);
    }
    int64_t i = 0;
    for (; i + 64 <= k; i += 64) {
        uint8_t s0 = mx_scales[i / 32], s1 = mx_scales[i / 32 + 1];
        int safe = s0 >= d.s_min && s0 <= d.s_max && s1 >= d.s_min && s1 <= d.s_max;
        __m512i hi, lo;
        if (d.is_fp4) {
            __m512i bytes = _mm512_permutexvar_epi8(
                fp4_idx,
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(row + i / 2))));
            /* Even bytes take the low nibble, odd bytes the high one. */
            __m512i c =
                _mm512_ternarylogic_epi32(_mm512_set1_epi16(0x000F), bytes, _mm512_srli_epi16(bytes, 4),
                                          0xCA); /* 0x000F ? bytes : shifted, per bit */
            c = _mm512_and_si512(c, _mm512_set1_epi16(0x0F0F));
            hi = _mm512_permutexvar_epi8(c, fp4_hi);
            lo = _mm512_permutexvar_epi8(c, fp4_lo);
        } else {
            __m512i c = _mm512_permutexvar_epi8(d.perm, _mm512_loadu_si512(row + i));
            __mmask64 negative = _mm512_cmpgt_epu8_mask(c, _mm512_set1_epi8((char)0x80));
            hi = _mm512_permutex2var_epi8(d.t[0], c, d.t[1]);
            lo = _mm512_permutex2var_epi8(d.t[2], c, d.t[3]);
            hi = _mm512_mask_add_epi8(hi, negative, hi, _mm512_set1_epi8((char)0x80));
            safe = safe && !_mm512_test_epi8_mask(lo, _mm512_set1_epi8(1));
        }
        if (!safe) {
            row_chunk_scalar(a_dtype, row, mx_scales, i, i + 64, out);
            continue;
        }
        __m512i w0 =
            _mm512_subs_epu16(_mm512_unpacklo_epi8(lo, hi), _mm512_set1_epi16((short)((d.s_max - s0) << 7)));
        __m512i w1 =
            _mm512_subs_epu16(_mm512_unpackhi_epi8(lo, hi), _mm512_set1_epi16((short)((d.s_max - s1) << 7)));
        _mm512_storeu_si512(out + i, w0);
        _mm512_storeu_si512(out + i + 32, w1);
    }
    row_chunk_scalar(a_dtype, row, mx_scales, i, k, out); /* with the padding value of an odd K */
}
