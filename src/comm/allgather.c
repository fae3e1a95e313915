/* SPDX-License-Identifier: Apache-2.0 */
/* comm/allgather.c: allgather as an alltoallv in which every rank sends the same block to everyone.
 *
 * Cost: that of the backend's alltoallv with `bytes` per peer: on threads, one publish round plus one
 * acknowledgement round, each rank copying (alive - 1) blocks straight from the peers' send buffers;
 * under MPI, (alive - 1) point-to-point messages each way. The ranks are few (at most
 * MM_COMM_MAX_RANKS), so the direct exchange beats a ring or a recursive doubling here. */
#include "comm/comm_internal.h"
#include "core/error.h"

mm_status mm_comm_allgather(mm_comm *comm, const void *send, size_t bytes, void *recv, mm_error *err) {
    mm_status st = mm_comm_enter(comm, "allgather", err);
    if (st) return st;
    if (bytes && (!send || !recv))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "allgather: %s is NULL with bytes = %zu",
                       !send ? "send" : "recv", bytes);
    size_t send_counts[MM_COMM_MAX_RANKS], send_displs[MM_COMM_MAX_RANKS];
    size_t recv_counts[MM_COMM_MAX_RANKS], recv_displs[MM_COMM_MAX_RANKS];
    for (int p = 0; p < comm->size; p++) {
        send_counts[p] = bytes;
        send_displs[p] = 0;
        recv_counts[p] = bytes;
        recv_displs[p] = (size_t)p * bytes;
    }
    mm_error local = {MM_OK, ""};
    st = comm->vt->alltoallv(comm, send, send_counts, send_displs, recv, recv_counts, recv_displs, &local);
    if (st) mm_error_prefix(&local, "allgather");
    return mm_comm_leave(comm, st, &local, err);
}
