/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ffn_activation_table.c: every row of the activation table (src/ffn/activation.h):
 *   - the row's kind is its index and its name round-trips through the public name functions;
 *   - the GEMM2 K factor follows from gated (gated: I, elementwise: 2I) and mm_ffn_act_k2 gives it;
 *   - the vector form (when the row has one and the CPU has AVX-512) gives the scalar form's bits, and
 *     so do the dispatched rows and the whole-row form, on special values and every length 0..80;
 *   - the parameter rules: the defaults and a full valid list resolve; a list of the wrong length, a
 *     NaN in any position, and counts outside [0, MAX] are rejected with a message naming the rule.
 * A new activation needs a valid parameter list below (the test fails until it has one). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/cpu.h"
#include "ffn/activation.h"
#include "testlib.h"

/* A valid full parameter list per activation (clamps small enough to bite on the test values). */
static int valid_params(mm_mega_moe_activation kind, float *p) {
    switch (kind) {
    case MM_MEGA_MOE_SWIGLU:
    case MM_MEGA_MOE_SWIGLUSTEP: p[0] = 0.7f; return 1;
    case MM_MEGA_MOE_SWIGLUOAI: p[0] = 0.7f, p[1] = 1.702f, p[2] = 1.0f; return 3;
    case MM_MEGA_MOE_SITUGLU: p[0] = 2.0f, p[1] = 0.5f; return 2;
    case MM_MEGA_MOE_GELU: p[0] = FLT_MAX; return 1;
    default: return -1;
    }
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Same bits, except that which NaN payload an F32 operation on two NaNs passes on is the hardware's
 * operand order, which the compiler may swap: there only NaN-ness must agree. */
static void check_same(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i])) continue;
        CHECK_EQ_HEX(bits_of(a[i]), bits_of(b[i]));
    }
}

enum { N = 200 };
static float g[N + 1], u[N + 1];

static void check_forms(const mm_ffn_act_info *info, const mm_ffn_act *act) {
    float want[N + 1], got[N + 1];
    int vector = info->vector && mm_cpu_isa() >= MM_ISA_AVX512;
    for (int64_t n = 0; n <= N; n = n < 80 ? n + 1 : n + 40) {
        for (int64_t i = 0; i < n; i++) want[i] = info->scalar(act, g[i], info->gated ? u[i] : 0.0f);
        want[n] = got[n] = 12345.0f; /* past the end: untouched */
        mm_ffn_act_rows_portable(act, g, info->gated ? u : NULL, got, n);
        check_same(want, got, n + 1);
        mm_ffn_act_rows(act, g, info->gated ? u : NULL, got, n);
        check_same(want, got, n + 1);
        if (vector) {
            info->vector(act, g, u, got, n);
            check_same(want, got, n + 1);
        }
    }
    /* the whole-row form on a GEMM1 output row h = [gate | up], in place */
    enum { I = 37 };
    float h[2 * I], expect[2 * I];
    for (int j = 0; j < 2 * I; j++) h[j] = j < I ? g[j] : u[j - I];
    int64_t k2 = mm_ffn_act_k2(info->kind, I);
    for (int64_t j = 0; j < k2; j++)
        expect[j] = info->gated ? info->scalar(act, h[j], h[I + j]) : info->scalar(act, h[j], 0);
    mm_ffn_act_row(act, h, I, h);
    check_same(expect, h, k2);
}

