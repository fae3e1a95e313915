/* SPDX-License-Identifier: Apache-2.0 */
/* ffn/activation.c: the activation table (see activation.h): names, parameter rules, gated or not,
 * GEMM2 K factor, scalar forms, and the run-time choice of the vector forms (activation_avx512.c). */
#include "ffn/activation.h"

#include <float.h>
#include <math.h>

#include "core/cpu.h"
#include "core/error.h"

/* min / clip that keep NaN (a NaN input must stay NaN, as in the reference). */
static float clamp_high(float v, float c) {
    return v > c ? c : v;
}
static float clamp_both(float v, float c) {
    return v > c ? c : (v < -c ? -c : v);
}

static float swiglu(const mm_ffn_act *act, float g, float u) {
    if (act->clamp != 0.0f) {
        g = clamp_high(g, act->clamp);
        u = clamp_both(u, act->clamp);
    }
    return g * mm_ffn_sigmoid_f32(g) * u;
}

static float swiglustep(const mm_ffn_act *act, float g, float u) {
    float s = g * mm_ffn_sigmoid_f32(g);
    if (act->clamp != 0.0f) {
        u = clamp_both(u, act->clamp);
        s = clamp_high(s, act->clamp);
    }
    return s * u;
}

static float swigluoai(const mm_ffn_act *act, float g, float u) {
    if (act->clamp != 0.0f) {
        g = clamp_high(g, act->clamp);
        u = clamp_both(u, act->clamp);
    }
    return g * mm_ffn_sigmoid_f32(act->alpha * g) * (u + act->beta);
}

static float situglu(const mm_ffn_act *act, float g, float u) {
    float lin = act->has_linear_beta ? act->linear_beta * tanhf(u / act->linear_beta) : u;
    return act->beta * tanhf(g / act->beta) * mm_ffn_sigmoid_f32(g) * lin;
}

static float gelu(const mm_ffn_act *act, float z, float unused) {
    (void)act, (void)unused;
    /* 0.5 z (1 + tanh(v)) = z sigmoid(2 v): no cancellation for negative z. */
    const float k2 = 1.5957691216057308f; /* sqrt(8 / pi) */
    return z * mm_ffn_sigmoid_f32(k2 * (z + 0.044715f * z * z * z));
}

static mm_status check_clamp(float c, mm_error *err) {
    if (isnan(c) || c < 0.0f)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation_params clamp = %g must be >= 0 and not NaN",
                       (double)c);
    return MM_OK;
}

static mm_status clamp_params(const float *p, int n, mm_ffn_act *act, mm_error *err) {
    (void)n;
    mm_status st = check_clamp(p[0], err);
    if (st == MM_OK) act->clamp = p[0];
    return st;
}

static mm_status oai_params(const float *p, int n, mm_ffn_act *act, mm_error *err) {
    (void)n;
    mm_status st = check_clamp(p[0], err);
    if (st != MM_OK) return st;
    if (!isfinite(p[1]) || !isfinite(p[2]))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "activation_params alpha = %g, beta = %g: both must be finite", (double)p[1],
                       (double)p[2]);
    act->clamp = p[0];
    act->alpha = p[1];
    act->beta = p[2];
    return MM_OK;
}

static mm_status situglu_params(const float *p, int n, mm_ffn_act *act, mm_error *err) {
    for (int i = 0; i < n; i++)
        if (!isfinite(p[i]) || !(p[i] > 0.0f))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "activation_params[%d] (%s) = %g must be finite and > 0", i,
                           i == 0 ? "beta" : "linear_beta", (double)p[i]);
    act->beta = p[0];
    if (n == 2) {
        act->has_linear_beta = 1;
        act->linear_beta = p[1];
    }
    return MM_OK;
}

static mm_status gelu_params(const float *p, int n, mm_ffn_act *act, mm_error *err) {
    (void)n, (void)act;
    if (p[0] != FLT_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "activation_params[0] = %g: gelu takes no clamp, only the placeholder FLT_MAX",
                       (double)p[0]);
    return MM_OK;
}

