/* tests/test_mega_moe_schedule.c: the performance paths of MegaMoE keep the numerics.
 *
 *   - row loops (rowops): the AVX-512 table gives the same bits as the portable one on random rows with
 *     NaN, infinities, rounding ties and every tail length; the portable one matches hand-computed
 *     BF16 patterns; the operator's exp is within 2 ulps and its vector activations equal the scalar
 *     ones bit for bit; the INT8 row quantizers of both tables equal formats.h's (q and scale).
 *   - fused activation (GEMM1 epilogue over gate/up interleaved panels) vs the unfused pass: the same
 *     y bits for every scenario and gated activation, odd I (a padded last panel), topk_weights_type 1,
 *     shared experts, combine quantization; and both within tolerance of the float64 reference.
 *   - scheduling: a hot expert (every token's first expert), many experts without rows, BS = 0 ranks,
 *     decode-sized calls, all combine modes: within tolerance of the reference, and the same bits with
 *     1 and 2 pool threads.
 *   - the compute gate: concurrent ranks never exceed its capacity and all get through. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/parallel.h"
#include "test_mega_moe_common.h"

/* ---- rowops ----------------------------------------------------------------------------------- */

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
    const mm_moe_rowops *p = mm_moe_rowops_portable();
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
    const mm_moe_rowops *p = mm_moe_rowops_portable(), *v = &mm_moe_rowops_avx512_table;
    CHECK(mm_moe_rowops_get() == v);
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
 * for bit, both rounding rules, on random rows of several magnitudes, rows of exact ties (amax 127 so
 * that t = x), rows with NaN / Inf / only zeros, tiny rows whose scale underflows, every length 0..80. */
