/* SPDX-License-Identifier: Apache-2.0 */
/* tests/mpi/comm_mpi_main.h: the body of the MPI communicator tests: every scenario of
 * comm_scenarios.h on a fresh communicator over MPI_COMM_WORLD (one rank per process, run by CTest
 * under mpirun with 2, 3 and 4 processes). Each process checks its own results; mpirun fails when any
 * process does. No process can hang: every wait in the library has a timeout, and every process
 * meets the others at a final MPI_Barrier (a "dead" rank of the survivors scenario waits there). */
#ifndef MEGAMOE_TESTS_COMM_MPI_MAIN_H
#define MEGAMOE_TESTS_COMM_MPI_MAIN_H

#include <mpi.h>

#include "comm_scenarios.h"
#include "megamoe/comm_mpi.h"
#include "testlib.h"

static int comm_mpi_main(int argc, char **argv, const char *name) {
    MPI_Init(&argc, &argv);
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    CHECK_EQ_INT(mm_comm_mpi_available(), 1);
    for (size_t s = 0; s < SCEN_COUNT; s++) {
        mm_comm *c = NULL;
        mm_error err_store = {MM_OK, ""}, *err = &err_store;
        mm_status st = mm_comm_from_mpi(MPI_COMM_WORLD, &c, err);
        CHECK_OK(st, err);
        if (st) break;
        CHECK(strcmp(mm_comm_backend_name(c), "mpi") == 0);
        CHECK_EQ_INT(mm_comm_rank(c), world_rank);
        if (mm_comm_size(c) >= scen_all[s].min_ranks) {
            st = scen_all[s].fn(c, err);
            if (st) fprintf(stderr, "rank %d, scenario %s: %s\n", world_rank, scen_all[s].name, err->message);
            CHECK_OK(st, err);
        }
        CHECK_OK(mm_comm_free(c, err), err);
        /* Start every scenario together (the survivors scenario leaves one rank behind). */
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = mm_test_finish(name);
    MPI_Finalize();
    return rc;
}

#endif
