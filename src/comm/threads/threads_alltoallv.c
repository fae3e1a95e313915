/* SPDX-License-Identifier: Apache-2.0 */
/* comm/threads/threads_alltoallv.c: alltoallv of the threads backend: small blocks pushed through
 * mailboxes, large blocks pulled from the sender's buffer.
 *
 * Algorithm. Each rank publishes pointers to its send buffer, counts and displacements, then writes
 * one mailbox per peer (a header line with the epoch, the byte count and the mode, release-stored
 * last). A block of at most inline_max bytes travels inside the mailbox; a larger block is pulled:
 * the receiver copies it straight out of the sender's send buffer and acknowledges on the sender's
 * ack line. Every rank copies its own block locally, then, in the order its peers arrive, takes each
 * peer's block. It returns when every peer's block is in, and every peer it sent a pulled block to has
 * acknowledged (only then may its send buffer be reused).
 *
 * Cost. Inline: two copies of the block (into the mailbox, out of it) and one flag round, so 8-byte
 * messages cost one handoff between ranks, like an eager MPI send. Pull: one copy (memcpy bandwidth,
 * done by the receivers in parallel) and two flag rounds. Each flag is its own cache line.
 *
 * Mailbox reuse is safe without any extra round: mailboxes alternate by epoch parity, and a sender
 * that has finished collective e has seen every peer enter e, so every peer has finished reading
 * what it sent in e - 1, the last collective that used the same parity.
 *
 * A block whose size differs from the receiver's recv_counts entry is an error on the receiver
 * (naming the sender); with a pulled block the sender learns it through its acknowledgement and fails
 * with MM_ERR_PEER. */
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

    unsigned char missing[MM_COMM_MAX_RANKS] = {0}, pulled[MM_COMM_MAX_RANKS] = {0};
    int left = 0;
    for (int i = 1; i < n; i++) {
        int p = (me + i) % n; /* rotate so that ranks do not all serve rank 0 first */
        if (!c->alive[p]) continue;
        thr_mailbox_header *box = thr_mailbox(g, me, p, epoch);
        size_t count = send_counts[p];
        box->count = count;
        box->pull = count > g->inline_max;
        if (box->pull) {
            pulled[p] = 1;
        } else if (count) {
            memcpy((unsigned char *)box + 64, (const char *)send + send_displs[p], count);
        }
        atomic_store_explicit(&box->epoch, epoch, memory_order_release);
        mm_doorbell_ring(&g->bells[p]);
        left += missing[p] = 1;
    }

    int bad_peer = -1;
    size_t bad_sent = 0;
    if (send_counts[me] != recv_counts[me]) {
        bad_peer = me;
        bad_sent = send_counts[me];
    } else if (send_counts[me]) {
        memcpy((char *)recv + recv_displs[me], (const char *)send + send_displs[me], send_counts[me]);
    }

    mm_waiter w;
    mm_waiter_start_for(&w, c);
    while (left) {
        int progressed = 0;
        for (int i = 1; i < n; i++) {
            int p = (me + n - i) % n;
            if (!missing[p]) continue;
            thr_mailbox_header *box = thr_mailbox(g, p, me, epoch);
            if (atomic_load_explicit(&box->epoch, memory_order_acquire) < epoch) continue;
            size_t sent = box->count;
            int mismatch = sent != recv_counts[p];
            if (mismatch) {
                if (bad_peer < 0) {
                    bad_peer = p;
                    bad_sent = sent;
                }
            } else if (sent) {
                const char *from = box->pull ? (const char *)g->slots[p].send + g->slots[p].send_displs[me]
                                             : (const char *)box + 64;
                memcpy((char *)recv + recv_displs[p], from, sent);
            }
            if (box->pull) {
                atomic_store_explicit(&g->acks[(size_t)p * (size_t)n + (size_t)me].v,
                                      2 * epoch + (uint64_t)mismatch, memory_order_release);
                mm_doorbell_ring(&g->bells[p]);
            }
            missing[p] = 0;
            left--;
            progressed = 1;
        }
        if (left && !progressed && !mm_waiter_pause(&w))
            return mm_comm_fail_missing(c, err, "alltoallv", missing);
    }
    mm_waiter_end(&w);

    /* Wait until every peer that pulls from my send buffer is done with it. */
    int peer_failed = -1;
    for (int p = 0; p < n; p++) left += missing[p] = pulled[p];
    mm_waiter_start_for(&w, c);
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
    mm_waiter_end(&w);
    if (bad_peer >= 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "alltoallv: rank %d sends %zu bytes to rank %d but recv_counts[%d] = %zu", bad_peer,
                       bad_sent, me, bad_peer, recv_counts[bad_peer]);
    if (peer_failed >= 0)
        return mm_fail(err, MM_ERR_PEER, "alltoallv: rank %d did not expect the %zu bytes rank %d sends it",
                       peer_failed, send_counts[peer_failed], me);
    return MM_OK;
}
