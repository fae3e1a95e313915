/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_ffn_expert.c: the expert FFN that `megamoe bench ffn` times: the library's FFN module
 * (src/ffn/ffn.h, as MegaMoE runs it) on one expert: GEMM1 (rows x H . H x 2I, gate/up interleaved so
 * each tile holds both halves and SwiGLU runs in its epilogue), the quantization of the activation to
 * the format's activation dtype, GEMM2 (rows x I . I x H) rounded to BF16 rows. Weights are
 * random codes of the format (no NaN codes; MX scales near 1; the weight-only formats with their block
 * scales: FP8 128 x 128, UINT4 groups of 128 along K with zero points and F16 scales) packed once; the
 * content does not change the speed, except that UINT4's F16 scales take the fused decode, as real
 * checkpoints do. Several experts rotate so that each run reads weights that are not in cache, as in a
 * MoE layer with many experts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/demo_data.h"
#include "bench/bench_ffn.h"
#include "ffn/ffn.h"
#include "gemm/gemm.h"
#include "gemm/kernel_registry.h"
#include "gemm/packed.h"
#include "format/format_table.h"
#include "megamoe/formats.h"
#include "common/timing.h"

typedef struct format_info {
    const char *name;
    mm_dtype a, w;
    int is_int;
    int64_t block_n, block_k; /* F32 block scales (weight-only FP8 / UINT4), 0: none */
} format_info;

static const format_info formats[FFN_FORMAT_COUNT] = {
    {"bf16", MM_DTYPE_BF16, MM_DTYPE_BF16, 0, 0, 0},
    {"int8", MM_DTYPE_I8, MM_DTYPE_I8, 1, 0, 0},
    {"int8xint4", MM_DTYPE_I8, MM_DTYPE_INT4, 1, 0, 0},
    {"mxfp8", MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, 0, 0, 0},
    {"mxfp8xmxfp4", MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, 0, 0, 0},
    {"mxfp4", MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, 0, 0, 0},
    {"a16-fp8b", MM_DTYPE_BF16, MM_DTYPE_FP8_E4M3FN, 0, 128, 128},
    {"a16-mxfp4", MM_DTYPE_BF16, MM_DTYPE_FP4_E2M1, 0, 0, 0},
    {"a16-uint4", MM_DTYPE_BF16, MM_DTYPE_UINT4, 0, 1, 128},
};

const char *bench_ffn_format_name(bench_ffn_format f) {
    return formats[f].name;
}
int bench_ffn_format_is_int(bench_ffn_format f) {
    return formats[f].is_int;
}
void bench_ffn_format_dtypes(bench_ffn_format f, mm_dtype *activation, mm_dtype *weight) {
    *activation = formats[f].a;
    *weight = formats[f].w;
}

struct bench_ffn_expert {
    bench_ffn_format format;
    int64_t hidden, inter, experts, max_rows;
    mm_gemm_packed_weights **w1, **w2;
    uint8_t *x;        /* max_rows input rows in the activation dtype */
    int64_t x_stride;  /* bytes */
    float *x_scales;   /* I8: per row */
    uint8_t *x_mx;     /* MX: ceil(H/32) per row */
    void *scratch_mem; /* the FFN's scratch for max_rows rows */
    mm_ffn_scratch scratch;
    uint16_t *out;  /* BF16 output, max_rows x H */
    mm_ffn_act act; /* SwiGLU without clamp */
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
    /* Block scales: at least n entries (per-channel scales use the first n). */
    int64_t blocks = f->block_k ? (n + f->block_n - 1) / f->block_n * ((k + f->block_k - 1) / f->block_k) : 0;
    int64_t n_scales = blocks > n ? blocks : n;
    uint8_t *data = malloc((size_t)bytes);
    float *scales = malloc((size_t)n_scales * sizeof *scales);
    uint8_t *mx = malloc((size_t)mx_bytes);
    uint8_t *zeros = calloc((size_t)n_scales, 1);
    if (data && scales && mx && zeros) {
        fill_codes(f->w, data, bytes, s, 1.0f / sqrtf((float)k));
        /* UINT4 scales are F16 values, as GPTQ / AWQ checkpoints store them (the AVX-512 decode has a
         * faster exact path for scales of at most 20 significant bits: docs/gemm.md). */
        float scale = 1.0f / (127.0f * sqrtf((float)k));
        if (f->w == MM_DTYPE_UINT4) scale = mm_f16_to_f32(mm_f32_to_f16(scale));
        for (int64_t i = 0; i < n_scales; i++) scales[i] = scale;
        for (int64_t i = 0; i < n_scales; i++) zeros[i] = 8;
        fill_mx_scales(mx, mx_bytes, s);
        mm_gemm_weight_desc desc = {.dtype = f->w, .k = k, .n = n, .data = data};
        if (f->block_k) {
            desc.block_scales = scales, desc.block_n = f->block_n, desc.block_k = f->block_k;
            if (f->w == MM_DTYPE_UINT4) desc.zeros = zeros;
        } else {
            desc.scales = mm_format_is_int_quant(f->w) ? scales : NULL;
            desc.mx_scales = mm_format_is_mx(f->w) ? mx : NULL;
        }
        mm_gemm_pack_options opts = {gated};
        if (mm_gemm_pack_weights_with(&desc, &opts, &packed, NULL) != MM_OK) packed = NULL;
    }
    free(data), free(scales), free(mx), free(zeros);
    return packed;
}

