/* tests/test_gemm_amx_kblocks.c: the AMX kernels that read the packed panel directly (INT8 x INT8, BF16 x
 * BF16) run over K blocks of 2048 (grouped.c, AMX_KC) instead of MM_GEMM_KC, and the INT8 x INT4 one over
 * blocks of 512 (its panel decoded to INT8 fills the prepared buffer), so their accumulators cross block
 * boundaries through `partial` only beyond those K. Checked here on K just below, at and above one and
 * two block boundaries, with 16, 21 and 33 rows (one A tile, 2 x 2 tiles, a full 32-row tile plus one
 * row) and a partial panel: INT8 and INT4 bit for bit
 * against the exact expectation (int64 sum, the spec's F32 scaling), BF16 within the documented bound
 * 2 K 2^-24 sum |a w| of the float64 sum; and the result must not depend on the thread count. Skipped
 * (and says so) when AMX is not allowed (hardware, or MEGAMOE_ISA). */
#include <math.h>
#include <stdio.h>

#include "core/parallel.h"
#include "gemm/kernel_registry.h"
#include "gemm/kernels/kernels.h"
#include "test_gemm_common.h"

static void check(mm_dtype dtype, mm_dtype w_dtype, int64_t rows, int64_t k, int64_t n, uint64_t seed) {
    const mm_gemm_kernel *amx = mm_gemm_kernel_lookup(MM_ISA_AMX, dtype, w_dtype);
    CHECK(amx != NULL);
    if (!amx) return;
    gemm_case c;
    gemm_case_make(&c, dtype, w_dtype, rows, k, n, (int)(seed & 1), (int)((seed >> 1) & 1), seed);
    mm_error err;
    mm_gemm_weight_desc desc = gemm_case_weights(&c);
    mm_gemm_packed_weights *w = NULL;
    CHECK_OK(mm_gemm_pack_weights(&desc, &w, &err), &err);
    float *out = calloc((size_t)(rows * n), sizeof *out);
    float *out_one = calloc((size_t)(rows * n), sizeof *out_one);
    if (!w || !out || !out_one) goto done;
    mm_gemm_group g = gemm_case_group(&c, w, out, n);
    mm_gemm_options opts = {amx, NULL, NULL};
    int threads = mm_parallel_num_threads();
    mm_parallel_set_num_threads(3);
    CHECK_OK(mm_gemm_grouped(dtype, 1, &g, &opts, &err), &err);
    g.c = out_one;
    mm_parallel_set_num_threads(1);
    CHECK_OK(mm_gemm_grouped(dtype, 1, &g, &opts, &err), &err);
    mm_parallel_set_num_threads(threads);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            double value, abs_sum;
            float exact;
            gemm_case_expect(&c, r, j, &value, &abs_sum, &exact);
            float got = out[r * n + j];
            int ok = dtype == MM_DTYPE_I8 ? gemm_f32_bits(got) == gemm_f32_bits(exact)
                                          : fabs((double)got - value) <= 2 * gemm_f32_sum_bound(k, abs_sum);
            ok = ok && gemm_f32_bits(got) == gemm_f32_bits(out_one[r * n + j]);
            if (!ok && bad++ == 0)
                fprintf(stderr, "%s K=%lld rows=%lld: c[%lld][%lld] = %.9g (1 thread %.9g), expected %.9g\n",
                        amx->name, (long long)k, (long long)rows, (long long)r, (long long)j, got,
                        out_one[r * n + j], dtype == MM_DTYPE_I8 ? exact : value);
        }
    CHECK_EQ_INT(bad, 0);
done:
    free(out);
    free(out_one);
    mm_gemm_packed_free(w);
    gemm_case_free(&c);
}

int main(void) {
    if (mm_cpu_isa() < MM_ISA_AMX) {
        /* No AMX (or MEGAMOE_ISA caps it): the registry must not choose an AMX kernel. */
        const mm_gemm_kernel *k = mm_gemm_kernel_select_rows(MM_DTYPE_I8, MM_DTYPE_I8, 1000);
        CHECK(k != NULL && k->isa < MM_ISA_AMX);
        printf("AMX not allowed: skipped (the registry does not choose an AMX kernel, checked)\n");
        return mm_test_finish("test_gemm_amx_kblocks");
    }
    static const int64_t ks[] = {2047, 2048, 2049, 4095, 4097, 4161};
    static const int64_t rows_list[] = {16, 21, 33};
    uint64_t seed = 5;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
            check(MM_DTYPE_I8, MM_DTYPE_I8, rows_list[ri], ks[ki], 33, seed++);
            check(MM_DTYPE_BF16, MM_DTYPE_BF16, rows_list[ri], ks[ki], 33, seed++);
        }
    static const int64_t ks_int4[] = {511, 512, 513, 1023, 1025, 1500};
    for (size_t ki = 0; ki < sizeof ks_int4 / sizeof ks_int4[0]; ki++)
        for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
            check(MM_DTYPE_I8, MM_DTYPE_INT4, rows_list[ri], ks_int4[ki], 33, seed++);
    return mm_test_finish("test_gemm_amx_kblocks");
}
