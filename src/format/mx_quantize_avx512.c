/* SPDX-License-Identifier: Apache-2.0 */
/* format/mx_quantize_avx512.c: the AVX-512 twin of format/mx.c's group loop (MX block-32 quantization of
 * whole groups), bit-identical to it. Called only after mm_cpu_isa() >= MM_ISA_AVX512.
 *
 * Per group: the F32 input is rounded to BF16 with the library's rule (RNE, a NaN quieted by setting bit
 * 6), the amax pattern and scale byte are mx.c's (mm_mx_scale_byte_of_amax_bits), and each element takes
 * its code from the same exponent x mantissa table as the scalar path (mx_code_table.h), looked up by a
 * dword gather at byte offsets; an element below the table's exponents is its signed zero, as in the
 * scalar path. The elements the table does not cover (BF16 subnormals other than +-0, and scaled
 * exponents above the table, which a finite group's floor rule never produces) go to the scalar encoder
 * lane by lane, so every lane gives the scalar path's code by construction. */
#include <immintrin.h>
#include <stdint.h>

#include "format/mx_code_table.h"
#include "format/mx_quantize.h"

/* 16 F32 values -> BF16 patterns (16 x 16 bits in 32-bit lanes), the library's rule. */
static inline __m512i round_to_bf16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                            _mm512_set1_epi32(0x7F800000));
    return _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}

/* The largest of 32 16-bit magnitudes. */
static inline uint16_t max_magnitude(__m512i v) {
    __m512i a = _mm512_and_si512(v, _mm512_set1_epi16(0x7FFF));
    __m256i m = _mm256_max_epu16(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
    __m128i x = _mm_max_epu16(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    /* minpos on the complement finds the maximum */
    x = _mm_minpos_epu16(_mm_xor_si128(x, _mm_set1_epi16(-1)));
    return (uint16_t)(0xFFFF - _mm_extract_epi16(x, 0));
}

typedef struct group_coder {
    const mm_mx_code_table *table;
    mm_dtype elem;
    uint8_t zero_code[2]; /* codes of +0 and -0 (the scalar encoder's) */
} group_coder;

/* Codes of 16 BF16 patterns (32-bit lanes) of a finite group with scale byte b (not 0xFF), in the low
 * bytes of the lanes. */
static inline __m512i encode16(const group_coder *c, __m512i v, int b) {
    const mm_mx_code_table *t = c->table;
    __m512i ev = _mm512_and_si512(_mm512_srli_epi32(v, 7), _mm512_set1_epi32(0xFF));
    __m512i scaled = _mm512_sub_epi32(ev, _mm512_set1_epi32(b));
    __mmask16 negative = _mm512_test_epi32_mask(v, _mm512_set1_epi32(0x8000));
    __mmask16 zero = _mm512_testn_epi32_mask(v, _mm512_set1_epi32(0x7FFF));
    __mmask16 subnormal = _mm512_testn_epi32_mask(ev, ev) & (__mmask16)~zero;
    __mmask16 below = _mm512_cmplt_epi32_mask(scaled, _mm512_set1_epi32(t->min_exp)) & (__mmask16)~zero &
                      (__mmask16)~subnormal;
    __mmask16 above = _mm512_cmpgt_epi32_mask(scaled, _mm512_set1_epi32(t->max_exp));
    __mmask16 exact = subnormal | above;
    __mmask16 looked_up = (__mmask16) ~(zero | subnormal | below | above);
    __m512i idx =
        _mm512_add_epi32(_mm512_slli_epi32(_mm512_sub_epi32(scaled, _mm512_set1_epi32(t->min_exp)), 7),
                         _mm512_and_si512(v, _mm512_set1_epi32(0x7F)));
    /* 4 bytes read at a byte offset of at most (max_exp - min_exp) * 128 + 127: inside the row array, which
     * has MM_MX_TABLE_MAX_EXPS rows, more than any type uses (E5M2: 33 of 34) */
    __m512i code = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), looked_up, idx, t->code, 1);
    code = _mm512_and_si512(code, _mm512_set1_epi32(0xFF));
    code = _mm512_mask_or_epi32(code, negative & (__mmask16)~zero, code, _mm512_set1_epi32(t->sign_bit));
    code = _mm512_mask_mov_epi32(code, zero & (__mmask16)~negative, _mm512_set1_epi32(c->zero_code[0]));
    code = _mm512_mask_mov_epi32(code, zero & negative, _mm512_set1_epi32(c->zero_code[1]));
    if (exact) {
        _Alignas(64) uint32_t lanes[16], codes[16];
        _mm512_store_si512(lanes, v);
        _mm512_store_si512(codes, code);
        for (int i = 0; i < 16; i++)
            if (exact & (1u << i)) codes[i] = mm_mx_encode_element(c->elem, t, (uint16_t)lanes[i], b);
        code = _mm512_load_si512(codes);
    }
    return code;
}

