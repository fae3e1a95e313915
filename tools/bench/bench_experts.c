/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_experts.c: `megamoe bench experts`: the local experts call (mm_experts_run, one
 * process, no communication) against MegaMoE on a one-rank threads world (mm_mega_moe_run) on the same
 * weights, tokens and routing, per format and token count.
 *
 * Both handles are packed from the same generated experts (`megamoe run`'s data: seeded weights, skewed
 * top-k routing). After one warm-up of each, --iterations pairs (one local call, one MegaMoE call,
 * alternating which goes first, so that the noise of this shared machine hits both alike) are timed;
 * the medians are printed with tokens/s and whether the two y have the same bits (they must). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/cli_options.h"
#include "common/cli_util.h"
#include "common/timing.h"
#include "core/cpu.h"
#include "megamoe/experts.h"
#include "common/cli_json.h"
#include "common/cli_threads.h"
#include "run/run_moe.h"

#define MAX_REPEAT 64
#define MAX_LIST   8

static const char *const cmd = "bench experts";

static const char usage[] =
    "usage: megamoe bench experts [options]\n"
    "\n"
    "The local experts call (mm_experts_run: one process, all experts local, no communication) vs\n"
    "MegaMoE on a one-rank threads world (mm_mega_moe_run) on the same weights and routing.\n"
    "\n"
    "options:\n"
    "      --hidden H           hidden size (default 2048, Qwen3-30B-A3B)\n"
    "      --intermediate I     expert intermediate size (default 768)\n"
    "      --experts E          routed experts (default 128)\n"
    "      --topk K             experts per token (default 8)\n"
    "      --shared-experts S   shared experts (default 0)\n"
    "      --tokens LIST        tokens per call, comma-separated (default 1,16,256)\n"
    "      --format LIST        scenarios (megamoe run's --scenario names), comma-separated\n"
    "                           (default a16w16,a4w4-fp)\n"
    "      --iterations N       timed pairs per case (default 9; one warm-up of each first)\n"
    "      --seed S             seed of weights, tokens and routing (default 1)\n"
    "      --json               JSON Lines on stdout instead of the table (docs/cli.md)\n"
    "  -h, --help               show this help\n";

typedef struct bench_options {
    int64_t hidden, inter, experts, topk, shared, repeat, tokens[MAX_LIST];
    int n_tokens, n_formats;
    const run_moe_scenario *formats[MAX_LIST];
    uint64_t seed;
} bench_options;

/* One case: what the rank function needs and brings back. */
typedef struct bench_case {
    run_moe_config cfg;
    const run_moe_scenario *sc;
    const mm_experts *ex;
    const run_moe_expert_data *routed, *shared;
    const run_moe_tokens *tok;
    double local_s[MAX_REPEAT], mega_s[MAX_REPEAT];
    int same_bits;
} bench_case;

/* The rank of the one-rank world: MegaMoE's buffer and weights from the same data, then the pairs. */
static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    bench_case *bc = arg;
    const run_moe_config *cfg = &bc->cfg;
    int64_t T = cfg->tokens, H = cfg->hidden, K = cfg->topk, E = cfg->experts;
    mm_mega_moe_sizing sizing = {E, T, K, H, cfg->inter, 0};
    mm_mega_moe_buffer *buffer = NULL;
    mm_mega_moe_weights *weights = NULL;
    uint16_t *y1 = malloc((size_t)(T * H) * 2), *y2 = malloc((size_t)(T * H) * 2);
    int32_t *etn = malloc((size_t)E * 4);
    mm_status st = y1 && y2 && etn ? MM_OK : cli_fail(err, MM_ERR_OUT_OF_MEMORY, "outputs: out of memory");
    if (st == MM_OK) st = mm_mega_moe_buffer_create(comm, &sizing, &buffer, err);
    mm_mega_moe_expert_weights rv = run_moe_expert_weights_view(bc->routed);
    mm_mega_moe_expert_weights sv = run_moe_expert_weights_view(bc->shared);
    if (st == MM_OK)
        st = mm_mega_moe_weights_create(buffer, &rv, cfg->shared_experts ? &sv : NULL, &weights, err);
    int64_t xs[2] = {T, H}, ks[2] = {T, K}, es[1] = {E};
    mm_tensor x = mm_tensor_make(MM_DTYPE_BF16, 2, xs, bc->tok->x);
    mm_tensor ids = mm_tensor_make(MM_DTYPE_I32, 2, ks, bc->tok->ids);
    mm_tensor gates = mm_tensor_make(MM_DTYPE_F32, 2, ks, bc->tok->weights);
    mm_tensor t1 = mm_tensor_make(MM_DTYPE_BF16, 2, xs, y1), t2 = mm_tensor_make(MM_DTYPE_BF16, 2, xs, y2);
    mm_tensor te = mm_tensor_make(MM_DTYPE_I32, 1, es, etn);
    mm_mega_moe_attrs attrs = run_moe_attrs(cfg, bc->sc);
    mm_experts_inputs lin = {&x, &ids, &gates, NULL, 0};
    mm_mega_moe_inputs min = {&x, NULL, &ids, &gates, NULL};
    mm_mega_moe_outputs mout = {&t2, &te};
    for (int64_t it = -1; it < cfg->iterations && st == MM_OK; it++)
        for (int pass = 0; pass < 2 && st == MM_OK; pass++) {
            int local = pass == (it < 0 ? 0 : it % 2);
            double t0 = cli_now_seconds();
            st = local ? mm_experts_run(bc->ex, &attrs, &lin, &t1, err)
                       : mm_mega_moe_run(buffer, weights, &attrs, &min, &mout, err);
            double dt = cli_now_seconds() - t0;
            if (it >= 0) (local ? bc->local_s : bc->mega_s)[it] = dt;
        }
    bc->same_bits = st == MM_OK && memcmp(y1, y2, (size_t)(T * H) * 2) == 0;
    mm_mega_moe_weights_free(weights);
    mm_mega_moe_buffer_free(buffer, NULL);
    free(y1);
    free(y2);
    free(etn);
    return st;
}

