/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_comm.c: `megamoe bench comm`: alltoallv latency and bandwidth of the communicator.
 *
 * Sizes: 8 bytes per peer (latency), then rows of 7168 BF16 values (the hidden size of the large MoE
 * models), 1 to 512 rows per peer. Methods, all measured in the same run with the same rank count:
 *   threads        mm_comm_alltoallv on the threads backend (ranks = threads of one process)
 *   mm-mpi         mm_comm_alltoallv on the MPI backend      (--backend mpi, under mpirun)
 *   MPI_Alltoallv  Open MPI's own alltoallv on MPI_COMM_WORLD (--backend mpi, under mpirun)
 *   memcpy         all ranks' bytes (ranks x ranks blocks) copied by one memcpy split over the cores,
 *                  the speed limit of any alltoallv on one machine
 * A time is the median over repetitions of one call (batches of calls between barriers, divided by the
 * batch size); bandwidth counts every block moved by all ranks, the self block included. Under mpirun
 * rank 0 runs the threads and memcpy measurements while the other processes sleep. */
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "common/cli_json.h"
#include "common/cli_options.h"
#include "common/cli_util.h"
#include "megamoe/comm.h"
#include "common/timing.h"

#ifdef MEGAMOE_HAVE_MPI
#include <mpi.h>
#endif

static const char bench_comm_usage[] =
    "usage: megamoe bench comm [options]\n"
    "       mpirun -n N megamoe bench comm --backend mpi [options]\n"
    "\n"
    "Times alltoallv with 8 bytes per peer (latency) and with 1..512 rows of 7168 BF16 values per peer\n"
    "(bandwidth). With --backend threads (default) the threads backend runs for each rank count of\n"
    "--ranks and is compared with memcpy of the same bytes. With --backend mpi (under mpirun) the rank\n"
    "count is the number of processes, and the same run measures the MPI backend, MPI_Alltoallv, the\n"
    "threads backend with as many ranks, and memcpy. Reports median microseconds per call, GB/s, and\n"
    "the ratios threads vs MPI_Alltoallv and threads vs memcpy.\n"
    "\n"
    "options:\n"
    "      --backend B       threads or mpi (default threads)\n"
    "      --ranks LIST      rank counts for --backend threads, comma-separated (default 2,4,8)\n"
    "      --max-rows R      largest rows per peer, a power of two up to 512 (default 512)\n"
    "      --iterations K    timed repetitions per size (default 7)\n"
    "      --warmup K        untimed repetitions first (default 2)\n"
    "      --json            JSON Lines on stdout instead of the tables (docs/cli.md)\n"
    "  -h, --help            show this help\n";

#define BENCH_ROW_BYTES  ((size_t)7168 * 2)
#define BENCH_MAX_POINTS 12

enum { M_THREADS, M_THREADS_PUT, M_MM_MPI, M_MPI_PUT, M_MPI_ALLTOALLV, M_MEMCPY, M_COUNT };
static const char *const method_names[M_COUNT] = {"threads", "threads put",   "mm-mpi",
                                                  "mpi put", "MPI_Alltoallv", "memcpy"};

typedef struct bench_cfg {
    int ranks;
    int repetitions, warmup;
    int points;
    size_t per_peer[BENCH_MAX_POINTS]; /* bytes each rank sends to each rank */
} bench_cfg;

typedef struct bench_run {
    const bench_cfg *cfg;
    double median[BENCH_MAX_POINTS];     /* alltoallv: seconds per call, written by rank 0 */
    double median_put[BENCH_MAX_POINTS]; /* put + signal into symmetric buffers */
} bench_run;

/* Calls per timed batch: about 16 MB per rank per batch, so a batch lasts long enough to time. */
static int batch_calls(size_t per_peer, int ranks) {
    size_t per_rank = per_peer * (size_t)ranks;
    size_t calls = (size_t)16000000 / (per_rank + 1);
    return calls < 1 ? 1 : calls > 1000 ? 1000 : (int)calls;
}

