/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_mpi.c: `megamoe run --backend NAME` for a backend with one rank per process (mpi, under
 * mpirun), started by mm_comm_launch. Every process builds only its own experts and tokens; rank 0
 * gathers the timings and the samples over the communicator, checks and prints. A backend this build
 * lacks fails with status 1 and says so. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_util.h"
#include "run/run_moe.h"

static const char *const cmd = "run";

/* Rank 0 fills all[1..n) with the other ranks' results (all[0] is its own), one alltoallv per field in
 * which only the blocks to rank 0 carry bytes. */
static mm_status gather_results(mm_comm *comm, const run_moe_config *cfg, run_moe_rank_result *mine,
                                run_moe_rank_result *all, mm_error *err) {
    int me = mm_comm_rank(comm), n = mm_comm_size(comm);
    int64_t H = cfg->hidden, K = cfg->topk, s = mine->sample_count;
    struct field {
        size_t bytes;
        size_t offset;
    };
    const struct field fields[] = {
        {(size_t)cfg->iterations * sizeof(mm_mega_moe_stats), offsetof(run_moe_rank_result, stats)},
        {sizeof(run_moe_rank_spans), offsetof(run_moe_rank_result, spans)},
        {(size_t)cfg->experts * sizeof(int64_t), offsetof(run_moe_rank_result, routed)},
        {(size_t)s * sizeof(int64_t), offsetof(run_moe_rank_result, sample_rows)},
        {(size_t)(s * H) * 2, offsetof(run_moe_rank_result, sample_x)},
        {(size_t)(s * K) * 4, offsetof(run_moe_rank_result, sample_ids)},
        {(size_t)(s * K) * 4, offsetof(run_moe_rank_result, sample_weights)},
        {(size_t)(s * H) * 2, offsetof(run_moe_rank_result, sample_y)},
    };
    size_t sc[MM_COMM_MAX_RANKS], sd[MM_COMM_MAX_RANKS], rc[MM_COMM_MAX_RANKS], rd[MM_COMM_MAX_RANKS];
    mm_status st = MM_OK;
    for (size_t f = 0; f < sizeof fields / sizeof fields[0] && st == MM_OK; f++) {
        size_t bytes = fields[f].bytes;
        char *staging = me == 0 && n > 1 ? malloc((size_t)(n - 1) * bytes + 1) : NULL;
        st = me == 0 && n > 1 && !staging ? cli_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory to gather results")
                                          : MM_OK;
        /* every rank learns it, so none waits in the gather for a rank 0 that left */
        if ((st = mm_comm_agree(comm, st, err)) != MM_OK) break;
        for (int r = 0; r < n; r++) {
            sc[r] = me != 0 && r == 0 ? bytes : 0;
            sd[r] = 0;
            rc[r] = me == 0 && r > 0 ? bytes : 0;
            rd[r] = r > 0 ? (size_t)(r - 1) * bytes : 0;
        }
        void *src = *(void **)((char *)mine + fields[f].offset);
        st = mm_comm_alltoallv(comm, src, sc, sd, staging, rc, rd, err);
        for (int r = 1; st == MM_OK && me == 0 && r < n; r++)
            memcpy(*(void **)((char *)&all[r] + fields[f].offset), staging + rd[r], bytes);
        free(staging);
    }
    return st;
}

/* Rank 0's exit status on every rank (the others hold MM_CLI_EXIT_OK). */
static mm_status share_rc(mm_comm *comm, int *rc, mm_error *err) {
    int64_t v = *rc;
    mm_status st = mm_comm_allreduce_i64(comm, &v, 1, MM_REDUCE_MAX, err);
    *rc = (int)v;
    return st;
}

typedef struct launched_run {
    run_moe_options *o;
    int rc, me;
    int reported; /* rank 0 already printed the failure of a scenario */
} launched_run;

