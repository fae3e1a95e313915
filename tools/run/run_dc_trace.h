/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_dc_trace.h: the rank tracks of `megamoe run --op dispatch-combine --trace FILE`
 * (run_dc_trace.c): per rank and timed iteration its dispatch, expert FFN and combine slices with the
 * local experts and the rows each received, the rows and bytes it sent to / received from every rank,
 * and a flow from each sending rank's dispatch to the expert FFN of every rank that received its rows. */
#ifndef MEGAMOE_TOOLS_RUN_DC_TRACE_H
#define MEGAMOE_TOOLS_RUN_DC_TRACE_H

#include <stdint.h>

#include "common/cli_trace.h"
#include "common/dc_world.h"

enum { RUN_DC_TRACE_MAX_EXPERTS = 64 }; /* the demo's limit of local experts */

/* The stages a rank's timed iteration is split into, in order (the report's rows and the trace's slices). */
extern const char *const run_dc_stage_names[3];

/* What rank g received in its dispatch (every iteration receives the same rows). */
typedef struct run_dc_trace_rank {
    int64_t local_experts;                         /* L */
    int64_t first_expert;                          /* global id of local expert 0; -1: shared rank */
    int64_t shared_expert;                         /* a shared-expert rank's shared expert, else -1 */
    int64_t expert_rows[RUN_DC_TRACE_MAX_EXPERTS]; /* rows received per local expert */
    int64_t from_rows[MM_COMM_MAX_RANKS];          /* rows received from each rank (global numbering) */
    int64_t row_bytes;                             /* bytes of one received row (+ its INT8 scale) */
} run_dc_trace_rank;

/* Fills *r from a rank's dispatch outputs d and its per-expert row counts (L entries; L <= the max). */
void run_dc_trace_record(const cli_dc_world *w, const cli_dc_dispatch_out *d, const int64_t *counts,
                         int64_t L, int64_t first_expert, int64_t shared_expert, run_dc_trace_rank *r);

/* Tracks "rank g" (tid g + 1) of the live ranks: per timed iteration it the slices "dispatch",
 * "expert FFN", "combine + RMSNorm" from stamps[(g * iterations + it) * 4 + 0..3] (absolute seconds),
 * their args, and the flows of that iteration; then the rank's "check" from check[g][0] to [1] when it
 * is longer than 0. */
void run_dc_trace_write(cli_trace *t, const cli_dc_world *w, const run_dc_trace_rank *ranks,
                        const double *stamps, int64_t iterations, const double (*check)[2]);

#endif
