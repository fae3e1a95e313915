/* ops/mega_moe/scenario.c: the scenario table (which weight dtype pairs with which dispatch dtype, and
 * the GEMM2 input dtype that follows). The activations are the table of ffn/activation.h. */
#include "core/error.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/mega_moe_internal.h"

const char *mm_moe_scenario_name(mm_moe_scenario scenario) {
    switch (scenario) {
    case MM_MOE_SCENARIO_A16W16: return "A16W16";
    case MM_MOE_SCENARIO_A8W8_INT: return "A8W8-INT";
    case MM_MOE_SCENARIO_A8W4_INT: return "A8W4-INT";
    case MM_MOE_SCENARIO_A8W8_FP: return "A8W8-FP";
    case MM_MOE_SCENARIO_A8W4_FP: return "A8W4-FP";
    case MM_MOE_SCENARIO_A4W4_FP: return "A4W4-FP";
    default: return "invalid";
    }
}

int mm_moe_is_mx(mm_dtype d) {
    return d == MM_DTYPE_FP8_E4M3FN || d == MM_DTYPE_FP8_E5M2 || d == MM_DTYPE_FP4_E2M1;
}

static mm_moe_scenario scenario_of(mm_dtype weight, mm_dtype input) {
    switch (weight) {
    case MM_DTYPE_BF16: return input == MM_DTYPE_INVALID ? MM_MOE_SCENARIO_A16W16 : MM_MOE_SCENARIO_INVALID;
    case MM_DTYPE_I8: return input == MM_DTYPE_I8 ? MM_MOE_SCENARIO_A8W8_INT : MM_MOE_SCENARIO_INVALID;
    case MM_DTYPE_INT4: return input == MM_DTYPE_I8 ? MM_MOE_SCENARIO_A8W4_INT : MM_MOE_SCENARIO_INVALID;
    case MM_DTYPE_FP8_E4M3FN:
    case MM_DTYPE_FP8_E5M2: return input == weight ? MM_MOE_SCENARIO_A8W8_FP : MM_MOE_SCENARIO_INVALID;
    case MM_DTYPE_FP4_E2M1:
        if (input == MM_DTYPE_FP8_E4M3FN) return MM_MOE_SCENARIO_A8W4_FP;
        if (input == MM_DTYPE_FP4_E2M1) return MM_MOE_SCENARIO_A4W4_FP;
        return MM_MOE_SCENARIO_INVALID;
    default: return MM_MOE_SCENARIO_INVALID;
    }
}

mm_status mm_moe_path_make(mm_dtype weight_dtype, mm_dtype input_dtype, mm_dtype activation_out_dtype,
                           const char *what, mm_moe_path *path, mm_error *err) {
    mm_moe_path p = {scenario_of(weight_dtype, input_dtype), input_dtype, MM_DTYPE_INVALID};
    switch (p.scenario) {
    case MM_MOE_SCENARIO_INVALID:
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s weight dtype %s does not pair with dispatch dtype %s (scenario table: bf16 with "
                       "none, int8/int4 with int8, fp8 with the same fp8, fp4_e2m1 with fp8_e4m3fn or "
                       "fp4_e2m1)",
                       what, mm_dtype_name(weight_dtype),
                       input_dtype == MM_DTYPE_INVALID ? "none" : mm_dtype_name(input_dtype));
    case MM_MOE_SCENARIO_A16W16:
        p.input_dtype = MM_DTYPE_BF16;
        p.gemm2_dtype = MM_DTYPE_BF16;
        break;
    case MM_MOE_SCENARIO_A8W8_INT:
    case MM_MOE_SCENARIO_A8W4_INT: p.gemm2_dtype = MM_DTYPE_I8; break;
    case MM_MOE_SCENARIO_A8W8_FP: p.gemm2_dtype = input_dtype; break;
    case MM_MOE_SCENARIO_A8W4_FP:
    case MM_MOE_SCENARIO_A4W4_FP: p.gemm2_dtype = MM_DTYPE_FP8_E4M3FN; break;
    }
    if (activation_out_dtype != MM_DTYPE_INVALID) {
        int fp = mm_moe_is_mx(p.gemm2_dtype);
        if (!fp || (activation_out_dtype != MM_DTYPE_FP8_E4M3FN && activation_out_dtype != MM_DTYPE_FP8_E5M2))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "activation_out_dtype = %s: only fp8_e4m3fn or fp8_e5m2, and only in an FP "
                           "scenario (%s experts are %s)",
                           mm_dtype_name(activation_out_dtype), what, mm_moe_scenario_name(p.scenario));
        p.gemm2_dtype = activation_out_dtype;
    }
    *path = p;
    return MM_OK;
}
