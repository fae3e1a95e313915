/* SPDX-License-Identifier: Apache-2.0 */
/* tools/version/cmd_version.c: `megamoe version [--features | --verbose]`: the version, and what this
 * build and this machine will use (docs/cli.md, 'version'), so that a report or a benchmark says which
 * kernels, ISA level and thread count produced it.
 *
 * Sees src/ (CMakeLists.txt): the ISA levels and the kernel registry are internal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "common/cli_util.h"
#include "common/commands.h"
#include "common/cli_json.h"
#include "core/cpu.h"
#include "core/parallel.h"
#include "gemm/kernel_registry.h"
#include "megamoe/comm.h"
#include "megamoe/dtype.h"
#include "megamoe/version.h"

#ifdef MEGAMOE_HAVE_MPI
#include <mpi.h>
#endif

#ifndef MEGAMOE_BUILD_TYPE
#define MEGAMOE_BUILD_TYPE "unknown"
#endif
#ifndef MEGAMOE_COMPILER
#define MEGAMOE_COMPILER "unknown"
#endif

static const char version_usage[] =
    "usage: megamoe version [--features | --verbose]\n\n"
    "Prints \"megamoe <version>\" (the library linked).\n"
    "  --features  also the optional parts of this build, one per line (\"mpi backend: yes|no\")\n"
    "  --verbose   also the build (type, compiler, ISA levels compiled in), the CPU, the ISA level chosen\n"
    "              at run time (MEGAMOE_ISA caps it), the worker threads (MEGAMOE_NUM_THREADS), the MPI\n"
    "              backend and library, and the GEMM kernel the registry chooses for each format pair\n"
    "              at 1, 16 and many rows\n";

/* The CPU's name: /proc/cpuinfo's "model name" (x86), else the machine type from uname. */
static void print_cpu(void) {
    struct utsname u;
    const char *machine = uname(&u) == 0 ? u.machine : "unknown";
    char model[256];
    cli_cpu_model(model, sizeof model);
    printf("cpu: %s%s%s%s\n", model, model[0] ? " (" : "", machine, model[0] ? ")" : "");
    printf("cpu supports:");
    for (int isa = MM_ISA_REF; isa < MM_ISA_COUNT; isa++)
        if (mm_cpu_supports((mm_isa)isa)) printf(" %s", mm_isa_name((mm_isa)isa));
    printf("%s\n", mm_cpu_has_avx512_vbmi() ? " (+avx512_vbmi)" : "");
}

static void print_mpi(void) {
    if (!mm_comm_mpi_available()) {
        printf("mpi backend: no\n");
        return;
    }
    printf("mpi backend: yes\n");
#ifdef MEGAMOE_HAVE_MPI
    /* Allowed before MPI_Init (MPI 3.0); the first line names the library and its version. */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
        lib[strcspn(lib, "\n,")] = '\0';
        printf("mpi library: %s\n", lib);
    }
#endif
}

/* Where the kernel choice comes from: the CPU profile and the tune cache. */
static void print_kernel_config(void) {
    const mm_gemm_kernel_config *c = mm_gemm_kernel_config_get();
    const mm_cpu_id *id = mm_cpu_identity();
    printf("cpu identity: %s family %d model %d (%s)\n", id->vendor[0] ? id->vendor : "unknown", id->family,
           id->model, id->brand[0] ? id->brand : "no brand string");
    if (c->error[0]) printf("cpu profile error: %s\n", c->error);
    printf("cpu profile: %s (%s; %s)\n", c->profile->name,
           c->profile_forced ? "MEGAMOE_CPU_PROFILE" : "detected", c->profile->cpus);
    switch (c->cache_state) {
    case MM_TUNE_CACHE_OFF: printf("tune cache: off (MEGAMOE_TUNE=0)\n"); break;
    case MM_TUNE_CACHE_FORCED_PROFILE:
        printf("tune cache: not read (MEGAMOE_CPU_PROFILE forces a profile)\n");
        break;
    case MM_TUNE_CACHE_NO_PATH:
        printf("tune cache: none (no MEGAMOE_TUNE_FILE, XDG_CACHE_HOME or HOME)\n");
        break;
    case MM_TUNE_CACHE_ABSENT:
        printf("tune cache: %s absent (`megamoe tune` writes it)\n", c->cache_path);
        break;
    case MM_TUNE_CACHE_IGNORED: printf("tune cache: %s ignored: %s\n", c->cache_path, c->cache_note); break;
    case MM_TUNE_CACHE_USED: printf("tune cache: %s used for %s\n", c->cache_path, c->cache_note); break;
    }
}

static void print_kernels(void) {
    print_kernel_config();
    printf("gemm kernels (activation x weight: 1 row / 16 rows / many rows):\n");
    mm_dtype a, w;
    for (int i = 0; mm_gemm_kernel_pair(i, &a, &w); i++) {
        const mm_gemm_kernel *k1 = mm_gemm_kernel_select_rows(a, w, 1);
        const mm_gemm_kernel *k16 = mm_gemm_kernel_select_rows(a, w, 16);
        const mm_gemm_kernel *kn = mm_gemm_kernel_select(a, w);
        char pair[64];
        snprintf(pair, sizeof pair, "%s x %s", mm_dtype_name(a), mm_dtype_name(w));
        printf("  %-26s %s / %s / %s\n", pair, k1 ? k1->name : "-", k16 ? k16->name : "-",
               kn ? kn->name : "-");
    }
}

static void print_verbose(void) {
    printf("build type: %s\n", MEGAMOE_BUILD_TYPE);
    printf("compiler: %s\n", MEGAMOE_COMPILER);
    printf("isa levels compiled in: ref%s\n", MM_X86_KERNELS ? " avx512 amx" : "");
    print_cpu();
    const char *forced = getenv("MEGAMOE_ISA");
    printf("isa level at run time: %s", mm_isa_name(mm_cpu_isa()));
    if (forced && forced[0]) printf(" (MEGAMOE_ISA=%s)", forced);
    printf("\n");
    const char *nt = getenv("MEGAMOE_NUM_THREADS");
    printf("threads: %d (%s%s)\n", mm_parallel_num_threads(), nt && nt[0] ? "MEGAMOE_NUM_THREADS=" : "",
           nt && nt[0] ? nt : "default: online CPUs");
    print_mpi();
    print_kernels();
}

int mm_cli_version_main(int argc, char **argv) {
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("%s", version_usage);
        return MM_CLI_EXIT_OK;
    }
    int features = argc == 2 && strcmp(argv[1], "--features") == 0;
    int verbose = argc == 2 && strcmp(argv[1], "--verbose") == 0;
    if (argc > 2 || (argc == 2 && !features && !verbose))
        return cli_usage_error("version", "unexpected argument '%s'", argv[argc > 2 ? 2 : 1]);
    printf("megamoe %s\n", mm_version());
    if (verbose)
        print_verbose();
    else if (features)
        print_mpi();
    return MM_CLI_EXIT_OK;
}
