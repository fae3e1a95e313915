/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/case_gen_re_routing.c: `megamoe case-gen re-routing`: a seeded moe_re_routing case file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case/case_gen_re_routing.h"
#include "common/cli_util.h"
#include "common/demo_data.h"
#include "megamoe/safetensors.h"

static const char re_routing_usage[] =
    "usage: megamoe case-gen re-routing -o FILE [options]\n"
    "\n"
    "Writes a moe_re_routing case: tokens (A, H) of random bytes, expert_token_num_per_rank (N, E) with\n"
    "skewed counts summing to A, optional per_token_scales, and both attributes in the metadata. The\n"
    "same options and seed give the same file, byte for byte.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE              file to write (required)\n"
    "      --tokens A                 tokens (default 64)\n"
    "      --hidden H                 token length, 0 < H < 16384 (default 32)\n"
    "      --ranks N                  source ranks (default 4)\n"
    "      --experts E                experts on this card (default 8)\n"
    "      --dtype NAME               dtype of tokens: f16, bf16, int8, fp8_e5m2, fp8_e4m3fn, hifloat8,\n"
    "                                 fp4_e2m1, fp4_e1m2 (default bf16)\n"
    "      --count-dtype NAME         int32 or int64 (default int32)\n"
    "      --scales NAME              none, f32 or e8m0 (default none)\n"
    "      --scale-cols K             scales per token: 1 gives shape (A), K > 1 gives (A, K) (default 1)\n"
    "      --expert-token-num-type T  0 cumulative sum, 1 counts (default 1)\n"
    "      --idx-type T               0 gather index, 1 scatter index (default 0)\n"
    "      --seed S                   random seed (default 1)\n"
    "  -h, --help                     show this help\n";

static int write_re_routing(const char *path, const cli_rerouting_shape *shape, mm_dtype count_dtype,
                            mm_dtype scale_dtype, int64_t scale_cols, int64_t num_type, int64_t idx_type) {
    mm_error err;
    mm_error_clear(&err);
    mm_st_writer *w = NULL;
    uint64_t state = shape->seed;
    int64_t blocks = shape->ranks * shape->experts;
    int64_t row_bytes = mm_dtype_row_bytes(shape->dtype, shape->hidden);
    int64_t token_bytes = shape->tokens * row_bytes;
    int64_t scale_elems = shape->tokens * scale_cols;
    int64_t *counts64 = malloc((size_t)(blocks > 0 ? blocks : 1) * sizeof *counts64);
    int32_t *counts32 = malloc((size_t)(blocks > 0 ? blocks : 1) * sizeof *counts32);
    unsigned char *tokens = malloc((size_t)(token_bytes > 0 ? token_bytes : 1));
    unsigned char *scales = malloc((size_t)(scale_elems > 0 ? scale_elems : 1) * 4);
    mm_status st = MM_ERR_OUT_OF_MEMORY;
    if (!counts64 || !counts32 || !tokens || !scales) {
        snprintf(err.message, sizeof err.message, "cannot allocate %lld bytes of tokens",
                 (long long)token_bytes);
        goto fail;
    }
    cli_skewed_counts(shape->tokens, shape->ranks, shape->experts, &state, counts64);
    for (int64_t i = 0; i < blocks; i++) counts32[i] = (int32_t)counts64[i];
    cli_fill_random(tokens, (size_t)token_bytes, &state);
    if (mm_dtype_bits(shape->dtype) == 4 && shape->hidden % 2)
        /* An odd row leaves the high nibble of its last byte unused: keep it zero. */
        for (int64_t r = 0; r < shape->tokens; r++) tokens[r * row_bytes + row_bytes - 1] &= 0x0f;
    for (int64_t i = 0; i < scale_elems; i++) {
        if (scale_dtype == MM_DTYPE_E8M0) {
            scales[i] = (unsigned char)(112 + cli_rand_u64(&state) % 32); /* 2^-15 .. 2^16 */
        } else {
            float v = 0.5f + (float)(cli_rand_u64(&state) >> 40) * 0x1.0p-24f * 1.5f;
            memcpy(scales + 4 * i, &v, 4);
        }
    }

    int64_t token_shape[2] = {shape->tokens, shape->hidden}, count_shape[2] = {shape->ranks, shape->experts};
    int64_t scale_shape[2] = {shape->tokens, scale_cols};
    mm_tensor t_tokens = mm_tensor_make(shape->dtype, 2, token_shape, tokens);
    mm_tensor t_counts = mm_tensor_make(count_dtype, 2, count_shape,
                                        count_dtype == MM_DTYPE_I64 ? (void *)counts64 : counts32);
    mm_tensor t_scales = mm_tensor_make(scale_dtype, scale_cols > 1 ? 2 : 1, scale_shape, scales);
    char num_type_text[24], idx_type_text[24];
    snprintf(num_type_text, sizeof num_type_text, "%lld", (long long)num_type);
    snprintf(idx_type_text, sizeof idx_type_text, "%lld", (long long)idx_type);

    if ((st = mm_st_writer_create(&w, &err)) != MM_OK) goto fail;
    if ((st = mm_st_writer_set_metadata(w, "op", "moe_re_routing", &err)) != MM_OK) goto fail;
    if ((st = mm_st_writer_set_metadata(w, "expert_token_num_type", num_type_text, &err)) != MM_OK) goto fail;
    if ((st = mm_st_writer_set_metadata(w, "idx_type", idx_type_text, &err)) != MM_OK) goto fail;
    if ((st = mm_st_writer_add_ref(w, "tokens", &t_tokens, &err)) != MM_OK) goto fail;
    if ((st = mm_st_writer_add_ref(w, "expert_token_num_per_rank", &t_counts, &err)) != MM_OK) goto fail;
    if (scale_dtype != MM_DTYPE_INVALID &&
        (st = mm_st_writer_add_ref(w, "per_token_scales", &t_scales, &err)) != MM_OK)
        goto fail;
    st = mm_st_writer_write(w, path, &err);
fail:
    mm_st_writer_destroy(w);
    free(counts64);
    free(counts32);
    free(tokens);
    free(scales);
    if (st != MM_OK) {
        err.status = st;
        return cli_report("case-gen", &err);
    }
    return MM_CLI_EXIT_OK;
}

