/* SPDX-License-Identifier: Apache-2.0 */
/* model/router.c: the routers of the Hugging Face MoE families (megamoe/model.h): gate logits from BF16
 * x and gate weights in F32 (the rules of each family are in router_route.c).
 * Plain loops in a fixed order on purpose: the result must not depend on threads or ranks (routing
 * decides which expert a token sees, so a last-bit difference could change the output). */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/parallel.h"
#include "megamoe/formats.h"
#include "megamoe/model.h"
#include "model/model_internal.h"

const char *mm_router_rule_name(mm_router_rule rule) {
    switch (rule) {
    case MM_ROUTER_SOFTMAX_TOPK_RENORM: return "softmax-topk-renorm";
    case MM_ROUTER_SOFTMAX_TOPK: return "softmax-topk";
    case MM_ROUTER_SIGMOID_GROUP_TOPK: return "sigmoid-group-topk";
    case MM_ROUTER_TOPK_SOFTMAX: return "topk-softmax";
    }
    return "invalid";
}

mm_status mm_router_check_2d(const mm_tensor *t, const char *what, mm_dtype dtype, mm_error *err) {
    if (!t) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s is NULL", what);
    if (t->dtype != dtype)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s has dtype %s, must be %s", what,
                       mm_dtype_name(t->dtype), mm_dtype_name(dtype));
    if (t->ndim != 2)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s has %d dimensions, must have 2", what, t->ndim);
    if (t->shape[0] * t->shape[1] > 0 && !t->data)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s has no data", what);
    return MM_OK;
}

typedef struct logits_job {
    const uint16_t *x, *gate;
    float *out;
    int64_t e, h;
    int gate_f16; /* the gate is F16 (AWQ/GPTQ checkpoints): BF16 x F16 products are exact in F32 too */
} logits_job;

/* One token row: E dot products of length H, each summed in index order. */
static void logits_row(void *ctx, int64_t t) {
    const logits_job *j = ctx;
    const uint16_t *xr = j->x + t * j->h;
    float *xf = malloc((size_t)j->h * sizeof *xf);
    if (xf)
        for (int64_t k = 0; k < j->h; k++) xf[k] = mm_bf16_to_f32(xr[k]);
    for (int64_t e = 0; e < j->e; e++) {
        const uint16_t *g = j->gate + e * j->h;
        float s = 0.0f;
        for (int64_t k = 0; k < j->h; k++)
            s += (xf ? xf[k] : mm_bf16_to_f32(xr[k])) *
                 (j->gate_f16 ? mm_f16_to_f32(g[k]) : mm_bf16_to_f32(g[k]));
        j->out[t * j->e + e] = s;
    }
    free(xf);
}

mm_status mm_router_logits(const mm_tensor *x, const mm_tensor *gate, mm_tensor *logits, mm_error *err) {
    mm_status st;
    if ((st = mm_router_check_2d(x, "x", MM_DTYPE_BF16, err)) ||
        (st = mm_router_check_2d(gate, "gate",
                                 gate && gate->dtype == MM_DTYPE_F16 ? MM_DTYPE_F16 : MM_DTYPE_BF16, err)) ||
        (st = mm_router_check_2d(logits, "logits", MM_DTYPE_F32, err)))
        return st;
    if (gate->shape[1] != x->shape[1])
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "gate has %lld columns, x has %lld (both must be H)",
                       (long long)gate->shape[1], (long long)x->shape[1]);
    if (logits->shape[0] != x->shape[0] || logits->shape[1] != gate->shape[0])
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "logits has shape [%lld, %lld], must be [%lld, %lld] (T, E)",
                       (long long)logits->shape[0], (long long)logits->shape[1], (long long)x->shape[0],
                       (long long)gate->shape[0]);
    logits_job j = {x->data,        gate->data,  logits->data,
                    gate->shape[0], x->shape[1], gate->dtype == MM_DTYPE_F16};
    mm_parallel_for(x->shape[0], logits_row, &j);
    return MM_OK;
}

mm_status mm_router_topk(mm_router_rule rule, const mm_tensor *logits, mm_tensor *topk_ids,
                         mm_tensor *topk_weights, mm_error *err) {
    mm_router_params p = mm_router_default_params(rule);
    return mm_router_route(&p, logits, topk_ids, topk_weights, err);
}
