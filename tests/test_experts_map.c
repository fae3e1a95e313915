/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_experts_map.c: the local experts call's own features, each against an independent
 * expectation:
 *   - an expert map holding a subset: y equals a call with every expert local whose other ids are
 *     replaced by -1 (MM_EXPERTS_SKIP_NEGATIVE_IDS), and the float64 reference with the other experts'
 *     gating weights set to 0; the partial results of two complementary maps add up (in F32) to the
 *     all-local y within the BF16 roundings;
 *   - negative ids: skipped with the flag (a row of only negative ids gets only the shared experts),
 *     rejected without it, unchecked in inactive rows;
 *   - F16 and F32 x equal the BF16-rounded x (round to nearest even, hand-made ties included);
 *   - I64 ids equal I32 ids; y F32 holds exactly the widened BF16 y;
 *   - several threads calling one handle at once (one of them uses the handle's working memory, the
 *     others their own) all get the single-threaded bits. */
#include <pthread.h>
#include <stdio.h>

#include "test_experts_common.h"

static moe_spec spec_of(const char *scenario, uint64_t seed) {
    moe_spec sp =
        moe_spec_scenario((moe_dims){1, 8, 3, 64, 32, 13, 0}, mm_moe_scenario_by_name(scenario), seed);
    sp.shared_count = 1;
    sp.lists = 1;
    sp.masked = 1;
    return sp;
}

static int holds(const int *globals, int n, int32_t id) {
    for (int s = 0; s < n; s++)
        if (globals[s] == id) return 1;
    return 0;
}

