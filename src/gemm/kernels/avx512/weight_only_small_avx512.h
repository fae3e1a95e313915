/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/weight_only_small_avx512.h: the loops of the weight-only few-rows kernels (1..8 rows
 * x 32 columns, each K pair decoded in registers into vdpbf16ps), shared by weight_only_small_avx512.c
 * and, for FP8 with its byte tables, weight_only_vbmi_avx512.c (compiled with AVX512_VBMI). Included only
 * by those files. */
#ifndef MEGAMOE_GEMM_WEIGHT_ONLY_SMALL_AVX512_H
#define MEGAMOE_GEMM_WEIGHT_ONLY_SMALL_AVX512_H

#include "gemm/kernels/avx512/bf16_tile_avx512.h"
#include "gemm/kernels/avx512/weight_only_decode_avx512.h"

/* The pairs [kp, end) of one segment into the accumulators; tail: the pair of an odd K's last K (its
 * missing activation read as 0, as in bf16_tile_body's tail). */
static inline __attribute__((always_inline)) void small_segment(const mm_ukernel_args *p, wo_pairs *it,
                                                                int format, int mx_safe, int64_t kp,
                                                                int64_t end, int64_t tail, int rows,
                                                                __m512 acc[][2], const uint8_t *row[]) {
    for (; kp < end; kp++) {
        __m512i v[2];
        wo_pair(p, it, format, mx_safe, kp, v);
        int64_t i = kp - it->first_pair;
        if (__builtin_expect(kp != tail, 1)) {
            for (int r = 0; r < rows; r++) {
                __m512bh a = bf16_tile_broadcast(row[r] + 4 * i, 4);
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, (__m512bh)v[0]);
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, (__m512bh)v[1]);
            }
        } else {
            for (int r = 0; r < rows; r++) {
                __m512bh a = bf16_tile_broadcast(row[r] + 4 * i, 2);
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, (__m512bh)v[0]);
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, (__m512bh)v[1]);
            }
        }
    }
}

/* fp8_tables_allowed: as in wo_pairs_begin (1 only from a file compiled with AVX512_VBMI). */
static inline __attribute__((always_inline)) void small_tile(const mm_ukernel_args *p, int format,
                                                             int fp8_tables_allowed, int rows) {
    __m512 acc[MM_GEMM_WO_SMALL_MR][2];
    const uint8_t *row[MM_GEMM_WO_SMALL_MR];
    wo_pairs it;
    wo_pairs_begin(p, format, fp8_tables_allowed, &it);
    bf16_tile_start(p, rows, acc, row);
    int64_t tail = p->k_end & 1 ? it.end_pair - 1 : -1;
    for (int64_t kp = it.first_pair; kp < it.end_pair;) {
        wo_pairs_renew(p, &it, kp);
        int64_t segment_end = it.renew_at < it.end_pair ? it.renew_at : it.end_pair;
        /* Each case a loop of its own: FP8 blocks decoded by tables, UINT4 blocks by the fused decode, MX
         * blocks whose scales leave the exponent-addition window. */
        if (format == WO_FP8 && it.fp8_tables)
            small_segment(p, &it, WO_FP8_TABLES, 1, kp, segment_end, tail, rows, acc, row);
        else if (format == WO_UINT4 && it.block.uint4_fused)
            small_segment(p, &it, WO_UINT4_FUSED, 1, kp, segment_end, tail, rows, acc, row);
        else if (format != WO_FP4 || it.mx_block.safe)
            small_segment(p, &it, format, 1, kp, segment_end, tail, rows, acc, row);
        else
            small_segment(p, &it, format, 0, kp, segment_end, tail, rows, acc, row);
        kp = segment_end;
    }
    bf16_tile_finish(p, rows, acc);
}

static inline __attribute__((always_inline)) void small_run(const mm_ukernel_args *p, int format,
                                                            int fp8_tables_allowed) {
    switch (p->m) {
    case 1: small_tile(p, format, fp8_tables_allowed, 1); break;
    case 2: small_tile(p, format, fp8_tables_allowed, 2); break;
    case 3: small_tile(p, format, fp8_tables_allowed, 3); break;
    case 4: small_tile(p, format, fp8_tables_allowed, 4); break;
    case 5: small_tile(p, format, fp8_tables_allowed, 5); break;
    case 6: small_tile(p, format, fp8_tables_allowed, 6); break;
    case 7: small_tile(p, format, fp8_tables_allowed, 7); break;
    default: small_tile(p, format, fp8_tables_allowed, MM_GEMM_WO_SMALL_MR); break;
    }
}

#endif
