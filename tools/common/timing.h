/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/timing.h: wall-clock timing for the benchmarks and the demo (monotonic clock, seconds). */
#ifndef MEGAMOE_TOOLS_TIMING_H
#define MEGAMOE_TOOLS_TIMING_H

#include <stddef.h>

/* Seconds since an arbitrary fixed point; only differences mean anything. */
double cli_now_seconds(void);

/* Summary of repeated measurements (seconds). */
typedef struct cli_time_stats {
    double median, min, max;
} cli_time_stats;

/* Sorts samples in place and summarizes them; n must be >= 1. */
cli_time_stats cli_time_stats_of(double *samples, size_t n);

#endif
