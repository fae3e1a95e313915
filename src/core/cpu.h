/* core/cpu.h: run-time detection of the CPU features the kernels may use.
 *
 * AVX-512 code may only run after these checks: the CPU must report the instructions (cpuid) AND the
 * operating system must save the zmm/opmask state on context switches (xgetbv), otherwise the first
 * AVX-512 instruction faults. The answer is computed once per process (thread-safe) and never changes,
 * except that MEGAMOE_ISA=ref in the environment forces the portable reference code paths. */
#ifndef MEGAMOE_CORE_CPU_H
#define MEGAMOE_CORE_CPU_H

typedef struct mm_cpu_features {
    int avx512f;
    int avx512bw;
    int avx512vl;
    int avx512dq;
    int avx512_bf16;
    int avx512_vnni;
    int os_saves_zmm; /* XCR0 has the opmask, ZMM_Hi256 and Hi16_ZMM bits (plus SSE/AVX state) */
} mm_cpu_features;

/* Instruction-set levels the kernel registry knows, from most portable up. */
typedef enum mm_isa {
    MM_ISA_REF = 0,    /* portable C */
    MM_ISA_AVX512 = 1, /* AVX512F/BW/VL/DQ + BF16 + VNNI, with OS support */
    MM_ISA_COUNT
} mm_isa;

/* What the CPU and OS support (independent of MEGAMOE_ISA). */
const mm_cpu_features *mm_cpu_features_get(void);
/* Highest ISA that the hardware supports and the environment allows (MEGAMOE_ISA=ref caps it). */
mm_isa mm_cpu_isa(void);
/* Lower-case name of an ISA level ("ref", "avx512"). */
const char *mm_isa_name(mm_isa isa);

#endif
