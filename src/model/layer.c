/* SPDX-License-Identifier: Apache-2.0 */
/* model/layer.c: one MoE layer of a checkpoint on a communicator: load (router, this rank's experts, the
 * gated shared expert) into MegaMoE, and the forward call (router, MegaMoE, shared-expert gate).
 *
 * nn.Linear stores (out, in): gate_proj / up_proj are (I, H) and down_proj is (H, I), which is MegaMoE's
 * transposed layout (transpose_weight1/2 = 1) with weight1 = [gate; up] stacked along the 2I rows (the
 * gate first, docs/mega_moe.md). down_proj is used where it is mapped; gate and up are copied once into
 * the stacked form and freed after packing.
 *
 * The qwen2_moe shared expert has a per-token sigmoid gate that MegaMoE's shared experts lack. It runs
 * as a second MegaMoE of R "experts" (one copy per rank, K = 1): each token goes to its own rank's copy
 * with the weight sigmoid(x . w_g), which MegaMoE applies in F32 before its one BF16 rounding; the two
 * BF16 outputs are added in F32 and rounded once more (docs/models.md, numerics). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "megamoe/formats.h"
#include "megamoe/mega_moe.h"
#include "model/model_internal.h"

mm_mega_moe_expert_weights mm_model_expert_lists(int64_t count, const mm_tensor *w1, const mm_tensor *w2,
                                                 const mm_tensor *scales1, const mm_tensor *scales2) {
    return (mm_mega_moe_expert_weights){.count = count,
                                        .transpose_weight1 = 1,
                                        .transpose_weight2 = 1,
                                        .weight1_list = w1,
                                        .weight2_list = w2,
                                        .weight_scales1_list = scales1,
                                        .weight_scales2_list = scales2};
}

mm_status mm_model_copy_bf16(const mm_tensor *t, uint16_t **out, mm_error *err) {
    size_t n = (size_t)mm_tensor_numel(t);
    if (!(*out = malloc(n * sizeof **out))) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "layer: out of memory");
    memcpy(*out, t->data, n * sizeof **out);
    return MM_OK;
}

/* The names of a layer's tensors per family. */
static void expert_names(const mm_model_config *c, int64_t layer, int64_t e, char names[3][160]) {
    if (c->family == MM_MODEL_MIXTRAL) {
        static const char *w[3] = {"w1", "w3", "w2"}; /* gate, up, down */
        for (int i = 0; i < 3; i++)
            snprintf(names[i], 160, "model.layers.%lld.block_sparse_moe.experts.%lld.%s.weight",
                     (long long)layer, (long long)e, w[i]);
        return;
    }
    static const char *p[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int i = 0; i < 3; i++) {
        if (e < 0)
            snprintf(names[i], 160, "model.layers.%lld.mlp.shared_expert.%s.weight", (long long)layer, p[i]);
        else
            snprintf(names[i], 160, "model.layers.%lld.mlp.experts.%lld.%s.weight", (long long)layer,
                     (long long)e, p[i]);
    }
}

/* AWQ / GPTQ: the routed experts are quantized; the shared expert is when its gate_proj is. */
static mm_status load_quant_experts(mm_model_files *files, const mm_model_config *c, int64_t layer,
                                    int64_t first, int64_t count, int64_t inter, const char *i_key,
                                    int dequant, mm_mega_moe_buffer *buffer, mm_mega_moe_weights **out,
                                    mm_error *err) {
    char(*names)[3][160] = calloc((size_t)count, sizeof *names);
    if (!names) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "layer %lld: out of memory", (long long)layer);
    for (int64_t j = 0; j < count; j++) {
        expert_names(c, layer, first < 0 ? -1 : first + j, names[j]);
        for (int i = 0; i < 3; i++) names[j][i][strlen(names[j][i]) - strlen(".weight")] = 0;
    }
    mm_status st = mm_model_quant_experts_load(
        files, c->hidden_size, inter, count, (const char(*)[3][160])names, i_key, dequant, buffer, out, err);
    free(names);
    return st;
}

