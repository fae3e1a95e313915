/* ops/mega_moe/rowops.c: the portable row loops of the hot paths (combine sums, BF16 rounding of
 * expert rows) and the run-time choice of the AVX-512 versions (rowops_avx512.c), which give the same
 * bits: each product and sum is one rounded F32 operation in the same order (no fused multiply-add). */
#include "core/cpu.h"
#include "ops/mega_moe/mega_moe_internal.h"

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

static void act_gated(const mm_moe_act *act, const float *g, const float *u, float *out, int64_t n) {
    for (int64_t x = 0; x < n; x++) out[x] = mm_moe_act_gated(act, g[x], u[x]);
}

static void from_bf16(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t x = 0; x < n; x++) dst[x] = mm_bf16_to_f32_inline(src[x]);
}

static void int8_quantize(const float *x, int64_t n, int half_even, int8_t *q, float *scale) {
    if (half_even)
        mm_int8_quantize_row_mul_even(x, n, MM_INT8_SCALE_AMAX_DIV_127, q, scale);
    else
        mm_int8_quantize_row_div_away(x, n, q, scale);
}

static const mm_moe_rowops portable = {axpy_bf16, add_bf16,  to_bf16,      round_bf16,
                                       act_gated, from_bf16, int8_quantize};

const mm_moe_rowops *mm_moe_rowops_portable(void) {
    return &portable;
}

const mm_moe_rowops *mm_moe_rowops_get(void) {
    /* mm_cpu_isa computes its answer once per process and is thread-safe. */
    return mm_cpu_isa() >= MM_ISA_AVX512 ? &mm_moe_rowops_avx512_table : &portable;
}
