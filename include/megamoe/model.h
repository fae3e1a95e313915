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
#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- routers --------------------------------------------------------------------------------- */

typedef enum mm_router_rule {
    MM_ROUTER_SOFTMAX_TOPK_RENORM = 0, /* p = softmax(logits) in F32; top-k of p; w = p_k / sum_k p_k */
    MM_ROUTER_SOFTMAX_TOPK = 1         /* p = softmax(logits) in F32; top-k of p; w = p_k */
} mm_router_rule;

/* "softmax-topk-renorm", "softmax-topk"; "invalid" for other values. */
const char *mm_router_rule_name(mm_router_rule rule);

/* logits (T, E) F32 -> topk_ids (T, K) I32 and topk_weights (T, K) F32 (caller-allocated; K is their
 * second dimension, 1 <= K <= E). Each row's ids are in descending order of p; equal p go to the lower
 * expert index first (deterministic; torch.topk leaves the order of ties unspecified). The softmax
 * subtracts the row maximum, sums exp in index order and divides; the renormalization sums the K
 * chosen p in output order. A non-finite logit is an error naming the row and column. */
mm_status mm_router_topk(mm_router_rule rule, const mm_tensor *logits, mm_tensor *topk_ids,
                         mm_tensor *topk_weights, mm_error *err);

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

/* The config.json model_type: "mixtral", "qwen3_moe", "qwen2_moe"; "invalid" for other values. */
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
 * rank r holds experts [r E / R, (r + 1) E / R) and, for qwen2_moe, the shared expert), checks every
 * tensor's presence, dtype (BF16) and shape, packs the weights for MegaMoE and creates its buffer for
 * max_tokens_per_rank tokens per call (>= 1). The checkpoint's files are unmapped before it returns.
 * comm must outlive the layer. */
mm_status mm_moe_layer_load(mm_comm *comm, const mm_model *model, int64_t layer, int64_t max_tokens_per_rank,
                            mm_moe_layer **out, mm_error *err);

/* Collective: this rank's tokens x (T, H) BF16 (T <= max_tokens_per_rank, may be 0 and differ per rank)
 * -> y (T, H) BF16, topk_ids (T, K) I32 and topk_weights (T, K) F32 as applied (caller-allocated).
 * Router: mm_router_logits then mm_router_topk with the family's rule; experts: mm_mega_moe_run
 * (A16W16, swiglu without clamp, weights applied at combine in F32). qwen2_moe: the shared expert runs
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

/* Collective. Accepts NULL. */
mm_status mm_moe_layer_free(mm_moe_layer *layer, mm_error *err);

#ifdef __cplusplus
}
#endif
#endif
