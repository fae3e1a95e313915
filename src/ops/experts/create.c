/* SPDX-License-Identifier: Apache-2.0 */
/* ops/experts/create.c: mm_experts_create / free / bytes: checks the configuration and the expert map,
 * packs the local experts' weights exactly as MegaMoE packs a rank's (ops/mega_moe/weights.c, the same
 * checks and layouts), and keeps one working memory for the calls (reused, so the hot path does not
 * allocate). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/large_alloc.h"
#include "ffn/activation.h"
#include "gemm/packed.h"
#include "ops/experts/experts_internal.h"

/* Map entries: -1 or a slot in [0, local), each slot exactly once. */
static mm_status check_map(const int32_t *map, int64_t E, int64_t local, mm_error *err) {
    if (local < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "routed count = %" PRId64 " with an expert_map: at least one expert must be local",
                       local);
    int64_t *owner = malloc((size_t)local * sizeof *owner);
    if (!owner) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert_map check: out of memory");
    for (int64_t s = 0; s < local; s++) owner[s] = -1;
    mm_status st = MM_OK;
    int64_t used = 0;
    for (int64_t g = 0; g < E && st == MM_OK; g++) {
        int32_t v = map[g];
        if (v == -1) continue;
        if (v < 0 || v >= local)
            st = mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                         "expert_map[%" PRId64 "] = %d is neither -1 nor a slot in [0, %" PRId64
                         ") (routed count = %" PRId64 ")",
                         g, (int)v, local, local);
        else if (owner[v] >= 0)
            st = mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                         "expert_map[%" PRId64 "] = %d repeats expert_map[%" PRId64 "] (each slot once)", g,
                         (int)v, owner[v]);
        else {
            owner[v] = g;
            used++;
        }
    }
    if (st == MM_OK && used != local) {
        int64_t s = 0;
        while (owner[s] >= 0) s++;
        st = mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                     "expert_map maps %" PRId64 " experts but routed count = %" PRId64 " (slot %" PRId64
                     " is unused)",
                     used, local, s);
    }
    free(owner);
    return st;
}

static mm_status check_config(const mm_experts_config *c, mm_error *err) {
    if (c->num_experts < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "num_experts = %" PRId64 " must be >= 1",
                       c->num_experts);
    if (c->num_experts > INT32_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "num_experts = %" PRId64 " is above %d", c->num_experts,
                       INT32_MAX);
    if (c->hidden < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "hidden = %" PRId64 " must be >= 1", c->hidden);
    if (c->intermediate_hidden < 2 || c->intermediate_hidden % 2 != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "intermediate_hidden = %" PRId64 " must be even and >= 2", c->intermediate_hidden);
    if (!mm_ffn_act_info_of(c->activation))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation = %d is not a MegaMoE activation",
                       (int)c->activation);
    return MM_OK;
}

mm_status mm_experts_create(const mm_experts_config *config, const mm_mega_moe_expert_weights *routed,
                            const mm_mega_moe_expert_weights *shared, mm_experts **out, mm_error *err) {
    if (!config || !routed || !out)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "config, routed and out must not be NULL");
    *out = NULL;
    mm_status st = check_config(config, err);
    if (st != MM_OK) return st;
    int64_t E = config->num_experts, local = config->expert_map ? routed->count : E;
    if (config->expert_map && (st = check_map(config->expert_map, E, local, err)) != MM_OK) return st;
    mm_experts *ex = calloc(1, sizeof *ex);
    if (!ex) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "experts handle: out of memory");
    ex->E = E;
    ex->H = config->hidden;
    ex->I = config->intermediate_hidden;
    ex->local = local;
    ex->activation = config->activation;
    ex->ws = calloc(1, sizeof *ex->ws);
    if (config->expert_map) ex->map = malloc((size_t)E * sizeof *ex->map);
    if (!ex->ws || (config->expert_map && !ex->map)) {
        free(ex->ws);
        free(ex);
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "experts handle: out of memory");
    }
    pthread_mutex_init(&ex->ws->lock, NULL);
    if (ex->map) memcpy(ex->map, config->expert_map, (size_t)E * sizeof *ex->map);
    st = mm_moe_expert_set_make("routed", routed,
                                config->expert_map ? "the slots of expert_map" : "num_experts", local, local,
                                ex->H, ex->I, 1, &ex->routed, err);
    if (st == MM_OK)
        st = mm_moe_expert_set_make("shared", shared, "", 0, MM_MEGA_MOE_MAX_SHARED_EXPERTS, ex->H, ex->I, 1,
                                    &ex->shared, err);
    int64_t k2 = mm_ffn_act_k2(config->activation, ex->I);
    if (st == MM_OK && (ex->routed.k2 != k2 || (ex->shared.count > 0 && ex->shared.k2 != k2)))
        st = mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                     "%s weight2 has K = %" PRId64 " but activation %s needs %" PRId64 " (I = %" PRId64 ")",
                     ex->routed.k2 != k2 ? "routed" : "shared",
                     ex->routed.k2 != k2 ? ex->routed.k2 : ex->shared.k2,
                     mm_mega_moe_activation_name(config->activation), k2, ex->I);
    if (st != MM_OK) {
        mm_experts_free(ex);
        return st;
    }
    *out = ex;
    return MM_OK;
}

void mm_experts_free(mm_experts *ex) {
    if (!ex) return;
    mm_moe_expert_set_free(&ex->routed);
    mm_moe_expert_set_free(&ex->shared);
    if (ex->ws) {
        pthread_mutex_destroy(&ex->ws->lock);
        free(ex->ws->mem);
    }
    free(ex->ws);
    free(ex->map);
    free(ex);
}

static size_t packed_bytes(const mm_gemm_packed_weights *w) {
    size_t cols = (size_t)(w->n_panels * MM_GEMM_NR), n = (size_t)(w->n_panels * w->panel_bytes);
    if (w->col_scale) n += cols * sizeof(float);
    if (w->col_offset) n += cols * sizeof(float);
    if (w->col_sum_x128) n += cols * sizeof(int32_t);
    if (w->mx_scale) n += cols * (size_t)w->k_blocks * (sizeof(float) + 1);
    return n;
}

size_t mm_experts_bytes(const mm_experts *ex) {
    if (!ex) return 0;
    size_t n = 0;
    const mm_moe_expert_set *sets[2] = {&ex->routed, &ex->shared};
    for (int s = 0; s < 2; s++)
        for (int64_t e = 0; e < sets[s]->count; e++)
            n += packed_bytes(sets[s]->w1[e]) + packed_bytes(sets[s]->w2[e]);
    return n;
}

void *mm_experts_ws_acquire(const mm_experts *ex, size_t bytes, int *owned) {
    mm_experts_ws *ws = ex->ws;
    if (pthread_mutex_trylock(&ws->lock) != 0) {
        *owned = 1;
        return mm_alloc_large(bytes);
    }
    *owned = 0;
    if (ws->bytes < bytes) {
        free(ws->mem);
        ws->bytes = 0;
        ws->mem = mm_alloc_large(bytes);
        if (!ws->mem) {
            pthread_mutex_unlock(&ws->lock);
            return NULL;
        }
        ws->bytes = bytes;
    }
    return ws->mem;
}

void mm_experts_ws_release(const mm_experts *ex, void *mem, int owned) {
    if (owned) {
        free(mem);
        return;
    }
    pthread_mutex_unlock(&ex->ws->lock);
}
