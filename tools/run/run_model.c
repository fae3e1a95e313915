/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_model.c: `megamoe run --model DIR`: the main job on a real checkpoint's MoE layer
 * (docs/models.md). Every rank loads the layer (router, its experts, the shared expert), draws seeded
 * random BF16 tokens, runs one warm-up call and --iterations timed calls of mm_moe_layer_forward, and
 * rank 0 prints the timing and the routing spread (tokens per expert). Nothing is checked against a
 * reference: `megamoe layer` and tests/python/hf_moe_reference.py do that. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_json.h"
#include "common/cli_options.h"
#include "common/cli_util.h"
#include "common/demo_data.h"
#include "common/timing.h"
#include "layer/layer_launch.h"
#include "layer/layer_trace.h"
#include "layer/layer_weights.h"
#include "megamoe/formats.h"
#include "megamoe/model.h"
#include "run/run_ops.h"

static const char cmd[] = "run";

static const char usage[] =
    "usage: megamoe run --model DIR [--layer N] [--tokens T] [--ranks R] [--backend threads|mpi]\n"
    "                   [--iterations N] [--seed S] [--weights native|bf16] [--json]\n"
    "                   [--timeout SECONDS] [--trace FILE]\n"
    "\n"
    "Runs the MoE block of layer N of the Hugging Face checkpoint in DIR (docs/models.md: mixtral,\n"
    "qwen3_moe, qwen2_moe, BF16 or AWQ/GPTQ) on seeded random BF16 tokens: load, one warm-up call,\n"
    "then --iterations timed calls. Prints the load time, the median / min / max time of a call,\n"
    "tokens/s and the routing spread (tokens per expert). Nothing is checked (`megamoe layer` is the\n"
    "checked path).\n"
    "\n"
    "options:\n"
    "      --model DIR        the checkpoint folder (required)\n"
    "      --layer N          the layer (default: the first sparse layer)\n"
    "      --tokens T         tokens per rank (default 64)\n"
    "      --ranks R          ranks (default 1; --backend mpi: the processes of mpirun -n R)\n"
    "      --backend NAME     threads (default) or mpi (one rank per MPI process)\n"
    "      --iterations N     timed calls (default 3; one warm-up call first)\n"
    "      --seed S           seed of the tokens (default 1)\n"
    "      --weights native|bf16\n"
    "                         quantized weights as stored (default) or dequantized to BF16 on load\n"
    "      --json             one JSON object on stdout instead of the text\n"
    "      --timeout SECONDS  how long a rank waits for its peers (0 = library default)\n"
    "      --trace FILE       write a Chrome/Perfetto JSON trace: opening the model, per rank its load,\n"
    "                         warm-up and timed forwards with the MegaMoE calls' stages, expert batches\n"
    "                         and dispatch -> expert flows (the slices of `megamoe layer --trace`)\n"
    "  -h, --help             show this help\n";

typedef struct model_job {
    const mm_model *model;
    int64_t layer, tokens, iterations;
    uint64_t seed;
    double timeout;
    mm_moe_layer_options options;
    /* results, written by rank 0 */
    double load_s;
    double *call_s;          /* iterations: the slowest rank's time of each call */
    int64_t *expert_count;   /* E: tokens routed to each expert (all ranks, one call) */
    layer_trace_data *trace; /* --trace: every rank's timed forwards, filled on rank 0; else NULL */
} model_job;

/* Standard normal BF16 values from the seeded stream (Box-Muller). */
static void random_tokens(uint16_t *x, int64_t n, uint64_t seed, int rank) {
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + (uint64_t)rank + 1;
    for (int64_t i = 0; i < n; i++) {
        double u1 = ((double)(cli_rand_u64(&state) >> 11) + 0.5) / 9007199254740992.0;
        double u2 = (double)(cli_rand_u64(&state) >> 11) / 9007199254740992.0;
        x[i] = mm_f32_to_bf16((float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)));
    }
}

/* Sums the per-expert counts over ranks (the allreduce takes at most MM_COMM_ALLREDUCE_MAX values). */
static mm_status sum_counts(mm_comm *comm, int64_t *counts, int64_t e, mm_error *err) {
    mm_status st = MM_OK;
    for (int64_t at = 0; at < e && !st; at += MM_COMM_ALLREDUCE_MAX) {
        int n = (int)(e - at < MM_COMM_ALLREDUCE_MAX ? e - at : MM_COMM_ALLREDUCE_MAX);
        st = mm_comm_allreduce_i64(comm, counts + at, n, MM_REDUCE_SUM, err);
    }
    return st;
}

