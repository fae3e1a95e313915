/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_threads.c: the public thread control (megamoe/threads.h): the checked setter and its
 * messages, the default count (MEGAMOE_NUM_THREADS, the affinity mask, narrowed as taskset does), pinning
 * read back from every worker's affinity mask (round-robin over the mask, new workers pinned too,
 * unpinning restores the whole mask, a narrowed caller mask), and the NUMA report. */
#include <dirent.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_budget.h"
#include "core/parallel.h"
#include "megamoe/threads.h"
#include "testlib.h"

static int mask_list(int *cpus, int max) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    int n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < max; cpu++)
        if (CPU_ISSET(cpu, &set)) cpus[n++] = cpu;
    return n;
}

static void spin_task(void *ctx, int64_t task) {
    (void)task;
    volatile double x = 0;
    for (int i = 0; i < 20000; i++) x += i * 0.5;
    atomic_fetch_add((atomic_int *)ctx, 1);
}

/* Spawns the workers of the current count (the pool creates them on its first call with that count). */
static void use_pool(void) {
    static atomic_int done;
    atomic_store(&done, 0);
    mm_parallel_for(64, spin_task, &done);
    CHECK_EQ_INT(atomic_load(&done), 64);
}

static void test_set_count(void) {
    mm_error err;
    int before = mm_threads_count();
    CHECK(before >= 1);
    static const int bad[] = {0, -1, 1025, -2147483647 - 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mm_error_clear(&err);
        CHECK_STATUS(mm_threads_set_count(bad[i], &err), MM_ERR_INVALID_ARGUMENT, &err);
        char want[96];
        snprintf(want, sizeof want, "n = %d is outside [1, 1024]", bad[i]);
        CHECK_STR_CONTAINS(err.message, want);
        CHECK_EQ_INT(mm_threads_count(), before); /* unchanged */
    }
    CHECK_STATUS(mm_threads_set_count(0, NULL), MM_ERR_INVALID_ARGUMENT, NULL); /* err may be NULL */
    CHECK_OK(mm_threads_set_count(1, &err), &err);
    CHECK_EQ_INT(mm_threads_count(), 1);
    CHECK_EQ_INT(mm_parallel_num_threads(), 1); /* the private and the public view agree */
    CHECK_OK(mm_threads_set_count(1024, &err), &err);
    CHECK_EQ_INT(mm_threads_count(), 1024);
    mm_parallel_set_num_threads(3); /* the tools' private call still sets the same count */
    CHECK_EQ_INT(mm_threads_count(), 3);
    CHECK_OK(mm_threads_set_count(before, &err), &err);
    CHECK_EQ_INT(mm_threads_count(), before);
}

static void test_default_count(void) {
    int cpus[CPU_SETSIZE];
    int affinity = mask_list(cpus, CPU_SETSIZE);
    long long q, p;
    int quota = mm_cgroup_cpu_quota("", &q, &p) ? (int)((q + p - 1) / p) : 0;
    int expected = quota && quota < affinity ? quota : affinity;
    int before = mm_threads_count();
    setenv("MEGAMOE_NUM_THREADS", "5", 1);
    CHECK_EQ_INT(mm_threads_default_count(), 5);
    CHECK_EQ_INT(mm_threads_count(), before); /* a report only */
    static const char *ignored[] = {"0", "-3", "abc", "4x", ""};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        setenv("MEGAMOE_NUM_THREADS", ignored[i], 1);
        CHECK_EQ_INT(mm_threads_default_count(), expected);
    }
    setenv("MEGAMOE_NUM_THREADS", "100000", 1);
    CHECK_EQ_INT(mm_threads_default_count(), 1024);
    unsetenv("MEGAMOE_NUM_THREADS");
    CHECK_EQ_INT(mm_threads_default_count(), expected);
    /* narrowed to one CPU as `taskset -c N` does: one thread */
    cpu_set_t saved, one;
    CHECK_EQ_INT(sched_getaffinity(0, sizeof saved, &saved), 0);
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    CHECK_EQ_INT(sched_setaffinity(0, sizeof one, &one), 0);
    CHECK_EQ_INT(mm_threads_default_count(), 1);
    CHECK_EQ_INT(sched_setaffinity(0, sizeof saved, &saved), 0);
}

