/* ops/mega_moe/rowops_avx512.c: AVX-512 versions of the row loops of rowops.c, bit-identical to them.
 * BF16 -> F32 is a shift; F32 -> BF16 is the RNE add-and-shift, and a vector holding a NaN is handed
 * to the scalar conversion (which keeps the library's NaN payload rule). Tails use masked loads. */
#include <immintrin.h>

#include "ops/mega_moe/mega_moe_internal.h"

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
            if (nan & (1u << i)) tmp[i] = mm_moe_f32_to_bf16(src[i]);
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

const mm_moe_rowops mm_moe_rowops_avx512_table = {axpy_bf16, add_bf16, to_bf16, round_bf16};
