/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/run.c: mm_mega_moe_run on one rank: the call. It validates (validate.c), lays out the
 * workspace (layout.c), sets up the call state (call_state.h) and drives the phases, which call nothing
 * back in here:
 *
 *   1. Dispatch (dispatch.c): each active row is quantized once and copied into its K destination
 *      slots; one signal per peer says "all my rows for you have landed".
 *   2. Experts (experts.c): an expert runs, as one GEMM group over the rows of all sources, as soon as
 *      every source that sends it rows has signalled; experts that complete together share one grouped
 *      GEMM (the GEMM layer splits it into (expert, N-block, M-block) tasks, so a hot expert uses every
 *      core and an expert without rows costs nothing). When nothing new is complete, the shared
 *      experts run (shared.c; they need only local rows). The scheduler reaches combine and the
 *      shared experts only through the hooks this file gives it.
 *   3. Combine: each expert output row goes straight to its home rank's slot (i, k) (mode 0, BF16 or
 *      MX; BF16 rows of a reachable home are written by GEMM2's epilogue itself), or is first reduced
 *      per (token, rank) (mode 1) or per (token, domain) at a relay rank (mode 2). The home rank sums
 *      in the reference's order and rounds once to BF16 (combine_send.c, combine.c).
 * Buffers are reused across calls: counters only grow, and every area is rewritten only after its
 * reader has signalled a later phase, so no extra barrier is needed. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/buffer.h"
#include "ops/mega_moe/call_state.h"
#include "ops/mega_moe/combine.h"
#include "ops/mega_moe/dispatch.h"
#include "ops/mega_moe/experts.h"
#include "ops/mega_moe/layout.h"
#include "ops/mega_moe/plan.h"
#include "ops/mega_moe/shared.h"
#include "ops/mega_moe/stats.h"
#include "ops/mega_moe/weights.h"

static mm_status prepare(run_state *s, mm_error *err) {
    mm_mega_moe_buffer *b = s->b;
    const mm_moe_call *c = s->c;
    uint8_t *ws = s->ws;
    s->stage = ws + s->l.stage;
    s->stage_scale = (float *)(ws + s->l.stage_scale);
    s->shared_stage = ws + s->l.shared_stage;
    s->shared_stage_scale = (float *)(ws + s->l.shared_stage_scale);
    s->active_index = (int64_t *)(ws + s->l.active_index);
    s->dest_row = (int64_t *)(ws + s->l.dest_row);
    s->task_rows = (float *)(ws + s->l.task_rows);
    s->routed_scales = (float *)(ws + s->l.routed_scales);
    s->routed_weights = (float *)(ws + s->l.routed_weights);
    s->routed_out = (uint16_t *)(ws + s->l.routed_out);
    s->row_dst = (uint16_t **)(ws + s->l.row_dst);
    s->shared_out = (uint16_t *)(ws + s->l.shared_out);
    s->token_map = (int32_t *)(ws + s->l.token_map);
    int64_t I = b->sizing.intermediate_hidden;
    mm_ffn_scratch_init(&s->routed_scratch, ws + s->l.routed_scratch, c->recv_rows, s->H, I, s->w->routed.k2);
    if (c->has_shared)
        mm_ffn_scratch_init(&s->shared_scratch, ws + s->l.shared_scratch, s->w->shared.count * c->active_rows,
                            s->H, I, s->w->shared.k2);
    s->recv_local = mm_symm_local(b->recv);
    s->comb_local = mm_symm_local(b->comb);
    s->relay_local = b->relay ? mm_symm_local(b->relay) : NULL;
    for (int d = 0; d < s->R; d++) {
        s->recv_peer[d] = d == s->me ? s->recv_local : mm_symm_peer_ptr(b->recv, d);
        s->comb_peer[d] = d == s->me ? s->comb_local : mm_symm_peer_ptr(b->comb, d);
        s->relay_peer[d] = !b->relay ? NULL : d == s->me ? s->relay_local : mm_symm_peer_ptr(b->relay, d);
    }
    s->recv_block = malloc((size_t)(s->El * s->R) * sizeof *s->recv_block);
    if (!s->recv_block) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "receive block table: out of memory");
    int64_t off = 0;
    for (int64_t j = 0; j < s->El; j++)
        for (int64_t src = 0; src < s->R; src++) {
            s->recv_block[j * s->R + src] = off;
            off += c->counts[src * s->stride + s->me * s->El + j];
        }
    return MM_OK;
}

