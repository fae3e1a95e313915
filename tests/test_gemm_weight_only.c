/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_weight_only.c: the weight-only pairs (BF16 activations x FP8 E4M3 with F32 block scales,
 * FP4 E2M1 with E8M0 MX scales, UINT4 with F32 group scales and U8 zeros; docs/gemm.md).
 *
 * The rule: w' = BF16_RNE(F32(F32(decode(q) - zero) * scale)), then the BF16 x BF16 GEMM. The test
 * dequantizes with its own decoders and rounding (no src/format code) and checks, for every kernel of
 * every ISA level this run may use (the reference one always, MEGAMOE_ISA=ref included):
 *   (a) the output against the float64 sum of a * w' within the F32-summation bound of the BF16 GEMM;
 *   (b) bit equality with the BF16 x BF16 kernel of the same ISA on the BF16 matrix w' (both NaN counts
 *       as equal: NaN payloads are not specified);
 * on odd shapes (K off the scale block, N off the panel, block sizes 1, 3, 5, 32, 48, 128, rows 1..40,
 * both weight layouts), extreme scales and codes (documented below), the few-rows kernels at every row
 * count 1..8, hand-computed values, the packing errors and the pairs the grouped GEMM refuses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "core/cpu.h"
#include "core/parallel.h"
#include "gemm/gemm.h"
#include "gemm/kernel_registry.h"
#include "testlib.h"

/* ---- independent scalar decoders and rounding ---- */

/* E4M3FN: bias 7, no infinities, S.1111.111 is NaN. */
static float e4m3(uint8_t code) {
    int e = (code >> 3) & 15, m = code & 7;
    if ((code & 0x7F) == 0x7F) return NAN;
    double v = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return (float)((code & 0x80) ? -v : v);
}
static float e2m1(uint8_t code) {
    static const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return (code & 8) ? -magnitudes[code & 7] : magnitudes[code & 7];
}
static float e8m0(uint8_t code) {
    return code == 0xFF ? NAN : (float)ldexp(1.0, code - 127);
}
/* F32 -> BF16 bits, round to nearest even, subnormals kept, NaN quieted. */
static uint16_t to_bf16(float f) {
    uint32_t u = mm_test_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);
    uint32_t rest = u & 0xFFFFu, kept = u >> 16;
    if (rest > 0x8000u || (rest == 0x8000u && (kept & 1))) kept++;
    return (uint16_t)kept;
}
static float bf16_value(uint16_t b) {
    return mm_test_f32_from_bits((uint32_t)b << 16);
}

/* ---- one weight matrix in API form and its w' ---- */

typedef struct wcase {
    mm_dtype dtype;
    int64_t k, n, block_n, block_k;
    int transposed;
    uint8_t *data;  /* API storage */
    float *scales;  /* block scales (FP8 / UINT4) */
    uint8_t *zeros; /* UINT4 */
    uint8_t *mx;    /* FP4: (N, ceil(K/64), 2) */
    uint16_t *wq;   /* w' as BF16, (K, N) */
} wcase;

static int64_t scale_blocks_k(const wcase *w) {
    return (w->k + w->block_k - 1) / w->block_k;
}
static int64_t scale_index(const wcase *w, int64_t k, int64_t n) {
    return (n / w->block_n) * scale_blocks_k(w) + k / w->block_k;
}

static void put_code(wcase *w, int64_t k, int64_t n, uint8_t code) {
    int64_t row = w->transposed ? n : k, col = w->transposed ? k : n, len = w->transposed ? w->k : w->n;
    if (w->dtype == MM_DTYPE_FP8_E4M3FN)
        w->data[row * len + col] = code;
    else
        w->data[row * ((len + 1) / 2) + col / 2] |= (uint8_t)(code << ((col & 1) * 4));
}

/* The rule, evaluated with this file's decoders: F32 operations in the written order. */
static uint16_t rule(const wcase *w, int64_t k, int64_t n, uint8_t code) {
    float value, scale;
    if (w->dtype == MM_DTYPE_FP8_E4M3FN) {
        value = e4m3(code);
        scale = w->scales[scale_index(w, k, n)];
    } else if (w->dtype == MM_DTYPE_UINT4) {
        value = (float)((int)code - (int)w->zeros[scale_index(w, k, n)]);
        scale = w->scales[scale_index(w, k, n)];
    } else {
        value = e2m1(code);
        scale = e8m0(w->mx[n * ((w->k + 63) / 64) * 2 + k / 32]);
    }
    volatile float product = value * scale; /* one F32 rounding, no contraction */
    return to_bf16(product);
}

/* A random matrix: codes over the whole range except E4M3 NaN, scales of both signs. */
static void wcase_make(wcase *w, mm_dtype dtype, int64_t k, int64_t n, int64_t block_n, int64_t block_k,
                       int transposed, uint64_t seed) {
    uint64_t rng = seed;
    memset(w, 0, sizeof *w);
    w->dtype = dtype, w->k = k, w->n = n, w->block_n = block_n, w->block_k = block_k,
    w->transposed = transposed;
    int64_t rows = transposed ? n : k, len = transposed ? k : n;
    w->data = calloc((size_t)(rows * len + rows + 1), 1);
    int64_t blocks = (n + block_n - 1) / block_n * scale_blocks_k(w);
    w->scales = calloc((size_t)blocks, sizeof(float));
    w->zeros = calloc((size_t)blocks, 1);
    w->mx = calloc((size_t)(n * ((k + 63) / 64) * 2), 1);
    w->wq = calloc((size_t)(k * n), sizeof(uint16_t));
    for (int64_t i = 0; i < blocks; i++) {
        double s = mm_test_rand_uniform(&rng, 0.001, 0.1);
        w->scales[i] = (float)(mm_test_rand_u64(&rng) & 1 ? -s : s);
        w->zeros[i] = (uint8_t)(mm_test_rand_u64(&rng) % 16);
    }
    for (int64_t i = 0; i < n * ((k + 63) / 64) * 2; i++)
        w->mx[i] = (uint8_t)(118 + mm_test_rand_u64(&rng) % 18);
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++) {
            uint8_t code = (uint8_t)mm_test_rand_u64(&rng);
            if (dtype != MM_DTYPE_FP8_E4M3FN) code &= 15;
            if (dtype == MM_DTYPE_FP8_E4M3FN && (code & 0x7F) == 0x7F) code = 0x7E;
            put_code(w, i, j, code);
        }
}

