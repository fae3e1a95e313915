/* SPDX-License-Identifier: Apache-2.0 */
/* ref/expert_ref.c: scenario table, dispatch-side quantization and the per-row expert FFN of the
 * reference (docs/reference.md steps 1-6). Plain loops over float64; every conversion goes through
 * include/megamoe/formats.h so that the reference and the fast path share one set of format rules. */
#include "ref/expert_ref.h"

#include <stdlib.h>
#include <string.h>

#include "format/format_table.h"
#include "core/error.h"
#include "megamoe/formats.h"
#include "ref/format_ref.h"

static const char *dtype_or_none(mm_dtype d) {
    return d == MM_DTYPE_INVALID ? "none" : mm_dtype_name(d);
}

const char *mm_ref_scenario_name(mm_ref_scenario scenario) {
    switch (scenario) {
    case MM_REF_SCENARIO_A16W16: return "A16W16";
    case MM_REF_SCENARIO_A8W8_INT: return "A8W8-INT";
    case MM_REF_SCENARIO_A8W4_INT: return "A8W4-INT";
    case MM_REF_SCENARIO_A8W8_FP: return "A8W8-FP";
    case MM_REF_SCENARIO_A8W4_FP: return "A8W4-FP";
    case MM_REF_SCENARIO_A4W4_FP: return "A4W4-FP";
    case MM_REF_SCENARIO_A16W8_FP8: return "A16W8-FP8";
    case MM_REF_SCENARIO_A16W4_MX: return "A16W4-MX";
    case MM_REF_SCENARIO_A16W4_INT: return "A16W4-INT";
    default: return "invalid";
    }
}

mm_ref_scenario mm_ref_scenario_of(mm_dtype weight_dtype, mm_dtype input_dtype) {
    switch (weight_dtype) {
    case MM_DTYPE_BF16:
        return input_dtype == MM_DTYPE_INVALID ? MM_REF_SCENARIO_A16W16 : MM_REF_SCENARIO_INVALID;
    case MM_DTYPE_I8: return input_dtype == MM_DTYPE_I8 ? MM_REF_SCENARIO_A8W8_INT : MM_REF_SCENARIO_INVALID;
    case MM_DTYPE_INT4:
        return input_dtype == MM_DTYPE_I8 ? MM_REF_SCENARIO_A8W4_INT : MM_REF_SCENARIO_INVALID;
    case MM_DTYPE_FP8_E4M3FN:
        if (input_dtype == MM_DTYPE_INVALID) return MM_REF_SCENARIO_A16W8_FP8;
        return input_dtype == weight_dtype ? MM_REF_SCENARIO_A8W8_FP : MM_REF_SCENARIO_INVALID;
    case MM_DTYPE_FP8_E5M2:
        return input_dtype == weight_dtype ? MM_REF_SCENARIO_A8W8_FP : MM_REF_SCENARIO_INVALID;
    case MM_DTYPE_FP4_E2M1:
        if (input_dtype == MM_DTYPE_INVALID) return MM_REF_SCENARIO_A16W4_MX;
        if (input_dtype == MM_DTYPE_FP8_E4M3FN) return MM_REF_SCENARIO_A8W4_FP;
        if (input_dtype == MM_DTYPE_FP4_E2M1) return MM_REF_SCENARIO_A4W4_FP;
        return MM_REF_SCENARIO_INVALID;
    case MM_DTYPE_UINT4:
        return input_dtype == MM_DTYPE_INVALID ? MM_REF_SCENARIO_A16W4_INT : MM_REF_SCENARIO_INVALID;
    default: return MM_REF_SCENARIO_INVALID;
    }
}

