/* SPDX-License-Identifier: Apache-2.0 */
/* ops/common/symm_area.c: the growing symmetric area of MegaMoE and Dispatch/Combine (see
 * symm_area.h). */
#include "ops/common/symm_area.h"

mm_status mm_op_symm_grow(mm_comm *comm, mm_symm **symm, size_t bytes, mm_op_growth growth, int *regrown,
                          mm_error *err) {
    if (regrown) *regrown = 0;
    if (bytes == 0) bytes = 64;
    if (*symm && mm_symm_size(*symm) >= bytes) return MM_OK;
    if (regrown) *regrown = 1;
    mm_status st = mm_symm_free(*symm, err);
    *symm = NULL;
    if (st != MM_OK) return st;
    size_t want = growth == MM_OP_GROW_HALF_AGAIN ? bytes + bytes / 2 : bytes;
    return mm_symm_alloc(comm, want, symm, err);
}

mm_status mm_op_symm_area_ensure(mm_comm *comm, mm_op_symm_area *area, size_t bytes, mm_op_growth growth,
                                 mm_error *err) {
    int regrown;
    mm_status st = mm_op_symm_grow(comm, &area->symm, bytes, growth, &regrown, err);
    if (regrown) area->epoch = 0;
    return st;
}
