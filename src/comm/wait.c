/* SPDX-License-Identifier: Apache-2.0 */
/* comm/wait.c: the one waiting policy of every backend (spin, then yield, then sleep: on the rank's
 * doorbell when the backend has one, else in growing steps), the doorbell itself, and the message that
 * names the ranks a timed-out wait was missing. */
#define _DEFAULT_SOURCE /* syscall() in ISO C mode */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "comm/comm_internal.h"
#include "core/clock.h"
#include "core/cpu.h"
#include "core/cpu_budget.h"
#include "core/error.h"

/* Rounds of spinning (4 pauses and one poll each) before yielding, when every rank has its own core:
 * about 100 us (measured: docs/comm.md, 'Measured wait costs'), as MPI's own collectives poll.
 * A rank that yields on a machine shared
 * with other jobs can lose its core for a whole time slice, and MPI progress (rendezvous, CMA reads)
 * needs the receiver inside MPI_Test. With more ranks than cores there is no spinning at all (see
 * mm_comm_spin_rounds_for). */
#define MM_WAIT_SPIN_ROUNDS 1000
/* Yield (rather than sleep) for this long: a rank descheduled on a shared core is back within a few
 * time slices, and a sleeping waiter is slow to wake (measured: docs/comm.md, 'Measured wait costs'). */
#define MM_WAIT_YIELD_SECONDS 2e-3
/* Sleep steps grow to this cap, which bounds the extra latency of a long wait (without a doorbell). */
#define MM_WAIT_SLEEP_MAX_NS 200000L
/* Longest single sleep on a doorbell: the deadline is re-checked at least this often. Every write that
 * can end a wait rings, so this is not the latency (a safety net only). */
#define MM_WAIT_BELL_MAX_NS 10000000L

void mm_waiter_start(mm_waiter *w, double timeout) {
    w->rounds = 0;
    w->sleeps = 0;
    w->spin_rounds = MM_WAIT_SPIN_ROUNDS;
    w->start = mm_now_seconds();
    w->deadline = w->start + timeout;
    w->bell = NULL;
    w->armed = 0;
    w->seen = 0;
}

void mm_waiter_start_for(mm_waiter *w, const mm_comm *c) {
    mm_waiter_start(w, c->timeout);
    w->spin_rounds = (uint64_t)c->spin_rounds;
    w->bell = c->bell;
}

int mm_comm_spin_rounds_for(int ranks_here) {
    /* The CPUs this process may use (affinity mask and cgroup quota), not the machine's. */
    return ranks_here > mm_cpu_budget_cpus() ? 0 : MM_WAIT_SPIN_ROUNDS;
}

#ifdef __linux__
static void futex_wait(_Atomic uint32_t *addr, uint32_t expected, long ns) {
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}
static void futex_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
#else
/* No futex: a short sleep, then the caller re-checks. */
static void futex_wait(_Atomic uint32_t *addr, uint32_t expected, long ns) {
    (void)addr;
    (void)expected;
    struct timespec ts = {0, ns < 50000L ? ns : 50000L};
    nanosleep(&ts, NULL);
}
static void futex_wake_all(_Atomic uint32_t *addr) {
    (void)addr;
}
#endif

/* Dekker-style with the waiter (mm_waiter_pause): the writer's data store, a full fence, then a load of
 * `sleepers`; the waiter's increment of `sleepers`, then its check of the data. Either this load sees
 * the sleeper (and the count moves, so its futex wait returns or is woken), or the sleeper's check sees
 * the data. When nobody sleeps (the common case) a ring is one fence and one load of a line that stays
 * shared. */
void mm_doorbell_ring(mm_doorbell *bell) {
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&bell->sleepers, memory_order_relaxed) == 0) return;
    atomic_fetch_add(&bell->count, 1);
    futex_wake_all(&bell->count);
}

/* The doorbell phase: one pause arms (registers as a sleeper and notes the count, then the caller
 * checks its condition once more), the next sleeps until the count moves, then disarms. */
static void bell_pause(mm_waiter *w, double left) {
    if (!w->armed) {
        atomic_fetch_add(&w->bell->sleepers, 1); /* sequentially consistent: see mm_doorbell_ring */
        w->seen = atomic_load(&w->bell->count);
        w->armed = 1;
        return;
    }
    long ns = (double)MM_WAIT_BELL_MAX_NS * 1e-9 < left ? MM_WAIT_BELL_MAX_NS : (long)(left * 1e9) + 1;
    futex_wait(&w->bell->count, w->seen, ns);
    atomic_fetch_sub(&w->bell->sleepers, 1);
    w->armed = 0;
}

void mm_waiter_end(mm_waiter *w) {
    if (w->armed) atomic_fetch_sub(&w->bell->sleepers, 1);
    w->armed = 0;
}

int mm_waiter_pause(mm_waiter *w) {
    w->rounds++;
    if (w->rounds < w->spin_rounds) {
        for (int i = 0; i < 4; i++) mm_cpu_pause();
        return 1;
    }
    double now = mm_now_seconds();
    if (now >= w->deadline) {
        mm_waiter_end(w);
        return 0;
    }
    double waited = now - w->start;
    if (waited < MM_WAIT_YIELD_SECONDS) {
        sched_yield();
        return 1;
    }
    if (w->bell) {
        bell_pause(w, w->deadline - now);
        return 1;
    }
    /* Sleep: 10 us doubling per round beyond the yield phase, capped, and never past the deadline. */
    long ns = 10000L;
    for (uint64_t i = 0; i < w->sleeps && ns < MM_WAIT_SLEEP_MAX_NS; i++) ns *= 2;
    if (ns > MM_WAIT_SLEEP_MAX_NS) ns = MM_WAIT_SLEEP_MAX_NS;
    w->sleeps++;
    double left = w->deadline - now;
    if ((double)ns * 1e-9 > left) ns = (long)(left * 1e9) + 1;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    return 1;
}

mm_status mm_comm_fail_missing(mm_comm *c, mm_error *err, const char *op, const unsigned char *missing) {
    char list[320];
    size_t at = 0;
    int count = 0;
    list[0] = '\0';
    for (int r = 0; r < c->size; r++) {
        if (!missing[r]) continue;
        int n = snprintf(list + at, sizeof list - at, "%s%d", count ? ", " : "", r);
        if (n < 0 || (size_t)n >= sizeof list - at) break;
        at += (size_t)n;
        count++;
    }
    return mm_fail(err, MM_ERR_TIMEOUT, "%s: rank%s %s did not arrive within %g s", op, count == 1 ? "" : "s",
                   list, c->timeout);
}
