/* SPDX-License-Identifier: Apache-2.0 */
/* comm/mpi/mpi_symm.c: symmetric buffers of the MPI backend, as MPI-3 RMA windows.
 *
 * Each rank's part is its data followed by one 64-byte signal line per sender. Two layouts:
 *   - every rank on one node (the usual case here): MPI_Win_allocate_shared. Every part is mapped in
 *     every process, so a put is a memcpy into the peer's part and a signal a C11 atomic add (release)
 *     on the peer's line, exactly as in the threads backend: no MPI call on the hot path, and
 *     mm_symm_peer_ptr gives direct load/store access;
 *   - ranks on several nodes (or MEGAMOE_COMM_MPI_NO_SHM=1, which tests this path on one node):
 *     MPI_Win_allocate with a lock_all epoch for the buffer's lifetime. A put is MPI_Put + MPI_Win_flush
 *     (complete at the target when it returns); a signal is an MPI_Accumulate(MPI_SUM) + flush after
 *     it, so the data is in place before the counter moves; the receiver reads its counter with
 *     MPI_Fetch_and_op(MPI_NO_OP), atomic with respect to the accumulates, then MPI_Win_sync.
 * Allocation is guarded by a timed barrier (MPI_Win_allocate* is a blocking collective). Freeing
 * needs every rank (MPI_Win_free is collective): after a scale-in the window is left to
 * MPI_Finalize, and allocating needs every rank alive. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "comm/mpi/mpi_internal.h"
#include "core/error.h"

typedef struct mpi_symm {
    mm_symm handle;
    MPI_Win win;
    int shared;
    size_t stride; /* data bytes rounded up to a cache line: signal lines start there */
    unsigned char *parts[MM_COMM_MAX_RANKS]; /* shared: every rank's part mapped here */
} mpi_symm;

static mpi_symm *mpi_symm_of(const mm_symm *s) {
    return (mpi_symm *)s->impl;
}

mm_status mm_mpi_symm_alloc(mm_comm *c, size_t bytes, mm_symm **out, mm_error *err) {
    mpi_impl *m = mpi_impl_of(c);
    mm_status st = MM_OK;
    int locked = 0;
    if (c->alive_count != c->size)
        return mm_fail(
            err, MM_ERR_UNSUPPORTED,
            "the MPI backend allocates symmetric buffers only while every rank is alive (allocate them "
            "before a scale-in; %d of %d ranks are alive)",
            c->alive_count, c->size);
    mpi_symm *t = calloc(1, sizeof *t);
    if (!t) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "no memory for the handle");
    t->win = MPI_WIN_NULL;
    t->stride = (bytes + 63) & ~(size_t)63;
    size_t part = t->stride + (size_t)c->size * 64;
    if (bytes > ((size_t)1 << 46)) {
        st = mm_fail(err, MM_ERR_INVALID_ARGUMENT, "bytes = %zu exceeds 2^46", bytes);
        goto fail;
    }
    st = mm_comm_barrier(c, err); /* everybody is here: the blocking allocation cannot hang */
    if (st) goto fail;
    t->shared = m->shared_windows;
    unsigned char *base = NULL;
    MPI_Info info;
    MPI_Info_create(&info);
    int rc;
    if (t->shared) {
        MPI_Info_set(info, "alloc_shared_noncontig", "true");
        rc = MPI_Win_allocate_shared((MPI_Aint)part, 1, info, m->comm, &base, &t->win);
    } else {
        rc = MPI_Win_allocate((MPI_Aint)part, 1, info, m->comm, &base, &t->win);
    }
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "MPI_Win_allocate%s of %zu bytes per rank failed",
                     t->shared ? "_shared" : "", part);
        goto fail;
    }
    MPI_Win_set_errhandler(t->win, MPI_ERRORS_RETURN);
    memset(base, 0, part);
    if (t->shared) {
        for (int r = 0; r < c->size; r++) {
            MPI_Aint size = 0;
            int disp = 0;
            MPI_Win_shared_query(t->win, r, &size, &disp, &t->parts[r]);
        }
    } else {
        t->parts[c->rank] = base;
    }
    MPI_Win_lock_all(MPI_MODE_NOCHECK, t->win);
    locked = 1;
    MPI_Win_sync(t->win);
    t->handle = (mm_symm){c, bytes, base, t};
    /* Nobody may put before every part is zeroed. */
    st = mm_comm_barrier(c, err);
    if (st) goto fail;
    *out = &t->handle;
    return MM_OK;
