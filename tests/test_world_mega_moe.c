/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_world_mega_moe.c: MegaMoE driven from one host thread on a persistent world
 * (mm_mega_moe_world_*): y and expert_token_nums bit-identical to mm_mega_moe_run under
 * mm_comm_run_threads for the same inputs, over several calls alternating two layers on buffers and
 * weights created once, at R = 1, 2, 4 and in several scenarios; then the errors: an invalid input on
 * one rank (agreed, "rank N: ...", outputs untouched, the world usable afterwards), missing weights on
 * one rank, NULL and foreign buffers, and a caller-threads world. */
#include "megamoe/world.h"
#include "test_mega_moe_common.h"

enum { LAYERS = 2, MAX_RANKS = 4 };

/* One layer on the world: its case (reference data and the launcher's bits), and each rank's tensors
 * and packed weights. */
typedef struct world_layer {
    moe_case c;
    uint16_t *want_y[MAX_RANKS]; /* the bits of mm_mega_moe_run under mm_comm_run_threads */
    int32_t *want_etn[MAX_RANKS];
    mm_tensor x[MAX_RANKS], scales[MAX_RANKS], ids[MAX_RANKS], tw[MAX_RANKS], mask[MAX_RANKS];
    mm_tensor y[MAX_RANKS], etn[MAX_RANKS];
    moe_tensors *routed[MAX_RANKS], *shared[MAX_RANKS];
    mm_mega_moe_weights *weights[MAX_RANKS];
    mm_mega_moe_inputs in[MAX_RANKS];
    mm_mega_moe_outputs out[MAX_RANKS];
} world_layer;

/* Builds the case, runs it through mm_comm_run_threads (the bits to match), and describes every rank's
 * tensors. Returns 0 on failure (reported). */
static int layer_build(world_layer *L, const moe_spec *sp) {
    memset(L, 0, sizeof *L);
    if (!moe_case_build(&L->c, sp)) return 0;
    moe_run_arg arg;
    memset(&arg, 0, sizeof arg);
    arg.break_rank = -1;
    mm_status st = moe_case_run(&L->c, &arg);
    CHECK_OK(st, &arg.err[0]);
    if (st != MM_OK) return 0;
    moe_case_check(&L->c, "launcher");
    int64_t H = sp->hidden, K = sp->topk, El = sp->experts / sp->ranks;
    mm_ref_attrs ra = moe_ref_attrs(sp);
    for (int r = 0; r < sp->ranks; r++) {
        mm_ref_case_rank *k = &L->c.ref.ranks[r];
        int64_t bs = k->bs, xs[2] = {bs, H}, ks[2] = {bs, K}, ss[2] = {bs, (H + 31) / 32}, ms[1] = {bs},
                es[1] = {El};
        L->want_y[r] = malloc((size_t)(bs * H + 1) * 2);
        L->want_etn[r] = malloc((size_t)El * 4);
        memcpy(L->want_y[r], L->c.y[r], (size_t)(bs * H) * 2);
        memcpy(L->want_etn[r], L->c.etn[r], (size_t)El * 4);
        L->x[r] = ra.x_prequantized ? mm_tensor_make(ra.dispatch_dtype, 2, xs, k->x_quant)
                                    : mm_tensor_make(MM_DTYPE_BF16, 2, xs, k->x_bf16);
        L->scales[r] = mm_tensor_make(MM_DTYPE_E8M0, 2, ss, k->x_scales);
        L->ids[r] = mm_tensor_make(MM_DTYPE_I32, 2, ks, k->topk_ids);
        L->tw[r] = mm_tensor_make(MM_DTYPE_F32, 2, ks, k->topk_weights);
        L->mask[r] = mm_tensor_make(MM_DTYPE_I8, 1, ms, k->x_active_mask);
        L->y[r] = mm_tensor_make(MM_DTYPE_BF16, 2, xs, L->c.y[r]);
        L->etn[r] = mm_tensor_make(MM_DTYPE_I32, 1, es, L->c.etn[r]);
        L->in[r] = (mm_mega_moe_inputs){&L->x[r], ra.x_prequantized ? &L->scales[r] : NULL, &L->ids[r],
                                        &L->tw[r], sp->masked ? &L->mask[r] : NULL};
        L->out[r] = (mm_mega_moe_outputs){&L->y[r], &L->etn[r]};
        L->routed[r] = calloc(1, sizeof *L->routed[r]);
        L->shared[r] = calloc(1, sizeof *L->shared[r]);
        moe_make_weights(&L->c, &k->routed, L->routed[r]);
        moe_make_weights(&L->c, &k->shared, L->shared[r]);
    }
    return 1;
}

