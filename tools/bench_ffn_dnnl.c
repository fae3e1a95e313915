/* tools/bench_ffn_dnnl.c: the oneDNN baseline of `bench ffn`: the FFN's two per-expert GEMMs as oneDNN
 * matmuls with weights reordered once into the layout the primitive prefers (format_tag_any), BF16 x BF16
 * -> F32 and u8 x s8 -> s32, on oneDNN's OpenMP threads. Built only when CMake found oneDNN (Debian's
 * libdnnl-dev, optional); otherwise the bench says it is unavailable. */
#include <stdio.h>
#include <string.h>

#include "bench_ffn.h"

#ifndef MEGAMOE_HAVE_DNNL

int bench_dnnl_available(void) {
    return 0;
}

int bench_dnnl_ffn_gemms(bench_dnnl_kind kind, int64_t rows, int64_t hidden, int64_t inter, int64_t experts,
                         int threads, int repeat, double stats[3], char *why, size_t why_size) {
    (void)kind, (void)rows, (void)hidden, (void)inter, (void)experts, (void)threads, (void)repeat,
        (void)stats;
    snprintf(why, why_size, "built without oneDNN (scripts/install-deps.sh --bench, then re-run cmake)");
    return -1;
}

#else

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdlib.h>

#include "timing.h"

/* One GEMM rows x k . k x n with packed weights and its buffers. */
typedef struct ffn_gemm {
    dnnl_primitive_t matmul;
    dnnl_memory_t src, weights, dst;
} ffn_gemm;

#define DNNL_TRY(call)                                                                                       \
    do {                                                                                                     \
        dnnl_status_t s_ = (call);                                                                           \
        if (s_ != dnnl_success) {                                                                            \
            snprintf(why, why_size, "%s failed with status %d", #call, (int)s_);                             \
            goto fail;                                                                                       \
        }                                                                                                    \
    } while (0)

static void gemm_destroy(ffn_gemm *g) {
    if (g->matmul) dnnl_primitive_destroy(g->matmul);
    if (g->src) dnnl_memory_destroy(g->src);
    if (g->weights) dnnl_memory_destroy(g->weights);
    if (g->dst) dnnl_memory_destroy(g->dst);
    memset(g, 0, sizeof *g);
}

/* Fills a memory object with small values of its type (its content does not change the speed). */
static void fill_memory(dnnl_memory_t m, size_t bytes, int is_bf16) {
    void *p = NULL;
    if (dnnl_memory_get_data_handle(m, &p) != dnnl_success || !p) return;
    if (is_bf16) {
        uint16_t *v = p;
        for (size_t i = 0; i < bytes / 2; i++) v[i] = (uint16_t)(0x3C00 + (i * 7) % 128); /* ~2^-7 */
    } else {
        uint8_t *v = p;
        for (size_t i = 0; i < bytes; i++) v[i] = (uint8_t)((i * 13) % 16);
    }
}

static int gemm_create(dnnl_engine_t engine, dnnl_stream_t stream, bench_dnnl_kind kind, int64_t rows,
                       int64_t k, int64_t n, ffn_gemm *g, char *why, size_t why_size) {
    int bf16 = kind == BENCH_DNNL_BF16;
    dnnl_data_type_t src_t = bf16 ? dnnl_bf16 : dnnl_u8, w_t = bf16 ? dnnl_bf16 : dnnl_s8;
    dnnl_data_type_t dst_t = bf16 ? dnnl_f32 : dnnl_s32;
    dnnl_memory_desc_t src_md, w_any, w_user, dst_md;
    dnnl_dims_t src_dims = {rows, k}, w_dims = {k, n}, dst_dims = {rows, n};
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL, reorder_pd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t user_w = NULL;
    memset(g, 0, sizeof *g);
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_md, 2, src_dims, src_t, dnnl_ab));
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_any, 2, w_dims, w_t, dnnl_format_tag_any));
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_user, 2, w_dims, w_t, dnnl_ab));
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 2, dst_dims, dst_t, dnnl_ab));
    DNNL_TRY(dnnl_matmul_desc_init(&desc, &src_md, &w_any, NULL, &dst_md));
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL));
    const dnnl_memory_desc_t *w_packed = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    DNNL_TRY(dnnl_primitive_create(&g->matmul, pd));
    DNNL_TRY(dnnl_memory_create(&g->src, &src_md, engine, DNNL_MEMORY_ALLOCATE));
    DNNL_TRY(dnnl_memory_create(&g->dst, &dst_md, engine, DNNL_MEMORY_ALLOCATE));
    DNNL_TRY(dnnl_memory_create(&g->weights, w_packed, engine, DNNL_MEMORY_ALLOCATE));
    DNNL_TRY(dnnl_memory_create(&user_w, &w_user, engine, DNNL_MEMORY_ALLOCATE));
    fill_memory(g->src, (size_t)(rows * k) * (bf16 ? 2 : 1), bf16);
    fill_memory(user_w, (size_t)(k * n) * (bf16 ? 2 : 1), bf16);
    /* Pre-packing: the reorder runs once, outside the timed loop. */
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&reorder_pd, &w_user, engine, w_packed, engine, NULL));
    DNNL_TRY(dnnl_primitive_create(&reorder, reorder_pd));
    dnnl_exec_arg_t args[2];
    args[0].arg = DNNL_ARG_FROM, args[0].memory = user_w;
    args[1].arg = DNNL_ARG_TO, args[1].memory = g->weights;
    DNNL_TRY(dnnl_primitive_execute(reorder, stream, 2, args));
    DNNL_TRY(dnnl_stream_wait(stream));
    dnnl_primitive_destroy(reorder);
    dnnl_primitive_desc_destroy(reorder_pd);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(user_w);
    return 0;
