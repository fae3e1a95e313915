/* SPDX-License-Identifier: Apache-2.0 */
/* model/config.c: opening a Hugging Face checkpoint folder: config.json's keys per family, the tensor
 * index of a sharded checkpoint, and which layers are sparse (the rule of the transformers decoder
 * layers; docs/models.md). No tensor data is read here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/free_all.h"
#include "io/io_util.h"
#include "io/json.h"
#include "model/model_internal.h"

const char *mm_model_family_name(mm_model_family family) {
    switch (family) {
    case MM_MODEL_MIXTRAL: return "mixtral";
    case MM_MODEL_QWEN3_MOE: return "qwen3_moe";
    case MM_MODEL_QWEN2_MOE: return "qwen2_moe";
    case MM_MODEL_DEEPSEEK_V3: return "deepseek_v3";
    case MM_MODEL_GPT_OSS: return "gpt_oss";
    }
    return "invalid";
}

/* Reads dir/name whole; a missing file is MM_ERR_INVALID_FILE (a checkpoint without it is broken). */
static mm_status read_text(const char *dir, const char *name, char **text, size_t *len, mm_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        char why[128];
        return mm_fail(err, errno == ENOENT ? MM_ERR_INVALID_FILE : MM_ERR_IO, "%s: cannot open: %s", path,
                       mm_io_errno_text(errno, why, sizeof why));
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *bigger = cap < (size_t)1 << 30 ? realloc(buf, cap * 2) : NULL;
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int failed = ferror(f);
    fclose(f);
    if (!buf) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s: out of memory (or larger than 1 GiB)", path);
    if (failed) {
        free(buf);
        return mm_fail(err, MM_ERR_IO, "%s: read error", path);
    }
    *text = buf;
    *len = n;
    return MM_OK;
}

/* An integer key in [min, max]; absent: def when has_def, else an error naming the key. */
static mm_status get_int(const mm_json_value *root, const char *key, int has_def, int64_t def, int64_t min,
                         int64_t max, int64_t *out, mm_error *err) {
    const mm_json_value *v = mm_json_object_get(root, key);
    if (!v) {
        if (has_def) {
            *out = def;
            return MM_OK;
        }
        return mm_fail(err, MM_ERR_INVALID_FILE, "config.json: key \"%s\" is missing", key);
    }
    char why[96];
    if (v->type != MM_JSON_NUMBER)
        return mm_fail(err, MM_ERR_INVALID_FILE, "config.json: \"%s\" is %s, must be an integer", key,
                       mm_json_type_phrase(v->type));
    if (!mm_json_number_to_int64(v, min, max, out, why, sizeof why))
        return mm_fail(err, MM_ERR_INVALID_FILE, "config.json: \"%s\" %s", key, why);
    return MM_OK;
}

static mm_status read_family(const mm_json_value *root, mm_model_family *family, mm_error *err) {
    const mm_json_value *v = mm_json_object_get(root, "model_type");
    if (!v) return mm_fail(err, MM_ERR_INVALID_FILE, "config.json: key \"model_type\" is missing");
    if (v->type != MM_JSON_STRING)
        return mm_fail(err, MM_ERR_INVALID_FILE, "config.json: \"model_type\" is %s, must be a string",
                       mm_json_type_phrase(v->type));
    for (int f = MM_MODEL_MIXTRAL; f <= MM_MODEL_GPT_OSS; f++)
        if (strcmp(v->u.string.chars, mm_model_family_name((mm_model_family)f)) == 0) {
            *family = (mm_model_family)f;
            return MM_OK;
        }
    char q[MM_IO_QUOTE_BUF];
    return mm_fail(err, MM_ERR_INVALID_FILE,
                   "config.json: model_type \"%s\" is not a supported family (mixtral, qwen3_moe, qwen2_moe, "
                   "deepseek_v3, gpt_oss)",
                   mm_io_quote(q, sizeof q, v->u.string.chars, v->u.string.len));
}

/* The keys that would change what the layer computes and that megamoe does not implement. */
static mm_status check_unsupported(const mm_json_value *root, mm_error *err) {
    const mm_json_value *v = mm_json_object_get(root, "hidden_act");
    if (v && (v->type != MM_JSON_STRING || strcmp(v->u.string.chars, "silu") != 0))
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "config.json: \"hidden_act\" must be \"silu\" (the experts run SwiGLU with silu)");
    return MM_OK;
}

