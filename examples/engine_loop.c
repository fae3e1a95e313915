/* SPDX-License-Identifier: Apache-2.0 */
/* examples/engine_loop.c: an inference engine's decode loop driving MegaMoE on a persistent world.
 *
 * The engine's own thread does everything: it creates a world of RANKS rank threads once
 * (mm_world_create), the MegaMoE buffers on it once (mm_mega_moe_world_buffers_create), packs every
 * rank's experts once (mm_mega_moe_weights_create is local, so it runs here too), then makes STEPS decode
 * calls, one token per rank each (mm_mega_moe_world_run), with new tokens and routing every step as a
 * model would produce them. No thread is started per call: the rank threads park between calls. It
 * prints the time per call and checks every step's expert_token_nums (each token reaches TOPK experts).
 * Build: cc engine_loop.c $(pkg-config --cflags --libs megamoe). docs/world.md walks through it. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime in ISO C mode */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "megamoe/formats.h"
#include "megamoe/world.h"

enum { RANKS = 2, EXPERTS = 16, LOCAL = EXPERTS / RANKS, TOPK = 4, HIDDEN = 256, INTER = 128, STEPS = 1000 };

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A deterministic value in [-1/16, 1/16) for every (expert, matrix, index). */
static float weight_value(int expert, int matrix, int index) {
    unsigned h = (unsigned)(expert * 7919 + matrix * 104729 + index * 31);
    h = (h ^ (h >> 13)) * 2654435761u;
    return ((float)(h >> 24) - 128.0f) / 2048.0f;
}

/* Rank r's experts as stacked BF16 tensors: weight1 (LOCAL, H, 2I), weight2 (LOCAL, I, H). */
typedef struct rank_experts {
    uint16_t w1[LOCAL * HIDDEN * 2 * INTER], w2[LOCAL * INTER * HIDDEN];
} rank_experts;

/* One rank's token of a step: x, its TOPK experts and gating weights. */
typedef struct rank_token {
    uint16_t x[HIDDEN], y[HIDDEN];
    int32_t ids[TOPK], counts[LOCAL];
    float gates[TOPK];
} rank_token;

