/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_ffn_dnnl.c: the oneDNN baseline of `bench ffn`: the FFN's two per-expert GEMMs as oneDNN
 * matmuls with weights reordered once into the layout the primitive prefers (format_tag_any), BF16 x BF16
 * -> F32 and u8 x s8 -> s32, on oneDNN's OpenMP threads. Built only when CMake found oneDNN (Debian's
 * libdnnl-dev, optional); otherwise the bench says it is unavailable. */
#include <stdio.h>
#include <string.h>

#include "bench/bench_ffn.h"

#ifndef MEGAMOE_HAVE_DNNL

int bench_dnnl_available(void) {
    return 0;
}

bench_dnnl_ffn *bench_dnnl_ffn_create(bench_dnnl_kind kind, int64_t rows, int64_t hidden, int64_t inter,
                                      int64_t experts, int threads, char *why, size_t why_size) {
    (void)kind, (void)rows, (void)hidden, (void)inter, (void)experts, (void)threads;
    snprintf(why, why_size, "built without oneDNN (scripts/install-deps.sh --bench, then re-run cmake)");
    return NULL;
}

int bench_dnnl_ffn_run(bench_dnnl_ffn *d, int64_t e, double *seconds, char *why, size_t why_size) {
    (void)d, (void)e, (void)seconds;
    snprintf(why, why_size, "built without oneDNN");
    return -1;
}

void bench_dnnl_ffn_free(bench_dnnl_ffn *d) {
    (void)d;
}

#else

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdlib.h>

#include "common/timing.h"

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

struct bench_dnnl_ffn {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int64_t experts;
    ffn_gemm *g1, *g2;
};

void bench_dnnl_ffn_free(bench_dnnl_ffn *d) {
    if (!d) return;
    for (int64_t e = 0; e < d->experts; e++) {
        if (d->g1) gemm_destroy(&d->g1[e]);
        if (d->g2) gemm_destroy(&d->g2[e]);
    }
    free(d->g1), free(d->g2);
    if (d->stream) dnnl_stream_destroy(d->stream);
    if (d->engine) dnnl_engine_destroy(d->engine);
    free(d);
}

bench_dnnl_ffn *bench_dnnl_ffn_create(bench_dnnl_kind kind, int64_t rows, int64_t hidden, int64_t inter,
                                      int64_t experts, int threads, char *why, size_t why_size) {
    bench_dnnl_ffn *d = calloc(1, sizeof *d);
    if (d) {
        d->experts = experts;
        d->g1 = calloc((size_t)experts, sizeof *d->g1);
        d->g2 = calloc((size_t)experts, sizeof *d->g2);
    }
    if (!d || !d->g1 || !d->g2) {
        snprintf(why, why_size, "out of memory");
        goto fail;
    }
    omp_set_num_threads(threads);
    DNNL_TRY(dnnl_engine_create(&d->engine, dnnl_cpu, 0));
    DNNL_TRY(dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags));
    for (int64_t e = 0; e < experts; e++) {
        if (gemm_create(d->engine, d->stream, kind, rows, hidden, 2 * inter, &d->g1[e], why, why_size) != 0)
            goto fail;
        if (gemm_create(d->engine, d->stream, kind, rows, inter, hidden, &d->g2[e], why, why_size) != 0)
            goto fail;
    }
    return d;
fail:
    bench_dnnl_ffn_free(d);
    return NULL;
}

int bench_dnnl_ffn_run(bench_dnnl_ffn *d, int64_t e, double *seconds, char *why, size_t why_size) {
    e %= d->experts;
    double t0 = cli_now_seconds();
    if (gemm_run(d->stream, &d->g1[e], why, why_size) != 0 ||
        gemm_run(d->stream, &d->g2[e], why, why_size) != 0)
        return -1;
    *seconds = cli_now_seconds() - t0;
    return 0;
}

#endif