/* Every worker's mask is exactly {cpus[i % n]} (pinned) or all of cpus (unpinned). */
static void expect_workers(const int *cpus, int n, int pinned) {
    int workers = mm_parallel_spawned_workers();
    CHECK(workers >= 1);
    for (int i = 0; i < workers; i++) {
        int got[CPU_SETSIZE];
        int count = mm_parallel_worker_cpus(i, got, CPU_SETSIZE);
        if (pinned) {
            CHECK_EQ_INT(count, 1);
            CHECK_EQ_INT(got[0], cpus[i % n]);
        } else {
            CHECK_EQ_INT(count, n);
            for (int k = 0; k < n && k < count; k++) CHECK_EQ_INT(got[k], cpus[k]);
        }
    }
}

static void test_pinning(void) {
    mm_error err;
    int cpus[CPU_SETSIZE];
    int n = mask_list(cpus, CPU_SETSIZE);
    CHECK_EQ_INT(mm_threads_pinning(), 0); /* the default */
    CHECK_OK(mm_threads_set_count(4, &err), &err);
    use_pool();
    CHECK(mm_parallel_spawned_workers() >= 3);
    CHECK_EQ_INT(mm_parallel_worker_cpus(-1, cpus + 0, 0), -1); /* no such worker */
    CHECK_EQ_INT(mm_parallel_worker_cpus(mm_parallel_spawned_workers(), cpus + 0, 0), -1);

    CHECK_OK(mm_threads_set_pinning(1, &err), &err);
    CHECK_EQ_INT(mm_threads_pinning(), 1);
    expect_workers(cpus, n, 1); /* at once, before any call */
    use_pool();
    /* workers spawned while pinned are pinned too, continuing the round-robin */
    CHECK_OK(mm_threads_set_count(7, &err), &err);
    use_pool();
    CHECK(mm_parallel_spawned_workers() >= 6);
    expect_workers(cpus, n, 1);
    /* the calling thread is left alone */
    int mine[CPU_SETSIZE];
    CHECK_EQ_INT(mask_list(mine, CPU_SETSIZE), n);

    CHECK_STATUS(mm_threads_set_pinning(2, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "on = 2 is not 0 or 1");
    CHECK_EQ_INT(mm_threads_pinning(), 1);

    CHECK_OK(mm_threads_set_pinning(0, &err), &err);
    CHECK_EQ_INT(mm_threads_pinning(), 0);
    expect_workers(cpus, n, 0);

    /* pinning takes the caller's mask: narrowed to the last CPU, every worker lands there */
    cpu_set_t saved, one;
    CHECK_EQ_INT(sched_getaffinity(0, sizeof saved, &saved), 0);
    CPU_ZERO(&one);
    CPU_SET(cpus[n - 1], &one);
    CHECK_EQ_INT(sched_setaffinity(0, sizeof one, &one), 0);
    CHECK_OK(mm_threads_set_pinning(1, &err), &err);
    expect_workers(&cpus[n - 1], 1, 1);
    CHECK_EQ_INT(sched_setaffinity(0, sizeof saved, &saved), 0);
    CHECK_OK(mm_threads_set_pinning(1, &err), &err); /* again with the whole mask */
    expect_workers(cpus, n, 1);
    use_pool();
    CHECK_OK(mm_threads_set_pinning(0, &err), &err);
}

/* Nodes under /sys/devices/system/node (node0, node1, ...); 1 when unreadable. */
static int sys_nodes(void) {
    DIR *d = opendir("/sys/devices/system/node");
    if (!d) return 1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9') n++;
    closedir(d);
    return n >= 1 ? n : 1;
}

static void test_numa(void) {
    int nodes = mm_threads_numa_nodes();
    CHECK(nodes >= 1);
    CHECK(nodes <= sys_nodes());
    if (sys_nodes() == 1) CHECK_EQ_INT(nodes, 1); /* one node: nothing to interleave over */
}

int main(void) {
    test_set_count();
    test_default_count();
    test_pinning();
    test_numa();
    return mm_test_finish("test_threads");
}
