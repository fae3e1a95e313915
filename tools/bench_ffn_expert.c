/* tools/bench_ffn_expert.c: the expert FFN that `megamoe bench ffn` times, on the private grouped GEMM
 * layer (src/gemm/gemm.h): GEMM1 (rows x H . H x 2I, gate/up interleaved so each tile holds both
 * halves), SwiGLU and the quantization of its output to the format's activation dtype with the MegaMoE
 * operator's row operations (one task per row on the library's pool), GEMM2 (rows x I . I x H). Weights are
 * random codes of the format (no NaN codes; MX scales near 1) packed once; the content does not change the
 * speed. Several experts rotate so that each run reads weights that are not in cache, as in a MoE layer with
 * many experts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo_data.h"
#include "bench_ffn.h"
#include "core/parallel.h"
#include "gemm/gemm.h"
#include "gemm/kernel_registry.h"
#include "gemm/packed.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/mega_moe_internal.h"
#include "timing.h"

typedef struct format_info {
    const char *name;
    mm_dtype a, w;
    int is_int;
} format_info;

static const format_info formats[FFN_FORMAT_COUNT] = {
    {"bf16", MM_DTYPE_BF16, MM_DTYPE_BF16, 0},
    {"int8", MM_DTYPE_I8, MM_DTYPE_I8, 1},
    {"int8xint4", MM_DTYPE_I8, MM_DTYPE_INT4, 1},
    {"mxfp8", MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, 0},
    {"mxfp8xmxfp4", MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, 0},
    {"mxfp4", MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, 0},
};

const char *bench_ffn_format_name(bench_ffn_format f) {
    return formats[f].name;
}
int bench_ffn_format_is_int(bench_ffn_format f) {
    return formats[f].is_int;
}

struct bench_ffn_expert {
    bench_ffn_format format;
    int64_t hidden, inter, experts, max_rows;
    mm_gemm_packed_weights **w1, **w2;
    uint8_t *x;         /* max_rows input rows in the activation dtype */
    int64_t x_stride;   /* bytes */
    float *x_scales;    /* I8: per row */
    uint8_t *x_mx;      /* MX: ceil(H/32) per row */
    float *h;           /* GEMM1 output, max_rows x n_out1 */
    int64_t ld_h;       /* n_out1 */
    uint8_t *act;       /* SwiGLU output quantized, max_rows rows */
    int64_t act_stride; /* bytes */
    float *act_scales;  /* I8 */
    uint8_t *act_mx;    /* MX: ceil(I/32) per row */
    float *out;         /* GEMM2 output, max_rows x H */
};

/* Uniform in [-1, 1). */
static float random_unit(uint64_t *s) {
    return (float)(cli_rand_u64(s) >> 40) / (float)(1u << 23) - 1.0f;
}

/* Random codes of `dtype` for n elements (bytes for FP8/I8, nibbles for FP4/INT4), never a NaN code. */
static void fill_codes(mm_dtype dtype, uint8_t *p, int64_t bytes, uint64_t *s, float bf16_scale) {
    if (dtype == MM_DTYPE_BF16) {
        uint16_t *v = (uint16_t *)(void *)p;
        for (int64_t i = 0; i < bytes / 2; i++) v[i] = mm_f32_to_bf16(bf16_scale * random_unit(s));
        return;
    }
    for (int64_t i = 0; i < bytes; i += 8) {
        uint64_t r = cli_rand_u64(s);
        int64_t n = bytes - i < 8 ? bytes - i : 8;
        memcpy(p + i, &r, (size_t)n);
    }
    for (int64_t i = 0; i < bytes; i++) {
        if (dtype == MM_DTYPE_FP8_E4M3FN && (p[i] & 0x7F) == 0x7F) p[i] ^= 1; /* 0x7F/0xFF are NaN */
        if (dtype == MM_DTYPE_I8 && p[i] == 0x80) p[i] = 0x81;                /* symmetric INT8 */
    }
}

/* E8M0 scales near 2^0 (2^-3 .. 2^3). */
static void fill_mx_scales(uint8_t *p, int64_t n, uint64_t *s) {
    for (int64_t i = 0; i < n; i++) p[i] = (uint8_t)(124 + cli_rand_u64(s) % 7);
}