mm_status mm_ref_plan_make(mm_dtype weight_dtype, mm_dtype input_dtype, mm_dtype activation_out_dtype,
                           const char *what, mm_ref_plan *plan, mm_error *err) {
    mm_ref_plan p = {mm_ref_scenario_of(weight_dtype, input_dtype), input_dtype, MM_DTYPE_INVALID};
    switch (p.scenario) {
    case MM_REF_SCENARIO_INVALID:
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s weight dtype %s does not pair with quantization dtype %s (spec scenario table)",
                       what, mm_dtype_name(weight_dtype), dtype_or_none(input_dtype));
    case MM_REF_SCENARIO_A16W16:
    case MM_REF_SCENARIO_A16W8_FP8:
    case MM_REF_SCENARIO_A16W4_MX:
    case MM_REF_SCENARIO_A16W4_INT: p.gemm2_dtype = MM_DTYPE_BF16; break;
    case MM_REF_SCENARIO_A8W8_INT:
    case MM_REF_SCENARIO_A8W4_INT: p.gemm2_dtype = MM_DTYPE_I8; break;
    case MM_REF_SCENARIO_A8W8_FP: p.gemm2_dtype = input_dtype; break;
    case MM_REF_SCENARIO_A8W4_FP:
    case MM_REF_SCENARIO_A4W4_FP: p.gemm2_dtype = MM_DTYPE_FP8_E4M3FN; break;
    }
    if (activation_out_dtype != MM_DTYPE_INVALID) {
        int fp = p.gemm2_dtype != MM_DTYPE_BF16 && p.gemm2_dtype != MM_DTYPE_I8;
        if (!fp || (activation_out_dtype != MM_DTYPE_FP8_E4M3FN && activation_out_dtype != MM_DTYPE_FP8_E5M2))
            return mm_fail(
                err, MM_ERR_INVALID_ARGUMENT,
                "activation_out_dtype = %s: only fp8_e4m3fn or fp8_e5m2 in an FP scenario (%s is %s)",
                mm_dtype_name(activation_out_dtype), what, mm_ref_scenario_name(p.scenario));
        p.gemm2_dtype = activation_out_dtype;
    }
    *plan = p;
    return MM_OK;
}

mm_status mm_ref_dispatch_row(const mm_ref_plan *plan, int64_t hidden, const uint16_t *x_bf16,
                              const uint8_t *x_quant, const uint8_t *x_scales, mm_ref_row *row,
                              mm_error *err) {
    mm_status st = MM_OK;
    float *xf = calloc((size_t)hidden + 1, sizeof *xf); /* calloc: gcc -O2 cannot see the loops fill it */
    int8_t *q8 = malloc((size_t)hidden);
    uint8_t *qmx = NULL, *smx = NULL;
    if (!xf || !q8) goto oom;
    row->scale = 1.0f;
    if (plan->input_dtype == MM_DTYPE_INVALID) { /* A16W16: the BF16 values themselves */
        for (int64_t k = 0; k < hidden; k++) row->values[k] = mm_ref_fmt_bf16_to_f32(x_bf16[k]);
    } else if (plan->input_dtype == MM_DTYPE_I8) { /* div-away per-token INT8 */
        for (int64_t k = 0; k < hidden; k++) xf[k] = mm_ref_fmt_bf16_to_f32(x_bf16[k]);
        mm_ref_fmt_int8_div_away(xf, hidden, q8, &row->scale);
        for (int64_t k = 0; k < hidden; k++) row->values[k] = q8[k];
    } else if (x_quant) { /* pre-quantized MX pass-through */
        mm_ref_fmt_mx_dequantize(x_quant, x_scales, hidden, plan->input_dtype, xf);
        for (int64_t k = 0; k < hidden; k++) row->values[k] = xf[k];
    } else { /* MX quantization of the BF16 row in the dispatch dtype */
        qmx = malloc((size_t)mm_dtype_row_bytes(plan->input_dtype, hidden));
        smx = malloc((size_t)((hidden + 31) / 32));
        if (!qmx || !smx) goto oom;
        mm_ref_fmt_mx_quantize_bf16(x_bf16, hidden, plan->input_dtype, qmx, smx);
        mm_ref_fmt_mx_dequantize(qmx, smx, hidden, plan->input_dtype, xf);
        for (int64_t k = 0; k < hidden; k++) row->values[k] = xf[k];
    }
    goto done;
oom:
    st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "reference dispatch row of hidden = %lld", (long long)hidden);
