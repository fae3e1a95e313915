// SPDX-License-Identifier: Apache-2.0
/* tools/bench/bench_ffn_tune.c: `megamoe tune`: measures each format class's candidate kernels (the
 * general and few-rows kernels of every ISA level this process may use) on the expert FFN of `bench ffn`
 * at 1..64 rows on this CPU, and writes the tune cache that the library's kernel registry reads at its
 * first choice (src/gemm/tune_cache.h; docs/gemm.md, 'CPU profiles and the tune cache'). A few seconds:
 * a mid-size expert (H 4096, I 1024), experts rotated over 96 MiB so weights come from memory, the best
 * of 3 timed runs per (rows, kernel), kernels alternating so that a busy moment hits all alike. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/bench_ffn.h"
#include "common/cli_progress.h"
#include "common/cli_util.h"
#include "common/commands.h"
#include "gemm/kernel_registry.h"
#include "gemm/tune_cache.h"
#include "megamoe/version.h"

static const char tune_usage[] =
    "usage: megamoe tune [--formats LIST] [--out FILE] [--hidden H] [--intermediate I] [--iterations R]\n"
    "\n"
    "Measures the candidate GEMM kernels of each format class (general and few-rows kernels of every ISA\n"
    "level this process may use) on one expert's FFN at 1, 2, 4, 8, 16, 32 and 64 rows on this CPU, and\n"
    "writes the tune cache the library reads at its first kernel choice (keyed by CPU and version). A\n"
    "kernel replaces the CPU profile's choice only when it is more than 3 %% faster.\n"
    "\n"
    "options:\n"
    "      --formats LIST    bf16,int8,int8xint4,mxfp8,mxfp8xmxfp4,mxfp4,a16-fp8b,a16-mxfp4,a16-uint4\n"
    "                        (default all)\n"
    "      --out FILE        the cache file (default: MEGAMOE_TUNE_FILE, else\n"
    "                        $XDG_CACHE_HOME/megamoe/kernels.txt, else ~/.cache/megamoe/kernels.txt)\n"
    "      --hidden H        hidden size of the measured expert (default 4096)\n"
    "      --intermediate I  its intermediate size (default 1024)\n"
    "      --iterations R    timed runs per rows and kernel, the best counts (default 3)\n"
    "  -h, --help            show this help\n";

static const int tune_rows[] = {1, 2, 4, 8, 16, 32, 64};
#define N_TUNE_ROWS ((int)(sizeof tune_rows / sizeof tune_rows[0]))
/* The bench format of each class. */
static const bench_ffn_format class_format[MM_KCLASS_COUNT] = {FFN_BF16,     FFN_INT8,        FFN_INT8_INT4,
                                                               FFN_MXFP8,    FFN_MXFP8_MXFP4, FFN_MXFP4,
                                                               FFN_A16_FP8B, FFN_A16_MXFP4,   FFN_A16_UINT4};
/* A kernel replaces the profile's choice only when it is this much faster (noise is not a reason). */
#define MARGIN 0.03

typedef struct tune_opts {
    int64_t hidden, inter, repeat;
} tune_opts;

/* Times the candidate kinds of one class at every row count; fills the rule's steps. 0 or -1. */
static int tune_class(const tune_opts *o, int cls, mm_kernel_rule *out) {
    bench_ffn_format f = class_format[cls];
    mm_dtype a, w;
    bench_ffn_format_dtypes(f, &a, &w);
    unsigned kinds = mm_gemm_kernel_kinds(a, w);
    if (kinds & ~1u) kinds &= ~1u; /* the reference only where nothing else exists */
    int cand[MM_KIND_COUNT], n = 0;
    for (int k = 0; k < MM_KIND_COUNT; k++)
        if ((kinds >> k) & 1u) cand[n++] = k;
    const mm_gemm_kernel_config *cfg = mm_gemm_kernel_config_get();
    printf("%-12s", mm_kernel_class_name(cls));
    for (int i = 0; i < n; i++) printf(" %12s", mm_kernel_kind_name(cand[i]));
    printf("   %-10s %s\n", "profile", "chosen");
    int64_t experts = bench_ffn_experts_for_bytes(f, o->hidden, o->inter, 96.0 * (1 << 20));
    cli_progress_begin("tune %s: packing %lld experts", mm_kernel_class_name(cls), (long long)experts);
    bench_ffn_expert *x = bench_ffn_expert_create(f, o->hidden, o->inter, experts, 64, 5 + (uint64_t)cls);
    cli_progress_end();
    if (!x) {
        cli_error("tune", "%s: out of memory for the experts' weights", mm_kernel_class_name(cls));
        return -1;
    }
    char why[256];
    int64_t run = 0;
    memset(out, 0, sizeof *out);
    for (int r = 0; r < N_TUNE_ROWS; r++) {
        cli_progress_begin("tune %s: %d row%s", mm_kernel_class_name(cls), tune_rows[r],
                           cli_plural_s(tune_rows[r]));
        double best[MM_KIND_COUNT];
        for (int i = 0; i < n; i++) best[i] = 1e30;
        for (int rep = -1; rep < o->repeat; rep++)
            for (int i = 0; i < n; i++) {
                const mm_gemm_kernel *k = mm_gemm_kernel_of_kind((mm_kernel_kind)cand[i], a, w);
                bench_ffn_choice choice = {(int)k->isa, k, k};
                double total, gemm;
                if (bench_ffn_expert_run(x, run++ % experts, tune_rows[r], &choice, &total, &gemm, why,
                                         sizeof why) != 0) {
                    cli_progress_end();
                    cli_error("tune", "%s", why);
                    bench_ffn_expert_free(x);
                    return -1;
                }
                if (rep >= 0 && total < best[i]) best[i] = total;
            }
        cli_progress_end();
        /* The profile's choice, unless another kind is more than MARGIN faster. */
        int prof = mm_gemm_kernel_rule_kind(&cfg->profile->rules[cls], a, w, tune_rows[r]);
        int fastest = 0, prof_i = -1;
        for (int i = 0; i < n; i++) {
            if (best[i] < best[fastest]) fastest = i;
            if (cand[i] == prof) prof_i = i;
        }
        int chosen = prof_i >= 0 && best[fastest] * (1.0 + MARGIN) >= best[prof_i] ? prof_i : fastest;
        printf("%8d row%s", tune_rows[r], tune_rows[r] == 1 ? " " : "s");
        for (int i = 0; i < n; i++) printf(" %9.3f ms", best[i] * 1e3);
        printf("   %-10s %s\n", mm_kernel_kind_name(prof), mm_kernel_kind_name(cand[chosen]));
        fflush(stdout);
        if (out->n_steps == 0 || out->steps[out->n_steps - 1].kind != (mm_kernel_kind)cand[chosen]) {
            out->steps[out->n_steps].rows = out->n_steps == 0 ? 1 : tune_rows[r];
            out->steps[out->n_steps].kind = (mm_kernel_kind)cand[chosen];
            out->n_steps++;
        }
    }
    bench_ffn_expert_free(x);
    return 0;
}

