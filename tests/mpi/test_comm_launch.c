/* SPDX-License-Identifier: Apache-2.0 */
/* tests/mpi/test_comm_launch.c: the backend-neutral launcher on the MPI backend (run by CTest under
 * mpirun with 2, 3 and 4 processes): this process is one rank of MPI_COMM_WORLD, the rank count must
 * match the world, and every process returns the lowest failing rank's status and message. MPI is
 * initialized here, so the launcher neither initializes nor finalizes it and may run several times. A
 * process that returns late from its rank function does not hold the others in the outcome agreement
 * beyond the communicator's timeout. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "comm_launch_rank.h"
#include "megamoe/comm.h"
#include "testlib.h"

typedef struct launch_arg {
    int ran, fail_from, world_rank, world_size;
} launch_arg;

static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    launch_arg *a = arg;
    a->ran++;
    if (mm_comm_rank(comm) != a->world_rank || mm_comm_size(comm) != a->world_size ||
        strcmp(mm_comm_backend_name(comm), "mpi") != 0) {
        snprintf(err->message, sizeof err->message, "rank %d of %d on %s, expected %d of %d on mpi",
                 mm_comm_rank(comm), mm_comm_size(comm), mm_comm_backend_name(comm), a->world_rank,
                 a->world_size);
        return MM_ERR_INTERNAL;
    }
    return launch_rank_body(comm, a->fail_from, err);
}

/* The last rank returns MM_OK 2.5 s after the others, which set a 1 s timeout and return MM_OK at once. */
static mm_status late_fn(mm_comm *comm, void *arg, mm_error *err) {
    const launch_arg *a = arg;
    mm_status st = mm_comm_set_timeout(comm, 1.0, err);
    if (st == MM_OK && a->world_rank == a->world_size - 1) {
        struct timespec late = {2, 500 * 1000 * 1000};
        nanosleep(&late, NULL);
    }
    return st;
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    int provided = 0, rank = 0, size = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_EQ_INT(mm_comm_backend_available("mpi"), 1);

    mm_comm_world w;
    mm_error err = {MM_OK, ""};
    CHECK_EQ_INT(mm_comm_backend_world("mpi", 0, &w, &err), MM_OK);
    CHECK_EQ_INT(w.size, size);
    CHECK_EQ_INT(w.first_rank, rank);
    CHECK_EQ_INT(w.local_ranks, 1);
    CHECK_EQ_INT(mm_comm_backend_world("mpi", size + 1, &w, &err), MM_ERR_INVALID_ARGUMENT);

    /* 0 ranks: as many as the world has; or exactly the world size. */
    launch_arg a = {0, size, rank, size};
    CHECK_EQ_INT(mm_comm_launch("mpi", 0, rank_fn, &a, &err), MM_OK);
    CHECK_EQ_INT(mm_comm_launch("mpi", size, rank_fn, &a, &err), MM_OK);
    CHECK_EQ_INT(a.ran, 2);

    /* Another count is refused on every process alike, saying how to start it. */
    CHECK_EQ_INT(mm_comm_launch("mpi", size + 1, rank_fn, &a, &err), MM_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(err.message, "MPI_COMM_WORLD has");
    CHECK_STR_CONTAINS(err.message, "mpirun -n");
    CHECK_EQ_INT(a.ran, 2);

    /* Ranks >= 1 fail: every process gets rank 1's status and message, as written. */
    launch_arg f = {0, 1, rank, size};
    mm_error_clear(&err);
    CHECK_EQ_INT(mm_comm_launch("mpi", 0, rank_fn, &f, &err), MM_ERR_INVALID_FILE);
    CHECK(strcmp(err.message, "rank 1 could not go on") == 0);
    CHECK_EQ_INT(f.ran, 1);

    /* A late process: the others report the agreement's timeout after about 1 s instead of waiting for
     * it; the late one then completes the agreement they left pending and sees success. */
    launch_arg l = {0, size, rank, size};
    mm_error_clear(&err);
    double t0 = seconds_now();
    mm_status late_st = mm_comm_launch("mpi", 0, late_fn, &l, &err);
    double waited = seconds_now() - t0;
    if (rank == size - 1) {
        CHECK_EQ_INT(late_st, MM_OK);
        if (late_st != MM_OK) fprintf(stderr, "late: %s\n", err.message);
    } else {
        CHECK_EQ_INT(late_st, MM_ERR_TIMEOUT);
        CHECK_STR_CONTAINS(err.message, "agreeing on the outcome");
        CHECK_STR_CONTAINS(err.message, "within 1 s");
        CHECK(waited < 2.3);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* The launcher left MPI as it found it. */
    int initialized = 0, finalized = 1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    CHECK_EQ_INT(initialized, 1);
    CHECK_EQ_INT(finalized, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = mm_test_finish("test_comm_launch");
    MPI_Finalize();
    return rc;
}
