/* SPDX-License-Identifier: Apache-2.0 */
/* format/int_quant.c: INT8 per-token quantization (div-away, mul-even), INT4 packing and Ascend's UINT64
 * weight-scale form (docs/numerics.md "INT8 per-token quantization", "INT4, UINT64 scales, weight-scale
 * layout").
 *
 * The rounding of x / s and x * m to integers is done on the F32 result with exact integer arithmetic
 * (truncate, then compare the exact fractional part with 0.5), so it does not depend on the FPU rounding
 * mode. A row that holds NaN or +-Inf gets scale NaN and q = 0 (docs/numerics.md): the poison reaches the
 * dequantized result instead of being hidden, and q stays a defined integer. */
#include <string.h>

#include "core/error.h"
#include "format/convert.h"
#include "megamoe/formats.h"

#define INT8_LIMIT 127

/* Largest |x[i]|, or -1 when the row holds NaN or Inf. */
static float row_amax(const float *x, int64_t n) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        uint32_t abs_bits = mm_f32_bits(x[i]) & 0x7FFFFFFFu;
        if (abs_bits >= 0x7F800000u) return -1.0f;
        float a = mm_f32_from_bits(abs_bits);
        if (a > amax) amax = a;
    }
    return amax;
}

/* t rounded to an integer in [-127, 127]. t = +-Inf clamps; NaN (0/0 or 0*Inf, possible only when the
 * scale under/overflowed for a tiny nonzero amax) gives 0. half_even selects the tie rule. */
static int8_t round_clamp(float t, int half_even) {
    if (t != t) return 0;
    if (t > 128.0f) t = 128.0f;
    if (t < -128.0f) t = -128.0f;
    int whole = (int)t;            /* truncation toward zero, exact here */
    float frac = t - (float)whole; /* exact: t and whole share the binade scale */
    float mag = frac < 0 ? -frac : frac;
    int step = t < 0 ? -1 : 1;
    if (mag > 0.5f || (mag == 0.5f && (!half_even || (whole & 1)))) whole += step;
    if (whole > INT8_LIMIT) whole = INT8_LIMIT;
    if (whole < -INT8_LIMIT) whole = -INT8_LIMIT;
    return (int8_t)whole;
}

/* The amax of the row, or 0 after finishing a row no scale can serve: q = 0 everywhere, and scale NaN
 * (NaN or Inf in the row) or 0 (an all-zero row; never 0/0). Shared by both rounding rules. */
static float row_amax_or_finish(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = row_amax(x, n);
    if (amax > 0) return amax;
    if (n > 0) memset(q, 0, (size_t)n);
    *scale = amax < 0 ? mm_f32_from_bits(0x7FC00000u) : 0.0f;
    return 0.0f;
}

void mm_int8_quantize_row_div_away(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = row_amax_or_finish(x, n, q, scale);
    if (amax == 0) return;
    float s = amax / 127.0f;
    for (int64_t i = 0; i < n; i++) q[i] = round_clamp(x[i] / s, 0);
    *scale = s;
}

void mm_int8_quantize_row_mul_even(const float *x, int64_t n, mm_int8_scale_form form, int8_t *q,
                                   float *scale) {
    float amax = row_amax_or_finish(x, n, q, scale);
    if (amax == 0) return;
    float m = 127.0f / amax;
    for (int64_t i = 0; i < n; i++) q[i] = round_clamp(x[i] * m, 1);
    *scale = form == MM_INT8_SCALE_INV_MUL ? 1.0f / m : amax / 127.0f;
}

/* ---- INT4 ---- */

mm_status mm_int4_pack(const int8_t *values, int64_t n, uint8_t *packed, mm_error *err) {
    if (n < 0) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "n = %lld is negative", (long long)n);
    if (n > 0 && (!values || !packed))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s is NULL with n = %lld",
                       !values ? "values" : "packed", (long long)n);
    /* Validate first so that a failed call leaves `packed` untouched. */
    for (int64_t i = 0; i < n; i++)
        if (values[i] < -8 || values[i] > 7)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "values[%lld] = %d is outside the INT4 range [-8, 7]", (long long)i, values[i]);
    for (int64_t i = 0; i < n; i += 2) {
        uint8_t lo = (uint8_t)(values[i] & 0x0F);
        uint8_t hi = i + 1 < n ? (uint8_t)(values[i + 1] & 0x0F) : 0;
        packed[i >> 1] = (uint8_t)(lo | (hi << 4));
    }
    return MM_OK;
}

void mm_int4_unpack(const uint8_t *packed, int64_t n, int8_t *values) {
    for (int64_t i = 0; i < n; i++) {
        int nibble = mm_nibble_get(packed, i);
        values[i] = (int8_t)(nibble >= 8 ? nibble - 16 : nibble);
    }
}

/* ---- weight scales ---- */

mm_status mm_scale_u64_to_f32(uint64_t packed, float *out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "out is NULL");
    if (packed >> 32)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "UINT64 scale 0x%016llx has nonzero high 32 bits 0x%08llx; they must be 0 (the low "
                       "32 bits hold the F32 pattern)",
                       (unsigned long long)packed, (unsigned long long)(packed >> 32));
    *out = mm_f32_from_bits((uint32_t)packed);
    return MM_OK;
}

mm_status mm_scale_u64_row_to_f32(const uint64_t *packed, int64_t n, float *out, mm_error *err) {
    if (n < 0) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "n = %lld is negative", (long long)n);
    if (n > 0 && (!packed || !out))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s is NULL with n = %lld", !packed ? "packed" : "out",
                       (long long)n);
    for (int64_t i = 0; i < n; i++) {
        mm_status st = mm_scale_u64_to_f32(packed[i], &out[i], err);
        if (st != MM_OK) return mm_error_prefix(err, "scale[%lld]", (long long)i);
    }
    return MM_OK;
}

mm_status mm_mx_weight_scales_pack(const uint8_t *group_scales, int64_t n_rows, int64_t k_len, uint8_t *out,
                                   mm_error *err) {
    if (n_rows < 0 || k_len < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s = %lld is negative", n_rows < 0 ? "n_rows" : "k_len",
                       (long long)(n_rows < 0 ? n_rows : k_len));
    int64_t groups = (k_len + 31) / 32, pairs = (k_len + 63) / 64;
    if (n_rows > 0 && pairs > 0 && (!group_scales || !out))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s is NULL with n_rows = %lld, k_len = %lld",
                       !group_scales ? "group_scales" : "out", (long long)n_rows, (long long)k_len);
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t g = 0; g < 2 * pairs; g++)
            out[r * pairs * 2 + g] = g < groups ? group_scales[r * groups + g] : 0;
    }
    return MM_OK;
}
