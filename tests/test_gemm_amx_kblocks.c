/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_amx_kblocks.c: the AMX kernels run over K blocks of their own kc (kernel.h; 2048 for
 * the kernels that read the packed panel directly, other sizes for those that decode it first), so their
 * accumulators cross block boundaries through `partial` only beyond that K. Checked here for every AMX
 * pair on K just below, at and above one and two block boundaries, with 16, 21 and 33 rows (one A tile,
 * 2 x 2 tiles, a full 32-row tile plus one row; the MX few-rows AMX kernel with 1, 5 and 16 rows) and a
 * partial panel: INT pairs bit for bit against the
 * exact expectation (int64 sum, the spec's F32 scaling), float pairs within the documented bound
 * 2 K 2^-24 sum |a w| of the float64 sum. The result must not depend on the thread count, nor on the
 * block size: the same kernel with kc = MM_GEMM_KC (the framework's fallback when a thread's scratch
 * cannot grow) must give the same bits. Without AMX (hardware, or MEGAMOE_ISA) the AMX kernels are named
 * as not run; the AMX MX kernels' decoders and K blocks, which are AVX-512 VBMI code, still run on a
 * stand-in kernel with the AVX-512 MX tile (check_amx_decoders_standin); with no AVX-512 VBMI either, the
 * test reports itself skipped. The AVX-512 INT kernels (general and few-rows INT4) also take K blocks beyond
 * MM_GEMM_KC (MM_GEMM_AVX512_INT_KC) and are checked the same way whenever AVX-512 is allowed. */
#include <math.h>
#include <stdio.h>

#include "core/parallel.h"
#include "gemm/kernel_registry.h"
#include "gemm/kernels/kernels.h"
#include "test_gemm_common.h"

static void check(mm_dtype dtype, mm_dtype w_dtype, const mm_gemm_kernel *amx, int64_t rows, int64_t k,
                  int64_t n, uint64_t seed) {
    gemm_case c;
    gemm_case_make(&c, dtype, w_dtype, rows, k, n, (int)(seed & 1), (int)((seed >> 1) & 1), seed);
    mm_error err;
    mm_gemm_weight_desc desc = gemm_case_weights(&c);
    mm_gemm_packed_weights *w = NULL;
    CHECK_OK(mm_gemm_pack_weights(&desc, &w, &err), &err);
    float *out = calloc((size_t)(rows * n), sizeof *out);
    float *out_one = calloc((size_t)(rows * n), sizeof *out_one);
    float *out_small = calloc((size_t)(rows * n), sizeof *out_small);
    if (!w || !out || !out_one || !out_small) goto done;
    mm_gemm_group g = gemm_case_group(&c, w, out, n);
    mm_gemm_options opts = {amx, NULL, NULL};
    int threads = mm_parallel_num_threads();
    mm_parallel_set_num_threads(3);
    CHECK_OK(mm_gemm_grouped(dtype, 1, &g, &opts, &err), &err);
    g.c = out_one;
    mm_parallel_set_num_threads(1);
    CHECK_OK(mm_gemm_grouped(dtype, 1, &g, &opts, &err), &err);
    mm_gemm_kernel small_blocks = *amx;
    small_blocks.kc = MM_GEMM_KC;
    opts.kernel = &small_blocks;
    g.c = out_small;
    CHECK_OK(mm_gemm_grouped(dtype, 1, &g, &opts, &err), &err);
    mm_parallel_set_num_threads(threads);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            double value;
            float got = out[r * n + j];
            int ok = gemm_case_output_ok(&c, r, j, got, 2, &value);
            ok = ok && gemm_f32_bits(got) == gemm_f32_bits(out_one[r * n + j]);
            ok = ok && gemm_f32_bits(got) == gemm_f32_bits(out_small[r * n + j]);
            if (!ok && bad++ == 0)
                fprintf(stderr,
                        "%s kc=%d K=%lld rows=%lld: c[%lld][%lld] = %.9g (1 thread %.9g, kc %d %.9g), "
                        "expected %.9g\n",
                        amx->name, amx->kc, (long long)k, (long long)rows, (long long)r, (long long)j, got,
                        out_one[r * n + j], MM_GEMM_KC, out_small[r * n + j], value);
        }
    CHECK_EQ_INT(bad, 0);
done:
    free(out);
    free(out_one);
    free(out_small);
    mm_gemm_packed_free(w);
    gemm_case_free(&c);
}