static mm_gemm_packed_weights *make_weights(const format_info *f, int64_t k, int64_t n, int gated,
                                            uint64_t *s) {
    mm_gemm_packed_weights *packed = NULL;
    int64_t bytes = mm_dtype_row_bytes(f->w, k * n);
    int64_t mx_bytes = n * ((k + 63) / 64) * 2;
    uint8_t *data = malloc((size_t)bytes);
    float *scales = malloc((size_t)n * sizeof *scales);
    uint8_t *mx = malloc((size_t)mx_bytes);
    if (data && scales && mx) {
        fill_codes(f->w, data, bytes, s, 1.0f / sqrtf((float)k));
        for (int64_t i = 0; i < n; i++) scales[i] = 1.0f / (127.0f * sqrtf((float)k));
        fill_mx_scales(mx, mx_bytes, s);
        mm_gemm_weight_desc desc = {f->w, k, n, 0, data, scales, NULL, mx};
        mm_gemm_pack_options opts = {gated};
        if (mm_gemm_pack_weights_with(&desc, &opts, &packed, NULL) != MM_OK) packed = NULL;
    }
    free(data), free(scales), free(mx);
    return packed;
}

void bench_ffn_expert_free(bench_ffn_expert *x) {
    if (!x) return;
    for (int64_t e = 0; e < x->experts; e++) {
        if (x->w1) mm_gemm_packed_free(x->w1[e]);
        if (x->w2) mm_gemm_packed_free(x->w2[e]);
    }
    free(x->w1), free(x->w2), free(x->x), free(x->x_scales), free(x->x_mx), free(x->h);
    free(x->act), free(x->act_scales), free(x->act_mx), free(x->out), free(x);
}

static int is_mx(mm_dtype d) {
    return d == MM_DTYPE_FP8_E4M3FN || d == MM_DTYPE_FP8_E5M2 || d == MM_DTYPE_FP4_E2M1;
}

bench_ffn_expert *bench_ffn_expert_create(bench_ffn_format format, int64_t hidden, int64_t inter,
                                          int64_t experts, int64_t max_rows, uint64_t seed) {
    const format_info *f = &formats[format];
    bench_ffn_expert *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->format = format, x->hidden = hidden, x->inter = inter, x->experts = experts, x->max_rows = max_rows;
    uint64_t s = seed;
    x->w1 = calloc((size_t)experts, sizeof *x->w1);
    x->w2 = calloc((size_t)experts, sizeof *x->w2);
    if (!x->w1 || !x->w2) goto fail;
    for (int64_t e = 0; e < experts; e++) {
        x->w1[e] = make_weights(f, hidden, 2 * inter, 1, &s);
        x->w2[e] = make_weights(f, inter, hidden, 0, &s);
        if (!x->w1[e] || !x->w2[e]) goto fail;
    }
    x->ld_h = mm_gemm_packed_n_out(x->w1[0]);
    x->x_stride = (mm_dtype_row_bytes(f->a, hidden) + 63) / 64 * 64;
    x->act_stride = (mm_dtype_row_bytes(f->a, inter) + 63) / 64 * 64;
    x->x = aligned_alloc(64, (size_t)(max_rows * x->x_stride));
    x->act = aligned_alloc(64, (size_t)(max_rows * x->act_stride));
    x->x_scales = malloc((size_t)max_rows * sizeof(float));
    x->act_scales = malloc((size_t)max_rows * sizeof(float));
    x->x_mx = malloc((size_t)(max_rows * ((hidden + 31) / 32)));
    x->act_mx = malloc((size_t)(max_rows * ((inter + 31) / 32)));
    x->h = malloc((size_t)(max_rows * x->ld_h) * sizeof(float));
    x->out = malloc((size_t)(max_rows * hidden) * sizeof(float));
    if (!x->x || !x->act || !x->x_scales || !x->act_scales || !x->x_mx || !x->act_mx || !x->h || !x->out)
        goto fail;
    fill_codes(f->a, x->x, max_rows * x->x_stride, &s, 1.0f);
    for (int64_t r = 0; r < max_rows; r++) x->x_scales[r] = 1.0f / 127.0f;
    fill_mx_scales(x->x_mx, max_rows * ((hidden + 31) / 32), &s);
    return x;
fail:
    bench_ffn_expert_free(x);
    return NULL;
}

static double weight_bytes(const mm_gemm_packed_weights *w) {
    double b = (double)w->n_panels * (double)w->panel_bytes;
    if (w->mx_scale_e8m0) b += (double)w->n_panels * (double)w->k_blocks * MM_GEMM_NR;
    if (w->col_scale) b += (double)w->n_panels * MM_GEMM_NR * 4.0;
    return b;
}

double bench_ffn_expert_weight_bytes(const bench_ffn_expert *x) {
    return weight_bytes(x->w1[0]) + weight_bytes(x->w2[0]);
}

int64_t bench_ffn_experts_for_bytes(bench_ffn_format format, int64_t hidden, int64_t inter, double bytes) {
    double per =
        3.0 * (double)hidden * (double)inter * (double)mm_dtype_row_bytes(formats[format].w, 1024) / 1024.0;
    int64_t n = (int64_t)ceil(bytes / per);
    return n < 1 ? 1 : n > 256 ? 256 : n;
}

