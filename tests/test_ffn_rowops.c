/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ffn_rowops.c: the row kernels of src/ffn/rowops.h keep the numerics: the AVX-512 table
 * gives the same bits as the portable one on random rows with NaN, infinities, rounding ties and every
 * tail length 0..80; the portable one matches hand-computed BF16 patterns; the INT8 row quantizers
 * (div-away, mul-even with both scale forms) of both tables equal formats.h's (q and scale) on ties,
 * denormals, NaN / Inf and zero rows; the activations' exp is within 2 ulps. Moved from
 * test_mega_moe_schedule.c with the kernels. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/cpu.h"
#include "ffn/activation.h"
#include "ffn/rowops.h"
#include "megamoe/formats.h"
#include "testlib.h"

/* ---- row kernels -------------------------------------------------------------------------------- */

static float f32_of(uint32_t bits) {
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_rowops_hand_values(void) {
    const mm_rowops *p = mm_rowops_portable();
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (0x3F80); 1 + 3 * 2^-8 ties up to 0x3F82;
     * 0x3F80_8001 is above the tie: 0x3F81; -0 stays -0; +inf stays; the largest finite F32 rounds to
     * +inf (0x7F80). */
    const uint32_t in[6] = {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x80000000u, 0x7F800000u, 0x7F7FFFFFu};
    const uint16_t want[6] = {0x3F80, 0x3F82, 0x3F81, 0x8000, 0x7F80, 0x7F80};
    float src[6];
    uint16_t out[6];
    for (int i = 0; i < 6; i++) src[i] = f32_of(in[i]);
    p->to_bf16(out, src, 6);
    for (int i = 0; i < 6; i++) CHECK_EQ_HEX(out[i], want[i]);
    /* acc += w * o with a separately rounded product: 1 + 0.5 * 3 = 2.5; acc += o: 2.5 + 1 = 3.5 */
    float acc[3] = {1.0f, -2.0f, 0.0f};
    const uint16_t o[3] = {0x4040 /* 3 */, 0x3F80 /* 1 */, 0xBF80 /* -1 */};
    p->axpy_bf16(acc, 0.5f, o, 3);
    CHECK(acc[0] == 2.5f && acc[1] == -1.5f && acc[2] == -0.5f);
    p->add_bf16(acc, o, 3);
    CHECK(acc[0] == 5.5f && acc[1] == -0.5f && acc[2] == -1.5f);
    float v[2] = {f32_of(0x3F818000u), 1.0f};
    p->round_bf16(v, 2);
    CHECK_EQ_HEX(bits_of(v[0]), 0x3F820000u);
}

static uint32_t random_f32_bits(uint64_t *st) {
    uint64_t r = mm_test_rand_u64(st);
    switch (r % 8) {
    case 0: return 0x7FC00000u | (uint32_t)(r >> 40 & 0x3FFFFF) | (uint32_t)(r >> 8 & 1) << 31; /* NaN */
    case 1: return (r >> 8 & 1) ? 0xFF800000u : 0x7F800000u;                                    /* inf */
    case 2: return ((uint32_t)(r >> 16) & 0xFFFF0000u) | 0x8000u;                               /* tie */
    default: return (uint32_t)(r >> 16) & 0xBFFFFFFFu; /* finite, mostly moderate */
    }
}

static void test_rowops_avx512_same_bits(void) {
    if (mm_cpu_isa() < MM_ISA_AVX512) {
        printf("  rowops: no AVX-512 here, portable table only\n");
        return;
    }
    const mm_rowops *p = mm_rowops_portable(), *v = MM_X86_ONLY(&mm_rowops_avx512_table);
    CHECK(mm_rowops_get() == v);
    uint64_t st = 99;
    enum { N = 80 };
    for (int n = 0; n <= N; n++) {
        float src[N + 1], a1[N + 1], a2[N + 1];
        uint16_t o[N + 1], b1[N + 1], b2[N + 1];
        for (int i = 0; i < n; i++) {
            src[i] = f32_of(random_f32_bits(&st));
            a1[i] = a2[i] = f32_of(random_f32_bits(&st));
            o[i] = (uint16_t)(random_f32_bits(&st) >> 16);
        }
        b1[n] = b2[n] = 0xABCD; /* past the end: untouched */
        p->to_bf16(b1, src, n);
        v->to_bf16(b2, src, n);
        for (int i = 0; i <= n; i++) CHECK_EQ_HEX(b1[i], b2[i]);
        float w = f32_of(random_f32_bits(&st) & 0xBFFFFFFFu);
        p->axpy_bf16(a1, w, o, n);
        v->axpy_bf16(a2, w, o, n);
        p->add_bf16(a1, o, n);
        v->add_bf16(a2, o, n);
        p->round_bf16(a1, n);
        v->round_bf16(a2, n);
        /* Same bits, except that which NaN payload an F32 add or multiply of two NaNs passes on is the
         * hardware's operand order, which the compiler may swap: there only NaN-ness must agree. */
        for (int i = 0; i < n; i++) {
            if (isnan(a1[i]) && isnan(a2[i])) continue;
            CHECK_EQ_HEX(bits_of(a1[i]), bits_of(a2[i]));
        }
    }
}

/* The INT8 quantizers of the tables against formats.h (the portable table calls it): q and scale bit
 * for bit, both rounding rules and both mul-even scale forms, on random rows of several magnitudes, rows of
 * exact ties (amax 127 so that t = x), rows with NaN / Inf / only zeros, tiny rows whose scale underflows,
 * every length 0..80. */
static void test_int8_quantize_same_bits(void) {
    const mm_rowops *tables[2] = {mm_rowops_portable(), MM_X86_ONLY(&mm_rowops_avx512_table)};
    int n_tables = mm_cpu_isa() >= MM_ISA_AVX512 ? 2 : 1;
    uint64_t st = 7;
    enum { N = 80 };
    for (int kind = 0; kind < 7; kind++)
        for (int n = 0; n <= N; n++) {
            float x[N + 1];
            for (int i = 0; i < n; i++) {
                uint64_t r = mm_test_rand_u64(&st);
                float u = (float)((double)(r >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
                switch (kind) {
                case 0: x[i] = u; break;
                case 1: x[i] = u * 3e4f; break;
                case 2: x[i] = (float)((int)(r % 255) - 127) + ((r >> 20) & 1 ? 0.5f : 0.0f); break;
                case 3: x[i] = u * 1e-40f; break; /* denormal amax: s underflows */
                case 4: x[i] = i == n / 2 ? NAN : u; break;
                case 5: x[i] = i == n / 3 ? -INFINITY : u; break;
                default: x[i] = (r & 3) ? 0.0f : -0.0f; break;
                }
            }
            if (kind == 2 && n > 0) x[0] = 127.0f; /* amax 127: t = x exactly, ties at .5 */
            /* rule 0: div-away; 1: mul-even, scale amax / 127 (GEMM2 input); 2: mul-even, scale 1 / m
             * (Dispatch V3) */
            for (int rule = 0; rule < 3; rule++) {
                mm_int8_scale_form form = rule == 2 ? MM_INT8_SCALE_INV_MUL : MM_INT8_SCALE_AMAX_DIV_127;
                int8_t want[N + 1], got[N + 1];
                float s_want = 0, s_got = 0;
                want[n] = got[n] = 0x5A;
                if (rule)
                    mm_int8_quantize_row_mul_even(x, n, form, want, &s_want);
                else
                    mm_int8_quantize_row_div_away(x, n, want, &s_want);
                for (int t = 0; t < n_tables; t++) {
                    memset(got, 0x5A, sizeof got);
                    s_got = 0;
                    if (rule)
                        tables[t]->int8_mul_even(x, n, form, got, &s_got);
                    else
                        tables[t]->int8_div_away(x, n, got, &s_got);
                    CHECK_EQ_HEX(bits_of(s_want), bits_of(s_got));
                    for (int i = 0; i <= n; i++) CHECK_EQ_HEX((uint8_t)want[i], (uint8_t)got[i]);
                }
            }
        }
    /* from_bf16 is the exact widening. */
    for (int t = 0; t < n_tables; t++) {
        uint16_t b[37];
        float f[38];
        for (int i = 0; i < 37; i++) b[i] = (uint16_t)(mm_test_rand_u64(&st) >> 48);
        f[37] = 3.0f;
        tables[t]->from_bf16(f, b, 37);
        for (int i = 0; i < 37; i++) CHECK_EQ_HEX(bits_of(f[i]), (uint32_t)b[i] << 16);
        CHECK(f[37] == 3.0f);
    }
}

/* mm_ffn_exp_f32 against exp in double over [-87, 88] (and the saturation beyond): within 2 ulps. */
static void test_exp_accuracy(void) {
    double worst = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.01171875f) {
        double want = exp((double)x), got = (double)mm_ffn_exp_f32(x);
        double ulp = (double)(nextafterf((float)want, INFINITY) - (float)want);
        double d = fabs(got - want) / ulp;
        if (d > worst) worst = d;
    }
    CHECK(worst <= 2.0);
    printf("  exp: worst %.2f ulp on [-87, 88]\n", worst);
    CHECK(mm_ffn_exp_f32(0.0f) == 1.0f);
    CHECK(mm_ffn_exp_f32(1000.0f) == mm_ffn_exp_f32(88.0f));
    CHECK(mm_ffn_exp_f32(-1000.0f) == mm_ffn_exp_f32(-87.0f));
    CHECK(isnan(mm_ffn_exp_f32(NAN)));
    CHECK(mm_ffn_sigmoid_f32(-1000.0f) < 1e-37f && mm_ffn_sigmoid_f32(1000.0f) == 1.0f);
}

int main(void) {
    test_rowops_hand_values();
    test_rowops_avx512_same_bits();
    test_int8_quantize_same_bits();
    test_exp_accuracy();
    return mm_test_finish("test_ffn_rowops");
}
