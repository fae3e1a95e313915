/* SPDX-License-Identifier: Apache-2.0 */
/* comm/comm_internal.h: what the generic communicator layer and its backends share.
 *
 * The public functions (comm.c, symm.c, and one file per generic collective) check arguments, refuse
 * to run on a poisoned communicator and poison it after a timeout; the backends (threads/, mpi/) only
 * move bytes and wait. A backend provides a barrier and a byte alltoallv that both name missing ranks
 * on timeout; allgather, allreduce, agree and split are built on top of those, once, for every backend. */
#ifndef MEGAMOE_COMM_INTERNAL_H
#define MEGAMOE_COMM_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "megamoe/comm.h"

typedef struct mm_comm_vtable {
    const char *name;
    mm_comm_backend backend;
    mm_status (*barrier)(mm_comm *c, mm_error *err);
    mm_status (*alltoallv)(mm_comm *c, const void *send, const size_t *send_counts, const size_t *send_displs,
                           void *recv, const size_t *recv_counts, const size_t *recv_displs, mm_error *err);
    /* Collective over the alive ranks of c, after the generic split has agreed on the members of the
     * caller's group (members[0..n) are old ranks in new-rank order; the caller is
     * members[my_new_rank]). Every alive rank of c calls it once, whatever its group. */
    mm_status (*create_group)(mm_comm *c, const int *members, int n, int my_new_rank, mm_comm **out,
                              mm_error *err);
    mm_status (*split_node)(mm_comm *c, mm_comm **out, mm_error *err);
    mm_status (*destroy)(mm_comm *c, mm_error *err);
    mm_status (*symm_alloc)(mm_comm *c, size_t bytes, mm_symm **out, mm_error *err);
    mm_status (*symm_free)(mm_symm *s, mm_error *err);
    mm_status (*put)(mm_symm *s, int peer, size_t offset, const void *src, size_t bytes, mm_error *err);
    mm_status (*signal)(mm_symm *s, int peer, uint64_t add, mm_error *err);
    /* Acquire load of my counter for sender peer; may drive the backend's progress engine. */
    uint64_t (*signal_value)(mm_symm *s, int peer);
    void *(*peer_ptr)(mm_symm *s, int peer);
} mm_comm_vtable;

/* A backend names the functions of its vtable <prefix>_barrier, <prefix>_alltoallv, ... (prefix mm_thr,
 * mm_mpi): MM_COMM_BACKEND_DECLARE(prefix) declares them in the backend's header and
 * MM_COMM_BACKEND_VTABLE fills the backend's vtable with them, so the list of entry points and their
 * signatures stand once, here, beside the vtable. */
#define MM_COMM_BACKEND_DECLARE(prefix)                                                                      \
    mm_status prefix##_barrier(mm_comm *c, mm_error *err);                                                   \
    mm_status prefix##_alltoallv(mm_comm *c, const void *send, const size_t *send_counts,                    \
                                 const size_t *send_displs, void *recv, const size_t *recv_counts,           \
                                 const size_t *recv_displs, mm_error *err);                                  \
    mm_status prefix##_create_group(mm_comm *c, const int *members, int n, int my_new_rank, mm_comm **out,   \
                                    mm_error *err);                                                          \
    mm_status prefix##_split_node(mm_comm *c, mm_comm **out, mm_error *err);                                 \
    mm_status prefix##_destroy(mm_comm *c, mm_error *err);                                                   \
    mm_status prefix##_symm_alloc(mm_comm *c, size_t bytes, mm_symm **out, mm_error *err);                   \
    mm_status prefix##_symm_free(mm_symm *s, mm_error *err);                                                 \
    mm_status prefix##_put(mm_symm *s, int peer, size_t offset, const void *src, size_t bytes,               \
                           mm_error *err);                                                                   \
    mm_status prefix##_signal(mm_symm *s, int peer, uint64_t add, mm_error *err);                            \
    uint64_t prefix##_signal_value(mm_symm *s, int peer);                                                    \
    void *prefix##_peer_ptr(mm_symm *s, int peer)

