/* SPDX-License-Identifier: Apache-2.0 */
/* model/model_internal.h: what the checkpoint files share: the opened model (config + tensor index)
 * and one rank's memory-mapped view of the shard files it needs. Private to src/model/. */
#ifndef MEGAMOE_MODEL_INTERNAL_H
#define MEGAMOE_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/mega_moe.h"
#include "megamoe/model.h"
#include "megamoe/safetensors.h"

/* One entry of model.safetensors.index.json's weight_map. */
typedef struct mm_model_entry {
    const char *name, *file;
} mm_model_entry;

/* The quantization_config of an AWQ / GPTQ checkpoint (quant_config.c; docs/models.md). */
typedef enum mm_model_quant_method {
    MM_MODEL_QUANT_NONE = 0,
    MM_MODEL_QUANT_AWQ = 1,  /* AutoAWQ "gemm": qweight (in, out/8), zeros packed in AWQ's nibble order */
    MM_MODEL_QUANT_GPTQ = 2, /* qweight (in/8, out), qzeros (in/g, out/8) in plain nibble order */
} mm_model_quant_method;

typedef struct mm_model_quant {
    mm_model_quant_method method;
    int64_t group_size;  /* > 0; GPTQ's -1 (one group over the whole input) is stored as 0 */
    int zeros_minus_one; /* GPTQ checkpoint_format "gptq" (v1): qzeros hold zero - 1 */
} mm_model_quant;

/* Reads config.json's quantization_config (absent: method NONE); refuses what megamoe does not run,
 * naming the key. */
struct mm_json_value;
mm_status mm_model_quant_read(const struct mm_json_value *root, mm_model_quant *quant, mm_error *err);

struct mm_model {
    char *dir;
    mm_model_config config;
    mm_model_quant quant;
    int64_t *mlp_only_layers;
    size_t mlp_only_count;
    int sharded;             /* 1: index.json names the file of each tensor; 0: dir/model.safetensors */
    mm_model_entry *entries; /* sorted by name (strings owned by index_doc) */
    size_t entry_count;
    struct mm_json_doc *index_doc;
};

/* One rank's open shards: each file is opened (header validated) and memory-mapped once. */
typedef struct mm_model_shard {
    const char *file; /* as named by the index (or "model.safetensors") */
    mm_st_reader *reader;
    void *map;
    size_t map_bytes;
} mm_model_shard;

typedef struct mm_model_files {
    const mm_model *model;
    mm_model_shard *shards;
    size_t count, cap;
    void **copies; /* tensors whose mapped data was not aligned to their element size */
    size_t copy_count, copy_cap;
} mm_model_files;

/* The tensor `name` as a descriptor pointing into the mapped file (valid until mm_model_files_close),
 * checked to be BF16 with the given 2-D shape; `dims` names the shape's config keys for messages,
 * e.g. "(moe_intermediate_size, hidden_size)". */
mm_status mm_model_files_tensor(mm_model_files *files, const char *name, int64_t rows, int64_t cols,
                                const char *dims, mm_tensor *out, mm_error *err);
/* The same for one or two dtypes in `allowed` (a list ended by MM_DTYPE_INVALID); rows < 0 asks for a
 * 1-D tensor of cols elements. out gets the tensor's own dtype. */
mm_status mm_model_files_tensor_of(mm_model_files *files, const char *name, const mm_dtype *allowed,
                                   int64_t rows, int64_t cols, const char *dims, mm_tensor *out,
                                   mm_error *err);
/* 1 when the checkpoint holds the tensor `name` (its shard opens and lists it). */
int mm_model_files_has(mm_model_files *files, const char *name);

/* ---- AWQ / GPTQ linears (quantized_linear.c) ---- */

/* The group size over k inputs (GPTQ's -1: k). */
int64_t mm_model_quant_group(const mm_model_quant *q, int64_t k);
/* Reads the linear `prefix` (prefix.qweight, .qzeros, .scales, GPTQ's .g_idx) of n outputs and k inputs
 * (n_key, k_key: their config keys for messages) into codes (n, ceil(k / 2)) bytes, scales (n, k / g) F32
 * and zeros (n, k / g) U8 (the checkpoint's zero point, v1 GPTQ's stored value + 1). */
mm_status mm_model_qlinear_read(mm_model_files *files, const char *prefix, int64_t n, int64_t k,
                                const char *n_key, const char *k_key, uint8_t *codes, float *scales,
                                uint8_t *zeros, mm_error *err);
/* out (n, k) BF16 = BF16(F32(code - zero) * scale) per element (the A16 weight-only rule). */
void mm_model_qlinear_to_bf16(int64_t n, int64_t k, int64_t g, const uint8_t *codes, const float *scales,
                              const uint8_t *zeros, uint16_t *out);