static void check_subset(const char *scenario) {
    moe_case c;
    moe_spec sp = spec_of(scenario, 7);
    if (!moe_case_build(&c, &sp)) return;
    mm_ref_case_rank *k = &c.ref.ranks[0];
    int64_t T = k->bs, K = sp.topk, H = sp.hidden, n = T * H;
    mm_error err;
    mm_error_clear(&err);
    static const int mine[3] = {5, 2, 6}, theirs[5] = {0, 1, 3, 4, 7}; /* slots out of id order */
    mm_experts *all = NULL, *part = NULL, *rest = NULL;
    CHECK_OK(ex_create(&c, 0, NULL, 1, &all, &err), &err);
    CHECK_OK(ex_create(&c, 3, mine, 1, &part, &err), &err);
    CHECK_OK(ex_create(&c, 5, theirs, 0, &rest, &err), &err);
    if (!all || !part || !rest) return;
    CHECK(mm_experts_bytes(part) > 0 && mm_experts_bytes(part) < mm_experts_bytes(all));
    uint16_t *y_all = calloc((size_t)n, 2), *y_part = calloc((size_t)n, 2), *y_skip = calloc((size_t)n, 2),
             *y_rest = calloc((size_t)n, 2);
    ex_inputs in;
    ex_inputs_make(&c, &in);
    CHECK_OK(ex_call(all, &c, &in.in, y_all, &err), &err);
    CHECK_OK(ex_call(part, &c, &in.in, y_part, &err), &err);
    CHECK_OK(ex_call(rest, &c, &in.in, y_rest, &err), &err);
    /* the all-local handle with the other experts' ids replaced by -1 */
    int32_t *ids = malloc((size_t)(T * K) * sizeof *ids);
    int64_t skipped = 0;
    for (int64_t q = 0; q < T * K; q++) {
        ids[q] = holds(mine, 3, k->topk_ids[q]) ? k->topk_ids[q] : -1;
        skipped += ids[q] < 0;
    }
    CHECK(skipped > 0 && skipped < T * K);
    int64_t ks[2] = {T, K};
    mm_tensor idt = mm_tensor_make(MM_DTYPE_I32, 2, ks, ids);
    mm_experts_inputs skip_in = in.in;
    skip_in.topk_ids = &idt;
    skip_in.flags = MM_EXPERTS_SKIP_NEGATIVE_IDS;
    CHECK_OK(ex_call(all, &c, &skip_in, y_skip, &err), &err);
    CHECK_EQ_INT(ex_bits_differ(y_part, y_skip, n, "subset map vs skipped ids"), 0);
    /* ...and without the flag the same ids are rejected, naming the first negative element */
    skip_in.flags = 0;
    mm_status s = ex_call(all, &c, &skip_in, y_skip, &err);
    CHECK_STATUS(s, MM_ERR_INVALID_ARGUMENT, &err);
    int64_t first = 0;
    while (ids[first] >= 0 || !k->x_active_mask[first / K]) first++;
    char want[96];
    snprintf(want, sizeof want, "topk_ids[%lld][%lld] = -1 is outside [0, 8)", (long long)(first / K),
             (long long)(first % K));
    CHECK_STR_CONTAINS(err.message, want);
    /* the float64 reference with the other experts' gating weights 0 (weights at combine: w * o = 0) */
    for (int64_t q = 0; q < T * K; q++)
        if (!holds(mine, 3, k->topk_ids[q])) k->topk_weights[q] = 0.0f;
    CHECK_OK(mm_ref_mega_moe(&c.ref.attrs, c.ref.inputs, c.ref.outputs, &err), &err);
    double amax = 0, emax = 0;
    for (int64_t q = 0; q < n; q++) {
        double r = mm_bf16_to_f32(k->y[q]), g = mm_bf16_to_f32(y_part[q]);
        if (fabs(r) > amax) amax = fabs(r);
        if (fabs(r - g) > emax || isnan(g)) emax = isnan(g) ? INFINITY : fabs(r - g);
    }
    double tol = mm_mega_moe_tolerance(sp.routed, moe_dispatch_dtype(&sp.attrs), sp.shared);
    CHECK(amax > 0);
    CHECK(emax <= tol * amax);
    printf("  %-10s subset {5, 2, 6}: bit-equal to skipped ids; error vs float64 reference %.3g (tolerance "
           "%.3g)\n",
           scenario, emax / amax, tol);
    /* partials of complementary maps add up to the all-local y, within the three BF16 roundings and
     * F32 reassociation */
    int64_t bad = 0;
    for (int64_t i = 0; i < T; i++) {
        double rowmax = 0;
        for (int64_t h = 0; h < H; h++) rowmax = fmax(rowmax, fabs(mm_bf16_to_f32(y_all[i * H + h])));
        for (int64_t h = 0; h < H; h++) {
            double a = mm_bf16_to_f32(y_part[i * H + h]), b = mm_bf16_to_f32(y_rest[i * H + h]);
            double f = mm_bf16_to_f32(y_all[i * H + h]);
            double bound = 0x1p-8 * (fabs(a) + fabs(b) + fabs(f)) + 1e-4 * rowmax;
            if (!k->x_active_mask[i]) bound = 0;
            bad += !(fabs((double)(float)(a + b) - f) <= bound);
        }
    }
    CHECK_EQ_INT(bad, 0);
    free(ids);
    free(y_all);
    free(y_part);
    free(y_skip);
    free(y_rest);
    ex_inputs_free(&in);
    mm_experts_free(all);
    mm_experts_free(part);
    mm_experts_free(rest);
    moe_case_free(&c);
}

/* Negative ids: a row with only negative ids gets only the shared experts (y = the shared experts'
 * y, here computed as the reference with every gating weight 0); ids of inactive rows unchecked. */
