/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_re_routing.c: `megamoe bench re-routing`: mm_re_routing against memcpy of the same bytes.
 *
 * Re-routing is a permuted copy, so memcpy is its speed limit: the benchmark reports how close it
 * gets, against a single-threaded memcpy and against a memcpy split over N threads (the fair
 * baseline for a multi-threaded operator), all measured in the same run and interleaved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/cli_threads.h"
#include "common/cli_json.h"
#include "common/cli_options.h"
#include "common/cli_util.h"
#include "common/demo_data.h"
#include "common/timing.h"

static const char bench_re_routing_usage[] =
    "usage: megamoe bench re-routing [options]\n"
    "\n"
    "Times mm_re_routing (gather index, counts) against memcpy of the same token bytes with 1 thread\n"
    "and with N threads. Warm-up runs are not counted; each repetition runs the three in turn.\n"
    "Reports median / min / max time, GB/s of token bytes (each byte read once and written once) and\n"
    "the ratio of re-routing's speed to each memcpy.\n"
    "\n"
    "options:\n" CLI_REROUTING_SHAPE_HELP "      --iterations K    timed repetitions (default 10)\n"
    "      --warmup K        untimed repetitions first (default 2)\n"
    "      --threads T       threads of the pool (mm_re_routing) and of the multi-threaded memcpy\n"
    "                        (default MEGAMOE_NUM_THREADS, else the CPUs of the affinity mask within the\n"
    "                        cgroup CPU quota; docs/threads.md)\n"
    "      --json            JSON Lines on stdout instead of the table (docs/cli.md)\n"
    "  -h, --help            show this help\n";

enum { METHOD_REROUTING, METHOD_MEMCPY_1, METHOD_MEMCPY_N, METHOD_COUNT };

static mm_status run_method(int method, cli_rerouting_buffers *b, int threads, mm_error *err) {
    switch (method) {
    case METHOD_REROUTING: return cli_rerouting_call(b, err);
    case METHOD_MEMCPY_1:
        memcpy(b->permute_tokens.data, b->tokens.data, (size_t)b->token_bytes);
        return MM_OK;
    default:
        mm_bench_parallel_memcpy(b->permute_tokens.data, b->tokens.data, (size_t)b->token_bytes, threads);
    }
    return MM_OK;
}

int mm_bench_re_routing_main(int argc, char **argv) {
    const char *cmd = "bench re-routing";
    cli_rerouting_shape shape = cli_rerouting_default_shape();
    int64_t repetitions = 10, warmup = 2, threads = mm_bench_default_threads();
    int json = 0;
    const cli_option options[] = {
        CLI_REROUTING_SHAPE_OPTIONS(&shape),
        CLI_INT64_OPTION("iterations", &repetitions, 1, 100000),
        CLI_INT64_OPTION("warmup", &warmup, 0, 100000),
        CLI_THREADS_COUNT_OPTION(&threads, 1, 256),
        CLI_FLAG_OPTION("json", &json),
    };
    int done = cli_options_parse(cmd, bench_re_routing_usage, 0, options, sizeof options / sizeof options[0],
                                 argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (json && cli_json_redirect(cmd) != 0) return MM_CLI_EXIT_FAILURE;

    mm_error err;
    mm_error_clear(&err);
    cli_rerouting_buffers b;
    int rc = MM_CLI_EXIT_FAILURE;
    double *samples = calloc((size_t)(METHOD_COUNT * repetitions), sizeof *samples);
    mm_status st = cli_rerouting_alloc(&shape, &b, &err);
    if (st != MM_OK || !samples) {
        if (st == MM_OK) cli_rerouting_free(&b);
        cli_error(cmd, "%s", st != MM_OK ? err.message : "out of memory");
        free(samples);
        return MM_CLI_EXIT_FAILURE;
    }
    for (int64_t rep = -warmup; st == MM_OK && rep < repetitions; rep++)
        for (int m = 0; st == MM_OK && m < METHOD_COUNT; m++) {
            double t0 = cli_now_seconds();
            st = run_method(m, &b, (int)threads, &err);
            double t1 = cli_now_seconds();
            if (rep >= 0) samples[m * repetitions + rep] = t1 - t0;
        }
    /* The last call was a memcpy: re-run re-routing once so its output, not memcpy's, is checked. */
    if (st == MM_OK) st = cli_rerouting_call(&b, &err);
    if (st != MM_OK) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    char why[256];
    if (cli_rerouting_verify(&b, why, sizeof why) != 0) {
        cli_error(cmd, "verification failed: %s", why);
        goto done;
    }

    char memcpy_n_name[32];
    snprintf(memcpy_n_name, sizeof memcpy_n_name, "memcpy %lld thread%s", (long long)threads,
             cli_plural_s(threads));
    const char *names[METHOD_COUNT] = {"re-routing", "memcpy 1 thread", memcpy_n_name};
    cli_time_stats stats[METHOD_COUNT];
    for (int m = 0; m < METHOD_COUNT; m++)
        stats[m] = cli_time_stats_of(samples + m * repetitions, (size_t)repetitions);
    double gb = (double)b.token_bytes * 1e-9;
    printf("bench re-routing: A = %lld, H = %lld, %s, %lld ranks x %lld experts (skewed), %lld bytes, "
           "%lld repetitions after %lld warm-up\n",
           (long long)shape.tokens, (long long)shape.hidden, mm_dtype_name(shape.dtype),
           (long long)shape.ranks, (long long)shape.experts, (long long)b.token_bytes, (long long)repetitions,
           (long long)warmup);
    char pool[160];
    cli_threads_describe(pool, sizeof pool);
    printf("worker pool: %s\n", pool);
    char cpu[400];
    cli_cpu_describe(cpu, sizeof cpu);
    printf("cpu: %s\n", cpu);
    printf("%-20s %12s %12s %12s %10s\n", "method", "median ms", "min ms", "max ms", "GB/s");
    for (int m = 0; m < METHOD_COUNT; m++)
        printf("%-20s %12.3f %12.3f %12.3f %10.2f\n", names[m], stats[m].median * 1e3, stats[m].min * 1e3,
               stats[m].max * 1e3, gb / stats[m].median);
    if (cli_json_out()) {
        cli_json j;
        cli_rerouting_json_header(&j, "bench", "bench", "re-routing", &shape, b.token_bytes);
        cli_json_int(&j, "iterations", repetitions);
        cli_json_int(&j, "warmup", warmup);
        cli_json_bool(&j, "check_ok", 1);
        cli_json_end(&j);
        for (int m = 0; m < METHOD_COUNT; m++) cli_json_time_row("method", names[m], stats[m], gb);
    }
    printf("ratio (speed of re-routing / speed of memcpy, medians): %.2f vs %s, %.2f vs %s\n",
           stats[METHOD_MEMCPY_1].median / stats[METHOD_REROUTING].median, names[METHOD_MEMCPY_1],
           stats[METHOD_MEMCPY_N].median / stats[METHOD_REROUTING].median, names[METHOD_MEMCPY_N]);
    printf("check: ok (every output row equals the input row its index names)\n");
    rc = MM_CLI_EXIT_OK;
done:
    cli_rerouting_free(&b);
    free(samples);
    return rc;
}
