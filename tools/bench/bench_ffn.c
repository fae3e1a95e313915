/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_ffn.c: `megamoe bench ffn`: the expert FFN on the grouped GEMM layer, per format, row
 * count and ISA level, against baselines measured in the same run:
 *   (a) peak loops of the instructions the kernels are made of (vdpbf16ps, vpdpbusd, AMX tdpbf16ps /
 *       tdpbusd, F32 FMA), 1 and N threads;
 *   (b) streaming-read bandwidth over a buffer much larger than the last-level cache, 1 and N threads;
 *   (c) the FFN: median time (1 and N threads), GFLOP/s, % of the AVX-512 dot peak of its arithmetic
 *       (vdpbf16ps for BF16 and MX, vpdpbusd for INT) and of the peak of the ISA its kernels use, weight
 *       bytes / time against the streaming bandwidth, and the N-thread speed-up;
 *   (d) oneDNN matmul with pre-packed weights on the same per-expert GEMMs (BF16, u8s8s32), when built
 *       with oneDNN.
 * The bench uses the library's internals (src/gemm, src/core), which only the CLI's bench and run files
 * see. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "bench/bench_ffn.h"
#include "common/cli_json.h"
#include "common/cli_options.h"
#include "common/cli_threads.h"
#include "common/cli_util.h"
#include "core/cpu.h"
#include "core/large_alloc.h"
#include "core/parallel.h"
#include "common/timing.h"
#include "gemm/kernel_registry.h"

static const char bench_ffn_usage[] =
    "usage: megamoe bench ffn [options]\n"
    "\n"
    "Times one expert's FFN (GEMM1 H -> 2I, SwiGLU + quantization, GEMM2 I -> H) on the grouped GEMM\n"
    "layer for each format, rows per expert and ISA level, with 1 and N threads, against peak loops of\n"
    "the kernels' instructions, a streaming-read loop and (when built with it) oneDNN, all measured in\n"
    "this run. Experts rotate so that every run streams weights that are not in cache.\n"
    "\n"
    "options:\n"
    "      --hidden LIST        hidden sizes H (default 2048,7168)\n"
    "      --intermediate I     intermediate size I (default 2048)\n"
    "      --rows LIST          rows per expert (default 1,2,4,8,64,256)\n"
    "      --format LIST        bf16,int8,int8xint4,mxfp8,mxfp8xmxfp4,mxfp4, and the weight-only\n"
    "                           a16-fp8b,a16-mxfp4,a16-uint4 (default all)\n"
    "      --isa LIST           auto,avx512,avx512-few,amx,amx-few (default all the CPU has; auto = the\n"
    "                           registry's choice, -few = the few-rows kernel of that ISA, where the\n"
    "                           format has one)\n"
    "      --threads N          the N of the N-thread columns (default: MEGAMOE_NUM_THREADS, else the CPUs\n"
    "                           of the affinity mask within the cgroup CPU quota; docs/threads.md)\n"
    "      --iterations R       timed runs per measurement, after one warm-up (default 5)\n"
    "      --stream-mb MB       streaming-read buffer and rotated weight bytes (default 1024)\n"
    "      --quick              a fast subset: H 2048, I 512, rows 1,8,64, 3 runs, 64 MB\n"
    "      --json               JSON Lines on stdout instead of the tables (docs/cli.md)\n"
    "      --plot FILE.svg      also draw the roofline of the rows (registry's kernels, N threads)\n"
    "  -h, --help               show this help\n";

#define MAX_LIST 16
enum { LEVEL_AUTO = -1 };

typedef struct ffn_config {
    int64_t hidden[MAX_LIST], rows[MAX_LIST];
    int n_hidden, n_rows;
    int64_t inter;
    int formats[FFN_FORMAT_COUNT], n_formats;
    int levels[MM_KIND_COUNT + 1], n_levels;
    int threads, repeat;
    int64_t stream_mb;
    bench_ffn_plot *plot; /* --plot: the points to draw, else NULL */
} ffn_config;

typedef struct baselines {
    double dot_bf16[2], dot_i8[2], fma[2], amx_bf16[2], amx_i8[2]; /* ops/s: [0] 1 thread, [1] N */
    double bandwidth[2];                                           /* bytes/s */
} baselines;

/* Per (format, hidden, rows): the oneDNN comparison, measured alternately with our GEMMs. */
typedef struct dnnl_result {
    int measured;                      /* 0: not applicable, 1: measured, -1: failed (why) */
    double dnnl_seconds, ours_seconds; /* medians, N threads */
    char why[160];
} dnnl_result;
/* Per (format, hidden, rows): the registry's choice (level auto), for the summary (e). */
typedef struct auto_result {
    int measured;
    double pct_dot, xbw[2], speedup;
} auto_result;
/* Per (format, hidden, rows): N-thread medians of each level, for (f) auto against the best level. */
typedef struct level_times {
    double tn[MM_KIND_COUNT + 1]; /* [0] auto, [1 + kind]; 0: not measured */
    const char *kernel[MM_KIND_COUNT + 1];
} level_times;
typedef struct best_gemm {
    dnnl_result r[FFN_FORMAT_COUNT][MAX_LIST][MAX_LIST];
    auto_result a[FFN_FORMAT_COUNT][MAX_LIST][MAX_LIST];
    level_times t[FFN_FORMAT_COUNT][MAX_LIST][MAX_LIST];
} best_gemm;

