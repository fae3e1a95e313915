/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_trace.c: `megamoe layer --trace` (layer_trace.h): every rank's stats gathered to rank 0
 * (one allgather, so that MPI processes send theirs too), then the phases and the MegaMoE calls written
 * with common/cli_moe_trace.c (the slices, args and flows of `megamoe run --trace`). */
#include "layer/layer_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_moe_trace.h"
#include "common/cli_util.h"

mm_status layer_trace_gather(mm_comm *comm, const mm_moe_layer *layer, const layer_trace_rank *mine,
                             const mm_tensor *topk_ids, int64_t experts, int64_t forward, int64_t forwards,
                             layer_trace_data *out, mm_error *err) {
    int me = mm_comm_rank(comm), size = mm_comm_size(comm);
    size_t block = sizeof(layer_trace_rank) + (size_t)experts * sizeof(int64_t);
    uint8_t *send = calloc(1, block), *all = malloc(block * (size_t)size);
    if (me == 0 &&
        forward == 0) { /* before the agreement, so that every rank knows whether rank 0 keeps them */
        out->rank = malloc((size_t)(forwards * size) * sizeof *out->rank);
        out->routed = malloc((size_t)(forwards * size * experts + 1) * sizeof *out->routed);
    }
    mm_error local;
    mm_error_clear(&local);
    mm_status st = send && all && (me != 0 || (out->rank && out->routed))
                       ? MM_OK
                       : cli_fail(&local, MM_ERR_OUT_OF_MEMORY, "out of memory for the trace");
    if (!st) {
        layer_trace_rank *r = (layer_trace_rank *)send;
        *r = *mine;
        r->calls = mm_moe_layer_call_count(layer);
        for (int c = 0; c < r->calls && !st; c++)
            st = mm_moe_layer_last_stats(layer, (mm_moe_layer_call)c, &r->stats[c], &local);
        int64_t *routed = (int64_t *)(send + sizeof *r);
        const int32_t *ids = topk_ids->data;
        for (int64_t i = 0; i < mm_tensor_numel(topk_ids); i++)
            if (ids[i] >= 0 && ids[i] < experts) routed[ids[i]]++;
    }
    if ((st = mm_comm_agree_as_written(comm, st, &local))) *err = local;
    if (!st) st = mm_comm_allgather(comm, send, block, all, err);
    if (!st && me == 0) {
        out->ranks = size;
        out->experts = experts;
        out->forwards = forward + 1;
        for (int r = 0; r < size; r++) {
            int64_t at = forward * size + r;
            memcpy(&out->rank[at], all + (size_t)r * block, sizeof *out->rank);
            memcpy(out->routed + at * experts, all + (size_t)r * block + sizeof(layer_trace_rank),
                   (size_t)experts * sizeof(int64_t));
        }
    }
    free(send);
    free(all);
    return st;
}

void layer_trace_data_free(layer_trace_data *d) {
    free(d->rank);
    free(d->routed);
    d->rank = NULL;
    d->routed = NULL;
}

/* One of the layer's MegaMoE calls (c: mm_moe_layer_call) of forward f on every rank, and its flows. The
 * shared-expert call's "experts" are the R copies; each rank's tokens all go to its own. */
static void call_slices(cli_moe_trace *t, const layer_trace_data *d, int64_t f, int c,
                        int64_t *shared_routed) {
    static const char *const names[2] = {"mega_moe routed", "mega_moe shared"};
    static const char *const cats[2] = {"routed", "shared"};
    const mm_mega_moe_stats *stats[MM_COMM_MAX_RANKS];
    const int64_t *routed[MM_COMM_MAX_RANKS];
    int64_t experts = c == MM_MOE_LAYER_CALL_ROUTED ? d->experts : d->ranks;
    char args[48];
    snprintf(args, sizeof args, "\"iteration\":%lld", (long long)f);
    for (int64_t r = 0; r < d->ranks; r++) {
        const layer_trace_rank *p = &d->rank[f * d->ranks + r];
        stats[r] = &p->stats[c];
        if (c == MM_MOE_LAYER_CALL_ROUTED) {
            routed[r] = d->routed + (f * d->ranks + r) * d->experts;
        } else {
            int64_t *row = shared_routed + r * d->ranks;
            for (int64_t e = 0; e < d->ranks; e++) row[e] = e == r ? p->tokens : 0;
            routed[r] = row;
        }
        cli_moe_trace_call(t, r, names[c], cats[c], args, stats[r], routed[r], experts);
    }
    cli_moe_trace_flows(t, d->ranks, stats, routed);
}

int layer_trace_write(const char *path, const layer_trace_host *h, const layer_trace_data *d) {
    cli_moe_trace t;
    if (cli_moe_trace_open(&t, h->command, path, h->process, d->ranks, "host") != 0) return -1;
    char args[64];
    snprintf(args, sizeof args, "\"tokens\":%lld,\"ranks\":%lld", (long long)h->tokens, (long long)d->ranks);
    cli_trace_slice(&t.base, CLI_MOE_TRACE_HOST_TID, h->read, "setup", h->begin, h->read_end, args);
    cli_trace_slice(&t.base, CLI_MOE_TRACE_HOST_TID, "launch", "setup", h->read_end, h->end, args);
    static int64_t shared_routed[MM_COMM_MAX_RANKS * MM_COMM_MAX_RANKS]; /* the shared call's routing */
    for (int64_t r = 0; r < d->ranks && d->forwards > 0; r++) {
        const layer_trace_rank *p = &d->rank[r];
        snprintf(args, sizeof args, "\"tokens\":%lld", (long long)p->tokens);
        cli_trace_slice(&t.base, r, "load experts", "setup", p->load_begin, p->load_end, args);
        if (p->warmup_end > p->warmup_begin)
            cli_trace_slice(&t.base, r, "warm-up", "setup", p->warmup_begin, p->warmup_end, args);
        for (int64_t f = 0; f < d->forwards; f++) {
            const layer_trace_rank *q = &d->rank[f * d->ranks + r];
            if (d->forwards > 1)
                snprintf(args, sizeof args, "\"tokens\":%lld,\"iteration\":%lld", (long long)q->tokens,
                         (long long)f);
            cli_trace_slice(&t.base, r, "forward", "layer", q->forward_begin, q->forward_end, args);
        }
    }
    for (int64_t f = 0; f < d->forwards; f++) {
        int calls = d->ranks > 0 ? (int)d->rank[f * d->ranks].calls : 0;
        for (int c = 0; c < calls && c < 2; c++) call_slices(&t, d, f, c, shared_routed);
    }
    if (d->write_end > d->write_begin)
        cli_trace_slice(&t.base, 0, "gather and write", "setup", d->write_begin, d->write_end, NULL);
    return cli_trace_close(&t.base, h->command, path);
}
