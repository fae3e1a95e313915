/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_comm_threads.c: the communicator scenarios (comm_scenarios.h) on the threads backend with
 * 1, 2, 3, 4 and 8 ranks, plus what only the threads launcher has: per-rank error collection, argument
 * checks, the timeout setting, and the MPI backend's availability report. */
#include <stdlib.h>

#include "comm_scenarios.h"
#include "testlib.h"

static void test_scenarios(void) {
    static const int rank_counts[] = {1, 2, 3, 4, 8};
    for (size_t k = 0; k < sizeof rank_counts / sizeof rank_counts[0]; k++) {
        int n = rank_counts[k];
        for (size_t s = 0; s < SCEN_COUNT; s++) {
            if (n < scen_all[s].min_ranks) continue;
            mm_status status[MM_COMM_MAX_RANKS];
            mm_error errs[MM_COMM_MAX_RANKS], err_store = {MM_OK, ""}, *err = &err_store;
            mm_status st = mm_comm_run_threads(n, scen_run_entry, (void *)&scen_all[s], status, errs, err);
            if (st != MM_OK)
                fprintf(stderr, "scenario %s with %d ranks: %s\n", scen_all[s].name, n, err->message);
            CHECK_OK(st, err);
            for (int r = 0; r < n; r++) CHECK_OK(status[r], errs + r);
        }
    }
}

/* The alltoallv scenarios again with every block pulled (inline capacity 0) and with a mix of inline
 * and pulled blocks (capacity 100 bytes), so that both protocols and their mixture are covered. */
static void test_alltoallv_protocols(void) {
    static const char *const limits[] = {"0", "100"};
    for (size_t l = 0; l < 2; l++) {
        setenv("MEGAMOE_COMM_INLINE_MAX", limits[l], 1);
        for (int n = 2; n <= 4; n++)
            for (size_t s = 0; s < SCEN_COUNT; s++) {
                if (strcmp(scen_all[s].name, "alltoallv") != 0 && strcmp(scen_all[s].name, "agree") != 0 &&
                    strcmp(scen_all[s].name, "survivors") != 0)
                    continue;
                mm_status status[MM_COMM_MAX_RANKS];
                mm_error errs[MM_COMM_MAX_RANKS], err_store = {MM_OK, ""}, *err = &err_store;
                mm_status st =
                    mm_comm_run_threads(n, scen_run_entry, (void *)&scen_all[s], status, errs, err);
                if (st != MM_OK)
                    fprintf(stderr, "scenario %s with %d ranks, inline max %s: %s\n", scen_all[s].name, n,
                            limits[l], err->message);
                CHECK_OK(st, err);
            }
    }
    unsetenv("MEGAMOE_COMM_INLINE_MAX");
}

