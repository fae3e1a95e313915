/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_trace.h: `megamoe layer --trace FILE`: the command's phases and, per rank, the layer's
 * MegaMoE calls with their stages, expert batches and dispatch -> expert flows (common/cli_moe_trace.h,
 * the same slices as `megamoe run`'s) as a Chrome/Perfetto JSON trace, kept apart from cmd_layer.c's
 * loading logic. */
#ifndef MEGAMOE_TOOLS_LAYER_TRACE_H
#define MEGAMOE_TOOLS_LAYER_TRACE_H

#include <stdint.h>

#include "megamoe/model.h"

/* What one rank sends to rank 0 for the trace (followed by its routed rows, `experts` int64). */
typedef struct layer_trace_rank {
    double load_begin, load_end;       /* mm_moe_layer_load_with */
    double forward_begin, forward_end; /* mm_moe_layer_forward (router, MegaMoE calls, shared gate) */
    int64_t tokens;                    /* this rank's tokens */
    int64_t calls;                     /* mm_moe_layer_call_count */
    mm_mega_moe_stats stats[2];        /* the routed experts' call, then qwen2_moe's shared expert's */
} layer_trace_rank;

/* Every rank's, on rank 0. */
typedef struct layer_trace_data {
    int64_t ranks, experts;
    layer_trace_rank *rank;        /* ranks entries */
    int64_t *routed;               /* ranks * experts: rows of rank r's tokens routed to each expert */
    double write_begin, write_end; /* rank 0 gathering y and writing OUT */
} layer_trace_data;

/* Collective, after a successful forward of `layer` on this rank's topk_ids (T, K) I32: gathers every
 * rank's layer_trace_rank and routing to rank 0, which fills *out (allocated; NULL on other ranks). */
mm_status layer_trace_gather(mm_comm *comm, const mm_moe_layer *layer, const layer_trace_rank *mine,
                             const mm_tensor *topk_ids, int64_t experts, layer_trace_data *out,
                             mm_error *err);
void layer_trace_data_free(layer_trace_data *d);

/* Writes the trace: the host's reading (checkpoint config and index, x) from begin to read and the launch
 * from read to end; per rank its load, forward and MegaMoE calls ("mega_moe routed", qwen2_moe also
 * "mega_moe shared", d->rank[].stats) with their flows; rank 0's gather and write. 0, or -1 after one
 * error line. */
int layer_trace_write(const char *path, int64_t tokens, double begin, double read, double end,
                      const layer_trace_data *d);

#endif