static int parse_list(const char *cmd, const char *option, const char *text, int64_t min, int64_t max,
                      int64_t *out, int *n) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIST) {
            cli_error(cmd, "%s: at most %d values", option, MAX_LIST);
            return -1;
        }
        if (cli_parse_int64(cmd, option, tok, min, max, &out[(*n)++]) != 0) return -1;
    }
    if (*n == 0) cli_error(cmd, "%s: empty list", option);
    return *n == 0 ? -1 : 0;
}

static int parse_names(const char *cmd, const char *option, const char *text, const char *const *names,
                       const int *values, int count, int *out, int *n) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < count; i++)
            if (strcmp(tok, names[i]) == 0) found = i;
        if (found < 0 || *n == count) {
            cli_error(cmd, "%s: unknown or repeated value '%s'", option, tok);
            return -1;
        }
        out[(*n)++] = values[found];
    }
    if (*n == 0) cli_error(cmd, "%s: empty list", option);
    return *n == 0 ? -1 : 0;
}

static int parse_hidden(const char *command, const char *option, const char *text, void *target) {
    ffn_config *cfg = target;
    return parse_list(command, option, text, 32, 65536, cfg->hidden, &cfg->n_hidden);
}

static int parse_rows(const char *command, const char *option, const char *text, void *target) {
    ffn_config *cfg = target;
    return parse_list(command, option, text, 1, 4096, cfg->rows, &cfg->n_rows);
}

static int parse_formats(const char *command, const char *option, const char *text, void *target) {
    static const char *const names[] = {"bf16",  "int8",     "int8xint4", "mxfp8",    "mxfp8xmxfp4",
                                        "mxfp4", "a16-fp8b", "a16-mxfp4", "a16-uint4"};
    static const int values[] = {FFN_BF16,  FFN_INT8,     FFN_INT8_INT4, FFN_MXFP8,    FFN_MXFP8_MXFP4,
                                 FFN_MXFP4, FFN_A16_FP8B, FFN_A16_MXFP4, FFN_A16_UINT4};
    ffn_config *cfg = target;
    return parse_names(command, option, text, names, values, FFN_FORMAT_COUNT, cfg->formats, &cfg->n_formats);
}

static int parse_levels(const char *command, const char *option, const char *text, void *target) {
    static const char *const names[] = {"auto", "avx512", "avx512-few", "amx", "amx-few"};
    static const int values[] = {LEVEL_AUTO, MM_KIND_AVX512, MM_KIND_AVX512_FEW, MM_KIND_AMX,
                                 MM_KIND_AMX_FEW};
    ffn_config *cfg = target;
    return parse_names(command, option, text, names, values, 5, cfg->levels, &cfg->n_levels);
}

static const char *level_name(int level) {
    return level == LEVEL_AUTO ? "auto" : mm_kernel_kind_name(level);
}

/* --json: a baseline's 1-thread and N-thread values (in units of `unit`) as one object. */
static void json_pair(const char *type, const char *key, const char *name, const char *k1, const char *kn,
                      const double v[2], double unit) {
    if (!cli_json_out()) return;
    cli_json j = cli_json_row(type);
    cli_json_str(&j, key, name);
    cli_json_num(&j, k1, v[0] / unit);
    cli_json_num(&j, kn, v[1] / unit);
    cli_json_end(&j);
}

static void measure_baselines(const ffn_config *cfg, int quick, baselines *b) {
    int t[2] = {1, cfg->threads};
    double secs = quick ? 0.02 : 0.1;
    memset(b, 0, sizeof *b);
    printf("(a) peak loops, best of 5 (GFLOP/s; INT: GOP/s)\n");
    printf("%-22s %12s %12s\n", "instruction", "1 thread", "N threads");
    struct {
        const char *name;
        bench_ffn_peak_fn fn;
        double *out;
        mm_isa isa;
    } peaks[] = {
        {"vdpbf16ps (bf16)", MM_X86_ONLY(bench_ffn_peak_vdpbf16ps), b->dot_bf16, MM_ISA_AVX512},
        {"vpdpbusd (int8)", MM_X86_ONLY(bench_ffn_peak_vpdpbusd), b->dot_i8, MM_ISA_AVX512},
        {"vfmadd231ps (f32)", MM_X86_ONLY(bench_ffn_peak_fma_f32), b->fma, MM_ISA_AVX512},
        {"AMX tdpbf16ps", MM_X86_ONLY(bench_ffn_peak_tdpbf16ps), b->amx_bf16, MM_ISA_AMX},
        {"AMX tdpbusd", MM_X86_ONLY(bench_ffn_peak_tdpbusd), b->amx_i8, MM_ISA_AMX},
    };
    for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++) {
        if (!mm_cpu_supports(peaks[i].isa)) {
            printf("%-22s %12s %12s\n", peaks[i].name, "n/a", "n/a");
            json_pair("peak", "instruction", peaks[i].name, "gops_1", "gops_n", (const double[2]){NAN, NAN},
                      1);
            continue;
        }
        for (int j = 0; j < 2; j++) peaks[i].out[j] = bench_ffn_peak_rate(peaks[i].fn, t[j], secs, 5);
        printf("%-22s %12.1f %12.1f\n", peaks[i].name, peaks[i].out[0] / 1e9, peaks[i].out[1] / 1e9);
        json_pair("peak", "instruction", peaks[i].name, "gops_1", "gops_n", peaks[i].out, 1e9);
        fflush(stdout);
    }
    size_t bytes = (size_t)cfg->stream_mb << 20;
    /* On huge pages, as the packed weights (core/large_alloc.h): the same page size on both sides. */
    uint8_t *buf = mm_cpu_supports(MM_ISA_AVX512) ? mm_alloc_large(bytes) : NULL;
    printf("\n(b) streaming read of %lld MiB, median of 5 (GB/s)\n", (long long)cfg->stream_mb);
    if (!buf) {
        printf("  not measured (no AVX-512 or out of memory)\n\n");
        return;
    }
    memset(buf, 1, bytes);
    for (int j = 0; j < 2; j++) b->bandwidth[j] = bench_ffn_stream_rate(buf, bytes, t[j], 5);
    json_pair("bandwidth", "method", "read", "gb_per_s_1", "gb_per_s_n", b->bandwidth, 1e9);
    printf("%-22s %12.1f %12.1f\n\n", "read", b->bandwidth[0] / 1e9, b->bandwidth[1] / 1e9);
    fflush(stdout);
    free(buf);
}

