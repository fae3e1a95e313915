/* SPDX-License-Identifier: Apache-2.0 */
/* core/cpu_budget.c: the affinity mask and the cgroup CPU quota (cpu_budget.h). */
#include "core/cpu_budget.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PATH_BYTES = 4096, LINE_BYTES = 4096 };

/* Keeps the tighter of the quota found so far and quota/period (compared as fractions). */
static void keep_tighter(long long quota, long long period, int *found, long long *best_q,
                         long long *best_p) {
    if (quota <= 0 || period <= 0) return;
    if (!*found || (double)quota / (double)period < (double)*best_q / (double)*best_p) {
        *best_q = quota;
        *best_p = period;
        *found = 1;
    }
}

/* One integer alone on the file's first line (trailing newline allowed); 0 when malformed. */
static int read_integer_file(const char *path, long long *value) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[64];
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok) return 0;
    char *end = NULL;
    *value = strtoll(line, &end, 10);
    return end != line && (*end == '\n' || *end == '\0');
}

/* v2 cpu.max: "QUOTA PERIOD" or "max PERIOD". */
static void read_cpu_max(const char *dir, int *found, long long *q, long long *p) {
    char path[PATH_BYTES];
    if (snprintf(path, sizeof path, "%s/cpu.max", dir) >= (int)sizeof path) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[128];
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok || line[0] < '0' || line[0] > '9') return; /* "max", or not what the kernel writes */
    char *end = NULL;
    long long quota = strtoll(line, &end, 10);
    if (end == line || *end != ' ') return; /* "max" or garbage: no quota here */
    char *rest = end + 1;
    long long period = strtoll(rest, &end, 10);
    if (end == rest || (*end != '\n' && *end != '\0')) return;
    keep_tighter(quota, period, found, q, p);
}

/* v1: cpu.cfs_quota_us (-1 = none) over cpu.cfs_period_us. */
static void read_cfs(const char *dir, int *found, long long *q, long long *p) {
    char path[PATH_BYTES];
    long long quota = 0, period = 0;
    if (snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= (int)sizeof path) return;
    if (!read_integer_file(path, &quota)) return;
    if (snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir) >= (int)sizeof path) return;
    if (!read_integer_file(path, &period)) return;
    keep_tighter(quota, period, found, q, p);
}

typedef void (*quota_reader)(const char *dir, int *found, long long *q, long long *p);

/* Reads mount/PATH, then each ancestor of PATH, up to mount itself. */
static void read_up_the_tree(const char *mount, const char *cgroup_path, quota_reader read, int *found,
                             long long *q, long long *p) {
    char dir[PATH_BYTES];
    if (snprintf(dir, sizeof dir, "%s%s", mount, cgroup_path) >= (int)sizeof dir) return;
    size_t mount_len = strlen(mount);
    for (;;) {
        size_t len = strlen(dir);
        while (len > mount_len && dir[len - 1] == '/') dir[--len] = '\0';
        read(dir, found, q, p);
        if (len <= mount_len) return;
        char *slash = strrchr(dir + mount_len, '/');
        if (!slash) {
            dir[mount_len] = '\0';
        } else {
            *slash = '\0';
        }
    }
}

/* 1 when the comma-separated list holds `name`. */
static int list_has(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *s = list; *s;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len == n && strncmp(s, name, n) == 0) return 1;
        if (!comma) break;
        s = comma + 1;
    }
    return 0;
}

