/* SPDX-License-Identifier: Apache-2.0 */
/* ffn/ffn.c: the expert FFN (ffn.h) on a batch of row groups (spec steps 2-6): one grouped GEMM1 over
 * every group, the activation (BF16 rounding of H for A16W16, activation, optional gating weight,
 * GEMM2-input rounding or quantization), one grouped GEMM2 whose epilogue writes BF16 rows.
 *
 * Fused path (gated activations, GEMM1 weights packed gate/up interleaved, see ops/mega_moe/weights.c):
 * GEMM1's epilogue receives tiles holding 16 gate and the 16 matching up columns and applies the activation
 * right there, while the tile is in cache; the F32 GEMM1 output never goes to memory. With a BF16
 * GEMM2 input the epilogue also writes the rounded GEMM2 input; INT8 / MX inputs need a whole row
 * (row amax, 32-blocks across tiles), so the epilogue keeps the F32 activation row in h; in small
 * batches (decode) the tile that completes a row quantizes it (a per-row count of the outputs written
 * decides which), in large ones a light pass over the rows follows GEMM1.
 * Unfused path (gelu, or plain packing): GEMM1 writes F32 rows, then one pass does the rest. Both
 * evaluate the same F32 operations on the same values per element, so they give the same bits.
 *
 * MegaMoE's routed experts call it once per batch of finished experts, shared experts once per call.
 * Each row's result depends only on that row, so batching never changes bits. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/parallel.h"
#include "gemm/packed.h"
#include "megamoe/formats.h"
#include "ffn/ffn.h"

#define ACT_ROWS_PER_TASK 8
/* GEMM1's epilogue quantizes an INT8 / MX GEMM2 input when a batch has at most this many rows per
 * expert on average: fused, decode saves the separate pass's pool round trip, while prefill was slower
 * with it, so it keeps the separate pass (measured: docs/mega_moe.md, Performance, 'Fused activation'). */
#define FUSED_QUANT_MAX_ROWS_PER_GROUP 16

static size_t round_up(size_t v, size_t a) {
    return (v + a - 1) / a * a;
}

static int64_t a2_stride_of(int64_t k2) {
    return (int64_t)round_up((size_t)(2 * k2), 64);
}
static int64_t a2_mx_stride_of(int64_t k2) {
    return (int64_t)round_up((size_t)((k2 + 31) / 32), 16);
}

size_t mm_ffn_scratch_bytes(int64_t rows, int64_t hidden, int64_t inter, int64_t k2) {
    (void)hidden;
    size_t n = 0;
    n += round_up((size_t)(rows * 2 * inter) * sizeof(float), 64);
    n += (size_t)(rows * a2_stride_of(k2));
    n += round_up((size_t)rows * sizeof(float), 64);
    n += round_up((size_t)(rows * a2_mx_stride_of(k2)), 64);
    n += round_up((size_t)rows * sizeof(int32_t), 64);
    return n + 64;
}

void mm_ffn_scratch_init(mm_ffn_scratch *s, void *mem, int64_t rows, int64_t hidden, int64_t inter,
                         int64_t k2) {
    (void)hidden;
    uint8_t *p = (uint8_t *)round_up((size_t)mem, 64);
    s->h = (float *)p;
    p += round_up((size_t)(rows * 2 * inter) * sizeof(float), 64);
    s->a2 = p;
    s->a2_stride = a2_stride_of(k2);
    p += (size_t)(rows * s->a2_stride);
    s->a2_scales = (float *)p;
    p += round_up((size_t)rows * sizeof(float), 64);
    s->a2_mx = p;
    s->a2_mx_stride = a2_mx_stride_of(k2);
    p += round_up((size_t)(rows * s->a2_mx_stride), 64);
    s->row_done = (_Atomic int32_t *)p;
}

typedef struct act_task {
    int64_t group, row0, rows;
} act_task;

typedef struct ffn_ctx {
    const mm_ffn_job *job;
    const act_task *tasks;
    int fused; /* the activation ran in GEMM1's epilogue */
} ffn_ctx;

/* What GEMM1's fused epilogue needs: the job, and whether it also quantizes the GEMM2 input. */
typedef struct epilogue_ctx {
    const mm_ffn_job *job;
    int quantize; /* INT8 / MX GEMM2 input: the tile completing a row quantizes it */
} epilogue_ctx;

/* The GEMM2 input of row r from its K2 F32 activation values h (spec step 5). */
static void quantize_gemm2_input(const mm_ffn_job *job, const mm_rowops *ops, int64_t r, float *h) {
    const mm_ffn_scratch *s = job->scratch;
    int64_t K2 = job->k2;
    uint8_t *q = s->a2 + r * s->a2_stride;
    switch (job->gemm2_dtype) {
    case MM_DTYPE_BF16: ops->to_bf16((uint16_t *)q, h, K2); break;
    case MM_DTYPE_I8:
        ops->int8_mul_even(h, K2, MM_INT8_SCALE_AMAX_DIV_127, (int8_t *)q, &s->a2_scales[r]);
        break;
    default: mm_mx_quantize_row_f32(h, K2, job->gemm2_dtype, q, s->a2_mx + r * s->a2_mx_stride, NULL); break;
    }
}

