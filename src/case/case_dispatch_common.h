/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_dispatch_common.h: what the moe_distribute_dispatch_v3 and
 * moe_distribute_combine_add_rms_norm_v2 case adapters share: their attributes, the survivors of an
 * elastic case (ranks without tensors), and running the ranks on either backend, with the outputs of
 * every rank collected into the output file (gathered to process 0 under MPI). */
#ifndef MEGAMOE_CASE_DISPATCH_COMMON_H
#define MEGAMOE_CASE_DISPATCH_COMMON_H

#include "case/case_context.h"
#include "megamoe/dispatch_combine.h"

#define DCC_MAX_IN  24
#define DCC_MAX_OUT 6

typedef struct dcc_rank {
    mm_tensor in[DCC_MAX_IN];
    int has[DCC_MAX_IN];
    mm_tensor out[DCC_MAX_OUT];
    int out_on[DCC_MAX_OUT];
    int64_t rows; /* rows that arrived (dispatch), for the outputs the op trims */
} dcc_rank;

typedef struct dcc_op {
    const char *const *outputs;
    int n_out;
    unsigned trim_mask;        /* outputs whose first dimension is cut to rank->rows */
    const char *hidden_tensor; /* input whose last dimension is H (for reserving buffers) */
    /* Reads rank g's inputs (context allocation: called before the ranks run, or by the MPI process). */
    mm_status (*read)(mm_case_ctx *ctx, int64_t g, dcc_rank *r, mm_error *err);
    /* Sizes and allocates the outputs (from the context) for attrs of rank g. */
    mm_status (*alloc)(mm_case_ctx *ctx, const mm_dc_attrs *attrs, dcc_rank *r, mm_error *err);
    /* Runs the operator for one rank (thread-safe). */
    mm_status (*call)(mm_dc_workspace *ws, const mm_dc_attrs *attrs, dcc_rank *r, mm_error *err);
} dcc_op;

/* Reads the attributes both operators share; combine = 1 adds norm_eps and the reserved ones. */
mm_status mm_case_dc_read_attrs(mm_case_ctx *ctx, int combine, mm_dc_attrs *attrs, mm_error *err);

/* Runs the op on every rank of the case and adds the outputs. */
mm_status mm_case_dc_run(mm_case_ctx *ctx, const dcc_op *op, const mm_dc_attrs *attrs, mm_error *err);
/* The run function of both case ops: reads the attributes (combine's set when combine), then runs op. */
mm_status mm_case_dc_read_and_run(mm_case_ctx *ctx, const dcc_op *op, int combine, mm_error *err);

#endif
