/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_parallel.c: the worker pool runs every task exactly once, under concurrent submitters,
 * nested calls and a thread count of 1, reads its thread count from MEGAMOE_NUM_THREADS, and (x86-64)
 * runs every task of a call under the caller's MXCSR. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/parallel.h"
#include "testlib.h"

enum { MAX_TASKS = 1000 };

typedef struct counting_ctx {
    atomic_int runs[MAX_TASKS];
    atomic_int on_other_thread; /* tasks that ran on a thread other than `caller` */
    pthread_t caller;
} counting_ctx;

static void count_task(void *ctx, int64_t task) {
    counting_ctx *c = ctx;
    atomic_fetch_add(&c->runs[task], 1);
    if (!pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->on_other_thread, 1);
}

static void reset_counts(counting_ctx *c) {
    for (int i = 0; i < MAX_TASKS; i++) atomic_store(&c->runs[i], 0);
    atomic_store(&c->on_other_thread, 0);
    c->caller = pthread_self();
}

/* Returns the number of indices in [0, n) not run exactly once, plus any run outside [0, n). */
static int count_wrong_runs(counting_ctx *c, int64_t n) {
    int wrong = 0;
    for (int64_t i = 0; i < MAX_TASKS; i++) {
        int expected = i < n ? 1 : 0;
        if (atomic_load(&c->runs[i]) != expected) wrong++;
    }
    return wrong;
}

static void test_each_task_once(void) {
    static counting_ctx c;
    const int64_t sizes[] = {0, 1, 2, 7, 1000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (int rep = 0; rep < 20; rep++) {
            reset_counts(&c);
            mm_parallel_for(sizes[s], count_task, &c);
            CHECK_EQ_INT(count_wrong_runs(&c, sizes[s]), 0);
        }
    }
}

/* Each submitter thread runs many calls on its own context; the sums must be exact per thread. */
typedef struct submitter {
    counting_ctx counts;
    int wrong;
} submitter;

static void *submit_many(void *arg) {
    submitter *s = arg;
    for (int rep = 0; rep < 50; rep++) {
        int64_t n = 1 + (rep * 37) % 300;
        reset_counts(&s->counts);
        mm_parallel_for(n, count_task, &s->counts);
        s->wrong += count_wrong_runs(&s->counts, n);
    }
    return NULL;
}

static void test_concurrent_submitters(void) {
    enum { SUBMITTERS = 8 };
    static submitter subs[SUBMITTERS];
    pthread_t threads[SUBMITTERS];
    for (int i = 0; i < SUBMITTERS; i++) {
        subs[i].wrong = 0;
        CHECK_EQ_INT(pthread_create(&threads[i], NULL, submit_many, &subs[i]), 0);
    }
    for (int i = 0; i < SUBMITTERS; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < SUBMITTERS; i++) CHECK_EQ_INT(subs[i].wrong, 0);
}

/* Outer task i runs an inner parallel loop of 10 tasks adding into cell i*10 + j. */
typedef struct nested_ctx {
    atomic_int cells[100];
} nested_ctx;

typedef struct inner_ctx {
    nested_ctx *outer;
    int64_t row;
} inner_ctx;

static void inner_task(void *ctx, int64_t task) {
    inner_ctx *in = ctx;
    atomic_fetch_add(&in->outer->cells[in->row * 10 + task], 1);
}

static void outer_task(void *ctx, int64_t task) {
    inner_ctx in = {.outer = ctx, .row = task};
    mm_parallel_for(10, inner_task, &in);
}

static void test_nested(void) {
    static nested_ctx c;
    for (int rep = 0; rep < 10; rep++) {
        for (int i = 0; i < 100; i++) atomic_store(&c.cells[i], 0);
        mm_parallel_for(10, outer_task, &c);
        int wrong = 0;
        for (int i = 0; i < 100; i++) wrong += atomic_load(&c.cells[i]) != 1;
        CHECK_EQ_INT(wrong, 0);
    }
}