static uint8_t bench_byte(int src, int dst, size_t i) {
    return (uint8_t)(src * 37 + dst * 11 + (int)(i % 251));
}

static double median_of(double *samples, int n) {
    return cli_time_stats_of(samples, (size_t)n).median;
}

/* One rank of an mm_comm measurement (either backend): every size, then a check of the data. */
static mm_status bench_comm_rank(mm_comm *c, void *arg, mm_error *err) {
    bench_run *run = arg;
    const bench_cfg *cfg = run->cfg;
    const int me = mm_comm_rank(c), n = mm_comm_size(c);
    size_t largest = cfg->per_peer[cfg->points - 1];
    size_t sc[MM_COMM_MAX_RANKS], sd[MM_COMM_MAX_RANKS], rc[MM_COMM_MAX_RANKS], rd[MM_COMM_MAX_RANKS];
    double *samples = calloc((size_t)cfg->repetitions, sizeof *samples);
    uint8_t *send = malloc(largest * (size_t)n), *recv = malloc(largest * (size_t)n);
    mm_symm *symm = NULL;
    uint64_t put_rounds = 0;
    mm_status st = MM_OK;
    if (!samples || !send || !recv) {
        st = cli_fail(err, MM_ERR_INTERNAL, "no memory for %zu bytes per rank", 2 * largest * (size_t)n);
        goto done;
    }
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < largest; i++) send[(size_t)p * largest + i] = bench_byte(me, p, i);
    memset(recv, 0, largest * (size_t)n);
    st = mm_symm_alloc(c, 2 * (size_t)n * largest, &symm, err);
    for (int k = 0; k < cfg->points && st == MM_OK; k++) {
        size_t per = cfg->per_peer[k];
        for (int p = 0; p < n; p++) {
            sc[p] = rc[p] = per;
            sd[p] = rd[p] = (size_t)p * largest;
        }
        int calls = batch_calls(per, n);
        for (int rep = -cfg->warmup; rep < cfg->repetitions && st == MM_OK; rep++) {
            st = mm_comm_barrier(c, err);
            double t0 = cli_now_seconds();
            for (int i = 0; i < calls && st == MM_OK; i++)
                st = mm_comm_alltoallv(c, send, sc, sd, recv, rc, rd, err);
            if (st == MM_OK) st = mm_comm_barrier(c, err);
            double t1 = cli_now_seconds();
            if (rep >= 0) samples[rep] = (t1 - t0) / calls;
        }
        if (me == 0) run->median[k] = median_of(samples, cfg->repetitions);

        /* The same exchange as dispatch does it: put each block straight into the destination's
         * symmetric buffer, signal, wait for every peer's signal. Two halves alternate, so a block
         * is never overwritten before its receiver has moved on (it waited for my previous signal). */
        for (int rep = -cfg->warmup; rep < cfg->repetitions && st == MM_OK; rep++) {
            st = mm_comm_barrier(c, err);
            double t0 = cli_now_seconds();
            for (int i = 0; i < calls && st == MM_OK; i++) {
                size_t half = (size_t)(put_rounds & 1) * (size_t)n * largest;
                for (int j = 0; j < n && st == MM_OK; j++) {
                    int p = (me + j) % n;
                    st = mm_symm_put(symm, p, half + (size_t)me * largest, send + (size_t)p * largest, per,
                                     err);
                    if (st == MM_OK) st = mm_symm_signal(symm, p, 1, err);
                }
                put_rounds++;
                if (st == MM_OK) st = mm_symm_wait_all(symm, put_rounds, err);
            }
            if (st == MM_OK) st = mm_comm_barrier(c, err);
            double t1 = cli_now_seconds();
            if (rep >= 0) samples[rep] = (t1 - t0) / calls;
        }
        if (me == 0) run->median_put[k] = median_of(samples, cfg->repetitions);
    }
    /* Check the last round of puts too. */
    if (st == MM_OK) {
        const uint8_t *got =
            (const uint8_t *)mm_symm_local(symm) + (size_t)((put_rounds - 1) & 1) * (size_t)n * largest;
        for (int p = 0; p < n && st == MM_OK; p++)
            for (size_t i = 0; i < largest; i++)
                if (got[(size_t)p * largest + i] != bench_byte(p, me, i)) {
                    st = cli_fail(err, MM_ERR_INTERNAL, "rank %d: put byte %zu from rank %d is wrong", me, i,
                                  p);
                    break;
                }
    }
    /* The last size moved `largest` bytes from every peer: check them all. */
    for (int p = 0; p < n && st == MM_OK; p++)
        for (size_t i = 0; i < largest; i++)
            if (recv[(size_t)p * largest + i] != bench_byte(p, me, i)) {
                st = cli_fail(err, MM_ERR_INTERNAL, "rank %d: byte %zu from rank %d is wrong", me, i, p);
                break;
            }