static mm_status read_config(mm_model *m, const mm_json_value *root, mm_error *err) {
    if (root->type != MM_JSON_OBJECT)
        return mm_fail(err, MM_ERR_INVALID_FILE, "config.json is not a JSON object");
    mm_model_config *c = &m->config;
    mm_status st;
    const int64_t big = (int64_t)1 << 40;
    if ((st = read_family(root, &c->family, err))) return st;
    c->n_group = c->topk_group = c->moe_layer_freq = c->decoder_sparse_step = 1;
    c->routed_scaling_factor = 1.0f;
    c->weight_dtype = MM_DTYPE_BF16;
    if (c->family == MM_MODEL_DEEPSEEK_V3) return mm_model_read_deepseek_config(c, root, err);
    if (c->family == MM_MODEL_GPT_OSS) return mm_model_read_gpt_oss_config(c, root, err);
    if ((st = check_unsupported(root, err)) || (st = mm_model_quant_read(root, &m->quant, err)) ||
        (st = get_int(root, "hidden_size", 0, 0, 1, big, &c->hidden_size, err)) ||
        (st = get_int(root, "num_hidden_layers", 0, 0, 1, 1 << 20, &c->num_hidden_layers, err)) ||
        (st = get_int(root, "num_experts_per_tok", 0, 0, 1, 1 << 20, &c->topk, err)))
        return st;
    int qwen = c->family != MM_MODEL_MIXTRAL;
    /* Recent transformers map a Qwen3-MoE config's num_experts to num_local_experts (attribute_map), so a
     * re-saved config may carry either; the published ones say num_experts. */
    const char *e_key =
        qwen && (mm_json_object_get(root, "num_experts") || !mm_json_object_get(root, "num_local_experts"))
            ? "num_experts"
            : "num_local_experts";
    if ((st = get_int(root, e_key, 0, 0, 1, 1 << 20, &c->num_experts, err)) ||
        (st = get_int(root, qwen ? "moe_intermediate_size" : "intermediate_size", 0, 0, 2, big,
                      &c->moe_intermediate_size, err)))
        return st;
    if (c->topk > c->num_experts)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "config.json: num_experts_per_tok = %lld exceeds the %lld experts", (long long)c->topk,
                       (long long)c->num_experts);
    c->router = MM_ROUTER_SOFTMAX_TOPK_RENORM;
    c->decoder_sparse_step = 1;
    if (!qwen) return MM_OK;
    const mm_json_value *norm = mm_json_object_get(root, "norm_topk_prob");
    if (norm && norm->type != MM_JSON_BOOL)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "config.json: \"norm_topk_prob\" is %s, must be true or false",
                       mm_json_type_phrase(norm->type));
    /* transformers' default for both Qwen families is false */
    c->router = norm && norm->u.boolean ? MM_ROUTER_SOFTMAX_TOPK_RENORM : MM_ROUTER_SOFTMAX_TOPK;
    if ((st = get_int(root, "decoder_sparse_step", 1, 1, 1, 1 << 20, &c->decoder_sparse_step, err)))
        return st;
    if (c->family == MM_MODEL_QWEN2_MOE && (st = get_int(root, "shared_expert_intermediate_size", 0, 0, 2,
                                                         big, &c->shared_intermediate_size, err)))
        return st;
    const mm_json_value *only = mm_json_object_get(root, "mlp_only_layers");
    if (!only || only->type == MM_JSON_NULL) return MM_OK;
    if (only->type != MM_JSON_ARRAY)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "config.json: \"mlp_only_layers\" is %s, must be a list of layers",
                       mm_json_type_phrase(only->type));
    m->mlp_only_layers = calloc(only->u.array.count + 1, sizeof *m->mlp_only_layers);
    if (!m->mlp_only_layers) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "config.json: out of memory");
    for (size_t i = 0; i < only->u.array.count; i++) {
        char why[96];
        if (!mm_json_number_to_int64(only->u.array.items[i], 0, INT64_MAX, &m->mlp_only_layers[i], why,
                                     sizeof why))
            return mm_fail(err, MM_ERR_INVALID_FILE, "config.json: \"mlp_only_layers\"[%zu] %s", i, why);
    }
    m->mlp_only_count = only->u.array.count;
    return MM_OK;
}

static int compare_entries(const void *a, const void *b) {
    return strcmp(((const mm_model_entry *)a)->name, ((const mm_model_entry *)b)->name);
}