static void test_launcher_errors(void) {
    mm_status status[4];
    mm_error errs[4], err_store = {MM_OK, ""}, *err = &err_store;
    mm_status st = mm_comm_run_threads(4, fail_on_some, NULL, status, errs, err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, err);
    CHECK(strcmp(err->message, "rank 1: topk 9 exceeds moe_expert_num 8") == 0);
    CHECK_EQ_INT(status[0], MM_OK);
    CHECK_EQ_INT(status[1], MM_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(status[2], MM_OK);
    CHECK_EQ_INT(status[3], MM_ERR_IO);
    CHECK(strcmp(errs[3].message, "disk full") == 0);
    /* Without per-rank arrays. */
    st = mm_comm_run_threads(4, fail_on_some, NULL, NULL, NULL, err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, err);

    /* An agreed error reaches the caller once, naming the rank at fault, not "rank 0: rank 2: ...". */
    st = mm_comm_run_threads(4, agreed_failure, NULL, status, errs, err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, err);
    CHECK(strcmp(err->message, "rank 2: hidden = 30 is not a multiple of 32") == 0);
    for (int r = 0; r < 4; r++) CHECK(strcmp(errs[r].message, err->message) == 0);

    st = mm_comm_run_threads(0, fail_on_some, NULL, NULL, NULL, err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "nranks = 0 is outside [1, 64]");
    st = mm_comm_run_threads(65, fail_on_some, NULL, NULL, NULL, err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, err);
    st = mm_comm_run_threads(2, NULL, NULL, NULL, NULL, err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, err);
    CHECK_STR_CONTAINS(err->message, "fn is NULL");
}

/* Identity, timeout setting, the default timeout from the environment, survivors' argument checks. */
static mm_status settings(mm_comm *c, void *arg, mm_error *err) {
    (void)arg;
    SCEN_EXPECT(err,
                strcmp(mm_comm_backend_name(c), "threads") == 0 && mm_comm_backend_of(c) == MM_COMM_THREADS,
                "backend %s", mm_comm_backend_name(c));
    SCEN_EXPECT(err, mm_comm_timeout(c) == 7.5, "default timeout %g, MEGAMOE_COMM_TIMEOUT=7.5",
                mm_comm_timeout(c));
    mm_error e = {MM_OK, ""};
    SCEN_EXPECT(err,
                mm_comm_set_timeout(c, 0, &e) == MM_ERR_INVALID_ARGUMENT && strstr(e.message, "seconds = 0"),
                "timeout 0 gave \"%s\"", e.message);
    SCEN_EXPECT(err, mm_comm_set_timeout(c, INFINITY, &e) == MM_ERR_INVALID_ARGUMENT,
                "infinite timeout accepted");
    SCEN_EXPECT(err, mm_comm_timeout(c) == 7.5, "a refused timeout changed the setting");
    int bad_order[2] = {1, 0};
    SCEN_EXPECT(err,
                mm_comm_set_survivors(c, bad_order, 2, &e) == MM_ERR_INVALID_ARGUMENT &&
                    strstr(e.message, "alive_ranks[1] = 0 is not above alive_ranks[0] = 1"),
                "unordered survivors gave \"%s\"", e.message);
    int out_of_range[1] = {3};
    SCEN_EXPECT(err,
                mm_comm_set_survivors(c, out_of_range, 1, &e) == MM_ERR_INVALID_ARGUMENT &&
                    strstr(e.message, "alive_ranks[0] = 3 is outside [0, 3)"),
                "out-of-range survivor gave \"%s\"", e.message);
    int other[1] = {(mm_comm_rank(c) + 1) % 3};
    SCEN_EXPECT(err,
                mm_comm_set_survivors(c, other, 1, &e) == MM_ERR_INVALID_ARGUMENT &&
                    strstr(e.message, "is not in alive_ranks"),
                "survivor list without the caller gave \"%s\"", e.message);
    SCEN_EXPECT(err, mm_comm_alive_count(c) == 3, "refused survivor lists changed the alive count");
    SCEN_EXPECT(
        err, mm_comm_free(c, &e) == MM_ERR_INVALID_ARGUMENT && strstr(e.message, "belongs to the launcher"),
        "freeing the launcher's communicator gave \"%s\"", e.message);
    mm_comm *d = NULL;
    SCEN_EXPECT(err,
                mm_comm_split_domains(c, 2, &d, &e) == MM_ERR_INVALID_ARGUMENT &&
                    strstr(e.message, "ranks_per_domain = 2 must be positive and divide the rank count 3"),
                "domains of 2 out of 3 ranks gave \"%s\"", e.message);
    return MM_OK;
}

static void test_settings(void) {
    setenv("MEGAMOE_COMM_TIMEOUT", "7.5", 1);
    mm_status status[3];
    mm_error errs[3], err_store = {MM_OK, ""}, *err = &err_store;
    CHECK_OK(mm_comm_run_threads(3, settings, NULL, status, errs, err), err);
    for (int r = 0; r < 3; r++) CHECK_OK(status[r], errs + r);
    unsetenv("MEGAMOE_COMM_TIMEOUT");
}

static void test_mpi_availability(void) {
    mm_comm *c = (mm_comm *)1;
    mm_error err_store = {MM_OK, ""}, *err = &err_store;
#ifdef MEGAMOE_HAVE_MPI
    CHECK_EQ_INT(mm_comm_mpi_available(), 1);
    (void)c;
#else
    CHECK_EQ_INT(mm_comm_mpi_available(), 0);
    CHECK_STATUS(mm_comm_mpi_world(&c, err), MM_ERR_UNSUPPORTED, err);
    CHECK_STR_CONTAINS(err->message, "built without MPI");
    CHECK(c == NULL);
#endif
    CHECK_STATUS(mm_comm_from_mpi_ptr(NULL, &c, err), MM_ERR_INVALID_ARGUMENT, err);
}

int main(void) {
    test_scenarios();
    test_alltoallv_protocols();
    test_launcher_errors();
    test_settings();
    test_mpi_availability();
    return mm_test_finish("test_comm_threads");
}
