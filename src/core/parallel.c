/* SPDX-License-Identifier: Apache-2.0 */
/* core/parallel.c: the process-wide worker pool behind mm_parallel_for.
 *
 * Design (see parallel.h): workers are created lazily and live until the process exits. Every
 * mm_parallel_for call is a job living on the caller's stack, linked into a mutex-protected list;
 * tasks are handed out by an atomic counter so the hot path takes no lock. The caller works on its
 * own job; idle workers attach to any job that still has unclaimed tasks and fewer helpers than the
 * thread count allows. Waiting always goes spin (with a pause) -> sched_yield -> condition variable,
 * because this machine has 2 cores and often more runnable rank-threads than cores: a pure spinner
 * would hold the core that the thread it waits for needs, while sleeping at once pays a slow wake-up
 * each time (measured: docs/comm.md, 'Measured wait costs').
 *
 * The default thread count is the CPU budget (core/cpu_budget.h). Pinning (megamoe/threads.h) binds the
 * workers from the thread that asks, with pthread_setaffinity_np on their remembered handles, so that it
 * takes effect at once, even for workers parked in a sleep.
 *
 * Workers hold no heap memory (the pool state is static, jobs live on callers' stacks), so
 * LeakSanitizer has nothing to report when the process exits with workers still parked. */
#include "core/parallel.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/cpu_budget.h"

/* The caller's floating-point control (x86-64: MXCSR, with DAZ, FTZ and the rounding mode; elsewhere
 * the fenv environment), which the workers take on for the tasks of its job: a caller that sets DAZ or
 * a rounding mode (e.g. PyTorch's set_flush_denormal) gets it in every task, so results do not depend on
 * which thread ran which task. */
#if defined(__x86_64__)
#include <xmmintrin.h>
typedef unsigned fp_control;
static fp_control fp_control_get(void) {
    return _mm_getcsr();
}
static void fp_control_set(fp_control c) {
    _mm_setcsr(c);
}
#else
#include <fenv.h>
typedef fenv_t fp_control;
static fp_control fp_control_get(void) {
    fenv_t e;
    fegetenv(&e);
    return e;
}
static void fp_control_set(fp_control c) {
    fesetenv(&c);
}
#endif

enum {
    MM_MAX_THREADS = 1024,
    /* Pause instructions long enough to catch the next call of a tight loop of parallel calls, short
     * enough not to starve oversubscribed rank-threads (their duration: docs/comm.md, 'Measured wait
     * costs'). */
    MM_SPIN_ROUNDS = 2000,
    MM_YIELD_ROUNDS = 64,
    /* CPUs of the affinity mask that pinning spreads workers over (the rest are left unused). */
    MM_MAX_PIN_CPUS = 4096,
};

typedef struct mm_job {
    mm_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    int max_helpers;                    /* workers allowed on this job at once (thread count - 1) */
    atomic_int_fast64_t next;           /* next unclaimed task */
    atomic_int_fast64_t done;           /* finished tasks */
    atomic_int attached;                /* workers currently holding a pointer to this job */
    fp_control fp;                      /* the caller's floating-point control */
    int caller_sleeping;                /* guarded by pool.mutex */
    struct mm_job *prev_job, *next_job; /* guarded by pool.mutex */
} mm_job;

