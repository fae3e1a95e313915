/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernel_registry.c: the registration lists of each ISA and the per-pair selection table.
 *
 * The lists live here, in a baseline-ISA file, because a registration function compiled with AVX-512
 * flags could itself contain AVX-512 instructions and fault on older CPUs. Off x86-64 those kernels are
 * not built (MM_X86_ONLY: NULL) and never chosen, since the CPU supports no level above MM_ISA_REF. */
#include "gemm/kernel_registry.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "format/format_table.h"
#include "gemm/kernels/kernels.h"
#include "gemm/tune_cache.h"
#include "megamoe/version.h"

typedef struct registration {
    mm_dtype a_dtype;
    mm_dtype w_dtype;
    mm_gemm_kernel kernel;
} registration;

#define REF(fn, label)                                                                                       \
    { label "_ref_4x32", MM_ISA_REF, MM_GEMM_REF_MR, fn, NULL, NULL, 0, NULL, 0, 0 }
#define AVX512(fn, label)                                                                                    \
    { label "_avx512_8x32", MM_ISA_AVX512, MM_GEMM_AVX512_MR, MM_X86_ONLY(fn), NULL, NULL, 0, NULL, 0, 1 }
/* INT on vpdpbusd: tiles of mr rows (the label says it), K blocks of kc (kernels.h: MM_GEMM_AVX512_INT_KC,
 * the whole K; INT8 x INT8 12 rows and K 2048). */
#define AVX512_INT(fn, label, mr, kc)                                                                        \
    { label, MM_ISA_AVX512, mr, MM_X86_ONLY(fn), NULL, NULL, kc, NULL, 0, 1 }
/* MX on BF16 dot products: rows decoded once per call, panels once per K block. */
#define AVX512_MX(prepare_panel, label)                                                                      \
    {                                                                                                        \
        label "_avx512_8x32", MM_ISA_AVX512, MM_GEMM_AVX512_MR, MM_X86_ONLY(mm_ukernel_mx_avx512),           \
            mm_gemm_mx_row_to_bf16_avx512, MM_X86_ONLY(prepare_panel), 0, NULL, 0, 0                         \
    }

/* Weight-only pairs: the caller's BF16 rows, panel blocks dequantized to BF16 (weight_only_avx512.c). */
#define AVX512_WEIGHT_ONLY(prepare_panel, label)                                                             \
    {                                                                                                        \
        label "_avx512_8x32", MM_ISA_AVX512, MM_GEMM_AVX512_MR,                                              \
            MM_X86_ONLY(mm_ukernel_bf16_prepared_avx512), NULL, MM_X86_ONLY(prepare_panel), 0, NULL, 0, 0    \
    }

/* AMX tiles pay off from a few rows on (INT8 from fewer than BF16, since the AMX kernels take long K
 * blocks, grouped.c); fewer rows stream weights faster through the AVX-512 kernels. Which rows take
 * which kernel is the CPU profile's or tune cache's choice (kernel_profiles.h; the crossovers measured on
 * an AMX Xeon: docs/gemm.md, 'AMX row thresholds'), not a property of the registrations. */
#define AMX(fn, label)                                                                                       \
    {                                                                                                        \
        label "_amx_32x32", MM_ISA_AMX, MM_GEMM_AMX_MR, MM_X86_ONLY(fn), NULL, NULL, MM_GEMM_AMX_KC, NULL,   \
            0, 0                                                                                             \
    }
#define AMX_MX(prepare_panel, label)                                                                         \
    {                                                                                                        \
        label "_amx_32x32", MM_ISA_AMX, MM_GEMM_AMX_MR, MM_X86_ONLY(mm_ukernel_mx_amx),                      \
            MM_X86_ONLY(mm_gemm_mx_row_to_bf16_vbmi), MM_X86_ONLY(prepare_panel), MM_GEMM_AMX_KC, NULL, 0, 0 \
    }