/* w' from the stored codes (call again after editing codes or scales). */
static void wcase_dequantize(wcase *w) {
    for (int64_t i = 0; i < w->k; i++)
        for (int64_t j = 0; j < w->n; j++) {
            int64_t row = w->transposed ? j : i, col = w->transposed ? i : j,
                    len = w->transposed ? w->k : w->n;
            uint8_t code =
                w->dtype == MM_DTYPE_FP8_E4M3FN
                    ? w->data[row * len + col]
                    : (uint8_t)((w->data[row * ((len + 1) / 2) + col / 2] >> ((col & 1) * 4)) & 15);
            w->wq[i * w->n + j] = rule(w, i, j, code);
        }
}

static void wcase_free(wcase *w) {
    free(w->data), free(w->scales), free(w->zeros), free(w->mx), free(w->wq);
}

static mm_gemm_weight_desc wcase_desc(const wcase *w) {
    mm_gemm_weight_desc d = {0};
    d.dtype = w->dtype, d.k = w->k, d.n = w->n, d.transposed = w->transposed, d.data = w->data;
    if (w->dtype == MM_DTYPE_FP4_E2M1) {
        d.mx_scales = w->mx;
    } else {
        d.block_scales = w->scales, d.block_n = w->block_n, d.block_k = w->block_k;
        if (w->dtype == MM_DTYPE_UINT4) d.zeros = w->zeros;
    }
    return d;
}

/* ---- running the GEMM ---- */

/* C = A . W with the kernel forced; ldc n + 1. Returns 0 on a GEMM error (reported). */
static int run(const mm_gemm_weight_desc *d, const mm_gemm_pack_options *opts, const mm_gemm_kernel *kernel,
               const uint16_t *a, int64_t rows, float *c, int64_t ldc) {
    mm_error err;
    mm_gemm_packed_weights *pw = NULL;
    mm_status st = mm_gemm_pack_weights_with(d, opts, &pw, &err);
    CHECK_OK(st, &err);
    if (st != MM_OK) return 0;
    mm_gemm_group g = {.rows = rows, .a = a, .a_stride = 2 * d->k, .w = pw, .c = c, .ldc = ldc};
    mm_gemm_options o = {.kernel = kernel};
    st = mm_gemm_grouped(MM_DTYPE_BF16, 1, &g, &o, &err);
    CHECK_OK(st, &err);
    mm_gemm_packed_free(pw);
    return st == MM_OK;
}

static int same_value(float x, float y) {
    return (isnan(x) && isnan(y)) || mm_test_f32_bits(x) == mm_test_f32_bits(y);
}

/* The output of `kernel` on (w, a) compared with the BF16 kernel of its ISA on w'; with check_values, also
 * with the float64 expectation. Returns the number of mismatches. */
static int check_kernel(const mm_gemm_kernel *kernel, const mm_gemm_kernel *bf16_kernel, wcase *w,
                        const uint16_t *a, int64_t rows, int check_values, int interleave) {
    int64_t n_out = interleave ? (w->n / 2 + 15) / 16 * 32 : w->n, ldc = n_out + 1;
    float *got = calloc((size_t)(rows * ldc), sizeof(float)),
          *want = calloc((size_t)(rows * ldc), sizeof(float));
    mm_gemm_weight_desc d = wcase_desc(w);
    mm_gemm_weight_desc bd = {.dtype = MM_DTYPE_BF16, .k = w->k, .n = w->n, .data = w->wq};
    mm_gemm_pack_options opts = {.interleave_gate_up = interleave};
    int bad = 0;
    if (!run(&d, &opts, kernel, a, rows, got, ldc) || !run(&bd, &opts, bf16_kernel, a, rows, want, ldc))
        bad = 1;
    for (int64_t r = 0; r < rows && !bad; r++)
        for (int64_t j = 0; j < n_out; j++) {
            if (!same_value(got[r * ldc + j], want[r * ldc + j])) {
                if (bad++ < 3)
                    mm_test_report_fail(
                        __FILE__, __LINE__,
                        "%s vs %s: %s K %lld N %lld blocks %lldx%lld T%d rows %lld: C[%lld][%lld] "
                        "= %.9g (0x%08x), BF16 GEMM on w' %.9g (0x%08x)",
                        kernel->name, bf16_kernel->name, mm_dtype_name(w->dtype), (long long)w->k,
                        (long long)w->n, (long long)w->block_n, (long long)w->block_k, w->transposed,
                        (long long)rows, (long long)r, (long long)j, got[r * ldc + j],
                        mm_test_f32_bits(got[r * ldc + j]), want[r * ldc + j],
                        mm_test_f32_bits(want[r * ldc + j]));
                continue;
            }
            if (!check_values || interleave) continue;
            double sum = 0, abs_sum = 0;
            for (int64_t i = 0; i < w->k; i++) {
                double p = (double)bf16_value(a[r * w->k + i]) * bf16_value(w->wq[i * w->n + j]);
                sum += p, abs_sum += fabs(p);
            }
            double bound = (double)(w->k + 1) * ldexp(1.0, -24) * abs_sum + 1e-30;
            if (fabs((double)got[r * ldc + j] - sum) > bound && bad++ < 3)
                mm_test_report_fail(__FILE__, __LINE__,
                                    "%s: %s K %lld N %lld rows %lld: C[%lld][%lld] = %.9g, "
                                    "float64 sum of a * w' %.9g (bound %.3g)",
                                    kernel->name, mm_dtype_name(w->dtype), (long long)w->k, (long long)w->n,
                                    (long long)rows, (long long)r, (long long)j, got[r * ldc + j], sum,
                                    bound);
        }
    free(got), free(want);
    return bad;
}

