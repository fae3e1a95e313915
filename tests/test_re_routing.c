/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_re_routing.c: MoeReRouting against the spec's worked example, the naive reference of
 * test_re_routing_case.h over random shapes, every token and scale format, INT32/INT64 counts, both index
 * and count types, long rows and empty cases. Validation rules are in test_re_routing_validation.c. */
#include <pthread.h>

#include "core/parallel.h"
#include "test_re_routing_case.h"

static uint16_t bf16_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for the small integers used here */
}

static void test_worked_example(void) {
    const int64_t counts[4] = {1, 2, 3, 1};
    const int64_t gather[7] = {0, 3, 4, 5, 1, 2, 6}, scatter[7] = {0, 4, 5, 1, 2, 3, 6};
    const mm_dtype count_types[2] = {MM_DTYPE_I32, MM_DTYPE_I64};
    for (int ct = 0; ct < 2; ct++)
        for (int idx_type = 0; idx_type < 2; idx_type++)
            for (int num_type = 0; num_type < 2; num_type++) {
                rr_case c;
                case_init(&c, MM_DTYPE_BF16, 7, 3, count_types[ct], 2, 2, counts, MM_DTYPE_F32, 1, 0, NULL);
                uint16_t *tok = c.tokens.data;
                float *sc = c.scales.data;
                for (int i = 0; i < 7; i++) {
                    for (int j = 0; j < 3; j++) tok[i * 3 + j] = bf16_of((float)(10 * i + j));
                    sc[i] = 0.5f + (float)i;
                }
                mm_re_routing_attrs attrs = {.expert_token_num_type = num_type, .idx_type = idx_type};
                mm_error err_record, *err = &err_record;
                CHECK_OK(mm_re_routing(&c.in, &attrs, &c.out, err), err);
                const uint16_t *ptok = c.out_tokens.data;
                const float *psc = c.out_scales.data;
                const int32_t *idx = c.out_idx.data;
                for (int d = 0; d < 7; d++) {
                    for (int j = 0; j < 3; j++)
                        CHECK_EQ_HEX(ptok[d * 3 + j], bf16_of((float)(10 * gather[d] + j)));
                    CHECK_NEAR(psc[d], 0.5 + (double)gather[d], 0);
                    CHECK_EQ_INT(idx[d], idx_type == 0 ? gather[d] : scatter[d]);
                }
                CHECK_EQ_INT(read_count_at(&c.out_num, 0), 4);
                CHECK_EQ_INT(read_count_at(&c.out_num, 1), num_type == 1 ? 3 : 7);
                case_free(&c);
            }
}

static void test_defaults_and_output_shapes(void) {
    const int64_t counts[4] = {1, 2, 3, 1};
    rr_case c;
    case_init(&c, MM_DTYPE_FP8_E4M3FN, 7, 5, MM_DTYPE_I64, 2, 2, counts, MM_DTYPE_E8M0, 2, 3, NULL);
    mm_re_routing_attrs def = mm_re_routing_default_attrs();
    CHECK_EQ_INT(def.expert_token_num_type, 1);
    CHECK_EQ_INT(def.idx_type, 0);
    mm_tensor pt, ps, pi, pn;
    mm_error err_record, *err = &err_record;
    CHECK_OK(mm_re_routing_plan(&c.in, NULL, &pt, &ps, &pi, &pn, err), err);
    CHECK_EQ_INT(pt.dtype, MM_DTYPE_FP8_E4M3FN);
    CHECK_EQ_INT(pt.ndim, 2);
    CHECK_EQ_INT(pt.shape[0], 7);
    CHECK_EQ_INT(pt.shape[1], 5);
    CHECK(pt.data == NULL);
    CHECK_EQ_INT(ps.dtype, MM_DTYPE_E8M0);
    CHECK_EQ_INT(ps.ndim, 2);
    CHECK_EQ_INT(ps.shape[1], 3);
    CHECK_EQ_INT(pi.dtype, MM_DTYPE_I32);
    CHECK_EQ_INT(pi.ndim, 1);
    CHECK_EQ_INT(pi.shape[0], 7);
    CHECK_EQ_INT(pn.dtype, MM_DTYPE_I64);
    CHECK_EQ_INT(pn.ndim, 1);
    CHECK_EQ_INT(pn.shape[0], 2);
    /* NULL attrs = defaults: counts and a gather index. */
    CHECK_OK(mm_re_routing(&c.in, NULL, &c.out, err), err);
    CHECK_EQ_INT(check_against_reference(&c, &def), 0);
    CHECK_EQ_INT(((int32_t *)c.out_idx.data)[1], 3);
    case_free(&c);
}

