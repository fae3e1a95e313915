/* gemm/kernel_registry.h: which micro-kernel serves each (activation, weight) format pair.
 *
 * The portable reference set is registered first, for every pair the GEMM supports; the AVX-512 set
 * then overrides the pairs it improves, if the CPU and OS support it (core/cpu.h) and MEGAMOE_ISA=ref is
 * not set. The table is built once per process and is read-only afterwards. */
#ifndef MEGAMOE_GEMM_KERNEL_REGISTRY_H
#define MEGAMOE_GEMM_KERNEL_REGISTRY_H

#include "gemm/kernel.h"

/* The kernel used for (a_dtype, w_dtype), or NULL when the pair is not supported. */
const mm_gemm_kernel *mm_gemm_kernel_select(mm_dtype a_dtype, mm_dtype w_dtype);
/* The kernel of exactly that ISA for the pair, or NULL if there is none or the hardware lacks the ISA
 * (ignores MEGAMOE_ISA, so tests can compare ISAs). */
const mm_gemm_kernel *mm_gemm_kernel_lookup(mm_isa isa, mm_dtype a_dtype, mm_dtype w_dtype);

#endif
