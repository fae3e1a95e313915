/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_dispatch_combine.c: Dispatch V3 + Combine V2 on 1..8 ranks as threads: routed and
 * shared-expert ranks, several experts per rank, TP pairs, quant mode 2 with and without smoothing,
 * 1-D and 2-D masks, global_bs with uneven Bs, special experts (both const-alpha forms, F32 and BF16),
 * expert_token_nums_type 0/1, and bit-identical results for 1 and 2 pool threads. Every scenario is
 * checked against the independent expectations of test_dispatch_combine_scenarios.h. */
#include <math.h>

#include "core/parallel.h"
#include "megamoe/formats.h"
#include "ops/dispatch_combine/dc_internal.h"
#include "test_dispatch_combine_scenarios.h"
#include "testlib.h"

static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    dct_world *w = arg;
    mm_dc_workspace *ws = NULL;
    mm_comm_set_timeout(comm, 20.0, NULL);
    mm_status st = mm_dc_workspace_create(comm, &ws, err);
    if (st) return st;
    st = dct_run_rank(comm, w, ws, err);
    /* a second call on the same workspace: buffers and signals are reused */
    if (!st) st = dct_run_rank(comm, w, ws, err);
    mm_error e2 = {MM_OK, ""};
    mm_status st2 = mm_dc_workspace_free(ws, &e2);
    if (!st && st2) {
        *err = e2;
        st = st2;
    }
    return st;
}

static void run_world(const char *name, const dct_cfg *cfg, dct_world *keep) {
    dct_world w;
    dct_world_make(&w, cfg);
    mm_error errs[DC_MAXR * 2];
    mm_status sts[DC_MAXR * 2];
    mm_error err = {MM_OK, ""};
    mm_status st = mm_comm_run_threads(w.ranks, rank_fn, &w, sts, errs, &err);
    if (st) fprintf(stderr, "%s: %s\n", name, err.message);
    CHECK_OK(st, &err);
    if (keep)
        *keep = w;
    else
        dct_world_free(&w);
}

static dct_cfg base_cfg(int R, int M) {
    return dct_base_cfg(R, M, 7);
}

static void scenarios(void) {
    for (int R = 1; R <= 8; R++) { /* one expert per rank, and two */
        dct_cfg c = base_cfg(R, R);
        c.seed = (uint64_t)R;
        run_world("plain", &c, NULL);
        c = base_cfg(R, 2 * R);
        c.seed = 100 + (uint64_t)R;
        c.ent_type = R % 2;
        run_world("two experts per rank", &c, NULL);
    }
    dct_cfg c = base_cfg(6, 8); /* shared-expert ranks: 2 ranks for 2 shared experts, 4 routed ranks */
    c.S = 2, c.shared_ranks = 2, c.shared_x = 1;
    run_world("shared experts", &c, NULL);
    c = base_cfg(7, 12); /* 3 ranks per shared expert */
    c.S = 1, c.shared_ranks = 3, c.k = 4, c.mask_kind = 1;
    run_world("shared experts, 1-D mask", &c, NULL);
    c = base_cfg(4, 8);
    c.quant = 1, c.smooth = 1, c.mask_kind = 2, c.ent_type = 0;
    run_world("quant 2 smooth, 2-D mask", &c, NULL);
    c = base_cfg(5, 4);
    c.S = 1, c.shared_ranks = 1, c.quant = 1, c.vary_bs = 1, c.bs = 6;
    run_world("quant 2 no smooth, global_bs", &c, NULL);
    c = base_cfg(4, 4); /* special experts, 1-D alphas */
    c.Z = 2, c.C = 1, c.N = 2, c.k = 4;
    run_world("special experts 1-D alpha", &c, NULL);
    c.alpha_2d = 1, c.alpha_bf16 = 1, c.mask_kind = 2, c.seed = 9;
    run_world("special experts 2-D alpha bf16", &c, NULL);
    c = base_cfg(3, 6);
    c.N = 1, c.alpha_2d = 1, c.k = 2, c.S = 1, c.shared_ranks = 1, c.M = 4, c.quant = 1, c.smooth = 1;
    run_world("const 2-D f32 + shared + quant", &c, NULL);
    /* TP pairs */
    c = base_cfg(2, 2);
    c.tp = 2;
    run_world("tp 2x2", &c, NULL);
    c = base_cfg(4, 3);
    c.tp = 2, c.S = 1, c.shared_ranks = 1, c.k = 2, c.quant = 1, c.smooth = 1, c.mask_kind = 1;
    run_world("tp 4x2 shared quant", &c, NULL);
    c = base_cfg(3, 3);
    c.tp = 2, c.Z = 1, c.C = 1, c.N = 1, c.vary_bs = 1, c.mask_kind = 2, c.shared_x = 1;
    run_world("tp 3x2 special global_bs", &c, NULL);
    c = base_cfg(2, 2);
    c.tp = 1;
    run_world("tp_world_size 1", &c, NULL);
}

