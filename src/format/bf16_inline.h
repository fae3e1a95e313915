/* SPDX-License-Identifier: Apache-2.0 */
/* format/bf16_inline.h: BF16 <-> F32 as inline functions for the operators' per-element loops, where
 * the out-of-line mm_bf16_to_f32 / mm_f32_to_bf16 (megamoe/formats.h) would cost a call per element.
 * The rule is the library's, bit for bit: F32 -> BF16 rounds to nearest even and quiets a NaN by
 * setting the top mantissa bit; format/convert.c defines the public functions with these. */
#ifndef MEGAMOE_FORMAT_BF16_INLINE_H
#define MEGAMOE_FORMAT_BF16_INLINE_H

#include <stdint.h>
#include <string.h>

static inline float mm_bf16_to_f32_inline(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t mm_f32_to_bf16_inline(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet the NaN */
    /* RNE on the dropped 16 bits: adding 0x7FFF plus the kept LSB carries exactly when the dropped
     * part is above half, or equal to half with an odd kept part. Overflow carries into Inf. */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

#endif
