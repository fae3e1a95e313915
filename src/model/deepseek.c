/* SPDX-License-Identifier: Apache-2.0 */
/* model/deepseek.c: the deepseek_v3 family (DeepSeek-V3 / R1; transformers DeepseekV3MoE,
 * docs/models.md): config keys, the sigmoid group-limited router with its correction bias, routed
 * experts in BF16 or FP8 E4M3 with F32 block scales (weight_scale_inv), and the shared experts
 * (one MLP of I * n_shared_experts channels, ungated), run as n_shared_experts MegaMoE shared experts
 * of I channels each: the MLP's channels are independent, so splitting them changes only the order of
 * GEMM2's F32 sum. FP8 experts run natively in MegaMoE's A16W8-FP8 scenario, or dequantized to BF16
 * on load (options.dequantize_to_bf16) by the same element rule; the shared experts are always
 * dequantized (one expert's worth of memory, and the same bits by that rule). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/family_keys.h"

mm_status mm_model_read_deepseek_config(mm_model_config *c, const mm_json_value *root, mm_error *err) {
    mm_status st;
    const int64_t big = (int64_t)1 << 40;
    int64_t bn = 0, bk = 0;
    /* defaults: transformers' DeepseekV3Config (the published configs set every one of them) */
    if ((st = mm_model_config_string_is(root, "config.json", "hidden_act", "silu", 0, err)) ||
        (st = mm_model_config_string_is(root, "config.json", "scoring_func", "sigmoid", 0, err)) ||
        (st = mm_model_config_string_is(root, "config.json", "topk_method", "noaux_tc", 0, err)) ||
        (st = mm_model_config_int(root, "hidden_size", 0, 0, 1, big, &c->hidden_size, err)) ||
        (st = mm_model_config_int(root, "num_hidden_layers", 0, 0, 1, 1 << 20, &c->num_hidden_layers, err)) ||
        (st = mm_model_config_int(root, "n_routed_experts", 0, 0, 1, 1 << 20, &c->num_experts, err)) ||
        (st = mm_model_config_int(root, "num_experts_per_tok", 0, 0, 1, 1 << 20, &c->topk, err)) ||
        (st = mm_model_config_int(root, "moe_intermediate_size", 0, 0, 2, big, &c->moe_intermediate_size,
                                  err)) ||
        (st = mm_model_config_int(root, "n_shared_experts", 1, 1, 0, MM_MEGA_MOE_MAX_SHARED_EXPERTS,
                                  &c->n_shared_experts, err)) ||
        (st = mm_model_config_int(root, "first_k_dense_replace", 1, 3, 0, 1 << 20, &c->first_k_dense_replace,
                                  err)) ||
        (st = mm_model_config_int(root, "moe_layer_freq", 1, 1, 1, 1 << 20, &c->moe_layer_freq, err)) ||
        (st = mm_model_config_int(root, "n_group", 1, 8, 1, 1 << 20, &c->n_group, err)) ||
        (st = mm_model_config_int(root, "topk_group", 1, 4, 1, 1 << 20, &c->topk_group, err)) ||
        (st = mm_model_config_bool(root, "norm_topk_prob", 1, &c->norm_topk_prob, err)) ||
        (st = mm_model_config_real(root, "routed_scaling_factor", 2.5, 1e-30, 1e30, &c->routed_scaling_factor,
                                   err)))
        return st;
    c->router = MM_ROUTER_SIGMOID_GROUP_TOPK;
    c->shared_intermediate_size = c->moe_intermediate_size * c->n_shared_experts;
    int64_t per = c->num_experts % c->n_group == 0 ? c->num_experts / c->n_group : 0;
    if (per < 2)
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "config.json: n_group = %lld must divide n_routed_experts = %lld into groups of at least 2",
            (long long)c->n_group, (long long)c->num_experts);
    if (c->topk_group > c->n_group)
        return mm_fail(err, MM_ERR_INVALID_FILE, "config.json: topk_group = %lld exceeds n_group = %lld",
                       (long long)c->topk_group, (long long)c->n_group);
    if (c->topk > c->topk_group * per)
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "config.json: num_experts_per_tok = %lld exceeds the %lld experts of topk_group groups",
            (long long)c->topk, (long long)(c->topk_group * per));
    const mm_json_value *q = mm_json_object_get(root, "quantization_config");
    if (!q || q->type == MM_JSON_NULL) return MM_OK;
    static const char where[] = "config.json quantization_config";
    if ((st = mm_model_config_string_is(q, where, "quant_method", "fp8", 1, err)) ||
        (st = mm_model_config_string_is(q, where, "fmt", "e4m3", 0, err)))
        return st;
    const mm_json_value *b = mm_json_object_get(q, "weight_block_size");
    char why[96];
    if (!b) {
        bn = bk = 128; /* transformers' FineGrainedFP8Config default */
    } else if (b->type != MM_JSON_ARRAY || b->u.array.count != 2 ||
               !mm_json_number_to_int64(b->u.array.items[0], 1, 1 << 20, &bn, why, sizeof why) ||
               !mm_json_number_to_int64(b->u.array.items[1], 1, 1 << 20, &bk, why, sizeof why)) {
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "%s: \"weight_block_size\" must be [block_n, block_k] of integers >= 1", where);
    }
    c->weight_dtype = MM_DTYPE_FP8_E4M3FN;
    c->block_n = bn;
    c->block_k = bk;
    return MM_OK;
}

