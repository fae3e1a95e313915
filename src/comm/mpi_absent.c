/* SPDX-License-Identifier: Apache-2.0 */
/* comm/mpi_absent.c: the MPI backend's row of the backend table and its public entry points in a build
 * without MPI (src/comm/mpi/ is compiled only when Open MPI is found; this file only when it is not).
 * The row stays in the table, marked unavailable, so asking for MPI says what is missing. */
#ifndef MEGAMOE_HAVE_MPI
#include "comm/backend.h"
#include "core/error.h"

#define NO_MPI "this build of megamoe has no MPI (build it with Open MPI)"

static mm_status unavailable(const char *fn, mm_error *err) {
    return mm_fail(
        err, MM_ERR_UNSUPPORTED,
        "%s: this megamoe was built without MPI (the MPI backend is unavailable; rebuild with Open "
        "MPI installed and MEGAMOE_WITH_MPI=ON, or use mm_comm_run_threads)",
        fn);
}

mm_status mm_comm_mpi_world(mm_comm **out, mm_error *err) {
    if (out) *out = NULL;
    return unavailable("mm_comm_mpi_world", err);
}

mm_status mm_comm_from_mpi_ptr(const void *mpi_comm, mm_comm **out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_from_mpi: out is NULL");
    *out = NULL;
    if (!mpi_comm) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_from_mpi: mpi_comm is NULL");
    return unavailable("mm_comm_from_mpi", err);
}

int mm_comm_end_broken_job(int exit_code) {
    (void)exit_code; /* no MPI: a launch always ends cleanly */
    return 0;
}

static mm_status absent_world(int nranks, mm_comm_world *out, mm_error *err) {
    (void)nranks;
    (void)out;
    return mm_fail(err, MM_ERR_UNSUPPORTED, "backend mpi: " NO_MPI);
}

static mm_status absent_launch(int nranks, mm_comm_rank_fn fn, void *arg, mm_error *err) {
    (void)fn;
    (void)arg;
    return absent_world(nranks, NULL, err);
}

/* Unavailable: the row that says so. */
const mm_comm_provider mm_comm_mpi_provider = {"mpi", 0, NO_MPI, absent_world, absent_launch};
#else
/* ISO C forbids an empty translation unit. */
typedef int mm_comm_mpi_present;
#endif
