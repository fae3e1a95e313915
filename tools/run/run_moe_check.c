/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_check.c: checks the sampled tokens of `megamoe run` against the float64 reference.
 *
 * The reference (support/ref/mega_moe_ref.h, private: this is the one CLI file that includes src/) works on
 * a global view. A token's y depends only on its own row, its experts' weights and its home rank's
 * shared experts, and in combine mode 0 not on where the experts live; so the samples of all ranks are
 * checked as one world of a single rank that holds just the experts the samples touch (relabelled
 * 0..E'-1, rebuilt from the seed) and the shared experts (the same on every rank). That keeps the
 * reference's cost to the sampled rows and the touched experts. The samples are split into two parts
 * checked on two threads (each part rebuilds the experts it touches). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "megamoe/formats.h"
#include "ref/mega_moe_ref.h"
#include "common/cli_util.h"
#include "run/run_moe.h"

static mm_ref_weights ref_weights_of(const run_moe_expert_data *d) {
    mm_ref_weights w;
    memset(&w, 0, sizeof w);
    w.dtype = d->dtype;
    w.count = d->count;
    w.weight1 = d->weight1;
    w.weight2 = d->weight2;
    if (d->block_n > 0) { /* block-scaled (A16W8-FP8, A16W4-INT) */
        w.block_scales1 = d->scales1;
        w.block_scales2 = d->scales2;
        w.zeros1 = d->zeros1;
        w.zeros2 = d->zeros2;
    } else {
        w.scales1 = d->scales1;
        w.scales2 = d->scales2;
    }
    w.mx_scales1 = d->mx_scales1;
    w.mx_scales2 = d->mx_scales2;
    w.bias1 = d->bias1;
    w.bias2 = d->bias2;
    return w;
}

/* Ordered integer of a BF16 pattern: adjacent representable values differ by 1 (+0 and -0 both 0). */
static int32_t bf16_order(uint16_t b) {
    return (b & 0x8000) ? -(int32_t)(b & 0x7FFF) : (int32_t)b;
}

/* The scenario's tolerance, widened for a quantized combine: the run and the reference quantize the
 * same routed rows, but an ulp of difference before it can flip one MX code, one step of that format
 * (2^-3 relative for E4M3, 2^-2 for E5M2) of that output's routed term. */
double run_moe_check_tolerance_relative(const run_moe_config *cfg, const run_moe_scenario *sc) {
    double t = sc->tolerance_relative;
    double combine = cfg->combine_quant_mode == 3 ? 0.25 : cfg->combine_quant_mode == 4 ? 0.125 : 0.0;
    return combine > t ? combine : t;
}

static void measure(const run_moe_config *cfg, const run_moe_scenario *sc, const uint16_t *y,
                    const uint16_t *ref, int64_t n, run_moe_errors *out) {
    double tol_relative = run_moe_check_tolerance_relative(cfg, sc);
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double r = mm_bf16_to_f32(ref[i]);
        sum_sq += r * r;
    }
    double rms = n > 0 ? sqrt(sum_sq / (double)n) : 0.0;
    double max_abs = 0.0;
    int64_t ulp_ok = 0, tol_ok = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = mm_bf16_to_f32(y[i]), r = mm_bf16_to_f32(ref[i]);
        double d = fabs(a - r);
        if (!(d <= max_abs)) max_abs = d; /* NaN propagates */
        if (abs(bf16_order(y[i]) - bf16_order(ref[i])) <= 1) ulp_ok++;
        if (d <= tol_relative * fabs(r) + sc->tolerance_rms * rms) tol_ok++;
    }
    out->values = n;
    out->rms_ref = rms;
    out->max_abs_over_rms = rms > 0.0 ? max_abs / rms : max_abs;
    out->within_ulp = n > 0 ? (double)ulp_ok / (double)n : 1.0;
    out->within_tolerance = n > 0 ? (double)tol_ok / (double)n : 1.0;
}

/* One part of the samples: rows [begin, end) of the gathered arrays, checked by its own reference call
 * on its own thread (the reference is single-threaded; the machine has cores to spare after the run). */
typedef struct check_part {
    const run_moe_config *cfg;
    const run_moe_scenario *sc;
    int64_t begin, end;
    const uint16_t *x;  /* (n, H) all samples */
    const int32_t *ids; /* (n, K) global expert ids */
    const float *gates; /* (n, K) */
    uint16_t *y_ref;    /* (n, H): this part writes its rows */
    mm_status status;
    mm_error err;
} check_part;

