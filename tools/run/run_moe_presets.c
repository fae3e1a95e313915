/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_presets.c: the model presets of `megamoe run`, its scenarios (every row of the
 * scenario table) and the block sizes of the block-scaled ones.
 *
 * Presets copy the MoE layer shapes of public models. Token counts are scaled so that one iteration
 * runs in well under a second on the 2-core CI machine (docs/testing.md); DeepSeek-V3's 256 experts are
 * scaled to 32 loaded experts because 256 x 88 MB of BF16 weights do not fit (docs/mega_moe.md). */
#include <string.h>

#include "common/cli_util.h"
#include "run/run_moe.h"

/* Columns: name, model, hidden, inter, experts (loaded), model_experts, topk, shared_experts, activation,
 * activation_param_count, activation_params (gpt-oss: clamp, alpha, beta), default_scenario, default_tokens,
 * default_check_tokens. */
/* clang-format off */
const run_moe_preset run_moe_presets[] = {
    {"qwen3-30b-a3b", "Qwen3-30B-A3B", 2048,   768, 128, 128, 8, 0, MM_MEGA_MOE_SWIGLU,
     0, {0},                   "a16w16",       128, 2},
    {"deepseek-v3",   "DeepSeek-V3",   7168,  2048,  32, 256, 8, 1, MM_MEGA_MOE_SWIGLU,
     0, {0},                   "a8w8-fp-e4m3",  16, 1},
    {"mixtral-8x7b",  "Mixtral-8x7B",  4096, 14336,   8,   8, 2, 0, MM_MEGA_MOE_SWIGLU,
     0, {0},                   "a16w16",        16, 1},
    {"gpt-oss-20b",   "gpt-oss-20b",   2880,  2880,  32,  32, 4, 0, MM_MEGA_MOE_SWIGLUOAI,
     3, {7.0f, 1.702f, 1.0f}, "a8w4-fp",       64, 1},
};
/* clang-format on */
const size_t run_moe_preset_count = sizeof run_moe_presets / sizeof run_moe_presets[0];

const run_moe_preset *run_moe_find_preset(const char *name) {
    for (size_t i = 0; i < run_moe_preset_count; i++)
        if (strcmp(name, run_moe_presets[i].name) == 0) return &run_moe_presets[i];
    return NULL;
}

const run_moe_scenario *run_moe_find_scenario(const char *name) {
    for (int i = 0; i < mm_moe_scenario_count; i++)
        if (strcmp(name, mm_moe_scenario_table[i].spec_name) == 0) return &mm_moe_scenario_table[i];
    return NULL;
}

void run_moe_scale_blocks(const run_moe_config *cfg, const run_moe_scenario *sc, int64_t *bn, int64_t *bk) {
    *bn = *bk = 0;
    if (!sc->block_scales) return;
    /* the checkpoints' blocks: DeepSeek-V3's FP8 128 x 128, AWQ/GPTQ's INT4 groups of 128 along K */
    *bn = cfg && cfg->scale_block_n > 0 ? cfg->scale_block_n : sc->weight_dtype == MM_DTYPE_UINT4 ? 1 : 128;
    *bk = cfg && cfg->scale_block_k > 0 ? cfg->scale_block_k : 128;
}

int run_moe_parse_scenario(const char *command, const char *option, const char *text, void *target) {
    if (!run_moe_find_scenario(text)) return cli_usage_error(command, "unknown %s '%s'", option, text);
    *(const char **)target = text;
    return 0;
}

mm_mega_moe_attrs run_moe_attrs(const run_moe_config *cfg, const run_moe_scenario *sc) {
    mm_mega_moe_attrs a = mm_mega_moe_default_attrs();
    a.dispatch_quant_mode = sc->dispatch_quant_mode;
    a.dispatch_quant_out_dtype = sc->dispatch_dtype;
    a.activation = cfg->preset->activation;
    a.activation_param_count = cfg->preset->activation_param_count;
    for (int i = 0; i < MM_MEGA_MOE_MAX_ACTIVATION_PARAMS; i++)
        a.activation_params[i] = cfg->preset->activation_params[i];
    a.combine_quant_mode = cfg->combine_quant_mode;
    a.combine_comm_mode = cfg->combine_comm_mode;
    a.rank_num_per_server = cfg->rank_num_per_server;
    a.topk_weights_type = cfg->topk_weights_type;
    return a;
}
