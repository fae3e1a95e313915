/* SPDX-License-Identifier: Apache-2.0 */
/* ops/common/symm_area.h: a symmetric area (mm_symm) that an operator keeps across calls and grows
 * when a call needs more, with the epoch of its signal counters.
 *
 * Signal counters only grow: every data phase each rank raises each alive peer's counter by one, so
 * after n phases on an area a complete exchange means "every counter >= n" (the area's epoch). A
 * regrown area has fresh counters, so its epoch restarts at 0. Growing is collective: every rank must
 * reach the same decision at the same call, which holds when the size comes from values all ranks
 * agreed on (ops/common/exchange.h). */
#ifndef MEGAMOE_OPS_COMMON_SYMM_AREA_H
#define MEGAMOE_OPS_COMMON_SYMM_AREA_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/comm.h"
#include "megamoe/status.h"

typedef struct mm_op_symm_area {
    mm_symm *symm;
    uint64_t epoch; /* data phases run on this area since it was allocated */
} mm_op_symm_area;

/* How an area grows when it must: to exactly the size asked, or half again as much, so that slowly
 * growing calls do not reallocate every time. */
typedef enum mm_op_growth { MM_OP_GROW_EXACT, MM_OP_GROW_HALF_AGAIN } mm_op_growth;

/* Collective. Makes *symm hold at least bytes (64 when bytes is 0): keeps it when it does, else frees
 * it and allocates anew. *regrown (may be NULL) says whether it was reallocated. */
mm_status mm_op_symm_grow(mm_comm *comm, mm_symm **symm, size_t bytes, mm_op_growth growth, int *regrown,
                          mm_error *err);
/* Collective. mm_op_symm_grow on an area; a regrown area restarts its epoch. */
mm_status mm_op_symm_area_ensure(mm_comm *comm, mm_op_symm_area *area, size_t bytes, mm_op_growth growth,
                                 mm_error *err);

#endif
