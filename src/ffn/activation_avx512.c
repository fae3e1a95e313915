/* SPDX-License-Identifier: Apache-2.0 */
/* ffn/activation_avx512.c: the AVX-512 forms of the activation table's rows (activation.c), each
 * repeating its scalar form operation for operation (same F32 roundings in the same order, no fused
 * multiply-add), so that both give the same bits; situglu (tanhf) and gelu have no vector form. */
#include <immintrin.h>

#include "ffn/activation.h"

/* mm_ffn_exp_f32 on 16 lanes, the same operations in the same order. */
static inline __m512 exp16(__m512 x) {
    const __m512 hi = _mm512_set1_ps(MM_FFN_EXP_HI), lo = _mm512_set1_ps(MM_FFN_EXP_LO);
    const __m512 magic = _mm512_set1_ps(MM_FFN_EXP_MAGIC);
    x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), x, hi); /* NaN: compare false, kept */
    x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), x, lo);
    __m512 t = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(MM_FFN_EXP_LOG2E)), magic);
    __m512 kf = _mm512_sub_ps(t, magic);
    __m512i sb = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000)),
                         _mm512_set1_epi32(127)),
        23);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(kf, _mm512_set1_ps(MM_FFN_EXP_LN2_HI)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(kf, _mm512_set1_ps(MM_FFN_EXP_LN2_LO)));
    __m512 p = _mm512_set1_ps(MM_FFN_EXP_C7);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_FFN_EXP_C6));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_FFN_EXP_C5));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_FFN_EXP_C4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_FFN_EXP_C3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_FFN_EXP_C2));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    return _mm512_mul_ps(p, _mm512_castsi512_ps(sb));
}

/* 1 / (1 + exp(-z)); -z flips the sign bit as the scalar negation does (NaN payloads included). */
static inline __m512 sigmoid16(__m512 z) {
    __m512 neg = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(z), _mm512_set1_epi32(INT32_MIN)));
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, exp16(neg)));
}

/* v > c ? c : v (NaN kept), and v > c ? c : (v < -c ? -c : v), as activation.c's clamps. */
static inline __m512 clamp_high16(__m512 v, __m512 c) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, c, _CMP_GT_OQ), v, c);
}
static inline __m512 clamp_both16(__m512 v, __m512 c) {
    __m512 negc = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(c), _mm512_set1_epi32(INT32_MIN)));
    __m512 low = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, negc, _CMP_LT_OQ), v, negc);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, c, _CMP_GT_OQ), low, c);
}

#define LANES(n, x) (n - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - x)) - 1))

/* Gate and up lanes x.. of the rows, clamped as swiglu and swigluoai clamp their inputs (gate from
 * above, up both ways) when the activation has a clamp. */
static inline void load_clamped_inputs(const mm_ffn_act *act, const float *g, const float *u, __mmask16 m,
                                       __m512 *vg, __m512 *vu) {
    *vg = _mm512_maskz_loadu_ps(m, g);
    *vu = _mm512_maskz_loadu_ps(m, u);
    if (act->clamp != 0.0f) {
        const __m512 c = _mm512_set1_ps(act->clamp);
        *vg = clamp_high16(*vg, c);
        *vu = clamp_both16(*vu, c);
    }
}

void mm_ffn_swiglu_avx512(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n) {
    for (int64_t x = 0; x < n; x += 16) {
        __mmask16 m = LANES(n, x);
        __m512 vg, vu;
        load_clamped_inputs(act, g + x, u + x, m, &vg, &vu);
        _mm512_mask_storeu_ps(out + x, m, _mm512_mul_ps(_mm512_mul_ps(vg, sigmoid16(vg)), vu));
    }
}

void mm_ffn_swiglustep_avx512(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n) {
    const __m512 c = _mm512_set1_ps(act->clamp);
    for (int64_t x = 0; x < n; x += 16) {
        __mmask16 m = LANES(n, x);
        __m512 vg = _mm512_maskz_loadu_ps(m, g + x), vu = _mm512_maskz_loadu_ps(m, u + x);
        __m512 sv = _mm512_mul_ps(vg, sigmoid16(vg));
        if (act->clamp != 0.0f) {
            vu = clamp_both16(vu, c);
            sv = clamp_high16(sv, c);
        }
        _mm512_mask_storeu_ps(out + x, m, _mm512_mul_ps(sv, vu));
    }
}

void mm_ffn_swigluoai_avx512(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n) {
    const __m512 alpha = _mm512_set1_ps(act->alpha), beta = _mm512_set1_ps(act->beta);
    for (int64_t x = 0; x < n; x += 16) {
        __mmask16 m = LANES(n, x);
        __m512 vg, vu;
        load_clamped_inputs(act, g + x, u + x, m, &vg, &vu);
        __m512 a =
            _mm512_mul_ps(_mm512_mul_ps(vg, sigmoid16(_mm512_mul_ps(alpha, vg))), _mm512_add_ps(vu, beta));
        _mm512_mask_storeu_ps(out + x, m, a);
    }
}
