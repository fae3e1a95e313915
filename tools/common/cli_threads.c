/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_threads.c: --threads and the thread and kernel lines of the headers (cli_threads.h).
 * The thread line reports the CPU budget's parts (core/cpu_budget.h, internal API for tools) so that a
 * run in a container or under taskset shows why it got the threads it got; the kernel line asks the GEMM
 * registry (gemm/kernel_registry.h, internal API for tools). */
#include "common/cli_threads.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/cli_json.h"
#include "common/cli_util.h"
#include "core/cpu.h"
#include "core/cpu_budget.h"
#include "gemm/kernel_registry.h"
#include "megamoe/threads.h"

static int set_by_option; /* --threads was given */

int cli_parse_threads(const char *command, const char *text) {
    int64_t n = 0;
    if (cli_parse_int64(command, "--threads", text, 1, 1024, &n)) return -1;
    mm_error err;
    if (mm_threads_set_count((int)n, &err) != MM_OK) {
        cli_usage_error(command, "--threads: %s", err.message);
        return -1;
    }
    set_by_option = 1;
    return 0;
}

/* MEGAMOE_NUM_THREADS as the library reads it: a positive integer, else ignored. */
static int env_threads(void) {
    const char *env = getenv("MEGAMOE_NUM_THREADS");
    if (!env || !*env) return 0;
    char *end = NULL;
    long v = strtol(env, &end, 10);
    return *end == '\0' && v > 0;
}

void cli_threads_describe(char *buf, size_t size) {
    mm_cpu_budget b;
    mm_cpu_budget_read("", &b);
    int n = mm_threads_count();
    char quota[64];
    if (b.quota_cpus)
        snprintf(quota, sizeof quota, "%g CPU%s", (double)b.quota_us / (double)b.period_us,
                 b.quota_us == b.period_us ? "" : "s");
    else
        snprintf(quota, sizeof quota, "none");
    const char *source = set_by_option ? "--threads; " : env_threads() ? "MEGAMOE_NUM_THREADS; " : "";
    int len = snprintf(buf, size, "%d thread%s (%saffinity %d CPU%s, cgroup quota %s)%s", n, cli_plural_s(n),
                       source, b.affinity_cpus, cli_plural_s(b.affinity_cpus), quota,
                       mm_threads_pinning() ? ", pinned" : "");
    int nodes = mm_threads_numa_nodes();
    if (nodes > 1 && len > 0 && (size_t)len < size)
        snprintf(buf + len, size - (size_t)len, ", weights interleaved over %d NUMA nodes", nodes);
}

void cli_kernels_describe(char *buf, size_t size, const char *label, mm_dtype gemm1_input,
                          mm_dtype gemm2_input, mm_dtype weight) {
    const mm_dtype inputs[2] = {gemm1_input, gemm2_input};
    int len = snprintf(buf, size, "gemm kernels of %s:", label);
    for (int g = 0; g < 2 && len > 0 && (size_t)len < size; g++) {
        const mm_gemm_kernel *k1 = mm_gemm_kernel_select_rows(inputs[g], weight, 1);
        const mm_gemm_kernel *kn = mm_gemm_kernel_select(inputs[g], weight);
        len += snprintf(buf + len, size - (size_t)len, "%s GEMM%d %s x %s %s (1 row) / %s (many rows)",
                        g ? ";" : "", g + 1, mm_dtype_name(inputs[g]), mm_dtype_name(weight),
                        k1 ? k1->name : "-", kn ? kn->name : "-");
    }
}

void cli_cpu_describe(char *buf, size_t size) {
    char model[256];
    cli_cpu_model(model, sizeof model);
    const mm_cpu_id *id = mm_cpu_identity();
    snprintf(buf, size, "%s (cpuid: %s family %d model %d, %s)", model[0] ? model : "unknown model",
             id->vendor[0] ? id->vendor : "unknown vendor", id->family, id->model,
             id->brand[0] ? id->brand : "no brand string");
}
