/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernel_profiles.c: the table of per-CPU kernel-choice profiles, the CPU matching and the choice
 * rule (gemm/kernel_profiles.h). A row's numbers come from `megamoe bench ffn` / `megamoe tune` on that
 * CPU; where a CPU was not measured, its row says which measured row it copies. */
#include "gemm/kernel_profiles.h"

#include <stdio.h>
#include <string.h>

#include "format/format_table.h"

static const char *const class_names[MM_KCLASS_COUNT] = {
    "bf16", "int8", "int8xint4", "mxfp8", "mxfp8xmxfp4", "mxfp4", "a16-fp8b", "a16-mxfp4", "a16-uint4"};
static const char *const kind_names[MM_KIND_COUNT] = {"ref", "avx512", "avx512-few", "amx", "amx-few"};

int mm_kernel_class_of(mm_dtype a_dtype, mm_dtype w_dtype) {
    if (a_dtype == MM_DTYPE_BF16) {
        switch (w_dtype) {
        case MM_DTYPE_BF16: return MM_KCLASS_BF16;
        case MM_DTYPE_FP8_E4M3FN: return MM_KCLASS_A16_FP8B;
        case MM_DTYPE_FP4_E2M1: return MM_KCLASS_A16_MXFP4;
        case MM_DTYPE_UINT4: return MM_KCLASS_A16_UINT4;
        default: return -1;
        }
    }
    if (a_dtype == MM_DTYPE_I8) return w_dtype == MM_DTYPE_I8 ? MM_KCLASS_INT8 : MM_KCLASS_INT8_INT4;
    if (w_dtype == MM_DTYPE_FP4_E2M1)
        return a_dtype == MM_DTYPE_FP4_E2M1 ? MM_KCLASS_MXFP4 : MM_KCLASS_MXFP8_MXFP4;
    return mm_format_is_mx(w_dtype) ? MM_KCLASS_MXFP8 : -1;
}

const char *mm_kernel_class_name(int cls) {
    return cls >= 0 && cls < MM_KCLASS_COUNT ? class_names[cls] : "?";
}