static void check_negative(void) {
    moe_case c;
    moe_spec sp = spec_of("a16w16", 9);
    if (!moe_case_build(&c, &sp)) return;
    mm_ref_case_rank *k = &c.ref.ranks[0];
    int64_t T = k->bs, K = sp.topk, H = sp.hidden;
    mm_error err;
    mm_experts *ex = NULL;
    CHECK_OK(ex_create(&c, 0, NULL, 1, &ex, &err), &err);
    if (!ex) return;
    int32_t *ids = malloc((size_t)(T * K) * sizeof *ids);
    memcpy(ids, k->topk_ids, (size_t)(T * K) * sizeof *ids);
    for (int64_t kk = 0; kk < K; kk++) ids[0 * K + kk] = -1 - (int32_t)kk; /* row 0 active, all padding */
    CHECK(k->x_active_mask[0] && !k->x_active_mask[1]);
    ids[1 * K + 0] = -5;  /* inactive row: not checked */
    ids[1 * K + 1] = 999; /* neither is an id beyond E */
    int64_t ks[2] = {T, K};
    mm_tensor idt = mm_tensor_make(MM_DTYPE_I32, 2, ks, ids);
    ex_inputs in;
    ex_inputs_make(&c, &in);
    in.in.topk_ids = &idt;
    in.in.flags = MM_EXPERTS_SKIP_NEGATIVE_IDS;
    uint16_t *y = calloc((size_t)(T * H), 2);
    CHECK_OK(ex_call(ex, &c, &in.in, y, &err), &err);
    for (int64_t kk = 0; kk < K; kk++) k->topk_weights[0 * K + kk] = 0.0f;
    CHECK_OK(mm_ref_mega_moe(&c.ref.attrs, c.ref.inputs, c.ref.outputs, &err), &err);
    double amax = 0, emax = 0;
    for (int64_t h = 0; h < H; h++) {
        double r = mm_bf16_to_f32(k->y[h]);
        amax = fmax(amax, fabs(r));
        emax = fmax(emax, fabs(r - mm_bf16_to_f32(y[h])));
    }
    CHECK(amax > 0 && emax <= amax / 64);
    for (int64_t h = 0; h < H; h++) CHECK_EQ_HEX(y[1 * H + h], 0); /* inactive: +0 */
    free(y);
    free(ids);
    ex_inputs_free(&in);
    mm_experts_free(ex);
    moe_case_free(&c);
}

/* F16 / F32 x, I64 ids, F32 y against the BF16 call. */
static void check_dtypes(const char *scenario) {
    moe_case c;
    moe_spec sp = spec_of(scenario, 11);
    sp.masked = 0;
    if (!moe_case_build(&c, &sp)) return;
    mm_ref_case_rank *k = &c.ref.ranks[0];
    int64_t T = k->bs, K = sp.topk, H = sp.hidden, n = T * H;
    mm_error err;
    mm_experts *ex = NULL;
    CHECK_OK(ex_create(&c, 0, NULL, 1, &ex, &err), &err);
    if (!ex) return;
    uint64_t st = 5;
    float *x32 = malloc((size_t)n * sizeof *x32);
    uint16_t *x16 = malloc((size_t)n * 2), *r32 = malloc((size_t)n * 2), *r16 = malloc((size_t)n * 2);
    for (int64_t q = 0; q < n; q++) {
        x32[q] = (float)mm_test_rand_uniform(&st, -1.0, 1.0);
        x16[q] = mm_f32_to_f16((float)mm_test_rand_uniform(&st, -1.0, 1.0));
        r32[q] = mm_f32_to_bf16(x32[q]);
        r16[q] = mm_f32_to_bf16(mm_f16_to_f32(x16[q]));
    }
    /* exact ties, rounded to even by hand: 1 + 2^-8 -> 1.0 (0x3f80); 1 + 3 * 2^-8 -> 1 + 2^-6 (0x3f82) */
    uint32_t tie_a = 0x3f808000u, tie_b = 0x3f818000u;
    memcpy(&x32[0], &tie_a, 4);
    memcpy(&x32[1], &tie_b, 4);
    r32[0] = 0x3f80;
    r32[1] = 0x3f82;
    x16[0] = 0x3c04; /* the same ties in F16 */
    x16[1] = 0x3c0c;
    r16[0] = 0x3f80;
    r16[1] = 0x3f82;
    int64_t xs[2] = {T, H}, ks[2] = {T, K};
    mm_tensor tx32 = mm_tensor_make(MM_DTYPE_F32, 2, xs, x32),
              tx16 = mm_tensor_make(MM_DTYPE_F16, 2, xs, x16);
    mm_tensor tr32 = mm_tensor_make(MM_DTYPE_BF16, 2, xs, r32),
              tr16 = mm_tensor_make(MM_DTYPE_BF16, 2, xs, r16);
    ex_inputs in;
    ex_inputs_make(&c, &in);
    uint16_t *ya = calloc((size_t)n, 2), *yb = calloc((size_t)n, 2);
    const mm_tensor *pairs[2][2] = {{&tx32, &tr32}, {&tx16, &tr16}};
    for (int p = 0; p < 2; p++) {
        mm_experts_inputs a = in.in, b = in.in;
        a.x = pairs[p][0];
        b.x = pairs[p][1];
        CHECK_OK(ex_call(ex, &c, &a, ya, &err), &err);
        CHECK_OK(ex_call(ex, &c, &b, yb, &err), &err);
        CHECK_EQ_INT(ex_bits_differ(ya, yb, n, p ? "F16 x vs rounded" : "F32 x vs rounded"), 0);
    }
    /* I64 ids */
    int64_t *ids64 = malloc((size_t)(T * K) * sizeof *ids64);
    for (int64_t q = 0; q < T * K; q++) ids64[q] = k->topk_ids[q];
    mm_tensor ti64 = mm_tensor_make(MM_DTYPE_I64, 2, ks, ids64);
    mm_experts_inputs a = in.in;
    a.topk_ids = &ti64;
    CHECK_OK(ex_call(ex, &c, &in.in, ya, &err), &err);
    CHECK_OK(ex_call(ex, &c, &a, yb, &err), &err);
    CHECK_EQ_INT(ex_bits_differ(ya, yb, n, "I64 ids"), 0);
    /* F32 y: bits of the BF16 y in the high half, low half 0 */
    float *yf = malloc((size_t)n * sizeof *yf);
    mm_tensor tyf = mm_tensor_make(MM_DTYPE_F32, 2, xs, yf);
    mm_mega_moe_attrs attrs = sp.attrs;
    CHECK_OK(mm_experts_run(ex, &attrs, &in.in, &tyf, &err), &err);
    int64_t bad = 0;
    for (int64_t q = 0; q < n; q++) {
        uint32_t bits;
        memcpy(&bits, &yf[q], 4);
        bad += bits != (uint32_t)ya[q] << 16;
    }
    CHECK_EQ_INT(bad, 0);
    printf("  %-10s F32 / F16 x = BF16-rounded x, I64 ids = I32 ids, F32 y = widened BF16 y\n", scenario);
    free(yf);
    free(ids64);
    free(ya);
    free(yb);
    free(x32);
    free(x16);
    free(r32);
    free(r16);
    ex_inputs_free(&in);
    mm_experts_free(ex);
    moe_case_free(&c);
}

