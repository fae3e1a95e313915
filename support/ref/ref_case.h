/* SPDX-License-Identifier: Apache-2.0 */
/* ref/ref_case.h: owned, zero-filled buffers for a whole reference call (all ranks), plus element
 * setters that hide weight layout (transpose flags) and 4-bit packing.
 *
 * Tests, benchmarks and the CLI build reference inputs with it: allocate for a set of attributes and
 * dtypes, write values through the mutable pointers or the setters, then pass c.inputs / c.outputs to
 * mm_ref_mega_moe. */
#ifndef MEGAMOE_REF_REF_CASE_H
#define MEGAMOE_REF_REF_CASE_H

#include <stdint.h>

#include "ref/mega_moe_ref.h"

/* Mutable views of one weight group's buffers (NULL where the dtype does not use them). */
typedef struct mm_ref_case_weights {
    mm_dtype dtype;
    int64_t count;
    uint8_t *weight1, *weight2;
    float *scales1, *scales2, *bias1, *bias2;
    uint8_t *mx_scales1, *mx_scales2;
    /* block-scaled weights (mm_ref_case_block_scaled): (count, nb, kb) of mm_ref_case_block_dims */
    int block_scaled;
    float *block_scales1, *block_scales2;
    uint8_t *zeros1, *zeros2; /* UINT4 only */
} mm_ref_case_weights;

typedef struct mm_ref_case_rank {
    int64_t bs;
    uint16_t *x_bf16;
    uint8_t *x_quant, *x_scales;
    int32_t *topk_ids;
    float *topk_weights;
    uint8_t *x_active_mask; /* all 1 after allocation */
    mm_ref_case_weights routed, shared;
    uint16_t *y;
    float *y_scale; /* mm_ref_rank_output.y_scale */
    int32_t *expert_token_nums;
} mm_ref_case_rank;

typedef struct mm_ref_case {
    mm_ref_attrs attrs;
    mm_ref_case_rank *ranks;     /* world_size */
    mm_ref_rank_input *inputs;   /* world_size, pointing into ranks[] */
    mm_ref_rank_output *outputs; /* world_size */
} mm_ref_case;

/* Weights of dtype fed input_dtype (MM_DTYPE_INVALID = BF16) carry F32 block scales: UINT4, and FP8 E4M3
 * with BF16 activations (A16W8-FP8). */
int mm_ref_case_block_scaled(mm_dtype dtype, mm_dtype input_dtype);
/* Blocks along N and K of GEMM `which` for attrs' scale_block_n / scale_block_k. */
void mm_ref_case_block_dims(const mm_ref_attrs *attrs, int which, int64_t *nb, int64_t *kb);

/* Allocates every buffer the attributes and dtypes need: bs[r] rows on rank r, routed weights of
 * routed_dtype, shared_count shared experts of shared_dtype per rank. INT and block scales are set to
 * 1.0, zero points to 0 and MX scales to 127 (2^0), so a test only writes what it cares about; biases
 * (zero) for every dtype when attrs->with_bias, else for INT4 only. */
mm_status mm_ref_case_alloc(mm_ref_case *c, const mm_ref_attrs *attrs, const int64_t *bs,
                            mm_dtype routed_dtype, int64_t shared_count, mm_dtype shared_dtype,
                            mm_error *err);
void mm_ref_case_free(mm_ref_case *c);

/* Rows K and columns N of GEMM `which` (1 or 2) in logical (k, n) orientation. */
int64_t mm_ref_case_gemm_k(const mm_ref_attrs *attrs, int which);
int64_t mm_ref_case_gemm_n(const mm_ref_attrs *attrs, int which);

/* Writes the raw code `bits` (BF16 bits, an int8 / int4 value in two's complement, or an FP8/FP4
 * code) of weight element (k, n) of GEMM `which` of expert `expert`, honouring the transpose flag. */
void mm_ref_case_set_weight(const mm_ref_attrs *attrs, mm_ref_case_weights *w, int which, int64_t expert,
                            int64_t k, int64_t n, uint32_t bits);
/* Writes the E8M0 scale of K-group `group` of output channel n (MX layout (N, ceil(K/64), 2)); w must be
 * of an MX dtype (FP8 / FP4), the only ones with these scales. */
void mm_ref_case_set_mx_scale(const mm_ref_attrs *attrs, mm_ref_case_weights *w, int which, int64_t expert,
                              int64_t n, int64_t group, uint8_t scale);

#endif