/* model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor name: shard file name}}. */
static mm_status read_index(mm_model *m, const char *text, size_t len, mm_error *err) {
    static const char what[] = "model.safetensors.index.json";
    mm_status st = mm_json_parse(text, len, &m->index_doc, err);
    if (st) return mm_error_prefix(err, "%s", what);
    const mm_json_value *map = mm_json_object_get(mm_json_doc_root(m->index_doc), "weight_map");
    if (!map) return mm_fail(err, MM_ERR_INVALID_FILE, "%s: key \"weight_map\" is missing", what);
    if (map->type != MM_JSON_OBJECT)
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s: \"weight_map\" is %s, must be an object", what,
                       mm_json_type_phrase(map->type));
    m->entries = calloc(map->u.object.count + 1, sizeof *m->entries);
    if (!m->entries) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    for (size_t i = 0; i < map->u.object.count; i++) {
        const mm_json_member *e = &map->u.object.members[i];
        const mm_json_value *v = e->value;
        char q[MM_IO_QUOTE_BUF];
        /* a file name in the folder: no path separator, not "." or "..", no NUL */
        if (v->type != MM_JSON_STRING || v->u.string.len == 0 ||
            strlen(v->u.string.chars) != v->u.string.len || strchr(v->u.string.chars, '/') ||
            strcmp(v->u.string.chars, ".") == 0 || strcmp(v->u.string.chars, "..") == 0)
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "%s: weight_map \"%s\" must name a file of the folder (a string without '/')",
                           what, mm_io_quote(q, sizeof q, e->key, e->key_len));
        m->entries[i].name = e->key;
        m->entries[i].file = v->u.string.chars;
    }
    m->entry_count = map->u.object.count;
    qsort(m->entries, m->entry_count, sizeof *m->entries, compare_entries);
    m->sharded = 1;
    return MM_OK;
}

mm_status mm_model_open(const char *dir, mm_model **out, mm_error *err) {
    if (!dir || !out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_model_open: dir or out is NULL");
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "model folder \"%s\" is not a directory", dir);
    mm_model *m = calloc(1, sizeof *m);
    if (!m || !(m->dir = strdup(dir))) {
        free(m);
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "mm_model_open: out of memory");
    }
    char *text = NULL;
    size_t len = 0;
    mm_json_doc *doc = NULL;
    mm_status st = read_text(dir, "config.json", &text, &len, err);
    if (!st && (st = mm_json_parse(text, len, &doc, err))) mm_error_prefix(err, "config.json");
    if (!st) st = read_config(m, mm_json_doc_root(doc), err);
    mm_json_doc_free(doc);
    free(text);
    text = NULL;
    if (!st) {
        char path[4096];
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        if (stat(path, &sb) == 0) {
            if (!(st = read_text(dir, "model.safetensors.index.json", &text, &len, err)))
                st = read_index(m, text, len, err);
            free(text);
        } else {
            snprintf(path, sizeof path, "%s/model.safetensors", dir);
            if (stat(path, &sb) != 0)
                st = mm_fail(err, MM_ERR_INVALID_FILE,
                             "%s: neither model.safetensors nor model.safetensors.index.json is there", dir);
        }
    }
    if (st) {
        mm_model_close(m);
        return st;
    }
    *out = m;
    return MM_OK;
}

void mm_model_close(mm_model *model) {
    if (!model) return;
    mm_json_doc_free(model->index_doc);
    MM_FREE_ALL(model->entries, model->mlp_only_layers, model->dir, model);
}

const mm_model_config *mm_model_get_config(const mm_model *model) {
    return model ? &model->config : NULL;
}

mm_status mm_model_check_layer(const mm_model *model, int64_t layer, mm_error *err) {
    if (!model) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_model_check_layer: model is NULL");
    const mm_model_config *c = &model->config;
    if (layer < 0 || layer >= c->num_hidden_layers)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "layer %lld is outside [0, %lld) (config.json num_hidden_layers)", (long long)layer,
                       (long long)c->num_hidden_layers);
    for (size_t i = 0; i < model->mlp_only_count; i++)
        if (model->mlp_only_layers[i] == layer)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "layer %lld is a dense MLP layer, not MoE (config.json mlp_only_layers lists it)",
                           (long long)layer);
    if (layer < c->first_k_dense_replace)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "layer %lld is a dense MLP layer, not MoE (config.json first_k_dense_replace = %lld)",
                       (long long)layer, (long long)c->first_k_dense_replace);
    if (c->family == MM_MODEL_DEEPSEEK_V3 && layer % c->moe_layer_freq != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "layer %lld is a dense MLP layer, not MoE (config.json moe_layer_freq = %lld)",
                       (long long)layer, (long long)c->moe_layer_freq);
    if ((layer + 1) % c->decoder_sparse_step != 0)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "layer %lld is a dense MLP layer, not MoE (config.json decoder_sparse_step = %lld: layer "
            "N is sparse when (N + 1) %% %lld == 0)",
            (long long)layer, (long long)c->decoder_sparse_step, (long long)c->decoder_sparse_step);
    return MM_OK;
}

mm_status mm_model_config_int(const mm_json_value *root, const char *key, int has_def, int64_t def,
                              int64_t min, int64_t max, int64_t *out, mm_error *err) {
    return get_int(root, key, has_def, def, min, max, out, err);
}
