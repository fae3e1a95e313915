/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/demo_data.c: seeded synthetic inputs for the re-routing demo, benchmark and case generator. */
#include "common/demo_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_json.h"
#include "common/cli_util.h"
#include "megamoe/re_routing.h"

uint64_t cli_rand_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void cli_fill_random(void *dst, size_t nbytes, uint64_t *state) {
    unsigned char *p = dst;
    size_t i = 0;
    for (; i + 8 <= nbytes; i += 8) {
        uint64_t r = cli_rand_u64(state);
        memcpy(p + i, &r, 8);
    }
    if (i < nbytes) {
        uint64_t r = cli_rand_u64(state);
        memcpy(p + i, &r, nbytes - i);
    }
}

static double rand_unit(uint64_t *state) {
    return (double)(cli_rand_u64(state) >> 11) * 0x1.0p-53;
}

void cli_skewed_counts(int64_t tokens, int64_t ranks, int64_t experts, uint64_t *state, int64_t *counts) {
    int64_t blocks = ranks * experts;
    if (blocks <= 0) return;
    double *weight = malloc((size_t)blocks * sizeof *weight);
    int64_t *order = malloc((size_t)experts * sizeof *order);
    if (!weight || !order) {
        /* Uniform fallback keeps the contract (sum == tokens) even without scratch memory. */
        for (int64_t i = 0; i < blocks; i++) counts[i] = tokens / blocks + (i < tokens % blocks);
        goto done;
    }
    /* Popularity 1 / (1 + place) over a random order of experts (Fisher-Yates). */
    for (int64_t e = 0; e < experts; e++) order[e] = e;
    for (int64_t e = experts - 1; e > 0; e--) {
        int64_t j = (int64_t)(cli_rand_u64(state) % (uint64_t)(e + 1));
        int64_t t = order[e];
        order[e] = order[j];
        order[j] = t;
    }
    double total = 0;
    for (int64_t r = 0; r < ranks; r++)
        for (int64_t e = 0; e < experts; e++) {
            double w = (0.5 + rand_unit(state)) / (1.0 + (double)order[e]);
            weight[r * experts + e] = w;
            total += w;
        }
    int64_t assigned = 0;
    for (int64_t i = 0; i < blocks; i++) {
        counts[i] = (int64_t)((double)tokens * weight[i] / total);
        assigned += counts[i];
    }
    /* Rounding down leaves a few tokens; hand them to random blocks. */
    while (assigned < tokens) {
        counts[cli_rand_u64(state) % (uint64_t)blocks]++;
        assigned++;
    }
done:
    free(weight);
    free(order);
}

static void *alloc_bytes(int64_t nbytes) {
    size_t n = (size_t)(nbytes > 0 ? nbytes : 1);
    n = (n + 63) / 64 * 64;
    return aligned_alloc(64, n);
}

mm_status cli_rerouting_alloc(const cli_rerouting_shape *s, cli_rerouting_buffers *b, mm_error *err) {
    memset(b, 0, sizeof *b);
    uint64_t state = s->seed;
    int64_t row_bytes = mm_dtype_row_bytes(s->dtype, s->hidden);
    int64_t token_shape[2] = {s->tokens, s->hidden}, count_shape[2] = {s->ranks, s->experts};
    b->token_bytes = s->tokens * row_bytes;
    b->tokens = mm_tensor_make(s->dtype, 2, token_shape, alloc_bytes(b->token_bytes));
    b->permute_tokens = mm_tensor_make(s->dtype, 2, token_shape, alloc_bytes(b->token_bytes));
    b->counts = mm_tensor_make(MM_DTYPE_I64, 2, count_shape, alloc_bytes(s->ranks * s->experts * 8));
    b->permute_idx = mm_tensor_make(MM_DTYPE_I32, 1, token_shape, alloc_bytes(s->tokens * 4));
    b->expert_num = mm_tensor_make(MM_DTYPE_I64, 1, &s->experts, alloc_bytes(s->experts * 8));
    if (!b->tokens.data || !b->permute_tokens.data || !b->counts.data || !b->permute_idx.data ||
        !b->expert_num.data) {
        long long token_bytes = (long long)b->token_bytes; /* cli_rerouting_free zeroes b */
        cli_rerouting_free(b);
        return cli_fail(err, MM_ERR_OUT_OF_MEMORY, "cannot allocate 2 x %lld bytes of tokens", token_bytes);
    }
    cli_skewed_counts(s->tokens, s->ranks, s->experts, &state, b->counts.data);
    cli_fill_random(b->tokens.data, (size_t)b->token_bytes, &state);
    /* Touch the outputs once so page faults are not timed as re-routing. */
    memset(b->permute_tokens.data, 0, (size_t)b->token_bytes);
    return MM_OK;
}

