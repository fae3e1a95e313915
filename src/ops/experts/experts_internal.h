/* SPDX-License-Identifier: Apache-2.0 */
/* ops/experts/experts_internal.h: the local experts call's handle and the plan of one call, shared by
 * create.c (the handle), plan.c (validation and routing) and run.c (the compute). */
#ifndef MEGAMOE_OPS_EXPERTS_INTERNAL_H
#define MEGAMOE_OPS_EXPERTS_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "megamoe/experts.h"
#include "ops/mega_moe/plan.h"
#include "ops/mega_moe/weights.h"

/* A call's working memory, kept for the next call: a caller that finds it busy (another thread is
 * calling the same handle) allocates its own for that call instead. */
typedef struct mm_experts_ws {
    pthread_mutex_t lock;
    void *mem;
    size_t bytes;
} mm_experts_ws;

struct mm_experts {
    int64_t E, H, I, local; /* local = routed experts held (slots) */
    int32_t *map;           /* NULL (slot = id) or E entries */
    mm_mega_moe_activation activation;
    mm_moe_expert_set routed, shared; /* packed as MegaMoE packs them (ops/mega_moe/weights.c) */
    mm_experts_ws *ws;
};

/* One validated call. */
typedef struct mm_experts_plan {
    mm_moe_call c; /* scenario paths, activation, dispatch and shared input dtypes (MegaMoE's rules) */
    int64_t T, K;
    int64_t A;           /* active tokens */
    int64_t N;           /* routed rows: (token, k) pairs of active tokens choosing a local expert */
    int64_t *counts;     /* per local slot: rows (allocated, local + 1 entries; free it) */
    mm_dtype x_dtype;    /* BF16, F16 or F32 */
    int ids64;           /* topk_ids is I64 */
    int y_f32;           /* y is F32 */
    const uint8_t *mask; /* NULL = all active */
} mm_experts_plan;

/* plan.c: every rule of the call; on success p->counts is allocated. */
mm_status mm_experts_plan_make(const mm_experts *ex, const mm_mega_moe_attrs *attrs,
                               const mm_experts_inputs *in, const mm_tensor *y, mm_experts_plan *p,
                               mm_error *err);
/* The local slot of token i's k-th choice, or -1 (skipped id or expert of another process). */
static inline int64_t mm_experts_slot_of(const mm_experts *ex, const mm_experts_plan *p, const void *ids,
                                         int64_t i, int64_t k) {
    int64_t id = p->ids64 ? ((const int64_t *)ids)[i * p->K + k] : ((const int32_t *)ids)[i * p->K + k];
    if (id < 0) return -1;
    return ex->map ? ex->map[id] : id;
}

/* create.c: the handle's working memory of at least `bytes` (*owned = 1: the caller's own allocation,
 * free it; 0: the handle's, give it back with mm_experts_ws_release). NULL when out of memory. */
void *mm_experts_ws_acquire(const mm_experts *ex, size_t bytes, int *owned);
void mm_experts_ws_release(const mm_experts *ex, void *mem, int owned);

#endif
