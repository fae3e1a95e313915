/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/cmd_layer.c: `megamoe layer --model DIR --layer N IN -o OUT`: the MoE layer of a Hugging Face
 * checkpoint on x from a file (docs/models.md). Every process reads x; rank r takes the r-th block of
 * ceil(T / R) tokens; the outputs are gathered to rank 0, which writes OUT. */
#include <getopt.h> /* optind */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_options.h"
#include "common/cli_util.h"
#include "common/commands.h"
#include "common/timing.h"
#include "layer/layer_json.h"
#include "layer/layer_launch.h"
#include "layer/layer_trace.h"
#include "layer/layer_weights.h"
#include "megamoe/formats.h"
#include "megamoe/model.h"
#include "megamoe/safetensors.h"

static const char cmd[] = "layer";

static const char layer_usage[] =
    "usage: megamoe layer --model DIR --layer N IN.safetensors -o OUT.safetensors [--ranks R]\n"
    "                     [--backend threads|mpi] [--weights native|bf16] [--timeout SECONDS]\n"
    "\n"
    "Runs the MoE block of layer N of the Hugging Face checkpoint in DIR (config.json and model.safetensors\n"
    "or model.safetensors.index.json with its shards; families mixtral, qwen3_moe, qwen2_moe (BF16 or their\n"
    "AWQ / GPTQ 4-bit variants), deepseek_v3 (BF16 or FP8 block-scaled), gpt_oss (MXFP4)) on the tokens x "
    "of\n"
    "IN: router, top-k, the experts through MegaMoE on R ranks, the shared experts.\n"
    "IN holds x (T, hidden_size) BF16 or F32 (F32 is rounded to BF16 first). OUT gets y (T, hidden_size)\n"
    "BF16, topk_ids (T, K) I32 and topk_weights (T, K) F32 as applied. docs/models.md has the details.\n"
    "\n"
    "options:\n"
    "      --model DIR        the checkpoint folder (required)\n"
    "      --layer N          the layer (required; must be a sparse MoE layer)\n"
    "  -o, --output FILE      output file (required)\n"
    "      --ranks R          ranks (default 1; --backend mpi: the processes of mpirun -n R)\n"
    "      --backend NAME     threads (default) or mpi (one rank per MPI process)\n"
    "      --weights W        native (default: quantized experts run in their own format: FP8 block-scaled,\n"
    "                         MXFP4, AWQ/GPTQ INT4) or bf16 (dequantized to BF16 on load and run as A16W16:\n"
    "                         the same bits, 2-4x the weight memory)\n"
    "      --timeout SECONDS  how long a rank waits for its peers before failing (0 = library default)\n"
    "      --json             on success, one JSON object on stdout: tokens, ranks, times, output\n"
    "      --trace FILE       write a Chrome/Perfetto JSON trace: the phases (read, load, write) and per\n"
    "                         rank the MegaMoE calls' stages, expert batches and dispatch -> expert flows\n"
    "  -h, --help             show this help\n"
    "\n"
    "Exit status: 0 success; 2 a broken or unsupported checkpoint or input (one line on stderr names the\n"
    "config key, tensor or file and the rule), a dense layer, a bad option; 1 any other failure.\n";

typedef struct layer_job {
    const mm_model *model;
    int64_t layer, tokens, hidden, topk;
    const uint16_t *x;
    const char *out_path;
    double timeout;
    mm_moe_layer_options options;
    int trace;                    /* --trace: every rank's stats are gathered (collective) */
    layer_trace_data *trace_data; /* filled by rank 0 (in the speaker's process) */
} layer_job;