/* Fetches experts [first, first + count) (first = -1: the shared expert) and packs them for buffer. */
static mm_status load_experts(mm_model_files *files, const mm_model_config *c, int64_t layer, int64_t first,
                              int64_t count, int64_t inter, int dequant, mm_mega_moe_buffer *buffer,
                              mm_mega_moe_weights **out, mm_error *err) {
    int64_t h = c->hidden_size;
    const char *i_key = first < 0                       ? "shared_expert_intermediate_size"
                        : c->family == MM_MODEL_MIXTRAL ? "intermediate_size"
                                                        : "moe_intermediate_size";
    if (files->model->quant.method != MM_MODEL_QUANT_NONE) {
        char names[3][160];
        expert_names(c, layer, first < 0 ? -1 : first, names);
        snprintf(names[0] + strlen(names[0]) - strlen("weight"), 8, "qweight");
        if (first >= 0 || mm_model_files_has(files, names[0]))
            return load_quant_experts(files, c, layer, first, count, inter, i_key, dequant, buffer, out, err);
    }
    char in_dims[96], down_dims[96];
    snprintf(in_dims, sizeof in_dims, "(%s, hidden_size)", i_key);
    snprintf(down_dims, sizeof down_dims, "(hidden_size, %s)", i_key);
    size_t per = (size_t)(2 * inter * h);
    uint16_t *w1 = malloc((size_t)count * per * sizeof *w1);
    mm_tensor *w1_list = calloc((size_t)count, sizeof *w1_list),
              *w2_list = calloc((size_t)count, sizeof *w2_list);
    mm_status st = MM_OK;
    if (!w1 || !w1_list || !w2_list)
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "layer %lld: out of memory for %lld experts' weights",
                     (long long)layer, (long long)count);
    for (int64_t j = 0; j < count && !st; j++) {
        char names[3][160];
        expert_names(c, layer, first < 0 ? -1 : first + j, names);
        mm_tensor g, u;
        if ((st = mm_model_files_tensor(files, names[0], inter, h, in_dims, &g, err)) ||
            (st = mm_model_files_tensor(files, names[1], inter, h, in_dims, &u, err)) ||
            (st = mm_model_files_tensor(files, names[2], h, inter, down_dims, &w2_list[j], err)))
            break;
        uint16_t *dst = w1 + (size_t)j * per;
        memcpy(dst, g.data, per / 2 * sizeof *dst);           /* rows 0 .. I-1: gate */
        memcpy(dst + per / 2, u.data, per / 2 * sizeof *dst); /* rows I .. 2I-1: up */
        int64_t shape[2] = {2 * inter, h};
        w1_list[j] = mm_tensor_make(MM_DTYPE_BF16, 2, shape, dst);
    }
    if (!st) {
        mm_mega_moe_expert_weights routed = mm_model_expert_lists(count, w1_list, w2_list, NULL, NULL);
        st = mm_mega_moe_weights_create(buffer, &routed, NULL, out, err);
    }
    free(w1);
    free(w1_list);
    free(w2_list);
    return st;
}

/* Everything local to this rank: the router, its experts, the shared expert. */
static mm_status load_local(mm_moe_layer *l, const mm_model *model, int64_t layer, mm_error *err) {
    const mm_model_config *c = &l->config;
    mm_model_files files = {0};
    files.model = model;
    char name[160];
    mm_tensor t;
    const char *prefix = c->family == MM_MODEL_MIXTRAL ? "block_sparse_moe" : "mlp";
    snprintf(name, sizeof name, "model.layers.%lld.%s.gate.weight", (long long)layer, prefix);
    const char *e_dims =
        c->family == MM_MODEL_MIXTRAL ? "(num_local_experts, hidden_size)" : "(num_experts, hidden_size)";
    l->gate_dtype = MM_DTYPE_BF16;
    if (c->family == MM_MODEL_DEEPSEEK_V3 || c->family == MM_MODEL_GPT_OSS) {
        mm_status st = c->family == MM_MODEL_DEEPSEEK_V3 ? mm_model_load_deepseek(l, &files, layer, err)
                                                         : mm_model_load_gpt_oss(l, &files, layer, err);
        mm_model_files_close(&files);
        return st;
    }
    /* AWQ / GPTQ checkpoints keep the router (and the shared-expert gate) unquantized in F16 */
    static const mm_dtype bf16[] = {MM_DTYPE_BF16, MM_DTYPE_INVALID},
                          bf16_f16[] = {MM_DTYPE_BF16, MM_DTYPE_F16, MM_DTYPE_INVALID};
    const mm_dtype *gate_dtypes = model->quant.method != MM_MODEL_QUANT_NONE ? bf16_f16 : bf16;
    mm_status st =
        mm_model_files_tensor_of(&files, name, gate_dtypes, c->num_experts, c->hidden_size, e_dims, &t, err);
    if (!st) {
        l->gate_dtype = t.dtype;
        st = mm_model_copy_bf16(&t, &l->gate, err);
    }
    if (!st && c->family == MM_MODEL_QWEN2_MOE) {
        snprintf(name, sizeof name, "model.layers.%lld.mlp.shared_expert_gate.weight", (long long)layer);
        const mm_dtype same[] = {l->gate_dtype, MM_DTYPE_INVALID};
        st = mm_model_files_tensor_of(&files, name, same, 1, c->hidden_size, "(1, hidden_size)", &t, err);
        if (!st) st = mm_model_copy_bf16(&t, &l->shared_gate, err);
    }
    int dequant = l->options.dequantize_to_bf16;
    if (!st)
        st = load_experts(&files, c, layer, (int64_t)l->rank * l->local_experts, l->local_experts,
                          c->moe_intermediate_size, dequant, l->buffer, &l->weights, err);
    if (!st && c->family == MM_MODEL_QWEN2_MOE)
        st = load_experts(&files, c, layer, -1, 1, c->shared_intermediate_size, dequant, l->shared_buffer,
                          &l->shared_weights, err);
    mm_model_files_close(&files);
    return st;
}