done:
    if (symm) {
        mm_status freed = mm_symm_free(symm, st == MM_OK ? err : NULL);
        if (st == MM_OK) st = freed;
    }
    free(samples);
    free(send);
    free(recv);
    return st;
}

/* The speed limit: all ranks' blocks (ranks^2 of them) copied once by memcpy, the faster of one
 * thread and a copy split over all cores (threads started per call cost more than small copies). */
static int bench_memcpy(const bench_cfg *cfg, double *median) {
    size_t largest = cfg->per_peer[cfg->points - 1] * (size_t)cfg->ranks * (size_t)cfg->ranks;
    uint8_t *src = malloc(largest), *dst = malloc(largest);
    double *samples = calloc((size_t)cfg->repetitions, sizeof *samples);
    int rc = -1;
    if (!src || !dst || !samples) goto done;
    memset(src, 1, largest);
    memset(dst, 0, largest);
    int threads = mm_bench_default_threads();
    for (int k = 0; k < cfg->points; k++) {
        size_t bytes = cfg->per_peer[k] * (size_t)cfg->ranks * (size_t)cfg->ranks;
        int calls = batch_calls(cfg->per_peer[k], cfg->ranks);
        median[k] = 0;
        for (int split = 0; split < 2; split++) {
            for (int rep = -cfg->warmup; rep < cfg->repetitions; rep++) {
                double t0 = cli_now_seconds();
                for (int i = 0; i < calls; i++) {
                    if (split)
                        mm_bench_parallel_memcpy(dst, src, bytes, threads);
                    else
                        memcpy(dst, src, bytes);
                }
                double t1 = cli_now_seconds();
                if (rep >= 0) samples[rep] = (t1 - t0) / calls;
            }
            double t = median_of(samples, cfg->repetitions);
            if (median[k] == 0 || t < median[k]) median[k] = t;
        }
    }
    rc = 0;
done:
    free(src);
    free(dst);
    free(samples);
    return rc;
}

#ifdef MEGAMOE_HAVE_MPI
/* Open MPI's MPI_Alltoallv on the same buffers and sizes, timed like the others. */
static int bench_mpi_alltoallv(const bench_cfg *cfg, double *median) {
    int me = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t largest = cfg->per_peer[cfg->points - 1];
    int sc[MM_COMM_MAX_RANKS], sd[MM_COMM_MAX_RANKS];
    uint8_t *send = malloc(largest * (size_t)n), *recv = malloc(largest * (size_t)n);
    double *samples = calloc((size_t)cfg->repetitions, sizeof *samples);
    int rc = -1;
    if (!send || !recv || !samples) goto done;
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < largest; i++) send[(size_t)p * largest + i] = bench_byte(me, p, i);
    for (int k = 0; k < cfg->points; k++) {
        for (int p = 0; p < n; p++) {
            sc[p] = (int)cfg->per_peer[k];
            sd[p] = (int)((size_t)p * largest);
        }
        int calls = batch_calls(cfg->per_peer[k], n);
        for (int rep = -cfg->warmup; rep < cfg->repetitions; rep++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = cli_now_seconds();
            for (int i = 0; i < calls; i++)
                MPI_Alltoallv(send, sc, sd, MPI_BYTE, recv, sc, sd, MPI_BYTE, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            double t1 = cli_now_seconds();
            if (rep >= 0) samples[rep] = (t1 - t0) / calls;
        }
        median[k] = median_of(samples, cfg->repetitions);
    }
    rc = 0;
done:
    free(send);
    free(recv);
    free(samples);
    return rc;
}

