/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_dispatch_combine_scenarios.h: Dispatch V3 + Combine V2 scenarios shared by the threads
 * tests (tests/test_dispatch_combine*.c) and the MPI tests (tests/mpi/test_dispatch_combine*.c).
 *
 * A scenario is a whole world (every rank's inputs), generated from a seed on every rank alike. Each
 * rank runs Dispatch, checks its outputs against an expectation built here from the world alone (rows
 * in the page's order, INT8 rows quantized by this file's own mul-even rule), runs a toy expert FFN
 * on the received rows (an affine map per expert and TP rank), runs Combine and checks y, rstd and x
 * against a float64 reference of the page's formula with its BF16 rounding points. Nothing here calls
 * the library's internals. Scenario code reports failures through the rank's mm_error (SCEN_*), not
 * the CHECK counters, which are not thread-safe. */
#ifndef MEGAMOE_TESTS_DC_SCENARIOS_H
#define MEGAMOE_TESTS_DC_SCENARIOS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "megamoe/comm.h"
#include "megamoe/dispatch_combine.h"
#include "testlib.h"

#define DC_MAXR 16

/* ---- independent scalar helpers (not the library's) ---- */

static inline float dct_bf16(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t dct_to_bf16(float f) { /* RNE, finite inputs only in these tests */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline double dct_bf16_ulp(double v) {
    int e;
    frexp(v, &e);
    return ldexp(1.0, e - 8);
}

static inline uint64_t dct_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double dct_uniform(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(dct_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- the world ---- */

typedef struct dct_cfg {
    int R, tp, S, shared_ranks, M, Z, C, N;
    int bs, h, k;
    int quant, smooth, mask_kind, vary_bs, ent_type, shared_x, alpha_2d, alpha_bf16;
    float eps;
    uint64_t seed;
    /* elastic: removed[r] = 1 for ranks removed before the call */
    int elastic;
    unsigned char removed[DC_MAXR];
    /* data_id[g]: which generated rank data rank g holds (a fresh smaller world maps to old ranks) */
    int data_id[DC_MAXR * 2];
} dct_cfg;

/* R ranks, M routed experts, 5 tokens of H = 64, K = min(3, M), eps 1e-6, expert token counts type 1. */
static inline dct_cfg dct_base_cfg(int R, int M, uint64_t seed) {
    dct_cfg c;
    memset(&c, 0, sizeof c);
    c.R = R, c.M = M, c.bs = 5, c.h = 64, c.k = 3 < M ? 3 : M, c.eps = 1e-6f, c.ent_type = 1, c.seed = seed;
    return c;
}

typedef struct dct_rank_data {
    int bs;
    uint16_t *x, *residual, *ori, *shared_x;
    int32_t *ids;
    uint8_t *mask;
    float *weights;
} dct_rank_data;

typedef struct dct_result { /* a rank's outputs, kept for comparisons between runs */
    int64_t rows;
    uint8_t *expand_x;
    float *dyn_scales;
    int32_t *assist;
    int64_t *token_nums;
    int32_t *ep_counts; /* by (block, local expert, source), R_eff sources */
    int32_t tp_counts[2];
    uint16_t *y, *x;
    float *rstd;
} dct_result;

typedef struct dct_world {
    dct_cfg cfg;
    int tpw, ranks, L, R_eff, sh_eff, M_eff;
    int32_t new_of_old[DC_MAXR], old_of_new[DC_MAXR];
    int32_t *elastic_info; /* 4 + 2R, or NULL */
    dct_rank_data rd[DC_MAXR * 2];
    float *smooth; /* (S + M, H) */
    uint16_t *gamma;
    void *alpha1, *alpha2;
    uint16_t *const_v;
    dct_result res[DC_MAXR * 2];
    int threads_per_call; /* informational */
} dct_world;

static inline int dct_routed_rank(const dct_world *w, int e) {
    return w->old_of_new[e / w->L + w->sh_eff];
}
static inline int dct_shared_rank(const dct_world *w, int src_new, int s) {
    int per = w->sh_eff / w->cfg.S;
    return w->old_of_new[src_new % per + s * per];
}
static inline int dct_pair_on(const dct_world *w, const dct_rank_data *d, int i, int k) {
    if (w->cfg.mask_kind == 1) return d->mask[i];
    if (w->cfg.mask_kind == 2) return d->mask[i * w->cfg.k + k];
    return 1;
}
static inline int dct_token_on(const dct_world *w, const dct_rank_data *d, int i) {
    for (int k = 0; k < w->cfg.k; k++)
        if (dct_pair_on(w, d, i, k)) return 1;
    return 0;
}

static inline void dct_world_free(dct_world *w) {
    for (int g = 0; g < DC_MAXR * 2; g++) {
        dct_rank_data *d = &w->rd[g];
        free(d->x), free(d->residual), free(d->ori), free(d->shared_x), free(d->ids), free(d->mask),
            free(d->weights);
        dct_result *r = &w->res[g];
        free(r->expand_x), free(r->dyn_scales), free(r->assist), free(r->token_nums), free(r->ep_counts);
        free(r->y), free(r->x), free(r->rstd);
    }
    free(w->elastic_info), free(w->smooth), free(w->gamma), free(w->alpha1), free(w->alpha2),
        free(w->const_v);
    memset(w, 0, sizeof *w);
}

/* Expert id k of a row whose first k ids are row[0..k-1]: one of the `special` ids past m_eff (zero,
 * copy and constant experts) one time in three, otherwise a routed expert not already in the row. */
static inline int dct_draw_id(uint64_t *s, const int32_t *row, int k, int m_eff, int special) {
    for (;;) {
        if (special && dct_rand(s) % 3 == 0) return m_eff + (int)(dct_rand(s) % (uint64_t)special);
        int e = (int)(dct_rand(s) % (uint64_t)m_eff);
        int dup = 0;
        for (int k2 = 0; k2 < k; k2++) dup |= row[k2] == e;
        if (!dup) return e;
    }
}

/* Generates rank data for data id `id` (the same whatever world it lands in). */
static inline void dct_gen_rank(dct_world *w, int g, int id) {
    const dct_cfg *c = &w->cfg;
    uint64_t s = c->seed * 1000003u + (uint64_t)id * 7919u + 17;
    dct_rank_data *d = &w->rd[g];
    d->bs = c->vary_bs ? c->bs - (id % 3) : c->bs;
    if (d->bs < 0) d->bs = 0;
    size_t bh = (size_t)d->bs * (size_t)c->h, bk = (size_t)d->bs * (size_t)c->k;
    d->x = calloc(bh + 1, 2), d->residual = calloc(bh + 1, 2), d->ori = calloc(bh + 1, 2);
    d->shared_x = calloc(bh + 1, 2), d->ids = calloc(bk + 1, 4), d->mask = calloc(bk + 1, 1);
    d->weights = calloc(bk + 1, 4);
    for (size_t j = 0; j < bh; j++) {
        d->x[j] = dct_to_bf16((float)dct_uniform(&s, -2.0, 2.0));
        d->residual[j] = dct_to_bf16((float)dct_uniform(&s, -1.0, 1.0));
        d->ori[j] = dct_to_bf16((float)dct_uniform(&s, -1.0, 1.0));
        d->shared_x[j] = dct_to_bf16((float)dct_uniform(&s, -0.5, 0.5));
    }
    int special = c->Z + c->C + c->N;
    for (int i = 0; i < d->bs; i++) {
        for (int k = 0; k < c->k; k++) {
            d->ids[i * c->k + k] = dct_draw_id(&s, d->ids + i * c->k, k, w->M_eff, special);
            d->weights[i * c->k + k] = (float)dct_uniform(&s, 0.05, 1.0);
        }
    }
    if (c->mask_kind == 1) {
        int active = d->bs - (int)(dct_rand(&s) % (uint64_t)(d->bs / 2 + 1));
        for (int i = 0; i < d->bs; i++) d->mask[i] = i < active;
    } else if (c->mask_kind == 2) {
        for (size_t j = 0; j < bk; j++) d->mask[j] = dct_rand(&s) % 4 != 0;
        if (d->bs > 1)
            for (int k = 0; k < c->k; k++)
                d->mask[(size_t)(d->bs - 1) * c->k + k] = 0; /* a fully masked token */
    }
}

/* Builds the world for cfg. Elastic: survivors keep their order (new rank = rank among survivors); the
 * survivors among the first shared_ranks stay shared ranks. */
static inline int dct_world_make(dct_world *w, const dct_cfg *cfg) {
    memset(w, 0, sizeof *w);
    w->cfg = *cfg;
    const dct_cfg *c = &w->cfg;
    w->tpw = c->tp > 1 ? c->tp : 1;
    w->ranks = c->R * w->tpw;
    w->L = c->M / (c->R - c->shared_ranks);
    w->R_eff = c->R, w->sh_eff = c->shared_ranks;
    for (int r = 0; r < c->R; r++) w->new_of_old[r] = w->old_of_new[r] = r;
    if (c->elastic) {
        int n = 0, sh = 0;
        for (int r = 0; r < c->R; r++) w->old_of_new[r] = -1;
        for (int r = 0; r < c->R; r++) {
            w->new_of_old[r] = c->removed[r] ? -1 : n;
            if (!c->removed[r]) {
                w->old_of_new[n++] = r;
                sh += r < c->shared_ranks;
            }
        }
        w->R_eff = n, w->sh_eff = sh;
        w->elastic_info = calloc((size_t)(4 + 2 * c->R), 4);
        w->elastic_info[0] = 1, w->elastic_info[1] = n, w->elastic_info[2] = sh;
        w->elastic_info[3] = w->L * (n - sh);
        for (int r = 0; r < c->R; r++) w->elastic_info[4 + r] = w->new_of_old[r];
        for (int r = 0; r < c->R; r++) w->elastic_info[4 + c->R + r] = w->old_of_new[r];
    }
    w->M_eff = w->L * (w->R_eff - w->sh_eff);
    uint64_t s = c->seed * 31 + 5; /* each array has its own stream: worlds of other sizes share them */
    size_t h = (size_t)c->h;
    w->smooth = calloc((size_t)(c->S + c->M) * h, 4);
    for (size_t j = 0; j < (size_t)(c->S + c->M) * h; j++) w->smooth[j] = (float)dct_uniform(&s, 0.5, 1.5);
    s = c->seed * 37 + 11;
    w->gamma = calloc(h, 2);
    for (size_t j = 0; j < h; j++) w->gamma[j] = dct_to_bf16((float)dct_uniform(&s, 0.5, 1.5));
    s = c->seed * 41 + 13;
    size_t an = (size_t)(c->N ? c->N : 1) * (c->alpha_2d ? h : 1);
    w->alpha1 = calloc(an, 4), w->alpha2 = calloc(an, 4);
    for (size_t j = 0; j < an; j++) {
        float a1 = (float)dct_uniform(&s, -0.05, 0.05) * (c->alpha_2d ? 1.0f : 20.0f);
        float a2 = (float)dct_uniform(&s, -0.05, 0.05) * (c->alpha_2d ? 1.0f : 20.0f);
        if (c->alpha_bf16) {
            ((uint16_t *)w->alpha1)[j] = dct_to_bf16(a1), ((uint16_t *)w->alpha2)[j] = dct_to_bf16(a2);
        } else {
            ((float *)w->alpha1)[j] = a1, ((float *)w->alpha2)[j] = a2;
        }
    }
    s = c->seed * 43 + 17;
    w->const_v = calloc((size_t)(c->N ? c->N : 1) * h, 2);
    for (size_t j = 0; j < (size_t)(c->N ? c->N : 1) * h; j++)
        w->const_v[j] = dct_to_bf16((float)dct_uniform(&s, -1.0, 1.0));
    for (int g = 0; g < w->ranks; g++) dct_gen_rank(w, g, c->data_id[g] ? c->data_id[g] - 1 : g);
    return 0;
}

static inline float dct_alpha(const dct_world *w, const void *a, size_t i) {
    return w->cfg.alpha_bf16 ? dct_bf16(((const uint16_t *)a)[i]) : ((const float *)a)[i];
}

/* The expected dispatched row of (source global g, token i, k): quant 0 copies x; quant 2 smooths with
 * the destination expert's row and quantizes with mul-even (m = 127 / amax, q = rint(v * m), 1 / m). */
static inline void dct_expected_row(const dct_world *w, int g, int i, int k, int8_t *q, float *scale,
                                    float *tmp) {
    const dct_cfg *c = &w->cfg;
    const dct_rank_data *d = &w->rd[g];
    int smooth_row = k < c->k ? d->ids[i * c->k + k] + c->S : k - c->k;
    float amax = 0.0f;
    for (int h = 0; h < c->h; h++) {
        float v = dct_bf16(d->x[(size_t)i * c->h + h]);
        if (c->smooth) v = v * w->smooth[(size_t)smooth_row * c->h + h];
        tmp[h] = v;
        if (fabsf(v) > amax) amax = fabsf(v);
    }
    if (amax == 0.0f) {
        for (int h = 0; h < c->h; h++) q[h] = 0;
        *scale = 0.0f;
        return;
    }
    float m = 127.0f / amax;
    for (int h = 0; h < c->h; h++) {
        float r = nearbyintf(tmp[h] * m);
        q[h] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : r);
    }
    *scale = 1.0f / m;
}

/* Expected rows of rank g (ep d, tp t) in the page's order: TP block, local expert, source, (token, k). */
typedef struct dct_row {
    int src_g, src_new, token, k;
} dct_row;

static inline int dct_expected_rows(const dct_world *w, int g, dct_row *rows, int64_t *ep_counts) {
    const dct_cfg *c = &w->cfg;
    int d = g / w->tpw, dn = w->new_of_old[d], shared = dn < w->sh_eff;
    int myL = shared ? 1 : w->L, n = 0;
    for (int tt = 0; tt < w->tpw; tt++)
        for (int le = 0; le < myL; le++)
            for (int src = 0; src < c->R; src++) {
                if (src < w->R_eff) {
                    int sg = w->old_of_new[src] * w->tpw + tt;
                    const dct_rank_data *sd = &w->rd[sg];
                    for (int i = 0; i < sd->bs; i++) {
                        if (!dct_token_on(w, sd, i)) continue;
                        if (shared) {
                            for (int s = 0; s < c->S; s++)
                                if (dct_shared_rank(w, src, s) == d)
                                    rows[n++] = (dct_row){sg, src, i, c->k + s};
                            continue;
                        }
                        for (int k = 0; k < c->k; k++) {
                            int e = sd->ids[i * c->k + k];
                            if (e >= w->M_eff || !dct_pair_on(w, sd, i, k)) continue;
                            if (dct_routed_rank(w, e) == d && e % w->L == le)
                                rows[n++] = (dct_row){sg, src, i, k};
                        }
                    }
                }
                if (ep_counts) ep_counts[(tt * myL + le) * c->R + src] = n;
            }
    return n;
}

/* Toy expert FFN of expert E (routed id, or -1 - s for shared expert s) on TP rank tt. */
static inline float dct_ffn(int E, int tt, float v) {
    float a = 0.5f + (float)(((E + 11) * 3 + tt * 5) % 7) / 8.0f;
    float b = (float)(((E + 13) + tt * 3) % 5 - 2) / 16.0f;
    return v * a + b;
}

static inline int dct_row_expert(const dct_world *w, int src_g, int token, int k) {
    return k < w->cfg.k ? w->rd[src_g].ids[token * w->cfg.k + k] : -1 - (k - w->cfg.k);
}

/* The expert output row (BF16 bits into out) that the home rank receives for (src_g, token, k), TP
 * partials summed in F32 and rounded to BF16 as the page says. */
static inline void dct_expected_expert_out(const dct_world *w, int src_g, int token, int k, uint16_t *out,
                                           int8_t *q, float *tmp) {
    const dct_cfg *c = &w->cfg;
    float scale = 1.0f;
    if (c->quant) dct_expected_row(w, src_g, token, k, q, &scale, tmp);
    int E = dct_row_expert(w, src_g, token, k);
    for (int h = 0; h < c->h; h++) {
        float v = c->quant ? (float)q[h] * scale : dct_bf16(w->rd[src_g].x[(size_t)token * c->h + h]);
        float p0 = dct_bf16(dct_to_bf16(dct_ffn(E, 0, v)));
        if (w->tpw > 1) p0 = dct_bf16(dct_to_bf16(p0 + dct_bf16(dct_to_bf16(dct_ffn(E, 1, v)))));
        out[h] = dct_to_bf16(p0);
    }
}

/* ---- the per-rank run ---- */

typedef struct dct_tensors {
    mm_tensor x, ids, scales, mask, elastic, expand_x, dyn, assist, etn, epc, tpc;
    mm_tensor cx, cres, cgamma, cweights, cshared, cori, ca1, ca2, cv, y, rstd, xo;
} dct_tensors;

static inline mm_dc_attrs dct_attrs(const dct_world *w, int g) {
    const dct_cfg *c = &w->cfg;
    mm_dc_attrs a = mm_dc_default_attrs();
    a.ep_world_size = c->R;
    a.ep_rank_id = g / w->tpw;
    a.tp_world_size = c->tp;
    a.tp_rank_id = g % w->tpw;
    a.moe_expert_num = c->M;
    a.shared_expert_num = c->S;
    a.shared_expert_rank_num = c->shared_ranks;
    a.quant_mode = c->quant ? 2 : 0;
    a.expert_token_nums_type = c->ent_type;
    a.zero_expert_num = c->Z, a.copy_expert_num = c->C, a.const_expert_num = c->N;
    a.norm_eps = c->eps;
    if (c->vary_bs) {
        int mx = 0;
        for (int r = 0; r < w->ranks; r++)
            if (w->rd[r].bs > mx && (!c->elastic || !c->removed[r / w->tpw])) mx = w->rd[r].bs;
        a.global_bs = (int64_t)mx * c->R;
    }
    return a;
}

/* The verdict of one rank's checks made the verdict of every rank (mm_comm_agree_as_written: the
 * messages already name their rank). A rank whose check failed stops calling the operators; without
 * this, the other ranks would go on into the next call and wait out the communicator's timeout (20 s)
 * in every wait of it, so one failing check cost minutes (CTest's 300 s limit) instead of failing at
 * once. The failing rank keeps its own message, the others say which rank stopped them. */
static inline mm_status dct_agree_checks(mm_comm *comm, mm_status local, mm_error *err) {
    mm_error e = {MM_OK, ""};
    if (local) e = *err;
    mm_status st = mm_comm_agree_as_written(comm, local, &e);
    if (st && !local) {
        snprintf(err->message, sizeof err->message, "rank %d: stopped by another rank's failed check: %.400s",
                 mm_comm_rank(comm), e.message);
        err->status = st;
    }
    return st;
}

/* Runs dispatch, checks it, runs the toy FFN, runs combine, checks it, keeps the outputs in w->res[g]. */
static inline mm_status dct_run_rank(mm_comm *comm, dct_world *w, mm_dc_workspace *ws, mm_error *err) {
    const dct_cfg *c = &w->cfg;
    int g = mm_comm_rank(comm), d = g / w->tpw, tt = g % w->tpw;
    dct_rank_data *rd = &w->rd[g];
    mm_dc_attrs a = dct_attrs(w, g);
    mm_error e = {MM_OK, ""};
    dct_tensors T;
    memset(&T, 0, sizeof T);
    int64_t bs = rd->bs, H = c->h, K = c->k;
    T.x = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){bs, H}, rd->x);
    T.ids = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){bs, K}, rd->ids);
    T.scales = mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){c->S + c->M, H}, w->smooth);
    T.mask = c->mask_kind == 1 ? mm_tensor_make(MM_DTYPE_BOOL, 1, (int64_t[]){bs}, rd->mask)
                               : mm_tensor_make(MM_DTYPE_BOOL, 2, (int64_t[]){bs, K}, rd->mask);
    T.elastic = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){4 + 2 * c->R}, w->elastic_info);
    mm_dispatch_v3_inputs din = {&T.x, &T.ids, c->smooth ? &T.scales : NULL, c->mask_kind ? &T.mask : NULL,
                                 w->elastic_info ? &T.elastic : NULL};
    mm_dispatch_v3_shapes sh;
    mm_status st = mm_dispatch_v3_plan(&din, &a, &sh, &e);
    if (st) { /* a broken input: still call, the collective verdict is what is tested */
        sh.max_rows = (int64_t)(bs + 1) * c->R * c->k * w->tpw;
        sh.local_expert_num = w->L;
    }
    int64_t A = sh.max_rows, L = sh.local_expert_num;
    size_t rb = (size_t)H * (c->quant ? 1 : 2);
    uint8_t *ex = malloc((size_t)A * rb + 1);
    float *dyn = malloc((size_t)A * 4 + 4);
    int32_t *assist = malloc((size_t)A * 12 + 12);
    int64_t *etn = malloc((size_t)L * 8);
    int64_t n_ep = (int64_t)c->R * w->tpw * L;
    int32_t *epc = malloc((size_t)n_ep * 4);
    int32_t tpc[2] = {-1, -1};
    dct_row *rows = malloc(sizeof(dct_row) * (size_t)(A + 1));
    int64_t *eprow = malloc((size_t)n_ep * 8);
    uint16_t *ffn = malloc((size_t)(A + 1) * (size_t)H * 2);
    float *tmp = malloc((size_t)H * 4);
    int8_t *q = malloc((size_t)H);
    uint16_t *y = malloc((size_t)(bs + 1) * (size_t)H * 2), *xo = malloc((size_t)(bs + 1) * (size_t)H * 2);
    float *rstd = malloc((size_t)(bs + 1) * 4);
    uint16_t *eo = malloc((size_t)H * 2);
    double *acc = malloc((size_t)H * 8);
    T.expand_x = mm_tensor_make(c->quant ? MM_DTYPE_I8 : MM_DTYPE_BF16, 2, (int64_t[]){A, H}, ex);
    T.dyn = mm_tensor_make(MM_DTYPE_F32, 1, (int64_t[]){A}, dyn);
    T.assist = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){A, 3}, assist);
    T.etn = mm_tensor_make(MM_DTYPE_I64, 1, (int64_t[]){L}, etn);
    T.epc = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){n_ep}, epc);
    T.tpc = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){c->tp}, tpc);
    mm_dispatch_v3_outputs dout = {&T.expand_x, &T.dyn, &T.assist, &T.etn, &T.epc, c->tp ? &T.tpc : NULL};
    int64_t got = -1;
    st = mm_dispatch_v3(ws, &din, &a, &dout, &got, &e);
    if (st != MM_OK) {
        snprintf(err->message, sizeof err->message, "rank %d: dispatch failed: %.400s", g, e.message);
        err->status = MM_ERR_INTERNAL;
        goto done;
    }
    /* ---- dispatch expectations ---- */
    int n = dct_expected_rows(w, g, rows, eprow);
    if (got != n) {
        snprintf(err->message, sizeof err->message, "rank %d: %lld rows arrived, expected %d", g,
                 (long long)got, n);
        st = err->status = MM_ERR_INTERNAL;
        goto dispatch_checked;
    }
    for (int j = 0; j < n && !st; j++) {
        const dct_row *r = &rows[j];
        if (assist[j * 3] != r->src_new || assist[j * 3 + 1] != r->token || assist[j * 3 + 2] != r->k) {
            snprintf(err->message, sizeof err->message,
                     "rank %d row %d: assist (%d, %d, %d), expected (%d, %d, %d)", g, j, assist[j * 3],
                     assist[j * 3 + 1], assist[j * 3 + 2], r->src_new, r->token, r->k);
            st = err->status = MM_ERR_INTERNAL;
            break;
        }
        if (c->quant) {
            float s;
            dct_expected_row(w, r->src_g, r->token, r->k, q, &s, tmp);
            uint32_t b1, b2;
            memcpy(&b1, &s, 4), memcpy(&b2, &dyn[j], 4);
            if (memcmp(q, ex + (size_t)j * rb, (size_t)H) != 0 || b1 != b2) {
                snprintf(err->message, sizeof err->message,
                         "rank %d row %d: INT8 row or scale (%.9g vs %.9g) differs", g, j, dyn[j], s);
                st = err->status = MM_ERR_INTERNAL;
            }
        } else if (memcmp(ex + (size_t)j * rb, w->rd[r->src_g].x + (size_t)r->token * H, rb) != 0) {
            snprintf(err->message, sizeof err->message, "rank %d row %d: expand_x row differs", g, j);
            st = err->status = MM_ERR_INTERNAL;
        }
    }
    if (st) goto dispatch_checked;
    for (int64_t i = 0; i < n_ep; i++)
        if (epc[i] != eprow[i]) {
            snprintf(err->message, sizeof err->message, "rank %d: ep_recv_counts[%lld] = %d, expected %lld",
                     g, (long long)i, epc[i], (long long)eprow[i]);
            st = err->status = MM_ERR_INTERNAL;
            goto dispatch_checked;
        }
    for (int64_t le = 0; le < L; le++) {
        int64_t cnt = 0;
        for (int b = 0; b < w->tpw; b++) {
            int64_t base = (b * L + le) * c->R;
            int64_t before = base ? eprow[base - 1] : 0;
            cnt += eprow[base + c->R - 1] - before;
        }
        int64_t want = cnt;
        if (c->ent_type == 0) {
            want = 0;
            for (int64_t l2 = 0; l2 <= le; l2++)
                for (int b = 0; b < w->tpw; b++) {
                    int64_t base = (b * L + l2) * c->R;
                    want += eprow[base + c->R - 1] - (base ? eprow[base - 1] : 0);
                }
        }
        if (etn[le] != want) {
            snprintf(err->message, sizeof err->message,
                     "rank %d: expert_token_nums[%lld] = %lld, expected %lld", g, (long long)le,
                     (long long)etn[le], (long long)want);
            st = err->status = MM_ERR_INTERNAL;
            goto dispatch_checked;
        }
    }
    if (c->tp == 2) {
        int64_t b0 = eprow[L * c->R - 1];
        if (tpc[0] != b0 || tpc[1] != n - b0) {
            snprintf(err->message, sizeof err->message,
                     "rank %d: tp_recv_counts (%d, %d), expected (%lld, %lld)", g, tpc[0], tpc[1],
                     (long long)b0, (long long)(n - b0));
            st = err->status = MM_ERR_INTERNAL;
            goto dispatch_checked;
        }
    }
