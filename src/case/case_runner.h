/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_runner.h: the steps of mm_case_run, shared by the in-process runner (case_run.c) and the
 * MPI runner (case_mpi.c). */
#ifndef MEGAMOE_CASE_RUNNER_H
#define MEGAMOE_CASE_RUNNER_H

#include "case/case_context.h"

/* Opens in_path and does the checks that need no tensor data: "op" names a known operator, every
 * metadata key and every tensor name belongs to it, "ranks" is valid for collective ops. On success
 * ctx holds the open reader; release it with mm_case_close whatever happens next. */
mm_status mm_case_open(const char *in_path, const mm_case_options *options, mm_case_ctx *ctx, mm_error *err);

/* Runs the operator's adapter and, when it succeeds, writes out_path (temporary file + rename) from
 * ctx->output_process only (MPI: the process the op names, 0 by default; otherwise the one process). */
mm_status mm_case_execute(mm_case_ctx *ctx, const char *out_path, mm_error *err);

void mm_case_close(mm_case_ctx *ctx);

/* One rank per process of a launched backend ("mpi": case_mpi.c); fails as mm_comm_launch for a
 * backend this build lacks. */
mm_status mm_case_run_launched(const char *backend, const char *in_path, const char *out_path,
                               const mm_case_options *options, mm_error *err);

#endif
