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

/* One panel's segment [kp, end) with the decode its parameters allow. */
static inline __attribute__((always_inline)) void small_panel_segment(const mm_ukernel_args *p, wo_pairs *it,
                                                                      int format, int64_t kp, int64_t end,
                                                                      int64_t tail, int rows, __m512 acc[][2],
                                                                      const uint8_t *row[]) {
    /* Each case a loop of its own: FP8 blocks decoded by tables, UINT4 blocks by the fused decode, MX
     * blocks whose scales leave the exponent-addition window. */
    if (format == WO_FP8 && it->fp8_tables)
        small_segment(p, it, WO_FP8_TABLES, 1, kp, end, tail, rows, acc, row);
    else if (format == WO_UINT4 && it->block.uint4_fused)
        small_segment(p, it, WO_UINT4_FUSED, 1, kp, end, tail, rows, acc, row);
    else if (format != WO_FP4 || it->mx_block.safe)
        small_segment(p, it, format, 1, kp, end, tail, rows, acc, row);
    else
        small_segment(p, it, format, 0, kp, end, tail, rows, acc, row);
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
        small_panel_segment(p, &it, format, kp, segment_end, tail, rows, acc, row);
        kp = segment_end;
    }
    bf16_tile_finish(p, rows, acc);
}

static inline __attribute__((always_inline)) void small_run_one(const mm_ukernel_args *p, int format,
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

/* The segment's decode when it is the fast one of its format (FP8 tables, fused UINT4, MX inside the
 * exponent window), else -1. */
static inline __attribute__((always_inline)) int fast_segment_format(int format, const wo_pairs *it) {
    if (format == WO_FP8) return it->fp8_tables ? WO_FP8_TABLES : -1;
    if (format == WO_UINT4) return it->block.uint4_fused ? WO_UINT4_FUSED : -1;
    return it->mx_block.safe ? format : -1;
}

/* Two panels' pairs [kp, end) of one segment in lockstep (their columns' chains are independent, so
 * each keeps its order), both with the fast decode `format`. Named variables rather than arrays of two:
 * GCC keeps the iterators' vectors in registers only so. */
static inline __attribute__((always_inline)) void pair_segment(const mm_ukernel_args *p0, wo_pairs *it0,
                                                               const mm_ukernel_args *p1, wo_pairs *it1,
                                                               int format, int64_t kp, int64_t end,
                                                               int64_t tail, int rows, __m512 acc0[][2],
                                                               __m512 acc1[][2], const uint8_t *row[]) {
    for (; kp < end; kp++) {
        __m512i v0[2], v1[2];
        wo_pair(p0, it0, format, 1, kp, v0);
        wo_pair(p1, it1, format, 1, kp, v1);
        int64_t i = kp - it0->first_pair;
        for (int r = 0; r < rows; r++) {
            /* bf16_tile_broadcast wants a constant length (a variable one copies byte by byte). */
            __m512bh a = __builtin_expect(kp != tail, 1) ? bf16_tile_broadcast(row[r] + 4 * i, 4)
                                                         : bf16_tile_broadcast(row[r] + 4 * i, 2);
            acc0[r][0] = _mm512_dpbf16_ps(acc0[r][0], a, (__m512bh)v0[0]);
            acc0[r][1] = _mm512_dpbf16_ps(acc0[r][1], a, (__m512bh)v0[1]);
            acc1[r][0] = _mm512_dpbf16_ps(acc1[r][0], a, (__m512bh)v1[0]);
            acc1[r][1] = _mm512_dpbf16_ps(acc1[r][1], a, (__m512bh)v1[1]);
        }
    }
}

/* One or two rows over a panel and its neighbour (args->next_panel): with so few rows the chains of
 * vdpbf16ps, one per 16 columns and row, wait on each other's latency; two panels double them. Segments
 * where either panel needs its general decode run panel by panel. */
static inline __attribute__((always_inline)) void pair_tile(const mm_ukernel_args *p0, int format,
                                                            int fp8_tables_allowed, int rows) {
    const mm_ukernel_args *p1 = p0->next_panel;
    __m512 acc0[2][2], acc1[2][2];
    const uint8_t *row0[2], *row1[2];
    wo_pairs it0, it1;
    wo_pairs_begin(p0, format, fp8_tables_allowed, &it0);
    wo_pairs_begin(p1, format, fp8_tables_allowed, &it1);
    bf16_tile_start(p0, rows, acc0, row0);
    bf16_tile_start(p1, rows, acc1, row1);
    int64_t tail = p0->k_end & 1 ? it0.end_pair - 1 : -1;
    for (int64_t kp = it0.first_pair; kp < it0.end_pair;) {
        wo_pairs_renew(p0, &it0, kp);
        wo_pairs_renew(p1, &it1, kp);
        int64_t segment_end = it0.renew_at < it0.end_pair ? it0.renew_at : it0.end_pair;
        int fast = fast_segment_format(format, &it0);
        if (fast >= 0 && fast == fast_segment_format(format, &it1)) {
            if (format == WO_FP8)
                pair_segment(p0, &it0, p1, &it1, WO_FP8_TABLES, kp, segment_end, tail, rows, acc0, acc1,
                             row0);
            else if (format == WO_UINT4)
                pair_segment(p0, &it0, p1, &it1, WO_UINT4_FUSED, kp, segment_end, tail, rows, acc0, acc1,
                             row0);
            else
                pair_segment(p0, &it0, p1, &it1, format, kp, segment_end, tail, rows, acc0, acc1, row0);
        } else {
            small_panel_segment(p0, &it0, format, kp, segment_end, tail, rows, acc0, row0);
            small_panel_segment(p1, &it1, format, kp, segment_end, tail, rows, acc1, row1);
        }
        kp = segment_end;
    }
    bf16_tile_finish(p0, rows, acc0);
    bf16_tile_finish(p1, rows, acc1);
}

/* Every row count 1..MM_GEMM_WO_SMALL_MR; with a paired panel (kernel.h: pairs_panels), 1 or 2 rows
 * run both panels in lockstep, more rows one panel after the other. */
static inline __attribute__((always_inline)) void small_run(const mm_ukernel_args *p, int format,
                                                            int fp8_tables_allowed) {
    if (p->next_panel && p->m <= MM_GEMM_WO_PAIRS_MAX_ROWS) {
        if (p->m == 1)
            pair_tile(p, format, fp8_tables_allowed, 1);
        else
            pair_tile(p, format, fp8_tables_allowed, 2);
        return;
    }
    if (p->next_panel) small_run_one(p->next_panel, format, fp8_tables_allowed);
    small_run_one(p, format, fp8_tables_allowed);
}

#endif
