/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/pack.c: mm_gemm_pack_weights, from the API form of one expert's weights to the panel layout of
 * gemm/packed.h, plus everything that depends on the weights only (F32 scales, column sums, offsets). */
#include <stdlib.h>
#include <string.h>

#include "format/format_table.h"
#include "core/error.h"
#include "core/free_all.h"
#include "core/large_alloc.h"
#include "format/decode_tables.h"
#include "gemm/packed.h"
#include "megamoe/formats.h"

int mm_gemm_k_group(mm_dtype dtype) {
    switch (dtype) {
    case MM_DTYPE_BF16: return 2;
    case MM_DTYPE_I8: return 4;
    case MM_DTYPE_INT4: return 8;
    case MM_DTYPE_FP8_E4M3FN:
    case MM_DTYPE_FP8_E5M2:
    case MM_DTYPE_FP4_E2M1:
    case MM_DTYPE_UINT4: return 2;
    default: return 0;
    }
}

/* Raw code of element (k, n) in the API form (4-bit: the nibble, 0..15). */
static uint32_t api_code(const mm_gemm_weight_desc *d, int64_t k, int64_t n) {
    int64_t row = d->transposed ? n : k, col = d->transposed ? k : n;
    int64_t row_len = d->transposed ? d->k : d->n;
    const uint8_t *bytes = d->data;
    if (mm_dtype_bits(d->dtype) == 16) {
        uint16_t v;
        memcpy(&v, bytes + 2 * (row * row_len + col), sizeof v);
        return v;
    }
    if (mm_format_is_nibble(d->dtype))
        return mm_nibble_get(bytes + row * mm_dtype_row_bytes(d->dtype, row_len), col);
    return bytes[row * row_len + col];
}

/* The inverse of mm_packed_code: stores a code at (k, c) of a zero-initialised panel. */
static void store_code(mm_dtype dtype, uint8_t *panel, int64_t k, int c, uint32_t code) {
    switch (dtype) {
    case MM_DTYPE_BF16: {
        uint16_t v = (uint16_t)code;
        memcpy(panel + 2 * (((k >> 1) * MM_GEMM_NR + c) * 2 + (k & 1)), &v, sizeof v);
        break;
    }
    case MM_DTYPE_I8: panel[((k >> 2) * MM_GEMM_NR + c) * 4 + (k & 3)] = (uint8_t)code; break;
    case MM_DTYPE_INT4:
        panel[((k >> 3) * MM_GEMM_NR + c) * 4 + (k & 3)] |= (uint8_t)(code << ((k & 4) ? 4 : 0));
        break;
    case MM_DTYPE_FP4_E2M1:
    case MM_DTYPE_UINT4:
        panel[(k >> 1) * MM_GEMM_NR + 2 * (c & 15) + (k & 1)] |= (uint8_t)(code << ((c & 16) ? 4 : 0));
        break;
    default: panel[((k >> 1) * MM_GEMM_NR + c) * 2 + (k & 1)] = (uint8_t)code; break;
    }
}

/* Scale blocks of a block-scaled matrix: ceil(N / block_n) x ceil(K / block_k). */
static int64_t block_count(const mm_gemm_weight_desc *d) {
    return (d->n + d->block_n - 1) / d->block_n * ((d->k + d->block_k - 1) / d->block_k);
}

/* The weight-only formats (BF16 activations): FP8 E4M3 with F32 block scales, UINT4 with F32 group scales
 * and U8 zero points 0..15. */
