/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_world.c: the persistent world of thread ranks (megamoe/world.h): many calls on one world
 * with their results checked, the same rank threads every call, the communicator scenarios on a world,
 * caller-threads mode driven by the test's own pthreads, the result rules (per-rank errors, agreed
 * errors), a busy world, a rank that skips a collective (timeout, then survivors), parked threads using
 * no CPU, and the argument checks. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "comm_scenarios.h"
#include "megamoe/world.h"
#include "testlib.h"

/* ---- many tiny calls ---------------------------------------------------------------------------- */

typedef struct many_arg {
    int call;
    int64_t sums[MM_COMM_MAX_RANKS];     /* each rank's allreduce result of this call */
    pthread_t thread[MM_COMM_MAX_RANKS]; /* the thread that ran rank r on the first call */
    int same_thread[MM_COMM_MAX_RANKS];  /* rank r ran on that thread again */
    mm_comm *comm[MM_COMM_MAX_RANKS];
} many_arg;

/* Sum over ranks of (1000 call + rank), and an allgather of (call, rank) checked against its
 * hand-computed value. */
static mm_status many_rank(mm_comm *c, void *arg_, mm_error *err) {
    many_arg *arg = arg_;
    int me = mm_comm_rank(c), n = mm_comm_size(c);
    if (arg->call == 0) arg->thread[me] = pthread_self();
    arg->same_thread[me] = pthread_equal(arg->thread[me], pthread_self());
    arg->comm[me] = c;
    int64_t v = 1000 * (int64_t)arg->call + me;
    SCEN_OK(err, mm_comm_allreduce_i64(c, &v, 1, MM_REDUCE_SUM, &e_));
    arg->sums[me] = v;
    int32_t mine[2] = {arg->call, me}, all[2 * MM_COMM_MAX_RANKS];
    SCEN_OK(err, mm_comm_allgather(c, mine, sizeof mine, all, &e_));
    for (int p = 0; p < n; p++)
        SCEN_EXPECT(err, all[2 * p] == arg->call && all[2 * p + 1] == p,
                    "call %d: allgather block %d = (%d, %d)", arg->call, p, all[2 * p], all[2 * p + 1]);
    return MM_OK;
}

static void test_many_calls(void) {
    static const int sizes[] = {1, 2, 4};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int n = sizes[k];
        mm_world *w = NULL;
        mm_error err = {MM_OK, ""};
        CHECK_OK(mm_world_create(n, MM_WORLD_DEFAULT, &w, &err), &err);
        if (!w) continue;
        CHECK_EQ_INT(mm_world_size(w), n);
        many_arg *arg = calloc(1, sizeof *arg);
        int bad_sums = 0, bad_threads = 0, bad_comms = 0, failed = 0;
        for (int call = 0; call < 1000; call++) {
            arg->call = call;
            mm_status st = mm_world_run(w, many_rank, arg, NULL, NULL, &err);
            if (st != MM_OK) {
                if (!failed++) fprintf(stderr, "R=%d call %d: %s\n", n, call, err.message);
                continue;
            }
            int64_t want = 1000 * (int64_t)call * n + (int64_t)n * (n - 1) / 2;
            for (int r = 0; r < n; r++) {
                bad_sums += arg->sums[r] != want;
                bad_threads += !arg->same_thread[r];
                bad_comms += arg->comm[r] != mm_world_comm(w, r);
            }
        }
        CHECK_EQ_INT(failed, 0);
        CHECK_EQ_INT(bad_sums, 0);
        CHECK_EQ_INT(bad_threads, 0); /* the rank threads are started once */
        CHECK_EQ_INT(bad_comms, 0);
        /* The rank threads are not the caller's. */
        for (int r = 0; r < n; r++) CHECK(!pthread_equal(arg->thread[r], pthread_self()));
        CHECK_OK(mm_world_free(w, &err), &err);
        free(arg);
    }
}

/* ---- the communicator scenarios on one world ---------------------------------------------------- */

/* Every scenario twice on one world per rank count (survivors on a world of its own: it removes a
 * rank for good). */