/* Every supported pair, reference first. The FP8 pairs cover the mixed E4M3/E5M2 cases that an
 * activation_out_dtype override produces (docs/mega_moe.md). */
static const registration registrations[] = {
    {MM_DTYPE_BF16, MM_DTYPE_BF16, REF(mm_ukernel_bf16_bf16_ref, "bf16xbf16")},
    {MM_DTYPE_I8, MM_DTYPE_I8, REF(mm_ukernel_i8_i8_ref, "i8xi8")},
    {MM_DTYPE_I8, MM_DTYPE_INT4, REF(mm_ukernel_i8_i4_ref, "i8xi4")},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, REF(mm_ukernel_fp8_fp8_ref, "e4m3xe4m3")},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2, REF(mm_ukernel_fp8_fp8_ref, "e5m2xe5m2")},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN, REF(mm_ukernel_fp8_fp8_ref, "e5m2xe4m3")},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, REF(mm_ukernel_fp8_fp8_ref, "e4m3xe5m2")},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, REF(mm_ukernel_fp8_fp4_ref, "e4m3xfp4")},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1, REF(mm_ukernel_fp8_fp4_ref, "e5m2xfp4")},
    {MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, REF(mm_ukernel_fp4_fp4_ref, "fp4xfp4")},
    {MM_DTYPE_BF16, MM_DTYPE_FP8_E4M3FN, REF(mm_ukernel_bf16_weight_only_ref, "bf16xe4m3b")},
    {MM_DTYPE_BF16, MM_DTYPE_FP4_E2M1, REF(mm_ukernel_bf16_weight_only_ref, "bf16xfp4")},
    {MM_DTYPE_BF16, MM_DTYPE_UINT4, REF(mm_ukernel_bf16_weight_only_ref, "bf16xuint4")},
    {MM_DTYPE_BF16, MM_DTYPE_BF16, AVX512(mm_ukernel_bf16_bf16_avx512, "bf16xbf16")},
    {MM_DTYPE_I8, MM_DTYPE_I8,
     AVX512_INT(mm_ukernel_i8_i8_avx512, "i8xi8_avx512_12x32", MM_GEMM_AVX512_I8_MR, MM_GEMM_AVX512_I8_KC)},
    {MM_DTYPE_I8, MM_DTYPE_INT4,
     AVX512_INT(mm_ukernel_i8_i4_avx512, "i8xi4_avx512_8x32", MM_GEMM_AVX512_MR, MM_GEMM_AVX512_INT_KC)},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, AVX512_MX(mm_prepare_panel_fp8_mx_avx512, "e4m3xe4m3")},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2, AVX512_MX(mm_prepare_panel_fp8_mx_avx512, "e5m2xe5m2")},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN, AVX512_MX(mm_prepare_panel_fp8_mx_avx512, "e5m2xe4m3")},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, AVX512_MX(mm_prepare_panel_fp8_mx_avx512, "e4m3xe5m2")},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, AVX512_MX(mm_prepare_panel_fp4_mx_avx512, "e4m3xfp4")},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1, AVX512_MX(mm_prepare_panel_fp4_mx_avx512, "e5m2xfp4")},
    {MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, AVX512_MX(mm_prepare_panel_fp4_mx_avx512, "fp4xfp4")},
    {MM_DTYPE_BF16, MM_DTYPE_FP8_E4M3FN, AVX512_WEIGHT_ONLY(mm_prepare_panel_fp8_block_avx512, "bf16xe4m3b")},
    {MM_DTYPE_BF16, MM_DTYPE_FP4_E2M1, AVX512_WEIGHT_ONLY(mm_prepare_panel_fp4_avx512, "bf16xfp4")},
    {MM_DTYPE_BF16, MM_DTYPE_UINT4, AVX512_WEIGHT_ONLY(mm_prepare_panel_uint4_avx512, "bf16xuint4")},
    {MM_DTYPE_BF16, MM_DTYPE_BF16, AMX(mm_ukernel_bf16_bf16_amx, "bf16xbf16")},
    {MM_DTYPE_I8,
     MM_DTYPE_I8,
     {"i8xi8_amx_32x32", MM_ISA_AMX, MM_GEMM_AMX_MR, MM_X86_ONLY(mm_ukernel_i8_i8_amx), NULL, NULL,
      MM_GEMM_AMX_INT_KC, NULL, 0, 0}},
    {MM_DTYPE_I8,
     MM_DTYPE_INT4,
     {"i8xi4_amx_32x32", MM_ISA_AMX, MM_GEMM_AMX_MR, MM_X86_ONLY(mm_ukernel_i8_i4_amx), NULL,
      MM_X86_ONLY(mm_prepare_panel_i4_amx), MM_GEMM_AMX_INT_KC, NULL, 0, 0}},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, AMX_MX(mm_prepare_panel_fp8_vbmi, "e4m3xe4m3")},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2, AMX_MX(mm_prepare_panel_fp8_vbmi, "e5m2xe5m2")},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN, AMX_MX(mm_prepare_panel_fp8_vbmi, "e5m2xe4m3")},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, AMX_MX(mm_prepare_panel_fp8_vbmi, "e4m3xe5m2")},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, AMX_MX(mm_prepare_panel_fp4_vbmi, "e4m3xfp4")},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1, AMX_MX(mm_prepare_panel_fp4_vbmi, "e5m2xfp4")},
    {MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, AMX_MX(mm_prepare_panel_fp4_vbmi, "fp4xfp4")},
};
#define N_REGISTRATIONS (sizeof registrations / sizeof registrations[0])

