/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/tune_cache.c: the tune cache's path, text format, reading and writing (gemm/tune_cache.h). */
#include "gemm/tune_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

#define CACHE_NAME "megamoe/kernels.txt"

int mm_tune_cache_path(char *buf, size_t size) {
    const char *file = getenv("MEGAMOE_TUNE_FILE");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (file && file[0])
        n = snprintf(buf, size, "%s", file);
    else if (xdg && xdg[0] == '/') /* the XDG rule: a relative value is invalid and ignored */
        n = snprintf(buf, size, "%s/%s", xdg, CACHE_NAME);
    else if (home && home[0])
        n = snprintf(buf, size, "%s/.cache/%s", home, CACHE_NAME);
    else
        n = -1;
    if (n < 0 || (size_t)n >= size) {
        if (size) buf[0] = '\0';
        return -1;
    }
    return 0;
}

int mm_tune_cache_enabled(void) {
    const char *v = getenv("MEGAMOE_TUNE");
    return !(v && strcmp(v, "0") == 0);
}

void mm_tune_cache_cpu_key(char *buf, size_t size) {
    const mm_cpu_id *id = mm_cpu_identity();
    snprintf(buf, size, "%s %d %d %s", id->vendor[0] ? id->vendor : "unknown", id->family, id->model,
             id->brand[0] ? id->brand : "unknown");
}

/* One "class rows:kind ..." line into rules; 0 or -1 with why. */
static int parse_class_line(char *line, int lineno, mm_kernel_rule rules[MM_KCLASS_COUNT],
                            int have[MM_KCLASS_COUNT], char *why, size_t why_size) {
    char *save = NULL;
    char *name = strtok_r(line, " ", &save);
    int cls = name ? mm_kernel_class_parse(name) : -1;
    if (cls < 0) {
        snprintf(why, why_size, "line %d: unknown key '%s'", lineno, name ? name : "");
        return -1;
    }
    if (have[cls]) {
        snprintf(why, why_size, "line %d: class %s repeated", lineno, name);
        return -1;
    }
    mm_kernel_rule *r = &rules[cls];
    memset(r, 0, sizeof *r);
    for (char *tok = strtok_r(NULL, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *colon = strchr(tok, ':'), *end = NULL;
        long rows = colon ? strtol(tok, &end, 10) : -1;
        int kind = colon ? mm_kernel_kind_parse(colon + 1) : -1;
        if (!colon || end != colon || rows < 1 || rows > 1 << 20 || kind < 0 ||
            (r->n_steps > 0 && rows <= r->steps[r->n_steps - 1].rows) ||
            r->n_steps == MM_KERNEL_RULE_MAX_STEPS) {
            snprintf(
                why, why_size,
                "line %d: step '%.40s' is not rows:kind with rows increasing in [1, 1048576], kind one of "
                "ref, avx512, avx512-few, amx, amx-few, at most %d steps",
                lineno, tok, MM_KERNEL_RULE_MAX_STEPS);
            return -1;
        }
        r->steps[r->n_steps].rows = (int)rows;
        r->steps[r->n_steps].kind = (mm_kernel_kind)kind;
        r->n_steps++;
    }
    if (r->n_steps == 0) {
        snprintf(why, why_size, "line %d: class %s has no steps", lineno, name);
        return -1;
    }
    have[cls] = 1;
    return 0;
}

int mm_tune_cache_parse(const char *text, const char *cpu_key, const char *version,
                        mm_kernel_rule rules[MM_KCLASS_COUNT], int have[MM_KCLASS_COUNT], char *why,
                        size_t why_size) {
    memset(have, 0, MM_KCLASS_COUNT * sizeof have[0]);
    size_t len = strlen(text);
    if (len >= MM_TUNE_CACHE_MAX_BYTES) {
        snprintf(why, why_size, "larger than %d bytes", MM_TUNE_CACHE_MAX_BYTES);
        return -1;
    }
    char copy[MM_TUNE_CACHE_MAX_BYTES];
    memcpy(copy, text, len + 1);
    int lineno = 0, seen_magic = 0, seen_cpu = 0, seen_version = 0;
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ')) line[--n] = '\0';
        if (n == 0 || line[0] == '#') continue;
        if (!seen_magic) {
            if (strcmp(line, "megamoe-tune 1") != 0) {
                snprintf(why, why_size,
                         "line %d: not a megamoe tune cache (first line must be 'megamoe-tune 1')", lineno);
                return -1;
            }
            seen_magic = 1;
        } else if (strncmp(line, "cpu ", 4) == 0) {
            if (strcmp(line + 4, cpu_key) != 0) {
                snprintf(why, why_size, "measured on another CPU ('%.80s', this one is '%.80s')", line + 4,
                         cpu_key);
                return -1;
            }
            seen_cpu = 1;
        } else if (strncmp(line, "version ", 8) == 0) {
            if (strcmp(line + 8, version) != 0) {
                snprintf(why, why_size, "written by version %.40s, this library is %.40s", line + 8, version);
                return -1;
            }
            seen_version = 1;
        } else if (parse_class_line(line, lineno, rules, have, why, why_size) != 0) {
            return -1;
        }
    }
    if (!seen_magic || !seen_cpu || !seen_version) {
        snprintf(why, why_size, "the %s line is missing",
                 !seen_magic ? "'megamoe-tune 1'"
                 : !seen_cpu ? "cpu"
                             : "version");
        return -1;
    }
    return 0;
}

