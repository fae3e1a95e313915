/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_re_routing.c: `megamoe run --op re-routing`, the MoeReRouting demo.
 *
 * A realistic received-token block rearranged into expert order, checked, and timed against memcpy of
 * the same bytes in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_json.h"
#include "common/cli_options.h"
#include "common/cli_threads.h"
#include "common/cli_trace.h"
#include "common/cli_util.h"
#include "run/run_ops.h"
#include "common/demo_data.h"
#include "megamoe/re_routing.h"
#include "common/timing.h"

static const char run_usage[] =
    "usage: megamoe run --op re-routing [options]\n"
    "\n"
    "Re-routing demo: builds the tokens one rank receives after the all-to-all (skewed counts per\n"
    "source rank and local expert), rearranges them into expert order with mm_re_routing, checks that\n"
    "every output row equals the input row its index names, and times it against memcpy of the same\n"
    "bytes in the same run.\n"
    "\n"
    "options:\n" CLI_REROUTING_SHAPE_HELP
    "      --iterations K    timed calls of each (default 5; one untimed warm-up first)\n"
    "      --threads N       worker-pool threads, the caller included (default: MEGAMOE_NUM_THREADS, else\n"
    "                        the CPUs of the affinity mask within the cgroup CPU quota; docs/threads.md)\n"
    "      --json            JSON Lines on stdout instead of the report (docs/cli.md)\n"
    "      --trace FILE      write a Chrome/Perfetto JSON trace: setup, each timed call (its experts and\n"
    "                        rows per expert, rows per source rank), the check\n"
    "  -h, --help            show this help\n";

/* --trace: the re-routing slice's members "experts":[0..E-1],"rows":[...] (expert_token_num, the
 * call's output: rows per local expert) and "ranks":[0..N-1],"ranks_rows":[...] (the rows each source
 * rank's block holds, from the counts input). */
static void trace_rows(FILE *f, const cli_rerouting_buffers *b) {
    int64_t ranks = b->counts.shape[0], experts = b->counts.shape[1];
    const int64_t *counts = b->counts.data, *expert_num = b->expert_num.data;
    fputs(",\"experts\":[", f);
    for (int64_t e = 0; e < experts; e++) fprintf(f, "%s%lld", e ? "," : "", (long long)e);
    fputs("],\"rows\":[", f);
    for (int64_t e = 0; e < experts; e++) fprintf(f, "%s%lld", e ? "," : "", (long long)expert_num[e]);
    fputs("],\"ranks\":[", f);
    for (int64_t r = 0; r < ranks; r++) fprintf(f, "%s%lld", r ? "," : "", (long long)r);
    fputs("],\"ranks_rows\":[", f);
    for (int64_t r = 0; r < ranks; r++) {
        int64_t n = 0;
        for (int64_t e = 0; e < experts; e++) n += counts[r * experts + e];
        fprintf(f, "%s%lld", r ? "," : "", (long long)n);
    }
    fputc(']', f);
}