static struct {
    pthread_mutex_t mutex;
    pthread_cond_t work_cond;          /* workers sleep here waiting for a new job */
    pthread_cond_t done_cond;          /* callers sleep here waiting for their job's last task */
    atomic_uint_fast64_t epoch;        /* bumped on every submission, read lock-free by spinning workers */
    atomic_int num_threads;            /* configured thread count, including the caller */
    int spawned_workers;               /* guarded by mutex */
    int sleeping_workers;              /* guarded by mutex */
    mm_job *jobs;                      /* guarded by mutex: jobs that have not yet been retired */
    pthread_t workers[MM_MAX_THREADS]; /* guarded by mutex: the spawned workers, in spawn order */
    int pinned;                        /* guarded by mutex: workers bound to pin_cpus round-robin */
    int n_pin_cpus;                    /* guarded by mutex: 0 until pinning was first asked for */
    int pin_cpus[MM_MAX_PIN_CPUS];     /* guarded by mutex: the affinity mask when pinning was asked for */
} pool = {
    .mutex = PTHREAD_MUTEX_INITIALIZER,
    .work_cond = PTHREAD_COND_INITIALIZER,
    .done_cond = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

/* Set in worker threads for their whole life and in callers while they run their own tasks, so a
 * mm_parallel_for issued from inside a task runs serially instead of waiting on the pool it occupies. */
static _Thread_local int inside_pool_task;

static int clamp_threads(long n) {
    if (n < 1) return 1;
    if (n > MM_MAX_THREADS) return MM_MAX_THREADS;
    return (int)n;
}

int mm_parallel_default_threads(void) {
    const char *env = getenv("MEGAMOE_NUM_THREADS");
    if (env && *env) {
        char *end = NULL;
        long parsed = strtol(env, &end, 10);
        if (end && *end == '\0' && parsed > 0) return clamp_threads(parsed);
    }
    mm_cpu_budget budget;
    mm_cpu_budget_read("", &budget);
    return clamp_threads(budget.cpus);
}

/* Binds a thread to the given CPUs; 0 or an errno value. */
static int bind_thread(pthread_t thread, const int *cpus, int n) {
#ifdef __linux__
    int top = 0;
    for (int i = 0; i < n; i++)
        if (cpus[i] > top) top = cpus[i];
    cpu_set_t *set = CPU_ALLOC(top + 1);
    if (!set) return ENOMEM;
    size_t bytes = CPU_ALLOC_SIZE(top + 1);
    CPU_ZERO_S(bytes, set);
    for (int i = 0; i < n; i++) CPU_SET_S(cpus[i], bytes, set);
    int rc = pthread_setaffinity_np(thread, bytes, set);
    CPU_FREE(set);
    return rc;
#else
    (void)thread;
    (void)cpus;
    (void)n;
    return ENOSYS;
#endif
}

/* Under the mutex: worker i on the i-th pinning CPU (round-robin), or on all of them when unpinned. */
static int place_worker_locked(int i) {
    if (pool.n_pin_cpus == 0) return 0; /* never pinned: the OS placement was never changed */
    if (pool.pinned) return bind_thread(pool.workers[i], &pool.pin_cpus[i % pool.n_pin_cpus], 1);
    return bind_thread(pool.workers[i], pool.pin_cpus, pool.n_pin_cpus);
}

/* Under the mutex. The CPUs are the calling thread's mask when pinning is switched on. */
static int set_pinning_locked(int on) {
    if (on) {
        int n = mm_affinity_cpu_list(pool.pin_cpus, MM_MAX_PIN_CPUS);
        if (n <= 0) return ENOSYS;
        pool.n_pin_cpus = n;
    }
    pool.pinned = on != 0;
    int rc = 0;
    for (int i = 0; i < pool.spawned_workers; i++) {
        int r = place_worker_locked(i);
        if (r && !rc) rc = r;
    }
    return rc;
}

static void read_thread_count(void) {
    /* A set_num_threads that ran before the first use wins over the environment. */
    int expected = 0;
    atomic_compare_exchange_strong(&pool.num_threads, &expected, mm_parallel_default_threads());
    const char *pin = getenv("MEGAMOE_PIN");
    if (pin && strcmp(pin, "1") == 0) {
        pthread_mutex_lock(&pool.mutex);
        (void)set_pinning_locked(1); /* no affinity call: workers run where the OS puts them */
        pthread_mutex_unlock(&pool.mutex);
    }
}

int mm_parallel_num_threads(void) {
    pthread_once(&pool_once, read_thread_count);
    return atomic_load(&pool.num_threads);
}

void mm_parallel_set_num_threads(int n) {
    pthread_once(&pool_once, read_thread_count);
    atomic_store(&pool.num_threads, clamp_threads(n));
}

int mm_parallel_set_pinning(int on) {
    pthread_once(&pool_once, read_thread_count);
    pthread_mutex_lock(&pool.mutex);
    int rc = set_pinning_locked(on);
    pthread_mutex_unlock(&pool.mutex);
    return rc;
}

int mm_parallel_pinning(void) {
    pthread_once(&pool_once, read_thread_count);
    pthread_mutex_lock(&pool.mutex);
    int on = pool.pinned;
    pthread_mutex_unlock(&pool.mutex);
    return on;
}

int mm_parallel_worker_cpus(int worker, int *cpus, int max) {
    int count = -1;
    pthread_mutex_lock(&pool.mutex);
#ifdef __linux__
    if (worker >= 0 && worker < pool.spawned_workers) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (pthread_getaffinity_np(pool.workers[worker], sizeof set, &set) == 0) {
            count = 0;
            for (int cpu = 0; cpu < CPU_SETSIZE && count < max; cpu++)
                if (CPU_ISSET(cpu, &set)) cpus[count++] = cpu;
        }
    }
#else
    (void)worker;
    (void)cpus;
    (void)max;
#endif
    pthread_mutex_unlock(&pool.mutex);
    return count;
}

