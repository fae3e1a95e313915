/* SPDX-License-Identifier: Apache-2.0 */
/* ffn/ffn.h: the expert FFN (spec steps 2-6) as one library module: rows of several experts through
 * one grouped GEMM1, the activation (activation.h; optional BF16 rounding of GEMM1's output, optional
 * per-row gating weight, the GEMM2-input rounding or quantization with the row kernels of rowops.h),
 * one grouped GEMM2 whose epilogue writes BF16 rows. It knows nothing of a MegaMoE buffer or call:
 * the caller gives the packed weights, its rows (already in GEMM1's input dtype), scratch, the output
 * rows and, if it wants them, a timing callback and kernel choices.
 *
 * Users: MegaMoE (ops/mega_moe: routed experts per finished batch, shared experts, the compute-only
 * baseline), `megamoe run --op dispatch-combine` (tools/run/run_dc_ffn.c) and `megamoe bench ffn`
 * (tools/bench/bench_ffn_expert.c). A local "x (T, H), top-k ids / weights -> y" over packed per-expert
 * weights of one process calls it directly: gather each expert's rows contiguously (one mm_ffn_group
 * per expert with rows, rows numbered globally from 0), pass the top-k weights in row_weights when they
 * scale the activation output (or weigh the BF16 outputs afterwards), and point row_dst at each row's
 * destination. Each row's result depends only on that row, so batching never changes bits.
 *
 * Private (tools may include it): not part of include/megamoe/. */
#ifndef MEGAMOE_FFN_FFN_H
#define MEGAMOE_FFN_FFN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ffn/activation.h"
#include "ffn/rowops.h"
#include "gemm/gemm.h"
#include "megamoe/formats.h"

/* The rows of one expert: rows row0 .. row0 + rows - 1 of the job (global index), their GEMM1 input
 * and the expert's packed weights (w1: H x 2I, gate/up interleaved for the fused path; w2: K2 x H). */
typedef struct mm_ffn_group {
    int64_t row0, rows;
    const uint8_t *a; /* first row in the job's input_dtype */
    int64_t a_stride;
    const float *a_row_scales; /* I8: the rows' scales, contiguous */
    const uint8_t *a_mx;       /* MX: the rows' E8M0 scales */
    int64_t a_mx_stride;
    const mm_gemm_packed_weights *w1, *w2;
    /* Optional F32 biases (NULL = none; docs/weight_formats.md): bias1 (2I, gate [0, I) then up) is added
     * to GEMM1's F32 output before any rounding or the activation, bias2 (H) to GEMM2's F32 output before
     * its BF16 rounding, times the row's weight when row_weights scale the activation output (so the bias
     * is weighted like the rest of the expert's output). */
    const float *bias1, *bias2;
} mm_ffn_group;

/* Scratch of a job: row r (global index) has its F32 / quantized intermediates at index r. */
typedef struct mm_ffn_scratch {
    float *h;    /* rows x 2I */
    uint8_t *a2; /* rows x a2_stride: GEMM2 input */
    int64_t a2_stride;
    float *a2_scales;
    uint8_t *a2_mx;
    int64_t a2_mx_stride;
    _Atomic int32_t *row_done; /* fused quantization: activation outputs of each row written so far */
} mm_ffn_scratch;

size_t mm_ffn_scratch_bytes(int64_t rows, int64_t hidden, int64_t inter, int64_t k2);
/* Lays the scratch out in mem (mm_ffn_scratch_bytes bytes). */
void mm_ffn_scratch_init(mm_ffn_scratch *s, void *mem, int64_t rows, int64_t hidden, int64_t inter,
                         int64_t k2);

/* The three timed stages of a job. */
typedef enum mm_ffn_stage { MM_FFN_STAGE_GEMM1, MM_FFN_STAGE_ACTIVATION, MM_FFN_STAGE_GEMM2 } mm_ffn_stage;
/* Called once per stage after a successful job, with mm_now_seconds() times. */
typedef void (*mm_ffn_timing_fn)(void *ctx, mm_ffn_stage stage, double begin, double end);

typedef struct mm_ffn_job {
    mm_dtype input_dtype; /* GEMM1 activation type: BF16, I8 or an MX element type */
    mm_dtype gemm2_dtype; /* GEMM2 input type: BF16, I8 (mul-even rule) or an MX element type */
    int round_h_bf16;     /* GEMM1's F32 output rounded to BF16 before the activation (A16W16) */
    const mm_ffn_act *act;
    int64_t hidden, inter, k2; /* k2 = mm_ffn_act_k2(act->kind, inter) */
    int64_t n_groups;
    const mm_ffn_group *groups;
    const float *row_weights; /* per global row: multiplies the activation output (NULL = none) */
    mm_ffn_scratch *scratch;
    uint16_t *out;            /* BF16 rows x H at the global row index */
    uint16_t *const *row_dst; /* NULL, or per global row: where its BF16 output goes instead of out
                                 (NULL entries use out) */
    mm_ffn_timing_fn timing;  /* NULL = none */
    void *timing_ctx;
    const struct mm_gemm_kernel *kernel1, *kernel2; /* NULL = the registry's choice */
} mm_ffn_job;

/* Runs the job on the process's pool. Fused path (gated activation and every w1 interleaved): the
 * activation runs in GEMM1's epilogue; otherwise a separate pass. Both give the same bits. */
mm_status mm_ffn_run(const mm_ffn_job *job, mm_error *err);

#endif