/* Few-rows kernels: chosen for small groups before the ISA's general kernel, up to the row count of the
 * CPU profile or tune cache (kernel_profiles.h). A decode-sized group streams its weights once; the MX
 * one looks codes up in registers instead of writing a decoded block (mx_small_avx512.c; it also needs
 * AVX512_VBMI), so do the weight-only ones (weight_only_small_avx512.c), and the INT8 x INT4 one feeds the
 * raw panel to vpdpbusd (i4_small_avx512.c). Measured with `megamoe bench ffn`. */
typedef struct few_rows_registration {
    mm_dtype a_dtype;
    mm_dtype w_dtype;
    mm_gemm_kernel kernel;
    int needs_vbmi; /* beyond the kernel's ISA level */
} few_rows_registration;

#define AVX512_MX_SMALL(label)                                                                               \
    {                                                                                                        \
        label "_avx512_small_8x32", MM_ISA_AVX512, MM_GEMM_MX_SMALL_MR,                                      \
            MM_X86_ONLY(mm_ukernel_mx_small_avx512), mm_gemm_mx_row_to_bf16_avx512, NULL,                    \
            MM_GEMM_MX_SMALL_KC, NULL, 0, 0                                                                  \
    }
/* FP8 x FP4 with few rows: FP4 codes to BF16 by word permutes, rows prepared in quad order. */
#define AVX512_FP8_FP4_SMALL(label)                                                                          \
    {                                                                                                        \
        label "_avx512_small_4x32", MM_ISA_AVX512, MM_GEMM_FP8_FP4_SMALL_MR,                                 \
            MM_X86_ONLY(mm_ukernel_fp8_fp4_small_avx512), MM_X86_ONLY(mm_gemm_fp8_fp4_prepare_row), NULL,    \
            MM_GEMM_FP8_FP4_SMALL_KC, MM_X86_ONLY(mm_gemm_fp8_fp4_prepared_row_bytes), 0, 0                  \
    }
/* MX on AMX with few rows: K blocks decoded straight into the B tiles (mx_amx_avx512.c), one tile of up
 * to 16 rows per panel; the prepared-block kernel above takes the larger groups. */
