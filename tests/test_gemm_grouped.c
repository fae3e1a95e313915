/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_gemm_grouped.c: mm_gemm_grouped over several experts: zero-row experts, a hot expert
 * larger than one M-block, results per group against the independent expectation, identical bits with
 * 1 and 2 threads (and so with different numbers of panels per task), the epilogue hook (with and without an
 * output matrix), and validation before any computation. */
#include <stdatomic.h>

#include "core/parallel.h"
#include "test_gemm_common.h"

#define N_EXPERTS 6
static const int64_t expert_rows[N_EXPERTS] = {0, 3, 0, 300, 1, 0};

typedef struct experts {
    gemm_case cases[N_EXPERTS];
    mm_gemm_packed_weights *w[N_EXPERTS];
    float *out[N_EXPERTS];
    mm_gemm_group groups[N_EXPERTS];
} experts;

static void experts_make(experts *e, mm_dtype a, mm_dtype w, int64_t k, int64_t n) {
    mm_error err_storage, *err = &err_storage;
    for (int g = 0; g < N_EXPERTS; g++) {
        gemm_case_make(&e->cases[g], a, w, expert_rows[g], k, n, g & 1, 1, 1000u + (uint64_t)g);
        mm_gemm_weight_desc d = gemm_case_weights(&e->cases[g]);
        CHECK_OK(mm_gemm_pack_weights(&d, &e->w[g], err), err);
        e->out[g] = calloc((size_t)(expert_rows[g] * n + 1), sizeof(float));
        e->groups[g] = gemm_case_group(&e->cases[g], e->w[g], e->out[g], n);
    }
}

static void experts_free(experts *e) {
    for (int g = 0; g < N_EXPERTS; g++) {
        gemm_case_free(&e->cases[g]);
        mm_gemm_packed_free(e->w[g]);
        free(e->out[g]);
    }
}

static int matches_expectation(const gemm_case *c, const float *out) {
    int bad = 0;
    double value;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t j = 0; j < c->n; j++) bad += !gemm_case_output_ok(c, r, j, out[r * c->n + j], 1, &value);
    return bad == 0;
}

/* Epilogue that copies each tile into a second set of buffers and doubles the values in place. */
typedef struct copy_ctx {
    float *copies[N_EXPERTS];
    int64_t n;
    atomic_int tiles;
    int double_in_place;
} copy_ctx;

static void copy_tile(void *ctx, int64_t group, int64_t row0, int64_t col0, int rows, int cols, float *tile,
                      int64_t ld) {
    copy_ctx *cc = ctx;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            cc->copies[group][(row0 + r) * cc->n + col0 + j] = tile[r * ld + j];
            if (cc->double_in_place) tile[r * ld + j] *= 2.0f;
        }
    atomic_fetch_add(&cc->tiles, 1);
}

static void check_pair(mm_dtype a, mm_dtype w, int64_t k, int64_t n) {
    mm_error err_storage, *err = &err_storage;
    experts e;
    experts_make(&e, a, w, k, n);
    /* Zero-row experts need no weights at all. */
    e.groups[0].w = NULL;
    e.groups[0].a = NULL;

    mm_parallel_set_num_threads(1);
    CHECK_OK(mm_gemm_grouped(a, N_EXPERTS, e.groups, NULL, err), err);
    float *single[N_EXPERTS];
    for (int g = 0; g < N_EXPERTS; g++) {
        CHECK(matches_expectation(&e.cases[g], e.out[g]));
        single[g] = malloc((size_t)(expert_rows[g] * n + 1) * sizeof(float));
        memcpy(single[g], e.out[g], (size_t)(expert_rows[g] * n) * sizeof(float));
        memset(e.out[g], 0, (size_t)(expert_rows[g] * n) * sizeof(float));
    }
    /* Determinism: the same bits with 2 threads. */
    mm_parallel_set_num_threads(2);
    CHECK_OK(mm_gemm_grouped(a, N_EXPERTS, e.groups, NULL, err), err);
    for (int g = 0; g < N_EXPERTS; g++)
        CHECK(memcmp(single[g], e.out[g], (size_t)(expert_rows[g] * n) * sizeof(float)) == 0);

    /* Epilogue without output matrices: the tiles cover every element once, with the same bits. */
    copy_ctx cc = {.n = n};
    atomic_init(&cc.tiles, 0);
    for (int g = 0; g < N_EXPERTS; g++) {
        cc.copies[g] = calloc((size_t)(expert_rows[g] * n + 1), sizeof(float));
        e.groups[g].c = NULL;
    }
    mm_gemm_options opts = {.epilogue = copy_tile, .epilogue_ctx = &cc};
    CHECK_OK(mm_gemm_grouped(a, N_EXPERTS, e.groups, &opts, err), err);
    for (int g = 0; g < N_EXPERTS; g++)
        CHECK(memcmp(single[g], cc.copies[g], (size_t)(expert_rows[g] * n) * sizeof(float)) == 0);
    CHECK(atomic_load(&cc.tiles) > 0);

    /* Epilogue rewriting the output matrix in place. */
    cc.double_in_place = 1;
    for (int g = 0; g < N_EXPERTS; g++) e.groups[g].c = e.out[g];
    CHECK_OK(mm_gemm_grouped(a, N_EXPERTS, e.groups, &opts, err), err);
    int doubled = 1;
    for (int g = 0; g < N_EXPERTS; g++)
        for (int64_t i = 0; i < expert_rows[g] * n; i++) doubled &= e.out[g][i] == 2.0f * single[g][i];
    CHECK(doubled);

    for (int g = 0; g < N_EXPERTS; g++) free(single[g]), free(cc.copies[g]);
    experts_free(&e);
}

