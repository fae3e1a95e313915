/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_model_dequant.c: the loaders' dequantize-on-load rule (src/model/dequant.c),
 * w' = BF16_RNE(F32(decode(q) * scale)), against hand-computed values: FP8 E4M3 codes with F32 block
 * scales (block rows / columns, a partial last block, a subnormal code, one rounding with ties to
 * even), and MXFP4 groups (element 2m in the low nibble of byte m, E8M0 scale 2^(s - 127)). */
#include <string.h>

#include "megamoe/formats.h"
#include "model/model_internal.h"
#include "testlib.h"

static float bf(uint16_t bits) {
    return mm_bf16_to_f32(bits);
}

static void test_fp8_blocks(void) {
    /* 3 x 3 codes, blocks 2 x 2: scales (2, 2) = [[0.5, 2], [3, 0.1]]; the last block row and column
     * are partial. 0x38 = 1.0, 0x3C = 1.5, 0xB8 = -1.0, 0x7E = 448, 0x01 = 2^-9, 0x00 = 0. */
    const uint8_t q[9] = {0x38, 0x3C, 0x3C, 0x01, 0x00, 0xB8, 0xB8, 0x38, 0x7E};
    const float s[4] = {0.5f, 2.0f, 3.0f, 0.1f};
    uint16_t out[9];
    mm_model_dequant_fp8_block(q, 3, 3, s, 2, 2, out);
    CHECK(bf(out[0]) == 0.5f && bf(out[1]) == 0.75f && bf(out[2]) == 3.0f);
    CHECK(bf(out[3]) == 0.0009765625f && bf(out[4]) == 0.0f && bf(out[5]) == -2.0f); /* 2^-9 * 0.5 = 2^-10 */
    CHECK(bf(out[6]) == -3.0f && bf(out[7]) == 3.0f);
    CHECK(bf(out[8]) == 44.75f); /* 448 * 0.1f = 44.800001 in F32, 44.75 in BF16 (7 fraction bits) */
    /* one rounding of the F32 product, ties to even: 1 * (1 + 2^-8) -> 1, 1 * (1 + 3 2^-8) -> 1 + 2^-6 */
    const uint8_t one[2] = {0x38, 0x38};
    const float tie[2] = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256};
    mm_model_dequant_fp8_block(one, 2, 1, tie, 1, 1, out);
    CHECK(out[0] == 0x3F80 && out[1] == 0x3F82);
}

static void test_mxfp4(void) {
    /* one row of 64: group 0 scale byte 128 (x2), group 1 scale 120 (x 2^-7). byte 0 = 0x21: elements
     * 0.5, 1.0; byte 1 = 0xF9: -0.5, -6; byte 16 (group 1) = 0x7E: element 32 = -4 (code 14), 33 = 6. */
    uint8_t blocks[32], scales[2] = {128, 120};
    memset(blocks, 0, sizeof blocks);
    blocks[0] = 0x21;
    blocks[1] = 0xF9;
    blocks[16] = 0x7E;
    uint16_t out[64];
    mm_model_dequant_mxfp4(blocks, scales, 1, 64, out);
    CHECK(bf(out[0]) == 1.0f && bf(out[1]) == 2.0f && bf(out[2]) == -1.0f && bf(out[3]) == -12.0f);
    CHECK(bf(out[4]) == 0.0f && bf(out[31]) == 0.0f);
    CHECK(bf(out[32]) == -4.0f / 128 && bf(out[33]) == 6.0f / 128);
}

int main(void) {
    test_fp8_blocks();
    test_mxfp4();
    return mm_test_finish("test_model_dequant");
}
