/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/scenario_table.c: the rows of the MegaMoE scenario table (see scenario_table.h).
 *
 * Tolerances: the test metric is one step of the coarsest format on the path (tolerance.h explains
 * why); the `megamoe run` pair is a = 2^-6 (a few BF16 ulps of y) and b = one element step of the GEMM2
 * input quantization moving under an F32 accumulation difference, spread by GEMM2 (docs/reference.md
 * "Comparing a fast path with the reference"). */
#include "ops/mega_moe/scenario_table.h"

#include <string.h>

/* clang-format off */
const mm_moe_scenario_row mm_moe_scenario_table[] = {
    /* name          spec_name       label             kind                      weight_dtype        mode dispatch_dtype      gemm1_input          gemm2_input          bias test     run a / b     block */
    {"a16w16",        "a16w16",       "A16W16",         MM_MOE_SCENARIO_A16W16,   MM_DTYPE_BF16,       0, MM_DTYPE_INVALID,    MM_DTYPE_BF16,       MM_DTYPE_BF16,       0, 1.0 / 64, 0x1p-6, 0.01, 0},
    {"a8w8-int",      "a8w8-int",     "A8W8-INT",       MM_MOE_SCENARIO_A8W8_INT, MM_DTYPE_I8,         2, MM_DTYPE_I8,         MM_DTYPE_I8,         MM_DTYPE_I8,         0, 1.0 / 32, 0x1p-6, 0.01, 0},
    {"a8w4-int",      "a8w4-int",     "A8W4-INT",       MM_MOE_SCENARIO_A8W4_INT, MM_DTYPE_INT4,       2, MM_DTYPE_I8,         MM_DTYPE_I8,         MM_DTYPE_I8,         1, 1.0 / 32, 0x1p-6, 0.01, 0},
    {"a8w8-fp8",      "a8w8-fp-e4m3", "A8W8-FP (E4M3)", MM_MOE_SCENARIO_A8W8_FP,  MM_DTYPE_FP8_E4M3FN, 4, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, 0, 1.0 / 8,  0x1p-6, 0.03, 0},
    {"a8w8-fp8-e5m2", "a8w8-fp-e5m2", "A8W8-FP (E5M2)", MM_MOE_SCENARIO_A8W8_FP,  MM_DTYPE_FP8_E5M2,   4, MM_DTYPE_FP8_E5M2,   MM_DTYPE_FP8_E5M2,   MM_DTYPE_FP8_E5M2,   0, 1.0 / 4,  0x1p-6, 0.06, 0},
    /* A8W4-FP first among the FP4 rows: a tolerance asked for FP4 weights with another input is its. */
    {"a8w4-fp",       "a8w4-fp",      "A8W4-FP",        MM_MOE_SCENARIO_A8W4_FP,  MM_DTYPE_FP4_E2M1,   4, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, 0, 1.0 / 4,  0x1p-6, 0.03, 0},
    {"a4w4-fp",       "a4w4-fp",      "A4W4-FP",        MM_MOE_SCENARIO_A4W4_FP,  MM_DTYPE_FP4_E2M1,   4, MM_DTYPE_FP4_E2M1,   MM_DTYPE_FP4_E2M1,   MM_DTYPE_FP8_E4M3FN, 0, 1.0 / 2,  0x1p-6, 0.03, 0},
    /* A16 weight-only (docs/weight_formats.md): the A16W16 path on weights dequantized to BF16, so A16W16's
     * tolerances. FP4 weights fed BF16 take their existing E8M0 MX scales. */
    {"a16w8-fp8",     "a16w8-fp8",    "A16W8-FP8",      MM_MOE_SCENARIO_A16W8_FP8, MM_DTYPE_FP8_E4M3FN, 0, MM_DTYPE_INVALID, MM_DTYPE_BF16, MM_DTYPE_BF16, 0, 1.0 / 64, 0x1p-6, 0.01, 1},
    {"a16w4-mx",      "a16w4-mx",     "A16W4-MX",       MM_MOE_SCENARIO_A16W4_MX,  MM_DTYPE_FP4_E2M1,   0, MM_DTYPE_INVALID, MM_DTYPE_BF16, MM_DTYPE_BF16, 0, 1.0 / 64, 0x1p-6, 0.01, 0},
    {"a16w4-int",     "a16w4-int",    "A16W4-INT",      MM_MOE_SCENARIO_A16W4_INT, MM_DTYPE_UINT4,      0, MM_DTYPE_INVALID, MM_DTYPE_BF16, MM_DTYPE_BF16, 0, 1.0 / 64, 0x1p-6, 0.01, 1},
};
/* clang-format on */
const int mm_moe_scenario_count = (int)(sizeof mm_moe_scenario_table / sizeof mm_moe_scenario_table[0]);

const mm_moe_scenario_row *mm_moe_scenario_find(mm_dtype weight, mm_dtype input) {
    for (int i = 0; i < mm_moe_scenario_count; i++)
        if (mm_moe_scenario_table[i].weight_dtype == weight &&
            mm_moe_scenario_table[i].dispatch_dtype == input)
            return &mm_moe_scenario_table[i];
    return NULL;
}

const mm_moe_scenario_row *mm_moe_scenario_of_weight(mm_dtype weight) {
    for (int i = 0; i < mm_moe_scenario_count; i++)
        if (mm_moe_scenario_table[i].weight_dtype == weight) return &mm_moe_scenario_table[i];
    return NULL;
}

const mm_moe_scenario_row *mm_moe_scenario_by_name(const char *name) {
    for (int i = 0; name && i < mm_moe_scenario_count; i++)
        if (strcmp(name, mm_moe_scenario_table[i].spec_name) == 0 ||
            strcmp(name, mm_moe_scenario_table[i].name) == 0)
            return &mm_moe_scenario_table[i];
    return NULL;
}

const char *mm_moe_scenario_name(mm_moe_scenario scenario) {
    switch (scenario) {
    case MM_MOE_SCENARIO_A16W16: return "A16W16";
    case MM_MOE_SCENARIO_A8W8_INT: return "A8W8-INT";
    case MM_MOE_SCENARIO_A8W4_INT: return "A8W4-INT";
    case MM_MOE_SCENARIO_A8W8_FP: return "A8W8-FP";
    case MM_MOE_SCENARIO_A8W4_FP: return "A8W4-FP";
    case MM_MOE_SCENARIO_A4W4_FP: return "A4W4-FP";
    case MM_MOE_SCENARIO_A16W8_FP8: return "A16W8-FP8";
    case MM_MOE_SCENARIO_A16W4_MX: return "A16W4-MX";
    case MM_MOE_SCENARIO_A16W4_INT: return "A16W4-INT";
    default: return "invalid";
    }
}