done:
    free(xf);
    free(q8);
    free(qmx);
    free(smx);
    return st;
}

/* Decodes one stored row of `len` elements of dtype into doubles (raw integers for INT8/INT4,
 * element values for BF16 and the MX element types, before their block scale). */
static void decode_row(mm_dtype dtype, const uint8_t *row, int64_t len, double *out) {
    switch (dtype) {
    case MM_DTYPE_BF16:
        for (int64_t i = 0; i < len; i++) {
            uint16_t bits;
            memcpy(&bits, row + 2 * i, sizeof bits);
            out[i] = mm_ref_fmt_bf16_to_f32(bits);
        }
        break;
    case MM_DTYPE_I8:
        for (int64_t i = 0; i < len; i++) out[i] = (int8_t)row[i];
        break;
    case MM_DTYPE_INT4:
        for (int64_t i = 0; i < len; i++) out[i] = mm_ref_fmt_int4_value(mm_ref_fmt_nibble(row, i));
        break;
    case MM_DTYPE_UINT4:
        for (int64_t i = 0; i < len; i++) out[i] = mm_ref_fmt_nibble(row, i);
        break;
    case MM_DTYPE_FP4_E2M1:
        for (int64_t i = 0; i < len; i++) out[i] = mm_ref_fmt_decode(dtype, mm_ref_fmt_nibble(row, i));
        break;
    default: /* FP8 */
        for (int64_t i = 0; i < len; i++) out[i] = mm_ref_fmt_decode(dtype, row[i]);
        break;
    }
}

/* The scales of one GEMM's weights (as stored: channel n is the stored channel). */
typedef struct weight_scales {
    const uint8_t *mx;   /* MX: (N, ceil(K/64), 2) E8M0 per expert */
    const float *block;  /* A16W8-FP8 / A16W4-INT: (ceil(N/bn), ceil(K/bk)) F32 per expert */
    const uint8_t *zero; /* A16W4-INT: zero points, the same layout */
    int64_t bn, bk;
    int weight_only; /* the A16 rule: w' = BF16(F32(F32(value - zero) * scale)) */
} weight_scales;

/* The scales of one GEMM's weights (mx, block, zero: that GEMM's arrays) that scenario sc uses. */
static weight_scales scales_of(mm_ref_scenario sc, const mm_ref_attrs *attrs, const uint8_t *mx,
                               const float *block, const uint8_t *zero) {
    int int4 = sc == MM_REF_SCENARIO_A16W4_INT, block_scaled = sc == MM_REF_SCENARIO_A16W8_FP8 || int4;
    return (weight_scales){.mx = mx,
                           .block = block_scaled ? block : NULL,
                           .zero = int4 ? zero : NULL,
                           .bn = attrs->scale_block_n,
                           .bk = attrs->scale_block_k,
                           .weight_only = block_scaled || sc == MM_REF_SCENARIO_A16W4_MX};
}

/* Decodes the (k_len x n_len) weight matrix of expert `index` into w[n * k_len + k]; stored as
 * (k_len, n_len) rows, or (n_len, k_len) when transposed. MX element values are multiplied by the
 * E8M0 scale of their K-group (exact in double); the A16 weight-only scenarios apply their rule. */