int mm_cgroup_cpu_quota(const char *root, long long *quota_us, long long *period_us) {
    int found = 0;
    long long q = 0, p = 0;
    char path[PATH_BYTES], mount[PATH_BYTES];
    if (snprintf(path, sizeof path, "%s/proc/self/cgroup", root) >= (int)sizeof path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[LINE_BYTES];
    while (fgets(line, sizeof line, f)) {
        /* ID:CONTROLLERS:PATH */
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/') continue;
        *c1 = '\0';
        *c2 = '\0';
        const char *controllers = c1 + 1, *cgroup_path = c2 + 1;
        if (strcmp(line, "0") == 0 && *controllers == '\0') {
            if (snprintf(mount, sizeof mount, "%s/sys/fs/cgroup", root) < (int)sizeof mount)
                read_up_the_tree(mount, cgroup_path, read_cpu_max, &found, &q, &p);
        } else if (list_has(controllers, "cpu")) {
            /* Mounted under the controllers' joined name (cpu,cpuacct), usually linked as cpu too. */
            if (snprintf(mount, sizeof mount, "%s/sys/fs/cgroup/%s", root, controllers) < (int)sizeof mount &&
                access(mount, F_OK) == 0)
                read_up_the_tree(mount, cgroup_path, read_cfs, &found, &q, &p);
            else if (snprintf(mount, sizeof mount, "%s/sys/fs/cgroup/cpu", root) < (int)sizeof mount)
                read_up_the_tree(mount, cgroup_path, read_cfs, &found, &q, &p);
        }
    }
    fclose(f);
    if (found) {
        *quota_us = q;
        *period_us = p;
    }
    return found;
}

/* The calling thread's affinity mask, grown until the kernel's fits (more than CPU_SETSIZE CPUs);
 * NULL when unreadable. *bytes is its size for the CPU_*_S macros; free with CPU_FREE. */
#ifdef __linux__
static cpu_set_t *read_affinity_mask(size_t *bytes, int *cpus) {
    for (int n = CPU_SETSIZE; n <= (1 << 20); n *= 2) {
        cpu_set_t *set = CPU_ALLOC(n);
        if (!set) return NULL;
        *bytes = CPU_ALLOC_SIZE(n);
        *cpus = n;
        CPU_ZERO_S(*bytes, set);
        if (sched_getaffinity(0, *bytes, set) == 0) return set;
        CPU_FREE(set);
    }
    return NULL;
}
#endif

int mm_affinity_cpu_list(int *cpus, int max) {
#ifndef __linux__
    (void)cpus;
    (void)max;
    return 0;
#else
    size_t bytes = 0;
    int n = 0, count = 0;
    cpu_set_t *set = read_affinity_mask(&bytes, &n);
    if (!set) return 0;
    for (int cpu = 0; cpu < n && count < max; cpu++)
        if (CPU_ISSET_S(cpu, bytes, set)) cpus[count++] = cpu;
    CPU_FREE(set);
    return count;
#endif
}

int mm_affinity_cpu_count(void) {
#ifdef __linux__
    size_t bytes = 0;
    int n = 0;
    cpu_set_t *set = read_affinity_mask(&bytes, &n);
    if (set) {
        int count = CPU_COUNT_S(bytes, set);
        CPU_FREE(set);
        if (count >= 1) return count;
    }
#endif
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online >= 1 ? (int)(online < 1 << 20 ? online : 1 << 20) : 1;
}

void mm_cpu_budget_read(const char *root, mm_cpu_budget *b) {
    memset(b, 0, sizeof *b);
    b->affinity_cpus = mm_affinity_cpu_count();
    b->cpus = b->affinity_cpus;
    if (mm_cgroup_cpu_quota(root, &b->quota_us, &b->period_us)) {
        long long whole = (b->quota_us + b->period_us - 1) / b->period_us;
        b->quota_cpus = whole < 1 << 20 ? (int)whole : 1 << 20;
        if (b->quota_cpus < b->cpus) b->cpus = b->quota_cpus;
    } else {
        b->quota_us = b->period_us = 0;
    }
    if (b->cpus < 1) b->cpus = 1;
}

static int process_budget_cpus;
static pthread_once_t process_budget_once = PTHREAD_ONCE_INIT;

static void read_process_budget(void) {
    mm_cpu_budget b;
    mm_cpu_budget_read("", &b);
    process_budget_cpus = b.cpus;
}

int mm_cpu_budget_cpus(void) {
    pthread_once(&process_budget_once, read_process_budget);
    return process_budget_cpus;
}