#define AMX_MX_FEW(label)                                                                                    \
    {                                                                                                        \
        label "_amx_few_16x32", MM_ISA_AMX, MM_GEMM_MX_FEW_AMX_MR, MM_X86_ONLY(mm_ukernel_mx_few_amx),       \
            MM_X86_ONLY(mm_gemm_mx_row_to_bf16_vbmi), NULL, MM_GEMM_MX_FEW_AMX_KC, NULL, 0, 0                \
    }
/* Weight-only with few rows: each K pair decoded in registers into vdpbf16ps, the caller's BF16 rows;
 * FP8 and FP4 take two panels per call for 1-2 rows (kernel.h: pairs_panels; UINT4, bound by its decode
 * instructions, gained nothing: docs/gemm.md). */
#define AVX512_WEIGHT_ONLY_SMALL(fn, label, pairs_panels)                                                    \
    {                                                                                                        \
        label "_avx512_small_8x32", MM_ISA_AVX512, MM_GEMM_WO_SMALL_MR, MM_X86_ONLY(fn), NULL, NULL,         \
            MM_GEMM_WO_SMALL_KC, NULL, pairs_panels, 0                                                       \
    }
static const few_rows_registration few_rows_registrations[] = {
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, AVX512_MX_SMALL("e4m3xe4m3"), 1},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2, AVX512_MX_SMALL("e5m2xe5m2"), 1},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN, AVX512_MX_SMALL("e5m2xe4m3"), 1},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, AVX512_MX_SMALL("e4m3xe5m2"), 1},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, AVX512_FP8_FP4_SMALL("e4m3xfp4"), 0},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1, AVX512_FP8_FP4_SMALL("e5m2xfp4"), 0},
    {MM_DTYPE_FP4_E2M1,
     MM_DTYPE_FP4_E2M1,
     {"fp4xfp4_avx512_small_int_8x32", MM_ISA_AVX512, MM_GEMM_FP4_SMALL_MR,
      MM_X86_ONLY(mm_ukernel_fp4_fp4_small_avx512), MM_X86_ONLY(mm_gemm_fp4_int_prepare_row), NULL,
      MM_GEMM_FP4_SMALL_KC, MM_X86_ONLY(mm_gemm_fp4_int_prepared_row_bytes), 0, 0},
     0},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, AMX_MX_FEW("e4m3xe4m3"), 1},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2, AMX_MX_FEW("e5m2xe5m2"), 1},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN, AMX_MX_FEW("e5m2xe4m3"), 1},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, AMX_MX_FEW("e4m3xe5m2"), 1},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, AMX_MX_FEW("e4m3xfp4"), 1},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1, AMX_MX_FEW("e5m2xfp4"), 1},
    {MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, AMX_MX_FEW("fp4xfp4"), 1},
    {MM_DTYPE_I8,
     MM_DTYPE_INT4,
     {"i8xi4_avx512_small_8x32", MM_ISA_AVX512, MM_GEMM_I4_SMALL_MR,
      MM_X86_ONLY(mm_ukernel_i8_i4_small_avx512), NULL, NULL, MM_GEMM_AVX512_INT_KC, NULL, 0, 0},
     0},
    {MM_DTYPE_BF16, MM_DTYPE_FP8_E4M3FN,
     AVX512_WEIGHT_ONLY_SMALL(mm_ukernel_bf16_fp8_block_small_avx512, "bf16xe4m3b",
                              MM_GEMM_WO_PAIRS_MAX_ROWS),
     0},
    {MM_DTYPE_BF16, MM_DTYPE_FP4_E2M1,
     AVX512_WEIGHT_ONLY_SMALL(mm_ukernel_bf16_fp4_small_avx512, "bf16xfp4", MM_GEMM_WO_PAIRS_MAX_ROWS), 0},
    {MM_DTYPE_BF16, MM_DTYPE_UINT4,
     AVX512_WEIGHT_ONLY_SMALL(mm_ukernel_bf16_uint4_small_avx512, "bf16xuint4", 0), 0},
};
#define N_FEW_ROWS (sizeof few_rows_registrations / sizeof few_rows_registrations[0])