static void test_single_thread(void) {
    static counting_ctx c;
    int before = mm_parallel_num_threads();
    mm_parallel_set_num_threads(1);
    CHECK_EQ_INT(mm_parallel_num_threads(), 1);
    reset_counts(&c);
    mm_parallel_for(1000, count_task, &c);
    CHECK_EQ_INT(count_wrong_runs(&c, 1000), 0);
    CHECK_EQ_INT(atomic_load(&c.on_other_thread), 0); /* everything ran in the caller */
    mm_parallel_set_num_threads(0);                   /* clamped to 1 */
    CHECK_EQ_INT(mm_parallel_num_threads(), 1);
    mm_parallel_set_num_threads(before);
    CHECK_EQ_INT(mm_parallel_num_threads(), before);
}

/* With 4 threads and slow-ish tasks, helpers must actually take part (the pool is not serial). */
static void slow_task(void *ctx, int64_t task) {
    counting_ctx *c = ctx;
    volatile double x = 0;
    for (int i = 0; i < 20000; i++) x += i * 0.5;
    count_task(c, task);
}

static void test_workers_help(void) {
    static counting_ctx c;
    int helped = 0;
    for (int rep = 0; rep < 20 && !helped; rep++) {
        reset_counts(&c);
        mm_parallel_for(200, slow_task, &c);
        CHECK_EQ_INT(count_wrong_runs(&c, 200), 0);
        helped = atomic_load(&c.on_other_thread) > 0;
    }
    CHECK(helped);
}

#if defined(__x86_64__)
#include <xmmintrin.h>

/* Every task records the MXCSR it ran under (slow enough that the workers take some). */
typedef struct csr_ctx {
    unsigned seen[200];
    atomic_int on_other_thread;
    pthread_t caller;
} csr_ctx;

static void csr_task(void *ctx, int64_t task) {
    csr_ctx *c = ctx;
    volatile double x = 0;
    for (int i = 0; i < 20000; i++) x += i * 0.5;
    c->seen[task] = _mm_getcsr() & 0xFFC0u; /* the control bits, not the sticky exception flags */
    if (!pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->on_other_thread, 1);
}

/* A caller with DAZ, FTZ and rounding up: the workers run its tasks so, then return to their own MXCSR
 * (a later call from a caller with the default one sees the default in every task). */
static void test_caller_mxcsr(void) {
    static csr_ctx c;
    unsigned own = _mm_getcsr();
    const unsigned modes[2] = {(own & 0xFFC0u) | 0x40u | 0x8000u | 0x4000u, own & 0xFFC0u};
    for (int m = 0; m < 2; m++) {
        int helped = 0;
        for (int rep = 0; rep < 20 && !helped; rep++) {
            c.caller = pthread_self();
            atomic_store(&c.on_other_thread, 0);
            _mm_setcsr((own & ~0xFFC0u) | modes[m]);
            mm_parallel_for(200, csr_task, &c);
            unsigned after = _mm_getcsr() & 0xFFC0u;
            _mm_setcsr(own);
            CHECK_EQ_INT((int)after, (int)modes[m]);
            int wrong = 0;
            for (int t = 0; t < 200; t++) wrong += c.seen[t] != modes[m];
            CHECK_EQ_INT(wrong, 0);
            helped = atomic_load(&c.on_other_thread) > 0;
        }
        CHECK(helped);
    }
}
#endif

int main(void) {
    /* Read once, lazily: set before the first pool use. */
    setenv("MEGAMOE_NUM_THREADS", "4", 1);
    CHECK_EQ_INT(mm_parallel_num_threads(), 4);
    test_each_task_once();
    test_workers_help();
#if defined(__x86_64__)
    test_caller_mxcsr();
#endif
    test_concurrent_submitters();
    test_nested();
    test_single_thread();
    mm_parallel_set_num_threads(3);
    test_each_task_once();
    test_concurrent_submitters();
    return mm_test_finish("test_parallel");
}
