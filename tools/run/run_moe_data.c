/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe_data.c: seeded synthetic weights, tokens and routing for `megamoe run`.
 *
 * Every expert's BF16 master weights come from its own random stream (seed, expert id, matrix), so a
 * rank builds only its own experts, the check rebuilds only the experts its sample touches, and MPI
 * processes need not exchange weights. Quantized scenarios quantize these same BF16 values with the
 * formats API (per-channel INT8 / INT4, MX block-32) or by block (FP8 / UINT4, run_moe_blocks.c), which
 * keeps the scenarios comparable. Values are
 * uniform with variance about 1 / K per weight (K the reduction length), so activations stay O(1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/demo_data.h"
#include "core/free_all.h"
#include "format/format_table.h"
#include "megamoe/formats.h"
#include "common/cli_util.h"
#include "run/run_moe.h"
#include "common/timing.h"

static uint64_t stream_seed(uint64_t seed, uint64_t a, uint64_t b) {
    uint64_t s = seed ^ (a * 0xD1B54A32D192ED03ull) ^ (b * 0x8CB92BA72F3D8DD7ull);
    return cli_rand_u64(&s);
}

/* Uniform in [-amp, amp), 16 random bits per value, rounded to BF16. */
static void fill_uniform_bf16(uint64_t *state, int64_t n, float amp, uint16_t *out) {
    const float step = amp / 32768.0f;
    for (int64_t i = 0; i < n; i += 4) {
        uint64_t r = cli_rand_u64(state);
        for (int64_t j = 0; j < 4 && i + j < n; j++)
            out[i + j] = mm_f32_to_bf16((float)((int32_t)((r >> (16 * j)) & 0xFFFF) - 32768) * step);
    }
}

/* Uniform in [0, 1). */
static double uniform01(uint64_t *state) {
    return (double)(cli_rand_u64(state) >> 11) * 0x1p-53;
}

/* A weight row is drawn as integer levels k in [-128, 127] times a power-of-two step, so every value is
 * exact in BF16 and a row holds at most 256 distinct values. Quantizing a row then means quantizing
 * its palette (the values k * step for |k| <= the row's largest |k|, which has the row's amax) with the
 * formats API once and looking the codes up: the same codes as quantizing the whole row, since the
 * per-element rule depends only on the value and the row's scale. This keeps INT8 generation at table
 * speed (128 experts hold 600 M weights; the per-element call's cost: docs/mega_moe.md, `megamoe run`). */
enum { LEVELS = 256, LEVEL_BIAS = 128 };

typedef struct row_scratch {
    int8_t *levels; /* k of each element */
    uint16_t *bf16; /* the row as BF16 */
    float palette[LEVELS + 1];
    int8_t codes[LEVELS + 1];
    uint16_t level_bf16[LEVELS]; /* BF16 of k * step */
    float step;
    /* MX: for a block whose largest |k| is m, its E8M0 scale and the code of every level in [-m, m] */
    uint8_t mx_ready[LEVEL_BIAS + 1], mx_scale[LEVEL_BIAS + 1];
    uint8_t mx_codes[LEVEL_BIAS + 1][LEVELS + 1];
} row_scratch;

static void draw_levels(uint64_t *state, int64_t n, int8_t *levels) {
    for (int64_t i = 0; i < n; i += 8) {
        uint64_t r = cli_rand_u64(state);
        for (int64_t j = 0; j < 8 && i + j < n; j++) levels[i + j] = (int8_t)(uint8_t)(r >> (8 * j));
    }
}

static int max_abs_level(const int8_t *levels, int64_t n) {
    int m = 0;
    for (int64_t i = 0; i < n; i++) {
        int a = levels[i] < 0 ? -levels[i] : levels[i];
        if (a > m) m = a;
    }
    return m;
}

/* Fills the MX code table of blocks with largest |level| m: quantizes blocks made of the pinned value
 * -m * step (which fixes the block's amax, hence its scale) and up to 31 levels of [-m, m]. */
static mm_status mx_table(mm_dtype elem, int m, row_scratch *s, mm_error *err) {
    uint16_t block[32];
    uint8_t q[32], scale = 0;
    int top = m < LEVELS - LEVEL_BIAS - 1 ? m : LEVELS - LEVEL_BIAS - 1; /* levels stop at +127 */
    for (int first = -m; first <= top; first += 31) {
        int len = 1;
        block[0] = s->level_bf16[LEVEL_BIAS - m]; /* -m * step: exists for every m <= 128 */
        for (int j = first; j <= top && len < 32; j++) block[len++] = s->level_bf16[j + LEVEL_BIAS];
        mm_status st = mm_mx_quantize_row_bf16(block, len, elem, q, &scale, err);
        if (st != MM_OK) return st;
        for (int i = 1; i < len; i++)
            s->mx_codes[m][first + i - 1 + m] = mm_format_is_nibble(elem) ? mm_nibble_get(q, i) : q[i];
    }
    s->mx_scale[m] = scale;
    s->mx_ready[m] = 1;
    return MM_OK;
}

/* MX block-32 quantization of the row by table (bit-identical to mm_mx_quantize_row_bf16 on it). */
static mm_status store_row_mx(mm_dtype elem, int64_t k, row_scratch *s, uint8_t *dst, uint8_t *group_scales,
                              mm_error *err) {
    int fp4 = mm_format_is_nibble(elem);
    if (fp4) memset(dst, 0, (size_t)mm_dtype_row_bytes(elem, k));
    for (int64_t g = 0; g * 32 < k; g++) {
        int64_t begin = g * 32, end = begin + 32 < k ? begin + 32 : k;
        int m = max_abs_level(s->levels + begin, end - begin);
        if (!s->mx_ready[m]) {
            mm_status st = mx_table(elem, m, s, err);
            if (st != MM_OK) return st;
        }
        group_scales[g] = s->mx_scale[m];
        const uint8_t *codes = s->mx_codes[m];
        for (int64_t i = begin; i < end; i++) {
            uint8_t c = codes[s->levels[i] + m];
            if (fp4)
                dst[i >> 1] |= (uint8_t)(c << ((i & 1) * 4));
            else
                dst[i] = c;
        }
    }
    return MM_OK;
}

/* Quantizes one output channel (a row of k values) into its storage; fills its scale / bias. */
static mm_status store_row(mm_dtype dtype, int64_t k, row_scratch *s, uint8_t *dst, float *scale, float *bias,
                           uint8_t *mx_groups, mm_error *err) {
    if (dtype == MM_DTYPE_BF16) {
        uint16_t *out = (uint16_t *)(void *)dst;
        for (int64_t i = 0; i < k; i++) out[i] = s->level_bf16[s->levels[i] + LEVEL_BIAS];
        return MM_OK;
    }
    if (!mm_format_is_int_quant(dtype)) return store_row_mx(dtype, k, s, dst, mx_groups, err);
    int m = max_abs_level(s->levels, k);
    for (int j = -m; j <= m; j++) s->palette[j + m] = (float)j * s->step;
    if (dtype == MM_DTYPE_I8) {
        mm_int8_quantize_row_div_away(s->palette, 2 * m + 1, s->codes, scale);
        for (int64_t i = 0; i < k; i++) dst[i] = (uint8_t)s->codes[s->levels[i] + m];
        return MM_OK;
    }
    /* INT4 per channel (no formats rule for weights): s = amax / 7, q = round half away, clipped */
    float sc = (float)m * s->step / 7.0f;
    for (int j = -m; j <= m; j++)
        s->codes[j + m] =
            (int8_t)(sc > 0.0f ? fminf(7.0f, fmaxf(-8.0f, roundf(s->palette[j + m] / sc))) : 0.0f);
    int8_t *q = (int8_t *)s->bf16; /* the BF16 row is no longer needed: reuse it for the values */
    int64_t sum = 0;
    for (int64_t i = 0; i < k; i++) {
        q[i] = s->codes[s->levels[i] + m];
        sum += q[i];
    }
    *scale = sc;
    *bias = (float)(8.0 * (double)sc * (double)sum); /* the standard MSD bias (spec step 2) */
    return mm_int4_pack(q, k, dst, err);
}

/* Where one matrix of `count` experts goes: (count, n, k) stored rows of k; per-channel scales or block
 * scales (with zero points), bias and the packed MX scale tensor, each NULL when unused. */
typedef struct matrix_out {
    uint8_t *data;
    float *scales, *bias;
    uint8_t *mx_scales, *zeros;
    int64_t block_n, block_k; /* block-scaled when > 0 (run_moe_blocks.c) */
    int interleave;           /* draw order gate 0..I-1, up 0..I-1 stored alternating (weight1) */
    int extra_bias;           /* --bias on a dtype without its own bias: seeded values in bias */
} matrix_out;

/* Stored row of the r-th drawn channel: with interleave, gate i (r < n/2) is 2i and up i is 2i + 1. */
static int64_t stored_row(const matrix_out *m, int64_t n, int64_t r) {
    if (!m->interleave) return r;
    return r < n / 2 ? 2 * r : 2 * (r - n / 2) + 1;
}

/* One matrix of `count` experts: the levels of each output channel drawn in channel order, quantized
 * per row (BF16, INT8 / INT4 per channel, MX) or per block, stored at the channel's stored row. */
static mm_status make_matrix(const run_moe_config *cfg, mm_dtype dtype, const int64_t *ids, int64_t first_id,
                             int64_t count, int matrix, int64_t n, int64_t k, const matrix_out *m,
                             mm_error *err) {
    mm_status st = MM_OK;
    int64_t row_bytes = mm_dtype_row_bytes(dtype, k), groups = (k + 31) / 32;
    int64_t mx_bytes = n * ((k + 63) / 64) * 2;
    int blocks = m->block_n > 0;
    int64_t block_count =
        blocks ? ((n + m->block_n - 1) / m->block_n) * ((k + m->block_k - 1) / m->block_k) : 0;
    int mx = mm_format_is_mx(dtype) && !blocks; /* FP8 E4M3 is MX-scaled or block-scaled */
    row_scratch *s = calloc(1, sizeof *s);      /* ~34 KB of tables: not on a rank thread's stack */
    uint8_t *mx_groups = mx ? malloc((size_t)(n * groups)) : NULL;
    int8_t *all_levels = blocks ? malloc((size_t)(n * k)) : NULL; /* a block spans rows: all of them */
    if (s) {
        s->levels = malloc((size_t)k);
        s->bf16 = malloc((size_t)k * 2);
    }
    if (!s || !s->levels || !s->bf16 || (mx && !mx_groups) || (blocks && !all_levels)) {
        st = cli_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for weight rows of %lld values", (long long)k);
        goto done;
    }
    /* step: the power of two nearest to amp / 128, amp = sqrt(3 / k) (uniform with variance ~1 / k) */
    s->step = exp2f(rintf(log2f(sqrtf(3.0f / (float)k) / 128.0f)));
    for (int j = 0; j < LEVELS; j++) s->level_bf16[j] = mm_f32_to_bf16((float)(j - LEVEL_BIAS) * s->step);
    for (int64_t e = 0; e < count && st == MM_OK; e++) {
        int64_t id = ids ? ids[e] : first_id + e;
        uint64_t state = stream_seed(cfg->seed, (uint64_t)id + 1, (uint64_t)matrix + 1);
        for (int64_t r = 0; r < n && st == MM_OK; r++) {
            int64_t sr = stored_row(m, n, r);
            if (blocks) {
                draw_levels(&state, k, all_levels + sr * k);
                continue;
            }
            draw_levels(&state, k, s->levels);
            float *sc = m->scales ? &m->scales[e * n + sr] : NULL;
            float *b = m->bias && !m->extra_bias ? &m->bias[e * n + sr] : NULL;
            st = store_row(dtype, k, s, m->data + (e * n + sr) * row_bytes, sc, b,
                           mx_groups ? mx_groups + sr * groups : NULL, err);
        }
        if (st == MM_OK && blocks)
            run_moe_block_quantize(dtype, all_levels, n, k, s->step, m->block_n, m->block_k,
                                   m->data + e * n * row_bytes, m->scales + e * block_count,
                                   m->zeros ? m->zeros + e * block_count : NULL);
        if (st == MM_OK && mx_groups)
            st = mm_mx_weight_scales_pack(mx_groups, n, k, m->mx_scales + e * mx_bytes, err);
        if (st == MM_OK && m->extra_bias) {
            /* its own stream, so the weights are those of the run without --bias; O(1) outputs get
             * biases uniform in [-1/4, 1/4) */
            uint64_t b_state = stream_seed(cfg->seed, (uint64_t)id + 1, (uint64_t)matrix + 0x101);
            for (int64_t r = 0; r < n; r++)
                m->bias[e * n + stored_row(m, n, r)] = (float)(uniform01(&b_state) * 0.5 - 0.25);
        }
    }
done:
    if (s) {
        free(s->levels);
        free(s->bf16);
    }
    free(s);
    free(mx_groups);
    free(all_levels);
    return st;
}

static void *alloc_bytes(int64_t n) {
    return malloc(n > 0 ? (size_t)n : 1);
}

mm_status run_moe_expert_data_make(const run_moe_config *cfg, const run_moe_scenario *sc, int64_t first_id,
                                   const int64_t *ids, int64_t count, run_moe_expert_data *out,
                                   mm_error *err) {
    mm_dtype dt = sc->weight_dtype;
    int64_t H = cfg->hidden, I = cfg->inter, N1 = 2 * I;
    run_moe_expert_data d;
    memset(&d, 0, sizeof d);
    d.dtype = dt;
    d.count = count;
    d.hidden = H;
    d.inter = I;
    d.weight1_interleave = cfg->weight1_interleave;
    run_moe_scale_blocks(cfg, sc, &d.block_n, &d.block_k);
    int blocks = d.block_n > 0, zeros = blocks && dt == MM_DTYPE_UINT4, bias = sc->bias || cfg->bias;
    /* scale entries per matrix: per channel (INT), per block, or none */
    int64_t n_s1 = blocks ? ((N1 + d.block_n - 1) / d.block_n) * ((H + d.block_k - 1) / d.block_k) : N1;
    int64_t n_s2 = blocks ? ((H + d.block_n - 1) / d.block_n) * ((I + d.block_k - 1) / d.block_k) : H;
    mm_status st = MM_OK;
    d.weight1 = alloc_bytes(count * N1 * mm_dtype_row_bytes(dt, H));
    d.weight2 = alloc_bytes(count * H * mm_dtype_row_bytes(dt, I));
    int ok = d.weight1 && d.weight2;
    if (mm_format_is_int_quant(dt) || blocks) {
        d.scales1 = alloc_bytes(count * n_s1 * (int64_t)sizeof(float));
        d.scales2 = alloc_bytes(count * n_s2 * (int64_t)sizeof(float));
        ok = ok && d.scales1 && d.scales2;
    }
    if (zeros) {
        d.zeros1 = alloc_bytes(count * n_s1);
        d.zeros2 = alloc_bytes(count * n_s2);
        ok = ok && d.zeros1 && d.zeros2;
    }
    if (bias) {
        d.bias1 = alloc_bytes(count * N1 * (int64_t)sizeof(float));
        d.bias2 = alloc_bytes(count * H * (int64_t)sizeof(float));
        ok = ok && d.bias1 && d.bias2;
    }
    if (mm_format_is_mx(dt) && !blocks) {
        d.mx_scales1 = alloc_bytes(count * N1 * ((H + 63) / 64) * 2);
        d.mx_scales2 = alloc_bytes(count * H * ((I + 63) / 64) * 2);
        ok = ok && d.mx_scales1 && d.mx_scales2;
    }
    if (!ok) {
        st = cli_fail(err, MM_ERR_OUT_OF_MEMORY,
                      "no memory for %lld experts of %s weights (H = %lld, I = %lld)", (long long)count,
                      mm_dtype_name(dt), (long long)H, (long long)I);
        goto fail;
    }
    matrix_out m1 = {d.weight1,        d.scales1, d.bias1,   d.mx_scales1,
                     d.zeros1,         d.block_n, d.block_k, d.weight1_interleave,
                     bias && !sc->bias};
    matrix_out m2 = {d.weight2, d.scales2, d.bias2, d.mx_scales2,     d.zeros2,
                     d.block_n, d.block_k, 0,       bias && !sc->bias};
    st = make_matrix(cfg, dt, ids, first_id, count, 1, N1, H, &m1, err);
    if (st == MM_OK) st = make_matrix(cfg, dt, ids, first_id, count, 2, H, I, &m2, err);
    if (st != MM_OK) goto fail;

    int64_t s_w1[3] = {count, N1, H}, s_w2[3] = {count, H, I};
    d.t_w1 = mm_tensor_make(dt, 3, s_w1, d.weight1);
    d.t_w2 = mm_tensor_make(dt, 3, s_w2, d.weight2);
    int64_t s1[2] = {count, N1}, s2[2] = {count, H};
    if (blocks) {
        int64_t b1[3] = {count, (N1 + d.block_n - 1) / d.block_n, (H + d.block_k - 1) / d.block_k};
        int64_t b2[3] = {count, (H + d.block_n - 1) / d.block_n, (I + d.block_k - 1) / d.block_k};
        d.t_s1 = mm_tensor_make(MM_DTYPE_F32, 3, b1, d.scales1);
        d.t_s2 = mm_tensor_make(MM_DTYPE_F32, 3, b2, d.scales2);
        if (zeros) {
            d.t_z1 = mm_tensor_make(MM_DTYPE_U8, 3, b1, d.zeros1);
            d.t_z2 = mm_tensor_make(MM_DTYPE_U8, 3, b2, d.zeros2);
        }
    } else if (mm_format_is_int_quant(dt)) {
        d.t_s1 = mm_tensor_make(MM_DTYPE_F32, 2, s1, d.scales1);
        d.t_s2 = mm_tensor_make(MM_DTYPE_F32, 2, s2, d.scales2);
    } else if (mm_format_is_mx(dt)) {
        int64_t x1[4] = {count, N1, (H + 63) / 64, 2}, x2[4] = {count, H, (I + 63) / 64, 2};
        d.t_s1 = mm_tensor_make(MM_DTYPE_E8M0, 4, x1, d.mx_scales1);
        d.t_s2 = mm_tensor_make(MM_DTYPE_E8M0, 4, x2, d.mx_scales2);
    }
    if (bias) {
        d.t_b1 = mm_tensor_make(MM_DTYPE_F32, 2, s1, d.bias1);
        d.t_b2 = mm_tensor_make(MM_DTYPE_F32, 2, s2, d.bias2);
    }
    *out = d;
    return MM_OK;
fail:
    run_moe_expert_data_free(&d);
    return st;
}

void run_moe_expert_data_free(run_moe_expert_data *d) {
    MM_FREE_ALL(d->weight1, d->weight2, d->scales1, d->scales2, d->mx_scales1, d->mx_scales2, d->bias1,
                d->bias2, d->zeros1, d->zeros2);
    memset(d, 0, sizeof *d);
}

/* The API's view of the data (stacked tensors, transpose flags set). */
mm_mega_moe_expert_weights run_moe_expert_weights_view(const run_moe_expert_data *d) {
    mm_mega_moe_expert_weights w;
    memset(&w, 0, sizeof w);
    w.count = d->count;
    if (d->count == 0) return w;
    w.transpose_weight1 = 1;
    w.transpose_weight2 = 1;
    w.weight1 = &d->t_w1;
    w.weight2 = &d->t_w2;
    if (d->t_s1.ndim) {
        w.weight_scales1 = &d->t_s1;
        w.weight_scales2 = &d->t_s2;
    }
    if (d->t_b1.ndim) {
        w.bias1 = &d->t_b1;
        w.bias2 = &d->t_b2;
    }
    if (d->t_z1.ndim) {
        w.weight_zeros1 = &d->t_z1;
        w.weight_zeros2 = &d->t_z2;
    }
    w.scale_block_n = d->block_n;
    w.scale_block_k = d->block_k;
    w.weight1_interleave = d->weight1_interleave;
    return w;
}

/* ---- tokens and routing -------------------------------------------------------------------- */

/* Approximately standard normal (sum of four uniforms, rescaled): cheap and bounded. */
static double normalish(uint64_t *state) {
    double s = uniform01(state) + uniform01(state) + uniform01(state) + uniform01(state);
    return (s - 2.0) * sqrt(3.0);
}

mm_status run_moe_tokens_make(const run_moe_config *cfg, int64_t rank, run_moe_tokens *out, mm_error *err) {
    int64_t T = cfg->tokens, H = cfg->hidden, E = cfg->experts, K = cfg->topk;
    run_moe_tokens t = {T, alloc_bytes(T * H * 2), alloc_bytes(T * K * 4), alloc_bytes(T * K * 4)};
    double *bias = alloc_bytes(E * (int64_t)sizeof(double)),
           *logits = alloc_bytes(E * (int64_t)sizeof(double));
    mm_status st = MM_OK;
    if (!t.x || !t.ids || !t.weights || !bias || !logits) {
        st = cli_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for %lld tokens of hidden %lld", (long long)T,
                      (long long)H);
        run_moe_tokens_free(&t);
        goto done;
    }
    uint64_t x_state = stream_seed(cfg->seed, 0x7000 + (uint64_t)rank, 1);
    fill_uniform_bf16(&x_state, T * H, sqrtf(3.0f), t.x);
    /* Expert popularity: the same on every rank (one stream), so hot experts are hot everywhere. */
    uint64_t b_state = stream_seed(cfg->seed, 0x6000, 2);
    for (int64_t e = 0; e < E; e++) bias[e] = cfg->skew * normalish(&b_state);
    uint64_t r_state = stream_seed(cfg->seed, 0x8000 + (uint64_t)rank, 3);
    for (int64_t i = 0; i < T; i++) {
        for (int64_t e = 0; e < E; e++) logits[e] = bias[e] + normalish(&r_state);
        /* top-k by repeated selection (K is small); ties go to the lower expert id */
        double denom = 0.0, top = 0.0;
        for (int64_t k = 0; k < K; k++) {
            int64_t best = -1;
            for (int64_t e = 0; e < E; e++)
                if (logits[e] > -INFINITY && (best < 0 || logits[e] > logits[best])) best = e;
            if (k == 0) top = logits[best];
            t.ids[i * K + k] = (int32_t)best;
            double p = exp(logits[best] - top);
            t.weights[i * K + k] = (float)p;
            denom += p;
            logits[best] = -INFINITY;
        }
        /* softmax restricted to the top-k (= softmax over all experts, top-k renormalized) */
        for (int64_t k = 0; k < K; k++) t.weights[i * K + k] = (float)(t.weights[i * K + k] / denom);
    }
    *out = t;
done:
    free(bias);
    free(logits);
    return st;
}

