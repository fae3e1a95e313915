/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_ops.h: the table of operator adapters behind mm_case_run.
 *
 * An adapter declares the names it accepts (input tensors and attributes) so that the generic runner
 * can reject unknown metadata keys and unknown tensors before any work, and a run function that reads
 * its inputs through the context (case_context.h), calls the operator and adds the outputs. Adding an
 * operator is one adapter file plus one row in case_ops.c. */
#ifndef MEGAMOE_CASE_OPS_H
#define MEGAMOE_CASE_OPS_H

#include <stddef.h>

#include "megamoe/status.h"

typedef struct mm_case_ctx mm_case_ctx;

typedef struct mm_case_op {
    const char *name; /* value of the "op" metadata key */
    /* Collective ops take per-rank tensors "rank<g>.<input>" for g in [0, ranks) and need the "ranks"
     * metadata key; the others take the plain input names and reject "ranks". */
    int collective;
    const char *const *inputs;     /* NULL-terminated input tensor names */
    const char *const *attributes; /* NULL-terminated attribute (metadata key) names */
    /* Reads inputs, runs, adds outputs. Under the MPI backend a non-collective op runs on process 0
     * only; a collective op runs on every process with mm_case_process_rank() telling which. */
    mm_status (*run)(mm_case_ctx *ctx, mm_error *err);
} mm_case_op;

/* The adapter for an "op" value, NULL when none. */
const mm_case_op *mm_case_find_op(const char *name);

/* "a, b, c": the ops this build runs, for messages. */
void mm_case_list_ops(char *buf, size_t cap);

/* 1 when name is an operator of the case-file contract (docs/case_files.md) whether or not this build
 * has its adapter yet. */
int mm_case_is_contract_op(const char *name);

extern const mm_case_op mm_case_op_re_routing;
extern const mm_case_op mm_case_op_mega_moe;
extern const mm_case_op
    mm_case_op_mega_moe_ext; /* the checkpoint-format extensions (docs/weight_formats.md) */
extern const mm_case_op mm_case_op_dispatch_v3;
extern const mm_case_op mm_case_op_combine_v2;

#endif
