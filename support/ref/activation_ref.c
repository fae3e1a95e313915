/* SPDX-License-Identifier: Apache-2.0 */
/* ref/activation_ref.c: reference activations (swiglu, swiglustep, swigluoai, situglu, gelu).
 *
 * Formulas of docs/mega_moe.md, Semantics, "Activations", written as plainly as possible. Inputs are F32;
 * everything is evaluated in double and rounded once to F32 at the end. Clamps use explicit comparisons (not
 * fmin/fmax) so that a NaN input stays NaN instead of being replaced by the clamp value. */
#include "ref/activation_ref.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "core/error.h"

static const char *const act_names[MM_REF_ACT_COUNT] = {"swiglu", "swiglustep", "swigluoai", "situglu",
                                                        "gelu"};

const char *mm_ref_act_name(mm_ref_act_kind kind) {
    if ((int)kind < 0 || kind >= MM_REF_ACT_COUNT) return "invalid";
    return act_names[kind];
}

mm_ref_act_kind mm_ref_act_from_name(const char *name) {
    if (!name) return MM_REF_ACT_COUNT;
    for (int k = 0; k < MM_REF_ACT_COUNT; k++)
        if (strcmp(name, act_names[k]) == 0) return (mm_ref_act_kind)k;
    return MM_REF_ACT_COUNT;
}

/* Accepts count when it is one of the allowed lengths (listed in `accepted` for the message). */
static mm_status check_count(mm_ref_act_kind kind, int64_t count, int64_t max_len, int64_t other_len,
                             const char *accepted, mm_error *err) {
    if (count == 0 || count == max_len || count == other_len) return MM_OK;
    return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation_params has %lld values, %s accepts %s",
                   (long long)count, mm_ref_act_name(kind), accepted);
}

static mm_status check_clamp(float clamp, mm_error *err) {
    if (isnan(clamp) || clamp < 0.0f)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "activation_params[0] (clamp) = %g must be >= 0 and not NaN", (double)clamp);
    return MM_OK;
}

mm_status mm_ref_activation_init(mm_ref_activation *act, mm_ref_act_kind kind, const float *params,
                                 int64_t count, mm_error *err) {
    mm_ref_activation out = {kind, 0.0f, 1.702f, 1.0f, 0, 0.0f};
    mm_status st = MM_OK;
    if ((int)kind < 0 || kind >= MM_REF_ACT_COUNT)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation = %d is not a known activation", (int)kind);
    if (count > 0 && !params)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation_params is NULL with %lld values",
                       (long long)count);
    switch (kind) {
    case MM_REF_ACT_SWIGLU:
    case MM_REF_ACT_SWIGLUSTEP:
        if ((st = check_count(kind, count, 1, 1, "[] or [clamp]", err)) != MM_OK) return st;
        if (count == 1) {
            if ((st = check_clamp(params[0], err)) != MM_OK) return st;
            out.clamp = params[0];
        }
        break;
    case MM_REF_ACT_SWIGLUOAI:
        if ((st = check_count(kind, count, 3, 3, "[] or [clamp, alpha, beta]", err)) != MM_OK) return st;
        if (count == 3) {
            if ((st = check_clamp(params[0], err)) != MM_OK) return st;
            if (!isfinite(params[1]) || !isfinite(params[2]))
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "activation_params alpha = %g, beta = %g: both must be finite",
                               (double)params[1], (double)params[2]);
            out.clamp = params[0];
            out.alpha = params[1];
            out.beta = params[2];
        }
        break;
    case MM_REF_ACT_SITUGLU:
        if ((st = check_count(kind, count, 1, 2, "[], [beta] or [beta, linear_beta]", err)) != MM_OK)
            return st;
        for (int64_t i = 0; i < count; i++) {
            if (!isfinite(params[i]) || !(params[i] > 0.0f))
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "activation_params[%lld] (%s) = %g must be finite and > 0", (long long)i,
                               i == 0 ? "beta" : "linear_beta", (double)params[i]);
        }
        if (count >= 1) out.beta = params[0];
        if (count == 2) {
            out.has_linear_beta = 1;
            out.linear_beta = params[1];
        }
        break;
    case MM_REF_ACT_GELU:
        if ((st = check_count(kind, count, 1, 1, "[] or the placeholder [FLT_MAX]", err)) != MM_OK) return st;
        if (count == 1 && params[0] != FLT_MAX)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "activation_params[0] = %g: gelu takes no clamp, only the placeholder FLT_MAX",
                           (double)params[0]);
        break;
    default: break;
    }
    *act = out;
    return MM_OK;
}

int64_t mm_ref_activation_out_width(mm_ref_act_kind kind, int64_t inter) {
    return kind == MM_REF_ACT_GELU ? 2 * inter : inter;
}

static double sigmoid(double z) {
    return 1.0 / (1.0 + exp(-z));
}
static double silu(double z) {
    return z * sigmoid(z);
}

/* min(v, c); NaN stays NaN. */
static double clamp_high(double v, double c) {
    return v > c ? c : v;
}
/* clip(v, -c, c); NaN stays NaN. */
static double clamp_both(double v, double c) {
    return v > c ? c : (v < -c ? -c : v);
}

float mm_ref_act_gated(const mm_ref_activation *act, float gate, float up) {
    double g = gate, u = up, a = 0.0;
    int clamped = act->clamp != 0.0f; /* 0 (the default) means no clamp */
    double c = act->clamp;
    switch (act->kind) {
    case MM_REF_ACT_SWIGLU:
        if (clamped) {
            g = clamp_high(g, c);
            u = clamp_both(u, c);
        }
        a = silu(g) * u;
        break;
    case MM_REF_ACT_SWIGLUSTEP: {
        double s = silu(g);
        if (clamped) {
            u = clamp_both(u, c);
            s = clamp_high(s, c);
        }
        a = s * u;
        break;
    }
    case MM_REF_ACT_SWIGLUOAI:
        if (clamped) {
            g = clamp_high(g, c);
            u = clamp_both(u, c);
        }
        a = g * sigmoid((double)act->alpha * g) * (u + (double)act->beta);
        break;
    case MM_REF_ACT_SITUGLU: {
        double beta = act->beta;
        double lin = u;
        if (act->has_linear_beta) lin = (double)act->linear_beta * tanh(u / (double)act->linear_beta);
        a = beta * tanh(g / beta) * sigmoid(g) * lin;
        break;
    }
    default: a = NAN; break;
    }
    return (float)a;
}

float mm_ref_act_gelu(float z) {
    /* The tanh form 0.5 z (1 + tanh(k (z + 0.044715 z^3))), k = sqrt(2/pi), evaluated through the identity
     * 0.5 (1 + tanh(v)) = sigmoid(2 v): the same function, without the cancellation of 1 + tanh(v) for
     * negative z (which would give 0 instead of a tiny negative value). */
    const double k2 = 1.59576912160573071176; /* sqrt(8 / pi) */
    double v = z;
    return (float)(v * sigmoid(k2 * (v + 0.044715 * v * v * v)));
}

void mm_ref_activation_row(const mm_ref_activation *act, const float *h, int64_t inter, float *out) {
    if (act->kind == MM_REF_ACT_GELU) {
        for (int64_t j = 0; j < 2 * inter; j++) out[j] = mm_ref_act_gelu(h[j]);
        return;
    }
    for (int64_t j = 0; j < inter; j++) out[j] = mm_ref_act_gated(act, h[j], h[inter + j]);
}
