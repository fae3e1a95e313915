/* SPDX-License-Identifier: Apache-2.0 */
/* examples/re_routing.c: a complete program using MoeReRouting through the public API.
 *
 * Two source ranks sent this rank tokens for its two local experts; the tokens arrived rank-major
 * (rank 0's block for expert 0, then for expert 1, then rank 1's blocks). MoeReRouting puts them in
 * expert-major order so that each expert's rows are contiguous for its GEMM. This is the worked example
 * of the specification: counts [[1, 2], [3, 1]]. Build: cc re_routing.c $(pkg-config --cflags --libs
 * megamoe). */
#include <stdio.h>
#include <string.h>

#include "megamoe/formats.h"
#include "megamoe/re_routing.h"

enum { RANKS = 2, EXPERTS = 2, TOKENS = 7, HIDDEN = 4 };

int main(void) {
    /* Token t holds the BF16 value t + 0.5 in every column, so the output order is easy to read. */
    uint16_t tokens[TOKENS][HIDDEN];
    for (int t = 0; t < TOKENS; t++)
        for (int h = 0; h < HIDDEN; h++) tokens[t][h] = mm_f32_to_bf16((float)t + 0.5f);
    int32_t counts[RANKS][EXPERTS] = {{1, 2}, {3, 1}};

    uint16_t permuted[TOKENS][HIDDEN];
    int32_t token_idx[TOKENS];
    int32_t per_expert[EXPERTS];

    int64_t tokens_shape[2] = {TOKENS, HIDDEN}, counts_shape[2] = {RANKS, EXPERTS};
    int64_t idx_shape[1] = {TOKENS}, experts_shape[1] = {EXPERTS};
    mm_tensor in_tokens = mm_tensor_make(MM_DTYPE_BF16, 2, tokens_shape, tokens);
    mm_tensor in_counts = mm_tensor_make(MM_DTYPE_I32, 2, counts_shape, counts);
    mm_tensor out_tokens = mm_tensor_make(MM_DTYPE_BF16, 2, tokens_shape, permuted);
    mm_tensor out_idx = mm_tensor_make(MM_DTYPE_I32, 1, idx_shape, token_idx);
    mm_tensor out_counts = mm_tensor_make(MM_DTYPE_I32, 1, experts_shape, per_expert);

    mm_re_routing_inputs in = {.tokens = &in_tokens, .expert_token_num_per_rank = &in_counts};
    mm_re_routing_outputs out = {
        .permute_tokens = &out_tokens, .permute_token_idx = &out_idx, .expert_token_num = &out_counts};
    mm_re_routing_attrs attrs = mm_re_routing_default_attrs(); /* counts, gather index */

    mm_error err;
    if (mm_re_routing(&in, &attrs, &out, &err) != MM_OK) {
        fprintf(stderr, "re_routing failed: %s\n", err.message);
        return 1;
    }

    printf("expert_token_num: [%d, %d]\n", per_expert[0], per_expert[1]);
    printf("permute_token_idx (gather):");
    for (int i = 0; i < TOKENS; i++) printf(" %d", token_idx[i]);
    printf("\npermute_tokens first column:");
    for (int i = 0; i < TOKENS; i++) printf(" %g", mm_bf16_to_f32(permuted[i][0]));
    printf("\n");

    /* The specification's answer: gather index [0, 3, 4, 5, 1, 2, 6], counts [4, 3]. */
    static const int32_t expected_idx[TOKENS] = {0, 3, 4, 5, 1, 2, 6};
    if (memcmp(token_idx, expected_idx, sizeof expected_idx) != 0 || per_expert[0] != 4 ||
        per_expert[1] != 3) {
        fprintf(stderr, "unexpected result\n");
        return 1;
    }

    /* A broken input is reported, naming the entry and the rule, and nothing is written. */
    counts[1][0] = -3;
    if (mm_re_routing(&in, &attrs, &out, &err) == MM_OK) return 1;
    printf("invalid input rejected: %s\n", err.message);
    return 0;
}
