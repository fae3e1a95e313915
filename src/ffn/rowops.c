/* SPDX-License-Identifier: Apache-2.0 */
/* ffn/rowops.c: the portable row kernels (rowops.h), the run-time choice of their AVX-512 twins
 * (rowops_avx512.c), which give the same bits (each product and sum is one rounded F32 operation in the
 * same order, no fused multiply-add), and the dispatch rounding of an input row. */
#include "ffn/rowops.h"

#include "core/cpu.h"
#include "format/bf16_inline.h"

static void axpy_bf16(float *acc, float w, const uint16_t *o, int64_t n) {
    for (int64_t x = 0; x < n; x++) {
        float term = w * mm_bf16_to_f32_inline(o[x]);
        acc[x] += term;
    }
}

static void add_bf16(float *acc, const uint16_t *o, int64_t n) {
    for (int64_t x = 0; x < n; x++) acc[x] += mm_bf16_to_f32_inline(o[x]);
}

static void to_bf16(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t x = 0; x < n; x++) dst[x] = mm_f32_to_bf16_inline(src[x]);
}

static void round_bf16(float *v, int64_t n) {
    for (int64_t x = 0; x < n; x++) v[x] = mm_bf16_to_f32_inline(mm_f32_to_bf16_inline(v[x]));
}

static void from_bf16(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t x = 0; x < n; x++) dst[x] = mm_bf16_to_f32_inline(src[x]);
}

static const mm_rowops portable = {axpy_bf16,
                                   add_bf16,
                                   to_bf16,
                                   round_bf16,
                                   from_bf16,
                                   mm_int8_quantize_row_div_away,
                                   mm_int8_quantize_row_mul_even};

const mm_rowops *mm_rowops_portable(void) {
    return &portable;
}

const mm_rowops *mm_rowops_get(void) {
    /* mm_cpu_isa computes its answer once per process and is thread-safe. */
#if MM_X86_KERNELS
    return mm_cpu_isa() >= MM_ISA_AVX512 ? &mm_rowops_avx512_table : &portable;
#else
    return &portable;
#endif
}

void mm_ffn_quantize_input(mm_dtype dtype, const uint16_t *x, int64_t hidden, uint8_t *data, uint8_t *mx,
                           float *int8_scale, float *f32_row) {
    if (dtype == MM_DTYPE_I8) {
        /* Per token, on the F32 value of each BF16 element: s = amax / 127, q = round_half_away(x / s). */
        const mm_rowops *ops = mm_rowops_get();
        ops->from_bf16(f32_row, x, hidden);
        ops->int8_div_away(f32_row, hidden, (int8_t *)data, int8_scale);
        return;
    }
    if (dtype == MM_DTYPE_BF16) {
        for (int64_t k = 0; k < hidden; k++) ((uint16_t *)data)[k] = x[k];
        return;
    }
    /* the scenario table admits no other dispatch dtype than an MX element type here */
    mm_mx_quantize_row_bf16(x, hidden, dtype, data, mx, NULL);
}
