/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/amx/bf16_amx_avx512.c: BF16 x BF16 and MX micro-kernels on AMX tiles (tdpbf16ps),
 * 32 x 32 tile: up to 16 rows one A tile times two B tiles, 17..32 rows 2 x 2 tiles (all eight).
 *
 * The BF16 panel layout of gemm/packed.h (per K pair, 32 columns x 2 BF16 = 128 bytes) is the AMX "VNNI"
 * B layout already: a B tile is 16 K pairs of 16 columns, loaded with a 128-byte stride (the second half
 * of the columns at +64 bytes). The activations load straight from their rows (32 BF16 = 64 bytes per
 * row and K step). One K step of 32 is 2 tdpbf16ps, each 16 x 16 x 32. A last step shorter than 32 goes
 * through zero-padded copies, so no tile load reads past the activations or the panel.
 * The MX variant runs the same tile over the BF16 rows and panel blocks prepared by
 * mm_gemm_mx_row_to_bf16 and mm_prepare_panel_*_avx512 (see mx_avx512.c).
 *
 * Tolerance against the reference kernels: tdpbf16ps sums exact BF16 products in F32 in its own order
 * and flushes subnormals (inputs and outputs), like vdpbf16ps; the bound documented in
 * bf16_avx512.c applies: |c_amx - c_ref| <= 2 * K * 2^-24 * sum_k |a_k * w_k| (+ flushed subnormals). */
#pragma GCC target("amx-tile,amx-bf16")
#include <immintrin.h>

#include "gemm/kernels/amx/amx_tiles.h"
#include "gemm/kernels/kernels.h"