/* --count-dtype NAME: int32 or int64. */
static int parse_count_dtype(const char *command, const char *option, const char *text, void *target) {
    if (cli_parse_dtype(command, option, text, target)) return -1;
    mm_dtype d = *(mm_dtype *)target;
    if (d != MM_DTYPE_I32 && d != MM_DTYPE_I64)
        return cli_usage_error(command, "%s '%s' is not int32 or int64", option, text);
    return 0;
}

/* --scales NAME: none, f32 or e8m0. */
static int parse_scales(const char *command, const char *option, const char *text, void *target) {
    mm_dtype *scale_dtype = target;
    if (strcmp(text, "none") == 0)
        *scale_dtype = MM_DTYPE_INVALID;
    else if (strcmp(text, "f32") == 0)
        *scale_dtype = MM_DTYPE_F32;
    else if (strcmp(text, "e8m0") == 0)
        *scale_dtype = MM_DTYPE_E8M0;
    else
        return cli_usage_error(command, "%s '%s' is not none, f32 or e8m0", option, text);
    return 0;
}

int mm_cli_case_gen_re_routing(int argc, char **argv) {
    const char *cmd = "case-gen";
    cli_rerouting_shape shape = {64, 32, 4, 8, MM_DTYPE_BF16, 1};
    mm_dtype count_dtype = MM_DTYPE_I32, scale_dtype = MM_DTYPE_INVALID;
    int64_t scale_cols = 1, num_type = 1, idx_type = 0;
    const char *out_path = NULL;
    const cli_option options[] = {
        CLI_OUTPUT_OPTION(&out_path),
        CLI_REROUTING_SHAPE_OPTIONS(&shape),
        CLI_CUSTOM_OPTION("count-dtype", parse_count_dtype, &count_dtype),
        CLI_CUSTOM_OPTION("scales", parse_scales, &scale_dtype),
        CLI_INT64_OPTION("scale-cols", &scale_cols, 1, 4096),
        CLI_INT64_OPTION("expert-token-num-type", &num_type, 0, 1),
        CLI_INT64_OPTION("idx-type", &idx_type, 0, 1),
    };
    int done =
        cli_options_parse(cmd, re_routing_usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (!out_path) return cli_usage_error(cmd, "missing output file (-o FILE)");
    return write_re_routing(out_path, &shape, count_dtype, scale_dtype, scale_cols, num_type, idx_type);
}
