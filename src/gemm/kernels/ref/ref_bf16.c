/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/ref/ref_bf16.c: portable BF16 x BF16 micro-kernel, the reference for the AVX-512 one.
 *
 * Arithmetic: c = sum over k = 0..K-1, in k order, of f32(a[k]) * f32(w[k]) with one F32 accumulator per
 * output element. A BF16 x BF16 product is exact in F32, so the only roundings are the additions. The
 * tile (ref_bf16_tile.h) is shared with the weight-only pairs (ref_weight_only.c). */
#include <string.h>

#include "gemm/kernels/ref/ref_bf16_tile.h"
#include "megamoe/formats.h"

void mm_ref_bf16_tile(const mm_ukernel_args *p, mm_ref_weight_row_fn weight_row) {
    float acc[MM_GEMM_REF_MR][MM_GEMM_NR];
    float wv[MM_GEMM_NR];
    if (p->first)
        memset(acc, 0, sizeof acc);
    else
        memcpy(acc, p->partial, sizeof acc);
    for (int64_t k = p->k_begin; k < p->k_end; k++) {
        weight_row(p, k, wv);
        for (int r = 0; r < p->m; r++) {
            uint16_t bits;
            memcpy(&bits, p->a + r * p->a_stride + 2 * k, sizeof bits);
            float av = mm_bf16_to_f32(bits);
            for (int c = 0; c < p->n; c++) acc[r][c] += av * wv[c];
        }
    }
    if (!p->last) {
        memcpy(p->partial, acc, sizeof acc);
        return;
    }
    for (int r = 0; r < p->m; r++) memcpy(p->c + r * p->ldc, acc[r], (size_t)p->n * sizeof(float));
}

static void bf16_row(const mm_ukernel_args *p, int64_t k, float *wv) {
    for (int c = 0; c < p->n; c++)
        wv[c] = mm_bf16_to_f32((uint16_t)mm_packed_code(MM_DTYPE_BF16, p->b, k, c));
}

void mm_ukernel_bf16_bf16_ref(const mm_ukernel_args *p) {
    mm_ref_bf16_tile(p, bf16_row);
}