/* The index of name in names[0..n), or -1. */
static int find_name(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

int mm_kernel_class_parse(const char *name) {
    return find_name(class_names, MM_KCLASS_COUNT, name);
}

const char *mm_kernel_kind_name(int kind) {
    return kind >= 0 && kind < MM_KIND_COUNT ? kind_names[kind] : "?";
}

int mm_kernel_kind_parse(const char *name) {
    return find_name(kind_names, MM_KIND_COUNT, name);
}

static int has(unsigned available, mm_kernel_kind kind) {
    return (available >> kind) & 1u;
}

mm_kernel_kind mm_kernel_rule_choose(const mm_kernel_rule *r, unsigned available, int64_t rows) {
    if (r->n_steps > 0) {
        mm_kernel_kind kind = r->steps[0].kind;
        for (int i = 1; i < r->n_steps && r->steps[i].rows <= rows; i++) kind = r->steps[i].kind;
        if (has(available, kind)) return kind;
    }
    if (has(available, MM_KIND_AMX_FEW) && rows <= r->amx_few_max) return MM_KIND_AMX_FEW;
    /* The two sentinels hold for any row count, also beyond INT32_MAX (mm_gemm_kernel_select asks for
     * INT64_MAX rows). */
    if (has(available, MM_KIND_AMX) && r->amx_min != MM_ROWS_NEVER && rows >= r->amx_min) return MM_KIND_AMX;
    if (has(available, MM_KIND_AVX512_FEW) && (r->avx512_few_max == MM_ROWS_ALL || rows <= r->avx512_few_max))
        return MM_KIND_AVX512_FEW;
    if (has(available, MM_KIND_AVX512)) return MM_KIND_AVX512;
    return has(available, MM_KIND_REF) ? MM_KIND_REF : MM_KIND_COUNT;
}

/* Rules: {avx512_few_max, amx_few_max, amx_min}. The few-rows kernels exist for INT8 x INT4 (AVX-512),
 * the MX classes (both ISAs) and the weight-only classes (AVX-512; they have no AMX kernel); a number for
 * a kernel that does not exist is never used. */
#define RULE(avx512_few, amx_few, amx_min)                                                                   \
    {                                                                                                        \
        avx512_few, amx_few, amx_min, 0, {                                                                   \
            { 0, MM_KIND_REF }                                                                               \
        }                                                                                                    \
    }
/* The weight-only classes (a16-fp8b, a16-mxfp4, a16-uint4): the few-rows kernel up to the crossovers
 * measured on Zen 5 before its FP8 byte tables (docs/gemm.md, 'Weight-only formats at decode'; not
 * measured elsewhere), the prepared-block kernel above; there is no AMX kernel. */
#define WEIGHT_ONLY_RULES                                                                                    \
    RULE(MM_WO_SMALL_MAX_ROWS_FP8B, 0, MM_ROWS_NEVER), RULE(MM_WO_SMALL_MAX_ROWS, 0, MM_ROWS_NEVER),         \
        RULE(MM_WO_SMALL_MAX_ROWS, 0, MM_ROWS_NEVER)
/* Zen 5 (Zen 4 copies it, not measured there): as measured with the FP8 byte tables and the fused UINT4
 * decode (kernel_profiles.h). */
#define ZEN5_WEIGHT_ONLY_RULES                                                                               \
    RULE(MM_WO_SMALL_MAX_ROWS_FP8B_ZEN5, 0, MM_ROWS_NEVER),                                                  \
        RULE(MM_WO_SMALL_MAX_ROWS_FP4_ZEN5, 0, MM_ROWS_NEVER),                                               \
        RULE(MM_WO_SMALL_MAX_ROWS_UINT4_ZEN5, 0, MM_ROWS_NEVER)
/* The thresholds measured on an AMX Xeon (docs/gemm.md, 'AMX row thresholds'). */
#define XEON_AMX_RULES                                                                                       \
    {                                                                                                        \
        RULE(0, 0, MM_AMX_MIN_ROWS_BF16), RULE(0, 0, MM_AMX_MIN_ROWS_INT8),                                  \
            RULE(MM_I4_SMALL_MAX_ROWS, 0, MM_I4_SMALL_MAX_ROWS + 1),                                         \
            RULE(MM_MX_SMALL_MAX_ROWS, MM_MX_FEW_AMX_MAX_ROWS, 0),                                           \
            RULE(MM_MX_SMALL_MAX_ROWS, MM_MX_FEW_AMX_MAX_ROWS, 0),                                           \
            RULE(MM_MX_FP4_SMALL_MAX_ROWS, MM_MX_FEW_AMX_MAX_ROWS, 0), WEIGHT_ONLY_RULES                     \
    }
/* Zen 5 (measured on an EPYC, family 0x1A, with `megamoe tune`, `megamoe bench ffn` and single GEMMs:
 * docs/gemm.md, 'CPU profiles and the tune cache', 'MX few-rows kernels on Zen 5' and 'Row thresholds
 * re-measured on Zen 5', 'Few-rows thresholds after adjacent panels'): no AMX; INT8 x INT4's few-rows
 * kernel up to 9 rows; the FP8-activation MX few-rows kernels faster than the general one up to 12 rows
 * (FP8 and FP4 weights); MXFP4 x MXFP4's integer kernel faster at every row count measured (1..256); the
 * weight-only few-rows kernels up to 32 (a16-fp8b), 16 (a16-mxfp4) and 10 rows (a16-uint4). */
#define ZEN5_RULES                                                                                           \
    {                                                                                                        \
        RULE(0, 0, MM_ROWS_NEVER), RULE(0, 0, MM_ROWS_NEVER),                                                \
            RULE(MM_I4_SMALL_MAX_ROWS_ZEN5, 0, MM_ROWS_NEVER),                                               \
            RULE(MM_MX_FP8_SMALL_MAX_ROWS_ZEN5, 0, MM_ROWS_NEVER),                                           \
            RULE(MM_MX_SMALL_MAX_ROWS_ZEN5, 0, MM_ROWS_NEVER), RULE(MM_ROWS_ALL, 0, MM_ROWS_NEVER),          \
            ZEN5_WEIGHT_ONLY_RULES                                                                           \
    }

typedef struct model_range {
    int lo, hi;
} model_range;

typedef struct profile_row {
    mm_cpu_profile p;
    model_range more[2]; /* further model ranges of the same family (hi < lo: none) */
} profile_row;

static const profile_row profiles[] = {
    {{"sapphire-rapids", "Intel Xeon 4th gen (AMX); the measured AMX Xeon thresholds", "GenuineIntel", 6,
      0x8F, 0x8F, 1, XEON_AMX_RULES},
     {{1, 0}, {1, 0}}},
    {{"emerald-rapids", "Intel Xeon 5th gen (AMX); not measured, copies sapphire-rapids", "GenuineIntel", 6,
      0xCF, 0xCF, 1, XEON_AMX_RULES},
     {{1, 0}, {1, 0}}},
    {{"granite-rapids", "Intel Xeon 6 P-core (AMX); not measured, copies sapphire-rapids", "GenuineIntel", 6,
      0xAD, 0xAE, 1, XEON_AMX_RULES},
     {{1, 0}, {1, 0}}},
    {{"zen4", "AMD Zen 4 (Genoa, Bergamo, Raphael, Phoenix); not measured, copies zen5", "AuthenticAMD", 0x19,
      0x10, 0x1F, 0, ZEN5_RULES},
     {{0x60, 0x7F}, {0xA0, 0xAF}}},
    {{"zen5", "AMD Zen 5 (Turin, Granite Ridge, Strix); measured on an EPYC", "AuthenticAMD", 0x1A, 0x00,
      0xFF, 0, ZEN5_RULES},
     {{1, 0}, {1, 0}}},
    {{"generic", "any other CPU: the measured AMX Xeon thresholds", NULL, 0, 0, 0, 1, XEON_AMX_RULES},
     {{1, 0}, {1, 0}}},
};
#define N_PROFILES ((int)(sizeof profiles / sizeof profiles[0]))

const mm_cpu_profile *mm_cpu_profile_at(int i) {
    return i >= 0 && i < N_PROFILES ? &profiles[i].p : NULL;
}

const mm_cpu_profile *mm_cpu_profile_find(const char *name) {
    for (int i = 0; i < N_PROFILES; i++)
        if (strcmp(name, profiles[i].p.name) == 0) return &profiles[i].p;
    return NULL;
}

static int in_range(int model, int lo, int hi) {
    return model >= lo && model <= hi;
}

const mm_cpu_profile *mm_cpu_profile_match(const mm_cpu_id *id) {
    for (int i = 0; i < N_PROFILES; i++) {
        const profile_row *r = &profiles[i];
        if (!r->p.vendor) continue;
        if (strcmp(id->vendor, r->p.vendor) != 0 || id->family != r->p.family) continue;
        if (in_range(id->model, r->p.model_lo, r->p.model_hi) ||
            in_range(id->model, r->more[0].lo, r->more[0].hi) ||
            in_range(id->model, r->more[1].lo, r->more[1].hi))
            return &r->p;
    }
    return &profiles[N_PROFILES - 1].p;
}

void mm_cpu_profile_names(char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_PROFILES && len < size; i++) {
        int n = snprintf(buf + len, size - len, "%s%s", i ? ", " : "", profiles[i].p.name);
        if (n < 0) break;
        len += (size_t)n;
    }
}