fail:
    if (locked) MPI_Win_unlock_all(t->win);
    /* After a failed barrier a peer is gone and MPI_Win_free would wait for it: the window (if any) is
     * left to MPI_Finalize. */
    free(t);
    return st;
}

mm_status mm_mpi_symm_free(mm_symm *s, mm_error *err) {
    mpi_symm *t = mpi_symm_of(s);
    mm_comm *c = s->comm;
    mm_status st = mm_comm_barrier(c, err);
    if (st) return st;
    MPI_Win_unlock_all(t->win);
    if (c->alive_count == c->size) MPI_Win_free(&t->win);
    free(t);
    return MM_OK;
}

mm_status mm_mpi_put(mm_symm *s, int peer, size_t offset, const void *src, size_t bytes, mm_error *err) {
    mpi_symm *t = mpi_symm_of(s);
    if (t->shared) {
        memcpy(t->parts[peer] + offset, src, bytes);
        return MM_OK;
    }
    /* MPI counts are int: large puts go in pieces. */
    const size_t chunk = (size_t)1 << 30;
    for (size_t done = 0; done < bytes; done += chunk) {
        size_t len = bytes - done < chunk ? bytes - done : chunk;
        int rc = MPI_Put((const char *)src + done, (int)len, MPI_BYTE, peer, (MPI_Aint)(offset + done),
                         (int)len, MPI_BYTE, t->win);
        if (rc != MPI_SUCCESS)
            return mm_fail(err, MM_ERR_INTERNAL, "symm_put: MPI_Put to rank %d failed", peer);
    }
    if (MPI_Win_flush(peer, t->win) != MPI_SUCCESS)
        return mm_fail(err, MM_ERR_INTERNAL, "symm_put: MPI_Win_flush to rank %d failed", peer);
    return MM_OK;
}

mm_status mm_mpi_signal(mm_symm *s, int peer, uint64_t add, mm_error *err) {
    mpi_symm *t = mpi_symm_of(s);
    int me = s->comm->rank;
    if (t->shared) {
        _Atomic uint64_t *line = (_Atomic uint64_t *)(t->parts[peer] + t->stride + (size_t)me * 64);
        atomic_fetch_add_explicit(line, add, memory_order_release);
        return MM_OK;
    }
    MPI_Aint disp = (MPI_Aint)(t->stride + (size_t)me * 64);
    if (MPI_Accumulate(&add, 1, MPI_UINT64_T, peer, disp, 1, MPI_UINT64_T, MPI_SUM, t->win) != MPI_SUCCESS ||
        MPI_Win_flush(peer, t->win) != MPI_SUCCESS)
        return mm_fail(err, MM_ERR_INTERNAL, "symm_signal: MPI_Accumulate to rank %d failed", peer);
    return MM_OK;
}

uint64_t mm_mpi_signal_value(mm_symm *s, int peer) {
    mpi_symm *t = mpi_symm_of(s);
    int me = s->comm->rank;
    if (t->shared) {
        _Atomic uint64_t *line = (_Atomic uint64_t *)(t->parts[me] + t->stride + (size_t)peer * 64);
        return atomic_load_explicit(line, memory_order_acquire);
    }
    uint64_t value = 0, dummy = 0;
    MPI_Aint disp = (MPI_Aint)(t->stride + (size_t)peer * 64);
    MPI_Fetch_and_op(&dummy, &value, MPI_UINT64_T, me, disp, MPI_NO_OP, t->win);
    MPI_Win_flush(me, t->win);
    MPI_Win_sync(t->win); /* the data that landed before the signal is visible to loads */
    return value;
}

void *mm_mpi_peer_ptr(mm_symm *s, int peer) {
    mpi_symm *t = mpi_symm_of(s);
    return t->shared ? t->parts[peer] : (peer == s->comm->rank ? s->local : NULL);
}
