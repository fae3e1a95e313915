/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernel_registry.h: which micro-kernel serves each (activation, weight) format pair.
 *
 * The portable reference set is registered first, for every pair the GEMM supports; the AVX-512 set
 * then overrides the pairs it improves, if the CPU and OS support it (core/cpu.h) and MEGAMOE_ISA=ref is
 * not set. The table is built once per process and is read-only afterwards.
 *
 * Internal API for tools: `megamoe bench ffn` (tools/bench/bench_ffn_expert.c) picks kernels per ISA; not
 * part of include/megamoe/. */
#ifndef MEGAMOE_GEMM_KERNEL_REGISTRY_H
#define MEGAMOE_GEMM_KERNEL_REGISTRY_H

#include <stdint.h>

#include "gemm/kernel.h"
#include "gemm/kernel_profiles.h"
#include "megamoe/status.h"

/* The kernel used for (a_dtype, w_dtype) on a group of `rows` rows: the kind that the rule of the pair's
 * class chooses (the tune cache's steps, else the CPU profile's thresholds: kernel_profiles.h) among the
 * kernels this process may use. NULL when the pair is not supported. The choice depends on the row
 * count only, never on threads or scheduling; INT kernels agree bit for bit anyway, float kernels
 * within their documented tolerance. */
const mm_gemm_kernel *mm_gemm_kernel_select_rows(mm_dtype a_dtype, mm_dtype w_dtype, int64_t rows);
/* The same for many rows (the best kernel for the pair). */
const mm_gemm_kernel *mm_gemm_kernel_select(mm_dtype a_dtype, mm_dtype w_dtype);
/* The kernel of exactly that ISA for the pair, or NULL if there is none or the hardware lacks the ISA
 * (ignores MEGAMOE_ISA, so tests can compare ISAs). */
const mm_gemm_kernel *mm_gemm_kernel_lookup(mm_isa isa, mm_dtype a_dtype, mm_dtype w_dtype);
/* The i-th (activation, weight) pair the GEMM supports (every pair has a portable kernel), for reports
 * such as `megamoe version --verbose`; 0 when i is past the last pair. */
int mm_gemm_kernel_pair(int i, mm_dtype *a_dtype, mm_dtype *w_dtype);
/* The few-rows kernel of exactly that ISA for the pair (the one select_rows prefers for small groups,
 * e.g. the MX kernels of mx_small_avx512.c and mx_amx_avx512.c), or NULL if there is none or the hardware
 * lacks what it needs. For which rows it is chosen: mm_gemm_kernel_rule_kind with the rule in use
 * (mm_gemm_kernel_config_get). */
const mm_gemm_kernel *mm_gemm_kernel_lookup_few_rows(mm_isa isa, mm_dtype a_dtype, mm_dtype w_dtype);

/* Where the kernel choice comes from, settled once per process at the first choice. */
typedef enum mm_tune_cache_state {
    MM_TUNE_CACHE_OFF,            /* MEGAMOE_TUNE=0 */
    MM_TUNE_CACHE_FORCED_PROFILE, /* not read: MEGAMOE_CPU_PROFILE forces a profile */
    MM_TUNE_CACHE_NO_PATH,        /* no MEGAMOE_TUNE_FILE, XDG_CACHE_HOME or HOME */
    MM_TUNE_CACHE_ABSENT,         /* no file at the path */
    MM_TUNE_CACHE_IGNORED,        /* unreadable, corrupt, or for another CPU or version: cache_note says */
    MM_TUNE_CACHE_USED            /* cache_note names the classes it steers */
} mm_tune_cache_state;

typedef struct mm_gemm_kernel_config {
    const mm_cpu_profile *profile; /* never NULL */
    int profile_forced;            /* by MEGAMOE_CPU_PROFILE */
    mm_tune_cache_state cache_state;
    char cache_path[1024];
    char cache_note[256];
    mm_kernel_rule rules[MM_KCLASS_COUNT]; /* the rule of each class: the profile's or the cache's */
    int from_cache[MM_KCLASS_COUNT];
    char error[384]; /* MEGAMOE_CPU_PROFILE names no profile: the message (the detected one is used) */
} mm_gemm_kernel_config;

const mm_gemm_kernel_config *mm_gemm_kernel_config_get(void);
/* MM_OK, or MM_ERR_INVALID_ARGUMENT when MEGAMOE_CPU_PROFILE names no profile (the message lists them);
 * mm_gemm_grouped checks it before choosing a kernel. */
mm_status mm_gemm_kernel_config_check(mm_error *err);
/* The kinds (bit 1 << kind) the pair has in this process (hardware, MEGAMOE_ISA, AVX512_VBMI; the
 * profile's AMX switch is not applied), and the kernel of one kind (NULL when it has none). */
unsigned mm_gemm_kernel_kinds(mm_dtype a_dtype, mm_dtype w_dtype);
const mm_gemm_kernel *mm_gemm_kernel_of_kind(mm_kernel_kind kind, mm_dtype a_dtype, mm_dtype w_dtype);
/* The kind `rule` chooses for the pair and `rows` among the kinds the registry may use here (the pair's,
 * minus AMX when the profile in use excludes it); NULL rule: the highest kind. What select_rows does with
 * the rule in use; tests and `megamoe tune` ask it about the profile's rule. */
mm_kernel_kind mm_gemm_kernel_rule_kind(const mm_kernel_rule *rule, mm_dtype a_dtype, mm_dtype w_dtype,
                                        int64_t rows);

#endif