static int64_t cdiv(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/* prefix + "weight" as BF16 (rows, cols) into dst: copied from a BF16 checkpoint, dequantized by the
 * rule of dequant.c from an FP8 one (with prefix + "weight_scale_inv"). */
static mm_status weight_bf16(mm_model_files *files, const mm_model_config *c, const char *prefix,
                             int64_t rows, int64_t cols, const char *dims, uint16_t *dst, mm_error *err) {
    char name[200], sname[200];
    snprintf(name, sizeof name, "%sweight", prefix);
    mm_tensor w, s;
    int64_t shape[2] = {rows, cols};
    if (c->weight_dtype == MM_DTYPE_BF16) {
        mm_status st = mm_model_files_tensor(files, name, rows, cols, dims, &w, err);
        if (!st) memcpy(dst, w.data, (size_t)(rows * cols) * sizeof *dst);
        return st;
    }
    snprintf(sname, sizeof sname, "%sweight_scale_inv", prefix);
    int64_t sshape[2] = {cdiv(rows, c->block_n), cdiv(cols, c->block_k)};
    mm_status st =
        mm_model_files_get(files, name, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_INVALID, 2, shape, dims, &w, err);
    if (!st)
        st = mm_model_files_get(files, sname, MM_DTYPE_F32, MM_DTYPE_INVALID, 2, sshape,
                                "(ceil(rows / weight_block_size[0]), ceil(cols / weight_block_size[1]))", &s,
                                err);
    if (!st) mm_model_dequant_fp8_block(w.data, rows, cols, s.data, c->block_n, c->block_k, dst);
    return st;
}

/* The shared MLP (I_s = I * n_shared_experts) as n_shared_experts experts of I channels: expert s takes
 * gate/up rows and down columns [s I, (s + 1) I). w1: (S, 2I, H) [gate; up], w2: (S, H, I). */
static mm_status load_shared(mm_model_files *files, const mm_model_config *c, int64_t layer, uint16_t *w1,
                             uint16_t *w2, mm_error *err) {
    int64_t h = c->hidden_size, i_n = c->moe_intermediate_size, s_n = c->n_shared_experts, is = i_n * s_n;
    uint16_t *g = malloc((size_t)(is * h) * 3 * sizeof *g);
    if (!g)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "layer %lld: out of memory for the shared experts",
                       (long long)layer);
    uint16_t *u = g + is * h, *d = u + is * h;
    char p[3][160];
    static const char *proj[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int k = 0; k < 3; k++)
        snprintf(p[k], sizeof p[k], "model.layers.%lld.mlp.shared_experts.%s.", (long long)layer, proj[k]);
    static const char in_dims[] = "(moe_intermediate_size * n_shared_experts, hidden_size)";
    mm_status st;
    if (!(st = weight_bf16(files, c, p[0], is, h, in_dims, g, err)) &&
        !(st = weight_bf16(files, c, p[1], is, h, in_dims, u, err)) &&
        !(st = weight_bf16(files, c, p[2], h, is, "(hidden_size, moe_intermediate_size * n_shared_experts)",
                           d, err)))
        for (int64_t s = 0; s < s_n; s++) {
            memcpy(w1 + s * 2 * i_n * h, g + s * i_n * h, (size_t)(i_n * h) * sizeof *w1);
            memcpy(w1 + s * 2 * i_n * h + i_n * h, u + s * i_n * h, (size_t)(i_n * h) * sizeof *w1);
            for (int64_t r = 0; r < h; r++)
                memcpy(w2 + s * h * i_n + r * i_n, d + r * is + s * i_n, (size_t)i_n * sizeof *w2);
        }
    free(g);
    return st;
}

