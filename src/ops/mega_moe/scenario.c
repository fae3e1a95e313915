/* ops/mega_moe/scenario.c: the scenario path (from scenario_table.c), activation parameters and the fast F32
 * activations.
 *
 * The activations are evaluated in F32 (the spec says "activation in F32") with the operator's own
 * exp (mm_moe_exp_f32, which the AVX-512 row version repeats bit for bit) and the C library's tanhf;
 * the float64 reference rounds an exact evaluation once, so the two agree to a few F32 ulps
 * (tests/test_mega_moe_activation.c pins that). */
#include <float.h>
#include <math.h>

#include "core/error.h"
#include "format/format_table.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/mega_moe_internal.h"

static const char *const activation_names[] = {"swiglu", "swiglustep", "swigluoai", "situglu", "gelu"};

const char *mm_mega_moe_activation_name(mm_mega_moe_activation activation) {
    if ((int)activation < 0 || (int)activation > (int)MM_MEGA_MOE_GELU) return "invalid";
    return activation_names[activation];
}

int mm_mega_moe_activation_from_name(const char *name) {
    for (int i = 0; name && i <= (int)MM_MEGA_MOE_GELU; i++) {
        const char *a = activation_names[i], *b = name;
        while (*a && *a == *b) a++, b++;
        if (!*a && !*b) return i;
    }
    return -1;
}

mm_status mm_moe_path_make(mm_dtype weight_dtype, mm_dtype input_dtype, mm_dtype activation_out_dtype,
                           const char *what, mm_moe_path *path, mm_error *err) {
    const mm_moe_scenario_row *row = mm_moe_scenario_find(weight_dtype, input_dtype);
    if (!row)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s weight dtype %s does not pair with dispatch dtype %s (scenario table: bf16 with "
                       "none, int8/int4 with int8, fp8 with the same fp8, fp4_e2m1 with fp8_e4m3fn or "
                       "fp4_e2m1)",
                       what, mm_dtype_name(weight_dtype),
                       input_dtype == MM_DTYPE_INVALID ? "none" : mm_dtype_name(input_dtype));
    mm_moe_path p = {row->kind, row->gemm1_input, row->gemm2_input};
    if (activation_out_dtype != MM_DTYPE_INVALID) {
        int fp = mm_format_is_mx(p.gemm2_dtype);
        if (!fp || (activation_out_dtype != MM_DTYPE_FP8_E4M3FN && activation_out_dtype != MM_DTYPE_FP8_E5M2))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "activation_out_dtype = %s: only fp8_e4m3fn or fp8_e5m2, and only in an FP "
                           "scenario (%s experts are %s)",
                           mm_dtype_name(activation_out_dtype), what, mm_moe_scenario_name(p.scenario));
        p.gemm2_dtype = activation_out_dtype;
    }
    *path = p;
    return MM_OK;
}

static mm_status check_count(const mm_mega_moe_attrs *a, int lo, int hi, const char *rule, mm_error *err) {
    int n = a->activation_param_count;
    if (n == 0 || (n >= lo && n <= hi)) return MM_OK;
    return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation_params has %d values: %s takes %s", n,
                   mm_mega_moe_activation_name(a->activation), rule);
}

static mm_status check_clamp(float c, mm_error *err) {
    if (isnan(c) || c < 0.0f)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation_params clamp = %g must be >= 0 and not NaN",
                       (double)c);
    return MM_OK;
}