static uint16_t *random_rows(int64_t rows, int64_t k, uint64_t seed) {
    uint16_t *a = malloc((size_t)(rows * k + 1) * sizeof(uint16_t));
    for (int64_t i = 0; i < rows * k; i++) a[i] = to_bf16((float)mm_test_rand_uniform(&seed, -4.0, 4.0));
    return a;
}

static const mm_dtype weight_dtypes[] = {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, MM_DTYPE_UINT4};
#define N_WEIGHT_DTYPES 3

/* The kernels of every ISA level this run may use (the general one and, where there is one, the few-rows
 * one), for one weight dtype, with the BF16 pair of the level. */
typedef struct level {
    const mm_gemm_kernel *kernel, *bf16;
} level;

#define MAX_LEVELS (2 * MM_ISA_COUNT)

static int levels_of(mm_dtype dtype, level *out) {
    int n = 0;
    for (int isa = MM_ISA_REF; isa < MM_ISA_COUNT; isa++) {
        if (isa > (int)mm_cpu_isa()) {
            mm_test_skip("%s kernel for bf16 x %s: not run, %s", mm_isa_name((mm_isa)isa),
                         mm_dtype_name(dtype),
                         mm_cpu_supports((mm_isa)isa) ? "MEGAMOE_ISA caps the ISA" : "the CPU lacks it");
            continue;
        }
        const mm_gemm_kernel *k = mm_gemm_kernel_lookup((mm_isa)isa, MM_DTYPE_BF16, dtype);
        const mm_gemm_kernel *b = mm_gemm_kernel_lookup((mm_isa)isa, MM_DTYPE_BF16, MM_DTYPE_BF16);
        if (!k) {
            /* No AMX kernel is registered for the weight-only pairs: groups run on the AVX-512 one. */
            mm_test_skip("%s: no bf16 x %s kernel registered (the level below serves it)",
                         mm_isa_name((mm_isa)isa), mm_dtype_name(dtype));
            continue;
        }
        CHECK(b != NULL);
        if (b) out[n++] = (level){k, b};
        /* The few-rows kernel of the level (decode-sized groups), on the same checks. */
        const mm_gemm_kernel *few = mm_gemm_kernel_lookup_few_rows((mm_isa)isa, MM_DTYPE_BF16, dtype);
        if (few && b) out[n++] = (level){few, b};
    }
    return n;
}

/* Random matrices on odd shapes and block sizes, every level, both layouts. */
static void check_random(void) {
    static const int64_t shapes[][2] = {{1, 1}, {33, 31}, {127, 45}, {257, 70}, {300, 33}, {555, 17}};
    static const int64_t blocks[][2] = {{1, 1}, {1, 32}, {32, 128}, {128, 128}, {48, 48}, {7, 5}, {1, 3}};
    static const int64_t row_counts[] = {1, 3, 8, 9, 17, 40};
    for (int t = 0; t < N_WEIGHT_DTYPES; t++) {
        level lv[MAX_LEVELS];
        int n_levels = levels_of(weight_dtypes[t], lv);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
                if (weight_dtypes[t] == MM_DTYPE_FP4_E2M1 && b > 0) break; /* MX: one scale layout */
                for (int tr = 0; tr < 2; tr++) {
                    uint64_t seed = 0xC0FFEEull * (s + 1) + 977 * b + 31 * (uint64_t)tr + (uint64_t)t;
                    int64_t rows = row_counts[(s + b + (size_t)tr) % 6], k = shapes[s][0], n = shapes[s][1];
                    wcase w;
                    wcase_make(&w, weight_dtypes[t], k, n, blocks[b][0], blocks[b][1], tr, seed);
                    wcase_dequantize(&w);
                    uint16_t *a = random_rows(rows, k, seed ^ 0x5555);
                    for (int l = 0; l < n_levels; l++) {
                        int bad = check_kernel(lv[l].kernel, lv[l].bf16, &w, a, rows, 1, 0);
                        if (!bad) mm_test_passed++;
                    }
                    free(a);
                    wcase_free(&w);
                }
            }
        /* Gate/up interleaved packing (the MegaMoE GEMM1 layout) with the scales following the columns. */
        wcase w;
        wcase_make(&w, weight_dtypes[t], 300, 70, 3, 48, 1, 0xABCDEFull + (uint64_t)t);
        wcase_dequantize(&w);
        uint16_t *a = random_rows(11, 300, 99);
        for (int l = 0; l < n_levels; l++)
            if (!check_kernel(lv[l].kernel, lv[l].bf16, &w, a, 11, 0, 1)) mm_test_passed++;
        free(a);
        wcase_free(&w);
    }
}

