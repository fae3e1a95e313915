/* comm/threads/threads_alltoallv.c: alltoallv of the threads backend, by pulling.
 *
 * Algorithm: each rank publishes pointers to its send buffer, counts and displacements and raises its
 * epoch flag (release). Every rank then copies, in the order its peers arrive (starting with itself),
 * its block straight out of each peer's send buffer into its own receive buffer, and acknowledges each
 * peer on that peer's ack line. A rank returns once every alive peer has acknowledged it, since only
 * then may its send buffer be reused. Cost: each byte is copied exactly once (memcpy bandwidth; the
 * receiving rank does the copy, so the copies of all ranks run in parallel), plus two flag rounds
 * (publish and acknowledge) of (alive - 1) cache-line reads each. A receive count that differs from
 * what the sender publishes is an error on the receiver; it sets the odd bit of its acknowledgement,
 * and the sender then fails with MM_ERR_PEER too, so no rank silently goes on with wrong data. */
#include <string.h>

#include "comm/threads/threads_internal.h"
#include "core/error.h"

mm_status mm_thr_alltoallv(mm_comm *c, const void *send, const size_t *send_counts, const size_t *send_displs,
                           void *recv, const size_t *recv_counts, const size_t *recv_displs, mm_error *err) {
    thr_group *g = thr_group_of(c);
    const int me = c->rank, n = c->size;
    uint64_t epoch = ++c->epoch;
    thr_slot *mine = &g->slots[me];
    mine->send = send;
    mine->send_counts = send_counts;
    mine->send_displs = send_displs;
    atomic_store_explicit(&mine->posted, epoch, memory_order_release);

    mm_status st = MM_OK;
    int bad_peer = -1;
    size_t bad_sent = 0;
    unsigned char missing[MM_COMM_MAX_RANKS] = {0};
    int left = 0;
    for (int p = 0; p < n; p++)
        if (c->alive[p]) left += missing[p] = 1;
    mm_waiter w;
    mm_waiter_start(&w, c->timeout);
    while (left) {
        int progressed = 0;
        for (int i = 0; i < n; i++) {
            int p = (me + i) % n; /* rotate so that ranks do not all read rank 0 first */
            if (!missing[p]) continue;
            const thr_slot *peer = &g->slots[p];
            if (atomic_load_explicit(&peer->posted, memory_order_acquire) < epoch) continue;
            size_t sent = peer->send_counts[me];
            uint64_t flag = 0;
            if (sent != recv_counts[p]) {
                flag = 1;
                if (bad_peer < 0) {
                    bad_peer = p;
                    bad_sent = sent;
                }
            } else if (sent) {
                memcpy((char *)recv + recv_displs[p], (const char *)peer->send + peer->send_displs[me], sent);
            }
            atomic_store_explicit(&g->acks[(size_t)p * (size_t)n + (size_t)me].v, 2 * epoch + flag,
                                  memory_order_release);
            missing[p] = 0;
            left--;
            progressed = 1;
        }
        if (left && !progressed && !mm_waiter_pause(&w))
            return mm_comm_fail_missing(c, err, "alltoallv", missing);
    }

    /* Wait until everybody has read my send buffer. */
    int peer_failed = -1;
    for (int p = 0; p < n; p++)
        if (c->alive[p]) left += missing[p] = 1;
    mm_waiter_start(&w, c->timeout);
    while (left) {
        for (int p = 0; p < n; p++) {
            if (!missing[p]) continue;
            uint64_t a =
                atomic_load_explicit(&g->acks[(size_t)me * (size_t)n + (size_t)p].v, memory_order_acquire);
            if (a < 2 * epoch) continue;
            if ((a & 1) && peer_failed < 0) peer_failed = p;
            missing[p] = 0;
            left--;
        }
        if (left && !mm_waiter_pause(&w))
            return mm_comm_fail_missing(c, err, "alltoallv (waiting for peers to read my data)", missing);
    }
    if (bad_peer >= 0)
        st = mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                     "alltoallv: rank %d sends %zu bytes to rank %d but recv_counts[%d] = %zu", bad_peer,
                     bad_sent, me, bad_peer, recv_counts[bad_peer]);
    else if (peer_failed >= 0)
        st = mm_fail(err, MM_ERR_PEER, "alltoallv: rank %d did not expect the %zu bytes rank %d sends it",
                     peer_failed, send_counts[peer_failed], me);
    return st;
}
