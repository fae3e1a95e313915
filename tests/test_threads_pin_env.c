/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_threads_pin_env.c: MEGAMOE_PIN=1 pins the workers at the pool's first use (its own
 * process: the pool reads the environment once), and MEGAMOE_NUM_THREADS sets the count; every worker's
 * affinity, read back, is the one CPU of the mask it takes round-robin. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/parallel.h"
#include "megamoe/threads.h"
#include "testlib.h"

static void count_task(void *ctx, int64_t task) {
    (void)task;
    volatile double x = 0;
    for (int i = 0; i < 20000; i++) x += i * 0.5;
    atomic_fetch_add((atomic_int *)ctx, 1);
}

int main(void) {
    setenv("MEGAMOE_PIN", "1", 1);
    setenv("MEGAMOE_NUM_THREADS", "5", 1);
    CHECK_EQ_INT(mm_threads_count(), 5);
    CHECK_EQ_INT(mm_threads_pinning(), 1);
    static atomic_int done;
    mm_parallel_for(100, count_task, &done);
    CHECK_EQ_INT(atomic_load(&done), 100);
    CHECK_EQ_INT(mm_parallel_spawned_workers(), 4);
    cpu_set_t set;
    CPU_ZERO(&set);
    CHECK_EQ_INT(sched_getaffinity(0, sizeof set, &set), 0);
    int cpus[CPU_SETSIZE], n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set)) cpus[n++] = cpu;
    for (int i = 0; i < 4; i++) {
        int got[CPU_SETSIZE];
        CHECK_EQ_INT(mm_parallel_worker_cpus(i, got, CPU_SETSIZE), 1);
        CHECK_EQ_INT(got[0], cpus[i % n]);
    }
    return mm_test_finish("test_threads_pin_env");
}