/* Lets the other side's idle threads stop spinning (oneDNN's OpenMP workers spin after a primitive,
 * the library's pool briefly too) before the next timed run starts. */
static void settle(void) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* A measurement whose samples spread more than MAX_SPREAD (max / min) is taken again, up to MAX_TRIES
 * attempts in all, and the steadiest attempt kept: on this VM the same FFN took 2.4 ms or 10-25 ms for
 * seconds at a time (docs/gemm.md, "Benchmarks"). */
#define MAX_SPREAD 1.5
enum { MAX_TRIES = 3 };

/* The peak that a kernel of this ISA level and format is made of. */
static double level_peak(const baselines *b, int isa, int is_int, int j) {
    if (isa == MM_ISA_AMX) return is_int ? b->amx_i8[j] : b->amx_bf16[j];
    if (isa == MM_ISA_REF) return b->fma[j];
    return is_int ? b->dot_i8[j] : b->dot_bf16[j];
}

/* Times one (expert set, rows, level) with 1 and N threads and prints its row; the N-thread median and
 * the kernel into times (when not NULL). Returns -1 on failure. */
static int measure_row(const ffn_config *cfg, const baselines *b, bench_ffn_expert *x, bench_ffn_format f,
                       int64_t hidden, int64_t inter, int64_t rows, int64_t experts, int level,
                       auto_result *keep, level_times *times) {
    bench_ffn_choice choice;
    if (bench_ffn_choose(x, level, &choice) != 0) return 0; /* the CPU lacks this level */
    int t[2] = {1, cfg->threads};
    double med[2] = {0, 0}, spread[2];
    int tries = 0; /* the most attempts of the two thread counts */
    double *samples = malloc((size_t)cfg->repeat * 2 * sizeof *samples);
    if (!samples) return -1;
    char why[256];
    int64_t run = 0;
    for (int j = 0; j < 2; j++) {
        mm_parallel_set_num_threads(t[j]);
        /* Up to MAX_TRIES attempts while the samples spread more than MAX_SPREAD (max / min): the
         * steadiest attempt is kept, its median reported, the spread and attempts printed. */
        spread[j] = INFINITY;
        for (int a = 0; a < MAX_TRIES && spread[j] > MAX_SPREAD; a++) {
            if (a + 1 > tries) tries = a + 1;
            if (a > 0) settle();
            for (int r = -1; r < cfg->repeat; r++, run++) {
                double total, gemm;
                if (bench_ffn_expert_run(x, run % experts, rows, &choice, &total, &gemm, why, sizeof why) !=
                    0) {
                    cli_error("bench ffn", "%s", why);
                    free(samples);
                    return -1;
                }
                (void)gemm;
                if (r >= 0) samples[r] = total;
            }
            cli_time_stats st = cli_time_stats_of(samples, (size_t)cfg->repeat);
            if (st.max / st.min < spread[j]) spread[j] = st.max / st.min, med[j] = st.median;
        }
    }
    free(samples);
    int is_int = bench_ffn_format_is_int(f);
    const char *kname = bench_ffn_kernel_name(x, &choice, rows);
    int isa = level >= 0               ? bench_ffn_level_isa(level)
              : strstr(kname, "_amx_") ? MM_ISA_AMX
              : strstr(kname, "_ref_") ? MM_ISA_REF
                                       : MM_ISA_AVX512;
    double flops = 6.0 * (double)rows * (double)hidden * (double)inter;
    double rate = flops / med[1];
    double dot = is_int ? b->dot_i8[1] : b->dot_bf16[1];
    /* %isa: of the instruction the kernel is made of (MXFP4 x MXFP4's few-rows kernel sums MX blocks in
     * integers, on vpdpbusd); %dot stays the format's target (MX against vdpbf16ps). */
    double peak = level_peak(b, isa, is_int || strstr(kname, "_int_") != NULL, 1);
    double wbytes = bench_ffn_expert_weight_bytes(x);
    double xbw[2];
    for (int j = 0; j < 2; j++) xbw[j] = b->bandwidth[j] > 0 ? med[j] / (wbytes / b->bandwidth[j]) : NAN;
    if (times) {
        times->tn[level + 1] = med[1];
        times->kernel[level + 1] = kname;
    }
    double worst = spread[0] > spread[1] ? spread[0] : spread[1];
    printf(
        "%-11s %5lld %4lld %-10s %-22s %9.3f %9.3f %8.1f %6.0f%% %6.0f%% %7.1f %6.2f %6.2f %5.2f %6.2f %5d\n",
        bench_ffn_format_name(f), (long long)hidden, (long long)rows, level_name(level), kname, med[0] * 1e3,
        med[1] * 1e3, rate / 1e9, dot > 0 ? 100 * rate / dot : NAN, peak > 0 ? 100 * rate / peak : NAN,
        wbytes / 1e6, xbw[0], xbw[1], med[0] / med[1], worst, tries);
    fflush(stdout);
    if (cli_json_out()) {
        cli_json j = cli_json_row("row");
        cli_json_str(&j, "format", bench_ffn_format_name(f));
        cli_json_int(&j, "hidden", hidden);
        cli_json_int(&j, "intermediate", inter);
        cli_json_int(&j, "rows", rows);
        cli_json_str(&j, "level", level_name(level));
        cli_json_str(&j, "kernel", kname);
        cli_json_num(&j, "t1_ms", med[0] * 1e3);
        cli_json_num(&j, "tn_ms", med[1] * 1e3);
        cli_json_num(&j, "gflop_per_s", rate / 1e9);
        cli_json_num(&j, "dot_pct", dot > 0 ? 100 * rate / dot : NAN);
        cli_json_num(&j, "isa_pct", peak > 0 ? 100 * rate / peak : NAN);
        cli_json_num(&j, "weight_mb", wbytes / 1e6);
        cli_json_num(&j, "flop_per_weight_byte", flops / wbytes);
        cli_json_num(&j, "xbw_1", xbw[0]);
        cli_json_num(&j, "xbw_n", xbw[1]);
        cli_json_num(&j, "speedup_n", med[0] / med[1]);
        cli_json_num(&j, "spread_1", spread[0]);
        cli_json_num(&j, "spread_n", spread[1]);
        cli_json_int(&j, "tries", tries);
        cli_json_end(&j);
    }
    if (cfg->plot && keep && level == LEVEL_AUTO)
        bench_ffn_plot_add(cfg->plot, (bench_ffn_point){f, hidden, rows, flops / wbytes, rate});
    if (keep && level == LEVEL_AUTO)
        *keep = (auto_result){1, dot > 0 ? 100 * rate / dot : NAN, {xbw[0], xbw[1]}, med[0] / med[1]};
    return 0;
}