/* Same world, 1 and 2 pool threads: identical bits. */
static void determinism(void) {
    dct_cfg c = base_cfg(4, 8);
    c.bs = 40, c.h = 96, c.S = 1, c.shared_ranks = 2, c.M = 4, c.Z = 1, c.C = 1, c.N = 1, c.alpha_2d = 1,
    c.quant = 1, c.smooth = 1;
    dct_world a, b;
    mm_parallel_set_num_threads(1);
    run_world("threads 1", &c, &a);
    mm_parallel_set_num_threads(2);
    run_world("threads 2", &c, &b);
    for (int g = 0; g < a.ranks; g++) {
        mm_error e = {MM_OK, ""};
        mm_status st = dct_compare(&a, g, &b, g, &e);
        CHECK_OK(st, &e);
    }
    dct_world_free(&a);
    dct_world_free(&b);
}

/* ---- hand-computed values ---- */

static uint32_t f32bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

typedef struct hand_ctx {
    int quant;
    uint16_t y[2][4], x[2][4];
    float rstd[2], scales[4];
    int8_t q[4][4];
    int64_t rows[2];
} hand_ctx;

/* Two ranks, one expert each, H = 4, K = 1, Bs = 1: token of rank r goes to expert 1 - r. */
static mm_status hand_rank(mm_comm *comm, void *arg, mm_error *err) {
    hand_ctx *hc = arg;
    int r = mm_comm_rank(comm);
    mm_dc_workspace *ws = NULL;
    mm_status st = mm_dc_workspace_create(comm, &ws, err);
    if (st) return st;
    mm_dc_attrs a = mm_dc_default_attrs();
    a.ep_world_size = 2, a.ep_rank_id = r, a.moe_expert_num = 2, a.norm_eps = 0.0f,
    a.quant_mode = hc->quant ? 2 : 0;
    /* x rows: rank 0 (1, -2, 0.5, 4); rank 1 (0.25, 0.25, -0.125, 0) */
    float xv[2][4] = {{1, -2, 0.5f, 4}, {0.25f, 0.25f, -0.125f, 0}};
    uint16_t x[4], ffn[4], gamma[4], res[4];
    for (int h = 0; h < 4; h++) x[h] = mm_f32_to_bf16(xv[r][h]);
    int32_t id = 1 - r;
    float smooth[2 * 4] = {1, 1, 1, 1, 2, 0.5f, 1, 0.25f}; /* expert 1's row smooths rank 0's token */
    mm_tensor tx = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){1, 4}, x);
    mm_tensor tid = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){1, 1}, &id);
    mm_tensor tsm = mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){2, 4}, smooth);
    mm_dispatch_v3_inputs in = {&tx, &tid, hc->quant ? &tsm : NULL, NULL, NULL};
    uint8_t ex[2 * 8];
    float dyn[2];
    int32_t assist[6], epc[2];
    int64_t etn[1];
    mm_tensor tex = mm_tensor_make(hc->quant ? MM_DTYPE_I8 : MM_DTYPE_BF16, 2, (int64_t[]){2, 4}, ex);
    mm_tensor tdyn = mm_tensor_make(MM_DTYPE_F32, 1, (int64_t[]){2}, dyn);
    mm_tensor tas = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){2, 3}, assist);
    mm_tensor tet = mm_tensor_make(MM_DTYPE_I64, 1, (int64_t[]){1}, etn);
    mm_tensor tep = mm_tensor_make(MM_DTYPE_I32, 1, (int64_t[]){2}, epc);
    mm_dispatch_v3_outputs out = {&tex, &tdyn, &tas, &tet, &tep, NULL};
    if ((st = mm_dispatch_v3(ws, &in, &a, &out, &hc->rows[r], err))) goto done;
    if (hc->quant) {
        memcpy(hc->q[r], ex, 4);
        hc->scales[r] = dyn[0];
    }
    /* FFN = identity (dequantized, then BF16); combine with weight 0.5, residual 1, gamma 2 */
    for (int h = 0; h < 4; h++) {
        float v = hc->quant ? (float)((int8_t *)ex)[h] * dyn[0] : mm_bf16_to_f32(((uint16_t *)ex)[h]);
        ffn[h] = mm_f32_to_bf16(v);
        gamma[h] = mm_f32_to_bf16(2.0f);
        res[h] = mm_f32_to_bf16(1.0f);
    }
    float wgt = 0.5f;
    mm_tensor tffn = mm_tensor_make(MM_DTYPE_BF16, 2, (int64_t[]){1, 4}, ffn);
    mm_tensor tas1 = mm_tensor_make(MM_DTYPE_I32, 2, (int64_t[]){1, 3}, assist);
    mm_tensor tw = mm_tensor_make(MM_DTYPE_F32, 2, (int64_t[]){1, 1}, &wgt);
    mm_tensor tres = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){1, 1, 4}, res);
    mm_tensor tg = mm_tensor_make(MM_DTYPE_BF16, 1, (int64_t[]){4}, gamma);
    mm_tensor ty = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){1, 1, 4}, hc->y[r]);
    mm_tensor tx2 = mm_tensor_make(MM_DTYPE_BF16, 3, (int64_t[]){1, 1, 4}, hc->x[r]);
    mm_tensor trs = mm_tensor_make(MM_DTYPE_F32, 3, (int64_t[]){1, 1, 1}, &hc->rstd[r]);
    mm_combine_v2_inputs cin = {.expand_x = &tffn,
                                .expert_ids = &tid,
                                .assist_info_for_combine = &tas1,
                                .ep_send_counts = &tep,
                                .expert_scales = &tw,
                                .residual_x = &tres,
                                .gamma = &tg};
    mm_combine_v2_outputs cout = {&ty, &trs, &tx2};
    st = mm_combine_v2(ws, &cin, &a, &cout, err);