/* Packs every rank's weights on its world buffer (local calls, from this thread). */
static int layer_pack(world_layer *L, mm_mega_moe_buffer *const *buffers) {
    int ok = 1;
    for (int r = 0; r < L->c.sp.ranks; r++) {
        mm_error err = {MM_OK, ""};
        mm_status st = mm_mega_moe_weights_create(buffers[r], &L->routed[r]->desc,
                                                  L->c.sp.shared_count ? &L->shared[r]->desc : NULL,
                                                  &L->weights[r], &err);
        CHECK_OK(st, &err);
        ok &= st == MM_OK;
    }
    return ok;
}

static void layer_free(world_layer *L) {
    for (int r = 0; r < L->c.sp.ranks; r++) {
        mm_mega_moe_weights_free(L->weights[r]);
        free(L->routed[r]);
        free(L->shared[r]);
        free(L->want_y[r]);
        free(L->want_etn[r]);
    }
    moe_case_free(&L->c);
}

/* Fills every rank's outputs with a pattern no call produces in full (0xFFFF is a NaN). */
static void layer_poison(world_layer *L) {
    for (int r = 0; r < L->c.sp.ranks; r++) {
        memset(L->c.y[r], 0xFF, (size_t)(L->c.ref.ranks[r].bs * L->c.sp.hidden) * 2);
        memset(L->c.etn[r], 0xFF, (size_t)(L->c.sp.experts / L->c.sp.ranks) * 4);
    }
}

/* 1 when rank r's outputs are the launcher's bits. */
static int layer_matches(const world_layer *L, int r) {
    const moe_spec *sp = &L->c.sp;
    return memcmp(L->c.y[r], L->want_y[r], (size_t)(L->c.ref.ranks[r].bs * sp->hidden) * 2) == 0 &&
           memcmp(L->c.etn[r], L->want_etn[r], (size_t)(sp->experts / sp->ranks) * 4) == 0;
}

static int layer_untouched(const world_layer *L, int r) {
    const uint16_t *y = L->c.y[r];
    for (int64_t q = 0; q < L->c.ref.ranks[r].bs * L->c.sp.hidden; q++)
        if (y[q] != 0xFFFF) return 0;
    return 1;
}

static mm_status layer_run(mm_world *w, mm_mega_moe_buffer *const *buffers, world_layer *L, mm_error *err) {
    return mm_mega_moe_world_run(w, buffers, (const mm_mega_moe_weights *const *)L->weights, &L->c.sp.attrs,
                                 L->in, L->out, err);
}

/* Two layers of one sizing (spec a and b), CALLS calls alternating them on one world. */
static void test_bits(const char *label, const moe_spec *a, const moe_spec *b) {
    enum { CALLS = 6 };
    world_layer *layers = calloc(LAYERS, sizeof *layers);
    int R = a->ranks;
    mm_world *w = NULL;
    mm_mega_moe_buffer *buffers[MAX_RANKS] = {NULL};
    mm_error err = {MM_OK, ""};
    if (!layer_build(&layers[0], a) || !layer_build(&layers[1], b)) goto done;
    CHECK_OK(mm_world_create(R, MM_WORLD_DEFAULT, &w, &err), &err);
    mm_mega_moe_sizing sizing = {a->experts, a->max_tokens, a->topk, a->hidden, a->inter, a->max_recv};
    CHECK_OK(mm_mega_moe_world_buffers_create(w, &sizing, buffers, &err), &err);
    if (!buffers[0] || !layer_pack(&layers[0], buffers) || !layer_pack(&layers[1], buffers)) goto done;
    int mismatches = 0;
    for (int call = 0; call < CALLS; call++) {
        world_layer *L = &layers[call % LAYERS];
        layer_poison(L);
        mm_status st = layer_run(w, buffers, L, &err);
        if (st != MM_OK) fprintf(stderr, "%s call %d: %s\n", label, call, err.message);
        CHECK_OK(st, &err);
        for (int r = 0; r < R; r++) mismatches += !layer_matches(L, r);
    }
    if (mismatches)
        fprintf(stderr, "%s: %d rank outputs differ from mm_comm_run_threads\n", label, mismatches);
    CHECK_EQ_INT(mismatches, 0);
done:
    if (w) CHECK_OK(mm_mega_moe_world_buffers_free(w, buffers, &err), &err);
    for (int r = 0; r < R; r++) CHECK(buffers[r] == NULL);
    CHECK_OK(mm_world_free(w, &err), &err);
    for (int l = 0; l < LAYERS; l++) layer_free(&layers[l]);
    free(layers);
}

static moe_spec base_spec(int ranks, uint64_t seed) {
    moe_spec sp =
        moe_spec_make((moe_dims){ranks, 8, 3, 64, 32, 0, 0}, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, seed);
    sp.max_tokens = 5;
    for (int r = 0; r < ranks; r++) sp.bs[r] = (r * 3 + (int64_t)seed) % 6; /* 0..5 rows, per rank */
    return sp;
}