/* The reference on the part's rows, as a world of one rank holding just the experts they touch. */
static mm_status check_rows(check_part *p) {
    const run_moe_config *cfg = p->cfg;
    int64_t H = cfg->hidden, K = cfg->topk, n = p->end - p->begin;
    mm_error *err = &p->err;
    run_moe_expert_data routed, shared;
    memset(&routed, 0, sizeof routed);
    memset(&shared, 0, sizeof shared);
    int64_t *used = malloc((size_t)(n * K + 1) * sizeof *used);
    int64_t *label = malloc((size_t)cfg->experts * sizeof *label);
    int32_t *ids = malloc((size_t)(n * K + 1) * 4);
    int32_t *counts = malloc((size_t)(n * K + 1) * 4);
    mm_status st = MM_OK;
    if (!used || !label || !ids || !counts) {
        st = cli_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for the check of %lld tokens", (long long)n);
        goto done;
    }
    /* relabel the experts in order of first use */
    int64_t distinct = 0;
    for (int64_t e = 0; e < cfg->experts; e++) label[e] = -1;
    for (int64_t i = 0; i < n * K; i++) {
        int32_t e = p->ids[p->begin * K + i];
        if (label[e] < 0) {
            label[e] = distinct;
            used[distinct++] = e;
        }
        ids[i] = (int32_t)label[e];
    }
    if ((st = run_moe_expert_data_make(cfg, p->sc, 0, used, distinct, &routed, err)) != MM_OK) goto done;
    if (cfg->shared_experts > 0 &&
        (st = run_moe_expert_data_make(cfg, p->sc, RUN_MOE_SHARED_ID_BASE, NULL, cfg->shared_experts, &shared,
                                       err)) != MM_OK)
        goto done;

    mm_ref_attrs attrs;
    memset(&attrs, 0, sizeof attrs);
    attrs.expert_num = distinct;
    attrs.world_size = 1;
    attrs.topk = K;
    attrs.hidden = H;
    attrs.inter = cfg->inter;
    mm_ref_act_kind kind = mm_ref_act_from_name(mm_mega_moe_activation_name(cfg->preset->activation));
    st = mm_ref_activation_init(&attrs.activation, kind, cfg->preset->activation_params,
                                cfg->preset->activation_param_count, err);
    if (st != MM_OK) goto done;
    attrs.dispatch_dtype = p->sc->dispatch_dtype;
    attrs.shared_quant_dtype = MM_DTYPE_INVALID;
    attrs.activation_out_dtype = MM_DTYPE_INVALID;
    attrs.transpose_weight1 = 1;
    attrs.transpose_weight2 = 1;
    attrs.topk_weights_type = cfg->topk_weights_type;
    attrs.combine_quant_mode = cfg->combine_quant_mode;
    run_moe_scale_blocks(cfg, p->sc, &attrs.scale_block_n, &attrs.scale_block_k);
    attrs.weight1_interleave = cfg->weight1_interleave;
    /* combine_comm_mode stays 0: in this one-rank world a per-rank or per-domain partial sum would
     * group the experts differently from the run's placement. Modes 1 and 2 change only where the
     * routed terms are summed in F32 before y's rounding, which the tolerance covers. */

    mm_ref_rank_input in;
    memset(&in, 0, sizeof in);
    in.bs = n;
    in.x_bf16 = p->x + p->begin * H;
    in.topk_ids = ids;
    in.topk_weights = p->gates + p->begin * K;
    in.routed = ref_weights_of(&routed);
    in.shared = ref_weights_of(&shared);
    in.shared.dtype = cfg->shared_experts > 0 ? p->sc->weight_dtype : MM_DTYPE_INVALID;
    mm_ref_rank_output ref_out = {p->y_ref + p->begin * H, counts, NULL};
    st = mm_ref_mega_moe(&attrs, &in, &ref_out, err);
done:
    run_moe_expert_data_free(&routed);
    run_moe_expert_data_free(&shared);
    free(used);
    free(label);
    free(ids);
    free(counts);
    return st;
}

static void *check_part_main(void *arg) {
    check_part *p = arg;
    p->status = check_rows(p);
    return NULL;
}

enum { CHECK_PARTS = 2 };

mm_status run_moe_check(const run_moe_config *cfg, const run_moe_scenario *sc,
                        const run_moe_rank_result *results, run_moe_errors *out, mm_error *err) {
    int64_t H = cfg->hidden, K = cfg->topk, n = 0;
    for (int64_t r = 0; r < cfg->ranks; r++) n += results[r].sample_count;
    uint16_t *x = malloc((size_t)(n * H + 1) * 2), *y = malloc((size_t)(n * H + 1) * 2);
    uint16_t *y_ref = malloc((size_t)(n * H + 1) * 2);
    int32_t *ids = malloc((size_t)(n * K + 1) * 4);
    float *gates = malloc((size_t)(n * K + 1) * 4);
    mm_status st = MM_OK;
    if (!x || !y || !y_ref || !ids || !gates) {
        st = cli_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for the check of %lld tokens", (long long)n);
        goto done;
    }
    for (int64_t r = 0, row = 0; r < cfg->ranks; r++) {
        const run_moe_rank_result *res = &results[r];
        memcpy(x + row * H, res->sample_x, (size_t)(res->sample_count * H) * 2);
        memcpy(y + row * H, res->sample_y, (size_t)(res->sample_count * H) * 2);
        memcpy(ids + row * K, res->sample_ids, (size_t)(res->sample_count * K) * 4);
        memcpy(gates + row * K, res->sample_weights, (size_t)(res->sample_count * K) * 4);
        row += res->sample_count;
    }
    /* Parts of consecutive rows on their own threads; a thread that cannot start runs its part here. */
    check_part parts[CHECK_PARTS];
    pthread_t threads[CHECK_PARTS];
    int started[CHECK_PARTS] = {0};
    int64_t count = n < CHECK_PARTS ? n : CHECK_PARTS;
    for (int64_t p = 0; p < count; p++) {
        check_part part = {cfg,   sc,    p * n / count, (p + 1) * n / count, x, ids,
                           gates, y_ref, MM_OK,         {MM_OK, ""}};
        parts[p] = part;
        started[p] = p > 0 && pthread_create(&threads[p], NULL, check_part_main, &parts[p]) == 0;
    }
    for (int64_t p = 0; p < count; p++)
        if (!started[p]) check_part_main(&parts[p]);
    for (int64_t p = 0; p < count; p++) {
        if (started[p]) pthread_join(threads[p], NULL);
        if (st == MM_OK && parts[p].status != MM_OK) {
            st = parts[p].status;
            if (err) *err = parts[p].err;
        }
    }
    if (st == MM_OK) measure(cfg, sc, y, y_ref, n * H, out);
done:
    free(x);
    free(y);
    free(y_ref);
    free(ids);
    free(gates);
    return st;
}
