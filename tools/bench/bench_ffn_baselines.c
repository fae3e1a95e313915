/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_ffn_baselines.c: the baselines of `bench ffn`, measured in the same run as the FFN: peak
 * instruction rates (bench_ffn_peak_avx512.c, bench_ffn_amx_avx512.c) and streaming-read bandwidth,
 * each with 1..N threads started together (plain pthreads, not the library's pool: a baseline must not
 * depend on the code under test). */
#include <pthread.h>
#include <stdlib.h>

#include "bench/bench_ffn.h"
#include "core/cpu.h"
#include "common/timing.h"

enum { MAX_THREADS = 64 };

typedef struct worker {
    pthread_barrier_t *start;
    bench_ffn_peak_fn peak;
    int64_t iterations;
    const uint8_t *buf;
    size_t bytes;
    double ops;
    double t_begin, t_end;
    uint64_t checksum;
} worker;

static void *worker_run(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(w->start);
    w->t_begin = cli_now_seconds();
    /* The stream baseline is measured only where AVX-512 runs (bench_ffn.c), so off x86-64 never. */
    uint64_t (*stream_read)(const void *, size_t) = MM_X86_ONLY(bench_ffn_stream_read_avx512);
    if (w->peak)
        w->ops = w->peak(w->iterations);
    else if (stream_read)
        w->checksum = stream_read(w->buf, w->bytes);
    w->t_end = cli_now_seconds();
    return NULL;
}

/* Runs the workers together; returns the wall time from the first start to the last end (or -1). */
static double run_workers(worker *w, int threads) {
    pthread_t ids[MAX_THREADS];
    pthread_barrier_t start;
    if (pthread_barrier_init(&start, NULL, (unsigned)threads) != 0) return -1;
    int created = 1;
    for (int t = 0; t < threads; t++) w[t].start = &start;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&ids[t], NULL, worker_run, &w[t]) != 0) break;
        created++;
    }
    if (created < threads) {
        /* The barrier cannot be released with a thread missing: this baseline is not measurable. */
        pthread_barrier_destroy(&start);
        return -1;
    }
    worker_run(&w[0]);
    for (int t = 1; t < threads; t++) pthread_join(ids[t], NULL);
    pthread_barrier_destroy(&start);
    double begin = w[0].t_begin, end = w[0].t_end;
    for (int t = 1; t < threads; t++) {
        if (w[t].t_begin < begin) begin = w[t].t_begin;
        if (w[t].t_end > end) end = w[t].t_end;
    }
    return end - begin;
}

static double median_of(double *v, int n) {
    cli_time_stats s = cli_time_stats_of(v, (size_t)n);
    return s.median;
}

double bench_ffn_peak_rate(bench_ffn_peak_fn fn, int threads, double seconds, int samples) {
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    /* Calibrate on one thread: iterations for about `seconds`. */
    int64_t iterations = 1000;
    for (;;) {
        double t0 = cli_now_seconds();
        fn(iterations);
        double dt = cli_now_seconds() - t0;
        if (dt > seconds / 4 || iterations > ((int64_t)1 << 40)) {
            iterations = (int64_t)((double)iterations * seconds / (dt > 0 ? dt : 1e-9)) + 1;
            break;
        }
        iterations *= 4;
    }
    worker w[MAX_THREADS] = {{0}};
    double rates[32] = {0};
    if (samples > 32) samples = 32;
    if (samples < 1) samples = 1;
    for (int s = 0; s < samples; s++) {
        for (int t = 0; t < threads; t++) w[t] = (worker){.peak = fn, .iterations = iterations};
        double dt = run_workers(w, threads);
        if (dt <= 0) return 0;
        double ops = 0;
        for (int t = 0; t < threads; t++) ops += w[t].ops;
        rates[s] = ops / dt;
    }
    /* The best sample, not the median: a peak is an upper bound and a disturbance (another process, a
     * late worker) only lowers a sample; a median of 3 once read 1032 GOP/s for vpdpbusd on 2 threads
     * where the INT8 kernel then reached 1171. */
    double best = rates[0];
    for (int s = 1; s < samples; s++) best = rates[s] > best ? rates[s] : best;
    return best;
}

double bench_ffn_stream_rate(const void *buf, size_t bytes, int threads, int samples) {
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    worker w[MAX_THREADS] = {{0}};
    double rates[32];
    if (samples > 32) samples = 32;
    size_t per = bytes / (size_t)threads / 256 * 256;
    for (int s = 0; s < samples; s++) {
        for (int t = 0; t < threads; t++)
            w[t] = (worker){.buf = (const uint8_t *)buf + (size_t)t * per, .bytes = per};
        double dt = run_workers(w, threads);
        if (dt <= 0) return 0;
        rates[s] = (double)per * (double)threads / dt;
    }
    return median_of(rates, samples);
}
