/* tools/run_moe_mpi.c: `megamoe run --backend mpi`: one rank per MPI process (under mpirun). Every
 * process builds only its own experts and tokens; rank 0 gathers the timings and the samples, checks
 * and prints. Without MPI in the build the backend fails with status 1 and says so. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MEGAMOE_HAVE_MPI
#include <mpi.h>
#endif

#include "cli_util.h"
#include "run_moe.h"

static const char *const cmd = "run";

#ifdef MEGAMOE_HAVE_MPI
/* Sends this rank's result to rank 0, which fills all[] (all[0] is its own). */
static void gather_results(const run_moe_config *cfg, int me, int n, run_moe_rank_result *mine,
                           run_moe_rank_result *all) {
    int64_t H = cfg->hidden, K = cfg->topk, s = mine->sample_count;
    struct field {
        size_t bytes;
        size_t offset;
    };
    const struct field fields[] = {
        {(size_t)cfg->iterations * sizeof(mm_mega_moe_stats), offsetof(run_moe_rank_result, stats)},
        {(size_t)s * sizeof(int64_t), offsetof(run_moe_rank_result, sample_rows)},
        {(size_t)(s * H) * 2, offsetof(run_moe_rank_result, sample_x)},
        {(size_t)(s * K) * 4, offsetof(run_moe_rank_result, sample_ids)},
        {(size_t)(s * K) * 4, offsetof(run_moe_rank_result, sample_weights)},
        {(size_t)(s * H) * 2, offsetof(run_moe_rank_result, sample_y)},
    };
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        void *src = *(void **)((char *)mine + fields[f].offset);
        for (int r = 1; r < n; r++) {
            if (me == r) MPI_Send(src, (int)fields[f].bytes, MPI_BYTE, 0, (int)f, MPI_COMM_WORLD);
            if (me == 0)
                MPI_Recv(*(void **)((char *)&all[r] + fields[f].offset), (int)fields[f].bytes, MPI_BYTE, r,
                         (int)f, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
}

int run_moe_run_mpi(run_moe_options *o) {
    int initialized = 0, provided = 0, me = 0, n = 1;
    MPI_Initialized(&initialized);
    if (!initialized && MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        cli_error(cmd, "--backend mpi: MPI_Init_thread failed");
        return MM_CLI_EXIT_FAILURE;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    run_moe_config *cfg = &o->cfg;
    cfg->ranks = n;
    int rc = MM_CLI_EXIT_OK;
    mm_comm *comm = NULL;
    mm_error err;
    mm_error_clear(&err);
    run_moe_trace trace;
    int tracing = 0;
    if (run_moe_finish_config(o, me == 0) != 0) {
        rc = MM_CLI_EXIT_USAGE;
        goto done;
    }
    const run_moe_scenario *list[16];
    size_t count = run_moe_scenario_list(o, list);
    /* every process holds its share, but on one node they add up: each checks the total */
    int fits = 1, all_fit = 0;
    for (size_t i = 0; i < count; i++)
        if (run_moe_memory_fits(cfg, list[i], me == 0) != 0) fits = 0;
    MPI_Allreduce(&fits, &all_fit, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_fit) {
        rc = MM_CLI_EXIT_USAGE;
        goto done;
    }
    if (mm_comm_mpi_world(&comm, &err) != MM_OK) {
        if (me == 0) cli_report(cmd, &err);
        rc = cli_exit_status(err.status);
        goto done;
    }
    if (me == 0 && cfg->trace_path) {
        if (run_moe_trace_open(&trace, cfg->trace_path, cfg->ranks) != 0) {
            cli_error(cmd, "cannot write the trace '%s'", cfg->trace_path);
            rc = MM_CLI_EXIT_FAILURE;
        }
        tracing = rc == MM_CLI_EXIT_OK;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != MM_CLI_EXIT_OK) goto done;
    if (me == 0) {
        run_moe_print_banner(cfg, "mpi");
        run_moe_print_header();
    }
    run_moe_report report;
    memset(&report, 0, sizeof report);
    for (size_t i = 0; i < count; i++) {
        run_moe_rank_result *res = run_moe_results_alloc(cfg, me == 0 ? n : 1, &err);
        int ok = res != NULL, all_ok = 0;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_ok) {
            if (!ok) cli_error(cmd, "no memory for the results");
            if (res) run_moe_results_free(res, me == 0 ? n : 1);
            rc = MM_CLI_EXIT_FAILURE;
            break;
        }
        mm_error_clear(&err);
        /* the status is agreed on all ranks by the operator (and by run_moe_rank for its own steps) */
        mm_status st = run_moe_rank(comm, cfg, list[i], &res[0], &err);
        int this_rc = MM_CLI_EXIT_OK;
        if (st != MM_OK) {
            if (me == 0) {
                printf("%-15s not run: %s\n", list[i]->name, err.message);
                fflush(stdout);
                cli_error(cmd, "%s: %s", list[i]->name, err.message);
            }
            this_rc = cli_exit_status(st);
        } else {
            gather_results(cfg, me, n, &res[0], res);
            if (me == 0)
                this_rc = run_moe_report_scenario(cfg, list[i], res, tracing ? &trace : NULL, &report, i);
            MPI_Bcast(&this_rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
        if (rc == MM_CLI_EXIT_OK) rc = this_rc;
        run_moe_results_free(res, me == 0 ? n : 1);
    }
    if (me == 0) run_moe_print_notes(report.notes, count);
    free(report.a16w16_y);
    if (tracing) {
        if (run_moe_trace_close(&trace) != 0) {
            cli_error(cmd, "error writing the trace '%s'", cfg->trace_path);
            if (rc == MM_CLI_EXIT_OK) rc = MM_CLI_EXIT_FAILURE;
        } else {
            printf("\ntrace: %s (one track per rank; open in ui.perfetto.dev)\n", cfg->trace_path);
        }
    }
done:
    mm_comm_free(comm, NULL);
    if (!initialized) MPI_Finalize();
    return rc;
}
#else
int run_moe_run_mpi(run_moe_options *o) {
    (void)o;
    return cli_mpi_unavailable(cmd);
}
#endif
