/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_mega_moe_schedule.c: the performance paths of MegaMoE keep the numerics.
 *
 *   (the row kernels and activations are tested in test_ffn_rowops.c and test_ffn_activation_table.c)
 *   - fused activation (GEMM1 epilogue over gate/up interleaved panels) vs the unfused pass: the same
 *     y bits for every scenario and gated activation, odd I (a padded last panel), topk_weights_type 1,
 *     shared experts, combine quantization; and both within tolerance of the float64 reference.
 *   - scheduling: a hot expert (every token's first expert), many experts without rows, BS = 0 ranks,
 *     decode-sized calls, all combine modes: within tolerance of the reference, and the same bits with
 *     1 and 2 pool threads.
 *     The stats of each call name its batches' experts with the rows expert_token_nums gives them.
 *   - the compute gate: concurrent ranks never exceed its capacity and all get through. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "core/parallel.h"
#include "ops/mega_moe/gate.h"
#include "test_mega_moe_common.h"

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
    /* inter 40 is not a multiple of 16: the last interleaved panel is half padding */
    return moe_spec_make((moe_dims){ranks, 4 * ranks, 3, 96, 40, 6, 5}, sc->weights, sc->mode, sc->dispatch,
                         seed);
}

/* Runs the case (fused or not, with `threads` pool threads); copies every rank's y into ys and, when
 * stats is not NULL, every rank's stats of the call into stats. */
static int run_into(moe_case *c, int unfused, int threads, uint16_t **ys, mm_mega_moe_stats *stats) {
    moe_run_arg arg;
    memset(&arg, 0, sizeof arg);
    arg.break_rank = -1;
    arg.unfused = unfused;
    arg.stats = stats;
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
    if (run_into(&c, 1, 2, fused, NULL)) {
        double e = moe_case_check(&c, label);
        if (run_into(&c, 0, 2, plain, NULL)) {
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
            static const int counts[] = {1, 1, 3, 2};
            static const float params[][3] = {
                {0.3f}, {0.3f}, {0.3f, 1.702f, 1.0f}, {2.0f, 0.5f}}; /* clamps hit */
            moe_set_activation(&sp.attrs, (mm_mega_moe_activation)act, counts[act], params[act]);
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

/* The stats' batches against the reference's expert_token_nums: every local expert with rows has one
 * record (global id, those rows), one without rows none; the records' batches are 0 .. batch_count - 1,
 * each with exactly one gemm1, activation and gemm2 event, and no other event names a batch; the first
 * event is the dispatch. */
static void check_expert_records(const moe_case *c, const mm_mega_moe_stats *stats, const char *label) {
    int64_t El = c->sp.experts / c->sp.ranks;
    for (int r = 0; r < c->sp.ranks; r++) {
        const mm_mega_moe_stats *s = &stats[r];
        const int32_t *want = c->ref.ranks[r].expert_token_nums;
        int bad = 0, expected = 0;
        for (int64_t j = 0; j < El; j++) {
            int found = 0;
            for (int q = 0; q < s->expert_count; q++)
                if (s->experts[q].expert == r * El + j) {
                    found++;
                    bad |= s->experts[q].rows != want[j] || s->experts[q].batch < 0 ||
                           s->experts[q].batch >= s->batch_count;
                }
            bad |= found != (want[j] > 0);
            expected += want[j] > 0;
        }
        bad |= s->expert_count != expected || s->event_count < 1 ||
               s->events[0].stage != MM_MEGA_MOE_STAGE_DISPATCH;
        for (int b = 0; b < s->batch_count; b++) {
            int per_stage[MM_MEGA_MOE_STAGE_COUNT] = {0};
            for (int i = 0; i < s->event_count; i++)
                if (s->events[i].batch == b) per_stage[s->events[i].stage]++;
            bad |= per_stage[MM_MEGA_MOE_STAGE_GEMM1] != 1 || per_stage[MM_MEGA_MOE_STAGE_ACTIVATION] != 1 ||
                   per_stage[MM_MEGA_MOE_STAGE_GEMM2] != 1 || per_stage[MM_MEGA_MOE_STAGE_DISPATCH] != 0 ||
                   per_stage[MM_MEGA_MOE_STAGE_SHARED] != 0 || per_stage[MM_MEGA_MOE_STAGE_COMBINE] != 0;
        }
        for (int i = 0; i < s->event_count; i++) bad |= s->events[i].batch >= s->batch_count;
        CHECK(!bad);
        if (bad) fprintf(stderr, "  %s rank %d: expert records disagree with expert_token_nums\n", label, r);
    }
}

/* Within tolerance of the reference, the same bits with 1 and 2 pool threads, and the stats' expert
 * records right. */
static void schedule_case(const moe_spec *sp, const char *label) {
    moe_case c;
    if (!moe_case_build(&c, sp)) {
        CHECK(0);
        return;
    }
    uint16_t *one[8] = {0}, *two[8] = {0};
    mm_mega_moe_stats stats[8];
    if (run_into(&c, 0, 1, one, stats)) {
        check_expert_records(&c, stats, label);
        double e = moe_case_check(&c, label);
        if (run_into(&c, 0, 2, two, NULL)) check_same_y(&c, one, two, label);
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
    test_gate();
    test_fused_vs_unfused();
    test_scheduling();
    return mm_test_finish("test_mega_moe_schedule");
}
