/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/path.h: the scenario path of a group of experts: how it computes (scenario.c builds it
 * from the weight and input dtypes by the scenario table). */
#ifndef MEGAMOE_OPS_MEGA_MOE_PATH_H
#define MEGAMOE_OPS_MEGA_MOE_PATH_H

#include "megamoe/dtype.h"
#include "megamoe/status.h"
#include "ops/mega_moe/scenario_table.h"

/* How one group of experts computes. input_dtype is the GEMM1 activation type (BF16 for A16W16). */
typedef struct mm_moe_path {
    mm_moe_scenario scenario;
    mm_dtype input_dtype; /* BF16, I8 or an MX element type */
    mm_dtype gemm2_dtype; /* BF16, I8 or an MX element type */
    int block_scales;     /* the scenario takes block-scaled weights (scenario_table.h) */
} mm_moe_path;

/* Path of weights of weight_dtype fed with input_dtype (MM_DTYPE_INVALID = unquantized BF16); fails
 * naming `what` when the pair is not in the scenario table or activation_out_dtype does not fit. */
mm_status mm_moe_path_make(mm_dtype weight_dtype, mm_dtype input_dtype, mm_dtype activation_out_dtype,
                           const char *what, mm_moe_path *path, mm_error *err);

#endif
