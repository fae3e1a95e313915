/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_mx_decode.c: the panel decoding of the MX kernels (prepare_panel), exhaustively over
 * every FP8/FP4 code and over scale bytes inside and outside the range where scaling is an exponent
 * addition (0, 1, 9, 10, 16, 17, 100, 127, 200, 239, 240, 246, 247, 252, 253, 254, 255), so both the
 * fast and the slow path are pinned (also with the NaN/Inf codes replaced, since they send an FP8 block of
 * the AMX decoder to its slow path), for the AVX-512 and the AMX decoders, and the AMX kernels' activation
 * rows against the scalar row conversion. The AMX decoders are AVX-512 VBMI code without a tile
 * instruction, so they run on every AVX-512 VBMI CPU, with AMX or not. Expected values are computed here
 * in float64 from the scalar decoders of megamoe/formats.h: v = decode(q) * 2^(b-127), as BF16 (values below
 * 2^-126 flushed to zero, as vcvtne2ps2bf16 does; beyond the F32 range Inf; NaN stays NaN). */
#include <math.h>

#include "core/cpu.h"
#include "gemm/kernel_registry.h"
#include "gemm/kernels/kernels.h"
#include "gemm/packed.h"
#include "test_gemm_common.h"

static const uint8_t scale_bytes[] = {0,   1,   9,   10,  16,  17,  100, 127, 200,
                                      239, 240, 246, 247, 252, 253, 254, 255};
#define N_SCALES ((int)(sizeof scale_bytes / sizeof scale_bytes[0]))

/* Expected BF16 pattern of q * 2^(b-127); returns 0 when the expectation is "any NaN" (sets *nan). */
static uint16_t expected_bf16(mm_dtype w, uint32_t code, uint8_t b, int *nan) {
    double d = gemm_decode(w, code);
    *nan = 0;
    if (isnan(d) || b == 0xFF) {
        *nan = 1;
        return 0;
    }
    double v = d * ldexp(1.0, (int)b - 127);
    uint16_t sign = signbit(d) ? 0x8000 : 0;
    if (isinf(v) || fabs(v) >= ldexp(1.0, 128)) return sign | 0x7F80;
    if (fabs(v) < ldexp(1.0, -126)) return sign; /* zero, or flushed */
    return mm_f32_to_bf16((float)v);             /* exact: at most 4 significant bits */
}

/* Code of element (k, c): (k * 32 + c) % codes, so every block holds every code; with `finite`, NaN/Inf
 * codes are replaced by finite ones (code ^ 8), so that FP8 blocks can take the AMX decoder's fast path
 * (a block with a NaN/Inf code takes its slow path). */
static uint32_t code_of(mm_dtype w_dtype, int64_t k, int c, int finite) {
    uint32_t code = (uint32_t)((k * 32 + c) % (mm_format_is_nibble(w_dtype) ? 16 : 256));
    if (finite && !isfinite(gemm_decode(w_dtype, code))) code ^= 8;
    return code;
}

/* The AMX kernels' weight decoder (mx_decode_avx512.h) is AVX-512 + VBMI code, no tile instruction:
 * where the CPU has those but no AMX, it runs as a stand-in kernel holding only it (the AMX kernel's
 * prepare_panel), so the decoder is checked on every AVX-512 VBMI CPU. NULL where it cannot run. */
static const mm_gemm_kernel *amx_decoder(mm_dtype w_dtype, mm_gemm_kernel *stand_in) {
    if (mm_cpu_isa() >= MM_ISA_AMX) return mm_gemm_kernel_lookup(MM_ISA_AMX, w_dtype, w_dtype);
    if (mm_cpu_isa() < MM_ISA_AVX512 || !mm_cpu_has_avx512_vbmi()) return NULL;
    memset(stand_in, 0, sizeof *stand_in);
    stand_in->name = "amx mx weight decoder (mx_decode_avx512.h) on avx512, no amx";
    stand_in->isa = MM_ISA_AMX;
    stand_in->prepare_panel = w_dtype == MM_DTYPE_FP4_E2M1 ? MM_X86_ONLY(mm_prepare_panel_fp4_vbmi)
                                                           : MM_X86_ONLY(mm_prepare_panel_fp8_vbmi);
    return stand_in->prepare_panel ? stand_in : NULL;
}

