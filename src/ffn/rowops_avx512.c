/* SPDX-License-Identifier: Apache-2.0 */
/* ffn/rowops_avx512.c: AVX-512 twins of the row kernels of rowops.c, bit-identical to them.
 * BF16 -> F32 is a shift; F32 -> BF16 is the RNE add-and-shift, and a vector holding a NaN is handed
 * to the scalar conversion (which keeps the library's NaN payload rule). Tails use masked loads. */
#include <immintrin.h>
#include <string.h>

#include "ffn/rowops.h"
#include "format/bf16_inline.h"

static inline __m512 load_bf16(const uint16_t *o, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, o);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static void axpy_bf16(float *acc, float w, const uint16_t *o, int64_t n) {
    __m512 vw = _mm512_set1_ps(w);
    for (int64_t x = 0; x < n; x += 16) {
        __mmask16 m = n - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - x)) - 1);
        __m512 term = _mm512_mul_ps(vw, load_bf16(o + x, m));
        __m512 a = _mm512_maskz_loadu_ps(m, acc + x);
        _mm512_mask_storeu_ps(acc + x, m, _mm512_add_ps(a, term));
    }
}

static void add_bf16(float *acc, const uint16_t *o, int64_t n) {
    for (int64_t x = 0; x < n; x += 16) {
        __mmask16 m = n - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - x)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, acc + x);
        _mm512_mask_storeu_ps(acc + x, m, _mm512_add_ps(a, load_bf16(o + x, m)));
    }
}

/* 16 F32 values rounded to BF16 (RNE); lanes with NaN are converted by the scalar rule. */
static inline __m256i round16(__m512 v, const float *src, __mmask16 m) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
    __m256i out = _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
    __mmask16 nan = _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
    if (nan) {
        uint16_t tmp[16];
        _mm256_storeu_si256((__m256i *)(void *)tmp, out);
        for (int i = 0; i < 16; i++)
            if (nan & (1u << i)) tmp[i] = mm_f32_to_bf16_inline(src[i]);
        out = _mm256_loadu_si256((const __m256i *)(const void *)tmp);
    }
    return out;
}

static void to_bf16(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t x = 0; x < n; x += 16) {
        __mmask16 m = n - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - x)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, src + x);
        _mm256_mask_storeu_epi16(dst + x, m, round16(v, src + x, m));
    }
}

static void round_bf16(float *v, int64_t n) {
    for (int64_t x = 0; x < n; x += 16) {
        __mmask16 m = n - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - x)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, v + x);
        __m256i b = round16(a, v + x, m);
        __m512 back = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
        _mm512_mask_storeu_ps(v + x, m, back);
    }
}

static void from_bf16(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t x = 0; x < n; x += 16) {
        __mmask16 m = n - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - x)) - 1);
        _mm512_mask_storeu_ps(dst + x, m, load_bf16(src + x, m));
    }
}

/* INT8 per-row quantization with the bits of format/int_quant.c: the amax on the absolute bit
 * patterns (ordered like the values), t = x / s or x * m as one rounded F32 operation, t clamped to
 * [-128, 128], rounded (half away: truncate, then one step away when the exact fraction is >= 0.5;
 * half even: the hardware's round-to-nearest-even), clamped to [-127, 127], NaN t to 0. Rows with NaN
 * or Inf, all-zero and empty rows go to the scalar code of formats.h (their scale rules live there; the
 * portable table holds the same functions). */
static void int8_quantize(const float *x, int64_t n, int half_even, mm_int8_scale_form form, int8_t *q,
                          float *scale) {
    __m512i vmax = _mm512_setzero_si512();
    __mmask16 bad = 0;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512i u = _mm512_and_si512(_mm512_maskz_loadu_epi32(m, x + i), _mm512_set1_epi32(0x7FFFFFFF));
        bad |= _mm512_mask_cmpge_epu32_mask(m, u, _mm512_set1_epi32(0x7F800000));
        vmax = _mm512_max_epu32(vmax, u);
    }
    uint32_t amax_bits = (uint32_t)_mm512_reduce_max_epu32(vmax);
    if (bad || amax_bits == 0) {
        if (half_even)
            mm_int8_quantize_row_mul_even(x, n, form, q, scale);
        else
            mm_int8_quantize_row_div_away(x, n, q, scale);
        return;
    }
    float amax;
    memcpy(&amax, &amax_bits, sizeof amax);
    float s = amax / 127.0f, mul = 127.0f / amax;
    __m512 vs = _mm512_set1_ps(s), vm = _mm512_set1_ps(mul), lim = _mm512_set1_ps(128.0f);
    __m512 qlim = _mm512_set1_ps(127.0f), half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 t = half_even ? _mm512_mul_ps(v, vm) : _mm512_div_ps(v, vs);
        __mmask16 num = _mm512_cmp_ps_mask(t, t, _CMP_ORD_Q);
        t = _mm512_min_ps(_mm512_max_ps(t, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
        __m512 r;
        if (half_even) {
            r = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        } else {
            __m512 whole = _mm512_roundscale_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m512 mag = _mm512_abs_ps(_mm512_sub_ps(t, whole));
            __mmask16 up = _mm512_cmp_ps_mask(mag, half, _CMP_GE_OQ);
            __mmask16 neg = _mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_LT_OQ);
            r = _mm512_mask_add_ps(whole, up & (__mmask16)~neg, whole, one);
            r = _mm512_mask_sub_ps(r, up & neg, r, one);
        }
        r = _mm512_min_ps(_mm512_max_ps(r, _mm512_sub_ps(_mm512_setzero_ps(), qlim)), qlim);
        __m512i iv = _mm512_maskz_cvttps_epi32(num, r);
        _mm_mask_storeu_epi8(q + i, m, _mm512_cvtepi32_epi8(iv));
    }
    *scale = !half_even ? s : form == MM_INT8_SCALE_INV_MUL ? 1.0f / mul : amax / 127.0f;
}

static void int8_div_away(const float *x, int64_t n, int8_t *q, float *scale) {
    int8_quantize(x, n, 0, MM_INT8_SCALE_AMAX_DIV_127, q, scale);
}
static void int8_mul_even(const float *x, int64_t n, mm_int8_scale_form form, int8_t *q, float *scale) {
    int8_quantize(x, n, 1, form, q, scale);
}

const mm_rowops mm_rowops_avx512_table = {axpy_bf16, add_bf16,      to_bf16,      round_bf16,
                                          from_bf16, int8_div_away, int8_mul_even};
