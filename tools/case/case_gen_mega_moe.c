/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/case_gen_mega_moe.c: `megamoe case-gen mega-moe`: a random, seeded mega_moe case file.
 *
 * Every rank gets x (BF16, or pre-quantized MX bytes + scales), distinct top-k ids, gating weights,
 * and stacked weights of the scenario's dtype with moderate scales, so outputs are O(1). Options pick
 * the scenario, shapes, ranks and every attribute the operator takes. Same options, same bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case/case_gen_mega_moe.h"
#include "case/case_gen_mega_moe_ext.h"
#include "common/cli_options.h"
#include "common/cli_util.h"
#include "common/demo_data.h"
#include "ffn/activation.h"
#include "format/format_table.h"
#include "ops/mega_moe/scenario_table.h"
#include "run/run_moe.h"
#include "megamoe/formats.h"
#include "megamoe/safetensors.h"

static const char usage[] =
    "usage: megamoe case-gen mega-moe -o FILE [options]\n"
    "\n"
    "Writes a mega_moe case (docs/mega_moe.md, docs/case_files.md): per rank x, topk_ids, topk_weights,\n"
    "stacked expert weights of the scenario, optional shared experts and mask; attributes in the metadata.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE             file to write (required)\n"
    "      --scenario NAME           a16w16, a8w8-int, a8w4-int, a8w8-fp-e4m3, a8w8-fp-e5m2, a8w4-fp,\n"
    "                                a4w4-fp (default a16w16; the A16 weight-only rows a16w8-fp8,\n"
    "                                a16w4-mx, a16w4-int: case-gen mega-moe-ext)\n"
    "      --ranks R                 ranks (default 2)\n"
    "      --tokens BS               rows of x per rank (default 8); --zero-rank G gives rank G none\n"
    "      --zero-rank G             rank with BS = 0 (default none)\n"
    "      --hidden H                (default 64; a multiple of 32 for MX)\n"
    "      --intermediate I          intermediate size, even (default 32)\n"
    "      --experts E               routed experts in total, a multiple of R (default 2R)\n"
    "      --topk K                  (default 2)\n"
    "      --shared-experts S        shared experts per rank, 0..4 (default 0)\n"
    "      --activation NAME         swiglu, swiglustep, swigluoai, situglu, gelu (default swiglu)\n"
    "      --clamp C                 clamp of swiglu / swiglustep / swigluoai (default none)\n"
    "      --prequantized            x as MX bytes + scales (FP scenarios, dispatch_quant_mode 0)\n"
    "      --mask                    x_active_mask with every third row inactive\n"
    "      --transpose               transpose_weight1 and transpose_weight2\n"
    "      --topk-weights-type T     0 or 1 (default 0)\n"
    "      --combine-quant-mode Q    0, 3 or 4 (default 0)\n"
    "      --combine-comm-mode M     0, 1 or 2 (default 0)\n"
    "      --rank-num-per-server N   domain size (default: not written)\n"
    "      --seed S                  random seed (default 1)\n"
    "  -h, --help                    show this help\n";

static const char usage_ext[] =
    "usage: megamoe case-gen mega-moe-ext -o FILE [options]\n"
    "\n"
    "Writes a mega_moe_ext case (docs/weight_formats.md, docs/case_files.md): a mega_moe case whose weights\n"
    "may be a checkpoint format: FP8 E4M3 with F32 block scales (a16w8-fp8), FP4 E2M1 with E8M0 MX scales\n"
    "(a16w4-mx), UINT4 with F32 group scales and U8 zero points (a16w4-int), all with BF16 activations;\n"
    "biases for every format and an interleaved weight1. Every option of case-gen mega-moe, and:\n"
    "\n"
    "      --scenario NAME           any row: a16w8-fp8 (default), a16w4-mx, a16w4-int, or one of\n"
    "                                case-gen mega-moe's\n"
    "      --bias                    bias1 / bias2 (routed and shared) for every weight format\n"
    "      --weight1-interleave      attribute weight1_interleave = 1 (weight1's channel 2i is gate i,\n"
    "                                2i + 1 up i)\n"
    "      --scale-block-n N         scale_block_n of a16w8-fp8 / a16w4-int (default 128; a16w4-int 1)\n"
    "      --scale-block-k K         scale_block_k (default 128)\n";