mm_status mm_moe_layer_load(mm_comm *comm, const mm_model *model, int64_t layer, int64_t max_tokens_per_rank,
                            mm_moe_layer **out, mm_error *err) {
    return mm_moe_layer_load_with(comm, model, layer, max_tokens_per_rank, NULL, out, err);
}

mm_status mm_moe_layer_load_with(mm_comm *comm, const mm_model *model, int64_t layer,
                                 int64_t max_tokens_per_rank, const mm_moe_layer_options *opts,
                                 mm_moe_layer **out, mm_error *err) {
    if (!comm || !model || !out)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_moe_layer_load: comm, model or out is NULL");
    *out = NULL;
    /* Every check before the first collective is a function of arguments equal on all ranks. */
    mm_status st = mm_model_check_layer(model, layer, err);
    if (st) return st;
    if (max_tokens_per_rank < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "max_tokens_per_rank = %lld must be at least 1",
                       (long long)max_tokens_per_rank);
    const mm_model_config *c = mm_model_get_config(model);
    int size = mm_comm_size(comm);
    if (c->num_experts % size != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "the %lld experts (config.json %s) do not split evenly over %d ranks",
                       (long long)c->num_experts,
                       c->family == MM_MODEL_MIXTRAL || c->family == MM_MODEL_GPT_OSS ? "num_local_experts"
                       : c->family == MM_MODEL_DEEPSEEK_V3                            ? "n_routed_experts"
                                                                                      : "num_experts",
                       size);
    mm_moe_layer *l = calloc(1, sizeof *l);
    if (!l) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "mm_moe_layer_load: out of memory");
    l->comm = comm;
    if (opts) l->options = *opts;
    l->config = *c;
    l->rank = mm_comm_rank(comm);
    l->size = size;
    l->max_tokens = max_tokens_per_rank;
    l->local_experts = c->num_experts / size;
    l->router = mm_router_default_params(c->router);
    l->attrs = mm_mega_moe_default_attrs();
    mm_mega_moe_sizing sizing = {c->num_experts, max_tokens_per_rank,      c->topk,
                                 c->hidden_size, c->moe_intermediate_size, 0};
    st = mm_mega_moe_buffer_create(comm, &sizing, &l->buffer, err);
    if (!st && c->family == MM_MODEL_QWEN2_MOE) {
        mm_mega_moe_sizing shared = {size,           max_tokens_per_rank,         1,
                                     c->hidden_size, c->shared_intermediate_size, 0};
        st = mm_mega_moe_buffer_create(comm, &shared, &l->shared_buffer, err);
    }
    if (!st) {
        mm_error local;
        mm_error_clear(&local);
        mm_status ls = load_local(l, model, layer, &local);
        /* the messages name the tensor or file: passed on as written */
        st = mm_comm_agree_as_written(comm, ls, &local);
        if (st && err) *err = local;
    }
    if (st) {
        mm_moe_layer_free(l, NULL);
        return st;
    }
    *out = l;
    return MM_OK;
}