static mm_status write_output(const layer_job *j, const uint8_t *all, int size, int64_t chunk,
                              mm_error *err) {
    int64_t t_n = j->tokens, h = j->hidden, k = j->topk;
    size_t block = (size_t)chunk * (size_t)(h * 2 + k * 8);
    uint16_t *y = malloc((size_t)(t_n * h + 1) * 2);
    int32_t *ids = malloc((size_t)(t_n * k + 1) * 4);
    float *w = malloc((size_t)(t_n * k + 1) * 4);
    mm_status st = MM_OK;
    if (!y || !ids || !w) st = cli_fail(err, MM_ERR_OUT_OF_MEMORY, "out of memory for the outputs");
    for (int r = 0; r < size && !st; r++) {
        int64_t lo = r * chunk < t_n ? r * chunk : t_n, hi = (r + 1) * chunk < t_n ? (r + 1) * chunk : t_n;
        const uint8_t *b = all + (size_t)r * block;
        memcpy(y + lo * h, b, (size_t)((hi - lo) * h) * 2);
        memcpy(ids + lo * k, b + (size_t)chunk * (size_t)h * 2, (size_t)((hi - lo) * k) * 4);
        memcpy(w + lo * k, b + (size_t)chunk * (size_t)(h * 2 + k * 4), (size_t)((hi - lo) * k) * 4);
    }
    mm_st_writer *wr = NULL;
    if (!st) st = mm_st_writer_create(&wr, err);
    if (!st) {
        int64_t ys[2] = {t_n, h}, ks[2] = {t_n, k};
        mm_tensor ty = mm_tensor_make(MM_DTYPE_BF16, 2, ys, y), ti = mm_tensor_make(MM_DTYPE_I32, 2, ks, ids),
                  tw = mm_tensor_make(MM_DTYPE_F32, 2, ks, w);
        const mm_model_config *c = mm_model_get_config(j->model);
        char layer_text[32];
        snprintf(layer_text, sizeof layer_text, "%lld", (long long)j->layer);
        if (!(st = mm_st_writer_add(wr, "y", &ty, err)) &&
            !(st = mm_st_writer_add(wr, "topk_ids", &ti, err)) &&
            !(st = mm_st_writer_add(wr, "topk_weights", &tw, err)) &&
            !(st = mm_st_writer_set_metadata(wr, "family", mm_model_family_name(c->family), err)) &&
            !(st = mm_st_writer_set_metadata(wr, "router", mm_router_rule_name(c->router), err)) &&
            !(st = mm_st_writer_set_metadata(wr, "layer", layer_text, err)))
            st = mm_st_writer_write(wr, j->out_path, err);
    }
    mm_st_writer_destroy(wr);
    free(y);
    free(ids);
    free(w);
    return st;
}

static mm_status layer_rank(mm_comm *comm, void *arg, mm_error *err) {
    const layer_job *j = arg;
    int me = mm_comm_rank(comm), size = mm_comm_size(comm);
    if (j->timeout > 0) {
        mm_status ts = mm_comm_set_timeout(comm, j->timeout, err);
        if (ts) return ts;
    }
    int64_t h = j->hidden, k = j->topk, chunk = (j->tokens + size - 1) / size;
    if (chunk < 1) chunk = 1;
    int64_t lo = me * chunk < j->tokens ? me * chunk : j->tokens;
    int64_t hi = (me + 1) * chunk < j->tokens ? (me + 1) * chunk : j->tokens, t = hi - lo;
    size_t block = (size_t)chunk * (size_t)(h * 2 + k * 8);
    uint8_t *mine = calloc(1, block), *all = me == 0 ? malloc(block * (size_t)size) : NULL;
    /* every rank needs a receive area for the allgather; only rank 0 keeps it for writing */
    if (!all) all = malloc(block * (size_t)size);
    mm_error local;
    mm_error_clear(&local);
    mm_status st =
        mine && all ? MM_OK : cli_fail(&local, MM_ERR_OUT_OF_MEMORY, "out of memory for the gather");
    if ((st = mm_comm_agree_as_written(comm, st, &local))) {
        *err = local;
        free(mine);
        free(all);
        return st;
    }
    mm_moe_layer *layer = NULL;
    layer_trace_rank spans = {.tokens = t};
    spans.load_begin = cli_now_seconds();
    st = mm_moe_layer_load_with(comm, j->model, j->layer, chunk, &j->options, &layer, err);
    if (!st) {
        int64_t xs[2] = {t, h}, ks[2] = {t, k};
        mm_tensor x = mm_tensor_make(MM_DTYPE_BF16, 2, xs, (void *)(j->x + lo * h));
        mm_tensor y = mm_tensor_make(MM_DTYPE_BF16, 2, xs, mine);
        mm_tensor ids = mm_tensor_make(MM_DTYPE_I32, 2, ks, mine + (size_t)chunk * (size_t)h * 2);
        mm_tensor w = mm_tensor_make(MM_DTYPE_F32, 2, ks, mine + (size_t)chunk * (size_t)(h * 2 + k * 4));
        spans.load_end = spans.forward_begin = cli_now_seconds();
        st = mm_moe_layer_forward(layer, &x, &y, &ids, &w, err);
        spans.forward_end = cli_now_seconds();
        if (!st && j->trace)
            st = layer_trace_gather(comm, layer, &spans, &ids, mm_model_get_config(j->model)->num_experts, 0,
                                    1, me == 0 ? j->trace_data : NULL, err);
        if (me == 0 && j->trace) j->trace_data->write_begin = cli_now_seconds();
        if (!st) st = mm_comm_allgather(comm, mine, block, all, err);
        mm_status fs = mm_moe_layer_free(layer, st ? NULL : err);
        if (!st) st = fs;
    }
    if (!st && me == 0) st = write_output(j, all, size, chunk, err);
    if (me == 0 && j->trace) j->trace_data->write_end = cli_now_seconds();
    free(mine);
    free(all);
    return st;
}