/* The 32 codes of one group (32-bit lanes, two halves) stored as FP8 bytes or FP4 nibble pairs. */
static inline void store_codes(int nibbles, __m512i lo, __m512i hi, uint8_t *q) {
    if (!nibbles) {
        _mm_storeu_si128((__m128i *)(void *)q, _mm512_cvtepi32_epi8(lo));
        _mm_storeu_si128((__m128i *)(void *)(q + 16), _mm512_cvtepi32_epi8(hi));
        return;
    }
    /* Dword 2i + 1 of a half shifted into the high nibble of dword 2i, then every other dword taken. */
    for (int h = 0; h < 2; h++) {
        __m512i v = h ? hi : lo;
        __m512i pairs = _mm512_or_si512(v, _mm512_slli_epi64(_mm512_srli_epi64(v, 32), 4));
        _mm_storel_epi64((__m128i *)(void *)(q + 8 * h), _mm512_cvtepi64_epi8(pairs));
    }
}

void mm_mx_quantize_groups_avx512(const uint16_t *x_bf16, const float *x_f32, int64_t n_groups, mm_dtype elem,
                                  int emax, uint8_t *q, uint8_t *scales) {
    group_coder c = {mm_mx_code_table_of(elem), elem, {0, 0}};
    c.zero_code[0] = mm_mx_encode_element(elem, c.table, 0x0000, 127);
    c.zero_code[1] = mm_mx_encode_element(elem, c.table, 0x8000, 127);
    int nibbles = c.table->sign_bit == 0x08;
    for (int64_t g = 0; g < n_groups; g++) {
        __m512i half[2];
        for (int h = 0; h < 2; h++)
            half[h] = x_f32 ? round_to_bf16(_mm512_loadu_ps(x_f32 + 32 * g + 16 * h))
                            : _mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                  (const __m256i *)(const void *)(x_bf16 + 32 * g + 16 * h)));
        __m512i words = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(half[0])),
                                           _mm512_cvtepi32_epi16(half[1]), 1);
        uint16_t amax = max_magnitude(words);
        uint8_t scale = mm_mx_scale_byte_of_amax_bits(amax, emax);
        scales[g] = scale;
        uint8_t *dst = q + (nibbles ? 16 : 32) * g;
        __m512i code[2];
        if (scale == 0xFF) { /* Inf / NaN group: FP8 NaN with the element's sign, FP4 0 */
            for (int h = 0; h < 2; h++)
                code[h] = nibbles ? _mm512_setzero_si512()
                                  : _mm512_or_si512(_mm512_set1_epi32(0x7F),
                                                    _mm512_and_si512(_mm512_srli_epi32(half[h], 8),
                                                                     _mm512_set1_epi32(0x80)));
        } else if ((amax >> 7) == 0) { /* zero group: +0 codes, even for -0 and subnormals */
            code[0] = code[1] = _mm512_setzero_si512();
        } else {
            for (int h = 0; h < 2; h++) code[h] = encode16(&c, half[h], scale);
        }
        store_codes(nibbles, code[0], code[1], dst);
    }
}
