/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_tune_cache.c: the tune cache (gemm/tune_cache.h). Parsing: a hand-written cache gives
 * the steps written in it, and the choice rule follows them row by row; every kind of corrupt or
 * mismatched text is refused with a reason (never a crash). The registry, in child processes of this
 * test with MEGAMOE_TUNE_FILE pointing at a hand-written file: its choices follow the cache for the
 * classes the file has and the CPU profile for the others; a class naming a kernel this process lacks,
 * a corrupt file, a file of another CPU and MEGAMOE_TUNE=0 leave the profile's choices. Writing: the
 * directory is created and the text reads back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemm/kernel_registry.h"
#include "gemm/tune_cache.h"
#include "megamoe/version.h"
#include "testlib.h"

static char key[160];

/* A cache text for this CPU and version with the given class lines. */
static void cache_text(char *buf, size_t size, const char *lines) {
    snprintf(buf, size, "megamoe-tune 1\ncpu %s\nversion %s\n%s", key, mm_version(), lines);
}

static void test_parse(void) {
    char text[2048], why[256] = "";
    mm_kernel_rule rules[MM_KCLASS_COUNT];
    int have[MM_KCLASS_COUNT];
    cache_text(text, sizeof text,
               "# comment\nint8xint4 1:avx512 4:avx512-few 9:avx512\r\nmxfp4 1:amx-few 17:amx\n");
    CHECK_EQ_INT(mm_tune_cache_parse(text, key, mm_version(), rules, have, why, sizeof why), 0);
    CHECK(have[MM_KCLASS_INT8_INT4] && have[MM_KCLASS_MXFP4] && !have[MM_KCLASS_BF16] &&
          !have[MM_KCLASS_MXFP8]);
    CHECK_EQ_INT(rules[MM_KCLASS_INT8_INT4].n_steps, 3);
    static const struct {
        int rows;
        mm_kernel_kind want;
    } steps[] = {{1, MM_KIND_AVX512},     {3, MM_KIND_AVX512}, {4, MM_KIND_AVX512_FEW},
                 {8, MM_KIND_AVX512_FEW}, {9, MM_KIND_AVX512}, {5000, MM_KIND_AVX512}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        CHECK_EQ_INT(mm_kernel_rule_choose(&rules[MM_KCLASS_INT8_INT4], 0x1F, steps[i].rows), steps[i].want);
    CHECK_EQ_INT(mm_kernel_rule_choose(&rules[MM_KCLASS_MXFP4], 0x1F, 16), MM_KIND_AMX_FEW);
    CHECK_EQ_INT(mm_kernel_rule_choose(&rules[MM_KCLASS_MXFP4], 0x1F, 17), MM_KIND_AMX);

    /* format -> parse gives the same rules */
    char out[MM_TUNE_CACHE_MAX_BYTES];
    CHECK(mm_tune_cache_format(out, sizeof out, key, mm_version(), rules, have) > 0);
    mm_kernel_rule again[MM_KCLASS_COUNT];
    int have2[MM_KCLASS_COUNT];
    CHECK_EQ_INT(mm_tune_cache_parse(out, key, mm_version(), again, have2, why, sizeof why), 0);
    CHECK(memcmp(have, have2, sizeof have) == 0);
    CHECK(memcmp(&again[MM_KCLASS_INT8_INT4], &rules[MM_KCLASS_INT8_INT4], sizeof again[0]) == 0);

    /* Refused, each with its reason. */
    static const struct {
        const char *lines, *reason;
    } bad[] = {
        {"bf16 1:avx512\nbf16 4:amx\n", "repeated"},
        {"bf16 4:avx512 2:amx\n", "rows increasing"},
        {"bf16 1:avx513\n", "kind one of"},
        {"bf16 0:avx512\n", "rows increasing"},
        {"bf16 x:avx512\n", "rows:kind"},
        {"bf16 1avx512\n", "rows:kind"},
        {"bf16\n", "no steps"},
        {"fp16 1:avx512\n", "unknown key 'fp16'"},
        {"bf16 1:avx512 2:ref 3:avx512 4:ref 5:avx512 6:ref 7:avx512 8:ref 9:avx512 10:ref 11:avx512 12:ref "
         "13:avx512 14:ref 15:avx512 16:ref 17:avx512\n",
         "at most 16 steps"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cache_text(text, sizeof text, bad[i].lines);
        why[0] = '\0';
        CHECK_EQ_INT(mm_tune_cache_parse(text, key, mm_version(), rules, have, why, sizeof why), -1);
        CHECK_STR_CONTAINS(why, bad[i].reason);
    }
    static const struct {
        const char *text, *reason;
    } bad_head[] = {
        {"", "'megamoe-tune 1' line is missing"},
        {"megamoe-tune 2\n", "not a megamoe tune cache"},
        {"\x7f"
         "ELF\x01\x01",
         "not a megamoe tune cache"},
        {"megamoe-tune 1\nversion 0.0.0-other\n", "written by version 0.0.0-other"},
        {"megamoe-tune 1\ncpu GenuineIntel 6 143 Some Xeon\n", "measured on another CPU"},
        {"megamoe-tune 1\nbf16 1:avx512\n", "line is missing"},
    };
    for (size_t i = 0; i < sizeof bad_head / sizeof bad_head[0]; i++) {
        why[0] = '\0';
        CHECK_EQ_INT(mm_tune_cache_parse(bad_head[i].text, key, mm_version(), rules, have, why, sizeof why),
                     -1);
        CHECK_STR_CONTAINS(why, bad_head[i].reason);
    }
    char *huge = malloc(MM_TUNE_CACHE_MAX_BYTES + 10);
    memset(huge, '#', MM_TUNE_CACHE_MAX_BYTES + 9);
    huge[MM_TUNE_CACHE_MAX_BYTES + 9] = '\0';
    CHECK_EQ_INT(mm_tune_cache_parse(huge, key, mm_version(), rules, have, why, sizeof why), -1);
    CHECK_STR_CONTAINS(why, "larger than");
    free(huge);
}

/* Child: the registry with MEGAMOE_TUNE_FILE set by the parent; argv[2] says what to expect. */
static int child(const char *expect) {
    const mm_gemm_kernel_config *cfg = mm_gemm_kernel_config_get();
    int used = strcmp(expect, "used") == 0;
    CHECK_EQ_INT(cfg->cache_state, used                         ? MM_TUNE_CACHE_USED
                                   : strcmp(expect, "off") == 0 ? MM_TUNE_CACHE_OFF
                                                                : MM_TUNE_CACHE_IGNORED);
    mm_dtype a, w;
    for (int i = 0; mm_gemm_kernel_pair(i, &a, &w); i++) {
        int cls = mm_kernel_class_of(a, w);
        if (cls < 0) continue;
        for (int64_t rows = 1; rows <= 40; rows++) {
            /* The cache's int8xint4 line (written for every CPU with AVX-512): general / few / general. */
            mm_kernel_kind want = mm_gemm_kernel_rule_kind(&cfg->profile->rules[cls], a, w, rows);
            if (used && cls == MM_KCLASS_INT8_INT4)
                want = rows >= 4 && rows <= 8 ? MM_KIND_AVX512_FEW : MM_KIND_AVX512;
            const mm_gemm_kernel *got = mm_gemm_kernel_select_rows(a, w, rows);
            if (got != mm_gemm_kernel_of_kind(want, a, w))
                mm_test_report_fail(__FILE__, __LINE__, "%s, %s x %s, %lld rows: %s, expected kind %s",
                                    expect, mm_dtype_name(a), mm_dtype_name(w), (long long)rows,
                                    got ? got->name : "-", mm_kernel_kind_name(want));
            else
                mm_test_passed++;
        }
    }
    if (used) CHECK_STR_CONTAINS(cfg->cache_note, "int8xint4");
    if (used && !mm_cpu_supports(MM_ISA_AMX))
        CHECK_STR_CONTAINS(cfg->cache_note, "(not for bf16: names a kernel");
    return mm_test_finish("test_gemm_tune_cache (child)");
}

static int run_child(const char *self, const char *env, const char *path, const char *expect) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "env -u MEGAMOE_CPU_PROFILE MEGAMOE_TUNE=1 %s MEGAMOE_TUNE_FILE='%s' '%s' child %s", env, path,
             self, expect);
    return system(cmd);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

int main(int argc, char **argv) {
    mm_tune_cache_cpu_key(key, sizeof key);
    if (argc == 3 && strcmp(argv[1], "child") == 0) return child(argv[2]);
    test_parse();
    char dir[] = "/tmp/megamoe_tune_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], text[2048];
    snprintf(path, sizeof path, "%s/a/b/kernels.txt", dir);
    /* int8xint4 follows the cache; bf16 names AMX, ignored where the process lacks it. */
    cache_text(text, sizeof text, "int8xint4 1:avx512 4:avx512-few 9:avx512\nbf16 1:amx\n");
    mm_error err;
    CHECK_OK(mm_tune_cache_write(path, text, &err), &err);
    if (mm_cpu_isa() >= MM_ISA_AVX512) {
        CHECK_EQ_INT(run_child(argv[0], "", path, "used"), 0);
        CHECK_EQ_INT(run_child(argv[0], "MEGAMOE_TUNE=0", path, "off"), 0);
    } else {
        mm_test_skip("registry following the cache: the process has no AVX-512 kernels");
    }
    static const char *const corrupt[] = {"megamoe-tune 1\ncpu x\n", "garbage\x01\x02", "megamoe-tune 1\n"};
    for (size_t i = 0; i < sizeof corrupt / sizeof corrupt[0]; i++) {
        write_file(path, corrupt[i]);
        CHECK_EQ_INT(run_child(argv[0], "", path, "ignored"), 0);
    }
    write_file(path, "megamoe-tune 1\ncpu GenuineIntel 6 143 Some Xeon\nversion 0.1.0\nint8xint4 1:avx512\n");
    CHECK_EQ_INT(run_child(argv[0], "", path, "ignored"), 0);
    remove(path);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(text), 0);
    return mm_test_finish("test_gemm_tune_cache");
}
