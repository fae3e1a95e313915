/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_mega_moe_combine_order.c: MegaMoE's combine pinned by hand-built calls whose terms cancel.
 *
 * docs/mega_moe.md: combine mode 0 starts from +0 in F32, adds w_k * O_k for k = 0..K-1 in k order, then
 * each shared expert's row in order, and rounds once to BF16. With terms 2^27, 1 and -2^27 an F32 sum
 * gives 0 or 1 depending on the order (2^27 + 1 rounds back to 2^27: the F32 ulp there is 16), so the
 * exact bits of y pin the order. combine_quant_mode 3 / 4 send routed rows as MX E5M2 / E4M3: 1.125 is
 * exact in E4M3 (3 mantissa bits) and a tie between 1 and 1.25 in E5M2 (2 bits), which rounds to even, 1.
 *
 * Every expert is built so that its output row is a chosen BF16 vector O, exactly: x = e_0 (one 1.0 in
 * column 0), weight1 puts 128 in both gate columns and 1 in the first up column (gate = 128, up = [1, 0];
 * silu(128) = 128 exactly, since exp(-128) vanishes next to 1 in F32), so the activation row is [128, 0];
 * weight2's first row is O / 128 (powers of two: exact), its second row 0. One rank, one token, K = 3,
 * every routing weight 1. */
#include <stdlib.h>
#include <string.h>

#include "megamoe/comm.h"
#include "megamoe/mega_moe.h"
#include "testlib.h"

enum { H = 32, I = 2, E = 4, K = 3, S_MAX = 2 };

#define BIG (134217728.0f) /* 2^27 */

typedef struct order_case {
    float routed[E][H]; /* O of each routed expert (ids 0..2 are routed to, in k order) */
    float shared[S_MAX][H];
    int shared_count;
    int combine_quant_mode;
    uint16_t y[H]; /* result */
    mm_status status;
    mm_error err;
} order_case;

static uint16_t bf16_of(float f) { /* the values used here are exact in BF16 */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* weight1 (count, H, 2I) and weight2 (count, I, H) giving output rows out[e]. */
static void make_weights(int count, float (*out)[H], uint16_t *w1, uint16_t *w2) {
    memset(w1, 0, sizeof(uint16_t) * (size_t)count * H * 2 * I);
    memset(w2, 0, sizeof(uint16_t) * (size_t)count * I * H);
    for (int e = 0; e < count; e++) {
        uint16_t *a = w1 + (size_t)e * H * 2 * I; /* row 0 = input column 0 */
        a[0] = a[1] = bf16_of(128.0f);            /* gate columns 0..I-1 */
        a[I] = bf16_of(1.0f);                     /* first up column */
        for (int h = 0; h < H; h++) w2[(size_t)e * I * H + h] = bf16_of(out[e][h] / 128.0f);
    }
}

static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    order_case *c = arg;
    uint16_t x[H] = {0}, w1[E * H * 2 * I], w2[E * I * H], sw1[S_MAX * H * 2 * I], sw2[S_MAX * I * H];
    int32_t ids[K] = {0, 1, 2};
    float weights[K] = {1.0f, 1.0f, 1.0f};
    int32_t etn[E];
    x[0] = bf16_of(1.0f);
    make_weights(E, c->routed, w1, w2);
    make_weights(c->shared_count ? c->shared_count : 1, c->shared, sw1, sw2);
    int64_t xs[2] = {1, H}, ks[2] = {1, K}, w1s[3] = {E, H, 2 * I}, w2s[3] = {E, I, H}, es[1] = {E};
    int64_t sw1s[3] = {c->shared_count, H, 2 * I}, sw2s[3] = {c->shared_count, I, H};
    mm_tensor tx = mm_tensor_make(MM_DTYPE_BF16, 2, xs, x), tids = mm_tensor_make(MM_DTYPE_I32, 2, ks, ids);
    mm_tensor tw = mm_tensor_make(MM_DTYPE_F32, 2, ks, weights),
              ty = mm_tensor_make(MM_DTYPE_BF16, 2, xs, c->y);
    mm_tensor tetn = mm_tensor_make(MM_DTYPE_I32, 1, es, etn);
    mm_tensor tw1 = mm_tensor_make(MM_DTYPE_BF16, 3, w1s, w1),
              tw2 = mm_tensor_make(MM_DTYPE_BF16, 3, w2s, w2);
    mm_tensor tsw1 = mm_tensor_make(MM_DTYPE_BF16, 3, sw1s, sw1),
              tsw2 = mm_tensor_make(MM_DTYPE_BF16, 3, sw2s, sw2);
    mm_mega_moe_expert_weights routed, shared;
    memset(&routed, 0, sizeof routed);
    memset(&shared, 0, sizeof shared);
    routed.count = E, routed.weight1 = &tw1, routed.weight2 = &tw2;
    shared.count = c->shared_count, shared.weight1 = &tsw1, shared.weight2 = &tsw2;
    mm_mega_moe_sizing sizing = {E, 1, K, H, I, 0};
    mm_mega_moe_attrs attrs = mm_mega_moe_default_attrs();
    attrs.combine_quant_mode = c->combine_quant_mode;
    mm_mega_moe_buffer *buf = NULL;
    mm_mega_moe_weights *w = NULL;
    mm_status st = mm_mega_moe_buffer_create(comm, &sizing, &buf, err);
    if (st == MM_OK) st = mm_mega_moe_weights_create(buf, &routed, c->shared_count ? &shared : NULL, &w, err);
    mm_mega_moe_inputs in = {&tx, NULL, &tids, &tw, NULL};
    mm_mega_moe_outputs out = {&ty, &tetn};
    if (st == MM_OK) st = mm_mega_moe_run(buf, w, &attrs, &in, &out, err);
    mm_mega_moe_weights_free(w);
    mm_mega_moe_buffer_free(buf, NULL);
    return st;
}