/* oneDNN against what the library runs by itself (the registry's kernels), N threads, the two GEMMs of
 * one expert each, in alternating blocks on the same rotation of cold experts so that the VM's noise
 * (other tenants on the second core) hits both sides alike. */
enum { DNNL_BLOCKS = 3 };
static void compare_dnnl(const ffn_config *cfg, bench_ffn_expert *x, bench_ffn_format f, int64_t hidden,
                         int64_t rows, int64_t experts, dnnl_result *out) {
    out->measured = -1;
    bench_dnnl_ffn *d =
        bench_dnnl_ffn_create(f == FFN_BF16 ? BENCH_DNNL_BF16 : BENCH_DNNL_U8S8S32, rows, hidden, cfg->inter,
                              experts, cfg->threads, out->why, sizeof out->why);
    double *samples = malloc((size_t)(2 * DNNL_BLOCKS * cfg->repeat) * sizeof *samples);
    if (!d || !samples) {
        if (!samples) snprintf(out->why, sizeof out->why, "out of memory");
        goto done;
    }
    bench_ffn_choice automatic;
    bench_ffn_choose(x, LEVEL_AUTO, &automatic);
    mm_parallel_set_num_threads(cfg->threads);
    /* DNNL_BLOCKS blocks per side, alternating: a pause (the other side's idle threads stop spinning),
     * one untimed run (wakes this side's threads), then `repeat` timed runs back to back, the steady
     * state both libraries are built for. */
    for (int blk = 0; blk < DNNL_BLOCKS; blk++) {
        double total, seconds;
        settle();
        for (int i = -1; i < cfg->repeat; i++) {
            int64_t e = (blk * (cfg->repeat + 1) + i + 1) % experts;
            if (bench_ffn_expert_run(x, e, rows, &automatic, &total, &seconds, out->why, sizeof out->why) !=
                0)
                goto done;
            if (i >= 0) samples[blk * cfg->repeat + i] = seconds;
        }
        settle();
        for (int i = -1; i < cfg->repeat; i++) {
            if (bench_dnnl_ffn_run(d, blk * (cfg->repeat + 1) + i + 1, &seconds, out->why, sizeof out->why) !=
                0)
                goto done;
            if (i >= 0) samples[(DNNL_BLOCKS + blk) * cfg->repeat + i] = seconds;
        }
    }
    size_t n = (size_t)(DNNL_BLOCKS * cfg->repeat);
    out->ours_seconds = cli_time_stats_of(samples, n).median;
    out->dnnl_seconds = cli_time_stats_of(samples + n, n).median;
    out->measured = 1;
done:
    free(samples);
    bench_dnnl_ffn_free(d);
}

/* Untimed passes of a 1-row FFN over every expert until the passes stop getting faster: freshly packed
 * weights read slowly at first, on this VM up to 80x for some experts and for more than one pass, with
 * no page fault the guest sees (docs/gemm.md, 'Benchmarks'); a model's weights are read many times after
 * loading. Steady: a pass at most WARM_GAIN faster than the best pass before it (so 2 passes at least),
 * at most WARM_PASSES passes. Prints the passes' times. */