static mm_status decode_matrix(mm_dtype dtype, const void *data, const weight_scales *sc, int64_t index,
                               int64_t k_len, int64_t n_len, int transposed, double *w, mm_error *err) {
    int64_t rows = transposed ? n_len : k_len, row_len = transposed ? k_len : n_len;
    int64_t row_bytes = mm_dtype_row_bytes(dtype, row_len);
    const uint8_t *base = (const uint8_t *)data + index * rows * row_bytes;
    double *line = malloc((size_t)row_len * sizeof *line);
    if (!line)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "reference weight decode of %lld x %lld", (long long)k_len,
                       (long long)n_len);
    for (int64_t r = 0; r < rows; r++) {
        decode_row(dtype, base + r * row_bytes, row_len, line);
        for (int64_t c = 0; c < row_len; c++) {
            int64_t k = transposed ? c : r, n = transposed ? r : c;
            w[n * k_len + k] = line[c];
        }
    }
    if (sc->block) {
        int64_t kb = (k_len + sc->bk - 1) / sc->bk, nb = (n_len + sc->bn - 1) / sc->bn;
        const float *s = sc->block + index * nb * kb;
        const uint8_t *z = sc->zero ? sc->zero + index * nb * kb : NULL;
        for (int64_t n = 0; n < n_len; n++)
            for (int64_t k = 0; k < k_len; k++) {
                int64_t at = (n / sc->bn) * kb + k / sc->bk;
                w[n * k_len + k] = mm_ref_fmt_weight_only(w[n * k_len + k], z ? z[at] : 0, s[at]);
            }
    } else if (mm_format_is_mx(dtype)) {
        int64_t pairs = (k_len + 63) / 64;
        const uint8_t *scales = sc->mx + index * n_len * pairs * 2;
        for (int64_t n = 0; n < n_len; n++)
            for (int64_t k = 0; k < k_len; k++) {
                float s = mm_ref_fmt_e8m0_to_f32(mm_ref_fmt_mx_weight_scale(scales, n, k_len, k / 32));
                if (sc->weight_only)
                    w[n * k_len + k] = mm_ref_fmt_weight_only(w[n * k_len + k], 0, s);
                else
                    w[n * k_len + k] *= (double)s;
            }
    }
    free(line);
    return MM_OK;
}

/* weight1_interleave: the channels of a decoded (n1 x k_len) matrix and of a per-channel vector from stored
 * order (gate i at 2i, up i at 2i + 1) to gate [0, I) then up [I, 2I). */
static int64_t stored_channel(int64_t n, int64_t n1) {
    return n < n1 / 2 ? 2 * n : 2 * (n - n1 / 2) + 1;
}

static int deinterleave(double *w, int64_t n1, int64_t k_len) {
    double *tmp = malloc((size_t)(n1 * k_len) * sizeof *tmp);
    if (!tmp) return 0;
    memcpy(tmp, w, (size_t)(n1 * k_len) * sizeof *tmp);
    for (int64_t n = 0; n < n1; n++)
        memcpy(w + n * k_len, tmp + stored_channel(n, n1) * k_len, (size_t)k_len * sizeof *w);
    free(tmp);
    return 1;
}

/* A copy of a per-channel vector of weight1 in channel order (NULL when src is NULL; *ok = 0 on OOM). */
static float *channel_copy(const float *src, int64_t n1, int interleave, int *ok) {
    if (!src) return NULL;
    float *v = malloc((size_t)n1 * sizeof *v);
    if (!v) {
        *ok = 0;
        return NULL;
    }
    for (int64_t n = 0; n < n1; n++) v[n] = src[interleave ? stored_channel(n, n1) : n];
    return v;
}

static double *column_sums(const double *w, int64_t k_len, int64_t n_len) {
    double *sums = calloc((size_t)n_len, sizeof *sums);
    if (!sums) return NULL;
    for (int64_t n = 0; n < n_len; n++)
        for (int64_t k = 0; k < k_len; k++) sums[n] += w[n * k_len + k];
    return sums;
}

