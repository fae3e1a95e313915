/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_dc_trace.c: the rank tracks of `megamoe run --op dispatch-combine --trace` (run_dc_trace.h),
 * written with common/cli_trace.c. The rows come from Dispatch's outputs: expert_token_nums (per local
 * expert) and ep_recv_counts (inclusive prefix sums over (TP block, local expert, source EP rank)). */
#include "run/run_dc_trace.h"

#include <stdio.h>
#include <string.h>

enum { STAGES = 3 };
const char *const run_dc_stage_names[STAGES] = {"dispatch", "expert FFN", "combine + RMSNorm"};

void run_dc_trace_record(const cli_dc_world *w, const cli_dc_dispatch_out *d, const int64_t *counts,
                         int64_t L, int64_t first_expert, int64_t shared_expert, run_dc_trace_rank *r) {
    memset(r, 0, sizeof *r);
    /* Bounded here once, so every reader of expert_rows stays inside it (the demo refuses more anyway). */
    r->local_experts = L < RUN_DC_TRACE_MAX_EXPERTS ? L : RUN_DC_TRACE_MAX_EXPERTS;
    r->first_expert = first_expert;
    r->shared_expert = shared_expert;
    for (int64_t e = 0; e < r->local_experts; e++) r->expert_rows[e] = counts[e];
    r->row_bytes = w->o.quant == 2 ? w->o.hidden + 4 : w->o.hidden * 2; /* INT8 row + F32 scale, or BF16 */
    if (d->local_experts <= 0) return;
    /* ep_recv_counts: index (tt x L + le) x R + src, src the source's EP rank among the survivors */
    int64_t R = d->n_ep / (w->tpw * d->local_experts);
    for (int64_t i = 0; i < d->n_ep && R > 0; i++) {
        int64_t src = i % R, tt = i / (R * d->local_experts);
        int64_t rows = d->ep_counts[i] - (i ? d->ep_counts[i - 1] : 0);
        if (src >= w->R_eff || rows <= 0) continue;
        int64_t ep = w->elastic ? w->elastic[4 + w->o.ranks + src] : src; /* the source's EP rank */
        r->from_rows[ep * w->tpw + tt] += rows;
    }
}

/* Members "experts":[...],"rows":[...] (a shared-expert rank: "shared_expert":s,"rows":[n]). */
static void expert_args(FILE *f, const run_dc_trace_rank *r) {
    if (r->shared_expert >= 0) {
        fprintf(f, ",\"shared_expert\":%lld,\"rows\":[", (long long)r->shared_expert);
    } else {
        fputs(",\"experts\":[", f);
        for (int64_t e = 0; e < r->local_experts; e++)
            fprintf(f, "%s%lld", e ? "," : "", (long long)(r->first_expert + e));
        fputs("],\"rows\":[", f);
    }
    for (int64_t e = 0; e < r->local_experts; e++)
        fprintf(f, "%s%lld", e ? "," : "", (long long)r->expert_rows[e]);
    fputc(']', f);
}

/* Members "to":[ranks],"to_rows":[rows],"bytes_sent":n (sent) or "from", "from_rows", "bytes_received":
 * rank g's rows to / from every rank that got / sent any, and their bytes. */
static void peer_args(FILE *f, const cli_dc_world *w, const run_dc_trace_rank *ranks, int64_t g, int sent) {
    const char *key = sent ? "to" : "from";
    int64_t bytes = 0;
    fprintf(f, ",\"%s\":[", key);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) fprintf(f, "],\"%s_rows\":[", key);
        for (int64_t p = 0, n = 0; p < w->nranks; p++) {
            if (!w->rank[p].alive) continue;
            int64_t rows = sent ? ranks[p].from_rows[g] : ranks[g].from_rows[p];
            if (rows <= 0) continue;
            fprintf(f, "%s%lld", n++ ? "," : "", (long long)(pass ? rows : p));
            if (pass) bytes += rows * ranks[g].row_bytes;
        }
    }
    fprintf(f, "],\"bytes_%s\":%lld", sent ? "sent" : "received", (long long)bytes);
}

void run_dc_trace_write(cli_trace *t, const cli_dc_world *w, const run_dc_trace_rank *ranks,
                        const double *stamps, int64_t iterations, const double (*check)[2]) {
    if (!t->file) return;
    for (int64_t g = 0; g < w->nranks; g++) {
        if (!w->rank[g].alive) continue;
        char name[32];
        snprintf(name, sizeof name, "rank %lld", (long long)g);
        cli_trace_thread(t, g + 1, name, g + 1);
        for (int64_t it = 0; it < iterations; it++) {
            const double *s = stamps + ((size_t)g * (size_t)iterations + (size_t)it) * (STAGES + 1);
            for (int k = 0; k < STAGES; k++) {
                cli_trace_slice_open(t, g + 1, run_dc_stage_names[k], "run", s[k], s[k + 1]);
                fprintf(t->file, "\"iteration\":%lld", (long long)it);
                expert_args(t->file, &ranks[g]);
                if (k == 0) peer_args(t->file, w, ranks, g, 1), peer_args(t->file, w, ranks, g, 0);
                cli_trace_slice_close(t);
            }
        }
        if (check[g][1] > check[g][0])
            cli_trace_slice(t, g + 1, "check", "check", check[g][0], check[g][1], NULL);
    }
    /* The flows: from the dispatch of each rank whose rows a rank received to that rank's expert FFN. */
    for (int64_t it = 0; it < iterations; it++)
        for (int64_t dst = 0; dst < w->nranks; dst++)
            for (int64_t src = 0; src < w->nranks && w->rank[dst].alive; src++) {
                if (!w->rank[src].alive || ranks[dst].from_rows[src] <= 0) continue;
                const double *s = stamps + ((size_t)src * (size_t)iterations + (size_t)it) * (STAGES + 1);
                const double *d = stamps + ((size_t)dst * (size_t)iterations + (size_t)it) * (STAGES + 1);
                cli_trace_arrow(t, "rows", "dispatch", src + 1, s[0], s[1], dst + 1, 0.5 * (d[1] + d[2]));
            }
}