void run_moe_tokens_free(run_moe_tokens *t) {
    MM_FREE_ALL(t->x, t->ids, t->weights);
    memset(t, 0, sizeof *t);
}

mm_status run_moe_weights_make(mm_comm *comm, const run_moe_config *cfg, const run_moe_scenario *sc,
                               mm_mega_moe_buffer *buffer, mm_mega_moe_weights **out, double *generated_at,
                               mm_error *err) {
    int64_t local = cfg->experts / cfg->ranks;
    run_moe_expert_data routed, shared;
    memset(&routed, 0, sizeof routed);
    memset(&shared, 0, sizeof shared);
    mm_status st = run_moe_expert_data_make(cfg, sc, mm_comm_rank(comm) * local, NULL, local, &routed, err);
    if (st == MM_OK && cfg->shared_experts > 0)
        st = run_moe_expert_data_make(cfg, sc, RUN_MOE_SHARED_ID_BASE, NULL, cfg->shared_experts, &shared,
                                      err);
    if (generated_at) *generated_at = cli_now_seconds();
    if (st == MM_OK) {
        mm_mega_moe_expert_weights rv = run_moe_expert_weights_view(&routed);
        mm_mega_moe_expert_weights sv = run_moe_expert_weights_view(&shared);
        st = mm_mega_moe_weights_create(buffer, &rv, cfg->shared_experts > 0 ? &sv : NULL, out, err);
    }
    run_moe_expert_data_free(&routed);
    run_moe_expert_data_free(&shared);
    return st;
}