/* qwen2_moe: sigmoid(x . w_g) per token in F32 (products exact, summed in index order). */
static void shared_gate_weights(const mm_moe_layer *l, const uint16_t *x, int64_t t_n, float *g) {
    int64_t h = l->config.hidden_size;
    for (int64_t t = 0; t < t_n; t++) {
        float s = 0.0f;
        for (int64_t k = 0; k < h; k++)
            s += mm_bf16_to_f32(x[t * h + k]) * (l->gate_dtype == MM_DTYPE_F16
                                                     ? mm_f16_to_f32(l->shared_gate[k])
                                                     : mm_bf16_to_f32(l->shared_gate[k]));
        g[t] = 1.0f / (1.0f + expf(-s));
    }
}

static mm_status run_shared(mm_moe_layer *l, const mm_tensor *x, mm_tensor *y, mm_error *err) {
    int64_t t_n = x->shape[0], h = l->config.hidden_size;
    size_t n = (size_t)(t_n ? t_n : 1);
    int32_t *ids = malloc(n * sizeof *ids), *counts = malloc(sizeof *counts);
    float *g = malloc(n * sizeof *g);
    uint16_t *ys = malloc(n * (size_t)h * sizeof *ys);
    mm_status st = MM_OK;
    mm_error local;
    mm_error_clear(&local);
    if (!ids || !counts || !g || !ys) st = mm_fail(&local, MM_ERR_OUT_OF_MEMORY, "layer: out of memory");
    st = mm_comm_agree_as_written(l->comm, st, &local);
    if (st && err) *err = local;
    if (!st) {
        int64_t one[2] = {t_n, 1}, yshape[2] = {t_n, h}, cshape[1] = {1};
        for (int64_t t = 0; t < t_n; t++) ids[t] = l->rank;
        shared_gate_weights(l, x->data, t_n, g);
        mm_tensor tid = mm_tensor_make(MM_DTYPE_I32, 2, one, ids),
                  tw = mm_tensor_make(MM_DTYPE_F32, 2, one, g);
        mm_tensor ty = mm_tensor_make(MM_DTYPE_BF16, 2, yshape, ys);
        mm_tensor tc = mm_tensor_make(MM_DTYPE_I32, 1, cshape, counts);
        mm_mega_moe_attrs attrs = mm_mega_moe_default_attrs();
        mm_mega_moe_inputs in = {x, NULL, &tid, &tw, NULL};
        mm_mega_moe_outputs outs = {&ty, &tc};
        st = mm_mega_moe_run(l->shared_buffer, l->shared_weights, &attrs, &in, &outs, err);
    }
    if (!st) {
        uint16_t *yr = y->data;
        for (int64_t i = 0; i < t_n * h; i++)
            yr[i] = mm_f32_to_bf16(mm_bf16_to_f32(yr[i]) + mm_bf16_to_f32(ys[i]));
    }
    free(ids);
    free(counts);
    free(g);
    free(ys);
    return st;
}

static mm_status check_io(const mm_moe_layer *l, const mm_tensor *x, const mm_tensor *y, const mm_tensor *ids,
                          const mm_tensor *w, mm_error *err) {
    const mm_model_config *c = &l->config;
    if (!x || !y || !ids || !w)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "x, y, topk_ids or topk_weights is NULL");
    int64_t t = x->ndim == 2 ? x->shape[0] : -1;
    if (x->dtype != MM_DTYPE_BF16 || x->ndim != 2 || x->shape[1] != c->hidden_size)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "x must be (T, %lld) BF16 (hidden_size)",
                       (long long)c->hidden_size);
    if (t > l->max_tokens)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "x has %lld tokens, more than max_tokens_per_rank = %lld", (long long)t,
                       (long long)l->max_tokens);
    if (y->dtype != MM_DTYPE_BF16 || y->ndim != 2 || y->shape[0] != t || y->shape[1] != c->hidden_size)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "y must be (%lld, %lld) BF16", (long long)t,
                       (long long)c->hidden_size);
    if (ids->dtype != MM_DTYPE_I32 || ids->ndim != 2 || ids->shape[0] != t || ids->shape[1] != c->topk)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "topk_ids must be (%lld, %lld) I32", (long long)t,
                       (long long)c->topk);
    if (w->dtype != MM_DTYPE_F32 || w->ndim != 2 || w->shape[0] != t || w->shape[1] != c->topk)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "topk_weights must be (%lld, %lld) F32", (long long)t,
                       (long long)c->topk);
    return MM_OK;
}

