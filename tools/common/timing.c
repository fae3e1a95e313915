/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/timing.c: monotonic clock and median/min/max of repeated timings. */
#include "common/timing.h"

#include <stdlib.h>
#include <time.h>

double cli_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

cli_time_stats cli_time_stats_of(double *samples, size_t n) {
    qsort(samples, n, sizeof *samples, compare_doubles);
    cli_time_stats s;
    s.min = samples[0];
    s.max = samples[n - 1];
    s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    return s;
}
