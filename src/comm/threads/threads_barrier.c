/* SPDX-License-Identifier: Apache-2.0 */
/* comm/threads/threads_barrier.c: barrier of the threads backend.
 *
 * Algorithm: each rank stores its new epoch into its own flag (release), then waits until the flag of
 * every alive rank has reached that epoch (acquire). One round, no central counter to contend on, and
 * a timeout knows exactly which ranks are missing. Cost: one store plus (alive - 1) flag reads per
 * rank, each on its own cache line; with more ranks than cores the spin-yield-sleep waiter lets the
 * late ranks run. Flags are monotonic, so a rank that leaves early and enters the next collective
 * (raising its flag further) still satisfies the slower ranks' ">= epoch" test. */
#include "comm/threads/threads_internal.h"

mm_status mm_thr_barrier(mm_comm *c, mm_error *err) {
    thr_group *g = thr_group_of(c);
    uint64_t epoch = ++c->epoch;
    atomic_store_explicit(&g->slots[c->rank].posted, epoch, memory_order_release);
    thr_ring_peers(c);
    unsigned char missing[MM_COMM_MAX_RANKS] = {0};
    int left = 0;
    for (int p = 0; p < c->size; p++)
        if (p != c->rank && c->alive[p]) left += missing[p] = 1;
    mm_waiter w;
    mm_waiter_start_for(&w, c);
    for (;;) {
        for (int p = 0; p < c->size; p++)
            if (missing[p] && atomic_load_explicit(&g->slots[p].posted, memory_order_acquire) >= epoch) {
                missing[p] = 0;
                left--;
            }
        if (!left) {
            mm_waiter_end(&w);
            return MM_OK;
        }
        if (!mm_waiter_pause(&w)) return mm_comm_fail_missing(c, err, "barrier", missing);
    }
}