dispatch_checked:
    /* Every rank's dispatch checks are done: all go on to the combine, or none does. */
    if ((st = dct_agree_checks(comm, st, err))) goto done;
    /* ---- toy FFN on what arrived (this TP rank's partial) ---- */
    for (int j = 0; j < n; j++) {
        int E = dct_row_expert(w, rows[j].src_g, rows[j].token, rows[j].k);
        for (int64_t h = 0; h < H; h++) {
            float v = c->quant ? (float)((int8_t *)ex)[(size_t)j * H + h] * dyn[j]
                               : dct_bf16(((uint16_t *)ex)[(size_t)j * H + h]);
            ffn[(size_t)j * H + h] = dct_to_bf16(dct_ffn(E, tt, v));
        }
    }
    /* ---- combine ---- */
    T.cx = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){n, H}, ffn);
    mm_tensor assist_n = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){n, 3}, assist);
    T.cres = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){bs, 1, H}, rd->residual);
    T.cgamma = mm_tensor_make(MM_DTYPE_BF16, 1, (int64_t[]){H}, w->gamma);
    T.cweights = mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){bs, K}, rd->weights);
    T.cshared = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){bs, H}, rd->shared_x);
    T.cori = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){bs, H}, rd->ori);
    mm_dtype adt = c->alpha_bf16 ? MM_DTYPE_BF16 : MM_DTYPE_F32;
    T.ca1 = c->alpha_2d ? mm_tensor_make(adt, 2, (int64_t[]){c->N, H}, w->alpha1)
                        : mm_tensor_make(adt, 1, (int64_t[]){c->N}, w->alpha1);
    T.ca2 = c->alpha_2d ? mm_tensor_make(adt, 2, (int64_t[]){c->N, H}, w->alpha2)
                        : mm_tensor_make(adt, 1, (int64_t[]){c->N}, w->alpha2);
    T.cv = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){c->N, H}, w->const_v);
    T.y = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){bs, 1, H}, y);
    T.rstd = mm_tensor_make(MM_DTYPE_F32, 3, (int64_t[]){bs, 1, 1}, rstd);
    T.xo = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){bs, 1, H}, xo);
    mm_combine_v2_inputs cin;
    memset(&cin, 0, sizeof cin);
    cin.expand_x = &T.cx;
    cin.expert_ids = &T.ids;
    cin.assist_info_for_combine = &assist_n;
    cin.ep_send_counts = &T.epc;
    cin.expert_scales = &T.cweights;
    cin.residual_x = &T.cres;
    cin.gamma = &T.cgamma;
    cin.tp_send_counts = c->tp ? &T.tpc : NULL;
    cin.x_active_mask = din.x_active_mask;
    cin.shared_expert_x = c->shared_x ? &T.cshared : NULL;
    cin.elastic_info = din.elastic_info;
    cin.ori_x = (c->C + c->N) ? &T.cori : NULL;
    cin.const_expert_alpha_1 = c->N ? &T.ca1 : NULL;
    cin.const_expert_alpha_2 = c->N ? &T.ca2 : NULL;
    cin.const_expert_v = c->N ? &T.cv : NULL;
    mm_combine_v2_outputs cout = {&T.y, &T.rstd, &T.xo};
    st = mm_combine_v2(ws, &cin, &a, &cout, &e);
    if (st != MM_OK) {
        snprintf(err->message, sizeof err->message, "rank %d: combine failed: %.400s", g, e.message);
        err->status = MM_ERR_INTERNAL;
        goto done;
    }
    /* ---- float64 reference of combine ---- */
    for (int i = 0; i < bs && !st; i++) {
        size_t row = (size_t)i * H;
        if (!dct_token_on(w, rd, i)) {
            for (int64_t h = 0; h < H; h++)
                if (y[row + h] || xo[row + h]) {
                    snprintf(err->message, sizeof err->message,
                             "rank %d: inactive token %d has non-zero output", g, i);
                    st = err->status = MM_ERR_INTERNAL;
                    break;
                }
            if (!st && rstd[i] != 0.0f) {
                snprintf(err->message, sizeof err->message, "rank %d: inactive token %d rstd %g", g, i,
                         rstd[i]);
                st = err->status = MM_ERR_INTERNAL;
            }
            continue;
        }
        for (int64_t h = 0; h < H; h++) acc[h] = 0.0;
        for (int k = 0; k < K; k++) {
            if (!dct_pair_on(w, rd, i, k)) continue;
            int ex_id = rd->ids[i * K + k];
            double wt = rd->weights[i * K + k];
            if (ex_id < w->M_eff) {
                dct_expected_expert_out(w, g, i, k, eo, q, tmp);
                for (int64_t h = 0; h < H; h++) acc[h] += wt * dct_bf16(eo[h]);
            } else if (ex_id < w->M_eff + c->Z) {
            } else if (ex_id < w->M_eff + c->Z + c->C) {
                for (int64_t h = 0; h < H; h++) acc[h] += wt * dct_bf16(rd->ori[row + h]);
            } else {
                int cc = ex_id - w->M_eff - c->Z - c->C;
                double a1, a2;
                if (!c->alpha_2d) {
                    a1 = dct_alpha(w, w->alpha1, (size_t)cc), a2 = dct_alpha(w, w->alpha2, (size_t)cc);
                } else {
                    double d1 = 0, d2 = 0;
                    for (int64_t h = 0; h < H; h++) {
                        d1 += dct_alpha(w, w->alpha1, (size_t)cc * H + h) * dct_bf16(rd->ori[row + h]);
                        d2 += dct_alpha(w, w->alpha2, (size_t)cc * H + h) * dct_bf16(rd->ori[row + h]);
                    }
                    a1 = 1.0 / (1.0 + exp(d2 - d1)), a2 = 1.0 / (1.0 + exp(d1 - d2));
                }
                for (int64_t h = 0; h < H; h++)
                    acc[h] += wt * (a1 * dct_bf16(rd->ori[row + h]) +
                                    a2 * dct_bf16(w->const_v[(size_t)cc * H + h]));
            }
        }
        for (int s = 0; s < c->S; s++) {
            dct_expected_expert_out(w, g, i, c->k + s, eo, q, tmp);
            for (int64_t h = 0; h < H; h++) acc[h] += dct_bf16(eo[h]);
        }
        double ss = 0;
        for (int64_t h = 0; h < H; h++) {
            if (c->shared_x) acc[h] += dct_bf16(rd->shared_x[row + h]);
            acc[h] += dct_bf16(rd->residual[row + h]);
            ss += acc[h] * acc[h];
        }
        double r = 1.0 / sqrt(ss / (double)H + (double)c->eps);
        if (fabs(rstd[i] - r) > 1e-5 * r) {
            snprintf(err->message, sizeof err->message, "rank %d token %d: rstd %.9g, expected %.9g", g, i,
                     rstd[i], r);
            st = err->status = MM_ERR_INTERNAL;
            break;
        }
        for (int64_t h = 0; h < H; h++) {
            double xv = dct_bf16(xo[row + h]), yv = dct_bf16(y[row + h]);
            double yr = (double)dct_bf16(dct_to_bf16((float)(acc[h] * r))) * dct_bf16(w->gamma[h]);
            if (fabs(xv - acc[h]) > dct_bf16_ulp(acc[h]) + 1e-5 ||
                fabs(yv - yr) > 2 * dct_bf16_ulp(yr) + 1e-5) {
                snprintf(err->message, sizeof err->message,
                         "rank %d token %d h %lld: x %.9g (ref %.9g), y %.9g (ref %.9g)", g, i, (long long)h,
                         xv, acc[h], yv, yr);
                st = err->status = MM_ERR_INTERNAL;
                break;
            }
        }
    }
    (void)d;
    /* The combine checks, agreed as well: no rank goes into another call while one has failed. */
    if ((st = dct_agree_checks(comm, st, err))) goto done;
    /* keep the outputs for comparisons between runs */
    dct_result *res = &w->res[g];
    free(res->expand_x), free(res->dyn_scales), free(res->assist), free(res->token_nums),
        free(res->ep_counts);
    free(res->y), free(res->x), free(res->rstd);
    res->rows = n;
    res->expand_x = ex, ex = NULL;
    res->dyn_scales = dyn, dyn = NULL;
    res->assist = assist, assist = NULL;
    res->token_nums = etn, etn = NULL;
    res->ep_counts = malloc((size_t)w->tpw * (size_t)L * (size_t)w->R_eff * 4);
    for (int b = 0; b < w->tpw; b++)
        for (int64_t le = 0; le < L; le++)
            for (int s = 0; s < w->R_eff; s++) {
                int64_t ix = (b * L + le) * c->R + s;
                int64_t base = (b * L + le) * c->R;
                res->ep_counts[(b * L + le) * w->R_eff + s] = epc[ix] - (base ? epc[base - 1] : 0);
            }
    res->tp_counts[0] = tpc[0], res->tp_counts[1] = tpc[1];
    res->y = y, y = NULL;
    res->x = xo, xo = NULL;
    res->rstd = rstd, rstd = NULL;
