/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_comm_backends.c: the table of communication backends (unique names, availability, the
 * one-line errors for an unknown or unavailable backend) and the backend-neutral launcher on threads:
 * every rank runs, and a failing rank's message reaches the caller as the outcome of the launch. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "comm_launch_rank.h"
#include "megamoe/comm.h"
#include "testlib.h"

static void test_table(void) {
    int n = mm_comm_backend_count();
    CHECK(n >= 2);
    CHECK(mm_comm_backend_name_at(-1) == NULL);
    CHECK(mm_comm_backend_name_at(n) == NULL);
    int threads = 0, mpi = 0;
    for (int i = 0; i < n; i++) {
        const char *name = mm_comm_backend_name_at(i);
        CHECK(name != NULL && name[0] != '\0');
        if (!name) continue;
        for (int j = 0; j < i; j++) CHECK(strcmp(name, mm_comm_backend_name_at(j)) != 0);
        threads += strcmp(name, "threads") == 0;
        mpi += strcmp(name, "mpi") == 0;
        /* Every row answers: available ones pass the check, the others fail naming themselves. */
        mm_error err = {MM_OK, ""};
        mm_status st = mm_comm_backend_check(name, &err);
        if (mm_comm_backend_available(name)) {
            CHECK_EQ_INT(st, MM_OK);
        } else {
            CHECK_EQ_INT(st, MM_ERR_UNSUPPORTED);
            CHECK_STR_CONTAINS(err.message, name);
            CHECK_STR_CONTAINS(err.message, "(available: threads");
            CHECK(strchr(err.message, '\n') == NULL);
            st = mm_comm_launch(name, 1, NULL, NULL, &err);
            CHECK_EQ_INT(st, MM_ERR_UNSUPPORTED);
            CHECK_STR_CONTAINS(err.message, name);
        }
    }
    CHECK_EQ_INT(threads, 1);
    CHECK_EQ_INT(mpi, 1); /* the row exists in every build, available or not */
    CHECK_EQ_INT(mm_comm_backend_available("threads"), 1);
    CHECK_EQ_INT(mm_comm_backend_available("mpi"), mm_comm_mpi_available());
    CHECK_EQ_INT(mm_comm_backend_available("ucx"), 0);
    CHECK_EQ_INT(mm_comm_backend_available(NULL), 0);

    char list[256];
    mm_comm_backend_list_available(list, sizeof list);
    CHECK(strncmp(list, "threads", 7) == 0);
    CHECK_EQ_INT(strstr(list, "mpi") != NULL, mm_comm_mpi_available());

    mm_error err = {MM_OK, ""};
    CHECK_EQ_INT(mm_comm_backend_check("ucx", &err), MM_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(err.message, "'ucx' is not a backend");
    CHECK_STR_CONTAINS(err.message, list);
    CHECK_EQ_INT(mm_comm_launch("ucx", 2, NULL, NULL, &err), MM_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(err.message, "'ucx'");
    CHECK_EQ_INT(mm_comm_launch(NULL, 2, NULL, NULL, &err), MM_ERR_INVALID_ARGUMENT);
}

static void test_threads_world(void) {
    mm_comm_world w;
    mm_error err = {MM_OK, ""};
    CHECK_EQ_INT(mm_comm_backend_world("threads", 3, &w, &err), MM_OK);
    CHECK_EQ_INT(w.size, 3);
    CHECK_EQ_INT(w.first_rank, 0);
    CHECK_EQ_INT(w.local_ranks, 3);
    /* threads has no rank count of its own */
    CHECK_EQ_INT(mm_comm_backend_world("threads", 0, &w, &err), MM_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(err.message, "backend threads");
    CHECK_EQ_INT(mm_comm_backend_world("threads", MM_COMM_MAX_RANKS + 1, &w, &err), MM_ERR_INVALID_ARGUMENT);
}

typedef struct launch_arg {
    _Atomic int ran;
    int fail_from; /* ranks >= this fail */
} launch_arg;

static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    launch_arg *a = arg;
    atomic_fetch_add(&a->ran, 1);
    return launch_rank_body(comm, a->fail_from, err);
}

static void test_threads_launch(void) {
    for (int n = 1; n <= 4; n++) {
        launch_arg a = {0, n};
        mm_error err = {MM_OK, ""};
        CHECK_EQ_INT(mm_comm_launch("threads", n, rank_fn, &a, &err), MM_OK);
        CHECK_EQ_INT(atomic_load(&a.ran), n);
    }
    /* The lowest failing rank's status and message, as it wrote them, whatever the later ranks said. */
    launch_arg a = {0, 2};
    mm_error err = {MM_OK, ""};
    CHECK_EQ_INT(mm_comm_launch("threads", 4, rank_fn, &a, &err), MM_ERR_INVALID_FILE);
    CHECK(strcmp(err.message, "rank 2 could not go on") == 0);
    CHECK_EQ_INT(atomic_load(&a.ran), 4);
    CHECK_EQ_INT(mm_comm_launch("threads", 0, rank_fn, &a, &err), MM_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(mm_comm_launch("threads", MM_COMM_MAX_RANKS + 1, rank_fn, &a, &err),
                 MM_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(mm_comm_launch("threads", 2, NULL, &a, &err), MM_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(err.message, "fn is NULL");
}

/* mm_comm_agree_as_written: the step-wise agreement of a launched run (case_mpi.c). */
static mm_status agree_fn(mm_comm *comm, void *arg, mm_error *err) {
    (void)arg;
    mm_status local = MM_OK;
    if (mm_comm_rank(comm) == 1) {
        snprintf(err->message, sizeof err->message, "metadata key \"x\" is wrong");
        local = MM_ERR_INVALID_FILE;
    }
    mm_status st = mm_comm_agree_as_written(comm, local, err);
    if (st == MM_ERR_INVALID_FILE && strcmp(err->message, "metadata key \"x\" is wrong") == 0) return MM_OK;
    char got[MM_ERROR_MESSAGE_MAX];
    snprintf(got, sizeof got, "%s", err->message);
    snprintf(err->message, sizeof err->message, "agreed status %d, message '%.400s'", (int)st, got);
    return MM_ERR_INTERNAL;
}

static void test_agree_as_written(void) {
    mm_error err = {MM_OK, ""};
    mm_status st = mm_comm_launch("threads", 3, agree_fn, NULL, &err);
    if (st) fprintf(stderr, "agree_as_written: %s\n", err.message);
    CHECK_EQ_INT(st, MM_OK);
}

int main(void) {
    test_table();
    test_threads_world();
    test_threads_launch();
    test_agree_as_written();
    return mm_test_finish("test_comm_backends");
}
