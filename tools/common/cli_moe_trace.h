/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_moe_trace.h: the MegaMoE part of a `--trace FILE` (common/cli_trace.h), shared by
 * `megamoe run --op mega-moe` and `megamoe layer`: one track per rank ("rank R"; work that overlaps
 * without nesting goes to "rank R overlap N"), a host track, and per call of mm_mega_moe_run its slice
 * holding one slice per recorded stage event (mm_mega_moe_last_stats): "dispatch" (the rank sending; args:
 * the experts its rows go to and how many rows each), "dispatch wait", gemm1 / activation / gemm2 of a
 * batch of routed experts (args: batch, its global expert ids and their rows), shared, combine; and the
 * flows ("rows") from each rank's dispatch to the gemm1 of every batch, on any rank, that computes an
 * expert its rows were routed to. */
#ifndef MEGAMOE_TOOLS_CLI_MOE_TRACE_H
#define MEGAMOE_TOOLS_CLI_MOE_TRACE_H

#include <stdint.h>

#include "common/cli_trace.h"
#include "megamoe/comm.h"
#include "megamoe/mega_moe.h"

enum {
    CLI_MOE_TRACE_MAX_LANES = 4,
    CLI_MOE_TRACE_LANE_TID_STEP = 1000,
    CLI_MOE_TRACE_HOST_TID = CLI_MOE_TRACE_MAX_LANES * CLI_MOE_TRACE_LANE_TID_STEP /* above every lane */
};

typedef struct cli_moe_trace {
    cli_trace base;                                                       /* the writer */
    unsigned char lane_named[MM_COMM_MAX_RANKS][CLI_MOE_TRACE_MAX_LANES]; /* overlap tracks named */
} cli_moe_trace;

/* Opens path (process `process`), names tracks "rank 0" .. "rank ranks-1" and the host's (tid
 * CLI_MOE_TRACE_HOST_TID) `host`. 0, or -1 after one error line naming `command` (none when NULL). */
int cli_moe_trace_open(cli_moe_trace *t, const char *command, const char *path, const char *process,
                       int64_t ranks, const char *host);

/* One call of rank r: the slice `name` (cat "run") from s->total_begin to s->total_end and its stage
 * slices (cat `cat`); `args` (JSON members, e.g. "\"iteration\":0") go on all of them. routed: `experts`
 * entries, the rows of rank r's tokens routed to each global expert (the dispatch's args). */
void cli_moe_trace_call(cli_moe_trace *t, int64_t r, const char *name, const char *cat, const char *args,
                        const mm_mega_moe_stats *s, const int64_t *routed, int64_t experts);

/* The flows of one collective call: stats[r] and routed[r] of every rank r < ranks. */
void cli_moe_trace_flows(cli_moe_trace *t, int64_t ranks, const mm_mega_moe_stats *const *stats,
                         const int64_t *const *routed);

#endif
