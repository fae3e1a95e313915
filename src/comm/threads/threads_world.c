/* SPDX-License-Identifier: Apache-2.0 */
/* comm/threads/threads_world.c: a persistent world of R ranks as threads of this process
 * (megamoe/world.h), and mm_comm_run_threads, which is one run on a world made for it.
 *
 * The rank threads are started once and park between calls. A call (mm_world_run) writes the job (fn,
 * arg, where results go), then bumps `generation` under the mutex; a parked rank sees the new
 * generation, runs fn on its communicator, and the last rank to finish wakes the driver. Waiting on
 * either side goes spin -> sched_yield -> condition variable, as the worker pool does (core/parallel.c):
 * a rank idle between two calls of a serving loop holds no core, while back-to-back calls do not pay a
 * sleeping thread's wake-up. Spinning is skipped when the rank threads and the driver outnumber the
 * cores (a spinner would hold the core the thread it waits for needs; docs/world.md).
 *
 * The job fields are plain memory: the driver writes them before its release of `generation`, ranks
 * read them after their acquire of it, and ranks write their results before their release decrement of
 * `remaining`, which the driver acquires. No field is touched outside those windows, so ThreadSanitizer
 * sees every access ordered. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "comm/threads/threads_internal.h"
#include "comm/world_internal.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/free_all.h"

enum {
    /* The worker pool's counts (core/parallel.c): long enough to catch the next call of a tight loop,
     * short enough to leave the cores to the caller's own work between calls. */
    WORLD_SPIN_ROUNDS = 2000,
    WORLD_YIELD_ROUNDS = 64,
};

typedef struct world_rank {
    mm_world *world;
    int rank;
} world_rank;

struct mm_world {
    int size, flags;
    thr_group *group;
    atomic_int busy; /* 1 while a driver is inside a call (or freeing) */
    int spin_rounds; /* WORLD_SPIN_ROUNDS, or 0 when the threads outnumber the cores */
    /* Rank threads (none with MM_WORLD_CALLER_THREADS). */
    pthread_t *threads;
    world_rank *ranks;
    int started;
    pthread_mutex_t mutex;
    pthread_cond_t work_cond;                 /* parked ranks sleep here */
    pthread_cond_t done_cond;                 /* the driver sleeps here */
    int sleeping_ranks;                       /* guarded by mutex */
    int driver_sleeping;                      /* guarded by mutex */
    _Alignas(64) _Atomic uint64_t generation; /* jobs handed out so far (the last one may be "stop") */
    _Alignas(64) atomic_int remaining;        /* ranks still running the current job */
    /* The current job: written by the driver before it bumps generation (see the top). */
    _Alignas(64) mm_comm_rank_fn fn;
    void *arg;
    int stopping;
    mm_status *status; /* the caller's per-rank arrays, or the world's own */
    mm_error *errs;
    mm_status *own_status;
    mm_error *own_errs;
};

/* ---- the merge of the ranks' results (the one place for comm.h's rule) -------------------------- */

static mm_status merge_results(int n, const mm_status *sts, const mm_error *errs, mm_rank_merge rule,
                               mm_error *err) {
    int first_failed = -1, n_failed = 0, identical = 1;
    for (int r = 0; r < n; r++) {
        if (sts[r] == MM_OK) continue;
        n_failed++;
        if (first_failed < 0)
            first_failed = r;
        else if (sts[r] != sts[first_failed] || strcmp(errs[r].message, errs[first_failed].message) != 0)
            identical = 0;
    }
    if (first_failed < 0) return MM_OK;
    /* Every rank failing with one message is a collective error agreed with mm_comm_agree, whose message
     * already names the rank at fault: prefixing "rank 0: " would repeat or misattribute it. */
    if (rule == MM_MERGE_AS_WRITTEN || (identical && n_failed == n && n > 1))
        return mm_fail(err, sts[first_failed], "%s", errs[first_failed].message);
    return mm_fail(err, sts[first_failed], "rank %d: %s", first_failed, errs[first_failed].message);
}

/* ---- the rank threads --------------------------------------------------------------------------- */

/* Returns the first generation different from seen (parks the thread once the spin and yield phases
 * have passed). */
static uint64_t wait_for_job(mm_world *w, uint64_t seen) {
    uint64_t g;
    for (int i = 0; i < w->spin_rounds; i++) {
        if ((g = atomic_load_explicit(&w->generation, memory_order_acquire)) != seen) return g;
        mm_cpu_pause();
    }
    for (int i = 0; i < WORLD_YIELD_ROUNDS; i++) {
        if ((g = atomic_load_explicit(&w->generation, memory_order_acquire)) != seen) return g;
        sched_yield();
    }
    pthread_mutex_lock(&w->mutex);
    w->sleeping_ranks++;
    while ((g = atomic_load_explicit(&w->generation, memory_order_acquire)) == seen)
        pthread_cond_wait(&w->work_cond, &w->mutex);
    w->sleeping_ranks--;
    pthread_mutex_unlock(&w->mutex);
    return g;
}