void mm_ref_expert_free(mm_ref_expert *ex) {
    free(ex->own_scales1);
    free(ex->own_bias1);
    free(ex->w1);
    free(ex->w2);
    free(ex->colsum1);
    free(ex->colsum2);
    free(ex->h);
    free(ex->a);
    free(ex->a_deq);
    free(ex->a_q);
    free(ex->a_mx);
    free(ex->a_mx_scales);
    free(ex->x2);
    memset(ex, 0, sizeof *ex);
}

mm_status mm_ref_expert_load(mm_ref_expert *ex, const mm_ref_plan *plan, const mm_ref_weights *weights,
                             int64_t index, const mm_ref_attrs *attrs, mm_error *err) {
    mm_status st = MM_OK;
    memset(ex, 0, sizeof *ex);
    ex->plan = *plan;
    ex->act = &attrs->activation;
    ex->hidden = attrs->hidden;
    ex->inter = attrs->inter;
    ex->n1 = 2 * attrs->inter;
    ex->act_width = mm_ref_activation_out_width(attrs->activation.kind, attrs->inter);
    size_t hidden = (size_t)ex->hidden, n1 = (size_t)ex->n1, width = (size_t)ex->act_width;
    ex->w1 = malloc(n1 * hidden * sizeof *ex->w1);
    ex->w2 = malloc(hidden * width * sizeof *ex->w2);
    ex->h = malloc(n1 * sizeof *ex->h);
    ex->a = malloc(n1 * sizeof *ex->a);
    ex->a_deq = malloc(n1 * sizeof *ex->a_deq);
    ex->a_q = malloc(n1);
    ex->a_mx = malloc(n1);
    ex->a_mx_scales = malloc((n1 + 31) / 32);
    ex->x2 = malloc(n1 * sizeof *ex->x2);
    if (!ex->w1 || !ex->w2 || !ex->h || !ex->a || !ex->a_deq || !ex->a_q || !ex->a_mx || !ex->a_mx_scales ||
        !ex->x2)
        goto oom;
    mm_ref_scenario sc = plan->scenario;
    weight_scales sc1 = scales_of(sc, attrs, weights->mx_scales1, weights->block_scales1, weights->zeros1);
    weight_scales sc2 = scales_of(sc, attrs, weights->mx_scales2, weights->block_scales2, weights->zeros2);
    st = decode_matrix(weights->dtype, weights->weight1, &sc1, index, ex->hidden, ex->n1,
                       attrs->transpose_weight1, ex->w1, err);
    if (st == MM_OK)
        st = decode_matrix(weights->dtype, weights->weight2, &sc2, index, ex->act_width, ex->hidden,
                           attrs->transpose_weight2, ex->w2, err);
    if (st != MM_OK) goto fail;
    int il = attrs->weight1_interleave, ok = 1;
    if (il && !deinterleave(ex->w1, ex->n1, ex->hidden)) goto oom;
    if (sc == MM_REF_SCENARIO_A8W8_INT || sc == MM_REF_SCENARIO_A8W4_INT) {
        ex->scales1 = ex->own_scales1 = channel_copy(weights->scales1 + index * ex->n1, ex->n1, il, &ok);
        ex->scales2 = weights->scales2 + index * ex->hidden;
    }
    /* biases: A8W4-INT's formula (required), or the F32 bias of any other scenario (optional) */
    ex->bias1 = ex->own_bias1 =
        channel_copy(weights->bias1 ? weights->bias1 + index * ex->n1 : NULL, ex->n1, il, &ok);
    ex->bias2 = weights->bias2 ? weights->bias2 + index * ex->hidden : NULL;
    if (!ok) goto oom;
    if (sc == MM_REF_SCENARIO_A8W4_INT) {
        ex->colsum1 = column_sums(ex->w1, ex->hidden, ex->n1);
        ex->colsum2 = column_sums(ex->w2, ex->act_width, ex->hidden);
        if (!ex->colsum1 || !ex->colsum2) goto oom;
    }
    return MM_OK;
oom:
    st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "reference expert of hidden = %lld, inter = %lld",
                 (long long)attrs->hidden, (long long)attrs->inter);