/* Extreme values, each against the BF16 GEMM on w' at every level:
 *   scale 0 (w' = +-0), scale 3e38 (w' overflows to +-Inf), scale 1e-40 (an F32 subnormal: w' is a BF16
 *   subnormal, which the AVX-512 path flushes to 0 exactly as vdpbf16ps does on the BF16 matrix), NaN
 *   scales, E8M0 scales 0 (2^-127), 254 and 0xFF (NaN), UINT4 zero points 0 and 15 with codes 15 and 0
 *   (q - zero = +-15), the E4M3 NaN codes 0x7F and 0xFF and its negative zero 0x80. */
static void check_extremes(void) {
    static const float block_scales[] = {0.0f, 3e38f, 1e-40f, -2.5f};
    static const uint8_t mx_scales[] = {0, 1, 254, 0xFF};
    for (int t = 0; t < N_WEIGHT_DTYPES; t++) {
        level lv[MAX_LEVELS];
        int n_levels = levels_of(weight_dtypes[t], lv);
        for (int e = 0; e < 5; e++) {
            wcase w;
            wcase_make(&w, weight_dtypes[t], 67, 40, 1, 16, e & 1, 0x1234ull + (uint64_t)(e * 7 + t));
            int64_t blocks = w.n * scale_blocks_k(&w);
            for (int64_t i = 0; i < blocks; i++) {
                w.scales[i] = e < 4 ? block_scales[(i + e) % 4] : NAN;
                w.zeros[i] = (uint8_t)((i & 1) ? 15 : 0);
            }
            for (int64_t i = 0; i < w.n * ((w.k + 63) / 64) * 2; i++)
                w.mx[i] = mx_scales[(i + (uint64_t)e) % 4];
            if (w.dtype == MM_DTYPE_FP8_E4M3FN) {
                put_code(&w, 5, 3, 0x7F), put_code(&w, 66, 39, 0x7F);
                put_code(&w, 9, 20, 0), put_code(&w, 9, 20, 0xFF);
                put_code(&w, 10, 21, 0x80), put_code(&w, 11, 22, 0x80); /* -0 */
            }
            wcase_dequantize(&w);
            uint16_t *a = random_rows(9, w.k, 77 + (uint64_t)e);
            for (int l = 0; l < n_levels; l++)
                if (!check_kernel(lv[l].kernel, lv[l].bf16, &w, a, 9, 0, 0)) mm_test_passed++;
            /* The NaN codes make their columns NaN (every row has a nonzero activation there). */
            if (w.dtype == MM_DTYPE_FP8_E4M3FN && n_levels > 0) {
                float c[9 * 41];
                mm_gemm_weight_desc d = wcase_desc(&w);
                if (run(&d, NULL, lv[0].kernel, a, 9, c, 41))
                    CHECK(isnan(c[3]) && isnan(c[20]) && isnan(c[39]));
            }
            free(a);
            wcase_free(&w);
        }
    }
}

/* Hand-computed values (exact in every summation order). */
static void check_hand_values(void) {
    /* UINT4: q = 3, 15, 0 with zero 8, scale 0.5 -> w' = -2.5, 3.5, -4; a = 1, 2, 0.25 -> 3.5. */
    uint8_t u4[2] = {0xF3, 0x00}; /* (K=3, N=1) stored transposed: codes 3, 15, 0 along K */
    float s_half = 0.5f;
    uint8_t z8 = 8;
    uint16_t a[3] = {to_bf16(1.0f), to_bf16(2.0f), to_bf16(0.25f)};
    mm_gemm_weight_desc d = {.dtype = MM_DTYPE_UINT4,
                             .k = 3,
                             .n = 1,
                             .transposed = 1,
                             .data = u4,
                             .block_scales = &s_half,
                             .block_n = 1,
                             .block_k = 128,
                             .zeros = &z8};
    /* E4M3 0x38 = 1, 0x40 = 2, 0xC4 = -3, block scale 0.25 -> 0.25, 0.5, -0.75; a = 4, 2, 1 -> 1.25. */
    uint8_t f8[3] = {0x38, 0x40, 0xC4};
    float s_quarter = 0.25f;
    uint16_t a8[3] = {to_bf16(4.0f), to_bf16(2.0f), to_bf16(1.0f)};
    mm_gemm_weight_desc d8 = {.dtype = MM_DTYPE_FP8_E4M3FN,
                              .k = 3,
                              .n = 1,
                              .data = f8,
                              .block_scales = &s_quarter,
                              .block_n = 128,
                              .block_k = 128};
    /* The BF16 rounding of w': E4M3 0x39 = 1.125 times 1 + 2^-8 is 1.12939453125 in F32, 1.1328125 in BF16
     * (RNE on 7 fraction bits); a = 1. */
    uint8_t f8r = 0x39;
    float s_round = 1.00390625f;
    uint16_t one = to_bf16(1.0f);
    mm_gemm_weight_desc dr = {.dtype = MM_DTYPE_FP8_E4M3FN,
                              .k = 1,
                              .n = 1,
                              .data = &f8r,
                              .block_scales = &s_round,
                              .block_n = 1,
                              .block_k = 1};
    /* FP4: codes 0x2 (1.0) and 0xF (-6), E8M0 126 (0.5) -> 0.5, -3; a = 2, 1 -> -2. */
    uint8_t f4 = 0xF2, mx[2] = {126, 0};
    uint16_t a4[2] = {to_bf16(2.0f), to_bf16(1.0f)};
    mm_gemm_weight_desc d4 = {
        .dtype = MM_DTYPE_FP4_E2M1, .k = 2, .n = 1, .transposed = 1, .data = &f4, .mx_scales = mx};
    /* The padding K of an odd K is 0 whatever the zero point and scale: UINT4 K = 3, one scale per K, the
     * last block with zero 15 and scale 3e38 (q = 14: w' = BF16(-3e38), finite; a padding code 0 would
     * decode to -15 * 3e38 = -Inf, and 0 * -Inf = NaN in a kernel that pairs K). a = 1, 1, 1. */
    uint8_t u4p[2] = {0x11, 0x0E}, zp[3] = {0, 0, 15};
    float sp[3] = {1.0f, 1.0f, 3e38f};
    uint16_t ones[3] = {one, one, one};
    mm_gemm_weight_desc dp = {.dtype = MM_DTYPE_UINT4,
                              .k = 3,
                              .n = 1,
                              .transposed = 1,
                              .data = u4p,
                              .block_scales = sp,
                              .block_n = 1,
                              .block_k = 1,
                              .zeros = zp};
    for (int isa = MM_ISA_REF; isa <= (int)mm_cpu_isa(); isa++) {
        const mm_gemm_kernel *ku = mm_gemm_kernel_lookup((mm_isa)isa, MM_DTYPE_BF16, MM_DTYPE_UINT4);
        const mm_gemm_kernel *k8 = mm_gemm_kernel_lookup((mm_isa)isa, MM_DTYPE_BF16, MM_DTYPE_FP8_E4M3FN);
        const mm_gemm_kernel *k4 = mm_gemm_kernel_lookup((mm_isa)isa, MM_DTYPE_BF16, MM_DTYPE_FP4_E2M1);
        float c = 0;
        if (ku && run(&d, NULL, ku, a, 1, &c, 1)) CHECK(c == 3.5f);
        if (k8 && run(&d8, NULL, k8, a8, 1, &c, 1)) CHECK(c == 1.25f);
        if (k8 && run(&dr, NULL, k8, &one, 1, &c, 1)) CHECK(c == 1.1328125f);
        if (k4 && run(&d4, NULL, k4, a4, 1, &c, 1)) CHECK(c == -2.0f);
        if (ku && run(&dp, NULL, ku, ones, 1, &c, 1)) CHECK(c == bf16_value(to_bf16(-3e38f)));
    }
}