static void check_rules(const mm_ffn_act_info *info) {
    float p[MM_MEGA_MOE_MAX_ACTIVATION_PARAMS + 1] = {0};
    int full = valid_params(info->kind, p);
    CHECK(full >= info->min_params && full <= info->max_params);
    mm_ffn_act act;
    mm_error err;
    CHECK_OK(mm_ffn_act_resolve(info->kind, NULL, 0, &act, &err), &err);
    CHECK_EQ_INT(act.kind, info->kind);
    CHECK_OK(mm_ffn_act_resolve(info->kind, p, full, &act, &err), &err);
    /* wrong lengths: the message names the activation and its accepted lists */
    int wrong[2] = {info->max_params + 1, info->min_params - 1};
    for (int w = 0; w < 2; w++) {
        if (wrong[w] <= 0 || wrong[w] > MM_MEGA_MOE_MAX_ACTIVATION_PARAMS) continue;
        CHECK_STATUS(mm_ffn_act_resolve(info->kind, p, wrong[w], &act, &err), MM_ERR_INVALID_ARGUMENT, &err);
        CHECK_STR_CONTAINS(err.message, info->name);
        CHECK_STR_CONTAINS(err.message, info->param_rule);
    }
    /* a NaN anywhere in a full list */
    for (int i = 0; i < full; i++) {
        float q[MM_MEGA_MOE_MAX_ACTIVATION_PARAMS];
        memcpy(q, p, sizeof q);
        q[i] = NAN;
        CHECK_STATUS(mm_ffn_act_resolve(info->kind, q, full, &act, &err), MM_ERR_INVALID_ARGUMENT, &err);
        CHECK_STR_CONTAINS(err.message, "activation_params");
    }
    /* counts outside [0, MAX] */
    CHECK_STATUS(mm_ffn_act_resolve(info->kind, p, -1, &act, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "activation_param_count = -1");
    CHECK_STATUS(mm_ffn_act_resolve(info->kind, p, MM_MEGA_MOE_MAX_ACTIVATION_PARAMS + 1, &act, &err),
                 MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "activation_param_count");
}

int main(void) {
    static const float special[] = {0.0f,   -0.0f,  1e-6f, 0.3f,   -0.3f,    7.0f,      -7.0f, 88.0f,
                                    -88.0f, 100.0f, -1e4f, 1e-40f, INFINITY, -INFINITY, NAN};
    enum { S = sizeof special / sizeof special[0] };
    uint64_t st = 5;
    for (int i = 0; i < N; i++) {
        g[i] = i < S ? special[i] : (float)mm_test_rand_uniform(&st, -30.0, 30.0);
        u[i] = i >= S && i < 2 * S ? special[i - S] : (float)mm_test_rand_uniform(&st, -10.0, 10.0);
    }
    int count = 0;
    const mm_ffn_act_info *table = mm_ffn_act_table(&count);
    CHECK_EQ_INT(count, MM_MEGA_MOE_GELU + 1);
    for (int k = 0; k < count; k++) {
        const mm_ffn_act_info *info = &table[k];
        CHECK_EQ_INT((int)info->kind, k);
        CHECK(mm_ffn_act_info_of(info->kind) == info);
        CHECK(strcmp(mm_mega_moe_activation_name(info->kind), info->name) == 0);
        CHECK_EQ_INT(mm_mega_moe_activation_from_name(info->name), k);
        CHECK_EQ_INT(info->k2_factor, info->gated ? 1 : 2);
        CHECK_EQ_INT((int)mm_ffn_act_k2(info->kind, 96), info->gated ? 96 : 192);
        CHECK(info->min_params >= 1 && info->min_params <= info->max_params &&
              info->max_params <= MM_MEGA_MOE_MAX_ACTIVATION_PARAMS);
        check_rules(info);
        float p[MM_MEGA_MOE_MAX_ACTIVATION_PARAMS] = {0};
        int full = valid_params(info->kind, p);
        mm_ffn_act act;
        CHECK_OK(mm_ffn_act_resolve(info->kind, NULL, 0, &act, NULL), NULL);
        check_forms(info, &act);
        if (full > 0) {
            CHECK_OK(mm_ffn_act_resolve(info->kind, p, full, &act, NULL), NULL);
            check_forms(info, &act);
        }
        printf("  %-11s gated %d, GEMM2 K = %d I, params %d..%d, vector form %s\n", info->name, info->gated,
               info->k2_factor, info->min_params, info->max_params, info->vector ? "yes" : "no");
    }
    /* outside the table */
    mm_ffn_act act;
    mm_error err;
    CHECK(mm_ffn_act_info_of((mm_mega_moe_activation)count) == NULL);
    CHECK_EQ_INT((int)mm_ffn_act_k2((mm_mega_moe_activation)count, 96), 0);
    CHECK_STATUS(mm_ffn_act_resolve((mm_mega_moe_activation)count, NULL, 0, &act, &err),
                 MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "not a known activation");
    CHECK(strcmp(mm_mega_moe_activation_name((mm_mega_moe_activation)count), "invalid") == 0);
    CHECK_EQ_INT(mm_mega_moe_activation_from_name("relu"), -1);
    CHECK_EQ_INT(mm_mega_moe_activation_from_name(NULL), -1);
    return mm_test_finish("test_ffn_activation_table");
}
