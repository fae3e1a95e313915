/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_ffn_peak_avx512.c: the AVX-512 peak loops and the streaming-read loop of `bench ffn`
 * (compiled with AVX-512 flags; called only after mm_cpu_supports(MM_ISA_AVX512)).
 *
 * A peak loop keeps CHAINS independent accumulators so that the instruction's latency is hidden and
 * only its throughput counts; the operands stay in registers (a hot loop without memory traffic), which
 * is the upper bound any kernel made of that instruction can reach. */
#include <immintrin.h>

#include "bench/bench_ffn.h"

/* Independent chains: enough for latency 6 at two per cycle twice over. The instructions are inline asm
 * with each accumulator tied to its register ("+v"): through the intrinsics GCC 12 copied the
 * accumulators every iteration (24 vmovdqa next to 12 vpdpbusd). On AMD Zen 5 the copies cost nothing
 * measurable (move elimination: old and new loops 921-936 GOP/s alternating), but the loop must not
 * depend on that; with fewer chains vdpbf16ps's loop lost ~10 % (356-400 against 445 GFLOP/s). */
#define CHAINS 24

/* The accumulators are summed into a volatile sink so that the compiler keeps every chain. */
static volatile float sink_f32;
static volatile int sink_i32;

static inline __m512 dpbf16(__m512 acc, __m512i a, __m512i b) {
    __asm__("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

static inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

static inline __m512 fmadd(__m512 acc, __m512 a, __m512 b) {
    __asm__("vfmadd231ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

double bench_ffn_peak_vdpbf16ps(int64_t iterations) {
    __m512 acc[CHAINS];
    __m512i a = _mm512_set1_epi32(0x3F803F80); /* pairs of 1.0 */
    __m512i b = _mm512_set1_epi32(0x00010001); /* tiny values: the sums stay finite */
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < iterations; i++) {
#pragma GCC unroll 24
        for (int c = 0; c < CHAINS; c++) acc[c] = dpbf16(acc[c], a, b);
        __asm__ volatile("" : "+v"(a)); /* the operand may change: no hoisting of the loop */
    }
    float s = 0;
    for (int c = 0; c < CHAINS; c++) s += _mm512_reduce_add_ps(acc[c]);
    sink_f32 = s;
    return (double)iterations * CHAINS * 16 * 2 * 2; /* 16 lanes x 2 products, multiply + add */
}

double bench_ffn_peak_vpdpbusd(int64_t iterations) {
    __m512i acc[CHAINS];
    __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_setzero_si512();
    for (int64_t i = 0; i < iterations; i++) {
#pragma GCC unroll 24
        for (int c = 0; c < CHAINS; c++) acc[c] = dpbusd(acc[c], a, b);
        __asm__ volatile("" : "+v"(a));
    }
    /* Sum lanes as unsigned: the hardware accumulators wrap, and the intrinsic's signed reduction would
     * be undefined behaviour in C once they do. */
    uint32_t s = 0;
    for (int c = 0; c < CHAINS; c++) {
        uint32_t lanes[16];
        _mm512_storeu_si512(lanes, acc[c]);
        for (int l = 0; l < 16; l++) s += lanes[l];
    }
    sink_i32 = (int)s;
    return (double)iterations * CHAINS * 16 * 4 * 2; /* 16 lanes x 4 products, multiply + add */
}

double bench_ffn_peak_fma_f32(int64_t iterations) {
    __m512 acc[CHAINS];
    __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-30f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < iterations; i++) {
#pragma GCC unroll 24
        for (int c = 0; c < CHAINS; c++) acc[c] = fmadd(acc[c], a, b);
        __asm__ volatile("" : "+v"(a));
    }
    float s = 0;
    for (int c = 0; c < CHAINS; c++) s += _mm512_reduce_add_ps(acc[c]);
    sink_f32 = s;
    return (double)iterations * CHAINS * 16 * 2;
}

uint64_t bench_ffn_stream_read_avx512(const void *buf, size_t bytes) {
    const __m512i *p = buf;
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < bytes / 64; i += 4) {
        s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
        s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 1));
        s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 2));
        s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 3));
    }
    /* Unsigned lane sum: the checksum wraps by design, which the signed reduction intrinsic may not. */
    uint64_t lanes[8], sum = 0;
    _mm512_storeu_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
    for (int l = 0; l < 8; l++) sum += lanes[l];
    return sum;
}
