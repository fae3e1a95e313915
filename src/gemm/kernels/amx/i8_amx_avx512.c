/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/amx/i8_amx_avx512.c: INT8 x INT8 and INT8 x INT4 micro-kernels on AMX tiles (tdpbssd),
 * 32 x 32 tile (MM_GEMM_AMX_MR): up to 16 rows one A tile times two B tiles, 17..32 rows 2 x 2 tiles.
 *
 * tdpbssd multiplies signed by signed bytes, so no offset trick is needed: the INT8 panel layout of
 * gemm/packed.h (per K quad, 32 columns x 4 bytes = 128 bytes) is the AMX B layout, loaded with a
 * 128-byte stride, and the activations load straight from their rows (64 bytes = 64 K per step). The
 * INT32 sums are exact (K <= MM_GEMM_INT_MAX_K), then scaled exactly as the reference (ref_int.c):
 * c = ((float)acc * s_W[n]) * s_X[row]. Bit-exact against the reference, by construction and by test.
 * INT4 weights are first decoded per (panel, K block) into the INT8 panel layout by
 * mm_prepare_panel_i4_amx (nibble -> signed byte by vpshufb), then the same tile runs, and the scaling
 * adds the INT4 offset: c = ((float)acc * s_W[n] + offset[n]) * s_X[row]. */
#pragma GCC target("amx-tile,amx-int8")
#include <immintrin.h>

#include "gemm/kernels/amx/amx_tiles.h"
#include "gemm/kernels/avx512/tile_store_avx512.h"
#include "gemm/kernels/kernels.h"

/* The last K block: acc (m rows x 32 INT32, row-major) scaled as the reference and written to C. */
static void scale_rows(const mm_ukernel_args *p, const int32_t *acc, int weights_are_int4) {
    tile_int_epilogue e = tile_int_epilogue_load(p, weights_are_int4);
    __m512i zero = _mm512_setzero_si512(); /* the AMX sums are signed: no u8 offset to correct */
    for (int r = 0; r < p->m; r++)
        tile_int_epilogue_row(p, &e, r, _mm512_load_si512(acc + r * MM_GEMM_NR),
                              _mm512_load_si512(acc + r * MM_GEMM_NR + 16), zero, zero);
}

/* b: the panel's INT8 quads from quad k_begin / 4 on (128 bytes each). */
static void i8_amx_tile(const mm_ukernel_args *p, const uint8_t *b, int weights_are_int4) {
    amx_tile_config cfg;
    amx_tile_config_make(&cfg, p->m);
    _tile_loadconfig(&cfg);
    int32_t *partial = p->partial;
    if (p->first) {
        _tile_zero(AMX_C0);
        _tile_zero(AMX_C1);
    } else {
        _tile_loadd(AMX_C0, partial, MM_GEMM_NR * 4);
        _tile_loadd(AMX_C1, partial + 16, MM_GEMM_NR * 4);
    }
    int64_t full_steps = (p->k_end - p->k_begin) / 64;
    for (int64_t s = 0; s < full_steps; s++) {
        _tile_loadd(AMX_A, p->a + p->k_begin + 64 * s, p->a_stride);
        _tile_loadd(AMX_B0, b + s * 16 * 128, 128);
        _tile_loadd(AMX_B1, b + s * 16 * 128 + 64, 128);
        _tile_dpbssd(AMX_C0, AMX_A, AMX_B0);
        _tile_dpbssd(AMX_C1, AMX_A, AMX_B1);
    }
    int64_t k_done = p->k_begin + 64 * full_steps;
    if (k_done < p->k_end) {
        /* Short last step through zero-padded copies (the panel is padded to whole quads only). */
        _Alignas(64) uint8_t a_tail[16 * 64];
        _Alignas(64) uint8_t b_tail[16 * 128];
        amx_pad_last_step(p->a + k_done, p->a_stride, p->m, (size_t)(p->k_end - k_done), a_tail,
                          sizeof a_tail, b + full_steps * 16 * 128,
                          (size_t)((p->k_end - k_done + 3) / 4) * 128, b_tail);
        _tile_loadd(AMX_A, a_tail, 64);
        _tile_loadd(AMX_B0, b_tail, 128);
        _tile_loadd(AMX_B1, b_tail + 64, 128);
        _tile_dpbssd(AMX_C0, AMX_A, AMX_B0);
        _tile_dpbssd(AMX_C1, AMX_A, AMX_B1);
    }
    if (!p->last) {
        _tile_stored(AMX_C0, partial, MM_GEMM_NR * 4);
        _tile_stored(AMX_C1, partial + 16, MM_GEMM_NR * 4);
        _tile_release();
        return;
    }
    _Alignas(64) int32_t acc[16 * MM_GEMM_NR];
    _tile_stored(AMX_C0, acc, MM_GEMM_NR * 4);
    _tile_stored(AMX_C1, acc + 16, MM_GEMM_NR * 4);
    _tile_release();
    scale_rows(p, acc, weights_are_int4);
}