static mm_status validate_block_scales(const mm_gemm_weight_desc *d, mm_error *err) {
    if (d->dtype != MM_DTYPE_FP8_E4M3FN && d->dtype != MM_DTYPE_UINT4)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight block_scales are given for %s weights: only fp8_e4m3fn and uint4 take block "
                       "scales",
                       mm_dtype_name(d->dtype));
    if (!d->block_scales)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight block_scales are NULL: uint4 weights need F32 group scales (and zeros)");
    if (d->mx_scales)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight mx_scales and block_scales are both given: a matrix has one kind of scale");
    if (d->block_n < 1 || d->block_k < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight block_n = %lld, block_k = %lld: both must be >= 1 with block_scales",
                       (long long)d->block_n, (long long)d->block_k);
    if (d->dtype != MM_DTYPE_UINT4) {
        if (d->zeros)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "weight zeros are given for %s weights: only uint4 takes zero points",
                           mm_dtype_name(d->dtype));
        return MM_OK;
    }
    if (!d->zeros)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight zeros are NULL: uint4 weights need one zero point (0..15) per scale block");
    int64_t count = block_count(d);
    for (int64_t i = 0; i < count; i++)
        if (d->zeros[i] > 15)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "weight zeros[%lld] = %u: uint4 zero points must be in 0..15", (long long)i,
                           (unsigned)d->zeros[i]);
    return MM_OK;
}

static mm_status validate(const mm_gemm_weight_desc *d, mm_error *err) {
    if (!d) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "weight descriptor is NULL");
    if (mm_gemm_k_group(d->dtype) == 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight dtype %s is not a GEMM weight type (bf16, int8, int4, fp8_e4m3fn, fp8_e5m2, "
                       "fp4_e2m1, uint4)",
                       mm_dtype_name(d->dtype));
    if (d->k < 1 || d->n < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "weight shape K = %lld, N = %lld: both must be >= 1",
                       (long long)d->k, (long long)d->n);
    if (!d->data) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "weight data is NULL");
    int is_int = mm_format_is_int_quant(d->dtype);
    if (is_int && d->k > MM_GEMM_INT_MAX_K)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight K = %lld exceeds %d, the largest K whose INT32 accumulation stays exact",
                       (long long)d->k, MM_GEMM_INT_MAX_K);
    if (is_int && !d->scales)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight scales are NULL: %s weights need (N,) F32 scales", mm_dtype_name(d->dtype));
    if (d->bias && d->dtype != MM_DTYPE_INT4)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight bias is given for %s weights: only int4 takes a bias",
                       mm_dtype_name(d->dtype));
    if (d->block_scales || d->dtype == MM_DTYPE_UINT4) return validate_block_scales(d, err);
    if (d->zeros)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight zeros are given without block_scales: zero points belong to uint4 weights");
    if (mm_format_is_mx(d->dtype) && !d->mx_scales)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight mx_scales are NULL: %s weights need (N, ceil(K/64), 2) E8M0 scales%s",
                       mm_dtype_name(d->dtype),
                       d->dtype == MM_DTYPE_FP8_E4M3FN ? " (or F32 block_scales, for bf16 activations)" : "");
    return MM_OK;
}

/* The API column held by packed column pc, or -1 for padding. Plain: pc itself. Interleaved gate/up
 * (N = 2I): panel p holds gate columns 16p..16p+15 then the matching up columns I+16p..I+16p+15. */
static int64_t source_column(const mm_gemm_weight_desc *d, const mm_gemm_packed_weights *w, int64_t pc) {
    if (!w->interleave_gate_up) return pc < d->n ? pc : -1;
    int64_t half = d->n / 2, lane = pc % MM_GEMM_NR, j = pc / MM_GEMM_NR * 16 + lane % 16;
    if (j >= half) return -1;
    return lane < 16 ? j : half + j;
}

/* Panel by panel, K outer and the panel's 32 columns inner, so the source is read in runs (rows of a
 * (K, N) matrix, or 32 row streams of an (N, K) one). INT weights also get their column sums here. */
static void fill_panels(const mm_gemm_weight_desc *d, mm_gemm_packed_weights *w, int64_t *col_sums) {
    int is_int4 = d->dtype == MM_DTYPE_INT4;
    for (int64_t p = 0; p < w->n_panels; p++) {
        uint8_t *panel = w->panels + p * w->panel_bytes;
        int64_t src[MM_GEMM_NR];
        for (int c = 0; c < MM_GEMM_NR; c++) src[c] = source_column(d, w, p * MM_GEMM_NR + c);
        for (int64_t k = 0; k < d->k; k++)
            for (int c = 0; c < MM_GEMM_NR; c++) {
                if (src[c] < 0) continue;
                uint32_t code = api_code(d, k, src[c]);
                store_code(d->dtype, panel, k, c, code);
                if (col_sums)
                    col_sums[p * MM_GEMM_NR + c] +=
                        is_int4 ? (int64_t)(code ^ 8u) - 8 : (int64_t)(int8_t)code;
            }
    }
}

