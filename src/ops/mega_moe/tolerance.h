/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/tolerance.h: how far the operator's y may be from the float64 reference, per scenario.
 *
 * The operator follows the reference's rounding points exactly; only the F32 summation order of the
 * GEMMs (and the F32 evaluation of the activation) differ. Such a difference moves a value by an ulp,
 * which can flip a later rounding or quantization step (BF16 of GEMM1 for A16W16, the INT8 / MX code
 * of the GEMM2 input, the MX code of a combine row) by one step of that format. The bound is
 * therefore one step of the coarsest format on the path, relative to the largest |y| of the rank:
 *   metric = max |y - y_ref| / max |y_ref| over one rank's output (tests/test_mega_moe_common.h).
 * The values (the `tolerance` column of scenario_table.c: BF16 1/64, INT8 1/32 = a flipped code of
 * 1/127 of its row max, E4M3 2^-3, E5M2 2^-2, FP4 weights 2^-2 or 2^-1 with FP4 input) were set from
 * the measured errors of the test suite (docs/mega_moe.md lists them) with a margin; they are a
 * contract for the tests, not a statement about model accuracy. */
#ifndef MEGAMOE_OPS_MEGA_MOE_TOLERANCE_H
#define MEGAMOE_OPS_MEGA_MOE_TOLERANCE_H

#include "ops/mega_moe/scenario_table.h"

/* The scenario row of the pair, or else the first row of the weight dtype (0 for no such row). */
static inline double mm_mega_moe_tolerance_one(mm_dtype weight, mm_dtype dispatch) {
    const mm_moe_scenario_row *row = mm_moe_scenario_find(weight, dispatch);
    if (!row) row = mm_moe_scenario_of_weight(weight);
    return row ? row->test_tolerance : 0.0;
}

/* Tolerance of a call with routed weights `weight` fed `dispatch`, and shared weights (INVALID =
 * none): the larger of the two paths. */
static inline double mm_mega_moe_tolerance(mm_dtype weight, mm_dtype dispatch, mm_dtype shared_weight) {
    double t = mm_mega_moe_tolerance_one(weight, dispatch);
    if (shared_weight != MM_DTYPE_INVALID) {
        double s = mm_mega_moe_tolerance_one(shared_weight, dispatch);
        if (s > t) t = s;
    }
    return t;
}

#endif
