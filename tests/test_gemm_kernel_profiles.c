/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_kernel_profiles.c: the per-CPU kernel profiles (gemm/kernel_profiles.h) without their
 * CPUs: each profile's choices per format class and row count against the numbers written here from
 * its table row (with every kernel kind available, and without AMX), the CPU matching on made-up cpuid
 * identities, and, in child processes of this test with MEGAMOE_CPU_PROFILE set to each name, that the
 * registry follows the forced profile on this CPU and that INT results are bit-identical and float
 * results are those of the kernel the profile names, whatever the profile; an unknown name is an
 * error naming the variable, the value and the valid names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gemm/kernel_registry.h"
#include "test_gemm_common.h"

#define ALL_KINDS 0x1Fu
#define NO_AMX    ((1u << MM_KIND_REF) | (1u << MM_KIND_AVX512) | (1u << MM_KIND_AVX512_FEW))

typedef struct expect_row {
    int cls;
    int rows;
    mm_kernel_kind with_amx, without_amx;
} expect_row;

/* The AMX Xeon thresholds (generic, sapphire/emerald/granite-rapids). */
static const expect_row xeon[] = {
    {MM_KCLASS_BF16, 1, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_BF16, 3, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_BF16, 4, MM_KIND_AMX, MM_KIND_AVX512},
    {MM_KCLASS_BF16, 4096, MM_KIND_AMX, MM_KIND_AVX512},
    {MM_KCLASS_INT8, 2, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_INT8, 3, MM_KIND_AMX, MM_KIND_AVX512},
    {MM_KCLASS_INT8_INT4, 1, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_INT8_INT4, 10, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_INT8_INT4, 11, MM_KIND_AMX, MM_KIND_AVX512},
    {MM_KCLASS_MXFP8, 1, MM_KIND_AMX_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP8, 3, MM_KIND_AMX_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP8, 4, MM_KIND_AMX_FEW, MM_KIND_AVX512},
    {MM_KCLASS_MXFP8, 16, MM_KIND_AMX_FEW, MM_KIND_AVX512},
    {MM_KCLASS_MXFP8, 17, MM_KIND_AMX, MM_KIND_AVX512},
    {MM_KCLASS_MXFP4, 2, MM_KIND_AMX_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP4, 8, MM_KIND_AMX_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP4, 9, MM_KIND_AMX_FEW, MM_KIND_AVX512},
    {MM_KCLASS_MXFP4, 64, MM_KIND_AMX, MM_KIND_AVX512},
    {MM_KCLASS_MXFP8_MXFP4, 3, MM_KIND_AMX_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_A16_FP8B, 4, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_A16_FP8B, 5, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_A16_UINT4, 8, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_A16_UINT4, 9, MM_KIND_AVX512, MM_KIND_AVX512},
};
/* Zen 4 / Zen 5 (no AMX, so the AMX columns only show that the rule never asks for it). */
static const expect_row zen[] = {
    {MM_KCLASS_BF16, 1, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_BF16, 64, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_INT8, 64, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_INT8_INT4, 1, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_INT8_INT4, 9, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_INT8_INT4, 10, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_MXFP8, 1, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP8, 8, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP8, 12, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP8, 13, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_MXFP8_MXFP4, 1, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP8_MXFP4, 12, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP8_MXFP4, 13, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_MXFP4, 1, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP4, 9, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP4, 4096, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_MXFP4, INT32_MAX, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_A16_FP8B, 1, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_A16_FP8B, 32, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_A16_FP8B, 33, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_A16_MXFP4, 16, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_A16_MXFP4, 17, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_A16_UINT4, 1, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_A16_UINT4, 10, MM_KIND_AVX512_FEW, MM_KIND_AVX512_FEW},
    {MM_KCLASS_A16_UINT4, 11, MM_KIND_AVX512, MM_KIND_AVX512},
    {MM_KCLASS_A16_UINT4, 64, MM_KIND_AVX512, MM_KIND_AVX512},
};

static void check_profile(const char *name, const expect_row *rows, size_t n, int amx) {
    const mm_cpu_profile *p = mm_cpu_profile_find(name);
    CHECK(p != NULL);
    if (!p) return;
    CHECK_EQ_INT(p->amx, amx);
    for (size_t i = 0; i < n; i++) {
        const mm_kernel_rule *r = &p->rules[rows[i].cls];
        mm_kernel_kind with = mm_kernel_rule_choose(r, amx ? ALL_KINDS : NO_AMX, rows[i].rows);
        mm_kernel_kind without = mm_kernel_rule_choose(r, NO_AMX, rows[i].rows);
        if (with != (amx ? rows[i].with_amx : rows[i].without_amx) || without != rows[i].without_amx)
            mm_test_report_fail(__FILE__, __LINE__, "profile %s, %s, %d rows: %s / %s, expected %s / %s",
                                name, mm_kernel_class_name(rows[i].cls), rows[i].rows,
                                mm_kernel_kind_name(with), mm_kernel_kind_name(without),
                                mm_kernel_kind_name(rows[i].with_amx),
                                mm_kernel_kind_name(rows[i].without_amx));
        else
            mm_test_passed++;
    }
}

