/* SPDX-License-Identifier: Apache-2.0 */
/* tests/mpi/test_dispatch_combine_rma.c: the MPI Dispatch/Combine tests with symmetric buffers in
 * ordinary RMA windows (MEGAMOE_COMM_MPI_NO_SHM=1), so that no peer memory is load/store reachable and
 * the operators take their staged path (rows built locally, then put), as across nodes. */
#define DC_MPI_NO_SHM 1
#define DC_TEST_NAME  "mpi_test_dispatch_combine_rma"
#include "test_dispatch_combine.c"
