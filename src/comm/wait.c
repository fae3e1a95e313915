/* comm/wait.c: the one waiting policy of every backend (spin, then yield, then sleep) and the message
 * that names the ranks a timed-out wait was missing. */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "core/clock.h"
#include "core/error.h"

/* Rounds of spinning (4 pauses and one poll each, 70 ns or more) before yielding, when every rank has
 * its own core: about 100 us, as MPI's own collectives poll. A rank that yields on a machine shared
 * with other jobs can lose its core for a whole time slice, and MPI progress (rendezvous, CMA reads)
 * needs the receiver inside MPI_Test. With more ranks than cores there is no spinning at all (see
 * mm_comm_spin_rounds_for). */
#define MM_WAIT_SPIN_ROUNDS 1000
/* Yield (rather than sleep) for this long: a rank descheduled on a shared core is back within a few
 * time slices, and a sleeping waiter costs ~24 us to wake. */
#define MM_WAIT_YIELD_SECONDS 2e-3
/* Sleep steps grow to this cap, which bounds the extra latency of a long wait. */
#define MM_WAIT_SLEEP_MAX_NS 200000L

void mm_waiter_start(mm_waiter *w, double timeout) {
    w->rounds = 0;
    w->sleeps = 0;
    w->spin_rounds = MM_WAIT_SPIN_ROUNDS;
    w->start = mm_now_seconds();
    w->deadline = w->start + timeout;
}

void mm_waiter_start_for(mm_waiter *w, const mm_comm *c) {
    mm_waiter_start(w, c->timeout);
    w->spin_rounds = (uint64_t)c->spin_rounds;
}

int mm_comm_spin_rounds_for(int ranks_here) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores >= 1 && ranks_here > cores ? 0 : MM_WAIT_SPIN_ROUNDS;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

int mm_waiter_pause(mm_waiter *w) {
    w->rounds++;
    if (w->rounds < w->spin_rounds) {
        for (int i = 0; i < 4; i++) cpu_relax();
        return 1;
    }
    double now = mm_now_seconds();
    if (now >= w->deadline) return 0;
    double waited = now - w->start;
    if (waited < MM_WAIT_YIELD_SECONDS) {
        sched_yield();
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