done:
    mm_dc_workspace_free(ws, NULL);
    return st;
}

static void hand_computed(void) {
    hand_ctx hc;
    memset(&hc, 0, sizeof hc);
    mm_error err = {MM_OK, ""};
    CHECK_OK(mm_comm_run_threads(2, hand_rank, &hc, NULL, NULL, &err), &err);
    CHECK_EQ_INT(hc.rows[0], 1);
    CHECK_EQ_INT(hc.rows[1], 1);
    /* rank 0: x = 0.5 * (1, -2, 0.5, 4) + 1 = (1.5, 0, 1.25, 3); sum x^2 = 2.25 + 1.5625 + 9 = 12.8125,
     * mean 3.203125, rstd = 1/sqrt(3.203125) = 0.558744... */
    CHECK_EQ_HEX(hc.x[0][0], 0x3FC0); /* 1.5 */
    CHECK_EQ_HEX(hc.x[0][1], 0x0000);
    CHECK_EQ_HEX(hc.x[0][2], 0x3FA0); /* 1.25 */
    CHECK_EQ_HEX(hc.x[0][3], 0x4040); /* 3 */
    float r0 = 1.0f / sqrtf(3.203125f);
    CHECK_EQ_HEX(f32bits(hc.rstd[0]), f32bits(r0));
    /* y[3] = BF16(BF16(3 * 0.55874...) * 2): 3 * 0.558744 = 1.676232 -> BF16 1.6796875 (0x3FD7) -> 3.359375
     */
    CHECK_EQ_HEX(hc.y[0][3], 0x4057);
    CHECK_EQ_HEX(hc.y[0][1], 0x0000);
    /* rank 1: x = 0.5 * (0.25, 0.25, -0.125, 0) + 1 = (1.125, 1.125, 0.9375, 1) */
    CHECK_EQ_HEX(hc.x[1][0], 0x3F90);
    CHECK_EQ_HEX(hc.x[1][2], 0x3F70);
    /* quant mode 2. Rank 0's token goes to expert 1, smoothed by (2, 0.5, 1, 0.25): (2, -1, 0.5, 1),
     * amax 2, m = 63.5, q = (127, -64 (-63.5 ties to even), 32 (31.75), 64 (63.5 ties to even)), scale
     * 1/63.5. Rank 1's token goes to expert 0 (smooth 1): amax 0.25, m = 508, q = (127, 127, -64 (-63.5), 0).
     */
    memset(&hc, 0, sizeof hc);
    hc.quant = 1;
    CHECK_OK(mm_comm_run_threads(2, hand_rank, &hc, NULL, NULL, &err), &err);
    /* rows received: rank 1 holds rank 0's token, rank 0 holds rank 1's */
    int8_t want1[4] = {127, -64, 32, 64}, want0[4] = {127, 127, -64, 0};
    CHECK(memcmp(hc.q[1], want1, 4) == 0);
    CHECK(memcmp(hc.q[0], want0, 4) == 0);
    float s1 = 1.0f / 63.5f, s0 = 1.0f / 508.0f;
    CHECK_EQ_HEX(f32bits(hc.scales[1]), f32bits(s1));
    CHECK_EQ_HEX(f32bits(hc.scales[0]), f32bits(s0));
}