static mm_status model_rank(mm_comm *comm, void *arg, mm_error *err) {
    model_job *j = arg;
    int me = mm_comm_rank(comm);
    if (j->timeout > 0) {
        mm_status ts = mm_comm_set_timeout(comm, j->timeout, err);
        if (ts) return ts;
    }
    const mm_model_config *c = mm_model_get_config(j->model);
    int64_t t = j->tokens, h = c->hidden_size, k = c->topk, e = c->num_experts;
    size_t n = (size_t)(t ? t : 1);
    uint16_t *x = malloc(n * (size_t)h * 2), *y = malloc(n * (size_t)h * 2);
    int32_t *ids = malloc(n * (size_t)k * 4);
    float *w = malloc(n * (size_t)k * 4);
    int64_t *counts = calloc((size_t)e, sizeof *counts);
    mm_error local;
    mm_error_clear(&local);
    mm_status st =
        x && y && ids && w && counts ? MM_OK : cli_fail(&local, MM_ERR_OUT_OF_MEMORY, "out of memory");
    if ((st = mm_comm_agree_as_written(comm, st, &local))) *err = local;
    mm_moe_layer *layer = NULL;
    double t0 = cli_now_seconds();
    if (!st) st = mm_moe_layer_load_with(comm, j->model, j->layer, t ? t : 1, &j->options, &layer, err);
    double load = cli_now_seconds() - t0;
    layer_trace_rank spans = {.load_begin = t0, .load_end = t0 + load, .tokens = t};
    if (!st) {
        random_tokens(x, t * h, j->seed, me);
        int64_t xs[2] = {t, h}, ks[2] = {t, k};
        mm_tensor tx = mm_tensor_make(MM_DTYPE_BF16, 2, xs, x), ty = mm_tensor_make(MM_DTYPE_BF16, 2, xs, y);
        mm_tensor ti = mm_tensor_make(MM_DTYPE_I32, 2, ks, ids), tw = mm_tensor_make(MM_DTYPE_F32, 2, ks, w);
        spans.warmup_begin = cli_now_seconds();
        st = mm_moe_layer_forward(layer, &tx, &ty, &ti, &tw, err); /* warm-up */
        spans.warmup_end = cli_now_seconds();
        for (int64_t it = 0; it < j->iterations && !st; it++) {
            if ((st = mm_comm_barrier(comm, err))) break;
            double s = cli_now_seconds();
            st = mm_moe_layer_forward(layer, &tx, &ty, &ti, &tw, err);
            double d = cli_now_seconds() - s;
            spans.forward_begin = s, spans.forward_end = s + d;
            if (!st) st = mm_comm_allreduce_f64(comm, &d, 1, MM_REDUCE_MAX, err);
            if (!st && me == 0) j->call_s[it] = d;
            if (!st && j->trace) /* after the timing: the gather is not timed */
                st = layer_trace_gather(comm, layer, &spans, &ti, e, it, j->iterations,
                                        me == 0 ? j->trace : NULL, err);
        }
        for (int64_t i = 0; i < t * k && !st; i++) counts[ids[i]]++;
        if (!st) st = sum_counts(comm, counts, e, err);
        if (!st) st = mm_comm_allreduce_f64(comm, &load, 1, MM_REDUCE_MAX, err);
        if (!st && me == 0) {
            memcpy(j->expert_count, counts, (size_t)e * sizeof *counts);
            j->load_s = load;
        }
        mm_status fs = mm_moe_layer_free(layer, st ? NULL : err);
        if (!st) st = fs;
    }
    free(x);
    free(y);
    free(ids);
    free(w);
    free(counts);
    return st;
}

static void report(const model_job *j, const char *dir, int ranks, int json) {
    const mm_model_config *c = mm_model_get_config(j->model);
    int64_t e = c->num_experts, total = j->tokens * ranks, used = 0, lo = INT64_MAX, hi = 0;
    for (int64_t i = 0; i < e; i++) {
        used += j->expert_count[i] > 0;
        if (j->expert_count[i] < lo) lo = j->expert_count[i];
        if (j->expert_count[i] > hi) hi = j->expert_count[i];
    }
    double mean = (double)(total * c->topk) / (double)e;
    double *sorted = malloc((size_t)(j->iterations ? j->iterations : 1) * sizeof *sorted);
    cli_time_stats ts = {NAN, NAN, NAN};
    if (sorted && j->iterations > 0) {
        memcpy(sorted, j->call_s, (size_t)j->iterations * sizeof *sorted);
        ts = cli_time_stats_of(sorted, (size_t)j->iterations);
    }
    free(sorted);
    const char *weights = j->options.dequantize_to_bf16 ? "bf16" : "native";
    if (json) {
        cli_json o = cli_json_begin(stdout, "model");
        cli_json_str(&o, "model", dir);
        cli_json_str(&o, "family", mm_model_family_name(c->family));
        cli_json_int(&o, "layer", j->layer);
        cli_json_str(&o, "weights", weights);
        cli_json_int(&o, "ranks", ranks);
        cli_json_int(&o, "tokens", total);
        cli_json_num(&o, "load_s", j->load_s);
        cli_json_num(&o, "median_ms", ts.median * 1e3);
        cli_json_num(&o, "min_ms", ts.min * 1e3);
        cli_json_num(&o, "max_ms", ts.max * 1e3);
        cli_json_num(&o, "tokens_per_s", (double)total / ts.median);
        cli_json_int(&o, "experts_used", used);
        cli_json_int(&o, "expert_tokens_min", lo);
        cli_json_int(&o, "expert_tokens_max", hi);
        cli_json_num(&o, "expert_tokens_mean", mean);
        cli_json_end(&o);
        return;
    }
    printf("model %s: %s layer %lld, H %lld, I %lld, %lld experts, top-%lld, weights %s\n", dir,
           mm_model_family_name(c->family), (long long)j->layer, (long long)c->hidden_size,
           (long long)c->moe_intermediate_size, (long long)e, (long long)c->topk, weights);
    printf("ranks %d, %lld tokens (%lld per rank), load %.3f s\n", ranks, (long long)total,
           (long long)j->tokens, j->load_s);
    printf("call: median %.3f ms, min %.3f ms, max %.3f ms over %lld iterations; %.0f tokens/s\n",
           ts.median * 1e3, ts.min * 1e3, ts.max * 1e3, (long long)j->iterations, (double)total / ts.median);
    printf("routing: %lld of %lld experts used; tokens per expert min %lld, mean %.1f, max %lld (max/mean "
           "%.2f)\n",
           (long long)used, (long long)e, (long long)lo, mean, (long long)hi,
           mean > 0 ? (double)hi / mean : 0.0);
    printf("tokens per expert:");
    for (int64_t i = 0; i < e; i++) printf("%s%lld", i % 16 ? " " : "\n  ", (long long)j->expert_count[i]);
    printf("\n");
}

