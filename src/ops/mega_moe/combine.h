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

#endif