typedef struct thread_arg {
    const mm_experts *ex;
    const moe_case *c;
    const mm_experts_inputs *in;
    const uint16_t *want;
    int64_t differ;
    int failed;
} thread_arg;

static void *caller(void *p) {
    thread_arg *a = p;
    int64_t n = a->c->ref.ranks[0].bs * a->c->sp.hidden;
    uint16_t *y = malloc((size_t)n * 2);
    mm_error err;
    for (int rep = 0; rep < 6; rep++) {
        if (ex_call(a->ex, a->c, a->in, y, &err) != MM_OK) a->failed++;
        for (int64_t q = 0; q < n; q++) a->differ += y[q] != a->want[q];
    }
    free(y);
    return NULL;
}

static void check_threads(void) {
    moe_case c;
    moe_spec sp = spec_of("a8w8-int", 13);
    sp.bs[0] = 40;
    if (!moe_case_build(&c, &sp)) return;
    mm_error err;
    mm_experts *ex = NULL;
    CHECK_OK(ex_create(&c, 0, NULL, 1, &ex, &err), &err);
    if (!ex) return;
    ex_inputs in;
    ex_inputs_make(&c, &in);
    int64_t n = c.ref.ranks[0].bs * sp.hidden;
    uint16_t *want = malloc((size_t)n * 2);
    CHECK_OK(ex_call(ex, &c, &in.in, want, &err), &err);
    thread_arg args[3];
    pthread_t th[3];
    for (int t = 0; t < 3; t++) {
        args[t] = (thread_arg){ex, &c, &in.in, want, 0, 0};
        CHECK(pthread_create(&th[t], NULL, caller, &args[t]) == 0);
    }
    for (int t = 0; t < 3; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ_INT(args[t].failed, 0);
        CHECK_EQ_INT(args[t].differ, 0);
    }
    free(want);
    ex_inputs_free(&in);
    mm_experts_free(ex);
    moe_case_free(&c);
}

int main(void) {
    static const char *const scenarios[] = {"a16w16", "a8w4-int", "a8w8-fp8", "a4w4-fp"};
    for (int q = 0; q < 4; q++) {
        check_subset(scenarios[q]);
        check_dtypes(scenarios[q]);
    }
    check_negative();
    check_threads();
    return mm_test_finish("test_experts_map");
}
