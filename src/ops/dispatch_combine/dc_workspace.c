/* SPDX-License-Identifier: Apache-2.0 */
/* ops/dispatch_combine/dc_workspace.c: the per-rank workspace of Dispatch V3 / Combine V2.
 *
 * Each operator owns one symmetric area (ops/common/symm_area.h), reused across calls and grown
 * collectively; the size comes from the exchanged call summaries, so every rank grows it at the same
 * call. */
#include <stdlib.h>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/dispatch_combine/dc_internal.h"

mm_status mm_dc_workspace_create(mm_comm *comm, mm_dc_workspace **out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!comm) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "comm is NULL");
    mm_dc_workspace *ws = calloc(1, sizeof *ws);
    if (!ws) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "dispatch/combine workspace: out of memory");
    ws->comm = comm;
    *out = ws;
    return MM_OK;
}

mm_status mm_dc_workspace_free(mm_dc_workspace *ws, mm_error *err) {
    if (!ws) return MM_OK;
    mm_status st = mm_symm_free(ws->dispatch.symm, err);
    mm_status st2 = mm_symm_free(ws->combine.symm, st ? NULL : err);
    free(ws->staging);
    free(ws->scratch);
    free(ws);
    return st ? st : st2;
}

void mm_dc_workspace_abandon(mm_dc_workspace *ws) {
    if (!ws) return;
    free(ws->staging);
    free(ws->scratch);
    free(ws);
}

/* Bytes of the dispatch area (one region per rank of the world) and of the combine area for calls of
 * these extents: one computation for mm_dc_workspace_reserve and mm_dc_workspace_bytes_for. */
static mm_status size_areas(const mm_dc_attrs *attrs, int world, int64_t max_bs, int64_t hidden, int64_t topk,
                            size_t *dispatch, size_t *combine, mm_error *err) {
    dc_topology t;
    mm_status st = mm_dc_check_attrs(attrs, 0, &t, err);
    if (st) return st;
    if (max_bs < 0 || max_bs > DC_MAX_BS || hidden < 1 || hidden > DC_MAX_H || topk < 1 || topk > DC_MAX_K)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "reserve: max_bs = %lld, hidden = %lld, topk = %lld must be in [0, %d], [1, %d], [1, %d]",
            (long long)max_bs, (long long)hidden, (long long)topk, DC_MAX_BS, DC_MAX_H, DC_MAX_K);
    /* Rows of BF16/F16 (the largest element): enough for every quant mode. */
    dc_region_layout lay = dc_region_of(t.L, topk, max_bs, (size_t)hidden * 2);
    if (world < 1 || __builtin_mul_overflow(lay.bytes, (size_t)world, dispatch))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "reserve: the dispatch area of %d ranks overflows",
                       world);
    *combine = dc_combine_bytes(t.tpw, max_bs, topk, t.S, hidden);
    return MM_OK;
}

mm_status mm_dc_workspace_reserve(mm_dc_workspace *ws, const mm_dc_attrs *attrs, int64_t max_bs,
                                  int64_t hidden, int64_t topk, mm_error *err) {
    if (!ws) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "ws (workspace) is NULL");
    size_t dispatch, combine;
    mm_status st = size_areas(attrs, mm_comm_size(ws->comm), max_bs, hidden, topk, &dispatch, &combine, err);
    if (st) return st;
    if ((st = mm_op_symm_area_ensure(ws->comm, &ws->dispatch, dispatch, MM_OP_GROW_HALF_AGAIN, err)))
        return st;
    return mm_op_symm_area_ensure(ws->comm, &ws->combine, combine, MM_OP_GROW_HALF_AGAIN, err);
}

size_t mm_dc_workspace_bytes_for(const mm_dc_attrs *attrs, int world, int64_t max_bs, int64_t hidden,
                                 int64_t topk) {
    size_t dispatch, combine, total;
    if (!attrs || size_areas(attrs, world, max_bs, hidden, topk, &dispatch, &combine, NULL) != MM_OK ||
        __builtin_add_overflow(dispatch, combine, &total))
        return 0;
    return total;
}

mm_status mm_dc_staging_ensure(mm_dc_workspace *ws, size_t bytes, mm_error *err) {
    if (ws->staging_bytes >= bytes && ws->staging) return MM_OK;
    free(ws->staging);
    ws->staging_bytes = 0;
    ws->staging = malloc(bytes ? bytes : 1);
    if (!ws->staging)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "staging buffer of %zu bytes: out of memory", bytes);
    ws->staging_bytes = bytes;
    return MM_OK;
}

mm_status mm_dc_scratch_ensure(mm_dc_workspace *ws, size_t floats, mm_error *err) {
    if (ws->scratch_floats >= floats && ws->scratch) return MM_OK;
    free(ws->scratch);
    ws->scratch_floats = 0;
    ws->scratch = malloc((floats ? floats : 1) * sizeof(float));
    if (!ws->scratch)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "scratch of %zu floats: out of memory", floats);
    ws->scratch_floats = floats;
    return MM_OK;
}

void mm_dc_run_tasks(int64_t n, void (*fn)(void *, int64_t), void *ctx, size_t bytes) {
    if (n <= 1 || bytes < DC_INLINE_BYTES) {
        for (int64_t t = 0; t < n; t++) fn(ctx, t);
        return;
    }
    mm_parallel_for(n, fn, ctx);
}
