/* tools/run_dc_ffn.c: the expert FFN that `megamoe run --op dispatch-combine` and `megamoe bench
 * dispatch-combine` run on Dispatch's rows: a BF16 SwiGLU expert per local expert through the grouped
 * GEMM layer (src/gemm/gemm.h, private: this file and run_moe_check.c are the CLI files that see src/),
 * GEMM1 (H -> 2I), silu(gate) x up rounded to BF16, GEMM2 (I -> H) rounded to BF16. With TP = 2 each TP
 * rank holds half of I (gate/up columns and GEMM2 rows), so its output is a partial sum that Combine's
 * reduce-scatter completes. Weights are seeded per (expert, TP rank). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "demo_data.h"
#include "core/error.h"
#include "core/parallel.h"
#include "gemm/gemm.h"
#include "megamoe/formats.h"
#include "run_dc_ffn.h"

struct cli_dc_ffn {
    int64_t experts, hidden, inter; /* inter: this TP rank's share */
    mm_gemm_packed_weights **w1, **w2;
    float *h;        /* rows x 2I */
    uint16_t *a2;    /* rows x I */
    uint16_t *a_deq; /* rows x H (INT8 input dequantized) */
    int64_t cap_rows;
};

static uint16_t seeded_bf16(uint64_t *s, float scale) {
    uint64_t z = cli_rand_u64(s);
    return mm_f32_to_bf16(scale * ((float)(z >> 40) / (float)(1u << 24) * 2.0f - 1.0f));
}

void cli_dc_ffn_free(cli_dc_ffn *f) {
    if (!f) return;
    for (int64_t e = 0; e < f->experts; e++) {
        if (f->w1) mm_gemm_packed_free(f->w1[e]);
        if (f->w2) mm_gemm_packed_free(f->w2[e]);
    }
    free(f->w1), free(f->w2), free(f->h), free(f->a2), free(f->a_deq), free(f);
}

mm_status cli_dc_ffn_create(int64_t experts, int64_t expert_base, int64_t hidden, int64_t inter,
                            int64_t tp_rank, int64_t tpw, cli_dc_ffn **out, mm_error *err) {
    *out = NULL;
    cli_dc_ffn *f = calloc(1, sizeof *f);
    mm_status st = MM_OK;
    uint16_t *w1 = NULL, *w2 = NULL;
    if (!f) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert FFN: out of memory");
    f->experts = experts, f->hidden = hidden, f->inter = inter / tpw;
    int64_t I = f->inter;
    f->w1 = calloc((size_t)experts, sizeof *f->w1);
    f->w2 = calloc((size_t)experts, sizeof *f->w2);
    w1 = malloc((size_t)hidden * (size_t)(2 * I) * 2);
    w2 = malloc((size_t)I * (size_t)hidden * 2);
    if (!f->w1 || !f->w2 || !w1 || !w2) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert FFN weights: out of memory");
        goto fail;
    }
    float s1 = 1.0f / sqrtf((float)hidden), s2 = 1.0f / sqrtf((float)inter);
    for (int64_t e = 0; e < experts; e++) {
        uint64_t seed = (uint64_t)(expert_base + e) * 1315423911u + (uint64_t)tp_rank * 2654435761u + 7;
        for (int64_t j = 0; j < hidden * 2 * I; j++) w1[j] = seeded_bf16(&seed, s1);
        for (int64_t j = 0; j < I * hidden; j++) w2[j] = seeded_bf16(&seed, s2);
        mm_gemm_weight_desc d1 = {MM_DTYPE_BF16, hidden, 2 * I, 0, w1, NULL, NULL, NULL};
        mm_gemm_weight_desc d2 = {MM_DTYPE_BF16, I, hidden, 0, w2, NULL, NULL, NULL};
        if ((st = mm_gemm_pack_weights(&d1, &f->w1[e], err)) ||
            (st = mm_gemm_pack_weights(&d2, &f->w2[e], err)))
            goto fail;
    }
    free(w1), free(w2);
    *out = f;
    return MM_OK;
