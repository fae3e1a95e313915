/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_world.c: `megamoe bench world`: what it costs per call to drive R thread ranks from
 * one host thread, a persistent world (megamoe/world.h) against today's per-call launcher
 * (mm_comm_run_threads), at decode.
 *
 * For each rank count, measured in the same run with repetitions interleaved (so that the noise of this
 * shared machine hits every method alike):
 *   empty fn     a rank function that returns at once: the pure round trip of a call, through the
 *                world's parked threads (mm_world_run) and through mm_comm_run_threads (R threads
 *                started, joined and their group freed per call);
 *   MegaMoE      one decode call (1 token per rank) at the Qwen3-30B-A3B shape, weights packed once:
 *                  spmd    the ranks call mm_mega_moe_run back to back inside one world call (the floor:
 *                          no hand-off at all), rank 0's time per call between two barriers;
 *                  world   mm_mega_moe_world_run from this thread, per call;
 *                  launch  mm_comm_run_threads per call, each launch creating the buffer on its fresh
 *                          communicators, one mm_mega_moe_run, freeing the buffer (what an engine calling
 *                          the launcher per layer must do; the packed weights are reused).
 * The overhead columns are world - spmd and launch - spmd. The world's y is checked bit-identical to
 * the launcher's. Results: docs/world.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/cli_json.h"
#include "common/cli_options.h"
#include "common/cli_threads.h"
#include "common/cli_util.h"
#include "common/timing.h"
#include "core/cpu.h"
#include "megamoe/world.h"
#include "run/run_moe.h"

#define MAX_RANK_COUNTS 8
#define MAX_REPS        32

static const char *const cmd = "bench world";

static const char usage[] =
    "usage: megamoe bench world [options]\n"
    "\n"
    "Per-call cost of driving R thread ranks from one host thread: a persistent world (mm_world_run,\n"
    "mm_mega_moe_world_run) vs mm_comm_run_threads per call, for an empty rank function (the pure round\n"
    "trip) and for one MegaMoE decode call (1 token per rank, Qwen3-30B-A3B shape), against the ranks\n"
    "calling mm_mega_moe_run back to back (no hand-off). Medians over repetitions, interleaved.\n"
    "\n"
    "options:\n"
    "      --ranks LIST         rank counts, comma-separated (default 1,2,4)\n"
    "      --experts E          routed experts loaded (default the preset's 128; fewer saves memory)\n"
    "      --scenario NAME      quantization scenario (default a16w16)\n"
    "      --calls N            MegaMoE calls per repetition for spmd and world (default 20)\n"
    "      --launches N         MegaMoE launches per repetition for mm_comm_run_threads (default 10)\n"
    "      --empty-calls N      empty calls per repetition on the world (default 2000; launcher: N / 10)\n"
    "      --iterations K       timed repetitions of each method (default 7; one warm-up first)\n"
    "      --seed S             seed of weights and tokens (default 1)\n"
    "      --json               JSON Lines on stdout instead of the table (docs/cli.md)\n"
    "  -h, --help               show this help\n";

typedef struct bench_options {
    int64_t ranks[MAX_RANK_COUNTS];
    int n_ranks;
    int64_t experts, calls, launches, empty_calls, reps;
    const char *scenario;
    uint64_t seed;
} bench_options;

/* ---- empty rank function ------------------------------------------------------------------------ */

static mm_status empty_rank(mm_comm *comm, void *arg, mm_error *err) {
    (void)comm;
    (void)arg;
    (void)err;
    return MM_OK;
}

/* ---- MegaMoE on one world ----------------------------------------------------------------------- */

typedef struct moe_setup {
    run_moe_config cfg;
    const run_moe_scenario *sc;
    mm_mega_moe_attrs attrs;
    mm_world *world;
    mm_mega_moe_buffer *buffers[MM_COMM_MAX_RANKS];
    mm_mega_moe_weights *weights[MM_COMM_MAX_RANKS];
    run_moe_tokens tok[MM_COMM_MAX_RANKS];
    uint16_t y[MM_COMM_MAX_RANKS][8192];        /* one token of H <= 8192 */
    uint16_t y_launch[MM_COMM_MAX_RANKS][8192]; /* the launcher's, for the bit check */
    int32_t *etn[MM_COMM_MAX_RANKS];
    mm_tensor x_t[MM_COMM_MAX_RANKS], ids_t[MM_COMM_MAX_RANKS], gates_t[MM_COMM_MAX_RANKS];
    mm_tensor y_t[MM_COMM_MAX_RANKS], yl_t[MM_COMM_MAX_RANKS], etn_t[MM_COMM_MAX_RANKS];
    mm_mega_moe_inputs in[MM_COMM_MAX_RANKS];
    mm_mega_moe_outputs out[MM_COMM_MAX_RANKS], out_launch[MM_COMM_MAX_RANKS];
    int64_t calls;        /* spmd: calls per world call */
    double spmd_per_call; /* spmd: rank 0's seconds per call */
} moe_setup;