struct mm_mega_moe_buffer;
struct mm_mega_moe_weights;
/* count experts of `inter` channels, names[j] = the gate, up and down prefixes of expert j, packed for
 * buffer: UINT4 (A16W4-INT) or, dequant = 1, BF16 (A16W16). */
mm_status mm_model_quant_experts_load(mm_model_files *files, int64_t hidden, int64_t inter, int64_t count,
                                      const char (*names)[3][160], const char *i_key, int dequant,
                                      struct mm_mega_moe_buffer *buffer, struct mm_mega_moe_weights **out,
                                      mm_error *err);
/* The general form: dtype (or alt, when not MM_DTYPE_INVALID) and the exact ndim-D shape. The
 * descriptor has the tensor's dtype. */
mm_status mm_model_files_get(mm_model_files *files, const char *name, mm_dtype dtype, mm_dtype alt, int ndim,
                             const int64_t *shape, const char *dims, mm_tensor *out, mm_error *err);
void mm_model_files_close(mm_model_files *files);

struct mm_json_value;
/* config.json's integer key in [min, max]; absent: def when has_def, else an error naming the key. */
mm_status mm_model_config_int(const struct mm_json_value *root, const char *key, int has_def, int64_t def,
                              int64_t min, int64_t max, int64_t *out, mm_error *err);
/* The keys of the deepseek_v3 and gpt_oss families (deepseek.c, gpt_oss.c); family already set. */
mm_status mm_model_read_deepseek_config(mm_model_config *c, const struct mm_json_value *root, mm_error *err);
mm_status mm_model_read_gpt_oss_config(mm_model_config *c, const struct mm_json_value *root, mm_error *err);

/* One layer on one rank (layer.c; the family loaders fill the weights and the router). */
struct mm_moe_layer {
    mm_comm *comm;
    mm_moe_layer_options options;
    mm_model_config config;
    int rank, size;
    int64_t max_tokens, local_experts;
    uint16_t *gate;          /* (E, H) router weight */
    uint16_t *shared_gate;   /* (H,) qwen2_moe shared_expert_gate, else NULL */
    mm_dtype gate_dtype;     /* of both: BF16, or F16 (the non-quantized tensors of AWQ/GPTQ checkpoints) */
    float *router_bias;      /* (E,) deepseek_v3 e_score_correction_bias / gpt_oss router bias, else NULL */
    mm_tensor router_bias_t; /* its descriptor (router.bias points here) */
    mm_router_params router;
    mm_mega_moe_attrs attrs; /* the MegaMoE call: activation and its parameters */
    mm_mega_moe_buffer *buffer, *shared_buffer;
    mm_mega_moe_weights *weights, *shared_weights;
};

/* deepseek.c / gpt_oss.c: the router (gate, bias, rule parameters), this rank's experts (and
 * deepseek_v3's shared experts) packed into l->weights, the MegaMoE attributes. */
mm_status mm_model_load_deepseek(mm_moe_layer *l, mm_model_files *files, int64_t layer, mm_error *err);
mm_status mm_model_load_gpt_oss(mm_moe_layer *l, mm_model_files *files, int64_t layer, mm_error *err);
/* Expert weights in the list form, as checkpoints store them: count tensors per list, (out, in) rows so
 * both GEMMs' weights are transposed; the scale lists may be NULL. The loaders add what else they have
 * (biases, zero points, scale blocks, weight1's interleave). */
mm_mega_moe_expert_weights mm_model_expert_lists(int64_t count, const mm_tensor *w1, const mm_tensor *w2,
                                                 const mm_tensor *scales1, const mm_tensor *scales2);
/* Copies a BF16 tensor into a new array. */
mm_status mm_model_copy_bf16(const mm_tensor *t, uint16_t **out, mm_error *err);
/* Copies a 1-D BF16 or F32 tensor of n values into a new F32 array. */
mm_status mm_model_copy_f32(const mm_tensor *t, float **out, mm_error *err);

/* dequant.c: (rows, cols) FP8 E4M3 codes with F32 scales (ceil(rows / block_n), ceil(cols / block_k)),
 * or MXFP4 (rows, cols / 2) bytes (cols a multiple of 32) with (rows, cols / 32) E8M0 bytes, to BF16. */
void mm_model_dequant_fp8_block(const uint8_t *q, int64_t rows, int64_t cols, const float *scales,
                                int64_t block_n, int64_t block_k, uint16_t *out);
void mm_model_dequant_mxfp4(const uint8_t *blocks, const uint8_t *scales, int64_t rows, int64_t cols,
                            uint16_t *out);

/* A 2-D tensor argument of the routers: non-NULL, the dtype, 2 dimensions, data when not empty. */
mm_status mm_router_check_2d(const mm_tensor *t, const char *what, mm_dtype dtype, mm_error *err);

#endif