/* x from IN: (T, H) BF16, or F32 rounded to BF16 (nearest even). */
static mm_status read_x(const char *path, int64_t hidden, uint16_t **x, int64_t *tokens, mm_error *err) {
    mm_st_reader *r = NULL;
    mm_status st = mm_st_open(path, &r, err);
    if (st) return st;
    const mm_st_tensor_info *info = mm_st_find(r, "x");
    mm_tensor t = {0};
    if (!info)
        st = cli_fail(err, MM_ERR_INVALID_FILE, "\"%s\": tensor \"x\" is missing", path);
    else if ((info->dtype != MM_DTYPE_BF16 && info->dtype != MM_DTYPE_F32) || info->ndim != 2 ||
             info->shape[1] != hidden)
        st = cli_fail(err, MM_ERR_INVALID_FILE,
                      "\"%s\": tensor \"x\" must be (T, %lld) BF16 or F32 (hidden_size)", path,
                      (long long)hidden);
    else
        st = mm_st_read_tensor(r, "x", &t, err);
    if (!st) {
        *tokens = t.shape[0];
        size_t n = (size_t)(t.shape[0] * hidden);
        if (!(*x = malloc((n ? n : 1) * sizeof **x)))
            st = cli_fail(err, MM_ERR_OUT_OF_MEMORY, "out of memory for x");
        for (size_t i = 0; i < n && !st; i++)
            (*x)[i] = t.dtype == MM_DTYPE_BF16 ? ((const uint16_t *)t.data)[i]
                                               : mm_f32_to_bf16(((const float *)t.data)[i]);
    }
    mm_tensor_free_data(&t);
    mm_st_close(r);
    return st;
}

int mm_cli_layer_main(int argc, char **argv) {
    layer_launch_options lo = LAYER_LAUNCH_DEFAULTS;
    const char *out_path = NULL, *trace_path = NULL;
    int json = 0;
    const cli_option rows[] = {
        LAYER_LAUNCH_OPTIONS(&lo),
        CLI_OUTPUT_OPTION(&out_path),
        CLI_FLAG_OPTION("json", &json),
        CLI_TEXT_OPTION("trace", &trace_path),
    };
    int done = cli_options_parse(cmd, layer_usage, 1, rows, sizeof rows / sizeof rows[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (optind >= argc) return cli_usage_error(cmd, "missing input file IN");
    if (!lo.model_dir) return cli_usage_error(cmd, "missing --model DIR");
    if (lo.layer < 0) return cli_usage_error(cmd, "missing --layer N");
    if (!out_path) return cli_usage_error(cmd, "missing output file (-o OUT)");

    mm_comm_world world;
    int speaker = layer_launch_world(lo.backend, &lo.ranks, &world);
    mm_error err;
    mm_error_clear(&err);
    mm_model *model = NULL;
    uint16_t *x = NULL;
    layer_trace_data trace_data = {0};
    layer_job job = {.layer = lo.layer,
                     .out_path = out_path,
                     .timeout = lo.timeout,
                     .options = lo.layer_options,
                     .trace = trace_path != NULL,
                     .trace_data = &trace_data};
    double t_begin = cli_now_seconds(), t_read = t_begin;
    mm_status st = mm_model_open(lo.model_dir, &model, &err);
    if (!st) st = mm_model_check_layer(model, lo.layer, &err);
    if (!st) {
        const mm_model_config *c = mm_model_get_config(model);
        job.model = model;
        job.hidden = c->hidden_size;
        job.topk = c->topk;
        st = read_x(argv[optind], c->hidden_size, &x, &job.tokens, &err);
        job.x = x;
    }
    if (!st) t_read = cli_now_seconds();
    if (!st) st = mm_comm_launch(lo.backend, (int)lo.ranks, layer_rank, &job, &err);
    double t_end = cli_now_seconds();
    layer_trace_host host = {cmd,  "megamoe layer", "read config, index and x", job.tokens, t_begin, t_read,
                             t_end};
    int trace_failed = !st && trace_path && speaker &&
                       layer_trace_write(trace_path, &host, &trace_data) != 0; /* said in one line */
    if (!st && json && speaker)
        layer_json_print(&(layer_json_facts){lo.model_dir, lo.backend, argv[optind], out_path, lo.layer,
                                             job.tokens, lo.ranks > 0 ? lo.ranks : world.size, job.hidden,
                                             job.topk, t_read - t_begin, t_end - t_read});
    int rc = layer_launch_status(cmd, st, &err, speaker);
    if (trace_failed) rc = MM_CLI_EXIT_FAILURE;
    layer_trace_data_free(&trace_data);
    free(x);
    mm_model_close(model);
    return rc;
}
