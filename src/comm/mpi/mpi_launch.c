/* SPDX-License-Identifier: Apache-2.0 */
/* comm/mpi/mpi_launch.c: the MPI backend's row of the backend table: this process is one rank of
 * MPI_COMM_WORLD.
 *
 * The launcher initializes MPI when the caller has not (and then finalizes it before returning, so such
 * a process launches on MPI only once; a program that needs more initializes MPI itself). The outcome is
 * agreed on MPI_COMM_WORLD, not on the megamoe communicator: that one may be poisoned by a timeout or
 * left early by a rank removed with the elastic API, and every process must still learn the same
 * result. The agreement's collectives are non-blocking and polled against the communicator's timeout,
 * so a peer stopped after its last exchange cannot hold the others forever. A process that saw a
 * timeout or a peer failure (MM_ERR_TIMEOUT, MM_ERR_PEER) skips the agreement: the stopped or dead peer
 * would never join it, nor MPI_Finalize. A process MPI was initialized for by the launcher then returns
 * the error with MPI left initialized, and the program ends the job with mm_comm_end_broken_job after
 * reporting it (docs/comm.md). The library itself never prints or aborts. */
#include <mpi.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/backend.h"
#include "comm/comm_internal.h"
#include "comm/mpi/mpi_internal.h"
#include "core/error.h"

/* Set when a launch returned with MPI left initialized because a peer is stopped or dead. */
static atomic_int launch_left_broken;

/* A process started by mpirun (Open MPI), a PMI/PMIx launcher (MPICH's hydra, Slurm's srun) carries
 * one of these; a process started alone is a singleton world of one rank. */
static int started_by_launcher(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK",
                                       "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    return end && *end == '\0' && x >= 0 && x <= 1 << 20 ? (int)x : fallback;
}

static mm_status no_launcher(int nranks, mm_error *err) {
    return mm_fail(
        err, MM_ERR_INVALID_ARGUMENT,
        "backend mpi: %d ranks were asked for, but this process was not started by an MPI launcher "
        "(none of OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK is set), so it is a world of 1 rank: "
        "start it with mpirun -n %d megamoe ...",
        nranks, nranks);
}

static mm_status wrong_size(int nranks, int size, mm_error *err) {
    return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                   "backend mpi: %d ranks were asked for, but MPI_COMM_WORLD has %d processes (one rank per "
                   "process: start it with mpirun -n %d megamoe ...)",
                   nranks, size, nranks);
}

static mm_status mpi_world(int nranks, mm_comm_world *out, mm_error *err) {
    int initialized = 0, finalized = 0, rank = 0, size = 1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    } else if (started_by_launcher()) {
        size = env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 0));
        rank = env_int("OMPI_COMM_WORLD_RANK", env_int("PMI_RANK", env_int("PMIX_RANK", 0)));
        if (size == 0) size = nranks > 0 ? nranks : 1; /* PMIx tells the rank only: trust the request */
    } else if (nranks > 1) {
        return no_launcher(nranks, err);
    }
    if (nranks > 0 && nranks != size) return wrong_size(nranks, size, err);
    *out = (mm_comm_world){size, rank, 1};
    return MM_OK;
}

/* The buffers of the agreement's collectives. On the heap, and left allocated when a collective times
 * out: MPI may still write them when the late process joins. */
typedef struct outcome_record {
    int failing, first, status;
    char message[sizeof(((mm_error *)0)->message)];
} outcome_record;

static mm_status wait_or_note(mm_status st, int rc, MPI_Request *req, double timeout, const char *what,
                              mm_error *waited) {
    if (st != MM_OK) return st;
    if (rc != MPI_SUCCESS) return mm_fail(waited, MM_ERR_INTERNAL, "backend mpi: %s: MPI call failed", what);
    return mm_mpi_wait_request(req, timeout, what, waited);
}

/* Every process learns the first failure (lowest process rank) and its message. The collectives are
 * non-blocking and polled against timeout: a process stopped after its last exchange of the call (so
 * that the others returned MM_OK) would otherwise keep them in MPI_Allreduce forever. */
