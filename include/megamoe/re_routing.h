/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/re_routing.h: MoeReRouting, rearranging received tokens from rank-major to expert-major order.
 *
 * tokens (A, H) arrive grouped by source rank and, inside a rank, by expert; the output groups them by
 * expert and, inside an expert, by source rank, keeping the order inside each (rank, expert) block.
 * See docs/operators.md, "MoeReRouting" and docs/operators.md. Not collective: one call, one process. */
#ifndef MEGAMOE_RE_ROUTING_H
#define MEGAMOE_RE_ROUTING_H

#include <stdint.h>

#include "megamoe/dtype.h"
#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values of the integer modes of mm_re_routing_attrs (the original operator's numbers, docs/operators.md). */
enum {
    MM_RE_ROUTING_TOKEN_NUM_CUMULATIVE = 0, /* expert_token_num_type: cumulative sums */
    MM_RE_ROUTING_TOKEN_NUM_COUNTS = 1      /* counts (default) */
};
enum {
    MM_RE_ROUTING_IDX_GATHER = 0, /* idx_type: permute_token_idx[j] is the source row of output row j */
    MM_RE_ROUTING_IDX_SCATTER = 1 /* permute_token_idx[i] is the output row of source row i */
};

typedef struct mm_re_routing_attrs {
    int64_t expert_token_num_type; /* 0 cumulative sum, 1 counts (default 1) */
    int64_t idx_type;              /* 0 gather index (default), 1 scatter index */
} mm_re_routing_attrs;

/* Defaults of the original operator: expert_token_num_type 1, idx_type 0. */
mm_re_routing_attrs mm_re_routing_default_attrs(void);

typedef struct mm_re_routing_inputs {
    const mm_tensor *tokens; /* (A, H): F16, BF16, I8, FP8 E5M2/E4M3FN, HiFloat8, FP4 E2M1/E1M2 */
    const mm_tensor *expert_token_num_per_rank; /* (N, E): I32 or I64 */
    const mm_tensor *per_token_scales;          /* optional (NULL): (A) or (A, ...) F32, or E8M0 */
} mm_re_routing_inputs;

/* Outputs are caller-allocated; mm_re_routing_plan says what they must be. */
typedef struct mm_re_routing_outputs {
    mm_tensor *permute_tokens; /* same dtype and shape as tokens */
    mm_tensor
        *permute_per_token_scales; /* same as per_token_scales; ignored (may be NULL) when that is NULL */
    mm_tensor *permute_token_idx;  /* (A,) I32 */
    mm_tensor *expert_token_num;   /* (E,) same dtype as expert_token_num_per_rank */
} mm_re_routing_outputs;

/* The pre-flight check ("plan", as for every operator): validate the inputs and attributes (NULL =
 * defaults) and fill the descriptors (dtype and shape, data left NULL) of the outputs whose pointers
 * are not NULL. Every rule broken is reported by name, e.g.
 * "expert_token_num_per_rank[1][0] = -3 is negative". */
mm_status mm_re_routing_plan(const mm_re_routing_inputs *in, const mm_re_routing_attrs *attrs,
                             mm_tensor *permute_tokens, mm_tensor *permute_per_token_scales,
                             mm_tensor *permute_token_idx, mm_tensor *expert_token_num, mm_error *err);
/* Deprecated: the former name of mm_re_routing_plan, kept as an alias. */
mm_status mm_re_routing_output_shapes(const mm_re_routing_inputs *in, const mm_re_routing_attrs *attrs,
                                      mm_tensor *permute_tokens, mm_tensor *permute_per_token_scales,
                                      mm_tensor *permute_token_idx, mm_tensor *expert_token_num,
                                      mm_error *err);

/* Validate everything (inputs, attributes, output descriptors), then rearrange. Multi-threaded.
 * Nothing is written to the outputs when validation fails. attrs may be NULL (the defaults). Outputs
 * must not overlap the inputs or each other. Odd H is allowed for 4-bit tokens (rows of ceil(H/2) bytes);
 * H has no upper limit. */
mm_status mm_re_routing(const mm_re_routing_inputs *in, const mm_re_routing_attrs *attrs,
                        const mm_re_routing_outputs *out, mm_error *err);

#ifdef __cplusplus
}
#endif
#endif
