/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_trace.c: the Chrome / Perfetto JSON trace of `megamoe run --trace FILE`.
 *
 * One track (thread) per rank and one for the host, on the shared CLOCK_MONOTONIC time line so that
 * stages of different ranks can be seen overlapping. Per scenario, each rank's track has its setup
 * ("generate weights", "pack weights" inside), the untimed warm-up call, then one slice per timed call
 * ("mega_moe <scenario>") and inside it one slice per stage event the operator recorded
 * (mm_mega_moe_last_stats): "dispatch" (this rank sending its rows; args: the experts they go to and how
 * many rows each), "dispatch wait" (waiting for other ranks' rows), gemm1 / activation / gemm2 of a
 * batch of routed experts (args: the batch, its global expert ids and their rows), shared, combine.
 * A flow (arrow) goes from each rank's dispatch to the gemm1 of every batch, on any rank, that computes
 * an expert its rows were routed to. The host track has the float64 reference check.
 * The calls' slices and flows are common/cli_moe_trace.c's (shared with `megamoe layer --trace`).
 * Load the file in ui.perfetto.dev or chrome://tracing. */
#include <stdio.h>

#include "run/run_moe.h"

int run_moe_trace_open(run_moe_trace *t, const char *path, int64_t ranks) {
    return cli_moe_trace_open(t, NULL, path, "megamoe run", ranks, "host (check)");
}

static void setup_slices(cli_moe_trace *t, int64_t r, const run_moe_scenario *sc,
                         const run_moe_rank_spans *p) {
    char args[64];
    snprintf(args, sizeof args, "\"scenario\":\"%s\"", sc->spec_name);
    cli_trace_slice(&t->base, r, "setup", "setup", p->setup_begin, p->setup_end, args);
    cli_trace_slice(&t->base, r, "generate weights", "setup", p->generate_begin, p->generate_end, args);
    cli_trace_slice(&t->base, r, "pack weights", "setup", p->generate_end, p->pack_end, args);
    cli_trace_slice(&t->base, r, "warm-up", "setup", p->warmup_begin, p->warmup_end, args);
}

void run_moe_trace_scenario(run_moe_trace *t, const run_moe_config *cfg, const run_moe_scenario *sc,
                            const run_moe_rank_result *results, double check_begin, double check_end) {
    if (!t->base.file) return;
    if (t->base.origin < 0.0) {
        t->base.origin = results[0].spans->setup_begin;
        for (int64_t r = 1; r < cfg->ranks; r++)
            if (results[r].spans->setup_begin < t->base.origin)
                t->base.origin = results[r].spans->setup_begin;
    }
    char name[64];
    snprintf(name, sizeof name, "mega_moe %s", sc->spec_name);
    for (int64_t r = 0; r < cfg->ranks; r++) {
        setup_slices(t, r, sc, results[r].spans);
        for (int64_t it = 0; it < cfg->iterations; it++) {
            char args[48];
            snprintf(args, sizeof args, "\"iteration\":%lld", (long long)it);
            cli_moe_trace_call(t, r, name, sc->spec_name, args, &results[r].stats[it], results[r].routed,
                               cfg->experts);
        }
    }
    for (int64_t it = 0; it < cfg->iterations; it++) {
        const mm_mega_moe_stats *stats[MM_COMM_MAX_RANKS];
        const int64_t *routed[MM_COMM_MAX_RANKS];
        for (int64_t r = 0; r < cfg->ranks; r++) {
            stats[r] = &results[r].stats[it];
            routed[r] = results[r].routed;
        }
        cli_moe_trace_flows(t, cfg->ranks, stats, routed);
    }
    if (check_end > check_begin) {
        char args[64];
        snprintf(args, sizeof args, "\"scenario\":\"%s\"", sc->spec_name);
        cli_trace_slice(&t->base, CLI_MOE_TRACE_HOST_TID, "check", "check", check_begin, check_end, args);
    }
}

int run_moe_trace_close(run_moe_trace *t) {
    return cli_trace_close(&t->base, NULL, NULL);
}
