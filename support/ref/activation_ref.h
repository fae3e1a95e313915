/* SPDX-License-Identifier: Apache-2.0 */
/* ref/activation_ref.h: the reference activation functions of MegaMoE (docs/mega_moe.md, Semantics,
 * "Activations").
 *
 * Kept apart from the rest of the reference so that a fast path can be compared function by function.
 * Every function takes F32 inputs, evaluates the formula in double and rounds the result once to F32:
 * the spec computes activations "in F32", and a double evaluation rounded once is the most accurate
 * F32 answer, so a fast F32 kernel is judged against it with a tolerance of a few F32 ulps. */
#ifndef MEGAMOE_REF_ACTIVATION_REF_H
#define MEGAMOE_REF_ACTIVATION_REF_H

#include <stdint.h>

#include "megamoe/status.h"

typedef enum mm_ref_act_kind {
    MM_REF_ACT_SWIGLU = 0,
    MM_REF_ACT_SWIGLUSTEP,
    MM_REF_ACT_SWIGLUOAI,
    MM_REF_ACT_SITUGLU,
    MM_REF_ACT_GELU,
    MM_REF_ACT_COUNT
} mm_ref_act_kind;

/* One activation with its parameters resolved (defaults filled in). */
typedef struct mm_ref_activation {
    mm_ref_act_kind kind;
    float clamp;         /* swiglu, swiglustep, swigluoai: 0 means no clamp */
    float alpha;         /* swigluoai (default 1.702) */
    float beta;          /* swigluoai (default 1.0) and situglu (default 1.0) */
    int has_linear_beta; /* situglu: L(u) = linear_beta * tanh(u / linear_beta) when set, else u */
    float linear_beta;
} mm_ref_activation;

/* Canonical name ("swiglu", ...), or "invalid". */
const char *mm_ref_act_name(mm_ref_act_kind kind);
/* Parses a canonical name; returns MM_REF_ACT_COUNT when unknown. */
mm_ref_act_kind mm_ref_act_from_name(const char *name);

/* Resolves activation_params (count floats) for kind, checking the spec's rules: swiglu/swiglustep []
 * or [clamp]; swigluoai [] or [clamp, alpha, beta]; situglu [] or [beta] or [beta, linear_beta];
 * gelu [] or [FLT_MAX] (a placeholder, ignored). clamp >= 0 and not NaN; alpha, beta finite; situglu
 * betas finite and > 0. */
mm_status mm_ref_activation_init(mm_ref_activation *act, mm_ref_act_kind kind, const float *params,
                                 int64_t count, mm_error *err);

/* Width of the activation output for intermediate size inter: 2 * inter for gelu, else inter. */
int64_t mm_ref_activation_out_width(mm_ref_act_kind kind, int64_t inter);

/* Gated activations on one (gate, up) pair; act->kind must not be gelu. */
float mm_ref_act_gated(const mm_ref_activation *act, float gate, float up);
/* GELU, tanh form, on one value. */
float mm_ref_act_gelu(float z);

/* One row: h holds 2 * inter values (gate = h[0..inter), up = h[inter..2 inter)); out receives
 * mm_ref_activation_out_width(kind, inter) values. */
void mm_ref_activation_row(const mm_ref_activation *act, const float *h, int64_t inter, float *out);

#endif
