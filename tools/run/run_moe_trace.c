/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_trace.c: the Chrome / Perfetto JSON trace of `megamoe run --trace FILE`.
 *
 * One track (thread) per rank and one for the host, on the shared CLOCK_MONOTONIC time line so that
 * stages of different ranks can be seen overlapping. Per scenario, each rank's track has its setup
 * ("generate weights", "pack weights" inside), the untimed warm-up call, then one slice per timed call
 * ("mega_moe <scenario>") and inside it one slice per stage event the operator recorded
 * (mm_mega_moe_last_stats): "dispatch" (this rank sending its rows; args: the experts they go to and how
 * many rows each), "dispatch wait" (waiting for other ranks' rows), gemm1 / activation / gemm2 of a
 * batch of routed experts (args: the batch, its global expert ids and their rows), shared, combine.
 * A flow (arrow) goes from each rank's dispatch to the gemm1 of every batch, on any rank, that computes
 * an expert its rows were routed to. The host track has the float64 reference check.
 *
 * Slices on one track must nest; an event that overlaps the previous one on its rank without nesting
 * (work running concurrently inside one rank) goes to an extra track of that rank ("rank R overlap N").
 * Load the file in ui.perfetto.dev or chrome://tracing. */
#include <stdio.h>
#include <string.h>

#include "run/run_moe.h"

enum {
    TRACE_MAX_LANES = 4,
    TRACE_LANE_TID_STEP = 1000,
    TRACE_HOST_TID = TRACE_MAX_LANES * TRACE_LANE_TID_STEP /* above every rank's lanes */
};

int run_moe_trace_open(run_moe_trace *t, const char *path, int64_t ranks) {
    memset(t, 0, sizeof *t);
    if (cli_trace_open(&t->base, NULL, path, "megamoe run") != 0) return -1;
    for (int64_t r = 0; r < ranks; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank %lld", (long long)r);
        cli_trace_thread(&t->base, r, name, r * TRACE_MAX_LANES);
    }
    cli_trace_thread(&t->base, TRACE_HOST_TID, "host (check)", ranks * TRACE_MAX_LANES);
    return 0;
}

static int64_t tid_of(int64_t rank, int lane) {
    return rank + lane * TRACE_LANE_TID_STEP;
}

/* The lane of each event: the first whose last event ended before this one begins (lane 0 nests in the
 * call). */
static void assign_lanes(const mm_mega_moe_stats *s, int *lane_of) {
    double lane_end[TRACE_MAX_LANES] = {0};
    for (int i = 0; i < s->event_count && i < MM_MEGA_MOE_MAX_EVENTS; i++) {
        const mm_mega_moe_event *ev = &s->events[i];
        int lane = 0;
        while (lane < TRACE_MAX_LANES - 1 && lane_end[lane] > ev->begin) lane++;
        if (ev->end > lane_end[lane]) lane_end[lane] = ev->end;
        lane_of[i] = lane;
    }
}

static double middle(const mm_mega_moe_event *ev) {
    return 0.5 * (ev->begin + ev->end);
}

/* The call's first event is its dispatch of this rank's rows; later dispatch events are waits. */
static int is_send(const mm_mega_moe_stats *s, int i) {
    return i == 0 && s->events[0].stage == MM_MEGA_MOE_STAGE_DISPATCH;
}

/* Args members "experts":[...],"rows":[...] of a batch's expert records. */
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

static void setup_slices(run_moe_trace *t, int64_t r, const run_moe_scenario *sc,
                         const run_moe_rank_spans *p) {
    char args[64];
    snprintf(args, sizeof args, "\"scenario\":\"%s\"", sc->spec_name);
    cli_trace_slice(&t->base, r, "setup", "setup", p->setup_begin, p->setup_end, args);
    cli_trace_slice(&t->base, r, "generate weights", "setup", p->generate_begin, p->generate_end, args);
    cli_trace_slice(&t->base, r, "pack weights", "setup", p->generate_end, p->pack_end, args);
    cli_trace_slice(&t->base, r, "warm-up", "setup", p->warmup_begin, p->warmup_end, args);
}

/* One timed call of rank r: its slice and its events'. */
static void call_slices(run_moe_trace *t, const run_moe_config *cfg, const run_moe_scenario *sc, int64_t r,
                        int64_t it, const mm_mega_moe_stats *s, const int64_t *routed) {
    char name[64], args[48];
    snprintf(name, sizeof name, "mega_moe %s", sc->spec_name);
    snprintf(args, sizeof args, "\"iteration\":%lld", (long long)it);
    cli_trace_slice(&t->base, r, name, "run", s->total_begin, s->total_end, args);
    int lane_of[MM_MEGA_MOE_MAX_EVENTS];
    assign_lanes(s, lane_of);
    for (int i = 0; i < s->event_count && i < MM_MEGA_MOE_MAX_EVENTS; i++) {
        const mm_mega_moe_event *ev = &s->events[i];
        int lane = lane_of[i];
        if (lane > 0 && !t->lane_named[r][lane]) {
            char track[48];
            snprintf(track, sizeof track, "rank %lld overlap %d", (long long)r, lane);
            cli_trace_thread(&t->base, tid_of(r, lane), track, r * TRACE_MAX_LANES + lane);
            t->lane_named[r][lane] = 1;
        }
        const char *stage = mm_mega_moe_stage_name(ev->stage);
        if (ev->stage == MM_MEGA_MOE_STAGE_DISPATCH && !is_send(s, i)) stage = "dispatch wait";
        cli_trace_slice_open(&t->base, tid_of(r, lane), stage, sc->spec_name, ev->begin, ev->end);
        fputs(args, t->base.file);
        if (is_send(s, i)) write_routed_args(t->base.file, routed, cfg->experts);
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

/* The flows of iteration it: each rank's dispatch to each batch (its gemm1) its rows reach. */
static void flows(run_moe_trace *t, const run_moe_config *cfg, const run_moe_rank_result *results,
                  int64_t it) {
    for (int64_t dst = 0; dst < cfg->ranks; dst++) {
        const mm_mega_moe_stats *s = &results[dst].stats[it];
        int lane_of[MM_MEGA_MOE_MAX_EVENTS];
        assign_lanes(s, lane_of);
        for (int i = 0; i < s->event_count && i < MM_MEGA_MOE_MAX_EVENTS; i++) {
            const mm_mega_moe_event *ev = &s->events[i];
            if (ev->stage != MM_MEGA_MOE_STAGE_GEMM1 || ev->batch < 0) continue;
            for (int64_t src = 0; src < cfg->ranks; src++) {
                const mm_mega_moe_stats *from = &results[src].stats[it];
                if (!is_send(from, 0) || !batch_reached(s, ev->batch, results[src].routed)) continue;
                int64_t id = ++t->next_flow;
                cli_trace_flow(&t->base, tid_of(src, 0), "rows", "dispatch", id, middle(&from->events[0]), 0);
                cli_trace_flow(&t->base, tid_of(dst, lane_of[i]), "rows", "dispatch", id, middle(ev), 1);
            }
        }
    }
}

void run_moe_trace_scenario(run_moe_trace *t, const run_moe_config *cfg, const run_moe_scenario *sc,
                            const run_moe_rank_result *results, double check_begin, double check_end) {
    if (!t->base.file) return;
    if (t->base.origin < 0.0) {
        t->base.origin = results[0].spans->setup_begin;
        for (int64_t r = 1; r < cfg->ranks; r++)
            if (results[r].spans->setup_begin < t->base.origin)
                t->base.origin = results[r].spans->setup_begin;
    }
    for (int64_t r = 0; r < cfg->ranks; r++) {
        setup_slices(t, r, sc, results[r].spans);
        for (int64_t it = 0; it < cfg->iterations; it++)
            call_slices(t, cfg, sc, r, it, &results[r].stats[it], results[r].routed);
    }
    for (int64_t it = 0; it < cfg->iterations; it++) flows(t, cfg, results, it);
    if (check_end > check_begin) {
        char args[64];
        snprintf(args, sizeof args, "\"scenario\":\"%s\"", sc->spec_name);
        cli_trace_slice(&t->base, TRACE_HOST_TID, "check", "check", check_begin, check_end, args);
    }
}

int run_moe_trace_close(run_moe_trace *t) {
    return cli_trace_close(&t->base, NULL, NULL);
}
