/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_dispatch_combine.c: `megamoe bench dispatch-combine`: Dispatch V3 and Combine V2 latency
 * at decode sizes (1..32 tokens per rank, H 7168, K 8) and bandwidth at prefill sizes, next to an
 * alltoallv of the same bytes measured in the same run:
 *   --backend threads  ranks are threads; the baseline is mm_comm_alltoallv (threads backend)
 *   --backend mpi      one rank per process (under mpirun); the baseline is Open MPI's MPI_Alltoallv
 * The same bytes: every (source, destination) block holds the rows Dispatch sends there (Combine sends
 * the same rows back). The expert FFN is left out (Combine gets the dispatched rows as expert outputs).
 * A time is the median over repetitions of the slowest rank (ranks start together after a barrier). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/cli_json.h"
#include "common/cli_options.h"
#include "common/cli_threads.h"
#include "common/cli_util.h"
#include "common/dc_world.h"
#include "common/timing.h"

#ifdef MEGAMOE_HAVE_MPI
#include <mpi.h>
#endif

static const char usage[] =
    "usage: megamoe bench dispatch-combine [options]\n"
    "       mpirun -n N megamoe bench dispatch-combine --backend mpi [options]\n"
    "\n"
    "Times Dispatch V3 and Combine + Add + RMSNorm V2 (median over repetitions of the slowest rank) for\n"
    "each tokens-per-rank size, with an alltoallv of the same bytes as the baseline (threads backend:\n"
    "mm_comm_alltoallv; --backend mpi: MPI_Alltoallv). Reports microseconds and GB/s of rows moved.\n"
    "\n"
    "options:\n"
    "      --backend B       threads or mpi (default threads)\n"
    "      --ranks R         ranks for --backend threads (default 4)\n"
    "      --tokens LIST     tokens per rank, comma-separated (default 1,2,4,8,16,32,128,512)\n"
    "      --hidden H        hidden size (default 7168)\n"
    "      --topk K          experts per token (default 8)\n"
    "      --experts-per-rank E  routed experts per rank (default 8)\n"
    "      --quant-mode Q    0 or 2 (default 0)\n"
    "      --iterations N    timed repetitions (default 7)\n"
    "      --warmup N        untimed repetitions first (default 2)\n"
    "      --threads N       worker-pool threads of each process, the caller included (default:\n"
    "                        MEGAMOE_NUM_THREADS, else the CPUs of the affinity mask within the cgroup\n"
    "                        CPU quota; docs/threads.md)\n"
    "      --json            JSON Lines on stdout instead of the table (docs/cli.md)\n"
    "  -h, --help            show this help\n";

enum { M_DISPATCH, M_COMBINE, M_A2A, M_COUNT };

typedef struct bench_run {
    const cli_dc_world *w;
    int64_t reps, warmup;
    double *t;          /* [rank][rep][method] */
    size_t *counts;     /* [src][dst] bytes of the alltoallv baseline */
    int64_t *rows_recv; /* per rank */
    int use_mpi_a2a;
} bench_run;

/* Bytes each source sends each destination: its dispatched rows (routing of the page, no elastic). */
static void routed_bytes(const cli_dc_world *w, size_t *counts) {
    int64_t R = w->nranks, K = w->o.topk, H = w->o.hidden;
    size_t rb = (size_t)H * (w->o.quant == 2 ? 1 : 2);
    memset(counts, 0, sizeof(size_t) * (size_t)(R * R));
    for (int64_t s = 0; s < R; s++)
        for (int64_t i = 0; i < w->rank[s].bs; i++)
            for (int64_t k = 0; k < K; k++) {
                int64_t e = w->rank[s].ids[i * K + k];
                if (e < w->M_eff) counts[s * R + e / w->L] += rb;
            }
}

