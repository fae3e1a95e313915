/* SPDX-License-Identifier: Apache-2.0 */
/* comm/threads/threads_launch.c: the threads backend's row of the backend table: every rank is a
 * thread of this process, so the world is exactly the ranks asked for, all of them here. */
#include <stdlib.h>

#include "comm/backend.h"
#include "core/error.h"

static mm_status threads_world(int nranks, mm_comm_world *out, mm_error *err) {
    if (nranks < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "backend threads: nranks = %d: the threads backend needs a rank count in [1, %d]",
                       nranks, MM_COMM_MAX_RANKS);
    *out = (mm_comm_world){nranks, 0, nranks};
    return MM_OK;
}

static mm_status threads_launch(int nranks, mm_comm_rank_fn fn, void *arg, mm_error *err) {
    mm_comm_world w;
    mm_status st = threads_world(nranks, &w, err);
    if (st || nranks < 1 || nranks > MM_COMM_MAX_RANKS) return st;
    mm_status *sts = calloc((size_t)nranks, sizeof *sts);
    mm_error *errs = calloc((size_t)nranks, sizeof *errs);
    if (!sts || !errs) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "backend threads: no memory for %d ranks", nranks);
    } else {
        mm_error launcher;
        mm_error_clear(&launcher);
        st = mm_comm_run_threads(nranks, fn, arg, sts, errs, &launcher);
        /* The outcome every rank agrees on: the lowest failing rank's message as it wrote it. */
        int first = -1;
        for (int r = 0; r < nranks && first < 0; r++)
            if (sts[r] != MM_OK) first = r;
        if (first >= 0)
            st = mm_fail(err, sts[first], "%s", errs[first].message);
        else if (st != MM_OK)
            st = mm_fail(err, st, "%s", launcher.message); /* the launcher itself failed */
    }
    free(sts);
    free(errs);
    return st;
}

const mm_comm_provider mm_comm_threads_provider = {"threads", 1, "", threads_world, threads_launch};
