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

#include "gemm/kernels/amx/amx_tiles.h"
#include "gemm/kernels/amx/mx_decode_avx512.h"
#include "gemm/kernels/kernels.h"

static inline __attribute__((always_inline)) void prepare_panel(const mm_ukernel_args *p, uint8_t *block) {
    mx_decoder d;
    mx_decoder_make(&d, p->w_dtype);
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    /* Many rows follow: the decode is not the streaming loop here, the hardware prefetcher suffices. */
    for (int64_t kp0 = first_pair; kp0 < end_pair; kp0 += 16) {
        int64_t kb = kp0 / 16;
        int n = end_pair - kp0 < 16 ? (int)(end_pair - kp0) : 16;
        mx_decode_block(&d, p->b, kp0, n, p->b_mx_e8m0 + kb * MM_GEMM_NR, p->b_mx_scale + kb * MM_GEMM_NR,
                        block + (kp0 - first_pair) * 128, 0);
    }
}

void mm_prepare_panel_fp8_amx(const mm_ukernel_args *p, uint8_t *block) {
    prepare_panel(p, block);
}
void mm_prepare_panel_fp4_amx(const mm_ukernel_args *p, uint8_t *block) {
    prepare_panel(p, block);
}

/* Bytes ahead of the decoder that the few-rows kernel prefetches (it is the weight-streaming loop). */
#define FEW_PREFETCH 2048

/* Decodes step s (pairs first_pair + 16 s ...) of the kernel's K range into b, zeros past the end. */
static inline __attribute__((always_inline)) void few_decode_step(const mx_decoder *d,
                                                                  const mm_ukernel_args *p,
                                                                  int64_t first_pair, int64_t end_pair,
                                                                  int64_t s, uint8_t *b) {
    int64_t kp0 = first_pair + 16 * s, kb = kp0 / 16;
    const uint8_t *e8m0 = p->b_mx_e8m0 + kb * MM_GEMM_NR;
    const float *scales = p->b_mx_scale + kb * MM_GEMM_NR;
    if (end_pair - kp0 >= 16) {
        mx_decode_block(d, p->b, kp0, 16, e8m0, scales, b, FEW_PREFETCH);
        _mm_prefetch((const char *)(e8m0 + 8 * MM_GEMM_NR), _MM_HINT_T0);
    } else {
        int n = (int)(end_pair - kp0);
        mx_decode_block(d, p->b, kp0, n, e8m0, scales, b, 0);
        memset(b + n * 128, 0, (size_t)(16 - n) * 128);
    }
}

/* Tiles of the few-rows kernel: C as in amx_tiles.h (tmm0, tmm1), and two sets of A and B tiles that
 * alternate between steps, so the loads of one step need not wait for the products of the previous one
 * to release their tiles. */
#define FEW_A_0  2
#define FEW_B0_0 3
#define FEW_B1_0 4
#define FEW_A_1  5
#define FEW_B0_1 6
#define FEW_B1_1 7

/* One step: decodes step s + 1 (software pipelining, see below), then multiplies step s on tile set
 * `set` (a literal, for the tile intrinsics). */
static inline __attribute__((always_inline)) void
few_step(const mx_decoder *d, const mm_ukernel_args *p, const uint8_t *a, int64_t first_pair,
         int64_t end_pair, int64_t steps, int64_t s, uint8_t b_tiles[2][16 * 128], uint8_t *a_tail, int set) {
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
    if (set == 0) {
        _tile_loadd(FEW_A_0, a_at, a_stride);
        _tile_loadd(FEW_B0_0, b, 128);
        _tile_loadd(FEW_B1_0, b + 64, 128);
        _tile_dpbf16ps(AMX_C0, FEW_A_0, FEW_B0_0);
        _tile_dpbf16ps(AMX_C1, FEW_A_0, FEW_B1_0);
    } else {
        _tile_loadd(FEW_A_1, a_at, a_stride);
        _tile_loadd(FEW_B0_1, b, 128);
        _tile_loadd(FEW_B1_1, b + 64, 128);
        _tile_dpbf16ps(AMX_C0, FEW_A_1, FEW_B0_1);
        _tile_dpbf16ps(AMX_C1, FEW_A_1, FEW_B1_1);
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
        cfg.rows[t] = (uint8_t)(t == FEW_B0_0 || t == FEW_B1_0 || t == FEW_B0_1 || t == FEW_B1_1 ? 16 : p->m);
    }
    _tile_loadconfig(&cfg);
    float *partial = p->partial;
    if (p->first) {
        _tile_zero(AMX_C0);
        _tile_zero(AMX_C1);
    } else {
        _tile_loadd(AMX_C0, partial, MM_GEMM_NR * 4);
        _tile_loadd(AMX_C1, partial + 16, MM_GEMM_NR * 4);
    }
    _Alignas(64) uint8_t b_tiles[2][16 * 128];
    _Alignas(64) uint8_t a_tail[16 * 64];
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    int64_t steps = (end_pair - first_pair + 15) / 16;
    const uint8_t *a = p->a + 2 * p->k_begin;
    /* Software-pipelined by one step: block s + 1 is decoded before the tiles of block s are loaded, so
     * the stores of a block have reached L1 when the tile loads read it (tile loads do not take data
     * from the store buffer; loading right after the stores waits for them to drain). */
    few_decode_step(&d, p, first_pair, end_pair, 0, b_tiles[0]);
    for (int64_t s = 0; s < steps; s += 2) {
        few_step(&d, p, a, first_pair, end_pair, steps, s, b_tiles, a_tail, 0);
        if (s + 1 < steps) few_step(&d, p, a, first_pair, end_pair, steps, s + 1, b_tiles, a_tail, 1);
    }
    if (!p->last) {
        _tile_stored(AMX_C0, partial, MM_GEMM_NR * 4);
        _tile_stored(AMX_C1, partial + 16, MM_GEMM_NR * 4);
    } else if (p->n == MM_GEMM_NR) {
        _tile_stored(AMX_C0, p->c, p->ldc * 4);
        _tile_stored(AMX_C1, p->c + 16, p->ldc * 4);
    } else {
        _Alignas(64) float out[16 * MM_GEMM_NR];
        _tile_stored(AMX_C0, out, MM_GEMM_NR * 4);
        _tile_stored(AMX_C1, out + 16, MM_GEMM_NR * 4);
        for (int r = 0; r < p->m; r++)
            memcpy(p->c + r * p->ldc, out + r * MM_GEMM_NR, (size_t)p->n * sizeof(float));
    }
    _tile_release();
}