#define WARM_GAIN 0.1
enum { WARM_PASSES = 10 };
static int warm_up_experts(bench_ffn_format f, int64_t hidden, bench_ffn_expert *x, int64_t experts) {
    bench_ffn_choice automatic;
    bench_ffn_choose(x, LEVEL_AUTO, &automatic);
    char why[256], line[160];
    int n = 0, pass = 0, steady = 0;
    double best = INFINITY, last = 0;
    while (pass < WARM_PASSES && !steady) {
        double sum = 0;
        for (int64_t e = 0; e < experts; e++) {
            double total, gemm;
            if (bench_ffn_expert_run(x, e, 1, &automatic, &total, &gemm, why, sizeof why) != 0) {
                cli_error("bench ffn", "%s", why);
                return -1;
            }
            sum += total;
        }
        steady = sum >= (1 - WARM_GAIN) * best;
        last = sum;
        best = sum < best ? sum : best;
        pass++;
        if (n < (int)sizeof line - 16) n += snprintf(line + n, sizeof line - (size_t)n, " %.0f", sum * 1e3);
    }
    printf("  warm-up %s H %lld: %d untimed pass%s over %lld experts (ms per pass:%s)%s\n",
           bench_ffn_format_name(f), (long long)hidden, pass, pass > 1 ? "es" : "", (long long)experts, line,
           steady ? "" : ", still not steady");
    if (cli_json_out()) {
        cli_json j = cli_json_row("warmup");
        cli_json_str(&j, "format", bench_ffn_format_name(f));
        cli_json_int(&j, "hidden", hidden);
        cli_json_int(&j, "experts", experts);
        cli_json_int(&j, "passes", pass);
        cli_json_num(&j, "last_pass_ms", last * 1e3);
        cli_json_num(&j, "best_pass_ms", best * 1e3);
        cli_json_bool(&j, "steady", steady);
        cli_json_end(&j);
    }
    return 0;
}

static void print_ffn_header(void) {
    printf("%-11s %5s %4s %-10s %-22s %9s %9s %8s %7s %7s %7s %6s %6s %5s %6s %5s\n", "format", "H", "rows",
           "level", "kernel (GEMM1)", "t1 ms", "tN ms", "GFLOP/s", "%dot", "%isa", "w MB", "xbw1", "xbwN",
           "N/1", "spread", "tries");
}

/* (c) for one format: the tiny reference shape, then every hidden size and row count. */
static int measure_format(const ffn_config *cfg, const baselines *b, bench_ffn_format f, best_gemm *best) {
    if (cfg->n_levels > 0) {
        /* The portable reference kernels, on a shape small enough for them. */
        bench_ffn_expert *x = bench_ffn_expert_create(f, 256, 128, 1, 4, 7);
        if (!x) goto oom;
        int rc = measure_row(cfg, b, x, f, 256, 128, 4, 1, MM_KIND_REF, NULL, NULL);
        bench_ffn_expert_free(x);
        if (rc != 0) return -1;
    }
    for (int h = 0; h < cfg->n_hidden; h++) {
        int64_t hidden = cfg->hidden[h], max_rows = 1;
        for (int r = 0; r < cfg->n_rows; r++)
            if (cfg->rows[r] > max_rows) max_rows = cfg->rows[r];
        int64_t experts =
            bench_ffn_experts_for_bytes(f, hidden, cfg->inter, (double)((size_t)cfg->stream_mb << 20));
        bench_ffn_expert *x =
            bench_ffn_expert_create(f, hidden, cfg->inter, experts, max_rows, 11 + (uint64_t)h);
        if (!x) goto oom;
        mm_parallel_set_num_threads(cfg->threads);
        if (warm_up_experts(f, hidden, x, experts) != 0) {
            bench_ffn_expert_free(x);
            return -1;
        }
        for (int r = 0; r < cfg->n_rows; r++) {
            for (int l = 0; l < cfg->n_levels; l++)
                if (measure_row(cfg, b, x, f, hidden, cfg->inter, cfg->rows[r], experts, cfg->levels[l],
                                &best->a[f][h][r], &best->t[f][h][r]) != 0) {
                    bench_ffn_expert_free(x);
                    return -1;
                }
            if ((f == FFN_BF16 || f == FFN_INT8) && bench_dnnl_available())
                compare_dnnl(cfg, x, f, hidden, cfg->rows[r], experts, &best->r[f][h][r]);
        }
        bench_ffn_expert_free(x);
    }
    return 0;
oom:
    cli_error("bench ffn", "%s: out of memory for the experts' weights (try a smaller --stream-mb)",
              bench_ffn_format_name(f));
    return -1;
}

static void json_dnnl(bench_ffn_format f, int64_t hidden, int64_t rows, const dnnl_result *d) {
    if (!cli_json_out()) return;
    cli_json j = cli_json_row("dnnl");
    cli_json_str(&j, "format", bench_ffn_format_name(f));
    cli_json_int(&j, "hidden", hidden);
    cli_json_int(&j, "rows", rows);
    if (d->measured < 0) {
        cli_json_str(&j, "error", d->why);
    } else {
        cli_json_num(&j, "dnnl_ms", d->dnnl_seconds * 1e3);
        cli_json_num(&j, "megamoe_ms", d->ours_seconds * 1e3);
        cli_json_num(&j, "dnnl_over_megamoe", d->dnnl_seconds / d->ours_seconds);
    }
    cli_json_end(&j);
}

