/* SPDX-License-Identifier: Apache-2.0 */
/* examples/mega_moe.c: a complete program using MegaMoE through the public API.
 *
 * Two ranks run as threads of this process (mm_comm_run_threads). Each holds 2 of the 4 routed experts
 * and a few tokens (rank 1 fewer than rank 0: BS may differ per rank). Every rank creates the buffer
 * once, then for two scenarios (A16W16 with BF16 weights, A8W8-INT with INT8 weights quantized per
 * output channel) packs its experts, plans and runs one call, and reads y and expert_token_nums. At the
 * end one broken call shows the error handling: the rank that finds the problem names it, and every
 * rank gets the same status and message. docs/mega_moe.md "Using the API" walks through this file.
 * Build: cc mega_moe.c $(pkg-config --cflags --libs megamoe) -lm (sqrt: the example's own RMS). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "megamoe/comm.h"
#include "megamoe/formats.h"
#include "megamoe/mega_moe.h"

enum { RANKS = 2, EXPERTS = 4, LOCAL = EXPERTS / RANKS, TOPK = 2, HIDDEN = 64, INTER = 32, MAX_TOKENS = 3 };
enum { N1 = 2 * INTER, SCENARIOS = 2 };

/* What each rank hands back to main (each rank writes only its own entry). */
typedef struct rank_output {
    int64_t bs;
    uint16_t y[SCENARIOS][MAX_TOKENS][HIDDEN];
    int32_t counts[SCENARIOS][LOCAL];
    char scenario[SCENARIOS][16];
    mm_status broken_status;
    char broken_message[MM_ERROR_MESSAGE_MAX];
} rank_output;

/* A deterministic weight value in [-1/8, 1/8), different for every (expert, matrix, row, column). */
static float weight_value(int expert, int matrix, int row, int col) {
    unsigned h = (unsigned)(expert * 7919 + matrix * 104729 + row * 131 + col * 31);
    h = (h ^ (h >> 7)) * 2654435761u;
    return ((float)(h >> 24) - 128.0f) / 1024.0f;
}

/* One matrix of this rank's experts in the transposed layout: (LOCAL, n, k), one output channel per
 * row of k. BF16, or INT8 with one F32 scale per output channel. */
static void make_matrix(int rank, int matrix, int n, int k, int int8, uint16_t *bf16, int8_t *q,
                        float *scales) {
    float row[HIDDEN > INTER ? HIDDEN : INTER];
    for (int e = 0; e < LOCAL; e++)
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < k; c++) row[c] = weight_value(rank * LOCAL + e, matrix, r, c);
            if (int8)
                mm_int8_quantize_row_div_away(row, k, q + (e * n + r) * k, &scales[e * n + r]);
            else
                for (int c = 0; c < k; c++) bf16[(e * n + r) * k + c] = mm_f32_to_bf16(row[c]);
        }
}

/* The weight storage of one rank (both scenarios). */
typedef struct rank_weights {
    uint16_t w1_bf16[LOCAL * N1 * HIDDEN], w2_bf16[LOCAL * HIDDEN * INTER];
    int8_t w1_i8[LOCAL * N1 * HIDDEN], w2_i8[LOCAL * HIDDEN * INTER];
    float s1[LOCAL * N1], s2[LOCAL * HIDDEN];
} rank_weights;