/* The few-rows kernels at every row count 1..8 (one tile), each against the BF16 GEMM on w' (and so
 * bit for bit against the general kernel of its level, which the other checks hold to the same bits):
 * odd K, K across the kernels' K blocks (256 and 2048), odd block_k (pairs straddling two scale blocks,
 * block_k 1: every pair), block_n > 1, both layouts, zero points 0..15, and per matrix one of: random
 * scales; scales 0, +-Inf, NaN, 1e-40 (F32 subnormal), 300 and -1000 (scale * 2^120 overflows: the
 * FP8 decoder's exact path) or 0.5 and -2 (its fast path); E4M3 NaN codes and subnormal codes; E8M0
 * scales 0, 1, 254, 0xFF. Then, on x86-64, FP8 with the caller's MXCSR set to DAZ (the FP8 decoder's F32
 * subnormal intermediates would read as 0: it must take the exact path). */
static void check_few_rows(void) {
    static const struct {
        int64_t k, n, block_n, block_k;
        int transposed, extreme;
    } cases[] = {{67, 40, 1, 3, 0, 0},     {301, 33, 7, 5, 1, 0},     {2100, 35, 3, 1, 0, 0},
                 {4099, 20, 1, 128, 1, 0}, {255, 64, 128, 128, 0, 0}, {130, 32, 32, 48, 1, 0},
                 {67, 40, 1, 3, 1, 1},     {515, 33, 2, 7, 0, 2}};
    /* extreme 1: with scales whose E4M3 products need the exact path in their whole panel; 2: without,
     * so that the NaN codes meet the fast path. */
    static const float extreme_scales[2][8] = {
        {0.0f, INFINITY, -INFINITY, NAN, 1e-40f, 300.0f, -1000.0f, 0.03f},
        {0.0f, INFINITY, -INFINITY, NAN, 1e-40f, 0.5f, -2.0f, 0.03f}};
    static const uint8_t extreme_mx[] = {0, 1, 254, 0xFF, 127};
    for (int t = 0; t < N_WEIGHT_DTYPES; t++) {
        level lv[MAX_LEVELS];
        int n_levels = levels_of(weight_dtypes[t], lv);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            wcase w;
            wcase_make(&w, weight_dtypes[t], cases[c].k, cases[c].n, cases[c].block_n, cases[c].block_k,
                       cases[c].transposed, 0xF00Dull * (c + 1) + (uint64_t)t);
            if (cases[c].extreme) {
                int64_t blocks = (w.n + w.block_n - 1) / w.block_n * scale_blocks_k(&w);
                /* One extreme value per group of block_n columns (so that the finite ones are not hidden
                 * in sums that are NaN anyway), zero points varying per block. */
                for (int64_t i = 0; i < blocks; i++) {
                    w.scales[i] = extreme_scales[cases[c].extreme - 1][(i / scale_blocks_k(&w)) % 8];
                    w.zeros[i] = (uint8_t)(i % 16);
                }
                /* E8M0 bytes per column, the same way. */
                for (int64_t i = 0; i < w.n * ((w.k + 63) / 64) * 2; i++)
                    w.mx[i] = extreme_mx[(i / (((w.k + 63) / 64) * 2)) % 5];
                /* E4M3: NaN codes in column 0 only (scale 0: w' is NaN, not 0), subnormal codes (0x07,
                 * -0x01) everywhere. */
                if (w.dtype == MM_DTYPE_FP8_E4M3FN)
                    for (int64_t i = 0; i < w.k; i += 5) {
                        put_code(&w, i, 0, 0x7F), put_code(&w, i, 1 + i % (w.n - 1), 0x81);
                        put_code(&w, i, 1 + (i + 1) % (w.n - 1), 0x07);
                    }
            }
            wcase_dequantize(&w);
            uint16_t *a = random_rows(8, w.k, 0xBEEFull + c);
            for (int rows = 1; rows <= 8; rows++)
                for (int l = 0; l < n_levels; l++)
                    if (!check_kernel(lv[l].kernel, lv[l].bf16, &w, a, rows, !cases[c].extreme && w.k < 1000,
                                      0))
                        mm_test_passed++;
            free(a);
            wcase_free(&w);
        }
    }