/* Unfused: activation and GEMM2-input rounding of rows whose F32 GEMM1 output is in h. Fused (large
 * batches, INT8 / MX GEMM2 input): only the quantization of the activation rows the epilogue left in h. */
static void act_rows(void *ctx_, int64_t t) {
    const ffn_ctx *ctx = ctx_;
    const mm_ffn_job *job = ctx->job;
    const mm_ffn_scratch *s = job->scratch;
    const mm_rowops *ops = mm_rowops_get();
    int64_t I = job->inter, K2 = job->k2;
    for (int64_t r = ctx->tasks[t].row0; r < ctx->tasks[t].row0 + ctx->tasks[t].rows; r++) {
        float *h = s->h + r * 2 * I;
        if (!ctx->fused) {
            const float *b1 = job->groups[ctx->tasks[t].group].bias1;
            if (b1)
                for (int64_t j = 0; j < 2 * I; j++) h[j] = h[j] + b1[j];
            if (job->round_h_bf16) ops->round_bf16(h, 2 * I);
            mm_ffn_act_row(job->act, h, I, h); /* in place: output j only reads inputs j and I + j */
            if (job->row_weights) {
                float w = job->row_weights[r];
                for (int64_t j = 0; j < K2; j++) h[j] = h[j] * w;
            }
        }
        quantize_gemm2_input(job, ops, r, h);
    }
}

/* Fused GEMM1 epilogue: the tile's columns are gate 16p..16p+15 then the matching up columns (packed
 * order, col0 = 32p); activation output j = 16p + c goes to the BF16 GEMM2 input, or to h. An INT8 / MX
 * GEMM2 input needs the whole row (its amax, 32-blocks spanning two tiles): each tile adds its outputs
 * to the row's count, and the tile that completes the row (acquiring the other tiles' writes of h)
 * quantizes it while it is still in cache, with no separate pass and no wait for it. The same
 * per-element operations as act_rows, so the same bits. */
static void gemm1_act_epilogue(void *ctx_, int64_t group, int64_t row0, int64_t col0, int rows, int cols,
                               float *tile, int64_t ld) {
    const epilogue_ctx *ectx = ctx_;
    const mm_ffn_job *job = ectx->job;
    const mm_ffn_scratch *s = job->scratch;
    int64_t I = job->inter, j0 = col0 / 2;
    int n = (int)(I - j0 < 16 ? I - j0 : 16);
    int a16 = job->round_h_bf16, bf16_out = job->gemm2_dtype == MM_DTYPE_BF16;
    const mm_rowops *ops = mm_rowops_get();
    const float *b1 = job->groups[group].bias1;
    float act[16];
    (void)cols;
    for (int r = 0; r < rows; r++) {
        int64_t row = job->groups[group].row0 + row0 + r;
        float *t = tile + r * ld;
        if (b1) /* packed order: gate columns j0.., then the matching up columns */
            for (int c = 0; c < n; c++) {
                t[c] = t[c] + b1[j0 + c];
                t[16 + c] = t[16 + c] + b1[I + j0 + c];
            }
        if (a16) ops->round_bf16(t, 32);
        mm_ffn_act_rows(job->act, t, t + 16, act, n);
        if (job->row_weights) {
            float w = job->row_weights[row];
            for (int c = 0; c < n; c++) act[c] = act[c] * w;
        }
        if (bf16_out) {
            ops->to_bf16((uint16_t *)(s->a2 + row * s->a2_stride) + j0, act, n);
            continue;
        }
        memcpy(s->h + row * 2 * I + j0, act, (size_t)n * sizeof(float));
        if (ectx->quantize && atomic_fetch_add_explicit(&s->row_done[row], n, memory_order_acq_rel) + n == I)
            quantize_gemm2_input(job, ops, row, s->h + row * 2 * I);
    }
}

/* GEMM2 epilogue: the F32 tile rounded to the BF16 expert output rows. */
static void gemm2_epilogue(void *ctx_, int64_t group, int64_t row0, int64_t col0, int rows, int cols,
                           float *tile, int64_t ld) {
    const mm_ffn_job *job = ctx_;
    const mm_rowops *ops = mm_rowops_get();
    int64_t base = job->groups[group].row0 + row0;
    const float *b2 = job->groups[group].bias2;
    for (int r = 0; r < rows; r++) {
        uint16_t *dst = job->row_dst && job->row_dst[base + r] ? job->row_dst[base + r]
                                                               : job->out + (base + r) * job->hidden;
        if (b2) {
            float *t = tile + r * ld;
            float w = job->row_weights ? job->row_weights[base + r] : 1.0f;
            for (int c = 0; c < cols; c++) t[c] = t[c] + (job->row_weights ? w * b2[col0 + c] : b2[col0 + c]);
        }
        ops->to_bf16(dst + col0, tile + r * ld, cols);
    }
}

