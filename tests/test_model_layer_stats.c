/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_model_layer_stats.c: mm_moe_layer_last_stats and mm_moe_layer_call_count on a tiny
 * qwen2_moe checkpoint (written here) run on 2 thread ranks: zeroed before the first forward; after it the
 * routed call's expert records are each rank's own experts on exactly the rows all ranks' topk_ids send
 * them, and the shared-expert call's one record is the rank's copy on its own tokens; the same weights as
 * qwen3_moe make one call and refuse MM_MOE_LAYER_CALL_SHARED; a bad call and NULLs are refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "megamoe/formats.h"
#include "megamoe/model.h"
#include "megamoe/safetensors.h"
#include "testlib.h"

enum { H = 64, I = 32, IS = 48, E = 4, K = 2, R = 2, T = 3 };

typedef struct job {
    const mm_model *model;
    int calls[R];
    int zeroed[R];         /* routed stats had no events before the forward */
    int32_t ids[R][T * K]; /* each rank's topk_ids */
    mm_mega_moe_stats routed[R], shared[R];
    mm_status shared_status[R];
    char shared_message[R][sizeof(((mm_error *)0)->message)];
    mm_status bad_call_status, null_status;
    char bad_call_message[sizeof(((mm_error *)0)->message)];
} job;

static void add(mm_st_writer *w, const char *name, int64_t rows, int64_t cols, uint64_t *seed) {
    uint16_t *d = malloc((size_t)(rows * cols) * sizeof *d);
    CHECK(d != NULL);
    if (!d) return;
    for (int64_t i = 0; i < rows * cols; i++)
        d[i] = mm_f32_to_bf16((float)mm_test_rand_uniform(seed, -0.5, 0.5));
    int64_t shape[2] = {rows, cols};
    mm_tensor t = mm_tensor_make(MM_DTYPE_BF16, 2, shape, d);
    mm_error err;
    CHECK_OK(mm_st_writer_add(w, name, &t, &err), &err);
    free(d);
}

/* dir/config.json of `family` and dir/model.safetensors with layer 0's MoE tensors (qwen2_moe's shared
 * expert too: qwen3_moe ignores it). */
static void write_checkpoint(const char *dir, const char *family) {
    char path[160];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f,
            "{\"model_type\":\"%s\",\"hidden_size\":%d,\"num_hidden_layers\":1,\"num_experts\":%d,"
            "\"num_experts_per_tok\":%d,\"moe_intermediate_size\":%d,\"shared_expert_intermediate_size\":%d,"
            "\"hidden_act\":\"silu\"}",
            family, H, E, K, I, IS);
    fclose(f);
    uint64_t seed = 11;
    mm_st_writer *w = NULL;
    mm_error err;
    CHECK_OK(mm_st_writer_create(&w, &err), &err);
    add(w, "model.layers.0.mlp.gate.weight", E, H, &seed);
    char name[128];
    for (int e = 0; e < E; e++) {
        static const char *const p[3] = {"gate_proj", "up_proj", "down_proj"};
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "model.layers.0.mlp.experts.%d.%s.weight", e, p[i]);
            add(w, name, i < 2 ? I : H, i < 2 ? H : I, &seed);
        }
    }
    add(w, "model.layers.0.mlp.shared_expert.gate_proj.weight", IS, H, &seed);
    add(w, "model.layers.0.mlp.shared_expert.up_proj.weight", IS, H, &seed);
    add(w, "model.layers.0.mlp.shared_expert.down_proj.weight", H, IS, &seed);
    add(w, "model.layers.0.mlp.shared_expert_gate.weight", 1, H, &seed);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK_OK(mm_st_writer_write(w, path, &err), &err);
    mm_st_writer_destroy(w);
}

