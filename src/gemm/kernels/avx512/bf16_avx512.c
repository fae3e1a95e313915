/* gemm/kernels/avx512/bf16_avx512.c: BF16 x BF16 micro-kernel, 8 x 32 tile, vdpbf16ps
 * (the tile itself is in bf16_tile_avx512.h).
 *
 * Tolerance against the reference kernel (documented here, checked by tests/test_gemm_kernels.c):
 * vdpbf16ps adds the two products of a pair in its own order (odd element first) and flushes
 * subnormal inputs and outputs to zero, whereas the reference adds one product at a time in k order.
 * Both are sums of exact products with one F32 rounding per addition, so each is within
 * K * 2^-24 * sum_k |a_k w_k| of the exact sum, and they differ from each other by at most
 *   |c_avx512 - c_ref| <= 2 * K * 2^-24 * sum_k |a_k * w_k|  (+ K * 2^-126 for flushed subnormals). */
#include "gemm/kernels/avx512/bf16_tile_avx512.h"

void mm_ukernel_bf16_bf16_avx512(const mm_ukernel_args *p) {
    bf16_tile t;
    bf16_tile_begin(&t, p);
    const __m512i *panel = (const __m512i *)(const void *)p->b;
    int64_t first_pair = p->k_begin / 2, full_pairs = p->k_end / 2;
    bf16_tile_accumulate(&t, 2 * p->k_begin, panel + 2 * first_pair, full_pairs - first_pair);
    if (p->k_end & 1) {
        /* Odd K: the last pair holds one real value; the panel's padding weight is 0, and the
         * activation's missing half is set to 0 rather than read past the row. */
        __m512bh b0 = (__m512bh)_mm512_load_si512(panel + 2 * full_pairs);
        __m512bh b1 = (__m512bh)_mm512_load_si512(panel + 2 * full_pairs + 1);
        for (int r = 0; r < BF16_TILE_MR; r++) {
            uint16_t last;
            memcpy(&last, t.rows[r] + 4 * full_pairs, sizeof last);
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)last);
            t.acc[r][0] = _mm512_dpbf16_ps(t.acc[r][0], a, b0);
            t.acc[r][1] = _mm512_dpbf16_ps(t.acc[r][1], a, b1);
        }
    }
    bf16_tile_end(&t, p);
}
