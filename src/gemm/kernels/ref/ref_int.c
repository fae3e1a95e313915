/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/ref/ref_int.c: portable INT8 x INT8 and INT8 x INT4 micro-kernels.
 *
 * Both reduce exactly in INT32 (K <= MM_GEMM_INT_MAX_K keeps every partial sum in range), then apply
 * the scalars of docs/reference.md step 2 in F32, left to right:
 *   INT8 x INT8: c = ((float)acc * s_W[n]) * s_X[row]
 *   INT8 x INT4: c = ((float)acc * s_W[n] + offset[n]) * s_X[row], offset = bias - 8 * s_W * colsum
 * Every INT kernel of any ISA must give these bits exactly. */
#include <string.h>

#include "gemm/kernels/kernels.h"

static void int_tile(const mm_ukernel_args *p, int weights_are_int4) {
    int32_t acc[MM_GEMM_REF_MR][MM_GEMM_NR];
    int32_t wv[MM_GEMM_NR];
    if (p->first)
        memset(acc, 0, sizeof acc);
    else
        memcpy(acc, p->partial, sizeof acc);
    for (int64_t k = p->k_begin; k < p->k_end; k++) {
        for (int c = 0; c < p->n; c++) {
            uint32_t code = mm_packed_code(p->w_dtype, p->b, k, c);
            wv[c] = weights_are_int4 ? (int32_t)(code ^ 8u) - 8 : (int32_t)(int8_t)code;
        }
        for (int r = 0; r < p->m; r++) {
            int32_t av = (int8_t)p->a[r * p->a_stride + k];
            for (int c = 0; c < p->n; c++) acc[r][c] += av * wv[c];
        }
    }
    if (!p->last) {
        memcpy(p->partial, acc, sizeof acc);
        return;
    }
    for (int r = 0; r < p->m; r++) {
        float row_scale = p->a_row_scales[r];
        for (int c = 0; c < p->n; c++) {
            float h = (float)acc[r][c] * p->col_scale[c];
            if (weights_are_int4) h += p->col_offset[c];
            p->c[r * p->ldc + c] = h * row_scale;
        }
    }
}

void mm_ukernel_i8_i8_ref(const mm_ukernel_args *p) {
    int_tile(p, 0);
}
void mm_ukernel_i8_i4_ref(const mm_ukernel_args *p) {
    int_tile(p, 1);
}
