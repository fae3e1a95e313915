/* SPDX-License-Identifier: Apache-2.0 */
/* model/router_route.c: the routing rules of the Hugging Face MoE families (megamoe/model.h,
 * mm_router_route): softmax -> top-k (Mixtral, Qwen), sigmoid + correction bias + group-limited top-k
 * (DeepSeek-V3), top-k -> softmax over the chosen (gpt-oss). F32 throughout and plain loops in a fixed
 * order: the routing decides which expert a token sees, so it must not depend on threads or ranks.
 * Every selection takes the largest value not taken yet with a strict >, so ties go to the lower index. */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "model/model_internal.h"

mm_router_params mm_router_default_params(mm_router_rule rule) {
    mm_router_params p = {rule, 1, 1, rule == MM_ROUTER_SOFTMAX_TOPK_RENORM, 1.0f, NULL};
    return p;
}

/* Index of the largest v[i] with taken[i] == 0 (the lower index on ties); marks it taken. Callers take
 * at most n, so one is always left. */
static int64_t take_max(const float *v, unsigned char *taken, int64_t n) {
    int64_t best = 0;
    while (best < n - 1 && taken[best]) best++;
    for (int64_t i = best + 1; i < n; i++)
        if (!taken[i] && v[i] > v[best]) best = i;
    taken[best] = 1;
    return best;
}

static mm_status check_params(const mm_router_params *p, int64_t e_n, int64_t k_n, mm_error *err) {
    if (p->rule < MM_ROUTER_SOFTMAX_TOPK_RENORM || p->rule > MM_ROUTER_TOPK_SOFTMAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "rule = %d is not a router rule", (int)p->rule);
    if (p->bias) {
        if (p->rule == MM_ROUTER_SOFTMAX_TOPK_RENORM || p->rule == MM_ROUTER_SOFTMAX_TOPK)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "router rule %s takes no bias",
                           mm_router_rule_name(p->rule));
        if (p->bias->dtype != MM_DTYPE_F32 || p->bias->ndim != 1 || p->bias->shape[0] != e_n ||
            (e_n > 0 && !p->bias->data))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "bias must be (%lld,) F32 (E, the logits' columns)",
                           (long long)e_n);
        const float *b = p->bias->data;
        for (int64_t e = 0; e < e_n; e++)
            if (!isfinite(b[e]))
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "bias[%lld] = %g is not finite", (long long)e,
                               (double)b[e]);
    }
    if (p->rule != MM_ROUTER_SIGMOID_GROUP_TOPK) return MM_OK;
    if (p->n_group < 1 || e_n % p->n_group != 0 || e_n / p->n_group < 2)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "n_group = %lld must divide the %lld experts into groups of at least 2 (the group "
                       "score sums the top 2)",
                       (long long)p->n_group, (long long)e_n);
    if (p->topk_group < 1 || p->topk_group > p->n_group)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "topk_group = %lld is outside [1, n_group = %lld]",
                       (long long)p->topk_group, (long long)p->n_group);
    if (k_n > p->topk_group * (e_n / p->n_group))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "topk = %lld exceeds the %lld experts of the topk_group = %lld kept groups",
                       (long long)k_n, (long long)(p->topk_group * (e_n / p->n_group)),
                       (long long)p->topk_group);
    if (!isfinite(p->scaling) || p->scaling <= 0.0f)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "scaling (routed_scaling_factor) = %g must be finite and > 0", (double)p->scaling);
    return MM_OK;
}

/* softmax over the row, top-k of p, optionally divided by the sum of the K chosen (output order). */
static void route_softmax(const float *row, int64_t e_n, int64_t k_n, int renorm, float *p,
                          unsigned char *taken, int32_t *ir, float *wr) {
    float m = row[0];
    for (int64_t e = 1; e < e_n; e++) m = row[e] > m ? row[e] : m;
    float s = 0.0f;
    for (int64_t e = 0; e < e_n; e++) s += p[e] = expf(row[e] - m);
    for (int64_t e = 0; e < e_n; e++) p[e] /= s;
    float sum = 0.0f;
    for (int64_t k = 0; k < k_n; k++) {
        int64_t best = take_max(p, taken, e_n);
        ir[k] = (int32_t)best;
        sum += wr[k] = p[best];
    }
    if (renorm)
        for (int64_t k = 0; k < k_n; k++) wr[k] /= sum;
}

