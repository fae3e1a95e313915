/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/gemm.h: the grouped expert GEMM layer (private API used by the MoE operators).
 *
 * Two steps, in the BLIS manner:
 *   1. mm_gemm_pack_weights: once per weight tensor (one expert's (K, N) or (N, K) matrix), re-lays the
 *      weights into column panels for the micro-kernels and precomputes what depends on weights only
 *      (column sums, F32 scales, INT4 offsets).
 *   2. mm_gemm_grouped: C_g = dequant(A_g) . dequant(W_g) for every group g (one expert's rows), split
 *      into (group, N-block, M-block) tasks on the process-wide pool.
 * The arithmetic per format pair is that of docs/mega_moe.md (see docs/gemm.md): INT8 x INT8 and
 * INT8 x INT4 accumulate exactly in INT32 and scale afterwards; BF16 and MX accumulate F32 products of
 * dequantized values. Every output element is reduced over the whole K by one kernel call, in a fixed
 * order, so results do not depend on the thread count.
 *
 * Internal API for tools: `megamoe bench ffn` (tools/bench/bench_ffn_expert.c) and the dispatch-combine demo
 * (tools/run/run_dc_ffn.c) pack weights and time the grouped GEMM through it; not part of include/megamoe/.
 */
#ifndef MEGAMOE_GEMM_GEMM_H
#define MEGAMOE_GEMM_GEMM_H

#include <stdint.h>

#include "megamoe/dtype.h"
#include "megamoe/status.h"

/* The largest K accepted for INT weights: INT32 accumulation of (a + 128) * w stays exact. */
#define MM_GEMM_INT_MAX_K 65536

/* One expert's weight matrix in its API form. */
typedef struct mm_gemm_weight_desc {
    mm_dtype dtype;           /* BF16, I8, INT4, FP8_E4M3FN, FP8_E5M2 or FP4_E2M1 */
    int64_t k;                /* reduction length */
    int64_t n;                /* output columns */
    int transposed;           /* 0: stored (K, N) row-major; 1: stored (N, K) row-major */
    const void *data;         /* 4-bit types: packed two per byte along the stored last dimension */
    const float *scales;      /* I8 / INT4: per-output-channel F32 scale s_W[n], (N,); required */
    const float *bias;        /* INT4 only, optional (N,) F32 bias of the A8W4-INT formula; NULL means
                                 the standard bias 8 * s_W[n] * sum_k W[k][n], i.e. no correction */
    const uint8_t *mx_scales; /* FP8 / FP4: E8M0 scales in the (N, ceil(K/64), 2) layout; required */
    /* Block-scaled weights for BF16 activations (FP8_E4M3FN with F32 block scales, UINT4 with zero points;
     * docs/gemm.md "weight-only formats"): the scale of element (k, n) is
     * block_scales[(n / block_n) * ceil(K / block_k) + k / block_k], its zero point (UINT4 only) the
     * same entry of zeros (0..15). When block_scales is set, mx_scales must be NULL. */
    const float *block_scales;
    int64_t block_n, block_k; /* >= 1 */
    const uint8_t *zeros;     /* UINT4: required, same layout as block_scales; else NULL */
} mm_gemm_weight_desc;

typedef struct mm_gemm_packed_weights mm_gemm_packed_weights; /* see gemm/packed.h */

/* Packs one weight matrix. *out receives a new object to release with mm_gemm_packed_free. */
mm_status mm_gemm_pack_weights(const mm_gemm_weight_desc *desc, mm_gemm_packed_weights **out, mm_error *err);

typedef struct mm_gemm_pack_options {
    /* 1: the N = 2I columns are gate [0, I) then up [I, 2I) of a gated activation, and each packed panel
     * takes 16 gate columns and the 16 matching up columns, so one output tile holds both halves of 16
     * activation outputs (for an epilogue that fuses the activation). The GEMM's output columns are then
     * in packed order: mm_gemm_packed_n_out = 32 * ceil(I/16) columns, packed column 32p + c is gate
     * column 16p + c (c < 16) or up column 16p + c - 16 (c >= 16); columns past I hold 0. */
    int interleave_gate_up;
} mm_gemm_pack_options;

/* mm_gemm_pack_weights with options (opts may be NULL: the defaults, all 0). */
mm_status mm_gemm_pack_weights_with(const mm_gemm_weight_desc *desc, const mm_gemm_pack_options *opts,
                                    mm_gemm_packed_weights **out, mm_error *err);
void mm_gemm_packed_free(mm_gemm_packed_weights *packed);
int64_t mm_gemm_packed_k(const mm_gemm_packed_weights *packed);
int64_t mm_gemm_packed_n(const mm_gemm_packed_weights *packed);
/* Columns of the GEMM's output: N, or the packed-order width with interleave_gate_up. */
int64_t mm_gemm_packed_n_out(const mm_gemm_packed_weights *packed);
mm_dtype mm_gemm_packed_dtype(const mm_gemm_packed_weights *packed);

/* Epilogue hook: called once per finished output tile, after the kernel has written the F32 values.
 * tile points at element (row0, col0) of group `group`'s output, with row stride ld (floats); it holds
 * rows x cols values that the hook may read and rewrite in place (activation, rounding, quantization).
 * When the group has no output matrix, tile is a scratch buffer valid only during the call. Tiles of
 * different tasks may be handed to different threads at the same time; the hook must be thread-safe. */
typedef void (*mm_gemm_epilogue_fn)(void *ctx, int64_t group, int64_t row0, int64_t col0, int rows, int cols,
                                    float *tile, int64_t ld);

/* One group: the rows routed to one expert, and that expert's packed weights. */
typedef struct mm_gemm_group {
    int64_t rows;               /* 0 allowed: the group costs nothing */
    const void *a;              /* first activation row, in the call's activation dtype */
    int64_t a_stride;           /* bytes from one row to the next (>= the row's bytes) */
    const float *a_row_scales;  /* I8 activations: one F32 scale per row */
    const uint8_t *a_mx_scales; /* MX activations: ceil(K/32) E8M0 bytes per row */
    int64_t a_mx_stride;        /* bytes between the scale rows (>= ceil(K/32)) */
    const mm_gemm_packed_weights *w;
    float *c; /* F32 output (rows, N) with row stride ldc; NULL: epilogue only */
    int64_t ldc;
} mm_gemm_group;

struct mm_gemm_kernel;

typedef struct mm_gemm_options {
    const struct mm_gemm_kernel *kernel; /* NULL: the registry's choice per format pair */
    mm_gemm_epilogue_fn epilogue;        /* NULL: none (then every group needs c) */
    void *epilogue_ctx;
} mm_gemm_options;

/* Runs every group. a_dtype: BF16; I8 (with per-row scales); FP8_E4M3FN / FP8_E5M2 / FP4_E2M1 (MX, with
 * E8M0 scales per 32 along K). opts may be NULL. Validates everything before computing anything. */
mm_status mm_gemm_grouped(mm_dtype a_dtype, int64_t n_groups, const mm_gemm_group *groups,
                          const mm_gemm_options *opts, mm_error *err);

#endif
