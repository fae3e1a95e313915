/* SPDX-License-Identifier: Apache-2.0 */
/* comm/threads/threads_group.c: life of a threads-backend group: its allocation (for a world,
 * threads_world.c, or a sub-group made by split) and the collective destruction of sub-groups.
 *
 * A group is one allocation shared by its ranks; each rank's mm_comm handle lives inside it, so a rank
 * that leaves early (removed by the elastic API) owns nothing that others must free. */
#include <stdlib.h>
#include <string.h>

#include "comm/threads/threads_internal.h"
#include "core/error.h"
#include "core/free_all.h"

const mm_comm_vtable mm_thr_vtable = MM_COMM_BACKEND_VTABLE("threads", MM_COMM_THREADS, mm_thr);

static void *aligned_zalloc(size_t bytes) {
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (p) memset(p, 0, rounded ? rounded : 64);
    return p;
}

thr_group *mm_thr_group_new(int size, double timeout) {
    thr_group *g = aligned_zalloc(sizeof *g);
    if (!g) return NULL;
    g->size = size;
    g->slots = aligned_zalloc((size_t)size * sizeof *g->slots);
    g->acks = aligned_zalloc((size_t)size * (size_t)size * sizeof *g->acks);
    g->comms = aligned_zalloc((size_t)size * sizeof *g->comms);
    g->bells = aligned_zalloc((size_t)size * sizeof *g->bells);
    /* Mailboxes: MM_THR_INLINE_MAX bytes each, but 2 MiB per group at most, so the inline capacity
     * shrinks for many ranks (4 KiB up to 16 ranks, 1 KiB for 32, 256 B for 64). */
    size_t boxes = (size_t)size * (size_t)size * 2;
    g->inline_max = ((size_t)2 << 20) / boxes - 64;
    size_t limit = MM_THR_INLINE_MAX;
    const char *env = getenv("MEGAMOE_COMM_INLINE_MAX");
    if (env && *env) limit = (size_t)strtoull(env, NULL, 10);
    if (g->inline_max > limit) g->inline_max = limit;
    g->inline_max &= ~(size_t)63;
    g->mailbox_stride = 64 + g->inline_max;
    g->mailboxes = aligned_zalloc(boxes * g->mailbox_stride);
    if (!g->slots || !g->acks || !g->comms || !g->bells || !g->mailboxes) {
        mm_thr_group_delete(g);
        return NULL;
    }
    for (int r = 0; r < size; r++) {
        mm_comm_init_common(&g->comms[r], &mm_thr_vtable, g, r, size, timeout);
        g->comms[r].bell = &g->bells[r];
    }
    return g;
}

void mm_thr_group_delete(thr_group *g) {
    if (!g) return;
    MM_FREE_ALL(g->slots, g->acks, g->comms, g->bells, g->mailboxes, g);
}

/* The first member allocates the group; one allgather over the parent hands its address to the
 * others (the ranks share one address space). */
mm_status mm_thr_create_group(mm_comm *c, const int *members, int n, int my_new_rank, mm_comm **out,
                              mm_error *err) {
    thr_group *mine = NULL;
    if (members[0] == c->rank) mine = mm_thr_group_new(n, c->timeout);
    thr_group *all[MM_COMM_MAX_RANKS];
    mm_status st = mm_comm_allgather(c, &mine, sizeof mine, all, err);
    if (st) {
        mm_thr_group_delete(mine);
        return st;
    }
    thr_group *g = all[members[0]];
    if (!g)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "rank %d could not allocate a group of %d ranks",
                       members[0], n);
    mm_comm *h = &g->comms[my_new_rank];
    h->timeout = c->timeout; /* each rank keeps its own setting */
    *out = h;
    return MM_OK;
}

mm_status mm_thr_split_node(mm_comm *c, mm_comm **out, mm_error *err) {
    /* All threads share this machine's memory: the node is everyone alive. */
    return mm_comm_split(c, 0, c->rank, out, err);
}

/* Collective over the alive members: a barrier guarantees nobody still uses the group, then the
 * lowest alive rank frees it once every other member has said it will not touch the group again. */
mm_status mm_thr_destroy(mm_comm *c, mm_error *err) {
    thr_group *g = thr_group_of(c);
    if (g->owned_by_launcher)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "mm_comm_free: the communicator of mm_comm_run_threads or of a world (mm_world_comm) belongs to "
            "the launcher");
    mm_status st = mm_comm_barrier(c, err);
    if (st) return mm_error_prefix(err, "mm_comm_free (the group is leaked)"), st;
    int leader = 0;
    while (!c->alive[leader]) leader++;
    if (c->rank != leader) {
        atomic_fetch_add_explicit(&g->departed.v, 1, memory_order_acq_rel);
        return MM_OK;
    }
    /* No doorbell here: a departing member must not touch the group after its increment (the leader
     * may free it at once), so it cannot ring; the leader polls. */
    mm_waiter w;
    mm_waiter_start_for(&w, c);
    w.bell = NULL;
    while (atomic_load_explicit(&g->departed.v, memory_order_acquire) < (uint64_t)(c->alive_count - 1))
        if (!mm_waiter_pause(&w))
            return mm_fail(err, MM_ERR_TIMEOUT,
                           "mm_comm_free: members did not leave within %g s (the group is leaked)",
                           c->timeout);
    mm_thr_group_delete(g);
    return MM_OK;
}
