/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ops_common.c: the operator toolkit in src/ops/common/: the tensor checks' messages (each
 * wording, byte for byte), the verdict + equal-attributes exchange on the threads backend (a failing
 * rank, differing records in field-major and rank-major order, payloads, removed ranks), and the
 * symmetric area growing (and keeping its size and epoch when it need not). */
#include <stdio.h>
#include <string.h>

#include "ops/common/exchange.h"
#include "ops/common/symm_area.h"
#include "ops/common/tensor_check.h"
#include "testlib.h"

static void expect_message(mm_status st, const mm_error *err, const char *want) {
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, err);
    if (strcmp(err->message, want) != 0)
        mm_test_report_fail(__FILE__, __LINE__, "message \"%s\", expected \"%s\"", err->message, want);
    else
        mm_test_passed++;
}

static void test_tensor_checks(void) {
    mm_error e = {MM_OK, ""};
    int32_t buf[6] = {0};
    int64_t s23[2] = {2, 3}, s22[2] = {2, 2}, neg[2] = {2, -1};
    mm_tensor t = mm_tensor_make(MM_DTYPE_I32, 2, s23, buf);
    CHECK_OK(mm_op_check_tensor(&t, "ids", MM_DTYPE_I32, 2, &e), &e);
    expect_message(mm_op_check_tensor(NULL, "ids", MM_DTYPE_I32, 2, &e), &e, "ids is missing (NULL)");
    expect_message(mm_op_check_tensor(&t, "ids", MM_DTYPE_F32, 2, &e), &e,
                   "ids has dtype int32, expected f32");
    expect_message(mm_op_check_tensor(&t, "ids", MM_DTYPE_I32, 1, &e), &e,
                   "ids has 2 dimensions, expected 1");
    mm_tensor n = mm_tensor_make(MM_DTYPE_I32, 2, neg, buf);
    expect_message(mm_op_check_tensor(&n, "ids", MM_DTYPE_I32, 2, &e), &e, "ids.shape[1] = -1 is negative");
    mm_tensor nod = mm_tensor_make(MM_DTYPE_I32, 2, s23, NULL);
    expect_message(mm_op_check_tensor(&nod, "ids", MM_DTYPE_I32, 2, &e), &e,
                   "ids has elements but data is NULL");

    /* MoeReRouting's wording. */
    expect_message(mm_op_check_present(NULL, "tokens", MM_OP_WORDS_RR, &e), &e, "tokens is NULL");
    expect_message(mm_op_check_layout(&nod, "tokens", &e), &e,
                   "tokens.data is NULL but the tensor holds 24 bytes");
    mm_tensor zero_d = mm_tensor_make(MM_DTYPE_I32, 0, NULL, buf);
    expect_message(mm_op_check_layout(&zero_d, "tokens", &e), &e, "tokens has 0 dimensions, expected 1 to 8");
    mm_tensor want = mm_tensor_make(MM_DTYPE_I32, 2, s22, NULL);
    CHECK_OK(mm_op_check_like(&(mm_tensor){.dtype = MM_DTYPE_I32, .ndim = 2, .shape = {2, 2}, .data = buf},
                              &want, "output idx", &e),
             &e);
    expect_message(mm_op_check_like(&t, &want, "output idx", &e), &e,
                   "output idx shape (2, 3) differs from the required (2, 2)");
    expect_message(mm_op_check_like(NULL, &want, "output idx", &e), &e, "output idx is NULL");
    mm_tensor f = mm_tensor_make(MM_DTYPE_F32, 2, s22, buf);
    expect_message(mm_op_check_like(&f, &want, "output idx", &e), &e,
                   "output idx dtype f32 differs from the required int32");

    /* MegaMoE's wording. */
    uint64_t ints = MM_OP_DTYPE(MM_DTYPE_I32);
    CHECK_OK(mm_op_check_shaped(&t, "topk_ids", ints, 2, 2, 3, "(BS, K) INT32", &e), &e);
    expect_message(mm_op_check_shaped(&f, "topk_ids", ints, 2, 2, 2, "(BS, K) INT32", &e), &e,
                   "topk_ids dtype f32 is not accepted ((BS, K) INT32)");
    expect_message(mm_op_check_shaped(&t, "topk_ids", ints, 2, 2, 4, "(BS, K) INT32", &e), &e,
                   "topk_ids must have shape (2, 4) (BS, K) INT32 (has 2 dims: 2 x 3)");
    expect_message(mm_op_check_shaped(&t, "mask", ints, 1, 2, 0, "(BS,)", &e), &e,
                   "mask must have shape (2) (BS,) (has 2 dims, dim 0 = 2)");
    expect_message(mm_op_check_shaped(&nod, "topk_ids", ints, 2, 2, 3, "(BS, K) INT32", &e), &e,
                   "topk_ids data is NULL");
    CHECK(mm_op_dtype_in(MM_DTYPE_I32, ints));
    CHECK(!mm_op_dtype_in(MM_DTYPE_INVALID, ints));
}

