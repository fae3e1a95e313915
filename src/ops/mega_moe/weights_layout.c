/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/weights_layout.c: the packing-time re-layouts of weights_layout.h (plain copies: they run
 * once per weights handle, never per call). */
#include "ops/mega_moe/weights_layout.h"

#include <string.h>

void mm_moe_deinterleave_rows(uint8_t *dst, const uint8_t *src, int64_t inter, int64_t row_bytes) {
    for (int64_t n = 0; n < 2 * inter; n++)
        memcpy(dst + n * row_bytes, src + mm_moe_stored_channel(n, inter, 1) * row_bytes, (size_t)row_bytes);
}

void mm_moe_deinterleave_cols(uint8_t *dst, const uint8_t *src, int64_t rows, int64_t inter, int bits) {
    int64_t n_cols = 2 * inter;
    if (bits == 4) {
        int64_t row_bytes = (n_cols + 1) / 2;
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *s = src + r * row_bytes;
            uint8_t *d = dst + r * row_bytes;
            memset(d, 0, (size_t)row_bytes);
            for (int64_t n = 0; n < n_cols; n++) {
                int64_t c = mm_moe_stored_channel(n, inter, 1);
                uint8_t nib = (uint8_t)((s[c / 2] >> ((c & 1) * 4)) & 0x0F);
                d[n / 2] = (uint8_t)(d[n / 2] | (nib << ((n & 1) * 4)));
            }
        }
        return;
    }
    int64_t size = bits / 8;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t n = 0; n < n_cols; n++)
            memcpy(dst + (r * n_cols + n) * size,
                   src + (r * n_cols + mm_moe_stored_channel(n, inter, 1)) * size, (size_t)size);
}

void mm_moe_spread_block_rows(uint8_t *dst, const uint8_t *src, int64_t n, int64_t block_n, int64_t row_bytes,
                              int64_t inter, int interleave) {
    for (int64_t c = 0; c < n; c++)
        memcpy(dst + c * row_bytes, src + mm_moe_stored_channel(c, inter, interleave) / block_n * row_bytes,
               (size_t)row_bytes);
}
