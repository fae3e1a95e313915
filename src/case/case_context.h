/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_context.h: what an operator adapter sees of a case: its inputs, attributes and outputs.
 *
 * The context owns every buffer an adapter takes from it (input tensors, scratch, outputs), so an
 * adapter has no cleanup of its own, and every error message names the tensor or attribute as the
 * case file spells it. The runner (case_run.c) builds the context after the generic checks (known op,
 * known metadata keys, known tensor names) and writes the outputs only when the adapter succeeded. */
#ifndef MEGAMOE_CASE_CONTEXT_H
#define MEGAMOE_CASE_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "case/case_ops.h"
#include "megamoe/case.h"
#include "megamoe/dtype.h"
#include "megamoe/safetensors.h"

/* Bit of a dtype in an accepted-dtype mask. */
#define MM_CASE_DTYPE(d) (UINT64_C(1) << (d))

/* Passed as rank for plain (non per-rank) tensor names. */
#define MM_CASE_NO_RANK (-1)

/* Buffers a context owns and frees. */
typedef struct mm_case_owned {
    void **items;
    size_t count, cap;
} mm_case_owned;

struct mm_case_ctx {
    const mm_case_op *op;
    mm_case_options options;
    mm_st_reader *reader;
    mm_st_writer *writer; /* outputs; created by the runner before run */
    int64_t ranks;        /* "ranks" of a collective op; 0 otherwise */
    int process_rank;     /* this process under the MPI backend; 0 otherwise */
    int process_count;    /* MPI processes; 1 otherwise */
    int output_process;   /* the process that writes the output file: 0 unless the op moves it (an op whose
                           * process 0 may hold no outputs, e.g. a rank removed by elastic scale-in) */
    uint64_t used,
        budget; /* bytes taken by inputs, outputs and workspaces, and the limit (options, resolved) */
    mm_case_owned owned;   /* inputs and scratch: freed before the output file is written */
    mm_case_owned outputs; /* output data the writer streams from: freed after the file is written */
};

/* Tensor name as stored: "name" or "rank<g>.name". */
void mm_case_tensor_name(char *buf, size_t cap, int64_t rank, const char *name);

/* Reads input `name` (of `rank`, or MM_CASE_NO_RANK) into *out, checking that its dtype is in
 * dtype_mask and its rank (number of dimensions) in [ndim_min, ndim_max]. When the tensor is absent:
 * a required one is an error; an optional one gives *present = 0 and *out zeroed. present may be
 * NULL for required tensors. The data belongs to the context. */
mm_status mm_case_input(mm_case_ctx *ctx, int64_t rank, const char *name, int required, uint64_t dtype_mask,
                        int ndim_min, int ndim_max, mm_tensor *out, int *present, mm_error *err);

/* Attributes: absent -> default; present -> must be a JSON literal of the type, within the range. */
mm_status mm_case_attr_int64(mm_case_ctx *ctx, const char *name, int64_t default_value, int64_t min,
                             int64_t max, int64_t *out, mm_error *err);
mm_status mm_case_attr_double(mm_case_ctx *ctx, const char *name, double default_value, double min,
                              double max, double *out, mm_error *err);
mm_status mm_case_attr_bool(mm_case_ctx *ctx, const char *name, int default_value, int *out, mm_error *err);
/* A bare string that must be one of the NULL-terminated `allowed` values. */
mm_status mm_case_attr_choice(mm_case_ctx *ctx, const char *name, const char *default_value,
                              const char *const *allowed, const char **out, mm_error *err);

/* Counts `need` bytes against the memory budget before they are allocated: an input, an output or an
 * operator's workspace (sized by the operator's own sizing function). Over the budget: an input error
 * naming `what`, the bytes the case needs so far and the budget. */
mm_status mm_case_charge(mm_case_ctx *ctx, uint64_t need, const char *what, mm_error *err);

/* Zeroed scratch memory (at least 1 byte) owned by the context; NULL when out of memory. */
void *mm_case_alloc(mm_case_ctx *ctx, size_t nbytes);
/* Zeroed memory for output data (what mm_case_output's tensors point into): it stays until the output
 * file is written, since the writer streams from it. Not charged: charge it first. */
void *mm_case_alloc_output(mm_case_ctx *ctx, size_t nbytes);
/* Charges and allocates the output data of a descriptor whose dtype and shape are set. */
mm_status mm_case_alloc_tensor(mm_case_ctx *ctx, mm_tensor *t, const char *what, mm_error *err);

/* Adds an output under "name" or "rank<g>.name". Not copied: t->data must be output memory
 * (mm_case_alloc_tensor, mm_case_alloc_output), which the writer streams into the file. */
mm_status mm_case_output(mm_case_ctx *ctx, int64_t rank, const char *name, const mm_tensor *t, mm_error *err);

/* MPI backends' gather of `ranks` blocks of `bytes`: charges them, then allocates *block (this rank's
 * block, the caller frees it) and *all (ranks blocks, output memory owned by the context). */
mm_status mm_case_alloc_gather(mm_case_ctx *ctx, size_t bytes, int64_t ranks, unsigned char **block,
                               unsigned char **all, mm_error *err);

/* Frees the inputs and scratch (not the output data). */
void mm_case_ctx_release_inputs(mm_case_ctx *ctx);
/* Frees everything the context owns (not the reader or writer). */
void mm_case_ctx_release(mm_case_ctx *ctx);

#endif
