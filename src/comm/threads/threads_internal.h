/* SPDX-License-Identifier: Apache-2.0 */
/* comm/threads/threads_internal.h: shared state of the threads backend (ranks are threads of one
 * process, so every rank can read and write every other rank's memory directly).
 *
 * Synchronization is by monotonic 64-bit flags, each on its own cache line so that a rank spinning on
 * one flag never steals the line another rank is writing:
 *   - slots[r].posted: the number of the last collective rank r entered (its "epoch"); rank r publishes
 *     the arguments of that collective in slots[r] before the release store of posted;
 *   - acks[s * size + r]: 2 * epoch (+1 on a count mismatch) once rank r has finished reading rank s's
 *     send buffer for that collective, so rank s may return and reuse it.
 *   - mailboxes[(s * size + r) * 2 + parity]: what rank s sends rank r in the alltoallv of that parity
 *     of epoch: a header line (epoch, byte count, inline or pull) and, for small blocks, the bytes;
 * Flags only grow, so no flag ever needs resetting and a late reader never confuses two collectives. */
#ifndef MEGAMOE_COMM_THREADS_INTERNAL_H
#define MEGAMOE_COMM_THREADS_INTERNAL_H

#include <stdatomic.h>

#include "comm/comm_internal.h"

typedef struct thr_slot {
    _Alignas(64) _Atomic uint64_t posted;
    const void *send;
    const size_t *send_counts;
    const size_t *send_displs;
} thr_slot;

typedef struct thr_flag {
    _Alignas(64) _Atomic uint64_t v;
} thr_flag;

typedef struct thr_group {
    int size;
    int owned_by_launcher; /* a world (threads_world.c): freed with the world, not by mm_comm_free */
    thr_flag departed;     /* members done with the group during mm_comm_free */
    thr_slot *slots;       /* size */
    thr_flag *acks;        /* size * size, [sender * size + reader] */
    mm_doorbell *bells;    /* size: rung after every write that may end a wait of that rank */
    mm_comm *comms;        /* size: each rank's own handle */
    unsigned char *mailboxes;
    size_t mailbox_stride; /* header line + inline capacity */
    size_t inline_max;     /* blocks up to this many bytes travel inside the mailbox */
} thr_group;

typedef struct thr_mailbox_header {
    _Alignas(64) _Atomic uint64_t epoch; /* release-stored last, after the other fields and the bytes */
    size_t count;
    int pull; /* 1: the receiver copies from the sender's buffer and acknowledges */
} thr_mailbox_header;

static inline thr_mailbox_header *thr_mailbox(const thr_group *g, int sender, int receiver, uint64_t epoch) {
    size_t index = ((size_t)sender * (size_t)g->size + (size_t)receiver) * 2 + (size_t)(epoch & 1);
    return (thr_mailbox_header *)(g->mailboxes + index * g->mailbox_stride);
}

/* Largest block sent inline through a mailbox (two copies, one flag round) rather than pulled from the
 * sender's buffer (one copy, two flag rounds); see docs/comm.md for the measurement. The environment
 * variable MEGAMOE_COMM_INLINE_MAX (bytes) overrides it, for measuring. */
#define MM_THR_INLINE_MAX ((size_t)4 << 10)

extern const mm_comm_vtable mm_thr_vtable;

thr_group *mm_thr_group_new(int size, double timeout);
void mm_thr_group_delete(thr_group *g);

static inline thr_group *thr_group_of(const mm_comm *c) {
    return (thr_group *)c->impl;
}

/* Rings every alive rank of c but the caller (a flag they all wait on has moved). */
static inline void thr_ring_peers(const mm_comm *c) {
    thr_group *g = thr_group_of(c);
    for (int p = 0; p < c->size; p++)
        if (p != c->rank && c->alive[p]) mm_doorbell_ring(&g->bells[p]);
}

MM_COMM_BACKEND_DECLARE(mm_thr);

#endif
