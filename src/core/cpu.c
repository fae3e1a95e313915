/* SPDX-License-Identifier: Apache-2.0 */
/* core/cpu.c: cpuid + xgetbv feature detection, computed once per process with pthread_once; on other
 * CPUs than x86-64 the answer is the portable level (MM_X86_KERNELS). */
#include "core/cpu.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if MM_X86_KERNELS
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* What the CPU and OS support (independent of MEGAMOE_ISA); only the ISA level derived from it is
 * exported. */
typedef struct mm_cpu_features {
    int avx512f;
    int avx512bw;
    int avx512vl;
    int avx512dq;
    int avx512_bf16;
    int avx512_vnni;
    int os_saves_zmm; /* XCR0 has the opmask, ZMM_Hi256 and Hi16_ZMM bits (plus SSE/AVX state) */
    int amx_tile;
    int amx_bf16;
    int amx_int8;
    int os_allows_amx; /* XCR0 has XTILECFG/XTILEDATA and Linux granted this process the tile state */
} mm_cpu_features;

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static mm_cpu_features detected;
static mm_cpu_id identity;
static mm_isa detected_isa;

/* XCR0 bits: 1 SSE, 2 AVX, 5 opmask, 6 ZMM_Hi256, 7 Hi16_ZMM; 17 XTILECFG, 18 XTILEDATA. */
#define XCR0_AVX512_STATE 0xE6u
#define XCR0_AMX_STATE    0x60000u
/* Linux: ask for permission to use the AMX tile data state (arch/x86/include/uapi/asm/prctl.h). */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

static int supports(mm_isa isa) {
    const mm_cpu_features *f = &detected;
    int avx512 = f->os_saves_zmm && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq &&
                 f->avx512_bf16 && f->avx512_vnni;
    switch (isa) {
    case MM_ISA_REF: return 1;
    case MM_ISA_AVX512: return avx512;
    case MM_ISA_AMX: return avx512 && f->amx_tile && f->amx_bf16 && f->amx_int8 && f->os_allows_amx;
    case MM_ISA_COUNT: break;
    }
    return 0;
}

#if MM_X86_KERNELS
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Vendor, display family / model and brand string into `identity`. */
static void identify_x86(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return;
    memcpy(identity.vendor, &ebx, 4);
    memcpy(identity.vendor + 4, &edx, 4);
    memcpy(identity.vendor + 8, &ecx, 4);
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        int family = (eax >> 8) & 0xF, model = (eax >> 4) & 0xF;
        if (family == 0xF) family += (eax >> 20) & 0xFF;
        if (family == 0x6 || family >= 0xF) model |= ((eax >> 16) & 0xF) << 4;
        identity.family = family;
        identity.model = model;
    }
    if ((unsigned int)__get_cpuid_max(0x80000000u, NULL) < 0x80000004u) return; /* int in clang's cpuid.h */
    unsigned int regs[12];
    for (unsigned int i = 0; i < 3; i++)
        __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
    char raw[49];
    memcpy(raw, regs, 48);
    raw[48] = '\0';
    const char *b = raw;
    while (*b == ' ') b++;
    snprintf(identity.brand, sizeof identity.brand, "%s", b);
    for (size_t n = strlen(identity.brand); n > 0 && identity.brand[n - 1] == ' '; n--)
        identity.brand[n - 1] = '\0';
}

/* The CPU's features into `detected` (left all zero when cpuid has no leaf 1). */
static void detect_x86(void) {
    unsigned int eax, ebx, ecx, edx;
    identify_x86();
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return;
    int osxsave = (ecx >> 27) & 1;
    uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    detected.os_saves_zmm = (xcr0 & XCR0_AVX512_STATE) == XCR0_AVX512_STATE;
    if (__get_cpuid_max(0, NULL) >= 7 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
        detected.avx512f = (ebx >> 16) & 1;
        detected.avx512dq = (ebx >> 17) & 1;
        detected.avx512bw = (ebx >> 30) & 1;
        detected.avx512vl = (ebx >> 31) & 1;
        detected.avx512_vnni = (ecx >> 11) & 1;
        detected.amx_bf16 = (edx >> 22) & 1;
        detected.amx_tile = (edx >> 24) & 1;
        detected.amx_int8 = (edx >> 25) & 1;
        if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) detected.avx512_bf16 = (eax >> 5) & 1;
    }
    if (detected.amx_tile && (xcr0 & XCR0_AMX_STATE) == XCR0_AMX_STATE)
        detected.os_allows_amx = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

static void detect(void) {
    memset(&detected, 0, sizeof detected);
    memset(&identity, 0, sizeof identity);
#if MM_X86_KERNELS
    detect_x86();
#endif
    detected_isa = MM_ISA_REF;
    for (int isa = MM_ISA_REF + 1; isa < MM_ISA_COUNT && supports((mm_isa)isa); isa++)
        detected_isa = (mm_isa)isa;
    /* Read once here (not on every call) so that all threads agree for the whole process. */
    const char *forced = getenv("MEGAMOE_ISA");
    if (forced && strcmp(forced, "ref") == 0) detected_isa = MM_ISA_REF;
    if (forced && strcmp(forced, "avx512") == 0 && detected_isa > MM_ISA_AVX512) detected_isa = MM_ISA_AVX512;
}

mm_isa mm_cpu_isa(void) {
    pthread_once(&detect_once, detect);
    return detected_isa;
}

int mm_cpu_supports(mm_isa isa) {
    pthread_once(&detect_once, detect);
    return supports(isa);
}

const mm_cpu_id *mm_cpu_identity(void) {
    pthread_once(&detect_once, detect);
    return &identity;
}

int mm_cpu_has_avx512_vbmi(void) {
#if MM_X86_KERNELS
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vbmi");
#else
    return 0;
#endif
}

const char *mm_isa_name(mm_isa isa) {
    switch (isa) {
    case MM_ISA_REF: return "ref";
    case MM_ISA_AVX512: return "avx512";
    case MM_ISA_AMX: return "amx";
    case MM_ISA_COUNT: break;
    }
    return "unknown";
}