/* The other processes wait here while rank 0 measures alone: polling a non-blocking barrier with
 * millisecond sleeps keeps them off the cores rank 0 is timing. */
static void sleepy_barrier(void) {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (;;) {
        int done = 0;
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}
#endif

/* --json: the header once, then one object per (rank count, size); null for a method not measured. */
static void json_table(const bench_cfg *cfg, double results[M_COUNT][BENCH_MAX_POINTS], const int *measured,
                       const char *how) {
    static const char *const keys[M_COUNT] = {"threads_us", "threads_put_us",   "mm_mpi_us",
                                              "mpi_put_us", "mpi_alltoallv_us", "memcpy_us"};
    static int header_done;
    if (!header_done++) {
        cli_json j = cli_json_header("bench", "bench", "comm");
        cli_json_int(&j, "iterations", cfg->repetitions);
        cli_json_int(&j, "warmup", cfg->warmup);
        cli_json_end(&j);
    }
    for (int k = 0; k < cfg->points; k++) {
        double total_gb = (double)cfg->per_peer[k] * cfg->ranks * cfg->ranks * 1e-9;
        cli_json j = cli_json_row("row");
        cli_json_int(&j, "ranks", cfg->ranks);
        cli_json_str(&j, "ranks_as", how);
        cli_json_int(&j, "bytes_per_peer", (int64_t)cfg->per_peer[k]);
        for (int m = 0; m < M_COUNT; m++) cli_json_num(&j, keys[m], measured[m] ? results[m][k] * 1e6 : NAN);
        cli_json_num(&j, "threads_gb_per_s", total_gb / results[M_THREADS][k]);
        cli_json_num(&j, "memcpy_gb_per_s", total_gb / results[M_MEMCPY][k]);
        cli_json_end(&j);
    }
}

static void print_table(const bench_cfg *cfg, double results[M_COUNT][BENCH_MAX_POINTS], const int *measured,
                        const char *how) {
    if (cli_json_out()) json_table(cfg, results, measured, how);
    printf("bench comm: %d ranks, %s; median of %d repetitions after %d warm-up\n", cfg->ranks, how,
           cfg->repetitions, cfg->warmup);
    printf("microseconds per call; GB/s counts all %d x %d blocks moved, self included\n", cfg->ranks,
           cfg->ranks);
    printf("%-22s", "bytes per peer");
    for (int m = 0; m < M_COUNT; m++)
        if (measured[m]) printf(" %13s", method_names[m]);
    printf(" %12s", "threads GB/s");
    printf(" %12s", "memcpy GB/s");
    if (measured[M_MPI_ALLTOALLV]) printf(" %8s", "thr/MPI");
    printf(" %11s\n", "thr/memcpy");
    for (int k = 0; k < cfg->points; k++) {
        char label[40];
        size_t per = cfg->per_peer[k];
        if (per % BENCH_ROW_BYTES == 0)
            snprintf(label, sizeof label, "%zu row%s (%zu B)", per / BENCH_ROW_BYTES,
                     per == BENCH_ROW_BYTES ? "" : "s", per);
        else
            snprintf(label, sizeof label, "%zu B", per);
        printf("%-22s", label);
        double total_gb = (double)per * cfg->ranks * cfg->ranks * 1e-9;
        for (int m = 0; m < M_COUNT; m++)
            if (measured[m]) printf(" %13.1f", results[m][k] * 1e6);
        printf(" %12.2f %12.2f", total_gb / results[M_THREADS][k], total_gb / results[M_MEMCPY][k]);
        if (measured[M_MPI_ALLTOALLV]) printf(" %7.2fx", results[M_MPI_ALLTOALLV][k] / results[M_THREADS][k]);
        printf(" %10.0f%%\n", 100.0 * results[M_MEMCPY][k] / results[M_THREADS][k]);
    }
    fflush(stdout);
}

/* --ranks LIST: up to 16 comma-separated rank counts. */
typedef struct rank_list {
    int ranks[16], count;
} rank_list;

static int parse_ranks(const char *command, const char *option, const char *text, void *target) {
    rank_list *list = target;
    list->count = 0;
    const char *at = text;
    while (*at) {
        char *end = NULL;
        long v = strtol(at, &end, 10);
        if (end == at || v < 1 || v > MM_COMM_MAX_RANKS || (*end && *end != ',') || list->count >= 16) {
            cli_error(command, "%s '%s' is not a comma-separated list of rank counts in [1, %d]", option,
                      text, MM_COMM_MAX_RANKS);
            return -1;
        }
        list->ranks[list->count++] = (int)v;
        at = *end ? end + 1 : end;
    }
    if (list->count == 0) {
        cli_error(command, "%s is empty", option);
        return -1;
    }
    return 0;
}

/* --max-rows N: a power of two in [1, 512]. */
static int parse_max_rows(const char *command, const char *option, const char *text, void *target) {
    int64_t *max_rows = target;
    if (cli_parse_int64(command, option, text, 1, 512, max_rows)) return -1;
    if (*max_rows & (*max_rows - 1)) {
        cli_error(command, "%s %lld is not a power of two", option, (long long)*max_rows);
        return -1;
    }
    return 0;
}

static int run_threads_and_memcpy(const char *cmd, bench_cfg *cfg,
                                  double results[M_COUNT][BENCH_MAX_POINTS]) {
    bench_run run = {cfg, {0}, {0}};
    mm_error err;
    mm_error_clear(&err);
    /* mpirun binds each process to one core: the threads (which inherit the mask) and the memcpy
     * baseline get every core of the machine, as they would outside mpirun, and the binding is put
     * back afterwards. */
    cpu_set_t saved, all;
    int rebound = sched_getaffinity(0, sizeof saved, &saved) == 0;
    if (rebound) {
        CPU_ZERO(&all);
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) CPU_SET(cpu, &all);
        rebound = sched_setaffinity(0, sizeof all, &all) == 0;
    }
    mm_status st = mm_comm_run_threads(cfg->ranks, bench_comm_rank, &run, NULL, NULL, &err);
    int memcpy_rc = st == MM_OK ? bench_memcpy(cfg, results[M_MEMCPY]) : 0;
    if (rebound) sched_setaffinity(0, sizeof saved, &saved);
    if (st != MM_OK) return cli_report(cmd, &err);
    memcpy(results[M_THREADS], run.median, sizeof run.median);
    memcpy(results[M_THREADS_PUT], run.median_put, sizeof run.median_put);
    if (memcpy_rc != 0) {
        cli_error(cmd, "no memory for the memcpy baseline");
        return MM_CLI_EXIT_FAILURE;
    }
    return MM_CLI_EXIT_OK;
}