mm_status mm_moe_act_resolve(const mm_mega_moe_attrs *a, mm_moe_act *act, mm_error *err) {
    mm_moe_act r = {a->activation, 0.0f, 1.702f, 1.0f, 0, 0.0f};
    const float *p = a->activation_params;
    mm_status st = MM_OK;
    if (a->activation_param_count < 0 || a->activation_param_count > MM_MEGA_MOE_MAX_ACTIVATION_PARAMS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation_param_count = %d is outside [0, %d]",
                       a->activation_param_count, MM_MEGA_MOE_MAX_ACTIVATION_PARAMS);
    switch (a->activation) {
    case MM_MEGA_MOE_SWIGLU:
    case MM_MEGA_MOE_SWIGLUSTEP:
        if ((st = check_count(a, 1, 1, "[] or [clamp]", err)) != MM_OK) return st;
        if (a->activation_param_count == 1) {
            if ((st = check_clamp(p[0], err)) != MM_OK) return st;
            r.clamp = p[0];
        }
        break;
    case MM_MEGA_MOE_SWIGLUOAI:
        if ((st = check_count(a, 3, 3, "[] or [clamp, alpha, beta]", err)) != MM_OK) return st;
        if (a->activation_param_count == 3) {
            if ((st = check_clamp(p[0], err)) != MM_OK) return st;
            if (!isfinite(p[1]) || !isfinite(p[2]))
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "activation_params alpha = %g, beta = %g: both must be finite", (double)p[1],
                               (double)p[2]);
            r.clamp = p[0];
            r.alpha = p[1];
            r.beta = p[2];
        }
        break;
    case MM_MEGA_MOE_SITUGLU:
        if ((st = check_count(a, 1, 2, "[], [beta] or [beta, linear_beta]", err)) != MM_OK) return st;
        for (int i = 0; i < a->activation_param_count; i++)
            if (!isfinite(p[i]) || !(p[i] > 0.0f))
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "activation_params[%d] (%s) = %g must be finite and > 0", i,
                               i == 0 ? "beta" : "linear_beta", (double)p[i]);
        if (a->activation_param_count >= 1) r.beta = p[0];
        if (a->activation_param_count == 2) {
            r.has_linear_beta = 1;
            r.linear_beta = p[1];
        }
        break;
    case MM_MEGA_MOE_GELU:
        if ((st = check_count(a, 1, 1, "[] or the placeholder [FLT_MAX]", err)) != MM_OK) return st;
        if (a->activation_param_count == 1 && p[0] != FLT_MAX)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "activation_params[0] = %g: gelu takes no clamp, only the placeholder FLT_MAX",
                           (double)p[0]);
        break;
    default:
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "activation = %d is not a known activation",
                       (int)a->activation);
    }
    *act = r;
    return MM_OK;
}

static float sigmoidf(float z) {
    return mm_moe_sigmoid_f32(z);
}

/* min / clip that keep NaN (a NaN input must stay NaN, as in the reference). */
static float clamp_high(float v, float c) {
    return v > c ? c : v;
}
static float clamp_both(float v, float c) {
    return v > c ? c : (v < -c ? -c : v);
}

float mm_moe_act_gated(const mm_moe_act *act, float g, float u) {
    int clamped = act->clamp != 0.0f;
    float c = act->clamp;
    switch (act->kind) {
    case MM_MEGA_MOE_SWIGLU:
        if (clamped) {
            g = clamp_high(g, c);
            u = clamp_both(u, c);
        }
        return g * sigmoidf(g) * u;
    case MM_MEGA_MOE_SWIGLUSTEP: {
        float s = g * sigmoidf(g);
        if (clamped) {
            u = clamp_both(u, c);
            s = clamp_high(s, c);
        }
        return s * u;
    }
    case MM_MEGA_MOE_SWIGLUOAI:
        if (clamped) {
            g = clamp_high(g, c);
            u = clamp_both(u, c);
        }
        return g * sigmoidf(act->alpha * g) * (u + act->beta);
    case MM_MEGA_MOE_SITUGLU: {
        float lin = act->has_linear_beta ? act->linear_beta * tanhf(u / act->linear_beta) : u;
        return act->beta * tanhf(g / act->beta) * sigmoidf(g) * lin;
    }
    default: return NAN;
    }
}

float mm_moe_act_gelu(float z) {
    /* 0.5 z (1 + tanh(v)) = z sigmoid(2 v): no cancellation for negative z. */
    const float k2 = 1.5957691216057308f; /* sqrt(8 / pi) */
    return z * sigmoidf(k2 * (z + 0.044715f * z * z * z));
}

void mm_moe_act_row(const mm_moe_act *act, const float *h, int64_t inter, float *out) {
    if (act->kind == MM_MEGA_MOE_GELU) {
        for (int64_t j = 0; j < 2 * inter; j++) out[j] = mm_moe_act_gelu(h[j]);
        return;
    }
    mm_moe_rowops_get()->act_gated(act, h, h + inter, out, inter);
}

void mm_moe_quantize_input(mm_dtype dtype, const uint16_t *x, int64_t hidden, uint8_t *data, uint8_t *mx,
                           float *int8_scale, float *f32_row) {
    if (dtype == MM_DTYPE_I8) {
        /* Per token, on the F32 value of each BF16 element: s = amax / 127, q = round_half_away(x / s). */
        const mm_moe_rowops *ops = mm_moe_rowops_get();
        ops->from_bf16(f32_row, x, hidden);
        ops->int8_quantize(f32_row, hidden, 0, (int8_t *)data, int8_scale);
        return;
    }
    if (mm_format_is_mx(dtype)) {
        mm_mx_quantize_row_bf16(x, hidden, dtype, data, mx, NULL);
        return;
    }
    for (int64_t k = 0; k < hidden; k++) ((uint16_t *)data)[k] = x[k];
}