#if defined(__x86_64__)
    wcase w;
    wcase_make(&w, MM_DTYPE_FP8_E4M3FN, 301, 40, 1, 3, 0, 0xDA2ull);
    for (int64_t i = 0; i < w.k; i++) put_code(&w, i, i % w.n, (uint8_t)(i % 8)); /* subnormal codes */
    wcase_dequantize(&w);
    uint16_t *a = random_rows(8, w.k, 0xDA2ull);
    level lv[MAX_LEVELS];
    int n_levels = levels_of(MM_DTYPE_FP8_E4M3FN, lv);
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x40);
    int bad = 0;
    for (int rows = 1; rows <= 8; rows += 7)
        for (int l = 0; l < n_levels; l++) bad += check_kernel(lv[l].kernel, lv[l].bf16, &w, a, rows, 0, 0);
    _mm_setcsr(csr);
    if (!bad) mm_test_passed++;
    free(a);
    wcase_free(&w);
#endif
}

/* Adjacent panels per task (grouped.c: panels_per_task): N 1550 gives 49 panels (the last partial); a
 * decode-sized task takes 6 of them with 1 thread, 3 with 2 (4 for the 1-2 rows that the FP8 / FP4
 * few-rows kernels compute two panels per call, pairs_panels), 1 with 7. Every kernel at each count,
 * against the BF16 GEMM on w' bit for bit and the float64 sum. */
static void check_adjacent_panels(void) {
    int threads = mm_parallel_num_threads();
    for (int t = 0; t < N_WEIGHT_DTYPES; t++) {
        level lv[MAX_LEVELS];
        int n_levels = levels_of(weight_dtypes[t], lv);
        wcase w;
        wcase_make(&w, weight_dtypes[t], 131, 1550, 1, 32, 0, 0xAD1ull + (uint64_t)t);
        wcase_dequantize(&w);
        uint16_t *a = random_rows(20, w.k, 0xAD2ull + (uint64_t)t);
        static const int thread_counts[] = {1, 2, 7};
        static const int64_t row_counts[] = {1, 2, 3, 20};
        for (int c = 0; c < 3; c++) {
            mm_parallel_set_num_threads(thread_counts[c]);
            for (int r = 0; r < 4; r++)
                for (int l = 0; l < n_levels; l++)
                    if (!check_kernel(lv[l].kernel, lv[l].bf16, &w, a, row_counts[r], 1, 0)) mm_test_passed++;
        }
        free(a);
        wcase_free(&w);
    }
    mm_parallel_set_num_threads(threads);
}

/* MXCSR bits a check may set in the caller: DAZ, and rounding up (RC = 10). */
#define CSR_DAZ      0x40u
#define CSR_ROUND_UP 0x4000u

/* Every level's kernels (general and few-rows) on (w, a) at rows 1..8 and 11, with csr_bits or-ed into
 * the caller's MXCSR (x86-64); returns the mismatches. */
static int check_levels_rows(const level *lv, int n_levels, wcase *w, const uint16_t *a, unsigned csr_bits,
                             int check_values) {
#if defined(__x86_64__)
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | csr_bits);
#else
    (void)csr_bits;
#endif
    int bad = 0;
    for (int rows = 1; rows <= 11; rows += rows < 8 ? 1 : 3)
        for (int l = 0; l < n_levels; l++)
            bad += check_kernel(lv[l].kernel, lv[l].bf16, w, a, rows, check_values, 0);
#if defined(__x86_64__)
    _mm_setcsr(csr);
#endif
    return bad;
}

/* FP8 blocks with one scale for a whole panel of 32 columns (block_n 32 and 64), which CPUs with
 * AVX512_VBMI decode by byte tables of the 128 scaled magnitudes plus the code's sign (on other CPUs the
 * same cases check the other decoders): every code of E4M3 in every block, per matrix
 * one scale of both signs and zeros, F32 subnormal (1e-40), products below the F32 normal range (1e-41
 * times small codes) and beyond it (3e38), the scales of the exact path (300, -1000); a last panel with 6
 * columns (padding), odd K and both layouts; the NaN codes in two columns of a matrix of their own; with
 * the caller's MXCSR set to DAZ, and rounding up (a scale where the rule's multiply is then not
 * symmetric in the code's sign); and block_k 9 with scales alternating per K block (a table per block,
 * the pair that straddles two blocks decoded the general way). Rows 1..8 (the few-rows kernels) and 11
 * (the general kernel), each against the BF16 GEMM on w', and against float64 where every w' is finite. */
