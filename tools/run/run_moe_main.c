/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_main.c: `megamoe run` (--op mega-moe, the default): options and the threads driver
 * (the driver for launched backends such as MPI is run_moe_mpi.c, the table run_moe_report.c).
 *
 * Per scenario: every rank builds its experts and tokens, runs one warm-up call and --iterations timed
 * calls of mm_mega_moe_run; rank 0 (the main thread with threads) then checks a sample of tokens of
 * every rank against the float64 reference and prints one table row. Times: per stage the mean over
 * ranks of the stage's summed events, and the total wall time of a call from the first rank's start to
 * the last rank's end; each the median over the timed iterations. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli_progress.h"
#include "common/cli_threads.h"
#include "common/cli_util.h"
#include "run/run_moe.h"
#include "run/run_ops.h"

static const char *const cmd = "run";

static void print_usage(void) {
    printf(
        "usage: megamoe run [--op mega-moe] [options]\n"
        "\n"
        "Runs a MegaMoE layer (dispatch + expert FFN + combine, mm_mega_moe_run) shaped like a real model\n"
        "on R ranks with seeded random weights and skewed softmax top-k routing: one warm-up call, then\n"
        "--iterations timed calls; a sample of each rank's tokens is checked against the float64\n"
        "reference. Prints one row per scenario: per-stage times, tokens/s, GFLOP/s, error.\n"
        "`megamoe run --model DIR` runs a Hugging Face checkpoint's MoE layer instead (--model DIR --help).\n"
        "\n"
        "options:\n"
        "      --preset NAME      model shape (default qwen3-30b-a3b):\n");
    for (size_t i = 0; i < run_moe_preset_count; i++) {
        const run_moe_preset *p = &run_moe_presets[i];
        printf("                           %-14s H %lld, I %lld, %lld experts", p->name, (long long)p->hidden,
               (long long)p->inter, (long long)p->experts);
        if (p->experts != p->model_experts) printf(" (of %lld)", (long long)p->model_experts);
        printf(", top-%lld, %s", (long long)p->topk, mm_mega_moe_activation_name(p->activation));
        if (p->shared_experts) printf(", %lld shared", (long long)p->shared_experts);
        printf(", %s\n", p->default_scenario);
    }
    printf("      --scenario NAME    one of");
    for (int i = 0, column = 32; i < mm_moe_scenario_count; i++) {
        const char *name = mm_moe_scenario_table[i].spec_name;
        if (column + 1 + (int)strlen(name) > 100) { /* wrap under the option's text */
            printf("\n                        ");
            column = 24;
        }
        column += printf(" %s", name);
    }
    printf(",\n"
           "                         or all (default: the preset's); a16w8-fp8, a16w4-mx, a16w4-int are\n"
           "                         the A16 weight-only checkpoint formats (docs/weight_formats.md)\n"
           "      --bias             bias1 / bias2 on every expert, any scenario (a8w4-int has its own)\n"
           "      --weight1-interleave\n"
           "                         weight1's gate/up channels stored alternating (gpt-oss's gate_up_proj)\n"
           "      --scale-block-n N, --scale-block-k K\n"
           "                         F32 block size of a16w8-fp8 / a16w4-int weights (default 128 x 128\n"
           "                         for a16w8-fp8, 1 x 128 for a16w4-int)\n"
           "      --ranks R          ranks as threads (default 4; --backend mpi: the processes)\n"
           "      --tokens T         tokens per rank (default: the preset's, a few seconds in all)\n"
           "      --experts E        routed experts loaded (a multiple of R; default: the preset's)\n"
           "      --hidden H, --intermediate I\n"
           "                         override the preset's H and I (quick tests, what-if shapes)\n"
           "      --iterations N     timed calls (default 3; one warm-up call first, not counted)\n"
           "      --seed S           seed of weights, tokens and routing (default 1)\n"
           "      --skew X           spread of the per-expert routing bias, 0 = uniform (default 1.0)\n"
           "      --backend NAME     threads (default) or mpi (run under mpirun, one rank per process)\n"
           "      --threads N        worker-pool threads of each process, the caller included (default:\n"
           "                         MEGAMOE_NUM_THREADS, else the CPUs of the affinity mask within the\n"
           "                         cgroup CPU quota; docs/threads.md)\n"
           "      --trace FILE       write a Chrome/Perfetto JSON trace: one track per rank with setup,\n"
           "                         calls, stages, expert batches (ids, rows) and arrows from each\n"
           "                         dispatch to the experts it feeds; the check (open in ui.perfetto.dev)\n"
           "      --combine-quant-mode Q\n"
           "                         0 (default) BF16; 3 / 4: routed rows sent back as MX FP8 E5M2 / E4M3\n"
           "      --combine-comm-mode M\n"
           "                         0 (default) every routed row to its home rank; 1 rows summed per\n"
           "                         source rank first (flat topology); 2 summed per domain of\n"
           "                         --rank-num-per-server ranks (layered topology)\n"
           "      --rank-num-per-server N\n"
           "                         domain size of the layered topology (divides R; default 0: flat)\n"
           "      --topk-weights-type T\n"
           "                         0 (default) top-k weights applied at combine, 1 after the activation\n"
           "      --check-tokens N   tokens per rank checked against the reference (default: preset's)\n"
           "      --no-check         skip the reference check\n"
           "      --json             JSON Lines on stdout: a header object, then one object per scenario\n"
           "                         (schema: docs/cli.md)\n"
           "      --quiet            no progress line on a terminal (there is none when stderr is not one)\n"
           "  -h, --help             show this help\n\n");
    cli_run_print_ops(stdout);
}