mm_status mm_moe_layer_forward(mm_moe_layer *l, const mm_tensor *x, mm_tensor *y, mm_tensor *topk_ids,
                               mm_tensor *topk_weights, mm_error *err) {
    if (!l) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_moe_layer_forward: layer is NULL");
    const mm_model_config *c = &l->config;
    mm_status st = check_io(l, x, y, topk_ids, topk_weights, err);
    int64_t t_n = st ? 0 : x->shape[0];
    float *logits = malloc((size_t)(t_n ? t_n : 1) * (size_t)c->num_experts * sizeof *logits);
    int32_t *counts = malloc((size_t)l->local_experts * sizeof *counts);
    if (!st && (!logits || !counts))
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "layer: out of memory for the router");
    if (!st) {
        int64_t lshape[2] = {t_n, c->num_experts}, gshape[2] = {c->num_experts, c->hidden_size};
        mm_tensor tl = mm_tensor_make(MM_DTYPE_F32, 2, lshape, logits);
        mm_tensor tg = mm_tensor_make(l->gate_dtype, 2, gshape, l->gate);
        if (!(st = mm_router_logits(x, &tg, &tl, err)))
            st = mm_router_route(&l->router, &tl, topk_ids, topk_weights, err);
    }
    /* The MegaMoE calls are collective: agree on the local checks first, so that either every rank
     * calls them or none does. */
    mm_error local;
    mm_error_clear(&local);
    if (st && err) local = *err;
    st = mm_comm_agree_as_written(l->comm, st, &local);
    if (st) {
        if (err) *err = local;
    } else {
        int64_t cshape[1] = {l->local_experts};
        mm_tensor tc = mm_tensor_make(MM_DTYPE_I32, 1, cshape, counts);
        mm_mega_moe_inputs in = {x, NULL, topk_ids, topk_weights, NULL};
        mm_mega_moe_outputs outs = {y, &tc};
        st = mm_mega_moe_run(l->buffer, l->weights, &l->attrs, &in, &outs, err);
        if (!st && l->shared_buffer) st = run_shared(l, x, y, err);
    }
    free(logits);
    free(counts);
    return st;
}

int mm_moe_layer_call_count(const mm_moe_layer *l) {
    return !l ? 0 : l->shared_buffer ? 2 : 1;
}

mm_status mm_moe_layer_last_stats(const mm_moe_layer *l, mm_moe_layer_call call, mm_mega_moe_stats *stats,
                                  mm_error *err) {
    if (!l || !stats)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_moe_layer_last_stats: layer or stats is NULL");
    if (call == MM_MOE_LAYER_CALL_ROUTED) return mm_mega_moe_last_stats(l->buffer, stats, err);
    if (call != MM_MOE_LAYER_CALL_SHARED)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "mm_moe_layer_last_stats: call = %d must be MM_MOE_LAYER_CALL_ROUTED (0) or "
                       "MM_MOE_LAYER_CALL_SHARED (1)",
                       (int)call);
    if (!l->shared_buffer)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "mm_moe_layer_last_stats: call = 1 (MM_MOE_LAYER_CALL_SHARED), but family %s runs no "
                       "shared-expert call (only qwen2_moe does; mm_moe_layer_call_count is 1)",
                       mm_model_family_name(l->config.family));
    return mm_mega_moe_last_stats(l->shared_buffer, stats, err);
}

mm_status mm_moe_layer_free(mm_moe_layer *l, mm_error *err) {
    if (!l) return MM_OK;
    mm_mega_moe_weights_free(l->weights);
    mm_mega_moe_weights_free(l->shared_weights);
    mm_status st = mm_mega_moe_buffer_free(l->buffer, err);
    mm_status s2 = mm_mega_moe_buffer_free(l->shared_buffer, st ? NULL : err);
    free(l->gate);
    free(l->shared_gate);
    free(l->router_bias);
    free(l);
    return st ? st : s2;
}