static void check_fp8_panel_scales(void) {
    static const float panel_scales[] = {0.03f,    -2.5f, 0.0f,           -0.0f, 1e-40f, 1e-41f, 300.0f,
                                         -1000.0f, 3e38f, 0x1.81745ep+2f, 0.5f,  0.5f,   0.03f};
    enum {
        N_SCALES = sizeof panel_scales / sizeof panel_scales[0],
        ROUND_UP_CASE = N_SCALES - 4,
        NAN_CASE = N_SCALES - 3,
        DAZ_CASE = N_SCALES - 2,
        STRADDLE_CASE = N_SCALES - 1
    };
    level lv[MAX_LEVELS];
    int n_levels = levels_of(MM_DTYPE_FP8_E4M3FN, lv);
    for (int c = 0; c < N_SCALES; c++) {
        wcase w;
        wcase_make(&w, MM_DTYPE_FP8_E4M3FN, 301, 70, c & 1 ? 64 : 32,
                   c == STRADDLE_CASE ? 9
                   : c & 2            ? 128
                                      : 64,
                   c & 1, 0x5CA1Eull + (uint64_t)c);
        for (int64_t i = 0; i < (w.n + w.block_n - 1) / w.block_n * scale_blocks_k(&w); i++)
            w.scales[i] = c == STRADDLE_CASE && i % 2 ? -2.5f : panel_scales[c];
        for (int64_t k = 0; k < w.k; k++)
            for (int64_t n = 0; n < w.n; n++) {
                uint8_t code = (uint8_t)(k * 7 + n * 13 + c);
                if ((code & 0x7F) == 0x7F) code = c == NAN_CASE && (n == 5 || n == 37) ? code : code ^ 1;
                put_code(&w, k, n, code);
            }
        /* Rounding up, the rule's multiply is not symmetric: for this scale E4M3 0x0b gives
         * 0x1.090002p-3 and 0x8b -0x1.09p-3, which round to BF16 patterns of different magnitudes. */
        unsigned csr_bits = c == DAZ_CASE ? CSR_DAZ : c == ROUND_UP_CASE ? CSR_ROUND_UP : 0;
#if defined(__x86_64__)
        unsigned csr = _mm_getcsr();
        _mm_setcsr(csr | csr_bits);
        wcase_dequantize(&w);
        _mm_setcsr(csr);
#else
        wcase_dequantize(&w);
#endif
        uint16_t *a = random_rows(11, w.k, 0xFACEull + (uint64_t)c);
        int finite = c != NAN_CASE && panel_scales[c] < 1e4f && panel_scales[c] > -1e4f;
        if (!check_levels_rows(lv, n_levels, &w, a, csr_bits, finite)) mm_test_passed++;
        /* The NaN codes make their two columns NaN and no other (the activations are nonzero). */
        if (c == NAN_CASE && n_levels > 0) {
            float out[11 * 71];
            mm_gemm_weight_desc d = wcase_desc(&w);
            if (run(&d, NULL, lv[n_levels - 1].kernel, a, 1, out, 71))
                for (int64_t n = 0; n < w.n; n++) CHECK(!!isnan(out[n]) == (n == 5 || n == 37));
        }
        free(a);
        wcase_free(&w);
    }
}

/* UINT4 with group scales that AVX-512 decodes by one fused q * scale - zero * scale (exact where zero *
 * scale is: positive scales of at most 20 significant bits in [2^-122, 2^123), as FP16 checkpoint scales
 * are), and the scales just outside that which keep the other decode: per matrix one scale for every
 * group (FP16 values, 2^-122 and 1.5 * 2^122 at the edges, 2^-20 with the caller's MXCSR set to DAZ;
 * 0.01f with its low mantissa bits, 2^-127 (F32 subnormal), 2^126 (zero * scale would overflow), a
 * negative and a zero scale; 2^125 where zero * scale overflows but no w' does), zero
 * points 0..15 varying per group and column, random codes; then block_k 9 with the scales of alternate K
 * blocks inside and outside (a pair straddling two blocks decodes the other way). Against the BF16 GEMM
 * on w' bit for bit, and float64 where the sums stay finite. */
static void check_uint4_scales(void) {
    static const float group_scales[] = {0.0078125f, 0.01000213623046875f, 65504.0f, 0x1p-24f,  0x1p-122f,
                                         3.140625f,  0x1.8p122f,           0.01f,    0x1p-127f, 0x1p-20f,
                                         0x1p126f,   -0.0078125f,          0.0f,     0x1p125f,  0.0078125f};
    enum {
        N_SCALES = sizeof group_scales / sizeof group_scales[0],
        DAZ_CASE = N_SCALES - 6,
        OVERFLOW_CASE = N_SCALES - 2,
        STRADDLE_CASE = N_SCALES - 1
    };
    level lv[MAX_LEVELS];
    int n_levels = levels_of(MM_DTYPE_UINT4, lv);
    for (int c = 0; c < N_SCALES; c++) {
        wcase w;
        wcase_make(&w, MM_DTYPE_UINT4, 301, 70, 1,
                   c == STRADDLE_CASE ? 9
                   : c & 1            ? 128
                                      : 32,
                   c & 1, 0x0111ull + (uint64_t)c);
        int64_t blocks_k = scale_blocks_k(&w);
        for (int64_t i = 0; i < w.n * blocks_k; i++) {
            w.scales[i] = c == STRADDLE_CASE && i % blocks_k % 2 ? 0.01f : group_scales[c];
            w.zeros[i] = (uint8_t)((i * 7 + i / blocks_k) % 16);
        }
        /* 2^125 with zero 8: zero * scale = 2^128 overflows where every w' (codes 8 and one 9 per
         * column) is 0 or 2^125, and every sum finite. */
        if (c == OVERFLOW_CASE) {
            for (int64_t i = 0; i < w.n * blocks_k; i++) w.zeros[i] = 8;
            /* put_code ors nibbles in: clear the random codes first. */
            memset(w.data, 0, (size_t)(w.transposed ? w.n * ((w.k + 1) / 2) : w.k * ((w.n + 1) / 2)));
        }
        for (int64_t k = 0; c == OVERFLOW_CASE && k < w.k; k++)
            for (int64_t n = 0; n < w.n; n++) put_code(&w, k, n, k == n ? 9 : 8);
        wcase_dequantize(&w);
        uint16_t *a = random_rows(11, w.k, 0xC0DEull + (uint64_t)c);
        int finite = group_scales[c] < 1e30f || c == OVERFLOW_CASE;
        if (!check_levels_rows(lv, n_levels, &w, a, c == DAZ_CASE ? CSR_DAZ : 0, finite)) mm_test_passed++;
        free(a);
        wcase_free(&w);
    }
}

