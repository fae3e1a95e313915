/* SPDX-License-Identifier: Apache-2.0 */
/* comm/mpi/mpi_p2p.c: barrier and alltoallv of the MPI backend, by point-to-point messages.
 *
 * Algorithm: every rank posts one receive from and one send to each alive peer (a zero-byte message
 * for the barrier), tagged with the collective's epoch, copies its own block locally, then polls the
 * requests with MPI_Test under the spin-yield-sleep waiter. Cost: 2 (alive - 1) messages per rank; the
 * bytes go through Open MPI's shared-memory transport (two copies through its FIFOs here, one with
 * CMA). Unlike MPI_Alltoallv this knows which peer is missing when the timeout passes, and it skips
 * removed ranks. On timeout the receives still pending are cancelled; sends still pending are freed
 * (they complete or die with their peer). A received size different from recv_counts[p] is an error
 * on the receiver naming the sender. */
#include <limits.h>
#include <string.h>

#include "comm/mpi/mpi_internal.h"
#include "core/error.h"

/* Requests of one collective: recv[p] and send[p] per peer (MPI_REQUEST_NULL when none). */
typedef struct mpi_exchange {
    MPI_Request recv[MM_COMM_MAX_RANKS];
    MPI_Request send[MM_COMM_MAX_RANKS];
} mpi_exchange;

static void exchange_abandon(mpi_exchange *x, int n) {
    for (int p = 0; p < n; p++) {
        if (x->recv[p] != MPI_REQUEST_NULL) {
            MPI_Cancel(&x->recv[p]);
            MPI_Wait(&x->recv[p], MPI_STATUS_IGNORE); /* completes at once once cancelled */
        }
        if (x->send[p] != MPI_REQUEST_NULL) MPI_Request_free(&x->send[p]);
    }
}

/* Polls until every request completed, or the timeout (then names the peers still pending). For
 * received messages, checks the size against expect[p] (NULL: zero-byte messages). */
static mm_status exchange_wait(mm_comm *c, mpi_exchange *x, const size_t *expect, const char *op,
                               mm_error *err) {
    const int n = c->size;
    mm_waiter w;
    mm_waiter_start_for(&w, c);
    for (;;) {
        int pending = 0;
        for (int p = 0; p < n; p++) {
            if (x->recv[p] != MPI_REQUEST_NULL) {
                int done = 0;
                MPI_Status status;
                memset(&status, 0, sizeof status);
                int rc = MPI_Test(&x->recv[p], &done, &status);
                if (rc != MPI_SUCCESS) {
                    x->recv[p] = MPI_REQUEST_NULL; /* completed in error */
                    exchange_abandon(x, n);
                    return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                                   "%s: rank %d sends more bytes to rank %d than recv_counts[%d] = %zu", op,
                                   p, c->rank, p, expect ? expect[p] : 0);
                }
                if (done) {
                    int count = 0;
                    MPI_Get_count(&status, MPI_BYTE, &count);
                    size_t want = expect ? expect[p] : 0;
                    if ((size_t)count != want) {
                        exchange_abandon(x, n);
                        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                                       "%s: rank %d sends %d bytes to rank %d but recv_counts[%d] = %zu", op,
                                       p, count, c->rank, p, want);
                    }
                } else {
                    pending = 1;
                }
            }
            if (x->send[p] != MPI_REQUEST_NULL) {
                int done = 0;
                MPI_Test(&x->send[p], &done, MPI_STATUS_IGNORE);
                if (!done) pending = 1;
            }
        }
        if (!pending) return MM_OK;
        if (!mm_waiter_pause(&w)) break;
    }
    unsigned char missing[MM_COMM_MAX_RANKS] = {0};
    for (int p = 0; p < n; p++) missing[p] = x->recv[p] != MPI_REQUEST_NULL || x->send[p] != MPI_REQUEST_NULL;
    exchange_abandon(x, n);
    return mm_comm_fail_missing(c, err, op, missing);
}

static void exchange_init(mpi_exchange *x) {
    for (int p = 0; p < MM_COMM_MAX_RANKS; p++) x->recv[p] = x->send[p] = MPI_REQUEST_NULL;
}

mm_status mm_mpi_barrier(mm_comm *c, mm_error *err) {
    mpi_impl *m = mpi_impl_of(c);
    int tag = mm_mpi_tag(++c->epoch);
    mpi_exchange x;
    exchange_init(&x);
    char token = 0; /* zero-byte messages: never read or written */
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank || !c->alive[p]) continue;
        MPI_Irecv(&token, 0, MPI_BYTE, p, tag, m->comm, &x.recv[p]);
        MPI_Isend(&token, 0, MPI_BYTE, p, tag, m->comm, &x.send[p]);
    }
    return exchange_wait(c, &x, NULL, "barrier", err);
}

mm_status mm_mpi_alltoallv(mm_comm *c, const void *send, const size_t *send_counts, const size_t *send_displs,
                           void *recv, const size_t *recv_counts, const size_t *recv_displs, mm_error *err) {
    mpi_impl *m = mpi_impl_of(c);
    const int me = c->rank, n = c->size;
    int tag = mm_mpi_tag(++c->epoch);
    for (int p = 0; p < n; p++) {
        if (!c->alive[p]) continue;
        if (send_counts[p] > (size_t)INT_MAX || recv_counts[p] > (size_t)INT_MAX)
            return mm_fail(err, MM_ERR_UNSUPPORTED,
                           "alltoallv: %s[%d] = %zu exceeds the MPI message limit %d",
                           send_counts[p] > (size_t)INT_MAX ? "send_counts" : "recv_counts", p,
                           send_counts[p] > (size_t)INT_MAX ? send_counts[p] : recv_counts[p], INT_MAX);
    }
    if (send_counts[me] != recv_counts[me])
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "alltoallv: rank %d sends %zu bytes to rank %d but recv_counts[%d] = %zu", me,
                       send_counts[me], me, me, recv_counts[me]);
    mpi_exchange x;
    exchange_init(&x);
    /* Post the receives first so that sends find them (no unexpected-message copies). Zero-byte messages
     * are still sent: they tell the receiver its peer arrived, which the timeout needs. A longer message
     * than expected fails MPI_Test with a truncation error (MPI_ERRORS_RETURN), reported by name. */
    for (int i = 1; i < n; i++) {
        int p = (me + n - i) % n;
        if (!c->alive[p]) continue;
        MPI_Irecv((char *)recv + recv_displs[p], (int)recv_counts[p], MPI_BYTE, p, tag, m->comm, &x.recv[p]);
    }
    for (int i = 1; i < n; i++) {
        int p = (me + i) % n;
        if (!c->alive[p]) continue;
        MPI_Isend((const char *)send + send_displs[p], (int)send_counts[p], MPI_BYTE, p, tag, m->comm,
                  &x.send[p]);
    }
    if (send_counts[me])
        memcpy((char *)recv + recv_displs[me], (const char *)send + send_displs[me], send_counts[me]);
    return exchange_wait(c, &x, recv_counts, "alltoallv", err);
}