/* ---- options --------------------------------------------------------------------------------- */

static int parse_options(int argc, char **argv, run_moe_options *o) {
    enum {
        OPT_PRESET = 500,
        OPT_SCENARIO,
        OPT_RANKS,
        OPT_TOKENS,
        OPT_EXPERTS,
        OPT_HIDDEN,
        OPT_INTERMEDIATE,
        OPT_ITERATIONS,
        OPT_SEED,
        OPT_SKEW,
        OPT_BACKEND,
        OPT_TRACE,
        OPT_CHECK_TOKENS,
        OPT_NO_CHECK,
        OPT_COMBINE_QUANT,
        OPT_COMBINE_COMM,
        OPT_RANKS_PER_SERVER,
        OPT_TOPK_WEIGHTS_TYPE,
        OPT_THREADS,
        OPT_JSON,
        OPT_QUIET,
        OPT_BIAS,
        OPT_INTERLEAVE,
        OPT_BLOCK_N,
        OPT_BLOCK_K
    };
    static const struct option long_options[] = {
        {"preset", required_argument, NULL, OPT_PRESET},
        {"scenario", required_argument, NULL, OPT_SCENARIO},
        {"ranks", required_argument, NULL, OPT_RANKS},
        {"tokens", required_argument, NULL, OPT_TOKENS},
        {"experts", required_argument, NULL, OPT_EXPERTS},
        {"hidden", required_argument, NULL, OPT_HIDDEN},
        {"intermediate", required_argument, NULL, OPT_INTERMEDIATE},
        {"iterations", required_argument, NULL, OPT_ITERATIONS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"skew", required_argument, NULL, OPT_SKEW},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"trace", required_argument, NULL, OPT_TRACE},
        {"check-tokens", required_argument, NULL, OPT_CHECK_TOKENS},
        {"no-check", no_argument, NULL, OPT_NO_CHECK},
        {"combine-quant-mode", required_argument, NULL, OPT_COMBINE_QUANT},
        {"combine-comm-mode", required_argument, NULL, OPT_COMBINE_COMM},
        {"rank-num-per-server", required_argument, NULL, OPT_RANKS_PER_SERVER},
        {"topk-weights-type", required_argument, NULL, OPT_TOPK_WEIGHTS_TYPE},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"json", no_argument, NULL, OPT_JSON},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"bias", no_argument, NULL, OPT_BIAS},
        {"weight1-interleave", no_argument, NULL, OPT_INTERLEAVE},
        {"scale-block-n", required_argument, NULL, OPT_BLOCK_N},
        {"scale-block-k", required_argument, NULL, OPT_BLOCK_K},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    o->cfg.preset = &run_moe_presets[0];
    o->cfg.ranks = 4;
    o->backend = "threads";
    o->cfg.iterations = 3;
    o->cfg.seed = 1;
    o->cfg.skew = 1.0;
    o->tokens = o->experts = o->check_tokens = o->hidden = o->inter = -1;
    int64_t v;
    int opt;
    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        switch (opt) {
        case OPT_PRESET:
            o->cfg.preset = run_moe_find_preset(optarg);
            if (!o->cfg.preset) {
                char names[256] = "";
                for (size_t i = 0; i < run_moe_preset_count; i++) {
                    if (i) strncat(names, ", ", sizeof names - strlen(names) - 1);
                    strncat(names, run_moe_presets[i].name, sizeof names - strlen(names) - 1);
                }
                cli_error(cmd, "--preset '%s' is not a preset (one of: %s)", optarg, names);
                return -1;
            }
            break;
        case OPT_SCENARIO:
            if (strcmp(optarg, "all") != 0 && !run_moe_find_scenario(optarg)) {
                cli_error(cmd, "--scenario '%s' is not a scenario (see 'megamoe run --help')", optarg);
                return -1;
            }
            o->scenario = optarg;
            break;
        case OPT_RANKS:
            if (cli_parse_int64(cmd, "--ranks", optarg, 1, MM_COMM_MAX_RANKS, &o->cfg.ranks) != 0) return -1;
            o->ranks_given = 1;
            break;
        case OPT_TOKENS:
            if (cli_parse_int64(cmd, "--tokens", optarg, 1, 1 << 20, &o->tokens) != 0) return -1;
            break;
        case OPT_EXPERTS:
            if (cli_parse_int64(cmd, "--experts", optarg, 1, 4096, &o->experts) != 0) return -1;
            break;
        case OPT_HIDDEN:
            if (cli_parse_int64(cmd, "--hidden", optarg, 1, 65536, &o->hidden) != 0) return -1;
            break;
        case OPT_INTERMEDIATE:
            if (cli_parse_int64(cmd, "--intermediate", optarg, 1, 65536, &o->inter) != 0) return -1;
            break;
        case OPT_ITERATIONS:
            if (cli_parse_int64(cmd, "--iterations", optarg, 1, 1000, &o->cfg.iterations) != 0) return -1;
            break;
        case OPT_SEED:
            if (cli_parse_int64(cmd, "--seed", optarg, 0, INT64_MAX, &v) != 0) return -1;
            o->cfg.seed = (uint64_t)v;
            break;
        case OPT_SKEW:
            if (cli_parse_double(cmd, "--skew", optarg, 0.0, 10.0, &o->cfg.skew) != 0) return -1;
            break;
        case OPT_BACKEND:
            if (cli_parse_backend(cmd, optarg, &o->backend) != 0) return -1;
            break;
        case OPT_TRACE: o->cfg.trace_path = optarg; break;
        case OPT_CHECK_TOKENS:
            if (cli_parse_int64(cmd, "--check-tokens", optarg, 0, 1 << 20, &o->check_tokens) != 0) return -1;
            break;
        case OPT_NO_CHECK: o->no_check = 1; break;
        case OPT_COMBINE_QUANT:
            if (cli_parse_int64(cmd, "--combine-quant-mode", optarg, 0, 4, &v) != 0) return -1;
            if (v != 0 && v != 3 && v != 4) {
                cli_usage_error(cmd, "--combine-quant-mode %lld is not 0 (BF16), 3 (MX E5M2) or 4 (MX E4M3)",
                                (long long)v);
                return -1;
            }
            o->cfg.combine_quant_mode = (int)v;
            break;
        case OPT_COMBINE_COMM:
            if (cli_parse_int64(cmd, "--combine-comm-mode", optarg, 0, 2, &v) != 0) return -1;
            o->cfg.combine_comm_mode = (int)v;
            break;
        case OPT_RANKS_PER_SERVER:
            if (cli_parse_int64(cmd, "--rank-num-per-server", optarg, 0, MM_COMM_MAX_RANKS,
                                &o->cfg.rank_num_per_server) != 0)
                return -1;
            break;
        case OPT_TOPK_WEIGHTS_TYPE:
            if (cli_parse_int64(cmd, "--topk-weights-type", optarg, 0, 1, &v) != 0) return -1;
            o->cfg.topk_weights_type = (int)v;
            break;
        case OPT_THREADS:
            if (cli_parse_threads(cmd, optarg) != 0) return -1;
            break;
        case OPT_JSON: o->cfg.json = 1; break;
        case OPT_QUIET: cli_progress_quiet(); break;
        case OPT_BIAS: o->cfg.bias = 1; break;
        case OPT_INTERLEAVE: o->cfg.weight1_interleave = 1; break;
        case OPT_BLOCK_N:
            if (cli_parse_int64(cmd, "--scale-block-n", optarg, 1, 65536, &o->cfg.scale_block_n) != 0)
                return -1;
            break;
        case OPT_BLOCK_K:
            if (cli_parse_int64(cmd, "--scale-block-k", optarg, 1, 65536, &o->cfg.scale_block_k) != 0)
                return -1;
            break;
        case 'h': print_usage(); return 1;
        default: cli_option_error(cmd, opt, argv); return -1;
        }
    }
    if (optind < argc) {
        cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
        return -1;
    }
    return 0;
}

