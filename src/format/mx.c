/* SPDX-License-Identifier: Apache-2.0 */
/* format/mx.c: MX block-32 quantization and dequantization (docs/numerics.md "MX block-32 quantization").
 *
 * Per group of 32 BF16 values: the E8M0 scale is the floor rule b = max(e(amax) - emax, 0), and each
 * element is convert(v * 2^(127 - b)). The scaling is done inside the encoder by exponent arithmetic
 * (mm_encode_scaled, or its table form in mx_code_table.c), so it is exact for every b, including
 * groups whose BF16 subnormal elements would lose bits in an F32 product. */
#include "core/cpu.h"
#include "core/error.h"
#include "format/bf16_inline.h"
#include "format/convert.h"
#include "format/format_table.h"
#include "format/mx_code_table.h"
#include "format/mx_quantize.h"
#include "megamoe/formats.h"

#define MX_GROUP MM_MX_BLOCK
#define BF16_ABS 0x7FFFu
#define BF16_INF 0x7F80u

/* emax of an MX element type (spec step 2; the format table's mx_emax), or -1 when the type has none. */
static int mx_emax(mm_dtype elem) {
    const mm_format_traits *t = mm_format_traits_of(elem);
    return t ? t->mx_emax : -1;
}

uint8_t mm_mx_scale_byte(float amax, mm_dtype elem) {
    int emax = mx_emax(elem);
    if (emax < 0) return 0xFF;
    return mm_mx_scale_byte_of_amax_bits((uint16_t)(mm_f32_to_bf16(amax) & BF16_ABS), emax);
}

/* The element code of a group whose amax is Inf or NaN (spec step 3): NaN with the element's sign for
 * FP8, 0 for FP4 (no NaN code). */
static uint8_t nan_group_element(uint16_t v, mm_dtype elem) {
    if (mm_format_is_nibble(elem)) return 0;
    return (uint8_t)(((v & 0x8000u) ? 0x80 : 0x00) | 0x7F);
}

/* Quantizes x[0..len) (one group, len <= 32) whose first element has row index `first`. */
static void quantize_group(const uint16_t *x, int64_t len, int64_t first, mm_dtype elem, int emax, uint8_t *q,
                           uint8_t *scale_out) {
    uint16_t amax_bits = 0;
    for (int64_t i = 0; i < len; i++) {
        uint16_t a = (uint16_t)(x[i] & BF16_ABS);
        if (a > amax_bits) amax_bits = a;
    }
    uint8_t scale = mm_mx_scale_byte_of_amax_bits(amax_bits, emax);
    int zero_group = amax_bits < BF16_INF && (amax_bits >> 7) == 0;
    *scale_out = scale;

    const mm_mx_code_table *table = mm_mx_code_table_of(elem);
    uint8_t codes[MX_GROUP];
    for (int64_t i = 0; i < len; i++) {
        if (zero_group)
            codes[i] = 0; /* +0 even for -0 and negative subnormals */
        else if (scale == 0xFF)
            codes[i] = nan_group_element(x[i], elem);
        else
            codes[i] = mm_mx_encode_element(elem, table, x[i], scale);
    }
    if (mm_format_is_nibble(elem)) {
        /* Groups start at even indices (32 per group), so pairs never straddle two groups. */
        for (int64_t i = 0; i < len; i += 2) {
            uint8_t hi = i + 1 < len ? codes[i + 1] : 0;
            q[(first + i) >> 1] = (uint8_t)(codes[i] | (hi << 4));
        }
    } else {
        for (int64_t i = 0; i < len; i++) q[first + i] = codes[i];
    }
}

static mm_status check_mx_args(const void *x, int64_t n, mm_dtype elem, const void *q, const void *scales,
                               mm_error *err) {
    if (n < 0) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "n = %lld is negative", (long long)n);
    if (!mm_format_is_mx(elem))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "elem = %s is not an MX element type (fp8_e4m3fn, fp8_e5m2 or fp4_e2m1)",
                       mm_dtype_name(elem));
    if (n > 0 && (!x || !q || !scales))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s is NULL with n = %lld",
                       !x ? "input" : (!q ? "q" : "scales"), (long long)n);
    return MM_OK;
}

/* The body of both entry points: exactly one of x_bf16 and x_f32 is the row; an F32 row is rounded
 * to BF16 group by group first, as the MX rule quantizes BF16 values. */
static mm_status quantize_row(const uint16_t *x_bf16, const float *x_f32, int64_t n, mm_dtype elem,
                              uint8_t *q, uint8_t *scales, mm_error *err) {
    mm_status st = check_mx_args(x_bf16 ? (const void *)x_bf16 : x_f32, n, elem, q, scales, err);
    if (st != MM_OK) return st;
    int emax = mx_emax(elem);
    uint16_t group[MX_GROUP];
    int64_t g = 0;
#if MM_X86_KERNELS
    /* Whole groups by the AVX-512 twin (the same bits), the partial last group below. */
    if (mm_cpu_isa() >= MM_ISA_AVX512) {
        g = n / MX_GROUP;
        mm_mx_quantize_groups_avx512(x_bf16, x_f32, g, elem, emax, q, scales);
    }
#endif
    for (; g * MX_GROUP < n; g++) {
        int64_t first = g * MX_GROUP;
        int64_t len = n - first < MX_GROUP ? n - first : MX_GROUP;
        if (x_f32)
            for (int64_t i = 0; i < len; i++) group[i] = mm_f32_to_bf16_inline(x_f32[first + i]);
        quantize_group(x_f32 ? group : x_bf16 + first, len, first, elem, emax, q, &scales[g]);
    }
    return MM_OK;
}

mm_status mm_mx_quantize_row_bf16(const uint16_t *x, int64_t n, mm_dtype elem, uint8_t *q, uint8_t *scales,
                                  mm_error *err) {
    return quantize_row(x, NULL, n, elem, q, scales, err);
}

mm_status mm_mx_quantize_row_f32(const float *x, int64_t n, mm_dtype elem, uint8_t *q, uint8_t *scales,
                                 mm_error *err) {
    return quantize_row(NULL, x, n, elem, q, scales, err);
}

mm_status mm_mx_dequantize_row(const uint8_t *q, const uint8_t *scales, int64_t n, mm_dtype elem, float *out,
                               mm_error *err) {
    mm_status st = check_mx_args(q, n, elem, out, scales, err);
    if (st != MM_OK) return st;
    mm_to_f32_fn decode = mm_format_traits_of(elem)->to_f32;
    int nibbles = mm_format_is_nibble(elem);
    for (int64_t i = 0; i < n; i++) {
        uint8_t b = scales[i / MX_GROUP];
        float v = decode(nibbles ? mm_nibble_get(q, i) : q[i]);
        out[i] = b == 0xFF ? mm_e8m0_to_f32(0xFF) : mm_scale_by_pow2(v, (int)b - 127);
    }
    return MM_OK;
}