/* 17..32 rows as 2 x 2 tiles: every tile load feeds two products instead of 1.5 in the 16-row shape,
 * whose A and B reads (3 KiB per 2 products) exceed what L2 delivers once the K block leaves L1. */
static void i8_amx_tile32(const mm_ukernel_args *p, const uint8_t *b, int weights_are_int4) {
    amx_tile32_begin(p->m, p->first, p->partial);
    const uint8_t *a0 = p->a + p->k_begin, *a1 = a0 + 16 * p->a_stride;
    int64_t full_steps = (p->k_end - p->k_begin) / 64;
    for (int64_t s = 0; s < full_steps; s++) {
        _tile_loadd(T_B0, b + s * 16 * 128, 128);
        _tile_loadd(T_B1, b + s * 16 * 128 + 64, 128);
        _tile_loadd(T_A0, a0 + 64 * s, p->a_stride);
        _tile_dpbssd(T_C00, T_A0, T_B0);
        _tile_dpbssd(T_C01, T_A0, T_B1);
        _tile_loadd(T_A1, a1 + 64 * s, p->a_stride);
        _tile_dpbssd(T_C10, T_A1, T_B0);
        _tile_dpbssd(T_C11, T_A1, T_B1);
    }
    int64_t k_done = p->k_begin + 64 * full_steps;
    if (k_done < p->k_end) {
        /* Short last step through zero-padded copies, as in the 16-row shape. */
        _Alignas(64) uint8_t a_tail[32 * 64];
        _Alignas(64) uint8_t b_tail[16 * 128];
        amx_pad_last_step(p->a + k_done, p->a_stride, p->m, (size_t)(p->k_end - k_done), a_tail,
                          sizeof a_tail, b + full_steps * 16 * 128,
                          (size_t)((p->k_end - k_done + 3) / 4) * 128, b_tail);
        _tile_loadd(T_B0, b_tail, 128);
        _tile_loadd(T_B1, b_tail + 64, 128);
        _tile_loadd(T_A0, a_tail, 64);
        _tile_loadd(T_A1, a_tail + 16 * 64, 64);
        _tile_dpbssd(T_C00, T_A0, T_B0);
        _tile_dpbssd(T_C01, T_A0, T_B1);
        _tile_dpbssd(T_C10, T_A1, T_B0);
        _tile_dpbssd(T_C11, T_A1, T_B1);
    }
    _Alignas(64) int32_t acc[32 * MM_GEMM_NR];
    amx_tile32_store(p->last ? (void *)acc : p->partial, MM_GEMM_NR * 4);
    _tile_release();
    if (p->last) scale_rows(p, acc, weights_are_int4);
}

void mm_ukernel_i8_i8_amx(const mm_ukernel_args *p) {
    const uint8_t *b = p->b + p->k_begin / 4 * 128;
    if (p->m > 16)
        i8_amx_tile32(p, b, 0);
    else
        i8_amx_tile(p, b, 0);
}

void mm_ukernel_i8_i4_amx(const mm_ukernel_args *p) {
    if (p->m > 16)
        i8_amx_tile32(p, p->b_block, 1);
    else
        i8_amx_tile(p, p->b_block, 1);
}

void mm_prepare_panel_i4_amx(const mm_ukernel_args *p, uint8_t *block) {
    const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
    /* Nibble code -> signed value, per 128-bit lane for vpshufb. */
    const __m512i to_signed =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1));
    /* One group of 8 K: 32 columns x 4 bytes, low nibbles K 0..3 and high nibbles K 4..7 of each column,
     * becomes two INT8 quads of 32 columns x 4 bytes (gemm/packed.h). */
    int64_t first_group = p->k_begin / 8, end_group = (p->k_end + 7) / 8;
    for (int64_t g = first_group; g < end_group; g++) {
        __m512i *dst = (__m512i *)(void *)(block + (g - first_group) * 256);
        for (int half = 0; half < 2; half++) {
            __m512i v = _mm512_load_si512(p->b + g * 128 + 64 * half);
            dst[half] = _mm512_shuffle_epi8(to_signed, _mm512_and_si512(v, low_nibbles));
            dst[2 + half] =
                _mm512_shuffle_epi8(to_signed, _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibbles));
        }
    }
}