int mm_parallel_spawned_workers(void) {
    pthread_mutex_lock(&pool.mutex);
    int n = pool.spawned_workers;
    pthread_mutex_unlock(&pool.mutex);
    return n;
}

/* Returns once the epoch differs from *seen, updating *seen. */
static void wait_for_new_job(uint_fast64_t *seen) {
    for (int i = 0; i < MM_SPIN_ROUNDS; i++) {
        if (atomic_load_explicit(&pool.epoch, memory_order_acquire) != *seen) goto changed;
        mm_cpu_pause();
    }
    for (int i = 0; i < MM_YIELD_ROUNDS; i++) {
        if (atomic_load_explicit(&pool.epoch, memory_order_acquire) != *seen) goto changed;
        sched_yield();
    }
    pthread_mutex_lock(&pool.mutex);
    pool.sleeping_workers++;
    while (atomic_load(&pool.epoch) == *seen) pthread_cond_wait(&pool.work_cond, &pool.mutex);
    pool.sleeping_workers--;
    pthread_mutex_unlock(&pool.mutex);
changed:
    *seen = atomic_load_explicit(&pool.epoch, memory_order_acquire);
}

/* Runs unclaimed tasks of job until none are left. The thread that finishes the last task wakes the
 * caller if it went to sleep. */
static void run_tasks(mm_job *job) {
    for (;;) {
        int64_t task = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
        if (task >= job->n_tasks) return;
        job->fn(job->ctx, task);
        if (atomic_fetch_add_explicit(&job->done, 1, memory_order_acq_rel) + 1 == job->n_tasks) {
            pthread_mutex_lock(&pool.mutex);
            if (job->caller_sleeping) pthread_cond_broadcast(&pool.done_cond);
            pthread_mutex_unlock(&pool.mutex);
        }
    }
}

/* Under the mutex: a job with unclaimed tasks and room for one more helper, attached; or NULL. */
static mm_job *attach_to_open_job(void) {
    mm_job *found = NULL;
    pthread_mutex_lock(&pool.mutex);
    for (mm_job *job = pool.jobs; job; job = job->next_job) {
        if (atomic_load_explicit(&job->next, memory_order_relaxed) >= job->n_tasks) continue;
        if (atomic_load(&job->attached) >= job->max_helpers) continue;
        atomic_fetch_add(&job->attached, 1);
        found = job;
        break;
    }
    pthread_mutex_unlock(&pool.mutex);
    return found;
}

