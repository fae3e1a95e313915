/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/demo_data.h: the synthetic re-routing workload shared by `run`, `bench re-routing` and
 * `case-gen`.
 *
 * Counts are skewed the way MoE routing is (a few popular experts, jitter per source rank) because
 * uniform counts hide the cost of small and empty blocks. Everything is derived from one seed. */
#ifndef MEGAMOE_TOOLS_DEMO_DATA_H
#define MEGAMOE_TOOLS_DEMO_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/cli_options.h"
#include "megamoe/dtype.h"
#include "megamoe/status.h"

/* splitmix64: small, fast and good enough for test data; the seeded data of every tool draws from it. */
uint64_t cli_rand_u64(uint64_t *state);
void cli_fill_random(void *dst, size_t nbytes, uint64_t *state);

/* counts[r * experts + e] >= 0 with sum == tokens; zipf-like popularity over a random expert order. */
void cli_skewed_counts(int64_t tokens, int64_t ranks, int64_t experts, uint64_t *state, int64_t *counts);

typedef struct cli_rerouting_shape {
    int64_t tokens;  /* A */
    int64_t hidden;  /* H */
    int64_t ranks;   /* N */
    int64_t experts; /* E, local experts of this card */
    mm_dtype dtype;  /* dtype of tokens */
    uint64_t seed;
} cli_rerouting_shape;

/* Inputs and outputs of one re-routing call, all heap-allocated. */
typedef struct cli_rerouting_buffers {
    mm_tensor tokens, counts;                          /* counts: (N, E) I64 */
    mm_tensor permute_tokens, permute_idx, expert_num; /* outputs */
    int64_t token_bytes;                               /* bytes of all tokens (A x row bytes) */
} cli_rerouting_buffers;

/* The realistic default: 8 ranks x 16 local experts, A = 16384 tokens of H = 7168 BF16 (235 MB). */
cli_rerouting_shape cli_rerouting_default_shape(void);
/* --json: the header object of a re-routing command (`command`, `key`: `name`) with the shape, the seed and
 * the token bytes; the caller adds its own options and ends it. */
struct cli_json;
void cli_rerouting_json_header(struct cli_json *j, const char *command, const char *key, const char *name,
                               const cli_rerouting_shape *shape, int64_t token_bytes);

/* Option rows (cli_options.h) of what every re-routing workload takes: --tokens, --hidden, --ranks,
 * --experts, --dtype, --seed into *SHAPE. */
#define CLI_REROUTING_SHAPE_OPTIONS(SHAPE)                                                                   \
    CLI_INT64_OPTION("tokens", &(SHAPE)->tokens, 0, INT32_MAX),                                              \
        CLI_INT64_OPTION("hidden", &(SHAPE)->hidden, 1, 16383),                                              \
        CLI_INT64_OPTION("ranks", &(SHAPE)->ranks, 1, 1 << 16),                                              \
        CLI_INT64_OPTION("experts", &(SHAPE)->experts, 1, 1 << 16),                                          \
        CLI_DTYPE_OPTION("dtype", &(SHAPE)->dtype), CLI_SEED_OPTION(&(SHAPE)->seed)
#define CLI_REROUTING_SHAPE_HELP                                                                             \
    "      --tokens A        tokens received (default 16384)\n"                                              \
    "      --hidden H        token length, 0 < H < 16384 (default 7168)\n"                                   \
    "      --ranks N         source ranks (default 8)\n"                                                     \
    "      --experts E       local experts (default 16)\n"                                                   \
    "      --dtype NAME      dtype of tokens: bf16, f16, int8, fp8_e4m3fn, fp8_e5m2, hifloat8, fp4_e2m1,\n"  \
    "                        fp4_e1m2 (default bf16)\n"                                                      \
    "      --seed S          random seed of counts and token bytes (default 1)\n"

/* Allocates and fills inputs (random bytes, skewed counts) and allocates outputs. */
mm_status cli_rerouting_alloc(const cli_rerouting_shape *shape, cli_rerouting_buffers *b, mm_error *err);
void cli_rerouting_free(cli_rerouting_buffers *b);

/* Checks a gather-index result: the index is a permutation of [0, A), every output row equals the
 * input row its index names, and expert_num holds the column sums of counts. Returns 0 when all hold,
 * else -1 with the first violation described in why. */
/* Runs mm_re_routing (gather index, counts) on the buffers. */
mm_status cli_rerouting_call(cli_rerouting_buffers *b, mm_error *err);

int cli_rerouting_verify(const cli_rerouting_buffers *b, char *why, size_t why_size);

#endif
