/* tools/run_moe_main.c: `megamoe run` (--op mega-moe, the default): options, the ranks (threads of
 * this process, or MPI processes under mpirun), the check and the table.
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

#ifdef MEGAMOE_HAVE_MPI
#include <mpi.h>
#endif

#include "cli_util.h"
#include "megamoe/formats.h"
#include "run_moe.h"
#include "run_ops.h"
#include "timing.h"

static const char *const cmd = "run";

static void print_usage(void) {
    printf(
        "usage: megamoe run [--op mega-moe] [options]\n"
        "\n"
        "Runs a MegaMoE layer (dispatch + expert FFN + combine, mm_mega_moe_run) shaped like a real model\n"
        "on R ranks with seeded random weights and skewed softmax top-k routing: one warm-up call, then\n"
        "--iterations timed calls; a sample of each rank's tokens is checked against the float64\n"
        "reference. Prints one row per scenario: per-stage times, tokens/s, GFLOP/s, error.\n"
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
    for (size_t i = 0; i < run_moe_scenario_count; i++) printf(" %s", run_moe_scenarios[i].name);
    printf(",\n"
           "                         or all (default: the preset's)\n"
           "      --ranks R          ranks as threads (default 4; --backend mpi: the processes)\n"
           "      --tokens T         tokens per rank (default: the preset's, a few seconds in all)\n"
           "      --experts E        routed experts loaded (a multiple of R; default: the preset's)\n"
           "      --hidden H, --intermediate I\n"
           "                         override the preset's H and I (quick tests, what-if shapes)\n"
           "      --iterations N     timed calls (default 3; one warm-up call first, not counted)\n"
           "      --seed S           seed of weights, tokens and routing (default 1)\n"
           "      --skew X           spread of the per-expert routing bias, 0 = uniform (default 1.0)\n"
           "      --backend NAME     threads (default) or mpi (run under mpirun, one rank per process)\n"
           "      --trace FILE       write a Chrome/Perfetto JSON trace: one track per rank, one slice\n"
           "                         per call and per stage (open in ui.perfetto.dev)\n"
           "      --check-tokens N   tokens per rank checked against the reference (default: preset's)\n"
           "      --no-check         skip the reference check\n"
           "  -h, --help             show this help\n\n");
    cli_run_print_ops(stdout);
}

/* ---- options --------------------------------------------------------------------------------- */

typedef struct run_options {
    run_moe_config cfg;
    const char *scenario; /* NULL: the preset's */
    int mpi;
    int64_t tokens, experts, check_tokens, hidden, inter; /* -1: the preset's */
    int no_check;
} run_options;

