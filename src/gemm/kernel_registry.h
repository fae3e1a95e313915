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

/* The kernel used for (a_dtype, w_dtype) on a group of `rows` rows: the highest allowed ISA that has the
 * pair and whose kernel's min_rows <= rows. NULL when the pair is not supported. The choice depends on
 * the row count only, never on threads or scheduling; INT kernels agree bit for bit anyway, float
 * kernels within their documented tolerance. */
const mm_gemm_kernel *mm_gemm_kernel_select_rows(mm_dtype a_dtype, mm_dtype w_dtype, int64_t rows);
/* The same for many rows (the best kernel for the pair). */
const mm_gemm_kernel *mm_gemm_kernel_select(mm_dtype a_dtype, mm_dtype w_dtype);
/* The kernel of exactly that ISA for the pair, or NULL if there is none or the hardware lacks the ISA
 * (ignores MEGAMOE_ISA, so tests can compare ISAs). */
const mm_gemm_kernel *mm_gemm_kernel_lookup(mm_isa isa, mm_dtype a_dtype, mm_dtype w_dtype);
/* The few-rows kernel of exactly that ISA for the pair (the one select_rows prefers for small groups,
 * e.g. the MX kernels of mx_small_avx512.c and mx_amx_avx512.c), or NULL if there is none or the hardware
 * lacks what it needs; *max_rows (if not NULL) gets the largest group it is chosen for. */
/* The i-th (activation, weight) pair the GEMM supports (every pair has a portable kernel), for reports
 * such as `megamoe version --verbose`; 0 when i is past the last pair. */
int mm_gemm_kernel_pair(int i, mm_dtype *a_dtype, mm_dtype *w_dtype);
const mm_gemm_kernel *mm_gemm_kernel_lookup_few_rows(mm_isa isa, mm_dtype a_dtype, mm_dtype w_dtype,
                                                     int *max_rows);

#endif
