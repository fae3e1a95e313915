/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_mega_moe_plot.c: the stacked stage bars of `bench mega-moe --plot` (see the header).
 * One bar per rank: dispatch, GEMM1, activation, GEMM2, shared experts and combine laid end to end in
 * milliseconds, so that a rank waiting longer in dispatch or combine (load imbalance, communication)
 * stands out next to the ranks whose compute it waits for. Each case has its own x scale, so that
 * decode's fractions of a millisecond stay readable below prefill's hundreds. */
#include "bench/bench_mega_moe_plot.h"

#include <math.h>
#include <stdio.h>

#include "common/cli_json.h"
#include "common/cli_svg.h"
#include "common/cli_threads.h"

int bench_stage_plot_write(const bench_stage_plot *p, const char *cmd) {
    const double W = 960, left = 150, right = 40, bar = 22, gap = 8, case_top = 64, case_bottom = 56;
    double height = 80 + 40; /* title and legend */
    for (int c = 0; c < p->count; c++) {
        int64_t shown = p->cases[c].ranks < BENCH_PLOT_MAX_RANKS ? p->cases[c].ranks : BENCH_PLOT_MAX_RANKS;
        height += case_top + (double)shown * (bar + gap) + case_bottom;
    }
    cli_svg s;
    if (cli_svg_open(&s, cmd, p->path, W, height) != 0) return -1;
    char cpu[256], threads[160];
    cli_cpu_model(cpu, sizeof cpu);
    cli_threads_describe(threads, sizeof threads);
    cli_svg_text(&s, "title", W / 2, 28, 16, "middle", 0, "megamoe bench mega-moe: stage time per rank, %s",
                 cpu[0] ? cpu : "CPU");
    int as_threads = cli_backend_is_threads(p->backend);
    cli_svg_text(&s, "subtitle", W / 2, 48, 12, "middle", 0,
                 "ranks as %s, worker pool %s%s; mean over the timed layer calls (mm_mega_moe_last_stats)",
                 as_threads ? "threads" : "processes", as_threads ? "" : "of each ", threads);
    /* Legend: one swatch per stage. */
    double lx = left;
    for (int st = 0; st < MM_MEGA_MOE_STAGE_COUNT; st++) {
        cli_svg_rect(&s, "legend-swatch", lx, 66, 14, 14, cli_svg_color(st), NULL);
        cli_svg_text(&s, "legend", lx + 20, 78, 12, "start", 0, "%s",
                     mm_mega_moe_stage_name((mm_mega_moe_stage)st));
        lx += 120;
    }
    double y0 = 100;
    for (int c = 0; c < p->count; c++) {
        const bench_stage_case *k = &p->cases[c];
        int64_t shown = k->ranks < BENCH_PLOT_MAX_RANKS ? k->ranks : BENCH_PLOT_MAX_RANKS;
        double most = k->layer_ms;
        for (int64_t r = 0; r < shown; r++) {
            double sum = 0;
            for (int st = 0; st < MM_MEGA_MOE_STAGE_COUNT; st++) sum += k->ms[r][st];
            most = fmax(most, sum);
        }
        /* 5% headroom, so that the call's line never falls on the frame */
        cli_svg_axis x = {0, most > 0 ? most * 1.05 : 1, 0, left, W - right};
        cli_svg_axis_round(&x);
        double top = y0 + case_top, bottom = top + (double)shown * (bar + gap);
        cli_svg_axis y = {0, 1, 0, bottom, top - gap};
        cli_svg_text(&s, "case-label", left, y0 + case_top - 30, 13, "start", 0, "%s%s", k->label,
                     shown < k->ranks ? " (first ranks only)" : "");
        cli_svg_axes(&s, &x, &y, "milliseconds per call (stages of the rank, end to end)", NULL);
        for (int64_t r = 0; r < shown; r++) {
            double by = top + (double)r * (bar + gap), at = 0;
            cli_svg_text(&s, "rank-label", left - 8, by + bar - 3, 12, "end", 0, "rank %lld", (long long)r);
            for (int st = 0; st < MM_MEGA_MOE_STAGE_COUNT; st++) {
                double ms = k->ms[r][st];
                if (!(ms > 0)) continue;
                char title[96];
                snprintf(title, sizeof title, "rank %lld %s: %.3f ms", (long long)r,
                         mm_mega_moe_stage_name((mm_mega_moe_stage)st), ms);
                double x0 = cli_svg_map(&x, at), x1 = cli_svg_map(&x, at + ms);
                cli_svg_rect(&s, "stage", x0, by, x1 - x0, bar, cli_svg_color(st), title);
                at += ms;
            }
        }
        /* The layer call's mean wall time (first rank start to last rank end) for comparison. */
        double lx_ms = cli_svg_map(&x, k->layer_ms);
        cli_svg_line(&s, "layer-time", lx_ms, top - gap, lx_ms, bottom, "black", 1.5, "5 3");
        /* above the frame, kept inside the chart when the line is near its right end */
        int near_end = lx_ms > W - right - 50;
        cli_svg_text(&s, "layer-time-label", near_end ? lx_ms + 3 : lx_ms, top - gap - 5, 10,
                     near_end ? "end" : "middle", 0, "call %.3f ms (mean)", k->layer_ms);
        y0 = bottom + case_bottom;
    }
    return cli_svg_close(&s, cmd, p->path);
}
