/* SPDX-License-Identifier: Apache-2.0 */
/* comm/mpi/mpi_comm.c: life of an MPI-backend communicator: wrapping the caller's MPI_Comm, sub-groups,
 * the node map, destruction.
 *
 * Blocking MPI collectives (MPI_Comm_dup, MPI_Comm_split_type) run only after a timed guard barrier
 * proved that every rank is there, so a missing rank is a timeout, not a hang. Sub-groups use
 * MPI_Comm_create_group, which involves only the group's members: survivors can split without the
 * removed ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/mpi/mpi_internal.h"
#include "core/error.h"

const mm_comm_vtable mm_mpi_vtable = MM_COMM_BACKEND_VTABLE("mpi", MM_COMM_MPI, mm_mpi);

static mm_status mpi_fail(mm_error *err, int code, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", code);
    return mm_fail(err, MM_ERR_INTERNAL, "%s failed: %s", what, text);
}

mm_status mm_mpi_wait_request(MPI_Request *req, double timeout, const char *op, mm_error *err) {
    mm_waiter w;
    mm_waiter_start(&w, timeout);
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Test");
        if (done) return MM_OK;
        if (!mm_waiter_pause(&w)) {
            /* A non-blocking collective may be neither cancelled nor freed: the request is left
             * pending (the communicator is unusable anyway). */
            return mm_fail(err, MM_ERR_TIMEOUT,
                           "%s: not every rank of the MPI communicator arrived within %g s", op, timeout);
        }
    }
}

mm_status mm_mpi_guard(MPI_Comm comm, double timeout, const char *op, mm_error *err) {
    MPI_Request req;
    int rc = MPI_Ibarrier(comm, &req);
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Ibarrier");
    return mm_mpi_wait_request(&req, timeout, op, err);
}

/* Takes ownership of comm (ours already). Computes the node map with one more MPI collective; the
 * caller has guarded it. */
static mm_status mpi_wrap_owned(MPI_Comm comm, double timeout, mm_comm **out, mm_error *err) {
    mm_status st = MM_OK;
    MPI_Comm node = MPI_COMM_NULL;
    mpi_impl *m = calloc(1, sizeof *m);
    int rank = 0, size = 0, rc;
    if (!m) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for the communicator");
        goto fail;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size > MM_COMM_MAX_RANKS) {
        st = mm_fail(err, MM_ERR_UNSUPPORTED,
                     "the MPI communicator has %d ranks, more than MM_COMM_MAX_RANKS = %d", size,
                     MM_COMM_MAX_RANKS);
        goto fail;
    }
    rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) {
        st = mpi_fail(err, rc, "MPI_Comm_split_type");
        goto fail;
    }
    /* The node's lowest rank names the node: take the minimum over the node, then share it. */
    int my_node = rank;
    rc = MPI_Allreduce(MPI_IN_PLACE, &my_node, 1, MPI_INT, MPI_MIN, node);
    if (rc == MPI_SUCCESS) rc = MPI_Allgather(&my_node, 1, MPI_INT, m->node_of, 1, MPI_INT, comm);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) {
        st = mpi_fail(err, rc, "building the node map");
        goto fail;
    }
    m->all_on_node = 1;
    for (int r = 0; r < size; r++)
        if (m->node_of[r] != m->node_of[0]) m->all_on_node = 0;
    const char *no_shm = getenv("MEGAMOE_COMM_MPI_NO_SHM");
    m->shared_windows = m->all_on_node && !(no_shm && *no_shm && strcmp(no_shm, "0") != 0);
    m->comm = comm;
    mm_comm_init_common(&m->handle, &mm_mpi_vtable, m, rank, size, timeout);
    int here = 0;
    for (int r = 0; r < size; r++) here += m->node_of[r] == m->node_of[rank];
    m->handle.spin_rounds = mm_comm_spin_rounds_for(here);
    *out = &m->handle;
    return MM_OK;
fail:
    free(m);
    MPI_Comm_free(&comm);
    return st;
}

mm_status mm_comm_mpi_wrap(const void *mpi_comm, mm_comm **out, mm_error *err) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_from_mpi: MPI is %s",
                       finalized ? "already finalized" : "not initialized (call MPI_Init first)");
    MPI_Comm user = *(const MPI_Comm *)mpi_comm;
    if (user == MPI_COMM_NULL)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_from_mpi: mpi_comm is MPI_COMM_NULL");
    double timeout = mm_comm_default_timeout();
    mm_status st = mm_mpi_guard(user, timeout, "mm_comm_from_mpi", err);
    if (st) return st;
    MPI_Comm dup = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(user, &dup);
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "mm_comm_from_mpi: MPI_Comm_dup");
    st = mpi_wrap_owned(dup, timeout, out, err);
    if (st) mm_error_prefix(err, "mm_comm_from_mpi");
    return st;
}

mm_status mm_comm_from_mpi_ptr(const void *mpi_comm, mm_comm **out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_from_mpi: out is NULL");
    *out = NULL;
    if (!mpi_comm) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_from_mpi: mpi_comm is NULL");
    return mm_comm_mpi_wrap(mpi_comm, out, err);
}

mm_status mm_comm_mpi_world(mm_comm **out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_mpi_world: out is NULL");
    *out = NULL;
    MPI_Comm world = MPI_COMM_WORLD;
    return mm_comm_mpi_wrap(&world, out, err);
}

mm_status mm_mpi_create_group(mm_comm *c, const int *members, int n, int my_new_rank, mm_comm **out,
                              mm_error *err) {
    (void)my_new_rank;
    mpi_impl *m = mpi_impl_of(c);
    /* Only the members take part: guard them with a barrier of our own first (timed, names ranks). */
    MPI_Group parent_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_group(m->comm, &parent_group);
    MPI_Group_incl(parent_group, n, members, &group);
    MPI_Group_free(&parent_group);
    int rc = MPI_Comm_create_group(m->comm, group, mm_mpi_tag(c->epoch), &sub);
    MPI_Group_free(&group);
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Comm_create_group");
    mm_comm *made = NULL;
    mm_status st = mpi_wrap_owned(sub, c->timeout, &made, err);
    if (st) return st;
    *out = made;
    return MM_OK;
}

mm_status mm_mpi_split_node(mm_comm *c, mm_comm **out, mm_error *err) {
    mpi_impl *m = mpi_impl_of(c);
    return mm_comm_split(c, m->node_of[c->rank], c->rank, out, err);
}

/* Local: MPI_Comm_free does not wait for the other ranks, so removed ranks never block it. */
mm_status mm_mpi_destroy(mm_comm *c, mm_error *err) {
    (void)err;
    mpi_impl *m = mpi_impl_of(c);
    MPI_Comm_free(&m->comm);
    free(m);
    return MM_OK;
}
