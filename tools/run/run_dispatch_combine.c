/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_dispatch_combine.c: `megamoe run --op dispatch-combine`: Dispatch V3, a real expert FFN
 * (BF16 SwiGLU through the grouped GEMM layer, run_dc_ffn.c) on the received rows, then Combine + Add +
 * RMSNorm V2, on R ranks as threads, with per-stage timings (median over iterations of the slowest
 * rank), a check that every iteration gives the same bits, and sampled tokens of every rank checked
 * against a float64 recomputation (run_dc_check.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_json.h"
#include "common/cli_options.h"
#include "common/cli_threads.h"
#include "common/cli_trace.h"
#include "common/cli_util.h"
#include "common/dc_world.h"
#include "megamoe/formats.h"
#include "run/run_dc_check.h"
#include "run/run_dc_ffn.h"
#include "run/run_dc_trace.h"
#include "run/run_ops.h"
#include "common/timing.h"

static const char run_usage[] =
    "usage: megamoe run --op dispatch-combine [options]\n"
    "\n"
    "Dispatch V3 -> expert FFN (BF16 SwiGLU, grouped GEMM) -> Combine + Add + RMSNorm V2 on the ranks of\n"
    "--ranks x max(--tp, 1) threads, timed per stage (median over iterations of the slowest rank).\n"
    "Checks that every iteration gives the same bits, that y, x and rstd are finite, and --check-tokens\n"
    "tokens of every rank against a float64 recomputation of the whole pipeline (not with --tp 2 or\n"
    "--remove: the operator tests pin those).\n"
    "\n"
    "options:\n" CLI_DC_OPTIONS_HELP_WITH(
        "4 per routed rank; one per routed rank with --tp 2", "32", "1024",
        "min(4, experts)") "      --intermediate I           expert intermediate size (default 512)\n"
                           "      --iterations N             timed iterations (default 5; one warm-up "
                           "first)\n"
                           "      --check-tokens N           tokens per rank checked against float64 "
                           "(default 8; 0: none)\n"
                           "      --threads N                worker-pool threads, the caller included "
                           "(default:\n"
                           "                                 MEGAMOE_NUM_THREADS, else the CPUs of the "
                           "affinity mask\n"
                           "                                 within the cgroup CPU quota; docs/threads.md)\n"
                           "      --json                     JSON Lines on stdout instead of the report "
                           "(docs/cli.md)\n"
                           "      --trace FILE               write a Chrome/Perfetto JSON trace: setup, each "
                           "rank's stages\n"
                           "                                 per iteration (local experts, rows received, "
                           "rows and\n"
                           "                                 bytes sent / received), dispatch -> expert "
                           "flows, the check\n"
                           "  -h, --help                     show this help\n";

enum { ST_DISPATCH, ST_FFN, ST_COMBINE, ST_COUNT };

typedef struct run_ctx {
    const cli_dc_world *w;
    int64_t inter, iterations, check_tokens;
    double *times;  /* [rank][iteration][stage] */
    double *stamps; /* --trace: [rank][iteration][stage boundary 0..ST_COUNT], absolute seconds; else NULL */
    double check_span[MM_COMM_MAX_RANKS][2]; /* --trace: each rank's float64 check (0, 0: none ran) */
    run_dc_trace_rank *received;             /* --trace: [rank] what its dispatch received; else NULL */
    int64_t *rows;
    int mismatch, not_finite;
    cli_dc_check_stats check[MM_COMM_MAX_RANKS];
} run_ctx;

static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    run_ctx *run = arg;
    const cli_dc_world *w = run->w;
    int g = mm_comm_rank(comm);
    if (!w->rank[g].alive) return MM_OK;
    mm_status st = cli_dc_set_survivors(comm, w, err);
    if (st) return st;
    mm_dc_workspace *ws = NULL;
    cli_dc_ffn *ffn = NULL;
    cli_dc_dispatch_out d;
    memset(&d, 0, sizeof d);
    uint16_t *expert_out = NULL, *y = NULL, *x = NULL, *y_first = NULL;
    float *rstd = NULL;
    int64_t bs = w->rank[g].bs, H = w->o.hidden;
    y = malloc((size_t)(bs + 1) * (size_t)H * 2), x = malloc((size_t)(bs + 1) * (size_t)H * 2);
    y_first = malloc((size_t)(bs + 1) * (size_t)H * 2), rstd = malloc((size_t)(bs + 1) * 4);
    if (!y || !x || !y_first || !rstd) goto oom;
    if ((st = mm_dc_workspace_create(comm, &ws, err))) goto done;
    int64_t ep = g / w->tpw, n = w->elastic ? w->elastic[4 + ep] : ep;
    int shared = n < w->sh_eff;
    int64_t L = shared ? 1 : w->L;
    int64_t base = shared ? 1000000 + n : (n - w->sh_eff) * w->L;
    if ((st = cli_dc_ffn_create(L, base, H, run->inter, g % w->tpw, w->tpw, &ffn, err))) goto done;
    for (int64_t it = 0; it <= run->iterations; it++) {
        double t[ST_COUNT + 1];
        if ((st = mm_comm_barrier(comm, err))) goto done;
        t[0] = cli_now_seconds();
        if ((st = cli_dc_dispatch(ws, w, g, &d, err))) goto done;
        t[1] = cli_now_seconds();
        int64_t counts[64];
        if (L > 64) {
            st = MM_ERR_UNSUPPORTED;
            snprintf(err->message, sizeof err->message, "the demo runs at most 64 local experts");
            goto done;
        }
        for (int64_t e = 0; e < L; e++)
            counts[e] =
                w->o.ent_type == 0 ? d.token_nums[e] - (e ? d.token_nums[e - 1] : 0) : d.token_nums[e];
        if (!expert_out) expert_out = malloc((size_t)(d.rows + 1) * (size_t)H * 2); /* same rows every time */
        if (!expert_out) goto oom;
        if ((st = cli_dc_ffn_run(ffn, d.expand_x, w->o.quant == 2 ? d.dyn : NULL, d.rows, counts, expert_out,
                                 err)))
            goto done;
        t[2] = cli_now_seconds();
        cli_dc_tensors tt;
        mm_combine_v2_inputs in;
        cli_dc_combine_inputs(w, g, &d, expert_out, &tt, &in);
        mm_combine_v2_outputs out = cli_dc_combine_outputs(w, g, y, x, rstd, &tt);
        mm_dc_attrs a = cli_dc_attrs(w, g);
        if ((st = mm_combine_v2(ws, &in, &a, &out, err))) goto done;
        t[3] = cli_now_seconds();
        if (it == 0) {
            memcpy(y_first, y, (size_t)bs * (size_t)H * 2);
            run->rows[g] = d.rows;
            if (run->received) { /* shared expert s runs on shared ranks s * per .. s * per + per - 1 */
                int64_t per = w->o.shared_experts > 0 ? w->sh_eff / w->o.shared_experts : 1;
                run_dc_trace_record(w, &d, counts, L, shared ? -1 : base, shared ? n / (per ? per : 1) : -1,
                                    &run->received[g]);
            }
            for (int64_t j = 0; j < bs * H; j++)
                if (!isfinite(mm_bf16_to_f32(y[j])) || !isfinite(mm_bf16_to_f32(x[j]))) run->not_finite = 1;
            for (int64_t i = 0; i < bs; i++)
                if (!isfinite(rstd[i])) run->not_finite = 1;
        } else {
            if (memcmp(y_first, y, (size_t)bs * (size_t)H * 2) != 0) run->mismatch = 1;
            for (int s = 0; s < ST_COUNT; s++)
                run->times[((size_t)g * (size_t)run->iterations + (size_t)(it - 1)) * ST_COUNT + (size_t)s] =
                    t[s + 1] - t[s];
            if (run->stamps)
                memcpy(run->stamps +
                           ((size_t)g * (size_t)run->iterations + (size_t)(it - 1)) * (ST_COUNT + 1),
                       t, sizeof t);
        }
    }
    /* x and rstd of the last iteration equal the first one's (every iteration gives the same bits). */
    if (run->check_tokens > 0 && cli_dc_check_supported(w)) {
        double begin = cli_now_seconds();
        if ((st = cli_dc_check_rank(w, g, run->inter, run->check_tokens, y_first, x, rstd, &run->check[g],
                                    err)))
            goto done;
        run->check_span[g][0] = begin, run->check_span[g][1] = cli_now_seconds();
    }
    goto done;
oom:
    st = MM_ERR_OUT_OF_MEMORY;
    snprintf(err->message, sizeof err->message, "out of memory");
done:
    cli_dc_dispatch_out_free(&d);
    cli_dc_ffn_free(ffn);
    mm_dc_workspace_free(ws, NULL);
    free(expert_out), free(y), free(x), free(y_first), free(rstd);
    return st;
}

