/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_rank.c: the work of one rank in `megamoe run`: build its experts and tokens, create
 * the buffer and packed weights, one warm-up call, the timed calls, and keep the sample to check.
 *
 * Only the public API is used (include/megamoe/). Local steps that can fail (memory, weight packing)
 * are agreed on all ranks before the next collective, so a failure on one rank never leaves the others
 * waiting for the communicator timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_util.h"
#include "core/free_all.h"
#include "run/run_moe.h"
#include "common/timing.h"

static int64_t sample_count_of(const run_moe_config *cfg) {
    return cfg->check_tokens < cfg->tokens ? cfg->check_tokens : cfg->tokens;
}

mm_status run_moe_result_alloc(const run_moe_config *cfg, run_moe_rank_result *r, mm_error *err) {
    memset(r, 0, sizeof *r);
    int64_t n = sample_count_of(cfg), H = cfg->hidden, K = cfg->topk;
    r->sample_count = n;
    r->stats = calloc((size_t)cfg->iterations, sizeof *r->stats);
    r->spans = calloc(1, sizeof *r->spans);
    r->routed = calloc((size_t)cfg->experts, sizeof *r->routed);
    r->sample_rows = calloc((size_t)n + 1, sizeof *r->sample_rows);
    r->sample_x = calloc((size_t)(n * H) + 1, 2);
    r->sample_ids = calloc((size_t)(n * K) + 1, 4);
    r->sample_weights = calloc((size_t)(n * K) + 1, 4);
    r->sample_y = calloc((size_t)(n * H) + 1, 2);
    if (!r->stats || !r->spans || !r->routed || !r->sample_rows || !r->sample_x || !r->sample_ids ||
        !r->sample_weights || !r->sample_y) {
        run_moe_result_free(r);
        return cli_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for the results of %lld iterations",
                        (long long)cfg->iterations);
    }
    return MM_OK;
}

void run_moe_result_free(run_moe_rank_result *r) {
    MM_FREE_ALL(r->stats, r->spans, r->routed, r->sample_rows, r->sample_x, r->sample_ids, r->sample_weights,
                r->sample_y);
    memset(r, 0, sizeof *r);
}

/* Copies the sample rows (spread evenly over the rank's tokens) with their output. */
static void keep_sample(const run_moe_config *cfg, const run_moe_tokens *tok, const uint16_t *y,
                        run_moe_rank_result *res) {
    int64_t H = cfg->hidden, K = cfg->topk, n = res->sample_count;
    for (int64_t j = 0; j < n; j++) {
        int64_t row = j * tok->count / n;
        res->sample_rows[j] = row;
        memcpy(res->sample_x + j * H, tok->x + row * H, (size_t)H * 2);
        memcpy(res->sample_y + j * H, y + row * H, (size_t)H * 2);
        memcpy(res->sample_ids + j * K, tok->ids + row * K, (size_t)K * 4);
        memcpy(res->sample_weights + j * K, tok->weights + row * K, (size_t)K * 4);
    }
}

mm_status run_moe_rank(mm_comm *comm, const run_moe_config *cfg, const run_moe_scenario *sc,
                       run_moe_rank_result *res, mm_error *err) {
    int64_t T = cfg->tokens, H = cfg->hidden, K = cfg->topk, local = cfg->experts / cfg->ranks;
    int rank = mm_comm_rank(comm);
    mm_mega_moe_buffer *buffer = NULL;
    mm_mega_moe_weights *weights = NULL;
    run_moe_tokens tok;
    memset(&tok, 0, sizeof tok);
    uint16_t *y = malloc((size_t)(T * H) * 2 + 2);
    int32_t *expert_token_nums = malloc((size_t)local * 4 + 4);
    run_moe_rank_spans *spans = res->spans;
    spans->setup_begin = cli_now_seconds();

    mm_status st = y && expert_token_nums
                       ? MM_OK
                       : cli_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for y (%lld x %lld)", (long long)T,
                                  (long long)H);
    if (st == MM_OK) st = run_moe_tokens_make(cfg, rank, &tok, err);
    if ((st = mm_comm_agree(comm, st, err)) != MM_OK) goto fail;
    for (int64_t i = 0; i < T * K; i++) res->routed[tok.ids[i]]++;

    mm_mega_moe_sizing sizing = {.moe_expert_num = cfg->experts,
                                 .num_max_tokens_per_rank = T,
                                 .topk = K,
                                 .hidden = H,
                                 .intermediate_hidden = cfg->inter,
                                 .max_recv_token_num = 0};
    if ((st = mm_mega_moe_buffer_create(comm, &sizing, &buffer, err)) != MM_OK) goto fail;
    spans->generate_begin = cli_now_seconds();
    st = run_moe_weights_make(comm, cfg, sc, buffer, &weights, &spans->generate_end, err);
    spans->pack_end = cli_now_seconds();
    if ((st = mm_comm_agree(comm, st, err)) != MM_OK) goto fail;
    spans->setup_end = cli_now_seconds();

    int64_t x_shape[2] = {T, H}, k_shape[2] = {T, K}, e_shape[1] = {local};
    mm_tensor x = mm_tensor_make(MM_DTYPE_BF16, 2, x_shape, tok.x);
    mm_tensor ids = mm_tensor_make(MM_DTYPE_I32, 2, k_shape, tok.ids);
    mm_tensor gates = mm_tensor_make(MM_DTYPE_F32, 2, k_shape, tok.weights);
    mm_tensor y_t = mm_tensor_make(MM_DTYPE_BF16, 2, x_shape, y);
    mm_tensor counts_t = mm_tensor_make(MM_DTYPE_I32, 1, e_shape, expert_token_nums);
    mm_mega_moe_inputs in = {
        .x = &x, .scales = NULL, .topk_ids = &ids, .topk_weights = &gates, .x_active_mask = NULL};
    mm_mega_moe_outputs out = {.y = &y_t, .expert_token_nums = &counts_t};
    mm_mega_moe_attrs attrs = run_moe_attrs(cfg, sc);
    mm_mega_moe_plan_info info;
    if ((st = mm_mega_moe_plan(buffer, weights, &attrs, &in, &info, err)) != MM_OK) goto fail;

    /* warm-up: first touch of the buffer, the pool's threads and the caches; not kept */
    spans->warmup_begin = cli_now_seconds();
    if ((st = mm_mega_moe_run(buffer, weights, &attrs, &in, &out, err)) != MM_OK) goto fail;
    spans->warmup_end = cli_now_seconds();
    for (int64_t it = 0; it < cfg->iterations; it++) {
        if ((st = mm_mega_moe_run(buffer, weights, &attrs, &in, &out, err)) != MM_OK) goto fail;
        if ((st = mm_mega_moe_last_stats(buffer, &res->stats[it], err)) != MM_OK) goto fail;
    }
    keep_sample(cfg, &tok, y, res);
fail:
    mm_mega_moe_weights_free(weights);
    if (buffer) {
        mm_status free_st = mm_mega_moe_buffer_free(buffer, st == MM_OK ? err : NULL);
        if (st == MM_OK) st = free_st;
    }
    run_moe_tokens_free(&tok);
    free(y);
    free(expert_token_nums);
    return st;
}