static mm_status run_rank(mm_comm *comm, void *arg, mm_error *err) {
    rank_output *out = &((rank_output *)arg)[mm_comm_rank(comm)];
    int rank = mm_comm_rank(comm);
    int64_t bs = rank == 0 ? 3 : 2;
    out->bs = bs;

    /* Tokens and routing: token i of rank r goes to experts (i + r) % 4 and (i + r + 1) % 4 (some on
     * the same rank, some on two), with gating weights 0.75 and 0.25. */
    uint16_t x[MAX_TOKENS][HIDDEN];
    int32_t ids[MAX_TOKENS][TOPK];
    float gates[MAX_TOKENS][TOPK];
    for (int i = 0; i < bs; i++) {
        for (int h = 0; h < HIDDEN; h++)
            x[i][h] = mm_f32_to_bf16(sinf(0.1f * (float)(h + 17 * i + 5 * rank)));
        ids[i][0] = (i + rank) % EXPERTS;
        ids[i][1] = (i + rank + 1) % EXPERTS;
        gates[i][0] = 0.75f;
        gates[i][1] = 0.25f;
    }

    /* The buffer: created once per communicator and sizing, reused by every call below. */
    mm_mega_moe_sizing sizing = {.moe_expert_num = EXPERTS,
                                 .num_max_tokens_per_rank = MAX_TOKENS,
                                 .topk = TOPK,
                                 .hidden = HIDDEN,
                                 .intermediate_hidden = INTER,
                                 .max_recv_token_num = 0}; /* 0: room for every row that can arrive */
    mm_mega_moe_buffer *buffer = NULL;
    mm_mega_moe_weights *weights = NULL;
    rank_weights *rw = malloc(sizeof *rw); /* ~50 KB: kept off the thread's stack */
    mm_status st = mm_mega_moe_buffer_create(comm, &sizing, &buffer, err);
    if (st == MM_OK && !rw) {
        snprintf(err->message, sizeof err->message, "no memory for the weights");
        err->status = st = MM_ERR_OUT_OF_MEMORY;
    }
    /* a local failure must still meet the other ranks in the collective calls: agree on it */
    if ((st = mm_comm_agree(comm, st, err)) != MM_OK) goto done;

    int64_t x_shape[2] = {bs, HIDDEN}, k_shape[2] = {bs, TOPK}, e_shape[1] = {LOCAL};
    mm_tensor x_t = mm_tensor_make(MM_DTYPE_BF16, 2, x_shape, x);
    mm_tensor ids_t = mm_tensor_make(MM_DTYPE_I32, 2, k_shape, ids);
    mm_tensor gates_t = mm_tensor_make(MM_DTYPE_F32, 2, k_shape, gates);
    mm_mega_moe_inputs in = {.x = &x_t, .topk_ids = &ids_t, .topk_weights = &gates_t};

    for (int scenario = 0; scenario < SCENARIOS && st == MM_OK; scenario++) {
        int int8 = scenario == 1;
        make_matrix(rank, 1, N1, HIDDEN, int8, rw->w1_bf16, rw->w1_i8, rw->s1);
        make_matrix(rank, 2, HIDDEN, INTER, int8, rw->w2_bf16, rw->w2_i8, rw->s2);
        mm_dtype wt = int8 ? MM_DTYPE_I8 : MM_DTYPE_BF16;
        int64_t w1_shape[3] = {LOCAL, N1, HIDDEN}, w2_shape[3] = {LOCAL, HIDDEN, INTER};
        int64_t s1_shape[2] = {LOCAL, N1}, s2_shape[2] = {LOCAL, HIDDEN};
        mm_tensor w1 = mm_tensor_make(wt, 3, w1_shape, int8 ? (void *)rw->w1_i8 : (void *)rw->w1_bf16);
        mm_tensor w2 = mm_tensor_make(wt, 3, w2_shape, int8 ? (void *)rw->w2_i8 : (void *)rw->w2_bf16);
        mm_tensor s1 = mm_tensor_make(MM_DTYPE_F32, 2, s1_shape, rw->s1);
        mm_tensor s2 = mm_tensor_make(MM_DTYPE_F32, 2, s2_shape, rw->s2);
        mm_mega_moe_expert_weights routed = {.count = LOCAL,
                                             .transpose_weight1 = 1, /* (E_l, 2I, H) */
                                             .transpose_weight2 = 1, /* (E_l, H, I) */
                                             .weight1 = &w1,
                                             .weight2 = &w2,
                                             .weight_scales1 = int8 ? &s1 : NULL,
                                             .weight_scales2 = int8 ? &s2 : NULL};
        /* Packs the weights for the grouped GEMM; our arrays are not needed afterwards. */
        if ((st = mm_mega_moe_weights_create(buffer, &routed, NULL, &weights, err)) != MM_OK) break;

        mm_mega_moe_attrs attrs = mm_mega_moe_default_attrs(); /* A16W16, swiglu, combine mode 0 */
        if (int8) {
            attrs.dispatch_quant_mode = 2; /* INT8 per-token quantization of x before dispatch */
            attrs.dispatch_quant_out_dtype = MM_DTYPE_I8;
        }
        mm_mega_moe_plan_info info;
        if ((st = mm_mega_moe_plan(buffer, weights, &attrs, &in, &info, err)) == MM_OK) {
            snprintf(out->scenario[scenario], sizeof out->scenario[scenario], "%s", info.scenario);
            mm_tensor y_t = mm_tensor_make(MM_DTYPE_BF16, 2, x_shape, out->y[scenario]);
            mm_tensor counts_t = mm_tensor_make(MM_DTYPE_I32, 1, e_shape, out->counts[scenario]);
            mm_mega_moe_outputs outputs = {.y = &y_t, .expert_token_nums = &counts_t};
            st = mm_mega_moe_run(buffer, weights, &attrs, &in, &outputs, err);
        }
        if (st != MM_OK) break;
        if (scenario == 0) { /* keep the INT8 weights for the broken call below */
            mm_mega_moe_weights_free(weights);
            weights = NULL;
        }
    }

    if (st == MM_OK) {
        /* A broken call: rank 1 names expert 9 of 4. Every rank gets the same status and message. */
        if (rank == 1) ids[1][1] = 9;
        mm_mega_moe_attrs attrs = mm_mega_moe_default_attrs();
        attrs.dispatch_quant_mode = 2;
        attrs.dispatch_quant_out_dtype = MM_DTYPE_I8;
        mm_error broken;
        out->broken_status = mm_mega_moe_plan(buffer, weights, &attrs, &in, NULL, &broken);
        if (out->broken_status != MM_OK)
            snprintf(out->broken_message, sizeof out->broken_message, "%s", broken.message);
    }
done:
    mm_mega_moe_weights_free(weights);
    mm_status free_st = mm_mega_moe_buffer_free(buffer, st == MM_OK ? err : NULL);
    free(rw);
    return st != MM_OK ? st : free_st;
}

