/* SPDX-License-Identifier: Apache-2.0 */
/* tests/mpi/test_comm_mpi_rma.c: the communicator scenarios on the MPI backend with symmetric buffers
 * in ordinary RMA windows (MPI_Put, MPI_Accumulate, MPI_Fetch_and_op), the path used across nodes,
 * forced here on one machine with MEGAMOE_COMM_MPI_NO_SHM=1. */
#include <stdlib.h>

#include "comm_mpi_main.h"

int main(int argc, char **argv) {
    setenv("MEGAMOE_COMM_MPI_NO_SHM", "1", 1);
    return comm_mpi_main(argc, argv, "test_comm_mpi_rma");
}