static mm_status agree(mm_status local_status, mm_error *local, int rank, int size, double timeout) {
    outcome_record *o = calloc(1, sizeof *o);
    if (!o) return mm_fail(local, MM_ERR_OUT_OF_MEMORY, "backend mpi: no memory to agree on the outcome");
    o->failing = local_status != MM_OK ? rank : size;
    o->first = size;
    o->status = (int)local_status;
    memcpy(o->message, local->message, sizeof o->message);
    const char *what = "backend mpi: agreeing on the outcome";
    MPI_Request req = MPI_REQUEST_NULL;
    mm_error waited;
    mm_error_clear(&waited);
    int rc = MPI_Iallreduce(&o->failing, &o->first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
    mm_status st = wait_or_note(MM_OK, rc, &req, timeout, what, &waited);
    if (st == MM_OK && o->first == size) {
        free(o);
        return MM_OK;
    }
    if (st == MM_OK) {
        rc = MPI_Ibcast(&o->status, 1, MPI_INT, o->first, MPI_COMM_WORLD, &req);
        st = wait_or_note(st, rc, &req, timeout, what, &waited);
    }
    if (st == MM_OK) {
        rc = MPI_Ibcast(o->message, (int)sizeof o->message, MPI_CHAR, o->first, MPI_COMM_WORLD, &req);
        st = wait_or_note(st, rc, &req, timeout, what, &waited);
    }
    if (st != MM_OK) {
        /* o stays allocated (see outcome_record). This process's own failure, if any, says more than
         * the missing agreement. */
        if (local_status != MM_OK)
            return mm_fail(local, MM_ERR_TIMEOUT, "%s (then %s)", local->message, waited.message);
        return mm_fail(local, st, "%s", waited.message);
    }
    memcpy(local->message, o->message, sizeof local->message);
    local->message[sizeof local->message - 1] = '\0';
    local->status = (mm_status)o->status;
    free(o);
    return local->status;
}

static mm_status mpi_launch(int nranks, mm_comm_rank_fn fn, void *arg, mm_error *err) {
    int initialized = 0, finalized = 0, rank = 0, size = 1;
    MPI_Finalized(&finalized);
    if (finalized)
        return mm_fail(err, MM_ERR_UNSUPPORTED, "backend mpi: MPI is already finalized in this process");
    MPI_Initialized(&initialized);
    if (!initialized) {
        /* Refuse before MPI_Init: a singleton would run the job as 1 rank instead of nranks. */
        if (nranks > 1 && !started_by_launcher()) return no_launcher(nranks, err);
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return mm_fail(err, MM_ERR_UNSUPPORTED, "backend mpi: MPI_Init_thread failed");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mm_error local;
    mm_error_clear(&local);
    mm_status st = MM_OK;
    if (nranks > 0 && nranks != size) {
        st = wrong_size(nranks, size, &local); /* the same on every process: no agreement needed */
    } else {
        mm_comm *comm = NULL;
        int poisoned = 0; /* a collective timed out: fn may have reported it and returned MM_OK */
        double timeout = mm_comm_default_timeout();
        st = mm_comm_mpi_world(&comm, &local);
        if (st == MM_OK) {
            st = fn(comm, arg, &local);
            timeout = comm->timeout; /* fn may have set it (megamoe --timeout) */
            if (st != MM_OK && local.status == MM_OK) local.status = st;
            poisoned = comm->poisoned;
            if (poisoned && st == MM_OK) st = mm_fail(&local, MM_ERR_TIMEOUT, "%s", comm->poison_reason);
            mm_comm_free(comm, NULL);
        }
        int broken = poisoned || st == MM_ERR_TIMEOUT || st == MM_ERR_PEER;
        /* A peer that is stopped, dead or out of step would never join the agreement below nor
         * MPI_Finalize; a process that saw it returns at once, and one that did not learns it by the
         * agreement's own timeout. The caller then ends the job (mm_comm_end_broken_job). */
        if (!broken || initialized) {
            st = agree(st, &local, rank, size, timeout);
            broken = st == MM_ERR_TIMEOUT || st == MM_ERR_PEER;
        }
        if (broken && !initialized) {
            atomic_store(&launch_left_broken, 1);
            return mm_fail(err, st, "process %d: %s", rank, local.message);
        }
    }
    if (!initialized) MPI_Finalize();
    if (st != MM_OK) return mm_fail(err, st, "%s", local.message);
    return MM_OK;
}

int mm_comm_end_broken_job(int exit_code) {
    int initialized = 0, finalized = 0;
    if (!atomic_load(&launch_left_broken)) return 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
        /* The caller has just written its error; give mpirun a moment to forward it before the abort
         * tears the job down (under load the line was lost otherwise). */
        struct timespec pause = {0, 200 * 1000 * 1000};
        nanosleep(&pause, NULL);
        MPI_Abort(MPI_COMM_WORLD, exit_code);
    }
    return 0;
}

const mm_comm_provider mm_comm_mpi_provider = {"mpi", 1, "", mpi_world, mpi_launch};
