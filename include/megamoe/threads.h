/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/threads.h: the process-wide worker pool every compute call runs on: how many threads, on which
 * CPUs, and where packed weights live on a NUMA machine.
 *
 * One pool per process, shared by every rank of the process (ranks running as threads submit to it
 * at once). Its workers are started on first use and stay parked between calls. Results never depend
 * on the thread count or the placement: same inputs, same bits.
 *
 * Default thread count, decided at first use: MEGAMOE_NUM_THREADS when set (a positive integer),
 * else the CPUs this process may run on: the affinity mask (taskset, numactl, a container's cpuset)
 * further bounded by the cgroup CPU quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cfs_period_us,
 * rounded up), at least 1. MEGAMOE_PIN=1 pins the workers at start (as mm_threads_set_pinning(1)). */
#ifndef MEGAMOE_THREADS_H
#define MEGAMOE_THREADS_H

#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads the pool uses, the calling thread included (>= 1). */
int mm_threads_count(void);

/* Sets the thread count for later calls (n in [1, 1024]; 1 = every call runs in its caller). Safe while
 * no compute call is running; more threads than allowed CPUs are accepted (oversubscription). */
mm_status mm_threads_set_count(int n, mm_error *err);

/* The default count described above, as computed now (for reports; does not change the pool). */
int mm_threads_default_count(void);

/* Pinning: 1 binds worker i to the i-th CPU of the process's affinity mask (round-robin when there
 * are more workers than CPUs), and the calling thread is left alone; 0 (the default) lets the OS place
 * them. Takes effect for workers at once. MM_ERR_UNSUPPORTED where the OS has no affinity call. */
mm_status mm_threads_set_pinning(int on, mm_error *err);
int mm_threads_pinning(void);

/* NUMA: the number of nodes packed weights are interleaved over: >= 2 when this build has libnuma and
 * the process's CPUs span more than one NUMA node (so every node's workers stream from local and remote
 * memory alike); otherwise 1, and placement is the OS's first touch. */
int mm_threads_numa_nodes(void);

#ifdef __cplusplus
}
#endif
#endif