static double uniform(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(cli_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

static uint32_t random_code(mm_dtype t, uint64_t *s) {
    switch (t) {
    case MM_DTYPE_BF16: return mm_f32_to_bf16((float)uniform(s, -0.5, 0.5));
    case MM_DTYPE_I8: return (uint8_t)(int8_t)((int)(cli_rand_u64(s) % 255) - 127);
    case MM_DTYPE_INT4:
    case MM_DTYPE_UINT4: return (uint32_t)(cli_rand_u64(s) % 16);
    default: return mm_dtype_from_f32(t, (float)uniform(s, -4, 4)); /* an MX element type */
    }
}

/* Stores code at logical element (row, col) of a row-major matrix with `cols` columns. */
static void put_code(uint8_t *m, mm_dtype t, int64_t cols, int64_t row, int64_t col, uint32_t code) {
    int64_t rb = mm_dtype_row_bytes(t, cols);
    if (mm_dtype_bits(t) == 4) {
        uint8_t *b = m + row * rb + col / 2;
        *b = (uint8_t)((*b & (col % 2 ? 0x0F : 0xF0)) | ((code & 0x0F) << (col % 2 ? 4 : 0)));
    } else if (mm_dtype_bits(t) == 16) {
        ((uint16_t *)(m + row * rb))[col] = (uint16_t)code;
    } else {
        m[row * rb + col] = (uint8_t)code;
    }
}

/* One group's tensors for `count` experts (weight1/2, weight_scales1/2, bias1/2, weight_zeros1/2);
 * buffers are kept in `keep` for the writer. */
typedef struct group_tensors {
    mm_tensor t[8];
    int has[8];
} group_tensors;

static int make_group(const gen_options *o, const mm_moe_scenario_row *scenario, int64_t count, uint64_t *s,
                      group_tensors *g, void **keep, int *nkeep) {
    memset(g, 0, sizeof *g);
    mm_dtype wt = scenario->weight_dtype;
    int64_t H = o->hidden, I = o->inter, k2 = mm_ffn_act_k2((mm_mega_moe_activation)o->activation, I);
    int64_t K[2] = {H, k2}, N[2] = {2 * I, H};
    for (int which = 0; which < 2; which++) {
        int tr = o->transpose != 0;
        int64_t rows = tr ? N[which] : K[which], cols = tr ? K[which] : N[which];
        int64_t mat = rows * mm_dtype_row_bytes(wt, cols);
        uint8_t *w = calloc((size_t)(count * mat + 1), 1);
        float *sc = calloc((size_t)(count * N[which] + 1), 4);
        float *bias = calloc((size_t)(count * N[which] + 1), 4);
        int64_t groups = (K[which] + 63) / 64;
        uint8_t *mx = calloc((size_t)(count * N[which] * groups * 2 + 1), 1);
        if (!w || !sc || !bias || !mx) return 0;
        keep[(*nkeep)++] = w;
        keep[(*nkeep)++] = sc;
        keep[(*nkeep)++] = bias;
        keep[(*nkeep)++] = mx;
        for (int64_t e = 0; e < count; e++)
            for (int64_t n = 0; n < N[which]; n++) {
                int64_t colsum = 0;
                for (int64_t k = 0; k < K[which]; k++) {
                    uint32_t code = random_code(wt, s);
                    if (scenario->bias) colsum += (int)mm_dtype_to_f32(wt, code); /* INT4: signed nibble */
                    put_code(w + e * mat, wt, cols, tr ? n : k, tr ? k : n, code);
                }
                float scale = (float)(uniform(s, 0.5, 1.5) /
                                      (sqrt((double)K[which]) * (wt == MM_DTYPE_I8 ? 40.0 : 3.0)));
                sc[e * N[which] + n] = scale;
                bias[e * N[which] + n] = (float)(8.0 * (double)scale * (double)colsum);
                for (int64_t q = 0; q < (K[which] + 31) / 32; q++)
                    mx[(e * N[which] + n) * groups * 2 + q] = (uint8_t)(122 + cli_rand_u64(s) % 3);
            }
        int64_t wshape[3] = {count, rows, cols};
        g->t[which] = mm_tensor_make(wt, 3, wshape, w);
        g->has[which] = 1;
        if (o->ext) { /* op mega_moe_ext: block scales, zero points, biases of every format */
            case_gen_ext_buffers b = {sc, bias, mx};
            if (!case_gen_ext_group(o, scenario, count, which, N[which], K[which], &b, s, g->t, g->has, keep,
                                    nkeep))
                return 0;
            continue;
        }
        if (mm_format_is_int_quant(wt)) {
            int64_t sshape[2] = {count, N[which]};
            g->t[2 + which] = mm_tensor_make(MM_DTYPE_F32, 2, sshape, sc);
            g->has[2 + which] = 1;
        } else if (mm_format_is_mx(wt)) {
            int64_t sshape[4] = {count, N[which], groups, 2};
            g->t[2 + which] = mm_tensor_make(MM_DTYPE_E8M0, 4, sshape, mx);
            g->has[2 + which] = 1;
        }
        if (scenario->bias) {
            int64_t bshape[2] = {count, N[which]};
            g->t[4 + which] = mm_tensor_make(MM_DTYPE_F32, 2, bshape, bias);
            g->has[4 + which] = 1;
        }
    }
    return 1;
}

static int write_case(const char *path, const gen_options *o, const mm_moe_scenario_row *sc) {
    mm_error err;
    mm_error_clear(&err);
    mm_st_writer *wr = NULL;
    uint64_t s = (uint64_t)o->seed;
    int64_t H = o->hidden, K = o->topk, E = o->experts, El = E / o->ranks;
    void **keep = calloc((size_t)(o->ranks * 80 + 8), sizeof *keep);
    int nkeep = 0, rc = MM_CLI_EXIT_OK;
    char text[64];
    mm_status st = keep ? mm_st_writer_create(&wr, &err) : MM_ERR_OUT_OF_MEMORY;
    mm_dtype dispatch = sc->dispatch_dtype;
    int mode = o->prequantized ? 0 : sc->dispatch_quant_mode;
#define META(k, v)                                                                                           \
    if (st == MM_OK) st = mm_st_writer_set_metadata(wr, k, v, &err)
    META("op", o->ext ? "mega_moe_ext" : "mega_moe");
    snprintf(text, sizeof text, "%lld", (long long)o->ranks);
    META("ranks", text);
    META("ep_world_size", text);
    snprintf(text, sizeof text, "%lld", (long long)E);
    META("moe_expert_num", text);
    snprintf(text, sizeof text, "%d", mode);
    META("dispatch_quant_mode", text);
    if (dispatch != MM_DTYPE_INVALID) META("dispatch_quant_out_dtype", mm_dtype_name(dispatch));
    META("activation", mm_mega_moe_activation_name((mm_mega_moe_activation)o->activation));
    if (o->activation == MM_MEGA_MOE_GELU) {
        META("activation_params", "[3.4028234663852886e+38]");
    } else if (o->clamp > 0 && o->activation != MM_MEGA_MOE_SITUGLU) {
        if (o->activation == MM_MEGA_MOE_SWIGLUOAI)
            snprintf(text, sizeof text, "[%.9g, 1.702, 1.0]", o->clamp);
        else
            snprintf(text, sizeof text, "[%.9g]", o->clamp);
        META("activation_params", text);
    }
    if (o->transpose) {
        META("transpose_weight1", "true");
        META("transpose_weight2", "true");
    }
    snprintf(text, sizeof text, "%lld", (long long)o->topk_weights_type);
    META("topk_weights_type", text);
    snprintf(text, sizeof text, "%lld", (long long)o->cq);
    META("combine_quant_mode", text);
    snprintf(text, sizeof text, "%lld", (long long)o->cc);
    META("combine_comm_mode", text);
    if (o->rps >= 0) {
        snprintf(text, sizeof text, "%lld", (long long)o->rps);
        META("rank_num_per_server", text);
    }
    if (o->ext) {
        if (o->bn > 0) {
            snprintf(text, sizeof text, "%lld", (long long)o->bn);
            META("scale_block_n", text);
            snprintf(text, sizeof text, "%lld", (long long)o->bk);
            META("scale_block_k", text);
        }
        META("weight1_interleave", o->interleave ? "1" : "0");
    }
#undef META
    static const char *const names[8] = {"weight1", "weight2", "weight_scales1", "weight_scales2",
                                         "bias1",   "bias2",   "weight_zeros1",  "weight_zeros2"};
    for (int64_t r = 0; r < o->ranks && st == MM_OK; r++) {
        int64_t bs = r == o->zero_rank ? 0 : o->tokens;
        int64_t xs[2] = {bs, H}, ks[2] = {bs, K}, ss[2] = {bs, (H + 31) / 32}, ms[1] = {bs};
        uint16_t *x = calloc((size_t)(bs * H + 1), 2);
        uint8_t *xq = calloc((size_t)(bs * H + 1), 1), *xs8 = calloc((size_t)(bs * ss[1] + 1), 1);
        int32_t *ids = calloc((size_t)(bs * K + 1), 4);
        float *w = calloc((size_t)(bs * K + 1), 4);
        int8_t *mask = calloc((size_t)(bs + 1), 1);
        if (!x || !xq || !xs8 || !ids || !w || !mask) {
            st = MM_ERR_OUT_OF_MEMORY;
            break;
        }
        void *bufs[6] = {x, xq, xs8, ids, w, mask};
        for (int q = 0; q < 6; q++) keep[nkeep++] = bufs[q];
        for (int64_t i = 0; i < bs; i++) {
            for (int64_t h = 0; h < H; h++) x[i * H + h] = mm_f32_to_bf16((float)uniform(&s, -1, 1));
            if (o->prequantized)
                mm_mx_quantize_row_bf16(x + i * H, H, dispatch, xq + i * mm_dtype_row_bytes(dispatch, H),
                                        xs8 + i * ss[1], NULL);
            for (int64_t k = 0; k < K; k++) {
                int32_t id;
                int dup;
                do {
                    id = (int32_t)(cli_rand_u64(&s) % (uint64_t)E);
                    dup = 0;
                    for (int64_t j = 0; j < k; j++) dup |= ids[i * K + j] == id;
                } while (dup);
                ids[i * K + k] = id;
                w[i * K + k] = (float)uniform(&s, -0.2, 1.0);
            }
            mask[i] = (int8_t)(!o->mask || i % 3 != 1);
        }
        char name[96];
        mm_tensor t;
#define ADD(nm, tensor)                                                                                      \
    do {                                                                                                     \
        snprintf(name, sizeof name, "rank%lld.%s", (long long)r, nm);                                        \
        t = tensor;                                                                                          \
        if (st == MM_OK) st = mm_st_writer_add(wr, name, &t, &err);                                          \
    } while (0)
        if (o->prequantized) {
            ADD("x", mm_tensor_make(dispatch, 2, xs, xq));
            ADD("scales", mm_tensor_make(MM_DTYPE_E8M0, 2, ss, xs8));
        } else {
            ADD("x", mm_tensor_make(MM_DTYPE_BF16, 2, xs, x));
        }
        ADD("topk_ids", mm_tensor_make(MM_DTYPE_I32, 2, ks, ids));
        ADD("topk_weights", mm_tensor_make(MM_DTYPE_F32, 2, ks, w));
        if (o->mask) ADD("x_active_mask", mm_tensor_make(MM_DTYPE_I8, 1, ms, mask));
        group_tensors g;
        if (!make_group(o, sc, El, &s, &g, keep, &nkeep)) st = MM_ERR_OUT_OF_MEMORY;
        for (int q = 0; q < 8 && st == MM_OK; q++)
            if (g.has[q]) ADD(names[q], g.t[q]);
        if (o->shared > 0 && st == MM_OK) {
            if (!make_group(o, sc, o->shared, &s, &g, keep, &nkeep)) st = MM_ERR_OUT_OF_MEMORY;
            for (int q = 0; q < 8 && st == MM_OK; q++)
                if (g.has[q]) {
                    char shared_name[40];
                    snprintf(shared_name, sizeof shared_name, "shared_%s", names[q]);
                    ADD(shared_name, g.t[q]);
                }
        }
#undef ADD
    }
    if (st == MM_OK) st = mm_st_writer_write(wr, path, &err);
    if (st != MM_OK) {
        if (!err.message[0]) snprintf(err.message, sizeof err.message, "out of memory");
        err.status = st;
        rc = cli_report("case-gen", &err);
    }
    mm_st_writer_destroy(wr);
    for (int q = 0; q < nkeep; q++) free(keep[q]);
    free(keep);
    return rc;
}

static int parse_activation(const char *command, const char *option, const char *text, void *target) {
    int *activation = target;
    *activation = mm_mega_moe_activation_from_name(text); /* the activation table's names */
    return *activation < 0 ? cli_usage_error(command, "%s '%s' is not known", option, text) : 0;
}

/* --clamp: a number in [0, 1e30] (beyond the integer bounds of a CLI_VALUE_REAL row). */
static int parse_clamp(const char *command, const char *option, const char *text, void *target) {
    return cli_parse_double(command, option, text, 0, 1e30, target);
}

/* ext: `case-gen mega-moe-ext` (op mega_moe_ext): every scenario row, --bias, --weight1-interleave and the
 * block sizes; `case-gen mega-moe` refuses those (op mega_moe keeps the seed's contract). */
static int case_gen_main(int argc, char **argv, int ext) {
    const char *cmd = ext ? "case-gen mega-moe-ext" : "case-gen mega-moe";
    gen_options o = {.scenario = ext ? "a16w8-fp8" : "a16w16",
                     .ranks = 2,
                     .tokens = 8,
                     .zero_rank = -1,
                     .hidden = 64,
                     .inter = 32,
                     .topk = 2,
                     .rps = -1,
                     .seed = 1,
                     .ext = ext};
    const char *out_path = NULL;
    const cli_option options[] = {
        CLI_OUTPUT_OPTION(&out_path),
        CLI_TEXT_OPTION("scenario", &o.scenario),
        CLI_INT64_OPTION("ranks", &o.ranks, 1, 64),
        CLI_INT64_OPTION("tokens", &o.tokens, 0, 1 << 20),
        CLI_INT64_OPTION("zero-rank", &o.zero_rank, 0, 63),
        CLI_INT64_OPTION("hidden", &o.hidden, 1, 1 << 16),
        CLI_INT64_OPTION("intermediate", &o.inter, 2, 1 << 16),
        CLI_INT64_OPTION("experts", &o.experts, 1, 1 << 16),
        CLI_INT64_OPTION("topk", &o.topk, 1, 1 << 16),
        CLI_INT64_OPTION("shared-experts", &o.shared, 0, 4),
        CLI_CUSTOM_OPTION("activation", parse_activation, &o.activation),
        CLI_CUSTOM_OPTION("clamp", parse_clamp, &o.clamp),
        CLI_FLAG_OPTION("prequantized", &o.prequantized),
        CLI_FLAG_OPTION("mask", &o.mask),
        CLI_FLAG_OPTION("transpose", &o.transpose),
        CLI_INT64_OPTION("topk-weights-type", &o.topk_weights_type, 0, 1),
        CLI_INT64_OPTION("combine-quant-mode", &o.cq, 0, 4),
        CLI_INT64_OPTION("combine-comm-mode", &o.cc, 0, 2),
        CLI_INT64_OPTION("rank-num-per-server", &o.rps, 0, 64),
        CLI_INT64_OPTION("seed", &o.seed, 0, INT64_MAX),
        CLI_FLAG_OPTION("bias", &o.bias),
        CLI_FLAG_OPTION("weight1-interleave", &o.interleave),
        CLI_INT64_OPTION("scale-block-n", &o.bn, 1, 1 << 16),
        CLI_INT64_OPTION("scale-block-k", &o.bk, 1, 1 << 16),
    };
    int done = cli_options_parse(cmd, ext ? usage_ext : usage, 0, options, sizeof options / sizeof options[0],
                                 argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    /* an option of mega-moe-ext given to mega-moe (named first to last as the help lists them) */
    const char *ext_only = o.bias         ? "--bias"
                           : o.interleave ? "--weight1-interleave"
                           : o.bn > 0     ? "--scale-block-n"
                           : o.bk > 0     ? "--scale-block-k"
                                          : NULL;
    if (!out_path) return cli_usage_error(cmd, "missing output file (-o FILE)");
    const mm_moe_scenario_row *sc = NULL;
    for (int q = 0; q < mm_moe_scenario_count; q++)
        if (strcmp(o.scenario, mm_moe_scenario_table[q].spec_name) == 0) sc = &mm_moe_scenario_table[q];
    if (!sc) return cli_usage_error(cmd, "--scenario '%s' is not known", o.scenario);
    if (!ext && ext_only)
        return cli_usage_error(cmd, "%s is an option of case-gen mega-moe-ext (op mega_moe_ext)", ext_only);
    if (!ext && sc->dispatch_dtype == MM_DTYPE_INVALID && sc->weight_dtype != MM_DTYPE_BF16)
        return cli_usage_error(cmd,
                               "--scenario %s is an A16 weight-only scenario, not in op mega_moe's table: "
                               "case-gen mega-moe-ext writes it (op mega_moe_ext)",
                               o.scenario);
    if (!sc->block_scales && (o.bn > 0 || o.bk > 0))
        return cli_usage_error(cmd,
                               "--scale-block-%s applies to the block-scaled scenarios (a16w8-fp8, "
                               "a16w4-int), not %s",
                               o.bn > 0 ? "n" : "k", sc->spec_name);
    if (sc->block_scales) { /* the checkpoints' blocks unless given (`megamoe run`'s defaults) */
        int64_t bn, bk;
        run_moe_scale_blocks(NULL, sc, &bn, &bk);
        o.bn = o.bn > 0 ? o.bn : bn;
        o.bk = o.bk > 0 ? o.bk : bk;
    }
    if (o.experts == 0) o.experts = 2 * o.ranks;
    if (o.experts % o.ranks != 0)
        return cli_usage_error(cmd, "--experts %lld is not a multiple of --ranks %lld", (long long)o.experts,
                               (long long)o.ranks);
    if (o.topk > o.experts)
        return cli_usage_error(cmd, "--topk %lld exceeds --experts %lld", (long long)o.topk,
                               (long long)o.experts);
    if (o.prequantized && !mm_format_is_mx(sc->dispatch_dtype))
        return cli_usage_error(cmd, "--prequantized needs an FP scenario");
    return write_case(out_path, &o, sc);
}

int mm_cli_case_gen_mega_moe(int argc, char **argv) {
    return case_gen_main(argc, argv, 0);
}

int mm_cli_case_gen_mega_moe_ext(int argc, char **argv) {
    return case_gen_main(argc, argv, 1);
}