/* DeepSeek-V3's noaux_tc rule (transformers DeepseekV3TopkRouter). c holds E + n_group floats. */
static void route_group(const mm_router_params *prm, const float *row, int64_t e_n, int64_t k_n, float *c,
                        unsigned char *taken, int32_t *ir, float *wr) {
    const float *bias = prm->bias ? prm->bias->data : NULL;
    int64_t g_n = prm->n_group, per = e_n / g_n;
    float *gscore = c + e_n;
    for (int64_t e = 0; e < e_n; e++) c[e] = 1.0f / (1.0f + expf(-row[e])) + (bias ? bias[e] : 0.0f);
    for (int64_t g = 0; g < g_n; g++) { /* the sum of the group's two largest c (first + second) */
        const float *cg = c + g * per;
        int64_t a = 0;
        for (int64_t i = 1; i < per; i++) a = cg[i] > cg[a] ? i : a;
        int64_t b = a == 0 ? 1 : 0;
        for (int64_t i = 0; i < per; i++)
            if (i != a && cg[i] > cg[b]) b = i;
        gscore[g] = cg[a] + cg[b];
    }
    for (int64_t g = 0; g < g_n; g++) taken[g] = 0;
    for (int64_t k = 0; k < prm->topk_group; k++) take_max(gscore, taken, g_n);
    /* experts of the groups not kept compete with c = 0 (masked_fill(0.0) in transformers) */
    for (int64_t g = 0; g < g_n; g++)
        if (!taken[g])
            for (int64_t i = 0; i < per; i++) c[g * per + i] = 0.0f;
    for (int64_t e = 0; e < e_n; e++) taken[e] = 0;
    float sum = 0.0f;
    for (int64_t k = 0; k < k_n; k++) {
        int64_t best = take_max(c, taken, e_n);
        ir[k] = (int32_t)best;
        sum += wr[k] = 1.0f / (1.0f + expf(-row[best])); /* the unbiased score */
    }
    float denom = sum + 1e-20f;
    for (int64_t k = 0; k < k_n; k++) wr[k] = (prm->normalize ? wr[k] / denom : wr[k]) * prm->scaling;
}

/* gpt-oss: top-k of logits + bias, then the softmax of the K chosen values (the first is the maximum). */
static void route_topk_softmax(const mm_router_params *prm, const float *row, int64_t e_n, int64_t k_n,
                               float *l, unsigned char *taken, int32_t *ir, float *wr) {
    const float *bias = prm->bias ? prm->bias->data : NULL;
    for (int64_t e = 0; e < e_n; e++) l[e] = row[e] + (bias ? bias[e] : 0.0f);
    for (int64_t k = 0; k < k_n; k++) ir[k] = (int32_t)take_max(l, taken, e_n);
    float m = l[ir[0]], s = 0.0f;
    for (int64_t k = 0; k < k_n; k++) s += wr[k] = expf(l[ir[k]] - m);
    for (int64_t k = 0; k < k_n; k++) wr[k] /= s;
}

mm_status mm_router_route(const mm_router_params *prm, const mm_tensor *logits, mm_tensor *topk_ids,
                          mm_tensor *topk_weights, mm_error *err) {
    mm_status st;
    if (!prm) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_router_route: params is NULL");
    if ((st = mm_router_check_2d(logits, "logits", MM_DTYPE_F32, err)) ||
        (st = mm_router_check_2d(topk_ids, "topk_ids", MM_DTYPE_I32, err)) ||
        (st = mm_router_check_2d(topk_weights, "topk_weights", MM_DTYPE_F32, err)))
        return st;
    int64_t t_n = logits->shape[0], e_n = logits->shape[1], k_n = topk_ids->shape[1];
    if (topk_ids->shape[0] != t_n || topk_weights->shape[0] != t_n || topk_weights->shape[1] != k_n)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "topk_ids [%lld, %lld] and topk_weights [%lld, %lld] must both be [T, K] with T = %lld",
            (long long)topk_ids->shape[0], (long long)k_n, (long long)topk_weights->shape[0],
            (long long)topk_weights->shape[1], (long long)t_n);
    if (k_n < 1 || k_n > e_n)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "topk = %lld is outside [1, %lld] (E, the logits' columns)", (long long)k_n,
                       (long long)e_n);
    if ((st = check_params(prm, e_n, k_n, err))) return st;
    const float *l = logits->data;
    for (int64_t i = 0; i < t_n * e_n; i++)
        if (!isfinite(l[i]))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "logits[%lld][%lld] = %g is not finite",
                           (long long)(i / e_n), (long long)(i % e_n), (double)l[i]);
    float *work = malloc((size_t)(2 * e_n) * sizeof *work);
    unsigned char *taken = malloc((size_t)e_n);
    if (!work || !taken) {
        free(work);
        free(taken);
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "router: out of memory for %lld experts", (long long)e_n);
    }
    int32_t *ids = topk_ids->data;
    float *w = topk_weights->data;
    for (int64_t t = 0; t < t_n; t++) {
        for (int64_t e = 0; e < e_n; e++) taken[e] = 0;
        const float *row = l + t * e_n;
        int32_t *ir = ids + t * k_n;
        float *wr = w + t * k_n;
        switch (prm->rule) {
        case MM_ROUTER_SOFTMAX_TOPK_RENORM:
        case MM_ROUTER_SOFTMAX_TOPK:
            route_softmax(row, e_n, k_n, prm->rule == MM_ROUTER_SOFTMAX_TOPK_RENORM, work, taken, ir, wr);
            break;
        case MM_ROUTER_SIGMOID_GROUP_TOPK: route_group(prm, row, e_n, k_n, work, taken, ir, wr); break;
        case MM_ROUTER_TOPK_SOFTMAX: route_topk_softmax(prm, row, e_n, k_n, work, taken, ir, wr); break;
        }
    }
    free(work);
    free(taken);
    return MM_OK;
}
