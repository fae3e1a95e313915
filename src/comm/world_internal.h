/* SPDX-License-Identifier: Apache-2.0 */
/* comm/world_internal.h: what the library's own drivers of a world (megamoe/world.h) use beyond the
 * public calls: the choice of how the ranks' results become the caller's one result.
 *
 * Implemented in comm/threads/threads_world.c, which holds the one function that merges the ranks'
 * results, for mm_comm_run_threads, mm_world_run, the threads row of mm_comm_launch and the MegaMoE
 * world calls (ops/mega_moe/world_run.c). */
#ifndef MEGAMOE_COMM_WORLD_INTERNAL_H
#define MEGAMOE_COMM_WORLD_INTERNAL_H

#include "megamoe/world.h"

typedef enum mm_rank_merge {
    /* comm.h's rule of mm_comm_run_threads: the lowest failing rank's message prefixed "rank N: ", or
     * as is when every rank failed with the same status and message (an agreed error). */
    MM_MERGE_PREFIXED = 0,
    /* mm_comm_launch's rule: the lowest failing rank's message as it wrote it (for work whose errors
     * are agreed and already name the rank at fault, as every MegaMoE call's are). */
    MM_MERGE_AS_WRITTEN = 1
} mm_rank_merge;

/* mm_world_run with a choice of merge rule (the "busy", NULL and caller-threads checks are the same;
 * messages name `who`). */
mm_status mm_world_run_as(mm_world *world, const char *who, mm_comm_rank_fn fn, void *arg, mm_rank_merge rule,
                          mm_status *per_rank_status, mm_error *per_rank_err, mm_error *err);

/* One run on a world created for it and freed afterwards (mm_comm_run_threads, with a merge rule). */
mm_status mm_comm_run_threads_as(int nranks, mm_comm_rank_fn fn, void *arg, mm_rank_merge rule,
                                 mm_status *per_rank_status, mm_error *per_rank_err, mm_error *err);

#endif