static void fill_int_columns(const mm_gemm_weight_desc *d, mm_gemm_packed_weights *w,
                             const int64_t *col_sums) {
    for (int64_t pc = 0; pc < w->n_panels * MM_GEMM_NR; pc++) {
        int64_t n = source_column(d, w, pc);
        if (n < 0) continue;
        int64_t sum = col_sums[pc];
        float s = d->scales[n];
        w->col_scale[pc] = s;
        w->col_sum_x128[pc] = (int32_t)(sum * 128);
        /* The A8W4-INT bracket's second term, evaluated left to right as the spec writes it. */
        if (d->dtype == MM_DTYPE_INT4 && d->bias) w->col_offset[pc] = d->bias[n] - 8.0f * s * (float)sum;
    }
}

static void fill_mx_scales(const mm_gemm_weight_desc *d, mm_gemm_packed_weights *w) {
    const float *e8m0 = mm_format_lut_f32(MM_DTYPE_E8M0);
    for (int64_t pc = 0; pc < w->n_panels * MM_GEMM_NR; pc++) {
        int64_t n = source_column(d, w, pc);
        if (n < 0) continue;
        int64_t at = (pc / MM_GEMM_NR) * w->k_blocks * MM_GEMM_NR + pc % MM_GEMM_NR;
        for (int64_t g = 0; g < w->k_blocks; g++) {
            uint8_t b = mm_mx_weight_scale(d->mx_scales, n, d->k, g);
            w->mx_scale[at + g * MM_GEMM_NR] = e8m0[b];
            w->mx_scale_e8m0[at + g * MM_GEMM_NR] = b;
        }
    }
}

/* Block scales (and zeros) per (panel, K block, column); padding columns keep scale 0 and zero 0, so
 * their weights (code 0) decode to 0. */
static void fill_block_scales(const mm_gemm_weight_desc *d, mm_gemm_packed_weights *w) {
    for (int64_t pc = 0; pc < w->n_panels * MM_GEMM_NR; pc++) {
        int64_t n = source_column(d, w, pc);
        if (n < 0) continue;
        int64_t at = (pc / MM_GEMM_NR) * w->scale_blocks * MM_GEMM_NR + pc % MM_GEMM_NR;
        const int64_t from = (n / d->block_n) * w->scale_blocks;
        for (int64_t g = 0; g < w->scale_blocks; g++) {
            w->block_scale[at + g * MM_GEMM_NR] = d->block_scales[from + g];
            if (w->block_zero) w->block_zero[at + g * MM_GEMM_NR] = d->zeros[from + g];
        }
    }
}

mm_status mm_gemm_pack_weights(const mm_gemm_weight_desc *desc, mm_gemm_packed_weights **out, mm_error *err) {
    return mm_gemm_pack_weights_with(desc, NULL, out, err);
}