fail:
    mm_ref_expert_free(ex);
    return st;
}

/* The GEMM output of channel n from its float64 dot product, evaluated in double in the order the
 * spec writes it and rounded once to F32. row_scale is the per-row INT8 scale (INT scenarios). Outside
 * A8W4-INT a bias (when given) is added before that rounding, times bias_weight. */
static float gemm_output(mm_ref_scenario scenario, double dot, const float *scales, const float *bias,
                         const double *colsum, int64_t n, float row_scale, float bias_weight) {
    double v;
    switch (scenario) {
    case MM_REF_SCENARIO_A8W8_INT: v = dot * (double)scales[n] * (double)row_scale; break;
    case MM_REF_SCENARIO_A8W4_INT: {
        double s = scales[n];
        return (float)((dot * s + ((double)bias[n] - 8.0 * s * colsum[n])) * (double)row_scale);
    }
    default: v = dot; break;
    }
    if (bias) v += (double)bias_weight * (double)bias[n];
    return (float)v;
}

static double dot(const double *a, const double *b, int64_t len) {
    double sum = 0.0;
    for (int64_t k = 0; k < len; k++) sum += a[k] * b[k];
    return sum;
}

mm_status mm_ref_expert_row(mm_ref_expert *ex, const mm_ref_row *row, int weighted, float weight,
                            uint16_t *out, mm_error *err) {
    (void)err; /* nothing in the row can fail: buffers were sized by mm_ref_expert_load */
    mm_ref_scenario sc = ex->plan.scenario;
    /* GEMM1 (step 2) */
    for (int64_t n = 0; n < ex->n1; n++) {
        double d = dot(row->values, ex->w1 + n * ex->hidden, ex->hidden);
        float h = gemm_output(sc, d, ex->scales1, ex->bias1, ex->colsum1, n, row->scale, 1.0f);
        if (ex->plan.input_dtype == MM_DTYPE_INVALID) h = mm_ref_fmt_bf16_round(h); /* A16W16 and the A16 */
        ex->h[n] = h;
    }
    /* activation (step 3) and the early gating weight (step 4) */
    mm_ref_activation_row(ex->act, ex->h, ex->inter, ex->a);
    if (weighted)
        for (int64_t j = 0; j < ex->act_width; j++) ex->a[j] = ex->a[j] * weight;
    /* GEMM2 input (step 5) */
    float a_scale = 1.0f;
    if (ex->plan.gemm2_dtype == MM_DTYPE_BF16) {
        for (int64_t j = 0; j < ex->act_width; j++) ex->x2[j] = mm_ref_fmt_bf16_round(ex->a[j]);
    } else if (ex->plan.gemm2_dtype == MM_DTYPE_I8) {
        mm_ref_fmt_int8_mul_even(ex->a, ex->act_width, ex->a_q, &a_scale);
        for (int64_t j = 0; j < ex->act_width; j++) ex->x2[j] = ex->a_q[j];
    } else {
        mm_ref_fmt_mx_quantize_f32(ex->a, ex->act_width, ex->plan.gemm2_dtype, ex->a_mx, ex->a_mx_scales);
        mm_ref_fmt_mx_dequantize(ex->a_mx, ex->a_mx_scales, ex->act_width, ex->plan.gemm2_dtype, ex->a_deq);
        for (int64_t j = 0; j < ex->act_width; j++) ex->x2[j] = ex->a_deq[j];
    }
    /* GEMM2 (step 6): F32, then the BF16 expert output row */
    for (int64_t n = 0; n < ex->hidden; n++) {
        double d = dot(ex->x2, ex->w2 + n * ex->act_width, ex->act_width);
        out[n] = mm_ref_fmt_f32_to_bf16(
            gemm_output(sc, d, ex->scales2, ex->bias2, ex->colsum2, n, a_scale, weighted ? weight : 1.0f));
    }
    return MM_OK;
}