static void *world_rank_main(void *p) {
    const world_rank *self = p;
    mm_world *w = self->world;
    const int r = self->rank;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_job(w, seen);
        if (w->stopping) return NULL;
        mm_error *e = &w->errs[r];
        mm_status st = w->fn(&w->group->comms[r], w->arg, e);
        if (st != MM_OK && e->status == MM_OK) e->status = st;
        w->status[r] = st;
        /* The last rank wakes a sleeping driver; it touches nothing of the job after its decrement. */
        if (atomic_fetch_sub_explicit(&w->remaining, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&w->mutex);
            if (w->driver_sleeping) pthread_cond_signal(&w->done_cond);
            pthread_mutex_unlock(&w->mutex);
        }
    }
}

/* Hands the job (already written) to the ranks. */
static void publish_job(mm_world *w) {
    atomic_store_explicit(&w->remaining, w->size, memory_order_relaxed);
    pthread_mutex_lock(&w->mutex);
    atomic_fetch_add_explicit(&w->generation, 1, memory_order_release);
    if (w->sleeping_ranks > 0) pthread_cond_broadcast(&w->work_cond);
    pthread_mutex_unlock(&w->mutex);
}

static void wait_for_ranks(mm_world *w) {
    for (int i = 0; i < w->spin_rounds; i++) {
        if (atomic_load_explicit(&w->remaining, memory_order_acquire) == 0) return;
        mm_cpu_pause();
    }
    for (int i = 0; i < WORLD_YIELD_ROUNDS; i++) {
        if (atomic_load_explicit(&w->remaining, memory_order_acquire) == 0) return;
        sched_yield();
    }
    pthread_mutex_lock(&w->mutex);
    w->driver_sleeping = 1;
    while (atomic_load_explicit(&w->remaining, memory_order_acquire) != 0)
        pthread_cond_wait(&w->done_cond, &w->mutex);
    w->driver_sleeping = 0;
    pthread_mutex_unlock(&w->mutex);
}

/* Ends the started rank threads (all parked: no call is running) and frees everything. */
static void world_delete(mm_world *w) {
    if (w->started > 0) {
        w->stopping = 1;
        publish_job(w);
        for (int r = 0; r < w->started; r++) pthread_join(w->threads[r], NULL);
    }
    if (w->threads) {
        pthread_mutex_destroy(&w->mutex);
        pthread_cond_destroy(&w->work_cond);
        pthread_cond_destroy(&w->done_cond);
    }
    MM_FREE_ALL(w->threads, w->ranks, w->own_status, w->own_errs);
    mm_thr_group_delete(w->group);
    free(w);
}

/* mm_world_create, with `who` naming the public call in messages. */
static mm_status world_new(int nranks, int flags, const char *who, mm_world **out, mm_error *err) {
    if (nranks < 1 || nranks > MM_COMM_MAX_RANKS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: nranks = %d is outside [1, %d]", who, nranks,
                       MM_COMM_MAX_RANKS);
    if (flags != MM_WORLD_DEFAULT && flags != MM_WORLD_CALLER_THREADS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s: flags = %d is neither MM_WORLD_DEFAULT (0) nor MM_WORLD_CALLER_THREADS (1)", who,
                       flags);
    mm_world *w = calloc(1, sizeof *w);
    if (!w) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s: no memory for a world of %d ranks", who, nranks);
    w->size = nranks;
    w->flags = flags;
    w->group = mm_thr_group_new(nranks, mm_comm_default_timeout());
    w->own_status = calloc((size_t)nranks, sizeof *w->own_status);
    w->own_errs = calloc((size_t)nranks, sizeof *w->own_errs);
    if (!w->group || !w->own_status || !w->own_errs) {
        world_delete(w);
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s: no memory for a world of %d ranks", who, nranks);
    }
    w->group->owned_by_launcher = 1; /* its communicators are the world's, not mm_comm_free's */
    if (flags == MM_WORLD_DEFAULT) {
        w->threads = calloc((size_t)nranks, sizeof *w->threads);
        w->ranks = calloc((size_t)nranks, sizeof *w->ranks);
        if (!w->threads || !w->ranks) {
            free(w->threads); /* the mutex is not initialized yet: world_delete must not destroy it */
            w->threads = NULL;
            world_delete(w);
            return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s: no memory for a world of %d ranks", who, nranks);
        }
        pthread_mutex_init(&w->mutex, NULL);
        pthread_cond_init(&w->work_cond, NULL);
        pthread_cond_init(&w->done_cond, NULL);
        /* The rank threads plus the driver: spin only when each has a core (comm/wait.c's policy). */
        w->spin_rounds = mm_comm_spin_rounds_for(nranks + 1) ? WORLD_SPIN_ROUNDS : 0;
        for (; w->started < nranks; w->started++) {
            w->ranks[w->started] = (world_rank){w, w->started};
            if (pthread_create(&w->threads[w->started], NULL, world_rank_main, &w->ranks[w->started]) != 0) {
                int failed = w->started;
                world_delete(w);
                return mm_fail(err, MM_ERR_INTERNAL, "%s: could not start the thread of rank %d", who,
                               failed);
            }
        }
    }
    *out = w;
    return MM_OK;
}

