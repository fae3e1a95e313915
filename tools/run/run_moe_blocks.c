/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_blocks.c: block-scaled weights for `megamoe run` (the A16W8-FP8 and A16W4-INT rows,
 * docs/weight_formats.md), quantized the way the checkpoints that ship them are made:
 *
 *   FP8 E4M3 (DeepSeek-V3): per block s = amax / 448, q = E4M3_RNE(v / s);
 *   UINT4 with zero points (AWQ / GPTQ, asymmetric): per block over [lo, hi] = [min(v, 0), max(v, 0)],
 *   s = (hi - lo) / 15, z = round(-lo / s), q = clamp(round(v / s) + z, 0, 15);
 *
 * in F32 (an all-zero block gets s = 1, z = 0). The values come as integer levels times a power-of-two
 * step (run_moe_data.c), so a block's codes are a table over its 256 levels: one conversion per level,
 * not per element. The operator dequantizes w' = BF16(F32(F32(q - z) * s)); the check's float64 reference
 * does the same from these bytes, so this rule is the data's, not something the check relies on. */
#include <math.h>
#include <string.h>

#include "megamoe/formats.h"
#include "run/run_moe.h"

enum { LEVELS = 256, LEVEL_BIAS = 128 };

/* Scale, zero point and the code of every level of one block whose levels span [lo, hi]. */
static float block_codes(mm_dtype dtype, int lo, int hi, float step, uint8_t codes[LEVELS], uint8_t *zero) {
    *zero = 0;
    if (dtype == MM_DTYPE_FP8_E4M3FN) {
        int m = -lo > hi ? -lo : hi;
        float s = m > 0 ? (float)m * step / 448.0f : 1.0f;
        for (int j = lo; j <= hi; j++) codes[j + LEVEL_BIAS] = mm_f32_to_fp8_e4m3fn((float)j * step / s);
        return s;
    }
    int l0 = lo < 0 ? lo : 0, h0 = hi > 0 ? hi : 0;
    float s = h0 > l0 ? (float)(h0 - l0) * step / 15.0f : 1.0f;
    float z = fminf(15.0f, fmaxf(0.0f, rintf(-(float)l0 * step / s)));
    *zero = (uint8_t)z;
    for (int j = lo; j <= hi; j++)
        codes[j + LEVEL_BIAS] = (uint8_t)fminf(15.0f, fmaxf(0.0f, rintf((float)j * step / s) + z));
    return s;
}

void run_moe_block_quantize(mm_dtype dtype, const int8_t *levels, int64_t n, int64_t k, float step,
                            int64_t bn, int64_t bk, uint8_t *data, float *scales, uint8_t *zeros) {
    int64_t row_bytes = mm_dtype_row_bytes(dtype, k), kb = (k + bk - 1) / bk;
    int nibbles = mm_dtype_bits(dtype) == 4;
    uint8_t codes[LEVELS];
    if (nibbles) memset(data, 0, (size_t)(n * row_bytes));
    for (int64_t r0 = 0; r0 < n; r0 += bn)
        for (int64_t c0 = 0; c0 < k; c0 += bk) {
            int64_t r1 = r0 + bn < n ? r0 + bn : n, c1 = c0 + bk < k ? c0 + bk : k;
            int lo = 127, hi = -128;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) {
                    int v = levels[r * k + c];
                    lo = v < lo ? v : lo;
                    hi = v > hi ? v : hi;
                }
            uint8_t zero;
            int64_t b = (r0 / bn) * kb + c0 / bk;
            scales[b] = block_codes(dtype, lo, hi, step, codes, &zero);
            if (zeros) zeros[b] = zero;
            for (int64_t r = r0; r < r1; r++) {
                uint8_t *row = data + r * row_bytes;
                for (int64_t c = c0; c < c1; c++) {
                    uint8_t q = codes[levels[r * k + c] + LEVEL_BIAS];
                    if (nibbles)
                        row[c >> 1] |= (uint8_t)(q << ((c & 1) * 4)); /* element 2i in the low nibble */
                    else
                        row[c] = q;
                }
            }
        }
}