/* Dispatch's own INT8 quantizer gives the bits of the library's mul-even routine on every kind of row:
 * random magnitudes and lengths, exact .5 ties of both parities and signs, zero, -0, Inf, NaN, and a
 * subnormal amax (m overflows to Inf). */
static void quantizer_matches_library(void) {
    enum { N = 7168 };
    static float x[N];
    static int8_t q_lib[N], q_dc[N];
    uint64_t s = 42;
    int mismatches = 0, rows = 0;
    for (int kind = 0; kind < 11; kind++)
        for (int rep = 0; rep < 12; rep++) {
            int n = kind == 0 ? (int)(1 + mm_test_rand_u64(&s) % N) : rep == 0 ? 1 : 64 + rep;
            double mag = pow(10.0, mm_test_rand_uniform(&s, -6, 6));
            for (int i = 0; i < n; i++) {
                switch (kind) {
                case 0: x[i] = (float)(mm_test_rand_uniform(&s, -1, 1) * mag); break;
                case 1: x[i] = (float)(i % 254) - 126.5f; break; /* m = 127/126.5: near ties */
                case 2: x[i] = i == 0 ? 127.0f : (float)(i % 127) + 0.5f; break;   /* m = 1: exact ties */
                case 3: x[i] = i == 0 ? -254.0f : -(float)(i % 254) - 1.0f; break; /* m = 0.5: ties at odd */
                case 4: x[i] = 0.0f; break;
                case 5: x[i] = i % 2 ? -0.0f : 0.0f; break;
                case 6: x[i] = i == n / 2 ? INFINITY : (float)i; break;
                case 7: x[i] = i == n - 1 ? NAN : (float)-i; break;
                case 8: x[i] = i % 3 ? 1e-45f : -1e-45f; break; /* amax subnormal: m = Inf */
                case 9: x[i] = (i % 5 - 2) * 3.7e-37f; break;   /* m close to FLT_MAX, finite or not */
                default: x[i] = (float)(i % 7 - 3) * 0.5f * (float)(1 + rep % 3); break; /* many ties */
                }
            }
            float s_lib, s_dc;
            mm_int8_quantize_row_mul_even(x, n, MM_INT8_SCALE_INV_MUL, q_lib, &s_lib);
            memset(q_dc, 0x55, (size_t)n);
            mm_dc_int8_quantize_row(x, n, q_dc, &s_dc);
            rows++;
            if (memcmp(q_lib, q_dc, (size_t)n) != 0 || f32bits(s_lib) != f32bits(s_dc)) {
                if (mismatches++ < 3)
                    fprintf(stderr, "quantizer kind %d rep %d (n %d): scale %08x vs %08x or codes differ\n",
                            kind, rep, n, f32bits(s_lib), f32bits(s_dc));
            }
        }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(rows, 11 * 12);
    /* an exact tie pinned by hand: m = 1, 2.5 -> 2, 3.5 -> 4, -2.5 -> -2 */
    float tie[4] = {127.0f, 2.5f, 3.5f, -2.5f};
    int8_t qt[4];
    float st;
    mm_dc_int8_quantize_row(tie, 4, qt, &st);
    CHECK_EQ_INT(qt[0], 127);
    CHECK_EQ_INT(qt[1], 2);
    CHECK_EQ_INT(qt[2], 4);
    CHECK_EQ_INT(qt[3], -2);
    CHECK_EQ_HEX(f32bits(st), 0x3F800000u);
}

int main(void) {
    quantizer_matches_library();
    hand_computed();
    scenarios();
    determinism();
    return mm_test_finish("test_dispatch_combine");
}