/* Random counts (with many zeros) for n x e; returns their sum. */
static int64_t random_counts(int64_t *counts, int64_t n, int64_t e, int64_t max_count, uint64_t *rng) {
    int64_t sum = 0;
    for (int64_t i = 0; i < n * e; i++) {
        uint64_t u = mm_test_rand_u64(rng);
        counts[i] = (u & 3) == 0 ? 0 : (int64_t)((u >> 8) % (uint64_t)(max_count + 1));
        sum += counts[i];
    }
    return sum;
}

static void test_random_against_reference(void) {
    static const mm_dtype token_types[] = {MM_DTYPE_F16,      MM_DTYPE_BF16,       MM_DTYPE_I8,
                                           MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_HIFLOAT8,
                                           MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E1M2};
    uint64_t rng = 12345;
    int64_t counts[8 * 9];
    for (int iter = 0; iter < 300; iter++) {
        mm_dtype dtype = token_types[iter % 8];
        int64_t n = (int64_t)(mm_test_rand_u64(&rng) % 6), e = (int64_t)(mm_test_rand_u64(&rng) % 7);
        int64_t a = random_counts(counts, n, e, 6, &rng);
        int64_t h = 1 + (int64_t)(mm_test_rand_u64(&rng) % 40); /* odd and even, also for 4-bit types */
        int scale_kind =
            (int)(mm_test_rand_u64(&rng) % 5); /* none, f32 (A), f32 (A,k), e8m0 (A), e8m0 (A,k) */
        mm_dtype sdt = scale_kind >= 3 ? MM_DTYPE_E8M0 : MM_DTYPE_F32;
        int sndim = scale_kind == 0 ? 0 : (scale_kind % 2 == 1 ? 1 : 2);
        int64_t scols = 1 + (int64_t)(mm_test_rand_u64(&rng) % 4);
        mm_dtype cdt = (iter / 8) % 2 ? MM_DTYPE_I64 : MM_DTYPE_I32;
        rr_case c;
        case_init(&c, dtype, a, h, cdt, n, e, counts, sdt, sndim, scols, &rng);
        mm_re_routing_attrs attrs = {.expert_token_num_type = (iter / 2) % 2, .idx_type = (iter / 3) % 2};
        mm_error err_record, *err = &err_record;
        CHECK_OK(mm_re_routing(&c.in, &attrs, &c.out, err), err);
        CHECK_EQ_INT(check_against_reference(&c, &attrs), 0);
        case_free(&c);
    }
}

/* Large enough for many parallel tasks, with big blocks split across tasks and tiny ones grouped. */
static void test_large_parallel(void) {
    uint64_t rng = 777;
    int64_t counts[16 * 8];
    for (int iter = 0; iter < 4; iter++) {
        int64_t n = 16, e = 8;
        int64_t a = 0;
        for (int64_t i = 0; i < n * e; i++) {
            uint64_t u = mm_test_rand_u64(&rng);
            counts[i] = (i % 7 == 0) ? 300 + (int64_t)(u % 400) : (int64_t)(u % 5);
            a += counts[i];
        }
        rr_case c;
        case_init(&c, iter % 2 ? MM_DTYPE_FP4_E2M1 : MM_DTYPE_BF16, a, 257 + iter, MM_DTYPE_I32, n, e, counts,
                  MM_DTYPE_F32, 2, 2, &rng);
        mm_re_routing_attrs attrs = {.expert_token_num_type = iter / 2, .idx_type = iter % 2};
        mm_error err_record, *err = &err_record;
        CHECK_OK(mm_re_routing(&c.in, &attrs, &c.out, err), err);
        CHECK_EQ_INT(check_against_reference(&c, &attrs), 0);
        case_free(&c);
    }
}

/* No limit on H below 16384 (the original's hardware limit): a CPU row may be any length. */
static void test_long_rows(void) {
    const int64_t counts[2] = {2, 1};
    uint64_t rng = 5;
    rr_case c;
    case_init(&c, MM_DTYPE_I8, 3, 20000, MM_DTYPE_I64, 1, 2, counts, MM_DTYPE_F32, 0, 0, &rng);
    mm_re_routing_attrs attrs = mm_re_routing_default_attrs();
    mm_error err_record, *err = &err_record;
    CHECK_OK(mm_re_routing(&c.in, &attrs, &c.out, err), err);
    CHECK_EQ_INT(check_against_reference(&c, &attrs), 0);
    case_free(&c);
}

