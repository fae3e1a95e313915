/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_kernels.c: every registered micro-kernel against the independent float64 / exact-INT
 * expectation of test_gemm_common.h, on edge shapes (rows 0..2*MR+1, K and N off the tile sizes, odd K,
 * K not a multiple of 32, K spanning several MM_GEMM_KC blocks, both weight layouts), run through
 * mm_gemm_grouped with the kernel forced (the general kernel and the few-rows kernel of every ISA); and the
 * AVX-512 kernels against the reference kernels (bit-exact for INT, documented tolerance for BF16). */
#include "core/cpu.h"
#include "gemm/kernel_registry.h"
#include "test_gemm_common.h"

typedef struct pair {
    mm_dtype a, w;
} pair;

static const pair pairs[] = {
    {MM_DTYPE_BF16, MM_DTYPE_BF16},
    {MM_DTYPE_I8, MM_DTYPE_I8},
    {MM_DTYPE_I8, MM_DTYPE_INT4},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2},
    {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1},
    {MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1},
    {MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1},
};
#define N_PAIRS (sizeof pairs / sizeof pairs[0])

#define SENTINEL 0x7FC0DEADu

/* Runs one case with one kernel; out receives rows x n values (ldc = n + 3, padding checked). */
static void run_kernel(const gemm_case *c, const mm_gemm_kernel *kernel, float *out) {
    mm_error err_storage, *err = &err_storage;
    mm_gemm_weight_desc desc = gemm_case_weights(c);
    mm_gemm_packed_weights *w = NULL;
    CHECK_OK(mm_gemm_pack_weights(&desc, &w, err), err);
    int64_t ldc = c->n + 3;
    float *buf = malloc((size_t)((c->rows + 1) * ldc) * sizeof(float));
    for (int64_t i = 0; i < (c->rows + 1) * ldc; i++) memcpy(&buf[i], &(uint32_t){SENTINEL}, 4);
    mm_gemm_group g = gemm_case_group(c, w, buf, ldc);
    mm_gemm_options opts = {.kernel = kernel};
    CHECK_OK(mm_gemm_grouped(c->a_dtype, 1, &g, &opts, err), err);
    int untouched = 1;
    for (int64_t r = 0; r <= c->rows; r++)
        for (int64_t j = r < c->rows ? c->n : 0; j < ldc; j++)
            untouched &= gemm_f32_bits(buf[r * ldc + j]) == SENTINEL;
    if (!untouched)
        mm_test_report_fail(__FILE__, __LINE__, "%s wrote outside its %lldx%lld output", kernel->name,
                            (long long)c->rows, (long long)c->n);
    for (int64_t r = 0; r < c->rows; r++) memcpy(out + r * c->n, buf + r * ldc, (size_t)c->n * sizeof(float));
    free(buf);
    mm_gemm_packed_free(w);
}

/* Compares one kernel's output with the expectation; returns the number of mismatches. */
static int check_against_expectation(const gemm_case *c, const mm_gemm_kernel *kernel, const float *out) {
    int bad = 0;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t j = 0; j < c->n; j++) {
            double value;
            float got = out[r * c->n + j];
            if (!gemm_case_output_ok(c, r, j, got, 1, &value) && bad++ < 3)
                mm_test_report_fail(__FILE__, __LINE__,
                                    "%s rows %lld K %lld N %lld T%d: C[%lld][%lld] = %.9g, expected %.9g",
                                    kernel->name, (long long)c->rows, (long long)c->k, (long long)c->n,
                                    c->transposed, (long long)r, (long long)j, got, value);
        }
    return bad;
}

static void check_case(const pair *p, const mm_gemm_kernel *kernel, int64_t rows, int64_t k, int64_t n,
                       int transposed, int with_bias, uint64_t seed) {
    gemm_case c;
    gemm_case_make(&c, p->a, p->w, rows, k, n, transposed, with_bias, seed);
    float *out = calloc((size_t)(rows * n + 1), sizeof(float));
    run_kernel(&c, kernel, out);
    int bad = check_against_expectation(&c, kernel, out);
    if (bad == 0) mm_test_passed++;

    /* A kernel of another ISA: against the reference kernel too, on the same data. */
    const mm_gemm_kernel *ref = mm_gemm_kernel_lookup(MM_ISA_REF, p->a, p->w);
    if (kernel->isa != MM_ISA_REF && ref) {
        float *ref_out = calloc((size_t)(rows * n + 1), sizeof(float));
        run_kernel(&c, ref, ref_out);
        int mismatches = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n; j++) {
                double value, abs_sum;
                float exact;
                gemm_case_expect(&c, r, j, &value, &abs_sum, &exact);
                float a = out[r * n + j], b = ref_out[r * n + j];
                /* INT: bit-exact. BF16: the tolerance documented in bf16_avx512.c. */
                int ok = mm_format_is_int_quant(p->w)
                             ? gemm_f32_bits(a) == gemm_f32_bits(b)
                             : fabs((double)a - b) <= 2.0 * gemm_f32_sum_bound(k, abs_sum);
                mismatches += !ok;
            }
        if (mismatches)
            mm_test_report_fail(__FILE__, __LINE__, "%s vs %s: %d mismatches (rows %lld K %lld N %lld)",
                                kernel->name, ref->name, mismatches, (long long)rows, (long long)k,
                                (long long)n);
        else
            mm_test_passed++;
        free(ref_out);
    }
    free(out);
    gemm_case_free(&c);
}