static void test_bits_all(void) {
    static const int sizes[] = {1, 2, 4};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int R = sizes[k];
        char label[64];
        /* A16W16, decode-like: one token on every rank in one layer, 0..5 in the other */
        moe_spec a = base_spec(R, 11), b = base_spec(R, 12);
        for (int r = 0; r < R; r++) a.bs[r] = 1;
        snprintf(label, sizeof label, "A16W16 R=%d", R);
        test_bits(label, &a, &b);
        /* A8W8-INT with a shared A8W4-INT expert, and the same sizing masked with weights after the
         * activation */
        a = base_spec(R, 21);
        b = base_spec(R, 22);
        a.routed = b.routed = MM_DTYPE_I8;
        a.shared = b.shared = MM_DTYPE_INT4;
        a.shared_count = b.shared_count = 1;
        a.attrs.dispatch_quant_mode = b.attrs.dispatch_quant_mode = 2;
        a.attrs.dispatch_quant_out_dtype = b.attrs.dispatch_quant_out_dtype = MM_DTYPE_I8;
        b.masked = 1;
        b.attrs.topk_weights_type = 1;
        snprintf(label, sizeof label, "A8W8-INT R=%d", R);
        test_bits(label, &a, &b);
    }
    /* MX FP8 with combine quantization and the per-rank reduction on 4 ranks */
    moe_spec a = base_spec(4, 31), b = base_spec(4, 32);
    a.routed = b.routed = a.shared = b.shared = MM_DTYPE_FP8_E4M3FN;
    a.attrs.dispatch_quant_mode = b.attrs.dispatch_quant_mode = 4;
    a.attrs.dispatch_quant_out_dtype = b.attrs.dispatch_quant_out_dtype = MM_DTYPE_FP8_E4M3FN;
    a.attrs.combine_quant_mode = b.attrs.combine_quant_mode = 4;
    b.attrs.combine_quant_mode = 0; /* the per-rank reduction sums BF16 rows */
    b.attrs.combine_comm_mode = 1;
    b.hot = 1;
    test_bits("A8W8-FP R=4", &a, &b);
}

/* ---- errors ------------------------------------------------------------------------------------- */

