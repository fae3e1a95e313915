/* SPDX-License-Identifier: Apache-2.0 */
/* core/cpu_budget.h: how many CPUs this process may keep busy: the CPUs of its affinity mask (taskset,
 * numactl, a container's cpuset), further bounded by its cgroup CPU quota (cgroup v2 cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us), rounded up, at least 1. The worker pool's default thread count,
 * the compute gate and the communicator's spinning policy all size themselves by it (sysconf's online
 * CPUs ignores both limits: a container given 2 of 64 CPUs would start 64 threads).
 *
 * The cgroup reader takes a root directory so tests can feed it fake /proc and /sys trees.
 *
 * Internal API for tools too: the CLI's thread line (tools/common/cli_threads.c) reports the budget's
 * parts; not part of include/megamoe/. */
#ifndef MEGAMOE_CORE_CPU_BUDGET_H
#define MEGAMOE_CORE_CPU_BUDGET_H

typedef struct mm_cpu_budget {
    int affinity_cpus;   /* CPUs of the calling thread's affinity mask (online CPUs if unreadable) */
    long long quota_us;  /* tightest cgroup quota found (per period), 0 = none */
    long long period_us; /* its period */
    int quota_cpus;      /* quota / period rounded up, 0 = none */
    int cpus;            /* the budget: min(affinity_cpus, quota_cpus when set), >= 1 */
} mm_cpu_budget;

/* The tightest CPU quota of this process's cgroups, read from ROOT/proc/self/cgroup and the files under
 * ROOT/sys/fs/cgroup (ROOT "" is the real system): for v2 (`0::PATH`) cpu.max, for v1 (a line whose
 * controllers include `cpu`) cpu.cfs_quota_us and cpu.cfs_period_us, in the cgroup's directory and every
 * ancestor up to the mount (a parent's quota bounds its children; a container whose cgroup directory is
 * mounted as the root finds its files at the top). Returns 1 and the quota with its period, or 0 when
 * there is no quota ("max", -1, missing or malformed files). */
int mm_cgroup_cpu_quota(const char *root, long long *quota_us, long long *period_us);

/* CPUs in the calling thread's affinity mask; the online CPUs when the mask cannot be read. */
int mm_affinity_cpu_count(void);

/* The CPU numbers of the calling thread's affinity mask in increasing order, at most max of them;
 * returns how many (0 when the mask cannot be read). */
int mm_affinity_cpu_list(int *cpus, int max);

/* The budget as it is now, cgroup files read under root ("" for the real system). */
void mm_cpu_budget_read(const char *root, mm_cpu_budget *budget);

/* The budget's cpus for this process, read once (the policies that ask for it run in hot paths). */
int mm_cpu_budget_cpus(void);

#endif
