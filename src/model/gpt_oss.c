/* SPDX-License-Identifier: Apache-2.0 */
/* model/gpt_oss.c: the gpt_oss family (gpt-oss-20b / 120b; transformers GptOssMLP and
 * integrations/mxfp4.py, docs/models.md): config keys, the router with its bias (top-k of the logits,
 * softmax over the chosen), and the MXFP4 experts with their biases: gate_up_proj (2I, H) whose rows
 * alternate gate / up (even = gate), down_proj (H, I), both as (out, in) rows of 32-element groups (16
 * bytes, element 2m in the low nibble of byte m) with one E8M0 scale byte per group. The activation is
 * MegaMoE's swigluoai with [swiglu_limit, 1.702, 1.0]: gate clamped above, up clamped to +-limit,
 * (up + 1) * gate * sigmoid(1.702 gate). The experts run natively in MegaMoE's A16W4-MX scenario with
 * weight1_interleave, or dequantized to BF16 on load (rows de-interleaved into [gate; up]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/family_keys.h"

mm_status mm_model_read_gpt_oss_config(mm_model_config *c, const mm_json_value *root, mm_error *err) {
    mm_status st;
    const int64_t big = (int64_t)1 << 40;
    if ((st = mm_model_config_int(root, "hidden_size", 0, 0, 1, big, &c->hidden_size, err)) ||
        (st = mm_model_config_int(root, "num_hidden_layers", 0, 0, 1, 1 << 20, &c->num_hidden_layers, err)) ||
        (st = mm_model_config_int(root, "num_local_experts", 0, 0, 1, 1 << 20, &c->num_experts, err)) ||
        (st = mm_model_config_int(root, "num_experts_per_tok", 0, 0, 1, 1 << 20, &c->topk, err)) ||
        (st = mm_model_config_int(root, "intermediate_size", 0, 0, 2, big, &c->moe_intermediate_size, err)) ||
        (st = mm_model_config_real(root, "swiglu_limit", 7.0, 1e-30, 1e30, &c->swiglu_limit, err)))
        return st;
    if (c->topk > c->num_experts)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "config.json: num_experts_per_tok = %lld exceeds the %lld experts", (long long)c->topk,
                       (long long)c->num_experts);
    if (c->hidden_size % 32 != 0 || c->moe_intermediate_size % 32 != 0)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "config.json: hidden_size = %lld and intermediate_size = %lld must be multiples of 32 "
                       "(the MXFP4 groups)",
                       (long long)c->hidden_size, (long long)c->moe_intermediate_size);
    c->router = MM_ROUTER_TOPK_SOFTMAX;
    const mm_json_value *q = mm_json_object_get(root, "quantization_config");
    if (!q || q->type == MM_JSON_NULL)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "config.json: gpt_oss without quantization_config (BF16 experts) is not supported: "
                       "quant_method must be \"mxfp4\"");
    if ((st = mm_model_config_string_is(q, "config.json quantization_config", "quant_method", "mxfp4", 1,
                                        err)))
        return st;
    c->weight_dtype = MM_DTYPE_FP4_E2M1;
    return MM_OK;
}

/* One projection of the layer, all experts: blocks (E, N, K / 32, 16) U8, scales (E, N, K / 32) U8, bias
 * (E, N) BF16 or F32 (copied to F32 for all experts: every rank then decides alike whether it is zero). */
typedef struct proj {
    mm_tensor blocks, scales;
    float *bias;
    int64_t n, k;
} proj;

static mm_status get_proj(mm_model_files *files, const mm_model_config *c, int64_t layer, const char *what,
                          int64_t n, int64_t k, const char *n_key, const char *k_key, proj *p,
                          mm_error *err) {
    char name[200], dims[160];
    int64_t e = c->num_experts, bshape[4] = {e, n, k / 32, 16}, bias_shape[2] = {e, n};
    p->n = n;
    p->k = k;
    snprintf(name, sizeof name, "model.layers.%lld.mlp.experts.%s_blocks", (long long)layer, what);
    snprintf(dims, sizeof dims, "(num_local_experts, %s, %s / 32, 16)", n_key, k_key);
    mm_status st =
        mm_model_files_get(files, name, MM_DTYPE_U8, MM_DTYPE_INVALID, 4, bshape, dims, &p->blocks, err);
    snprintf(name, sizeof name, "model.layers.%lld.mlp.experts.%s_scales", (long long)layer, what);
    snprintf(dims, sizeof dims, "(num_local_experts, %s, %s / 32)", n_key, k_key);
    if (!st)
        st = mm_model_files_get(files, name, MM_DTYPE_U8, MM_DTYPE_INVALID, 3, bshape, dims, &p->scales, err);
    snprintf(name, sizeof name, "model.layers.%lld.mlp.experts.%s_bias", (long long)layer, what);
    snprintf(dims, sizeof dims, "(num_local_experts, %s)", n_key);
    mm_tensor b;
    if (!st) st = mm_model_files_get(files, name, MM_DTYPE_BF16, MM_DTYPE_F32, 2, bias_shape, dims, &b, err);
    if (!st) st = mm_model_copy_f32(&b, &p->bias, err);
    return st;
}