static void test_errors(void) {
    enum { R = 3 };
    moe_spec sp = base_spec(R, 41);
    sp.experts = 6;
    for (int r = 0; r < R; r++) sp.bs[r] = 2;
    world_layer *L = calloc(1, sizeof *L);
    mm_world *w = NULL;
    mm_mega_moe_buffer *buffers[R] = {NULL};
    mm_error err = {MM_OK, ""};
    if (!layer_build(L, &sp)) goto done;
    CHECK_OK(mm_world_create(R, MM_WORLD_DEFAULT, &w, &err), &err);
    mm_mega_moe_sizing sizing = {sp.experts, sp.max_tokens, sp.topk, sp.hidden, sp.inter, 0};
    CHECK_OK(mm_mega_moe_world_buffers_create(w, &sizing, buffers, &err), &err);
    if (!buffers[0] || !layer_pack(L, buffers)) goto done;

    /* An expert id out of range on rank 1: every rank agrees, nothing is written. */
    int32_t *ids1 = L->c.ref.ranks[1].topk_ids, saved = ids1[1];
    ids1[1] = (int32_t)sp.experts;
    layer_poison(L);
    mm_status st = layer_run(w, buffers, L, &err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, &err);
    CHECK(strcmp(err.message, "rank 1: topk_ids[0][1] = 6 is outside [0, 6)") == 0);
    if (strcmp(err.message, "rank 1: topk_ids[0][1] = 6 is outside [0, 6)") != 0)
        fprintf(stderr, "message: %s\n", err.message);
    for (int r = 0; r < R; r++) CHECK(layer_untouched(L, r));
    ids1[1] = saved;
    /* The world and its buffers go on: the same call now gives the launcher's bits. */
    layer_poison(L);
    CHECK_OK(layer_run(w, buffers, L, &err), &err);
    for (int r = 0; r < R; r++) CHECK(layer_matches(L, r));

    /* Missing weights on rank 2: agreed by the operator's validation. */
    mm_mega_moe_weights *w2 = L->weights[2];
    L->weights[2] = NULL;
    st = layer_run(w, buffers, L, &err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "rank 2: ");
    CHECK_STR_CONTAINS(err.message, "weights");
    L->weights[2] = w2;

    /* Checked on the host: NULL arrays, a NULL or foreign buffer. */
    const mm_mega_moe_weights *const *wts = (const mm_mega_moe_weights *const *)L->weights;
    CHECK_STATUS(mm_mega_moe_world_run(NULL, buffers, wts, &sp.attrs, L->in, L->out, &err),
                 MM_ERR_INVALID_ARGUMENT, &err);
    CHECK(strcmp(err.message, "mm_mega_moe_world_run: world is NULL") == 0);
    CHECK_STATUS(mm_mega_moe_world_run(w, NULL, wts, &sp.attrs, L->in, L->out, &err), MM_ERR_INVALID_ARGUMENT,
                 &err);
    CHECK(strcmp(err.message, "mm_mega_moe_world_run: buffers is NULL") == 0);
    CHECK_STATUS(mm_mega_moe_world_run(w, buffers, NULL, &sp.attrs, L->in, L->out, &err),
                 MM_ERR_INVALID_ARGUMENT, &err);
    CHECK(strcmp(err.message, "mm_mega_moe_world_run: weights is NULL") == 0);
    CHECK_STATUS(mm_mega_moe_world_run(w, buffers, wts, NULL, L->in, L->out, &err), MM_ERR_INVALID_ARGUMENT,
                 &err);
    CHECK(strcmp(err.message, "mm_mega_moe_world_run: attrs is NULL") == 0);
    CHECK_STATUS(mm_mega_moe_world_run(w, buffers, wts, &sp.attrs, NULL, L->out, &err),
                 MM_ERR_INVALID_ARGUMENT, &err);
    CHECK(strcmp(err.message, "mm_mega_moe_world_run: inputs is NULL") == 0);
    CHECK_STATUS(mm_mega_moe_world_run(w, buffers, wts, &sp.attrs, L->in, NULL, &err),
                 MM_ERR_INVALID_ARGUMENT, &err);
    CHECK(strcmp(err.message, "mm_mega_moe_world_run: outputs is NULL") == 0);
    mm_mega_moe_buffer *b1 = buffers[1];
    buffers[1] = NULL;
    CHECK_STATUS(layer_run(w, buffers, L, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK(strcmp(err.message, "mm_mega_moe_world_run: buffers[1] is NULL") == 0);
    /* Freeing some but not all would leave the others waiting. */
    CHECK_STATUS(mm_mega_moe_world_buffers_free(w, buffers, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "buffers[1] is NULL but others are not");
    buffers[1] = buffers[0];
    buffers[0] = b1;
    CHECK_STATUS(layer_run(w, buffers, L, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK(strcmp(err.message, "mm_mega_moe_world_run: buffers[0] was not created on rank 0 of this world "
                              "(mm_mega_moe_world_buffers_create)") == 0);
    buffers[0] = buffers[1];
    buffers[1] = b1;
    CHECK_STATUS(mm_mega_moe_world_buffers_create(NULL, &sizing, buffers + 0, &err), MM_ERR_INVALID_ARGUMENT,
                 &err);
    CHECK_STATUS(mm_mega_moe_world_buffers_create(w, NULL, buffers, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK(strcmp(err.message, "mm_mega_moe_world_buffers_create: sizing is NULL") == 0);
    CHECK_STATUS(mm_mega_moe_world_buffers_free(w, NULL, &err), MM_ERR_INVALID_ARGUMENT, &err);

    /* A sizing the operator refuses: agreed, no buffer made. */
    mm_mega_moe_buffer *more[R] = {NULL};
    mm_mega_moe_sizing bad = sizing;
    bad.moe_expert_num = 7; /* not a multiple of R = 3 */
    st = mm_mega_moe_world_buffers_create(w, &bad, more, &err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "moe_expert_num = 7");
    for (int r = 0; r < R; r++) CHECK(more[r] == NULL);
    CHECK_OK(mm_mega_moe_world_buffers_free(w, more, &err), &err); /* all NULL: nothing to do */

    /* After all that, the world still computes the same bits. */
    layer_poison(L);
    CHECK_OK(layer_run(w, buffers, L, &err), &err);
    for (int r = 0; r < R; r++) CHECK(layer_matches(L, r));

    /* A caller-threads world has no threads to drive. */
    mm_world *cw = NULL;
    CHECK_OK(mm_world_create(R, MM_WORLD_CALLER_THREADS, &cw, &err), &err);
    CHECK_STATUS(mm_mega_moe_world_buffers_create(cw, &sizing, more, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "MM_WORLD_CALLER_THREADS");
    CHECK_OK(mm_world_free(cw, &err), &err);
done:
    if (w) CHECK_OK(mm_mega_moe_world_buffers_free(w, buffers, &err), &err);
    CHECK_OK(mm_world_free(w, &err), &err);
    layer_free(L);
    free(L);
}

int main(void) {
    test_bits_all();
    test_errors();
    return mm_test_finish("test_world_mega_moe");
}