/* ---- the exchange, on rank threads ---- */

enum { SCEN_FAILING, SCEN_DIFFER, SCEN_EQUAL, SCEN_SURVIVORS };
typedef struct scen_arg {
    int scenario;
} scen_arg;

static mm_status exchange_rank(mm_comm *c, void *arg, mm_error *err) {
    const scen_arg *a = arg;
    int r = mm_comm_rank(c), n = mm_comm_size(c);
    int64_t fields[4] = {7, 8, 9, 100 + r}; /* the last field is not compared: ranks may differ there */
    int64_t payload[3] = {r, 2 * r, 3 * r};
    mm_op_exchange x = {
        .fields = fields, .nfields = 4, .ncompare = 3, .payload = payload, .payload_bytes = sizeof payload};
    mm_error e = {MM_OK, ""};
    if (a->scenario == SCEN_FAILING) {
        /* Ranks 1 and 2 fail: every rank learns rank 1's message and status. */
        x.local = r == 1 ? MM_ERR_UNSUPPORTED : r == 2 ? MM_ERR_INVALID_ARGUMENT : MM_OK;
        x.message = r == 1 ? "topk too large" : r == 2 ? "bad x" : NULL;
        mm_status st = mm_op_exchange_run(c, &x, &e);
        mm_op_exchange_done(&x);
        SCEN_EXPECT(err, st == MM_ERR_UNSUPPORTED, "status %s", mm_status_name(st));
        SCEN_EXPECT(err, strcmp(e.message, "rank 1: topk too large") == 0, "message '%s'", e.message);
        SCEN_EXPECT(err, x.failed_rank == 1, "failed_rank %d", x.failed_rank);
        return MM_OK;
    }
    if (a->scenario == SCEN_DIFFER) {
        /* Rank 2 differs in field 0, rank 1 in field 2: field-major names field 0 (rank 2), rank-major
         * names rank 1 (field 2). */
        if (r == 2) fields[0] = 5;
        if (r == 1) fields[2] = 11;
    }
    if (a->scenario == SCEN_SURVIVORS) {
        /* Rank 1 is removed; its different record and failure no longer count. */
        int alive[MM_COMM_MAX_RANKS], k = 0;
        for (int i = 0; i < n; i++)
            if (i != 1) alive[k++] = i;
        if (r == 1) return MM_OK;
        mm_status st = mm_comm_set_survivors(c, alive, k, &e);
        SCEN_EXPECT(err, st == MM_OK, "set_survivors: %s", e.message);
    }
    mm_status st = mm_op_exchange_run(c, &x, &e);
    SCEN_EXPECT(err, st == MM_OK, "exchange: %s", e.message);
    SCEN_EXPECT(err, x.failed_rank == -1 && x.ref == 0, "failed_rank %d ref %d", x.failed_rank, x.ref);
    int last = a->scenario == SCEN_SURVIVORS && n == 2 ? 0 : n - 1;
    SCEN_EXPECT(err, x.lo[3] == 100 && x.hi[3] == 100 + last, "field 3 from %lld to %lld", (long long)x.lo[3],
                (long long)x.hi[3]);
    for (int q = 0; q < n; q++) {
        if (!mm_comm_is_alive(c, q)) continue;
        const int64_t *p = mm_op_exchange_payload_of(&x, q);
        SCEN_EXPECT(err, p[0] == q && p[1] == 2 * q && p[2] == 3 * q, "payload of rank %d", q);
        SCEN_EXPECT(err, mm_op_exchange_fields_of(&x, q)[3] == 100 + q, "fields of rank %d", q);
    }
    int fm = mm_op_exchange_differing(&x, 0), rm = mm_op_exchange_differing(&x, 1);
    if (a->scenario == SCEN_DIFFER) {
        SCEN_EXPECT(err, fm == 0 && x.differ_rank[0] == 2 && x.lo[0] == 5 && x.hi[0] == 7,
                    "field-major: field %d rank %d", fm, fm >= 0 ? x.differ_rank[fm] : -1);
        SCEN_EXPECT(err, rm == 2 && x.differ_rank[2] == 1, "rank-major: field %d rank %d", rm,
                    rm >= 0 ? x.differ_rank[rm] : -1);
    } else {
        SCEN_EXPECT(err, fm == -1 && rm == -1, "records differ: field %d / %d", fm, rm);
        SCEN_EXPECT(err,
                    x.differ_rank[3] == (n > 1 && last > 0 ? (a->scenario == SCEN_SURVIVORS ? 2 : 1) : -1),
                    "uncompared field 3 first differs on rank %d", x.differ_rank[3]);
    }
    mm_op_exchange_done(&x);
    return MM_OK;
}

