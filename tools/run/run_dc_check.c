/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_dc_check.c: the float64 check of `megamoe run --op dispatch-combine`.
 *
 * For sampled tokens of one rank it recomputes, from the world's inputs alone (not from anything the
 * operators produced), what Dispatch -> expert FFN -> Combine + Add + RMSNorm must give: the expert
 * FFNs in float64 on the same seeded BF16 weights (run_dc_ffn.c's seeding), the weighted sum with the
 * zero / copy / const experts, the shared experts and shared_expert_x, the residual, rstd and y
 * (docs/dispatch_combine.md, "Semantics and decisions"). The INT8 dispatch (quant mode 2, optionally
 * smoothed) is replayed with the spec's F32 steps, since it defines the rows the FFN sees. Inactive tokens
 * must come back as zeros. TP and elastic scale-in are not covered here (the operator tests pin them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/demo_data.h"
#include "megamoe/formats.h"
#include "run/run_dc_check.h"

/* The weights of one expert as run_dc_ffn.c seeds them (TP rank 0 of 1), as float64 values. */
typedef struct ref_expert {
    int64_t hidden, inter;
    double *w1; /* (H, 2I): gate columns 0..I-1, up columns I..2I-1 */
    double *w2; /* (I, H) */
} ref_expert;

static double seeded_value(uint64_t *s, float scale) {
    uint64_t z = cli_rand_u64(s);
    return mm_bf16_to_f32(mm_f32_to_bf16(scale * ((float)(z >> 40) / (float)(1u << 24) * 2.0f - 1.0f)));
}

static int ref_expert_make(int64_t seed_id, int64_t hidden, int64_t inter, ref_expert *e) {
    e->hidden = hidden, e->inter = inter;
    e->w1 = malloc((size_t)(hidden * 2 * inter) * sizeof(double));
    e->w2 = malloc((size_t)(inter * hidden) * sizeof(double));
    if (!e->w1 || !e->w2) return -1;
    float s1 = 1.0f / sqrtf((float)hidden), s2 = 1.0f / sqrtf((float)inter);
    uint64_t seed = (uint64_t)seed_id * 1315423911u + 7;
    for (int64_t j = 0; j < hidden * 2 * inter; j++) e->w1[j] = seeded_value(&seed, s1);
    for (int64_t j = 0; j < inter * hidden; j++) e->w2[j] = seeded_value(&seed, s2);
    return 0;
}

static void ref_expert_free(ref_expert *e) {
    free(e->w1), free(e->w2);
    memset(e, 0, sizeof *e);
}

/* out (H) += scale * FFN(in): h = in W1, a = silu(gate) * up, out = a W2, all in float64. */
static void ref_ffn_add(const ref_expert *e, const double *in, double scale, double *h, double *out) {
    int64_t H = e->hidden, I = e->inter;
    for (int64_t j = 0; j < 2 * I; j++) h[j] = 0.0;
    for (int64_t k = 0; k < H; k++) {
        const double *row = e->w1 + k * 2 * I;
        for (int64_t j = 0; j < 2 * I; j++) h[j] += in[k] * row[j];
    }
    for (int64_t j = 0; j < I; j++) {
        double a = h[j] / (1.0 + exp(-h[j])) * h[I + j];
        const double *row = e->w2 + j * H;
        for (int64_t c = 0; c < H; c++) out[c] += scale * a * row[c];
    }
}

/* The row an expert receives: x itself, or with quant mode 2 its smoothed (F32 x * s) INT8 quantization
 * (m = 127 / amax, q = round half even (x m)) as the FFN reads it back (BF16(q / m)). */
static void expert_input(const cli_dc_world *w, const uint16_t *x, const float *smooth_row, double *in) {
    int64_t H = w->o.hidden;
    if (w->o.quant != 2) {
        for (int64_t j = 0; j < H; j++) in[j] = mm_bf16_to_f32(x[j]);
        return;
    }
    float amax = 0.0f;
    for (int64_t j = 0; j < H; j++) {
        float v = mm_bf16_to_f32(x[j]) * (smooth_row ? smooth_row[j] : 1.0f);
        if (fabsf(v) > amax) amax = fabsf(v);
    }
    float m = amax > 0.0f ? 127.0f / amax : 0.0f, inv = amax > 0.0f ? 1.0f / m : 0.0f;
    for (int64_t j = 0; j < H; j++) {
        float v = mm_bf16_to_f32(x[j]) * (smooth_row ? smooth_row[j] : 1.0f);
        in[j] = mm_bf16_to_f32(mm_f32_to_bf16(nearbyintf(v * m) * inv));
    }
}

int cli_dc_check_supported(const cli_dc_world *w) {
    return w->tpw == 1 && !w->elastic;
}

typedef struct token_sum {
    int64_t token;
    int active;
    double *sum; /* (H) the weighted expert sum, steps 2-3 */
} token_sum;

/* Steps 2-3 for the special experts, the shared experts and shared_expert_x; routed experts are added
 * per expert by the caller (each expert's weights made once). */
static void add_special(const cli_dc_world *w, const cli_dc_rank *r, int64_t i, double *sum) {
    const cli_dc_opts *o = &w->o;
    int64_t H = o->hidden, K = o->topk, M = w->M_eff;
    for (int64_t k = 0; k < K; k++) {
        if (o->mask == 2 && !r->mask[i * K + k]) continue;
        int64_t e = r->ids[i * K + k];
        double wk = r->weights[i * K + k];
        const uint16_t *ori = r->ori + i * H;
        if (e < M + o->zero) continue; /* routed (added by the caller) or zero */
        if (e < M + o->zero + o->copy) {
            for (int64_t j = 0; j < H; j++) sum[j] += wk * mm_bf16_to_f32(ori[j]);
            continue;
        }
        int64_t c = e - M - o->zero - o->copy;
        const uint16_t *v = w->const_v + c * H;
        if (!o->alpha_2d) {
            for (int64_t j = 0; j < H; j++)
                sum[j] += wk * (w->alpha1[c] * mm_bf16_to_f32(ori[j]) + w->alpha2[c] * mm_bf16_to_f32(v[j]));
            continue;
        }
        double a1 = 0.0, a2 = 0.0;
        for (int64_t j = 0; j < H; j++) {
            a1 += (double)w->alpha1[c * H + j] * mm_bf16_to_f32(ori[j]);
            a2 += (double)w->alpha2[c * H + j] * mm_bf16_to_f32(ori[j]);
        }
        double mx = a1 > a2 ? a1 : a2, p1 = exp(a1 - mx), p2 = exp(a2 - mx), z = p1 + p2;
        for (int64_t j = 0; j < H; j++)
            sum[j] += wk * (p1 / z * mm_bf16_to_f32(ori[j]) + p2 / z * mm_bf16_to_f32(v[j]));
    }
    if (o->shared_x)
        for (int64_t j = 0; j < H; j++) sum[j] += mm_bf16_to_f32(r->shared_x[i * H + j]);
}

static int token_active(const cli_dc_world *w, const cli_dc_rank *r, int64_t i) {
    if (w->o.mask == 1) return r->mask[i] != 0;
    if (w->o.mask != 2) return 1;
    for (int64_t k = 0; k < w->o.topk; k++)
        if (r->mask[i * w->o.topk + k]) return 1;
    return 0;
}

mm_status cli_dc_check_rank(const cli_dc_world *w, int64_t g, int64_t inter, int64_t samples,
                            const uint16_t *y, const uint16_t *x_out, const float *rstd,
                            cli_dc_check_stats *stats, mm_error *err) {
    const cli_dc_opts *o = &w->o;
    const cli_dc_rank *r = &w->rank[g];
    int64_t H = o->hidden, K = o->topk, bs = r->bs, n = samples < bs ? samples : bs;
    memset(stats, 0, sizeof *stats);
    if (n <= 0) return MM_OK;
    token_sum *t = calloc((size_t)n, sizeof *t);
    double *sums = calloc((size_t)(n * H), sizeof(double));
    double *in = malloc((size_t)H * sizeof(double)), *h = malloc((size_t)(2 * inter) * sizeof(double));
    mm_status st = MM_OK;
    ref_expert e = {0};
    if (!t || !sums || !in || !h) goto oom;
    for (int64_t s = 0; s < n; s++) {
        t[s].token = s * bs / n;
        t[s].active = token_active(w, r, t[s].token);
        t[s].sum = sums + s * H;
        if (t[s].active) add_special(w, r, t[s].token, t[s].sum);
    }
    /* Routed experts: each expert's weights once, applied to every sampled pair routed to it. */
    for (int64_t ex = 0; ex < w->M_eff; ex++) {
        int made = 0;
        for (int64_t s = 0; s < n; s++) {
            int64_t i = t[s].token;
            for (int64_t k = 0; k < K && t[s].active; k++) {
                if (r->ids[i * K + k] != ex || (o->mask == 2 && !r->mask[i * K + k])) continue;
                if (!made && ref_expert_make(ex, H, inter, &e) != 0) goto oom;
                made = 1;
                expert_input(w, r->x + i * H, o->smooth ? w->smooth + (o->shared_experts + ex) * H : NULL,
                             in);
                ref_ffn_add(&e, in, r->weights[i * K + k], h, t[s].sum);
            }
        }
        if (made) ref_expert_free(&e);
    }
    /* Shared experts: shared expert s of a token from rank g runs on shared rank
     * (g % ranks_per_shared) + s * ranks_per_shared, whose weights are seeded by that rank. */
    for (int64_t se = 0; se < o->shared_experts; se++) {
        int64_t per = o->shared_ranks / o->shared_experts, rank = g % per + se * per;
        if (ref_expert_make(1000000 + rank, H, inter, &e) != 0) goto oom;
        for (int64_t s = 0; s < n; s++) {
            if (!t[s].active) continue;
            expert_input(w, r->x + t[s].token * H, o->smooth ? w->smooth + se * H : NULL, in);
            ref_ffn_add(&e, in, 1.0, h, t[s].sum);
        }
        ref_expert_free(&e);
    }
    /* Steps 4-6 from the float64 sum, with the spec's roundings (x to BF16, y = BF16(BF16(x rstd) gamma)
     * in F32); then the outputs may differ from these only through the upstream roundings (BF16 expert
     * outputs and SwiGLU products, 2^-9 relative each, F32 sums), which move x by a few 2^-9 of its terms
     * (the 2^-8 rms part) and can flip the final BF16 roundings, one step (up to 2^-7 relative) of the
     * inner one and of y: |d| <= 2^-6 |ref| + 2^-8 rms(ref of the token) for y and x; rstd within 2^-8
     * relative. A lost, doubled or misrouted term, or a 10 % error in one, fails it. */
    const double tol_rel = 1.0 / 64, tol_rms = 1.0 / 256;
    for (int64_t s = 0; s < n; s++) {
        int64_t i = t[s].token;
        double ss = 0.0, *xv = t[s].sum;
        if (!t[s].active) {
            int zero = rstd[i] == 0.0f;
            for (int64_t j = 0; j < H; j++)
                zero = zero && (y[i * H + j] & 0x7FFF) == 0 && (x_out[i * H + j] & 0x7FFF) == 0;
            stats->values += 1, stats->within += zero;
            stats->inactive += 1;
            continue;
        }
        for (int64_t j = 0; j < H; j++) {
            xv[j] += mm_bf16_to_f32(r->residual[i * H + j]);
            ss += xv[j] * xv[j];
        }
        double rs = 1.0 / sqrt(ss / (double)H + o->eps), rms_x = sqrt(ss / (double)H), rms_y = 0.0;
        float rs_f = (float)rs;
        double *y_ref = in; /* the expert input row is free again: y_ref of this token */
        for (int64_t j = 0; j < H; j++) {
            y_ref[j] = mm_bf16_to_f32(mm_f32_to_bf16(mm_bf16_to_f32(mm_f32_to_bf16((float)xv[j] * rs_f)) *
                                                     mm_bf16_to_f32(w->gamma[j])));
            rms_y += y_ref[j] * y_ref[j];
        }
        rms_y = sqrt(rms_y / (double)H);
        stats->values += 1, stats->within += fabs(rstd[i] - rs) <= rs / 256;
        for (int64_t j = 0; j < H; j++) {
            double yv = y_ref[j];
            double xr = mm_bf16_to_f32(mm_f32_to_bf16((float)xv[j]));
            double dy = fabs(mm_bf16_to_f32(y[i * H + j]) - yv),
                   dx = fabs(mm_bf16_to_f32(x_out[i * H + j]) - xr);
            int ok = dy <= tol_rel * fabs(yv) + tol_rms * rms_y && dx <= tol_rel * fabs(xr) + tol_rms * rms_x;
            stats->values += 1, stats->within += ok;
            if (rms_y > 0 && dy / rms_y > stats->max_err_over_rms) stats->max_err_over_rms = dy / rms_y;
        }
        stats->tokens += 1;
    }
    goto done;
oom:
    st = cli_fail(err, MM_ERR_OUT_OF_MEMORY, "dispatch-combine check: out of memory");
done:
    ref_expert_free(&e);
    free(t), free(sums), free(in), free(h);
    return st;
}