/* zero_any_sign: the decoder may give +0 for a zero weight of either sign (the VBMI decoder). */
static void check_format(const mm_gemm_kernel *kernel, mm_dtype w_dtype, int finite, int zero_any_sign) {
    if (!kernel || !kernel->prepare_panel) return;
    mm_error err_storage, *err = &err_storage;
    int64_t n = MM_GEMM_NR, k = 32 * N_SCALES, pairs = (k + 63) / 64;
    /* Stored (N, K), element (k, c) holds code_of(k, c). */
    int64_t row_bytes = mm_dtype_row_bytes(w_dtype, k);
    uint8_t *data = calloc((size_t)(n * row_bytes), 1);
    uint8_t *mx = calloc((size_t)(n * pairs * 2), 1);
    for (int64_t c = 0; c < n; c++) {
        for (int64_t i = 0; i < k; i++)
            gemm_put(w_dtype, data + c * row_bytes, i, code_of(w_dtype, i, (int)c, finite));
        /* Column c of block g: the scale list, rotated by column so each block mixes fast and slow. */
        for (int g = 0; g < N_SCALES; g++) mx[c * pairs * 2 + g] = scale_bytes[(g + (c % 2) * 7) % N_SCALES];
    }
    mm_gemm_weight_desc d = {
        .dtype = w_dtype, .k = k, .n = n, .transposed = 1, .data = data, .mx_scales = mx};
    mm_gemm_packed_weights *w = NULL;
    CHECK_OK(mm_gemm_pack_weights(&d, &w, err), err);
    _Alignas(64) uint8_t block[MM_GEMM_PREPARED_BLOCK_BYTES];
    int bad = 0, checked = 0;
    for (int64_t k_begin = 0; w && k_begin < k; k_begin += MM_GEMM_KC) {
        mm_ukernel_args args = {0};
        args.k = k, args.k_begin = k_begin, args.k_end = k - k_begin < MM_GEMM_KC ? k : k_begin + MM_GEMM_KC;
        args.w_dtype = w_dtype, args.b = mm_packed_panel(w, 0);
        args.b_mx_scale = w->mx_scale, args.b_mx_e8m0 = w->mx_scale_e8m0;
        kernel->prepare_panel(&args, block);
        for (int64_t kk = k_begin; kk < args.k_end; kk++)
            for (int c = 0; c < n; c++) {
                uint16_t got;
                memcpy(&got, block + 2 * ((((kk - k_begin) >> 1) * MM_GEMM_NR + c) * 2 + (kk & 1)), 2);
                int nan;
                uint16_t want = expected_bf16(w_dtype, code_of(w_dtype, kk, c, finite),
                                              mx[c * pairs * 2 + kk / 32], &nan);
                /* The VBMI decoder gives +0 for a zero weight of either sign (mx_decode_avx512.h: the sign
                 * of a zero product changes no sum); everything else bit for bit. */
                int zero_either_sign = zero_any_sign && (want & 0x7FFF) == 0 && (got & 0x7FFF) == 0;
                int ok =
                    nan ? (got & 0x7F80) == 0x7F80 && (got & 0x7F) != 0 : got == want || zero_either_sign;
                checked++;
                if (!ok && bad++ < 5)
                    mm_test_report_fail(
                        __FILE__, __LINE__,
                        "%s: k %lld col %d code 0x%x scale %u: bf16 0x%04x, expected 0x%04x%s", kernel->name,
                        (long long)kk, c, code_of(w_dtype, kk, c, finite), mx[c * pairs * 2 + kk / 32], got,
                        want, nan ? " (NaN)" : "");
            }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(checked, k * n);
    mm_gemm_packed_free(w);
    free(data);
    free(mx);
}

/* The AMX kernels' activation rows (mm_gemm_mx_row_to_bf16_vbmi) against the scalar conversion
 * (mm_gemm_mx_row_to_bf16): every code under every scale byte, an odd K with a tail shorter than the
 * vector step, bit for bit except that a zero of either sign may come out as +0. */
static void check_rows(mm_dtype a_dtype, int finite) {
    void (*row_amx)(mm_dtype, const uint8_t *, const uint8_t *, int64_t, uint16_t *) =
        MM_X86_ONLY(mm_gemm_mx_row_to_bf16_vbmi);
    /* AVX-512 + VBMI code (no tile instruction): runs without AMX too. */
    if (!row_amx || mm_cpu_isa() < MM_ISA_AVX512 || !mm_cpu_has_avx512_vbmi()) return;
    int64_t k = 64 * 2 * N_SCALES + 37, blocks = (k + 31) / 32;
    int64_t row_bytes = mm_dtype_row_bytes(a_dtype, k);
    uint8_t *row = calloc((size_t)row_bytes, 1), *scales = calloc((size_t)blocks, 1);
    uint16_t *want = calloc((size_t)k + 1, 2), *got = calloc((size_t)k + 1, 2);
    for (int64_t i = 0; i < k; i++)
        gemm_put(a_dtype, row, i, code_of(a_dtype, i / 32, (int)(i % 32), finite));
    /* Both blocks of a 64-value step get every scale byte (pairs (b, b) and (b, next b)). */
    for (int64_t g = 0; g < blocks; g++)
        scales[g] = scale_bytes[(g / 2 + (g % 2) * (g / (2 * N_SCALES))) % N_SCALES];
    mm_gemm_mx_row_to_bf16(a_dtype, row, scales, k, want);
    row_amx(a_dtype, row, scales, k, got);
    int bad = 0;
    for (int64_t i = 0; i < k + (k & 1); i++) {
        int ok = got[i] == want[i] || ((got[i] & 0x7FFF) == 0 && (want[i] & 0x7FFF) == 0);
        if (!ok && bad++ < 5)
            mm_test_report_fail(__FILE__, __LINE__,
                                "%s row: value %lld scale %u: bf16 0x%04x, expected 0x%04x",
                                mm_dtype_name(a_dtype), (long long)i, scales[i / 32], got[i], want[i]);
    }
    CHECK_EQ_INT(bad, 0);
    free(row), free(scales), free(want), free(got);
}

int main(void) {
    if (mm_cpu_isa() < MM_ISA_AVX512 || !mm_cpu_has_avx512_vbmi())
        mm_test_skip("amx mx decoders (activation rows mm_gemm_mx_row_to_bf16_vbmi, weight panels "
                     "mx_decode_avx512.h): not run, %s",
                     mm_cpu_isa() < MM_ISA_AVX512 ? "no AVX-512 in use" : "the CPU lacks AVX-512 VBMI");
    if (mm_cpu_isa() < MM_ISA_AVX512) {
        /* No vector decoder in use (not x86-64, no AVX-512, or MEGAMOE_ISA=ref caps the level): the
         * registry must choose the portable kernel for every MX pair, and offer no vector one where the
         * CPU lacks AVX-512. */
        static const mm_dtype mx[] = {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1};
        for (int i = 0; i < 3; i++) {
            if (!mm_cpu_supports(MM_ISA_AVX512))
                CHECK(mm_gemm_kernel_lookup(MM_ISA_AVX512, mx[i], mx[i]) == NULL);
            const mm_gemm_kernel *k = mm_gemm_kernel_select(mx[i], mx[i]);
            CHECK(k != NULL && k->isa == MM_ISA_REF);
        }
        printf("vector decoders not in use: the registry chooses the portable MX kernels (checked)\n");
    }
    for (int finite = 0; finite < 2; finite++) {
        check_rows(MM_DTYPE_FP8_E4M3FN, finite);
        check_rows(MM_DTYPE_FP8_E5M2, finite);
        check_rows(MM_DTYPE_FP4_E2M1, finite);
    }
    /* The AVX-512 MX kernels' decoder as registered (mx_avx512.c: the VBMI one where the CPU has VBMI), the
     * decoder they use without VBMI on its own (bit for bit, -0 included), and the AMX one
     * (mx_decode_avx512.h), on AMX or, without AMX, on its own (amx_decoder). */
    static const mm_dtype formats[] = {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1};
    if (mm_cpu_isa() < MM_ISA_AVX512 || !mm_gemm_kernel_lookup(MM_ISA_AVX512, formats[0], formats[0]))
        mm_test_skip("avx512 MX weight decoder: not run, %s",
                     mm_cpu_supports(MM_ISA_AVX512) ? "MEGAMOE_ISA caps the ISA" : "the CPU lacks it");
    for (int finite = 0; finite < 2; finite++)
        for (int f = 0; f < 3; f++) {
            mm_gemm_kernel stand_in, exact_avx512 = {0};
            if (mm_cpu_isa() >= MM_ISA_AVX512) {
                check_format(mm_gemm_kernel_lookup(MM_ISA_AVX512, formats[f], formats[f]), formats[f], finite,
                             mm_cpu_has_avx512_vbmi());
                exact_avx512.name = "avx512 mx weight decoder without vbmi (weight_only_decode_avx512.h)";
                exact_avx512.isa = MM_ISA_AVX512;
                exact_avx512.prepare_panel = formats[f] == MM_DTYPE_FP4_E2M1
                                                 ? MM_X86_ONLY(mm_prepare_panel_fp4_avx512)
                                                 : MM_X86_ONLY(mm_prepare_panel_fp8_avx512);
                check_format(&exact_avx512, formats[f], finite, 0);
            }
            check_format(amx_decoder(formats[f], &stand_in), formats[f], finite, 1);
        }
    return mm_test_finish("test_gemm_mx_decode");
}