static mm_status moe_setup_make(moe_setup *s, const bench_options *o, int64_t R, mm_error *err) {
    const run_moe_preset *pr = run_moe_find_preset("qwen3-30b-a3b");
    s->sc = run_moe_find_scenario(o->scenario);
    run_moe_config *c = &s->cfg;
    c->preset = pr;
    c->hidden = pr->hidden;
    c->inter = pr->inter;
    c->experts = o->experts;
    c->topk = pr->topk;
    c->ranks = R;
    c->tokens = 1;
    c->seed = o->seed;
    c->skew = 1.0;
    s->attrs = run_moe_attrs(c, s->sc);
    int64_t H = c->hidden, K = c->topk, El = c->experts / R;
    mm_status st = mm_world_create((int)R, MM_WORLD_DEFAULT, &s->world, err);
    mm_mega_moe_sizing sizing = {c->experts, 1, K, H, c->inter, 0};
    if (st == MM_OK) st = mm_mega_moe_world_buffers_create(s->world, &sizing, s->buffers, err);
    for (int64_t r = 0; r < R && st == MM_OK; r++) {
        /* weights are local: packed from this thread, rank r's experts on rank r's buffer */
        st = run_moe_weights_make(mm_world_comm(s->world, (int)r), c, s->sc, s->buffers[r], &s->weights[r],
                                  NULL, err);
        if (st == MM_OK) st = run_moe_tokens_make(c, r, &s->tok[r], err);
        if (st == MM_OK && !(s->etn[r] = calloc((size_t)El, sizeof(int32_t))))
            st = cli_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for expert_token_nums");
        if (st != MM_OK) break;
        int64_t xs[2] = {1, H}, ks[2] = {1, K}, es[1] = {El};
        s->x_t[r] = mm_tensor_make(MM_DTYPE_BF16, 2, xs, s->tok[r].x);
        s->ids_t[r] = mm_tensor_make(MM_DTYPE_I32, 2, ks, s->tok[r].ids);
        s->gates_t[r] = mm_tensor_make(MM_DTYPE_F32, 2, ks, s->tok[r].weights);
        s->y_t[r] = mm_tensor_make(MM_DTYPE_BF16, 2, xs, s->y[r]);
        s->yl_t[r] = mm_tensor_make(MM_DTYPE_BF16, 2, xs, s->y_launch[r]);
        s->etn_t[r] = mm_tensor_make(MM_DTYPE_I32, 1, es, s->etn[r]);
        s->in[r] = (mm_mega_moe_inputs){&s->x_t[r], NULL, &s->ids_t[r], &s->gates_t[r], NULL};
        s->out[r] = (mm_mega_moe_outputs){&s->y_t[r], &s->etn_t[r]};
        s->out_launch[r] = (mm_mega_moe_outputs){&s->yl_t[r], &s->etn_t[r]};
    }
    return st;
}

static void moe_setup_free(moe_setup *s) {
    for (int64_t r = 0; r < s->cfg.ranks; r++) {
        mm_mega_moe_weights_free(s->weights[r]);
        run_moe_tokens_free(&s->tok[r]);
        free(s->etn[r]);
    }
    if (s->world) mm_mega_moe_world_buffers_free(s->world, s->buffers, NULL);
    mm_world_free(s->world, NULL);
}

/* The floor: s->calls back-to-back calls on every rank inside one world call. */
static mm_status spmd_rank(mm_comm *comm, void *arg, mm_error *err) {
    moe_setup *s = arg;
    int r = mm_comm_rank(comm);
    mm_status st = mm_comm_barrier(comm, err);
    double t0 = cli_now_seconds();
    for (int64_t i = 0; i < s->calls && st == MM_OK; i++)
        st = mm_mega_moe_run(s->buffers[r], s->weights[r], &s->attrs, &s->in[r], &s->out[r], err);
    if (st == MM_OK) st = mm_comm_barrier(comm, err);
    if (r == 0) s->spmd_per_call = (cli_now_seconds() - t0) / (double)s->calls;
    return st;
}

/* Today's launcher per call: a buffer on the fresh communicators, one call, the buffer freed. */
static mm_status launch_rank(mm_comm *comm, void *arg, mm_error *err) {
    moe_setup *s = arg;
    int r = mm_comm_rank(comm);
    mm_mega_moe_sizing sizing = *mm_mega_moe_buffer_sizing(s->buffers[r]);
    mm_mega_moe_buffer *b = NULL;
    mm_status st = mm_mega_moe_buffer_create(comm, &sizing, &b, err);
    if (st == MM_OK) st = mm_mega_moe_run(b, s->weights[r], &s->attrs, &s->in[r], &s->out_launch[r], err);
    mm_status freed = mm_mega_moe_buffer_free(b, st == MM_OK ? err : NULL);
    return st != MM_OK ? st : freed;
}