mm_status mm_gemm_pack_weights_with(const mm_gemm_weight_desc *desc, const mm_gemm_pack_options *opts,
                                    mm_gemm_packed_weights **out, mm_error *err) {
    mm_status st = MM_OK;
    mm_gemm_packed_weights *w = NULL;
    int64_t *col_sums = NULL;
    int interleave = opts ? opts->interleave_gate_up : 0;
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if ((st = validate(desc, err)) != MM_OK) return st;
    if (interleave && desc->n % 2 != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "weight N = %lld is odd: interleave_gate_up needs N = 2I (gate then up columns)",
                       (long long)desc->n);

    w = calloc(1, sizeof *w);
    if (!w) goto oom;
    w->dtype = desc->dtype;
    w->k = desc->k;
    w->n = desc->n;
    w->k_group = mm_gemm_k_group(desc->dtype);
    w->k_padded = (desc->k + w->k_group - 1) / w->k_group * w->k_group;
    w->interleave_gate_up = interleave;
    w->n_panels = interleave ? (desc->n / 2 + 15) / 16 : (desc->n + MM_GEMM_NR - 1) / MM_GEMM_NR;
    w->n_out = interleave ? w->n_panels * MM_GEMM_NR : desc->n;
    int bits = mm_dtype_bits(desc->dtype);
    int64_t bytes = w->k_padded * MM_GEMM_NR * bits / 8;
    /* Rounded to whole cache lines so every panel starts 64-byte aligned. */
    w->panel_bytes = (bytes + 63) / 64 * 64;
    w->panels = mm_alloc_large((size_t)(w->panel_bytes * w->n_panels));
    if (!w->panels) goto oom;
    memset(w->panels, 0, (size_t)(w->panel_bytes * w->n_panels));

    int64_t padded_n = w->n_panels * MM_GEMM_NR;
    if (desc->dtype == MM_DTYPE_I8 || desc->dtype == MM_DTYPE_INT4) {
        w->col_scale = calloc((size_t)padded_n, sizeof *w->col_scale);
        w->col_offset = calloc((size_t)padded_n, sizeof *w->col_offset);
        w->col_sum_x128 = calloc((size_t)padded_n, sizeof *w->col_sum_x128);
        col_sums = calloc((size_t)padded_n, sizeof *col_sums);
        if (!w->col_scale || !w->col_offset || !w->col_sum_x128 || !col_sums) goto oom;
    }
    fill_panels(desc, w, col_sums);
    if (col_sums) fill_int_columns(desc, w, col_sums);
    if (desc->block_scales) {
        w->block_k = desc->block_k;
        w->scale_blocks = (desc->k + desc->block_k - 1) / desc->block_k;
        w->block_scale = calloc((size_t)(padded_n * w->scale_blocks), sizeof *w->block_scale);
        if (!w->block_scale) goto oom;
        if (desc->zeros) {
            w->block_zero = calloc((size_t)(padded_n * w->scale_blocks), 1);
            if (!w->block_zero) goto oom;
        }
        fill_block_scales(desc, w);
    } else if (mm_format_is_mx(desc->dtype)) {
        w->k_blocks = (desc->k + 31) / 32;
        w->mx_scale = calloc((size_t)(padded_n * w->k_blocks), sizeof *w->mx_scale);
        w->mx_scale_e8m0 = malloc((size_t)(padded_n * w->k_blocks));
        if (!w->mx_scale || !w->mx_scale_e8m0) goto oom;
        /* Padding columns get scale 2^0 (their weights are 0): a neutral value for the kernels. */
        memset(w->mx_scale_e8m0, 127, (size_t)(padded_n * w->k_blocks));
        fill_mx_scales(desc, w);
    }
    free(col_sums);
    *out = w;
    return MM_OK;

oom:
    free(col_sums);
    mm_gemm_packed_free(w);
    return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "packing %s weights K = %lld, N = %lld: out of memory",
                   mm_dtype_name(desc->dtype), (long long)desc->k, (long long)desc->n);
}

void mm_gemm_packed_free(mm_gemm_packed_weights *w) {
    if (!w) return;
    MM_FREE_ALL(w->panels, w->col_scale, w->col_offset, w->col_sum_x128, w->mx_scale, w->mx_scale_e8m0,
                w->block_scale, w->block_zero, w);
}

int64_t mm_gemm_packed_k(const mm_gemm_packed_weights *w) {
    return w->k;
}
int64_t mm_gemm_packed_n(const mm_gemm_packed_weights *w) {
    return w->n;
}
int64_t mm_gemm_packed_n_out(const mm_gemm_packed_weights *w) {
    return w->n_out;
}
mm_dtype mm_gemm_packed_dtype(const mm_gemm_packed_weights *w) {
    return w->dtype;
}