static void run_exchange(int scenario, int nranks) {
    scen_arg a = {scenario};
    mm_status status[MM_COMM_MAX_RANKS];
    mm_error errs[MM_COMM_MAX_RANKS], e = {MM_OK, ""};
    mm_status st = mm_comm_run_threads(nranks, exchange_rank, &a, status, errs, &e);
    if (st != MM_OK) fprintf(stderr, "exchange scenario %d with %d ranks: %s\n", scenario, nranks, e.message);
    CHECK_OK(st, &e);
    for (int r = 0; r < nranks; r++) CHECK_OK(status[r], errs + r);
}

static void test_exchange(void) {
    for (int n = 3; n <= 4; n++) run_exchange(SCEN_FAILING, n);
    for (int n = 3; n <= 4; n++) run_exchange(SCEN_DIFFER, n);
    for (int n = 1; n <= 4; n++) run_exchange(SCEN_EQUAL, n);
    for (int n = 3; n <= 4; n++) run_exchange(SCEN_SURVIVORS, n);
    /* Too many fields is refused before any communication. */
    mm_op_exchange x = {.nfields = MM_OP_EXCHANGE_MAX_FIELDS + 1};
    mm_error e = {MM_OK, ""};
    CHECK_STATUS(mm_op_exchange_run(NULL, &x, &e), MM_ERR_INVALID_ARGUMENT, &e);
}

/* ---- the symmetric area ---- */

static mm_status area_rank(mm_comm *c, void *arg, mm_error *err) {
    (void)arg;
    mm_op_symm_area a = {NULL, 0};
    mm_error e = {MM_OK, ""};
    SCEN_EXPECT(err, mm_op_symm_area_ensure(c, &a, 0, MM_OP_GROW_HALF_AGAIN, &e) == MM_OK, "%s", e.message);
    SCEN_EXPECT(err, a.symm && mm_symm_size(a.symm) >= 64, "empty area of %zu bytes", mm_symm_size(a.symm));
    SCEN_EXPECT(err, mm_op_symm_area_ensure(c, &a, 1000, MM_OP_GROW_HALF_AGAIN, &e) == MM_OK, "%s",
                e.message);
    size_t size = mm_symm_size(a.symm);
    SCEN_EXPECT(err, size >= 1500, "grown by half again: %zu bytes", size);
    a.epoch = 5; /* as if five data phases ran */
    mm_symm *before = a.symm;
    SCEN_EXPECT(err, mm_op_symm_area_ensure(c, &a, 1400, MM_OP_GROW_HALF_AGAIN, &e) == MM_OK, "%s",
                e.message);
    SCEN_EXPECT(err, a.symm == before && a.epoch == 5, "an area large enough was reallocated");
    SCEN_EXPECT(err, mm_op_symm_area_ensure(c, &a, 4000, MM_OP_GROW_EXACT, &e) == MM_OK, "%s", e.message);
    SCEN_EXPECT(err, mm_symm_size(a.symm) >= 4000 && a.epoch == 0, "regrown: %zu bytes, epoch %llu",
                mm_symm_size(a.symm), (unsigned long long)a.epoch);
    int regrown = -1;
    SCEN_EXPECT(err, mm_op_symm_grow(c, &a.symm, 10, MM_OP_GROW_EXACT, &regrown, &e) == MM_OK && regrown == 0,
                "grow to a smaller size: regrown %d", regrown);
    SCEN_EXPECT(err, mm_symm_free(a.symm, &e) == MM_OK, "%s", e.message);
    return MM_OK;
}

static void test_symm_area(void) {
    for (int n = 1; n <= 3; n++) {
        mm_status status[MM_COMM_MAX_RANKS];
        mm_error errs[MM_COMM_MAX_RANKS], e = {MM_OK, ""};
        CHECK_OK(mm_comm_run_threads(n, area_rank, NULL, status, errs, &e), &e);
        for (int r = 0; r < n; r++) CHECK_OK(status[r], errs + r);
    }
}

int main(void) {
    test_tensor_checks();
    test_exchange();
    test_symm_area();
    return mm_test_finish("test_ops_common");
}