#define MM_COMM_BACKEND_VTABLE(name_, backend_, prefix)                                                      \
    {                                                                                                        \
        .name = name_, .backend = backend_, .barrier = prefix##_barrier, .alltoallv = prefix##_alltoallv,    \
        .create_group = prefix##_create_group, .split_node = prefix##_split_node,                            \
        .destroy = prefix##_destroy, .symm_alloc = prefix##_symm_alloc, .symm_free = prefix##_symm_free,     \
        .put = prefix##_put, .signal = prefix##_signal, .signal_value = prefix##_signal_value,               \
        .peer_ptr = prefix##_peer_ptr                                                                        \
    }

struct mm_comm {
    const mm_comm_vtable *vt;
    void *impl; /* backend state */
    int rank, size;
    double timeout; /* seconds, per wait */
    uint64_t epoch; /* collectives entered by this rank: numbers flags and message tags */
    int poisoned;   /* set by a timeout, cleared by mm_comm_set_survivors */
    char poison_reason[160];
    int alive_count;
    unsigned char alive[MM_COMM_MAX_RANKS];
    int spin_rounds; /* 0 when this machine runs more of our ranks than it has cores: yield at once */
    struct mm_doorbell *bell; /* rung by every peer that may end one of my waits; NULL: poll and sleep */
};

struct mm_symm {
    mm_comm *comm;
    size_t bytes;
    void *local;
    void *impl;
};

/* Fills the fields every backend sets the same way (all ranks alive, timeout from the environment). */
void mm_comm_init_common(mm_comm *c, const mm_comm_vtable *vt, void *impl, int rank, int size,
                         double timeout);

/* MEGAMOE_COMM_TIMEOUT in seconds when set and valid (> 0), else 60. */
double mm_comm_default_timeout(void);

/* ---- waiting ------------------------------------------------------------------------------------
 * Spin briefly, then yield, then sleep in growing steps: several ranks per core must let the rank
 * they wait for run, while a short wait must not pay for waking a sleeping thread (measured:
 * docs/comm.md, 'Measured wait costs'). */
typedef struct mm_waiter {
    uint64_t rounds, sleeps, spin_rounds;
    double start, deadline;
    struct mm_doorbell *bell; /* the waiting rank's doorbell, or NULL */
    int armed;                /* registered as a sleeper on bell (mm_waiter_end undoes it) */
    uint32_t seen;            /* the bell's count when armed */
} mm_waiter;

/* A rank's doorbell (threads backend): after the yield phase a waiter sleeps in the kernel (futex) and
 * is woken by the write it waits for, instead of polling in sleeps of up to 200 us: no latency from the
 * sleep steps, and no periodic wake-ups stealing the cores from the ranks that compute. Every write
 * that can end a wait of the bell's owner (signal, barrier flag, mailbox, acknowledgement) rings after
 * the write; a ring costs a fence and a load unless someone sleeps (protocol in comm/wait.c). */
typedef struct mm_doorbell {
    _Alignas(64) _Atomic uint32_t count;
    _Atomic uint32_t sleepers;
} mm_doorbell;

/* After the write (release) that may end a wait of the bell's owner. */
void mm_doorbell_ring(mm_doorbell *bell);

void mm_waiter_start(mm_waiter *w, double timeout);
/* With c's timeout and c's spinning policy. */
void mm_waiter_start_for(mm_waiter *w, const mm_comm *c);
/* Spin rounds for `ranks_here` ranks sharing this machine: none when they outnumber the cores, since
 * a spinning rank then holds the core that the rank it waits for needs. */
int mm_comm_spin_rounds_for(int ranks_here);
/* Pauses once; returns 0 when the deadline has passed (the caller then reports a timeout). */
int mm_waiter_pause(mm_waiter *w);
/* Call when the awaited condition was seen (a pause may have registered the waiter on its doorbell). */
void mm_waiter_end(mm_waiter *w);

/* Formats "<op>: rank 3 did not arrive within 0.2 s" (or "ranks 1, 3 did not ...") for the ranks with
 * missing[r] != 0, returns MM_ERR_TIMEOUT. */
mm_status mm_comm_fail_missing(mm_comm *c, mm_error *err, const char *op, const unsigned char *missing);

/* Start of every public collective: fails fast (MM_ERR_PEER) on a poisoned communicator. */
mm_status mm_comm_enter(mm_comm *c, const char *op, mm_error *err);
/* End of every public collective: copies the backend's local error to err and poisons c on timeout. */
mm_status mm_comm_leave(mm_comm *c, mm_status st, const mm_error *local, mm_error *err);

#endif