static pthread_once_t table_once = PTHREAD_ONCE_INIT;
/* by_isa[isa][a][w]: the kernel of that ISA for the pair, only for ISAs the process may use. */
static const mm_gemm_kernel *by_isa[MM_ISA_COUNT][MM_DTYPE_COUNT][MM_DTYPE_COUNT];
static const few_rows_registration *few_by_isa[MM_ISA_COUNT][MM_DTYPE_COUNT][MM_DTYPE_COUNT];

/* The AMX MX kernels' decoders (mx_decode_avx512.h) use vpermb / vpermt2b: AVX512_VBMI, which every
 * AMX CPU so far has, but the ISA level does not imply it; without it MX stays on AVX-512. */
static int registration_usable(const registration *r, mm_isa allowed, int vbmi) {
    if (r->kernel.isa > allowed) return 0;
    return vbmi || !(r->kernel.isa == MM_ISA_AMX && mm_format_is_mx(r->w_dtype));
}

static mm_gemm_kernel_config config;

static void build_config(void);

static void build_table(void) {
    mm_isa allowed = mm_cpu_isa();
    int vbmi = mm_cpu_has_avx512_vbmi();
    for (size_t i = 0; i < N_REGISTRATIONS; i++) {
        const registration *r = &registrations[i];
        if (registration_usable(r, allowed, vbmi)) by_isa[r->kernel.isa][r->a_dtype][r->w_dtype] = &r->kernel;
    }
    for (size_t i = 0; i < N_FEW_ROWS; i++) {
        const few_rows_registration *r = &few_rows_registrations[i];
        if (r->kernel.isa <= allowed && (vbmi || !r->needs_vbmi))
            few_by_isa[r->kernel.isa][r->a_dtype][r->w_dtype] = r;
    }
    build_config();
}

static int dtype_in_range(mm_dtype d) {
    return d > MM_DTYPE_INVALID && d < MM_DTYPE_COUNT;
}

static const mm_gemm_kernel *kernel_of_kind(mm_kernel_kind kind, mm_dtype a, mm_dtype w) {
    switch (kind) {
    case MM_KIND_REF: return by_isa[MM_ISA_REF][a][w];
    case MM_KIND_AVX512: return by_isa[MM_ISA_AVX512][a][w];
    case MM_KIND_AMX: return by_isa[MM_ISA_AMX][a][w];
    case MM_KIND_AVX512_FEW:
        return few_by_isa[MM_ISA_AVX512][a][w] ? &few_by_isa[MM_ISA_AVX512][a][w]->kernel : NULL;
    case MM_KIND_AMX_FEW: return few_by_isa[MM_ISA_AMX][a][w] ? &few_by_isa[MM_ISA_AMX][a][w]->kernel : NULL;
    case MM_KIND_COUNT: break;
    }
    return NULL;
}

static unsigned kinds_of(mm_dtype a, mm_dtype w) {
    unsigned mask = 0;
    for (int k = 0; k < MM_KIND_COUNT; k++)
        if (kernel_of_kind((mm_kernel_kind)k, a, w)) mask |= 1u << k;
    return mask;
}

/* The kinds every pair of a class has here (a cache naming another one is ignored for that class). */
static unsigned class_kinds(int cls) {
    unsigned mask = ~0u;
    mm_dtype a, w;
    for (int i = 0; mm_gemm_kernel_pair(i, &a, &w); i++)
        if (mm_kernel_class_of(a, w) == cls) mask &= kinds_of(a, w);
    return mask;
}