mm_status mm_model_load_gpt_oss(mm_moe_layer *l, mm_model_files *files, int64_t layer, mm_error *err) {
    const mm_model_config *c = &l->config;
    int64_t h = c->hidden_size, i_n = c->moe_intermediate_size, e_n = c->num_experts,
            count = l->local_experts;
    int native = !l->options.dequantize_to_bf16;
    if (native && (h % 64 != 0 || i_n % 64 != 0))
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "hidden_size = %lld and intermediate_size = %lld must be multiples of 64 for MegaMoE's MX "
            "scale layout (run with --weights bf16)",
            (long long)h, (long long)i_n);
    char name[200], bname[200];
    snprintf(name, sizeof name, "model.layers.%lld.mlp.router.weight", (long long)layer);
    snprintf(bname, sizeof bname, "model.layers.%lld.mlp.router.bias", (long long)layer);
    mm_status st = mm_model_load_router(l, files, name, bname, "num_local_experts", err);
    proj up = {0}, down = {0};
    if (!st)
        st = get_proj(files, c, layer, "gate_up_proj", 2 * i_n, h, "2 * intermediate_size", "hidden_size",
                      &up, err);
    if (!st)
        st = get_proj(files, c, layer, "down_proj", h, i_n, "hidden_size", "intermediate_size", &down, err);
    if (!st) {
        l->attrs.activation = MM_MEGA_MOE_SWIGLUOAI;
        l->attrs.activation_param_count = 3;
        l->attrs.activation_params[0] = c->swiglu_limit;
        l->attrs.activation_params[1] = 1.702f;
        l->attrs.activation_params[2] = 1.0f;
    }
    /* all-zero biases are left out (adding +0 changes no value) */
    int bias = !st && !(mm_model_all_zero_f32(up.bias, (size_t)(e_n * 2 * i_n)) &&
                        mm_model_all_zero_f32(down.bias, (size_t)(e_n * h)));
    size_t per = (size_t)(2 * i_n * h);
    uint16_t *w = native ? NULL : malloc((size_t)count * per * sizeof *w * 3 / 2 + per * sizeof *w);
    float *b1 = malloc((size_t)(count * 2 * i_n + 1) * sizeof *b1);
    mm_tensor *lists = calloc((size_t)(6 * count + 1), sizeof *lists);
    if (!st && ((!native && !w) || !b1 || !lists))
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "layer %lld: out of memory for %lld experts' weights",
                     (long long)layer, (long long)count);
    mm_tensor *l1 = lists, *l2 = l1 + count, *ls1 = l2 + count, *ls2 = ls1 + count, *lb1 = ls2 + count,
              *lb2 = lb1 + count;
    int64_t w1_shape[2] = {2 * i_n, h}, w2_shape[2] = {h, i_n}, s1_shape[3] = {2 * i_n, h / 64, 2},
            s2_shape[3] = {h, i_n / 64, 2}, b1_shape[1] = {2 * i_n}, b2_shape[1] = {h};
    for (int64_t j = 0; j < count && !st; j++) {
        int64_t e = (int64_t)l->rank * count + j;
        const uint8_t *ub = (const uint8_t *)up.blocks.data + e * per / 2,
                      *us = (const uint8_t *)up.scales.data + e * per / 32;
        const uint8_t *db = (const uint8_t *)down.blocks.data + e * per / 4,
                      *ds = (const uint8_t *)down.scales.data + e * per / 64;
        const float *eb1 = up.bias + e * 2 * i_n;
        float *mb1 = b1 + j * 2 * i_n;
        if (native) {
            l1[j] = mm_tensor_make(MM_DTYPE_FP4_E2M1, 2, w1_shape, (void *)ub);
            ls1[j] = mm_tensor_make(MM_DTYPE_E8M0, 3, s1_shape, (void *)us);
            l2[j] = mm_tensor_make(MM_DTYPE_FP4_E2M1, 2, w2_shape, (void *)db);
            ls2[j] = mm_tensor_make(MM_DTYPE_E8M0, 3, s2_shape, (void *)ds);
            memcpy(mb1, eb1, (size_t)(2 * i_n) * sizeof *mb1); /* interleaved, as weight1 */
        } else {
            uint16_t *dst = w + (size_t)j * per * 3 / 2, *tmp = w + (size_t)count * per * 3 / 2;
            mm_model_dequant_mxfp4(ub, us, 2 * i_n, h, tmp);
            for (int64_t r = 0; r < i_n; r++) { /* rows 2r (gate) -> r, 2r + 1 (up) -> I + r */
                memcpy(dst + r * h, tmp + 2 * r * h, (size_t)h * sizeof *dst);
                memcpy(dst + (i_n + r) * h, tmp + (2 * r + 1) * h, (size_t)h * sizeof *dst);
                mb1[r] = eb1[2 * r];
                mb1[i_n + r] = eb1[2 * r + 1];
            }
            mm_model_dequant_mxfp4(db, ds, h, i_n, dst + per);
            l1[j] = mm_tensor_make(MM_DTYPE_BF16, 2, w1_shape, dst);
            l2[j] = mm_tensor_make(MM_DTYPE_BF16, 2, w2_shape, dst + per);
        }
        lb1[j] = mm_tensor_make(MM_DTYPE_F32, 1, b1_shape, mb1);
        lb2[j] = mm_tensor_make(MM_DTYPE_F32, 1, b2_shape, down.bias + e * h);
    }
    if (!st) {
        mm_mega_moe_expert_weights routed =
            mm_model_expert_lists(count, l1, l2, native ? ls1 : NULL, native ? ls2 : NULL);
        routed.weight1_interleave = native;
        if (bias) {
            routed.bias1_list = lb1;
            routed.bias2_list = lb2;
        }
        st = mm_mega_moe_weights_create(l->buffer, &routed, NULL, &l->weights, err);
    }
    free(w);
    free(b1);
    free(lists);
    free(up.bias);
    free(down.bias);
    return st;
}
