/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ffn_rowops.c: the row kernels of src/ffn/rowops.h keep the numerics: the AVX-512 table
 * gives the same bits as the portable one on random rows with NaN, infinities, rounding ties and every
 * tail length 0..80; the portable one matches hand-computed BF16 patterns; the INT8 row quantizers
 * (div-away, mul-even with both scale forms) of both tables equal formats.h's (q and scale) on ties,
 * denormals, NaN / Inf and zero rows; both tables (the AVX-512 one has its own rounding code) match
 * hand-computed BF16 ties and INT8 ties of both rules; the activations' exp is within 2 ulps. Moved from
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

/* The row tables this CPU can run: the portable one, and the AVX-512 one where allowed (its BF16
 * rounding and INT8 quantizers are vector code of their own, so each gets the hand-computed cases). */
static int row_tables(const mm_rowops *tables[2], const char *names[2]) {
    tables[0] = mm_rowops_portable(), names[0] = "portable";
    if (mm_cpu_isa() < MM_ISA_AVX512) {
        mm_test_skip("avx512 row kernels (BF16 rounding, INT8 quantizers) hand-computed ties: not run, %s",
                     mm_cpu_supports(MM_ISA_AVX512) ? "MEGAMOE_ISA caps the ISA" : "the CPU lacks AVX-512");
        return 1;
    }
    tables[1] = MM_X86_ONLY(&mm_rowops_avx512_table), names[1] = "avx512";
    return 2;
}

static void test_rowops_hand_values(void) {
    const mm_rowops *tables[2];
    const char *names[2];
    int n_tables = row_tables(tables, names);
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (0x3F80); 1 + 3 * 2^-8 ties up to 0x3F82;
     * 0x3F80_8001 is above the tie: 0x3F81; -0 stays -0; +inf stays; the largest finite F32 rounds to
     * +inf (0x7F80); the negative ties go to even as well (-1, -(1 + 2^-6)); 2^-126 (1 + 2^-8) ties down
     * to the smallest normal. Three copies of the nine: one full vector of 16 and a tail of 11. */
    enum { NV = 9, N = 3 * NV };
    const uint32_t in[NV] = {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x80000000u, 0x7F800000u,
                             0x7F7FFFFFu, 0xBF808000u, 0xBF818000u, 0x00808000u};
    const uint16_t want[NV] = {0x3F80, 0x3F82, 0x3F81, 0x8000, 0x7F80, 0x7F80, 0xBF80, 0xBF82, 0x0080};
    for (int t = 0; t < n_tables; t++) {
        const mm_rowops *p = tables[t];
        float src[N], v[N];
        uint16_t out[N + 1];
        for (int i = 0; i < N; i++) v[i] = src[i] = mm_test_f32_from_bits(in[i % NV]);
        out[N] = 0xABCD;
        p->to_bf16(out, src, N);
        p->round_bf16(v, N);
        int bad = 0;
        for (int i = 0; i < N; i++)
            if ((out[i] != want[i % NV] || mm_test_f32_bits(v[i]) != (uint32_t)want[i % NV] << 16) &&
                bad++ < 3)
                mm_test_report_fail(__FILE__, __LINE__,
                                    "%s: F32 0x%08x -> BF16 0x%04x, round 0x%08x, expected 0x%04x", names[t],
                                    in[i % NV], out[i], mm_test_f32_bits(v[i]), want[i % NV]);
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_HEX(out[N], 0xABCD);
        /* acc += w * o with a separately rounded product: 1 + 0.5 * 3 = 2.5; acc += o: 2.5 + 1 = 3.5 */
        float acc[3] = {1.0f, -2.0f, 0.0f};
        const uint16_t o[3] = {0x4040 /* 3 */, 0x3F80 /* 1 */, 0xBF80 /* -1 */};
        p->axpy_bf16(acc, 0.5f, o, 3);
        CHECK(acc[0] == 2.5f && acc[1] == -1.5f && acc[2] == -0.5f);
        p->add_bf16(acc, o, 3);
        CHECK(acc[0] == 5.5f && acc[1] == -0.5f && acc[2] == -1.5f);
    }
}