/* "Many rows" (mm_gemm_kernel_select asks for INT64_MAX): MM_ROWS_ALL still means the few-rows kernel,
 * MM_ROWS_NEVER still means no general AMX kernel, beyond INT32_MAX too. */
static void check_sentinels(void) {
    const mm_cpu_profile *zen5 = mm_cpu_profile_find("zen5"), *spr = mm_cpu_profile_find("sapphire-rapids");
    CHECK(zen5 && spr);
    if (!zen5 || !spr) return;
    CHECK_EQ_INT(mm_kernel_rule_choose(&zen5->rules[MM_KCLASS_MXFP4], NO_AMX, INT64_MAX), MM_KIND_AVX512_FEW);
    CHECK_EQ_INT(mm_kernel_rule_choose(&zen5->rules[MM_KCLASS_MXFP8], NO_AMX, INT64_MAX), MM_KIND_AVX512);
    mm_kernel_rule never = spr->rules[MM_KCLASS_BF16];
    never.amx_min = MM_ROWS_NEVER;
    CHECK_EQ_INT(mm_kernel_rule_choose(&never, ALL_KINDS, INT64_MAX), MM_KIND_AVX512);
    CHECK_EQ_INT(mm_kernel_rule_choose(&spr->rules[MM_KCLASS_BF16], ALL_KINDS, INT64_MAX), MM_KIND_AMX);
}

static void check_match(const char *vendor, int family, int model, const char *want) {
    mm_cpu_id id = {{0}, family, model, "test"};
    snprintf(id.vendor, sizeof id.vendor, "%s", vendor);
    const char *got = mm_cpu_profile_match(&id)->name;
    if (strcmp(got, want) != 0)
        mm_test_report_fail(__FILE__, __LINE__, "%s family %#x model %#x: profile %s, expected %s", vendor,
                            family, model, got, want);
    else
        mm_test_passed++;
}

/* FNV-1a of a GEMM's output bits (pair, rows), with the registry's choice or a forced kernel. */
static uint64_t gemm_hash(mm_dtype a, mm_dtype w, int64_t rows, const mm_gemm_kernel *forced, mm_error *err) {
    gemm_case c;
    gemm_case_make(&c, a, w, rows, 300, 70, 0, 0, 4242 + (uint64_t)rows);
    mm_gemm_weight_desc desc = gemm_case_weights(&c);
    mm_gemm_packed_weights *pw = NULL;
    uint64_t h = 0;
    if (mm_gemm_pack_weights(&desc, &pw, err) == MM_OK) {
        float *out = calloc((size_t)(rows * 70), sizeof *out);
        mm_gemm_group g = gemm_case_group(&c, pw, out, 70);
        mm_gemm_options opts = {forced, NULL, NULL};
        if (mm_gemm_grouped(a, 1, &g, forced ? &opts : NULL, err) == MM_OK) {
            h = 1469598103934665603ull;
            for (int64_t i = 0; i < rows * 70; i++) h = (h ^ gemm_f32_bits(out[i])) * 1099511628211ull;
        }
        free(out);
    }
    mm_gemm_packed_free(pw);
    gemm_case_free(&c);
    return h;
}

static const struct {
    mm_dtype a, w;
} hashed[] = {{MM_DTYPE_I8, MM_DTYPE_I8},
              {MM_DTYPE_I8, MM_DTYPE_INT4},
              {MM_DTYPE_BF16, MM_DTYPE_BF16},
              {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN},
              {MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1}};
static const int64_t hashed_rows[] = {1, 3, 9, 20};

/* Child (MEGAMOE_CPU_PROFILE set by the parent): the registry's choices follow the profile's rule on this
 * CPU; prints the INT output hashes for the parent to compare. */
