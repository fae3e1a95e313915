/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/case_gen_dispatch_combine.c: `megamoe case-gen dispatch-v3` and `megamoe case-gen combine-v2`.
 *
 * dispatch_v3 writes every surviving rank's Dispatch inputs. combine_v2 builds the same world, runs
 * Dispatch on it (ranks as threads), turns the received rows into expert outputs with a simple
 * per-expert scaling (so that the case is consistent: the handoff tensors are what Dispatch gave) and
 * writes the Combine inputs. The same options and seed give the same file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case/case_gen_dispatch_combine.h"
#include "common/cli_util.h"
#include "common/dc_world.h"
#include "megamoe/formats.h"
#include "megamoe/safetensors.h"

static const char usage_fmt[] =
    "usage: megamoe case-gen %s -o FILE [options]\n"
    "\n"
    "Writes a %s case: every surviving rank's inputs (rank<g>.<name>), the attributes and \"ranks\".\n"
    "%s"
    "\n"
    "options:\n"
    "  -o, --output FILE              file to write (required)\n" CLI_DC_OPTIONS_HELP
    "  -h, --help                     show this help\n";

static int add(mm_st_writer *wr, int64_t g, const char *name, const mm_tensor *t, mm_error *err) {
    char full[96];
    snprintf(full, sizeof full, "rank%lld.%s", (long long)g, name);
    return mm_st_writer_add(wr, full, t, err) != MM_OK;
}

static int meta(mm_st_writer *wr, const char *key, long long v, mm_error *err) {
    char text[32];
    snprintf(text, sizeof text, "%lld", v);
    return mm_st_writer_set_metadata(wr, key, text, err) != MM_OK;
}

static int write_metadata(mm_st_writer *wr, const cli_dc_world *w, const char *op, int combine,
                          mm_error *err) {
    mm_dc_attrs a = cli_dc_attrs(w, 0);
    if (mm_st_writer_set_metadata(wr, "op", op, err)) return 1;
    if (meta(wr, "ranks", w->nranks, err) || meta(wr, "ep_world_size", a.ep_world_size, err) ||
        meta(wr, "moe_expert_num", a.moe_expert_num, err) ||
        meta(wr, "tp_world_size", a.tp_world_size, err) ||
        meta(wr, "shared_expert_num", a.shared_expert_num, err) ||
        meta(wr, "shared_expert_rank_num", a.shared_expert_rank_num, err) ||
        meta(wr, "quant_mode", a.quant_mode, err) || meta(wr, "global_bs", a.global_bs, err) ||
        meta(wr, "expert_token_nums_type", a.expert_token_nums_type, err) ||
        meta(wr, "zero_expert_num", a.zero_expert_num, err) ||
        meta(wr, "copy_expert_num", a.copy_expert_num, err) ||
        meta(wr, "const_expert_num", a.const_expert_num, err))
        return 1;
    if (combine) {
        char eps[32];
        snprintf(eps, sizeof eps, "%.9g", w->o.eps);
        if (mm_st_writer_set_metadata(wr, "norm_eps", eps, err)) return 1;
    }
    return 0;
}

typedef struct gen_run {
    const cli_dc_world *w;
    cli_dc_dispatch_out *out;
} gen_run;

static mm_status dispatch_rank(mm_comm *comm, void *arg, mm_error *err) {
    gen_run *run = arg;
    const cli_dc_world *w = run->w;
    int g = mm_comm_rank(comm);
    if (!w->rank[g].alive) return MM_OK;
    mm_dc_workspace *ws = NULL;
    mm_status st = cli_dc_set_survivors(comm, w, err);
    if (!st) st = mm_dc_workspace_create(comm, &ws, err);
    if (st) return st;
    st = cli_dc_dispatch(ws, w, g, &run->out[g], err);
    mm_dc_workspace_free(ws, NULL);
    return st;
}

/* The stand-in expert: output = BF16(row x (0.5 + (e mod 4) / 4)), e the expert (-1 - s for shared s),
 * split in halves between the TP ranks so that the TP sum is the whole. */
static uint16_t *expert_outputs(const cli_dc_world *w, int64_t g, const cli_dc_dispatch_out *d) {
    int64_t H = w->o.hidden, K = w->o.topk;
    uint16_t *o = malloc((size_t)(d->rows + 1) * (size_t)H * 2);
    if (!o) return NULL;
    for (int64_t j = 0; j < d->rows; j++) {
        const int32_t *a = d->assist + j * 3;
        int64_t block = 0;
        if (w->tpw > 1 && j >= d->tp_counts[0]) block = 1;
        int64_t src_g = (w->elastic ? w->elastic[4 + w->o.ranks + a[0]] : a[0]) * w->tpw + block;
        int64_t e = a[2] < K ? w->rank[src_g].ids[a[1] * K + a[2]] : -1 - (a[2] - K);
        float f = (0.5f + (float)(((e % 4) + 4) % 4) / 4.0f) / (float)w->tpw;
        for (int64_t h = 0; h < H; h++) {
            float v = w->o.quant == 2 ? (float)((const int8_t *)d->expand_x)[j * H + h] * d->dyn[j]
                                      : mm_bf16_to_f32(((const uint16_t *)d->expand_x)[j * H + h]);
            o[j * H + h] = mm_f32_to_bf16(v * f);
        }
    }
    (void)g;
    return o;
}

