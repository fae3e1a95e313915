/* gemm/kernels/avx512/bf16_avx512.c: BF16 x BF16 micro-kernel, 8 x 32 tile, vdpbf16ps.
 *
 * The panel stores K in pairs per column (gemm/packed.h), so one 64-byte load gives 16 columns x one
 * K pair, and a 32-bit broadcast of two consecutive activation values completes the operand pair:
 * 16 accumulators (8 rows x 2 vectors), 2 loads and 8 broadcasts per 16 vdpbf16ps.
 *
 * Tolerance against the reference kernel (documented here, checked by tests/test_gemm_kernels.c):
 * vdpbf16ps adds the two products of a pair in its own order (odd element first) and flushes
 * subnormal inputs and outputs to zero, whereas the reference adds one product at a time in k order.
 * Both are sums of exact products with one F32 rounding per addition, so each is within
 * K * 2^-24 * sum_k |a_k w_k| of the exact sum, and they differ from each other by at most
 *   |c_avx512 - c_ref| <= 2 * K * 2^-24 * sum_k |a_k * w_k|  (+ K * 2^-126 for flushed subnormals). */
#include <immintrin.h>
#include <string.h>

#include "gemm/kernels/kernels.h"

#define MR MM_GEMM_AVX512_MR

static inline __m512bh broadcast_pair(const uint8_t *row, int64_t kp) {
    uint32_t v;
    memcpy(&v, row + 4 * kp, sizeof v);
    return (__m512bh)_mm512_set1_epi32((int)v);
}

void mm_ukernel_bf16_bf16_avx512(const mm_ukernel_args *p) {
    __m512 acc[MR][2];
    const uint8_t *rows[MR];
    /* Rows beyond m repeat row 0: they are computed and never stored, and never read out of bounds. */
    for (int r = 0; r < MR; r++) rows[r] = p->a + (r < p->m ? r : 0) * p->a_stride;
    float *partial = p->partial;
    for (int r = 0; r < MR; r++) {
        acc[r][0] = p->first ? _mm512_setzero_ps() : _mm512_loadu_ps(partial + r * MM_GEMM_NR);
        acc[r][1] = p->first ? _mm512_setzero_ps() : _mm512_loadu_ps(partial + r * MM_GEMM_NR + 16);
    }

    const __m512i *b = (const __m512i *)(const void *)p->b;
    int64_t pairs = p->k_end / 2;
    for (int64_t kp = p->k_begin / 2; kp < pairs; kp++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(b + 2 * kp);
        __m512bh b1 = (__m512bh)_mm512_load_si512(b + 2 * kp + 1);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            __m512bh a = broadcast_pair(rows[r], kp);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
        }
    }
    if (p->k_end & 1) {
        /* Odd K: the last pair holds one real value; the panel's padding weight is 0, and the
         * activation's missing half is set to 0 rather than read past the row. */
        __m512bh b0 = (__m512bh)_mm512_load_si512(b + 2 * pairs);
        __m512bh b1 = (__m512bh)_mm512_load_si512(b + 2 * pairs + 1);
        for (int r = 0; r < MR; r++) {
            uint16_t last;
            memcpy(&last, rows[r] + 4 * pairs, sizeof last);
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)last);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
        }
    }

    if (!p->last) {
        for (int r = 0; r < MR; r++) {
            _mm512_storeu_ps(partial + r * MM_GEMM_NR, acc[r][0]);
            _mm512_storeu_ps(partial + r * MM_GEMM_NR + 16, acc[r][1]);
        }
        return;
    }
    __mmask16 mask0 = p->n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << p->n) - 1);
    __mmask16 mask1 = p->n >= 32 ? (__mmask16)0xFFFF : p->n <= 16 ? 0 : (__mmask16)((1u << (p->n - 16)) - 1);
    for (int r = 0; r < p->m; r++) {
        _mm512_mask_storeu_ps(p->c + r * p->ldc, mask0, acc[r][0]);
        _mm512_mask_storeu_ps(p->c + r * p->ldc + 16, mask1, acc[r][1]);
    }
}
