/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/dispatch.h: the dispatch phase of a call (dispatch.c). */
#ifndef MEGAMOE_OPS_MEGA_MOE_DISPATCH_H
#define MEGAMOE_OPS_MEGA_MOE_DISPATCH_H

#include "ops/mega_moe/call_state.h"

/* Quantizes each active row once and sends it to its K experts' ranks, then signals every peer. */
mm_status mm_moe_dispatch(run_state *s, mm_error *err);

#endif