/* In enum order (mm_mega_moe_activation). */
static const mm_ffn_act_info table[] = {
    {MM_MEGA_MOE_SWIGLU, "swiglu", 1, 1, 1, 1, "[] or [clamp]", clamp_params, swiglu,
     MM_X86_ONLY(mm_ffn_swiglu_avx512)},
    {MM_MEGA_MOE_SWIGLUSTEP, "swiglustep", 1, 1, 1, 1, "[] or [clamp]", clamp_params, swiglustep,
     MM_X86_ONLY(mm_ffn_swiglustep_avx512)},
    {MM_MEGA_MOE_SWIGLUOAI, "swigluoai", 1, 1, 3, 3, "[] or [clamp, alpha, beta]", oai_params, swigluoai,
     MM_X86_ONLY(mm_ffn_swigluoai_avx512)},
    {MM_MEGA_MOE_SITUGLU, "situglu", 1, 1, 1, 2, "[], [beta] or [beta, linear_beta]", situglu_params, situglu,
     NULL},
    {MM_MEGA_MOE_GELU, "gelu", 0, 2, 1, 1, "[] or the placeholder [FLT_MAX]", gelu_params, gelu, NULL},
};
#define TABLE_SIZE ((int)(sizeof table / sizeof table[0]))

const mm_ffn_act_info *mm_ffn_act_table(int *count) {
    *count = TABLE_SIZE;
    return table;
}

const mm_ffn_act_info *mm_ffn_act_info_of(mm_mega_moe_activation kind) {
    return (int)kind >= 0 && (int)kind < TABLE_SIZE ? &table[kind] : NULL;
}

const char *mm_mega_moe_activation_name(mm_mega_moe_activation activation) {
    const mm_ffn_act_info *info = mm_ffn_act_info_of(activation);
    return info ? info->name : "invalid";
}

int mm_mega_moe_activation_from_name(const char *name) {
    for (int i = 0; name && i < TABLE_SIZE; i++)
        if (strcmp(table[i].name, name) == 0) return i;
    return -1;
}

int64_t mm_ffn_act_k2(mm_mega_moe_activation kind, int64_t inter) {
    const mm_ffn_act_info *info = mm_ffn_act_info_of(kind);
    return info ? info->k2_factor * inter : 0;
}

mm_status mm_ffn_act_resolve(mm_mega_moe_activation kind, const float *params, int n, mm_ffn_act *act,
                             mm_error *err) {
    mm_ffn_act r = {kind, 0.0f, 1.702f, 1.0f, 0, 0.0f, NULL};
    if (n < 0 || n > MM_MEGA_MOE_MAX_ACTIVATION_PARAMS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation_param_count = %d is outside [0, %d]", n,
                       MM_MEGA_MOE_MAX_ACTIVATION_PARAMS);
    const mm_ffn_act_info *info = mm_ffn_act_info_of(kind);
    if (!info)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation = %d is not a known activation", (int)kind);
    if (n != 0 && (n < info->min_params || n > info->max_params))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation_params has %d values: %s takes %s", n,
                       info->name, info->param_rule);
    if (n > 0) {
        mm_status st = info->params(params, n, &r, err);
        if (st != MM_OK) return st;
    }
    r.rows = info->vector && mm_cpu_isa() >= MM_ISA_AVX512 ? info->vector : mm_ffn_act_rows_portable;
    *act = r;
    return MM_OK;
}

float mm_ffn_act_scalar(const mm_ffn_act *act, float g, float u) {
    const mm_ffn_act_info *info = mm_ffn_act_info_of(act->kind);
    return info ? info->scalar(act, g, u) : NAN;
}

void mm_ffn_act_rows_portable(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n) {
    const mm_ffn_act_info *info = mm_ffn_act_info_of(act->kind);
    for (int64_t x = 0; x < n; x++) out[x] = info->scalar(act, g[x], u ? u[x] : 0.0f);
}

void mm_ffn_act_rows(const mm_ffn_act *act, const float *g, const float *u, float *out, int64_t n) {
    if (act->rows) {
        act->rows(act, g, u, out, n);
        return;
    }
    const mm_ffn_act_info *info = mm_ffn_act_info_of(act->kind);
    /* mm_cpu_isa computes its answer once per process and is thread-safe. */
    if (info->vector && mm_cpu_isa() >= MM_ISA_AVX512)
        info->vector(act, g, u, out, n);
    else
        mm_ffn_act_rows_portable(act, g, u, out, n);
}

void mm_ffn_act_row(const mm_ffn_act *act, const float *h, int64_t inter, float *out) {
    if (mm_ffn_act_info_of(act->kind)->gated)
        mm_ffn_act_rows(act, h, h + inter, out, inter);
    else
        mm_ffn_act_rows(act, h, NULL, out, 2 * inter);
}