static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    job *j = arg;
    int me = mm_comm_rank(comm);
    mm_moe_layer *layer = NULL;
    mm_status st = mm_moe_layer_load(comm, j->model, 0, T, &layer, err);
    if (st) return st;
    j->calls[me] = mm_moe_layer_call_count(layer);
    mm_mega_moe_stats s;
    memset(&s, 0xff, sizeof s);
    mm_error e2;
    j->zeroed[me] = mm_moe_layer_last_stats(layer, MM_MOE_LAYER_CALL_ROUTED, &s, &e2) == MM_OK &&
                    s.event_count == 0 && s.expert_count == 0 && s.batch_count == 0;
    uint16_t x[T * H], y[T * H];
    float w[T * K];
    uint64_t seed = 100 + (uint64_t)me;
    for (int i = 0; i < T * H; i++) x[i] = mm_f32_to_bf16((float)mm_test_rand_uniform(&seed, -1, 1));
    int64_t xs[2] = {T, H}, ks[2] = {T, K};
    mm_tensor tx = mm_tensor_make(MM_DTYPE_BF16, 2, xs, x), ty = mm_tensor_make(MM_DTYPE_BF16, 2, xs, y),
              ti = mm_tensor_make(MM_DTYPE_I32, 2, ks, j->ids[me]),
              tw = mm_tensor_make(MM_DTYPE_F32, 2, ks, w);
    st = mm_moe_layer_forward(layer, &tx, &ty, &ti, &tw, err);
    if (!st) st = mm_moe_layer_last_stats(layer, MM_MOE_LAYER_CALL_ROUTED, &j->routed[me], err);
    mm_error es;
    mm_error_clear(&es);
    j->shared_status[me] = mm_moe_layer_last_stats(layer, MM_MOE_LAYER_CALL_SHARED, &j->shared[me], &es);
    snprintf(j->shared_message[me], sizeof j->shared_message[me], "%s", es.message);
    if (me == 0) {
        j->bad_call_status = mm_moe_layer_last_stats(layer, (mm_moe_layer_call)2, &s, &es);
        snprintf(j->bad_call_message, sizeof j->bad_call_message, "%s", es.message);
        j->null_status = mm_moe_layer_last_stats(layer, MM_MOE_LAYER_CALL_ROUTED, NULL, NULL);
    }
    mm_status fs = mm_moe_layer_free(layer, st ? NULL : err);
    return st ? st : fs;
}

static void run(const char *dir, job *j) {
    mm_model *m = NULL;
    mm_error err;
    memset(j, 0, sizeof *j);
    CHECK_OK(mm_model_open(dir, &m, &err), &err);
    if (!m) return;
    j->model = m;
    CHECK_OK(mm_comm_launch("threads", R, rank_fn, j, &err), &err);
    mm_model_close(m);
}

int main(void) {
    char dir[64];
    if (!mm_test_make_temp_dir(dir, sizeof dir, "mm_layer_stats")) return 1;
    job *j = malloc(sizeof *j);
    CHECK(j != NULL);
    if (!j) return mm_test_finish("test_model_layer_stats");

    write_checkpoint(dir, "qwen2_moe");
    run(dir, j);
    int64_t routed[E] = {0}, computed[E] = {0}, rows = 0;
    for (int r = 0; r < R; r++) {
        CHECK_EQ_INT(j->calls[r], 2);
        CHECK(j->zeroed[r]);
        for (int i = 0; i < T * K; i++)
            if (j->ids[r][i] >= 0 && j->ids[r][i] < E) routed[j->ids[r][i]]++;
        const mm_mega_moe_stats *s = &j->routed[r];
        CHECK(s->event_count > 0 && s->events[0].stage == MM_MEGA_MOE_STAGE_DISPATCH);
        CHECK(s->batch_count >= 1 && s->expert_count >= 1);
        for (int q = 0; q < s->expert_count; q++) {
            int e = s->experts[q].expert;
            CHECK(e >= r * E / R && e < (r + 1) * E / R); /* the rank's own experts */
            if (e >= 0 && e < E) computed[e] += s->experts[q].rows;
            rows += s->experts[q].rows;
        }
        CHECK_OK(j->shared_status[r], NULL);
        CHECK_EQ_INT(j->shared[r].expert_count, 1);
        CHECK_EQ_INT(j->shared[r].experts[0].expert, r);
        CHECK_EQ_INT(j->shared[r].experts[0].rows, T);
    }
    CHECK_EQ_INT(rows, R * T * K);
    for (int e = 0; e < E; e++) CHECK_EQ_INT(computed[e], routed[e]);
    CHECK_EQ_INT(j->bad_call_status, MM_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(j->bad_call_message, "call = 2 must be MM_MOE_LAYER_CALL_ROUTED (0) or");
    CHECK_EQ_INT(j->null_status, MM_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(mm_moe_layer_call_count(NULL), 0);
    mm_mega_moe_stats s;
    mm_error err;
    CHECK_STATUS(mm_moe_layer_last_stats(NULL, MM_MOE_LAYER_CALL_ROUTED, &s, &err), MM_ERR_INVALID_ARGUMENT,
                 &err);
    CHECK_STR_CONTAINS(err.message, "mm_moe_layer_last_stats: layer or stats is NULL");

    write_checkpoint(dir, "qwen3_moe");
    run(dir, j);
    for (int r = 0; r < R; r++) {
        CHECK_EQ_INT(j->calls[r], 1);
        CHECK_EQ_INT(j->shared_status[r], MM_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(j->shared_message[r], "family qwen3_moe runs no shared-expert call");
    }
    free(j);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return mm_test_finish("test_model_layer_stats");
}