int mm_tune_cache_read(const char *path, const char *cpu_key, const char *version,
                       mm_kernel_rule rules[MM_KCLASS_COUNT], int have[MM_KCLASS_COUNT], char *why,
                       size_t why_size) {
    memset(have, 0, MM_KCLASS_COUNT * sizeof have[0]);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 1;
        snprintf(why, why_size, "cannot open: %s", strerror(errno));
        return -1;
    }
    char text[MM_TUNE_CACHE_MAX_BYTES];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int too_big = n == sizeof text - 1 && fgetc(f) != EOF;
    fclose(f);
    text[n] = '\0';
    if (too_big || memchr(text, '\0', n)) {
        snprintf(why, why_size, too_big ? "larger than %d bytes" : "not text (%d-byte limit)",
                 MM_TUNE_CACHE_MAX_BYTES);
        return -1;
    }
    return mm_tune_cache_parse(text, cpu_key, version, rules, have, why, why_size);
}

/* Appends to buf at *len; -1 once it no longer fits. */
static int append(char *buf, size_t size, size_t *len, const char *fmt, const char *s1, const char *s2) {
    int n = snprintf(buf + *len, size - *len, fmt, s1, s2);
    if (n < 0 || (size_t)n >= size - *len) return -1;
    *len += (size_t)n;
    return 0;
}

int mm_tune_cache_format(char *buf, size_t size, const char *cpu_key, const char *version,
                         const mm_kernel_rule rules[MM_KCLASS_COUNT], const int have[MM_KCLASS_COUNT]) {
    size_t len = 0;
    if (size == 0) return -1;
    buf[0] = '\0';
    int bad = append(buf, size, &len,
                     "# megamoe tune cache: per format class, the kernel kind measured fastest from each "
                     "row count on\nmegamoe-tune 1\ncpu %s\nversion %s\n",
                     cpu_key, version);
    for (int c = 0; c < MM_KCLASS_COUNT && !bad; c++) {
        if (!have[c]) continue;
        bad = append(buf, size, &len, "%s%s", mm_kernel_class_name(c), "");
        for (int s = 0; s < rules[c].n_steps && !bad; s++) {
            char rows[16];
            snprintf(rows, sizeof rows, "%d", rules[c].steps[s].rows);
            bad = append(buf, size, &len, " %s:%s", rows, mm_kernel_kind_name(rules[c].steps[s].kind));
        }
        if (!bad) bad = append(buf, size, &len, "%s%s", "\n", "");
    }
    return bad ? -1 : (int)len;
}

/* mkdir -p of path's directory; 0 or errno. */
static int make_parent_dirs(const char *path) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return ENAMETOOLONG;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) return errno;
        *p = '/';
    }
    return mkdir(dir, 0755) != 0 && errno != EEXIST ? errno : 0;
}

mm_status mm_tune_cache_write(const char *path, const char *text, mm_error *err) {
    int e = make_parent_dirs(path);
    if (e)
        return mm_fail(err, MM_ERR_IO, "tune cache %s: cannot create its directory: %s", path, strerror(e));
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tune cache path %s: longer than %d bytes", path, 4096);
    FILE *f = fopen(tmp, "wb");
    if (!f) return mm_fail(err, MM_ERR_IO, "tune cache %s: cannot create: %s", tmp, strerror(errno));
    size_t len = strlen(text);
    int ok = fwrite(text, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int saved = errno;
        remove(tmp);
        return mm_fail(err, MM_ERR_IO, "tune cache %s: cannot write: %s", path, strerror(saved));
    }
    return MM_OK;
}
