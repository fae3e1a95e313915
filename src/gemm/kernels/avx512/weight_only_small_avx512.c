/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/avx512/weight_only_small_avx512.c: the few-rows kernels of the weight-only pairs (BF16
 * activations x block-scaled FP8 E4M3, MX FP4, UINT4 with group scales and zeros), 1..8 rows x 32
 * columns, for decode-sized groups whose speed should be that of streaming the packed codes once.
 *
 * The general kernels (weight_only_avx512.c) dequantize each K block of the panel into a BF16 buffer and
 * then run the 8 x 32 tile over it; with one row the buffer's stores and reloads are most of the work.
 * Here each K pair is decoded in registers (weight_only_decode_avx512.h, the same decoders as the
 * prepare functions) and fed to vdpbf16ps at once: one instruction per pair and accumulator, in K order,
 * the odd K's tail pair with its missing activation as 0, exactly as bf16_tile_body runs over the
 * prepared block. So the result is bit for bit that of the general kernel and of the BF16 x BF16 GEMM on
 * w'. The decode is paid once per tile, so the registry chooses these kernels only up to one tile of
 * rows (MM_GEMM_WO_SMALL_MR). */
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

static inline __attribute__((always_inline)) void small_tile(const mm_ukernel_args *p, int format, int rows) {
    __m512 acc[MM_GEMM_WO_SMALL_MR][2];
    const uint8_t *row[MM_GEMM_WO_SMALL_MR];
    wo_pairs it;
    wo_pairs_begin(p, format, &it);
    bf16_tile_start(p, rows, acc, row);
    int64_t tail = p->k_end & 1 ? it.end_pair - 1 : -1;
    for (int64_t kp = it.first_pair; kp < it.end_pair;) {
        wo_pairs_renew(p, &it, kp);
        int64_t segment_end = it.renew_at < it.end_pair ? it.renew_at : it.end_pair;
        /* MX blocks whose scales leave the exponent-addition window: a loop of their own. */
        if (format != WO_FP4 || it.mx_block.safe)
            small_segment(p, &it, format, 1, kp, segment_end, tail, rows, acc, row);
        else
            small_segment(p, &it, format, 0, kp, segment_end, tail, rows, acc, row);
        kp = segment_end;
    }
    bf16_tile_finish(p, rows, acc);
}

static inline __attribute__((always_inline)) void small_run(const mm_ukernel_args *p, int format) {
    switch (p->m) {
    case 1: small_tile(p, format, 1); break;
    case 2: small_tile(p, format, 2); break;
    case 3: small_tile(p, format, 3); break;
    case 4: small_tile(p, format, 4); break;
    case 5: small_tile(p, format, 5); break;
    case 6: small_tile(p, format, 6); break;
    case 7: small_tile(p, format, 7); break;
    default: small_tile(p, format, MM_GEMM_WO_SMALL_MR); break;
    }
}

void mm_ukernel_bf16_fp8_block_small_avx512(const mm_ukernel_args *p) {
    small_run(p, WO_FP8);
}
void mm_ukernel_bf16_uint4_small_avx512(const mm_ukernel_args *p) {
    small_run(p, WO_UINT4);
}
void mm_ukernel_bf16_fp4_small_avx512(const mm_ukernel_args *p) {
    small_run(p, WO_FP4);
}
