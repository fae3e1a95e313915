/* gemm/kernels/amx/i8_amx_avx512.c: INT8 x INT8 micro-kernel on AMX tiles (tdpbssd), 16 x 32 tile.
 *
 * tdpbssd multiplies signed by signed bytes, so no offset trick is needed: the INT8 panel layout of
 * gemm/packed.h (per K quad, 32 columns x 4 bytes = 128 bytes) is the AMX B layout, loaded with a
 * 128-byte stride, and the activations load straight from their rows (64 bytes = 64 K per step). The
 * INT32 sums are exact (K <= MM_GEMM_INT_MAX_K), then scaled exactly as the reference (ref_int.c):
 * c = ((float)acc * s_W[n]) * s_X[row]. Bit-exact against the reference, by construction and by test. */
#pragma GCC target("amx-tile,amx-int8")
#include <immintrin.h>

#include "gemm/kernels/amx/amx_tiles.h"
#include "gemm/kernels/kernels.h"

void mm_ukernel_i8_i8_amx(const mm_ukernel_args *p) {
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
    const uint8_t *b = p->b + p->k_begin / 4 * 128;
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
        memset(a_tail, 0, sizeof a_tail);
        memset(b_tail, 0, sizeof b_tail);
        for (int r = 0; r < p->m; r++)
            memcpy(a_tail + 64 * r, p->a + r * p->a_stride + k_done, (size_t)(p->k_end - k_done));
        memcpy(b_tail, b + full_steps * 16 * 128, (size_t)((p->k_end - k_done + 3) / 4) * 128);
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

    __m512 scale0 = _mm512_loadu_ps(p->col_scale), scale1 = _mm512_loadu_ps(p->col_scale + 16);
    __mmask16 mask0 = p->n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << p->n) - 1);
    __mmask16 mask1 = p->n >= 32 ? (__mmask16)0xFFFF : p->n <= 16 ? 0 : (__mmask16)((1u << (p->n - 16)) - 1);
    for (int r = 0; r < p->m; r++) {
        __m512 row_scale = _mm512_set1_ps(p->a_row_scales[r]);
        __m512 h0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(acc + r * MM_GEMM_NR)), scale0);
        __m512 h1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(acc + r * MM_GEMM_NR + 16)), scale1);
        _mm512_mask_storeu_ps(p->c + r * p->ldc, mask0, _mm512_mul_ps(h0, row_scale));
        _mm512_mask_storeu_ps(p->c + r * p->ldc + 16, mask1, _mm512_mul_ps(h1, row_scale));
    }
}