static int run_format(const bench_options *o, const run_moe_scenario *sc) {
    run_moe_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.preset = run_moe_find_preset("qwen3-30b-a3b"); /* activation: swiglu, as the default shape's */
    cfg.hidden = o->hidden;
    cfg.inter = o->inter;
    cfg.experts = o->experts;
    cfg.topk = o->topk;
    cfg.shared_experts = o->shared;
    cfg.ranks = 1;
    cfg.iterations = o->repeat;
    cfg.seed = o->seed;
    cfg.skew = 1.0;
    run_moe_expert_data routed, shared;
    memset(&routed, 0, sizeof routed);
    memset(&shared, 0, sizeof shared);
    mm_error err;
    mm_error_clear(&err);
    mm_experts *ex = NULL;
    mm_status st = run_moe_expert_data_make(&cfg, sc, 0, NULL, cfg.experts, &routed, &err);
    if (st == MM_OK && cfg.shared_experts)
        st = run_moe_expert_data_make(&cfg, sc, RUN_MOE_SHARED_ID_BASE, NULL, cfg.shared_experts, &shared,
                                      &err);
    mm_mega_moe_expert_weights rv = run_moe_expert_weights_view(&routed);
    mm_mega_moe_expert_weights sv = run_moe_expert_weights_view(&shared);
    mm_experts_config ec = {cfg.experts, cfg.hidden, cfg.inter, NULL, cfg.preset->activation};
    if (st == MM_OK) st = mm_experts_create(&ec, &rv, cfg.shared_experts ? &sv : NULL, &ex, &err);
    int rc = MM_CLI_EXIT_OK;
    for (int q = 0; q < o->n_tokens && st == MM_OK; q++) {
        bench_case *bc = calloc(1, sizeof *bc);
        run_moe_tokens tok;
        memset(&tok, 0, sizeof tok);
        if (!bc) {
            st = cli_fail(&err, MM_ERR_OUT_OF_MEMORY, "bench case: out of memory");
            break;
        }
        bc->cfg = cfg;
        bc->cfg.tokens = o->tokens[q];
        bc->sc = sc;
        bc->ex = ex;
        bc->routed = &routed;
        bc->shared = &shared;
        bc->tok = &tok;
        st = run_moe_tokens_make(&bc->cfg, 0, &tok, &err);
        if (st == MM_OK) st = mm_comm_run_threads(1, rank_fn, bc, NULL, NULL, &err);
        if (st == MM_OK) {
            cli_time_stats l = cli_time_stats_of(bc->local_s, (size_t)cfg.iterations);
            cli_time_stats m = cli_time_stats_of(bc->mega_s, (size_t)cfg.iterations);
            double T = (double)bc->cfg.tokens;
            printf("%-16s %7lld %10.3f %10.3f %10.3f %10.3f %7.2fx %11.0f %11.0f %5s\n", sc->label,
                   (long long)bc->cfg.tokens, 1e3 * l.median, 1e3 * l.min, 1e3 * m.median, 1e3 * m.min,
                   m.median / l.median, T / l.median, T / m.median, bc->same_bits ? "yes" : "NO");
            fflush(stdout);
            if (cli_json_out()) {
                cli_json j = cli_json_row("row");
                cli_json_str(&j, "format", sc->name);
                cli_json_int(&j, "tokens", bc->cfg.tokens);
                cli_json_num(&j, "local_ms", 1e3 * l.median);
                cli_json_num(&j, "local_min_ms", 1e3 * l.min);
                cli_json_num(&j, "mega_ms", 1e3 * m.median);
                cli_json_num(&j, "mega_min_ms", 1e3 * m.min);
                cli_json_num(&j, "speedup", m.median / l.median);
                cli_json_num(&j, "local_tokens_per_s", T / l.median);
                cli_json_num(&j, "mega_tokens_per_s", T / m.median);
                cli_json_bool(&j, "same_bits", bc->same_bits);
                cli_json_end(&j);
            }
            if (!bc->same_bits) rc = MM_CLI_EXIT_FAILURE;
        }
        run_moe_tokens_free(&tok);
        free(bc);
    }
    if (st != MM_OK) rc = cli_report(cmd, &err);
    mm_experts_free(ex);
    run_moe_expert_data_free(&routed);
    run_moe_expert_data_free(&shared);
    return rc;
}