done:
    free(ex), free(dyn), free(assist), free(etn), free(epc), free(rows), free(eprow), free(ffn), free(tmp),
        free(q);
    free(y), free(xo), free(rstd), free(eo), free(acc);
    return st;
}

/* A rank of mm_comm_run_threads (arg: the dct_world): a fresh workspace, one checked call, then free. */
static inline mm_status dct_rank_once(mm_comm *comm, void *arg, mm_error *err) {
    mm_comm_set_timeout(comm, 20.0, NULL);
    mm_dc_workspace *ws = NULL;
    mm_status st = mm_dc_workspace_create(comm, &ws, err);
    if (st) return st;
    st = dct_run_rank(comm, arg, ws, err);
    mm_status st2 = mm_dc_workspace_free(ws, st ? NULL : err);
    return st ? st : st2;
}

/* Compares rank g's kept outputs of two runs bit for bit (elastic vs fresh world; thread counts). */
static inline mm_status dct_compare(const dct_world *a, int ga, const dct_world *b, int gb, mm_error *err) {
    const dct_result *x = &a->res[ga], *y = &b->res[gb];
    const dct_cfg *c = &a->cfg;
    SCEN_EXPECT(err, x->y && y->y, "ranks %d / %d: missing results", ga, gb);
    SCEN_EXPECT(err, x->rows == y->rows, "rank %d vs %d: %lld vs %lld rows", ga, gb, (long long)x->rows,
                (long long)y->rows);
    size_t rb = (size_t)c->h * (c->quant ? 1 : 2);
    SCEN_EXPECT(err, memcmp(x->expand_x, y->expand_x, (size_t)x->rows * rb) == 0,
                "rank %d vs %d: expand_x differs", ga, gb);
    SCEN_EXPECT(err, memcmp(x->assist, y->assist, (size_t)x->rows * 12) == 0, "rank %d vs %d: assist differs",
                ga, gb);
    SCEN_EXPECT(err, !c->quant || memcmp(x->dyn_scales, y->dyn_scales, (size_t)x->rows * 4) == 0,
                "rank %d vs %d: dynamic_scales differ", ga, gb);
    int shared = a->new_of_old[ga / a->tpw] < a->sh_eff;
    int L = shared ? 1 : a->L;
    SCEN_EXPECT(err, memcmp(x->token_nums, y->token_nums, (size_t)L * 8) == 0,
                "rank %d vs %d: expert_token_nums differ", ga, gb);
    SCEN_EXPECT(err, a->R_eff == b->R_eff, "worlds of %d and %d ranks", a->R_eff, b->R_eff);
    SCEN_EXPECT(err,
                memcmp(x->ep_counts, y->ep_counts, (size_t)a->tpw * (size_t)L * (size_t)a->R_eff * 4) == 0,
                "rank %d vs %d: received counts per (expert, source) differ", ga, gb);
    size_t n = (size_t)a->rd[ga].bs * (size_t)c->h;
    SCEN_EXPECT(err, a->rd[ga].bs == b->rd[gb].bs, "Bs differs");
    SCEN_EXPECT(err, memcmp(x->y, y->y, n * 2) == 0, "rank %d vs %d: y differs", ga, gb);
    SCEN_EXPECT(err, memcmp(x->x, y->x, n * 2) == 0, "rank %d vs %d: x differs", ga, gb);
    SCEN_EXPECT(err, memcmp(x->rstd, y->rstd, (size_t)a->rd[ga].bs * 4) == 0, "rank %d vs %d: rstd differs",
                ga, gb);
    return MM_OK;
}

#endif
