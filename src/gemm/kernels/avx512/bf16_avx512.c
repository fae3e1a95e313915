/* SPDX-License-Identifier: Apache-2.0 */
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
    const __m512i *panel = (const __m512i *)(const void *)p->b;
    int64_t first_pair = p->k_begin / 2, full_pairs = p->k_end / 2;
    const __m512i *tail = (p->k_end & 1) ? panel + 2 * full_pairs : NULL;
    bf16_tile_run(p, panel + 2 * first_pair, full_pairs - first_pair, tail);
}
