/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_dc_check.h: the float64 check of `megamoe run --op dispatch-combine` (run_dc_check.c). */
#ifndef MEGAMOE_TOOLS_RUN_DC_CHECK_H
#define MEGAMOE_TOOLS_RUN_DC_CHECK_H

#include <stdint.h>

#include "common/cli_util.h"
#include "common/dc_world.h"

typedef struct cli_dc_check_stats {
    int64_t tokens;          /* active sampled tokens compared */
    int64_t inactive;        /* inactive sampled tokens (their outputs must be zeros) */
    int64_t values, within;  /* compared values (y, x per element; rstd per token; one per inactive
                                token) and how many are within the tolerance */
    double max_err_over_rms; /* max |y - y_ref| / rms(y_ref of the token) */
} cli_dc_check_stats;

/* 1 when the check covers this world (not with TP 2 or elastic scale-in). */
int cli_dc_check_supported(const cli_dc_world *w);

/* Checks `samples` tokens of rank g (spread over its Bs) of the outputs y, x (Bs, H) BF16 and rstd (Bs)
 * against the float64 recomputation; inter = the expert intermediate size of run_dc_ffn. */
mm_status cli_dc_check_rank(const cli_dc_world *w, int64_t g, int64_t inter, int64_t samples,
                            const uint16_t *y, const uint16_t *x_out, const float *rstd,
                            cli_dc_check_stats *stats, mm_error *err);

#endif
