/* SPDX-License-Identifier: Apache-2.0 */
/* comm/mpi/mpi_internal.h: state of the MPI backend (one rank per MPI process).
 *
 * megamoe works on its own duplicate of the caller's MPI_Comm, with MPI_ERRORS_RETURN so that no MPI
 * error aborts the process. Collectives are point-to-point (Isend/Irecv polled with MPI_Test under the
 * shared spin-yield-sleep waiter), never blocking MPI collectives, so that every wait has a timeout
 * and names the ranks it misses, and survivors can go on without the removed ranks. Message tags are
 * the collective's epoch, so a message of a collective that timed out never matches a later one. */
#ifndef MEGAMOE_COMM_MPI_INTERNAL_H
#define MEGAMOE_COMM_MPI_INTERNAL_H

#include <mpi.h>

#include "comm/comm_internal.h"

typedef struct mpi_impl {
    mm_comm handle;
    MPI_Comm comm;                  /* ours: a duplicate, or made by a split */
    int node_of[MM_COMM_MAX_RANKS]; /* the lowest rank sharing memory with each rank */
    int all_on_node;                /* every rank shares memory with every other */
    int shared_windows;             /* symmetric buffers use MPI_Win_allocate_shared */
} mpi_impl;

extern const mm_comm_vtable mm_mpi_vtable;

static inline mpi_impl *mpi_impl_of(const mm_comm *c) {
    return (mpi_impl *)c->impl;
}

/* Tag of the collective numbered epoch (MPI guarantees tags up to at least 32767). */
static inline int mm_mpi_tag(uint64_t epoch) {
    return (int)(epoch % 32000u) + 1;
}

/* Polls a non-blocking collective until it completes or timeout seconds pass (MM_ERR_TIMEOUT naming
 * op; the request is then left pending, as MPI allows neither cancelling nor freeing it). */
mm_status mm_mpi_wait_request(MPI_Request *req, double timeout, const char *op, mm_error *err);
/* Waits for a collective of every rank of comm (MPI_Ibarrier polled with a timeout): the guard run
 * before blocking MPI calls such as MPI_Comm_dup or MPI_Win_allocate, so that they cannot hang. */
mm_status mm_mpi_guard(MPI_Comm comm, double timeout, const char *op, mm_error *err);

MM_COMM_BACKEND_DECLARE(mm_mpi);

/* mm_comm_from_mpi_ptr without its NULL checks. */
mm_status mm_comm_mpi_wrap(const void *mpi_comm, mm_comm **out, mm_error *err);

#endif
