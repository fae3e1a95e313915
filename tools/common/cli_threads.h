/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_threads.h: the worker pool on the command line: `--threads N` (the same option in
 * every command that computes), and the header lines of `run` and `bench` saying how many threads run
 * and why, and which GEMM kernels compute. */
#ifndef MEGAMOE_TOOLS_CLI_THREADS_H
#define MEGAMOE_TOOLS_CLI_THREADS_H

#include <stddef.h>

#include "megamoe/dtype.h"

/* --threads N: checks N (1..1024) and sets the pool's count (mm_threads_set_count). 0, or -1 after one
 * usage line. */
int cli_parse_threads(const char *command, const char *text);

/* "2 threads (affinity 2 CPUs, cgroup quota none)", naming --threads or MEGAMOE_NUM_THREADS when they set
 * the count, and pinning and NUMA interleaving when on. */
void cli_threads_describe(char *buf, size_t size);
/* "MODEL (cpuid: VENDOR family F model M, BRAND)": what a benchmark header names the CPU by (the model
 * name of /proc/cpuinfo can be as vague as "AMD EPYC"; the cpuid numbers and brand string are not). */
void cli_cpu_describe(char *buf, size_t size);

/* "gemm kernels of <label>: GEMM1 int8 x int8 K1 (1 row) / KN (many rows); GEMM2 ...": what the
 * registry chooses for these formats at this ISA level (`megamoe version --verbose` lists every pair). */
void cli_kernels_describe(char *buf, size_t size, const char *label, mm_dtype gemm1_input,
                          mm_dtype gemm2_input, mm_dtype weight);

#endif