/* ---- public calls ------------------------------------------------------------------------------- */

mm_status mm_world_create(int nranks, int flags, mm_world **out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_world_create: out is NULL");
    *out = NULL;
    return world_new(nranks, flags, "mm_world_create", out, err);
}

mm_status mm_world_free(mm_world *world, mm_error *err) {
    if (!world) return MM_OK;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&world->busy, &idle, 1))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "mm_world_free: the world is busy (a call is running on it; free it after the call)");
    world_delete(world);
    return MM_OK;
}

int mm_world_size(const mm_world *world) {
    return world ? world->size : 0;
}

mm_comm *mm_world_comm(mm_world *world, int rank) {
    if (!world || rank < 0 || rank >= world->size) return NULL;
    return &world->group->comms[rank];
}

mm_status mm_world_run_as(mm_world *world, const char *who, mm_comm_rank_fn fn, void *arg, mm_rank_merge rule,
                          mm_status *per_rank_status, mm_error *per_rank_err, mm_error *err) {
    if (!world) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: world is NULL", who);
    if (!fn) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: fn is NULL", who);
    if (world->flags & MM_WORLD_CALLER_THREADS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s: the world was created with MM_WORLD_CALLER_THREADS: it has no rank threads (the "
                       "caller's threads run the ranks on mm_world_comm)",
                       who);
    int idle = 0;
    if (!atomic_compare_exchange_strong(&world->busy, &idle, 1))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s: the world is busy (another call is running on it; a world is driven by one "
                       "thread at a time)",
                       who);
    world->fn = fn;
    world->arg = arg;
    world->status = per_rank_status ? per_rank_status : world->own_status;
    world->errs = per_rank_err ? per_rank_err : world->own_errs;
    for (int r = 0; r < world->size; r++) {
        world->status[r] = MM_OK;
        mm_error_clear(&world->errs[r]);
    }
    publish_job(world);
    wait_for_ranks(world);
    mm_status st = merge_results(world->size, world->status, world->errs, rule, err);
    atomic_store_explicit(&world->busy, 0, memory_order_release);
    return st;
}

mm_status mm_world_run(mm_world *world, mm_comm_rank_fn fn, void *arg, mm_status *per_rank_status,
                       mm_error *per_rank_err, mm_error *err) {
    return mm_world_run_as(world, "mm_world_run", fn, arg, MM_MERGE_PREFIXED, per_rank_status, per_rank_err,
                           err);
}

mm_status mm_comm_run_threads_as(int nranks, mm_comm_rank_fn fn, void *arg, mm_rank_merge rule,
                                 mm_status *per_rank_status, mm_error *per_rank_err, mm_error *err) {
    static const char who[] = "mm_comm_run_threads";
    if (nranks < 1 || nranks > MM_COMM_MAX_RANKS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: nranks = %d is outside [1, %d]", who, nranks,
                       MM_COMM_MAX_RANKS);
    if (!fn) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: fn is NULL", who);
    mm_world *w = NULL;
    mm_status st = world_new(nranks, MM_WORLD_DEFAULT, who, &w, err);
    if (st != MM_OK) return st;
    st = mm_world_run_as(w, who, fn, arg, rule, per_rank_status, per_rank_err, err);
    world_delete(w);
    return st;
}

mm_status mm_comm_run_threads(int nranks, mm_comm_rank_fn fn, void *arg, mm_status *per_rank_status,
                              mm_error *per_rank_err, mm_error *err) {
    return mm_comm_run_threads_as(nranks, fn, arg, MM_MERGE_PREFIXED, per_rank_status, per_rank_err, err);
}
