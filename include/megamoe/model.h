/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/model.h: the MoE layer of a Hugging Face checkpoint run by MegaMoE (docs/models.md).
 *
 * Families (the checkpoint's config.json "model_type"), BF16 weights or their 4-bit AWQ / GPTQ variants
 * (quantization_config; docs/models.md "AWQ and GPTQ"):
 *   mixtral    model.layers.N.block_sparse_moe.gate.weight (E, H); experts.M.w1 (gate) / w3 (up) (I, H),
 *              w2 (down) (H, I); softmax over all E logits, top-k, renormalized; every layer sparse.
 *   qwen3_moe  model.layers.N.mlp.gate.weight; mlp.experts.M.gate_proj / up_proj (I, H), down_proj (H, I);
 *              softmax, top-k, renormalized iff norm_topk_prob; decoder_sparse_step and mlp_only_layers
 *              decide which layers are sparse.
 *   qwen2_moe  as qwen3_moe plus mlp.shared_expert.{gate,up,down}_proj (I_s =
 * shared_expert_intermediate_size) and mlp.shared_expert_gate.weight (1, H): y += sigmoid(x . w_g) *
 * shared(x). Experts are SwiGLU: down(silu(gate(x)) * up(x)) (hidden_act must be "silu").
 *   deepseek_v3 model.layers.N.mlp.gate.weight (E, H) + gate.e_score_correction_bias (E,); experts as
 *              qwen in BF16 or FP8 E4M3 (+ .weight_scale_inv F32 block scales); mlp.shared_experts.*
 *              (ungated); MM_ROUTER_SIGMOID_GROUP_TOPK; layers below first_k_dense_replace are dense.
 *   gpt_oss    model.layers.N.mlp.router.weight / .bias; mlp.experts.{gate_up,down}_proj_{blocks,scales,
 *              bias} (MXFP4, gate/up rows interleaved); MM_ROUTER_TOPK_SOFTMAX; swigluoai
 *              [swiglu_limit, 1.702, 1.0] with the biases.
 *
 * A checkpoint is a folder with config.json and either model.safetensors or model.safetensors.index.json
 * plus the shards it names. Files are memory-mapped and only the tensors of the asked layer are touched;
 * each rank reads the router, its own E / R experts and the shared expert.
 *
 * Errors name the config key or the tensor and the rule (MM_ERR_INVALID_FILE for a broken or unsupported
 * checkpoint, MM_ERR_INVALID_ARGUMENT for a bad layer number or a dense layer, MM_ERR_IO when a file
 * cannot be read). The library never prints. */
#ifndef MEGAMOE_MODEL_H
#define MEGAMOE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/comm.h"
#include "megamoe/dtype.h"
#include "megamoe/mega_moe.h"
#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- routers --------------------------------------------------------------------------------- */

typedef enum mm_router_rule {
    MM_ROUTER_SOFTMAX_TOPK_RENORM = 0, /* p = softmax(logits) in F32; top-k of p; w = p_k / sum_k p_k */
    MM_ROUTER_SOFTMAX_TOPK = 1,        /* p = softmax(logits) in F32; top-k of p; w = p_k */
    /* DeepSeek-V3 ("noaux_tc"): s = sigmoid(logits); c = s + bias (the e_score_correction_bias, for the
     * choice only); the E experts form n_group consecutive groups, a group's score is the sum of its
     * two largest c; the topk_group best groups are kept and c of the other groups' experts is set to
     * 0 (transformers' masked_fill(0.0), not -inf); top-k of c; w = s of the chosen, divided by
     * (their sum + 1e-20) when normalize, times scaling (routed_scaling_factor). */
    MM_ROUTER_SIGMOID_GROUP_TOPK = 2,
    /* gpt-oss: l = logits + bias (the router's bias); top-k of l; w = softmax over the K chosen l. */
    MM_ROUTER_TOPK_SOFTMAX = 3
} mm_router_rule;

/* "softmax-topk-renorm", "softmax-topk", "sigmoid-group-topk", "topk-softmax"; "invalid" otherwise. */
const char *mm_router_rule_name(mm_router_rule rule);

/* The parameters of mm_router_route. mm_router_default_params(rule): n_group = topk_group = 1,
 * normalize = 1 for MM_ROUTER_SOFTMAX_TOPK_RENORM else 0, scaling 1, bias NULL. */
typedef struct mm_router_params {
    mm_router_rule rule;
    int64_t n_group, topk_group; /* SIGMOID_GROUP_TOPK: n_group divides E, E / n_group >= 2 (the group
                                    score takes the top 2), 1 <= topk_group <= n_group and
                                    K <= topk_group E / n_group; other rules: 1, 1 */
    int normalize;         /* SIGMOID_GROUP_TOPK: norm_topk_prob; SOFTMAX_TOPK(_RENORM): fixed by the rule */
    float scaling;         /* SIGMOID_GROUP_TOPK: routed_scaling_factor (finite, > 0); others 1 */
    const mm_tensor *bias; /* (E,) F32 or NULL (zeros): SIGMOID_GROUP_TOPK's correction bias,
                              TOPK_SOFTMAX's router bias; must be NULL for the softmax rules */
} mm_router_params;

mm_router_params mm_router_default_params(mm_router_rule rule);

/* logits (T, E) F32 -> topk_ids (T, K) I32 and topk_weights (T, K) F32 by the rule of p (caller-
 * allocated; K is their second dimension, 1 <= K <= E), all in F32 in a fixed order (no dependence on
 * threads or ranks). Ties, for every rule and at every selection (experts, groups), go to the lower
 * index; each row's ids are in descending order of the selection value (p, c or l). A non-finite logit
 * or bias is an error naming the row and column. */
mm_status mm_router_route(const mm_router_params *params, const mm_tensor *logits, mm_tensor *topk_ids,
                          mm_tensor *topk_weights, mm_error *err);

/* logits (T, E) F32 -> topk_ids (T, K) I32 and topk_weights (T, K) F32 (caller-allocated; K is their
 * second dimension, 1 <= K <= E). Each row's ids are in descending order of p; equal p go to the lower
 * expert index first (deterministic; torch.topk leaves the order of ties unspecified). The softmax
 * subtracts the row maximum, sums exp in index order and divides; the renormalization sums the K
 * chosen p in output order. A non-finite logit is an error naming the row and column. */
mm_status mm_router_topk(mm_router_rule rule, const mm_tensor *logits, mm_tensor *topk_ids,
                         mm_tensor *topk_weights, mm_error *err);
/* (mm_router_topk(rule, ...) is mm_router_route with mm_router_default_params(rule).) */

/* logits (T, E) F32 = x (T, H) BF16 . gate^T, gate (E, H) BF16 or F16 (nn.Linear's (out, in) layout; F16
 * is the router dtype of AWQ/GPTQ checkpoints). Each product of a BF16 and a BF16 or F16 value is exact in
 * F32; the H products are summed in F32 in index order, so the
 * result does not depend on threads or ranks. (Hugging Face computes the gate in BF16 and rounds the
 * logits to BF16 before the F32 softmax: docs/models.md.) */
mm_status mm_router_logits(const mm_tensor *x, const mm_tensor *gate, mm_tensor *logits, mm_error *err);

/* ---- checkpoints ----------------------------------------------------------------------------- */

typedef enum mm_model_family {
    MM_MODEL_MIXTRAL = 0,
    MM_MODEL_QWEN3_MOE = 1,
    MM_MODEL_QWEN2_MOE = 2,
    MM_MODEL_DEEPSEEK_V3 = 3, /* "deepseek_v3" */
    MM_MODEL_GPT_OSS = 4      /* "gpt_oss" */
} mm_model_family;

/* The config.json model_type: "mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3", "gpt_oss"; "invalid" for
 * other values. */
const char *mm_model_family_name(mm_model_family family);

/* What megamoe takes from config.json (docs/models.md lists the keys per family). */
typedef struct mm_model_config {
    mm_model_family family;
    int64_t hidden_size;              /* H */
    int64_t num_hidden_layers;        /* layers are 0 .. num_hidden_layers - 1 */
    int64_t num_experts;              /* E (mixtral: num_local_experts) */
    int64_t topk;                     /* K = num_experts_per_tok */
    int64_t moe_intermediate_size;    /* I of a routed expert (mixtral: intermediate_size) */
    int64_t shared_intermediate_size; /* I_s of the gated shared expert (qwen2_moe), else 0 */
    mm_router_rule router;            /* mixtral: renorm; qwen: renorm iff norm_topk_prob */
    int64_t decoder_sparse_step;      /* 1 for mixtral */

    /* ---- deepseek_v3 and gpt_oss (0 for the other families) ---- */
    int64_t n_shared_experts;      /* deepseek_v3: the shared MLP has I * n_shared_experts channels */
    int64_t first_k_dense_replace; /* deepseek_v3: layers below it are dense */
    int64_t moe_layer_freq;      /* deepseek_v3: layer N >= first_k_dense_replace is sparse iff N % it == 0 */
    int64_t n_group, topk_group; /* deepseek_v3: group-limited top-k (1, 1 for the others) */
    int norm_topk_prob;          /* deepseek_v3 */
    float routed_scaling_factor; /* deepseek_v3 (1 for the others) */
    float swiglu_limit;          /* gpt_oss: the clamp of its SwiGLU (alpha 1.702, up + 1) */
    /* The experts' stored format: MM_DTYPE_BF16, MM_DTYPE_FP8_E4M3FN (deepseek_v3 with
     * quantization_config quant_method "fp8": F32 block scales weight_scale_inv of weight_block_size
     * [block_n, block_k]) or MM_DTYPE_FP4_E2M1 (gpt_oss "mxfp4": E8M0 scales per 32). */
    mm_dtype weight_dtype;
    int64_t block_n, block_k;
} mm_model_config;

typedef struct mm_model mm_model;

/* Reads dir/config.json and, when present, dir/model.safetensors.index.json (else dir/model.safetensors
 * must exist). Reads no tensor data. The handle is read-only afterwards: rank threads may share it. */
mm_status mm_model_open(const char *dir, mm_model **out, mm_error *err);
void mm_model_close(mm_model *model); /* accepts NULL */
const mm_model_config *mm_model_get_config(const mm_model *model);

/* MM_OK when layer is a sparse (MoE) layer; MM_ERR_INVALID_ARGUMENT naming num_hidden_layers, or the
 * config key (mlp_only_layers, decoder_sparse_step) that makes it a dense MLP layer. */
mm_status mm_model_check_layer(const mm_model *model, int64_t layer, mm_error *err);

/* ---- the layer ------------------------------------------------------------------------------- */

typedef struct mm_moe_layer mm_moe_layer;

/* Collective over comm: loads layer `layer` of model on every rank (E must be a multiple of the size R;
 * rank r holds experts [r E / R, (r + 1) E / R) and the shared experts of qwen2_moe / deepseek_v3), checks
 * every tensor's presence, dtype and shape, packs the weights for MegaMoE and creates its buffer for
 * max_tokens_per_rank tokens per call (>= 1). The checkpoint's files are unmapped before it returns.
 * comm must outlive the layer. */
mm_status mm_moe_layer_load(mm_comm *comm, const mm_model *model, int64_t layer, int64_t max_tokens_per_rank,
                            mm_moe_layer **out, mm_error *err);

/* Collective: this rank's tokens x (T, H) BF16 (T <= max_tokens_per_rank, may be 0 and differ per rank)
 * -> y (T, H) BF16, topk_ids (T, K) I32 and topk_weights (T, K) F32 as applied (caller-allocated).
 * Router: mm_router_logits then mm_router_route with the family's rule and parameters; experts:
 * mm_mega_moe_run (A16W16, or A16W8-FP8 / A16W4-MX for native deepseek_v3 FP8 / gpt_oss; swiglu without
 * clamp, gpt_oss swigluoai with biases; weights applied at combine in F32). qwen2_moe: the shared expert runs
 * as a second MegaMoE call in which every token goes to its own rank's copy with weight
 * sigmoid(x . w_g) (F32), and y = BF16(F32(y_routed) + F32(y_shared)). */
mm_status mm_moe_layer_forward(mm_moe_layer *layer, const mm_tensor *x, mm_tensor *y, mm_tensor *topk_ids,
                               mm_tensor *topk_weights, mm_error *err);

/* Options of mm_moe_layer_load_with (all 0: mm_moe_layer_load's behaviour). */
typedef struct mm_moe_layer_options {
    /* 1: quantized checkpoint weights (FP8 block-scaled, MXFP4, AWQ/GPTQ INT4) are dequantized to BF16 on
     * load, w' = BF16(F32(decode(q) - zero) * scale), and run as A16W16; the results are the same bits as
     * the native formats' (docs/weight_formats.md), at 2-4x the weight memory. No effect on BF16 weights. */
    int dequantize_to_bf16;
} mm_moe_layer_options;

/* mm_moe_layer_load with options (opts may be NULL: all 0). */
mm_status mm_moe_layer_load_with(mm_comm *comm, const mm_model *model, int64_t layer,
                                 int64_t max_tokens_per_rank, const mm_moe_layer_options *opts,
                                 mm_moe_layer **out, mm_error *err);

/* The MegaMoE calls of one mm_moe_layer_forward: the routed experts' and, for qwen2_moe only, the gated
 * shared expert's (a second call of R "experts", one copy per rank, K = 1: every token goes to its own
 * rank's copy, expert id = the rank). */
typedef enum mm_moe_layer_call {
    MM_MOE_LAYER_CALL_ROUTED = 0,
    MM_MOE_LAYER_CALL_SHARED = 1
} mm_moe_layer_call;

/* The MegaMoE calls one forward makes on this layer: 2 for qwen2_moe, else 1 (0 for NULL). */
int mm_moe_layer_call_count(const mm_moe_layer *layer);

/* This rank's stage timings and expert batches (mm_mega_moe_stats, mega_moe.h: events, batch_count,
 * experts[] = {batch, global expert id, rows}) of `call` in its last successful mm_moe_layer_forward
 * (zeroed before the first). Local, not collective: every rank asks for its own. MM_ERR_INVALID_ARGUMENT
 * when layer or stats is NULL, call is not an mm_moe_layer_call, or it is MM_MOE_LAYER_CALL_SHARED on a
 * family without the shared-expert call. */
mm_status mm_moe_layer_last_stats(const mm_moe_layer *layer, mm_moe_layer_call call, mm_mega_moe_stats *stats,
                                  mm_error *err);

/* Collective. Accepts NULL. */
mm_status mm_moe_layer_free(mm_moe_layer *layer, mm_error *err);

#ifdef __cplusplus
}
#endif
#endif