static void test_scenarios_on_world(void) {
    static const int sizes[] = {1, 2, 3, 4, 8};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int n = sizes[k];
        mm_world *w = NULL;
        mm_error err = {MM_OK, ""};
        CHECK_OK(mm_world_create(n, MM_WORLD_DEFAULT, &w, &err), &err);
        for (int round = 0; round < 2 && w; round++)
            for (size_t s = 0; s < SCEN_COUNT; s++) {
                if (n < scen_all[s].min_ranks || strcmp(scen_all[s].name, "survivors") == 0) continue;
                mm_status status[MM_COMM_MAX_RANKS];
                mm_error errs[MM_COMM_MAX_RANKS];
                mm_status st = mm_world_run(w, scen_run_entry, (void *)&scen_all[s], status, errs, &err);
                if (st != MM_OK)
                    fprintf(stderr, "world scenario %s, %d ranks: %s\n", scen_all[s].name, n, err.message);
                CHECK_OK(st, &err);
                for (int r = 0; r < n; r++) CHECK_OK(status[r], errs + r);
            }
        CHECK_OK(mm_world_free(w, &err), &err);
    }
}

/* ---- result rules ------------------------------------------------------------------------------- */

static mm_status barrier_rank(mm_comm *c, void *arg, mm_error *err) {
    (void)arg;
    return mm_comm_barrier(c, err);
}

static void test_result_rules(void) {
    mm_world *w = NULL;
    mm_error err = {MM_OK, ""}, errs[4];
    mm_status status[4];
    CHECK_OK(mm_world_create(4, MM_WORLD_DEFAULT, &w, &err), &err);
    if (!w) return;
    for (int round = 0; round < 2; round++) { /* the second round on records left by the first */
        mm_status st = mm_world_run(w, fail_on_some, NULL, status, errs, &err);
        CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, &err);
        CHECK(strcmp(err.message, "rank 1: topk 9 exceeds moe_expert_num 8") == 0);
        CHECK_EQ_INT(status[0], MM_OK);
        CHECK_EQ_INT(status[1], MM_ERR_INVALID_ARGUMENT);
        CHECK_EQ_INT(status[2], MM_OK);
        CHECK_EQ_INT(status[3], MM_ERR_IO);
        CHECK(strcmp(errs[0].message, "") == 0);
        CHECK(strcmp(errs[3].message, "disk full") == 0);
        CHECK_EQ_INT(errs[3].status, MM_ERR_IO); /* filled in when the rank left it MM_OK */
        /* An agreed error reaches the caller once, naming the rank at fault. */
        st = mm_world_run(w, agreed_failure, NULL, status, errs, &err);
        CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, &err);
        CHECK(strcmp(err.message, "rank 2: hidden = 30 is not a multiple of 32") == 0);
        for (int r = 0; r < 4; r++) CHECK(strcmp(errs[r].message, err.message) == 0);
        /* Without per-rank arrays, then a good call: failures leave the world usable. */
        st = mm_world_run(w, fail_on_some, NULL, NULL, NULL, &err);
        CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, &err);
        CHECK(strcmp(err.message, "rank 1: topk 9 exceeds moe_expert_num 8") == 0);
        st = mm_world_run(w, barrier_rank, NULL, status, errs, &err);
        CHECK_OK(st, &err);
        for (int r = 0; r < 4; r++) CHECK_EQ_INT(status[r], MM_OK);
    }
    CHECK_OK(mm_world_free(w, &err), &err);
}

/* ---- busy --------------------------------------------------------------------------------------- */

typedef struct busy_arg {
    mm_world *world;
    atomic_int entered; /* rank 0 is inside the call */
    atomic_int release; /* the test is done probing; the call may end */
    mm_status nested;   /* rank 0's own mm_world_run on its world */
    mm_error nested_err;
    mm_status driver_status;
    mm_error driver_err;
} busy_arg;

