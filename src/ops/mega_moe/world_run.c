/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/world_run.c: MegaMoE driven from one host thread on a persistent world (megamoe/world.h):
 * each call hands the per-rank work to the world's parked rank threads, so an engine's serving loop
 * makes one call per layer instead of running its own SPMD threads.
 *
 * What a rank cannot agree on with its peers is checked here, on the host, before any rank starts: a
 * missing or foreign buffer would make that rank return at once while the others wait in the call's
 * first collective until the timeout. Everything else is mm_mega_moe_run's own agreed validation, so
 * the error is the same "rank N: ..." line (passed on as written). */
#include "comm/world_internal.h"
#include "core/error.h"
#include "ops/mega_moe/buffer.h"

typedef struct world_job {
    const mm_mega_moe_sizing *sizing;
    mm_mega_moe_buffer **buffers; /* create, free */
    mm_mega_moe_buffer *const *run_buffers;
    const mm_mega_moe_weights *const *weights;
    const mm_mega_moe_attrs *attrs;
    const mm_mega_moe_inputs *inputs;
    const mm_mega_moe_outputs *outputs;
} world_job;

static mm_status create_rank(mm_comm *comm, void *arg, mm_error *err) {
    const world_job *job = arg;
    return mm_mega_moe_buffer_create(comm, job->sizing, &job->buffers[mm_comm_rank(comm)], err);
}

static mm_status free_rank(mm_comm *comm, void *arg, mm_error *err) {
    const world_job *job = arg;
    mm_mega_moe_buffer **b = &job->buffers[mm_comm_rank(comm)];
    mm_status st = mm_mega_moe_buffer_free(*b, err);
    *b = NULL;
    return st;
}

static mm_status run_rank(mm_comm *comm, void *arg, mm_error *err) {
    const world_job *job = arg;
    int r = mm_comm_rank(comm);
    return mm_mega_moe_run(job->run_buffers[r], job->weights[r], job->attrs, &job->inputs[r],
                           &job->outputs[r], err);
}

/* Every buffers[r] was made on rank r of this world (NULL entries allowed when allow_null). */
static mm_status check_buffers(mm_world *world, const char *who, mm_mega_moe_buffer *const *buffers,
                               int allow_null, mm_error *err) {
    for (int r = 0; r < mm_world_size(world); r++) {
        if (!buffers[r]) {
            if (allow_null) continue;
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: buffers[%d] is NULL", who, r);
        }
        if (buffers[r]->comm != mm_world_comm(world, r))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "%s: buffers[%d] was not created on rank %d of this world "
                           "(mm_mega_moe_world_buffers_create)",
                           who, r, r);
    }
    return MM_OK;
}

mm_status mm_mega_moe_world_buffers_create(mm_world *world, const mm_mega_moe_sizing *sizing,
                                           mm_mega_moe_buffer **buffers, mm_error *err) {
    static const char who[] = "mm_mega_moe_world_buffers_create";
    if (!world || !sizing || !buffers)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: %s is NULL", who,
                       !world    ? "world"
                       : !sizing ? "sizing"
                                 : "buffers");
    for (int r = 0; r < mm_world_size(world); r++) buffers[r] = NULL;
    world_job job = {.sizing = sizing, .buffers = buffers};
    return mm_world_run_as(world, who, create_rank, &job, MM_MERGE_AS_WRITTEN, NULL, NULL, err);
}

mm_status mm_mega_moe_world_buffers_free(mm_world *world, mm_mega_moe_buffer **buffers, mm_error *err) {
    static const char who[] = "mm_mega_moe_world_buffers_free";
    if (!world || !buffers)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: %s is NULL", who, !world ? "world" : "buffers");
    int n = mm_world_size(world), present = 0;
    mm_status st = check_buffers(world, who, buffers, 1, err);
    if (st != MM_OK) return st;
    for (int r = 0; r < n; r++) present += buffers[r] != NULL;
    if (present == 0) return MM_OK;
    /* Freeing is collective: a rank without a buffer would leave the others waiting. */
    if (present != n)
        for (int r = 0; r < n; r++)
            if (!buffers[r])
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "%s: buffers[%d] is NULL but others are not (the buffers of a world are freed "
                               "together)",
                               who, r);
    world_job job = {.buffers = buffers};
    return mm_world_run_as(world, who, free_rank, &job, MM_MERGE_AS_WRITTEN, NULL, NULL, err);
}

mm_status mm_mega_moe_world_run(mm_world *world, mm_mega_moe_buffer *const *buffers,
                                const mm_mega_moe_weights *const *weights, const mm_mega_moe_attrs *attrs,
                                const mm_mega_moe_inputs *inputs, const mm_mega_moe_outputs *outputs,
                                mm_error *err) {
    static const char who[] = "mm_mega_moe_world_run";
    if (!world || !buffers || !weights || !attrs || !inputs || !outputs)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: %s is NULL", who,
                       !world     ? "world"
                       : !buffers ? "buffers"
                       : !weights ? "weights"
                       : !attrs   ? "attrs"
                       : !inputs  ? "inputs"
                                  : "outputs");
    mm_status st = check_buffers(world, who, buffers, 0, err);
    if (st != MM_OK) return st;
    world_job job = {
        .run_buffers = buffers, .weights = weights, .attrs = attrs, .inputs = inputs, .outputs = outputs};
    return mm_world_run_as(world, who, run_rank, &job, MM_MERGE_AS_WRITTEN, NULL, NULL, err);
}