/* The AVX-512 INT kernels around their kc: 3, 9 and 17 rows (one partial 8-row tile, one or two full
 * tiles plus one row), the few-rows INT4 kernel with 1, 3 and 8 rows. */
static void check_avx512_int(uint64_t *seed) {
    static const mm_dtype w_dtypes[] = {MM_DTYPE_I8, MM_DTYPE_INT4};
    for (size_t wi = 0; wi < sizeof w_dtypes / sizeof w_dtypes[0]; wi++) {
        const mm_gemm_kernel *kernels[2] = {
            mm_gemm_kernel_lookup(MM_ISA_AVX512, MM_DTYPE_I8, w_dtypes[wi]),
            mm_gemm_kernel_lookup_few_rows(MM_ISA_AVX512, MM_DTYPE_I8, w_dtypes[wi])};
        CHECK(kernels[0] != NULL);
        CHECK(w_dtypes[wi] == MM_DTYPE_I8 || kernels[1] != NULL);
        for (int ki = 0; ki < 2; ki++) {
            const mm_gemm_kernel *k = kernels[ki];
            if (!k) continue;
            int64_t kc = k->kc > 0 ? k->kc : MM_GEMM_KC;
            const int64_t ks[] = {kc - 1, kc, kc + 1, 2 * kc + 65};
            const int64_t rows_general[] = {3, 9, 17}, rows_few[] = {1, 3, 8};
            const int64_t *rows = ki == 0 ? rows_general : rows_few;
            for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
                for (int ri = 0; ri < 3; ri++)
                    check(MM_DTYPE_I8, w_dtypes[wi], k, rows[ri], ks[i], 33, (*seed)++);
        }
    }
}

/* Without AMX, the AMX MX kernels' parts that are plain AVX-512 VBMI code: their activation-row and weight
 * decoders (mm_gemm_mx_row_to_bf16_vbmi, mm_prepare_panel_*_vbmi) and their K blocks of MM_GEMM_AMX_KC
 * (prepared blocks beyond the stack block, in the thread's scratch), on a stand-in kernel whose products
 * are the AVX-512 MX tile, which reads the same prepared BF16 pair layout as the AMX tile. Checked like
 * the AMX kernels (bound, thread count, kc = MM_GEMM_KC). Returns how many pairs ran. */
static int check_amx_decoders_standin(const mm_dtype (*pairs)[2], size_t n_pairs, uint64_t *seed) {
    if (mm_cpu_isa() < MM_ISA_AVX512 || !mm_cpu_has_avx512_vbmi()) return 0;
    int ran = 0;
    for (size_t pi = 0; pi < n_pairs; pi++) {
        mm_dtype a = pairs[pi][0], w = pairs[pi][1];
        const mm_gemm_kernel *base = mm_format_is_mx(a) ? mm_gemm_kernel_lookup(MM_ISA_AVX512, a, w) : NULL;
        if (!base) continue;
        mm_gemm_kernel stand_in = *base;
        stand_in.name = "amx mx decoders + avx512 mx tile (stand-in)";
        stand_in.prepare_rows = MM_X86_ONLY(mm_gemm_mx_row_to_bf16_vbmi);
        stand_in.prepare_panel = w == MM_DTYPE_FP4_E2M1 ? MM_X86_ONLY(mm_prepare_panel_fp4_vbmi)
                                                        : MM_X86_ONLY(mm_prepare_panel_fp8_vbmi);
        stand_in.kc = MM_GEMM_AMX_KC;
        const int64_t kc = MM_GEMM_AMX_KC, ks[] = {kc - 1, kc, kc + 1, 2 * kc - 1, 2 * kc + 65};
        const int64_t rows[] = {3, 9, 17};
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
                check(a, w, &stand_in, rows[ri], ks[ki], 33, (*seed)++);
        ran++;
    }
    return ran;
}

