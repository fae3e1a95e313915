/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_main.c: `megamoe bench [NAME]`: the benchmark table and the baselines they share. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "megamoe/threads.h"

#include "bench/bench.h"
#include "common/cli_util.h"
#include "common/operators.h"
#include "common/renamed.h"

/* Benchmarks of a part rather than an operator; an operator's benchmark is its row's bench entry in the
 * operator table (common/operators.h), named after the operator. */
static const mm_cli_bench bench_table[] = {
    {"comm", "alltoallv latency and bandwidth: threads / MPI backends vs MPI_Alltoallv and memcpy",
     mm_bench_comm_main},
    {"ffn", "expert FFN per format / rows / ISA vs peak loops, streaming bandwidth and oneDNN",
     mm_bench_ffn_main},
    {"experts", "local experts call (one process, no communication) vs MegaMoE on one rank, same weights",
     mm_bench_experts_main},
    {"world", "per-call cost of a persistent world vs mm_comm_run_threads: empty calls, MegaMoE decode",
     mm_bench_world_main},
};
static const size_t bench_count = sizeof bench_table / sizeof bench_table[0];

static void list_benchmarks(FILE *out) {
    fprintf(out, "usage: megamoe bench NAME [options]   (megamoe bench NAME --help for its options)\n\n"
                 "operators:\n");
    cli_operator_print(out, CLI_ENTRY_BENCH, 17);
    fprintf(out, "parts:\n");
    for (size_t i = 0; i < bench_count; i++)
        fprintf(out, "  %-17s %s\n", bench_table[i].name, bench_table[i].summary);
}

int mm_cli_bench_main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "list") == 0) {
        list_benchmarks(stdout);
        return MM_CLI_EXIT_OK;
    }
    mm_cli_main_fn main = NULL;
    const cli_operator *op = cli_operator_find(argv[1], CLI_ENTRY_BENCH);
    if (op) main = op->bench;
    for (size_t i = 0; i < bench_count && !main; i++)
        if (strcmp(argv[1], bench_table[i].name) == 0) main = bench_table[i].main;
    if (!main) {
        if (cli_reject_renamed_name("bench", argv[1])) return MM_CLI_EXIT_USAGE;
        return cli_usage_error("bench", "unknown benchmark '%s'", argv[1]);
    }
    char help[64];
    snprintf(help, sizeof help, "bench %s", argv[1]);
    cli_set_help_command(help);
    if (cli_reject_renamed("bench", argc - 1, argv + 1)) return MM_CLI_EXIT_USAGE;
    return main(argc - 1, argv + 1);
}

int mm_bench_default_threads(void) {
    return mm_threads_count();
}

typedef struct copy_slice {
    void *dst;
    const void *src;
    size_t n;
} copy_slice;

static void *copy_slice_run(void *arg) {
    copy_slice *s = arg;
    memcpy(s->dst, s->src, s->n);
    return NULL;
}

int mm_bench_parallel_memcpy(void *dst, const void *src, size_t n, int threads) {
    enum { MAX_THREADS = 256 };
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    copy_slice slices[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int created[MAX_THREADS] = {0};
    int rc = 0;
    /* Slices are whole cache lines so no two threads write the same line. */
    size_t per = (n / (size_t)threads + 63) / 64 * 64;
    for (int t = 0; t < threads; t++) {
        size_t begin = (size_t)t * per < n ? (size_t)t * per : n;
        size_t end = begin + per < n ? begin + per : n;
        slices[t] = (copy_slice){(char *)dst + begin, (const char *)src + begin, end - begin};
    }
    /* The calling thread takes slice 0, as a pool's caller would; a slice whose thread cannot start is
     * copied here too, so the copy is always complete. */
    for (int t = 1; t < threads; t++) {
        created[t] = pthread_create(&ids[t], NULL, copy_slice_run, &slices[t]) == 0;
        if (!created[t]) {
            copy_slice_run(&slices[t]);
            rc = -1;
        }
    }
    copy_slice_run(&slices[0]);
    for (int t = 1; t < threads; t++)
        if (created[t]) pthread_join(ids[t], NULL);
    return rc;
}