static void test_int8_quantize_same_bits(void) {
    const mm_moe_rowops *tables[2] = {mm_moe_rowops_portable(), &mm_moe_rowops_avx512_table};
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
            for (int even = 0; even < 2; even++) {
                int8_t want[N + 1], got[N + 1];
                float s_want = 0, s_got = 0;
                want[n] = got[n] = 0x5A;
                if (even)
                    mm_int8_quantize_row_mul_even(x, n, MM_INT8_SCALE_AMAX_DIV_127, want, &s_want);
                else
                    mm_int8_quantize_row_div_away(x, n, want, &s_want);
                for (int t = 0; t < n_tables; t++) {
                    memset(got, 0x5A, sizeof got);
                    s_got = 0;
                    tables[t]->int8_quantize(x, n, even, got, &s_got);
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

/* mm_moe_exp_f32 against exp in double over [-87, 88] (and the saturation beyond): within 2 ulps. */
static void test_exp_accuracy(void) {
    double worst = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.01171875f) {
        double want = exp((double)x), got = (double)mm_moe_exp_f32(x);
        double ulp = (double)(nextafterf((float)want, INFINITY) - (float)want);
        double d = fabs(got - want) / ulp;
        if (d > worst) worst = d;
    }
    CHECK(worst <= 2.0);
    printf("  exp: worst %.2f ulp on [-87, 88]\n", worst);
    CHECK(mm_moe_exp_f32(0.0f) == 1.0f);
    CHECK(mm_moe_exp_f32(1000.0f) == mm_moe_exp_f32(88.0f));
    CHECK(mm_moe_exp_f32(-1000.0f) == mm_moe_exp_f32(-87.0f));
    CHECK(isnan(mm_moe_exp_f32(NAN)));
    CHECK(mm_moe_sigmoid_f32(-1000.0f) < 1e-37f && mm_moe_sigmoid_f32(1000.0f) == 1.0f);
}

/* The vector activations repeat the scalar ones bit for bit (finite and special inputs, clamps). */
static void test_act_avx512_same_bits(void) {
    if (mm_cpu_isa() < MM_ISA_AVX512) return;
    static const float special[] = {0.0f,  -0.0f,  1e-6f,  0.3f,  -0.3f,    7.0f,      -7.0f,
                                    88.0f, -88.0f, 100.0f, -1e4f, INFINITY, -INFINITY, NAN};
    enum { N = 200 };
    float g[N], u[N], a1[N], a2[N];
    uint64_t st = 5;
    for (int i = 0; i < N; i++) {
        g[i] = i < 14 ? special[i] : (float)mm_test_rand_uniform(&st, -30.0, 30.0);
        u[i] = i >= 14 && i < 28 ? special[i - 14] : (float)mm_test_rand_uniform(&st, -10.0, 10.0);
    }
    for (int kind = 0; kind <= 3; kind++)
        for (int clamp = 0; clamp <= 1; clamp++) {
            mm_mega_moe_attrs a = mm_mega_moe_default_attrs();
            a.activation = (mm_mega_moe_activation)kind;
            a.activation_param_count = clamp ? (kind == 2 ? 3 : kind == 3 ? 2 : 1) : 0;
            a.activation_params[0] = kind == 3 ? 2.0f : 0.7f;
            a.activation_params[1] = kind == 3 ? 0.5f : 1.702f;
            a.activation_params[2] = 1.0f;
            mm_moe_act act;
            CHECK_OK(mm_moe_act_resolve(&a, &act, NULL), NULL);
            for (int n = N - 17; n <= N; n += 17) {
                mm_moe_rowops_portable()->act_gated(&act, g, u, a1, n);
                mm_moe_rowops_avx512_table.act_gated(&act, g, u, a2, n);
                for (int i = 0; i < n; i++) {
                    if (isnan(a1[i]) && isnan(a2[i])) continue; /* payload: see above */
                    CHECK_EQ_HEX(bits_of(a1[i]), bits_of(a2[i]));
                }
            }
        }
}

/* ---- fused vs unfused ------------------------------------------------------------------------- */

typedef struct scenario {
    const char *name;
    mm_dtype weights;
    int mode;
    mm_dtype dispatch;
} scenario;

static const scenario scenarios[] = {
    {"a16w16", MM_DTYPE_BF16, 0, MM_DTYPE_INVALID},
    {"a8w8-int", MM_DTYPE_I8, 2, MM_DTYPE_I8},
    {"a8w4-int", MM_DTYPE_INT4, 2, MM_DTYPE_I8},
    {"a8w8-fp8", MM_DTYPE_FP8_E4M3FN, 4, MM_DTYPE_FP8_E4M3FN},
    {"a8w4-fp", MM_DTYPE_FP4_E2M1, 4, MM_DTYPE_FP8_E4M3FN},
    {"a4w4-fp", MM_DTYPE_FP4_E2M1, 4, MM_DTYPE_FP4_E2M1},
};

static moe_spec spec_of(const scenario *sc, int ranks, uint64_t seed) {
    moe_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.ranks = ranks;
    sp.experts = 4 * ranks;
    sp.topk = 3;
    sp.hidden = 96;
    sp.inter = 40; /* not a multiple of 16: the last interleaved panel is half padding */
    for (int r = 0; r < ranks; r++) sp.bs[r] = 6 + 5 * r;
    sp.routed = sc->weights;
    sp.shared = sc->weights;
    sp.attrs = mm_mega_moe_default_attrs();
    sp.attrs.dispatch_quant_mode = sc->mode;
    sp.attrs.dispatch_quant_out_dtype = sc->dispatch;
    sp.seed = seed;
    return sp;
}

/* Runs the case (fused or not, with `threads` pool threads); copies every rank's y into ys. */
static int run_into(moe_case *c, int unfused, int threads, uint16_t **ys) {
    moe_run_arg arg;
    memset(&arg, 0, sizeof arg);
    arg.break_rank = -1;
    arg.unfused = unfused;
    int before = mm_parallel_num_threads();
    mm_parallel_set_num_threads(threads);
    mm_status st = moe_case_run(c, &arg);
    mm_parallel_set_num_threads(before);
    CHECK_OK(st, &arg.err[0]);
    if (st != MM_OK) return 0;
    for (int r = 0; r < c->sp.ranks; r++) {
        size_t bytes = (size_t)(c->ref.ranks[r].bs * c->sp.hidden) * 2;
        ys[r] = malloc(bytes + 2);
        memcpy(ys[r], c->y[r], bytes);
    }
    return 1;
}

/* Same bits in every rank's y. */
static void check_same_y(const moe_case *c, uint16_t **a, uint16_t **b, const char *label) {
    for (int r = 0; r < c->sp.ranks; r++) {
        int64_t n = c->ref.ranks[r].bs * c->sp.hidden, diff = 0;
        for (int64_t q = 0; q < n; q++) diff += a[r][q] != b[r][q];
        CHECK_EQ_INT(diff, 0);
        if (diff) fprintf(stderr, "  %s rank %d: %lld values differ\n", label, r, (long long)diff);
    }
}

static void free_ys(uint16_t **ys, int n) {
    for (int r = 0; r < n; r++) {
        free(ys[r]);
        ys[r] = NULL;
    }
}

/* Fused vs unfused, both vs the reference. */
static void fused_case(const moe_spec *sp, const char *label) {
    moe_case c;
    if (!moe_case_build(&c, sp)) {
        CHECK(0);
        return;
    }
    uint16_t *fused[8] = {0}, *plain[8] = {0};
    if (run_into(&c, 1, 2, fused)) {
        double e = moe_case_check(&c, label);
        if (run_into(&c, 0, 2, plain)) {
            moe_case_check(&c, label);
            check_same_y(&c, fused, plain, label);
        }
        printf("  %-52s error %.3g, fused == unfused\n", label, e);
    }
    free_ys(fused, sp->ranks);
    free_ys(plain, sp->ranks);
    moe_case_free(&c);
}

static void test_fused_vs_unfused(void) {
    for (size_t q = 0; q < sizeof scenarios / sizeof scenarios[0]; q++) {
        for (int act = 0; act < (int)MM_MEGA_MOE_GELU; act++) { /* the gated ones */
            moe_spec sp = spec_of(&scenarios[q], 2 + (int)(q % 2), 40 + q * 8 + (uint64_t)act);
            sp.attrs.activation = (mm_mega_moe_activation)act;
            if (act == 0 || act == 1) {
                sp.attrs.activation_param_count = 1;
                sp.attrs.activation_params[0] = 0.3f; /* clamps are hit */
            } else if (act == 2) {
                sp.attrs.activation_param_count = 3;
                sp.attrs.activation_params[0] = 0.3f;
                sp.attrs.activation_params[1] = 1.702f;
                sp.attrs.activation_params[2] = 1.0f;
            } else {
                sp.attrs.activation_param_count = 2;
                sp.attrs.activation_params[0] = 2.0f;
                sp.attrs.activation_params[1] = 0.5f;
            }
            sp.attrs.topk_weights_type = act % 2;
            sp.shared_count = act == 1 ? 2 : 0;
            if (act == 3 && scenarios[q].weights != MM_DTYPE_BF16) sp.attrs.combine_quant_mode = 4;
            char label[96];
            snprintf(label, sizeof label, "fused %s %s", scenarios[q].name,
                     mm_mega_moe_activation_name(sp.attrs.activation));
            fused_case(&sp, label);
        }
    }
}

/* ---- scheduling ------------------------------------------------------------------------------- */

/* Within tolerance of the reference, and the same bits with 1 and 2 pool threads. */
static void schedule_case(const moe_spec *sp, const char *label) {
    moe_case c;
    if (!moe_case_build(&c, sp)) {
        CHECK(0);
        return;
    }
    uint16_t *one[8] = {0}, *two[8] = {0};
    if (run_into(&c, 0, 1, one)) {
        double e = moe_case_check(&c, label);
        if (run_into(&c, 0, 2, two)) check_same_y(&c, one, two, label);
        printf("  %-52s error %.3g, 1 thread == 2 threads\n", label, e);
    }
    free_ys(one, sp->ranks);
    free_ys(two, sp->ranks);
    moe_case_free(&c);
}

static void test_scheduling(void) {
    for (int mode = 0; mode <= 2; mode++) {
        moe_spec sp = spec_of(&scenarios[mode == 1 ? 1 : 0], 4, 300 + (uint64_t)mode);
        sp.attrs.combine_comm_mode = mode;
        if (mode == 2) sp.attrs.rank_num_per_server = 2;
        char label[96];
        /* hot: every token's first expert is expert 0, on rank 0 */
        sp.hot = 1;
        sp.bs[1] = 40;
        snprintf(label, sizeof label, "hot expert 0, combine mode %d", mode);
        schedule_case(&sp, label);
        /* empty experts: 64 experts, 2 tokens per rank, top-2: most experts get nothing; rank 3 sends
         * nothing at all */
        sp = spec_of(&scenarios[mode == 1 ? 1 : 0], 4, 310 + (uint64_t)mode);
        sp.attrs.combine_comm_mode = mode;
        if (mode == 2) sp.attrs.rank_num_per_server = 2;
        sp.experts = 64;
        sp.topk = 2;
        for (int r = 0; r < 4; r++) sp.bs[r] = r == 3 ? 0 : 2;
        sp.shared_count = 1;
        snprintf(label, sizeof label, "empty experts, BS 0 rank, combine mode %d", mode);
        schedule_case(&sp, label);
        /* decode: one token per rank, masked rows elsewhere */
        sp = spec_of(&scenarios[3], 4, 320 + (uint64_t)mode);
        sp.attrs.combine_comm_mode = mode == 2 ? 0 : mode;
        for (int r = 0; r < 4; r++) sp.bs[r] = 1;
        sp.bs[2] = 3;
        sp.masked = 1;
        snprintf(label, sizeof label, "decode 1 token, fp8, combine mode %d", sp.attrs.combine_comm_mode);
        schedule_case(&sp, label);
    }
}

/* ---- the compute gate ------------------------------------------------------------------------- */

static atomic_int gate_inside, gate_peak;

static void *gate_thread(void *unused) {
    (void)unused;
    for (int i = 0; i < 200; i++) {
        mm_moe_gate_enter();
        int now = atomic_fetch_add(&gate_inside, 1) + 1;
        int peak = atomic_load(&gate_peak);
        while (now > peak && !atomic_compare_exchange_weak(&gate_peak, &peak, now)) {
        }
        for (volatile int spin = 0; spin < 200; spin++) {
        }
        atomic_fetch_sub(&gate_inside, 1);
        mm_moe_gate_leave();
    }
    return NULL;
}

static void test_gate(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long cap = cores / mm_parallel_num_threads();
    if (cap < 1) cap = 1;
    pthread_t t[6];
    for (int i = 0; i < 6; i++) CHECK(pthread_create(&t[i], NULL, gate_thread, NULL) == 0);
    for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
    CHECK_EQ_INT(atomic_load(&gate_inside), 0);
    CHECK(atomic_load(&gate_peak) >= 1 && atomic_load(&gate_peak) <= cap);
    printf("  gate: capacity %ld, peak %d ranks inside\n", cap, atomic_load(&gate_peak));
}

int main(void) {
    test_rowops_hand_values();
    test_rowops_avx512_same_bits();
    test_int8_quantize_same_bits();
    test_exp_accuracy();
    test_act_avx512_same_bits();
    test_gate();
    test_fused_vs_unfused();
    test_scheduling();
    return mm_test_finish("test_mega_moe_schedule");
}
