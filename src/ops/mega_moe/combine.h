/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/combine.h: combine, both halves: sending the routed experts' rows home as their batch
 * finishes (combine_send.c), and at home the relay reduction, the signal and the final sums
 * (combine.c). */
#ifndef MEGAMOE_OPS_MEGA_MOE_COMBINE_H
#define MEGAMOE_OPS_MEGA_MOE_COMBINE_H

#include "ops/mega_moe/call_state.h"

/* Modes 0 / 2: the rows of the finished experts (local indices) to their home or relay slot. */
mm_status mm_moe_combine_send_batch(run_state *s, const int64_t *experts, int64_t n_experts, mm_error *err);
/* Mode 1: every token of each of the sources (all experts holding their rows are done), reduced into
 * its home slot. */
mm_status mm_moe_combine_reduce_sources(run_state *s, const int64_t *sources, int64_t n, mm_error *err);
/* Relay reduction (mode 2), the combine signal and wait, the home rank's sums into y. */
mm_status mm_moe_combine(run_state *s, mm_error *err);

/* ---- shared by the two reductions on the way home (mode 1's per source, mode 2's relay) ---- */

/* The F32 sum in k order of token i's rows for peer (the token's home or source) into acc. Returns
 * the first k with a row (the slot the sum goes to), or -1 when the token has none. */
typedef int64_t (*mm_moe_token_reducer)(const run_state *s, int64_t peer, int64_t i, float *acc);
/* Adds routed row o (H BF16 values, gating weight `weight`) of slot k to acc in the reference's way:
 * the first row clears acc (*first = k); then a plain add (topk_weights_type 1) or one rounded product. */
void mm_moe_add_routed_row(const run_state *s, int64_t k, float weight, const uint16_t *o, float *acc,
                           int64_t *first);
/* Reduces every token of peer with `reduce` and stores each sum, as BF16, in peer's combine slot
 * (token, first k): by load/store on the pool when peer is reachable, else one put per token. */
mm_status mm_moe_reduce_into_combine_slots(run_state *s, int64_t peer, mm_moe_token_reducer reduce,
                                           mm_error *err);

#endif