static int parse_options(int argc, char **argv, run_options *o) {
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
        OPT_NO_CHECK
    };
    static const struct option long_options[] = {{"preset", required_argument, NULL, OPT_PRESET},
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
                                                 {"help", no_argument, NULL, 'h'},
                                                 {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    o->cfg.preset = &run_moe_presets[0];
    o->cfg.ranks = 4;
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
            if (strcmp(optarg, "mpi") == 0)
                o->mpi = 1;
            else if (strcmp(optarg, "threads") == 0)
                o->mpi = 0;
            else {
                cli_error(cmd, "--backend '%s' is not a backend (threads or mpi)", optarg);
                return -1;
            }
            break;
        case OPT_TRACE: o->cfg.trace_path = optarg; break;
        case OPT_CHECK_TOKENS:
            if (cli_parse_int64(cmd, "--check-tokens", optarg, 0, 1 << 20, &o->check_tokens) != 0) return -1;
            break;
        case OPT_NO_CHECK: o->no_check = 1; break;
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
static int finish_config(run_options *o, int speak) {
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

static double median_of(double *v, int64_t n) {
    return cli_time_stats_of(v, (size_t)n).median;
}

/* Prints the table header (once). */
static void print_header(void) {
    printf("%-15s %7s %9s %9s %9s %9s %9s %9s %10s %9s %8s %9s %7s %7s %9s\n", "scenario", "tokens",
           "dispatch", "gemm1", "activ.", "gemm2", "shared", "combine", "total ms", "tokens/s", "GFLOP/s",
           "maxerr/rms", "<=1ulp", "in tol", "vs a16w16");
}

static void print_row(const run_moe_config *cfg, const run_moe_scenario *sc, const run_moe_rank_result *res,
                      const run_moe_errors *errors, double vs_a16w16) {
    int64_t R = cfg->ranks, N = cfg->iterations;
    double stage_ms[MM_MEGA_MOE_STAGE_COUNT], samples[1000], walls[1000];
    for (int s = 0; s < MM_MEGA_MOE_STAGE_COUNT; s++) {
        for (int64_t it = 0; it < N; it++) {
            double sum = 0.0;
            for (int64_t r = 0; r < R; r++) sum += res[r].stats[it].seconds[s];
            samples[it] = sum / (double)R;
        }
        stage_ms[s] = median_of(samples, N) * 1e3;
    }
    for (int64_t it = 0; it < N; it++) {
        double begin = res[0].stats[it].total_begin, end = res[0].stats[it].total_end;
        for (int64_t r = 1; r < R; r++) {
            begin = fmin(begin, res[r].stats[it].total_begin);
            end = fmax(end, res[r].stats[it].total_end);
        }
        walls[it] = end - begin;
    }
    double wall = median_of(walls, N);
    int64_t tokens = cfg->tokens * R;
    /* two FLOPs per multiply-add: GEMM1 (H x 2I) and GEMM2 (I x H) for every routed and shared row */
    double flops = 2.0 * (double)tokens * (double)(cfg->topk + cfg->shared_experts) *
                   (double)(cfg->hidden * 2 * cfg->inter + cfg->inter * cfg->hidden);
    printf("%-15s %7lld %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f %9.0f %8.1f", sc->name, (long long)tokens,
           stage_ms[MM_MEGA_MOE_STAGE_DISPATCH], stage_ms[MM_MEGA_MOE_STAGE_GEMM1],
           stage_ms[MM_MEGA_MOE_STAGE_ACTIVATION], stage_ms[MM_MEGA_MOE_STAGE_GEMM2],
           stage_ms[MM_MEGA_MOE_STAGE_SHARED], stage_ms[MM_MEGA_MOE_STAGE_COMBINE], wall * 1e3,
           (double)tokens / wall, flops / wall * 1e-9);
    if (errors)
        printf(" %9.2e %6.1f%% %6.1f%%", errors->max_abs_over_rms, errors->within_ulp * 100.0,
               errors->within_tolerance * 100.0);
    else
        printf(" %9s %7s %7s", "-", "-", "-");
    if (vs_a16w16 >= 0.0)
        printf(" %9.2e\n", vs_a16w16);
    else
        printf(" %9s\n", "-");
    fflush(stdout);
}

/* What the report keeps across the scenarios of one run. */
typedef struct run_report {
    char notes[16][160]; /* per scenario: setup and check times, printed under the table */
    uint16_t *a16w16_y;  /* the A16W16 outputs of the samples, when that scenario ran first */
    int64_t a16w16_values;
} run_report;

/* Relative RMS difference of this scenario's sample outputs from A16W16's on the same tokens and the
 * same BF16 master weights (the cost of quantization); -1 when A16W16 did not run before. Keeps the
 * A16W16 outputs when sc is A16W16. */
static double compare_with_a16w16(const run_moe_config *cfg, const run_moe_scenario *sc,
                                  const run_moe_rank_result *res, run_report *report) {
    int64_t H = cfg->hidden, values = 0;
    for (int64_t r = 0; r < cfg->ranks; r++) values += res[r].sample_count * H;
    if (sc->weight_dtype == MM_DTYPE_BF16) {
        free(report->a16w16_y);
        report->a16w16_y = malloc((size_t)values * 2 + 2);
        report->a16w16_values = report->a16w16_y ? values : 0;
        for (int64_t r = 0, at = 0; report->a16w16_y && r < cfg->ranks; r++) {
            memcpy(report->a16w16_y + at, res[r].sample_y, (size_t)(res[r].sample_count * H) * 2);
            at += res[r].sample_count * H;
        }
        return -1.0;
    }
    if (!report->a16w16_y || report->a16w16_values != values || values == 0) return -1.0;
    double diff = 0.0, norm = 0.0;
    for (int64_t r = 0, at = 0; r < cfg->ranks; r++)
        for (int64_t i = 0; i < res[r].sample_count * H; i++, at++) {
            double a = mm_bf16_to_f32(res[r].sample_y[i]), b = mm_bf16_to_f32(report->a16w16_y[at]);
            diff += (a - b) * (a - b);
            norm += b * b;
        }
    return norm > 0.0 ? sqrt(diff / norm) : -1.0;
}

/* Check and report of one scenario whose results are all on this process. Returns the exit status. */
static int report_scenario(const run_moe_config *cfg, const run_moe_scenario *sc, run_moe_rank_result *res,
                           run_moe_trace *trace, run_report *report, size_t index) {
    char *notes = report->notes[index];
    size_t notes_size = sizeof report->notes[index];
    run_moe_errors errors;
    int rc = MM_CLI_EXIT_OK;
    int checked = cfg->check_tokens > 0;
    double check_begin = cli_now_seconds();
    if (checked) {
        mm_error err;
        mm_error_clear(&err);
        if (run_moe_check(cfg, sc, res, &errors, &err) != MM_OK) {
            cli_error(cmd, "%s: reference check failed: %s", sc->name, err.message);
            return cli_exit_status(err.status);
        }
        if (!(errors.within_tolerance >= 1.0)) rc = MM_CLI_EXIT_FAILURE;
    }
    double check_seconds = cli_now_seconds() - check_begin;
    print_row(cfg, sc, res, checked ? &errors : NULL, compare_with_a16w16(cfg, sc, res, report));
    double setup = 0.0, generate = 0.0;
    for (int64_t r = 0; r < cfg->ranks; r++) {
        setup = fmax(setup, res[r].setup_seconds);
        generate = fmax(generate, res[r].generate_seconds);
    }
    snprintf(notes, notes_size, "%s: setup %.2f s (of which generating weights %.2f s), check %.2f s%s\n",
             sc->name, setup, generate, check_seconds, checked ? "" : " (no check)");
    if (rc != MM_CLI_EXIT_OK)
        cli_error(cmd, "%s: %.3f%% of the checked outputs exceed the tolerance |d| <= %g |ref| + %g rms(ref)",
                  sc->name, (1.0 - errors.within_tolerance) * 100.0, sc->tolerance_relative,
                  sc->tolerance_rms);
    if (trace) run_moe_trace_scenario(trace, cfg, sc, res);
    return rc;
}

static void print_banner(const run_moe_config *cfg, const char *backend) {
    const run_moe_preset *p = cfg->preset;
    printf("megamoe run: MegaMoE layer of %s (preset %s): H %lld, I %lld, %lld routed experts", p->model,
           p->name, (long long)cfg->hidden, (long long)cfg->inter, (long long)cfg->experts);
    if (cfg->experts != p->model_experts) printf(" (the model has %lld)", (long long)p->model_experts);
    printf(", top-%lld, %lld shared, %s", (long long)cfg->topk, (long long)cfg->shared_experts,
           mm_mega_moe_activation_name(p->activation));
    for (int i = 0; i < p->activation_param_count; i++)
        printf("%s%g", i ? ", " : " [", (double)p->activation_params[i]);
    printf("%s\n", p->activation_param_count ? "]" : "");
    printf("%lld ranks (%s) x %lld tokens, seed %llu, routing skew %g; %lld timed calls after 1 warm-up; ",
           (long long)cfg->ranks, backend, (long long)cfg->tokens, (unsigned long long)cfg->seed, cfg->skew,
           (long long)cfg->iterations);
    if (cfg->check_tokens > 0)
        printf("%lld tokens per rank checked against the float64 reference\n",
               (long long)(cfg->check_tokens < cfg->tokens ? cfg->check_tokens : cfg->tokens));
    else
        printf("no reference check\n");
    printf("times in ms per call (median); stages: mean over ranks; total: first rank start to last rank "
           "end\n\n");
}

/* The scenarios to run: one, or all of them. */
static size_t scenario_list(const run_options *o, const run_moe_scenario **list) {
    const char *name = o->scenario ? o->scenario : o->cfg.preset->default_scenario;
    if (strcmp(name, "all") == 0) {
        for (size_t i = 0; i < run_moe_scenario_count; i++) list[i] = &run_moe_scenarios[i];
        return run_moe_scenario_count;
    }
    list[0] = run_moe_find_scenario(name);
    return 1;
}

static void print_notes(char notes[][160], size_t count) {
    int any = 0;
    for (size_t i = 0; i < count; i++)
        if (notes[i][0]) {
            if (!any++) printf("\n");
            fputs(notes[i], stdout);
        }
}

static void results_free(run_moe_rank_result *res, int64_t n) {
    for (int64_t r = 0; r < n; r++) run_moe_result_free(&res[r]);
    free(res);
}

static run_moe_rank_result *results_alloc(const run_moe_config *cfg, int64_t n, mm_error *err) {
    run_moe_rank_result *res = calloc((size_t)n, sizeof *res);
    if (!res) return NULL;
    for (int64_t r = 0; r < n; r++)
        if (run_moe_result_alloc(cfg, &res[r], err) != MM_OK) {
            results_free(res, n);
            return NULL;
        }
    return res;
}

static int run_threads(run_options *o) {
    run_moe_config *cfg = &o->cfg;
    if (finish_config(o, 1) != 0) return MM_CLI_EXIT_USAGE;
    const run_moe_scenario *list[16];
    size_t count = scenario_list(o, list);
    run_report report;
    memset(&report, 0, sizeof report);
    run_moe_trace trace;
    if (cfg->trace_path && run_moe_trace_open(&trace, cfg->trace_path, cfg->ranks) != 0) {
        cli_error(cmd, "cannot write the trace '%s'", cfg->trace_path);
        return MM_CLI_EXIT_FAILURE;
    }
    print_banner(cfg, "threads");
    print_header();
    int rc = MM_CLI_EXIT_OK;
    for (size_t i = 0; i < count; i++) {
        mm_error err;
        mm_error_clear(&err);
        run_moe_rank_result *res = results_alloc(cfg, cfg->ranks, &err);
        if (!res) {
            cli_error(cmd, "no memory for the results");
            rc = MM_CLI_EXIT_FAILURE;
            break;
        }
        scenario_job job = {cfg, list[i], res};
        mm_status st = mm_comm_run_threads((int)cfg->ranks, rank_main, &job, NULL, NULL, &err);
        int this_rc = MM_CLI_EXIT_OK;
        if (st != MM_OK) {
            printf("%-15s not run: %s\n", list[i]->name, err.message);
            fflush(stdout);
            cli_error(cmd, "%s: %s", list[i]->name, err.message);
            this_rc = cli_exit_status(st);
        } else {
            this_rc = report_scenario(cfg, list[i], res, cfg->trace_path ? &trace : NULL, &report, i);
        }
        if (rc == MM_CLI_EXIT_OK) rc = this_rc;
        results_free(res, cfg->ranks);
    }
    print_notes(report.notes, count);
    free(report.a16w16_y);
    if (cfg->trace_path) {
        if (run_moe_trace_close(&trace) != 0) {
            cli_error(cmd, "error writing the trace '%s'", cfg->trace_path);
            if (rc == MM_CLI_EXIT_OK) rc = MM_CLI_EXIT_FAILURE;
        } else {
            printf("\ntrace: %s (one track per rank; open in ui.perfetto.dev)\n", cfg->trace_path);
        }
    }
    return rc;
}

#ifdef MEGAMOE_HAVE_MPI
/* Sends this rank's result to rank 0, which fills all[] (all[0] is its own). */
static void gather_results(const run_moe_config *cfg, int me, int n, run_moe_rank_result *mine,
                           run_moe_rank_result *all) {
    int64_t H = cfg->hidden, K = cfg->topk, s = mine->sample_count;
    struct field {
        size_t bytes;
        size_t offset;
    };
    const struct field fields[] = {
        {(size_t)cfg->iterations * sizeof(mm_mega_moe_stats), offsetof(run_moe_rank_result, stats)},
        {(size_t)s * sizeof(int64_t), offsetof(run_moe_rank_result, sample_rows)},
        {(size_t)(s * H) * 2, offsetof(run_moe_rank_result, sample_x)},
        {(size_t)(s * K) * 4, offsetof(run_moe_rank_result, sample_ids)},
        {(size_t)(s * K) * 4, offsetof(run_moe_rank_result, sample_weights)},
        {(size_t)(s * H) * 2, offsetof(run_moe_rank_result, sample_y)},
    };
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        void *src = *(void **)((char *)mine + fields[f].offset);
        for (int r = 1; r < n; r++) {
            if (me == r) MPI_Send(src, (int)fields[f].bytes, MPI_BYTE, 0, (int)f, MPI_COMM_WORLD);
            if (me == 0)
                MPI_Recv(*(void **)((char *)&all[r] + fields[f].offset), (int)fields[f].bytes, MPI_BYTE, r,
                         (int)f, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
}

static int run_mpi(run_options *o) {
    int initialized = 0, provided = 0, me = 0, n = 1;
    MPI_Initialized(&initialized);
    if (!initialized && MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        cli_error(cmd, "--backend mpi: MPI_Init_thread failed");
        return MM_CLI_EXIT_FAILURE;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    run_moe_config *cfg = &o->cfg;
    cfg->ranks = n;
    int rc = MM_CLI_EXIT_OK;
    mm_comm *comm = NULL;
    mm_error err;
    mm_error_clear(&err);
    run_moe_trace trace;
    int tracing = 0;
    if (finish_config(o, me == 0) != 0) {
        rc = MM_CLI_EXIT_USAGE;
        goto done;
    }
    if (mm_comm_mpi_world(&comm, &err) != MM_OK) {
        if (me == 0) cli_report(cmd, &err);
        rc = cli_exit_status(err.status);
        goto done;
    }
    if (me == 0 && cfg->trace_path) {
        if (run_moe_trace_open(&trace, cfg->trace_path, cfg->ranks) != 0) {
            cli_error(cmd, "cannot write the trace '%s'", cfg->trace_path);
            rc = MM_CLI_EXIT_FAILURE;
        }
        tracing = rc == MM_CLI_EXIT_OK;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != MM_CLI_EXIT_OK) goto done;
    if (me == 0) {
        print_banner(cfg, "mpi");
        print_header();
    }
    const run_moe_scenario *list[16];
    size_t count = scenario_list(o, list);
    run_report report;
    memset(&report, 0, sizeof report);
    for (size_t i = 0; i < count; i++) {
        run_moe_rank_result *res = results_alloc(cfg, me == 0 ? n : 1, &err);
        int ok = res != NULL, all_ok = 0;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_ok) {
            if (!ok) cli_error(cmd, "no memory for the results");
            if (res) results_free(res, me == 0 ? n : 1);
            rc = MM_CLI_EXIT_FAILURE;
            break;
        }
        mm_error_clear(&err);
        /* the status is agreed on all ranks by the operator (and by run_moe_rank for its own steps) */
        mm_status st = run_moe_rank(comm, cfg, list[i], &res[0], &err);
        int this_rc = MM_CLI_EXIT_OK;
        if (st != MM_OK) {
            if (me == 0) {
                printf("%-15s not run: %s\n", list[i]->name, err.message);
                fflush(stdout);
                cli_error(cmd, "%s: %s", list[i]->name, err.message);
            }
            this_rc = cli_exit_status(st);
        } else {
            gather_results(cfg, me, n, &res[0], res);
            if (me == 0) this_rc = report_scenario(cfg, list[i], res, tracing ? &trace : NULL, &report, i);
            MPI_Bcast(&this_rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
        if (rc == MM_CLI_EXIT_OK) rc = this_rc;
        results_free(res, me == 0 ? n : 1);
    }
    if (me == 0) print_notes(report.notes, count);
    free(report.a16w16_y);
    if (tracing) {
        if (run_moe_trace_close(&trace) != 0) {
            cli_error(cmd, "error writing the trace '%s'", cfg->trace_path);
            if (rc == MM_CLI_EXIT_OK) rc = MM_CLI_EXIT_FAILURE;
        } else {
            printf("\ntrace: %s (one track per rank; open in ui.perfetto.dev)\n", cfg->trace_path);
        }
    }
done:
    mm_comm_free(comm, NULL);
    if (!initialized) MPI_Finalize();
    return rc;
}
#else
static int run_mpi(run_options *o) {
    (void)o;
    cli_error(cmd, "--backend mpi: this build of megamoe has no MPI (build it with Open MPI)");
    return MM_CLI_EXIT_FAILURE;
}
#endif

int cli_run_mega_moe_main(int argc, char **argv) {
    run_options o;
    int parsed = parse_options(argc, argv, &o);
    if (parsed != 0) return parsed > 0 ? MM_CLI_EXIT_OK : MM_CLI_EXIT_USAGE;
    return o.mpi ? run_mpi(&o) : run_threads(&o);
}