int mm_cli_tune_main(int argc, char **argv) {
    enum { OPT_FORMATS = 600, OPT_OUT, OPT_HIDDEN, OPT_INTER, OPT_ITERATIONS };
    static const struct option long_options[] = {{"formats", required_argument, NULL, OPT_FORMATS},
                                                 {"out", required_argument, NULL, OPT_OUT},
                                                 {"hidden", required_argument, NULL, OPT_HIDDEN},
                                                 {"intermediate", required_argument, NULL, OPT_INTER},
                                                 {"iterations", required_argument, NULL, OPT_ITERATIONS},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {NULL, 0, NULL, 0}};
    const char *cmd = "tune";
    tune_opts o = {4096, 1024, 3};
    int want[MM_KCLASS_COUNT];
    for (int c = 0; c < MM_KCLASS_COUNT; c++) want[c] = 1;
    const char *out_path = NULL;
    int opt;
    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        int bad = 0;
        switch (opt) {
        case OPT_FORMATS: {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            memset(want, 0, sizeof want);
            int any = 0;
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int c = mm_kernel_class_parse(tok);
                if (c < 0 || want[c])
                    return cli_usage_error(cmd,
                                           "--formats: unknown or repeated format '%s' (one of bf16, int8, "
                                           "int8xint4, mxfp8, mxfp8xmxfp4, mxfp4, a16-fp8b, a16-mxfp4, "
                                           "a16-uint4)",
                                           tok);
                want[c] = any = 1;
            }
            if (!any) return cli_usage_error(cmd, "--formats: empty list");
            break;
        }
        case OPT_OUT: out_path = optarg; break;
        case OPT_HIDDEN: bad = cli_parse_int64(cmd, "--hidden", optarg, 64, 65536, &o.hidden); break;
        case OPT_INTER: bad = cli_parse_int64(cmd, "--intermediate", optarg, 32, 65536, &o.inter); break;
        case OPT_ITERATIONS: bad = cli_parse_int64(cmd, "--iterations", optarg, 1, 100, &o.repeat); break;
        case 'h': fputs(tune_usage, stdout); return MM_CLI_EXIT_OK;
        default: return cli_option_error(cmd, opt, argv);
        }
        if (bad) return MM_CLI_EXIT_USAGE;
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    mm_error err;
    if (mm_gemm_kernel_config_check(&err) != MM_OK) return cli_report(cmd, &err);
    char path[1024];
    if (out_path)
        snprintf(path, sizeof path, "%s", out_path);
    else if (mm_tune_cache_path(path, sizeof path) != 0) {
        cli_error(cmd, "no cache path: set MEGAMOE_TUNE_FILE, XDG_CACHE_HOME or HOME, or give --out");
        return MM_CLI_EXIT_FAILURE;
    }
    char key[160];
    mm_tune_cache_cpu_key(key, sizeof key);
    const mm_gemm_kernel_config *cfg = mm_gemm_kernel_config_get();
    printf("megamoe tune: cpu %s, profile %s, %d threads, expert H %lld I %lld, best of %lld runs (ms)\n",
           key, cfg->profile->name, mm_bench_default_threads(), (long long)o.hidden, (long long)o.inter,
           (long long)o.repeat);
    mm_kernel_rule rules[MM_KCLASS_COUNT];
    int have[MM_KCLASS_COUNT] = {0};
    for (int c = 0; c < MM_KCLASS_COUNT; c++) {
        if (!want[c]) continue;
        if (tune_class(&o, c, &rules[c]) != 0) return MM_CLI_EXIT_FAILURE;
        have[c] = 1;
    }
    char text[MM_TUNE_CACHE_MAX_BYTES];
    if (mm_tune_cache_format(text, sizeof text, key, mm_version(), rules, have) < 0) {
        cli_error(cmd, "the cache text does not fit in %d bytes", MM_TUNE_CACHE_MAX_BYTES);
        return MM_CLI_EXIT_FAILURE;
    }
    if (mm_tune_cache_write(path, text, &err) != MM_OK) return cli_report(cmd, &err);
    printf("wrote %s\n", path);
    return MM_CLI_EXIT_OK;
}
