/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_cpu_budget.c: the CPU budget (core/cpu_budget.h) on fake /proc and /sys trees: cgroup v2
 * cpu.max and v1 cfs quota, "max" and -1, nested cgroups (the tightest ancestor wins), a container whose
 * own cgroup is mounted as the root, malformed files, controllers that are not cpu; and the affinity
 * count and list against sched_getaffinity, also with the mask narrowed to one CPU (as taskset does). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cpu_budget.h"
#include "testlib.h"

static char root[256];
static int tree_no;

/* mkdir -p of the directory part of path (everything before the last '/'). */
static void make_parents(const char *path) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    char *last = strrchr(dir, '/');
    if (!last) return;
    *last = '\0';
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0700);
            *p = '/';
        }
    mkdir(dir, 0700);
}

/* A fresh fake root holding proc/self/cgroup with the given text. */
static void new_tree(const char *proc_self_cgroup) {
    snprintf(root, sizeof root, "%s/tree%d", getenv("MM_TEST_TMP"), tree_no++);
    char path[512];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    make_parents(path);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(proc_self_cgroup, f);
    fclose(f);
}

/* Writes text to ROOT/sys/fs/cgroup/REL, making its directories. */
static void put(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/sys/fs/cgroup/%s", root, rel);
    make_parents(path);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The quota read from the current tree: want_found, and when found the quota and period. */
static void expect_quota(int want_found, long long want_q, long long want_p, const char *label) {
    long long q = -7, p = -7;
    int found = mm_cgroup_cpu_quota(root, &q, &p);
    if (found != want_found) printf("  %s: found %d, expected %d\n", label, found, want_found);
    CHECK_EQ_INT(found, want_found);
    if (want_found) {
        CHECK_EQ_INT(q, want_q);
        CHECK_EQ_INT(p, want_p);
    } else {
        CHECK_EQ_INT(q, -7); /* left alone */
    }
}

static void test_v2(void) {
    new_tree("0::/\n");
    put("cpu.max", "150000 100000\n");
    expect_quota(1, 150000, 100000, "v2 root");
    new_tree("0::/\n");
    put("cpu.max", "max 100000\n");
    expect_quota(0, 0, 0, "v2 max");
    /* nested: the child has no limit, its parent the tightest, the grandparent a looser one */
    new_tree("0::/a/b\n");
    put("a/b/cpu.max", "max 100000\n");
    put("a/cpu.max", "200000 100000\n");
    put("cpu.max", "400000 100000\n");
    expect_quota(1, 200000, 100000, "v2 nested, parent tightest");
    /* the child tighter than its ancestors, with another period (compared as fractions) */
    new_tree("0::/a/b/\n");
    put("a/b/cpu.max", "30000 50000\n"); /* 0.6 CPU */
    put("a/cpu.max", "70000 100000\n");  /* 0.7 CPU */
    expect_quota(1, 30000, 50000, "v2 nested, child tightest");
    /* a container: /proc names the host's path, its own cgroup is mounted at the top */
    new_tree("0::/system.slice/docker-abc.scope\n");
    put("cpu.max", "100000 50000\n");
    expect_quota(1, 100000, 50000, "v2 container root");
    /* no cpu.max anywhere (the controller not enabled) */
    new_tree("0::/user.slice\n");
    put("user.slice/cgroup.procs", "1\n");
    expect_quota(0, 0, 0, "v2 no cpu.max");
    static const char *malformed[] = {
        "",           "abc\n",       "100000\n",   "100000 x\n",      "100000 100000 junk\n",
        "0 100000\n", "-5 100000\n", "100000 0\n", " 100000 100000\n"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        new_tree("0::/\n");
        put("cpu.max", malformed[i]);
        expect_quota(0, 0, 0, malformed[i]);
    }
}

static void test_v1(void) {
    new_tree("12:pids:/job\n4:cpu,cpuacct:/job\n3:cpuset:/job\n");
    put("cpu,cpuacct/job/cpu.cfs_quota_us", "250000\n");
    put("cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
    expect_quota(1, 250000, 100000, "v1 cpu,cpuacct");
    /* -1 = no quota, in the cgroup and its parent */
    new_tree("4:cpu,cpuacct:/job\n");
    put("cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
    put("cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
    put("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    expect_quota(0, 0, 0, "v1 -1");
    /* mounted as plain `cpu` only; the parent holds the quota */
    new_tree("2:cpu:/a/b\n");
    put("cpu/a/b/cpu.cfs_quota_us", "-1\n");
    put("cpu/a/b/cpu.cfs_period_us", "100000\n");
    put("cpu/a/cpu.cfs_quota_us", "50000\n");
    put("cpu/a/cpu.cfs_period_us", "100000\n");
    expect_quota(1, 50000, 100000, "v1 cpu mount, parent");
    /* controllers that merely start with "cpu" are not the cpu controller */
    new_tree("3:cpuset:/\n2:cpuacct:/\n");
    put("cpuset/cpu.cfs_quota_us", "50000\n");
    put("cpuset/cpu.cfs_period_us", "100000\n");
    put("cpuacct/cpu.cfs_quota_us", "50000\n");
    put("cpuacct/cpu.cfs_period_us", "100000\n");
    expect_quota(0, 0, 0, "v1 cpuset/cpuacct only");
    /* malformed: garbage after the number, a missing period */
    new_tree("2:cpu:/\n");
    put("cpu/cpu.cfs_quota_us", "12abc\n");
    put("cpu/cpu.cfs_period_us", "100000\n");
    expect_quota(0, 0, 0, "v1 malformed quota");
    new_tree("2:cpu:/\n");
    put("cpu/cpu.cfs_quota_us", "50000\n");
    expect_quota(0, 0, 0, "v1 missing period");
    /* hybrid: a v1 quota and a v2 one, the tighter wins */
    new_tree("0::/\n2:cpu:/\n");
    put("cpu.max", "300000 100000\n");
    put("cpu/cpu.cfs_quota_us", "120000\n");
    put("cpu/cpu.cfs_period_us", "100000\n");
    expect_quota(1, 120000, 100000, "hybrid");
    /* lines that are not ID:CONTROLLERS:/PATH are skipped */
    new_tree("garbage\n5:cpu\n0::relative\n");
    expect_quota(0, 0, 0, "garbage lines");
    /* no proc file at all */
    snprintf(root, sizeof root, "%s/does-not-exist", getenv("MM_TEST_TMP"));
    expect_quota(0, 0, 0, "no /proc");
}

static int sched_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}

static void test_budget(void) {
    int affinity = sched_count();
    CHECK(affinity >= 1);
    CHECK_EQ_INT(mm_affinity_cpu_count(), affinity);
    int list[CPU_SETSIZE];
    CHECK_EQ_INT(mm_affinity_cpu_list(list, CPU_SETSIZE), affinity);
    for (int i = 1; i < affinity; i++) CHECK(list[i] > list[i - 1]);
    mm_cpu_budget b;
    /* 1.5 CPUs round up to 2 */
    new_tree("0::/\n");
    put("cpu.max", "150000 100000\n");
    mm_cpu_budget_read(root, &b);
    CHECK_EQ_INT(b.affinity_cpus, affinity);
    CHECK_EQ_INT(b.quota_us, 150000);
    CHECK_EQ_INT(b.period_us, 100000);
    CHECK_EQ_INT(b.quota_cpus, 2);
    CHECK_EQ_INT(b.cpus, affinity < 2 ? affinity : 2);
    /* half a CPU is still one thread */
    new_tree("0::/\n");
    put("cpu.max", "50000 100000\n");
    mm_cpu_budget_read(root, &b);
    CHECK_EQ_INT(b.quota_cpus, 1);
    CHECK_EQ_INT(b.cpus, 1);
    /* a quota above the affinity mask leaves the mask */
    new_tree("0::/\n");
    put("cpu.max", "100000000 100000\n");
    mm_cpu_budget_read(root, &b);
    CHECK_EQ_INT(b.quota_cpus, 1000);
    CHECK_EQ_INT(b.cpus, affinity);
    /* no quota */
    new_tree("0::/\n");
    mm_cpu_budget_read(root, &b);
    CHECK_EQ_INT(b.quota_cpus, 0);
    CHECK_EQ_INT(b.quota_us, 0);
    CHECK_EQ_INT(b.cpus, affinity);

    /* narrowed to the last CPU of the mask, as `taskset -c N` does */
    cpu_set_t saved, one;
    CHECK_EQ_INT(sched_getaffinity(0, sizeof saved, &saved), 0);
    CPU_ZERO(&one);
    CPU_SET(list[affinity - 1], &one);
    CHECK_EQ_INT(sched_setaffinity(0, sizeof one, &one), 0);
    CHECK_EQ_INT(mm_affinity_cpu_count(), 1);
    int got[4] = {-1, -1, -1, -1};
    CHECK_EQ_INT(mm_affinity_cpu_list(got, 4), 1);
    CHECK_EQ_INT(got[0], list[affinity - 1]);
    new_tree("0::/\n");
    mm_cpu_budget_read(root, &b);
    CHECK_EQ_INT(b.cpus, 1);
    CHECK_EQ_INT(sched_setaffinity(0, sizeof saved, &saved), 0);
    /* a short list: only the first max CPUs */
    if (affinity >= 2) {
        int two[1] = {-1};
        CHECK_EQ_INT(mm_affinity_cpu_list(two, 1), 1);
        CHECK_EQ_INT(two[0], list[0]);
    }
}

int main(void) {
    char tmp[] = "/tmp/mm_cpu_budget_XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    setenv("MM_TEST_TMP", tmp, 1);
    test_v2();
    test_v1();
    test_budget();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(cmd), 0);
    return mm_test_finish("test_cpu_budget");
}
