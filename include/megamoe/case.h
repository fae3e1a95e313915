/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/case.h: running one operator call from a case file (docs/case_files.md, docs/case_files.md).
 *
 * A case file is a safetensors file whose metadata names the operator ("op") and its attributes and
 * whose tensors are the inputs of every rank. Running it writes every rank's outputs to one file. */
#ifndef MEGAMOE_CASE_H
#define MEGAMOE_CASE_H

#include <stdint.h>

#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mm_case_backend {
    MM_CASE_BACKEND_THREADS = 0, /* all ranks as threads of this process */
    MM_CASE_BACKEND_MPI = 1      /* one rank per MPI process (MPI_COMM_WORLD); rank 0 writes the output */
} mm_case_backend;

typedef struct mm_case_options {
    mm_case_backend backend;
    double timeout_seconds; /* collective wait limit; 0 = library default */
    /* Memory the case may take for its inputs, outputs (streamed to the file, counted once) and the
     * operator's workspaces (sized by its own sizing functions), in bytes; 0 = 3/4 of physical memory. A case
     * that needs more fails before allocating, with an input error naming both figures. */
    uint64_t memory_budget_bytes;
} mm_case_options;

/* Runs the case in in_path and writes the outputs to out_path (via a temporary file and rename; on any
 * failure out_path is left untouched; an existing device or FIFO such as /dev/null is written through,
 * after success, instead of being replaced). A broken file or a case that breaks an operator rule returns an
 * input error (mm_status_is_input_error) with one line naming the tensor or attribute and the rule. */
mm_status mm_case_run(const char *in_path, const char *out_path, const mm_case_options *options,
                      mm_error *err);

#ifdef __cplusplus
}
#endif
#endif
