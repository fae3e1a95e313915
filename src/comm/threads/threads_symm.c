/* SPDX-License-Identifier: Apache-2.0 */
/* comm/threads/threads_symm.c: symmetric buffers of the threads backend.
 *
 * The first alive rank allocates every rank's part (data, then one 64-byte signal line per sender, so
 * that two senders never write the same line) and the handles of all ranks in one descriptor, and
 * hands its address to the others by an allgather. Puts are plain memcpy into the peer's part; a
 * signal is an atomic add with release ordering on the peer's line for me, and waiting is an acquire
 * load, so the data of earlier puts is visible once the counter is seen. Removed ranks own nothing,
 * and the survivors free everything. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "comm/threads/threads_internal.h"
#include "core/error.h"

typedef struct thr_symm {
    size_t stride; /* data bytes rounded up to a cache line: signal lines start there */
    unsigned char **parts;
    mm_symm *handles;
    int size;
} thr_symm;

static void thr_symm_delete(thr_symm *t) {
    if (!t) return;
    if (t->parts)
        for (int r = 0; r < t->size; r++) free(t->parts[r]);
    free(t->parts);
    free(t->handles);
    free(t);
}

static thr_symm *thr_symm_new(int size, size_t bytes) {
    thr_symm *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->size = size;
    t->stride = (bytes + 63) & ~(size_t)63;
    t->parts = calloc((size_t)size, sizeof *t->parts);
    t->handles = calloc((size_t)size, sizeof *t->handles);
    if (!t->parts || !t->handles) goto fail;
    size_t part_bytes = t->stride + (size_t)size * 64;
    for (int r = 0; r < size; r++) {
        t->parts[r] = aligned_alloc(64, part_bytes);
        if (!t->parts[r]) goto fail;
        memset(t->parts[r], 0, part_bytes);
    }
    return t;
fail:
    thr_symm_delete(t);
    return NULL;
}

static _Atomic uint64_t *signal_line(const thr_symm *t, int receiver, int sender) {
    return (_Atomic uint64_t *)(t->parts[receiver] + t->stride + (size_t)sender * 64);
}

mm_status mm_thr_symm_alloc(mm_comm *c, size_t bytes, mm_symm **out, mm_error *err) {
    if (bytes > ((size_t)1 << 46))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "bytes = %zu exceeds 2^46", bytes);
    int leader = 0;
    while (!c->alive[leader]) leader++;
    thr_symm *mine = NULL;
    if (c->rank == leader) {
        mine = thr_symm_new(c->size, bytes);
        if (mine) {
            for (int r = 0; r < c->size; r++)
                mine->handles[r] = (mm_symm){&thr_group_of(c)->comms[r], bytes, mine->parts[r], mine};
        }
    }
    thr_symm *all[MM_COMM_MAX_RANKS];
    mm_status st = mm_comm_allgather(c, &mine, sizeof mine, all, err);
    if (st) {
        thr_symm_delete(mine);
        return st;
    }
    thr_symm *t = all[leader];
    if (!t) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "rank %d could not allocate %d parts", leader, c->size);
    *out = &t->handles[c->rank];
    return MM_OK;
}

mm_status mm_thr_symm_free(mm_symm *s, mm_error *err) {
    mm_comm *c = s->comm;
    thr_symm *t = s->impl;
    /* After the barrier nobody touches the buffer; the barrier itself only uses the group's flags. */
    mm_status st = mm_comm_barrier(c, err);
    if (st) return st;
    int leader = 0;
    while (!c->alive[leader]) leader++;
    if (c->rank == leader) thr_symm_delete(t);
    return MM_OK;
}

mm_status mm_thr_put(mm_symm *s, int peer, size_t offset, const void *src, size_t bytes, mm_error *err) {
    (void)err;
    thr_symm *t = s->impl;
    memcpy(t->parts[peer] + offset, src, bytes);
    return MM_OK;
}

mm_status mm_thr_signal(mm_symm *s, int peer, uint64_t add, mm_error *err) {
    (void)err;
    thr_symm *t = s->impl;
    atomic_fetch_add_explicit(signal_line(t, peer, s->comm->rank), add, memory_order_release);
    mm_doorbell_ring(&thr_group_of(s->comm)->bells[peer]);
    return MM_OK;
}

uint64_t mm_thr_signal_value(mm_symm *s, int peer) {
    thr_symm *t = s->impl;
    return atomic_load_explicit(signal_line(t, s->comm->rank, peer), memory_order_acquire);
}

void *mm_thr_peer_ptr(mm_symm *s, int peer) {
    thr_symm *t = s->impl;
    return t->parts[peer];
}