fail:
    if (reorder) dnnl_primitive_destroy(reorder);
    if (reorder_pd) dnnl_primitive_desc_destroy(reorder_pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (user_w) dnnl_memory_destroy(user_w);
    gemm_destroy(g);
    return -1;
}

static int gemm_run(dnnl_stream_t stream, ffn_gemm *g, char *why, size_t why_size) {
    dnnl_exec_arg_t args[3];
    args[0].arg = DNNL_ARG_SRC, args[0].memory = g->src;
    args[1].arg = DNNL_ARG_WEIGHTS, args[1].memory = g->weights;
    args[2].arg = DNNL_ARG_DST, args[2].memory = g->dst;
    DNNL_TRY(dnnl_primitive_execute(g->matmul, stream, 3, args));
    DNNL_TRY(dnnl_stream_wait(stream));
    return 0;
fail:
    return -1;
}

int bench_dnnl_available(void) {
    return 1;
}

int bench_dnnl_ffn_gemms(bench_dnnl_kind kind, int64_t rows, int64_t hidden, int64_t inter, int64_t experts,
                         int threads, int repeat, double stats[3], char *why, size_t why_size) {
    dnnl_engine_t engine = NULL;
    dnnl_stream_t stream = NULL;
    ffn_gemm *g1 = calloc((size_t)experts, sizeof *g1), *g2 = calloc((size_t)experts, sizeof *g2);
    double *samples = calloc((size_t)repeat, sizeof *samples);
    int rc = -1;
    if (!samples || !g1 || !g2) {
        free(g1), free(g2), free(samples);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    omp_set_num_threads(threads);
    DNNL_TRY(dnnl_engine_create(&engine, dnnl_cpu, 0));
    DNNL_TRY(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    /* As for megamoe's FFN, the experts rotate so that each run streams weights that are not in cache. */
    for (int64_t e = 0; e < experts; e++) {
        if (gemm_create(engine, stream, kind, rows, hidden, 2 * inter, &g1[e], why, why_size) != 0) goto fail;
        if (gemm_create(engine, stream, kind, rows, inter, hidden, &g2[e], why, why_size) != 0) goto fail;
    }
    for (int r = -1; r < repeat; r++) {
        int64_t e = (r + 1) % experts;
        double t0 = cli_now_seconds();
        if (gemm_run(stream, &g1[e], why, why_size) != 0 || gemm_run(stream, &g2[e], why, why_size) != 0)
            goto fail;
        if (r >= 0) samples[r] = cli_now_seconds() - t0;
    }
    cli_time_stats s = cli_time_stats_of(samples, (size_t)repeat);
    stats[0] = s.median, stats[1] = s.min, stats[2] = s.max;
    rc = 0;
fail:
    for (int64_t e = 0; e < experts; e++) gemm_destroy(&g1[e]), gemm_destroy(&g2[e]);
    free(g1), free(g2);
    if (stream) dnnl_stream_destroy(stream);
    if (engine) dnnl_engine_destroy(engine);
    free(samples);
    return rc;
}

#endif