int cli_run_re_routing_main(int argc, char **argv) {
    const char *cmd = "run";
    cli_rerouting_shape shape = cli_rerouting_default_shape();
    int64_t iterations = 5;
    int json = 0;
    const char *trace_path = NULL;
    const cli_option options[] = {
        CLI_REROUTING_SHAPE_OPTIONS(&shape),
        CLI_INT64_OPTION("iterations", &iterations, 1, 100000),
        CLI_THREADS_OPTION,
        CLI_FLAG_OPTION("json", &json),
        CLI_TEXT_OPTION("trace", &trace_path),
    };
    int done = cli_options_parse(cmd, run_usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (json && cli_json_redirect(cmd) != 0) return MM_CLI_EXIT_FAILURE;
    cli_trace trace;
    if (cli_trace_start(&trace, cmd, trace_path, "megamoe run --op re-routing") != 0)
        return MM_CLI_EXIT_FAILURE;
    double t_setup = cli_now_seconds();

    mm_error err;
    mm_error_clear(&err);
    cli_rerouting_buffers b;
    int rc = MM_CLI_EXIT_FAILURE;
    double *t_rr = calloc((size_t)iterations, sizeof *t_rr),
           *t_copy = calloc((size_t)iterations, sizeof *t_copy);
    mm_status st = cli_rerouting_alloc(&shape, &b, &err);
    if (st != MM_OK || !t_rr || !t_copy) {
        if (st == MM_OK) cli_rerouting_free(&b);
        cli_error(cmd, "%s", st != MM_OK ? err.message : "out of memory");
        goto done;
    }
    char pool[160];
    cli_threads_describe(pool, sizeof pool);
    printf("megamoe run: re-routing demo (mm_re_routing); worker pool: %s\n", pool);
    printf(
        "shape: A = %lld tokens x H = %lld %s, %lld ranks x %lld local experts, skewed counts, seed %llu\n",
        (long long)shape.tokens, (long long)shape.hidden, mm_dtype_name(shape.dtype), (long long)shape.ranks,
        (long long)shape.experts, (unsigned long long)shape.seed);

    cli_trace_slice(&trace, 0, "setup", "setup", t_setup, cli_now_seconds(), NULL);
    /* Warm-up (not timed): first touch of code paths, the pool's threads and the caches. */
    double t_warm = cli_now_seconds();
    st = cli_rerouting_call(&b, &err);
    if (st == MM_OK) memcpy(b.permute_tokens.data, b.tokens.data, (size_t)b.token_bytes);
    cli_trace_slice(&trace, 0, "warm-up", "setup", t_warm, cli_now_seconds(), NULL);
    for (int64_t i = 0; st == MM_OK && i < iterations; i++) {
        /* Alternate the two so that noise from the shared machine hits both alike. */
        double t0 = cli_now_seconds();
        memcpy(b.permute_tokens.data, b.tokens.data, (size_t)b.token_bytes);
        double t1 = cli_now_seconds();
        st = cli_rerouting_call(&b, &err);
        double t2 = cli_now_seconds();
        t_copy[i] = t1 - t0;
        t_rr[i] = t2 - t1;
        char args[48];
        snprintf(args, sizeof args, "\"iteration\":%lld,\"bytes\":%lld", (long long)i,
                 (long long)b.token_bytes);
        cli_trace_slice(&trace, 0, "memcpy", "run", t0, t1, args);
        if (st == MM_OK && trace.file) {
            cli_trace_slice_open(&trace, 0, "re-routing", "run", t1, t2);
            fputs(args, trace.file);
            trace_rows(trace.file, &b);
            cli_trace_slice_close(&trace);
        }
    }
    if (st != MM_OK) {
        rc = cli_report(cmd, &err);
        cli_rerouting_free(&b);
        goto done;
    }
    char why[256];
    double t_check = cli_now_seconds();
    int bad = cli_rerouting_verify(&b, why, sizeof why) != 0;
    cli_trace_slice(&trace, 0, "check", "check", t_check, cli_now_seconds(), NULL);
    if (bad) {
        cli_error(cmd, "verification failed: %s", why);
        cli_rerouting_free(&b);
        goto done;
    }
    printf("check: ok (permute_token_idx is a permutation; every output row equals the input row it names;\n"
           "       expert_token_num = column sums of the counts)\n\n");
    cli_time_stats rr = cli_time_stats_of(t_rr, (size_t)iterations);
    cli_time_stats cp = cli_time_stats_of(t_copy, (size_t)iterations);
    double gb = (double)b.token_bytes * 1e-9;
    printf("%-20s %8s %12s %12s %8s\n", "median of runs", "tokens", "bytes", "time (ms)", "GB/s");
    printf("%-20s %8lld %12lld %12.3f %8.2f\n", "re-routing", (long long)shape.tokens,
           (long long)b.token_bytes, rr.median * 1e3, gb / rr.median);
    printf("%-20s %8lld %12lld %12.3f %8.2f\n", "memcpy (1 thread)", (long long)shape.tokens,
           (long long)b.token_bytes, cp.median * 1e3, gb / cp.median);
    if (cli_json_out()) {
        cli_json j;
        cli_rerouting_json_header(&j, "run", "op", "re-routing", &shape, b.token_bytes);
        cli_json_int(&j, "iterations", iterations);
        cli_json_bool(&j, "check_ok", 1);
        cli_json_end(&j);
        cli_json_time_row("method", "re-routing", rr, gb);
        cli_json_time_row("method", "memcpy (1 thread)", cp, gb);
    }
    printf("\nratio: re-routing reaches %.2fx the speed of memcpy of the same bytes (%lld runs each, same "
           "run)\n",
           cp.median / rr.median, (long long)iterations);
    cli_rerouting_free(&b);
    rc = MM_CLI_EXIT_OK;
    if (trace_path) printf("\ntrace: %s (open in ui.perfetto.dev)\n", trace_path);
done:
    if (cli_trace_close(&trace, cmd, trace_path) != 0) rc = MM_CLI_EXIT_FAILURE;
    free(t_rr);
    free(t_copy);
    return rc;
}
