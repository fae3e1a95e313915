/* SPDX-License-Identifier: Apache-2.0 */
/* comm/threads/threads_launch.c: the threads backend's row of the backend table: every rank is a
 * thread of this process, so the world is exactly the ranks asked for, all of them here. */
#include "comm/backend.h"
#include "comm/world_internal.h"
#include "core/error.h"

static mm_status threads_world(int nranks, mm_comm_world *out, mm_error *err) {
    if (nranks < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "backend threads: nranks = %d: the threads backend needs a rank count in [1, %d]",
                       nranks, MM_COMM_MAX_RANKS);
    *out = (mm_comm_world){nranks, 0, nranks};
    return MM_OK;
}

/* Every rank's outcome as mm_comm_launch promises it: the lowest failing rank's message as written. */
static mm_status threads_launch(int nranks, mm_comm_rank_fn fn, void *arg, mm_error *err) {
    mm_comm_world w;
    mm_status st = threads_world(nranks, &w, err);
    if (st) return st;
    return mm_comm_run_threads_as(nranks, fn, arg, MM_MERGE_AS_WRITTEN, NULL, NULL, err);
}

const mm_comm_provider mm_comm_threads_provider = {"threads", 1, "", threads_world, threads_launch};
