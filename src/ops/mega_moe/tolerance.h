/* ops/mega_moe/tolerance.h: how far the operator's y may be from the float64 reference, per scenario.
 *
 * The operator follows the reference's rounding points exactly; only the F32 summation order of the
 * GEMMs (and the F32 evaluation of the activation) differ. Such a difference moves a value by an ulp,
 * which can flip a later rounding or quantization step (BF16 of GEMM1 for A16W16, the INT8 / MX code
 * of the GEMM2 input, the MX code of a combine row) by one step of that format. The bound is
 * therefore one step of the coarsest format on the path, relative to the largest |y| of the rank:
 *   metric = max |y - y_ref| / max |y_ref| over one rank's output (tests/test_mega_moe_common.h).
 * The values were set from the measured errors of the test suite (docs/mega_moe.md lists them) with
 * a margin; they are a contract for the tests, not a statement about model accuracy. */
#ifndef MEGAMOE_OPS_MEGA_MOE_TOLERANCE_H
#define MEGAMOE_OPS_MEGA_MOE_TOLERANCE_H

#include "megamoe/dtype.h"

static inline double mm_mega_moe_tolerance_one(mm_dtype weight, mm_dtype dispatch) {
    switch (weight) {
    case MM_DTYPE_BF16: return 1.0 / 64; /* BF16 rounding of GEMM1 and of y: 2^-8 relative, a few times */
    case MM_DTYPE_I8:
    case MM_DTYPE_INT4: return 1.0 / 32; /* a flipped INT8 code of the GEMM2 input: 1/127 of its row max */
    case MM_DTYPE_FP8_E4M3FN: return 1.0 / 8; /* a flipped E4M3 code: 2^-3 relative */
    case MM_DTYPE_FP8_E5M2: return 1.0 / 4;   /* E5M2: 2^-2 relative */
    case MM_DTYPE_FP4_E2M1: return dispatch == MM_DTYPE_FP4_E2M1 ? 1.0 / 2 : 1.0 / 4;
    default: return 0.0;
    }
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