int cli_run_model_main(int argc, char **argv) {
    layer_launch_options lo = LAYER_LAUNCH_DEFAULTS;
    int64_t tokens = 64, iterations = 3, seed = 1;
    int json = 0;
    const char *trace_path = NULL;
    const cli_option rows[] = {
        LAYER_LAUNCH_OPTIONS(&lo),
        CLI_INT64_OPTION("tokens", &tokens, 0, (int64_t)1 << 24),
        CLI_INT64_OPTION("iterations", &iterations, 1, 1000000),
        CLI_INT64_OPTION("seed", &seed, 0, INT64_MAX),
        CLI_FLAG_OPTION("json", &json),
        CLI_TEXT_OPTION("trace", &trace_path),
    };
    int done = cli_options_parse(cmd, usage, 0, rows, sizeof rows / sizeof rows[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (!lo.model_dir) return cli_usage_error(cmd, "missing --model DIR");

    mm_comm_world world;
    int speaker = layer_launch_world(lo.backend, &lo.ranks, &world);
    mm_error err;
    mm_error_clear(&err);
    mm_model *model = NULL;
    layer_trace_data trace = {0};
    model_job job = {NULL,
                     lo.layer,
                     tokens,
                     iterations,
                     (uint64_t)seed,
                     lo.timeout,
                     lo.layer_options,
                     0.0,
                     NULL,
                     NULL,
                     trace_path ? &trace : NULL};
    double t_begin = cli_now_seconds(), t_open = t_begin;
    mm_status st = mm_model_open(lo.model_dir, &model, &err);
    if (!st && lo.layer < 0) { /* the first sparse layer */
        const mm_model_config *c = mm_model_get_config(model);
        for (int64_t l = 0; l < c->num_hidden_layers && job.layer < 0; l++)
            if (mm_model_check_layer(model, l, NULL) == MM_OK) job.layer = l;
        if (job.layer < 0)
            st = cli_fail(&err, MM_ERR_INVALID_ARGUMENT, "%s has no sparse (MoE) layer", lo.model_dir);
    }
    if (!st) st = mm_model_check_layer(model, job.layer, &err);
    if (!st) {
        job.model = model;
        job.call_s = calloc((size_t)iterations, sizeof *job.call_s);
        job.expert_count = calloc((size_t)mm_model_get_config(model)->num_experts, sizeof *job.expert_count);
        if (!job.call_s || !job.expert_count) st = cli_fail(&err, MM_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (!st) t_open = cli_now_seconds();
    if (!st) st = mm_comm_launch(lo.backend, (int)lo.ranks, model_rank, &job, &err);
    layer_trace_host host = {cmd,    "megamoe run --model", "open model", tokens * world.size, t_begin,
                             t_open, cli_now_seconds()};
    int trace_failed = !st && trace_path && speaker && layer_trace_write(trace_path, &host, &trace) != 0;
    int rc = layer_launch_status(cmd, st, &err, speaker);
    if (trace_failed) rc = MM_CLI_EXIT_FAILURE;
    if (!st && speaker) report(&job, lo.model_dir, world.size, json);
    if (!st && speaker && trace_path && !json) printf("trace: %s (open in ui.perfetto.dev)\n", trace_path);
    layer_trace_data_free(&trace);
    free(job.call_s);
    free(job.expert_count);
    mm_model_close(model);
    return rc;
}
