/* SPDX-License-Identifier: Apache-2.0 */
/* core/parallel.h: the process-wide worker pool and its parallel-for.
 *
 * One pool per process, created on first use, whose workers stay alive across calls (waking a
 * sleeping thread is slow: docs/comm.md, 'Measured wait costs'; so the hot path never sleeps: workers
 * spin briefly, then yield, then sleep).
 * Several callers may submit at once (ranks running as threads): each call is a job with
 * an atomic task counter; the calling thread works on its own job, and idle workers help whichever job
 * has tasks left. Calls may nest (a task may call mm_parallel_for); nested calls run serially in the
 * calling thread.
 *
 * Internal API for tools: `megamoe bench ffn` (tools/bench/bench_ffn.c) sets the pool's thread count; not
 * part of include/megamoe/. */
#ifndef MEGAMOE_CORE_PARALLEL_H
#define MEGAMOE_CORE_PARALLEL_H

#include <stdint.h>

/* Runs fn(ctx, task) for task in [0, n_tasks), returns when all are done. */
typedef void (*mm_task_fn)(void *ctx, int64_t task);
void mm_parallel_for(int64_t n_tasks, mm_task_fn fn, void *ctx);

/* Threads the pool uses (including the caller): MEGAMOE_NUM_THREADS if set, else the online CPUs. */
int mm_parallel_num_threads(void);
/* Change the thread count (1 = everything runs in the caller). Takes effect for later calls. */
void mm_parallel_set_num_threads(int n);

#endif
