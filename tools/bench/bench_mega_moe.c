/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_mega_moe.c: `megamoe bench mega-moe`: the whole MegaMoE layer (mm_mega_moe_run) against
 * its expert compute alone, per model shape and phase, measured in the same run.
 *
 * For each case (preset x phase x tokens per rank) every rank builds its experts and tokens as
 * `megamoe run` does (seeded, skewed top-k routing), then:
 *   layer    mm_mega_moe_run, after a barrier; one call's time is the last rank's end minus the first
 *            rank's start (mm_mega_moe_last_stats);
 *   compute  the same expert FFN batches on rows placed in memory beforehand, no communication (each
 *            rank: its experts with the row counts the layer call received, then its shared experts),
 *            all ranks at once as in the layer, timed the same way.
 * After one warm-up of each, --iterations pairs (one layer call, one compute-only run, alternating
 * which goes first) are timed, so that the noise of this shared machine hits both sides alike.
 * Printed: median layer and compute times, their ratio (target at prefill: <= 1.15, communication
 * hidden), the share of the layer that is not expert compute and the dispatch + combine stage share
 * (target at decode: < 20 %), tokens/s and GFLOP/s of the layer, and the quartiles of the per-pair
 * ratios (how much the ratio itself moved during the run).
 *
 * The DeepSeek-like shape keeps H 7168 and I 2048 but loads fewer routed experts (the preset's 32 of
 * 256, top-8, 1 shared, MX FP8) so the weights fit in memory; prefill uses fewer tokens per rank than
 * Qwen3 (each call moves 20x the FLOPs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/bench_mega_moe_plot.h"
#include "common/cli_json.h"
#include "common/cli_options.h"
#include "common/cli_threads.h"
#include "common/cli_util.h"
#include "ops/mega_moe/compute_only.h"
#include "run/run_moe.h"
#include "common/timing.h"

#define MAX_ITERATIONS   32
#define MAX_DECODE_SIZES 8

static const char *const cmd = "bench mega-moe";

static const char usage[] =
    "usage: megamoe bench mega-moe [options]\n"
    "\n"
    "The whole MegaMoE layer on R ranks vs the same expert GEMMs alone on pre-placed rows (no\n"
    "communication), prefill and decode, at the Qwen3-30B-A3B and a DeepSeek-like shape.\n"
    "\n"
    "options:\n"
    "      --backend NAME       threads (default) or mpi (under mpirun, one rank per process)\n"
    "      --ranks R            ranks as threads (default 4)\n"
    "      --preset NAME        qwen3-30b-a3b, deepseek-v3 or all (default all)\n"
    "      --phase NAME         prefill, decode or all (default all)\n"
    "      --prefill-tokens T   tokens per rank at prefill (default 512 for qwen3, 128 for deepseek)\n"
    "      --decode-tokens LIST tokens per rank at decode, comma-separated (default 1,8)\n"
    "      --scenario NAME      quantization scenario (default: the preset's)\n"
    "      --hidden H, --intermediate I, --experts E\n"
    "                           override the preset's shape (E: routed experts, a multiple of the\n"
    "                           ranks and at least the preset's top-k)\n"
    "      --iterations N       timed pairs of layer and compute-only calls per case (default 9;\n"
    "                           one warm-up of each first)\n"
    "      --seed S             seed of weights, tokens and routing (default 1)\n"
    "      --threads N          worker-pool threads of each process, the caller included (default:\n"
    "                           MEGAMOE_NUM_THREADS, else the CPUs of the affinity mask within the\n"
    "                           cgroup CPU quota; docs/threads.md)\n"
    "      --json               JSON Lines on stdout instead of the table (docs/cli.md)\n"
    "      --plot FILE.svg      also draw each case's stage times per rank as stacked bars\n"
    "  -h, --help               show this help\n";

typedef struct bench_case {
    run_moe_config cfg;
    const run_moe_scenario *sc;
    const char *phase;
} bench_case;

/* What every rank measures; rank 0's copy holds the reductions over ranks. */
typedef struct rank_times {
    double layer[MAX_ITERATIONS][2];          /* [begin, end] of each timed call */
    double compute[MAX_ITERATIONS][2];        /* [begin, end] of each compute-only run */
    double comm_share;                        /* mean over calls of (dispatch + combine stages) / call */
    double stage_ms[MM_MEGA_MOE_STAGE_COUNT]; /* mean over calls of each stage (this rank) */
    int64_t recv_rows;
} rank_times;

typedef struct threads_arg {
    const bench_case *bc;
    rank_times times[MM_COMM_MAX_RANKS];
} threads_arg;

/* One timed layer call (after a barrier); it < 0 is a warm-up. */
static mm_status time_layer(mm_comm *comm, const bench_case *bc, mm_mega_moe_buffer *buffer,
                            const mm_mega_moe_weights *weights, const mm_mega_moe_attrs *attrs,
                            const mm_mega_moe_inputs *in, const mm_mega_moe_outputs *outs, int64_t it,
                            rank_times *out, mm_error *err) {
    mm_status st = mm_comm_barrier(comm, err);
    double t0 = cli_now_seconds();
    if (st == MM_OK) st = mm_mega_moe_run(buffer, weights, attrs, in, outs, err);
    double t1 = cli_now_seconds();
    if (st != MM_OK || it < 0) return st;
    mm_mega_moe_stats stats;
    mm_mega_moe_last_stats(buffer, &stats, NULL);
    out->layer[it][0] = t0;
    out->layer[it][1] = t1;
    double call = t1 - t0;
    double comm_s = stats.seconds[MM_MEGA_MOE_STAGE_DISPATCH] + stats.seconds[MM_MEGA_MOE_STAGE_COMBINE];
    out->comm_share += call > 0 ? comm_s / call / (double)bc->cfg.iterations : 0;
    for (int s = 0; s < MM_MEGA_MOE_STAGE_COUNT; s++)
        out->stage_ms[s] += stats.seconds[s] * 1e3 / (double)bc->cfg.iterations;
    return MM_OK;
}

/* One timed compute-only run (after a barrier); it < 0 is a warm-up. */
static mm_status time_compute(mm_comm *comm, mm_moe_compute_only *co, int64_t it, rank_times *out,
                              mm_error *err) {
    mm_status st = mm_comm_barrier(comm, err);
    if (st != MM_OK) return st;
    double t0 = cli_now_seconds();
    st = mm_moe_compute_only_run(co, err);
    double t1 = cli_now_seconds();
    if (it >= 0) {
        out->compute[it][0] = t0;
        out->compute[it][1] = t1;
    }
    return st;
}

/* A warm-up layer call (its received row counts size the compute-only runs), a warm-up compute-only
 * run, then --iterations pairs of one timed layer call and one timed compute-only run, in alternating
 * order: a busy minute on this shared machine then slows both sides alike instead of one block of
 * calls, and neither side always runs right after the other. */
static mm_status measure(mm_comm *comm, const bench_case *bc, mm_mega_moe_buffer *buffer,
                         const mm_mega_moe_weights *weights, const run_moe_tokens *tok, rank_times *out,
                         mm_error *err) {
    const run_moe_config *cfg = &bc->cfg;
    int64_t T = cfg->tokens, H = cfg->hidden, K = cfg->topk, local = cfg->experts / cfg->ranks;
    mm_mega_moe_attrs attrs = run_moe_attrs(cfg, bc->sc);
    uint16_t *y = malloc((size_t)(T * H) * 2 + 2);
    int32_t *etn = malloc((size_t)local * 4 + 4);
    int64_t *rows = malloc((size_t)local * 8 + 8);
    mm_moe_compute_only *co = NULL;
    mm_status st = y && etn && rows ? MM_OK : cli_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for y");
    if ((st = mm_comm_agree(comm, st, err)) != MM_OK) goto done;
    int64_t xs[2] = {T, H}, ks[2] = {T, K}, es[1] = {local};
    mm_tensor x = mm_tensor_make(MM_DTYPE_BF16, 2, xs, tok->x);
    mm_tensor ids = mm_tensor_make(MM_DTYPE_I32, 2, ks, tok->ids);
    mm_tensor gates = mm_tensor_make(MM_DTYPE_F32, 2, ks, tok->weights);
    mm_tensor y_t = mm_tensor_make(MM_DTYPE_BF16, 2, xs, y);
    mm_tensor etn_t = mm_tensor_make(MM_DTYPE_I32, 1, es, etn);
    mm_mega_moe_inputs in = {&x, NULL, &ids, &gates, NULL};
    mm_mega_moe_outputs outs = {&y_t, &etn_t};
    out->comm_share = 0;
    memset(out->stage_ms, 0, sizeof out->stage_ms);
    if ((st = time_layer(comm, bc, buffer, weights, &attrs, &in, &outs, -1, out, err)) != MM_OK) goto done;
    out->recv_rows = 0;
    for (int64_t j = 0; j < local; j++) out->recv_rows += rows[j] = etn[j];
    st = mm_moe_compute_only_create(buffer, weights, &attrs, rows, cfg->shared_experts > 0 ? T : 0, tok->x, T,
                                    &co, err);
    if ((st = mm_comm_agree(comm, st, err)) != MM_OK) goto done;
    st = time_compute(comm, co, -1, out, err);
    for (int64_t it = 0; it < cfg->iterations && st == MM_OK; it++)
        for (int64_t pass = 0; pass < 2 && st == MM_OK; pass++)
            st = pass == it % 2 ? time_layer(comm, bc, buffer, weights, &attrs, &in, &outs, it, out, err)
                                : time_compute(comm, co, it, out, err);
    st = mm_comm_agree(comm, st, err);
done:
    mm_moe_compute_only_free(co);
    free(y);
    free(etn);
    free(rows);
    return st;
}

static mm_status rank_main(mm_comm *comm, const bench_case *bc, rank_times *out, mm_error *err) {
    const run_moe_config *cfg = &bc->cfg;
    mm_mega_moe_buffer *buffer = NULL;
    mm_mega_moe_weights *weights = NULL;
    run_moe_tokens tok;
    memset(&tok, 0, sizeof tok);
    mm_status st = run_moe_tokens_make(cfg, mm_comm_rank(comm), &tok, err);
    if ((st = mm_comm_agree(comm, st, err)) != MM_OK) goto done;
    mm_mega_moe_sizing sizing = {cfg->experts, cfg->tokens, cfg->topk, cfg->hidden, cfg->inter, 0};
    if ((st = mm_mega_moe_buffer_create(comm, &sizing, &buffer, err)) != MM_OK) goto done;
    st = run_moe_weights_make(comm, &bc->cfg, bc->sc, buffer, &weights, NULL, err);
    if ((st = mm_comm_agree(comm, st, err)) != MM_OK) goto done;
    st = measure(comm, bc, buffer, weights, &tok, out, err);
done:
    mm_mega_moe_weights_free(weights);
    mm_mega_moe_buffer_free(buffer, NULL);
    run_moe_tokens_free(&tok);
    return st;
}

static mm_status threads_rank(mm_comm *comm, void *arg_, mm_error *err) {
    threads_arg *arg = arg_;
    return rank_main(comm, arg->bc, &arg->times[mm_comm_rank(comm)], err);
}

/* FLOPs of one call: 2 * rows * (H * 2I + K2 * H) over routed and shared rows. */
static double call_flops(const run_moe_config *cfg, int64_t routed_rows) {
    double per_row = 2.0 * (double)cfg->hidden * (double)(2 * cfg->inter + cfg->inter);
    double shared_rows = (double)(cfg->shared_experts * cfg->tokens * cfg->ranks);
    return per_row * ((double)routed_rows + shared_rows);
}

typedef struct bench_options {
    const char *backend;
    int64_t ranks, prefill_tokens, iterations, decode[MAX_DECODE_SIZES];
    int n_decode;
    int64_t hidden, inter, experts; /* --hidden, --intermediate, --experts: 0 = the preset's */
    const char *preset, *phase, *scenario;
    uint64_t seed;
    int json;
    bench_stage_plot *plot; /* --plot: the cases drawn, else NULL */
} bench_options;

static void print_header(const char *backend, int64_t ranks, const bench_case *cases, int n) {
    printf(
        "megamoe bench mega-moe: MegaMoE layer (mm_mega_moe_run) on %lld rank%s (%s) vs its expert compute "
        "alone\n(same FFN batches on pre-placed rows, no communication); times are medians over the "
        "timed calls,\none call = first rank start to last rank end; layer and compute-only calls "
        "alternate;\npair q1-q3: quartiles of layer / compute over the pairs\n",
        (long long)ranks, cli_plural_s(ranks), backend);
    char threads[160];
    cli_threads_describe(threads, sizeof threads);
    printf("worker pool: %s\n", threads);
    char cpu[400];
    cli_cpu_describe(cpu, sizeof cpu);
    printf("cpu: %s\n", cpu);
    for (int i = 0; i < n; i++)
        if (i == 0 || cases[i].sc != cases[i - 1].sc) run_moe_print_kernels(cases[i].sc);
    /* The shape each preset runs at (--hidden/--intermediate/--experts may have changed it). */
    for (int i = 0; i < n; i++) {
        const run_moe_config *c = &cases[i].cfg;
        if (i > 0 && c->preset == cases[i - 1].cfg.preset) continue;
        int changed = c->hidden != c->preset->hidden || c->inter != c->preset->inter ||
                      c->experts != c->preset->experts;
        printf("shape of %s: H %lld, I %lld, %lld routed expert%s, top-%lld, %lld shared%s\n",
               c->preset->name, (long long)c->hidden, (long long)c->inter, (long long)c->experts,
               cli_plural_s(c->experts), (long long)c->topk, (long long)c->shared_experts,
               changed ? " (the preset's, overridden)" : "");
    }
    printf("\n");
    if (cli_json_out()) {
        cli_json j = cli_json_header("bench", "bench", "mega-moe");
        cli_json_str(&j, "backend", backend);
        cli_json_int(&j, "ranks", ranks);
        cli_json_int(&j, "iterations", n > 0 ? cases[0].cfg.iterations : 0);
        cli_json_end(&j);
    }
    printf("%-14s %-12s %-8s %7s %6s %10s %10s %7s %8s %8s %10s %8s %10s\n", "preset", "scenario", "phase",
           "tok/rk", "rows", "layer ms", "compute", "ratio", "non-exp", "disp+cmb", "tokens/s", "GFLOP/s",
           "pair q1-q3");
}

/* The q-quantile (linear between order statistics) of v[0..n); sorts v. */
static double quantile(double *v, int64_t n, double q) {
    for (int64_t i = 1; i < n; i++)
        for (int64_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    double at = q * (double)(n - 1);
    int64_t lo = (int64_t)at;
    return lo + 1 < n ? v[lo] + (at - (double)lo) * (v[lo + 1] - v[lo]) : v[lo];
}

/* Reduces (over ranks: first begin, last end) and prints one case. times[0..n) are per rank. */
static void report(const bench_options *o, const bench_case *bc, const rank_times *times, int64_t n,
                   const double (*stages)[MM_MEGA_MOE_STAGE_COUNT], int64_t stage_ranks) {
    const run_moe_config *cfg = &bc->cfg;
    double layer[MAX_ITERATIONS], compute[MAX_ITERATIONS], share = 0;
    int64_t rows = 0;
    for (int64_t it = 0; it < cfg->iterations; it++) {
        double lb = times[0].layer[it][0], le = times[0].layer[it][1];
        double cb = times[0].compute[it][0], ce = times[0].compute[it][1];
        for (int64_t r = 1; r < n; r++) {
            lb = times[r].layer[it][0] < lb ? times[r].layer[it][0] : lb;
            le = times[r].layer[it][1] > le ? times[r].layer[it][1] : le;
            cb = times[r].compute[it][0] < cb ? times[r].compute[it][0] : cb;
            ce = times[r].compute[it][1] > ce ? times[r].compute[it][1] : ce;
        }
        layer[it] = le - lb;
        compute[it] = ce - cb;
    }
    for (int64_t r = 0; r < n; r++) {
        share += times[r].comm_share / (double)n;
        rows += times[r].recv_rows;
    }
    double pair[MAX_ITERATIONS];
    for (int64_t it = 0; it < cfg->iterations; it++) pair[it] = layer[it] / compute[it];
    double q1 = quantile(pair, cfg->iterations, 0.25), q3 = quantile(pair, cfg->iterations, 0.75);
    cli_time_stats l = cli_time_stats_of(layer, (size_t)cfg->iterations);
    cli_time_stats c = cli_time_stats_of(compute, (size_t)cfg->iterations);
    double ratio = l.median / c.median;
    printf("%-14s %-12s %-8s %7lld %6lld %10.3f %10.3f %6.2fx %7.1f%% %7.1f%% %10.0f %8.1f %5.2f-%.2f\n",
           cfg->preset->name, bc->sc->name, bc->phase, (long long)cfg->tokens, (long long)rows,
           1e3 * l.median, 1e3 * c.median, ratio, 100.0 * (1.0 - c.median / l.median), 100.0 * share,
           (double)(cfg->tokens * cfg->ranks) / l.median, call_flops(cfg, rows) / l.median * 1e-9, q1, q3);
    fflush(stdout);
    if (cli_json_out()) {
        cli_json j = cli_json_row("row");
        cli_json_str(&j, "preset", cfg->preset->name);
        cli_json_str(&j, "scenario", bc->sc->name);
        cli_json_str(&j, "phase", bc->phase);
        cli_json_int(&j, "tokens_per_rank", cfg->tokens);
        cli_json_int(&j, "ranks", cfg->ranks);
        cli_json_int(&j, "hidden", cfg->hidden);
        cli_json_int(&j, "intermediate", cfg->inter);
        cli_json_int(&j, "experts", cfg->experts);
        cli_json_int(&j, "topk", cfg->topk);
        cli_json_int(&j, "rows", rows);
        cli_json_num(&j, "layer_ms", 1e3 * l.median);
        cli_json_num(&j, "compute_ms", 1e3 * c.median);
        cli_json_num(&j, "ratio", ratio);
        cli_json_num(&j, "non_expert_pct", 100.0 * (1.0 - c.median / l.median));
        cli_json_num(&j, "dispatch_combine_pct", 100.0 * share);
        cli_json_num(&j, "tokens_per_s", (double)(cfg->tokens * cfg->ranks) / l.median);
        cli_json_num(&j, "gflop_per_s", call_flops(cfg, rows) / l.median * 1e-9);
        cli_json_num(&j, "pair_q1", q1);
        cli_json_num(&j, "pair_q3", q3);
        cli_json_end(&j);
    }
    if (o->plot && o->plot->count < BENCH_PLOT_MAX_CASES) {
        bench_stage_case *k = &o->plot->cases[o->plot->count++];
        snprintf(k->label, sizeof k->label, "%s %s, %s, %lld token%s per rank", cfg->preset->name,
                 bc->sc->name, bc->phase, (long long)cfg->tokens, cli_plural_s(cfg->tokens));
        k->ranks = stage_ranks < BENCH_PLOT_MAX_RANKS ? stage_ranks : BENCH_PLOT_MAX_RANKS;
        /* the mean call, like the bars' stage times: a rank's stages lie inside each call, so no bar
         * passes the line (a median could be shorter than the mean of the stages) */
        k->layer_ms = 0;
        for (int64_t it = 0; it < cfg->iterations; it++)
            k->layer_ms += 1e3 * layer[it] / (double)cfg->iterations;
        for (int64_t r = 0; r < k->ranks; r++) memcpy(k->ms[r], stages[r], sizeof k->ms[r]);
    }
}

/* One rank per process (mpi): rank 0 gets the first begin and last end of every call over all ranks, the
 * summed share and rows, in its own times (reported as one rank). */
static mm_status reduce_over_comm(mm_comm *comm, const bench_case *bc, rank_times *t, mm_error *err) {
    mm_status st = MM_OK;
    int64_t R = mm_comm_size(comm);
    for (int64_t it = 0; it < bc->cfg.iterations && st == MM_OK; it++) {
        double lo[2] = {t->layer[it][0], t->compute[it][0]}, hi[2] = {t->layer[it][1], t->compute[it][1]};
        st = mm_comm_allreduce_f64(comm, lo, 2, MM_REDUCE_MIN, err);
        if (st == MM_OK) st = mm_comm_allreduce_f64(comm, hi, 2, MM_REDUCE_MAX, err);
        t->layer[it][0] = lo[0];
        t->compute[it][0] = lo[1];
        t->layer[it][1] = hi[0];
        t->compute[it][1] = hi[1];
    }
    double share = t->comm_share / (double)R;
    int64_t rows = t->recv_rows;
    if (st == MM_OK) st = mm_comm_allreduce_f64(comm, &share, 1, MM_REDUCE_SUM, err);
    if (st == MM_OK) st = mm_comm_allreduce_i64(comm, &rows, 1, MM_REDUCE_SUM, err);
    t->comm_share = share;
    t->recv_rows = rows;
    return st;
}

/* The cases of the options for `ranks` ranks, at most max; returns the count or -1 (usage printed). */
static int make_cases(const bench_options *o, int64_t ranks, bench_case *cases, int max) {
    static const char *const presets[] = {"qwen3-30b-a3b", "deepseek-v3"};
    int n = 0;
    for (size_t p = 0; p < 2; p++) {
        if (strcmp(o->preset, "all") != 0 && strcmp(o->preset, presets[p]) != 0) continue;
        const run_moe_preset *pr = run_moe_find_preset(presets[p]);
        const run_moe_scenario *sc = run_moe_find_scenario(o->scenario ? o->scenario : pr->default_scenario);
        if (!pr || !sc) {
            cli_usage_error(cmd, "unknown preset or scenario");
            return -1;
        }
        int64_t experts = o->experts > 0 ? o->experts : pr->experts;
        if (experts % ranks != 0) {
            cli_usage_error(cmd, "%lld ranks do not divide the %lld experts of %s", (long long)ranks,
                            (long long)experts, pr->name);
            return -1;
        }
        if (pr->topk > experts) {
            cli_usage_error(cmd, "--experts %lld is fewer than the top-k %lld of %s", (long long)experts,
                            (long long)pr->topk, pr->name);
            return -1;
        }
        for (int ph = 0; ph < 2; ph++) {
            const char *phase = ph == 0 ? "prefill" : "decode";
            if (strcmp(o->phase, "all") != 0 && strcmp(o->phase, phase) != 0) continue;
            int sizes = ph == 0 ? 1 : o->n_decode;
            for (int q = 0; q < sizes && n < max; q++) {
                bench_case *bc = &cases[n++];
                memset(bc, 0, sizeof *bc);
                bc->sc = sc;
                bc->phase = phase;
                run_moe_config *c = &bc->cfg;
                c->preset = pr;
                c->hidden = o->hidden > 0 ? o->hidden : pr->hidden;
                c->inter = o->inter > 0 ? o->inter : pr->inter;
                c->experts = experts;
                c->topk = pr->topk;
                c->shared_experts = pr->shared_experts;
                c->ranks = ranks;
                c->iterations = o->iterations;
                c->seed = o->seed;
                c->skew = 1.0;
                int64_t prefill = o->prefill_tokens > 0 ? o->prefill_tokens : (p == 0 ? 512 : 128);
                c->tokens = ph == 0 ? prefill : o->decode[q];
            }
        }
    }
    if (n == 0) {
        cli_usage_error(cmd, "no case: --preset %s --phase %s", o->preset, o->phase);
        return -1;
    }
    return n;
}

static int parse_decode(const char *command, const char *option, const char *text, void *target) {
    bench_options *o = target;
    return cli_parse_int64_list(command, option, text, 1, 4096, o->decode, MAX_DECODE_SIZES, &o->n_decode,
                                "size");
}

static int parse_phase(const char *command, const char *option, const char *text, void *target) {
    if (strcmp(text, "prefill") != 0 && strcmp(text, "decode") != 0 && strcmp(text, "all") != 0)
        return cli_usage_error(command, "%s '%s' is not prefill, decode or all", option, text);
    *(const char **)target = text;
    return 0;
}

static int run_threads(const bench_options *o) {
    bench_case cases[2 * (MAX_DECODE_SIZES + 1)];
    int n = make_cases(o, o->ranks, cases, (int)(sizeof cases / sizeof cases[0]));
    if (n < 0) return MM_CLI_EXIT_USAGE;
    threads_arg *arg = calloc(1, sizeof *arg);
    if (!arg) {
        cli_error(cmd, "out of memory");
        return MM_CLI_EXIT_FAILURE;
    }
    print_header("threads", o->ranks, cases, n);
    double(*stages)[MM_MEGA_MOE_STAGE_COUNT] = calloc((size_t)o->ranks, sizeof *stages);
    if (!stages) {
        free(arg);
        cli_error(cmd, "out of memory");
        return MM_CLI_EXIT_FAILURE;
    }
    int rc = MM_CLI_EXIT_OK;
    for (int i = 0; i < n && rc == MM_CLI_EXIT_OK; i++) {
        mm_error err;
        mm_error_clear(&err);
        arg->bc = &cases[i];
        if (mm_comm_run_threads((int)o->ranks, threads_rank, arg, NULL, NULL, &err) != MM_OK)
            rc = cli_report(cmd, &err);
        else {
            for (int64_t r = 0; r < o->ranks; r++)
                memcpy(stages[r], arg->times[r].stage_ms, sizeof stages[r]);
            report(o, &cases[i], arg->times, o->ranks, (const double(*)[MM_MEGA_MOE_STAGE_COUNT])stages,
                   o->ranks);
        }
    }
    free(stages);
    free(arg);
    return rc;
}

typedef struct launched_bench {
    const bench_options *o;
    int rc;
} launched_bench;

/* One process of a launched backend (mpi: under mpirun): its rank of every case; rank 0 reports. */
static mm_status bench_process(mm_comm *comm, void *arg, mm_error *err) {
    launched_bench *lb = arg;
    const bench_options *o = lb->o;
    int rank = mm_comm_rank(comm), size = mm_comm_size(comm), rc = MM_CLI_EXIT_OK;
    char what[64];
    snprintf(what, sizeof what, "%s processes", mm_comm_backend_name(comm));
    bench_case cases[2 * (MAX_DECODE_SIZES + 1)];
    int n = make_cases(o, size, cases, (int)(sizeof cases / sizeof cases[0]));
    if (n < 0) rc = MM_CLI_EXIT_USAGE;
    if (rc == MM_CLI_EXIT_OK && rank == 0) print_header(what, size, cases, n);
    for (int i = 0; i < n && rc == MM_CLI_EXIT_OK; i++) {
        rank_times t;
        memset(&t, 0, sizeof t);
        mm_status st = rank_main(comm, &cases[i], &t, err);
        if (st == MM_OK) st = reduce_over_comm(comm, &cases[i], &t, err);
        /* --plot: every rank's stage times (an allgather: one row per rank; an allreduce would carry at
         * most MM_COMM_ALLREDUCE_MAX values). */
        static double stages[MM_COMM_MAX_RANKS][MM_MEGA_MOE_STAGE_COUNT];
        memset(stages, 0, sizeof stages);
        if (st == MM_OK && o->plot) st = mm_comm_allgather(comm, t.stage_ms, sizeof t.stage_ms, stages, err);
        if (st != MM_OK)
            rc = rank == 0 ? cli_report(cmd, err) : cli_exit_status(st);
        else if (rank == 0)
            report(o, &cases[i], &t, 1, (const double(*)[MM_MEGA_MOE_STAGE_COUNT])stages, size);
    }
    lb->rc = rc;
    mm_error_clear(err); /* reported above by rank 0; the exit status carries the rest */
    return MM_OK;
}

static int run_launched(const bench_options *o) {
    launched_bench lb = {o, MM_CLI_EXIT_OK};
    mm_error err;
    mm_error_clear(&err);
    if (mm_comm_launch(o->backend, 0, bench_process, &lb, &err) != MM_OK) return cli_report(cmd, &err);
    return lb.rc;
}

int mm_bench_mega_moe_main(int argc, char **argv) {
    bench_options o = {"threads", 4, 0, 9, {1, 8}, 2, 0, 0, 0, "all", "all", NULL, 1, 0, NULL};
    const char *plot_path = NULL;
    const cli_option options[] = {
        CLI_BACKEND_OPTION(&o.backend),
        CLI_INT64_OPTION("ranks", &o.ranks, 1, MM_COMM_MAX_RANKS),
        CLI_TEXT_OPTION("preset", &o.preset),
        CLI_CUSTOM_OPTION("phase", parse_phase, &o.phase),
        CLI_INT64_OPTION("prefill-tokens", &o.prefill_tokens, 1, 65536),
        CLI_INT64_OPTION("hidden", &o.hidden, 1, 65536),
        CLI_INT64_OPTION("intermediate", &o.inter, 1, 65536),
        CLI_INT64_OPTION("experts", &o.experts, 1, 4096),
        CLI_CUSTOM_OPTION("decode-tokens", parse_decode, &o),
        CLI_CUSTOM_OPTION("scenario", run_moe_parse_scenario, &o.scenario),
        CLI_INT64_OPTION("iterations", &o.iterations, 1, MAX_ITERATIONS),
        CLI_SEED_OPTION(&o.seed),
        CLI_THREADS_OPTION,
        CLI_FLAG_OPTION("json", &o.json),
        CLI_TEXT_OPTION("plot", &plot_path),
    };
    int done = cli_options_parse(cmd, usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (strcmp(o.preset, "all") != 0 && strcmp(o.preset, "qwen3-30b-a3b") != 0 &&
        strcmp(o.preset, "deepseek-v3") != 0)
        return cli_usage_error(cmd, "--preset '%s' is not qwen3-30b-a3b, deepseek-v3 or all", o.preset);
    if (o.json && cli_json_redirect(cmd) != 0) return MM_CLI_EXIT_FAILURE;
    if (plot_path && !(o.plot = calloc(1, sizeof *o.plot))) {
        cli_error(cmd, "out of memory");
        return MM_CLI_EXIT_FAILURE;
    }
    if (o.plot) o.plot->path = plot_path, o.plot->backend = o.backend;
    int rc = cli_backend_is_threads(o.backend) ? run_threads(&o) : run_launched(&o);
    /* Under a launcher only rank 0 reports, so only it has cases to draw. */
    if (rc == MM_CLI_EXIT_OK && o.plot && o.plot->count > 0 && bench_stage_plot_write(o.plot, cmd) != 0)
        rc = MM_CLI_EXIT_FAILURE;
    free(o.plot);
    return rc;
}