/* The "model" before the MoE layer: a new token and its routing every step. */
static void next_token(int step, int rank, rank_token *t) {
    for (int h = 0; h < HIDDEN; h++)
        t->x[h] = mm_f32_to_bf16(sinf(0.01f * (float)(h * (rank + 1) + 7 * step)));
    int first = (step * 5 + rank * 3) % EXPERTS;
    for (int k = 0; k < TOPK; k++) {
        t->ids[k] = (first + 3 * k) % EXPERTS; /* TOPK distinct experts (3 and 16 are coprime) */
        t->gates[k] = 1.0f / (float)(k + 2);
    }
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void) {
    mm_error err = {MM_OK, ""};
    mm_world *world = NULL;
    mm_mega_moe_buffer *buffers[RANKS] = {NULL};
    mm_mega_moe_weights *weights[RANKS] = {NULL};
    rank_experts *experts = malloc(sizeof *experts); /* ~1 MB: one rank's at a time, packed then reused */
    rank_token tokens[RANKS];
    static double seconds[STEPS];
    int failed = 0;

    /* Once: the world, its buffers, the packed weights. */
    mm_status st = experts ? mm_world_create(RANKS, MM_WORLD_DEFAULT, &world, &err) : MM_ERR_OUT_OF_MEMORY;
    mm_mega_moe_sizing sizing = {.moe_expert_num = EXPERTS,
                                 .num_max_tokens_per_rank = 1, /* decode: one token per rank */
                                 .topk = TOPK,
                                 .hidden = HIDDEN,
                                 .intermediate_hidden = INTER};
    if (st == MM_OK) st = mm_mega_moe_world_buffers_create(world, &sizing, buffers, &err);
    for (int r = 0; r < RANKS && st == MM_OK; r++) {
        for (int e = 0; e < LOCAL; e++) {
            for (int i = 0; i < HIDDEN * 2 * INTER; i++)
                experts->w1[e * HIDDEN * 2 * INTER + i] = mm_f32_to_bf16(weight_value(r * LOCAL + e, 1, i));
            for (int i = 0; i < INTER * HIDDEN; i++)
                experts->w2[e * INTER * HIDDEN + i] = mm_f32_to_bf16(weight_value(r * LOCAL + e, 2, i));
        }
        int64_t s1[3] = {LOCAL, HIDDEN, 2 * INTER}, s2[3] = {LOCAL, INTER, HIDDEN};
        mm_tensor w1 = mm_tensor_make(MM_DTYPE_BF16, 3, s1, experts->w1);
        mm_tensor w2 = mm_tensor_make(MM_DTYPE_BF16, 3, s2, experts->w2);
        mm_mega_moe_expert_weights routed = {.count = LOCAL, .weight1 = &w1, .weight2 = &w2};
        st = mm_mega_moe_weights_create(buffers[r], &routed, NULL, &weights[r], &err);
    }
    free(experts); /* packed: the engine's copy is no longer needed */

    /* The inputs and outputs of every rank, described once; the loop only rewrites their contents. */
    int64_t xs[2] = {1, HIDDEN}, ks[2] = {1, TOPK}, es[1] = {LOCAL};
    mm_tensor x[RANKS], ids[RANKS], gates[RANKS], y[RANKS], counts[RANKS];
    mm_mega_moe_inputs in[RANKS];
    mm_mega_moe_outputs out[RANKS];
    for (int r = 0; r < RANKS; r++) {
        x[r] = mm_tensor_make(MM_DTYPE_BF16, 2, xs, tokens[r].x);
        ids[r] = mm_tensor_make(MM_DTYPE_I32, 2, ks, tokens[r].ids);
        gates[r] = mm_tensor_make(MM_DTYPE_F32, 2, ks, tokens[r].gates);
        y[r] = mm_tensor_make(MM_DTYPE_BF16, 2, xs, tokens[r].y);
        counts[r] = mm_tensor_make(MM_DTYPE_I32, 1, es, tokens[r].counts);
        in[r] = (mm_mega_moe_inputs){.x = &x[r], .topk_ids = &ids[r], .topk_weights = &gates[r]};
        out[r] = (mm_mega_moe_outputs){.y = &y[r], .expert_token_nums = &counts[r]};
    }
    mm_mega_moe_attrs attrs = mm_mega_moe_default_attrs(); /* A16W16, swiglu */

    /* The serving loop: one MegaMoE call per decode step, from this thread. */
    double checksum = 0.0;
    for (int step = 0; step < STEPS && st == MM_OK; step++) {
        for (int r = 0; r < RANKS; r++) next_token(step, r, &tokens[r]);
        double t0 = now_seconds();
        st = mm_mega_moe_world_run(world, buffers, (const mm_mega_moe_weights *const *)weights, &attrs, in,
                                   out, &err);
        seconds[step] = now_seconds() - t0;
        int rows = 0;
        for (int r = 0; r < RANKS; r++) {
            for (int j = 0; j < LOCAL; j++) rows += tokens[r].counts[j];
            checksum += mm_bf16_to_f32(tokens[r].y[0]);
        }
        if (st == MM_OK && rows != RANKS * TOPK) {
            fprintf(stderr, "step %d: %d rows reached the experts, expected %d\n", step, rows, RANKS * TOPK);
            failed = 1;
        }
    }
    if (st != MM_OK) {
        fprintf(stderr, "engine_loop: %s\n", err.message);
        failed = 1;
    } else {
        double total = 0.0;
        for (int i = 0; i < STEPS; i++) total += seconds[i];
        qsort(seconds, STEPS, sizeof seconds[0], compare_doubles);
        printf("engine_loop: %d decode calls of MegaMoE on a world of %d ranks (H %d, I %d, %d experts, "
               "top-%d)\n",
               STEPS, RANKS, HIDDEN, INTER, EXPERTS, TOPK);
        printf("per call: mean %.1f us, median %.1f us, p99 %.1f us; checksum of y[0] %.6f\n",
               1e6 * total / STEPS, 1e6 * seconds[STEPS / 2], 1e6 * seconds[STEPS * 99 / 100], checksum);
        if (!isfinite(checksum) || checksum == 0.0) failed = 1;
    }

    /* Once, at shutdown: weights, buffers (collective on the world's threads), the world. */
    for (int r = 0; r < RANKS; r++) mm_mega_moe_weights_free(weights[r]);
    if (world && mm_mega_moe_world_buffers_free(world, buffers, &err) != MM_OK) failed = 1;
    if (mm_world_free(world, &err) != MM_OK) failed = 1;
    return failed;
}
