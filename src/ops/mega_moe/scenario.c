/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/scenario.c: the scenario path of a weight group: which row of the scenario table
 * (scenario_table.c) its weight and dispatch dtypes select, and the GEMM2 input dtype that follows. The
 * activations are the table of ffn/activation.h. */
#include "core/error.h"
#include "format/format_table.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/path.h"

mm_status mm_moe_path_make(mm_dtype weight_dtype, mm_dtype input_dtype, mm_dtype activation_out_dtype,
                           const char *what, mm_moe_path *path, mm_error *err) {
    const mm_moe_scenario_row *row = mm_moe_scenario_find(weight_dtype, input_dtype);
    if (!row)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s weight dtype %s does not pair with dispatch dtype %s (scenario table: bf16 with "
                       "none, int8/int4 with int8, fp8 with the same fp8, fp4_e2m1 with fp8_e4m3fn or "
                       "fp4_e2m1; the weight-only fp8_e4m3fn, fp4_e2m1 and uint4 with none)",
                       what, mm_dtype_name(weight_dtype),
                       input_dtype == MM_DTYPE_INVALID ? "none" : mm_dtype_name(input_dtype));
    mm_moe_path p = {row->kind, row->gemm1_input, row->gemm2_input, row->block_scales};
    if (activation_out_dtype != MM_DTYPE_INVALID) {
        int fp = mm_format_is_mx(p.gemm2_dtype);
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
