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

/* mm_moe_exp_f32 on 16 lanes, the same operations in the same order. */
static inline __m512 exp16(__m512 x) {
    const __m512 hi = _mm512_set1_ps(MM_MOE_EXP_HI), lo = _mm512_set1_ps(MM_MOE_EXP_LO);
    const __m512 magic = _mm512_set1_ps(MM_MOE_EXP_MAGIC);
    x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), x, hi); /* NaN: compare false, kept */
    x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), x, lo);
    __m512 t = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(MM_MOE_EXP_LOG2E)), magic);
    __m512 kf = _mm512_sub_ps(t, magic);
    __m512i sb = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000)),
                         _mm512_set1_epi32(127)),
        23);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(kf, _mm512_set1_ps(MM_MOE_EXP_LN2_HI)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(kf, _mm512_set1_ps(MM_MOE_EXP_LN2_LO)));
    __m512 p = _mm512_set1_ps(MM_MOE_EXP_C7);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_MOE_EXP_C6));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_MOE_EXP_C5));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_MOE_EXP_C4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_MOE_EXP_C3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(MM_MOE_EXP_C2));
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

/* v > c ? c : v (NaN kept), and v > c ? c : (v < -c ? -c : v), as scenario.c's clamps. */
static inline __m512 clamp_high16(__m512 v, __m512 c) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, c, _CMP_GT_OQ), v, c);
}
static inline __m512 clamp_both16(__m512 v, __m512 c) {
    __m512 negc = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(c), _mm512_set1_epi32(INT32_MIN)));
    __m512 low = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, negc, _CMP_LT_OQ), v, negc);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, c, _CMP_GT_OQ), low, c);
}

/* The swiglu family on 16 lanes, in mm_moe_act_gated's order of operations; situglu (tanhf) stays
 * scalar. */
static void act_gated(const mm_moe_act *act, const float *g, const float *u, float *out, int64_t n) {
    if (act->kind != MM_MEGA_MOE_SWIGLU && act->kind != MM_MEGA_MOE_SWIGLUSTEP &&
        act->kind != MM_MEGA_MOE_SWIGLUOAI) {
        for (int64_t x = 0; x < n; x++) out[x] = mm_moe_act_gated(act, g[x], u[x]);
        return;
    }
    int clamped = act->clamp != 0.0f;
    const __m512 c = _mm512_set1_ps(act->clamp), alpha = _mm512_set1_ps(act->alpha),
                 beta = _mm512_set1_ps(act->beta);
    for (int64_t x = 0; x < n; x += 16) {
        __mmask16 m = n - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - x)) - 1);
        __m512 vg = _mm512_maskz_loadu_ps(m, g + x), vu = _mm512_maskz_loadu_ps(m, u + x), a;
        switch (act->kind) {
        case MM_MEGA_MOE_SWIGLU:
            if (clamped) {
                vg = clamp_high16(vg, c);
                vu = clamp_both16(vu, c);
            }
            a = _mm512_mul_ps(_mm512_mul_ps(vg, sigmoid16(vg)), vu);
            break;
        case MM_MEGA_MOE_SWIGLUSTEP: {
            __m512 sv = _mm512_mul_ps(vg, sigmoid16(vg));
            if (clamped) {
                vu = clamp_both16(vu, c);
                sv = clamp_high16(sv, c);
            }
            a = _mm512_mul_ps(sv, vu);
            break;
        }
        default: /* swigluoai */
            if (clamped) {
                vg = clamp_high16(vg, c);
                vu = clamp_both16(vu, c);
            }
            a = _mm512_mul_ps(_mm512_mul_ps(vg, sigmoid16(_mm512_mul_ps(alpha, vg))),
                              _mm512_add_ps(vu, beta));
            break;
        }
        _mm512_mask_storeu_ps(out + x, m, a);
    }
}

const mm_moe_rowops mm_moe_rowops_avx512_table = {axpy_bf16, add_bf16, to_bf16, round_bf16, act_gated};