static void run(order_case *c) {
    for (int h = 0; h < H; h++) c->y[h] = 0xFFFF; /* a NaN: an untouched column cannot pass */
    mm_error_clear(&c->err);
    c->status = mm_comm_run_threads(1, rank_fn, c, NULL, NULL, &c->err);
    CHECK_OK(c->status, &c->err);
}

/* Routed terms in k order, then the shared rows in order: each column cancels only in that order. */
static void summation_order(void) {
    static order_case c;
    memset(&c, 0, sizeof c);
    c.shared_count = 2;
    /* column: O_0, O_1, O_2 (routed, k order) | shared_0, shared_1 -> y in the documented order */
    static const float cols[6][5] = {
        {BIG, 1, -BIG, 0, 0}, /* (2^27 + 1) - 2^27 = 0; the order 0, 2, 1 would give 1 */
        {1, BIG, -BIG, 0, 0}, /* (1 + 2^27) - 2^27 = 0; reverse k order would give 1 */
        {BIG, -BIG, 1, 0, 0}, /* (2^27 - 2^27) + 1 = 1 */
        {BIG, -BIG, 0, 1, 0}, /* routed before shared: 0 + 1 = 1; shared first would give 0 */
        {BIG, 0, 0, -BIG, 1}, /* shared rows in order: (2^27 - 2^27) + 1 = 1; reversed they give 0 */
        {0, 0, 0, -BIG, BIG}, /* -2^27 + 2^27 = +0 (not -0) */
    };
    static const uint16_t expected[6] = {0x0000, 0x0000, 0x3F80, 0x3F80, 0x3F80, 0x0000};
    for (int h = 0; h < 6; h++) {
        for (int k = 0; k < K; k++) c.routed[k][h] = cols[h][k];
        c.shared[0][h] = cols[h][3];
        c.shared[1][h] = cols[h][4];
    }
    run(&c);
    for (int h = 0; h < 6; h++) CHECK_EQ_HEX(c.y[h], expected[h]);
    for (int h = 6; h < H; h++) CHECK_EQ_HEX(c.y[h], 0x0000);
}

/* combine_quant_mode: 0 keeps 1.125, 4 (E4M3) keeps it, 3 (E5M2) rounds the tie to even: 1. */
static void quant_formats(void) {
    static const struct {
        int mode;
        uint16_t y0;
    } modes[] = {{0, 0x3F90}, {4, 0x3F90}, {3, 0x3F80}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        static order_case c;
        memset(&c, 0, sizeof c);
        c.combine_quant_mode = modes[m].mode;
        c.routed[0][0] = 1.125f;
        c.routed[0][1] = 0.5f; /* exact in both: the block's other values survive */
        run(&c);
        CHECK_EQ_HEX(c.y[0], modes[m].y0);
        CHECK_EQ_HEX(c.y[1], 0x3F00);
        for (int h = 2; h < H; h++) CHECK_EQ_HEX(c.y[h], 0x0000);
    }
}

int main(void) {
    summation_order();
    quant_formats();
    return mm_test_finish("mega_moe_combine_order");
}