static void print_dnnl(const ffn_config *cfg, const best_gemm *best) {
    printf("\n(d) oneDNN matmul, pre-packed weights, GEMM1 + GEMM2 of one expert, %d threads (median ms)\n",
           cfg->threads);
    if (!bench_dnnl_available()) {
        char why[256];
        bench_dnnl_ffn_free(bench_dnnl_ffn_create(BENCH_DNNL_BF16, 1, 1, 1, 1, 1, why, sizeof why));
        printf("  not measured: %s\n", why);
        return;
    }
    printf("    megamoe ms = the GEMMs of its FFN with the registry's kernels (level auto), N threads;\n"
           "    medians over %d alternating blocks per side (a pause, a wake-up run, %d timed runs back to\n"
           "    back) on the same rotation of cold experts\n",
           DNNL_BLOCKS, cfg->repeat);
    printf("%-11s %5s %4s %12s %12s %14s\n", "format", "H", "rows", "oneDNN ms", "megamoe ms",
           "oneDNN/megamoe");
    for (int fi = 0; fi < cfg->n_formats; fi++) {
        bench_ffn_format f = (bench_ffn_format)cfg->formats[fi];
        if (f != FFN_BF16 && f != FFN_INT8) continue;
        for (int h = 0; h < cfg->n_hidden; h++)
            for (int r = 0; r < cfg->n_rows; r++) {
                const dnnl_result *d = &best->r[f][h][r];
                if (d->measured == 0) continue;
                json_dnnl(f, cfg->hidden[h], cfg->rows[r], d);
                if (d->measured < 0) {
                    printf("%-11s %5lld %4lld  failed: %s\n", bench_ffn_format_name(f),
                           (long long)cfg->hidden[h], (long long)cfg->rows[r], d->why);
                    continue;
                }
                printf("%-11s %5lld %4lld %12.3f %12.3f %14.2f\n", bench_ffn_format_name(f),
                       (long long)cfg->hidden[h], (long long)cfg->rows[r], d->dnnl_seconds * 1e3,
                       d->ours_seconds * 1e3, d->dnnl_seconds / d->ours_seconds);
            }
    }
}

/* Worst case of one target over the measured (format, hidden, rows) of a row range, level auto. */
typedef struct target_span {
    double worst;
    int n;
} target_span;

static void span_add(target_span *t, double v, int want_max) {
    if (isnan(v)) return;
    if (t->n == 0 || (want_max ? v > t->worst : v < t->worst)) t->worst = v;
    t->n++;
}

static void print_target(const char *what, const char *rule, target_span t, double bound, int want_max) {
    if (t.n == 0) return;
    int met = want_max ? t.worst <= bound : t.worst >= bound;
    printf("%-44s %-16s %10.2f   %s\n", what, rule, t.worst, met ? "met" : "NOT met");
    if (cli_json_out()) {
        cli_json j = cli_json_row("target");
        cli_json_str(&j, "target", what);
        cli_json_str(&j, "rule", rule);
        cli_json_num(&j, "worst", t.worst);
        cli_json_bool(&j, "met", met);
        cli_json_end(&j);
    }
}

/* (e) the targets of the speed work, from the rows above (registry's choice): prefill = 64 rows or more
 * per expert, decode = 1 to 8 rows. */
static void print_summary(const ffn_config *cfg, const best_gemm *best, int quick) {
    printf("\n(e) against the targets (worst case over the measured hidden sizes and rows, level auto)%s\n",
           quick ? ";\n    --quick shapes are far below the targets' (one small expert per call: fixed costs "
                   "weigh)"
                 : "");
    printf("%-44s %-16s %10s   %s\n", "target", "rule", "worst", "verdict");
    for (int fi = 0; fi < cfg->n_formats; fi++) {
        bench_ffn_format f = (bench_ffn_format)cfg->formats[fi];
        target_span dot = {0}, xbw1 = {0}, scale = {0}, dnnl = {0};
        for (int h = 0; h < cfg->n_hidden; h++)
            for (int r = 0; r < cfg->n_rows; r++) {
                const auto_result *a = &best->a[f][h][r];
                const dnnl_result *d = &best->r[f][h][r];
                if (!a->measured) continue;
                if (cfg->rows[r] >= 64) {
                    span_add(&dot, a->pct_dot, 0);
                    span_add(&scale, a->speedup, 0);
                    if (d->measured > 0) span_add(&dnnl, d->dnnl_seconds / d->ours_seconds, 0);
                } else if (cfg->rows[r] <= 8) {
                    span_add(&xbw1, a->xbw[0], 1);
                    span_add(&xbw1, a->xbw[1], 1);
                }
            }
        char what[64];
        const char *name = bench_ffn_format_name(f);
        double want = f == FFN_BF16 ? 85 : f == FFN_INT8 || f == FFN_INT8_INT4 ? 80 : 70;
        snprintf(what, sizeof what, "%s prefill: %% of the %s peak", name,
                 bench_ffn_format_is_int(f) ? "vpdpbusd" : "vdpbf16ps");
        char rule[32];
        snprintf(rule, sizeof rule, ">= %.0f", want);
        print_target(what, rule, dot, want, 0);
        snprintf(what, sizeof what, "%s prefill: oneDNN time / ours", name);
        print_target(what, ">= 1.00", dnnl, 1.0, 0);
        snprintf(what, sizeof what, "%s prefill: N threads / 1 thread", name);
        print_target(what, ">= 1.80", scale, 1.8, 0);
        snprintf(what, sizeof what, "%s decode: time / streaming bound (1 and N)", name);
        print_target(what, "<= 1.30", xbw1, 1.3, 1);
    }
}

/* (f) the registry's choice against the fastest level of the same run, N threads, per (format, H, rows):
 * only levels the registry may use (MEGAMOE_ISA caps them) compete. auto's kernel counts with its best
 * time (a forced level running the same kernel is another sample of it), so the ratio compares kernels,
 * not two samples of one kernel; a row where it exceeds 1.05 is flagged. A gap between auto and a level
 * running the same kernel is the machine's noise and is marked so. */
