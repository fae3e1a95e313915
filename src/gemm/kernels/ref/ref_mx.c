/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/ref/ref_mx.c: portable MX micro-kernels (FP8 x FP8, FP8 x FP4, FP4 x FP4).
 *
 * Arithmetic (docs/reference.md step 2, "products of dequantized values, F32 accumulation"):
 *   a' = lut_a[q_a] * 2^(sa - 127), w' = lut_w[q_w] * 2^(sw - 127)    (both exact in F32)
 *   c  = sum over k in k order of a' * w'                               (one F32 rounding per product
 *                                                                        and per addition)
 * The activation scale is the E8M0 byte of (row, k/32); the weight scale comes pre-decoded from the
 * packed panel. The activation's element type is read from the arguments, so one kernel body serves
 * E4M3 and E5M2. */
#include <string.h>

#include "format/decode_tables.h"
#include "format/format_table.h"
#include "gemm/kernels/kernels.h"

static uint32_t activation_code(const uint8_t *row, int64_t k, int nibbles) {
    return nibbles ? (uint32_t)(row[k >> 1] >> ((k & 1) * 4)) & 0x0Fu : row[k];
}

static void mx_tile(const mm_ukernel_args *p) {
    float acc[MM_GEMM_REF_MR][MM_GEMM_NR];
    float wv[MM_GEMM_NR];
    const float *a_lut = mm_format_lut_f32(p->a_dtype);
    const float *w_lut = mm_format_lut_f32(p->w_dtype);
    const float *e8m0 = mm_format_lut_f32(MM_DTYPE_E8M0);
    int a_nibbles = mm_format_is_nibble(p->a_dtype);
    if (p->first)
        memset(acc, 0, sizeof acc);
    else
        memcpy(acc, p->partial, sizeof acc);
    for (int64_t k = p->k_begin; k < p->k_end; k++) {
        const float *w_scale = p->b_mx_scale + (k >> 5) * MM_GEMM_NR;
        for (int c = 0; c < p->n; c++) wv[c] = w_lut[mm_packed_code(p->w_dtype, p->b, k, c)] * w_scale[c];
        for (int r = 0; r < p->m; r++) {
            const uint8_t *row = p->a + r * p->a_stride;
            float av = a_lut[activation_code(row, k, a_nibbles)] *
                       e8m0[p->a_mx_scales[r * p->a_mx_stride + (k >> 5)]];
            for (int c = 0; c < p->n; c++) acc[r][c] += av * wv[c];
        }
    }
    if (!p->last) {
        memcpy(p->partial, acc, sizeof acc);
        return;
    }
    for (int r = 0; r < p->m; r++) memcpy(p->c + r * p->ldc, acc[r], (size_t)p->n * sizeof(float));
}

void mm_ukernel_fp8_fp8_ref(const mm_ukernel_args *p) {
    mx_tile(p);
}
void mm_ukernel_fp8_fp4_ref(const mm_ukernel_args *p) {
    mx_tile(p);
}
void mm_ukernel_fp4_fp4_ref(const mm_ukernel_args *p) {
    mx_tile(p);
}
