/* SPDX-License-Identifier: Apache-2.0 */
/* comm/agree.c: make one rank's error the result of the collective on every rank.
 *
 * Algorithm: allgather of a fixed-size record (status + message) from every alive rank; each rank then
 * picks the lowest failing rank, so all ranks return the same status and the same message
 * ("rank N: <its message>"). Cost: one allgather of sizeof(mm_error) bytes per rank, about the cost of
 * a barrier for the handful of ranks we run. Operators call it after validating their inputs and
 * before moving any data, so a bad input on one rank never leaves the others waiting. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "core/error.h"

static mm_status agree(mm_comm *comm, mm_status local, int name_rank, mm_error *err) {
    mm_status st = mm_comm_enter(comm, "agree", err);
    if (st) return st;
    mm_error mine = {local, ""};
    if (local != MM_OK && err) {
        memcpy(mine.message, err->message, sizeof mine.message);
        mine.message[sizeof mine.message - 1] = '\0';
    }
    mm_error *all = malloc((size_t)comm->size * sizeof *all);
    if (!all) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "agree: no memory for %d records", comm->size);
    st = mm_comm_allgather(comm, &mine, sizeof mine, all, err);
    if (st) {
        mm_error_prefix(err, "agree");
        goto done;
    }
    for (int r = 0; r < comm->size; r++) {
        if (!comm->alive[r] || all[r].status == MM_OK) continue;
        all[r].message[sizeof all[r].message - 1] = '\0';
        if (name_rank)
            st = mm_fail(err, all[r].status, "rank %d: %s", r, all[r].message);
        else
            st = mm_fail(err, all[r].status, "%s", all[r].message);
        goto done;
    }
    st = MM_OK;
done:
    free(all);
    return st;
}

mm_status mm_comm_agree(mm_comm *comm, mm_status local, mm_error *err) {
    return agree(comm, local, 1, err);
}

mm_status mm_comm_agree_as_written(mm_comm *comm, mm_status local, mm_error *err) {
    return agree(comm, local, 0, err);
}
