/* SPDX-License-Identifier: Apache-2.0 */
/* comm/comm.c: the public communicator API: identity, timeouts, elastic survivors, barrier and
 * alltoallv. It checks arguments, refuses to work on a communicator poisoned by a timeout, poisons it
 * when a backend wait times out, and hands the work to the backend's vtable. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "core/error.h"

double mm_comm_default_timeout(void) {
    const char *text = getenv("MEGAMOE_COMM_TIMEOUT");
    if (text && *text) {
        char *end = NULL;
        double v = strtod(text, &end);
        if (end && *end == '\0' && v > 0 && isfinite(v)) return v;
    }
    return 60.0;
}

void mm_comm_init_common(mm_comm *c, const mm_comm_vtable *vt, void *impl, int rank, int size,
                         double timeout) {
    memset(c, 0, sizeof *c);
    c->vt = vt;
    c->impl = impl;
    c->rank = rank;
    c->size = size;
    c->timeout = timeout;
    c->alive_count = size;
    for (int r = 0; r < size; r++) c->alive[r] = 1;
    c->spin_rounds = mm_comm_spin_rounds_for(size);
}

/* The MPI backend's row of the backend table says whether this build has it (comm/backends.c). */
int mm_comm_mpi_available(void) {
    return mm_comm_backend_available("mpi");
}

int mm_comm_rank(const mm_comm *comm) {
    return comm ? comm->rank : -1;
}
int mm_comm_size(const mm_comm *comm) {
    return comm ? comm->size : 0;
}
mm_comm_backend mm_comm_backend_of(const mm_comm *comm) {
    return comm->vt->backend;
}
const char *mm_comm_backend_name(const mm_comm *comm) {
    return comm ? comm->vt->name : "none";
}
double mm_comm_timeout(const mm_comm *comm) {
    return comm ? comm->timeout : 0.0;
}

mm_status mm_comm_set_timeout(mm_comm *comm, double seconds, mm_error *err) {
    if (!comm) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_set_timeout: comm is NULL");
    if (!(seconds > 0) || !isfinite(seconds))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "mm_comm_set_timeout: seconds = %g is not a positive finite number", seconds);
    comm->timeout = seconds;
    return MM_OK;
}

int mm_comm_is_alive(const mm_comm *comm, int rank) {
    return comm && rank >= 0 && rank < comm->size && comm->alive[rank];
}
int mm_comm_alive_count(const mm_comm *comm) {
    return comm ? comm->alive_count : 0;
}

mm_status mm_comm_set_survivors(mm_comm *comm, const int *alive_ranks, int n_alive, mm_error *err) {
    if (!comm) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_set_survivors: comm is NULL");
    if (n_alive < 1 || n_alive > comm->size)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_set_survivors: n_alive = %d is outside [1, %d]",
                       n_alive, comm->size);
    if (!alive_ranks)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_set_survivors: alive_ranks is NULL");
    int has_self = 0;
    for (int i = 0; i < n_alive; i++) {
        int r = alive_ranks[i];
        if (r < 0 || r >= comm->size)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "mm_comm_set_survivors: alive_ranks[%d] = %d is outside [0, %d)", i, r,
                           comm->size);
        if (i > 0 && r <= alive_ranks[i - 1])
            return mm_fail(
                err, MM_ERR_INVALID_ARGUMENT,
                "mm_comm_set_survivors: alive_ranks[%d] = %d is not above alive_ranks[%d] = %d (the list "
                "must be strictly increasing)",
                i, r, i - 1, alive_ranks[i - 1]);
        if (!comm->alive[r])
            return mm_fail(
                err, MM_ERR_INVALID_ARGUMENT,
                "mm_comm_set_survivors: alive_ranks[%d] = %d was already removed (ranks never come back)", i,
                r);
        if (r == comm->rank) has_self = 1;
    }
    if (!has_self)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "mm_comm_set_survivors: the caller, rank %d, is not in alive_ranks (only survivors call it)",
            comm->rank);
    memset(comm->alive, 0, sizeof comm->alive);
    for (int i = 0; i < n_alive; i++) comm->alive[alive_ranks[i]] = 1;
    comm->alive_count = n_alive;
    comm->poisoned = 0;
    comm->poison_reason[0] = '\0';
    return MM_OK;
}

/* ---- helpers shared by every public collective -------------------------------------------------- */

/* Fails fast on a poisoned communicator: its peers are gone or out of step, so any wait would only
 * time out again. */
mm_status mm_comm_enter(mm_comm *c, const char *op, mm_error *err) {
    if (!c) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: comm is NULL", op);
    if (c->poisoned)
        return mm_fail(
            err, MM_ERR_PEER,
            "%s: the communicator is unusable after an earlier failure (%s); declare the survivors with "
            "mm_comm_set_survivors",
            op, c->poison_reason);
    return MM_OK;
}

/* Copies the backend's result to the caller and poisons the communicator after a timeout. */
mm_status mm_comm_leave(mm_comm *c, mm_status st, const mm_error *local, mm_error *err) {
    if (st == MM_OK) return MM_OK;
    if (st == MM_ERR_TIMEOUT) {
        c->poisoned = 1;
        size_t n = strlen(local->message);
        if (n >= sizeof c->poison_reason) n = sizeof c->poison_reason - 1;
        memcpy(c->poison_reason, local->message, n);
        c->poison_reason[n] = '\0';
    }
    if (err) *err = *local;
    return st;
}

mm_status mm_comm_barrier(mm_comm *comm, mm_error *err) {
    mm_status st = mm_comm_enter(comm, "barrier", err);
    if (st) return st;
    mm_error local = {MM_OK, ""};
    st = comm->vt->barrier(comm, &local);
    return mm_comm_leave(comm, st, &local, err);
}

mm_status mm_comm_alltoallv(mm_comm *comm, const void *send, const size_t *send_counts,
                            const size_t *send_displs, void *recv, const size_t *recv_counts,
                            const size_t *recv_displs, mm_error *err) {
    mm_status st = mm_comm_enter(comm, "alltoallv", err);
    if (st) return st;
    if (!send_counts || !send_displs || !recv_counts || !recv_displs)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "alltoallv: %s is NULL",
                       !send_counts   ? "send_counts"
                       : !send_displs ? "send_displs"
                       : !recv_counts ? "recv_counts"
                                      : "recv_displs");
    for (int p = 0; p < comm->size; p++) {
        if (!comm->alive[p]) continue;
        if (send_counts[p] && !send)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "alltoallv: send is NULL but send_counts[%d] = %zu",
                           p, send_counts[p]);
        if (recv_counts[p] && !recv)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "alltoallv: recv is NULL but recv_counts[%d] = %zu",
                           p, recv_counts[p]);
    }
    mm_error local = {MM_OK, ""};
    st = comm->vt->alltoallv(comm, send, send_counts, send_displs, recv, recv_counts, recv_displs, &local);
    return mm_comm_leave(comm, st, &local, err);
}

mm_status mm_comm_split_node(mm_comm *comm, mm_comm **out, mm_error *err) {
    if (out) *out = NULL;
    mm_status st = mm_comm_enter(comm, "split_node", err);
    if (st) return st;
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "split_node: out is NULL");
    mm_error local = {MM_OK, ""};
    st = comm->vt->split_node(comm, out, &local);
    return mm_comm_leave(comm, st, &local, err);
}

mm_status mm_comm_free(mm_comm *comm, mm_error *err) {
    if (!comm) return MM_OK;
    mm_error local = {MM_OK, ""};
    mm_status st = comm->vt->destroy(comm, &local);
    if (st && err) *err = local;
    return st;
}
