/* SPDX-License-Identifier: Apache-2.0 */
/* core/cpu.h: run-time detection of the CPU features the kernels may use (x86-64; other CPUs run the
 * portable code, see MM_X86_KERNELS).
 *
 * AVX-512 code may only run after these checks: the CPU must report the instructions (cpuid) AND the
 * operating system must save the zmm/opmask state on context switches (xgetbv), otherwise the first
 * AVX-512 instruction faults. The answer is computed once per process (thread-safe) and never changes,
 * except that MEGAMOE_ISA in the environment caps it: "ref" forces the portable reference code paths,
 * "avx512" stops below AMX. AMX tile data also needs a per-process permission from Linux
 * (arch_prctl ARCH_REQ_XCOMP_PERM), requested once here.
 *
 * Internal API for tools: `megamoe bench ffn` (tools/bench/bench_ffn.c) lists and caps the ISA levels; not
 * part of include/megamoe/. */
#ifndef MEGAMOE_CORE_CPU_H
#define MEGAMOE_CORE_CPU_H

/* MM_X86_KERNELS: 1 where the AVX-512/AMX files (*_avx512.c) are part of the build, which CMakeLists.txt
 * does on x86-64 only; 0 on other CPUs (aarch64, ...), where only the portable code exists and
 * mm_cpu_isa() is always MM_ISA_REF. Code that names a function of those files does so through
 * MM_X86_ONLY (NULL elsewhere, for tables of function pointers) or inside #if MM_X86_KERNELS. */
#include <stddef.h>

#if defined(__x86_64__)
#define MM_X86_KERNELS 1
#define MM_X86_ONLY(f) (f)
#else
#define MM_X86_KERNELS 0
#define MM_X86_ONLY(f) NULL
#endif

/* Instruction-set levels the kernel registry knows, from most portable up. */
typedef enum mm_isa {
    MM_ISA_REF = 0,    /* portable C */
    MM_ISA_AVX512 = 1, /* AVX512F/BW/VL/DQ + BF16 + VNNI, with OS support */
    MM_ISA_AMX = 2,    /* AVX512 plus AMX tiles with BF16 and INT8, with OS support and permission */
    MM_ISA_COUNT
} mm_isa;

/* Highest ISA that the hardware supports and the environment allows (MEGAMOE_ISA caps it). */
mm_isa mm_cpu_isa(void);
/* Whether the hardware and OS support an ISA level (ignores MEGAMOE_ISA). */
int mm_cpu_supports(mm_isa isa);
/* Whether the CPU has AVX512_VBMI (vpermb, vpermt2b), which some MX kernels need beyond their ISA level;
 * 0 off x86-64. Ignores MEGAMOE_ISA. */
int mm_cpu_has_avx512_vbmi(void);
/* The CPU's identity from cpuid, for the kernel profiles (gemm/kernel_profiles.h) and the tune cache's
 * key: vendor string ("GenuineIntel", "AuthenticAMD"; "" off x86-64), display family and model (the
 * extended fields folded in, as Linux's /proc/cpuinfo shows them) and the brand string (the model name,
 * trimmed; "" when the CPU has none). */
typedef struct mm_cpu_id {
    char vendor[13];
    int family, model;
    char brand[49];
} mm_cpu_id;
const mm_cpu_id *mm_cpu_identity(void);
/* Lower-case name of an ISA level ("ref", "avx512", "amx"). */
const char *mm_isa_name(mm_isa isa);

/* One spin-wait pause (x86 PAUSE: lets the sibling hyper-thread run and saves power; nothing elsewhere).
 * The one definition for every spinning wait (the worker pool, the world's parked ranks, comm waits). */
static inline void mm_cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#endif
