/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/shared.h: the shared experts of a call (shared.c). */
#ifndef MEGAMOE_OPS_MEGA_MOE_SHARED_H
#define MEGAMOE_OPS_MEGA_MOE_SHARED_H

#include "ops/mega_moe/call_state.h"

/* The shared experts' whole FFN on the active rows into s->shared_out (nothing without shared experts
 * or active rows). They need only local rows, so the call runs them while routed rows are in flight. */
mm_status mm_moe_shared_experts(run_state *s, mm_error *err);

#endif