static void print_auto_vs_best(const ffn_config *cfg, const best_gemm *best) {
    printf(
        "\n(f) auto against the best level of this run (N threads, median ms; auto ms = its kernel's best\n"
        "    over auto and a level running the same kernel; flagged: auto > 5 %% slower)\n");
    printf("%-11s %5s %4s %-26s %9s %-10s %-26s %9s %7s\n", "format", "H", "rows", "auto kernel", "auto ms",
           "best level", "its kernel", "best ms", "auto/best");
    int flagged = 0, rows_seen = 0;
    for (int fi = 0; fi < cfg->n_formats; fi++) {
        bench_ffn_format f = (bench_ffn_format)cfg->formats[fi];
        for (int h = 0; h < cfg->n_hidden; h++)
            for (int r = 0; r < cfg->n_rows; r++) {
                const level_times *t = &best->t[f][h][r];
                if (t->tn[0] <= 0) continue;
                int b = -1;
                for (int k = 0; k < MM_KIND_COUNT; k++)
                    if (t->tn[k + 1] > 0 && bench_ffn_level_isa(k) <= (int)mm_cpu_isa() &&
                        (b < 0 || t->tn[k + 1] < t->tn[b + 1]))
                        b = k;
                if (b < 0) continue;
                /* auto's kernel at its best: forced levels running the same kernel count too */
                double auto_t = t->tn[0];
                for (int k = 0; k < MM_KIND_COUNT; k++)
                    if (t->tn[k + 1] > 0 && strcmp(t->kernel[k + 1], t->kernel[0]) == 0 &&
                        t->tn[k + 1] < auto_t)
                        auto_t = t->tn[k + 1];
                double ratio = auto_t / t->tn[b + 1];
                const char *flag = ratio > 1.05                     ? "  SLOWER"
                                   : t->tn[0] / t->tn[b + 1] > 1.05 ? "  (auto's own sample slower: noise)"
                                                                    : "";
                flagged += ratio > 1.05;
                rows_seen++;
                printf("%-11s %5lld %4lld %-26s %9.3f %-10s %-26s %9.3f %7.2f%s\n", bench_ffn_format_name(f),
                       (long long)cfg->hidden[h], (long long)cfg->rows[r], t->kernel[0], auto_t * 1e3,
                       mm_kernel_kind_name(b), t->kernel[b + 1], t->tn[b + 1] * 1e3, ratio, flag);
                if (cli_json_out()) {
                    cli_json j = cli_json_row("auto_vs_best");
                    cli_json_str(&j, "format", bench_ffn_format_name(f));
                    cli_json_int(&j, "hidden", cfg->hidden[h]);
                    cli_json_int(&j, "rows", cfg->rows[r]);
                    cli_json_str(&j, "auto_kernel", t->kernel[0]);
                    cli_json_num(&j, "auto_ms", auto_t * 1e3);
                    cli_json_str(&j, "best_level", mm_kernel_kind_name(b));
                    cli_json_str(&j, "best_kernel", t->kernel[b + 1]);
                    cli_json_num(&j, "best_ms", t->tn[b + 1] * 1e3);
                    cli_json_num(&j, "auto_over_best", ratio);
                    cli_json_bool(&j, "flagged", ratio > 1.05);
                    cli_json_end(&j);
                }
            }
    }
    if (rows_seen)
        printf("%d of %d rows flagged (auto's kernel > 5 %% slower than the best level's)\n", flagged,
               rows_seen);
    else
        printf("(no row: no forced level was measured beside auto; --isa auto,avx512,avx512-few,... adds "
               "them)\n");
}

/* The header: the run's facts, the worker pool and the kernels the registry chooses per format (the
 * lines of `megamoe run`'s banner); with --json the header object. */
static void print_header(const ffn_config *cfg) {
    char pool[160], line[400];
    cli_threads_describe(pool, sizeof pool);
    printf("megamoe bench ffn: I = %lld, %d threads for the N columns, CPU levels: avx512 %s, amx %s "
           "(registry uses up to %s)\nworker pool: %s\n",
           (long long)cfg->inter, cfg->threads, mm_cpu_supports(MM_ISA_AVX512) ? "yes" : "no",
           mm_cpu_supports(MM_ISA_AMX) ? "yes" : "no", mm_isa_name(mm_cpu_isa()), pool);
    char cpu[400];
    cli_cpu_describe(cpu, sizeof cpu);
    printf("cpu: %s\n", cpu);
    const mm_gemm_kernel_config *kc = mm_gemm_kernel_config_get();
    printf("kernel choice: cpu profile %s (%s), tune cache %s\n", kc->profile->name,
           kc->profile_forced ? "MEGAMOE_CPU_PROFILE" : "detected",
           kc->cache_state == MM_TUNE_CACHE_USED ? kc->cache_note
                                                 : "not used (megamoe version --verbose says why)");
    for (int i = 0; i < cfg->n_formats; i++) {
        mm_dtype a, w;
        bench_ffn_format_dtypes((bench_ffn_format)cfg->formats[i], &a, &w);
        cli_kernels_describe(line, sizeof line, bench_ffn_format_name((bench_ffn_format)cfg->formats[i]), a,
                             a, w);
        printf("%s\n", line);
    }
    printf("\n");
    if (!cli_json_out()) return;
    cli_json j = cli_json_header("bench", "bench", "ffn");
    cli_json_int(&j, "intermediate", cfg->inter);
    cli_json_int(&j, "threads_n", cfg->threads);
    cli_json_int(&j, "iterations", cfg->repeat);
    cli_json_int(&j, "stream_mb", cfg->stream_mb);
    cli_json_str(&j, "isa", mm_isa_name(mm_cpu_isa()));
    cli_json_end(&j);
}

