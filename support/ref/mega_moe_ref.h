/* SPDX-License-Identifier: Apache-2.0 */
/* ref/mega_moe_ref.h: the float64 reference of MegaMoE, a global view of all ranks at once.
 *
 * This is what the fast operator and `megamoe run` are checked against. It takes every rank's inputs
 * together (no communicator), runs plain loops, and produces every rank's y and expert_token_nums.
 * It depends on no operator API: the structs below are its own, and callers convert into them (BF16
 * topk_weights to F32, UINT64 weight scales to F32, per-expert weight lists to stacked buffers).
 *
 * The contract (docs/mega_moe.md "Semantics", made exact in docs/reference.md):
 *  1. Dispatch, once per active home row: A16W16 keeps x as BF16; INT scenarios quantize the F32 value
 *     of the BF16 row with mm_int8_quantize_row_div_away; MX scenarios quantize the BF16 row with
 *     mm_mx_quantize_row_bf16 in the dispatch dtype (or take the pre-quantized bytes + scales as given).
 *  2. GEMM1 per (row, output channel n): a float64 dot product over H of the dequantized row and the
 *     dequantized weight column (INT: the raw integers, so the dot product is the exact INT32
 *     accumulator), then, evaluated in double in the order written and rounded ONCE to F32:
 *       A16W16 / MX: dot;   INT8: dot * s_W1[n] * s_X;
 *       A8W4-INT:   (dot * s_W1[n] + (bias1[n] - 8 * s_W1[n] * colsum_W1[n])) * s_X.
 *     A16W16 then rounds that F32 to BF16.
 *     A16 weight-only (A16W8-FP8, A16W4-MX, A16W4-INT; docs/weight_formats.md): every weight element is
 *     first w' = BF16(F32(F32(decode(q) - zero) * scale)) (ref/format_ref.h), then exactly A16W16.
 *     A bias given for any other scenario than A8W4-INT is added in double before that one rounding:
 *     F32(dot [* scales] + bias[n]) (GEMM2 with topk_weights_type 1: + w * bias2[n], the bias weighted
 *     like the expert's output). weight1_interleave: weight1's stored channel 2i is gate i, 2i + 1 up i
 *     (bias1, scales1, zeros1 alike).
 *  3. Activation (activation_ref.h): F32 inputs, evaluated in double, rounded once to F32.
 *  4. topk_weights_type 1: a = F32(a * w) (one F32 product).
 *  5. GEMM2 input: A16W16 rounds to BF16; INT: mm_int8_quantize_row_mul_even (scale amax / 127); FP:
 *     mm_mx_quantize_row_f32 (rounds to BF16 first) in the GEMM2 dtype, then dequantized.
 *  6. GEMM2 like step 2 (bias2 for A8W4-INT), rounded once to F32, then to BF16: the expert row O.
 *  7. Shared experts: steps 1-6 for every active home row with the rank's shared weights; the input is
 *     quantized with the shared scenario's own dispatch rule (the same bytes when the types agree).
 *  8. Combine on the home rank. Every sum is in F32: an accumulator starting at +0.0f, each term a
 *     separately rounded F32 product w * O (no fused multiply-add); with topk_weights_type 1 the term is
 *     O itself. combine_quant_mode 3/4 first replaces every routed row O by its MX (E5M2 / E4M3, blocks
 *     of 32 along H) quantize-dequantize round trip; shared rows never.
 *       mode 0: acc = sum over k = 0..K-1 (in k order) of w_k * O_k; then acc += shared row s for
 *               s = 0..S-1; y = BF16(acc).
 *       mode 1: groups are single ranks. mode 2: groups are domains of rank_num_per_server consecutive
 *               ranks. For each group g holding at least one of the row's experts (expert e lives on
 *               rank e / E_l), partial_g = BF16(sum over k with expert in g, in k order, of w_k * O_k)
 *               (one rounding at the expert side, resp. the domain's relay); then on the home rank
 *               acc = sum of partial_g over groups in ascending group order, then the shared rows in
 *               order, y = BF16(acc). Mode 2 thus equals mode 1 with the domain as the unit: the relay
 *               reduces the weighted BF16 expert rows of its domain directly, rounding once.
 *  Inactive rows (x_active_mask[i] == 0) are not dispatched, get no shared expert and y = +0.
 *  expert_token_nums[e_l] counts the rows local expert e_l received from all ranks.
 *
 * Internal API for tools: `megamoe run` (tools/run/run_moe_check.c) checks its samples against it; not part
 * of include/megamoe/. */
#ifndef MEGAMOE_REF_MEGA_MOE_REF_H
#define MEGAMOE_REF_MEGA_MOE_REF_H

#include <stdint.h>

#include "megamoe/dtype.h"
#include "megamoe/status.h"
#include "ref/activation_ref.h"

/* The weights of one group of experts (the routed experts of a rank, or its shared experts). All
 * tensors are stacked along a leading expert dimension of `count`, dense, row-major; 4-bit values are
 * packed two per byte along the last dimension (each row starts on a byte). */