static void test_empty(void) {
    const int64_t zeros[6] = {0};
    struct {
        int64_t n, e;
    } shapes[] = {{2, 3}, {0, 0}, {0, 4}, {3, 0}};
    for (int s = 0; s < 4; s++)
        for (int num_type = 0; num_type < 2; num_type++) {
            rr_case c;
            case_init(&c, MM_DTYPE_BF16, 0, 8, MM_DTYPE_I32, shapes[s].n, shapes[s].e, zeros, MM_DTYPE_F32, 2,
                      4, NULL);
            mm_re_routing_attrs attrs = {.expert_token_num_type = num_type, .idx_type = 0};
            mm_error err_record, *err = &err_record;
            CHECK_OK(mm_re_routing(&c.in, &attrs, &c.out, err), err);
            for (int64_t x = 0; x < shapes[s].e; x++) CHECK_EQ_INT(read_count_at(&c.out_num, x), 0);
            case_free(&c);
        }

    /* N = 2^40 ranks and E = 0 experts: no count at all, so validation must not walk the N rows (it
     * once did, for hours). With A = 0 the call succeeds; with A = 3 the empty sum is the error. */
    const int64_t no_tokens[2] = {0, 8}, three_tokens[2] = {3, 8}, counts_shape[2] = {(int64_t)1 << 40, 0},
                  no_rows[1] = {0}, three_rows[1] = {3};
    uint16_t token_data[3 * 8] = {0}, permuted[3 * 8];
    int32_t idx[3];
    mm_tensor counts = mm_tensor_make(MM_DTYPE_I32, 2, counts_shape, NULL);
    mm_tensor num = mm_tensor_make(MM_DTYPE_I32, 1, no_rows, NULL);
    mm_tensor tokens = mm_tensor_make(MM_DTYPE_BF16, 2, no_tokens, NULL);
    mm_tensor out_tokens = mm_tensor_make(MM_DTYPE_BF16, 2, no_tokens, NULL);
    mm_tensor out_idx = mm_tensor_make(MM_DTYPE_I32, 1, no_rows, NULL);
    mm_re_routing_inputs in = {&tokens, &counts, NULL};
    mm_re_routing_outputs out = {&out_tokens, NULL, &out_idx, &num};
    mm_error err_record, *err = &err_record;
    CHECK_OK(mm_re_routing(&in, NULL, &out, err), err);
    tokens = mm_tensor_make(MM_DTYPE_BF16, 2, three_tokens, token_data);
    out_tokens = mm_tensor_make(MM_DTYPE_BF16, 2, three_tokens, permuted);
    out_idx = mm_tensor_make(MM_DTYPE_I32, 1, three_rows, idx);
    CHECK_STATUS(mm_re_routing(&in, NULL, &out, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message,
                       "sum of expert_token_num_per_rank = 0 differs from the token count A = 3");
}

/* Ranks running as threads call the operator at once, each on its own tensors. */
typedef struct rank_call {
    uint64_t seed;
    int64_t bad;
} rank_call;

static void *run_rank(void *arg) {
    rank_call *call = arg;
    int64_t counts[4 * 8];
    for (int iter = 0; iter < 10; iter++) {
        int64_t a = random_counts(counts, 4, 8, 200, &call->seed);
        rr_case c;
        case_init(&c, MM_DTYPE_BF16, a, 96, MM_DTYPE_I64, 4, 8, counts, MM_DTYPE_F32, 1, 0, &call->seed);
        mm_re_routing_attrs attrs = {.expert_token_num_type = iter % 2, .idx_type = (iter / 2) % 2};
        if (mm_re_routing(&c.in, &attrs, &c.out, NULL) != MM_OK)
            call->bad++;
        else
            call->bad += check_against_reference(&c, &attrs);
        case_free(&c);
    }
    return NULL;
}

static void test_concurrent_ranks(void) {
    enum { RANKS = 6 };
    pthread_t threads[RANKS];
    rank_call calls[RANKS];
    for (int r = 0; r < RANKS; r++) {
        calls[r] = (rank_call){.seed = 1000 + (uint64_t)r, .bad = 0};
        CHECK_EQ_INT(pthread_create(&threads[r], NULL, run_rank, &calls[r]), 0);
    }
    for (int r = 0; r < RANKS; r++) pthread_join(threads[r], NULL);
    for (int r = 0; r < RANKS; r++) CHECK_EQ_INT(calls[r].bad, 0);
}

int main(void) {
    mm_parallel_set_num_threads(4); /* exercise the pool even on small machines */
    test_worked_example();
    test_defaults_and_output_shapes();
    test_random_against_reference();
    test_large_parallel();
    test_long_rows();
    test_empty();
    test_concurrent_ranks();
    return mm_test_finish("test_re_routing");
}
