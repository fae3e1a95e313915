/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_mega_moe_plot.h: `bench mega-moe --plot FILE.svg`: the stage breakdown of a layer
 * call per rank (mm_mega_moe_last_stats, mean over the timed calls) as stacked horizontal bars, one group
 * of bars per case of the run. */
#ifndef MEGAMOE_TOOLS_BENCH_MEGA_MOE_PLOT_H
#define MEGAMOE_TOOLS_BENCH_MEGA_MOE_PLOT_H

#include <stdint.h>

#include "megamoe/mega_moe.h"

#define BENCH_PLOT_MAX_RANKS                                                                                 \
    64 /* ranks drawn per case (a bar each); more are left out, said in the chart                            \
        */
#define BENCH_PLOT_MAX_CASES 18

typedef struct bench_stage_case {
    char label[128];
    int64_t ranks;
    double layer_ms; /* the mean call, first rank start to last rank end */
    double ms[BENCH_PLOT_MAX_RANKS][MM_MEGA_MOE_STAGE_COUNT];
} bench_stage_case;

typedef struct bench_stage_plot {
    const char *path;
    const char *backend; /* threads: ranks are threads of this process; else one process per rank */
    int count;
    bench_stage_case cases[BENCH_PLOT_MAX_CASES];
} bench_stage_plot;

/* Writes the chart; 0, or -1 after one error line naming `command`. */
int bench_stage_plot_write(const bench_stage_plot *p, const char *command);

#endif