static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    bench_run *b = arg;
    const cli_dc_world *w = b->w;
    int g = mm_comm_rank(comm), R = (int)w->nranks;
    mm_dc_workspace *ws = NULL;
    cli_dc_dispatch_out d;
    memset(&d, 0, sizeof d);
    int64_t bs = w->rank[g].bs, H = w->o.hidden;
    uint16_t *y = malloc((size_t)(bs + 1) * (size_t)H * 2), *x = malloc((size_t)(bs + 1) * (size_t)H * 2);
    uint16_t *ex_bf16 = NULL;
    float *rstd = malloc((size_t)(bs + 1) * 4);
    size_t send_total = 0, recv_total = 0, sc[MM_COMM_MAX_RANKS], sd[MM_COMM_MAX_RANKS],
           rc[MM_COMM_MAX_RANKS], rd[MM_COMM_MAX_RANKS];
    for (int p = 0; p < R; p++) {
        sc[p] = b->counts[(size_t)g * (size_t)R + (size_t)p], sd[p] = send_total, send_total += sc[p];
        rc[p] = b->counts[(size_t)p * (size_t)R + (size_t)g], rd[p] = recv_total, recv_total += rc[p];
    }
    unsigned char *sbuf = malloc(send_total + 1), *rbuf = malloc(recv_total + 1);
    mm_status st =
        y && x && rstd && sbuf && rbuf ? mm_dc_workspace_create(comm, &ws, err) : MM_ERR_OUT_OF_MEMORY;
    if (st) goto done;
    memset(sbuf, 1, send_total + 1);
    for (int64_t rep = -b->warmup; rep < b->reps; rep++) {
        double t[4];
        if ((st = mm_comm_barrier(comm, err))) goto done;
        t[0] = cli_now_seconds();
        if ((st = cli_dc_dispatch(ws, w, g, &d, err))) goto done;
        t[1] = cli_now_seconds();
        if (!ex_bf16) { /* Combine's expert outputs: the dispatched rows as BF16 (identity expert) */
            ex_bf16 = calloc((size_t)(d.rows + 1) * (size_t)H, 2);
            if (!ex_bf16) goto done;
            if (w->o.quant == 0) memcpy(ex_bf16, d.expand_x, (size_t)d.rows * (size_t)H * 2);
        }
        cli_dc_tensors tt;
        mm_combine_v2_inputs in;
        cli_dc_combine_inputs(w, g, &d, ex_bf16, &tt, &in);
        mm_combine_v2_outputs out = cli_dc_combine_outputs(w, g, y, x, rstd, &tt);
        mm_dc_attrs a = cli_dc_attrs(w, g);
        if ((st = mm_comm_barrier(comm, err))) goto done;
        t[1] = t[1] - t[0];
        t[0] = cli_now_seconds();
        if ((st = mm_combine_v2(ws, &in, &a, &out, err))) goto done;
        t[2] = cli_now_seconds() - t[0];
        if ((st = mm_comm_barrier(comm, err))) goto done;
        t[0] = cli_now_seconds();
#ifdef MEGAMOE_HAVE_MPI
        if (b->use_mpi_a2a) {
            int isc[MM_COMM_MAX_RANKS], isd[MM_COMM_MAX_RANKS], irc[MM_COMM_MAX_RANKS],
                ird[MM_COMM_MAX_RANKS];
            for (int p = 0; p < R; p++)
                isc[p] = (int)sc[p], isd[p] = (int)sd[p], irc[p] = (int)rc[p], ird[p] = (int)rd[p];
            MPI_Alltoallv(sbuf, isc, isd, MPI_BYTE, rbuf, irc, ird, MPI_BYTE, MPI_COMM_WORLD);
        } else
#endif
            if ((st = mm_comm_alltoallv(comm, sbuf, sc, sd, rbuf, rc, rd, err)))
            goto done;
        t[3] = cli_now_seconds() - t[0];
        if (rep >= 0) {
            double *dst = b->t + ((size_t)g * (size_t)b->reps + (size_t)rep) * M_COUNT;
            dst[M_DISPATCH] = t[1], dst[M_COMBINE] = t[2], dst[M_A2A] = t[3];
        }
    }
    b->rows_recv[g] = d.rows;
done:
    if (st == MM_ERR_OUT_OF_MEMORY && !err->message[0])
        snprintf(err->message, sizeof err->message, "out of memory");
    cli_dc_dispatch_out_free(&d);
    mm_dc_workspace_free(ws, NULL);
    free(y), free(x), free(rstd), free(ex_bf16), free(sbuf), free(rbuf);
    return st;
}

typedef struct bench_cfg {
    const char *backend;
    int mpi; /* backend mpi: the baseline is MPI_Alltoallv */
    int64_t ranks, hidden, topk, per_rank, quant, reps, warmup;
    int64_t tokens[16];
    int n_tokens;
} bench_cfg;

