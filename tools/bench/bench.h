/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench.h: the benchmarks of `megamoe bench`. An operator's benchmark is the bench entry of
 * its row in the operator table (common/operators.c); a part's is a row of the table in bench_main.c.
 * Either way one file tools/bench/bench_<name>.c defines its main (declared here); argv[0] is the
 * benchmark name.
 *
 * Conventions every benchmark follows: warm-up runs are not counted, a result is median / min / max
 * over repetitions, and a speed is compared with a baseline measured in the same run (never with
 * numbers from another run: the machine is shared and noisy). */
#ifndef MEGAMOE_TOOLS_BENCH_H
#define MEGAMOE_TOOLS_BENCH_H

#include <stddef.h>

#include "common/commands.h"

/* A row of a benchmark table: name, one-line summary, main (the shape of a command row). */
typedef mm_cli_command mm_cli_bench;

int mm_bench_re_routing_main(int argc, char **argv);
int mm_bench_comm_main(int argc, char **argv);
int mm_bench_ffn_main(int argc, char **argv);
int mm_bench_dispatch_combine_main(int argc, char **argv);
int mm_bench_mega_moe_main(int argc, char **argv);
int mm_bench_experts_main(int argc, char **argv);
int mm_bench_world_main(int argc, char **argv);

/* Threads the benchmarks compare against: the pool's (mm_threads_count: --threads when given, else
 * MEGAMOE_NUM_THREADS, else the CPUs this process may use). */
int mm_bench_default_threads(void);

/* Copies n bytes with `threads` threads, each one contiguous slice (a baseline, not a library routine). */
int mm_bench_parallel_memcpy(void *dst, const void *src, size_t n, int threads);

#endif
