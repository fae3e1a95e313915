/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_trace.c: the Chrome / Perfetto JSON trace of `megamoe run --trace FILE`.
 *
 * One track (thread) per rank, one slice per timed call ("mega_moe <scenario>") and inside it one slice
 * per stage event the operator recorded (mm_mega_moe_last_stats), on the shared CLOCK_MONOTONIC time
 * line so that stages of different ranks can be seen overlapping. Slices on one track must nest; an
 * event that overlaps the previous one on its rank without nesting (work running concurrently inside
 * one rank) goes to an extra track of that rank ("rank R overlap N"). Load the file in
 * ui.perfetto.dev or chrome://tracing. */
#include <stdio.h>
#include <string.h>

#include "run/run_moe.h"

enum { TRACE_MAX_LANES = 4, TRACE_LANE_TID_STEP = 1000 };

int run_moe_trace_open(run_moe_trace *t, const char *path, int64_t ranks) {
    memset(t, 0, sizeof *t);
    if (cli_trace_open(&t->base, NULL, path, "megamoe run") != 0) return -1;
    for (int64_t r = 0; r < ranks; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank %lld", (long long)r);
        cli_trace_thread(&t->base, r, name, r * TRACE_MAX_LANES);
    }
    return 0;
}

static void slice(run_moe_trace *t, int64_t tid, const char *name, const char *cat, double begin, double end,
                  int64_t iteration) {
    char args[48];
    snprintf(args, sizeof args, "\"iteration\":%lld", (long long)iteration);
    cli_trace_slice(&t->base, tid, name, cat, begin, end, args);
}

void run_moe_trace_scenario(run_moe_trace *t, const run_moe_config *cfg, const run_moe_scenario *sc,
                            const run_moe_rank_result *results) {
    if (!t->base.file) return;
    if (t->base.origin < 0.0) {
        t->base.origin = results[0].stats[0].total_begin;
        for (int64_t r = 1; r < cfg->ranks; r++)
            if (results[r].stats[0].total_begin < t->base.origin)
                t->base.origin = results[r].stats[0].total_begin;
    }
    char run_name[64];
    snprintf(run_name, sizeof run_name, "mega_moe %s", sc->spec_name);
    for (int64_t r = 0; r < cfg->ranks; r++) {
        for (int64_t it = 0; it < cfg->iterations; it++) {
            const mm_mega_moe_stats *s = &results[r].stats[it];
            slice(t, r, run_name, "run", s->total_begin, s->total_end, it);
            double lane_end[TRACE_MAX_LANES] = {0};
            for (int i = 0; i < s->event_count && i < MM_MEGA_MOE_MAX_EVENTS; i++) {
                const mm_mega_moe_event *ev = &s->events[i];
                /* first lane whose last slice ended before this one begins (lane 0 nests in the call) */
                int lane = 0;
                while (lane < TRACE_MAX_LANES - 1 && lane_end[lane] > ev->begin) lane++;
                if (ev->end > lane_end[lane]) lane_end[lane] = ev->end;
                int64_t tid = r + lane * TRACE_LANE_TID_STEP;
                if (lane > 0 && !t->lane_named[r][lane]) {
                    char name[48];
                    snprintf(name, sizeof name, "rank %lld overlap %d", (long long)r, lane);
                    cli_trace_thread(&t->base, tid, name, r * TRACE_MAX_LANES + lane);
                    t->lane_named[r][lane] = 1;
                }
                slice(t, tid, mm_mega_moe_stage_name(ev->stage), sc->spec_name, ev->begin, ev->end, it);
            }
        }
    }
}

int run_moe_trace_close(run_moe_trace *t) {
    return cli_trace_close(&t->base, NULL, NULL);
}
