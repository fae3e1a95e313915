/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_mpi.c: mm_case_run with one rank per process of a launched backend (MPI_COMM_WORLD), started
 * by mm_comm_launch, which initializes and finalizes MPI when the caller has not and agrees on the outcome.
 *
 * Every process opens the file (the reader reads only the header; tensor data is read on demand, so a
 * process reads only what its rank needs) and does the generic checks. A non-collective operator
 * (moe_re_routing) runs on process 0 only, which writes the output; the others wait for its verdict. A
 * collective op writes from ctx.output_process (process 0 unless the op moves it: with elastic scale-in,
 * the lowest surviving rank, since a removed process holds no outputs).
 * After each step the processes agree on the outcome, so every process returns the same status and
 * message (that of the lowest failing process) and none is left waiting. */
#include <string.h>

#include "case/case_runner.h"
#include "core/error.h"
#include "megamoe/comm.h"

typedef struct case_launch {
    const char *in_path, *out_path;
    const mm_case_options *options;
} case_launch;

static mm_status case_process(mm_comm *comm, void *arg, mm_error *err) {
    const case_launch *l = arg;
    int rank = mm_comm_rank(comm);
    mm_case_ctx ctx;
    if (l->options->timeout_seconds > 0) (void)mm_comm_set_timeout(comm, l->options->timeout_seconds, NULL);
    mm_status st = mm_case_open(l->in_path, l->options, &ctx, err);
    int opened = st == MM_OK;
    if (opened) {
        ctx.process_rank = rank;
        ctx.process_count = mm_comm_size(comm);
    }
    st = mm_comm_agree_as_written(comm, st, err);
    if (st == MM_OK && (ctx.op->collective || rank == 0))
        st = mm_case_execute(&ctx, l->out_path, err); /* the launcher agrees on this outcome */
    if (opened) mm_case_close(&ctx);
    return st;
}

mm_status mm_case_run_launched(const char *backend, const char *in_path, const char *out_path,
                               const mm_case_options *options, mm_error *err) {
    case_launch l = {in_path, out_path, options};
    return mm_comm_launch(backend, 0, case_process, &l, err);
}