static void print_header(const bench_cfg *c, int64_t ranks) {
    printf(
        "bench dispatch-combine: %lld rank%s (%s), H %lld, K %lld, %lld experts per rank, quant_mode %lld; "
        "median of %lld after %lld warm-up, slowest rank\n",
        (long long)ranks, cli_plural_s(ranks), c->mpi ? "MPI processes" : "threads of one process",
        (long long)c->hidden, (long long)c->topk, (long long)c->per_rank, (long long)c->quant,
        (long long)c->reps, (long long)c->warmup);
    char pool[160];
    cli_threads_describe(pool, sizeof pool);
    printf("worker pool: %s\n", pool);
    char cpu[400];
    cli_cpu_describe(cpu, sizeof cpu);
    printf("cpu: %s\n", cpu);
    printf("%-8s %10s %12s %12s %14s %10s %10s %12s\n", "tokens", "rows", "dispatch us", "combine us",
           c->mpi ? "MPI_A2Av us" : "mm_a2av us", "disp GB/s", "comb GB/s", "disp/a2av");
    if (!cli_json_out()) return;
    cli_json j = cli_json_header("bench", "bench", "dispatch-combine");
    cli_json_str(&j, "backend", c->mpi ? "mpi" : "threads");
    cli_json_int(&j, "ranks", ranks);
    cli_json_int(&j, "hidden", c->hidden);
    cli_json_int(&j, "topk", c->topk);
    cli_json_int(&j, "experts_per_rank", c->per_rank);
    cli_json_int(&j, "quant_mode", c->quant);
    cli_json_int(&j, "iterations", c->reps);
    cli_json_int(&j, "warmup", c->warmup);
    cli_json_str(&j, "baseline", c->mpi ? "MPI_Alltoallv" : "mm_comm_alltoallv");
    cli_json_end(&j);
}