static mm_status busy_rank(mm_comm *c, void *arg_, mm_error *err) {
    busy_arg *arg = arg_;
    if (mm_comm_rank(c) == 0) {
        arg->nested = mm_world_run(arg->world, barrier_rank, NULL, NULL, NULL, &arg->nested_err);
        atomic_store(&arg->entered, 1);
        /* Bounded: a broken test fails instead of hanging. */
        for (int i = 0; i < 200000 && !atomic_load(&arg->release); i++) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    return mm_comm_barrier(c, err);
}

static void *busy_driver(void *p) {
    busy_arg *arg = p;
    arg->driver_status = mm_world_run(arg->world, busy_rank, arg, NULL, NULL, &arg->driver_err);
    return NULL;
}

static void test_busy(void) {
    busy_arg *arg = calloc(1, sizeof *arg);
    mm_error err = {MM_OK, ""};
    CHECK_OK(mm_world_create(2, MM_WORLD_DEFAULT, &arg->world, &err), &err);
    pthread_t driver;
    if (!arg->world || pthread_create(&driver, NULL, busy_driver, arg) != 0) {
        CHECK(0);
        free(arg);
        return;
    }
    while (!atomic_load(&arg->entered)) sched_yield();
    /* A second driver, and a free while the call runs, are refused. */
    mm_status st = mm_world_run(arg->world, barrier_rank, NULL, NULL, NULL, &err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "mm_world_run: the world is busy");
    st = mm_world_free(arg->world, &err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "busy");
    atomic_store(&arg->release, 1);
    pthread_join(driver, NULL);
    CHECK_OK(arg->driver_status, &arg->driver_err);
    /* A rank calling its own world is refused too (it would wait for itself). */
    CHECK_STATUS(arg->nested, MM_ERR_INVALID_ARGUMENT, &arg->nested_err);
    CHECK_STR_CONTAINS(arg->nested_err.message, "busy");
    /* Free again: the world is idle now. */
    CHECK_OK(mm_world_run(arg->world, barrier_rank, NULL, NULL, NULL, &err), &err);
    CHECK_OK(mm_world_free(arg->world, &err), &err);
    free(arg);
}

/* ---- a rank that skips a collective ------------------------------------------------------------- */

static mm_status skip_on_last(mm_comm *c, void *arg, mm_error *err) {
    (void)arg;
    if (mm_comm_rank(c) == mm_comm_size(c) - 1) return MM_OK; /* returns early, joins nothing */
    return mm_comm_barrier(c, err);
}

/* The survivors go on without the last rank (comm.h's elastic continuation, on the world's
 * communicators); the last rank does nothing. */
static mm_status survivors_go_on(mm_comm *c, void *arg, mm_error *err) {
    (void)arg;
    int n = mm_comm_size(c), me = mm_comm_rank(c), alive[MM_COMM_MAX_RANKS];
    if (me == n - 1) return MM_OK;
    for (int r = 0; r < n - 1; r++) alive[r] = r;
    SCEN_OK(err, mm_comm_set_survivors(c, alive, n - 1, &e_));
    SCEN_OK(err, mm_comm_set_timeout(c, 20.0, &e_));
    for (int i = 0; i < 10; i++) SCEN_OK(err, mm_comm_barrier(c, &e_));
    int64_t v = me + 1;
    SCEN_OK(err, mm_comm_allreduce_i64(c, &v, 1, MM_REDUCE_SUM, &e_));
    SCEN_EXPECT(err, v == (int64_t)(n - 1) * n / 2, "survivors' sum %lld", (long long)v);
    return MM_OK;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_timeout(void) {
    mm_world *w = NULL;
    mm_error err = {MM_OK, ""};
    CHECK_OK(mm_world_create(3, MM_WORLD_DEFAULT, &w, &err), &err);
    if (!w) return;
    for (int r = 0; r < 3; r++) CHECK_OK(mm_comm_set_timeout(mm_world_comm(w, r), 0.2, &err), &err);
    double t0 = now_seconds();
    mm_status st = mm_world_run(w, skip_on_last, NULL, NULL, NULL, &err);
    double waited = now_seconds() - t0;
    CHECK_STATUS(st, MM_ERR_TIMEOUT, &err);
    CHECK(strcmp(err.message, "rank 0: barrier: rank 2 did not arrive within 0.2 s") == 0);
    /* Within the communicator timeout (plus a generous allowance for a loaded machine), not more. */
    CHECK(waited >= 0.2);
    CHECK(waited < 10.0);
    /* The poisoned communicators fail at once. */
    st = mm_world_run(w, skip_on_last, NULL, NULL, NULL, &err);
    CHECK_STATUS(st, MM_ERR_PEER, &err);
    CHECK_STR_CONTAINS(err.message, "rank 0: barrier: the communicator is unusable after an earlier failure");
    /* Survivors declared in the next call go on. */
    CHECK_OK(mm_world_run(w, survivors_go_on, NULL, NULL, NULL, &err), &err);
    CHECK_OK(mm_world_free(w, &err), &err);

    /* And a world freed right after the timeout. */
    CHECK_OK(mm_world_create(2, MM_WORLD_DEFAULT, &w, &err), &err);
    if (!w) return;
    for (int r = 0; r < 2; r++) CHECK_OK(mm_comm_set_timeout(mm_world_comm(w, r), 0.1, &err), &err);
    CHECK_STATUS(mm_world_run(w, skip_on_last, NULL, NULL, NULL, &err), MM_ERR_TIMEOUT, &err);
    CHECK_OK(mm_world_free(w, &err), &err);
}

/* ---- caller threads ----------------------------------------------------------------------------- */

typedef struct caller_rank {
    mm_comm *comm;
    int round;
    mm_status status;
    mm_error err;
} caller_rank;

static mm_status caller_rank_work(caller_rank *cr, mm_error *err) {
    mm_comm *c = cr->comm;
    int me = mm_comm_rank(c), n = mm_comm_size(c);
    for (int i = 0; i < 100; i++) {
        int64_t v[2] = {me + i, -me};
        SCEN_OK(err, mm_comm_allreduce_i64(c, v, 2, i % 2 ? MM_REDUCE_MAX : MM_REDUCE_SUM, &e_));
        int64_t want0 = i % 2 ? n - 1 + i : (int64_t)n * i + (int64_t)n * (n - 1) / 2;
        int64_t want1 = i % 2 ? 0 : -(int64_t)n * (n - 1) / 2;
        SCEN_EXPECT(err, v[0] == want0 && v[1] == want1, "round %d step %d: (%lld, %lld)", cr->round, i,
                    (long long)v[0], (long long)v[1]);
        int16_t mine = (int16_t)(100 * cr->round + 10 * me + i % 10), all[MM_COMM_MAX_RANKS];
        SCEN_OK(err, mm_comm_allgather(c, &mine, sizeof mine, all, &e_));
        for (int p = 0; p < n; p++)
            SCEN_EXPECT(err, all[p] == 100 * cr->round + 10 * p + i % 10, "allgather block %d = %d", p,
                        all[p]);
    }
    /* The world owns its communicators. */
    mm_error e = {MM_OK, ""};
    SCEN_EXPECT(
        err, mm_comm_free(c, &e) == MM_ERR_INVALID_ARGUMENT && strstr(e.message, "belongs to the launcher"),
        "mm_comm_free of a world's communicator gave \"%s\"", e.message);
    /* A sub-group split from a world communicator is the caller's to free. */
    mm_comm *half = NULL;
    SCEN_OK(err, mm_comm_split(c, me % 2, me, &half, &e_));
    SCEN_OK(err, mm_comm_barrier(half, &e_));
    SCEN_OK(err, mm_comm_free(half, &e_));
    return MM_OK;
}

static void *caller_thread(void *p) {
    caller_rank *cr = p;
    mm_error_clear(&cr->err);
    cr->status = caller_rank_work(cr, &cr->err);
    return NULL;
}

static void test_caller_threads(void) {
    enum { N = 3 };
    mm_world *w = NULL;
    mm_error err = {MM_OK, ""};
    CHECK_OK(mm_world_create(N, MM_WORLD_CALLER_THREADS, &w, &err), &err);
    if (!w) return;
    CHECK_EQ_INT(mm_world_size(w), N);
    mm_status st = mm_world_run(w, barrier_rank, NULL, NULL, NULL, &err);
    CHECK_STATUS(st, MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "MM_WORLD_CALLER_THREADS");
    /* Two rounds of fresh pthreads on the same communicators (they keep their state between rounds). */
    for (int round = 0; round < 2; round++) {
        caller_rank ranks[N];
        pthread_t threads[N];
        int started[N] = {0};
        for (int r = 0; r < N; r++) {
            ranks[r] = (caller_rank){mm_world_comm(w, r), round, MM_OK, {MM_OK, ""}};
            started[r] = pthread_create(&threads[r], NULL, caller_thread, &ranks[r]) == 0;
            CHECK(started[r]);
        }
        for (int r = 0; r < N; r++) {
            if (started[r]) pthread_join(threads[r], NULL);
            CHECK_OK(ranks[r].status, &ranks[r].err);
            CHECK_EQ_INT(mm_comm_rank(mm_world_comm(w, r)), r);
        }
    }
    CHECK_OK(mm_world_free(w, &err), &err);
}

/* ---- parked threads use no CPU ------------------------------------------------------------------ */

static double process_cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}

static void test_parked_threads_idle(void) {
    mm_world *w = NULL;
    mm_error err = {MM_OK, ""};
    CHECK_OK(mm_world_create(4, MM_WORLD_DEFAULT, &w, &err), &err);
    if (!w) return;
    CHECK_OK(mm_world_run(w, barrier_rank, NULL, NULL, NULL, &err), &err);
    struct timespec settle = {0, 50000000}, idle = {0, 500000000};
    nanosleep(&settle, NULL); /* past the spin and yield phases */
    double cpu0 = process_cpu_seconds();
    nanosleep(&idle, NULL);
    double used = process_cpu_seconds() - cpu0;
    /* Four spinning threads would use ~2 s of CPU in 0.5 s on 4 cores (1 s on this machine's 2). */
    if (!(used < 0.1)) fprintf(stderr, "parked world used %.3f s of CPU in 0.5 s\n", used);
    CHECK(used < 0.1);
    CHECK_OK(mm_world_run(w, barrier_rank, NULL, NULL, NULL, &err), &err);
    CHECK_OK(mm_world_free(w, &err), &err);
}

/* ---- arguments ---------------------------------------------------------------------------------- */

static void test_arguments(void) {
    mm_world *w = (mm_world *)1;
    mm_error err = {MM_OK, ""};
    static const int bad[] = {0, -1, 65};
    for (size_t i = 0; i < 3; i++) {
        w = (mm_world *)1;
        CHECK_STATUS(mm_world_create(bad[i], MM_WORLD_DEFAULT, &w, &err), MM_ERR_INVALID_ARGUMENT, &err);
        char want[64];
        snprintf(want, sizeof want, "mm_world_create: nranks = %d is outside [1, 64]", bad[i]);
        CHECK(strcmp(err.message, want) == 0);
        CHECK(w == NULL);
    }
    CHECK_STATUS(mm_world_create(2, 2, &w, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "flags = 2");
    CHECK_STATUS(mm_world_create(2, MM_WORLD_DEFAULT, NULL, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "out is NULL");
    CHECK_OK(mm_world_free(NULL, &err), &err);
    CHECK_EQ_INT(mm_world_size(NULL), 0);
    CHECK(mm_world_comm(NULL, 0) == NULL);
    CHECK_STATUS(mm_world_run(NULL, barrier_rank, NULL, NULL, NULL, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "world is NULL");

    /* The largest world: 64 ranks meet in a barrier. */
    CHECK_OK(mm_world_create(64, MM_WORLD_DEFAULT, &w, &err), &err);
    if (!w) return;
    CHECK(mm_world_comm(w, -1) == NULL);
    CHECK(mm_world_comm(w, 64) == NULL);
    CHECK(mm_world_comm(w, 63) != NULL && mm_comm_rank(mm_world_comm(w, 63)) == 63);
    CHECK_EQ_INT(mm_comm_size(mm_world_comm(w, 0)), 64);
    CHECK_STATUS(mm_world_run(w, NULL, NULL, NULL, NULL, &err), MM_ERR_INVALID_ARGUMENT, &err);
    CHECK_STR_CONTAINS(err.message, "fn is NULL");
    CHECK_OK(mm_world_run(w, barrier_rank, NULL, NULL, NULL, &err), &err);
    CHECK_OK(mm_world_free(w, NULL), NULL);
}

int main(void) {
    test_arguments();
    test_many_calls();
    test_scenarios_on_world();
    test_result_rules();
    test_busy();
    test_timeout();
    test_caller_threads();
    test_parked_threads_idle();
    return mm_test_finish("test_world");
}
