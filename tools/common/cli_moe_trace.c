/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_moe_trace.c: the MegaMoE calls' slices and flows of a trace (cli_moe_trace.h).
 * Slices on one track must nest; an event that overlaps the previous one on its rank without nesting
 * (work running concurrently inside one rank) goes to an extra lane of that rank. */
#include "common/cli_moe_trace.h"

#include <stdio.h>
#include <string.h>

int cli_moe_trace_open(cli_moe_trace *t, const char *command, const char *path, const char *process,
                       int64_t ranks, const char *host) {
    memset(t, 0, sizeof *t);
    if (cli_trace_open(&t->base, command, path, process) != 0) return -1;
    for (int64_t r = 0; r < ranks; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank %lld", (long long)r);
        cli_trace_thread(&t->base, r, name, r * CLI_MOE_TRACE_MAX_LANES);
    }
    cli_trace_thread(&t->base, CLI_MOE_TRACE_HOST_TID, host, ranks * CLI_MOE_TRACE_MAX_LANES);
    return 0;
}

static int64_t tid_of(int64_t rank, int lane) {
    return rank + lane * CLI_MOE_TRACE_LANE_TID_STEP;
}

/* The lane of each event: the first whose last event ended before this one begins (lane 0 nests in the
 * call). */
static void assign_lanes(const mm_mega_moe_stats *s, int *lane_of) {
    double lane_end[CLI_MOE_TRACE_MAX_LANES] = {0};
    for (int i = 0; i < s->event_count && i < MM_MEGA_MOE_MAX_EVENTS; i++) {
        const mm_mega_moe_event *ev = &s->events[i];
        int lane = 0;
        while (lane < CLI_MOE_TRACE_MAX_LANES - 1 && lane_end[lane] > ev->begin) lane++;
        if (ev->end > lane_end[lane]) lane_end[lane] = ev->end;
        lane_of[i] = lane;
    }
}

static double middle(const mm_mega_moe_event *ev) {
    return 0.5 * (ev->begin + ev->end);
}

/* The call's first event is its dispatch of this rank's rows; later dispatch events are waits. */
static int is_send(const mm_mega_moe_stats *s, int i) {
    return i == 0 && s->event_count > 0 && s->events[0].stage == MM_MEGA_MOE_STAGE_DISPATCH;
}

/* Args members "batch":b,"experts":[...],"rows":[...] of a batch's expert records. */
static void write_batch_args(FILE *f, const mm_mega_moe_stats *s, int batch) {
    fprintf(f, ",\"batch\":%d,\"experts\":[", batch);
    for (int q = 0, n = 0; q < s->expert_count; q++)
        if (s->experts[q].batch == batch) fprintf(f, "%s%d", n++ ? "," : "", s->experts[q].expert);
    fputs("],\"rows\":[", f);
    for (int q = 0, n = 0; q < s->expert_count; q++)
        if (s->experts[q].batch == batch) fprintf(f, "%s%lld", n++ ? "," : "", (long long)s->experts[q].rows);
    fputc(']', f);
}

/* Args members "experts":[...],"rows":[...] of the experts a rank's rows are routed to. */
static void write_routed_args(FILE *f, const int64_t *routed, int64_t experts) {
    fputs(",\"experts\":[", f);
    for (int64_t e = 0, n = 0; e < experts; e++)
        if (routed[e] > 0) fprintf(f, "%s%lld", n++ ? "," : "", (long long)e);
    fputs("],\"rows\":[", f);
    for (int64_t e = 0, n = 0; e < experts; e++)
        if (routed[e] > 0) fprintf(f, "%s%lld", n++ ? "," : "", (long long)routed[e]);
    fputc(']', f);
}

void cli_moe_trace_call(cli_moe_trace *t, int64_t r, const char *name, const char *cat, const char *args,
                        const mm_mega_moe_stats *s, const int64_t *routed, int64_t experts) {
    if (!t->base.file) return;
    cli_trace_slice(&t->base, r, name, "run", s->total_begin, s->total_end, args);
    int lane_of[MM_MEGA_MOE_MAX_EVENTS];
    assign_lanes(s, lane_of);
    for (int i = 0; i < s->event_count && i < MM_MEGA_MOE_MAX_EVENTS; i++) {
        const mm_mega_moe_event *ev = &s->events[i];
        int lane = lane_of[i];
        if (lane > 0 && !t->lane_named[r][lane]) {
            char track[48];
            snprintf(track, sizeof track, "rank %lld overlap %d", (long long)r, lane);
            cli_trace_thread(&t->base, tid_of(r, lane), track, r * CLI_MOE_TRACE_MAX_LANES + lane);
            t->lane_named[r][lane] = 1;
        }
        const char *stage = mm_mega_moe_stage_name(ev->stage);
        if (ev->stage == MM_MEGA_MOE_STAGE_DISPATCH && !is_send(s, i)) stage = "dispatch wait";
        cli_trace_slice_open(&t->base, tid_of(r, lane), stage, cat, ev->begin, ev->end);
        fputs(args, t->base.file);
        if (is_send(s, i)) write_routed_args(t->base.file, routed, experts);
        if (ev->batch >= 0) write_batch_args(t->base.file, s, ev->batch);
        cli_trace_slice_close(&t->base);
    }
}

/* 1 when rows of a rank (routed) reach an expert of the batch. */
static int batch_reached(const mm_mega_moe_stats *s, int batch, const int64_t *routed) {
    for (int q = 0; q < s->expert_count; q++)
        if (s->experts[q].batch == batch && routed[s->experts[q].expert] > 0) return 1;
    return 0;
}

void cli_moe_trace_flows(cli_moe_trace *t, int64_t ranks, const mm_mega_moe_stats *const *stats,
                         const int64_t *const *routed) {
    if (!t->base.file) return;
    for (int64_t dst = 0; dst < ranks; dst++) {
        const mm_mega_moe_stats *s = stats[dst];
        int lane_of[MM_MEGA_MOE_MAX_EVENTS];
        assign_lanes(s, lane_of);
        for (int i = 0; i < s->event_count && i < MM_MEGA_MOE_MAX_EVENTS; i++) {
            const mm_mega_moe_event *ev = &s->events[i];
            if (ev->stage != MM_MEGA_MOE_STAGE_GEMM1 || ev->batch < 0) continue;
            for (int64_t src = 0; src < ranks; src++) {
                const mm_mega_moe_stats *from = stats[src];
                if (!is_send(from, 0) || !batch_reached(s, ev->batch, routed[src])) continue;
                cli_trace_arrow(&t->base, "rows", "dispatch", tid_of(src, 0), from->events[0].begin,
                                from->events[0].end, tid_of(dst, lane_of[i]), middle(ev));
            }
        }
    }
}