/* One size. On MPI every process runs its rank; process 0 prints. */
static int bench_size(const char *cmd, const bench_cfg *c, mm_comm *mpi_comm, int64_t ranks, int64_t tokens) {
    cli_dc_opts o = cli_dc_default_opts();
    o.ranks = ranks, o.experts = ranks * c->per_rank, o.tokens = tokens, o.hidden = c->hidden,
    o.topk = c->topk;
    o.quant = c->quant, o.seed = 11;
    cli_dc_world w;
    int rc = cli_dc_world_make(cmd, &o, &w);
    if (rc) {
        cli_dc_world_free(&w);
        return rc;
    }
    bench_run b = {&w,
                   c->reps,
                   c->warmup,
                   calloc((size_t)(ranks * c->reps * M_COUNT), sizeof(double)),
                   calloc((size_t)(ranks * ranks), sizeof(size_t)),
                   calloc((size_t)ranks, sizeof(int64_t)),
                   c->mpi};
    mm_error err;
    mm_error_clear(&err);
    mm_status st = MM_ERR_OUT_OF_MEMORY;
    if (b.t && b.counts && b.rows_recv) {
        routed_bytes(&w, b.counts);
        if (mpi_comm) {
            st = rank_fn(mpi_comm, &b, &err);
#ifdef MEGAMOE_HAVE_MPI
            /* slowest rank per repetition and the received rows, on process 0 */
            int me = mm_comm_rank(mpi_comm);
            double *mine = b.t + (size_t)me * (size_t)c->reps * M_COUNT;
            MPI_Allreduce(MPI_IN_PLACE, b.rows_recv, (int)ranks, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
            MPI_Allreduce(MPI_IN_PLACE, mine, (int)(c->reps * M_COUNT), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (me != 0) goto done;
            memcpy(b.t, mine, sizeof(double) * (size_t)(c->reps * M_COUNT));
            for (int64_t g = 1; g < ranks; g++)
                memset(b.t + g * c->reps * M_COUNT, 0, sizeof(double) * (size_t)(c->reps * M_COUNT));
#endif
        } else {
            st = mm_comm_run_threads((int)ranks, rank_fn, &b, NULL, NULL, &err);
        }
    }
    if (st) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    double med[M_COUNT], *per = malloc(sizeof(double) * (size_t)c->reps);
    for (int m = 0; m < M_COUNT && per; m++) {
        for (int64_t r = 0; r < c->reps; r++) {
            double mx = 0;
            for (int64_t g = 0; g < ranks; g++) {
                double v = b.t[((size_t)g * (size_t)c->reps + (size_t)r) * M_COUNT + (size_t)m];
                mx = v > mx ? v : mx;
            }
            per[r] = mx;
        }
        med[m] = cli_time_stats_of(per, (size_t)c->reps).median;
    }
    free(per);
    int64_t rows = 0;
    for (int64_t g = 0; g < ranks; g++) rows += b.rows_recv[g];
    double bytes = (double)rows * (double)c->hidden * (c->quant == 2 ? 1.0 : 2.0);
    printf("%-8lld %10lld %12.1f %12.1f %14.1f %10.2f %10.2f %11.2fx\n", (long long)tokens, (long long)rows,
           med[M_DISPATCH] * 1e6, med[M_COMBINE] * 1e6, med[M_A2A] * 1e6, bytes / med[M_DISPATCH] / 1e9,
           (double)rows * (double)c->hidden * 2.0 / med[M_COMBINE] / 1e9, med[M_DISPATCH] / med[M_A2A]);
    fflush(stdout);
    if (cli_json_out()) {
        cli_json j = cli_json_row("row");
        cli_json_int(&j, "tokens_per_rank", tokens);
        cli_json_int(&j, "rows", rows);
        cli_json_num(&j, "dispatch_us", med[M_DISPATCH] * 1e6);
        cli_json_num(&j, "combine_us", med[M_COMBINE] * 1e6);
        cli_json_num(&j, "alltoallv_us", med[M_A2A] * 1e6);
        cli_json_num(&j, "dispatch_gb_per_s", bytes / med[M_DISPATCH] / 1e9);
        cli_json_num(&j, "combine_gb_per_s", (double)rows * (double)c->hidden * 2.0 / med[M_COMBINE] / 1e9);
        cli_json_num(&j, "dispatch_over_alltoallv", med[M_DISPATCH] / med[M_A2A]);
        cli_json_end(&j);
    }
done:
    free(b.t), free(b.counts), free(b.rows_recv);
    cli_dc_world_free(&w);
    return rc;
}

typedef struct launched_bench {
    const char *cmd;
    const bench_cfg *c;
    int rc;
} launched_bench;

/* One process of a launched backend (mpi: under mpirun): its rank of every size; process 0 prints. */
static mm_status bench_process(mm_comm *comm, void *arg, mm_error *err) {
    (void)err;
    launched_bench *lb = arg;
    int size = mm_comm_size(comm);
    if (mm_comm_rank(comm) == 0) print_header(lb->c, size);
    for (int i = 0; i < lb->c->n_tokens && lb->rc == 0; i++)
        lb->rc = bench_size(lb->cmd, lb->c, comm, size, lb->c->tokens[i]);
    return MM_OK;
}

/* --tokens LIST: up to 16 comma-separated counts in [1, 4096]. */
static int parse_tokens(const char *command, const char *option, const char *text, void *target) {
    bench_cfg *c = target;
    c->n_tokens = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 4096 || c->n_tokens == 16) {
            cli_error(command, "%s '%s': expected up to 16 comma-separated counts in [1, 4096]", option,
                      text);
            return -1;
        }
        c->tokens[c->n_tokens++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

int mm_bench_dispatch_combine_main(int argc, char **argv) {
    const char *cmd = "bench dispatch-combine";
    bench_cfg c = {"threads", 0, 4, 7168, 8, 8, 0, 7, 2, {1, 2, 4, 8, 16, 32, 128, 512}, 8};
    int json = 0;
    const cli_option options[] = {
        CLI_BACKEND_OPTION(&c.backend),
        CLI_INT64_OPTION("ranks", &c.ranks, 1, MM_COMM_MAX_RANKS),
        CLI_CUSTOM_OPTION("tokens", parse_tokens, &c),
        CLI_INT64_OPTION("hidden", &c.hidden, 1, 65536),
        CLI_INT64_OPTION("topk", &c.topk, 1, 64),
        CLI_INT64_OPTION("experts-per-rank", &c.per_rank, 1, 1024),
        CLI_INT64_OPTION("quant-mode", &c.quant, 0, 2),
        CLI_INT64_OPTION("iterations", &c.reps, 1, 100000),
        CLI_INT64_OPTION("warmup", &c.warmup, 0, 100000),
        CLI_THREADS_OPTION,
        CLI_FLAG_OPTION("json", &json),
    };
    int done = cli_options_parse(cmd, usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    c.mpi = strcmp(c.backend, "mpi") == 0;
    if (cli_backend_is_threads(c.backend) &&
        c.topk > c.ranks * c.per_rank) /* before the header (under MPI the world size decides) */
        return cli_usage_error(cmd, "--topk %lld exceeds the %lld experts (--ranks x --experts-per-rank)",
                               (long long)c.topk, (long long)(c.ranks * c.per_rank));
    if (json && cli_json_redirect(cmd) != 0) return MM_CLI_EXIT_FAILURE;
    if (cli_backend_is_threads(c.backend)) {
        print_header(&c, c.ranks);
        for (int i = 0; i < c.n_tokens; i++) {
            int rc = bench_size(cmd, &c, NULL, c.ranks, c.tokens[i]);
            if (rc) return rc;
        }
        return MM_CLI_EXIT_OK;
    }
    launched_bench lb = {cmd, &c, MM_CLI_EXIT_OK};
    mm_error err;
    mm_error_clear(&err);
    if (mm_comm_launch(c.backend, 0, bench_process, &lb, &err) != MM_OK) return cli_report(cmd, &err);
    return lb.rc;
}