int bench_ffn_choose(const bench_ffn_expert *x, int isa, bench_ffn_choice *out) {
    const format_info *f = &formats[x->format];
    out->isa = isa;
    out->k1 = out->k2 = NULL;
    if (isa < 0) return 0;
    out->k1 = mm_gemm_kernel_lookup((mm_isa)isa, f->a, f->w);
    out->k2 = mm_gemm_kernel_lookup((mm_isa)isa, f->a, f->w);
    return out->k1 && out->k2 ? 0 : -1;
}

const char *bench_ffn_kernel_name(const bench_ffn_expert *x, const bench_ffn_choice *c, int64_t rows) {
    const format_info *f = &formats[x->format];
    const mm_gemm_kernel *k = c->k1 ? c->k1 : mm_gemm_kernel_select_rows(f->a, f->w, rows);
    return k ? k->name : "?";
}

typedef struct act_job {
    bench_ffn_expert *x;
    const mm_moe_rowops *ops;
    mm_moe_act act;
} act_job;

/* SwiGLU of one row of GEMM1's output and the quantization of the result to the activation dtype, with
 * the operator's row operations (ops/mega_moe: the vectorized activation and INT8 quantizer, its GEMM2
 * input rule mul-even; the MX quantizer of formats.h), as its unfused path runs them. The packed order
 * of GEMM1's output gives 16 gate then the 16 matching up columns per 32-column panel. */
static void act_row(void *ctx, int64_t r) {
    const act_job *job = ctx;
    bench_ffn_expert *x = job->x;
    const format_info *f = &formats[x->format];
    const float *h = x->h + r * x->ld_h;
    float buf[8192];
    float *v = x->inter <= 8192 ? buf : malloc((size_t)x->inter * sizeof *v);
    if (!v) return;
    for (int64_t j = 0; j < x->inter; j += 16) {
        int64_t n = x->inter - j < 16 ? x->inter - j : 16;
        job->ops->act_gated(&job->act, h + 2 * j, h + 2 * j + 16, v + j, n);
    }
    uint8_t *q = x->act + r * x->act_stride;
    if (f->a == MM_DTYPE_BF16)
        job->ops->to_bf16((uint16_t *)(void *)q, v, x->inter);
    else if (f->a == MM_DTYPE_I8)
        job->ops->int8_quantize(v, x->inter, 1, (int8_t *)q, &x->act_scales[r]);
    else
        mm_mx_quantize_row_f32(v, x->inter, f->a, q, x->act_mx + r * ((x->inter + 31) / 32), NULL);
    if (v != buf) free(v);
}

int bench_ffn_expert_run(bench_ffn_expert *x, int64_t e, int64_t rows, const bench_ffn_choice *c,
                         double *total_seconds, double *gemm_seconds, char *why, size_t why_size) {
    const format_info *f = &formats[x->format];
    mm_error err;
    mm_error_clear(&err);
    int mx = is_mx(f->a);
    mm_gemm_group g1 = {rows,
                        x->x,
                        x->x_stride,
                        f->a == MM_DTYPE_I8 ? x->x_scales : NULL,
                        mx ? x->x_mx : NULL,
                        (x->hidden + 31) / 32,
                        x->w1[e],
                        x->h,
                        x->ld_h};
    mm_gemm_group g2 = {rows,
                        x->act,
                        x->act_stride,
                        f->a == MM_DTYPE_I8 ? x->act_scales : NULL,
                        mx ? x->act_mx : NULL,
                        (x->inter + 31) / 32,
                        x->w2[e],
                        x->out,
                        x->hidden};
    mm_gemm_options o1 = {c->k1, NULL, NULL}, o2 = {c->k2, NULL, NULL};
    act_job job = {x, mm_moe_rowops_get(), {0}};
    mm_mega_moe_attrs swiglu = mm_mega_moe_default_attrs(); /* SwiGLU without clamp */
    if (mm_moe_act_resolve(&swiglu, &job.act, &err) != MM_OK) {
        snprintf(why, why_size, "%s", err.message);
        return -1;
    }
    double t0 = cli_now_seconds();
    mm_status st = mm_gemm_grouped(f->a, 1, &g1, &o1, &err);
    double t1 = cli_now_seconds();
    if (st == MM_OK) mm_parallel_for(rows, act_row, &job);
    double t2 = cli_now_seconds();
    if (st == MM_OK) st = mm_gemm_grouped(f->a, 1, &g2, &o2, &err);
    double t3 = cli_now_seconds();
    if (st != MM_OK) {
        snprintf(why, why_size, "%s", err.message);
        return -1;
    }
    *total_seconds = t3 - t0;
    *gemm_seconds = (t1 - t0) + (t3 - t2);
    return 0;
}
