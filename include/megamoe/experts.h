/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/experts.h: the local experts call, the MoE layer of one process without communication:
 * x (T, H), top-k ids and weights -> y (T, H), with all experts or a subset of them in this process
 * (vLLM's CPU fused_experts, llama.cpp's mul_mat_id). Not collective; no communicator.
 *
 *   mm_experts_create   checks and packs the local experts' weights (the same tensors, layouts and
 *                       formats as mm_mega_moe_weights_create) and the expert map; once per layer.
 *   mm_experts_run      one call; thread-safe on the same mm_experts (it is read-only during a call).
 *   mm_experts_free
 *
 * Numerics: exactly MegaMoE's on one rank (same scenario rules, quantization, activation, rounding
 * points, summation order): for BF16 x, all experts local and no negative ids, y has the same bits as
 * mm_mega_moe_run on a 1-rank world with the same weights and attributes (tested). F16 and F32 x are
 * first rounded to BF16 (round to nearest even), since MegaMoE's input is BF16.
 *
 * Expert map (vLLM's expert_map): expert_map[g] is the local slot (0 .. local_count - 1) of global
 * expert g, or -1 when g is not in this process; NULL means all num_experts experts are local and
 * slot = id. A token's choice of a non-local expert contributes nothing to y here (the caller sums the
 * partial results of the processes holding the others). Shared experts, when given, are added to
 * every active token by every process that has them: with a subset of experts per process, give them
 * to one process only. */
#ifndef MEGAMOE_EXPERTS_H
#define MEGAMOE_EXPERTS_H

#include <stdint.h>

#include "megamoe/dtype.h"
#include "megamoe/mega_moe.h"
#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mm_experts mm_experts;

typedef struct mm_experts_config {
    int64_t num_experts;         /* global routed experts E >= 1: topk_ids are in [0, E) */
    int64_t hidden;              /* H >= 1 */
    int64_t intermediate_hidden; /* I >= 2, even */
    /* NULL, or num_experts entries: local slot or -1 (each slot used exactly once). */
    const int32_t *expert_map;
    /* The activation the weights are for: decides GEMM2's K (gelu: 2I). A call may use any activation
     * with the same K. */
    mm_mega_moe_activation activation;
} mm_experts_config;

/* routed->count = the number of local experts (E without a map; the map's slots with one); shared may
 * be NULL. The caller's tensors are not needed afterwards. */
mm_status mm_experts_create(const mm_experts_config *config, const mm_mega_moe_expert_weights *routed,
                            const mm_mega_moe_expert_weights *shared, mm_experts **out, mm_error *err);
void mm_experts_free(mm_experts *experts);

enum {
    MM_EXPERTS_SKIP_NEGATIVE_IDS = 1 /* ids < 0 (padding, as DeepEP and vLLM use) contribute nothing */
};

typedef struct mm_experts_inputs {
    const mm_tensor *x; /* (T, H) BF16, F16 or F32; T may be 0 */
    /* (T, K) I32 or I64, in [0, E) (or < 0 with SKIP_NEGATIVE_IDS); an id repeated in a row is one term
     * per occurrence (MegaMoE rejects repeats) */
    const mm_tensor *topk_ids;
    const mm_tensor *topk_weights;  /* (T, K) F32 or BF16 */
    const mm_tensor *x_active_mask; /* optional (T,) BOOL or I8, as MegaMoE's (inactive rows: y = +0) */
    int flags;                      /* MM_EXPERTS_* */
} mm_experts_inputs;

/* attrs: the MegaMoE attributes that apply without communication (quantization modes and dtypes,
 * activation and its parameters, topk_weights_type, combine_quant_mode); combine_comm_mode and
 * rank_num_per_server must be 0; pre-quantized x is refused (x is BF16, F16 or F32 here). y: (T, H) BF16
 * (MegaMoE's output), or F32 (the same BF16 values, widened exactly). */
mm_status mm_experts_run(const mm_experts *experts, const mm_mega_moe_attrs *attrs,
                         const mm_experts_inputs *inputs, mm_tensor *y, mm_error *err);

/* Bytes the packed weights hold. */
size_t mm_experts_bytes(const mm_experts *experts);

#ifdef __cplusplus
}
#endif
#endif
