/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_dc_ffn.h: a BF16 SwiGLU expert FFN on Dispatch V3's rows through the grouped GEMM layer
 * (run_dc_ffn.c), for `megamoe run --op dispatch-combine` and `megamoe bench dispatch-combine`. */
#ifndef MEGAMOE_TOOLS_RUN_DC_FFN_H
#define MEGAMOE_TOOLS_RUN_DC_FFN_H

#include <stdint.h>

#include "megamoe/status.h"

typedef struct cli_dc_ffn cli_dc_ffn;

/* experts local experts with global ids expert_base + e; inter = the full intermediate size (each of
 * the tpw TP ranks holds inter / tpw of it). */
mm_status cli_dc_ffn_create(int64_t experts, int64_t expert_base, int64_t hidden, int64_t inter,
                            int64_t tp_rank, int64_t tpw, cli_dc_ffn **out, mm_error *err);
void cli_dc_ffn_free(cli_dc_ffn *f);

/* rows: n_rows BF16 rows (row_scales NULL) or INT8 rows with one F32 scale each, grouped by local
 * expert with counts[e] rows each; out receives n_rows BF16 rows. */
mm_status cli_dc_ffn_run(cli_dc_ffn *f, const void *rows, const float *row_scales, int64_t n_rows,
                         const int64_t *counts, uint16_t *out, mm_error *err);

#endif
