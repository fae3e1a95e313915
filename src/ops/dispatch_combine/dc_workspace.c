/* ops/dispatch_combine/dc_workspace.c: the per-rank workspace of Dispatch V3 / Combine V2.
 *
 * Each operator owns one symmetric buffer, reused across calls. Its signal counters only grow: every
 * data phase each rank raises each alive peer's counter by one, so after n phases a complete exchange
 * means "every counter >= n" (the buffer's epoch). A buffer that must grow is reallocated collectively;
 * the decision is taken from the allgathered call summaries, so every rank takes it at the same call. */
#include <stdlib.h>

#include "core/error.h"
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

mm_status dc_buffer_ensure(mm_dc_workspace *ws, dc_buffer *buf, size_t bytes, mm_error *err) {
    if (bytes == 0) bytes = 64;
    if (buf->symm && mm_symm_size(buf->symm) >= bytes) return MM_OK;
    mm_status st = mm_symm_free(buf->symm, err);
    buf->symm = NULL;
    buf->epoch = 0;
    if (st) return st;
    /* Grow by half again so that slowly growing calls do not reallocate every time. */
    size_t want = bytes + bytes / 2;
    return mm_symm_alloc(ws->comm, want, &buf->symm, err);
}

mm_status dc_staging_ensure(mm_dc_workspace *ws, size_t bytes, mm_error *err) {
    if (ws->staging_bytes >= bytes && ws->staging) return MM_OK;
    free(ws->staging);
    ws->staging_bytes = 0;
    ws->staging = malloc(bytes ? bytes : 1);
    if (!ws->staging)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "staging buffer of %zu bytes: out of memory", bytes);
    ws->staging_bytes = bytes;
    return MM_OK;
}

mm_status dc_scratch_ensure(mm_dc_workspace *ws, size_t floats, mm_error *err) {
    if (ws->scratch_floats >= floats && ws->scratch) return MM_OK;
    free(ws->scratch);
    ws->scratch_floats = 0;
    ws->scratch = malloc((floats ? floats : 1) * sizeof(float));
    if (!ws->scratch)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "scratch of %zu floats: out of memory", floats);
    ws->scratch_floats = floats;
    return MM_OK;
}