void bench_ffn_expert_free(bench_ffn_expert *x) {
    if (!x) return;
    for (int64_t e = 0; e < x->experts; e++) {
        if (x->w1) mm_gemm_packed_free(x->w1[e]);
        if (x->w2) mm_gemm_packed_free(x->w2[e]);
    }
    free(x->w1), free(x->w2), free(x->x), free(x->x_scales), free(x->x_mx), free(x->scratch_mem);
    free(x->out), free(x);
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
    if (mm_ffn_act_resolve(MM_MEGA_MOE_SWIGLU, NULL, 0, &x->act, NULL) != MM_OK) goto fail;
    x->x_stride = (mm_dtype_row_bytes(f->a, hidden) + 63) / 64 * 64;
    x->x = aligned_alloc(64, (size_t)(max_rows * x->x_stride));
    x->x_scales = malloc((size_t)max_rows * sizeof(float));
    x->x_mx = malloc((size_t)(max_rows * ((hidden + 31) / 32)));
    x->scratch_mem = malloc(mm_ffn_scratch_bytes(max_rows, hidden, inter, inter));
    x->out = malloc((size_t)(max_rows * hidden) * sizeof(uint16_t));
    if (!x->x || !x->x_scales || !x->x_mx || !x->scratch_mem || !x->out) goto fail;
    mm_ffn_scratch_init(&x->scratch, x->scratch_mem, max_rows, hidden, inter, inter);
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
    if (w->block_scale) b += (double)w->n_panels * (double)w->scale_blocks * MM_GEMM_NR * 4.0;
    if (w->block_zero) b += (double)w->n_panels * (double)w->scale_blocks * MM_GEMM_NR;
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

int bench_ffn_level_isa(int level) {
    return level == MM_KIND_AMX || level == MM_KIND_AMX_FEW ? MM_ISA_AMX
           : level == MM_KIND_REF                           ? MM_ISA_REF
                                                            : MM_ISA_AVX512;
}

int bench_ffn_choose(const bench_ffn_expert *x, int level, bench_ffn_choice *out) {
    const format_info *f = &formats[x->format];
    out->isa = level < 0 ? -1 : bench_ffn_level_isa(level);
    out->k1 = out->k2 = NULL;
    if (level < 0) return 0;
    mm_isa isa = (mm_isa)out->isa;
    int few = level == MM_KIND_AVX512_FEW || level == MM_KIND_AMX_FEW;
    out->k1 = few ? mm_gemm_kernel_lookup_few_rows(isa, f->a, f->w) : mm_gemm_kernel_lookup(isa, f->a, f->w);
    out->k2 = out->k1;
    return out->k1 ? 0 : -1;
}

const char *bench_ffn_kernel_name(const bench_ffn_expert *x, const bench_ffn_choice *c, int64_t rows) {
    const format_info *f = &formats[x->format];
    const mm_gemm_kernel *k = c->k1 ? c->k1 : mm_gemm_kernel_select_rows(f->a, f->w, rows);
    return k ? k->name : "?";
}

/* The FFN's timing callback: seconds of the two GEMMs. */
static void add_gemm_time(void *ctx, mm_ffn_stage stage, double begin, double end) {
    if (stage != MM_FFN_STAGE_ACTIVATION) *(double *)ctx += end - begin;
}

int bench_ffn_expert_run(bench_ffn_expert *x, int64_t e, int64_t rows, const bench_ffn_choice *c,
                         double *total_seconds, double *gemm_seconds, char *why, size_t why_size) {
    const format_info *f = &formats[x->format];
    mm_error err;
    mm_error_clear(&err);
    int mx = is_mx(f->a);
    mm_ffn_group group = {0,
                          rows,
                          x->x,
                          x->x_stride,
                          f->a == MM_DTYPE_I8 ? x->x_scales : NULL,
                          mx ? x->x_mx : NULL,
                          (x->hidden + 31) / 32,
                          x->w1[e],
                          x->w2[e],
                          NULL,
                          NULL};
    double gemm = 0.0;
    mm_ffn_job job = {f->a, f->a,        0,      &x->act, x->hidden,     x->inter, x->inter, 1,    &group,
                      NULL, &x->scratch, x->out, NULL,    add_gemm_time, &gemm,    c->k1,    c->k2};
    double t0 = cli_now_seconds();
    mm_status st = mm_ffn_run(&job, &err);
    double t3 = cli_now_seconds();
    if (st != MM_OK) {
        snprintf(why, why_size, "%s", err.message);
        return -1;
    }
    *total_seconds = t3 - t0;
    *gemm_seconds = gemm;
    return 0;
}
