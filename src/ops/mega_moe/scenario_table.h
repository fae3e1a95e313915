/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/scenario_table.h: the MegaMoE precision scenarios, one row each (docs/mega_moe.md).
 *
 * A scenario pairs a weight dtype with the dispatch dtype it accepts and fixes what follows from that
 * pair: the GEMM1 and GEMM2 input dtypes, the bias rule, the tolerances and the names. The library
 * (validation, weight packing, the expert path), the tests and the CLI (`megamoe run`, `megamoe
 * case-gen`) all read this table, so a scenario is added or changed in one row. The header needs only
 * the public dtype header: tool files given src/ as an include directory (CMakeLists.txt) may include it. */
#ifndef MEGAMOE_OPS_MEGA_MOE_SCENARIO_TABLE_H
#define MEGAMOE_OPS_MEGA_MOE_SCENARIO_TABLE_H

#include "megamoe/dtype.h"

/* The spec's precision classes (A8W8-FP covers both FP8 element types). */
typedef enum mm_moe_scenario {
    MM_MOE_SCENARIO_INVALID = 0,
    MM_MOE_SCENARIO_A16W16,
    MM_MOE_SCENARIO_A8W8_INT,
    MM_MOE_SCENARIO_A8W4_INT,
    MM_MOE_SCENARIO_A8W8_FP,
    MM_MOE_SCENARIO_A8W4_FP,
    MM_MOE_SCENARIO_A4W4_FP,
    /* The A16 weight-only scenarios of checkpoint formats (docs/weight_formats.md): BF16 activations,
     * weights dequantized to BF16 by the rule there, then the A16W16 GEMMs. */
    MM_MOE_SCENARIO_A16W8_FP8,
    MM_MOE_SCENARIO_A16W4_MX,
    MM_MOE_SCENARIO_A16W4_INT
} mm_moe_scenario;

typedef struct mm_moe_scenario_row {
    const char *name;      /* a short alias of spec_name ("a8w8-fp8"), accepted by mm_moe_scenario_by_name */
    const char *spec_name; /* docs/mega_moe.md's name, the CLI's --scenario: "a8w8-fp-e4m3" */
    const char *label;     /* report label: "A8W8-FP (E4M3)" */
    mm_moe_scenario kind;  /* precision class; its name is mm_moe_scenario_name(kind): "A8W8-FP" */
    mm_dtype weight_dtype; /* routed / shared weight dtype */
    int dispatch_quant_mode;   /* the mode producing dispatch_dtype: 0 (none), 2 (INT8 per token), 4 (MX) */
    mm_dtype dispatch_dtype;   /* the dispatch dtype these weights accept; INVALID = none (BF16 x) */
    mm_dtype gemm1_input;      /* GEMM1 activation dtype */
    mm_dtype gemm2_input;      /* GEMM2 activation dtype (unless activation_out_dtype overrides it) */
    int bias;                  /* weights carry bias1/bias2 (A8W4-INT) */
    double test_tolerance;     /* tests: max |y - y_ref| / max |y_ref| over one rank (see tolerance.h) */
    double tolerance_relative; /* `megamoe run` check: |y - y_ref| <= a |y_ref| + b rms(y_ref): a */
    double tolerance_rms;      /* b */
    int block_scales; /* weights carry F32 block scales (scale_block_n x scale_block_k; UINT4 also zero
                         points) instead of per-channel F32 or E8M0 MX scales */
} mm_moe_scenario_row;

extern const mm_moe_scenario_row mm_moe_scenario_table[];
extern const int mm_moe_scenario_count;

/* The row of weights `weight` fed dispatch dtype `input` (INVALID = none), or NULL when the pair is no
 * scenario. */
const mm_moe_scenario_row *mm_moe_scenario_find(mm_dtype weight, mm_dtype input);
/* The first row with weights `weight`, or NULL when no scenario uses that dtype for weights. */
const mm_moe_scenario_row *mm_moe_scenario_of_weight(mm_dtype weight);
/* The row whose name or spec_name is `name`, or NULL. */
const mm_moe_scenario_row *mm_moe_scenario_by_name(const char *name);

const char *mm_moe_scenario_name(mm_moe_scenario scenario);

#endif