/* Applies the preset and the overrides once the rank count is known (mpi: the process count). */
int run_moe_finish_config(run_moe_options *o, int speak) {
    run_moe_config *c = &o->cfg;
    const run_moe_preset *p = c->preset;
    c->hidden = o->hidden > 0 ? o->hidden : p->hidden;
    c->inter = o->inter > 0 ? o->inter : p->inter;
    c->topk = p->topk;
    c->shared_experts = p->shared_experts;
    c->experts = o->experts > 0 ? o->experts : p->experts;
    c->tokens = o->tokens > 0 ? o->tokens : p->default_tokens;
    c->check_tokens = o->no_check ? 0 : o->check_tokens >= 0 ? o->check_tokens : p->default_check_tokens;
    if (c->experts % c->ranks != 0) {
        if (speak)
            cli_error(cmd, "--experts %lld is not a multiple of the %lld ranks", (long long)c->experts,
                      (long long)c->ranks);
        return -1;
    }
    if (c->topk > c->experts) {
        if (speak)
            cli_error(cmd, "--experts %lld is below the preset's top-k %lld", (long long)c->experts,
                      (long long)c->topk);
        return -1;
    }
    return 0;
}

/* Refuses a run that would not fit in memory, before anything is allocated (an out-of-memory kill on
 * a shared machine may take other processes with it). The need is the weights' part plus the symmetric
 * buffers of every rank, sized by the library's own rule (mm_mega_moe_buffer_bytes_for), which grow
 * with --tokens (about 0.65 MB per token on the default preset). Measured weight peaks were 2.4x to
 * 2.8x the weight bytes (packed weights, every rank's generated copy while packing, the check), so the
 * weights count 3x. Ranks of an MPI job are counted as if on this machine, as the weights are. The need
 * must stay under 3/4 of the physical memory. Returns 0 when it fits (or the memory size is unknown). */