#ifdef MEGAMOE_HAVE_MPI
typedef struct launched_bench {
    const char *cmd;
    bench_cfg *cfg;
    int rc;
} launched_bench;

/* One process under mpirun (mm_comm_launch): threads and memcpy on process 0, then the MPI backend
 * and MPI_Alltoallv on every process; process 0 prints. */
static mm_status bench_process(mm_comm *c, void *arg, mm_error *err) {
    launched_bench *lb = arg;
    const char *cmd = lb->cmd;
    bench_cfg *cfg = lb->cfg;
    int me = mm_comm_rank(c), rc = MM_CLI_EXIT_OK;
    cfg->ranks = mm_comm_size(c);
    double results[M_COUNT][BENCH_MAX_POINTS] = {{0}};
    int ok = 1, all_ok = 0;
    /* Threads and memcpy first, by rank 0 alone while the others sleep. */
    if (me == 0) {
        rc = run_threads_and_memcpy(cmd, cfg, results);
        ok = rc == MM_CLI_EXIT_OK;
    }
    sleepy_barrier();
    bench_run run = {cfg, {0}, {0}};
    mm_status st = bench_comm_rank(c, &run, err);
    /* Every process learns whether all succeeded before going on. */
    ok = ok && st == MM_OK;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (st != MM_OK)
            rc = cli_report(cmd, err);
        else
            rc = MM_CLI_EXIT_FAILURE;
        goto done;
    }
    memcpy(results[M_MM_MPI], run.median, sizeof run.median);
    memcpy(results[M_MPI_PUT], run.median_put, sizeof run.median_put);
    if (bench_mpi_alltoallv(cfg, results[M_MPI_ALLTOALLV]) != 0) ok = 0;
    if (me == 0 && ok) {
        int measured[M_COUNT] = {1, 1, 1, 1, 1, 1};
        print_table(cfg, results, measured, "MPI processes and threads of one process");
    }
    if (!ok && rc == MM_CLI_EXIT_OK) rc = MM_CLI_EXIT_FAILURE;