int main(void) {
    uint64_t seed = 5;
    if (mm_cpu_isa() >= MM_ISA_AVX512) check_avx512_int(&seed);
    static const mm_dtype pairs[][2] = {
        {MM_DTYPE_I8, MM_DTYPE_I8},
        {MM_DTYPE_BF16, MM_DTYPE_BF16},
        {MM_DTYPE_I8, MM_DTYPE_INT4},
        {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN},
        {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1},
        {MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1},
    };
    if (mm_cpu_isa() < MM_ISA_AMX) {
        /* No AMX (or MEGAMOE_ISA caps it): the registry must not choose an AMX kernel; every AMX
         * kernel this test exists for is named as not run, and CTest shows the test as skipped. */
        const mm_gemm_kernel *k = mm_gemm_kernel_select_rows(MM_DTYPE_I8, MM_DTYPE_I8, 1000);
        CHECK(k != NULL && k->isa < MM_ISA_AMX);
        int stand_ins = check_amx_decoders_standin(pairs, sizeof pairs / sizeof pairs[0], &seed);
        for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
            mm_test_skip("amx kernel %s x %s tile products (general and few-rows, K blocks): not run, %s%s",
                         mm_dtype_name(pairs[pi][0]), mm_dtype_name(pairs[pi][1]),
                         mm_cpu_supports(MM_ISA_AMX) ? "MEGAMOE_ISA caps the ISA below amx"
                                                     : "the CPU lacks AMX",
                         stand_ins && mm_format_is_mx(pairs[pi][0])
                             ? " (its decoders and K blocks ran on the avx512 stand-in)"
                         : pairs[pi][1] == MM_DTYPE_INT4 && mm_cpu_isa() >= MM_ISA_AVX512
                             ? " (its INT4 panel decoder runs in test_gemm_amx_i4_decode)"
                             : "");
        /* Skipped (CTest) only when nothing of the AMX code could run here. */
        return stand_ins ? mm_test_finish("test_gemm_amx_kblocks")
                         : mm_test_finish_skipped("test_gemm_amx_kblocks");
    }
    static const int64_t rows_list[] = {16, 21, 33};
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) {
        const mm_gemm_kernel *amx = mm_gemm_kernel_lookup(MM_ISA_AMX, pairs[pi][0], pairs[pi][1]);
        CHECK(amx != NULL);
        if (!amx) continue;
        int64_t kc = amx->kc > 0 ? amx->kc : MM_GEMM_KC;
        /* Around one and two block boundaries, and one short MX block past the second. */
        const int64_t ks[] = {kc - 1, kc, kc + 1, 2 * kc - 1, 2 * kc + 1, 2 * kc + 65};
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
                check(pairs[pi][0], pairs[pi][1], amx, rows_list[ri], ks[ki], 33, seed++);
        /* The pair's few-rows AMX kernel (MX: decode-sized groups), around its own kc. */
        const mm_gemm_kernel *few = mm_gemm_kernel_lookup_few_rows(MM_ISA_AMX, pairs[pi][0], pairs[pi][1]);
        if (!few) continue;
        int64_t few_kc = few->kc > 0 ? few->kc : MM_GEMM_KC;
        const int64_t few_ks[] = {few_kc - 1, few_kc, few_kc + 1, 2 * few_kc + 65};
        const int64_t few_rows[] = {1, 5, few->mr};
        for (size_t ki = 0; ki < sizeof few_ks / sizeof few_ks[0]; ki++)
            for (size_t ri = 0; ri < sizeof few_rows / sizeof few_rows[0]; ri++)
                check(pairs[pi][0], pairs[pi][1], few, few_rows[ri], few_ks[ki], 33, seed++);
    }
    return mm_test_finish("test_gemm_amx_kblocks");
}
