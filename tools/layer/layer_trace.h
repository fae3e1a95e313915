/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_trace.h: `megamoe layer --trace FILE`: the command's phases and, per rank, the layer's
 * MegaMoE calls with their stages, expert batches and dispatch -> expert flows (common/cli_moe_trace.h,
 * the same slices as `megamoe run`'s) as a Chrome/Perfetto JSON trace, kept apart from cmd_layer.c's
 * loading logic. */
#ifndef MEGAMOE_TOOLS_LAYER_TRACE_H
#define MEGAMOE_TOOLS_LAYER_TRACE_H

#include <stdint.h>

#include "megamoe/model.h"

/* What one rank sends to rank 0 for the trace, per traced forward (followed by its routed rows, `experts`
 * int64). */
typedef struct layer_trace_rank {
    double load_begin, load_end;       /* mm_moe_layer_load_with */
    double warmup_begin, warmup_end;   /* an untimed first forward (`run --model`); 0, 0: none */
    double forward_begin, forward_end; /* mm_moe_layer_forward (router, MegaMoE calls, shared gate) */
    int64_t tokens;                    /* this rank's tokens */
    int64_t calls;                     /* mm_moe_layer_call_count */
    mm_mega_moe_stats stats[2];        /* the routed experts' call, then qwen2_moe's shared expert's */
} layer_trace_rank;

/* Every rank's, on rank 0. */
typedef struct layer_trace_data {
    int64_t ranks, experts;
    int64_t forwards;              /* traced forwards (`layer`: 1; `run --model`: its timed iterations) */
    layer_trace_rank *rank;        /* forwards x ranks entries: forward f of rank r at f * ranks + r */
    int64_t *routed;               /* forwards x ranks x experts: rows of rank r's tokens per expert */
    double write_begin, write_end; /* rank 0 gathering y and writing OUT (`layer`); 0, 0: none */
} layer_trace_data;

/* Collective, after the successful forward `forward` (0 .. forwards - 1, in order) of `layer` on this
 * rank's topk_ids (T, K) I32: gathers every rank's layer_trace_rank and routing to rank 0, which fills
 * forward `forward` of *out (allocated at forward 0; NULL on other ranks). */
mm_status layer_trace_gather(mm_comm *comm, const mm_moe_layer *layer, const layer_trace_rank *mine,
                             const mm_tensor *topk_ids, int64_t experts, int64_t forward, int64_t forwards,
                             layer_trace_data *out, mm_error *err);
void layer_trace_data_free(layer_trace_data *d);

/* The host's part: its first phase `read` (e.g. reading the checkpoint's config and index, and x) from
 * begin to read_end, then the launch until end; `tokens` in all. */
typedef struct layer_trace_host {
    const char *command; /* names the error line */
    const char *process; /* the trace's process name */
    const char *read;    /* the first phase's name */
    int64_t tokens;
    double begin, read_end, end;
} layer_trace_host;

/* Writes the trace: the host's phases; per rank its load, its warm-up (when there was one), per forward
 * a "forward" slice and its MegaMoE calls ("mega_moe routed", qwen2_moe also "mega_moe shared",
 * d->rank[].stats, args "iteration": the forward) with their flows; rank 0's gather and write (when
 * there was one). 0, or -1 after one error line. */
int layer_trace_write(const char *path, const layer_trace_host *host, const layer_trace_data *d);

#endif
