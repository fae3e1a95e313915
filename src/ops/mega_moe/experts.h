/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/experts.h: the routed experts scheduler of a call (experts.c). */
#ifndef MEGAMOE_OPS_MEGA_MOE_EXPERTS_H
#define MEGAMOE_OPS_MEGA_MOE_EXPERTS_H

#include "ops/mega_moe/call_state.h"

/* What the caller does at the scheduler's moments (each NULL = nothing), so that the scheduler decides
 * only when work runs and knows nothing of combine or of the shared experts. */
typedef struct mm_moe_expert_hooks {
    /* After each batch, still inside the compute gate: experts[0..n) (local indices) are done, their
     * rows are in s->routed_out (or already home, see s->row_dst). */
    mm_status (*batch_done)(run_state *s, const int64_t *experts, int64_t n, mm_error *err);
    /* Sources every expert holding rows of which is now done (each source once). */
    mm_status (*sources_done)(run_state *s, const int64_t *sources, int64_t n, mm_error *err);
    /* Local work, run once: the first time nothing is complete, or at the end if that never happened. */
    mm_status (*idle)(run_state *s, mm_error *err);
} mm_moe_expert_hooks;

/* Every routed expert, each as soon as all its rows have arrived; experts that complete together run
 * as one batch in the compute gate. */
mm_status mm_moe_experts(run_state *s, const mm_moe_expert_hooks *hooks, mm_error *err);

#endif