/* ---- one rank count ----------------------------------------------------------------------------- */

enum { M_EMPTY_WORLD, M_EMPTY_LAUNCH, M_SPMD, M_WORLD, M_LAUNCH, M_COUNT };

/* Seconds per call of method m, one repetition (rep < 0: warm-up). */
static mm_status time_method(int m, moe_setup *s, const bench_options *o, double *out, mm_error *err) {
    int R = (int)s->cfg.ranks;
    int64_t n = m == M_EMPTY_WORLD    ? o->empty_calls
                : m == M_EMPTY_LAUNCH ? (o->empty_calls / 10 > 0 ? o->empty_calls / 10 : 1)
                : m == M_LAUNCH       ? o->launches
                                      : o->calls;
    mm_status st = MM_OK;
    double t0 = cli_now_seconds();
    switch (m) {
    case M_EMPTY_WORLD:
        for (int64_t i = 0; i < n && st == MM_OK; i++)
            st = mm_world_run(s->world, empty_rank, NULL, NULL, NULL, err);
        break;
    case M_EMPTY_LAUNCH:
        for (int64_t i = 0; i < n && st == MM_OK; i++)
            st = mm_comm_run_threads(R, empty_rank, NULL, NULL, NULL, err);
        break;
    case M_SPMD:
        s->calls = n;
        st = mm_world_run(s->world, spmd_rank, s, NULL, NULL, err);
        *out = s->spmd_per_call;
        return st;
    case M_WORLD:
        for (int64_t i = 0; i < n && st == MM_OK; i++)
            st = mm_mega_moe_world_run(s->world, s->buffers, (const mm_mega_moe_weights *const *)s->weights,
                                       &s->attrs, s->in, s->out, err);
        break;
    default:
        for (int64_t i = 0; i < n && st == MM_OK; i++)
            st = mm_comm_run_threads(R, launch_rank, s, NULL, NULL, err);
        break;
    }
    *out = (cli_now_seconds() - t0) / (double)n;
    return st;
}

static int bench_ranks(const bench_options *o, int64_t R) {
    moe_setup *s = calloc(1, sizeof *s);
    if (!s) {
        cli_error(cmd, "out of memory");
        return MM_CLI_EXIT_FAILURE;
    }
    mm_error err;
    mm_error_clear(&err);
    double t_setup = cli_now_seconds();
    mm_status st = moe_setup_make(s, o, R, &err);
    t_setup = cli_now_seconds() - t_setup;
    double samples[M_COUNT][MAX_REPS];
    for (int64_t rep = -1; rep < o->reps && st == MM_OK; rep++)
        for (int m = 0; m < M_COUNT && st == MM_OK; m++) {
            double v = 0;
            st = time_method(m, s, o, &v, &err);
            if (rep >= 0) samples[m][rep] = v;
        }
    int rc = MM_CLI_EXIT_OK;
    if (st != MM_OK) {
        rc = cli_report(cmd, &err);
    } else {
        int identical = 1;
        for (int64_t r = 0; r < R; r++)
            identical &= memcmp(s->y[r], s->y_launch[r], (size_t)s->cfg.hidden * 2) == 0;
        double med[M_COUNT];
        for (int m = 0; m < M_COUNT; m++) med[m] = cli_time_stats_of(samples[m], (size_t)o->reps).median;
        printf("%5lld %10.1f %11.1f %10.3f %10.3f %10.3f %10.1f %11.1f %9s %8.1f\n", (long long)R,
               1e6 * med[M_EMPTY_WORLD], 1e6 * med[M_EMPTY_LAUNCH], 1e3 * med[M_SPMD], 1e3 * med[M_WORLD],
               1e3 * med[M_LAUNCH], 1e6 * (med[M_WORLD] - med[M_SPMD]), 1e6 * (med[M_LAUNCH] - med[M_SPMD]),
               identical ? "yes" : "NO", t_setup);
        fflush(stdout);
        if (cli_json_out()) {
            cli_json j = cli_json_row("row");
            cli_json_int(&j, "ranks", R);
            cli_json_num(&j, "empty_world_us", 1e6 * med[M_EMPTY_WORLD]);
            cli_json_num(&j, "empty_launch_us", 1e6 * med[M_EMPTY_LAUNCH]);
            cli_json_num(&j, "moe_spmd_ms", 1e3 * med[M_SPMD]);
            cli_json_num(&j, "moe_world_ms", 1e3 * med[M_WORLD]);
            cli_json_num(&j, "moe_launch_ms", 1e3 * med[M_LAUNCH]);
            cli_json_num(&j, "world_overhead_us", 1e6 * (med[M_WORLD] - med[M_SPMD]));
            cli_json_num(&j, "launch_overhead_us", 1e6 * (med[M_LAUNCH] - med[M_SPMD]));
            cli_json_bool(&j, "y_world_equals_launch", identical);
            cli_json_num(&j, "setup_s", t_setup);
            cli_json_end(&j);
        }
        if (!identical) {
            cli_error(cmd, "the world's y differs from the launcher's at %lld ranks", (long long)R);
            rc = MM_CLI_EXIT_FAILURE;
        }
    }
    moe_setup_free(s);
    free(s);
    return rc;
}

