/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/packed.h: the packed weight layout shared by pack.c and every micro-kernel.
 *
 * Weights are cut into panels of MM_GEMM_NR output columns (the last panel zero-padded). Inside a panel
 * the K dimension is grouped: `k_group` consecutive K values of one column are stored together, then
 * the next column, so one vector load gives every column of the panel a run of K values, which is the
 * operand shape of vdpbf16ps (pairs of BF16) and vpdpbusd (quads of bytes):
 *   BF16 (k_group 2):  element (k, c) at uint16 index  ((k/2)*NR + c)*2 + k%2
 *   I8, FP8 (k_group 4 / 2): byte ((k/kg)*NR + c)*kg + k%kg
 *   INT4 (k_group 8):  byte ((k/8)*NR + c)*4 + k%4, low nibble for k%8 < 4, high nibble otherwise,
 *                      so "and 0x0F" gives the quad k..k+3 and ">> 4" the quad k+4..k+7 of 16 columns
 *   FP4 (k_group 2):   the 32 bytes of pair k/2 hold column c < 16 in the low nibbles and column c + 16 in
 *                      the high nibbles: byte (k/2)*NR + 2*(c%16) + k%2, low nibble if c < 16; so
 *                      "and 0x0F" / ">> 4" of the zero-extended bytes give columns 0..15 / 16..31 already
 *                      in the (column, k%2) word order of a BF16 pair vector
 *   UINT4 (k_group 2): the FP4 layout (codes 0..15, decoded as (q - zero) * scale)
 * K is zero-padded to a multiple of k_group, so kernels may read whole groups. Per-column data (scales,
 * column sums, MX scales) is stored per panel in the same column order; so are the block scales and zero
 * points of the weight-only formats (FP8 E4M3 with F32 block scales, UINT4 with F32 group scales and U8
 * zeros; docs/gemm.md "Weight-only formats"): one entry per (panel, K block of block_k, column), i.e.
 * [panel][k / block_k][NR], whatever block_n is (4 bytes per block_k weights of a column).
 *
 * Internal API for tools: `megamoe bench ffn` (tools/bench/bench_ffn_expert.c) reads the packed layout; not
 * part of include/megamoe/. */
#ifndef MEGAMOE_GEMM_PACKED_H
#define MEGAMOE_GEMM_PACKED_H

#include <stdint.h>

#include "gemm/gemm.h"

/* Columns per panel, the same for every format (every kernel's NR divides into it). */
#define MM_GEMM_NR 32

struct mm_gemm_packed_weights {
    mm_dtype dtype;
    int64_t k, n;
    int64_t n_out;          /* output columns: n, or n_panels * NR with interleave_gate_up (packed order) */
    int interleave_gate_up; /* see mm_gemm_pack_options */
    int k_group;            /* consecutive K values per column, see above */
    int64_t k_padded;       /* k rounded up to a multiple of k_group */
    int64_t n_panels;       /* ceil(n / NR) */
    int64_t panel_bytes;    /* bytes of one panel's weights (a multiple of 64) */
    uint8_t *panels;        /* n_panels * panel_bytes, 64-byte aligned */
    float *col_scale;       /* I8/INT4: s_W[n]; n_panels*NR entries, 0 in the padding */
    float *col_offset;      /* INT4: bias[n] - 8*s_W[n]*colsum[n] (0 without bias) */
    int32_t *col_sum_x128;  /* I8/INT4: 128 * sum_k W[k][n], the correction of the u8 = s8 + 128 trick */
    int64_t k_blocks;       /* MX: ceil(k / 32) */
    float *mx_scale;        /* MX: 2^(b-127) as F32, [panel][k_block][NR] */
    uint8_t *mx_scale_e8m0; /* MX: the same scales as E8M0 bytes b, [panel][k_block][NR] */
    int64_t block_k;        /* weight-only block scales: K per scale (0: none) */
    int64_t scale_blocks;   /* ceil(k / block_k) */
    float *block_scale;     /* F32 scales, [panel][k / block_k][NR], 0 in the padding columns */
    uint8_t *block_zero;    /* UINT4: zero points 0..15, same layout (NULL otherwise) */
};

static inline const uint8_t *mm_packed_panel(const mm_gemm_packed_weights *w, int64_t panel) {
    return w->panels + panel * w->panel_bytes;
}

/* The raw code of element (k, c) of a panel: a BF16 pattern, a byte, or a nibble (0..15). */
static inline uint32_t mm_packed_code(mm_dtype dtype, const uint8_t *panel, int64_t k, int c) {
    switch (dtype) {
    case MM_DTYPE_BF16: {
        const uint16_t *p = (const uint16_t *)(const void *)panel;
        return p[((k >> 1) * MM_GEMM_NR + c) * 2 + (k & 1)];
    }
    case MM_DTYPE_I8: return panel[((k >> 2) * MM_GEMM_NR + c) * 4 + (k & 3)];
    case MM_DTYPE_INT4:
        return (uint32_t)(panel[((k >> 3) * MM_GEMM_NR + c) * 4 + (k & 3)] >> ((k & 4) ? 4 : 0)) & 0x0Fu;
    case MM_DTYPE_FP4_E2M1:
    case MM_DTYPE_UINT4:
        return (uint32_t)(panel[(k >> 1) * MM_GEMM_NR + 2 * (c & 15) + (k & 1)] >> ((c & 16) ? 4 : 0)) &
               0x0Fu;
    default: /* FP8 */ return panel[((k >> 1) * MM_GEMM_NR + c) * 2 + (k & 1)];
    }
}

/* K values stored together per column for a weight dtype (0 for dtypes the GEMM does not take). */
int mm_gemm_k_group(mm_dtype dtype);

#endif