int cli_run_dispatch_combine_main(int argc, char **argv) {
    const char *cmd = "run";
    cli_dc_opts o = cli_dc_default_opts();
    o.tokens = 32, o.hidden = 1024; /* --experts and --topk: 0 until given (defaults below) */
    int64_t inter = 512, iterations = 5, check_tokens = 8;
    int json = 0;
    const char *trace_path = NULL;
    const cli_option options[] = {
        CLI_DC_OPTIONS(&o),
        CLI_INT64_OPTION("intermediate", &inter, 2, 1 << 16),
        CLI_INT64_OPTION("iterations", &iterations, 1, 100000),
        CLI_INT64_OPTION("check-tokens", &check_tokens, 0, 1 << 20),
        CLI_THREADS_OPTION,
        CLI_FLAG_OPTION("json", &json),
        CLI_TEXT_OPTION("trace", &trace_path),
    };
    int done = cli_options_parse(cmd, run_usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    if (json && cli_json_redirect(cmd) != 0) return MM_CLI_EXIT_FAILURE;
    if (o.tp == 2 && inter % 2) return cli_usage_error(cmd, "--intermediate must be even with --tp 2");
    int64_t routed_ranks = o.shared_ranks < o.ranks ? o.ranks - o.shared_ranks : 1;
    if (!o.experts) o.experts = o.tp == 2 ? routed_ranks : 4 * routed_ranks;
    if (o.tp == 2 && o.experts != routed_ranks) /* said here, before the operator's own message */
        return cli_usage_error(cmd,
                               "--tp 2 needs one expert per routed-expert rank: --experts %lld, not %lld",
                               (long long)routed_ranks, (long long)o.experts);
    cli_trace trace;
    if (cli_trace_start(&trace, cmd, trace_path, "megamoe run --op dispatch-combine") != 0)
        return MM_CLI_EXIT_FAILURE;
    double t_setup = cli_now_seconds();
    cli_dc_world w;
    int rc = cli_dc_world_make(cmd, &o, &w);
    if (rc) {
        cli_dc_world_free(&w);
        cli_trace_close(&trace, cmd, trace_path);
        return rc;
    }
    cli_trace_slice(&trace, 0, "setup", "setup", t_setup, cli_now_seconds(), NULL);
    run_ctx run = {&w,
                   inter,
                   iterations,
                   check_tokens,
                   calloc((size_t)(w.nranks * iterations * ST_COUNT), sizeof(double)),
                   trace_path ? calloc((size_t)(w.nranks * iterations * (ST_COUNT + 1)), sizeof(double))
                              : NULL,
                   {{0}},
                   trace_path ? calloc((size_t)w.nranks, sizeof(run_dc_trace_rank)) : NULL,
                   calloc((size_t)w.nranks, sizeof(int64_t)),
                   0,
                   0,
                   {{0}}};
    mm_error err;
    mm_error_clear(&err);
    if (!run.times || !run.rows || (trace_path && (!run.stamps || !run.received))) {
        cli_error(cmd, "out of memory");
        rc = MM_CLI_EXIT_FAILURE;
        goto done;
    }
    mm_status st = mm_comm_run_threads((int)w.nranks, rank_fn, &run, NULL, NULL, &err);
    if (st) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    int64_t total_rows = 0;
    for (int64_t g = 0; g < w.nranks; g++) total_rows += run.rows[g];
    /* --trace: track 0 the host (setup), track g + 1 rank g (run_dc_trace.h) */
    run_dc_trace_write(&trace, &w, run.received, run.stamps, iterations, (const double(*)[2])run.check_span);
    printf(
        "dispatch-combine: %lld rank%s (EP %lld x TP %lld%s), Bs %lld, H %lld, K %lld, %lld routed experts "
        "(%lld per rank), %lld shared, I %lld, quant_mode %lld; %lld rows received in all\n",
        (long long)w.nranks, cli_plural_s(w.nranks), (long long)o.ranks, (long long)w.tpw,
        w.elastic ? ", elastic scale-in" : "", (long long)w.o.tokens, (long long)w.o.hidden,
        (long long)w.o.topk, (long long)w.M_eff, (long long)w.L, (long long)o.shared_experts,
        (long long)inter, (long long)o.quant, (long long)total_rows);
    char pool[160];
    cli_threads_describe(pool, sizeof pool);
    printf("worker pool: %s\n", pool);
    char kernels[400];
    cli_kernels_describe(kernels, sizeof kernels, "the expert FFN", MM_DTYPE_BF16, MM_DTYPE_BF16,
                         MM_DTYPE_BF16);
    printf("%s\n", kernels);
    if (cli_json_out()) {
        cli_json j = cli_json_header("run", "op", "dispatch-combine");
        cli_json_int(&j, "ranks", w.nranks);
        cli_json_int(&j, "ep", o.ranks);
        cli_json_int(&j, "tp", w.tpw);
        cli_json_int(&j, "tokens_per_rank", w.o.tokens);
        cli_json_int(&j, "hidden", w.o.hidden);
        cli_json_int(&j, "topk", w.o.topk);
        cli_json_int(&j, "experts", w.M_eff);
        cli_json_int(&j, "shared_experts", o.shared_experts);
        cli_json_int(&j, "intermediate", inter);
        cli_json_int(&j, "quant_mode", o.quant);
        cli_json_int(&j, "iterations", iterations);
        cli_json_int(&j, "rows_received", total_rows);
        cli_json_end(&j);
    }
    printf("%-20s %12s %12s %12s\n", "stage", "median us", "min us", "max us");
    double *per = malloc((size_t)iterations * sizeof(double)),
           *sum = calloc((size_t)iterations, sizeof(double));
    for (int s = 0; s <= ST_COUNT && per && sum; s++) {
        for (int64_t it = 0; it < iterations; it++) {
            double mx = 0;
            for (int64_t g = 0; g < w.nranks; g++) {
                if (!w.rank[g].alive) continue;
                double v =
                    s < ST_COUNT
                        ? run.times[((size_t)g * (size_t)iterations + (size_t)it) * ST_COUNT + (size_t)s]
                        : 0;
                if (s == ST_COUNT)
                    for (int q = 0; q < ST_COUNT; q++)
                        v += run.times[((size_t)g * (size_t)iterations + (size_t)it) * ST_COUNT + (size_t)q];
                if (v > mx) mx = v;
            }
            per[it] = mx;
        }
        cli_time_stats ts = cli_time_stats_of(per, (size_t)iterations);
        printf("%-20s %12.1f %12.1f %12.1f\n", s < ST_COUNT ? run_dc_stage_names[s] : "total (per rank)",
               ts.median * 1e6, ts.min * 1e6, ts.max * 1e6);
        if (cli_json_out()) {
            cli_json j = cli_json_row("row");
            cli_json_str(&j, "stage", s < ST_COUNT ? run_dc_stage_names[s] : "total");
            cli_json_num(&j, "median_us", ts.median * 1e6);
            cli_json_num(&j, "min_us", ts.min * 1e6);
            cli_json_num(&j, "max_us", ts.max * 1e6);
            cli_json_end(&j);
        }
    }
    free(per), free(sum);
    printf("check: every iteration gives the same bits: %s; outputs finite: %s\n",
           run.mismatch ? "NO" : "yes", run.not_finite ? "NO" : "yes");
    rc = run.mismatch || run.not_finite ? MM_CLI_EXIT_FAILURE : MM_CLI_EXIT_OK;
    cli_json check = {NULL, 0};
    if (cli_json_out()) {
        check = cli_json_row("check");
        cli_json_bool(&check, "same_bits", !run.mismatch);
        cli_json_bool(&check, "finite", !run.not_finite);
    }
    if (check_tokens > 0 && cli_dc_check_supported(&w)) {
        cli_dc_check_stats all = {0};
        for (int64_t g = 0; g < w.nranks; g++) {
            const cli_dc_check_stats *c = &run.check[g];
            all.tokens += c->tokens, all.inactive += c->inactive, all.values += c->values;
            all.within += c->within;
            if (c->max_err_over_rms > all.max_err_over_rms) all.max_err_over_rms = c->max_err_over_rms;
        }
        printf("check: float64 reference on %lld tokens (+ %lld inactive, zeros expected): max |y - y_ref| / "
               "rms(y_ref) %.2e, %.1f%% of y, x, rstd within tolerance\n",
               (long long)all.tokens, (long long)all.inactive, all.max_err_over_rms,
               all.values ? 100.0 * (double)all.within / (double)all.values : 100.0);
        if (check.out) {
            cli_json_int(&check, "reference_tokens", all.tokens);
            cli_json_num(&check, "maxerr_over_rms", all.max_err_over_rms);
            cli_json_num(&check, "in_tolerance_pct",
                         all.values ? 100.0 * (double)all.within / (double)all.values : 100.0);
        }
        if (all.within != all.values) {
            cli_error(cmd, "%lld of %lld checked values are outside the float64 tolerance",
                      (long long)(all.values - all.within), (long long)all.values);
            rc = MM_CLI_EXIT_FAILURE;
        }
    } else if (check_tokens > 0) {
        printf("check: no float64 check with --tp 2 or --remove (the operator tests pin those)\n");
    }
    if (check.out) cli_json_end(&check);
    if (trace.file) printf("trace: %s (one track per rank; open in ui.perfetto.dev)\n", trace_path);
done:
    if (cli_trace_close(&trace, cmd, trace_path) != 0 && rc == MM_CLI_EXIT_OK) rc = MM_CLI_EXIT_FAILURE;
    free(run.times), free(run.stamps), free(run.received), free(run.rows);
    cli_dc_world_free(&w);
    return rc;
}
