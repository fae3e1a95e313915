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
 * The public face of the pool's settings is include/megamoe/threads.h (src/core/threads.c); the calls
 * below are its private side (also an internal API for tools: `megamoe bench ffn` sets the count per
 * column with mm_parallel_set_num_threads), and the test hooks read back where the workers run. */
#ifndef MEGAMOE_CORE_PARALLEL_H
#define MEGAMOE_CORE_PARALLEL_H

#include <stdint.h>

/* Runs fn(ctx, task) for task in [0, n_tasks), returns when all are done. */
typedef void (*mm_task_fn)(void *ctx, int64_t task);
void mm_parallel_for(int64_t n_tasks, mm_task_fn fn, void *ctx);

/* Threads the pool uses (including the caller): decided at first use by mm_parallel_default_threads. */
int mm_parallel_num_threads(void);
/* Change the thread count (clamped to [1, 1024]; 1 = everything runs in the caller). Takes effect for
 * later calls. mm_threads_set_count is the checked public form. */
void mm_parallel_set_num_threads(int n);
/* MEGAMOE_NUM_THREADS when a positive integer, else the CPU budget (core/cpu_budget.h), in [1, 1024]. */
int mm_parallel_default_threads(void);

/* Pinning on: worker i bound to the i-th CPU of the calling thread's affinity mask (round-robin), now
 * and for workers spawned later; off: workers back on all of those CPUs. 0 or an errno value (ENOSYS
 * where there is no affinity call). */
int mm_parallel_set_pinning(int on);
int mm_parallel_pinning(void);

/* Test hooks: workers spawned so far, and the CPUs (below CPU_SETSIZE) worker i may run on, at most max
 * of them: how many, or -1 when there is no such worker or its mask is unreadable. */
int mm_parallel_spawned_workers(void);
int mm_parallel_worker_cpus(int worker, int *cpus, int max);

#endif