static void check_validation(void) {
    mm_error err_storage, *err = &err_storage;
    experts e;
    experts_make(&e, MM_DTYPE_I8, MM_DTYPE_I8, 40, 20);
    float sentinel = -12345.0f;
    for (int64_t i = 0; i < 3 * 20; i++) e.out[1][i] = sentinel;

    e.groups[4].rows = -3;
    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_I8, N_EXPERTS, e.groups, NULL, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "groups[4].rows = -3 is negative");
    CHECK(e.out[1][0] == sentinel && e.out[1][59] == sentinel); /* nothing computed before validation ended */
    e.groups[4].rows = 1;

    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_BF16, N_EXPERTS, e.groups, NULL, err), MM_ERR_INVALID_ARGUMENT,
                 err);
    CHECK_STR_CONTAINS(err->message,
                       "activation dtype bf16 with weight dtype int8 is not a supported GEMM pair");

    e.groups[3].a_row_scales = NULL;
    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_I8, N_EXPERTS, e.groups, NULL, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "groups[3].a_row_scales is NULL");
    e.groups[3].a_row_scales = e.cases[3].a_row_scales;

    e.groups[3].a_stride = 39;
    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_I8, N_EXPERTS, e.groups, NULL, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "groups[3].a_stride = 39 is below the row size 40 bytes");
    e.groups[3].a_stride = e.cases[3].a_stride;

    e.groups[1].c = NULL;
    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_I8, N_EXPERTS, e.groups, NULL, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "groups[1].c is NULL and there is no epilogue");
    e.groups[1].c = e.out[1];

    e.groups[1].ldc = 19;
    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_I8, N_EXPERTS, e.groups, NULL, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "groups[1].ldc = 19 is below the 20 output columns");
    e.groups[1].ldc = 20;

    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_I8, -1, e.groups, NULL, err), MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "n_groups = -1 is negative");
    CHECK_OK(mm_gemm_grouped(MM_DTYPE_I8, 0, NULL, NULL, err), err);
    CHECK(e.out[1][0] == sentinel);
    CHECK_OK(mm_gemm_grouped(MM_DTYPE_I8, N_EXPERTS, e.groups, NULL, err), err);
    CHECK(matches_expectation(&e.cases[1], e.out[1]));
    experts_free(&e);

    /* MX activations need their scales. */
    experts_make(&e, MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, 70, 5);
    e.groups[3].a_mx_stride = 2;
    CHECK_STATUS(mm_gemm_grouped(MM_DTYPE_FP8_E4M3FN, N_EXPERTS, e.groups, NULL, err),
                 MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "groups[3].a_mx_stride = 2 is below ceil(K/32) = 3");
    experts_free(&e);
}

int main(void) {
    check_pair(MM_DTYPE_BF16, MM_DTYPE_BF16, 77, 70);
    check_pair(MM_DTYPE_BF16, MM_DTYPE_BF16, 601, 40); /* several K blocks */
    check_pair(MM_DTYPE_I8, MM_DTYPE_I8, 515, 33);
    check_pair(MM_DTYPE_I8, MM_DTYPE_I8, 75, 66);
    check_pair(MM_DTYPE_I8, MM_DTYPE_INT4, 71, 33);
    /* 21 panels (the last one partial) per expert, 4-5 panel steps in all: the AVX-512 kernels take
     * several adjacent panels per task, 8 with one thread and 5-6 with two (grouped.c: panels_per_task),
     * so the bits of two different groupings are compared, each against the expectation; INT8 with K
     * 2100 also crosses a K block (2048) before prefetching the next panel. */
    check_pair(MM_DTYPE_BF16, MM_DTYPE_BF16, 130, 650);
    check_pair(MM_DTYPE_I8, MM_DTYPE_I8, 2100, 650);
    check_pair(MM_DTYPE_I8, MM_DTYPE_INT4, 130, 650);
    check_pair(MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, 70, 40);
    check_pair(MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP4_E2M1, 69, 35);
    check_pair(MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, 65, 31);
    check_validation();
    return mm_test_finish("test_gemm_grouped");
}