mm_status mm_mega_moe_run(mm_mega_moe_buffer *buffer, const mm_mega_moe_weights *weights,
                          const mm_mega_moe_attrs *attrs, const mm_mega_moe_inputs *inputs,
                          const mm_mega_moe_outputs *outputs, mm_error *err) {
    mm_moe_call c;
    if (!outputs) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "outputs is NULL");
    mm_status st =
        mm_moe_validate(buffer, weights, attrs, inputs, outputs, &c, mm_moe_layout_workspace_rows, err);
    if (st != MM_OK) return st;
    mm_error local;
    mm_error_clear(&local);
    run_state s;
    memset(&s, 0, sizeof s);
    s.b = buffer;
    s.w = weights;
    s.attrs = attrs;
    s.c = &c;
    s.in = inputs;
    s.ops = mm_rowops_get();
    s.R = buffer->world;
    s.E = buffer->sizing.moe_expert_num;
    s.El = buffer->local_experts;
    s.K = buffer->sizing.topk;
    s.H = buffer->sizing.hidden;
    s.M = buffer->sizing.num_max_tokens_per_rank;
    s.me = buffer->rank;
    s.stride = MM_MOE_COUNT_STRIDE(s.E);
    s.out_y = outputs->y->data;
    mm_moe_layout_of(buffer, weights, &c, &s.l);
    void *ws = NULL;
    /* Local allocations first, then agree, so that no rank starts sending while another cannot run.
     * Validation told every rank whether any workspace grows; when none does, nothing can fail here and
     * the agree (a collective) is skipped. */
    st = mm_moe_workspace(buffer, s.l.total, &ws, &local);
    if (c.workspace_grows) st = mm_comm_agree(buffer->comm, st, &local);
    if (st == MM_OK && attrs->combine_comm_mode == MM_MEGA_MOE_COMBINE_COMM_LAYERED)
        st = mm_moe_relay_area(buffer, &local);
    if (st != MM_OK) goto fail;
    s.ws = (uint8_t *)(((uintptr_t)ws + 63) / 64 * 64);
    if ((st = prepare(&s, &local)) != MM_OK) goto fail;
    memset(&buffer->stats, 0, sizeof buffer->stats);
    buffer->stats.total_begin = mm_now_seconds();
    double t0 = mm_now_seconds();
    if ((st = mm_moe_dispatch(&s, &local)) != MM_OK) goto fail;
    mm_moe_stats_event(buffer, MM_MEGA_MOE_STAGE_DISPATCH, t0, mm_now_seconds());
    /* Combine mode 1 reduces per source once all its experts are done; modes 0 and 2 send per batch. */
    mm_moe_expert_hooks hooks = {.idle = mm_moe_shared_experts};
    if (attrs->combine_comm_mode == MM_MEGA_MOE_COMBINE_COMM_FLAT)
        hooks.sources_done = mm_moe_combine_reduce_sources;
    else
        hooks.batch_done = mm_moe_combine_send_batch;
    if ((st = mm_moe_experts(&s, &hooks, &local)) != MM_OK) goto fail;
    if ((st = mm_moe_combine(&s, &local)) != MM_OK) goto fail;
    int32_t *etn = outputs->expert_token_nums->data;
    for (int64_t j = 0; j < s.El; j++) {
        int64_t n = 0;
        for (int64_t src = 0; src < s.R; src++) n += c.counts[src * s.stride + s.me * s.El + j];
        etn[j] = (int32_t)n;
    }
    buffer->stats.total_end = mm_now_seconds();
    free(s.recv_block);
    free(c.counts);
    return MM_OK;
fail:
    free(s.recv_block);
    free(c.counts);
    return mm_fail(err, st, "%s", local.message);
}
