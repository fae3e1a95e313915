/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_report.c: what `megamoe run` prints: the banner, one table row per scenario (stage
 * times from mm_mega_moe_last_stats, throughput, the reference check, the difference from A16W16),
 * and the notes under the table. Runs on the process that holds every rank's results (the main
 * thread with threads, rank 0 with MPI). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_json.h"
#include "common/cli_progress.h"
#include "common/cli_threads.h"
#include "common/cli_util.h"
#include "megamoe/formats.h"
#include "run/run_moe.h"
#include "common/timing.h"

static const char *const cmd = "run";

static double median_of(double *v, int64_t n) {
    return cli_time_stats_of(v, (size_t)n).median;
}

/* Prints the table header (once). */
void run_moe_print_header(const run_moe_config *cfg) {
    if (cfg->json) return;
    printf("%-15s %7s %9s %9s %9s %9s %9s %9s %10s %9s %8s %9s %7s %7s %9s\n", "scenario", "tokens",
           "dispatch", "gemm1", "activ.", "gemm2", "shared", "combine", "total ms", "tokens/s", "GFLOP/s",
           "maxerr/rms", "<=1ulp", "in tol", "vs a16w16");
}

/* The row of one scenario as a JSON object: the table's columns, and the note's times. */
static void print_json_row(const run_moe_config *cfg, const run_moe_scenario *sc, int64_t tokens,
                           const double *stage_ms, double wall, double flops, const run_moe_errors *errors,
                           double vs_a16w16, const double setup_check[3]) {
    static const char *const stage_keys[MM_MEGA_MOE_STAGE_COUNT] = {
        [MM_MEGA_MOE_STAGE_DISPATCH] = "dispatch_ms",     [MM_MEGA_MOE_STAGE_GEMM1] = "gemm1_ms",
        [MM_MEGA_MOE_STAGE_ACTIVATION] = "activation_ms", [MM_MEGA_MOE_STAGE_GEMM2] = "gemm2_ms",
        [MM_MEGA_MOE_STAGE_SHARED] = "shared_ms",         [MM_MEGA_MOE_STAGE_COMBINE] = "combine_ms"};
    cli_json j = cli_json_begin(stdout, "row");
    cli_json_str(&j, "scenario", sc->spec_name);
    cli_json_str(&j, "weight_dtype", mm_dtype_name(sc->weight_dtype));
    int64_t bn, bk; /* the F32 block scales' size, null for a row without them */
    run_moe_scale_blocks(cfg, sc, &bn, &bk);
    if (bn > 0) {
        cli_json_int(&j, "scale_block_n", bn);
        cli_json_int(&j, "scale_block_k", bk);
    } else {
        cli_json_null(&j, "scale_block_n");
        cli_json_null(&j, "scale_block_k");
    }
    cli_json_int(&j, "tokens", tokens);
    for (int s = 0; s < MM_MEGA_MOE_STAGE_COUNT; s++)
        if (stage_keys[s]) cli_json_num(&j, stage_keys[s], stage_ms[s]);
    cli_json_num(&j, "total_ms", wall * 1e3);
    cli_json_num(&j, "tokens_per_s", (double)tokens / wall);
    cli_json_num(&j, "gflop_per_s", flops / wall * 1e-9);
    cli_json_num(&j, "maxerr_over_rms", errors ? errors->max_abs_over_rms : NAN);
    cli_json_num(&j, "within_ulp_pct", errors ? errors->within_ulp * 100.0 : NAN);
    cli_json_num(&j, "in_tolerance_pct", errors ? errors->within_tolerance * 100.0 : NAN);
    cli_json_num(&j, "vs_a16w16", vs_a16w16 >= 0.0 ? vs_a16w16 : NAN);
    cli_json_num(&j, "setup_s", setup_check[0]);
    cli_json_num(&j, "generate_s", setup_check[1]);
    cli_json_num(&j, "check_s", setup_check[2]);
    cli_json_end(&j);
}