mm_status mm_ffn_run(const mm_ffn_job *job, mm_error *err) {
    mm_status st = MM_OK;
    int64_t n = job->n_groups, n_tasks = 0;
    const mm_ffn_scratch *s = job->scratch;
    mm_gemm_group *g = calloc((size_t)(n > 0 ? n : 1), sizeof *g);
    act_task *tasks = NULL;
    for (int64_t i = 0; i < n; i++)
        n_tasks += (job->groups[i].rows + ACT_ROWS_PER_TASK - 1) / ACT_ROWS_PER_TASK;
    tasks = malloc((size_t)(n_tasks > 0 ? n_tasks : 1) * sizeof *tasks);
    if (!g || !tasks) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert FFN task tables: out of memory");
        goto done;
    }
    /* Fused when every group's GEMM1 weights are interleaved (a weights handle packs all alike). */
    int fused = n > 0;
    for (int64_t i = 0; i < n; i++) fused = fused && job->groups[i].w1->interleave_gate_up;
    double t0 = mm_now_seconds();
    for (int64_t i = 0; i < n; i++) {
        const mm_ffn_group *src = &job->groups[i];
        g[i] = (mm_gemm_group){src->rows,
                               src->a,
                               src->a_stride,
                               src->a_row_scales,
                               src->a_mx,
                               src->a_mx_stride,
                               src->w1,
                               fused ? NULL : s->h + src->row0 * 2 * job->inter,
                               fused ? 0 : 2 * job->inter};
    }
    /* INT8 / MX GEMM2 input with the fused activation: quantized by GEMM1's epilogue when the groups are
     * small (decode), where the separate pass cost a pool round trip per batch; with many rows per group
     * the separate pass, split evenly over the cores, is faster (measured: docs/mega_moe.md, Performance,
     * 'Fused activation'; row counts start from 0). */
    int64_t total_rows = 0;
    for (int64_t i = 0; i < n; i++) total_rows += job->groups[i].rows;
    epilogue_ctx ectx = {job, fused && job->gemm2_dtype != MM_DTYPE_BF16 &&
                                  total_rows <= FUSED_QUANT_MAX_ROWS_PER_GROUP * n};
    if (ectx.quantize)
        for (int64_t i = 0; i < n; i++)
            for (int64_t r = 0; r < job->groups[i].rows; r++)
                atomic_store_explicit(&s->row_done[job->groups[i].row0 + r], 0, memory_order_relaxed);
    mm_gemm_options opts1 = {job->kernel1, fused ? gemm1_act_epilogue : NULL, &ectx};
    st = mm_gemm_grouped(job->input_dtype, n, g, &opts1, err);
    if (st != MM_OK) goto done;
    double t1 = mm_now_seconds();
    int64_t t = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t r = 0; r < job->groups[i].rows; r += ACT_ROWS_PER_TASK) {
            int64_t left = job->groups[i].rows - r;
            tasks[t++] =
                (act_task){i, job->groups[i].row0 + r, left < ACT_ROWS_PER_TASK ? left : ACT_ROWS_PER_TASK};
        }
    ffn_ctx ctx = {job, tasks, fused};
    if (!fused || (job->gemm2_dtype != MM_DTYPE_BF16 && !ectx.quantize))
        mm_parallel_for(n_tasks, act_rows, &ctx);
    double t2 = mm_now_seconds();
    for (int64_t i = 0; i < n; i++) {
        const mm_ffn_group *src = &job->groups[i];
        g[i] = (mm_gemm_group){src->rows,
                               s->a2 + src->row0 * s->a2_stride,
                               s->a2_stride,
                               s->a2_scales + src->row0,
                               s->a2_mx + src->row0 * s->a2_mx_stride,
                               s->a2_mx_stride,
                               src->w2,
                               NULL,
                               0};
    }
    mm_gemm_options opts = {job->kernel2, gemm2_epilogue, (void *)job};
    st = mm_gemm_grouped(job->gemm2_dtype, n, g, &opts, err);
    if (st != MM_OK) goto done;
    double t3 = mm_now_seconds();
    if (job->timing) {
        job->timing(job->timing_ctx, MM_FFN_STAGE_GEMM1, t0, t1);
        job->timing(job->timing_ctx, MM_FFN_STAGE_ACTIVATION, t1, t2);
        job->timing(job->timing_ctx, MM_FFN_STAGE_GEMM2, t2, t3);
    }
done:
    free(g);
    free(tasks);
    return st;
}