static int parse_ranks(const char *command, const char *option, const char *text, void *target) {
    bench_options *o = target;
    return cli_parse_int64_list(command, option, text, 1, MM_COMM_MAX_RANKS, o->ranks, MAX_RANK_COUNTS,
                                &o->n_ranks, "count");
}

int mm_bench_world_main(int argc, char **argv) {
    bench_options o = {{1, 2, 4}, 3, 128, 20, 10, 2000, 7, "a16w16", 1};
    int json = 0;
    const cli_option options[] = {
        CLI_CUSTOM_OPTION("ranks", parse_ranks, &o),
        CLI_INT64_OPTION("experts", &o.experts, 8, 128),
        CLI_CUSTOM_OPTION("scenario", run_moe_parse_scenario, &o.scenario),
        CLI_INT64_OPTION("calls", &o.calls, 1, 100000),
        CLI_INT64_OPTION("launches", &o.launches, 1, 100000),
        CLI_INT64_OPTION("empty-calls", &o.empty_calls, 1, 10000000),
        CLI_INT64_OPTION("iterations", &o.reps, 1, MAX_REPS),
        CLI_SEED_OPTION(&o.seed),
        CLI_FLAG_OPTION("json", &json),
    };
    int done = cli_options_parse(cmd, usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    for (int i = 0; i < o.n_ranks; i++)
        if (o.experts % o.ranks[i] != 0 || o.experts / o.ranks[i] < 1)
            return cli_usage_error(cmd, "%lld ranks do not divide --experts %lld", (long long)o.ranks[i],
                                   (long long)o.experts);
    if (json && cli_json_redirect(cmd) != 0) return MM_CLI_EXIT_FAILURE;
    char cpu[256], pool[160];
    cli_cpu_model(cpu, sizeof cpu);
    cli_threads_describe(pool, sizeof pool);
    printf("megamoe bench world: per-call cost of driving R thread ranks from one host thread\n"
           "CPU: %s, %ld online CPUs, ISA %s\nworker pool: %s\n"
           "MegaMoE: Qwen3-30B-A3B shape (H 2048, I 768, top-8), %lld routed experts loaded, %s, decode: 1 "
           "token "
           "per rank\n"
           "medians over %lld repetitions (interleaved); empty: %lld world calls / %lld launches per "
           "repetition; "
           "MegaMoE: %lld calls (spmd, world) / %lld launches per repetition\n"
           "spmd = ranks call mm_mega_moe_run back to back (no hand-off); overhead = method - spmd\n",
           cpu[0] ? cpu : "unknown CPU", sysconf(_SC_NPROCESSORS_ONLN), mm_isa_name(mm_cpu_isa()), pool,
           (long long)o.experts, o.scenario, (long long)o.reps, (long long)o.empty_calls,
           (long long)(o.empty_calls / 10 > 0 ? o.empty_calls / 10 : 1), (long long)o.calls,
           (long long)o.launches);
    run_moe_print_kernels(run_moe_find_scenario(o.scenario));
    printf("\n");
    if (cli_json_out()) {
        cli_json j = cli_json_header("bench", "bench", "world");
        cli_json_str(&j, "scenario", o.scenario);
        cli_json_int(&j, "experts", o.experts);
        cli_json_int(&j, "calls", o.calls);
        cli_json_int(&j, "launches", o.launches);
        cli_json_int(&j, "empty_calls", o.empty_calls);
        cli_json_int(&j, "iterations", o.reps);
        cli_json_int(&j, "seed", (int64_t)o.seed);
        cli_json_end(&j);
    }
    printf("%5s %10s %11s %10s %10s %10s %10s %11s %9s %8s\n", "ranks",
           "empty:", "empty:", "moe:", "moe:", "moe:", "world", "launch", "y world", "setup");
    printf("%5s %10s %11s %10s %10s %10s %10s %11s %9s %8s\n", "", "world us", "launch us", "spmd ms",
           "world ms", "launch ms", "ovh us", "ovh us", "=launch", "s");
    int rc = MM_CLI_EXIT_OK;
    for (int i = 0; i < o.n_ranks && rc == MM_CLI_EXIT_OK; i++) rc = bench_ranks(&o, o.ranks[i]);
    return rc;
}