/* Native FP8: expert e's [gate; up] codes (2I, H) and their scales stacked the same way (gate's block
 * rows then up's: one block grid over 2I rows only when I is a multiple of block_n). */
static mm_status routed_fp8(mm_model_files *files, const mm_model_config *c, const char pre[3][160],
                            uint8_t *w1, float *s1, mm_tensor *w2, mm_tensor *s2, mm_error *err) {
    int64_t h = c->hidden_size, i_n = c->moe_intermediate_size, bn = c->block_n, bk = c->block_k;
    int64_t in_shape[2] = {i_n, h}, down_shape[2] = {h, i_n}, in_s[2] = {i_n / bn, cdiv(h, bk)},
            down_s[2] = {cdiv(h, bn), cdiv(i_n, bk)};
    static const char sdims[] = "(ceil(rows / weight_block_size[0]), ceil(cols / weight_block_size[1]))";
    mm_status st = MM_OK;
    for (int k = 0; k < 2 && !st; k++) {
        char name[200];
        mm_tensor w, s;
        snprintf(name, sizeof name, "%.159sweight", pre[k]);
        if ((st = mm_model_files_get(files, name, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_INVALID, 2, in_shape,
                                     "(moe_intermediate_size, hidden_size)", &w, err)))
            break;
        snprintf(name, sizeof name, "%.159sweight_scale_inv", pre[k]);
        if ((st = mm_model_files_get(files, name, MM_DTYPE_F32, MM_DTYPE_INVALID, 2, in_s, sdims, &s, err)))
            break;
        memcpy(w1 + k * i_n * h, w.data, (size_t)(i_n * h));
        memcpy(s1 + k * in_s[0] * in_s[1], s.data, (size_t)(in_s[0] * in_s[1]) * sizeof *s1);
    }
    char name[200];
    snprintf(name, sizeof name, "%.159sweight", pre[2]);
    if (!st)
        st = mm_model_files_get(files, name, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_INVALID, 2, down_shape,
                                "(hidden_size, moe_intermediate_size)", w2, err);
    snprintf(name, sizeof name, "%.159sweight_scale_inv", pre[2]);
    if (!st) st = mm_model_files_get(files, name, MM_DTYPE_F32, MM_DTYPE_INVALID, 2, down_s, sdims, s2, err);
    return st;
}

