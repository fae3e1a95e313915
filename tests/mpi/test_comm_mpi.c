/* SPDX-License-Identifier: Apache-2.0 */
/* tests/mpi/test_comm_mpi.c: the communicator scenarios on the MPI backend, with symmetric buffers in
 * shared-memory windows (all processes on this machine). */
#include "comm_mpi_main.h"

int main(int argc, char **argv) {
    return comm_mpi_main(argc, argv, "test_comm_mpi");
}