/* --tokens LIST or --format LIST (the default formats go through here too). */
static int parse_list(const char *command, const char *option, const char *text, void *target) {
    bench_options *o = target;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == MAX_LIST) return cli_usage_error(command, "%s: at most %d entries", option, MAX_LIST);
        if (strcmp(option, "--tokens") == 0) {
            if (cli_parse_int64(command, option, tok, 1, 65536, &o->tokens[n])) return -1;
        } else {
            o->formats[n] = run_moe_find_scenario(tok);
            if (!o->formats[n]) return cli_usage_error(command, "unknown --format '%s'", tok);
        }
        n++;
    }
    if (n == 0) return cli_usage_error(command, "%s: no entry given", option);
    *(strcmp(option, "--tokens") == 0 ? &o->n_tokens : &o->n_formats) = n;
    return 0;
}

int mm_bench_experts_main(int argc, char **argv) {
    bench_options o = {2048, 768, 128, 8, 0, 9, {1, 16, 256}, 3, 0, {NULL}, 1};
    if (parse_list(cmd, "--format", "a16w16,a4w4-fp", &o)) return MM_CLI_EXIT_USAGE;
    int json = 0;
    const cli_option options[] = {
        CLI_INT64_OPTION("hidden", &o.hidden, 1, 65536),
        CLI_INT64_OPTION("intermediate", &o.inter, 2, 65536),
        CLI_INT64_OPTION("experts", &o.experts, 1, 4096),
        CLI_INT64_OPTION("topk", &o.topk, 1, 4096),
        CLI_INT64_OPTION("shared-experts", &o.shared, 0, MM_MEGA_MOE_MAX_SHARED_EXPERTS),
        CLI_CUSTOM_OPTION("tokens", parse_list, &o),
        CLI_CUSTOM_OPTION("format", parse_list, &o),
        CLI_INT64_OPTION("iterations", &o.repeat, 1, MAX_REPEAT),
        CLI_SEED_OPTION(&o.seed),
        CLI_FLAG_OPTION("json", &json),
    };
    int done = cli_options_parse(cmd, usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (o.inter % 2 != 0) return cli_usage_error(cmd, "--intermediate %lld must be even", (long long)o.inter);
    if (o.topk > o.experts)
        return cli_usage_error(cmd, "--topk %lld is above --experts %lld", (long long)o.topk,
                               (long long)o.experts);
    if (json && cli_json_redirect(cmd) != 0) return MM_CLI_EXIT_FAILURE;
    printf(
        "megamoe bench experts: local experts call (mm_experts_run) vs MegaMoE on 1 rank (mm_mega_moe_run),\n"
        "same weights and routing; H %lld, I %lld, %lld experts, top-%lld, %lld shared; swiglu; medians of "
        "%lld\n"
        "alternating pairs after a warm-up; CPU levels: avx512 %s, amx %s (registry uses up to %s)\n",
        (long long)o.hidden, (long long)o.inter, (long long)o.experts, (long long)o.topk, (long long)o.shared,
        (long long)o.repeat, mm_cpu_supports(MM_ISA_AVX512) ? "yes" : "no",
        mm_cpu_supports(MM_ISA_AMX) ? "yes" : "no", mm_isa_name(mm_cpu_isa()));
    char pool[160];
    cli_threads_describe(pool, sizeof pool);
    printf("worker pool: %s\n", pool);
    char cpu[400];
    cli_cpu_describe(cpu, sizeof cpu);
    printf("cpu: %s\n", cpu);
    for (int f = 0; f < o.n_formats; f++) run_moe_print_kernels(o.formats[f]);
    printf("\n");
    if (cli_json_out()) {
        cli_json j = cli_json_header("bench", "bench", "experts");
        cli_json_int(&j, "hidden", o.hidden);
        cli_json_int(&j, "intermediate", o.inter);
        cli_json_int(&j, "experts", o.experts);
        cli_json_int(&j, "topk", o.topk);
        cli_json_int(&j, "shared_experts", o.shared);
        cli_json_int(&j, "iterations", o.repeat);
        cli_json_int(&j, "seed", (int64_t)o.seed);
        cli_json_end(&j);
    }
    printf("%-16s %7s %10s %10s %10s %10s %8s %11s %11s %5s\n", "format", "tokens", "local ms", "local min",
           "mega ms", "mega min", "speedup", "local tok/s", "mega tok/s", "same");
    int rc = MM_CLI_EXIT_OK;
    for (int f = 0; f < o.n_formats && rc == MM_CLI_EXIT_OK; f++) rc = run_format(&o, o.formats[f]);
    return rc;
}