fail:
    free(w1), free(w2);
    cli_dc_ffn_free(f);
    return st;
}

typedef struct act_ctx {
    cli_dc_ffn *f;
    int64_t rows;
} act_ctx;

static void act_task(void *ctx_, int64_t t) {
    const act_ctx *c = ctx_;
    int64_t I = c->f->inter;
    for (int64_t r = t * 16; r < c->rows && r < (t + 1) * 16; r++) {
        const float *h = c->f->h + r * 2 * I;
        uint16_t *a = c->f->a2 + r * I;
        for (int64_t j = 0; j < I; j++) {
            float g = h[j], silu = g / (1.0f + expf(-g));
            a[j] = mm_f32_to_bf16(silu * h[I + j]);
        }
    }
}

typedef struct out_ctx {
    const cli_dc_ffn *f;
    const int64_t *row0;
    uint16_t *out;
} out_ctx;

static void gemm2_epilogue(void *ctx_, int64_t group, int64_t row0, int64_t col0, int rows, int cols,
                           float *tile, int64_t ld) {
    const out_ctx *c = ctx_;
    for (int r = 0; r < rows; r++) {
        uint16_t *dst = c->out + (c->row0[group] + row0 + r) * c->f->hidden + col0;
        for (int j = 0; j < cols; j++) dst[j] = mm_f32_to_bf16(tile[r * ld + j]);
    }
}

mm_status cli_dc_ffn_run(cli_dc_ffn *f, const void *rows, const float *row_scales, int64_t n_rows,
                         const int64_t *counts, uint16_t *out, mm_error *err) {
    int64_t H = f->hidden, I = f->inter, E = f->experts;
    if (n_rows > f->cap_rows) {
        free(f->h), free(f->a2), free(f->a_deq);
        f->h = malloc((size_t)n_rows * (size_t)(2 * I) * 4);
        f->a2 = malloc((size_t)n_rows * (size_t)I * 2);
        f->a_deq = malloc((size_t)n_rows * (size_t)H * 2);
        f->cap_rows = f->h && f->a2 && f->a_deq ? n_rows : 0;
        if (!f->cap_rows) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert FFN scratch: out of memory");
    }
    const uint16_t *a = rows;
    if (row_scales) { /* INT8 rows: the BF16 weights take BF16 inputs */
        for (int64_t r = 0; r < n_rows; r++)
            for (int64_t j = 0; j < H; j++)
                f->a_deq[r * H + j] =
                    mm_f32_to_bf16((float)((const int8_t *)rows)[r * H + j] * row_scales[r]);
        a = f->a_deq;
    }
    mm_gemm_group g[64];
    int64_t row0[64];
    if (E > 64)
        return mm_fail(err, MM_ERR_UNSUPPORTED, "expert FFN demo: at most 64 local experts (got %lld)",
                       (long long)E);
    int64_t at = 0;
    for (int64_t e = 0; e < E; e++) {
        row0[e] = at;
        g[e] =
            (mm_gemm_group){counts[e], a + at * H, H * 2, NULL, NULL, 0, f->w1[e], f->h + at * 2 * I, 2 * I};
        at += counts[e];
    }
    mm_status st = mm_gemm_grouped(MM_DTYPE_BF16, E, g, NULL, err);
    if (st) return st;
    act_ctx ac = {f, n_rows};
    mm_parallel_for((n_rows + 15) / 16, act_task, &ac);
    for (int64_t e = 0; e < E; e++)
        g[e] = (mm_gemm_group){counts[e], f->a2 + row0[e] * I, I * 2, NULL, NULL, 0, f->w2[e], NULL, 0};
    out_ctx oc = {f, row0, out};
    mm_gemm_options opts = {NULL, gemm2_epilogue, &oc};
    return mm_gemm_grouped(MM_DTYPE_BF16, E, g, &opts, err);
}