/* Reads the tune cache into config (rules of the classes it has, whose kinds all exist here). */
static void read_cache(void) {
    if (!mm_tune_cache_enabled()) {
        config.cache_state = MM_TUNE_CACHE_OFF;
        return;
    }
    if (mm_tune_cache_path(config.cache_path, sizeof config.cache_path) != 0) {
        config.cache_state = MM_TUNE_CACHE_NO_PATH;
        return;
    }
    char key[160];
    mm_tune_cache_cpu_key(key, sizeof key);
    mm_kernel_rule rules[MM_KCLASS_COUNT];
    int have[MM_KCLASS_COUNT];
    int rc = mm_tune_cache_read(config.cache_path, key, mm_version(), rules, have, config.cache_note,
                                sizeof config.cache_note);
    config.cache_state = rc == 1 ? MM_TUNE_CACHE_ABSENT : rc < 0 ? MM_TUNE_CACHE_IGNORED : MM_TUNE_CACHE_USED;
    if (rc != 0) return;
    /* The classes the cache steers, and those whose entries name a kernel this process cannot run (a
     * capped MEGAMOE_ISA, a build without AMX): the second are ignored one by one, and a cache with no
     * usable entry is reported as ignored, not as used. */
    char used[sizeof config.cache_note] = "", lacking[sizeof config.cache_note] = "";
    size_t used_len = 0, lacking_len = 0;
    for (int c = 0; c < MM_KCLASS_COUNT; c++) {
        if (!have[c]) continue;
        unsigned kinds = class_kinds(c);
        int usable = 1;
        for (int s = 0; s < rules[c].n_steps; s++) usable &= (kinds >> rules[c].steps[s].kind) & 1u;
        char *list = usable ? used : lacking;
        size_t *len = usable ? &used_len : &lacking_len;
        int n = snprintf(list + *len, sizeof used - *len, "%s%s", *len ? ", " : "", mm_kernel_class_name(c));
        if (n > 0 && (size_t)n < sizeof used - *len) *len += (size_t)n;
        if (!usable) continue;
        config.rules[c] = rules[c];
        config.from_cache[c] = 1;
    }
    if (!used_len) {
        config.cache_state = MM_TUNE_CACHE_IGNORED;
        snprintf(config.cache_note, sizeof config.cache_note, "%s %.200s",
                 lacking_len ? "its entries name kernels this process lacks:" : "it has no entry",
                 lacking_len ? lacking : "");
    } else if (lacking_len) {
        snprintf(config.cache_note, sizeof config.cache_note,
                 "%.120s (not for %.80s: names a kernel this process lacks)", used, lacking);
    } else {
        snprintf(config.cache_note, sizeof config.cache_note, "%s", used);
    }
}

static void build_config(void) {
    const char *forced = getenv("MEGAMOE_CPU_PROFILE");
    config.profile = mm_cpu_profile_match(mm_cpu_identity());
    if (forced && forced[0]) {
        const mm_cpu_profile *p = mm_cpu_profile_find(forced);
        if (p) {
            config.profile = p;
            config.profile_forced = 1;
        } else {
            char names[256];
            mm_cpu_profile_names(names, sizeof names);
            snprintf(config.error, sizeof config.error,
                     "MEGAMOE_CPU_PROFILE = '%.40s' is not a CPU profile (one of: %s)", forced, names);
        }
    }
    memcpy(config.rules, config.profile->rules, sizeof config.rules);
    if (config.profile_forced)
        config.cache_state = MM_TUNE_CACHE_FORCED_PROFILE;
    else
        read_cache();
}

const mm_gemm_kernel_config *mm_gemm_kernel_config_get(void) {
    pthread_once(&table_once, build_table);
    return &config;
}

mm_status mm_gemm_kernel_config_check(mm_error *err) {
    pthread_once(&table_once, build_table);
    return config.error[0] ? mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s", config.error) : MM_OK;
}

unsigned mm_gemm_kernel_kinds(mm_dtype a_dtype, mm_dtype w_dtype) {
    if (!dtype_in_range(a_dtype) || !dtype_in_range(w_dtype)) return 0;
    pthread_once(&table_once, build_table);
    return kinds_of(a_dtype, w_dtype);
}

