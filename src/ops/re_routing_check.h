/* SPDX-License-Identifier: Apache-2.0 */
/* ops/re_routing_check.h: private interface between MoeReRouting's validation and its copy.
 *
 * Validation yields an mm_rr_geometry; the copy (re_routing.c) uses only that record and the
 * descriptors it vouched for. */
#ifndef MEGAMOE_OPS_RE_ROUTING_CHECK_H
#define MEGAMOE_OPS_RE_ROUTING_CHECK_H

#include <stdint.h>

#include "megamoe/re_routing.h"

typedef struct mm_rr_geometry {
    int64_t a, h;            /* tokens (A, H) */
    int64_t n, e;            /* expert_token_num_per_rank (N, E) */
    int64_t token_row_bytes; /* bytes of one token row (ceil(H/2) for 4-bit formats) */
    int64_t scale_row_bytes; /* bytes of one token's scales; 0 without per_token_scales */
} mm_rr_geometry;

/* Checks inputs (including every count and their sum) and attributes; fills g. */
mm_status mm_rr_check_inputs(const mm_re_routing_inputs *in, const mm_re_routing_attrs *attrs,
                             mm_rr_geometry *g, mm_error *err);
/* After mm_rr_check_inputs succeeded: the required output descriptors (data NULL); NULL pointers skipped. */
void mm_rr_fill_output_shapes(const mm_re_routing_inputs *in, const mm_rr_geometry *g,
                              mm_tensor *permute_tokens, mm_tensor *permute_per_token_scales,
                              mm_tensor *permute_token_idx, mm_tensor *expert_token_num);
/* After mm_rr_check_inputs succeeded: output dtypes, shapes, data pointers and overlaps. */
mm_status mm_rr_check_outputs(const mm_re_routing_inputs *in, const mm_rr_geometry *g,
                              const mm_re_routing_outputs *out, mm_error *err);

#endif