static void check_kernel(const pair *p, const mm_gemm_kernel *kernel) {
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)(p->a * 31 + p->w) ^ ((uint64_t)kernel->isa << 40);
    int bias = p->w == MM_DTYPE_INT4;
    /* Every row count through two full tiles plus one, on a shape off the tile sizes. */
    for (int64_t rows = 0; rows <= 2 * kernel->mr + 1; rows++)
        check_case(p, kernel, rows, 37, 45, rows & 1, bias, seed + (uint64_t)rows);
    /* K: 1, odd, just below / above 32 and 64 (MX groups), N: 1, below/above a panel, several panels. */
    static const int64_t ks[] = {1, 2, 3, 5, 31, 33, 63, 65, 100, 131, 256, 257, 555};
    static const int64_t ns[] = {1, 16, 17, 31, 32, 33, 70};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
            for (int t = 0; t < 2; t++)
                check_case(p, kernel, kernel->mr + 3, ks[i], ns[j], t, bias && (i + j) % 2 == 0,
                           seed ^ (i * 131 + j * 7 + (uint64_t)t));
}

int main(void) {
    int fast_kernels = 0;
    for (size_t i = 0; i < N_PAIRS; i++) {
        const mm_gemm_kernel *ref = mm_gemm_kernel_lookup(MM_ISA_REF, pairs[i].a, pairs[i].w);
        CHECK(ref != NULL);
        if (ref) check_kernel(&pairs[i], ref);
        for (int isa = MM_ISA_REF + 1; isa < MM_ISA_COUNT; isa++) {
            if (!mm_cpu_supports((mm_isa)isa) || isa > (int)mm_cpu_isa()) {
                mm_test_skip("%s kernels for %s x %s (general and few-rows): not run, %s",
                             mm_isa_name((mm_isa)isa), mm_dtype_name(pairs[i].a), mm_dtype_name(pairs[i].w),
                             mm_cpu_supports((mm_isa)isa) ? "MEGAMOE_ISA caps the ISA" : "the CPU lacks it");
                continue;
            }
            const mm_gemm_kernel *fast = mm_gemm_kernel_lookup((mm_isa)isa, pairs[i].a, pairs[i].w);
            if (fast) {
                fast_kernels++;
                check_kernel(&pairs[i], fast);
            }
            /* The few-rows kernel of the ISA (chosen for small groups before the general one). */
            const mm_gemm_kernel *few = mm_gemm_kernel_lookup_few_rows((mm_isa)isa, pairs[i].a, pairs[i].w);
            if (few) {
                fast_kernels++;
                check_kernel(&pairs[i], few);
            }
        }
    }
    /* Selection: the registry's choice exists for every pair and is the best ISA allowed. */
    for (size_t i = 0; i < N_PAIRS; i++) {
        const mm_gemm_kernel *sel = mm_gemm_kernel_select(pairs[i].a, pairs[i].w);
        CHECK(sel != NULL);
        int best = MM_ISA_REF;
        for (int isa = MM_ISA_REF + 1; isa <= (int)mm_cpu_isa(); isa++)
            if (mm_gemm_kernel_lookup((mm_isa)isa, pairs[i].a, pairs[i].w)) best = isa;
        if (sel) CHECK_EQ_INT(sel->isa, best);
    }
    /* Per row count: a kernel of the pair from the highest allowed ISA whose kernels the rule in use
     * lets take that many rows (AMX from the rule's amx_min; profile thresholds only, no tune cache). */
    static const int64_t row_counts[] = {0, 1, 2, 3, 4, 7, 8, 16, 1000};
    const mm_gemm_kernel_config *cfg = mm_gemm_kernel_config_get();
    for (size_t i = 0; i < N_PAIRS; i++) {
        int cls = mm_kernel_class_of(pairs[i].a, pairs[i].w);
        CHECK(cls >= 0);
        if (cls < 0 || cfg->rules[cls].n_steps > 0) continue;
        for (size_t j = 0; j < sizeof row_counts / sizeof row_counts[0]; j++) {
            int64_t rows = row_counts[j];
            const mm_gemm_kernel *sel = mm_gemm_kernel_select_rows(pairs[i].a, pairs[i].w, rows);
            int best = MM_ISA_REF;
            for (int isa = MM_ISA_REF + 1; isa <= (int)mm_cpu_isa(); isa++) {
                const mm_gemm_kernel *general = mm_gemm_kernel_lookup((mm_isa)isa, pairs[i].a, pairs[i].w);
                const mm_gemm_kernel *few =
                    mm_gemm_kernel_lookup_few_rows((mm_isa)isa, pairs[i].a, pairs[i].w);
                int takes = general || few;
                if (isa == MM_ISA_AMX)
                    takes = cfg->profile->amx && ((general && rows >= cfg->rules[cls].amx_min) ||
                                                  (few && rows <= cfg->rules[cls].amx_few_max));
                if (takes) best = isa;
            }
            CHECK(sel != NULL && sel->isa == (mm_isa)best);
        }
    }
    CHECK(mm_gemm_kernel_select(MM_DTYPE_BF16, MM_DTYPE_I8) == NULL);
    CHECK(mm_gemm_kernel_select(MM_DTYPE_INVALID, MM_DTYPE_BF16) == NULL);
    printf("cpu isa %s, %d non-reference kernels tested\n", mm_isa_name(mm_cpu_isa()), fast_kernels);
    return mm_test_finish("test_gemm_kernels");
}
