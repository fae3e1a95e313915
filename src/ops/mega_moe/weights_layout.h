/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/weights_layout.h: re-layouts of expert weights done once at packing time, so the hot path
 * sees one layout: weight1_interleave's alternating gate/up channels brought to gate [0, I) then up
 * [I, 2I) (weight1, bias1, scales1, zeros1 alike), and block scales spread to one row per channel. */
#ifndef MEGAMOE_OPS_MEGA_MOE_WEIGHTS_LAYOUT_H
#define MEGAMOE_OPS_MEGA_MOE_WEIGHTS_LAYOUT_H

#include <stdint.h>

/* The stored channel of channel n (gate n < I, else up n - I) of an interleaved weight1 (gpt-oss's
 * gate_up_proj: gate i at 2i, up i at 2i + 1); without interleave the channel itself. */
static inline int64_t mm_moe_stored_channel(int64_t n, int64_t inter, int interleave) {
    if (!interleave) return n;
    return n < inter ? 2 * n : 2 * (n - inter) + 1;
}

/* dst row n = src row mm_moe_stored_channel(n) for the 2I channels stored as rows of row_bytes bytes. */
void mm_moe_deinterleave_rows(uint8_t *dst, const uint8_t *src, int64_t inter, int64_t row_bytes);
/* The same for channels stored as columns: `rows` rows of 2I elements of `bits` bits (4-bit elements
 * packed two per byte along the row, element 2i in the low nibble). */
void mm_moe_deinterleave_cols(uint8_t *dst, const uint8_t *src, int64_t rows, int64_t inter, int bits);
/* Block-scale rows (one row of row_bytes per block of block_n channels) spread to one row per channel
 * for n channels, taking channel n's row from mm_moe_stored_channel(n): the scale of every element is
 * unchanged, and the result has block_n = 1 in channel order. */
void mm_moe_spread_block_rows(uint8_t *dst, const uint8_t *src, int64_t n, int64_t block_n, int64_t row_bytes,
                              int64_t inter, int interleave);

#endif