static void *worker_main(void *unused) {
    (void)unused;
    inside_pool_task = 1;
    uint_fast64_t seen = 0;
    for (;;) {
        wait_for_new_job(&seen);
        /* Epoch was read before scanning, so a job submitted after the scan bumps it past `seen`. */
        for (mm_job *job = attach_to_open_job(); job; job = attach_to_open_job()) {
            fp_control own = fp_control_get();
            fp_control_set(job->fp);
            run_tasks(job);
            fp_control_set(own);
            atomic_fetch_sub_explicit(&job->attached, 1, memory_order_release); /* last touch */
        }
    }
    return NULL;
}

/* Under the mutex: grow the pool to `wanted` workers. A failed pthread_create just leaves fewer
 * helpers; the caller always makes progress on its own. Workers block signals so that signal
 * handlers keep running on the application's threads. */
static void spawn_workers_locked(int wanted) {
    if (pool.spawned_workers >= wanted) return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (pool.spawned_workers < wanted) {
        pthread_t thread;
        if (pthread_create(&thread, &attr, worker_main, NULL) != 0) break;
        pool.workers[pool.spawned_workers] = thread;
        (void)place_worker_locked(pool.spawned_workers); /* a refused binding leaves the OS placement */
        pool.spawned_workers++;
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void wait_for_job_done(mm_job *job) {
    for (int i = 0; i < MM_SPIN_ROUNDS; i++) {
        if (atomic_load_explicit(&job->done, memory_order_acquire) == job->n_tasks) return;
        mm_cpu_pause();
    }
    for (int i = 0; i < MM_YIELD_ROUNDS; i++) {
        if (atomic_load_explicit(&job->done, memory_order_acquire) == job->n_tasks) return;
        sched_yield();
    }
    pthread_mutex_lock(&pool.mutex);
    job->caller_sleeping = 1;
    while (atomic_load(&job->done) != job->n_tasks) pthread_cond_wait(&pool.done_cond, &pool.mutex);
    pthread_mutex_unlock(&pool.mutex);
}

static void run_serially(int64_t n_tasks, mm_task_fn fn, void *ctx) {
    for (int64_t task = 0; task < n_tasks; task++) fn(ctx, task);
}

void mm_parallel_for(int64_t n_tasks, mm_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    int threads = mm_parallel_num_threads();
    if (inside_pool_task || threads <= 1 || n_tasks == 1) {
        run_serially(n_tasks, fn, ctx);
        return;
    }

    mm_job job = {.fn = fn, .ctx = ctx, .n_tasks = n_tasks, .fp = fp_control_get()};
    job.max_helpers = n_tasks - 1 < threads - 1 ? (int)(n_tasks - 1) : threads - 1;
    atomic_init(&job.next, 0);
    atomic_init(&job.done, 0);
    atomic_init(&job.attached, 0);

    pthread_mutex_lock(&pool.mutex);
    spawn_workers_locked(threads - 1);
    job.next_job = pool.jobs;
    if (pool.jobs) pool.jobs->prev_job = &job;
    pool.jobs = &job;
    atomic_fetch_add_explicit(&pool.epoch, 1, memory_order_release);
    if (pool.sleeping_workers > 0) {
        if (pool.sleeping_workers <= job.max_helpers)
            pthread_cond_broadcast(&pool.work_cond);
        else
            for (int i = 0; i < job.max_helpers; i++) pthread_cond_signal(&pool.work_cond);
    }
    pthread_mutex_unlock(&pool.mutex);

    inside_pool_task = 1;
    run_tasks(&job);
    inside_pool_task = 0;
    wait_for_job_done(&job);

    /* Retire the job so no worker can attach, then wait for attached workers to let go of it
     * (they only check the task counter and detach, so this is short). */
    pthread_mutex_lock(&pool.mutex);
    if (job.prev_job)
        job.prev_job->next_job = job.next_job;
    else
        pool.jobs = job.next_job;
    if (job.next_job) job.next_job->prev_job = job.prev_job;
    pthread_mutex_unlock(&pool.mutex);
    for (int spins = 0; atomic_load_explicit(&job.attached, memory_order_acquire) != 0; spins++) {
        if (spins < MM_SPIN_ROUNDS)
            mm_cpu_pause();
        else
            sched_yield();
    }
}