done:
    lb->rc = rc;
    mm_error_clear(err); /* reported above; the exit status carries it */
    return MM_OK;
}
#endif

static int run_mpi(const char *cmd, bench_cfg *cfg) {
    mm_error err;
    mm_error_clear(&err);
#ifdef MEGAMOE_HAVE_MPI
    launched_bench lb = {cmd, cfg, MM_CLI_EXIT_OK};
    if (mm_comm_launch("mpi", 0, bench_process, &lb, &err) != MM_OK) return cli_report(cmd, &err);
    return lb.rc;
#else
    (void)cfg;
    (void)mm_comm_backend_check("mpi", &err); /* the line saying this build lacks it */
    return cli_report(cmd, &err);
#endif
}

int mm_bench_comm_main(int argc, char **argv) {
    const char *cmd = "bench comm";
    const char *backend = "threads";
    rank_list ranks = {{2, 4, 8}, 3};
    int64_t max_rows = 512, repetitions = 7, warmup = 2;
    int json = 0;
    const cli_option options[] = {
        CLI_BACKEND_OPTION(&backend),
        CLI_CUSTOM_OPTION("ranks", parse_ranks, &ranks),
        CLI_CUSTOM_OPTION("max-rows", parse_max_rows, &max_rows),
        CLI_INT64_OPTION("iterations", &repetitions, 1, 10000),
        CLI_INT64_OPTION("warmup", &warmup, 0, 10000),
        CLI_FLAG_OPTION("json", &json),
    };
    int done =
        cli_options_parse(cmd, bench_comm_usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (json && cli_json_redirect(cmd) != 0) return MM_CLI_EXIT_FAILURE;

    bench_cfg cfg = {0, (int)repetitions, (int)warmup, 0, {0}};
    cfg.per_peer[cfg.points++] = 8;
    for (int64_t rows = 1; rows <= max_rows; rows *= 2)
        cfg.per_peer[cfg.points++] = (size_t)rows * BENCH_ROW_BYTES;
    if (!cli_backend_is_threads(backend)) return run_mpi(cmd, &cfg);

    for (int i = 0; i < ranks.count; i++) {
        cfg.ranks = ranks.ranks[i];
        double results[M_COUNT][BENCH_MAX_POINTS] = {{0}};
        int rc = run_threads_and_memcpy(cmd, &cfg, results);
        if (rc != MM_CLI_EXIT_OK) return rc;
        int measured[M_COUNT] = {1, 1, 0, 0, 0, 1};
        print_table(&cfg, results, measured, "threads of one process");
    }
    return MM_CLI_EXIT_OK;
}