static int child(void) {
    const mm_gemm_kernel_config *cfg = mm_gemm_kernel_config_get();
    CHECK(cfg->profile_forced && cfg->cache_state == MM_TUNE_CACHE_FORCED_PROFILE);
    mm_dtype a, w;
    for (int i = 0; mm_gemm_kernel_pair(i, &a, &w); i++) {
        int cls = mm_kernel_class_of(a, w);
        if (cls < 0) continue;
        for (int64_t rows = 1; rows <= 70; rows++) {
            mm_kernel_kind kind = mm_gemm_kernel_rule_kind(&cfg->profile->rules[cls], a, w, rows);
            CHECK(mm_gemm_kernel_select_rows(a, w, rows) == mm_gemm_kernel_of_kind(kind, a, w));
        }
    }
    mm_error err;
    for (size_t p = 0; p < sizeof hashed / sizeof hashed[0]; p++)
        for (size_t r = 0; r < sizeof hashed_rows / sizeof hashed_rows[0]; r++) {
            int64_t rows = hashed_rows[r];
            uint64_t h = gemm_hash(hashed[p].a, hashed[p].w, rows, NULL, &err);
            CHECK(h != 0);
            const mm_gemm_kernel *k = mm_gemm_kernel_select_rows(hashed[p].a, hashed[p].w, rows);
            /* The results are those of the chosen kernel (float pairs differ between kernels within
             * their tolerance; test_gemm_kernels checks that). */
            CHECK_EQ_HEX(h, gemm_hash(hashed[p].a, hashed[p].w, rows, k, &err));
            if (mm_format_is_int_quant(hashed[p].w)) printf("hash %016llx\n", (unsigned long long)h);
        }
    return mm_test_finish("test_gemm_kernel_profiles (child)");
}

/* Runs this test with MEGAMOE_CPU_PROFILE=name; its stdout into out. The exit status. */
static int run_child(const char *self, const char *name, char *out, size_t size) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "MEGAMOE_CPU_PROFILE='%s' MEGAMOE_TUNE=0 '%s' child", name, self);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    char line[256];
    size_t len = 0;
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) /* the hash lines only (the child's summary line is not one) */
        if (strncmp(line, "hash ", 5) == 0 && len + strlen(line) < size)
            len += (size_t)snprintf(out + len, size - len, "%s", line);
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "child") == 0) return child();
    if (argc == 2 && strcmp(argv[1], "bogus") == 0) {
        /* MEGAMOE_CPU_PROFILE names no profile: the GEMM fails, naming it and the valid names. */
        mm_error err;
        mm_error_clear(&err);
        CHECK_EQ_INT(gemm_hash(MM_DTYPE_I8, MM_DTYPE_I8, 2, NULL, &err), 0);
        CHECK_EQ_INT(err.status, MM_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(err.message, "MEGAMOE_CPU_PROFILE = 'no-such-cpu'");
        CHECK_STR_CONTAINS(err.message,
                           "sapphire-rapids, emerald-rapids, granite-rapids, zen4, zen5, generic");
        return mm_test_finish("test_gemm_kernel_profiles (bogus)");
    }
    static const char *const amx_names[] = {"generic", "sapphire-rapids", "emerald-rapids", "granite-rapids"};
    for (size_t i = 0; i < 4; i++) check_profile(amx_names[i], xeon, sizeof xeon / sizeof xeon[0], 1);
    check_profile("zen5", zen, sizeof zen / sizeof zen[0], 0);
    check_sentinels();
    check_profile("zen4", zen, sizeof zen / sizeof zen[0], 0);
    check_match("AuthenticAMD", 0x1A, 0x02, "zen5");
    check_match("AuthenticAMD", 0x1A, 0x44, "zen5");
    check_match("AuthenticAMD", 0x19, 0x11, "zen4");
    check_match("AuthenticAMD", 0x19, 0x61, "zen4");
    check_match("AuthenticAMD", 0x19, 0xA0, "zen4");
    check_match("AuthenticAMD", 0x19, 0x01, "generic"); /* Zen 3 */
    check_match("GenuineIntel", 6, 0x8F, "sapphire-rapids");
    check_match("GenuineIntel", 6, 0xCF, "emerald-rapids");
    check_match("GenuineIntel", 6, 0xAD, "granite-rapids");
    check_match("GenuineIntel", 6, 0x6A, "generic"); /* Ice Lake server */
    check_match("", 0, 0, "generic");
    CHECK(mm_cpu_profile_find("no-such-cpu") == NULL);

    /* Every profile forced on this CPU: the choices follow it, INT results are the same bits. */
    static char first[4096], out[4096];
    int n_profiles = 0;
    for (const mm_cpu_profile *p; (p = mm_cpu_profile_at(n_profiles)) != NULL; n_profiles++) {
        int rc = run_child(argv[0], p->name, n_profiles ? out : first, sizeof out);
        if (rc != 0) mm_test_report_fail(__FILE__, __LINE__, "child with profile %s: exit %d", p->name, rc);
        CHECK(strlen(n_profiles ? out : first) == 2 * 4 * 22); /* 2 INT pairs x 4 row counts */
        if (n_profiles && strcmp(out, first) != 0)
            mm_test_report_fail(__FILE__, __LINE__, "profile %s: INT results differ from profile %s", p->name,
                                mm_cpu_profile_at(0)->name);
    }
    CHECK_EQ_INT(n_profiles, 6);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "MEGAMOE_CPU_PROFILE=no-such-cpu '%s' bogus", argv[0]);
    CHECK_EQ_INT(system(cmd), 0);
    return mm_test_finish("test_gemm_kernel_profiles");
}
