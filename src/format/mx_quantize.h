/* SPDX-License-Identifier: Apache-2.0 */
/* format/mx_quantize.h: what format/mx.c's MX quantizer shares with its AVX-512 twin
 * (mx_quantize_avx512.c): the scale byte rule on a group's amax pattern, and the vector group loop. */
#ifndef MEGAMOE_FORMAT_MX_QUANTIZE_H
#define MEGAMOE_FORMAT_MX_QUANTIZE_H

#include <stdint.h>

#include "megamoe/dtype.h"

/* Spec steps 1-3 on the largest BF16 magnitude pattern of a group (NaN patterns compare above Inf):
 * 0xFF for an Inf / NaN group, else max(e(amax) - emax, 0) with e the biased BF16 exponent (0 for a
 * group of zeros and subnormals). */
static inline uint8_t mm_mx_scale_byte_of_amax_bits(uint16_t amax_bits, int emax) {
    if (amax_bits >= 0x7F80u) return 0xFF;
    int e = amax_bits >> 7;
    if (e == 0) return 0;
    return (uint8_t)(e > emax ? e - emax : 0);
}

/* n_groups whole groups of 32 elements, from BF16 x_bf16 or (when x_bf16 is NULL) F32 x_f32 rounded to
 * BF16; codes into q (FP8: 32 bytes per group, FP4: 16), scale bytes into scales. The same bits as
 * mx.c's scalar loop. Use only after mm_cpu_isa() >= MM_ISA_AVX512 (x86-64 builds only). */
void mm_mx_quantize_groups_avx512(const uint16_t *x_bf16, const float *x_f32, int64_t n_groups, mm_dtype elem,
                                  int emax, uint8_t *q, uint8_t *scales);

#endif
