/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_dc_ffn.c: the expert FFN that `megamoe run --op dispatch-combine` and `megamoe bench
 * dispatch-combine` run on Dispatch's rows: a BF16 SwiGLU expert per local expert through the library's
 * FFN module (src/ffn/ffn.h, private: this file, bench_ffn_expert.c and run_moe_check.c are the CLI
 * files that see src/), GEMM1 (H -> 2I, F32 output not rounded), swiglu(gate, up) rounded to BF16,
 * GEMM2 (I -> H) rounded to BF16. With TP = 2 each TP
 * rank holds half of I (gate/up columns and GEMM2 rows), so its output is a partial sum that Combine's
 * reduce-scatter completes. Weights are seeded per (expert, TP rank). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/demo_data.h"
#include "common/cli_util.h"
#include "ffn/ffn.h"
#include "gemm/gemm.h"
#include "megamoe/formats.h"
#include "run/run_dc_ffn.h"

struct cli_dc_ffn {
    int64_t experts, hidden, inter;    /* inter: this TP rank's share */
    mm_gemm_packed_weights **w1, **w2; /* w1 gate/up interleaved: the activation runs in GEMM1's epilogue */
    mm_ffn_act act;                    /* swiglu without clamp */
    void *scratch;                     /* mm_ffn_scratch_bytes(cap_rows, ...) */
    uint16_t *a_deq;                   /* rows x H (INT8 input dequantized) */
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
    free(f->w1), free(f->w2), free(f->scratch), free(f->a_deq), free(f);
}

mm_status cli_dc_ffn_create(int64_t experts, int64_t expert_base, int64_t hidden, int64_t inter,
                            int64_t tp_rank, int64_t tpw, cli_dc_ffn **out, mm_error *err) {
    *out = NULL;
    cli_dc_ffn *f = calloc(1, sizeof *f);
    mm_status st = MM_OK;
    uint16_t *w1 = NULL, *w2 = NULL;
    if (!f) return cli_fail(err, MM_ERR_OUT_OF_MEMORY, "expert FFN: out of memory");
    f->experts = experts, f->hidden = hidden, f->inter = inter / tpw;
    int64_t I = f->inter;
    f->w1 = calloc((size_t)experts, sizeof *f->w1);
    f->w2 = calloc((size_t)experts, sizeof *f->w2);
    w1 = malloc((size_t)hidden * (size_t)(2 * I) * 2);
    w2 = malloc((size_t)I * (size_t)hidden * 2);
    if (!f->w1 || !f->w2 || !w1 || !w2) {
        st = cli_fail(err, MM_ERR_OUT_OF_MEMORY, "expert FFN weights: out of memory");
        goto fail;
    }
    if ((st = mm_ffn_act_resolve(MM_MEGA_MOE_SWIGLU, NULL, 0, &f->act, err))) goto fail;
    float s1 = 1.0f / sqrtf((float)hidden), s2 = 1.0f / sqrtf((float)inter);
    for (int64_t e = 0; e < experts; e++) {
        uint64_t seed = (uint64_t)(expert_base + e) * 1315423911u + (uint64_t)tp_rank * 2654435761u + 7;
        for (int64_t j = 0; j < hidden * 2 * I; j++) w1[j] = seeded_bf16(&seed, s1);
        for (int64_t j = 0; j < I * hidden; j++) w2[j] = seeded_bf16(&seed, s2);
        mm_gemm_weight_desc d1 = {.dtype = MM_DTYPE_BF16, .k = hidden, .n = 2 * I, .data = w1};
        mm_gemm_weight_desc d2 = {.dtype = MM_DTYPE_BF16, .k = I, .n = hidden, .data = w2};
        mm_gemm_pack_options interleave = {1};
        if ((st = mm_gemm_pack_weights_with(&d1, &interleave, &f->w1[e], err)) ||
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

mm_status cli_dc_ffn_run(cli_dc_ffn *f, const void *rows, const float *row_scales, int64_t n_rows,
                         const int64_t *counts, uint16_t *out, mm_error *err) {
    int64_t H = f->hidden, I = f->inter, E = f->experts;
    if (n_rows > f->cap_rows) {
        free(f->scratch), free(f->a_deq);
        f->scratch = malloc(mm_ffn_scratch_bytes(n_rows, H, I, I));
        f->a_deq = malloc((size_t)n_rows * (size_t)H * 2);
        f->cap_rows = f->scratch && f->a_deq ? n_rows : 0;
        if (!f->cap_rows) return cli_fail(err, MM_ERR_OUT_OF_MEMORY, "expert FFN scratch: out of memory");
    }
    const uint16_t *a = rows;
    if (row_scales) { /* INT8 rows: the BF16 weights take BF16 inputs */
        for (int64_t r = 0; r < n_rows; r++)
            for (int64_t j = 0; j < H; j++)
                f->a_deq[r * H + j] =
                    mm_f32_to_bf16((float)((const int8_t *)rows)[r * H + j] * row_scales[r]);
        a = f->a_deq;
    }
    mm_ffn_group g[64];
    if (E > 64)
        return cli_fail(err, MM_ERR_UNSUPPORTED, "expert FFN demo: at most 64 local experts (got %lld)",
                        (long long)E);
    int64_t at = 0, n = 0;
    for (int64_t e = 0; e < E; e++) {
        if (counts[e] > 0)
            g[n++] = (mm_ffn_group){
                at,   counts[e], (const uint8_t *)(a + at * H), H * 2, NULL, NULL, 0, f->w1[e], f->w2[e],
                NULL, NULL};
        at += counts[e];
    }
    mm_ffn_scratch scratch;
    mm_ffn_scratch_init(&scratch, f->scratch, n_rows, H, I, I);
    mm_ffn_job job = {MM_DTYPE_BF16, MM_DTYPE_BF16, 0,   &f->act, H,    I,    I,    n,   g,
                      NULL,          &scratch,      out, NULL,    NULL, NULL, NULL, NULL};
    return mm_ffn_run(&job, err);
}
