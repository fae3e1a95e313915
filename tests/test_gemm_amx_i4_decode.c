/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_amx_i4_decode.c: the INT4 panel decoder of the AMX INT8 x INT4 kernel
 * (mm_prepare_panel_i4_amx, i8_amx_avx512.c) is plain AVX-512 (vpshufb, no tile instruction), so it is
 * checked on every AVX-512 CPU, AMX or not: each K block of every panel, decoded into the INT8 quad layout
 * the AMX tile loads (gemm/packed.h: per K quad 32 columns x 4 bytes), must hold the signed value of the
 * weight as the test wrote it in the API form (gemm_case: the int_w values), and 0 in the padding (K
 * beyond the end of its group of 8, columns beyond N). Blocks of MM_GEMM_KC and of the kernel's own K
 * (one block over the whole K), K ending inside a group of 8, N ending inside a panel, both storage
 * orders. */
#include <stdlib.h>

#include "core/cpu.h"
#include "gemm/kernel_registry.h"
#include "gemm/kernels/kernels.h"
#include "gemm/packed.h"
#include "test_gemm_common.h"

static void check(int64_t k, int64_t n, int transposed, int64_t kc, uint64_t seed) {
    gemm_case c;
    gemm_case_make(&c, MM_DTYPE_I8, MM_DTYPE_INT4, 1, k, n, transposed, 1, seed);
    mm_error err;
    mm_gemm_weight_desc desc = gemm_case_weights(&c);
    mm_gemm_packed_weights *w = NULL;
    CHECK_OK(mm_gemm_pack_weights(&desc, &w, &err), &err);
    /* The decoder writes whole groups of 8 K (256 bytes each), 64-byte aligned stores. */
    size_t block_bytes = (size_t)((kc + 7) / 8) * 256;
    uint8_t *block = aligned_alloc(64, block_bytes);
    int bad = 0;
    for (int64_t panel = 0; w && block && panel < w->n_panels; panel++)
        for (int64_t k_begin = 0; k_begin < k; k_begin += kc) {
            mm_ukernel_args args = {0};
            args.k = k, args.k_begin = k_begin, args.k_end = k - k_begin < kc ? k : k_begin + kc;
            args.w_dtype = MM_DTYPE_INT4, args.b = mm_packed_panel(w, panel);
            memset(block, 0x5A, block_bytes);
#if MM_X86_KERNELS
            mm_prepare_panel_i4_amx(&args, block);
#endif
            int64_t k_stop = (args.k_end + 7) / 8 * 8; /* the decoded groups */
            for (int64_t kk = k_begin; kk < k_stop; kk++)
                for (int col = 0; col < MM_GEMM_NR; col++) {
                    int64_t j = panel * MM_GEMM_NR + col;
                    int want = kk < k && j < n ? (int)c.int_w[kk * n + j] : 0;
                    int got = (int8_t)block[((kk - k_begin) / 4) * 128 + col * 4 + (kk & 3)];
                    if (got != want && bad++ < 5)
                        mm_test_report_fail(
                            __FILE__, __LINE__,
                            "K %lld N %lld kc %lld: panel %lld k %lld col %d: %d, expected %d", (long long)k,
                            (long long)n, (long long)kc, (long long)panel, (long long)kk, col, got, want);
                }
        }
    CHECK(block != NULL);
    CHECK_EQ_INT(bad, 0);
    free(block);
    mm_gemm_packed_free(w);
    gemm_case_free(&c);
}

int main(void) {
    if (mm_cpu_isa() < MM_ISA_AVX512) {
        mm_test_skip("amx INT4 panel decoder (mm_prepare_panel_i4_amx): not run, %s",
                     mm_cpu_supports(MM_ISA_AVX512) ? "MEGAMOE_ISA caps the ISA" : "the CPU lacks AVX-512");
        /* what can be checked here: the registry keeps to the level in use (no AMX INT8 x INT4 kernel) */
        const mm_gemm_kernel *k = mm_gemm_kernel_select(MM_DTYPE_I8, MM_DTYPE_INT4);
        CHECK(k != NULL && k->isa <= mm_cpu_isa());
        return mm_test_finish_skipped("test_gemm_amx_i4_decode");
    }
    uint64_t seed = 11;
    static const int64_t ks[] = {8, 13, MM_GEMM_KC, MM_GEMM_KC + 5, 3 * MM_GEMM_KC + 64};
    static const int64_t ns[] = {32, 45, 70};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (int transposed = 0; transposed < 2; transposed++) {
                check(ks[ki], ns[ni], transposed, MM_GEMM_KC, seed++);
                check(ks[ki], ns[ni], transposed, ks[ki], seed++); /* one block: the kernel's own kc */
            }
    return mm_test_finish("test_gemm_amx_i4_decode");
}