static void expect_pack_error(const mm_gemm_weight_desc *d, const char *needle) {
    mm_error err;
    mm_gemm_packed_weights *pw = NULL;
    CHECK_STATUS(mm_gemm_pack_weights(d, &pw, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, needle);
    CHECK(pw == NULL);
}

static void check_errors(void) {
    uint8_t data[64] = {0}, zeros[4] = {0, 15, 16, 0}, mx[4] = {127, 127, 127, 127};
    float scales[4] = {1, 1, 1, 1};
    mm_gemm_weight_desc u = {.dtype = MM_DTYPE_UINT4,
                             .k = 8,
                             .n = 2,
                             .data = data,
                             .block_scales = scales,
                             .block_n = 1,
                             .block_k = 4,
                             .zeros = zeros};
    expect_pack_error(&u, "zeros[2] = 16"); /* 2 x 2 blocks, the third is 16 */
    zeros[2] = 3;
    u.block_k = 0;
    expect_pack_error(&u, "block_k = 0");
    u.block_k = 4, u.zeros = NULL;
    expect_pack_error(&u, "weight zeros are NULL");
    u.zeros = zeros, u.block_scales = NULL;
    expect_pack_error(&u, "block_scales are NULL");
    u.block_scales = scales, u.mx_scales = mx;
    expect_pack_error(&u, "mx_scales and block_scales are both given");
    mm_gemm_weight_desc f = u; /* FP8 with zeros */
    f.dtype = MM_DTYPE_FP8_E4M3FN, f.mx_scales = NULL;
    expect_pack_error(&f, "only uint4 takes zero points");
    f.zeros = NULL, f.dtype = MM_DTYPE_FP8_E5M2;
    expect_pack_error(&f, "only fp8_e4m3fn and uint4 take block scales");
    f.dtype = MM_DTYPE_FP8_E4M3FN, f.block_scales = NULL;
    expect_pack_error(&f, "or F32 block_scales, for bf16 activations");

    /* Pairs: block-scaled FP8 only with BF16 activations, MX-scaled FP8 only with MX activations. */
    mm_error err;
    mm_gemm_packed_weights *block_fp8 = NULL, *mx_fp8 = NULL;
    f.block_scales = scales;
    mm_gemm_weight_desc m = {.dtype = MM_DTYPE_FP8_E4M3FN, .k = 8, .n = 2, .data = data, .mx_scales = mx};
    CHECK_OK(mm_gemm_pack_weights(&f, &block_fp8, &err), &err);
    CHECK_OK(mm_gemm_pack_weights(&m, &mx_fp8, &err), &err);
    uint8_t act[16] = {0}, act_mx[1] = {127};
    float c[2];
    mm_gemm_group g = {.rows = 1,
                       .a = act,
                       .a_stride = 16,
                       .w = block_fp8,
                       .c = c,
                       .ldc = 2,
                       .a_mx_scales = act_mx,
                       .a_mx_stride = 1};
    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_FP8_E4M3FN, 1, &g, NULL, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "packed with block scales");
    g.w = mx_fp8;
    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_BF16, 1, &g, NULL, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "packed with MX scales");
    CHECK_OK(mm_gemm_grouped(MM_DTYPE_FP8_E4M3FN, 1, &g, NULL, &err), &err);
    g.w = block_fp8;
    CHECK_OK(mm_gemm_grouped(MM_DTYPE_BF16, 1, &g, NULL, &err), &err);
    mm_gemm_packed_free(block_fp8);
    mm_gemm_packed_free(mx_fp8);
    /* UINT4 weights with activations other than BF16: no such pair. */
    mm_gemm_packed_weights *pu = NULL;
    u.mx_scales = NULL;
    CHECK_OK(mm_gemm_pack_weights(&u, &pu, &err), &err);
    g.w = pu;
    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_FP8_E4M3FN, 1, &g, NULL, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "not a supported GEMM pair");
    mm_gemm_packed_free(pu);
    /* The registry's choice for the new pairs exists (the reference at least). */
    for (int t = 0; t < N_WEIGHT_DTYPES; t++)
        CHECK(mm_gemm_kernel_select(MM_DTYPE_BF16, weight_dtypes[t]) != NULL);
}

int main(void) {
    check_hand_values();
    check_errors();
    check_random();
    check_extremes();
    check_few_rows();
    check_adjacent_panels();
    check_fp8_panel_scales();
    check_uint4_scales();
    printf("cpu isa %s\n", mm_isa_name(mm_cpu_isa()));
    return mm_test_finish("test_gemm_weight_only");
}