int main(void) {
    rank_output outputs[RANKS];
    memset(outputs, 0, sizeof outputs);
    mm_error err;
    if (mm_comm_run_threads(RANKS, run_rank, outputs, NULL, NULL, &err) != MM_OK) {
        fprintf(stderr, "mega_moe example failed: %s\n", err.message);
        return 1;
    }
    int failed = 0;
    for (int r = 0; r < RANKS; r++) {
        const rank_output *o = &outputs[r];
        for (int s = 0; s < SCENARIOS; s++) {
            printf("rank %d %-8s y[0][0..3] = %8.5f %8.5f %8.5f %8.5f   expert_token_nums = [%d, %d]\n", r,
                   o->scenario[s], mm_bf16_to_f32(o->y[s][0][0]), mm_bf16_to_f32(o->y[s][0][1]),
                   mm_bf16_to_f32(o->y[s][0][2]), mm_bf16_to_f32(o->y[s][0][3]), o->counts[s][0],
                   o->counts[s][1]);
        }
        /* The INT8 scenario stays close to A16W16 on the same (quantized) weights. */
        double diff = 0.0, norm = 0.0;
        for (int i = 0; i < o->bs; i++)
            for (int h = 0; h < HIDDEN; h++) {
                double a = mm_bf16_to_f32(o->y[0][i][h]), b = mm_bf16_to_f32(o->y[1][i][h]);
                diff += (a - b) * (a - b);
                norm += a * a;
            }
        double rel = sqrt(diff / (norm > 0.0 ? norm : 1.0));
        printf("rank %d: relative RMS difference A8W8-INT vs A16W16 = %.4f\n", r, rel);
        if (!(norm > 0.0) || !(rel < 0.05)) failed = 1;
        if (o->broken_status == MM_OK) failed = 1;
        printf("rank %d: broken call rejected (%s): %s\n", r, mm_status_name(o->broken_status),
               o->broken_message);
    }
    /* Every token sends one row to each of its 2 experts: 3 + 2 tokens give 10 rows in all. */
    for (int s = 0; s < SCENARIOS; s++) {
        int rows = 0;
        for (int r = 0; r < RANKS; r++) rows += outputs[r].counts[s][0] + outputs[r].counts[s][1];
        if (rows != 10) failed = 1;
    }
    if (strcmp(outputs[0].broken_message, outputs[1].broken_message) != 0) failed = 1;
    if (failed) fprintf(stderr, "mega_moe example: unexpected result\n");
    return failed;
}
