/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/comm_mpi.h: wrap an MPI communicator the caller owns (needs mpi.h; the threads backend in
 * megamoe/comm.h does not).
 *
 * One megamoe rank per MPI process. Collective over mpi_comm; the caller keeps ownership of mpi_comm
 * (megamoe duplicates it) and frees the result with mm_comm_free before MPI_Finalize. Returns
 * MM_ERR_UNSUPPORTED when this megamoe was built without MPI (see mm_comm_mpi_available). */
#ifndef MEGAMOE_COMM_MPI_H
#define MEGAMOE_COMM_MPI_H

#include <mpi.h>

#include "megamoe/comm.h"

static inline mm_status mm_comm_from_mpi(MPI_Comm mpi_comm, mm_comm **out, mm_error *err) {
    return mm_comm_from_mpi_ptr(&mpi_comm, out, err);
}

#endif
