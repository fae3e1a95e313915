/* SPDX-License-Identifier: Apache-2.0 */
/* comm/symm.c: the public symmetric-buffer API: collective allocation, put, signal and the waits.
 *
 * Arguments are checked here (peer alive, offset + bytes within the buffer) so that the backends only
 * copy. Waiting is generic: poll the backend's acquire load of the counter with the shared
 * spin-yield-sleep policy, and name the senders still missing when the timeout passes. */
#include <stdint.h>
#include <stdio.h>

#include "comm/comm_internal.h"
#include "core/error.h"

mm_status mm_symm_alloc(mm_comm *comm, size_t bytes, mm_symm **out, mm_error *err) {
    if (out) *out = NULL;
    mm_status st = mm_comm_enter(comm, "symm_alloc", err);
    if (st) return st;
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "symm_alloc: out is NULL");
    mm_error local = {MM_OK, ""};
    /* One size everywhere, or a peer's put could run past the end of my part: agree on the largest
     * and smallest request first (max of (bytes, -bytes)), so a mismatch fails on every rank. */
    int64_t here = bytes > (size_t)INT64_MAX ? INT64_MAX : (int64_t)bytes;
    int64_t range[2] = {here, -here};
    st = mm_comm_allreduce_i64(comm, range, 2, MM_REDUCE_MAX, &local);
    if (st == MM_OK && range[0] != -range[1])
        st = mm_fail(&local, MM_ERR_INVALID_ARGUMENT,
                     "the ranks asked for %lld to %lld bytes (a symmetric buffer has the same size on "
                     "every rank)",
                     (long long)-range[1], (long long)range[0]);
    if (st == MM_OK) st = comm->vt->symm_alloc(comm, bytes, out, &local);
    if (st) mm_error_prefix(&local, "symm_alloc of %zu bytes", bytes);
    return mm_comm_leave(comm, st, &local, err);
}

mm_status mm_symm_free(mm_symm *symm, mm_error *err) {
    if (!symm) return MM_OK;
    mm_comm *comm = symm->comm;
    mm_error local = {MM_OK, ""};
    mm_status st = comm->vt->symm_free(symm, &local);
    if (st) mm_error_prefix(&local, "symm_free");
    return mm_comm_leave(comm, st, &local, err);
}

size_t mm_symm_size(const mm_symm *symm) {
    return symm ? symm->bytes : 0;
}
void *mm_symm_local(mm_symm *symm) {
    return symm ? symm->local : NULL;
}

void *mm_symm_peer_ptr(mm_symm *symm, int peer) {
    if (!symm || peer < 0 || peer >= symm->comm->size) return NULL;
    return symm->comm->vt->peer_ptr(symm, peer);
}

static mm_status check_peer(const mm_symm *symm, const char *op, int peer, mm_error *err) {
    if (!symm) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: symm is NULL", op);
    const mm_comm *c = symm->comm;
    if (peer < 0 || peer >= c->size)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: peer = %d is outside [0, %d)", op, peer, c->size);
    if (!c->alive[peer])
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: peer = %d was removed from the communicator", op,
                       peer);
    return MM_OK;
}

mm_status mm_symm_put(mm_symm *symm, int peer, size_t offset, const void *src, size_t bytes, mm_error *err) {
    mm_status st = check_peer(symm, "symm_put", peer, err);
    if (st) return st;
    if (offset > symm->bytes || bytes > symm->bytes - offset)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "symm_put: offset %zu + bytes %zu exceeds the buffer size %zu", offset, bytes,
                       symm->bytes);
    if (bytes == 0) return MM_OK;
    if (!src) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "symm_put: src is NULL with bytes = %zu", bytes);
    return symm->comm->vt->put(symm, peer, offset, src, bytes, err);
}

mm_status mm_symm_signal(mm_symm *symm, int peer, uint64_t add, mm_error *err) {
    mm_status st = check_peer(symm, "symm_signal", peer, err);
    if (st) return st;
    return symm->comm->vt->signal(symm, peer, add, err);
}

uint64_t mm_symm_signal_value(mm_symm *symm, int peer) {
    if (!symm || peer < 0 || peer >= symm->comm->size) return 0;
    return symm->comm->vt->signal_value(symm, peer);
}

mm_status mm_symm_wait(mm_symm *symm, int peer, uint64_t value, mm_error *err) {
    mm_status st = check_peer(symm, "symm_wait", peer, err);
    if (st) return st;
    mm_comm *c = symm->comm;
    st = mm_comm_enter(c, "symm_wait", err);
    if (st) return st;
    mm_waiter w;
    mm_waiter_start_for(&w, c);
    while (c->vt->signal_value(symm, peer) < value) {
        if (!mm_waiter_pause(&w)) {
            unsigned char missing[MM_COMM_MAX_RANKS] = {0};
            missing[peer] = 1;
            mm_error local = {MM_OK, ""};
            char op[96];
            snprintf(op, sizeof op, "symm_wait for signal >= %llu", (unsigned long long)value);
            st = mm_comm_fail_missing(c, &local, op, missing);
            return mm_comm_leave(c, st, &local, err);
        }
    }
    mm_waiter_end(&w);
    return MM_OK;
}

mm_status mm_symm_wait_all(mm_symm *symm, uint64_t value, mm_error *err) {
    if (!symm) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "symm_wait_all: symm is NULL");
    mm_comm *c = symm->comm;
    mm_status st = mm_comm_enter(c, "symm_wait_all", err);
    if (st) return st;
    unsigned char missing[MM_COMM_MAX_RANKS] = {0};
    int left = 0;
    for (int p = 0; p < c->size; p++) left += missing[p] = c->alive[p];
    mm_waiter w;
    mm_waiter_start_for(&w, c);
    for (;;) {
        for (int p = 0; p < c->size; p++)
            if (missing[p] && c->vt->signal_value(symm, p) >= value) {
                missing[p] = 0;
                left--;
            }
        if (!left) {
            mm_waiter_end(&w);
            return MM_OK;
        }
        if (!mm_waiter_pause(&w)) break;
    }
    mm_error local = {MM_OK, ""};
    char op[96];
    snprintf(op, sizeof op, "symm_wait_all for signals >= %llu", (unsigned long long)value);
    st = mm_comm_fail_missing(c, &local, op, missing);
    return mm_comm_leave(c, st, &local, err);
}