mm_status mm_model_load_deepseek(mm_moe_layer *l, mm_model_files *files, int64_t layer, mm_error *err) {
    const mm_model_config *c = &l->config;
    int64_t h = c->hidden_size, i_n = c->moe_intermediate_size, count = l->local_experts;
    int native = c->weight_dtype == MM_DTYPE_FP8_E4M3FN && !l->options.dequantize_to_bf16;
    if (native && i_n % c->block_n != 0)
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "moe_intermediate_size = %lld is not a multiple of weight_block_size[0] = %lld: the FP8 "
            "experts' stacked gate/up scales need it (run with --weights bf16)",
            (long long)i_n, (long long)c->block_n);
    char name[200], bname[200];
    snprintf(name, sizeof name, "model.layers.%lld.mlp.gate.weight", (long long)layer);
    snprintf(bname, sizeof bname, "model.layers.%lld.mlp.gate.e_score_correction_bias", (long long)layer);
    mm_status st = mm_model_load_router(l, files, name, bname, "n_routed_experts", err);
    if (st) return st;
    l->router.n_group = c->n_group;
    l->router.topk_group = c->topk_group;
    l->router.normalize = c->norm_topk_prob;
    l->router.scaling = c->routed_scaling_factor;

    size_t per = (size_t)(2 * i_n * h), s_n = (size_t)c->n_shared_experts;
    int64_t s1_n = native ? 2 * (i_n / c->block_n) * cdiv(h, c->block_k) : 0;
    void *w1 = malloc((size_t)count * per * (native ? 1 : 2) + 1);
    uint16_t *w2 = native ? NULL : malloc((size_t)count * per + 1);
    float *s1 = native ? malloc((size_t)(count * s1_n) * sizeof *s1) : NULL;
    uint16_t *sh1 = malloc(s_n * per * 2 + 1), *sh2 = malloc(s_n * per + 1);
    mm_tensor *lists = calloc((size_t)(6 * count + 2 * s_n + 1), sizeof *lists);
    if (!w1 || (!native && !w2) || (native && !s1) || !sh1 || !sh2 || !lists)
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "layer %lld: out of memory for %lld experts' weights",
                     (long long)layer, (long long)count);
    mm_tensor *l1 = lists, *l2 = l1 + count, *ls1 = l2 + count, *ls2 = ls1 + count, *sl1 = ls2 + count,
              *sl2 = sl1 + s_n;
    int64_t w1_shape[2] = {2 * i_n, h}, w2_shape[2] = {h, i_n},
            s1_shape[2] = {2 * (i_n / (c->block_n ? c->block_n : 1)), cdiv(h, c->block_k ? c->block_k : 1)};
    for (int64_t j = 0; j < count && !st; j++) {
        int64_t e = (int64_t)l->rank * count + j;
        char pre[3][160];
        static const char *proj[3] = {"gate_proj", "up_proj", "down_proj"};
        for (int k = 0; k < 3; k++)
            snprintf(pre[k], sizeof pre[k], "model.layers.%lld.mlp.experts.%lld.%s.", (long long)layer,
                     (long long)e, proj[k]);
        if (native) {
            uint8_t *dst = (uint8_t *)w1 + (size_t)j * per;
            st = routed_fp8(files, c, pre, dst, s1 + j * s1_n, &l2[j], &ls2[j], err);
            l1[j] = mm_tensor_make(MM_DTYPE_FP8_E4M3FN, 2, w1_shape, dst);
            ls1[j] = mm_tensor_make(MM_DTYPE_F32, 2, s1_shape, s1 + j * s1_n);
            continue;
        }
        uint16_t *dst = (uint16_t *)w1 + (size_t)j * per, *down = w2 + (size_t)j * per / 2;
        static const char in_dims[] = "(moe_intermediate_size, hidden_size)";
        if ((st = weight_bf16(files, c, pre[0], i_n, h, in_dims, dst, err)) ||
            (st = weight_bf16(files, c, pre[1], i_n, h, in_dims, dst + per / 2, err)) ||
            (st = weight_bf16(files, c, pre[2], h, i_n, "(hidden_size, moe_intermediate_size)", down, err)))
            break;
        l1[j] = mm_tensor_make(MM_DTYPE_BF16, 2, w1_shape, dst);
        l2[j] = mm_tensor_make(MM_DTYPE_BF16, 2, w2_shape, down);
    }
    if (!st && s_n) st = load_shared(files, c, layer, sh1, sh2, err);
    if (!st) {
        for (size_t s = 0; s < s_n; s++) {
            sl1[s] = mm_tensor_make(MM_DTYPE_BF16, 2, w1_shape, sh1 + s * per);
            sl2[s] = mm_tensor_make(MM_DTYPE_BF16, 2, w2_shape, sh2 + s * per / 2);
        }
        mm_mega_moe_expert_weights routed =
            mm_model_expert_lists(count, l1, l2, native ? ls1 : NULL, native ? ls2 : NULL);
        if (native) {
            routed.scale_block_n = c->block_n;
            routed.scale_block_k = c->block_k;
        }
        mm_mega_moe_expert_weights shared =
            mm_model_expert_lists((int64_t)s_n, s_n ? sl1 : NULL, s_n ? sl2 : NULL, NULL, NULL);
        st = mm_mega_moe_weights_create(l->buffer, &routed, s_n ? &shared : NULL, &l->weights, err);
    }
    free(w1);
    free(w2);
    free(s1);
    free(sh1);
    free(sh2);
    free(lists);
    return st;
}
