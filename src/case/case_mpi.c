/* case/case_mpi.c: mm_case_run with one rank per MPI process (MPI_COMM_WORLD).
 *
 * Every process opens the file (the reader reads only the header; tensor data is read on demand, so a
 * process reads only what its rank needs) and does the generic checks. A non-collective operator
 * (moe_re_routing) runs on process 0 only, which writes the output; the others wait for its verdict. A
 * collective op writes from ctx.output_process (process 0 unless the op moves it: with elastic scale-in,
 * the lowest surviving rank, since a removed process holds no outputs).
 * After each step the processes agree on the outcome, so every process returns the same status and
 * message (that of the lowest failing process) and none is left waiting.
 *
 * MPI is initialized here when the caller has not done it, and then also finalized before returning,
 * so such a process can call mm_case_run with the MPI backend only once; a program that needs more
 * initializes MPI itself. */
#include <string.h>

#include "case/case_runner.h"
#include "core/error.h"

#ifdef MEGAMOE_HAVE_MPI
#include <mpi.h>

/* All processes learn the first failure (lowest process rank) and its message. */
static mm_status agree(mm_status local_status, mm_error *local, int rank, int size) {
    int failing = local_status != MM_OK ? rank : size, first = size;
    if (MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
        return mm_fail(local, MM_ERR_INTERNAL,
                       "backend mpi: MPI_Allreduce failed while agreeing on the outcome");
    if (first == size) return MM_OK;
    int status = (int)local_status;
    MPI_Bcast(&status, 1, MPI_INT, first, MPI_COMM_WORLD);
    MPI_Bcast(local->message, (int)sizeof local->message, MPI_CHAR, first, MPI_COMM_WORLD);
    local->message[sizeof local->message - 1] = '\0';
    local->status = (mm_status)status;
    return local->status;
}

mm_status mm_case_run_mpi(const char *in_path, const char *out_path, const mm_case_options *options,
                          mm_error *err) {
    int initialized = 0, finalized = 0, we_initialized = 0, rank = 0, size = 1, opened = 0;
    mm_error local;
    mm_error_clear(&local);
    MPI_Finalized(&finalized);
    if (finalized)
        return mm_fail(err, MM_ERR_UNSUPPORTED, "backend mpi: MPI is already finalized in this process");
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return mm_fail(err, MM_ERR_UNSUPPORTED, "backend mpi: MPI_Init_thread failed");
        we_initialized = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    mm_case_ctx ctx;
    mm_status st = mm_case_open(in_path, options, &ctx, &local);
    opened = st == MM_OK;
    if (opened) {
        ctx.process_rank = rank;
        ctx.process_count = size;
    }
    st = agree(st, &local, rank, size);
    if (st == MM_OK) {
        mm_status mine = MM_OK;
        if (ctx.op->collective || rank == 0) mine = mm_case_execute(&ctx, out_path, 1, &local);
        st = agree(mine, &local, rank, size);
    }
    if (opened) mm_case_close(&ctx);
    if (we_initialized) MPI_Finalize();
    if (st != MM_OK) return mm_fail(err, st, "%s", local.message);
    return MM_OK;
}

#else

mm_status mm_case_run_mpi(const char *in_path, const char *out_path, const mm_case_options *options,
                          mm_error *err) {
    (void)in_path;
    (void)out_path;
    (void)options;
    return mm_fail(err, MM_ERR_UNSUPPORTED,
                   "backend mpi: this build of megamoe has no MPI (build it with Open MPI)");
}

#endif
