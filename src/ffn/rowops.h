/* SPDX-License-Identifier: Apache-2.0 */
/* ffn/rowops.h: the row kernels of the hot paths (BF16 widening and rounding, the combine sums, the
 * INT8 per-token quantizers of the dispatches and of the GEMM2 input), each with an AVX-512 twin
 * (rowops_avx512.c) chosen at run time through core/cpu.h (MEGAMOE_ISA=ref forces the portable
 * table). Every version gives the same bits: products and sums are separately rounded F32 operations
 * in index order, BF16 rounding is RNE with the library's NaN rule, and the INT8 rules are the exact
 * scalar definitions of src/format/int_quant.c (the portable table calls them). The activation rows
 * are in the activation table (ffn/activation.h). */
#ifndef MEGAMOE_FFN_ROWOPS_H
#define MEGAMOE_FFN_ROWOPS_H

#include <stdint.h>

#include "megamoe/formats.h"

typedef struct mm_rowops {
    void (*axpy_bf16)(float *acc, float w, const uint16_t *o, int64_t n); /* acc += F32(w * o) */
    void (*add_bf16)(float *acc, const uint16_t *o, int64_t n);           /* acc += o */
    void (*to_bf16)(uint16_t *dst, const float *src, int64_t n);          /* RNE, NaN as mm_f32_to_bf16 */
    void (*round_bf16)(float *v, int64_t n);                              /* v = F32(BF16(v)), in place */
    void (*from_bf16)(float *dst, const uint16_t *src, int64_t n);        /* exact */
    /* INT8 per-row quantization of formats.h, same bits also for NaN / Inf / zero rows:
     * the dispatch rule mm_int8_quantize_row_div_away (s = amax / 127, q = round_half_away(x / s)) */
    void (*int8_div_away)(const float *x, int64_t n, int8_t *q, float *scale);
    /* mm_int8_quantize_row_mul_even (m = 127 / amax, q = round_half_even(x * m)) with its scale form:
     * MM_INT8_SCALE_AMAX_DIV_127 for MegaMoE's GEMM2 input, MM_INT8_SCALE_INV_MUL for Dispatch V3 */
    void (*int8_mul_even)(const float *x, int64_t n, mm_int8_scale_form form, int8_t *q, float *scale);
} mm_rowops;

/* The fastest table the CPU allows (MEGAMOE_ISA=ref: the portable one). */
const mm_rowops *mm_rowops_get(void);
const mm_rowops *mm_rowops_portable(void);
/* rowops_avx512.c: use only after mm_cpu_isa() >= MM_ISA_AVX512 (data, so reading it is safe). */
extern const mm_rowops mm_rowops_avx512_table;

/* The dispatch rounding of one BF16 row of `hidden` values to dtype (BF16: a copy; I8: the div-away
 * rule on the F32 values, scale into *int8_scale, f32_row: `hidden` floats of scratch; any other
 * dtype is an MX element type: the quantizer of formats.h, scales into mx). */
void mm_ffn_quantize_input(mm_dtype dtype, const uint16_t *x, int64_t hidden, uint8_t *data, uint8_t *mx,
                           float *int8_scale, float *f32_row);

#endif