typedef struct mm_ref_weights {
    mm_dtype dtype;            /* BF16, I8, INT4, FP8_E4M3FN, FP8_E5M2 or FP4_E2M1 (both GEMMs) */
    int64_t count;             /* E_l routed experts, or S shared experts (0 = none) */
    const void *weight1;       /* (count, H, N1) or (count, N1, H) with transpose_weight1; N1 = 2I */
    const void *weight2;       /* (count, K2, H) or (count, H, K2) with transpose_weight2; K2 = I (2I gelu) */
    const float *scales1;      /* INT8/INT4: (count, N1) F32 per output channel */
    const float *scales2;      /* INT8/INT4: (count, H) */
    const uint8_t *mx_scales1; /* MX: (count, N1, ceil(H/64), 2) E8M0 */
    const uint8_t *mx_scales2; /* MX: (count, H, ceil(K2/64), 2) E8M0 */
    const float *bias1;        /* INT4 (required) or any other dtype (optional, NULL = none): (count, N1) */
    const float *bias2;        /* likewise (count, H) */
    /* A16W8-FP8 / A16W4-INT: F32 block scales (count, ceil(N/bn), ceil(K/bk)) of attrs' block sizes, and
     * for UINT4 the zero points, U8 0..15 of the same shape (N, K of that GEMM, channels as stored). */
    const float *block_scales1, *block_scales2;
    const uint8_t *zeros1, *zeros2;
} mm_ref_weights;

/* Attributes, equal for all ranks. */
typedef struct mm_ref_attrs {
    int64_t expert_num; /* E, routed experts in total */
    int64_t world_size; /* R */
    int64_t topk;       /* K */
    int64_t hidden;     /* H */
    int64_t inter;      /* I (intermediate_hidden) */
    mm_ref_activation activation;
    /* MM_DTYPE_INVALID (A16W16, no quantization), MM_DTYPE_I8, or an MX element type. */
    mm_dtype dispatch_dtype;
    int x_prequantized;            /* x arrives as dispatch_dtype bytes + E8M0 scales (MX only) */
    mm_dtype shared_quant_dtype;   /* MM_DTYPE_INVALID = same as dispatch_dtype */
    mm_dtype activation_out_dtype; /* MM_DTYPE_INVALID = the scenario's GEMM2 input type (FP only) */
    int transpose_weight1, transpose_weight2; /* apply to routed and shared weights */
    int topk_weights_type;                    /* 0 or 1 */
    int combine_quant_mode;                   /* 0, 3 (MX E5M2) or 4 (MX E4M3) */
    int combine_comm_mode;                    /* 0, 1 (flat) or 2 (layered) */
    int64_t rank_num_per_server;              /* domain size; layered when 0 < value < world_size */
    /* checkpoint-format extensions, for routed and shared weights alike */
    int64_t scale_block_n, scale_block_k; /* block sizes of block-scaled weights (>= 1 when used) */
    int weight1_interleave;               /* weight1's gate/up channels alternate (see above) */
    int with_bias;                        /* ref_case only: allocate bias1/bias2 for every dtype */
} mm_ref_attrs;

/* One rank's inputs. */
typedef struct mm_ref_rank_input {
    int64_t bs;                   /* rows of x; 0 allowed */
    const uint16_t *x_bf16;       /* (bs, H) BF16 bits, unless attrs.x_prequantized */
    const uint8_t *x_quant;       /* pre-quantized: (bs, row_bytes(dispatch_dtype, H)) */
    const uint8_t *x_scales;      /* pre-quantized: (bs, ceil(H/32)) E8M0 */
    const int32_t *topk_ids;      /* (bs, K) */
    const float *topk_weights;    /* (bs, K) F32 */
    const uint8_t *x_active_mask; /* (bs,), nonzero = active; NULL = all active */
    mm_ref_weights routed;        /* count = E / R */
    mm_ref_weights shared;        /* count = S in [0, 4] */
} mm_ref_rank_input;

/* One rank's outputs (caller-owned). */
typedef struct mm_ref_rank_output {
    uint16_t *y;                /* (bs, H) BF16 bits */
    int32_t *expert_token_nums; /* (E / R,) */
    /* Optional (NULL = not written): (bs, H) F32, per element the largest magnitude among the F32
     * values the combine sums into y (each routed term, each mode-1/2 BF16 partial, each shared row)
     * and |y| itself: the scale of the rounding points of the combine, so a test can state a
     * per-element bound in ulps of it (tests/test_mega_moe_common.h, docs/reference.md). */
    float *y_scale;
} mm_ref_rank_output;

/* The GEMM scenario of a weight dtype with the dtype its input is quantized to. */
typedef enum mm_ref_scenario {
    MM_REF_SCENARIO_INVALID = 0,
    MM_REF_SCENARIO_A16W16,
    MM_REF_SCENARIO_A8W8_INT,
    MM_REF_SCENARIO_A8W4_INT,
    MM_REF_SCENARIO_A8W8_FP,
    MM_REF_SCENARIO_A8W4_FP,
    MM_REF_SCENARIO_A4W4_FP,
    MM_REF_SCENARIO_A16W8_FP8, /* FP8 E4M3 weights with F32 block scales, BF16 activations */
    MM_REF_SCENARIO_A16W4_MX,  /* FP4 E2M1 weights with E8M0 MX scales, BF16 activations */
    MM_REF_SCENARIO_A16W4_INT  /* UINT4 weights with F32 group scales and zero points, BF16 activations */
} mm_ref_scenario;

const char *mm_ref_scenario_name(mm_ref_scenario scenario);
/* Scenario table of docs/mega_moe.md ("Semantics"); MM_REF_SCENARIO_INVALID for a pair that does not match.
 */
mm_ref_scenario mm_ref_scenario_of(mm_dtype weight_dtype, mm_dtype input_dtype);

/* Runs the reference for all R ranks: inputs[R], outputs[R]. Validates first (the message names the
 * rank and parameter); on failure no output is written. */
mm_status mm_ref_mega_moe(const mm_ref_attrs *attrs, const mm_ref_rank_input *inputs,
                          mm_ref_rank_output *outputs, mm_error *err);

#endif
