/* ops/mega_moe/ffn.c: the expert FFN on a batch of row groups (spec steps 2-6): one grouped GEMM1 over
 * every group, the activation pass (BF16 rounding of H for A16W16, activation, optional gating weight,
 * GEMM2-input rounding or quantization), one grouped GEMM2 whose epilogue writes BF16 rows.
 *
 * Routed experts call it once per batch of source ranks whose rows have arrived, shared experts once
 * per call. Each row's result depends only on that row, so batching never changes bits. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/mega_moe_internal.h"

#define ACT_ROWS_PER_TASK 8

static size_t round_up(size_t v, size_t a) {
    return (v + a - 1) / a * a;
}

static int64_t a2_stride_of(int64_t k2) {
    return (int64_t)round_up((size_t)(2 * k2), 64);
}
static int64_t a2_mx_stride_of(int64_t k2) {
    return (int64_t)round_up((size_t)((k2 + 31) / 32), 16);
}

size_t mm_moe_ffn_scratch_bytes(int64_t rows, int64_t hidden, int64_t inter, int64_t k2) {
    (void)hidden;
    size_t n = 0;
    n += round_up((size_t)(rows * 2 * inter) * sizeof(float), 64);
    n += (size_t)(rows * a2_stride_of(k2));
    n += round_up((size_t)rows * sizeof(float), 64);
    n += round_up((size_t)(rows * a2_mx_stride_of(k2)), 64);
    return n + 64;
}

void mm_moe_ffn_scratch_init(mm_moe_ffn_scratch *s, void *mem, int64_t rows, int64_t hidden, int64_t inter,
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
    s->o = NULL;
}

typedef struct act_task {
    int64_t row0, rows;
} act_task;

typedef struct ffn_ctx {
    const mm_moe_ffn_job *job;
    const act_task *tasks;
} ffn_ctx;

static void act_rows(void *ctx_, int64_t t) {
    const ffn_ctx *ctx = ctx_;
    const mm_moe_ffn_job *job = ctx->job;
    const mm_moe_ffn_scratch *s = job->scratch;
    int64_t I = job->inter, K2 = job->k2;
    for (int64_t r = ctx->tasks[t].row0; r < ctx->tasks[t].row0 + ctx->tasks[t].rows; r++) {
        float *h = s->h + r * 2 * I;
        if (job->path->scenario == MM_MOE_SCENARIO_A16W16)
            for (int64_t j = 0; j < 2 * I; j++) h[j] = mm_moe_bf16_to_f32(mm_moe_f32_to_bf16(h[j]));
        mm_moe_act_row(job->act, h, I, h); /* in place: output j only reads inputs j and I + j */
        if (job->row_weights) {
            float w = job->row_weights[r];
            for (int64_t j = 0; j < K2; j++) h[j] = h[j] * w;
        }
        uint8_t *q = s->a2 + r * s->a2_stride;
        switch (job->path->gemm2_dtype) {
        case MM_DTYPE_BF16:
            for (int64_t j = 0; j < K2; j++) ((uint16_t *)q)[j] = mm_moe_f32_to_bf16(h[j]);
            break;
        case MM_DTYPE_I8:
            mm_int8_quantize_row_mul_even(h, K2, MM_INT8_SCALE_AMAX_DIV_127, (int8_t *)q, &s->a2_scales[r]);
            break;
        default:
            mm_mx_quantize_row_f32(h, K2, job->path->gemm2_dtype, q, s->a2_mx + r * s->a2_mx_stride, NULL);
            break;
        }
    }
}

/* GEMM2 epilogue: the F32 tile rounded to the BF16 expert output rows. */
static void gemm2_epilogue(void *ctx_, int64_t group, int64_t row0, int64_t col0, int rows, int cols,
                           float *tile, int64_t ld) {
    const mm_moe_ffn_job *job = ctx_;
    int64_t base = job->groups[group].row0 + row0;
    for (int r = 0; r < rows; r++) {
        uint16_t *dst = job->out + (base + r) * job->hidden + col0;
        const float *src = tile + r * ld;
        for (int c = 0; c < cols; c++) dst[c] = mm_moe_f32_to_bf16(src[c]);
    }
}

mm_status mm_moe_ffn_run(const mm_moe_ffn_job *job, mm_error *err) {
    mm_status st = MM_OK;
    int64_t n = job->n_groups, n_tasks = 0;
    const mm_moe_ffn_scratch *s = job->scratch;
    mm_gemm_group *g = calloc((size_t)(n > 0 ? n : 1), sizeof *g);
    act_task *tasks = NULL;
    for (int64_t i = 0; i < n; i++)
        n_tasks += (job->groups[i].rows + ACT_ROWS_PER_TASK - 1) / ACT_ROWS_PER_TASK;
    tasks = malloc((size_t)(n_tasks > 0 ? n_tasks : 1) * sizeof *tasks);
    if (!g || !tasks) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert FFN task tables: out of memory");
        goto done;
    }
    double t0 = mm_moe_now();
    for (int64_t i = 0; i < n; i++) {
        const mm_moe_ffn_group *src = &job->groups[i];
        g[i] =
            (mm_gemm_group){src->rows,     src->a,           src->a_stride, src->a_row_scales,
                            src->a_mx,     src->a_mx_stride, src->w1,       s->h + src->row0 * 2 * job->inter,
                            2 * job->inter};
    }
    st = mm_gemm_grouped(job->path->input_dtype, n, g, NULL, err);
    if (st != MM_OK) goto done;
    double t1 = mm_moe_now();
    int64_t t = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t r = 0; r < job->groups[i].rows; r += ACT_ROWS_PER_TASK) {
            int64_t left = job->groups[i].rows - r;
            tasks[t++] =
                (act_task){job->groups[i].row0 + r, left < ACT_ROWS_PER_TASK ? left : ACT_ROWS_PER_TASK};
        }
    ffn_ctx ctx = {job, tasks};
    mm_parallel_for(n_tasks, act_rows, &ctx);
    double t2 = mm_moe_now();
    for (int64_t i = 0; i < n; i++) {
        const mm_moe_ffn_group *src = &job->groups[i];
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
    mm_gemm_options opts = {NULL, gemm2_epilogue, (void *)job};
    st = mm_gemm_grouped(job->path->gemm2_dtype, n, g, &opts, err);
    if (st != MM_OK) goto done;
    double t3 = mm_moe_now();
    if (job->timing) {
        mm_moe_stats_event(job->timing, MM_MEGA_MOE_STAGE_GEMM1, t0, t1);
        mm_moe_stats_event(job->timing, MM_MEGA_MOE_STAGE_ACTIVATION, t1, t2);
        mm_moe_stats_event(job->timing, MM_MEGA_MOE_STAGE_GEMM2, t2, t3);
    }
done:
    free(g);
    free(tasks);
    return st;
}