/* The INT8 row quantizers of every table on hand-computed ties: amax 127, so the scale is exactly 1 and
 * t = x for both rules (x / 1 and x * 1). Half away from zero (dispatch): 0.5 -> 1, 2.5 -> 3, -0.5 -> -1,
 * 126.5 -> 127; half to even (GEMM2 input, Dispatch V3): 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0,
 * 126.5 -> 126. 19 values: one full vector of 16 and a tail of 3, ties in both. */
static void test_int8_hand_ties(void) {
    const mm_rowops *tables[2];
    const char *names[2];
    int n_tables = row_tables(tables, names);
    enum { N = 19 };
    const float x[N] = {127.0f, 0.5f,  1.5f,   2.5f, -0.5f,   -1.5f, -2.5f, 126.5f, -126.5f, 3.5f,
                        0.25f,  0.75f, -0.75f, 1.0f, -127.0f, 64.5f, 0.5f,  -2.5f,  5.5f};
    const int8_t away[N] = {127, 1, 2, 3, -1, -2, -3, 127, -127, 4, 0, 1, -1, 1, -127, 65, 1, -3, 6};
    const int8_t even[N] = {127, 0, 2, 2, 0, -2, -2, 126, -126, 4, 0, 1, -1, 1, -127, 64, 0, -2, 6};
    for (int t = 0; t < n_tables; t++)
        for (int rule = 0; rule < 3; rule++) {
            int8_t q[N + 1];
            float s = 0;
            memset(q, 0x5A, sizeof q);
            if (rule == 0)
                tables[t]->int8_div_away(x, N, q, &s);
            else
                tables[t]->int8_mul_even(x, N, rule == 1 ? MM_INT8_SCALE_AMAX_DIV_127 : MM_INT8_SCALE_INV_MUL,
                                         q, &s);
            const int8_t *want = rule == 0 ? away : even;
            int bad = 0;
            for (int i = 0; i < N; i++)
                if (q[i] != want[i] && bad++ < 3)
                    mm_test_report_fail(__FILE__, __LINE__, "%s %s: x %g -> %d, expected %d", names[t],
                                        rule == 0 ? "div-away" : "mul-even", (double)x[i], q[i], want[i]);
            CHECK_EQ_INT(bad, 0);
            CHECK_EQ_INT(q[N], 0x5A);
            CHECK(s == 1.0f);
        }
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
            src[i] = mm_test_f32_from_bits(random_f32_bits(&st));
            a1[i] = a2[i] = mm_test_f32_from_bits(random_f32_bits(&st));
            o[i] = (uint16_t)(random_f32_bits(&st) >> 16);
        }
        b1[n] = b2[n] = 0xABCD; /* past the end: untouched */
        p->to_bf16(b1, src, n);
        v->to_bf16(b2, src, n);
        for (int i = 0; i <= n; i++) CHECK_EQ_HEX(b1[i], b2[i]);
        float w = mm_test_f32_from_bits(random_f32_bits(&st) & 0xBFFFFFFFu);
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
            CHECK_EQ_HEX(mm_test_f32_bits(a1[i]), mm_test_f32_bits(a2[i]));
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
                    CHECK_EQ_HEX(mm_test_f32_bits(s_want), mm_test_f32_bits(s_got));
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
        for (int i = 0; i < 37; i++) CHECK_EQ_HEX(mm_test_f32_bits(f[i]), (uint32_t)b[i] << 16);
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
    test_int8_hand_ties();
    test_rowops_avx512_same_bits();
    test_int8_quantize_same_bits();
    test_exp_accuracy();
    return mm_test_finish("test_ffn_rowops");
}
