/* SPDX-License-Identifier: Apache-2.0 */
/* ref/expert_ref.h: one expert of the reference, on one row at a time (steps 1-6 of the data flow).
 *
 * An expert's weights are decoded once into float64 matrices (output-channel major, so each output is
 * a dot product over a contiguous row); a received row then goes through GEMM1, the activation, the
 * GEMM2 input rounding or quantization, and GEMM2, with exactly the rounding points documented in
 * ref/mega_moe_ref.h. Single-threaded; the scratch buffers live in the expert. */
#ifndef MEGAMOE_REF_EXPERT_REF_H
#define MEGAMOE_REF_EXPERT_REF_H

#include <stdint.h>

#include "ref/mega_moe_ref.h"

/* How one group of experts (routed or shared) computes: scenario, input and GEMM2 input types. */
typedef struct mm_ref_plan {
    mm_ref_scenario scenario;
    mm_dtype input_dtype; /* MM_DTYPE_INVALID (BF16 as is), MM_DTYPE_I8 or an MX element type */
    mm_dtype gemm2_dtype; /* MM_DTYPE_BF16, MM_DTYPE_I8 or an MX element type */
} mm_ref_plan;

/* Plan of a weight group whose input is quantized to input_dtype; fails when the pair is not in the
 * scenario table or activation_out_dtype does not fit. `what` names the group in messages. */
mm_status mm_ref_plan_make(mm_dtype weight_dtype, mm_dtype input_dtype, mm_dtype activation_out_dtype,
                           const char *what, mm_ref_plan *plan, mm_error *err);

/* A received row: H values as float64 (the integers q for INT8 dispatch, else the dequantized values)
 * and the per-row scale (INT8 only; 1 otherwise). */
typedef struct mm_ref_row {
    double *values;
    float scale;
} mm_ref_row;

/* Dispatch-side quantization of one home row per plan.input_dtype (spec step 1): x_bf16 (H BF16 bits),
 * or, when x_quant is not NULL, the pre-quantized MX bytes and their E8M0 scales taken as given.
 * row->values must hold H doubles. */
mm_status mm_ref_dispatch_row(const mm_ref_plan *plan, int64_t hidden, const uint16_t *x_bf16,
                              const uint8_t *x_quant, const uint8_t *x_scales, mm_ref_row *row,
                              mm_error *err);

typedef struct mm_ref_expert {
    mm_ref_plan plan;
    const mm_ref_activation *act;
    int64_t hidden, inter, n1, act_width;           /* n1 = 2I outputs of GEMM1; act_width = GEMM2 inputs */
    double *w1;                                     /* (n1, hidden): w1[n * hidden + k] */
    double *w2;                                     /* (hidden, act_width): w2[n * act_width + k] */
    const float *scales1, *scales2, *bias1, *bias2; /* this expert's slices (scales INT only; bias1 / scales1
                                                       in channel order) */
    float *own_scales1, *own_bias1;                 /* the channel-order copies behind scales1 / bias1 */
    double *colsum1, *colsum2; /* INT4: sum over k of the raw weight integers of each output channel */
    /* scratch for one row */
    float *h, *a, *a_deq;
    int8_t *a_q;
    uint8_t *a_mx, *a_mx_scales;
    double *x2;
} mm_ref_expert;

/* Decodes expert `index` of `weights` (weights->dtype must match plan). Free with mm_ref_expert_free. */
mm_status mm_ref_expert_load(mm_ref_expert *ex, const mm_ref_plan *plan, const mm_ref_weights *weights,
                             int64_t index, const mm_ref_attrs *attrs, mm_error *err);
void mm_ref_expert_free(mm_ref_expert *ex);

/* Runs one received row through the expert; weighted (topk_weights_type 1) multiplies the activation
 * output by weight. out receives H BF16 bits. */
mm_status mm_ref_expert_row(mm_ref_expert *ex, const mm_ref_row *row, int weighted, float weight,
                            uint16_t *out, mm_error *err);

#endif