int run_moe_memory_fits(const run_moe_config *cfg, const run_moe_scenario *sc, int speak) {
    double weights = 3.0 * (double)cfg->experts * 3.0 * (double)cfg->hidden * (double)cfg->inter *
                     (double)mm_dtype_bits(sc->weight_dtype) / 8.0;
    mm_mega_moe_sizing sizing = {.moe_expert_num = cfg->experts,
                                 .num_max_tokens_per_rank = cfg->tokens > 0 ? cfg->tokens : 1,
                                 .topk = cfg->topk,
                                 .hidden = cfg->hidden,
                                 .intermediate_hidden = cfg->inter};
    size_t per_rank = mm_mega_moe_buffer_bytes_for(&sizing, (int)cfg->ranks, cfg->combine_comm_mode == 2);
    /* 0: a sizing too large to count in size_t, which certainly does not fit */
    double buffers = per_rank ? (double)per_rank * (double)cfg->ranks : 1e30;
    double need = weights + buffers;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
    if (have > 0.0 && need > 0.75 * have) {
        if (speak)
            cli_error(cmd,
                      "%s: %lld experts of H %lld x I %lld and %lld tokens per rank on %lld ranks need about "
                      "%.1f GB (weights and their generated copies %.1f GB, symmetric buffers %.1f GB), more "
                      "than 3/4 of the %.1f GB of memory; load fewer with --experts or --tokens",
                      sc->spec_name, (long long)cfg->experts, (long long)cfg->hidden, (long long)cfg->inter,
                      (long long)cfg->tokens, (long long)cfg->ranks, need * 1e-9, weights * 1e-9,
                      buffers >= 1e29 ? INFINITY : buffers * 1e-9, have * 1e-9);
        return -1;
    }
    return 0;
}

