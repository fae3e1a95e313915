/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_model_config.c: mm_model_open on hand-written config.json files: each family's keys, the
 * transformers defaults taken when a key is absent (norm_topk_prob false, decoder_sparse_step 1,
 * mlp_only_layers empty), which layers are sparse, and the messages naming a broken key or index. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "megamoe/model.h"
#include "testlib.h"

static char dir[64];

static void put(const char *name, const char *text) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void drop(const char *name) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

/* Layer `layer` of m is refused, with a message containing needle. */
static void expect_layer_rejected(const mm_model *m, int64_t layer, const char *needle) {
    mm_error err;
    CHECK_STATUS(mm_model_check_layer(m, layer, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, needle);
}

static mm_model *open_ok(const char *config) {
    put("config.json", config);
    mm_model *m = NULL;
    mm_error err;
    CHECK_OK(mm_model_open(dir, &m, &err), &err);
    return m;
}

static void open_fails(const char *config, const char *needle) {
    put("config.json", config);
    mm_model *m = NULL;
    mm_error err;
    CHECK_STATUS(mm_model_open(dir, &m, &err), MM_ERR_INVALID_FILE, &err);
    CHECK_STR_CONTAINS(err.message, needle);
    CHECK(m == NULL);
}

static void test_families(void) {
    mm_error err;
    put("model.safetensors", "");
    mm_model *m = open_ok("{\"model_type\":\"mixtral\",\"hidden_size\":4096,\"num_hidden_layers\":32,"
                          "\"num_local_experts\":8,\"num_experts_per_tok\":2,\"intermediate_size\":14336}");
    const mm_model_config *c = mm_model_get_config(m);
    CHECK(c && c->family == MM_MODEL_MIXTRAL && c->num_experts == 8 && c->topk == 2);
    CHECK(c && c->moe_intermediate_size == 14336 && c->shared_intermediate_size == 0);
    CHECK(c && c->router == MM_ROUTER_SOFTMAX_TOPK_RENORM);
    CHECK_OK(mm_model_check_layer(m, 31, &err), &err);
    expect_layer_rejected(m, 32, "layer 32 is outside [0, 32) (config.json num_hidden_layers)");
    mm_model_close(m);

    /* qwen2_moe without norm_topk_prob / decoder_sparse_step / mlp_only_layers: transformers' defaults */
    m = open_ok(
        "{\"model_type\":\"qwen2_moe\",\"hidden_size\":2048,\"num_hidden_layers\":24,\"num_experts\":60,"
        "\"num_experts_per_tok\":4,\"moe_intermediate_size\":1408,\"shared_expert_intermediate_size\":5632,"
        "\"hidden_act\":\"silu\"}");
    c = mm_model_get_config(m);
    CHECK(c && c->family == MM_MODEL_QWEN2_MOE && c->router == MM_ROUTER_SOFTMAX_TOPK);
    CHECK(c && c->shared_intermediate_size == 5632 && c->decoder_sparse_step == 1);
    CHECK_OK(mm_model_check_layer(m, 0, &err), &err);
    mm_model_close(m);

    m = open_ok(
        "{\"model_type\":\"qwen3_moe\",\"hidden_size\":2048,\"num_hidden_layers\":48,\"num_experts\":128,"
        "\"num_experts_per_tok\":8,\"moe_intermediate_size\":768,\"norm_topk_prob\":true,"
        "\"decoder_sparse_step\":3,\"mlp_only_layers\":[5]}");
    c = mm_model_get_config(m);
    CHECK(c && c->router == MM_ROUTER_SOFTMAX_TOPK_RENORM && c->shared_intermediate_size == 0);
    CHECK_OK(mm_model_check_layer(m, 2, &err), &err);
    CHECK_OK(mm_model_check_layer(m, 8, &err), &err);
    expect_layer_rejected(m, 3, "layer 3 is a dense MLP layer, not MoE (config.json decoder_sparse_step = 3");
    expect_layer_rejected(m, 5, "mlp_only_layers lists it");
    mm_model_close(m);

    /* a qwen3_moe config re-saved by recent transformers may name E num_local_experts */
    m = open_ok(
        "{\"model_type\":\"qwen3_moe\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_local_experts\":16,"
        "\"num_experts_per_tok\":2,\"moe_intermediate_size\":32}");
    c = mm_model_get_config(m);
    CHECK(c && c->num_experts == 16);
    mm_model_close(m);
}

static void test_broken(void) {
    open_fails("{\"hidden_size\":4}", "config.json: key \"model_type\" is missing");
    open_fails("{\"model_type\":\"llama\"}", "model_type \"llama\" is not a supported family");
    open_fails("{\"model_type\":\"mixtral\",\"hidden_size\":\"4096\"}",
               "\"hidden_size\" is a string, must be an integer");
    open_fails(
        "{\"model_type\":\"mixtral\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_experts_per_tok\":2,"
        "\"num_experts\":8,\"intermediate_size\":32}",
        "key \"num_local_experts\" is missing");
    open_fails(
        "{\"model_type\":\"qwen3_moe\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_experts_per_tok\":9,"
        "\"num_experts\":8,\"moe_intermediate_size\":32}",
        "num_experts_per_tok = 9 exceeds the 8 experts");
    open_fails(
        "{\"model_type\":\"qwen3_moe\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_experts_per_tok\":2,"
        "\"num_experts\":8,\"moe_intermediate_size\":32,\"norm_topk_prob\":1}",
        "\"norm_topk_prob\" is a number, must be true or false");
    open_fails(
        "{\"model_type\":\"qwen3_moe\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_experts_per_tok\":2,"
        "\"num_experts\":8,\"moe_intermediate_size\":32,\"decoder_sparse_step\":0}",
        "\"decoder_sparse_step\" is below the minimum 1");
    open_fails(
        "{\"model_type\":\"qwen3_moe\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_experts_per_tok\":2,"
        "\"num_experts\":8,\"moe_intermediate_size\":32,\"mlp_only_layers\":[1,\"x\"]}",
        "\"mlp_only_layers\"[1]");
    const char *ok = "{\"model_type\":\"qwen3_moe\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                     "\"num_experts_per_tok\":2,\"num_experts\":8,\"moe_intermediate_size\":32}";
    put("model.safetensors.index.json", "{\"weight_map\":{\"a\":\"../secret.safetensors\"}}");
    open_fails(ok, "weight_map \"a\" must name a file of the folder");
    put("model.safetensors.index.json", "{\"metadata\":{}}");
    open_fails(ok, "model.safetensors.index.json: key \"weight_map\" is missing");
    drop("model.safetensors.index.json");
    drop("model.safetensors");
    open_fails(ok, "neither model.safetensors nor model.safetensors.index.json is there");
    drop("config.json");
    mm_model *m = NULL;
    mm_error err;
    CHECK_STATUS(mm_model_open(dir, &m, &err), MM_ERR_INVALID_FILE, &err);
    CHECK_STR_CONTAINS(err.message, "config.json: cannot open");
}

/* deepseek_v3 and gpt_oss: the published configs' keys, transformers' defaults, the dense first layers,
 * the quantization_config and the broken keys. */
static void test_quant_families(void) {
    mm_error err;
    put("model.safetensors", "");
    mm_model *m =
        open_ok("{\"model_type\":\"deepseek_v3\",\"hidden_size\":7168,\"num_hidden_layers\":61,\"n_routed_"
                "experts\":256,"
                "\"num_experts_per_tok\":8,\"moe_intermediate_size\":2048,\"n_shared_experts\":1,"
                "\"first_k_dense_replace\":3,\"moe_layer_freq\":1,\"n_group\":8,\"topk_group\":4,\"norm_topk_"
                "prob\":true,"
                "\"routed_scaling_factor\":2.5,\"scoring_func\":\"sigmoid\",\"topk_method\":\"noaux_tc\","
                "\"quantization_config\":{\"activation_scheme\":\"dynamic\",\"fmt\":\"e4m3\",\"quant_"
                "method\":\"fp8\","
                "\"weight_block_size\":[128,128]}}");
    const mm_model_config *c = mm_model_get_config(m);
    CHECK(c && c->family == MM_MODEL_DEEPSEEK_V3 && c->num_experts == 256 && c->topk == 8);
    CHECK(c && c->moe_intermediate_size == 2048 && c->shared_intermediate_size == 2048);
    CHECK(c && c->router == MM_ROUTER_SIGMOID_GROUP_TOPK && c->n_group == 8 && c->topk_group == 4);
    CHECK(c && c->norm_topk_prob == 1 && c->routed_scaling_factor == 2.5f);
    CHECK(c && c->weight_dtype == MM_DTYPE_FP8_E4M3FN && c->block_n == 128 && c->block_k == 128);
    expect_layer_rejected(m, 2,
                          "layer 2 is a dense MLP layer, not MoE (config.json first_k_dense_replace = 3)");
    CHECK_OK(mm_model_check_layer(m, 3, &err), &err);
    CHECK_OK(mm_model_check_layer(m, 60, &err), &err);
    mm_model_close(m);
    /* only the sizes: transformers' defaults for the rest, BF16 without quantization_config */
    m = open_ok(
        "{\"model_type\":\"deepseek_v3\",\"hidden_size\":64,\"num_hidden_layers\":4,\"n_routed_experts\":16,"
        "\"num_experts_per_tok\":2,\"moe_intermediate_size\":32,\"moe_layer_freq\":2}");
    c = mm_model_get_config(m);
    CHECK(c && c->n_shared_experts == 1 && c->first_k_dense_replace == 3 && c->n_group == 8 &&
          c->topk_group == 4);
    CHECK(c && c->norm_topk_prob == 1 && c->routed_scaling_factor == 2.5f &&
          c->weight_dtype == MM_DTYPE_BF16);
    expect_layer_rejected(m, 3, "layer 3 is a dense MLP layer, not MoE (config.json moe_layer_freq = 2)");
    mm_model_close(m);
    m = open_ok(
        "{\"model_type\":\"gpt_oss\",\"hidden_size\":2880,\"num_hidden_layers\":24,\"num_local_experts\":32,"
        "\"num_experts_per_tok\":4,\"intermediate_size\":2880,\"swiglu_limit\":7.0,"
        "\"quantization_config\":{\"quant_method\":\"mxfp4\"}}");
    c = mm_model_get_config(m);
    CHECK(c && c->family == MM_MODEL_GPT_OSS && c->num_experts == 32 && c->topk == 4);
    CHECK(c && c->router == MM_ROUTER_TOPK_SOFTMAX && c->swiglu_limit == 7.0f &&
          c->weight_dtype == MM_DTYPE_FP4_E2M1);
    CHECK_OK(mm_model_check_layer(m, 0, &err), &err);
    mm_model_close(m);
    static const char ds[] =
        "{\"model_type\":\"deepseek_v3\",\"hidden_size\":64,\"num_hidden_layers\":4,"
        "\"n_routed_experts\":16,\"num_experts_per_tok\":2,\"moe_intermediate_size\":32,";
    char text[512];
    snprintf(text, sizeof text,
             "%s\"quantization_config\":{\"quant_method\":\"fp8\",\"weight_block_size\":[128]}}", ds);
    open_fails(text,
               "quantization_config: \"weight_block_size\" must be [block_n, block_k] of integers >= 1");
    snprintf(text, sizeof text, "%s\"quantization_config\":{\"quant_method\":\"awq\"}}", ds);
    open_fails(text, "quantization_config: \"quant_method\" must be \"fp8\"");
    snprintf(text, sizeof text, "%s\"topk_method\":\"greedy\"}", ds);
    open_fails(text, "config.json: \"topk_method\" must be \"noaux_tc\"");
    open_fails(
        "{\"model_type\":\"deepseek_v3\",\"hidden_size\":64,\"num_hidden_layers\":4,\"n_routed_experts\":16,"
        "\"num_experts_per_tok\":5,\"moe_intermediate_size\":32,\"n_group\":4,\"topk_group\":1}",
        "num_experts_per_tok = 5 exceeds the 4 experts of topk_group groups");
    snprintf(text, sizeof text, "%s\"routed_scaling_factor\":\"2.5\"}", ds);
    open_fails(text, "config.json: \"routed_scaling_factor\" is a string, must be a number");
    open_fails(
        "{\"model_type\":\"gpt_oss\",\"hidden_size\":100,\"num_hidden_layers\":2,\"num_local_experts\":4,"
        "\"num_experts_per_tok\":2,\"intermediate_size\":64,\"quantization_config\":{\"quant_method\":"
        "\"mxfp4\"}}",
        "hidden_size = 100 and intermediate_size = 64 must be multiples of 32");
}

int main(void) {
    if (!mm_test_make_temp_dir(dir, sizeof dir, "megamoe_model_config")) return 1;
    test_families();
    test_broken();
    test_quant_families();
    drop("config.json");
    drop("model.safetensors");
    drop("model.safetensors.index.json");
    rmdir(dir);
    return mm_test_finish("test_model_config");
}