const mm_gemm_kernel *mm_gemm_kernel_of_kind(mm_kernel_kind kind, mm_dtype a_dtype, mm_dtype w_dtype) {
    if (!dtype_in_range(a_dtype) || !dtype_in_range(w_dtype)) return NULL;
    pthread_once(&table_once, build_table);
    return kernel_of_kind(kind, a_dtype, w_dtype);
}

/* Pairs without a class (one kernel per ISA): the highest. */
static const mm_kernel_rule highest_rule = {0, 0, 0, 0, {{0, MM_KIND_REF}}};

mm_kernel_kind mm_gemm_kernel_rule_kind(const mm_kernel_rule *rule, mm_dtype a_dtype, mm_dtype w_dtype,
                                        int64_t rows) {
    if (!dtype_in_range(a_dtype) || !dtype_in_range(w_dtype)) return MM_KIND_COUNT;
    pthread_once(&table_once, build_table);
    unsigned kinds = kinds_of(a_dtype, w_dtype);
    if (!config.profile->amx) kinds &= ~((1u << MM_KIND_AMX) | (1u << MM_KIND_AMX_FEW));
    return mm_kernel_rule_choose(rule ? rule : &highest_rule, kinds, rows);
}

const mm_gemm_kernel *mm_gemm_kernel_select_rows(mm_dtype a_dtype, mm_dtype w_dtype, int64_t rows) {
    if (!dtype_in_range(a_dtype) || !dtype_in_range(w_dtype)) return NULL;
    int cls = mm_kernel_class_of(a_dtype, w_dtype);
    mm_kernel_kind kind =
        mm_gemm_kernel_rule_kind(cls >= 0 ? &config.rules[cls] : NULL, a_dtype, w_dtype, rows);
    return kind == MM_KIND_COUNT ? NULL : kernel_of_kind(kind, a_dtype, w_dtype);
}

const mm_gemm_kernel *mm_gemm_kernel_select(mm_dtype a_dtype, mm_dtype w_dtype) {
    return mm_gemm_kernel_select_rows(a_dtype, w_dtype, INT64_MAX);
}

const mm_gemm_kernel *mm_gemm_kernel_lookup(mm_isa isa, mm_dtype a_dtype, mm_dtype w_dtype) {
    if (!mm_cpu_supports(isa)) return NULL;
    for (size_t i = 0; i < N_REGISTRATIONS; i++) {
        const registration *r = &registrations[i];
        if (r->kernel.isa == isa && r->a_dtype == a_dtype && r->w_dtype == w_dtype)
            return registration_usable(r, isa, mm_cpu_has_avx512_vbmi()) ? &r->kernel : NULL;
    }
    return NULL;
}

const mm_gemm_kernel *mm_gemm_kernel_lookup_few_rows(mm_isa isa, mm_dtype a_dtype, mm_dtype w_dtype) {
    if (!dtype_in_range(a_dtype) || !dtype_in_range(w_dtype) || !mm_cpu_supports(isa)) return NULL;
    int vbmi = mm_cpu_has_avx512_vbmi();
    for (size_t i = 0; i < N_FEW_ROWS; i++) {
        const few_rows_registration *r = &few_rows_registrations[i];
        if (r->kernel.isa == isa && r->a_dtype == a_dtype && r->w_dtype == w_dtype &&
            (vbmi || !r->needs_vbmi))
            return &r->kernel;
    }
    return NULL;
}

int mm_gemm_kernel_pair(int i, mm_dtype *a_dtype, mm_dtype *w_dtype) {
    int n = 0;
    for (size_t r = 0; r < N_REGISTRATIONS; r++) {
        if (registrations[r].kernel.isa != MM_ISA_REF) continue;
        if (n++ == i) {
            *a_dtype = registrations[r].a_dtype;
            *w_dtype = registrations[r].w_dtype;
            return 1;
        }
    }
    return 0;
}