static void print_row(const run_moe_config *cfg, const run_moe_scenario *sc, const run_moe_rank_result *res,
                      const run_moe_errors *errors, double vs_a16w16, const double setup_check[3]) {
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
    if (cfg->json) {
        print_json_row(cfg, sc, tokens, stage_ms, wall, flops, errors, vs_a16w16, setup_check);
        return;
    }
    printf("%-15s %7lld %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f %9.0f %8.1f", sc->spec_name,
           (long long)tokens, stage_ms[MM_MEGA_MOE_STAGE_DISPATCH], stage_ms[MM_MEGA_MOE_STAGE_GEMM1],
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

/* Relative RMS difference of this scenario's sample outputs from A16W16's on the same tokens and the
 * same BF16 master weights (the cost of quantization); -1 when A16W16 did not run before. Keeps the
 * A16W16 outputs when sc is A16W16. */
static double compare_with_a16w16(const run_moe_config *cfg, const run_moe_scenario *sc,
                                  const run_moe_rank_result *res, run_moe_report *report) {
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
int run_moe_report_scenario(const run_moe_config *cfg, const run_moe_scenario *sc, run_moe_rank_result *res,
                            run_moe_trace *trace, run_moe_report *report, size_t index) {
    char *notes = report->notes[index];
    size_t notes_size = sizeof report->notes[index];
    run_moe_errors errors;
    int rc = MM_CLI_EXIT_OK;
    int checked = cfg->check_tokens > 0;
    double check_begin = cli_now_seconds();
    if (checked) {
        mm_error err;
        mm_error_clear(&err);
        cli_progress_begin("%s: checking against the float64 reference", sc->spec_name);
        mm_status st = run_moe_check(cfg, sc, res, &errors, &err);
        cli_progress_end();
        if (st != MM_OK) {
            cli_error(cmd, "%s: reference check failed: %s", sc->spec_name, err.message);
            return cli_exit_status(err.status);
        }
        if (!(errors.within_tolerance >= 1.0)) rc = MM_CLI_EXIT_FAILURE;
    }
    double check_end = cli_now_seconds(), check_seconds = check_end - check_begin;
    double setup = 0.0, generate = 0.0;
    for (int64_t r = 0; r < cfg->ranks; r++) {
        setup = fmax(setup, res[r].spans->setup_end - res[r].spans->setup_begin);
        generate = fmax(generate, res[r].spans->generate_end - res[r].spans->generate_begin);
    }
    const double setup_check[3] = {setup, generate, check_seconds};
    print_row(cfg, sc, res, checked ? &errors : NULL, compare_with_a16w16(cfg, sc, res, report), setup_check);
    snprintf(notes, notes_size, "%s: setup %.2f s (of which generating weights %.2f s), check %.2f s%s\n",
             sc->spec_name, setup, generate, check_seconds, checked ? "" : " (no check)");
    if (rc != MM_CLI_EXIT_OK)
        cli_error(cmd, "%s: %.3f%% of the checked outputs exceed the tolerance |d| <= %g |ref| + %g rms(ref)",
                  sc->spec_name, (1.0 - errors.within_tolerance) * 100.0,
                  run_moe_check_tolerance_relative(cfg, sc), sc->tolerance_rms);
    if (trace) run_moe_trace_scenario(trace, cfg, sc, res, check_begin, checked ? check_end : check_begin);
    return rc;
}

/* --json: the banner's facts as the first object. */
static void print_json_banner(const run_moe_config *cfg, const char *backend, const char *threads) {
    const run_moe_preset *p = cfg->preset;
    cli_json j = cli_json_begin(stdout, "header");
    cli_json_str(&j, "command", "run");
    cli_json_str(&j, "op", "mega-moe");
    cli_json_cpu(&j);
    cli_json_str(&j, "threads", threads);
    cli_json_str(&j, "preset", p->name);
    cli_json_str(&j, "model", p->model);
    cli_json_int(&j, "hidden", cfg->hidden);
    cli_json_int(&j, "intermediate", cfg->inter);
    cli_json_int(&j, "experts", cfg->experts);
    cli_json_int(&j, "topk", cfg->topk);
    cli_json_int(&j, "shared_experts", cfg->shared_experts);
    cli_json_str(&j, "activation", mm_mega_moe_activation_name(p->activation));
    cli_json_str(&j, "backend", backend);
    cli_json_int(&j, "ranks", cfg->ranks);
    cli_json_int(&j, "tokens_per_rank", cfg->tokens);
    cli_json_int(&j, "iterations", cfg->iterations);
    cli_json_int(&j, "seed", (int64_t)cfg->seed);
    cli_json_num(&j, "skew", cfg->skew);
    cli_json_int(&j, "check_tokens_per_rank",
                 cfg->check_tokens < cfg->tokens ? cfg->check_tokens : cfg->tokens);
    cli_json_int(&j, "combine_quant_mode", cfg->combine_quant_mode);
    cli_json_int(&j, "combine_comm_mode", cfg->combine_comm_mode);
    cli_json_int(&j, "rank_num_per_server", cfg->rank_num_per_server);
    cli_json_int(&j, "topk_weights_type", cfg->topk_weights_type);
    cli_json_bool(&j, "bias", cfg->bias);
    cli_json_bool(&j, "weight1_interleave", cfg->weight1_interleave);
    cli_json_end(&j);
}

void run_moe_print_not_run(const run_moe_config *cfg, const char *scenario, const char *message) {
    if (cfg->json) {
        cli_json j = cli_json_begin(stdout, "row");
        cli_json_str(&j, "scenario", scenario);
        cli_json_str(&j, "error", message);
        cli_json_end(&j);
    } else {
        printf("%-15s not run: %s\n", scenario, message);
        fflush(stdout);
    }
}

void run_moe_print_kernels(const run_moe_scenario *sc) {
    char line[400];
    cli_kernels_describe(line, sizeof line, sc->spec_name, sc->gemm1_input, sc->gemm2_input,
                         sc->weight_dtype);
    printf("%s\n", line);
}

/* The banner's line on the checkpoint-format knobs, when any applies: biases, the interleaved weight1,
 * the block sizes of the block-scaled scenarios in the list. */
static void print_weight_layout(const run_moe_config *cfg, const run_moe_scenario *const *list,
                                size_t count) {
    const char *sep = "weights:";
    if (cfg->bias) printf("%s bias1/bias2 on every expert", sep), sep = ";";
    if (cfg->weight1_interleave) printf("%s weight1 gate/up interleaved", sep), sep = ";";
    for (size_t i = 0; i < count; i++) {
        int64_t bn, bk;
        run_moe_scale_blocks(cfg, list[i], &bn, &bk);
        if (bn > 0)
            printf("%s %s F32 block scales %lld x %lld%s", sep, list[i]->spec_name, (long long)bn,
                   (long long)bk, list[i]->weight_dtype == MM_DTYPE_UINT4 ? " with zero points" : ""),
                sep = ";";
    }
    if (sep[0] == ';') printf("\n");
}

void run_moe_print_banner(const run_moe_config *cfg, const char *backend, const run_moe_scenario *const *list,
                          size_t count) {
    const run_moe_preset *p = cfg->preset;
    char threads[160];
    cli_threads_describe(threads, sizeof threads);
    if (cfg->json) {
        print_json_banner(cfg, backend, threads);
        return;
    }
    /* With H or I overridden the layer is no longer the model's: say whose shape it borrows, and what. */
    int h_over = cfg->hidden != p->hidden, i_over = cfg->inter != p->inter;
    if (h_over || i_over)
        printf("megamoe run: MegaMoE layer of the shape of %s (preset %s), %s overridden", p->model, p->name,
               h_over && i_over ? "H and I"
               : h_over         ? "H"
                                : "I");
    else
        printf("megamoe run: MegaMoE layer of %s (preset %s)", p->model, p->name);
    printf(": H %lld, I %lld, %lld routed expert%s", (long long)cfg->hidden, (long long)cfg->inter,
           (long long)cfg->experts, cli_plural_s(cfg->experts));
    if (cfg->experts != p->model_experts) printf(" (the model has %lld)", (long long)p->model_experts);
    printf(", top-%lld, %lld shared, %s", (long long)cfg->topk, (long long)cfg->shared_experts,
           mm_mega_moe_activation_name(p->activation));
    for (int i = 0; i < p->activation_param_count; i++)
        printf("%s%g", i ? ", " : " [", (double)p->activation_params[i]);
    printf("%s\n", p->activation_param_count ? "]" : "");
    if (cfg->combine_quant_mode || cfg->combine_comm_mode || cfg->topk_weights_type)
        printf("combine: quantization %s, comm mode %d%s, top-k weights type %d\n",
               cfg->combine_quant_mode == 3   ? "MX E5M2"
               : cfg->combine_quant_mode == 4 ? "MX E4M3"
                                              : "none",
               cfg->combine_comm_mode, cfg->rank_num_per_server > 0 ? " (layered)" : "",
               cfg->topk_weights_type);
    printf("%lld rank%s (%s) x %lld token%s, seed %llu, routing skew %g; %lld timed call%s after 1 warm-up; ",
           (long long)cfg->ranks, cli_plural_s(cfg->ranks), backend, (long long)cfg->tokens,
           cli_plural_s(cfg->tokens), (unsigned long long)cfg->seed, cfg->skew, (long long)cfg->iterations,
           cli_plural_s(cfg->iterations));
    if (cfg->check_tokens > 0) {
        int64_t checked = cfg->check_tokens < cfg->tokens ? cfg->check_tokens : cfg->tokens;
        printf("%lld token%s per rank checked against the float64 reference\n", (long long)checked,
               cli_plural_s(checked));
    } else
        printf("no reference check\n");
    printf("worker pool: %s\n", threads);
    for (size_t i = 0; i < count; i++) run_moe_print_kernels(list[i]);
    print_weight_layout(cfg, list, count);
    printf("times in ms per call (median); stages: mean over ranks; total: first rank start to last rank "
           "end\n\n");
}

void run_moe_print_notes(const run_moe_config *cfg, char notes[][160], size_t count) {
    if (cfg->json) return;
    int any = 0;
    for (size_t i = 0; i < count; i++)
        if (notes[i][0]) {
            if (!any++) printf("\n");
            fputs(notes[i], stdout);
        }
}

void run_moe_results_free(run_moe_rank_result *res, int64_t n) {
    for (int64_t r = 0; r < n; r++) run_moe_result_free(&res[r]);
    free(res);
}

run_moe_rank_result *run_moe_results_alloc(const run_moe_config *cfg, int64_t n, mm_error *err) {
    run_moe_rank_result *res = calloc((size_t)n, sizeof *res);
    if (!res) return NULL;
    for (int64_t r = 0; r < n; r++)
        if (run_moe_result_alloc(cfg, &res[r], err) != MM_OK) {
            run_moe_results_free(res, n);
            return NULL;
        }
    return res;
}