static int generate(int argc, char **argv, int combine) {
    const char *cmd = "case-gen";
    const char *op = combine ? "moe_distribute_combine_add_rms_norm_v2" : "moe_distribute_dispatch_v3";
    cli_dc_opts o = cli_dc_default_opts();
    const char *path = NULL;
    char usage[4096];
    snprintf(usage, sizeof usage, usage_fmt, argv[0], op,
             combine ? "Dispatch runs first (threads); the expert outputs are the received rows scaled per\n"
                       "expert, so the handoff tensors are consistent.\n"
                     : "");
    const cli_option options[] = {CLI_OUTPUT_OPTION(&path), CLI_DC_OPTIONS(&o)};
    int done = cli_options_parse(cmd, usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (!path) return cli_usage_error(cmd, "-o FILE is required");
    cli_dc_world w;
    int rc = cli_dc_world_make(cmd, &o, &w);
    if (rc) {
        cli_dc_world_free(&w);
        return rc;
    }
    mm_error err;
    mm_error_clear(&err);
    mm_st_writer *wr = NULL;
    cli_dc_dispatch_out *outs = calloc((size_t)w.nranks, sizeof *outs);
    uint16_t **ffn = calloc((size_t)w.nranks, sizeof *ffn);
    rc = MM_CLI_EXIT_FAILURE;
    if (!outs || !ffn || mm_st_writer_create(&wr, &err) || write_metadata(wr, &w, op, combine, &err))
        goto done;
    if (combine) {
        gen_run run = {&w, outs};
        mm_status st = mm_comm_run_threads((int)w.nranks, dispatch_rank, &run, NULL, NULL, &err);
        if (st) {
            rc = cli_report(cmd, &err);
            goto done;
        }
    }
    for (int64_t g = 0; g < w.nranks; g++) {
        if (!w.rank[g].alive) continue;
        cli_dc_tensors t;
        if (!combine) {
            mm_dispatch_v3_inputs in = cli_dc_dispatch_inputs(&w, g, &t);
            if (add(wr, g, "x", in.x, &err) || add(wr, g, "expert_ids", in.expert_ids, &err) ||
                (in.scales && add(wr, g, "scales", in.scales, &err)) ||
                (in.x_active_mask && add(wr, g, "x_active_mask", in.x_active_mask, &err)) ||
                (in.elastic_info && add(wr, g, "elastic_info", in.elastic_info, &err)))
                goto done;
            continue;
        }
        mm_combine_v2_inputs in;
        const cli_dc_dispatch_out *d = &outs[g];
        if (!(ffn[g] = expert_outputs(&w, g, d))) goto done;
        cli_dc_combine_inputs(&w, g, d, ffn[g], &t, &in);
        const struct {
            const char *name;
            const mm_tensor *t;
        } list[] = {{"expand_x", in.expand_x},
                    {"expert_ids", in.expert_ids},
                    {"assist_info_for_combine", in.assist_info_for_combine},
                    {"ep_send_counts", in.ep_send_counts},
                    {"tp_send_counts", in.tp_send_counts},
                    {"expert_scales", in.expert_scales},
                    {"residual_x", in.residual_x},
                    {"gamma", in.gamma},
                    {"x_active_mask", in.x_active_mask},
                    {"shared_expert_x", in.shared_expert_x},
                    {"elastic_info", in.elastic_info},
                    {"ori_x", in.ori_x},
                    {"const_expert_alpha_1", in.const_expert_alpha_1},
                    {"const_expert_alpha_2", in.const_expert_alpha_2},
                    {"const_expert_v", in.const_expert_v}};
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
            if (list[i].t && add(wr, g, list[i].name, list[i].t, &err)) goto done;
    }
    if (mm_st_writer_write(wr, path, &err)) goto done;
    rc = MM_CLI_EXIT_OK;
done:
    if (rc == MM_CLI_EXIT_FAILURE && err.message[0]) rc = cli_report(cmd, &err);
    for (int64_t g = 0; outs && g < w.nranks; g++) cli_dc_dispatch_out_free(&outs[g]);
    for (int64_t g = 0; ffn && g < w.nranks; g++) free(ffn[g]);
    free(outs), free(ffn);
    mm_st_writer_destroy(wr);
    cli_dc_world_free(&w);
    return rc;
}

int mm_cli_case_gen_dispatch_v3(int argc, char **argv) {
    return generate(argc, argv, 0);
}
int mm_cli_case_gen_combine_v2(int argc, char **argv) {
    return generate(argc, argv, 1);
}
