/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernel_profiles.h: per-CPU kernel-choice parameters (profiles, as data) and the rule that turns
 * them, or a tune cache's measured steps (gemm/tune_cache.h), into a kernel kind for a group of rows.
 *
 * The registry (kernel_registry.c) has up to five kernels per format pair on x86-64: the reference, the
 * general AVX-512 kernel, a few-rows AVX-512 kernel, the general AMX kernel and a few-rows AMX kernel.
 * Which one is fastest for a group of `rows` rows depends on the microarchitecture (on Zen 5 the
 * few-rows MX kernel's byte permutes are slow; on an AMX Xeon it beats the general kernel): a profile
 * holds, per format class, the row thresholds between them, and the CPU's vendor / family / model
 * select the profile once per process (MEGAMOE_CPU_PROFILE forces one). Everything here is pure data
 * and pure functions, so tests check every profile's choices without its CPU. */
#ifndef MEGAMOE_GEMM_KERNEL_PROFILES_H
#define MEGAMOE_GEMM_KERNEL_PROFILES_H

#include <stddef.h>
#include <stdint.h>

#include "core/cpu.h"
#include "megamoe/dtype.h"

/* The generic (AMX Xeon) crossovers, measured with `megamoe bench ffn` (docs/gemm.md, 'AMX row
 * thresholds'); the kernel registrations name them too. */
#define MM_AMX_MIN_ROWS_BF16 4
#define MM_AMX_MIN_ROWS_INT8 3
#define MM_I4_SMALL_MAX_ROWS 10
/* Zen 5, measured the same way: INT8 x INT4's few-rows kernel even with the general one at 9 rows and
 * slower from 10, since the general kernel's tasks take adjacent panels (docs/gemm.md, 'Few-rows
 * thresholds after adjacent panels'; before, the few-rows kernel was faster up to 12). */
#define MM_I4_SMALL_MAX_ROWS_ZEN5 9
#define MM_MX_SMALL_MAX_ROWS      3
/* MXFP4 x MXFP4's few-rows kernel (fp4_int_small_avx512.c, integer block sums): one 8-row tile, where
 * it reads each weight once; on Zen 5 it beats the general kernel at every row count (measured:
 * docs/gemm.md, 'MX few-rows kernels on Zen 5'), so that profile gives it every group (MM_ROWS_ALL). */
#define MM_MX_FP4_SMALL_MAX_ROWS 8
/* The MX few-rows kernels with FP8 activations on Zen 5: FP8 x FP4 (fp8_fp4_small_avx512.c, 4-row
 * tiles) faster than the general kernel to 12 rows and even at 16 (docs/gemm.md, 'Few-rows thresholds
 * after adjacent panels'; 8 rows before, 'MX few-rows kernels on Zen 5'); FP8 x FP8 (mx_small_avx512.c,
 * 8-row tiles) faster to 12 rows, even at 16 and slower at 24 (docs/gemm.md, 'FP8 x FP8 in 8-row
 * tiles'). */
#define MM_MX_SMALL_MAX_ROWS_ZEN5     12
#define MM_MX_FP8_SMALL_MAX_ROWS_ZEN5 12
#define MM_MX_FEW_AMX_MAX_ROWS        16
/* The weight-only pairs' few-rows kernels (weight_only_small_avx512.c): at most one 8-row tile (where
 * they decode each weight once), FP8 to 4 rows, beyond which its decode and 16 vdpbf16ps per pair are
 * slower than the prepared-block kernel (measured on Zen 5: docs/gemm.md, 'Weight-only formats at
 * decode'). */
#define MM_WO_SMALL_MAX_ROWS      8
#define MM_WO_SMALL_MAX_ROWS_FP8B 4
/* On Zen 5 (AVX512_VBMI: FP8 blocks with one scale per panel decode by byte tables, and MX FP4 decodes
 * without its F32 scale stream), the few-rows kernels of a16-fp8b and a16-mxfp4 stay faster than the
 * prepared-block kernel beyond one tile: to 32 and 16 rows (measured: docs/gemm.md, 'Weight-only formats
 * at decode'). UINT4: MM_WO_SMALL_MAX_ROWS_UINT4_ZEN5 below. */
#define MM_WO_SMALL_MAX_ROWS_FP8B_ZEN5 32
#define MM_WO_SMALL_MAX_ROWS_FP4_ZEN5  16
/* Zen 5, `bench ffn` H 7168 with both kernels forced, two runs (docs/gemm.md, 'Row thresholds
 * re-measured on Zen 5'): a16-uint4's few-rows kernel 3-5 % faster at 10 rows, even or slower from 12. */
#define MM_WO_SMALL_MAX_ROWS_UINT4_ZEN5 10
/* amx_min of a class that never takes the general AMX kernel. */
#define MM_ROWS_NEVER INT32_MAX
/* avx512_few_max of a class whose few-rows kernel takes groups of any size. */
#define MM_ROWS_ALL INT32_MAX

/* Format classes: the pairs whose kernels share a structure (and so a crossover). */
typedef enum mm_kernel_class {
    MM_KCLASS_BF16,        /* bf16 x bf16 */
    MM_KCLASS_INT8,        /* int8 x int8 */
    MM_KCLASS_INT8_INT4,   /* int8 x int4 */
    MM_KCLASS_MXFP8,       /* FP8 x FP8 (E4M3 / E5M2, all four pairs) */
    MM_KCLASS_MXFP8_MXFP4, /* FP8 x FP4 */
    MM_KCLASS_MXFP4,       /* FP4 x FP4 */
    MM_KCLASS_A16_FP8B,    /* bf16 x block-scaled fp8 e4m3 (weight-only) */
    MM_KCLASS_A16_MXFP4,   /* bf16 x MX fp4 (weight-only) */
    MM_KCLASS_A16_UINT4,   /* bf16 x uint4 with group scales and zeros (weight-only) */
    MM_KCLASS_COUNT
} mm_kernel_class;

/* The class of a pair, or -1 for a pair the GEMM does not take. */
int mm_kernel_class_of(mm_dtype a_dtype, mm_dtype w_dtype);
/* "bf16", "int8", "int8xint4", "mxfp8", "mxfp8xmxfp4", "mxfp4", "a16-fp8b", "a16-mxfp4", "a16-uint4"
 * (the names of `megamoe bench ffn`). */
const char *mm_kernel_class_name(int cls);
/* The class of a name, or -1. */
int mm_kernel_class_parse(const char *name);

/* The kernels of one pair, by role. */
typedef enum mm_kernel_kind {
    MM_KIND_REF,
    MM_KIND_AVX512,
    MM_KIND_AVX512_FEW,
    MM_KIND_AMX,
    MM_KIND_AMX_FEW,
    MM_KIND_COUNT
} mm_kernel_kind;

/* "ref", "avx512", "avx512-few", "amx", "amx-few". */
const char *mm_kernel_kind_name(int kind);
/* The kind of a name, or -1. */
int mm_kernel_kind_parse(const char *name);

#define MM_KERNEL_RULE_MAX_STEPS 16

/* How one class chooses. Thresholds (a profile): the few-rows AMX kernel for 1..amx_few_max rows, else
 * the general AMX kernel from amx_min rows, else the few-rows AVX-512 kernel for 1..avx512_few_max
 * rows, else the general AVX-512 kernel, else the reference (each when available). Steps (a tune
 * cache, n_steps > 0): the kind of the last step whose rows <= the group's rows (the first step below
 * its rows); thresholds again when that kind is not available. */
typedef struct mm_kernel_rule {
    int avx512_few_max, amx_few_max, amx_min;
    int n_steps;
    struct {
        int rows;
        mm_kernel_kind kind;
    } steps[MM_KERNEL_RULE_MAX_STEPS];
} mm_kernel_rule;

/* The kind the rule chooses for `rows` among the available ones (bit 1 << kind), or MM_KIND_COUNT
 * when none is. */
mm_kernel_kind mm_kernel_rule_choose(const mm_kernel_rule *rule, unsigned available, int64_t rows);

typedef struct mm_cpu_profile {
    const char *name;
    const char *cpus;   /* which CPUs, and whether its numbers were measured there */
    const char *vendor; /* cpuid vendor string; NULL: the fallback (matches any CPU) */
    int family;         /* display family */
    int model_lo, model_hi;
    int amx; /* 0: never choose AMX kernels */
    mm_kernel_rule rules[MM_KCLASS_COUNT];
} mm_cpu_profile;

/* The profiles, the fallback ("generic") last; NULL past the end. */
const mm_cpu_profile *mm_cpu_profile_at(int i);
/* The profile of that name, or NULL. */
const mm_cpu_profile *mm_cpu_profile_find(const char *name);
/* The profile whose vendor / family / model range matches the CPU, else the generic one. */
const mm_cpu_profile *mm_cpu_profile_match(const mm_cpu_id *id);
/* "a, b, c": the names, for messages. */
void mm_cpu_profile_names(char *buf, size_t size);

#endif