/* rows of activations from byte offset a_offset, pairs of panel rows from b (128 bytes each). */
static void bf16_amx_tile(const mm_ukernel_args *p, int64_t a_offset, const uint8_t *b, int64_t n_pairs) {
    amx_tile_config cfg;
    amx_tile_config_make(&cfg, p->m);
    _tile_loadconfig(&cfg);
    float *partial = p->partial;
    if (p->first) {
        _tile_zero(AMX_C0);
        _tile_zero(AMX_C1);
    } else {
        _tile_loadd(AMX_C0, partial, MM_GEMM_NR * 4);
        _tile_loadd(AMX_C1, partial + 16, MM_GEMM_NR * 4);
    }
    int64_t full_steps = n_pairs / 16;
    for (int64_t s = 0; s < full_steps; s++) {
        _tile_loadd(AMX_A, p->a + a_offset + 64 * s, p->a_stride);
        _tile_loadd(AMX_B0, b + s * 16 * 128, 128);
        _tile_loadd(AMX_B1, b + s * 16 * 128 + 64, 128);
        _tile_dpbf16ps(AMX_C0, AMX_A, AMX_B0);
        _tile_dpbf16ps(AMX_C1, AMX_A, AMX_B1);
    }
    int64_t k_done = p->k_begin + 32 * full_steps;
    if (k_done < p->k_end) {
        /* Short last step: the K values present, then zeros (amx_pad_last_step). */
        _Alignas(64) uint8_t a_tail[16 * 64];
        _Alignas(64) uint8_t b_tail[16 * 128];
        amx_pad_last_step(p->a + a_offset + 64 * full_steps, p->a_stride, p->m,
                          (size_t)(2 * (p->k_end - k_done)), a_tail, sizeof a_tail, b + full_steps * 16 * 128,
                          (size_t)(n_pairs - 16 * full_steps) * 128, b_tail);
        _tile_loadd(AMX_A, a_tail, 64);
        _tile_loadd(AMX_B0, b_tail, 128);
        _tile_loadd(AMX_B1, b_tail + 64, 128);
        _tile_dpbf16ps(AMX_C0, AMX_A, AMX_B0);
        _tile_dpbf16ps(AMX_C1, AMX_A, AMX_B1);
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

/* 17..32 rows as 2 x 2 tiles: every tile load feeds two products instead of 1.5 in the 16-row shape
 * (same reasoning as i8_amx_avx512.c); each output element still sums the same products in the tile's
 * order, so the tolerance is unchanged. */
static void bf16_amx_tile32(const mm_ukernel_args *p, int64_t a_offset, const uint8_t *b, int64_t n_pairs) {
    amx_tile32_begin(p->m, p->first, p->partial);
    const uint8_t *a0 = p->a + a_offset, *a1 = a0 + 16 * p->a_stride;
    int64_t full_steps = n_pairs / 16;
    for (int64_t s = 0; s < full_steps; s++) {
        _tile_loadd(T_B0, b + s * 16 * 128, 128);
        _tile_loadd(T_B1, b + s * 16 * 128 + 64, 128);
        _tile_loadd(T_A0, a0 + 64 * s, p->a_stride);
        _tile_dpbf16ps(T_C00, T_A0, T_B0);
        _tile_dpbf16ps(T_C01, T_A0, T_B1);
        _tile_loadd(T_A1, a1 + 64 * s, p->a_stride);
        _tile_dpbf16ps(T_C10, T_A1, T_B0);
        _tile_dpbf16ps(T_C11, T_A1, T_B1);
    }
    int64_t k_done = p->k_begin + 32 * full_steps;
    if (k_done < p->k_end) {
        /* Short last step through zero-padded copies of both operands, as in the 16-row shape. */
        _Alignas(64) uint8_t a_tail[32 * 64];
        _Alignas(64) uint8_t b_tail[16 * 128];
        amx_pad_last_step(p->a + a_offset + 64 * full_steps, p->a_stride, p->m,
                          (size_t)(2 * (p->k_end - k_done)), a_tail, sizeof a_tail, b + full_steps * 16 * 128,
                          (size_t)(n_pairs - 16 * full_steps) * 128, b_tail);
        _tile_loadd(T_B0, b_tail, 128);
        _tile_loadd(T_B1, b_tail + 64, 128);
        _tile_loadd(T_A0, a_tail, 64);
        _tile_loadd(T_A1, a_tail + 16 * 64, 64);
        _tile_dpbf16ps(T_C00, T_A0, T_B0);
        _tile_dpbf16ps(T_C01, T_A0, T_B1);
        _tile_dpbf16ps(T_C10, T_A1, T_B0);
        _tile_dpbf16ps(T_C11, T_A1, T_B1);
    }
    if (!p->last) {
        amx_tile32_store(p->partial, MM_GEMM_NR * 4);
    } else if (p->n == MM_GEMM_NR) {
        amx_tile32_store(p->c, p->ldc * 4);
    } else {
        _Alignas(64) float out[32 * MM_GEMM_NR];
        amx_tile32_store(out, MM_GEMM_NR * 4);
        for (int r = 0; r < p->m; r++)
            memcpy(p->c + r * p->ldc, out + r * MM_GEMM_NR, (size_t)p->n * sizeof(float));
    }
    _tile_release();
}

static void bf16_amx(const mm_ukernel_args *p, int64_t a_offset, const uint8_t *b, int64_t n_pairs) {
    if (p->m > 16)
        bf16_amx_tile32(p, a_offset, b, n_pairs);
    else
        bf16_amx_tile(p, a_offset, b, n_pairs);
}

void mm_ukernel_bf16_bf16_amx(const mm_ukernel_args *p) {
    /* The panel is zero-padded to an even K, so the pairs to read are ceil(k_end / 2) - k_begin / 2. */
    int64_t first_pair = p->k_begin / 2, end_pair = (p->k_end + 1) / 2;
    bf16_amx(p, 2 * p->k_begin, p->b + first_pair * 128, end_pair - first_pair);
}

void mm_ukernel_mx_amx(const mm_ukernel_args *p) {
    bf16_amx(p, 2 * p->k_begin, p->b_block, (p->k_end - p->k_begin + 1) / 2);
}
