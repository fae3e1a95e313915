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

/* One fake tree: proc/self/cgroup, the files under sys/fs/cgroup, and the quota expected from it. */
typedef struct quota_case {
    const char *label;
    struct {
        int found;
        long long quota, period;
    } want;
    const char *proc_self_cgroup;
    const char *files[5][2]; /* relative path and text; ends at a NULL path */
} quota_case;

static const quota_case quota_cases[] = {
    /* cgroup v2 */
    {"v2 root", {1, 150000, 100000}, "0::/\n", {{"cpu.max", "150000 100000\n"}}},
    {"v2 max", {0, 0, 0}, "0::/\n", {{"cpu.max", "max 100000\n"}}},
    /* nested: the child has no limit, its parent the tightest, the grandparent a looser one */
    {"v2 nested, parent tightest",
     {1, 200000, 100000},
     "0::/a/b\n",
     {{"a/b/cpu.max", "max 100000\n"}, {"a/cpu.max", "200000 100000\n"}, {"cpu.max", "400000 100000\n"}}},
    /* the child tighter than its ancestors (0.6 against 0.7 CPU), with another period (compared as
     * fractions) */
    {"v2 nested, child tightest",
     {1, 30000, 50000},
     "0::/a/b/\n",
     {{"a/b/cpu.max", "30000 50000\n"}, {"a/cpu.max", "70000 100000\n"}}},
    /* a container: /proc names the host's path, its own cgroup is mounted at the top */
    {"v2 container root",
     {1, 100000, 50000},
     "0::/system.slice/docker-abc.scope\n",
     {{"cpu.max", "100000 50000\n"}}},
    /* no cpu.max anywhere (the controller not enabled) */
    {"v2 no cpu.max", {0, 0, 0}, "0::/user.slice\n", {{"user.slice/cgroup.procs", "1\n"}}},
    /* cgroup v1 */
    {"v1 cpu,cpuacct",
     {1, 250000, 100000},
     "12:pids:/job\n4:cpu,cpuacct:/job\n3:cpuset:/job\n",
     {{"cpu,cpuacct/job/cpu.cfs_quota_us", "250000\n"}, {"cpu,cpuacct/job/cpu.cfs_period_us", "100000\n"}}},
    /* -1 = no quota, in the cgroup and its parent */
    {"v1 -1",
     {0, 0, 0},
     "4:cpu,cpuacct:/job\n",
     {{"cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n"},
      {"cpu,cpuacct/job/cpu.cfs_period_us", "100000\n"},
      {"cpu,cpuacct/cpu.cfs_quota_us", "-1\n"},
      {"cpu,cpuacct/cpu.cfs_period_us", "100000\n"}}},
    /* mounted as plain `cpu` only; the parent holds the quota */
    {"v1 cpu mount, parent",
     {1, 50000, 100000},
     "2:cpu:/a/b\n",
     {{"cpu/a/b/cpu.cfs_quota_us", "-1\n"},
      {"cpu/a/b/cpu.cfs_period_us", "100000\n"},
      {"cpu/a/cpu.cfs_quota_us", "50000\n"},
      {"cpu/a/cpu.cfs_period_us", "100000\n"}}},
    /* controllers that merely start with "cpu" are not the cpu controller */
    {"v1 cpuset/cpuacct only",
     {0, 0, 0},
     "3:cpuset:/\n2:cpuacct:/\n",
     {{"cpuset/cpu.cfs_quota_us", "50000\n"},
      {"cpuset/cpu.cfs_period_us", "100000\n"},
      {"cpuacct/cpu.cfs_quota_us", "50000\n"},
      {"cpuacct/cpu.cfs_period_us", "100000\n"}}},
    /* malformed: garbage after the number, a missing period */
    {"v1 malformed quota",
     {0, 0, 0},
     "2:cpu:/\n",
     {{"cpu/cpu.cfs_quota_us", "12abc\n"}, {"cpu/cpu.cfs_period_us", "100000\n"}}},
    {"v1 missing period", {0, 0, 0}, "2:cpu:/\n", {{"cpu/cpu.cfs_quota_us", "50000\n"}}},
    /* hybrid: a v1 quota and a v2 one, the tighter wins */
    {"hybrid",
     {1, 120000, 100000},
     "0::/\n2:cpu:/\n",
     {{"cpu.max", "300000 100000\n"},
      {"cpu/cpu.cfs_quota_us", "120000\n"},
      {"cpu/cpu.cfs_period_us", "100000\n"}}},
    /* lines that are not ID:CONTROLLERS:/PATH are skipped */
    {"garbage lines", {0, 0, 0}, "garbage\n5:cpu\n0::relative\n", {{NULL}}},
};

static void test_quota_cases(void) {
    for (size_t i = 0; i < sizeof quota_cases / sizeof quota_cases[0]; i++) {
        const quota_case *qc = &quota_cases[i];
        new_tree(qc->proc_self_cgroup);
        for (int f = 0; qc->files[f][0]; f++) put(qc->files[f][0], qc->files[f][1]);
        expect_quota(qc->want.found, qc->want.quota, qc->want.period, qc->label);
    }
    /* malformed v2 cpu.max */
    static const char *malformed[] = {
        "",           "abc\n",       "100000\n",   "100000 x\n",      "100000 100000 junk\n",
        "0 100000\n", "-5 100000\n", "100000 0\n", " 100000 100000\n"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        new_tree("0::/\n");
        put("cpu.max", malformed[i]);
        expect_quota(0, 0, 0, malformed[i]);
    }
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
    test_quota_cases();
    test_budget();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(cmd), 0);
    return mm_test_finish("test_cpu_budget");
}