/* The scenarios to run: one, or all of them. */
size_t run_moe_scenario_list(const run_moe_options *o, const run_moe_scenario **list) {
    const char *name = o->scenario ? o->scenario : o->cfg.preset->default_scenario;
    if (strcmp(name, "all") == 0) {
        size_t n = 0;
        for (int i = 0; i < mm_moe_scenario_count; i++) list[n++] = &mm_moe_scenario_table[i];
        return n;
    }
    list[0] = run_moe_find_scenario(name);
    return 1;
}

/* ---- one scenario on all ranks ---------------------------------------------------------------- */

typedef struct scenario_job {
    const run_moe_config *cfg;
    const run_moe_scenario *sc;
    run_moe_rank_result *results; /* one per rank */
} scenario_job;

static mm_status rank_main(mm_comm *comm, void *arg, mm_error *err) {
    scenario_job *job = arg;
    return run_moe_rank(comm, job->cfg, job->sc, &job->results[mm_comm_rank(comm)], err);
}

static int run_threads(run_moe_options *o) {
    run_moe_config *cfg = &o->cfg;
    if (run_moe_finish_config(o, 1) != 0) return MM_CLI_EXIT_USAGE;
    const run_moe_scenario *list[16];
    size_t count = run_moe_scenario_list(o, list);
    for (size_t i = 0; i < count; i++)
        if (run_moe_memory_fits(cfg, list[i], 1) != 0) return MM_CLI_EXIT_USAGE;
    run_moe_report report;
    memset(&report, 0, sizeof report);
    run_moe_trace trace;
    if (cfg->trace_path && run_moe_trace_open(&trace, cfg->trace_path, cfg->ranks) != 0) {
        cli_error(cmd, "cannot write the trace '%s'", cfg->trace_path);
        return MM_CLI_EXIT_FAILURE;
    }
    run_moe_print_banner(cfg, "threads", list, count);
    run_moe_print_header(cfg);
    int rc = MM_CLI_EXIT_OK;
    for (size_t i = 0; i < count; i++) {
        mm_error err;
        mm_error_clear(&err);
        run_moe_rank_result *res = run_moe_results_alloc(cfg, cfg->ranks, &err);
        if (!res) {
            cli_error(cmd, "no memory for the results");
            rc = MM_CLI_EXIT_FAILURE;
            break;
        }
        scenario_job job = {cfg, list[i], res};
        cli_progress_begin("%s: generating and packing weights, %lld timed call%s", list[i]->spec_name,
                           (long long)cfg->iterations, cli_plural_s(cfg->iterations));
        mm_status st = mm_comm_run_threads((int)cfg->ranks, rank_main, &job, NULL, NULL, &err);
        cli_progress_end();
        int this_rc = MM_CLI_EXIT_OK;
        if (st != MM_OK) {
            const char *message = err.message; /* an agreed operator error already names its rank */
            run_moe_print_not_run(cfg, list[i]->spec_name, message);
            cli_error(cmd, "%s: %s", list[i]->spec_name, message);
            this_rc = cli_exit_status(st);
        } else {
            this_rc = run_moe_report_scenario(cfg, list[i], res, cfg->trace_path ? &trace : NULL, &report, i);
        }
        if (rc == MM_CLI_EXIT_OK) rc = this_rc;
        run_moe_results_free(res, cfg->ranks);
    }
    run_moe_print_notes(cfg, report.notes, count);
    free(report.a16w16_y);
    if (cfg->trace_path) {
        if (run_moe_trace_close(&trace) != 0) {
            cli_error(cmd, "error writing the trace '%s'", cfg->trace_path);
            if (rc == MM_CLI_EXIT_OK) rc = MM_CLI_EXIT_FAILURE;
        } else if (!cfg->json) {
            printf("\ntrace: %s (one track per rank; open in ui.perfetto.dev)\n", cfg->trace_path);
        }
    }
    return rc;
}

int cli_run_mega_moe_main(int argc, char **argv) {
    run_moe_options o;
    int parsed = parse_options(argc, argv, &o);
    if (parsed != 0) return parsed > 0 ? MM_CLI_EXIT_OK : MM_CLI_EXIT_USAGE;
    return cli_backend_is_threads(o.backend) ? run_threads(&o) : run_moe_run_launched(&o);
}