void cli_rerouting_free(cli_rerouting_buffers *b) {
    free(b->tokens.data);
    free(b->permute_tokens.data);
    free(b->counts.data);
    free(b->permute_idx.data);
    free(b->expert_num.data);
    memset(b, 0, sizeof *b);
}

int cli_rerouting_verify(const cli_rerouting_buffers *b, char *why, size_t why_size) {
    int64_t a = b->tokens.shape[0], ranks = b->counts.shape[0], experts = b->counts.shape[1];
    int64_t row_bytes = mm_dtype_row_bytes(b->tokens.dtype, b->tokens.shape[1]);
    const int32_t *idx = b->permute_idx.data;
    const int64_t *counts = b->counts.data, *expert_num = b->expert_num.data;
    const unsigned char *in = b->tokens.data, *out = b->permute_tokens.data;
    int rc = -1;
    unsigned char *seen = calloc((size_t)(a > 0 ? a : 1), 1);
    if (!seen) {
        snprintf(why, why_size, "cannot allocate %lld bytes to verify", (long long)a);
        return -1;
    }
    for (int64_t i = 0; i < a; i++) {
        if (idx[i] < 0 || idx[i] >= a || seen[idx[i]]) {
            snprintf(why, why_size, "permute_token_idx[%lld] = %d is not part of a permutation of [0, %lld)",
                     (long long)i, idx[i], (long long)a);
            goto done;
        }
        seen[idx[i]] = 1;
        if (memcmp(out + i * row_bytes, in + (int64_t)idx[i] * row_bytes, (size_t)row_bytes) != 0) {
            snprintf(why, why_size, "permute_tokens row %lld differs from tokens row %d", (long long)i,
                     idx[i]);
            goto done;
        }
    }
    for (int64_t e = 0; e < experts; e++) {
        int64_t sum = 0;
        for (int64_t r = 0; r < ranks; r++) sum += counts[r * experts + e];
        if (expert_num[e] != sum) {
            snprintf(why, why_size, "expert_token_num[%lld] = %lld, expected %lld", (long long)e,
                     (long long)expert_num[e], (long long)sum);
            goto done;
        }
    }
    rc = 0;
done:
    free(seen);
    return rc;
}

cli_rerouting_shape cli_rerouting_default_shape(void) {
    cli_rerouting_shape s = {16384, 7168, 8, 16, MM_DTYPE_BF16, 1};
    return s;
}

mm_status cli_rerouting_call(cli_rerouting_buffers *b, mm_error *err) {
    mm_re_routing_attrs attrs = mm_re_routing_default_attrs();
    mm_re_routing_inputs in = {&b->tokens, &b->counts, NULL};
    mm_re_routing_outputs out = {&b->permute_tokens, NULL, &b->permute_idx, &b->expert_num};
    return mm_re_routing(&in, &attrs, &out, err);
}

void cli_rerouting_json_header(struct cli_json *j, const char *command, const char *key, const char *name,
                               const cli_rerouting_shape *shape, int64_t token_bytes) {
    *j = cli_json_header(command, key, name);
    cli_json_int(j, "tokens", shape->tokens);
    cli_json_int(j, "hidden", shape->hidden);
    cli_json_str(j, "dtype", mm_dtype_name(shape->dtype));
    cli_json_int(j, "ranks", shape->ranks);
    cli_json_int(j, "experts", shape->experts);
    cli_json_int(j, "seed", (int64_t)shape->seed);
    cli_json_int(j, "bytes", token_bytes);
}