int mm_bench_ffn_main(int argc, char **argv) {
    const char *cmd = "bench ffn";
    /* Zero counts and sizes: not given (their defaults, full or --quick, are set after parsing). */
    ffn_config cfg = {.n_formats = FFN_FORMAT_COUNT, .threads = mm_bench_default_threads()};
    for (int i = 0; i < FFN_FORMAT_COUNT; i++) cfg.formats[i] = i;
    int quick = 0, json = 0;
    int64_t threads = cfg.threads;
    const char *plot_path = NULL;
    const cli_option options[] = {
        CLI_CUSTOM_OPTION("hidden", parse_hidden, &cfg),
        CLI_INT64_OPTION("intermediate", &cfg.inter, 16, 65536),
        CLI_CUSTOM_OPTION("rows", parse_rows, &cfg),
        CLI_CUSTOM_OPTION("format", parse_formats, &cfg),
        CLI_CUSTOM_OPTION("isa", parse_levels, &cfg),
        CLI_THREADS_COUNT_OPTION(&threads, 1, 64),
        CLI_INT_OPTION("iterations", &cfg.repeat, 1, 1000),
        CLI_INT64_OPTION("stream-mb", &cfg.stream_mb, 1, 65536),
        CLI_FLAG_OPTION("quick", &quick),
        CLI_FLAG_OPTION("json", &json),
        CLI_TEXT_OPTION("plot", &plot_path),
    };
    int done =
        cli_options_parse(cmd, bench_ffn_usage, 0, options, sizeof options / sizeof options[0], argc, argv);
    if (done != CLI_OPTIONS_PARSED) return done;
    cfg.threads = (int)threads;
    if (!cfg.n_hidden) cfg.hidden[0] = 2048, cfg.hidden[1] = 7168, cfg.n_hidden = quick ? 1 : 2;
    if (!cfg.inter) cfg.inter = quick ? 512 : 2048;
    if (!cfg.n_rows) {
        static const int64_t full[] = {1, 2, 4, 8, 64, 256}, fast[] = {1, 8, 64};
        memcpy(cfg.rows, full, sizeof full), cfg.n_rows = 6;
        if (quick) memcpy(cfg.rows, fast, sizeof fast), cfg.n_rows = 3;
    }
    if (!cfg.repeat) cfg.repeat = quick ? 3 : 5;
    if (!cfg.stream_mb) cfg.stream_mb = quick ? 64 : 1024;
    if (!cfg.n_levels) {
        cfg.levels[cfg.n_levels++] = LEVEL_AUTO;
        if (mm_cpu_supports(MM_ISA_AVX512)) {
            cfg.levels[cfg.n_levels++] = MM_KIND_AVX512;
            cfg.levels[cfg.n_levels++] = MM_KIND_AVX512_FEW;
        }
        if (mm_cpu_supports(MM_ISA_AMX)) {
            cfg.levels[cfg.n_levels++] = MM_KIND_AMX;
            cfg.levels[cfg.n_levels++] = MM_KIND_AMX_FEW;
        }
    }

    if (json && cli_json_redirect(cmd) != 0) return MM_CLI_EXIT_FAILURE;
    bench_ffn_plot *plot = NULL;
    if (plot_path) {
        plot = calloc(1, sizeof *plot);
        if (!plot) {
            cli_error(cmd, "out of memory");
            return MM_CLI_EXIT_FAILURE;
        }
        plot->path = plot_path;
        plot->threads = cfg.threads;
        plot->n_hidden = cfg.n_hidden;
        cfg.plot = plot;
    }
    print_header(&cfg);
    baselines b;
    measure_baselines(&cfg, quick, &b);
    if (plot) {
        plot->peak_bf16 = b.dot_bf16[1];
        plot->peak_int8 = b.dot_i8[1];
        plot->bandwidth = b.bandwidth[1];
    }
    printf(
        "(c) expert FFN, median of %d runs after a warm-up; %%dot = of the N-thread %s peak of the format's\n"
        "    arithmetic, %%isa = of the peak of the instruction the kernels use (an _int_ MX kernel:\n"
        "    vpdpbusd), xbw = time / (weight bytes / streaming bandwidth) with 1 and N threads, N/1 =\n"
        "    speed-up of N threads\n",
        cfg.repeat, "vdpbf16ps/vpdpbusd");
    print_ffn_header();
    best_gemm *best = calloc(1, sizeof *best);
    if (!best) {
        cli_error(cmd, "out of memory");
        return MM_CLI_EXIT_FAILURE;
    }
    int rc = MM_CLI_EXIT_OK;
    for (int i = 0; i < cfg.n_formats && rc == MM_CLI_EXIT_OK; i++)
        if (measure_format(&cfg, &b, (bench_ffn_format)cfg.formats[i], best) != 0) rc = MM_CLI_EXIT_FAILURE;
    if (rc == MM_CLI_EXIT_OK) print_dnnl(&cfg, best);
    if (rc == MM_CLI_EXIT_OK) print_summary(&cfg, best, quick);
    if (rc == MM_CLI_EXIT_OK) print_auto_vs_best(&cfg, best);
    if (rc == MM_CLI_EXIT_OK && plot && bench_ffn_plot_write(plot) != 0) rc = MM_CLI_EXIT_FAILURE;
    free(plot);
    free(best);
    return rc;
}