static mm_status run_process(mm_comm *comm, void *arg, mm_error *err) {
    launched_run *run = arg;
    run_moe_options *o = run->o;
    int me = run->me = mm_comm_rank(comm), n = mm_comm_size(comm);
    run_moe_config *cfg = &o->cfg;
    cfg->ranks = n;
    run_moe_trace trace;
    int tracing = 0;
    mm_status st = MM_OK;
    run->rc = MM_CLI_EXIT_OK;
    if (run_moe_finish_config(o, me == 0) != 0) {
        run->rc = MM_CLI_EXIT_USAGE;
        return MM_OK;
    }
    const run_moe_scenario *list[16];
    size_t count = run_moe_scenario_list(o, list);
    /* every process holds its share, but on one node they add up: each checks the total */
    int64_t fits = 1;
    for (size_t i = 0; i < count; i++)
        if (run_moe_memory_fits(cfg, list[i], me == 0) != 0) fits = 0;
    if ((st = mm_comm_allreduce_i64(comm, &fits, 1, MM_REDUCE_MIN, err)) != MM_OK) return st;
    if (!fits) {
        run->rc = MM_CLI_EXIT_USAGE;
        return MM_OK;
    }
    int rc = MM_CLI_EXIT_OK;
    if (me == 0 && cfg->trace_path) {
        if (run_moe_trace_open(&trace, cfg->trace_path, cfg->ranks) != 0) {
            cli_error(cmd, "cannot write the trace '%s'", cfg->trace_path);
            rc = MM_CLI_EXIT_FAILURE;
        }
        tracing = rc == MM_CLI_EXIT_OK;
    }
    if ((st = share_rc(comm, &rc, err)) != MM_OK || rc != MM_CLI_EXIT_OK) goto done;
    if (me == 0) {
        run_moe_print_banner(cfg, mm_comm_backend_name(comm), list, count);
        run_moe_print_header(cfg);
    }
    run_moe_report report;
    memset(&report, 0, sizeof report);
    for (size_t i = 0; i < count; i++) {
        run_moe_rank_result *res = run_moe_results_alloc(cfg, me == 0 ? n : 1, err);
        int64_t ok = res != NULL;
        if ((st = mm_comm_allreduce_i64(comm, &ok, 1, MM_REDUCE_MIN, err)) != MM_OK) {
            if (res) run_moe_results_free(res, me == 0 ? n : 1);
            break;
        }
        if (!ok) {
            if (!res) cli_error(cmd, "no memory for the results");
            if (res) run_moe_results_free(res, me == 0 ? n : 1);
            rc = MM_CLI_EXIT_FAILURE;
            break;
        }
        mm_error_clear(err);
        /* the status is agreed on all ranks by the operator (and by run_moe_rank for its own steps) */
        mm_status sst = run_moe_rank(comm, cfg, list[i], &res[0], err);
        int this_rc = MM_CLI_EXIT_OK;
        if (sst != MM_OK) {
            if (me == 0) {
                run_moe_print_not_run(cfg, list[i]->spec_name, err->message);
                cli_error(cmd, "%s: %s", list[i]->spec_name, err->message);
                run->reported = 1;
            }
            this_rc = cli_exit_status(sst);
            mm_error_clear(err);
        } else {
            if ((st = gather_results(comm, cfg, &res[0], res, err)) == MM_OK && me == 0)
                this_rc = run_moe_report_scenario(cfg, list[i], res, tracing ? &trace : NULL, &report, i);
            if (st == MM_OK) st = share_rc(comm, &this_rc, err);
        }
        if (rc == MM_CLI_EXIT_OK) rc = this_rc;
        run_moe_results_free(res, me == 0 ? n : 1);
        if (st != MM_OK) break;
    }
    if (me == 0) run_moe_print_notes(cfg, report.notes, count);
    free(report.a16w16_y);
done:
    if (tracing) {
        if (run_moe_trace_close(&trace) != 0) {
            cli_error(cmd, "error writing the trace '%s'", cfg->trace_path);
            if (rc == MM_CLI_EXIT_OK) rc = MM_CLI_EXIT_FAILURE;
        } else if (!cfg->json) {
            printf("\ntrace: %s (one track per rank; open in ui.perfetto.dev)\n", cfg->trace_path);
        }
    }
    run->rc = rc;
    return st;
}

int run_moe_run_launched(run_moe_options *o) {
    /* Which process speaks when the launch itself fails (wrong size: every process fails alike). */
    mm_comm_world world = {1, 0, 1};
    (void)mm_comm_backend_world(o->backend, 0, &world, NULL);
    launched_run run = {o, MM_CLI_EXIT_OK, world.first_rank, 0};
    mm_error err;
    mm_error_clear(&err);
    int nranks = o->ranks_given ? (int)o->cfg.ranks : 0;
    mm_status st = mm_comm_launch(o->backend, nranks, run_process, &run, &err);
    if (st != MM_OK) {
        int rc = cli_exit_status(st);
        /* A stopped or dead peer: the launch returned at once on each survivor, without agreeing, and
         * the first one to end the job aborts the others, rank 0 included; so each survivor says what
         * it saw. Otherwise every process has the same message and rank 0 speaks. */
        int broken = st == MM_ERR_TIMEOUT || st == MM_ERR_PEER;
        if ((run.me == 0 && !run.reported) || (run.me != 0 && broken)) cli_report(cmd, &err);
        return rc;
    }
    return run.rc;
}
